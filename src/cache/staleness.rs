//! How stale a cache may be: whether it follows the upstream now (its watch is up) and, when
//! not, since when it has not. Wall-clock time, because the answer must survive a restart:
//! a cache restored from disk is as old as its persisted freshness mark, not as old as the
//! process.
//!
//! The reflector marks the cache live when the upstream accepts its watch (after a list, the
//! cache then holds the upstream's state and follows it) and broken at the first failure of a
//! list, watch or discovery; a watch that merely ends (a timeout) and is re-opened at once
//! changes nothing. Readers ask for the age ([`Staleness::age`]): zero while live, else the
//! time since the cache was last known current. What is done with the age (`cache.max_staleness`,
//! the response header, `/readyz`) is downstream's and the metrics'.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now (0 on a clock before 1970).
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The marker of "live" in [`Staleness::since`].
const LIVE: u64 = 0;

/// Whether a cache follows the upstream, and since when it has not (see the module doc).
#[derive(Debug)]
pub struct Staleness {
    /// Unix milliseconds the cache was last known current; [`LIVE`] while it follows the
    /// upstream.
    since: AtomicU64,
}

impl Default for Staleness {
    /// A new cache follows the upstream as soon as it has a state (its first list).
    fn default() -> Self {
        Staleness {
            since: AtomicU64::new(LIVE),
        }
    }
}

impl Staleness {
    /// The upstream accepted the cache's watch: the cache follows it from now on.
    pub fn live(&self) {
        self.since.store(LIVE, Ordering::Relaxed);
    }

    /// The upstream failed: the cache was last known current now (unless it already was not
    /// following it; then the earlier moment stays).
    pub fn broken(&self) {
        let _ = self.since.compare_exchange(
            LIVE,
            now_unix_ms().max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The cache holds data last known current at `unix_ms` (restored from disk) and does not
    /// follow the upstream yet.
    pub fn stale_since(&self, unix_ms: u64) {
        self.since.store(unix_ms.max(1), Ordering::Relaxed);
    }

    /// Whether the cache follows the upstream now.
    pub fn is_live(&self) -> bool {
        self.since.load(Ordering::Relaxed) == LIVE
    }

    /// `(unix_ms, live)`: when the cache was last known current (now, while live).
    pub fn last_current(&self) -> (u64, bool) {
        match self.since.load(Ordering::Relaxed) {
            LIVE => (now_unix_ms(), true),
            since => (since, false),
        }
    }

    /// How old the cache's view may be: zero while it follows the upstream, else the time
    /// since it was last known current (zero if the clock went back).
    pub fn age(&self) -> Duration {
        match self.since.load(Ordering::Relaxed) {
            LIVE => Duration::ZERO,
            since => Duration::from_millis(now_unix_ms().saturating_sub(since)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_broken_and_restored() {
        let s = Staleness::default();
        assert!(s.is_live());
        assert_eq!(s.age(), Duration::ZERO);
        s.broken();
        assert!(!s.is_live());
        let (first, live) = s.last_current();
        assert!(!live && first > 0);
        // A second failure keeps the first moment.
        s.broken();
        assert_eq!(s.last_current().0, first);
        s.live();
        assert_eq!((s.age(), s.is_live()), (Duration::ZERO, true));
        // Restored data from a minute ago.
        s.stale_since(now_unix_ms() - 60_000);
        let age = s.age();
        assert!(
            age >= Duration::from_secs(60) && age < Duration::from_secs(120),
            "{age:?}"
        );
        // A clock that went back: age zero, never an underflow.
        s.stale_since(now_unix_ms() + 3_600_000);
        assert_eq!(s.age(), Duration::ZERO);
    }
}
