//! Consistent reads (no resourceVersion) answered from the cache are linearizable: a LIST, a GET
//! or a watch-list (how client-go ≥ 1.35 informers start) issued right after a write was
//! acknowledged by the upstream contains that write — while the upstream's watch streams lag
//! behind its acknowledgements, other resources move the global resourceVersion, and the read
//! resource stays quiet for long stretches. A deliberately broken freshness check fails the same
//! test; the reads stay in the cache (the upstream sees only the small freshness requests,
//! shared between concurrent readers).

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::*;

const NS: &str = "default";
const CMS: usize = 20;

/// How late the simulator's watch streams deliver new events: far more than a read needs to
/// arrive after its write, so a cache that trusted its own watch would miss the write.
const WATCH_LAG: Duration = Duration::from_millis(300);

fn cm_url(base: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("{base}/api/v1/namespaces/{NS}/configmaps/{n}"),
        None => format!("{base}/api/v1/namespaces/{NS}/configmaps"),
    }
}

/// Writes `cm-{i % CMS}` with `data.i = i` through the simulator (creates it when `create`);
/// returns its resourceVersion.
async fn write_as(sim_url: &str, i: usize, create: bool) -> u64 {
    let name = format!("cm-{}", i % CMS);
    let obj = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name,"namespace":NS},"data":{"i":i.to_string()}});
    let (method, url) = if create {
        (Method::POST, cm_url(sim_url, None))
    } else {
        (Method::PUT, cm_url(sim_url, Some(&name)))
    };
    let (code, v) = send_json(method, &url, "application/json", &obj).await;
    assert!(code.is_success(), "write {i}: {code} {v}");
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("written object has a resourceVersion")
}

/// Updates `cm-{i % CMS}` to `data.i = i` (see [`write_as`]).
async fn write(sim_url: &str, i: usize) -> u64 {
    write_as(sim_url, i, false).await
}

/// Pods created on the side, moving the global resourceVersion while configmaps stay quiet.
async fn churn_other(sim_url: &str, n: usize, tag: &str) {
    for k in 0..n {
        let p = pod(&format!("churn-{tag}-{k}"), "n1", json!({}));
        let (code, v) = send_json(
            Method::POST,
            &format!("{sim_url}/api/v1/namespaces/{NS}/pods"),
            "application/json",
            &p,
        )
        .await;
        assert!(code.is_success(), "churn: {code} {v}");
    }
}

fn data_i(obj: &Value) -> Option<usize> {
    obj["data"]["i"].as_str().and_then(|s| s.parse().ok())
}

/// What a consistent LIST through `base` says `name` holds.
async fn list_sees(base: &str, name: &str) -> Option<usize> {
    let (code, v) = get_json(&cm_url(base, None)).await;
    assert_eq!(code, StatusCode::OK, "{v}");
    v["items"]
        .as_array()?
        .iter()
        .find(|o| o["metadata"]["name"] == name)
        .and_then(data_i)
}

/// What a consistent GET through `base` says `name` holds.
async fn get_sees(base: &str, name: &str) -> Option<usize> {
    let (code, v) = get_json(&cm_url(base, Some(name))).await;
    assert_eq!(code, StatusCode::OK, "{v}");
    data_i(&v)
}

