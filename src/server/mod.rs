//! The downstream HTTP server: routes each request either to a resource's watch cache (LIST and
//! WATCH forms the cache can answer exactly as kube-apiserver would) or to the upstream
//! unchanged (everything else).

pub mod health;
pub mod limits;
pub mod list;
pub mod watch;
pub mod websocket;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::auth::Downstream;
use crate::cache::{CacheSettings, ResourceCache};
use crate::config::{CacheConfig, Config, ResourceSpec};
use crate::reflector::{self, Backoff};
use crate::upstream::Upstream;
use kube_wire::options::{ListOptions, RvMatch};
use kube_wire::path::{self, ApiPath};
use kube_wire::response::{Body, status_response};
use kube_wire::selector::Filter;
use kube_wire::status::Status;

/// Where a resource's cache will be once upstream discovery has answered.
#[derive(Debug)]
pub struct CacheSlot {
    tx: tokio_watch::Sender<Option<Arc<ResourceCache>>>,
}

impl CacheSlot {
    fn new() -> Self {
        CacheSlot {
            tx: tokio_watch::channel(None).0,
        }
    }

    /// The cache, if discovered.
    pub fn get(&self) -> Option<Arc<ResourceCache>> {
        self.tx.borrow().clone()
    }

    /// Waits up to `timeout` for a synced cache.
    pub async fn synced(&self, timeout: Duration) -> Option<Arc<ResourceCache>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.tx.subscribe();
        let cache = match tokio::time::timeout_at(deadline, rx.wait_for(Option::is_some)).await {
            Ok(Ok(c)) => c.clone()?,
            _ => return None,
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        cache.wait_synced(left).await.then_some(cache)
    }
}

/// The proxy: caches, upstream, settings.
pub struct Proxy {
    slots: HashMap<(String, String, String), CacheSlot>,
    /// Pass-through client.
    pub upstream: Upstream,
    /// Cache settings from the config.
    pub cache_config: CacheConfig,
    /// Watches without `timeoutSeconds` last a random time in [this, 2× this) (kube: 1800 s).
    pub min_request_timeout: Duration,
    /// Stops everything.
    pub cancel: CancellationToken,
    /// Graceful shutdown began: stop accepting, end watches cleanly, finish connections. A child
    /// of `cancel` (cancelling `cancel` cancels it too).
    pub draining: CancellationToken,
    /// Background tasks.
    pub tasks: TaskTracker,
    /// Downstream connections (waited for, within a bound, at shutdown).
    pub conns: TaskTracker,
    /// Metrics and health state.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// `server.authz = "delegated"`: authenticates and authorizes every request the cache
    /// answers. `None` for `server.authz = "none"`.
    pub authz: Option<Arc<crate::authz::Authorizer>>,
    /// Concurrent cached watches per client and cached LISTs overall (`server.max_*`).
    pub limits: Arc<limits::Limits>,
    /// `server.max_url_bytes`.
    pub max_url_bytes: usize,
    /// `server.max_header_bytes`.
    pub max_header_bytes: usize,
    /// `server.header_read_timeout_secs`.
    pub header_read_timeout: Duration,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Builds the proxy and starts one reflector per cached resource.
    pub fn start(config: &Config, upstream: Upstream) -> Arc<Proxy> {
        let mut slots = HashMap::new();
        for spec in &config.cache.resources {
            slots.insert(
                (
                    spec.group.clone(),
                    spec.version.clone(),
                    spec.resource.clone(),
                ),
                CacheSlot::new(),
            );
        }
        let cancel = CancellationToken::new();
        let authz =
            (config.server.authz_mode() == crate::config::AuthzMode::Delegated).then(|| {
                Arc::new(crate::authz::Authorizer::new(
                    upstream.clone(),
                    &config.server,
                ))
            });
        let proxy = Arc::new(Proxy {
            slots,
            upstream,
            cache_config: config.cache.clone(),
            min_request_timeout: Duration::from_secs(1800),
            draining: cancel.child_token(),
            cancel,
            authz,
            limits: limits::Limits::new(
                config.server.max_watches_per_client,
                config.server.max_concurrent_lists,
            ),
            max_url_bytes: usize::try_from(config.server.max_url_bytes).unwrap_or(usize::MAX),
            max_header_bytes: usize::try_from(config.server.max_header_bytes).unwrap_or(usize::MAX),
            header_read_timeout: config.server.header_read_timeout,
            tasks: TaskTracker::new(),
            conns: TaskTracker::new(),
            metrics: Arc::new(crate::metrics::Metrics::new(config)),
        });
        for spec in &config.cache.resources {
            let p = proxy.clone();
            let spec = spec.clone();
            proxy.tasks.spawn(async move { p.run_resource(spec).await });
        }
        let p = proxy.clone();
        proxy.tasks.spawn(async move { p.reap_loop().await });
        proxy
    }

