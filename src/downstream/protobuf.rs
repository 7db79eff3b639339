//! The cache's answers in protobuf (`application/vnd.kubernetes.protobuf`), for the clients
//! that prefer it — every Kubernetes component: a LIST (the kind's `XList`, or a
//! `PartialObjectMetadataList`), a GET, and watch frames (events, bookmarks, ERROR events), with
//! kube's envelope (`k8s\0` + `runtime.Unknown`) and watch framing (a 4-byte length before each
//! `WatchEvent` on chunked HTTP; the bare event as one binary websocket message).
//!
//! Built-in kinds are read from the upstream in protobuf and stored as the upstream's bytes
//! ([`crate::cache::object`]): a LIST is the concatenation of those messages, a watch event
//! wraps them once per event and form (the event log's shared frames), and a
//! PartialObjectMetadata is cut out of them (its `metadata`, field 1 of every object) without
//! decoding the rest. An object stored as JSON (a custom resource, served in protobuf only as
//! PartialObjectMetadata; a kind an upstream answered in JSON) is transcoded once, on first use
//! by a protobuf client, and the bytes are kept beside the JSON ([`Cached::protobuf`]).
//! Transcoding is [`kube_wire::proto`]'s.
//!
//! An object that does not transcode (upstream data outside the kind's schema) is never sent
//! half-encoded: its answer is kube's 500 Status, and the failure is logged.
//!
//! It must not choose the form ([`super::form`]) nor read the cache.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};

use crate::cache::{Cached, ResourceInfo};
use kube_wire::event::EventType;
use kube_wire::negotiate::PROTOBUF;
use kube_wire::proto::{self, MessageRef, envelope};
use kube_wire::response::{Body, protobuf_response, protobuf_status_response};
use kube_wire::status::Status;

use super::form::Form;
use super::table::ListMeta;

/// `meta.k8s.io/v1`, the group version of PartialObjectMetadata.
const META_V1: &str = "meta.k8s.io/v1";

/// Whether the transcoder knows `info`'s kind (built-in kinds of kube's API; not custom
/// resources, nor the kinds of aggregated APIs).
pub fn encodes(info: &ResourceInfo) -> bool {
    info.builtin && object_message(info).is_some()
}

fn object_message(info: &ResourceInfo) -> Option<MessageRef> {
    proto::message_for(&info.api_version(), &info.kind)
}

/// Why an answer could not be encoded.
fn unencodable(info: &ResourceInfo, name: &str, e: &dyn std::fmt::Display) -> Status {
    tracing::warn!(
        resource = %info.resource, object = %name, error = %e,
        "an upstream object does not transcode to protobuf"
    );
    Status::internal(format!(
        "unable to encode {} {name:?} as protobuf: {e}",
        info.kind
    ))
}

/// The protobuf message of a cached object: the kind's message for a built-in kind, a
/// `PartialObjectMetadata` for a custom resource (whose objects kube serves in protobuf only
/// as metadata). Both carry `metadata` as field 1. Transcoded once per object version.
fn message_of(info: &ResourceInfo, obj: &Cached) -> Result<Bytes, Status> {
    let b = obj.protobuf(|body| match transcode(info, body) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(
                resource = %info.resource, object = %obj.rec.name, error = %e,
                "an upstream object does not transcode to protobuf"
            );
            Bytes::new()
        }
    });
    if b.is_empty() {
        return Err(Status::internal(format!(
            "unable to encode {} {:?} as protobuf",
            info.kind, obj.rec.name
        )));
    }
    Ok(b)
}

/// Transcodes a stored body (JSON without type meta).
fn transcode(info: &ResourceInfo, body: &[u8]) -> Result<Bytes, String> {
    let msg = if info.builtin {
        object_message(info)
    } else {
        proto::message(proto::schema::PARTIAL_OBJECT_METADATA)
    };
    let msg = msg.ok_or_else(|| format!("no protobuf schema for {}", info.kind))?;
    proto::json_to_proto(msg, body)
        .map(Bytes::from)
        .map_err(|e| e.to_string())
}

/// A `PartialObjectMetadata` message from a built-in object's message: its `metadata` bytes,
/// not transcoded again.
fn metadata_message(info: &ResourceInfo, object: Bytes) -> Result<Bytes, Status> {
    if !info.builtin {
        return Ok(object);
    }
    let msg = object_message(info).ok_or_else(|| Status::internal("no protobuf schema"))?;
    envelope::partial_object_metadata(msg, &object)
        .map(Bytes::from)
        .map_err(|e| unencodable(info, "", &e))
}

/// An object's `message` as `form` carries it: itself, or its PartialObjectMetadata.
fn shaped(info: &ResourceInfo, form: &Form, message: Bytes) -> Result<Bytes, Status> {
    match form {
        Form::MetadataProtobuf => metadata_message(info, message),
        _ => Ok(message),
    }
}

