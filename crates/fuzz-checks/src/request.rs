//! Fuzz target `request`: a request's path ([`kube_wire::path::parse`]) and query
//! ([`ListOptions::from_query`]), then what the router derives from them, in its order: the
//! wire form ([`form::negotiate`]), watch-list defaulting, validation, the selectors, the
//! legacy watch's name folded into the field selector, the read point.
//!
//! Input: the request target (`/api/v1/namespaces/default/pods?watch=1`) on the first line,
//! the `Accept` header on the second (optional).
//!
//! Invariants: a path that parses prints back to a path that parses to the same value; a query
//! that parses re-serialises to one that parses to the same options; every refusal is the
//! Status kube answers with (400 BadRequest for the query, the selectors and a LIST's
//! resourceVersion or continue token, 422 Invalid for the options' validation, 500 with no
//! reason for the resourceVersion of a GET or a watch, which kube's watch cache refuses);
//! folding a legacy watch's name yields a selector that requires exactly that name.

use kube_wire::options::ListOptions;
use kube_wire::path::{self, ApiPath, ResourcePath};
use kube_wire::selector::Filter;
use kube_wire::status::Status;
use watchmux::downstream::form;
use watchmux::downstream::read_point::ReadPoint;
use watchmux::downstream::router::RouteError;

use crate::status::assert_status;

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (target, accept) = text.split_once('\n').unwrap_or((text, ""));
    let accept = accept.lines().next().unwrap_or("");
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let parsed = path::parse(path);
    if let Some(printed) = unparse(&parsed) {
        assert_eq!(
            path::parse(&printed),
            parsed,
            "path {path:?} prints as {printed:?}, which parses differently"
        );
    }
    let rp = match parsed {
        ApiPath::Resource(rp) => rp,
        _ => ResourcePath {
            version: "v1".into(),
            resource: "pods".into(),
            ..ResourcePath::default()
        },
    };
    route(&rp, query, accept);
}

/// The path of an [`ApiPath`], or `None` for [`ApiPath::Other`].
pub fn unparse(p: &ApiPath) -> Option<String> {
    Some(match p {
        ApiPath::Version => "/version".into(),
        ApiPath::CoreRoot => "/api".into(),
        ApiPath::GroupsRoot => "/apis".into(),
        ApiPath::Group(g) => format!("/apis/{g}"),
        ApiPath::GroupVersion { group, version } => prefix(group, version),
        ApiPath::Resource(rp) => {
            let mut s = prefix(&rp.group, &rp.version);
            if rp.legacy_watch {
                s.push_str("/watch");
            }
            if let Some(ns) = &rp.namespace {
                s.push_str(&format!("/namespaces/{ns}"));
            }
            s.push('/');
            s.push_str(&rp.resource);
            for part in [&rp.name, &rp.subresource].into_iter().flatten() {
                s.push('/');
                s.push_str(part);
            }
            s
        }
        ApiPath::Other => return None,
    })
}

fn prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// The query string of `o`: every option it holds, each once.
pub fn to_query(o: &ListOptions) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    if o.watch {
        q.append_pair("watch", "true");
    }
    if let Some(rv) = &o.resource_version {
        q.append_pair("resourceVersion", rv);
    }
    if let Some(m) = &o.resource_version_match {
        q.append_pair("resourceVersionMatch", m);
    }
    if o.allow_watch_bookmarks {
        q.append_pair("allowWatchBookmarks", "true");
    }
    if let Some(s) = o.send_initial_events {
        q.append_pair("sendInitialEvents", if s { "true" } else { "false" });
    }
    if let Some(t) = o.timeout_seconds {
        q.append_pair("timeoutSeconds", &t.to_string());
    }
    if o.limit != 0 {
        q.append_pair("limit", &o.limit.to_string());
    }
    if let Some(c) = &o.continue_token {
        q.append_pair("continue", c);
    }
    if !o.label_selector.is_empty() {
        q.append_pair("labelSelector", &o.label_selector);
    }
    if !o.field_selector.is_empty() {
        q.append_pair("fieldSelector", &o.field_selector);
    }
    q.finish()
}

