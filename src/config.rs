//! The proxy's configuration, read from a TOML file.
//!
//! The file is parsed with serde into private `Raw*` structs that mirror the file exactly
//! (`deny_unknown_fields`, so a typo is an error rather than a silently ignored key), then converted
//! into the typed [`Config`] and checked by [`Config::validate`]. Durations are integers with the
//! unit in the key name (`event_window_secs`, `not_ready_wait_ms`) because TOML has no duration
//! type and humantime-serde is unmaintained.
//!
//! Every error names the file, the key path (`cache.resources[3].resource`) and, when the key is in
//! the file, its line: whoever edits a config at 3 a.m. should not have to guess which of twenty
//! `resource = ...` lines is wrong. Bad input is always an error, never a panic.
//!
//! The commented example `config.toml` at the repository root documents every key.
//!
//! Owns the file's shape and its values' rules; it must not load what the values name (the TLS
//! files are [`crate::tls`]'s, the kubeconfig is [`crate::upstream`]'s) nor start anything.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The largest duration any `*_secs` / `*_ms` key accepts (one year).
///
/// Far larger values are certainly typos, and bounding them keeps `Instant + duration` arithmetic
/// elsewhere from overflowing (which would panic).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// `[server]`: where watchmux listens.
    pub server: ServerConfig,
    /// `[upstream]`: the kube-apiserver behind it.
    pub upstream: UpstreamConfig,
    /// `[cache]`: the list/watch cache.
    pub cache: CacheConfig,
    /// `[log]`: log format and filter.
    pub log: LogConfig,
}

/// `[server]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// `listen`: the address clients connect to.
    pub listen: SocketAddr,
    /// `ready_outage_secs`: `/readyz` fails once a cached resource's upstream watch has been
    /// broken (list/watch failing) for longer than this, though the cache goes on serving
    /// (within `cache.max_staleness_secs`): for replicas behind a Service, so that clients move
    /// to one whose upstream works. Zero (the default): an outage alone never fails `/readyz`,
    /// which says "serving stale" meanwhile.
    pub ready_outage: Duration,
    /// `shutdown_delay_secs`: on SIGTERM, `/readyz` fails at once, and watchmux keeps serving
    /// this long before it stops accepting (time for endpoints to drop the pod).
    pub shutdown_delay: Duration,
    /// `shutdown_timeout_secs`: after it stops accepting, watchmux waits at most this long for
    /// requests to finish and watches to drain, then exits.
    pub shutdown_timeout: Duration,
    /// `shutdown_watch_grace_secs`: once it stops accepting, watchmux ends the open watches in
    /// paced batches spread over this long (kube's `--shutdown-watch-termination-grace-period`),
    /// each just after a BOOKMARK at its resourceVersion, so that clients re-watch on the other
    /// replicas a few at a time and with no LIST. Zero ends them all at once. The drain ends
    /// within `shutdown_timeout_secs` all the same: a longer grace is cut to it.
    pub shutdown_watch_grace: Duration,
    /// `shutdown_watch_min_rate`: the fewest watches a second the drain ends (kube's floor: 200),
    /// so that a few watches are not spread over the whole grace.
    pub shutdown_watch_min_rate: u64,
    /// `tls_cert_file`: PEM certificate chain to serve TLS with (with `tls_key_file`); reloaded
    /// when the file changes. `None` serves plain HTTP.
    pub tls_cert_file: Option<PathBuf>,
    /// `tls_key_file`: PEM private key of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// `client_ca_file`: PEM CA bundle that client certificates are verified against; a
    /// verified certificate's CN/O become `Impersonate-User`/`Impersonate-Group` on pass-through.
    pub client_ca_file: Option<PathBuf>,
    /// `auth`: whose credentials pass-through requests carry (see [`AuthMode`]). `None` when the
    /// file does not set it (then [`AuthMode::Client`]); setting it explicitly is also what allows
    /// plain HTTP on a non-loopback address.
    pub auth: Option<AuthMode>,
    /// `authz`: whether watchmux authenticates and authorizes the requests its cache answers
    /// (see [`AuthzMode`]). `None` when the file does not set it: then `none` on a loopback
    /// listener, `delegated` otherwise.
    pub authz: Option<AuthzMode>,
    /// `authz_allow_ttl_secs`: how long an allowed decision (and a successful token review) is
    /// cached.
    pub authz_allow_ttl: Duration,
    /// `authz_deny_ttl_secs`: how long a denied decision (and a rejected token) is cached.
    pub authz_deny_ttl: Duration,
    /// `authz_token_cache_size`: TokenReview verdicts kept at most (about 500 bytes each; see
    /// `downstream::authz`).
    pub authz_token_cache_size: u64,
    /// `authz_access_cache_size`: SubjectAccessReview verdicts kept at most, one per identity
    /// and request attributes (about 460 bytes each for a kubelet's per-object watch; see
    /// `downstream::authz`).
    pub authz_access_cache_size: u64,
    /// `max_watches_per_client`: concurrent watches one client (the authenticated user with
    /// `authz = "delegated"`, else the user of a verified client certificate, else the client's
    /// IP address: the peer's, or the PROXY header's source) may have served from the cache;
    /// past it 429 with `Retry-After: 1`.
    pub max_watches_per_client: u64,
    /// `max_concurrent_lists`: LISTs served from the cache at once (all clients); past it 429.
    pub max_concurrent_lists: u64,
    /// `max_header_bytes`: the request line and headers of one HTTP/1 request (hyper answers
    /// 431), or the header list of one HTTP/2 request.
    pub max_header_bytes: u64,
    /// `max_url_bytes`: the longest request target (path and query); longer gets 414.
    pub max_url_bytes: u64,
    /// `header_read_timeout_secs`: an HTTP/1 connection whose request headers have not all
    /// arrived this long after the request began is closed.
    pub header_read_timeout: Duration,
    /// `http2_max_concurrent_streams`: the streams (requests, watches among them) one HTTP/2
    /// client may have open at once on one connection (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub http2_max_concurrent_streams: u32,
    /// `goaway_chance`: the fraction of HTTP/2 requests after which the connection is closed
    /// gracefully (GOAWAY: its requests in flight go on to their end, its cached watches end
    /// just after a bookmark; the client sends new requests on a new connection, through the
    /// balancer again), as kube-apiserver's `--goaway-chance`: 0 (off) to 0.02.
    pub goaway_chance: f64,
    /// `min_request_timeout_secs`: a watch without `timeoutSeconds` ends cleanly after a
    /// random time in [this, 2× this), as kube-apiserver's `--min-request-timeout` (1800 s):
    /// its client re-watches from its resourceVersion, over a connection a balancer may send to
    /// another replica, and such watches do not all end together.
    pub min_request_timeout: Duration,
    /// `max_connection_age_secs`: a connection is ended gracefully (HTTP/2 GOAWAY, HTTP/1
    /// `Connection: close` after the response in flight) once it is this old, give or take
    /// 10 % (gRPC's `MAX_CONNECTION_AGE`); its cached watches end just after a bookmark, as at a
    /// drawn GOAWAY, and its client reconnects through the balancer. What bounds how long a
    /// replica roll leaves the clients unevenly spread, which `goaway_chance` alone (a GOAWAY
    /// only after a request) does not. 0 (the default): connections live as long as their
    /// clients keep them.
    pub max_connection_age: Duration,
    /// `proxy_protocol_trusted`: the address ranges (load balancers) whose connections start
    /// with a PROXY protocol header (v1 or v2), which names the client's address. A connection
    /// from one of them without a valid header is closed; from any other address a header is
    /// never read (a connection that starts with one is closed). Empty (the default): the PROXY
    /// protocol is off. Entries are whole networks: `10.0.0.0/8`, or one address.
    pub proxy_protocol_trusted: Vec<IpNet>,
}

impl ServerConfig {
    /// `auth` in effect.
    pub fn auth_mode(&self) -> AuthMode {
        self.auth.unwrap_or_default()
    }

    /// `authz` in effect: as configured, else `none` on a loopback listener and `delegated`
    /// on any other.
    pub fn authz_mode(&self) -> AuthzMode {
        self.authz.unwrap_or(if self.listen.ip().is_loopback() {
            AuthzMode::None
        } else {
            AuthzMode::Delegated
        })
    }
}

/// `server.authz`: who may read what the cache serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthzMode {
    /// Every client that reaches the listener may LIST/WATCH every cached resource. Only allowed
    /// on a loopback listener.
    None,
    /// Each cached LIST/WATCH is authenticated (TokenReview or client certificate) and
    /// authorized (SubjectAccessReview) by the upstream, with the decisions cached.
    Delegated,
}

impl fmt::Display for AuthzMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthzMode::None => "none",
            AuthzMode::Delegated => "delegated",
        })
    }
}

/// `server.auth`: whose credentials a pass-through request carries to the upstream
/// (`crate::auth` has the full table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMode {
    /// The client's own: its `Authorization` header as it is, or its verified client certificate
    /// as impersonation headers; a request with neither goes with watchmux's identity.
    #[default]
    Client,
    /// As `Client`, but a request with neither gets 401 from watchmux.
    ClientRequired,
    /// Always watchmux's identity; the client's credentials are removed (like `kubectl proxy`).
    Watchmux,
}

