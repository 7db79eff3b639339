//! The benchmark suite (`watchmux-bench run`): watchmux against the simulator, side by side with the
//! baselines a user would otherwise deploy (the simulator directly, nginx as a streaming reverse
//! proxy) and with the limit (a minimal program writing the same bytes to the same sockets).
//!
//! Every server runs as its own child process so its CPU time and RSS can be read from `/proc`
//! on their own; the clients run in the bench process. Every loop is bounded in count and time,
//! and every child is killed when the bench ends.
//!
//! A run never serves from the bench process itself: the simulator, watchmux and the limit
//! program are this same binary's `sim`, `serve` and `limit` roles (or nginx), started as
//! children, so the bench process holds only clients.

pub mod balancer;
pub mod checks;
pub mod client;
pub mod consistent;
pub mod decode;
pub mod haproxy;
pub mod heap;
pub mod hist;
pub mod httpfuzz;
pub mod limit;
pub mod nginx;
pub mod nodefleet;
pub mod ondemand;
pub mod pbframe;
pub mod pbnative;
pub mod persist;
pub mod plot;
pub mod procs;
pub mod protobuf;
pub mod report;
pub mod scenarios;
pub mod scrape;
pub mod shards;
pub mod soak;
pub mod targets;
pub mod tls;
pub mod watchcost;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use report::{NotRun, Sample, ScenarioSpec};
use targets::{Env, TargetKind};
use tls::Transport;

/// Why a bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An I/O operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A server could not be started or prepared.
    #[error("setup: {0}")]
    Setup(String),
    /// A server exited before it listened: most often another process took the port it was
    /// given between the probe that found it free and its bind (the callers that chose the port
    /// try another).
    #[error("setup: {0}")]
    ExitedEarly(String),
    /// A run went wrong (failed watches, unexpected answers).
    #[error("run: {0}")]
    Run(String),
    /// The plot could not be drawn.
    #[error("plot: {0}")]
    Plot(#[from] plot::PlotError),
}

impl BenchError {
    fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io {
            what: what.into(),
            source,
        }
    }
}

/// A scenario of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// S1: many watchers on all pods.
    Broadcast,
    /// S2: kubelet-like watchers over a large fleet.
    Fleet,
    /// S3: LIST resourceVersion=0 of a large list.
    List,
    /// S4: thousands of clients LIST+WATCH right after start.
    Herd,
    /// S5: idle watchers.
    Idle,
    /// S6: syncing a large resource.
    Sync,
    /// S7: consistent reads (no resourceVersion) served after a freshness check.
    Consistent,
    /// S8: protobuf against JSON through watchmux (delivery, client decode, LIST).
    Protobuf,
    /// S9: what an idle watch costs (RSS, heap, kernel memory) over HTTP/1.1, TLS and HTTP/2.
    WatchCost,
    /// S10: many kinds cached on demand against all of them listed (watchmux only).
    OnDemand,
    /// S11: two watchmux builds side by side (`--baseline-exe` and this one) on the targets of
    /// a cache keeping protobuf bytes: memory against the JSON, first LISTs, delivery CPU, sync.
    PbNative,
    /// S12: N simulated nodes (kubelet and kube-proxy each) through watchmux and directly: cold
    /// starts, a restart on `persist_dir`, steady churn, the upstream down.
    NodeFleet,
    /// S13: watchmux replicas behind HAProxy: rolling restarts, an upstream restart,
    /// `goaway_chance`, with client-go-like watchers checked against the simulator's log.
    Balancer,
    /// S14: what a consistency check of a large cache against the upstream costs (upstream
    /// bytes, watchmux's and the upstream's CPU per check; watchmux only).
    Checks,
}

impl Scenario {
    /// All, in run order.
    pub const ALL: [Scenario; 9] = [
        Scenario::Broadcast,
        Scenario::Idle,
        Scenario::List,
        Scenario::Consistent,
        Scenario::Sync,
        Scenario::Fleet,
        Scenario::Herd,
        Scenario::Protobuf,
        Scenario::WatchCost,
    ];
}

