//! watchmux in front of a TLS upstream (the simulator behind rustls, with certificates made here
//! by rcgen), connected from a generated kubeconfig: client-certificate and bearer-token
//! upstreams, token file rotation, named contexts, insecure-skip-tls-verify, `KUBECONFIG`, and the
//! failures (bad CA, expired certificates, wrong token) that must give a clear error and a
//! not-ready cache, never a crash.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{TestProxy, proxy_with};
use crate::pki::{Ca, Leaf, b64, kubeconfig, write_kubeconfig};
use http::{Method, StatusCode, Version};
use kube_sim::Simulator;
use kube_sim::tls::SimTls;
use parking_lot::Mutex;
use serde_json::{Value, json};
use watchmux::upstream::Upstream;

/// A TLS simulator serving `server`, requiring a client certificate from `client_ca` and/or
/// `token` when given.
async fn tls_sim(server: &Leaf, client_ca: Option<&Ca>, token: Option<&str>) -> Simulator {
    tls_sim_with(server, client_ca, token, |_| {}).await
}

/// [`tls_sim`], its config adjusted by `f`.
async fn tls_sim_with(
    server: &Leaf,
    client_ca: Option<&Ca>,
    token: Option<&str>,
    f: impl FnOnce(&mut kube_sim::SimConfig),
) -> Simulator {
    let tls = SimTls {
        cert_pem: server.cert_pem.clone(),
        key_pem: server.key_pem.clone(),
        client_ca_pem: client_ca.map(|c| c.pem.clone()),
        bearer_token: token.map(str::to_string),
    };
    crate::common::sim_with(|c| {
        c.tls = Some(tls);
        f(c);
    })
    .await
}

/// A kubeconfig in `dir` for `sim` (its certificate from `ca`) with the token `t`.
fn token_kubeconfig(dir: &Path, sim: &Simulator, ca: &Ca) -> std::path::PathBuf {
    let kc = kubeconfig(
        &[("sim", cluster(sim, ca), json!({"token": "t"}))],
        Some("sim"),
    );
    write_kubeconfig(dir, &kc)
}

async fn proxy_from(kubeconfig: &Path, context: Option<&str>) -> TestProxy {
    proxy_with(|c| {
        c.upstream.kubeconfig = Some(kubeconfig.to_path_buf());
        c.upstream.context = context.map(str::to_string);
    })
    .await
}

async fn wait_ready(p: &TestProxy) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !p.proxy.ready() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watchmux did not sync within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An upstream client for a kubeconfig.
fn upstream(kubeconfig: &Path, context: Option<&str>) -> Upstream {
    Upstream::new(&watchmux::config::UpstreamConfig {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        context: context.map(str::to_string),
        ..Default::default()
    })
    .expect("upstream client")
}

fn cluster(sim: &Simulator, ca: &Ca) -> Value {
    json!({"server": sim.url(), "certificate-authority-data": b64(&ca.pem)})
}

/// Log lines written while the guard lives (current-thread runtime: every task runs here).
#[derive(Clone, Default)]
pub(crate) struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