impl fmt::Display for AuthMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthMode::Client => "client",
            AuthMode::ClientRequired => "client-required",
            AuthMode::Watchmux => "watchmux",
        })
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            ready_outage: Duration::ZERO,
            shutdown_delay: Duration::ZERO,
            shutdown_timeout: Duration::from_secs(20),
            shutdown_watch_grace: Duration::from_secs(10),
            shutdown_watch_min_rate: 200,
            tls_cert_file: None,
            tls_key_file: None,
            client_ca_file: None,
            auth: None,
            authz: None,
            authz_allow_ttl: Duration::from_secs(300),
            authz_deny_ttl: Duration::from_secs(30),
            authz_token_cache_size: 65_536,
            authz_access_cache_size: 524_288,
            max_watches_per_client: 100,
            max_concurrent_lists: 64,
            max_header_bytes: 1 << 20,
            max_url_bytes: 16 << 10,
            header_read_timeout: Duration::from_secs(30),
            http2_max_concurrent_streams: 1000,
            goaway_chance: 0.0,
            min_request_timeout: Duration::from_secs(1800),
            max_connection_age: Duration::ZERO,
            proxy_protocol_trusted: Vec::new(),
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `format`: `text` (human) or `json` (one object per line).
    pub format: LogFormat,
    /// `level`: a tracing filter (`info`, `watchmux=debug,info`); `--log`/`WATCHMUX_LOG` override.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: "info".to_string(),
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[upstream]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// `url`: the kube-apiserver's base URL, `http://` or `https://` with a host and optionally a
    /// path prefix (no trailing slash kept). `None` when the file does not set it: `serve` needs
    /// it, the simulator does not, so the requirement is checked where it applies
    /// ([`UpstreamConfig::require_url`]).
    pub url: Option<http::Uri>,
    /// `connect_timeout_ms`: how long establishing a TCP connection to the upstream may take.
    pub connect_timeout: Duration,
    /// `kubeconfig`: a kubeconfig file naming the upstream, its CA and watchmux's credentials.
    /// Without it (and without `url` and `in_cluster`) the `KUBECONFIG` environment variable is
    /// read.
    pub kubeconfig: Option<PathBuf>,
    /// `context`: the kubeconfig context to use instead of its `current-context`.
    pub context: Option<String>,
    /// `in_cluster`: use the pod's service account (token re-read on rotation, `ca.crt`) and
    /// `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`.
    pub in_cluster: bool,
    /// `exec_timeout_secs`: how long one run of the kubeconfig user's exec credential plugin
    /// may take before it is killed and counts as failed.
    pub exec_timeout: Duration,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            url: None,
            connect_timeout: Duration::from_secs(10),
            kubeconfig: None,
            context: None,
            in_cluster: false,
            exec_timeout: Duration::from_secs(60),
        }
    }
}

impl UpstreamConfig {
    /// The upstream URL, or [`ConfigError::Missing`] when none is configured.
    pub fn require_url(&self) -> Result<&http::Uri, ConfigError> {
        self.url.as_ref().ok_or(ConfigError::Missing {
            key: "upstream.url",
        })
    }
}

/// `[cache]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// `event_window_count`: events kept per resource at most; a watch from an older
    /// resourceVersion gets 410 Gone.
    pub event_window_count: usize,
    /// `event_window_bytes`: bytes of events a resource keeps beyond what kube-apiserver's watch
    /// cache would keep (that is always kept).
    pub event_window_bytes: u64,
    /// `event_window_secs`: kube-apiserver's `eventFreshDuration`, which its watch cache's size
    /// follows (75 s, its minimum); no event is dropped for its age.
    pub event_window: Duration,
    /// `bookmark_interval_secs`: interval of BOOKMARK events to watchers that asked for them.
    pub bookmark_interval: Duration,
    /// `watcher_queue`: events a watcher may have queued before it falls back to reading the
    /// shared event log at its own pace.
    pub watcher_queue: usize,
    /// `watcher_max_lag_bytes`: a watcher further behind than this many bytes of events is closed.
    pub watcher_max_lag_bytes: u64,
    /// `not_ready_wait_ms`: a read that kube answers with 429 while the resource's cache is not
    /// ready (a WATCH; a LIST with a selector or without a `limit`) waits up to this long for
    /// the first sync before it gets the 429 with Retry-After. Zero answers 429 at once.
    pub not_ready_wait: Duration,
    /// `list_page_size`: the `limit` of the reflector's upstream LIST pages.
    pub list_page_size: usize,
    /// `snapshot_retention_secs`: when a LIST page from the cache hands out a `continue` token,
    /// the snapshot it was cut from is kept this long after its last page, so the next pages are
    /// cut from it even once the event window no longer reaches back to it. Zero keeps none:
    /// continuations inside the window are rebuilt from the event log, older ones go upstream.
    pub snapshot_retention: Duration,
    /// `snapshot_max_count`: at most this many snapshots kept per resource (the least recently
    /// used are dropped first).
    pub snapshot_max_count: usize,
    /// `snapshot_max_bytes`: per resource, the objects only the kept snapshots still hold (those
    /// changed or deleted since) stay within this many bytes of JSON.
    pub snapshot_max_bytes: u64,
    /// `memory_limit`: bytes the caches may hold in all (objects, event logs, kept snapshots,
    /// protobuf copies, watchers), with load shed in a fixed order as it nears the limit
    /// (`crate::cache::budget`). Zero: no limit.
    pub memory_limit: u64,
    /// `max_object_bytes`: the largest upstream object the cache takes (a watch line may be this
    /// plus its envelope, a LIST page this times the page size); a larger one is an upstream
    /// error for its resource, logged and counted, and the cache keeps its last good state.
    pub max_object_bytes: u64,
    /// `persist_dir`: where each cached resource's objects and recent events are kept on disk,
    /// so that a restarted watchmux answers reads at once, also while the upstream is down, and
    /// clients resume their watches. Absent or empty: nothing is persisted.
    pub persist_dir: Option<std::path::PathBuf>,
    /// `consistent_read_state_max_objects`: a consistent read of a resource holding at most this
    /// many objects is proven fresh by comparing the cache with the upstream's metadata LIST
    /// (one request, milliseconds) before the short watch is tried; 0: never.
    pub consistent_read_state_max_objects: usize,
    /// `consistent_read_check_interval_ms`: the least time between the starts of two freshness
    /// checks of one resource. A consistent read that arrives within it of the last check's
    /// start waits for the check that starts when it has passed (shared by every reader that
    /// arrived meanwhile); one that arrives later starts a check at once. A check does not wait
    /// for the one before it to end (a few overlap at most). Zero: no pacing. At most
    /// [`MAX_CONSISTENT_READ_CHECK_INTERVAL`].
    pub consistent_read_check_interval: Duration,
    /// `consistency_check_secs`: how often each cached resource is compared with the upstream
    /// (kube 1.34's `DetectCacheInconsistency`): its keys and resourceVersions at the cache's
    /// resourceVersion against an exact-resourceVersion metadata LIST, with 0 to 50 % jitter;
    /// a difference relists and repairs the cache (`crate::reflector::consistency`). `None`
    /// (0 in the file): never.
    pub consistency_check: Option<Duration>,
    /// `max_staleness_secs`: how long cached reads are served while the cache does not follow
    /// the upstream (its list/watch failing, or restored from disk and not reconciled yet),
    /// counted from when it last did; past it they get 503 and `/readyz` fails. `None` (0 in
    /// the file, the default): no bound, as an edge cache wants.
    pub max_staleness: Option<Duration>,
    /// `mode`: which kinds are cached: on demand (any kind a client reads, within `include`,
    /// `exclude` and the memory budget) or only `resources`.
    pub mode: CacheMode,
    /// `include`: the kinds on-demand mode may cache (`group/resource` patterns).
    pub include: Vec<KindPattern>,
    /// `exclude`: the kinds it never caches; wins over `include`.
    pub exclude: Vec<KindPattern>,
    /// `idle_secs`: an on-demand kind nobody has read for this long is dropped (its reflector
    /// stopped, its memory freed); `None` (0 in the file): never.
    pub idle: Option<Duration>,
    /// `[[cache.resources]]`: in listed mode, the resources served from the cache (everything
    /// else passes through); in on-demand mode, the ones cached from the start and never dropped.
    pub resources: Vec<ResourceSpec>,
}

/// `cache.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheMode {
    /// Any kind the upstream can list and watch, started by its first read.
    #[default]
    OnDemand,
    /// Only `cache.resources`.
    Listed,
}

/// A `group/resource` pattern of `cache.include` / `cache.exclude`: `apps/deployments`,
/// `core/secrets` (the core group is `core`, or empty: `/secrets`), `*.example.com/*`; `*`
/// matches any run of characters within its part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindPattern {
    group: String,
    resource: String,
}

impl KindPattern {
    /// Parses `group/resource`.
    pub fn parse(text: &str) -> Result<KindPattern, String> {
        let Some((group, resource)) = text.split_once('/') else {
            return Err(format!(
                "{text:?} is not a group/resource pattern like \"apps/deployments\", \"core/secrets\" or \"*.example.com/*\""
            ));
        };
        let valid = |p: &str| {
            p.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-.*".contains(&c))
        };
        if resource.is_empty() || !valid(group) || !valid(resource) {
            return Err(format!(
                "{text:?}: a group and a resource are lower-case names, with `*` as a wildcard (the core group is \"core\")"
            ));
        }
        Ok(KindPattern {
            group: if group == "core" {
                String::new()
            } else {
                group.to_string()
            },
            resource: resource.to_string(),
        })
    }

    /// Whether the kind `group`/`resource` matches.
    pub fn matches(&self, group: &str, resource: &str) -> bool {
        glob(&self.group, group) && glob(&self.resource, resource)
    }

    /// Whether it names exactly this kind (no wildcard): what opts secrets in.
    pub fn names(&self, group: &str, resource: &str) -> bool {
        self.group == group && self.resource == resource
    }
}

impl fmt::Display for KindPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{g}/{}", self.resource)
    }
}

/// `*`-glob matching: `*` matches any run of characters, everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl CacheConfig {
    /// Whether on-demand mode may cache `group`/`resource`: listed in `resources`, or matched
    /// by `include` and not by `exclude`; secrets only when an `include` pattern or a
    /// `resources` entry names them (see config.toml for why).
    pub fn may_cache(&self, group: &str, resource: &str) -> bool {
        if self
            .resources
            .iter()
            .any(|r| r.group == group && r.resource == resource)
        {
            return true;
        }
        if self.exclude.iter().any(|p| p.matches(group, resource)) {
            return false;
        }
        if group.is_empty() && resource == "secrets" {
            return self.include.iter().any(|p| p.names(group, resource));
        }
        self.include.iter().any(|p| p.matches(group, resource))
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            event_window_count: 102_400,
            event_window_bytes: 32 << 20,
            event_window: Duration::from_secs(75),
            consistent_read_state_max_objects: 200,
            consistent_read_check_interval: Duration::from_millis(250),
            consistency_check: Some(Duration::from_secs(300)),
            bookmark_interval: Duration::from_secs(60),
            watcher_queue: 1024,
            watcher_max_lag_bytes: 64 << 20,
            not_ready_wait: Duration::from_millis(3000),
            list_page_size: 500,
            snapshot_retention: Duration::from_secs(75),
            snapshot_max_count: 64,
            snapshot_max_bytes: 128 << 20,
            memory_limit: 0,
            max_object_bytes: 16 << 20,
            persist_dir: None,
            max_staleness: None,
            mode: CacheMode::OnDemand,
            include: vec![KindPattern {
                group: "*".into(),
                resource: "*".into(),
            }],
            exclude: Vec::new(),
            idle: Some(Duration::from_secs(900)),
            resources: Vec::new(),
        }
    }
}

