//! The memory budget (`[cache] memory_limit`): what the caches hold is counted against one limit
//! for the whole process, and past thresholds of it watchmux sheds load in a fixed order.
//!
//! **What is counted.** Whatever holds memory on a client's or the upstream's behalf carries a
//! [`Charge`], released when it is dropped, so the count follows the memory itself wherever it
//! is kept (the store, the event log, a kept snapshot, a watcher's queue, a LIST body being
//! sent):
//! * every object version the reflector put into a cache: its JSON, its record and, once a
//!   protobuf client read it, its protobuf copy ([`super::Cached`]);
//! * every logged event: its fixed part and each wire-form frame once encoded
//!   ([`super::CacheEvent`]);
//! * every registered watcher: [`WATCHER_BYTES`] for its queue, task and connection state.
//!
//! Objects held by several of those (the store and a snapshot, the log and a queue) are counted
//! once: the charge lives in the object.
//!
//! **What happens past the limit**, by [`Pressure`], in this order (each step also holds above
//! the next threshold):
//! 1. from 80 % ([`Pressure::Soft`]): no snapshot is kept for `continue` pages (those kept are
//!    dropped; continuations are rebuilt from the event log or answered by the upstream), and a
//!    protobuf transcode is no longer kept beside the JSON (each read transcodes again);
//! 2. from 90 % ([`Pressure::Trim`]): event logs are cut from their oldest end until the total
//!    is back under 90 % or the log is empty, and a watcher's queue counts as full from
//!    [`crate::hub::SHALLOW_QUEUE`] events (queued events are pinned until read; the log's can
//!    be cut), so a slow watcher soon reads the log instead; watchers whose cursor falls out of
//!    the log — the ones furthest behind — are closed as the cut passes them, with kube's 410
//!    Expired ERROR event when their connection has room for it (informers relist on it), and
//!    what they had queued is given back at once (a live watcher holding that many events falls
//!    behind first), so the cut goes no further than the memory needs. The window for new watches
//!    from an old resourceVersion shrinks accordingly (410 Expired, as from kube);
//! 3. from 100 % ([`Pressure::Full`]): new LISTs and WATCHes that the cache would serve are
//!    answered 429 with `Retry-After` (kube's Status); reads of one object, writes and everything
//!    passed through are not affected.
//!
//! Objects themselves are never dropped: a cache that misses objects would answer wrongly. So
//! the only growth past the limit is the upstream's own objects (a cluster with more objects
//! than the budget: raise the limit) plus what is in flight when a step starts: the newest
//! event and its frames, one more watcher admitted as the budget filled, the short queues of
//! existing watchers and the snapshots of LIST bodies being sent. Frames already handed to a
//! connection's writer stop counting when their event leaves the log.
//!
//! This module owns the counting and the thresholds; the cache, the snapshots, the protobuf
//! copies and the router act on [`MemoryBudget::pressure`]. It takes no lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What one registered watcher is counted for: its queue, its task and its connection's state.
/// From the heap profile of an idle HTTP/1.1 watch (issue 17's massif run: about 12 KB of
/// hyper's per-connection state and 2.7 KB of tasks and channels), rounded up.
pub const WATCHER_BYTES: u64 = 16 << 10;

/// How close the total is to the limit (see the module doc for what each level does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pressure {
    /// Under 80 % of the limit, or no limit.
    None = 0,
    /// From 80 %: keep no snapshots and no protobuf copies.
    Soft = 1,
    /// From 90 %: trim event logs, closing the watchers that fall out.
    Trim = 2,
    /// From 100 %: refuse new cached LISTs and WATCHes.
    Full = 3,
}

/// What load shedding did, counted for the metrics (`watchmux_memory_shed_total{action}`).
#[derive(Debug, Default)]
pub struct ShedCounters {
    /// Kept snapshots dropped, or not kept, under pressure.
    pub snapshots: AtomicU64,
    /// Protobuf transcodes not kept beside the JSON under pressure.
    pub protobuf_copies: AtomicU64,
    /// Events cut from event logs under pressure.
    pub log_events: AtomicU64,
    /// Watchers closed because the trimmed log no longer held their cursor.
    pub watchers: AtomicU64,
    /// LISTs and WATCHes refused with 429.
    pub requests: AtomicU64,
}

/// The process-wide budget.
#[derive(Debug, Default)]
pub struct MemoryBudget {
    /// `cache.memory_limit` in bytes; 0: no limit (counted, never shed).
    limit: u64,
    used: AtomicU64,
    peak: AtomicU64,
    /// What shedding did.
    pub shed: ShedCounters,
}

