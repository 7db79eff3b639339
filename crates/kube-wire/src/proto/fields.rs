//! Single fields of an encoded object, read by their JSON path (`metadata.name`, `spec.nodeName`,
//! `metadata.labels`) without decoding the rest: what a cache that keeps the upstream's
//! protobuf bytes needs to file an object (its record: namespace, name, resourceVersion, labels,
//! the kind's selectable fields).
//!
//! The path is followed through the schema ([`super::model`]): each part is a JSON key of the
//! message it is read in (keys of inline fields included), each step one length-delimited field
//! of the wire bytes. Where kube's encoder writes a singular field once, a repeated occurrence
//! is read as protobuf merges a scalar: the last one wins (nested messages are followed into
//! their last occurrence, which is all kube's encoder writes).
//!
//! A field that is absent on the wire is `None`: gogo writes every non-pointer scalar, zero
//! included, so absence means a nil pointer or an empty string or map. Malformed bytes are a
//! [`ProtoError`], never a panic.

use super::model::{Elem, Field, Message, MessageRef, Shape};
use super::wire::{self, Occ};
use super::{ProtoError, schema};

/// A scalar field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// A string.
    Str(&'a str),
    /// A bool.
    Bool(bool),
    /// An integer (int32, int64, uint32 within range).
    Int(i64),
}

impl std::fmt::Display for FieldValue<'_> {
    /// As a field selector compares it: the string, `true`/`false`, the decimal number.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldValue::Str(s) => f.write_str(s),
            FieldValue::Bool(b) => write!(f, "{b}"),
            FieldValue::Int(i) => write!(f, "{i}"),
        }
    }
}

/// The scalar at `path` in the encoded message `pb` of type `msg`, if present. A path that the
/// schema does not have, or that ends at a message, a list or a map, is an error.
pub fn read_scalar<'a>(
    msg: MessageRef,
    pb: &'a [u8],
    path: &str,
) -> Result<Option<FieldValue<'a>>, ProtoError> {
    let (parent, field) = locate(msg, pb, path)?;
    check_scalar(field, path)?;
    let Some(parent) = parent else {
        return Ok(None);
    };
    match find(parent, field.tag, false, path)? {
        Some(occ) => scalar(field, occ, path).map(Some),
        None => Ok(None),
    }
}

/// A path must end at a string, bool or integer that is not a list or a map.
fn check_scalar(field: &Field, path: &str) -> Result<(), ProtoError> {
    let scalar_elem = matches!(
        field.elem,
        Elem::String | Elem::Bool | Elem::Int32 | Elem::Int64 | Elem::Uint32
    );
    if !scalar_elem || field.shape == Shape::Slice || field.shape == Shape::Map {
        return Err(not_scalar(path));
    }
    Ok(())
}

/// The string-to-string map at `path` (`metadata.labels`), in wire order (kube writes keys
/// sorted); empty when absent.
pub fn read_string_map<'a>(
    msg: MessageRef,
    pb: &'a [u8],
    path: &str,
) -> Result<Vec<(&'a str, &'a str)>, ProtoError> {
    let (parent, field) = locate(msg, pb, path)?;
    if field.shape != Shape::Map || field.elem != Elem::String {
        return Err(ProtoError::protobuf(path, "not a map of strings"));
    }
    let mut out = Vec::new();
    let Some(parent) = parent else {
        return Ok(out);
    };
    for occ in occurrences(parent, field.tag, path)? {
        let Occ::Bytes(entry) = occ else {
            return Err(ProtoError::protobuf(
                path,
                "a map entry is not length-delimited",
            ));
        };
        let (mut key, mut value) = ("", "");
        for f in wire::fields(entry, path) {
            match f? {
                (1, Occ::Bytes(b)) => key = text(b, path)?,
                (2, Occ::Bytes(b)) => value = text(b, path)?,
                _ => {}
            }
        }
        out.push((key, value));
    }
    Ok(out)
}