    fn settings(&self) -> CacheSettings {
        let c = &self.cache_config;
        CacheSettings {
            window_count: c.event_window_count,
            window_age: c.event_window,
            watcher_queue: c.watcher_queue,
            max_lag_bytes: c.watcher_max_lag_bytes,
        }
    }

    /// Discovery (retried with backoff), then the reflector.
    async fn run_resource(self: Arc<Self>, spec: ResourceSpec) {
        let up = self.upstream.watch_client();
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
        let info = loop {
            let r = tokio::select! {
                _ = self.cancel.cancelled() => return,
                r = reflector::discover(&up, &spec) => r,
            };
            match r {
                Ok(info) => break info,
                Err(e) => {
                    if let Some(m) =
                        self.metrics
                            .resource(&spec.group, &spec.version, &spec.resource)
                    {
                        m.upstream_failed(&e);
                    }
                    let d = backoff.next_delay();
                    tracing::warn!(resource = %spec, error = %e, retry_in = ?d, "discovery failed");
                    tokio::select! {
                        _ = self.cancel.cancelled() => return,
                        _ = tokio::time::sleep(d) => {}
                    }
                }
            }
        };
        let mut info = info;
        info.index_fields = spec.effective_index_fields();
        let cache = ResourceCache::new(info, self.settings());
        if let Some(slot) = self.slot(&spec.group, &spec.version, &spec.resource) {
            slot.tx.send_replace(Some(cache.clone()));
        }
        self.metrics.attach_cache(&spec, cache.clone());
        let m = self.metrics.for_info(&cache.info);
        reflector::run(
            up,
            spec,
            cache,
            self.cache_config.list_page_size,
            self.cancel.clone(),
            m,
        )
        .await;
    }

    /// Once a second: evict old events, close watchers that fell behind.
    async fn reap_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            for slot in self.slots.values() {
                if let Some(c) = slot.get() {
                    let n = c.reap();
                    if n > 0 {
                        tracing::info!(resource = %c.info.group_resource(), closed = n, "closed slow watchers");
                    }
                }
            }
        }
    }

    /// The slot of a cached resource.
    pub fn slot(&self, group: &str, version: &str, resource: &str) -> Option<&CacheSlot> {
        self.slots
            .get(&(group.to_string(), version.to_string(), resource.to_string()))
    }

    /// The cache of a resource, if discovered.
    pub fn cache(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceCache>> {
        self.slot(group, version, resource)?.get()
    }

    /// Whether every cached resource has synced.
    pub fn ready(&self) -> bool {
        self.slots
            .values()
            .all(|s| s.get().is_some_and(|c| c.is_synced()))
    }

    /// Graceful shutdown with no delay and a 20 s bound (see [`Proxy::shutdown_within`]).
    pub async fn shutdown(&self) {
        self.shutdown_within(Duration::ZERO, Duration::from_secs(20))
            .await;
    }

    /// Graceful shutdown: `/readyz` fails at once; after `delay` (still serving, so load
    /// balancers can take the pod out first) watchmux stops accepting, ends every watch cleanly
    /// (the stream ends, so clients re-watch elsewhere), lets idle connections close and other
    /// requests finish for at most `timeout`, then stops the reflectors and drops what is left.
    /// Returns whether every connection finished within the bound.
    pub async fn shutdown_within(&self, delay: Duration, timeout: Duration) -> bool {
        self.metrics.set_shutting_down();
        if !delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.cancel.cancelled() => {}
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        self.draining.cancel();
        for slot in self.slots.values() {
            if let Some(c) = slot.get() {
                c.close_all("server shutting down");
            }
        }
        self.conns.close();
        let clean = tokio::time::timeout_at(deadline, self.conns.wait())
            .await
            .is_ok();
        self.cancel.cancel();
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.tasks.wait()).await;
        clean
    }
}