impl MemoryBudget {
    /// A budget of `limit` bytes (0: unlimited).
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(MemoryBudget {
            limit,
            ..Default::default()
        })
    }

    /// A budget that only counts.
    pub fn unlimited() -> Arc<Self> {
        Self::new(0)
    }

    /// The limit in bytes (0: none).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes counted now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The most ever counted at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// The level the total is at now.
    pub fn pressure(&self) -> Pressure {
        self.pressure_at(self.used())
    }

    fn pressure_at(&self, used: u64) -> Pressure {
        if self.limit == 0 {
            return Pressure::None;
        }
        // Compared in u128: a limit near u64::MAX must not overflow.
        let (u, l) = (u128::from(used) * 10, u128::from(self.limit));
        if u >= l * 10 {
            Pressure::Full
        } else if u >= l * 9 {
            Pressure::Trim
        } else if u >= l * 8 {
            Pressure::Soft
        } else {
            Pressure::None
        }
    }

    /// Whether the total is above the level where trimming stops (90 % of the limit).
    pub fn above_trim(&self) -> bool {
        self.pressure() >= Pressure::Trim
    }

    fn add(&self, n: u64) {
        let now = self.used.fetch_add(n, Ordering::Relaxed).saturating_add(n);
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn sub(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::Relaxed);
    }

    /// The account of one resource in this budget.
    pub fn account(self: &Arc<Self>) -> Arc<Account> {
        Arc::new(Account {
            budget: self.clone(),
            used: AtomicU64::new(0),
        })
    }
}

/// One resource's share of the budget (`watchmux_cache_memory_bytes{resource}`).
#[derive(Debug)]
pub struct Account {
    budget: Arc<MemoryBudget>,
    used: AtomicU64,
}

impl Account {
    /// An account in a budget of its own, unlimited (tests, tools).
    pub fn detached() -> Arc<Account> {
        MemoryBudget::unlimited().account()
    }

    /// The budget this account counts in.
    pub fn budget(&self) -> &Arc<MemoryBudget> {
        &self.budget
    }

    /// Bytes counted for this resource now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Counts `bytes` until the returned charge is dropped.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Charge {
        let c = Charge {
            account: self.clone(),
            bytes: AtomicU64::new(0),
        };
        c.add(bytes);
        c
    }
}

/// Bytes counted in an [`Account`] while this lives; more can be added to it (a protobuf copy
/// made later, a frame encoded on first use).
#[derive(Debug)]
pub struct Charge {
    account: Arc<Account>,
    bytes: AtomicU64,
}

impl Charge {
    /// Counts `n` more bytes, released with the rest.
    pub fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
        self.account.used.fetch_add(n, Ordering::Relaxed);
        self.account.budget.add(n);
    }

    /// The account it counts in.
    pub fn account(&self) -> &Arc<Account> {
        &self.account
    }

    /// Bytes counted by this charge.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let n = *self.bytes.get_mut();
        self.account.used.fetch_sub(n, Ordering::Relaxed);
        self.account.budget.sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_count_while_they_live_and_levels_follow_the_total() {
        let b = MemoryBudget::new(1000);
        let a = b.account();
        let c1 = a.charge(700);
        assert_eq!((b.used(), b.pressure()), (700, Pressure::None));
        let c2 = a.charge(100);
        assert_eq!(b.pressure(), Pressure::Soft);
        c2.add(100);
        assert_eq!((a.used(), b.pressure()), (900, Pressure::Trim));
        let c3 = b.account().charge(100);
        assert_eq!((b.used(), b.pressure()), (1000, Pressure::Full));
        drop(c2);
        assert_eq!(
            (b.used(), a.used(), b.pressure()),
            (800, 700, Pressure::Soft)
        );
        drop((c1, c3));
        assert_eq!(
            (b.used(), b.peak(), b.pressure()),
            (0, 1000, Pressure::None)
        );
    }

    #[test]
    fn no_limit_counts_but_never_sheds_and_huge_limits_do_not_overflow() {
        let b = MemoryBudget::unlimited();
        let _c = b.account().charge(u64::MAX / 2);
        assert_eq!(b.pressure(), Pressure::None);
        let b = MemoryBudget::new(u64::MAX);
        let _c = b.account().charge(u64::MAX - 1);
        assert_eq!(b.pressure(), Pressure::Trim);
    }
}
