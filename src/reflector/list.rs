//! A consistent paged LIST of one resource: every page from the same snapshot (the continue
//! token pins it), every item decoded for the cache, and the list's resourceVersion.
//!
//! Owns the paging and the reading of the pages. It must not retry, back off or install the
//! list in the cache: the state machine in [`super`] does, with what this returns.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{MalformedData, ReflectorError, collection_path, read_body};
use crate::cache::record::decode_object;
use crate::cache::{Cached, ResourceInfo};
use crate::config::ResourceSpec;
use crate::metrics::ResourceMetrics;
use crate::upstream::Upstream;

#[derive(Deserialize)]
struct ListMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: String,
}

#[derive(Deserialize)]
struct ListPage<'a> {
    metadata: ListMeta,
    #[serde(borrow, default)]
    items: Vec<&'a RawValue>,
}

/// A consistent paged list: every item and the list's resourceVersion.
pub async fn list_all(
    up: &Upstream,
    spec: &ResourceSpec,
    info: &ResourceInfo,
    page_size: usize,
    m: &ResourceMetrics,
) -> Result<(Vec<Cached>, u64), ReflectorError> {
    let base = collection_path(spec);
    let mut items = Vec::new();
    let mut token = String::new();
    let mut list_rv = 0u64;
    loop {
        let mut q = format!("{base}?limit={page_size}");
        if !token.is_empty() {
            q.push_str("&continue=");
            q.push_str(&form_urlencoded::byte_serialize(token.as_bytes()).collect::<String>());
        }
        let resp = up.get(&q, "application/json").await;
        m.upstream_request("list", resp.as_ref().ok().map(|r| r.status().as_u16()));
        let resp = resp?;
        let code = resp.status();
        let body = read_body(resp, &q).await?;
        m.upstream_list_bytes(body.len());
        if !code.is_success() {
            return Err(ReflectorError::from_answer(code, &q, &body));
        }
        let page: ListPage<'_> =
            serde_json::from_slice(&body).map_err(|e| ReflectorError::malformed(&q, e))?;
        for raw in &page.items {
            let c = decode_object(info, raw.get().as_bytes())
                .map_err(|e| ReflectorError::malformed(&q, e))?;
            items.push(c);
        }
        if list_rv == 0 {
            let value = page.metadata.resource_version;
            list_rv = value.parse().map_err(|source| {
                ReflectorError::malformed(
                    &q,
                    MalformedData::ListResourceVersion {
                        value: value.clone(),
                        source,
                    },
                )
            })?;
        }
        if page.metadata.continue_token.is_empty() {
            return Ok((items, list_rv));
        }
        token = page.metadata.continue_token;
    }
}