/// Whether the `Accept` header lets the cache answer with plain JSON: the first media range
/// that names a representation we know decides. `as=Table`/`as=PartialObjectMetadata` and
/// protobuf-only requests go to the upstream.
pub fn accepts_plain_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return true;
    };
    for mr in kube_wire::negotiate::media_ranges(accept) {
        let json_like = matches!(mr.essence, "application/json" | "*/*" | "application/*");
        if mr.param("as").is_some() {
            return false;
        }
        if json_like {
            return true;
        }
    }
    false
}

/// Which LIST forms the cache answers (spec §1.5): RV=0 (any), and RV=N not-older-than.
/// Everything else (consistent reads, exact RVs, continue pages) goes upstream.
pub fn list_from_cache(opts: &ListOptions) -> bool {
    if opts.continue_token.is_some() {
        return false;
    }
    match (opts.resource_version.as_deref(), opts.rv_match()) {
        (Some("0"), None | Some(RvMatch::NotOlderThan)) => true,
        (Some(rv), Some(RvMatch::NotOlderThan)) => rv.parse::<u64>().is_ok(),
        (Some(rv), None) => opts.limit == 0 && rv.parse::<u64>().is_ok(),
        _ => false,
    }
}

/// Handles one request: `/metrics` and the health endpoints first (never passed through), then
/// the cache or the upstream. Every request is counted and timed, and logged at debug.
pub async fn handle(proxy: Arc<Proxy>, req: Request<Incoming>) -> Response<Body> {
    if let Some(r) = health::answer(&proxy, &req) {
        return r;
    }
    let info = proxy.metrics.classify(&req);
    let url_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    let resp = if url_len > proxy.max_url_bytes {
        status_response(&Status::new(
            414,
            "RequestURITooLong",
            format!(
                "the request URL is {url_len} bytes long, more than the {} allowed",
                proxy.max_url_bytes
            ),
        ))
    } else {
        route_and_serve(proxy.clone(), req).await
    };
    proxy.metrics.finish(&info, resp, &proxy.draining)
}

