//! The `watchmux` command line.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use watchmux::config::Config;
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
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `watchmux=debug`.
    #[arg(long, env = "WATCHMUX_LOG", default_value = "info", global = true)]
    log: String,
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log).context("invalid --log filter")?,
        )
        .init();
    match cli.command {
        Command::Serve(a) => run_serve(a).await,
        Command::Demo(a) => run_demo(a).await,
        Command::Sim(a) => run_sim(a).await,
    }
}

async fn run_serve(a: ServeArgs) -> anyhow::Result<()> {
    let mut config = Config::from_file(&a.config)?;
    if let Some(l) = a.listen {
        config.server.listen = l;
    }
    config.validate()?;
    config.upstream.require_url()?;
    run_proxy(config).await
}

async fn run_proxy(config: Config) -> anyhow::Result<()> {
    let upstream = Upstream::new(&config.upstream).context("upstream client")?;
    let proxy = Proxy::start(&config, upstream);
    let addr = server::bind_and_serve(proxy.clone(), config.server.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.server.listen))?;
    tracing::info!(listen = %addr, upstream = %proxy.upstream.url(), resources = config.cache.resources.len(), "watchmux serving");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    tracing::info!("shutting down");
    proxy.shutdown().await;
    Ok(())
}

async fn run_demo(a: DemoArgs) -> anyhow::Result<()> {
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
        }),
        ..SimConfig::default()
    })
    .await
    .context("starting the simulator")?;
    // The documented example config: it caches what kubelets, controllers and dashboards watch.
    let mut config = Config::from_toml_str(include_str!("../config.toml"), "config.toml")?;
    config.server.listen = a.listen;
    config.upstream.url = Some(sim.url().parse().context("simulator URL")?);
    config.validate()?;
    tracing::info!(simulator = %sim.url(), "simulated kube-apiserver with {} nodes and {} pods", a.nodes, a.pods);
    println!(
        "watchmux demo: point kubectl at it with\n  kubectl --server http://{} get pods -A -w",
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
