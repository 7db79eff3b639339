//! The watch cache of one resource: what it holds, and the two handles to it.
//!
//! A cache holds the current objects ([`store`]: an immutable, cheaply cloned ordered map and
//! its field indexes), a bounded log of recent events with their encoded frames
//! ([`event_log`]), and the resource's watchers ([`crate::hub`]), all under one lock so that an
//! event is stored, logged and dispatched atomically.
//!
//! [`ResourceCache::new`] returns the two handles:
//!
//! * the read handle, `Arc<ResourceCache>`, for request handlers: O(1) snapshots for LIST and
//!   initial events, past states rebuilt from the log and snapshots kept for paged LISTs
//!   ([`snapshots`]), the resourceVersion and waits on it, the log for replays and catching-up
//!   watchers, watcher registration ([`ResourceCache::subscribe`]) and the lag protocol's
//!   lock-side steps ([`ResourceCache::try_go_live`], [`ResourceCache::bookmark_rv`]);
//! * the [`CacheWriter`], not `Clone`, which the resource's reflector owns: the only way to apply
//!   upstream events, install lists, advance the resourceVersion and run housekeeping.
//!
//! Closing watchers is not a write (objects, log and resourceVersion stay as they are): the
//! read handle may close its own watcher ([`ResourceCache::close_fell_behind`]) and, at shutdown,
//! all of them ([`ResourceCache::close_all`], which the App calls).
//!
//! A slow watcher costs its cursor, never memory in the dispatcher and never time of the other
//! watchers; it is closed only when the log no longer holds its cursor or it lags by more than a
//! byte bound. This module must not talk to the upstream (the reflector does) nor write HTTP
//! answers (downstream does: the cache only encodes each event's frame, once, for every watcher).

pub mod bridge;
pub mod budget;
pub mod event_log;
pub mod object;
pub mod record;
pub mod snapshots;
pub mod staleness;
pub mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::hub::watcher::{
    CUT_FOR_MEMORY, FELL_OUT_OF_WINDOW, IN_BRIDGED_GAP, LAGGING_BEYOND_BYTE_BOUND,
    RELIST_NOT_BRIDGED, REPAIRED,
};
use crate::hub::{Hub, Subscription, WatcherShared};
use budget::{Account, MemoryBudget, Pressure};
use event_log::EventLog;
use kube_wire::event::{EventType, frame_head, typed_prefix, unstructured_prefix};
use kube_wire::selector::Filter;
use store::Store;

use crate::persist::format::Record;
use crate::persist::segments::Loaded;
use crate::persist::writer::Persister;

pub use event_log::{CacheEvent, FellBehind, LogBatch};
pub use object::Cached;
pub use record::{DecodeError, ObjectRecord};
pub use snapshots::{Retention, SnapshotUsage};
pub use store::{FieldIndex, Snapshot};

/// What the cache knows of the resource's type (from upstream discovery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Kind.
    pub kind: String,
    /// Namespace-scoped.
    pub namespaced: bool,
    /// Served by kube-apiserver itself (LIST items carry no kind/apiVersion).
    pub builtin: bool,
    /// Extra selectable fields (custom resources).
    pub selectable_fields: Vec<String>,
    /// Selectable fields whose exact-value watchers are indexed (e.g. pods' `spec.nodeName`).
    pub index_fields: Vec<String>,
    /// The object prefix `{"kind":..,"apiVersion":..,` (or sorted, for custom resources).
    pub type_prefix: String,
    /// The kind's protobuf message, for a built-in kind the transcoder knows: such a kind is
    /// read from the upstream, and stored, in protobuf ([`object`]).
    pub message: Option<kube_wire::proto::MessageRef>,
    heads: [Bytes; 3],
}

impl ResourceInfo {
    /// Type information for a resource.
    pub fn new(group: &str, version: &str, resource: &str, kind: &str, namespaced: bool) -> Self {
        let builtin = kube_wire::selector::selectable::is_builtin_group(group);
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        let type_prefix = if builtin {
            typed_prefix(kind, &api_version)
        } else {
            unstructured_prefix(kind, &api_version)
        };
        let heads = [EventType::Added, EventType::Modified, EventType::Deleted]
            .map(|t| frame_head(t.as_str(), &type_prefix));
        ResourceInfo {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            kind: kind.into(),
            namespaced,
            builtin,
            selectable_fields: Vec::new(),
            index_fields: Vec::new(),
            message: builtin
                .then(|| kube_wire::proto::message_for(&api_version, kind))
                .flatten(),
            type_prefix,
            heads,
        }
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// `pods` or `widgets.example.com`.
    pub fn group_resource(&self) -> String {
        kube_wire::status::group_resource(&self.group, &self.resource)
    }

    /// The constant head of a frame of type `ty` (`{"type":"ADDED","object":{"kind":…,`).
    pub fn frame_head(&self, ty: EventType) -> &Bytes {
        &self.heads[ty as usize]
    }

    /// An object as a GET or a watch event carries it: with its `kind` and `apiVersion` first.
    pub fn full_object(&self, c: &Cached) -> Bytes {
        let mut v = Vec::with_capacity(self.type_prefix.len() + c.stored().len() * 2);
        self.write_full_object(c, &mut v);
        Bytes::from(v)
    }

    /// The prefix (which ends with `,`), then the object's JSON after its opening brace.
    fn write_full_object(&self, c: &Cached, out: &mut Vec<u8>) {
        out.extend_from_slice(self.type_prefix.as_bytes());
        if c.is_protobuf() {
            let at = out.len();
            c.write_json(out);
            out.remove(at);
        } else {
            out.extend_from_slice(c.stored().get(1..).unwrap_or_default());
        }
    }

    /// An object as LIST items carry it: its JSON for built-ins, with type meta otherwise.
    pub fn list_item(&self, c: &Cached) -> Bytes {
        if self.builtin {
            c.json()
        } else {
            self.full_object(c)
        }
    }

    /// Appends an object as LIST items carry it ([`ResourceInfo::list_item`]) to `out`.
    pub fn write_list_item(&self, c: &Cached, out: &mut Vec<u8>) {
        if self.builtin {
            c.write_json(out);
        } else {
            self.write_full_object(c, out);
        }
    }
}

/// Cache tuning (from the config file).
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// Events kept in the log at most.
    pub window_count: usize,
    /// Bytes of events kept beyond what kube-apiserver's watch cache would keep
    /// ([`event_log`]'s module doc).
    pub window_bytes: u64,
    /// kube-apiserver's `eventFreshDuration`, which its watch cache's size follows: events are
    /// never dropped for their age.
    pub window_age: Duration,
    /// A consistent read is proven by comparing states while the cache holds at most this many
    /// objects (`cache.consistent_read_state_max_objects`; see `reflector::freshness`).
    pub state_proof_max_objects: usize,
    /// The least time between the starts of two freshness checks of consistent reads
    /// (`cache.consistent_read_check_interval_ms`; see `reflector::freshness`).
    pub consistent_read_check_interval: Duration,
    /// How often the cache is compared with the upstream (`cache.consistency_check_secs`; see
    /// `reflector::consistency`); `None`: never.
    pub consistency_check: Option<Duration>,
    /// Per-watcher queue bound before the watcher switches to reading the log.
    pub watcher_queue: usize,
    /// A watcher lagging by more than this many bytes of events is closed.
    pub max_lag_bytes: u64,
    /// How long, and how many, snapshots paged LISTs were cut from are kept for their
    /// continuations.
    pub retention: Retention,
    /// The process's memory budget, which the cache counts in and sheds load for
    /// ([`budget`]).
    pub budget: Arc<MemoryBudget>,
    /// The largest upstream object the reflector takes (`cache.max_object_bytes`).
    pub max_object_bytes: u64,
    /// Where the resources' caches are persisted (`cache.persist_dir`), if anywhere.
    pub persist_dir: Option<std::path::PathBuf>,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            window_count: 102_400,
            window_bytes: 32 << 20,
            window_age: Duration::from_secs(75),
            state_proof_max_objects: 200,
            consistent_read_check_interval: Duration::from_millis(250),
            consistency_check: Some(Duration::from_secs(300)),
            watcher_queue: 1024,
            max_lag_bytes: 64 << 20,
            retention: Retention {
                max_age: Duration::from_secs(75),
                max_count: 64,
                max_bytes: 128 << 20,
            },
            budget: MemoryBudget::unlimited(),
            max_object_bytes: 16 << 20,
            persist_dir: None,
        }
    }
}

