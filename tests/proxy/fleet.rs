//! Kubelets on a cluster of the load test's shape (kube-sim's `cl2` shape: Deployments,
//! ReplicaSets, pods that mount their Deployment's ConfigMap and Secret and `kube-root-ca.crt`)
//! through watchmux, each reading as a kubelet does: on one HTTP/2 connection, in protobuf, a
//! watch-list of its pods by `spec.nodeName`, and for every ConfigMap and Secret its pods mount
//! a watch-list by name in the pod's namespace, opened when a pod first references it (the
//! kubelet's ConfigMap and Secret managers). Under the cluster's churn (Deployments scaled,
//! pods created, bound to a node, readied and deleted) and writes to the ConfigMaps and
//! Secrets, every kubelet sees exactly its node's events in resourceVersion order (a pod bound
//! to the node arrives as ADDED), with no gap and no duplicate, and every object it watches by
//! name reaches the simulator's version.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use hyper::client::conn::http2::SendRequest;
use k8s_pb::api::core::v1::{LocalObjectReference, Pod};
use kube_sim::Simulator;
use kube_sim::churn::{ChurnMix, ChurnSpec};
use kube_sim::cl2::Cl2Spec;
use parking_lot::Mutex;
use prost::Message as _;
use serde_json::Value;
use tokio::sync::Notify;
use watchmux::config::KindPattern;

use crate::common::kubelet::{Frames, KUBELET, WATCH_LIST, message_of, metadata_of};
use crate::common::*;

/// Nodes of the cluster (one namespace: 27 Deployments, about 54 pods per node).
const NODES: usize = 8;
/// Pod events of the churn phase (all nodes together).
const CHURN_EVENTS: usize = 400;

/// A watch event as a kubelet records it: type, `namespace/name`, resourceVersion.
type Event = (String, String, u64);

/// What one kubelet holds.
#[derive(Debug, Default)]
struct View {
    /// Where its pods' watch-list's initial events ended (0 until then).
    synced_at: u64,
    /// Its pods (`namespace/name` → resourceVersion).
    pods: BTreeMap<String, u64>,
    /// The pod events after the initial ones, in the order received.
    events: Vec<Event>,
    /// The objects of its by-name watches (`configmaps/namespace/name` → resourceVersion; 0
    /// while the watch has not sent its initial events).
    named: BTreeMap<String, u64>,
}

/// Every kubelet's view, and a signal on each change.
#[derive(Default)]
struct Fleet {
    views: Mutex<BTreeMap<String, View>>,
    changed: Notify,
}

impl Fleet {
    fn update<T>(&self, node: &str, f: impl FnOnce(&mut View) -> T) -> T {
        let t = f(self.views.lock().entry(node.to_string()).or_default());
        self.changed.notify_waiters();
        t
    }

    /// Waits (at most 60 s) until `pred` holds for the views.
    async fn until(&self, what: &str, pred: impl Fn(&BTreeMap<String, View>) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let changed = self.changed.notified();
            if pred(&self.views.lock()) {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "{what}: not within 60 s: {:#?}",
                    summary(&self.views.lock())
                );
            }
        }
    }
}

fn summary(views: &BTreeMap<String, View>) -> Vec<(String, u64, usize, usize)> {
    views
        .iter()
        .map(|(n, v)| (n.clone(), v.synced_at, v.pods.len(), v.events.len()))
        .collect()
}

/// The name a reference names.
fn name(r: &Option<LocalObjectReference>) -> Option<&String> {
    r.as_ref().and_then(|r| r.name.as_ref())
}

/// The ConfigMaps and Secrets a pod mounts (`configmaps/namespace/name`), projected ones (the
/// service-account volume's `kube-root-ca.crt`) included.
fn mounted(pod: &Pod, ns: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |kind: &str, name: Option<&String>| {
        if let Some(n) = name {
            out.insert(format!("{kind}/{ns}/{n}"));
        }
    };
    let volumes = pod
        .spec
        .as_ref()
        .map(|s| &s.volumes[..])
        .unwrap_or_default();
    for v in volumes.iter().filter_map(|v| v.volume_source.as_ref()) {
        if let Some(c) = &v.config_map {
            add("configmaps", name(&c.local_object_reference));
        }
        if let Some(s) = &v.secret {
            add("secrets", s.secret_name.as_ref());
        }
        for p in v.projected.iter().flat_map(|p| &p.sources) {
            if let Some(c) = &p.config_map {
                add("configmaps", name(&c.local_object_reference));
            }
            if let Some(s) = &p.secret {
                add("secrets", name(&s.local_object_reference));
            }
        }
    }
    out
}