/// The schema field `path` ends at, and the encoded message that holds it (`None`: a message
/// on the way is absent).
fn locate<'a>(
    msg: MessageRef,
    pb: &'a [u8],
    path: &str,
) -> Result<(Option<&'a [u8]>, &'static Field), ProtoError> {
    let (steps, field) = resolve(msg, path)?;
    Ok((walk(&steps, pb, path)?, field))
}

/// Message fields followed one after the other: each one's tag, and whether its first
/// occurrence is followed rather than its last.
type Steps = Vec<(u32, bool)>;

/// The message fields on the way to `path` in `msg`'s schema (their tag, and whether the first
/// occurrence is followed: a list's first element, `podIPs[0]`, rather than the last), and the
/// field it ends at.
fn resolve(msg: MessageRef, path: &str) -> Result<(Steps, &'static Field), ProtoError> {
    let mut message: &'static Message = msg.message();
    let mut steps = Vec::new();
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let (part, first) = match part.strip_suffix("[0]") {
            Some(p) => (p, true),
            None => (part, false),
        };
        let indices = message.key(part).ok_or_else(|| {
            ProtoError::protobuf(path, format!("{} has no field {part:?}", message.name))
        })?;
        for (n, &i) in indices.iter().enumerate() {
            let field = message
                .fields
                .get(usize::from(i))
                .ok_or_else(|| ProtoError::protobuf(path, "schema index out of range"))?;
            if parts.peek().is_none() && n + 1 == indices.len() {
                return Ok((steps, field));
            }
            let Elem::Message(id) = field.elem else {
                return Err(not_scalar(path));
            };
            let into_first = first && field.shape == Shape::Slice && n + 1 == indices.len();
            if field.shape == Shape::Map || (field.shape == Shape::Slice && !into_first) {
                return Err(ProtoError::protobuf(path, "a path through a list or a map"));
            }
            message = schema::MESSAGES
                .get(usize::from(id))
                .ok_or_else(|| ProtoError::protobuf(path, "schema index out of range"))?;
            steps.push((field.tag, into_first));
        }
    }
    Err(ProtoError::protobuf(path, "an empty path"))
}

/// The encoded message `steps` lead to from `pb` (`None`: one on the way is absent).
fn walk<'a>(
    steps: &[(u32, bool)],
    pb: &'a [u8],
    path: &str,
) -> Result<Option<&'a [u8]>, ProtoError> {
    let mut buf = pb;
    for &(tag, first) in steps {
        match find(buf, tag, first, path)? {
            Some(Occ::Bytes(inner)) => buf = inner,
            Some(_) => return Err(wire_type(path)),
            None => return Ok(None),
        }
    }
    Ok(Some(buf))
}

/// Whether `path` names a scalar field of `msg` in the schema (whatever an object holds).
pub fn has_scalar(msg: MessageRef, path: &str) -> bool {
    read_scalar(msg, &[], path).is_ok()
}

/// A scalar path ([`read_scalar`]'s) resolved through the schema once, then read from any
/// number of objects of its message without allocating or looking names up: what a cache
/// filing every object it ingests uses.
#[derive(Debug, Clone)]
pub struct ScalarPath {
    path: &'static str,
    /// The message fields on the way: their tag, and whether the first occurrence is followed
    /// (a list's first element, `podIPs[0]`) rather than the last.
    steps: Steps,
    field: &'static Field,
}

impl ScalarPath {
    /// `path` in `msg`'s schema; an error where [`read_scalar`] would give one for any object.
    pub fn new(msg: MessageRef, path: &'static str) -> Result<ScalarPath, ProtoError> {
        let (steps, field) = resolve(msg, path)?;
        check_scalar(field, path)?;
        Ok(ScalarPath { path, steps, field })
    }

    /// The path as written.
    pub fn path(&self) -> &'static str {
        self.path
    }

    /// The scalar in the encoded message `pb`, if present: what [`read_scalar`] reads.
    pub fn read<'a>(&self, pb: &'a [u8]) -> Result<Option<FieldValue<'a>>, ProtoError> {
        let Some(parent) = walk(&self.steps, pb, self.path)? else {
            return Ok(None);
        };
        match find(parent, self.field.tag, false, self.path)? {
            Some(occ) => scalar(self.field, occ, self.path).map(Some),
            None => Ok(None),
        }
    }
}

