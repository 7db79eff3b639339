//! GET of one object from the cache (`.../pods/NAME`), as kube-apiserver answers it: the object
//! with its `kind` and `apiVersion` (or as a one-row Table, or its PartialObjectMetadata), or
//! kube's 404 NotFound Status, which the router writes in the encoding kube negotiates for
//! errors (protobuf for a protobuf-first client).
//!
//! It serves from the snapshot the router hands it, already at the state the request's
//! resourceVersion rules ask for (consistent, any, or not older than N): it must not wait, nor
//! decide what the cache answers.

use super::form::Form;
use crate::cache::record::object_key;
use crate::cache::{ResourceInfo, Snapshot};
use kube_wire::response::Body;
use kube_wire::status::Status;
use kube_wire::table::TablePrinter;

/// The answer to a GET of `name` (in `namespace`, ignored for a cluster-scoped kind) from `snap`
/// (a Table printed by `printer`), or kube's 404 when the state has no such object.
pub fn serve(
    info: &ResourceInfo,
    snap: &Snapshot,
    namespace: Option<&str>,
    name: &str,
    form: &Form,
    printer: &TablePrinter,
) -> Result<http::Response<Body>, Status> {
    let key = object_key(
        namespace.filter(|_| info.namespaced).unwrap_or_default(),
        name,
    );
    match snap.objects.get(key.as_str()) {
        Some(obj) => Ok(super::table::object_response(info, printer, obj, form)),
        None => Err(Status::not_found(&info.group, &info.resource, name)),
    }
}
