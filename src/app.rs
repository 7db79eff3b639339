//! The application: what one running watchmux is, and its life cycle. [`App::start`] creates a
//! cache slot per configured resource and starts its reflector; the downstream server routes
//! requests to the slots; [`App::shutdown_within`] drains it.
//!
//! Owns the state every request handler shares (slots, upstream client, limits, metrics, the
//! printer columns of cached custom resources, the cancellation tokens and task trackers). It
//! must not serve HTTP itself (that is [`crate::downstream`]) nor touch the upstream directly
//! (that is [`crate::reflector`], whose CRD watch it starts).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch as tokio_watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cache::budget::MemoryBudget;
use crate::cache::{CacheSettings, ResourceCache};
use crate::config::{CacheConfig, Config, ResourceSpec};
use crate::downstream::limits;
use crate::reflector::crd::CrdColumns;
use crate::reflector::{Freshness, Reflector};
use crate::upstream::Upstream;

/// Where a resource's cache will be once upstream discovery has answered.
#[derive(Debug)]
pub struct CacheSlot {
    tx: tokio_watch::Sender<Option<Arc<ResourceCache>>>,
    freshness: std::sync::OnceLock<Arc<Freshness>>,
}

impl CacheSlot {
    fn new() -> Self {
        CacheSlot {
            tx: tokio_watch::channel(None).0,
            freshness: std::sync::OnceLock::new(),
        }
    }

    /// The freshness check of consistent reads, once discovered.
    pub fn freshness(&self) -> Option<&Arc<Freshness>> {
        self.freshness.get()
    }

    /// The cache, if discovered.
    pub fn get(&self) -> Option<Arc<ResourceCache>> {
        self.tx.borrow().clone()
    }

    /// Waits up to `timeout` for a synced cache.
    pub async fn synced(&self, timeout: Duration) -> Option<Arc<ResourceCache>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.tx.subscribe();
        let cache = match tokio::time::timeout_at(deadline, rx.wait_for(Option::is_some)).await {
            Ok(Ok(c)) => c.clone()?,
            _ => return None,
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        cache.wait_synced(left).await.then_some(cache)
    }
}

/// The running proxy: one cache slot per configured resource, the upstream client, the
/// downstream settings and limits, metrics, and the tasks and tokens of its life cycle.
pub struct App {
    pub(crate) slots: HashMap<(String, String, String), CacheSlot>,
    /// Pass-through client.
    pub upstream: Upstream,
    /// Cache settings from the config.
    pub cache_config: CacheConfig,
    /// Watches without `timeoutSeconds` last a random time in [this, 2× this) (kube: 1800 s).
    pub min_request_timeout: Duration,
    /// Stops everything.
    pub cancel: CancellationToken,
    /// Graceful shutdown began: stop accepting, end watches cleanly, finish connections. A child
    /// of `cancel` (cancelling `cancel` cancels it too).
    pub draining: CancellationToken,
    /// Background tasks.
    pub tasks: TaskTracker,
    /// Downstream connections (waited for, within a bound, at shutdown).
    pub conns: TaskTracker,
    /// Metrics and health state.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// `server.authz = "delegated"`: authenticates and authorizes every request the cache
    /// answers. `None` for `server.authz = "none"`.
    pub authz: Option<Arc<crate::downstream::authz::Authorizer>>,
    /// Concurrent cached watches per client and cached LISTs overall (`server.max_*`).
    pub limits: Arc<limits::Limits>,
    /// `server.max_url_bytes`.
    pub max_url_bytes: usize,
    /// `server.max_header_bytes`.
    pub max_header_bytes: usize,
    /// `server.header_read_timeout_secs`.
    pub header_read_timeout: Duration,
    /// The printer columns of the cached custom resources, kept current by one upstream watch
    /// of their CRDs (started only when a custom resource is cached).
    pub crd_columns: Arc<CrdColumns>,
    /// `cache.memory_limit`: what every cache counts in, and the load shedding it drives.
    pub budget: Arc<MemoryBudget>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Builds the proxy and starts one reflector per cached resource.
    pub fn start(config: &Config, upstream: Upstream) -> Arc<App> {
        let mut slots = HashMap::new();
        for spec in &config.cache.resources {
            slots.insert(
                (
                    spec.group.clone(),
                    spec.version.clone(),
                    spec.resource.clone(),
                ),
                CacheSlot::new(),
            );
        }
        let cancel = CancellationToken::new();
        let crd_columns = Arc::new(CrdColumns::new(
            config
                .cache
                .resources
                .iter()
                .filter(|s| !kube_wire::selector::selectable::is_builtin_group(&s.group))
                .map(|s| (s.group.as_str(), s.resource.as_str())),
        ));
        let authz =
            (config.server.authz_mode() == crate::config::AuthzMode::Delegated).then(|| {
                Arc::new(crate::downstream::authz::Authorizer::new(
                    upstream.clone(),
                    &config.server,
                ))
            });
        let budget = MemoryBudget::new(config.cache.memory_limit);
        let proxy = Arc::new(App {
            slots,
            upstream,
            cache_config: config.cache.clone(),
            min_request_timeout: Duration::from_secs(1800),
            draining: cancel.child_token(),
            cancel,
            authz,
            limits: limits::Limits::new(
                config.server.max_watches_per_client,
                config.server.max_concurrent_lists,
            ),
            max_url_bytes: usize::try_from(config.server.max_url_bytes).unwrap_or(usize::MAX),
            max_header_bytes: usize::try_from(config.server.max_header_bytes).unwrap_or(usize::MAX),
            header_read_timeout: config.server.header_read_timeout,
            tasks: TaskTracker::new(),
            conns: TaskTracker::new(),
            metrics: Arc::new(crate::metrics::Metrics::with_budget(config, budget.clone())),
            crd_columns,
            budget,
        });
        if proxy.crd_columns.wants_any() {
            let (up, columns, cancel) = (
                proxy.upstream.watch_client(),
                proxy.crd_columns.clone(),
                proxy.cancel.clone(),
            );
            proxy
                .tasks
                .spawn(crate::reflector::crd::run(up, columns, cancel));
        }
        for spec in &config.cache.resources {
            let p = proxy.clone();
            let spec = spec.clone();
            proxy.tasks.spawn(async move { p.run_resource(spec).await });
        }
        proxy
    }

