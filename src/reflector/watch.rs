//! One upstream watch: from a resourceVersion, with bookmarks, until the stream ends; each line
//! decoded and applied to the cache through its writer ([`apply_line`]).
//!
//! Owns the watch request, the framing of its body into lines and their meaning (an event, a
//! BOOKMARK, an ERROR). It must not re-watch, relist or back off: it reports how the watch ended
//! ([`WatchEnd`]) or why it failed, and the state machine in [`super`] decides.

use std::time::Duration;

use bytes::BytesMut;
use http_body_util::BodyExt;
use rand::Rng;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{MalformedData, ReflectorError, collection_path, read_body};
use crate::cache::CacheWriter;
use crate::cache::record::decode_object;
use crate::config::ResourceSpec;
use crate::metrics::ResourceMetrics;
use crate::upstream::Upstream;
use kube_wire::event::EventType;
use kube_wire::status::Status;

/// `what` of the errors about one watch line.
const WATCH_EVENT: &str = "watch event";

/// How a watch ended.
#[derive(Debug)]
pub enum WatchEnd {
    /// The stream ended (timeout or server close) after this many events.
    Closed {
        /// Events and bookmarks applied.
        received: u64,
    },
    /// The start resourceVersion expired (a 410 answer or ERROR event): relist.
    Expired(Status),
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type")]
    ty: &'a str,
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
struct MetaOnly {
    #[serde(default)]
    metadata: RvOnly,
}

#[derive(Deserialize, Default)]
struct RvOnly {
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
}

/// The longest watch line (one event) accepted from the upstream unless told otherwise
/// ([`WatchLines::max_line`]).
const MAX_LINE: usize = 64 << 20;

/// Room for a watch event's envelope around an object of `cache.max_object_bytes`.
pub(super) const ENVELOPE_ROOM: usize = 64 << 10;

/// The lines of an upstream watch stream, as they arrive: the body read frame by frame and cut
/// at newlines, blank lines skipped, a line longer than the bound refused — or, for a protobuf
/// stream ([`WatchLines::length_prefixed`]), cut into its frames, each after its 4-byte
/// big-endian length. Shared by the reflector's watch, the freshness check's short watch and
/// the CRD watch.
pub(super) struct WatchLines {
    body: hyper::body::Incoming,
    /// Frames are length-prefixed (protobuf), not lines.
    length_prefixed: bool,
    buf: BytesMut,
    /// The request, for errors.
    what: String,
    /// The stream counts as ended at this instant (a silent connection), if set.
    deadline: Option<tokio::time::Instant>,
    /// The longest line accepted.
    max_line: usize,
}

impl WatchLines {
    /// The lines of `body`, the answer to request `what`.
    pub(super) fn new(
        body: hyper::body::Incoming,
        what: &str,
        deadline: Option<tokio::time::Instant>,
    ) -> Self {
        WatchLines {
            body,
            length_prefixed: false,
            buf: BytesMut::new(),
            what: what.to_string(),
            deadline,
            max_line: MAX_LINE,
        }
    }

    /// The stream is protobuf's: each frame is a 4-byte big-endian length and that many bytes.
    pub(super) fn length_prefixed(mut self) -> Self {
        self.length_prefixed = true;
        self
    }

    /// The next complete frame of a length-prefixed stream, if buffered.
    fn next_frame(&mut self) -> Option<BytesMut> {
        let head: [u8; 4] = self.buf.get(..4)?.try_into().ok()?;
        let len = u32::from_be_bytes(head) as usize;
        if self.buf.len() < 4 + len {
            return None;
        }
        let mut frame = self.buf.split_to(4 + len);
        let _ = frame.split_to(4);
        Some(frame)
    }

    /// The length the next frame of a length-prefixed stream announces.
    fn announced(&self) -> usize {
        self.buf
            .get(..4)
            .and_then(|h| <[u8; 4]>::try_from(h).ok())
            .map_or(0, |h| u32::from_be_bytes(h) as usize)
    }

    /// Whether a length-prefixed stream's next frame is announced longer than the bound.
    fn announced_too_long(&self) -> bool {
        self.length_prefixed && self.announced() > self.max_line
    }

