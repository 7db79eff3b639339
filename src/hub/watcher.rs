//! One watcher as both sides see it: [`WatcherShared`], the state its watch task and the hub
//! share (the lag protocol), and [`Subscription`], the watch task's end of its registration.
//!
//! Owns the lag protocol: a watcher is *live* while the dispatcher pushes its events into its
//! bounded queue, and *catching up* once it fell behind (its queue was full): it then reads the
//! shared event log from its own cursor until [`ResourceCache::try_go_live`] finds nothing left
//! after the cursor. Only the hub and the cache move a watcher between the two modes, under the
//! cache's write lock (`fall_behind` is private to the hub, `go_live` to the crate, for
//! `try_go_live`); a watch task reads the mode, reports its cursor and may close itself. It must not decide which events
//! a watcher receives (the hub's index and the watcher's filter do) nor write to the transport
//! (that is [`crate::downstream::watch`]).
//!
//! # Memory orderings
//!
//! * `lagging` is written only under the cache's write lock, by the dispatcher (`fall_behind`,
//!   when the queue is full) and by `go_live`; the watch task reads it without the lock, to
//!   choose between its queue and the log. Stores are `Release` and loads `Acquire`, so a task
//!   that sees itself live also sees the cursor `go_live` stored before. Inside the lock (the
//!   dispatcher, the reaper, [`ResourceCache::bookmark_rv`]) the lock orders everything anyway.
//! * `cursor` is `Relaxed`: it is a progress report (the last resourceVersion the task handed to
//!   its client), read by the reaper to measure the lag and by the "watcher closed" log line. A
//!   stale value only moves a close decision by one housekeeping tick.
//! * The cancellation token and the reason's lock synchronise themselves; the first reason given
//!   to [`WatcherShared::close`] wins.
//!
//! # Abandoned watchers
//!
//! A watch runs in its transport's task, only when the transport polls it: a client that stops
//! reading stops it where it is, holding its queue (and, during its initial events, a snapshot
//! of the cache). Closing it cannot run its code, so [`WatcherShared::close`] also arms what the
//! watch left in [`WatcherShared::on_abandoned`]: if the watch has not ended itself within
//! [`ABANDON_GRACE`] (it would have, had its client been reading), that drops it.
//!
//! [`ResourceCache::try_go_live`]: crate::cache::ResourceCache::try_go_live
//! [`ResourceCache::bookmark_rv`]: crate::cache::ResourceCache::bookmark_rv

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use std::collections::VecDeque;

use tokio::sync::Notify;
use tokio_util::sync::{
    CancellationToken, WaitForCancellationFuture, WaitForCancellationFutureOwned,
};

use crate::cache::budget::Charge;
use crate::cache::{CacheEvent, ResourceCache};
use kube_wire::event::EventType;

/// What a watcher's queue carries: a logged event and the type this watcher receives it as
/// (a MODIFIED that moves an object out of a watcher's selection reaches it as DELETED).
pub type Delivery = (Arc<CacheEvent>, EventType);

/// Close reason: the log no longer holds the watcher's cursor.
pub const FELL_OUT_OF_WINDOW: &str = "fell out of the event window";
/// Close reason: the watcher lags by more than `CacheSettings::max_lag_bytes`.
pub const LAGGING_BEYOND_BYTE_BOUND: &str = "lagging beyond the byte bound";
/// Close reason: the event log was cut under memory pressure past the watcher's cursor
/// (`crate::cache::budget`).
pub const CUT_FOR_MEMORY: &str = "cut off to keep within cache.memory_limit";
/// Close reason: the watcher started from a resourceVersion inside a bridged relist's gap (see
/// `crate::cache::bridge`).
pub const IN_BRIDGED_GAP: &str = "started inside a bridged relist";
/// Close reason: a relist could not be bridged, so the history restarted (kube's behaviour).
pub const RELIST_NOT_BRIDGED: &str = "upstream relist could not be bridged";
/// Close reason: a consistency check found an event lost, and the relist that repaired the cache
/// changed an object the watcher sees without an event (`crate::cache::bridge::plan_repair`).
pub const REPAIRED: &str = "the cache was repaired after an event was lost upstream";

/// How long a closed watcher may take to end itself before what it left in
/// [`WatcherShared::on_abandoned`] runs.
pub const ABANDON_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What ends an abandoned watch (see the module doc).
type Abandon = Box<dyn FnOnce() + Send>;

