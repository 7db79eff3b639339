//! Property tests of request routing: arbitrary paths and query strings never panic the path
//! parser, the list-options parser or the router, and a request for a resource that is not
//! cached never reaches a cache (the upstream sees it).

use std::time::Duration;

use http::{Method, StatusCode};
use kube_wire::options::ListOptions;
use kube_wire::path::{self, ApiPath};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

const SEGMENTS: &[&str] = &[
    "api",
    "apis",
    "v1",
    "v2",
    "apps",
    "discovery.k8s.io",
    "namespaces",
    "default",
    "kube-system",
    "pods",
    "nodes",
    "secrets",
    "configmaps",
    "deployments",
    "watch",
    "status",
    "log",
    "proxy",
    "..",
    ".",
    "%2F",
    "%2e%2e",
    "%00",
    "a%20b",
    "",
    "x",
    "UPPER",
    "p~1",
];

const KEYS: &[&str] = &[
    "watch",
    "resourceVersion",
    "resourceVersionMatch",
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
    "timeoutSeconds",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "pretty",
    "x",
    "",
];

const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "true",
    "false",
    "1",
    "NotOlderThan",
    "Exact",
    "a%3Db",
    "a!%3Db",
    "metadata.name%3Dx",
    "spec.nodeName%3Dn",
    "in%20(a,b)",
    "%ZZ",
    "%2F",
    "99999999999999999999999",
    "abc",
];

/// URL-safe text from arbitrary bytes.
fn url_text(bytes: &[u8]) -> String {
    const SAFE: &[u8] =
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$&'()*+,;=:@/";
    bytes
        .iter()
        .map(|b| SAFE[*b as usize % SAFE.len()] as char)
        .collect()
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(SEGMENTS).prop_map(str::to_string),
        1 => proptest::collection::vec(any::<u8>(), 0..12)
            .prop_map(|b| url_text(&b).replace(['/', '?', '&', '='], "")),
    ]
}

fn path_strategy() -> impl Strategy<Value = String> {
    // Often under a real group/version prefix, so that the router's later stages run too.
    let prefix = proptest::sample::select(
        &[
            "",
            "",
            "/api/v1",
            "/api/v1/namespaces/default",
            "/api/v1/watch",
            "/apis/apps/v1",
            "/api/v1/pods",
        ][..],
    );
    (prefix, proptest::collection::vec(segment(), 0..6))
        .prop_map(|(pre, segs)| format!("{pre}/{}", segs.join("/")))
}

fn query_strategy() -> impl Strategy<Value = Option<String>> {
    let pair = prop_oneof![
        4 => (
            proptest::sample::select(KEYS),
            proptest::sample::select(VALUES),
        )
            .prop_map(|(k, v)| format!("{k}={v}")),
        1 => proptest::collection::vec(any::<u8>(), 0..16).prop_map(|b| url_text(&b).replace('?', "")),
    ];
    proptest::option::of(proptest::collection::vec(pair, 0..6).prop_map(|p| p.join("&")))
}

fn target(path: &str, query: &Option<String>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic(p in path_strategy(), q in query_strategy(), raw in any::<String>()) {
        let _ = path::parse(&p);
        let _ = path::parse(&raw);
        if let Ok(mut o) = ListOptions::from_query(q.as_deref()) {
            let _ = o.validate();
            let _ = o.rv();
            o.apply_watch_list_defaults();
        }
        let _ = ListOptions::from_query(Some(&raw));
    }
}

/// The cached (group, version, resource) a path names, if it names a resource at all.
fn resource_of(p: &str) -> Option<(String, String, String)> {
    match path::parse(p) {
        ApiPath::Resource(rp) => Some((rp.group, rp.version, rp.resource)),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uncached_resources_always_pass_through() {
    let sim = crate::common::sim().await;
    let px = crate::common::proxy_for(&sim, |c| {
        c.cache.resources.retain(|r| r.resource == "pods");
    })
    .await;
    let mut runner = TestRunner::deterministic();
    let requests = proptest::collection::vec((path_strategy(), query_strategy()), 300)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let mut passed = 0;
    let mut from_cache = 0;
    for (p, q) in &requests {
        let t = target(p, q);
        let Ok(uri) = format!("{}{t}", px.url).parse::<http::Uri>() else {
            continue;
        };
        let res = resource_of(p);
        let cached = res
            .as_ref()
            .is_some_and(|(g, v, r)| g.is_empty() && v == "v1" && r == "pods");
        let before = sim.stats()["requests"].as_u64().unwrap();
        let resp = tokio::time::timeout(
            Duration::from_secs(10),
            crate::common::send(Method::GET, &uri.to_string(), &[], ""),
        )
        .await
        .unwrap_or_else(|_| panic!("{t}: no response"));
        assert!(
            resp.status() != StatusCode::INTERNAL_SERVER_ERROR || !cached,
            "{t}: 500 from the cache"
        );
        drop(resp);
        if let Some((g, v, r)) = &res
            && !cached
        {
            assert!(
                px.proxy.cache(g, v, r).is_none(),
                "{t}: a cache for {g}/{v}/{r}"
            );
        }
        if cached {
            from_cache += 1;
        } else {
            let after = sim.stats()["requests"].as_u64().unwrap();
            assert!(after > before, "{t}: not passed through to the upstream");
            passed += 1;
        }
    }
    assert!(
        passed > 100,
        "only {passed} uncached requests were generated"
    );
    assert!(
        from_cache > 10,
        "only {from_cache} requests for pods were generated"
    );
    // Nothing but pods was ever cached.
    for r in ["nodes", "secrets", "configmaps", "namespaces"] {
        assert!(px.proxy.cache("", "v1", r).is_none());
    }
    assert!(px.proxy.cache("apps", "v1", "deployments").is_none());
    assert!(px.proxy.cache("", "v1", "pods").is_some());
}
