//! Watch events on the wire: event types, the selector move-in/move-out rule, frame encoding and
//! BOOKMARK objects, shared by the simulator and the proxy so both speak exactly one dialect.
//!
//! Encoding only: which watcher receives which event, and when a bookmark is due, is decided by
//! the server (the simulator's watch loop, watchmux's hub).

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};

/// Annotation marking the end of a watch-list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// The type of a stored change (BOOKMARK and ERROR are never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Created (or moved into a selector).
    Added = 0,
    /// Changed.
    Modified = 1,
    /// Deleted (or moved out of a selector).
    Deleted = 2,
}

impl EventType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    /// Parses a wire name of a stored change.
    pub fn parse(s: &str) -> Option<EventType> {
        match s {
            "ADDED" => Some(EventType::Added),
            "MODIFIED" => Some(EventType::Modified),
            "DELETED" => Some(EventType::Deleted),
            _ => None,
        }
    }

    /// What a watcher whose filter matched the previous state (`before`) and matches the new
    /// state (`now`) receives for a change of this type (kube's `convertToWatchEvent`): a
    /// MODIFIED that moves an object into the filter is ADDED, out of it DELETED.
    pub fn emitted(self, before: bool, now: bool) -> Option<EventType> {
        match self {
            EventType::Added if now => Some(EventType::Added),
            EventType::Modified if now && before => Some(EventType::Modified),
            EventType::Modified if now => Some(EventType::Added),
            EventType::Modified if before => Some(EventType::Deleted),
            EventType::Deleted if now || before => Some(EventType::Deleted),
            _ => None,
        }
    }
}

