//! Protobuf clients of the cache, as kubelets and controllers configure client-go (`Accept:
//! application/vnd.kubernetes.protobuf,application/json`): LISTs, GETs and watches answered from
//! the cache in protobuf, decoded here with an independent decoder (kube-rs's `k8s-pb` message
//! types, not watchmux's transcoder), carrying the same objects as the JSON answers; watches over
//! chunked HTTP and websocket converge under churn like JSON ones; errors are protobuf Status
//! bodies.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_pb::api::core::v1::{Pod, PodList};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{
    PartialObjectMetadata, PartialObjectMetadataList, Status as PbStatus, WatchEvent,
};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::common::{self, Next, TestProxy};

/// What a kubelet sends.
const KUBELET: &str = "application/vnd.kubernetes.protobuf,application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A `k8s\0`-prefixed `runtime.Unknown`.
fn unknown(b: &[u8]) -> Unknown {
    assert_eq!(b.get(..4), Some(&b"k8s\0"[..]), "kube's protobuf magic");
    Unknown::decode(&b[4..]).expect("runtime.Unknown")
}

/// The `(apiVersion, kind)` of an envelope.
fn type_of(u: &Unknown) -> (String, String) {
    let t = u.type_meta.clone().unwrap_or_default();
    (
        t.api_version.unwrap_or_default(),
        t.kind.unwrap_or_default(),
    )
}

fn meta_of(p: &Pod) -> (String, String, String) {
    let m = p.metadata.clone().unwrap_or_default();
    (
        m.namespace.unwrap_or_default(),
        m.name.unwrap_or_default(),
        m.resource_version.unwrap_or_default(),
    )
}

/// `(namespace/name, resourceVersion, nodeName, labels)` of the pods of a JSON list.
fn json_pods(list: &Value) -> Vec<(String, String, String, BTreeMap<String, String>)> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            (
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap_or_default(),
                    m["name"].as_str().unwrap_or_default()
                ),
                m["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                m["labels"]
                    .as_object()
                    .map(|l| {
                        l.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                            .collect()
                    })
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// The same of protobuf pods.
fn pb_pods(items: &[Pod]) -> Vec<(String, String, String, BTreeMap<String, String>)> {
    items
        .iter()
        .map(|p| {
            let (ns, name, rv) = meta_of(p);
            let m = p.metadata.clone().unwrap_or_default();
            (
                format!("{ns}/{name}"),
                rv,
                p.spec.clone().and_then(|s| s.node_name).unwrap_or_default(),
                m.labels.into_iter().collect(),
            )
        })
        .collect()
}

async fn seeded() -> (kube_sim::Simulator, TestProxy) {
    let sim = common::sim().await;
    let namespaces = sim.resource("", "v1", "namespaces").unwrap();
    sim.ops()
        .create(
            &namespaces,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "churn"}}),
            false,
        )
        .unwrap();
    let pods = sim.resource("", "v1", "pods").unwrap();
    for i in 0..5 {
        sim.ops()
            .create(
                &pods,
                Some("default"),
                common::pod(
                    &format!("p{i}"),
                    &format!("n{}", i % 2),
                    json!({"app": "web"}),
                ),
                false,
            )
            .unwrap();
    }
    let px = common::proxy_for(&sim, |_| {}).await;
    // The reflector's watch is open (it follows the sync): reads counted from now on are the
    // test's own.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while common::upstream_reads(&sim, &["pods"]).2 == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no upstream watch of pods"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (sim, px)
}

/// [`seeded`], once watchmux's pod cache holds every write the simulator made.
async fn seeded_and_caught_up() -> (kube_sim::Simulator, TestProxy) {
    let (sim, px) = seeded().await;
    let cache = px.proxy.cache("", "v1", "pods").expect("pods are cached");
    assert!(
        cache
            .wait_rv(sim.store().revision(), Duration::from_secs(10))
            .await
    );
    (sim, px)
}

