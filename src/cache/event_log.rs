//! The window of recent events of one resource: [`CacheEvent`] (one change, with the frames
//! every watcher shares), the ring of them in resourceVersion order, and its eviction.
//!
//! **What the window keeps.** At least what kube-apiserver's watch cache would keep, so that a
//! client resuming a watch (or reading an exact resourceVersion, or continuing a list) gets from
//! watchmux what kube would give it, never a 410 kube would not send. kube keeps the last
//! `capacity` events however old they are, `capacity` starting at 100 and, on each new event
//! while the ring is full, doubled (up to 100 × 1024) when its oldest event is younger than the
//! fresh duration (75 s), halved (down to 100) when the newest quarter is all older
//! (`watch_cache.go`, `resizeCacheLocked`). The log replays that rule as events arrive
//! ([`KubeWindow`]) and never drops an event inside kube's window for the count or bytes bound
//! of its own; beyond it, it keeps older events too, while it holds at most `window_count`
//! events and `window_bytes` bytes. An event's age alone never drops it: a quiet kind keeps its
//! events for hours, as kube does. Only the memory budget's load shedding cuts into kube's
//! window (see [`super::budget`]).
//!
//! The log is what a watch from an older resourceVersion replays and what a watcher that fell
//! behind reads from its own cursor, so it also answers "where does the history start" (kube's
//! watch start rule), "how far behind is this cursor" (the reaper's byte bound) and "which events
//! undo the store back to a past resourceVersion" (exact-resourceVersion reads). It must not
//! hold the objects (the store does) nor know the watchers (the hub does), and it takes no lock:
//! the cache's lock guards it.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::budget::{Account, Charge};
use super::record::Cached;
use super::{CacheSettings, ResourceInfo};
use kube_wire::event::{EventType, encode_frame};
use kube_wire::negotiate::Form;
use kube_wire::selector::Filter;

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
    /// Frames in the other wire forms ([`CacheEvent::frame_in`]), allocated on first use: most
    /// events are only ever sent as plain JSON.
    derived: OnceLock<Box<DerivedFrames>>,
    /// What the event counts for in the memory budget: its fixed part, then each frame as it is
    /// encoded (the objects count for themselves).
    charge: Charge,
}

/// Wire forms other than plain JSON whose frames are shared: PartialObjectMetadata, a Table
/// (without column definitions) for each `includeObject`, and the two protobuf forms.
const DERIVED_FORMS: usize = 6;

/// One frame per derived form and emitted type.
type DerivedFrames = [OnceLock<Bytes>; DERIVED_FORMS * 3];

impl CacheEvent {
    /// The frame for this change as `emitted`, encoded once and shared by every watcher.
    pub fn frame(&self, info: &ResourceInfo, emitted: EventType) -> Bytes {
        self.charged_init(&self.frames[emitted as usize], || {
            encode_frame(
                emitted.as_str(),
                &info.type_prefix,
                &self.emitted_object(emitted).json(),
            )
        })
    }

    /// The frame in `slot`, encoded by `encode` if it is the first use, and then counted in
    /// the event's charge.
    fn charged_init(&self, slot: &OnceLock<Bytes>, encode: impl FnOnce() -> Bytes) -> Bytes {
        let mut made = 0;
        let b = slot.get_or_init(|| {
            let b = encode();
            made = b.len();
            b
        });
        if made > 0 {
            self.charge.add(made as u64);
        }
        b.clone()
    }

