//! The watcher registry and its dispatch index.
//!
//! An event must reach the watchers that want it without being checked against all the others
//! (5,000 kubelets each watching their own node's pods). Like kube-apiserver's cacher, every
//! watcher sits in exactly one bucket:
//!
//! * `Field(f, v)`: its field selector pins an indexed ("hot") field `f` to `v`, e.g. a kubelet's
//!   `spec.nodeName=node-7`. An event is offered to the bucket of the new *and* the previous
//!   value, so a pod moving off node-7 still reaches node-7's kubelet (as DELETED).
//! * `Scope(ns, name)`: otherwise, by the namespace (URL or `metadata.namespace=`) and the
//!   exact name (`metadata.name=`) it is limited to, either of which may be unset. An event is
//!   offered to (ns,name), (ns,*), (*,name) and (*,*) of the new and the previous object.
//!
//! Watchers in `Scope(None, None)` are the unindexable ones: every event is checked against them.
//! The cost of one event is therefore the matching buckets' sizes plus the unindexable count,
//! never the total number of watchers.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{Cached, Delivery, ResourceInfo, WatcherShared};
use kube_wire::selector::Filter;

/// A watcher's bucket in the index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// Pinned to one value of the hot field with this index in [`ResourceInfo::index_fields`].
    Field(usize, Arc<str>),
    /// Limited by namespace and/or name (None: any).
    Scope(Option<Arc<str>>, Option<Arc<str>>),
}

impl Bucket {
    /// Where a watcher with `filter` goes.
    pub fn of(info: &ResourceInfo, filter: &Filter) -> Bucket {
        for (i, f) in info.index_fields.iter().enumerate() {
            if let Some(v) = filter.fields.exact_value(f) {
                return Bucket::Field(i, Arc::from(v));
            }
        }
        let ns = if info.namespaced {
            filter
                .namespace
                .as_deref()
                .or_else(|| filter.fields.exact_value("metadata.namespace"))
                .map(Arc::from)
        } else {
            None
        };
        Bucket::Scope(
            ns,
            filter.fields.exact_value("metadata.name").map(Arc::from),
        )
    }

    /// Whether this bucket is checked for every event.
    pub fn is_unindexed(&self) -> bool {
        matches!(self, Bucket::Scope(None, None))
    }
}

/// One registered watcher.
pub struct Registered {
    /// Its filter.
    pub filter: Arc<Filter>,
    /// Its queue.
    pub tx: mpsc::Sender<Delivery>,
    /// State shared with its task.
    pub shared: Arc<WatcherShared>,
    bucket: Bucket,
}

/// Watchers by id, and the index.
#[derive(Default)]
pub struct Hub {
    watchers: HashMap<u64, Registered>,
    index: HashMap<Bucket, Vec<u64>>,
    unindexed: usize,
    next_id: u64,
}

impl Hub {
    /// Adds a watcher; returns its id.
    pub fn insert(
        &mut self,
        info: &ResourceInfo,
        filter: Arc<Filter>,
        tx: mpsc::Sender<Delivery>,
        shared: Arc<WatcherShared>,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let bucket = Bucket::of(info, &filter);
        if bucket.is_unindexed() {
            self.unindexed += 1;
        }
        self.index.entry(bucket.clone()).or_default().push(id);
        self.watchers.insert(
            id,
            Registered {
                filter,
                tx,
                shared,
                bucket,
            },
        );
        id
    }

    /// Removes a watcher.
    pub fn remove(&mut self, id: u64) {
        let Some(w) = self.watchers.remove(&id) else {
            return;
        };
        if w.bucket.is_unindexed() {
            self.unindexed -= 1;
        }
        if let Some(ids) = self.index.get_mut(&w.bucket) {
            if let Some(p) = ids.iter().position(|x| *x == id) {
                ids.swap_remove(p);
            }
            if ids.is_empty() {
                self.index.remove(&w.bucket);
            }
        }
    }

    /// Number of watchers.
    pub fn len(&self) -> usize {
        self.watchers.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.watchers.is_empty()
    }

    /// Number of watchers every event is checked against.
    pub fn unindexed(&self) -> usize {
        self.unindexed
    }

    /// All watchers.
    pub fn all(&self) -> impl Iterator<Item = &Registered> {
        self.watchers.values()
    }

    /// Removes every watcher.
    pub fn clear(&mut self) {
        self.watchers.clear();
        self.index.clear();
        self.unindexed = 0;
    }

    /// The buckets a change from `prev` to `obj` may concern, without duplicates.
    pub fn buckets_for(info: &ResourceInfo, obj: &Cached, prev: Option<&Cached>) -> Vec<Bucket> {
        let mut out: Vec<Bucket> = Vec::with_capacity(10);
        let mut push = |b: Bucket| {
            if !out.contains(&b) {
                out.push(b);
            }
        };
        for c in std::iter::once(obj).chain(prev) {
            let name: Arc<str> = Arc::from(c.rec.name.as_str());
            if info.namespaced {
                let ns: Arc<str> = Arc::from(c.rec.namespace.as_str());
                push(Bucket::Scope(Some(ns.clone()), Some(name.clone())));
                push(Bucket::Scope(Some(ns), None));
            }
            push(Bucket::Scope(None, Some(name)));
            push(Bucket::Scope(None, None));
            for (i, f) in info.index_fields.iter().enumerate() {
                if let Some(v) = c.rec.field(f) {
                    push(Bucket::Field(i, Arc::from(v)));
                }
            }
        }
        out
    }

    /// The watchers a change from `prev` to `obj` may concern.
    pub fn candidates<'a>(
        &'a self,
        info: &ResourceInfo,
        obj: &Cached,
        prev: Option<&Cached>,
    ) -> impl Iterator<Item = (u64, &'a Registered)> + 'a {
        let ids: Vec<u64> = Self::buckets_for(info, obj, prev)
            .iter()
            .filter_map(|b| self.index.get(b))
            .flatten()
            .copied()
            .collect();
        ids.into_iter()
            .filter_map(move |id| self.watchers.get(&id).map(|w| (id, w)))
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
        Arc::new(WatcherShared {
            lagging: Default::default(),
            cursor: Default::default(),
            cancel: Default::default(),
            reason: Default::default(),
        })
    }

    #[test]
    fn buckets_by_hot_field_then_scope() {
        let info = pods();
        assert_eq!(
            Bucket::of(&info, &filter(None, "spec.nodeName=n1")),
            Bucket::Field(0, Arc::from("n1"))
        );
        assert_eq!(
            Bucket::of(&info, &filter(Some("a"), "")),
            Bucket::Scope(Some(Arc::from("a")), None)
        );
        assert_eq!(
            Bucket::of(&info, &filter(None, "metadata.namespace=a,metadata.name=p")),
            Bucket::Scope(Some(Arc::from("a")), Some(Arc::from("p")))
        );
        assert!(Bucket::of(&info, &filter(None, "spec.nodeName!=n1")).is_unindexed());
    }

    #[test]
    fn candidates_are_the_matching_buckets_only() {
        let info = pods();
        let mut hub = Hub::default();
        let mut ids = HashMap::new();
        for n in 0..100 {
            let (tx, _rx) = mpsc::channel(1);
            ids.insert(
                n,
                hub.insert(
                    &info,
                    filter(None, &format!("spec.nodeName=n{n}")),
                    tx,
                    shared(),
                ),
            );
        }
        let (tx, _rx) = mpsc::channel(1);
        let all = hub.insert(&info, filter(None, ""), tx, shared());
        let (tx, _rx) = mpsc::channel(1);
        let ns_b = hub.insert(&info, filter(Some("b"), ""), tx, shared());
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