/// Decodes persisted objects on every core (they are independent), in order.
fn decode_in_parallel(info: &ResourceInfo, bodies: &[Bytes]) -> Result<Vec<Cached>, DecodeError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = bodies.len().div_ceil(threads).max(1);
    let parts: Vec<Result<Vec<Cached>, DecodeError>> = std::thread::scope(|s| {
        let handles: Vec<_> = bodies
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|b| record::decode_stored(info, b))
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut out = Vec::with_capacity(bodies.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// Counters the metrics layer reads.
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// Events applied from upstream.
    pub events_received: AtomicU64,
    /// Watchers closed for lagging (slow clients).
    pub slow_watchers_closed: AtomicU64,
    /// Relists bridged with synthesised events.
    pub relists_bridged: AtomicU64,
    /// Relists that fell back to closing every watcher.
    pub relists_reset: AtomicU64,
    /// Watchers closed at a bridged relist because they started inside its gap.
    pub relists_gap_closed: AtomicU64,
    /// Watcher filters evaluated while dispatching (the cost the index keeps small).
    pub selector_evaluations: AtomicU64,
    /// Events handed to live watchers.
    pub deliveries: AtomicU64,
    /// Watches ended by a graceful shutdown's drain, after a bookmark at their resourceVersion.
    pub watches_drained: AtomicU64,
    /// Watches ended after a bookmark because their HTTP/2 connection drew a GOAWAY.
    pub watches_handed_over: AtomicU64,
    /// Watchers closed by a repair because a change it made silently concerned them
    /// ([`CacheWriter::repair`]).
    pub repair_closed: AtomicU64,
}

/// Everything the lock guards.
struct State {
    /// Whether the first list is in.
    synced: bool,
    /// The cache's resourceVersion (last event, list or bookmark applied).
    rv: u64,
    store: Store,
    log: EventLog,
    hub: Hub,
}

/// The cache of one resource, as request handlers read it: the read handle, shared behind an
/// `Arc`. Its only writer is the [`CacheWriter`] returned with it by [`ResourceCache::new`].
pub struct ResourceCache {
    /// Type information.
    pub info: Arc<ResourceInfo>,
    settings: CacheSettings,
    state: RwLock<State>,
    rv_tx: watch::Sender<u64>,
    synced_tx: watch::Sender<bool>,
    /// Snapshots kept for the continuations of paged LISTs (their own lock, never taken while
    /// `state`'s is held).
    snapshots: snapshots::Retained,
    /// Counters.
    pub counters: CacheCounters,
    /// What the persisted cache's writer has done, once the cache has one.
    persist_stats: std::sync::OnceLock<Arc<crate::persist::writer::Stats>>,
    /// The resourceVersion of the first state installed (the initial list, or the state
    /// restored from disk): the cache knows nothing of what happened before it.
    first_rv: std::sync::OnceLock<u64>,
    /// This resource's share of the memory budget.
    account: Arc<Account>,
    /// Whether the cache follows the upstream, and since when it has not (the reflector marks
    /// it).
    pub staleness: staleness::Staleness,
}

impl std::fmt::Debug for ResourceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceCache")
            .field("resource", &self.info.group_resource())
            .finish()
    }
}

impl ResourceCache {
    /// An empty, not yet synced cache: the read handle, and its one writer.
    pub fn new(info: ResourceInfo, settings: CacheSettings) -> (Arc<ResourceCache>, CacheWriter) {
        let account = settings.budget.account();
        let cache = Arc::new(ResourceCache {
            account,
            settings,
            state: RwLock::new(State {
                synced: false,
                rv: 0,
                store: Store::new(&info),
                log: EventLog::default(),
                hub: Hub::default(),
            }),
            info: Arc::new(info),
            rv_tx: watch::channel(0).0,
            synced_tx: watch::channel(false).0,
            snapshots: snapshots::Retained::default(),
            counters: CacheCounters::default(),
            persist_stats: std::sync::OnceLock::new(),
            first_rv: std::sync::OnceLock::new(),
            staleness: staleness::Staleness::default(),
        });
        (
            cache.clone(),
            CacheWriter {
                cache,
                persist: None,
            },
        )
    }

    /// The resourceVersion of the first state the cache held (its initial list, or what it
    /// restored from disk), once synced.
    pub fn first_rv(&self) -> Option<u64> {
        self.first_rv.get().copied()
    }

    /// Settings in use.
    pub fn settings(&self) -> &CacheSettings {
        &self.settings
    }

    /// This resource's share of the memory budget.
    pub fn account(&self) -> &Arc<Account> {
        &self.account
    }

    /// The memory budget's level now (what the router refuses at [`Pressure::Full`]).
    pub fn pressure(&self) -> Pressure {
        self.settings.budget.pressure()
    }

    /// Whether the first list is in.
    pub fn is_synced(&self) -> bool {
        self.state.read().synced
    }

    /// The cache's resourceVersion (last event or bookmark applied).
    pub fn rv(&self) -> u64 {
        self.state.read().rv
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.state.read().store.len()
    }

    /// Whether there are no objects.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of registered watchers every event is checked against (no index applies).
    pub fn unindexed_watchers(&self) -> usize {
        self.state.read().hub.unindexed()
    }

    /// Number of registered watchers.
    pub fn watcher_count(&self) -> usize {
        self.state.read().hub.len()
    }

    /// Events in the log and the age of the oldest (for metrics).
    pub fn window(&self) -> (usize, Option<Duration>) {
        let st = self.state.read();
        (st.log.len(), st.log.oldest_age())
    }

