//! A kube-apiserver simulator: a library that starts one in-process ([`Simulator::start`]), the
//! `kube-sim` binary that runs one as a process, and a [`testkit`] for tests that talk to it.
//!
//! A real component, not a mock: an etcd-like MVCC store behind kube-apiserver 1.34's list/watch
//! semantics, discovery, the write verbs with their per-kind rules, selectors, Status errors,
//! compaction, fault injection and counters. watchmux's tests, demo and benchmarks use it as the
//! upstream, because no real apiserver runs on our machines.
//!
//! It does not depend on watchmux (of the workspace, only on kube-wire, for the shared
//! vocabulary), so the proxy is tested against it from the outside, as against a real apiserver.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kube_sim::SimError> {
//! let sim = kube_sim::Simulator::start(kube_sim::SimConfig::default()).await?;
//! println!("kubectl --server {} get pods -A", sim.url());
//! # Ok(()) }
//! ```

pub mod authz;
pub mod churn;
pub mod cl2;
pub mod cli;
pub mod discovery;
pub mod exec;
pub mod faults;
pub mod fleet;
pub mod http;
pub mod kinds;
pub mod ops;
pub mod patch;
pub mod protobuf;
pub mod semantics;
pub mod stats;
pub mod store;
pub mod testkit;
pub mod tls;
pub mod util;
pub mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use faults::Faults;
use kinds::{CustomType, Registry, ResourceType};
use kube_wire::status::Status;
use kube_wire::table::{PrinterColumns, TablePrinter};
use ops::{ControllerTimings, Ops};
use stats::Stats;
use store::{HistoryConfig, Store};

/// Namespaces every cluster has.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Simulator settings.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// History kept per resource (the compaction policy).
    pub history: HistoryConfig,
    /// Interval of periodic BOOKMARK events (kube: 1 min).
    pub bookmark_interval: Duration,
    /// Watches without `timeoutSeconds` last a random time in [this, 2× this) (kube: 1800 s).
    pub min_request_timeout: Duration,
    /// How often expired history is compacted.
    pub compaction_interval: Duration,
    /// CRD-like types served besides the built-ins (more can be served at run time by creating
    /// `CustomResourceDefinition`s).
    pub custom_types: Vec<CustomType>,
    /// Simulated kubelet and namespace controller timings.
    pub timings: ControllerTimings,
    /// A synthetic fleet loaded at start (the flat shape: nodes and pods).
    pub fleet: Option<fleet::FleetSpec>,
    /// A cluster of the CL2 shape loaded at start (workloads, services, endpoint slices, leases,
    /// … scaled from a node count, see [`cl2`]), with its simulated controllers; churn then
    /// scales its Deployments.
    pub cl2: Option<cl2::Cl2Spec>,
    /// Continuous churn over the fleet's pods.
    pub churn: Option<churn::ChurnSpec>,
    /// Serve HTTPS (optionally requiring a client certificate and/or a bearer token).
    pub tls: Option<tls::SimTls>,
    /// The authentication and authorization policy in effect from the start (see [`authz`];
    /// [`SimState::set_policy`] changes it later); `None` serves everyone.
    pub policy: Option<authz::Policy>,
    /// kube 1.36's feature gate `ShardedListAndWatch` (KEP-5866), on by default: the simulator
    /// plays an apiserver that has it on. On, a LIST or WATCH (and a DELETE of a collection,
    /// which lists) with a non-empty `shardSelector` gets only the objects whose hashed uid or
    /// namespace is in its ranges, a typed list echoes it in `metadata.shardInfo`, and one that
    /// does not parse is a 500 (`kube_wire::shard`). Off, the parameter is ignored, as by an
    /// apiserver with the gate off or older than 1.36.
    pub sharded_list_and_watch: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history: HistoryConfig::default(),
            bookmark_interval: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
            compaction_interval: Duration::from_secs(1),
            custom_types: Vec::new(),
            timings: ControllerTimings::default(),
            fleet: None,
            cl2: None,
            churn: None,
            tls: None,
            policy: None,
            sharded_list_and_watch: true,
        }
    }
}

