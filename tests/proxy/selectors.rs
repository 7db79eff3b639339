//! Selectors through watchmux, against the simulator as the reference:
//!
//! 1. A fleet of kubelet-like watchers (pods by `spec.nodeName=<node>`, the node by
//!    `metadata.name=<node>`) and cluster-wide controllers (some with label selectors), all
//!    watch-lists from `resourceVersion=0` with bookmarks, under churn: every watcher's folded
//!    stream equals the simulator's answer to its selector (names and resourceVersions), every
//!    event concerns the watcher (§2.2: ADDED/MODIFIED carry the new state, DELETED the previous
//!    one stamped with the event's RV), node moves and label moves arrive as ADDED for the new
//!    selector and DELETED for the old one, and a sample of watchers sees exactly the stream the
//!    simulator itself sends for the same request.
//! 2. Dispatch cost (§3.6): an event for a pod on an unwatched node is checked only against the
//!    unindexed watchers, whether 10 or 2,000 kubelets are watching; deliveries go to matching
//!    watchers only.
//! 3. LIST from the cache with label/field selectors equals the simulator's LIST for the same
//!    request, and invalid selectors get the same 400 (LIST and WATCH).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::wait_until;
use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::fleet::{self, FleetSpec};
use kube_sim::http::Filter as SimFilter;
use kube_sim::semantics::DeleteOptions;
use kube_wire::options::ListOptions;
use kube_wire::selector::LabelSelector;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::Instant;

// ---------------------------------------------------------------------------------------------
// Reading many watch streams
// ---------------------------------------------------------------------------------------------

/// A query value, percent-encoded (spaces as `%20`).
fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// `labelSelector=..&fieldSelector=..` (only the non-empty ones), encoded.
fn selector_query(labels: &str, fields: &str) -> String {
    let mut q = Vec::new();
    if !labels.is_empty() {
        q.push(format!("labelSelector={}", enc(labels)));
    }
    if !fields.is_empty() {
        q.push(format!("fieldSelector={}", enc(fields)));
    }
    q.join("&")
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(borrow)]
    object: WireObject<'a>,
}

#[derive(Deserialize)]
struct WireObject<'a> {
    #[serde(borrow, default)]
    metadata: WireMeta<'a>,
    #[serde(borrow, default)]
    spec: Option<WireSpec<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    resource_version: Option<Cow<'a, str>>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireSpec<'a> {
    #[serde(borrow, default)]
    node_name: Option<Cow<'a, str>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Ty {
    Added,
    Modified,
    Deleted,
}

/// One event a watcher received (bookmarks are not kept).
#[derive(Debug, Clone)]
struct Seen {
    ty: Ty,
    /// `ns/name` (or `name`).
    key: String,
    rv: u64,
    /// `spec.nodeName` of the object carried.
    node: String,
    labels: Vec<(String, String)>,
    /// The whole object, for watchers whose logs keep them.
    object: Option<Value>,
}

/// Everything one watcher received.
#[derive(Debug, Default)]
struct Log {
    /// Keep each event's whole object (parsed again; for a few watchers only).
    keep_objects: bool,
    /// Events before the `k8s.io/initial-events-end` bookmark.
    initial: Vec<Seen>,
    /// RV of that bookmark.
    initial_end: Option<u64>,
    /// Events after it.
    events: Vec<Seen>,
    /// Highest RV of any event or bookmark after the initial phase.
    max_rv: u64,
    /// Bookmarks received after the initial phase.
    bookmarks: usize,
    /// RV of the last of those.
    last_bookmark: u64,
    /// Protocol violations (non-200, stream end, ERROR, RVs going back...).
    errors: Vec<String>,
    /// Lines received: what [`wait_all`] sees progress by.
    lines: u64,
}

impl Log {
    fn take_line(&mut self, line: &[u8]) {
        self.lines += 1;
        let ev: WireEvent<'_> = match serde_json::from_slice(line) {
            Ok(e) => e,
            Err(e) => {
                self.errors.push(format!(
                    "bad frame ({e}): {}",
                    String::from_utf8_lossy(&line[..line.len().min(300)])
                ));
                return;
            }
        };
        let meta = &ev.object.metadata;
        let rv: u64 = meta
            .resource_version
            .as_deref()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let ty = match &*ev.ty {
            "ADDED" => Ty::Added,
            "MODIFIED" => Ty::Modified,
            "DELETED" => Ty::Deleted,
            "BOOKMARK" => {
                let end = meta
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("k8s.io/initial-events-end"))
                    .is_some_and(|v| v == "true");
                if end {
                    if self.initial_end.is_some() {
                        self.errors
                            .push("a second initial-events-end bookmark".into());
                    }
                    self.initial_end = Some(rv);
                    self.max_rv = rv;
                } else if self.initial_end.is_none() {
                    self.errors
                        .push(format!("a plain bookmark ({rv}) during the initial events"));
                } else {
                    // kube's cacher repeats the last RV in its periodic and pre-deadline
                    // bookmarks; it never goes back.
                    if rv < self.max_rv {
                        self.errors
                            .push(format!("bookmark {rv} goes back before {}", self.max_rv));
                    }
                    self.max_rv = self.max_rv.max(rv);
                    self.bookmarks += 1;
                    self.last_bookmark = rv;
                }
                return;
            }
            other => {
                self.errors.push(format!(
                    "unexpected {other} event: {}",
                    String::from_utf8_lossy(line)
                ));
                return;
            }
        };
        let name = meta.name.as_deref().unwrap_or_default();
        let key = match meta.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_string(),
        };
        let seen = Seen {
            ty,
            key,
            rv,
            node: ev
                .object
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or_default()
                .to_string(),
            labels: meta
                .labels
                .as_ref()
                .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
            object: self.keep_objects.then(|| {
                let mut v: Value = serde_json::from_slice(line).expect("parsed once already");
                v["object"].take()
            }),
        };
        if self.initial_end.is_none() {
            if ty != Ty::Added {
                self.errors
                    .push(format!("{ty:?} during the initial events: {seen:?}"));
            }
            self.initial.push(seen);
        } else {
            if rv <= self.max_rv {
                self.errors.push(format!(
                    "event {ty:?} {} at {rv} does not advance past {}",
                    seen.key, self.max_rv
                ));
            }
            self.max_rv = self.max_rv.max(rv);
            self.events.push(seen);
        }
    }

    /// The watcher's view: initial events then changes folded by key (`key` → RV).
    fn folded(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for s in self.initial.iter().chain(&self.events) {
            match s.ty {
                Ty::Added | Ty::Modified => {
                    out.insert(s.key.clone(), s.rv);
                }
                Ty::Deleted => {
                    out.remove(&s.key);
                }
            }
        }
        out
    }

    /// Post-initial events by (key, RV).
    fn by_key_rv(&self) -> HashMap<(&str, u64), &Seen> {
        self.events
            .iter()
            .map(|s| ((s.key.as_str(), s.rv), s))
            .collect()
    }
}

/// A watch being read in a task.
struct Reader {
    url: String,
    log: Arc<Mutex<Log>>,
    task: JoinHandle<()>,
}

impl Reader {
    /// Opens `url` (waiting for a permit of `gate` to send the request) and records every frame.
    fn spawn(url: String, gate: Arc<Semaphore>) -> Reader {
        Self::spawn_with(url, gate, false)
    }

