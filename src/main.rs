//! The `watchmux` command line.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use watchmux::config::{Config, LogConfig, LogFormat};
use watchmux::server::{self, Proxy};
use watchmux::sim::{SimConfig, Simulator, churn::ChurnSpec, fleet::FleetSpec, kinds::CustomType};
use watchmux::upstream::Upstream;

#[derive(Parser, Debug)]
#[command(
    name = "watchmux",
    version,
    about = "Kubernetes list/watch multiplexer"
)]
struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `watchmux=debug`; overrides the
    /// config's `log.level` (default `info`).
    #[arg(long, env = "WATCHMUX_LOG", global = true)]
    log: Option<String>,
    /// Log format, `text` or `json`; overrides the config's `log.format` (default `text`).
    #[arg(long, env = "WATCHMUX_LOG_FORMAT", global = true, value_parser = ["text", "json"])]
    log_format: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the proxy in front of an upstream kube-apiserver.
    Serve(ServeArgs),
    /// The simulator with a synthetic fleet and watchmux in front of it, in one process.
    Demo(DemoArgs),
    /// Run the built-in kube-apiserver simulator.
    Sim(SimArgs),
    /// Benchmarks: watchmux, the simulator directly, nginx and the limit program side by side
    /// (see README "Performance").
    Bench(BenchArgs),
    /// The bench's limit program (started by `watchmux bench`).
    #[command(hide = true)]
    BenchLimit(BenchLimitArgs),
    /// GET a health URL (e.g. http://127.0.0.1:8080/readyz): exit 0 on 2xx, else print the
    /// answer and exit 1. For exec probes of a watchmux that listens on localhost only.
    Probe(ProbeArgs),
}

#[derive(clap::Args, Debug)]
struct BenchArgs {
    /// Scenarios: s1|broadcast s2|fleet s3|list s4|herd s5|idle s6|sync, or `all`.
    #[arg(default_value = "all")]
    scenarios: Vec<String>,
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
    targets: Vec<watchmux::bench::targets::TargetKind>,
    /// Repeats of each case (medians are reported).
    #[arg(long)]
    repeats: Option<usize>,
    /// Seconds in each measured window.
    #[arg(long)]
    window_secs: Option<f64>,
    /// S1 watcher counts, comma separated.
    #[arg(long, value_delimiter = ',')]
    broadcast_watchers: Option<Vec<usize>>,
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
}

#[derive(clap::Args, Debug)]
struct BenchLimitArgs {
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// The simulator's URL.
    #[arg(long)]
    upstream: String,
}

#[derive(clap::Args, Debug)]
struct ProbeArgs {
    /// The URL to GET.
    url: String,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Configuration file (see config.toml).
    #[arg(long, short)]
    config: std::path::PathBuf,
    /// Overrides `server.listen`.
    #[arg(long)]
    listen: Option<SocketAddr>,
}

#[derive(clap::Args, Debug)]
struct DemoArgs {
    /// Address watchmux listens on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Nodes in the simulated fleet.
    #[arg(long, default_value_t = 50)]
    nodes: usize,
    /// Pods in the simulated fleet.
    #[arg(long, default_value_t = 1000)]
    pods: usize,
    /// Pod writes per second in the simulator.
    #[arg(long, default_value_t = 10.0)]
    churn: f64,
}

