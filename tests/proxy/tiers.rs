//! Tiers: watchmux in front of watchmux. Three levels — the simulator, a regional watchmux in
//! front of it, an edge watchmux in front of the regional one — with clients at the edge:
//! kube-rs reflectors (list-watch and streaming list), raw watches whose every line is checked
//! (resourceVersions strictly increasing, no duplicate, no gap: ADDED only for an absent object,
//! MODIFIED and DELETED only for a present one) and kubectl.
//!
//! Under churn every client converges to the simulator's state, and the simulator serves only
//! the regional tier: one watch and one LIST per resource, plus the regional tier's freshness
//! checks of the consistent reads the edge makes (at most one per consistent read of the
//! edge's); the regional tier answers every read of the edge from its cache, the edge's paged
//! LISTs included (five objects a page, through the regional tier's continue tokens).
//!
//! Faults at each level: the simulator drops watches, fails re-watches, answers 410 and goes
//! away while history is compacted (the regional tier relists and bridges, the edge never
//! relists); the connections between the tiers are cut, once right after the regional tier
//! bridged a relist (its bookmark at the list's resourceVersion lets the edge resume from
//! outside the bridged gap, without a relist); the edge restarts (its clients resume where they
//! were); the regional tier restarts cleanly with `cache.persist_dir` (the edge does not
//! relist) or is killed and comes back with the tail of its log lost (the edge relists what it
//! cannot resume, bridged for its own clients, and converges).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::watcher::{self};
use kube_sim::kinds::ResourceType;
use kube_sim::semantics::DeleteOptions;
use kube_sim::{SimState, Simulator};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::common::Informer;
use crate::common::kubectl::{kubectl, run};
use crate::common::recorder::{Recorder, list_at, state_of};
use crate::common::watch_log::{self, Seen, State};
use crate::common::{ANY_PORT, Relay, TestProxy, proxy_at, proxy_for, sim};

/// The resources the test proxies cache (`TEST_CACHE`).
const CACHED: [&str; 4] = ["pods", "nodes", "namespaces", "configmaps"];

/// The resources the writer changes (and the edge's raw watchers follow).
const WRITTEN: [&str; 2] = ["pods", "configmaps"];

/// How long any awaited condition may take.
const DEADLINE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// The simulator side: its state and history, a writer
// ---------------------------------------------------------------------------------------------

fn rt(sim: &Simulator, resource: &str) -> Arc<ResourceType> {
    sim.resource("", "v1", resource).expect("served")
}

/// The simulator's `resource` objects now.
fn sim_state(sim: &Simulator, resource: &str) -> State {
    watch_log::sim_state(sim, &rt(sim, resource), None, &|_| true)
}

/// The simulator's `resource` objects at revision `at` (inside its history).
fn sim_state_at(sim: &Simulator, resource: &str, at: u64) -> State {
    watch_log::sim_state(sim, &rt(sim, resource), Some(at), &|_| true)
}

/// The simulator's events of `resource` in `(after, until]`, as a watcher of everything gets them.
fn sim_history(sim: &Simulator, resource: &str, after: u64, until: u64) -> Vec<Seen> {
    watch_log::sim_events(sim, &rt(sim, resource), after, until, &|_| true)
}

