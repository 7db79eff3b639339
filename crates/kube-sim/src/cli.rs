//! The simulator's command line (`kube-sim`), also used by the bench to start it as a process:
//! the flags and the run-until-Ctrl-C loop. Owns no simulation: it builds a [`SimConfig`] and
//! hands it to [`Simulator::start`]; with `--tls-listen` it also serves the same simulator over
//! HTTPS on a second address (the bench's clients over TLS, beside the plain listener its
//! control requests and the proxies under test use).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::TcpListener;

use crate::churn::ChurnSpec;
use crate::cl2::Cl2Spec;
use crate::fleet::FleetSpec;
use crate::kinds::CustomType;
use crate::{SimConfig, SimError, Simulator};

/// The kind of cluster the simulator loads.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shape {
    /// `--nodes` nodes and `--pods` pods over `--namespaces` namespaces, nothing else.
    #[default]
    Flat,
    /// Kubernetes' 5,000-node load test scaled to `--nodes`: Deployments, ReplicaSets, pods,
    /// ConfigMaps, Secrets, Services, EndpointSlices, Leases ([`crate::cl2`]).
    Cl2,
}

/// `kube-sim` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8001")]
    pub listen: SocketAddr,
    /// The cluster loaded at start.
    #[arg(long, value_enum, default_value_t = Shape::Flat)]
    pub shape: Shape,
    /// Nodes (both shapes; `cl2` makes at least one).
    #[arg(long, default_value_t = 0)]
    pub nodes: usize,
    /// Pods in the flat fleet, spread over nodes and namespaces (`flat` only).
    #[arg(long, default_value_t = 0)]
    pub pods: usize,
    /// Namespaces the flat fleet's pods are spread over (`flat` only).
    #[arg(long, default_value_t = 10)]
    pub namespaces: usize,
    /// Pod writes per second (`flat`: status updates, relabels, moves, creates, deletes;
    /// `cl2`: Deployments scaled through their pods' creates, binds, runs and deletes, and
    /// status updates).
    #[arg(long, default_value_t = 0.0)]
    pub churn: f64,
    /// Seed for the fleet and churn.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A CRD-like type to serve (repeatable):
    /// group/version/resource=Kind[,cluster][,aggregated][,field=spec.x][,column=Name:type:priority:.json.path]
    /// (`aggregated`: served as an aggregated API's type, such as metrics.k8s.io's, with no
    /// CustomResourceDefinition).
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
    /// Also serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN) on this address, with --tls-cert-file
    /// and --tls-key-file; --listen stays plain HTTP.
    #[arg(long, requires_all = ["tls_cert_file", "tls_key_file"])]
    pub tls_listen: Option<SocketAddr>,
    /// PEM certificate chain of the --tls-listen address.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long)]
    pub tls_key_file: Option<PathBuf>,
    /// Authenticate and authorize every request, as a cluster does its nodes: each node of the
    /// loaded cluster by its own bearer token `node-token-<node>` (user `system:node:<node>`,
    /// group `system:nodes`: read everything, write Leases, pod and node status, Events), and
    /// ADMIN_TOKEN as `kube-sim-admin` in `system:masters` (anything, TokenReviews and
    /// SubjectAccessReviews included). Other tokens get 401, requests without one are
    /// `system:anonymous`, which may read no resource.
    #[arg(long, value_name = "ADMIN_TOKEN", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub node_tokens: Option<String>,
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
        if self.shape == Shape::Cl2 {
            cfg.cl2 = Some(Cl2Spec {
                nodes: self.nodes,
                seed: self.seed,
            });
        } else if self.nodes > 0 || self.pods > 0 {
            cfg.fleet = Some(FleetSpec {
                nodes: self.nodes,
                pods: self.pods,
                namespaces: self.namespaces.max(1),
                seed: self.seed,
            });
        }
        if let Some(admin) = &self.node_tokens {
            let nodes: Vec<String> = match &cfg.cl2 {
                Some(spec) => spec.node_names(),
                None => (0..self.nodes).map(crate::fleet::node_name).collect(),
            };
            cfg.policy = Some(crate::authz::Policy::node_authorizer(nodes, admin));
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
    if let (Some(addr), Some(cert), Some(key)) =
        (args.tls_listen, &args.tls_cert_file, &args.tls_key_file)
    {
        serve_tls(&sim, addr, cert, key).await?;
    }
    tracing::info!(
        url = %sim.url(),
        revision = sim.store().revision(),
        load_secs = started.elapsed().as_secs_f64(),
        rss_mib = resident_mib().unwrap_or(0),
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

/// The process's resident memory in MiB (`VmRSS` of `/proc/self/status`; Linux only).
fn resident_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Serves `sim` over HTTPS on `addr` too, with the certificate chain and key in `cert` and `key`
/// (PEM files), until the simulator shuts down: the same requests, faults and counters as on
/// its own listener.
async fn serve_tls(
    sim: &Simulator,
    addr: SocketAddr,
    cert: &Path,
    key: &Path,
) -> Result<(), SimError> {
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| SimError::Tls(format!("{}: {e}", p.display())))
    };
    let tls = crate::tls::SimTls {
        cert_pem: read(cert)?,
        key_pem: read(key)?,
        ..Default::default()
    };
    let acceptor = crate::tls::acceptor(&tls).map_err(SimError::Tls)?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| SimError::Bind { addr, source })?;
    let state = sim.state().clone();
    // The simulator's own accept loop, with this listener and its TLS acceptor.
    sim.state()
        .tasks
        .spawn(crate::accept_loop(state, listener, Some(acceptor)));
    Ok(())
}