impl std::str::FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "s1" | "broadcast" => Scenario::Broadcast,
            "s2" | "fleet" => Scenario::Fleet,
            "s3" | "list" => Scenario::List,
            "s4" | "herd" => Scenario::Herd,
            "s5" | "idle" => Scenario::Idle,
            "s6" | "sync" => Scenario::Sync,
            "s7" | "consistent" => Scenario::Consistent,
            "s8" | "protobuf" => Scenario::Protobuf,
            "s9" | "watchcost" => Scenario::WatchCost,
            "s10" | "ondemand" | "on-demand" => Scenario::OnDemand,
            "s11" | "pbnative" => Scenario::PbNative,
            "s12" | "nodefleet" | "nodes" => Scenario::NodeFleet,
            "s13" | "balancer" | "replicas" => Scenario::Balancer,
            "s14" | "checks" => Scenario::Checks,
            other => {
                return Err(format!(
                    "unknown scenario {other:?} (s1 broadcast, s2 fleet, s3 list, s4 herd, s5 idle, s6 sync, s7 consistent, s8 protobuf, s9 watchcost, s10 ondemand, s11 pbnative, s12 nodefleet, s13 balancer, s14 checks)"
                ));
            }
        })
    }
}

/// Sizes of every scenario.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// S1 watcher counts.
    pub broadcast_watchers: Vec<usize>,
    /// Transports of S1's cases (plain HTTP/1.1 and/or HTTP/1.1 over TLS), side by side.
    pub broadcast_transports: Vec<Transport>,
    /// Transports of S5's cases.
    pub idle_transports: Vec<Transport>,
    /// The targets that run S1's and S5's TLS cases (all of them but in smoke runs).
    pub tls_targets: Vec<TargetKind>,
    /// S1 (and S8 delivery) writes per second.
    pub broadcast_rate: f64,
    /// Pods in S1's, S5's and S8's delivery fleet.
    pub broadcast_pods: usize,
    /// Nodes of the S2/S4/S6 fleet.
    pub fleet_nodes: usize,
    /// Pods of the S2/S4/S6 fleet.
    pub fleet_pods: usize,
    /// S2 kubelet counts.
    pub fleet_kubelets: Vec<usize>,
    /// S2 writes per second.
    pub fleet_rate: f64,
    /// S2's measured window, seconds (longer than the others: its CPU figures are small).
    pub fleet_window_secs: f64,
    /// Pods listed in S3.
    pub list_pods: usize,
    /// S3 concurrent clients.
    pub list_clients: Vec<usize>,
    /// S4 clients.
    pub herd_clients: usize,
    /// S4: clients not served after this many seconds are given up on.
    pub herd_deadline_secs: f64,
    /// S5 watchers.
    pub idle_watchers: usize,
    /// Pod counts of S7's consistent LISTs (one simulator each).
    pub consistent_pods: Vec<usize>,
    /// S7 concurrent clients of the consistent LISTs.
    pub consistent_clients: Vec<usize>,
    /// Pods of the small simulator S7 measures the freshness check's latency on.
    pub freshness_pods: usize,
    /// S7: writes per second to those pods in the busy cases.
    pub freshness_rate: f64,
    /// S7: consistent + `resourceVersion=0` LIST pairs per freshness case and repeat.
    pub freshness_rounds: usize,
    /// S8 watcher counts of the delivery cases (S1's writer: `broadcast_rate` writes/s to
    /// `broadcast_pods` pods).
    pub protobuf_watchers: Vec<usize>,
    /// Pods of S8's LISTs.
    pub protobuf_list_pods: usize,
    /// S8: decodes of one pod event per encoding and repeat (in 25 batches).
    pub decode_iterations: usize,
    /// S9 watch counts (each over HTTP/1.1, HTTP/1.1 over TLS and HTTP/2 over TLS).
    pub watchcost_watches: Vec<usize>,
    /// S9: watch streams per HTTP/2 connection (a kubelet's watches share one).
    pub watchcost_streams: usize,
    /// S9's repeats when not `repeats` (smoke runs: one; S9 starts two processes per case).
    pub watchcost_repeats: Option<usize>,
    /// S10: kinds the simulator serves (built-in ones, then CRD-backed ones).
    pub ondemand_kinds: usize,
    /// S10: watchers, spread evenly over the kinds read.
    pub ondemand_watchers: usize,
    /// S10: the kinds the last configuration's watchers read.
    pub ondemand_read: usize,
    /// S10: objects of each kind.
    pub ondemand_objects: usize,
    /// S10: padding bytes of each object (its JSON is about 350 bytes more).
    pub ondemand_object_bytes: usize,
    /// S10: writes per second in the steady phase, over all kinds.
    pub ondemand_rate: f64,
    /// S10: seconds of the steady phase.
    pub ondemand_secs: f64,
    /// S11: pods each build holds for the memory and first-LIST figures.
    pub pbnative_pods: usize,
    /// S11: watchers of the delivery figures (S1's writer and fleet: `broadcast_rate` writes/s
    /// to `broadcast_pods` pods).
    pub pbnative_watchers: usize,
    /// S11: pods of the sync figures (a simulator of its own).
    pub pbnative_sync_pods: usize,
    /// S12: fleet sizes (nodes), one case each.
    pub nodefleet_nodes: Vec<usize>,
    /// S12: the simulator's pod writes per second, throughout.
    pub nodefleet_churn: f64,
    /// S12: how the nodes' HTTP/2 connections are carried (TLS or h2c).
    pub nodefleet_wire: nodefleet::Wire,
    /// S12: the simulated cluster's shape.
    pub nodefleet_shape: nodefleet::Shape,
    /// S12: whether the nodes authenticate by their own tokens, authorized by the simulator and
    /// by watchmux's delegated authz.
    pub nodefleet_authz: nodefleet::Authz,
    /// S12: seconds of the steady-churn phase.
    pub nodefleet_window_secs: f64,
    /// S12: seconds the upstream is down.
    pub nodefleet_outage_secs: f64,
    /// S12: bound on a cold start's sync and on the recovery after the outage, seconds.
    pub nodefleet_sync_timeout_secs: f64,
    /// S12: repeats (each a fresh simulator per target).
    pub nodefleet_repeats: usize,
    /// S13: watchmux replicas behind the balancer.
    pub balancer_replicas: usize,
    /// S13: watchers (each of one namespace's pods).
    pub balancer_watchers: usize,
    /// S13: watchers sharing one client's HTTP/2 connection.
    pub balancer_per_connection: usize,
    /// S13: namespaces of the simulator's fleet (the watchers spread over them).
    pub balancer_namespaces: usize,
    /// S13: pods of the simulator's fleet.
    pub balancer_pods: usize,
    /// S13: the simulator's pod writes per second, throughout.
    pub balancer_rate: f64,
    /// S13: the watchers' minimum watch timeout (each asks for between it and twice it).
    pub balancer_watch_timeout_secs: f64,
    /// S13: the replicas' `server.shutdown_delay_secs`.
    pub balancer_shutdown_delay_secs: u64,
    /// S13: the replicas' `server.shutdown_watch_grace_secs`.
    pub balancer_drain_secs: u64,
    /// S13: seconds of watching the connections spread after each rolling restart that turns
    /// `goaway_chance` or `max_connection_age_secs` on (a third of it after the first, a ninth
    /// after the upstream restart).
    pub balancer_observe_secs: f64,
    /// S13: seconds the upstream refuses connections.
    pub balancer_outage_secs: f64,
    /// S13: the replicas' `server.goaway_chance` in the last two phases.
    pub balancer_goaway_chance: f64,
    /// S13: the replicas' `server.max_connection_age_secs` in the last phase.
    pub balancer_max_connection_age_secs: u64,
    /// S13: HAProxy sends the PROXY protocol v2 header and the replicas trust it
    /// (`server.proxy_protocol_trusted`), as behind a production balancer.
    pub balancer_proxy_protocol: bool,
    /// S13: each replica has a `cache.persist_dir` of its own.
    pub balancer_persist: bool,
    /// S14: pods of the simulator whose cache is checked.
    pub checks_pods: usize,
    /// S14: consistency checks in each measured window.
    pub checks_count: usize,
    /// S14's repeats when not `repeats` (smoke runs: one; each repeat starts two processes and
    /// waits for their checks).
    pub checks_repeats: Option<usize>,
    /// S14.2: pods of the simulator whose watchers are sharded.
    pub shard_pods: usize,
    /// S14.2: the simulator's writes per second (realistic churn) in its windows.
    pub shard_rate: f64,
    /// Length of each measured window, seconds. Warm-up, settling and draining pauses are
    /// scaled to it (at most one or two seconds each).
    pub window_secs: f64,
    /// Repeats of each case (medians are reported).
    pub repeats: usize,
}

