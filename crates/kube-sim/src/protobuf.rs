//! The simulator's protobuf (`application/vnd.kubernetes.protobuf`), spoken as kube-apiserver
//! speaks it to the clients that prefer it (every Kubernetes component, and kubectl's request
//! bodies): which encoding an answer takes, the answers themselves (objects, lists,
//! PartialObjectMetadata, watch frames, Status), and protobuf request bodies read back to JSON.
//!
//! Built-in kinds the transcoder knows ([`kube_wire::proto`]) have a protobuf form; custom
//! resources have none except PartialObjectMetadata (kube's `StandardSerializers`). Tables are
//! never protobuf. YAML, which kube also serves, is not served: a request whose best choice is
//! YAML is negotiated again without its YAML ranges (see [`negotiate`]).
//!
//! The bytes are the ones watchmux writes for the same request (`src/downstream/protobuf.rs`):
//! each object's protobuf message (encoded once per stored version, see `store`), kube's
//! `k8s\0` + `runtime.Unknown` envelope, `WatchEvent`s with a 4-byte length on chunked HTTP,
//! bookmarks as the kind's empty object, and Status through [`envelope::status`].
//!
//! It decides encodings and bytes only: what is read or written is `http`'s, `watch`'s and
//! `ops`'s business, and it reads no state.

use std::fmt::Display;

use bytes::Bytes;
use http::Response;
use serde_json::Value;

use super::kinds::ResourceType;
use super::store::StoredObject;
use kube_wire::negotiate::{
    Encoding, Endpoint, Negotiated, PROTOBUF, Repr, Target, negotiate_media, status_encoding,
};
use kube_wire::proto::{self, MessageRef, ProtoError, envelope, schema};
use kube_wire::response::{Body, protobuf_status_response};
use kube_wire::status::Status;

/// The group version of PartialObjectMetadata(List) answers (as the simulator's JSON ones).
const META_V1: &str = "meta.k8s.io/v1";

/// The media types kube-apiserver reads request bodies in (its serializers; CBOR is off in 1.36).
const INPUT_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The protobuf message of `rt`'s objects: built-in kinds the transcoder knows.
pub fn message(rt: &ResourceType) -> Option<MessageRef> {
    if !rt.builtin {
        return None;
    }
    proto::message_for(&rt.api_version(), &rt.kind)
}

/// What `rt`'s endpoint can serialize.
pub fn endpoint(rt: &ResourceType, watch: bool) -> Endpoint {
    Endpoint {
        protobuf: message(rt).is_some(),
        watch,
    }
}

/// Negotiates an answer that carries objects, as kube does
/// ([`kube_wire::negotiate::negotiate_media`]), except that YAML is not served: when YAML would
/// be chosen, the header is negotiated again without its `application/yaml` ranges, and a
/// header left with nothing is kube's 406 for the endpoint.
pub fn negotiate(
    accept: Option<&str>,
    target: Target,
    kind: &str,
    endpoint: Endpoint,
) -> Result<Negotiated, Status> {
    let n = negotiate_media(accept, target, kind, endpoint)?;
    if n.encoding != Encoding::Yaml {
        return Ok(n);
    }
    let rest: Vec<&str> = accept
        .unwrap_or_default()
        .split(',')
        .filter(|r| {
            let media = r.split(';').next().unwrap_or_default().trim();
            media != "application/yaml" && !media.is_empty()
        })
        .collect();
    if rest.is_empty() {
        // A header no serializer matches: the endpoint's 406, in kube's words.
        return negotiate_media(Some("none/none"), target, kind, endpoint);
    }
    negotiate_media(Some(&rest.join(",")), target, kind, endpoint)
}

/// The answer for an error: its Status in the encoding kube writes errors in for this `Accept`
/// header (`responsewriters.ErrorNegotiated`: protobuf for a protobuf-first client, whatever
/// the endpoint; JSON otherwise, YAML included, which the simulator does not write), or, when
/// the header accepts none of them, `WriteRawJSON`'s indented JSON.
pub fn error_response(accept: Option<&str>, s: &Status) -> Response<Body> {
    match status_encoding(accept) {
        Some(Encoding::Protobuf) => protobuf_status_response(s),
        Some(Encoding::Json | Encoding::Yaml) => kube_wire::response::status_response(s),
        None => kube_wire::response::raw_status_response(s),
    }
}

