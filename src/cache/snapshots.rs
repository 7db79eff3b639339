//! Snapshots kept for the continuations of paged LISTs, as kube-apiserver 1.34+ serves
//! `continue` pages and exact-resourceVersion LISTs from watch-cache snapshots (KEP-4988,
//! "ListFromCacheSnapshot").
//!
//! When a LIST page leaves items for a `continue` token, the [`Snapshot`] it was cut from is kept
//! here, keyed by its resourceVersion, so the next pages are cut from the same state even once
//! the event log no longer reaches back to it (while it does, the cache can also rebuild that
//! state, [`super::ResourceCache::snapshot_at`]). A kept snapshot costs nothing while the live
//! store shares its objects; it costs the objects changed or deleted since it was taken. What is
//! kept is bounded by [`Retention`]: a snapshot is dropped `max_age` after it was last used, and
//! the least recently used go first while more than `max_count` are kept or the bytes only they
//! hold exceed `max_bytes`. The bounds are enforced whenever a snapshot is kept, on every scrape
//! and on the cache's housekeeping tick.
//!
//! The bytes are counted incrementally from the event log: the first change of a key after a
//! snapshot's resourceVersion replaces (or deletes) exactly the object the snapshot holds — the
//! event's `prev`, the same `Arc` — so each logged event is looked at once per snapshot. A
//! snapshot whose events the log no longer holds is recounted once by diffing it against the
//! live store (imbl skips the subtrees the two share).
//!
//! Owns the kept snapshots and their accounting. It must not decide what a request reads (the
//! router does) nor change the cache; its lock is its own, never taken while the cache's lock is
//! held.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use imbl::ordmap::DiffItem;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::ResourceCache;
use super::event_log::{CacheEvent, FellBehind};
use super::record::Cached;
use super::store::Snapshot;

/// How long and how much the kept snapshots of one resource may hold (`[cache]`
/// `snapshot_retention_secs`, `snapshot_max_count`, `snapshot_max_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A kept snapshot is dropped this long after it last served a page; zero keeps none.
    pub max_age: Duration,
    /// At most this many snapshots are kept.
    pub max_count: usize,
    /// The objects only the kept snapshots still hold stay within this many bytes.
    pub max_bytes: u64,
}

/// What the kept snapshots of one resource hold (for the metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotUsage {
    /// Snapshots kept.
    pub count: usize,
    /// Bytes of object JSON (the stored bodies) the kept snapshots hold and the live store no
    /// longer does; an object several snapshots hold counts once for each. While its change is
    /// still in the event window, the log holds such an object too.
    pub bytes: u64,
}

/// Events read from the log per acquisition of the cache's lock while counting.
const BATCH: usize = 1024;

/// The kept snapshots of one resource.
#[derive(Debug, Default)]
pub(super) struct Retained {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_rv: BTreeMap<u64, Kept>,
    /// The bounds given with the latest `keep` (the configuration's); `None` before any.
    retention: Option<Retention>,
}

#[derive(Debug)]
struct Kept {
    snap: Snapshot,
    /// When it last served a page (or was kept).
    used: Instant,
    /// Bytes of objects of `snap` the live store no longer holds, as of `counted_to`.
    unshared: u64,
    /// The log's events up to this resourceVersion are counted in `unshared`.
    counted_to: u64,
}

impl Retained {
    /// Keeps `snap` (or marks the one kept at its resourceVersion as used), then enforces
    /// `retention`.
    pub(super) fn keep(&self, cache: &ResourceCache, snap: &Snapshot, retention: &Retention) {
        let mut inner = self.inner.lock();
        inner.retention = Some(*retention);
        let now = Instant::now();
        if retention.max_age.is_zero() {
            inner.by_rv.clear();
            return;
        }
        inner
            .by_rv
            .entry(snap.rv)
            .and_modify(|k| k.used = now)
            .or_insert_with(|| Kept {
                snap: snap.clone(),
                used: now,
                unshared: 0,
                counted_to: snap.rv,
            });
        inner.enforce(cache, now);
    }

    /// The snapshot kept at exactly `rv`, unless it expired; it counts as used.
    pub(super) fn get(&self, rv: u64) -> Option<Snapshot> {
        let mut inner = self.inner.lock();
        let max_age = inner.retention?.max_age;
        let now = Instant::now();
        if inner.by_rv.get(&rv).is_some_and(|k| !k.alive(now, max_age)) {
            inner.by_rv.remove(&rv);
        }
        let k = inner.by_rv.get_mut(&rv)?;
        k.used = now;
        Some(k.snap.clone())
    }

    /// Drops every kept snapshot (memory pressure); returns how many.
    pub(super) fn clear(&self) -> usize {
        let mut inner = self.inner.lock();
        let n = inner.by_rv.len();
        inner.by_rv.clear();
        n
    }