/// The first (`first`) or last occurrence of field `tag` in `buf`, every field of which is
/// read (so malformed bytes are an error wherever they are).
fn find<'a>(buf: &'a [u8], tag: u32, first: bool, at: &str) -> Result<Option<Occ<'a>>, ProtoError> {
    if !first {
        return wire::fields(buf, at).last(tag);
    }
    let mut found = None;
    for f in wire::fields(buf, at) {
        let (t, occ) = f?;
        if t == tag && found.is_none() {
            found = Some(occ);
        }
    }
    Ok(found)
}

/// Every occurrence of field `tag` in `buf`, in wire order.
fn occurrences<'a>(buf: &'a [u8], tag: u32, at: &str) -> Result<Vec<Occ<'a>>, ProtoError> {
    wire::fields(buf, at)
        .filter(|f| f.as_ref().map_or(true, |(t, _)| *t == tag))
        .map(|f| f.map(|(_, o)| o))
        .collect()
}

fn scalar<'a>(field: &Field, occ: Occ<'a>, path: &str) -> Result<FieldValue<'a>, ProtoError> {
    Ok(match (field.elem, occ) {
        (Elem::String, Occ::Bytes(b)) => FieldValue::Str(text(b, path)?),
        (Elem::Bool, Occ::Varint(v)) => FieldValue::Bool(v != 0),
        // Go's int32 is sign-extended to 64 bits on the wire.
        (Elem::Int32, Occ::Varint(v)) => FieldValue::Int(i64::from(v as i32)),
        (Elem::Int64, Occ::Varint(v)) => FieldValue::Int(v as i64),
        (Elem::Uint32, Occ::Varint(v)) => FieldValue::Int(i64::from(v as u32)),
        _ => return Err(wire_type(path)),
    })
}

fn text<'a>(b: &'a [u8], path: &str) -> Result<&'a str, ProtoError> {
    std::str::from_utf8(b).map_err(|_| ProtoError::protobuf(path, "a string is not UTF-8"))
}

fn not_scalar(path: &str) -> ProtoError {
    ProtoError::protobuf(path, "not a string, bool or integer field")
}

