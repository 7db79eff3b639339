//! watchmux with a kubeconfig whose user has the `oidc` auth-provider: an issuer served here
//! over TLS (discovery and a token endpoint that counts refreshes, rotates the refresh token and
//! makes the simulator accept only the id-token it issued last), and the simulator requiring
//! that bearer token. An expired id-token is refreshed at start, a short-lived one before it
//! expires, a 401 makes one refresh, a refused refresh leaves watchmux not ready naming the
//! issuer until it succeeds; unusable configurations and the removed auth-providers are
//! start-up errors.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kube_sim::Simulator;
use kube_sim::tls::SimTls;
use parking_lot::Mutex;
use serde_json::{Value, json};
use watchmux::config::UpstreamConfig;
use watchmux::upstream::Upstream;

use crate::common::wait_until;
use crate::exec_plugin::{proxy_from, readyz, services, wait_ready};
use crate::pki::{Ca, b64, kubeconfig, write_kubeconfig};

const CLIENT_ID: &str = "watchmux";
const CLIENT_SECRET: &str = "s3cret";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An unsigned JWT whose `exp` is `exp` (watchmux reads it without verifying).
fn jwt(exp: u64, n: u64) -> String {
    let e = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.c2ln",
        e(json!({"alg": "RS256"})),
        e(json!({"iss": "test", "sub": "watchmux", "exp": exp, "n": n}))
    )
}

struct IssuerState {
    /// Successful refreshes.
    refreshes: AtomicU64,
    /// Answer every refresh 400 invalid_grant.
    refuse: AtomicBool,
    /// Lifetime of the id-tokens issued, seconds.
    lifetime: AtomicU64,
    /// The refresh token the next refresh must carry (rotated on every refresh).
    refresh_token: Mutex<String>,
    url: Mutex<String>,
    /// Told every id-token issued.
    on_issue: Box<dyn Fn(&str) + Send + Sync>,
}

/// An OIDC issuer on 127.0.0.1 over TLS; stops when dropped.
struct Issuer {
    url: String,
    ca: Ca,
    state: Arc<IssuerState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Issuer {
    async fn start(lifetime: u64, on_issue: impl Fn(&str) + Send + Sync + 'static) -> Issuer {
        let ca = Ca::new("issuer-ca");
        let leaf = ca.server();
        let acceptor = kube_sim::tls::acceptor(&SimTls {
            cert_pem: leaf.cert_pem,
            key_pem: leaf.key_pem,
            client_ca_pem: None,
            bearer_token: None,
        })
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "https://127.0.0.1:{}/realms/test",
            listener.local_addr().unwrap().port()
        );
        let state = Arc::new(IssuerState {
            refreshes: AtomicU64::new(0),
            refuse: AtomicBool::new(false),
            lifetime: AtomicU64::new(lifetime),
            refresh_token: Mutex::new("rt-0".to_string()),
            url: Mutex::new(url.clone()),
            on_issue: Box::new(on_issue),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let st = st.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req| {
                        let st = st.clone();
                        async move { Ok::<_, Infallible>(answer(&st, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        Issuer {
            url,
            ca,
            state,
            task,
        }
    }

    fn refreshes(&self) -> u64 {
        self.state.refreshes.load(Ordering::SeqCst)
    }
}

fn json_response(status: StatusCode, v: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())))
        .unwrap()
}

async fn answer(st: &IssuerState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let url = st.url.lock().clone();
    let path = req.uri().path().to_string();
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/realms/test/.well-known/openid-configuration") => json_response(
            StatusCode::OK,
            json!({"issuer": url, "token_endpoint": format!("{url}/protocol/token")}),
        ),
        (Method::POST, "/realms/test/protocol/token") => {
            let basic = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD
                    .encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
            );
            let in_header = req
                .headers()
                .get("authorization")
                .is_some_and(|v| v.as_bytes() == basic.as_bytes());
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let form: std::collections::HashMap<String, String> =
                form_urlencoded::parse(&body).into_owned().collect();
            // The client's credentials in the header or in the form, as issuers take them.
            let in_form = form.get("client_id").map(String::as_str) == Some(CLIENT_ID)
                && form.get("client_secret").map(String::as_str) == Some(CLIENT_SECRET);
            if !(in_header || in_form) {
                return json_response(StatusCode::UNAUTHORIZED, json!({"error": "invalid_client"}));
            }
            let mut rt = st.refresh_token.lock();
            if st.refuse.load(Ordering::SeqCst)
                || form.get("grant_type").map(String::as_str) != Some("refresh_token")
                || form.get("refresh_token") != Some(&*rt)
            {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    json!({"error": "invalid_grant", "error_description": "Token is not active"}),
                );
            }
            let n = st.refreshes.fetch_add(1, Ordering::SeqCst) + 1;
            let id = jwt(now() + st.lifetime.load(Ordering::SeqCst), n);
            *rt = format!("rt-{n}");
            (st.on_issue)(&id);
            json_response(
                StatusCode::OK,
                json!({"access_token": format!("at-{n}"), "token_type": "Bearer",
                       "expires_in": 300, "refresh_token": *rt, "id_token": id}),
            )
        }
        _ => json_response(StatusCode::NOT_FOUND, json!({})),
    }
}

