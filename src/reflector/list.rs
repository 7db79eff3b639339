//! A consistent paged LIST of one resource: every page from the same snapshot (the continue
//! token pins it), every item decoded for the cache, and the list's resourceVersion.
//!
//! Owns the paging and the reading of the pages. It must not retry, back off or install the
//! list in the cache: the state machine in [`super`] does, with what this returns.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{MalformedData, ReflectorError, collection_path, read_body_within};
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
struct WirePage<'a> {
    metadata: ListMeta,
    #[serde(borrow, default, deserialize_with = "kube_wire::list::nullable")]
    items: Vec<&'a RawValue>,
}

/// One page of an upstream LIST, read for the cache (from JSON by [`read_page`], from
/// protobuf by [`super::protobuf::read_page`]).
#[derive(Debug)]
pub struct Page {
    /// The items, each decoded ([`decode_object`]).
    pub items: Vec<Cached>,
    /// `metadata.resourceVersion` as sent (the first page's is the list's).
    pub resource_version: String,
    /// `metadata.continue` as sent (`""` on the last page).
    pub continue_token: String,
}

/// Reads one LIST answer's body of `info`'s objects: the reflector's only reading of a list
/// page (public so that the fuzz harness feeds it arbitrary bytes). `what` names the request
/// in errors.
pub fn read_page(info: &ResourceInfo, body: &[u8], what: &str) -> Result<Page, ReflectorError> {
    let page: WirePage<'_> =
        serde_json::from_slice(body).map_err(|e| ReflectorError::malformed(what, e))?;
    let items = page
        .items
        .iter()
        .map(|raw| {
            decode_object(info, raw.get().as_bytes())
                .map_err(|e| ReflectorError::malformed(what, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Page {
        items,
        resource_version: page.metadata.resource_version,
        continue_token: page.metadata.continue_token,
    })
}

/// A consistent paged list: every item and the list's resourceVersion.
pub async fn list_all(
    up: &Upstream,
    spec: &ResourceSpec,
    info: &ResourceInfo,
    page_size: usize,
    max_object_bytes: u64,
    m: &ResourceMetrics,
) -> Result<(Vec<Cached>, u64), ReflectorError> {
    let max_object = usize::try_from(max_object_bytes).unwrap_or(usize::MAX);
    let max_page = max_object
        .saturating_mul(page_size.max(1))
        .saturating_add(super::watch::ENVELOPE_ROOM);
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
        let resp = up.get(&q, super::protobuf::accept(info)).await;
        m.upstream_request("list", resp.as_ref().ok().map(|r| r.status().as_u16()));
        let resp = resp?;
        let code = resp.status();
        let protobuf = super::protobuf::is_protobuf(resp.headers());
        let body = read_body_within(resp, &q, max_page).await?;
        m.upstream_list_bytes(body.len());
        if !code.is_success() {
            return Err(ReflectorError::from_answer(code, &q, &body));
        }
        let page = if protobuf {
            super::protobuf::read_page(info, &body, &q)?
        } else {
            read_page(info, &body, &q)?
        };
        for c in &page.items {
            super::check_object_size(c, max_object_bytes, &q)?;
        }
        items.extend(page.items);
        if list_rv == 0 {
            list_rv = MalformedData::parse_list_rv(&page.resource_version)
                .map_err(|e| ReflectorError::malformed(&q, e))?;
        }
        if page.continue_token.is_empty() {
            return Ok((items, list_rv));
        }
        token = page.continue_token;
    }
}
