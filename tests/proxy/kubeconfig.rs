//! watchmux connected from kubeconfigs as client-go reads them: `KUBECONFIG` listing several
//! files merged by client-go's rules (the first file to define a name wins it, the first
//! non-empty current-context wins, relative paths resolve against the folder of the file that
//! names them); the cluster's `proxy-url` (an HTTP CONNECT proxy and a SOCKS5 proxy run here,
//! each resolving the upstream's name `kube.test`, which only they know, to 127.0.0.1; an HTTP
//! proxy taking an `http://` upstream's requests in absolute form) and `HTTPS_PROXY`;
//! `disable-compression` on the wire.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::TestProxy;
use crate::pki::{Ca, b64, kubeconfig, write_kubeconfig};
use http::{StatusCode, Version};
use kube_sim::Simulator;
use kube_sim::tls::SimTls;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use watchmux::upstream::Upstream;

/// A TLS simulator serving `server`'s certificate, requiring a client certificate from
/// `client_ca` and the bearer token `token`.
async fn tls_sim(server: &crate::pki::Leaf, client_ca: &Ca, token: &str) -> Simulator {
    let tls = SimTls {
        cert_pem: server.cert_pem.clone(),
        key_pem: server.key_pem.clone(),
        client_ca_pem: Some(client_ca.pem.clone()),
        bearer_token: Some(token.to_string()),
    };
    crate::common::sim_with(|c| c.tls = Some(tls)).await
}

fn write_json(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// Runs `watchmux serve` (caching namespaces, on a free port) with `env`, until it serves the
/// namespaces from its cache (30 s at most); stops it.
async fn serve_until_cached(dir: &Path, env: &[(&str, &std::ffi::OsStr)]) {
    let port = crate::common::dead_port();
    let config = dir.join("watchmux.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[[cache.resources]]\nversion = \"v1\"\nresource = \"namespaces\"\n"
        ),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchmux"));
    cmd.args(["serve", "--config"])
        .arg(&config)
        .env("WATCHMUX_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for var in [
        "KUBECONFIG",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let url = format!("http://127.0.0.1:{port}/api/v1/namespaces?resourceVersion=0");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(url.parse().unwrap()).await
            && r.status() == StatusCode::OK
        {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().await.unwrap();
            panic!(
                "watchmux exited ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "watchmux did not serve the cache"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().await.unwrap();
}

/// `KUBECONFIG=one:missing:two`: the context and its user come from `one` (whose client
/// certificate paths are relative to `one`'s folder), its cluster from `two` (whose CA path is
/// relative to `two`'s folder); `two`'s own user of the same name (a wrong token) is not merged
/// in, `one`'s empty current-context gives way to `two`'s, and the missing file is skipped.
#[tokio::test]
async fn kubeconfig_files_merge_as_in_client_go() {
    let ca = Ca::new("test-ca");
    let me = ca.client("watchmux", &["system:masters"], false);
    let sim = tls_sim(&ca.server(), &ca, "right-token").await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("one/certs")).unwrap();
    std::fs::write(d.join("one/certs/me.crt"), &me.cert_pem).unwrap();
    std::fs::write(d.join("one/certs/me.key"), &me.key_pem).unwrap();
    std::fs::create_dir_all(d.join("two/pki")).unwrap();
    std::fs::write(d.join("two/pki/ca.crt"), &ca.pem).unwrap();
    let one = json!({
        "apiVersion": "v1", "kind": "Config",
        "current-context": "",
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "me"}}],
        "users": [{"name": "me", "user": {
            "client-certificate": "certs/me.crt",
            "client-key": "certs/me.key",
            "token": "right-token",
        }}],
    });
    let two = json!({
        "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {
            "server": sim.url(),
            "certificate-authority": "pki/ca.crt",
        }}],
        "users": [{"name": "me", "user": {"token": "wrong-token"}}],
        "contexts": [{"name": "sim", "context": {"cluster": "elsewhere", "user": "nobody"}}],
    });
    write_json(&d.join("one/config"), &one);
    write_json(&d.join("two/config"), &two);
    let list = std::env::join_paths([
        d.join("one/config"),
        d.join("missing/config"),
        d.join("two/config"),
    ])
    .unwrap();
    serve_until_cached(d, &[("KUBECONFIG", list.as_os_str())]).await;

    // The same kubeconfigs in the other order: `two`'s context (cluster "elsewhere") wins,
    // and the error names the files and entries.
    let list = std::env::join_paths([d.join("two/config"), d.join("one/config")]).unwrap();
    let config = d.join("watchmux.toml");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchmux"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("KUBECONFIG", &list)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("watchmux must refuse to start")
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"context "sim" (cluster "elsewhere", user "nobody" (not defined: no credentials)): cluster "elsewhere" is not defined (it has sim)"#),
        "{err}"
    );
}