#[tokio::test]
async fn lists_and_gets_in_protobuf_carry_the_json_answers_objects() {
    let (sim, px) = seeded().await;
    for pq in [
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb&resourceVersion=0",
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&resourceVersion=0",
        "/api/v1/pods?resourceVersion=0&limit=2",
    ] {
        let (s, h, b) = common::request(
            http::Method::GET,
            &format!("{}{pq}", px.url),
            &[("accept", KUBELET)],
            "",
        )
        .await;
        assert_eq!(s, 200, "{pq}");
        assert_eq!(h["content-type"], PROTOBUF, "{pq}");
        let u = unknown(&b);
        assert_eq!(type_of(&u), ("v1".into(), "PodList".into()));
        let list = PodList::decode(u.raw.as_deref().unwrap_or_default()).expect("PodList");
        let json: Value = serde_json::from_slice(
            &common::from_the_cache(&sim, &px, &["pods"], pq, "application/json").await,
        )
        .unwrap();
        assert_eq!(pb_pods(&list.items), json_pods(&json), "{pq}");
        assert!(!list.items.is_empty(), "{pq}");
        assert_eq!(
            list.metadata.and_then(|m| m.resource_version),
            json["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            "{pq}"
        );
    }
    // A GET: the object in its envelope, from the cache.
    let b = common::from_the_cache(
        &sim,
        &px,
        &["pods"],
        "/api/v1/namespaces/default/pods/p3?resourceVersion=0",
        KUBELET,
    )
    .await;
    let u = unknown(&b);
    assert_eq!(type_of(&u), ("v1".into(), "Pod".into()));
    let pod = Pod::decode(u.raw.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(meta_of(&pod).1, "p3");
    assert_eq!(
        pod.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx")
    );
    // Metadata informers: PartialObjectMetadataList in protobuf.
    let b = common::from_the_cache(
        &sim,
        &px,
        &["pods"],
        "/api/v1/pods?resourceVersion=0",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    let u = unknown(&b);
    assert_eq!(
        type_of(&u),
        ("meta.k8s.io/v1".into(), "PartialObjectMetadataList".into())
    );
    let l = PartialObjectMetadataList::decode(u.raw.as_deref().unwrap_or_default()).unwrap();
    let names: Vec<_> = l
        .items
        .iter()
        .map(|m| m.metadata.clone().unwrap().name.unwrap())
        .collect();
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    // Tables have no protobuf form: a protobuf Table range is skipped, JSON answers.
    let (s, h, _) = common::request(
        http::Method::GET,
        &format!("{}/api/v1/pods", px.url),
        &[(
            "accept",
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json",
        )],
        "",
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(h["content-type"], "application/json");
}

#[tokio::test]
async fn errors_are_protobuf_statuses_for_protobuf_clients() {
    let (_sim, px) = seeded().await;
    let (s, h, b) = common::request(
        http::Method::GET,
        &format!("{}/api/v1/pods?labelSelector=a%20in%20(", px.url),
        &[("accept", KUBELET)],
        "",
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(h["content-type"], PROTOBUF);
    let u = unknown(&b);
    assert_eq!(type_of(&u), ("v1".into(), "Status".into()));
    let st = PbStatus::decode(u.raw.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(st.code, Some(400));
    assert_eq!(st.reason.as_deref(), Some("BadRequest"));
    // The same request in JSON says the same.
    let (s, j) =
        common::get_json(&format!("{}/api/v1/pods?labelSelector=a%20in%20(", px.url)).await;
    assert_eq!(s, 400);
    assert_eq!(j["message"].as_str(), st.message.as_deref());
}

/// Every error watchmux answers itself for a cached kind (a missing object, a selector kube
/// cannot parse, invalid list options) is encoded as kube encodes errors for the request's
/// `Accept` header: protobuf for protobuf-first clients, JSON, or kube's raw indented JSON for
/// a header that takes no serializer for a Status (a Table or metadata form alone): the
/// simulator's status, content type and bytes, without reaching it.
#[tokio::test]
async fn error_answers_are_encoded_as_kube_encodes_errors() {
    let (sim, px) = seeded_and_caught_up().await;
    for pq in [
        "/api/v1/namespaces/default/pods/zz?resourceVersion=0",
        "/api/v1/pods?labelSelector=a%20in%20(",
        "/api/v1/pods?resourceVersionMatch=Exact",
    ] {
        // The metadata form of what the request reads (the other one passes through: kube's
        // 406 for it comes after the read).
        let metadata = if pq.contains("/pods/") {
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
        } else {
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        };
        for accept in [
            KUBELET,
            PROTOBUF,
            "application/json",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            metadata,
        ] {
            let before = common::upstream_reads(&sim, &["pods"]);
            let headers = [("accept", accept)];
            let ours =
                common::request(http::Method::GET, &format!("{}{pq}", px.url), &headers, "").await;
            assert_eq!(
                common::upstream_reads(&sim, &["pods"]),
                before,
                "{pq} ({accept}): answered by watchmux"
            );
            let theirs = common::request(
                http::Method::GET,
                &format!("{}{pq}", sim.url()),
                &headers,
                "",
            )
            .await;
            assert!(ours.0.is_client_error(), "{pq} ({accept}): {:?}", ours.0);
            assert_eq!(ours.0, theirs.0, "{pq} ({accept})");
            assert_eq!(
                ours.1.get("content-type"),
                theirs.1.get("content-type"),
                "{pq} ({accept})"
            );
            assert!(
                ours.2 == theirs.2,
                "{pq} ({accept}): {:?} vs {:?}",
                ours.2,
                theirs.2
            );
        }
    }
}

/// One decoded protobuf watch event: its type and object envelope.
fn event(frame: &[u8]) -> (String, Unknown) {
    let e = WatchEvent::decode(frame).expect("WatchEvent");
    let raw = e.object.and_then(|o| o.raw).expect("object.raw");
    (e.r#type.unwrap_or_default(), unknown(&raw))
}

/// A protobuf informer's state: LIST, then WATCH from the list's resourceVersion; events
/// applied by name; every event's resourceVersion strictly greater than the last one seen.
struct Informer {
    pods: BTreeMap<String, String>,
    rv: u64,
    events: usize,
}

impl Informer {
    async fn list(url: &str) -> Informer {
        let (s, _, b) = common::request(
            http::Method::GET,
            &format!("{url}/api/v1/namespaces/churn/pods"),
            &[("accept", KUBELET)],
            "",
        )
        .await;
        assert_eq!(s, 200);
        let l = PodList::decode(unknown(&b).raw.as_deref().unwrap_or_default()).unwrap();
        let rv = l.metadata.and_then(|m| m.resource_version).unwrap();
        Informer {
            pods: l
                .items
                .iter()
                .map(|p| {
                    let (_, n, rv) = meta_of(p);
                    (n, rv)
                })
                .collect(),
            rv: rv.parse().unwrap(),
            events: 0,
        }
    }

    fn watch_path(&self) -> String {
        format!(
            "/api/v1/namespaces/churn/pods?watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds=60",
            self.rv
        )
    }

    fn apply(&mut self, frame: &[u8]) {
        let (ty, u) = event(frame);
        assert_ne!(
            ty,
            "ERROR",
            "{:?}",
            PbStatus::decode(u.raw.as_deref().unwrap_or_default())
        );
        assert_eq!(type_of(&u), ("v1".into(), "Pod".into()), "{ty}");
        let pod = Pod::decode(u.raw.as_deref().unwrap_or_default()).unwrap();
        let (_, name, rv) = meta_of(&pod);
        let rv: u64 = rv.parse().unwrap();
        if ty == "BOOKMARK" {
            assert!(rv >= self.rv, "bookmarks never go back");
            self.rv = rv;
            return;
        }
        assert!(rv > self.rv, "{ty} {name} at {rv} after {}", self.rv);
        self.rv = rv;
        self.events += 1;
        match ty.as_str() {
            "ADDED" | "MODIFIED" => {
                self.pods.insert(name, rv.to_string());
            }
            "DELETED" => {
                assert!(self.pods.remove(&name).is_some(), "deleted unknown {name}");
            }
            other => panic!("event type {other}"),
        }
    }
}

/// The simulator's pods in `churn`: name → resourceVersion.
async fn truth(sim: &kube_sim::Simulator) -> BTreeMap<String, String> {
    let (_, v) = common::get_json(&format!("{}/api/v1/namespaces/churn/pods", sim.url())).await;
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                p["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// Creates, updates and deletes pods in `churn` for a while (bounded); returns the writes done.
async fn churn(sim: &kube_sim::Simulator, rounds: usize) -> usize {
    let mut writes = 0;
    let pods = sim.resource("", "v1", "pods").unwrap();
    for i in 0..rounds {
        let name = format!("c{}", i % 7);
        let ops = sim.ops();
        match ops.get(&pods, Some("churn"), &name) {
            Ok(o) if i % 3 == 0 => {
                let now = kube_sim::semantics::DeleteOptions {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                };
                writes += usize::from(ops.delete(&pods, Some("churn"), &o.name, &now).is_ok());
            }
            Ok(o) => {
                let mut v = o.to_value(&pods);
                v["metadata"]["labels"]["round"] = json!(i.to_string());
                let r = ops.update(
                    &pods,
                    Some("churn"),
                    &name,
                    v,
                    kube_sim::semantics::UpdateScope::Main,
                );
                writes += usize::from(r.is_ok());
            }
            Err(_) => {
                let r = ops.create(
                    &pods,
                    Some("churn"),
                    common::pod(&name, "n1", json!({"round": i.to_string()})),
                    false,
                );
                writes += usize::from(r.is_ok());
            }
        }
        if i % 10 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    writes
}

#[tokio::test]
async fn protobuf_watchers_converge_under_churn_over_chunked_http() {
    let (sim, px) = seeded().await;
    let mut inf = Informer::list(&px.url).await;
    let mut w = common::watch_with(
        &format!("{}{}", px.url, inf.watch_path()),
        &[("accept", KUBELET)],
    )
    .await;
    assert_eq!(w.status, 200);
    assert_eq!(
        w.headers["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    assert!(churn(&sim, 300).await > 250, "the churn writes");
    let want = truth(&sim).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while inf.pods != want {
        assert!(tokio::time::Instant::now() < deadline, "did not converge");
        match w.next_frame(Duration::from_secs(10)).await {
            Ok(f) => inf.apply(&f),
            Err(e) => panic!("the watch stopped: {e:?}"),
        }
    }
    assert!(inf.events > 100, "saw the churn: {} events", inf.events);
}

#[tokio::test]
async fn protobuf_watchers_converge_under_churn_over_websocket() {
    let (sim, px) = seeded().await;
    let mut inf = Informer::list(&px.url).await;
    let mut req = format!("{}{}", px.url.replace("http://", "ws://"), inf.watch_path())
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Accept", HeaderValue::from_static(KUBELET));
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("handshake");
    assert!(churn(&sim, 300).await > 250, "the churn writes");
    let want = truth(&sim).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while inf.pods != want {
        assert!(tokio::time::Instant::now() < deadline, "did not converge");
        match tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message")
        {
            // One binary message per event: the bare WatchEvent, no length prefix.
            Some(Ok(Message::Binary(b))) => inf.apply(&b),
            Some(Ok(Message::Text(t))) => panic!("protobuf events are binary messages: {t}"),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("the watch stopped: {other:?}"),
        }
    }
    assert!(inf.events > 100, "saw the churn: {} events", inf.events);
}

#[tokio::test]
async fn watch_list_bookmarks_and_expired_watches_in_protobuf() {
    let (_sim, px) = seeded().await;
    // A watch-list: the initial events, then the bookmark that ends them.
    let mut w = common::watch_with(
        &format!(
            "{}/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=30",
            px.url
        ),
        &[("accept", KUBELET)],
    )
    .await;
    let mut names = Vec::new();
    loop {
        let f = w.next_frame(Duration::from_secs(10)).await.expect("frame");
        let (ty, u) = event(&f);
        let pod = Pod::decode(u.raw.as_deref().unwrap_or_default()).unwrap();
        if ty == "BOOKMARK" {
            let m = pod.metadata.unwrap();
            assert_eq!(
                m.annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
            assert!(m.name.unwrap_or_default().is_empty());
            break;
        }
        assert_eq!(ty, "ADDED");
        names.push(meta_of(&pod).1);
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    // Metadata watches: PartialObjectMetadata events.
    let mut w = common::watch_with(
        &format!(
            "{}/api/v1/namespaces/default/pods?watch=1&resourceVersion=0&timeoutSeconds=30",
            px.url
        ),
        &[(
            "accept",
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )],
    )
    .await;
    let f = w.next_frame(Duration::from_secs(10)).await.expect("frame");
    let (ty, u) = event(&f);
    assert_eq!(ty, "ADDED");
    assert_eq!(
        type_of(&u),
        ("meta.k8s.io/v1".into(), "PartialObjectMetadata".into())
    );
    let m = PartialObjectMetadata::decode(u.raw.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(m.metadata.unwrap().name.as_deref(), Some("p0"));
    // Older than the cache's window (it starts at its first LIST, after the seeded pods): one
    // ERROR event carrying a protobuf Status 410, then the end.
    let mut w = common::watch_with(
        &format!("{}/api/v1/pods?watch=1&resourceVersion=1", px.url),
        &[("accept", KUBELET)],
    )
    .await;
    let f = w.next_frame(Duration::from_secs(10)).await.expect("frame");
    let (ty, u) = event(&f);
    assert_eq!(ty, "ERROR");
    assert_eq!(type_of(&u), ("v1".into(), "Status".into()));
    let st = PbStatus::decode(u.raw.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(
        (st.code, st.reason.as_deref()),
        (Some(410), Some("Expired"))
    );
    assert!(matches!(
        w.next_frame(Duration::from_secs(10)).await,
        Err(Next::End)
    ));
}

#[tokio::test]
async fn protobuf_answers_are_the_simulators_bytes() {
    let (sim, px) = seeded_and_caught_up().await;
    // A GET and a LIST at the same state: the same bytes as the simulator's.
    for pq in [
        "/api/v1/namespaces/default/pods/p2",
        "/api/v1/pods?labelSelector=app%3Dweb",
    ] {
        let ours = common::from_the_cache(
            &sim,
            &px,
            &["pods"],
            &format!(
                "{pq}{}resourceVersion=0",
                if pq.contains('?') { "&" } else { "?" }
            ),
            KUBELET,
        )
        .await;
        let theirs = common::sim_answer(&sim, pq, KUBELET).await;
        assert!(ours == theirs, "{pq}: the bytes differ");
    }
    // Watch frames: the same events, byte for byte, over the same writes.
    let rv = sim.store().revision();
    let pq =
        format!("/api/v1/namespaces/churn/pods?watch=1&resourceVersion={rv}&labelSelector=round");
    let mut ours = common::watch_with(&format!("{}{pq}", px.url), &[("accept", KUBELET)]).await;
    let mut theirs =
        common::watch_with(&format!("{}{pq}", sim.url()), &[("accept", KUBELET)]).await;
    assert_eq!(ours.headers["content-type"], theirs.headers["content-type"]);
    let writes = churn(&sim, 40).await;
    for i in 0..writes {
        let a = ours
            .next_frame(Duration::from_secs(10))
            .await
            .expect("watchmux's frame");
        let b = theirs
            .next_frame(Duration::from_secs(10))
            .await
            .expect("the simulator's frame");
        assert!(
            a == b,
            "frame {i} differs: {:?} vs {:?}",
            event(&a).0,
            event(&b).0
        );
    }
}