    /// Drops what expired and what exceeds the bounds.
    pub(super) fn prune(&self, cache: &ResourceCache) {
        let mut inner = self.inner.lock();
        if !inner.by_rv.is_empty() {
            inner.enforce(cache, Instant::now());
        }
    }

    /// Count and bytes, after pruning.
    pub(super) fn usage(&self, cache: &ResourceCache) -> SnapshotUsage {
        let mut inner = self.inner.lock();
        inner.enforce(cache, Instant::now());
        SnapshotUsage {
            count: inner.by_rv.len(),
            bytes: inner.bytes(),
        }
    }
}

impl Inner {
    fn bytes(&self) -> u64 {
        self.by_rv.values().map(|k| k.unshared).sum()
    }

    /// Drops the expired snapshots, brings the others' byte counts up to date, then drops the
    /// least recently used while the count or the bytes exceed the bounds.
    fn enforce(&mut self, cache: &ResourceCache, now: Instant) {
        let Some(r) = self.retention else {
            return;
        };
        self.by_rv.retain(|_, k| k.alive(now, r.max_age));
        for k in self.by_rv.values_mut() {
            k.count(cache);
        }
        while self.by_rv.len() > r.max_count || self.bytes() > r.max_bytes {
            let Some(lru) = self
                .by_rv
                .iter()
                .min_by_key(|(_, k)| k.used)
                .map(|(rv, _)| *rv)
            else {
                break;
            };
            self.by_rv.remove(&lru);
        }
    }
}

impl Kept {
    fn alive(&self, now: Instant, max_age: Duration) -> bool {
        now.saturating_duration_since(self.used) < max_age
    }

    /// Counts the logged events after `counted_to`; recounts against the live store when the
    /// log no longer holds them all.
    fn count(&mut self, cache: &ResourceCache) {
        // A relist that restarts the log between the recount and the read makes it fall behind
        // again; a third time waits for the next call.
        let mut recounts = 0;
        loop {
            match cache.events_after(self.counted_to, BATCH) {
                Ok(batch) => {
                    for ev in &batch.events {
                        self.count_event(ev);
                    }
                    if batch.at_head {
                        return;
                    }
                }
                Err(FellBehind) if recounts < 2 => {
                    recounts += 1;
                    let live = cache.snapshot();
                    self.unshared = unshared_bytes(&self.snap, &live);
                    self.counted_to = live.rv;
                }
                Err(FellBehind) => return,
            }
        }
    }

    /// One logged change: if it replaced the object this snapshot holds, that object is no
    /// longer shared with the live store.
    fn count_event(&mut self, ev: &CacheEvent) {
        if ev.rv <= self.counted_to {
            return;
        }
        self.counted_to = ev.rv;
        let Some(prev) = &ev.prev else {
            return;
        };
        let key = ev.obj.rec.key();
        if self
            .snap
            .objects
            .get(key.as_str())
            .is_some_and(|o| Arc::ptr_eq(o, prev))
        {
            self.unshared += size(prev);
        }
    }
}

/// What an object counts for: its stored body (as `watchmux_cache_bytes` counts it).
fn size(c: &Cached) -> u64 {
    c.stored().len() as u64
}