    /// Lines longer than `max` bytes are refused.
    pub(super) fn max_line(mut self, max: usize) -> Self {
        self.max_line = max;
        self
    }

    /// The next complete, non-blank line (without its newline); `None` once the stream ended
    /// or the deadline passed. `meter` is told the size of every chunk of the body read.
    pub(super) async fn next(
        &mut self,
        mut meter: impl FnMut(usize),
    ) -> Result<Option<BytesMut>, ReflectorError> {
        loop {
            if self.length_prefixed {
                if self.announced() <= self.max_line
                    && let Some(frame) = self.next_frame()
                {
                    return Ok(Some(frame));
                }
            } else {
                while let Some(i) = memchr::memchr(b'\n', &self.buf) {
                    let mut line = self.buf.split_to(i + 1);
                    line.truncate(i);
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        return Ok(Some(line));
                    }
                }
            }
            if self.buf.len() > self.max_line || self.announced_too_long() {
                return Err(ReflectorError::malformed(
                    &self.what,
                    MalformedData::EventTooLarge {
                        limit: self.max_line,
                    },
                ));
            }
            let frame = match self.deadline {
                Some(d) => tokio::select! {
                    _ = tokio::time::sleep_until(d) => return Ok(None),
                    f = self.body.frame() => f,
                },
                None => self.body.frame().await,
            };
            match frame {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(ReflectorError::malformed(
                        &self.what,
                        MalformedData::StreamBroke(e),
                    ));
                }
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        meter(data.len());
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

/// What one watch line says, read no further than its resourceVersion (the freshness check's
/// view of a stream: it applies nothing).
#[derive(Debug)]
pub(super) enum Line {
    /// An ADDED, MODIFIED or DELETED event at this resourceVersion.
    Event(u64),
    /// A BOOKMARK at this resourceVersion.
    Bookmark(u64),
    /// An ERROR event.
    Error(Status),
}

/// Reads one watch line's type and resourceVersion.
pub(super) fn parse_line(line: &[u8]) -> Result<Line, ReflectorError> {
    let ev: Envelope<'_> =
        serde_json::from_slice(line).map_err(|e| ReflectorError::malformed(WATCH_EVENT, e))?;
    let obj = ev.object.get().as_bytes();
    if ev.ty == "ERROR" {
        let status =
            Status::parse(obj, 500).map_err(|e| ReflectorError::malformed(WATCH_EVENT, e))?;
        return Ok(Line::Error(status));
    }
    let bookmark = ev.ty == "BOOKMARK";
    if !bookmark && EventType::parse(ev.ty).is_none() {
        return Err(ReflectorError::malformed(
            WATCH_EVENT,
            MalformedData::EventType(ev.ty.to_string()),
        ));
    }
    let m: MetaOnly =
        serde_json::from_slice(obj).map_err(|e| ReflectorError::malformed(WATCH_EVENT, e))?;
    let value = m.metadata.resource_version;
    let rv = crate::cache::record::parse_rv(&value).map_err(|source| {
        let value = value.clone();
        ReflectorError::malformed(
            WATCH_EVENT,
            if bookmark {
                MalformedData::BookmarkResourceVersion { value, source }
            } else {
                MalformedData::EventResourceVersion { value, source }
            },
        )
    })?;
    Ok(if bookmark {
        Line::Bookmark(rv)
    } else {
        Line::Event(rv)
    })
}

/// Applies one watch line to the cache, counting its event type in `m` if given.
/// `Ok(Some(end))` ends the watch.
pub fn apply_line(
    writer: &CacheWriter,
    line: &[u8],
    m: Option<&ResourceMetrics>,
) -> Result<Option<WatchEnd>, ReflectorError> {
    let ev: Envelope<'_> =
        serde_json::from_slice(line).map_err(|e| ReflectorError::malformed(WATCH_EVENT, e))?;
    if let Some(m) = m {
        m.upstream_event(ev.ty);
    }
    let obj = ev.object.get().as_bytes();
    match ev.ty {
        "BOOKMARK" => {
            let m: MetaOnly = serde_json::from_slice(obj)
                .map_err(|e| ReflectorError::malformed(WATCH_EVENT, e))?;
            let value = m.metadata.resource_version;
            let rv = crate::cache::record::parse_rv(&value).map_err(|source| {
                ReflectorError::malformed(
                    WATCH_EVENT,
                    MalformedData::BookmarkResourceVersion {
                        value: value.clone(),
                        source,
                    },
                )
            })?;
            writer.advance(rv);
            Ok(None)
        }
        "ERROR" => apply_error(obj),
        t => apply_event(writer, t, || decode_object(writer.info(), obj)),
    }
}

/// An ERROR event carrying the Status whose JSON is `status`: the end of the watch when it
/// says the resourceVersion expired, an error otherwise.
fn apply_error(status: &[u8]) -> Result<Option<WatchEnd>, ReflectorError> {
    let status =
        Status::parse(status, 500).map_err(|e| ReflectorError::malformed(WATCH_EVENT, e))?;
    if status.is_expired() {
        return Ok(Some(WatchEnd::Expired(status)));
    }
    Err(ReflectorError::Status {
        what: "watch".into(),
        status,
    })
}

/// An ADDED, MODIFIED or DELETED event (`ty`) of the object `decode` ingests, applied.
fn apply_event(
    writer: &CacheWriter,
    ty: &str,
    decode: impl FnOnce() -> Result<crate::cache::Cached, crate::cache::DecodeError>,
) -> Result<Option<WatchEnd>, ReflectorError> {
    let ty = EventType::parse(ty).ok_or_else(|| {
        ReflectorError::malformed(WATCH_EVENT, MalformedData::EventType(ty.to_string()))
    })?;
    let c = decode().map_err(|e| ReflectorError::malformed(WATCH_EVENT, e))?;
    let limit = writer.cache().settings().max_object_bytes;
    super::check_object_size(&c, limit, WATCH_EVENT)?;
    writer.apply(ty, c);
    Ok(None)
}

/// Applies one protobuf watch frame to the cache, as [`apply_line`] applies a JSON line.
pub fn apply_frame(
    writer: &CacheWriter,
    frame: &[u8],
    m: Option<&ResourceMetrics>,
) -> Result<Option<WatchEnd>, ReflectorError> {
    let ev = super::protobuf::read_event(frame, WATCH_EVENT)?;
    if let Some(m) = m {
        m.upstream_event(ev.ty);
    }
    match ev.ty {
        "BOOKMARK" => {
            writer.advance(ev.bookmark_rv(writer.info(), WATCH_EVENT)?);
            Ok(None)
        }
        "ERROR" => apply_error(
            &ev.status_json()
                .map_err(|e| ReflectorError::malformed(WATCH_EVENT, MalformedData::Protobuf(e)))?,
        ),
        t => apply_event(writer, t, || ev.object(writer.info())),
    }
}

/// One upstream watch from `rv` until it ends.
pub async fn watch(
    up: &Upstream,
    spec: &ResourceSpec,
    writer: &CacheWriter,
    rv: u64,
    m: &ResourceMetrics,
) -> Result<WatchEnd, ReflectorError> {
    let timeout = rand::rng().random_range(300..600u64);
    let q = format!(
        "{}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={timeout}",
        collection_path(spec),
    );
    let resp = up.get(&q, super::protobuf::accept(writer.info())).await;
    m.upstream_request("watch", resp.as_ref().ok().map(|r| r.status().as_u16()));
    let resp = resp?;
    let code = resp.status();
    if !code.is_success() {
        let body = read_body(resp, &q).await?;
        return match ReflectorError::from_answer(code, &q, &body) {
            ReflectorError::Expired(status) => Ok(WatchEnd::Expired(status)),
            e => Err(e),
        };
    }
    m.watch_connected();
    writer.cache().staleness.live();
    // The upstream ends the stream after `timeout`; a silent connection gets a grace period.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout + 30);
    let max_object =
        usize::try_from(writer.cache().settings().max_object_bytes).unwrap_or(usize::MAX);
    let protobuf = super::protobuf::is_protobuf(resp.headers());
    let mut lines = WatchLines::new(resp.into_body(), &q, Some(deadline))
        .max_line(max_object.saturating_add(ENVELOPE_ROOM));
    if protobuf {
        lines = lines.length_prefixed();
    }
    let apply = if protobuf { apply_frame } else { apply_line };
    let mut received = 0u64;
    while let Some(line) = lines.next(|n| m.upstream_watch_bytes(n)).await? {
        if let Some(end) = apply(writer, &line, Some(m))? {
            return Ok(end);
        }
        received += 1;
    }
    Ok(WatchEnd::Closed { received })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CacheSettings, ResourceCache, ResourceInfo};

    #[test]
    fn applies_events_bookmarks_and_errors() {
        let (cache, writer) = ResourceCache::new(
            ResourceInfo::new("", "v1", "pods", "Pod", true),
            CacheSettings::default(),
        );
        writer.replace(Vec::new(), 5);
        let add = br#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"d","resourceVersion":"6"}}}"#;
        assert!(apply_line(&writer, add, None).unwrap().is_none());
        assert_eq!((cache.len(), cache.rv()), (1, 6));
        let bm = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}"#;
        apply_line(&writer, bm, None).unwrap();
        assert_eq!(cache.rv(), 9);
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        assert!(matches!(
            apply_line(&writer, gone, None).unwrap(),
            Some(WatchEnd::Expired(_))
        ));
        assert!(
            apply_line(
                &writer,
                b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":",
                None
            )
            .is_err()
        );
        let del = br#"{"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"d","resourceVersion":"10"}}}"#;
        apply_line(&writer, del, None).unwrap();
        assert_eq!((cache.len(), cache.rv()), (0, 10));
    }

