//! kube-rs reflectors (kube-runtime `watcher` + `reflector`) through watchmux, in front of the
//! simulator under pod churn: in every initial-list mode, for 1 client and for 100 concurrent
//! clients, each client's store converges to exactly the simulator's pods (names and
//! resourceVersions); watchmux holds exactly one upstream watch per cached resource and makes
//! one upstream LIST per (re)sync however many clients there are; and an upstream relist (410
//! after compaction during an outage) is bridged: no client relists, sees an error or loses a
//! change.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self};
use kube_sim::Simulator;
use kube_sim::fleet::FleetSpec;
use tokio::time::Instant;

use crate::common::Informer;
use crate::common::churn::{Churn, PodWriter};

/// The resources the test proxy caches.
const CACHED: [&str; 4] = ["pods", "nodes", "namespaces", "configmaps"];

/// The fleet the simulator starts with.
fn fleet() -> FleetSpec {
    FleetSpec {
        nodes: 4,
        pods: 40,
        namespaces: 3,
        seed: 11,
    }
}

// ---------------------------------------------------------------------------------------------
// Simulator side: state, counters, churn
// ---------------------------------------------------------------------------------------------

/// The simulator's pods now: `ns/name` → resourceVersion.
fn sim_pods(sim: &Simulator) -> BTreeMap<String, String> {
    let rt = sim.resource("", "v1", "pods").expect("pods served");
    sim.store()
        .list(&rt, None, None, None, 0, &|_| true, false)
        .expect("list now")
        .items
        .iter()
        .map(|o| (format!("{}/{}", o.namespace, o.name), o.rv.to_string()))
        .collect()
}

fn stat(sim: &Simulator, resource: &str, key: &str) -> i64 {
    sim.stats()["resources"][resource][key]
        .as_i64()
        .unwrap_or_else(|| panic!("no stat {resource}.{key}"))
}

