//! One reflector per cached resource: it owns the resource's whole life cycle against the
//! upstream (discover, list, watch, relist) and is its cache's only writer.
//!
//! The life cycle is an explicit state machine, in the way `kube_runtime::watcher` is written:
//! a `State` and a `step` that performs one transition. The transitions, with their log lines and
//! the life-cycle metrics (relists, list durations, watch ends, outages), are in this file; each
//! request is in its own ([`discover`], [`list_all`], [`watch()`]), which counts its requests,
//! bytes and events.
//!
//! | State | What it does | Next |
//! |---|---|---|
//! | `Discover` | asks the discovery document for the kind and scope | ok: creates the cache, hands its read handle to the App (requests route to it from then on) → `List` (cause `initial`); error → `Backoff` → `Discover` |
//! | `List` | a consistent paged LIST ([`list_all`]), installed in the cache (bridged for its watchers after the first) | ok → `Watch` from the cache's resourceVersion; error → `Backoff` → `List` |
//! | `Watch` | one upstream watch from `rv` with bookmarks ([`watch()`], [`apply_line`]) | ended after events → `Watch` from the last resourceVersion; ended empty → `Backoff` → `Watch`; expired (410) → `List` (cause `expired`); error → `Backoff` → `Watch` from the last resourceVersion |
//! | `Backoff` | waits `delay` ([`Backoff`]: exponential with jitter, 200 ms up to 5 s) | the state it delays |
//!
//! The backoff resets after discovery answered, after each installed list and after a watch that
//! delivered something. Since the reflector is the only writer, the cache's resourceVersion
//! cannot move while it waits, so `Watch { rv }` is decided when the transition happens.
//!
//! Beside the state machine, from the moment the cache exists, the reflector runs the cache's
//! housekeeping once a second ([`CacheWriter::reap`]: eviction by age, closing slow watchers),
//! during lists and backoffs too, and applies the proofs of the cache's [`Freshness`] check
//! ([`Progress`], the counterpart of etcd's progress notifications). All stop when the
//! cancellation token fires.
//!
//! This module must not serve clients (that is `crate::downstream`) nor hold watchers (that is
//! `crate::hub`); it writes to the cache only through its [`CacheWriter`].

mod backoff;
pub mod catalog;
pub mod consistency;
pub mod crd;
mod discovery;
mod error;
pub mod freshness;
mod list;
mod persisted;
pub mod protobuf;
mod watch;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cache::{CacheSettings, CacheWriter, ResourceCache, ResourceInfo};
use crate::config::ResourceSpec;
use crate::metrics::ResourceMetrics;
use crate::upstream::Upstream;

pub use backoff::Backoff;
pub use discovery::discover;
pub use error::{MalformedData, ReflectorError};
pub use freshness::{Freshness, NotFresh, Progress};
pub use list::{Page, list_all, read_page};
pub use watch::{WatchEnd, apply_line, watch};

/// First retry delay (before jitter).
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest retry delay. client-go's reflectors back off up to 30 s, but each of them is one
/// client; watchmux's one upstream watch per kind stands for all its clients, so an outage of
/// the upstream is seen by all of them for as long as the back-off outlasts it (30 s let a 10 s
/// restart reach S13's clients about 17 s late), and the retries of O(kinds) reflectors every
/// few seconds are no load for an apiserver.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long a repair waits for the upstream's revision to move past the cache's.
const REPAIR_WAIT: Duration = Duration::from_secs(30);
/// How often housekeeping runs.
const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(1);

/// How long a start with a persisted cache waits for discovery before serving what it restored
/// (an unreachable upstream fails at once; one that does not answer costs this much).
const RESTORE_DISCOVERY_WAIT: Duration = Duration::from_secs(2);

/// Where a reflector is in its life cycle (see the module doc for the transitions). The states
/// after discovery carry the cache's writer, which discovery created.
enum State<'w> {
    /// Ask upstream discovery for the resource's kind and scope; there is no cache yet.
    Discover,
    /// List the resource and install the list. `cause` is counted as a relist when the LIST
    /// is first attempted, not again for each retry.
    List {
        writer: &'w CacheWriter,
        cause: Option<&'static str>,
    },
    /// Hold one upstream watch from `rv`.
    Watch { writer: &'w CacheWriter, rv: u64 },
    /// Wait `delay`, then go on with `then`.
    Backoff {
        delay: Duration,
        then: Box<State<'w>>,
    },
}