    /// Waits until the first sync, up to `timeout`.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let mut rx = self.synced_tx.subscribe();
        matches!(
            tokio::time::timeout(timeout, rx.wait_for(|s| *s)).await,
            Ok(Ok(_))
        )
    }

    /// Waits until the cache's resourceVersion reaches `rv`, up to `timeout`.
    pub async fn wait_rv(&self, rv: u64, timeout: Duration) -> bool {
        let mut rx = self.rv_tx.subscribe();
        matches!(
            tokio::time::timeout(timeout, rx.wait_for(|r| *r >= rv)).await,
            Ok(Ok(_))
        )
    }

    /// A receiver of the cache's resourceVersion.
    pub fn subscribe_rv(&self) -> watch::Receiver<u64> {
        self.rv_tx.subscribe()
    }

    /// An O(1) snapshot of the current objects.
    pub fn snapshot(&self) -> Snapshot {
        let st = self.state.read();
        st.store.snapshot(st.rv)
    }

    /// What the persisted cache's writer has done (`None` when the cache is not persisted).
    pub fn persist_stats(&self) -> Option<&Arc<crate::persist::writer::Stats>> {
        self.persist_stats.get()
    }

    /// The state a persisted log starts over from: the resourceVersion and every object's
    /// bytes, taken together; `None` before the first list.
    pub fn persisted_state(&self) -> Option<(u64, Vec<Bytes>)> {
        let st = self.state.read();
        if !st.synced {
            return None;
        }
        let snap = st.store.snapshot(st.rv);
        drop(st);
        Some((
            snap.rv,
            snap.objects.values().map(|o| o.stored().clone()).collect(),
        ))
    }

    /// The freshness a persisted log records ([`crate::persist::writer::FreshFn`]): when the
    /// cache was last known current and whether it follows the upstream; `None` before the
    /// first list.
    pub fn persisted_freshness(&self) -> Option<(u64, bool)> {
        self.is_synced().then(|| self.staleness.last_current())
    }

    /// The objects exactly as they were at `rv` (an exact-resourceVersion read): the current
    /// store with the logged events after `rv` undone, newest first, each putting back the state
    /// it replaced; the field indexes follow, each undo being an ordinary store change. Costs
    /// O(events after `rv` · log n) and copies nothing (the maps are shared). `None` when `rv`
    /// is ahead of the cache, when the log no longer holds every event after it (the watch
    /// start rule of [`Self::check_watch_start`]) or when it falls inside a bridged relist.
    pub fn snapshot_at(&self, rv: u64) -> Option<Snapshot> {
        let (mut store, undo) = {
            let st = self.state.read();
            if !st.synced || rv > st.rv {
                return None;
            }
            (st.store.clone(), st.log.undo_after(rv)?)
        };
        for ev in undo.iter().rev() {
            store.set(&self.info, Arc::from(ev.obj.rec.key()), ev.prev.clone());
        }
        Some(store.snapshot(rv))
    }

    /// Keeps `snap` for the continuations of the paged LIST cut from it, within `retention`
    /// (see [`snapshots`]).
    pub fn retain_snapshot(&self, snap: &Snapshot, retention: &Retention) {
        if self.shed_snapshots(1) {
            return;
        }
        self.snapshots.keep(self, snap, retention);
    }

    /// Under memory pressure ([`Pressure::Soft`] and above) no snapshot is kept: drops those
    /// kept, counting them and the `refused` one a LIST asked to keep, and says so.
    fn shed_snapshots(&self, refused: u64) -> bool {
        if self.pressure() < Pressure::Soft {
            return false;
        }
        let dropped = self.snapshots.clear() as u64 + refused;
        self.settings
            .budget
            .shed
            .snapshots
            .fetch_add(dropped, Ordering::Relaxed);
        true
    }

    /// The kept snapshot at exactly `rv`, if there is one (it stays kept a while longer).
    pub fn retained_snapshot(&self, rv: u64) -> Option<Snapshot> {
        self.snapshots.get(rv)
    }

    /// How many snapshots are kept, and the bytes of objects only they still hold.
    pub fn retained_snapshots(&self) -> SnapshotUsage {
        self.snapshots.usage(self)
    }

    /// kube's watch start rule: a watch from `rv` is served iff `rv >= oldest - 1`; else
    /// `Err(oldest - 1)` for the `too old resource version: rv (oldest-1)` message. Also refused:
    /// a resourceVersion strictly inside a bridged relist (`Err` of the list's resourceVersion):
    /// a state the cache never had, which its bridge events do not lead from (see [`bridge`] and
    /// `EventLog::bridged_gap`); and one below a repair's list ([`CacheWriter::repair`]), whose
    /// history lacks what the repair made up for.
    pub fn check_watch_start(&self, rv: u64) -> Result<(), u64> {
        let st = self.state.read();
        let floor = st.log.start_floor().max(st.log.repaired_at());
        if rv < floor {
            return Err(floor);
        }
        match st.log.bridged_gap(rv) {
            Some(list_rv) => Err(list_rv),
            None => Ok(()),
        }
    }

    /// Up to `max` events after `cursor`; `Err` when some of them already left the log.
    pub fn events_after(&self, cursor: u64, max: usize) -> Result<LogBatch, FellBehind> {
        self.state.read().log.after(cursor, max)
    }

    /// Registers a watcher that starts reading the log after `cursor` ("catching up"); it
    /// stays registered until the returned [`Subscription`] is dropped.
    pub fn subscribe(self: &Arc<Self>, filter: Arc<Filter>, cursor: u64) -> Subscription {
        let shared = Arc::new(WatcherShared::catching_up(
            cursor,
            self.settings.watcher_queue,
        ));
        let id = self
            .state
            .write()
            .hub
            .insert(&self.info, filter, shared.clone());
        let charge = self.account.charge(budget::WATCHER_BYTES);
        Subscription::new(self.clone(), id, shared, charge)
    }

    /// Removes watcher `id` from the hub (its [`Subscription`] was dropped).
    pub(crate) fn unsubscribe(&self, id: u64) {
        self.state.write().hub.remove(id);
    }

    /// A catching-up watcher at `cursor` switches to live delivery if the log holds nothing
    /// after its cursor; atomic with the dispatcher, so no event falls between the two modes.
    pub fn try_go_live(&self, sub: &Subscription, cursor: u64) -> bool {
        let st = self.state.write();
        if st.log.has_after(cursor) {
            return false;
        }
        sub.shared().go_live(cursor);
        drop(st);
        true
    }

    /// The resourceVersion a live watcher may announce in a BOOKMARK: the cache's RV, provided
    /// (checked atomically with the dispatcher) that `caught_up()` says the watcher has sent
    /// everything it was given.
    pub fn bookmark_rv(&self, sub: &Subscription, caught_up: impl FnOnce() -> bool) -> Option<u64> {
        let st = self.state.read();
        (sub.shared().is_live() && caught_up()).then_some(st.rv)
    }

    /// Closes a watcher that found, reading the log, that its cursor already left it: a slow
    /// watcher, counted as the reaper counts the ones it closes (once: the reaper skips closed
    /// watchers).
    pub fn close_fell_behind(&self, sub: &Subscription) {
        if !sub.shared().is_closed() {
            self.counters
                .slow_watchers_closed
                .fetch_add(1, Ordering::Relaxed);
        }
        sub.shared().close(FELL_OUT_OF_WINDOW);
    }

    /// The ids of the watchers not closed nor asked to end yet (a shutdown's drain ends them in
    /// paced batches with [`ResourceCache::end_after_bookmark`]).
    pub fn open_watcher_ids(&self) -> Vec<u64> {
        self.state.read().hub.open_ids()
    }

    /// Asks the watchers `ids` still registered to end cleanly after a bookmark at their
    /// resourceVersion; returns how many were asked.
    pub fn end_after_bookmark(&self, ids: &[u64]) -> usize {
        self.state.read().hub.end_after_bookmark(ids)
    }

    /// Closes every watcher (shutdown). Not a write: objects, log and resourceVersion stay.
    pub fn close_all(&self, reason: &'static str) {
        self.state.write().hub.close_all(reason);
    }
}

/// The one handle that changes a cache (see [`ResourceCache::new`]); the resource's reflector
/// owns it. Not `Clone`: every change to the objects, the log and the resourceVersion comes
/// from one place, in upstream order.
#[derive(Debug)]
pub struct CacheWriter {
    cache: Arc<ResourceCache>,
    /// Where every change is also written, behind the live path (`cache.persist_dir`).
    persist: Option<Persister>,
}

impl CacheWriter {
    /// The read handle of the cache this writes.
    pub fn cache(&self) -> &Arc<ResourceCache> {
        &self.cache
    }

    /// Type information.
    pub fn info(&self) -> &Arc<ResourceInfo> {
        &self.cache.info
    }

    /// The cache's resourceVersion.
    pub fn rv(&self) -> u64 {
        self.cache.rv()
    }