    /// The object a watcher receives for this change as `emitted`: the new state, or for a
    /// MODIFIED that moves the object out of the watcher's filter, the previous state stamped
    /// with this event's resourceVersion.
    pub fn emitted_object(&self, emitted: EventType) -> Cow<'_, Cached> {
        match (emitted, self.ty, &self.prev) {
            (EventType::Deleted, EventType::Modified, Some(prev)) => {
                Cow::Owned(prev.restamped(self.rv))
            }
            _ => Cow::Borrowed(&*self.obj),
        }
    }

    /// The frame for this change as `emitted` in `form`, encoded once per form and shared by
    /// every watcher of that form: plain JSON is [`CacheEvent::frame`]; any other form is
    /// encoded by `encode` from [`CacheEvent::emitted_object`] on first use. Every caller must
    /// pass the same encoder for a form (`downstream::watch` does: a Table without column
    /// definitions, which only a watcher's first event carries, in a frame of its own).
    pub fn frame_in(
        &self,
        info: &ResourceInfo,
        emitted: EventType,
        form: &Form,
        encode: impl FnOnce(&Cached) -> Bytes,
    ) -> Bytes {
        let slot = match form {
            Form::Json => return self.frame(info, emitted),
            Form::Metadata => 0,
            Form::Table { include_object } => 1 + *include_object as usize,
            Form::Protobuf => 4,
            Form::MetadataProtobuf => 5,
        };
        let frames = self.derived.get_or_init(|| {
            self.charge.add(size_of::<DerivedFrames>() as u64);
            Default::default()
        });
        self.charged_init(&frames[slot * 3 + emitted as usize], || {
            encode(&self.emitted_object(emitted))
        })
    }

    /// What a watcher with `filter` receives for this change, if anything.
    pub fn emitted_for(&self, filter: &Filter) -> Option<EventType> {
        let m = |c: &Cached| filter.matches(&c.rec.namespace, &c.rec.labels, |f| c.rec.field(f));
        let now = m(&self.obj);
        let before = self.prev.as_deref().is_some_and(m);
        self.ty.emitted(before, now)
    }

    /// `cum_bytes` of the event before this one.
    fn bytes_before(&self) -> u64 {
        self.cum_bytes - size_of_event(&self.obj)
    }
}

/// What an event counts for in the byte lag: its object's body and a fixed overhead.
fn size_of_event(obj: &Cached) -> u64 {
    obj.stored().len() as u64 + 48
}

/// Why reading the log failed: events after the cursor already left it.
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

/// The ring of recent events, oldest first, and what left it.
#[derive(Debug, Default)]
pub(super) struct EventLog {
    events: VecDeque<Arc<CacheEvent>>,
    /// RV of the list the log starts after.
    list_rv: u64,
    /// Whether an event left the log since that list.
    evicted_since_list: bool,
    /// Highest RV that left the log: a cursor below it cannot be served.
    max_evicted: u64,
    /// Sum of the sizes of every event appended so far.
    cum_bytes: u64,
    /// The lowest resourceVersion whose state the log can rebuild exactly: states below the end
    /// of a bridged relist were never seen (the bridge events sum up what happened meanwhile).
    exact_from: u64,
    /// The bridged relists still above the start floor: (the cache's resourceVersion before,
    /// the list's).
    gaps: Vec<(u64, u64)>,
    /// The resourceVersion of the last repair's list (`crate::cache::bridge::plan_repair`): the
    /// history before it misses the lost event the repair made up for silently, so no watch
    /// starts below it.
    repaired_at: u64,
    /// How many of the newest events kube-apiserver's watch cache would hold now.
    kube: KubeWindow,
}

/// kube-apiserver's watch-cache ring, replayed over the log's events: its capacity and how many
/// of the newest events it holds (`watch_cache.go`: `updateCache`, `resizeCacheLocked`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KubeWindow {
    /// The ring's capacity, between [`KubeWindow::LOWER`] and the upper bound.
    pub capacity: usize,
    /// Events the ring holds: the newest `len` of the log.
    pub len: usize,
}

impl Default for KubeWindow {
    fn default() -> Self {
        KubeWindow {
            capacity: Self::LOWER,
            len: 0,
        }
    }
}

impl KubeWindow {
    /// `defaultLowerBoundCapacity`.
    pub const LOWER: usize = 100;
    /// `defaultUpperBoundCapacity`, for kube's default fresh duration.
    pub const UPPER: usize = 100 * 1024;
    /// kube's default `eventFreshDuration` (`DefaultEventFreshDuration`).
    pub const FRESH: Duration = Duration::from_secs(75);

    /// kube's `capacityUpperBound`: 100 × 1024 up to the default fresh duration, then scaled by
    /// the ratio of the two rounded up to a power of two.
    fn upper_bound(fresh: Duration) -> usize {
        if fresh <= Self::FRESH {
            return Self::UPPER;
        }
        let exponent = (fresh.as_secs_f64() / Self::FRESH.as_secs_f64())
            .log2()
            .ceil()
            .clamp(0.0, 14.0) as u32;
        Self::UPPER << exponent
    }

