//! The paced end of the open watches at a graceful shutdown (kube-apiserver's
//! `--shutdown-watch-termination-grace-period`).
//!
//! Ending every watch at once sends every client to the other replicas at once: a herd of
//! re-watches, and with clients that relist on a broken watch, of LISTs. So once watchmux stops
//! accepting, [`end_watches`] asks the watchers to end a batch at a time, at kube's rate
//! (`max(open watches ÷ grace, floor)` per second), and each watch ends cleanly just after a
//! BOOKMARK at its resourceVersion once it has sent what it had queued
//! (`WatcherShared::end_after_bookmark`): client-go and kube-rs re-watch from there on another
//! replica, with no LIST and nothing lost or repeated.
//!
//! Owns the pacing and the wait for the asked watches to end; it must not write to a transport
//! (the watch task sends the bookmark and ends its stream) nor close watchers (what has not ended
//! by the end of the drain is ended by the shutdown, `App::shutdown_within`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cache::ResourceCache;

/// How often a batch is asked to end: a batch is `rate × TICK` watches.
const TICK: Duration = Duration::from_millis(50);

/// How long the watches asked last may take to send their bookmark and end before the drain
/// stops waiting for them (a client that stopped reading never lets its watch end).
const LAST_BATCH_GRACE: Duration = Duration::from_secs(2);

/// What a drain did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Watches asked to end.
    pub asked: usize,
    /// Watches still open when the drain stopped waiting (the shutdown ends them).
    pub left: usize,
}

/// How a drain paces itself.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// The time the batches are spread over (zero: one batch).
    pub grace: Duration,
    /// The fewest watches a second.
    pub min_rate: u64,
}

impl Pace {
    /// Watches asked per batch for `open` watches.
    fn per_batch(&self, open: usize) -> usize {
        if self.grace.is_zero() {
            return open.max(1);
        }
        let rate = (open as f64 / self.grace.as_secs_f64()).max(self.min_rate as f64);
        ((rate * TICK.as_secs_f64()).ceil() as usize).max(1)
    }
}

/// Asks the watchers of `caches` to end, paced by `pace`, and waits for them to end, never past
/// `deadline`. Watches that register meanwhile (their request came before the listener closed)
/// are asked too.
pub async fn end_watches(caches: &[Arc<ResourceCache>], pace: Pace, deadline: Instant) -> Drained {
    let mut drained = Drained::default();
    let started = Instant::now();
    let mut queue = interleaved(caches);
    let per_batch = pace.per_batch(queue.len());
    tracing::info!(
        watches = queue.len(),
        per_second = per_batch as f64 / TICK.as_secs_f64(),
        "draining the open watches"
    );
    // The first batch goes now, the next one a tick later (an interval's first tick is now).
    let mut tick = tokio::time::interval_at(started + TICK, TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let last_wait = (started + pace.grace + LAST_BATCH_GRACE).min(deadline);
    loop {
        if queue.is_empty() {
            // Late arrivals, and whether every asked watch has ended.
            queue = interleaved(caches);
            let open: usize = caches.iter().map(|c| c.watcher_count()).sum();
            if queue.is_empty() && (open == 0 || Instant::now() >= last_wait) {
                drained.left = open;
                break;
            }
        }
        if Instant::now() >= deadline {
            drained.left = caches.iter().map(|c| c.watcher_count()).sum();
            break;
        }
        let n = per_batch.min(queue.len());
        drained.asked += ask(caches, queue.drain(..n));
        tick.tick().await;
    }
    tracing::info!(
        asked = drained.asked,
        left = drained.left,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "watches drained"
    );
    drained
}

/// The open watchers of every cache, as (cache, watcher id), taking the caches in turn: the
/// clients of every kind move a few at a time, rather than one kind's all at once.
fn interleaved(caches: &[Arc<ResourceCache>]) -> Vec<(usize, u64)> {
    let ids: Vec<Vec<u64>> = caches.iter().map(|c| c.open_watcher_ids()).collect();
    let longest = ids.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| {
            ids.iter()
                .enumerate()
                .filter_map(move |(c, v)| v.get(i).map(|id| (c, *id)))
        })
        .collect()
}

