//! `server.authz = "delegated"`: what the cache answers is authenticated (TokenReview, client
//! certificate, anonymous) and authorized (SubjectAccessReview) by the upstream, with kube's own
//! 401/403 bodies, and the decisions are cached.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::authz::{Policy, Rule};
use serde_json::{Value, json};
use watchmux::config::{AuthzMode, Config};

const WATCHMUX: &str = "system:serviceaccount:watchmux:watchmux";

/// Tokens: watchmux's own, alice (pods in `a`), bob (list pods in `a`, no watch), carol (group
/// `readers`: pods and nodes everywhere), mallory (nothing), and `n` numbered readers.
fn policy(n: usize) -> Policy {
    let mut tokens = HashMap::new();
    let mut t = |tok: &str, user: &str, groups: &[&str]| {
        tokens.insert(
            tok.to_string(),
            (
                user.to_string(),
                groups.iter().map(|s| s.to_string()).collect(),
            ),
        );
    };
    t("watchmux-token", WATCHMUX, &[]);
    t("alice-token", "alice", &["dev"]);
    t("bob-token", "bob", &[]);
    t("carol-token", "carol", &["readers"]);
    t("mallory-token", "mallory", &[]);
    for i in 0..n {
        t(
            &format!("user-{i}-token"),
            &format!("user-{i}"),
            &["readers"],
        );
    }
    Policy {
        tokens,
        rules: vec![
            Rule::new(WATCHMUX, &["*"], "*", &["*"], None),
            Rule::new("alice", &["list", "watch"], "", &["pods"], Some("a")),
            Rule::new("bob", &["list"], "", &["pods"], Some("a")),
            Rule::new("readers", &["list", "watch"], "", &["pods", "nodes"], None),
        ],
    }
}

/// A simulator with pods in namespaces `a` and `b` and the policy set.
async fn sim_with_pods() -> Simulator {
    let sim = crate::common::sim().await;
    let ns = sim.resource("", "v1", "namespaces").unwrap();
    let pods = sim.resource("", "v1", "pods").unwrap();
    for n in ["a", "b"] {
        sim.ops()
            .create(&ns, None, json!({"metadata": {"name": n}}), false)
            .unwrap();
        for p in ["p1", "p2"] {
            sim.ops()
                .create(
                    &pods,
                    Some(n),
                    crate::common::pod(p, "node-1", json!({})),
                    false,
                )
                .unwrap();
        }
    }
    sim.state().set_policy(policy(100));
    sim
}

/// watchmux in front of `sim` as `watchmux-token`, `authz = "delegated"`.
async fn delegated(
    sim: &Simulator,
    dir: &std::path::Path,
    f: impl FnOnce(&mut Config),
) -> crate::common::TestProxy {
    let kc = crate::pki::kubeconfig(
        &[(
            "up",
            json!({"server": sim.url()}),
            json!({"token": "watchmux-token"}),
        )],
        Some("up"),
    );
    let kc = crate::pki::write_kubeconfig(dir, &kc);
    crate::common::proxy_for(sim, |c| {
        c.upstream.url = None;
        c.upstream.kubeconfig = Some(kc);
        c.server.authz = Some(AuthzMode::Delegated);
        f(c);
    })
    .await
}

fn stats(sim: &Simulator) -> (u64, u64) {
    let s = sim.stats();
    (
        s["tokenReviews"].as_u64().unwrap(),
        s["subjectAccessReviews"].as_u64().unwrap(),
    )
}

/// The status of a GET of `url` with the bearer `token`.
async fn get_as(url: &str, token: &str) -> StatusCode {
    let auth = format!("Bearer {token}");
    crate::common::request(Method::GET, url, &[("authorization", &auth)], "")
        .await
        .0
}

/// watchmux's count of review-cache lookups of `review` (`token`, `access`) answered as
/// `result` (`hit`, `miss`, `shared`).
fn lookups(px: &crate::common::TestProxy, review: &str, result: &str) -> u64 {
    let series =
        format!("watchmux_authz_cache_requests_total{{result=\"{result}\",review=\"{review}\"}} ");
    px.proxy
        .metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
        .unwrap_or_else(|| panic!("no {series}"))
}

