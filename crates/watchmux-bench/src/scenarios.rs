//! Scenarios S1–S6 (S7, consistent reads, is in [`super::consistent`]; S8, protobuf, in
//! [`super::protobuf`], which runs its watchers through this module's `stream_run`; S9, the
//! per-watch cost, in [`super::watchcost`], with this module's `Watchers`). S1
//! (broadcast), S2 (fleet) and S3 (list) start every target once in front of one simulator (S1
//! and S3 their own, S2 the suite's shared large one) and then run their
//! cases with the targets interleaved inside each repeat, so drift over time (page cache, heat,
//! the simulator's growing history) falls on every target alike. S4 (herd) and S5 (idle) start
//! fresh target processes every repeat, because a cold start and memory growth are what they
//! measure; S6 (sync) starts a fresh watchmux every repeat and times its initial sync. S1 and S5
//! run their cases over each of `Sizes`' transports (plain HTTP/1.1, HTTP/1.1 over TLS), the TLS
//! cases named `N · TLS`.
//!
//! Scenarios drive clients and read usage; starting and stopping processes is [`targets`]'s and
//! [`procs`]'s.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::client::{self, Encoding, Endpoint, WatchStats};
use super::procs::{self, PeakRss, Proc};
use super::report::{Metric, Sample, ScenarioSpec, Versus};
use super::targets::{self, Env, Launch, Target, TargetKind};
use super::tls::{self, Transport};
use super::{BenchError, Sizes};
use kube_sim::fleet::node_name;

pub(crate) const MB: f64 = 1_000_000.0;
/// Handshakes in flight at once while thousands of watchers connect.
const CONNECT_CONCURRENCY: usize = 256;

pub(crate) fn m(key: &'static str, label: &'static str, higher_is_better: bool) -> Metric {
    Metric {
        key,
        label,
        higher_is_better,
    }
}

/// A group of watch clients sharing counters.
pub(crate) struct Watchers {
    pub(crate) stats: Arc<WatchStats>,
    stop: CancellationToken,
    tasks: tokio::task::JoinSet<()>,
    /// Watches asked for.
    n: u64,
}

impl Watchers {
    /// Starts one JSON watch per path against `ep` and waits (bounded) until every one has
    /// its response head or failed.
    pub(crate) async fn connect(ep: Endpoint, paths: Vec<String>) -> Result<Watchers, BenchError> {
        Watchers::connect_as(ep, paths, Encoding::Json).await
    }

    /// [`Watchers::connect`] asking for `encoding`.
    async fn connect_as(
        ep: Endpoint,
        paths: Vec<String>,
        encoding: Encoding,
    ) -> Result<Watchers, BenchError> {
        let w = Watchers::start(&ep, paths, encoding);
        let (c, f) = w.wait_started(Duration::from_secs(120)).await;
        let n = w.n;
        if f > 0 {
            let why = w.stats.first_failure.lock().clone().unwrap_or_default();
            return Err(BenchError::Run(format!(
                "{f} of {n} watches to {ep:?} failed to start (first: {why})"
            )));
        }
        if c < n {
            return Err(BenchError::Run(format!(
                "only {c} of {n} watches to {ep:?} started within 120 s"
            )));
        }
        Ok(w)
    }

    /// Starts one HTTP/1.1 watch per path against `ep`, `CONNECT_CONCURRENCY` handshakes at a
    /// time; [`Watchers::wait_started`] waits for them.
    pub(crate) fn start(ep: &Endpoint, paths: Vec<String>, encoding: Encoding) -> Watchers {
        let stats = Arc::new(WatchStats::default());
        let stop = CancellationToken::new();
        let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
        let mut tasks = tokio::task::JoinSet::new();
        let n = paths.len() as u64;
        for p in paths {
            tasks.spawn(client::watch(
                ep.clone(),
                p,
                encoding,
                stats.clone(),
                gate.clone(),
                stop.clone(),
            ));
        }
        Watchers {
            stats,
            stop,
            tasks,
            n,
        }
    }

    /// Starts `streams` JSON watches of `path` over HTTP/2 against `ep` (ALPN h2),
    /// `per_connection` streams on each connection.
    pub(crate) fn start_h2(
        ep: &Endpoint,
        path: &str,
        streams: usize,
        per_connection: usize,
    ) -> Watchers {
        let stats = Arc::new(WatchStats::default());
        let stop = CancellationToken::new();
        let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
        let mut tasks = tokio::task::JoinSet::new();
        client::spawn_h2_watches(
            &mut tasks,
            ep,
            path,
            streams,
            per_connection,
            stats.clone(),
            gate,
            stop.clone(),
        );
        Watchers {
            stats,
            stop,
            tasks,
            n: streams as u64,
        }
    }