/// A kubeconfig in another folder than watchmux's working directory, naming its CA, client
/// certificate and token file by paths relative to its own folder.
#[tokio::test]
async fn relative_paths_resolve_against_the_kubeconfig_folder() {
    let ca = Ca::new("test-ca");
    let me = ca.client("watchmux", &["system:masters"], false);
    let sim = tls_sim(&ca.server(), &ca, "file-token").await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("deep/er");
    std::fs::create_dir_all(d.join("pki")).unwrap();
    std::fs::write(d.join("pki/ca.crt"), &ca.pem).unwrap();
    std::fs::write(d.join("pki/me.crt"), &me.cert_pem).unwrap();
    std::fs::write(d.join("pki/me.key"), &me.key_pem).unwrap();
    std::fs::write(dir.path().join("deep/token"), "file-token\n").unwrap();
    let kc = kubeconfig(
        &[(
            "sim",
            json!({"server": sim.url(), "certificate-authority": "pki/ca.crt"}),
            json!({
                "client-certificate": "pki/me.crt",
                "client-key": "./pki/me.key",
                "tokenFile": "../token",
                "token": "ignored-as-tokenFile-wins",
            }),
        )],
        Some("sim"),
    );
    write_json(&d.join("config"), &kc);
    let up = watchmux::upstream::Upstream::new(&watchmux::config::UpstreamConfig {
        kubeconfig: Some(d.join("config")),
        ..Default::default()
    })
    .expect("upstream client");
    let r = up
        .get("/api/v1/namespaces", "application/json")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // The same with the CA given as data: the client certificate alone still resolves.
    let kc = kubeconfig(
        &[(
            "sim",
            json!({"server": sim.url(), "certificate-authority-data": b64(&ca.pem)}),
            json!({"client-certificate": "pki/me.crt", "client-key": "pki/me.key", "token": "file-token"}),
        )],
        Some("sim"),
    );
    write_json(&d.join("config"), &kc);
    let up = watchmux::upstream::Upstream::new(&watchmux::config::UpstreamConfig {
        kubeconfig: Some(d.join("config")),
        ..Default::default()
    })
    .expect("upstream client");
    let r = up
        .get("/api/v1/namespaces", "application/json")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

// ---- proxies run by the tests ------------------------------------------------------------------

/// The name only the test proxies know: they connect it to 127.0.0.1.
const UPSTREAM_NAME: &str = "kube.test";

/// `host:port` as the test proxies connect it: `kube.test` is 127.0.0.1.
async fn dial(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let host = if host == UPSTREAM_NAME {
        "127.0.0.1"
    } else {
        host
    };
    TcpStream::connect((host, port)).await
}

/// What a test proxy saw: each CONNECT or SOCKS5 request, and the bytes clients sent it in
/// absolute-form (forwarded) exchanges.
#[derive(Default)]
struct Seen {
    requests: Vec<String>,
    forwarded: Vec<u8>,
}

/// A proxy on 127.0.0.1 run by a test; stops (with its connections) when dropped.
struct ProxyServer {
    addr: std::net::SocketAddr,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ProxyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ProxyServer {
    fn requests(&self) -> Vec<String> {
        self.seen.lock().requests.clone()
    }

    fn forwarded(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().forwarded).into_owned()
    }

    /// An HTTP proxy: CONNECT tunnels, and requests in absolute form relayed as they are (the
    /// simulator takes absolute-form targets). With `auth`, a request without that
    /// `Proxy-Authorization` is answered 407.
    async fn http(auth: Option<&str>) -> ProxyServer {
        let auth = auth.map(str::to_string);
        Self::start(move |conn, seen| Box::pin(http_proxy_conn(conn, seen, auth.clone()))).await
    }

    /// A SOCKS5 proxy (RFC 1928, CONNECT only), wanting `user` (name, password) if given.
    async fn socks5(user: Option<(&str, &str)>) -> ProxyServer {
        let user = user.map(|(u, p)| (u.to_string(), p.to_string()));
        Self::start(move |conn, seen| Box::pin(socks5_conn(conn, seen, user.clone()))).await
    }

    async fn start<F>(serve: F) -> ProxyServer
    where
        F: Fn(
                TcpStream,
                Arc<Mutex<Seen>>,
            ) -> std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>
            + Send
            + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((c, _)) = listener.accept().await {
                conns.spawn(serve(c, s.clone()));
            }
        });
        ProxyServer { addr, seen, task }
    }
}

