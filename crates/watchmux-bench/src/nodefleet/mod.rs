//! S12 node fleet: N simulated nodes, each a kubelet and a kube-proxy reading what the real ones
//! read ([`node`]), every node on one HTTP/2 connection (TLS, or h2c to spare the bench's own
//! CPU), protobuf and watch-lists, against watchmux in front of the simulator and, as the
//! comparison row, against the simulator directly. Each node sends its own bearer token, which
//! the simulator authenticates and authorizes and watchmux reviews through it with delegated
//! authz ([`Authz`]; `--nodefleet-authz none`: no credentials).
//!
//! Each case (a fleet size) runs these phases against a fresh simulator per target, its churn
//! on throughout (pod writes stamped with their write time):
//! (a) cold start: every node at once, watchmux just started (on-demand caches, secrets
//! included, writing its `persist_dir`); (b) watchmux only: stopped (SIGTERM), started again on
//! the directory it left, and every node at once again; (c) steady churn for a window; (d) the
//! upstream down (the simulator refuses connections and drops its watches) for a while, then
//! back, until every informer streams and is synced again. After (d) the churn stops and a sample
//! of nodes is checked against the simulator ([`check`]).
//!
//! Per phase it reports the clients' figures (S12.1), what the phase cost (S12.2) and, for the
//! cold starts, the upstream's requests per kind (S12.3). Drives the fleet and reads counters
//! (`/sim/stats`, watchmux's `/metrics`, `/proc`); processes are [`super::targets`]'.

pub mod check;
pub mod conn;
pub mod counters;
pub mod informer;
pub mod node;
pub mod probe;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::client::Endpoint;
use super::heap;
use super::procs::{self, PeakRss, Proc, Usage};
use super::report::{Sample, ScenarioSpec, fmt_num, variant_case};
use super::scenarios::{MB, brief, drain, m};
use super::scrape::{self, Metrics};
use super::targets::{self, Env, Launch, Target, TargetKind};
use super::tls::Transport;
use super::{BenchError, Sizes};
use counters::{Fleet, Tally};

/// The User-Agent of every request of the fleet.
pub const USER_AGENT: &str = "kubelet/v1.36.0 (linux/amd64) watchmux-bench";
/// The clients' table.
pub const CLIENTS_ID: &str = "S12.1";
/// The costs' table.
pub const COSTS_ID: &str = "S12.2";
/// The upstream requests per kind at the cold starts.
pub const KINDS_ID: &str = "S12.3";

/// Nodes checked for convergence at the end of a run, at most.
const CHECKED_NODES: usize = 50;

/// How the nodes' connections are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// HTTP/2 over TLS (ALPN `h2`), as in production.
    Tls,
    /// HTTP/2 with prior knowledge over plain TCP.
    H2c,
}

impl std::str::FromStr for Wire {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tls" => Ok(Wire::Tls),
            "h2c" => Ok(Wire::H2c),
            other => Err(format!("unknown node transport {other:?} (tls, h2c)")),
        }
    }
}

impl Wire {
    fn name(self) -> &'static str {
        match self {
            Wire::Tls => "HTTP/2 over TLS",
            Wire::H2c => "h2c (HTTP/2 over plain TCP)",
        }
    }
}

/// Whether `spec` is one of S12's tables (their repeats are S12's own).
pub fn reports(spec: &ScenarioSpec) -> bool {
    [CLIENTS_ID, COSTS_ID, KINDS_ID].contains(&spec.id)
}

/// The simulated cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The simulator's flat fleet: 30 pods per node over one namespace per 100 nodes, no
    /// Services, EndpointSlices, ConfigMaps or Secrets of their own.
    Flat,
    /// clusterloader2's load shape (`kube-sim --shape cl2`): 30 pods per node, 100 nodes per
    /// namespace, Deployments with their own ConfigMap and Secret, Services and EndpointSlices,
    /// a Lease per node, a RuntimeClass and a CSIDriver.
    Cl2,
}

impl std::str::FromStr for Shape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "flat" => Ok(Shape::Flat),
            "cl2" => Ok(Shape::Cl2),
            other => Err(format!("unknown fleet shape {other:?} (flat, cl2)")),
        }
    }
}

/// Who the nodes are to the servers they read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authz {
    /// Nobody: no tokens, the simulator serves everyone, watchmux runs `authz = "none"` (on
    /// loopback).
    None,
    /// Each node sends its own bearer token (`node-token-<node>`), which the simulator
    /// authenticates and authorizes (`kube-sim --node-tokens`, a node-authorizer-like policy);
    /// watchmux runs `authz = "delegated"`, reviewing each node's token and reads with the
    /// simulator (TokenReview, SubjectAccessReview, cached) as [`ADMIN_TOKEN`], its own
    /// credential. The probe and the convergence check use [`ADMIN_TOKEN`] too.
    Delegated,
}

impl std::str::FromStr for Authz {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Authz::None),
            "delegated" => Ok(Authz::Delegated),
            other => Err(format!("unknown node authz {other:?} (none, delegated)")),
        }
    }
}

impl Authz {
    /// The bearer token of node `name`, if it has one.
    fn node_token(self, name: &str) -> Option<String> {
        (self == Authz::Delegated).then(|| kube_sim::authz::node_token(name))
    }

