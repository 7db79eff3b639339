//! The current objects of one resource and their field indexes, and [`Snapshot`], the O(1)
//! immutable view of them that LIST answers and the initial events of a watch read.
//!
//! Owns the objects (an immutable, cheaply cloned ordered map keyed by `ns/name`, kube's key
//! order) and, per indexed field (`ResourceInfo::index_fields`, e.g. pods' `spec.nodeName`), the
//! keys of the objects carrying each value, kept in step with every change. It must not know
//! about events, resourceVersions or watchers: the event log and the hub do; and it takes no
//! lock: the cache's lock guards it.

use std::sync::Arc;

use super::ResourceInfo;
use super::record::Cached;
use kube_wire::selector::Filter;

/// Keys of the objects by one indexed field's value, in key order.
pub type FieldIndex = imbl::HashMap<Arc<str>, imbl::OrdSet<Arc<str>>>;

/// The objects of one resource, with their field indexes.
#[derive(Debug, Clone)]
pub(super) struct Store {
    objects: imbl::OrdMap<Arc<str>, Arc<Cached>>,
    by_field: Vec<FieldIndex>,
}

impl Store {
    /// No objects, and an empty index per indexed field of `info`.
    pub(super) fn new(info: &ResourceInfo) -> Self {
        Store {
            objects: imbl::OrdMap::new(),
            by_field: vec![FieldIndex::new(); info.index_fields.len()],
        }
    }

    /// Number of objects.
    pub(super) fn len(&self) -> usize {
        self.objects.len()
    }

    /// The objects, in key order.
    pub(super) fn objects(&self) -> &imbl::OrdMap<Arc<str>, Arc<Cached>> {
        &self.objects
    }

    /// The objects as of `rv`, in O(1) (the maps are shared, not copied).
    pub(super) fn snapshot(&self, rv: u64) -> Snapshot {
        Snapshot {
            rv,
            objects: self.objects.clone(),
            by_field: self.by_field.clone(),
        }
    }

    /// Sets (Some) or removes (None) the object at `key`, keeping the field indexes in step;
    /// returns the previous object.
    pub(super) fn set(
        &mut self,
        info: &ResourceInfo,
        key: Arc<str>,
        obj: Option<Arc<Cached>>,
    ) -> Option<Arc<Cached>> {
        let prev = match &obj {
            Some(o) => self.objects.insert(key.clone(), o.clone()),
            None => self.objects.remove(&key),
        };
        for (i, f) in info.index_fields.iter().enumerate() {
            let old = prev.as_ref().and_then(|p| p.rec.field(f));
            let new = obj.as_ref().and_then(|o| o.rec.field(f));
            if old == new {
                continue;
            }
            let index = &mut self.by_field[i];
            if let Some(v) = old
                && let Some(keys) = index.get_mut(v)
            {
                keys.remove(&key);
                if keys.is_empty() {
                    index.remove(v);
                }
            }
            if let Some(v) = new {
                match index.get_mut(v) {
                    Some(keys) => {
                        keys.insert(key.clone());
                    }
                    None => {
                        index.insert(Arc::from(v), imbl::OrdSet::unit(key.clone()));
                    }
                }
            }
        }
        prev
    }

    /// Replaces every object (a full list).
    pub(super) fn reset(&mut self, info: &ResourceInfo, items: Vec<Cached>) {
        *self = Store::new(info);
        for c in items {
            self.set(info, Arc::from(c.rec.key()), Some(Arc::new(c)));
        }
    }
}

/// An immutable view of the objects at one resourceVersion.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The cache's resourceVersion when taken.
    pub rv: u64,
    /// Objects in key order (`ns/name` bytes).
    pub objects: imbl::OrdMap<Arc<str>, Arc<Cached>>,
    /// Per indexed field (`ResourceInfo::index_fields`): value → keys of the objects with it.
    pub by_field: Vec<FieldIndex>,
}

impl Snapshot {
    /// The objects a request may match, in key order: the one object named when the filter
    /// pins `metadata.name` (and, for a namespaced kind, the namespace: a kubelet's watch of
    /// one ConfigMap), the index bucket when it pins an indexed field (a kubelet's
    /// `spec.nodeName=<node>`), else the namespace's range. The caller still applies the filter.
    pub fn select<'a>(
        &'a self,
        info: &ResourceInfo,
        namespace: Option<&'a str>,
        filter: &Filter,
    ) -> Box<dyn Iterator<Item = &'a Arc<Cached>> + Send + 'a> {
        if let Some(name) = filter.fields.exact_value("metadata.name") {
            let ns = namespace.or_else(|| filter.fields.exact_value("metadata.namespace"));
            let key = match (info.namespaced, ns) {
                (true, Some(ns)) => Some(super::record::object_key(ns, name)),
                (false, _) => Some(super::record::object_key("", name)),
                (true, None) => None,
            };
            if let Some(key) = key {
                return Box::new(self.objects.get(key.as_str()).into_iter());
            }
        }
        for (i, f) in info.index_fields.iter().enumerate() {
            let (Some(v), Some(index)) = (filter.fields.exact_value(f), self.by_field.get(i))
            else {
                continue;
            };
            let Some(keys) = index.get(v) else {
                return Box::new(std::iter::empty());
            };
            let prefix = namespace.map(|ns| format!("{ns}/"));
            return Box::new(
                keys.iter()
                    .filter(move |k| prefix.as_ref().is_none_or(|p| k.starts_with(p.as_str())))
                    .filter_map(|k| self.objects.get(k)),
            );
        }
        self.iter_namespace(namespace)
    }

    /// Objects in a namespace (or all), in key order.
    pub fn iter_namespace<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<Cached>> + Send + 'a> {
        match namespace {
            None => Box::new(self.objects.values()),
            Some(ns) => {
                let prefix = format!("{ns}/");
                let start: Arc<str> = Arc::from(prefix.as_str());
                Box::new(
                    self.objects
                        .range(start..)
                        .take_while(move |(k, _)| k.starts_with(&prefix))
                        .map(|(_, v)| v),
                )
            }
        }
    }
}
