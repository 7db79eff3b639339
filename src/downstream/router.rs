//! Routing one downstream request: `/metrics` and the health endpoints, then the cache for the
//! LIST and WATCH forms it answers exactly as kube-apiserver would (after delegated authn/authz
//! when configured), else the upstream unchanged.
//!
//! Owns the decision "cache or pass-through" and the request-level checks that precede it
//! (URL length, path, Accept, list options, selectors, authorization, limits, the sync and
//! resourceVersion waits), each done once: the cache handed to [`super::list`] and
//! [`super::watch`] is synced and has reached the requested resourceVersion. A check that fails
//! is a [`RouteError`], answered with the `Status` `crate::error` maps it to. The body of a
//! request answered here is read away (`discard_body`), so hyper keeps reading the connection,
//! and the answer to a HEAD goes without its body. The answers themselves are built by
//! [`super::list`], [`super::watch`], [`super::websocket`] and [`crate::passthrough`]; the
//! router must not build bodies.

use std::sync::Arc;
use std::time::Duration;

use crate::downstream::request_body::ReqBody;
use http::{Method, Request, Response};
use tokio_util::sync::CancellationToken;

use super::authz::AuthzError;
use super::form::{self, Form};
use super::limits::{self, LimitError};
use super::read_point::{PassReason, ReadPoint};
use super::websocket::{self, WebsocketError};
use super::{get, health, list, watch};
use crate::app::{App, CacheSlot};
use crate::cache::{ResourceCache, Snapshot};
use kube_wire::negotiate::{Encoding, Target};
use kube_wire::options::ListOptions;
use kube_wire::path::{self, ApiPath, ResourcePath};
use kube_wire::response::{Body, status_response};
use kube_wire::selector::{Filter, SelectorError};
use kube_wire::status::Status;
use kube_wire::table::TablePrinter;

/// Why the router answers a request itself, with a kube `Status`, rather than with the cache's
/// or the upstream's answer.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// A request limit: the URL length, watches per client, concurrent LISTs.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// Delegated authentication or authorization refused the request.
    #[error(transparent)]
    Authz(#[from] AuthzError),
    /// A path kube registers no route for: a namespaced path of a cluster-scoped resource, or
    /// an object of a namespaced one outside a namespace (`/api/v1/pods/NAME`).
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// The resource's cache is not synced (within `cache.not_ready_wait`): kube's cacher's
    /// 429 while it is not ready.
    #[error("storage is (re)initializing")]
    NotReady {
        /// How long the cache has not been ready (its `Retry-After` grows with it).
        downtime: Duration,
    },
    /// The cache has not followed the upstream for longer than `cache.max_staleness_secs`.
    #[error(
        "the cache of {resource} has not followed the upstream for {}s, longer than cache.max_staleness_secs ({}s): the upstream is unreachable or failing",
        age.as_secs(),
        max.as_secs()
    )]
    Stale {
        /// `resource.group`.
        resource: String,
        /// How long it has not.
        age: Duration,
        /// The bound.
        max: Duration,
    },
    /// A selector kube rejects.
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// The websocket handshake is refused.
    #[error(transparent)]
    Websocket(#[from] WebsocketError),
    /// A refusal already phrased as kube's `Status` by the wire vocabulary or the watch (invalid
    /// list options, a resourceVersion too old or too large).
    #[error(transparent)]
    Status(#[from] Status),
    /// The server is draining (a graceful shutdown, past `server.shutdown_delay_secs`): kube's
    /// answers then, which send the client to another replica — a new watch gets 503 with
    /// `Retry-After: 1` (`WithWatchTerminationDuringShutdown`), any other request 429 with
    /// `Retry-After: 5` and `Connection: close` (`WithRetryAfter`).
    #[error("{}", if *watch { "apiserver is shutting down" } else { "The apiserver is shutting down, please try again later." })]
    ShuttingDown {
        /// The request is a watch.
        watch: bool,
    },
}

impl RouteError {
    /// Why this answer refuses a read that is neither served from the cache nor passed
    /// through (a client retries it), if it does: the `reason` of
    /// `watchmux_reads_total{source="refused"}`. Answers kube itself gives for the request
    /// (a bad request, 403, 410) are not refusals.
    pub fn refusal(&self) -> Option<Refusal> {
        Some(match self {
            RouteError::NotReady { .. } => Refusal::NotReady,
            RouteError::Stale { .. } => Refusal::Stale,
            RouteError::Limit(LimitError::TooManyWatches { .. }) => Refusal::WatchLimit,
            RouteError::Limit(LimitError::TooManyLists { .. }) => Refusal::ListLimit,
            RouteError::Limit(LimitError::OverMemory { .. }) => Refusal::MemoryLimit,
            RouteError::ShuttingDown { .. } => Refusal::ShuttingDown,
            _ => return None,
        })
    }
}

/// Why watchmux refused a read of a cached kind with a 429 or 503 of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The kind's cache is not ready (kube's 429 `storage is (re)initializing`).
    NotReady,
    /// The cache has not followed the upstream for longer than `cache.max_staleness_secs`.
    Stale,
    /// `server.max_watches_per_client`.
    WatchLimit,
    /// `server.max_concurrent_lists`.
    ListLimit,
    /// `cache.memory_limit`.
    MemoryLimit,
    /// A graceful shutdown is draining the server.
    ShuttingDown,
}

