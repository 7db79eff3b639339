//! Fuzz target `negotiate`: the request headers watchmux interprets itself — `Accept` (kube's
//! content negotiation, [`negotiate_media`], the encoding of an error's Status,
//! [`status_encoding`], and the cache's wire form, [`form::negotiate`], with `includeObject`
//! from the query), `Authorization` ([`kube_wire::access::credential`]), `Accept-Encoding`
//! and `?pretty` / `User-Agent`.
//! (`Content-Type` is not read by watchmux: request bodies pass through to the upstream.)
//!
//! Input: lines `Accept`, query string, `Authorization`, `Accept-Encoding`, `User-Agent`.
//!
//! Invariants, for lists and objects, built-in kinds and custom resources, watches or not: the
//! chosen encoding is one the `Accept` header covers and the endpoint can serve (no protobuf of
//! a custom resource's objects, no YAML for a watch, no Table in protobuf); a refusal is kube's
//! 406 NotAcceptable; the cache's form agrees with kube's negotiation.

use http::{HeaderMap, HeaderValue};
use kube_wire::negotiate::{
    Encoding, Endpoint, Repr, Target, media_ranges, negotiate_media, status_encoding,
};
use watchmux::downstream::form;

use crate::status::assert_status;

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let mut line = || lines.next().unwrap_or_default();
    let (accept, query, authorization, encoding, agent) = (line(), line(), line(), line(), line());
    // goautoneg's order is not by q alone (a concrete type goes before a wildcard of higher
    // q, as in kube), so nothing is asserted of it beyond being computed.
    let _ = media_ranges(accept);
    for target in [Target::List, Target::Object] {
        for protobuf in [true, false] {
            for watch in [true, false] {
                let endpoint = Endpoint { protobuf, watch };
                media(accept, target, endpoint);
                if let Some(f) = form::negotiate(Some(accept), Some(query), target, protobuf, watch)
                {
                    let n = negotiate_media(
                        Some(accept.trim()).filter(|a| !a.is_empty()),
                        target,
                        "",
                        endpoint,
                    )
                    .unwrap_or_else(|s| panic!("{accept:?}: a form {f:?} where kube says {s:?}"));
                    assert_eq!((f.repr(), f.encoding()), (n.repr, n.encoding), "{accept:?}");
                }
            }
        }
    }
    let enc = status_encoding(Some(accept));
    if accept.is_empty() {
        assert_eq!(enc, Some(Encoding::Json));
    }
    let mut headers = HeaderMap::new();
    for (name, value) in [
        (http::header::ACCEPT, accept),
        (http::header::AUTHORIZATION, authorization),
        (http::header::ACCEPT_ENCODING, encoding),
        (http::header::USER_AGENT, agent),
    ] {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(name, v);
        }
    }
    let _ = kube_wire::access::credential(&headers);
    let _ = kube_wire::response::accepts_gzip(&headers);
    let _ = kube_wire::response::wants_pretty(Some(query), &headers);
    if let Err(s) = kube_wire::table::IncludeObject::from_query(Some(query)) {
        assert_status(&s, 400, "BadRequest", "includeObject");
    }
}

fn media(accept: &str, target: Target, endpoint: Endpoint) {
    let context = format!("Accept {accept:?} for {target:?} of {endpoint:?}");
    match negotiate_media(Some(accept), target, "Pod", endpoint) {
        Ok(n) => {
            if accept.is_empty() {
                assert_eq!(
                    (n.repr, n.encoding),
                    (Repr::Json, Encoding::Json),
                    "{context}"
                );
                return;
            }
            assert!(
                media_ranges(accept).iter().any(|r| r.matches(n.encoding)),
                "{context}: {n:?} is not asked for"
            );
            if n.encoding == Encoding::Protobuf {
                assert!(
                    endpoint.protobuf || n.repr == Repr::Metadata,
                    "{context}: {n:?}"
                );
            }
            if endpoint.watch {
                assert_ne!(n.encoding, Encoding::Yaml, "{context}");
            }
            if n.repr == Repr::Table {
                assert_ne!(n.encoding, Encoding::Protobuf, "{context}");
            }
            if n.repr == Repr::Json {
                assert!(!n.v1beta1, "{context}: {n:?}");
            }
        }
        Err(s) => assert_status(&s, 406, "NotAcceptable", &context),
    }
}