/// A simulator whose bearer token is the issuer's last id-token (or `initial`), and the issuer.
async fn sim_and_issuer(lifetime: u64, initial: Option<&str>) -> (Arc<Simulator>, Issuer) {
    let sim = Arc::new(crate::common::sim_with(|_| {}).await);
    sim.set_bearer_token(Some(initial.unwrap_or("none yet").to_string()));
    let s = sim.clone();
    let issuer = Issuer::start(lifetime, move |t| s.set_bearer_token(Some(t.to_string()))).await;
    (sim, issuer)
}

/// A kubeconfig in `dir` whose user has the oidc auth-provider with `config` (plus the issuer,
/// client and CA, unless `config` sets them).
fn oidc_kubeconfig(dir: &Path, server: &str, issuer: &Issuer, config: Value) -> PathBuf {
    let mut c = json!({
        "idp-issuer-url": issuer.url,
        "client-id": CLIENT_ID,
        "client-secret": CLIENT_SECRET,
        "idp-certificate-authority-data": b64(&issuer.ca.pem),
    });
    for (k, v) in config.as_object().unwrap() {
        c[k] = v.clone();
    }
    let user = json!({"auth-provider": {"name": "oidc", "config": c}});
    let kc = kubeconfig(&[("sim", json!({"server": server}), user)], Some("sim"));
    write_kubeconfig(dir, &kc)
}

/// An expired id-token is refreshed at start (discovery, then the token endpoint with the
/// client's credentials over TLS verified with the issuer's CA), and the new one is sent.
#[tokio::test]
async fn an_expired_id_token_is_refreshed_at_start() {
    let (sim, issuer) = sim_and_issuer(3600, None).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = oidc_kubeconfig(
        dir.path(),
        &sim.url(),
        &issuer,
        json!({"id-token": jwt(now() - 60, 0), "refresh-token": "rt-0"}),
    );
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(issuer.refreshes(), 1);
    let (s, text) = readyz(&p).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    assert!(text.contains("[+]upstream-credentials ok"), "{text}");
}

/// A short-lived id-token is refreshed again before it expires, with the rotated refresh
/// token; requests keep succeeding (the simulator accepts only the newest token).
#[tokio::test]
async fn a_short_lived_id_token_is_refreshed_before_it_expires() {
    // 10 s of it is client-go's margin: usable for 4 s, renewed about 0.8 s before.
    let (sim, issuer) = sim_and_issuer(14, None).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = oidc_kubeconfig(
        dir.path(),
        &sim.url(),
        &issuer,
        json!({"refresh-token": "rt-0"}),
    );
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    wait_until("three refreshes", 20, async || issuer.refreshes() >= 3).await;
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(p.proxy.ready());
}

/// A valid id-token from the kubeconfig is used as it is; a 401 makes one refresh, and the
/// request is sent again with the new token.
#[tokio::test]
async fn a_401_makes_one_refresh() {
    let initial = jwt(now() + 3600, 0);
    let (sim, issuer) = sim_and_issuer(3600, Some(&initial)).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = oidc_kubeconfig(
        dir.path(),
        &sim.url(),
        &issuer,
        json!({"id-token": initial, "refresh-token": "rt-0"}),
    );
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    assert_eq!(issuer.refreshes(), 0);
    sim.set_bearer_token(Some("someone else".into()));
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(issuer.refreshes(), 1);
}