impl Refusal {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NotReady => "not_ready",
            Refusal::Stale => "stale",
            Refusal::WatchLimit => "watch_limit",
            Refusal::ListLimit => "list_limit",
            Refusal::MemoryLimit => "memory_limit",
            Refusal::ShuttingDown => "shutting_down",
        }
    }

    /// Every label value (so the metric's series exist from the start).
    pub const ALL: [Refusal; 6] = [
        Refusal::NotReady,
        Refusal::Stale,
        Refusal::WatchLimit,
        Refusal::ListLimit,
        Refusal::MemoryLimit,
        Refusal::ShuttingDown,
    ];
}

/// Handles one request: `/metrics` and the health endpoints first (never passed through), then
/// the cache or the upstream. Every request is counted and timed, and logged at debug. The
/// answer to a HEAD request has its headers and no body: hyper leaves the body out over
/// HTTP/1, but over HTTP/2 it would send it and h2 reset the stream.
pub async fn handle(app: Arc<App>, req: Request<ReqBody>) -> Response<Body> {
    if req.method() == Method::HEAD {
        return answer(app, req).await.map(|_| kube_wire::response::empty());
    }
    answer(app, req).await
}

async fn answer(app: Arc<App>, req: Request<ReqBody>) -> Response<Body> {
    if let Some(r) = health::answer(&app, &req) {
        return match discard_body(&app, req.into_body()) {
            Some(broken) => crate::passthrough::fail_when(r, broken),
            None => r,
        };
    }
    // kube negotiates the encoding of an error's Status too: protobuf for kubelets, indented
    // raw JSON for a header that takes none of its serializers.
    let status_encoding = kube_wire::negotiate::status_encoding(
        req.headers()
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
    );
    let requested_audit_id = req.headers().get(kube_wire::response::AUDIT_ID).cloned();
    let (info, pretty, mut resp) = if app.draining.is_cancelled() {
        // Draining: nothing is served, no kind's cache started (kube's filters answer before
        // its handlers).
        let info = app.metrics.classify(&req);
        let e = RouteError::ShuttingDown {
            watch: info.verb == "watch",
        };
        let mut r = error_response(&e, status_encoding);
        if info.verb == "watch" {
            // A tight retry: the client has a good chance to reach another replica.
            r.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
        } else if req.version() < http::Version::HTTP_2 {
            // HTTP/2 has no `Connection` header; its GOAWAY went out when draining began.
            r.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
        }
        (info, false, r)
    } else {
        // Found (or started) before the request is classified, so that it is counted under its
        // kind.
        let read = cached_read(&app, &req);
        let info = app.metrics.classify(&req);
        let pretty = info.verb != "watch"
            && kube_wire::response::wants_pretty(req.uri().query(), req.headers());
        let resp = match route_and_serve(&app, req, read, pretty).await {
            Ok(r) => r,
            Err(e) => error_response(&e, status_encoding),
        };
        (info, pretty, resp)
    };
    // Answers from watchmux itself carry what kube-apiserver's filters add; the upstream's
    // carry the upstream's.
    if resp
        .extensions()
        .get::<crate::metrics::PassedThrough>()
        .is_none()
    {
        let audit_id = kube_wire::response::audit_id(requested_audit_id.as_ref(), rand::random());
        resp.headers_mut()
            .insert(kube_wire::response::AUDIT_ID, audit_id);
        let json = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
        if pretty && json {
            resp = kube_wire::response::pretty_printed(resp).await;
        }
    }
    app.metrics.finish(&info, resp, &app.watches_end)
}