/// The reflector of one resource: what its states need.
pub struct Reflector<P> {
    up: Upstream,
    spec: ResourceSpec,
    settings: CacheSettings,
    page_size: usize,
    metrics: Arc<ResourceMetrics>,
    /// Hands the new cache's read handle to whoever routes requests to it.
    publish: P,
    /// The cache's writer, once discovery created it: the only one there is.
    writer: OnceLock<CacheWriter>,
    /// The resource's persisted directory, locked, until the first discovery makes its cache
    /// (when none was restored from it).
    pending_dir:
        parking_lot::Mutex<Option<(std::path::PathBuf, crate::persist::resource::DirLock)>>,
    /// The persisted cache's writer thread, joined when the reflector stops.
    persist_thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Where the cache's freshness check sends its proofs ([`Progress`]).
    progress_tx: mpsc::Sender<Progress>,
    progress_rx: Option<mpsc::Receiver<Progress>>,
    /// The CRDs, for a custom resource's selectable fields.
    crds: Option<Arc<crd::Crds>>,
    /// The cache's freshness check, once published (a consistency check whose resourceVersion
    /// the upstream no longer holds is made where it proves the cache).
    freshness: OnceLock<Arc<Freshness>>,
    /// How many repairs consistency checks asked for, and how many relists made them: the
    /// watch ends for a relist while the first is ahead.
    repairs_asked: tokio::sync::watch::Sender<u64>,
    repairs_made: tokio::sync::watch::Sender<u64>,
}

impl<P> std::fmt::Debug for Reflector<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("resource", &self.spec)
            .finish_non_exhaustive()
    }
}

impl<P: Fn(Arc<ResourceCache>, Arc<Freshness>) + Send + Sync> Reflector<P> {
    /// The reflector of `spec`: it lists `page_size` objects per page, creates the cache with
    /// `settings` once discovery answered and hands its read handle, with the freshness check
    /// of consistent reads, to `publish`.
    pub fn new(
        up: Upstream,
        spec: ResourceSpec,
        settings: CacheSettings,
        page_size: usize,
        metrics: Arc<ResourceMetrics>,
        publish: P,
    ) -> Self {
        let (progress_tx, progress_rx) = mpsc::channel(16);
        Reflector {
            up,
            spec,
            settings,
            page_size,
            metrics,
            publish,
            writer: OnceLock::new(),
            pending_dir: parking_lot::Mutex::new(None),
            persist_thread: parking_lot::Mutex::new(None),
            progress_tx,
            progress_rx: Some(progress_rx),
            crds: None,
            freshness: OnceLock::new(),
            repairs_asked: tokio::sync::watch::channel(0).0,
            repairs_made: tokio::sync::watch::channel(0).0,
        }
    }

    /// Reads a custom resource's selectable fields from `crds` when discovery describes it.
    pub fn with_crds(mut self, crds: Arc<crd::Crds>) -> Self {
        self.crds = Some(crds);
        self
    }

    /// What discovery said, with what the config and the CRDs add: the indexed fields and a
    /// custom resource's selectable fields.
    fn described(&self, mut info: ResourceInfo) -> ResourceInfo {
        info.index_fields = self.spec.effective_index_fields();
        if !info.builtin
            && let Some(c) = self
                .crds
                .as_ref()
                .and_then(|c| c.custom(&self.spec.group, &self.spec.version, &self.spec.resource))
        {
            info.selectable_fields = c.selectable_fields;
        }
        info
    }