#[derive(clap::Args, Debug)]
struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8001")]
    listen: SocketAddr,
    /// Nodes in the synthetic fleet.
    #[arg(long, default_value_t = 0)]
    nodes: usize,
    /// Pods in the synthetic fleet, spread over nodes and namespaces.
    #[arg(long, default_value_t = 0)]
    pods: usize,
    /// Namespaces the fleet's pods are spread over.
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    /// Pod writes per second (status updates, relabels, moves, creates, deletes).
    #[arg(long, default_value_t = 0.0)]
    churn: f64,
    /// Seed for the fleet and churn.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A CRD-like type to serve: group/version/resource=Kind[,cluster][,field=spec.x] (repeatable).
    #[arg(long = "crd")]
    crds: Vec<CustomType>,
    /// Seconds of event history kept per resource (older resourceVersions get 410).
    #[arg(long, default_value_t = 75)]
    history_window_secs: u64,
    /// Most events kept per resource.
    #[arg(long, default_value_t = 102_400)]
    history_max_events: usize,
    /// Seconds between periodic BOOKMARK events.
    #[arg(long, default_value_t = 60)]
    bookmark_interval_secs: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let log = LogArgs {
        filter: cli.log,
        format: cli.log_format,
    };
    match cli.command {
        Command::Serve(a) => run_serve(a, log).await,
        Command::Demo(a) => run_demo(a, log).await,
        Command::Sim(a) => {
            log.init(&LogConfig::default())?;
            run_sim(a).await
        }
        Command::Probe(a) => run_probe(a).await,
        Command::Bench(a) => {
            log.init(&LogConfig {
                level: "warn".into(),
                ..LogConfig::default()
            })?;
            run_bench(a).await
        }
        Command::BenchLimit(a) => {
            watchmux::bench::raise_nofile_limit();
            watchmux::bench::limit::serve(watchmux::bench::limit::LimitArgs {
                listen: a.listen,
                upstream: a.upstream,
            })
            .await
            .context("limit program")
        }
    }
}

async fn run_bench(a: BenchArgs) -> anyhow::Result<()> {
    use watchmux::bench::{BenchOptions, Scenario, Sizes};
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
        idle_watchers
    );
    let scenarios: Vec<Scenario> = if a.scenarios.iter().any(|s| s == "all") {
        Scenario::ALL.to_vec()
    } else {
        a.scenarios
            .iter()
            .map(|s| s.parse().map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<_>>()?
    };
    let opts = BenchOptions {
        exe: std::env::current_exe().context("locating the watchmux binary")?,
        out: a.out,
        scenarios,
        targets: a.targets,
        sizes,
        command: std::env::args()
            .skip(1)
            .fold("watchmux".to_string(), |acc, x| acc + " " + &x),
    };
    let report = watchmux::bench::run(&opts).await?;
    println!("{}", report.markdown);
    eprintln!("results written to {}", opts.out.display());
    Ok(())
}

async fn run_probe(a: ProbeArgs) -> anyhow::Result<()> {
    use http_body_util::{BodyExt, Empty};
    let uri: http::Uri = a.url.parse().context("probe URL")?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let exchange = async {
        let resp = client.get(uri).await?;
        let code = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        anyhow::Ok((code, body))
    };
    let (code, body) = tokio::time::timeout(Duration::from_millis(a.timeout_ms), exchange)
        .await
        .with_context(|| format!("{}: no answer within {} ms", a.url, a.timeout_ms))??;
    if code.is_success() {
        return Ok(());
    }
    print!("{}", String::from_utf8_lossy(&body));
    anyhow::bail!("{}: {code}", a.url)
}

/// Logging overrides from the command line / environment.
struct LogArgs {
    filter: Option<String>,
    format: Option<String>,
}

impl LogArgs {
    /// Installs the global subscriber: CLI/env over the config's `[log]`.
    fn init(&self, c: &LogConfig) -> anyhow::Result<()> {
        let filter = self.filter.as_deref().unwrap_or(&c.level);
        let filter = tracing_subscriber::EnvFilter::try_new(filter)
            .with_context(|| format!("invalid log filter {filter:?}"))?;
        let json = match self.format.as_deref() {
            Some(f) => f == "json",
            None => c.format == LogFormat::Json,
        };
        let b = tracing_subscriber::fmt().with_env_filter(filter);
        if json {
            b.json().flatten_event(true).init();
        } else {
            b.init();
        }
        Ok(())
    }
}

async fn run_serve(a: ServeArgs, log: LogArgs) -> anyhow::Result<()> {
    let mut config = Config::from_file(&a.config)?;
    if let Some(l) = a.listen {
        config.server.listen = l;
    }
    config.validate()?;
    log.init(&config.log)?;
    run_proxy(config).await
}

