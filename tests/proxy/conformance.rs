//! Conformance of watchmux with kube-apiserver (issue 3: clients must not be able to tell them
//! apart). Every LIST and WATCH form of spec §1.3–1.6 and §2 is sent to the simulator directly and
//! through watchmux, and the answers are compared: status, headers that matter, Status bodies,
//! list kind/apiVersion/metadata/items, and the sequence of watch events (types, names,
//! resourceVersions, the `k8s.io/initial-events-end` bookmark) — byte for byte wherever the answer
//! is deterministic. Forms the cache serves must not cost the upstream a single list or watch.
//!
//! Timing is never asserted: before each comparison we wait (on the cache's resourceVersion
//! channel) until watchmux's caches have reached the simulator's revision, and watches are read
//! until a marker write made after both streams are registered.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{Next, TestProxy, WatchStream, continuation};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::kinds::ResourceType;
use kube_sim::semantics::DeleteOptions;
use serde_json::{Value, json};

/// Upper bound for anything we wait on (never a timing assertion: only a hang guard).
const T: Duration = Duration::from_secs(10);
/// The resources the test proxy caches.
const CACHED: [&str; 4] = ["pods", "nodes", "namespaces", "configmaps"];

// ---------------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------------

struct Env {
    px: TestProxy,
    sim: Simulator,
    /// The revision right after watchmux synced, before the post-sync writes: watches and lists
    /// from here replay / see those writes.
    rv_before: u64,
    /// resourceVersion of a pod written long before watchmux listed (older than its list RV).
    rv_ancient: u64,
}

fn rt(sim: &Simulator, resource: &str) -> Arc<ResourceType> {
    sim.resource("", "v1", resource).expect("served type")
}

fn create(sim: &Simulator, resource: &str, ns: Option<&str>, obj: Value) -> u64 {
    sim.ops()
        .create(&rt(sim, resource), ns, obj, false)
        .unwrap_or_else(|s| panic!("create {resource}: {}", s.message))
        .rv
}

fn create_pod(sim: &Simulator, ns: &str, name: &str, node: &str, labels: Value) -> u64 {
    create(
        sim,
        "pods",
        Some(ns),
        crate::common::pod(name, node, labels),
    )
}

fn set_labels(sim: &Simulator, resource: &str, ns: Option<&str>, name: &str, labels: Value) -> u64 {
    sim.ops()
        .modify(&rt(sim, resource), ns, name, |v| {
            v["metadata"]["labels"] = labels
        })
        .unwrap_or_else(|s| panic!("modify {resource} {name}: {}", s.message))
        .rv
}

fn touch(sim: &Simulator, resource: &str, ns: Option<&str>, name: &str) -> u64 {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    sim.ops()
        .modify(&rt(sim, resource), ns, name, |v| {
            v["metadata"]["annotations"] = json!({ "touched": n.to_string() })
        })
        .unwrap_or_else(|s| panic!("touch {resource} {name}: {}", s.message))
        .rv
}