impl Logs {
    pub(crate) fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let sub = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        let guard = tracing::subscriber::set_default(sub);
        (logs, guard)
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }

    /// Waits up to 10 s for a line containing every one of `parts`; returns it.
    pub(crate) async fn wait_for(&self, parts: &[&str]) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(l) = self
                .text()
                .lines()
                .find(|l| parts.iter().all(|p| l.contains(p)))
            {
                return l.to_string();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no log line with {parts:?} in:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// watchmux is up but not ready: not synced, cached reads answer 429, `/readyz` is not OK, and
/// it keeps answering (no crash).
async fn assert_not_ready(p: &TestProxy) {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!p.proxy.ready(), "must not be ready");
    let (status, body) =
        crate::common::get_json(&format!("{}/api/v1/pods?resourceVersion=0", p.url)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let (status, _, _) =
        crate::common::request(Method::GET, &format!("{}/readyz", p.url), &[], "").await;
    assert_ne!(status, StatusCode::OK, "/readyz must fail while not synced");
}

#[tokio::test]
async fn client_certificate_upstream_from_kubeconfig_files() {
    let ca = Ca::new("test-ca");
    let sim = tls_sim(&ca.server(), Some(&ca), None).await;
    let me = ca.client("watchmux", &["system:masters"], false);
    let dir = tempfile::tempdir().unwrap();
    // Relative paths are relative to the kubeconfig's directory, as in kubectl.
    std::fs::write(dir.path().join("ca.crt"), &ca.pem).unwrap();
    std::fs::write(dir.path().join("me.crt"), &me.cert_pem).unwrap();
    std::fs::write(dir.path().join("me.key"), &me.key_pem).unwrap();
    let kc = kubeconfig(
        &[(
            "sim",
            json!({"server": sim.url(), "certificate-authority": "ca.crt"}),
            json!({"client-certificate": "me.crt", "client-key": "me.key"}),
        )],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    assert!(sim.url().starts_with("https://"));

    let p = proxy_from(&path, None).await;
    wait_ready(&p).await;
    let (status, list) =
        crate::common::get_json(&format!("{}/api/v1/namespaces?resourceVersion=0", p.url)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert!(list["items"].as_array().unwrap().len() >= 4, "{list}");
    // Pass-through writes go over the same TLS identity, and the cache sees them.
    let (status, cm) = crate::common::send_json(
        Method::POST,
        &format!("{}/api/v1/namespaces/default/configmaps", p.url),
        "application/json",
        &json!({"metadata": {"name": "over-tls"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{cm}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, l) = crate::common::get_json(&format!(
            "{}/api/v1/namespaces/default/configmaps?resourceVersion=0",
            p.url
        ))
        .await;
        if l["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["metadata"]["name"] == "over-tls")
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{l}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The reflectors' pool negotiates HTTP/2 (one shared connection); pass-through stays on
    // HTTP/1.1 for upgrades.
    let up = upstream(&path, None);
    let r = up
        .watch_client()
        .get("/version", "application/json")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.version(), Version::HTTP_2);
    let r = up.get("/version", "application/json").await.unwrap();
    assert_eq!(r.version(), Version::HTTP_11);
}

#[tokio::test]
async fn bearer_token_upstream_from_kubeconfig_data() {
    let ca = Ca::new("test-ca");
    let sim = tls_sim(&ca.server(), None, Some("s3cret-token")).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        &[("sim", cluster(&sim, &ca), json!({"token": "s3cret-token"}))],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    let p = proxy_from(&path, None).await;
    wait_ready(&p).await;
    // An uncached resource: the request goes to the upstream.
    let url = format!("{}/api/v1/namespaces/default/services", p.url);
    // Anonymous client: pass-through with watchmux's token.
    let (status, ns) = crate::common::get_json(&url).await;
    assert_eq!(status, StatusCode::OK, "{ns}");
    // A client's own Authorization goes upstream as it is: the upstream judges the client.
    let (status, _, body) =
        crate::common::request(Method::GET, &url, &[("authorization", "Bearer not-it")], "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["reason"], "Unauthorized", "{body}");
    let (status, _, _) = crate::common::request(
        Method::GET,
        &url,
        &[("authorization", "Bearer s3cret-token")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn token_file_is_re_read_after_rotation() {
    let ca = Ca::new("test-ca");
    let sim = tls_sim(&ca.server(), None, Some("token-one")).await;
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, "token-one\n").unwrap();
    let kc = kubeconfig(
        &[("sim", cluster(&sim, &ca), json!({"tokenFile": "token"}))],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    let p = proxy_from(&path, None).await;
    wait_ready(&p).await;
    let url = format!("{}/api/v1/namespaces/default", p.url);
    assert_eq!(crate::common::get_json(&url).await.0, StatusCode::OK);

    // The upstream now wants a new token; watchmux still has the old one…
    sim.set_bearer_token(Some("token-two".to_string()));
    assert_eq!(
        crate::common::get_json(&url).await.0,
        StatusCode::UNAUTHORIZED
    );
    // …until the file is rotated (as the kubelet does): re-read within a few seconds.
    std::fs::write(&token_path, "token-two\n").unwrap();
    let f = std::fs::File::options()
        .write(true)
        .open(&token_path)
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if crate::common::get_json(&url).await.0 == StatusCode::OK {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rotated token not picked up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn named_context_and_insecure_skip_tls_verify() {
    let ca = Ca::new("test-ca");
    let other = Ca::new("other-ca");
    let sim = tls_sim(&ca.server(), None, Some("t")).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        &[
            ("wrong-ca", cluster(&sim, &other), json!({"token": "t"})),
            (
                "insecure",
                json!({"server": sim.url(), "insecure-skip-tls-verify": true}),
                json!({"token": "t"}),
            ),
            ("right", cluster(&sim, &ca), json!({"token": "t"})),
        ],
        Some("wrong-ca"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    for ctx in ["right", "insecure"] {
        let up = upstream(&path, Some(ctx));
        let r = up.get("/api/v1/namespaces", "application/json").await;
        assert_eq!(r.unwrap().status(), StatusCode::OK, "context {ctx}");
    }
    let p = proxy_from(&path, Some("right")).await;
    wait_ready(&p).await;

    let e = Upstream::new(&watchmux::config::UpstreamConfig {
        kubeconfig: Some(path.clone()),
        context: Some("nope".to_string()),
        ..Default::default()
    })
    .unwrap_err();
    let s = e.to_string();
    assert!(e.is_config(), "{e:?}");
    assert!(
        s.contains("upstream.context \"nope\" is not a context"),
        "{s}"
    );
    assert!(s.contains("wrong-ca, insecure, right"), "{s}");
}

#[tokio::test]
async fn bad_ca_is_a_clear_error_and_not_ready() {
    let (logs, _guard) = Logs::capture();
    let ca = Ca::new("test-ca");
    let other = Ca::new("other-ca");
    let sim = tls_sim(&ca.server(), None, Some("t")).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        &[("sim", cluster(&sim, &other), json!({"token": "t"}))],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);

    let e = upstream(&path, None)
        .get("/version", "application/json")
        .await
        .unwrap_err();
    let s = e.to_string();
    assert!(e.is_tls() && e.is_connect(), "{e:?}");
    assert!(s.contains("UnknownIssuer"), "{s}");
    assert!(s.contains("certificate-authority"), "{s}");

    let p = proxy_from(&path, None).await;
    logs.wait_for(&["discovery failed", "UnknownIssuer"]).await;
    assert_not_ready(&p).await;
    // Pass-through answers a kube Status naming the cause.
    let (status, body) =
        crate::common::get_json(&format!("{}/api/v1/namespaces/default", p.url)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("UnknownIssuer"),
        "{body}"
    );
}

#[tokio::test]
async fn expired_server_certificate_is_a_clear_error_and_not_ready() {
    let (logs, _guard) = Logs::capture();
    let ca = Ca::new("test-ca");
    let sim = tls_sim(
        &ca.server_for(&["127.0.0.1", "localhost"], true),
        None,
        Some("t"),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = token_kubeconfig(dir.path(), &sim, &ca);
    let e = upstream(&path, None)
        .get("/version", "application/json")
        .await
        .unwrap_err();
    assert!(e.is_tls(), "{e:?}");
    assert!(e.to_string().contains("expired"), "{e}");
    let p = proxy_from(&path, None).await;
    logs.wait_for(&["discovery failed", "certificate expired"])
        .await;
    assert_not_ready(&p).await;
}

#[tokio::test]
async fn expired_client_certificate_is_a_clear_error_and_not_ready() {
    let (logs, _guard) = Logs::capture();
    let ca = Ca::new("test-ca");
    let sim = tls_sim(&ca.server(), Some(&ca), None).await;
    let me = ca.client("watchmux", &[], true);
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        &[(
            "sim",
            cluster(&sim, &ca),
            json!({"client-certificate-data": b64(&me.cert_pem), "client-key-data": b64(&me.key_pem)}),
        )],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    let e = upstream(&path, None)
        .get("/version", "application/json")
        .await
        .unwrap_err();
    assert!(e.is_tls(), "{e:?}");
    assert!(
        e.to_string()
            .contains("the upstream rejected watchmux's client certificate"),
        "{e}"
    );
    let p = proxy_from(&path, None).await;
    logs.wait_for(&["discovery failed", "client certificate"])
        .await;
    assert_not_ready(&p).await;
}

#[tokio::test]
async fn wrong_token_is_a_clear_error_and_not_ready() {
    let (logs, _guard) = Logs::capture();
    let ca = Ca::new("test-ca");
    let sim = tls_sim(&ca.server(), None, Some("right")).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        &[("sim", cluster(&sim, &ca), json!({"token": "wrong"}))],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    let p = proxy_from(&path, None).await;
    let line = logs
        .wait_for(&["discovery failed", "401", "Unauthorized"])
        .await;
    assert!(line.contains("WARN"), "{line}");
    assert_not_ready(&p).await;
    // Once the upstream accepts the token, the reflectors recover on their own (backoff).
    sim.set_bearer_token(Some("wrong".to_string()));
    wait_ready(&p).await;
}

#[tokio::test]
async fn unusable_kubeconfigs_name_what_is_wrong() {
    let ca = Ca::new("test-ca");
    let me = ca.client("u", &[], false);
    let dir = tempfile::tempdir().unwrap();
    let server =
        json!({"server": "https://127.0.0.1:1", "certificate-authority-data": b64(&ca.pem)});
    for (user, current, want) in [
        (
            json!({"client-certificate-data": b64(&me.cert_pem)}),
            Some("c"),
            "client-certificate is set but client-key is not",
        ),
        (
            json!({"client-certificate-data": b64(&me.cert_pem), "client-key-data": b64("not a key")}),
            Some("c"),
            "client-key: no PEM PRIVATE KEY block found",
        ),
        (
            json!({"client-certificate-data": "%%%", "client-key-data": b64(&me.key_pem)}),
            Some("c"),
            "client-certificate-data is not valid base64",
        ),
        (
            json!({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh"}}),
            Some("c"),
            "user \"c\": exec: interactiveMode must be specified",
        ),
        (
            json!({"tokenFile": "missing-token"}),
            Some("c"),
            "cannot read the token file",
        ),
        (
            json!({"token": "t"}),
            None,
            "no current-context; set upstream.context (it has c)",
        ),
    ] {
        let path = write_kubeconfig(
            dir.path(),
            &kubeconfig(&[("c", server.clone(), user.clone())], current),
        );
        let e = Upstream::new(&watchmux::config::UpstreamConfig {
            kubeconfig: Some(path.clone()),
            ..Default::default()
        })
        .unwrap_err();
        let s = e.to_string();
        assert!(e.is_config(), "{user}: {e:?}");
        assert!(s.starts_with("upstream.kubeconfig ("), "{user}: {s}");
        assert!(s.contains(want), "{user}: {s}");
    }
    std::fs::write(dir.path().join("kubeconfig"), "clusters: [oops").unwrap();
    let e = Upstream::new(&watchmux::config::UpstreamConfig {
        kubeconfig: Some(dir.path().join("kubeconfig")),
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("not a kubeconfig: unclosed bracket"),
        "{e}"
    );
}

/// The `watchmux serve` binary with `KUBECONFIG` set and no upstream key in its config.
#[tokio::test]
async fn serve_reads_kubeconfig_from_the_environment() {
    let ca = Ca::new("test-ca");
    let me = ca.client("watchmux", &[], false);
    let sim = tls_sim(&ca.server(), Some(&ca), Some("tok")).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        &[(
            "sim",
            cluster(&sim, &ca),
            json!({"client-certificate-data": b64(&me.cert_pem), "client-key-data": b64(&me.key_pem), "token": "tok"}),
        )],
        Some("sim"),
    );
    let path = write_kubeconfig(dir.path(), &kc);
    let port = crate::common::dead_port();
    let config = dir.path().join("watchmux.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[[cache.resources]]\nversion = \"v1\"\nresource = \"namespaces\"\n"
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchmux"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("KUBECONFIG", &path)
        .env("WATCHMUX_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/api/v1/namespaces?resourceVersion=0");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Empty<bytes::Bytes>>();
        if let Ok(r) = client.get(url.parse().unwrap()).await
            && r.status() == StatusCode::OK
        {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "watchmux exited early");
        assert!(
            tokio::time::Instant::now() < deadline,
            "watchmux did not serve the cache"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().await.unwrap();
}

/// Plain HTTP on a non-loopback address is refused at start-up, saying why.
#[tokio::test]
async fn serve_refuses_plain_http_off_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("watchmux.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"0.0.0.0:0\"\n[upstream]\nurl = \"http://127.0.0.1:1\"\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchmux"))
        .args(["serve", "--config"])
        .arg(&config)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("watchmux must refuse to start, not serve")
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: server.listen"), "{err}");
    assert!(
        err.contains("not a loopback address and TLS is off"),
        "{err}"
    );
}

/// Over HTTP/2 the reflectors share connections, and kube-apiserver lets a connection have 100
/// streams open (as the simulator does): with more cached kinds than that, the watches beyond
/// the cap would wait for a stream forever on one connection. They spread over connections of
/// at most `WATCHES_PER_CONNECTION` reflectors each, and every kind syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflectors_spread_over_connections_within_kubes_stream_cap() {
    use watchmux::upstream::watch_pools::WATCHES_PER_CONNECTION;
    const KINDS: usize = 110;
    let ca = Ca::new("test-ca");
    let sim = tls_sim_with(&ca.server(), None, Some("t"), |c| {
        for i in 0..KINDS {
            c.custom_types.push(
                format!("g{i}.example.com/v1/things=Thing")
                    .parse()
                    .expect("a custom type"),
            );
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = token_kubeconfig(dir.path(), &sim, &ca);
    let p = proxy_with(|c| {
        c.upstream.kubeconfig = Some(path.clone());
        for i in 0..KINDS {
            c.cache.resources.push(watchmux::config::ResourceSpec {
                group: format!("g{i}.example.com"),
                version: "v1".into(),
                resource: "things".into(),
                index_fields: None,
            });
        }
    })
    .await;
    // Every kind syncs: its LIST and WATCH got streams.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !p.proxy.ready() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every kind synced within 60 s: {:?}",
            p.proxy.upstream.watch_connections()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every kind's watch is open: an object created in each reaches its cache.
    for i in 0..KINDS {
        let rt = sim
            .resource(&format!("g{i}.example.com"), "v1", "things")
            .expect("served");
        sim.ops()
            .create(
                &rt,
                Some("default"),
                json!({"metadata": {"name": "t"}}),
                false,
            )
            .expect("create");
    }
    let arrived = |i: usize| {
        p.proxy
            .cache(&format!("g{i}.example.com"), "v1", "things")
            .is_some_and(|c| c.snapshot().objects.len() == 1)
    };
    while !(0..KINDS).all(arrived) {
        let missing = (0..KINDS).filter(|i| !arrived(*i)).count();
        assert!(
            tokio::time::Instant::now() < deadline,
            "{missing} kinds' watches delivered nothing within 60 s: {:?}",
            p.proxy.upstream.watch_connections()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The kinds, the test cache's built-in ones, and the CRD watch (custom kinds are cached).
    let watched = KINDS
        + crate::common::TEST_CACHE
            .matches("[[cache.resources]]")
            .count()
        + 1;
    let connections = p.proxy.upstream.watch_connections();
    assert_eq!(
        connections.iter().sum::<usize>(),
        watched,
        "{connections:?}"
    );
    assert!(
        connections.iter().all(|&n| n <= WATCHES_PER_CONNECTION),
        "{connections:?}"
    );
    assert_eq!(
        connections.len(),
        watched.div_ceil(WATCHES_PER_CONNECTION),
        "{connections:?}"
    );
}

/// kube-apiserver restarting under watchmux, as its graceful termination looks from outside: a
/// GOAWAY on the reflectors' HTTP/2 connection, every upstream watch ends, then no connection
/// can be made for a while, and the cluster goes on changing (etcd does). No client notices
/// more than a pause: no watch of theirs ends, none relists, nothing is lost or repeated, and no
/// request gets a 500; a pass-through request that gets no answer while the upstream is away
/// gets 503 with `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_goaway_and_restart_reach_no_client_as_an_error_or_an_end() {
    use crate::common::recorder::Recorder;
    use std::sync::atomic::{AtomicBool, Ordering};
    let ca = Ca::new("test-ca");
    let sim = tls_sim(&ca.server(), None, Some("t")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = token_kubeconfig(dir.path(), &sim, &ca);
    let p = proxy_from(&path, None).await;
    wait_ready(&p).await;
    let recorders = [
        Recorder::start(&p.url, "configmaps").await,
        Recorder::start(&p.url, "pods").await,
    ];
    let informer = crate::common::Informer::<k8s_openapi::api::core::v1::ConfigMap>::start(
        &p.url,
        kube::runtime::watcher::Config::default(),
    );
    informer.ready().await;

    // The cluster changes throughout; clients read cached and uncached kinds throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (state, stop) = (sim.state().clone(), stop.clone());
        let cms = sim.resource("", "v1", "configmaps").unwrap();
        tokio::spawn(async move {
            for i in 0.. {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let obj = json!({"metadata": {"name": format!("cm-{i}")}, "data": {"k": "v"}});
                state
                    .ops
                    .create(&cms, Some("default"), obj, false)
                    .expect("create");
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
    };
    let answers = Arc::new(Mutex::new(Vec::<(String, u16, bool)>::new()));
    let reader = {
        let (base, stop, answers) = (p.url.clone(), stop.clone(), answers.clone());
        tokio::spawn(async move {
            let paths = [
                "/api/v1/namespaces/default/services",
                "/api/v1/namespaces/default/configmaps?resourceVersion=0",
                "/api/v1/namespaces/default/pods",
            ];
            for i in 0.. {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let pq = paths[i % paths.len()];
                let (s, h, _) =
                    crate::common::request(Method::GET, &format!("{base}{pq}"), &[], "").await;
                let retry = h.contains_key(http::header::RETRY_AFTER);
                answers.lock().push((pq.to_string(), s.as_u16(), retry));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    sim.faults().restart_for(Duration::from_secs(2));
    // Back: more changes, then everyone converges.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    writer.await.unwrap();
    reader.await.unwrap();
    let want = |r: &str| {
        let rt = sim.resource("", "v1", r).unwrap();
        crate::common::watch_log::sim_state(&sim, &rt, None, &|_| true)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while recorders
        .iter()
        .any(|r| r.state().as_ref() != Ok(&want(r.resource)))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watchers did not converge: {:?}",
            recorders.iter().map(Recorder::state).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let until = sim.store().revision();
    for r in &recorders {
        let rt = sim.resource("", "v1", r.resource).unwrap();
        assert_eq!(
            r.events(),
            crate::common::watch_log::sim_events(&sim, &rt, r.from, until, &|_| true),
            "{}: nothing lost, repeated or reordered",
            r.resource
        );
        assert_eq!(r.resumed(), 0, "{}: its watch never ended", r.resource);
    }
    assert_eq!(
        informer.inits.load(Ordering::SeqCst),
        1,
        "the informer never relisted ({:?})",
        informer.errors.lock()
    );
    let answers = answers.lock().clone();
    assert!(answers.len() > 5, "{} reads", answers.len());
    // The restart did end the reflectors' upstream watches: they watched again.
    assert!(
        sim.stats()["resources"]["configmaps"]["watchRequests"]
            .as_u64()
            .is_some_and(|n| n >= 2),
        "{}",
        sim.stats()["resources"]["configmaps"]
    );
    let bad: Vec<_> = answers
        .iter()
        .filter(|(_, s, retry)| *s != 200 && !((*s == 503 || *s == 429) && *retry))
        .collect();
    assert!(
        bad.is_empty(),
        "answers other than 200 or 503/429 with Retry-After: {bad:?}"
    );
    // Reads the cache answers by itself never noticed (a consistent read needs the upstream's
    // word that the cache is fresh, and meets the outage as a pass-through does).
    assert!(
        answers
            .iter()
            .filter(|(pq, _, _)| pq.contains("resourceVersion=0"))
            .all(|(_, s, _)| *s == 200),
        "{answers:?}"
    );
}
