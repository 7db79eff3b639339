//! The reflector's protobuf: the upstream read in `application/vnd.kubernetes.protobuf`, as
//! every Kubernetes component reads kube-apiserver, for the kinds that have it (the built-in
//! kinds the transcoder knows, [`crate::cache::ResourceInfo::message`]). The objects' bytes are
//! kept as they came ([`crate::cache::object`]).
//!
//! Reads a LIST page (`k8s\0` + `Unknown{raw: XList{1: ListMeta, 2: item…}}`), the frames of a
//! watch stream (a 4-byte big-endian length, then a `WatchEvent{1: type, 2: RawExtension{1:
//! k8s\0 + Unknown{raw: object}}}`) and a Status answer, into what the JSON readers give, so the
//! state machine and the cache do not know which encoding the upstream spoke. Bytes gogo's
//! unmarshaller would refuse are refused as malformed JSON is.
//!
//! It must not send requests: [`super::list`] and [`super::watch`] do, and choose the reader by
//! the answer's `Content-Type` ([`is_protobuf`]).

use std::borrow::Cow;

use super::{MalformedData, Page, ReflectorError};
use crate::cache::ResourceInfo;
use crate::cache::record::{DecodeError, decode_protobuf, parse_rv};
use kube_wire::proto::{self, ProtoError, envelope, schema};

/// What the reflector asks for a kind with a protobuf message: protobuf, JSON accepted (an
/// upstream, or an aggregated API, that cannot encode protobuf answers JSON), as client-go's
/// typed clients ask.
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// The `Accept` of the reflector's LIST and watch of `info`'s kind.
pub fn accept(info: &ResourceInfo) -> &'static str {
    if info.message.is_some() {
        ACCEPT
    } else {
        "application/json"
    }
}

/// Whether an answer is protobuf, by its `Content-Type`
/// (`application/vnd.kubernetes.protobuf`, with `;stream=watch` on a watch).
pub fn is_protobuf(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| {
            t.trim()
                .eq_ignore_ascii_case(kube_wire::negotiate::PROTOBUF)
        })
}

/// The JSON of a Status answer in either encoding: a protobuf one (`k8s\0` + `Unknown{Status}`)
/// transcoded, anything else as it is (a JSON Status, or a load balancer's page).
pub fn status_json(body: &[u8]) -> Cow<'_, [u8]> {
    let transcoded = envelope::unwrap(body).ok().and_then(|unk| {
        let msg = proto::message(schema::STATUS)?;
        proto::proto_to_json(msg, unk.raw, Some(("v1", "Status"))).ok()
    });
    match transcoded {
        Some(j) => Cow::Owned(j),
        None => Cow::Borrowed(body),
    }
}

fn malformed(at: &str, message: &str) -> ProtoError {
    ProtoError::Protobuf {
        at: at.into(),
        message: message.into(),
    }
}

/// The length-delimited fields of a message, in wire order; other wire types skipped.
pub(super) fn fields(buf: &[u8]) -> impl Iterator<Item = Result<(u32, &[u8]), ProtoError>> {
    proto::wire::fields(buf, "message").bytes()
}

/// The text of a string field.
fn text(v: &[u8]) -> Result<&str, ProtoError> {
    std::str::from_utf8(v).map_err(|_| malformed("message", "invalid UTF-8"))
}

/// Reads one LIST answer's body of `info`'s objects in protobuf (see [`super::read_page`]).
pub fn read_page(info: &ResourceInfo, body: &[u8], what: &str) -> Result<Page, ReflectorError> {
    let bad = |e: ProtoError| ReflectorError::malformed(what, MalformedData::Protobuf(e));
    let unk = envelope::unwrap(body).map_err(bad)?;
    let mut page = Page {
        items: Vec::new(),
        resource_version: String::new(),
        continue_token: String::new(),
    };
    for field in fields(unk.raw) {
        match field.map_err(bad)? {
            (1, meta) => {
                for f in fields(meta) {
                    match f.map_err(bad)? {
                        (2, v) => page.resource_version = text(v).map_err(bad)?.to_string(),
                        (3, v) => page.continue_token = text(v).map_err(bad)?.to_string(),
                        _ => {}
                    }
                }
            }
            (2, item) => page
                .items
                .push(decode_protobuf(info, item).map_err(|e| ReflectorError::malformed(what, e))?),
            _ => {}
        }
    }
    Ok(page)
}

/// One watch event read from its protobuf frame (without the 4-byte length).
#[derive(Debug)]
pub struct WatchEvent<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub ty: &'a str,
    /// The object's envelope, read.
    pub object: envelope::Unknown<'a>,
}

/// Reads one protobuf watch frame.
pub fn read_event<'a>(frame: &'a [u8], what: &str) -> Result<WatchEvent<'a>, ReflectorError> {
    let bad = |e: ProtoError| ReflectorError::malformed(what, MalformedData::Protobuf(e));
    let mut ty = "";
    let mut raw: &[u8] = &[];
    for field in fields(frame) {
        match field.map_err(bad)? {
            (1, v) => ty = text(v).map_err(bad)?,
            (2, ext) => {
                for f in fields(ext) {
                    if let (1, v) = f.map_err(bad)? {
                        raw = v;
                    }
                }
            }
            _ => {}
        }
    }
    let object = envelope::unwrap(raw).map_err(bad)?;
    Ok(WatchEvent { ty, object })
}

impl WatchEvent<'_> {
    /// An ERROR event's Status, as JSON.
    pub fn status_json(&self) -> Result<Vec<u8>, ProtoError> {
        let msg = proto::message(schema::STATUS).ok_or_else(|| malformed("Status", "no schema"))?;
        proto::proto_to_json(msg, self.object.raw, Some(("v1", "Status")))
    }

    /// A BOOKMARK's resourceVersion (its object is the kind's, with only metadata set).
    pub fn bookmark_rv(&self, info: &ResourceInfo, what: &str) -> Result<u64, ReflectorError> {
        let bad = |e: ProtoError| ReflectorError::malformed(what, MalformedData::Protobuf(e));
        let msg = info
            .message
            .ok_or_else(|| bad(malformed(&info.kind, "no protobuf message")))?;
        let value = proto::fields::read_scalar(msg, self.object.raw, "metadata.resourceVersion")
            .map_err(bad)?
            .map(|v| v.to_string())
            .unwrap_or_default();
        parse_rv(&value).map_err(|source| {
            ReflectorError::malformed(
                what,
                MalformedData::BookmarkResourceVersion { value, source },
            )
        })
    }

    /// The event's object, ingested.
    pub fn object(&self, info: &ResourceInfo) -> Result<crate::cache::Cached, DecodeError> {
        decode_protobuf(info, self.object.raw)
    }
}