/// The answer for a refusal: its `Status` in the encoding the client negotiated (`None`: the raw
/// JSON kube answers a header none of its serializers takes), marked with the refusal's metric
/// label.
fn error_response(e: &RouteError, encoding: Option<Encoding>) -> Response<Body> {
    let mut r = match encoding {
        Some(Encoding::Protobuf) => kube_wire::response::protobuf_status_response(&Status::from(e)),
        Some(Encoding::Json | Encoding::Yaml) => status_response(&Status::from(e)),
        None => kube_wire::response::raw_status_response(&Status::from(e)),
    };
    if let Some(refusal) = e.refusal() {
        r.extensions_mut().insert(crate::metrics::Refused(refusal));
    }
    r
}

async fn route_and_serve(
    app: &Arc<App>,
    mut req: Request<ReqBody>,
    read: Option<(ResourcePath, Arc<CacheSlot>)>,
    pretty: bool,
) -> Result<Response<Body>, RouteError> {
    let routed = match limits::check_url_length(url_len(&req), app.max_url_bytes) {
        Ok(()) => match read {
            Some((rp, slot)) => Box::pin(route(app, &req, rp, slot)).await,
            None => Ok(Route::PassThrough(PassReason::NotCached)),
        },
        Err(e) => Err(e.into()),
    };
    let answer = match routed {
        Ok(Route::PassThrough(reason)) => {
            if let Some(collection) = sharded_collection(&req)
                && !Box::pin(app.shard_support.applies(&app.upstream, &collection)).await
            {
                return Err(RouteError::Status(kube_wire::status::Status::bad_request(
                    format!(
                        "shardSelector is not supported for {collection}: watchmux does not answer this read from its cache, and the upstream does not apply the selector (kube-apiserver 1.36+ with the ShardedListAndWatch feature gate does)"
                    ),
                )));
            }
            let mut r = Box::pin(crate::passthrough::pass_through(&app.upstream, req)).await;
            r.extensions_mut()
                .insert(crate::metrics::PassedThrough(reason));
            return Ok(r);
        }
        Ok(route) => {
            let cache = route.cache().cloned();
            let served = serve(app, &mut req, route, pretty);
            match cache {
                Some(c) => served.map(|r| with_freshness(r, &c)),
                None => served,
            }
        }
        Err(e) => Err(e),
    };
    // Answered here: the body, which kube ignores too, is read (and dropped) all the same.
    match discard_body(app, req.into_body()) {
        Some(broken) => answer.map(|r| crate::passthrough::fail_when(r, broken)),
        None => answer,
    }
}

/// The collection (cluster-wide: `/api/v1/pods`) a LIST or WATCH with a `shardSelector` reads,
/// if `req` is one: a GET of a resource path with no object name (or the legacy `/watch/`
/// form) whose first `shardSelector` value is not empty, which the upstream must apply if it
/// answers it ([`super::shards`]).
fn sharded_collection<B>(req: &Request<B>) -> Option<String> {
    if req.method() != Method::GET {
        return None;
    }
    let ApiPath::Resource(rp) = path::parse(req.uri().path()) else {
        return None;
    };
    if rp.subresource.is_some() || (rp.name.is_some() && !rp.legacy_watch) {
        return None;
    }
    let selector = super::shards::selector_param(req.uri().query())?;
    if selector.is_empty() {
        return None;
    }
    Some(if rp.group.is_empty() {
        format!("/api/{}/{}", rp.version, rp.resource)
    } else {
        format!("/apis/{}/{}/{}", rp.group, rp.version, rp.resource)
    })
}

/// The most bytes of a request body [`discard_body`] reads (kube's request body limit).
const MAX_DISCARDED_BODY: usize = 3 << 20;

/// Reads and drops the body of a request answered here rather than upstream. Left unread,
/// hyper stops reading the connection: it would not notice the client leaving (a watch would
/// go on, for nobody, until its timeout), and it would close the connection with the client's
/// bytes unread, a reset that can cut the answer short. The task ends with the body or the
/// connection. Returns, for a request with a body, a token cancelled when the body breaks off
/// (the client left or broke its framing) or goes past [`MAX_DISCARDED_BODY`] (then left
/// unread): hyper reads no more of that connection, so the answer must end by itself
/// ([`crate::passthrough::fail_when`]).
fn discard_body(app: &App, mut body: ReqBody) -> Option<CancellationToken> {
    use http_body_util::BodyExt;
    if hyper::body::Body::is_end_stream(&body) {
        return None;
    }
    let failed = CancellationToken::new();
    let fail = failed.clone();
    app.tasks.spawn(async move {
        let mut left = MAX_DISCARDED_BODY;
        loop {
            match body.frame().await {
                None => return,
                Some(Err(_)) => return fail.cancel(),
                Some(Ok(frame)) => {
                    let n = frame.data_ref().map_or(0, |d| d.len());
                    match left.checked_sub(n) {
                        Some(l) => left = l,
                        None => return fail.cancel(),
                    }
                }
            }
        }
    });
    Some(failed)
}

