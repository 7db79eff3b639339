//! Fault injection a test can drive, from Rust or over HTTP under `/sim/faults/`.
//!
//! Each fault models something a real apiserver or the network does to a proxy: connections
//! dropped mid-watch, a server that refuses connections while restarting, 500s and 429s, slow
//! answers, a corrupt event on the wire, a watch whose resourceVersion is refused as compacted.
//!
//! Switches only: the HTTP front and the watch loop read them and act. A fault never changes the
//! store, so what clients read after it is cleared is exactly what was written.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

/// An injected error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFault {
    /// HTTP code: 500 or 429 (others are answered with a generic Status of that code).
    pub code: u16,
    /// How many more requests get it.
    pub remaining: u32,
    /// `Retry-After` seconds for 429.
    pub retry_after: u32,
    /// Only requests whose path contains this (empty = all API requests).
    pub path_contains: String,
}

/// The simulator's fault switches.
#[derive(Debug)]
pub struct Faults {
    drop_watches: watch::Sender<u64>,
    restarts: watch::Sender<u64>,
    refuse_until: Mutex<Option<Instant>>,
    errors: Mutex<Option<ErrorFault>>,
    delay_ms: AtomicU64,
    watch_lag_ms: AtomicU64,
    malformed: AtomicU32,
    undecodable: AtomicU32,
    expire_watches: AtomicU32,
    lost_event: Mutex<Option<LostEvent>>,
}

/// The lost-event fault: the object whose next event is lost, and the event's revision once a
/// watch stream met it.
#[derive(Debug, Clone)]
struct LostEvent {
    key: String,
    rev: Option<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            drop_watches: watch::channel(0).0,
            restarts: watch::channel(0).0,
            refuse_until: Mutex::new(None),
            errors: Mutex::new(None),
            delay_ms: AtomicU64::new(0),
            watch_lag_ms: AtomicU64::new(0),
            malformed: AtomicU32::new(0),
            undecodable: AtomicU32::new(0),
            expire_watches: AtomicU32::new(0),
            lost_event: Mutex::new(None),
        }
    }
}

impl Faults {
    /// Drops every open watch connection now (the TCP connection is aborted mid-stream).
    pub fn drop_watches(&self) {
        self.drop_watches.send_modify(|g| *g += 1);
    }

    /// A receiver that changes on every `drop_watches`.
    pub fn watch_drops(&self) -> watch::Receiver<u64> {
        self.drop_watches.subscribe()
    }

    /// A restart, as kube-apiserver's graceful termination looks from outside: every HTTP/2
    /// connection gets a GOAWAY (the requests in flight finish), every watch ends cleanly,
    /// and then, for `d`, connections are refused (accepted and closed) and requests on
    /// connections still open are aborted. The store stays: resourceVersions go on.
    pub fn restart_for(&self, d: Duration) {
        let now = Instant::now();
        let until = now
            .checked_add(d)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        *self.refuse_until.lock() = Some(until);
        self.restarts.send_modify(|g| *g += 1);
    }

    /// A receiver that changes on every `restart_for`.
    pub fn restarts(&self) -> watch::Receiver<u64> {
        self.restarts.subscribe()
    }

    /// Refuses (accepts and immediately closes) connections, and aborts requests on existing
    /// connections, for `d` (a `d` beyond an `Instant`'s range: for good, never a panic).
    pub fn refuse_connections_for(&self, d: Duration) {
        let now = Instant::now();
        let until = now
            .checked_add(d)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        *self.refuse_until.lock() = Some(until);
        self.drop_watches();
    }

