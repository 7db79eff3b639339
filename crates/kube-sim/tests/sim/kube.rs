//! The real kube-rs client (kube 5 + k8s-openapi) against the simulator: list with selectors,
//! the write verbs and their errors, raw watches (initial events, replay from a resourceVersion,
//! selector move-in/move-out, bookmarks), kube-runtime's watcher in both initial-list modes, its
//! recovery from a 410 after compaction, and paginated lists with `continue` tokens.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, ResourceExt, VersionMatch,
    WatchEvent, WatchParams,
};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector};
use kube::{Client, Config};
use kube_sim::Simulator;
use kube_sim::kinds::ResourceType;
use serde_json::{Value, json};

/// How long any single awaited event may take.
const STEP: Duration = Duration::from_secs(10);
/// The message of a 410 for a compacted `continue` token (spec §1.4).
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn client(sim: &Simulator) -> Client {
    let config = Config::new(sim.url().parse().unwrap());
    Client::try_from(config).expect("kube client")
}

fn rt(sim: &Simulator, resource: &str) -> Arc<ResourceType> {
    sim.resource("", "v1", resource).expect("served type")
}

/// Creates a namespace through the simulator's Rust API.
fn sim_namespace(sim: &Simulator, name: &str) {
    sim.ops()
        .create(
            &rt(sim, "namespaces"),
            None,
            json!({"metadata": {"name": name}}),
            false,
        )
        .expect("namespace created");
}

/// Creates a pod through the simulator's Rust API; returns its resourceVersion.
fn sim_pod(sim: &Simulator, ns: &str, name: &str, node: &str, labels: Value) -> u64 {
    sim.ops()
        .create(
            &rt(sim, "pods"),
            Some(ns),
            kube_sim::testkit::pod(name, node, labels),
            false,
        )
        .expect("pod created")
        .rv
}

/// Sets (or, with `None`, removes) a label through the simulator; returns the new resourceVersion.
fn sim_label(sim: &Simulator, ns: &str, name: &str, key: &str, value: Option<&str>) -> u64 {
    sim.ops()
        .modify(&rt(sim, "pods"), Some(ns), name, |v| {
            let labels = v["metadata"]
                .as_object_mut()
                .unwrap()
                .entry("labels")
                .or_insert_with(|| json!({}));
            match value {
                Some(val) => labels[key] = json!(val),
                None => {
                    labels.as_object_mut().unwrap().shift_remove(key);
                }
            }
        })
        .expect("pod modified")
        .rv
}

/// Deletes an (unbound, so immediately deleted) pod through the simulator; returns the
/// revision of the deletion.
fn sim_delete_pod(sim: &Simulator, ns: &str, name: &str) -> u64 {
    let r = sim
        .ops()
        .delete(&rt(sim, "pods"), Some(ns), name, &Default::default())
        .expect("pod deleted");
    assert!(r.deleted, "{ns}/{name} is unbound, so it is gone at once");
    sim.store().revision()
}

/// Writes a ConfigMap: moves the global revision without touching pods.
fn sim_configmap(sim: &Simulator, name: &str) -> u64 {
    sim.ops()
        .create(
            &rt(sim, "configmaps"),
            Some("default"),
            json!({"metadata": {"name": name}, "data": {"k": "v"}}),
            false,
        )
        .expect("configmap created")
        .rv
}

/// `ns/name@rv` of every pod in the simulator's store right now, in storage-key order.
fn sim_pods_now(sim: &Simulator) -> Vec<String> {
    let page = sim
        .store()
        .list(&rt(sim, "pods"), None, None, None, 0, &|_| true, false)
        .unwrap();
    page.items
        .iter()
        .map(|o| format!("{}/{}@{}", o.namespace, o.name, o.rv))
        .collect()
}

fn pod_value(name: &str, node: &str, labels: Value) -> Pod {
    serde_json::from_value(kube_sim::testkit::pod(name, node, labels)).unwrap()
}

fn rv_of<K: ResourceExt>(o: &K) -> u64 {
    o.resource_version()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

fn key_of<K: ResourceExt>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

fn names<K: ResourceExt>(items: &[K]) -> Vec<String> {
    items.iter().map(|o| o.name_any()).collect()
}

fn keys<K: ResourceExt>(items: &[K]) -> Vec<String> {
    items.iter().map(key_of).collect()
}

/// The kube-rs API error (the Status the server sent) of a failed call.
fn api_error<T: std::fmt::Debug>(r: kube::Result<T>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected a kube::Error::Api, got {other:?}"),
    }
}

fn stats_of(sim: &Simulator, resource: &str, counter: &str) -> u64 {
    sim.stats()["resources"][resource][counter]
        .as_u64()
        .unwrap_or_else(|| panic!("stats: {}", sim.stats()))
}

type RawWatch = BoxStream<'static, kube::Result<WatchEvent<Pod>>>;

async fn open_watch(api: &Api<Pod>, wp: &WatchParams, rv: &str) -> RawWatch {
    api.watch(wp, rv).await.expect("watch starts").boxed()
}

/// The next raw watch event.
async fn next_raw(w: &mut RawWatch) -> WatchEvent<Pod> {
    tokio::time::timeout(STEP, w.next())
        .await
        .expect("a watch event within the step timeout")
        .expect("the watch stream is still open")
        .expect("the event decodes")
}