/// Bytes of the objects of `snap` that `live` does not hold.
fn unshared_bytes(snap: &Snapshot, live: &Snapshot) -> u64 {
    snap.objects
        .diff(&live.objects)
        .map(|d| match d {
            DiffItem::Remove(_, old) | DiffItem::Update { old: (_, old), .. } => size(old),
            DiffItem::Add(..) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::record::decode_object;
    use crate::cache::{CacheSettings, CacheWriter, ResourceInfo};
    use kube_wire::event::EventType;
    use kube_wire::selector::Filter;

    fn pods() -> ResourceInfo {
        let mut i = ResourceInfo::new("", "v1", "pods", "Pod", true);
        i.index_fields = vec!["spec.nodeName".into()];
        i
    }

    fn pod(name: &str, node: &str, rv: u64) -> Cached {
        let j = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}},"spec":{{"nodeName":"{node}"}}}}"#
        );
        decode_object(&pods(), j.as_bytes()).unwrap()
    }

    /// `(key, rv)` of every object, in key order.
    fn state(s: &Snapshot) -> Vec<(String, u64)> {
        s.objects
            .values()
            .map(|o| (o.rec.key(), o.rec.rv))
            .collect()
    }

    /// Keys on `node` as the index answers (the filter pins the indexed field).
    fn on_node(cache: &ResourceCache, s: &Snapshot, node: &str) -> Vec<String> {
        let f = Filter::parse(
            "",
            "Pod",
            true,
            &[],
            None,
            "",
            &format!("spec.nodeName={node}"),
        )
        .unwrap();
        s.select(&cache.info, None, &f)
            .map(|o| o.rec.key())
            .collect()
    }

    /// A cache synced at RV 10 with a, b on n1 and c on n2, then 11: a → n2, 12: b deleted,
    /// 13: d added on n1, 14: c modified (same node).
    fn history(settings: CacheSettings) -> (Arc<ResourceCache>, CacheWriter) {
        let (cache, w) = ResourceCache::new(pods(), settings);
        w.replace(
            vec![pod("a", "n1", 2), pod("b", "n1", 3), pod("c", "n2", 4)],
            10,
        );
        assert!(w.apply(EventType::Modified, pod("a", "n2", 11)));
        assert!(w.apply(EventType::Deleted, pod("b", "n1", 12)));
        assert!(w.apply(EventType::Added, pod("d", "n1", 13)));
        assert!(w.apply(EventType::Modified, pod("c", "n2", 14)));
        (cache, w)
    }

    #[test]
    fn snapshot_at_rebuilds_each_past_state_with_its_indexes() {
        let (cache, _w) = history(CacheSettings::default());
        let at = |rv| cache.snapshot_at(rv).expect("inside the window");
        let k = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
            v.iter().map(|(k, r)| (k.to_string(), *r)).collect()
        };
        assert_eq!(state(&at(10)), k(&[("ns/a", 2), ("ns/b", 3), ("ns/c", 4)]));
        assert_eq!(on_node(&cache, &at(10), "n1"), ["ns/a", "ns/b"]);
        assert_eq!(on_node(&cache, &at(10), "n2"), ["ns/c"]);
        assert_eq!(state(&at(11)), k(&[("ns/a", 11), ("ns/b", 3), ("ns/c", 4)]));
        assert_eq!(on_node(&cache, &at(11), "n1"), ["ns/b"]);
        assert_eq!(on_node(&cache, &at(11), "n2"), ["ns/a", "ns/c"]);
        assert_eq!(state(&at(12)), k(&[("ns/a", 11), ("ns/c", 4)]));
        assert!(on_node(&cache, &at(12), "n1").is_empty());
        assert!(
            at(12).by_field[0].get("n1").is_none(),
            "an emptied bucket is dropped, as the live index does"
        );
        assert_eq!(
            state(&at(13)),
            k(&[("ns/a", 11), ("ns/c", 4), ("ns/d", 13)])
        );
        assert_eq!(on_node(&cache, &at(13), "n1"), ["ns/d"]);
        // The head: the live state, indexes included.
        assert_eq!(state(&at(14)), state(&cache.snapshot()));
        assert_eq!(at(14).by_field, cache.snapshot().by_field);
        // Each snapshot says the resourceVersion it was asked for, and the live store is intact.
        assert_eq!(at(12).rv, 12);
        assert_eq!(
            state(&cache.snapshot()),
            k(&[("ns/a", 11), ("ns/c", 14), ("ns/d", 13)])
        );
        assert_eq!(on_node(&cache, &cache.snapshot(), "n2"), ["ns/a", "ns/c"]);
    }

    #[test]
    fn snapshot_at_is_refused_outside_the_window_and_ahead_of_the_cache() {
        let (cache, w) = history(CacheSettings::default());
        assert!(cache.snapshot_at(9).is_none(), "before the first list");
        assert!(cache.snapshot_at(15).is_none(), "ahead of the cache");
        w.advance(20);
        assert_eq!(
            state(&cache.snapshot_at(17).unwrap()),
            state(&cache.snapshot())
        );
        // Three events kept: 12, 13, 14 after 11 left the log; the floor is 11 (oldest − 1),
        // as for a watch.
        let (cache, _w) = history(CacheSettings {
            window_count: 3,
            ..CacheSettings::default()
        });
        assert_eq!(cache.check_watch_start(10), Err(11));
        assert!(cache.snapshot_at(10).is_none(), "event 11 left the log");
        let s = cache.snapshot_at(11).expect("every event after 11 is held");
        assert_eq!(
            state(&s),
            [("ns/a", 11), ("ns/b", 3), ("ns/c", 4)].map(|(k, r)| (k.to_string(), r))
        );
    }

    #[test]
    fn a_bridged_relist_is_not_rebuilt_through() {
        let (cache, w) = history(CacheSettings::default());
        // The watch broke after 14; 15–19 happened upstream; the relist at 20 is bridged.
        let out = w.replace(vec![pod("a", "n2", 11), pod("c", "n1", 17)], 20);
        assert!(matches!(out, crate::cache::bridge::Outcome::Bridged { .. }));
        assert!(cache.snapshot_at(18).is_none(), "inside the bridged range");
        assert!(cache.snapshot_at(14).is_none(), "below it");
        assert_eq!(
            state(&cache.snapshot_at(20).unwrap()),
            state(&cache.snapshot())
        );
    }

    fn keep_all() -> Retention {
        Retention {
            max_age: Duration::from_secs(60),
            max_count: 10,
            max_bytes: u64::MAX,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn kept_snapshots_expire_after_their_last_use() {
        let (cache, w) = history(CacheSettings::default());
        let s = cache.snapshot();
        cache.retain_snapshot(&s, &keep_all());
        assert!(w.apply(EventType::Added, pod("e", "n1", 15)));
        tokio::time::advance(Duration::from_secs(50)).await;
        let got = cache.retained_snapshot(14).expect("kept");
        assert_eq!(state(&got), state(&s), "the state it was kept at");
        assert!(cache.retained_snapshot(15).is_none(), "only its own RV");
        // Used at 50 s: alive until 110 s.
        tokio::time::advance(Duration::from_secs(50)).await;
        assert_eq!(cache.retained_snapshots().count, 1);
        tokio::time::advance(Duration::from_secs(10)).await;
        w.reap();
        assert_eq!(
            cache.retained_snapshots().count,
            0,
            "housekeeping dropped it"
        );
        assert!(cache.retained_snapshot(14).is_none());
        // Zero retention keeps nothing.
        cache.retain_snapshot(
            &cache.snapshot(),
            &Retention {
                max_age: Duration::ZERO,
                ..keep_all()
            },
        );
        assert_eq!(cache.retained_snapshots(), SnapshotUsage::default());
    }

    #[tokio::test(start_paused = true)]
    async fn kept_snapshots_are_bounded_by_count_then_by_bytes_least_recent_first() {
        let (cache, w) = history(CacheSettings::default());
        let two = Retention {
            max_count: 2,
            ..keep_all()
        };
        for rv in [15, 16, 17] {
            cache.retain_snapshot(&cache.snapshot(), &two);
            tokio::time::advance(Duration::from_secs(1)).await;
            assert!(w.apply(EventType::Added, pod(&format!("x{rv}"), "n1", rv)));
        }
        // 14 was kept first; 15 and 16 remain.
        assert!(cache.retained_snapshot(14).is_none());
        assert!(cache.retained_snapshot(15).is_some());
        assert!(cache.retained_snapshot(16).is_some());
        // Nothing they hold was replaced yet: adds share everything.
        assert_eq!(cache.retained_snapshots().bytes, 0);

        // Modifying `a` and deleting `c` leaves their old versions to the two snapshots only.
        let a = cache.snapshot().objects.get("ns/a").unwrap().json().len() as u64;
        let c = cache.snapshot().objects.get("ns/c").unwrap().json().len() as u64;
        assert!(w.apply(EventType::Modified, pod("a", "n1", 18)));
        assert!(w.apply(EventType::Modified, pod("a", "n2", 19)));
        assert!(w.apply(EventType::Deleted, pod("c", "n2", 20)));
        let u = cache.retained_snapshots();
        assert_eq!(u.count, 2);
        assert_eq!(
            u.bytes,
            2 * (a + c),
            "each snapshot's old a and c, once each"
        );

        // A byte bound below that drops the least recently used (15; 16 was used last).
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(cache.retained_snapshot(16).is_some());
        let tight = Retention {
            max_bytes: a + c,
            ..two
        };
        cache.retain_snapshot(&cache.snapshot(), &tight);
        let u = cache.retained_snapshots();
        assert_eq!(u.count, 2, "16 and the new one at 20");
        assert_eq!(u.bytes, a + c);
        assert!(cache.retained_snapshot(15).is_none());
        assert!(cache.retained_snapshot(16).is_some());
        assert!(cache.retained_snapshot(20).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_are_recounted_once_the_log_no_longer_reaches_a_snapshot() {
        let (cache, w) = history(CacheSettings {
            window_count: 2,
            ..CacheSettings::default()
        });
        let s = cache.snapshot();
        let a = s.objects.get("ns/a").unwrap().json().len() as u64;
        cache.retain_snapshot(&s, &keep_all());
        // Three changes of `a`: the first (which replaced the kept version) leaves the log
        // before anything counted it.
        for rv in 15..18 {
            assert!(w.apply(EventType::Modified, pod("a", "n1", rv)));
        }
        assert!(cache.check_watch_start(14).is_err());
        assert_eq!(cache.retained_snapshots().bytes, a);
        // The kept snapshot still answers with the state at 14.
        assert_eq!(state(&cache.retained_snapshot(14).unwrap()), state(&s));
    }
}