/// The cache's answer to a request [`route`] sent to it.
fn serve(
    app: &Arc<App>,
    req: &mut Request<ReqBody>,
    route: Route,
    pretty: bool,
) -> Result<Response<Body>, RouteError> {
    match route {
        Route::Watch {
            cache,
            opts,
            filter,
            client,
            form,
            printer,
            initial,
        } => {
            limits::check_memory(&app.budget)?;
            let permit = app.limits.acquire_watch(&client)?;
            // A websocket watch: check the subprotocols before anything else is started.
            let ws = if websocket::is_websocket(req) {
                Some(websocket::choose_protocol(req.headers())?)
            } else {
                None
            };
            let transport = if ws.is_some() {
                crate::metrics::TRANSPORT_WEBSOCKET
            } else {
                crate::metrics::TRANSPORT_CHUNKED
            };
            let binary = form.encoding() == Encoding::Protobuf;
            let handover = req
                .extensions()
                .get::<super::ConnectionGoaway>()
                .map(|g| g.0.clone());
            let stream = watch::start(
                app, cache, opts, filter, transport, form, printer, initial, handover,
            )?;
            match ws {
                None if req.extensions().get::<super::h1::Direct>().is_some() => {
                    Ok(super::h1::direct_response(stream, binary, permit))
                }
                None => Ok(limits::hold(
                    watch::chunked_response(stream, binary),
                    permit,
                )),
                Some(protocol) => {
                    let (resp, upgraded) = websocket::upgrade(req, protocol.as_deref())?;
                    app.tasks.spawn(async move {
                        websocket::pump(upgraded, stream, binary).await;
                        drop(permit);
                    });
                    Ok(resp)
                }
            }
        }
        Route::List {
            cache,
            from,
            namespace,
            opts,
            filter,
            form,
            printer,
        } => {
            limits::check_memory(&app.budget)?;
            let permit = app.limits.acquire_list()?;
            // A pretty answer is re-indented whole: not compressed.
            let gzip = !pretty && kube_wire::response::accepts_gzip(req.headers());
            let resp = list::serve(
                &cache,
                from,
                namespace.as_deref(),
                &opts,
                &filter,
                &form,
                &printer,
                gzip,
            );
            Ok(limits::hold(resp, permit))
        }
        Route::Get {
            cache,
            snap,
            namespace,
            name,
            form,
            printer,
        } => Ok(get::serve(
            &cache.info,
            &snap,
            namespace.as_deref(),
            &name,
            &form,
            &printer,
        )?),
        // Never: route_and_serve passes these through itself.
        Route::PassThrough(_) => Err(RouteError::NoRoute),
    }
}

/// The header of every cached answer that says the cache's resourceVersion when it answered.
pub const CACHE_RV_HEADER: &str = "x-watchmux-cache-resource-version";
/// The header of every cached answer that says, in whole seconds, how long the cache has not
/// followed the upstream (0 while it does): how stale the answer may be.
pub const CACHE_AGE_HEADER: &str = "x-watchmux-cache-age";

/// `r`, a cached answer, with the headers that say how fresh the cache is.
fn with_freshness(mut r: Response<Body>, cache: &ResourceCache) -> Response<Body> {
    let h = r.headers_mut();
    h.insert(CACHE_RV_HEADER, http::HeaderValue::from(cache.rv()));
    h.insert(
        CACHE_AGE_HEADER,
        http::HeaderValue::from(cache.staleness.age().as_secs()),
    );
    r
}

/// Refuses a read the cache would answer without proof that it is current, once the cache has
/// not followed the upstream for longer than `max` (`cache.max_staleness_secs`).
fn check_staleness(cache: &ResourceCache, max: Option<Duration>) -> Result<(), RouteError> {
    let Some(max) = max else {
        return Ok(());
    };
    let age = cache.staleness.age();
    if age <= max {
        return Ok(());
    }
    Err(RouteError::Stale {
        resource: cache.info.group_resource(),
        age,
        max,
    })
}