/// What the initial events of a watch-list through `base` say `name` holds.
async fn watch_list_sees(base: &str, name: &str) -> Option<usize> {
    let url = format!(
        "{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10",
        cm_url(base, None)
    );
    let mut w = watch(&url).await;
    assert_eq!(w.status, StatusCode::OK);
    let mut seen = None;
    loop {
        let ev = w.next_event(Duration::from_secs(10)).await;
        if ev["type"] == "BOOKMARK" {
            if ev["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true" {
                return seen;
            }
            continue;
        }
        assert_eq!(ev["type"], "ADDED", "initial events are ADDED: {ev}");
        if ev["object"]["metadata"]["name"] == name {
            seen = data_i(&ev["object"]);
        }
    }
}

/// Writes `rounds` times; right after each acknowledgement, a consistent LIST, GET and
/// watch-list through watchmux run at once. Returns the reads that missed the write they
/// followed. Every third round the configmaps stay quiet for a while first, while pods churn.
async fn reads_after_writes(sim_url: &str, proxy_url: &str, rounds: usize) -> Vec<String> {
    let mut missed = Vec::new();
    let mut last: Option<(String, usize)> = None;
    for i in 0..rounds {
        if i % 3 == 2 {
            churn_other(sim_url, 5, &i.to_string()).await;
            tokio::time::sleep(WATCH_LAG * 2).await;
            // Configmaps have been quiet while pods moved the global resourceVersion: the
            // cache's own resourceVersion is behind the upstream's, yet it holds every
            // configmap write. A consistent read must be served (proven by the upstream's
            // bookmark), and show the last write.
            if let Some((name, v)) = &last {
                let (l, g) = tokio::join!(list_sees(proxy_url, name), get_sees(proxy_url, name));
                for (what, got) in [("quiet list", l), ("quiet get", g)] {
                    if got.is_none_or(|g| g < *v) {
                        missed.push(format!("{what} after write {v} saw {got:?}"));
                    }
                }
            }
        }
        // Values above every earlier one: a read that shows an older state is caught.
        let v = CMS * (i + 1) + i;
        write(sim_url, v).await;
        let name = format!("cm-{}", v % CMS);
        let (l, g, w) = tokio::join!(
            list_sees(proxy_url, &name),
            get_sees(proxy_url, &name),
            watch_list_sees(proxy_url, &name)
        );
        for (what, got) in [("list", l), ("get", g), ("watch-list", w)] {
            if got.is_none_or(|g| g < v) {
                missed.push(format!("{what} after write {v} saw {got:?}"));
            }
        }
        last = Some((name, v));
    }
    missed
}

/// How the freshness check may prove a quiet resource's cache current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proofs {
    /// Comparing the states first (the default: configmaps are few), then the short watch.
    State,
    /// The short watch only (`consistent_read_state_max_objects = 0`).
    Watch,
}

async fn setup(proofs: Proofs) -> (kube_sim::Simulator, TestProxy) {
    // kube's bookmark frequency (the test kit's default is 1 s): the cache's own watch does not
    // tell it that the upstream moved on.
    let sim = sim_with(|c| c.bookmark_interval = Duration::from_secs(60)).await;
    for i in 0..CMS {
        write_as(&sim.url(), i, true).await;
    }
    let p = proxy_for(&sim, |c| {
        if proofs == Proofs::Watch {
            c.cache.consistent_read_state_max_objects = 0;
        }
    })
    .await;
    sim.faults().set_watch_lag(WATCH_LAG);
    (sim, p)
}

fn configmaps(sim: &kube_sim::Simulator) -> Value {
    sim.stats()["resources"]["configmaps"].clone()
}

fn freshness(p: &TestProxy) -> std::sync::Arc<watchmux::reflector::Freshness> {
    p.proxy
        .slot("", "v1", "configmaps")
        .and_then(|s| s.freshness().cloned())
        .expect("configmaps are cached")
}