/// An issuer that refuses the refresh leaves watchmux not ready, `/readyz` naming the issuer;
/// retried with back-off, it recovers once the issuer accepts.
#[tokio::test]
async fn a_refused_refresh_is_not_ready_then_recovers() {
    let (sim, issuer) = sim_and_issuer(3600, None).await;
    issuer.state.refuse.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let kc = oidc_kubeconfig(
        dir.path(),
        &sim.url(),
        &issuer,
        json!({"id-token": jwt(now() - 60, 0), "refresh-token": "rt-0"}),
    );
    let p = proxy_from(&kc, |_| {}).await;
    let mut last = String::new();
    wait_until("readyz names the refused refresh", 10, async || {
        let (s, text) = readyz(&p).await;
        last = text;
        s == StatusCode::SERVICE_UNAVAILABLE
            && last.contains("[-]upstream-credentials failed: upstream.kubeconfig")
            && last.contains("oidc auth-provider, issuer")
    })
    .await;
    assert!(
        last.contains(&format!("oidc auth-provider, issuer {}", issuer.url))
            && last.contains("answered 400 Bad Request")
            && last.contains("invalid_grant"),
        "{last}"
    );
    assert!(
        last.contains(&format!("upstream.kubeconfig ({})", kc.display())),
        "{last}"
    );
    let (status, _) = crate::common::get_json(&services(&p)).await;
    assert_ne!(status, StatusCode::OK);
    issuer.state.refuse.store(false, Ordering::SeqCst);
    wait_ready(&p).await;
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(issuer.refreshes(), 1);
}

/// Refused at start-up, naming the kubeconfig and user: no tokens at all, no issuer, the
/// removed gcp and azure auth-providers (naming their exec plugins) and unknown ones.
#[tokio::test]
async fn unusable_auth_providers_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = "https://127.0.0.1:1";
    let issuer = Issuer::start(60, |_| {}).await;
    let oidc = |config: Value| json!({"name": "oidc", "config": config});
    for (provider, want) in [
        (
            oidc(json!({"idp-issuer-url": issuer.url, "client-id": CLIENT_ID})),
            "user \"sim\": auth-provider oidc: it has neither an id-token nor a refresh-token",
        ),
        (
            oidc(json!({"client-id": CLIENT_ID, "refresh-token": "rt"})),
            "user \"sim\": auth-provider oidc: idp-issuer-url must be specified",
        ),
        (
            oidc(
                json!({"idp-issuer-url": issuer.url, "client-id": CLIENT_ID, "id-token": "not-a-jwt"}),
            ),
            "user \"sim\": auth-provider oidc: id-token: not a JWT",
        ),
        (
            json!({"name": "gcp", "config": {}}),
            "the user uses the \"gcp\" auth-provider, which client-go removed: use the gke-gcloud-auth-plugin exec credential plugin instead",
        ),
        (
            json!({"name": "azure", "config": {}}),
            "the user uses the \"azure\" auth-provider, which client-go removed: use the kubelogin exec credential plugin instead",
        ),
        (
            json!({"name": "openstack", "config": {}}),
            "the user uses the \"openstack\" auth-provider, which watchmux does not support",
        ),
    ] {
        let user = json!({ "auth-provider": provider });
        let kc = write_kubeconfig(
            d,
            &kubeconfig(&[("sim", json!({"server": server}), user)], Some("sim")),
        );
        let e = Upstream::new(&UpstreamConfig {
            kubeconfig: Some(kc.clone()),
            ..UpstreamConfig::default()
        })
        .unwrap_err();
        assert!(e.is_config(), "{provider}: {e:?}");
        let s = e.to_string();
        let head = format!(
            "upstream.kubeconfig ({}), context \"sim\" (cluster \"sim\", user \"sim\"): ",
            kc.display()
        );
        assert!(s.starts_with(&head), "{provider}: {s}");
        assert!(s.contains(want), "{provider}: {want:?} not in {s}");
    }
}