impl Sizes {
    /// A pause of `secs`, shortened to the window for quick (smoke) runs.
    pub fn pause(&self, secs: f64) -> std::time::Duration {
        std::time::Duration::from_secs_f64(secs.min(self.window_secs))
    }

    /// The full suite: the sizes, fitted to 2 cores and 24 GiB.
    pub fn full() -> Sizes {
        Sizes {
            broadcast_watchers: vec![100, 1000, 10_000],
            broadcast_transports: vec![Transport::Plain],
            idle_transports: vec![Transport::Plain],
            tls_targets: TargetKind::ALL.to_vec(),
            broadcast_rate: 50.0,
            broadcast_pods: 1000,
            fleet_nodes: 5000,
            fleet_pods: 150_000,
            fleet_kubelets: vec![500, 5000],
            fleet_rate: 200.0,
            fleet_window_secs: 8.0,
            list_pods: 100_000,
            list_clients: vec![1, 10],
            herd_clients: 5000,
            herd_deadline_secs: 20.0,
            idle_watchers: 10_000,
            consistent_pods: vec![20_000, 100_000],
            consistent_clients: vec![1, 10],
            freshness_pods: 1000,
            freshness_rate: 100.0,
            freshness_rounds: 50,
            protobuf_watchers: vec![1000, 10_000],
            protobuf_list_pods: 100_000,
            decode_iterations: 50_000,
            watchcost_watches: vec![10_000, 50_000],
            watchcost_streams: 15,
            watchcost_repeats: None,
            ondemand_kinds: 40,
            ondemand_watchers: 200,
            ondemand_read: 10,
            ondemand_objects: 50,
            ondemand_object_bytes: 1200,
            ondemand_rate: 20.0,
            ondemand_secs: 10.0,
            pbnative_pods: 100_000,
            pbnative_watchers: 1000,
            pbnative_sync_pods: 150_000,
            nodefleet_nodes: vec![500, 2000, 5000],
            nodefleet_churn: 10.0,
            nodefleet_wire: nodefleet::Wire::Tls,
            nodefleet_shape: nodefleet::Shape::Cl2,
            nodefleet_authz: nodefleet::Authz::Delegated,
            nodefleet_window_secs: 60.0,
            nodefleet_outage_secs: 30.0,
            nodefleet_sync_timeout_secs: 1800.0,
            nodefleet_repeats: 1,
            balancer_replicas: 3,
            balancer_watchers: 2000,
            balancer_per_connection: 10,
            balancer_namespaces: 50,
            balancer_pods: 2000,
            balancer_rate: 50.0,
            balancer_watch_timeout_secs: 30.0,
            balancer_shutdown_delay_secs: 2,
            balancer_drain_secs: 5,
            balancer_observe_secs: 270.0,
            balancer_outage_secs: 10.0,
            balancer_goaway_chance: 0.02,
            balancer_max_connection_age_secs: 180,
            balancer_proxy_protocol: true,
            balancer_persist: false,
            checks_pods: 100_000,
            checks_count: 5,
            checks_repeats: None,
            shard_pods: 10_000,
            shard_rate: 500.0,
            window_secs: 5.0,
            repeats: 3,
        }
    }