    /// Runs the life cycle, and the cache's housekeeping once the cache exists, until `cancel`.
    pub async fn run(mut self, cancel: CancellationToken) {
        let progress = self.progress_rx.take();
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {}
            _ = self.drive() => {}
            _ = self.housekeeping() => {}
            _ = self.apply_progress(progress) => {}
            _ = self.consistency_checks() => {}
        }
        // The persisted cache's last batch: dropping the cache's writer ends its persister,
        // whose thread writes what is queued and exits (the App waits for this task).
        if let Some(thread) = self.persist_thread.get_mut().take() {
            drop(self.writer.take());
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Applies the freshness check's proofs: the cache's resourceVersion advances to a point the
    /// upstream proved has no event of the resource after what the cache holds (never ends by
    /// itself).
    async fn apply_progress(&self, rx: Option<mpsc::Receiver<Progress>>) {
        if let Some(mut rx) = rx {
            while let Some(p) = rx.recv().await {
                if let Some(writer) = self.writer.get() {
                    writer.advance_proven(p.after, p.rv);
                }
            }
        }
        std::future::pending::<()>().await;
    }

    /// The state machine, from `Discover` on (never ends by itself). With `cache.persist_dir`,
    /// the cache is first restored from the resource's directory and published at once —
    /// unless the upstream, asked briefly first, describes another type than the directory's:
    /// then the directory is emptied and the cache syncs afresh.
    async fn drive(&self) {
        let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_MAX);
        let mut state = State::Discover;
        if let Some(dir) = persisted::dir_of(&self.settings, &self.spec)
            && let Some(lock) = persisted::lock(&dir, &self.spec).await
        {
            match persisted::restore(&dir, &self.spec, &self.settings).await {
                Some(persisted::Restored {
                    mut writer,
                    on_disk,
                }) => {
                    let discovered = self.discover_briefly().await;
                    if discovered
                        .as_ref()
                        .is_some_and(|info| !persisted::same_type(writer.info(), info))
                    {
                        tracing::warn!(resource = %self.spec, "the persisted cache was made for another type (kind, scope or selectable fields) than the upstream now serves; syncing afresh");
                        drop(writer);
                        *self.pending_dir.lock() = Some((dir, lock));
                    } else {
                        *self.persist_thread.lock() =
                            persisted::attach(&mut writer, &dir, lock, Some(on_disk), &self.spec);
                        let writer = self.writer.get_or_init(|| writer);
                        self.publish_cache(writer);
                    }
                    // What discovery answered already decides the next step.
                    if let Some(info) = discovered {
                        state = self.discovered(info, &mut backoff);
                    }
                }
                None => *self.pending_dir.lock() = Some((dir, lock)),
            }
        }
        loop {
            state = self.step(state, &mut backoff).await;
        }
    }

    /// Discovery, if the upstream answers it within [`RESTORE_DISCOVERY_WAIT`] (else `None`:
    /// a restored cache then serves at once, and discovery is retried as usual).
    async fn discover_briefly(&self) -> Option<ResourceInfo> {
        match tokio::time::timeout(RESTORE_DISCOVERY_WAIT, discover(&self.up, &self.spec)).await {
            Ok(Ok(info)) => Some(self.described(info)),
            _ => None,
        }
    }

    /// Hands `writer`'s cache, with its freshness check, to the App.
    fn publish_cache(&self, writer: &CacheWriter) {
        let freshness = Freshness::new(
            self.up.clone(),
            collection_path(&self.spec),
            writer.cache().clone(),
            self.progress_tx.clone(),
            self.metrics.clone(),
        );
        let _ = self.freshness.set(freshness.clone());
        (self.publish)(writer.cache().clone(), freshness);
    }

    /// Performs one transition.
    async fn step<'w>(&'w self, state: State<'w>, backoff: &mut Backoff) -> State<'w> {
        match state {
            State::Discover => self.discover(backoff).await,
            State::List { writer, cause } => self.list(writer, cause, backoff).await,
            State::Watch { writer, rv } => self.watch(writer, rv, backoff).await,
            State::Backoff { delay, then } => {
                tokio::time::sleep(delay).await;
                *then
            }
        }
    }