/// Asks the watchers `batch` names to end; returns how many were asked.
fn ask(caches: &[Arc<ResourceCache>], batch: impl Iterator<Item = (usize, u64)>) -> usize {
    let mut by_cache: Vec<Vec<u64>> = vec![Vec::new(); caches.len()];
    for (c, id) in batch {
        by_cache[c].push(id);
    }
    caches
        .iter()
        .zip(&by_cache)
        .filter(|(_, ids)| !ids.is_empty())
        .map(|(c, ids)| c.end_after_bookmark(ids))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CacheSettings, ResourceInfo};
    use crate::hub::Subscription;
    use kube_wire::selector::Filter;

    /// Two kinds' caches with `n` and `m` watchers; the subscriptions keep them registered.
    fn caches(n: usize, m: usize) -> (Vec<Arc<ResourceCache>>, Vec<Subscription>) {
        let mut subs = Vec::new();
        let mut caches = Vec::new();
        for (resource, kind, count) in [("pods", "Pod", n), ("configmaps", "ConfigMap", m)] {
            let info = ResourceInfo::new("", "v1", resource, kind, true);
            let (cache, writer) = ResourceCache::new(info, CacheSettings::default());
            writer.replace(Vec::new(), 1);
            let filter =
                Arc::new(Filter::parse("", kind, true, &[], None, "", "").expect("a filter"));
            for _ in 0..count {
                subs.push(cache.subscribe(filter.clone(), 1));
            }
            // The writer may go: the subscriptions hold the cache.
            drop(writer);
            caches.push(cache);
        }
        (caches, subs)
    }

    fn asked(subs: &[Subscription]) -> usize {
        subs.iter().filter(|s| s.shared().is_ending()).count()
    }

    /// The batches go one tick apart, taking the kinds in turn, and the drain waits for the
    /// asked watches (which these subscriptions never end) only until the last batch's grace.
    #[tokio::test(start_paused = true)]
    async fn batches_go_one_tick_apart_taking_the_kinds_in_turn() {
        let (caches, subs) = caches(6, 2);
        // 8 watches over 1 s at a floor of 40 a second: 2 per 50 ms tick.
        let pace = Pace {
            grace: Duration::from_secs(1),
            min_rate: 40,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let started = Instant::now();
        let drain = tokio::spawn({
            let caches = caches.clone();
            async move { end_watches(&caches, pace, deadline).await }
        });
        let mut seen = Vec::new();
        let mut first = None;
        for _ in 0..5 {
            tokio::task::yield_now().await;
            seen.push(asked(&subs));
            // The first batch took one watch of each kind.
            first.get_or_insert((asked(&subs[..6]), asked(&subs[6..])));
            tokio::time::advance(TICK).await;
        }
        assert_eq!(seen, [2, 4, 6, 8, 8]);
        assert_eq!(first, Some((1, 1)));
        let drained = drain.await.expect("the drain");
        assert_eq!(drained, Drained { asked: 8, left: 8 });
        // It stopped waiting at the grace plus the last batch's, not at the deadline.
        assert!(started.elapsed() < pace.grace + LAST_BATCH_GRACE + TICK * 2);
    }

    #[test]
    fn batches_spread_the_watches_over_the_grace_above_the_floor() {
        let pace = Pace {
            grace: Duration::from_secs(10),
            min_rate: 200,
        };
        // 150,000 watches over 10 s: 15,000 a second, 750 a batch.
        assert_eq!(pace.per_batch(150_000), 750);
        // A few watches end at the floor's rate, not spread over the grace.
        assert_eq!(pace.per_batch(30), 10);
        let at_once = Pace {
            grace: Duration::ZERO,
            min_rate: 200,
        };
        assert_eq!(at_once.per_batch(5_000), 5_000);
        assert_eq!(at_once.per_batch(0), 1);
    }
}
