//! Consistency checks: proving, every `cache.consistency_check_secs`, that a cache holds exactly
//! the upstream's objects — kube-apiserver 1.34's `DetectCacheInconsistency` (KEP-4988), which
//! checks its watch cache against etcd, done by a proxy against its upstream, whatever the
//! upstream's version.
//!
//! A watch cache can drift from its source without anything noticing: an upstream that skips
//! an event on a watch (a bug, a lost notification), or a bug of the cache's own. A check:
//!
//! 1. takes the cache's current snapshot, at its resourceVersion `R` (O(1); nothing is copied);
//! 2. asks the upstream for its metadata at exactly `R` (`resourceVersion=R&
//!    resourceVersionMatch=Exact`, `as=PartialObjectMetadataList`, protobuf where the upstream
//!    speaks it, pages of 10,000 as kube's own check reads etcd): kube-apiserver serves it from
//!    its snapshots while `R` is recent, else from etcd, else 410. Where it answers 410 (a
//!    quiet resource whose cache has not moved since the upstream compacted), the check is made
//!    at a later `R'`: the cache is first proven to hold the upstream's current state, as for a
//!    consistent read ([`super::Freshness`]), and its snapshot there is compared;
//! 3. reads both in key order (kube's LIST order), side by side ([`Comparison`]): each side's
//!    keys and resourceVersions are hashed as kube hashes them (FNV-1, 64 bits, over
//!    `namespace/name/resourceVersion` of every item in order, printed in hex), and the first
//!    objects that differ are named. Neither side is held whole: a page of the upstream's at a
//!    time, and the cache's snapshot, which exists anyway.
//!
//! The digests decide; on a difference the reflector relists and repairs the cache
//! ([`crate::cache::CacheWriter::repair`]), then checks again at once. Only keys and
//! resourceVersions are compared, as kube does: an object's resourceVersion names one version
//! of it, so equal resourceVersions are equal objects.
//!
//! This module compares and reads the upstream's answers; it must not write to the cache (the
//! reflector repairs it) nor decide when checks run (the reflector's loop does).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::protobuf::fields;
use super::{MalformedData, ReflectorError, read_body_within};
use crate::cache::{Cached, ResourceCache, Snapshot};
use crate::metrics::ResourceMetrics;
use crate::upstream::Upstream;
use kube_wire::proto::{ProtoError, envelope};

/// Items per page of the upstream's metadata LIST (kube's check reads etcd in pages of
/// `storageWatchListPageSize`, 10,000).
pub const PAGE: usize = 10_000;

/// The largest page body taken: 10,000 items of metadata, whose managed fields and annotations
/// may be large.
const MAX_PAGE_BYTES: usize = 512 << 20;

/// How many differing objects a failed check names.
pub const NAMED: usize = 5;

/// How long a check waits for the cache to be proven at a later resourceVersion, after the
/// upstream answered 410 for the cache's.
const PROOF_WAIT: Duration = Duration::from_secs(10);

/// What the check asks for: the metadata of the objects, in protobuf where the upstream has it
/// (a built-in kind's metadata and a custom resource's alike), else JSON; the full objects from
/// an upstream that serves no PartialObjectMetadataList (their metadata is the same).
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// kube's digest of a list: FNV-1 (not FNV-1a), 64 bits, over `namespace/name/resourceVersion`
/// of each item in order, with nothing between items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = self.0.wrapping_mul(Self::PRIME) ^ u64::from(x);
        }
    }

    /// Adds one item.
    pub fn add(&mut self, namespace: &str, name: &str, rv: u64) {
        self.bytes(namespace.as_bytes());
        self.bytes(b"/");
        self.bytes(name.as_bytes());
        self.bytes(b"/");
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = rv;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.bytes(&digits[at..]);
    }
}

impl fmt::Display for Digest {
    /// As kube logs it: lowercase hex, not padded.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}", self.0)
    }
}

/// One object on which the cache and the upstream differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// `namespace/name`, or the name of a cluster-scoped object.
    pub key: String,
    /// Its resourceVersion in the cache (`None`: missing from the cache).
    pub cache_rv: Option<u64>,
    /// Its resourceVersion upstream (`None`: not upstream).
    pub upstream_rv: Option<u64>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |rv: Option<u64>| rv.map_or_else(|| "missing".to_string(), |r| r.to_string());
        write!(
            f,
            "{} (cache: {}, upstream: {})",
            self.key,
            side(self.cache_rv),
            side(self.upstream_rv)
        )
    }
}

