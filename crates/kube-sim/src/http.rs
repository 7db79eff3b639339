//! The simulator's HTTP front: routing by the kube path grammar, the read verbs (get, list),
//! the write verbs (through [`Ops`](super::ops::Ops), or its dry run for `dryRun=All`, which
//! `dry_run` reads), discovery, authentication and authorization when a policy is set,
//! injected faults, and the `/sim/` control endpoints.
//!
//! Every answer carrying objects (GET, LIST, WATCH, and the writes' answers) is in the
//! negotiated representation and encoding, JSON or protobuf ([`super::protobuf`] builds the
//! protobuf bodies); request bodies are read in the encoding their `Content-Type` names. An
//! error's Status goes out in one place ([`handle`]), in the encoding kube writes errors in for
//! the request's `Accept` (injected faults and the bearer-token 401 stay JSON).
//!
//! It decides no write semantics (`ops` and `semantics` do) and streams no watch itself
//! ([`super::watch`] does). The `/sim/` endpoints skip the bearer token, the policy and injected
//! errors, so a test can always reach them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH, VARY};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::SimState;
use super::kinds::ResourceType;
use super::patch::PatchType;
use super::protobuf::{self, Input};
use super::semantics::{DeleteOptions, UpdateScope, delete_success_status, returns_deleted_object};
use super::store::{ListPage, ReadError, StoredObject};
use super::util::now_unix;
use super::watch;
use kube_wire::continue_token::ContinueToken;
use kube_wire::negotiate::{Encoding, Negotiated, Repr, Target};
use kube_wire::options::{ListOptions, RvMatch};
use kube_wire::path::{self, ApiPath, ResourcePath};
use kube_wire::shard::ShardSelector;
use kube_wire::status::Status;
use kube_wire::table::{self, IncludeObject};

pub use kube_wire::response::{Body, full, json_response, status_response};

mod dry_run;
mod scale;

/// Largest request body accepted (kube-apiserver's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;
/// How long a read waits for a future resourceVersion before 504 (kube's `blockTimeout`).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(3);

/// Marker error that makes the connection abort (refused connections).
#[derive(Debug, thiserror::Error)]
#[error("connection refused by fault injection")]
pub struct Refused;

/// Entry point for every request.
pub async fn handle(
    state: Arc<SimState>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Refused> {
    state.stats.requests.fetch_add(1, Ordering::Relaxed);
    if state.faults.refusing() {
        return Err(Refused);
    }
    let p = req.uri().path().to_string();
    if let Some(rest) = p.strip_prefix("/sim/") {
        return Ok(admin(&state, rest, req).await);
    }
    // kube's `WithRequestDeadline` filter reads the `timeout` of every request that is not
    // long-running before anything else (even authentication): a malformed one is its 400.
    if !long_running(&req)
        && let Err(s) = kube_wire::options::request_timeout(req.uri().query())
    {
        return Ok(status_response(&s));
    }
    // TLS mode with a required bearer token: kube's 401 without it.
    if let Some(denied) = state.auth.check(&req) {
        return Ok(denied);
    }
    let delay = state.faults.delay();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(f) = state.faults.take_error(&p) {
        let s = match f.code {
            429 => Status::too_many_requests(
                "the server has received too many requests and has asked us to try again later",
                f.retry_after.max(1),
            ),
            500 => Status::internal("injected failure"),
            c => Status::new(c, "", "injected failure"),
        };
        return Ok(status_response(&s));
    }
    // What kube-apiserver's filters add to every answer: an `Audit-Id`, and indentation for
    // `?pretty=true` and curl (never for a watch stream).
    let audit_id = kube_wire::response::audit_id(
        req.headers().get(kube_wire::response::AUDIT_ID),
        rand::random(),
    );
    let watching = matches!(path::parse(req.uri().path()), ApiPath::Resource(rp) if rp.legacy_watch)
        || ListOptions::from_query(req.uri().query()).is_ok_and(|o| o.watch);
    let pretty = !watching && kube_wire::response::wants_pretty(req.uri().query(), req.headers());
    let accept = header(&req, http::header::ACCEPT);
    let mut resp = match authorized_route(&state, req).await {
        Ok(r) => r,
        Err(s) => protobuf::error_response(accept.as_deref(), &s),
    };
    resp.headers_mut()
        .insert(kube_wire::response::AUDIT_ID, audit_id);
    // kube pretty-prints JSON only (protobuf has no pretty serializer).
    let json = resp
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if pretty && json && resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        resp = kube_wire::response::pretty_printed(resp).await;
    }
    Ok(resp)
}

/// kube's long-running requests (`BasicLongRunningRequestCheck`): watches (a collection GET
/// with a true `watch`, or a legacy `/watch/` path) and the streaming subresources. Their
/// `timeout` is never read.
fn long_running<B>(req: &Request<B>) -> bool {
    match path::parse(req.uri().path()) {
        ApiPath::Resource(rp) => {
            rp.legacy_watch
                || (rp.name.is_none() && kube_wire::options::is_watch_query(req.uri().query()))
                || rp.subresource.as_deref().is_some_and(|s| {
                    matches!(s, "attach" | "exec" | "proxy" | "log" | "portforward")
                })
        }
        _ => false,
    }
}

