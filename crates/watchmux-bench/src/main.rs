//! `watchmux-bench`: runs the benchmark scenarios, and is also each server process a scenario
//! starts (the simulator, watchmux, the limit program), so one binary measures them all:
//! `cargo run --release -p watchmux-bench -- run all`.
//!
//! Argument parsing and dispatch only: the hidden roles run kube-sim's `cli::run`, watchmux's
//! `serve::run` and `limit::serve` unchanged, so what is measured is what ships. The binary's
//! allocator is `System` behind a live-bytes counter ([`watchmux_bench::heap`]), counting only
//! in a role the bench asks for its heap (scenario S9).

use std::net::SocketAddr;

use anyhow::Context;
use clap::{Parser, Subcommand};
use watchmux_bench::targets::TargetKind;
use watchmux_bench::tls::Transport;
use watchmux_bench::{BenchOptions, Scenario, Sizes};

#[global_allocator]
static ALLOCATOR: watchmux_bench::heap::Counting = watchmux_bench::heap::Counting;

#[derive(Parser, Debug)]
#[command(
    name = "watchmux-bench",
    version,
    about = "watchmux benchmarks: watchmux, the simulator directly, nginx and the limit program side by side"
)]
struct Cli {
    /// Log filter (tracing EnvFilter syntax).
    #[arg(long, env = "WATCHMUX_LOG", global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run scenarios (see README "Performance"). Boxed: its many size flags make it far larger
    /// than the other roles.
    Run(Box<RunArgs>),
    /// A bounded chaos soak: watchers of every kind through watchmux while the simulator
    /// churns and injects faults; fails (exit 1) when any check fails.
    Soak(SoakArgs),
    /// HTTP-level fuzzing: generated and mutated requests at watchmux in front of the
    /// simulator, every answer checked; fails (exit 1) on any finding.
    Httpfuzz(HttpfuzzArgs),
    /// The durable cache (`cache.persist_dir`): restart time with N pods persisted against a
    /// fresh sync (upstream up and down), and write amplification and CPU under churn.
    Persist(PersistArgs),
    /// The simulator as a target process (started by `run`).
    #[command(hide = true)]
    Sim(kube_sim::cli::SimArgs),
    /// watchmux as a target process (started by `run`).
    #[command(hide = true)]
    Serve {
        /// Configuration file.
        #[arg(long)]
        config: std::path::PathBuf,
    },
    /// The limit program as a target process (started by `run`).
    #[command(hide = true)]
    Limit {
        /// Address to listen on.
        #[arg(long)]
        listen: SocketAddr,
        /// The simulator's URL.
        #[arg(long)]
        upstream: String,
        /// Serve TLS with this PEM certificate chain (with --tls-key-file).
        #[arg(long, requires = "tls_key_file")]
        tls_cert_file: Option<std::path::PathBuf>,
        /// The PEM private key of --tls-cert-file.
        #[arg(long, requires = "tls_cert_file")]
        tls_key_file: Option<std::path::PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
struct SoakArgs {
    /// Seconds of churn and faults (then the soak settles and checks).
    #[arg(long, default_value_t = 600)]
    duration_secs: u64,
    /// Watchers.
    #[arg(long, default_value_t = 2000)]
    watchers: usize,
    /// Pod writes per second (creates, updates, relabels, node moves, deletes).
    #[arg(long, default_value_t = 20.0)]
    churn: f64,
    /// Seed of the watcher mix, the fault schedule and the churn.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pods at the start.
    #[arg(long, default_value_t = 200)]
    pods: usize,
    /// Nodes.
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// Seconds the watchers may take to converge once the simulator settled.
    #[arg(long, default_value_t = 120)]
    settle_secs: u64,
    /// Write `soak.md`, `soak-rss.csv` and the processes' logs to this directory.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug)]
struct HttpfuzzArgs {
    /// Cases (requests, connections) to send.
    #[arg(long, default_value_t = 10_000)]
    requests: u64,
    /// Seed: case I of a seed is always the same.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Cases in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Only these case indices, comma separated (to reproduce a finding).
    #[arg(long, value_delimiter = ',')]
    only: Vec<u64>,
    /// Milliseconds each watch is read before it is dropped.
    #[arg(long, default_value_t = 300)]
    watch_ms: u64,
    /// Pods of the simulator's fleet.
    #[arg(long, default_value_t = 300)]
    pods: usize,
    /// Write `httpfuzz.md`, the logs and the findings' request bytes to this directory.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// watchmux's `cache.mode`: `listed` (pods, nodes, namespaces and configmaps; everything
    /// else passed through) or `on-demand` (those from the start, and every other kind read).
    #[arg(long, default_value = "listed", value_parser = ["listed", "on-demand"])]
    cache_mode: String,
}

#[derive(clap::Args, Debug)]
struct PersistArgs {
    /// Pods of the simulator's fleet.
    #[arg(long, default_value_t = 150_000)]
    pods: usize,
    /// Nodes of the fleet.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Repeats of each start, and measured churn windows (medians are reported).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Simulator writes per second in the churn part.
    #[arg(long, default_value_t = 2000.0)]
    churn_rate: f64,
    /// Seconds of each measured churn window.
    #[arg(long, default_value_t = 60.0)]
    churn_secs: f64,
    /// Seconds of churn before the first window.
    #[arg(long, default_value_t = 15.0)]
    warmup_secs: f64,
    /// Where the persisted directories live (default: a scratch directory).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Write `persist.md`, `persist.csv` and the processes' logs to this directory.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Scenarios: s1|broadcast s2|fleet s3|list s4|herd s5|idle s6|sync s7|consistent
    /// s8|protobuf s9|watchcost s10|ondemand s11|pbnative s12|nodefleet s13|balancer
    /// s14|checks, or `all` (all but s10 to s14).
    #[arg(default_value = "all")]
    scenarios: Vec<String>,
    /// Scenarios, as the positional list takes them (`--scenario S12`); stands for it when
    /// given.
    #[arg(long = "scenario", value_delimiter = ',')]
    scenario: Vec<String>,
    /// Tiny sizes that run in seconds (what the test suite runs).
    #[arg(long)]
    smoke: bool,
    /// Results directory.
    #[arg(long, default_value = "results")]
    out: std::path::PathBuf,
    /// Targets, comma separated: watchmux,direct,nginx,limit.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "watchmux,direct,nginx,limit"
    )]
    targets: Vec<TargetKind>,
    /// Repeats of each case (medians are reported).
    #[arg(long)]
    repeats: Option<usize>,
    /// Seconds in each measured window.
    #[arg(long)]
    window_secs: Option<f64>,
    /// S1 watcher counts, comma separated.
    #[arg(long, value_delimiter = ',')]
    broadcast_watchers: Option<Vec<usize>>,
    /// Transports of S1 and S5, comma separated: plain (HTTP/1.1), tls (HTTP/1.1 over TLS);
    /// both run side by side and the report shows TLS ÷ plain [default: plain; --smoke: S1
    /// plain,tls (tls for the limit program only), S5 plain].
    #[arg(long, value_delimiter = ',')]
    transports: Option<Vec<Transport>>,
    /// The targets that run S1's and S5's TLS cases, comma separated [default: every target].
    #[arg(long, value_delimiter = ',')]
    tls_targets: Option<Vec<TargetKind>>,
    /// S1 writes per second.
    #[arg(long)]
    broadcast_rate: Option<f64>,
    /// S2 kubelet counts, comma separated.
    #[arg(long, value_delimiter = ',')]
    fleet_kubelets: Option<Vec<usize>>,
    /// Pods of the S2/S4/S6 fleet.
    #[arg(long)]
    fleet_pods: Option<usize>,
    /// Nodes of the S2/S4/S6 fleet.
    #[arg(long)]
    fleet_nodes: Option<usize>,
    /// S2 writes per second.
    #[arg(long)]
    fleet_rate: Option<f64>,
    /// Pods listed in S3.
    #[arg(long)]
    list_pods: Option<usize>,
    /// S3 concurrent clients, comma separated.
    #[arg(long, value_delimiter = ',')]
    list_clients: Option<Vec<usize>>,
    /// S4 clients.
    #[arg(long)]
    herd_clients: Option<usize>,
    /// S5 watchers.
    #[arg(long)]
    idle_watchers: Option<usize>,
    /// S7 pod counts of the consistent LISTs, comma separated.
    #[arg(long, value_delimiter = ',')]
    consistent_pods: Option<Vec<usize>>,
    /// S7 concurrent clients of the consistent LISTs, comma separated.
    #[arg(long, value_delimiter = ',')]
    consistent_clients: Option<Vec<usize>>,
    /// S7 pods of the freshness-check simulator.
    #[arg(long)]
    freshness_pods: Option<usize>,
    /// S7 writes per second in the busy freshness cases.
    #[arg(long)]
    freshness_rate: Option<f64>,
    /// S7 consistent + RV=0 LIST pairs per freshness case.
    #[arg(long)]
    freshness_rounds: Option<usize>,
    /// S8 watcher counts of the JSON/protobuf delivery cases, comma separated (the writer is
    /// S1's: --broadcast-rate).
    #[arg(long, value_delimiter = ',')]
    protobuf_watchers: Option<Vec<usize>>,
    /// S8 pods of the JSON/protobuf LISTs.
    #[arg(long)]
    protobuf_list_pods: Option<usize>,
    /// S8 decodes of one pod event per encoding and repeat.
    #[arg(long)]
    decode_iterations: Option<usize>,
    /// S9 watch counts, comma separated (each over HTTP/1.1, TLS and HTTP/2) [default:
    /// 10000,50000; --smoke: 50].
    #[arg(long, value_delimiter = ',')]
    watchcost_watches: Option<Vec<usize>>,
    /// S9 watch streams per HTTP/2 connection [default: 15].
    #[arg(long)]
    watchcost_streams: Option<usize>,
    /// S9 repeats [default: --repeats; --smoke: 1].
    #[arg(long)]
    watchcost_repeats: Option<usize>,
    /// S10 kinds served (built-in, then CRD-backed) [default: 40; --smoke: 6].
    #[arg(long)]
    ondemand_kinds: Option<usize>,
    /// S10 watchers, spread over the kinds read [default: 200; --smoke: 12].
    #[arg(long)]
    ondemand_watchers: Option<usize>,
    /// S10 kinds the last configuration's watchers read [default: 10; --smoke: 2].
    #[arg(long)]
    ondemand_read: Option<usize>,
    /// S10 objects of each kind [default: 50; --smoke: 5].
    #[arg(long)]
    ondemand_objects: Option<usize>,
    /// S10 writes per second in the steady phase, over all kinds [default: 20].
    #[arg(long)]
    ondemand_rate: Option<f64>,
    /// S10 seconds of the steady phase [default: 10; --smoke: 1].
    #[arg(long)]
    ondemand_secs: Option<f64>,
    /// S11's baseline build: another commit's `watchmux-bench` binary, whose watchmux runs
    /// beside this binary's (required by s11).
    #[arg(long)]
    baseline_exe: Option<std::path::PathBuf>,
    /// S11 pods each build holds for the memory and LIST figures [default: 100000; --smoke:
    /// 300].
    #[arg(long)]
    pbnative_pods: Option<usize>,
    /// S11 watchers of the delivery figures (the writer is S1's: --broadcast-rate) [default:
    /// 1000; --smoke: 10].
    #[arg(long)]
    pbnative_watchers: Option<usize>,
    /// S11 pods of the sync figures [default: 150000; --smoke: 400].
    #[arg(long)]
    pbnative_sync_pods: Option<usize>,
    /// S12 fleet sizes in nodes, comma separated [default: 500,2000,5000; --smoke: 5].
    #[arg(long, visible_alias = "nodes", value_delimiter = ',')]
    nodefleet_nodes: Option<Vec<usize>>,
    /// S12 pod writes per second of the simulator's churn, throughout [default: 10].
    #[arg(long)]
    nodefleet_churn: Option<f64>,
    /// S12 transport of the nodes' HTTP/2 connections: tls (as in production) or h2c
    /// [default: tls].
    #[arg(long)]
    nodefleet_wire: Option<watchmux_bench::nodefleet::Wire>,
    /// S12 cluster shape: cl2 (clusterloader2's load shape) or flat (the simulator's older
    /// fleet, 30 pods per node) [default: cl2].
    #[arg(long)]
    nodefleet_shape: Option<watchmux_bench::nodefleet::Shape>,
    /// S12 nodes' credentials: delegated (each node its own token, which the simulator
    /// authenticates and authorizes; watchmux runs `server.authz = "delegated"`) or none (no
    /// tokens, watchmux `authz = "none"`) [default: delegated].
    #[arg(long)]
    nodefleet_authz: Option<watchmux_bench::nodefleet::Authz>,
    /// S12 seconds of the steady-churn phase [default: 60; --smoke: 2].
    #[arg(long)]
    nodefleet_window_secs: Option<f64>,
    /// S12 seconds the upstream is down [default: 30; --smoke: 2].
    #[arg(long)]
    nodefleet_outage_secs: Option<f64>,
    /// S12 bound on a cold start's sync and the recovery, seconds [default: 1800; --smoke: 60].
    #[arg(long)]
    nodefleet_sync_timeout_secs: Option<f64>,
    /// S12 repeats [default: 1].
    #[arg(long)]
    nodefleet_repeats: Option<usize>,
    /// S13 watchmux replicas behind HAProxy [default: 3].
    #[arg(long)]
    balancer_replicas: Option<usize>,
    /// S13 watchers [default: 2000; --smoke: 30].
    #[arg(long)]
    balancer_watchers: Option<usize>,
    /// S13 watchers sharing one client's HTTP/2 connection [default: 10; --smoke: 3].
    #[arg(long)]
    balancer_per_connection: Option<usize>,
    /// S13 namespaces the watchers spread over [default: 50; --smoke: 5].
    #[arg(long)]
    balancer_namespaces: Option<usize>,
    /// S13 pods of the simulator's fleet [default: 2000; --smoke: 100].
    #[arg(long)]
    balancer_pods: Option<usize>,
    /// S13 pod writes per second, throughout [default: 50; --smoke: 20].
    #[arg(long)]
    balancer_rate: Option<f64>,
    /// S13 watchers' minimum watch timeout, seconds (client-go's is 300) [default: 30;
    /// --smoke: 5].
    #[arg(long)]
    balancer_watch_timeout_secs: Option<f64>,
    /// S13 replicas' `server.shutdown_delay_secs` [default: 2; --smoke: 1].
    #[arg(long)]
    balancer_shutdown_delay_secs: Option<u64>,
    /// S13 replicas' `server.shutdown_watch_grace_secs` [default: 5; --smoke: 1].
    #[arg(long)]
    balancer_drain_secs: Option<u64>,
    /// S13 seconds of watching the connections spread after each rolling restart that turns
    /// goaway_chance or max_connection_age_secs on (a third of it after the first, a ninth
    /// after the upstream restart)
    /// [default: 270; --smoke: 3].
    #[arg(long)]
    balancer_observe_secs: Option<f64>,
    /// S13 seconds the upstream refuses connections [default: 10; --smoke: 2].
    #[arg(long)]
    balancer_outage_secs: Option<f64>,
    /// S13 replicas' `server.goaway_chance` in the last two phases [default: 0.02].
    #[arg(long)]
    balancer_goaway_chance: Option<f64>,
    /// S13 replicas' `server.max_connection_age_secs` in the last phase [default: 180, the
    /// edge overlay's; --smoke: 2].
    #[arg(long)]
    balancer_max_connection_age_secs: Option<u64>,
    /// S13: HAProxy sends no PROXY protocol header (by default it sends `send-proxy-v2`
    /// from 127.0.0.2, which the replicas trust: `server.proxy_protocol_trusted`).
    #[arg(long)]
    balancer_no_proxy_protocol: bool,
    /// S13: each replica gets a `cache.persist_dir` of its own [default: off].
    #[arg(long)]
    balancer_persist: bool,
    /// S14 pods of the simulator whose cache is checked [default: 100000; --smoke: 500].
    #[arg(long)]
    checks_pods: Option<usize>,
    /// S14 consistency checks in each measured window [default: 5; --smoke: 2].
    #[arg(long)]
    checks_count: Option<usize>,
    /// S14 repeats [default: --repeats; --smoke: 1].
    #[arg(long)]
    checks_repeats: Option<usize>,
    /// S14.2 pods of the simulator whose watchers are sharded [default: 10000; --smoke: 300].
    #[arg(long)]
    shard_pods: Option<usize>,
    /// S14.2 simulator writes per second (realistic churn) [default: 500; --smoke: 100].
    #[arg(long)]
    shard_rate: Option<f64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // watchmux's own log set-up: text, filtered by `--log`.
    let log = |level: &str| {
        watchmux::serve::init_logging(Some(level), None, &watchmux::config::LogConfig::default())
    };
    match cli.command {
        Command::Run(a) => {
            log(&cli.log)?;
            run(*a).await
        }
        Command::Soak(a) => {
            log(&cli.log)?;
            soak(a).await
        }
        Command::Httpfuzz(a) => {
            log(&cli.log)?;
            httpfuzz(a).await
        }
        Command::Persist(a) => {
            log(&cli.log)?;
            persist(a).await
        }
        Command::Sim(a) => {
            log(&cli.log)?;
            watchmux_bench::heap::report_from_env();
            kube_sim::cli::run(&a).await.context("simulator")
        }
        Command::Serve { config } => {
            let config = watchmux::config::Config::from_file(&config)?;
            config.validate()?;
            watchmux::serve::init_logging(Some(&cli.log), None, &config.log)?;
            watchmux_bench::heap::report_from_env();
            Ok(watchmux::serve::run(config).await?)
        }
        Command::Limit {
            listen,
            upstream,
            tls_cert_file,
            tls_key_file,
        } => {
            watchmux_bench::raise_nofile_limit();
            watchmux_bench::heap::report_from_env();
            watchmux_bench::limit::serve(watchmux_bench::limit::LimitArgs {
                listen,
                upstream,
                tls: tls_cert_file.zip(tls_key_file),
            })
            .await
            .context("limit program")
        }
    }
}

async fn run(a: RunArgs) -> anyhow::Result<()> {
    let mut sizes = if a.smoke {
        Sizes::smoke()
    } else {
        Sizes::full()
    };
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = a.$f.clone() { sizes.$f = v; } )* };
    }
    set!(
        repeats,
        window_secs,
        broadcast_watchers,
        broadcast_rate,
        fleet_kubelets,
        fleet_pods,
        fleet_nodes,
        fleet_rate,
        list_pods,
        list_clients,
        herd_clients,
        idle_watchers,
        consistent_pods,
        consistent_clients,
        freshness_pods,
        freshness_rate,
        freshness_rounds,
        protobuf_watchers,
        protobuf_list_pods,
        decode_iterations,
        tls_targets,
        watchcost_watches,
        watchcost_streams,
        ondemand_kinds,
        ondemand_watchers,
        ondemand_read,
        ondemand_objects,
        ondemand_rate,
        ondemand_secs,
        pbnative_pods,
        pbnative_watchers,
        pbnative_sync_pods,
        nodefleet_nodes,
        nodefleet_churn,
        nodefleet_wire,
        nodefleet_shape,
        nodefleet_authz,
        nodefleet_window_secs,
        nodefleet_outage_secs,
        nodefleet_sync_timeout_secs,
        nodefleet_repeats,
        balancer_replicas,
        balancer_watchers,
        balancer_per_connection,
        balancer_namespaces,
        balancer_pods,
        balancer_rate,
        balancer_watch_timeout_secs,
        balancer_shutdown_delay_secs,
        balancer_drain_secs,
        balancer_observe_secs,
        balancer_outage_secs,
        balancer_goaway_chance,
        balancer_max_connection_age_secs,
        checks_pods,
        checks_count,
        shard_pods,
        shard_rate
    );
    if a.balancer_no_proxy_protocol {
        sizes.balancer_proxy_protocol = false;
    }
    sizes.balancer_persist |= a.balancer_persist;
    if let Some(r) = a.watchcost_repeats {
        sizes.watchcost_repeats = Some(r);
    }
    if let Some(r) = a.checks_repeats {
        sizes.checks_repeats = Some(r);
    }
    if let Some(t) = &a.transports {
        if t.contains(&Transport::H2) {
            anyhow::bail!(
                "--transports: S1 and S5 run over plain or tls (HTTP/2 is S9's, which runs all three)"
            );
        }
        sizes.broadcast_transports = t.clone();
        sizes.idle_transports = t.clone();
    }
    let named = if a.scenario.is_empty() {
        &a.scenarios
    } else {
        &a.scenario
    };
    let scenarios: Vec<Scenario> = if named.iter().any(|s| s == "all") {
        Scenario::ALL.to_vec()
    } else {
        named
            .iter()
            .map(|s| s.parse().map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<_>>()?
    };
    let opts = BenchOptions {
        exe: std::env::current_exe().context("locating the watchmux-bench binary")?,
        baseline_exe: a.baseline_exe,
        out: a.out,
        scenarios,
        targets: a.targets,
        sizes,
        command: std::env::args()
            .skip(1)
            .fold("watchmux-bench".to_string(), |acc, x| acc + " " + &x),
    };
    let report = watchmux_bench::run(&opts).await?;
    println!("{}", report.markdown);
    eprintln!("results written to {}", opts.out.display());
    Ok(())
}