/// Why the simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The declared types are inconsistent.
    #[error("invalid resource types: {0}")]
    Types(String),
    /// Loading the initial objects failed.
    #[error("loading the initial objects failed: {}", .0.message)]
    Load(Status),
    /// The TLS settings are unusable.
    #[error("invalid TLS settings: {0}")]
    Tls(String),
}

/// Shared state of a running simulator.
pub struct SimState {
    /// Served types.
    pub registry: Arc<Registry>,
    /// The MVCC store.
    pub store: Arc<Store>,
    /// Write verbs.
    pub ops: Ops,
    /// Fault switches.
    pub faults: Faults,
    /// Counters.
    pub stats: Stats,
    /// Settings.
    pub config: SimConfig,
    /// Bound address.
    pub addr: SocketAddr,
    /// Stops everything.
    pub cancel: CancellationToken,
    /// Background tasks (watch streams, controllers).
    pub tasks: TaskTracker,
    /// Stops the churn started through `/sim/churn`.
    pub churn_control: parking_lot::Mutex<Option<CancellationToken>>,
    /// The bearer token requests must carry (TLS mode).
    pub auth: tls::SimAuth,
    /// The authentication/authorization policy; `None` (the default) serves everyone.
    pub policy: parking_lot::RwLock<Option<Arc<authz::Policy>>>,
}

impl SimState {
    /// Sets the policy: from now on requests are authenticated and authorized with it, and the
    /// review endpoints answer from it (see [`authz`]).
    pub fn set_policy(&self, policy: authz::Policy) {
        *self.policy.write() = Some(Arc::new(policy));
    }

    /// Removes the policy: everyone is served again.
    pub fn clear_policy(&self) {
        *self.policy.write() = None;
    }

    /// The policy in effect.
    pub fn policy(&self) -> Option<Arc<authz::Policy>> {
        self.policy.read().clone()
    }

    /// How Tables of `rt` are printed now: a built-in kind's printer, or a custom type's
    /// printer columns read from its stored `CustomResourceDefinition` (kube's convertor stops
    /// at a column whose JSONPath does not parse; a CRD or version that is gone prints kube's
    /// default Name and Age).
    pub fn table_printer(&self, rt: &ResourceType) -> TablePrinter {
        if rt.builtin {
            return TablePrinter::for_kind(&rt.group, &rt.kind);
        }
        let columns = self
            .registry
            .get(kinds::CRD_GROUP, "v1", kinds::CRD_RESOURCE)
            .and_then(|crds| {
                let name = format!("{}.{}", rt.resource, rt.group);
                let crd = self.ops.get(&crds, None, &name).ok()?;
                PrinterColumns::of_crd(&crd.to_value(&crds), &rt.version)
            })
            .map(|parsed| parsed.unwrap_or_else(|invalid| invalid.partial))
            .unwrap_or_else(PrinterColumns::default_columns);
        TablePrinter::crd(Arc::new(columns))
    }
}

/// A running simulator. Dropping it stops the server and its tasks.
pub struct Simulator {
    state: Arc<SimState>,
}