/// Deletes a pod at once (grace period 0) and returns the deletion's revision.
fn delete_pod_now(sim: &Simulator, ns: &str, name: &str) -> u64 {
    let r = sim
        .ops()
        .delete(
            &rt(sim, "pods"),
            Some(ns),
            name,
            &DeleteOptions {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .expect("delete");
    assert!(r.deleted, "grace period 0 deletes at once");
    sim.store().revision()
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Namespaces `ns1`, `ns1-x` (its keys sort *before* `ns1/…`: `-` < `/`), `ns2`; two nodes;
/// pods with assorted labels; a configmap with HTML characters; then watchmux; then writes
/// watchmux sees live (MODIFIED, ADDED, a move out of `app=web`, a real delete, another kind).
async fn env() -> Env {
    let sim = crate::common::sim().await;
    for ns in ["ns1", "ns1-x", "ns2"] {
        create(&sim, "namespaces", None, json!({"metadata": {"name": ns}}));
    }
    for n in ["node-1", "node-2"] {
        create(
            &sim,
            "nodes",
            None,
            json!({"metadata": {"name": n, "labels": {"zone": "a"}}}),
        );
    }
    let rv_ancient = create_pod(
        &sim,
        "ns1",
        "a",
        "node-1",
        json!({"app": "web", "gen": "1"}),
    );
    create_pod(&sim, "ns1", "b", "node-2", json!({"app": "db"}));
    create_pod(
        &sim,
        "ns1",
        "c",
        "node-2",
        json!({"app": "web", "tier": "be"}),
    );
    create_pod(&sim, "ns1-x", "p", "node-1", json!({"app": "web"}));
    create_pod(
        &sim,
        "ns2",
        "a",
        "node-1",
        json!({"app": "web", "gen": "3"}),
    );
    create_pod(&sim, "ns2", "d", "node-1", json!({}));
    create(
        &sim,
        "configmaps",
        Some("ns1"),
        json!({"metadata": {"name": "cm1"}, "data": {"k": "<v> & more"}}),
    );
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let rv_before = sim.store().revision();
    set_labels(
        &sim,
        "pods",
        Some("ns1"),
        "a",
        json!({"app": "web", "gen": "2"}),
    );
    create_pod(&sim, "ns1", "e", "node-2", json!({"app": "web"}));
    set_labels(
        &sim,
        "pods",
        Some("ns1"),
        "c",
        json!({"app": "db", "tier": "be"}),
    );
    delete_pod_now(&sim, "ns2", "d");
    create(
        &sim,
        "configmaps",
        Some("ns1"),
        json!({"metadata": {"name": "cm2"}}),
    );
    let e = Env {
        px,
        sim,
        rv_before,
        rv_ancient,
    };
    settle(&e).await;
    // The reflectors' watches are open (the caches may have learnt the writes above from their
    // LISTs): the tests count upstream reads from here.
    crate::common::reflectors_watching(&e.sim, &CACHED).await;
    e
}

/// Waits until every cache of watchmux has reached the simulator's current revision (events
/// or upstream bookmarks), so RV=0 answers and bookmark RVs are comparable.
async fn settle(e: &Env) {
    let target = e.sim.store().revision();
    for r in CACHED {
        let c = e.px.proxy.cache("", "v1", r).expect("cache discovered");
        assert!(
            c.wait_rv(target, T).await,
            "watchmux's {r} cache did not reach revision {target} (at {})",
            c.rv()
        );
        assert_eq!(c.rv(), target, "{r} cache ahead of the simulator?");
    }
}

/// List and watch requests the simulator has served for the cached resources.
fn upstream_reads(sim: &Simulator) -> (u64, u64) {
    let s = sim.stats();
    let mut lists = 0;
    let mut watches = 0;
    for r in CACHED {
        lists += s["resources"][r]["listRequests"].as_u64().unwrap();
        watches += s["resources"][r]["watchRequests"].as_u64().unwrap();
    }
    (lists, watches)
}

// ---------------------------------------------------------------------------------------------
// Comparing plain answers
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

async fn get(url: &str) -> Answer {
    get_with(url, &[]).await
}

async fn get_with(url: &str, headers: &[(&str, &str)]) -> Answer {
    use http_body_util::BodyExt;
    let (parts, body) = crate::common::send(Method::GET, url, headers, "")
        .await
        .into_parts();
    // A watch answered where a plain answer was expected would never end: say so instead.
    let body = match tokio::time::timeout(T, body.collect()).await {
        Ok(b) => b.expect("body").to_bytes(),
        Err(_) => Bytes::from_static(b"<still streaming: a watch answered instead?>"),
    };
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What a body means, for readable failure messages: a Status's fields, or a list's type,
/// metadata and `ns/name@rv` of its items.
fn summary(b: &[u8]) -> Value {
    // A protobuf body, in JSON (watchmux's transcoder; the bytes are compared too).
    let from_protobuf = kube_wire::proto::envelope::unwrap(b).ok().and_then(|u| {
        let msg = kube_wire::proto::message_for(u.api_version, u.kind)?;
        kube_wire::proto::proto_to_json(msg, u.raw, Some((u.api_version, u.kind))).ok()
    });
    let b = from_protobuf.as_deref().unwrap_or(b);
    let Ok(v) = serde_json::from_slice::<Value>(b) else {
        return json!({ "raw": text(b) });
    };
    if v["kind"] == "Status" {
        return json!({"code": v["code"], "reason": v["reason"], "message": v["message"],
                      "details": v["details"], "metadata": v["metadata"]});
    }
    match v["items"].as_array() {
        Some(items) => json!({
            "kind": v["kind"], "apiVersion": v["apiVersion"], "metadata": v["metadata"],
            "items": items.iter().map(item_id).collect::<Vec<_>>(),
        }),
        None => v,
    }
}

fn item_id(i: &Value) -> String {
    let m = &i["metadata"];
    format!(
        "{}/{}@{}",
        m["namespace"].as_str().unwrap_or(""),
        m["name"].as_str().unwrap_or(""),
        m["resourceVersion"].as_str().unwrap_or("")
    )
}

fn assert_same(case: &str, d: &Answer, p: &Answer) {
    assert_eq!(
        d.status,
        p.status,
        "{case}: status\n  sim:      {}\n  watchmux: {}",
        text(&d.body),
        text(&p.body)
    );
    for h in ["content-type", "retry-after", "cache-control"] {
        assert_eq!(d.headers.get(h), p.headers.get(h), "{case}: header {h}");
    }
    assert_eq!(
        summary(&d.body),
        summary(&p.body),
        "{case}: meaning differs"
    );
    assert_eq!(text(&d.body), text(&p.body), "{case}: bytes differ");
    assert!(d.body == p.body, "{case}: bytes differ");
}

/// GET `pq` from the simulator, then through watchmux, and compare. When `cached`, the
/// watchmux request must not reach the upstream at all.
async fn compare(e: &Env, case: &str, pq: &str, cached: bool) -> (Answer, Answer) {
    compare_with(e, case, pq, &[], cached).await
}

/// [`compare`] with request headers.
async fn compare_with(
    e: &Env,
    case: &str,
    pq: &str,
    headers: &[(&str, &str)],
    cached: bool,
) -> (Answer, Answer) {
    let d = get_with(&format!("{}{pq}", e.sim.url()), headers).await;
    let before = upstream_reads(&e.sim);
    let p = get_with(&format!("{}{pq}", e.px.url), headers).await;
    if cached {
        assert_eq!(
            upstream_reads(&e.sim),
            before,
            "{case}: a cache-served form reached the upstream"
        );
    }
    assert_same(case, &d, &p);
    (d, p)
}

/// The same GET sent to both at once.
async fn get_both(e: &Env, pq: &str) -> (Answer, Answer) {
    let (d, p) = (format!("{}{pq}", e.sim.url()), format!("{}{pq}", e.px.url));
    tokio::join!(get(&d), get(&p))
}

/// The same watch opened on both at once.
async fn watch_both(e: &Env, pq: &str) -> (WatchStream, WatchStream) {
    let (d, p) = (format!("{}{pq}", e.sim.url()), format!("{}{pq}", e.px.url));
    tokio::join!(crate::common::watch(&d), crate::common::watch(&p))
}

/// Reads the same watch `pq` on both (`d` from the simulator, `p` through watchmux) to its end:
/// both must answer 200 and end the stream cleanly. Every line each sent.
async fn both_to_the_end(
    pq: &str,
    d: &mut WatchStream,
    p: &mut WatchStream,
) -> (Vec<Bytes>, Vec<Bytes>) {
    assert_eq!(
        (d.status, p.status),
        (StatusCode::OK, StatusCode::OK),
        "{pq}"
    );
    let (dl, ds) = read_until(d, "sim", None).await;
    let (pl, ps) = read_until(p, "watchmux", None).await;
    assert_eq!(
        (ds, ps),
        (Stop::End, Stop::End),
        "{pq}: both end the stream"
    );
    (dl, pl)
}

fn json_of(a: &Answer) -> Value {
    serde_json::from_slice(&a.body).unwrap_or_else(|_| panic!("not JSON: {}", text(&a.body)))
}

fn continue_of(a: &Answer) -> Option<String> {
    json_of(a)["metadata"]["continue"]
        .as_str()
        .map(str::to_string)
}

fn ids(a: &Answer) -> Vec<String> {
    json_of(a)["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(item_id)
        .collect()
}

/// Follows `continue` tokens on both sides (each with its own token, continuation requests go
/// to the same server), comparing every page; returns all items of the paged list.
async fn follow_pages(e: &Env, case: &str, pq: &str, first: (Answer, Answer)) -> Vec<String> {
    let (mut d, mut p) = first;
    let mut all = ids(&d);
    let mut page = 1;
    while let Some(dt) = continue_of(&d) {
        let pt = continue_of(&p).expect("same answer, same token presence");
        page += 1;
        let case = format!("{case} (page {page})");
        d = get(&format!("{}{}", e.sim.url(), continuation(pq, &dt))).await;
        p = get(&format!("{}{}", e.px.url, continuation(pq, &pt))).await;
        assert_same(&case, &d, &p);
        all.extend(ids(&d));
        assert!(page < 20, "{case}: endless pages");
    }
    all
}

// ---------------------------------------------------------------------------------------------
// Comparing watches
// ---------------------------------------------------------------------------------------------

/// A write made after both watches are registered; each watch is read until its event.
#[derive(Debug, Clone)]
enum Marker {
    /// Create a pod `m-N` in the namespace with these labels (on node-1).
    Pod(&'static str, Value),
    /// Annotate an existing object (MODIFIED).
    Touch(&'static str, Option<&'static str>, &'static str),
    /// Create a node `node-mN`.
    Node,
    /// No marker: the stream ends by itself (ERROR, timeoutSeconds).
    None,
}

impl Marker {
    fn resource(&self) -> &'static str {
        match self {
            Marker::Pod(..) | Marker::None => "pods",
            Marker::Touch(r, ..) => r,
            Marker::Node => "nodes",
        }
    }

    /// Makes the write; returns its resourceVersion.
    fn apply(&self, sim: &Simulator) -> Option<u64> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        match self {
            Marker::Pod(ns, labels) => Some(create_pod(
                sim,
                ns,
                &format!("m-{n}"),
                "node-1",
                labels.clone(),
            )),
            Marker::Touch(r, ns, name) => Some(touch(sim, r, *ns, name)),
            Marker::Node => Some(create(
                sim,
                "nodes",
                None,
                json!({"metadata": {"name": format!("node-m{n}")}}),
            )),
            Marker::None => None,
        }
    }
}

/// How reading a stream stopped.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    /// The marker event arrived.
    Marker,
    /// The body ended cleanly.
    End,
}

fn ev(line: &[u8]) -> Value {
    serde_json::from_slice(line).unwrap_or_else(|e| panic!("bad event ({e}): {}", text(line)))
}

/// The event object's resourceVersion.
fn rv_of(v: &Value) -> Option<u64> {
    v["object"]["metadata"]["resourceVersion"]
        .as_str()?
        .parse()
        .ok()
}

fn is_end_bookmark(v: &Value) -> bool {
    v["type"] == "BOOKMARK"
        && v["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
}

/// Reads lines until the event with resourceVersion `marker` (or the end of the stream).
async fn read_until(w: &mut WatchStream, who: &str, marker: Option<u64>) -> (Vec<Bytes>, Stop) {
    let deadline = tokio::time::Instant::now() + T;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match w.next_line(left).await {
            Next::Line(l) => {
                let v = ev(&l);
                let done = v["type"] != "BOOKMARK" && marker.is_some_and(|m| rv_of(&v) == Some(m));
                lines.push(l);
                if done {
                    return (lines, Stop::Marker);
                }
            }
            Next::End => return (lines, Stop::End),
            other => panic!(
                "{who}: stream stopped before the marker ({marker:?}): {other:?}; got {:?}",
                lines.iter().map(|l| text(l)).collect::<Vec<_>>()
            ),
        }
    }
}

/// Drops periodic bookmarks (their timing is not deterministic); keeps the end-of-initial-events
/// bookmark.
fn deterministic(lines: &[Bytes]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| {
            let v = ev(l);
            v["type"] != "BOOKMARK" || is_end_bookmark(&v)
        })
        .map(|l| text(l))
        .collect()
}

/// `TYPE ns/name@rv` per event (`+end` on the end bookmark), for readable failures.
fn describe(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let v = ev(l.as_bytes());
            let o = &v["object"];
            if v["type"] == "ERROR" {
                return format!("ERROR {} {}", o["code"], o["message"]);
            }
            let end = if is_end_bookmark(&v) { " +end" } else { "" };
            format!("{} {}{end}", v["type"].as_str().unwrap(), item_id(o))
        })
        .collect()
}

/// Waits until the simulator has `sim_open` open watches on `resource` and watchmux has
/// `px_watchers` registered watchers: both watches have fixed their start point.
async fn wait_registered(e: &Env, resource: &str, sim_open: i64, px_watchers: usize) {
    let cache = e.px.proxy.cache("", "v1", resource).unwrap();
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let open = e.sim.stats()["resources"][resource]["openWatches"]
            .as_i64()
            .unwrap();
        if open >= sim_open && cache.watcher_count() >= px_watchers {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "watches on {resource} not registered: sim {open}/{sim_open}, watchmux {}/{px_watchers}",
            cache.watcher_count()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The result of one compared watch: the deterministic events (identical on both sides).
struct Watched {
    events: Vec<String>,
    stop: Stop,
}

/// Opens `pq` as a watch on both sides, makes the marker write once both are registered, reads
/// both until the marker (or their end) and compares what they delivered.
async fn compare_watch(e: &Env, case: &str, pq: &str, marker: Marker) -> Watched {
    compare_watch_with(e, case, pq, &[], marker).await
}

/// [`compare_watch`] with request headers.
async fn compare_watch_with(
    e: &Env,
    case: &str,
    pq: &str,
    headers: &[(&str, &str)],
    marker: Marker,
) -> Watched {
    settle(e).await;
    let res = marker.resource();
    let open = e.sim.stats()["resources"][res]["openWatches"]
        .as_i64()
        .unwrap();
    let watchers = e.px.proxy.cache("", "v1", res).unwrap().watcher_count();
    let before = upstream_reads(&e.sim);
    let (du, pu) = (format!("{}{pq}", e.sim.url()), format!("{}{pq}", e.px.url));
    let (mut d, mut p) = tokio::join!(
        crate::common::watch_with(&du, headers),
        crate::common::watch_with(&pu, headers)
    );
    assert_eq!(d.status, StatusCode::OK, "{case}: sim status");
    assert_eq!(p.status, d.status, "{case}: status");
    for h in ["content-type", "cache-control"] {
        assert_eq!(d.headers.get(h), p.headers.get(h), "{case}: header {h}");
    }
    let rv = if matches!(marker, Marker::None) {
        None
    } else {
        wait_registered(e, res, open + 1, watchers + 1).await;
        marker.apply(&e.sim)
    };
    let (dl, ds) = read_until(&mut d, &format!("{case} sim"), rv).await;
    let (pl, ps) = read_until(&mut p, &format!("{case} watchmux"), rv).await;
    assert_eq!(
        upstream_reads(&e.sim).1,
        before.1 + 1,
        "{case}: the watch through watchmux reached the upstream"
    );
    let (dd, pd) = (deterministic(&dl), deterministic(&pl));
    assert_eq!(describe(&dd), describe(&pd), "{case}: events differ");
    assert_eq!(dd, pd, "{case}: event bytes differ");
    assert_eq!(ds, ps, "{case}: how the streams stopped");
    Watched {
        events: describe(&dd),
        stop: ds,
    }
}

// ---------------------------------------------------------------------------------------------
// LIST
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_forms_served_from_the_cache_match_the_apiserver() {
    let e = env().await;
    let n = e.rv_before;
    let cases: Vec<(&str, String)> = vec![
        ("RV=0", "/api/v1/pods?resourceVersion=0".into()),
        ("RV=0 limit ignored", "/api/v1/pods?resourceVersion=0&limit=2".into()),
        (
            "RV=0 NotOlderThan",
            "/api/v1/pods?resourceVersion=0&resourceVersionMatch=NotOlderThan".into(),
        ),
        ("RV=0 namespaced", "/api/v1/namespaces/ns1/pods?resourceVersion=0".into()),
        ("RV=0 empty namespace", "/api/v1/namespaces/none/pods?resourceVersion=0".into()),
        ("RV=0 nodes", "/api/v1/nodes?resourceVersion=0".into()),
        ("watch=0 is a LIST", "/api/v1/pods?watch=0&resourceVersion=0".into()),
        ("watch=false is a LIST", "/api/v1/pods?watch=false&resourceVersion=0".into()),
        ("RV=0 namespaces", "/api/v1/namespaces?resourceVersion=0".into()),
        ("RV=0 configmaps (HTML escaping)", "/api/v1/configmaps?resourceVersion=0".into()),
        ("RV=N", format!("/api/v1/pods?resourceVersion={n}")),
        (
            "RV=N NotOlderThan",
            format!("/api/v1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan"),
        ),
        (
            "RV=N NotOlderThan namespaced",
            format!("/api/v1/namespaces/ns1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan"),
        ),
        (
            "RV=N NotOlderThan limit larger than the list",
            format!("/api/v1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=50"),
        ),
        // Label selectors, equality and set based.
        ("label =", "/api/v1/pods?resourceVersion=0&labelSelector=app%3Dweb".into()),
        ("label !=", "/api/v1/pods?resourceVersion=0&labelSelector=app!%3Dweb".into()),
        (
            "label in",
            "/api/v1/pods?resourceVersion=0&labelSelector=app%20in%20(web%2Cdb)".into(),
        ),
        (
            "label notin",
            "/api/v1/pods?resourceVersion=0&labelSelector=app%20notin%20(web)".into(),
        ),
        ("label exists", "/api/v1/pods?resourceVersion=0&labelSelector=tier".into()),
        ("label !exists", "/api/v1/pods?resourceVersion=0&labelSelector=!app".into()),
        ("label gt", "/api/v1/pods?resourceVersion=0&labelSelector=gen%3E1".into()),
        (
            "label and",
            "/api/v1/pods?resourceVersion=0&labelSelector=app%3Dweb%2Cgen".into(),
        ),
        // Field selectors: every pod field kube supports, aliases, negation.
        (
            "field spec.nodeName",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-1".into(),
        ),
        (
            "field spec.host alias",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.host%3Dnode-2".into(),
        ),
        (
            "field !=",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName!%3Dnode-1".into(),
        ),
        (
            "field ==",
            "/api/v1/pods?resourceVersion=0&fieldSelector=metadata.name%3D%3Da".into(),
        ),
        (
            "field metadata.namespace",
            "/api/v1/pods?resourceVersion=0&fieldSelector=metadata.namespace%3Dns1-x".into(),
        ),
        (
            "field spec.restartPolicy",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.restartPolicy%3DAlways".into(),
        ),
        (
            "field spec.schedulerName",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.schedulerName%3Ddefault-scheduler"
                .into(),
        ),
        (
            "field spec.serviceAccountName",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.serviceAccountName%3Ddefault".into(),
        ),
        (
            "field spec.hostNetwork",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.hostNetwork%3Dfalse".into(),
        ),
        (
            "field status.phase",
            "/api/v1/pods?resourceVersion=0&fieldSelector=status.phase%3DPending".into(),
        ),
        (
            "field status.podIP empty",
            "/api/v1/pods?resourceVersion=0&fieldSelector=status.podIP%3D".into(),
        ),
        (
            "field status.nominatedNodeName empty",
            "/api/v1/pods?resourceVersion=0&fieldSelector=status.nominatedNodeName%3D".into(),
        ),
        (
            "field and label",
            "/api/v1/namespaces/ns1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-2&labelSelector=app%3Dweb".into(),
        ),
        (
            "field on nodes",
            "/api/v1/nodes?resourceVersion=0&fieldSelector=spec.unschedulable%3Dfalse".into(),
        ),
        (
            "field on namespaces",
            "/api/v1/namespaces?resourceVersion=0&fieldSelector=status.phase%3DActive".into(),
        ),
        (
            "field on configmaps",
            "/api/v1/configmaps?resourceVersion=0&fieldSelector=metadata.name%3Dcm2".into(),
        ),
        // Errors the cache answers itself.
        (
            "bad label selector",
            "/api/v1/pods?resourceVersion=0&labelSelector=app%20in%20(web".into(),
        ),
        ("bad label key", "/api/v1/pods?resourceVersion=0&labelSelector=-x%3Dy".into()),
        ("bad label value", "/api/v1/pods?resourceVersion=0&labelSelector=x%3D-y-".into()),
        ("bad field selector", "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName".into()),
        (
            "bad field escape",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Da%5Cb".into(),
        ),
        (
            "unknown field label",
            "/api/v1/pods?resourceVersion=0&fieldSelector=spec.foo%3Dx".into(),
        ),
        (
            "unknown field label, default converter",
            "/api/v1/configmaps?resourceVersion=0&fieldSelector=data.k%3Dx".into(),
        ),
        (
            "unknown field label, HTML in message",
            "/api/v1/pods?resourceVersion=0&fieldSelector=%3Cb%3E%3Dx".into(),
        ),
        ("bad limit", "/api/v1/pods?resourceVersion=0&limit=x".into()),
        (
            "namespaced path of a cluster-scoped kind",
            "/api/v1/namespaces/ns1/nodes?resourceVersion=0".into(),
        ),
        (
            "namespaced path of a cluster-scoped kind, bad query",
            "/api/v1/namespaces/ns1/nodes?resourceVersion=0&limit=x".into(),
        ),
    ];
    for (case, pq) in &cases {
        let (d, _) = compare(&e, case, pq, true).await;
        if d.status == StatusCode::OK {
            assert!(continue_of(&d).is_none(), "{case}: complete list");
        }
    }

    // RV=0 with a limit is the whole list (the cache ignores limit), in storage-key byte order.
    let (all, _) = compare(
        &e,
        "RV=0 again",
        "/api/v1/pods?resourceVersion=0&limit=1",
        true,
    )
    .await;
    let names: Vec<String> = ids(&all)
        .iter()
        .map(|i| i.rsplit_once('@').unwrap().0.to_string())
        .collect();
    assert_eq!(
        names,
        ["ns1-x/p", "ns1/a", "ns1/b", "ns1/c", "ns1/e", "ns2/a"]
    );
    assert_eq!(
        json_of(&all)["metadata"]["resourceVersion"],
        e.sim.store().revision().to_string(),
        "the list RV is the cache's RV, not the highest item RV"
    );
}

#[tokio::test]
async fn paged_not_older_than_lists_continue_through_watchmux() {
    let e = env().await;
    let n = e.rv_before;
    let full = |pq: &str| format!("{pq}&resourceVersion=0");
    for (case, pq) in [
        (
            "RV=N NotOlderThan limit=2",
            format!("/api/v1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=2"),
        ),
        (
            "RV=N NotOlderThan limit=1 namespaced",
            format!(
                "/api/v1/namespaces/ns1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=1"
            ),
        ),
        (
            "RV=N NotOlderThan limit=2 with a selector",
            format!(
                "/api/v1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=2&labelSelector=app%3Dweb"
            ),
        ),
        (
            "RV=N NotOlderThan limit=1 nodes",
            format!("/api/v1/nodes?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=1"),
        ),
        (
            "RV=N NotOlderThan limit=1 with a field selector",
            format!(
                "/api/v1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=1&fieldSelector=spec.nodeName%3Dnode-2"
            ),
        ),
        // Exactly full at the very last object: nothing remains, so no token (kube's cacher:
        // `hasMoreListItems = i < len(items)-1`), with and without a selector.
        (
            "RV=N NotOlderThan, a selector, page ends at the last object",
            format!(
                "/api/v1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=4&labelSelector=app%3Dweb"
            ),
        ),
        (
            "RV=N NotOlderThan, page ends at the last object",
            format!(
                "/api/v1/namespaces/ns2/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=1"
            ),
        ),
    ] {
        let first = compare(&e, case, &pq, true).await;
        assert_eq!(
            continue_of(&first.0).is_some(),
            !case.contains("ends at the last object"),
            "{case}: a continue token iff something remains"
        );
        let pages = follow_pages(&e, case, &pq, first).await;
        // The pages together are exactly the current state.
        let base = pq.split_once("?").unwrap().0;
        let sel: String = pq
            .split('&')
            .filter(|kv| kv.starts_with("labelSelector=") || kv.starts_with("fieldSelector="))
            .map(|s| format!("&{s}"))
            .collect();
        let whole = get(&format!(
            "{}{}",
            e.sim.url(),
            full(&format!("{base}?x=1{sel}"))
        ))
        .await;
        assert_eq!(pages, ids(&whole), "{case}: the pages are the whole list");
    }
}

#[tokio::test]
async fn pass_through_list_forms_are_byte_identical() {
    let e = env().await;
    let n = e.rv_before;
    let mut cases: Vec<(&str, String)> = vec![
        ("RV unset", "/api/v1/pods".into()),
        ("RV unset namespaced", "/api/v1/namespaces/ns1/pods".into()),
        (
            "RV unset with selectors",
            "/api/v1/pods?labelSelector=app%3Dweb&fieldSelector=spec.nodeName%3Dnode-1".into(),
        ),
        ("RV unset limit", "/api/v1/pods?limit=2".into()),
        (
            "RV unset limit with a selector",
            "/api/v1/pods?limit=1&labelSelector=app".into(),
        ),
        (
            "legacy exact RV=N limit",
            format!("/api/v1/pods?resourceVersion={n}&limit=2"),
        ),
        (
            "Exact",
            format!("/api/v1/pods?resourceVersion={n}&resourceVersionMatch=Exact"),
        ),
        (
            "Exact limit",
            format!("/api/v1/pods?resourceVersion={n}&resourceVersionMatch=Exact&limit=2"),
        ),
        ("non-numeric RV", "/api/v1/pods?resourceVersion=abc".into()),
        (
            "non-numeric RV NotOlderThan",
            "/api/v1/pods?resourceVersion=abc&resourceVersionMatch=NotOlderThan".into(),
        ),
        ("bad continue token", "/api/v1/pods?continue=bogus".into()),
        (
            "bad continue token with RV=0",
            "/api/v1/pods?resourceVersion=0&continue=bogus".into(),
        ),
        (
            "single object GET ignores watch",
            "/api/v1/namespaces/ns1/pods/a?watch=true".into(),
        ),
        ("single object GET", "/api/v1/namespaces/ns1/pods/a".into()),
        ("missing object", "/api/v1/namespaces/ns1/pods/zz".into()),
        // kube has no route for an object of a namespaced kind outside a namespace.
        ("object outside its namespace", "/api/v1/pods/a".into()),
        (
            "missing object outside",
            "/api/v1/pods/zz?resourceVersion=0".into(),
        ),
        ("legacy watch outside", "/api/v1/watch/pods/a".into()),
        ("uncached kind", "/api/v1/services?resourceVersion=0".into()),
    ];
    // Paged forms: every page, both ways.
    for (case, pq) in [
        ("RV unset limit=2", "/api/v1/pods?limit=2".to_string()),
        (
            "legacy exact limit=2",
            format!("/api/v1/pods?resourceVersion={n}&limit=2"),
        ),
        (
            "Exact limit=1",
            format!(
                "/api/v1/namespaces/ns1/pods?resourceVersion={n}&resourceVersionMatch=Exact&limit=1"
            ),
        ),
    ] {
        let first = compare(&e, case, &pq, false).await;
        let pages = follow_pages(&e, case, &pq, first).await;
        assert!(pages.len() > 2, "{case}: several items over several pages");
        // A token with a resourceVersion other than ""/"0" is a 400, identical on both.
        let tok = continue_of(&get(&format!("{}{pq}", e.sim.url())).await).unwrap();
        let tok = form_urlencoded::byte_serialize(tok.as_bytes()).collect::<String>();
        cases.push((
            "continue with RV=N",
            format!("/api/v1/pods?resourceVersion={n}&continue={tok}"),
        ));
        cases.push((
            "continue with RV=0",
            format!("/api/v1/pods?resourceVersion=0&continue={tok}"),
        ));
    }
    for (case, pq) in &cases {
        compare(&e, case, pq, false).await;
    }
}

#[tokio::test]
async fn list_validation_errors_are_identical() {
    let e = env().await;
    // The validation errors (422), then kube's order: decoding (numbers, then selectors)
    // before validation, field labels after it, the continue token last (Go's JSON error when
    // its base64 holds no JSON).
    let invalid = [
        "resourceVersionMatch=NotOlderThan",
        "resourceVersionMatch=Exact",
        "resourceVersionMatch=Bogus",
        "resourceVersion=0&resourceVersionMatch=Exact",
        "resourceVersion=0&resourceVersionMatch=Bogus",
        "resourceVersion=5&resourceVersionMatch=Bogus",
        "resourceVersion=5&resourceVersionMatch=NotOlderThan&continue=abc",
        "resourceVersionMatch=Exact&continue=abc",
        "resourceVersion=0&sendInitialEvents=true",
        "resourceVersion=0&sendInitialEvents=false",
        "resourceVersion=5&resourceVersionMatch=NotOlderThan&sendInitialEvents=true",
        "sendInitialEvents=true",
        "resourceVersion=0&resourceVersionMatch=Exact&sendInitialEvents=true",
        "resourceVersionMatch=Exact&fieldSelector=x%3D1",
    ];
    let bad = [
        "resourceVersion=0&sendInitialEvents=true&labelSelector=app%20in%20(",
        "resourceVersionMatch=Exact&labelSelector=x%20y",
        "resourceVersionMatch=Exact&fieldSelector=x",
        "fieldSelector=x&labelSelector=x%20y",
        "labelSelector=x%20y&limit=z&timeoutSeconds=q",
        "fieldSelector=x%3D1&continue=gQID",
        "continue=gQID",
        "watch=1&resourceVersionMatch=Exact&labelSelector=x%20y",
    ];
    let cases = invalid
        .iter()
        .map(|q| (q, 422))
        .chain(bad.iter().map(|q| (q, 400)));
    for (q, want) in cases {
        for base in [
            "/api/v1/pods",
            "/api/v1/namespaces/ns1/pods",
            "/api/v1/nodes",
        ] {
            let pq = format!("{base}?{q}");
            let (d, _) = compare(&e, &pq, &pq, false).await;
            assert_eq!(d.status, want, "{pq}: {}", text(&d.body));
        }
    }
}

/// A resourceVersion nobody has reached: kube's cache waits 3 s, then LISTs get HTTP 504 and
/// watch-lists an HTTP 200 with one ERROR 504 event. watchmux may ask the upstream after its own
/// wait (it cannot know whether the upstream is further along), but the answer is the same.
#[tokio::test]
async fn reads_from_the_future_time_out_with_the_same_504() {
    let e = env().await;
    settle(&e).await;
    let future = e.sim.store().revision() + 100;
    let status = format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"Timeout: Too large resource version: {future}, current: {}","reason":"Timeout","details":{{"causes":[{{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}}],"retryAfterSeconds":1}},"code":504}}"#,
        e.sim.store().revision()
    );
    let l1 = format!("/api/v1/pods?resourceVersion={future}");
    let l2 =
        format!("/api/v1/nodes?resourceVersion={future}&resourceVersionMatch=NotOlderThan&limit=1");
    let w = format!(
        "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={future}&allowWatchBookmarks=true"
    );
    // All at once: each waits 3 s (twice, through watchmux, if it asks the upstream).
    let (a, b, (mut d, mut p)) =
        tokio::join!(get_both(&e, &l1), get_both(&e, &l2), watch_both(&e, &w));
    for ((d, p), pq) in [(a, &l1), (b, &l2)] {
        assert_same(pq, &d, &p);
        assert_eq!(d.status, 504, "{pq}");
        assert_eq!(d.headers["retry-after"], "1", "{pq}");
        assert_eq!(text(&d.body), format!("{status}\n"), "{pq}");
    }
    let (dl, pl) = both_to_the_end(&w, &mut d, &mut p).await;
    let (dd, pd) = (deterministic(&dl), deterministic(&pl));
    assert_eq!(dd, pd, "{w}");
    assert_eq!(
        pd,
        [format!(r#"{{"type":"ERROR","object":{status}}}"#)],
        "{w}"
    );
}

/// kube's cache catches up with any existing RV at once (it asks etcd for progress); watchmux's
/// cache hears of the upstream's progress only through events and bookmarks, which kube sends
/// about once a minute. An RV from another resource's write (or from a direct apiserver
/// connection) must still be answered like the apiserver does, not with a 504.
#[tokio::test]
async fn resource_versions_ahead_of_the_cache_are_served_like_the_apiserver() {
    let sim = crate::common::sim_with(|c| c.bookmark_interval = Duration::from_secs(60)).await;
    create_pod(&sim, "default", "a", "node-1", json!({"app": "web"}));
    create_pod(&sim, "default", "b", "node-2", json!({}));
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    // Another kind moves the revision on; the pods cache cannot know (no bookmark for a minute).
    let r = create(
        &sim,
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "x"}}),
    );
    let pods = px.proxy.cache("", "v1", "pods").unwrap();
    assert!(pods.rv() < r);
    let e = Env {
        px,
        sim,
        rv_before: r,
        rv_ancient: 0,
    };
    let l1 = format!("/api/v1/pods?resourceVersion={r}");
    let l2 = format!("/api/v1/pods?resourceVersion={r}&resourceVersionMatch=NotOlderThan&limit=1");
    let w = format!(
        "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={r}&allowWatchBookmarks=true"
    );
    let (a, b, (mut d, mut p)) =
        tokio::join!(get_both(&e, &l1), get_both(&e, &l2), watch_both(&e, &w));
    for ((d, p), pq) in [(a, &l1), (b, &l2)] {
        assert_same(pq, &d, &p);
        assert_eq!(d.status, 200, "{pq}");
        assert_eq!(json_of(&d)["metadata"]["resourceVersion"], r.to_string());
    }
    assert_eq!(
        (d.status, p.status),
        (StatusCode::OK, StatusCode::OK),
        "{w}"
    );
    let dl = d.until(T, is_end_bookmark).await;
    let pl = p.until(T, is_end_bookmark).await;
    assert_eq!(dl, pl, "{w}");
    assert_eq!(dl.len(), 3, "two ADDED and the end bookmark: {dl:?}");
    assert_eq!(
        dl[2]["object"]["metadata"]["resourceVersion"],
        r.to_string()
    );
}

