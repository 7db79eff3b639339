//! Upstream faults while downstream watchers are open through watchmux.
//!
//! Several raw watchers (from a resourceVersion inside the proxy's window, with and without
//! label, field and namespace scoping) stay open while the simulator drops watch connections,
//! refuses connections for a while, answers the reflector's re-watch with 500 or 429, sends a
//! malformed event, or compacts during an outage (so the re-watch gets 410 and the proxy
//! relists and bridges). Afterwards every watcher must have seen every change exactly once, in
//! strictly increasing resourceVersion order, its stream still open: its sequence equals the
//! simulator's history filtered by its scope (outside the bridged stretch, where the folded state
//! must match), and its folded state equals the simulator's. A client that resumes after a
//! bridge from any resourceVersion it was sent converges too. Every watcher scope is watched
//! twice, in JSON and in protobuf (decoded with kube-rs's `k8s-pb`), and both must pass. With a one-event queue, watchers
//! that keep switching between reading the shared log and live delivery under a write storm
//! (bookmarks included) lose, repeat and reorder nothing. Finally a client that stops reading
//! is closed for lagging while a reading one gets everything.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::watch_log::{self, Seen, State, fold};
use crate::common::{Next, WatchStream};
use kube_sim::kinds::ResourceType;
use kube_sim::semantics::DeleteOptions;
use kube_sim::store::StoredObject;
use kube_sim::{SimState, Simulator};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use watchmux::cache::ResourceCache;

/// What a kubelet sends: protobuf first.
const KUBELET: &str = "application/vnd.kubernetes.protobuf,application/json";

/// How long any awaited condition may take.
const DEADLINE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Watcher scopes
// ---------------------------------------------------------------------------------------------

/// What a downstream watcher asks for.
#[derive(Debug, Clone)]
struct Scope {
    namespace: Option<&'static str>,
    /// Equality requirements (`labelSelector=k=v,...`).
    labels: &'static [(&'static str, &'static str)],
    /// `fieldSelector=spec.nodeName=...`.
    node: Option<&'static str>,
    bookmarks: bool,
}

const SCOPES: &[Scope] = &[
    Scope {
        namespace: None,
        labels: &[],
        node: None,
        bookmarks: true,
    },
    Scope {
        namespace: None,
        labels: &[],
        node: None,
        bookmarks: false,
    },
    Scope {
        namespace: None,
        labels: &[("app", "web")],
        node: None,
        bookmarks: true,
    },
    Scope {
        namespace: None,
        labels: &[("app", "db")],
        node: None,
        bookmarks: false,
    },
    Scope {
        namespace: Some("default"),
        labels: &[],
        node: None,
        bookmarks: true,
    },
    Scope {
        namespace: None,
        labels: &[],
        node: Some("node-a"),
        bookmarks: true,
    },
    Scope {
        namespace: Some("other"),
        labels: &[("app", "web")],
        node: None,
        bookmarks: false,
    },
];

impl Scope {
    fn url(&self, base: &str, rv: u64) -> String {
        let path = match self.namespace {
            Some(ns) => format!("/api/v1/namespaces/{ns}/pods"),
            None => "/api/v1/pods".to_string(),
        };
        let mut q = format!("{base}{path}?watch=1&resourceVersion={rv}");
        if self.bookmarks {
            q.push_str("&allowWatchBookmarks=true");
        }
        if !self.labels.is_empty() {
            let sel: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            q.push_str("&labelSelector=");
            q.extend(form_urlencoded::byte_serialize(sel.join(",").as_bytes()));
        }
        if let Some(n) = self.node {
            q.push_str("&fieldSelector=spec.nodeName%3D");
            q.push_str(n);
        }
        q
    }

    fn matches(&self, o: &StoredObject) -> bool {
        self.namespace.is_none_or(|ns| o.namespace == ns)
            && self
                .labels
                .iter()
                .all(|(k, v)| o.labels.iter().any(|(lk, lv)| lk == k && lv == v))
            && self
                .node
                .is_none_or(|n| o.field("spec.nodeName") == Some(n))
    }
}

// ---------------------------------------------------------------------------------------------
// What a watcher was sent
// ---------------------------------------------------------------------------------------------

/// A watch stream read in the background.
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    /// How the stream stopped, if it did.
    end: Arc<Mutex<Option<String>>>,
    task: JoinHandle<()>,
}

