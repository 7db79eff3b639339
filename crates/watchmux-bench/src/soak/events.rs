//! What a soak watcher reads, decoded just far enough to check it: each watch event's type and
//! its object's key (`namespace/name`), identity (`uid`) and resourceVersion; a BOOKMARK's
//! resourceVersion and whether it ends a watch-list's initial events; an ERROR's Status; a
//! LIST's resourceVersion and items. JSON lines (chunked or websocket text) and protobuf
//! `WatchEvent`s (chunked frames or websocket binary messages) decode to the same [`Decoded`].
//!
//! Decoding only: no I/O, no bookkeeping (that is [`super::checker`]'s). The bytes come from the
//! proxy under test, so nothing here panics on bad input: what does not decode is an `Err`
//! the watcher reports as a violation (a malformed event must never reach a client).

use std::collections::BTreeMap;

use k8s_pb::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status as PbStatus};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde::Deserialize;

use super::checker::Obj;
use crate::pbframe::{self, MAGIC};
use kube_wire::event::INITIAL_EVENTS_END;

/// The type of an event that carries an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjEvent {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl ObjEvent {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            ObjEvent::Added => "ADDED",
            ObjEvent::Modified => "MODIFIED",
            ObjEvent::Deleted => "DELETED",
        }
    }

    fn parse(ty: &[u8]) -> Option<ObjEvent> {
        match ty {
            b"ADDED" => Some(ObjEvent::Added),
            b"MODIFIED" => Some(ObjEvent::Modified),
            b"DELETED" => Some(ObjEvent::Deleted),
            _ => None,
        }
    }
}

/// One decoded watch event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// An object changed.
    Object {
        /// Event type.
        ty: ObjEvent,
        /// `namespace/name`.
        key: String,
        /// resourceVersion and uid.
        obj: Obj,
    },
    /// A BOOKMARK.
    Bookmark {
        /// Its resourceVersion.
        rv: u64,
        /// It carries `k8s.io/initial-events-end: "true"`.
        initial_end: bool,
    },
    /// An ERROR event: its Status.
    Error(StatusInfo),
}

/// The parts of a kube Status the soak reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusInfo {
    /// `code`.
    pub code: u16,
    /// `reason`.
    pub reason: String,
    /// `message`.
    pub message: String,
}

#[derive(Deserialize)]
struct JsonEvent {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    object: JsonObject,
}

#[derive(Deserialize, Default)]
struct JsonObject {
    #[serde(default)]
    metadata: JsonMeta,
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, Default)]
struct JsonMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

fn rv(text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("resourceVersion {text:?} is not a number"))
}

fn object(ty: ObjEvent, name: &str, namespace: &str, uid: &str, version: &str) -> Decoded {
    Decoded::Object {
        ty,
        key: format!("{namespace}/{name}"),
        obj: Obj {
            rv: version.parse().unwrap_or(0),
            uid: uid.to_string(),
        },
    }
}

fn checked(d: Decoded) -> Result<Decoded, String> {
    match &d {
        Decoded::Object { key, obj, .. } if obj.rv == 0 || obj.uid.is_empty() || key == "/" => Err(
            format!("object event without name, uid or resourceVersion: {d:?}"),
        ),
        _ => Ok(d),
    }
}

/// One JSON watch event (a line, its newline optional).
pub fn json_event(line: &[u8]) -> Result<Decoded, String> {
    let e: JsonEvent = serde_json::from_slice(line).map_err(|e| {
        let shown = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
        format!("not a JSON watch event ({e}): {shown}")
    })?;
    let m = &e.object.metadata;
    match e.ty.as_str() {
        "BOOKMARK" => Ok(Decoded::Bookmark {
            rv: rv(&m.resource_version)?,
            initial_end: m.annotations.get(INITIAL_EVENTS_END).map(String::as_str) == Some("true"),
        }),
        "ERROR" => Ok(Decoded::Error(StatusInfo {
            code: e.object.code.unwrap_or(0),
            reason: e.object.reason.clone().unwrap_or_default(),
            message: e.object.message.clone().unwrap_or_default(),
        })),
        other => {
            let ty = ObjEvent::parse(other.as_bytes())
                .ok_or_else(|| format!("unknown event type {other:?}"))?;
            checked(object(
                ty,
                &m.name,
                &m.namespace,
                &m.uid,
                &m.resource_version,
            ))
        }
    }
}