/// Where a request goes once every check passed.
enum Route {
    /// A WATCH the cache answers.
    Watch {
        /// Synced; fresh (or at the requested resourceVersion) when the watch sends initial
        /// events.
        cache: Arc<ResourceCache>,
        opts: ListOptions,
        filter: Filter,
        /// Whom the watch counts against (`server.max_watches_per_client`).
        client: String,
        form: Form,
        /// How its Tables are printed (for the whole watch, as kube's storage does).
        printer: TablePrinter,
        /// For a consistent watch-list: the state its initial events are proven at, or the
        /// error it ends with at once (its freshness could not be proven).
        initial: Option<Result<Snapshot, kube_wire::status::Status>>,
    },
    /// A LIST the cache answers, from `from`.
    List {
        cache: Arc<ResourceCache>,
        /// The state the request's resourceVersion rules ask for, and how the page is cut.
        from: list::ListFrom,
        /// The path's namespace, if any.
        namespace: Option<String>,
        opts: ListOptions,
        filter: Filter,
        form: Form,
        printer: TablePrinter,
    },
    /// A GET of one object the cache answers, from `snap`.
    Get {
        cache: Arc<ResourceCache>,
        snap: Snapshot,
        namespace: Option<String>,
        name: String,
        form: Form,
        printer: TablePrinter,
    },
    /// Anything else: the upstream answers.
    PassThrough(PassReason),
}

impl Route {
    /// The cache that answers, if it does.
    fn cache(&self) -> Option<&Arc<ResourceCache>> {
        match self {
            Route::Watch { cache, .. } | Route::List { cache, .. } | Route::Get { cache, .. } => {
                Some(cache)
            }
            Route::PassThrough(_) => None,
        }
    }
}

/// The three kinds of read the cache serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    List,
    Get,
    Watch,
}

fn url_len<B>(req: &Request<B>) -> usize {
    req.uri().path_and_query().map_or(0, |p| p.as_str().len())
}

/// The cached kind a request reads, if any: a GET of a resource path (no subresource, a URL
/// within `server.max_url_bytes`) of a kind cached now or, in on-demand mode, started by this
/// read (answered by kube's rules for a cache not ready until it has synced: [`until_ready`]).
/// Looked up once per request.
fn cached_read(app: &Arc<App>, req: &Request<ReqBody>) -> Option<(ResourcePath, Arc<CacheSlot>)> {
    if req.method() != Method::GET
        || limits::check_url_length(url_len(req), app.max_url_bytes).is_err()
    {
        return None;
    }
    let ApiPath::Resource(rp) = path::parse(req.uri().path()) else {
        return None;
    };
    if rp.subresource.is_some() {
        return None;
    }
    let slot = app.slot_for_read(&rp.group, &rp.version, &rp.resource)?;
    Some((rp, slot))
}