/// `{"type":"<ty>","object":` followed by `type_prefix` (`{"kind":…,"apiVersion":…,`): the
/// constant head of every frame of one type for one resource.
pub fn frame_head(ty: &str, type_prefix: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(32 + type_prefix.len());
    b.put_slice(b"{\"type\":\"");
    b.put_slice(ty.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(type_prefix.as_bytes());
    b.freeze()
}

/// The constant tail of every frame: closes the object and the event, then the newline.
pub const FRAME_TAIL: &[u8] = b"}\n";

/// One chunked-JSON frame `{"type":…,"object":{<type meta>,<body without its opening brace>}\n`
/// from a stored body (which starts with `{` and has at least one member).
pub fn encode_frame(ty: &str, type_prefix: &str, body: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(body.len() + type_prefix.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(ty.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(type_prefix.as_bytes());
    b.put_slice(&body[1..]);
    b.put_slice(FRAME_TAIL);
    b.freeze()
}

/// The type-meta prefix kube-apiserver puts on a typed object: `{"kind":"Pod","apiVersion":"v1",`.
pub fn typed_prefix(kind: &str, api_version: &str) -> String {
    format!("{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",")
}

/// The type-meta prefix of an unstructured (custom resource) object, whose keys Go encodes in
/// sorted order: `{"apiVersion":"example.com/v1","kind":"Widget",`.
pub fn unstructured_prefix(kind: &str, api_version: &str) -> String {
    format!("{{\"apiVersion\":\"{api_version}\",\"kind\":\"{kind}\",")
}

/// A BOOKMARK object: an empty object of the kind carrying only `metadata.resourceVersion` (and
/// the initial-events-end annotation), with the Go zero-value fields kube-apiserver's encoder
/// emits for a built-in (`typed`) kind; a custom resource's has none.
pub fn bookmark_object(
    kind: &str,
    api_version: &str,
    typed: bool,
    rv: u64,
    initial_end: bool,
) -> Value {
    let mut meta = serde_json::Map::new();
    meta.insert("resourceVersion".into(), json!(rv.to_string()));
    if initial_end {
        meta.insert("annotations".into(), json!({ INITIAL_EVENTS_END: "true" }));
    }
    let mut obj = serde_json::Map::new();
    obj.insert("kind".into(), json!(kind));
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("metadata".into(), Value::Object(meta));
    if typed {
        for (k, v) in zero_fields(kind, api_version) {
            obj.insert(k, v);
        }
    }
    Value::Object(obj)
}

/// The BOOKMARK frame for [`bookmark_object`] in protobuf, as a protobuf watch carries it: the
/// kind's message (or, for a `metadata` watch, a `PartialObjectMetadata`) of that object,
/// wrapped, in a length-prefixed `WatchEvent`. `None` when the transcoder has no message for
/// the kind.
pub fn protobuf_bookmark_frame(
    kind: &str,
    api_version: &str,
    typed: bool,
    rv: u64,
    initial_end: bool,
    metadata: bool,
) -> Option<Bytes> {
    use crate::proto::{self, envelope, schema};
    let json = bookmark_object(kind, api_version, typed, rv, initial_end).to_string();
    let (msg, av, kind) = if metadata {
        (
            proto::message(schema::PARTIAL_OBJECT_METADATA)?,
            "meta.k8s.io/v1",
            "PartialObjectMetadata",
        )
    } else {
        (proto::message_for(api_version, kind)?, api_version, kind)
    };
    let body = proto::json_to_proto(msg, json.as_bytes()).ok()?;
    Some(Bytes::from(envelope::watch_frame(
        "BOOKMARK",
        &envelope::wrap(av, kind, &body),
    )))
}

/// The BOOKMARK frame for [`bookmark_object`].
pub fn bookmark_frame(
    kind: &str,
    api_version: &str,
    typed: bool,
    rv: u64,
    initial_end: bool,
) -> Bytes {
    let obj = bookmark_object(kind, api_version, typed, rv, initial_end);
    let mut out = b"{\"type\":\"BOOKMARK\",\"object\":".to_vec();
    out.extend_from_slice(&serde_json::to_vec(&obj).expect("bookmark serialises"));
    out.extend_from_slice(FRAME_TAIL);
    Bytes::from(out)
}

/// An ERROR frame carrying a Status.
pub fn error_frame(status: &crate::status::Status) -> Bytes {
    let mut out = b"{\"type\":\"ERROR\",\"object\":".to_vec();
    out.extend_from_slice(&status.to_json());
    out.extend_from_slice(FRAME_TAIL);
    Bytes::from(out)
}

/// The Go zero-value fields of an empty object of a built-in kind, after its `metadata`: what
/// `encoding/json` writes for the kind's zero Go value (e.g. a Pod's
/// `"spec":{"containers":null},"status":{}`), derived from the kind's schema by the protobuf
/// transcoder (the zero message decoded back to Go's JSON). Empty for kinds it does not know.
fn zero_fields(kind: &str, api_version: &str) -> Vec<(String, Value)> {
    let Some(msg) = crate::proto::message_for(api_version, kind) else {
        return Vec::new();
    };
    let zero = crate::proto::json_to_proto(msg, b"{}")
        .and_then(|pb| crate::proto::proto_to_json(msg, &pb, None))
        .ok()
        .and_then(|json| serde_json::from_slice::<serde_json::Map<String, Value>>(&json).ok())
        .unwrap_or_default();
    zero.into_iter().filter(|(k, _)| k != "metadata").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookmarks_carry_go_zero_values_of_typed_kinds() {
        let fields = |kind: &str, av: &str| -> Value {
            Value::Object(zero_fields(kind, av).into_iter().collect())
        };
        // What Go's encoding/json writes for the zero values of kube's v0.36.2 types (an
        // Event's reason and message are omitempty).
        assert_eq!(
            fields("Pod", "v1"),
            json!({"spec": {"containers": null}, "status": {}})
        );
        assert_eq!(fields("Namespace", "v1"), json!({"spec": {}, "status": {}}));
        assert_eq!(
            fields("Service", "v1"),
            json!({"spec": {}, "status": {"loadBalancer": {}}})
        );
        assert_eq!(
            fields("Node", "v1"),
            json!({"spec": {}, "status": {"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"","architecture":""}}})
        );
        assert_eq!(
            fields("Event", "v1"),
            json!({"involvedObject": {}, "source": {},
                   "firstTimestamp": null, "lastTimestamp": null, "eventTime": null,
                   "reportingComponent": "", "reportingInstance": ""})
        );
        assert_eq!(
            fields("Deployment", "apps/v1"),
            json!({"spec": {"selector": null, "template": {"metadata": {}, "spec": {"containers": null}}, "strategy": {}}, "status": {}})
        );
        assert_eq!(
            fields("Lease", "coordination.k8s.io/v1"),
            json!({"spec": {}})
        );
        assert_eq!(fields("Widget", "example.com/v1"), json!({}));
        let b = bookmark_object("Deployment", "apps/v1", true, 3, false);
        let keys: Vec<&String> = b.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["kind", "apiVersion", "metadata", "spec", "status"]);
    }

    #[test]
    fn move_in_and_out() {
        use EventType::*;
        assert_eq!(Modified.emitted(false, true), Some(Added));
        assert_eq!(Modified.emitted(true, false), Some(Deleted));
        assert_eq!(Modified.emitted(true, true), Some(Modified));
        assert_eq!(Modified.emitted(false, false), None);
        assert_eq!(Added.emitted(false, false), None);
        assert_eq!(Deleted.emitted(true, true), Some(Deleted));
    }

    #[test]
    fn frames() {
        let p = typed_prefix("Pod", "v1");
        let f = encode_frame("ADDED", &p, br#"{"metadata":{"name":"a"}}"#);
        assert_eq!(&f[..], &b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}}}\n"[..]);
        let mut three = frame_head("ADDED", &p).to_vec();
        three.extend_from_slice(&br#"{"metadata":{"name":"a"}}"#[1..]);
        three.extend_from_slice(FRAME_TAIL);
        assert_eq!(three, f.to_vec());
        let b = bookmark_frame("Pod", "v1", true, 7, true);
        assert_eq!(
            std::str::from_utf8(&b).unwrap(),
            "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}},\"spec\":{\"containers\":null},\"status\":{}}}\n"
        );
    }
}
