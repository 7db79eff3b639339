//! watchmux serving TLS: certificate files reloaded on change, client certificates verified
//! against `server.client_ca_file` and forwarded as impersonation, and the `server.auth` modes
//! that decide whose credentials pass-through requests carry. The upstream here is an echo
//! server that answers with the credential headers it received; one test puts the simulator
//! behind it and reads the cache with kube-rs over TLS.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::TestProxy;
use crate::pki::{Ca, Leaf, b64, kubeconfig, write_kubeconfig};
use bytes::Bytes;
use http::{Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};
use watchmux::app::App;
use watchmux::config::{AuthMode, Config};
use watchmux::downstream::{self, Acceptor};
use watchmux::tls::{Identity, ServerTrust, certs_from_pem, key_from_pem};
use watchmux::upstream::Upstream;

/// An upstream that answers every request with the credential headers it got.
async fn echo_upstream() -> (SocketAddr, DropGuard) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let cancel = stop.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = cancel.cancelled() => return,
                c = listener.accept() => c.unwrap(),
            };
            tokio::spawn(async move {
                let svc = service_fn(|req: Request<Incoming>| async move {
                    let all = |n: &str| -> Vec<String> {
                        req.headers()
                            .get_all(n)
                            .iter()
                            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                            .collect()
                    };
                    let body = json!({
                        "path": req.uri().path(),
                        "authorization": all("authorization"),
                        "user": all("impersonate-user"),
                        "groups": all("impersonate-group"),
                    });
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body.to_string()))))
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, stop.drop_guard())
}

/// Files watchmux serves with.
struct ServingFiles {
    dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    client_ca: PathBuf,
}

impl ServingFiles {
    fn new(serving: &Leaf, client_ca: &Ca) -> ServingFiles {
        let dir = tempfile::tempdir().unwrap();
        let f = ServingFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: dir.path().join("client-ca.crt"),
            dir,
        };
        f.write(serving);
        std::fs::write(&f.client_ca, &client_ca.pem).unwrap();
        f
    }

    /// Replaces the serving pair (mtime pushed forward so the change is seen at once).
    fn write(&self, serving: &Leaf) {
        let later = std::time::SystemTime::now() + Duration::from_secs(5);
        for (path, pem) in [
            (&self.cert, &serving.cert_pem),
            (&self.key, &serving.key_pem),
        ] {
            std::fs::write(path, pem).unwrap();
            std::fs::File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_modified(later)
                .unwrap();
        }
    }
}

/// watchmux serving TLS on 127.0.0.1 in front of `upstream` (plain HTTP, where watchmux's own
/// identity is the token `watchmux-token`); `url` is `https://…`.
async fn watchmux_tls(
    upstream: &str,
    files: &ServingFiles,
    verify_clients: bool,
    auth: Option<AuthMode>,
    f: impl FnOnce(&mut Config),
) -> TestProxy {
    let kc = kubeconfig(
        &[(
            "up",
            json!({"server": upstream}),
            json!({"token": "watchmux-token"}),
        )],
        Some("up"),
    );
    let kc_path = write_kubeconfig(files.dir.path(), &kc);
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    config.server.tls_cert_file = Some(files.cert.clone());
    config.server.tls_key_file = Some(files.key.clone());
    config.server.client_ca_file = verify_clients.then(|| files.client_ca.clone());
    config.server.auth = auth;
    config.upstream.kubeconfig = Some(kc_path);
    f(&mut config);
    config.validate().expect("valid config");
    let up = Upstream::new(&config.upstream).expect("upstream");
    let downstream = Acceptor::from_config(&config.server).expect("serving files load");
    assert_eq!(downstream.scheme(), "https");
    let proxy = App::start(&config, up);
    let addr = downstream::bind_and_serve_with(proxy.clone(), config.server.listen, downstream)
        .await
        .unwrap();
    TestProxy {
        proxy,
        url: format!("https://{addr}"),
    }
}

type TlsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client trusting `ca`, presenting `cert` if given, offering HTTP/2 if `h2`.
fn client(ca: &Ca, cert: Option<&Leaf>, h2: bool) -> TlsClient {
    let trust = ServerTrust::Roots(certs_from_pem(ca.pem.as_bytes()).unwrap());
    let id = cert.map(|c| Identity {
        certs: certs_from_pem(c.cert_pem.as_bytes()).unwrap(),
        key: key_from_pem(c.key_pem.as_bytes()).unwrap(),
    });
    let cfg = watchmux::tls::client_config(&trust, id.as_ref(), &[]).unwrap();
    let b = HttpsConnectorBuilder::new()
        .with_tls_config(cfg)
        .https_only()
        .enable_http1();
    let conn = if h2 {
        b.enable_http2().build()
    } else {
        b.build()
    };
    Client::builder(TokioExecutor::new()).build(conn)
}