/// Every lookup count of `review`: (hits, misses, shared).
fn lookup_counts(px: &crate::common::TestProxy, review: &str) -> (u64, u64, u64) {
    (
        lookups(px, review, "hit"),
        lookups(px, review, "miss"),
        lookups(px, review, "shared"),
    )
}

fn names(body: &[u8]) -> Vec<String> {
    let v: Value = serde_json::from_slice(body).unwrap();
    let mut n: Vec<String> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["metadata"]["namespace"].as_str().unwrap_or_default(),
                i["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cached_reads_answer_as_the_upstream_would() {
    let sim = sim_with_pods().await;
    let dir = tempfile::tempdir().unwrap();
    let px = delegated(&sim, dir.path(), |_| {}).await;
    let identities: &[(&str, Option<&str>)] = &[
        ("anonymous", None),
        ("alice", Some("Bearer alice-token")),
        ("bob", Some("Bearer bob-token")),
        ("carol", Some("Bearer carol-token")),
        ("mallory", Some("Bearer mallory-token")),
        ("bad token", Some("Bearer nope")),
        ("basic auth", Some("Basic dTpw")),
    ];
    let requests = [
        "/api/v1/namespaces/a/pods?resourceVersion=0",
        "/api/v1/namespaces/b/pods?resourceVersion=0",
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/namespaces/b/pods?resourceVersion=0&fieldSelector=metadata.name%3Dp1",
        "/api/v1/nodes?resourceVersion=0",
        "/api/v1/namespaces/a/pods?watch=1&resourceVersion=0&timeoutSeconds=1",
        "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1",
        "/api/v1/watch/namespaces/b/pods/p1?resourceVersion=0&timeoutSeconds=1",
    ];
    let mut table = Vec::new();
    for (who, auth) in identities {
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", *a)).collect();
        for path in requests {
            let lists = || sim.stats()["resources"]["pods"]["listRequests"].clone();
            let before = lists();
            let (ws, _, wb) =
                crate::common::request(Method::GET, &format!("{}{path}", px.url), &headers, "")
                    .await;
            assert_eq!(
                lists(),
                before,
                "{who} {path}: answered by the cache, not the upstream"
            );
            let (ss, _, sb) =
                crate::common::request(Method::GET, &format!("{}{path}", sim.url()), &headers, "")
                    .await;
            assert_eq!(ws, ss, "{who} {path}: watchmux vs simulator");
            if ws == StatusCode::OK {
                if !path.contains("watch") {
                    assert_eq!(names(&wb), names(&sb), "{who} {path}");
                }
            } else {
                assert_eq!(
                    String::from_utf8_lossy(&wb),
                    String::from_utf8_lossy(&sb),
                    "{who} {path}: the same Status body"
                );
                // A denied client gets the Status and nothing from the cache.
                let text = String::from_utf8_lossy(&wb);
                assert!(
                    !text.contains("\"p1\"") || text.contains("forbidden"),
                    "{text}"
                );
                assert!(
                    !text.contains("PodList") && !text.contains("ADDED"),
                    "{text}"
                );
            }
            table.push(format!("{who:10} {} {path}", ws.as_u16()));
        }
    }
    let table = table.join("\n");
    eprintln!("{table}");
    // Spot checks of the decisions and exact bodies.
    let code = |who: &str, path: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{who:10} ")) && l.ends_with(path))
            .map(|l| l[11..14].to_string())
            .unwrap()
    };
    assert_eq!(code("alice", requests[0]), "200");
    assert_eq!(code("alice", requests[1]), "403");
    assert_eq!(code("alice", requests[2]), "403");
    assert_eq!(code("alice", requests[5]), "200");
    assert_eq!(code("bob", requests[0]), "200");
    assert_eq!(code("bob", requests[5]), "403");
    assert_eq!(code("carol", requests[2]), "200");
    assert_eq!(code("carol", requests[7]), "200");
    assert_eq!(code("anonymous", requests[0]), "403");
    assert_eq!(code("bad token", requests[0]), "401");
    assert_eq!(code("basic auth", requests[0]), "401");

    let get = |auth: &'static str, path: &'static str| {
        let url = format!("{}{path}", px.url);
        async move {
            let (s, _, b) =
                crate::common::request(Method::GET, &url, &[("authorization", auth)], "").await;
            (s, String::from_utf8(b.to_vec()).unwrap())
        }
    };
    assert_eq!(
        get("Bearer nope", requests[0]).await.1,
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#,
            "\n"
        )
    );
    assert_eq!(
        get("Bearer alice-token", requests[1]).await.1,
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"b\"","reason":"Forbidden","details":{"kind":"pods"},"code":403}"#,
            "\n"
        )
    );
    assert_eq!(
        get("Bearer mallory-token", requests[6]).await.1,
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \"mallory\" cannot watch resource \"pods\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"pods"},"code":403}"#,
            "\n"
        )
    );
    assert_eq!(
        get("Bearer alice-token", requests[3]).await.1,
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"p1\" is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"b\"","reason":"Forbidden","details":{"name":"p1","kind":"pods"},"code":403}"#,
            "\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn websocket_bearer_subprotocol_is_authenticated() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::HeaderValue;
    let sim = sim_with_pods().await;
    let dir = tempfile::tempdir().unwrap();
    let px = delegated(&sim, dir.path(), |_| {}).await;
    let connect = |token: &str, path: &str| {
        let mut req = format!("{}{path}", px.url.replace("http://", "ws://"))
            .into_client_request()
            .unwrap();
        let enc = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token);
        req.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_str(&format!(
                "base64url.bearer.authorization.k8s.io.{enc}, v4.channel.k8s.io"
            ))
            .unwrap(),
        );
        tokio_tungstenite::connect_async(req)
    };
    let ns_a = "/api/v1/namespaces/a/pods?watch=1&resourceVersion=0&timeoutSeconds=2";
    assert!(
        connect("alice-token", ns_a).await.is_ok(),
        "alice may watch pods in a"
    );
    for (token, path, want) in [
        ("bob-token", ns_a, 403),
        ("alice-token", "/api/v1/pods?watch=1&resourceVersion=0", 403),
        ("nope", ns_a, 401),
    ] {
        match connect(token, path).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status(), want, "{token} {path}")
            }
            other => panic!(
                "{token} {path}: expected {want}, got {:?}",
                other.map(|_| ())
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn decisions_are_cached_per_identity_and_attributes() {
    let sim = sim_with_pods().await;
    let dir = tempfile::tempdir().unwrap();
    let px = delegated(&sim, dir.path(), |_| {}).await;
    let (t0, s0) = stats(&sim);
    // 1,000 requests from 100 identities, all at once: concurrent misses for one key merge.
    let mut tasks = Vec::new();
    for round in 0..10 {
        for i in 0..100 {
            let url = format!("{}/api/v1/namespaces/a/pods?resourceVersion=0", px.url);
            tasks.push(tokio::spawn(async move {
                let auth = format!("Bearer user-{i}-token");
                let (s, _, _) =
                    crate::common::request(Method::GET, &url, &[("authorization", &auth)], "")
                        .await;
                (round, s)
            }));
        }
    }
    for t in tasks {
        let (_, s) = t.await.unwrap();
        assert_eq!(s, StatusCode::OK);
    }
    let (t1, s1) = stats(&sim);
    let (tokens, sars) = (t1 - t0, s1 - s0);
    eprintln!(
        "1000 requests from 100 identities: {tokens} TokenReviews, {sars} SubjectAccessReviews"
    );
    assert!(tokens <= 100, "{tokens} token reviews");
    assert!(sars <= 100, "{sars} access reviews");
    assert!(tokens >= 100 && sars >= 100, "each identity was reviewed");
    // Every lookup is counted once; the misses are exactly the reviews the upstream answered,
    // the rest were cached or shared with a concurrent lookup of the same key.
    for (review, upstream) in [("token", tokens), ("access", sars)] {
        let (hit, miss, shared) = lookup_counts(&px, review);
        eprintln!(
            "{review} lookups: {hit} hits, {miss} misses, {shared} shared ({:.0} % answered without a review)",
            100.0 * (hit + shared) as f64 / 1000.0
        );
        assert_eq!(hit + miss + shared, 1000, "{review}");
        assert_eq!(
            miss, upstream,
            "{review}: misses are the upstream's reviews"
        );
    }
    let (token_hits, _, _) = lookup_counts(&px, "token");
    let (access_hits, access_misses, _) = lookup_counts(&px, "access");
    // Other attributes are another decision; a denied one is cached too.
    for _ in 0..5 {
        let url = format!(
            "{}/api/v1/namespaces/a/configmaps?resourceVersion=0",
            px.url
        );
        assert_eq!(get_as(&url, "user-0-token").await, StatusCode::FORBIDDEN);
    }
    assert_eq!(stats(&sim), (t1, s1 + 1));
    assert_eq!(lookups(&px, "token", "hit"), token_hits + 5);
    assert_eq!(lookups(&px, "access", "miss"), access_misses + 1);
    assert_eq!(lookups(&px, "access", "hit"), access_hits + 4);
    // Pass-through is not reviewed by watchmux.
    let url = format!("{}/api/v1/namespaces/a/pods", px.url);
    assert_eq!(get_as(&url, "user-1-token").await, StatusCode::OK);
    assert_eq!(stats(&sim), (t1, s1 + 1));
}

/// A review whose user and attributes take more than `MAX_CACHED_KEY_BYTES` is made every time
/// rather than cached (as kube's webhook authorizer does): no client fills the cache with huge
/// entries. Its token is cached as any other (the key is the token's HMAC).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn huge_review_keys_are_reviewed_every_time() {
    let sim = sim_with_pods().await;
    let long_user = "u".repeat(watchmux::downstream::authz::MAX_CACHED_KEY_BYTES);
    let mut p = policy(0);
    p.tokens
        .insert("long-token".into(), (long_user, vec!["readers".into()]));
    sim.state().set_policy(p);
    let dir = tempfile::tempdir().unwrap();
    let px = delegated(&sim, dir.path(), |_| {}).await;
    let (t0, s0) = stats(&sim);
    let url = format!("{}/api/v1/namespaces/a/pods?resourceVersion=0", px.url);
    for _ in 0..3 {
        assert_eq!(get_as(&url, "long-token").await, StatusCode::OK);
    }
    assert_eq!(stats(&sim), (t0 + 1, s0 + 3));
    assert_eq!(lookup_counts(&px, "access"), (0, 3, 0));
    assert_eq!(lookup_counts(&px, "token"), (2, 1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_policy_change_is_seen_after_the_ttl() {
    let sim = sim_with_pods().await;
    let dir = tempfile::tempdir().unwrap();
    let px = delegated(&sim, dir.path(), |c| {
        c.server.authz_allow_ttl = Duration::from_secs(1);
        c.server.authz_deny_ttl = Duration::from_secs(1);
    })
    .await;
    let url = format!("{}/api/v1/namespaces/a/pods?resourceVersion=0", px.url);
    let as_alice = || get_as(&url, "alice-token");
    assert_eq!(as_alice().await, StatusCode::OK);
    // Revoke alice's grant: the cached allow holds until its TTL…
    let mut p = policy(100);
    p.rules.retain(|r| r.subject != "alice");
    sim.state().set_policy(p);
    assert_eq!(as_alice().await, StatusCode::OK);
    // …then the upstream's new answer is seen.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(as_alice().await, StatusCode::FORBIDDEN);
    // Restore it: the cached deny holds until its TTL, then allowed again.
    sim.state().set_policy(policy(100));
    assert_eq!(as_alice().await, StatusCode::FORBIDDEN);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(as_alice().await, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_certificates_are_identities() {
    use hyper_rustls::HttpsConnectorBuilder;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use watchmux::tls::{Identity, ServerTrust, certs_from_pem, key_from_pem};

    let sim = sim_with_pods().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = crate::pki::Ca::new("authz test CA");
    let (cert, key, client_ca) = crate::pki::write_serving_files(dir.path(), &ca, &ca.server());
    let kc = crate::pki::kubeconfig(
        &[(
            "up",
            json!({"server": sim.url()}),
            json!({"token": "watchmux-token"}),
        )],
        Some("up"),
    );
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    config.server.tls_cert_file = Some(cert);
    config.server.tls_key_file = Some(key);
    config.server.client_ca_file = Some(client_ca);
    config.server.authz = Some(AuthzMode::Delegated);
    config.upstream.kubeconfig = Some(crate::pki::write_kubeconfig(dir.path(), &kc));
    config.cache = Config::from_toml_str(crate::common::TEST_CACHE, "t")
        .unwrap()
        .cache;
    config.validate().unwrap();
    let up = watchmux::upstream::Upstream::new(&config.upstream).unwrap();
    let downstream = watchmux::downstream::Acceptor::from_config(&config.server).unwrap();
    let proxy = watchmux::app::App::start(&config, up);
    let addr =
        watchmux::downstream::bind_and_serve_with(proxy.clone(), config.server.listen, downstream)
            .await
            .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !proxy.ready() {
        assert!(tokio::time::Instant::now() < deadline, "synced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let get = |leaf: crate::pki::Leaf| {
        let url = format!("https://{addr}/api/v1/pods?resourceVersion=0");
        let trust = ServerTrust::Roots(certs_from_pem(ca.pem.as_bytes()).unwrap());
        async move {
            let id = Identity {
                certs: certs_from_pem(leaf.cert_pem.as_bytes()).unwrap(),
                key: key_from_pem(leaf.key_pem.as_bytes()).unwrap(),
            };
            let cfg = watchmux::tls::client_config(&trust, Some(&id), &[]).unwrap();
            let conn = HttpsConnectorBuilder::new()
                .with_tls_config(cfg)
                .https_only()
                .enable_http1()
                .build();
            let c: Client<_, http_body_util::Full<bytes::Bytes>> =
                Client::builder(TokioExecutor::new()).build(conn);
            let resp = c
                .request(
                    http::Request::get(url)
                        .body(http_body_util::Full::new(bytes::Bytes::new()))
                        .unwrap(),
                )
                .await
                .unwrap();
            let status = resp.status();
            use http_body_util::BodyExt;
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8(body.to_vec()).unwrap())
        }
    };
    // O=readers may list pods everywhere; the certificate wins over any token.
    let (s, b) = get(ca.client("dave", &["readers"], false)).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(names(b.as_bytes()).len(), 4);
    let (s, b) = get(ca.client("eve", &["dev"], false)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        b,
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \"eve\" cannot list resource \"pods\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"pods"},"code":403}"#,
            "\n"
        )
    );
    proxy.cancel.cancel();
}

#[test]
fn authz_config_defaults_and_refusals() {
    let c = Config::from_toml_str("", "t").unwrap();
    assert_eq!(c.server.authz_mode(), AuthzMode::None, "loopback default");
    assert_eq!(c.server.authz_allow_ttl, Duration::from_secs(300));
    assert_eq!(c.server.authz_deny_ttl, Duration::from_secs(30));
    // Sized for a 5,000-node fleet's per-object kubelet watches (see config.toml).
    assert_eq!(c.server.authz_token_cache_size, 65_536);
    assert_eq!(c.server.authz_access_cache_size, 524_288);
    let c = Config::from_toml_str(
        "[server]\nlisten = \"0.0.0.0:8443\"\nauth = \"client\"\n",
        "t",
    )
    .unwrap();
    assert_eq!(
        c.server.authz_mode(),
        AuthzMode::Delegated,
        "off-loopback default"
    );
    let e = Config::from_toml_str(
        "[server]\nlisten = \"0.0.0.0:8443\"\nauth = \"client\"\nauthz = \"none\"\n",
        "t.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("server.authz") && e.contains("loopback"), "{e}");
    assert!(e.contains("t.toml"), "{e}");
    for key in ["authz_token_cache_size", "authz_access_cache_size"] {
        let e = Config::from_toml_str(&format!("[server]\n{key} = 0\n"), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("server.{key}")), "{e}");
    }
    let e = Config::from_toml_str("[server]\nauthz = \"maybe\"\n", "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("authz"), "{e}");
}