/// `TYPE name@rv` (`BOOKMARK@rv` for bookmarks).
fn describe_raw(e: &WatchEvent<Pod>) -> String {
    match e {
        WatchEvent::Added(p) => format!("ADDED {}@{}", p.name_any(), rv_of(p)),
        WatchEvent::Modified(p) => format!("MODIFIED {}@{}", p.name_any(), rv_of(p)),
        WatchEvent::Deleted(p) => format!("DELETED {}@{}", p.name_any(), rv_of(p)),
        WatchEvent::Bookmark(b) => format!("BOOKMARK@{}", b.metadata.resource_version),
        WatchEvent::Error(s) => format!("ERROR {} {}: {}", s.code, s.reason, s.message),
    }
}

/// Reads `n` non-bookmark events, checking that every event after the initial phase (bookmarks
/// included) has a resourceVersion strictly greater than the one before, starting above `after`.
async fn next_changes(w: &mut RawWatch, n: usize, mut after: u64) -> Vec<WatchEvent<Pod>> {
    let mut out = Vec::new();
    while out.len() < n {
        let e = next_raw(w).await;
        let rv: u64 = match &e {
            WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => rv_of(p),
            WatchEvent::Bookmark(b) => b.metadata.resource_version.parse().unwrap(),
            WatchEvent::Error(s) => panic!("unexpected ERROR event: {s:?}"),
        };
        assert!(
            rv > after,
            "{} does not come after resourceVersion {after}",
            describe_raw(&e)
        );
        after = rv;
        if !matches!(e, WatchEvent::Bookmark(_)) {
            out.push(e);
        }
    }
    out
}

fn labels_of(p: &Pod) -> BTreeMap<String, String> {
    p.labels().clone()
}

fn label_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

type Watcher = BoxStream<'static, Result<Event<Pod>, watcher::Error>>;

/// `Init`, `InitApply(name)`, `InitDone`, `Apply(name)`, `Delete(name)`.
fn describe(e: &Event<Pod>) -> String {
    match e {
        Event::Init => "Init".into(),
        Event::InitApply(p) => format!("InitApply({})", p.name_any()),
        Event::InitDone => "InitDone".into(),
        Event::Apply(p) => format!("Apply({})", p.name_any()),
        Event::Delete(p) => format!("Delete({})", p.name_any()),
    }
}

/// The next item of a kube-runtime watcher stream (event or error).
async fn next_item(w: &mut Watcher) -> Result<Event<Pod>, watcher::Error> {
    tokio::time::timeout(STEP, w.next())
        .await
        .expect("a watcher event within the step timeout")
        .expect("watcher streams never end")
}

/// The next event of a watcher; any error fails the test.
async fn next_event(w: &mut Watcher) -> Event<Pod> {
    match next_item(w).await {
        Ok(e) => e,
        Err(e) => panic!("unexpected watcher error: {e:?}"),
    }
}

/// Events up to and including the next `InitDone`, described.
async fn until_init_done(w: &mut Watcher) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let e = describe(&next_event(w).await);
        let done = e == "InitDone";
        out.push(e);
        if done {
            return out;
        }
    }
}

fn init_sequence(names: &[&str]) -> Vec<String> {
    let mut v = vec!["Init".to_string()];
    v.extend(names.iter().map(|n| format!("InitApply({n})")));
    v.push("InitDone".into());
    v
}

// ---------------------------------------------------------------------------------------------
// 1. LIST
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_all_and_namespaced_with_label_and_field_selectors() {
    let sim = kube_sim::testkit::sim().await;
    sim_namespace(&sim, "team-a");
    sim_namespace(&sim, "team-b");
    let web1 = sim_pod(
        &sim,
        "team-a",
        "web-1",
        "node-1",
        json!({"app": "web", "tier": "front"}),
    );
    let db1 = sim_pod(&sim, "team-a", "db-1", "node-2", json!({"app": "db"}));
    let web2 = sim_pod(&sim, "team-b", "web-2", "node-2", json!({"app": "web"}));

    // One more through kube-rs itself.
    let client = client(&sim);
    let team_b: Api<Pod> = Api::namespaced(client.clone(), "team-b");
    let created = team_b
        .create(
            &PostParams::default(),
            &pod_value("web-3", "node-1", json!({"app": "web", "tier": "back"})),
        )
        .await
        .expect("create through kube-rs");
    assert_eq!(created.namespace().as_deref(), Some("team-b"));
    assert!(created.uid().is_some_and(|u| !u.is_empty()));
    let web3 = rv_of(&created);
    assert_eq!(
        web3,
        sim.store().revision(),
        "the create is the latest write"
    );
    let stored = sim
        .ops()
        .get(&rt(&sim, "pods"), Some("team-b"), "web-3")
        .expect("visible to the sim");
    assert_eq!(Some(stored.uid.clone()), created.uid());
    assert_eq!(stored.rv, web3);
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );

    let all: Api<Pod> = Api::all(client.clone());
    let list = all.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        keys(&list.items),
        [
            "team-a/db-1",
            "team-a/web-1",
            "team-b/web-2",
            "team-b/web-3"
        ]
    );
    let rvs: Vec<u64> = list.items.iter().map(rv_of).collect();
    assert_eq!(
        rvs,
        [db1, web1, web2, web3],
        "each item carries its own resourceVersion"
    );
    assert_eq!(
        list.metadata.resource_version,
        Some(sim.store().revision().to_string())
    );
    assert_eq!(list.metadata.continue_, None);
    assert_eq!(list.metadata.remaining_item_count, None);
    // Items decode into full pods.
    let w1 = &list.items[1];
    assert_eq!(
        w1.spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-1")
    );
    assert_eq!(
        w1.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx")
    );

    let team_a: Api<Pod> = Api::namespaced(client.clone(), "team-a");
    let l = team_a.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&l.items), ["db-1", "web-1"]);

    let cases: [(&Api<Pod>, ListParams, &[&str]); 9] = [
        (
            &all,
            ListParams::default().labels("app=web"),
            &["team-a/web-1", "team-b/web-2", "team-b/web-3"],
        ),
        (
            &all,
            ListParams::default().labels("app=web,tier=front"),
            &["team-a/web-1"],
        ),
        (
            &all,
            ListParams::default().labels("app!=web"),
            &["team-a/db-1"],
        ),
        (
            &all,
            ListParams::default().labels("tier in (front,back)"),
            &["team-a/web-1", "team-b/web-3"],
        ),
        (
            &all,
            ListParams::default().labels("!tier"),
            &["team-a/db-1", "team-b/web-2"],
        ),
        (
            &all,
            ListParams::default().fields("spec.nodeName=node-2"),
            &["team-a/db-1", "team-b/web-2"],
        ),
        (
            &all,
            ListParams::default()
                .labels("app=web")
                .fields("spec.nodeName=node-1"),
            &["team-a/web-1", "team-b/web-3"],
        ),
        (
            &team_b,
            ListParams::default().fields("metadata.name=web-3"),
            &["team-b/web-3"],
        ),
        (
            &team_a,
            ListParams::default().fields("metadata.namespace!=team-a"),
            &[],
        ),
    ];
    for (api, lp, want) in cases {
        let got = api
            .list(&lp)
            .await
            .unwrap_or_else(|e| panic!("{lp:?}: {e}"));
        assert_eq!(keys(&got.items), want, "{lp:?}");
    }

    // An unknown field label is a 400 with the core converter's message.
    let s = api_error(
        all.list(&ListParams::default().fields("spec.bogus=x"))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert_eq!(s.message, "field label not supported: spec.bogus");
}