impl Recorder {
    fn start(mut w: WatchStream) -> Recorder {
        assert_eq!(w.status, 200, "watch accepted");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let end = Arc::new(Mutex::new(None));
        let (s, e) = (seen.clone(), end.clone());
        let protobuf = w.headers.get("content-type").is_some_and(|t| {
            t.as_bytes()
                .starts_with(b"application/vnd.kubernetes.protobuf")
        });
        let task = tokio::spawn(async move {
            loop {
                let next = if protobuf {
                    w.next_frame(Duration::from_secs(3600))
                        .await
                        .map(|f| Seen::parse_protobuf(&f))
                } else {
                    match w.next_line(Duration::from_secs(3600)).await {
                        Next::Line(l) => Ok(Seen::parse(&l)),
                        other => Err(other),
                    }
                };
                match next {
                    Ok(seen) => s.lock().push(seen),
                    Err(other) => {
                        *e.lock() = Some(format!("{other:?}"));
                        return;
                    }
                }
            }
        });
        Recorder { seen, end, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }

    fn events(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(Seen::is_event).collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// Simulator side
// ---------------------------------------------------------------------------------------------

fn pods_rt(sim: &Simulator) -> Arc<ResourceType> {
    sim.resource("", "v1", "pods").expect("pods")
}

/// The simulator's pods in `scope`, now or at revision `at`.
fn sim_state(sim: &Simulator, scope: &Scope, at: Option<u64>) -> State {
    watch_log::sim_state(sim, &pods_rt(sim), at, &|o| scope.matches(o))
}

/// The events a watcher of `scope` must get for the simulator's history after `after`
/// (move-in/move-out as ADDED/DELETED), up to revision `until`.
fn expected_events(sim: &Simulator, scope: &Scope, after: u64, until: u64) -> Vec<Seen> {
    watch_log::sim_events(sim, &pods_rt(sim), after, until, &|o| scope.matches(o))
}

fn stat(sim: &Simulator, key: &str) -> i64 {
    sim.stats()["resources"]["pods"][key]
        .as_i64()
        .expect("pods stat")
}

/// A deterministic mix of pod writes: creates, label flips (selector move-in/out), node moves
/// (field selector move-in/out), annotation updates, deletes, and delete-then-recreate under
/// the same name (new uid). Nothing else writes pods.
struct Writer {
    state: Arc<SimState>,
    rt: Arc<ResourceType>,
    rng: StdRng,
    live: Vec<(String, String)>,
    n: usize,
}

impl Writer {
    fn new(sim: &Simulator, seed: u64) -> Writer {
        Writer {
            state: sim.state().clone(),
            rt: pods_rt(sim),
            rng: StdRng::seed_from_u64(seed),
            live: Vec::new(),
            n: 0,
        }
    }

    fn revision(&self) -> u64 {
        self.state.store.revision()
    }

    fn create_named(&mut self, ns: &str, name: &str) {
        let app = ["web", "db"][self.rng.random_range(0..2)];
        let node = ["node-a", "node-b"][self.rng.random_range(0..2)];
        self.state
            .ops
            .create(
                &self.rt,
                Some(ns),
                crate::common::pod(name, node, json!({"app": app})),
                false,
            )
            .expect("create");
    }

    fn create(&mut self) {
        self.n += 1;
        let ns = ["default", "other"][self.rng.random_range(0..2)].to_string();
        let name = format!("p-{}", self.n);
        self.create_named(&ns, &name);
        self.live.push((ns, name));
    }

    fn delete(&self, ns: &str, name: &str) {
        let now = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let r = self
            .state
            .ops
            .delete(&self.rt, Some(ns), name, &now)
            .expect("delete");
        assert!(r.deleted);
    }

    fn modify(&self, ns: &str, name: &str, f: impl FnOnce(&mut Value)) {
        self.state
            .ops
            .modify(&self.rt, Some(ns), name, f)
            .expect("modify");
    }

    /// One write (two for delete-and-recreate). Returns the simulator's revision after it.
    fn step(&mut self) -> u64 {
        if self.live.len() < 4 {
            self.create();
            return self.revision();
        }
        let i = self.rng.random_range(0..self.live.len());
        let (ns, name) = self.live[i].clone();
        match self.rng.random_range(0..10) {
            0 | 1 => self.create(),
            2 | 3 => self.modify(&ns, &name, |v| {
                let l = &mut v["metadata"]["labels"]["app"];
                *l = json!(if l == "web" { "db" } else { "web" });
            }),
            4 => self.modify(&ns, &name, |v| {
                let n = &mut v["spec"]["nodeName"];
                *n = json!(if n == "node-a" { "node-b" } else { "node-a" });
            }),
            5 | 6 => {
                let t = self.rng.random::<u32>().to_string();
                self.modify(&ns, &name, |v| {
                    v["metadata"]["annotations"] = json!({"touch": t});
                })
            }
            7 | 8 => {
                self.delete(&ns, &name);
                self.live.swap_remove(i);
            }
            _ => {
                self.delete(&ns, &name);
                self.create_named(&ns, &name);
            }
        }
        self.revision()
    }

    fn burst(&mut self, n: usize) -> u64 {
        for _ in 0..n {
            self.step();
        }
        self.revision()
    }
}

// ---------------------------------------------------------------------------------------------
// The rig: simulator, proxy, open watchers
// ---------------------------------------------------------------------------------------------

struct Rig {
    sim: Simulator,
    proxy: crate::common::TestProxy,
    cache: Arc<ResourceCache>,
    writer: Writer,
    watchers: Vec<(Scope, Recorder)>,
    /// The resourceVersion each watcher started from.
    from: Vec<u64>,
    /// Each watcher's state at its start (the simulator cannot list it after a compaction).
    initial: Vec<State>,
    /// The bridged relist's range (the cache's RV before, the list's RV), once there was one.
    bridged: (u64, u64),
}

impl Rig {
    async fn new() -> Rig {
        Rig::with(|_| {}).await
    }

    /// A rig whose proxy config is adjusted by `f`.
    async fn with(f: impl FnOnce(&mut watchmux::config::Config)) -> Rig {
        let sim = crate::common::sim().await;
        sim.ops()
            .create(
                &sim.resource("", "v1", "namespaces").unwrap(),
                None,
                json!({"metadata": {"name": "other"}}),
                false,
            )
            .expect("namespace");
        let mut writer = Writer::new(&sim, 1);
        for _ in 0..12 {
            writer.create();
        }
        let proxy = crate::common::proxy_for(&sim, f).await;
        let cache = proxy.proxy.cache("", "v1", "pods").expect("pods cache");
        // Some history in the proxy's window; watchers start in the middle of it.
        writer.burst(4);
        let rv0 = writer.revision();
        let last = writer.burst(6);
        assert!(cache.wait_rv(last, DEADLINE).await, "proxy caught up");
        let mut rig = Rig {
            sim,
            proxy,
            cache,
            writer,
            watchers: Vec::new(),
            from: Vec::new(),
            initial: Vec::new(),
            bridged: (0, 0),
        };
        // Every scope twice: in JSON, and in protobuf as kubelets watch (the same events,
        // relist bridges and selector move-in/move-out included, in both encodings).
        for scope in SCOPES {
            rig.add_watcher(scope, rv0).await;
            rig.add_watcher_accepting(scope, rv0, KUBELET).await;
        }
        rig
    }

    /// Opens a watcher of `scope` from `rv` (at most the simulator's revision).
    async fn add_watcher(&mut self, scope: &Scope, rv: u64) {
        self.add_watcher_accepting(scope, rv, "application/json")
            .await;
    }

    /// [`Rig::add_watcher`] with an `Accept` header.
    async fn add_watcher_accepting(&mut self, scope: &Scope, rv: u64, accept: &str) {
        self.initial.push(sim_state(&self.sim, scope, Some(rv)));
        self.from.push(rv);
        let w =
            crate::common::watch_with(&scope.url(&self.proxy.url, rv), &[("accept", accept)]).await;
        self.watchers.push((scope.clone(), Recorder::start(w)));
    }

    /// Waits until the proxy's cache has applied everything written so far.
    async fn proxy_caught_up(&self) {
        let rev = self.writer.revision();
        assert!(
            self.cache.wait_rv(rev, DEADLINE).await,
            "the proxy's pods cache reached {rev} (it is at {})",
            self.cache.rv()
        );
    }

    /// Waits until the simulator's pods watch stream is gone (after a drop or during an
    /// outage), so later writes cannot reach the proxy over the old connection.
    async fn wait_no_upstream_watch(&self) {
        crate::common::upstream_watches_gone(&self.sim, &["pods"]).await;
    }

    /// Waits until the simulator's pods `key` counter exceeds `before`.
    async fn stat_above(&self, key: &str, before: i64) {
        let deadline = Instant::now() + DEADLINE;
        while stat(&self.sim, key) <= before {
            assert!(
                Instant::now() < deadline,
                "pods {key} stayed at {before}: the fault did not make the proxy reconnect"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until every watcher's folded state equals the simulator's (filtered by its
    /// scope); fails at once on an ordering/duplicate/gap violation or a closed stream.
    async fn converge(&self, what: &str) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let mut behind = Vec::new();
            for (i, (scope, rec)) in self.watchers.iter().enumerate() {
                if let Some(end) = rec.end.lock().clone() {
                    panic!("{what}: watcher {i} {scope:?}: stream stopped: {end}");
                }
                let initial = self.initial[i].clone();
                let got = fold(initial, self.from[i], &rec.seen())
                    .unwrap_or_else(|e| panic!("{what}: watcher {i} {scope:?}: {e}"));
                let want = sim_state(&self.sim, scope, None);
                if got != want {
                    behind.push((i, got, want));
                }
            }
            if behind.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                let (i, got, want) = &behind[0];
                let missing: Vec<_> = want
                    .iter()
                    .filter(|(k, v)| got.get(*k) != Some(v))
                    .collect();
                let extra: Vec<_> = got
                    .iter()
                    .filter(|(k, v)| want.get(*k) != Some(v))
                    .collect();
                panic!(
                    "{what}: {} watchers did not converge; watcher {i} {:?}: missing {missing:?}, \
                     extra {extra:?}",
                    behind.len(),
                    self.watchers[*i].0
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Each watcher's events equal the simulator's history for its scope, exactly.
    fn assert_exact_history(&self, what: &str) {
        let until = self.writer.revision();
        for (i, (scope, rec)) in self.watchers.iter().enumerate() {
            let want = expected_events(&self.sim, scope, self.from[i], until);
            assert_eq!(
                rec.events(),
                want,
                "{what}: watcher {i} {scope:?} versus the simulator's history"
            );
        }
    }

    /// Proves every stream is still open and nothing else is pending: two sentinel pods are
    /// created; each watcher gets exactly the ADDED events of those in its scope, and converges.
    async fn sentinels(&mut self, what: &str) {
        let before: Vec<usize> = self
            .watchers
            .iter()
            .map(|(_, r)| r.events().len())
            .collect();
        for (ns, name, app, node) in [
            ("default", "sentinel-web", "web", "node-a"),
            ("other", "sentinel-db", "db", "node-b"),
        ] {
            self.writer
                .state
                .ops
                .create(
                    &self.writer.rt,
                    Some(ns),
                    crate::common::pod(name, node, json!({"app": app})),
                    false,
                )
                .expect("sentinel");
        }
        self.converge(what).await;
        for (i, (scope, rec)) in self.watchers.iter().enumerate() {
            let after: Vec<String> = rec.events()[before[i]..]
                .iter()
                .map(|e| format!("{} {}", e.ty, e.key))
                .collect();
            let rt = self.writer.rt.clone();
            let want: Vec<String> = ["default/sentinel-web", "other/sentinel-db"]
                .iter()
                .filter(|k| {
                    let o = self.sim.store().get(&rt, k).expect("sentinel stored");
                    scope.matches(&o)
                })
                .map(|k| format!("ADDED {k}"))
                .collect();
            assert_eq!(
                after, want,
                "{what}: watcher {i} {scope:?} after the sentinels"
            );
            assert!(rec.end.lock().is_none(), "{what}: watcher {i} closed");
        }
    }

    /// Counters every fault test checks: no watcher was closed, no relist was reset.
    fn assert_no_closures(&self) {
        let c = &self.cache.counters;
        assert_eq!(c.relists_reset.load(Ordering::SeqCst), 0, "relists reset");
        assert_eq!(
            c.slow_watchers_closed.load(Ordering::SeqCst),
            0,
            "watchers closed"
        );
        assert_eq!(
            self.cache.watcher_count(),
            self.watchers.len(),
            "registered watchers"
        );
    }

    /// The end of a fault test without a relist: exact history, sentinels, counters.
    async fn finish_exact(mut self, what: &str) {
        self.writer.burst(10);
        self.converge(what).await;
        self.assert_exact_history(what);
        self.sentinels(what).await;
        self.assert_exact_history(what);
        self.assert_no_closures();
        assert_eq!(
            self.cache.counters.relists_bridged.load(Ordering::SeqCst),
            0,
            "{what}: no relist was needed"
        );
        assert_eq!(
            stat(&self.sim, "listRequests"),
            1,
            "{what}: no upstream relist"
        );
        let n: usize = self.watchers.iter().map(|(_, r)| r.events().len()).sum();
        eprintln!(
            "{what}: {} watchers, {n} events checked",
            self.watchers.len()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Faults without a relist: the proxy re-watches from its last resourceVersion
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_upstream_watches_lose_and_repeat_nothing() {
    let mut rig = Rig::new().await;
    rig.writer.burst(15);
    for _ in 0..3 {
        rig.proxy_caught_up().await;
        let watches = stat(&rig.sim, "watchRequests");
        rig.sim.faults().drop_watches();
        // Written while the proxy reconnects: it must replay them from its last RV.
        rig.writer.burst(10);
        rig.stat_above("watchRequests", watches).await;
        rig.writer.burst(5);
    }
    rig.finish_exact("dropped watches").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_outage_loses_and_repeats_nothing() {
    let mut rig = Rig::new().await;
    rig.writer.burst(10);
    rig.proxy_caught_up().await;
    let watches = stat(&rig.sim, "watchRequests");
    rig.sim
        .faults()
        .refuse_connections_for(Duration::from_millis(1200));
    rig.wait_no_upstream_watch().await;
    rig.writer.burst(20);
    // Clients that arrive with a resourceVersion the proxy has not reached yet (e.g. failing
    // over from a direct apiserver connection, spec §3.11): they must get exactly the changes
    // after it once the proxy catches up, nothing at or below it.
    let ahead = rig.writer.revision();
    let cache_rv = rig.cache.rv();
    rig.add_watcher(&SCOPES[0], ahead).await;
    rig.add_watcher(&SCOPES[2], ahead).await;
    rig.stat_above("watchRequests", watches).await;
    eprintln!("late watchers from {ahead} opened while the proxy was at {cache_rv}");
    rig.finish_exact("outage").await;
}

/// The reflector's re-watch is answered `count` times with `code`, then succeeds.
async fn rewatch_answered_with(code: u16) {
    let mut rig = Rig::new().await;
    rig.writer.burst(10);
    rig.proxy_caught_up().await;
    let watches = stat(&rig.sim, "watchRequests");
    rig.sim.faults().fail_next(code, 3, 1, "/api/v1/pods");
    rig.sim.faults().drop_watches();
    rig.writer.burst(15);
    rig.stat_above("watchRequests", watches).await;
    assert!(
        rig.sim.faults().take_error("/api/v1/pods").is_none(),
        "all three injected {code}s were answered to the proxy's re-watch"
    );
    rig.finish_exact(&format!("re-watch answered {code}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewatch_answered_500_loses_and_repeats_nothing() {
    rewatch_answered_with(500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewatch_answered_429_loses_and_repeats_nothing() {
    rewatch_answered_with(429).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_upstream_event_loses_and_repeats_nothing() {
    let mut rig = Rig::new().await;
    rig.writer.burst(10);
    rig.proxy_caught_up().await;
    let watches = stat(&rig.sim, "watchRequests");
    // The next event on the pods watch is preceded by a truncated line: the proxy must drop
    // that connection and re-watch from its last RV, replaying the event it did not apply.
    rig.sim.faults().send_malformed_event();
    rig.writer.burst(10);
    rig.stat_above("watchRequests", watches).await;
    assert!(
        !rig.sim.faults().take_malformed(),
        "the malformed line was sent"
    );
    rig.finish_exact("malformed event").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_upstream_object_is_refused_like_malformed_json_and_loses_and_repeats_nothing()
{
    let mut rig = Rig::new().await;
    rig.writer.burst(10);
    rig.proxy_caught_up().await;
    let pods = rig.proxy.proxy.cache("", "v1", "pods").unwrap();
    assert!(
        pods.snapshot().objects.values().all(|o| o.is_protobuf()),
        "pods are read, and stored, in protobuf"
    );
    let watches = stat(&rig.sim, "watchRequests");
    // The next event on the pods watch is preceded by a well-framed event whose pod does not
    // decode (a field inside its spec runs past its end; its metadata reads): the proxy must
    // refuse it as it refuses a malformed JSON line — nothing of it cached, the connection
    // dropped — and re-watch from its last RV, replaying the event it did not apply.
    rig.sim.faults().send_undecodable_object();
    rig.writer.burst(10);
    rig.stat_above("watchRequests", watches).await;
    assert!(
        !rig.sim.faults().take_undecodable(),
        "the undecodable object was sent"
    );
    rig.finish_exact("undecodable object").await;
    assert!(
        pods.snapshot()
            .objects
            .keys()
            .all(|k| !k.ends_with("/undecodable")),
        "nothing of the undecodable object was cached"
    );
}

// ---------------------------------------------------------------------------------------------
// Compaction during an outage: 410, relist, bridge
// ---------------------------------------------------------------------------------------------

/// Drives a rig through an outage with compaction so the proxy relists and bridges; checks
/// every watcher: the part before the outage and the part after the relist equal the
/// simulator's history exactly, the bridged stretch leaves each watcher at exactly the
/// simulator's state, each key at most once there (twice for a delete-and-recreate).
async fn bridged_rig() -> Rig {
    let mut rig = Rig::new().await;
    rig.writer.burst(10);
    rig.proxy_caught_up().await;
    let before_outage = rig.writer.revision();
    let history: Vec<Vec<Seen>> = rig
        .watchers
        .iter()
        .enumerate()
        .map(|(i, (s, _))| expected_events(&rig.sim, s, rig.from[i], before_outage))
        .collect();
    let pre_state: Vec<State> = rig
        .watchers
        .iter()
        .map(|(s, _)| sim_state(&rig.sim, s, Some(before_outage)))
        .collect();
    let (lists, watches) = (
        stat(&rig.sim, "listRequests"),
        stat(&rig.sim, "watchRequests"),
    );

    rig.sim
        .faults()
        .refuse_connections_for(Duration::from_millis(1500));
    // Once the simulator's watch stream is gone, changes the proxy can only learn by relisting.
    rig.wait_no_upstream_watch().await;
    rig.writer.burst(40);
    let compacted = rig.sim.store().compact_now();
    let deadline = Instant::now() + DEADLINE;
    while rig.cache.counters.relists_bridged.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the proxy did not relist and bridge (relists reset: {})",
            rig.cache.counters.relists_reset.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(rig.cache.counters.relists_bridged.load(Ordering::SeqCst), 1);
    assert_eq!(stat(&rig.sim, "listRequests"), lists + 1, "one relist");
    // The re-watch answered with 410 and the watch from the relist (which follows the bridge).
    rig.stat_above("watchRequests", watches + 1).await;
    assert_eq!(stat(&rig.sim, "watchRequests"), watches + 2);
    // Nothing was written after the compaction, so the relist was at `compacted`.
    rig.converge("bridged relist").await;

    rig.bridged = (before_outage, compacted);
    rig.writer.burst(10);
    rig.converge("after the bridge").await;
    let after_bridge: Vec<Vec<Seen>> = rig
        .watchers
        .iter()
        .map(|(s, _)| expected_events(&rig.sim, s, compacted, u64::MAX))
        .collect();
    for (i, (scope, rec)) in rig.watchers.iter().enumerate() {
        let events = rec.events();
        let pre: Vec<Seen> = events
            .iter()
            .filter(|e| e.rv <= before_outage)
            .cloned()
            .collect();
        let bridge: Vec<Seen> = events
            .iter()
            .filter(|e| e.rv > before_outage && e.rv <= compacted)
            .cloned()
            .collect();
        let post: Vec<Seen> = events
            .iter()
            .filter(|e| e.rv > compacted)
            .cloned()
            .collect();
        assert_eq!(pre, history[i], "watcher {i} {scope:?} before the outage");
        assert_eq!(
            post, after_bridge[i],
            "watcher {i} {scope:?} after the bridge"
        );
        // The bridge takes each watcher from its state before the outage to the simulator's
        // state at the relist, one event per changed key (a recreated key: DELETED, ADDED).
        let at_relist = sim_state(&rig.sim, scope, Some(compacted));
        let bridged = fold(pre_state[i].clone(), before_outage, &bridge)
            .unwrap_or_else(|e| panic!("watcher {i} {scope:?} bridge: {e}"));
        assert_eq!(bridged, at_relist, "watcher {i} {scope:?} at the relist");
        let mut per_key: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for e in &bridge {
            per_key.entry(&e.key).or_default().push(&e.ty);
        }
        for (k, tys) in &per_key {
            let recreated = pre_state[i].get(*k).map(|x| &x.1) != at_relist.get(*k).map(|x| &x.1)
                && pre_state[i].contains_key(*k)
                && at_relist.contains_key(*k);
            let ok = if recreated {
                *tys == ["DELETED", "ADDED"]
            } else {
                tys.len() == 1
            };
            assert!(ok, "watcher {i} {scope:?}: bridge events for {k}: {tys:?}");
        }
        let changed = pre_state[i]
            .keys()
            .chain(at_relist.keys())
            .filter(|k| pre_state[i].get(*k) != at_relist.get(*k))
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(
            per_key.len(),
            changed.len(),
            "watcher {i} {scope:?}: one bridge event per changed key"
        );
        eprintln!(
            "watcher {i}: {} before, {} bridged, {} after the relist",
            pre.len(),
            bridge.len(),
            post.len()
        );
    }
    rig
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_during_outage_is_bridged_without_closing_watchers() {
    let mut rig = bridged_rig().await;
    rig.sentinels("bridged").await;
    rig.assert_no_closures();
    assert_eq!(rig.cache.counters.relists_bridged.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_bridge_from_any_sent_resource_version() {
    let mut rig = bridged_rig().await;
    rig.sentinels("bridged").await;
    // A write elsewhere moves the revision past the last pod event, so the upstream bookmark
    // advances the proxy's pods RV and the watchers that asked for bookmarks get one.
    let cm = rig
        .sim
        .ops()
        .create(
            &rig.sim.resource("", "v1", "configmaps").unwrap(),
            Some("default"),
            json!({"metadata": {"name": "elsewhere"}}),
            false,
        )
        .expect("configmap")
        .rv;
    let deadline = Instant::now() + DEADLINE;
    for (scope, rec) in rig.watchers.iter().filter(|(s, _)| s.bookmarks) {
        while !rec.seen().iter().any(|e| e.ty == "BOOKMARK" && e.rv >= cm) {
            assert!(
                Instant::now() < deadline,
                "{scope:?} got no bookmark at or after {cm}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Clients that disconnect now and re-watch from any RV they were sent (events and
    // bookmarks, before and after the bridge, and its last event) replay exactly what followed
    // it; from strictly inside the bridge's range they get 410 (the bridge events' RVs are also
    // real revisions a client may have read upstream, where the state is not the bridge's).
    let (old_rv, list_rv) = rig.bridged;
    let mut resumes = Vec::new();
    let mut gap_resumes = 0;
    for (w, (scope, rec)) in rig
        .watchers
        .iter()
        .enumerate()
        .filter(|(_, (s, _))| s.bookmarks)
        .take(2)
    {
        let seen = rec.seen();
        assert!(
            seen.iter().any(|e| e.ty == "BOOKMARK"),
            "{scope:?} was sent bookmarks"
        );
        let initial = rig.initial[w].clone();
        for (i, e) in seen.iter().enumerate() {
            let stream = crate::common::watch(&scope.url(&rig.proxy.url, e.rv)).await;
            if old_rv < e.rv && e.rv < list_rv {
                let rec = Recorder::start(stream);
                let deadline = Instant::now() + DEADLINE;
                while rec.end.lock().is_none() {
                    assert!(
                        Instant::now() < deadline,
                        "resume of {scope:?} from {}: no end",
                        e.rv
                    );
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let got: Vec<(String, String)> =
                    rec.seen().into_iter().map(|s| (s.ty, s.key)).collect();
                assert_eq!(
                    got,
                    [("ERROR".to_string(), "410".to_string())],
                    "resume of {scope:?} from {} inside ({old_rv}, {list_rv})",
                    e.rv
                );
                gap_resumes += 1;
                continue;
            }
            let at = fold(initial.clone(), rig.from[w], &seen[..=i]).expect("valid prefix");
            resumes.push((scope.clone(), e.rv, at, Recorder::start(stream)));
            // The cluster keeps changing while the resumed watchers catch up and go live.
            if resumes.len() % 4 == 0 {
                rig.writer.step();
            }
        }
    }
    let deadline = Instant::now() + DEADLINE;
    for (scope, rv, at, rec) in &resumes {
        let want = sim_state(&rig.sim, scope, None);
        loop {
            if let Some(end) = rec.end.lock().clone() {
                panic!("resume of {scope:?} from {rv}: stream stopped: {end}");
            }
            let got = fold(at.clone(), *rv, &rec.seen())
                .unwrap_or_else(|e| panic!("resume of {scope:?} from {rv}: {e}"));
            if got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "resume of {scope:?} from {rv} did not converge: got {got:?}, want {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert!(gap_resumes > 0, "some resumes were from inside the bridge");
    eprintln!(
        "{} resumed watches converged, {gap_resumes} from inside the bridge got 410",
        resumes.len()
    );
    assert_eq!(
        rig.cache.watcher_count(),
        rig.watchers.len() + resumes.len(),
        "every resumed watch is registered"
    );
    // The clients go away; the proxy deregisters their watchers (nothing is written meanwhile,
    // so it must notice the closed connections by itself).
    drop(resumes);
    let deadline = Instant::now() + DEADLINE;
    while rig.cache.watcher_count() != rig.watchers.len() {
        assert!(
            Instant::now() < deadline,
            "{} watchers still registered after their clients left",
            rig.cache.watcher_count()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rig.assert_no_closures();
}

/// With a one-event queue, every watcher keeps falling behind (reading the shared log from
/// its cursor) and going live again while writes keep landing, and the upstream watch is
/// dropped in the middle: nothing may fall between the two delivery modes. The storm lasts past
/// the drop and until the selective watchers got several bookmarks, so bookmark ticks meet queued events
/// (a bookmark must never overtake an event still queued for the watcher).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_switching_between_log_and_live_delivery_lose_nothing() {
    let mut rig = Rig::with(|c| c.cache.watcher_queue = 1).await;
    let rv = rig.from[0];
    for scope in SCOPES {
        rig.add_watcher(scope, rv).await;
    }
    let bookmarks = |rig: &Rig| {
        rig.watchers
            .iter()
            .filter(|(s, _)| s.bookmarks && (s.namespace.is_some() || !s.labels.is_empty()))
            .map(|(_, r)| r.seen().iter().filter(|e| e.ty == "BOOKMARK").count())
            .min()
            .unwrap_or(0)
    };
    let deadline = Instant::now() + DEADLINE;
    let mut rounds = 0;
    // The storm goes on past the dropped upstream watch however fast the rounds go (under load
    // the bookmark ticks could otherwise end it before round 200).
    while rounds <= 200 || bookmarks(&rig) < 3 {
        assert!(
            Instant::now() < deadline,
            "selective watchers got no bookmarks"
        );
        for _ in 0..4 {
            rig.writer.step();
        }
        rounds += 1;
        if rounds == 200 {
            rig.sim.faults().drop_watches();
        }
        // Pacing, so the storm spans bookmark ticks without growing huge.
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    assert!(rounds > 200, "the upstream watch was dropped mid-storm");
    rig.finish_exact("queue of one").await;
}

// ---------------------------------------------------------------------------------------------
// A client that stops reading
// ---------------------------------------------------------------------------------------------

/// Reads one HTTP/1.1 chunked response from `buf`+`sock` until its last chunk; returns the
/// body's lines, or how it failed.
async fn read_chunked_to_end(sock: &mut tokio::net::TcpStream, deadline: Instant) -> Vec<Vec<u8>> {
    let mut raw = Vec::new();
    let mut tmp = vec![0u8; 1 << 16];
    // Headers.
    let body_start = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = tokio::time::timeout_at(deadline, sock.read(&mut tmp))
            .await
            .expect("headers in time")
            .expect("read");
        assert!(n > 0, "connection closed before the headers");
        raw.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..body_start]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "status line: {head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let mut pos = body_start;
    let mut body = Vec::new();
    loop {
        // Need a full size line, then the chunk and its CRLF.
        let parsed = raw[pos..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .and_then(|i| {
                let size = usize::from_str_radix(std::str::from_utf8(&raw[pos..pos + i]).ok()?, 16)
                    .expect("chunk size");
                let start = pos + i + 2;
                (raw.len() >= start + size + 2).then_some((size, start))
            });
        match parsed {
            Some((0, _)) => break,
            Some((size, start)) => {
                body.extend_from_slice(&raw[start..start + size]);
                pos = start + size + 2;
            }
            None => {
                let n = tokio::time::timeout_at(deadline, sock.read(&mut tmp))
                    .await
                    .expect("the slow client's stream ends in time")
                    .expect("read");
                assert!(n > 0, "connection closed without the last chunk");
                raw.extend_from_slice(&tmp[..n]);
            }
        }
    }
    body.split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_closed_and_others_get_everything() {
    let sim = crate::common::sim().await;
    let proxy = crate::common::proxy_for(&sim, |c| {
        c.cache.watcher_queue = 8;
        c.cache.watcher_max_lag_bytes = 65536;
    })
    .await;
    let cache = proxy
        .proxy
        .cache("", "v1", "configmaps")
        .expect("configmaps cache");
    let cm = sim.resource("", "v1", "configmaps").unwrap();
    let start_rv = cache.rv();

    // The slow client: a raw connection with a small receive buffer that never reads.
    let addr = proxy.url.trim_start_matches("http://").parse().unwrap();
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut slow = sock.connect(addr).await.expect("connect");
    slow.write_all(
        b"GET /api/v1/configmaps?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: watchmux\r\n\r\n",
    )
    .await
    .unwrap();
    // A reading watcher of the same resource.
    let reader = Recorder::start(
        crate::common::watch(&format!(
            "{}/api/v1/configmaps?watch=1&resourceVersion={start_rv}",
            proxy.url
        ))
        .await,
    );
    let deadline = Instant::now() + DEADLINE;
    while cache.watcher_count() < 2 {
        assert!(Instant::now() < deadline, "both watchers registered");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // ~4 KB objects, a few at a time, each batch delivered to the reader before the next (so
    // the reader never lags by more than the bound), until the hub closes the slow client.
    let payload = "x".repeat(4000);
    let mut written: Vec<(String, u64)> = Vec::new();
    let mut at_close = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while written.len() < 40_000 {
        for _ in 0..4 {
            let name = format!("big-{}", written.len());
            let o = sim
                .ops()
                .create(
                    &cm,
                    Some("default"),
                    json!({"metadata": {"name": name}, "data": {"payload": payload}}),
                    false,
                )
                .expect("configmap");
            written.push((format!("default/{name}"), o.rv));
        }
        let last = written.last().unwrap().1;
        while reader.seen.lock().last().map(|e| e.rv) != Some(last) {
            assert!(
                reader.end.lock().is_none(),
                "the reading watcher was closed"
            );
            assert!(
                Instant::now() < deadline,
                "the reading watcher stalled at {:?} (want {last})",
                reader.seen.lock().last()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let closed = cache.counters.slow_watchers_closed.load(Ordering::SeqCst);
        if closed > 0 && at_close.is_none() {
            at_close = Some(written.len());
            // Keep writing a little: the reader must be unaffected by the closure.
        }
        if at_close.is_some_and(|n| written.len() >= n + 40) {
            break;
        }
    }
    let at_close = at_close.unwrap_or_else(|| {
        panic!(
            "the slow client was not closed after {} objects ({} MB)",
            written.len(),
            written.len() * 4 / 1000
        )
    });
    assert_eq!(
        cache.counters.slow_watchers_closed.load(Ordering::SeqCst),
        1,
        "exactly the slow client was closed"
    );
    assert!(
        reader.end.lock().is_none(),
        "the reading watcher stays open"
    );
    assert_eq!(cache.watcher_count(), 1, "only the reading watcher remains");

    // The reader got every object exactly once, in order.
    let got: Vec<(String, u64)> = reader
        .seen()
        .iter()
        .map(|e| {
            assert_eq!(e.ty, "ADDED");
            (e.key.clone(), e.rv)
        })
        .collect();
    assert!(
        got == written,
        "the reader's events differ from what was written"
    );

    // The slow client's stream ends cleanly (last chunk, no ERROR) after a gap-free, ordered
    // prefix of the events: what was buffered when it was closed.
    let lines = read_chunked_to_end(&mut slow, Instant::now() + DEADLINE).await;
    let slow_seen: Vec<Seen> = lines.iter().map(|l| Seen::parse(l)).collect();
    assert!(
        slow_seen.iter().all(|e| e.ty == "ADDED"),
        "only events, no ERROR: {:?}",
        slow_seen.iter().find(|e| e.ty != "ADDED")
    );
    let prefix: Vec<(String, u64)> = slow_seen.iter().map(|e| (e.key.clone(), e.rv)).collect();
    assert!(
        prefix.len() < written.len() && prefix[..] == written[..prefix.len()],
        "the slow client got a gap-free prefix ({} of {} events)",
        prefix.len(),
        written.len()
    );
    eprintln!(
        "slow client closed after {at_close} objects written (~{} KiB); it had been sent {} \
         events (~{} KiB) buffered between the proxy and its socket; the reader got all {}",
        at_close * 4,
        prefix.len(),
        lines.iter().map(Vec::len).sum::<usize>() / 1024,
        written.len()
    );
}
