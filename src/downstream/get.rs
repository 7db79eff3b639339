//! GET of one object from the cache (`.../pods/NAME`), as kube-apiserver answers it: the object
//! with its `kind` and `apiVersion` (or as a one-row Table, or its PartialObjectMetadata), or
//! kube's 404 NotFound Status.
//!
//! It serves from the snapshot the router hands it, already at the state the request's
//! resourceVersion rules ask for (consistent, any, or not older than N): it must not wait, nor
//! decide what the cache answers.

use super::form::Form;
use crate::cache::{ResourceInfo, Snapshot};
use kube_wire::response::{Body, status_response};
use kube_wire::status::Status;
use kube_wire::table::TablePrinter;

/// The answer to a GET of `name` (in `namespace`, ignored for a cluster-scoped kind) from `snap`
/// (a Table printed by `printer`).
pub fn serve(
    info: &ResourceInfo,
    snap: &Snapshot,
    namespace: Option<&str>,
    name: &str,
    form: &Form,
    printer: &TablePrinter,
) -> http::Response<Body> {
    let key = match namespace.filter(|_| info.namespaced) {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    };
    match snap.objects.get(key.as_str()) {
        Some(obj) => super::table::object_response(info, printer, obj, form),
        None => status_response(&Status::not_found(&info.group, &info.resource, name)),
    }
}