/// The Status of a non-200 answer's JSON body (code 0 when it is not one).
pub fn json_status(body: &[u8]) -> StatusInfo {
    let o: JsonObject = serde_json::from_slice(body).unwrap_or_default();
    StatusInfo {
        code: o.code.unwrap_or(0),
        reason: o.reason.unwrap_or_default(),
        message: o.message.unwrap_or_default(),
    }
}

/// The `runtime.Unknown` in kube's envelope (`k8s\0` + message).
fn unknown(raw: &[u8]) -> Result<Unknown, String> {
    let body = raw
        .strip_prefix(MAGIC)
        .ok_or_else(|| "object without the k8s\\0 envelope".to_string())?;
    Unknown::decode(body).map_err(|e| format!("envelope: {e}"))
}

/// One protobuf watch event (a `WatchEvent` message, without its length prefix).
pub fn protobuf_event(event: &[u8]) -> Result<Decoded, String> {
    let ty = pbframe::event_type(event);
    if ty == b"ERROR" {
        let raw = pbframe::field(event, 2)
            .and_then(|o| pbframe::field(o, 1))
            .ok_or_else(|| "ERROR event without an object".to_string())?;
        let s = PbStatus::decode(unknown(raw)?.raw.unwrap_or_default().as_slice())
            .map_err(|e| format!("Status: {e}"))?;
        return Ok(Decoded::Error(StatusInfo {
            code: s.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0),
            reason: s.reason.unwrap_or_default(),
            message: s.message.unwrap_or_default(),
        }));
    }
    let meta = pbframe::object_meta(event).ok_or_else(|| {
        format!(
            "protobuf event {:?} without object metadata",
            String::from_utf8_lossy(ty)
        )
    })?;
    let m = ObjectMeta::decode(meta).map_err(|e| format!("ObjectMeta: {e}"))?;
    let version = m.resource_version.unwrap_or_default();
    if ty == b"BOOKMARK" {
        return Ok(Decoded::Bookmark {
            rv: rv(&version)?,
            initial_end: m.annotations.get(INITIAL_EVENTS_END).map(String::as_str) == Some("true"),
        });
    }
    let ty = ObjEvent::parse(ty)
        .ok_or_else(|| format!("unknown event type {:?}", String::from_utf8_lossy(ty)))?;
    checked(object(
        ty,
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default(),
        &version,
    ))
}

/// A LIST's resourceVersion and its items.
pub type Listed = (u64, Vec<(String, Obj)>);

#[derive(Deserialize)]
struct JsonList {
    #[serde(default)]
    metadata: JsonMeta,
    #[serde(default, deserialize_with = "kube_wire::list::nullable")]
    items: Vec<JsonItem>,
}

#[derive(Deserialize)]
struct JsonItem {
    #[serde(default)]
    metadata: JsonMeta,
}

fn item(m: &JsonMeta) -> (String, Obj) {
    (
        format!("{}/{}", m.namespace, m.name),
        Obj {
            rv: m.resource_version.parse().unwrap_or(0),
            uid: m.uid.clone(),
        },
    )
}

/// A JSON list body.
pub fn json_list(body: &[u8]) -> Result<Listed, String> {
    let l: JsonList = serde_json::from_slice(body).map_err(|e| format!("list body: {e}"))?;
    Ok((
        rv(&l.metadata.resource_version)?,
        l.items.iter().map(|i| item(&i.metadata)).collect(),
    ))
}

