//! A kind whose cache has not synced yet answers as kube 1.34's watch cache does while it is
//! not ready (KEP-4568, `ResilientWatchCacheInitialization`): GETs, and LISTs with a `limit`
//! and no selector, pass through; every other LIST and every WATCH waits
//! `cache.not_ready_wait_ms` for the sync and is answered from the cache, or gets kube's 429
//! `storage is (re)initializing` with a `Retry-After` that grows with the time the cache has not
//! been ready. What that buys: 200 kubelet-shaped clients starting at once against cold
//! on-demand caches cost the upstream one LIST per kind, not one per client.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{PartialObjectMetadataList, Status as PbStatus};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube_sim::Simulator;
use kube_sim::fleet::{FleetSpec, node_name};
use prost::Message as _;
use serde_json::{Value, json};
use watchmux::config::KindPattern;

use crate::common::kubelet::{Frames, KUBELET, WATCH_LIST, metadata_of};
use crate::common::*;

/// kube-apiserver's answer to a read its cacher refuses while not ready, for the first 11 s.
const NOT_READY: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"storage is (re)initializing","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}"#;
/// The header of every answer from the cache.
const FROM_CACHE: &str = "x-watchmux-cache-resource-version";
const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Requests of `resource` (a simulator stats key) that reached the simulator: LISTs, WATCHes
/// and the rest.
fn sim_requests(sim: &Simulator, resource: &str) -> u64 {
    let r = &sim.stats()["resources"][resource];
    ["listRequests", "watchRequests", "otherRequests"]
        .iter()
        .map(|k| r[k].as_u64().expect("a counter"))
        .sum()
}

/// The requests of `resource` that reached the simulator since it had counted `before` of them
/// without being watchmux's own (its reflector's LISTs and watch, its freshness checks:
/// `watchmux_upstream_requests_total`): the reads it passed through.
async fn passed_through(sim: &Simulator, before: u64, px: &TestProxy, resource: &str) -> f64 {
    let own = metric_sum(
        px,
        "watchmux_upstream_requests_total",
        &[("resource", resource)],
    )
    .await;
    (sim_requests(sim, resource) - before) as f64 - own
}

/// `watchmux_reads_total` of `resource` for `verb` from `source` with `reason`.
async fn reads(px: &TestProxy, resource: &str, verb: &str, source: &str, reason: &str) -> f64 {
    metric_sum(
        px,
        "watchmux_reads_total",
        &[
            ("resource", resource),
            ("verb", verb),
            ("source", source),
            ("reason", reason),
        ],
    )
    .await
}

/// Creates `name` at `collection` on the simulator (`extra` merged into the object).
async fn create(sim: &Simulator, collection: &str, name: &str, extra: Value) {
    let mut obj = json!({"metadata": {"name": name}});
    if let (Some(o), Value::Object(e)) = (obj.as_object_mut(), extra) {
        o.extend(e);
    }
    create_object(&sim.url(), collection, &obj).await;
}

/// A kubelet's watch-list of `CMS` (protobuf) through `px`.
async fn kubelet_watch_list(px: &TestProxy) -> (StatusCode, HeaderMap, Bytes) {
    request(
        Method::GET,
        &format!("{}{CMS}?{WATCH_LIST}", px.url),
        &[("accept", KUBELET)],
        "",
    )
    .await
}

/// Asserts kube's 429 for a cache not ready, in JSON: the Status, byte for byte, and its
/// `Retry-After`.
fn assert_not_ready_json(what: &str, s: StatusCode, h: &HeaderMap, body: &[u8]) {
    assert_eq!(
        s,
        StatusCode::TOO_MANY_REQUESTS,
        "{what}: {}",
        String::from_utf8_lossy(body)
    );
    assert_eq!(h["retry-after"], "1", "{what}");
    assert_eq!(h["content-type"], "application/json", "{what}");
    assert_eq!(body, format!("{NOT_READY}\n").as_bytes(), "{what}");
    assert!(!h.contains_key(FROM_CACHE), "{what}");
}

