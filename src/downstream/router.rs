//! Routing one downstream request: `/metrics` and the health endpoints, then the cache for the
//! LIST and WATCH forms it answers exactly as kube-apiserver would (after delegated authn/authz
//! when configured), else the upstream unchanged.
//!
//! Owns the decision "cache or pass-through" and the request-level checks that precede it
//! (URL length, path, Accept, list options, selectors, authorization, limits, the sync and
//! resourceVersion waits), each done once: the cache handed to [`super::list`] and
//! [`super::watch`] is synced and has reached the requested resourceVersion. A check that fails
//! is a [`RouteError`], answered with the `Status` `crate::error` maps it to. The answers
//! themselves are built by [`super::list`], [`super::watch`], [`super::websocket`] and
//! [`crate::passthrough`]; the router must not build bodies.

use std::sync::Arc;

use http::{Method, Request, Response};
use hyper::body::Incoming;

use super::authz::AuthzError;
use super::limits::{self, LimitError};
use super::websocket::{self, WebsocketError};
use super::{health, list, watch};
use crate::app::App;
use crate::cache::ResourceCache;
use kube_wire::options::{ListOptions, RvMatch};
use kube_wire::path::{self, ApiPath};
use kube_wire::response::{Body, status_response};
use kube_wire::selector::{Filter, SelectorError};
use kube_wire::status::Status;

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
pub fn cache_answers_list(opts: &ListOptions) -> bool {
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
    /// A namespaced path for a cluster-scoped resource: kube has no such route.
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// The resource's cache is not synced within `cache.not_ready_wait`.
    #[error("storage is (re)initializing")]
    NotReady,
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
}

/// Handles one request: `/metrics` and the health endpoints first (never passed through), then
/// the cache or the upstream. Every request is counted and timed, and logged at debug.
pub async fn handle(app: Arc<App>, req: Request<Incoming>) -> Response<Body> {
    if let Some(r) = health::answer(&app, &req) {
        return r;
    }
    let info = app.metrics.classify(&req);
    let resp = match route_and_serve(&app, req).await {
        Ok(r) => r,
        Err(e) => status_response(&Status::from(&e)),
    };
    app.metrics.finish(&info, resp, &app.draining)
}