/// The review endpoints, and the policy (if set) before [`route`] (see [`super::authz`]).
async fn authorized_route(
    state: &Arc<SimState>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let p = req.uri().path();
    if req.method() == Method::POST
        && (p == super::authz::TOKEN_REVIEWS || p == super::authz::ACCESS_REVIEWS)
    {
        let token = p == super::authz::TOKEN_REVIEWS;
        let headers = req.headers().clone();
        let body = read_body(req).await?;
        return if token {
            super::authz::token_review(state, &headers, &body)
        } else {
            super::authz::access_review(state, &headers, &body)
        };
    }
    if let Some(policy) = state.policy() {
        let user = policy.authenticate(req.headers())?;
        if let ApiPath::Resource(rp) = path::parse(req.uri().path()) {
            let a = super::authz::attributes(req.method(), &rp, req.uri().query());
            policy.authorize(&user, &a)?;
        }
    }
    route(state, req).await
}

async fn route(state: &Arc<SimState>, req: Request<Incoming>) -> Result<Response<Body>, Status> {
    let reg = &state.registry;
    let get_only = |doc: Option<Value>| -> Result<Response<Body>, Status> {
        if req.method() != Method::GET {
            return Err(Status::method_not_allowed());
        }
        let doc = doc.ok_or_else(Status::path_not_found)?;
        Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&doc).expect("json"),
        ))
    };
    let aggregated = super::discovery::aggregated::requested(header(&req, ACCEPT).as_deref());
    match path::parse(req.uri().path()) {
        ApiPath::CoreRoot if aggregated => aggregated_discovery(&req, reg, true),
        ApiPath::GroupsRoot if aggregated => aggregated_discovery(&req, reg, false),
        ApiPath::Version => get_only(Some(super::discovery::version())),
        ApiPath::CoreRoot => get_only(Some(super::discovery::core_versions(
            &state.addr.to_string(),
        ))),
        ApiPath::GroupsRoot => get_only(Some(super::discovery::group_list(reg))),
        ApiPath::Group(g) => get_only(super::discovery::group(reg, &g)),
        ApiPath::GroupVersion { group, version } => {
            get_only(super::discovery::resource_list(reg, &group, &version))
        }
        ApiPath::Resource(rp) => resource(state, rp, req).await,
        ApiPath::Other => match req.uri().path() {
            "/openapi/v3" => get_only(Some(super::discovery::openapi_v3_root(reg))),
            p if p.starts_with("/openapi/v3/") => {
                let rest = &p["/openapi/v3/".len()..];
                let doc = match rest.split('/').collect::<Vec<_>>().as_slice() {
                    ["api", v] => super::discovery::openapi_v3_group_version(reg, "", v),
                    ["apis", g, v] => super::discovery::openapi_v3_group_version(reg, g, v),
                    _ => None,
                };
                get_only(doc)
            }
            "/healthz" | "/livez" | "/readyz" => {
                let mut r = Response::new(full("ok"));
                r.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                Ok(r)
            }
            _ => Err(Status::path_not_found()),
        },
    }
}

/// `/api` or `/apis` (`core`: `/api`) as an `APIGroupDiscoveryList`, with kube's `ETag`,
/// `Vary` and `Cache-Control`; 304 when `If-None-Match` names the current `ETag`.
fn aggregated_discovery<B>(
    req: &Request<B>,
    reg: &super::kinds::Registry,
    core: bool,
) -> Result<Response<Body>, Status> {
    use super::discovery::aggregated;
    if req.method() != Method::GET {
        return Err(Status::method_not_allowed());
    }
    let body = serde_json::to_vec(&aggregated::document(reg, core)).expect("json");
    let etag = aggregated::etag(&body);
    let mut resp = if header(req, IF_NONE_MATCH).as_deref() == Some(etag.as_str()) {
        let mut r = Response::new(full(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = json_response(StatusCode::OK, body);
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static(aggregated::MEDIA_TYPE),
        );
        r
    };
    let h = resp.headers_mut();
    h.insert(ETAG, HeaderValue::from_str(&etag).expect("ascii"));
    h.insert(VARY, HeaderValue::from_static("Accept"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("public"));
    Ok(resp)
}

/// A request header as text (absent when missing or not visible ASCII).
fn header<B>(req: &Request<B>, name: http::header::HeaderName) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// An object from a create or update body: JSON (or YAML given as JSON), or protobuf for a
/// kind with a protobuf form, after kube's `Content-Type` check (415).
fn object_body(rt: &ResourceType, input: Input, body: &[u8]) -> Result<Value, Status> {
    match input {
        Input::Json => super::semantics::parse_body(rt, body),
        Input::Protobuf => protobuf::decode_object(rt, body),
    }
}

/// A request body, read as kube's `limitedReadBody` does: at most `MAX_BODY` bytes (exactly
/// that many is fine), else its 413 `Request entity too large: limit is 3145728`. A
/// `Content-Length` over the limit is refused before anything is read; a body without one is
/// cut off as soon as it goes over, so nothing beyond the limit is ever held.
async fn read_body(req: Request<Incoming>) -> Result<Bytes, Status> {
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(Status::request_entity_too_large(format!(
                "Request entity too large: limit is {MAX_BODY}"
            )))
        }
        Err(e) => Err(Status::bad_request(format!(
            "unable to read request body: {e}"
        ))),
    }
}