/// Checks kube's 429 for a cache not ready in protobuf (a kubelet's Accept): the Status as
/// kube's `errors.NewTooManyRequests` makes it, its `details.retryAfterSeconds` the same as the
/// `Retry-After` header. Returns that number.
fn not_ready_protobuf(what: &str, h: &HeaderMap, body: &[u8]) -> u32 {
    assert_eq!(
        h["content-type"], "application/vnd.kubernetes.protobuf",
        "{what}"
    );
    assert_eq!(body.get(..4), Some(&b"k8s\0"[..]), "{what}: protobuf magic");
    let u = Unknown::decode(&body[4..]).expect("runtime.Unknown");
    let t = u.type_meta.clone().unwrap_or_default();
    assert_eq!(
        (t.api_version.as_deref(), t.kind.as_deref()),
        (Some("v1"), Some("Status")),
        "{what}"
    );
    let st = PbStatus::decode(u.raw.as_deref().unwrap_or_default()).expect("Status");
    let header: u32 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert_eq!(st.status.as_deref(), Some("Failure"), "{what}");
    assert_eq!(
        st.message.as_deref(),
        Some("storage is (re)initializing"),
        "{what}"
    );
    assert_eq!(st.reason.as_deref(), Some("TooManyRequests"), "{what}");
    assert_eq!(st.code, Some(429), "{what}");
    let details = st.details.expect("details");
    assert_eq!(
        details.retry_after_seconds,
        Some(header as i32),
        "{what}: the body's retryAfterSeconds is the header's"
    );
    assert!(
        [&details.name, &details.group, &details.kind, &details.uid]
            .iter()
            .all(|f| f.as_deref().unwrap_or_default().is_empty())
            && details.causes.is_empty(),
        "{what}: {details:?}"
    );
    assert!((1..=30).contains(&header), "{what}: {header}");
    header
}