    async fn discover<'w>(&'w self, backoff: &mut Backoff) -> State<'w> {
        match discover(&self.up, &self.spec).await {
            Ok(info) => {
                let info = self.described(info);
                self.discovered(info, backoff)
            }
            Err(e) => {
                self.failed(&e);
                let d = backoff.next_delay();
                tracing::warn!(resource = %self.spec, error = %e, retry_in = ?d, "discovery failed");
                State::Backoff {
                    delay: d,
                    then: Box::new(State::Discover),
                }
            }
        }
    }

    /// The step after discovery described the resource as `info`: watch a restored cache from
    /// its resourceVersion, or make and list a fresh one.
    fn discovered<'w>(&'w self, info: ResourceInfo, backoff: &mut Backoff) -> State<'w> {
        if let Some(writer) = self.writer.get() {
            // Restored from disk and published already.
            if !persisted::same_type(writer.info(), &info) {
                let dir = persisted::dir_of(&self.settings, &self.spec);
                persisted::type_changed_while_serving(dir.as_deref(), &self.spec);
            }
            // Watched from where the disk left off: the upstream replays what changed
            // since (exactly, not a summary), at the cost of those events rather than a
            // full list; a 410 (a restart longer than the upstream's history) relists
            // and bridges as after any outage.
            backoff.reset();
            return State::Watch {
                writer,
                rv: writer.rv(),
            };
        }
        let (_, mut writer) = ResourceCache::new(info, self.settings.clone());
        if let Some((dir, lock)) = self.pending_dir.lock().take() {
            *self.persist_thread.lock() =
                persisted::attach(&mut writer, &dir, lock, None, &self.spec);
        }
        let writer = self.writer.get_or_init(|| writer);
        self.publish_cache(writer);
        backoff.reset();
        State::List {
            writer,
            cause: Some("initial"),
        }
    }

    async fn list<'w>(
        &self,
        writer: &'w CacheWriter,
        cause: Option<&'static str>,
        backoff: &mut Backoff,
    ) -> State<'w> {
        let m = &self.metrics;
        if let Some(c) = cause {
            m.relist(c);
        }
        // A repair asked for before this list was sent is made by it, once the upstream's
        // revision has moved past the cache's.
        let asked = *self.repairs_asked.borrow();
        if asked > *self.repairs_made.borrow() {
            self.upstream_past(writer.rv()).await;
        }
        let started = std::time::Instant::now();
        match list_all(
            &self.up,
            &self.spec,
            writer.info(),
            self.page_size,
            self.settings.max_object_bytes,
            m,
        )
        .await
        {
            Ok((items, rv)) => {
                m.listed(started.elapsed());
                let n = items.len();
                let outcome = if asked > *self.repairs_made.borrow() {
                    let o = writer.repair(items, rv);
                    self.repairs_made.send_replace(asked);
                    o
                } else {
                    writer.replace(items, rv)
                };
                tracing::info!(resource = %self.spec, objects = n, resource_version = rv, outcome = ?outcome, "listed");
                backoff.reset();
                State::Watch {
                    writer,
                    rv: writer.rv(),
                }
            }
            Err(e) => {
                self.failed(&e);
                oversize(&self.spec, &e, m);
                let d = backoff.next_delay();
                tracing::warn!(resource = %self.spec, error = %e, retry_in = ?d, "list failed");
                State::Backoff {
                    delay: d,
                    then: Box::new(State::List {
                        writer,
                        cause: None,
                    }),
                }
            }
        }
    }

    async fn watch<'w>(
        &self,
        writer: &'w CacheWriter,
        rv: u64,
        backoff: &mut Backoff,
    ) -> State<'w> {
        let m = &self.metrics;
        let mut asked = self.repairs_asked.subscribe();
        let made = *self.repairs_made.borrow();
        let ended = tokio::select! {
            biased;
            _ = asked.wait_for(|a| *a > made) => {
                // A consistency check found the cache unlike the upstream: relist to repair it.
                m.watch_ended("closed");
                return State::List {
                    writer,
                    cause: Some("inconsistent"),
                };
            }
            ended = watch(&self.up, &self.spec, writer, rv, m) => ended,
        };
        let rewatch = State::Watch {
            writer,
            rv: writer.rv(),
        };
        match ended {
            Ok(WatchEnd::Expired(status)) => {
                m.watch_ended("expired");
                // Events were lost upstream: the cache follows again once relisted.
                writer.cache().staleness.broken();
                tracing::info!(resource = %self.spec, message = %status.message, "watch resourceVersion expired; relisting");
                State::List {
                    writer,
                    cause: Some("expired"),
                }
            }
            Ok(WatchEnd::Closed { received }) => {
                m.watch_ended("closed");
                if received > 0 {
                    backoff.reset();
                    tracing::debug!(resource = %self.spec, received, "watch ended; re-watching");
                    rewatch
                } else {
                    // An immediately closed watch with nothing in it: do not spin.
                    State::Backoff {
                        delay: backoff.next_delay(),
                        then: Box::new(rewatch),
                    }
                }
            }
            Err(e) => {
                m.watch_ended("error");
                self.failed(&e);
                if writer.rv() > rv {
                    // The watch delivered events before it failed: the upstream was serving,
                    // so the next attempt starts from the shortest delay again.
                    backoff.reset();
                }
                let d = backoff.next_delay();
                if oversize(&self.spec, &e, m) {
                    // Re-watching would replay the same event: relist instead, which succeeds
                    // once the object is gone or small enough again.
                    return State::Backoff {
                        delay: d,
                        then: Box::new(State::List {
                            writer,
                            cause: Some("oversize"),
                        }),
                    };
                }
                tracing::warn!(resource = %self.spec, error = %e, retry_in = ?d, resource_version = writer.rv(), "watch failed; re-watching from the last resourceVersion");
                State::Backoff {
                    delay: d,
                    then: Box::new(rewatch),
                }
            }
        }
    }

    /// A discovery, list or watch failed: counted and logged once per outage, and the cache (if
    /// any) no longer follows the upstream from now on.
    fn failed(&self, e: &ReflectorError) {
        self.metrics.upstream_failed(e, e.is_refused());
        if let Some(writer) = self.writer.get() {
            writer.cache().staleness.broken();
        }
    }

    /// Waits, up to [`REPAIR_WAIT`], until the upstream's revision is above `rv` (the cache's),
    /// asking once a second (a LIST of one item). A repair's list must be at a revision no
    /// client of the cache before it holds: a client that re-watches from there would not hear
    /// of the changes the repair made without an event. A real cluster's revision moves every
    /// few seconds (leases); a quiet upstream's may not, and the repair is then made anyway.
    async fn upstream_past(&self, rv: u64) {
        let Some(f) = self.freshness.get() else {
            return;
        };
        let deadline = tokio::time::Instant::now() + REPAIR_WAIT;
        loop {
            if f.upstream_rv().await.is_ok_and(|r| r > rv) {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(resource = %self.spec, resource_version = rv, "the upstream's resourceVersion did not move past the cache's; repairing at it");
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Every `cache.consistency_check_secs` (plus 0 to 50 % jitter, from the end of the last
    /// check, as kube's), from the moment the cache exists: a check of the cache against the
    /// upstream ([`consistency`]), counted and logged. One that fails asks for the relist that
    /// repairs the cache, waits for it, and checks again at once (never ends by itself).
    async fn consistency_checks(&self) {
        let Some(period) = self.settings.consistency_check else {
            return std::future::pending().await;
        };
        let path = collection_path(&self.spec);
        let mut again = false;
        loop {
            if !again {
                let jitter = period.mul_f64(0.5 * rand::random::<f64>());
                tokio::time::sleep(period + jitter).await;
            }
            again = false;
            let Some(writer) = self.writer.get() else {
                continue;
            };
            let fresh = || async {
                match self.freshness.get() {
                    Some(f) => f
                        .ensure_fresh(freshness::CHECK_BUDGET)
                        .await
                        .map_err(|e| e.to_string()),
                    None => Err("no freshness check".to_string()),
                }
            };
            let m = &self.metrics;
            let started = std::time::Instant::now();
            let outcome = consistency::check(&self.up, &path, writer.cache(), m, fresh).await;
            let took = started.elapsed();
            match outcome {
                consistency::Outcome::Consistent {
                    rv,
                    objects,
                    digest,
                } => {
                    m.consistency_checked("success", took);
                    tracing::debug!(resource = %self.spec, resource_version = rv, objects, digest = %digest, "cache consistency check passed");
                }
                consistency::Outcome::Skipped(why) => {
                    m.consistency_checked("skipped", took);
                    tracing::info!(resource = %self.spec, reason = %why, "cache consistency check skipped");
                }
                consistency::Outcome::Inconsistent(d) => {
                    m.consistency_checked("failure", took);
                    tracing::error!(
                        resource = %self.spec,
                        resource_version = d.rv,
                        cache_digest = %d.cache.0,
                        upstream_digest = %d.upstream.0,
                        cache_objects = d.cache.1,
                        upstream_objects = d.upstream.1,
                        differing = d.differing,
                        first = %consistency::Named(&d.first),
                        "cache consistency check failed: the cache differs from the upstream; relisting to repair it"
                    );
                    let mut asked = 0;
                    self.repairs_asked.send_modify(|a| {
                        *a += 1;
                        asked = *a;
                    });
                    let mut made = self.repairs_made.subscribe();
                    let _ = made.wait_for(|m| *m >= asked).await;
                    again = true;
                }
            }
        }
    }

    /// Once a second, from the moment the cache exists: evict old events and close watchers
    /// that fell behind (never ends by itself).
    async fn housekeeping(&self) {
        let mut tick = tokio::time::interval(HOUSEKEEPING_INTERVAL);
        loop {
            tick.tick().await;
            if let Some(writer) = self.writer.get() {
                let n = writer.reap();
                if n > 0 {
                    tracing::info!(resource = %writer.info().group_resource(), closed = n, "closed slow watchers");
                }
            }
        }
    }
}

/// Counts and reports an upstream answer refused for its size: the cache cannot take the
/// resource's current state until the object shrinks or `cache.max_object_bytes` is raised.
/// Returns whether it was.
fn oversize(spec: &ResourceSpec, e: &ReflectorError, m: &ResourceMetrics) -> bool {
    if !e.is_oversize() {
        return false;
    }
    m.upstream_oversize();
    tracing::error!(resource = %spec, error = %e, "upstream data exceeds cache.max_object_bytes; the cache keeps its last good state until the object shrinks or is deleted, or the limit is raised");
    true
}

/// Refuses an object of `what` (a list page, a watch event) larger than `cache.max_object_bytes`.
fn check_object_size(
    c: &crate::cache::Cached,
    limit: u64,
    what: &str,
) -> Result<(), ReflectorError> {
    if c.stored().len() as u64 <= limit {
        return Ok(());
    }
    Err(ReflectorError::malformed(
        what,
        MalformedData::ObjectTooLarge {
            size: c.stored().len(),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        },
    ))
}

/// `/api/v1/pods`, `/apis/apps/v1/deployments`: the collection a LIST or watch reads.
fn collection_path(spec: &ResourceSpec) -> String {
    if spec.group.is_empty() {
        format!("/api/{}/{}", spec.version, spec.resource)
    } else {
        format!("/apis/{}/{}/{}", spec.group, spec.version, spec.resource)
    }
}

/// The whole body of an upstream answer to `what` (at most 64 MiB: discovery documents,
/// Status answers, a freshness check's one-item list).
async fn read_body(
    resp: http::Response<hyper::body::Incoming>,
    what: &str,
) -> Result<Bytes, ReflectorError> {
    read_body_within(resp, what, 64 << 20).await
}

/// The whole body of an upstream answer to `what`, refused past `limit` bytes (a list page:
/// [`MalformedData::PageTooLarge`]).
async fn read_body_within(
    resp: http::Response<hyper::body::Incoming>,
    what: &str,
    limit: usize,
) -> Result<Bytes, ReflectorError> {
    match http_body_util::Limited::new(resp.into_body(), limit)
        .collect()
        .await
    {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(ReflectorError::malformed(
            what,
            match e.downcast::<hyper::Error>() {
                Ok(e) => MalformedData::Body(*e),
                Err(_) => MalformedData::PageTooLarge { limit },
            },
        )),
    }
}