    /// [`Reader::spawn`], keeping every event's object if `keep_objects`.
    fn spawn_with(url: String, gate: Arc<Semaphore>, keep_objects: bool) -> Reader {
        let log = Arc::new(Mutex::new(Log {
            keep_objects,
            ..Log::default()
        }));
        let (u, l) = (url.clone(), log.clone());
        let task = tokio::spawn(async move {
            let permit = gate.acquire_owned().await.expect("gate open");
            // With hundreds of watches starting at once on a 2-core machine that other builds
            // kept busy, a head once took longer than the kit's usual 10 s: the task panicked,
            // silently, and its reader never moved. A stall is what `wait_all` judges; this
            // bound only keeps a dead server from hanging the task.
            let Some(mut w) = crate::common::try_watch_within(&u, Duration::from_secs(120)).await
            else {
                l.lock().errors.push("no answer within 120 s".into());
                return;
            };
            drop(permit);
            if w.status != StatusCode::OK {
                l.lock().errors.push(format!("status {}", w.status));
                return;
            }
            loop {
                match w.next_line(Duration::from_secs(3600)).await {
                    crate::common::Next::Line(line) => l.lock().take_line(&line),
                    other => {
                        l.lock().errors.push(format!("stream stopped: {other:?}"));
                        return;
                    }
                }
            }
        });
        Reader { url, log, task }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until `cond` holds for every reader's log; panics with the first few that lag once
/// `secs` pass with none of them receiving a line (or ten times that in all). A bound on a
/// stall, not on the time the whole takes: hundreds of debug-built readers parsing their
/// initial events take many times longer on a loaded machine, and only a watch that stopped
/// moving is a failure.
async fn wait_all(readers: &[&Reader], what: &str, secs: u64, cond: impl Fn(&Log) -> bool) {
    let stall = Duration::from_secs(secs);
    let started = Instant::now();
    let mut progress = (u64::MAX, started);
    loop {
        for r in readers {
            let l = r.log.lock();
            assert!(l.errors.is_empty(), "{}: {:?}", r.url, l.errors);
        }
        let pending: Vec<&&Reader> = readers.iter().filter(|r| !cond(&r.log.lock())).collect();
        if pending.is_empty() {
            return;
        }
        // The lagging readers' lines, and how many lag: either changes when one moves.
        let moved: u64 = pending.iter().map(|r| r.log.lock().lines).sum::<u64>()
            + pending.len() as u64 * (1 << 40);
        if moved != progress.0 {
            progress = (moved, Instant::now());
        }
        if progress.1.elapsed() >= stall || started.elapsed() >= stall * 10 {
            let sample: Vec<String> = pending
                .iter()
                .take(5)
                .map(|r| {
                    let l = r.log.lock();
                    format!(
                        "{} (initial_end {:?}, max_rv {}, {} events, {} lines)",
                        r.url,
                        l.initial_end,
                        l.max_rv,
                        l.events.len(),
                        l.lines
                    )
                })
                .collect();
            panic!(
                "{} of {} watchers not {what}, none of them moving for {secs} s (or {} s in all), e.g. {sample:#?}",
                pending.len(),
                readers.len(),
                secs * 10
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const WATCH_QUERY: &str = "watch=1&resourceVersion=0&allowWatchBookmarks=true";

// ---------------------------------------------------------------------------------------------
// Simulator side
// ---------------------------------------------------------------------------------------------

/// The simulator's own answer to a selector: `key` → RV of the matching objects now.
fn sim_answer(
    sim: &Simulator,
    resource: &str,
    ns: Option<&str>,
    labels: &str,
    fields: &str,
) -> BTreeMap<String, u64> {
    let rt = sim.resource("", "v1", resource).expect("served");
    let q = selector_query(labels, fields);
    let opts = ListOptions::from_query(Some(&q)).expect("options parse");
    let filter = SimFilter::new(&rt, ns.map(str::to_string), &opts).expect("valid selector");
    sim.store()
        .list(&rt, ns, None, None, 0, &|o| filter.matches(o), false)
        .expect("list now")
        .items
        .iter()
        .map(|o| {
            let key = if o.namespace.is_empty() {
                o.name.clone()
            } else {
                format!("{}/{}", o.namespace, o.name)
            };
            (key, o.rv)
        })
        .collect()
}

fn grace0() -> DeleteOptions {
    DeleteOptions {
        grace_period_seconds: Some(0),
        ..Default::default()
    }
}

fn label(v: &Value, key: &str) -> String {
    v["metadata"]["labels"][key]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// 1. Fleet of kubelets and controllers under churn
// ---------------------------------------------------------------------------------------------

/// What a watcher of the fleet test is.
#[derive(Debug, Clone)]
enum Role {
    /// Pods with `spec.nodeName=<node>`.
    Kubelet(String),
    /// The node with `metadata.name=<node>`.
    NodeWatch(String),
    /// All pods with this label selector ("" = none).
    Controller(String),
    /// Pods in another dispatch bucket: the empty hot value (schedulers), unindexed field
    /// selectors, namespace and name scopes.
    Scoped {
        ns: Option<String>,
        labels: String,
        fields: String,
    },
}

impl Role {
    /// (resource, namespace, labelSelector, fieldSelector) of the watcher's request.
    fn selector(&self) -> (&'static str, Option<&str>, String, String) {
        match self {
            Role::Kubelet(n) => ("pods", None, String::new(), format!("spec.nodeName={n}")),
            Role::NodeWatch(n) => ("nodes", None, String::new(), format!("metadata.name={n}")),
            Role::Controller(sel) => ("pods", None, sel.clone(), String::new()),
            Role::Scoped { ns, labels, fields } => {
                ("pods", ns.as_deref(), labels.clone(), fields.clone())
            }
        }
    }
}

struct Watcher {
    role: Role,
    reader: Reader,
    /// The same request sent to the simulator directly (for a sample).
    mirror: Option<Reader>,
}

/// A write the test made and the watchers it must reach.
#[derive(Debug)]
enum Write {
    Move {
        key: String,
        from: String,
        to: String,
        rv: u64,
    },
    Relabel {
        key: String,
        node: String,
        track_before: String,
        track_after: String,
        rv: u64,
    },
    Status {
        key: String,
        node: String,
        rv: u64,
    },
    Create {
        key: String,
        node: String,
        rv: u64,
    },
    Delete {
        key: String,
        node: String,
        rv: u64,
    },
    NodeLabel {
        node: String,
        rv: u64,
    },
}

impl Write {
    fn rv(&self) -> u64 {
        match self {
            Write::Move { rv, .. }
            | Write::Relabel { rv, .. }
            | Write::Status { rv, .. }
            | Write::Create { rv, .. }
            | Write::Delete { rv, .. }
            | Write::NodeLabel { rv, .. } => *rv,
        }
    }
}

const FLEET_NODES: usize = 250;
/// Nodes with a kubelet: 2 watchers each, plus the controllers and the scoped watchers, make
/// 500 watchers.
const WATCHED_NODES: usize = 219;
const CONTROLLERS: usize = 50;
const SCOPED: usize = 12;
/// Scheduler-like: pending pods not bound to a node (the hot field's empty value).
const UNSCHEDULED: &str = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed";
/// Label selectors of the controllers (round robin; "" = unfiltered).
const CONTROLLER_SELECTORS: [&str; 5] = [
    "",
    "track=canary",
    "tier=web",
    "app in (cart,auth)",
    "tier!=backend,track",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_of_kubelets_and_controllers_see_exactly_their_objects_under_churn() {
    fleet_scenario(None).await;
}

/// The same with one-event watcher queues: watchers keep falling back to reading the shared log
/// and going live again, so the catch-up path's conversion (§2.2) is what most of them see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_under_churn_with_watchers_catching_up_from_the_log() {
    fleet_scenario(Some(1)).await;
}

async fn fleet_scenario(watcher_queue: Option<usize>) {
    let started = Instant::now();
    let spec = FleetSpec {
        nodes: FLEET_NODES,
        pods: 1_000,
        namespaces: 5,
        seed: 2024,
    };
    let sim = crate::common::sim_with(|c| c.fleet = Some(spec.clone())).await;
    let proxy = crate::common::proxy_for(&sim, |c| {
        if let Some(q) = watcher_queue {
            c.cache.watcher_queue = q;
        }
    })
    .await;
    let pods_cache = proxy.proxy.cache("", "v1", "pods").expect("pods cached");
    let nodes_cache = proxy.proxy.cache("", "v1", "nodes").expect("nodes cached");
    let pods_rt = sim.resource("", "v1", "pods").unwrap();
    let nodes_rt = sim.resource("", "v1", "nodes").unwrap();

    // Pods followed by single-object watchers (left out of the random churn), one per namespace
    // scope used below, and a node with a pod in fleet-1.
    let fleet_pods = sim
        .store()
        .list(&pods_rt, None, None, None, 0, &|_| true, false)
        .unwrap()
        .items;
    let first_in = |ns: &str, skip: usize| {
        fleet_pods
            .iter()
            .filter(|o| o.namespace == ns)
            .nth(skip)
            .map(|o| (o.namespace.clone(), o.name.clone()))
            .unwrap()
    };
    let followed = [
        first_in("fleet-1", 3),
        first_in("fleet-3", 5),
        first_in("fleet-4", 7),
    ];
    let node_in_fleet1 = fleet_pods
        .iter()
        .find(|o| o.namespace == "fleet-1")
        .and_then(|o| o.field("spec.nodeName"))
        .unwrap()
        .to_string();

    // --- 500 watchers through watchmux, opened concurrently (32 requests in flight).
    let gate = Arc::new(Semaphore::new(32));
    let mut watchers = Vec::new();
    for i in 0..WATCHED_NODES {
        let node = fleet::node_name(i);
        let pods_q = selector_query("", &format!("spec.nodeName={node}"));
        let node_q = selector_query("", &format!("metadata.name={node}"));
        let pods_path = format!("/api/v1/pods?{WATCH_QUERY}&{pods_q}");
        let node_path = format!("/api/v1/nodes?{WATCH_QUERY}&{node_q}");
        // Every 15th node's watchers are mirrored on the simulator itself.
        let mirror = i % 15 == 0;
        for (role, path) in [
            (Role::Kubelet(node.clone()), pods_path),
            (Role::NodeWatch(node.clone()), node_path),
        ] {
            watchers.push(Watcher {
                role,
                reader: Reader::spawn(format!("{}{path}", proxy.url), gate.clone()),
                mirror: mirror.then(|| Reader::spawn(format!("{}{path}", sim.url()), gate.clone())),
            });
        }
    }
    for i in 0..CONTROLLERS {
        let sel = CONTROLLER_SELECTORS[i % CONTROLLER_SELECTORS.len()];
        let q = selector_query(sel, "");
        let path = if q.is_empty() {
            format!("/api/v1/pods?{WATCH_QUERY}")
        } else {
            format!("/api/v1/pods?{WATCH_QUERY}&{q}")
        };
        let mirror = i < CONTROLLER_SELECTORS.len();
        watchers.push(Watcher {
            role: Role::Controller(sel.to_string()),
            reader: Reader::spawn(format!("{}{path}", proxy.url), gate.clone()),
            mirror: mirror.then(|| Reader::spawn(format!("{}{path}", sim.url()), gate.clone())),
        });
    }
    // The other buckets: (namespace in the URL, labelSelector, fieldSelector).
    let scoped_specs: Vec<(Option<String>, String, String)> = vec![
        (None, String::new(), UNSCHEDULED.into()),
        (None, "tier=web".into(), UNSCHEDULED.into()),
        (None, String::new(), "spec.nodeName!=node-00001".into()),
        (
            None,
            "track=canary".into(),
            "spec.nodeName!=,status.phase=Running".into(),
        ),
        (Some("fleet-1".into()), String::new(), String::new()),
        (Some("fleet-1".into()), "track=canary".into(), String::new()),
        (
            Some("fleet-1".into()),
            String::new(),
            format!("spec.nodeName={node_in_fleet1}"),
        ),
        (None, String::new(), "metadata.namespace=fleet-3".into()),
        (
            None,
            "tier!=web".into(),
            "metadata.namespace=fleet-3,status.phase=Running".into(),
        ),
        (
            None,
            String::new(),
            format!("metadata.name={}", followed[0].1),
        ),
        (
            Some(followed[1].0.clone()),
            String::new(),
            format!("metadata.name={}", followed[1].1),
        ),
        // The legacy `/watch/namespaces/{ns}/pods/{name}` form (below).
        (
            Some(followed[2].0.clone()),
            String::new(),
            format!("metadata.name={}", followed[2].1),
        ),
    ];
    assert_eq!(scoped_specs.len(), SCOPED);
    for (i, (ns, labels, fields)) in scoped_specs.into_iter().enumerate() {
        let q = selector_query(&labels, &fields);
        let path = match &ns {
            _ if i == SCOPED - 1 => format!(
                "/api/v1/watch/namespaces/{}/pods/{}?resourceVersion=0&allowWatchBookmarks=true",
                followed[2].0, followed[2].1
            ),
            None => format!("/api/v1/pods?{WATCH_QUERY}&{q}"),
            Some(ns) => format!("/api/v1/namespaces/{ns}/pods?{WATCH_QUERY}&{q}"),
        };
        let path = path.trim_end_matches('&').to_string();
        watchers.push(Watcher {
            role: Role::Scoped { ns, labels, fields },
            reader: Reader::spawn_with(format!("{}{path}", proxy.url), gate.clone(), true),
            mirror: Some(Reader::spawn(format!("{}{path}", sim.url()), gate.clone())),
        });
    }
    assert_eq!(watchers.len(), 500);
    let all: Vec<&Reader> = watchers
        .iter()
        .flat_map(|w| std::iter::once(&w.reader).chain(w.mirror.as_ref()))
        .collect();
    wait_all(&all, "past their initial events", 40, |l| {
        l.initial_end.is_some()
    })
    .await;
    // Registered (after the initial-events-end bookmark) and bucketed: only the controllers
    // and the two `spec.nodeName!=` watchers are checked against every pod event.
    wait_until("all 500 watchers registered", 10, async || {
        pods_cache.watcher_count() == WATCHED_NODES + CONTROLLERS + SCOPED
            && nodes_cache.watcher_count() == WATCHED_NODES
    })
    .await;
    let unindexed = CONTROLLERS + 2;
    assert_eq!(pods_cache.unindexed_watchers(), unindexed);
    assert_eq!(nodes_cache.unindexed_watchers(), 0);
    let opened = started.elapsed();

    // The initial state is the simulator's: nothing was written yet.
    for w in &watchers {
        let l = w.reader.log.lock();
        let (res, ns, labels, fields) = w.role.selector();
        let want = sim_answer(&sim, res, ns, &labels, &fields);
        assert_eq!(l.folded(), want, "initial events of {}", w.reader.url);
    }

    // --- Churn through the simulator's write verbs.
    let mut rng = StdRng::seed_from_u64(99);
    let node_names: Vec<String> = (0..FLEET_NODES).map(fleet::node_name).collect();
    let namespaces = fleet::namespace_names(&spec);
    let mut live: Vec<(String, String)> = fleet_pods
        .iter()
        .map(|o| (o.namespace.clone(), o.name.clone()))
        .filter(|p| !followed.contains(p))
        .collect();
    // Created without a node, bound later.
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut writes = Vec::new();
    let node_of = |ns: &str, name: &str| {
        sim.store()
            .get(&pods_rt, &format!("{ns}/{name}"))
            .and_then(|o| o.field("spec.nodeName").map(str::to_string))
            .expect("live pod")
    };
    let pick_other_node = |rng: &mut StdRng, not: &str| {
        let mut to = node_names[rng.random_range(0..node_names.len())].clone();
        if to == not {
            to = node_names[(fleet_index(&to) + 1) % FLEET_NODES].clone();
        }
        to
    };
    // The write verbs, each recorded with the watchers it must reach.
    let do_move = |writes: &mut Vec<Write>, ns: &str, name: &str, to: &str| {
        let from = node_of(ns, name);
        assert_ne!(from, to);
        let o = sim
            .ops()
            .modify(&pods_rt, Some(ns), name, |v| fleet::reassign(v, to))
            .expect("move");
        assert_eq!(o.field("spec.nodeName"), Some(to));
        writes.push(Write::Move {
            key: format!("{ns}/{name}"),
            from,
            to: to.to_string(),
            rv: o.rv,
        });
    };
    let do_relabel = |writes: &mut Vec<Write>, ns: &str, name: &str, seed: u64| {
        let mut before = String::new();
        let o = sim
            .ops()
            .modify(&pods_rt, Some(ns), name, |v| {
                before = label(v, "track");
                fleet::relabel(v, &mut StdRng::seed_from_u64(seed));
            })
            .expect("relabel");
        let after = o
            .labels
            .iter()
            .find(|(k, _)| k == "track")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        writes.push(Write::Relabel {
            key: format!("{ns}/{name}"),
            node: o.field("spec.nodeName").unwrap_or_default().to_string(),
            track_before: before,
            track_after: after,
            rv: o.rv,
        });
    };
    // A kubelet-style status update (or the pod finishing); the annotation makes sure it is a
    // change.
    let do_status = |writes: &mut Vec<Write>, ns: &str, name: &str, seed: u64, finish: bool| {
        let o = sim
            .ops()
            .modify(&pods_rt, Some(ns), name, |v| {
                fleet::touch_status(v, &mut StdRng::seed_from_u64(seed));
                v["metadata"]["annotations"]["watchmux.dev/touch"] = json!(seed.to_string());
                if finish {
                    v["status"]["phase"] = json!("Succeeded");
                }
            })
            .expect("status");
        writes.push(Write::Status {
            key: format!("{ns}/{name}"),
            node: o.field("spec.nodeName").unwrap_or_default().to_string(),
            rv: o.rv,
        });
    };
    let do_create =
        |writes: &mut Vec<Write>, rng: &mut StdRng, ns: &str, name: &str, node: &str| {
            let mut p = fleet::pod(100_000 + writes.len(), ns, node, rng);
            p["metadata"]["name"] = json!(name);
            if node.is_empty() {
                p["spec"].as_object_mut().unwrap().shift_remove("nodeName");
                p["status"] = json!({"phase": "Pending"});
            }
            let o = sim
                .ops()
                .create(&pods_rt, Some(ns), p, true)
                .expect("create");
            assert_eq!(o.field("spec.nodeName"), Some(node));
            writes.push(Write::Create {
                key: format!("{ns}/{name}"),
                node: node.to_string(),
                rv: o.rv,
            });
        };
    let do_delete = |writes: &mut Vec<Write>, ns: &str, name: &str| {
        let node = node_of(ns, name);
        let r = sim
            .ops()
            .delete(&pods_rt, Some(ns), name, &grace0())
            .expect("delete");
        assert!(r.deleted, "grace 0 deletes at once");
        // Nobody else writes: the deletion is the latest revision.
        writes.push(Write::Delete {
            key: format!("{ns}/{name}"),
            node,
            rv: sim.store().revision(),
        });
    };
    const CHURN: usize = 800;
    let mut p2_gone = false;
    for step in 0..CHURN {
        let seed: u64 = rng.random();
        if step % 40 == 3 {
            // The followed pods: every kind of change, and a delete and re-create.
            let j = step / 40;
            let (ns, name) = &followed[j % 3];
            match j {
                10 => {
                    do_delete(&mut writes, &followed[1].0, &followed[1].1);
                    p2_gone = true;
                }
                14 => {
                    let node = pick_other_node(&mut rng, "");
                    do_create(&mut writes, &mut rng, &followed[1].0, &followed[1].1, &node);
                    p2_gone = false;
                }
                _ if j % 3 == 1 && p2_gone => {}
                _ => match (j / 3) % 4 {
                    0 => do_status(&mut writes, ns, name, seed, false),
                    1 => do_relabel(&mut writes, ns, name, seed),
                    2 if node_of(ns, name) != node_in_fleet1 => {
                        do_move(&mut writes, ns, name, &node_in_fleet1)
                    }
                    _ => {
                        let to = pick_other_node(&mut rng, &node_of(ns, name));
                        do_move(&mut writes, ns, name, &to);
                    }
                },
            }
        }
        match rng.random_range(0..100) {
            0..22 => {
                let (ns, name) = live[rng.random_range(0..live.len())].clone();
                let to = pick_other_node(&mut rng, &node_of(&ns, &name));
                do_move(&mut writes, &ns, &name, &to);
            }
            22..40 => {
                let (ns, name) = live[rng.random_range(0..live.len())].clone();
                do_relabel(&mut writes, &ns, &name, seed);
            }
            40..62 => {
                let (ns, name) = live[rng.random_range(0..live.len())].clone();
                do_status(&mut writes, &ns, &name, seed, false);
            }
            62..66 => {
                // A pod finishes: pending ones leave the schedulers' selector.
                let (ns, name) = if !pending.is_empty() && rng.random_bool(0.5) {
                    pending.swap_remove(rng.random_range(0..pending.len()))
                } else {
                    live[rng.random_range(0..live.len())].clone()
                };
                do_status(&mut writes, &ns, &name, seed, true);
            }
            66..74 => {
                let ns = namespaces[rng.random_range(0..namespaces.len())].clone();
                let node = pick_other_node(&mut rng, "");
                let name = format!("churn-{step}");
                do_create(&mut writes, &mut rng, &ns, &name, &node);
                live.push((ns, name));
            }
            74..79 => {
                let ns = namespaces[rng.random_range(0..namespaces.len())].clone();
                let name = format!("pending-{step}");
                do_create(&mut writes, &mut rng, &ns, &name, "");
                pending.push((ns, name));
            }
            79..84 if !pending.is_empty() => {
                // The scheduler binds a pending pod.
                let (ns, name) = pending.swap_remove(rng.random_range(0..pending.len()));
                let to = pick_other_node(&mut rng, "");
                do_move(&mut writes, &ns, &name, &to);
                live.push((ns, name));
            }
            79..92 => {
                let (ns, name) = live.swap_remove(rng.random_range(0..live.len()));
                do_delete(&mut writes, &ns, &name);
            }
            _ => {
                let node = node_names[rng.random_range(0..node_names.len())].clone();
                let o = sim
                    .ops()
                    .modify(&nodes_rt, None, &node, |v| {
                        v["metadata"]["labels"]["watchmux.dev/churn"] = json!(step.to_string());
                    })
                    .expect("node label");
                writes.push(Write::NodeLabel { node, rv: o.rv });
            }
        }
        if step % 20 == 19 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // Every write was one change, at increasing revisions.
    let rvs: Vec<u64> = writes.iter().map(Write::rv).collect();
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "one revision per write"
    );
    let last_pod_rv = writes
        .iter()
        .filter_map(|w| match w {
            Write::NodeLabel { .. } => None,
            Write::Move { rv, .. }
            | Write::Relabel { rv, .. }
            | Write::Status { rv, .. }
            | Write::Create { rv, .. }
            | Write::Delete { rv, .. } => Some(*rv),
        })
        .max()
        .unwrap();
    let last_node_rv = writes
        .iter()
        .filter_map(|w| match w {
            Write::NodeLabel { rv, .. } => Some(*rv),
            _ => None,
        })
        .max()
        .expect("some node writes");

    // --- Stop: every watcher has been told (event or bookmark) about its resource's last write.
    let is_pods = |w: &Watcher| !matches!(w.role, Role::NodeWatch(_));
    let pod_readers: Vec<&Reader> = watchers
        .iter()
        .filter(|w| is_pods(w))
        .flat_map(|w| std::iter::once(&w.reader).chain(w.mirror.as_ref()))
        .collect();
    let node_readers: Vec<&Reader> = watchers
        .iter()
        .filter(|w| !is_pods(w))
        .flat_map(|w| std::iter::once(&w.reader).chain(w.mirror.as_ref()))
        .collect();
    wait_all(&pod_readers, "caught up with the pod writes", 30, |l| {
        l.max_rv >= last_pod_rv
    })
    .await;
    wait_all(&node_readers, "caught up with the node writes", 30, |l| {
        l.max_rv >= last_node_rv
    })
    .await;
    let churned = started.elapsed();

    // --- Every watcher's fold is the simulator's answer to its selector.
    let mut moves_checked = (0, 0);
    let mut label_moves_checked = 0;
    for w in &watchers {
        let l = w.reader.log.lock();
        let url = &w.reader.url;
        let (res, ns, labels, fields) = w.role.selector();
        let want = sim_answer(&sim, res, ns, &labels, &fields);
        assert_eq!(l.folded(), want, "folded stream of {url}");

        // Every event concerns this watcher (§2.2): ADDED/MODIFIED carry the new state, which
        // matches; DELETED carries the previous state, which matched.
        for s in l.initial.iter().chain(&l.events) {
            match &w.role {
                Role::Kubelet(n) => {
                    assert_eq!(&s.node, n, "{url}: event for another node: {s:?}")
                }
                Role::NodeWatch(n) => assert_eq!(&s.key, n, "{url}: another node: {s:?}"),
                Role::Controller(sel) => {
                    let sel = LabelSelector::parse(sel).unwrap();
                    assert!(
                        sel.matches(s.labels.as_slice()),
                        "{url}: object does not match: {s:?}"
                    );
                }
                Role::Scoped { ns, labels, fields } => {
                    // The whole filter, on the object's own selectable fields.
                    let f = kube_wire::selector::Filter::parse(
                        "",
                        "Pod",
                        true,
                        &[],
                        ns.clone(),
                        labels,
                        fields,
                    )
                    .unwrap();
                    let obj = s.object.as_ref().expect("objects kept");
                    let sf = kube_wire::selector::selectable_fields("", "Pod", true, &[], obj);
                    let obj_ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
                    assert!(
                        f.matches(obj_ns, &s.labels, |k| sf
                            .iter()
                            .find(|(n, _)| n == k)
                            .map(|(_, v)| v.as_str())),
                        "{url}: object does not match: {s:?}"
                    );
                }
            }
        }

        // The writes that concern this watcher arrived as the right event at the write's RV.
        let got = l.by_key_rv();
        let expect = |key: &str, rv: u64, ty: Ty, what: &Write| {
            let s = got
                .get(&(key, rv))
                .unwrap_or_else(|| panic!("{url}: no event for {what:?}"));
            assert_eq!(s.ty, ty, "{url}: {what:?} arrived as {s:?}");
        };
        let expect_none = |key: &str, rv: u64, what: &Write| {
            assert!(
                !got.contains_key(&(key, rv)),
                "{url}: unexpected event for {what:?}"
            );
        };
        for wr in &writes {
            match (&w.role, wr) {
                (Role::Kubelet(n), Write::Move { key, from, to, rv }) => {
                    if n == to {
                        expect(key, *rv, Ty::Added, wr);
                        moves_checked.0 += 1;
                    } else if n == from {
                        // The previous object (still on this node), stamped with the event's RV.
                        expect(key, *rv, Ty::Deleted, wr);
                        assert_eq!(got[&(key.as_str(), *rv)].node, *from);
                        moves_checked.1 += 1;
                    } else {
                        expect_none(key, *rv, wr);
                    }
                }
                (Role::Kubelet(n), Write::Relabel { key, node, rv, .. })
                | (Role::Kubelet(n), Write::Status { key, node, rv }) => {
                    if n == node {
                        expect(key, *rv, Ty::Modified, wr);
                    } else {
                        expect_none(key, *rv, wr);
                    }
                }
                (Role::Kubelet(n), Write::Create { key, node, rv }) => {
                    if n == node {
                        expect(key, *rv, Ty::Added, wr);
                    } else {
                        expect_none(key, *rv, wr);
                    }
                }
                (Role::Kubelet(n), Write::Delete { key, node, rv }) => {
                    if n == node {
                        expect(key, *rv, Ty::Deleted, wr);
                    } else {
                        expect_none(key, *rv, wr);
                    }
                }
                (Role::NodeWatch(n), Write::NodeLabel { node, rv }) => {
                    if n == node {
                        expect(node, *rv, Ty::Modified, wr);
                    } else {
                        expect_none(node, *rv, wr);
                    }
                }
                (
                    Role::Controller(sel),
                    Write::Relabel {
                        key,
                        track_before,
                        track_after,
                        rv,
                        ..
                    },
                ) if sel == "track=canary" => {
                    match (track_before == "canary", track_after == "canary") {
                        (false, true) => expect(key, *rv, Ty::Added, wr),
                        (true, false) => expect(key, *rv, Ty::Deleted, wr),
                        (true, true) => expect(key, *rv, Ty::Modified, wr),
                        (false, false) => expect_none(key, *rv, wr),
                    }
                    if track_before != track_after {
                        label_moves_checked += 1;
                    }
                }
                (Role::Controller(sel), wr) if sel.is_empty() => match wr {
                    Write::Move { key, rv, .. }
                    | Write::Relabel { key, rv, .. }
                    | Write::Status { key, rv, .. } => expect(key, *rv, Ty::Modified, wr),
                    Write::Create { key, rv, .. } => expect(key, *rv, Ty::Added, wr),
                    Write::Delete { key, rv, .. } => expect(key, *rv, Ty::Deleted, wr),
                    Write::NodeLabel { .. } => {}
                },
                _ => {}
            }
        }
    }
    assert!(
        moves_checked.0 > 50 && moves_checked.1 > 50,
        "node moves into and out of watched nodes: {moves_checked:?}"
    );
    assert!(
        label_moves_checked > 20,
        "label moves: {label_moves_checked}"
    );

    // --- A sample sees exactly what the simulator itself sends for the same request.
    let mut mirrored = 0;
    for w in &watchers {
        let Some(m) = &w.mirror else { continue };
        let (ours, theirs) = (w.reader.log.lock(), m.log.lock());
        let brief = |v: &[Seen]| -> Vec<(Ty, String, u64)> {
            v.iter().map(|s| (s.ty, s.key.clone(), s.rv)).collect()
        };
        let set = |v: &[Seen]| -> HashSet<(String, u64)> {
            v.iter().map(|s| (s.key.clone(), s.rv)).collect()
        };
        assert_eq!(
            set(&ours.initial),
            set(&theirs.initial),
            "initial events of {} vs the simulator",
            w.reader.url
        );
        assert_eq!(
            brief(&ours.events),
            brief(&theirs.events),
            "events of {} vs the simulator",
            w.reader.url
        );
        mirrored += 1;
    }
    assert_eq!(mirrored, 2 * 15 + CONTROLLER_SELECTORS.len() + SCOPED);
    // The scoped watchers saw changes, the schedulers pods coming and going.
    for w in &watchers {
        if let Role::Scoped { fields, .. } = &w.role {
            let l = w.reader.log.lock();
            assert!(!l.events.is_empty(), "{}: no events", w.reader.url);
            if fields == UNSCHEDULED {
                let has = |t: Ty| l.events.iter().any(|s| s.ty == t);
                assert!(has(Ty::Added) && has(Ty::Deleted), "{}", w.reader.url);
            }
        }
    }

    // Kubelets were never checked against other nodes' events: per pod event, the unindexed
    // watchers, at most two per hot-field bucket of the old and new node, two schedulers, two
    // namespace-scoped and one name-scoped watcher.
    let events = pods_cache.counters.events_received.load(Ordering::SeqCst);
    let evals = pods_cache
        .counters
        .selector_evaluations
        .load(Ordering::SeqCst);
    assert!(
        evals <= events * (unindexed as u64 + 9),
        "{evals} evaluations for {events} pod events"
    );
    // Events received after the initial ones either went through the watcher's queue
    // (`deliveries`) or were read from the log while catching up.
    let received: u64 = watchers
        .iter()
        .filter(|w| is_pods(w))
        .map(|w| w.reader.log.lock().events.len() as u64)
        .sum();
    let delivered = pods_cache.counters.deliveries.load(Ordering::SeqCst);
    assert!(
        received >= delivered,
        "{received} received, {delivered} delivered"
    );
    let from_log = received - delivered;
    if watcher_queue == Some(1) {
        assert!(
            from_log > 0,
            "precondition: some watchers caught up from the log (queue of 1)"
        );
    }
    println!(
        "fleet (watcher_queue {watcher_queue:?}): 500 watchers open in {opened:?}, {CHURN} writes \
         and catch-up by {churned:?}, total {:?}; {events} pod events, {evals} evaluations \
         ({:.1}/event); pod events received {received}, of which {from_log} read from the log; \
         node moves checked {moves_checked:?}, label moves {label_moves_checked}",
        started.elapsed(),
        evals as f64 / events as f64
    );
}

fn fleet_index(node: &str) -> usize {
    node.trim_start_matches("node-")
        .parse()
        .expect("fleet node")
}

// ---------------------------------------------------------------------------------------------
// 2. Dispatch cost does not grow with the number of kubelets
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_cost_per_event_does_not_grow_with_kubelets() {
    const U: usize = 5;
    const K: u64 = 100;
    let spec = FleetSpec {
        nodes: 20,
        pods: 100,
        namespaces: 2,
        seed: 3,
    };
    let sim = crate::common::sim_with(|c| c.fleet = Some(spec.clone())).await;
    let proxy = crate::common::proxy_for(&sim, |_| {}).await;
    let cache = proxy.proxy.cache("", "v1", "pods").expect("pods cached");
    let pods_rt = sim.resource("", "v1", "pods").unwrap();
    let unwatched = fleet::node_name(15);
    let targets: Vec<(String, String)> = sim
        .store()
        .list(
            &pods_rt,
            None,
            None,
            None,
            0,
            &|o| o.field("spec.nodeName") == Some(unwatched.as_str()),
            false,
        )
        .unwrap()
        .items
        .iter()
        .map(|o| (o.namespace.clone(), o.name.clone()))
        .collect();
    assert!(!targets.is_empty(), "pods on {unwatched}");

    let gate = Arc::new(Semaphore::new(64));
    let kubelet = |node: &str| {
        Reader::spawn(
            format!(
                "{}/api/v1/pods?{WATCH_QUERY}&{}",
                proxy.url,
                selector_query("", &format!("spec.nodeName={node}"))
            ),
            gate.clone(),
        )
    };
    let kubelets: Vec<Reader> = (0..10).map(|i| kubelet(&fleet::node_name(i))).collect();
    let unfiltered: Vec<Reader> = (0..U)
        .map(|_| {
            Reader::spawn(
                format!("{}/api/v1/pods?{WATCH_QUERY}", proxy.url),
                gate.clone(),
            )
        })
        .collect();

    let mut rng = StdRng::seed_from_u64(5);
    let mut n = 0usize;
    // One status write to a pod on the unwatched node; its RV.
    let mut write = |sim: &Simulator| {
        let (ns, name) = &targets[n % targets.len()];
        n += 1;
        let s: u64 = rng.random();
        sim.ops()
            .modify(&pods_rt, Some(ns), name, |v| {
                fleet::touch_status(v, &mut StdRng::seed_from_u64(s))
            })
            .expect("status write")
            .rv
    };

    // Waits until every watcher is registered and live, then writes K events on the unwatched
    // node and returns (evaluations, deliveries) per event.
    async fn measure(
        sim: &Simulator,
        cache: &watchmux::cache::ResourceCache,
        readers: &[&Reader],
        write: &mut impl FnMut(&Simulator) -> u64,
    ) -> (f64, u64) {
        let cm_rt = sim.resource("", "v1", "configmaps").unwrap();
        wait_all(readers, "past their initial events", 60, |l| {
            l.initial_end.is_some()
        })
        .await;
        wait_until("every watcher registered", 20, async || {
            cache.watcher_count() == readers.len()
        })
        .await;
        // A watcher is live (the dispatcher pushes to it) once it sends a periodic bookmark: it
        // only does so live and with everything sent. Receiving an event proves nothing (it may
        // have read it from the log), so the pods' RV is moved on without a pod event: the
        // simulator's pod bookmarks carry its global revision, which a configmap write advances.
        write(sim);
        let tick = sim
            .ops()
            .create(
                &cm_rt,
                Some("default"),
                json!({"metadata": {"generateName": "tick-"}}),
                false,
            )
            .expect("configmap")
            .rv;
        wait_all(readers, "live", 30, |l| l.last_bookmark >= tick).await;
        let e0 = cache.counters.selector_evaluations.load(Ordering::SeqCst);
        let d0 = cache.counters.deliveries.load(Ordering::SeqCst);
        let mut last = 0;
        for _ in 0..K {
            last = write(sim);
        }
        // A bound on the wait, not a timing: 2,005 watchers on a loaded CI machine.
        assert!(cache.wait_rv(last, Duration::from_secs(60)).await);
        let e1 = cache.counters.selector_evaluations.load(Ordering::SeqCst);
        let d1 = cache.counters.deliveries.load(Ordering::SeqCst);
        ((e1 - e0) as f64 / K as f64, d1 - d0)
    }

    // Phase 1: 10 kubelets + U unfiltered.
    let readers: Vec<&Reader> = kubelets.iter().chain(&unfiltered).collect();
    let (per_event_1, deliveries_1) = measure(&sim, &cache, &readers, &mut write).await;
    assert_eq!(cache.unindexed_watchers(), U);
    assert_eq!(
        deliveries_1,
        U as u64 * K,
        "each event went to the {U} unfiltered watchers and nobody else"
    );

    // Phase 2: 1,990 more kubelets, of nodes without pods.
    let more: Vec<Reader> = (0..1_990)
        .map(|i| kubelet(&format!("idle-node-{i}")))
        .collect();
    let readers: Vec<&Reader> = kubelets.iter().chain(&unfiltered).chain(&more).collect();
    assert_eq!(readers.len(), 2_000 + U);
    let (per_event_2, deliveries_2) = measure(&sim, &cache, &readers, &mut write).await;
    assert_eq!(cache.unindexed_watchers(), U);
    assert_eq!(cache.watcher_count(), 2_000 + U);
    assert_eq!(deliveries_2, U as u64 * K);
    println!(
        "dispatch cost: {per_event_1} evaluations/event with 10 kubelets, {per_event_2} with \
         2,000 (U = {U}, K = {K})"
    );
    assert!(
        (per_event_2 - per_event_1).abs() <= U as f64,
        "per-event evaluations grew from {per_event_1} to {per_event_2}"
    );
    assert!(
        per_event_2 <= (U + 2) as f64,
        "{per_event_2} evaluations per event with U = {U}"
    );
    assert!(
        per_event_1 >= U as f64,
        "the unfiltered watchers were checked"
    );

    // An event on a watched node reaches its kubelet too, and only it.
    let node3 = fleet::node_name(3);
    let (ns, name) = sim
        .store()
        .list(
            &pods_rt,
            None,
            None,
            None,
            0,
            &|o| o.field("spec.nodeName") == Some(node3.as_str()),
            false,
        )
        .unwrap()
        .items
        .first()
        .map(|o| (o.namespace.clone(), o.name.clone()))
        .expect("a pod on node 3");
    let e0 = cache.counters.selector_evaluations.load(Ordering::SeqCst);
    let d0 = cache.counters.deliveries.load(Ordering::SeqCst);
    let rv = sim
        .ops()
        .modify(&pods_rt, Some(&ns), &name, |v| {
            v["metadata"]["labels"]["touched"] = json!("yes")
        })
        .unwrap()
        .rv;
    assert!(cache.wait_rv(rv, Duration::from_secs(10)).await);
    assert_eq!(
        cache.counters.deliveries.load(Ordering::SeqCst) - d0,
        U as u64 + 1
    );
    assert_eq!(
        cache.counters.selector_evaluations.load(Ordering::SeqCst) - e0,
        U as u64 + 1
    );
    wait_all(&readers, "told about the last write", 10, |l| {
        l.max_rv >= rv
    })
    .await;
    let key = format!("{ns}/{name}");
    for (i, k) in kubelets.iter().enumerate() {
        let l = k.log.lock();
        let got: Vec<(Ty, &str, u64)> = l
            .events
            .iter()
            .map(|s| (s.ty, s.key.as_str(), s.rv))
            .collect();
        if i == 3 {
            assert_eq!(got, vec![(Ty::Modified, key.as_str(), rv)], "{}", k.url);
        } else {
            assert!(got.is_empty(), "{}: {got:?}", k.url);
        }
    }
    for k in &more {
        let l = k.log.lock();
        assert!(l.initial.is_empty() && l.events.is_empty(), "{}", k.url);
    }
    for u in &unfiltered {
        // Two warm-up writes, 2K measured ones, and the last.
        assert_eq!(u.log.lock().events.len() as u64, 2 * K + 3, "{}", u.url);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. LIST from the cache with selectors
// ---------------------------------------------------------------------------------------------

/// Items of a List as (namespace, name, resourceVersion), in order, and the items themselves.
fn items(v: &Value) -> (Vec<(String, String, String)>, Vec<Value>) {
    let items = v["items"].as_array().expect("items").clone();
    let ids = items
        .iter()
        .map(|i| {
            let m = &i["metadata"];
            (
                m["namespace"].as_str().unwrap_or_default().to_string(),
                m["name"].as_str().unwrap_or_default().to_string(),
                m["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    (ids, items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_from_cache_with_selectors_equals_the_simulator() {
    let spec = FleetSpec {
        nodes: 12,
        pods: 240,
        namespaces: 4,
        seed: 77,
    };
    let sim = crate::common::sim_with(|c| c.fleet = Some(spec.clone())).await;
    let pods_rt = sim.resource("", "v1", "pods").unwrap();
    let nodes_rt = sim.resource("", "v1", "nodes").unwrap();

    // Variety for the selectors: shard labels, phases, unscheduled and unusual pods.
    let all = sim
        .store()
        .list(&pods_rt, None, None, None, 0, &|_| true, false)
        .unwrap()
        .items;
    let mut rng = StdRng::seed_from_u64(8);
    for (i, o) in all.iter().enumerate() {
        let phase = match i % 11 {
            0 => Some("Pending"),
            1 => Some("Succeeded"),
            2 => Some("Failed"),
            _ => None,
        };
        let relabel = i % 3 == 0;
        if phase.is_none() && !relabel {
            continue;
        }
        let s: u64 = rng.random();
        sim.ops()
            .modify(&pods_rt, Some(&o.namespace), &o.name, |v| {
                if let Some(p) = phase {
                    v["status"]["phase"] = json!(p);
                }
                if relabel {
                    fleet::relabel(v, &mut StdRng::seed_from_u64(s));
                }
            })
            .unwrap();
    }
    let odd = [
        json!({"metadata": {"name": "unscheduled-a", "labels": {"tier": "web", "app": "frontend"}},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]},
               "status": {"phase": "Pending", "nominatedNodeName": "node-00001"}}),
        json!({"metadata": {"name": "unscheduled-b", "labels": {"shard": "12"}},
               "spec": {"containers": [{"name": "c", "image": "nginx"}], "schedulerName": "bin-packer"},
               "status": {"phase": "Pending"}}),
        json!({"metadata": {"name": "host-net", "labels": {"tier": "infra", "app": "agent"}},
               "spec": {"nodeName": "node-00002", "hostNetwork": true, "restartPolicy": "OnFailure",
                        "serviceAccount": "legacy-sa",
                        "containers": [{"name": "c", "image": "agent"}]},
               "status": {"phase": "Running", "podIPs": [{"ip": "10.9.9.9"}, {"ip": "fd00::9"}]}}),
        json!({"metadata": {"name": "a,b", "labels": {"odd": ""}},
               "spec": {"nodeName": "node-00003", "containers": [{"name": "c", "image": "nginx"}]},
               "status": {"phase": "Running"}}),
    ];
    for (i, p) in odd.into_iter().enumerate() {
        let r = sim.ops().create(&pods_rt, Some("fleet-1"), p, true);
        // `a,b` is not a valid name; kube refuses it and so does the simulator.
        assert_eq!(r.is_ok(), i < 3, "{r:?}");
    }
    for i in [3, 7] {
        sim.ops()
            .modify(&nodes_rt, None, &fleet::node_name(i), |v| {
                v["spec"]["unschedulable"] = json!(true);
                v["metadata"]["labels"]["cordoned"] = json!("yes");
            })
            .unwrap();
    }
    let proxy = crate::common::proxy_for(&sim, |_| {}).await;
    // The caches hold the latest write of each resource.
    for r in ["pods", "nodes"] {
        let c = proxy.proxy.cache("", "v1", r).unwrap();
        let want = sim
            .store()
            .list(
                &sim.resource("", "v1", r).unwrap(),
                None,
                None,
                None,
                0,
                &|_| true,
                false,
            )
            .unwrap()
            .items
            .iter()
            .map(|o| o.rv)
            .max()
            .unwrap();
        assert!(c.wait_rv(want, Duration::from_secs(10)).await);
    }
    // No more writes from here on.
    let revision = sim.store().revision();
    let some_pod = all[17].name.clone();
    let some_ns = all[17].namespace.clone();

    // (path, labelSelector, fieldSelector, non-empty result expected)
    let cases: Vec<(String, &str, String, bool)> = vec![
        ("/api/v1/pods".into(), "", String::new(), true),
        ("/api/v1/pods".into(), "tier=web", String::new(), true),
        ("/api/v1/pods".into(), "tier==backend", String::new(), true),
        ("/api/v1/pods".into(), "track!=canary", String::new(), true),
        (
            "/api/v1/pods".into(),
            "app in (cart,auth)",
            String::new(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "app notin (frontend,cart,checkout)",
            String::new(),
            true,
        ),
        ("/api/v1/pods".into(), "shard", String::new(), true),
        ("/api/v1/pods".into(), "!shard", String::new(), true),
        (
            "/api/v1/pods".into(),
            "tier=backend,track=stable,!shard",
            String::new(),
            true,
        ),
        ("/api/v1/pods".into(), "shard>7", String::new(), true),
        (
            "/api/v1/pods".into(),
            "shard<3,tier in (backend)",
            String::new(),
            true,
        ),
        ("/api/v1/pods".into(), "odd", String::new(), false),
        (
            "/api/v1/pods".into(),
            "",
            "spec.nodeName=node-00003".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "spec.nodeName!=node-00003".into(),
            true,
        ),
        ("/api/v1/pods".into(), "", "spec.nodeName=".into(), true),
        (
            "/api/v1/pods".into(),
            "",
            "spec.host=node-00004".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "status.phase=Pending".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "status.phase!=Running".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "status.phase==Succeeded".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            format!("metadata.name={some_pod}"),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "metadata.namespace=fleet-2".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "metadata.namespace=fleet-2,spec.nodeName!=node-00000".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "spec.hostNetwork=true".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "spec.hostNetwork=false".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "status.podIP=10.9.9.9".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "spec.serviceAccountName=legacy-sa".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "spec.restartPolicy=OnFailure".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "spec.schedulerName=bin-packer".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            "status.nominatedNodeName=node-00001".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "",
            r"metadata.name=a\,b".into(),
            false,
        ),
        (
            "/api/v1/pods".into(),
            "tier=backend",
            "spec.nodeName=node-00005,status.phase=Running".into(),
            true,
        ),
        (
            "/api/v1/pods".into(),
            "track=canary",
            "spec.nodeName!=node-00001".into(),
            true,
        ),
        (
            "/api/v1/namespaces/fleet-1/pods".into(),
            "",
            String::new(),
            true,
        ),
        (
            "/api/v1/namespaces/fleet-1/pods".into(),
            "track=canary",
            String::new(),
            true,
        ),
        (
            "/api/v1/namespaces/fleet-1/pods".into(),
            "",
            "spec.nodeName=node-00002".into(),
            true,
        ),
        (
            "/api/v1/namespaces/fleet-1/pods".into(),
            "",
            "metadata.namespace=fleet-2".into(),
            false,
        ),
        (
            format!("/api/v1/namespaces/{some_ns}/pods"),
            "",
            format!("metadata.name={some_pod}"),
            true,
        ),
        (
            "/api/v1/namespaces/no-such-ns/pods".into(),
            "",
            String::new(),
            false,
        ),
        ("/api/v1/nodes".into(), "", String::new(), true),
        (
            "/api/v1/nodes".into(),
            "",
            "metadata.name=node-00003".into(),
            true,
        ),
        (
            "/api/v1/nodes".into(),
            "",
            "spec.unschedulable=true".into(),
            true,
        ),
        (
            "/api/v1/nodes".into(),
            "",
            "spec.unschedulable!=true".into(),
            true,
        ),
        (
            "/api/v1/nodes".into(),
            "watchmux.dev/pool in (pool-1,pool-2),!cordoned",
            String::new(),
            true,
        ),
        (
            "/api/v1/nodes".into(),
            "cordoned=yes",
            "spec.unschedulable=true".into(),
            true,
        ),
    ];
    let mut narrowed = 0;
    for (path, labels, fields, non_empty) in &cases {
        let q = selector_query(labels, fields);
        let q = if q.is_empty() {
            "resourceVersion=0".to_string()
        } else {
            format!("resourceVersion=0&{q}")
        };
        let (s1, ours) = crate::common::get_json(&format!("{}{path}?{q}", proxy.url)).await;
        let (s2, theirs) = crate::common::get_json(&format!("{}{path}?{q}", sim.url())).await;
        let what = format!("{path}?{q}");
        assert_eq!(s1, StatusCode::OK, "{what}: {ours}");
        assert_eq!(s2, StatusCode::OK, "{what}: {theirs}");
        assert_eq!(ours["kind"], theirs["kind"], "{what}");
        let (ids1, items1) = items(&ours);
        let (ids2, items2) = items(&theirs);
        assert_eq!(ids1, ids2, "{what}: names and resourceVersions");
        assert!(items1 == items2, "{what}: item contents differ");
        assert_eq!(!ids2.is_empty(), *non_empty, "{what}: {} items", ids2.len());
        let all_of_kind = if path.ends_with("/nodes") {
            spec.nodes
        } else {
            sim.store().count(&pods_rt)
        };
        if !ids2.is_empty() && ids2.len() < all_of_kind {
            narrowed += 1;
        }
    }
    assert!(narrowed >= 30, "{narrowed} selectors narrowed the list");

    // Invalid selectors: the same 400, for LIST and WATCH.
    let bad: &[(&str, &str, &str)] = &[
        ("/api/v1/pods", "app in (a", ""),
        ("/api/v1/pods", "app in a,b", ""),
        ("/api/v1/pods", "!", ""),
        ("/api/v1/pods", "a b", ""),
        ("/api/v1/pods", "-bad=1", ""),
        ("/api/v1/pods", "tier=web,", ""),
        ("/api/v1/pods", "shard>x", ""),
        ("/api/v1/pods", "x=y", "spec.foo=1"),
        ("/api/v1/pods", "", "spec.nodeName"),
        ("/api/v1/pods", "", r"spec.nodeName=a\b"),
        ("/api/v1/pods", "", "spec.nodeName=a=b"),
        ("/api/v1/pods", "", "status.phase=Running,bogus!=1"),
        ("/api/v1/namespaces/fleet-1/pods", "", "metadata.uid=1"),
        ("/api/v1/nodes", "", "spec.nodeName=node-00001"),
        ("/api/v1/nodes", "", "metadata.namespace=x"),
    ];
    let long_value = format!("app={}", "v".repeat(64));
    let mut bad: Vec<(&str, &str, &str)> = bad.to_vec();
    bad.push(("/api/v1/pods", &long_value, ""));
    for (path, labels, fields) in bad {
        for mode in ["resourceVersion=0", WATCH_QUERY] {
            let q = format!("{mode}&{}", selector_query(labels, fields));
            let (s1, _, b1) =
                crate::common::request(Method::GET, &format!("{}{path}?{q}", proxy.url), &[], "")
                    .await;
            let (s2, _, b2) =
                crate::common::request(Method::GET, &format!("{}{path}?{q}", sim.url()), &[], "")
                    .await;
            let what = format!("{path}?{q}");
            assert_eq!(
                s2,
                StatusCode::BAD_REQUEST,
                "{what}: {}",
                String::from_utf8_lossy(&b2)
            );
            assert_eq!(s1, s2, "{what}: {}", String::from_utf8_lossy(&b1));
            assert_eq!(
                String::from_utf8_lossy(&b1),
                String::from_utf8_lossy(&b2),
                "{what}"
            );
        }
    }
    assert_eq!(
        sim.store().revision(),
        revision,
        "nothing was written during the comparison"
    );
}
