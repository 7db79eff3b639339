//! One reflector per cached resource: discover the type, list it (paged, consistent), then hold
//! one upstream watch from the list's resourceVersion with bookmarks; re-watch from the last seen
//! resourceVersion when the watch ends or breaks; relist when that RV expired (410). Retries back
//! off exponentially with full jitter. The cache bridges a relist for its watchers.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::StatusCode;
use http_body_util::BodyExt;
use rand::Rng;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

use crate::cache::{Cached, ResourceCache, ResourceInfo, record::decode_object};
use crate::config::ResourceSpec;
use crate::metrics::ResourceMetrics;
use crate::upstream::{Upstream, UpstreamError};
use kube_wire::event::EventType;

/// Why one list or watch attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ReflectorError {
    /// Transport failure.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The upstream answered with an error status.
    #[error("upstream answered {code} to {what}: {message}")]
    Status {
        /// HTTP code.
        code: u16,
        /// The request.
        what: String,
        /// Status message, if any.
        message: String,
    },
    /// The resourceVersion we asked for is gone (410): relist.
    #[error("resourceVersion expired: {0}")]
    Expired(String),
    /// The body could not be read or parsed.
    #[error("malformed upstream data for {what}: {detail}")]
    Malformed {
        /// The request.
        what: String,
        /// What was wrong.
        detail: String,
    },
    /// Discovery does not list the resource.
    #[error("the upstream does not serve {0}")]
    NotServed(String),
}

/// Exponential backoff with full jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Starts at `base`, doubles up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max,
            attempt: 0,
        }
    }

    /// The next delay: uniform in [cap/2, cap] where cap doubles per attempt.
    pub fn next_delay(&mut self) -> Duration {
        let cap = self
            .base
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = cap / 2;
        half + half.mul_f64(rand::rng().random::<f64>())
    }

    /// After a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

fn collection_path(spec: &ResourceSpec) -> String {
    if spec.group.is_empty() {
        format!("/api/{}/{}", spec.version, spec.resource)
    } else {
        format!("/apis/{}/{}/{}", spec.group, spec.version, spec.resource)
    }
}

async fn read_body(
    resp: http::Response<hyper::body::Incoming>,
    what: &str,
) -> Result<Bytes, ReflectorError> {
    resp.into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ReflectorError::Malformed {
            what: what.to_string(),
            detail: e.to_string(),
        })
}

fn status_error(code: StatusCode, what: &str, body: &[u8]) -> ReflectorError {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let message = v["message"].as_str().unwrap_or_default().to_string();
    if code == StatusCode::GONE {
        return ReflectorError::Expired(message);
    }
    ReflectorError::Status {
        code: code.as_u16(),
        what: what.to_string(),
        message,
    }
}

/// Learns the kind and scope of a resource from upstream discovery.
pub async fn discover(up: &Upstream, spec: &ResourceSpec) -> Result<ResourceInfo, ReflectorError> {
    let path = if spec.group.is_empty() {
        format!("/api/{}", spec.version)
    } else {
        format!("/apis/{}/{}", spec.group, spec.version)
    };
    let resp = up.get(&path, "application/json").await?;
    let code = resp.status();
    let body = read_body(resp, &path).await?;
    if !code.is_success() {
        return Err(status_error(code, &path, &body));
    }
    #[derive(Deserialize)]
    struct Res {
        name: String,
        kind: String,
        namespaced: bool,
    }
    #[derive(Deserialize)]
    struct List {
        resources: Vec<Res>,
    }
    let list: List = serde_json::from_slice(&body).map_err(|e| ReflectorError::Malformed {
        what: path.clone(),
        detail: e.to_string(),
    })?;
    let r = list
        .resources
        .into_iter()
        .find(|r| r.name == spec.resource)
        .ok_or_else(|| ReflectorError::NotServed(spec.to_string()))?;
    Ok(ResourceInfo::new(
        &spec.group,
        &spec.version,
        &spec.resource,
        &r.kind,
        r.namespaced,
    ))
}

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
            return Err(status_error(code, &q, &body));
        }
        let page: ListPage<'_> =
            serde_json::from_slice(&body).map_err(|e| ReflectorError::Malformed {
                what: q.clone(),
                detail: e.to_string(),
            })?;
        for raw in &page.items {
            let c = decode_object(info, raw.get().as_bytes()).map_err(|e| {
                ReflectorError::Malformed {
                    what: q.clone(),
                    detail: e.to_string(),
                }
            })?;
            items.push(c);
        }
        if list_rv == 0 {
            list_rv =
                page.metadata
                    .resource_version
                    .parse()
                    .map_err(|_| ReflectorError::Malformed {
                        what: q.clone(),
                        detail: format!(
                            "list resourceVersion {:?}",
                            page.metadata.resource_version
                        ),
                    })?;
        }
        if page.metadata.continue_token.is_empty() {
            return Ok((items, list_rv));
        }
        token = page.metadata.continue_token;
    }
}