    /// Applies one upstream change. Changes at or below the cache's resourceVersion are ignored
    /// (a re-watch can repeat the last event).
    pub fn apply(&self, ty: EventType, obj: Cached) -> bool {
        let c = &*self.cache;
        let mut st = c.state.write();
        let rv = obj.rec.rv;
        if rv <= st.rv {
            return false;
        }
        let key: Arc<str> = Arc::from(obj.rec.key());
        let obj = Arc::new(obj.charged(&c.account));
        let prev = st.store.set(
            &c.info,
            key,
            (ty != EventType::Deleted).then(|| obj.clone()),
        );
        c.counters.events_received.fetch_add(1, Ordering::Relaxed);
        self.append(&mut st, ty, obj, prev);
        drop(st);
        c.rv_tx.send_replace(rv);
        true
    }

    /// Logs a change already stored and has the hub dispatch it. Caller holds the write lock.
    fn append(&self, st: &mut State, ty: EventType, obj: Arc<Cached>, prev: Option<Arc<Cached>>) {
        let c = &*self.cache;
        let ev = st.log.push(ty, obj, prev, &c.account, &c.settings);
        st.rv = ev.rv;
        self.persist(Record::Event {
            ty,
            rv: ev.rv,
            body: ev.obj.stored().clone(),
        });
        st.log.evict(&c.settings);
        Self::shed_log(c, st);
        let shallow = c.settings.budget.above_trim();
        let done = st.hub.dispatch(&c.info, &ev, shallow);
        c.counters
            .selector_evaluations
            .fetch_add(done.evaluated, Ordering::Relaxed);
        c.counters
            .deliveries
            .fetch_add(done.delivered, Ordering::Relaxed);
    }

    /// Under memory pressure ([`Pressure::Trim`] and above): cuts the log from its oldest end
    /// until the budget is back under the level or the log is empty, closing each watcher whose
    /// cursor the log no longer holds as the cut passes it — the furthest behind first — and
    /// giving its queue's memory back at once, so that the budget sees it before the next event
    /// is cut. A watcher that stopped reading pins what it queued; were it only closed, its
    /// queue would be freed when its watch next ran (or after `ABANDON_GRACE`), and the cut
    /// would run on to the head of the log, cutting off every watcher a few events behind.
    /// Returns how many watchers it closed. Caller holds the write lock.
    fn shed_log(c: &ResourceCache, st: &mut State) -> usize {
        let budget = &c.settings.budget;
        if !budget.above_trim() {
            return 0;
        }
        let State { log, hub, .. } = &mut *st;
        let mut behind = hub.behind_for_memory().into_iter().peekable();
        let (mut cut, mut closed) = (0u64, 0usize);
        let out_of_log = |log: &EventLog, cursor| log.lag_bytes(cursor).is_err();
        while budget.above_trim() && log.pop_oldest() {
            cut += 1;
            // The watchers the cut has just passed (as of the cursors read before it: one
            // that moved on since is checked again, and left if the log still holds it).
            while let Some(&(cursor, id)) = behind.peek() {
                if !out_of_log(log, cursor) {
                    break;
                }
                behind.next();
                let verdict = |now| out_of_log(log, now).then_some(CUT_FOR_MEMORY);
                if hub.close_releasing(id, verdict) {
                    closed += 1;
                }
            }
        }
        if cut == 0 {
            return 0;
        }
        budget.shed.log_events.fetch_add(cut, Ordering::Relaxed);
        // One that fell behind meanwhile (the cursors were read before the cut).
        closed += hub.close_lagging(|cursor| out_of_log(log, cursor).then_some(CUT_FOR_MEMORY));
        budget
            .shed
            .watchers
            .fetch_add(closed as u64, Ordering::Relaxed);
        closed
    }

    /// An upstream BOOKMARK: the cache's resourceVersion advances without an event.
    pub fn advance(&self, rv: u64) {
        let c = &*self.cache;
        let mut st = c.state.write();
        if rv > st.rv {
            st.rv = rv;
            self.persist(Record::Progress { rv });
            drop(st);
            c.rv_tx.send_replace(rv);
        }
    }

    /// Hands `r` to the persisted cache's writer, if there is one. Caller holds the write lock
    /// (so records reach the writer in the cache's order).
    fn persist(&self, r: Record) {
        if let Some(p) = &self.persist {
            p.record(r);
        }
    }

    /// Has the persisted cache's writer, if there is one, start over from a full state (the
    /// cache's history was replaced).
    fn persist_state(&self) {
        if let Some(p) = &self.persist {
            p.need_state();
        }
    }

    /// A relist from `old_rv` to `list_rv` was bridged: the log refuses watches from inside it
    /// and the cache's resourceVersion reaches the list's. Caller holds the write lock.
    fn mark_bridged(&self, st: &mut State, old_rv: u64, list_rv: u64) {
        st.rv = st.rv.max(list_rv);
        st.log.mark_bridged(old_rv, list_rv);
        self.persist(Record::Gap { old_rv, list_rv });
    }

    /// A proof from the freshness check that the resource has no event in `(after, rv]`: once
    /// the cache holds `after`, its resourceVersion advances to `rv`, as for a bookmark. Ignored
    /// while the cache is behind `after` or not synced.
    pub fn advance_proven(&self, after: u64, rv: u64) {
        let c = &*self.cache;
        let mut st = c.state.write();
        if st.synced && st.rv >= after && rv > st.rv {
            st.rv = rv;
            self.persist(Record::Progress { rv });
            drop(st);
            c.rv_tx.send_replace(rv);
        }
    }

    /// Housekeeping (once a second): age-based eviction, closing watchers that fell out of the
    /// log or lag by more than the byte bound, and pruning kept snapshots. Returns how many
    /// watchers were closed.
    pub fn reap(&self) -> usize {
        let c = &*self.cache;
        let mut st = c.state.write();
        st.log.evict(&c.settings);
        let State { log, hub, .. } = &mut *st;
        let closed = hub.close_lagging(|cursor| match log.lag_bytes(cursor) {
            Err(FellBehind) => Some(FELL_OUT_OF_WINDOW),
            Ok(lag) => (lag > c.settings.max_lag_bytes).then_some(LAGGING_BEYOND_BYTE_BOUND),
        });
        c.counters
            .slow_watchers_closed
            .fetch_add(closed as u64, Ordering::Relaxed);
        let shed = Self::shed_log(c, &mut st);
        drop(st);
        // Kept snapshots age out and are held to their byte bound here too, not only when a
        // LIST or a scrape looks at them; under memory pressure none is kept.
        if !c.shed_snapshots(0) {
            c.snapshots.prune(c);
        }
        closed + shed
    }

    /// From now on, every change is also written to `p` (its state function reads this cache:
    /// [`ResourceCache::persisted_state`]).
    pub fn persist_to(&mut self, p: Persister) {
        let _ = self.cache.persist_stats.set(p.stats().clone());
        self.persist = Some(p);
    }

