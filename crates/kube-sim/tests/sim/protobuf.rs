//! The simulator in protobuf, as kube-apiserver speaks it to protobuf-first clients: GET, LIST,
//! PartialObjectMetadata(List), watch frames (chunked and websocket; events, bookmarks, ERROR),
//! Status errors, write answers, and protobuf request bodies.
//!
//! Every protobuf answer is read with an independent decoder, k8s-pb's prost types (generated
//! from kube's `.proto` files): the envelope is a `runtime.Unknown`, the object decodes as its
//! kind and prost re-encodes exactly the same bytes (kube's encoding is canonical). Its content is
//! then checked against the simulator's JSON answer to the same request: kube-wire's
//! `proto_to_json` of the message equals that JSON (as values).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, Method, StatusCode};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube_sim::Simulator;
use kube_sim::fleet::FleetSpec;
use kube_sim::kinds::CustomType;
use kube_sim::testkit::{Next, WatchStream, get_json, request, send_json, sim_with, watch_with};
use kube_wire::proto::{message_for, proto_to_json};
use prost::Message;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

const PB: &str = "application/vnd.kubernetes.protobuf";
/// What every Kubernetes component sends.
const PB_FIRST: &str = "application/vnd.kubernetes.protobuf,application/json";
const JSON: &str = "application/json";
const T: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Decoding with k8s-pb
// ---------------------------------------------------------------------------------------------

/// The `runtime.Unknown` after kube's `k8s\0` magic, as k8s-pb decodes it; kube writes both
/// content fields, empty.
fn unknown(body: &[u8]) -> Unknown {
    let rest = body
        .strip_prefix(b"k8s\0")
        .unwrap_or_else(|| panic!("no k8s\\0 prefix: {:?}", String::from_utf8_lossy(body)));
    let u = Unknown::decode(rest).expect("k8s-pb decodes the envelope");
    assert_eq!(u.content_encoding.as_deref(), Some(""));
    assert_eq!(u.content_type.as_deref(), Some(""));
    u
}

fn type_meta(u: &Unknown) -> (String, String) {
    let tm = u.type_meta.clone().expect("typeMeta");
    (
        tm.api_version.unwrap_or_default(),
        tm.kind.unwrap_or_default(),
    )
}

/// Decodes `raw` as `M` and checks that prost writes back the same bytes (kube's encoding is
/// canonical: fields in tag order, zero values of value fields written), but for the one thing
/// prost leaves out that gogo writes: the empty value of a map entry.
fn check<M: Message + Default>(raw: &[u8]) -> M {
    let m = M::decode(raw).expect("k8s-pb decodes the message");
    let again = m.encode_to_vec();
    assert!(
        same_but_empty_map_values(raw, &again),
        "prost re-encodes the same bytes:\n{raw:?}\n{again:?}"
    );
    m
}

/// The fields of a message: (tag, wire type, payload or varint bytes); `None` if malformed.
fn fields(mut b: &[u8]) -> Option<Vec<(u32, u8, &[u8])>> {
    use prost::encoding::decode_varint;
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = decode_varint(&mut b).ok()?;
        let (tag, wire) = (u32::try_from(key >> 3).ok()?, (key & 7) as u8);
        let len = match wire {
            0 => b.iter().position(|c| c & 0x80 == 0)? + 1,
            1 => 8,
            5 => 4,
            2 => usize::try_from(decode_varint(&mut b).ok()?).ok()?,
            _ => return None,
        };
        let (v, rest) = b.split_at_checked(len)?;
        out.push((tag, wire, v));
        b = rest;
    }
    Some(out)
}

/// `ours == prost`, or they differ only where a map entry `{1: key, 2: ""}` (gogo) is
/// `{1: key}` (prost).
fn same_but_empty_map_values(ours: &[u8], prost: &[u8]) -> bool {
    if ours == prost {
        return true;
    }
    let (Some(a), Some(b)) = (fields(ours), fields(prost)) else {
        return false;
    };
    if let ([(1, 2, k), (2, 2, [])], [(1, 2, k2)]) = (a.as_slice(), b.as_slice()) {
        return k == k2;
    }
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x.0 == y.0
                && x.1 == y.1
                && (x.2 == y.2 || (x.1 == 2 && same_but_empty_map_values(x.2, y.2)))
        })
}