/// A counter of the simulator's, for `resource`.
fn stat(sim: &Simulator, resource: &str, key: &str) -> u64 {
    sim.stats()["resources"][resource][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no stat {resource}.{key}"))
}

/// Names and resourceVersions only (what kube-rs stores and kubectl prints).
fn rvs(s: &State) -> BTreeMap<String, String> {
    s.iter()
        .map(|(k, (rv, _))| (k.clone(), rv.to_string()))
        .collect()
}

/// Pod and configmap writes, one at a time: creates, label and data changes, deletes, and a
/// delete-then-create under the same name (a new uid). Nothing else writes them.
struct Writer {
    state: Arc<SimState>,
    pods: Arc<ResourceType>,
    cms: Arc<ResourceType>,
    rng: StdRng,
    live: Vec<(bool, String, String)>,
    n: usize,
}

impl Writer {
    /// A writer that starts with 12 pods and 6 configmaps.
    fn new(sim: &Simulator, seed: u64) -> Writer {
        let mut w = Writer {
            state: sim.state().clone(),
            pods: rt(sim, "pods"),
            cms: rt(sim, "configmaps"),
            rng: StdRng::seed_from_u64(seed),
            live: Vec::new(),
            n: 0,
        };
        for i in 0..18 {
            w.create(i % 3 != 2);
        }
        w
    }

    fn revision(&self) -> u64 {
        self.state.store.revision()
    }

    fn create_named(&mut self, pod: bool, ns: &str, name: &str) {
        let app = ["web", "db"][self.rng.random_range(0..2)];
        let (rt, obj) = if pod {
            (
                &self.pods,
                crate::common::pod(name, "node-a", json!({ "app": app })),
            )
        } else {
            (
                &self.cms,
                json!({"metadata": {"name": name, "labels": {"app": app}}, "data": {"k": "0"}}),
            )
        };
        self.state
            .ops
            .create(rt, Some(ns), obj, false)
            .expect("create");
    }

    fn create(&mut self, pod: bool) {
        self.n += 1;
        let ns = ["default", "kube-public"][self.rng.random_range(0..2)].to_string();
        let name = format!("w-{}", self.n);
        self.create_named(pod, &ns, &name);
        self.live.push((pod, ns, name));
    }

    fn rt(&self, pod: bool) -> &Arc<ResourceType> {
        if pod { &self.pods } else { &self.cms }
    }

    fn delete(&self, pod: bool, ns: &str, name: &str) {
        let now = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let r = self
            .state
            .ops
            .delete(self.rt(pod), Some(ns), name, &now)
            .expect("delete");
        assert!(r.deleted);
    }

    /// One write (two for delete-and-recreate).
    fn step(&mut self) {
        if self.live.len() < 8 {
            let pod = self.rng.random_bool(0.5);
            return self.create(pod);
        }
        let i = self.rng.random_range(0..self.live.len());
        let (pod, ns, name) = self.live[i].clone();
        match self.rng.random_range(0..10) {
            0 | 1 => {
                let pod = self.rng.random_bool(0.6);
                self.create(pod);
            }
            2..=5 => {
                let t = self.rng.random::<u32>().to_string();
                self.state
                    .ops
                    .modify(self.rt(pod), Some(&ns), &name, |v| {
                        if pod {
                            v["metadata"]["annotations"] = json!({ "touch": t });
                        } else {
                            v["data"]["k"] = json!(t);
                        }
                    })
                    .expect("modify");
            }
            6..=8 => {
                self.delete(pod, &ns, &name);
                self.live.swap_remove(i);
            }
            _ => {
                self.delete(pod, &ns, &name);
                self.create_named(pod, &ns, &name);
            }
        }
    }

    /// `n` writes; the simulator's revision after them.
    fn burst(&mut self, n: usize) -> u64 {
        for _ in 0..n {
            self.step();
        }
        self.revision()
    }

    /// Creates `n` objects of each kind, named `{prefix}-…`: the ones a test deletes later.
    fn create_batch(&mut self, prefix: &str, n: usize) -> Vec<(bool, String)> {
        let mut made = Vec::new();
        for i in 0..n {
            for pod in [true, false] {
                let name = format!("{prefix}-{i}");
                self.create_named(pod, "default", &name);
                made.push((pod, name));
            }
        }
        made
    }
}

/// The writer at a fixed rate in the background until stopped.
struct Churn {
    stop: CancellationToken,
    writes: Arc<AtomicU64>,
    task: JoinHandle<Writer>,
}

impl Churn {
    fn start(mut w: Writer, per_second: f64) -> Churn {
        let stop = CancellationToken::new();
        let writes = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), writes.clone());
        let task = tokio::spawn(async move {
            let tick = Duration::from_millis(20);
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut budget = 0.0;
            loop {
                tokio::select! {
                    _ = s.cancelled() => return w,
                    _ = interval.tick() => {}
                }
                budget += per_second * tick.as_secs_f64();
                while budget >= 1.0 {
                    budget -= 1.0;
                    w.step();
                    n.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Churn { stop, writes, task }
    }

    /// Waits until `n` more writes happened (the writer counts ticks, so it slows down with a
    /// busy machine; the deadline only catches one that stopped).
    async fn wait_writes(&self, n: u64) {
        let target = self.writes.load(Ordering::SeqCst) + n;
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.writes.load(Ordering::SeqCst) < target {
            assert!(Instant::now() < deadline, "churn made no progress");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(self) -> Writer {
        self.stop.cancel();
        self.task.await.expect("churn task")
    }
}

// ---------------------------------------------------------------------------------------------
// Clients at the edge
// ---------------------------------------------------------------------------------------------

/// `kubectl get {resource} -A -o json` at `server`.
async fn kubectl_list(server: &str, resource: &str) -> State {
    let home = tempfile::tempdir().unwrap();
    let mut c = kubectl(server, &home);
    c.args(["get", resource, "-A", "-o", "json"]);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl get {resource} at {server}: {err}");
    let v: Value = serde_json::from_str(&out).expect("kubectl JSON");
    state_of(&v["items"])
}

// ---------------------------------------------------------------------------------------------
// The tiers
// ---------------------------------------------------------------------------------------------

/// Something whose metrics can be read: a running tier, or the scrape of one that stopped.
trait Scrape {
    /// The Prometheus text.
    fn text(&self) -> String;
}

impl Scrape for TestProxy {
    fn text(&self) -> String {
        self.proxy.metrics.render()
    }
}

impl Scrape for String {
    fn text(&self) -> String {
        self.clone()
    }
}

/// The sum of the series of metric `name` at `px` whose labels contain every one of `has`.
fn metric(px: &(impl Scrape + ?Sized), name: &str, has: &[&str]) -> u64 {
    px.text()
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && has.iter().all(|h| l.contains(h)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// `resource="…"` for [`metric`].
fn res(r: &str) -> String {
    format!("resource=\"{r}\"")
}

/// LISTs of a whole resource a tier made, by reason (`initial`, `expired`, `restored`, …).
fn relists(px: &TestProxy, r: &str) -> BTreeMap<String, u64> {
    px.proxy
        .metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("watchmux_upstream_relists_total{") && l.contains(&res(r)))
        .filter_map(|l| {
            let reason = l.split("reason=\"").nth(1)?.split('"').next()?.to_string();
            let n = l.rsplit(' ').next()?.parse::<f64>().ok()? as u64;
            (n > 0).then_some((reason, n))
        })
        .collect()
}

/// Waits until `px`'s cache of every written resource holds the simulator's state (read from
/// the cache in-process: no request that would count as a read of the tier's).
async fn caught_up(sim: &Simulator, px: &TestProxy, what: &str) {
    let deadline = Instant::now() + DEADLINE;
    for r in WRITTEN {
        let cache = px.proxy.cache("", "v1", r).expect("cache");
        loop {
            let got: State = cache
                .snapshot()
                .objects
                .values()
                .map(|o| {
                    let m = &o.rec;
                    (format!("{}/{}", m.namespace, m.name), (m.rv, m.uid.clone()))
                })
                .collect();
            let want = sim_state(sim, r);
            if got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {r} at {} holds {:?} more and misses {:?}",
                px.url,
                diff(&got, &want),
                diff(&want, &got)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Waits until every recorder's lines and every informer lead to the simulator's state; fails
/// at once on a broken stream (duplicate, gap, order, ERROR).
async fn converge(
    sim: &Simulator,
    recorders: &[&Recorder],
    pods: &[&Informer<Pod>],
    cms: &[&Informer<ConfigMap>],
    what: &str,
) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let want: BTreeMap<&str, State> = WRITTEN.iter().map(|r| (*r, sim_state(sim, r))).collect();
        let mut behind = Vec::new();
        for rec in recorders {
            let got = rec
                .state()
                .unwrap_or_else(|e| panic!("{what}: the edge's {} watch: {e}", rec.resource));
            if got != want[rec.resource] {
                behind.push(format!(
                    "{} watch: {:?} versus {:?}",
                    rec.resource,
                    diff(&got, &want[rec.resource]),
                    diff(&want[rec.resource], &got)
                ));
            }
        }
        for (i, p) in pods.iter().enumerate() {
            if p.state() != rvs(&want["pods"]) {
                behind.push(format!("pods informer {i} (errors {:?})", p.errors.lock()));
            }
        }
        for (i, c) in cms.iter().enumerate() {
            if c.state() != rvs(&want["configmaps"]) {
                behind.push(format!(
                    "configmaps informer {i} (errors {:?})",
                    c.errors.lock()
                ));
            }
        }
        if behind.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not converged within 30 s: {behind:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What `a` holds that `b` does not (or holds differently).
fn diff(a: &State, b: &State) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}@{}", v.0))
        .collect()
}

/// Waits until the simulator has exactly one open watch per cached resource: the regional
/// tier's (the freshness checks' short watches end within seconds).
async fn one_upstream_watch_each(sim: &Simulator) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let open: Vec<u64> = CACHED.iter().map(|r| stat(sim, r, "openWatches")).collect();
        if open.iter().all(|&n| n == 1) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "open upstream watches {CACHED:?} = {open:?}, want one each"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Requests a tier made of its upstream for `r` that it may not have counted: a freshness check
/// that ended without its short watch (the cache's own watch caught up first, or the check ran
/// out of time) drops that watch, and a request dropped before its answer came is counted
/// nowhere (`Freshness::replay` counts a request when its answer arrives).
fn uncounted_bound(px: &(impl Scrape + ?Sized), r: &str) -> u64 {
    metric(
        px,
        "watchmux_freshness_checks_total",
        &[&res(r), "outcome=\"caught_up\""],
    ) + metric(
        px,
        "watchmux_freshness_checks_total",
        &[&res(r), "outcome=\"failed\""],
    )
}

/// The lines of `px`'s upstream request and freshness metrics for `r` (for failure messages).
fn upstream_detail(px: &(impl Scrape + ?Sized), r: &str) -> String {
    px.text()
        .lines()
        .filter(|l| {
            (l.starts_with("watchmux_upstream_requests_total{")
                || l.starts_with("watchmux_freshness_checks_total{"))
                && l.contains(&res(r))
                && !l.ends_with(" 0")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What reached the simulator is the regional tier's doing only: per cached resource, its LISTs
/// and watches are the regional reflector's and freshness checks' requests, and the regional
/// tier passed none of the edge's reads through. `earlier` are the scrapes of the regional
/// tiers that ran before `regional` (a restart). Returns (LISTs, watches) per resource.
fn only_the_regional_tier_reached_the_simulator(
    sim: &Simulator,
    regional: &TestProxy,
    earlier: &[String],
    what: &str,
) -> BTreeMap<&'static str, (u64, u64)> {
    let mut tiers: Vec<&dyn Scrape> = vec![regional];
    tiers.extend(earlier.iter().map(|s| s as &dyn Scrape));
    let mut seen = BTreeMap::new();
    for r in CACHED {
        let (lists, watches) = (stat(sim, r, "listRequests"), stat(sim, r, "watchRequests"));
        let (mut made, mut uncounted) = (0, 0);
        for t in &tiers {
            // Requests the simulator answered as an API request: not those that got no
            // answer, nor those its fault switches answered 500 or 429 before reading them.
            made += metric(*t, "watchmux_upstream_requests_total", &[&res(r)])
                - ["error", "429", "500"]
                    .iter()
                    .map(|c| {
                        metric(
                            *t,
                            "watchmux_upstream_requests_total",
                            &[&res(r), &format!("code=\"{c}\"")],
                        )
                    })
                    .sum::<u64>();
            uncounted += uncounted_bound(*t, r);
            let passed = metric(
                *t,
                "watchmux_reads_total",
                &[&res(r), "source=\"pass_through\""],
            );
            assert_eq!(
                passed, 0,
                "{what}: {r}: the regional tier passed reads through to the simulator"
            );
        }
        let served = lists + watches;
        assert!(
            made <= served && served <= made + uncounted,
            "{what}: {r}: the simulator served {lists} LISTs and {watches} watches, the regional \
             tiers' reflectors and freshness checks made {made} requests:\n{}",
            tiers
                .iter()
                .map(|t| upstream_detail(*t, r))
                .collect::<Vec<_>>()
                .join("\n--\n")
        );
        seen.insert(r, (lists, watches));
    }
    seen
}

/// Every read the edge tier made of the regional one (its reflectors' LISTs and watches, its
/// freshness checks, what it passed through) was answered from the regional tier's cache.
fn the_regional_tier_answered_the_edge_from_its_cache(
    regional: &TestProxy,
    edge: &TestProxy,
    what: &str,
) {
    for r in CACHED {
        let asked = metric(edge, "watchmux_upstream_requests_total", &[&res(r)])
            + metric(
                edge,
                "watchmux_reads_total",
                &[&res(r), "source=\"pass_through\""],
            );
        let answered = metric(
            regional,
            "watchmux_reads_total",
            &[&res(r), "source=\"cache\""],
        );
        assert!(
            asked <= answered && answered <= asked + uncounted_bound(edge, r),
            "{what}: {r}: the edge asked the regional tier {asked} times, its cache answered \
             {answered}:\n{}\n{}",
            upstream_detail(edge, r),
            regional
                .text()
                .lines()
                .chain(edge.text().lines())
                .filter(|l| l.starts_with("watchmux_reads_total{")
                    && l.contains(&res(r))
                    && !l.ends_with(" 0"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The edge tier listed every resource exactly once (its initial sync, one page each).
fn the_edge_never_relisted(edge: &TestProxy, what: &str) {
    for r in CACHED {
        assert_eq!(
            relists(edge, r),
            BTreeMap::from([("initial".to_string(), 1)]),
            "{what}: the edge's LISTs of {r}"
        );
        assert_eq!(
            metric(
                edge,
                "watchmux_upstream_requests_total",
                &[&res(r), "verb=\"list\""]
            ),
            SYNC_PAGES[r],
            "{what}: the edge's LIST pages of {r}"
        );
    }
}

/// The edge's LIST page size: its sync pages through the regional tier's cache (continue
/// tokens the regional tier hands out and serves from its kept snapshots).
const EDGE_PAGE_SIZE: usize = 5;

/// The pages of the edge's sync, [`EDGE_PAGE_SIZE`] objects each: the writer's 12 pods and 6
/// configmaps, no node, the 4 system namespaces.
static SYNC_PAGES: std::sync::LazyLock<BTreeMap<&str, u64>> = std::sync::LazyLock::new(|| {
    BTreeMap::from([
        ("pods", 3),
        ("nodes", 1),
        ("namespaces", 1),
        ("configmaps", 2),
    ])
});

/// The raw watchers' events equal the simulator's history since they started, exactly (no
/// tier relisted, so nothing was summarised).
fn exact_history(sim: &Simulator, recorders: &[&Recorder], what: &str) {
    exact_history_until(sim, recorders, sim.store().revision(), what);
}

/// The raw watchers' events up to revision `until` equal the simulator's history, exactly
/// (what came after may be a relist's summary).
fn exact_history_until(sim: &Simulator, recorders: &[&Recorder], until: u64, what: &str) {
    exact_history_until_each(sim, recorders, |_| until, what);
}

/// [`exact_history_until`], up to a revision per resource.
fn exact_history_until_each(
    sim: &Simulator,
    recorders: &[&Recorder],
    until: impl Fn(&str) -> u64,
    what: &str,
) {
    for rec in recorders {
        let until = until(rec.resource);
        let events: Vec<Seen> = rec.events().into_iter().filter(|e| e.rv <= until).collect();
        assert_eq!(
            events,
            sim_history(sim, rec.resource, rec.from, until),
            "{what}: the edge's {} watch versus the simulator's history up to {until}",
            rec.resource
        );
    }
}

/// The simulator, the regional tier in front of it and the edge tier in front of that (through
/// `relay` when given), with a writer that has made some history.
async fn tiers(
    regional_config: impl FnOnce(&mut watchmux::config::Config),
    via_relay: bool,
    edge_config: impl FnOnce(&mut watchmux::config::Config),
) -> (Simulator, Writer, TestProxy, Option<Relay>, TestProxy) {
    let sim = sim().await;
    let mut writer = Writer::new(&sim, 7);
    let regional = proxy_for(&sim, regional_config).await;
    let relay = if via_relay {
        Some(Relay::start(&regional.url).await)
    } else {
        None
    };
    let upstream = relay.as_ref().map_or(&regional.url, |r| &r.url).clone();
    let edge = proxy_at(&upstream, ANY_PORT, |c| {
        c.cache.list_page_size = EDGE_PAGE_SIZE;
        edge_config(c);
    })
    .await;
    writer.burst(10);
    caught_up(&sim, &edge, "the edge's sync").await;
    (sim, writer, regional, relay, edge)
}

// ---------------------------------------------------------------------------------------------
// The scenarios
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tiers_converge_under_churn_and_only_the_regional_tier_reaches_the_upstream() {
    let (sim, writer, regional, _, edge) = tiers(|_| {}, false, |_| {}).await;
    // Clients start at the edge while the cluster churns: consistent list-watch (kube-rs's
    // default), a streaming list, raw watches, kubectl.
    let churn = Churn::start(writer, 60.0);
    churn.wait_writes(10).await;
    let pods_lw = Informer::<Pod>::start(&edge.url, watcher::Config::default());
    let pods_sl = Informer::<Pod>::start(&edge.url, watcher::Config::default().streaming_lists());
    let cms_lw = Informer::<ConfigMap>::start(&edge.url, watcher::Config::default());
    let rec_pods = Recorder::start(&edge.url, "pods").await;
    let rec_cms = Recorder::start(&edge.url, "configmaps").await;
    pods_lw.ready().await;
    pods_sl.ready().await;
    cms_lw.ready().await;
    churn.wait_writes(30).await;
    // A consistent LIST at the edge, under churn, is the simulator's state at its
    // resourceVersion, which is at least the simulator's when the LIST was sent.
    for r in WRITTEN {
        let before = sim.store().revision();
        let (rv, got) = list_at(&edge.url, r).await;
        assert!(
            rv >= before,
            "{r}: a consistent LIST at the edge at {rv}, before it {before}"
        );
        assert_eq!(
            got,
            sim_state_at(&sim, r, rv),
            "{r}: the edge's LIST at {rv}"
        );
    }
    churn.wait_writes(30).await;
    let _writer = churn.stop().await;
    let recorders = [&rec_pods, &rec_cms];
    converge(
        &sim,
        &recorders,
        &[&pods_lw, &pods_sl],
        &[&cms_lw],
        "under churn",
    )
    .await;
    exact_history(&sim, &recorders, "under churn");
    for r in WRITTEN {
        let got = kubectl_list(&edge.url, r).await;
        assert_eq!(got, sim_state(&sim, r), "kubectl get {r} at the edge");
    }

    one_upstream_watch_each(&sim).await;
    let counts = only_the_regional_tier_reached_the_simulator(&sim, &regional, &[], "under churn");
    the_regional_tier_answered_the_edge_from_its_cache(&regional, &edge, "under churn");
    the_edge_never_relisted(&edge, "under churn");
    for r in CACHED {
        assert_eq!(
            relists(&regional, r),
            BTreeMap::from([("initial".to_string(), 1)]),
            "the regional tier's LISTs of {r}"
        );
        // One LIST for the regional tier's sync; every other one a freshness check's: one item,
        // or the metadata, or both when the cache was behind (no full LIST: see
        // `only_the_regional_tier_reached_the_simulator`).
        let checks = metric(&regional, "watchmux_freshness_checks_total", &[&res(r)]);
        assert!(
            (1 + checks..=1 + 2 * checks).contains(&counts[r].0),
            "{r}: {} LISTs at the simulator for {checks} checks",
            counts[r].0
        );
        // The regional tier checks only for the edge's consistent reads: the first page of
        // each of the edge's LISTs, each freshness check of the edge's (one or two LISTs: one
        // item, the metadata), and a consistent read the edge passed through; readers that
        // wait together share one.
        let edge_consistent = relists(&edge, r).values().sum::<u64>()
            + 2 * metric(&edge, "watchmux_freshness_checks_total", &[&res(r)])
            + metric(
                &edge,
                "watchmux_reads_total",
                &[&res(r), "source=\"pass_through\""],
            );
        assert!(
            checks <= edge_consistent,
            "{r}: {checks} checks at the regional tier for {edge_consistent} consistent reads \
             of the edge's"
        );
        assert_eq!(
            metric(
                &regional,
                "watchmux_upstream_requests_total",
                &[&res(r), "verb=\"watch\""]
            ),
            1,
            "{r}: one watch of the regional tier's reflector"
        );
    }
    for (i, e) in [
        pods_lw.errors.lock().clone(),
        pods_sl.errors.lock().clone(),
        cms_lw.errors.lock().clone(),
    ]
    .iter()
    .enumerate()
    {
        assert!(e.is_empty(), "informer {i}: {e:?}");
    }
    assert_eq!(
        [&pods_lw.inits, &pods_sl.inits, &cms_lw.inits].map(|i| i.load(Ordering::SeqCst)),
        [1, 1, 1],
        "no informer relisted"
    );
    eprintln!(
        "three tiers under churn: the simulator served (LISTs, watches) {counts:?}; regional \
         freshness checks {:?}",
        CACHED.map(|r| metric(&regional, "watchmux_freshness_checks_total", &[&res(r)]))
    );
}

/// Waits until the simulator's `resource` counter `key` exceeds `before`.
async fn stat_above(sim: &Simulator, resource: &str, key: &str, before: u64, what: &str) {
    let deadline = Instant::now() + DEADLINE;
    while stat(sim, resource, key) <= before {
        assert!(
            Instant::now() < deadline,
            "{what}: {resource} {key} stayed at {before}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the regional tier relisted `r` once more than `before` said, bridged.
async fn regional_relisted(regional: &TestProxy, r: &str, before: u64, what: &str) {
    let cache = regional.proxy.cache("", "v1", r).expect("cache");
    let deadline = Instant::now() + DEADLINE;
    while cache.counters.relists_bridged.load(Ordering::SeqCst) <= before {
        assert!(
            Instant::now() < deadline,
            "{what}: the regional tier did not relist {r}: {:?}\n{}",
            CACHED.map(|r| relists(regional, r)),
            upstream_detail(regional, r)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        cache.counters.relists_reset.load(Ordering::SeqCst),
        0,
        "{what}: the regional tier's relist of {r} was bridged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_faults_are_absorbed_by_the_regional_tier() {
    let (sim, mut writer, regional, _, edge) = tiers(|_| {}, false, |_| {}).await;
    let pods = Informer::<Pod>::start(&edge.url, watcher::Config::default());
    let rec_pods = Recorder::start(&edge.url, "pods").await;
    let rec_cms = Recorder::start(&edge.url, "configmaps").await;
    pods.ready().await;
    let recorders = [&rec_pods, &rec_cms];
    let bridged = |r: &str| {
        regional
            .proxy
            .cache("", "v1", r)
            .unwrap()
            .counters
            .relists_bridged
            .load(Ordering::SeqCst)
    };

    // Dropped watches: the regional tier re-watches from its last resourceVersion, writes made
    // meanwhile included.
    writer.burst(10);
    caught_up(&sim, &regional, "before the drop").await;
    let watches = stat(&sim, "pods", "watchRequests");
    sim.faults().drop_watches();
    writer.burst(10);
    stat_above(&sim, "pods", "watchRequests", watches, "after the drop").await;
    converge(&sim, &recorders, &[&pods], &[], "dropped watches").await;

    // Re-watches answered 500: the regional tier backs off and re-watches.
    {
        let code = 500;
        caught_up(&sim, &regional, "before the failing re-watches").await;
        sim.faults().fail_next(code, 2, 1, "/api/v1/pods");
        sim.faults().drop_watches();
        writer.burst(10);
        let deadline = Instant::now() + DEADLINE;
        while metric(
            &regional,
            "watchmux_upstream_requests_total",
            &[&res("pods"), &format!("code=\"{code}\"")],
        ) < 2
        {
            assert!(Instant::now() < deadline, "the {code}s were not served");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        converge(
            &sim,
            &recorders,
            &[&pods],
            &[],
            &format!("re-watches answered {code}"),
        )
        .await;
    }
    // Nothing so far needed more than the re-watch: the edge's streams are the simulator's
    // history, exactly.
    exact_history(&sim, &recorders, "re-watches");

    // A re-watch answered 410 (its resourceVersion compacted away): the regional tier relists
    // and bridges; the edge's watch of it stays open.
    // (The first re-watch of any resource gets it.)
    caught_up(&sim, &regional, "before the 410").await;
    let before: u64 = CACHED.map(bridged).iter().sum();
    sim.faults().expire_next_watches(1);
    sim.faults().drop_watches();
    writer.burst(10);
    let deadline = Instant::now() + DEADLINE;
    while CACHED.map(bridged).iter().sum::<u64>() == before {
        assert!(
            Instant::now() < deadline,
            "no relist after the 410: {:?}",
            CACHED.map(|r| relists(&regional, r))
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    converge(&sim, &recorders, &[&pods], &[], "410 on the re-watch").await;

    // An outage during which history is compacted: every re-watch gets 410 after it; the
    // regional tier relists each resource once and bridges.
    caught_up(&sim, &regional, "before the outage").await;
    let before = WRITTEN.map(bridged);
    sim.faults()
        .refuse_connections_for(Duration::from_millis(600));
    crate::common::upstream_watches_gone(&sim, &WRITTEN).await;
    writer.burst(30);
    sim.store().compact_now();
    for (r, b) in WRITTEN.iter().zip(before) {
        regional_relisted(&regional, r, b, "the outage with compaction").await;
    }
    writer.burst(10);
    converge(
        &sim,
        &recorders,
        &[&pods],
        &[],
        "the outage with compaction",
    )
    .await;

    // The edge never noticed: no relist, no broken or resumed stream, no informer relist.
    the_edge_never_relisted(&edge, "upstream faults");
    for rec in recorders {
        assert_eq!(
            rec.resumed(),
            0,
            "the edge's {} watch was never cut",
            rec.resource
        );
    }
    assert_eq!(
        pods.inits.load(Ordering::SeqCst),
        1,
        "the informer never relisted"
    );
    assert!(pods.errors.lock().is_empty(), "{:?}", pods.errors.lock());
    one_upstream_watch_each(&sim).await;
    only_the_regional_tier_reached_the_simulator(&sim, &regional, &[], "upstream faults");
    the_regional_tier_answered_the_edge_from_its_cache(&regional, &edge, "upstream faults");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_between_the_tiers_cost_the_edge_no_relist() {
    // The regional tier's periodic bookmarks come as rarely as kube-apiserver's (see the end).
    let (sim, mut writer, regional, relay, edge) = tiers(
        |c| c.cache.bookmark_interval = Duration::from_secs(60),
        true,
        |_| {},
    )
    .await;
    let relay = relay.expect("a relay");
    let pods = Informer::<Pod>::start(&edge.url, watcher::Config::default());
    let rec_pods = Recorder::start(&edge.url, "pods").await;
    let rec_cms = Recorder::start(&edge.url, "configmaps").await;
    pods.ready().await;
    let recorders = [&rec_pods, &rec_cms];
    let connects = || metric(&edge, "watchmux_upstream_watch_connects_total", &[]);
    for round in 0..2 {
        writer.burst(10);
        caught_up(&sim, &edge, "before the cut").await;
        let before = connects();
        relay.cut();
        // Written while the edge reconnects: it resumes from its last resourceVersion and the
        // regional tier replays them from its log.
        writer.burst(10);
        let deadline = Instant::now() + DEADLINE;
        while connects() < before + CACHED.len() as u64 {
            assert!(
                Instant::now() < deadline,
                "round {round}: the edge did not re-watch every resource through the relay"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        converge(&sim, &recorders, &[&pods], &[], &format!("cut {round}")).await;
    }
    assert!(relay.accepted() > CACHED.len() as u64);
    // No tier relisted: the edge's streams are the simulator's history, exactly, and the
    // regional tier answered every re-watch from its log.
    exact_history(&sim, &recorders, "cuts between the tiers");
    the_edge_never_relisted(&edge, "cuts between the tiers");
    for r in CACHED {
        assert_eq!(
            metric(
                &regional,
                "watchmux_watch_starts_total",
                &[&res(r), "outcome=\"410\""]
            ),
            0,
            "{r}: no re-watch of the edge's was too old"
        );
    }
    assert_eq!(
        pods.inits.load(Ordering::SeqCst),
        1,
        "the informer never relisted"
    );
    only_the_regional_tier_reached_the_simulator(&sim, &regional, &[], "cuts between the tiers");
    the_regional_tier_answered_the_edge_from_its_cache(&regional, &edge, "cuts between the tiers");

    // Last, a cut right after the regional tier bridged a relist (an outage during which the
    // simulator compacted its history; the last write is a configmap's, so the pods list's
    // resourceVersion lies past the last pods event). The bridge's last pods event lies inside
    // the regional tier's bridged gap, which no watch may start from: the regional tier tells
    // the edge the list's resourceVersion with a bookmark at once (its periodic one is a minute
    // away), so the edge resumes from there, without a 410 or a relist.
    let cache = regional.proxy.cache("", "v1", "pods").unwrap();
    let bridged = cache.counters.relists_bridged.load(Ordering::SeqCst);
    sim.faults()
        .refuse_connections_for(Duration::from_millis(400));
    crate::common::upstream_watches_gone(&sim, &["pods"]).await;
    writer.burst(20);
    writer.create(true);
    writer.create(false);
    sim.store().compact_now();
    regional_relisted(&regional, "pods", bridged, "the outage before the last cut").await;
    caught_up(&sim, &edge, "the regional tier's bridge").await;
    let edge_pods = edge.proxy.cache("", "v1", "pods").unwrap();
    let list_rv = cache.rv();
    assert!(
        edge_pods.wait_rv(list_rv, Duration::from_secs(10)).await,
        "the edge never heard of the relist's resourceVersion {list_rv} (it is at {}): no \
         bookmark after the bridge",
        edge_pods.rv()
    );
    relay.cut();
    writer.burst(10);
    converge(&sim, &recorders, &[&pods], &[], "a cut after a bridge").await;
    the_edge_never_relisted(&edge, "a cut after a bridge");
    assert_eq!(
        metric(
            &regional,
            "watchmux_watch_starts_total",
            &[&res("pods"), "outcome=\"410\""]
        ),
        0,
        "the edge's re-watch after the bridge was not refused"
    );
    assert_eq!(
        pods.inits.load(Ordering::SeqCst),
        1,
        "the informer never relisted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_restart_with_persistence_lets_its_clients_resume() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let persist = |c: &mut watchmux::config::Config| c.cache.persist_dir = Some(root.clone());
    let (sim, mut writer, regional, _, edge) = tiers(|_| {}, false, persist).await;
    let pods = Informer::<Pod>::start(&edge.url, watcher::Config::default());
    let cms = Informer::<ConfigMap>::start(&edge.url, watcher::Config::default().streaming_lists());
    let rec_pods = Recorder::start(&edge.url, "pods").await;
    let rec_cms = Recorder::start(&edge.url, "configmaps").await;
    pods.ready().await;
    cms.ready().await;
    let recorders = [&rec_pods, &rec_cms];
    writer.burst(10);
    caught_up(&sim, &edge, "before the edge's restart").await;

    // A clean stop: the clients' streams end; they try again while the edge is away and the
    // cluster changes.
    let stopped_at: BTreeMap<&str, u64> = WRITTEN
        .iter()
        .map(|r| (*r, edge.proxy.cache("", "v1", r).unwrap().rv()))
        .collect();
    let addr = edge.addr();
    edge.stop().await;
    writer.burst(10);
    let edge = proxy_at(&regional.url, addr, persist).await;
    writer.burst(10);
    converge(
        &sim,
        &recorders,
        &[&pods],
        &[&cms],
        "after the edge's restart",
    )
    .await;
    // Every client resumed from the resourceVersion it had: nothing lost, repeated or
    // reordered, and no relist. (The restarted edge relists the regional tier once, as every
    // restored cache does, and bridges: what changed while it was away reaches the clients as
    // a summary, in order, without a gap.)
    exact_history_until_each(
        &sim,
        &recorders,
        |r| stopped_at[r],
        "after the edge's restart",
    );
    for rec in recorders {
        assert!(
            rec.resumed() >= 1,
            "the {} watch was cut by the restart",
            rec.resource
        );
    }
    assert_eq!(
        [&pods.inits, &cms.inits].map(|i| i.load(Ordering::SeqCst)),
        [1, 1],
        "no informer relisted"
    );
    for r in CACHED {
        assert_eq!(
            metric(
                &edge,
                "watchmux_watch_starts_total",
                &[&res(r), "outcome=\"410\""]
            ),
            0,
            "{r}: no client's resume at the restarted edge was too old"
        );
    }
    one_upstream_watch_each(&sim).await;
    only_the_regional_tier_reached_the_simulator(&sim, &regional, &[], "the edge's restart");
    for r in CACHED {
        assert_eq!(
            relists(&regional, r),
            BTreeMap::from([("initial".to_string(), 1)]),
            "the edge's restart cost the regional tier no relist of {r}"
        );
    }
}

/// The regional tier of [`tiers`] with `cache.persist_dir = dir`.
fn persisted_at(dir: &std::path::Path) -> impl Fn(&mut watchmux::config::Config) + Clone {
    let dir = dir.to_path_buf();
    move |c: &mut watchmux::config::Config| c.cache.persist_dir = Some(dir.clone())
}

/// Starts the clients of the restart scenarios at the edge.
async fn edge_clients(
    edge: &TestProxy,
) -> (Informer<Pod>, Informer<ConfigMap>, Recorder, Recorder) {
    let pods = Informer::<Pod>::start(&edge.url, watcher::Config::default());
    let cms = Informer::<ConfigMap>::start(&edge.url, watcher::Config::default());
    let rec_pods = Recorder::start(&edge.url, "pods").await;
    let rec_cms = Recorder::start(&edge.url, "configmaps").await;
    pods.ready().await;
    cms.ready().await;
    (pods, cms, rec_pods, rec_cms)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_restart_of_the_regional_tier_costs_the_edge_no_relist() {
    let dir = tempfile::tempdir().unwrap();
    let persist = persisted_at(dir.path());
    let (sim, mut writer, regional, _, edge) = tiers(persist.clone(), false, |_| {}).await;
    let (pods, cms, rec_pods, rec_cms) = edge_clients(&edge).await;
    let recorders = [&rec_pods, &rec_cms];
    writer.burst(10);
    caught_up(&sim, &edge, "before the regional tier's restart").await;

    // A clean stop (the persisted cache writes its last batch), the cluster changes while the
    // regional tier is away, and it comes back on the same address from its directory.
    let addr = regional.addr();
    let app = regional.proxy.clone();
    regional.stop().await;
    let before = app.metrics.render();
    writer.burst(10);
    let regional = proxy_at(&sim.url(), addr, persist).await;
    writer.burst(10);
    converge(
        &sim,
        &recorders,
        &[&pods],
        &[&cms],
        "after the regional tier's restart",
    )
    .await;

    // The edge re-watched from where it was: no LIST, no 410; its clients saw no gap, duplicate
    // or relist (the regional tier re-watched the upstream from its disk's resourceVersion, so
    // they heard the very events of its downtime).
    the_edge_never_relisted(&edge, "the regional tier's clean restart");
    for r in CACHED {
        assert_eq!(
            metric(
                &regional,
                "watchmux_watch_starts_total",
                &[&res(r), "outcome=\"410\""]
            ),
            0,
            "{r}: the edge's re-watch at the restarted regional tier was not too old"
        );
        assert_eq!(
            relists(&regional, r),
            BTreeMap::new(),
            "the restarted regional tier restored {r} from disk and re-watched the upstream from \
             there, without a relist"
        );
    }
    for rec in recorders {
        assert!(
            rec.resumed() == 0,
            "the edge's {} watch (the edge itself did not restart) was never cut",
            rec.resource
        );
    }
    assert_eq!(
        [&pods.inits, &cms.inits].map(|i| i.load(Ordering::SeqCst)),
        [1, 1],
        "no informer relisted"
    );
    assert!(pods.errors.lock().is_empty() && cms.errors.lock().is_empty());
    one_upstream_watch_each(&sim).await;
    only_the_regional_tier_reached_the_simulator(
        &sim,
        &regional,
        &[before],
        "the regional tier's restart",
    );
}

/// Copies directory `from` into `to` (made), recursively: what was on the disk at that moment.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regional_tier_killed_with_its_tail_unwritten_still_lets_the_edge_converge() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, mut writer, regional, _, edge) =
        tiers(persisted_at(&dir.path().join("live")), false, |_| {}).await;
    let (pods, cms, rec_pods, rec_cms) = edge_clients(&edge).await;
    let recorders = [&rec_pods, &rec_cms];
    writer.burst(10);
    caught_up(&sim, &regional, "before the crash image").await;
    // What the disk will hold after the crash: the directory as it is now. Everything the
    // regional tier writes after this is the tail the crash loses.
    let crash = dir.path().join("crash");
    copy_dir(&dir.path().join("live"), &crash);
    let imaged: BTreeMap<&str, u64> = CACHED
        .iter()
        .map(|r| (*r, regional.proxy.cache("", "v1", r).unwrap().rv()))
        .collect();
    // The lost tail: objects the edge learns about through the regional tier, deleted while it
    // is down (so no relist of the regional tier will ever show them: only a correct handling
    // of the lost tail removes them from the edge), and other writes.
    let doomed = writer.create_batch("doomed", 3);
    writer.burst(10);
    caught_up(&sim, &edge, "before the kill").await;
    let edge_at: BTreeMap<&str, u64> = WRITTEN
        .iter()
        .map(|r| (*r, edge.proxy.cache("", "v1", r).unwrap().rv()))
        .collect();

    // Killed: no clean stop (its last writes go to a directory nobody reads again), and it
    // comes back on the same address from the crash image.
    let addr = regional.addr();
    let app = regional.proxy.clone();
    drop(regional);
    // (Its tasks end at once; they are waited for only to read its final counters.)
    app.tasks.close();
    let _ = tokio::time::timeout(Duration::from_secs(5), app.tasks.wait()).await;
    let before = app.metrics.render();
    for (pod, name) in &doomed {
        writer.delete(*pod, "default", name);
    }
    writer.burst(10);
    let regional = proxy_at(&sim.url(), addr, persisted_at(&crash)).await;
    writer.burst(10);
    converge(
        &sim,
        &recorders,
        &[&pods],
        &[&cms],
        "after the regional tier's crash",
    )
    .await;
    for r in WRITTEN {
        let got = kubectl_list(&edge.url, r).await;
        assert_eq!(got, sim_state(&sim, r), "kubectl get {r} at the edge");
    }
    let edge_relists: BTreeMap<&str, BTreeMap<String, u64>> =
        CACHED.iter().map(|r| (*r, relists(&edge, r))).collect();
    // The edge was ahead of what the regional tier restored for the written resources. The
    // regional tier re-watches the upstream from its disk's resourceVersion, so it replays the
    // very events of the lost tail and of its downtime (the doomed objects' creation and
    // deletion included): the edge's re-watch from ahead waits for it to get there and goes
    // on exactly, with no relist anywhere. (Had the upstream answered 410, the regional tier
    // would relist and bridge, and the edge's position inside that gap would get 410 and a
    // relist: `cut_connections_between_the_tiers_cost_the_edge_no_relist` and the resilience
    // tests cover bridged gaps.)
    for r in WRITTEN {
        assert!(
            imaged[r] < edge_at[r],
            "{r}: the crash lost the tail the edge had (imaged at {}, the edge at {})",
            imaged[r],
            edge_at[r]
        );
        assert_eq!(
            edge_relists[r].get("expired"),
            None,
            "{r}: the edge did not relist: {edge_relists:?}"
        );
        assert_eq!(
            relists(&regional, r),
            BTreeMap::new(),
            "{r}: the regional tier re-watched from its disk"
        );
    }
    assert_eq!(
        [&pods.inits, &cms.inits].map(|i| i.load(Ordering::SeqCst)),
        [1, 1],
        "no informer relisted"
    );
    for rec in recorders {
        assert!(
            !rec.seen().iter().any(|e| e.ty == "ERROR"),
            "the edge's {} watch saw no error",
            rec.resource
        );
    }
    eprintln!(
        "the regional tier's crash: imaged at {imaged:?}, the edge was at {edge_at:?}; the edge's \
         relists {edge_relists:?}; the regional tier's {:?}",
        CACHED.map(|r| relists(&regional, r))
    );
    one_upstream_watch_each(&sim).await;
    only_the_regional_tier_reached_the_simulator(
        &sim,
        &regional,
        &[before],
        "the regional tier's crash",
    );
}