    fn settings(&self) -> CacheSettings {
        let c = &self.cache_config;
        CacheSettings {
            window_count: c.event_window_count,
            window_bytes: c.event_window_bytes,
            window_age: c.event_window,
            state_proof_max_objects: c.consistent_read_state_max_objects,
            watcher_queue: c.watcher_queue,
            max_lag_bytes: c.watcher_max_lag_bytes,
            retention: crate::cache::Retention {
                max_age: c.snapshot_retention,
                max_count: c.snapshot_max_count,
                max_bytes: c.snapshot_max_bytes,
            },
            budget: self.budget.clone(),
            max_object_bytes: c.max_object_bytes,
            persist_dir: c.persist_dir.clone(),
        }
    }

    /// The reflector of `spec`: discovery, then list and watch, until `cancel`. Once discovery
    /// answered, it hands the new cache to [`App::publish`].
    async fn run_resource(self: Arc<Self>, spec: ResourceSpec) {
        let app = self.clone();
        let published = spec.clone();
        let reflector = Reflector::new(
            self.upstream.watch_client(),
            spec.clone(),
            self.settings(),
            self.cache_config.list_page_size,
            self.metrics.for_spec(&spec),
            move |cache, freshness| app.publish(&published, cache, freshness),
        );
        reflector.run(self.cancel.clone()).await;
    }

    /// Makes a resource's new cache reachable: requests route to its slot, the scrape reads it.
    fn publish(&self, spec: &ResourceSpec, cache: Arc<ResourceCache>, freshness: Arc<Freshness>) {
        if let Some(slot) = self.slot(&spec.group, &spec.version, &spec.resource) {
            let _ = slot.freshness.set(freshness);
            slot.tx.send_replace(Some(cache.clone()));
        }
        self.metrics.attach_cache(spec, cache);
    }

    /// The slot of a cached resource.
    pub fn slot(&self, group: &str, version: &str, resource: &str) -> Option<&CacheSlot> {
        self.slots
            .get(&(group.to_string(), version.to_string(), resource.to_string()))
    }

    /// The cache of a resource, if discovered.
    pub fn cache(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceCache>> {
        self.slot(group, version, resource)?.get()
    }

    /// Whether every cached resource has synced.
    pub fn ready(&self) -> bool {
        self.slots
            .values()
            .all(|s| s.get().is_some_and(|c| c.is_synced()))
    }

    /// Graceful shutdown with no delay and a 20 s bound (see [`App::shutdown_within`]).
    pub async fn shutdown(&self) {
        self.shutdown_within(Duration::ZERO, Duration::from_secs(20))
            .await;
    }

    /// Graceful shutdown: `/readyz` fails at once; after `delay` (still serving, so load
    /// balancers can take the pod out first) watchmux stops accepting, ends every watch cleanly
    /// (the stream ends, so clients re-watch elsewhere), lets idle connections close and other
    /// requests finish for at most `timeout`, then stops the reflectors and drops what is left.
    /// Returns whether every connection finished within the bound.
    pub async fn shutdown_within(&self, delay: Duration, timeout: Duration) -> bool {
        self.metrics.set_shutting_down();
        if !delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.cancel.cancelled() => {}
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        self.draining.cancel();
        for slot in self.slots.values() {
            if let Some(c) = slot.get() {
                c.close_all("server shutting down");
            }
        }
        self.conns.close();
        let clean = tokio::time::timeout_at(deadline, self.conns.wait())
            .await
            .is_ok();
        self.cancel.cancel();
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.tasks.wait()).await;
        clean
    }
}