    /// Fills a cache that has not synced yet from what its persisted log held: the state, then
    /// the events, bookmarks and bridged relists after it, as they were applied before (so the
    /// log serves watches from any resourceVersion it held, and refuses those inside a bridged
    /// relist). All or nothing: an object that does not decode (the files are checksummed, so a
    /// resource whose type changed, say) leaves the cache empty and is the error. Call it before
    /// [`Self::persist_to`], so that nothing is written back. It blocks for as long as decoding
    /// takes (seconds for a large cache, spread over the cores): call it off the runtime.
    pub fn restore(&self, loaded: &Loaded) -> Result<u64, DecodeError> {
        let info = &self.cache.info;
        let objects = decode_in_parallel(info, &loaded.objects)?;
        enum Step {
            Event(EventType, Box<Cached>),
            Progress(u64),
            Gap(u64, u64),
        }
        let mut steps = Vec::with_capacity(loaded.tail.len());
        for r in &loaded.tail {
            steps.push(match r {
                Record::Event { ty, body, .. } => {
                    Step::Event(*ty, Box::new(record::decode_stored(info, body)?))
                }
                Record::Progress { rv } => Step::Progress(*rv),
                Record::Gap { old_rv, list_rv } => Step::Gap(*old_rv, *list_rv),
                _ => continue,
            });
        }
        self.replace(objects, loaded.state_rv);
        // It does not follow the upstream until the reflector's watch is up again.
        self.cache
            .staleness
            .stale_since(loaded.fresh_ms.unwrap_or_else(staleness::now_unix_ms));
        for step in steps {
            match step {
                Step::Event(ty, obj) => {
                    self.apply(ty, *obj);
                }
                Step::Progress(rv) => self.advance(rv),
                Step::Gap(old_rv, list_rv) => {
                    let c = &*self.cache;
                    let mut st = c.state.write();
                    self.mark_bridged(&mut st, old_rv, list_rv);
                    let rv = st.rv;
                    drop(st);
                    c.rv_tx.send_replace(rv);
                }
            }
        }
        Ok(self.rv())
    }

    /// Installs a full list from upstream at `list_rv`. The first time, this is the initial sync.
    /// Afterwards (a relist after 410 or an outage) the difference to the cached state is
    /// delivered to watchers as bridge events (see [`bridge`]); where that cannot be done safely
    /// every watcher is closed instead, as kube-apiserver does.
    pub fn replace(&self, items: Vec<Cached>, list_rv: u64) -> bridge::Outcome {
        let c = &*self.cache;
        let mut st = c.state.write();
        let charge = |o: Cached| o.charged(&c.account);
        if !st.synced {
            st.store
                .reset(&c.info, items.into_iter().map(charge).collect());
            st.rv = list_rv;
            st.log.begin_at(list_rv);
            st.synced = true;
            let _ = c.first_rv.set(list_rv);
            self.persist_state();
            drop(st);
            c.rv_tx.send_replace(list_rv);
            c.synced_tx.send_replace(true);
            return bridge::Outcome::Initial;
        }
        let old_rv = st.rv;
        let plan = bridge::plan(st.store.objects(), old_rv, &items, list_rv, charge);
        let outcome = match plan {
            Ok(events) => {
                let n = events.len();
                self.close_gap(&mut st, old_rv, list_rv);
                self.bridge(&mut st, old_rv, list_rv, events);
                bridge::Outcome::Bridged { events: n }
            }
            Err(why) => {
                st.store
                    .reset(&c.info, items.into_iter().map(charge).collect());
                st.rv = list_rv;
                st.log.restart_at(list_rv);
                st.hub.close_all(RELIST_NOT_BRIDGED);
                self.persist_state();
                c.counters.relists_reset.fetch_add(1, Ordering::Relaxed);
                bridge::Outcome::Reset { why }
            }
        };
        let rv = st.rv;
        drop(st);
        c.rv_tx.send_replace(rv);
        outcome
    }
}

impl CacheWriter {
    /// Before a relist from `old_rv` to `list_rv` is bridged: a watcher whose cursor lies
    /// strictly between the two started from a state the cache never had (a resourceVersion
    /// ahead of it, from a LIST the upstream answered); the bridge's summary does not lead from
    /// there, so it is closed with 410 before the summary is dispatched.
    fn close_gap(&self, st: &mut State, old_rv: u64, list_rv: u64) {
        let gap = st
            .hub
            .close_where(|cursor| old_rv < cursor && cursor < list_rv, IN_BRIDGED_GAP);
        self.cache
            .counters
            .relists_gap_closed
            .fetch_add(gap as u64, Ordering::Relaxed);
    }

    /// Applies a relist's bridge `events` (stored, logged, dispatched) and marks the gap.
    fn bridge(&self, st: &mut State, old_rv: u64, list_rv: u64, events: Vec<bridge::BridgeEvent>) {
        let c = &*self.cache;
        for (ty, obj, prev) in events {
            let key: Arc<str> = Arc::from(obj.rec.key());
            st.store.set(
                &c.info,
                key,
                (ty != EventType::Deleted).then(|| obj.clone()),
            );
            self.append(st, ty, obj, prev);
        }
        self.mark_bridged(st, old_rv, list_rv);
        // The last bridge event lies below the list's resourceVersion as a rule (other
        // resources move the revision), inside the gap: each watcher hears of the list's
        // resourceVersion at once, so that its client resumes from there.
        st.hub.want_bookmarks();
        c.counters.relists_bridged.fetch_add(1, Ordering::Relaxed);
    }

