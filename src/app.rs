//! The application: what one running watchmux is, and its life cycle. [`App::start`] starts the
//! reflectors of `cache.resources` and, in on-demand mode, what decides which other kinds are
//! cached: the upstream's discovery ([`Catalog`]) and CRDs ([`Crds`]); the downstream server
//! routes requests to the kinds' slots; [`App::shutdown_within`] drains it.
//!
//! Owns the state every request handler shares (the table of cached kinds, upstream client,
//! limits, metrics, the CRDs, the cancellation tokens and task trackers), and the life of each
//! cached kind:
//! * **started** at start (`cache.resources`), or by its first read in on-demand mode
//!   ([`App::slot_for_read`]) when the upstream serves it with `list` and `watch`, it is a
//!   built-in kind or a CRD's (aggregated APIs always pass through: their data is another
//!   server's, which kube-apiserver itself only proxies), `cache.include`/`cache.exclude` allow
//!   it, and the memory budget has room;
//! * **dropped** ([`App::drop_kind`]) when nobody has read it for `cache.idle_secs` (a kind
//!   with open watchers is being read), when it is the least recently read and
//!   `cache.memory_limit` is near, or when the upstream no longer serves it (its CRD deleted;
//!   its watchers' streams end, as kube-apiserver ends them, and the next reads get the
//!   upstream's 404); a kind whose CRD changed its scope, kind or selectable fields is dropped
//!   and starts afresh on its next read. Dropping stops the reflector, ends the watchers and
//!   frees the cache; the next read starts it again.
//!
//! It must not serve HTTP itself (that is [`crate::downstream`]) nor touch the upstream directly
//! (that is [`crate::reflector`], whose CRD watch and discovery reads it starts).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cache::budget::{MemoryBudget, Pressure};
use crate::cache::{CacheSettings, ResourceCache};
use crate::config::{CacheConfig, CacheMode, Config, ResourceSpec};
use crate::control::ControlRuntime;
use crate::downstream::limits;
use crate::metrics::{KindChange, ResourceMetrics};
use crate::reflector::catalog::{Catalog, Gvr};
use crate::reflector::crd::Crds;
use crate::reflector::{Freshness, Reflector};
use crate::upstream::Upstream;

/// How often idle kinds and the memory budget are looked at.
const KEEPER_INTERVAL: Duration = Duration::from_secs(1);
/// How long a kind whose CRD is gone keeps its cache while its objects' deletions still arrive
/// (kube deletes every custom resource before the CRD, and its watchers see each DELETED
/// event before their streams end): until the cache is empty, its upstream watch fails, or
/// this long.
const VANISH_GRACE: Duration = Duration::from_secs(10);

/// Where a kind's cache is: made once upstream discovery has answered, until the kind is
/// dropped.
#[derive(Debug)]
pub struct CacheSlot {
    tx: tokio_watch::Sender<Option<Arc<ResourceCache>>>,
    freshness: std::sync::OnceLock<Arc<Freshness>>,
    spec: ResourceSpec,
    /// Listed in `cache.resources` (or listed mode): started at start, never dropped, and
    /// reads before its first sync wait for it as kube's do.
    pinned: bool,
    /// Stops its reflector.
    cancel: CancellationToken,
    /// Milliseconds since the App's epoch of its last read (or, while it has watchers, of the
    /// last look at it).
    last_read_ms: AtomicU64,
    metrics: Arc<ResourceMetrics>,
    /// Milliseconds since the App's epoch when its CRD was first seen gone; 0: it is not.
    vanishing_since_ms: AtomicU64,
    /// Its reflector's task, awaited before the kind is started again (its persisted
    /// directory's lock).
    task: Mutex<Option<JoinHandle<()>>>,
    /// When its cache started: how long it has not been ready, until its first sync (a synced
    /// cache stays ready: a relist bridges, it does not empty the cache).
    started: Instant,
}

impl CacheSlot {
    /// The freshness check of consistent reads, once discovered.
    pub fn freshness(&self) -> Option<&Arc<Freshness>> {
        self.freshness.get()
    }

    /// The cache, if discovered.
    pub fn get(&self) -> Option<Arc<ResourceCache>> {
        self.tx.borrow().clone()
    }

    /// Whether it was started by a read (on-demand) rather than listed.
    pub fn on_demand(&self) -> bool {
        !self.pinned
    }

    /// Whether its reflector is failing now (an upstream outage, or a kind watchmux may not
    /// list): its reads do not wait for a sync.
    pub fn failing(&self) -> bool {
        self.metrics.outage().is_some()
    }