/// The checks' outcomes for configmaps, as watchmux counts them.
fn outcomes(p: &TestProxy) -> Vec<(String, f64)> {
    let prefix = "watchmux_freshness_checks_total{outcome=\"";
    p.proxy
        .metrics
        .render()
        .lines()
        .filter(|l| l.starts_with(prefix) && l.contains("resource=\"configmaps\""))
        .filter_map(|l| {
            let outcome = l[prefix.len()..].split('"').next()?.to_string();
            Some((outcome, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect()
}

fn outcome(p: &TestProxy, name: &str) -> f64 {
    outcomes(p)
        .iter()
        .find(|(o, _)| o == name)
        .map_or(0.0, |(_, n)| *n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_reads_see_every_acknowledged_write_and_stay_in_the_cache() {
    let (sim, p) = setup(Proofs::Watch).await;
    let before = configmaps(&sim);
    let rounds = 12;
    let missed = reads_after_writes(&sim.url(), &p.url, rounds).await;
    assert!(missed.is_empty(), "read-your-writes violated: {missed:#?}");
    // No full LIST reached the upstream: a freshness check's LIST carries at most one item
    // (a full one would carry all {CMS}).
    let after = configmaps(&sim);
    let items =
        after["listItemsSent"].as_u64().unwrap() - before["listItemsSent"].as_u64().unwrap();
    let lists = after["listRequests"].as_u64().unwrap() - before["listRequests"].as_u64().unwrap();
    assert!(
        items <= lists && lists > 0,
        "upstream saw {lists} LISTs with {items} items for {rounds} rounds of reads"
    );
    assert!(
        outcome(&p, "bookmark") > 0.0,
        "a quiet resource was proven fresh by the upstream's bookmark: {:?}",
        outcomes(&p)
    );
}

/// With the state comparison (the default for a resource this small), the same reads see
/// every write; a quiet resource is proven by one metadata LIST, without a watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_proofs_see_every_acknowledged_write_and_prove_a_quiet_resource_in_one_request() {
    let (sim, p) = setup(Proofs::State).await;
    let missed = reads_after_writes(&sim.url(), &p.url, 9).await;
    assert!(missed.is_empty(), "read-your-writes violated: {missed:#?}");
    assert!(
        outcome(&p, "state") > 0.0 && outcome(&p, "bookmark") == 0.0,
        "the quiet reads were proven by comparing states: {:?}",
        outcomes(&p)
    );
    // Quiet configmaps while pods move the global resourceVersion: a consistent read costs the
    // upstream no watch, and one LIST (of metadata) once the check knows the resource is
    // usually behind (the first may ask for one item first: a second LIST, no wait).
    for (round, most) in [(0, 2), (1, 1)] {
        churn_other(&sim.url(), 5, &format!("quiet-{round}")).await;
        tokio::time::sleep(WATCH_LAG * 2).await;
        let before = configmaps(&sim);
        let state_before = outcome(&p, "state");
        let upstream_rv = sim.store().revision();
        let (code, list) = get_json(&cm_url(&p.url, None)).await;
        assert_eq!(code, StatusCode::OK, "{list}");
        // As kube's: the list's resourceVersion is at least the upstream's when it was asked
        // (the proven state is the upstream's there, whatever the cache's own).
        let list_rv: u64 = list["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap();
        assert!(
            list_rv >= upstream_rv,
            "list at {list_rv}, upstream at {upstream_rv}"
        );
        let after = configmaps(&sim);
        let delta = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
        let (lists, watches) = (delta("listRequests"), delta("watchRequests"));
        assert!(
            (1..=most).contains(&lists) && watches == 0,
            "quiet read {round}: {lists} LISTs, {watches} watches; {:?}",
            outcomes(&p)
        );
        assert_eq!(outcome(&p, "state"), state_before + 1.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_freshness_check_serves_stale_reads() {
    let (sim, p) = setup(Proofs::State).await;
    freshness(&p).set_unchecked(true);
    let missed = reads_after_writes(&sim.url(), &p.url, 6).await;
    assert!(
        missed.len() >= 6,
        "without the check, reads right after a write must miss it (the watch lags {WATCH_LAG:?}); missed only {missed:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_consistent_reads_share_the_freshness_requests() {
    let (sim, p) = setup(Proofs::Watch).await;
    write(&sim.url(), 1000).await;
    let before = configmaps(&sim);
    let readers = 50;
    let reads = (0..readers).map(|_| list_sees(&p.url, "cm-0"));
    let seen = futures_util::future::join_all(reads).await;
    assert!(seen.iter().all(|s| *s == Some(1000)), "{seen:?}");
    let after = configmaps(&sim);
    let delta = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    // Two rounds at most (one under way, one for everyone who arrived meanwhile), each a LIST
    // of one item and at most one short watch.
    assert!(
        delta("listRequests") <= 3 && delta("watchRequests") <= 3,
        "{readers} concurrent consistent LISTs cost the upstream {} LISTs and {} watches",
        delta("listRequests"),
        delta("watchRequests")
    );
    assert!(delta("listItemsSent") <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprovable_read_goes_to_the_upstream() {
    let (sim, p) = setup(Proofs::Watch).await;
    // The upstream fails the freshness check's first request: the read cannot be proven fresh
    // from the cache, so the upstream answers it, as kube-apiserver falls back to etcd.
    let i = 2000;
    write(&sim.url(), i).await;
    let before = configmaps(&sim);
    sim.faults().fail_next(500, 1, 0, "/configmaps");
    assert_eq!(list_sees(&p.url, "cm-0").await, Some(i));
    let after = configmaps(&sim);
    assert!(
        after["listItemsSent"].as_u64().unwrap() - before["listItemsSent"].as_u64().unwrap()
            >= CMS as u64,
        "the full LIST went to the upstream"
    );
    sim.faults().clear();
    let m = p.proxy.metrics.render();
    assert!(
        m.lines().any(|l| l.starts_with("watchmux_reads_total{reason=\"not_fresh\",resource=\"configmaps\",source=\"pass_through\",verb=\"list\"}") && l.ends_with(" 1")),
        "{}",
        m.lines().filter(|l| l.starts_with("watchmux_reads_total{") && l.contains("configmaps")).collect::<Vec<_>>().join("\n")
    );
}

/// A watch-list whose freshness cannot be proven is not passed upstream (where it would hold an
/// upstream watch for its whole life): it gets kube's ERROR event for a watch cache that could
/// not catch up (504 `Too large resource version`, retry after 1 s), as from kube-apiserver,
/// and the client's retry is served from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprovable_watch_list_gets_kubes_error_event_not_an_upstream_watch() {
    let (sim, p) = setup(Proofs::Watch).await;
    write(&sim.url(), 3000).await;
    let before = configmaps(&sim);
    sim.faults().fail_next(500, 1, 0, "/configmaps");
    let q = "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dcm-0";
    let mut w = watch(&format!("{}{q}", p.url)).await;
    assert_eq!(w.status, StatusCode::OK);
    let ev = w.next_event(Duration::from_secs(10)).await;
    assert_eq!(ev["type"], "ERROR", "{ev}");
    let status = &ev["object"];
    assert_eq!(
        (&status["code"], &status["reason"]),
        (&json!(504), &json!("Timeout")),
        "{ev}"
    );
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Timeout: Too large resource version: ")),
        "{ev}"
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 1, "{ev}");
    assert_eq!(
        status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{ev}"
    );
    let after = configmaps(&sim);
    assert_eq!(
        after["watchRequests"].as_u64().unwrap() - before["watchRequests"].as_u64().unwrap(),
        0,
        "the watch-list was passed upstream"
    );
    // The retry (the fault is spent) is proven fresh and served from the cache.
    let mut w = watch(&format!("{}{q}", p.url)).await;
    let ev = w.next_event(Duration::from_secs(10)).await;
    assert_eq!(ev["type"], "ADDED", "{ev}");
    assert_eq!(ev["object"]["metadata"]["name"], "cm-0", "{ev}");
}

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Step {
    /// Update configmap `cm-k` (through the upstream, acknowledged before the next step).
    Write(usize),
    /// Create `n` pods: the global resourceVersion moves, configmaps stay quiet.
    Churn(usize),
    /// Let time pass (the upstream's watches catch up, or not).
    Pause(u64),
    /// A consistent read of `cm-k` through watchmux, of this kind.
    Read(usize, ReadKind),
}

#[derive(Debug, Clone, Copy)]
enum ReadKind {
    List,
    Get,
    WatchList,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (0..4usize).prop_map(Step::Write),
        1 => (1..6usize).prop_map(Step::Churn),
        1 => (0..700u64).prop_map(Step::Pause),
        4 => (0..4usize, prop_oneof![Just(ReadKind::List), Just(ReadKind::Get), Just(ReadKind::WatchList)])
            .prop_map(|(k, r)| Step::Read(k, r)),
    ]
}

/// The property: in any history of writes, churn on other resources, pauses and consistent
/// reads, with the upstream's watches lagging its acknowledgements, every read shows the last
/// acknowledged write of what it reads (or a newer one: none here, writes are sequential).
/// Generated histories with a fixed seed (each case costs real HTTP round trips, so they are
/// few and not shrunk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn property_every_consistent_read_shows_the_last_acknowledged_write() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let (sim, p) = setup(Proofs::State).await;
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[13; 32]),
    );
    let histories = proptest::collection::vec(step(), 4..12);
    // What each configmap holds upstream: `data.i`, as `setup` wrote it.
    let mut model: Vec<usize> = (0..CMS).collect();
    let mut next = 10_000;
    let mut reads = 0;
    for case in 0..6 {
        let history = histories
            .new_tree(&mut runner)
            .expect("a history")
            .current();
        for (i, s) in history.iter().enumerate() {
            match *s {
                Step::Write(k) => {
                    // A value whose `i % CMS` names configmap k.
                    next += CMS - (next % CMS) + k;
                    write(&sim.url(), next).await;
                    model[k] = next;
                }
                Step::Churn(n) => churn_other(&sim.url(), n, &format!("p{case}-{i}")).await,
                Step::Pause(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Step::Read(k, kind) => {
                    let name = format!("cm-{k}");
                    let got = match kind {
                        ReadKind::List => list_sees(&p.url, &name).await,
                        ReadKind::Get => get_sees(&p.url, &name).await,
                        ReadKind::WatchList => watch_list_sees(&p.url, &name).await,
                    };
                    reads += 1;
                    assert_eq!(
                        got,
                        Some(model[k]),
                        "case {case}, step {i} of {history:?}: {kind:?} of {name}"
                    );
                }
            }
        }
    }
    assert!(reads >= 10, "the histories read something: {reads}");
}

/// The sum of watchmux's series of `name` whose labels contain every one of `has`.
fn series_sum(p: &TestProxy, name: &str, has: &[&str]) -> f64 {
    p.proxy
        .metrics
        .render()
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && has.iter().all(|h| l.contains(h)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn list_rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a list's resourceVersion: {v}"))
}

/// A kind with no objects at all (a cluster with no Deployments, no Jobs, no Nodes) is proven
/// fresh like any other: after its first read starts its cache, its consistent LISTs (plain and
/// PartialObjectMetadataList, whose empty `items` kube writes as `null`), its watch-lists and a
/// GET of an object it does not have are answered from the cache, while pods move the upstream's
/// resourceVersion past the empty kind's own. None passes through as `not_fresh`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_kind_is_proven_fresh_and_its_consistent_reads_stay_in_the_cache() {
    use watchmux::config::CacheMode;
    // kube's bookmark frequency: no upstream bookmark tells the empty caches that the upstream
    // moved on, so only a freshness check can prove them.
    let sim = sim_with(|c| c.bookmark_interval = Duration::from_secs(60)).await;
    let p = proxy_for(&sim, |c| {
        c.cache.mode = CacheMode::OnDemand;
        c.cache.resources.clear();
    })
    .await;
    const META: &str =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    // (group, collection path, a missing object's path, metrics label)
    let kinds = [
        (
            "apps",
            "/apis/apps/v1/deployments",
            "/apis/apps/v1/namespaces/default/deployments/none",
            "deployments.apps",
        ),
        (
            "batch",
            "/apis/batch/v1/jobs",
            "/apis/batch/v1/namespaces/default/jobs/none",
            "jobs.batch",
        ),
        ("", "/api/v1/nodes", "/api/v1/nodes/none", "nodes"),
    ];
    for (group, path, _, _) in kinds {
        // The first read starts the kind's cache (and passes through while it syncs).
        let (code, v) = get_json(&format!("{}{path}", p.url)).await;
        assert_eq!(code, StatusCode::OK, "{path}: {v}");
        let resource = path.rsplit('/').next().unwrap();
        let mut synced = false;
        for _ in 0..2000 {
            if p.proxy
                .cache(group, "v1", resource)
                .is_some_and(|c| c.is_synced())
            {
                synced = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(synced, "{path} was not cached within 20 s");
    }
    for round in 0..3 {
        for (_, path, missing, label) in kinds {
            // Other kinds move the upstream's resourceVersion: the empty cache is behind it.
            churn_other(&sim.url(), 2, &format!("{round}-{label}")).await;
            let upstream_rv = sim.store().revision();
            let case = format!("round {round}, {path}");

            let (code, list) = get_json(&format!("{}{path}", p.url)).await;
            assert_eq!(code, StatusCode::OK, "{case}: {list}");
            assert_eq!(list["items"], json!([]), "{case}: {list}");
            assert!(list_rv(&list) >= upstream_rv, "{case}: {list}");

            let (code, _, body) = request(
                Method::GET,
                &format!("{}{path}", p.url),
                &[("Accept", META)],
                "",
            )
            .await;
            assert_eq!(code, StatusCode::OK, "{case}");
            let meta: Value = serde_json::from_slice(&body).expect("a JSON list");
            assert_eq!(meta["kind"], "PartialObjectMetadataList", "{case}: {meta}");
            assert_eq!(
                meta["items"],
                Value::Null,
                "{case}: kube writes null: {meta}"
            );
            assert!(list_rv(&meta) >= upstream_rv, "{case}: {meta}");

            // A GET of an object the kind does not have: kube's 404, byte for byte.
            let (code, _, got) =
                request(Method::GET, &format!("{}{missing}", p.url), &[], "").await;
            let (sim_code, _, want) =
                request(Method::GET, &format!("{}{missing}", sim.url()), &[], "").await;
            assert_eq!(
                (code, sim_code),
                (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND),
                "{case}"
            );
            assert_eq!(got, want, "{case}: the 404's body");

            let mut w = watch(&format!(
                "{}{path}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10",
                p.url
            ))
            .await;
            assert_eq!(w.status, StatusCode::OK, "{case}");
            let ev = w.next_event(Duration::from_secs(10)).await;
            assert_eq!(ev["type"], "BOOKMARK", "{case}: no initial events: {ev}");
            assert_eq!(
                ev["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
                "{case}: {ev}"
            );
            assert!(list_rv(&ev["object"]) >= upstream_rv, "{case}: {ev}");
        }
    }
    for (_, path, _, label) in kinds {
        let resource = format!("resource=\"{label}\"");
        let reads = |source: &str, verb: &str| {
            series_sum(
                &p,
                "watchmux_reads_total",
                &[
                    &resource,
                    &format!("source=\"{source}\""),
                    &format!("verb=\"{verb}\""),
                ],
            )
        };
        // The consistent GETs went upstream, as kube-apiserver reads them from etcd; of the
        // rest, at most the first read (before the sync) passed through; nothing was not fresh.
        let consistent_gets = series_sum(
            &p,
            "watchmux_reads_total",
            &[&resource, "verb=\"get\"", "reason=\"consistent_get\""],
        );
        assert_eq!(consistent_gets, 3.0, "{path}");
        let passed = reads("pass_through", "list") + reads("pass_through", "get") - consistent_gets
            + reads("pass_through", "watch");
        assert!(
            passed <= 1.0
                && series_sum(
                    &p,
                    "watchmux_reads_total",
                    &[&resource, "reason=\"not_fresh\""]
                ) == 0.0,
            "{path}: {:?}",
            p.proxy
                .metrics
                .render()
                .lines()
                .filter(|l| l.contains(&resource) && l.starts_with("watchmux_reads_total"))
                .filter(|l| !l.ends_with(" 0"))
                .collect::<Vec<_>>()
        );
        assert!(
            reads("cache", "list") >= 6.0 && reads("cache", "watch") == 3.0,
            "{path}"
        );
        assert_eq!(
            series_sum(
                &p,
                "watchmux_freshness_checks_total",
                &[&resource, "outcome=\"failed\""]
            ),
            0.0,
            "{path}"
        );
    }
}

/// How a reader of the herd reads its configmap.
#[derive(Debug, Clone, Copy)]
enum HerdRead {
    /// A consistent LIST scoped by `fieldSelector=metadata.name=`.
    List,
    /// A consistent watch-list scoped the same way (how the kubelet's ConfigMap and Secret
    /// managers start one watch per referenced object).
    WatchList,
}

/// The `data.i` a name-scoped consistent read through `base` shows for configmap `name`.
async fn scoped_read_sees(base: &str, name: &str, how: HerdRead) -> Option<usize> {
    let scoped = format!(
        "{}?fieldSelector=metadata.name%3D{name}",
        cm_url(base, None)
    );
    match how {
        HerdRead::List => {
            let (code, v) = get_json(&scoped).await;
            assert_eq!(code, StatusCode::OK, "{v}");
            let items = v["items"].as_array().expect("items");
            assert!(items.len() <= 1, "{name}: {v}");
            items.first().and_then(data_i)
        }
        HerdRead::WatchList => {
            let mut w = watch(&format!(
                "{scoped}&watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=30"
            ))
            .await;
            assert_eq!(w.status, StatusCode::OK, "{name}");
            let mut seen = None;
            loop {
                let ev = w.next_event(Duration::from_secs(10)).await;
                if ev["type"] == "BOOKMARK" {
                    if ev["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"]
                        == "true"
                    {
                        return seen;
                    }
                    continue;
                }
                assert_eq!(ev["object"]["metadata"]["name"], name, "{ev}");
                seen = data_i(&ev["object"]);
            }
        }
    }
}

/// The sum of watchmux's `watchmux_upstream_requests_total` series of configmaps' freshness
/// checks (every code).
fn freshness_requests(p: &TestProxy) -> f64 {
    series_sum(
        p,
        "watchmux_upstream_requests_total",
        &["resource=\"configmaps\"", "verb=\"freshness\""],
    )
}

/// A kubelet-like herd: 300 readers arriving one every 5 ms (1.5 s in all), each writing its own
/// configmap through the upstream and then, once the write is acknowledged, reading it back
/// through watchmux with a name-scoped consistent LIST or watch-list. Every read shows its own
/// write (linearizable), every read is answered from the cache, and the herd's freshness proofs
/// cost the upstream a few requests, not one per reader (each check, started every few
/// milliseconds against an idle upstream, would otherwise be over before the next reader came).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_herd_of_spread_consistent_reads_shares_a_few_freshness_checks() {
    const READERS: usize = 300;
    let sim = sim_with(|c| c.bookmark_interval = Duration::from_secs(60)).await;
    let cms = sim.resource("", "v1", "configmaps").unwrap();
    for i in 0..READERS {
        let obj =
            json!({"metadata": {"name": format!("herd-{i}"), "namespace": NS}, "data": {"i": "0"}});
        sim.ops().create(&cms, Some(NS), obj, false).unwrap();
    }
    let p = proxy_for(&sim, |_| {}).await;
    let reads_before = |p: &TestProxy| {
        (
            series_sum(
                p,
                "watchmux_reads_total",
                &["resource=\"configmaps\"", "source=\"cache\""],
            ),
            series_sum(
                p,
                "watchmux_reads_total",
                &["resource=\"configmaps\"", "source=\"pass_through\""],
            ),
        )
    };
    let (cached0, passed0) = reads_before(&p);
    let requests0 = freshness_requests(&p);
    let checks0 = series_sum(
        &p,
        "watchmux_freshness_checks_total",
        &["resource=\"configmaps\""],
    );
    let waits0 = series_sum(
        &p,
        "watchmux_freshness_waits_total",
        &["resource=\"configmaps\""],
    );
    let before = configmaps(&sim);
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..READERS {
        let (sim_url, proxy_url) = (sim.url(), p.url.clone());
        tasks.push(tokio::spawn(async move {
            // Arrivals spread over 1.5 s: load, not a wait for anything.
            tokio::time::sleep_until(start + Duration::from_millis(5 * i as u64)).await;
            let name = format!("herd-{i}");
            let v = 1_000 + i;
            let obj = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name,"namespace":NS},"data":{"i":v.to_string()}});
            let (code, body) =
                send_json(Method::PUT, &cm_url(&sim_url, Some(&name)), "application/json", &obj)
                    .await;
            assert!(code.is_success(), "write {name}: {code} {body}");
            let how = if i % 2 == 0 { HerdRead::List } else { HerdRead::WatchList };
            let seen = scoped_read_sees(&proxy_url, &name, how).await;
            (name, how, v, seen)
        }));
    }
    let mut missed = Vec::new();
    for t in tasks {
        let (name, how, v, seen) = t.await.unwrap();
        if seen != Some(v) {
            missed.push(format!("{how:?} of {name} after writing {v} saw {seen:?}"));
        }
    }
    let spread = start.elapsed();
    assert!(missed.is_empty(), "read-your-writes violated: {missed:#?}");
    let (cached, passed) = reads_before(&p);
    assert_eq!(
        passed - passed0,
        0.0,
        "every read was answered from the cache"
    );
    assert_eq!(cached - cached0, READERS as f64);
    let requests = freshness_requests(&p) - requests0;
    let checks = series_sum(
        &p,
        "watchmux_freshness_checks_total",
        &["resource=\"configmaps\""],
    ) - checks0;
    let after = configmaps(&sim);
    let delta = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    let (lists, watches) = (delta("listRequests"), delta("watchRequests"));
    eprintln!(
        "{READERS} consistent reads over {spread:?}: {checks} freshness checks, {requests} \
         upstream freshness requests ({lists} LISTs, {watches} watches at the simulator)"
    );
    // Every upstream LIST and watch of configmaps in the meantime was a freshness check's
    // (watchmux counts those answered: a short watch the check gave up on before its answer,
    // the cache having caught up meanwhile, reached the simulator only).
    let upstream = (lists + watches) as f64;
    assert!(requests <= upstream, "{requests} counted");
    let waits = series_sum(
        &p,
        "watchmux_freshness_waits_total",
        &["resource=\"configmaps\""],
    ) - waits0;
    assert_eq!(waits, READERS as f64, "each read waited for a check");
    // Checks start at least the interval apart, so no more of them started than the interval
    // fits in the time the herd took (however slow the machine, which only loosens this); each
    // costs one or two requests (rarely a few), far fewer than one per reader in all.
    let interval = watchmux::config::CacheConfig::default().consistent_read_check_interval;
    let most_checks = (spread.as_secs_f64() / interval.as_secs_f64()).floor() + 1.0;
    assert!(
        checks <= most_checks && upstream <= 30.0,
        "{READERS} consistent reads in {spread:?} cost {upstream} upstream freshness requests \
         in {checks} checks (at most {most_checks} checks fit the {interval:?} interval)"
    );
}