    /// Waits until every watch has its response head or failed, at most `max`; returns how
    /// many started and how many failed.
    pub(crate) async fn wait_started(&self, max: Duration) -> (u64, u64) {
        let deadline = Instant::now() + max;
        loop {
            let (c, f) = (
                self.stats.connected.load(Ordering::Relaxed),
                self.stats.failed.load(Ordering::Relaxed),
            );
            if c + f >= self.n || Instant::now() > deadline {
                return (c, f);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Closes every connection.
    pub(crate) async fn close(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Waits until the deliveries of in-window writes stop growing: for `quiet` with no change,
/// or until `expected` arrived, or at most `max`.
pub(crate) async fn drain(stats: &WatchStats, expected: u64, quiet: Duration, max: Duration) {
    let t0 = Instant::now();
    let mut last = stats.stamped_in_window.load(Ordering::Relaxed);
    let mut since = Instant::now();
    while t0.elapsed() < max {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = stats.stamped_in_window.load(Ordering::Relaxed);
        if now >= expected && expected > 0 {
            return;
        }
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return;
        }
    }
}

/// Starts every requested target in front of `sim`; a target that cannot start (nginx not
/// installed) is reported and left out.
pub(crate) async fn start_targets(
    env: &Env,
    kinds: &[TargetKind],
    sim: &Proc,
    resources: &[&str],
) -> Result<Vec<Target>, BenchError> {
    start_targets_with(env, kinds, sim, resources, &Launch::default()).await
}

/// [`start_targets`] as `launch` says (over TLS).
pub(crate) async fn start_targets_with(
    env: &Env,
    kinds: &[TargetKind],
    sim: &Proc,
    resources: &[&str],
    launch: &Launch,
) -> Result<Vec<Target>, BenchError> {
    let mut out = Vec::new();
    for &k in kinds {
        if k == TargetKind::Nginx && env.nginx.is_none() {
            eprintln!(
                "  nginx is not installed (crates/watchmux-bench/scripts/install-nginx): its baseline is left out"
            );
            continue;
        }
        out.push(targets::start_with(env, k, sim, resources, launch).await?);
    }
    Ok(out)
}

/// The targets of `kinds` that run the cases over `t`: all of them over plain HTTP, those in
/// `s.tls_targets` over TLS.
pub(crate) fn kinds_over(s: &Sizes, kinds: &[TargetKind], t: Transport) -> Vec<TargetKind> {
    kinds
        .iter()
        .copied()
        .filter(|k| t == Transport::Plain || s.tls_targets.contains(k))
        .collect()
}

pub(crate) async fn stop_all(ts: Vec<Target>) {
    for t in ts {
        t.stop().await;
    }
}

/// The simulator's writes during a streaming run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Churn {
    pub(crate) per_second: f64,
    /// `status` or `realistic` (see `kube_kube_sim::churn::ChurnMix`).
    pub(crate) mix: &'static str,
}

/// What a streaming run measured, before the scenario picks its figures.
pub(crate) struct StreamRun {
    secs: f64,
    pub(crate) deliveries_in_window: u64,
    /// Bytes of those deliveries in the bodies (see [`WatchStats::bytes_in_window`]).
    pub(crate) bytes_in_window: u64,
    pub(crate) stamped_in_window: u64,
    upstream_events: u64,
    pub(crate) upstream_stamped: u64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    cpu_s: f64,
    rss_mb: f64,
    upstream_cpu_s: f64,
    client_cpu_s: f64,
    /// The whole machine's busy CPU seconds in the window.
    machine_cpu_s: f64,
}

impl StreamRun {
    /// The window's length, seconds.
    pub(crate) fn secs(&self) -> f64 {
        self.secs
    }

    /// Cores that processes other than the target, the simulator and the bench took during the
    /// window (for a target with processes of its own, not `direct`): anything above a few
    /// hundredths means the machine was not quiet.
    pub(crate) fn other_cpu_cores(&self) -> f64 {
        (self.machine_cpu_s - self.cpu_s - self.upstream_cpu_s - self.client_cpu_s) / self.secs
    }

    /// The figures every streaming scenario reports (rates per second of the window).
    pub(crate) fn figures(&self) -> Vec<(&'static str, f64)> {
        let per_s = |x: f64| x / self.secs;
        vec![
            ("deliveries_per_s", per_s(self.deliveries_in_window as f64)),
            ("p50_ms", self.p50_ms),
            ("p99_ms", self.p99_ms),
            ("max_ms", self.max_ms),
            (
                "cpu_us_per_event",
                self.cpu_s / self.upstream_events.max(1) as f64 * 1e6,
            ),
            (
                "cpu_s_per_million",
                self.cpu_s / self.deliveries_in_window.max(1) as f64 * 1e6,
            ),
            ("cpu_cores", per_s(self.cpu_s)),
            ("rss_mb", self.rss_mb),
            ("client_cpu_cores", per_s(self.client_cpu_s)),
            ("upstream_events_per_s", per_s(self.upstream_events as f64)),
            ("upstream_cpu_cores", per_s(self.upstream_cpu_s)),
        ]
    }
}

/// Connects `paths` to the target asking for `encoding`, runs churn at `rate` (`mix`) for a
/// warm-up second and a measured window, stops it, waits for stragglers and disconnects. A
/// reference watcher (JSON) on the simulator itself counts the upstream's writes in the window.
/// S1's measured window (S8.1's too, in either encoding): `paths` (every one of the `watchers`
/// receives every event) under the broadcast churn, `s.broadcast_rate` status writes/s.
pub(crate) async fn broadcast_run(
    sim: &Proc,
    target: &Target,
    paths: Vec<String>,
    encoding: Encoding,
    s: &Sizes,
    watchers: usize,
) -> Result<StreamRun, BenchError> {
    stream_run(
        sim,
        target,
        paths,
        encoding,
        Churn {
            per_second: s.broadcast_rate,
            mix: "status",
        },
        s,
        Duration::from_secs_f64(s.window_secs),
        Some(watchers as u64),
    )
    .await
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call per scenario, each argument named there"
)]
pub(crate) async fn stream_run(
    sim: &Proc,
    target: &Target,
    paths: Vec<String>,
    encoding: Encoding,
    churn: Churn,
    s: &Sizes,
    window: Duration,
    expected_per_event: Option<u64>,
) -> Result<StreamRun, BenchError> {
    let (rate, mix) = (churn.per_second, churn.mix);
    let rv = targets::current_rv(sim.addr, "pods").await?;
    let paths: Vec<String> = paths
        .into_iter()
        .map(|p| format!("{p}&allowWatchBookmarks=true&resourceVersion={rv}"))
        .collect();
    let reference = Watchers::connect(
        Endpoint::plain(sim.addr),
        vec![format!(
            "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
        )],
    )
    .await?;
    let watchers = Watchers::connect_as(target.h1(), paths, encoding).await?;
    tokio::time::sleep(s.pause(0.3)).await;
    targets::set_churn(sim.addr, rate, mix).await?;
    tokio::time::sleep(s.pause(1.0)).await;
    let pids = target.pids();
    let (u0, s0, c0, m0) = (
        procs::usage(&pids),
        procs::usage(&[sim.pid()]),
        procs::usage(&[0]),
        procs::machine_busy_secs(),
    );
    let t0 = Instant::now();
    reference.stats.window.open();
    watchers.stats.window.open();
    tokio::time::sleep(window).await;
    watchers.stats.window.close();
    reference.stats.window.close();
    let secs = t0.elapsed().as_secs_f64();
    let (u1, s1, c1, m1) = (
        procs::usage(&pids),
        procs::usage(&[sim.pid()]),
        procs::usage(&[0]),
        procs::machine_busy_secs(),
    );
    let received = watchers.stats.received_in_window.load(Ordering::Relaxed);
    let received_bytes = watchers.stats.bytes_in_window.load(Ordering::Relaxed);
    targets::set_churn(sim.addr, 0.0, mix).await?;
    drain(
        &reference.stats,
        u64::MAX,
        s.pause(0.3),
        Duration::from_secs(2),
    )
    .await;
    // Every event of the window counts as upstream work; only writes that stamp their time
    // (not DELETED events, not the simulated kubelet's last update) can be expected by time.
    let upstream_events = reference.stats.received_in_window.load(Ordering::Relaxed);
    let upstream_stamped = reference.stats.stamped_in_window.load(Ordering::Relaxed);
    let expected = expected_per_event
        .map(|k| k * upstream_stamped)
        .unwrap_or(0);
    drain(
        &watchers.stats,
        expected,
        s.pause(2.0),
        Duration::from_secs(15),
    )
    .await;
    let stats = watchers.stats.clone();
    watchers.close().await;
    reference.close().await;
    let h = &stats.latency;
    let run = StreamRun {
        secs,
        deliveries_in_window: received,
        bytes_in_window: received_bytes,
        stamped_in_window: stats.stamped_in_window.load(Ordering::Relaxed),
        upstream_events,
        upstream_stamped,
        p50_ms: h.quantile(0.5) as f64 / 1000.0,
        p99_ms: h.quantile(0.99) as f64 / 1000.0,
        max_ms: h.max() as f64 / 1000.0,
        cpu_s: u1.cpu_secs - u0.cpu_secs,
        rss_mb: u1.rss_bytes as f64 / MB,
        upstream_cpu_s: s1.cpu_secs - s0.cpu_secs,
        client_cpu_s: c1.cpu_secs - c0.cpu_secs,
        machine_cpu_s: m1 - m0,
    };
    // Let the servers notice the closed connections before the next run.
    tokio::time::sleep(s.pause(0.7)).await;
    Ok(run)
}

/// S1 broadcast.
pub fn broadcast_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: "S1",
        name: "broadcast",
        about: format!(
            "W watchers on all pods (one HTTP/1.1 connection each, from the list's resourceVersion){}; the simulator makes {} status writes/s to its {} pods for {} s. Latency = receive time − the write time the simulator stamps into the pod; delivered = deliveries of the window's writes ÷ (W × writes). CPU and RSS are the target's processes (for `direct`, the simulator, whose CPU includes making the writes). \"writes/s made\" is the rate the simulator achieved: when it also serves the watchers itself (`direct`) or feeds a busy nginx, its write generator falls behind the requested rate, which lowers that target's demand.",
            transports_text(s, &s.broadcast_transports),
            s.broadcast_rate,
            s.broadcast_pods,
            s.window_secs
        ),
        case_label: "watchers",
        metrics: vec![
            m("deliveries_per_s", "deliveries/s", true),
            m("p50_ms", "p50 ms", false),
            m("p99_ms", "p99 ms", false),
            m("max_ms", "max ms", false),
            m("delivered_pct", "delivered %", true),
            m("cpu_s_per_million", "CPU-s per 1M deliveries", false),
            m("cpu_cores", "CPU cores", false),
            m("rss_mb", "RSS MB", false),
            m("client_cpu_cores", "client CPU cores", false),
            m("upstream_events_per_s", "writes/s made", true),
        ],
        ratio_metrics: vec!["deliveries_per_s", "p99_ms", "cpu_s_per_million", "rss_mb"],
        scaling_metric: None,
        variants: None,
        versus: tls_versus(
            &s.broadcast_transports,
            vec!["p99_ms", "cpu_s_per_million", "rss_mb"],
        ),
    }
}

