//! The watch cache of one resource: current objects (an immutable, cheaply cloned ordered map),
//! a bounded log of recent events with their encoded frames, and the registered watchers.
//!
//! One writer (the resource's reflector) applies upstream events; readers (LIST, the initial
//! events of a watch) take an O(1) snapshot; watchers either receive events from the dispatcher
//! through a bounded queue ("live") or, when they fell behind, read the shared log from their own
//! cursor ("catching up"). A slow watcher therefore costs its cursor, never memory in the
//! dispatcher and never time of the other watchers; it is closed only when the log no longer
//! holds its cursor or it lags by more than a byte bound.

pub mod bridge;
pub mod hub;
pub mod record;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use kube_wire::event::{EventType, encode_frame, frame_head, typed_prefix, unstructured_prefix};
use kube_wire::selector::Filter;
pub use record::{Cached, DecodeError, ObjectRecord};

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

    /// An object as LIST items carry it: the body for built-ins, with type meta otherwise.
    pub fn list_item(&self, c: &Cached) -> Bytes {
        if self.builtin {
            c.body.clone()
        } else {
            let mut v = Vec::with_capacity(self.type_prefix.len() + c.body.len());
            v.extend_from_slice(self.type_prefix.as_bytes());
            v.extend_from_slice(&c.body[1..]);
            Bytes::from(v)
        }
    }
}

/// Cache tuning (from the config file).
#[derive(Debug, Clone, Copy)]
pub struct CacheSettings {
    /// Events kept in the log.
    pub window_count: usize,
    /// Age after which events leave the log.
    pub window_age: Duration,
    /// Per-watcher queue bound before the watcher switches to reading the log.
    pub watcher_queue: usize,
    /// A watcher lagging by more than this many bytes of events is closed.
    pub max_lag_bytes: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            window_count: 102_400,
            window_age: Duration::from_secs(75),
            watcher_queue: 1024,
            max_lag_bytes: 64 << 20,
        }
    }
}

/// One change in the log.
#[derive(Debug)]
pub struct CacheEvent {
    /// Its resourceVersion.
    pub rv: u64,
    /// What happened.
    pub ty: EventType,
    /// New state (for DELETED, the last state stamped with `rv`).
    pub obj: Arc<Cached>,
    /// Previous state, if the cache had one.
    pub prev: Option<Arc<Cached>>,
    /// Sum of the sizes of all events up to and including this one (for lag in bytes).
    pub cum_bytes: u64,
    at: Instant,
    frames: [OnceLock<Bytes>; 3],
}

impl CacheEvent {
    /// The frame for this change as `emitted`, encoded once and shared by every watcher.
    pub fn frame(&self, info: &ResourceInfo, emitted: EventType) -> Bytes {
        self.frames[emitted as usize]
            .get_or_init(|| {
                let body = match (emitted, self.ty, &self.prev) {
                    (EventType::Deleted, EventType::Modified, Some(prev)) => {
                        record::restamp(&prev.body, prev.rec.rv, self.rv)
                    }
                    _ => self.obj.body.clone(),
                };
                encode_frame(emitted.as_str(), &info.type_prefix, &body)
            })
            .clone()
    }

    /// What a watcher with `filter` receives for this change, if anything.
    pub fn emitted_for(&self, filter: &Filter) -> Option<EventType> {
        let m = |c: &Cached| filter.matches(&c.rec.namespace, &c.rec.labels, |f| c.rec.field(f));
        let now = m(&self.obj);
        let before = self.prev.as_deref().is_some_and(m);
        self.ty.emitted(before, now)
    }
}

/// What a watcher's queue carries.
pub type Delivery = (Arc<CacheEvent>, EventType);

/// State shared between a watcher's task and the dispatcher.
#[derive(Debug)]
pub struct WatcherShared {
    /// The dispatcher stopped pushing: the watcher must read the log from its cursor.
    pub lagging: AtomicBool,
    /// resourceVersion of the last event the watcher processed.
    pub cursor: AtomicU64,
    /// Closes the watcher (slow, fell out of the window, relist fallback, shutdown).
    pub cancel: CancellationToken,
    /// Why it was closed.
    pub reason: Mutex<Option<&'static str>>,
}

impl WatcherShared {
    /// Closes the watcher with a reason (first reason wins).
    pub fn close(&self, reason: &'static str) {
        self.reason.lock().get_or_insert(reason);
        self.cancel.cancel();
    }
}

/// Why reading the log failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FellBehind;