/// A kind whose cache cannot sync (its reflector's LIST fails), read in every form: what kube
/// hands to etcd passes through, the rest gets kube's 429, in JSON and protobuf, and the upstream
/// sees only what passed; then the `Retry-After` grows with the time since the cache started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_a_kind_not_ready_pass_through_or_get_kubes_429_as_kube_answers_them() {
    let sim = sim().await;
    for name in ["cm-0", "cm-1"] {
        create(&sim, CMS, name, json!({"data": {"k": name}})).await;
    }
    // The kind's own LIST and watch (at its cluster-wide path) fail: its cache cannot sync.
    sim.faults()
        .fail_next(500, 1_000_000, 0, "/api/v1/configmaps");
    let px = on_demand(&sim, |_| {}).await;

    // The first read, a GET, starts the kind's cache; it passes through.
    let (s, h, b) = request(Method::GET, &format!("{}{CMS}/cm-0", px.url), &[], "").await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    assert!(!h.contains_key(FROM_CACHE));
    let slot = px
        .proxy
        .slot("", "v1", "configmaps")
        .expect("started by its first read");
    wait_until("the reflector fails", 20, async || slot.failing()).await;
    assert!(!slot.refused(), "a 500 is not a refusal");

    // What kube's delegator hands to etcd while the cache is not ready: GETs, and LISTs with a
    // limit and no selector (consistent, resourceVersion=0 or not older than alike).
    let passed = [
        format!("{CMS}/cm-0"),
        format!("{CMS}/cm-1?resourceVersion=0"),
        format!("{CMS}?limit=1"),
        format!("{CMS}?limit=1&resourceVersion=0"),
        format!("{CMS}?limit=500&resourceVersion=0&resourceVersionMatch=NotOlderThan"),
    ];
    for pq in &passed {
        let before = sim_requests(&sim, "configmaps");
        let (s, h, b) = request(Method::GET, &format!("{}{pq}", px.url), &[], "").await;
        let (ss, _, sb) = request(Method::GET, &format!("{}{pq}", sim.url()), &[], "").await;
        assert_eq!((s, ss), (StatusCode::OK, StatusCode::OK), "{pq}");
        assert!(!h.contains_key(FROM_CACHE), "{pq}");
        assert_eq!(b, sb, "{pq}: the upstream's answer");
        assert_eq!(sim_requests(&sim, "configmaps"), before + 2, "{pq}");
    }
    // Everything else: 429, none of it reaching the upstream.
    let lists = [
        CMS.to_string(),
        format!("{CMS}?resourceVersion=0"),
        format!("{CMS}?resourceVersion=0&resourceVersionMatch=NotOlderThan"),
        format!("{CMS}?limit=1&labelSelector=a%3Db"),
        format!("{CMS}?limit=1&fieldSelector=metadata.name%3Dcm-0"),
        format!("{CMS}?limit=1&resourceVersion=0&fieldSelector=metadata.name%3Dcm-0"),
    ];
    let watches = [
        format!("{CMS}?watch=1"),
        format!("{CMS}?watch=1&resourceVersion=0"),
        format!("{CMS}?{WATCH_LIST}"),
        format!("{CMS}?{WATCH_LIST}&fieldSelector=metadata.name%3Dcm-0"),
        "/api/v1/watch/namespaces/default/configmaps".to_string(),
    ];
    let before = sim_requests(&sim, "configmaps");
    for pq in lists.iter().chain(&watches) {
        let (s, h, b) = request(Method::GET, &format!("{}{pq}", px.url), &[], "").await;
        assert_not_ready_json(pq, s, &h, &b);
    }
    // A kubelet gets it in protobuf.
    let (s, h, b) = kubelet_watch_list(&px).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(not_ready_protobuf("protobuf watch-list", &h, &b), 1);
    // kube's storage parses a watch's resourceVersion before it looks at its readiness.
    let (s, _, b) = request(
        Method::GET,
        &format!("{}{CMS}?watch=1&resourceVersion=x", px.url),
        &[],
        "",
    )
    .await;
    assert_eq!(
        s,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        String::from_utf8_lossy(&b)
    );
    assert_eq!(sim_requests(&sim, "configmaps"), before);

    // Counted as kube's reasons: passed through (GETs and paged LISTs) or refused.
    let r = async |verb: &str, source: &str, reason: &str| {
        reads(&px, "configmaps", verb, source, reason).await
    };
    assert_eq!(r("get", "pass_through", "not_ready").await, 3.0);
    assert_eq!(r("list", "pass_through", "not_ready").await, 3.0);
    assert_eq!(r("list", "refused", "not_ready").await, lists.len() as f64);
    assert_eq!(
        r("watch", "refused", "not_ready").await,
        watches.len() as f64 + 1.0
    );
    assert_eq!(r("list", "cache", "").await, 0.0);
    assert_eq!(r("watch", "cache", "").await, 1.0, "the 500");

    // kube's Retry-After grows with the time the cache has not been ready, from when it
    // started: e^(0.06·s), so 2 once it has not been ready for 11.6 s (here, since the first
    // read started it, above).
    let mut seen = Vec::new();
    wait_until("Retry-After reaches 2", 40, async || {
        let (s, h, b) = kubelet_watch_list(&px).await;
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
        let ra = not_ready_protobuf("watch-list", &h, &b);
        seen.push(ra);
        tokio::time::sleep(Duration::from_millis(200)).await;
        ra >= 2
    })
    .await;
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]) && seen.first() == Some(&1),
        "{seen:?}"
    );
    assert_eq!(seen.last(), Some(&2), "{seen:?}");
}