    /// Tiny sizes that exercise every code path in seconds (the test suite runs this).
    pub fn smoke() -> Sizes {
        Sizes {
            broadcast_watchers: vec![10],
            // One target over TLS keeps the smoke run short; S9 has every target's TLS.
            broadcast_transports: vec![Transport::Plain, Transport::Tls],
            idle_transports: vec![Transport::Plain],
            tls_targets: vec![TargetKind::Limit],
            broadcast_rate: 20.0,
            broadcast_pods: 30,
            fleet_nodes: 20,
            fleet_pods: 200,
            fleet_kubelets: vec![10],
            fleet_rate: 40.0,
            fleet_window_secs: 0.5,
            list_pods: 300,
            list_clients: vec![2],
            herd_clients: 20,
            herd_deadline_secs: 30.0,
            idle_watchers: 50,
            consistent_pods: vec![300],
            consistent_clients: vec![2],
            freshness_pods: 100,
            freshness_rate: 100.0,
            freshness_rounds: 2,
            protobuf_watchers: vec![10],
            protobuf_list_pods: 300,
            decode_iterations: 100,
            watchcost_watches: vec![50],
            watchcost_streams: 15,
            watchcost_repeats: Some(1),
            ondemand_kinds: 6,
            ondemand_watchers: 12,
            ondemand_read: 2,
            ondemand_objects: 5,
            ondemand_object_bytes: 500,
            ondemand_rate: 20.0,
            ondemand_secs: 1.0,
            pbnative_pods: 300,
            pbnative_watchers: 10,
            pbnative_sync_pods: 400,
            nodefleet_nodes: vec![5],
            nodefleet_churn: 10.0,
            nodefleet_wire: nodefleet::Wire::Tls,
            nodefleet_shape: nodefleet::Shape::Cl2,
            nodefleet_authz: nodefleet::Authz::Delegated,
            nodefleet_window_secs: 2.0,
            nodefleet_outage_secs: 2.0,
            nodefleet_sync_timeout_secs: 60.0,
            nodefleet_repeats: 1,
            balancer_replicas: 3,
            balancer_watchers: 30,
            balancer_per_connection: 3,
            balancer_namespaces: 5,
            balancer_pods: 100,
            balancer_rate: 20.0,
            balancer_watch_timeout_secs: 5.0,
            balancer_shutdown_delay_secs: 1,
            balancer_drain_secs: 1,
            balancer_observe_secs: 3.0,
            balancer_outage_secs: 2.0,
            balancer_goaway_chance: 0.02,
            balancer_max_connection_age_secs: 2,
            balancer_proxy_protocol: true,
            balancer_persist: false,
            checks_pods: 500,
            checks_count: 2,
            checks_repeats: Some(1),
            shard_pods: 300,
            shard_rate: 100.0,
            window_secs: 0.5,
            repeats: 2,
        }
    }
}