async fn route(
    app: &App,
    req: &Request<ReqBody>,
    rp: ResourcePath,
    slot: Arc<CacheSlot>,
) -> Result<Route, RouteError> {
    // kube's `WithRequestDeadline` filter reads the `timeout` of a request that is not a watch
    // before anything else (routing, authentication): a malformed one is its 400.
    if !(rp.legacy_watch || kube_wire::options::is_watch_query(req.uri().query())) {
        kube_wire::options::request_timeout(req.uri().query())?;
    }
    let query = req.uri().query();
    let watch = rp.legacy_watch || kube_wire::options::is_watch_query(query);
    let read = match (&rp.name, watch) {
        (_, true) => Read::Watch,
        (None, false) => Read::List,
        (Some(_), false) => Read::Get,
    };
    // A watch of one object by its path (`/pods/NAME?watch=1`, not the legacy `/watch/` form)
    // still goes to the upstream.
    if read == Read::Watch && rp.name.is_some() && !rp.legacy_watch {
        return Ok(Route::PassThrough(PassReason::NotCached));
    }
    // The wire form (JSON, Table, PartialObjectMetadata) the cache answers in, if any.
    let accept = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let target = if read == Read::List {
        Target::List
    } else {
        Target::Object
    };
    let builtin = kube_wire::selector::selectable::is_builtin_group(&rp.group);
    let Some(form) = form::negotiate(accept, query, target, builtin, watch) else {
        return Ok(Route::PassThrough(PassReason::Representation));
    };
    // The options as kube's handler decodes them (a GET reads only its resourceVersion); what
    // they refuse is answered after authorization, as kube's handler runs after its filters.
    let decoded = match read {
        Read::Get => Ok(ListOptions::from_get_query(query)),
        Read::List | Read::Watch => ListOptions::from_query(query),
    };
    // The cache will answer: with `server.authz = "delegated"`, authenticate and authorize now,
    // before anything (not even a validation error) is answered from it. Pass-through requests
    // are authorized by the upstream, with the client's own credentials.
    let mut client = None;
    if let Some(authz) = &app.authz {
        let attrs = kube_wire::access::Attributes {
            verb: match read {
                Read::Watch => "watch",
                Read::List => "list",
                Read::Get => "get",
            }
            .to_string(),
            group: rp.group.clone(),
            version: rp.version.clone(),
            resource: rp.resource.clone(),
            subresource: String::new(),
            namespace: rp.namespace.clone().unwrap_or_default(),
            // kube's request info names a collection read by its field selector's
            // `metadata.name`, when the options decode.
            name: rp.name.clone().unwrap_or_else(|| {
                decoded
                    .as_ref()
                    .ok()
                    .and_then(|o| kube_wire::access::name_from_field_selector(&o.field_selector))
                    .unwrap_or_default()
            }),
        };
        let peer = req.extensions().get::<crate::auth::PeerAuth>();
        let user = Box::pin(authz.authenticate(req.headers(), peer)).await?;
        client = Some(format!("user:{}", user.user));
        Box::pin(authz.authorize(user, &attrs)).await?;
    }
    // Whom a watch counts against (`server.max_watches_per_client`): the user authenticated
    // above, else a verified client certificate's user (one user's clients share a cap
    // wherever they connect from), else the client's address (behind a trusted balancer, the
    // one its PROXY header names: all clients would otherwise share the balancer's).
    let client = client
        .or_else(|| {
            let peer = req.extensions().get::<crate::auth::PeerAuth>()?;
            Some(format!("user:{}", peer.identity.as_ref()?.user))
        })
        .unwrap_or_else(|| match req.extensions().get::<limits::ClientAddr>() {
            Some(a) => format!("ip:{}", a.0),
            None => "ip:unknown".to_string(),
        });
    // Then kube's router: no route for a namespaced path of a cluster-scoped kind, nor for an
    // object of a namespaced kind outside a namespace (known once discovery answered;
    // otherwise checked below).
    if slot.get().is_some_and(|c| !rp.has_route(c.info.namespaced)) {
        return Err(RouteError::NoRoute);
    }
    // Then kube's `listOpts`: decoding (400: malformed numbers, then selectors that do not
    // parse), defaulting and validation (422); the kind's field labels come later, with the
    // kind. Its storage (the cacher) sees the request only after all of these.
    let mut opts = decoded?;
    opts.watch |= rp.legacy_watch;
    if read != Read::Get {
        if opts.watch {
            opts.apply_watch_list_defaults();
        }
        opts.validate()?;
    }
    let cache = match slot.get().filter(|c| c.is_synced()) {
        Some(c) => c,
        None => match Box::pin(until_ready(app, &slot, read, &opts)).await? {
            Ok(c) => c,
            Err(reason) => return Ok(Route::PassThrough(reason)),
        },
    };
    let info = &cache.info;
    if !rp.has_route(info.namespaced) {
        return Err(RouteError::NoRoute);
    }
    // How a Table is printed (a custom resource's: with its CRD's columns, once known).
    let Some(printer) = form::printer(&form, info, &app.crds) else {
        return Ok(Route::PassThrough(PassReason::Representation));
    };
    if read == Read::Get {
        let point = ReadPoint::for_get(&opts)?;
        if point == ReadPoint::Consistent {
            return Ok(Route::PassThrough(PassReason::ConsistentGet));
        }
        let snap = match Box::pin(resolve(
            &slot,
            &cache,
            point,
            app.cache_config.max_staleness,
        ))
        .await?
        {
            Ok(s) => s,
            Err(reason) => return Ok(Route::PassThrough(reason)),
        };
        return Ok(Route::Get {
            cache,
            snap,
            namespace: rp.namespace,
            name: rp.name.unwrap_or_default(),
            form,
            printer,
        });
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
    };
    let mut filter = parse(&opts)?;
    // The rest of kube's `listOpts` order: field label conversion (400), then the rule folding
    // a legacy `/watch/…/{name}` path's name into `metadata.name` (400 on mismatch).
    if let Some(name) = &rp.name {
        opts.fold_name(name)?;
        filter = parse(&opts)?;
    }
    // Then kube's registry parses `shardSelector` (its gate on: watchmux serves it whatever the
    // upstream's version), before its storage sees the request.
    let filter = filter.with_shard(super::shards::requested(query)?);
    if read == Read::Watch {
        // Then kube's watch cache parses the resourceVersion: its 500 when it cannot.
        let from = opts.cacher_rv()?;
        // A watch from before an on-demand kind's cache began (its LIST passed through while
        // the cache was starting): the upstream knows what happened since, the cache does not.
        if slot.on_demand()
            && opts.send_initial_events != Some(true)
            && let Some(n) = from.filter(|n| *n > 0)
            && cache.first_rv().is_some_and(|first| n < first)
            && cache.check_watch_start(n).is_err()
        {
            return Ok(Route::PassThrough(PassReason::BeforeCache));
        }
        // Only a watch that sends initial events reads a state; one from a resourceVersion
        // replays the log (or waits for the future), as kube's cacher does.
        let mut initial = None;
        if opts.send_initial_events != Some(true) {
            check_staleness(&cache, app.cache_config.max_staleness)?;
        } else {
            let point = ReadPoint::for_watch_list(&opts)?;
            match Box::pin(resolve(
                &slot,
                &cache,
                point,
                app.cache_config.max_staleness,
            ))
            .await?
            {
                // The initial events are this state's; the watch goes on from its
                // resourceVersion.
                Ok(snap) => {
                    opts.resource_version = Some(snap.rv.to_string());
                    initial = Some(Ok(snap));
                }
                // kube's cacher has no storage to hand a watch to: a watch-list it cannot
                // prove fresh within 3 s gets its ERROR event (504, retry after 1 s), which
                // client-go answers with a LIST and a watch from its resourceVersion. Passed
                // upstream, each such watch would hold an upstream watch (and connection) for
                // its whole life: at a fleet's cold start, thousands, until the descriptors
                // ran out and the checks themselves failed.
                Err(PassReason::NotFresh) => {
                    let seen = slot.freshness().and_then(|f| f.upstream_rv_seen());
                    let current = cache.rv();
                    initial = Some(Err(kube_wire::status::Status::too_large_resource_version(
                        seen.unwrap_or(0).max(current + 1),
                        current,
                    )));
                }
                Err(reason) => return Ok(Route::PassThrough(reason)),
            }
        }
        return Ok(Route::Watch {
            cache,
            opts,
            filter,
            client,
            form,
            printer,
            initial,
        });
    }
    let point = ReadPoint::for_list(&opts)?;
    let snap = match Box::pin(resolve(
        &slot,
        &cache,
        point.clone(),
        app.cache_config.max_staleness,
    ))
    .await?
    {
        Ok(s) => s,
        Err(reason) => return Ok(Route::PassThrough(reason)),
    };
    Ok(Route::List {
        cache,
        from: list::ListFrom::new(&point, snap),
        namespace: rp.namespace,
        opts,
        filter,
        form,
        printer,
    })
}