// ---------------------------------------------------------------------------------------------
// 2. Write verbs
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn get_of_a_missing_object_is_not_found() {
    let sim = kube_sim::testkit::sim().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let s = api_error(pods.get("x").await);
    assert_eq!(s.code, 404);
    assert_eq!(s.reason, "NotFound");
    assert_eq!(s.message, r#"pods "x" not found"#);
    let d = s.details.as_ref().expect("details");
    assert_eq!(
        (d.name.as_str(), d.kind.as_str(), d.group.as_str()),
        ("x", "pods", "")
    );
    assert!(pods.get_opt("x").await.unwrap().is_none());
    // A namespace that does not exist gives the same answer for a pod in it.
    let other: Api<Pod> = Api::namespaced(client(&sim), "nowhere");
    assert_eq!(api_error(other.get("x").await).code, 404);
}

#[tokio::test]
async fn create_get_replace_and_stale_replace_conflicts() {
    let sim = kube_sim::testkit::sim().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let pp = PostParams::default();
    let v1 = pods
        .create(&pp, &pod_value("p", "node-1", json!({"app": "web"})))
        .await
        .unwrap();
    let got = pods.get("p").await.unwrap();
    assert_eq!(got.resource_version(), v1.resource_version());
    assert_eq!(got.uid(), v1.uid());
    assert_eq!(got.metadata.generation, Some(1));

    // Creating it again: 409 AlreadyExists.
    let s = api_error(pods.create(&pp, &pod_value("p", "node-1", json!({}))).await);
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(s.message, r#"pods "p" already exists"#);

    // Replace with the current resourceVersion.
    let mut next = v1.clone();
    next.labels_mut().insert("version".into(), "2".into());
    let v2 = pods.replace("p", &pp, &next).await.expect("replace");
    assert!(rv_of(&v2) > rv_of(&v1));
    assert_eq!(rv_of(&v2), sim.store().revision());
    assert_eq!(v2.uid(), v1.uid());
    assert_eq!(
        labels_of(&v2),
        label_map(&[("app", "web"), ("version", "2")])
    );

    // Replace with the stale resourceVersion of v1: 409 Conflict, nothing written.
    let mut stale = v1.clone();
    stale.labels_mut().insert("version".into(), "3".into());
    let s = api_error(pods.replace("p", &pp, &stale).await);
    assert_eq!(s.code, 409);
    assert_eq!(s.reason, "Conflict");
    assert_eq!(
        s.message,
        r#"Operation cannot be fulfilled on pods "p": the object has been modified; please apply your changes to the latest version and try again"#
    );
    assert_eq!(
        s.details
            .as_ref()
            .map(|d| (d.name.as_str(), d.kind.as_str())),
        Some(("p", "pods"))
    );
    let now = pods.get("p").await.unwrap();
    assert_eq!(now.resource_version(), v2.resource_version());
    assert_eq!(now.labels().get("version").map(String::as_str), Some("2"));

    // The write is visible through the simulator's own API with the same resourceVersion.
    let stored = sim
        .ops()
        .get(&rt(&sim, "pods"), Some("default"), "p")
        .unwrap();
    assert_eq!(stored.rv, rv_of(&v2));
    assert!(
        stored
            .labels
            .contains(&("version".to_string(), "2".to_string()))
    );

    // Replacing an object that does not exist: 404.
    let mut ghost = v2.clone();
    ghost.metadata.name = Some("ghost".into());
    ghost.metadata.resource_version = None;
    ghost.metadata.uid = None;
    assert_eq!(
        api_error(pods.replace("ghost", &pp, &ghost).await).code,
        404
    );
}

#[tokio::test]
async fn merge_strategic_and_json_patches() {
    let sim = kube_sim::testkit::sim().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let two = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "web", "keep": "me"}},
        "spec": {"nodeName": "node-1", "containers": [
            {"name": "a", "image": "nginx:1", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "busybox:1"}
        ]}
    });
    let v0 = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value::<Pod>(two).unwrap(),
        )
        .await
        .unwrap();
    let pp = PatchParams::default();
    let images = |p: &Pod| -> Vec<(String, String)> {
        p.spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
            .collect()
    };

    // JSON merge patch: null removes a key, maps merge.
    let v1 = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"app": null, "tier": "front"}}})),
        )
        .await
        .expect("merge patch");
    assert!(rv_of(&v1) > rv_of(&v0));
    assert_eq!(
        labels_of(&v1),
        label_map(&[("keep", "me"), ("tier", "front")])
    );
    assert_eq!(
        images(&v1),
        images(&v0),
        "a merge patch of labels leaves the spec alone"
    );

    // Strategic merge patch: containers merge by name, so `a` and its ports survive.
    let v2 = pods
        .patch(
            "p",
            &pp,
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "b", "image": "busybox:2"}]}}),
            ),
        )
        .await
        .expect("strategic merge patch");
    assert!(rv_of(&v2) > rv_of(&v1));
    assert_eq!(
        images(&v2),
        [
            ("a".to_string(), "nginx:1".to_string()),
            ("b".to_string(), "busybox:2".to_string())
        ]
    );
    let a = &v2.spec.as_ref().unwrap().containers[0];
    assert_eq!(a.ports.as_ref().map(|p| p[0].container_port), Some(80));
    assert_eq!(labels_of(&v2), labels_of(&v1));

    // JSON patch (RFC 6902): test, add, replace, remove.
    let ops = json!([
        {"op": "test", "path": "/metadata/labels/tier", "value": "front"},
        {"op": "add", "path": "/metadata/labels/json", "value": "yes"},
        {"op": "remove", "path": "/metadata/labels/keep"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"}
    ]);
    let v3 = pods
        .patch(
            "p",
            &pp,
            &Patch::Json::<()>(serde_json::from_value(ops).unwrap()),
        )
        .await
        .expect("json patch");
    assert!(rv_of(&v3) > rv_of(&v2));
    assert_eq!(
        labels_of(&v3),
        label_map(&[("json", "yes"), ("tier", "front")])
    );
    assert_eq!(
        images(&v3),
        [
            ("a".to_string(), "nginx:2".to_string()),
            ("b".to_string(), "busybox:2".to_string())
        ]
    );

    // A merge patch carrying a stale resourceVersion is an optimistic-concurrency conflict.
    let s = api_error(
        pods.patch("p", &pp, &Patch::Merge(json!({"metadata": {"resourceVersion": v0.resource_version(), "labels": {"x": "y"}}})))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));

    // Patching a missing object: 404.
    assert_eq!(
        api_error(pods.patch("nope", &pp, &Patch::Merge(json!({}))).await).code,
        404
    );

    // The last successful patch is what the simulator stores.
    let stored = sim
        .ops()
        .get(&rt(&sim, "pods"), Some("default"), "p")
        .unwrap();
    assert_eq!(stored.rv, rv_of(&v3));
    assert_eq!(stored.rv, sim.store().revision());
}

