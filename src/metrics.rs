//! What watchmux does, as Prometheus metrics and kube-apiserver-style health checks.
//!
//! One [`Metrics`] per proxy owns its own [`prometheus::Registry`] (never the global one, so two
//! proxies in one process — tests — do not mix). Every name starts with `watchmux_`; labels are
//! bounded: `resource` is a cached resource (`pods`, `endpointslices.discovery.k8s.io`) or
//! `other`, never a name from a request path that is not cached; `verb`, `code`, `transport`,
//! `type`, `reason`, `outcome`, `source`, `review` and `result` take a fixed set of values. No
//! label ever carries a client address, a namespace or an object name.
//!
//! Nothing here sits on the per-event × per-watcher path under a lock:
//!
//! * the cache's own atomics ([`crate::cache::CacheCounters`]) and its state (objects, bytes,
//!   resourceVersion, event window) are read when Prometheus scrapes, by `ScrapeCollector`;
//! * each downstream watcher counts the events and bytes it hands to its connection in its own
//!   atomics ([`WatchTap`], one writer, no contention); a scrape sums the live watchers and the
//!   totals of the ended ones (folded in under a mutex taken once per watcher start and end);
//! * the reflector (one task per resource) bumps pre-bound counters per upstream event, which is
//!   one uncontended atomic add.
//!
//! It serves nothing itself: `/metrics`, `/livez` and `/readyz` are answered by the downstream
//! `health` module from [`Metrics::render`] and the checks computed here.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use parking_lot::{Mutex, RwLock};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::cache::budget::MemoryBudget;
use crate::cache::{ResourceCache, ResourceInfo};
use crate::config::{Config, ResourceSpec};
use crate::downstream::GoawayCause;
use crate::downstream::authz::{Lookup, Review};
use crate::downstream::proxy_protocol::Rejection;
use crate::downstream::read_point::PassReason;
use crate::downstream::router::Refusal;
use kube_wire::path::{self, ApiPath};
use kube_wire::response::Body;

/// `transport` of a watch served as a chunked HTTP response.
pub const TRANSPORT_CHUNKED: &str = "chunked";
/// `transport` of a watch served over a websocket.
pub const TRANSPORT_WEBSOCKET: &str = "websocket";
const TRANSPORTS: [&str; 2] = [TRANSPORT_CHUNKED, TRANSPORT_WEBSOCKET];

/// `resource` of requests that are not about a cached resource.
pub const OTHER_RESOURCE: &str = "other";
/// `source` of a LIST answered by watchmux itself (from the cache).
pub const SOURCE_CACHE: &str = "cache";
/// `source` of a LIST the upstream answered.
pub const SOURCE_PASS_THROUGH: &str = "pass_through";
/// `source` of a read watchmux refused (429 or 503: not ready, a limit, too stale): neither
/// served from the cache nor passed through.
pub const SOURCE_REFUSED: &str = "refused";
const SOURCES: [&str; 3] = [SOURCE_CACHE, SOURCE_PASS_THROUGH, SOURCE_REFUSED];

/// The `Content-Type` of `/metrics` (Prometheus text format 0.0.4).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Watch event types, the `type` label of event counters.
const EVENT_TYPES: [&str; 5] = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"];

/// Every `verb` label value (kube-apiserver's verbs; `connect` is an upgrade such as exec).
pub const VERBS: [&str; 10] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "connect",
    "other",
];

/// Downstream request latency (time until the response head is ready): cache answers take
/// micro- to milliseconds, pass-through follows the upstream, not-ready waits and RV waits take up
/// to 3 s, upstream timeouts up to a minute.
const REQUEST_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// A reflector's complete paged LIST: milliseconds for small kinds, tens of seconds for 100k+
/// pods.
const UPSTREAM_LIST_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

fn event_index(ty: &[u8]) -> Option<usize> {
    EVENT_TYPES.iter().position(|t| t.as_bytes() == ty)
}

/// How a downstream watch started (`watchmux_watch_starts_total{outcome}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchOutcome {
    /// Streaming.
    Ok,
    /// The resourceVersion is too old: an ERROR event with 410.
    Gone,
    /// 429: the cache was not ready, or a limit (watches per client, memory) refused it
    /// (`watchmux_reads_total{source="refused"}` says which).
    TooManyRequests,
    /// Any other failure (bad request, 504 for a future resourceVersion, ...).
    Error,
}

impl WatchOutcome {
    fn label(self) -> &'static str {
        match self {
            WatchOutcome::Ok => "ok",
            WatchOutcome::Gone => "410",
            WatchOutcome::TooManyRequests => "429",
            WatchOutcome::Error => "error",
        }
    }

    const ALL: [WatchOutcome; 4] = [
        WatchOutcome::Ok,
        WatchOutcome::Gone,
        WatchOutcome::TooManyRequests,
        WatchOutcome::Error,
    ];
}

/// Events and bytes one watcher handed to its connection.
#[derive(Debug, Default)]
struct WatchCounts {
    events: [AtomicU64; 5],
    bytes: AtomicU64,
}

#[derive(Debug, Default)]
struct Fanout {
    live: HashMap<u64, (usize, Arc<WatchCounts>)>,
    next_id: u64,
    /// Totals of ended watchers, per transport: events by type, then bytes.
    retired: [[u64; 6]; 2],
}

/// The metrics of one cached resource: upstream (reflector), cache, downstream watchers.
pub struct ResourceMetrics {
    label: String,
    epoch: Instant,
    /// Listed in `cache.resources`: not ready until synced (an on-demand kind's sync does not
    /// hold up `/readyz`; its reads meanwhile follow kube's rules for a cache not ready).
    pinned: bool,
    /// The kind's cache while it has one (an on-demand kind's is dropped when idle).
    cache: RwLock<Option<Arc<ResourceCache>>>,
    upstream_requests: IntCounterVec,
    upstream_list_duration: Histogram,
    upstream_connects: IntCounter,
    upstream_oversize: IntCounter,
    upstream_watch_ends: IntCounterVec,
    upstream_relists: IntCounterVec,
    upstream_events: [IntCounter; 5],
    upstream_list_bytes: IntCounter,
    upstream_watch_bytes: IntCounter,
    /// Milliseconds since `epoch` (+1) of the last upstream event, bookmark or list; 0: none.
    last_event_ms: AtomicU64,
    /// Milliseconds since `epoch` (+1) the upstream watch has been failing; 0: it is not.
    broken_since_ms: AtomicU64,
    /// The last failure was the upstream refusing watchmux (401, 403), and nothing worked since.
    refused: AtomicBool,
    watching: AtomicBool,
    watch_starts: [IntCounter; 4],
    freshness_checks: IntCounterVec,
    freshness_duration: Histogram,
    consistency_checks: IntCounterVec,
    consistency_duration: Histogram,
    consistency_bytes: IntCounter,
    freshness_waits: IntCounter,
    fanout: Mutex<Fanout>,
}

impl std::fmt::Debug for ResourceMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceMetrics")
            .field("resource", &self.label)
            .finish_non_exhaustive()
    }
}

