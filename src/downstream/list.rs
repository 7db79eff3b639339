//! LIST from the cache: `resourceVersion=0` (any state, `limit` ignored as kube's cache does) and
//! `resourceVersion=N` not-older-than (wait up to 3 s for the cache to reach N, else kube's 504).
//! The body is the kind's List built from the stored bytes, streamed, never re-encoded.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::app::{App, CacheSlot};
use kube_wire::continue_token::ContinueToken;
use kube_wire::options::{ListOptions, RvMatch};
use kube_wire::response::{Body, list_head, status_response, stream_list_encoded};
use kube_wire::selector::Filter;
use kube_wire::status::Status;

/// How long a read waits for a resourceVersion the cache has not reached (kube's `blockTimeout`).
pub const BLOCK_TIMEOUT: Duration = Duration::from_secs(3);

/// Serves a LIST the router decided the cache answers.
pub async fn serve(
    proxy: &App,
    slot: &CacheSlot,
    ns: Option<&str>,
    opts: &ListOptions,
    filter: &Filter,
    gzip: bool,
) -> http::Response<Body> {
    match build(proxy, slot, ns, opts, filter, gzip).await {
        Ok(r) => r,
        Err(s) => status_response(&s),
    }
}

async fn build(
    proxy: &App,
    slot: &CacheSlot,
    ns: Option<&str>,
    opts: &ListOptions,
    filter: &Filter,
    gzip: bool,
) -> Result<http::Response<Body>, Status> {
    let rv = opts.rv()?.unwrap_or(0);
    let cache = slot
        .synced(proxy.cache_config.not_ready_wait)
        .await
        .ok_or_else(|| Status::too_many_requests("storage is (re)initializing", 1))?;
    if rv > 0 && !cache.wait_rv(rv, BLOCK_TIMEOUT).await {
        return Err(Status::too_large_resource_version(rv, cache.rv()));
    }
    let info = &cache.info;
    let snap = cache.snapshot();
    let ns = if info.namespaced { ns } else { None };
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
    Ok(stream_list_encoded(head, items, gzip).0)
}