#[tokio::test]
async fn delete_round_trip() {
    let sim = kube_sim::testkit::sim().await;
    let c = client(&sim);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let pp = PostParams::default();
    pods.create(&pp, &pod_value("gone", "", json!({})))
        .await
        .unwrap();
    let bound = pods
        .create(&pp, &pod_value("bound", "node-1", json!({})))
        .await
        .unwrap();

    // An unbound pod is deleted at once; the answer is the pod.
    let r = pods.delete("gone", &DeleteParams::default()).await.unwrap();
    let deleted = r.left().expect("pods answer a DELETE with the object");
    assert_eq!(deleted.name_any(), "gone");
    assert_eq!(
        api_error(pods.get("gone").await).message,
        r#"pods "gone" not found"#
    );
    assert!(
        sim.ops()
            .get(&rt(&sim, "pods"), Some("default"), "gone")
            .is_err()
    );

    // A bound pod is marked for graceful deletion, then the simulated kubelet removes it.
    let r = pods
        .delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    let marked = r.left().expect("the marked pod");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(30));
    assert!(
        pods.get("bound")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let uid = bound.uid().unwrap();
    let gone = kube::runtime::wait::await_condition(
        pods.clone(),
        "bound",
        kube::runtime::conditions::is_deleted(&uid),
    );
    tokio::time::timeout(STEP, gone)
        .await
        .expect("kubelet finishes the deletion")
        .unwrap();
    assert_eq!(api_error(pods.get("bound").await).code, 404);

    // Kinds that do not return the object answer with a Success Status.
    let cms: Api<ConfigMap> = Api::default_namespaced(c);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cm"}, "data": {"a": "b"}})).unwrap();
    let cm = cms.create(&pp, &cm).await.unwrap();
    let r = cms.delete("cm", &DeleteParams::default()).await.unwrap();
    let status = r.right().expect("configmaps answer a DELETE with a Status");
    assert!(status.is_success(), "{status:?}");
    let d = status.details.expect("details");
    assert_eq!((d.name.as_str(), d.kind.as_str()), ("cm", "configmaps"));
    assert_eq!(Some(d.uid), cm.uid());

    // Deleting again: 404.
    let s = api_error(cms.delete("cm", &DeleteParams::default()).await);
    assert_eq!(
        (s.code, s.reason.as_str(), s.message.as_str()),
        (404, "NotFound", r#"configmaps "cm" not found"#)
    );
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Raw watches
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn watch_from_zero_sends_the_state_then_changes_in_order() {
    let sim = kube_sim::testkit::sim().await;
    let a = sim_pod(&sim, "default", "a", "", json!({"app": "web"}));
    let b = sim_pod(&sim, "default", "b", "", json!({"app": "web"}));
    sim_configmap(&sim, "unrelated");
    let at_start = sim.store().revision();
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));

    // RV "0" with bookmarks: the 1.34 apiserver defaults this to a watch-list.
    let mut w = open_watch(&pods, &WatchParams::default().timeout(30), "0").await;
    let initial: Vec<String> = vec![
        describe_raw(&next_raw(&mut w).await),
        describe_raw(&next_raw(&mut w).await),
    ];
    assert_eq!(initial, [format!("ADDED a@{a}"), format!("ADDED b@{b}")]);
    let end = match next_raw(&mut w).await {
        WatchEvent::Bookmark(bm) => bm,
        other => panic!(
            "expected the initial-events-end bookmark, got {}",
            describe_raw(&other)
        ),
    };
    assert_eq!(
        end.metadata
            .annotations
            .get("k8s.io/initial-events-end")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        end.metadata.resource_version,
        at_start.to_string(),
        "the list RV, not the newest pod's"
    );
    assert_eq!(
        (end.types.kind.as_str(), end.types.api_version.as_str()),
        ("Pod", "v1")
    );

    let c = sim_pod(&sim, "default", "c", "", json!({"app": "db"}));
    let a2 = sim_label(&sim, "default", "a", "version", Some("2"));
    let b_del = sim_delete_pod(&sim, "default", "b");
    let changes = next_changes(&mut w, 3, at_start).await;
    let got: Vec<String> = changes.iter().map(describe_raw).collect();
    assert_eq!(
        got,
        [
            format!("ADDED c@{c}"),
            format!("MODIFIED a@{a2}"),
            format!("DELETED b@{b_del}")
        ]
    );
    let WatchEvent::Modified(pa) = &changes[1] else {
        unreachable!()
    };
    assert_eq!(
        labels_of(pa),
        label_map(&[("app", "web"), ("version", "2")])
    );
    let WatchEvent::Deleted(pb) = &changes[2] else {
        unreachable!()
    };
    assert_eq!(
        labels_of(pb),
        label_map(&[("app", "web")]),
        "DELETED carries the last state"
    );
}

