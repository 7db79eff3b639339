//! Paged LISTs and exact resourceVersions served from the cache, as kube-apiserver 1.34+ serves
//! them from watch-cache snapshots (spec §1.5 L2, L8–L12): the pages of one list stay on its
//! snapshot while writes happen, whether the snapshot was kept or is rebuilt from the event log;
//! a kept snapshot outlives the event window; what the cache no longer has goes to the
//! upstream, whose answer (the page, or 410 Expired with an inconsistent-continuation token) is
//! passed on; and `kubectl --chunk-size` sees what it sees against the simulator. Every answer is
//! compared byte for byte with the simulator's own answer to the same request, and the
//! simulator's counters show which ones reached it.

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use kube_sim::Simulator;
use kube_sim::semantics::DeleteOptions;
use kube_wire::continue_token::ContinueToken;
use serde_json::{Value, json};

use crate::common::kubectl::{kubectl, run};
use crate::common::*;

/// Namespaces of the test pods: `a-b/…` sorts before `a/…` (keys compare as bytes).
const NAMESPACES: [&str; 3] = ["a", "a-b", "b"];
/// Pods per namespace (`p-000`…), alternately on node-1 and node-2.
const PER_NS: usize = 40;

/// kube's text for a compacted continue token (apiserver `etcd3/errors.go`).
const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A simulator with the test pods, and watchmux in front of it.
async fn setup(
    sim_config: impl FnOnce(&mut kube_sim::SimConfig),
    proxy_config: impl FnOnce(&mut watchmux::config::Config),
) -> (Simulator, TestProxy) {
    let sim = sim_with(sim_config).await;
    let namespaces = sim.resource("", "v1", "namespaces").unwrap();
    for ns in NAMESPACES {
        sim.ops()
            .create(&namespaces, None, json!({"metadata": {"name": ns}}), false)
            .unwrap();
    }
    let pods = sim.resource("", "v1", "pods").unwrap();
    for ns in NAMESPACES {
        for i in 0..PER_NS {
            let node = if i % 2 == 0 { "node-1" } else { "node-2" };
            let app = if i % 3 == 0 { "web" } else { "db" };
            sim.ops()
                .create(
                    &pods,
                    Some(ns),
                    pod(&format!("p-{i:03}"), node, json!({ "app": app })),
                    false,
                )
                .unwrap();
        }
    }
    let p = proxy_for(&sim, proxy_config).await;
    (sim, p)
}

/// Writes to the pods: each returns the write's resourceVersion.
struct Writes<'a>(&'a Simulator);

impl Writes<'_> {
    fn pods(&self) -> std::sync::Arc<kube_sim::kinds::ResourceType> {
        self.0.resource("", "v1", "pods").unwrap()
    }

    fn touch(&self, ns: &str, name: &str, tag: &str) -> u64 {
        self.0
            .ops()
            .modify(&self.pods(), Some(ns), name, |v| {
                v["metadata"]["labels"]["touched"] = json!(tag);
            })
            .unwrap()
            .rv
    }

    fn move_to(&self, ns: &str, name: &str, node: &str) -> u64 {
        self.0
            .ops()
            .modify(&self.pods(), Some(ns), name, |v| {
                v["spec"]["nodeName"] = json!(node);
            })
            .unwrap()
            .rv
    }

    fn delete(&self, ns: &str, name: &str) -> u64 {
        let now = DeleteOptions {
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        self.0
            .ops()
            .delete(&self.pods(), Some(ns), name, &now)
            .unwrap();
        self.0.store().revision()
    }

    fn add(&self, ns: &str, name: &str, node: &str) -> u64 {
        self.0
            .ops()
            .create(
                &self.pods(),
                Some(ns),
                pod(name, node, json!({"app": "web"})),
                false,
            )
            .unwrap()
            .rv
    }

    /// One round of changes between two pages: before and after the page boundary, in every
    /// form (modify, move between nodes, delete, create).
    fn round(&self, r: usize) -> Vec<u64> {
        vec![
            self.touch("a-b", "p-000", &format!("r{r}")),
            self.touch("b", &format!("p-{:03}", 30 + r), "ahead"),
            self.move_to("b", &format!("p-{:03}", 20 + 2 * r), "node-3"),
            self.delete("b", &format!("p-{:03}", 10 + 2 * r)),
            self.add("b", &format!("p-{:03}x", 5 + r), "node-1"),
        ]
    }
}