    /// The token of the probe, the convergence check and watchmux, if they have one.
    fn admin_token(self) -> Option<&'static str> {
        (self == Authz::Delegated).then_some(ADMIN_TOKEN)
    }
}

/// The simulator's admin token with [`Authz::Delegated`] (`kube-sim --node-tokens`): watchmux's
/// own credential, the probe's and the convergence check's.
pub const ADMIN_TOKEN: &str = "watchmux-bench-admin";

/// watchmux's counter of its review-cache lookups, by `review` and `result`.
const AUTHZ_LOOKUPS: &str = "watchmux_authz_cache_requests_total";

/// The simulator's flags for `nodes` nodes of `shape`, its policy as `authz` says.
pub fn sim_args(nodes: usize, shape: Shape, authz: Authz) -> Vec<String> {
    let mut a: Vec<String> = match shape {
        Shape::Flat => vec![
            "--nodes".into(),
            nodes.to_string(),
            "--pods".into(),
            (30 * nodes).to_string(),
            "--namespaces".into(),
            nodes.div_ceil(100).to_string(),
        ],
        Shape::Cl2 => vec![
            "--shape".into(),
            "cl2".into(),
            "--nodes".into(),
            nodes.to_string(),
        ],
    };
    a.extend(["--seed".into(), "1".into()]);
    if authz == Authz::Delegated {
        a.extend(["--node-tokens".into(), ADMIN_TOKEN.into()]);
    }
    a
}

/// A phase of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Every node at once, the target just started.
    Cold,
    /// Every node at once, watchmux restarted on its `persist_dir`.
    Persisted,
    /// The fleet running under churn.
    Steady,
    /// The upstream down, then back.
    Outage,
}

impl Phase {
    /// Its name in a case (`500 · cold start`).
    pub fn label(self) -> &'static str {
        match self {
            Phase::Cold => "cold start",
            Phase::Persisted => "restart on persist_dir",
            Phase::Steady => "steady churn",
            Phase::Outage => "upstream down",
        }
    }
}

/// The case of `phase` at `nodes` nodes.
pub fn case(nodes: usize, phase: Phase) -> String {
    variant_case(&nodes.to_string(), phase.label())
}

/// The simulator's `/sim/stats` keys of the kinds the fleet reads and writes.
const KINDS: [&str; 9] = [
    "pods",
    "nodes",
    "services",
    "endpointslices.discovery.k8s.io",
    "configmaps",
    "secrets",
    "runtimeclasses.node.k8s.io",
    "csidrivers.storage.k8s.io",
    "leases.coordination.k8s.io",
];