// ---------------------------------------------------------------------------------------------
// WATCH
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn watch_validation_and_selector_errors_are_identical() {
    let e = env().await;
    let queries = [
        "watch=1&sendInitialEvents=true",
        "watch=1&sendInitialEvents=false",
        "watch=1&resourceVersionMatch=NotOlderThan",
        "watch=1&resourceVersion=5&resourceVersionMatch=NotOlderThan",
        "watch=1&resourceVersion=0&resourceVersionMatch=NotOlderThan",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
        "watch=1&sendInitialEvents=false&resourceVersionMatch=Bogus",
        "watch=1&resourceVersionMatch=Exact",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=abc",
        "watch=1&continue=abc",
        "watch=1&resourceVersion=0&continue=abc",
        "watch=true&resourceVersion=abc",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=abc",
        "watch=1&labelSelector=app%20in%20(web",
        "watch=1&fieldSelector=spec.foo%3Dx",
        "watch=1&fieldSelector=spec.nodeName",
        "watch=1&resourceVersion=3&timeoutSeconds=x",
        "watch=1&sendInitialEvents=true&fieldSelector=spec.foo%3Dx",
    ];
    for q in queries {
        for base in [
            "/api/v1/pods",
            "/api/v1/namespaces/ns1/pods",
            "/api/v1/configmaps",
        ] {
            let pq = format!("{base}?{q}");
            let (d, _) = compare(&e, &pq, &pq, true).await;
            if q.contains("resourceVersion=abc") {
                // kube's watch cache fails to parse it after validation: a bare storage error,
                // answered 500 (see `numbers_from_clients_are_answered_as_kube_does`).
                assert_eq!(d.status, 500, "{pq}: {}", text(&d.body));
            } else {
                assert!(d.status.is_client_error(), "{pq}: {}", text(&d.body));
            }
        }
    }
    // The deprecated verb-in-path forms.
    for pq in [
        "/api/v1/watch/pods?sendInitialEvents=true",
        "/api/v1/watch/namespaces/ns1/pods?resourceVersionMatch=NotOlderThan",
        "/api/v1/watch/namespaces/ns1/pods/a?fieldSelector=metadata.name%3Db",
        "/api/v1/watch/namespaces/ns1/pods/a?fieldSelector=spec.nodeName%3Dnode-1",
        "/api/v1/watch/namespaces/ns1/pods/a?fieldSelector=spec.foo%3Dx",
        "/api/v1/watch/namespaces/ns1/pods/a?fieldSelector=metadata.name%3Db&sendInitialEvents=true",
        "/api/v1/watch/namespaces/ns1/pods/a?fieldSelector=metadata.name%3D%3Db%3D",
        "/api/v1/watch/nodes/node-1?fieldSelector=metadata.name%3Dnode-2",
        "/api/v1/namespaces/ns1/nodes?watch=1",
        "/api/v1/namespaces/ns1/nodes?watch=1&limit=x",
        "/api/v1/namespaces/ns1/nodes?watch=1&sendInitialEvents=true",
    ] {
        let (d, _) = compare(&e, pq, pq, true).await;
        assert!(d.status.is_client_error(), "{pq}: {}", text(&d.body));
    }
}