#[tokio::test]
async fn watch_from_a_resource_version_replays_exactly_what_followed() {
    let sim = kube_sim::testkit::sim().await;
    sim_pod(&sim, "default", "a", "", json!({"app": "web"}));
    sim_pod(&sim, "default", "b", "", json!({"app": "web"}));
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let r0: u64 = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(r0, sim.store().revision());

    let c = sim_pod(&sim, "default", "c", "", json!({}));
    let a2 = sim_label(&sim, "default", "a", "app", Some("api"));
    let b_del = sim_delete_pod(&sim, "default", "b");

    // From r0: no initial events, the three changes in order, then live changes.
    let mut w = open_watch(&pods, &WatchParams::default().timeout(30), &r0.to_string()).await;
    let got: Vec<String> = next_changes(&mut w, 3, r0)
        .await
        .iter()
        .map(describe_raw)
        .collect();
    assert_eq!(
        got,
        [
            format!("ADDED c@{c}"),
            format!("MODIFIED a@{a2}"),
            format!("DELETED b@{b_del}")
        ]
    );
    let d = sim_pod(&sim, "default", "d", "", json!({}));
    let got: Vec<String> = next_changes(&mut w, 1, b_del)
        .await
        .iter()
        .map(describe_raw)
        .collect();
    assert_eq!(got, [format!("ADDED d@{d}")]);

    // From the middle of the history: only what came after it.
    let mut w = open_watch(&pods, &WatchParams::default().timeout(30), &c.to_string()).await;
    let got: Vec<String> = next_changes(&mut w, 3, c)
        .await
        .iter()
        .map(describe_raw)
        .collect();
    assert_eq!(
        got,
        [
            format!("MODIFIED a@{a2}"),
            format!("DELETED b@{b_del}"),
            format!("ADDED d@{d}")
        ]
    );
}

#[tokio::test]
async fn selector_watch_turns_relabels_into_deleted_and_added() {
    let sim = kube_sim::testkit::sim().await;
    sim_pod(&sim, "default", "web", "", json!({"app": "web"}));
    sim_pod(&sim, "default", "other", "", json!({"app": "db"}));
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(names(&list.items), ["web"]);
    let r0: u64 = list.metadata.resource_version.unwrap().parse().unwrap();

    let wp = WatchParams::default().timeout(30);
    let mut by_label = open_watch(&pods, &wp.clone().labels("app=web"), &r0.to_string()).await;
    let mut by_phase = open_watch(&pods, &wp.fields("status.phase=Pending"), &r0.to_string()).await;

    let r1 = sim_label(&sim, "default", "other", "note", Some("x")); // not selected: nothing
    let r2 = sim_label(&sim, "default", "web", "app", Some("db")); // move-out
    let r3 = sim_label(&sim, "default", "other", "app", Some("web")); // move-in
    let r4 = sim_label(&sim, "default", "other", "tier", Some("front")); // stays in
    let r5 = sim
        .ops()
        .modify(&rt(&sim, "pods"), Some("default"), "web", |v| {
            v["status"]["phase"] = json!("Running")
        })
        .unwrap()
        .rv; // field move-out for the phase watch

    let ev = next_changes(&mut by_label, 3, r0).await;
    let got: Vec<String> = ev.iter().map(describe_raw).collect();
    assert_eq!(
        got,
        [
            format!("DELETED web@{r2}"),
            format!("ADDED other@{r3}"),
            format!("MODIFIED other@{r4}")
        ]
    );
    let WatchEvent::Deleted(out) = &ev[0] else {
        unreachable!()
    };
    assert_eq!(
        labels_of(out),
        label_map(&[("app", "web")]),
        "the move-out carries the previous state"
    );
    let WatchEvent::Added(inn) = &ev[1] else {
        unreachable!()
    };
    assert_eq!(labels_of(inn), label_map(&[("app", "web"), ("note", "x")]));

    let got: Vec<String> = next_changes(&mut by_phase, 5, r0)
        .await
        .iter()
        .map(describe_raw)
        .collect();
    assert_eq!(
        got,
        [
            format!("MODIFIED other@{r1}"),
            format!("MODIFIED web@{r2}"),
            format!("MODIFIED other@{r3}"),
            format!("MODIFIED other@{r4}"),
            format!("DELETED web@{r5}"),
        ]
    );

    // Moving back in is an ADDED again.
    let r6 = sim_label(&sim, "default", "web", "app", Some("web"));
    let got: Vec<String> = next_changes(&mut by_label, 1, r4)
        .await
        .iter()
        .map(describe_raw)
        .collect();
    assert_eq!(got, [format!("ADDED web@{r6}")]);
}

