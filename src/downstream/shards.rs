//! Sharded LIST and WATCH (`shardSelector`, KEP-5866, alpha in kube 1.36): the parameter as a
//! request carries it, and, for the reads watchmux does not answer from its cache, whether the
//! upstream applies it.
//!
//! watchmux serves `shardSelector` from its cache for every cached kind, whatever the
//! upstream's version (the router parses it with `kube_wire::shard` and the cache filters by
//! it). A read it passes through is answered by the upstream, and an upstream older than 1.36,
//! or one whose `ShardedListAndWatch` gate is off, ignores the parameter: it would send every
//! object to a client that asked for one shard of them, which the client could not tell (only
//! a typed LIST carries `metadata.shardInfo`). So a sharded read is passed through only to an
//! upstream known to apply the selector to that kind, and is otherwise refused with 400.
//!
//! Whether it does is asked once per kind and remembered for [`REMEMBERED`]: a LIST of one item
//! with a selector that is not one (`shardSelector=watchmux-probe`). An upstream that parses the
//! parameter refuses it with kube's 500 `invalid shard selector: …` before it lists anything;
//! one that ignores it answers 200. Readers that arrive together share one probe. Any other
//! answer (an error, a 403 for watchmux's identity) counts as "does not apply", remembered for
//! a shorter time.
//!
//! Owns reading the parameter off a request ([`requested`]: kube-wire parses it) and the probes
//! and what they found. It must not filter objects (the cache's filters do) nor pass requests
//! through (`crate::passthrough` does).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use parking_lot::Mutex;
use tokio::sync::OnceCell;

use crate::upstream::Upstream;
use kube_wire::shard::ShardSelector;
use kube_wire::status::Status;

/// How long what a probe found is remembered.
pub const REMEMBERED: Duration = Duration::from_secs(600);

/// How long a probe that did not answer clearly is remembered.
const REMEMBERED_UNCLEAR: Duration = Duration::from_secs(30);

/// The selector a probe sends: a CEL identifier minus another, which kube's parser refuses
/// (`unsupported function "_-_"`).
pub const PROBE: &str = "watchmux-probe";

/// What the probes found, per collection path (`/api/v1/pods`, `/apis/g/v/r`).
#[derive(Debug, Default)]
pub struct ShardSupport {
    probes: Mutex<HashMap<String, Arc<Probe>>>,
}

/// One probe of one collection, shared by the readers waiting for it.
#[derive(Debug, Default)]
struct Probe {
    found: OnceCell<(bool, Instant, Duration)>,
}

impl ShardSupport {
    /// Whether the upstream applies `shardSelector` to the collection at `path` (asked once,
    /// then remembered).
    pub async fn applies(&self, up: &Upstream, path: &str) -> bool {
        let probe = {
            let mut probes = self.probes.lock();
            let p = probes.entry(path.to_string()).or_default();
            if let Some((_, at, kept)) = p.found.get()
                && at.elapsed() >= *kept
            {
                *p = Arc::new(Probe::default());
            }
            p.clone()
        };
        let (applies, _, _) = probe
            .found
            .get_or_init(|| async {
                let found = ask(up, path).await;
                let kept = if found.is_some() {
                    REMEMBERED
                } else {
                    REMEMBERED_UNCLEAR
                };
                (found.unwrap_or(false), Instant::now(), kept)
            })
            .await;
        if !applies {
            tracing::debug!(
                collection = path,
                "the upstream does not apply shardSelector"
            );
        }
        *applies
    }
}

/// The `shardSelector` of a query: its first value, as Go's `url.Values` decode it (kube's
/// conversion takes the first of several). `None` when absent.
pub fn selector_param(query: Option<&str>) -> Option<Cow<'_, str>> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == "shardSelector")
        .map(|(_, v)| v)
}

/// The shard selector a LIST or WATCH asks for, parsed as kube 1.36 parses it with its gate on:
/// an absent or empty parameter is none, anything else must parse, else kube's answer: a 500
/// whose message is `invalid shard selector: …` and which has no reason (kube's registry wraps
/// the parse error as a plain Go error).
pub fn requested(query: Option<&str>) -> Result<Option<ShardSelector>, Status> {
    match selector_param(query) {
        Some(s) if !s.is_empty() => ShardSelector::parse(&s)
            .map(Some)
            .map_err(|e| Status::new(500, "", e.to_string())),
        _ => Ok(None),
    }
}

/// One probe: `Some(true)` when the upstream refused the probe's selector as kube 1.36 does,
/// `Some(false)` when it ignored it, `None` for any other answer.
async fn ask(up: &Upstream, path: &str) -> Option<bool> {
    let q = format!("{path}?limit=1&shardSelector={PROBE}");
    let resp = up.get(&q, "application/json").await.ok()?;
    let code = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), 1 << 20)
        .collect()
        .await
        .ok()?
        .to_bytes();
    if code.is_success() {
        return Some(false);
    }
    let refused = code == http::StatusCode::INTERNAL_SERVER_ERROR
        && serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .is_some_and(|m| m.starts_with("invalid shard selector"));
    refused.then_some(true)
}