/// A success Status (a DELETE's) in protobuf.
pub fn success_status(status_json: &Value) -> Result<Vec<u8>, Status> {
    let json = serde_json::to_vec(status_json).map_err(|e| Status::internal(e.to_string()))?;
    envelope::status(&json).map_err(|e| unencodable("Status", &e))
}

fn unencodable(what: &str, e: &dyn Display) -> Status {
    Status::internal(format!("unable to encode {what} as protobuf: {e}"))
}

/// The message body of a stored object in `repr`: the kind's message (the one encoded when it
/// was written), or a PartialObjectMetadata (`{1: ObjectMeta}`: cut from that message, or
/// transcoded from a custom resource's JSON).
fn body_of(rt: &ResourceType, obj: &StoredObject, repr: Repr) -> Result<Bytes, Status> {
    match (obj.protobuf(rt), message(rt), repr) {
        (Some(pb), Some(_), Repr::Json) => Ok(pb.clone()),
        (Some(pb), Some(msg), Repr::Metadata) => envelope::partial_object_metadata(msg, pb)
            .map(Bytes::from)
            .map_err(|e| unencodable(&rt.kind, &e)),
        _ => encode(&rt.kind, message(rt), &obj.body, repr).map(Bytes::from),
    }
}

/// [`body_of`] for an object of `kind` whose message is `msg`.
fn encode(kind: &str, msg: Option<MessageRef>, json: &[u8], repr: Repr) -> Result<Vec<u8>, Status> {
    let msg = match repr {
        Repr::Metadata => proto::message(schema::PARTIAL_OBJECT_METADATA),
        Repr::Json => msg,
        Repr::Table => None,
    }
    .ok_or_else(|| unencodable(kind, &"no protobuf form"))?;
    proto::json_to_proto(msg, json).map_err(|e| unencodable(kind, &e))
}

/// A wrapped object of a kind that is not a stored resource's (a subresource's, e.g. `Scale`)
/// from its JSON, in `repr`.
pub fn typed_object(
    api_version: &str,
    kind: &str,
    json: &Value,
    repr: Repr,
) -> Result<Vec<u8>, Status> {
    let bytes = serde_json::to_vec(json).map_err(|e| Status::internal(e.to_string()))?;
    let body = encode(kind, proto::message_for(api_version, kind), &bytes, repr)?;
    Ok(match repr {
        Repr::Metadata => envelope::wrap(META_V1, "PartialObjectMetadata", &body),
        _ => envelope::wrap(api_version, kind, &body),
    })
}

/// The `(apiVersion, kind)` one object carries in `repr`.
fn type_meta(rt: &ResourceType, repr: Repr) -> (String, String) {
    match repr {
        Repr::Metadata => (META_V1.to_string(), "PartialObjectMetadata".to_string()),
        _ => (rt.api_version(), rt.kind.clone()),
    }
}

/// A wrapped object (`k8s\0` + Unknown) in `repr`, as GET and the write verbs answer it.
pub fn object(rt: &ResourceType, obj: &StoredObject, repr: Repr) -> Result<Vec<u8>, Status> {
    let body = body_of(rt, obj, repr)?;
    let (av, kind) = type_meta(rt, repr);
    Ok(envelope::wrap(&av, &kind, &body))
}