impl ResourceMetrics {
    /// The `resource` label value.
    pub fn label(&self) -> &str {
        &self.label
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// The cache, once discovery created it (and until it is dropped).
    pub fn cache(&self) -> Option<Arc<ResourceCache>> {
        self.cache.read().clone()
    }

    // ---- upstream (the reflector) ----

    /// One upstream LIST page or WATCH request answered with `code` (`None`: no answer).
    pub fn upstream_request(&self, verb: &str, code: Option<u16>) {
        let code = code.map_or_else(|| "error".to_string(), |c| c.to_string());
        self.upstream_requests
            .with_label_values(&[self.label.as_str(), verb, code.as_str()])
            .inc();
    }

    /// Body bytes received from the upstream for a LIST page.
    pub fn upstream_list_bytes(&self, n: usize) {
        self.upstream_list_bytes.inc_by(n as u64);
    }

    /// Body bytes received from the upstream on a watch stream.
    pub fn upstream_watch_bytes(&self, n: usize) {
        self.upstream_watch_bytes.inc_by(n as u64);
    }

    /// One upstream watch event of type `ty` (`ADDED`, ..., `BOOKMARK`, `ERROR`) arrived.
    pub fn upstream_event(&self, ty: &str) {
        if let Some(i) = event_index(ty.as_bytes()) {
            self.upstream_events[i].inc();
        }
        self.last_event_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// A freshness check of consistent reads ended with `outcome` (how it was proven, or
    /// `failed`) after `d`.
    pub fn freshness_checked(&self, outcome: &str, d: Duration) {
        self.freshness_checks
            .with_label_values(&[self.label.as_str(), outcome])
            .inc();
        self.freshness_duration.observe(d.as_secs_f64());
    }

    /// A consistency check of the cache against the upstream ended with `status`: `success`,
    /// `failure` (they differed), `skipped` (the cache was not following the upstream, or the
    /// upstream did not answer the check), after `d` (its pages read side by side with the
    /// cache's snapshot).
    pub fn consistency_checked(&self, status: &str, d: Duration) {
        self.consistency_checks
            .with_label_values(&[self.label.as_str(), status])
            .inc();
        self.consistency_duration.observe(d.as_secs_f64());
    }

    /// Body bytes received from the upstream for a consistency check's metadata LIST page.
    pub fn consistency_bytes(&self, n: usize) {
        self.consistency_bytes.inc_by(n as u64);
    }

    /// A consistent read waits for a freshness check (several share one).
    pub fn freshness_wait(&self) {
        self.freshness_waits.inc();
    }

    /// A relist starts (`initial` or `expired`).
    pub fn relist(&self, reason: &str) {
        self.upstream_relists
            .with_label_values(&[self.label.as_str(), reason])
            .inc();
    }

    /// A complete paged LIST took `d`; its data is as fresh as an event.
    pub fn listed(&self, d: Duration) {
        self.upstream_list_duration.observe(d.as_secs_f64());
        self.last_event_ms.store(self.now_ms(), Ordering::Relaxed);
        self.refused.store(false, Ordering::Relaxed);
    }

    /// The upstream accepted a watch (200): the watch is up again.
    pub fn watch_connected(&self) {
        self.upstream_connects.inc();
        self.watching.store(true, Ordering::Relaxed);
        self.refused.store(false, Ordering::Relaxed);
        let since = self.broken_since_ms.swap(0, Ordering::Relaxed);
        if since != 0 {
            let outage = Duration::from_millis(self.now_ms().saturating_sub(since));
            tracing::info!(resource = %self.label, outage = ?outage, "upstream watch restored");
        }
    }

    /// An upstream watch ended: `closed` (the stream ended), `expired` (410), `error`.
    pub fn watch_ended(&self, reason: &str) {
        self.watching.store(false, Ordering::Relaxed);
        self.upstream_watch_ends
            .with_label_values(&[self.label.as_str(), reason])
            .inc();
    }

    /// A LIST or WATCH attempt failed: the upstream watch is broken from now on, until a watch
    /// is accepted again. Logged once per outage.
    /// The upstream sent something larger than `cache.max_object_bytes` allows.
    pub fn upstream_oversize(&self) {
        self.upstream_oversize.inc();
    }

    /// The resource's upstream list or watch failed with `error`; `refused`: the upstream
    /// refused watchmux (401, 403).
    pub fn upstream_failed(&self, error: &dyn std::fmt::Display, refused: bool) {
        self.watching.store(false, Ordering::Relaxed);
        self.refused.store(refused, Ordering::Relaxed);
        if self
            .broken_since_ms
            .compare_exchange(0, self.now_ms(), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            tracing::info!(resource = %self.label, error = %error, "upstream watch broken");
        }
    }

    /// Whether the upstream's last answer to the reflector refused watchmux (401, 403), and
    /// no list or watch worked since.
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// How long the upstream watch has been broken, if it is.
    pub fn outage(&self) -> Option<Duration> {
        let since = self.broken_since_ms.load(Ordering::Relaxed);
        (since != 0).then(|| Duration::from_millis(self.now_ms().saturating_sub(since)))
    }

    // ---- downstream ----

    /// A downstream watch on this resource started with `outcome`.
    pub fn watch_start(&self, outcome: WatchOutcome) {
        let i = WatchOutcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(3);
        self.watch_starts[i].inc();
    }

    /// Registers an active watcher on `transport`; it counts as active until the tap drops.
    pub fn watch_tap(self: &Arc<Self>, transport: &str) -> WatchTap {
        let t = TRANSPORTS.iter().position(|x| *x == transport).unwrap_or(0);
        let counts = Arc::new(WatchCounts::default());
        let mut f = self.fanout.lock();
        let id = f.next_id;
        f.next_id += 1;
        f.live.insert(id, (t, counts.clone()));
        WatchTap {
            res: self.clone(),
            id,
            counts,
        }
    }

    /// (active watchers, events by type, bytes) per transport.
    fn fanout_totals(&self) -> [(u64, [u64; 6]); 2] {
        let f = self.fanout.lock();
        let mut out = [(0u64, f.retired[0]), (0u64, f.retired[1])];
        for (t, c) in f.live.values() {
            let o = &mut out[*t];
            o.0 += 1;
            for (i, e) in c.events.iter().enumerate() {
                o.1[i] += e.load(Ordering::Relaxed);
            }
            o.1[5] += c.bytes.load(Ordering::Relaxed);
        }
        out
    }
}

/// One downstream watcher's counters; counts it as active while alive.
#[derive(Debug)]
pub struct WatchTap {
    res: Arc<ResourceMetrics>,
    id: u64,
    counts: Arc<WatchCounts>,
}

impl WatchTap {
    /// One event handed to the connection: its frame starts with `head` (`{"type":"ADDED",...`
    /// in JSON; in protobuf, the 4-byte length, then the `WatchEvent`'s field 1, its type) and
    /// is `len` bytes long.
    pub fn event(&self, head: &[u8], len: usize) {
        let ty = match head.strip_prefix(b"{\"type\":\"") {
            Some(rest) => memchr::memchr(b'"', rest).and_then(|e| event_index(&rest[..e])),
            None => match head.get(4..6) {
                Some([0x0a, n]) => head.get(6..6 + *n as usize).and_then(event_index),
                _ => None,
            },
        };
        if let Some(i) = ty {
            self.counts.events[i].fetch_add(1, Ordering::Relaxed);
        }
        self.counts.bytes.fetch_add(len as u64, Ordering::Relaxed);
    }
}

impl Drop for WatchTap {
    fn drop(&mut self) {
        let mut f = self.res.fanout.lock();
        if let Some((t, c)) = f.live.remove(&self.id) {
            let r = &mut f.retired[t];
            for (i, e) in c.events.iter().enumerate() {
                r[i] += e.load(Ordering::Relaxed);
            }
            r[5] += c.bytes.load(Ordering::Relaxed);
        }
    }
}

/// One health check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Check name (`ping`, `shutdown`, `cache/pods`).
    pub name: String,
    /// Why it fails; `None` when it passes.
    pub error: Option<String>,
    /// For a passing check of a cache that does not follow the upstream now: why its answers
    /// are stale ("serving stale").
    pub stale: Option<String>,
}

struct Shared {
    epoch: Instant,
    /// The kinds cached now (the scrape's gauges and `/readyz` checks are theirs).
    resources: RwLock<Vec<Arc<ResourceMetrics>>>,
    /// On-demand caching's catalog of the upstream's kinds: `/readyz` waits for its first read.
    discovery: OnceLock<Arc<crate::reflector::catalog::Catalog>>,
    /// watchmux's credentials from an exec plugin or the oidc auth-provider: `/readyz` fails
    /// while they have none usable.
    credentials: OnceLock<Arc<crate::upstream::exec::ExecCredentials>>,
    ready_outage: Duration,
    max_staleness: Option<Duration>,
    shutting_down: AtomicBool,
    budget: Arc<MemoryBudget>,
}

impl Shared {
    /// A cached resource's readiness: ready (synced, following the upstream), serving stale
    /// (synced, not following it, within the bounds), or not ready (see the module doc of
    /// `crate::downstream::health`).
    fn resource_check(&self, r: &ResourceMetrics) -> Check {
        let mut stale = None;
        let error = match r.cache() {
            Some(c) if c.is_synced() => {
                let age = c.staleness.age();
                let outage = r
                    .outage()
                    .filter(|d| !self.ready_outage.is_zero() && *d > self.ready_outage);
                if let Some(max) = self.max_staleness.filter(|max| age > *max) {
                    Some(format!(
                        "not following the upstream for {}s, longer than cache.max_staleness_secs ({}s): cached reads are refused",
                        age.as_secs(),
                        max.as_secs()
                    ))
                } else if let Some(d) = outage {
                    Some(format!(
                        "upstream watch broken for {}s (limit {}s)",
                        d.as_secs(),
                        self.ready_outage.as_secs_f64()
                    ))
                } else {
                    if !c.staleness.is_live() {
                        stale = Some(format!("not following the upstream for {}s", age.as_secs()));
                    }
                    None
                }
            }
            // An on-demand kind's first sync does not hold up readiness.
            _ if !r.pinned => None,
            None => Some("waiting for upstream discovery".to_string()),
            Some(_) => Some("not synced: the initial list is not in".to_string()),
        };
        Check {
            name: format!("cache/{}", r.label),
            error,
            stale,
        }
    }

    fn readiness(&self) -> Vec<Check> {
        let mut out = vec![
            Check {
                name: "ping".into(),
                error: None,
                stale: None,
            },
            Check {
                name: "shutdown".into(),
                stale: None,
                error: self
                    .shutting_down
                    .load(Ordering::Relaxed)
                    .then(|| "the process is shutting down".to_string()),
            },
        ];
        // Not a failure: an edge cache restarted during an outage serves what it restored.
        if let Some(catalog) = self.discovery.get() {
            out.push(Check {
                name: "discovery".into(),
                error: None,
                stale: (!catalog.is_loaded()).then(|| {
                    "the upstream's discovery has not been read yet: only listed kinds are cached"
                        .to_string()
                }),
            });
        }
        if let Some(c) = self.credentials.get() {
            out.push(Check {
                name: "upstream-credentials".into(),
                error: c.health(),
                stale: None,
            });
        }
        let resources = self.resources.read().clone();
        out.extend(resources.iter().map(|r| self.resource_check(r)));
        out
    }
}

/// Per-request facts worked out before the request is handled.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    /// kube verb.
    pub verb: &'static str,
    /// `resource` label (cached resource or `other`).
    pub resource: String,
    /// The resource's metrics when it is cached.
    pub cached: Option<Arc<ResourceMetrics>>,
    started: Instant,
    method: Method,
    uri: http::Uri,
}