use std::future::Future;

/// Reads up to the end of a request head (64 KiB at most): the head and what followed it.
async fn read_head(c: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > 65536 {
            return Err(std::io::Error::other("head too long"));
        }
        let n = c.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn split_host_port(authority: &str) -> (String, u16) {
    let (h, p) = authority.rsplit_once(':').unwrap();
    (h.to_string(), p.parse().unwrap())
}

async fn http_proxy_conn(
    mut c: TcpStream,
    seen: Arc<Mutex<Seen>>,
    auth: Option<String>,
) -> std::io::Result<()> {
    let (head, rest) = read_head(&mut c).await?;
    let line = head.lines().next().unwrap_or_default().to_string();
    seen.lock().requests.push(head.clone());
    if let Some(want) = &auth
        && header(&head, "proxy-authorization") != Some(want.as_str())
    {
        c.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            .await?;
        return Ok(());
    }
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method == "CONNECT" {
        let (host, port) = split_host_port(target);
        let mut up = dial(&host, port).await?;
        c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        up.write_all(&rest).await?;
        tokio::io::copy_bidirectional(&mut c, &mut up).await?;
        return Ok(());
    }
    // Absolute form: `GET http://host:port/path HTTP/1.1`; every request of this connection
    // goes to that upstream (watchmux has one).
    let authority = target
        .strip_prefix("http://")
        .and_then(|t| t.split('/').next())
        .unwrap_or_default();
    let (host, port) = split_host_port(authority);
    let up = dial(&host, port).await?;
    {
        let mut s = seen.lock();
        s.forwarded.extend_from_slice(head.as_bytes());
        s.forwarded.extend_from_slice(&rest);
    }
    let (mut up_r, mut up_w) = up.into_split();
    let (mut c_r, mut c_w) = c.into_split();
    up_w.write_all(head.as_bytes()).await?;
    up_w.write_all(&rest).await?;
    let to_upstream = async {
        let mut buf = [0u8; 8192];
        loop {
            let n = c_r.read(&mut buf).await?;
            if n == 0 {
                return std::io::Result::Ok(());
            }
            seen.lock().forwarded.extend_from_slice(&buf[..n]);
            up_w.write_all(&buf[..n]).await?;
        }
    };
    tokio::select! {
        r = to_upstream => r,
        r = tokio::io::copy(&mut up_r, &mut c_w) => r.map(drop),
    }
}

async fn socks5_conn(
    mut c: TcpStream,
    seen: Arc<Mutex<Seen>>,
    user: Option<(String, String)>,
) -> std::io::Result<()> {
    let mut b = [0u8; 2];
    c.read_exact(&mut b).await?;
    assert_eq!(b[0], 5, "SOCKS version");
    let mut methods = vec![0u8; b[1] as usize];
    c.read_exact(&mut methods).await?;
    let mut record = String::new();
    if let Some((u, p)) = &user {
        if !methods.contains(&2) {
            c.write_all(&[5, 0xFF]).await?;
            return Ok(());
        }
        c.write_all(&[5, 2]).await?;
        // RFC 1929: VER ULEN UNAME PLEN PASSWD
        let mut v = [0u8; 2];
        c.read_exact(&mut v).await?;
        let mut name = vec![0u8; v[1] as usize];
        c.read_exact(&mut name).await?;
        let mut plen = [0u8; 1];
        c.read_exact(&mut plen).await?;
        let mut pass = vec![0u8; plen[0] as usize];
        c.read_exact(&mut pass).await?;
        let ok = name == u.as_bytes() && pass == p.as_bytes();
        c.write_all(&[1, if ok { 0 } else { 1 }]).await?;
        if !ok {
            return Ok(());
        }
        record.push_str(&format!("user {u} "));
    } else {
        c.write_all(&[5, 0]).await?;
    }
    // VER CMD RSV ATYP DST.ADDR DST.PORT
    let mut req = [0u8; 4];
    c.read_exact(&mut req).await?;
    assert_eq!(req[1], 1, "CONNECT");
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            c.read_exact(&mut a).await?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            c.read_exact(&mut len).await?;
            let mut name = vec![0u8; len[0] as usize];
            c.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        _ => {
            let mut a = [0u8; 16];
            c.read_exact(&mut a).await?;
            std::net::Ipv6Addr::from(a).to_string()
        }
    };
    let mut port = [0u8; 2];
    c.read_exact(&mut port).await?;
    let port = u16::from_be_bytes(port);
    record.push_str(&format!("CONNECT {host}:{port}"));
    seen.lock().requests.push(record);
    let mut up = dial(&host, port).await?;
    c.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
    tokio::io::copy_bidirectional(&mut c, &mut up).await?;
    Ok(())
}