/// A read of a kind whose cache is not ready (not synced yet; before discovery answered, the
/// kind is not even known), as kube 1.34's cacher answers it (KEP-4568,
/// `ResilientWatchCacheInitialization`): a GET, and a LIST with a `limit` and no selector, go
/// to the storage at once (here: the upstream); every other LIST and every WATCH gets 429
/// `storage is (re)initializing`, its `Retry-After` growing with the time the cache has not
/// been ready. Consistent reads and `resourceVersion=0` follow the same rule (kube's delegator
/// hands neither to etcd before it asks the cacher). Unlike kube's cacher, which answers at
/// once, such a read first waits up to `cache.not_ready_wait_ms` and is served from the cache
/// if it syncs meanwhile: an on-demand kind's first read is what starts its cache. A reflector
/// that is failing is not waited for.
///
/// One exception: an on-demand kind whose reflector the upstream refuses (401, 403: watchmux's
/// identity may not list it) passes every read through, with the client's own credentials,
/// rather than answer 429 for as long as the refusal lasts.
async fn until_ready(
    app: &App,
    slot: &CacheSlot,
    read: Read,
    opts: &ListOptions,
) -> Result<Result<Arc<ResourceCache>, PassReason>, RouteError> {
    // kube's storage parses a watch's resourceVersion (a LIST's too, and its continue token)
    // before its cacher looks at its readiness; a GET's only once it is ready.
    match read {
        Read::Watch => {
            opts.cacher_rv()?;
        }
        Read::List => {
            ReadPoint::for_list(opts)?;
        }
        Read::Get => {}
    }
    let delegated = match read {
        Read::Get => true,
        Read::List => {
            opts.limit > 0 && opts.label_selector.is_empty() && opts.field_selector.is_empty()
        }
        Read::Watch => false,
    };
    if delegated || (slot.on_demand() && slot.refused()) {
        return Ok(Err(PassReason::NotReady));
    }
    let wait = if slot.failing() {
        Duration::ZERO
    } else {
        app.cache_config.not_ready_wait
    };
    match slot.synced(wait).await {
        Some(cache) => Ok(Ok(cache)),
        None => Err(RouteError::NotReady {
            downtime: slot.not_ready_for(),
        }),
    }
}