/// State shared between a watcher's task and the hub (see the module doc for the protocol and
/// its memory orderings).
pub struct WatcherShared {
    /// The dispatcher stopped pushing: the watcher must read the log from its cursor.
    lagging: AtomicBool,
    /// resourceVersion of the last event the watcher processed.
    cursor: AtomicU64,
    /// Closes the watcher (slow, fell out of the window, relist fallback, shutdown).
    cancel: CancellationToken,
    /// Why it was closed.
    reason: Mutex<Option<&'static str>>,
    /// Asks the watch task for a BOOKMARK now ([`WatcherShared::want_bookmark`]).
    bookmark: Arc<Notify>,
    /// The watch is to end cleanly once caught up, just after a BOOKMARK at its resourceVersion
    /// ([`WatcherShared::end_after_bookmark`]).
    ending: AtomicBool,
    /// Ends the watch if it does not end itself after a close.
    abandon: Mutex<Option<Abandon>>,
    /// The watcher's queue while live: pushed by the dispatcher, taken by the watch. A
    /// `VecDeque` rather than a channel: it holds no memory while empty (an idle watcher's
    /// usual state) and keeps what it grew to while events flow, so a steady delivery
    /// allocates nothing.
    queue: Mutex<VecDeque<Delivery>>,
    /// The most deliveries the queue holds.
    capacity: usize,
    /// Wakes the watch when a delivery is queued or the watcher is closed.
    ready: Notify,
    /// The watch dropped its [`Subscription`]: nothing may be queued any more.
    gone: AtomicBool,
}

/// What [`WatcherShared::push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Queued.
    Queued,
    /// The queue is full.
    Full,
    /// The watch is gone.
    Gone,
}

/// The capacity an empty queue keeps (1 KiB of slots): what a burst grew it to beyond this is
/// given back. Below it, the capacity a watcher's usual bursts need stays, so that steady
/// delivery allocates nothing (giving back at every empty queue cost an allocation per burst).
const KEPT_QUEUE: usize = 64;

impl std::fmt::Debug for WatcherShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatcherShared")
            .field("lagging", &self.lagging)
            .field("cursor", &self.cursor)
            .field("reason", &self.reason)
            .finish_non_exhaustive()
    }
}

impl WatcherShared {
    /// A new watcher, catching up from `cursor` (it reads the log until it may go live).
    pub(crate) fn catching_up(cursor: u64, capacity: usize) -> Self {
        WatcherShared {
            lagging: AtomicBool::new(true),
            cursor: AtomicU64::new(cursor),
            cancel: CancellationToken::new(),
            reason: Mutex::new(None),
            bookmark: Arc::new(Notify::new()),
            ending: AtomicBool::new(false),
            abandon: Mutex::new(None),
            queue: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            ready: Notify::new(),
            gone: AtomicBool::new(false),
        }
    }

    /// Whether the dispatcher pushes events to this watcher's queue (else it reads the log).
    pub fn is_live(&self) -> bool {
        !self.lagging.load(Ordering::Acquire)
    }

    /// The dispatcher found the queue full: from now on the watcher reads the log.
    pub(super) fn fall_behind(&self) {
        self.lagging.store(true, Ordering::Release);
    }

    /// The watcher, caught up at `cursor`, is pushed events again. Only under the cache's write
    /// lock, after checking that the log holds nothing after `cursor`.
    pub(crate) fn go_live(&self, cursor: u64) {
        self.cursor.store(cursor, Ordering::Relaxed);
        self.lagging.store(false, Ordering::Release);
    }

    /// resourceVersion of the last event the watcher processed.
    pub fn cursor(&self) -> u64 {
        self.cursor.load(Ordering::Relaxed)
    }

    /// Reports progress: the watcher processed every event up to `cursor`.
    pub fn set_cursor(&self, cursor: u64) {
        self.cursor.store(cursor, Ordering::Relaxed);
    }

    /// Queues a delivery (the dispatcher, under the cache's lock).
    pub(crate) fn push(&self, d: Delivery) -> Pushed {
        if self.gone.load(Ordering::Acquire) {
            return Pushed::Gone;
        }
        let mut q = self.queue.lock();
        if q.len() >= self.capacity {
            return Pushed::Full;
        }
        q.push_back(d);
        drop(q);
        self.ready.notify_one();
        Pushed::Queued
    }

    /// Drops what is queued and the queue's memory: for a watcher closed to give memory back
    /// (`CUT_FOR_MEMORY`), which is told 410 and relists, so what it had queued is not sent.
    /// Its queue would otherwise hold those events until its watch ran again, or for
    /// [`ABANDON_GRACE`] if its client stopped reading.
    pub(crate) fn release_queue(&self) {
        let mut q = self.queue.lock();
        q.clear();
        q.shrink_to_fit();
    }

    /// Deliveries queued.
    pub(crate) fn queued(&self) -> usize {
        self.queue.lock().len()
    }

    /// Closes the watcher with a reason (first reason wins), and arms
    /// [`WatcherShared::on_abandoned`].
    pub fn close(&self, reason: &'static str) {
        self.reason.lock().get_or_insert(reason);
        self.cancel.cancel();
        self.ready.notify_one();
        let abandon = self.abandon.lock().take();
        if let (Some(f), Ok(rt)) = (abandon, tokio::runtime::Handle::try_current()) {
            // A task of its own: the hub closes watchers under the cache's lock, and ending a
            // watch takes that lock.
            rt.spawn(async move {
                tokio::time::sleep(ABANDON_GRACE).await;
                f();
            });
        }
    }