/// What S1's and S5's text says of their `transports`: nothing when all is plain HTTP.
fn transports_text(s: &Sizes, transports: &[Transport]) -> String {
    if !transports.contains(&Transport::Tls) {
        return String::new();
    }
    let only = if TargetKind::ALL.iter().all(|k| s.tls_targets.contains(k)) {
        String::new()
    } else {
        let names: Vec<&str> = s.tls_targets.iter().map(|k| k.name()).collect();
        format!(" (for {} only)", names.join(", "))
    };
    format!(
        "; cases marked `· TLS` ran again over TLS{only} (rustls or, for nginx, OpenSSL; a certificate from a CA made for the run, ALPN `http/1.1`; for `direct`, the simulator's own HTTPS address)"
    )
}

/// The TLS ÷ plain table of S1 and S5, when TLS cases ran.
fn tls_versus(transports: &[Transport], metrics: Vec<&'static str>) -> Option<Versus> {
    transports.contains(&Transport::Tls).then(|| Versus {
        base: "plain HTTP/1.1",
        variants: vec![Transport::Tls.label()],
        metrics,
    })
}

/// S1: W watchers on all pods, E status writes per second.
pub async fn broadcast(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let sim = targets::start_sim(env, 50, s.broadcast_pods).await?;
    // Every transport's targets at once, so each repeat interleaves them all.
    let mut ts: Vec<(Transport, Target)> = Vec::new();
    for &tp in &s.broadcast_transports {
        let launch = Launch {
            tls: tp.is_tls(),
            heap_file: None,
            ..Launch::default()
        };
        let started =
            start_targets_with(env, &kinds_over(s, kinds, tp), &sim, &["pods"], &launch).await?;
        ts.extend(started.into_iter().map(|t| (tp, t)));
    }
    for &w in &s.broadcast_watchers {
        for r in 0..s.repeats {
            for (tp, t) in &ts {
                let paths = vec!["/api/v1/pods?watch=1".to_string(); w];
                let run = broadcast_run(&sim, t, paths, Encoding::Json, s, w).await?;
                let expected = (w as u64 * run.upstream_stamped).max(1);
                let mut sample = Sample {
                    scenario: "S1",
                    case: tls::case(&w.to_string(), *tp),
                    target: t.kind,
                    repeat: r,
                    values: run.figures(),
                };
                sample.values.push((
                    "delivered_pct",
                    100.0 * run.stamped_in_window as f64 / expected as f64,
                ));
                eprintln!("  S1 W={w} {} {tp} #{r}: {}", t.kind, brief(&sample));
                out.push(sample);
            }
        }
    }
    stop_all(ts.into_iter().map(|(_, t)| t).collect()).await;
    sim.stop().await;
    Ok(())
}