#[tokio::test]
async fn watch_from_a_compacted_resource_version_gets_an_expired_error_event() {
    let sim = kube_sim::testkit::sim().await;
    let old = sim_pod(&sim, "default", "a", "", json!({}));
    sim_label(&sim, "default", "a", "x", Some("1"));
    let compacted = sim.store().compact_now();
    assert!(compacted > old);
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let mut w = open_watch(&pods, &WatchParams::default().timeout(30), &old.to_string()).await;
    match next_raw(&mut w).await {
        WatchEvent::Error(s) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            assert_eq!(
                s.message,
                format!("too old resource version: {old} ({compacted})")
            );
        }
        other => panic!("expected ERROR 410, got {}", describe_raw(&other)),
    }
    let end = tokio::time::timeout(STEP, w.next())
        .await
        .expect("the stream ends after the ERROR");
    assert!(end.is_none(), "nothing follows the ERROR event");
}

// ---------------------------------------------------------------------------------------------
// 4. kube-runtime watcher
// ---------------------------------------------------------------------------------------------

/// Drives a watcher through its initial list and a create/update/delete, returning it.
async fn watcher_sees_state_and_changes(sim: &Simulator, cfg: watcher::Config) -> Watcher {
    sim_pod(sim, "default", "a", "", json!({"app": "web"}));
    sim_pod(sim, "default", "b", "", json!({"app": "web"}));
    sim_pod(sim, "default", "c", "", json!({"app": "web"}));
    let pods: Api<Pod> = Api::default_namespaced(client(sim));
    pods.create(
        &PostParams::default(),
        &pod_value("d", "", json!({"app": "web"})),
    )
    .await
    .unwrap();

    let mut w: Watcher = watcher::watcher(pods, cfg).boxed();
    assert_eq!(
        until_init_done(&mut w).await,
        init_sequence(&["a", "b", "c", "d"])
    );

    let e = sim_pod(sim, "default", "e", "", json!({"app": "web"}));
    let a2 = sim_label(sim, "default", "a", "version", Some("2"));
    let b_del = sim_delete_pod(sim, "default", "b");
    let mut got = Vec::new();
    for _ in 0..3 {
        let ev = next_event(&mut w).await;
        let rv = match &ev {
            Event::Apply(p) | Event::Delete(p) => rv_of(p),
            other => panic!("unexpected {}", describe(other)),
        };
        got.push(format!("{}@{rv}", describe(&ev)));
        if let Event::Apply(p) = &ev
            && p.name_any() == "a"
        {
            assert_eq!(p.labels().get("version").map(String::as_str), Some("2"));
        }
    }
    assert_eq!(
        got,
        [
            format!("Apply(e)@{e}"),
            format!("Apply(a)@{a2}"),
            format!("Delete(b)@{b_del}")
        ]
    );
    w
}

#[tokio::test]
async fn runtime_watcher_list_watch_pages_then_streams_changes() {
    let sim = kube_sim::testkit::sim().await;
    let _w = watcher_sees_state_and_changes(&sim, watcher::Config::default().page_size(3)).await;
    // Four pods in pages of three: two LIST requests, then a single watch.
    assert_eq!(stats_of(&sim, "pods", "listRequests"), 2);
    assert_eq!(stats_of(&sim, "pods", "watchRequests"), 1);
    assert_eq!(stats_of(&sim, "pods", "openWatches"), 1);
}

#[tokio::test]
async fn runtime_watcher_streaming_list_gets_init_done_from_the_end_bookmark() {
    let sim = kube_sim::testkit::sim().await;
    let _w =
        watcher_sees_state_and_changes(&sim, watcher::Config::default().streaming_lists()).await;
    // The initial state came over the watch (sendInitialEvents); no LIST at all.
    assert_eq!(stats_of(&sim, "pods", "listRequests"), 0);
    assert_eq!(stats_of(&sim, "pods", "watchRequests"), 1);
}

#[tokio::test]
async fn runtime_watcher_with_a_label_selector_sees_moves_as_apply_and_delete() {
    let sim = kube_sim::testkit::sim().await;
    sim_pod(&sim, "default", "in", "", json!({"app": "web"}));
    sim_pod(&sim, "default", "out", "", json!({"app": "db"}));
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let mut w: Watcher = watcher::watcher(
        pods,
        watcher::Config::default()
            .labels("app=web")
            .streaming_lists(),
    )
    .boxed();
    assert_eq!(until_init_done(&mut w).await, init_sequence(&["in"]));
    sim_label(&sim, "default", "in", "app", Some("db"));
    sim_label(&sim, "default", "out", "app", Some("web"));
    let got = [
        describe(&next_event(&mut w).await),
        describe(&next_event(&mut w).await),
    ];
    assert_eq!(got, ["Delete(in)", "Apply(out)"]);
}