/// One cached resource: `[[cache.resources]]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    /// API group, `""` for the core group (the default when the key is absent).
    #[serde(default)]
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural lower-case resource name, e.g. `pods`.
    pub resource: String,
    /// Selectable fields whose exact-value watchers are indexed for dispatch (e.g. kubelets'
    /// `spec.nodeName=<node>` pod watches). Absent: `["spec.nodeName"]` for core pods, none
    /// otherwise. Each must be a field selector the kind supports.
    #[serde(default)]
    pub index_fields: Option<Vec<String>>,
}

impl ResourceSpec {
    /// A spec from its three parts.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        ResourceSpec {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            index_fields: None,
        }
    }

    /// The indexed fields in effect (the configured ones, or the default for the resource).
    pub fn effective_index_fields(&self) -> Vec<String> {
        match &self.index_fields {
            Some(f) => f.clone(),
            None if self.group.is_empty() && self.resource == "pods" => {
                vec!["spec.nodeName".to_string()]
            }
            None => Vec::new(),
        }
    }
}

impl fmt::Display for ResourceSpec {
    /// `pods.v1` for core, `endpointslices.v1.discovery.k8s.io` otherwise (kubectl's
    /// `resource.version.group` notation).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}.{}", self.resource, self.version)
        } else {
            write!(f, "{}.{}.{}", self.resource, self.version, self.group)
        }
    }
}

/// Why a configuration was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read: {error}")]
    Read {
        /// The file.
        path: String,
        /// Cause (its text is in this error's; not a `source()`, so that it is said once).
        error: std::io::Error,
    },
    /// The text is not valid TOML, or does not have the configuration's shape (unknown key,
    /// wrong type, missing required key).
    #[error("{}", located(origin, *line, key.as_deref(), error.message()))]
    Parse {
        /// The file name (or whatever the caller named the text).
        origin: String,
        /// 1-based line of the problem, when known.
        line: Option<usize>,
        /// Dotted key path (`cache.resources[2].version`), when known.
        key: Option<String>,
        /// What is wrong (its message is shown; its span is the `line` and `key` above). Not a
        /// `source()`: its own text repeats the message.
        error: Box<toml::de::Error>,
    },
    /// A value has the right type but is not acceptable.
    #[error("{}", located(origin, *line, Some(key), message))]
    Invalid {
        /// The file name (or whatever the caller named the text).
        origin: String,
        /// 1-based line of the key, when it is in the file.
        line: Option<usize>,
        /// Dotted key path.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A key the requested mode needs is not set.
    #[error("{key} is not set")]
    Missing {
        /// Dotted key path.
        key: &'static str,
    },
}

impl ConfigError {
    /// The dotted key path the error is about, when known.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Parse { key, .. } => key.as_deref(),
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Missing { key } => Some(key),
        }
    }

    /// The 1-based line the error is about, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Parse { line, .. } | ConfigError::Invalid { line, .. } => *line,
            _ => None,
        }
    }
}

fn located(origin: &str, line: Option<usize>, key: Option<&str>, message: &str) -> String {
    let mut s = format!("{origin}: ");
    if let Some(line) = line {
        s.push_str(&format!("line {line}: "));
    }
    if let Some(key) = key {
        s.push_str(key);
        s.push_str(": ");
    }
    s.push_str(message);
    s
}

/// A problem found by validation before it is located in the file.
struct Problem {
    key: String,
    message: String,
}

fn problem(key: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem {
        key: key.into(),
        message: message.into(),
    }
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: origin.clone(),
            error,
        })?;
        Config::from_toml_str(&text, &origin)
    }

    /// Parses and validates TOML text; `origin` names it in errors (usually the file name).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
        // Parse once into a spanned document: it locates errors (line and key path) both for the
        // serde pass and for validation.
        let doc = DeTable::parse(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            line: e.span().map(|s| line_of(text, s.start)),
            key: None,
            error: Box::new(e),
        })?;
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let span = e.span();
            ConfigError::Parse {
                origin: origin.to_string(),
                line: span.as_ref().map(|s| line_of(text, s.start)),
                key: span.and_then(|s| key_path_at(doc.get_ref(), s.start)),
                error: Box::new(e),
            }
        })?;
        let locate = |p: Problem| ConfigError::Invalid {
            origin: origin.to_string(),
            line: line_of_key(doc.get_ref(), &p.key).map(|off| line_of(text, off)),
            key: p.key,
            message: p.message,
        };
        let config = raw.into_config().map_err(locate)?;
        config.check().map_err(locate)?;
        Ok(config)
    }

    /// Checks the invariants serde cannot express: http(s) URL with a host, counts above zero,
    /// bounded durations, well-formed and unique resources. [`Config::from_toml_str`] already calls
    /// it; call it again after overriding fields (e.g. from the command line).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check().map_err(|p| ConfigError::Invalid {
            origin: "configuration".to_string(),
            line: None,
            key: p.key,
            message: p.message,
        })
    }

    fn check(&self) -> Result<(), Problem> {
        if let Some(url) = &self.upstream.url {
            check_url(url)
                .map_err(|m| problem("upstream.url", format!("{:?} {m}", url.to_string())))?;
        }
        check_duration(
            "upstream.connect_timeout_ms",
            self.upstream.connect_timeout,
            false,
        )?;
        check_duration(
            "upstream.exec_timeout_secs",
            self.upstream.exec_timeout,
            false,
        )?;
        self.check_connections()?;
        let s = &self.server;
        check_duration("server.ready_outage_secs", s.ready_outage, true)?;
        check_duration("server.shutdown_delay_secs", s.shutdown_delay, true)?;
        check_duration("server.shutdown_timeout_secs", s.shutdown_timeout, false)?;
        check_duration(
            "server.shutdown_watch_grace_secs",
            s.shutdown_watch_grace,
            true,
        )?;
        check_count("server.shutdown_watch_min_rate", s.shutdown_watch_min_rate)?;
        check_duration("server.authz_allow_ttl_secs", s.authz_allow_ttl, true)?;
        check_duration("server.authz_deny_ttl_secs", s.authz_deny_ttl, true)?;
        check_count("server.authz_token_cache_size", s.authz_token_cache_size)?;
        check_count("server.authz_access_cache_size", s.authz_access_cache_size)?;
        check_count("server.max_watches_per_client", s.max_watches_per_client)?;
        check_count("server.max_concurrent_lists", s.max_concurrent_lists)?;
        check_range(
            "server.max_header_bytes",
            s.max_header_bytes,
            MIN_HEADER_BYTES,
            MAX_HEADER_BYTES,
        )?;
        check_range("server.max_url_bytes", s.max_url_bytes, 1, MAX_URL_BYTES)?;
        check_duration(
            "server.header_read_timeout_secs",
            s.header_read_timeout,
            false,
        )?;
        check_count(
            "server.http2_max_concurrent_streams",
            s.http2_max_concurrent_streams.into(),
        )?;
        check_duration(
            "server.min_request_timeout_secs",
            s.min_request_timeout,
            false,
        )?;
        check_duration("server.max_connection_age_secs", s.max_connection_age, true)?;
        // kube-apiserver's bounds (`--goaway-chance`): beyond 1 request in 50 the connections
        // are remade faster than they carry requests.
        if !(0.0..=MAX_GOAWAY_CHANCE).contains(&s.goaway_chance) {
            return Err(problem(
                "server.goaway_chance",
                format!(
                    "{} is outside 0 (off) to {MAX_GOAWAY_CHANCE}",
                    s.goaway_chance
                ),
            ));
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            return Err(problem(
                "log.level",
                format!("{:?} is not a log filter: {e}", self.log.level),
            ));
        }
        let c = &self.cache;
        check_count("cache.event_window_count", c.event_window_count as u64)?;
        check_count("cache.event_window_bytes", c.event_window_bytes)?;
        check_duration("cache.event_window_secs", c.event_window, false)?;
        // kube-apiserver refuses an events history window below its default.
        if c.event_window < Duration::from_secs(75) {
            return Err(problem(
                "cache.event_window_secs",
                "must be at least 75 (kube-apiserver's minimum eventFreshDuration)",
            ));
        }
        check_range(
            "cache.consistent_read_check_interval_ms",
            c.consistent_read_check_interval.as_millis() as u64,
            0,
            MAX_CONSISTENT_READ_CHECK_INTERVAL.as_millis() as u64,
        )?;
        check_range(
            "cache.consistency_check_secs",
            c.consistency_check.map_or(0, |d| d.as_secs()),
            0,
            MAX_CONSISTENCY_CHECK_SECS,
        )?;
        check_duration("cache.bookmark_interval_secs", c.bookmark_interval, false)?;
        check_count("cache.watcher_queue", c.watcher_queue as u64)?;
        check_range(
            "cache.watcher_queue",
            c.watcher_queue as u64,
            1,
            MAX_WATCHER_QUEUE,
        )?;
        check_count("cache.watcher_max_lag_bytes", c.watcher_max_lag_bytes)?;
        check_duration("cache.not_ready_wait_ms", c.not_ready_wait, true)?;
        check_count("cache.list_page_size", c.list_page_size as u64)?;
        // Sent as the upstream LIST's `limit`, which kube parses as an int64.
        check_range(
            "cache.list_page_size",
            c.list_page_size as u64,
            1,
            i64::MAX as u64,
        )?;
        check_duration("cache.snapshot_retention_secs", c.snapshot_retention, true)?;
        check_count("cache.snapshot_max_count", c.snapshot_max_count as u64)?;
        check_count("cache.snapshot_max_bytes", c.snapshot_max_bytes)?;
        check_count("cache.max_object_bytes", c.max_object_bytes)?;
        if let Some(d) = c.max_staleness {
            check_duration("cache.max_staleness_secs", d, false)?;
        }
        if let Some(d) = c.idle {
            check_duration("cache.idle_secs", d, false)?;
        }
        let mut seen: HashMap<(&str, &str, &str), usize> = HashMap::new();
        for (i, r) in c.resources.iter().enumerate() {
            let at = format!("cache.resources[{i}]");
            if !r.group.is_empty() && !is_dns_subdomain(&r.group) {
                return Err(problem(
                    format!("{at}.group"),
                    format!(
                        "{:?} is not a lower-case DNS subdomain (\"\" is the core group)",
                        r.group
                    ),
                ));
            }
            if !is_dns_label(&r.version) {
                return Err(problem(
                    format!("{at}.version"),
                    format!("{:?} is not a lower-case DNS label like \"v1\"", r.version),
                ));
            }
            if !is_dns_label(&r.resource) {
                return Err(problem(
                    format!("{at}.resource"),
                    format!(
                        "{:?} is not a lower-case DNS label (the plural resource name, e.g. \"pods\")",
                        r.resource
                    ),
                ));
            }
            for (j, f) in r.index_fields.iter().flatten().enumerate() {
                let ok = !f.is_empty()
                    && f.split('.')
                        .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_alphanumeric()));
                if !ok {
                    return Err(problem(
                        format!("{at}.index_fields[{j}]"),
                        format!("{f:?} is not a field path like \"spec.nodeName\""),
                    ));
                }
            }
            if let Some(first) = seen.insert((&r.group, &r.version, &r.resource), i) {
                return Err(problem(
                    at,
                    format!("{r} is already listed as cache.resources[{first}]"),
                ));
            }
        }
        Ok(())
    }
}