/// A LIST body in `repr` (the kind's `XList` or a PartialObjectMetadataList) in chunks of about
/// 64 KiB, from the items' stored JSON and the list's metadata JSON.
pub fn list<'a>(
    rt: &ResourceType,
    items: impl IntoIterator<Item = &'a StoredObject>,
    list_meta: &Value,
    repr: Repr,
) -> Result<envelope::ListChunks, Status> {
    let encoded = items
        .into_iter()
        .map(|o| body_of(rt, o, repr))
        .collect::<Result<Vec<_>, _>>()?;
    let meta_json = serde_json::to_vec(list_meta).map_err(|e| Status::internal(e.to_string()))?;
    let meta = envelope::list_meta(&meta_json).map_err(|e| unencodable("ListMeta", &e))?;
    let (av, kind) = match repr {
        Repr::Metadata => (META_V1.to_string(), "PartialObjectMetadataList".to_string()),
        _ => (rt.api_version(), rt.list_kind()),
    };
    Ok(envelope::list_chunks(&av, &kind, &meta, encoded))
}

/// A chunked watch frame (4-byte length + `WatchEvent`) of an event of type `ty` whose object is
/// `obj` in `repr`.
pub fn event_frame(
    rt: &ResourceType,
    ty: &str,
    obj: &StoredObject,
    repr: Repr,
) -> Result<Bytes, Status> {
    let body = body_of(rt, obj, repr)?;
    let (av, kind) = type_meta(rt, repr);
    Ok(Bytes::from(envelope::watch_frame(
        ty,
        &envelope::wrap(&av, &kind, &body),
    )))
}

/// A BOOKMARK frame at `rv` in `repr`: the kind's empty object with only that metadata (the
/// `k8s.io/initial-events-end` annotation on the one that ends a watch-list's initial events),
/// encoded as kube encodes it.
pub fn bookmark_frame(rt: &ResourceType, rv: u64, initial_end: bool, repr: Repr) -> Bytes {
    kube_wire::event::protobuf_bookmark_frame(
        &rt.kind,
        &rt.api_version(),
        rt.builtin,
        rv,
        initial_end,
        repr == Repr::Metadata,
    )
    .unwrap_or_else(|| error_frame(&Status::internal("unable to encode a bookmark as protobuf")))
}

/// An ERROR event carrying `status`.
pub fn error_frame(status: &Status) -> Bytes {
    Bytes::from(envelope::error_frame(&status.to_json()))
}

/// How a request body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// JSON (also what an absent Content-Type means, and YAML, which the simulator reads as
    /// JSON: JSON is YAML).
    Json,
    /// Kubernetes protobuf.
    Protobuf,
}

/// The encoding of a request body from its `Content-Type`, as kube's
/// `NegotiateInputSerializer`: none means JSON; a media type none of kube's serializers reads
/// (or one Go's `mime.ParseMediaType` refuses) is kube's 415. Every endpoint has the same three
/// (a custom resource's serializers include protobuf too: its bodies fail decoding instead).
pub fn input(content_type: Option<&str>) -> Result<Input, Status> {
    let ct = content_type.unwrap_or_default();
    if ct.is_empty() {
        return Ok(Input::Json);
    }
    match parse_media_type(ct).as_deref() {
        Some("application/json" | "application/yaml") => Ok(Input::Json),
        Some(PROTOBUF) => Ok(Input::Protobuf),
        _ => Err(unsupported_media_type()),
    }
}

/// kube's 415 for a request body in an unknown format.
pub fn unsupported_media_type() -> Status {
    Status::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {INPUT_MEDIA_TYPES}"
        ),
    )
}

/// The media type of a `Content-Type`, lower-cased, as Go's `mime.ParseMediaType` reads it
/// (`type/subtype` of token characters, then `;key=value` parameters, a trailing `;` allowed);
/// `None` when Go would refuse it.
fn parse_media_type(v: &str) -> Option<String> {
    let mut parts = v.split(';');
    let media = parts.next()?.trim();
    let (ty, sub) = media.split_once('/')?;
    let token = |s: &str| !s.is_empty() && s.bytes().all(is_token_char);
    if !token(ty) || !token(sub) {
        return None;
    }
    let params: Vec<&str> = parts.map(str::trim).collect();
    for (i, p) in params.iter().enumerate() {
        if p.is_empty() && i + 1 == params.len() {
            break;
        }
        let (k, val) = p.split_once('=')?;
        let quoted = val.len() >= 2 && val.starts_with('"') && val.ends_with('"');
        if !token(k.trim()) || !(quoted || token(val.trim())) {
            return None;
        }
    }
    Some(media.to_ascii_lowercase())
}

