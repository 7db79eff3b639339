//! The README's run command: a simulated kube-apiserver holding a small cluster of the CL2 shape
//! (Kubernetes' 5,000-node load test scaled to 20 nodes: Deployments, ReplicaSets, pods,
//! ConfigMaps, Secrets, Services, EndpointSlices, Leases; 5 pod writes/s scaling Deployments)
//! with watchmux in front of it on 127.0.0.1:8080, in one process, with the documented
//! `config.toml`.
//!
//! `cargo run --release --example demo [-- --listen 127.0.0.1:8080 --nodes 20 --churn 5 --seed 1]`

use std::net::SocketAddr;

use anyhow::Context;
use clap::Parser;
use kube_sim::churn::ChurnSpec;
use kube_sim::cl2::Cl2Spec;
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
    /// Nodes of the simulated cluster (its workloads scale with them: 100 nodes make a
    /// namespace of 323 Deployments and 2,680 pods).
    #[arg(long, default_value_t = 20)]
    nodes: usize,
    /// Pod writes per second in the simulator (Deployments scaled, pods created, bound, run,
    /// deleted, status updates).
    #[arg(long, default_value_t = 5.0)]
    churn: f64,
    /// Seed of the simulated cluster and its churn.
    #[arg(long, default_value_t = 1)]
    seed: u64,
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
    let shape = Cl2Spec {
        nodes: a.nodes,
        seed: a.seed,
    };
    let sim = Simulator::start(SimConfig {
        cl2: Some(shape),
        churn: (a.churn > 0.0).then_some(ChurnSpec {
            per_second: a.churn,
            seed: a.seed,
            mix: Default::default(),
        }),
        ..SimConfig::default()
    })
    .await
    .context("starting the simulator")?;
    config.server.listen = a.listen;
    config.upstream.url = Some(sim.url().parse().context("simulator URL")?);
    config.validate()?;
    tracing::info!(
        simulator = %sim.url(),
        "simulated kube-apiserver with {} nodes, {} deployments and {} pods",
        shape.node_count(),
        shape.deployment_count(),
        shape.pod_count()
    );
    println!(
        "watchmux demo: point kubectl at it with\n  kubectl --server http://{0} get pods -A -w\n  kubectl --server http://{0} get deploy,rs,svc,endpointslices,cm,secrets,leases,pods -A\nany kind is cached from its first read, CRDs too:\n  kubectl --server http://{0} apply -f examples/widgets-crd.yaml\n  kubectl --server http://{0} apply -f examples/widget.yaml\n  kubectl --server http://{0} get widgets -A -w\nmetrics: http://{0}/metrics  health: http://{0}/readyz?verbose",
        a.listen
    );
    watchmux::serve::run(config).await?;
    sim.shutdown().await;
    Ok(())
}