/// A watch-list at `pq` on the kubelet's connection; it must be answered from the cache.
async fn open(
    send: &mut SendRequest<http_body_util::Empty<bytes::Bytes>>,
    base: &str,
    pq: &str,
) -> Frames {
    let resp = send
        .send_request(http2_get(base, pq, &[("accept", KUBELET)]))
        .await
        .expect("a response");
    assert_eq!(resp.status(), StatusCode::OK, "{pq}");
    assert!(
        resp.headers()
            .contains_key("x-watchmux-cache-resource-version"),
        "{pq}: passed through"
    );
    Frames::new(resp.into_body())
}

/// A by-name watch of `key` (`configmaps/namespace/name`): its object's resourceVersion kept in
/// the view.
async fn watch_named(
    mut send: SendRequest<http_body_util::Empty<bytes::Bytes>>,
    base: String,
    node: String,
    key: String,
    fleet: Arc<Fleet>,
) {
    let mut parts = key.splitn(3, '/');
    let (kind, ns, name) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let pq =
        format!("/api/v1/namespaces/{ns}/{kind}?fieldSelector=metadata.name%3D{name}&{WATCH_LIST}");
    let mut frames = open(&mut send, &base, &pq).await;
    while let Some(ev) = frames.next_or_end(&pq).await {
        let m = metadata_of(&ev.object.and_then(|o| o.raw).expect("object.raw"));
        let rv: u64 = m.resource_version.unwrap_or_default().parse().unwrap_or(0);
        match ev.r#type.as_deref() {
            Some("ADDED" | "MODIFIED") => {
                assert_eq!(m.name.as_deref(), Some(name), "{pq}");
                fleet.update(&node, |v| v.named.insert(key.clone(), rv));
            }
            Some("BOOKMARK") => {}
            other => panic!("{pq}: {other:?}"),
        }
    }
    panic!("{pq}: the watch ended");
}

/// One kubelet: its pods' watch-list, and a by-name watch-list of every ConfigMap and Secret a
/// pod of the node mounts, all on one HTTP/2 connection.
async fn kubelet(base: String, node: String, fleet: Arc<Fleet>) {
    let send = http2_connect(&base).await;
    let pq = format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}&{WATCH_LIST}");
    let mut frames = open(&mut send.clone(), &base, &pq).await;
    let mut watched = BTreeSet::new();
    while let Some(ev) = frames.next_or_end(&pq).await {
        let raw = ev.object.and_then(|o| o.raw).expect("object.raw");
        let m = metadata_of(&raw);
        let rv: u64 = m
            .resource_version
            .clone()
            .unwrap_or_default()
            .parse()
            .unwrap();
        let ty = ev.r#type.unwrap_or_default();
        if ty == "BOOKMARK" {
            if m.annotations
                .get("k8s.io/initial-events-end")
                .map(String::as_str)
                == Some("true")
            {
                fleet.update(&node, |v| v.synced_at = rv);
            }
            continue;
        }
        let ns = m.namespace.unwrap_or_default();
        let key = format!("{ns}/{}", m.name.unwrap_or_default());
        let pod = Pod::decode(&message_of(&raw)[..]).expect("a Pod");
        let on_node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        assert_eq!(on_node, Some(node.as_str()), "{pq}: {ty} {key}");
        fleet.update(&node, |v| {
            if v.synced_at > 0 {
                v.events.push((ty.clone(), key.clone(), rv));
            }
            if ty == "DELETED" {
                v.pods.remove(&key);
            } else {
                v.pods.insert(key.clone(), rv);
            }
        });
        if ty == "DELETED" {
            continue;
        }
        for object in mounted(&pod, &ns) {
            if watched.insert(object.clone()) {
                fleet.update(&node, |v| v.named.insert(object.clone(), 0));
                tokio::spawn(watch_named(
                    send.clone(),
                    base.clone(),
                    node.clone(),
                    object,
                    fleet.clone(),
                ));
            }
        }
    }
    panic!("{pq}: the watch ended");
}