async fn route_and_serve(proxy: Arc<Proxy>, mut req: Request<Incoming>) -> Response<Body> {
    match route(&proxy, &req).await {
        Route::Answer(r) => r,
        Route::Watch {
            cache,
            opts,
            filter,
            client,
        } => {
            let permit = match proxy.limits.watch(&client) {
                Ok(p) => p,
                Err(s) => return status_response(&s),
            };
            // A websocket watch: check the subprotocols before anything else is started.
            let ws = if websocket::is_websocket(&req) {
                match websocket::choose_protocol(req.headers()) {
                    Ok(p) => Some(p),
                    Err(s) => return status_response(&s),
                }
            } else {
                None
            };
            let transport = if ws.is_some() {
                crate::metrics::TRANSPORT_WEBSOCKET
            } else {
                crate::metrics::TRANSPORT_CHUNKED
            };
            let rx = match watch::start(&proxy, cache, opts, filter, transport) {
                Ok(rx) => rx,
                Err(s) => return status_response(&s),
            };
            match ws {
                None => limits::hold(watch::chunked_response(rx), permit),
                Some(protocol) => match websocket::upgrade(&mut req, protocol.as_deref()) {
                    Ok((resp, fut)) => {
                        proxy.tasks.spawn(async move {
                            websocket::pump(fut, rx).await;
                            drop(permit);
                        });
                        resp
                    }
                    Err(s) => status_response(&s),
                },
            }
        }
        Route::List {
            slot_key,
            ns,
            opts,
            filter,
        } => {
            let slot = proxy
                .slots
                .get(&slot_key)
                .expect("routed to an existing slot");
            let permit = match proxy.limits.list() {
                Ok(p) => p,
                Err(s) => return status_response(&s),
            };
            let gzip = kube_wire::response::accepts_gzip(req.headers());
            let resp = list::serve(&proxy, slot, ns.as_deref(), &opts, &filter, gzip).await;
            limits::hold(resp, permit)
        }
        Route::PassThrough => {
            let mut r = crate::proxy::pass_through(&proxy.upstream, req).await;
            r.extensions_mut().insert(crate::metrics::PassedThrough);
            r
        }
    }
}

enum Route {
    Answer(Response<Body>),
    Watch {
        cache: Arc<ResourceCache>,
        opts: ListOptions,
        filter: Filter,
        /// Whom the watch counts against (`server.max_watches_per_client`).
        client: String,
    },
    List {
        slot_key: (String, String, String),
        ns: Option<String>,
        opts: ListOptions,
        filter: Filter,
    },
    PassThrough,
}