/// Marks a response the upstream produced (set by the pass-through route), and why the cache
/// did not answer it.
#[derive(Debug, Clone, Copy)]
pub struct PassedThrough(pub PassReason);

/// Marks watchmux's own answer refusing a read (set by the router), and why.
#[derive(Debug, Clone, Copy)]
pub struct Refused(pub Refusal);

/// What happened to a cached kind (`watchmux_cache_kind_changes_total{change}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindChange {
    /// Its cache started: its first read, or at start for `cache.resources`.
    Started,
    /// Not read for `cache.idle_secs`.
    DroppedIdle,
    /// The least recently read while `cache.memory_limit` was near.
    DroppedMemory,
    /// The upstream no longer serves it (its CRD was deleted).
    DroppedRemoved,
    /// Its CRD changed its scope, kind or selectable fields.
    RestartedChanged,
    /// Passed through instead of being cached, near `cache.memory_limit`.
    RefusedMemory,
}

impl KindChange {
    /// Every value (so the metric's series exist from the start).
    pub const ALL: [KindChange; 6] = [
        KindChange::Started,
        KindChange::DroppedIdle,
        KindChange::DroppedMemory,
        KindChange::DroppedRemoved,
        KindChange::RestartedChanged,
        KindChange::RefusedMemory,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            KindChange::Started => "started",
            KindChange::DroppedIdle => "dropped_idle",
            KindChange::DroppedMemory => "dropped_memory",
            KindChange::DroppedRemoved => "dropped_removed",
            KindChange::RestartedChanged => "restarted_changed",
            KindChange::RefusedMemory => "refused_memory",
        }
    }
}

/// The metric families with a `resource` label, to make a kind's series when it is first
/// cached.
struct Families {
    epoch: Instant,
    upstream_requests: IntCounterVec,
    upstream_list_duration: HistogramVec,
    upstream_connects: IntCounterVec,
    upstream_oversize: IntCounterVec,
    upstream_watch_ends: IntCounterVec,
    upstream_relists: IntCounterVec,
    upstream_events: IntCounterVec,
    upstream_bytes: IntCounterVec,
    watch_starts: IntCounterVec,
    freshness_checks: IntCounterVec,
    freshness_duration: HistogramVec,
    consistency_checks: IntCounterVec,
    consistency_duration: HistogramVec,
    freshness_waits: IntCounterVec,
    reads: IntCounterVec,
    request_duration: HistogramVec,
    list_requests: IntCounterVec,
    list_duration: HistogramVec,
}

/// Removes every series of `vec` whose `resource` label is `label`.
fn forget_series<T: prometheus::core::MetricVecBuilder>(
    vec: &prometheus::core::MetricVec<T>,
    label: &str,
) {
    for family in vec.collect() {
        for m in family.get_metric() {
            let labels: HashMap<&str, &str> = m
                .get_label()
                .iter()
                .map(|p| (p.name(), p.value()))
                .collect();
            if labels.get("resource") == Some(&label) {
                let _ = vec.remove(&labels);
            }
        }
    }
}

impl Families {
    /// Removes every series of the kind labelled `label` (the upstream no longer serves it).
    fn forget(&self, label: &str) {
        forget_series(&self.upstream_requests, label);
        forget_series(&self.upstream_list_duration, label);
        forget_series(&self.upstream_connects, label);
        forget_series(&self.upstream_oversize, label);
        forget_series(&self.upstream_watch_ends, label);
        forget_series(&self.upstream_relists, label);
        forget_series(&self.upstream_events, label);
        forget_series(&self.upstream_bytes, label);
        forget_series(&self.watch_starts, label);
        forget_series(&self.freshness_checks, label);
        forget_series(&self.consistency_checks, label);
        forget_series(&self.consistency_duration, label);
        forget_series(&self.freshness_duration, label);
        forget_series(&self.freshness_waits, label);
        forget_series(&self.reads, label);
        forget_series(&self.request_duration, label);
        forget_series(&self.list_requests, label);
        forget_series(&self.list_duration, label);
    }

    /// The metrics of one kind, labelled `label`, with every series a dashboard or an alert
    /// reads created (at 0). `pinned`: listed in `cache.resources` (its readiness counts from
    /// the start).
    fn resource(&self, label: String, pinned: bool) -> ResourceMetrics {
        let l = label.as_str();
        let rm = ResourceMetrics {
            epoch: self.epoch,
            pinned,
            cache: RwLock::new(None),
            upstream_requests: self.upstream_requests.clone(),
            upstream_list_duration: self.upstream_list_duration.with_label_values(&[l]),
            upstream_connects: self.upstream_connects.with_label_values(&[l]),
            upstream_oversize: self.upstream_oversize.with_label_values(&[l]),
            upstream_watch_ends: self.upstream_watch_ends.clone(),
            upstream_relists: self.upstream_relists.clone(),
            upstream_events: EVENT_TYPES.map(|t| self.upstream_events.with_label_values(&[l, t])),
            upstream_list_bytes: self.upstream_bytes.with_label_values(&[l, "list"]),
            upstream_watch_bytes: self.upstream_bytes.with_label_values(&[l, "watch"]),
            last_event_ms: AtomicU64::new(0),
            broken_since_ms: AtomicU64::new(0),
            refused: AtomicBool::new(false),
            watching: AtomicBool::new(false),
            watch_starts: WatchOutcome::ALL
                .map(|o| self.watch_starts.with_label_values(&[l, o.label()])),
            freshness_checks: self.freshness_checks.clone(),
            freshness_duration: self.freshness_duration.with_label_values(&[l]),
            consistency_checks: self.consistency_checks.clone(),
            consistency_duration: self.consistency_duration.with_label_values(&[l]),
            consistency_bytes: self.upstream_bytes.with_label_values(&[l, "consistency"]),
            freshness_waits: self.freshness_waits.with_label_values(&[l]),
            fanout: Mutex::new(Fanout::default()),
            label: label.clone(),
        };
        for reason in ["closed", "expired", "error"] {
            self.upstream_watch_ends.with_label_values(&[l, reason]);
        }
        for reason in ["initial", "expired"] {
            self.upstream_relists.with_label_values(&[l, reason]);
        }
        for verb in ["list", "watch", "freshness"] {
            self.upstream_requests.with_label_values(&[l, verb, "200"]);
        }
        for source in SOURCES {
            self.list_requests.with_label_values(&[l, source]);
            self.list_duration.with_label_values(&[l, source]);
        }
        for verb in ["list", "watch", "get"] {
            self.request_duration.with_label_values(&[verb, l]);
            self.reads.with_label_values(&[l, verb, SOURCE_CACHE, ""]);
            for reason in PassReason::ALL {
                self.reads
                    .with_label_values(&[l, verb, SOURCE_PASS_THROUGH, reason.as_str()]);
            }
            for refusal in Refusal::ALL {
                self.reads
                    .with_label_values(&[l, verb, SOURCE_REFUSED, refusal.as_str()]);
            }
        }
        for outcome in ["ahead", "state", "caught_up", "event", "bookmark", "failed"] {
            self.freshness_checks.with_label_values(&[l, outcome]);
        }
        for status in ["success", "failure", "skipped"] {
            self.consistency_checks.with_label_values(&[l, status]);
        }
        rm
    }
}

/// The lookups of the delegated-authz caches (`watchmux_authz_cache_requests_total`), one
/// pre-bound counter per review and result.
#[derive(Debug, Clone)]
pub struct AuthzMetrics {
    lookups: [[IntCounter; 3]; 2],
}

impl AuthzMetrics {
    /// One lookup of `review`'s cache, answered as `result`.
    pub fn lookup(&self, review: Review, result: Lookup) {
        self.lookups[review as usize][result as usize].inc();
    }
}

/// The proxy's metrics registry and health state.
pub struct Metrics {
    registry: Registry,
    shared: Arc<Shared>,
    families: Families,
    /// Every kind cached since the start (its series stay, counting on, when it is dropped and
    /// started again), until the upstream stops serving it.
    by_gvr: RwLock<HashMap<(String, String, String), Arc<ResourceMetrics>>>,
    kind_changes: IntCounterVec,
    requests: IntCounterVec,
    request_duration: HistogramVec,
    list_requests: IntCounterVec,
    list_duration: HistogramVec,
    passthrough_bytes: IntCounterVec,
    reads: IntCounterVec,
    authz: AuthzMetrics,
    /// `watchmux_proxy_protocol_rejected_total`, one per [`Rejection`] in its order.
    proxy_rejected: [IntCounter; 4],
    /// `watchmux_connection_goaways_total`, one per [`GoawayCause`] in its order.
    goaways: [IntCounter; 2],
    /// `watchmux_requests_in_flight`.
    in_flight: IntGauge,
    /// `watchmux_connections_closing`.
    closing: IntGauge,
}

/// Counts one in a gauge while it lives ([`Metrics::request_in_flight`],
/// [`Metrics::connection_closing`]).
#[derive(Debug)]
pub struct GaugeGuard(IntGauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("resources", &self.shared.resources)
            .finish_non_exhaustive()
    }
}

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let v = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    r.register(Box::new(v.clone())).expect("unique metric");
    v
}