/// Decodes the envelope's message as its kind with k8s-pb; the number of objects in it.
fn decode_as_kind(u: &Unknown) -> usize {
    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::autoscaling::v1 as autoscaling;
    use k8s_pb::api::coordination::v1 as coordination;
    use k8s_pb::api::core::v1 as core;
    let raw = u.raw.as_deref().unwrap_or_default();
    match type_meta(u).1.as_str() {
        "Pod" => usize::from(check::<core::Pod>(raw).metadata.is_some()),
        "PodList" => check::<core::PodList>(raw).items.len(),
        "Node" => usize::from(check::<core::Node>(raw).metadata.is_some()),
        "NodeList" => check::<core::NodeList>(raw).items.len(),
        "ConfigMap" => usize::from(check::<core::ConfigMap>(raw).metadata.is_some()),
        "ConfigMapList" => check::<core::ConfigMapList>(raw).items.len(),
        "Deployment" => usize::from(check::<apps::Deployment>(raw).metadata.is_some()),
        "DeploymentList" => check::<apps::DeploymentList>(raw).items.len(),
        "Lease" => usize::from(check::<coordination::Lease>(raw).metadata.is_some()),
        "LeaseList" => check::<coordination::LeaseList>(raw).items.len(),
        "Scale" => usize::from(check::<autoscaling::Scale>(raw).metadata.is_some()),
        "PartialObjectMetadata" => usize::from(
            check::<metav1::PartialObjectMetadata>(raw)
                .metadata
                .is_some(),
        ),
        "PartialObjectMetadataList" => check::<metav1::PartialObjectMetadataList>(raw).items.len(),
        "Status" => usize::from(check::<metav1::Status>(raw).code.is_some()),
        other => panic!("no k8s-pb type for {other}"),
    }
}

/// The envelope's message as JSON (kube-wire's `proto_to_json`, with its type meta).
fn as_json(u: &Unknown) -> Value {
    let (av, kind) = type_meta(u);
    let msg = message_for(&av, &kind).unwrap_or_else(|| panic!("no message for {av} {kind}"));
    let raw = u.raw.as_deref().unwrap_or_default();
    let json = proto_to_json(msg, raw, Some((&av, &kind))).expect("the message decodes");
    serde_json::from_slice(&json).unwrap()
}

/// A watch frame's event (k8s-pb's `WatchEvent`): its type and its object's envelope.
fn watch_event(frame: &[u8]) -> (String, Unknown) {
    let e = check::<metav1::WatchEvent>(frame);
    let raw = e.object.and_then(|o| o.raw).expect("object.raw");
    (e.r#type.unwrap_or_default(), unknown(&raw))
}

/// A protobuf body (kube's envelope around `msg`) built with k8s-pb only.
fn body(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let u = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend_from_slice(&u.encode_to_vec());
    out
}

// ---------------------------------------------------------------------------------------------
// A cluster
// ---------------------------------------------------------------------------------------------

fn widgets() -> CustomType {
    CustomType {
        group: "example.com".into(),
        version: "v1".into(),
        resource: "widgets".into(),
        kind: "Widget".into(),
        namespaced: true,
        selectable_fields: Vec::new(),
        printer_columns: Vec::new(),
        served_without_crd: false,
    }
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion":"v1","kind":"ConfigMap",
        "metadata":{"name":name,"labels":{"app":"web"}},"data":{"a":"1","b":"2"}})
}

fn pod(name: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"labels":{"app":"web"}},
        "spec":{"nodeName":"node-00000","containers":[{"name":"c","image":"nginx","resources":{}}]}})
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion":"apps/v1","kind":"Deployment",
        "metadata":{"name":name,"labels":{"app":name}},
        "spec":{"replicas":2,"selector":{"matchLabels":{"app":name}},
            "template":{"metadata":{"labels":{"app":name}},
                "spec":{"containers":[{"name":"nginx","image":"nginx","resources":{}}]}}}})
}

fn lease(name: &str) -> Value {
    json!({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",
        "metadata":{"name":name,"namespace":"kube-node-lease"},
        "spec":{"holderIdentity":name,"leaseDurationSeconds":40,
            "renewTime":"2026-01-02T03:04:05.123456Z"}})
}

/// A node as a kubelet registers it (kube keeps a node's status on create).
fn node(name: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Node","metadata":{"name":name,"labels":{"zone":"a"}},
        "spec":{"podCIDR":"10.0.9.0/24"},
        "status":{"capacity":{"cpu":"4","pods":"110"},
            "daemonEndpoints":{"kubeletEndpoint":{"Port":10250}},
            "nodeInfo":{"machineID":"m","systemUUID":"s","bootID":"b","kernelVersion":"6.8",
                "osImage":"Ubuntu","containerRuntimeVersion":"containerd://2.0.5",
                "kubeletVersion":"v1.36.2","kubeProxyVersion":"","operatingSystem":"linux",
                "architecture":"amd64"}}})
}

async fn post(url: &str, v: &Value) -> Value {
    let (s, out) = send_json(Method::POST, url, JSON, v).await;
    assert_eq!(s, StatusCode::CREATED, "{url}: {out}");
    out
}

/// A fleet (nodes, pods), a configmap, a deployment, a lease and a widget; no periodic
/// bookmarks, so that two watchers of the same URL get the same frames.
async fn cluster() -> Simulator {
    let sim = sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 3,
            pods: 8,
            namespaces: 2,
            seed: 3,
        });
        c.bookmark_interval = Duration::from_secs(3600);
        c.custom_types = vec![widgets()];
    })
    .await;
    let u = sim.url();
    post(
        &format!("{u}/api/v1/namespaces/default/configmaps"),
        &configmap("settings"),
    )
    .await;
    post(
        &format!("{u}/apis/apps/v1/namespaces/default/deployments"),
        &deployment("web"),
    )
    .await;
    post(
        &format!("{u}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"),
        &lease("node-00000"),
    )
    .await;
    post(
        &format!("{u}/apis/example.com/v1/namespaces/default/widgets"),
        &json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3}}),
    )
    .await;
    sim
}

