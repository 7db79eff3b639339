//! Fuzz target `selector`: label selectors ([`LabelSelector`]), field selectors
//! ([`FieldSelector`]), the per-kind field label conversion and the request's whole
//! [`Filter`], and matching objects against them.
//!
//! Input: the `labelSelector` on the first line, the `fieldSelector` on the second, then
//! `key=value` lines: the labels (and selectable fields) of an object to match.
//!
//! Invariants: a selector that parses prints (`Display`) as one that parses to the same
//! selector and prints the same, and both match the same objects; a refusal is kube's 400
//! BadRequest with the parser's message; matching never panics.

use kube_wire::selector::{FieldSelector, Filter, LabelSelector, SelectorError};
use kube_wire::status::Status;
use watchmux::downstream::router::RouteError;

use crate::status::assert_status;

/// Kinds whose field label conversion differs: (group, kind, namespaced, CRD selectable fields).
const KINDS: &[(&str, &str, bool, &[&str])] = &[
    ("", "Pod", true, &[]),
    ("", "Node", false, &[]),
    ("", "Event", true, &[]),
    ("events.k8s.io", "Event", true, &[]),
    ("apps", "Deployment", true, &[]),
    ("example.com", "Widget", true, &[".spec.color", "spec.size"]),
];

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let label = lines.next().unwrap_or_default();
    let field = lines.next().unwrap_or_default();
    let mut object: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    object.sort();
    object.dedup_by(|a, b| a.0 == b.0);
    labels(label, &object);
    fields(field, &object);
    for (group, kind, namespaced, extra) in KINDS {
        let extra: Vec<String> = extra.iter().map(|e| e.to_string()).collect();
        let ns = object
            .iter()
            .find(|(k, _)| k == "metadata.namespace")
            .map(|(_, v)| v.as_str());
        match Filter::parse(
            group,
            kind,
            *namespaced,
            &extra,
            ns.map(str::to_string),
            label,
            field,
        ) {
            Ok(f) => {
                let _ = f.no_selectors();
                let _ = f.matches(ns.unwrap_or_default(), &object, |k| lookup(&object, k));
            }
            Err(e) => refusal(e, "filter"),
        }
    }
}

fn lookup<'a>(object: &'a [(String, String)], key: &str) -> Option<&'a str> {
    object
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn refusal(e: SelectorError, context: &str) {
    assert_eq!((e.status_code(), e.reason()), (400, "BadRequest"));
    let message = e.to_string();
    let s = Status::from(&RouteError::Selector(e));
    assert_status(&s, 400, "BadRequest", context);
    assert_eq!(
        s.message, message,
        "{context}: the Status message is the parser's"
    );
}

fn labels(text: &str, object: &[(String, String)]) {
    let sel = match LabelSelector::parse(text) {
        Ok(s) => s,
        Err(e) => return refusal(e, "labelSelector"),
    };
    let printed = sel.to_string();
    let again = LabelSelector::parse(&printed).unwrap_or_else(|e| {
        panic!("labelSelector {text:?} prints as {printed:?}, which does not parse: {e}")
    });
    assert_eq!(again, sel, "labelSelector {text:?} printed as {printed:?}");
    assert_eq!(again.to_string(), printed);
    assert_eq!(sel.matches(object), again.matches(object));
    for r in sel.requirements() {
        if let Some(v) = sel.exact_value(r.key()) {
            // Sound for index look-ups: a label set with another value there never matches.
            let mut other: Vec<(String, String)> = object
                .iter()
                .filter(|(k, _)| k != r.key())
                .cloned()
                .collect();
            other.push((r.key().to_string(), format!("{v}x")));
            assert!(!sel.matches(&other), "{text:?} pins {}={v:?}", r.key());
        }
    }
}

fn fields(text: &str, object: &[(String, String)]) {
    let sel = match FieldSelector::parse(text) {
        Ok(s) => s,
        Err(e) => return refusal(e, "fieldSelector"),
    };
    let printed = sel.to_string();
    let again = FieldSelector::parse(&printed).unwrap_or_else(|e| {
        panic!("fieldSelector {text:?} prints as {printed:?}, which does not parse: {e}")
    });
    assert_eq!(again, sel, "fieldSelector {text:?} printed as {printed:?}");
    assert_eq!(again.to_string(), printed);
    let get = |k: &str| lookup(object, k);
    assert_eq!(sel.matches(get), again.matches(get));
    let _ = sel.matches_set(object);
    for r in sel.requirements() {
        if let Some(v) = sel.exact_value(&r.field) {
            // A selector requiring `field=v` matches nothing whose field is something else.
            let other = format!("{v}x");
            let get = |k: &str| {
                if k == r.field {
                    Some(other.as_str())
                } else {
                    None
                }
            };
            assert!(!sel.matches(get), "{text:?} requires {}={v:?}", r.field);
        }
    }
}