/// The snapshot a read at `point` is served from, or why the upstream must answer it instead.
/// Waits at most kube's 3 s ([`list::BLOCK_TIMEOUT`]) for the cache to catch up.
async fn resolve(
    slot: &CacheSlot,
    cache: &ResourceCache,
    point: ReadPoint,
    max_staleness: Option<Duration>,
) -> Result<Result<Snapshot, PassReason>, RouteError> {
    // Only a consistent read proves the cache current; every other one takes it as it is,
    // within the staleness bound.
    let consistent_read = matches!(point, ReadPoint::Consistent)
        || matches!(&point, ReadPoint::Continue(t) if t.rv < 0);
    if !consistent_read {
        check_staleness(cache, max_staleness)?;
    }
    Ok(match point {
        ReadPoint::Any => Ok(cache.snapshot()),
        // The cache learns the upstream's progress only from events and bookmarks, so an RV it
        // has not reached may well exist upstream, where kube's cache would catch up at once
        // (spec §3.5, §3.11). After kube's 3 s wait, the upstream answers: that RV's state, or
        // its own 504.
        ReadPoint::NotOlderThan(n) => {
            if n <= cache.rv() || cache.wait_rv(n, list::BLOCK_TIMEOUT).await {
                Ok(cache.snapshot())
            } else {
                Err(PassReason::ResourceVersionAhead)
            }
        }
        ReadPoint::Consistent => consistent(slot).await,
        // kube 1.34+ (ListFromCacheSnapshot): the state at exactly N, or the rest of a paged
        // list, from the cache's snapshots while it has them (spec §1.5 L9–L11); otherwise the
        // upstream serves it, or answers 410 Expired (with a new token for a continuation).
        ReadPoint::Exact(n) => exactly(cache, n).await,
        ReadPoint::Continue(t) => match u64::try_from(t.rv) {
            Ok(n) => exactly(cache, n).await,
            // rv −1, kube's "inconsistent continuation" after a 410: the rest of the list from
            // the token's key, at the latest state (L12).
            Err(_) => consistent(slot).await,
        },
    })
}

/// A consistent read: the snapshot the freshness check proved to hold every write the upstream
/// acknowledged before now (not a later one: see `reflector::freshness`).
async fn consistent(slot: &CacheSlot) -> Result<Snapshot, PassReason> {
    match slot.freshness() {
        Some(f) => f
            .ensure_fresh(list::BLOCK_TIMEOUT)
            .await
            .map_err(|_| PassReason::NotFresh),
        None => Err(PassReason::NotFresh),
    }
}

/// The state at exactly `n`: a snapshot kept for a paged list at `n`, else the state rebuilt
/// from the event log while it reaches back to `n`. An `n` the cache has not reached yet is
/// waited for as a not-older-than read is (then the upstream answers, or gives its 504).
async fn exactly(cache: &ResourceCache, n: u64) -> Result<Snapshot, PassReason> {
    if let Some(s) = cache.retained_snapshot(n) {
        return Ok(s);
    }
    if n > cache.rv() && !cache.wait_rv(n, list::BLOCK_TIMEOUT).await {
        return Err(PassReason::ResourceVersionAhead);
    }
    cache.snapshot_at(n).ok_or(PassReason::OutsideWindow)
}

#[cfg(test)]
mod tests {
    /// What a request holds while it waits (for its access review, a cache to sync, a
    /// freshness proof) is the router's future: at a 5,000-node cold start about 437,000 watch
    /// starts wait at once. Before the router boxed each long wait and the pass-through, the
    /// future was 66 KB (a debug build; 29 KB per request in a release build's heap profile),
    /// and watchmux ran out of 24 GB before the fleet had synced.
    #[test]
    fn a_waiting_request_holds_a_small_future() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_runtime = rt.enter();
        let up = crate::upstream::Upstream::new(&crate::config::UpstreamConfig {
            url: Some("http://127.0.0.1:1".parse().unwrap()),
            ..Default::default()
        })
        .unwrap();
        let app = crate::app::App::start(&crate::config::Config::default(), up);
        let fut = super::handle(app.clone(), http::Request::new(super::ReqBody::Empty));
        let size = std::mem::size_of_val(&fut);
        assert!(size <= 8 * 1024, "the request future is {size} bytes");
        // A lookup that waits for another's review holds its own review unsent.
        let authz = crate::downstream::authz::Authorizer::new(
            app.upstream.clone(),
            &crate::config::ServerConfig::default(),
            app.metrics.authz(),
        );
        let attrs = kube_wire::access::Attributes::default();
        let fut = authz.authorize(kube_wire::access::UserInfo::anonymous(), &attrs);
        let size = std::mem::size_of_val(&fut);
        assert!(
            size <= 8 * 1024,
            "an access lookup's future is {size} bytes"
        );
    }
}