/// What to run and where to write.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The `watchmux-bench` binary (also the simulator, watchmux and the limit program).
    pub exe: PathBuf,
    /// S11's baseline: another build's `watchmux-bench` binary, whose watchmux is compared with
    /// `exe`'s (S11 refuses to run without it).
    pub baseline_exe: Option<PathBuf>,
    /// Results directory (created): `results.md`, `samples.csv`, `summary.csv`, `fanout.png`.
    pub out: PathBuf,
    /// Scenarios to run, in order.
    pub scenarios: Vec<Scenario>,
    /// Targets to measure.
    pub targets: Vec<TargetKind>,
    /// Sizes.
    pub sizes: Sizes,
    /// The command line, for the report.
    pub command: String,
}

/// Everything a bench run produced.
#[derive(Debug)]
pub struct BenchReport {
    /// Every sample.
    pub samples: Vec<Sample>,
    /// The cases that could not be set up on this machine, and why.
    pub not_run: Vec<NotRun>,
    /// The scenarios that ran.
    pub specs: Vec<ScenarioSpec>,
    /// The Markdown report.
    pub markdown: String,
}

/// Raises this process's open-file limit as far as the machine allows (children inherit it):
/// ten thousand watchers need ten thousand sockets on each side. The hard limit is raised to
/// the kernel's `fs.nr_open` when the process may (CAP_SYS_RESOURCE; silently not otherwise),
/// then the soft limit to the hard one. Returns the soft limit.
pub fn raise_nofile_limit() -> u64 {
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    if let (Some(max), Ok((_, hard))) = (nr_open, rlimit::getrlimit(rlimit::Resource::NOFILE))
        && max > hard
    {
        let _ = rlimit::setrlimit(rlimit::Resource::NOFILE, max, max);
    }
    rlimit::increase_nofile_limit(u64::MAX).unwrap_or(0)
}