fn key_of(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap()
    )
}

fn node_of(o: &Value) -> Option<String> {
    o["spec"]["nodeName"].as_str().map(str::to_string)
}

/// The events a watch of `spec.nodeName=<node>` gets from the cluster's pod events, as kube's
/// cacher filters them: a change that brings a pod onto the node is ADDED, one that takes it
/// away is DELETED. `nodes`: every pod's node before the first event (updated as it goes).
fn node_events(
    events: &[Value],
    mut nodes: BTreeMap<String, Option<String>>,
) -> BTreeMap<String, Vec<Event>> {
    let mut out: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for e in events {
        let o = &e["object"];
        let (key, rv, now) = (key_of(o), rv_of(o), node_of(o));
        let before = nodes.get(&key).cloned().flatten();
        let mut push = |node: &Option<String>, ty: &str| {
            if let Some(n) = node {
                out.entry(n.clone())
                    .or_default()
                    .push((ty.to_string(), key.clone(), rv));
            }
        };
        match e["type"].as_str().unwrap() {
            "DELETED" => {
                push(&before, "DELETED");
                nodes.remove(&key);
                continue;
            }
            _ if before == now => push(
                &now,
                if e["type"] == "ADDED" {
                    "ADDED"
                } else {
                    "MODIFIED"
                },
            ),
            _ => {
                push(&before, "DELETED");
                push(&now, "ADDED");
            }
        }
        nodes.insert(key, now);
    }
    out
}

