//! LIST from the cache, every form kube-apiserver 1.34+ serves from its watch cache: any state
//! (`resourceVersion=0`, `limit` ignored as kube's cache does), not older than N, a consistent
//! read, exactly N, and the pages of a `continue` token. A page is cut from the snapshot the
//! router resolved, starting after the token's key; when items remain, its `continue` token
//! pins the snapshot's resourceVersion and the snapshot is kept for the next pages
//! ([`crate::cache::snapshots`]). The body is the kind's List built from the stored bytes,
//! streamed, never re-encoded.
//!
//! It serves from the snapshot the router hands it: it must not wait (the router waits once,
//! and passes the request through when the cache does not reach N within [`BLOCK_TIMEOUT`]) nor
//! decide which state the request reads.

use std::sync::Arc;
use std::time::Duration;

use super::form::Form;
use super::read_point::ReadPoint;
use super::table::ListMeta;
use crate::cache::{Cached, ResourceCache, ResourceInfo, Snapshot};
use kube_wire::continue_token::ContinueToken;
use kube_wire::options::ListOptions;
use kube_wire::response::Body;
use kube_wire::selector::Filter;
use kube_wire::table::TablePrinter;

/// How long a read waits for a resourceVersion the cache has not reached (kube's `blockTimeout`).
pub const BLOCK_TIMEOUT: Duration = Duration::from_secs(3);

/// The state a LIST is served from, and how its page is cut.
#[derive(Debug, Clone)]
pub struct ListFrom {
    /// The state the router resolved (its resourceVersion is the list's).
    pub snap: Snapshot,
    /// For a continuation, the token's start key, relative to the request's namespace (the
    /// last key served plus `\0`): the page starts at it.
    pub start: Option<String>,
    /// Whether the page may be read from a field index bucket (a kubelet's `spec.nodeName`).
    /// Only a read of the latest state may: kube cuts exact and continued pages from snapshots
    /// of its ordered store, which keep no index, so there a page's `continue` token depends on
    /// every object after it in key order, matching or not.
    pub index: bool,
}

impl ListFrom {
    /// What a LIST at `point` reads, once the router resolved it to `snap`.
    pub fn new(point: &ReadPoint, snap: Snapshot) -> ListFrom {
        let (start, index) = match point {
            ReadPoint::Continue(t) => (Some(t.start.clone()), false),
            ReadPoint::Exact(_) => (None, false),
            ReadPoint::Any | ReadPoint::NotOlderThan(_) | ReadPoint::Consistent => (None, true),
        };
        ListFrom { snap, start, index }
    }
}

/// One page cut from a snapshot, before it is encoded.
struct Page<'a> {
    /// The list's `metadata.resourceVersion`.
    rv: u64,
    items: Vec<&'a Arc<Cached>>,
    /// The token for the rest, when something remains.
    token: Option<String>,
    /// `remainingItemCount` (without selectors only).
    remaining: Option<u64>,
}

/// Serves a LIST the router decided the cache answers, from `from`, in `namespace` (ignored for
/// a cluster-scoped kind), a Table printed by `printer`; gzip-compressed when `gzip` and the body is large. When the page
/// leaves items, its snapshot is kept as `config`'s `snapshot_*` keys allow.
#[allow(clippy::too_many_arguments)]
pub fn serve(
    cache: &ResourceCache,
    from: ListFrom,
    namespace: Option<&str>,
    opts: &ListOptions,
    filter: &Filter,
    form: &Form,
    printer: &TablePrinter,
    gzip: bool,
) -> http::Response<Body> {
    let info = &cache.info;
    let ns = if info.namespaced { namespace } else { None };
    // A literal RV=0 ignores the limit, continuations included: kube's cacher drops it for
    // every LIST it serves with `resourceVersion=0` (`computeListLimit`), so the rest of a list
    // continued with RV=0 comes whole, without a token. Every other form honours it.
    let limit = if opts.resource_version.as_deref() == Some("0") {
        0
    } else {
        opts.limit.max(0) as usize
    };
    let page = cut(info, &from, ns, filter, limit);
    if page.token.is_some() {
        cache.retain_snapshot(&from.snap, &cache.settings().retention);
    }
    // kube echoes the shard selector on typed lists only: not a custom resource's
    // (UnstructuredList), nor a Table or a PartialObjectMetadataList, whose conversions drop it.
    let typed = info.builtin && matches!(form, Form::Json | Form::Protobuf);
    let meta = ListMeta {
        resource_version: page.rv,
        continue_token: page.token,
        remaining_item_count: page.remaining,
        shard_info: filter
            .shard
            .as_ref()
            .filter(|_| typed)
            .map(ToString::to_string),
    };
    super::table::list_response(info, printer, page.items.iter().copied(), &meta, form, gzip)
}

/// Cuts the page of at most `limit` (0: all) matching objects of `from` in `ns`, as kube's
/// cacher does: the token names the last item returned and is given when any object follows
/// it in the scanned range; `remainingItemCount` counts those objects, without selectors only.
fn cut<'a>(
    info: &ResourceInfo,
    from: &'a ListFrom,
    ns: Option<&'a str>,
    filter: &Filter,
    limit: usize,
) -> Page<'a> {
    let snap = &from.snap;
    let prefix = ns.map(|n| format!("{n}/")).unwrap_or_default();
    let count_remaining = filter.no_selectors();
    let mut items = Vec::new();
    let mut last_key = None;
    let mut remaining = 0u64;
    let scanned = if from.index && from.start.is_none() {
        snap.select(info, ns, filter)
    } else {
        let start = from.start.as_deref().map(|s| format!("{prefix}{s}"));
        range(snap, &prefix, start)
    };
    for obj in scanned {
        if limit > 0 && items.len() == limit {
            remaining += 1;
            if !count_remaining {
                break;
            }
            continue;
        }
        let r = &obj.rec;
        if filter.matches(&r.namespace, &r.labels, |f| r.field(f)) {
            items.push(obj);
            if limit > 0 && items.len() == limit {
                last_key = Some(r.key());
            }
        }
    }
    let token = last_key.filter(|_| remaining > 0).map(|k| {
        let rel = k.strip_prefix(prefix.as_str()).unwrap_or(&k);
        ContinueToken::after(snap.rv as i64, rel).encode()
    });
    Page {
        rv: snap.rv,
        items,
        remaining: (token.is_some() && count_remaining).then_some(remaining),
        token,
    }
}

/// The objects under `prefix` (a namespace's `ns/`, or everything), in key order, from `start`
/// (a full key, inclusive) on.
fn range<'a>(
    snap: &'a Snapshot,
    prefix: &str,
    start: Option<String>,
) -> Box<dyn Iterator<Item = &'a Arc<Cached>> + Send + 'a> {
    let from: Arc<str> = Arc::from(start.as_deref().unwrap_or_default().max(prefix));
    let prefix = prefix.to_string();
    Box::new(
        snap.objects
            .range(from..)
            .take_while(move |(k, _)| k.starts_with(prefix.as_str()))
            .map(|(_, v)| v),
    )
}