fn histogram_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> HistogramVec {
    let v = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("valid metric");
    r.register(Box::new(v.clone())).expect("unique metric");
    v
}

/// The `resource` label of each configured resource: `pods`, `endpointslices.discovery.k8s.io`,
/// or, when two versions of one group/resource are cached, `pods.v1`-style names for those.
pub fn resource_labels(specs: &[ResourceSpec]) -> Vec<String> {
    let gr = |s: &ResourceSpec| kube_wire::status::group_resource(&s.group, &s.resource);
    specs
        .iter()
        .map(|s| {
            let dup = specs.iter().filter(|o| gr(o) == gr(s)).count() > 1;
            if dup { s.to_string() } else { gr(s) }
        })
        .collect()
}

impl Metrics {
    /// Metrics for the resources `config` caches, with the readiness bounds of `config`.
    pub fn new(config: &Config) -> Metrics {
        Self::with_budget(config, MemoryBudget::unlimited())
    }

    /// The metrics of a watchmux configured by `config` whose caches count in `budget`.
    pub fn with_budget(config: &Config, budget: Arc<MemoryBudget>) -> Metrics {
        let registry = Registry::new();
        let r = &registry;
        let upstream_requests = counter_vec(
            r,
            "watchmux_upstream_requests_total",
            "Upstream requests made for a cached resource, by verb (list: a page of the reflector's LIST; watch: its watch; freshness: a freshness check's consistent LIST or short watch, which consistent reads share) and HTTP code (error: no answer).",
            &["resource", "verb", "code"],
        );
        let upstream_list_duration = histogram_vec(
            r,
            "watchmux_upstream_list_duration_seconds",
            "Duration of a reflector's complete (paged) upstream LIST.",
            &["resource"],
            UPSTREAM_LIST_BUCKETS,
        );
        let upstream_oversize = counter_vec(
            r,
            "watchmux_upstream_oversize_total",
            "Upstream objects, watch lines or list pages refused for exceeding cache.max_object_bytes (each one fails the list or watch, which is retried; the cache keeps its last good state).",
            &["resource"],
        );
        let upstream_connects = counter_vec(
            r,
            "watchmux_upstream_watch_connects_total",
            "Upstream watches established (the first one and every reconnect).",
            &["resource"],
        );
        let upstream_watch_ends = counter_vec(
            r,
            "watchmux_upstream_watch_ends_total",
            "Upstream watches ended, by reason: closed (the stream ended), expired (410), error.",
            &["resource", "reason"],
        );
        let upstream_relists = counter_vec(
            r,
            "watchmux_upstream_relists_total",
            "Upstream LISTs of a whole resource, by cause: initial, expired (the watch resourceVersion is gone), oversize (a watch event exceeded cache.max_object_bytes), inconsistent (a consistency check found the cache unlike the upstream: the relist repairs it).",
            &["resource", "reason"],
        );
        let upstream_events = counter_vec(
            r,
            "watchmux_upstream_events_total",
            "Upstream watch events received, by type.",
            &["resource", "type"],
        );
        let upstream_bytes = counter_vec(
            r,
            "watchmux_upstream_bytes_total",
            "Body bytes received from the upstream by the reflectors (verb: list, watch, consistency: the metadata LISTs of consistency checks).",
            &["resource", "verb"],
        );
        let freshness_checks = counter_vec(
            r,
            "watchmux_freshness_checks_total",
            "Freshness checks of consistent reads (one per batch of waiting readers), by how the cache was proven fresh: ahead (already there), state (it held the upstream's state, by a metadata LIST), caught_up (its watch got there), event or bookmark (the short upstream watch proved it), failed (the readers went to the upstream).",
            &["resource", "outcome"],
        );
        let consistency_checks = counter_vec(
            r,
            "watchmux_consistency_checks_total",
            "Checks of a cache against the upstream (keys and resourceVersions at one resourceVersion, cache.consistency_check_secs), by status: success, failure (they differed: the cache relisted and repaired itself), skipped (the cache was not following the upstream, or the upstream did not answer).",
            &["resource", "status"],
        );
        let consistency_duration = histogram_vec(
            r,
            "watchmux_consistency_check_duration_seconds",
            "Duration of a consistency check of a cache against the upstream: its metadata LIST pages read beside the cache's snapshot (about a second for 100k pods), a wait for the upstream included when it had compacted the cache's resourceVersion.",
            &["resource"],
            UPSTREAM_LIST_BUCKETS,
        );
        let freshness_duration = histogram_vec(
            r,
            "watchmux_freshness_check_duration_seconds",
            "Duration of a freshness check of consistent reads (the wait it adds to a consistent LIST, GET or watch-list).",
            &["resource"],
            REQUEST_BUCKETS,
        );
        let freshness_waits = counter_vec(
            r,
            "watchmux_freshness_waits_total",
            "Consistent reads (LIST, GET or watch-list without a resourceVersion) that waited for a freshness check; the readers that arrive within cache.consistent_read_check_interval_ms share one (its upstream requests: watchmux_upstream_requests_total{verb=\"freshness\"}).",
            &["resource"],
        );
        let reads = counter_vec(
            r,
            "watchmux_reads_total",
            "Downstream reads (get, list, watch) of cached resources, by source (cache, pass_through, or refused: watchmux's own 429 or 503) and, for pass_through and refused, the reason the cache did not answer.",
            &["resource", "verb", "source", "reason"],
        );
        let watch_starts = counter_vec(
            r,
            "watchmux_watch_starts_total",
            "Downstream watches on cached resources, by outcome: ok, 410 (too old resourceVersion), 429 (cache not ready), error.",
            &["resource", "outcome"],
        );
        let requests = counter_vec(
            r,
            "watchmux_requests_total",
            "Downstream requests by verb, resource (cached, else other) and HTTP code.",
            &["verb", "resource", "code"],
        );
        let request_duration = histogram_vec(
            r,
            "watchmux_request_duration_seconds",
            "Downstream request latency until the response head is ready, by verb and resource.",
            &["verb", "resource"],
            REQUEST_BUCKETS,
        );
        let list_requests = counter_vec(
            r,
            "watchmux_list_requests_total",
            "Downstream LIST requests by source: cache (answered by watchmux), pass_through (the upstream) or refused (429 or 503 from watchmux: a cache not ready, a limit, too stale).",
            &["resource", "source"],
        );
        let list_duration = histogram_vec(
            r,
            "watchmux_list_duration_seconds",
            "Downstream LIST latency until the response head is ready, by source.",
            &["resource", "source"],
            REQUEST_BUCKETS,
        );
        let passthrough_bytes = counter_vec(
            r,
            "watchmux_passthrough_bytes_total",
            "Response body bytes passed through from the upstream to clients, by verb.",
            &["verb"],
        );
        let authz_lookups = counter_vec(
            r,
            "watchmux_authz_cache_requests_total",
            "Lookups of the delegated-authz caches (server.authz = \"delegated\"), by review (token: TokenReview, access: SubjectAccessReview) and result: hit (a cached verdict), miss (the lookup sent the review upstream: the upstream's reviews), shared (it waited for a concurrent lookup's review of the same key).",
            &["review", "result"],
        );
        let authz = AuthzMetrics {
            lookups: Review::ALL.map(|review| {
                Lookup::ALL.map(|result| {
                    authz_lookups.with_label_values(&[review.as_str(), result.as_str()])
                })
            }),
        };
        let proxy_rejected = counter_vec(
            r,
            "watchmux_proxy_protocol_rejected_total",
            "Connections closed before TLS and HTTP for the PROXY protocol (server.proxy_protocol_trusted), by reason: untrusted (a connection from a source not trusted to send a PROXY header started with one), missing (a trusted source sent no header), malformed (a trusted source's header does not parse), incomplete (a trusted source's connection ended, failed or reached server.header_read_timeout_secs before its header was whole).",
            &["reason"],
        );
        let proxy_rejected =
            Rejection::ALL.map(|r| proxy_rejected.with_label_values(&[r.as_str()]));
        let goaways = counter_vec(
            r,
            "watchmux_connection_goaways_total",
            "Client connections watchmux ended gracefully (HTTP/2 GOAWAY, HTTP/1 close after the response in flight) so that their clients reconnect through the balancer, their cached watches handed over after a bookmark, by cause: chance (an HTTP/2 request drew it, server.goaway_chance) or age (the connection reached server.max_connection_age_secs).",
            &["cause"],
        );
        let goaways = GoawayCause::ALL.map(|c| goaways.with_label_values(&[c.as_str()]));
        let int_gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("valid metric");
            r.register(Box::new(g.clone())).expect("unique metric");
            g
        };
        let in_flight = int_gauge(
            "watchmux_requests_in_flight",
            "Downstream requests received whose response head is not ready yet (kube-apiserver's apiserver_current_inflight_requests, without its kinds): one that stays up is a request its client waits on with no answer.",
        );
        let closing = int_gauge(
            "watchmux_connections_closing",
            "Client connections ended gracefully (HTTP/2 GOAWAY: a shutdown, server.goaway_chance, server.max_connection_age_secs) whose streams in flight have not all ended yet.",
        );
        let epoch = Instant::now();
        let families = Families {
            epoch,
            upstream_requests,
            upstream_list_duration,
            upstream_connects,
            upstream_oversize,
            upstream_watch_ends,
            upstream_relists,
            upstream_events,
            upstream_bytes,
            watch_starts,
            freshness_checks,
            freshness_duration,
            consistency_checks,
            consistency_duration,
            freshness_waits,
            reads: reads.clone(),
            request_duration: request_duration.clone(),
            list_requests: list_requests.clone(),
            list_duration: list_duration.clone(),
        };
        let kinds = counter_vec(
            r,
            "watchmux_cache_kind_changes_total",
            "Kinds whose cache was started or dropped, by what happened: started (its first read, or at start for cache.resources), dropped_idle (not read for cache.idle_secs), dropped_memory (least recently read while cache.memory_limit was near), dropped_removed (the upstream no longer serves it, e.g. its CRD was deleted), restarted_changed (its CRD changed its scope, kind or selectable fields), refused_memory (a kind passed through instead of being cached, near cache.memory_limit).",
            &["change"],
        );
        for c in KindChange::ALL {
            kinds.with_label_values(&[c.as_str()]);
        }
        let specs = &config.cache.resources;
        let labels = resource_labels(specs);
        let mut by_gvr = HashMap::new();
        let mut resources = Vec::new();
        for (spec, label) in specs.iter().zip(labels) {
            let rm = Arc::new(families.resource(label, true));
            by_gvr.insert(
                (
                    spec.group.clone(),
                    spec.version.clone(),
                    spec.resource.clone(),
                ),
                rm.clone(),
            );
            resources.push(rm);
        }
        list_requests.with_label_values(&[OTHER_RESOURCE, SOURCE_PASS_THROUGH]);
        list_duration.with_label_values(&[OTHER_RESOURCE, SOURCE_PASS_THROUGH]);
        for verb in VERBS {
            passthrough_bytes.with_label_values(&[verb]);
            request_duration.with_label_values(&[verb, OTHER_RESOURCE]);
        }
        let shared = Arc::new(Shared {
            epoch,
            resources: RwLock::new(resources),
            discovery: OnceLock::new(),
            credentials: OnceLock::new(),
            ready_outage: config.server.ready_outage,
            max_staleness: config.cache.max_staleness,
            shutting_down: AtomicBool::new(false),
            budget,
        });
        registry
            .register(Box::new(ScrapeCollector::new(shared.clone())))
            .expect("unique metrics");
        #[cfg(target_os = "linux")]
        registry
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::new(
                    std::process::id() as i32,
                    "watchmux",
                ),
            ))
            .expect("unique metrics");
        Metrics {
            registry,
            shared,
            families,
            by_gvr: RwLock::new(by_gvr),
            kind_changes: kinds,
            requests,
            request_duration,
            list_requests,
            list_duration,
            passthrough_bytes,
            reads,
            authz,
            proxy_rejected,
            goaways,
            in_flight,
            closing,
        }
    }

    /// Counts a request in flight until the guard is dropped (when its response head is
    /// ready, or the request is dropped).
    pub fn request_in_flight(&self) -> GaugeGuard {
        self.in_flight.inc();
        GaugeGuard(self.in_flight.clone())
    }

    /// Counts a connection closing gracefully until the guard is dropped.
    pub fn connection_closing(&self) -> GaugeGuard {
        self.closing.inc();
        GaugeGuard(self.closing.clone())
    }

    /// Counts a connection ended gracefully to move its client (`server.goaway_chance`,
    /// `server.max_connection_age_secs`).
    pub fn connection_goaway(&self, cause: GoawayCause) {
        self.goaways[cause as usize].inc();
    }

    /// Counts a connection closed for the PROXY protocol.
    pub fn proxy_protocol_rejected(&self, reason: Rejection) {
        self.proxy_rejected[reason as usize].inc();
    }

    /// The counters of the delegated-authz caches' lookups.
    pub fn authz(&self) -> AuthzMetrics {
        self.authz.clone()
    }

    /// The metrics of a cached kind (cached now or before).
    pub fn resource(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<ResourceMetrics>> {
        self.by_gvr
            .read()
            .get(&(group.to_string(), version.to_string(), resource.to_string()))
            .cloned()
    }

    /// The metrics of the resource a cache holds (a detached set if it is not a cached kind,
    /// which never happens in [`crate::app::App`]).
    pub fn for_info(&self, info: &ResourceInfo) -> Arc<ResourceMetrics> {
        match self.resource(&info.group, &info.version, &info.resource) {
            Some(r) => r,
            None => Arc::new(
                Metrics::new(&Config::default())
                    .families
                    .resource(info.group_resource(), false),
            ),
        }
    }

    /// The metrics of a kind whose cache starts now (made at its first start, kept through
    /// restarts): from now on its gauges are scraped and `/readyz` checks it.
    pub fn start_kind(&self, spec: &ResourceSpec, pinned: bool) -> Arc<ResourceMetrics> {
        let key = (
            spec.group.clone(),
            spec.version.clone(),
            spec.resource.clone(),
        );
        let rm = {
            let mut by_gvr = self.by_gvr.write();
            if let Some(rm) = by_gvr.get(&key) {
                rm.clone()
            } else {
                // `pods`, or `pods.v1` when another version of the kind is cached too.
                let gr = kube_wire::status::group_resource(&spec.group, &spec.resource);
                let label = if by_gvr.values().any(|r| r.label == gr) {
                    spec.to_string()
                } else {
                    gr
                };
                let rm = Arc::new(self.families.resource(label, pinned));
                by_gvr.insert(key, rm.clone());
                rm
            }
        };
        let mut live = self.shared.resources.write();
        if !live.iter().any(|r| Arc::ptr_eq(r, &rm)) {
            live.push(rm.clone());
        }
        rm
    }

    /// Lets the scrape read a kind's cache once discovery created it.
    pub fn attach_cache(&self, rm: &ResourceMetrics, cache: Arc<ResourceCache>) {
        *rm.cache.write() = Some(cache);
    }

    /// A kind's cache was dropped: no gauges, no readiness check, the cache freed. `vanished`:
    /// the upstream no longer serves the kind, so its series go too.
    pub fn stop_kind(&self, rm: &Arc<ResourceMetrics>, vanished: bool) {
        *rm.cache.write() = None;
        self.shared
            .resources
            .write()
            .retain(|r| !Arc::ptr_eq(r, rm));
        if vanished {
            self.by_gvr.write().retain(|_, r| !Arc::ptr_eq(r, rm));
            self.families.forget(&rm.label);
            forget_series(&self.requests, &rm.label);
        }
    }

    /// Counts a kind started, dropped or refused.
    pub fn kind_change(&self, change: KindChange) {
        self.kind_changes
            .with_label_values(&[change.as_str()])
            .inc();
    }

    /// `/readyz` waits for on-demand caching's first read of discovery.
    pub fn set_discovery(&self, catalog: Arc<crate::reflector::catalog::Catalog>) {
        let _ = self.shared.discovery.set(catalog);
    }

    /// `/readyz` fails while watchmux's exec plugin or oidc credentials have none usable
    /// (`upstream-credentials`, saying why).
    pub fn set_credentials(&self, credentials: Arc<crate::upstream::exec::ExecCredentials>) {
        let _ = self.shared.credentials.set(credentials);
    }

    /// The whole registry in the Prometheus text format.
    pub fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }

    /// The registry (to add collectors).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// From now on `/readyz` fails (the process is shutting down).
    pub fn set_shutting_down(&self) {
        self.shared.shutting_down.store(true, Ordering::Relaxed);
    }

    /// Whether shutdown began.
    pub fn shutting_down(&self) -> bool {
        self.shared.shutting_down.load(Ordering::Relaxed)
    }

    /// `/readyz` checks: ping, shutdown, then one per cached resource (synced; within
    /// `cache.max_staleness_secs`; its upstream watch not broken for longer than
    /// `server.ready_outage_secs` when that is set; passing but "serving stale" while it does
    /// not follow the upstream).
    pub fn readiness(&self) -> Vec<Check> {
        self.shared.readiness()
    }

    /// `/livez` and `/healthz` checks: the process serves.
    pub fn liveness(&self) -> Vec<Check> {
        vec![Check {
            name: "ping".into(),
            error: None,
            stale: None,
        }]
    }

    /// Works out what a request is, before it is handled.
    pub fn classify<B>(&self, req: &Request<B>) -> RequestInfo {
        let (verb, cached) = classify(req.method(), req.uri(), req.headers(), |g, v, r| {
            self.resource(g, v, r)
        });
        RequestInfo {
            verb,
            resource: cached
                .as_ref()
                .map_or_else(|| OTHER_RESOURCE.to_string(), |r| r.label.clone()),
            cached,
            started: Instant::now(),
            method: req.method().clone(),
            uri: req.uri().clone(),
        }
    }

    /// Counts, times and logs (debug) one answered request; a pass-through body is metered
    /// (and, for a watch, ended at an event boundary when `drain` fires).
    pub fn finish(
        &self,
        info: &RequestInfo,
        resp: Response<Body>,
        drain: &CancellationToken,
    ) -> Response<Body> {
        let elapsed = info.started.elapsed();
        let code = resp.status().as_u16();
        let passed_reason = resp.extensions().get::<PassedThrough>().map(|p| p.0);
        let passed = passed_reason.is_some();
        let refusal = resp.extensions().get::<Refused>().map(|r| r.0);
        let code_label = code.to_string();
        self.requests
            .with_label_values(&[info.verb, info.resource.as_str(), code_label.as_str()])
            .inc();
        self.request_duration
            .with_label_values(&[info.verb, info.resource.as_str()])
            .observe(elapsed.as_secs_f64());
        let (source, reason) = match (passed_reason, refusal) {
            (Some(p), _) => (SOURCE_PASS_THROUGH, p.as_str()),
            (None, Some(r)) => (SOURCE_REFUSED, r.as_str()),
            (None, None) => (SOURCE_CACHE, ""),
        };
        if info.cached.is_some() && matches!(info.verb, "get" | "list" | "watch") {
            self.reads
                .with_label_values(&[info.resource.as_str(), info.verb, source, reason])
                .inc();
        }
        if info.verb == "list" {
            self.list_requests
                .with_label_values(&[info.resource.as_str(), source])
                .inc();
            self.list_duration
                .with_label_values(&[info.resource.as_str(), source])
                .observe(elapsed.as_secs_f64());
        }
        // A cached watch that never reached the watcher (429, 400, ...): the watcher itself
        // counts those that did (ok, or 410 in the stream).
        if info.verb == "watch"
            && !passed
            && let Some(r) = &info.cached
            && !(resp.status().is_success() || code == 101)
        {
            r.watch_start(if code == 429 {
                WatchOutcome::TooManyRequests
            } else if code == 410 {
                WatchOutcome::Gone
            } else {
                WatchOutcome::Error
            });
        }
        tracing::debug!(
            method = %info.method,
            uri = %info.uri,
            verb = info.verb,
            resource = %info.resource,
            source,
            code,
            elapsed_ms = elapsed.as_secs_f64() * 1000.0,
            "request"
        );
        if !passed {
            return resp;
        }
        let counter = self.passthrough_bytes.with_label_values(&[info.verb]);
        let drain = (info.verb == "watch").then(|| drain.clone());
        resp.map(|b| MeteredBody::new(b, counter, drain).boxed())
    }
}

