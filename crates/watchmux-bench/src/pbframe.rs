//! Protobuf watch streams as the bench's raw client reads them. kube frames them on chunked
//! HTTP as a 4-byte big-endian length followed by a `metav1.WatchEvent{type, object:
//! RawExtension{raw}}`, whose `raw` is the object in kube's envelope (`k8s\0` +
//! `runtime.Unknown{typeMeta, raw}`). This module splits the stream into events ([`Frames`])
//! and reads from one event only what the latency measurement needs ([`event_type`],
//! [`object_meta`], [`annotation`], [`deleting`]) by walking the few messages around the
//! object's metadata: as little work per event as the JSON client's byte search, so the client
//! can keep up with ten thousand watchers.
//!
//! Bytes only: no I/O and no counters (those are [`super::client`]'s), no typed decoding (the
//! cost S8 measures for a real client is [`super::decode`]'s). Input comes from the server under
//! test: every length is checked, and a malformed event reads as one without a type or stamp.

use kube_wire::proto::wire;

/// The prefix of kube's protobuf envelope.
pub const MAGIC: &[u8] = b"k8s\0";

/// Frames longer than this are taken for a broken stream (kube's own limit on a watch event
/// is far smaller).
pub const MAX_FRAME: usize = 64 << 20;

/// `ObjectMeta.deletionTimestamp`'s field number.
const DELETION_TIMESTAMP: u32 = 9;
/// `ObjectMeta.annotations`' field number (a map: repeated `{1: key, 2: value}` entries).
const ANNOTATIONS: u32 = 12;

/// Splits a byte stream, fed in pieces of any size, into length-prefixed frames.
#[derive(Debug, Default)]
pub struct Frames {
    /// The start of a frame whose end has not arrived yet (length prefix included).
    pending: Vec<u8>,
    broken: bool,
}

/// The length in a frame's 4-byte prefix, when at least 4 bytes are there.
fn prefix(b: &[u8]) -> Option<usize> {
    let p: [u8; 4] = b.get(..4)?.try_into().ok()?;
    usize::try_from(u32::from_be_bytes(p)).ok()
}

impl Frames {
    /// Feeds `piece`, calling `frame` with each complete event (without its length prefix).
    /// Returns false once a frame longer than [`MAX_FRAME`] was announced: the stream cannot be
    /// read after that, and later pieces are ignored.
    pub fn push(&mut self, mut piece: &[u8], mut frame: impl FnMut(&[u8])) -> bool {
        if self.broken {
            return false;
        }
        // First complete the frame a previous piece began.
        if !self.pending.is_empty() {
            if self.pending.len() < 4 {
                let (head, rest) = piece.split_at(piece.len().min(4 - self.pending.len()));
                self.pending.extend_from_slice(head);
                piece = rest;
            }
            let Some(len) = prefix(&self.pending) else {
                return true;
            };
            if len > MAX_FRAME {
                self.broken = true;
                return false;
            }
            let missing = (4 + len).saturating_sub(self.pending.len());
            let (body, rest) = piece.split_at(piece.len().min(missing));
            self.pending.extend_from_slice(body);
            piece = rest;
            if self.pending.len() < 4 + len {
                return true;
            }
            frame(self.pending.get(4..).unwrap_or_default());
            self.pending.clear();
        }
        // Then every whole frame of the piece, without copying.
        while let Some(len) = prefix(piece) {
            if len > MAX_FRAME {
                self.broken = true;
                return false;
            }
            let Some(whole) = piece.get(4..4 + len) else {
                break;
            };
            frame(whole);
            piece = piece.get(4 + len..).unwrap_or_default();
        }
        self.pending.extend_from_slice(piece);
        true
    }
}

/// The first length-delimited field `tag` of a message; None when absent or malformed. (A
/// repeated message field would merge its occurrences; kube writes each once.)
pub fn field(msg: &[u8], tag: u32) -> Option<&[u8]> {
    let mut found = None;
    each_field(msg, |t, v| {
        if t == tag {
            found = Some(v);
            return false;
        }
        true
    });
    found
}