pub(crate) fn brief(s: &Sample) -> String {
    s.values
        .iter()
        .map(|(k, v)| format!("{k}={}", super::report::fmt_num(*v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// S2 node fleet.
pub fn fleet_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: "S2",
        name: "node fleet",
        about: format!(
            "K kubelet-like clients, each with two watches: its pods (`fieldSelector=spec.nodeName=<node>`) and its own Node (`metadata.name=<node>`); a fleet of {} nodes and {} pods; {} writes/s of the simulator's cluster-like churn (status updates, relabels, moves between nodes, creates, deletes) over all pods for {} s, so with fewer kubelets fewer events match anyone. CPU per event = the target's CPU-seconds ÷ upstream pod events in the window (CPU time is counted in 10 ms ticks, so at these rates a figure carries a few percent of noise).",
            s.fleet_nodes, s.fleet_pods, s.fleet_rate, s.fleet_window_secs
        ),
        case_label: "kubelets",
        metrics: vec![
            m("deliveries_per_s", "deliveries/s", true),
            m("p50_ms", "p50 ms", false),
            m("p99_ms", "p99 ms", false),
            m("max_ms", "max ms", false),
            m("cpu_us_per_event", "CPU µs per event", false),
            m("cpu_s_per_million", "CPU-s per 1M deliveries", false),
            m("cpu_cores", "CPU cores", false),
            m("rss_mb", "RSS MB", false),
        ],
        ratio_metrics: vec!["p99_ms", "cpu_us_per_event", "rss_mb"],
        scaling_metric: Some("cpu_us_per_event"),
        variants: None,
        versus: None,
    }
}

/// The watch paths of `k` kubelets.
fn kubelet_paths(k: usize) -> Vec<String> {
    (0..k)
        .flat_map(|i| {
            let n = node_name(i);
            [
                format!("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3D{n}"),
                format!("/api/v1/nodes?watch=1&fieldSelector=metadata.name%3D{n}"),
            ]
        })
        .collect()
}

/// S2: kubelet-like watchers over a large fleet with churn.
pub async fn fleet(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    sim: &Proc,
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let ts = start_targets(env, kinds, sim, &["pods", "nodes"]).await?;
    for &k in &s.fleet_kubelets {
        for r in 0..s.repeats {
            for t in &ts {
                let run = stream_run(
                    sim,
                    t,
                    kubelet_paths(k),
                    Encoding::Json,
                    Churn {
                        per_second: s.fleet_rate,
                        mix: "realistic",
                    },
                    s,
                    Duration::from_secs_f64(s.fleet_window_secs),
                    None,
                )
                .await?;
                let sample = Sample {
                    scenario: "S2",
                    case: k.to_string(),
                    target: t.kind,
                    repeat: r,
                    values: run.figures(),
                };
                eprintln!("  S2 K={k} {} #{r}: {}", t.kind, brief(&sample));
                out.push(sample);
            }
        }
    }
    stop_all(ts).await;
    Ok(())
}

/// S3 list.
pub fn list_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: "S3",
        name: "list",
        about: format!(
            "C clients at once each LIST `/api/v1/pods?resourceVersion=0` of {} pods (each body read to the end and discarded). MB/s = all bytes ÷ wall time; latency = per list, request to last byte; RSS growth = the target's peak RSS during the lists (sampled every 20 ms) − its RSS before. The limit program answers with one pre-built body of the same bytes.",
            s.list_pods
        ),
        case_label: "clients",
        metrics: vec![
            m("mb_per_s", "MB/s", true),
            m("list_ms", "latency ms (median list)", false),
            m("body_mb", "body MB", false),
            m("rss_growth_mb", "RSS growth MB", false),
            m("cpu_s", "CPU-s", false),
        ],
        ratio_metrics: vec!["mb_per_s", "rss_growth_mb"],
        scaling_metric: None,
        variants: None,
        versus: None,
    }
}