/// While connections are refused, changes the pods and compacts, so the proxy's re-watch gets
/// 410 and it must relist; waits until the pods relist was bridged.
async fn force_upstream_relist(sim: &Simulator, proxy: &crate::common::TestProxy) {
    let caches: Vec<_> = CACHED
        .iter()
        .map(|r| proxy.proxy.cache("", "v1", r).expect("cached"))
        .collect();
    let bridged: Vec<u64> = caches
        .iter()
        .map(|c| c.counters.relists_bridged.load(Ordering::SeqCst))
        .collect();
    sim.faults()
        .refuse_connections_for(Duration::from_millis(1500));
    // Failed once ("did not relist") without this wait: the reflector heard the burst. And
    // every cached kind's: a watch still open at the compaction may carry a bookmark at the
    // new revision before it ends, and its reflector then re-watches from there, rightly,
    // with no relist (failed so once for nodes in a run of the suite under load).
    crate::common::upstream_watches_gone(sim, &CACHED).await;
    // Changes the proxy can only learn by relisting: a burst of writes, then compaction.
    let mut w = PodWriter::new(sim.state().clone(), 99, &fleet());
    for _ in 0..60 {
        w.write_one();
    }
    sim.store().compact_now();
    // A bound, not a timing: the reflector's backoff after the refused connections can reach
    // several seconds on a loaded machine. Every cached kind relists (each re-watch from before
    // the compaction gets 410), each when its own backoff ends: the test reads the upstream's
    // LIST counts of all of them, so it waits for all (failed once under load: pods had
    // relisted, nodes and namespaces not yet).
    let deadline = Instant::now() + Duration::from_secs(90);
    for ((r, cache), before) in CACHED.iter().zip(&caches).zip(bridged) {
        while cache.counters.relists_bridged.load(Ordering::SeqCst) == before {
            assert!(
                Instant::now() < deadline,
                "the proxy did not relist (and bridge) {r} within 90 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            cache.counters.relists_reset.load(Ordering::SeqCst),
            0,
            "the relist of {r} was bridged, not reset"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// kube-rs side
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// kube-rs's default: a consistent (`resourceVersion` unset) LIST with `limit=500`, then WATCH.
    ListWatch,
    /// The default ListWatch strategy with `any_semantic()` and no page size: LIST
    /// `resourceVersion=0&resourceVersionMatch=NotOlderThan` (what client-go informers send).
    ListWatchAny,
    /// `streaming_lists()`: WATCH `sendInitialEvents=true`.
    Streaming,
}

impl Mode {
    fn config(self) -> watcher::Config {
        match self {
            Mode::ListWatch => watcher::Config::default(),
            Mode::ListWatchAny => {
                let mut c = watcher::Config::default().any_semantic();
                c.page_size = None;
                c
            }
            Mode::Streaming => watcher::Config::default().streaming_lists(),
        }
    }

    /// Whether each client's initial sync is a consistent read (kube-rs's default initial LIST:
    /// `resourceVersion` unset, `limit=500`; a streaming list without a resourceVersion): the
    /// cache answers it after a freshness check (a LIST of at most one item, sometimes a short
    /// watch), shared by every client that waits at the same time. `resourceVersion=0` needs
    /// none.
    fn consistent_start(self) -> bool {
        match self {
            Mode::ListWatch | Mode::Streaming => true,
            Mode::ListWatchAny => false,
        }
    }
}

/// One kube-rs reflector of pods through the proxy.
type KubeClient = Informer<Pod>;

async fn wait_ready(clients: &[KubeClient]) {
    let all = futures_util::future::join_all(clients.iter().map(|c| c.store.wait_until_ready()));
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("every client finished its initial list within 60 s")
        .into_iter()
        .for_each(|r| r.expect("reflector alive"));
}

/// Waits until every client's store holds exactly the simulator's pods (names and
/// resourceVersions); the simulator is quiet, so its state is final.
async fn converge(sim: &Simulator, clients: &[KubeClient], what: &str) -> usize {
    let want = sim_pods(sim);
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let behind: Vec<usize> = (0..clients.len())
            .filter(|&i| clients[i].state() != want)
            .collect();
        if behind.is_empty() {
            return want.len();
        }
        if Instant::now() >= deadline {
            let got = clients[behind[0]].state();
            let missing: Vec<_> = want
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(v))
                .collect();
            let extra: Vec<_> = got
                .iter()
                .filter(|(k, v)| want.get(*k) != Some(v))
                .collect();
            panic!(
                "{what}: {} of {} clients did not converge within 45 s; client {}: \
                 missing/different {missing:?}, extra/stale {extra:?}; errors {:?}",
                behind.len(),
                clients.len(),
                behind[0],
                clients[behind[0]].errors.lock()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the simulator shows exactly one open watch per cached resource (after an
/// outage the proxy's reflectors reconnect with backoff).
async fn one_watch_per_resource(sim: &Simulator) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let open: Vec<i64> = CACHED.iter().map(|r| stat(sim, r, "openWatches")).collect();
        if open.iter().all(|&n| n == 1) {
            return;
        }
        assert!(
            open.iter().all(|&n| n <= 1),
            "more than one upstream watch for a resource: {CACHED:?} = {open:?}"
        );
        assert!(
            Instant::now() < deadline,
            "upstream watches {CACHED:?} = {open:?}, want one each"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------------------------

async fn scenario(mode: Mode, n: usize) {
    let sim = crate::common::sim_with(|c| c.fleet = Some(fleet())).await;
    let proxy = crate::common::proxy_for(&sim, |_| {}).await;

    // The proxy's own sync: one LIST (the fleet fits a page) and one watch per resource (the
    // proxy is ready once listed; its watches follow).
    one_watch_per_resource(&sim).await;
    for r in CACHED {
        assert_eq!(
            stat(&sim, r, "listRequests"),
            1,
            "{r}: one LIST for the sync"
        );
        assert_eq!(stat(&sim, r, "watchRequests"), 1, "{r}: one upstream watch");
        assert_eq!(
            stat(&sim, r, "openWatches"),
            1,
            "{r}: one open upstream watch"
        );
    }

    // Clients start (and list) while the cluster churns.
    let churn = Churn::start(&sim, 50.0, 7, &fleet());
    churn.wait_writes(10).await;
    let clients: Vec<KubeClient> = (0..n)
        .map(|_| KubeClient::start(&proxy.url, mode.config()))
        .collect();
    wait_ready(&clients).await;
    // Everyone watches through more churn, then the cluster goes quiet.
    churn.wait_writes(75).await;
    let writes = churn.stop().await;
    let pods = converge(&sim, &clients, "under churn").await;

    let mut lists: Vec<i64> = CACHED
        .iter()
        .map(|r| stat(&sim, r, "listRequests"))
        .collect();
    assert_eq!(
        lists[1..],
        [1, 1, 1],
        "upstream LISTs of {CACHED:?} after {n} {mode:?} clients synced"
    );
    // Beyond the sync, pods saw only freshness checks: LISTs of at most one item, shared by the
    // clients that started together, each followed by at most one short watch. A client whose
    // check could not finish within kube's 3 s is answered by the upstream, as kube-apiserver
    // falls back to etcd, and counted by reason. On a 2-core machine running the other tests
    // at the same time, many clients starting at once under churn lose up to a quarter of their
    // reads that way (the cache's own watch lags its upstream); the cache must still answer most.
    let metrics = proxy.proxy.metrics.render();
    // The sum of a pods metric's series whose labels contain every one of `has`.
    let sum = |name: &str, has: &[&str]| -> i64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with(&format!("{name}{{"))
                    && l.contains("resource=\"pods\"")
                    && has.iter().all(|h| l.contains(h))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as i64
    };
    let not_fresh = sum("watchmux_reads_total", &["reason=\"not_fresh\""]);
    let checks = sum("watchmux_freshness_checks_total", &[]);
    // Each check is one LIST of one item or of the pods' metadata, or both when the cache was
    // behind (the metadata LIST then proves it), and, now and then, a short watch (a few at
    // most, if a stream ends before it proves anything).
    let check_requests = sum("watchmux_upstream_requests_total", &["verb=\"freshness\""]);
    let upstream_lists = lists[0] - 1 - not_fresh;
    let check_items = stat(&sim, "pods", "listItemsSent") - fleet().pods as i64 * (1 + not_fresh);
    let most = if mode.consistent_start() {
        n.div_ceil(2) as i64
    } else {
        0
    };
    assert!(
        not_fresh <= n as i64 / 2
            && checks <= most
            && upstream_lists <= 2 * checks
            && check_items <= upstream_lists
            && check_requests <= 3 * checks,
        "{n} {mode:?} clients cost the upstream {checks} checks ({check_requests} requests), {upstream_lists} LISTs of {check_items} items besides the sync and {not_fresh} fallbacks\n{}",
        metrics
            .lines()
            .filter(|l| (l.starts_with("watchmux_reads_total{")
                || l.starts_with("watchmux_freshness_checks_total{"))
                && l.contains("pods")
                && !l.ends_with(" 0"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for r in &CACHED[1..] {
        assert_eq!(
            stat(&sim, r, "watchRequests"),
            1,
            "{r}: no upstream re-watch"
        );
    }
    one_watch_per_resource(&sim).await;
    let watches_before_relist = stat(&sim, "pods", "watchRequests");

    // The upstream relists (410 after compaction during an outage): the proxy lists once per
    // resource, bridges the difference, and every client converges without relisting.
    force_upstream_relist(&sim, &proxy).await;
    let relisted = converge(&sim, &clients, "after the upstream relist").await;
    one_watch_per_resource(&sim).await;
    for l in &mut lists {
        *l += 1;
    }
    let now: Vec<i64> = CACHED
        .iter()
        .map(|r| stat(&sim, r, "listRequests"))
        .collect();
    assert_eq!(
        now, lists,
        "one upstream LIST per resource for the relist, whatever {n} clients do"
    );
    // Refused attempts never reach the simulator's counters: the first watch, the re-watch
    // answered with 410, and the watch from the relist's resourceVersion.
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&sim, "pods", "watchRequests") < watches_before_relist + 2 {
        assert!(
            Instant::now() < deadline,
            "no upstream watch after the relist"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        stat(&sim, "pods", "watchRequests"),
        watches_before_relist + 2
    );
    one_watch_per_resource(&sim).await;

    for (i, c) in clients.iter().enumerate() {
        let errors = c.errors.lock();
        assert!(errors.is_empty(), "client {i} saw errors: {errors:?}");
        assert_eq!(
            c.inits.load(Ordering::SeqCst),
            1,
            "client {i} relisted (its watch broke or it got a 410)"
        );
    }
    eprintln!(
        "{mode:?} × {n}: {writes} churn writes, {pods} pods converged; after the bridged relist \
         {relisted} pods converged; upstream {}",
        sim.stats()["resources"]["pods"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_list_watch_client_converges() {
    scenario(Mode::ListWatch, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_list_watch_rv0_client_converges() {
    scenario(Mode::ListWatchAny, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_streaming_list_client_converges() {
    scenario(Mode::Streaming, 1).await;
}

// A hundred clients per mode: more than the cache's 64 concurrent LISTs, and enough to share
// freshness checks. At 200 (28 CPU-s for one mode, alone on a quiet 2-core machine) the three
// were most of the proxy binary's CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_list_watch_clients_converge() {
    scenario(Mode::ListWatch, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_list_watch_rv0_clients_converge() {
    scenario(Mode::ListWatchAny, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_streaming_list_clients_converge() {
    scenario(Mode::Streaming, 100).await;
}