/// A cached object as `form` carries it, from its shared message.
fn item_of(info: &ResourceInfo, obj: &Cached, form: &Form) -> Result<Bytes, Status> {
    shaped(info, form, message_of(info, obj)?)
}

/// The `(apiVersion, kind)` of one object in `form`.
fn type_meta<'a>(info: &'a ResourceInfo, form: &Form, api_version: &'a str) -> (&'a str, &'a str) {
    match form {
        Form::MetadataProtobuf => (META_V1, "PartialObjectMetadata"),
        _ => (api_version, &info.kind),
    }
}

/// A LIST answer of `items` (in order) in `form` (`Protobuf` or `MetadataProtobuf`), streamed
/// from the objects' shared messages without copying them, gzip-compressed as kube does when
/// `gzip` (the client accepts it) and the body is large.
pub fn list_response<'a>(
    info: &ResourceInfo,
    items: impl IntoIterator<Item = &'a Cached>,
    meta: &ListMeta,
    form: &Form,
    gzip: bool,
) -> Response<Body> {
    let api_version = info.api_version();
    let list_kind = info.list_kind();
    let (list_api_version, list_kind) = match form {
        Form::MetadataProtobuf => (META_V1, "PartialObjectMetadataList"),
        _ => (api_version.as_str(), list_kind.as_str()),
    };
    let mut encoded = Vec::new();
    for obj in items {
        match item_of(info, obj, form) {
            Ok(b) => encoded.push(b),
            Err(s) => return protobuf_status_response(&s),
        }
    }
    let list_meta = match envelope::list_meta(meta.to_value().to_string().as_bytes()) {
        Ok(m) => m,
        Err(e) => return protobuf_status_response(&unencodable(info, "", &e)),
    };
    let chunks = envelope::list_chunks(list_api_version, list_kind, &list_meta, encoded);
    let total = chunks.total_len();
    let mut r = kube_wire::response::stream_chunks(chunks, total, gzip);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(PROTOBUF));
    r
}

/// The answer to a GET of one object in `form`.
pub fn object_response(info: &ResourceInfo, obj: &Cached, form: &Form) -> Response<Body> {
    let api_version = info.api_version();
    match item_of(info, obj, form) {
        Ok(m) => {
            let (av, kind) = type_meta(info, form, &api_version);
            protobuf_response(StatusCode::OK, envelope::wrap(av, kind, &m))
        }
        Err(s) => protobuf_status_response(&s),
    }
}

/// The watch frame of a logged change as `emitted`, whose object is `obj` (the event's stored
/// state, or a restamped previous one), from its message.
pub fn event_frame(
    info: &ResourceInfo,
    ty: EventType,
    obj: &Cached,
    form: &Form,
) -> Result<Bytes, Status> {
    let api_version = info.api_version();
    let message = item_of(info, obj, form)?;
    let (av, kind) = type_meta(info, form, &api_version);
    Ok(Bytes::from(envelope::watch_frame(
        ty.as_str(),
        &envelope::wrap(av, kind, &message),
    )))
}

/// The watch frame of an initial event (ADDED) of a cached object, as its three parts: a head
/// made for it, the object's shared message (not copied: a fleet's watch-lists send the same
/// objects to thousands of watchers) and the envelope's constant tail.
pub fn initial_frame(info: &ResourceInfo, obj: &Cached, form: &Form) -> Result<[Bytes; 3], Status> {
    let api_version = info.api_version();
    let message = item_of(info, obj, form)?;
    let (av, kind) = type_meta(info, form, &api_version);
    let head = envelope::watch_frame_head(EventType::Added.as_str(), av, kind, message.len());
    Ok([
        Bytes::from(head),
        message,
        Bytes::from_static(&envelope::TAIL),
    ])
}

/// A BOOKMARK frame at `rv` in `form` (the first after a watch-list's initial events carries
/// the `k8s.io/initial-events-end` annotation): the kind's empty object with only that
/// metadata, encoded as kube encodes it (every value field of the empty object written).
pub fn bookmark_frame(info: &ResourceInfo, rv: u64, initial_end: bool, form: &Form) -> Bytes {
    kube_wire::event::protobuf_bookmark_frame(
        &info.kind,
        &info.api_version(),
        info.builtin,
        rv,
        initial_end,
        *form == Form::MetadataProtobuf,
    )
    // The empty object of a kind the transcoder knows always encodes.
    .unwrap_or_else(|| error_frame(&Status::internal("unable to encode a bookmark as protobuf")))
}

/// An ERROR event carrying `status`.
pub fn error_frame(status: &Status) -> Bytes {
    Bytes::from(envelope::error_frame(&status.to_json()))
}