/// Calls `f(tag, payload)` for each length-delimited field in wire order (other wire types are
/// skipped) until it returns false or the message ends; stops quietly at malformed input.
pub fn each_field<'a>(buf: &'a [u8], mut f: impl FnMut(u32, &'a [u8]) -> bool) {
    for field in wire::fields(buf, "message").bytes() {
        let Ok((tag, value)) = field else { return };
        if !f(tag, value) {
            return;
        }
    }
}

/// The event's type (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`); empty when missing.
pub fn event_type(event: &[u8]) -> &[u8] {
    field(event, 1).unwrap_or_default()
}

/// The encoded object of the event (its message, inside the event's `RawExtension` and the
/// object's envelope).
pub fn object(event: &[u8]) -> Option<&[u8]> {
    let raw = field(field(event, 2)?, 1)?;
    let unknown = raw.strip_prefix(MAGIC)?;
    field(unknown, 2)
}

/// The encoded `metadata` (field 1 of every kube object) of the event's object.
pub fn object_meta(event: &[u8]) -> Option<&[u8]> {
    field(object(event)?, 1)
}

/// The value of annotation `key` in an encoded `ObjectMeta`.
pub fn annotation<'a>(meta: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut found = None;
    each_field(meta, |tag, entry| {
        if tag == ANNOTATIONS && field(entry, 1) == Some(key.as_bytes()) {
            found = Some(field(entry, 2).unwrap_or_default());
            return false;
        }
        true
    });
    found
}

/// Whether an encoded `ObjectMeta` has a `deletionTimestamp`.
pub fn deleting(meta: &[u8]) -> bool {
    field(meta, DELETION_TIMESTAMP).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::proto::{envelope, json_to_proto, message_for};

    fn event(ty: &str, pod: serde_json::Value) -> Vec<u8> {
        let msg = message_for("v1", "Pod").unwrap();
        let body = json_to_proto(msg, pod.to_string().as_bytes()).unwrap();
        envelope::watch_event(ty, &envelope::wrap("v1", "Pod", &body))
    }

    #[test]
    fn reads_type_stamp_and_deletion_from_an_event() {
        let pod = serde_json::json!({"metadata": {"name": "a", "namespace": "n",
            "annotations": {"x": "1", "watchmux.dev/write-time-ns": "123"}}});
        let ev = event("MODIFIED", pod);
        assert_eq!(event_type(&ev), b"MODIFIED");
        let meta = object_meta(&ev).unwrap();
        assert_eq!(
            annotation(meta, "watchmux.dev/write-time-ns"),
            Some(&b"123"[..])
        );
        assert_eq!(annotation(meta, "y"), None);
        assert!(!deleting(meta));
        let gone = serde_json::json!({"metadata": {"name": "a",
            "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert!(deleting(object_meta(&event("MODIFIED", gone)).unwrap()));
        // Garbage never panics and reads as nothing.
        assert_eq!(event_type(b"\xff\xff\xff"), b"");
        assert_eq!(object_meta(b"\x12\x05\x0a\x03k8s"), None);
    }

    #[test]
    fn frames_split_across_any_pieces() {
        let evs: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; usize::from(i) * 3]).collect();
        let stream: Vec<u8> = evs
            .iter()
            .flat_map(|e| envelope::length_prefixed(e))
            .collect();
        for size in [1, 2, 3, 5, 7, 64, stream.len()] {
            let mut f = Frames::default();
            let mut got = Vec::new();
            for piece in stream.chunks(size) {
                assert!(f.push(piece, |e| got.push(e.to_vec())));
            }
            assert_eq!(got, evs, "pieces of {size}");
        }
        let mut f = Frames::default();
        let huge = u32::try_from(MAX_FRAME + 1).unwrap().to_be_bytes();
        assert!(!f.push(&huge, |_| panic!("no frame")));
        assert!(!f.push(&[0, 0, 0, 0], |_| panic!("no frame")));
    }
}