/// The three tables of S12.
pub fn specs(s: &Sizes) -> Vec<ScenarioSpec> {
    let sizes: Vec<String> = s
        .nodefleet_nodes
        .iter()
        // Counts: no decimals below 1,000 (fmt_num's three digits would show 5 as 5.00).
        .map(|&n| {
            if n < 1000 {
                n.to_string()
            } else {
                fmt_num(n as f64)
            }
        })
        .collect();
    let common = format!(
        "{} nodes (cases `N · phase`), cluster shape `{}` (`kube-sim {}` for N nodes), {} pod writes/s of the simulator's churn throughout ({}; each stamps its write time). Each node is a kubelet (its pods by `spec.nodeName`, its Node, Services `spec.clusterIP!=None`, RuntimeClasses, CSIDrivers, one informer per ConfigMap and Secret its pods reference, opened and closed with the pods, `kube-root-ca.crt` included; a Lease PUT every 10 s) and a kube-proxy (Services and EndpointSlices without `service.kubernetes.io/service-proxy-name` and `service.kubernetes.io/headless`, its Node), all on one {} connection per node, in protobuf; every informer starts with a watch-list (ending at the `k8s.io/initial-events-end` bookmark), re-watches from its last resourceVersion when a stream ends, relists on 410 and waits `Retry-After` on 429. Targets: `watchmux` (on-demand caches, `core/secrets` included, `persist_dir` set) and `direct` (the simulator itself, a fresh one per target).{} Phases: cold start = every node at once against a just-started target, until every informer has synced; restart on persist_dir = watchmux stopped with SIGTERM and started on the directory it wrote, then every node at once again (watchmux only); steady churn = {} s; upstream down = the simulator refuses connections and drops its watches for {} s, then until every informer streams and is synced again.",
        sizes.join(", "),
        match s.nodefleet_shape {
            Shape::Flat => "flat",
            Shape::Cl2 => "cl2",
        },
        sim_args(1, s.nodefleet_shape, s.nodefleet_authz)
            .join(" ")
            .replace("--nodes 1", "--nodes N")
            .replace("--pods 30", "--pods 30·N")
            .replace("--namespaces 1", "--namespaces N/100"),
        s.nodefleet_churn,
        match s.nodefleet_shape {
            Shape::Flat => "status updates, relabels, moves between nodes, creates, deletes",
            Shape::Cl2 =>
                "Deployments scaled as clusterloader2's load test scales them, through their pods' creates, binds, runs and deletes, and kubelet status updates",
        },
        s.nodefleet_wire.name(),
        match s.nodefleet_authz {
            Authz::None =>
                " No credentials: the simulator serves everyone and watchmux runs `authz = \"none\"` (on loopback).",
            Authz::Delegated =>
                " Each node sends its own bearer token on every request (`node-token-<node>`), which the simulator (`--node-tokens`) authenticates as `system:node:<node>` in `system:nodes` and authorizes, as a cluster's node authorizer, simplified: that group may read everything and write Leases, pod and node status and Events; watchmux runs `server.authz = \"delegated\"` with the simulator's admin token as its own credential, so each read it answers from its cache is first authenticated (TokenReview) and authorized (SubjectAccessReview: user, verb, resource, namespace and, for the kubelet's per-object ConfigMap and Secret watches, the object's name) through the simulator, the verdicts cached with its default `server.authz_*` settings (300 s allowed, 30 s denied), while what it passes through goes with the node's own token. The probe and the convergence check use the admin token. `direct`: the simulator authenticates and authorizes each node's request itself.",
        },
        s.nodefleet_window_secs,
        s.nodefleet_outage_secs,
    );
    vec![
        ScenarioSpec::table(
            CLIENTS_ID,
            "node fleet: what the nodes saw",
            format!(
                "{common} Sync s = from the first node's start until every informer of every node has synced (cold starts); recover s = from the upstream's return until every informer streams and is synced again. Initial MB = watch body bytes the nodes received during the cold start; MB/s = that ÷ sync s. Informers = running at the phase's end (fixed ones and per-object ones). Delivery = write-time annotation → receipt by a node, for the writes stamped during the phase (received until 1 s of quiet after it). GET/LIST p99 = the read probe ([`probe`]: a Node by GET, a node's pods by LIST, with and without `resourceVersion=0`, 4/s on its own connection); SLO: 1 s for a single object, 30 s for a list. Lease p99 = the nodes' Lease writes (SLO for mutating calls: 1 s). 429s = watch, Lease and probe requests answered 429; 504 events = ERROR events 504 `Too large resource version` (kube's answer, retry after 1 s, to a watch-list its watch cache could not prove fresh in time; re-watched after a back-off); 410s = watch requests answered 410 and ERROR events with code 410; relists = watch-lists after an informer's first; terminated = streams the server ended before their `timeoutSeconds` or that broke; errors = other statuses and ERROR events. Converged % = of up to {CHECKED_NODES} nodes checked against the simulator after the last phase (churn stopped), those whose clients hold exactly the node's pods, one synced informer per ConfigMap/Secret those pods reference holding the object when it exists, and every other informer synced."
            ),
            "nodes · phase",
            vec![
                m("sync_s", "sync s", false),
                m("recover_s", "recover s", false),
                m("initial_mb", "initial MB", false),
                m("initial_mb_per_s", "initial MB/s", true),
                m("informers", "informers", false),
                m("deliveries", "deliveries", true),
                m("p50_ms", "delivery p50 ms", false),
                m("p99_ms", "delivery p99 ms", false),
                m("max_ms", "delivery max ms", false),
                m("get_p99_ms", "GET p99 ms", false),
                m("list_p99_ms", "LIST p99 ms", false),
                m("lease_p99_ms", "Lease p99 ms", false),
                m("r429", "429s", false),
                m("r504", "504 events", false),
                m("gone_410", "410s", false),
                m("relists", "relists", false),
                m("terminated", "terminated", false),
                m("errors", "errors", false),
                m("converged_pct", "converged %", true),
            ],
        ),
        ScenarioSpec::table(
            COSTS_ID,
            "node fleet: what it cost",
            format!(
                "The same runs as {CLIENTS_ID}. Upstream watches back s = after the outage, from the upstream's return until watchmux's own upstream watches are all up again (`watchmux_upstream_watch_up`; for `direct`, recover s: the nodes are the simulator's watchers). Upstream requests, MB = what the simulator served during the phase (`/sim/stats`: every request, response bytes), watches open = its open watches at the phase's end, connections = TCP connections established to it then (`/proc/net/tcp`; for `direct`, the nodes' own). CPU, RSS: the target's processes (`direct`: the simulator); CPU cores = CPU-seconds ÷ the phase's seconds (for the cold starts from the process's start); peak RSS sampled every 20 ms; KB/informer = RSS at the end ÷ informers running; stored MB = watchmux's objects' stored bodies at the end (`watchmux_cache_bytes`, all kinds; – for `direct`), KB/informer beyond them = (RSS − stored) ÷ informers (the target: at most 4); heap MB = watchmux's live heap then (the bytes its allocator was asked for and not given back, counted by the bench binary's counting allocator; – for `direct`), and the same per informer beyond the stored bodies: RSS beyond the heap is the allocator's own (pages it keeps, fragmentation), thread stacks and code. Watchers closed = watchmux's `watchmux_slow_watchers_closed_total`; reflector requests and relists = its `watchmux_upstream_requests_total` (LIST pages and WATCHes of its caches, whatever the answer) and `watchmux_upstream_relists_total` (the upstream requests above also count refused connections' requests, the requests passed through and the freshness checks). Reads from the cache, passed through, refused = its `watchmux_reads_total` by `source` (refused: its own 429s, a cache not ready or a limit); freshness requests = its `watchmux_upstream_requests_total{{verb=\"freshness\"}}` (the upstream requests proving consistent reads fresh). Authz hit % = of watchmux's delegated-authz cache lookups during the phase (`watchmux_authz_cache_requests_total`, TokenReviews and SubjectAccessReviews together), those answered without a review of their own (`hit`, or `shared`: waited for a concurrent lookup's review of the same key) (– without lookups: `--nodefleet-authz none`, or `direct`); every read it answers looks its token up once (nearly always a hit after each node's first) and its access once, so SAR cache hit % = the same of the SubjectAccessReview lookups alone (one key per node and read: the kubelet's per-object watches are keyed by the object's name too); upstream TokenReviews and SubjectAccessReviews = the reviews the simulator answered during the phase (`/sim/stats`: `tokenReviews`, `subjectAccessReviews`; watchmux's misses, – for `direct`, whose simulator authorizes in-process). Simulator CPU (upstream, for watchmux) and the bench's own CPU (every node's client in one process: when it nears the 2 cores the clients are the limit), both in cores."
            ),
            "nodes · phase",
            vec![
                m("secs", "phase s", false),
                m("up_recover_s", "upstream watches back s", false),
                m("up_requests", "upstream requests", false),
                m("up_mb", "upstream MB", false),
                m("up_watches", "upstream watches open", false),
                m("up_conns", "upstream connections", false),
                m("cpu_cores", "CPU cores", false),
                m("cpu_s", "CPU s", false),
                m("rss_mb", "RSS MB", false),
                m("peak_rss_mb", "peak RSS MB", false),
                m("kb_per_informer", "KB/informer", false),
                m("stored_mb", "stored MB", false),
                m("kb_beyond_stored", "KB/informer beyond stored", false),
                m("heap_mb", "heap MB", false),
                m(
                    "heap_kb_beyond_stored",
                    "heap KB/informer beyond stored",
                    false,
                ),
                m("watchers_closed", "watchers closed", false),
                m("reflector_requests", "reflector requests", false),
                m("reflector_relists", "reflector relists", false),
                m("reads_cache", "reads from the cache", false),
                m("reads_passed", "reads passed through", false),
                m("reads_refused", "reads refused (429)", false),
                m("freshness_requests", "freshness requests", false),
                m("authz_hit_pct", "authz hit %", true),
                m("access_hit_pct", "SAR cache hit %", true),
                m("up_token_reviews", "upstream TokenReviews", false),
                m("up_access_reviews", "upstream SubjectAccessReviews", false),
                m("sim_cpu_cores", "simulator CPU cores", false),
                m("client_cpu_cores", "bench clients CPU cores", false),
            ],
        ),
        ScenarioSpec::table(
            KINDS_ID,
            "node fleet: upstream requests per kind at the cold starts",
            format!(
                "The same runs as {CLIENTS_ID}: what the simulator served for each kind the fleet reads or writes during each cold start (`/sim/stats`): LISTs, WATCHes, other requests (GET, POST, PUT), MB sent, and its watches open at the phase's end."
            ),
            "nodes · phase · kind",
            vec![
                m("lists", "LISTs", false),
                m("watches", "WATCHes", false),
                m("other", "other", false),
                m("mb", "MB", false),
                m("open", "watches open", false),
            ],
        ),
    ]
}