// ---- proxy-url, HTTPS_PROXY, disable-compression ----------------------------------------------

/// A TLS simulator whose certificate names only `kube.test`, wanting the bearer token `t`.
async fn named_tls_sim(ca: &Ca) -> Simulator {
    let server = ca.server_for(&[UPSTREAM_NAME], false);
    let tls = SimTls {
        cert_pem: server.cert_pem,
        key_pem: server.key_pem,
        client_ca_pem: None,
        bearer_token: Some("t".to_string()),
    };
    crate::common::sim_with(|c| c.tls = Some(tls)).await
}

/// A kubeconfig written in `dir` that reaches `sim` by its name `kube.test` (TLS verified with
/// `ca`, token `t`) through `proxy_url`; its path.
fn through_proxy(dir: &Path, ca: &Ca, sim: &Simulator, proxy_url: &str) -> std::path::PathBuf {
    let kc = kubeconfig(
        &[(
            "sim",
            json!({
                "server": named_url(sim),
                "certificate-authority-data": b64(&ca.pem),
                "proxy-url": proxy_url,
            }),
            json!({"token": "t"}),
        )],
        Some("sim"),
    );
    write_kubeconfig(dir, &kc)
}

/// The simulator's URL with its host replaced by `kube.test`.
fn named_url(sim: &Simulator) -> String {
    sim.url().replace("127.0.0.1", UPSTREAM_NAME)
}

/// watchmux caching the test resources from `kubeconfig`, synced.
async fn proxy_from(kubeconfig: &Path) -> TestProxy {
    let p = crate::exec_plugin::proxy_from(kubeconfig, |_| {}).await;
    crate::exec_plugin::wait_ready(&p).await;
    p
}

fn upstream_from(kubeconfig: &Path) -> Upstream {
    Upstream::new(&watchmux::config::UpstreamConfig {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        ..Default::default()
    })
    .expect("upstream client")
}

