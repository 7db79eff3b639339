//! Routing one downstream request: `/metrics` and the health endpoints, then the cache for the
//! LIST and WATCH forms it answers exactly as kube-apiserver would (after delegated authn/authz
//! when configured), else the upstream unchanged.
//!
//! Owns the decision "cache or pass-through" and the request-level checks that precede it
//! (URL length, path, Accept, list options, selectors, sync and resourceVersion waits). The
//! answers themselves are built by [`super::list`], [`super::watch`] and [`crate::passthrough`].

use std::sync::Arc;

use http::{Method, Request, Response};
use hyper::body::Incoming;

use super::{health, limits, list, watch, websocket};
use crate::app::App;
use crate::cache::ResourceCache;
use kube_wire::options::{ListOptions, RvMatch};
use kube_wire::path::{self, ApiPath};
use kube_wire::response::{Body, status_response};
use kube_wire::selector::Filter;
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
pub async fn handle(proxy: Arc<App>, req: Request<Incoming>) -> Response<Body> {
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

async fn route_and_serve(proxy: Arc<App>, mut req: Request<Incoming>) -> Response<Body> {
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
            let mut r = crate::passthrough::pass_through(&proxy.upstream, req).await;
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

async fn route(proxy: &App, req: &Request<Incoming>) -> Route {
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