/// S3: concurrent LIST RV=0 of a large pod list.
pub async fn list(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let nodes = (s.list_pods / 30).max(1);
    let sim = targets::start_sim(env, nodes, s.list_pods).await?;
    let ts = start_targets(env, kinds, &sim, &["pods"]).await?;
    let path = "/api/v1/pods?resourceVersion=0";
    // One list each first: the limit program fetches its body, every target warms up.
    for t in &ts {
        let l = client::list(t.addr, path)
            .await
            .map_err(|e| BenchError::io(format!("warm-up list from {}", t.kind), e))?;
        if l.status != 200 {
            return Err(BenchError::Run(format!("{} answered {}", t.kind, l.status)));
        }
    }
    for &c in &s.list_clients {
        for r in 0..s.repeats {
            for t in &ts {
                tokio::time::sleep(s.pause(0.5)).await;
                let pids = t.pids();
                let before = procs::usage(&pids);
                let peak = PeakRss::start(pids.clone());
                let t0 = Instant::now();
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..c {
                    let addr = t.addr;
                    set.spawn(async move {
                        let t = Instant::now();
                        let l = client::list(addr, path).await;
                        (l, t.elapsed())
                    });
                }
                let (mut bytes, mut lat) = (0u64, Vec::new());
                while let Some(j) = set.join_next().await {
                    let (l, el) = j.map_err(|e| BenchError::Run(e.to_string()))?;
                    let l = l.map_err(|e| BenchError::io(format!("list from {}", t.kind), e))?;
                    if l.status != 200 {
                        return Err(BenchError::Run(format!("{} answered {}", t.kind, l.status)));
                    }
                    bytes += l.bytes;
                    lat.push(el.as_secs_f64() * 1000.0);
                }
                let wall = t0.elapsed().as_secs_f64();
                let peak = peak.finish();
                let after = procs::usage(&pids);
                let sample = Sample {
                    scenario: "S3",
                    case: c.to_string(),
                    target: t.kind,
                    repeat: r,
                    values: vec![
                        ("mb_per_s", bytes as f64 / MB / wall),
                        ("list_ms", super::report::median(&lat)),
                        ("body_mb", bytes as f64 / c as f64 / MB),
                        (
                            "rss_growth_mb",
                            peak.saturating_sub(before.rss_bytes) as f64 / MB,
                        ),
                        ("cpu_s", after.cpu_secs - before.cpu_secs),
                    ],
                };
                eprintln!("  S3 C={c} {} #{r}: {}", t.kind, brief(&sample));
                out.push(sample);
            }
        }
    }
    stop_all(ts).await;
    sim.stop().await;
    Ok(())
}