    /// Whether the upstream refuses its reflector's list or watch now (401 or 403: watchmux's
    /// identity may not read the kind, where a client's own credentials may).
    pub fn refused(&self) -> bool {
        self.metrics.refused()
    }

    /// How long its cache has not been ready: since the kind's cache started (kube's cacher
    /// counts from its last change of state, and its 429s' `Retry-After` grows with it).
    pub fn not_ready_for(&self) -> Duration {
        self.started.elapsed()
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

/// The running proxy: the cached kinds' slots, the upstream client, the downstream settings and
/// limits, metrics, and the tasks and tokens of its life cycle.
pub struct App {
    slots: RwLock<HashMap<Gvr, Arc<CacheSlot>>>,
    /// Reflectors of dropped kinds, still stopping.
    retiring: Mutex<HashMap<Gvr, JoinHandle<()>>>,
    epoch: Instant,
    /// In on-demand mode, the kinds the upstream serves.
    pub catalog: Option<Arc<Catalog>>,
    /// Pass-through client.
    pub upstream: Upstream,
    /// Whether the upstream applies `shardSelector` to the kinds read through it.
    pub shard_support: crate::downstream::shards::ShardSupport,
    /// Cache settings from the config.
    pub cache_config: CacheConfig,
    /// Watches without `timeoutSeconds` last a random time in [this, 2× this)
    /// (`server.min_request_timeout_secs`; kube: 1800 s).
    pub min_request_timeout: Duration,
    /// Stops everything.
    pub cancel: CancellationToken,
    /// Graceful shutdown began: stop accepting, GOAWAY, refuse new requests as kube does, drain
    /// the watches, finish connections. A child of `cancel` (cancelling `cancel` cancels it too).
    pub draining: CancellationToken,
    /// The drain is over: every watch still open ends now, cleanly (cached ones the drain did not
    /// end, and pass-through ones at an event boundary). A child of `cancel`.
    pub watches_end: CancellationToken,
    /// `server.shutdown_watch_grace_secs` and `server.shutdown_watch_min_rate`.
    pub watch_drain: crate::drain::Pace,
    /// Background tasks.
    pub tasks: TaskTracker,
    /// The thread the caches' upkeep runs on (reflectors, discovery, CRDs, the keeper of kinds,
    /// freshness checks), apart from the clients' runtime.
    pub control: ControlRuntime,
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
    /// `server.http2_max_concurrent_streams`.
    pub http2_max_concurrent_streams: u32,
    /// `server.goaway_chance`.
    pub goaway_chance: f64,
    /// `server.max_connection_age_secs` (zero: off).
    pub max_connection_age: Duration,
    /// The upstream's CRDs (all of them in on-demand mode, those of the cached custom
    /// resources in listed mode), kept current by one upstream watch (started only when a
    /// custom resource may be cached).
    pub crds: Arc<Crds>,
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
    /// Builds the proxy and starts the reflectors of `cache.resources` and, in on-demand mode,
    /// the discovery reads, the CRD watch and the keeper of idle kinds and the memory budget.
    pub fn start(config: &Config, upstream: Upstream) -> Arc<App> {
        let cancel = CancellationToken::new();
        let on_demand = config.cache.mode == CacheMode::OnDemand;
        let crds = Arc::new(if on_demand {
            Crds::all()
        } else {
            Crds::new(
                config
                    .cache
                    .resources
                    .iter()
                    .filter(|s| !kube_wire::selector::selectable::is_builtin_group(&s.group))
                    .map(|s| (s.group.as_str(), s.resource.as_str())),
            )
        });
        let budget = MemoryBudget::new(config.cache.memory_limit);
        let metrics = Arc::new(crate::metrics::Metrics::with_budget(config, budget.clone()));
        let authz =
            (config.server.authz_mode() == crate::config::AuthzMode::Delegated).then(|| {
                Arc::new(crate::downstream::authz::Authorizer::new(
                    upstream.review_client(),
                    &config.server,
                    metrics.authz(),
                ))
            });
        let catalog = on_demand.then(Catalog::new);
        if let Some(c) = &catalog {
            metrics.set_discovery(c.clone());
        }
        if let Some(c) = upstream.exec_credentials() {
            metrics.set_credentials(c.clone());
        }
        let proxy = Arc::new(App {
            slots: RwLock::new(HashMap::new()),
            retiring: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            catalog,
            upstream,
            shard_support: Default::default(),
            cache_config: config.cache.clone(),
            min_request_timeout: config.server.min_request_timeout,
            draining: cancel.child_token(),
            watches_end: cancel.child_token(),
            watch_drain: crate::drain::Pace {
                grace: config.server.shutdown_watch_grace,
                min_rate: config.server.shutdown_watch_min_rate,
            },
            cancel,
            authz,
            limits: limits::Limits::new(
                config.server.max_watches_per_client,
                config.server.max_concurrent_lists,
            ),
            max_url_bytes: usize::try_from(config.server.max_url_bytes).unwrap_or(usize::MAX),
            max_header_bytes: usize::try_from(config.server.max_header_bytes).unwrap_or(usize::MAX),
            header_read_timeout: config.server.header_read_timeout,
            http2_max_concurrent_streams: config.server.http2_max_concurrent_streams,
            goaway_chance: config.server.goaway_chance,
            max_connection_age: config.server.max_connection_age,
            tasks: TaskTracker::new(),
            control: ControlRuntime::start(),
            conns: TaskTracker::new(),
            metrics,
            crds,
            budget,
        });
        if proxy.crds.wants_any() {
            let (up, crds, cancel) = (
                proxy.upstream.watch_client(),
                proxy.crds.clone(),
                proxy.cancel.clone(),
            );
            proxy.tasks.spawn_on(
                crate::reflector::crd::run(up, crds, cancel),
                proxy.control.handle(),
            );
        }
        if let Some(catalog) = &proxy.catalog {
            let (up, catalog, cancel) = (
                proxy.upstream.clone(),
                catalog.clone(),
                proxy.cancel.clone(),
            );
            proxy.tasks.spawn_on(
                crate::reflector::catalog::run(up, catalog, cancel),
                proxy.control.handle(),
            );
            let p = proxy.clone();
            proxy
                .tasks
                .spawn_on(async move { p.keep_kinds().await }, proxy.control.handle());
        }
        for spec in &config.cache.resources {
            proxy.start_kind(spec.clone(), true);
        }
        proxy
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Starts caching `spec` (unless it is cached already): its slot, metrics and reflector.
    fn start_kind(self: &Arc<Self>, spec: ResourceSpec, pinned: bool) -> Arc<CacheSlot> {
        let key = (
            spec.group.clone(),
            spec.version.clone(),
            spec.resource.clone(),
        );
        let mut slots = self.slots.write();
        if let Some(s) = slots.get(&key) {
            return s.clone();
        }
        let slot = Arc::new(CacheSlot {
            tx: tokio_watch::channel(None).0,
            freshness: std::sync::OnceLock::new(),
            metrics: self.metrics.start_kind(&spec, pinned),
            spec,
            pinned,
            cancel: self.cancel.child_token(),
            last_read_ms: AtomicU64::new(self.now_ms()),
            vanishing_since_ms: AtomicU64::new(0),
            task: Mutex::new(None),
            started: Instant::now(),
        });
        slots.insert(key.clone(), slot.clone());
        drop(slots);
        if !pinned {
            tracing::info!(resource = %slot.spec, "caching a kind on its first read");
        }
        self.metrics.kind_change(KindChange::Started);
        let previous = self.retiring.lock().remove(&key);
        let (app, s) = (self.clone(), slot.clone());
        let task = self.tasks.spawn_on(
            async move {
                if let Some(previous) = previous {
                    let _ = previous.await;
                }
                app.run_resource(s).await;
            },
            self.control.handle(),
        );
        *slot.task.lock() = Some(task);
        slot
    }

    fn settings(&self) -> CacheSettings {
        let c = &self.cache_config;
        CacheSettings {
            window_count: c.event_window_count,
            window_bytes: c.event_window_bytes,
            window_age: c.event_window,
            state_proof_max_objects: c.consistent_read_state_max_objects,
            consistent_read_check_interval: c.consistent_read_check_interval,
            consistency_check: c.consistency_check,
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

    /// The reflector of a slot: discovery, then list and watch, until the slot's `cancel`.
    /// Once discovery answered, it hands the new cache to the slot and the metrics.
    async fn run_resource(self: Arc<Self>, slot: Arc<CacheSlot>) {
        let (metrics, s) = (self.metrics.clone(), slot.clone());
        let reflector = Reflector::new(
            self.upstream.watch_client(),
            slot.spec.clone(),
            self.settings(),
            self.cache_config.list_page_size,
            slot.metrics.clone(),
            move |cache, freshness| {
                // A kind dropped before its cache was made: nothing to publish.
                if s.cancel.is_cancelled() {
                    return;
                }
                let _ = s.freshness.set(freshness);
                s.tx.send_replace(Some(cache.clone()));
                metrics.attach_cache(&s.metrics, cache);
            },
        )
        .with_crds(self.crds.clone());
        reflector.run(slot.cancel.clone()).await;
    }

    /// The slot of a cached kind (a read of it: its last-read time is now).
    pub fn slot(&self, group: &str, version: &str, resource: &str) -> Option<Arc<CacheSlot>> {
        let slot = self
            .slots
            .read()
            .get(&(group.to_string(), version.to_string(), resource.to_string()))
            .cloned()?;
        slot.last_read_ms.store(self.now_ms(), Ordering::Relaxed);
        Some(slot)
    }

    /// The slot for a read of `group`/`version`/`resource`: the cached kind's, or in on-demand
    /// mode a new one when the kind may be cached (see the module doc); `None`: the read passes
    /// through.
    pub fn slot_for_read(
        self: &Arc<Self>,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<CacheSlot>> {
        if let Some(s) = self.slot(group, version, resource) {
            return Some(s);
        }
        let catalog = self.catalog.as_ref()?;
        if !self.cache_config.may_cache(group, resource) {
            return None;
        }
        if kube_wire::selector::selectable::is_builtin_group(group) {
            let Some(served) = catalog.get(group, version, resource) else {
                // Perhaps new (discovery changes with the upstream's version or feature gates).
                catalog.refresh_soon();
                return None;
            };
            if !served.list_watch {
                return None;
            }
        } else if self.crds.custom(group, version, resource).is_none() {
            // An aggregated API (never cached), or a CRD the watch has not seen yet (its
            // change will refresh discovery). A kind discovery does not know may be new.
            if catalog.get(group, version, resource).is_none() {
                catalog.refresh_soon();
            }
            return None;
        }
        let spec = ResourceSpec::new(group, version, resource);
        if self.budget.pressure() >= Pressure::Soft && !self.drop_least_recent(false) {
            self.metrics.kind_change(KindChange::RefusedMemory);
            tracing::debug!(resource = %spec, used = self.budget.used(), limit = self.budget.limit(), "not caching a kind: cache.memory_limit is near and no other kind can be dropped; its reads pass through");
            return None;
        }
        Some(self.start_kind(spec, false))
    }

    /// The cache of a resource, if discovered.
    pub fn cache(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceCache>> {
        self.slots
            .read()
            .get(&(group.to_string(), version.to_string(), resource.to_string()))?
            .get()
    }

    /// The kinds cached now.
    pub fn cached_kinds(&self) -> Vec<ResourceSpec> {
        self.slots.read().values().map(|s| s.spec.clone()).collect()
    }

    /// Whether every listed resource has synced and, in on-demand mode, discovery was read.
    pub fn ready(&self) -> bool {
        self.catalog.as_ref().is_none_or(|c| c.is_loaded())
            && self
                .slots
                .read()
                .values()
                .filter(|s| s.pinned)
                .all(|s| s.get().is_some_and(|c| c.is_synced()))
    }

    /// Stops caching a kind: its reflector stops, its watchers' streams end (they re-watch:
    /// from the upstream, or from the kind's next cache), its memory is freed once the last
    /// reader lets go.
    pub fn drop_kind(&self, key: &Gvr, change: KindChange, why: &str) {
        let Some(slot) = self.slots.write().remove(key) else {
            return;
        };
        slot.cancel.cancel();
        if let Some(c) = slot.tx.send_replace(None) {
            c.close_all("the kind is no longer cached");
        }
        self.metrics
            .stop_kind(&slot.metrics, change == KindChange::DroppedRemoved);
        if let Some(task) = slot.task.lock().take() {
            self.retiring.lock().insert(key.clone(), task);
        }
        self.metrics.kind_change(change);
        tracing::info!(resource = %slot.spec, change = change.as_str(), "{why}");
    }

    /// Drops the least recently read on-demand kind (`with_watchers`: also one that has
    /// watchers). Returns whether one was dropped.
    fn drop_least_recent(&self, with_watchers: bool) -> bool {
        let victim = self
            .slots
            .read()
            .iter()
            .filter(|(_, s)| !s.pinned)
            .filter(|(_, s)| with_watchers || s.get().is_none_or(|c| c.watcher_count() == 0))
            .min_by_key(|(_, s)| s.last_read_ms.load(Ordering::Relaxed))
            .map(|(k, _)| k.clone());
        let Some(key) = victim else {
            return false;
        };
        self.drop_kind(
            &key,
            KindChange::DroppedMemory,
            &format!(
                "dropped the least recently read kind: cache.memory_limit is near ({} of {} bytes)",
                self.budget.used(),
                self.budget.limit()
            ),
        );
        true
    }

    /// On-demand mode's keeper, until `cancel`: once a second (and at once when a CRD changes),
    /// drops kinds the upstream no longer serves (or whose CRD changed), idle kinds, and the
    /// least recently read one while the budget is at its trim level.
    async fn keep_kinds(self: Arc<Self>) {
        let mut crds = self.crds.subscribe();
        let mut tick = tokio::time::interval(KEEPER_INTERVAL);
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tick.tick() => {}
                r = crds.changed() => {
                    if r.is_err() {
                        return;
                    }
                    // A CRD added, changed or removed: so is discovery.
                    if let Some(c) = &self.catalog {
                        c.refresh_soon();
                    }
                }
            }
            self.look_at_kinds();
        }
    }

    /// One look of the keeper (see [`App::keep_kinds`]).
    fn look_at_kinds(&self) {
        let now = self.now_ms();
        let drops: Vec<_> = self
            .slots
            .read()
            .iter()
            .filter_map(|(key, slot)| Some((key.clone(), self.verdict(slot, now)?)))
            .collect();
        for (key, change) in drops {
            let why = match change {
                KindChange::DroppedRemoved => {
                    "the upstream no longer serves this kind (its CRD was deleted or is no longer established): its cache is dropped and its watchers' streams end"
                }
                KindChange::RestartedChanged => {
                    "the kind's CRD changed its scope, kind or selectable fields: its cache is dropped and starts afresh on the next read"
                }
                _ => {
                    "dropped a kind nobody read for cache.idle_secs; the next read starts it again"
                }
            };
            self.drop_kind(&key, change, why);
        }
        if self.budget.pressure() >= Pressure::Trim {
            self.drop_least_recent(true);
        }
        self.retiring.lock().retain(|_, t| !t.is_finished());
    }

    /// Whether the keeper drops `slot` now, and why: its CRD gone (once its objects' deletions
    /// have arrived, see [`VANISH_GRACE`]) or changed, or idle. A watched kind is being read:
    /// its last-read time becomes now.
    fn verdict(&self, slot: &CacheSlot, now: u64) -> Option<KindChange> {
        if slot.pinned {
            return None;
        }
        let (group, version, resource) =
            (&slot.spec.group, &slot.spec.version, &slot.spec.resource);
        let cache = slot.get();
        if !kube_wire::selector::selectable::is_builtin_group(group) {
            let Some(custom) = self.crds.custom(group, version, resource) else {
                let since = match slot.vanishing_since_ms.compare_exchange(
                    0,
                    now.max(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => now,
                    Err(t) => t,
                };
                let drained = cache.as_ref().is_none_or(|c| c.is_empty())
                    || slot.failing()
                    || now.saturating_sub(since) >= VANISH_GRACE.as_millis() as u64;
                return drained.then_some(KindChange::DroppedRemoved);
            };
            slot.vanishing_since_ms.store(0, Ordering::Relaxed);
            if cache.as_ref().is_some_and(|c| !custom.describes(&c.info)) {
                return Some(KindChange::RestartedChanged);
            }
        }
        if cache.as_ref().is_some_and(|c| c.watcher_count() > 0) {
            slot.last_read_ms.store(now, Ordering::Relaxed);
            return None;
        }
        let idle = self.cache_config.idle?;
        (now.saturating_sub(slot.last_read_ms.load(Ordering::Relaxed)) >= idle.as_millis() as u64)
            .then_some(KindChange::DroppedIdle)
    }

    /// Graceful shutdown with no delay and a 20 s bound (see [`App::shutdown_within`]).
    pub async fn shutdown(&self) {
        self.shutdown_within(Duration::ZERO, Duration::from_secs(20))
            .await;
    }

    /// Graceful shutdown, as kube-apiserver's: `/readyz` fails at once; after `delay` (still
    /// serving, so Services and load balancers take the pod out first) watchmux stops
    /// accepting, sends HTTP/2 connections a GOAWAY and answers new requests on open connections
    /// with kube's 429/503 (`router`); the open watches end in paced batches, each just after a
    /// bookmark at its resourceVersion ([`crate::drain`]); what is left of them ends, idle
    /// connections close and other requests finish, all within `timeout`; then the reflectors
    /// stop and what is left is dropped. Returns whether every connection finished within the
    /// bound.
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
        let caches: Vec<Arc<ResourceCache>> =
            self.slots.read().values().filter_map(|s| s.get()).collect();
        let pace = crate::drain::Pace {
            grace: self.watch_drain.grace.min(timeout),
            ..self.watch_drain
        };
        crate::drain::end_watches(&caches, pace, deadline).await;
        self.watches_end.cancel();
        for c in &caches {
            c.close_all("server shutting down");
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