async fn route(proxy: &Proxy, req: &Request<Incoming>) -> Route {
    let ApiPath::Resource(rp) = path::parse(req.uri().path()) else {
        return Route::PassThrough;
    };
    if req.method() != Method::GET
        || rp.subresource.is_some()
        || (rp.name.is_some() && !rp.legacy_watch)
    {
        return Route::PassThrough;
    }
    let key = (rp.group.clone(), rp.version.clone(), rp.resource.clone());
    let Some(slot) = proxy.slots.get(&key) else {
        return Route::PassThrough;
    };
    let accept = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    if !accepts_plain_json(accept) {
        return Route::PassThrough;
    }
    let answer = |s: Status| Route::Answer(status_response(&s));
    // kube has no route for a namespaced path of a cluster-scoped kind: 404 before the query
    // is even parsed (known once discovery answered; otherwise checked below).
    if rp.namespace.is_some() && slot.get().is_some_and(|c| !c.info.namespaced) {
        return answer(Status::path_not_found());
    }
    let mut opts = match ListOptions::from_query(req.uri().query()) {
        Ok(o) => o,
        Err(s) => return answer(s),
    };
    opts.watch |= rp.legacy_watch;
    if !opts.watch && !list_from_cache(&opts) {
        return Route::PassThrough;
    }
    // The cache will answer: with `server.authz = "delegated"`, authenticate and authorize now,
    // before anything (not even a validation error) is answered from it. Pass-through requests
    // are authorized by the upstream, with the client's own credentials.
    let mut client = None;
    if let Some(authz) = &proxy.authz {
        let attrs = kube_wire::access::Attributes {
            verb: if opts.watch { "watch" } else { "list" }.to_string(),
            group: rp.group.clone(),
            version: rp.version.clone(),
            resource: rp.resource.clone(),
            subresource: String::new(),
            namespace: rp.namespace.clone().unwrap_or_default(),
            name: rp.name.clone().unwrap_or_else(|| {
                kube_wire::access::name_from_field_selector(&opts.field_selector)
                    .unwrap_or_default()
            }),
        };
        let peer = req.extensions().get::<crate::auth::PeerAuth>();
        let user = match authz.authenticate(req.headers(), peer).await {
            Ok(u) => u,
            Err(s) => return answer(s),
        };
        client = Some(format!("user:{}", user.user));
        if let Err(s) = authz.authorize(user, &attrs).await {
            return answer(s);
        }
    }
    let client = client.unwrap_or_else(|| match req.extensions().get::<limits::ClientAddr>() {
        Some(a) => format!("ip:{}", a.0),
        None => "ip:unknown".to_string(),
    });
    // Before discovery answered we do not know the kind: the resource is not ready.
    let wait = proxy.cache_config.not_ready_wait;
    let Some(cache) = slot.synced(wait).await else {
        return answer(Status::too_many_requests("storage is (re)initializing", 1));
    };
    let info = &cache.info;
    if rp.namespace.is_some() && !info.namespaced {
        return answer(Status::path_not_found());
    }
    if opts.watch {
        opts.apply_watch_list_defaults();
    }
    if let Err(s) = opts.validate() {
        return answer(s);
    }
    let parse = |opts: &ListOptions| {
        Filter::parse(
            &info.group,
            &info.kind,
            info.namespaced,
            &info.selectable_fields,
            rp.namespace.clone(),
            &opts.label_selector,
            &opts.field_selector,
        )
        .map_err(|e| Status::bad_request(e.to_string()))
    };
    let mut filter = match parse(&opts) {
        Ok(f) => f,
        Err(s) => return answer(s),
    };
    // kube's `listOpts` order: validation (422), field label conversion (400), then the rule
    // folding a legacy `/watch/…/{name}` path's name into `metadata.name` (400 on mismatch).
    if let Some(name) = &rp.name {
        if let Err(s) = opts.fold_name(name) {
            return answer(s);
        }
        filter = match parse(&opts) {
            Ok(f) => f,
            Err(s) => return answer(s),
        };
    }
    // A LIST or watch-list that must reflect RV=N: the cache learns the upstream's progress only
    // from events and bookmarks (kube sends those about once a minute), so an RV it has not
    // reached may well exist upstream, where kube's cache would catch up at once (spec §3.5,
    // §3.11). After kube's 3 s wait, the upstream answers: that RV's state, or its own 504.
    let needs_rv = !opts.watch || opts.send_initial_events == Some(true);
    if let Ok(Some(rv)) = opts.rv()
        && needs_rv
        && rv > cache.rv()
        && !cache.wait_rv(rv, list::BLOCK_TIMEOUT).await
    {
        return Route::PassThrough;
    }
    if opts.watch {
        Route::Watch {
            cache,
            opts,
            filter,
            client,
        }
    } else {
        Route::List {
            slot_key: key,
            ns: rp.namespace,
            opts,
            filter,
        }
    }
}

/// Serves plain HTTP/1.1 and HTTP/2 (with upgrades) on `listener` until the proxy is cancelled,
/// in the default `server.auth` mode.
pub async fn serve(proxy: Arc<Proxy>, listener: TcpListener) {
    serve_with(proxy, listener, Arc::new(Downstream::default())).await
}