/// S4 herd.
pub fn herd_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: "S4",
        name: "herd",
        about: format!(
            "{} kubelet-like clients start at once, each a LIST of its node's pods (`resourceVersion=0&fieldSelector=spec.nodeName=<node>`) and then, on the same connection, a WATCH from the list's resourceVersion; a 429 is retried after its Retry-After, as client-go does. For watchmux the clients start the moment the new process listens, before it has synced its {} pods. Upstream requests and MB = LIST (pages included) and WATCH requests the simulator served for pods during the herd and the bytes it sent for them, watchmux's own sync included (its LIST comes in pages of 500); served = the client has its watch's response head; the herd is cut off after {} s (then \"s until all served\" shows that bound and served % is below 100). The simulator has no field index, so every one of its selector LISTs scans all pods: `direct` and `nginx` here are slower than a real kube-apiserver, whose watch cache indexes pods by `spec.nodeName`.",
            s.herd_clients, s.fleet_pods, s.herd_deadline_secs
        ),
        case_label: "clients",
        metrics: vec![
            m("upstream_requests", "upstream requests", false),
            m("upstream_mb", "upstream MB sent", false),
            m("seconds_to_serve_all", "s until all served", false),
            m("served_pct", "served %", true),
            m("retries", "429 retries", false),
        ],
        ratio_metrics: vec!["upstream_requests", "upstream_mb", "seconds_to_serve_all"],
        scaling_metric: None,
        variants: None,
        versus: None,
    }
}

