//! What a kubelet's client-go sends and reads: its `Accept`, the query of its watch-lists, and
//! a reader of protobuf watch frames (a 4-byte big-endian length, then a `WatchEvent`) with the
//! metadata of the objects they carry.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{ObjectMeta, PartialObjectMetadata, WatchEvent};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message as _;

/// What a kubelet's client-go sends.
pub const KUBELET: &str = "application/vnd.kubernetes.protobuf,application/json";

/// The query of a kubelet's watch-list (client-go's reflector with `WatchListClient`).
pub const WATCH_LIST: &str =
    "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

/// The protobuf frames of a watch body.
pub struct Frames {
    body: Incoming,
    buf: BytesMut,
}

impl Frames {
    /// Frames read from `body`.
    pub fn new(body: Incoming) -> Frames {
        Frames {
            body,
            buf: BytesMut::new(),
        }
    }

    /// The next event; panics (naming `what`) when none comes within 30 s or the watch ends.
    pub async fn next(&mut self, what: &str) -> WatchEvent {
        self.next_or_end(what)
            .await
            .unwrap_or_else(|| panic!("{what}: the watch ended"))
    }

    /// The next event, or `None` once the watch ended; panics (naming `what`) when none comes
    /// within 30 s.
    pub async fn next_or_end(&mut self, what: &str) -> Option<WatchEvent> {
        loop {
            if self.buf.len() >= 4 {
                let n = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + n {
                    self.buf.advance(4);
                    let frame = self.buf.split_to(n);
                    return Some(WatchEvent::decode(&frame[..]).expect("a WatchEvent"));
                }
            }
            let frame = tokio::time::timeout(Duration::from_secs(30), self.body.frame())
                .await
                .unwrap_or_else(|_| panic!("{what}: no event within 30 s"))?
                .expect("a frame");
            if let Ok(d) = frame.into_data() {
                self.buf.extend_from_slice(&d);
            }
        }
    }
}

/// The message of a protobuf object (`k8s\0` + Unknown).
pub fn message_of(raw: &[u8]) -> Vec<u8> {
    assert_eq!(raw.get(..4), Some(&b"k8s\0"[..]));
    Unknown::decode(&raw[4..])
        .expect("runtime.Unknown")
        .raw
        .unwrap_or_default()
}

/// The metadata of a protobuf object: every kind's field 1 is its ObjectMeta, as
/// PartialObjectMetadata's.
pub fn metadata_of(raw: &[u8]) -> ObjectMeta {
    PartialObjectMetadata::decode(&message_of(raw)[..])
        .expect("an object")
        .metadata
        .unwrap_or_default()
}