/// How a watch ended.
#[derive(Debug)]
pub enum WatchEnd {
    /// The stream ended (timeout or server close) after this many events.
    Closed {
        /// Events and bookmarks applied.
        received: u64,
    },
    /// The start resourceVersion expired: relist.
    Expired(String),
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type")]
    ty: &'a str,
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
struct MetaOnly {
    #[serde(default)]
    metadata: RvOnly,
}

#[derive(Deserialize, Default)]
struct RvOnly {
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
}

/// Applies one watch line to the cache. `Ok(Some(end))` ends the watch.
pub fn apply_line(cache: &ResourceCache, line: &[u8]) -> Result<Option<WatchEnd>, ReflectorError> {
    apply_line_observed(cache, line, None)
}

/// [`apply_line`], counting the event's type in `m`.
pub fn apply_line_observed(
    cache: &ResourceCache,
    line: &[u8],
    m: Option<&ResourceMetrics>,
) -> Result<Option<WatchEnd>, ReflectorError> {
    let malformed = |detail: String| ReflectorError::Malformed {
        what: "watch event".into(),
        detail,
    };
    let ev: Envelope<'_> = serde_json::from_slice(line).map_err(|e| malformed(e.to_string()))?;
    if let Some(m) = m {
        m.upstream_event(ev.ty);
    }
    let obj = ev.object.get().as_bytes();
    match ev.ty {
        "BOOKMARK" => {
            let m: MetaOnly = serde_json::from_slice(obj).map_err(|e| malformed(e.to_string()))?;
            let rv = m.metadata.resource_version.parse().map_err(|_| {
                malformed(format!(
                    "bookmark resourceVersion {:?}",
                    m.metadata.resource_version
                ))
            })?;
            cache.advance(rv);
            Ok(None)
        }
        "ERROR" => {
            let v: serde_json::Value =
                serde_json::from_slice(obj).map_err(|e| malformed(e.to_string()))?;
            let message = v["message"].as_str().unwrap_or_default().to_string();
            if v["code"] == 410 || v["reason"] == "Expired" || v["reason"] == "Gone" {
                return Ok(Some(WatchEnd::Expired(message)));
            }
            Err(ReflectorError::Status {
                code: v["code"].as_u64().unwrap_or(500) as u16,
                what: "watch".into(),
                message,
            })
        }
        t => {
            let ty = EventType::parse(t)
                .ok_or_else(|| malformed(format!("unknown event type {t:?}")))?;
            let c = decode_object(&cache.info, obj).map_err(|e| malformed(e.to_string()))?;
            cache.apply(ty, c);
            Ok(None)
        }
    }
}

/// One upstream watch from the cache's resourceVersion until it ends.
pub async fn watch_once(
    up: &Upstream,
    spec: &ResourceSpec,
    cache: &ResourceCache,
    cancel: &CancellationToken,
    m: &ResourceMetrics,
) -> Result<WatchEnd, ReflectorError> {
    let timeout = rand::rng().random_range(300..600u64);
    let q = format!(
        "{}?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds={timeout}",
        collection_path(spec),
        cache.rv()
    );
    let resp = up.get(&q, "application/json").await;
    m.upstream_request("watch", resp.as_ref().ok().map(|r| r.status().as_u16()));
    let resp = resp?;
    let code = resp.status();
    if !code.is_success() {
        let body = read_body(resp, &q).await?;
        return match status_error(code, &q, &body) {
            ReflectorError::Expired(m) => Ok(WatchEnd::Expired(m)),
            e => Err(e),
        };
    }
    m.watch_connected();
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    let mut received = 0u64;
    // The upstream ends the stream after `timeout`; a silent connection gets a grace period.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout + 30);
    loop {
        let frame = tokio::select! {
            _ = cancel.cancelled() => return Ok(WatchEnd::Closed { received }),
            _ = tokio::time::sleep_until(deadline) => return Ok(WatchEnd::Closed { received }),
            f = body.frame() => f,
        };
        let data = match frame {
            None => return Ok(WatchEnd::Closed { received }),
            Some(Err(e)) => {
                return Err(ReflectorError::Malformed {
                    what: q.clone(),
                    detail: format!("watch stream broke: {e}"),
                });
            }
            Some(Ok(f)) => match f.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
        };
        m.upstream_watch_bytes(data.len());
        buf.extend_from_slice(&data);
        while let Some(i) = memchr::memchr(b'\n', &buf) {
            let line = buf.split_to(i + 1);
            let line = &line[..i];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(end) = apply_line_observed(cache, line, Some(m))? {
                return Ok(end);
            }
            received += 1;
        }
        if buf.remaining() > 64 << 20 {
            return Err(ReflectorError::Malformed {
                what: q.clone(),
                detail: "an event larger than 64 MiB".into(),
            });
        }
    }
}

/// Runs the reflector of one resource until `cancel`; `cache` is created once discovery answers,
/// and handed to `on_cache` so the server can route to it.
pub async fn run(
    up: Upstream,
    spec: ResourceSpec,
    cache: Arc<ResourceCache>,
    page_size: usize,
    cancel: CancellationToken,
    m: Arc<ResourceMetrics>,
) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
    let name = spec.to_string();
    // Why the next LIST happens; counted once, not again for each retry of a failed LIST.
    let mut cause = Some("initial");
    'relist: loop {
        if cancel.is_cancelled() {
            return;
        }
        if let Some(c) = cause.take() {
            m.relist(c);
        }
        let started = std::time::Instant::now();
        let listed = tokio::select! {
            _ = cancel.cancelled() => return,
            r = list_all(&up, &spec, &cache.info, page_size, &m) => r,
        };
        let (items, rv) = match listed {
            Ok(x) => {
                m.listed(started.elapsed());
                x
            }
            Err(e) => {
                m.upstream_failed(&e);
                let d = backoff.next_delay();
                tracing::warn!(resource = %name, error = %e, retry_in = ?d, "list failed");
                sleep_or_cancel(d, &cancel).await;
                continue;
            }
        };
        let n = items.len();
        let outcome = cache.replace(items, rv);
        tracing::info!(resource = %name, objects = n, resource_version = rv, outcome = ?outcome, "listed");
        backoff.reset();
        loop {
            match watch_once(&up, &spec, &cache, &cancel, &m).await {
                _ if cancel.is_cancelled() => return,
                Ok(WatchEnd::Expired(msg)) => {
                    m.watch_ended("expired");
                    tracing::info!(resource = %name, message = %msg, "watch resourceVersion expired; relisting");
                    cause = Some("expired");
                    continue 'relist;
                }
                Ok(WatchEnd::Closed { received }) => {
                    m.watch_ended("closed");
                    if received > 0 {
                        backoff.reset();
                        tracing::debug!(resource = %name, received, "watch ended; re-watching");
                    } else {
                        // An immediately closed watch with nothing in it: do not spin.
                        sleep_or_cancel(backoff.next_delay(), &cancel).await;
                    }
                }
                Err(e) => {
                    m.watch_ended("error");
                    m.upstream_failed(&e);
                    let d = backoff.next_delay();
                    tracing::warn!(resource = %name, error = %e, retry_in = ?d, resource_version = cache.rv(), "watch failed; re-watching from the last resourceVersion");
                    sleep_or_cancel(d, &cancel).await;
                }
            }
        }
    }
}