/// Result of a log read.
#[derive(Debug)]
pub struct LogBatch {
    /// Events after the cursor (at most the requested number).
    pub events: Vec<Arc<CacheEvent>>,
    /// True when the batch reaches the head of the log.
    pub at_head: bool,
}

/// An immutable view of the objects at one resourceVersion.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The cache's resourceVersion when taken.
    pub rv: u64,
    /// Objects in key order (`ns/name` bytes).
    pub objects: imbl::OrdMap<Arc<str>, Arc<Cached>>,
    /// Per indexed field (`ResourceInfo::index_fields`): value → keys of the objects with it.
    pub by_field: Vec<FieldIndex>,
}

/// Keys of the objects by one indexed field's value, in key order.
pub type FieldIndex = imbl::HashMap<Arc<str>, imbl::OrdSet<Arc<str>>>;

impl Snapshot {
    /// The objects a request may match, in key order: the index bucket when the filter pins an
    /// indexed field (a kubelet's `spec.nodeName=<node>`), else the namespace's range. The
    /// caller still applies the filter.
    pub fn select<'a>(
        &'a self,
        info: &ResourceInfo,
        namespace: Option<&'a str>,
        filter: &Filter,
    ) -> Box<dyn Iterator<Item = &'a Arc<Cached>> + Send + 'a> {
        for (i, f) in info.index_fields.iter().enumerate() {
            let (Some(v), Some(index)) = (filter.fields.exact_value(f), self.by_field.get(i))
            else {
                continue;
            };
            let Some(keys) = index.get(v) else {
                return Box::new(std::iter::empty());
            };
            let prefix = namespace.map(|ns| format!("{ns}/"));
            return Box::new(
                keys.iter()
                    .filter(move |k| prefix.as_ref().is_none_or(|p| k.starts_with(p.as_str())))
                    .filter_map(|k| self.objects.get(k)),
            );
        }
        self.iter_namespace(namespace)
    }

    /// Objects in a namespace (or all), in key order.
    pub fn iter_namespace<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<Cached>> + Send + 'a> {
        match namespace {
            None => Box::new(self.objects.values()),
            Some(ns) => {
                let prefix = format!("{ns}/");
                let start: Arc<str> = Arc::from(prefix.as_str());
                Box::new(
                    self.objects
                        .range(start..)
                        .take_while(move |(k, _)| k.starts_with(&prefix))
                        .map(|(_, v)| v),
                )
            }
        }
    }
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
    /// Watcher filters evaluated while dispatching (the cost the index keeps small).
    pub selector_evaluations: AtomicU64,
    /// Events handed to live watchers.
    pub deliveries: AtomicU64,
}

struct State {
    synced: bool,
    rv: u64,
    objects: imbl::OrdMap<Arc<str>, Arc<Cached>>,
    by_field: Vec<FieldIndex>,
    log: VecDeque<Arc<CacheEvent>>,
    /// RV of the list the log starts after.
    list_rv: u64,
    evicted_since_list: bool,
    max_evicted: u64,
    cum_bytes: u64,
    hub: hub::Hub,
}

impl State {
    /// Sets (Some) or removes (None) the object at `key`, keeping the field indexes in step;
    /// returns the previous object.
    fn set(
        &mut self,
        info: &ResourceInfo,
        key: Arc<str>,
        obj: Option<Arc<Cached>>,
    ) -> Option<Arc<Cached>> {
        let prev = match &obj {
            Some(o) => self.objects.insert(key.clone(), o.clone()),
            None => self.objects.remove(&key),
        };
        for (i, f) in info.index_fields.iter().enumerate() {
            let old = prev.as_ref().and_then(|p| p.rec.field(f));
            let new = obj.as_ref().and_then(|o| o.rec.field(f));
            if old == new {
                continue;
            }
            let index = &mut self.by_field[i];
            if let Some(v) = old
                && let Some(keys) = index.get_mut(v)
            {
                keys.remove(&key);
                if keys.is_empty() {
                    index.remove(v);
                }
            }
            if let Some(v) = new {
                match index.get_mut(v) {
                    Some(keys) => {
                        keys.insert(key.clone());
                    }
                    None => {
                        index.insert(Arc::from(v), imbl::OrdSet::unit(key.clone()));
                    }
                }
            }
        }
        prev
    }

    /// Replaces every object (a full list).
    fn reset_objects(&mut self, info: &ResourceInfo, items: Vec<Cached>) {
        self.objects = imbl::OrdMap::new();
        self.by_field = vec![FieldIndex::new(); info.index_fields.len()];
        for c in items {
            self.set(info, Arc::from(c.rec.key()), Some(Arc::new(c)));
        }
    }
}