/// RFC 2045 token characters (Go's `mime.isTokenChar`).
fn is_token_char(c: u8) -> bool {
    c.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?=".contains(&c)
}

/// A decoding failure in the words of kube's decoder where they are known (`empty data`,
/// `empty body`, `unexpected EOF`, the missing-magic message): the transcoder's reason without
/// its location; otherwise the transcoder's description.
fn go_reason(e: &ProtoError) -> String {
    match e {
        ProtoError::Protobuf { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// kube's `summarizeData`: the body's first 30 bytes as text when it looks like JSON, in hex
/// otherwise, for the messages of bodies it cannot read.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let (head, more) = match body.get(..MAX) {
        Some(h) if body.len() > MAX => (h, " ..."),
        _ => (body, ""),
    };
    match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// `(group, version)` of an apiVersion (`v1` is the core group's).
fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// The Go package of a group's internal types, as kube's conversion errors name it.
fn internal_package(group: &str) -> &str {
    if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    }
}

/// Reads a protobuf request body for an object of `rt` (create, update) back to JSON, with
/// `kind`/`apiVersion` set, for the JSON path to take over. As kube's decoder
/// (`protobuf.Serializer.Decode` under the endpoint's versioning codec, then the handler's
/// `transformDecodeError` and its apiVersion check):
/// - a body that is not an envelope: 400 "the object provided is unrecognized …";
/// - the envelope's apiVersion and kind default to the endpoint's when empty;
/// - another kind: 400 "… cannot be handled as a …" (unregistered kind, or no conversion);
/// - another apiVersion of the kind: 400 "the API version in the data … does not match …"
///   (approximated: kube says "no kind … is registered" instead for a version its scheme
///   lacks, which is known here for the core group only);
/// - a custom resource (no typed protobuf form): 400 as kube's unstructured typer refuses it
///   (kube's CR endpoints list protobuf among their serializers, so this is no 415);
/// - a malformed message: 400 with the transcoder's reason (gogo's own words differ).
pub fn decode_object(rt: &ResourceType, body: &[u8]) -> Result<Value, Status> {
    decode_typed(&rt.api_version(), &rt.kind, message(rt), body)
}

/// [`decode_object`] for an endpoint of `expected_kind` in `expected_av` whose protobuf message
/// is `expected` (none: a custom resource's).
pub fn decode_typed(
    expected_av: &str,
    expected_kind: &str,
    expected: Option<MessageRef>,
    body: &[u8],
) -> Result<Value, Status> {
    let unk = envelope::unwrap(body).map_err(|e| {
        Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {} ({})",
            expected_kind,
            go_reason(&e),
            summarize(body)
        ))
    })?;
    let kind = if unk.kind.is_empty() {
        expected_kind
    } else {
        unk.kind
    };
    let (mut group, mut version) = group_version(unk.api_version);
    if version.is_empty() {
        (group, version) = group_version(expected_av);
    }
    let av = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let cannot = |why: &dyn Display| {
        Status::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {}: {why}",
            expected_kind
        ))
    };
    let Some(expected) = expected else {
        // kube's unstructured typer cannot type an empty object to decode into.
        return Err(cannot(
            &"Object 'Kind' is missing in 'object has no kind field '",
        ));
    };
    // The core group has only v1 in kube's scheme; other groups keep older versions of their
    // kinds registered (read, converted, then refused for their apiVersion).
    if kind == expected_kind && group.is_empty() && version != "v1" {
        return Err(cannot(&format!(
            "no kind {kind:?} is registered for version {av:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        )));
    }
    if kind == expected_kind && av != expected_av {
        return Err(Status::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({expected_av})"
        )));
    }
    if kind != expected_kind {
        let Some(other) = proto::message_for(&av, kind) else {
            return Err(cannot(&format!(
                "no kind {kind:?} is registered for version {av:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""
            )));
        };
        proto::proto_to_json(other, unk.raw, None).map_err(|e| cannot(&go_reason(&e)))?;
        return Err(cannot(&format!(
            "converting ({version}.{kind}) to ({}.{}): unknown conversion",
            internal_package(group_version(expected_av).0),
            expected_kind
        )));
    }
    let json = proto::proto_to_json(expected, unk.raw, Some((expected_av, expected_kind)))
        .map_err(|e| cannot(&go_reason(&e)))?;
    serde_json::from_slice(&json).map_err(|e| cannot(&e))
}

