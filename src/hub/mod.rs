//! The hub of one resource: its registered watchers and the dispatch of each logged event to
//! the live watchers it concerns.
//!
//! A watcher is registered twice over: the hub holds a [`Subscriber`] (filter, queue sender,
//! shared state) and the watch task holds the matching [`Subscription`] (queue receiver, shared
//! state), whose drop unregisters it. [`Hub::dispatch`] offers an event only to the watchers the
//! [`index`] picks, checks each one's filter, and pushes the frame type it receives into its
//! bounded queue; a full queue makes the watcher fall behind (it then reads the log itself, see
//! [`watcher`]), so a slow client never costs the dispatcher memory or time.
//!
//! The hub lives inside the cache's state, under its lock: an event is logged and dispatched
//! atomically, so no event falls between a watcher's two modes. It must not own events or
//! objects (the cache does), encode frames (the event does, once) nor write to any transport.

pub mod index;
pub mod watcher;

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::{CacheEvent, Cached, ResourceInfo};
use kube_wire::selector::Filter;

pub use index::Bucket;
pub use watcher::{Delivery, Subscription, WatcherShared};

/// The hub's end of one watcher (the watch task's end is [`Subscription`]): what the dispatcher
/// needs to offer it an event.
#[derive(Debug)]
pub struct Subscriber {
    /// Which events it receives, and as what.
    filter: Arc<Filter>,
    /// State shared with its task, its queue included.
    shared: Arc<WatcherShared>,
    /// Where the index files it.
    bucket: Bucket,
}

/// What one dispatch cost and did (for the cache's counters).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dispatched {
    /// Watcher filters evaluated.
    pub evaluated: u64,
    /// Events handed to live watchers' queues.
    pub delivered: u64,
}

/// Watchers by id, and the dispatch index.
#[derive(Debug, Default)]
pub struct Hub {
    subscribers: HashMap<u64, Subscriber>,
    index: index::DispatchIndex,
    next_id: u64,
}

/// Under memory pressure, the queue depth from which a watcher reads the log instead.
pub const SHALLOW_QUEUE: usize = 16;

impl Hub {
    /// Adds a watcher; returns its id.
    pub fn insert(
        &mut self,
        info: &ResourceInfo,
        filter: Arc<Filter>,
        shared: Arc<WatcherShared>,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let bucket = Bucket::of(info, &filter);
        self.index.insert(bucket.clone(), id);
        self.subscribers.insert(
            id,
            Subscriber {
                filter,
                shared,
                bucket,
            },
        );
        id
    }

    /// Removes a watcher (nothing if it is already gone).
    pub fn remove(&mut self, id: u64) {
        if let Some(w) = self.subscribers.remove(&id) {
            self.index.remove(&w.bucket, id);
        }
    }