/// The cache of one resource. Shared behind an `Arc`.
pub struct ResourceCache {
    /// Type information.
    pub info: Arc<ResourceInfo>,
    settings: CacheSettings,
    state: RwLock<State>,
    rv_tx: watch::Sender<u64>,
    synced_tx: watch::Sender<bool>,
    /// Counters.
    pub counters: CacheCounters,
}

impl std::fmt::Debug for ResourceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceCache")
            .field("resource", &self.info.group_resource())
            .finish()
    }
}

/// Removes a watcher from the hub when its task ends.
pub struct Registration {
    cache: Arc<ResourceCache>,
    id: u64,
    /// The watcher's shared state.
    pub shared: Arc<WatcherShared>,
    /// Deliveries from the dispatcher while live.
    pub rx: mpsc::Receiver<Delivery>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cache.state.write().hub.remove(self.id);
    }
}

impl ResourceCache {
    /// An empty, not yet synced cache.
    pub fn new(info: ResourceInfo, settings: CacheSettings) -> Arc<ResourceCache> {
        let indexes = info.index_fields.len();
        Arc::new(ResourceCache {
            info: Arc::new(info),
            settings,
            state: RwLock::new(State {
                synced: false,
                rv: 0,
                objects: imbl::OrdMap::new(),
                by_field: vec![FieldIndex::new(); indexes],
                log: VecDeque::new(),
                list_rv: 0,
                evicted_since_list: false,
                max_evicted: 0,
                cum_bytes: 0,
                hub: hub::Hub::default(),
            }),
            rv_tx: watch::channel(0).0,
            synced_tx: watch::channel(false).0,
            counters: CacheCounters::default(),
        })
    }

    /// Settings in use.
    pub fn settings(&self) -> &CacheSettings {
        &self.settings
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
        self.state.read().objects.len()
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
        (st.log.len(), st.log.front().map(|e| e.at.elapsed()))
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
        Snapshot {
            rv: st.rv,
            objects: st.objects.clone(),
            by_field: st.by_field.clone(),
        }
    }

    /// kube's watch start rule: a watch from `rv` is served iff `rv >= oldest - 1`; else
    /// `Err(oldest - 1)` for the `too old resource version: rv (oldest-1)` message.
    pub fn check_watch_start(&self, rv: u64) -> Result<(), u64> {
        let st = self.state.read();
        let oldest_minus_one = if !st.evicted_since_list {
            st.list_rv
        } else {
            match st.log.front() {
                Some(e) => e.rv - 1,
                None => st.max_evicted,
            }
        };
        if rv < oldest_minus_one {
            Err(oldest_minus_one)
        } else {
            Ok(())
        }
    }

    /// Up to `max` events after `cursor`; `Err` when some of them already left the log.
    pub fn events_after(&self, cursor: u64, max: usize) -> Result<LogBatch, FellBehind> {
        let st = self.state.read();
        if st.max_evicted > cursor {
            return Err(FellBehind);
        }
        let start = st.log.partition_point(|e| e.rv <= cursor);
        let end = start.saturating_add(max).min(st.log.len());
        Ok(LogBatch {
            events: st.log.range(start..end).cloned().collect(),
            at_head: end == st.log.len(),
        })
    }

    /// Registers a watcher that starts reading the log after `cursor` ("catching up").
    pub fn register(self: &Arc<Self>, filter: Arc<Filter>, cursor: u64) -> Registration {
        let (tx, rx) = mpsc::channel(self.settings.watcher_queue.max(1));
        let shared = Arc::new(WatcherShared {
            lagging: AtomicBool::new(true),
            cursor: AtomicU64::new(cursor),
            cancel: CancellationToken::new(),
            reason: Mutex::new(None),
        });
        let mut st = self.state.write();
        let id = st.hub.insert(&self.info, filter, tx, shared.clone());
        Registration {
            cache: self.clone(),
            id,
            shared,
            rx,
        }
    }

    /// A catching-up watcher at `cursor` switches to live delivery if the log holds nothing
    /// after its cursor; atomic with the dispatcher, so no event falls between the two modes.
    pub fn try_go_live(&self, reg: &Registration, cursor: u64) -> bool {
        let st = self.state.write();
        if st.log.back().is_some_and(|e| e.rv > cursor) {
            return false;
        }
        reg.shared.cursor.store(cursor, Ordering::Relaxed);
        reg.shared.lagging.store(false, Ordering::Release);
        drop(st);
        true
    }