#[tokio::test]
async fn watch_lists_send_initial_events_then_the_end_bookmark() {
    let e = env().await;
    let n = e.rv_before;
    let web = || json!({"app": "web"});
    let cases: Vec<(&str, String, Marker)> = vec![
        ("RV unset (defaulted to a watch-list)", "/api/v1/pods?watch=1".into(), Marker::Pod("ns1", web())),
        (
            "empty resourceVersion is unset",
            "/api/v1/pods?watch=1&resourceVersion=&allowWatchBookmarks=true".into(),
            Marker::Pod("ns2", web()),
        ),
        (
            "RV unset with bookmarks",
            "/api/v1/pods?watch=1&allowWatchBookmarks=true".into(),
            Marker::Pod("ns2", web()),
        ),
        (
            "RV=0 with bookmarks",
            "/api/v1/pods?watch=true&resourceVersion=0&allowWatchBookmarks=true".into(),
            Marker::Pod("ns1", web()),
        ),
        (
            "RV=0 namespaced, label selector",
            "/api/v1/namespaces/ns1/pods?watch=true&resourceVersion=0&allowWatchBookmarks=true&labelSelector=app%3Dweb".into(),
            Marker::Pod("ns1", web()),
        ),
        (
            "RV=0 field selector",
            "/api/v1/pods?watch=1&resourceVersion=0&allowWatchBookmarks=1&fieldSelector=spec.nodeName%3Dnode-1".into(),
            Marker::Pod("ns2", web()),
        ),
        (
            "sendInitialEvents=true NotOlderThan",
            "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true".into(),
            Marker::Pod("ns1-x", json!({})),
        ),
        (
            "sendInitialEvents=true NotOlderThan RV=N",
            format!("/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={n}&allowWatchBookmarks=true"),
            Marker::Pod("ns1", web()),
        ),
        (
            "sendInitialEvents=true without bookmarks",
            "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan".into(),
            Marker::Pod("ns1", web()),
        ),
        (
            "metadata.name field selector (kubectl's single-object watch)",
            "/api/v1/namespaces/ns1/pods?watch=1&resourceVersion=0&allowWatchBookmarks=true&fieldSelector=metadata.name%3Da".into(),
            Marker::Touch("pods", Some("ns1"), "a"),
        ),
        (
            "legacy path with a name",
            "/api/v1/watch/namespaces/ns1/pods/a?allowWatchBookmarks=true".into(),
            Marker::Touch("pods", Some("ns1"), "a"),
        ),
        (
            "legacy path with a name and its own metadata.name selector",
            "/api/v1/watch/namespaces/ns1/pods/a?fieldSelector=metadata.name%3Da".into(),
            Marker::Touch("pods", Some("ns1"), "a"),
        ),
        (
            "legacy collection path",
            "/api/v1/watch/namespaces/ns2/pods?allowWatchBookmarks=true&watch=false".into(),
            Marker::Pod("ns2", json!({})),
        ),
        (
            "legacy single namespace",
            "/api/v1/watch/namespaces/ns1?allowWatchBookmarks=true".into(),
            Marker::Touch("namespaces", None, "ns1"),
        ),
        ("nodes", "/api/v1/nodes?watch=1&allowWatchBookmarks=true".into(), Marker::Node),
        (
            "nodes by legacy name",
            "/api/v1/watch/nodes/node-2?allowWatchBookmarks=true".into(),
            Marker::Touch("nodes", None, "node-2"),
        ),
        (
            "configmaps (HTML escaping)",
            "/api/v1/configmaps?watch=1&allowWatchBookmarks=true".into(),
            Marker::Touch("configmaps", Some("ns1"), "cm1"),
        ),
    ];
    for (case, pq, marker) in cases {
        let w = compare_watch(&e, case, &pq, marker).await;
        assert_eq!(w.stop, Stop::Marker, "{case}");
        let bookmarks =
            pq.contains("allowWatchBookmarks=true") || pq.contains("allowWatchBookmarks=1");
        let ends: Vec<_> = w.events.iter().filter(|l| l.ends_with("+end")).collect();
        assert_eq!(
            ends.len(),
            usize::from(bookmarks),
            "{case}: end bookmark iff allowWatchBookmarks: {:?}",
            w.events
        );
        assert!(
            w.events[0].starts_with("ADDED"),
            "{case}: initial events first: {:?}",
            w.events
        );
    }

    // Absolute expectations (not only "same as the simulator"): one ADDED per object in key
    // order with its own RV, then the end bookmark at the list RV, then live events.
    settle(&e).await;
    let pods = rt(&e.sim, "pods");
    let page = e
        .sim
        .store()
        .list(&pods, None, None, None, 0, &|_| true, false)
        .unwrap();
    let mut want: Vec<String> = page
        .items
        .iter()
        .map(|o| format!("ADDED {}/{}@{}", o.namespace, o.name, o.rv))
        .collect();
    want.push(format!("BOOKMARK /@{} +end", page.rev));
    let w = compare_watch(
        &e,
        "watch-list, absolute",
        "/api/v1/pods?watch=1&allowWatchBookmarks=true",
        Marker::Pod("ns2", json!({})),
    )
    .await;
    assert_eq!(w.events[..want.len()], want[..]);
    assert_eq!(w.events.len(), want.len() + 1);
}