    /// The ring as an event enters it: kube resizes a full ring first (`age(i)` is how long
    /// before the new event the `i`-th newest held event was recorded, 0 the newest; `fresh`
    /// is its `eventFreshDuration`), then drops its oldest event if it is still full, then
    /// holds the new one.
    fn admit(&mut self, age: impl Fn(usize) -> Duration, fresh: Duration) {
        if self.len == self.capacity {
            if age(self.len - 1) < fresh {
                self.capacity = (self.capacity * 2)
                    .min(Self::upper_bound(fresh))
                    .max(self.capacity);
            } else if age(self.capacity / 4 - 1) > fresh {
                self.capacity = (self.capacity / 2).max(Self::LOWER).min(self.capacity);
                self.len = self.len.min(self.capacity);
            }
        }
        self.len = (self.len + 1).min(self.capacity);
    }
}

impl EventLog {
    /// After the first list: the history starts after `list_rv`.
    pub(super) fn begin_at(&mut self, list_rv: u64) {
        self.list_rv = list_rv;
    }

    /// After a relist that could not be bridged: the history is dropped and starts again after
    /// `list_rv`; every resourceVersion up to it counts as evicted.
    pub(super) fn restart_at(&mut self, list_rv: u64) {
        self.list_rv = list_rv;
        self.events.clear();
        // kube's Replace empties its ring and keeps its capacity.
        self.kube.len = 0;
        self.evicted_since_list = false;
        self.max_evicted = list_rv;
        self.gaps.clear();
    }

    /// Appends a change at `obj`'s resourceVersion (greater than every logged one).
    /// The event counts in `account` (see [`super::budget`]).
    pub(super) fn push(
        &mut self,
        ty: EventType,
        obj: Arc<Cached>,
        prev: Option<Arc<Cached>>,
        account: &Arc<Account>,
        settings: &CacheSettings,
    ) -> Arc<CacheEvent> {
        let now = Instant::now();
        let events = &self.events;
        self.kube.admit(
            |i| now.saturating_duration_since(events[events.len() - 1 - i].at),
            settings.window_age,
        );
        self.cum_bytes += size_of_event(&obj);
        let ev = Arc::new(CacheEvent {
            rv: obj.rec.rv,
            ty,
            obj,
            prev,
            cum_bytes: self.cum_bytes,
            at: now,
            frames: Default::default(),
            derived: OnceLock::new(),
            charge: account.charge(size_of::<CacheEvent>() as u64 + 16),
        });
        self.events.push_back(ev.clone());
        ev
    }

    /// Drops the oldest events beyond `window_count`, and those beyond `window_bytes` that lie
    /// outside kube's window (see the module doc). Never by age.
    pub(super) fn evict(&mut self, settings: &CacheSettings) {
        while self.events.len() > settings.window_count
            || (self.events.len() > self.kube.len && self.held_bytes() > settings.window_bytes)
        {
            self.pop_oldest();
        }
    }

    /// Drops the oldest event, if any; kube's ring never holds more events than the log.
    pub(super) fn pop_oldest(&mut self) -> bool {
        let Some(e) = self.events.pop_front() else {
            return false;
        };
        self.kube.len = self.kube.len.min(self.events.len());
        self.max_evicted = self.max_evicted.max(e.rv);
        self.evicted_since_list = true;
        true
    }

    /// The bytes of the events held (as counted for the lag: bodies and a fixed overhead).
    pub(super) fn held_bytes(&self) -> u64 {
        self.events
            .front()
            .map_or(0, |e| self.cum_bytes - e.bytes_before())
    }

    /// kube-apiserver's watch-cache ring as replayed over this log.
    #[cfg(test)]
    pub(super) fn kube_window(&self) -> KubeWindow {
        self.kube
    }

    /// Number of events held.
    pub(super) fn len(&self) -> usize {
        self.events.len()
    }

    /// Age of the oldest event held.
    pub(super) fn oldest_age(&self) -> Option<Duration> {
        self.events.front().map(|e| e.at.elapsed())
    }