/// GET `url` with `headers`: status, HTTP version, JSON body; `Err` when the connection fails.
async fn get(
    c: &TlsClient,
    url: &str,
    headers: &[(&str, &str)],
) -> Result<(StatusCode, Version, Value), String> {
    let mut b = Request::get(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        c.request(b.body(Full::new(Bytes::new())).unwrap()),
    )
    .await
    .expect("answer within 10 s")
    .map_err(|e| format!("{e:?}"))?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&body).unwrap_or_else(|_| json!(String::from_utf8_lossy(&body)));
    Ok((parts.status, parts.version, v))
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn client_certificates_become_impersonation_on_pass_through() {
    let (echo, _stop) = echo_upstream().await;
    let ca = Ca::new("serving-ca");
    let clients_ca = Ca::new("clients-ca");
    let files = ServingFiles::new(&ca.server(), &clients_ca);
    let p = watchmux_tls(&format!("http://{echo}"), &files, true, None, |_| {}).await;
    let url = format!("{}/api/v1/namespaces/default/secrets", p.url);

    // A verified certificate: watchmux's credentials + Impersonate-User/Group from CN/O; the
    // client's own Authorization and Impersonate-* headers are replaced.
    let alice = ca_client(&clients_ca, "alice", &["dev"]);
    let c = client(&ca, Some(&alice), false);
    let (s, v, body) = get(
        &c,
        &url,
        &[
            ("authorization", "Bearer mine"),
            ("impersonate-user", "admin"),
        ],
    )
    .await
    .unwrap();
    assert_eq!((s, v), (StatusCode::OK, Version::HTTP_11));
    assert_eq!(strs(&body["authorization"]), ["Bearer watchmux-token"]);
    assert_eq!(strs(&body["user"]), ["alice"]);
    assert_eq!(strs(&body["groups"]), ["dev"]);

    // The same over HTTP/2 (ALPN h2).
    let c2 = client(&ca, Some(&alice), true);
    let (s, v, body) = get(&c2, &url, &[]).await.unwrap();
    assert_eq!((s, v), (StatusCode::OK, Version::HTTP_2));
    assert_eq!(strs(&body["user"]), ["alice"]);

    // No certificate, a token: the client's own token goes upstream, impersonation included.
    let c = client(&ca, None, false);
    let (_, _, body) = get(
        &c,
        &url,
        &[
            ("authorization", "Bearer mine"),
            ("impersonate-user", "bob"),
        ],
    )
    .await
    .unwrap();
    assert_eq!(strs(&body["authorization"]), ["Bearer mine"]);
    assert_eq!(strs(&body["user"]), ["bob"]);

    // Anonymous: watchmux's identity, and no borrowing its impersonate permission.
    let (_, _, body) = get(
        &c,
        &url,
        &[
            ("impersonate-user", "admin"),
            ("impersonate-group", "system:masters"),
        ],
    )
    .await
    .unwrap();
    assert_eq!(strs(&body["authorization"]), ["Bearer watchmux-token"]);
    assert!(
        strs(&body["user"]).is_empty() && strs(&body["groups"]).is_empty(),
        "{body}"
    );

    // A certificate from a CA watchmux does not trust: the handshake fails.
    let mallory = ca_client(&Ca::new("elsewhere"), "mallory", &["system:masters"]);
    let c = client(&ca, Some(&mallory), false);
    assert!(get(&c, &url, &[]).await.is_err());
    // watchmux keeps serving.
    let c = client(&ca, Some(&alice), false);
    assert_eq!(get(&c, &url, &[]).await.unwrap().0, StatusCode::OK);
}

fn ca_client(ca: &Ca, user: &str, groups: &[&str]) -> Leaf {
    ca.client(user, groups, false)
}

#[tokio::test]
async fn client_required_and_watchmux_modes() {
    let (echo, _stop) = echo_upstream().await;
    let ca = Ca::new("serving-ca");
    let clients_ca = Ca::new("clients-ca");
    let files = ServingFiles::new(&ca.server(), &clients_ca);
    let alice = ca_client(&clients_ca, "alice", &["dev"]);
    let upstream = format!("http://{echo}");

    let p = watchmux_tls(
        &upstream,
        &files,
        true,
        Some(AuthMode::ClientRequired),
        |_| {},
    )
    .await;
    let url = format!("{}/api/v1/namespaces", p.url);
    let anon = client(&ca, None, false);
    let (s, _, body) = get(&anon, &url, &[]).await.unwrap();
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "Unauthorized");
    assert_eq!(body["code"], 401);
    let (s, _, body) = get(&anon, &url, &[("authorization", "Bearer mine")])
        .await
        .unwrap();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(strs(&body["authorization"]), ["Bearer mine"]);
    let (s, _, body) = get(&client(&ca, Some(&alice), false), &url, &[])
        .await
        .unwrap();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(strs(&body["user"]), ["alice"]);
    drop(p);

    let p = watchmux_tls(&upstream, &files, true, Some(AuthMode::Watchmux), |_| {}).await;
    let url = format!("{}/api/v1/namespaces", p.url);
    for c in [client(&ca, None, false), client(&ca, Some(&alice), false)] {
        let (s, _, body) = get(
            &c,
            &url,
            &[
                ("authorization", "Bearer mine"),
                ("impersonate-user", "admin"),
            ],
        )
        .await
        .unwrap();
        assert_eq!(s, StatusCode::OK);
        assert_eq!(strs(&body["authorization"]), ["Bearer watchmux-token"]);
        assert!(strs(&body["user"]).is_empty(), "{body}");
    }
}