#[tokio::test]
async fn watches_from_a_resource_version_replay_the_same_events() {
    let e = env().await;
    let n = e.rv_before;
    let cases: Vec<(&str, String, Marker)> = vec![
        ("RV=N", format!("/api/v1/pods?watch=1&resourceVersion={n}"), Marker::Pod("ns1", json!({}))),
        (
            "watch= (empty value) is a watch",
            format!("/api/v1/pods?watch=&resourceVersion={n}"),
            Marker::Pod("ns1", json!({})),
        ),
        (
            "RV=N with bookmarks",
            format!("/api/v1/pods?watch=true&resourceVersion={n}&allowWatchBookmarks=true"),
            Marker::Pod("ns1", json!({})),
        ),
        (
            "RV=N sendInitialEvents=false",
            format!("/api/v1/pods?watch=1&resourceVersion={n}&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"),
            Marker::Pod("ns2", json!({})),
        ),
        (
            "RV=N move-in/move-out with a label selector",
            format!("/api/v1/pods?watch=1&resourceVersion={n}&labelSelector=app%3Dweb"),
            Marker::Pod("ns1", json!({"app": "web"})),
        ),
        (
            "RV=N namespaced",
            format!("/api/v1/namespaces/ns1/pods?watch=1&resourceVersion={n}"),
            Marker::Pod("ns1", json!({})),
        ),
        (
            "RV=N legacy path",
            format!("/api/v1/watch/namespaces/ns1/pods?resourceVersion={n}"),
            Marker::Pod("ns1", json!({})),
        ),
        (
            "RV=N legacy path with a name",
            format!("/api/v1/watch/namespaces/ns1/pods/c?resourceVersion={n}"),
            Marker::Touch("pods", Some("ns1"), "c"),
        ),
        (
            "RV=N field selector on the deleted pod's node",
            format!("/api/v1/pods?watch=1&resourceVersion={n}&fieldSelector=spec.nodeName%3Dnode-1"),
            Marker::Pod("ns2", json!({})),
        ),
        (
            "RV=N of another kind (configmaps)",
            format!("/api/v1/configmaps?watch=1&resourceVersion={n}"),
            Marker::Touch("configmaps", Some("ns1"), "cm2"),
        ),
        (
            "sendInitialEvents=false, RV unset: from now",
            "/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan".into(),
            Marker::Pod("ns1", json!({})),
        ),
        (
            "sendInitialEvents=false, RV=0: from now",
            "/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true".into(),
            Marker::Pod("ns1", json!({})),
        ),
        (
            "RV=current: from now",
            format!("/api/v1/pods?watch=1&resourceVersion={}", e.sim.store().revision()),
            Marker::Pod("ns1", json!({})),
        ),
    ];
    for (case, pq, marker) in cases {
        let w = compare_watch(&e, case, &pq, marker).await;
        assert_eq!(w.stop, Stop::Marker, "{case}");
        assert!(
            w.events.iter().all(|l| !l.starts_with("BOOKMARK")),
            "{case}: no end bookmark without sendInitialEvents: {:?}",
            w.events
        );
    }

    // Absolute: the replay from N with app=web is exactly the post-sync story of app=web pods.
    let w = compare_watch(
        &e,
        "replay app=web, absolute",
        &format!("/api/v1/pods?watch=1&resourceVersion={n}&labelSelector=app%3Dweb"),
        Marker::Touch("pods", Some("ns1"), "e"),
    )
    .await;
    let first: Vec<String> = w
        .events
        .iter()
        .take(3)
        .map(|l| l.rsplit_once('@').unwrap().0.to_string())
        .collect();
    assert_eq!(
        first,
        ["MODIFIED ns1/a", "ADDED ns1/e", "DELETED ns1/c"],
        "{:?}",
        w.events
    );
    let rvs: Vec<u64> = w
        .events
        .iter()
        .map(|l| l.rsplit_once('@').unwrap().1.parse().unwrap())
        .collect();
    assert!(
        rvs.windows(2).all(|p| p[0] < p[1]),
        "strictly increasing RVs: {rvs:?}"
    );
    assert!(rvs[0] > n);
}

