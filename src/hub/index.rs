//! The dispatch index: which watchers a change may concern, without checking it against all
//! the others (5,000 kubelets each watching their own node's pods).
//!
//! Like kube-apiserver's cacher, every watcher sits in exactly one [`Bucket`]:
//!
//! * `Field(f, v)`: its field selector pins an indexed ("hot") field `f` to `v`, e.g. a kubelet's
//!   `spec.nodeName=node-7`. An event is offered to the bucket of the new *and* the previous
//!   value, so a pod moving off node-7 still reaches node-7's kubelet (as DELETED).
//! * `Scope(ns, name)`: otherwise, by the namespace (URL or `metadata.namespace=`) and the
//!   exact name (`metadata.name=`) it is limited to, either of which may be unset. An event is
//!   offered to (ns,name), (ns,*), (*,name) and (*,*) of the new and the previous object.
//!
//! * `Shard(selector)`: otherwise, a watcher of every namespace with a `shardSelector`
//!   (KEP-5866: kube-state-metrics-style consumers, N of them, each reading one range of the
//!   hashed uid or namespace). The hash space is cut into [`CELLS`] cells by its top bits; the
//!   watcher is filed under every cell its ranges overlap, and an event is offered to the cell
//!   of its object's hash. An object's shard never changes (uid and namespace are immutable),
//!   so the new and the previous object fall in the same cell; N shards on cell boundaries
//!   cost one candidate per event, not N.
//!
//! Watchers in `Scope(None, None)` are the unindexable ones: every event is checked against them.
//! The cost of one event is therefore the matching buckets' sizes plus the unindexable count,
//! never the total number of watchers.
//!
//! Owns the buckets and the ids in them. It must not hold the watchers themselves nor evaluate
//! filters: the index only narrows the candidates, the hub checks each one's filter.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::cache::{Cached, ResourceInfo};
use kube_wire::selector::Filter;
use kube_wire::shard::{ShardField, ShardSelector, shard_hash};

/// How many cells the shard index cuts the 64-bit hash space into (by its top 8 bits).
pub const CELLS: usize = 256;

/// A watcher's bucket in the index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// Pinned to one value of the hot field with this index in [`ResourceInfo::index_fields`].
    Field(usize, Arc<str>),
    /// Limited by namespace and/or name (None: any).
    Scope(Option<Arc<str>>, Option<Arc<str>>),
    /// Every namespace, limited to ranges of a hashed field (filed under the cells they
    /// overlap).
    Shard(Arc<ShardSelector>),
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
        let scope = Bucket::Scope(
            ns,
            filter.fields.exact_value("metadata.name").map(Arc::from),
        );
        match &filter.shard {
            Some(shard) if scope.is_unindexed() => Bucket::Shard(shard.clone()),
            _ => scope,
        }
    }

    /// Whether this bucket is checked for every event.
    pub fn is_unindexed(&self) -> bool {
        matches!(self, Bucket::Scope(None, None))
    }

    /// The buckets a change from `prev` to `obj` may concern, without duplicates.
    pub fn for_change(info: &ResourceInfo, obj: &Cached, prev: Option<&Cached>) -> Vec<Bucket> {
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
}

/// The cells of the hash space a shard selector's ranges overlap, each once.
fn cells_of(shard: &ShardSelector) -> BTreeSet<u8> {
    let cell = |h: u128| (h >> 56) as u8;
    shard
        .ranges()
        .iter()
        .flat_map(|r| cell(r.start())..=cell(r.end() - 1))
        .collect()
}

/// The cell of an object's hash of `field`.
fn cell_of(field: ShardField, obj: &Cached) -> u8 {
    let value = match field {
        ShardField::Uid => &obj.rec.uid,
        ShardField::Namespace => &obj.rec.namespace,
    };
    (shard_hash(value.as_bytes()) >> 56) as u8
}

/// The shard fields, as indexes of [`DispatchIndex`]'s per-field counts.
const SHARD_FIELDS: [ShardField; 2] = [ShardField::Uid, ShardField::Namespace];