/// A running fleet: every node and the probe.
struct Running {
    fleet: Arc<Fleet>,
    nodes: Vec<node::Node>,
    tasks: TaskTracker,
    stop: CancellationToken,
    started: Instant,
}

impl Running {
    /// Starts `n` nodes at once, and the probe, against `ep`, counting in `fleet`; their
    /// credentials as `authz` says.
    fn start(ep: &Endpoint, n: usize, authz: Authz, fleet: Arc<Fleet>) -> Running {
        let tasks = TaskTracker::new();
        let stop = CancellationToken::new();
        let started = Instant::now();
        let nodes = (0..n)
            .map(|i| {
                let name = kube_sim::fleet::node_name(i);
                let token = authz.node_token(&name);
                node::start(
                    name,
                    ep.clone(),
                    token.as_deref(),
                    fleet.clone(),
                    &tasks,
                    stop.child_token(),
                )
            })
            .collect();
        probe::start(
            &tasks,
            ep.clone(),
            authz.admin_token(),
            n,
            fleet.clone(),
            stop.child_token(),
        );
        Running {
            fleet,
            nodes,
            tasks,
            stop,
            started,
        }
    }

    /// Stops every task (bounded).
    async fn stop(self) {
        self.stop.cancel();
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.tasks.wait()).await;
    }
}

/// What a phase starts from.
struct Before {
    at: Instant,
    tally: Tally,
    stamped: u64,
    sim: Value,
    metrics: Option<Metrics>,
    target: Usage,
    sim_usage: Usage,
    me: Usage,
}

/// One target's run: the simulator, the target, the clients' endpoint.
struct Run<'a> {
    s: &'a Sizes,
    sim: &'a Proc,
    nodes: usize,
    kind: TargetKind,
}

/// What a phase measured besides the counters.
#[derive(Default)]
struct Extra {
    sync_s: Option<f64>,
    recover_s: Option<f64>,
    up_recover_s: Option<f64>,
    converged_pct: Option<f64>,
}