/// The selectors of a request, matched against stored objects: the label and field selectors
/// (the shared [`kube_wire::selector::Filter`]) and, ANDed with them, the shard selector.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Namespace, label and field selectors.
    pub selectors: kube_wire::selector::Filter,
    /// The `shardSelector`, when the `ShardedListAndWatch` gate is on and one was sent.
    pub shard: Option<ShardSelector>,
}

impl std::ops::Deref for Filter {
    type Target = kube_wire::selector::Filter;

    fn deref(&self) -> &Self::Target {
        &self.selectors
    }
}

impl Filter {
    /// Parses and validates selectors as kube-apiserver does (400 on errors).
    pub fn new(
        rt: &ResourceType,
        namespace: Option<String>,
        opts: &ListOptions,
    ) -> Result<Filter, Status> {
        kube_wire::selector::Filter::parse(
            &rt.group,
            &rt.kind,
            rt.namespaced,
            &rt.selectable_fields,
            namespace,
            &opts.label_selector,
            &opts.field_selector,
        )
        .map(|selectors| Filter {
            selectors,
            shard: None,
        })
        .map_err(|e| Status::bad_request(e.to_string()))
    }

    /// Adds the request's `shardSelector`, as kube 1.36's registry does (`Store.ListPredicate`,
    /// `Store.Watch`), after the handler's checks: only with the gate (`sharded`) on and a
    /// non-empty value; one that does not parse is a plain error there, which kube answers as
    /// 500 with no reason, `invalid shard selector: …`.
    pub fn sharded(mut self, sharded: bool, opts: &ListOptions) -> Result<Filter, Status> {
        if let (true, Some(s)) = (sharded, &opts.shard_selector) {
            let shard = ShardSelector::parse(s).map_err(|e| Status::new(500, "", e.to_string()))?;
            self.shard = Some(shard);
        }
        Ok(self)
    }

    /// Whether a stored object passes (a cluster-scoped object's namespace is "").
    pub fn matches(&self, o: &StoredObject) -> bool {
        self.shard
            .as_ref()
            .is_none_or(|s| s.matches(&o.uid, &o.namespace))
            && self
                .selectors
                .matches(&o.namespace, &o.labels, |f| o.field(f))
    }

    /// Whether a paged LIST reports `remainingItemCount`: only without any selector. A shard
    /// selector counts as one, as in kube 1.37 (`SelectionPredicate.Empty` made aware of
    /// sharding); 1.36 reported the unfiltered count for a shard-only LIST, a bug.
    pub fn counts_remaining(&self) -> bool {
        self.no_selectors() && self.shard.is_none()
    }
}

