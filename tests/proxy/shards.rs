//! Sharded LIST and WATCH (`shardSelector`, KEP-5866, kube 1.36) answered from the cache, for
//! any upstream: N consumers, each reading one range of the pods' hashed uids, together read
//! every pod exactly once, in LISTs (paged), WATCHes and watch-lists, under churn; a selector
//! kube refuses gets kube's 500; a read the cache does not answer is passed through only to an
//! upstream that applies the selector.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube_sim::fleet::FleetSpec;
use kube_wire::shard::{ShardSelector, shard_hash};
use serde_json::Value;

use crate::common::churn::Churn;
use crate::common::*;

fn fleet() -> FleetSpec {
    FleetSpec {
        nodes: 4,
        pods: 240,
        namespaces: 5,
        seed: 23,
    }
}

/// The selector of shard `i` of 4 over the pods' uids, as a client writes it (`"0x…"` bounds
/// in double quotes, spaces as it likes: kube's canonical form is what comes back).
fn quarter(i: u128) -> String {
    let q: u128 = 1 << 62;
    format!(
        "shardRange( object.metadata.uid,\"0x{:016x}\", \"0x{:016x}\" )",
        i * q,
        (i + 1) * q
    )
}

/// Which quarter a uid falls in.
fn quarter_of(uid: &str) -> usize {
    (shard_hash(uid.as_bytes()) >> 62) as usize
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Every page of a LIST of `url` (`limit` per page) with `at` (its resourceVersion options) on
/// the first page, following `continue` (which carries them): the items' `ns/name` → uid, and
/// the first page's metadata.
async fn list_all(url: &str, at: &str, limit: usize) -> (BTreeMap<String, String>, Value) {
    let mut items = BTreeMap::new();
    let mut token = String::new();
    let mut first = None;
    for _ in 0..10_000 {
        let sep = if url.contains('?') { '&' } else { '?' };
        let mut u = format!("{url}{sep}limit={limit}");
        if token.is_empty() {
            u.push_str(&format!("&{at}"));
        } else {
            u.push_str(&format!("&continue={}", enc(&token)));
        }
        let (code, v) = get_json(&u).await;
        assert_eq!(code, 200, "{u}: {v}");
        for i in v["items"].as_array().expect("items") {
            let m = &i["metadata"];
            let key = format!(
                "{}/{}",
                m["namespace"].as_str().unwrap(),
                m["name"].as_str().unwrap()
            );
            let dup = items.insert(key.clone(), m["uid"].as_str().unwrap().to_string());
            assert!(dup.is_none(), "{key} twice in {url}");
        }
        token = v["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        first.get_or_insert(v["metadata"].clone());
        if token.is_empty() {
            return (items, first.unwrap_or_default());
        }
    }
    panic!("{url}: endless pages");
}

/// Four shards' LISTs at one resourceVersion partition the LIST without a selector at it
/// exactly (union all, pairwise disjoint, each pod in the shard its uid hashes to), paged and
/// whole, while pods churn; each typed list echoes the selector in kube's canonical form and
/// counts no remaining items; a Table does not echo it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_shards_partition_the_pods_lists_under_churn() {
    let sim = sim_with(|c| c.fleet = Some(fleet())).await;
    let px = proxy_for(&sim, |_| {}).await;
    let churn = Churn::start(&sim, 50.0, 3, &fleet());
    churn.wait_writes(20).await;
    let pods = format!("{}/api/v1/pods", px.url);
    for round in 0..3 {
        let (code, all) = get_json(&format!("{pods}?resourceVersion=0")).await;
        assert_eq!(code, 200);
        let rv = all["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        let at = format!("resourceVersion={rv}&resourceVersionMatch=Exact");
        let (everything, _) = list_all(&pods, &at, 1000).await;
        let mut union = BTreeMap::new();
        for i in 0..4u128 {
            let sel = quarter(i);
            let canonical = ShardSelector::parse(&sel).unwrap().to_string();
            let url = format!("{pods}?shardSelector={}", enc(&sel));
            let (paged, meta) = list_all(&url, &at, 7).await;
            assert_eq!(
                meta["shardInfo"]["selector"],
                canonical.as_str(),
                "round {round}"
            );
            assert!(meta.get("remainingItemCount").is_none(), "{meta}");
            let (whole, _) = list_all(&url, &at, 0).await;
            assert_eq!(paged, whole, "shard {i} paged and whole");
            for (key, uid) in &paged {
                assert_eq!(quarter_of(uid), i as usize, "{key} in shard {i}");
                assert!(
                    union.insert(key.clone(), uid.clone()).is_none(),
                    "{key} in two shards"
                );
            }
        }
        assert_eq!(
            union, everything,
            "round {round}: the shards are the whole list"
        );
        churn.wait_writes(20).await;
    }
    churn.stop().await;
    // A Table drops shardInfo, as kube's conversion does; its rows are still the shard's.
    let sel = quarter(1);
    let (code, body) = get_accepting(
        &px.url,
        &format!("/api/v1/pods?shardSelector={}", enc(&sel)),
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(code, 200);
    let t: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        t["metadata"].get("shardInfo").is_none(),
        "{}",
        t["metadata"]
    );
    assert!(!t["rows"].as_array().unwrap().is_empty());
}

/// Four shard watches and a watch of everything, from one resourceVersion, under churn: each
/// shard watch gets exactly the events of the whole watch whose pod hashes into its range, in
/// the same order; a shard watch-list's initial events are exactly the range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_watches_and_watch_lists_get_exactly_their_range() {
    let sim = sim_with(|c| c.fleet = Some(fleet())).await;
    let px = proxy_for(&sim, |_| {}).await;
    let pods = format!("{}/api/v1/pods", px.url);
    let (code, all) = get_json(&format!("{pods}?resourceVersion=0")).await;
    assert_eq!(code, 200);
    let rv = all["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let from = |extra: &str| format!("{pods}?watch=1&resourceVersion={rv}{extra}");
    let mut whole = watch(&from("")).await;
    let mut shards = Vec::new();
    for i in 0..4u128 {
        shards.push(watch(&from(&format!("&shardSelector={}", enc(&quarter(i))))).await);
    }
    let churn = Churn::start(&sim, 80.0, 4, &fleet());
    churn.wait_writes(150).await;
    churn.stop().await;
    // The whole watch's events, each with its pod's uid, until it is quiet.
    let mut events: Vec<(String, String, String)> = Vec::new();
    while let Next::Line(l) = whole.next_line(Duration::from_secs(3)).await {
        let v: Value = serde_json::from_slice(&l).unwrap();
        let m = &v["object"]["metadata"];
        events.push((
            v["type"].as_str().unwrap().to_string(),
            m["name"].as_str().unwrap().to_string(),
            m["uid"].as_str().unwrap().to_string(),
        ));
    }
    assert!(events.len() >= 100, "{} events", events.len());
    for (i, w) in shards.iter_mut().enumerate() {
        let want: Vec<_> = events
            .iter()
            .filter(|e| quarter_of(&e.2) == i)
            .cloned()
            .collect();
        let mut got = Vec::new();
        while got.len() < want.len() {
            match w.next_line(Duration::from_secs(10)).await {
                Next::Line(l) => {
                    let v: Value = serde_json::from_slice(&l).unwrap();
                    let m = &v["object"]["metadata"];
                    got.push((
                        v["type"].as_str().unwrap().to_string(),
                        m["name"].as_str().unwrap().to_string(),
                        m["uid"].as_str().unwrap().to_string(),
                    ));
                }
                other => panic!(
                    "shard {i}: {other:?} after {} of {} events",
                    got.len(),
                    want.len()
                ),
            }
        }
        assert!(
            got == want,
            "shard {i}: its events are the whole watch's in its range"
        );
        assert!(
            matches!(w.next_line(Duration::from_millis(300)).await, Next::Timeout),
            "shard {i}: nothing more"
        );
    }
    // A watch-list of shard 2: ADDED for exactly its pods, then the initial-events-end bookmark.
    let (_, now) = get_json(&format!("{pods}?resourceVersion=0")).await;
    let want: BTreeSet<String> = now["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| quarter_of(p["metadata"]["uid"].as_str().unwrap()) == 2)
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let mut wl = watch(&format!(
        "{pods}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector={}",
        enc(&quarter(2))
    ))
    .await;
    let mut got = BTreeSet::new();
    loop {
        let Next::Line(l) = wl.next_line(Duration::from_secs(10)).await else {
            panic!("the watch-list ended before its bookmark");
        };
        let v: Value = serde_json::from_slice(&l).unwrap();
        if v["type"] == "BOOKMARK" {
            assert_eq!(
                v["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
                "{v}"
            );
            break;
        }
        assert_eq!(v["type"], "ADDED");
        got.insert(
            v["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(got, want);
}

/// Selectors kube refuses get its answer, word for word: a 500 with no reason and the parse
/// error's text, for a LIST and a WATCH alike; an empty parameter is no selector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_shard_selectors_get_kubes_500() {
    let sim = sim_with(|c| c.fleet = Some(fleet())).await;
    let px = proxy_for(&sim, |_| {}).await;
    let pods = format!("{}/api/v1/pods", px.url);
    for (sel, message) in [
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
        ),
        (
            "shardRange(metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            "invalid shard selector: unsupported field path \"metadata.uid\"; supported: object.metadata.uid, object.metadata.namespace",
        ),
        (
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
            "invalid shard selector: shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
        ),
        (
            "   ",
            "invalid shard selector: empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
            "invalid shard selector: unsupported function \"_&&_\"; only shardRange() and || are allowed",
        ),
        (
            "shardRange(object.metadata.uid, 7, '0x8000000000000000')",
            "invalid shard selector: hexStart must be a string literal, got int64",
        ),
    ] {
        for q in ["", "watch=1&"] {
            let url = format!("{pods}?{q}shardSelector={}", enc(sel));
            let (code, v) = get_json(&url).await;
            assert_eq!(code, 500, "{url}: {v}");
            assert_eq!(v["message"], message, "{url}");
            assert_eq!(v["code"], 500);
            assert!(v.get("reason").is_none(), "no reason: {v}");
        }
    }
    // A CEL syntax error: cel-go's first error after kube's prefix.
    let url = format!(
        "{pods}?shardSelector={}",
        enc("shardRange(object.metadata.uid, '0x0000000000000000'")
    );
    let (code, v) = get_json(&url).await;
    assert_eq!(code, 500, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid shard selector: CEL parse error: Syntax error: "),
        "{v}"
    );
    let (code, v) = get_json(&format!("{pods}?shardSelector=")).await;
    assert_eq!(code, 200);
    assert_eq!(v["items"].as_array().unwrap().len(), fleet().pods);
    assert!(v["metadata"].get("shardInfo").is_none());
}

/// A kind watchmux does not cache (services, in the tests' listed mode): a sharded read passes
/// through to an upstream that applies the selector (kube 1.36 with its gate on: the answer is
/// the upstream's), and is refused with 400 by watchmux in front of one that would ignore it
/// and send everything. Either way the upstream was asked once for the kind, not per read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncached_kind_is_sharded_only_by_an_upstream_that_applies_it() {
    for gate in [true, false] {
        let sim = sim_with(|c| c.sharded_list_and_watch = gate).await;
        for i in 0..12 {
            let svc = serde_json::json!({"apiVersion":"v1","kind":"Service","metadata":{"name":format!("s{i}"),"namespace":"default"},"spec":{"ports":[{"port":80}]}});
            create_object(&sim.url(), "/api/v1/namespaces/default/services", &svc).await;
        }
        let px = proxy_for(&sim, |_| {}).await;
        let q = format!("/api/v1/services?shardSelector={}", enc(&quarter(1)));
        let lists_before = sim.stats()["resources"]["services"]["listRequests"]
            .as_i64()
            .unwrap_or(0);
        for _ in 0..3 {
            let (code, v) = get_json(&format!("{}{q}", px.url)).await;
            if gate {
                assert_eq!(code, 200, "{v}");
                let (_, direct) = get_json(&format!("{}{q}", sim.url())).await;
                assert_eq!(v["items"], direct["items"]);
                assert!(v["metadata"]["shardInfo"]["selector"].is_string(), "{v}");
            } else {
                assert_eq!(code, 400, "{v}");
                assert_eq!(v["reason"], "BadRequest");
                assert!(
                    v["message"]
                        .as_str()
                        .unwrap()
                        .starts_with("shardSelector is not supported for /api/v1/services"),
                    "{v}"
                );
            }
        }
        let lists = sim.stats()["resources"]["services"]["listRequests"]
            .as_i64()
            .unwrap_or(0)
            - lists_before;
        // One probe; with the gate on, the three reads themselves (and the test's own three).
        assert_eq!(lists, if gate { 7 } else { 1 }, "gate {gate}");
        if gate {
            // A selector the upstream refuses: its own 500, passed through.
            let bad = format!("/api/v1/services?shardSelector={}", enc("x"));
            let (code, v) = get_json(&format!("{}{bad}", px.url)).await;
            assert_eq!(code, 500, "{v}");
            assert!(
                v["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("invalid shard selector: ")
            );
        }
    }
}