async fn route_and_serve(
    app: &Arc<App>,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, RouteError> {
    let url_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    limits::check_url_length(url_len, app.max_url_bytes)?;
    match route(app, &req).await? {
        Route::Watch {
            cache,
            opts,
            filter,
            client,
        } => {
            let permit = app.limits.acquire_watch(&client)?;
            // A websocket watch: check the subprotocols before anything else is started.
            let ws = if websocket::is_websocket(&req) {
                Some(websocket::choose_protocol(req.headers())?)
            } else {
                None
            };
            let transport = if ws.is_some() {
                crate::metrics::TRANSPORT_WEBSOCKET
            } else {
                crate::metrics::TRANSPORT_CHUNKED
            };
            let rx = watch::start(app, cache, opts, filter, transport)?;
            match ws {
                None => Ok(limits::hold(watch::chunked_response(rx), permit)),
                Some(protocol) => {
                    let (resp, upgraded) = websocket::upgrade(&mut req, protocol.as_deref())?;
                    app.tasks.spawn(async move {
                        websocket::pump(upgraded, rx).await;
                        drop(permit);
                    });
                    Ok(resp)
                }
            }
        }
        Route::List {
            cache,
            namespace,
            opts,
            filter,
        } => {
            let permit = app.limits.acquire_list()?;
            let gzip = kube_wire::response::accepts_gzip(req.headers());
            let resp = list::serve(&cache, namespace.as_deref(), &opts, &filter, gzip);
            Ok(limits::hold(resp, permit))
        }
        Route::PassThrough => {
            let mut r = crate::passthrough::pass_through(&app.upstream, req).await;
            r.extensions_mut().insert(crate::metrics::PassedThrough);
            Ok(r)
        }
    }
}

/// Where a request goes once every check passed.
enum Route {
    /// A WATCH the cache answers.
    Watch {
        /// Synced, and at the requested resourceVersion when the watch sends initial events.
        cache: Arc<ResourceCache>,
        opts: ListOptions,
        filter: Filter,
        /// Whom the watch counts against (`server.max_watches_per_client`).
        client: String,
    },
    /// A LIST the cache answers.
    List {
        /// Synced, and at the requested resourceVersion.
        cache: Arc<ResourceCache>,
        /// The path's namespace, if any.
        namespace: Option<String>,
        opts: ListOptions,
        filter: Filter,
    },
    /// Anything else: the upstream answers.
    PassThrough,
}

async fn route(app: &App, req: &Request<Incoming>) -> Result<Route, RouteError> {
    let ApiPath::Resource(rp) = path::parse(req.uri().path()) else {
        return Ok(Route::PassThrough);
    };
    if req.method() != Method::GET
        || rp.subresource.is_some()
        || (rp.name.is_some() && !rp.legacy_watch)
    {
        return Ok(Route::PassThrough);
    }
    let key = (rp.group.clone(), rp.version.clone(), rp.resource.clone());
    let Some(slot) = app.slots.get(&key) else {
        return Ok(Route::PassThrough);
    };
    let accept = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    if !accepts_plain_json(accept) {
        return Ok(Route::PassThrough);
    }
    // kube has no route for a namespaced path of a cluster-scoped kind: 404 before the query
    // is even parsed (known once discovery answered; otherwise checked below).
    if rp.namespace.is_some() && slot.get().is_some_and(|c| !c.info.namespaced) {
        return Err(RouteError::NoRoute);
    }
    let mut opts = ListOptions::from_query(req.uri().query())?;
    opts.watch |= rp.legacy_watch;
    if !opts.watch && !cache_answers_list(&opts) {
        return Ok(Route::PassThrough);
    }
    // The cache will answer: with `server.authz = "delegated"`, authenticate and authorize now,
    // before anything (not even a validation error) is answered from it. Pass-through requests
    // are authorized by the upstream, with the client's own credentials.
    let mut client = None;
    if let Some(authz) = &app.authz {
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
        let user = authz.authenticate(req.headers(), peer).await?;
        client = Some(format!("user:{}", user.user));
        authz.authorize(user, &attrs).await?;
    }
    let client = client.unwrap_or_else(|| match req.extensions().get::<limits::ClientAddr>() {
        Some(a) => format!("ip:{}", a.0),
        None => "ip:unknown".to_string(),
    });
    // Before discovery answered we do not know the kind: the resource is not ready.
    let cache = slot
        .synced(app.cache_config.not_ready_wait)
        .await
        .ok_or(RouteError::NotReady)?;
    let info = &cache.info;
    if rp.namespace.is_some() && !info.namespaced {
        return Err(RouteError::NoRoute);
    }
    if opts.watch {
        opts.apply_watch_list_defaults();
    }
    opts.validate()?;
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
    // kube's `listOpts` order: validation (422), field label conversion (400), then the rule
    // folding a legacy `/watch/…/{name}` path's name into `metadata.name` (400 on mismatch).
    if let Some(name) = &rp.name {
        opts.fold_name(name)?;
        filter = parse(&opts)?;
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
        return Ok(Route::PassThrough);
    }
    Ok(if opts.watch {
        Route::Watch {
            cache,
            opts,
            filter,
            client,
        }
    } else {
        Route::List {
            cache,
            namespace: rp.namespace,
            opts,
            filter,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(q: &str) -> ListOptions {
        ListOptions::from_query(Some(q)).unwrap()
    }

    #[test]
    fn cache_answers_the_forms_kube_serves_from_its_cache() {
        assert!(cache_answers_list(&opts("resourceVersion=0")));
        assert!(cache_answers_list(&opts("resourceVersion=0&limit=500")));
        assert!(cache_answers_list(&opts(
            "resourceVersion=5&resourceVersionMatch=NotOlderThan&limit=5"
        )));
        assert!(cache_answers_list(&opts("resourceVersion=5")));
        assert!(
            !cache_answers_list(&opts("")),
            "consistent reads go upstream"
        );
        assert!(!cache_answers_list(&opts("limit=500")));
        assert!(
            !cache_answers_list(&opts("resourceVersion=5&limit=5")),
            "legacy exact"
        );
        assert!(!cache_answers_list(&opts(
            "resourceVersion=5&resourceVersionMatch=Exact"
        )));
        assert!(!cache_answers_list(&opts("resourceVersion=0&continue=abc")));
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