impl Run<'_> {
    /// The snapshot a phase starts from; `fresh`: the target's processes started for this phase
    /// (their CPU counts from their start).
    async fn before(
        &self,
        fleet: &Fleet,
        target: &Target,
        fresh: bool,
    ) -> Result<Before, BenchError> {
        fleet.reset_latencies();
        let stamped = fleet.stats.stamped_in_window.load(Ordering::Relaxed);
        fleet.stats.window.open();
        Ok(Before {
            at: Instant::now(),
            tally: fleet.counts.tally(),
            stamped,
            sim: targets::sim_stats(self.sim.addr).await?,
            metrics: self.metrics(target).await,
            target: if fresh {
                Usage::default()
            } else {
                procs::usage(&target.pids())
            },
            sim_usage: procs::usage(&[self.sim.pid()]),
            me: procs::usage(&[0]),
        })
    }

    async fn metrics(&self, target: &Target) -> Option<Metrics> {
        if target.kind != TargetKind::Watchmux {
            return None;
        }
        scrape::scrape_at(&target.h1()).await.ok()
    }

    /// The figures of a phase that began at `b`; pushes its samples.
    #[allow(
        clippy::too_many_arguments,
        reason = "one call per phase, each argument named there"
    )]
    async fn after(
        &self,
        b: Before,
        phase: Phase,
        fleet: &Fleet,
        target: &Target,
        peak: PeakRss,
        extra: Extra,
        repeat: usize,
        out: &mut Vec<Sample>,
    ) -> Result<(), BenchError> {
        fleet.stats.window.close();
        let secs = b.at.elapsed().as_secs_f64();
        let (u1, s1, me1) = (
            procs::usage(&target.pids()),
            procs::usage(&[self.sim.pid()]),
            procs::usage(&[0]),
        );
        let peak = peak.finish();
        drain(
            &fleet.stats,
            u64::MAX,
            Duration::from_secs(1),
            Duration::from_secs(10),
        )
        .await;
        let t = fleet.counts.tally().since(&b.tally);
        let sim = targets::sim_stats(self.sim.addr).await?;
        let metrics = self.metrics(target).await;
        let mut ports = vec![self.sim.addr.port()];
        ports.extend(self.sim.tls_addr.map(|a| a.port()));
        let up_conns = procs::established_to(&ports);
        let informers = Fleet::gauge(&fleet.informers).max(0) as f64;
        let ms = |h: &super::hist::Histogram| {
            if h.count() == 0 {
                f64::NAN
            } else {
                h.quantile(0.99) as f64 / 1000.0
            }
        };
        let lat = &fleet.stats.latency;
        let opt = |x: Option<f64>| x.unwrap_or(f64::NAN);
        let initial_mb = t.bytes as f64 / MB;
        let cold = matches!(phase, Phase::Cold | Phase::Persisted);
        let clients = vec![
            ("sync_s", opt(extra.sync_s)),
            ("recover_s", opt(extra.recover_s)),
            ("initial_mb", if cold { initial_mb } else { f64::NAN }),
            (
                "initial_mb_per_s",
                match (cold, extra.sync_s) {
                    (true, Some(s)) if s > 0.0 => initial_mb / s,
                    _ => f64::NAN,
                },
            ),
            ("informers", informers),
            (
                "deliveries",
                fleet
                    .stats
                    .stamped_in_window
                    .load(Ordering::Relaxed)
                    .saturating_sub(b.stamped) as f64,
            ),
            ("p50_ms", quantile_ms(lat, 0.5)),
            ("p99_ms", quantile_ms(lat, 0.99)),
            (
                "max_ms",
                if lat.count() == 0 {
                    f64::NAN
                } else {
                    lat.max() as f64 / 1000.0
                },
            ),
            ("get_p99_ms", ms(&fleet.get_latency)),
            ("list_p99_ms", ms(&fleet.list_latency)),
            ("lease_p99_ms", ms(&fleet.lease_latency)),
            ("r429", (t.watch_429 + t.lease_429 + t.probe_429) as f64),
            ("r504", t.error_504 as f64),
            ("gone_410", t.gone_410 as f64),
            ("relists", t.relists as f64),
            ("terminated", (t.ended_early + t.broken) as f64),
            ("errors", (t.watch_other_status + t.error_events) as f64),
            ("converged_pct", opt(extra.converged_pct)),
        ];
        let total = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
        let open = open_watches(&sim);
        let cpu_s = u1.cpu_secs - b.target.cpu_secs;
        let labelled_delta = |name: &str, labels: &[(&str, &str)]| match (&metrics, &b.metrics) {
            (Some(a), Some(z)) => a.sum(name, labels) - z.sum(name, labels),
            (Some(a), None) => a.sum(name, labels),
            _ => f64::NAN,
        };
        let metric_delta = |name: &str| labelled_delta(name, &[]);
        // Its live heap at the phase's end (NaN for `direct`).
        let heap = target
            .heap_file()
            .and_then(heap::read_file)
            .map_or(f64::NAN, |b| b as f64);
        // The objects' stored bodies at the phase's end (NaN without watchmux's metrics).
        let stored = metrics
            .as_ref()
            .map_or(f64::NAN, |a| a.sum("watchmux_cache_bytes", &[]));
        // The simulator's reviews (watchmux's; `direct` makes none).
        let reviews = |k: &str| {
            if self.kind == TargetKind::Watchmux {
                total(&sim, k).saturating_sub(total(&b.sim, k)) as f64
            } else {
                f64::NAN
            }
        };
        let reads = |source: &str| labelled_delta("watchmux_reads_total", &[("source", source)]);
        let costs = vec![
            ("secs", secs),
            ("up_recover_s", opt(extra.up_recover_s)),
            (
                "up_requests",
                total(&sim, "requests").saturating_sub(total(&b.sim, "requests")) as f64,
            ),
            (
                "up_mb",
                total(&sim, "bytesSent").saturating_sub(total(&b.sim, "bytesSent")) as f64 / MB,
            ),
            ("up_watches", open as f64),
            ("up_conns", up_conns as f64),
            ("cpu_cores", cpu_s / secs),
            ("cpu_s", cpu_s),
            ("rss_mb", u1.rss_bytes as f64 / MB),
            ("peak_rss_mb", peak.max(u1.rss_bytes) as f64 / MB),
            (
                "kb_per_informer",
                u1.rss_bytes as f64 / 1000.0 / informers.max(1.0),
            ),
            ("stored_mb", stored / MB),
            (
                "kb_beyond_stored",
                (u1.rss_bytes as f64 - stored) / 1000.0 / informers.max(1.0),
            ),
            ("heap_mb", heap / MB),
            (
                "heap_kb_beyond_stored",
                (heap - stored) / 1000.0 / informers.max(1.0),
            ),
            (
                "watchers_closed",
                metric_delta("watchmux_slow_watchers_closed_total"),
            ),
            (
                "reflector_requests",
                metric_delta("watchmux_upstream_requests_total"),
            ),
            (
                "reflector_relists",
                metric_delta("watchmux_upstream_relists_total"),
            ),
            ("reads_cache", reads("cache")),
            ("reads_passed", reads("pass_through")),
            ("reads_refused", reads("refused")),
            (
                "freshness_requests",
                labelled_delta("watchmux_upstream_requests_total", &[("verb", "freshness")]),
            ),
            ("authz_hit_pct", {
                let lookups = |r: &str| labelled_delta(AUTHZ_LOOKUPS, &[("result", r)]);
                hit_pct(lookups("hit") + lookups("shared"), lookups("miss"))
            }),
            ("access_hit_pct", {
                let lookups =
                    |r: &str| labelled_delta(AUTHZ_LOOKUPS, &[("review", "access"), ("result", r)]);
                hit_pct(lookups("hit") + lookups("shared"), lookups("miss"))
            }),
            ("up_token_reviews", reviews("tokenReviews")),
            ("up_access_reviews", reviews("subjectAccessReviews")),
            ("sim_cpu_cores", (s1.cpu_secs - b.sim_usage.cpu_secs) / secs),
            ("client_cpu_cores", (me1.cpu_secs - b.me.cpu_secs) / secs),
        ];
        let c = case(self.nodes, phase);
        if let Some(m) = &metrics {
            eprintln!(
                "  {c} {}: reads passed through or refused: {}",
                self.kind,
                not_from_cache(m, b.metrics.as_ref())
            );
            eprintln!(
                "  {c} {}: freshness checks: {}",
                self.kind,
                freshness_outcomes(m, b.metrics.as_ref())
            );
            eprintln!(
                "  {c} {}: answers other than 2xx: {}",
                self.kind,
                failed_answers(m, b.metrics.as_ref())
            );
        }
        for (id, values) in [(CLIENTS_ID, clients), (COSTS_ID, costs)] {
            let sample = Sample {
                scenario: id,
                case: c.clone(),
                target: self.kind,
                repeat,
                values,
            };
            eprintln!("  {id} {c} {} #{repeat}: {}", self.kind, brief(&sample));
            out.push(sample);
        }
        if cold {
            for k in KINDS {
                let d = |f: &str| {
                    sim["resources"][k][f]
                        .as_u64()
                        .unwrap_or(0)
                        .saturating_sub(b.sim["resources"][k][f].as_u64().unwrap_or(0))
                        as f64
                };
                out.push(Sample {
                    scenario: KINDS_ID,
                    case: variant_case(&c, k),
                    target: self.kind,
                    repeat,
                    values: vec![
                        ("lists", d("listRequests")),
                        ("watches", d("watchRequests")),
                        ("other", d("otherRequests")),
                        ("mb", d("bytesSent") / MB),
                        (
                            "open",
                            sim["resources"][k]["openWatches"].as_i64().unwrap_or(0) as f64,
                        ),
                    ],
                });
            }
        }
        Ok(())
    }
}