#[tokio::test]
async fn move_in_move_out_and_delete_events_match() {
    let e = env().await;
    settle(&e).await;
    let start = e.sim.store().revision();
    let pq = format!("/api/v1/pods?watch=1&resourceVersion={start}&labelSelector=role%3Dfront");
    let open = e.sim.stats()["resources"]["pods"]["openWatches"]
        .as_i64()
        .unwrap();
    let watchers = e.px.proxy.cache("", "v1", "pods").unwrap().watcher_count();
    let (mut d, mut p) = watch_both(&e, &pq).await;
    wait_registered(&e, "pods", open + 1, watchers + 1).await;
    let mv_in = set_labels(
        &e.sim,
        "pods",
        Some("ns1"),
        "b",
        json!({"app": "db", "role": "front"}),
    );
    let modified = touch(&e.sim, "pods", Some("ns1"), "b");
    let mv_out = set_labels(&e.sim, "pods", Some("ns1"), "b", json!({"app": "db"}));
    let other = set_labels(&e.sim, "pods", Some("ns2"), "a", json!({"role": "front"}));
    let deleted = delete_pod_now(&e.sim, "ns2", "a");
    let (dl, _) = read_until(&mut d, "sim", Some(deleted)).await;
    let (pl, _) = read_until(&mut p, "watchmux", Some(deleted)).await;
    let (dd, pd) = (deterministic(&dl), deterministic(&pl));
    assert_eq!(describe(&dd), describe(&pd));
    assert_eq!(dd, pd, "event bytes differ");
    assert_eq!(
        describe(&pd),
        [
            format!("ADDED ns1/b@{mv_in}"),
            format!("MODIFIED ns1/b@{modified}"),
            format!("DELETED ns1/b@{mv_out}"),
            format!("ADDED ns2/a@{other}"),
            format!("DELETED ns2/a@{deleted}"),
        ]
    );
    // The move-out DELETED carries the previous object (still labelled) stamped with the
    // event's RV; the real delete carries the last state, stamped likewise.
    let out = ev(pd[2].as_bytes());
    assert_eq!(out["object"]["metadata"]["labels"]["role"], "front");
    assert!(out["object"]["metadata"]["annotations"]["touched"].is_string());
    let del = ev(pd[4].as_bytes());
    assert_eq!(del["object"]["metadata"]["labels"]["role"], "front");
}

#[tokio::test]
async fn watch_errors_and_timeouts_end_the_stream_the_same_way() {
    let e = env().await;
    // timeoutSeconds ends both streams cleanly (nothing pending: no event at all).
    let cur = e.sim.store().revision();
    for (case, pq) in [
        (
            "timeoutSeconds=1 from now",
            format!(
                "/api/v1/pods?watch=1&resourceVersion={cur}&timeoutSeconds=1&allowWatchBookmarks=true"
            ),
        ),
        (
            "timeoutSeconds=1 watch-list",
            "/api/v1/namespaces/ns1/pods?watch=1&timeoutSeconds=1&allowWatchBookmarks=true"
                .to_string(),
        ),
        (
            "timeoutSeconds=1 legacy path",
            "/api/v1/watch/nodes?timeoutSeconds=1&resourceVersion=0".to_string(),
        ),
    ] {
        let w = compare_watch(&e, case, &pq, Marker::None).await;
        assert_eq!(w.stop, Stop::End, "{case}");
    }

    // Too old after compaction and new writes: HTTP 200, one ERROR 410 event, end.
    e.sim.store().compact_now();
    create_pod(&e.sim, "ns1", "after-compaction", "node-1", json!({}));
    touch(&e.sim, "pods", Some("ns1"), "after-compaction");
    settle(&e).await;
    let old = e.rv_ancient;
    for pq in [
        format!("/api/v1/pods?watch=1&resourceVersion={old}"),
        format!(
            "/api/v1/namespaces/ns1/pods?watch=1&resourceVersion={old}&allowWatchBookmarks=true&labelSelector=app"
        ),
        format!("/api/v1/watch/namespaces/ns1/pods/a?resourceVersion={old}"),
        format!(
            "/api/v1/pods?watch=1&resourceVersion={old}&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
        ),
    ] {
        let (mut d, mut p) = watch_both(&e, &pq).await;
        let (dl, pl) = both_to_the_end(&pq, &mut d, &mut p).await;
        assert_eq!(dl.len(), 1, "{pq}: sim sent {:?}", dl);
        assert_eq!(pl.len(), 1, "{pq}: watchmux sent {:?}", pl);
        let (mut dv, mut pv) = (ev(&dl[0]), ev(&pl[0]));
        for v in [&dv, &pv] {
            assert_eq!(v["type"], "ERROR", "{pq}: {v}");
            let m = v["object"]["message"].as_str().unwrap();
            let rest = m
                .strip_prefix(&format!("too old resource version: {old} ("))
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{pq}: message {m:?}"));
            assert!(rest.parse::<u64>().unwrap() > old, "{pq}: {m}");
        }
        // Everything but the oldest-available RV in the message is identical.
        dv["object"]["message"] = Value::Null;
        pv["object"]["message"] = Value::Null;
        assert_eq!(dv, pv, "{pq}");
        assert_eq!(
            dv["object"],
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":null,"reason":"Expired","code":410})
        );
    }

    // After the compaction the pass-through forms answer the upstream's 410s unchanged.
    for pq in [
        format!("/api/v1/pods?resourceVersion={old}&resourceVersionMatch=Exact"),
        format!("/api/v1/pods?resourceVersion={old}&limit=1"),
    ] {
        let (d, _) = compare(&e, &pq, &pq, false).await;
        assert_eq!(d.status, 410, "{pq}: {}", text(&d.body));
    }
}