    #[test]
    fn applies_protobuf_events_bookmarks_and_errors_and_refuses_what_does_not_decode() {
        use kube_wire::proto::{envelope, json_to_proto};
        let (cache, writer) = ResourceCache::new(
            ResourceInfo::new("", "v1", "pods", "Pod", true),
            CacheSettings::default(),
        );
        writer.replace(Vec::new(), 5);
        let msg = writer.info().message.unwrap();
        let frame = |ty: &str, object: &[u8]| {
            envelope::watch_event(ty, &envelope::wrap("v1", "Pod", object))
        };
        let pod = |json: &str| json_to_proto(msg, json.as_bytes()).unwrap();
        let add = pod(r#"{"metadata":{"name":"a","namespace":"d","resourceVersion":"6"}}"#);
        assert!(
            apply_frame(&writer, &frame("ADDED", &add), None)
                .unwrap()
                .is_none()
        );
        assert_eq!((cache.len(), cache.rv()), (1, 6));
        let stored = cache.snapshot().objects.get("d/a").unwrap().clone();
        assert!(stored.is_protobuf() && stored.stored()[..] == add[..]);
        let bm = pod(r#"{"metadata":{"resourceVersion":"9"}}"#);
        apply_frame(&writer, &frame("BOOKMARK", &bm), None).unwrap();
        assert_eq!(cache.rv(), 9);
        let gone = envelope::watch_event(
            "ERROR",
            &envelope::status(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}"#).unwrap(),
        );
        assert!(matches!(
            apply_frame(&writer, &gone, None).unwrap(),
            Some(WatchEnd::Expired(_))
        ));
        // An object that does not decode is refused, as a malformed JSON line is, and the
        // cache is left as it was.
        let mut broken = pod(r#"{"metadata":{"name":"b","namespace":"d","resourceVersion":"10"}}"#);
        broken.extend_from_slice(&[0x12, 0x03, 0x12, 0x05, 0x0a]);
        assert!(matches!(
            apply_frame(&writer, &frame("ADDED", &broken), None),
            Err(ReflectorError::Malformed { .. })
        ));
        assert!(apply_frame(&writer, b"\x0a\x05ADD", None).is_err());
        assert_eq!((cache.len(), cache.rv()), (1, 9));
        let del = pod(r#"{"metadata":{"name":"a","namespace":"d","resourceVersion":"10"}}"#);
        apply_frame(&writer, &frame("DELETED", &del), None).unwrap();
        assert_eq!((cache.len(), cache.rv()), (0, 10));
    }
}
