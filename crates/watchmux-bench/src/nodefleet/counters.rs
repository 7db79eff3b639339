//! What the whole simulated fleet saw, in one place every node's tasks update: counters of
//! requests and their outcomes (429s, 410s, relists, streams that ended or broke), gauges of
//! informers waiting for their initial sync and of streams open, the delivery latency (the
//! bench's [`WatchStats`]: write-time annotation → receipt), and latency histograms of the
//! Lease writes and of the probe's GETs and LISTs.
//!
//! Relaxed atomics and lock-free histograms only, so two cores' worth of node tasks never wait
//! on each other; a phase reads a [`Tally`] before and after and reports the difference.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::super::client::WatchStats;
use super::super::hist::Histogram;

macro_rules! counts {
    ($($(#[doc = $doc:literal])* $f:ident,)*) => {
        /// Monotonic counters of the fleet.
        #[derive(Debug, Default)]
        pub struct Counts {
            $($(#[doc = $doc])* pub $f: AtomicU64,)*
        }

        /// The counters' values at one moment.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct Tally {
            $($(#[doc = $doc])* pub $f: u64,)*
        }

        impl Counts {
            /// Their values now.
            pub fn tally(&self) -> Tally {
                Tally { $($f: self.$f.load(Ordering::Relaxed),)* }
            }
        }

        impl Tally {
            /// What was added since `earlier`.
            pub fn since(&self, earlier: &Tally) -> Tally {
                Tally { $($f: self.$f.saturating_sub(earlier.$f),)* }
            }
        }
    };
}

counts! {
    /// Watch requests sent (watch-lists and re-watches).
    watch_requests,
    /// Watch-lists sent (an informer's first sync, and each relist).
    watch_lists,
    /// Watch-lists answered 200 after an informer's first: relists (after a 410, or a
    /// watch-list cut before its end).
    relists,
    /// Initial syncs completed (the `k8s.io/initial-events-end` bookmark received).
    syncs,
    /// Watch requests answered 429 (retried after `Retry-After`).
    watch_429,
    /// Watch requests answered 410, and ERROR events with code 410 on a stream.
    gone_410,
    /// Watch requests answered with another status than 200, 410 or 429.
    watch_other_status,
    /// ERROR events 504 `Too large resource version` (retry after 1 s): kube's answer to a
    /// watch-list its watch cache could not prove fresh in time, re-watched after a back-off.
    error_504,
    /// ERROR events other than 410 and 504.
    error_events,
    /// Watch requests that got no answer (the connection failed or was closed).
    send_failures,
    /// Watch requests given up (and sent again) for lack of any answer or error 1 s after the
    /// connection they went on was replaced: hyper's dispatch can lose one that races the end
    /// of its connection (see `informer::ORPHAN_GRACE`).
    orphaned,
    /// Streams the server ended cleanly before their `timeoutSeconds`.
    ended_early,
    /// Streams that ended at their `timeoutSeconds` (re-watched from their resourceVersion).
    ended_timeout,
    /// Streams that broke (reset, connection lost).
    broken,
    /// Body bytes of every watch stream received.
    bytes,
    /// HTTP/2 connections established.
    dials,
    /// Connection attempts that failed (TCP, TLS or the HTTP/2 handshake).
    dial_failures,
    /// Established connections that ended.
    conns_lost,
    /// Lease writes (create, then PUT every 10 s) answered 2xx.
    lease_ok,
    /// Lease writes answered 429.
    lease_429,
    /// Lease writes answered otherwise, or not at all.
    lease_errors,
    /// Probe GETs and LISTs answered 429.
    probe_429,
    /// Probe GETs and LISTs answered otherwise than 200 or 429, or not at all.
    probe_errors,
}

/// The fleet's shared state: counters, gauges and histograms.
#[derive(Default)]
pub struct Fleet {
    /// Counters.
    pub counts: Counts,
    /// Informers whose initial sync (or relist) has not ended yet.
    pub pending_sync: AtomicI64,
    /// Informers running now.
    pub informers: AtomicI64,
    /// Watch streams open now (response head received, not ended).
    pub streaming: AtomicI64,
    /// Events, bookmarks and the delivery latency of writes stamped inside the window.
    pub stats: WatchStats,
    /// Lease write latency, µs.
    pub lease_latency: Histogram,
    /// Probe GET latency (single objects), µs.
    pub get_latency: Histogram,
    /// Probe LIST latency, µs.
    pub list_latency: Histogram,
    /// The first error any client met (for the report and the smoke test).
    pub first_error: parking_lot::Mutex<Option<String>>,
}

impl Fleet {
    /// Keeps `why` if it is the first error seen.
    pub fn error(&self, why: impl FnOnce() -> String) {
        let mut g = self.first_error.lock();
        if g.is_none() {
            *g = Some(why());
        }
    }

    /// Adds one to a counter.
    pub fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A gauge's value.
    pub fn gauge(g: &AtomicI64) -> i64 {
        g.load(Ordering::Relaxed)
    }

    /// Every informer synced (none waiting for its initial sync or a relist).
    pub fn synced(&self) -> bool {
        Fleet::gauge(&self.pending_sync) == 0
    }

    /// Every informer synced and streaming.
    pub fn streaming(&self) -> bool {
        self.synced() && Fleet::gauge(&self.streaming) == Fleet::gauge(&self.informers)
    }

    /// Waits until `done` holds (checked every 50 ms), at most `max`; how long it took.
    pub async fn until(
        &self,
        max: std::time::Duration,
        done: impl Fn(&Fleet) -> bool,
    ) -> Option<std::time::Duration> {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < max {
            if done(self) {
                return Some(t0.elapsed());
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        None
    }

    /// Resets the histograms a phase reports (the delivery latency, the Lease and probe
    /// latencies).
    pub fn reset_latencies(&self) {
        self.stats.latency.reset();
        self.lease_latency.reset();
        self.get_latency.reset();
        self.list_latency.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_subtract() {
        let f = Fleet::default();
        Fleet::add(&f.counts.watch_429);
        let a = f.counts.tally();
        Fleet::add(&f.counts.watch_429);
        Fleet::add(&f.counts.relists);
        let d = f.counts.tally().since(&a);
        assert_eq!((d.watch_429, d.relists, d.syncs), (1, 1, 0));
        f.error(|| "first".into());
        f.error(|| "second".into());
        assert_eq!(f.first_error.lock().as_deref(), Some("first"));
    }
}