/// kube's verb for a request, and the cached resource it is about.
fn classify<T>(
    method: &Method,
    uri: &http::Uri,
    headers: &HeaderMap,
    lookup: impl Fn(&str, &str, &str) -> Option<T>,
) -> (&'static str, Option<T>) {
    let upgrade = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        && headers.contains_key(http::header::UPGRADE);
    let read = *method == Method::GET || *method == Method::HEAD;
    let ApiPath::Resource(rp) = path::parse(uri.path()) else {
        return (if read { "get" } else { "other" }, None);
    };
    let cached = lookup(&rp.group, &rp.version, &rp.resource);
    let watch = rp.legacy_watch
        || uri.query().is_some_and(|q| {
            form_urlencoded::parse(q.as_bytes()).any(|(k, v)| {
                k == "watch" && matches!(v.as_ref(), "1" | "t" | "T" | "true" | "TRUE" | "True")
            })
        });
    let collection = rp.name.is_none();
    let verb = if read && watch {
        "watch"
    } else if upgrade {
        "connect"
    } else if read {
        if collection { "list" } else { "get" }
    } else {
        match *method {
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if collection => "deletecollection",
            Method::DELETE => "delete",
            _ => "other",
        }
    };
    (verb, cached)
}

/// A pass-through response body that counts its bytes and, for a watch, ends cleanly at an
/// event boundary once `drain` fires (the client re-watches elsewhere).
pub struct MeteredBody {
    inner: Body,
    bytes: IntCounter,
    drain: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    at_boundary: bool,
    done: bool,
}