/// Reads a protobuf `DeleteOptions` body back to JSON. kube decodes it with its meta codecs
/// (any endpoint, custom resources included); its errors are 400s with the decoder's message.
pub fn decode_delete_options(body: &[u8]) -> Result<Value, Status> {
    let bad = |e: &ProtoError| Status::bad_request(go_reason(e));
    let unk = envelope::unwrap(body).map_err(|e| bad(&e))?;
    let kind = if unk.kind.is_empty() {
        "DeleteOptions"
    } else {
        unk.kind
    };
    let av = if unk.api_version.is_empty() {
        "meta.k8s.io/v1"
    } else {
        unk.api_version
    };
    if kind != "DeleteOptions" {
        return Err(Status::bad_request(format!(
            "no kind {kind:?} is registered for version {av:?} in scheme \"k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:27\""
        )));
    }
    let msg = proto::message(schema::DELETE_OPTIONS)
        .ok_or_else(|| Status::internal("no DeleteOptions message"))?;
    let json = proto::proto_to_json(msg, unk.raw, None).map_err(|e| bad(&e))?;
    serde_json::from_slice(&json).map_err(|e| Status::bad_request(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_as_go_parses_them() {
        assert_eq!(input(None).unwrap(), Input::Json);
        assert_eq!(input(Some("")).unwrap(), Input::Json);
        assert_eq!(
            input(Some("application/json; charset=utf-8")).unwrap(),
            Input::Json
        );
        assert_eq!(input(Some("Application/JSON;")).unwrap(), Input::Json);
        assert_eq!(input(Some("application/yaml")).unwrap(), Input::Json);
        assert_eq!(
            input(Some("application/vnd.kubernetes.protobuf")).unwrap(),
            Input::Protobuf
        );
        for bad in [
            "text/plain",
            "application/merge-patch+json",
            "application/json; charset",
            "application",
            "application/json/x",
        ] {
            let e = input(Some(bad)).unwrap_err();
            assert_eq!(
                (e.code, e.reason.as_str()),
                (415, "UnsupportedMediaType"),
                "{bad}"
            );
            assert_eq!(
                e.message,
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            );
        }
    }

    /// watchmux cuts a PartialObjectMetadata out of the object's message; encoding it from the
    /// JSON directly, as here, gives the same bytes.
    #[test]
    fn metadata_from_json_is_metadata_cut_from_the_object() {
        for (av, kind, json) in [
            (
                "v1",
                "Pod",
                include_str!("../../kube-wire/src/proto/testdata/pod.json"),
            ),
            (
                "apps/v1",
                "Deployment",
                include_str!("../../kube-wire/src/proto/testdata/deployment.json"),
            ),
        ] {
            let msg = proto::message_for(av, kind).unwrap();
            let object = proto::json_to_proto(msg, json.as_bytes()).unwrap();
            let cut = envelope::partial_object_metadata(msg, &object).unwrap();
            let pom = proto::message(schema::PARTIAL_OBJECT_METADATA).unwrap();
            assert_eq!(proto::json_to_proto(pom, json.as_bytes()).unwrap(), cut);
        }
    }

    #[test]
    fn summaries_as_kube() {
        assert_eq!(summarize(b""), "<empty>");
        assert_eq!(summarize(b"{\"a\":1}"), "{\"a\":1}");
        assert_eq!(summarize(b"k8s"), "6b3873");
        assert_eq!(summarize(&[b'{'; 31]), format!("{} ...", "{".repeat(30)));
    }
}