/// The first read of an on-demand kind starts its cache; a watch-list and an unpaged LIST,
/// which kube refuses while its cache is not ready, wait for the sync instead and are answered
/// from the cache: the upstream sees the kind's one LIST and one watch, nothing passed through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_waits_for_the_sync_is_answered_from_the_cache() {
    let sim = sim().await;
    for name in ["cm-0", "cm-1"] {
        create(&sim, CMS, name, json!({})).await;
    }
    let px = on_demand(&sim, |_| {}).await;
    assert!(px.proxy.cache("", "v1", "configmaps").is_none(), "cold");
    let before = sim_requests(&sim, "configmaps");
    let mut w = watch(&format!("{}{CMS}?{WATCH_LIST}", px.url)).await;
    assert_eq!(w.status, StatusCode::OK);
    assert!(w.headers.contains_key(FROM_CACHE));
    let mut added = BTreeSet::new();
    loop {
        let ev = w.next_event(Duration::from_secs(10)).await;
        if ev["type"] == "BOOKMARK" {
            assert_eq!(
                ev["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
            break;
        }
        assert_eq!(ev["type"], "ADDED", "{ev}");
        added.insert(
            ev["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(added, BTreeSet::from(["cm-0".into(), "cm-1".into()]));
    let (s, h, _) = request(Method::GET, &format!("{}{CMS}", px.url), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    assert!(h.contains_key(FROM_CACHE));
    assert_eq!(passed_through(&sim, before, &px, "configmaps").await, 0.0);
    assert_eq!(
        metric_sum(
            &px,
            "watchmux_upstream_requests_total",
            &[("resource", "configmaps"), ("verb", "list")]
        )
        .await,
        1.0,
        "the reflector's one LIST"
    );
    assert_eq!(reads(&px, "configmaps", "watch", "cache", "").await, 1.0);
    assert_eq!(
        metric_sum(
            &px,
            "watchmux_reads_total",
            &[("resource", "configmaps"), ("source", "refused")]
        )
        .await,
        0.0
    );
}

/// An on-demand kind the upstream will not let watchmux list (403 to its reflector) is not
/// refused with 429 for as long as that lasts: its reads pass through, with the clients' own
/// credentials; once watchmux may list it, its cache syncs and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_demand_kind_the_upstream_refuses_watchmux_passes_through() {
    let sim = sim().await;
    create(&sim, CMS, "cm-0", json!({})).await;
    sim.faults()
        .fail_next(403, 1_000_000, 0, "/api/v1/configmaps");
    let px = on_demand(&sim, |c| c.cache.not_ready_wait = Duration::ZERO).await;
    let (s, _, _) = request(Method::GET, &format!("{}{CMS}/cm-0", px.url), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    let slot = px.proxy.slot("", "v1", "configmaps").expect("started");
    wait_until("the upstream refuses the reflector", 20, async || {
        slot.refused()
    })
    .await;
    let before = sim_requests(&sim, "configmaps");
    let (s, h, b) = request(Method::GET, &format!("{}{CMS}", px.url), &[], "").await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    assert!(!h.contains_key(FROM_CACHE));
    let w = watch(&format!("{}{CMS}?{WATCH_LIST}", px.url)).await;
    assert_eq!(w.status, StatusCode::OK);
    assert!(!w.headers.contains_key(FROM_CACHE));
    drop(w);
    assert_eq!(sim_requests(&sim, "configmaps"), before + 2);
    assert_eq!(
        reads(&px, "configmaps", "watch", "pass_through", "not_ready").await,
        1.0
    );

    // Allowed again: the kind's cache syncs and answers.
    sim.faults().fail_next(403, 0, 0, "");
    wait_until("the cache syncs", 40, async || {
        px.proxy
            .cache("", "v1", "configmaps")
            .is_some_and(|c| c.is_synced())
    })
    .await;
    assert!(!slot.refused());
    let (s, h, _) = request(Method::GET, &format!("{}{CMS}", px.url), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    assert!(h.contains_key(FROM_CACHE));
}

// ---- a fleet of kubelets starting at once ---------------------------------------------------

const NODES: usize = 200;
const NAMESPACES: usize = 4;
/// ConfigMaps and Secrets per namespace, which the kubelets' pods reference.
const REFERENCED: usize = 3;

/// The simulator's fleet: 200 nodes, two pods on each over four namespaces, and in each
/// namespace three ConfigMaps and three Secrets. Returns it, with each node's pods
/// (`namespace/name`).
async fn fleet() -> (Simulator, BTreeMap<String, BTreeSet<String>>) {
    let sim = sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: NODES,
            pods: 2 * NODES,
            namespaces: NAMESPACES,
            seed: 34,
        })
    })
    .await;
    for n in 0..NAMESPACES {
        for i in 0..REFERENCED {
            let ns = format!("/api/v1/namespaces/fleet-{n}");
            create(
                &sim,
                &format!("{ns}/configmaps"),
                &format!("cm-{i}"),
                json!({}),
            )
            .await;
            create(
                &sim,
                &format!("{ns}/secrets"),
                &format!("secret-{i}"),
                json!({"stringData": {"k": "v"}}),
            )
            .await;
        }
    }
    let (s, pods) = get_json(&format!("{}/api/v1/pods", sim.url())).await;
    assert_eq!(s, StatusCode::OK);
    let mut on_node: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in pods["items"].as_array().expect("pods") {
        let m = &p["metadata"];
        let Some(node) = p["spec"]["nodeName"].as_str() else {
            continue;
        };
        if !node.starts_with("node-") {
            continue;
        }
        on_node.entry(node.to_string()).or_default().insert(format!(
            "{}/{}",
            m["namespace"].as_str().unwrap(),
            m["name"].as_str().unwrap()
        ));
    }
    assert_eq!(on_node.len(), NODES, "every node runs pods");
    (sim, on_node)
}

/// How the fleet's reads were answered.
#[derive(Debug, Default)]
struct Tally {
    /// Reads answered from the cache the first time (after the short wait, if any).
    served: usize,
    /// Reads refused the first time with kube's 429 (then retried after its Retry-After).
    refused: usize,
    /// 429 answers in all, retries included.
    answers_429: usize,
}

/// A GET on a kubelet's connection, retried after `Retry-After` while it gets kube's 429 for a
/// cache not ready (as client-go does), until answered. Every 429 is checked to be exactly
/// kube's, every 200 to come from the cache. `started`: when the fleet began, which bounds the
/// Retry-After kube's formula may give.
async fn served(
    send: &mut SendRequest<Empty<Bytes>>,
    base: &str,
    pq: &str,
    tally: &parking_lot::Mutex<Tally>,
    started: tokio::time::Instant,
) -> Incoming {
    for attempt in 0.. {
        // A guard: kube's Retry-After makes 30 attempts last over 40 s.
        assert!(attempt < 30, "{pq}: still refused after 30 attempts");
        let req = http2_get(base, pq, &[("accept", KUBELET)]);
        let resp = send.send_request(req).await.expect("a response");
        let (head, body) = resp.into_parts();
        if head.status == StatusCode::OK {
            assert!(
                head.headers.contains_key(FROM_CACHE),
                "{pq}: passed through"
            );
            if attempt == 0 {
                tally.lock().served += 1;
            }
            return body;
        }
        let bytes = body.collect().await.expect("a body").to_bytes();
        assert_eq!(
            head.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{pq}: {}",
            String::from_utf8_lossy(&bytes)
        );
        let ra = not_ready_protobuf(pq, &head.headers, &bytes);
        let downtime = started.elapsed().as_secs_f64();
        let most = (0.06 * downtime).exp().clamp(1.0, 30.0) as u32;
        assert!(
            ra <= most,
            "{pq}: Retry-After {ra} after at most {downtime} s"
        );
        {
            let mut t = tally.lock();
            t.answers_429 += 1;
            if attempt == 0 {
                t.refused += 1;
            }
        }
        tokio::time::sleep(Duration::from_secs(ra.into())).await;
    }
    unreachable!()
}

/// A watch-list's initial events (`namespace/name` of each ADDED), up to the bookmark that
/// ends them.
async fn initial_events(body: Incoming, what: &str) -> BTreeSet<String> {
    let mut frames = Frames::new(body);
    let mut added = BTreeSet::new();
    loop {
        let ev = frames.next(what).await;
        let raw = ev.object.and_then(|o| o.raw).expect("object.raw");
        let m = metadata_of(&raw);
        match ev.r#type.as_deref() {
            Some("ADDED") => {
                added.insert(format!(
                    "{}/{}",
                    m.namespace.unwrap_or_default(),
                    m.name.unwrap_or_default()
                ));
            }
            Some("BOOKMARK") => {
                assert_eq!(
                    m.annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true"),
                    "{what}"
                );
                return added;
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// One kubelet starting: on its own HTTP/2 connection, in protobuf, at once: a watch-list of its
/// pods (`spec.nodeName`), a LIST of its Node (`metadata.name`, as client-go's reflector lists
/// it: `limit=500&resourceVersion=0`), and a watch-list by name of the ConfigMap and the Secret
/// its pods reference. Returns what each read got.
async fn kubelet(
    base: String,
    i: usize,
    tally: Arc<parking_lot::Mutex<Tally>>,
    started: tokio::time::Instant,
) -> [BTreeSet<String>; 4] {
    let node = node_name(i);
    let ns = format!("fleet-{}", i % NAMESPACES);
    let (cm, secret) = (
        format!("cm-{}", i % REFERENCED),
        format!("secret-{}", i % REFERENCED),
    );
    let send = http2_connect(&base).await;
    let read = |pq: String| {
        let (mut send, base, tally) = (send.clone(), base.clone(), tally.clone());
        async move {
            let body = served(&mut send, &base, &pq, &tally, started).await;
            (pq, body)
        }
    };
    let (pods, nodes, cms, secrets) = tokio::join!(
        read(format!(
            "/api/v1/pods?fieldSelector=spec.nodeName%3D{node}&{WATCH_LIST}"
        )),
        read(format!(
            "/api/v1/nodes?fieldSelector=metadata.name%3D{node}&limit=500&resourceVersion=0"
        )),
        read(format!(
            "/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name%3D{cm}&{WATCH_LIST}"
        )),
        read(format!(
            "/api/v1/namespaces/{ns}/secrets?fieldSelector=metadata.name%3D{secret}&{WATCH_LIST}"
        )),
    );
    let node_list = {
        let (pq, body) = nodes;
        let bytes = body.collect().await.expect("the node list").to_bytes();
        assert_eq!(bytes.get(..4), Some(&b"k8s\0"[..]), "{pq}");
        let u = Unknown::decode(&bytes[4..]).expect("runtime.Unknown");
        PartialObjectMetadataList::decode(u.raw.as_deref().unwrap_or_default())
            .expect("a NodeList")
            .items
            .into_iter()
            .map(|n| n.metadata.unwrap_or_default().name.unwrap_or_default())
            .collect()
    };
    [
        initial_events(pods.1, &pods.0).await,
        node_list,
        initial_events(cms.1, &cms.0).await,
        initial_events(secrets.1, &secrets.0).await,
    ]
}

/// 200 kubelets start at once against watchmux whose caches are cold (on-demand, nothing read
/// yet; secrets cached as the config names them), with `not_ready_wait`: every kubelet gets
/// its pods, its Node, its ConfigMap and Secret, each read either answered from the cache
/// (after the wait) or refused with kube's 429 and answered from the cache once retried after
/// its Retry-After; none passes through, and the upstream sees each kind's LIST once.
async fn cold_start(not_ready_wait: Duration) -> Tally {
    let (sim, on_node) = fleet().await;
    let px = on_demand(&sim, |c| {
        c.cache
            .include
            .push(KindPattern::parse("core/secrets").unwrap());
        c.cache.not_ready_wait = not_ready_wait;
    })
    .await;
    let kinds = ["pods", "nodes", "configmaps", "secrets"];
    let sim_lists = |k: &str| {
        sim.stats()["resources"][k]["listRequests"]
            .as_u64()
            .unwrap()
    };
    let (mut before, mut lists_before) = (BTreeMap::new(), BTreeMap::new());
    for k in kinds {
        assert!(px.proxy.cache("", "v1", k).is_none(), "{k} is cold");
        before.insert(k, sim_requests(&sim, k));
        lists_before.insert(k, sim_lists(k));
    }
    let tally = Arc::new(parking_lot::Mutex::new(Tally::default()));
    let started = tokio::time::Instant::now();
    let kubelets: Vec<_> = (0..NODES)
        .map(|i| tokio::spawn(kubelet(px.url.clone(), i, tally.clone(), started)))
        .collect();
    for (i, k) in kubelets.into_iter().enumerate() {
        let [pods, nodes, cms, secrets] = k.await.expect("the kubelet converged");
        let node = node_name(i);
        let ns = format!("fleet-{}", i % NAMESPACES);
        assert_eq!(pods, on_node[&node], "{node}'s pods");
        assert_eq!(nodes, BTreeSet::from([node.clone()]), "{node}");
        assert_eq!(
            cms,
            BTreeSet::from([format!("{ns}/cm-{}", i % REFERENCED)]),
            "{node}'s ConfigMap"
        );
        assert_eq!(
            secrets,
            BTreeSet::from([format!("{ns}/secret-{}", i % REFERENCED)]),
            "{node}'s Secret"
        );
    }
    for k in kinds {
        // Nothing passed through: every request the upstream saw for the kind was watchmux's
        // own (its reflector's, its freshness checks'), as it counts them.
        assert_eq!(passed_through(&sim, before[k], &px, k).await, 0.0, "{k}");
        let own = async |verb: &str| {
            metric_sum(
                &px,
                "watchmux_upstream_requests_total",
                &[("resource", k), ("verb", verb)],
            )
            .await
        };
        assert_eq!(own("list").await, 1.0, "{k}: the reflector's one LIST");
        // The simulator's own count: its LISTs of the kind, less the freshness checks'
        // requests (`limit=1` or metadata LISTs, short watches), are that one LIST.
        let lists = (sim_lists(k) - lists_before[k]) as f64;
        assert!(
            lists - own("freshness").await <= 1.0,
            "{k}: {lists} LISTs upstream"
        );
        for verb in ["get", "list", "watch"] {
            assert_eq!(reads(&px, k, verb, "pass_through", "not_ready").await, 0.0);
        }
    }
    let tally = Arc::into_inner(tally).unwrap().into_inner();
    assert_eq!(tally.served + tally.refused, 4 * NODES);
    assert_eq!(
        metric_sum(
            &px,
            "watchmux_reads_total",
            &[("source", "refused"), ("reason", "not_ready")]
        )
        .await as usize,
        tally.answers_429
    );
    eprintln!("cold start, not_ready_wait {not_ready_wait:?}: first reads {tally:?}");
    tally
}

/// Without a wait, every read that arrives before its kind's sync gets kube's 429 at once (the
/// first read of each kind does: it is what starts the cache), and the kubelets converge by
/// retrying after its Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_of_200_kubelets_retrying_after_429_sends_each_kinds_list_upstream_once() {
    let tally = cold_start(Duration::ZERO).await;
    assert!(tally.refused >= 4, "{tally:?}: each kind's first read");
}

/// With a wait longer than the sync can take (the default is 3 s; 30 s here, so that how long
/// the sync takes on a loaded machine does not matter), every read that arrives before its
/// kind's sync waits for it and is answered from the cache: no 429 at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_of_200_kubelets_waiting_for_the_sync_sends_each_kinds_list_upstream_once() {
    let tally = cold_start(Duration::from_secs(30)).await;
    assert_eq!((tally.served, tally.answers_429), (4 * NODES, 0));
}