/// The first SIGTERM or SIGINT (Ctrl-C).
async fn terminated() -> anyhow::Result<&'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map(|_| "SIGINT").context("waiting for Ctrl-C"),
            _ = term.recv() => Ok("SIGTERM"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        Ok("Ctrl-C")
    }
}

async fn run_proxy(config: Config) -> anyhow::Result<()> {
    let upstream = Upstream::new(&config.upstream).context("upstream client")?;
    let downstream = server::Downstream::from_config(&config.server)?;
    let proxy = Proxy::start(&config, upstream);
    let addr = server::bind_and_serve_with(proxy.clone(), config.server.listen, downstream)
        .await
        .with_context(|| format!("cannot listen on {}", config.server.listen))?;
    tracing::info!(listen = %addr, upstream = %proxy.upstream.url(), resources = config.cache.resources.len(), authz = %config.server.authz_mode(), "watchmux serving");
    let signal = terminated().await?;
    let s = &config.server;
    tracing::info!(
        signal,
        delay = ?s.shutdown_delay,
        timeout = ?s.shutdown_timeout,
        "shutting down: /readyz fails, then watches end and connections drain"
    );
    tokio::select! {
        clean = proxy.shutdown_within(s.shutdown_delay, s.shutdown_timeout) => {
            if clean {
                tracing::info!("shut down cleanly");
            } else {
                tracing::warn!("shutdown bound reached; remaining connections dropped");
            }
        }
        r = terminated() => {
            tracing::warn!(signal = ?r.ok(), "second signal: exiting now");
        }
    }
    Ok(())
}

async fn run_demo(a: DemoArgs, log: LogArgs) -> anyhow::Result<()> {
    // The documented example config: it caches what kubelets, controllers and dashboards watch.
    let mut config = Config::from_toml_str(include_str!("../config.toml"), "config.toml")?;
    log.init(&config.log)?;
    let sim = Simulator::start(SimConfig {
        fleet: Some(FleetSpec {
            nodes: a.nodes,
            pods: a.pods,
            namespaces: 10,
            seed: 1,
        }),
        churn: (a.churn > 0.0).then_some(ChurnSpec {
            per_second: a.churn,
            seed: 1,
            mix: Default::default(),
        }),
        ..SimConfig::default()
    })
    .await
    .context("starting the simulator")?;
    config.server.listen = a.listen;
    config.upstream.url = Some(sim.url().parse().context("simulator URL")?);
    config.validate()?;
    tracing::info!(simulator = %sim.url(), "simulated kube-apiserver with {} nodes and {} pods", a.nodes, a.pods);
    println!(
        "watchmux demo: point kubectl at it with\n  kubectl --server http://{0} get pods -A -w\nmetrics: http://{0}/metrics  health: http://{0}/readyz?verbose",
        a.listen
    );
    run_proxy(config).await
}

async fn run_sim(a: SimArgs) -> anyhow::Result<()> {
    let mut cfg = SimConfig {
        listen: a.listen,
        custom_types: a.crds,
        bookmark_interval: Duration::from_secs(a.bookmark_interval_secs.max(1)),
        ..SimConfig::default()
    };
    cfg.history.window = Duration::from_secs(a.history_window_secs);
    cfg.history.max_events = a.history_max_events.max(1);
    if a.nodes > 0 || a.pods > 0 {
        cfg.fleet = Some(FleetSpec {
            nodes: a.nodes,
            pods: a.pods,
            namespaces: a.namespaces.max(1),
            seed: a.seed,
        });
    }
    if a.churn > 0.0 {
        cfg.churn = Some(ChurnSpec {
            per_second: a.churn,
            seed: a.seed,
            mix: Default::default(),
        });
    }
    let started = std::time::Instant::now();
    let sim = Simulator::start(cfg)
        .await
        .context("starting the simulator")?;
    tracing::info!(
        url = %sim.url(),
        revision = sim.store().revision(),
        load_secs = started.elapsed().as_secs_f64(),
        "simulated kube-apiserver ready; try: kubectl --server {} get pods -A",
        sim.url()
    );
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    tracing::info!("shutting down");
    sim.shutdown().await;
    Ok(())
}