async fn sleep_or_cancel(d: Duration, cancel: &CancellationToken) {
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(d) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheSettings;

    #[test]
    fn backoff_grows_with_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let d: Vec<Duration> = (0..6).map(|_| b.next_delay()).collect();
        assert!(d[0] >= Duration::from_millis(50) && d[0] <= Duration::from_millis(100));
        assert!(d[3] >= Duration::from_millis(400) && d[3] <= Duration::from_millis(800));
        assert!(d[5] <= Duration::from_secs(1));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    #[test]
    fn applies_events_bookmarks_and_errors() {
        let cache = ResourceCache::new(
            ResourceInfo::new("", "v1", "pods", "Pod", true),
            CacheSettings::default(),
        );
        cache.replace(Vec::new(), 5);
        let add = br#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"d","resourceVersion":"6"}}}"#;
        assert!(apply_line(&cache, add).unwrap().is_none());
        assert_eq!((cache.len(), cache.rv()), (1, 6));
        let bm = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}"#;
        apply_line(&cache, bm).unwrap();
        assert_eq!(cache.rv(), 9);
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        assert!(matches!(
            apply_line(&cache, gone).unwrap(),
            Some(WatchEnd::Expired(_))
        ));
        assert!(apply_line(&cache, b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":").is_err());
        let del = br#"{"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"d","resourceVersion":"10"}}}"#;
        apply_line(&cache, del).unwrap();
        assert_eq!((cache.len(), cache.rv()), (0, 10));
    }
}