/// One herd client: LIST then WATCH on one connection, retrying 429s and refused connections.
async fn herd_client(
    addr: SocketAddr,
    node: String,
    retries: Arc<std::sync::atomic::AtomicU64>,
    deadline: Instant,
) -> Result<client::Conn, String> {
    let list_path = format!("/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3D{node}");
    loop {
        if Instant::now() > deadline {
            return Err(format!("{node}: not served before the herd's deadline"));
        }
        let mut c = match client::Conn::connect(addr).await {
            Ok(c) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let l = match client::list_on(&mut c, &list_path).await {
            Ok(l) => l,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if l.status == 429 {
            retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(l.retry_after.unwrap_or(1))).await;
            continue;
        }
        if l.status != 200 {
            return Err(format!("{node}: list answered {}", l.status));
        }
        let rv = l.resource_version.unwrap_or_default();
        let w = format!(
            "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&fieldSelector=spec.nodeName%3D{node}"
        );
        if c.get(&w).await.is_err() {
            continue;
        }
        match c.read_head().await {
            Ok(h) if h.status == 200 => return Ok(c),
            Ok(h) if h.status == 429 => {
                retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(h.retry_after.unwrap_or(1))).await;
            }
            Ok(h) => return Err(format!("{node}: watch answered {}", h.status)),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// S4: thousands of clients LIST+WATCH at once right after the target starts.
pub async fn herd(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    sim: &Proc,
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let kinds: Vec<TargetKind> = kinds
        .iter()
        .copied()
        .filter(|k| *k != TargetKind::Limit)
        .collect();
    for r in 0..s.repeats {
        for &kind in &kinds {
            if kind == TargetKind::Nginx && env.nginx.is_none() {
                continue;
            }
            let (l0, w0, b0) = targets::sim_requests(sim.addr, "pods").await?;
            let t0 = Instant::now();
            // watchmux: the herd arrives as soon as the new process listens, before its sync.
            let target = match kind {
                TargetKind::Watchmux => targets::start_watchmux(env, sim, &["pods"]).await?,
                other => targets::start(env, other, sim, &["pods"]).await?,
            };
            let retries = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let deadline = t0 + Duration::from_secs_f64(s.herd_deadline_secs);
            let mut set = tokio::task::JoinSet::new();
            let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY * 2));
            for i in 0..s.herd_clients {
                let (addr, node, retries, gate) = (
                    target.addr,
                    node_name(i % s.fleet_nodes.max(1)),
                    retries.clone(),
                    gate.clone(),
                );
                set.spawn(async move {
                    let _p = gate.acquire_owned().await;
                    tokio::time::timeout_at(
                        deadline.into(),
                        herd_client(addr, node, retries, deadline),
                    )
                    .await
                    .unwrap_or_else(|_| Err("not served before the herd's deadline".into()))
                });
            }
            // Keep every served connection open until all are served (the watches stay up).
            let mut conns = Vec::with_capacity(s.herd_clients);
            let mut secs = 0.0;
            while let Some(j) = set.join_next().await {
                match j.map_err(|e| BenchError::Run(e.to_string()))? {
                    Ok(c) => {
                        conns.push(c);
                        secs = t0.elapsed().as_secs_f64();
                    }
                    // A real answer other than 200/429 is a bug, not slowness.
                    Err(e) if !e.contains("deadline") => return Err(BenchError::Run(e)),
                    Err(_) => {}
                }
            }
            let served = conns.len();
            if served < s.herd_clients {
                secs = s.herd_deadline_secs;
            }
            let (l1, w1, b1) = targets::settled_requests(sim.addr, "pods").await?;
            drop(conns);
            let sample = Sample {
                scenario: "S4",
                case: s.herd_clients.to_string(),
                target: kind,
                repeat: r,
                values: vec![
                    ("upstream_requests", ((l1 - l0) + (w1 - w0)) as f64),
                    ("upstream_lists", (l1 - l0) as f64),
                    ("upstream_watches", (w1 - w0) as f64),
                    ("upstream_mb", (b1 - b0) as f64 / MB),
                    ("seconds_to_serve_all", secs),
                    ("served_pct", 100.0 * served as f64 / s.herd_clients as f64),
                    ("retries", retries.load(Ordering::Relaxed) as f64),
                ],
            };
            eprintln!("  S4 {} #{r}: {}", kind, brief(&sample));
            out.push(sample);
            target.stop().await;
            // The simulator may still be answering LISTs of clients given up on.
            procs::wait_quiet(&[sim.pid()], Duration::from_secs(30)).await;
        }
    }
    Ok(())
}

/// S5 idle.
pub fn idle_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: "S5",
        name: "idle",
        about: format!(
            "{} watchers on all pods from the current resourceVersion, no writes{}; fresh processes for every repeat (and transport). RSS per watcher = (the target's RSS with all watchers connected and settled − its RSS before) ÷ watchers; CPU = the target's CPU over {} s of idling.",
            s.idle_watchers,
            transports_text(s, &s.idle_transports),
            s.window_secs
        ),
        case_label: "watchers",
        metrics: vec![
            m("rss_kb_per_watcher", "RSS KB per watcher", false),
            m("idle_cpu_cores", "idle CPU cores", false),
            m("rss_mb", "RSS MB", false),
        ],
        ratio_metrics: vec!["rss_kb_per_watcher"],
        scaling_metric: None,
        variants: None,
        versus: tls_versus(
            &s.idle_transports,
            vec!["rss_kb_per_watcher", "idle_cpu_cores"],
        ),
    }
}