impl MeteredBody {
    /// Wraps `inner`.
    pub fn new(inner: Body, bytes: IntCounter, drain: Option<CancellationToken>) -> Self {
        MeteredBody {
            inner,
            bytes,
            drain: drain.map(|d| Box::pin(d.cancelled_owned())),
            at_boundary: true,
            done: false,
        }
    }
}

impl HttpBody for MeteredBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if this.at_boundary
            && let Some(d) = &mut this.drain
            && d.as_mut().poll(cx).is_ready()
        {
            this.done = true;
            return Poll::Ready(None);
        }
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &r
            && let Some(d) = f.data_ref()
            && !d.is_empty()
        {
            this.bytes.inc_by(d.len() as u64);
            this.at_boundary = d.ends_with(b"\n");
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.drain.is_some() {
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}

// ---- the scrape-time collector ------------------------------------------------------------

struct Family {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    counter: bool,
}

const fn gauge(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Family {
    Family {
        name,
        help,
        labels,
        counter: false,
    }
}

const fn counter(
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
) -> Family {
    Family {
        name,
        help,
        labels,
        counter: true,
    }
}

const R: &[&str] = &["resource"];

/// What the scrape reads from the caches, the reflectors' state and the watchers' taps.
const SCRAPED: &[Family] = &[
    gauge("watchmux_cache_objects", "Objects in the cache.", R),
    gauge(
        "watchmux_cache_bytes",
        "Bytes of object JSON held in the cache (each object's stored body).",
        R,
    ),
    gauge(
        "watchmux_cache_resource_version",
        "The cache's resourceVersion (last event or bookmark applied).",
        R,
    ),
    gauge(
        "watchmux_cache_window_events",
        "Events in the cache's event window (watches from older resourceVersions get 410).",
        R,
    ),
    gauge(
        "watchmux_cache_window_age_seconds",
        "Age of the oldest event in the cache's event window (0 when empty).",
        R,
    ),
    gauge(
        "watchmux_cache_snapshots",
        "Snapshots kept for the continue pages of paged LISTs (cache.snapshot_max_count bounds them).",
        R,
    ),
    gauge(
        "watchmux_cache_snapshot_bytes",
        "Bytes of object JSON the kept snapshots hold that the live cache no longer does (objects changed or deleted since they were taken, counted once per snapshot; cache.snapshot_max_bytes bounds them).",
        R,
    ),
    gauge(
        "watchmux_cache_synced",
        "1 once the resource's initial upstream list is in the cache.",
        R,
    ),
    gauge(
        "watchmux_cache_staleness_seconds",
        "Seconds since the cache last followed the upstream (0 while its watch is up): how stale its answers may be. Counts across restarts with cache.persist_dir.",
        R,
    ),
    counter(
        "watchmux_cache_events_applied_total",
        "Upstream events applied to the cache (duplicates after a re-watch are not).",
        R,
    ),
    counter(
        "watchmux_persist_bytes_written_total",
        "Bytes the durable cache (cache.persist_dir) wrote: appended records and full states.",
        R,
    ),
    counter(
        "watchmux_persist_checkpoints_total",
        "Full states the durable cache wrote (its log grew past its bound, the cache relisted, or records were dropped).",
        R,
    ),
    counter(
        "watchmux_persist_dropped_records_total",
        "Records the durable cache's writer could not queue (a full state written afterwards replaced them).",
        R,
    ),
    counter(
        "watchmux_persist_write_errors_total",
        "Writes of the durable cache that failed (logged; a full state follows).",
        R,
    ),
    gauge(
        "watchmux_persist_disk_bytes",
        "Bytes of the resource's durable cache on disk.",
        R,
    ),
    counter(
        "watchmux_cache_relists_total",
        "Relists after the initial sync, by outcome: bridged (watchers kept, the difference sent as events) or reset (every watcher closed).",
        &["resource", "outcome"],
    ),
    counter(
        "watchmux_cache_selector_evaluations_total",
        "Watcher filters evaluated while dispatching events (the cost the dispatch index keeps small).",
        R,
    ),
    counter(
        "watchmux_cache_deliveries_total",
        "Events queued to live watchers by the dispatcher.",
        R,
    ),
    counter(
        "watchmux_slow_watchers_closed_total",
        "Watchers closed for falling too far behind (out of the event window or beyond watcher_max_lag_bytes).",
        R,
    ),
    counter(
        "watchmux_watches_drained_total",
        "Watches ended just after a BOOKMARK at their resourceVersion, so that their clients re-watch elsewhere with no LIST, by cause: shutdown (a graceful shutdown's paced drain) or goaway (their connection was ended to move its client: an HTTP/2 GOAWAY drawn, server.goaway_chance, or the connection's age, server.max_connection_age_secs).",
        &["resource", "cause"],
    ),
    gauge(
        "watchmux_upstream_last_event_age_seconds",
        "Seconds since the last upstream event, bookmark or list of the resource (since start if none yet).",
        R,
    ),
    gauge(
        "watchmux_upstream_watch_up",
        "1 while the resource's upstream watch is established.",
        R,
    ),
    gauge(
        "watchmux_upstream_outage_seconds",
        "Seconds the resource's upstream list/watch has been failing (0 when it is not).",
        R,
    ),
    gauge(
        "watchmux_watchers",
        "Active downstream watches served from the cache, by transport (chunked, websocket).",
        &["resource", "transport"],
    ),
    counter(
        "watchmux_watch_events_sent_total",
        "Watch events handed to downstream connections, by transport and type.",
        &["resource", "transport", "type"],
    ),
    counter(
        "watchmux_watch_bytes_sent_total",
        "Watch event bytes handed to downstream connections, by transport.",
        &["resource", "transport"],
    ),
    gauge(
        "watchmux_cache_memory_bytes",
        "Bytes the resource's cache counts in the memory budget: object versions (JSON, record, protobuf copy), logged events and their frames, watchers.",
        R,
    ),
    gauge(
        "watchmux_memory_limit_bytes",
        "cache.memory_limit (0: no limit).",
        &[],
    ),
    gauge(
        "watchmux_memory_used_bytes",
        "Bytes counted in the memory budget now, all resources.",
        &[],
    ),
    gauge(
        "watchmux_memory_peak_bytes",
        "The most bytes ever counted in the memory budget at once.",
        &[],
    ),
    gauge(
        "watchmux_memory_pressure",
        "Load shedding level: 0 none, 1 (80 % of the limit) no snapshots or protobuf copies kept, 2 (90 %) event logs trimmed and watchers that fall out closed, 3 (100 %) new cached LISTs and WATCHes refused with 429.",
        &[],
    ),
    counter(
        "watchmux_memory_shed_total",
        "What memory pressure shed, by action: snapshots (dropped or not kept), protobuf_copies (not kept), log_events (cut), watchers (closed), requests (refused with 429).",
        &["action"],
    ),
    gauge(
        "watchmux_ready",
        "1 when /readyz passes: every cached resource synced and within its staleness bounds, not shutting down (also while serving stale).",
        &[],
    ),
    gauge(
        "watchmux_serving_stale",
        "1 when /readyz passes while some cached resource does not follow the upstream (\"serving stale\").",
        &[],
    ),
    gauge(
        "watchmux_build_info",
        "Always 1; the version label is watchmux's version.",
        &["version"],
    ),
];

enum Vecs {
    Gauge(GaugeVec),
    Counter(IntCounterVec),
}

/// Fresh metric vectors for one scrape.
struct Sink(Vec<Vecs>);

impl Sink {
    fn new() -> Sink {
        Sink(
            SCRAPED
                .iter()
                .map(|f| {
                    let opts = Opts::new(f.name, f.help);
                    if f.counter {
                        Vecs::Counter(IntCounterVec::new(opts, f.labels).expect("valid metric"))
                    } else {
                        Vecs::Gauge(GaugeVec::new(opts, f.labels).expect("valid metric"))
                    }
                })
                .collect(),
        )
    }

    fn index(name: &str) -> usize {
        SCRAPED
            .iter()
            .position(|f| f.name == name)
            .expect("a scraped family")
    }

    fn gauge(&self, name: &str, labels: &[&str], v: f64) {
        if let Vecs::Gauge(g) = &self.0[Self::index(name)] {
            g.with_label_values(labels).set(v);
        }
    }

    fn counter(&self, name: &str, labels: &[&str], v: u64) {
        if let Vecs::Counter(c) = &self.0[Self::index(name)] {
            c.with_label_values(labels).inc_by(v);
        }
    }

    fn families(&self) -> Vec<MetricFamily> {
        self.0
            .iter()
            .flat_map(|v| match v {
                Vecs::Gauge(g) => g.collect(),
                Vecs::Counter(c) => c.collect(),
            })
            .collect()
    }
}

/// Reads the caches, the reflectors' state and the watchers' taps at scrape time.
struct ScrapeCollector {
    shared: Arc<Shared>,
    descs: Vec<Desc>,
}

impl ScrapeCollector {
    fn new(shared: Arc<Shared>) -> Self {
        let sink = Sink::new();
        let descs = sink
            .0
            .iter()
            .flat_map(|v| match v {
                Vecs::Gauge(g) => g.desc().into_iter().cloned().collect::<Vec<_>>(),
                Vecs::Counter(c) => c.desc().into_iter().cloned().collect::<Vec<_>>(),
            })
            .collect();
        ScrapeCollector { shared, descs }
    }
}

impl Collector for ScrapeCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let s = Sink::new();
        let now = self.shared.epoch.elapsed().as_millis() as u64 + 1;
        let resources = self.shared.resources.read().clone();
        for r in &resources {
            let l = r.label.as_str();
            let (mut objects, mut bytes, mut rv, mut window, mut age, mut synced) =
                (0usize, 0u64, 0u64, 0usize, 0.0f64, false);
            let mut counts = [0u64; 8];
            let mut kept = crate::cache::SnapshotUsage::default();
            let mut memory = 0;
            let mut persist = None;
            let mut staleness = 0.0;
            if let Some(c) = r.cache() {
                staleness = c.staleness.age().as_secs_f64();
                memory = c.account().used();
                persist = c.persist_stats().cloned();
                let snap = c.snapshot();
                objects = snap.objects.len();
                bytes = snap.objects.values().map(|o| o.stored().len() as u64).sum();
                rv = snap.rv;
                let (n, oldest) = c.window();
                window = n;
                age = oldest.map_or(0.0, |d| d.as_secs_f64());
                kept = c.retained_snapshots();
                synced = c.is_synced();
                let k = &c.counters;
                counts = [
                    k.events_received.load(Ordering::Relaxed),
                    k.relists_bridged.load(Ordering::Relaxed),
                    k.relists_reset.load(Ordering::Relaxed),
                    k.selector_evaluations.load(Ordering::Relaxed),
                    k.deliveries.load(Ordering::Relaxed),
                    k.slow_watchers_closed.load(Ordering::Relaxed),
                    k.watches_drained.load(Ordering::Relaxed),
                    k.watches_handed_over.load(Ordering::Relaxed),
                ];
            }
            s.gauge("watchmux_cache_objects", &[l], objects as f64);
            s.gauge("watchmux_cache_bytes", &[l], bytes as f64);
            s.gauge("watchmux_cache_resource_version", &[l], rv as f64);
            s.gauge("watchmux_cache_window_events", &[l], window as f64);
            s.gauge("watchmux_cache_window_age_seconds", &[l], age);
            s.gauge("watchmux_cache_snapshots", &[l], kept.count as f64);
            s.gauge("watchmux_cache_snapshot_bytes", &[l], kept.bytes as f64);
            s.gauge("watchmux_cache_memory_bytes", &[l], memory as f64);
            s.gauge(
                "watchmux_cache_synced",
                &[l],
                if synced { 1.0 } else { 0.0 },
            );
            s.gauge("watchmux_cache_staleness_seconds", &[l], staleness);
            if let Some(p) = persist {
                let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                s.counter("watchmux_persist_bytes_written_total", &[l], n(&p.bytes));
                s.counter(
                    "watchmux_persist_checkpoints_total",
                    &[l],
                    n(&p.checkpoints),
                );
                s.counter(
                    "watchmux_persist_dropped_records_total",
                    &[l],
                    n(&p.dropped),
                );
                s.counter("watchmux_persist_write_errors_total", &[l], n(&p.errors));
                s.gauge("watchmux_persist_disk_bytes", &[l], n(&p.disk_bytes) as f64);
            }
            s.counter("watchmux_cache_events_applied_total", &[l], counts[0]);
            s.counter("watchmux_cache_relists_total", &[l, "bridged"], counts[1]);
            s.counter("watchmux_cache_relists_total", &[l, "reset"], counts[2]);
            s.counter("watchmux_cache_selector_evaluations_total", &[l], counts[3]);
            s.counter("watchmux_cache_deliveries_total", &[l], counts[4]);
            s.counter("watchmux_slow_watchers_closed_total", &[l], counts[5]);
            s.counter(
                "watchmux_watches_drained_total",
                &[l, "shutdown"],
                counts[6],
            );
            s.counter("watchmux_watches_drained_total", &[l, "goaway"], counts[7]);
            let last = r.last_event_ms.load(Ordering::Relaxed);
            s.gauge(
                "watchmux_upstream_last_event_age_seconds",
                &[l],
                now.saturating_sub(last.max(1)) as f64 / 1000.0,
            );
            s.gauge(
                "watchmux_upstream_watch_up",
                &[l],
                if r.watching.load(Ordering::Relaxed) {
                    1.0
                } else {
                    0.0
                },
            );
            s.gauge(
                "watchmux_upstream_outage_seconds",
                &[l],
                r.outage().map_or(0.0, |d| d.as_secs_f64()),
            );
            for (t, (active, totals)) in r.fanout_totals().iter().enumerate() {
                let tr = TRANSPORTS[t];
                s.gauge("watchmux_watchers", &[l, tr], *active as f64);
                for (i, ty) in EVENT_TYPES.iter().enumerate() {
                    s.counter("watchmux_watch_events_sent_total", &[l, tr, ty], totals[i]);
                }
                s.counter("watchmux_watch_bytes_sent_total", &[l, tr], totals[5]);
            }
        }
        let b = &self.shared.budget;
        s.gauge("watchmux_memory_limit_bytes", &[], b.limit() as f64);
        s.gauge("watchmux_memory_used_bytes", &[], b.used() as f64);
        s.gauge("watchmux_memory_peak_bytes", &[], b.peak() as f64);
        s.gauge("watchmux_memory_pressure", &[], b.pressure() as u8 as f64);
        for (action, n) in [
            ("snapshots", &b.shed.snapshots),
            ("protobuf_copies", &b.shed.protobuf_copies),
            ("log_events", &b.shed.log_events),
            ("watchers", &b.shed.watchers),
            ("requests", &b.shed.requests),
        ] {
            s.counter(
                "watchmux_memory_shed_total",
                &[action],
                n.load(Ordering::Relaxed),
            );
        }
        let checks = self.shared.readiness();
        let ready = checks.iter().all(|c| c.error.is_none());
        let stale = ready && checks.iter().any(|c| c.stale.is_some());
        s.gauge("watchmux_ready", &[], if ready { 1.0 } else { 0.0 });
        s.gauge("watchmux_serving_stale", &[], if stale { 1.0 } else { 0.0 });
        s.gauge("watchmux_build_info", &[env!("CARGO_PKG_VERSION")], 1.0);
        s.families()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::from_toml_str(
            r#"
[[cache.resources]]
version = "v1"
resource = "pods"
[[cache.resources]]
group = "autoscaling"
version = "v1"
resource = "horizontalpodautoscalers"
[[cache.resources]]
group = "autoscaling"
version = "v2"
resource = "horizontalpodautoscalers"
"#,
            "t",
        )
        .unwrap()
    }

    /// `name{labels} value` lines of the text format.
    fn samples(text: &str) -> HashMap<String, f64> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn a_kind_has_series_while_cached_and_none_once_it_vanished() {
        let m = Metrics::new(&config());
        let has = |m: &Metrics, label: &str| m.render().contains(&format!("resource=\"{label}\""));
        let widgets = ResourceSpec::new("example.com", "v1", "widgets");
        assert!(
            !has(&m, "widgets.example.com"),
            "no series before it is cached"
        );
        let rm = m.start_kind(&widgets, false);
        assert_eq!(rm.label(), "widgets.example.com");
        rm.upstream_request("list", Some(403));
        assert!(has(&m, "widgets.example.com"));
        // Dropped (idle): its counters stay, to go on counting when it starts again.
        m.stop_kind(&rm, false);
        assert!(has(&m, "widgets.example.com"));
        assert!(Arc::ptr_eq(&m.start_kind(&widgets, false), &rm));
        // Gone upstream: every series goes.
        m.stop_kind(&rm, true);
        assert!(!has(&m, "widgets.example.com"), "{}", m.render());
        assert!(has(&m, "pods"));
        // Another version of a cached kind gets a versioned label.
        let pods2 = m.start_kind(&ResourceSpec::new("", "v2", "pods"), false);
        assert_eq!(pods2.label(), "pods.v2");
    }

    #[test]
    fn labels_are_unique_per_resource() {
        assert_eq!(
            resource_labels(&config().cache.resources),
            [
                "pods",
                "horizontalpodautoscalers.v1.autoscaling",
                "horizontalpodautoscalers.v2.autoscaling"
            ]
        );
    }

    #[test]
    fn every_name_is_prefixed_and_series_exist_from_the_start() {
        let m = Metrics::new(&config());
        let text = m.render();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("watchmux_"), "{line}");
        }
        let s = samples(&text);
        assert_eq!(s["watchmux_cache_synced{resource=\"pods\"}"], 0.0);
        assert_eq!(s["watchmux_ready"], 0.0);
        assert_eq!(
            s["watchmux_watchers{resource=\"pods\",transport=\"chunked\"}"],
            0.0
        );
        assert_eq!(
            s["watchmux_upstream_relists_total{reason=\"expired\",resource=\"pods\"}"],
            0.0
        );
        #[cfg(target_os = "linux")]
        assert!(s["watchmux_process_resident_memory_bytes"] > 0.0);
    }

    #[test]
    fn taps_count_live_and_ended_watchers() {
        let m = Metrics::new(&config());
        let r = m.resource("", "v1", "pods").unwrap().clone();
        let a = r.watch_tap(TRANSPORT_CHUNKED);
        let b = r.watch_tap(TRANSPORT_WEBSOCKET);
        a.event(b"{\"type\":\"ADDED\",\"object\":{", 100);
        a.event(b"{\"type\":\"BOOKMARK\",\"object\":{", 10);
        b.event(b"{\"type\":\"DELETED\",\"object\":{", 7);
        // A protobuf frame: length, then WatchEvent field 1 (type).
        let c = r.watch_tap(TRANSPORT_WEBSOCKET);
        c.event(b"\0\0\x01\x00\x0a\x08MODIFIED\x12", 0);
        drop(c);
        let s = samples(&m.render());
        assert_eq!(
            s["watchmux_watch_events_sent_total{resource=\"pods\",transport=\"websocket\",type=\"MODIFIED\"}"],
            1.0
        );
        assert_eq!(
            s["watchmux_watchers{resource=\"pods\",transport=\"chunked\"}"],
            1.0
        );
        assert_eq!(
            s["watchmux_watchers{resource=\"pods\",transport=\"websocket\"}"],
            1.0
        );
        drop(a);
        let s = samples(&m.render());
        assert_eq!(
            s["watchmux_watchers{resource=\"pods\",transport=\"chunked\"}"],
            0.0
        );
        assert_eq!(
            s["watchmux_watch_events_sent_total{resource=\"pods\",transport=\"chunked\",type=\"ADDED\"}"],
            1.0
        );
        assert_eq!(
            s["watchmux_watch_bytes_sent_total{resource=\"pods\",transport=\"chunked\"}"],
            110.0
        );
        assert_eq!(
            s["watchmux_watch_bytes_sent_total{resource=\"pods\",transport=\"websocket\"}"],
            7.0
        );
    }

    #[test]
    fn verbs_follow_kube() {
        let look = |g: &str, v: &str, r: &str| (g, v, r) == ("", "v1", "pods");
        let verb = |m: Method, u: &str, h: &[(&str, &str)]| {
            let mut hm = HeaderMap::new();
            for (k, v) in h {
                hm.insert(
                    http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            let (v, c) = classify(&m, &u.parse().unwrap(), &hm, |g, v, r| {
                look(g, v, r).then_some(())
            });
            (v, c.is_some())
        };
        assert_eq!(verb(Method::GET, "/api/v1/pods", &[]), ("list", true));
        assert_eq!(
            verb(Method::GET, "/api/v1/pods?watch=true", &[]),
            ("watch", true)
        );
        assert_eq!(
            verb(Method::GET, "/api/v1/watch/namespaces/a/pods", &[]),
            ("watch", true)
        );
        assert_eq!(
            verb(Method::GET, "/api/v1/namespaces/a/pods/p", &[]),
            ("get", true)
        );
        assert_eq!(
            verb(Method::GET, "/api/v1/services?watch=0", &[]),
            ("list", false)
        );
        assert_eq!(
            verb(Method::POST, "/api/v1/namespaces/a/pods", &[]),
            ("create", true)
        );
        assert_eq!(
            verb(Method::DELETE, "/api/v1/namespaces/a/pods", &[]),
            ("deletecollection", true)
        );
        assert_eq!(
            verb(Method::DELETE, "/api/v1/namespaces/a/pods/p", &[]),
            ("delete", true)
        );
        assert_eq!(
            verb(Method::PATCH, "/api/v1/namespaces/a/pods/p", &[]),
            ("patch", true)
        );
        assert_eq!(
            verb(Method::PUT, "/api/v1/namespaces/a/pods/p", &[]),
            ("update", true)
        );
        let up = [("connection", "Upgrade"), ("upgrade", "SPDY/3.1")];
        assert_eq!(
            verb(Method::POST, "/api/v1/namespaces/a/pods/p/exec", &up),
            ("connect", true)
        );
        let ws = [("connection", "Upgrade"), ("upgrade", "websocket")];
        assert_eq!(
            verb(Method::GET, "/api/v1/pods?watch=1", &ws),
            ("watch", true)
        );
        assert_eq!(verb(Method::GET, "/apis", &[]), ("get", false));
        assert_eq!(verb(Method::POST, "/sim/compact", &[]), ("other", false));
    }

    #[test]
    fn readiness_names_each_resource() {
        let m = Metrics::new(&config());
        let checks = m.readiness();
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "ping",
                "shutdown",
                "cache/pods",
                "cache/horizontalpodautoscalers.v1.autoscaling",
                "cache/horizontalpodautoscalers.v2.autoscaling"
            ]
        );
        assert_eq!(
            checks[2].error.as_deref(),
            Some("waiting for upstream discovery")
        );
        m.set_shutting_down();
        assert!(m.readiness()[1].error.is_some());
    }

    #[tokio::test]
    async fn metered_body_counts_and_ends_watches_at_a_boundary() {
        use futures_util::stream;
        let frames: Vec<Result<Frame<Bytes>, io::Error>> = vec![
            Ok(Frame::data(Bytes::from_static(b"{\"a\":1}\n"))),
            Ok(Frame::data(Bytes::from_static(b"{\"b\":"))),
            Ok(Frame::data(Bytes::from_static(b"2}\n"))),
        ];
        let body: Body = http_body_util::StreamBody::new(stream::iter(frames)).boxed();
        let c = IntCounter::new("x", "x").unwrap();
        let drain = CancellationToken::new();
        let mut b = MeteredBody::new(body, c.clone(), Some(drain.clone()));
        let f = b.frame().await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap().len(), 8);
        let _ = b.frame().await.unwrap().unwrap();
        drain.cancel();
        // Mid-event: the rest of the event still goes out, then the stream ends.
        let f = b.frame().await.unwrap().unwrap();
        assert_eq!(&f.into_data().unwrap()[..], b"2}\n");
        assert!(b.frame().await.is_none());
        assert_eq!(c.get(), 16);
    }
}