/// GET; status and body.
async fn get(url: &str) -> (u16, Bytes) {
    let (s, _, b) = request(Method::GET, url, &[], "").await;
    (s.as_u16(), b)
}

fn json_of(b: &Bytes) -> Value {
    serde_json::from_slice(b)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(b)))
}

fn token_of(b: &Bytes) -> Option<String> {
    json_of(b)["metadata"]["continue"]
        .as_str()
        .map(str::to_string)
}

fn list_rv(b: &Bytes) -> u64 {
    json_of(b)["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("a list resourceVersion")
}

/// `ns/name@rv` of every item.
fn items(b: &Bytes) -> Vec<String> {
    json_of(b)["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            format!(
                "{}/{}@{}",
                m["namespace"].as_str().unwrap_or_default(),
                m["name"].as_str().unwrap_or_default(),
                m["resourceVersion"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Items of pod LISTs the simulator has sent (a freshness check's `limit=1` LIST sends one).
fn upstream_items(sim: &Simulator) -> u64 {
    sim.stats()["resources"]["pods"]["listItemsSent"]
        .as_u64()
        .unwrap()
}

fn upstream_lists(sim: &Simulator) -> u64 {
    sim.stats()["resources"]["pods"]["listRequests"]
        .as_u64()
        .unwrap()
}

/// What watchmux asked the upstream for while it answered one request.
#[derive(Debug, Clone, Copy, Default)]
struct Fetched {
    /// Pod LISTs (a consistent read's freshness check is one).
    lists: u64,
    /// Pod items in their answers (a freshness check gets at most one).
    items: u64,
}

impl std::ops::AddAssign for Fetched {
    fn add_assign(&mut self, o: Fetched) {
        self.lists += o.lists;
        self.items += o.items;
    }
}

/// The request through watchmux, then directly to the simulator: the same status and bytes.
/// Returns the answer and what watchmux fetched from the upstream for it.
async fn same(sim: &Simulator, p: &TestProxy, case: &str, pq: &str) -> (u16, Bytes, Fetched) {
    let before = (upstream_lists(sim), upstream_items(sim));
    let via = get(&format!("{}{pq}", p.url)).await;
    let fetched = Fetched {
        lists: upstream_lists(sim) - before.0,
        items: upstream_items(sim) - before.1,
    };
    let direct = get(&format!("{}{pq}", sim.url())).await;
    assert_eq!(
        (via.0, String::from_utf8_lossy(&via.1)),
        (direct.0, String::from_utf8_lossy(&direct.1)),
        "{case}: {pq}"
    );
    (via.0, via.1, fetched)
}

/// Waits until watchmux's pod cache holds every write the simulator made (so that what left its
/// event window has left it).
async fn caught_up(sim: &Simulator, p: &TestProxy) {
    let cache = p.proxy.cache("", "v1", "pods").expect("pods are cached");
    assert!(
        cache
            .wait_rv(sim.store().revision(), Duration::from_secs(10))
            .await,
        "the cache follows the simulator"
    );
}

/// A per-resource gauge of the pods from watchmux's metrics.
fn pods_gauge(p: &TestProxy, name: &str) -> f64 {
    let prefix = format!("{name}{{resource=\"pods\"}} ");
    p.proxy
        .metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} for pods is exported"))
}

/// Pages through `/api/v1/pods?limit=25` with a round of writes before every page after the
/// first; every page must equal the simulator's answer to the same continuation and none may
/// reach it. Returns the first page's resourceVersion and all the write RVs.
async fn page_through_writes(sim: &Simulator, p: &TestProxy) -> (u64, Vec<u64>) {
    let pq = "/api/v1/pods?limit=25";
    // The first page is a consistent read: the cache serves it at the upstream's current
    // state, which is the simulator's answer too (same items, same token).
    let (code, first, fetched) = same(sim, p, "first page", pq).await;
    assert_eq!(code, 200);
    assert!(
        fetched.lists <= 1 && fetched.items <= 1,
        "only the freshness check reached the upstream: {fetched:?}"
    );
    let rv = list_rv(&first);
    let mut all = items(&first);
    let mut token = token_of(&first).expect("more pages");
    let mut writes = Vec::new();
    for page in 2.. {
        writes.extend(Writes(sim).round(page));
        let cpq = continuation(pq, &token);
        let (code, body, fetched) = same(sim, p, &format!("page {page}"), &cpq).await;
        assert_eq!(code, 200);
        assert_eq!(
            fetched.lists, 0,
            "page {page} was cut from the cache's snapshot"
        );
        assert_eq!(list_rv(&body), rv, "every page says the first page's RV");
        all.extend(items(&body));
        match token_of(&body) {
            Some(t) => token = t,
            None => break,
        }
        assert!(page < 20, "endless pages");
    }
    // The pages together are the list exactly at the first page's RV, which the writes since
    // then changed.
    let (_, whole) = get(&format!(
        "{}/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact",
        sim.url()
    ))
    .await;
    assert_eq!(all, items(&whole));
    assert_eq!(all.len(), NAMESPACES.len() * PER_NS);
    let (_, now) = get(&format!("{}/api/v1/pods", sim.url())).await;
    assert_ne!(items(&now), all, "the writes changed the list");
    (rv, writes)
}

#[tokio::test]
async fn pages_of_one_list_stay_on_its_kept_snapshot_while_writes_happen() {
    let (sim, p) = setup(|_| {}, |_| {}).await;
    page_through_writes(&sim, &p).await;
    assert_eq!(pods_gauge(&p, "watchmux_cache_snapshots"), 1.0);
}

#[tokio::test]
async fn without_kept_snapshots_pages_are_rebuilt_from_the_event_log() {
    let (sim, p) = setup(|_| {}, |c| c.cache.snapshot_retention = Duration::ZERO).await;
    page_through_writes(&sim, &p).await;
    assert_eq!(pods_gauge(&p, "watchmux_cache_snapshots"), 0.0);
}

/// Byte lengths of the items of a list, as the cache stores them (pods: their protobuf, `pb`,
/// the same list in protobuf), by the ids of the JSON list `b`.
fn item_sizes(b: &Bytes, pb: &Bytes) -> Vec<(String, usize)> {
    items(b)
        .into_iter()
        .zip(
            crate::common::protobuf_list_items(pb)
                .iter()
                .map(|i| i.len()),
        )
        .collect()
}

#[tokio::test]
async fn a_kept_snapshot_outlives_the_event_window() {
    // Two events in the window: after the first round of writes, the log no longer reaches the
    // first page's RV, and only the kept snapshot can serve the pages.
    let (sim, p) = setup(|_| {}, |c| c.cache.event_window_count = 2).await;
    let (rv, writes) = page_through_writes(&sim, &p).await;
    assert_eq!(pods_gauge(&p, "watchmux_cache_snapshots"), 1.0);
    // What it holds that the live store does not: the versions at `rv` of the pods changed
    // since (whether or not the event log still holds them as some event's previous state).
    let at_rv_url = format!(
        "{}/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact",
        sim.url()
    );
    let (_, at_rv) = get(&at_rv_url).await;
    let (_, _, at_rv_pb) = request(
        Method::GET,
        &at_rv_url,
        &[("accept", "application/vnd.kubernetes.protobuf")],
        "",
    )
    .await;
    let (_, now) = get(&format!("{}/api/v1/pods", sim.url())).await;
    let live = items(&now);
    let held_alone: usize = item_sizes(&at_rv, &at_rv_pb)
        .into_iter()
        .filter(|(id, _)| !live.contains(id))
        .map(|(_, n)| n)
        .sum();
    assert!(held_alone > 0);
    assert_eq!(
        pods_gauge(&p, "watchmux_cache_snapshot_bytes"),
        held_alone as f64
    );
    // An exact read at a resourceVersion the window and the kept snapshots do not have goes to
    // the upstream, and is still the simulator's answer.
    caught_up(&sim, &p).await;
    let pq = format!(
        "/api/v1/pods?resourceVersion={}&resourceVersionMatch=Exact",
        writes[0]
    );
    let (code, _, fetched) = same(&sim, &p, "exact outside the window", &pq).await;
    assert_eq!(code, 200);
    assert!(fetched.lists > 0, "the upstream answered it");
}

/// An all-namespaces LIST narrowed to one namespace by `fieldSelector=metadata.namespace=X`,
/// paged: every page continues where the last one stopped, so the pages are the namespace's
/// objects, each once. (kube 1.36 gets this wrong: its token is relative to the namespace and
/// read back against the cluster-wide prefix, so page 2 comes back empty or repeats items.
/// watchmux keeps the correct answer; the README says so.)
#[tokio::test]
async fn a_namespace_field_selector_pages_through_the_namespace_once() {
    let (sim, p) = setup(|_| {}, |_| {}).await;
    caught_up(&sim, &p).await;
    let (_, whole) = get(&format!("{}/api/v1/namespaces/a-b/pods", sim.url())).await;
    let want = items(&whole);
    assert_eq!(want.len(), PER_NS);
    for first in [
        "/api/v1/pods?fieldSelector=metadata.namespace%3Da-b&limit=7",
        "/api/v1/pods?fieldSelector=metadata.namespace%3Da-b&limit=7&resourceVersion=1&resourceVersionMatch=NotOlderThan",
    ] {
        let mut pq = first.to_string();
        let mut all = Vec::new();
        for page in 1.. {
            let (code, body) = get(&format!("{}{pq}", p.url)).await;
            assert_eq!(code, 200, "{pq}");
            let got = items(&body);
            assert!(got.len() <= 7 && !got.is_empty(), "page {page}: {got:?}");
            all.extend(got);
            match token_of(&body) {
                Some(t) => pq = continuation(first, &t),
                None => break,
            }
            assert!(page < 20, "endless pages");
        }
        assert_eq!(all, want, "{first}");
    }
}

/// kube 1.36's watch cache mints a page's token with the start key's leading slash
/// (`"/ns/name\u0000"`, its key prefix has no trailing slash); etcd3's spelling without it
/// (`"ns/name\u0000"`) names the same key, and both continue the list alike.
#[tokio::test]
async fn continue_tokens_are_kubes_cache_spelling_and_both_spellings_continue() {
    let (sim, p) = setup(|_| {}, |_| {}).await;
    for pq in [
        "/api/v1/pods?limit=7",
        "/api/v1/namespaces/a-b/pods?limit=7",
    ] {
        let (_, first, _) = same(&sim, &p, "first page", pq).await;
        let token = token_of(&first).expect("more pages");
        let raw = base64::Engine::decode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            token.as_bytes(),
        )
        .unwrap();
        let start = json_of(&Bytes::from(raw))["start"]
            .as_str()
            .unwrap()
            .to_string();
        let last = items(&first)
            .last()
            .unwrap()
            .split('@')
            .next()
            .unwrap()
            .to_string();
        let rel = if pq.contains("/namespaces/") {
            last.split_once('/').unwrap().1.to_string()
        } else {
            last
        };
        assert_eq!(start, format!("/{rel}\u{0}"), "{pq}: the cache's spelling");
        let decoded = ContinueToken::decode(&token).unwrap();
        let etcd = decoded.encode_storage();
        assert_ne!(etcd, token);
        let (c1, via_cache, _) = same(&sim, &p, "cache spelling", &continuation(pq, &token)).await;
        let (c2, via_etcd, _) = same(&sim, &p, "etcd spelling", &continuation(pq, &etcd)).await;
        assert_eq!((c1, c2), (200, 200));
        assert_eq!(via_cache, via_etcd, "{pq}: the same page");
    }
}

/// kube's cacher ignores `limit` on every LIST with `resourceVersion=0`, a continuation
/// included (`computeListLimit`): the rest of the list comes whole from the snapshot at the
/// token's revision, with no token and no `remainingItemCount`, whether or not the objects
/// changed since; a token of rv −1 gives the rest at the latest state, whole too.
#[tokio::test]
async fn a_continuation_with_resource_version_0_ignores_the_limit() {
    let (sim, p) = setup(|_| {}, |_| {}).await;
    let pq = "/api/v1/pods?limit=25";
    let (_, first, _) = same(&sim, &p, "first page", pq).await;
    let rv = list_rv(&first);
    let token = token_of(&first).expect("more pages");
    let (_, whole) = get(&format!(
        "{}/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact",
        sim.url()
    ))
    .await;
    let rest_at_rv = items(&whole)[25..].to_vec();
    let rv0 = format!(
        "{}&resourceVersion=0",
        continuation("/api/v1/pods?limit=5", &token)
    );
    let check = |case: &str, body: &Bytes| {
        let list = json_of(body);
        assert_eq!(
            list["metadata"]["continue"],
            Value::Null,
            "{case}: no token"
        );
        assert_eq!(
            list["metadata"]["remainingItemCount"],
            Value::Null,
            "{case}"
        );
        assert_eq!(list_rv(body), rv, "{case}: the token's revision");
        assert_eq!(
            items(body),
            rest_at_rv,
            "{case}: the rest, whole, at the token's state"
        );
    };
    // Nothing changed since the token was issued.
    let (code, body, fetched) = same(&sim, &p, "unchanged", &rv0).await;
    assert_eq!(code, 200);
    assert_eq!(fetched.lists, 0, "cut from the cache's snapshot");
    check("unchanged", &body);
    // The object the token points past, and others after it, changed.
    let last = items(&first).last().unwrap().clone();
    let (ns, name) = last.split_once('@').unwrap().0.split_once('/').unwrap();
    let w = Writes(&sim);
    w.touch(ns, name, "past");
    w.round(1);
    caught_up(&sim, &p).await;
    let (code, body, fetched) = same(&sim, &p, "changed", &rv0).await;
    assert_eq!(code, 200);
    assert_eq!(fetched.lists, 0, "cut from the cache's snapshot");
    check("changed", &body);
    // rv −1 (kube's inconsistent continuation): the rest at the latest state, whole.
    let start = ContinueToken::decode(&token).unwrap().start;
    let latest = ContinueToken { rv: -1, start }.encode();
    let pq = format!(
        "{}&resourceVersion=0",
        continuation("/api/v1/pods?limit=5", &latest)
    );
    let (code, body, _) = same(&sim, &p, "rv -1", &pq).await;
    assert_eq!(code, 200);
    assert_eq!(token_of(&body), None);
    assert_eq!(list_rv(&body), sim.store().revision());
    assert!(items(&body).len() > 5, "the limit is ignored");
}

#[tokio::test]
async fn an_expired_continue_token_gets_the_upstreams_410_and_its_token_continues_at_latest() {
    // The simulator keeps three pod events; watchmux keeps two and no snapshot.
    let (sim, p) = setup(
        |s| s.history.max_events = 3,
        |c| {
            c.cache.event_window_count = 2;
            c.cache.snapshot_retention = Duration::ZERO;
        },
    )
    .await;
    let pq = "/api/v1/pods?limit=50";
    let (_, first, _) = same(&sim, &p, "first page", pq).await;
    let token = token_of(&first).expect("more pages");
    let w = Writes(&sim);
    for r in 0..2 {
        w.round(r);
    }
    caught_up(&sim, &p).await;
    // Nobody has the first page's state any more: the upstream's 410, as it gave it.
    let (code, expired, fetched) = same(&sim, &p, "expired token", &continuation(pq, &token)).await;
    assert_eq!(fetched.lists, 1, "the upstream answered");
    assert_eq!(code, 410);
    let status = json_of(&expired);
    assert_eq!(status["reason"], "Expired");
    assert_eq!(status["message"], EXPIRED_CONTINUE);
    let fresh = status["metadata"]["continue"]
        .as_str()
        .expect("a new token");
    let (old, new) = (
        ContinueToken::decode(&token).unwrap(),
        ContinueToken::decode(fresh).unwrap(),
    );
    assert_eq!((new.rv, &new.start), (-1, &old.start));
    // The new token continues from the same key at the latest state: a consistent read, which
    // the cache serves (only the freshness check reaches the upstream).
    let (code, rest, fetched) = same(
        &sim,
        &p,
        "inconsistent continuation",
        &continuation(pq, fresh),
    )
    .await;
    assert_eq!(code, 200);
    assert!(
        fetched.lists <= 1 && fetched.items <= 1,
        "served from the cache: {fetched:?}"
    );
    assert_eq!(list_rv(&rest), sim.store().revision());
    assert!(
        items(&rest).iter().any(|i| i.starts_with("b/p-005x@")),
        "a pod created since"
    );
}

#[tokio::test]
async fn exact_resource_versions_inside_and_outside_the_window() {
    // Five events in the window.
    let (sim, p) = setup(|_| {}, |c| c.cache.event_window_count = 5).await;
    let w = Writes(&sim);
    let mut rvs = Vec::new();
    for r in 0..2 {
        rvs.extend(w.round(r));
    }
    caught_up(&sim, &p).await;
    // rvs[5..10] are in the window (a watch may start from rvs[5] − 1); rvs[0..4] are not.
    let cache = p.proxy.cache("", "v1", "pods").unwrap();
    assert_eq!(cache.check_watch_start(rvs[5] - 1), Ok(()));
    assert_eq!(cache.check_watch_start(rvs[3]), Err(rvs[5] - 1));
    let forms = |n: u64| {
        [
            format!("/api/v1/pods?resourceVersion={n}&resourceVersionMatch=Exact"),
            format!("/api/v1/pods?resourceVersion={n}&limit=7"),
            format!(
                "/api/v1/namespaces/b/pods?resourceVersion={n}&resourceVersionMatch=Exact&limit=4&labelSelector=app%3Dweb"
            ),
            format!(
                "/api/v1/pods?resourceVersion={n}&resourceVersionMatch=Exact&fieldSelector=spec.nodeName%3Dnode-3"
            ),
            format!(
                "/api/v1/namespaces/b/pods?resourceVersion={n}&resourceVersionMatch=Exact&fieldSelector=spec.nodeName%3Dnode-1"
            ),
        ]
    };
    for (n, inside) in [
        (rvs[9], true),
        (rvs[7], true),
        (rvs[5] - 1, true),
        (rvs[3], false),
        (rvs[0], false),
    ] {
        for pq in forms(n) {
            let case = format!(
                "RV {n} ({})",
                if inside { "in the window" } else { "before it" }
            );
            let (code, mut body, mut fetched) = same(&sim, &p, &case, &pq).await;
            assert_eq!(code, 200, "{case}: {pq}");
            assert_eq!(list_rv(&body), n, "{case}: the list says the RV asked for");
            // Every page, each way.
            let mut pages = 1;
            while let Some(t) = token_of(&body) {
                let page = format!("{case} page {pages}");
                let (_, next, f) = same(&sim, &p, &page, &continuation(&pq, &t)).await;
                fetched += f;
                body = next;
                pages += 1;
                assert!(pages < 50, "{case}: endless pages");
            }
            if inside {
                assert_eq!(fetched.lists, 0, "{case}: {pq} served from the cache");
            } else {
                assert!(fetched.lists > 0, "{case}: {pq} served by the upstream");
            }
        }
    }
    // The moved pods are found under their node of the time, and only then.
    let on_node3 = |n: u64| {
        let url = format!(
            "{}/api/v1/pods?resourceVersion={n}&resourceVersionMatch=Exact&fieldSelector=spec.nodeName%3Dnode-3",
            p.url
        );
        async move { items(&get(&url).await.1).len() }
    };
    assert_eq!(on_node3(rvs[5] - 1).await, 1);
    assert_eq!(on_node3(rvs[9]).await, 2);

    // A resourceVersion the cache has not reached yet is waited for.
    let next = sim.store().revision() + 1;
    let pq = format!("/api/v1/pods?resourceVersion={next}&resourceVersionMatch=Exact&limit=10");
    let before = upstream_items(&sim);
    let url = format!("{}{pq}", p.url);
    let (via, _) = tokio::join!(get(&url), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        w.touch("a", "p-001", "later")
    });
    assert_eq!(
        upstream_items(&sim),
        before,
        "served from the cache once it got there"
    );
    let direct = get(&format!("{}{pq}", sim.url())).await;
    assert_eq!(via, direct);
    // One it never reaches gets kube's 504, from the upstream after the same wait.
    let far = sim.store().revision() + 1000;
    let pq = format!("/api/v1/pods?resourceVersion={far}&resourceVersionMatch=Exact");
    let (pu, su) = (format!("{}{pq}", p.url), format!("{}{pq}", sim.url()));
    let (via, direct) = tokio::join!(get(&pu), get(&su));
    assert_eq!(via, direct);
    assert_eq!(via.0, 504);
}

#[tokio::test]
async fn kubectl_chunked_get_equals_the_simulators_and_stays_in_the_cache() {
    let (sim, p) = setup(|_| {}, |_| {}).await;
    let home = tempfile::tempdir().unwrap();
    let get_pods = |server: &str| {
        let mut c = kubectl(server, &home);
        c.args(["get", "pods", "-A", "-o", "json", "--chunk-size=50"]);
        c
    };
    let (lists, items) = (upstream_lists(&sim), upstream_items(&sim));
    let (ok, via, err) = run(get_pods(&p.url)).await;
    assert!(ok, "kubectl via watchmux: {err}");
    let (lists, items) = (upstream_lists(&sim) - lists, upstream_items(&sim) - items);
    assert!(
        items <= lists && lists <= 1,
        "only the first page's freshness check reached the upstream ({lists} LISTs, {items} items)"
    );
    let (ok, direct, err) = run(get_pods(&sim.url())).await;
    assert!(ok, "kubectl via the simulator: {err}");
    assert_eq!(via, direct);
    let v: Value = serde_json::from_str(&via).unwrap();
    assert_eq!(
        v["items"].as_array().map(Vec::len),
        Some(NAMESPACES.len() * PER_NS)
    );
    // Three pages, two continuations of one kept snapshot.
    assert_eq!(pods_gauge(&p, "watchmux_cache_snapshots"), 1.0);
    assert_eq!(pods_gauge(&p, "watchmux_cache_snapshot_bytes"), 0.0);
}
