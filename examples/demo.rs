//! The README's run command: a simulated kube-apiserver (50 nodes, 1,000 pods, 10 writes/s) with
//! watchmux in front of it on 127.0.0.1:8080, in one process, with the documented `config.toml`.
//!
//! `cargo run --release --example demo [-- --listen 127.0.0.1:8080 --nodes 50 --pods 1000 --churn 10]`

use std::net::SocketAddr;

use anyhow::Context;
use clap::Parser;
use kube_sim::churn::ChurnSpec;
use kube_sim::fleet::FleetSpec;
use kube_sim::{SimConfig, Simulator};
use watchmux::config::Config;

#[derive(Parser, Debug)]
#[command(
    name = "demo",
    about = "A simulated cluster with watchmux in front of it"
)]
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
    /// Log filter (tracing EnvFilter syntax); default: the config's `log.level`.
    #[arg(long, env = "WATCHMUX_LOG")]
    log: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = DemoArgs::parse();
    // The documented example config: on-demand, it caches whatever kind clients read (README,
    // "What is cached").
    let mut config = Config::from_toml_str(include_str!("../config.toml"), "config.toml")?;
    watchmux::serve::init_logging(a.log.as_deref(), None, &config.log)?;
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
        "watchmux demo: point kubectl at it with\n  kubectl --server http://{0} get pods -A -w\nany kind is cached from its first read, CRDs too:\n  kubectl --server http://{0} apply -f examples/widgets-crd.yaml\n  kubectl --server http://{0} apply -f examples/widget.yaml\n  kubectl --server http://{0} get widgets -A -w\nmetrics: http://{0}/metrics  health: http://{0}/readyz?verbose",
        a.listen
    );
    watchmux::serve::run(config).await?;
    sim.shutdown().await;
    Ok(())
}
