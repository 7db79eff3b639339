//! The simulator's MVCC store, modelled on etcd as kube-apiserver uses it.
//!
//! * One global revision, bumped by every write; an object's `metadata.resourceVersion` is the
//!   revision of its last write, a list's is the revision it was read at.
//! * Each key keeps its versions (with tombstones) back to the resource's compaction point, so a
//!   list at any retained revision, and a `continue` page pinned to one, is exact.
//! * Each resource keeps a log of its events; a watch replays the log from a revision. Evicting
//!   an event from the log is this resource's compaction: older revisions answer 410 afterwards.
//!
//! Objects are kept as their JSON body *without* `kind`/`apiVersion` (what a built-in LIST item
//! carries); watch frames and GET answers prepend the type's constant prefix. Labels and
//! selectable fields are extracted once per write so that selectors never parse JSON. A built-in
//! object's JSON is the one kube-apiserver would write (JSON → protobuf → JSON at write), and its
//! protobuf message is kept with it: encoded at that write, or at the first protobuf read of an
//! object stored as already canonical (the fleet, see [`Store::load_canonical`]).
//!
//! The store knows no kind's rules: a write's closure decides (see `ops`), and the store only
//! orders, versions and logs. Its lock is a `parking_lot` lock held only inside synchronous calls,
//! never across an `.await`; watchers are woken through `tokio::sync::watch` after it is released.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use super::kinds::{CustomChange, Registry, ResourceType};
use super::util::to_go_json;
use kube_wire::status::Status;