/// S5: the memory and CPU an idle watcher costs.
pub async fn idle(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let w = s.idle_watchers;
    for r in 0..s.repeats {
        // Fresh processes every repeat and transport: memory freed by the previous run's
        // watchers stays in the allocator and would make the next run's growth look smaller
        // than it is.
        for &tp in &s.idle_transports {
            let kinds_tp = kinds_over(s, kinds, tp);
            if kinds_tp.is_empty() {
                continue;
            }
            let sim = targets::start_sim(env, 50, s.broadcast_pods).await?;
            let launch = Launch {
                tls: tp.is_tls(),
                heap_file: None,
                ..Launch::default()
            };
            let ts = start_targets_with(env, &kinds_tp, &sim, &["pods"], &launch).await?;
            for t in &ts {
                let rv = targets::current_rv(sim.addr, "pods").await?;
                let pids = t.pids();
                tokio::time::sleep(s.pause(0.5)).await;
                let before = procs::usage(&pids);
                let paths = vec![
                    format!(
                        "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
                    );
                    w
                ];
                let watchers = Watchers::connect(t.h1(), paths).await?;
                tokio::time::sleep(s.pause(2.0)).await;
                let u0 = procs::usage(&pids);
                let t0 = Instant::now();
                tokio::time::sleep(Duration::from_secs_f64(s.window_secs)).await;
                let u1 = procs::usage(&pids);
                let secs = t0.elapsed().as_secs_f64();
                let sample = Sample {
                    scenario: "S5",
                    case: tls::case(&w.to_string(), tp),
                    target: t.kind,
                    repeat: r,
                    values: vec![
                        (
                            "rss_kb_per_watcher",
                            u1.rss_bytes.saturating_sub(before.rss_bytes) as f64
                                / 1000.0
                                / w as f64,
                        ),
                        ("idle_cpu_cores", (u1.cpu_secs - u0.cpu_secs) / secs),
                        ("rss_mb", u1.rss_bytes as f64 / MB),
                        (
                            "watchers_ended",
                            watchers.stats.ended.load(Ordering::Relaxed) as f64,
                        ),
                    ],
                };
                eprintln!("  S5 W={w} {} {tp} #{r}: {}", t.kind, brief(&sample));
                out.push(sample);
                watchers.close().await;
            }
            stop_all(ts).await;
            sim.stop().await;
        }
    }
    Ok(())
}

/// S6 sync.
pub fn sync_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: "S6",
        name: "sync",
        about: format!(
            "A new watchmux caching pods syncs {} pods from the simulator (paged LISTs of 500, then a watch): time from start to `/readyz` = 200, MB/s = the pods' JSON (the bytes of the paged lists) ÷ that time, RSS = watchmux's after the sync. The `limit` row is the bench's own client doing the same paged LIST and discarding the bytes: how fast the simulator can hand them out.",
            s.fleet_pods
        ),
        case_label: "pods",
        metrics: vec![
            m("seconds", "seconds", false),
            m("mb_per_s", "MB/s ingested", true),
            m("json_mb", "JSON MB", false),
            m("rss_mb", "RSS MB after sync", false),
            m("rss_per_json", "RSS ÷ JSON", false),
        ],
        ratio_metrics: vec!["seconds"],
        scaling_metric: None,
        variants: None,
        versus: None,
    }
}

/// Pages through `/api/v1/pods` like a reflector's initial list; returns the bytes.
async fn paged_list(addr: SocketAddr) -> Result<u64, BenchError> {
    let mut c = client::Conn::connect(addr)
        .await
        .map_err(|e| BenchError::io("connecting for a paged list", e))?;
    let mut token: Option<String> = None;
    let mut bytes = 0;
    loop {
        let path = match &token {
            Some(t) => format!("/api/v1/pods?limit=500&continue={t}"),
            None => "/api/v1/pods?limit=500".to_string(),
        };
        let l = client::list_on(&mut c, &path)
            .await
            .map_err(|e| BenchError::io("paged list", e))?;
        if l.status != 200 {
            return Err(BenchError::Run(format!("paged list answered {}", l.status)));
        }
        bytes += l.bytes;
        match l.continue_token {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(bytes),
        }
    }
}

/// S6: how fast watchmux ingests a large resource.
pub async fn sync(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    sim: &Proc,
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let case = s.fleet_pods.to_string();
    for r in 0..s.repeats {
        let t0 = Instant::now();
        let json = paged_list(sim.addr).await?;
        let secs = t0.elapsed().as_secs_f64();
        if kinds.contains(&TargetKind::Limit) {
            out.push(Sample {
                scenario: "S6",
                case: case.clone(),
                target: TargetKind::Limit,
                repeat: r,
                values: vec![
                    ("seconds", secs),
                    ("mb_per_s", json as f64 / MB / secs),
                    ("json_mb", json as f64 / MB),
                ],
            });
        }
        if !kinds.contains(&TargetKind::Watchmux) {
            continue;
        }
        let t0 = Instant::now();
        let t = targets::start_watchmux(env, sim, &["pods"]).await?;
        let empty_rss = procs::usage(&t.pids()).rss_bytes;
        t.wait_ready(Duration::from_secs(600)).await?;
        let secs = t0.elapsed().as_secs_f64();
        tokio::time::sleep(s.pause(0.5)).await;
        let rss = procs::usage(&t.pids()).rss_bytes;
        let sample = Sample {
            scenario: "S6",
            case: case.clone(),
            target: TargetKind::Watchmux,
            repeat: r,
            values: vec![
                ("seconds", secs),
                ("mb_per_s", json as f64 / MB / secs),
                ("json_mb", json as f64 / MB),
                ("rss_mb", rss as f64 / MB),
                (
                    "rss_per_json",
                    rss.saturating_sub(empty_rss) as f64 / json as f64,
                ),
            ],
        };
        eprintln!("  S6 watchmux #{r}: {}", brief(&sample));
        out.push(sample);
        t.stop().await;
    }
    Ok(())
}