impl Config {
    /// The upstream source and the downstream TLS/auth keys: combinations that cannot work, and
    /// plain HTTP on a non-loopback address without an explicit `server.auth`.
    fn check_connections(&self) -> Result<(), Problem> {
        let empty = |p: &Option<PathBuf>| p.as_ref().is_some_and(|p| p.as_os_str().is_empty());
        let u = &self.upstream;
        if empty(&u.kubeconfig) {
            return Err(problem("upstream.kubeconfig", "must not be empty"));
        }
        if u.context.as_deref() == Some("") {
            return Err(problem("upstream.context", "must not be empty"));
        }
        if u.in_cluster {
            for (set, key) in [
                (u.url.is_some(), "upstream.url"),
                (u.kubeconfig.is_some(), "upstream.kubeconfig"),
                (u.context.is_some(), "upstream.context"),
            ] {
                if set {
                    return Err(problem(
                        "upstream.in_cluster",
                        format!(
                            "cannot be combined with {key}: in-cluster mode takes the server, CA \
                             and token from the pod"
                        ),
                    ));
                }
            }
        }
        if u.url.is_some() && u.kubeconfig.is_some() {
            return Err(problem(
                "upstream.kubeconfig",
                "cannot be combined with upstream.url: the kubeconfig's cluster names the server \
                 (keep one of them)",
            ));
        }
        if u.url.is_some() && u.context.is_some() {
            return Err(problem(
                "upstream.context",
                "only applies to a kubeconfig (upstream.kubeconfig or KUBECONFIG), not to \
                 upstream.url",
            ));
        }
        let s = &self.server;
        for (key, p) in [
            ("server.tls_cert_file", &s.tls_cert_file),
            ("server.tls_key_file", &s.tls_key_file),
            ("server.client_ca_file", &s.client_ca_file),
        ] {
            if empty(p) {
                return Err(problem(key, "must not be empty"));
            }
        }
        match (&s.tls_cert_file, &s.tls_key_file) {
            (Some(_), None) => {
                return Err(problem(
                    "server.tls_cert_file",
                    "needs server.tls_key_file too",
                ));
            }
            (None, Some(_)) => {
                return Err(problem(
                    "server.tls_key_file",
                    "needs server.tls_cert_file too",
                ));
            }
            _ => {}
        }
        if s.client_ca_file.is_some() && s.tls_cert_file.is_none() {
            return Err(problem(
                "server.client_ca_file",
                "needs server.tls_cert_file and server.tls_key_file: client certificates are only \
                 seen when watchmux terminates TLS",
            ));
        }
        if !s.listen.ip().is_loopback() && s.tls_cert_file.is_none() && s.auth.is_none() {
            return Err(problem(
                "server.listen",
                format!(
                    "{} is not a loopback address and TLS is off: clients' tokens would cross the \
                     network in clear text, and anyone who can reach the port would act as \
                     watchmux's own upstream identity. Set server.tls_cert_file and \
                     server.tls_key_file, or set server.auth explicitly to accept plain HTTP on \
                     this address",
                    s.listen
                ),
            ));
        }
        if s.authz == Some(AuthzMode::None) && !s.listen.ip().is_loopback() {
            return Err(problem(
                "server.authz",
                format!(
                    "\"none\" is only allowed on a loopback listener, and server.listen is {}: \
                     every client that can reach the port could read every cached resource. Use \
                     server.authz = \"delegated\" (the upstream authenticates and authorizes each \
                     cached LIST/WATCH) or listen on a loopback address",
                    s.listen
                ),
            ));
        }
        Ok(())
    }
}

/// `Ok` or what is wrong with an upstream URL (completing "\"ftp://x\" ...").
fn check_url(url: &http::Uri) -> Result<(), &'static str> {
    match url.scheme_str() {
        Some("http") | Some("https") => {}
        _ => return Err("is not an http(s) URL"),
    }
    let Some(auth) = url.authority() else {
        return Err("has no host");
    };
    if auth.host().is_empty() {
        return Err("has no host");
    }
    if auth.as_str().contains('@') {
        return Err("carries credentials; they do not belong in the URL");
    }
    if url.query().is_some() {
        return Err("has a query string; only scheme, host, port and a path prefix are allowed");
    }
    Ok(())
}

/// The smallest `server.max_header_bytes` (hyper's HTTP/1 read buffer cannot be smaller).
pub const MIN_HEADER_BYTES: u64 = 8192;
/// The largest `server.max_header_bytes` (64 MiB).
pub const MAX_HEADER_BYTES: u64 = 64 << 20;
/// The largest `cache.watcher_queue` (events queued per watcher): tokio's bounded channel
/// panics past 2^61 - 1 slots, and a queue of more than a billion events is a typo.
pub const MAX_WATCHER_QUEUE: u64 = 1 << 30;
/// The largest `server.max_url_bytes`: hyper itself answers 414 to longer request targets.
pub const MAX_URL_BYTES: u64 = 65534;
/// The largest `cache.consistent_read_check_interval_ms`: a consistent read waits at most this
/// for its check to start, and kube's 3 s for the check to end; a check whose short watch is
/// proven by the upstream's bookmark needs about a second of those.
pub const MAX_CONSISTENT_READ_CHECK_INTERVAL: Duration = Duration::from_millis(1000);

/// The largest `cache.consistency_check_secs` (a week): a longer period is a typo.
pub const MAX_CONSISTENCY_CHECK_SECS: u64 = 7 * 86_400;

/// The largest `server.goaway_chance` (kube-apiserver's bound for `--goaway-chance`).
pub const MAX_GOAWAY_CHANCE: f64 = 0.02;

fn check_range(key: &str, n: u64, min: u64, max: u64) -> Result<(), Problem> {
    if n < min || n > max {
        return Err(problem(key, format!("must be between {min} and {max}")));
    }
    Ok(())
}

fn check_count(key: &str, n: u64) -> Result<(), Problem> {
    if n == 0 {
        return Err(problem(key, "must be greater than 0"));
    }
    Ok(())
}

fn check_duration(key: &str, d: Duration, zero_ok: bool) -> Result<(), Problem> {
    if d.is_zero() && !zero_ok {
        return Err(problem(key, "must be greater than 0"));
    }
    if d > MAX_DURATION {
        return Err(problem(
            key,
            format!(
                "must be at most {} seconds (one year)",
                MAX_DURATION.as_secs()
            ),
        ));
    }
    Ok(())
}

/// RFC 1123 label, lower case: what Kubernetes accepts as a resource or version name.
fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// RFC 1123 subdomain, lower case: what Kubernetes accepts as an API group name.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

// ---- the file's shape -------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawConfig {
    server: RawServer,
    upstream: RawUpstream,
    cache: RawCache,
    log: RawLog,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawServer {
    listen: String,
    ready_outage_secs: u64,
    shutdown_delay_secs: u64,
    shutdown_timeout_secs: u64,
    shutdown_watch_grace_secs: u64,
    shutdown_watch_min_rate: u64,
    tls_cert_file: Option<PathBuf>,
    tls_key_file: Option<PathBuf>,
    client_ca_file: Option<PathBuf>,
    auth: Option<AuthMode>,
    authz: Option<AuthzMode>,
    authz_allow_ttl_secs: u64,
    authz_deny_ttl_secs: u64,
    authz_token_cache_size: u64,
    authz_access_cache_size: u64,
    max_watches_per_client: u64,
    max_concurrent_lists: u64,
    max_header_bytes: u64,
    max_url_bytes: u64,
    header_read_timeout_secs: u64,
    http2_max_concurrent_streams: u32,
    goaway_chance: f64,
    min_request_timeout_secs: u64,
    max_connection_age_secs: u64,
    proxy_protocol_trusted: Vec<String>,
}