async fn resource(
    state: &Arc<SimState>,
    rp: ResourcePath,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let rt = state
        .registry
        .get(&rp.group, &rp.version, &rp.resource)
        .ok_or_else(Status::path_not_found)?;
    if !rp.has_route(rt.namespaced) {
        return Err(Status::path_not_found());
    }
    if rt.group.is_empty()
        && rt.resource == "pods"
        && rp.name.is_some()
        && rp
            .subresource
            .as_deref()
            .is_some_and(|s| super::exec::STREAMING.contains(&s))
    {
        state.ops.get(
            &rt,
            rp.namespace.as_deref(),
            rp.name.as_deref().unwrap_or_default(),
        )?;
        return super::exec::serve(req, &state.tasks);
    }
    let scope = match rp.subresource.as_deref() {
        None => UpdateScope::Main,
        Some("status") if rt.status_subresource => UpdateScope::Status,
        Some("approval") if rt.approval_subresource => UpdateScope::Approval,
        Some("scale") if rt.scale_subresource => return scale::serve(state, &rt, &rp, req).await,
        Some(_) => return Err(Status::path_not_found()),
    };
    let method = req.method().clone();
    let stats = state.stats.resource(rt.index);
    let sharded = state.config.sharded_list_and_watch;
    let ns = rp.namespace.clone();
    let is_collection = rp.name.is_none();
    if rp.legacy_watch && method != Method::GET {
        return Err(Status::method_not_allowed());
    }
    if is_collection && rt.namespaced && ns.is_none() && method != Method::GET {
        return Err(Status::method_not_allowed());
    }
    let accept = header(&req, http::header::ACCEPT);
    let accept = accept.as_deref();
    let content_type = header(&req, CONTENT_TYPE);
    let query = req.uri().query().map(str::to_string);
    // Every answer carrying objects is in the negotiated representation and encoding; kube
    // negotiates before it reads a body.
    let negotiate = |target, watch| {
        protobuf::negotiate(accept, target, &rt.kind, protobuf::endpoint(&rt, watch))
    };
    // Before kube's handler negotiates, go-restful chooses the route, and takes an `Accept`
    // header only if some clause names exactly a type the route produces, or `*/*`: for a
    // built-in kind `application/*` is its 406. (A custom resource's handler is not a go-restful
    // route: it negotiates the header itself.)
    if rt.builtin {
        let routed = match (&method, &rp.name) {
            (&Method::GET, _) | (&Method::POST, None) | (&Method::DELETE, None) => true,
            (&Method::PUT, Some(_)) | (&Method::PATCH, Some(_)) => true,
            (&Method::DELETE, Some(_)) => scope == UpdateScope::Main,
            _ => false,
        };
        if routed {
            let collection_read = method == Method::GET && (is_collection || rp.legacy_watch);
            let bodiless = matches!(method, Method::POST | Method::PUT | Method::PATCH)
                && header(&req, http::header::CONTENT_LENGTH).is_none_or(|l| l == "0");
            kube_wire::negotiate::route_accept(
                accept,
                kube_wire::negotiate::route_produces(collection_read),
                bodiless,
            )?;
        }
    }
    match (method, rp.name.clone()) {
        // kube's handler negotiates first (406), then decodes the options (400: numbers, then
        // selectors), validates them (422), then converts field labels (400).
        (Method::GET, None) => {
            let watching = rp.legacy_watch || kube_wire::options::is_watch_query(query.as_deref());
            let wire = negotiate(
                if watching {
                    Target::Object
                } else {
                    Target::List
                },
                watching,
            )?;
            let mut opts = ListOptions::from_query(query.as_deref())?;
            opts.watch |= rp.legacy_watch;
            if opts.watch {
                opts.apply_watch_list_defaults();
                opts.validate()?;
                let filter = Filter::new(&rt, ns, &opts)?.sharded(sharded, &opts)?;
                let sink = watch::Sink::of(&mut req);
                return watch::serve(
                    state.clone(),
                    rt,
                    opts,
                    filter,
                    wire,
                    query.as_deref(),
                    sink,
                )
                .await;
            }
            stats.list_requests.fetch_add(1, Ordering::Relaxed);
            opts.validate()?;
            let filter = Filter::new(&rt, ns.clone(), &opts)?.sharded(sharded, &opts)?;
            list(
                state,
                &rt,
                ns.as_deref(),
                &opts,
                &filter,
                wire,
                query.as_deref(),
            )
            .await
        }
        (Method::GET, Some(name)) if rp.legacy_watch => {
            let wire = negotiate(Target::Object, true)?;
            let mut opts = ListOptions::from_query(query.as_deref())?;
            opts.watch = true;
            opts.apply_watch_list_defaults();
            opts.validate()?;
            // kube's order: validation (422), field label conversion (400), then the name rule.
            Filter::new(&rt, ns.clone(), &opts)?;
            opts.fold_name(&name)?;
            let filter = Filter::new(&rt, ns, &opts)?.sharded(sharded, &opts)?;
            let sink = watch::Sink::of(&mut req);
            watch::serve(
                state.clone(),
                rt,
                opts,
                filter,
                wire,
                query.as_deref(),
                sink,
            )
            .await
        }
        (Method::GET, Some(name)) => {
            stats.other_requests.fetch_add(1, Ordering::Relaxed);
            let wire = negotiate(Target::Object, false)?;
            let opts = ListOptions::from_get_query(query.as_deref());
            // kube's watch cache parses the resourceVersion of a GET: its 500 when it cannot.
            if let Some(rv) = opts.cacher_rv()?.filter(|r| *r > 0) {
                wait_for(state, rv).await?;
            }
            let obj = state.ops.get(&rt, ns.as_deref(), &name)?;
            let include = table_include(wire.repr, query.as_deref())?;
            Ok(object_response(
                state,
                &rt,
                &obj,
                wire,
                include,
                StatusCode::OK,
            ))
        }
        (Method::POST, None) => {
            stats.other_requests.fetch_add(1, Ordering::Relaxed);
            let wire = negotiate(Target::Object, false)?;
            let input = protobuf::input(content_type.as_deref())?;
            let body = read_body(req).await?;
            let ops = ops_for(state, dry_run::check(query.as_deref(), "CreateOptions")?);
            let v = object_body(&rt, input, &body)?;
            let obj = ops.create(&rt, ns.as_deref(), v, false)?;
            write_response(
                state,
                &rt,
                &obj,
                wire,
                query.as_deref(),
                StatusCode::CREATED,
            )
        }
        (Method::PUT, Some(name)) => {
            stats.other_requests.fetch_add(1, Ordering::Relaxed);
            let wire = negotiate(Target::Object, false)?;
            let input = protobuf::input(content_type.as_deref())?;
            let body = read_body(req).await?;
            let ops = ops_for(state, dry_run::check(query.as_deref(), "UpdateOptions")?);
            let v = object_body(&rt, input, &body)?;
            let obj = ops.update(&rt, ns.as_deref(), &name, v, scope)?;
            write_response(state, &rt, &obj, wire, query.as_deref(), StatusCode::OK)
        }
        (Method::PATCH, Some(name)) => {
            stats.other_requests.fetch_add(1, Ordering::Relaxed);
            let wire = negotiate(Target::Object, false)?;
            let ct = content_type.unwrap_or_default();
            let ty = PatchType::from_content_type(&ct).ok_or_else(|| {
                super::ops::patch_status(&super::patch::PatchError::unsupported_media_type(
                    rt.builtin,
                ))
            })?;
            let body = read_body(req).await?;
            let ops = ops_for(state, dry_run::check(query.as_deref(), "PatchOptions")?);
            let obj = ops.patch(&rt, ns.as_deref(), &name, ty, &body, scope)?;
            write_response(state, &rt, &obj, wire, query.as_deref(), StatusCode::OK)
        }
        (Method::DELETE, Some(name)) if scope == UpdateScope::Main => {
            stats.other_requests.fetch_add(1, Ordering::Relaxed);
            let wire = negotiate(Target::Object, false)?;
            let body = read_body(req).await?;
            let (opts, dry) = delete_options(query.as_deref(), content_type.as_deref(), &body)?;
            let r = ops_for(state, dry).delete(&rt, ns.as_deref(), &name, &opts)?;
            if r.deleted && !returns_deleted_object(&rt) {
                // A Status is answered as it is whatever the representation asked for.
                let s = delete_success_status(&rt, &r.object);
                return Ok(match wire.encoding {
                    Encoding::Protobuf => kube_wire::response::protobuf_response(
                        StatusCode::OK,
                        protobuf::success_status(&s)?,
                    ),
                    Encoding::Json | Encoding::Yaml => {
                        json_response(StatusCode::OK, serde_json::to_vec(&s).expect("json"))
                    }
                });
            }
            write_response(
                state,
                &rt,
                &r.object,
                wire,
                query.as_deref(),
                StatusCode::OK,
            )
        }
        (Method::DELETE, None) => {
            stats.other_requests.fetch_add(1, Ordering::Relaxed);
            let wire = negotiate(Target::List, false)?;
            let body = read_body(req).await?;
            let (dopts, dry) = delete_options(query.as_deref(), content_type.as_deref(), &body)?;
            let ops = ops_for(state, dry);
            let lopts = ListOptions::from_query(query.as_deref())?;
            // kube's DeleteCollection lists through the same registry: sharded too.
            let filter = Filter::new(&rt, ns.clone(), &lopts)?.sharded(sharded, &lopts)?;
            let page = state
                .store
                .list(
                    &rt,
                    ns.as_deref(),
                    None,
                    None,
                    0,
                    &|o| filter.matches(o),
                    false,
                )
                .map_err(|e| Status::internal(e.to_string()))?;
            let mut deleted = Vec::new();
            for o in &page.items {
                match ops.delete(&rt, Some(&o.namespace), &o.name, &dopts) {
                    Ok(r) => deleted.push(r.object),
                    Err(s) if s.code == 404 => {}
                    Err(s) => return Err(s),
                }
            }
            let page = ListPage {
                rev: state.store.revision(),
                items: deleted,
                last_key: None,
                remaining: None,
            };
            let include = table_include(wire.repr, query.as_deref())?;
            list_response(
                state,
                &rt,
                &page,
                None,
                wire,
                include,
                filter.shard.as_ref(),
            )
        }
        _ => Err(Status::method_not_allowed()),
    }
}