    /// The resourceVersion a live watcher may announce in a BOOKMARK: the cache's RV, provided
    /// (checked atomically with the dispatcher) that `caught_up()` says the watcher has sent
    /// everything it was given.
    pub fn bookmark_rv(&self, reg: &Registration, caught_up: impl FnOnce() -> bool) -> Option<u64> {
        let st = self.state.read();
        (!reg.shared.lagging.load(Ordering::Acquire) && caught_up()).then_some(st.rv)
    }

    /// Applies one upstream change (the reflector calls this). Changes at or below the cache's
    /// resourceVersion are ignored (a re-watch can repeat the last event).
    pub fn apply(&self, ty: EventType, obj: Cached) -> bool {
        let mut st = self.state.write();
        let rv = obj.rec.rv;
        if rv <= st.rv {
            return false;
        }
        let key: Arc<str> = Arc::from(obj.rec.key());
        let obj = Arc::new(obj);
        let prev = st.set(
            &self.info,
            key,
            (ty != EventType::Deleted).then(|| obj.clone()),
        );
        self.counters
            .events_received
            .fetch_add(1, Ordering::Relaxed);
        self.append(&mut st, ty, obj, prev);
        drop(st);
        self.rv_tx.send_replace(rv);
        true
    }

    /// Appends to the log and dispatches to live watchers. Caller holds the write lock.
    fn append(&self, st: &mut State, ty: EventType, obj: Arc<Cached>, prev: Option<Arc<Cached>>) {
        let rv = obj.rec.rv;
        st.cum_bytes += obj.body.len() as u64 + 48;
        let ev = Arc::new(CacheEvent {
            rv,
            ty,
            obj,
            prev,
            cum_bytes: st.cum_bytes,
            at: Instant::now(),
            frames: Default::default(),
        });
        st.rv = rv;
        st.log.push_back(ev.clone());
        self.evict(st);
        let mut gone = Vec::new();
        let (mut evaluated, mut delivered) = (0u64, 0u64);
        for (id, w) in st.hub.candidates(&self.info, &ev.obj, ev.prev.as_deref()) {
            if w.shared.lagging.load(Ordering::Acquire) {
                continue;
            }
            evaluated += 1;
            let Some(emitted) = ev.emitted_for(&w.filter) else {
                continue;
            };
            match w.tx.try_send((ev.clone(), emitted)) {
                Ok(()) => delivered += 1,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    w.shared.lagging.store(true, Ordering::Release)
                }
                Err(mpsc::error::TrySendError::Closed(_)) => gone.push(id),
            }
        }
        for id in gone {
            st.hub.remove(id);
        }
        self.counters
            .selector_evaluations
            .fetch_add(evaluated, Ordering::Relaxed);
        self.counters
            .deliveries
            .fetch_add(delivered, Ordering::Relaxed);
    }

    fn evict(&self, st: &mut State) {
        let cutoff = Instant::now().checked_sub(self.settings.window_age);
        while st.log.len() > self.settings.window_count
            || st
                .log
                .front()
                .is_some_and(|e| cutoff.is_some_and(|c| e.at < c))
        {
            let Some(e) = st.log.pop_front() else { break };
            st.max_evicted = st.max_evicted.max(e.rv);
            st.evicted_since_list = true;
        }
    }

    /// An upstream BOOKMARK: the cache's resourceVersion advances without an event.
    pub fn advance(&self, rv: u64) {
        let mut st = self.state.write();
        if rv > st.rv {
            st.rv = rv;
            drop(st);
            self.rv_tx.send_replace(rv);
        }
    }

    /// Periodic housekeeping: age-based eviction, and closing watchers that fell out of the
    /// log or lag by more than the byte bound. Returns how many were closed.
    pub fn reap(&self) -> usize {
        let mut st = self.state.write();
        self.evict(&mut st);
        let head_bytes = st.cum_bytes;
        let mut closed = 0;
        for w in st.hub.all() {
            if !w.shared.lagging.load(Ordering::Acquire) || w.shared.cancel.is_cancelled() {
                continue;
            }
            let cursor = w.shared.cursor.load(Ordering::Relaxed);
            let reason = if st.max_evicted > cursor {
                Some("fell out of the event window")
            } else {
                let i = st.log.partition_point(|e| e.rv <= cursor);
                let done = if i == 0 {
                    head_bytes
                        - st.log
                            .iter()
                            .map(|e| e.obj.body.len() as u64 + 48)
                            .sum::<u64>()
                } else {
                    st.log[i - 1].cum_bytes
                };
                (head_bytes.saturating_sub(done) > self.settings.max_lag_bytes)
                    .then_some("lagging beyond the byte bound")
            };
            if let Some(r) = reason {
                w.shared.close(r);
                closed += 1;
            }
        }
        self.counters
            .slow_watchers_closed
            .fetch_add(closed as u64, Ordering::Relaxed);
        closed
    }

    /// Installs a full list from upstream at `list_rv`. The first time, this is the initial sync.
    /// Afterwards (a relist after 410 or an outage) the difference to the cached state is
    /// delivered to watchers as bridge events (see [`bridge`]); where that cannot be done safely
    /// every watcher is closed instead, as kube-apiserver does.
    pub fn replace(&self, items: Vec<Cached>, list_rv: u64) -> bridge::Outcome {
        let mut st = self.state.write();
        if !st.synced {
            st.reset_objects(&self.info, items);
            st.rv = list_rv;
            st.list_rv = list_rv;
            st.synced = true;
            drop(st);
            self.rv_tx.send_replace(list_rv);
            self.synced_tx.send_replace(true);
            return bridge::Outcome::Initial;
        }
        let plan = bridge::plan(&st.objects, st.rv, &items, list_rv);
        let outcome = match plan {
            Ok(events) => {
                let n = events.len();
                for (ty, obj, prev) in events {
                    let key: Arc<str> = Arc::from(obj.rec.key());
                    st.set(
                        &self.info,
                        key,
                        (ty != EventType::Deleted).then(|| obj.clone()),
                    );
                    self.append(&mut st, ty, obj, prev);
                }
                st.rv = st.rv.max(list_rv);
                self.counters
                    .relists_bridged
                    .fetch_add(1, Ordering::Relaxed);
                bridge::Outcome::Bridged { events: n }
            }
            Err(why) => {
                st.reset_objects(&self.info, items);
                st.rv = list_rv;
                st.list_rv = list_rv;
                st.log.clear();
                st.evicted_since_list = false;
                st.max_evicted = list_rv;
                for w in st.hub.all() {
                    w.shared.close("upstream relist could not be bridged");
                }
                st.hub.clear();
                self.counters.relists_reset.fetch_add(1, Ordering::Relaxed);
                bridge::Outcome::Reset { why }
            }
        };
        let rv = st.rv;
        drop(st);
        self.rv_tx.send_replace(rv);
        outcome
    }

    /// Closes every watcher (shutdown).
    pub fn close_all(&self, reason: &'static str) {
        let mut st = self.state.write();
        for w in st.hub.all() {
            w.shared.close(reason);
        }
        st.hub.clear();
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

    fn names(cache: &ResourceCache, ns: Option<&str>, fields: &str) -> Vec<String> {
        let snap = cache.snapshot();
        let f = Filter::parse("", "Pod", true, &[], ns.map(str::to_string), "", fields).unwrap();
        snap.select(&cache.info, ns, &f)
            .filter(|o| f.matches(&o.rec.namespace, &o.rec.labels, |x| o.rec.field(x)))
            .map(|o| o.rec.key())
            .collect()
    }

    #[test]
    fn field_index_follows_moves_and_deletes_and_keeps_key_order() {
        let cache = ResourceCache::new(pods(), CacheSettings::default());
        cache.replace(
            vec![
                pod("b", "p1", "n1", 2),
                pod("a", "p2", "n1", 3),
                pod("a", "p3", "n2", 4),
            ],
            4,
        );
        assert_eq!(names(&cache, None, "spec.nodeName=n1"), ["a/p2", "b/p1"]);
        assert_eq!(names(&cache, Some("a"), "spec.nodeName=n1"), ["a/p2"]);
        cache.apply(EventType::Modified, pod("a", "p2", "n2", 5));
        assert_eq!(names(&cache, None, "spec.nodeName=n1"), ["b/p1"]);
        assert_eq!(names(&cache, None, "spec.nodeName=n2"), ["a/p2", "a/p3"]);
        cache.apply(EventType::Deleted, pod("b", "p1", "n1", 6));
        assert!(names(&cache, None, "spec.nodeName=n1").is_empty());
        assert!(
            cache.snapshot().by_field[0].get("n1").is_none(),
            "empty buckets are dropped"
        );
        assert_eq!(names(&cache, None, ""), ["a/p2", "a/p3"]);
        // A relist that moves everything is reflected too.
        cache.replace(vec![pod("a", "p2", "n3", 7), pod("a", "p3", "n3", 8)], 9);
        assert_eq!(names(&cache, None, "spec.nodeName=n3"), ["a/p2", "a/p3"]);
        assert!(names(&cache, None, "spec.nodeName=n2").is_empty());
    }
}