/// Runs the scenarios and writes the results.
pub async fn run(opts: &BenchOptions) -> Result<BenchReport, BenchError> {
    if opts.scenarios.contains(&Scenario::PbNative) {
        pbnative::check_baseline(opts.baseline_exe.as_deref())?;
    }
    let nofile = raise_nofile_limit();
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| BenchError::io(format!("creating {}", opts.out.display()), e))?;
    // `WATCHMUX_BENCH_KEEP=1` keeps the scratch directory (the targets' logs and configs) for
    // a look after the run.
    let keep = std::env::var_os("WATCHMUX_BENCH_KEEP").is_some();
    let work = tempfile::Builder::new()
        .prefix("watchmux-bench-")
        .disable_cleanup(keep)
        .tempdir()
        .map_err(|e| BenchError::io("creating a scratch directory", e))?;
    if keep {
        eprintln!("scratch directory kept: {}", work.path().display());
    }
    // Every TLS case of the run (and the simulators' HTTPS addresses) uses this certificate.
    let pki = tls::Pki::generate(work.path())?;
    let env = Env {
        exe: opts.exe.clone(),
        workdir: work.path().to_path_buf(),
        nginx: targets::find_nginx(),
        pki: Some(std::sync::Arc::new(pki)),
    };
    let s = &opts.sizes;
    let kinds = &opts.targets;
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut not_run: Vec<NotRun> = Vec::new();
    let mut specs: Vec<ScenarioSpec> = Vec::new();
    // S2, S4 and S6 share one large simulator: loading it is the slowest step of the suite.
    let mut big: Option<procs::Proc> = None;
    for sc in &opts.scenarios {
        let t0 = Instant::now();
        // A scenario reports one table, S7 two, S8 and S12 three, S11 five.
        let mine = match sc {
            Scenario::Broadcast => vec![scenarios::broadcast_spec(s)],
            Scenario::Fleet => vec![scenarios::fleet_spec(s)],
            Scenario::List => vec![scenarios::list_spec(s)],
            Scenario::Herd => vec![scenarios::herd_spec(s)],
            Scenario::Idle => vec![scenarios::idle_spec(s)],
            Scenario::Sync => vec![scenarios::sync_spec(s)],
            Scenario::Consistent => consistent::specs(s),
            Scenario::Protobuf => protobuf::specs(s),
            Scenario::WatchCost => vec![watchcost::spec(s)],
            Scenario::OnDemand => vec![ondemand::spec(s)],
            Scenario::PbNative => pbnative::specs(s, opts.baseline_exe.as_deref(), &opts.exe),
            Scenario::NodeFleet => nodefleet::specs(s),
            Scenario::Balancer => vec![balancer::spec(s)],
            Scenario::Checks => vec![checks::spec(s), shards::spec(s)],
        };
        let title = mine
            .iter()
            .map(|x| format!("{} {}", x.id, x.name))
            .collect::<Vec<_>>()
            .join(", ");
        eprintln!("{title} …");
        if matches!(sc, Scenario::Fleet | Scenario::Herd | Scenario::Sync) && big.is_none() {
            big = Some(targets::start_sim(&env, s.fleet_nodes, s.fleet_pods).await?);
        }
        match sc {
            Scenario::Broadcast => scenarios::broadcast(&env, s, kinds, &mut samples).await?,
            Scenario::Idle => scenarios::idle(&env, s, kinds, &mut samples).await?,
            Scenario::List => scenarios::list(&env, s, kinds, &mut samples).await?,
            Scenario::Fleet => {
                let sim = big.as_ref().expect("started above");
                scenarios::fleet(&env, s, kinds, sim, &mut samples).await?
            }
            Scenario::Herd => {
                let sim = big.as_ref().expect("started above");
                scenarios::herd(&env, s, kinds, sim, &mut samples).await?
            }
            Scenario::Sync => {
                let sim = big.as_ref().expect("started above");
                scenarios::sync(&env, s, kinds, sim, &mut samples).await?
            }
            Scenario::Consistent => consistent::run(&env, s, kinds, &mut samples).await?,
            Scenario::Protobuf => protobuf::run(&env, s, kinds, &mut samples).await?,
            Scenario::WatchCost => {
                watchcost::run(&env, s, kinds, &mut samples, &mut not_run).await?
            }
            Scenario::OnDemand => ondemand::run(&env, s, kinds, &mut samples).await?,
            Scenario::PbNative => {
                let baseline = pbnative::check_baseline(opts.baseline_exe.as_deref())?;
                pbnative::run(&env, s, baseline, kinds, &mut samples).await?
            }
            Scenario::NodeFleet => nodefleet::run(&env, s, kinds, &mut samples).await?,
            Scenario::Balancer => balancer::run(&env, s, kinds, &mut samples).await?,
            Scenario::Checks => {
                checks::run(&env, s, kinds, &mut samples).await?;
                shards::run(&env, s, kinds, &mut samples).await?
            }
        }
        eprintln!("{title} done in {:.0} s", t0.elapsed().as_secs_f64());
        specs.extend(mine);
    }
    if let Some(b) = big {
        b.stop().await;
    }
    let total = started.elapsed();
    let png = opts.out.join("fanout.png");
    let plotted = plot_fanout(&png, &samples)?;
    let mut md = String::new();
    let _ = writeln!(md, "# watchmux benchmark results\n");
    let _ = writeln!(
        md,
        "Command: `{}` (open-file limit {nofile}); all scenarios took {:.1} min.\n",
        opts.command,
        total.as_secs_f64() / 60.0
    );
    let _ = writeln!(md, "Machine: {}\n", machine());
    let _ = writeln!(
        md,
        "Targets: `watchmux` (this build, release), `direct` (the clients talk to the simulator itself), `nginx` ({}; `proxy_buffering off`, long timeouts), `limit` (a minimal program that writes the upstream's bytes to the same sockets: one upstream watch per resource, each frame encoded once; for lists one pre-built body). The simulator, each target and the clients are separate processes on the same 2 cores; CPU and RSS are read from `/proc` for the target's processes only.\n",
        nginx_version(env.nginx.as_deref())
    );
    if plotted {
        let _ = writeln!(md, "![fan-out latency and CPU](fanout.png)\n");
    }
    for spec in &specs {
        let mine: Vec<&Sample> = samples.iter().filter(|x| x.scenario == spec.id).collect();
        let repeats = if nodefleet::reports(spec) {
            s.nodefleet_repeats
        } else if balancer::reports(spec) {
            1
        } else if spec.id == checks::ID || spec.id == shards::ID {
            checks::repeats(s)
        } else if spec.id == watchcost::ID {
            s.watchcost_repeats.unwrap_or(s.repeats)
        } else {
            s.repeats
        };
        if pbnative::reports(spec) {
            md.push_str(&pbnative::markdown(spec, &mine, repeats));
        } else {
            md.push_str(&report::markdown(spec, &mine, repeats));
        }
        if balancer::reports(spec) {
            md.push_str(&balancer::targets_markdown(&mine));
        }
        let skipped: Vec<&NotRun> = not_run.iter().filter(|n| n.scenario == spec.id).collect();
        md.push_str(&report::not_run_markdown(&skipped));
        md.push('\n');
    }
    let write = |name: &str, body: &str| {
        let p = opts.out.join(name);
        std::fs::write(&p, body).map_err(|e| BenchError::io(format!("writing {}", p.display()), e))
    };
    write("results.md", &md)?;
    write("samples.csv", &report::samples_csv(&samples))?;
    write("summary.csv", &report::summary_csv(&specs, &samples))?;
    Ok(BenchReport {
        samples,
        not_run,
        specs,
        markdown: md,
    })
}