    /// Number of watchers.
    pub fn len(&self) -> usize {
        self.subscribers.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    /// Number of watchers every event is checked against.
    pub fn unindexed(&self) -> usize {
        self.index.unindexed()
    }

    /// The watchers a change from `prev` to `obj` may concern.
    pub fn candidates<'a>(
        &'a self,
        info: &ResourceInfo,
        obj: &Cached,
        prev: Option<&Cached>,
    ) -> impl Iterator<Item = (u64, &'a Subscriber)> + 'a {
        self.index
            .candidates(info, obj, prev)
            .into_iter()
            .filter_map(move |id| self.subscribers.get(&id).map(|w| (id, w)))
    }

    /// Hands `ev` to every live watcher it concerns, as the type that watcher receives it as.
    /// A watcher whose queue is full falls behind (it will read the log); one whose task is
    /// gone is removed. With `shallow` (memory pressure, see `crate::cache::budget`) a queue
    /// counts as full from [`SHALLOW_QUEUE`] events: queued events are pinned for as long as the
    /// watcher does not read them, the log's can be cut.
    pub fn dispatch(
        &mut self,
        info: &ResourceInfo,
        ev: &Arc<CacheEvent>,
        shallow: bool,
    ) -> Dispatched {
        let mut gone = Vec::new();
        let mut done = Dispatched::default();
        for (id, w) in self.candidates(info, &ev.obj, ev.prev.as_deref()) {
            if !w.shared.is_live() || w.shared.is_closed() {
                continue;
            }
            done.evaluated += 1;
            let Some(emitted) = ev.emitted_for(&w.filter) else {
                continue;
            };
            if shallow && w.shared.queued() >= SHALLOW_QUEUE {
                w.shared.fall_behind();
                continue;
            }
            match w.shared.push((ev.clone(), emitted)) {
                watcher::Pushed::Queued => done.delivered += 1,
                watcher::Pushed::Full => w.shared.fall_behind(),
                watcher::Pushed::Gone => gone.push(id),
            }
        }
        for id in gone {
            self.remove(id);
        }
        done
    }

    /// Closes and removes every watcher, live or catching up, whose cursor `pick` selects;
    /// returns how many.
    pub fn close_where(&mut self, pick: impl Fn(u64) -> bool, reason: &'static str) -> usize {
        let mut closed = Vec::new();
        for (id, w) in &self.subscribers {
            if !w.shared.is_closed() && pick(w.shared.cursor()) {
                w.shared.close(reason);
                closed.push(*id);
            }
        }
        self.remove_all(&closed)
    }

    /// Closes and removes every watcher, live or catching up, that sees the object `obj` or its
    /// previous state `prev` (a change that cannot be sent as an event); returns how many.
    pub fn close_concerned(
        &mut self,
        info: &ResourceInfo,
        obj: &Cached,
        prev: Option<&Cached>,
        reason: &'static str,
    ) -> usize {
        let sees =
            |f: &Filter, o: &Cached| f.matches(&o.rec.namespace, &o.rec.labels, |x| o.rec.field(x));
        let closed: Vec<u64> = self
            .candidates(info, obj, prev)
            .filter(|(_, w)| {
                !w.shared.is_closed()
                    && (sees(&w.filter, obj) || prev.is_some_and(|p| sees(&w.filter, p)))
            })
            .map(|(id, w)| {
                w.shared.close(reason);
                id
            })
            .collect();
        self.remove_all(&closed)
    }

    /// Closes and removes every watcher that is catching up (and not closed yet) for which
    /// `verdict`, given its cursor, names a reason; returns how many were closed.
    pub fn close_lagging(&mut self, verdict: impl Fn(u64) -> Option<&'static str>) -> usize {
        let mut closed = Vec::new();
        for (id, w) in &self.subscribers {
            if w.shared.is_live() || w.shared.is_closed() {
                continue;
            }
            if let Some(reason) = verdict(w.shared.cursor()) {
                w.shared.close(reason);
                closed.push(*id);
            }
        }
        self.remove_all(&closed)
    }

    /// Under memory pressure, the watchers reading the log (neither live nor closed) as
    /// `(cursor, id)`, furthest behind first. A live watcher holding [`SHALLOW_QUEUE`] events or
    /// more falls behind first, as the dispatcher would make it at its next event: its queue
    /// pins those events, and a cut of the log must be able to close it.
    pub fn behind_for_memory(&self) -> Vec<(u64, u64)> {
        for w in self.subscribers.values() {
            if w.shared.is_live() && !w.shared.is_closed() && w.shared.queued() >= SHALLOW_QUEUE {
                w.shared.fall_behind();
            }
        }
        let mut behind: Vec<(u64, u64)> = self
            .subscribers
            .iter()
            .filter(|(_, w)| !w.shared.is_live() && !w.shared.is_closed())
            .map(|(id, w)| (w.shared.cursor(), *id))
            .collect();
        behind.sort_unstable();
        behind
    }

    /// Closes watcher `id` for memory when `verdict` says so of its cursor now, and gives its
    /// queue's memory back at once ([`watcher::WatcherShared::release_queue`]). Whether it was
    /// closed.
    pub fn close_releasing(
        &mut self,
        id: u64,
        verdict: impl Fn(u64) -> Option<&'static str>,
    ) -> bool {
        let Some(w) = self.subscribers.get(&id) else {
            return false;
        };
        if w.shared.is_live() || w.shared.is_closed() {
            return false;
        }
        let Some(reason) = verdict(w.shared.cursor()) else {
            return false;
        };
        w.shared.close(reason);
        w.shared.release_queue();
        self.remove(id);
        true
    }

    /// Removes closed watchers at once, rather than when their watch ends: a watch runs only
    /// when its transport polls it, and that of a client that stopped reading may not end
    /// before [`watcher::ABANDON_GRACE`] has passed. Returns how many.
    fn remove_all(&mut self, ids: &[u64]) -> usize {
        for id in ids {
            self.remove(*id);
        }
        ids.len()
    }

    /// Asks every watcher for a BOOKMARK at the cache's resourceVersion as soon as it has sent
    /// what is queued (after a bridged relist: see `WatcherShared::want_bookmark`).
    pub fn want_bookmarks(&self) {
        for w in self.subscribers.values() {
            w.shared.want_bookmark();
        }
    }

    /// The ids of the registered watchers not closed nor asked to end yet.
    pub fn open_ids(&self) -> Vec<u64> {
        self.subscribers
            .iter()
            .filter(|(_, w)| !w.shared.is_closed() && !w.shared.is_ending())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Asks the watchers `ids` that are still registered to end after a bookmark (see
    /// [`WatcherShared::end_after_bookmark`]); returns how many were asked.
    pub fn end_after_bookmark(&self, ids: &[u64]) -> usize {
        ids.iter()
            .filter_map(|id| self.subscribers.get(id))
            .filter(|w| !w.shared.is_closed() && w.shared.end_after_bookmark())
            .count()
    }

    /// Closes and removes every watcher.
    pub fn close_all(&mut self, reason: &'static str) {
        for w in self.subscribers.values() {
            w.shared.close(reason);
        }
        self.subscribers.clear();
        self.index.clear();
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

    fn filter(ns: Option<&str>, fields: &str) -> Arc<Filter> {
        Arc::new(Filter::parse("", "Pod", true, &[], ns.map(str::to_string), "", fields).unwrap())
    }

    fn pod(ns: &str, name: &str, node: &str) -> Cached {
        let j = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"1"}},"spec":{{"nodeName":"{node}"}}}}"#
        );
        decode_object(&pods(), j.as_bytes()).unwrap()
    }

    fn shared() -> Arc<WatcherShared> {
        Arc::new(WatcherShared::catching_up(0, 1))
    }

    #[test]
    fn candidates_are_the_matching_buckets_only() {
        let info = pods();
        let mut hub = Hub::default();
        let mut ids = HashMap::new();
        for n in 0..100 {
            ids.insert(
                n,
                hub.insert(
                    &info,
                    filter(None, &format!("spec.nodeName=n{n}")),
                    shared(),
                ),
            );
        }
        let all = hub.insert(&info, filter(None, ""), shared());
        let ns_b = hub.insert(&info, filter(Some("b"), ""), shared());
        assert_eq!(hub.unindexed(), 1);
        // A pod moving from n3 to n7 in namespace a: n3's and n7's kubelets and the unindexed one.
        let mut got: Vec<u64> = hub
            .candidates(&info, &pod("a", "p", "n7"), Some(&pod("a", "p", "n3")))
            .map(|(id, _)| id)
            .collect();
        got.sort();
        let mut want = vec![ids[&3], ids[&7], all];
        want.sort();
        assert_eq!(got, want);
        assert!(!got.contains(&ns_b));
        hub.remove(ids[&7]);
        assert_eq!(hub.candidates(&info, &pod("a", "p", "n7"), None).count(), 1);
        assert_eq!(hub.len(), 101);
    }
}