/// The kind behind a resource, as discovery would say (a few real ones, else a custom
/// resource with a CRD selectable field).
fn kind_of(rp: &ResourcePath) -> (&'static str, &'static str, bool, Vec<String>) {
    match (rp.group.as_str(), rp.resource.as_str()) {
        ("", "pods") => ("", "Pod", true, Vec::new()),
        ("", "nodes") => ("", "Node", false, Vec::new()),
        ("", "namespaces") => ("", "Namespace", false, Vec::new()),
        ("", "events") => ("", "Event", true, Vec::new()),
        ("", "secrets") => ("", "Secret", true, Vec::new()),
        ("events.k8s.io", _) => ("events.k8s.io", "Event", true, Vec::new()),
        ("apps", _) => ("apps", "Deployment", true, Vec::new()),
        _ => ("example.com", "Widget", true, vec![".spec.color".into()]),
    }
}

fn route(rp: &ResourcePath, query: Option<&str>, accept: &str) {
    let mut opts = match ListOptions::from_query(query) {
        Ok(o) => o,
        Err(s) => {
            assert_status(&s, 400, "BadRequest", "query");
            return;
        }
    };
    let printed = to_query(&opts);
    assert_eq!(
        ListOptions::from_query(Some(&printed)).as_ref(),
        Ok(&opts),
        "query {query:?} re-serialised as {printed:?}"
    );
    let _ = opts.watch_timeout();
    let _ = kube_wire::access::name_from_field_selector(&opts.field_selector);
    opts.watch |= rp.legacy_watch;
    let target = if rp.name.is_none() && !opts.watch {
        kube_wire::negotiate::Target::List
    } else {
        kube_wire::negotiate::Target::Object
    };
    let builtin = kube_wire::selector::selectable::is_builtin_group(&rp.group);
    let _ = form::negotiate(
        Some(accept).filter(|a| !a.is_empty()),
        query,
        target,
        builtin,
        opts.watch,
    );
    if rp.name.is_some() && !opts.watch {
        if let Err(s) = ReadPoint::for_get(&opts) {
            assert_status(&s, 500, "", "GET's resourceVersion");
        }
        return;
    }
    if opts.watch {
        opts.apply_watch_list_defaults();
    }
    if let Err(s) = opts.validate() {
        assert_status(&s, 422, "Invalid", "validation");
        return;
    }
    let (group, kind, namespaced, extra) = kind_of(rp);
    let parse = |o: &ListOptions| {
        Filter::parse(
            group,
            kind,
            namespaced,
            &extra,
            rp.namespace.clone(),
            &o.label_selector,
            &o.field_selector,
        )
    };
    if let Err(e) = parse(&opts) {
        let s = Status::from(&RouteError::Selector(e));
        assert_status(&s, 400, "BadRequest", "selectors");
        return;
    }
    if let Some(name) = &rp.name {
        if let Err(s) = opts.fold_name(name) {
            assert_status(&s, 400, "BadRequest", "legacy watch's name");
            return;
        }
        let filter = parse(&opts).unwrap_or_else(|e| {
            panic!(
                "the folded selector {:?} does not parse: {e}",
                opts.field_selector
            )
        });
        assert_eq!(
            filter.fields.exact_value("metadata.name"),
            Some(name.as_str()),
            "folded selector {:?} does not require the name {name:?}",
            opts.field_selector
        );
    }
    if opts.watch {
        if let Err(s) = ReadPoint::for_watch_list(&opts) {
            assert_status(&s, 500, "", "watch's resourceVersion");
        }
    } else if let Err(s) = ReadPoint::for_list(&opts) {
        assert_status(&s, 400, "BadRequest", "LIST's read point");
    }
}