/// One stored version of an object.
#[derive(Debug)]
pub struct StoredObject {
    /// JSON of the object without `kind`/`apiVersion`, starting with `{"metadata":`.
    pub body: Bytes,
    /// The revision of this version's write.
    pub rv: u64,
    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.labels`, sorted by key.
    pub labels: Vec<(String, String)>,
    /// Selectable field values (metadata.name, metadata.namespace, per-kind fields).
    pub fields: Vec<(String, String)>,
    /// The kind's protobuf message of this version (built-in kinds the transcoder knows),
    /// encoded once, as kube-apiserver's etcd holds it: when it is written, or at its first
    /// protobuf read (see [`protobuf`](Self::protobuf)).
    protobuf: OnceLock<Option<Bytes>>,
}

impl StoredObject {
    /// Builds a stored version from a full object at revision `rv`: drops `kind`/`apiVersion`,
    /// sets `metadata.resourceVersion`, orders `metadata` as Go's ObjectMeta does, encodes once.
    pub fn from_value(rt: &ResourceType, value: Value, rv: u64) -> StoredObject {
        Self::build(rt, value, Some(rv), false)
    }

    /// [`from_value`](Self::from_value) of an object known to be in its canonical form already
    /// (what JSON → protobuf → JSON gives): its JSON is kept as it is, and its protobuf encoded
    /// at its first protobuf read.
    fn from_canonical_value(rt: &ResourceType, value: Value, rv: u64) -> StoredObject {
        Self::build(rt, value, Some(rv), true)
    }

    /// An object that was never written (the answer to a dry-run create): as
    /// [`from_value`](Self::from_value), but without `metadata.resourceVersion` (`rv` 0), as
    /// kube-apiserver answers it.
    pub fn unwritten(rt: &ResourceType, value: Value) -> StoredObject {
        Self::build(rt, value, None, false)
    }

    fn build(
        rt: &ResourceType,
        mut value: Value,
        rv: Option<u64>,
        canonical: bool,
    ) -> StoredObject {
        let obj = value
            .as_object_mut()
            .expect("stored objects are JSON objects");
        obj.shift_remove("kind");
        obj.shift_remove("apiVersion");
        let mut meta = match obj.shift_remove("metadata") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        match rv {
            Some(rv) => meta.insert("resourceVersion".into(), Value::String(rv.to_string())),
            None => meta.shift_remove("resourceVersion"),
        };
        let meta = order_metadata(meta);
        let mut ordered = Map::with_capacity(obj.len() + 1);
        ordered.insert("metadata".into(), Value::Object(meta));
        for (k, v) in std::mem::take(obj) {
            ordered.insert(k, v);
        }
        let value = Value::Object(ordered);
        let json = to_go_json(&value);
        let protobuf = OnceLock::new();
        let body = match crate::protobuf::message(rt) {
            Some(msg) if !canonical => {
                // A built-in object is what kube-apiserver decodes into its Go type and writes
                // back: fields in Go order, unknown ones dropped, values canonical (JSON →
                // protobuf → JSON). One outside its kind's schema keeps its JSON, and has no
                // protobuf.
                let encoded = kube_wire::proto::json_to_proto(msg, &json)
                    .ok()
                    .and_then(|pb| {
                        let canonical = kube_wire::proto::proto_to_json(msg, &pb, None).ok()?;
                        Some((exact(pb), exact(canonical)))
                    });
                let (pb, body) = match encoded {
                    Some((pb, canonical)) => (Some(pb), canonical),
                    None => (None, exact(json)),
                };
                let _ = protobuf.set(pb);
                body
            }
            _ => exact(json),
        };
        let mut stored = Self::with_record(rt, body, rv.unwrap_or(0), &value);
        stored.protobuf = protobuf;
        stored
    }

    /// The kind's protobuf message of this version: `None` for a custom resource, or an object
    /// outside its kind's schema (its JSON does not transcode).
    pub fn protobuf(&self, rt: &ResourceType) -> Option<&Bytes> {
        self.protobuf
            .get_or_init(|| {
                let msg = crate::protobuf::message(rt)?;
                kube_wire::proto::json_to_proto(msg, &self.body)
                    .ok()
                    .map(exact)
            })
            .as_ref()
    }

    fn with_record(rt: &ResourceType, body: Bytes, rv: u64, value: &Value) -> StoredObject {
        let meta = &value["metadata"];
        let s = |k: &str| meta[k].as_str().unwrap_or_default().to_string();
        let mut labels: Vec<(String, String)> = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        labels.sort();
        let fields = kube_wire::selector::selectable::selectable_fields(
            &rt.group,
            &rt.kind,
            rt.namespaced,
            &rt.selectable_fields,
            value,
        );
        StoredObject {
            body,
            rv,
            namespace: s("namespace"),
            name: s("name"),
            uid: s("uid"),
            labels,
            fields,
            protobuf: OnceLock::new(),
        }
    }

    /// The full object (with `kind`/`apiVersion` first) as a JSON value.
    pub fn to_value(&self, rt: &ResourceType) -> Value {
        kube_wire::table::object_value(&rt.kind, &rt.api_version(), &self.body)
    }

    /// The full object's bytes (`kind`/`apiVersion` prepended), as GET and watch events carry it.
    pub fn full_bytes(&self, rt: &ResourceType) -> Bytes {
        let prefix = rt.type_meta_prefix();
        let mut b = BytesMut::with_capacity(prefix.len() + self.body.len());
        b.put_slice(prefix.as_bytes());
        b.put_slice(&self.body[1..]);
        b.freeze()
    }

    /// This version re-stamped with another resourceVersion (a DELETED event carries the last
    /// state with the deletion's revision).
    pub fn restamped(&self, rt: &ResourceType, rv: u64) -> StoredObject {
        let value: Value = serde_json::from_slice(&self.body).expect("valid body");
        StoredObject::from_value(rt, value, rv)
    }

    /// This version with its selectable fields extracted again for `rt` (whose selectable
    /// fields changed).
    fn reindexed(&self, rt: &ResourceType) -> StoredObject {
        let value: Value = serde_json::from_slice(&self.body).expect("valid body");
        let mut stored = Self::with_record(rt, self.body.clone(), self.rv, &value);
        stored.protobuf = self.protobuf.clone();
        stored
    }

    /// Selectable field value by name.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Bytes holding exactly `v` (a vector's spare capacity would stay allocated with them).
fn exact(v: Vec<u8>) -> Bytes {
    Bytes::from(v.into_boxed_slice())
}

/// Orders ObjectMeta keys as Go's struct does; unknown keys keep their order after.
fn order_metadata(mut meta: Map<String, Value>) -> Map<String, Value> {
    const ORDER: &[&str] = &[
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ];
    let mut out = Map::with_capacity(meta.len());
    for k in ORDER {
        if let Some(v) = meta.shift_remove(*k) {
            out.insert((*k).to_string(), v);
        }
    }
    out.extend(meta);
    out
}

pub use kube_wire::event::EventType;

/// One change in a resource's event log.
#[derive(Debug)]
pub struct Event {
    /// Revision of the change.
    pub rev: u64,
    /// What happened.
    pub ty: EventType,
    /// Storage key (`ns/name` or `name`).
    pub key: String,
    /// New state; for a deletion, the last state stamped with `rev`.
    pub obj: Arc<StoredObject>,
    /// State before the change, if any.
    pub prev: Option<Arc<StoredObject>>,
    /// When it happened (for age-based compaction).
    pub at: Instant,
    /// Encoded frames per emitted type, built on first use and shared by every watcher.
    frames: [OnceLock<Bytes>; 3],
}

impl Event {
    /// The chunked-JSON frame `{"type":…,"object":…}\n` for this change as `emitted` (which
    /// differs from `ty` when a selector move turns MODIFIED into ADDED or DELETED).
    pub fn frame(&self, rt: &ResourceType, emitted: EventType) -> Bytes {
        let slot = &self.frames[emitted as usize];
        slot.get_or_init(|| {
            let obj = match (emitted, self.ty, &self.prev) {
                (EventType::Deleted, EventType::Modified, Some(prev)) => {
                    Arc::new(prev.restamped(rt, self.rev))
                }
                _ => self.obj.clone(),
            };
            encode_frame(rt, emitted.as_str(), &obj.body)
        })
        .clone()
    }
}

/// The chunked-JSON frame of one event for a stored body (see [`kube_wire::event::encode_frame`]).
pub fn encode_frame(rt: &ResourceType, ty: &str, body: &[u8]) -> Bytes {
    kube_wire::event::encode_frame(ty, &rt.type_meta_prefix(), body)
}

#[derive(Debug)]
struct Version {
    rev: u64,
    obj: Option<Arc<StoredObject>>,
}

#[derive(Debug, Default)]
struct ResState {
    objects: BTreeMap<String, Vec<Version>>,
    live: usize,
    events: VecDeque<Arc<Event>>,
    /// Revisions at or below this are compacted for this resource.
    compacted: u64,
    /// Highest revision of an event evicted from the log (0 = none).
    max_evicted: u64,
    /// Its CRD is being deleted: no object may be created.
    terminating: bool,
    /// No longer served: nothing may be written, watches end.
    retired: bool,
}

/// The state of a slot no write reached yet.
static EMPTY: ResState = ResState {
    objects: BTreeMap::new(),
    live: 0,
    events: VecDeque::new(),
    compacted: 0,
    max_evicted: 0,
    terminating: false,
    retired: false,
};

impl ResState {
    fn current(&self, key: &str) -> Option<&Arc<StoredObject>> {
        self.objects.get(key)?.last()?.obj.as_ref()
    }

    /// Whether `action` may be applied: nothing is written to a type no longer served (kube's
    /// 404 for its path) and nothing created while its CRD is being deleted (kube's 405).
    fn admit(&self, rt: &ResourceType, create: bool, action: &Action) -> Result<(), Status> {
        if self.retired {
            return Err(Status::path_not_found());
        }
        if self.terminating && create && matches!(action, Action::Put(_)) {
            return Err(Status::new(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
            )
            .with_details(kube_wire::status::StatusDetails {
                group: rt.group.clone(),
                kind: rt.resource.clone(),
                ..Default::default()
            }));
        }
        Ok(())
    }

    /// Drops versions of `key` that no revision ≥ `self.compacted` can see.
    fn prune(&mut self, key: &str) {
        let Some(versions) = self.objects.get_mut(key) else {
            return;
        };
        let keep_from = versions
            .iter()
            .rposition(|v| v.rev <= self.compacted)
            .unwrap_or(0);
        versions.drain(..keep_from);
        if versions.len() == 1 && versions[0].obj.is_none() && versions[0].rev <= self.compacted {
            self.objects.remove(key);
        }
    }

    fn evict_front(&mut self) {
        if let Some(ev) = self.events.pop_front() {
            self.max_evicted = self.max_evicted.max(ev.rev);
            self.compacted = self.compacted.max(ev.rev);
            self.prune(&ev.key);
        }
    }

    /// The kube-apiserver cacher's "oldest - 1": watches from below it get 410. While no event
    /// was evicted, that is where the log begins (the kind's bulk load, a compaction, or 0),
    /// as kube's ring answers from its list's resourceVersion until it first wraps: a watch
    /// from a LIST taken before the kind's next event, while other kinds moved the revision,
    /// is not too old. Before, the first event's revision stood for it, and such a watch got
    /// 410 once that event came.
    fn oldest_minus_one(&self, revision: u64) -> u64 {
        if self.max_evicted == 0 {
            return self.compacted;
        }
        match self.events.front() {
            Some(ev) => ev.rev - 1,
            None => self.compacted.max(revision.min(self.compacted)),
        }
    }
}

#[derive(Debug)]
struct Inner {
    revision: u64,
    /// Per registry slot; slots registered after the last write to them are absent.
    res: Vec<ResState>,
}

impl Inner {
    fn res(&self, i: usize) -> &ResState {
        self.res.get(i).unwrap_or(&EMPTY)
    }

    fn res_mut(&mut self, i: usize) -> &mut ResState {
        if self.res.len() <= i {
            self.res.resize_with(i + 1, ResState::default);
        }
        &mut self.res[i]
    }
}

/// How much history the store keeps per resource (its compaction policy).
#[derive(Debug, Clone, Copy)]
pub struct HistoryConfig {
    /// Events older than this are evicted, except a resource's newest
    /// [`HistoryConfig::KUBE_RING_FLOOR`]: kube's watch-cache ring never holds fewer, however
    /// old, so a watch on a quiet kind replays from minutes back.
    pub window: Duration,
    /// At most this many events per resource.
    pub max_events: usize,
}

impl HistoryConfig {
    /// kube's watch-cache ring's lower bound (`defaultLowerBoundCapacity`).
    pub const KUBE_RING_FLOOR: usize = 100;
}

impl Default for HistoryConfig {
    /// kube-apiserver's watch cache: 75 s, at most 102 400 events.
    fn default() -> Self {
        HistoryConfig {
            window: Duration::from_secs(75),
            max_events: 102_400,
        }
    }
}

/// What a write closure decides.
#[derive(Debug)]
pub enum Action {
    /// Store this full object as the key's new version.
    Put(Value),
    /// Delete the key.
    Delete,
    /// Change nothing (a no-op update); the current object is returned.
    Keep,
}

/// The result of a write.
#[derive(Debug, Clone)]
pub struct WriteOutcome {
    /// The new state (for a deletion, the last state stamped with the deletion revision; for
    /// `Keep`, the unchanged current state).
    pub object: Arc<StoredObject>,
    /// The event recorded, if anything changed.
    pub event: Option<Arc<Event>>,
}

/// Read-only view given to a write closure, for cross-resource checks (e.g. the namespace).
pub struct WriteView<'a> {
    inner: &'a Inner,
    registry: &'a Registry,
    /// The revision the write will get.
    pub next_revision: u64,
}

impl WriteView<'_> {
    /// Current state of another object.
    pub fn get(&self, rt: &ResourceType, key: &str) -> Option<Arc<StoredObject>> {
        self.inner.res(rt.index).current(key).cloned()
    }

    /// The namespace object named `ns`, if it exists.
    pub fn namespace(&self, ns: &str) -> Option<Arc<StoredObject>> {
        self.get(&self.registry.core("namespaces"), ns)
    }
}

/// One page (or the whole) of a list.
#[derive(Debug)]
pub struct ListPage {
    /// The revision the list was read at.
    pub rev: u64,
    /// Matching items in key order.
    pub items: Vec<Arc<StoredObject>>,
    /// Key of the last item returned when more items remain.
    pub last_key: Option<String>,
    /// Items left after this page (all of them, matching or not), when counted.
    pub remaining: Option<u64>,
}

/// Why a read at a revision failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The revision is older than the resource's compaction point.
    #[error("revision {requested} is compacted (compacted at {compacted})")]
    Compacted {
        /// Requested revision.
        requested: u64,
        /// Compaction point.
        compacted: u64,
    },
    /// The revision is newer than the store.
    #[error("revision {requested} is in the future (current {current})")]
    Future {
        /// Requested revision.
        requested: u64,
        /// Current revision.
        current: u64,
    },
}

/// Events after a revision.
#[derive(Debug)]
pub struct EventBatch {
    /// Events with revision greater than the cursor, in order (at most the requested count).
    pub events: Vec<Arc<Event>>,
    /// When `events` holds everything: the global revision the log was read at, so a watcher
    /// that sent them all may announce it in a bookmark.
    pub caught_up_to: Option<u64>,
}

/// The MVCC store. Cheap to share behind an `Arc`.
pub struct Store {
    registry: Arc<Registry>,
    history: HistoryConfig,
    inner: RwLock<Inner>,
    /// Per registry slot: the last revision that touched it (wakes that resource's watchers);
    /// `None` once the type is no longer served (its watchers' streams end).
    changed: Mutex<Vec<Option<watch::Sender<u64>>>>,
    /// The global revision (wakes readers waiting for a future revision).
    revision_tx: watch::Sender<u64>,
    /// Objects written are canonical already: stored as they are ([`Store::load_canonical`]).
    canonical_writes: AtomicBool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("revision", &self.revision())
            .finish()
    }
}

/// Storage key of an object.
pub fn key_of(rt: &ResourceType, namespace: &str, name: &str) -> String {
    if rt.namespaced {
        format!("{namespace}/{name}")
    } else {
        name.to_string()
    }
}

impl Store {
    /// An empty store at revision 1 (etcd starts at 1).
    pub fn new(registry: Arc<Registry>, history: HistoryConfig) -> Store {
        let n = registry.slot_count();
        Store {
            inner: RwLock::new(Inner {
                revision: 1,
                res: (0..n).map(|_| ResState::default()).collect(),
            }),
            changed: Mutex::new((0..n).map(|_| Some(watch::channel(1).0)).collect()),
            revision_tx: watch::channel(1).0,
            registry,
            history,
            canonical_writes: AtomicBool::new(false),
        }
    }

    /// Runs `load`, whose writes put objects already in their canonical form (the JSON
    /// kube-apiserver writes: what JSON → protobuf → JSON gives): they are stored without being
    /// transcoded, and each one's protobuf is encoded at its first protobuf read. For the
    /// simulator's start, before it serves (the fleet's generated objects, which a test checks
    /// are canonical): any other write meanwhile would be trusted as well.
    pub fn load_canonical<R>(&self, load: impl FnOnce() -> R) -> R {
        self.canonical_writes.store(true, Ordering::Relaxed);
        let r = load();
        self.canonical_writes.store(false, Ordering::Relaxed);
        r
    }

    /// The type registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Current global revision.
    pub fn revision(&self) -> u64 {
        self.inner.read().revision
    }

    /// A receiver that changes whenever `rt` is written, and is closed once `rt` is no longer
    /// served.
    pub fn subscribe(&self, rt: &ResourceType) -> watch::Receiver<u64> {
        let retired = self.inner.read().res(rt.index).retired;
        let mut changed = self.changed.lock();
        match Self::sender(&mut changed, rt.index, retired) {
            Some(tx) => tx.subscribe(),
            // A closed channel: its receiver's `changed()` fails at once.
            None => watch::channel(0).1,
        }
    }

    /// The sender of slot `i`, created for a slot registered since the store was made.
    fn sender(
        changed: &mut Vec<Option<watch::Sender<u64>>>,
        i: usize,
        retired: bool,
    ) -> Option<&watch::Sender<u64>> {
        if changed.len() <= i {
            changed.resize_with(i + 1, || None);
        }
        if changed[i].is_none() && !retired {
            changed[i] = Some(watch::channel(1).0);
        }
        changed[i].as_ref()
    }

    /// Follows what [`Registry::set_custom`] changed: a version whose description changed has
    /// its stored objects indexed again (its selectable fields may differ), a version no longer
    /// served is retired (nothing may be written to it, its watches end once they sent what
    /// was logged).
    pub fn custom_changed(&self, change: &CustomChange) {
        {
            let mut inner = self.inner.write();
            for rt in &change.changed {
                let res = inner.res_mut(rt.index);
                for versions in res.objects.values_mut() {
                    for v in versions.iter_mut() {
                        if let Some(o) = &mut v.obj {
                            *o = Arc::new(o.reindexed(rt));
                        }
                    }
                }
                for ev in res.events.iter_mut() {
                    *ev = Arc::new(Event {
                        rev: ev.rev,
                        ty: ev.ty,
                        key: ev.key.clone(),
                        obj: Arc::new(ev.obj.reindexed(rt)),
                        prev: ev.prev.as_ref().map(|p| Arc::new(p.reindexed(rt))),
                        at: ev.at,
                        frames: Default::default(),
                    });
                }
            }
            for rt in &change.removed {
                inner.res_mut(rt.index).retired = true;
            }
        }
        let mut changed = self.changed.lock();
        for rt in &change.removed {
            if let Some(tx) = changed.get_mut(rt.index) {
                *tx = None;
            }
        }
    }

    /// Marks `rt` as terminating (its CRD is being deleted): creates are refused with kube's
    /// 405 from now on.
    pub fn set_terminating(&self, rt: &ResourceType) {
        self.inner.write().res_mut(rt.index).terminating = true;
    }

    /// A receiver of the global revision.
    pub fn subscribe_revision(&self) -> watch::Receiver<u64> {
        self.revision_tx.subscribe()
    }

    /// Waits until the global revision is at least `rev`, up to `timeout`; returns whether it got there.
    pub async fn wait_for_revision(&self, rev: u64, timeout: Duration) -> bool {
        let mut rx = self.subscribe_revision();
        let wait = rx.wait_for(|r| *r >= rev);
        matches!(tokio::time::timeout(timeout, wait).await, Ok(Ok(_)))
    }

    /// Current state of one object.
    pub fn get(&self, rt: &ResourceType, key: &str) -> Option<Arc<StoredObject>> {
        self.inner.read().res(rt.index).current(key).cloned()
    }

    /// Number of live objects of a type.
    pub fn count(&self, rt: &ResourceType) -> usize {
        self.inner.read().res(rt.index).live
    }

    /// The compaction point of a resource (revisions at or below are gone).
    pub fn compacted(&self, rt: &ResourceType) -> u64 {
        self.inner.read().res(rt.index).compacted
    }

    /// Atomically reads the current version of `key`, lets `decide` choose what to do, and
    /// applies it at a new revision. Serialises with every other write, like an etcd txn.
    pub fn write(
        &self,
        rt: &ResourceType,
        key: &str,
        decide: impl FnOnce(&WriteView<'_>, Option<&Arc<StoredObject>>) -> Result<Action, Status>,
    ) -> Result<WriteOutcome, Status> {
        let mut inner = self.inner.write();
        let next = inner.revision + 1;
        let action = {
            let view = WriteView {
                inner: &inner,
                registry: &self.registry,
                next_revision: next,
            };
            let current = inner.res(rt.index).current(key);
            decide(&view, current)?
        };
        let res = inner.res_mut(rt.index);
        let prev = res.current(key).cloned();
        res.admit(rt, prev.is_none(), &action)?;
        let (ty, obj, stored) = match action {
            Action::Keep => {
                let object =
                    prev.ok_or_else(|| Status::internal("no-op write of a missing object"))?;
                return Ok(WriteOutcome {
                    object,
                    event: None,
                });
            }
            Action::Put(value) => {
                let obj = Arc::new(if self.canonical_writes.load(Ordering::Relaxed) {
                    StoredObject::from_canonical_value(rt, value, next)
                } else {
                    StoredObject::from_value(rt, value, next)
                });
                let ty = if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (ty, obj.clone(), Some(obj))
            }
            Action::Delete => {
                let Some(p) = &prev else {
                    return Err(Status::internal("delete of a missing object"));
                };
                (EventType::Deleted, Arc::new(p.restamped(rt, next)), None)
            }
        };
        match (&prev, &stored) {
            (None, Some(_)) => res.live += 1,
            (Some(_), None) => res.live -= 1,
            _ => {}
        }
        res.objects
            .entry(key.to_string())
            .or_default()
            .push(Version {
                rev: next,
                obj: stored,
            });
        let event = Arc::new(Event {
            rev: next,
            ty,
            key: key.to_string(),
            obj: obj.clone(),
            prev,
            at: Instant::now(),
            frames: Default::default(),
        });
        res.events.push_back(event.clone());
        while res.events.len() > self.history.max_events {
            res.evict_front();
        }
        inner.revision = next;
        drop(inner);
        if let Some(tx) = Self::sender(&mut self.changed.lock(), rt.index, false) {
            tx.send_replace(next);
        }
        self.revision_tx.send_replace(next);
        Ok(WriteOutcome {
            object: obj,
            event: Some(event),
        })
    }

    /// Loads `objects` (full objects, already prepared as a create would store them) the way a
    /// restored etcd holds them: each at its own revision, in order, with no event logged and
    /// no watcher woken; the resource is compacted at the last of them, so a watch or an exact
    /// list from an older revision gets 410, as from an apiserver started on restored data.
    /// For loading at start-up: the write lock is held while the objects are encoded (on every
    /// core). Fails, having written nothing, if one of their keys exists.
    pub fn restore(&self, rt: &ResourceType, objects: Vec<Value>) -> Result<(), Status> {
        if objects.is_empty() {
            return Ok(());
        }
        let mut inner = self.inner.write();
        let first = inner.revision + 1;
        let keyed: Vec<(String, u64, Value)> = objects
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let meta = &v["metadata"];
                let key = key_of(
                    rt,
                    meta["namespace"].as_str().unwrap_or_default(),
                    meta["name"].as_str().unwrap_or_default(),
                );
                (key, first + i as u64, v)
            })
            .collect();
        let res = inner.res_mut(rt.index);
        if let Some((key, ..)) = keyed.iter().find(|(k, ..)| res.current(k).is_some()) {
            let name = key.rsplit('/').next().unwrap_or(key);
            return Err(Status::already_exists(&rt.group, &rt.resource, name));
        }
        let stored = crate::util::par_map(keyed, |(key, rev, value)| {
            (key, rev, Arc::new(StoredObject::from_value(rt, value, rev)))
        });
        let last = first + stored.len() as u64 - 1;
        for (key, rev, obj) in stored {
            let versions = res.objects.entry(key).or_default();
            if versions.last().is_none_or(|v| v.obj.is_none()) {
                res.live += 1;
            }
            versions.push(Version {
                rev,
                obj: Some(obj),
            });
        }
        res.compacted = res.compacted.max(last);
        inner.revision = last;
        drop(inner);
        if let Some(tx) = Self::sender(&mut self.changed.lock(), rt.index, false) {
            tx.send_replace(last);
        }
        self.revision_tx.send_replace(last);
        Ok(())
    }

    /// What [`write`](Self::write) would do, decided the same way on the current state, but
    /// nothing is written: kube-apiserver's `dryRun=All` (its `DryRunnableStorage`). No revision
    /// is consumed, no event is logged and no watcher is woken. The outcome's object is the one
    /// kube answers: a create's object without a resourceVersion, an update's with the current
    /// one (the revision it was decided on), a deletion's last state as it is. Its event, when
    /// there would be one, says what would have happened (type and previous state) and is
    /// recorded nowhere.
    pub fn dry_write(
        &self,
        rt: &ResourceType,
        key: &str,
        decide: impl FnOnce(&WriteView<'_>, Option<&Arc<StoredObject>>) -> Result<Action, Status>,
    ) -> Result<WriteOutcome, Status> {
        let inner = self.inner.read();
        let view = WriteView {
            inner: &inner,
            registry: &self.registry,
            next_revision: inner.revision + 1,
        };
        let prev = inner.res(rt.index).current(key).cloned();
        let action = decide(&view, prev.as_ref())?;
        inner.res(rt.index).admit(rt, prev.is_none(), &action)?;
        let (ty, obj) = match (action, &prev) {
            (Action::Keep, Some(p)) => {
                return Ok(WriteOutcome {
                    object: p.clone(),
                    event: None,
                });
            }
            (Action::Keep, None) => {
                return Err(Status::internal("no-op write of a missing object"));
            }
            (Action::Put(value), None) => (
                EventType::Added,
                Arc::new(StoredObject::unwritten(rt, value)),
            ),
            (Action::Put(value), Some(p)) => (
                EventType::Modified,
                Arc::new(StoredObject::from_value(rt, value, p.rv)),
            ),
            (Action::Delete, Some(p)) => (EventType::Deleted, p.clone()),
            (Action::Delete, None) => return Err(Status::internal("delete of a missing object")),
        };
        let event = Arc::new(Event {
            rev: inner.revision,
            ty,
            key: key.to_string(),
            obj: obj.clone(),
            prev,
            at: Instant::now(),
            frames: Default::default(),
        });
        Ok(WriteOutcome {
            object: obj,
            event: Some(event),
        })
    }

    /// Lists `rt` at revision `at` (None = now), within `namespace` (None = all), starting at
    /// storage key `start` (inclusive), returning at most `limit` matching items (0 = all).
    #[allow(clippy::too_many_arguments)]
    pub fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        at: Option<u64>,
        start: Option<&str>,
        limit: usize,
        filter: &dyn Fn(&StoredObject) -> bool,
        count_remaining: bool,
    ) -> Result<ListPage, ReadError> {
        let inner = self.inner.read();
        let res = &inner.res(rt.index);
        let rev = match at {
            None => inner.revision,
            Some(r) if r < res.compacted => {
                return Err(ReadError::Compacted {
                    requested: r,
                    compacted: res.compacted,
                });
            }
            Some(r) if r > inner.revision => {
                return Err(ReadError::Future {
                    requested: r,
                    current: inner.revision,
                });
            }
            Some(r) => r,
        };
        let prefix = match namespace {
            Some(ns) if rt.namespaced => format!("{ns}/"),
            _ => String::new(),
        };
        let from = match start {
            Some(s) if s.as_bytes() > prefix.as_bytes() => s.to_string(),
            _ => prefix.clone(),
        };
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0u64;
        let mut full = false;
        for (key, versions) in res
            .objects
            .range::<str, _>((Bound::Included(from.as_str()), Bound::Unbounded))
        {
            if !key.starts_with(&prefix) {
                break;
            }
            let visible = if at.is_none() {
                versions.last().and_then(|v| v.obj.as_ref())
            } else {
                versions
                    .iter()
                    .rev()
                    .find(|v| v.rev <= rev)
                    .and_then(|v| v.obj.as_ref())
            };
            let Some(obj) = visible else { continue };
            if full {
                remaining += 1;
                if !count_remaining {
                    break;
                }
                continue;
            }
            if filter(obj) {
                items.push(obj.clone());
                if limit > 0 && items.len() == limit {
                    last_key = Some(key.clone());
                    full = true;
                }
            }
        }
        // A page that happened to end exactly at the last item has nothing after it, with or
        // without selectors (kube's cacher: `hasMoreListItems = i < len(items)-1`).
        if full && remaining == 0 {
            last_key = None;
        }
        Ok(ListPage {
            rev,
            items,
            remaining: (full && count_remaining && last_key.is_some()).then_some(remaining),
            last_key,
        })
    }

    /// Whether a watch may start after revision `after` (kube's `too old resource version`
    /// rule); `Err(oldest - 1)` if not.
    pub fn check_watch_start(&self, rt: &ResourceType, after: u64) -> Result<(), u64> {
        let inner = self.inner.read();
        let o = inner.res(rt.index).oldest_minus_one(inner.revision);
        if after < o { Err(o) } else { Ok(()) }
    }

    /// Up to `max` events of `rt` with revision greater than `after`. `Err` if events after
    /// `after` were already evicted (the watcher fell behind the log).
    pub fn events_after(
        &self,
        rt: &ResourceType,
        after: u64,
        max: usize,
    ) -> Result<EventBatch, u64> {
        let inner = self.inner.read();
        let res = &inner.res(rt.index);
        if res.max_evicted > after {
            return Err(res.max_evicted);
        }
        let start = res.events.partition_point(|e| e.rev <= after);
        let end = start.saturating_add(max).min(res.events.len());
        let events: Vec<_> = res.events.range(start..end).cloned().collect();
        Ok(EventBatch {
            caught_up_to: (end == res.events.len()).then_some(inner.revision),
            events,
        })
    }

    /// Evicts events older than the history window beyond each resource's newest
    /// [`HistoryConfig::KUBE_RING_FLOOR`] (call periodically).
    pub fn compact_expired(&self) {
        let Some(cutoff) = Instant::now().checked_sub(self.history.window) else {
            return;
        };
        let mut inner = self.inner.write();
        for res in &mut inner.res {
            while res.events.len() > HistoryConfig::KUBE_RING_FLOOR
                && res.events.front().is_some_and(|e| e.at < cutoff)
            {
                res.evict_front();
            }
        }
    }

    /// Compacts every resource at the current revision, like `etcdctl compact`: all history
    /// is dropped; reads and watches from older revisions get 410 afterwards.
    pub fn compact_now(&self) -> u64 {
        let mut inner = self.inner.write();
        let rev = inner.revision;
        for res in &mut inner.res {
            while !res.events.is_empty() {
                res.evict_front();
            }
            res.compacted = rev;
            let keys: Vec<String> = res
                .objects
                .iter()
                .filter(|(_, v)| v.len() > 1 || v[0].obj.is_none())
                .map(|(k, _)| k.clone())
                .collect();
            for k in keys {
                res.prune(&k);
            }
        }
        rev
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn setup() -> (Store, Arc<ResourceType>) {
        let reg = Arc::new(Registry::new(&[]).unwrap());
        let cm = reg.core("configmaps").clone();
        (Store::new(reg, HistoryConfig::default()), cm)
    }

    fn put(s: &Store, rt: &ResourceType, ns: &str, name: &str, data: &str) -> u64 {
        let v = json!({"metadata":{"name":name,"namespace":ns},"data":{"k":data}});
        s.write(rt, &key_of(rt, ns, name), |_, _| Ok(Action::Put(v)))
            .unwrap()
            .object
            .rv
    }

    #[test]
    fn revisions_increase_and_lists_see_the_past() {
        let (s, cm) = setup();
        let r1 = put(&s, &cm, "a", "x", "1");
        let r2 = put(&s, &cm, "a", "x", "2");
        let r3 = put(&s, &cm, "b", "y", "1");
        assert!(r1 < r2 && r2 < r3);
        s.write(&cm, "a/x", |_, _| Ok(Action::Delete)).unwrap();
        let now = s.list(&cm, None, None, None, 0, &|_| true, false).unwrap();
        assert_eq!(now.items.len(), 1);
        let past = s
            .list(&cm, None, Some(r2), None, 0, &|_| true, false)
            .unwrap();
        assert_eq!(past.items.len(), 1);
        assert_eq!(past.items[0].rv, r2);
        assert_eq!(past.rev, r2);
        let v: Value = serde_json::from_slice(&past.items[0].body).unwrap();
        assert_eq!(v["data"]["k"], "2");
        assert_eq!(v["metadata"]["resourceVersion"], r2.to_string());
    }

    #[test]
    fn body_has_no_type_meta_and_metadata_comes_first() {
        let (s, cm) = setup();
        let v = json!({"data":{"a":"<&>"},"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"x":"y"},"name":"n","namespace":"d"}});
        let o = s
            .write(&cm, "d/n", |_, _| Ok(Action::Put(v)))
            .unwrap()
            .object;
        let text = std::str::from_utf8(&o.body).unwrap();
        assert!(text.starts_with(r#"{"metadata":{"name":"n","namespace":"d","resourceVersion":"2","labels":{"x":"y"}}"#), "{text}");
        assert!(text.contains(r#""a":"\u003c\u0026\u003e""#));
        assert_eq!(o.labels, vec![("x".to_string(), "y".to_string())]);
        assert!(
            std::str::from_utf8(&o.full_bytes(&cm))
                .unwrap()
                .starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata""#)
        );
    }

    #[test]
    fn pages_and_remaining_count() {
        let (s, cm) = setup();
        for i in 0..5 {
            put(&s, &cm, "a", &format!("o{i}"), "v");
        }
        let p = s
            .list(&cm, Some("a"), None, None, 2, &|_| true, true)
            .unwrap();
        assert_eq!(p.items.len(), 2);
        assert_eq!(p.last_key.as_deref(), Some("a/o1"));
        assert_eq!(p.remaining, Some(3));
        let next = format!("{}\0", p.last_key.unwrap());
        let p2 = s
            .list(&cm, Some("a"), Some(p.rev), Some(&next), 3, &|_| true, true)
            .unwrap();
        assert_eq!(p2.items.len(), 3);
        assert_eq!(p2.last_key, None);
        assert_eq!(p2.remaining, None);
    }

    #[test]
    fn compaction_expires_old_reads_and_watches() {
        let (s, cm) = setup();
        let r1 = put(&s, &cm, "a", "x", "1");
        put(&s, &cm, "a", "x", "2");
        assert!(s.check_watch_start(&cm, r1).is_ok());
        let c = s.compact_now();
        assert_eq!(s.check_watch_start(&cm, r1), Err(c));
        assert!(s.check_watch_start(&cm, c).is_ok());
        assert!(matches!(
            s.list(&cm, None, Some(r1), None, 0, &|_| true, false),
            Err(ReadError::Compacted { .. })
        ));
        assert_eq!(
            s.list(&cm, None, Some(c), None, 0, &|_| true, false)
                .unwrap()
                .items
                .len(),
            1
        );
        assert!(s.events_after(&cm, r1, 10).is_err());
    }

    /// A watch from a LIST of a bulk-loaded kind, taken while only other kinds were written,
    /// is not too old once the kind's next event comes.
    #[test]
    fn a_watch_from_a_list_between_the_load_and_the_next_event_is_not_too_old() {
        let (s, cm) = setup();
        let reg = Arc::new(Registry::new(&[]).unwrap());
        let secrets = reg.core("secrets").clone();
        s.restore(
            &cm,
            vec![json!({"metadata":{"name":"x","namespace":"a"},"data":{"k":"0"}})],
        )
        .unwrap();
        let loaded = s.revision();
        put(&s, &secrets, "a", "s", "1");
        let listed = s.revision();
        put(&s, &secrets, "a", "s", "2");
        let event = put(&s, &cm, "a", "x", "1");
        assert!(event > listed + 1);
        assert!(s.check_watch_start(&cm, listed).is_ok());
        assert!(s.check_watch_start(&cm, loaded).is_ok());
        assert!(s.check_watch_start(&cm, loaded - 1).is_err());
    }

    /// Age evicts only beyond the newest 100 events, as kube's watch-cache ring keeps them.
    #[tokio::test(start_paused = true)]
    async fn age_keeps_a_resources_newest_events() {
        let (s, cm) = setup();
        let r1 = put(&s, &cm, "a", "x", "1");
        put(&s, &cm, "a", "x", "2");
        tokio::time::advance(Duration::from_secs(7200)).await;
        s.compact_expired();
        assert!(
            s.check_watch_start(&cm, r1).is_ok(),
            "a quiet kind's events stay"
        );
        for i in 0..150 {
            put(&s, &cm, "a", "x", &i.to_string());
        }
        tokio::time::advance(Duration::from_secs(7200)).await;
        s.compact_expired();
        let now = s.revision();
        assert!(s.check_watch_start(&cm, now - 100).is_ok());
        assert!(s.check_watch_start(&cm, now - 101).is_err());
    }

    #[test]
    fn frames_are_encoded_once_and_deleted_carries_the_event_rv() {
        let (s, cm) = setup();
        put(&s, &cm, "a", "x", "1");
        let ev = s
            .write(&cm, "a/x", |_, _| Ok(Action::Delete))
            .unwrap()
            .event
            .unwrap();
        let f = ev.frame(&cm, EventType::Deleted);
        assert!(Bytes::ptr_eq_hint(&f, &ev.frame(&cm, EventType::Deleted)));
        let v: Value = serde_json::from_slice(&f).unwrap();
        assert_eq!(v["type"], "DELETED");
        assert_eq!(v["object"]["kind"], "ConfigMap");
        assert_eq!(
            v["object"]["metadata"]["resourceVersion"],
            ev.rev.to_string()
        );
    }

    trait PtrEq {
        fn ptr_eq_hint(a: &Self, b: &Self) -> bool;
    }
    impl PtrEq for Bytes {
        fn ptr_eq_hint(a: &Self, b: &Self) -> bool {
            a.as_ptr() == b.as_ptr()
        }
    }
}
