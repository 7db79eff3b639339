//! Counters of what reached the simulator, so tests can prove what a proxy sent upstream.
//!
//! Relaxed atomics (and a read lock on the per-resource table, which grows when a CRD is
//! created), so counting never slows a request; counters are never reset. Per-resource counters
//! are per registry slot: a CRD deleted and created again counts afresh in a new slot.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use parking_lot::RwLock;

use serde_json::{Value, json};

use super::kinds::Registry;

/// Per-resource counters.
#[derive(Debug, Default)]
pub struct ResourceStats {
    /// Watch connections open now.
    pub open_watches: AtomicI64,
    /// Watch requests served (including ones that ended with an ERROR event).
    pub watch_requests: AtomicU64,
    /// List requests served.
    pub list_requests: AtomicU64,
    /// Objects in the LIST answers sent (a freshness check's `limit=1` LIST adds at most one; a
    /// full LIST adds every object). PartialObjectMetadataList items count apart.
    pub list_items_sent: AtomicU64,
    /// Items of PartialObjectMetadataList answers (metadata only: a freshness check's state
    /// comparison, metadata informers).
    pub list_metadata_items_sent: AtomicU64,
    /// Other requests (get, create, update, patch, delete).
    pub other_requests: AtomicU64,
    /// Response bytes sent for this resource (lists, watch frames, objects).
    pub bytes_sent: AtomicU64,
}

/// All counters.
#[derive(Debug)]
pub struct Stats {
    per_resource: RwLock<Vec<Arc<ResourceStats>>>,
    /// Every HTTP request received.
    pub requests: AtomicU64,
    /// Every response byte sent.
    pub bytes_sent: AtomicU64,
    /// TokenReviews answered.
    pub token_reviews: AtomicU64,
    /// SubjectAccessReviews answered.
    pub subject_access_reviews: AtomicU64,
}

/// Decrements `open_watches` when a watch stream ends.
#[derive(Debug)]
pub struct OpenWatchGuard(Arc<ResourceStats>);

impl Drop for OpenWatchGuard {
    fn drop(&mut self) {
        self.0.open_watches.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Stats {
    /// Zeroed counters for every type in `registry`.
    pub fn new(registry: &Registry) -> Stats {
        Stats {
            per_resource: RwLock::new((0..registry.slot_count()).map(|_| Arc::default()).collect()),
            requests: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            token_reviews: AtomicU64::new(0),
            subject_access_reviews: AtomicU64::new(0),
        }
    }

    /// Counters of the type with registry index `i` (zeroed ones for a slot not counted yet).
    pub fn resource(&self, i: usize) -> Arc<ResourceStats> {
        if let Some(r) = self.per_resource.read().get(i) {
            return r.clone();
        }
        let mut all = self.per_resource.write();
        if all.len() <= i {
            all.resize_with(i + 1, Arc::default);
        }
        all[i].clone()
    }

    /// Counts a watch as requested and open, before its response goes out (so a client that has
    /// the response head always finds it counted); its stream adopts it with
    /// [`Stats::adopt_open_watch`].
    pub fn count_open_watch(&self, i: usize) {
        let r = self.resource(i);
        r.open_watches.fetch_add(1, Ordering::Relaxed);
        r.watch_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The guard that counts a watch counted by [`Stats::count_open_watch`] as closed when it
    /// drops.
    pub fn adopt_open_watch(&self, i: usize) -> OpenWatchGuard {
        OpenWatchGuard(self.resource(i))
    }

    /// Counts `n` bytes sent for resource `i` (None: not resource-specific).
    pub fn sent(&self, i: Option<usize>, n: usize) {
        self.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(i) = i {
            match self.per_resource.read().get(i) {
                Some(r) => r.bytes_sent.fetch_add(n as u64, Ordering::Relaxed),
                None => self
                    .resource(i)
                    .bytes_sent
                    .fetch_add(n as u64, Ordering::Relaxed),
            };
        }
    }

    /// JSON snapshot: `{"requests":..,"bytesSent":..,"resources":{"pods":{"openWatches":..,...}}}`
    /// keyed by `resource` for the core group and `resource.group` otherwise. A type no longer
    /// served (a deleted CRD's) is listed with its last counters until a served type takes its
    /// key (the CRD created again).
    pub fn to_json(&self, registry: &Registry) -> Value {
        let mut res = serde_json::Map::new();
        let mut served = std::collections::HashSet::new();
        for (t, live) in registry.slots() {
            let key = t.group_resource();
            if live {
                served.insert(key.clone());
            } else if served.contains(&key) {
                continue;
            }
            let s = self.resource(t.index);
            res.insert(
                key,
                json!({
                    "openWatches": s.open_watches.load(Ordering::Relaxed),
                    "watchRequests": s.watch_requests.load(Ordering::Relaxed),
                    "listRequests": s.list_requests.load(Ordering::Relaxed),
                    "listItemsSent": s.list_items_sent.load(Ordering::Relaxed),
                    "listMetadataItemsSent": s.list_metadata_items_sent.load(Ordering::Relaxed),
                    "otherRequests": s.other_requests.load(Ordering::Relaxed),
                    "bytesSent": s.bytes_sent.load(Ordering::Relaxed),
                }),
            );
        }
        json!({
            "requests": self.requests.load(Ordering::Relaxed),
            "bytesSent": self.bytes_sent.load(Ordering::Relaxed),
            "tokenReviews": self.token_reviews.load(Ordering::Relaxed),
            "subjectAccessReviews": self.subject_access_reviews.load(Ordering::Relaxed),
            "resources": res,
        })
    }
}