    /// What ends the watch should it not end itself within [`ABANDON_GRACE`] of a close (see
    /// the module doc): called by the watch once it is registered. Must not block, and must not
    /// be called with the cache's lock held.
    pub fn on_abandoned(&self, f: impl FnOnce() + Send + 'static) {
        *self.abandon.lock() = Some(Box::new(f));
    }

    /// Whether the watcher was closed.
    pub fn is_closed(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Why the watcher was closed, if it was.
    pub fn reason(&self) -> Option<&'static str> {
        *self.reason.lock()
    }

    /// Completes when the watcher is closed.
    pub fn closed(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Completes when the watcher is closed; owns what it waits on (to keep across a loop).
    pub fn closed_owned(&self) -> WaitForCancellationFutureOwned {
        self.cancel.clone().cancelled_owned()
    }

    /// The cache's resourceVersion moved past the last event the watcher was given without an
    /// event of its own: a bridged relist, whose last event lies below the list's
    /// resourceVersion, strictly inside the gap a watch cannot start from
    /// (`ResourceCache::check_watch_start`). The watch task sends a BOOKMARK there as soon as it
    /// has sent what is queued, rather than at its next periodic one (a minute away by default):
    /// a client that must re-watch before then resumes from the list's resourceVersion instead
    /// of meeting a 410 and relisting. An ask made while the task is busy is kept for it.
    pub(crate) fn want_bookmark(&self) {
        self.bookmark.notify_one();
    }

    /// Asks the watch to end cleanly as soon as it has sent what is queued, just after a
    /// BOOKMARK at the cache's resourceVersion (a graceful shutdown's paced drain): the client
    /// re-watches from there, on another replica, with no LIST. Returns whether it was not
    /// asked already. Not a close: the watcher stays registered, and gets events, until its
    /// watch ends.
    pub fn end_after_bookmark(&self) -> bool {
        let first = !self.ending.swap(true, Ordering::Relaxed);
        if first {
            self.bookmark.notify_one();
        }
        first
    }

    /// Whether [`WatcherShared::end_after_bookmark`] was asked.
    pub fn is_ending(&self) -> bool {
        self.ending.load(Ordering::Relaxed)
    }

    /// What the watch task waits on for `WatcherShared::want_bookmark` (`notified()`), owned
    /// so that it can be held across the task's loop.
    pub fn bookmark_asks(&self) -> Arc<Notify> {
        self.bookmark.clone()
    }
}

/// The watch task's end of one watcher: its queue and its shared state. Dropping it removes the
/// watcher from the hub (the hub's end is [`super::Subscriber`]).
#[derive(Debug)]
pub struct Subscription {
    cache: Arc<ResourceCache>,
    id: u64,
    shared: Arc<WatcherShared>,
    /// What the watcher counts for in the memory budget while it lives.
    _charge: Charge,
}

impl Subscription {
    /// The task's end of the watcher `id` registered in `cache`'s hub, counted by `charge`.
    pub(crate) fn new(
        cache: Arc<ResourceCache>,
        id: u64,
        shared: Arc<WatcherShared>,
        charge: Charge,
    ) -> Self {
        Subscription {
            cache,
            id,
            shared,
            _charge: charge,
        }
    }

    /// The state shared with the hub.
    pub fn shared(&self) -> &WatcherShared {
        &self.shared
    }

    /// The next delivery while live; `None` once the watcher is closed and nothing is left
    /// queued.
    pub async fn recv(&mut self) -> Option<Delivery> {
        loop {
            if let Some(d) = self.try_recv() {
                return Some(d);
            }
            if self.shared.is_closed() {
                return None;
            }
            // `notify_one` keeps a permit when nobody waits: a push between the check and
            // this wait is not missed.
            self.shared.ready.notified().await;
        }
    }

    /// A delivery already queued, if any.
    pub fn try_recv(&mut self) -> Option<Delivery> {
        let mut q = self.shared.queue.lock();
        let d = q.pop_front();
        if q.is_empty() && q.capacity() > KEPT_QUEUE {
            q.shrink_to(KEPT_QUEUE);
        }
        d
    }

    /// Whether nothing is queued.
    pub fn queue_is_empty(&self) -> bool {
        self.shared.queue.lock().is_empty()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.shared.gone.store(true, Ordering::Release);
        self.shared.queue.lock().clear();
        self.cache.unsubscribe(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test(start_paused = true)]
    async fn a_closed_watch_that_does_not_end_is_dropped_after_the_grace() {
        let w = WatcherShared::catching_up(0, 4);
        let dropped = Arc::new(AtomicUsize::new(0));
        let d = dropped.clone();
        w.on_abandoned(move || {
            d.fetch_add(1, Ordering::SeqCst);
        });
        w.close("test");
        w.close("again: armed once only");
        tokio::time::sleep(ABANDON_GRACE - std::time::Duration::from_millis(1)).await;
        assert_eq!(dropped.load(Ordering::SeqCst), 0, "not before the grace");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "once, after the grace");
        assert_eq!(w.reason(), Some("test"));
    }
}