/// Watcher ids by bucket, and shard watchers by cell.
#[derive(Debug, Default)]
pub(super) struct DispatchIndex {
    buckets: HashMap<Bucket, Vec<u64>>,
    unindexed: usize,
    cells: HashMap<(ShardField, u8), Vec<u64>>,
    /// Shard watchers per field of [`SHARD_FIELDS`] (no hash is computed for a field none uses).
    sharded: [usize; 2],
}

/// Removes `id` from the ids under `key` in `map`, and the key once it has none.
fn unfile<K: std::hash::Hash + Eq + Clone>(map: &mut HashMap<K, Vec<u64>>, key: &K, id: u64) {
    if let Some(ids) = map.get_mut(key) {
        if let Some(p) = ids.iter().position(|x| *x == id) {
            ids.swap_remove(p);
        }
        if ids.is_empty() {
            map.remove(key);
        }
    }
}

impl DispatchIndex {
    /// Files watcher `id` under `bucket`.
    pub(super) fn insert(&mut self, bucket: Bucket, id: u64) {
        if bucket.is_unindexed() {
            self.unindexed += 1;
        }
        if let Bucket::Shard(shard) = &bucket {
            let f = shard.field();
            self.sharded[SHARD_FIELDS.iter().position(|x| *x == f).unwrap_or(0)] += 1;
            for c in cells_of(shard) {
                self.cells.entry((f, c)).or_default().push(id);
            }
            return;
        }
        self.buckets.entry(bucket).or_default().push(id);
    }

    /// Removes watcher `id` from `bucket`.
    pub(super) fn remove(&mut self, bucket: &Bucket, id: u64) {
        if bucket.is_unindexed() {
            self.unindexed -= 1;
        }
        if let Bucket::Shard(shard) = bucket {
            let f = shard.field();
            self.sharded[SHARD_FIELDS.iter().position(|x| *x == f).unwrap_or(0)] -= 1;
            for c in cells_of(shard) {
                unfile(&mut self.cells, &(f, c), id);
            }
            return;
        }
        unfile(&mut self.buckets, bucket, id);
    }

    /// Empties the index.
    pub(super) fn clear(&mut self) {
        self.buckets.clear();
        self.unindexed = 0;
        self.cells.clear();
        self.sharded = [0; 2];
    }

    /// Number of watchers every event is checked against.
    pub(super) fn unindexed(&self) -> usize {
        self.unindexed
    }

    /// The ids of the watchers a change from `prev` to `obj` may concern.
    pub(super) fn candidates(
        &self,
        info: &ResourceInfo,
        obj: &Cached,
        prev: Option<&Cached>,
    ) -> Vec<u64> {
        let mut ids: Vec<u64> = Bucket::for_change(info, obj, prev)
            .iter()
            .filter_map(|b| self.buckets.get(b))
            .flatten()
            .copied()
            .collect();
        for (i, f) in SHARD_FIELDS.into_iter().enumerate() {
            if self.sharded[i] == 0 {
                continue;
            }
            let here = cell_of(f, obj);
            ids.extend(self.cells.get(&(f, here)).into_iter().flatten());
            // The same object keeps its cell; a previous state of another uid (a name deleted
            // and created again) may not, and a watcher filed under both must come once.
            if let Some(p) = prev
                && cell_of(f, p) != here
                && let Some(more) = self.cells.get(&(f, cell_of(f, p)))
            {
                let seen: BTreeSet<u64> = ids.iter().copied().collect();
                ids.extend(more.iter().filter(|id| !seen.contains(id)));
            }
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> ResourceInfo {
        let mut i = ResourceInfo::new("", "v1", "pods", "Pod", true);
        i.index_fields = vec!["spec.nodeName".into()];
        i
    }

    fn filter(ns: Option<&str>, fields: &str) -> Arc<Filter> {
        Arc::new(Filter::parse("", "Pod", true, &[], ns.map(str::to_string), "", fields).unwrap())
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
}