async fn get_as(url: &str, accept: &str) -> (StatusCode, HeaderMap, Bytes) {
    request(Method::GET, url, &[("accept", accept)], "").await
}

/// The JSON answer (with `Accept: application/json`).
async fn json_answer(url: &str) -> (StatusCode, Value) {
    let (s, _, b) = get_as(url, JSON).await;
    (s, serde_json::from_slice(&b).unwrap())
}

/// A protobuf answer: its code, envelope, and the envelope's checks.
async fn pb_answer(url: &str, accept: &str) -> (StatusCode, Unknown) {
    let (s, h, b) = get_as(url, accept).await;
    assert_eq!(
        h["content-type"],
        PB,
        "{url}: {}",
        String::from_utf8_lossy(&b)
    );
    (s, unknown(&b))
}

// ---------------------------------------------------------------------------------------------
// GET, LIST, PartialObjectMetadata
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn gets_and_lists_decode_to_the_json_answers() {
    let sim = cluster().await;
    let u = sim.url();
    let collections = [
        ("/api/v1/pods", "v1", "PodList"),
        ("/api/v1/namespaces/fleet-1/pods", "v1", "PodList"),
        ("/api/v1/nodes", "v1", "NodeList"),
        (
            "/api/v1/namespaces/default/configmaps",
            "v1",
            "ConfigMapList",
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            "apps/v1",
            "DeploymentList",
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            "coordination.k8s.io/v1",
            "LeaseList",
        ),
    ];
    for (path, av, list_kind) in collections {
        let url = format!("{u}{path}");
        let (s, unk) = pb_answer(&url, PB_FIRST).await;
        assert_eq!(s, 200, "{path}");
        assert_eq!(type_meta(&unk), (av.to_string(), list_kind.to_string()));
        let (_, want) = json_answer(&url).await;
        let items = want["items"].as_array().unwrap();
        assert!(!items.is_empty(), "{path}: {want}");
        assert_eq!(decode_as_kind(&unk), items.len(), "{path}");
        assert_eq!(as_json(&unk), want, "{path}");
        // A protobuf-only client gets the same.
        let (_, only) = pb_answer(&url, PB).await;
        assert_eq!(only, unk);
        // Each object's GET.
        let kind = list_kind.trim_end_matches("List");
        for item in items {
            let meta = &item["metadata"];
            let name = meta["name"].as_str().unwrap();
            let base = path.rsplit_once('/').unwrap().0;
            let object_url = match meta["namespace"].as_str() {
                Some(ns) if !path.contains("/namespaces/") => {
                    format!("{u}{base}/namespaces/{ns}/pods/{name}")
                }
                _ => format!("{url}/{name}"),
            };
            let (s, unk) = pb_answer(&object_url, PB_FIRST).await;
            assert_eq!(s, 200, "{object_url}");
            assert_eq!(type_meta(&unk), (av.to_string(), kind.to_string()));
            assert_eq!(decode_as_kind(&unk), 1);
            let (_, want) = json_answer(&object_url).await;
            assert_eq!(as_json(&unk), want, "{object_url}");
        }
    }
}

#[tokio::test]
async fn partial_object_metadata_in_protobuf() {
    let sim = cluster().await;
    let u = sim.url();
    let pb_list = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let json_list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let pb_object = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
    let json_object = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    // Built-in kinds, and a custom resource (kube serves its metadata in protobuf too).
    for (path, name) in [
        ("/api/v1/pods", None),
        ("/api/v1/namespaces/default/configmaps", Some("settings")),
        ("/apis/apps/v1/namespaces/default/deployments", Some("web")),
        (
            "/apis/example.com/v1/namespaces/default/widgets",
            Some("w1"),
        ),
    ] {
        let url = format!("{u}{path}");
        let (s, unk) = pb_answer(&url, pb_list).await;
        assert_eq!(s, 200);
        assert_eq!(
            type_meta(&unk),
            ("meta.k8s.io/v1".into(), "PartialObjectMetadataList".into())
        );
        let (_, _, b) = get_as(&url, json_list).await;
        let mut want: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            decode_as_kind(&unk),
            want["items"].as_array().unwrap().len()
        );
        // The one difference protobuf makes: kube's JSON items carry their type meta, which
        // has no protobuf field (only the envelope says what the list is).
        for item in want["items"].as_array_mut().unwrap() {
            let item = item.as_object_mut().unwrap();
            assert_eq!(
                item.shift_remove("kind"),
                Some(json!("PartialObjectMetadata"))
            );
            assert_eq!(
                item.shift_remove("apiVersion"),
                Some(json!("meta.k8s.io/v1"))
            );
        }
        assert_eq!(as_json(&unk), want, "{path}");
        if let Some(name) = name {
            let url = format!("{url}/{name}");
            let (s, unk) = pb_answer(&url, pb_object).await;
            assert_eq!(s, 200);
            assert_eq!(decode_as_kind(&unk), 1);
            let (_, _, b) = get_as(&url, json_object).await;
            let want: Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(as_json(&unk), want, "{url}");
        }
    }
}