/// The differences a failed check names, for a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named<'a>(pub &'a [Difference]);

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The cache held exactly the upstream's objects at `rv`.
    Consistent {
        /// The resourceVersion compared at.
        rv: u64,
        /// Objects on each side.
        objects: usize,
        /// Both sides' digest.
        digest: Digest,
    },
    /// They differ.
    Inconsistent(Box<Mismatch>),
    /// No comparison was made (why).
    Skipped(String),
}

/// A failed check's findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The resourceVersion compared at.
    pub rv: u64,
    /// The cache's digest and objects.
    pub cache: (Digest, usize),
    /// The upstream's digest and objects.
    pub upstream: (Digest, usize),
    /// How many objects differ.
    pub differing: usize,
    /// The first [`NAMED`] of them, in key order.
    pub first: Vec<Difference>,
}

/// A snapshot's objects, in key order.
type Objects<'s> =
    imbl::ordmap::Iter<'s, Arc<str>, Arc<Cached>, imbl::shared_ptr::DefaultSharedPtr>;

/// A snapshot's objects against the upstream's items, both in key order, side by side: the
/// two digests and the objects that differ (a merge of two sorted sequences, so an object
/// missing on one side shifts nothing).
pub struct Comparison<'s> {
    cache: std::iter::Peekable<Objects<'s>>,
    cache_digest: Digest,
    cache_objects: usize,
    upstream_digest: Digest,
    upstream_objects: usize,
    differing: usize,
    first: Vec<Difference>,
    /// The last upstream key, and the current one (reused buffers).
    last_key: String,
    key: String,
}

/// Why the upstream's items cannot be compared.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the upstream's list is not in key order ({after:?} came after {before:?})")]
pub struct OutOfOrder {
    before: String,
    after: String,
}

impl<'s> Comparison<'s> {
    /// A comparison with `snap`'s objects.
    pub fn new(snap: &'s Snapshot) -> Self {
        Comparison {
            cache: snap.objects.iter().peekable(),
            cache_digest: Digest::default(),
            cache_objects: 0,
            upstream_digest: Digest::default(),
            upstream_objects: 0,
            differing: 0,
            first: Vec::new(),
            last_key: String::new(),
            key: String::new(),
        }
    }

    fn differ(&mut self, key: &str, cache_rv: Option<u64>, upstream_rv: Option<u64>) {
        self.differing += 1;
        if self.first.len() < NAMED {
            self.first.push(Difference {
                key: key.to_string(),
                cache_rv,
                upstream_rv,
            });
        }
    }

    /// The next cached object, counted and hashed.
    fn take_cached(&mut self) -> Option<Arc<Cached>> {
        let (_, c) = self.cache.next()?;
        self.cache_objects += 1;
        self.cache_digest
            .add(&c.rec.namespace, &c.rec.name, c.rec.rv);
        Some(c.clone())
    }

    /// The upstream's next item.
    pub fn upstream(&mut self, namespace: &str, name: &str, rv: u64) -> Result<(), OutOfOrder> {
        self.upstream_objects += 1;
        self.upstream_digest.add(namespace, name, rv);
        std::mem::swap(&mut self.key, &mut self.last_key);
        self.key.clear();
        if !namespace.is_empty() {
            self.key.push_str(namespace);
            self.key.push('/');
        }
        self.key.push_str(name);
        if self.upstream_objects > 1 && self.key <= self.last_key {
            return Err(OutOfOrder {
                before: self.last_key.clone(),
                after: self.key.clone(),
            });
        }
        loop {
            let order = match self.cache.peek() {
                Some((k, _)) => k.as_ref().cmp(self.key.as_str()),
                None => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    if let Some(c) = self.take_cached() {
                        self.differ(&c.rec.key(), Some(c.rec.rv), None);
                    }
                }
                std::cmp::Ordering::Equal => {
                    if let Some(c) = self.take_cached()
                        && c.rec.rv != rv
                    {
                        let key = std::mem::take(&mut self.key);
                        self.differ(&key, Some(c.rec.rv), Some(rv));
                        self.key = key;
                    }
                    return Ok(());
                }
                std::cmp::Ordering::Greater => {
                    let key = std::mem::take(&mut self.key);
                    self.differ(&key, None, Some(rv));
                    self.key = key;
                    return Ok(());
                }
            }
        }
    }

    /// The outcome at `rv`, once the upstream's last item was read.
    pub fn finish(mut self, rv: u64) -> Outcome {
        while let Some(c) = self.take_cached() {
            self.differ(&c.rec.key(), Some(c.rec.rv), None);
        }
        if self.cache_digest == self.upstream_digest && self.differing == 0 {
            return Outcome::Consistent {
                rv,
                objects: self.cache_objects,
                digest: self.cache_digest,
            };
        }
        Outcome::Inconsistent(Box::new(Mismatch {
            rv,
            cache: (self.cache_digest, self.cache_objects),
            upstream: (self.upstream_digest, self.upstream_objects),
            differing: self.differing,
            first: self.first,
        }))
    }
}

