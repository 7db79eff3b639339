//! Fuzz target `proto`: the JSON↔protobuf transcoder and kube's envelope
//! ([`json_to_proto`], [`proto_to_json`], [`envelope::unwrap`], [`envelope::wrap`],
//! [`envelope::partial_object_metadata`]). watchmux transcodes the upstream's JSON objects for
//! protobuf clients; the simulator reads protobuf request bodies.
//!
//! Input, by its first bytes: a JSON document (an object of the kind its `kind`/`apiVersion`
//! name, or else of a Pod, a CRD — JSON schemas nest — and a custom resource's
//! PartialObjectMetadata, as watchmux transcodes those); a `k8s\0` envelope (decoded as the
//! kind it names); anything else, a bare message body of a few kinds (WatchEvent, Pod, CRD,
//! Status, DeleteOptions, PartialObjectMetadataList, Event, ConfigMap).
//!
//! Invariants: JSON → protobuf → JSON is a fixpoint after one round (the second round gives
//! the same JSON and the same protobuf); the decoder's JSON is itself a fixpoint; an envelope
//! re-wraps to the same envelope; an object's PartialObjectMetadata has the object's metadata;
//! malformed input is a [`kube_wire::proto::ProtoError`], never a panic, at any nesting
//! (bounded by the decoder's depth limit and `serde_json`'s).

use kube_wire::proto::{self, MessageRef, envelope, json_to_proto, proto_to_json, schema};
use serde::Deserialize;
use serde_json::Value;

/// The kinds a bare message body is read as.
const BARE: &[u16] = &[
    schema::WATCH_EVENT,
    schema::POD,
    schema::CUSTOM_RESOURCE_DEFINITION,
    schema::STATUS,
    schema::DELETE_OPTIONS,
    schema::PARTIAL_OBJECT_METADATA_LIST,
    schema::EVENT,
    schema::CONFIG_MAP,
];

/// The kinds a JSON document of no known kind is encoded as.
const UNTYPED: &[u16] = &[
    schema::POD,
    schema::CUSTOM_RESOURCE_DEFINITION,
    schema::PARTIAL_OBJECT_METADATA,
];

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct TypeMeta {
    kind: String,
    api_version: String,
}

fn msg(id: u16) -> MessageRef {
    proto::message(id).expect("a schema constant names a message")
}

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    let first = data.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        let tm: TypeMeta = serde_json::from_slice(data).unwrap_or_default();
        match proto::message_for(&tm.api_version, &tm.kind) {
            Some(m) => from_json(m, data),
            None => UNTYPED.iter().for_each(|id| from_json(msg(*id), data)),
        }
    } else if data.starts_with(&envelope::MAGIC) {
        wrapped(data);
    } else {
        for id in BARE {
            from_proto(msg(*id), data, None);
        }
    }
}

fn json_text(j: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(j)
}

/// JSON → protobuf → JSON, twice.
fn from_json(m: MessageRef, json: &[u8]) {
    let Ok(pb) = json_to_proto(m, json) else {
        return;
    };
    let name = m.name();
    let j1 = proto_to_json(m, &pb, None)
        .unwrap_or_else(|e| panic!("{name}: the encoder's output does not decode: {e}"));
    let v1: Value = serde_json::from_slice(&j1)
        .unwrap_or_else(|e| panic!("{name}: decoded {:?} is not JSON: {e}", json_text(&j1)));
    let pb1 = json_to_proto(m, &j1)
        .unwrap_or_else(|e| panic!("{name}: decoded {:?} does not encode: {e}", json_text(&j1)));
    let j2 = proto_to_json(m, &pb1, None)
        .unwrap_or_else(|e| panic!("{name}: re-encoded message does not decode: {e}"));
    assert_eq!(
        json_text(&j2),
        json_text(&j1),
        "{name}: JSON → protobuf → JSON is not a fixpoint after one round"
    );
    assert_eq!(
        json_to_proto(m, &j2).ok(),
        Some(pb1),
        "{name}: the protobuf of the fixpoint changes"
    );
    let wrapped = envelope::wrap("v1", name, &pb);
    let unk = envelope::unwrap(&wrapped).expect("a wrapped message unwraps");
    assert_eq!((unk.api_version, unk.kind, unk.raw), ("v1", name, &pb[..]));
    metadata(m, &pb, &v1);
}

/// An object's PartialObjectMetadata carries the object's metadata.
fn metadata(m: MessageRef, pb: &[u8], object: &Value) {
    let name = m.name();
    // Objects: the kinds with an ObjectMeta (not lists, Status or DeleteOptions).
    let is_object = schema::ROOTS.iter().any(|r| {
        proto::message(r.message) == Some(m)
            && !r.kind.ends_with("List")
            && !matches!(r.kind, "Status" | "DeleteOptions")
    });
    if !is_object {
        return;
    }
    let pom = envelope::partial_object_metadata(m, pb)
        .unwrap_or_else(|e| panic!("{name}: no PartialObjectMetadata: {e}"));
    let j = proto_to_json(msg(schema::PARTIAL_OBJECT_METADATA), &pom, None)
        .unwrap_or_else(|e| panic!("{name}: its PartialObjectMetadata does not decode: {e}"));
    let v: Value = serde_json::from_slice(&j).expect("decoded JSON");
    assert_eq!(
        v.get("metadata"),
        object.get("metadata"),
        "{name}: PartialObjectMetadata's metadata"
    );
}

/// protobuf → JSON: the JSON encodes, and reads back as the same value (not always the same
/// text: a string that is not UTF-8 is written with `\ufffd` escapes, as Go writes it, and
/// the U+FFFD it then holds is written as it is); from there, JSON → protobuf → JSON is a
/// fixpoint.
fn from_proto(m: MessageRef, pb: &[u8], type_meta: Option<(&str, &str)>) {
    let Ok(j) = proto_to_json(m, pb, type_meta) else {
        return;
    };
    let name = m.name();
    let v: Value = serde_json::from_slice(&j)
        .unwrap_or_else(|e| panic!("{name}: decoded {:?} is not JSON: {e}", json_text(&j)));
    let pb1 = json_to_proto(m, &j)
        .unwrap_or_else(|e| panic!("{name}: decoded {:?} does not encode: {e}", json_text(&j)));
    let j1 = proto_to_json(m, &pb1, type_meta)
        .unwrap_or_else(|e| panic!("{name}: re-encoded message does not decode: {e}"));
    let v1: Value = serde_json::from_slice(&j1).expect("decoded JSON");
    assert_eq!(v1, v, "{name}: the decoder's JSON reads back differently");
    let j2 = json_to_proto(m, &j1)
        .and_then(|pb2| proto_to_json(m, &pb2, type_meta))
        .unwrap_or_else(|e| panic!("{name}: the second round fails: {e}"));
    assert_eq!(
        json_text(&j2),
        json_text(&j1),
        "{name}: the decoder's JSON is not a fixpoint after one round"
    );
}

fn wrapped(data: &[u8]) {
    let Ok(unk) = envelope::unwrap(data) else {
        return;
    };
    let again = envelope::wrap(unk.api_version, unk.kind, unk.raw);
    let back = envelope::unwrap(&again).expect("a re-wrapped envelope unwraps");
    assert_eq!(
        (back.api_version, back.kind, back.raw),
        (unk.api_version, unk.kind, unk.raw)
    );
    if let Some(m) = proto::message_for(unk.api_version, unk.kind) {
        from_proto(m, unk.raw, Some((unk.api_version, unk.kind)));
    }
}