    /// Repairs the cache with a full list from upstream at `list_rv`, after a consistency check
    /// found the cache unlike the upstream (`crate::reflector::consistency`): the difference is
    /// bridged as after a relist, except a change an event lost made at or before the cache's
    /// resourceVersion, which the store takes silently while the watchers it concerns are
    /// closed with 410 (see [`bridge::plan_repair`]; the others keep watching). The states the
    /// cache held before are no longer served: the snapshots kept for continuations are dropped,
    /// no state below `list_rv` is rebuilt and no watch starts below it.
    pub fn repair(&self, items: Vec<Cached>, list_rv: u64) -> bridge::Outcome {
        let c = &*self.cache;
        let mut st = c.state.write();
        if !st.synced {
            drop(st);
            return self.replace(items, list_rv);
        }
        let charge = |o: Cached| o.charged(&c.account);
        let old_rv = st.rv;
        let repair = match bridge::plan_repair(st.store.objects(), old_rv, &items, list_rv, charge)
        {
            Ok(r) => r,
            Err(_) => {
                drop(st);
                return self.replace(items, list_rv);
            }
        };
        self.close_gap(&mut st, old_rv, list_rv);
        let mut closed = 0;
        for (new, prev) in &repair.silent {
            let Some(obj) = new.as_ref().or(prev.as_ref()) else {
                continue;
            };
            closed += st
                .hub
                .close_concerned(&c.info, obj, prev.as_deref(), REPAIRED);
            st.store.set(&c.info, Arc::from(obj.rec.key()), new.clone());
        }
        c.counters
            .repair_closed
            .fetch_add(closed as u64, Ordering::Relaxed);
        let n = repair.events.len();
        self.bridge(&mut st, old_rv, list_rv, repair.events);
        st.log.mark_repaired(list_rv);
        if !repair.silent.is_empty() {
            // The persisted events lack the silent changes: the state is written whole.
            self.persist_state();
        }
        let rv = st.rv;
        drop(st);
        c.snapshots.clear();
        c.rv_tx.send_replace(rv);
        bridge::Outcome::Repaired {
            events: n,
            silent: repair.silent.len(),
            closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::record::decode_object;

    fn pods() -> ResourceInfo {
        let mut i = ResourceInfo::new("", "v1", "pods", "Pod", true);
        i.index_fields = vec!["spec.nodeName".into()];
        i
    }

    fn pod(ns: &str, name: &str, node: &str, rv: u64) -> Cached {
        let j = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"{rv}"}},"spec":{{"nodeName":"{node}"}}}}"#
        );
        decode_object(&pods(), j.as_bytes()).unwrap()
    }

    /// A pod read's filter: in namespace `ns` (if any), by field selector `fields`.
    fn pod_filter(ns: Option<&str>, fields: &str) -> Filter {
        Filter::parse("", "Pod", true, &[], ns.map(str::to_string), "", fields).unwrap()
    }

    fn names(cache: &ResourceCache, ns: Option<&str>, fields: &str) -> Vec<String> {
        let snap = cache.snapshot();
        let f = pod_filter(ns, fields);
        snap.select(&cache.info, ns, &f)
            .filter(|o| f.matches(&o.rec.namespace, &o.rec.labels, |x| o.rec.field(x)))
            .map(|o| o.rec.key())
            .collect()
    }

    /// A name-scoped read (a kubelet's watch of one ConfigMap) looks its object up by key
    /// instead of walking its namespace.
    #[test]
    fn a_named_read_selects_only_its_object() {
        let (cache, writer) = ResourceCache::new(pods(), CacheSettings::default());
        writer.replace(
            vec![
                pod("a", "p1", "n1", 2),
                pod("a", "p2", "n1", 3),
                pod("b", "p2", "n2", 4),
            ],
            4,
        );
        let candidates = |ns: Option<&str>, fields: &str| {
            let f = pod_filter(ns, fields);
            cache.snapshot().select(&cache.info, ns, &f).count()
        };
        assert_eq!(candidates(Some("a"), "metadata.name=p2"), 1);
        assert_eq!(candidates(None, "metadata.namespace=b,metadata.name=p2"), 1);
        assert_eq!(candidates(Some("a"), "metadata.name=p9"), 0);
        // Without a namespace the name alone does not pin a namespaced object.
        assert_eq!(candidates(None, "metadata.name=p2"), 3);
        assert_eq!(names(&cache, Some("a"), "metadata.name=p2"), ["a/p2"]);
        assert_eq!(
            names(&cache, None, "metadata.namespace=b,metadata.name=p2"),
            ["b/p2"]
        );
        assert!(names(&cache, Some("b"), "metadata.name=p1").is_empty());
    }

    #[test]
    fn field_index_follows_moves_and_deletes_and_keeps_key_order() {
        let (cache, writer) = ResourceCache::new(pods(), CacheSettings::default());
        writer.replace(
            vec![
                pod("b", "p1", "n1", 2),
                pod("a", "p2", "n1", 3),
                pod("a", "p3", "n2", 4),
            ],
            4,
        );
        assert_eq!(names(&cache, None, "spec.nodeName=n1"), ["a/p2", "b/p1"]);
        assert_eq!(names(&cache, Some("a"), "spec.nodeName=n1"), ["a/p2"]);
        writer.apply(EventType::Modified, pod("a", "p2", "n2", 5));
        assert_eq!(names(&cache, None, "spec.nodeName=n1"), ["b/p1"]);
        assert_eq!(names(&cache, None, "spec.nodeName=n2"), ["a/p2", "a/p3"]);
        writer.apply(EventType::Deleted, pod("b", "p1", "n1", 6));
        assert!(names(&cache, None, "spec.nodeName=n1").is_empty());
        assert!(
            cache.snapshot().by_field[0].get("n1").is_none(),
            "empty buckets are dropped"
        );
        assert_eq!(names(&cache, None, ""), ["a/p2", "a/p3"]);
        // A relist that moves everything is reflected too.
        writer.replace(vec![pod("a", "p2", "n3", 7), pod("a", "p3", "n3", 8)], 9);
        assert_eq!(names(&cache, None, "spec.nodeName=n3"), ["a/p2", "a/p3"]);
        assert!(names(&cache, None, "spec.nodeName=n2").is_empty());
    }

    /// A watcher of every namespace reading one range of the pods' hashed uids.
    fn shard_watcher(cache: &Arc<ResourceCache>, ranges: &[(u64, u128)]) -> Subscription {
        let sel = ranges
            .iter()
            .map(|(a, b)| format!("shardRange(object.metadata.uid, '0x{a:016x}', '0x{b:016x}')"))
            .collect::<Vec<_>>()
            .join(" || ");
        let shard = kube_wire::shard::ShardSelector::parse(&sel).unwrap();
        let f = Arc::new(pod_filter(None, "").with_shard(Some(shard)));
        let w = cache.subscribe(f, cache.rv());
        assert!(cache.try_go_live(&w, cache.rv()));
        w
    }

    /// Four shard watchers on cell boundaries partition the events: each event is offered to
    /// exactly the watcher whose range holds its object's hash (one filter evaluated per event,
    /// not four). One whose ranges split cells gets exactly its objects, each once.
    #[test]
    fn shard_watchers_partition_the_events_and_cost_one_evaluation_each() {
        let settings = CacheSettings {
            watcher_queue: 4096,
            ..CacheSettings::default()
        };
        let (cache, writer) = ResourceCache::new(pods(), settings);
        writer.replace(vec![], 1);
        let quarter: u128 = 1 << 62;
        let mut shards: Vec<Subscription> = (0..4u128)
            .map(|i| shard_watcher(&cache, &[((i * quarter) as u64, (i + 1) * quarter)]))
            .collect();
        // Two ranges inside cell 0x01, one across cells 0x80 to 0x83.
        let odd_ranges = [
            (0x0100_0000_0000_0000u64, 0x0170_0000_0000_0000u128),
            (0x0180_0000_0000_0000, 0x01f0_0000_0000_0000),
            (0x8080_0000_0000_0000, 0x8380_0000_0000_0000),
        ];
        let mut odd = shard_watcher(&cache, &odd_ranges);
        assert_eq!(cache.unindexed_watchers(), 0);
        let before = cache.counters.selector_evaluations.load(Ordering::Relaxed);
        let mut want = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        let mut want_odd = Vec::new();
        let n = 2000u64;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..n {
            let name = format!("p{i}");
            // A UUID-like uid, as kube makes them.
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let (a, b) = (next(), next());
            let uid = format!(
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xffff,
                b >> 48,
                b & 0xffff_ffff_ffff
            );
            let j = format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"a","uid":"{uid}","resourceVersion":"{}"}}}}"#,
                i + 2
            );
            let p = decode_object(&pods(), j.as_bytes()).unwrap();
            let h = kube_wire::shard::shard_hash(p.rec.uid.as_bytes());
            want[(u128::from(h) / quarter) as usize].push(name.clone());
            if odd_ranges
                .iter()
                .any(|(a, b)| u128::from(h) >= u128::from(*a) && u128::from(h) < *b)
            {
                want_odd.push(name);
            }
            writer.apply(EventType::Added, p);
        }
        let evaluated = cache.counters.selector_evaluations.load(Ordering::Relaxed) - before;
        // One per event, and the odd watcher's five cells' events (about 5/256 of them).
        assert!(evaluated >= n && evaluated < n + n / 20, "{evaluated}");
        let drain = |w: &mut Subscription| {
            std::iter::from_fn(|| w.try_recv())
                .map(|(ev, _)| ev.obj.rec.name.clone())
                .collect::<Vec<_>>()
        };
        for (i, w) in shards.iter_mut().enumerate() {
            let got = drain(w);
            assert!(
                got == want[i],
                "shard {i}: {} events, {} wanted",
                got.len(),
                want[i].len()
            );
            assert!(got.len() > 300, "shard {i}: {}", got.len());
        }
        let got = drain(&mut odd);
        assert!(
            got == want_odd,
            "{} events, {} wanted",
            got.len(),
            want_odd.len()
        );
        assert!(want_odd.len() > 10, "{}", want_odd.len());
    }

    /// A repair after a lost event: the difference the watchers can be sent is sent (a lost
    /// deletion, at a free revision); what they cannot (a lost create, at or below what they
    /// already received) is taken silently and closes only the watchers that see that object.
    /// The states before the repair are served no more.
    #[test]
    fn a_repair_bridges_what_it_can_and_closes_only_the_watchers_of_a_silent_change() {
        let (cache, writer) = ResourceCache::new(pods(), CacheSettings::default());
        writer.replace(vec![pod("a", "p1", "n1", 10), pod("b", "p9", "n1", 11)], 12);
        let watch = |ns: Option<&str>| {
            let f = Arc::new(pod_filter(ns, ""));
            let w = cache.subscribe(f, 12);
            assert!(cache.try_go_live(&w, 12));
            w
        };
        let (mut in_a, mut in_b, mut all) = (watch(Some("a")), watch(Some("b")), watch(None));
        let behind = cache.subscribe(Arc::new(pod_filter(Some("b"), "")), 10);
        let kept = {
            let snap = cache.snapshot();
            cache.retain_snapshot(&snap, &cache.settings().retention);
            snap.rv
        };
        assert!(cache.retained_snapshot(kept).is_some());
        // Upstream: p2 created at 13 in namespace a (its ADDED lost), p9 deleted at 14 (lost),
        // p3 created at 15 (seen); checked at 15, relisted at 17.
        writer.apply(EventType::Added, pod("a", "p3", "n1", 15));
        for w in [&mut in_a, &mut all] {
            assert!(w.try_recv().is_some(), "p3's ADDED");
        }
        let outcome = writer.repair(
            vec![
                pod("a", "p1", "n1", 10),
                pod("a", "p2", "n1", 13),
                pod("a", "p3", "n1", 15),
            ],
            17,
        );
        assert_eq!(
            outcome,
            bridge::Outcome::Repaired {
                events: 1,
                silent: 1,
                closed: 2
            }
        );
        // p2's ADDED would go back below 15: the watchers that see p2 are closed, with 410.
        for w in [&in_a, &all] {
            assert_eq!(w.shared().reason(), Some(REPAIRED));
        }
        assert!(!in_b.shared().is_closed() && !behind.shared().is_closed());
        // p9's deletion, at 16 (free: no listed pod has it), reaches the namespace-b watcher.
        let (ev, ty) = in_b.try_recv().expect("the bridged deletion");
        assert_eq!(
            (ty, ev.obj.rec.name.as_str(), ev.rv),
            (EventType::Deleted, "p9", 16)
        );
        assert_eq!(cache.events_after(10, 10).unwrap().events.len(), 2);
        assert_eq!(names(&cache, None, ""), ["a/p1", "a/p2", "a/p3"]);
        assert_eq!(cache.rv(), 17);
        // No state before the repair is served again: no kept snapshot, no rebuilt state, no
        // watch start below the list.
        assert!(cache.retained_snapshot(kept).is_none());
        assert!(cache.snapshot_at(15).is_none());
        assert_eq!(cache.check_watch_start(12), Err(17));
        assert_eq!(cache.check_watch_start(17), Ok(()));
    }

    #[test]
    fn a_watch_from_inside_a_bridged_gap_is_refused_and_closed() {
        let (cache, writer) = ResourceCache::new(pods(), CacheSettings::default());
        writer.replace(vec![pod("a", "p1", "n1", 10)], 10);
        let all = Arc::new(Filter::parse("", "Pod", true, &[], None, "", "").unwrap());
        // A client read the upstream at 12 (the cache is still at 10) and watches from there;
        // another watches from the cache's own resourceVersion.
        let ahead = cache.subscribe(all.clone(), 12);
        assert!(cache.try_go_live(&ahead, 12));
        let current = cache.subscribe(all.clone(), 10);
        assert!(cache.try_go_live(&current, 10));
        assert_eq!(cache.check_watch_start(12), Ok(()));
        // Upstream meanwhile: p2 created at 11 and deleted at 13 (never seen by the cache), p1
        // changed at 14; the cache relists at 15 and bridges.
        let outcome = writer.replace(vec![pod("a", "p1", "n2", 14)], 15);
        assert!(matches!(outcome, bridge::Outcome::Bridged { events: 1 }));
        // The bridge's summary leads from 10, not from 12: the watcher at 12 is closed (it
        // would keep p2 for ever), the one at 10 is not; new watches inside the gap get 410.
        assert!(ahead.shared().is_closed());
        assert_eq!(ahead.shared().reason(), Some(IN_BRIDGED_GAP));
        assert!(!current.shared().is_closed());
        for rv in [11, 12, 13] {
            assert_eq!(cache.check_watch_start(rv), Err(15), "{rv}");
        }
        // 14 is the bridge event's, but also p1's real write: a client that listed upstream at
        // 14 holds the upstream's state there, which the bridge's summary up to 14 need not be
        // (see EventLog::bridged_gap). Refused too.
        assert_eq!(cache.check_watch_start(14), Err(15));
        assert_eq!(cache.check_watch_start(10), Ok(()));
        assert_eq!(cache.check_watch_start(15), Ok(()));
        assert_eq!(cache.counters.relists_gap_closed.load(Ordering::Relaxed), 1);
    }

    /// Under memory pressure the log is cut from its oldest end, and each watcher the cut
    /// passes is closed as it goes, its queue given back at once. A watcher whose client
    /// stopped reading holds in its queue the very events the log holds, so cutting the log
    /// alone frees nothing: closed but still holding them, the cut ran on to the head and cut
    /// off a watcher a few events behind it too (seen under load in
    /// `memory::memory_budget_sheds_in_order_and_holds_its_bound`).
    #[test]
    fn memory_cuts_close_the_furthest_behind_first_and_free_their_queues() {
        let pad = "x".repeat(4000);
        let big = |rv: u64| {
            let j = format!(
                r#"{{"metadata":{{"name":"p","namespace":"a","resourceVersion":"{rv}","annotations":{{"pad":"{pad}","n":"{rv}"}}}},"spec":{{"nodeName":"n1"}}}}"#
            );
            decode_object(&pods(), j.as_bytes()).unwrap()
        };
        let settings = CacheSettings {
            budget: MemoryBudget::new(400 << 10),
            ..CacheSettings::default()
        };
        let budget = settings.budget.clone();
        let (cache, writer) = ResourceCache::new(pods(), settings);
        writer.replace(vec![big(10)], 10);
        let all = Arc::new(Filter::parse("", "Pod", true, &[], None, "", "").unwrap());
        // One watcher whose client stopped reading (live: its queue fills, then it falls
        // behind at 10), and one reading the log three events behind the head.
        let stalled = cache.subscribe(all.clone(), 10);
        assert!(cache.try_go_live(&stalled, 10));
        let reader = cache.subscribe(all, 10);
        let mut rv = 10;
        while budget.shed.log_events.load(Ordering::Relaxed) == 0 {
            assert!(rv < 1000, "the budget never cut the log");
            rv += 1;
            writer.apply(EventType::Modified, big(rv));
            reader.shared().set_cursor(rv.saturating_sub(3).max(10));
        }
        assert_eq!(stalled.shared().reason(), Some(CUT_FOR_MEMORY));
        assert_eq!(stalled.shared().queued(), 0, "its queue was given back");
        assert!(
            !reader.shared().is_closed(),
            "a watcher three events behind at {rv} was cut off with the stalled one"
        );
        assert_eq!(budget.shed.watchers.load(Ordering::Relaxed), 1);
        assert!(cache.state.read().log.lag_bytes(rv - 3).is_ok());
    }

    #[test]
    fn a_bridged_relist_asks_every_watcher_for_a_bookmark() {
        use futures_util::FutureExt;
        let (cache, writer) = ResourceCache::new(pods(), CacheSettings::default());
        writer.replace(vec![pod("a", "p1", "n1", 10)], 10);
        let all = Arc::new(Filter::parse("", "Pod", true, &[], None, "", "").unwrap());
        let w = cache.subscribe(all, 10);
        assert!(cache.try_go_live(&w, 10));
        let asks = w.shared().bookmark_asks();
        // An event is news enough: no bookmark is asked for.
        writer.apply(EventType::Modified, pod("a", "p1", "n2", 11));
        assert!(asks.notified().now_or_never().is_none());
        // A relist at 20 whose last change is at 14 (other resources made 15..20): the watcher's
        // last event would be 14, inside the gap a watch cannot start from, so it is asked to
        // announce the cache's resourceVersion, the list's, at once.
        writer.replace(vec![pod("a", "p1", "n3", 14)], 20);
        assert_eq!(cache.check_watch_start(14), Err(20));
        assert!(asks.notified().now_or_never().is_some());
        assert_eq!(cache.rv(), 20);
        assert_eq!(cache.bookmark_rv(&w, || true), Some(20));
    }

    #[test]
    fn a_persisted_cache_restores_its_objects_log_and_bridged_gaps() {
        use crate::persist::{segments, writer};
        let dir = tempfile::tempdir().unwrap();
        let (cache, mut w) = ResourceCache::new(pods(), CacheSettings::default());
        let read = cache.clone();
        let settings = writer::Settings {
            flush: Duration::from_millis(1),
            ..writer::Settings::default()
        };
        let (p, thread) = writer::Persister::spawn(
            dir.path().into(),
            None,
            None,
            Box::new(move || read.persisted_state()),
            Box::new(|| None),
            settings,
        )
        .unwrap();
        let stats = p.stats().clone();
        w.persist_to(p);
        w.replace(vec![pod("a", "p1", "n1", 10)], 10);
        while stats.checkpoints.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        w.apply(EventType::Modified, pod("a", "p1", "n2", 11));
        w.apply(EventType::Added, pod("a", "p2", "n1", 12));
        w.advance(13);
        // A bridged relist: p2 deleted, p3 created at 15, listed at 16.
        let outcome = w.replace(vec![pod("a", "p1", "n2", 11), pod("a", "p3", "n1", 15)], 16);
        assert!(matches!(outcome, bridge::Outcome::Bridged { events: 2 }));
        w.apply(EventType::Added, pod("b", "p4", "n1", 17));
        drop(w);
        thread.join().unwrap();

        let loaded = segments::load(dir.path()).unwrap();
        assert!(loaded.dropped.is_empty(), "{:?}", loaded.dropped);
        let (again, w2) = ResourceCache::new(pods(), CacheSettings::default());
        assert_eq!(w2.restore(&loaded).unwrap(), 17);
        let objects = |c: &ResourceCache| -> Vec<(String, u64)> {
            c.snapshot()
                .objects
                .values()
                .map(|o| (o.rec.key(), o.rec.rv))
                .collect()
        };
        assert_eq!(objects(&again), objects(&cache));
        let log = |c: &ResourceCache| -> Vec<(EventType, u64, String)> {
            c.events_after(10, usize::MAX)
                .unwrap()
                .events
                .iter()
                .map(|e| (e.ty, e.rv, e.obj.rec.key()))
                .collect()
        };
        assert_eq!(log(&again), log(&cache));
        assert_eq!(log(&again).len(), 5);
        // The same watch starts are served and refused: from inside the bridged relist, 410.
        for rv in 9..=18 {
            assert_eq!(
                again.check_watch_start(rv),
                cache.check_watch_start(rv),
                "{rv}"
            );
        }
        assert_eq!(again.check_watch_start(14), Err(16));
    }

    /// Events of a quiet kind stay however old they are, as in kube's watch cache (its ring
    /// keeps its last 100 events for ever): a watch from a resourceVersion two hours old replays,
    /// an exact-resourceVersion read rebuilds the state there.
    #[tokio::test(start_paused = true)]
    async fn a_quiet_kinds_events_stay_however_old() {
        let (cache, writer) = ResourceCache::new(pods(), CacheSettings::default());
        writer.replace(vec![pod("a", "p1", "n1", 10)], 10);
        for rv in 11..=15 {
            writer.apply(EventType::Modified, pod("a", "p1", &format!("n{rv}"), rv));
        }
        tokio::time::advance(Duration::from_secs(2 * 3600)).await;
        writer.apply(EventType::Added, pod("a", "p2", "n1", 16));
        writer.reap();
        assert_eq!(cache.check_watch_start(10), Ok(()));
        let replay = cache.events_after(11, usize::MAX).unwrap().events;
        assert_eq!(
            replay.iter().map(|e| e.rv).collect::<Vec<_>>(),
            [12, 13, 14, 15, 16]
        );
        let at_12 = cache.snapshot_at(12).expect("the state at 12");
        assert_eq!(at_12.objects.len(), 1);
        assert_eq!(at_12.objects.values().next().unwrap().rec.rv, 12);
    }

    /// Beyond kube's share, the window keeps older events within `window_bytes`; kube's share is
    /// kept whatever the bytes, following its ring as it grows under a burst and shrinks once
    /// the events come slower than its fresh duration.
    #[tokio::test(start_paused = true)]
    async fn the_window_keeps_kubes_share_and_bounds_the_rest_by_bytes() {
        let settings = CacheSettings {
            window_bytes: 1,
            ..CacheSettings::default()
        };
        let (cache, writer) = ResourceCache::new(pods(), settings);
        writer.replace(vec![], 1);
        let mut rv = 1;
        let mut write = |n: usize| {
            for _ in 0..n {
                rv += 1;
                writer.apply(EventType::Added, pod("a", &format!("p{rv}"), "n1", rv));
            }
            rv
        };
        let held =
            |cache: &ResourceCache| cache.events_after(0, usize::MAX).map(|b| b.events.len());
        // A burst of 150: kube's ring grows from 100 to 200 and holds all of them.
        write(150);
        assert_eq!(held(&cache), Ok(150));
        assert_eq!(cache.state.read().log.kube_window().capacity, 200);
        // 100 s later, 51 more: the ring is full (200) but its newest quarter is fresh: no
        // shrink, the oldest leave it and the byte bound drops them here too.
        tokio::time::advance(Duration::from_secs(100)).await;
        write(51);
        assert_eq!(
            cache.state.read().log.kube_window(),
            event_log::KubeWindow {
                capacity: 200,
                len: 200,
            }
        );
        assert_eq!(
            held(&cache).ok(),
            None,
            "the oldest left: a cursor at 0 fell behind"
        );
        assert_eq!(cache.check_watch_start(1), Err(2));
        assert_eq!(cache.check_watch_start(2), Ok(()));
        // 100 s later again, one event: the newest quarter is older than 75 s, the ring halves
        // (kube keeps its newest 100) and so does the window.
        tokio::time::advance(Duration::from_secs(100)).await;
        let last = write(1);
        assert_eq!(cache.state.read().log.kube_window().capacity, 100);
        assert_eq!(cache.check_watch_start(last - 100), Ok(()));
        assert_eq!(cache.check_watch_start(last - 101), Err(last - 100));
        // window_count is the hard bound, over kube's share too (its ring grew to 400 here).
        let settings = CacheSettings {
            window_count: 300,
            ..CacheSettings::default()
        };
        let (roomy, w) = ResourceCache::new(pods(), settings);
        w.replace(vec![], 1);
        for rv in 2..=400 {
            w.apply(EventType::Added, pod("a", &format!("p{rv}"), "n1", rv));
        }
        assert_eq!(roomy.check_watch_start(99), Err(100));
        assert_eq!(roomy.check_watch_start(100), Ok(()));
    }

    #[test]
    fn a_persisted_object_that_does_not_decode_restores_nothing() {
        use crate::persist::segments::Loaded;
        let (cache, w) = ResourceCache::new(pods(), CacheSettings::default());
        let loaded = Loaded {
            state_rv: 5,
            objects: vec![Bytes::from_static(b"{\"metadata\":{}}")],
            ..Loaded::default()
        };
        assert!(w.restore(&loaded).is_err());
        assert_eq!(cache.rv(), 0);
        assert!(!cache.is_synced());
    }
}