#[tokio::test]
async fn custom_resources_and_tables_stay_json() {
    let sim = cluster().await;
    let u = sim.url();
    let widgets = format!("{u}/apis/example.com/v1/namespaces/default/widgets");
    // A protobuf-first client gets JSON for a custom resource.
    let (s, h, b) = get_as(&widgets, PB_FIRST).await;
    assert_eq!(s, 200);
    assert_eq!(h["content-type"], JSON);
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["kind"],
        "WidgetList"
    );
    // A protobuf-only one gets kube's 406, itself in protobuf (errors follow the Accept header
    // whatever the endpoint).
    for url in [widgets.clone(), format!("{widgets}/w1")] {
        let (s, unk) = pb_answer(&url, PB).await;
        assert_eq!(s, 406);
        assert_eq!(type_meta(&unk), ("v1".into(), "Status".into()));
        decode_as_kind(&unk);
        let st = as_json(&unk);
        assert_eq!(st["reason"], "NotAcceptable");
        assert_eq!(
            st["message"],
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
    }
    let w = sim_watch(&format!("{widgets}?watch=1"), PB).await;
    assert_eq!(w.status, 406);
    // Tables have no protobuf form: a protobuf Table range is skipped.
    let (s, h, b) = get_as(
        &format!("{u}/api/v1/nodes"),
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(h["content-type"], JSON);
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["kind"],
        "Table"
    );
    // YAML is not served: without another choice, the 406 lists what kube would accept.
    let (s, _, b) = get_as(&format!("{u}/api/v1/nodes"), "application/yaml").await;
    assert_eq!(s, 406, "{}", String::from_utf8_lossy(&b));
    let (s, h, _) = get_as(
        &format!("{u}/api/v1/nodes"),
        "application/yaml, application/vnd.kubernetes.protobuf",
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(h["content-type"], PB);
}

// ---------------------------------------------------------------------------------------------
// Status errors
// ---------------------------------------------------------------------------------------------

/// The same request with a protobuf-first and a JSON client: the protobuf Status decodes to
/// the JSON one.
async fn same_status(url: &str, code: u16) -> Value {
    let (s, unk) = pb_answer(url, PB_FIRST).await;
    assert_eq!(s, code, "{url}");
    assert_eq!(type_meta(&unk), ("v1".into(), "Status".into()));
    assert_eq!(decode_as_kind(&unk), 1);
    let (s, want) = json_answer(url).await;
    assert_eq!(s, code);
    assert_eq!(as_json(&unk), want, "{url}");
    want
}

#[tokio::test]
async fn errors_are_statuses_in_protobuf_for_protobuf_clients() {
    let sim = cluster().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let st = same_status(&format!("{cms}/missing"), 404).await;
    assert_eq!(st["reason"], "NotFound");
    let st = same_status(&format!("{cms}?labelSelector=a%20in%20(b"), 400).await;
    assert_eq!(st["reason"], "BadRequest");
    // A LIST continuing below the compaction point: 410 with a fresh token.
    for i in 0..3 {
        post(&cms, &configmap(&format!("cm-{i}"))).await;
    }
    let (_, page) = get_json(&format!("{cms}?limit=1")).await;
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    post(&cms, &configmap("cm-3")).await;
    let (s, _, _) = request(Method::POST, &format!("{u}/sim/compact"), &[], "").await;
    assert_eq!(s, 200);
    post(&cms, &configmap("cm-4")).await;
    let st = same_status(&format!("{cms}?limit=1&continue={token}"), 410).await;
    assert_eq!(st["reason"], "Expired");
    assert!(st["metadata"]["continue"].is_string(), "{st}");
    // A JSON client still gets JSON.
    let (_, h, _) = get_as(&format!("{cms}/missing"), JSON).await;
    assert_eq!(h["content-type"], JSON);
}

// ---------------------------------------------------------------------------------------------
// Watches
// ---------------------------------------------------------------------------------------------

async fn sim_watch(url: &str, accept: &str) -> WatchStream {
    watch_with(url, &[("accept", accept)]).await
}

/// The next protobuf frame, decoded.
async fn next_pb(w: &mut WatchStream) -> (Bytes, String, Unknown) {
    let f = w
        .next_frame(T)
        .await
        .unwrap_or_else(|e| panic!("a protobuf frame: {e:?}"));
    let (ty, unk) = watch_event(&f);
    (f, ty, unk)
}

/// The writes a watch test makes on one kind: create, change, delete of object `name`.
struct Writes {
    collection: String,
    object: Value,
    patch: Value,
}

async fn write_all(w: &Writes) {
    let name = w.object["metadata"]["name"].as_str().unwrap();
    post(&w.collection, &w.object).await;
    let url = format!("{}/{name}", w.collection);
    let (s, v) = send_json(
        Method::PATCH,
        &url,
        "application/merge-patch+json",
        &w.patch,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, _, b) = request(Method::DELETE, &url, &[], "").await;
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
}

/// The writes the watch tests make: one object of each kind, created, changed, deleted.
fn watched_writes(u: &str) -> Vec<Writes> {
    vec![
        Writes {
            collection: format!("{u}/api/v1/namespaces/default/configmaps"),
            object: configmap("watched"),
            patch: json!({"data":{"a":"changed"}}),
        },
        Writes {
            collection: format!("{u}/api/v1/namespaces/fleet-0/pods"),
            object: pod("watched"),
            patch: json!({"metadata":{"labels":{"track":"canary"}}}),
        },
        Writes {
            collection: format!("{u}/apis/apps/v1/namespaces/default/deployments"),
            object: deployment("watched"),
            patch: json!({"spec":{"replicas":5}}),
        },
        Writes {
            collection: format!(
                "{u}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
            ),
            object: lease("watched"),
            patch: json!({"spec":{"renewTime":"2026-01-02T03:05:05.654321Z"}}),
        },
        Writes {
            collection: format!("{u}/api/v1/nodes"),
            object: node("watched"),
            patch: json!({"metadata":{"labels":{"zone":"b"}}}),
        },
    ]
}

#[tokio::test]
async fn watch_frames_decode_to_the_json_events() {
    let sim = cluster().await;
    let u = sim.url();
    for w in &watched_writes(&u) {
        // A watch-list: initial events, then the bookmark that ends them; then the changes.
        let url = format!(
            "{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=60",
            w.collection
        );
        let mut js = sim_watch(&url, JSON).await;
        let mut pb = sim_watch(&url, PB_FIRST).await;
        assert_eq!(pb.status, 200);
        assert_eq!(
            pb.headers["content-type"],
            "application/vnd.kubernetes.protobuf;stream=watch"
        );
        assert_eq!(js.headers["content-type"], JSON);
        let mut initial = 0;
        loop {
            let want = js.next_event(T).await;
            let (_, ty, unk) = next_pb(&mut pb).await;
            assert_eq!(ty, want["type"], "{url}");
            assert_eq!(decode_as_kind(&unk), 1);
            // JSON bookmarks carry Go's zero values of the kind, as the protobuf ones.
            let want_object = want["object"].clone();
            assert_eq!(as_json(&unk), want_object, "{url}");
            if ty == "BOOKMARK" {
                assert_eq!(
                    want["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                    "true"
                );
                break;
            }
            assert_eq!(ty, "ADDED");
            initial += 1;
        }
        assert!(
            initial > 0 || w.collection.ends_with("/configmaps"),
            "{url}"
        );
        write_all(w).await;
        loop {
            let want = js.next_event(T).await;
            let (_, ty, unk) = next_pb(&mut pb).await;
            assert_eq!(ty, want["type"], "{url}");
            decode_as_kind(&unk);
            assert_eq!(as_json(&unk), want["object"], "{url}");
            if ty == "DELETED" {
                break;
            }
        }
    }
}

#[tokio::test]
async fn periodic_bookmarks_and_expired_watches_in_protobuf() {
    let sim = sim_with(|c| c.bookmark_interval = Duration::from_millis(300)).await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let rv: u64 = post(&cms, &configmap("a")).await["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // From a resourceVersion: the change after it, then periodic bookmarks.
    let url =
        format!("{cms}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=30");
    let mut pb = sim_watch(&url, PB_FIRST).await;
    let mut js = sim_watch(&url, JSON).await;
    post(&cms, &configmap("b")).await;
    for _ in 0..2 {
        let want = js.next_event(T).await;
        let (_, ty, unk) = next_pb(&mut pb).await;
        assert_eq!(ty, want["type"]);
        decode_as_kind(&unk);
        assert_eq!(as_json(&unk), want["object"]);
    }
    let (_, ty, unk) = next_pb(&mut pb).await;
    assert_eq!(ty, "BOOKMARK");
    let b = as_json(&unk);
    assert_eq!(
        b,
        json!({"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":(rv + 1).to_string()}})
    );
    // Too old a resourceVersion: an ERROR event carrying the 410 Status.
    post(&cms, &configmap("c")).await;
    let (s, _, _) = request(Method::POST, &format!("{u}/sim/compact"), &[], "").await;
    assert_eq!(s, 200);
    post(&cms, &configmap("d")).await;
    let url = format!("{cms}?watch=1&resourceVersion={rv}");
    let mut pb = sim_watch(&url, PB_FIRST).await;
    let mut js = sim_watch(&url, JSON).await;
    let want = js.next_event(T).await;
    let (_, ty, unk) = next_pb(&mut pb).await;
    assert_eq!(ty, "ERROR");
    assert_eq!(type_meta(&unk), ("v1".into(), "Status".into()));
    decode_as_kind(&unk);
    let st = as_json(&unk);
    assert_eq!(st, want["object"]);
    assert_eq!(
        (st["code"].as_u64(), &st["reason"]),
        (Some(410), &json!("Expired"))
    );
    assert!(matches!(pb.next_frame(T).await, Err(Next::End)));
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn websocket(url: &str, accept: &str) -> Ws {
    let mut req = url
        .replace("http://", "ws://")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Accept", HeaderValue::from_str(accept).unwrap());
    let (ws, resp) = tokio_tungstenite::connect_async(req)
        .await
        .expect("websocket handshake");
    assert_eq!(resp.status(), 101);
    ws
}

/// The next message: `Ok(bytes, binary)`, or `Err(())` once the server closed.
async fn next_message(ws: &mut Ws) -> Result<(Vec<u8>, bool), ()> {
    loop {
        match tokio::time::timeout(T, ws.next())
            .await
            .expect("a message within 10 s")
        {
            Some(Ok(tungstenite::Message::Binary(b))) => return Ok((b.to_vec(), true)),
            Some(Ok(tungstenite::Message::Text(t))) => {
                return Ok((t.as_bytes().to_vec(), false));
            }
            Some(Ok(tungstenite::Message::Close(_))) | None => return Err(()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("websocket error: {e}"),
        }
    }
}

/// Each kind's watches run to their deadline (`timeoutSeconds=4`) to show the websockets close
/// with the chunked bodies; the kinds are watched at once, each in its own collection.
#[tokio::test]
async fn websocket_watches_carry_one_event_per_message() {
    let sim = cluster().await;
    let u = sim.url();
    let writes = watched_writes(&u);
    futures_util::future::join_all(
        writes
            .iter()
            .map(websocket_watch_carries_one_event_per_message),
    )
    .await;
}

async fn websocket_watch_carries_one_event_per_message(w: &Writes) {
    let url = format!(
        "{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=4",
        w.collection
    );
    // Protobuf: binary messages, each the bare WatchEvent of the chunked frame.
    let mut ws = websocket(&url, PB_FIRST).await;
    let mut chunked = sim_watch(&url, PB_FIRST).await;
    // JSON: text messages, each the chunked line with its newline.
    let mut ws_json = websocket(&url, JSON).await;
    let mut lines = sim_watch(&url, JSON).await;
    write_all(w).await;
    // Every frame of the chunked watch, up to its end at the deadline, is one message.
    let mut types = Vec::new();
    while let Ok(f) = chunked.next_frame(T).await {
        let (ty, unk) = watch_event(&f);
        let (m, binary) = next_message(&mut ws).await.expect("an event");
        assert!(binary, "protobuf events are binary messages");
        assert_eq!(m, f.to_vec(), "the bare WatchEvent");
        decode_as_kind(&unk);
        let line = match lines.next_line(T).await {
            Next::Line(l) => l,
            other => panic!("a JSON event: {other:?}"),
        };
        let (text, binary) = next_message(&mut ws_json).await.expect("an event");
        assert!(!binary, "JSON events are text messages");
        assert_eq!(text, [&line[..], b"\n"].concat());
        let want: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(ty, want["type"]);
        // JSON bookmarks carry Go's zero values of the kind, as the protobuf ones.
        let want_object = want["object"].clone();
        assert_eq!(as_json(&unk), want_object, "{url}");
        types.push(ty);
    }
    // The initial objects, the bookmark ending them, then the writes (and the bookmark
    // kube sends before the deadline).
    let end = types
        .iter()
        .position(|t| t == "BOOKMARK")
        .unwrap_or_else(|| panic!("no initial-events-end bookmark: {types:?}"));
    assert!(types[..end].iter().all(|t| t == "ADDED"), "{types:?}");
    let changes: Vec<&String> = types[end..].iter().filter(|t| *t != "BOOKMARK").collect();
    assert_eq!(
        changes.first().map(|t| t.as_str()),
        Some("ADDED"),
        "{types:?}"
    );
    assert_eq!(
        changes.last().map(|t| t.as_str()),
        Some("DELETED"),
        "{types:?}"
    );
    assert!(
        changes[1..changes.len() - 1]
            .iter()
            .all(|t| *t == "MODIFIED"),
        "{types:?}"
    );
    // The server closes both websockets as it ends the chunked bodies.
    assert!(matches!(lines.next_line(T).await, Next::End));
    assert_eq!(next_message(&mut ws).await, Err(()));
    assert_eq!(next_message(&mut ws_json).await, Err(()));
}

// ---------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------

async fn send_pb(
    method: Method,
    url: &str,
    accept: &str,
    body: &[u8],
) -> (StatusCode, HeaderMap, Bytes) {
    // The testkit sends text bodies; protobuf goes through a raw client here.
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<Bytes>>();
    let req = http::Request::builder()
        .method(method)
        .uri(url)
        .header("accept", accept)
        .header("content-type", PB)
        .body(http_body_util::Full::new(Bytes::copy_from_slice(body)))
        .unwrap();
    let resp = tokio::time::timeout(T, client.request(req))
        .await
        .expect("an answer")
        .expect("the request succeeds");
    let (parts, b) = resp.into_parts();
    let b = http_body_util::BodyExt::collect(b)
        .await
        .unwrap()
        .to_bytes();
    (parts.status, parts.headers, b)
}

fn cm_pb(name: &str, data: &[(&str, &str)]) -> k8s_pb::api::core::v1::ConfigMap {
    k8s_pb::api::core::v1::ConfigMap {
        metadata: Some(metav1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        }),
        data: data
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..Default::default()
    }
}

/// A JSON Status answer's `(code, reason, message)`.
fn status_of(b: &[u8]) -> (u64, String, String) {
    let v: Value = serde_json::from_slice(b)
        .unwrap_or_else(|_| panic!("a JSON Status: {}", String::from_utf8_lossy(b)));
    (
        v["code"].as_u64().unwrap_or_default(),
        v["reason"].as_str().unwrap_or_default().to_string(),
        v["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn protobuf_bodies_create_update_and_delete() {
    let sim = cluster().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    // Create: a 201 in protobuf, the object as a GET answers it.
    let cm = body("v1", "ConfigMap", &cm_pb("pb", &[("a", "1")]));
    let (s, h, b) = send_pb(Method::POST, &cms, PB_FIRST, &cm).await;
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
    assert_eq!(h["content-type"], PB);
    let created = unknown(&b);
    decode_as_kind(&created);
    let (_, stored) = json_answer(&format!("{cms}/pb")).await;
    assert_eq!(as_json(&created), stored);
    // What Go's zero values would add is not stored: kube's JSON shape.
    assert_eq!(stored["data"], json!({"a":"1"}));
    let keys: Vec<&String> = stored.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["kind", "apiVersion", "metadata", "data"], "{stored}");
    // Update, answered in JSON to a JSON client.
    let mut upd = cm_pb("pb", &[("a", "2")]);
    upd.metadata.as_mut().unwrap().resource_version = stored["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    let (s, h, b) = send_pb(
        Method::PUT,
        &format!("{cms}/pb"),
        JSON,
        &body("v1", "ConfigMap", &upd),
    )
    .await;
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    assert_eq!(h["content-type"], JSON);
    let updated: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(updated["data"], json!({"a":"2"}));
    // Delete, with protobuf DeleteOptions: a precondition that fails, then one that holds; the
    // success Status in protobuf.
    let opts = |uid: &str| metav1::DeleteOptions {
        preconditions: Some(metav1::Preconditions {
            uid: Some(uid.into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let (s, _, b) = send_pb(
        Method::DELETE,
        &format!("{cms}/pb"),
        PB_FIRST,
        &body("meta.k8s.io/v1", "DeleteOptions", &opts("not-the-uid")),
    )
    .await;
    assert_eq!(s, 409);
    let st = as_json(&unknown(&b));
    assert_eq!(st["reason"], "Conflict");
    let uid = updated["metadata"]["uid"].as_str().unwrap();
    let (s, h, b) = send_pb(
        Method::DELETE,
        &format!("{cms}/pb"),
        PB_FIRST,
        &body("meta.k8s.io/v1", "DeleteOptions", &opts(uid)),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(h["content-type"], PB);
    let st = unknown(&b);
    decode_as_kind(&st);
    assert_eq!(
        as_json(&st),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",
            "details":{"name":"pb","kind":"configmaps","uid":uid}})
    );
    // A pod deleted with gracePeriodSeconds 0 in protobuf is gone at once.
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    post(&pods, &pod("p")).await;
    let now = metav1::DeleteOptions {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let (s, _, b) = send_pb(
        Method::DELETE,
        &format!("{pods}/p"),
        PB_FIRST,
        &body("meta.k8s.io/v1", "DeleteOptions", &now),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(type_meta(&unknown(&b)).1, "Pod");
    let (s, _) = json_answer(&format!("{pods}/p")).await;
    assert_eq!(s, 404);
    // A deployment created in protobuf, and its scale read in protobuf.
    let deploys = format!("{u}/apis/apps/v1/namespaces/default/deployments");
    let d = k8s_pb::api::apps::v1::Deployment {
        metadata: Some(metav1::ObjectMeta {
            name: Some("pbd".into()),
            ..Default::default()
        }),
        spec: Some(k8s_pb::api::apps::v1::DeploymentSpec {
            selector: Some(metav1::LabelSelector {
                match_labels: BTreeMap::from([("app".to_string(), "pbd".to_string())]),
                ..Default::default()
            }),
            template: Some(k8s_pb::api::core::v1::PodTemplateSpec {
                metadata: Some(metav1::ObjectMeta {
                    labels: BTreeMap::from([("app".to_string(), "pbd".to_string())]),
                    ..Default::default()
                }),
                spec: Some(k8s_pb::api::core::v1::PodSpec {
                    containers: vec![k8s_pb::api::core::v1::Container {
                        name: Some("nginx".into()),
                        image: Some("nginx".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (s, _, b) = send_pb(
        Method::POST,
        &deploys,
        PB_FIRST,
        &body("apps/v1", "Deployment", &d),
    )
    .await;
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
    let scale = format!("{deploys}/pbd/scale");
    let (s, unk) = pb_answer(&scale, PB_FIRST).await;
    assert_eq!(s, 200);
    assert_eq!(type_meta(&unk), ("autoscaling/v1".into(), "Scale".into()));
    decode_as_kind(&unk);
    let (_, want) = json_answer(&scale).await;
    assert_eq!(as_json(&unk), want);
    assert_eq!(want["spec"]["replicas"], 1, "defaulted: {want}");
}

#[tokio::test]
async fn bad_protobuf_bodies_get_kubes_errors() {
    let sim = cluster().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let cases: Vec<(Vec<u8>, u16, String)> = vec![
        (
            body("v1", "Secret", &cm_pb("x", &[])),
            400,
            r#"Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"#.into(),
        ),
        (
            body("v1", "Gizmo", &cm_pb("x", &[])),
            400,
            r#"Gizmo in version "v1" cannot be handled as a ConfigMap: no kind "Gizmo" is registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30""#.into(),
        ),
        (
            b"{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\"}".to_vec(),
            400,
            r#"the object provided is unrecognized (must be of type ConfigMap): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ({"kind":"ConfigMap","apiVersio ...)"#.into(),
        ),
    ];
    let cases = cases.into_iter().chain([
        (
            Vec::new(),
            400,
            "the object provided is unrecognized (must be of type ConfigMap): empty data (<empty>)"
                .to_string(),
        ),
        (
            b"k8s\0".to_vec(),
            400,
            "the object provided is unrecognized (must be of type ConfigMap): empty body (6b387300)"
                .to_string(),
        ),
    ]);
    for (b, code, message) in cases {
        let (s, _, out) = send_pb(Method::POST, &cms, JSON, &b).await;
        assert_eq!(s, code);
        assert_eq!(
            status_of(&out),
            (u64::from(code), "BadRequest".into(), message)
        );
    }
    // Another apiVersion of the kind, registered in kube's scheme: decoded, then refused.
    let (s, _, out) = send_pb(
        Method::POST,
        &format!("{u}/apis/apps/v1/namespaces/default/deployments"),
        JSON,
        &body(
            "apps/v1beta2",
            "Deployment",
            &k8s_pb::api::apps::v1::Deployment::default(),
        ),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(
        status_of(&out).2,
        "the API version in the data (apps/v1beta2) does not match the expected API version (apps/v1)"
    );
    // A truncated or garbled message is a 400 naming the kind, never a crash.
    for raw in [
        vec![0x0a],
        vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
        vec![0xff; 12],
    ] {
        let mut b = b"k8s\0".to_vec();
        b.extend_from_slice(
            &Unknown {
                type_meta: Some(TypeMeta {
                    api_version: Some("v1".into()),
                    kind: Some("ConfigMap".into()),
                }),
                raw: Some(raw),
                content_encoding: Some(String::new()),
                content_type: Some(String::new()),
            }
            .encode_to_vec(),
        );
        let (s, _, out) = send_pb(Method::POST, &cms, JSON, &b).await;
        assert_eq!(s, 400);
        let (_, reason, message) = status_of(&out);
        assert_eq!(reason, "BadRequest");
        assert!(
            message.starts_with(r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: "#),
            "{message}"
        );
    }
    // An envelope that is itself garbage.
    let (s, _, out) = send_pb(Method::POST, &cms, JSON, b"k8s\0\x0a\xff").await;
    assert_eq!(s, 400);
    assert!(
        status_of(&out)
            .2
            .starts_with("the object provided is unrecognized (must be of type ConfigMap): "),
        "{}",
        String::from_utf8_lossy(&out)
    );
    // Nothing was created.
    let (_, list) = get_json(&cms).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn unsupported_bodies_and_custom_resources() {
    let sim = cluster().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let widgets = format!("{u}/apis/example.com/v1/namespaces/default/widgets");
    let unknown_format = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf";
    // A body in a format kube does not read: 415.
    for url in [&cms, &widgets] {
        let (s, _, b) = request(
            Method::POST,
            url,
            &[("content-type", "text/plain")],
            &configmap("t").to_string(),
        )
        .await;
        assert_eq!(s, 415);
        assert_eq!(
            status_of(&b),
            (415, "UnsupportedMediaType".into(), unknown_format.into())
        );
    }
    // A protobuf body for a custom resource: kube's protobuf decoder cannot fill an
    // unstructured object (its typer finds no kind in the empty object it decodes into).
    let (s, _, b) = send_pb(
        Method::POST,
        &widgets,
        JSON,
        &body("example.com/v1", "Widget", &cm_pb("w2", &[])),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(
        status_of(&b),
        (
            400,
            "BadRequest".into(),
            r#"Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in 'object has no kind field '"#.into()
        )
    );
    // The answer is negotiated first: a protobuf-only client of a custom resource gets the 406
    // before its body is read.
    let (s, _, b) = send_pb(
        Method::POST,
        &widgets,
        PB,
        &body("example.com/v1", "Widget", &cm_pb("w2", &[])),
    )
    .await;
    assert_eq!(s, 406);
    assert_eq!(as_json(&unknown(&b))["reason"], "NotAcceptable");
    // Protobuf DeleteOptions are read for custom resources too (kube's meta codecs).
    let (s, _, b) = send_pb(
        Method::DELETE,
        &format!("{widgets}/w1"),
        JSON,
        &body(
            "meta.k8s.io/v1",
            "DeleteOptions",
            &metav1::DeleteOptions::default(),
        ),
    )
    .await;
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    // JSON without a Content-Type is still read as JSON.
    let (s, _, b) = request(Method::POST, &cms, &[], &configmap("plain").to_string()).await;
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
}