/// `proxy-url: http://…` with credentials: the reflectors' and the pass-through pools reach a
/// TLS upstream only through CONNECT tunnels (its name resolves nowhere else), TLS verified
/// with the upstream's own name, HTTP/2 negotiated through the tunnel for the reflectors.
#[tokio::test]
async fn proxy_url_http_connect_tunnel() {
    let ca = Ca::new("test-ca");
    let sim = named_tls_sim(&ca).await;
    let basic = format!("Basic {}", b64("proxy user:p@ss:word"));
    let proxy = ProxyServer::http(Some(&basic)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = through_proxy(
        dir.path(),
        &ca,
        &sim,
        &format!("http://proxy%20user:p%40ss:word@{}", proxy.addr),
    );
    let p = proxy_from(&path).await;
    // Pass-through (services are not cached) goes through the proxy too.
    let (status, body) =
        crate::common::get_json(&format!("{}/api/v1/namespaces/default/services", p.url)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let port = sim.url().rsplit(':').next().unwrap().to_string();
    let connects = proxy.requests();
    assert!(connects.len() >= 2, "{connects:?}");
    for head in &connects {
        assert!(
            head.starts_with(&format!("CONNECT {UPSTREAM_NAME}:{port} HTTP/1.1\r\n")),
            "{head}"
        );
        assert_eq!(
            header(head, "proxy-authorization"),
            Some(basic.as_str()),
            "{head}"
        );
    }
    let up = upstream_from(&path);
    let r = up
        .watch_client()
        .get("/version", "application/json")
        .await
        .unwrap();
    assert_eq!((r.status(), r.version()), (StatusCode::OK, Version::HTTP_2));

    // Wrong credentials: the proxy's 407 is a connect error that names the proxy.
    let path = through_proxy(
        dir.path(),
        &ca,
        &sim,
        &format!("http://someone:else@{}", proxy.addr),
    );
    let e = upstream_from(&path)
        .get("/version", "application/json")
        .await
        .unwrap_err();
    let s = e.to_string();
    assert!(e.is_connect(), "{e:?}");
    assert!(
        s.contains(&format!(
            "through the proxy http://{} (proxy-url, as user \"someone\")",
            proxy.addr
        )),
        "{s}"
    );
    assert!(s.contains("proxy authorization required"), "{s}");
}

/// `proxy-url: socks5://…` with a user and password: the upstream's name goes to the proxy,
/// which resolves it; TLS inside the tunnel as above.
#[tokio::test]
async fn proxy_url_socks5() {
    let ca = Ca::new("test-ca");
    let sim = named_tls_sim(&ca).await;
    let proxy = ProxyServer::socks5(Some(("sock", "s3cret"))).await;
    let dir = tempfile::tempdir().unwrap();
    let path = through_proxy(
        dir.path(),
        &ca,
        &sim,
        &format!("socks5://sock:s3cret@{}", proxy.addr),
    );
    let p = proxy_from(&path).await;
    let (status, body) =
        crate::common::get_json(&format!("{}/api/v1/namespaces/default/services", p.url)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let port = sim.url().rsplit(':').next().unwrap().to_string();
    let seen = proxy.requests();
    assert!(!seen.is_empty());
    for r in &seen {
        assert_eq!(r, &format!("user sock CONNECT {UPSTREAM_NAME}:{port}"));
    }
    // A SOCKS proxy that is not there: a connect error naming it.
    let dead = crate::common::dead_port();
    let path = through_proxy(dir.path(), &ca, &sim, &format!("socks5://127.0.0.1:{dead}"));
    let e = upstream_from(&path)
        .get("/version", "application/json")
        .await
        .unwrap_err();
    assert!(e.is_connect() && !e.is_tls(), "{e:?}");
    let s = e.to_string();
    assert!(
        s.contains(&format!(
            "through the proxy socks5://127.0.0.1:{dead} (proxy-url): cannot connect to the proxy"
        )),
        "{s}"
    );
    assert!(s.contains("Connection refused"), "{s}");
}

/// An `http://` upstream through `proxy-url`: requests in absolute form, each with the
/// proxy's credentials; with `disable-compression`, none of watchmux's own requests (the
/// reflectors' lists and watches) asks for gzip.
#[tokio::test]
async fn forward_proxy_and_disable_compression_on_the_wire() {
    let sim = crate::common::sim_with(|_| {}).await;
    let basic = format!("Basic {}", b64("fwd:pw"));
    let proxy = ProxyServer::http(Some(&basic)).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        &[(
            "sim",
            json!({
                "server": named_url(&sim),
                "proxy-url": format!("http://fwd:pw@{}", proxy.addr),
                "disable-compression": true,
            }),
            json!({}),
        )],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    let _p = proxy_from(&path).await;
    // Synced: the lists went through; the reflectors' watches follow them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !proxy.forwarded().contains("watch=") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no watch went through the proxy: {}",
            proxy.forwarded()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wire = proxy.forwarded();
    let heads: Vec<&str> = wire
        .split("\r\n\r\n")
        .filter(|h| h.starts_with("GET "))
        .collect();
    assert!(heads.len() >= 4, "{wire}");
    let origin = named_url(&sim);
    for h in &heads {
        assert!(h.starts_with(&format!("GET {origin}/")), "{h}");
        assert_eq!(
            header(h, "proxy-authorization"),
            Some(basic.as_str()),
            "{h}"
        );
        assert_eq!(header(h, "accept-encoding"), None, "{h}");
    }
}

/// No `proxy-url`: `HTTPS_PROXY` carries the connections (`watchmux serve`, whose environment
/// this is), as client-go's default transport takes it.
#[tokio::test]
async fn https_proxy_from_the_environment() {
    let ca = Ca::new("test-ca");
    let sim = named_tls_sim(&ca).await;
    let proxy = ProxyServer::http(None).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        &[(
            "sim",
            json!({"server": named_url(&sim), "certificate-authority-data": b64(&ca.pem)}),
            json!({"token": "t"}),
        )],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    let proxy_url = format!("http://{}", proxy.addr);
    serve_until_cached(
        dir.path(),
        &[
            ("KUBECONFIG", path.as_os_str()),
            ("HTTPS_PROXY", proxy_url.as_ref()),
        ],
    )
    .await;
    let port = sim.url().rsplit(':').next().unwrap().to_string();
    assert!(
        proxy
            .requests()
            .iter()
            .any(|h| h.starts_with(&format!("CONNECT {UPSTREAM_NAME}:{port} "))),
        "{:?}",
        proxy.requests()
    );
}