/// Plots S1's medians (latency and CPU per delivery against watchers); false when S1 did not run.
fn plot_fanout(path: &Path, samples: &[Sample]) -> Result<bool, BenchError> {
    let s1: Vec<&Sample> = samples.iter().filter(|x| x.scenario == "S1").collect();
    if s1.is_empty() {
        return Ok(false);
    }
    let sum = report::Summary::of(&s1);
    let mut points = Vec::new();
    // Plain HTTP/1.1 cases only (a TLS case is named `N · TLS`).
    for case in sum.cases.iter().filter(|c| c.parse::<usize>().is_ok()) {
        for &t in &sum.targets {
            let get = |k| sum.get(case, t, k).unwrap_or(f64::NAN);
            points.push(plot::FanoutPoint {
                target: t.name().to_string(),
                watchers: case.parse().unwrap_or(0),
                p50_ms: get("p50_ms"),
                p99_ms: get("p99_ms"),
                cpu_s_per_million: get("cpu_s_per_million"),
            });
        }
    }
    plot::fanout_png(
        path,
        "S1 broadcast: delivery latency and CPU per delivery",
        &points,
    )?;
    Ok(true)
}

pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{cpu}, {cores} cores, {mem_gib:.0} GiB, Linux {kernel}")
}

fn nginx_version(bin: Option<&Path>) -> String {
    let Some(bin) = bin else {
        return "not installed: left out".into();
    };
    procs::version_line(bin)
        .map(|l| l.replace("nginx version: ", ""))
        .unwrap_or_else(|| "unknown version".into())
}
