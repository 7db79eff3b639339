//! LIST from the cache: `resourceVersion=0` (any state, `limit` ignored as kube's cache does) and
//! `resourceVersion=N` not-older-than (`limit` honoured, with a `continue` token the upstream
//! serves). The body is the kind's List built from the stored bytes, streamed, never re-encoded.
//!
//! It serves from the cache the router hands it, already synced and at the requested
//! resourceVersion: it must not wait (the router waits once, and passes the request through when
//! the cache does not reach N within [`BLOCK_TIMEOUT`]) nor decide what the cache answers.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::cache::ResourceCache;
use kube_wire::continue_token::ContinueToken;
use kube_wire::options::{ListOptions, RvMatch};
use kube_wire::response::{Body, list_head, status_response, stream_list_encoded};
use kube_wire::selector::Filter;

/// How long a read waits for a resourceVersion the cache has not reached (kube's `blockTimeout`).
pub const BLOCK_TIMEOUT: Duration = Duration::from_secs(3);

/// Serves a LIST the router decided the cache answers, from `cache` (synced, at the requested
/// resourceVersion), in `namespace` (ignored for a cluster-scoped kind); gzip-compressed when
/// `gzip` and the body is large.
pub fn serve(
    cache: &ResourceCache,
    namespace: Option<&str>,
    opts: &ListOptions,
    filter: &Filter,
    gzip: bool,
) -> http::Response<Body> {
    // The router only routes resourceVersions that parse here; the Status is kube's 400 anyway.
    let rv = match opts.rv() {
        Ok(rv) => rv.unwrap_or(0),
        Err(s) => return status_response(&s),
    };
    let info = &cache.info;
    let snap = cache.snapshot();
    let ns = if info.namespaced { namespace } else { None };
    // RV=0 ignores limit; RV=N NotOlderThan honours it (the token pins the served RV, and the
    // continuation goes upstream, which serves that exact snapshot).
    let limit = if rv > 0 && opts.rv_match() == Some(RvMatch::NotOlderThan) {
        opts.limit.max(0) as usize
    } else {
        0
    };
    let mut items = Vec::new();
    let mut last_key = None;
    let mut remaining = 0u64;
    for obj in snap.select(info, ns, filter) {
        if limit > 0 && items.len() == limit {
            remaining += 1;
            continue;
        }
        let r = &obj.rec;
        if filter.matches(&r.namespace, &r.labels, |f| r.field(f)) {
            items.push(info.list_item(obj));
            if limit > 0 && items.len() == limit {
                last_key = Some(r.key());
            }
        }
    }
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(snap.rv.to_string()));
    if remaining > 0
        && let Some(k) = &last_key
    {
        let rel = match ns {
            Some(n) => k.strip_prefix(&format!("{n}/")).unwrap_or(k).to_string(),
            None => k.clone(),
        };
        meta.insert(
            "continue".into(),
            json!(ContinueToken::after(snap.rv as i64, &rel).encode()),
        );
        if filter.no_selectors() {
            meta.insert("remainingItemCount".into(), json!(remaining));
        }
    }
    let head = list_head(&info.list_kind(), &info.api_version(), &Value::Object(meta));
    // Compressed like kube-apiserver: gzip above 128 KiB when the client accepts it.
    stream_list_encoded(head, items, gzip).0
}