/// [`serve`], accepting connections as `downstream` says: TLS (with client certificates) or not,
/// and the `server.auth` mode every request carries as a [`crate::auth::PeerAuth`] extension.
pub async fn serve_with(proxy: Arc<Proxy>, listener: TcpListener, downstream: Arc<Downstream>) {
    loop {
        // Draining (a child of `cancel`) stops accepting: the listener closes with this loop.
        let conn = tokio::select! {
            _ = proxy.draining.cancelled() => return,
            c = listener.accept() => c,
        };
        let Ok((stream, _)) = conn else { continue };
        let _ = stream.set_nodelay(true);
        let p = proxy.clone();
        let cancel = proxy.cancel.clone();
        let draining = proxy.draining.clone();
        let downstream = downstream.clone();
        let header_read_timeout = proxy.header_read_timeout;
        let max_header_bytes = proxy.max_header_bytes.max(8192);
        proxy.conns.spawn(async move {
            // The TLS handshake (if any) runs here, not in the accept loop: a slow client must
            // not hold up the others.
            let peer_addr = stream.peer_addr().ok();
            // A connection that sends nothing at all is closed after the header read timeout
            // too (hyper's timer only starts once the HTTP/1 request is being read).
            let mut first = [0u8; 1];
            let sent = tokio::select! {
                r = tokio::time::timeout(header_read_timeout, stream.peek(&mut first)) => {
                    matches!(r, Ok(Ok(n)) if n > 0)
                }
                _ = draining.cancelled() => return,
            };
            if !sent {
                return;
            }
            let accepted = tokio::select! {
                a = downstream.accept(stream) => a,
                _ = draining.cancelled() => return,
            };
            let (io, peer) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::debug!(peer = ?peer_addr, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let client_addr = peer_addr.map(|a| limits::ClientAddr(a.ip()));
            let svc = service_fn(move |mut req: Request<Incoming>| {
                let p = p.clone();
                req.extensions_mut().insert(peer.clone());
                if let Some(a) = client_addr {
                    req.extensions_mut().insert(a);
                }
                async move { Ok::<_, std::convert::Infallible>(handle(p, req).await) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // Header limits and the slow-header guard (hyper answers 431 past max_buf_size and
            // closes a connection whose headers are late, without a response).
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .max_buf_size(max_header_bytes);
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_header_list_size(u32::try_from(max_header_bytes).unwrap_or(u32::MAX));
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = draining.cancelled() => {}
            }
            // Graceful: HTTP/2 GOAWAY, HTTP/1 closes once the response in flight is done (a
            // watch's stream has just been ended); `cancel` drops whatever is left.
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}

/// Binds `addr` and serves in the background; returns the bound address.
pub async fn bind_and_serve(proxy: Arc<Proxy>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let p = proxy.clone();
    proxy.tasks.spawn(async move { serve(p, listener).await });
    Ok(local)
}

/// [`bind_and_serve`] with TLS and the `server.auth` mode of `downstream`
/// (see [`Downstream::from_config`]).
pub async fn bind_and_serve_with(
    proxy: Arc<Proxy>,
    addr: SocketAddr,
    downstream: Downstream,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let p = proxy.clone();
    let d = Arc::new(downstream);
    proxy
        .tasks
        .spawn(async move { serve_with(p, listener, d).await });
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(q: &str) -> ListOptions {
        ListOptions::from_query(Some(q)).unwrap()
    }

    #[test]
    fn cache_answers_the_forms_kube_serves_from_its_cache() {
        assert!(list_from_cache(&opts("resourceVersion=0")));
        assert!(list_from_cache(&opts("resourceVersion=0&limit=500")));
        assert!(list_from_cache(&opts(
            "resourceVersion=5&resourceVersionMatch=NotOlderThan&limit=5"
        )));
        assert!(list_from_cache(&opts("resourceVersion=5")));
        assert!(!list_from_cache(&opts("")), "consistent reads go upstream");
        assert!(!list_from_cache(&opts("limit=500")));
        assert!(
            !list_from_cache(&opts("resourceVersion=5&limit=5")),
            "legacy exact"
        );
        assert!(!list_from_cache(&opts(
            "resourceVersion=5&resourceVersionMatch=Exact"
        )));
        assert!(!list_from_cache(&opts("resourceVersion=0&continue=abc")));
    }

    #[test]
    fn accept_negotiation() {
        assert!(accepts_plain_json(None));
        assert!(accepts_plain_json(Some("application/json")));
        assert!(accepts_plain_json(Some(
            "application/vnd.kubernetes.protobuf, application/json"
        )));
        assert!(!accepts_plain_json(Some(
            "application/vnd.kubernetes.protobuf"
        )));
        assert!(!accepts_plain_json(Some(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        )));
        assert!(accepts_plain_json(Some("*/*")));
    }
}