#[tokio::test]
async fn periodic_bookmarks_look_the_same() {
    let e = env().await;
    settle(&e).await;
    let cur = e.sim.store().revision();
    let pq = format!("/api/v1/pods?watch=1&resourceVersion={cur}&allowWatchBookmarks=true");
    let (mut d, mut p) = watch_both(&e, &pq).await;
    // The revision moves on through another kind: both announce it in a BOOKMARK, which is an
    // empty Pod with only that resourceVersion (never filtered, never above what was sent).
    let rv = create(
        &e.sim,
        "configmaps",
        Some("ns2"),
        json!({"metadata": {"name": "bm"}}),
    );
    let is_bm = |v: &Value| v["type"] == "BOOKMARK" && rv_of(v) == Some(rv);
    let dl = d.until(T, is_bm).await;
    let pl = p.until(T, is_bm).await;
    for (who, l) in [("sim", &dl), ("watchmux", &pl)] {
        assert!(
            l.iter().all(|v| v["type"] == "BOOKMARK"),
            "{who}: only bookmarks: {l:?}"
        );
        for v in l.iter() {
            let r: u64 = v["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                r > cur && r <= rv,
                "{who}: bookmark RV {r} outside ({cur}, {rv}]"
            );
        }
    }
    assert_eq!(dl.last(), pl.last());
    assert_eq!(
        pl.last().unwrap(),
        &json!({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion": rv.to_string()},"spec":{"containers":null},"status":{}}})
    );
}

#[tokio::test]
async fn watch_headers_are_flushed_before_the_first_event() {
    let e = env().await;
    settle(&e).await;
    let cur = e.sim.store().revision();
    for base in [e.sim.url(), e.px.url.clone()] {
        for pq in [
            format!("/api/v1/pods?watch=1&resourceVersion={cur}"),
            "/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
                .to_string(),
            // A watch that waits for a future RV has nothing to send for a while.
            format!("/api/v1/pods?watch=1&resourceVersion={}", cur + 1000),
        ] {
            // The status line arrives although no event is pending (`watch` returns once the
            // response head is in; it gives up after 10 s).
            let mut w = crate::common::watch(&format!("{base}{pq}")).await;
            assert_eq!(w.status, StatusCode::OK, "{base}{pq}");
            assert_eq!(w.headers["content-type"], "application/json");
            assert!(
                matches!(w.next_line(Duration::from_millis(200)).await, Next::Timeout),
                "{base}{pq}: no event was pending"
            );
        }
    }
    // And the stream then delivers as soon as something happens.
    let mut w = crate::common::watch(&format!(
        "{}/api/v1/pods?watch=1&resourceVersion={cur}",
        e.px.url
    ))
    .await;
    let rv = create_pod(&e.sim, "ns1", "late", "node-1", json!({}));
    let v = w.next_event(T).await;
    assert_eq!(v["type"], "ADDED");
    assert_eq!(v["object"]["metadata"]["resourceVersion"], rv.to_string());
}

#[tokio::test]
async fn cache_served_forms_cost_the_upstream_nothing() {
    let e = env().await;
    settle(&e).await;
    let stats = || async {
        let (s, v) = crate::common::get_json(&format!("{}/sim/stats", e.sim.url())).await;
        assert_eq!(s, 200);
        v
    };
    let before = stats().await;
    let n = e.rv_before;
    for i in 0..20 {
        let pq = match i % 5 {
            0 => "/api/v1/pods?resourceVersion=0".to_string(),
            1 => "/api/v1/pods?resourceVersion=0&limit=500".to_string(),
            2 => {
                "/api/v1/namespaces/ns1/pods?resourceVersion=0&labelSelector=app%3Dweb".to_string()
            }
            3 => format!(
                "/api/v1/pods?resourceVersion={n}&resourceVersionMatch=NotOlderThan&limit=2"
            ),
            _ => format!("/api/v1/pods?resourceVersion={n}&fieldSelector=spec.nodeName%3Dnode-1"),
        };
        let a = get(&format!("{}{pq}", e.px.url)).await;
        assert_eq!(a.status, 200, "{pq}");
    }
    let mut streams = Vec::new();
    for i in 0..20 {
        let pq = match i % 5 {
            0 => "/api/v1/pods?watch=1".to_string(),
            1 => "/api/v1/pods?watch=1&resourceVersion=0&allowWatchBookmarks=true".to_string(),
            2 => format!("/api/v1/pods?watch=1&resourceVersion={n}"),
            3 => "/api/v1/namespaces/ns1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true".to_string(),
            _ => "/api/v1/watch/namespaces/ns1/pods/a".to_string(),
        };
        let mut w = crate::common::watch(&format!("{}{pq}", e.px.url)).await;
        assert_eq!(w.status, 200, "{pq}");
        // Each delivers something (initial events or the replay) before we move on.
        let first = w.next_event(T).await;
        assert!(
            first["type"] == "ADDED" || first["type"] == "MODIFIED",
            "{pq}: {first}"
        );
        streams.push(w);
    }
    // A live event reaches all of them, still without any upstream request.
    let rv = touch(&e.sim, "pods", Some("ns1"), "a");
    for w in &mut streams {
        w.until(T, |v| rv_of(v) == Some(rv)).await;
    }
    let after = stats().await;
    let delta = |r: &str, k: &str| {
        after["resources"][r][k].as_u64().unwrap() - before["resources"][r][k].as_u64().unwrap()
    };
    for r in CACHED.iter().filter(|r| **r != "pods") {
        for k in ["listRequests", "watchRequests"] {
            assert_eq!(
                delta(r, k),
                0,
                "{r} {k}: reads of pods cost the other resources nothing"
            );
        }
    }
    // The 12 watches without a resourceVersion start from a consistent state (kube 1.34+):
    // each batch of them costs one freshness check, a LIST of at most one item and at most
    // one short watch. No full LIST, no lasting watch reaches the upstream.
    let (lists, items, watches) = (
        delta("pods", "listRequests"),
        delta("pods", "listItemsSent"),
        delta("pods", "watchRequests"),
    );
    assert!(
        lists <= 12 && items <= lists && watches <= lists,
        "20 cached LISTs and 20 watches cost the upstream {lists} LISTs of {items} items and {watches} watches"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while e.sim.stats()["resources"]["pods"]["openWatches"] != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only watchmux's own upstream watch stays open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_watch_from_a_future_resource_version_waits_for_it() {
    let e = env().await;
    settle(&e).await;
    let n = e.sim.store().revision() + 2;
    let pq = format!("/api/v1/pods?watch=1&resourceVersion={n}&allowWatchBookmarks=true");
    let open = e.sim.stats()["resources"]["pods"]["openWatches"]
        .as_i64()
        .unwrap();
    let watchers = e.px.proxy.cache("", "v1", "pods").unwrap().watcher_count();
    let (mut d, mut p) = watch_both(&e, &pq).await;
    assert_eq!((d.status, p.status), (StatusCode::OK, StatusCode::OK));
    wait_registered(&e, "pods", open + 1, watchers + 1).await;
    // No error (kube's W5): events up to N are suppressed, the first one after N arrives.
    create_pod(&e.sim, "ns1", "f1", "node-1", json!({}));
    create_pod(&e.sim, "ns1", "f2", "node-1", json!({}));
    let last = create_pod(&e.sim, "ns1", "f3", "node-1", json!({}));
    assert_eq!(last, n + 1);
    let (dl, _) = read_until(&mut d, "sim", Some(last)).await;
    let (pl, _) = read_until(&mut p, "watchmux", Some(last)).await;
    let (dd, pd) = (deterministic(&dl), deterministic(&pl));
    assert_eq!(dd, pd);
    assert_eq!(describe(&pd), [format!("ADDED ns1/f3@{last}")]);
    // Bookmarks never announce anything at or below N before N is reached.
    for v in dl.iter().chain(&pl).map(|l| ev(l)) {
        let rv: u64 = v["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rv > n, "{v}");
    }
}

#[tokio::test]
async fn representations_are_negotiated_the_same_way() {
    let e = env().await;
    settle(&e).await;
    const JSON: &[&str] = &[
        "application/json",
        "application/json, */*",
        "*/*",
        // go-restful takes a wildcard subtype when another clause names a type exactly.
        "application/*, application/json;q=0.1",
        // kubelet and controllers: protobuf first, JSON as the fallback: protobuf.
        "application/vnd.kubernetes.protobuf, application/json",
        "application/vnd.kubernetes.protobuf",
        "application/json;q=0.5, application/vnd.kubernetes.protobuf",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    ];
    const OTHER: &[&str] = &[
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        "application/yaml",
        "text/html",
        // go-restful's 406, before kube's negotiation (which would take these).
        "application/*",
        "application/*;q=1, text/*",
        "APPLICATION/JSON",
    ];
    for pq in [
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/namespaces/ns1/pods?resourceVersion=0&labelSelector=app%3Dweb",
        "/api/v1/pods?resourceVersion=0&resourceVersionMatch=Exact",
    ] {
        for accept in JSON {
            let case = format!("{pq} Accept: {accept}");
            let cached = !pq.contains("Exact");
            compare_with(&e, &case, pq, &[("accept", accept)], cached).await;
        }
        for accept in OTHER {
            let case = format!("{pq} Accept: {accept}");
            compare_with(&e, &case, pq, &[("accept", accept)], false).await;
        }
        // Tables are printed by the upstream (their AGE cells depend on the moment).
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        let d = get_with(&format!("{}{pq}", e.sim.url()), &[("accept", table)]).await;
        let p = get_with(&format!("{}{pq}", e.px.url), &[("accept", table)]).await;
        assert_eq!(d.status, p.status, "{pq}: Table");
        let rows = |a: &Answer| {
            let v = json_of(a);
            let names: Vec<Value> = v["rows"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .map(|r| r["object"]["metadata"]["name"].clone())
                        .collect()
                })
                .unwrap_or_default();
            json!({"kind": v["kind"], "columns": v["columnDefinitions"], "rows": names, "code": v["code"]})
        };
        assert_eq!(rows(&d), rows(&p), "{pq}: Table");
    }
    // A GET of one object: the same route rule (go-restful's 406 in its words).
    for accept in [
        "application/*",
        "*/json",
        "image/png",
        "*/*",
        "application/json",
    ] {
        let pq = "/api/v1/namespaces/ns1/pods/a?resourceVersion=0";
        let case = format!("{pq} Accept: {accept}");
        let cached = matches!(accept, "*/*" | "application/json");
        compare_with(&e, &case, pq, &[("accept", accept)], cached).await;
    }
    // Watches: the JSON forms come from the cache, the others pass through; same events. (The
    // protobuf watches are compared frame by frame in `protobuf`.)
    for (i, accept) in JSON.iter().filter(|a| !a.contains("protobuf")).enumerate() {
        let pq = "/api/v1/namespaces/ns1/pods?watch=1&allowWatchBookmarks=true";
        let case = format!("{pq} Accept: {accept}");
        let w = compare_watch_with(
            &e,
            &case,
            pq,
            &[("accept", accept)],
            Marker::Pod("ns1", json!({})),
        )
        .await;
        assert!(w.events.len() > 2, "{case}: {i} {:?}", w.events);
    }
    let pq = "/api/v1/namespaces/ns1/pods?watch=1&allowWatchBookmarks=true";
    for accept in [
        "application/yaml",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    ] {
        compare_with(
            &e,
            &format!("{pq} Accept: {accept}"),
            pq,
            &[("accept", accept)],
            false,
        )
        .await;
    }
}

/// `timeoutSeconds` as kube-apiserver computes it (Go's wrapping `Duration * Second`): a number
/// so large it wraps, or a negative one, ends the watch at once; the largest that does not wrap
/// keeps it open. Neither panics a task (the number used to overflow the deadline).
#[tokio::test]
async fn extreme_timeout_seconds_end_or_keep_the_watch_as_kube_does() {
    let e = env().await;
    settle(&e).await;
    let n = e.rv_before;
    for t in ["9223372036854775807", "-1"] {
        let w = format!("/api/v1/pods?watch=1&resourceVersion={n}&timeoutSeconds={t}");
        let (mut d, mut p) = watch_both(&e, &w).await;
        let (dl, pl) = both_to_the_end(&w, &mut d, &mut p).await;
        assert_eq!(deterministic(&dl), deterministic(&pl), "{w}");
    }
    let w = format!("/api/v1/pods?watch=1&resourceVersion={n}&timeoutSeconds=9223372036");
    let (mut d, mut p) = watch_both(&e, &w).await;
    assert_eq!(
        (d.status, p.status),
        (StatusCode::OK, StatusCode::OK),
        "{w}"
    );
    let rv = touch(&e.sim, "pods", Some("ns1"), "a");
    read_until(&mut d, "sim", Some(rv)).await;
    read_until(&mut p, "watchmux", Some(rv)).await;
}

/// Every number a client puts in a read, answered by watchmux exactly as by the simulator (which
/// follows kube-apiserver 1.36): Go's `strconv` errors for `limit` and `timeoutSeconds` (the
/// first of repeated values counting), kube's versioner for `resourceVersion` (400 on a LIST,
/// a bare 500 on a GET or a WATCH, `+1` and values past 2^64 refused, `"00"` read as 0 but not
/// as `"0"`), Go's `encoding/json` for the numbers in a `continue` token, and the `timeout` of
/// a request that is not a watch (Go's `time.ParseDuration`).
#[tokio::test]
async fn numbers_from_clients_are_answered_as_kube_does() {
    use base64::Engine;
    let e = env().await;
    let token = |j: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(j);
    let mut cases: Vec<(String, u16)> = Vec::new();
    for base in ["/api/v1/pods", "/api/v1/namespaces/ns1/pods"] {
        for (q, code) in [
            ("limit=x", 400),
            ("limit=", 400),
            ("limit=99999999999999999999", 400),
            ("limit=-99999999999999999999", 400),
            ("limit=x&limit=5", 400),
            ("resourceVersion=0&limit=-5", 200),
            ("resourceVersion=0&limit=9223372036854775807", 200),
            ("resourceVersion=0&limit=5&limit=x", 200),
            ("timeoutSeconds=x", 400),
            ("timeoutSeconds=99999999999999999999", 400),
            ("resourceVersion=0&timeoutSeconds=-9223372036854775808", 200),
            ("resourceVersion=%2B1", 400),
            ("resourceVersion=-1", 400),
            ("resourceVersion=18446744073709551616", 400),
            ("resourceVersion=1e3&resourceVersionMatch=NotOlderThan", 400),
            ("resourceVersion=0&resourceVersion=abc", 200),
            ("resourceVersion=00", 200),
            ("resourceVersion=00&resourceVersionMatch=NotOlderThan", 200),
            ("timeout=30", 400),
            ("timeout=1%C3%A9", 400),
            ("timeout=99999999999h", 400),
            ("resourceVersion=0&timeout=-1s", 200),
            ("resourceVersion=0&timeout=0", 200),
            ("watch=1&resourceVersion=-1", 500),
            ("watch=1&resourceVersion=18446744073709551616", 500),
        ] {
            cases.push((format!("{base}?{q}"), code));
        }
    }
    for (j, code) in [
        (
            r#"{"v":"meta.k8s.io/v1","rv":99999999999999999999,"start":"a"}"#,
            400,
        ),
        (r#"{"v":"meta.k8s.io/v1","rv":1.5,"start":"a"}"#, 400),
        (r#"{"v":"meta.k8s.io/v1","rv":"5","start":"a"}"#, 400),
        (r#"{"v":"meta.k8s.io/v1","rv":null,"start":"a"}"#, 400),
        (r#"{"v":"meta.k8s.io/v9","rv":5,"start":"a"}"#, 400),
        (r#"{"v":"meta.k8s.io/v1","start":"a"}"#, 400),
        (r#"[1]"#, 400),
    ] {
        cases.push((
            format!("/api/v1/namespaces/ns1/pods?limit=1&continue={}", token(j)),
            code,
        ));
    }
    for (q, code) in [
        ("resourceVersion=abc", 500),
        ("resourceVersion=-1", 500),
        ("resourceVersion=%2B0", 500),
        ("resourceVersion=0&timeout=x", 400),
        ("resourceVersion=0&timeout=5", 400),
        ("resourceVersion=00", 200),
    ] {
        cases.push((format!("/api/v1/namespaces/ns1/pods/a?{q}"), code));
    }
    for (pq, code) in cases {
        let (d, _) = compare(&e, &pq, &pq, code != 200).await;
        assert_eq!(d.status, code, "{pq}: {}", text(&d.body));
        if code == 500 {
            // kube's handlers answer an error that is not a Status: no reason.
            assert_eq!(json_of(&d).get("reason"), None, "{pq}");
        }
    }
    // A watch is long-running: its `timeout` is never read. And "00" is not "0": no
    // watch-list defaulting, so kube's legacy RV=0 watch (the state as ADDED events, no
    // initial-events-end bookmark) then the changes.
    for q in [
        "watch=1&resourceVersion=00&allowWatchBookmarks=true&timeout=bogus",
        "watch=1&resourceVersion=00",
    ] {
        let w = format!("/api/v1/namespaces/ns1/pods?{q}");
        let (mut d, mut p) = watch_both(&e, &w).await;
        assert_eq!(
            (d.status, p.status),
            (StatusCode::OK, StatusCode::OK),
            "{w}"
        );
        let rv = touch(&e.sim, "pods", Some("ns1"), "b");
        let (dl, _) = read_until(&mut d, "sim", Some(rv)).await;
        let (pl, _) = read_until(&mut p, "watchmux", Some(rv)).await;
        let (dl, pl) = (deterministic(&dl), deterministic(&pl));
        assert_eq!(dl, pl, "{w}");
        assert!(dl.len() > 1, "{w}: the initial state comes first: {dl:?}");
        assert!(
            dl.iter().all(|l| !l.contains("k8s.io/initial-events-end")),
            "{w}: {dl:?}"
        );
    }
}

/// Empty lists in every form, cached (`resourceVersion=0`) and consistent (no resourceVersion,
/// paged or not), are the simulator's bytes, and the simulator writes each as kube-apiserver
/// does (`kube_wire::list`): a kind's List `"items":[]`, a per-kind printer's Table `"rows":[]`,
/// a PartialObjectMetadataList `"items":null` (kube's converter appends to a nil slice), and
/// the protobuf lists without an item field.
#[tokio::test]
async fn empty_lists_are_written_as_the_apiserver_writes_them() {
    let e = env().await;
    const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    const META: &str =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    const PROTOBUF: &str = "application/vnd.kubernetes.protobuf,application/json";
    const META_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    // What each form's empty `items` (or `rows`) is in JSON; None: protobuf.
    let forms: [(&str, &str, Option<Value>); 5] = [
        ("JSON", "application/json", Some(json!({"items": []}))),
        ("Table", TABLE, Some(json!({"rows": []}))),
        (
            "PartialObjectMetadataList",
            META,
            Some(json!({"items": null})),
        ),
        ("protobuf", PROTOBUF, None),
        ("PartialObjectMetadataList in protobuf", META_PROTOBUF, None),
    ];
    let empties = [
        "/api/v1/namespaces/none/pods",
        "/api/v1/pods?labelSelector=app%3Dnone",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dnone",
        "/api/v1/namespaces/ns2/configmaps",
        "/api/v1/namespaces?labelSelector=missing",
    ];
    for base in empties {
        let sep = if base.contains('?') { '&' } else { '?' };
        for (read, cached) in [("resourceVersion=0", true), ("", false), ("limit=2", false)] {
            let pq = if read.is_empty() {
                base.to_string()
            } else {
                format!("{base}{sep}{read}")
            };
            for (form, accept, empty) in &forms {
                let case = format!("{pq} as {form}");
                // A consistent read costs the upstream a freshness check, never the list.
                let (d, _) = compare_with(&e, &case, &pq, &[("accept", accept)], cached).await;
                assert_eq!(d.status, StatusCode::OK, "{case}: {}", text(&d.body));
                match empty {
                    Some(want) => {
                        let v = json_of(&d);
                        for (k, want) in want.as_object().unwrap() {
                            assert_eq!(&v[k], want, "{case}: {}", text(&d.body));
                            assert!(v.get(k).is_some(), "{case}: {k} is written");
                        }
                    }
                    None => {
                        let u = kube_wire::proto::envelope::unwrap(&d.body).expect("protobuf");
                        assert!(
                            !u.raw.is_empty()
                                && crate::common::protobuf_list_items(&d.body).is_empty(),
                            "{case}: a list without items"
                        );
                    }
                }
            }
        }
    }
}