/// A protobuf list body (`k8s\0` + `runtime.Unknown` of a `PodList`): its `ListMeta` (field 1)
/// and each item's `ObjectMeta` (field 1 of each field-2 item) are all that is decoded.
pub fn protobuf_list(body: &[u8]) -> Result<Listed, String> {
    let raw = unknown(body)?.raw.unwrap_or_default();
    let mut version = None;
    let mut items = Vec::new();
    let mut bad = None;
    pbframe::each_field(&raw, |tag, value| {
        match tag {
            1 => version = pbframe::field(value, 2),
            2 => match pbframe::field(value, 1).map(ObjectMeta::decode) {
                Some(Ok(m)) => items.push((
                    format!(
                        "{}/{}",
                        m.namespace.unwrap_or_default(),
                        m.name.unwrap_or_default()
                    ),
                    Obj {
                        rv: m.resource_version.and_then(|r| r.parse().ok()).unwrap_or(0),
                        uid: m.uid.unwrap_or_default(),
                    },
                )),
                _ => bad = Some("a list item without decodable metadata".to_string()),
            },
            _ => {}
        }
        bad.is_none()
    });
    if let Some(b) = bad {
        return Err(b);
    }
    let version = version.ok_or_else(|| "list without a resourceVersion".to_string())?;
    Ok((rv(&String::from_utf8_lossy(version))?, items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::proto::{envelope, json_to_proto, message_for};
    use serde_json::json;

    fn pod(name: &str, rv: &str) -> serde_json::Value {
        json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "n",
            "uid": format!("uid-{name}"), "resourceVersion": rv,
            "annotations": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    }

    fn pb_event(ty: &str, obj: &serde_json::Value, kind: &str) -> Vec<u8> {
        let msg = message_for("v1", kind).unwrap();
        let body = json_to_proto(msg, obj.to_string().as_bytes()).unwrap();
        envelope::watch_event(ty, &envelope::wrap("v1", kind, &body))
    }

    #[test]
    fn json_and_protobuf_events_decode_alike() {
        let p = pod("a", "17");
        let expected = Decoded::Object {
            ty: ObjEvent::Modified,
            key: "n/a".into(),
            obj: Obj {
                rv: 17,
                uid: "uid-a".into(),
            },
        };
        let line = json!({"type": "MODIFIED", "object": p}).to_string();
        assert_eq!(json_event(line.as_bytes()).unwrap(), expected);
        assert_eq!(
            protobuf_event(&pb_event("MODIFIED", &p, "Pod")).unwrap(),
            expected
        );

        let bm = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "20",
            "annotations": {INITIAL_EVENTS_END: "true"}}});
        let want = Decoded::Bookmark {
            rv: 20,
            initial_end: true,
        };
        let line = json!({"type": "BOOKMARK", "object": bm}).to_string();
        assert_eq!(json_event(line.as_bytes()).unwrap(), want);
        assert_eq!(
            protobuf_event(&pb_event("BOOKMARK", &bm, "Pod")).unwrap(),
            want
        );

        let st = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410});
        let line = json!({"type": "ERROR", "object": st}).to_string();
        let Decoded::Error(s) = json_event(line.as_bytes()).unwrap() else {
            panic!("not an error")
        };
        assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
        let frame = envelope::error_frame(st.to_string().as_bytes());
        let event = frame.get(4..).unwrap();
        let Decoded::Error(s) = protobuf_event(event).unwrap() else {
            panic!("not an error")
        };
        assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    }

    #[test]
    fn malformed_events_are_errors_not_panics() {
        assert!(json_event(kube_sim::faults::MALFORMED_EVENT).is_err());
        assert!(protobuf_event(kube_sim::faults::MALFORMED_EVENT).is_err());
        assert!(json_event(br#"{"type":"MODIFIED","object":{"metadata":{"name":"x"}}}"#).is_err());
        assert!(json_event(br#"{"type":"SOMETHING","object":{}}"#).is_err());
        assert!(protobuf_list(b"k8s\0\xff").is_err());
    }

    #[test]
    fn lists_decode_in_both_encodings() {
        let list = json!({"kind": "PodList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "30"}, "items": [pod("a", "3"), pod("b", "4")]});
        let want: Listed = (
            30,
            vec![
                (
                    "n/a".into(),
                    Obj {
                        rv: 3,
                        uid: "uid-a".into(),
                    },
                ),
                (
                    "n/b".into(),
                    Obj {
                        rv: 4,
                        uid: "uid-b".into(),
                    },
                ),
            ],
        );
        assert_eq!(json_list(list.to_string().as_bytes()).unwrap(), want);
        let msg = message_for("v1", "PodList").unwrap();
        let body = json_to_proto(msg, list.to_string().as_bytes()).unwrap();
        let wrapped = envelope::wrap("v1", "PodList", &body);
        assert_eq!(protobuf_list(&wrapped).unwrap(), want);
    }
}