/// Every object of `collection` on the simulator.
async fn items(sim: &Simulator, collection: &str) -> Vec<Value> {
    let (s, list) = get_json(&format!("{}{collection}", sim.url())).await;
    assert_eq!(s, StatusCode::OK, "{collection}");
    list["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelets_on_a_cl2_cluster_see_every_event_of_their_node_through_watchmux() {
    let spec = Cl2Spec {
        nodes: NODES,
        seed: 11,
    };
    let sim = sim_with(|c| c.cl2 = Some(spec)).await;
    let px = on_demand(&sim, |c| {
        c.cache
            .include
            .push(KindPattern::parse("core/secrets").unwrap());
        // Long enough for any sync on a loaded machine: no read gets a 429 here (the warm-up
        // rules have their own tests).
        c.cache.not_ready_wait = Duration::from_secs(30);
    })
    .await;
    let fleet = Arc::new(Fleet::default());
    let nodes = spec.node_names();
    let tasks: Vec<_> = nodes
        .iter()
        .map(|n| tokio::spawn(kubelet(px.url.clone(), n.clone(), fleet.clone())))
        .collect();
    // Every kubelet synced its pods and every by-name watch sent its initial events.
    fleet
        .until("the kubelets' initial sync", |v| {
            v.len() == NODES
                && v.values()
                    .all(|k| k.synced_at > 0 && k.named.values().all(|rv| *rv > 0))
        })
        .await;
    let pods = items(&sim, "/api/v1/pods").await;
    let mut on_node: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &pods {
        if let Some(n) = node_of(p) {
            on_node.entry(n).or_default().insert(key_of(p));
        }
    }
    {
        let views = fleet.views.lock();
        for n in &nodes {
            let have: BTreeSet<String> = views[n].pods.keys().cloned().collect();
            assert_eq!(have, on_node[n], "{n}'s pods after its watch-list");
            assert!(
                !views[n].named.is_empty(),
                "{n} mounts ConfigMaps and Secrets"
            );
        }
    }

    // Churn, watched directly on the simulator from before it begins: the reference.
    let start = sim.store().revision();
    let mut reference = watch(&format!(
        "{}/api/v1/pods?watch=1&resourceVersion={start}",
        sim.url()
    ))
    .await;
    let churn = |per_second| ChurnSpec {
        per_second,
        seed: 11,
        mix: ChurnMix::Realistic,
    };
    kube_sim::churn::restart(sim.state(), churn(200.0));
    // Meanwhile a write to every ConfigMap and Secret of the cluster's namespace.
    let mut named_writes = 0;
    for kind in ["configmaps", "secrets"] {
        for o in items(&sim, &format!("/api/v1/{kind}")).await {
            let ns = o["metadata"]["namespace"].as_str().unwrap();
            if !ns.starts_with("test-cl2") {
                continue;
            }
            let url = format!(
                "{}/api/v1/namespaces/{ns}/{kind}/{}",
                sim.url(),
                o["metadata"]["name"].as_str().unwrap()
            );
            let (s, _, b) = request(
                Method::PATCH,
                &url,
                &[("content-type", "application/merge-patch+json")],
                r#"{"metadata":{"annotations":{"fleet-test/round":"2"}}}"#,
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{url}: {}", String::from_utf8_lossy(&b));
            named_writes += 1;
        }
    }
    assert!(named_writes > 2, "the cluster has ConfigMaps and Secrets");
    let mut events = Vec::new();
    while events.len() < CHURN_EVENTS {
        events.push(reference.next_non_bookmark(Duration::from_secs(30)).await);
    }
    kube_sim::churn::restart(sim.state(), churn(0.0));

    // A last write to a pod of each node: once a kubelet has it, it has had every earlier
    // event of its node.
    let mut markers = BTreeMap::new();
    for n in &nodes {
        for key in items(
            &sim,
            &format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{n}"),
        )
        .await
        .iter()
        .map(key_of)
        {
            let (ns, name) = key.split_once('/').unwrap();
            let (s, _, b) = request(
                Method::PATCH,
                &format!("{}/api/v1/namespaces/{ns}/pods/{name}", sim.url()),
                &[("content-type", "application/merge-patch+json")],
                r#"{"metadata":{"labels":{"fleet-test/marker":"true"}}}"#,
            )
            .await;
            // A pod churn deleted meanwhile: the next one.
            if s == StatusCode::NOT_FOUND {
                continue;
            }
            assert_eq!(s, StatusCode::OK, "{key}");
            let o: Value = serde_json::from_slice(&b).unwrap();
            markers.insert(n.clone(), (key, rv_of(&o)));
            break;
        }
        assert!(markers.contains_key(n), "{n} has a pod");
    }
    let last = markers.values().map(|(_, rv)| *rv).max().unwrap();
    while events.last().map(rv_of_event) < Some(last) {
        events.push(reference.next_non_bookmark(Duration::from_secs(30)).await);
    }
    fleet
        .until("every kubelet's marker", |v| {
            markers.iter().all(|(n, (key, rv))| {
                v[n].events
                    .iter()
                    .any(|e| e.0 == "MODIFIED" && &e.1 == key && e.2 == *rv)
            })
        })
        .await;

    // Each kubelet's events, up to its marker, are exactly its node's.
    let before: BTreeMap<String, Option<String>> =
        pods.iter().map(|p| (key_of(p), node_of(p))).collect();
    let expected = node_events(&events, before);
    let mut moved_in = 0;
    for n in &nodes {
        let marker = markers[n].1;
        let want: Vec<Event> = expected
            .get(n)
            .into_iter()
            .flatten()
            .filter(|e| e.2 <= marker)
            .cloned()
            .collect();
        let got: Vec<Event> = fleet.views.lock()[n]
            .events
            .iter()
            .filter(|e| e.2 <= marker)
            .cloned()
            .collect();
        assert_eq!(got, want, "{n}'s events");
        moved_in += got.iter().filter(|e| e.0 == "ADDED").count();
    }
    assert!(
        moved_in > 0,
        "churn bound no pod to a node: the test saw no move-in"
    );

    // Every object watched by name reaches the simulator's version (the write above).
    let mut current = BTreeMap::new();
    for kind in ["configmaps", "secrets"] {
        for o in items(&sim, &format!("/api/v1/{kind}")).await {
            current.insert(format!("{kind}/{}", key_of(&o)), rv_of(&o));
        }
    }
    fleet
        .until("the by-name watches", |v| {
            v.values()
                .all(|k| k.named.iter().all(|(key, rv)| current.get(key) == Some(rv)))
        })
        .await;
    for t in tasks {
        t.abort();
    }
}

fn rv_of_event(e: &Value) -> u64 {
    rv_of(&e["object"])
}