/// watchmux's reads not answered from its cache during a phase (`after` less `before`), by
/// source, verb, resource and reason: `pass_through/watch/configmaps/not_fresh=12, …`.
fn not_from_cache(after: &Metrics, before: Option<&Metrics>) -> String {
    breakdown(
        after,
        before,
        "watchmux_reads_total",
        &["source", "verb", "resource", "reason"],
        |ls| Metrics::label(ls, "source") != "cache",
    )
}

/// watchmux's answers during a phase whose code was not 2xx (`watchmux_requests_total`), by
/// verb, resource and code: what the clients' errors and 429s were.
fn failed_answers(after: &Metrics, before: Option<&Metrics>) -> String {
    breakdown(
        after,
        before,
        "watchmux_requests_total",
        &["verb", "resource", "code"],
        |ls| !Metrics::label(ls, "code").starts_with('2'),
    )
}

/// The phase's freshness checks by resource and outcome (`watchmux_freshness_checks_total`),
/// then their total seconds and the readers that waited for them, by resource.
fn freshness_outcomes(after: &Metrics, before: Option<&Metrics>) -> String {
    let of = |name| breakdown(after, before, name, &["resource"], |_| true);
    format!(
        "{}; seconds {}; readers {}",
        breakdown(
            after,
            before,
            "watchmux_freshness_checks_total",
            &["resource", "outcome"],
            |_| true,
        ),
        of("watchmux_freshness_check_duration_seconds_sum"),
        of("watchmux_freshness_waits_total"),
    )
}