fn wire_type(path: &str) -> ProtoError {
    ProtoError::protobuf(path, "the wire type does not match the field")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{json_to_proto, message_for};
    use serde_json::Value;

    /// `(apiVersion, kind, JSON, scalar paths)`: each path read from the protobuf equals the
    /// JSON's value, or is absent where the JSON has none.
    const CASES: &[(&str, &str, &str, &[&str])] = &[
        (
            "v1",
            "Pod",
            include_str!("testdata/pod.json"),
            &[
                "metadata.name",
                "metadata.namespace",
                "metadata.uid",
                "metadata.resourceVersion",
                "metadata.generation",
                "metadata.generateName",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
                "status.podIPs[0].ip",
            ],
        ),
        (
            "v1",
            "Node",
            include_str!("testdata/node.json"),
            &["metadata.name", "spec.unschedulable", "spec.podCIDR"],
        ),
        (
            "apps/v1",
            "Deployment",
            include_str!("testdata/deployment.json"),
            &[
                "metadata.name",
                "spec.replicas",
                "spec.paused",
                "status.observedGeneration",
                "status.readyReplicas",
            ],
        ),
        (
            "v1",
            "Event",
            include_str!("testdata/event.json"),
            &[
                "involvedObject.kind",
                "involvedObject.name",
                "reason",
                "type",
                "source.component",
                "count",
            ],
        ),
        (
            "v1",
            "Secret",
            include_str!("testdata/secret.json"),
            &["metadata.name", "type", "immutable"],
        ),
    ];

    fn json_value(obj: &Value, path: &str) -> Option<String> {
        let pointer = format!("/{}", path.replace("[0]", "/0").replace('.', "/"));
        match obj.pointer(&pointer)? {
            Value::String(s) => Some(s.clone()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(n.to_string()),
            Value::Null => None,
            other => panic!("{path} is not a scalar in the fixture: {other}"),
        }
    }

    #[test]
    fn scalars_and_labels_read_from_protobuf_equal_the_json() {
        for (api_version, kind, json, paths) in CASES {
            let msg = message_for(api_version, kind).unwrap();
            let pb = json_to_proto(msg, json.as_bytes()).unwrap();
            let obj: Value = serde_json::from_str(json).unwrap();
            let mut present = 0;
            for path in *paths {
                let got = read_scalar(msg, &pb, path).unwrap();
                // A path resolved once reads the same.
                assert_eq!(ScalarPath::new(msg, path).unwrap().read(&pb).unwrap(), got);
                let want = json_value(&obj, path);
                // gogo writes zero scalars that JSON omits (omitempty): absent in JSON and
                // zero in protobuf is the same value.
                match (&want, got) {
                    (Some(w), Some(g)) => {
                        present += 1;
                        assert_eq!(&g.to_string(), w, "{kind} {path}");
                    }
                    (None, None) => {}
                    (None, Some(g)) => assert!(
                        matches!(
                            g,
                            FieldValue::Str("") | FieldValue::Bool(false) | FieldValue::Int(0)
                        ),
                        "{kind} {path}: {g:?} in protobuf, absent in JSON"
                    ),
                    (Some(w), None) => panic!("{kind} {path}: {w} in JSON, absent in protobuf"),
                }
            }
            assert!(
                present * 2 >= paths.len(),
                "{kind}: the fixture sets most of its paths"
            );
            let labels = read_string_map(msg, &pb, "metadata.labels").unwrap();
            let want: Vec<(String, String)> = obj["metadata"]["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            let got: Vec<(String, String)> = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(got, want, "{kind} labels");
        }
    }

    #[test]
    fn absent_messages_and_bad_paths_and_bytes() {
        let msg = message_for("v1", "Pod").unwrap();
        let pb = json_to_proto(msg, br#"{"metadata":{"name":"p"}}"#).unwrap();
        assert_eq!(
            read_scalar(msg, &pb, "metadata.name").unwrap(),
            Some(FieldValue::Str("p"))
        );
        // No spec on the wire (an empty message is still written by gogo: either way, no
        // nodeName is read).
        assert!(matches!(
            read_scalar(msg, &pb, "spec.nodeName").unwrap(),
            None | Some(FieldValue::Str(""))
        ));
        assert!(
            read_string_map(msg, &pb, "metadata.labels")
                .unwrap()
                .is_empty()
        );
        for bad in [
            "spec.nope",
            "spec",
            "spec.containers.name",
            "metadata.labels",
            "",
        ] {
            assert!(read_scalar(msg, &pb, bad).is_err(), "{bad}");
            assert!(ScalarPath::new(msg, bad).is_err(), "{bad}");
        }
        assert!(read_string_map(msg, &pb, "metadata.name").is_err());
        assert!(has_scalar(msg, "spec.nodeName") && has_scalar(msg, "status.podIPs[0].ip"));
        assert!(!has_scalar(msg, "spec.clusterIP") && !has_scalar(msg, "status.podIPs.ip"));
        // Truncated or garbage bytes: an error, never a panic.
        for cut in 1..pb.len() {
            let _ = read_scalar(msg, &pb[..cut], "metadata.name");
        }
        assert!(read_scalar(msg, &[0x0a, 0xff], "metadata.name").is_err());
        assert!(read_scalar(msg, &[0x0a, 0x02, 0x1a, 0x80], "metadata.name").is_err());
        let name = ScalarPath::new(msg, "metadata.name").unwrap();
        for cut in 1..pb.len() {
            let _ = name.read(&pb[..cut]);
        }
        assert!(name.read(&[0x0a, 0xff]).is_err());
        assert!(name.read(&[0x0a, 0x02, 0x1a, 0x80]).is_err());
    }
}
