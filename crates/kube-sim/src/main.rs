//! `kube-sim`: the simulated kube-apiserver as a process (`kube-sim --pods 1000 --churn 10`).
//!
//! Logging setup only: the flags and the run loop are `kube_sim::cli`'s, shared with the bench.

use anyhow::Context;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "kube-sim", version, about = "A simulated kube-apiserver")]
struct Cli {
    /// Log filter (tracing EnvFilter syntax).
    #[arg(long, env = "KUBE_SIM_LOG", default_value = "info")]
    log: String,
    #[command(flatten)]
    sim: kube_sim::cli::SimArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log)
                .with_context(|| format!("invalid log filter {:?}", cli.log))?,
        )
        .init();
    kube_sim::cli::run(&cli.sim)
        .await
        .context("starting the simulator")
}