async fn soak(a: SoakArgs) -> anyhow::Result<()> {
    let mut opts = watchmux_bench::soak::SoakOptions::new(
        std::env::current_exe().context("locating the watchmux-bench binary")?,
    );
    opts.duration = std::time::Duration::from_secs(a.duration_secs);
    opts.watchers = a.watchers;
    opts.churn_per_sec = a.churn;
    opts.seed = a.seed;
    opts.pods = a.pods;
    opts.nodes = a.nodes;
    opts.settle_timeout = std::time::Duration::from_secs(a.settle_secs);
    opts.out = a.out;
    opts.command = std::env::args()
        .skip(1)
        .fold("watchmux-bench".to_string(), |acc, x| acc + " " + &x);
    let report = watchmux_bench::soak::run(&opts).await?;
    println!("{}", report.markdown);
    if !report.passed {
        anyhow::bail!("the soak failed (see the checks above)");
    }
    Ok(())
}

async fn httpfuzz(a: HttpfuzzArgs) -> anyhow::Result<()> {
    let mut opts = watchmux_bench::httpfuzz::FuzzOptions::new(
        std::env::current_exe().context("locating the watchmux-bench binary")?,
    );
    opts.requests = a.requests;
    opts.seed = a.seed;
    opts.concurrency = a.concurrency;
    opts.only = a.only;
    opts.limits.watch = std::time::Duration::from_millis(a.watch_ms);
    opts.pods = a.pods;
    opts.out = a.out;
    opts.cache_mode = a.cache_mode;
    opts.progress = true;
    opts.command = std::env::args()
        .skip(1)
        .fold("watchmux-bench".to_string(), |acc, x| acc + " " + &x);
    let report = watchmux_bench::httpfuzz::run(&opts).await?;
    println!("{}", report.markdown);
    if !report.passed {
        anyhow::bail!("the HTTP fuzz has findings (see above)");
    }
    Ok(())
}

async fn persist(a: PersistArgs) -> anyhow::Result<()> {
    let mut opts = watchmux_bench::persist::PersistOptions::new(
        std::env::current_exe().context("locating the watchmux-bench binary")?,
    );
    opts.pods = a.pods;
    opts.nodes = a.nodes;
    opts.repeats = a.repeats.max(1);
    opts.churn_rate = a.churn_rate;
    opts.churn_window = std::time::Duration::from_secs_f64(a.churn_secs.max(0.1));
    opts.warmup = std::time::Duration::from_secs_f64(a.warmup_secs.max(0.0));
    opts.data_dir = a.data_dir;
    opts.out = a.out;
    opts.command = std::env::args()
        .skip(1)
        .fold("watchmux-bench".to_string(), |acc, x| acc + " " + &x);
    let report = watchmux_bench::persist::run(&opts).await?;
    println!("{}", report.markdown);
    Ok(())
}