// ---------------------------------------------------------------------------------------------
// 5. Recovery from 410 after compaction
// ---------------------------------------------------------------------------------------------

/// Returns how many LIST requests the watcher made up to the end of its relist.
async fn relists_after_compaction(cfg: watcher::Config) -> u64 {
    let sim = kube_sim::testkit::sim().await;
    for n in ["p0", "p1", "p2", "p3"] {
        sim_pod(&sim, "default", n, "", json!({"app": "web"}));
    }
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let (reader, writer) = reflector::store::<Pod>();
    let mut w: Watcher = watcher::watcher(pods.clone(), cfg).reflect(writer).boxed();
    assert_eq!(
        until_init_done(&mut w).await,
        init_sequence(&["p0", "p1", "p2", "p3"])
    );
    let p4 = sim_pod(&sim, "default", "p4", "", json!({"app": "web"}));
    assert_eq!(describe(&next_event(&mut w).await), "Apply(p4)");
    assert_eq!(reader.state().len(), 5);

    // Cut the watch; while it is down, the cluster moves on (a write elsewhere) and etcd is
    // compacted, so re-watching from the watcher's last resourceVersion is answered with 410.
    // The watcher is not polled meanwhile, so none of this can race with its reconnection.
    sim.faults().drop_watches();
    sim_configmap(&sim, "elsewhere");
    let compacted = sim.store().compact_now();
    // Changes it can only learn about by relisting.
    sim_delete_pod(&sim, "default", "p1");
    sim_label(&sim, "default", "p2", "version", Some("2"));
    sim_pod(&sim, "default", "p5", "", json!({"app": "web"}));

    let mut errors = Vec::new();
    let mut events = Vec::new();
    loop {
        match next_item(&mut w).await {
            Ok(e) => {
                let d = describe(&e);
                events.push(d.clone());
                if d == "InitDone" {
                    break;
                }
            }
            Err(e) => {
                assert!(events.is_empty(), "error after the relist began: {e:?}");
                errors.push(e);
            }
        }
    }
    let expired = errors.iter().find_map(|e| match e {
        watcher::Error::WatchError(s) if s.code == 410 => Some(s),
        _ => None,
    });
    let expired = expired.unwrap_or_else(|| panic!("no ERROR 410 among {errors:?}"));
    assert_eq!(expired.reason, "Expired");
    // The watcher's last resourceVersion is p4's (no bookmark can pass it: nothing else was
    // written before the cut); the oldest retained revision minus one is the compaction point.
    assert_eq!(
        expired.message,
        format!("too old resource version: {p4} ({compacted})")
    );
    assert_eq!(events, init_sequence(&["p0", "p2", "p3", "p4", "p5"]));
    let lists_by_watcher = stats_of(&sim, "pods", "listRequests");

    // The reflector converged to the simulator's state.
    let mut cached: Vec<String> = reader
        .state()
        .iter()
        .map(|p| format!("{}@{}", key_of(p.as_ref()), rv_of(p.as_ref())))
        .collect();
    cached.sort();
    assert_eq!(cached, sim_pods_now(&sim));
    let fresh: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| format!("{}@{}", key_of(p), rv_of(p)))
        .collect();
    assert_eq!(cached, fresh);
    let p2 = reader
        .state()
        .into_iter()
        .find(|p| p.name_any() == "p2")
        .unwrap();
    assert_eq!(p2.labels().get("version").map(String::as_str), Some("2"));

    // And it watches again after the relist.
    let p6 = sim_pod(&sim, "default", "p6", "", json!({}));
    match next_event(&mut w).await {
        Event::Apply(p) => assert_eq!((p.name_any(), rv_of(&p)), ("p6".to_string(), p6)),
        other => panic!("expected Apply(p6), got {}", describe(&other)),
    }
    assert_eq!(reader.state().len(), 6);
    // The first watch, the re-watch answered with 410, and the watch after the relist.
    assert_eq!(stats_of(&sim, "pods", "watchRequests"), 3);
    assert_eq!(stats_of(&sim, "pods", "openWatches"), 1);
    lists_by_watcher
}

#[tokio::test]
async fn runtime_watcher_relists_after_410_and_converges() {
    let lists = relists_after_compaction(watcher::Config::default()).await;
    assert_eq!(lists, 2, "the initial LIST and the relist");
}

#[tokio::test]
async fn streaming_runtime_watcher_relists_after_410_and_converges() {
    let lists = relists_after_compaction(watcher::Config::default().streaming_lists()).await;
    assert_eq!(lists, 0, "both initial states came as watch-lists");
}

