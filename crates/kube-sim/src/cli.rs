//! The simulator's command line (`kube-sim`), also used by the bench to start it as a process:
//! the flags and the run-until-Ctrl-C loop. Owns no simulation: it builds a [`SimConfig`] and
//! hands it to [`Simulator::start`].

use std::net::SocketAddr;
use std::time::Duration;

use crate::churn::ChurnSpec;
use crate::fleet::FleetSpec;
use crate::kinds::CustomType;
use crate::{SimConfig, SimError, Simulator};

/// `kube-sim` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8001")]
    pub listen: SocketAddr,
    /// Nodes in the synthetic fleet.
    #[arg(long, default_value_t = 0)]
    pub nodes: usize,
    /// Pods in the synthetic fleet, spread over nodes and namespaces.
    #[arg(long, default_value_t = 0)]
    pub pods: usize,
    /// Namespaces the fleet's pods are spread over.
    #[arg(long, default_value_t = 10)]
    pub namespaces: usize,
    /// Pod writes per second (status updates, relabels, moves, creates, deletes).
    #[arg(long, default_value_t = 0.0)]
    pub churn: f64,
    /// Seed for the fleet and churn.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A CRD-like type to serve (repeatable):
    /// group/version/resource=Kind[,cluster][,field=spec.x][,column=Name:type:priority:.json.path].
    #[arg(long = "crd")]
    pub crds: Vec<CustomType>,
    /// Seconds of event history kept per resource (older resourceVersions get 410).
    #[arg(long, default_value_t = 75)]
    pub history_window_secs: u64,
    /// Most events kept per resource.
    #[arg(long, default_value_t = 102_400)]
    pub history_max_events: usize,
    /// Seconds between periodic BOOKMARK events.
    #[arg(long, default_value_t = 60)]
    pub bookmark_interval_secs: u64,
}

impl SimArgs {
    /// The simulator configuration these flags describe.
    pub fn config(&self) -> SimConfig {
        let mut cfg = SimConfig {
            listen: self.listen,
            custom_types: self.crds.clone(),
            bookmark_interval: Duration::from_secs(self.bookmark_interval_secs.max(1)),
            ..SimConfig::default()
        };
        cfg.history.window = Duration::from_secs(self.history_window_secs);
        cfg.history.max_events = self.history_max_events.max(1);
        if self.nodes > 0 || self.pods > 0 {
            cfg.fleet = Some(FleetSpec {
                nodes: self.nodes,
                pods: self.pods,
                namespaces: self.namespaces.max(1),
                seed: self.seed,
            });
        }
        if self.churn > 0.0 {
            cfg.churn = Some(ChurnSpec {
                per_second: self.churn,
                seed: self.seed,
                mix: Default::default(),
            });
        }
        cfg
    }
}

/// Runs the simulator these flags describe until Ctrl-C.
pub async fn run(args: &SimArgs) -> Result<(), SimError> {
    let started = std::time::Instant::now();
    let sim = Simulator::start(args.config()).await?;
    tracing::info!(
        url = %sim.url(),
        revision = sim.store().revision(),
        load_secs = started.elapsed().as_secs_f64(),
        "simulated kube-apiserver ready; try: kubectl --server {} get pods -A",
        sim.url()
    );
    // Ctrl-C not installable: run until killed.
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
    tracing::info!("shutting down");
    sim.shutdown().await;
    Ok(())
}