impl Default for RawServer {
    fn default() -> Self {
        let d = ServerConfig::default();
        RawServer {
            listen: d.listen.to_string(),
            ready_outage_secs: d.ready_outage.as_secs(),
            shutdown_delay_secs: d.shutdown_delay.as_secs(),
            shutdown_timeout_secs: d.shutdown_timeout.as_secs(),
            shutdown_watch_grace_secs: d.shutdown_watch_grace.as_secs(),
            shutdown_watch_min_rate: d.shutdown_watch_min_rate,
            tls_cert_file: d.tls_cert_file,
            tls_key_file: d.tls_key_file,
            client_ca_file: d.client_ca_file,
            auth: d.auth,
            authz: d.authz,
            authz_allow_ttl_secs: d.authz_allow_ttl.as_secs(),
            authz_deny_ttl_secs: d.authz_deny_ttl.as_secs(),
            authz_token_cache_size: d.authz_token_cache_size,
            authz_access_cache_size: d.authz_access_cache_size,
            max_watches_per_client: d.max_watches_per_client,
            max_concurrent_lists: d.max_concurrent_lists,
            max_header_bytes: d.max_header_bytes,
            max_url_bytes: d.max_url_bytes,
            header_read_timeout_secs: d.header_read_timeout.as_secs(),
            http2_max_concurrent_streams: d.http2_max_concurrent_streams,
            goaway_chance: d.goaway_chance,
            min_request_timeout_secs: d.min_request_timeout.as_secs(),
            max_connection_age_secs: d.max_connection_age.as_secs(),
            proxy_protocol_trusted: d
                .proxy_protocol_trusted
                .iter()
                .map(ToString::to_string)
                .collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawLog {
    format: LogFormat,
    level: String,
}

impl Default for RawLog {
    fn default() -> Self {
        let d = LogConfig::default();
        RawLog {
            format: d.format,
            level: d.level,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawUpstream {
    url: Option<String>,
    connect_timeout_ms: u64,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    in_cluster: bool,
    exec_timeout_secs: u64,
}

impl Default for RawUpstream {
    fn default() -> Self {
        RawUpstream {
            url: None,
            connect_timeout_ms: UpstreamConfig::default().connect_timeout.as_millis() as u64,
            kubeconfig: None,
            context: None,
            in_cluster: false,
            exec_timeout_secs: UpstreamConfig::default().exec_timeout.as_secs(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawCache {
    event_window_count: usize,
    event_window_bytes: u64,
    event_window_secs: u64,
    consistent_read_state_max_objects: usize,
    consistent_read_check_interval_ms: u64,
    consistency_check_secs: u64,
    bookmark_interval_secs: u64,
    watcher_queue: usize,
    watcher_max_lag_bytes: u64,
    not_ready_wait_ms: u64,
    list_page_size: usize,
    snapshot_retention_secs: u64,
    snapshot_max_count: usize,
    snapshot_max_bytes: u64,
    memory_limit: u64,
    max_object_bytes: u64,
    persist_dir: String,
    max_staleness_secs: u64,
    mode: CacheMode,
    include: Vec<String>,
    exclude: Vec<String>,
    idle_secs: u64,
    resources: Vec<ResourceSpec>,
}

impl Default for RawCache {
    fn default() -> Self {
        let d = CacheConfig::default();
        RawCache {
            event_window_count: d.event_window_count,
            event_window_bytes: d.event_window_bytes,
            event_window_secs: d.event_window.as_secs(),
            consistent_read_state_max_objects: d.consistent_read_state_max_objects,
            consistent_read_check_interval_ms: d.consistent_read_check_interval.as_millis() as u64,
            consistency_check_secs: d.consistency_check.map_or(0, |d| d.as_secs()),
            bookmark_interval_secs: d.bookmark_interval.as_secs(),
            watcher_queue: d.watcher_queue,
            watcher_max_lag_bytes: d.watcher_max_lag_bytes,
            not_ready_wait_ms: d.not_ready_wait.as_millis() as u64,
            list_page_size: d.list_page_size,
            snapshot_retention_secs: d.snapshot_retention.as_secs(),
            snapshot_max_count: d.snapshot_max_count,
            snapshot_max_bytes: d.snapshot_max_bytes,
            memory_limit: d.memory_limit,
            max_object_bytes: d.max_object_bytes,
            persist_dir: String::new(),
            max_staleness_secs: 0,
            mode: d.mode,
            include: d.include.iter().map(ToString::to_string).collect(),
            exclude: Vec::new(),
            idle_secs: d.idle.map_or(0, |d| d.as_secs()),
            resources: d.resources,
        }
    }
}

impl RawConfig {
    /// The typed configuration; fails on values whose text does not parse (address, URL).
    fn into_config(self) -> Result<Config, Problem> {
        let listen = self.server.listen.parse::<SocketAddr>().map_err(|_| {
            problem(
                "server.listen",
                format!(
                    "{:?} is not an IP address with a port, e.g. \"127.0.0.1:8080\"",
                    self.server.listen
                ),
            )
        })?;
        let url = match self.upstream.url {
            None => None,
            Some(text) => {
                let uri = text.parse::<http::Uri>().map_err(|e| {
                    problem("upstream.url", format!("{text:?} is not a valid URL: {e}"))
                })?;
                check_url(&uri).map_err(|m| problem("upstream.url", format!("{text:?} {m}")))?;
                Some(strip_trailing_slash(uri))
            }
        };
        let c = self.cache;
        let patterns = |key: &str, list: &[String]| {
            list.iter()
                .enumerate()
                .map(|(i, t)| KindPattern::parse(t).map_err(|m| problem(format!("{key}[{i}]"), m)))
                .collect::<Result<Vec<_>, _>>()
        };
        let include = patterns("cache.include", &c.include)?;
        let exclude = patterns("cache.exclude", &c.exclude)?;
        let proxy_protocol_trusted = self
            .server
            .proxy_protocol_trusted
            .iter()
            .enumerate()
            .map(|(i, t)| {
                parse_trusted_range(t)
                    .map_err(|m| problem(format!("server.proxy_protocol_trusted[{i}]"), m))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Config {
            server: ServerConfig {
                listen,
                ready_outage: Duration::from_secs(self.server.ready_outage_secs),
                shutdown_delay: Duration::from_secs(self.server.shutdown_delay_secs),
                shutdown_timeout: Duration::from_secs(self.server.shutdown_timeout_secs),
                shutdown_watch_grace: Duration::from_secs(self.server.shutdown_watch_grace_secs),
                shutdown_watch_min_rate: self.server.shutdown_watch_min_rate,
                tls_cert_file: self.server.tls_cert_file,
                tls_key_file: self.server.tls_key_file,
                client_ca_file: self.server.client_ca_file,
                auth: self.server.auth,
                authz: self.server.authz,
                authz_allow_ttl: Duration::from_secs(self.server.authz_allow_ttl_secs),
                authz_deny_ttl: Duration::from_secs(self.server.authz_deny_ttl_secs),
                authz_token_cache_size: self.server.authz_token_cache_size,
                authz_access_cache_size: self.server.authz_access_cache_size,
                max_watches_per_client: self.server.max_watches_per_client,
                max_concurrent_lists: self.server.max_concurrent_lists,
                max_header_bytes: self.server.max_header_bytes,
                max_url_bytes: self.server.max_url_bytes,
                header_read_timeout: Duration::from_secs(self.server.header_read_timeout_secs),
                http2_max_concurrent_streams: self.server.http2_max_concurrent_streams,
                goaway_chance: self.server.goaway_chance,
                min_request_timeout: Duration::from_secs(self.server.min_request_timeout_secs),
                max_connection_age: Duration::from_secs(self.server.max_connection_age_secs),
                proxy_protocol_trusted,
            },
            log: LogConfig {
                format: self.log.format,
                level: self.log.level,
            },
            upstream: UpstreamConfig {
                url,
                connect_timeout: Duration::from_millis(self.upstream.connect_timeout_ms),
                kubeconfig: self.upstream.kubeconfig,
                context: self.upstream.context,
                in_cluster: self.upstream.in_cluster,
                exec_timeout: Duration::from_secs(self.upstream.exec_timeout_secs),
            },
            cache: CacheConfig {
                event_window_count: c.event_window_count,
                event_window_bytes: c.event_window_bytes,
                event_window: Duration::from_secs(c.event_window_secs),
                consistent_read_state_max_objects: c.consistent_read_state_max_objects,
                consistent_read_check_interval: Duration::from_millis(
                    c.consistent_read_check_interval_ms,
                ),
                consistency_check: (c.consistency_check_secs > 0)
                    .then(|| Duration::from_secs(c.consistency_check_secs)),
                bookmark_interval: Duration::from_secs(c.bookmark_interval_secs),
                watcher_queue: c.watcher_queue,
                watcher_max_lag_bytes: c.watcher_max_lag_bytes,
                not_ready_wait: Duration::from_millis(c.not_ready_wait_ms),
                list_page_size: c.list_page_size,
                snapshot_retention: Duration::from_secs(c.snapshot_retention_secs),
                snapshot_max_count: c.snapshot_max_count,
                snapshot_max_bytes: c.snapshot_max_bytes,
                memory_limit: c.memory_limit,
                max_object_bytes: c.max_object_bytes,
                persist_dir: (!c.persist_dir.is_empty()).then(|| c.persist_dir.into()),
                max_staleness: (c.max_staleness_secs > 0)
                    .then(|| Duration::from_secs(c.max_staleness_secs)),
                mode: c.mode,
                include,
                exclude,
                idle: (c.idle_secs > 0).then(|| Duration::from_secs(c.idle_secs)),
                resources: c.resources,
            },
        })
    }
}

/// A `server.proxy_protocol_trusted` entry: a network in CIDR notation, or one address (a
/// network of one). A network whose address has bits set past its prefix (`10.0.0.5/8`) is
/// refused rather than widened: it is more likely a single host with the wrong prefix than the
/// whole network, and trusting a network too wide lets its hosts claim any client address.
fn parse_trusted_range(text: &str) -> Result<IpNet, String> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    let net = text.parse::<IpNet>().map_err(|_| {
        format!(
            "{text:?} is neither an IP network in CIDR notation (\"10.0.0.0/8\", \"fd00::/8\") \
             nor an IP address"
        )
    })?;
    if net.trunc() != net {
        return Err(format!(
            "{text:?} has address bits set past its /{} prefix: write the network {} (or the \
             address alone, for one host)",
            net.prefix_len(),
            net.trunc()
        ));
    }
    Ok(net)
}

/// `http://h:1/prefix/` → `http://h:1/prefix`, and `http://h:1/` stays as it is, so request paths
/// can be appended to the path without doubling the slash.
fn strip_trailing_slash(uri: http::Uri) -> http::Uri {
    let path = uri.path();
    if path.len() <= 1 || !path.ends_with('/') || uri.query().is_some() {
        return uri;
    }
    let trimmed = path.trim_end_matches('/');
    let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
    let mut parts = uri.clone().into_parts();
    match trimmed.parse() {
        Ok(pq) => {
            parts.path_and_query = Some(pq);
            http::Uri::from_parts(parts).unwrap_or(uri)
        }
        Err(_) => uri,
    }
}

// ---- locating keys in the document ------------------------------------------------------------

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

fn format_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The deepest key path whose key or value span contains `offset`.
///
/// Every node is visited (the document is small), because the span toml gives a `[table]` header's
/// value does not necessarily cover the keys below it.
fn key_path_at(doc: &DeTable<'_>, offset: usize) -> Option<String> {
    fn walk_value(
        v: &Spanned<DeValue<'_>>,
        offset: usize,
        path: &mut Vec<Seg>,
        best: &mut Vec<Seg>,
    ) {
        match v.get_ref() {
            DeValue::Table(t) => walk_table(t, offset, path, best),
            DeValue::Array(a) => {
                for (i, item) in a.iter().enumerate() {
                    path.push(Seg::Index(i));
                    if item.span().contains(&offset) && path.len() > best.len() {
                        *best = path.clone();
                    }
                    walk_value(item, offset, path, best);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    fn walk_table(t: &DeTable<'_>, offset: usize, path: &mut Vec<Seg>, best: &mut Vec<Seg>) {
        for (k, v) in t.iter() {
            path.push(Seg::Key(k.get_ref().to_string()));
            if (k.span().contains(&offset) || v.span().contains(&offset)) && path.len() > best.len()
            {
                *best = path.clone();
            }
            walk_value(v, offset, path, best);
            path.pop();
        }
    }
    let mut best = Vec::new();
    walk_table(doc, offset, &mut Vec::new(), &mut best);
    (!best.is_empty()).then(|| format_path(&best))
}

/// Byte offset of the key path `a.b[3].c` in the document: of the key itself, or of the deepest
/// part of the path present (an array element's table). `None` when not even the first key is
/// there (the value came from a default).
fn line_of_key(doc: &DeTable<'_>, path: &str) -> Option<usize> {
    let mut segs = Vec::new();
    for part in path.split('.') {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        segs.push(Seg::Key(name.to_string()));
        for idx in rest.split('[') {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                segs.push(Seg::Index(i));
            }
        }
    }
    let mut found = None;
    let mut table = Some(doc);
    let mut value: Option<&Spanned<DeValue<'_>>> = None;
    for seg in &segs {
        match seg {
            Seg::Key(k) => {
                let (key, v) = table?.get_key_value(k.as_str())?;
                found = Some(key.span().start);
                value = Some(v);
            }
            Seg::Index(i) => {
                let item = value?.get_ref().as_array()?.get(*i)?;
                found = Some(item.span().start);
                value = Some(item);
            }
        }
        table = value.and_then(|v| v.get_ref().as_table());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        match Config::from_toml_str(text, "test.toml") {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn empty_text_gives_the_defaults() {
        assert_eq!(Config::from_toml_str("", "x").unwrap(), Config::default());
    }

    #[test]
    fn example_file_parses_to_the_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config.toml");
        let c = Config::from_file(path).unwrap();
        let mut want = Config::default();
        want.upstream.url = Some("http://127.0.0.1:8001".parse().unwrap());
        assert_eq!(c, want);
        c.validate().unwrap();
    }

    #[test]
    fn all_keys_are_read() {
        let c = Config::from_toml_str(
            r#"
[server]
listen = "0.0.0.0:9443"
tls_cert_file = "/etc/watchmux/tls.crt"
tls_key_file = "/etc/watchmux/tls.key"
client_ca_file = "/etc/watchmux/client-ca.crt"
auth = "client-required"
[upstream]
url = "https://kube.example:6443/prefix/"
connect_timeout_ms = 250
[cache]
event_window_count = 7
event_window_bytes = 12
event_window_secs = 80
bookmark_interval_secs = 9
watcher_queue = 10
watcher_max_lag_bytes = 11
not_ready_wait_ms = 0
list_page_size = 13
[[cache.resources]]
resource = "pods"
version = "v1"
"#,
            "t",
        )
        .unwrap();
        assert_eq!(c.server.listen, "0.0.0.0:9443".parse().unwrap());
        let s = &c.server;
        assert_eq!(
            s.tls_cert_file.as_deref(),
            Some(Path::new("/etc/watchmux/tls.crt"))
        );
        assert_eq!(
            s.tls_key_file.as_deref(),
            Some(Path::new("/etc/watchmux/tls.key"))
        );
        assert_eq!(
            s.client_ca_file.as_deref(),
            Some(Path::new("/etc/watchmux/client-ca.crt"))
        );
        assert_eq!(s.auth_mode(), AuthMode::ClientRequired);
        assert_eq!(
            c.upstream.url.as_ref().unwrap().to_string(),
            "https://kube.example:6443/prefix"
        );
        assert_eq!(c.upstream.connect_timeout, Duration::from_millis(250));
        let k = &c.cache;
        assert_eq!(k.event_window_count, 7);
        assert_eq!(k.event_window_bytes, 12);
        assert_eq!(k.event_window, Duration::from_secs(80));
        assert_eq!(k.bookmark_interval, Duration::from_secs(9));
        assert_eq!(k.watcher_queue, 10);
        assert_eq!(k.watcher_max_lag_bytes, 11);
        assert_eq!(k.not_ready_wait, Duration::ZERO);
        assert_eq!(k.list_page_size, 13);
        assert_eq!(k.resources, vec![ResourceSpec::new("", "v1", "pods")]);
    }

    #[test]
    fn upstream_source_keys() {
        let c = Config::from_toml_str(
            "[upstream]\nkubeconfig = \"/etc/kube/config\"\ncontext = \"prod\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            c.upstream.kubeconfig.as_deref(),
            Some(Path::new("/etc/kube/config"))
        );
        assert_eq!(c.upstream.context.as_deref(), Some("prod"));
        assert!(!c.upstream.in_cluster);
        let c = Config::from_toml_str("[upstream]\nin_cluster = true\n", "t").unwrap();
        assert!(c.upstream.in_cluster);
        assert_eq!(c.upstream.exec_timeout, Duration::from_secs(60));
        let c = Config::from_toml_str("[upstream]\nexec_timeout_secs = 5\n", "t").unwrap();
        assert_eq!(c.upstream.exec_timeout, Duration::from_secs(5));
        let e = Config::from_toml_str("[upstream]\nexec_timeout_secs = 0\n", "t").unwrap_err();
        assert_eq!(e.key(), Some("upstream.exec_timeout_secs"), "{e}");
        for (text, key, want) in [
            (
                "[upstream]\nurl = \"http://h:1\"\nkubeconfig = \"k\"\n",
                "upstream.kubeconfig",
                "cannot be combined with upstream.url",
            ),
            (
                "[upstream]\nin_cluster = true\nkubeconfig = \"k\"\n",
                "upstream.in_cluster",
                "cannot be combined with upstream.kubeconfig",
            ),
            (
                "[upstream]\nurl = \"http://h:1\"\ncontext = \"c\"\n",
                "upstream.context",
                "only applies to a kubeconfig",
            ),
            (
                "[upstream]\nkubeconfig = \"\"\n",
                "upstream.kubeconfig",
                "must not be empty",
            ),
            (
                "[upstream]\nin_cluster = \"yes\"\n",
                "upstream.in_cluster",
                "invalid type",
            ),
        ] {
            let e = err(text);
            assert_eq!(e.key(), Some(key), "{text}: {e}");
            assert!(e.line().is_some(), "{text}: {e}");
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn downstream_tls_and_auth_keys() {
        for (text, key, want) in [
            (
                "[server]\ntls_cert_file = \"c\"\n",
                "server.tls_cert_file",
                "needs server.tls_key_file",
            ),
            (
                "[server]\ntls_key_file = \"k\"\n",
                "server.tls_key_file",
                "needs server.tls_cert_file",
            ),
            (
                "[server]\nclient_ca_file = \"ca\"\n",
                "server.client_ca_file",
                "only seen when watchmux terminates TLS",
            ),
            (
                "[server]\nauth = \"anyone\"\n",
                "server.auth",
                "unknown variant",
            ),
        ] {
            let e = err(text);
            assert_eq!(e.key(), Some(key), "{text}: {e}");
            assert_eq!(e.line(), Some(2), "{text}: {e}");
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
        assert_eq!(Config::default().server.auth_mode(), AuthMode::Client);
    }

    #[test]
    fn plain_http_off_loopback_needs_tls_or_an_explicit_auth_mode() {
        let e = err("[server]\nlisten = \"0.0.0.0:8080\"\n");
        assert_eq!(e.key(), Some("server.listen"), "{e}");
        assert_eq!(e.line(), Some(2), "{e}");
        let s = e.to_string();
        assert!(s.contains("not a loopback address and TLS is off"), "{s}");
        assert!(
            s.contains("server.tls_cert_file") && s.contains("server.auth"),
            "{s}"
        );
        // Loopback (v4 and v6) is fine; TLS or an explicit mode makes any address fine.
        Config::from_toml_str("[server]\nlisten = \"127.0.0.2:8080\"\n", "t").unwrap();
        Config::from_toml_str("[server]\nlisten = \"[::1]:8080\"\n", "t").unwrap();
        Config::from_toml_str(
            "[server]\nlisten = \"0.0.0.0:8080\"\nauth = \"watchmux\"\n",
            "t",
        )
        .unwrap();
        Config::from_toml_str(
            "[server]\nlisten = \"[::]:8443\"\ntls_cert_file = \"c\"\ntls_key_file = \"k\"\n",
            "t",
        )
        .unwrap();
        // A command-line override is checked by validate().
        let mut c = Config::default();
        c.server.listen = "10.1.2.3:8080".parse().unwrap();
        assert_eq!(c.validate().unwrap_err().key(), Some("server.listen"));
    }

    #[test]
    fn unknown_key_names_the_table_and_line() {
        let e = err("[server]\nlisten = \"127.0.0.1:1\"\n\n[cache]\nwatcher_queue = 5\nfoo = 1\n");
        let s = e.to_string();
        assert_eq!(e.key(), Some("cache.foo"), "{s}");
        assert_eq!(e.line(), Some(6), "{s}");
        assert!(
            s.starts_with("test.toml: line 6: cache.foo: unknown field `foo`"),
            "{s}"
        );
        assert!(s.contains("watcher_queue"), "lists the expected keys: {s}");
    }

    #[test]
    fn unknown_top_level_table() {
        let e = err("[servr]\nlisten = \"x\"\n");
        assert_eq!(e.key(), Some("servr"), "{e}");
        assert_eq!(e.line(), Some(1), "{e}");
    }

    #[test]
    fn unknown_key_in_a_resource() {
        let e = err(
            "[[cache.resources]]\nversion = \"v1\"\nresource = \"pods\"\n\
             [[cache.resources]]\nversion = \"v1\"\nresources = \"nodes\"\n",
        );
        assert_eq!(e.key(), Some("cache.resources[1].resources"), "{e}");
        assert_eq!(e.line(), Some(6), "{e}");
    }

    #[test]
    fn wrong_type_names_the_key() {
        let e = err("[cache]\nlist_page_size = \"many\"\n");
        assert_eq!(e.key(), Some("cache.list_page_size"), "{e}");
        assert_eq!(e.line(), Some(2), "{e}");
        let e = err("[cache]\nwatcher_queue = -1\n");
        assert_eq!(e.key(), Some("cache.watcher_queue"), "{e}");
    }

    #[test]
    fn missing_resource_key_names_the_entry() {
        let e = err("[[cache.resources]]\nversion = \"v1\"\n");
        let s = e.to_string();
        assert!(s.contains("resource"), "{s}");
        assert_eq!(e.key(), Some("cache.resources[0]"), "{s}");
        assert_eq!(e.line(), Some(1), "{s}");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let e = err("[server]\nlisten = \n");
        assert!(matches!(e, ConfigError::Parse { .. }), "{e:?}");
        assert_eq!(e.line(), Some(2), "{e}");
        assert!(e.to_string().starts_with("test.toml: line 2: "), "{e}");
    }

    #[test]
    fn bad_upstream_scheme() {
        let e = err("[upstream]\nurl = \"ftp://x\"\n");
        assert_eq!(
            e.to_string(),
            "test.toml: line 2: upstream.url: \"ftp://x\" is not an http(s) URL"
        );
        assert_eq!(e.key(), Some("upstream.url"));
    }

    #[test]
    fn upstream_url_needs_a_host_and_no_query() {
        for (url, want) in [
            ("/just/a/path", "is not an http(s) URL"),
            ("http://h:1/?x=1", "has a query string"),
            ("http://u:p@h:1", "carries credentials"),
            ("http://h:1:2", "is not a valid URL"),
        ] {
            let e = err(&format!("[upstream]\nurl = \"{url}\"\n"));
            assert_eq!(e.key(), Some("upstream.url"), "{e}");
            assert!(e.to_string().contains(want), "{url}: {e}");
        }
    }

    #[test]
    fn upstream_url_is_optional_but_required_on_demand() {
        let c = Config::from_toml_str("", "t").unwrap();
        let e = c.upstream.require_url().unwrap_err();
        assert_eq!(e.to_string(), "upstream.url is not set");
        let c = Config::from_toml_str("[upstream]\nurl = \"http://h:8001\"\n", "t").unwrap();
        assert_eq!(
            c.upstream.require_url().unwrap().to_string(),
            "http://h:8001/"
        );
    }

    #[test]
    fn bad_listen_address() {
        let e = err("\n[server]\nlisten = \"localhost\"\n");
        assert_eq!(e.key(), Some("server.listen"));
        assert_eq!(e.line(), Some(3), "{e}");
        assert!(e.to_string().contains("\"localhost\""), "{e}");
    }

    #[test]
    fn an_events_window_below_kubes_minimum_is_rejected() {
        let e = err("[cache]\nevent_window_secs = 74\n");
        assert_eq!(e.key(), Some("cache.event_window_secs"), "{e}");
        assert!(e.to_string().contains("at least 75"), "{e}");
    }

    #[test]
    fn zero_counts_are_rejected() {
        for key in [
            "event_window_count",
            "event_window_bytes",
            "event_window_secs",
            "bookmark_interval_secs",
            "watcher_queue",
            "watcher_max_lag_bytes",
            "list_page_size",
        ] {
            let e = err(&format!("[cache]\n{key} = 0\n"));
            assert_eq!(e.key(), Some(format!("cache.{key}").as_str()), "{e}");
            assert_eq!(e.line(), Some(2), "{e}");
            assert!(e.to_string().ends_with("must be greater than 0"), "{e}");
        }
        let e = err("[upstream]\nconnect_timeout_ms = 0\n");
        assert_eq!(e.key(), Some("upstream.connect_timeout_ms"), "{e}");
        // Waiting zero milliseconds for the first sync is allowed: answer 429 at once.
        Config::from_toml_str("[cache]\nnot_ready_wait_ms = 0\n", "t").unwrap();
    }

    #[test]
    fn snapshot_retention_keys() {
        let c = Config::from_toml_str(
            "[cache]\nsnapshot_retention_secs = 5\nsnapshot_max_count = 6\nsnapshot_max_bytes = 7\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.cache.snapshot_retention, Duration::from_secs(5));
        assert_eq!(c.cache.snapshot_max_count, 6);
        assert_eq!(c.cache.snapshot_max_bytes, 7);
        // Zero retention keeps no snapshot; zero bounds are typos.
        Config::from_toml_str("[cache]\nsnapshot_retention_secs = 0\n", "t").unwrap();
        for key in ["snapshot_max_count", "snapshot_max_bytes"] {
            let e = err(&format!("[cache]\n{key} = 0\n"));
            assert_eq!(e.key(), Some(format!("cache.{key}").as_str()), "{e}");
            assert_eq!(e.line(), Some(2), "{e}");
            assert!(e.to_string().ends_with("must be greater than 0"), "{e}");
        }
        let e = err("[cache]\nsnapshot_retention_secs = 99999999999\n");
        assert_eq!(e.key(), Some("cache.snapshot_retention_secs"), "{e}");
    }

    #[test]
    fn resource_limit_keys() {
        let c = Config::from_toml_str(
            "[server]\nmax_watches_per_client = 3\nmax_concurrent_lists = 4\n\
             max_header_bytes = 65536\nmax_url_bytes = 2048\nheader_read_timeout_secs = 5\n\
             http2_max_concurrent_streams = 5000\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.server.max_watches_per_client, 3);
        assert_eq!(c.server.max_concurrent_lists, 4);
        assert_eq!(c.server.max_header_bytes, 65536);
        assert_eq!(c.server.max_url_bytes, 2048);
        assert_eq!(c.server.header_read_timeout, Duration::from_secs(5));
        assert_eq!(c.server.http2_max_concurrent_streams, 5000);
        assert_eq!(Config::default().server.goaway_chance, 0.0, "off");
        let c = Config::from_toml_str("[server]\ngoaway_chance = 0.001\n", "t").unwrap();
        assert_eq!(c.server.goaway_chance, 0.001);
        assert_eq!(
            Config::default().server.min_request_timeout,
            Duration::from_secs(1800),
            "kube's --min-request-timeout"
        );
        let c = Config::from_toml_str("[server]\nmin_request_timeout_secs = 60\n", "t").unwrap();
        assert_eq!(c.server.min_request_timeout, Duration::from_secs(60));
        assert!(Config::default().server.max_connection_age.is_zero(), "off");
        let c = Config::from_toml_str("[server]\nmax_connection_age_secs = 120\n", "t").unwrap();
        assert_eq!(c.server.max_connection_age, Duration::from_secs(120));
        assert_eq!(
            Config::default().server.http2_max_concurrent_streams,
            1000,
            "above hyper's 200: a kubelet keeps its watches on one connection"
        );
        for (text, key, msg) in [
            (
                "http2_max_concurrent_streams = 0",
                "server.http2_max_concurrent_streams",
                "must be greater than 0",
            ),
            (
                "max_watches_per_client = 0",
                "server.max_watches_per_client",
                "must be greater than 0",
            ),
            (
                "max_concurrent_lists = 0",
                "server.max_concurrent_lists",
                "must be greater than 0",
            ),
            (
                "header_read_timeout_secs = 0",
                "server.header_read_timeout_secs",
                "must be greater than 0",
            ),
            (
                "max_header_bytes = 100",
                "server.max_header_bytes",
                "must be between 8192 and 67108864",
            ),
            (
                "max_url_bytes = 0",
                "server.max_url_bytes",
                "must be between 1 and 65534",
            ),
            (
                "max_url_bytes = 70000",
                "server.max_url_bytes",
                "must be between 1 and 65534",
            ),
            (
                "min_request_timeout_secs = 0",
                "server.min_request_timeout_secs",
                "must be greater than 0",
            ),
            (
                "goaway_chance = 0.05",
                "server.goaway_chance",
                "0.05 is outside 0 (off) to 0.02",
            ),
            (
                "goaway_chance = -0.001",
                "server.goaway_chance",
                "-0.001 is outside 0 (off) to 0.02",
            ),
            (
                "goaway_chance = nan",
                "server.goaway_chance",
                "NaN is outside 0 (off) to 0.02",
            ),
            (
                "max_connection_age_secs = 99999999999",
                "server.max_connection_age_secs",
                "must be at most 31536000 seconds (one year)",
            ),
        ] {
            let e = err(&format!("[server]\n{text}\n"));
            assert_eq!(e.key(), Some(key), "{e}");
            assert_eq!(e.line(), Some(2), "{e}");
            assert!(e.to_string().ends_with(msg), "{e}");
        }
    }

    #[test]
    fn proxy_protocol_trusted_key() {
        assert!(
            Config::default().server.proxy_protocol_trusted.is_empty(),
            "off by default"
        );
        let c = Config::from_toml_str(
            "[server]\n\
             proxy_protocol_trusted = [\"10.0.0.0/8\", \"127.0.0.1\", \"fd00::/8\", \"::1\"]\n",
            "t",
        )
        .unwrap();
        let nets: Vec<String> = c
            .server
            .proxy_protocol_trusted
            .iter()
            .map(ToString::to_string)
            .collect();
        // A lone address is a network of one.
        assert_eq!(nets, ["10.0.0.0/8", "127.0.0.1/32", "fd00::/8", "::1/128"]);
        for (entry, msg) in [
            (
                "10.0.0.0/33",
                "\"10.0.0.0/33\" is neither an IP network in CIDR notation",
            ),
            (
                "balancer.example",
                "\"balancer.example\" is neither an IP network in CIDR notation",
            ),
            ("", "\"\" is neither an IP network in CIDR notation"),
            (
                "10.0.0.5/8",
                "\"10.0.0.5/8\" has address bits set past its /8 prefix: write the network \
                 10.0.0.0/8",
            ),
        ] {
            let e = err(&format!(
                "[server]\nproxy_protocol_trusted = [\n  \"10.1.0.0/16\",\n  \"{entry}\",\n]\n"
            ));
            assert_eq!(e.key(), Some("server.proxy_protocol_trusted[1]"), "{e}");
            assert_eq!(e.line(), Some(4), "the entry's own line: {e}");
            assert!(e.to_string().contains(msg), "{e}");
        }
        assert_eq!(
            err("[server]\nproxy_protocol_trusted = \"10.0.0.0/8\"\n").key(),
            Some("server.proxy_protocol_trusted"),
            "a list, even of one"
        );
    }

    #[test]
    fn consistent_read_check_interval_key() {
        let c = Config::from_toml_str("", "t").unwrap();
        assert_eq!(
            c.cache.consistent_read_check_interval,
            Duration::from_millis(250)
        );
        for ms in [0, 1000] {
            let c = Config::from_toml_str(
                &format!("[cache]\nconsistent_read_check_interval_ms = {ms}\n"),
                "t",
            )
            .unwrap();
            assert_eq!(
                c.cache.consistent_read_check_interval,
                Duration::from_millis(ms)
            );
        }
        // A reader may wait this long for its check to start, within kube's 3 s for the check.
        for ms in ["1001", "18446744073709551615"] {
            let e = err(&format!(
                "[cache]\nconsistent_read_check_interval_ms = {ms}\n"
            ));
            assert_eq!(
                e.key(),
                Some("cache.consistent_read_check_interval_ms"),
                "{e}"
            );
            assert_eq!(e.line(), Some(2), "{e}");
            assert!(e.to_string().ends_with("must be between 0 and 1000"), "{e}");
        }
    }

    #[test]
    fn consistency_check_key() {
        let c = Config::from_toml_str("", "t").unwrap();
        assert_eq!(c.cache.consistency_check, Some(Duration::from_secs(300)));
        let c = Config::from_toml_str("[cache]\nconsistency_check_secs = 0\n", "t").unwrap();
        assert_eq!(c.cache.consistency_check, None, "0 turns the checks off");
        let c = Config::from_toml_str("[cache]\nconsistency_check_secs = 60\n", "t").unwrap();
        assert_eq!(c.cache.consistency_check, Some(Duration::from_secs(60)));
        for secs in ["604801", "18446744073709551615"] {
            let e = err(&format!("[cache]\nconsistency_check_secs = {secs}\n"));
            assert_eq!(e.key(), Some("cache.consistency_check_secs"), "{e}");
            assert_eq!(e.line(), Some(2), "{e}");
            assert!(
                e.to_string().ends_with("must be between 0 and 604800"),
                "{e}"
            );
        }
    }

    /// Numbers that would panic or break the server at run time are refused at load, naming
    /// the file's line and key: a watcher queue tokio's channel cannot hold, a page size kube
    /// cannot parse as its `limit`.
    #[test]
    fn huge_counts_are_rejected() {
        for (text, key, msg) in [
            (
                "watcher_queue = 4611686018427387904",
                "cache.watcher_queue",
                "must be between 1 and 1073741824",
            ),
            (
                "list_page_size = 9223372036854775807",
                "cache.list_page_size",
                "",
            ),
        ] {
            let r = Config::from_toml_str(&format!("[cache]\n{text}\n"), "t");
            if msg.is_empty() {
                r.unwrap();
                continue;
            }
            let e = r.unwrap_err();
            assert_eq!(e.key(), Some(key), "{e}");
            assert_eq!(e.line(), Some(2), "{e}");
            assert!(e.to_string().ends_with(msg), "{e}");
        }
        Config::from_toml_str("[cache]\nwatcher_queue = 1073741824\n", "t").unwrap();
    }

    #[test]
    fn huge_durations_are_rejected() {
        let e = err("[cache]\nevent_window_secs = 18446744073709551615\n");
        assert_eq!(e.key(), Some("cache.event_window_secs"), "{e}");
        assert!(e.to_string().contains("at most"), "{e}");
    }

    #[test]
    fn on_demand_patterns_choose_the_kinds() {
        let c = Config::from_toml_str(
            "[cache]\ninclude = [\"core/*\", \"apps/deploy*\", \"*.example.com/*\"]\nexclude = [\"core/events\"]\nidle_secs = 0\n",
            "t",
        )
        .unwrap()
        .cache;
        assert_eq!(c.mode, CacheMode::OnDemand);
        assert_eq!(c.idle, None);
        assert!(c.may_cache("", "pods"));
        assert!(!c.may_cache("", "events"), "excluded");
        assert!(!c.may_cache("", "secrets"), "not named");
        assert!(c.may_cache("apps", "deployments"));
        assert!(!c.may_cache("apps", "daemonsets"));
        assert!(c.may_cache("a.example.com", "widgets"));
        assert!(
            !c.may_cache("example.com", "widgets"),
            "`*.` needs a label before"
        );
        // The defaults: everything but secrets, which only an exact name (or a listed
        // resource) opts in; exclude wins over include, not over a listed resource.
        let d = CacheConfig::default();
        assert!(d.may_cache("", "configmaps") && d.may_cache("x.io", "things"));
        assert!(!d.may_cache("", "secrets"));
        let named = Config::from_toml_str(
            "[cache]\ninclude = [\"*/*\", \"/secrets\"]\nexclude = [\"apps/*\"]\n[[cache.resources]]\ngroup = \"apps\"\nversion = \"v1\"\nresource = \"deployments\"\n",
            "t",
        )
        .unwrap()
        .cache;
        assert!(named.may_cache("", "secrets"));
        assert!(!named.may_cache("apps", "replicasets"));
        assert!(named.may_cache("apps", "deployments"));
        assert_eq!(
            Config::from_toml_str("[cache]\nmode = \"listed\"\n", "t")
                .unwrap()
                .cache
                .mode,
            CacheMode::Listed
        );
        for (text, key) in [
            ("include = [\"pods\"]", "cache.include[0]"),
            (
                "include = [\"*/*\", \"apps/Deployments\"]",
                "cache.include[1]",
            ),
            ("exclude = [\"core/\"]", "cache.exclude[0]"),
        ] {
            let e = err(&format!("[cache]\n{text}\n"));
            assert_eq!(e.key(), Some(key), "{e}");
            assert_eq!(e.line(), Some(2), "{e}");
        }
        assert_eq!(err("[cache]\nmode = \"lazy\"\n").key(), Some("cache.mode"));
    }

    #[test]
    fn glob_matches_runs() {
        for (p, t, want) in [
            ("*", "", true),
            ("*", "abc", true),
            ("a*c", "abbc", true),
            ("a*c", "abcd", false),
            ("*.x.io", "a.x.io", true),
            ("*.x.io", "x.io", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "acb", false),
            ("abc", "abc", true),
            ("ab*ab", "ab", false),
        ] {
            assert_eq!(glob(p, t), want, "{p} ~ {t}");
        }
    }

    #[test]
    fn duplicate_resources_name_the_entry() {
        let text = r#"
[[cache.resources]]
version = "v1"
resource = "pods"

[[cache.resources]]
group = "apps"
version = "v1"
resource = "deployments"

[[cache.resources]]
version = "v1"
resource = "nodes"

[[cache.resources]]
group = ""
version = "v1"
resource = "pods"
"#;
        let e = err(text);
        assert_eq!(e.key(), Some("cache.resources[3]"), "{e}");
        assert_eq!(e.line(), Some(15), "{e}");
        assert!(
            e.to_string()
                .contains("pods.v1 is already listed as cache.resources[0]"),
            "{e}"
        );
    }

    #[test]
    fn resource_names_must_be_dns_labels() {
        for (entry, key) in [
            ("version = \"v1\"\nresource = \"Pods\"", "resource"),
            ("version = \"v1\"\nresource = \"\"", "resource"),
            ("version = \"v1\"\nresource = \"pods/status\"", "resource"),
            ("version = \"v1\"\nresource = \"-pods\"", "resource"),
            ("version = \"V1\"\nresource = \"pods\"", "version"),
            (
                "group = \"Apps\"\nversion = \"v1\"\nresource = \"deployments\"",
                "group",
            ),
            (
                "group = \"apps..x\"\nversion = \"v1\"\nresource = \"deployments\"",
                "group",
            ),
        ] {
            let text = format!(
                "[[cache.resources]]\nversion = \"v1\"\nresource = \"pods\"\n[[cache.resources]]\n{entry}\n"
            );
            let e = err(&text);
            assert_eq!(
                e.key(),
                Some(format!("cache.resources[1].{key}").as_str()),
                "{entry}: {e}"
            );
            assert!(e.line().is_some_and(|l| l >= 5), "{entry}: {e}");
        }
        let c = Config::from_toml_str(
            "[[cache.resources]]\ngroup = \"discovery.k8s.io\"\nversion = \"v1beta1\"\nresource = \"endpointslices\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            c.cache.resources[0].to_string(),
            "endpointslices.v1beta1.discovery.k8s.io"
        );
    }

    #[test]
    fn validate_checks_overridden_values() {
        let mut c = Config::default();
        c.validate().unwrap();
        c.cache.watcher_queue = 0;
        let e = c.validate().unwrap_err();
        assert_eq!(e.key(), Some("cache.watcher_queue"));
        assert_eq!(e.line(), None);
        c.cache.watcher_queue = 1;
        c.upstream.url = Some("ftp://x".parse().unwrap());
        assert_eq!(c.validate().unwrap_err().key(), Some("upstream.url"));
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let e = Config::from_file("/nonexistent/watchmux.toml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/watchmux.toml: cannot read: "),
            "{e}"
        );
    }
}