/// A page's list metadata.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PageMeta {
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.continue` (`""` on the last page).
    pub continue_token: String,
}

/// Reads one page of a metadata LIST (or a full LIST: the same metadata), handing each item's
/// namespace, name and resourceVersion to `each`, in order; `protobuf` by its `Content-Type`.
pub fn read_page(
    body: &[u8],
    protobuf: bool,
    mut each: impl FnMut(&str, &str, u64) -> Result<(), MalformedData>,
) -> Result<PageMeta, MalformedData> {
    if protobuf {
        return read_protobuf_page(body, each);
    }
    #[derive(Deserialize)]
    struct List<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow, default, deserialize_with = "kube_wire::list::nullable")]
        items: Vec<Item<'a>>,
    }
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, default, rename = "resourceVersion")]
        resource_version: Cow<'a, str>,
        #[serde(borrow, default, rename = "continue")]
        continue_token: Cow<'a, str>,
    }
    #[derive(Deserialize)]
    struct Item<'a> {
        #[serde(borrow)]
        metadata: ItemMeta<'a>,
    }
    #[derive(Deserialize)]
    struct ItemMeta<'a> {
        #[serde(borrow, default)]
        namespace: Cow<'a, str>,
        #[serde(borrow)]
        name: Cow<'a, str>,
        #[serde(borrow, rename = "resourceVersion")]
        resource_version: Cow<'a, str>,
    }
    let list: List<'_> = serde_json::from_slice(body)?;
    for i in &list.items {
        let m = &i.metadata;
        each(
            &m.namespace,
            &m.name,
            MalformedData::parse_list_rv(&m.resource_version)?,
        )?;
    }
    Ok(PageMeta {
        resource_version: list.metadata.resource_version.into_owned(),
        continue_token: list.metadata.continue_token.into_owned(),
    })
}

/// [`read_page`] of `k8s\0` + `Unknown{raw: PartialObjectMetadataList{1: ListMeta, 2: item…}}`,
/// each item `{1: ObjectMeta{1: name, 3: namespace, 6: resourceVersion}}` (a full object's
/// field 1 is its ObjectMeta too).
fn read_protobuf_page(
    body: &[u8],
    mut each: impl FnMut(&str, &str, u64) -> Result<(), MalformedData>,
) -> Result<PageMeta, MalformedData> {
    let text = |v: &[u8]| -> Result<String, MalformedData> {
        std::str::from_utf8(v).map(str::to_string).map_err(|_| {
            MalformedData::Protobuf(ProtoError::Protobuf {
                at: "metadata".into(),
                message: "invalid UTF-8".into(),
            })
        })
    };
    let unk = envelope::unwrap(body).map_err(MalformedData::Protobuf)?;
    let mut meta = PageMeta::default();
    let (mut ns, mut name, mut rv) = (String::new(), String::new(), String::new());
    for field in fields(unk.raw) {
        match field.map_err(MalformedData::Protobuf)? {
            (1, m) => {
                for f in fields(m) {
                    match f.map_err(MalformedData::Protobuf)? {
                        (2, v) => meta.resource_version = text(v)?,
                        (3, v) => meta.continue_token = text(v)?,
                        _ => {}
                    }
                }
            }
            (2, item) => {
                ns.clear();
                name.clear();
                rv.clear();
                for f in fields(item) {
                    if let (1, object_meta) = f.map_err(MalformedData::Protobuf)? {
                        for g in fields(object_meta) {
                            match g.map_err(MalformedData::Protobuf)? {
                                (1, v) => name = text(v)?,
                                (3, v) => ns = text(v)?,
                                (6, v) => rv = text(v)?,
                                _ => {}
                            }
                        }
                    }
                }
                each(&ns, &name, MalformedData::parse_list_rv(&rv)?)?;
            }
            _ => {}
        }
    }
    Ok(meta)
}

/// Why a comparison at one resourceVersion was not made.
#[derive(Debug, thiserror::Error)]
enum NotCompared {
    /// The upstream no longer holds that resourceVersion (410).
    #[error("the upstream no longer holds resourceVersion {0}")]
    Expired(u64),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// The cache of `path`'s resource checked against the upstream once: at its resourceVersion,
/// else (410) at the later one `fresh` proves it at.
pub async fn check<F, Fut>(
    up: &Upstream,
    path: &str,
    cache: &ResourceCache,
    m: &ResourceMetrics,
    fresh: F,
) -> Outcome
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Snapshot, String>>,
{
    if !cache.is_synced() || !cache.staleness.is_live() {
        return Outcome::Skipped("the cache is not following the upstream".into());
    }
    let snap = cache.snapshot();
    match compare_at(up, path, &snap, m).await {
        Ok(o) => o,
        Err(NotCompared::Expired(rv)) => {
            let snap = match tokio::time::timeout(PROOF_WAIT, fresh()).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    return Outcome::Skipped(format!(
                        "the upstream no longer holds resourceVersion {rv}, and the cache could not be proven at a later one: {e}"
                    ));
                }
                Err(_) => {
                    return Outcome::Skipped(format!(
                        "the upstream no longer holds resourceVersion {rv}, and the cache was not proven at a later one within {PROOF_WAIT:?}"
                    ));
                }
            };
            match compare_at(up, path, &snap, m).await {
                Ok(o) => o,
                Err(e) => Outcome::Skipped(e.to_string()),
            }
        }
        Err(e) => Outcome::Skipped(e.to_string()),
    }
}

/// `snap` against the upstream's metadata LIST at exactly its resourceVersion, page by page.
async fn compare_at(
    up: &Upstream,
    path: &str,
    snap: &Snapshot,
    m: &ResourceMetrics,
) -> Result<Outcome, NotCompared> {
    let rv = snap.rv;
    let mut cmp = Comparison::new(snap);
    let mut token = String::new();
    let mut first = true;
    loop {
        let q = if first {
            format!("{path}?resourceVersion={rv}&resourceVersionMatch=Exact&limit={PAGE}")
        } else {
            format!(
                "{path}?limit={PAGE}&continue={}",
                form_urlencoded::byte_serialize(token.as_bytes()).collect::<String>()
            )
        };
        let resp = up.get(&q, ACCEPT).await;
        m.upstream_request(
            "consistency",
            resp.as_ref().ok().map(|r| r.status().as_u16()),
        );
        let resp = resp.map_err(|e| NotCompared::Other(format!("{q}: {e}")))?;
        let code = resp.status();
        let protobuf = super::protobuf::is_protobuf(resp.headers());
        let body = read_body_within(resp, &q, MAX_PAGE_BYTES)
            .await
            .map_err(|e| NotCompared::Other(e.to_string()))?;
        m.consistency_bytes(body.len());
        if !code.is_success() {
            return Err(match ReflectorError::from_answer(code, &q, &body) {
                ReflectorError::Expired(_) if first => NotCompared::Expired(rv),
                e => NotCompared::Other(e.to_string()),
            });
        }
        let mut order = Ok(());
        let page = read_page(&body, protobuf, |ns, name, item_rv| {
            if order.is_ok() {
                order = cmp.upstream(ns, name, item_rv);
            }
            Ok(())
        })
        .map_err(|e| NotCompared::Other(ReflectorError::malformed(&q, e).to_string()))?;
        order.map_err(|e| NotCompared::Other(e.to_string()))?;
        if first {
            let at = MalformedData::parse_list_rv(&page.resource_version)
                .map_err(|e| NotCompared::Other(ReflectorError::malformed(&q, e).to_string()))?;
            if at != rv {
                return Err(NotCompared::Other(format!(
                    "the upstream answered an exact LIST at resourceVersion {rv} with resourceVersion {at}: it does not serve exact reads"
                )));
            }
        }
        first = false;
        if page.continue_token.is_empty() {
            return Ok(cmp.finish(rv));
        }
        token = page.continue_token;
    }
}

#[cfg(test)]
mod tests;