    /// Whether the log holds an event after `cursor`.
    pub(super) fn has_after(&self, cursor: u64) -> bool {
        self.events.back().is_some_and(|e| e.rv > cursor)
    }

    /// kube's "oldest − 1": a watch may start from this resourceVersion or any later one.
    pub(super) fn start_floor(&self) -> u64 {
        if !self.evicted_since_list {
            self.list_rv
        } else {
            match self.events.front() {
                Some(e) => e.rv - 1,
                None => self.max_evicted,
            }
        }
    }

    /// A relist from the cache's `old_rv` up to `list_rv` was bridged: the states between are a
    /// summary, not states the upstream had, so none below `list_rv` is rebuilt from the log any
    /// more, and no watch starts strictly between the two ([`EventLog::bridged_gap`]).
    pub(super) fn mark_bridged(&mut self, old_rv: u64, list_rv: u64) {
        self.exact_from = self.exact_from.max(list_rv);
        let floor = self.start_floor();
        self.gaps.retain(|&(_, hi)| hi > floor);
        if list_rv > old_rv.saturating_add(1) {
            self.gaps.push((old_rv, list_rv));
        }
    }

    /// A repair's relist at `list_rv` was applied: its history is not the upstream's up to it.
    pub(super) fn mark_repaired(&mut self, list_rv: u64) {
        self.repaired_at = self.repaired_at.max(list_rv);
    }

    /// Below what no watch starts since the last repair (0: none).
    pub(super) fn repaired_at(&self) -> u64 {
        self.repaired_at
    }

    /// The resourceVersion of the bridged relist `rv` lies strictly inside, if any: a watch from
    /// such an `rv` would start from a state the cache never had. That holds for the bridge's
    /// own events' resourceVersions too: an ADDED or MODIFIED carries its object's real revision,
    /// which a client may also have read upstream (a consistent LIST passed through while the
    /// cache was catching up is answered at exactly such a revision), and the upstream's state
    /// there is not the bridge's summary up to it (objects written before it but changed again
    /// later come as ADDED after it; deletions are placed at free revisions, before or after it).
    /// The two cannot be told apart, so both get 410, as kube-apiserver's watchers all get at a
    /// relist.
    pub(super) fn bridged_gap(&self, rv: u64) -> Option<u64> {
        self.gaps
            .iter()
            .find(|&&(lo, hi)| lo < rv && rv < hi)
            .map(|&(_, hi)| hi)
    }

    /// Every event after `rv`, oldest first, if the store's state at `rv` can be rebuilt by
    /// undoing them: `rv` is not below the watch start rule's floor (every event after it is
    /// still held) nor inside a bridged relist. The caller checks `rv` against the head.
    pub(super) fn undo_after(&self, rv: u64) -> Option<Vec<Arc<CacheEvent>>> {
        if rv < self.start_floor() || rv < self.exact_from {
            return None;
        }
        let start = self.events.partition_point(|e| e.rv <= rv);
        Some(self.events.range(start..).cloned().collect())
    }

    /// Up to `max` events after `cursor`; `Err` when some of them already left the log.
    pub(super) fn after(&self, cursor: u64, max: usize) -> Result<LogBatch, FellBehind> {
        if self.max_evicted > cursor {
            return Err(FellBehind);
        }
        let start = self.events.partition_point(|e| e.rv <= cursor);
        let end = start.saturating_add(max).min(self.events.len());
        Ok(LogBatch {
            events: self.events.range(start..end).cloned().collect(),
            at_head: end == self.events.len(),
        })
    }

    /// How many bytes of events lie between `cursor` and the head; `Err` when some of them
    /// already left the log.
    pub(super) fn lag_bytes(&self, cursor: u64) -> Result<u64, FellBehind> {
        if self.max_evicted > cursor {
            return Err(FellBehind);
        }
        let i = self.events.partition_point(|e| e.rv <= cursor);
        let done = match i.checked_sub(1) {
            Some(last_done) => self.events[last_done].cum_bytes,
            // Nothing held is done: everything before the oldest event is.
            None => self
                .events
                .front()
                .map_or(self.cum_bytes, |e| e.bytes_before()),
        };
        Ok(self.cum_bytes.saturating_sub(done))
    }
}