#[tokio::test]
async fn serving_certificate_is_reloaded_when_its_files_change() {
    let (echo, _stop) = echo_upstream().await;
    let old_ca = Ca::new("old-ca");
    let new_ca = Ca::new("new-ca");
    let files = ServingFiles::new(&old_ca.server(), &Ca::new("clients-ca"));
    let p = watchmux_tls(&format!("http://{echo}"), &files, false, None, |_| {}).await;
    let url = format!("{}/version", p.url);
    assert!(get(&client(&old_ca, None, false), &url, &[]).await.is_ok());
    assert!(get(&client(&new_ca, None, false), &url, &[]).await.is_err());

    // A broken key (a half-finished rotation) keeps the previous pair in service.
    std::fs::write(&files.key, "not a key").unwrap();
    tokio::time::sleep(watchmux::tls::RELOAD_CHECK + Duration::from_millis(200)).await;
    assert!(get(&client(&old_ca, None, false), &url, &[]).await.is_ok());

    files.write(&new_ca.server());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    // Each attempt is a new client, so a new connection and handshake.
    while get(&client(&new_ca, None, false), &url, &[]).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "new certificate not served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(get(&client(&old_ca, None, false), &url, &[]).await.is_err());
}

#[tokio::test]
async fn serving_files_that_cannot_be_used_name_their_key() {
    let ca = Ca::new("ca");
    let files = ServingFiles::new(&ca.server(), &ca);
    let mut config = Config::default();
    config.server.tls_cert_file = Some(files.cert.clone());
    config.server.tls_key_file = Some(files.dir.path().join("missing.key"));
    let e = Acceptor::from_config(&config.server).unwrap_err();
    assert!(e.to_string().starts_with("server.tls_key_file ("), "{e}");
    assert!(e.to_string().contains("cannot read"), "{e}");
    config.server.tls_key_file = Some(files.key.clone());
    config.server.client_ca_file = Some(files.cert.clone());
    std::fs::write(&files.cert, "garbage").unwrap();
    let e = Acceptor::from_config(&config.server).unwrap_err();
    assert!(e.to_string().starts_with("server.tls_cert_file ("), "{e}");
    // A key that does not belong to the certificate.
    std::fs::write(&files.cert, ca.server().cert_pem).unwrap();
    let e = Acceptor::from_config(&config.server).unwrap_err();
    assert!(e.to_string().starts_with("server.tls_key_file ("), "{e}");
}

/// kube-rs, with a client certificate, reads the cache and passes writes through watchmux's TLS
/// front; the simulator behind watchmux is plain HTTP.
#[tokio::test]
async fn kube_client_over_tls_with_a_client_certificate() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ListParams, PostParams};

    let sim = crate::common::sim().await;
    let ca = Ca::new("serving-ca");
    let clients_ca = Ca::new("clients-ca");
    let files = ServingFiles::new(&ca.server(), &clients_ca);
    let sim_url = sim.url();
    let p = watchmux_tls(&sim_url, &files, true, None, |c| {
        c.cache.resources = vec![watchmux::config::ResourceSpec::new("", "v1", "configmaps")];
    })
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !p.proxy.ready() {
        assert!(tokio::time::Instant::now() < deadline, "no sync");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let me = ca_client(&clients_ca, "alice", &["dev"]);
    let kc = kubeconfig(
        &[(
            "watchmux",
            json!({"server": p.url, "certificate-authority-data": b64(&ca.pem)}),
            json!({"client-certificate-data": b64(&me.cert_pem), "client-key-data": b64(&me.key_pem)}),
        )],
        Some("watchmux"),
    );
    let dir = tempfile::tempdir().unwrap();
    let kc = kube::config::Kubeconfig::read_from(write_kubeconfig(dir.path(), &kc)).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("through-tls".to_string());
    api.create(&PostParams::default(), &cm).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let list = api.list(&ListParams::default().match_any()).await.unwrap();
        if list
            .items
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("through-tls"))
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not in the cache");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