/// The answer of a write (create, update, patch, delete) carrying the object: as kube, in the
/// negotiated representation and encoding.
fn write_response(
    state: &SimState,
    rt: &ResourceType,
    obj: &StoredObject,
    wire: Negotiated,
    query: Option<&str>,
    code: StatusCode,
) -> Result<Response<Body>, Status> {
    let include = table_include(wire.repr, query)?;
    Ok(object_response(state, rt, obj, wire, include, code))
}

/// The verbs for a write: the simulator's, or their dry run (`dryRun=All`).
fn ops_for(state: &SimState, dry_run: bool) -> super::ops::Ops {
    if dry_run {
        state.ops.dry_run()
    } else {
        state.ops.clone()
    }
}

/// The options of a DELETE, read as kube's `DeleteResource` does: from a body when there is
/// one (JSON or protobuf `DeleteOptions`, the query then ignored), else from the query (the
/// first value of each parameter, every value of `dryRun`); then checked as kube's
/// `ValidateDeleteOptions` (422). Also whether the DELETE is a dry run.
fn delete_options(
    query: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<(DeleteOptions, bool), Status> {
    let mut o = DeleteOptions::default();
    let mut propagation: Option<String> = None;
    let mut orphan = false;
    let mut dry: Vec<String> = Vec::new();
    if !body.is_empty() {
        let v = match protobuf::input(content_type)? {
            Input::Json => {
                // The members as raw JSON: kube's decoder checks `gracePeriodSeconds`'s type.
                let raw: std::collections::HashMap<String, &serde_json::value::RawValue> =
                    serde_json::from_slice(body).map_err(|e| {
                        Status::bad_request(format!("error decoding DeleteOptions: {e}"))
                    })?;
                o.grace_period_seconds = raw
                    .get("gracePeriodSeconds")
                    .map(|r| r.get())
                    .filter(|r| *r != "null")
                    .map(|r| go_int64("DeleteOptions", "gracePeriodSeconds", r))
                    .transpose()?;
                serde_json::from_slice::<Value>(body).unwrap_or_default()
            }
            Input::Protobuf => {
                let v = protobuf::decode_delete_options(body)?;
                o.grace_period_seconds = v["gracePeriodSeconds"].as_i64();
                v
            }
        };
        o.precondition_uid = v["preconditions"]["uid"].as_str().map(str::to_string);
        o.precondition_rv = v["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string);
        propagation = v["propagationPolicy"].as_str().map(str::to_string);
        orphan = v["orphanDependents"].is_boolean();
        dry = dry_run::from_delete_options(&v)?;
    } else if let Some(q) = query {
        dry = dry_run::from_query(Some(q));
        let first = |name: &str| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        if let Some(v) = first("gracePeriodSeconds") {
            o.grace_period_seconds = Some(kube_wire::options::parse_int(&v)?);
        }
        propagation = first("propagationPolicy");
        orphan = first("orphanDependents").is_some();
    }
    let mut errs: Vec<(&str, &str, String)> = Vec::new();
    if let Some(p) = &propagation {
        let shown = String::from_utf8_lossy(&kube_wire::gofmt::escape_html(
            serde_json::to_vec(p).unwrap_or_default(),
        ))
        .into_owned();
        if orphan {
            errs.push((
                "FieldValueInvalid",
                "propagationPolicy",
                format!(
                    "Invalid value: {shown}: orphanDependents and deletionPropagation cannot be both set"
                ),
            ));
        }
        if !matches!(p.as_str(), "Foreground" | "Background" | "Orphan") {
            errs.push((
                "FieldValueNotSupported",
                "propagationPolicy",
                format!(
                    "Unsupported value: {shown}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                ),
            ));
        }
    }
    errs.extend(dry_run::cause(&dry));
    if !errs.is_empty() {
        return Err(Status::invalid("meta.k8s.io", "DeleteOptions", "", &errs));
    }
    Ok((o, !dry.is_empty()))
}

/// A JSON member kube decodes into an `int64` field (`*int64`; `null` was already taken as
/// absent): an integer literal that fits, else Go's `UnmarshalTypeError` text as kube's 400
/// (`1.5`, `1e3` and numbers beyond 2^63 are not int64s; nor are strings, bools, arrays or
/// objects).
fn go_int64(kind: &str, field: &str, raw: &str) -> Result<i64, Status> {
    let what = match raw.as_bytes().first() {
        Some(b'"') => "string".to_string(),
        Some(b't' | b'f') => "bool".to_string(),
        Some(b'{') => "object".to_string(),
        Some(b'[') => "array".to_string(),
        _ => match raw.parse::<i64>() {
            Ok(n) => return Ok(n),
            Err(_) => format!("number {raw}"),
        },
    };
    Err(Status::bad_request(format!(
        "json: cannot unmarshal {what} into Go struct field {kind}.{field} of type int64"
    )))
}

/// Waits until the store reaches `rv`, up to kube's 3 s, else 504 Too large resource version.
async fn wait_for(state: &SimState, rv: u64) -> Result<(), Status> {
    if state.store.wait_for_revision(rv, BLOCK_TIMEOUT).await {
        Ok(())
    } else {
        Err(Status::too_large_resource_version(
            rv,
            state.store.revision(),
        ))
    }
}

/// The `includeObject` of a Table answer: kube reads and validates it only when answering with a
/// Table, after the read itself succeeded (its 400 comes after a 404 or 410).
pub(crate) fn table_include(repr: Repr, query: Option<&str>) -> Result<IncludeObject, Status> {
    if repr == Repr::Table {
        IncludeObject::from_query(query)
    } else {
        Ok(IncludeObject::default())
    }
}

fn object_response(
    state: &SimState,
    rt: &ResourceType,
    obj: &StoredObject,
    wire: Negotiated,
    include: IncludeObject,
    code: StatusCode,
) -> Response<Body> {
    if wire.encoding == Encoding::Protobuf {
        return match protobuf::object(rt, obj, wire.repr) {
            Ok(body) => {
                state.stats.sent(Some(rt.index), body.len());
                kube_wire::response::protobuf_response(code, body)
            }
            Err(s) => kube_wire::response::protobuf_status_response(&s),
        };
    }
    let body: Bytes = match wire.repr {
        Repr::Json => obj.full_bytes(rt),
        Repr::Table => Bytes::from(table::to_go_json(&state.table_printer(rt).object_table(
            &rt.group,
            &rt.kind,
            &obj.to_value(rt),
            include,
            false,
            now_unix(),
        ))),
        Repr::Metadata => Bytes::from(table::to_go_json(&table::partial_object_metadata(
            &obj.to_value(rt),
        ))),
    };
    state.stats.sent(Some(rt.index), body.len());
    json_response(code, body)
}

/// LIST, with kube-apiserver 1.34's resourceVersion / limit / continue semantics (spec §1.5).
async fn list(
    state: &SimState,
    rt: &ResourceType,
    ns: Option<&str>,
    opts: &ListOptions,
    filter: &Filter,
    wire: Negotiated,
    query: Option<&str>,
) -> Result<Response<Body>, Status> {
    // kube's `storage.ValidateListOptions`: with `continue`, the token is decoded first and any
    // RV other than ""/"0" is refused without being parsed.
    let rv = if opts.continue_token.is_some() {
        None
    } else {
        opts.rv()?
    };
    let prefix = match ns {
        Some(n) if rt.namespaced => format!("{n}/"),
        _ => String::new(),
    };
    let mut limit = opts.limit.max(0) as usize;
    let mut at = None;
    let mut start = None;
    if let Some(t) = opts.continuation()? {
        // kube's watch cache serves a continuation from its snapshot at the token's revision
        // (or, rv −1, at the latest state) and, as for every LIST with `resourceVersion=0`,
        // ignores the limit (`computeListLimit`): the rest comes whole. A compacted revision has
        // no snapshot and goes to etcd, whose 410 follows.
        if opts.resource_version.as_deref() == Some("0") {
            limit = 0;
        }
        start = Some(format!("{prefix}{}", t.start));
        if t.rv > 0 {
            at = Some(t.rv as u64);
        }
    } else {
        match (rv, opts.rv_match()) {
            (None, _) => {}
            // RV=0: any state; the watch cache ignores limit.
            (Some(0), _) if opts.rv_is_literal_zero() => limit = 0,
            // "00" parses to 0 but is not kube's "0": the latest state, paged (an exact read
            // at revision 0 is no revision at all).
            (Some(0), _) => {}
            // Not older than N (limit=0 without RVM is also "not older than").
            (Some(n), Some(RvMatch::NotOlderThan)) => wait_for(state, n).await?,
            (Some(n), None) if limit == 0 => wait_for(state, n).await?,
            // Exact, or legacy exact (RV=N with a limit).
            (Some(n), _) => {
                wait_for(state, n).await?;
                at = Some(n);
            }
        }
    }
    // kube 1.37's rule, not 1.36's: a shard selector is a selector (see `counts_remaining`).
    let count_remaining = filter.counts_remaining();
    let page = match state.store.list(
        rt,
        ns,
        at,
        start.as_deref(),
        limit,
        &|o| filter.matches(o),
        count_remaining,
    ) {
        Ok(p) => p,
        Err(ReadError::Compacted { .. }) if opts.continue_token.is_some() => {
            let mut s = Status::expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
            );
            let rel = start
                .as_deref()
                .unwrap_or_default()
                .strip_prefix(&prefix)
                .unwrap_or_default()
                .to_string();
            // etcd3 answers this one (the cache has no snapshot that old): its spelling.
            s.continue_token = Some(ContinueToken { rv: -1, start: rel }.encode_storage());
            return Err(s);
        }
        Err(ReadError::Compacted { .. }) => {
            return Err(Status::expired(
                "The resourceVersion for the provided list is too old.",
            ));
        }
        Err(ReadError::Future { requested, current }) => {
            return Err(Status::too_large_resource_version(requested, current));
        }
    };
    let token = page.last_key.as_ref().map(|k| {
        ContinueToken::after(page.rev as i64, k.strip_prefix(&prefix).unwrap_or(k)).encode()
    });
    let include = table_include(wire.repr, query)?;
    list_response(
        state,
        rt,
        &page,
        token,
        wire,
        include,
        filter.shard.as_ref(),
    )
}

/// Builds a list body from stored bytes without re-encoding items (JSON), or a Table /
/// PartialObjectMetadataList. `shard`: the shard selector that filtered the items.
fn list_response(
    state: &SimState,
    rt: &ResourceType,
    page: &ListPage,
    token: Option<String>,
    wire: Negotiated,
    include: IncludeObject,
    shard: Option<&ShardSelector>,
) -> Result<Response<Body>, Status> {
    let stats = state.stats.resource(rt.index);
    let sent = if wire.repr == Repr::Metadata {
        &stats.list_metadata_items_sent
    } else {
        &stats.list_items_sent
    };
    sent.fetch_add(page.items.len() as u64, Ordering::Relaxed);
    let mut meta = serde_json::Map::new();
    meta.insert("resourceVersion".into(), json!(page.rev.to_string()));
    if let Some(t) = &token {
        meta.insert("continue".into(), json!(t));
    }
    if let Some(r) = page.remaining {
        meta.insert("remainingItemCount".into(), json!(r));
    }
    // kube echoes the selector (canonical) in `ListMeta.shardInfo`, after `remainingItemCount`
    // as Go's encoding/json orders ListMeta's fields (protobuf: ListMeta field 5), only where
    // the list is a typed one (`metav1.ShardedListInterface`): not a custom resource's
    // UnstructuredList, and not the Table or PartialObjectMetadataList kube converts a list to
    // (they copy only the resourceVersion, continue and remainingItemCount).
    if let Some(s) = shard.filter(|_| rt.builtin && wire.repr == Repr::Json) {
        meta.insert("shardInfo".into(), json!({"selector": s.to_string()}));
    }
    let meta = Value::Object(meta);
    if wire.encoding == Encoding::Protobuf {
        let chunks = protobuf::list(rt, page.items.iter().map(|o| &**o), &meta, wire.repr)?;
        state.stats.sent(Some(rt.index), chunks.total_len());
        let total = chunks.total_len();
        let mut r = kube_wire::response::stream_chunks(chunks, total, false);
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static(kube_wire::negotiate::PROTOBUF),
        );
        return Ok(r);
    }
    let body = match wire.repr {
        Repr::Json => {
            let head = kube_wire::response::list_head(&rt.list_kind(), &rt.api_version(), &meta);
            let items: Vec<Bytes> = page
                .items
                .iter()
                .map(|o| {
                    if rt.builtin {
                        o.body.clone()
                    } else {
                        o.full_bytes(rt)
                    }
                })
                .collect();
            let (resp, len) = kube_wire::response::stream_list(head, items);
            state.stats.sent(Some(rt.index), len);
            return Ok(resp);
        }
        Repr::Table => state.table_printer(rt).table_list(
            &rt.group,
            &rt.kind,
            page.items.iter().map(|o| o.to_value(rt)),
            &meta,
            include,
            now_unix(),
        ),
        Repr::Metadata => table::metadata_list(page.items.iter().map(|o| o.to_value(rt)), &meta),
    };
    state.stats.sent(Some(rt.index), body.len());
    Ok(json_response(StatusCode::OK, body))
}

/// `/sim/...` control endpoints: stats, faults, compaction.
async fn admin(state: &Arc<SimState>, rest: &str, req: Request<Incoming>) -> Response<Body> {
    let q: Vec<(String, String)> = req
        .uri()
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let num = |k: &str, d: u64| {
        q.iter()
            .find(|(qk, _)| qk == k)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(d)
    };
    let text = |k: &str| {
        q.iter()
            .find(|(qk, _)| qk == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let ok = || json_response(StatusCode::OK, &b"{\"ok\":true}"[..]);
    let f = &state.faults;
    match (req.method().clone(), rest) {
        (Method::GET, "stats") => json_response(
            StatusCode::OK,
            serde_json::to_vec(&state.stats.to_json(&state.registry)).expect("json"),
        ),
        (Method::POST, "faults/drop-watches") => {
            f.drop_watches();
            ok()
        }
        (Method::POST, "faults/restart") => {
            f.restart_for(Duration::from_millis(num("ms", 1000)));
            ok()
        }
        (Method::POST, "faults/refuse") => {
            f.refuse_connections_for(Duration::from_millis(num("ms", 1000)));
            ok()
        }
        (Method::POST, "faults/errors") => {
            f.fail_next(
                num("code", 500) as u16,
                num("count", 1) as u32,
                num("retryAfter", 1) as u32,
                &text("path"),
            );
            ok()
        }
        (Method::POST, "faults/delay") => {
            f.set_delay(Duration::from_millis(num("ms", 0)));
            ok()
        }
        (Method::POST, "faults/watch-lag") => {
            f.set_watch_lag(Duration::from_millis(num("ms", 0)));
            ok()
        }
        (Method::POST, "faults/expire-watches") => {
            f.expire_next_watches(num("count", 1) as u32);
            ok()
        }
        (Method::POST, "faults/malformed-event") => {
            f.send_malformed_event();
            ok()
        }
        (Method::POST, "faults/undecodable-object") => {
            f.send_undecodable_object();
            ok()
        }
        (Method::POST, "faults/lose-event") => {
            f.lose_next_event_of(&text("key"));
            ok()
        }
        (Method::POST, "faults/clear") => {
            f.clear();
            ok()
        }
        (Method::POST, "churn") => {
            // Starts (or replaces, or with perSecond=0 stops) churn at a rate: benchmarks set
            // the event rate once their watchers are connected.
            let mix = match text("mix").as_str() {
                "" => Ok(super::churn::ChurnMix::Realistic),
                m => m.parse(),
            };
            let per_second = text("perSecond").parse::<f64>().unwrap_or(0.0);
            match mix {
                Ok(mix) if per_second.is_finite() && per_second >= 0.0 => {
                    super::churn::restart(
                        state,
                        super::churn::ChurnSpec {
                            per_second,
                            seed: num("seed", 1),
                            mix,
                        },
                    );
                    ok()
                }
                Ok(_) => status_response(&Status::bad_request(format!(
                    "perSecond must be a finite number >= 0, got {:?}",
                    text("perSecond")
                ))),
                Err(e) => status_response(&Status::bad_request(e)),
            }
        }
        (Method::POST, "compact") => {
            let rev = state.store.compact_now();
            json_response(
                StatusCode::OK,
                serde_json::to_vec(&json!({"compacted": rev})).expect("json"),
            )
        }
        _ => status_response(&Status::path_not_found()),
    }
}