impl Simulator {
    /// Binds, loads the system namespaces and the fleet, and starts serving.
    pub async fn start(config: SimConfig) -> Result<Simulator, SimError> {
        let registry = Arc::new(Registry::new(&config.custom_types).map_err(SimError::Types)?);
        let acceptor = config
            .tls
            .as_ref()
            .map(tls::acceptor)
            .transpose()
            .map_err(SimError::Tls)?;
        let auth = tls::SimAuth::new(config.tls.as_ref().and_then(|t| t.bearer_token.clone()));
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| SimError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            addr: config.listen,
            source,
        })?;
        let store = Arc::new(Store::new(registry.clone(), config.history));
        let cancel = CancellationToken::new();
        let tasks = TaskTracker::new();
        let ops = Ops::new(store.clone(), config.timings, tasks.clone(), cancel.clone());
        let policy = parking_lot::RwLock::new(config.policy.clone().map(Arc::new));
        let state = Arc::new(SimState {
            stats: Stats::new(&registry),
            registry,
            store,
            ops,
            faults: Faults::default(),
            config,
            addr,
            cancel,
            tasks,
            auth,
            policy,
            churn_control: parking_lot::Mutex::new(None),
        });
        let sim = Simulator { state };
        let workloads = sim.load()?;
        if let Some(model) = workloads {
            cl2::controllers::spawn(&sim.state, model);
        }
        sim.spawn_compactor();
        if let Some(spec) = sim.state.config.churn.clone() {
            churn::spawn(&sim.state, spec);
        }
        let state = sim.state.clone();
        sim.state
            .tasks
            .spawn(accept_loop(state, listener, acceptor));
        Ok(sim)
    }

    /// Loads the system namespaces, custom types' CRDs and the configured shape; returns the
    /// CL2 shape's controllers' starting point when it loaded one.
    fn load(&self) -> Result<Option<cl2::controllers::Model>, SimError> {
        let nsrt = self.state.registry.core("namespaces").clone();
        for ns in SYSTEM_NAMESPACES {
            self.state
                .ops
                .create(&nsrt, None, json!({"metadata":{"name":ns}}), false)
                .map_err(SimError::Load)?;
        }
        // One CustomResourceDefinition per custom group and resource, with its versions (none
        // for the types of an aggregated API). Creating it serves the types it describes, which
        // the registry serves already: the same ones, in the same slots.
        if let Some(crds) = self
            .state
            .registry
            .get(kinds::CRD_GROUP, "v1", kinds::CRD_RESOURCE)
        {
            let custom = &self.state.config.custom_types;
            let mut seen = std::collections::HashSet::new();
            for t in custom.iter().filter(|t| !t.served_without_crd) {
                if !seen.insert(t.crd_name()) {
                    continue;
                }
                let versions: Vec<&CustomType> = custom
                    .iter()
                    .filter(|o| {
                        o.group == t.group && o.resource == t.resource && !o.served_without_crd
                    })
                    .collect();
                if let Some(crd) = CustomType::crd_object(&versions) {
                    self.state
                        .ops
                        .create(&crds, None, crd, true)
                        .map_err(SimError::Load)?;
                }
            }
        }
        if let Some(spec) = &self.state.config.fleet {
            // The fleet's objects are generated canonical (`fleet`'s tests check it): stored
            // without transcoding, their protobuf encoded when first read.
            self.state
                .store
                .load_canonical(|| fleet_load(&self.state, spec))
                .map_err(SimError::Load)?;
        }
        self.state
            .config
            .cl2
            .map(|spec| cl2::load(&self.state, &spec))
            .transpose()
            .map_err(SimError::Load)
    }

    fn spawn_compactor(&self) {
        let state = self.state.clone();
        self.state.tasks.spawn(async move {
            let mut tick = tokio::time::interval(state.config.compaction_interval);
            loop {
                tokio::select! {
                    _ = state.cancel.cancelled() => return,
                    _ = tick.tick() => state.store.compact_expired(),
                }
            }
        });
    }

    /// `http://127.0.0.1:PORT` (`https://` in TLS mode).
    pub fn url(&self) -> String {
        let scheme = if self.state.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.state.addr)
    }

    /// Changes the bearer token requests must carry (`None`: no token needed).
    pub fn set_bearer_token(&self, token: Option<String>) {
        self.state.auth.set(token);
    }

    /// The leaf certificate (DER) each TLS client presented (and the client CA verified), in the
    /// order of the handshakes.
    pub fn client_certificates(&self) -> Vec<Vec<u8>> {
        self.state.auth.client_certificates()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.state.addr
    }

    /// Shared state: store, write verbs, faults, stats.
    pub fn state(&self) -> &Arc<SimState> {
        &self.state
    }

    /// The MVCC store.
    pub fn store(&self) -> &Arc<Store> {
        &self.state.store
    }

    /// The write verbs (create/update/patch/delete as the HTTP API performs them).
    pub fn ops(&self) -> &Ops {
        &self.state.ops
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Counters as JSON (the same document as `GET /sim/stats`).
    pub fn stats(&self) -> serde_json::Value {
        self.state.stats.to_json(&self.state.registry)
    }

    /// A served type, by group/version/resource.
    pub fn resource(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<ResourceType>> {
        self.state.registry.get(group, version, resource)
    }

    /// The counters of a type served now, by group/version/resource (e.g. `open_watches` of
    /// a CRD's `example.com/v1/widgets`). They are the counters of the type's registry slot:
    /// still readable after the type is no longer served (keep the `Arc`), and fresh ones if
    /// its CRD is created again.
    pub fn resource_stats(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<stats::ResourceStats>> {
        let rt = self.state.registry.get(group, version, resource)?;
        Some(self.state.stats.resource(rt.index))
    }

    /// Stops serving and waits for every task to end.
    pub async fn shutdown(self) {
        self.state.cancel.cancel();
        self.state.tasks.close();
        self.state.tasks.wait().await;
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.state.cancel.cancel();
    }
}

/// Creates the fleet's namespaces, nodes and pods (with status, as kubelets would have written it).
fn fleet_load(state: &SimState, spec: &fleet::FleetSpec) -> Result<(), Status> {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed);
    let reg = &state.registry;
    let (nsrt, nodes, pods) = (reg.core("namespaces"), reg.core("nodes"), reg.core("pods"));
    let namespaces = fleet::namespace_names(spec);
    for ns in &namespaces {
        state
            .ops
            .create(&nsrt, None, json!({"metadata":{"name":ns}}), false)?;
    }
    let mut node_names = Vec::with_capacity(spec.nodes);
    for i in 0..spec.nodes {
        let n = fleet::node(i, &mut rng);
        node_names.push(
            n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        state.ops.create(&nodes, None, n, true)?;
    }
    for i in 0..spec.pods {
        let ns = &namespaces[i % namespaces.len().max(1)];
        let node = if node_names.is_empty() {
            ""
        } else {
            &node_names[i % node_names.len()]
        };
        let p = fleet::pod(i, ns, node, &mut rng);
        state.ops.create(&pods, Some(ns), p, true)?;
    }
    Ok(())
}

/// Accepts connections on `listener` (over TLS with `acceptor`) and serves the simulator on
/// them until it shuts down; also `cli`'s `--tls-listen` listener.
/// The streams an HTTP/2 connection may have open at once: kube-apiserver's default
/// (`--http2-max-streams-per-connection` unset), so that clients that multiplex many watches
/// on one connection meet the same cap here as there.
pub const HTTP2_MAX_STREAMS: u32 = 100;

pub(crate) async fn accept_loop(
    state: Arc<SimState>,
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        let conn = tokio::select! {
            _ = state.cancel.cancelled() => return,
            c = listener.accept() => c,
        };
        let Ok((stream, _peer)) = conn else { continue };
        if state.faults.refusing() {
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        let st = state.clone();
        let st_restarts = state.faults.restarts();
        let cancel = state.cancel.clone();
        let acceptor = acceptor.clone();
        state.tasks.spawn(async move {
            let stream = tokio::select! {
                s = tls::accept(acceptor.as_ref(), stream, &st.auth) => s,
                _ = cancel.cancelled() => None,
            };
            let Some(stream) = stream else { return };
            let svc = service_fn(move |req| http::handle(st.clone(), req));
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http2().max_concurrent_streams(HTTP2_MAX_STREAMS);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            let mut restarts = st_restarts;
            restarts.borrow_and_update();
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = cancel.cancelled() => return,
                // A restart (`Faults::restart_for`): GOAWAY over HTTP/2, close once idle over
                // HTTP/1.1; what is in flight finishes.
                _ = restarts.changed() => conn.as_mut().graceful_shutdown(),
            }
            tokio::select! {
                _ = conn => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}