// ---------------------------------------------------------------------------------------------
// 6. Bookmarks
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn periodic_bookmarks_only_when_asked_for() {
    let sim = kube_sim::testkit::sim().await; // bookmarks every second
    sim_pod(&sim, "default", "a", "", json!({}));
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let r0 = sim.store().revision();
    // The watch without bookmarks is opened first, so its bookmark timer fires first.
    let mut quiet = open_watch(
        &pods,
        &WatchParams::default().disable_bookmarks().timeout(30),
        &r0.to_string(),
    )
    .await;
    let mut w = open_watch(&pods, &WatchParams::default().timeout(30), &r0.to_string()).await;

    // Writes to another resource move the revision without any pod event: the bookmarks tell
    // the pod watcher it is caught up to there.
    for i in 0..2 {
        let r = sim_configmap(&sim, &format!("cm-{i}"));
        match next_raw(&mut w).await {
            WatchEvent::Bookmark(bm) => {
                assert_eq!(bm.metadata.resource_version, r.to_string());
                assert!(
                    bm.metadata.annotations.is_empty(),
                    "{:?}",
                    bm.metadata.annotations
                );
                assert_eq!(
                    (bm.types.kind.as_str(), bm.types.api_version.as_str()),
                    ("Pod", "v1")
                );
            }
            other => panic!("expected a BOOKMARK, got {}", describe_raw(&other)),
        }
    }
    // Two bookmark periods have passed; the watch without allowWatchBookmarks got none of them.
    let b = sim_pod(&sim, "default", "b", "", json!({}));
    assert_eq!(
        describe_raw(&next_raw(&mut quiet).await),
        format!("ADDED b@{b}")
    );
    assert_eq!(
        describe_raw(&next_raw(&mut w).await),
        format!("ADDED b@{b}")
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Pagination
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn paged_list_follows_continue_tokens_over_a_consistent_snapshot() {
    let sim = kube_sim::testkit::sim().await;
    sim_namespace(&sim, "team-a");
    sim_namespace(&sim, "team-b");
    for n in ["a1", "a2", "a3"] {
        sim_pod(&sim, "team-a", n, "", json!({"app": "web"}));
    }
    for n in ["b1", "b2", "b3", "b4"] {
        sim_pod(
            &sim,
            "team-b",
            n,
            "",
            json!({"app": if n == "b2" { "db" } else { "web" }}),
        );
    }
    let c = client(&sim);
    let all: Api<Pod> = Api::all(c.clone());
    let r1 = sim.store().revision();
    let expected: Vec<String> = [
        "team-a/a1",
        "team-a/a2",
        "team-a/a3",
        "team-b/b1",
        "team-b/b2",
        "team-b/b3",
        "team-b/b4",
    ]
    .map(String::from)
    .into();

    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(3);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = all.list(&lp).await.unwrap();
        assert_eq!(
            page.metadata.resource_version,
            Some(r1.to_string()),
            "every page is read at the first page's RV"
        );
        seen.extend(keys(&page.items));
        pages.push((
            page.items.len(),
            page.metadata.remaining_item_count,
            page.metadata.continue_.is_some(),
        ));
        if pages.len() == 1 {
            // Writes between pages do not show up in the remaining pages.
            sim_pod(&sim, "team-b", "b0", "", json!({"app": "web"}));
            sim_delete_pod(&sim, "team-b", "b4");
            sim_label(&sim, "team-b", "b1", "version", Some("2"));
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
        assert!(pages.len() < 10, "runaway pagination: {pages:?}");
    }
    assert_eq!(seen, expected, "every item exactly once, in key order");
    assert_eq!(
        pages,
        [(3, Some(4), true), (3, Some(1), true), (1, None, false)]
    );

    // A namespaced paged list of the current state.
    let team_b: Api<Pod> = Api::namespaced(c.clone(), "team-b");
    let p1 = team_b.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(names(&p1.items), ["b0", "b1", "b2"]);
    assert_eq!(p1.metadata.remaining_item_count, Some(1));
    let p2 = team_b
        .list(
            &ListParams::default()
                .limit(3)
                .continue_token(p1.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(names(&p2.items), ["b3"]);
    assert_eq!(
        (p2.metadata.continue_, p2.metadata.remaining_item_count),
        (None, None)
    );

    // With a selector, pages carry no remainingItemCount.
    let mut seen = Vec::new();
    let mut lp = ListParams::default().labels("app=web").limit(2);
    loop {
        let page = all.list(&lp).await.unwrap();
        assert_eq!(page.metadata.remaining_item_count, None);
        seen.extend(keys(&page.items));
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(t) => {
                lp = ListParams::default()
                    .labels("app=web")
                    .limit(2)
                    .continue_token(&t)
            }
            None => break,
        }
    }
    assert_eq!(
        seen,
        [
            "team-a/a1",
            "team-a/a2",
            "team-a/a3",
            "team-b/b0",
            "team-b/b1",
            "team-b/b3"
        ]
    );

    // An exact list at the first page's RV still sees the old state.
    let exact = all
        .list(
            &ListParams::default()
                .at(&r1.to_string())
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(keys(&exact.items), expected);
    assert_eq!(exact.metadata.resource_version, Some(r1.to_string()));
}

#[tokio::test]
async fn continue_token_after_compaction_is_expired() {
    let sim = kube_sim::testkit::sim().await;
    for n in ["a", "b", "c", "d", "e"] {
        sim_pod(&sim, "default", n, "", json!({}));
    }
    let pods: Api<Pod> = Api::default_namespaced(client(&sim));
    let first = pods.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(&first.items), ["a", "b"]);
    let r1 = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().expect("a continue token");

    // The cluster moves on and is compacted past the token's revision.
    sim_pod(&sim, "default", "bb", "", json!({}));
    sim_delete_pod(&sim, "default", "d");
    sim.store().compact_now();

    let s = api_error(
        pods.list(&ListParams::default().limit(2).continue_token(&token))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert_eq!(s.message, CONTINUE_EXPIRED);
    let fresh_token = s
        .metadata
        .as_ref()
        .and_then(|m| m.continue_.clone())
        .expect("a new token in the 410");
    assert_ne!(fresh_token, token);

    // The new token continues after "b" at the latest state (an inconsistent continuation).
    let rest = pods
        .list(&ListParams::default().continue_token(&fresh_token))
        .await
        .unwrap();
    assert_eq!(names(&rest.items), ["bb", "c", "e"]);
    assert_eq!(
        rest.metadata.resource_version,
        Some(sim.store().revision().to_string())
    );

    // An exact list at the compacted revision is gone too.
    let s = api_error(
        pods.list(&ListParams::default().at(&r1).matching(VersionMatch::Exact))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert_eq!(
        s.message,
        "The resourceVersion for the provided list is too old."
    );
}