    /// Whether connections are being refused now.
    pub fn refusing(&self) -> bool {
        let mut g = self.refuse_until.lock();
        match *g {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                *g = None;
                false
            }
            None => false,
        }
    }

    /// Answers the next `count` API requests (optionally only those whose path contains
    /// `path_contains`) with `code` (429 carries `Retry-After: retry_after`).
    pub fn fail_next(&self, code: u16, count: u32, retry_after: u32, path_contains: &str) {
        *self.errors.lock() = (count > 0).then(|| ErrorFault {
            code,
            remaining: count,
            retry_after,
            path_contains: path_contains.to_string(),
        });
    }

    /// Consumes one injected error for a request to `path`, if one applies.
    pub fn take_error(&self, path: &str) -> Option<ErrorFault> {
        let mut g = self.errors.lock();
        let f = g.as_mut()?;
        if !path.contains(&f.path_contains) {
            return None;
        }
        f.remaining -= 1;
        let out = f.clone();
        if f.remaining == 0 {
            *g = None;
        }
        Some(out)
    }

    /// Delays every API response by `d` (zero clears).
    pub fn set_delay(&self, d: Duration) {
        self.delay_ms.store(d.as_millis() as u64, Ordering::Relaxed);
    }

    /// The current response delay.
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms.load(Ordering::Relaxed))
    }

    /// Watch streams deliver new events up to `d` late (zero clears): a stream woken by a write
    /// waits `d` before it sends what is new, as a busy apiserver's watch cache or a congested
    /// network does. Writes are acknowledged at once, so a client that reads right after its
    /// write may be ahead of every watcher — what a consistent read must not be fooled by.
    pub fn set_watch_lag(&self, d: Duration) {
        self.watch_lag_ms
            .store(d.as_millis() as u64, Ordering::Relaxed);
    }

    /// The current watch delivery lag.
    pub fn watch_lag(&self) -> Duration {
        Duration::from_millis(self.watch_lag_ms.load(Ordering::Relaxed))
    }

    /// The next watch event written by any watch stream is preceded by one malformed line.
    pub fn send_malformed_event(&self) {
        self.malformed.fetch_add(1, Ordering::SeqCst);
    }

    /// Consumes a pending malformed-event fault.
    pub fn take_malformed(&self) -> bool {
        self.malformed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The next watch event written by any watch stream is preceded by one whose envelope reads
    /// but whose object does not decode as its kind: in protobuf, a message whose metadata reads
    /// but whose second field (a pod's `spec`) holds, in its second (`containers`), a container
    /// whose `resources` runs past its end; in JSON, an object whose `resourceVersion` is not a
    /// number.
    pub fn send_undecodable_object(&self) {
        self.undecodable.fetch_add(1, Ordering::SeqCst);
    }

    /// Consumes a pending undecodable-object fault.
    pub fn take_undecodable(&self) -> bool {
        self.undecodable
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The next `count` watches that start from a resourceVersion get kube's 410 `Expired`
    /// ERROR event, as if that resourceVersion had just been compacted away: what a proxy meets
    /// when it re-watches after an outage during which the history was compacted, without
    /// depending on writes landing inside the outage.
    pub fn expire_next_watches(&self, count: u32) {
        self.expire_watches.store(count, Ordering::SeqCst);
    }

    /// Consumes a pending expired-watch fault.
    pub fn take_expired_watch(&self) -> bool {
        self.expire_watches
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The next event of the object at `key` (`ns/name`, or a cluster-scoped object's name; of
    /// any resource) is lost: no watch stream ever sends it, the next event after it comes as
    /// if it were the next (a watch cache that missed one notification). The store has it: a
    /// LIST or GET shows the write. What a consistency check must find.
    pub fn lose_next_event_of(&self, key: &str) {
        *self.lost_event.lock() = Some(LostEvent {
            key: key.to_string(),
            rev: None,
        });
    }

    /// Whether the event at `rev` of the object at `key` is the lost one (the first event of
    /// that object that any stream meets after [`Faults::lose_next_event_of`]).
    pub fn is_lost(&self, key: &str, rev: u64) -> bool {
        let mut g = self.lost_event.lock();
        match g.as_mut() {
            Some(l) if l.key == key => *l.rev.get_or_insert(rev) == rev,
            _ => false,
        }
    }

    /// The revision of the lost event, once a stream met it.
    pub fn lost_revision(&self) -> Option<u64> {
        self.lost_event.lock().as_ref().and_then(|l| l.rev)
    }

    /// Clears every fault.
    pub fn clear(&self) {
        *self.lost_event.lock() = None;
        *self.refuse_until.lock() = None;
        *self.errors.lock() = None;
        self.delay_ms.store(0, Ordering::Relaxed);
        self.watch_lag_ms.store(0, Ordering::Relaxed);
        self.malformed.store(0, Ordering::SeqCst);
        self.undecodable.store(0, Ordering::SeqCst);
        self.expire_watches.store(0, Ordering::SeqCst);
    }
}

/// The malformed line written by [`Faults::send_malformed_event`]: a truncated event.
pub const MALFORMED_EVENT: &[u8] =
    b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_fault_counts_down_and_filters_by_path() {
        let f = Faults::default();
        f.fail_next(500, 2, 0, "/pods");
        assert!(f.take_error("/api/v1/nodes").is_none());
        assert_eq!(f.take_error("/api/v1/pods").unwrap().code, 500);
        assert!(f.take_error("/api/v1/pods").is_some());
        assert!(f.take_error("/api/v1/pods").is_none());
    }

    #[test]
    fn malformed_is_one_shot() {
        let f = Faults::default();
        assert!(!f.take_malformed());
        f.send_malformed_event();
        assert!(f.take_malformed());
        assert!(!f.take_malformed());
    }

    #[test]
    fn expired_watches_count_down_and_clear() {
        let f = Faults::default();
        assert!(!f.take_expired_watch());
        f.expire_next_watches(2);
        assert!(f.take_expired_watch());
        f.clear();
        assert!(!f.take_expired_watch());
    }

    #[test]
    fn the_lost_event_is_the_first_one_met_and_only_it() {
        let f = Faults::default();
        assert!(!f.is_lost("default/a", 5));
        f.lose_next_event_of("default/a");
        assert!(!f.is_lost("default/b", 6), "another object");
        assert!(f.is_lost("default/a", 7));
        assert!(f.is_lost("default/a", 7), "every stream loses it");
        assert!(!f.is_lost("default/a", 9), "the next one comes");
        assert_eq!(f.lost_revision(), Some(7));
        f.clear();
        assert!(!f.is_lost("default/a", 7));
    }

    #[tokio::test]
    async fn refusal_expires() {
        let f = Faults::default();
        f.refuse_connections_for(Duration::from_millis(30));
        assert!(f.refusing());
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(!f.refusing());
    }
}