/// A counter's growth over the phase per combination of `keys` (labels joined by `/`), for the
/// series `keep` accepts; `none` when nothing grew.
fn breakdown(
    after: &Metrics,
    before: Option<&Metrics>,
    name: &str,
    keys: &[&str],
    keep: impl Fn(&[(String, String)]) -> bool,
) -> String {
    scrape::show_growth(&scrape::growth(after, before, name, keys, keep))
}

/// The simulator's open watches over every resource, in a `/sim/stats` answer.
fn open_watches(stats: &Value) -> i64 {
    stats["resources"]
        .as_object()
        .map(|r| {
            r.values()
                .map(|x| x["openWatches"].as_i64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

/// A quantile of a latency histogram in ms; NaN when empty.
fn quantile_ms(h: &super::hist::Histogram, q: f64) -> f64 {
    if h.count() == 0 {
        f64::NAN
    } else {
        h.quantile(q) as f64 / 1000.0
    }
}

/// `hits` ÷ (`hits` + `misses`), %; NaN without lookups (or without counts: NaN in).
fn hit_pct(hits: f64, misses: f64) -> f64 {
    let all = hits + misses;
    if all > 0.0 {
        100.0 * hits / all
    } else {
        f64::NAN
    }
}

/// The clients' endpoint of `t` over `wire`.
fn endpoint(t: &Target, wire: Wire) -> Endpoint {
    match wire {
        Wire::Tls => t.endpoint(Transport::H2),
        Wire::H2c => Endpoint::plain(t.addr),
    }
}

/// Runs S12: every size, repeat and target.
pub async fn run(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    for &n in &s.nodefleet_nodes {
        for r in 0..s.nodefleet_repeats.max(1) {
            for kind in [TargetKind::Watchmux, TargetKind::Direct] {
                if !kinds.contains(&kind) {
                    continue;
                }
                let args = sim_args(n, s.nodefleet_shape, s.nodefleet_authz);
                let sim = targets::start_sim_args(env, &args).await?;
                let run = Run {
                    s,
                    sim: &sim,
                    nodes: n,
                    kind,
                };
                let result = async {
                    targets::set_churn(sim.addr, s.nodefleet_churn, "realistic").await?;
                    match kind {
                        TargetKind::Watchmux => run.watchmux(env, r, out).await,
                        _ => run.direct(env, r, out).await,
                    }
                }
                .await;
                sim.stop().await;
                result?;
            }
        }
    }
    Ok(())
}

impl Run<'_> {
    fn sync_bound(&self) -> Duration {
        Duration::from_secs_f64(self.s.nodefleet_sync_timeout_secs)
    }

    /// Starts every node against `t` and waits for their sync (phase `phase`; `fresh`: the
    /// target was started for it, and its CPU counts from its start).
    async fn cold(
        &self,
        t: &Target,
        phase: Phase,
        fresh: bool,
        repeat: usize,
        out: &mut Vec<Sample>,
    ) -> Result<Running, BenchError> {
        let fleet = Arc::new(Fleet::default());
        let b = self.before(&fleet, t, fresh).await?;
        let peak = PeakRss::start(t.pids());
        let mut running = Running::start(
            &endpoint(t, self.s.nodefleet_wire),
            self.nodes,
            self.s.nodefleet_authz,
            fleet,
        );
        let sync = running.fleet.until(self.sync_bound(), Fleet::synced).await;
        if sync.is_none() {
            eprintln!(
                "  S12: {} informers of {} not synced after {:?} (first error: {:?})",
                Fleet::gauge(&running.fleet.pending_sync),
                Fleet::gauge(&running.fleet.informers),
                self.sync_bound(),
                running.fleet.first_error.lock()
            );
        }
        let extra = Extra {
            sync_s: sync.map(|_| running.started.elapsed().as_secs_f64()),
            ..Extra::default()
        };
        let fleet = running.fleet.clone();
        self.after(b, phase, &fleet, t, peak, extra, repeat, out)
            .await?;
        if let Some(e) = fleet.first_error.lock().as_deref() {
            eprintln!("  S12 {} {phase:?}: first client error: {e}", self.kind);
        }
        running.started = Instant::now();
        Ok(running)
    }

    /// Phases (c) and (d), then the convergence check; stops the fleet.
    async fn steady_and_outage(
        &self,
        t: &Target,
        running: Running,
        repeat: usize,
        out: &mut Vec<Sample>,
    ) -> Result<(), BenchError> {
        let fleet = running.fleet.clone();
        let b = self.before(&fleet, t, false).await?;
        let peak = PeakRss::start(t.pids());
        tokio::time::sleep(Duration::from_secs_f64(self.s.nodefleet_window_secs)).await;
        self.after(
            b,
            Phase::Steady,
            &fleet,
            t,
            peak,
            Extra::default(),
            repeat,
            out,
        )
        .await?;

        let b = self.before(&fleet, t, false).await?;
        let peak = PeakRss::start(t.pids());
        let down = Duration::from_secs_f64(self.s.nodefleet_outage_secs);
        let back = targets::upstream_outage(self.sim.addr, down).await?;
        let recover = running
            .fleet
            .until(self.sync_bound(), Fleet::streaming)
            .await;
        let extra_recover = recover.map(|_| back.elapsed().as_secs_f64());
        // And watchmux's own upstream watches up again (`watchmux_upstream_watch_up` 1 for every
        // kind it caches); the simulator's watchers are the nodes themselves.
        let mut up_recover = extra_recover;
        if t.kind == TargetKind::Watchmux {
            up_recover = None;
            while back.elapsed() < self.sync_bound() {
                if let Some(m) = self.metrics(t).await {
                    let up = m.series("watchmux_upstream_watch_up");
                    if !up.is_empty() && up.iter().all(|(_, v)| *v == 1.0) {
                        up_recover = Some(back.elapsed().as_secs_f64());
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // Deliveries of what was written meanwhile.
        tokio::time::sleep(Duration::from_secs(1)).await;

        // The check, churn stopped.
        targets::set_churn(self.sim.addr, 0.0, "realistic").await?;
        let which = check::sample(self.nodes, CHECKED_NODES);
        let outcome = check::converged(
            self.sim.addr,
            self.s.nodefleet_authz.admin_token(),
            &running.nodes,
            &which,
            Duration::from_secs(30),
        )
        .await;
        if let Some(why) = &outcome.first_mismatch
            && outcome.converged < outcome.checked
        {
            eprintln!("  S12: not converged: {why}");
        }
        let extra = Extra {
            recover_s: extra_recover,
            up_recover_s: up_recover,
            converged_pct: Some(100.0 * outcome.converged as f64 / outcome.checked.max(1) as f64),
            ..Extra::default()
        };
        self.after(b, Phase::Outage, &fleet, t, peak, extra, repeat, out)
            .await?;
        if let Some(e) = fleet.first_error.lock().as_deref() {
            eprintln!("  S12 {}: first client error: {e}", self.kind);
        }
        running.stop().await;
        Ok(())
    }

    /// watchmux: cold start, restart on its persist_dir, steady churn, upstream down.
    async fn watchmux(
        &self,
        env: &Env,
        repeat: usize,
        out: &mut Vec<Sample>,
    ) -> Result<(), BenchError> {
        let dir = env.workdir.join(format!(
            "persist-{}-{}-{repeat}",
            self.nodes,
            self.sim.addr.port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
        let cache = format!(
            "mode = \"on-demand\"\ninclude = [\"*/*\", \"core/secrets\"]\npersist_dir = \"{}\"\n",
            dir.display()
        );
        let authz = self.s.nodefleet_authz;
        // Its live heap, beside its RSS (each start counts from its own).
        let heap_file = env
            .workdir
            .join(format!("heap-s12-{}-{repeat}.txt", self.nodes));
        let launch = Launch {
            tls: self.s.nodefleet_wire == Wire::Tls,
            heap_file: Some(heap_file.clone()),
            upstream_token: authz.admin_token().map(str::to_string),
            server_extra: match authz {
                Authz::None => String::new(),
                Authz::Delegated => "authz = \"delegated\"\n".into(),
            },
            ..Launch::default()
        };
        let start = || {
            let _ = std::fs::remove_file(&heap_file);
            targets::start_watchmux_full(env, self.sim, &[], &cache, None, &launch)
        };
        let t = start().await?;
        let first = self.cold(&t, Phase::Cold, true, repeat, out).await;
        let first = match first {
            Ok(f) => f,
            Err(e) => {
                t.stop().await;
                return Err(e);
            }
        };
        first.stop().await;
        if !t.terminate(Duration::from_secs(30)).await {
            eprintln!("  S12: watchmux did not stop within 30 s of SIGTERM: killed");
        }
        let t = start().await?;
        let result = async {
            let running = self.cold(&t, Phase::Persisted, true, repeat, out).await?;
            self.steady_and_outage(&t, running, repeat, out).await
        }
        .await;
        t.stop().await;
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    /// The simulator directly: cold start, steady churn, upstream down.
    async fn direct(
        &self,
        env: &Env,
        repeat: usize,
        out: &mut Vec<Sample>,
    ) -> Result<(), BenchError> {
        let launch = Launch {
            tls: self.s.nodefleet_wire == Wire::Tls,
            ..Launch::default()
        };
        let t = targets::start_with(env, TargetKind::Direct, self.sim, &[], &launch).await?;
        // The simulator started before the phase: its CPU counts from the phase's start.
        let running = self.cold(&t, Phase::Cold, false, repeat, out).await?;
        self.steady_and_outage(&t, running, repeat, out).await
    }
}
