//! kube's protobuf envelope and frames, byte for byte as kube-apiserver writes them: the `k8s\0`
//! magic followed by a `runtime.Unknown{typeMeta, raw, contentEncoding, contentType}`; watch
//! events (`metav1.WatchEvent` with the wrapped object as its raw extension, not itself wrapped)
//! and their 4-byte big-endian length prefix on chunked HTTP; lists assembled from items encoded
//! once; `PartialObjectMetadata` cut from an encoded object; and `Status`.
//!
//! Only framing around message bodies: the bodies themselves come from [`super::encode`]
//! (or a cache of its output).

use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use super::encode::json_to_proto;
use super::error::ProtoError;
use super::model::MessageRef;
use super::schema;
use super::wire::put_bytes;

/// The prefix of every protobuf body kube sends or accepts.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// A decoded envelope, borrowing from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unknown<'a> {
    /// `typeMeta.apiVersion`.
    pub api_version: &'a str,
    /// `typeMeta.kind`.
    pub kind: &'a str,
    /// The message body.
    pub raw: &'a [u8],
    /// `contentEncoding` (kube writes "").
    pub content_encoding: &'a str,
    /// `contentType` (kube writes "").
    pub content_type: &'a str,
}

fn field_len(tag: u32, len: usize) -> usize {
    encoded_len_varint(u64::from(tag << 3)) + encoded_len_varint(len as u64) + len
}

/// The Unknown up to (and including) the `raw` length: magic, typeMeta, raw's key and length.
fn head(out: &mut Vec<u8>, api_version: &str, kind: &str, raw_len: usize) {
    out.extend_from_slice(&MAGIC);
    let type_meta = field_len(1, api_version.len()) + field_len(2, kind.len());
    encode_key(1, WireType::LengthDelimited, out);
    encode_varint(type_meta as u64, out);
    put_bytes(out, 1, api_version.as_bytes());
    put_bytes(out, 2, kind.as_bytes());
    encode_key(2, WireType::LengthDelimited, out);
    encode_varint(raw_len as u64, out);
}

/// The end of every envelope after its `raw`: `contentEncoding` and `contentType`, both empty
/// and both written (gogo writes strings).
pub const TAIL: [u8; 4] = [0x1a, 0, 0x22, 0];

fn tail(out: &mut Vec<u8>) {
    out.extend_from_slice(&TAIL);
}

fn envelope_len(api_version: &str, kind: &str, raw_len: usize) -> usize {
    let type_meta = field_len(1, api_version.len()) + field_len(2, kind.len());
    MAGIC.len() + field_len(1, type_meta) + field_len(2, raw_len) + 4
}

/// Wraps a message body: `k8s\0` + `Unknown{typeMeta{apiVersion, kind}, raw, "", ""}`.
pub fn wrap(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(envelope_len(api_version, kind, raw.len()));
    head(&mut out, api_version, kind, raw.len());
    out.extend_from_slice(raw);
    tail(&mut out);
    out
}

/// Reads an envelope: checks the magic and decodes the `Unknown` (later occurrences of a field
/// win, as gogo's unmarshaller has it).
pub fn unwrap(bytes: &[u8]) -> Result<Unknown<'_>, ProtoError> {
    if bytes.is_empty() {
        return Err(ProtoError::protobuf("Unknown", "empty data"));
    }
    let body = bytes
        .strip_prefix(&MAGIC[..])
        .ok_or(ProtoError::NotProtobuf)?;
    if body.is_empty() {
        return Err(ProtoError::protobuf("Unknown", "empty body"));
    }
    let mut unk = Unknown {
        api_version: "",
        kind: "",
        raw: &[],
        content_encoding: "",
        content_type: "",
    };
    for (tag, value) in fields(body, "Unknown")? {
        match tag {
            1 => {
                for (t, v) in fields(value, "TypeMeta")? {
                    match t {
                        1 => unk.api_version = text(v)?,
                        2 => unk.kind = text(v)?,
                        _ => {}
                    }
                }
            }
            2 => unk.raw = value,
            3 => unk.content_encoding = text(value)?,
            4 => unk.content_type = text(value)?,
            _ => {}
        }
    }
    Ok(unk)
}

/// The length-delimited fields of a message (tag, bytes), in wire order; other wire types are
/// skipped. Errors on malformed input.
fn fields<'a>(buf: &'a [u8], at: &str) -> Result<Vec<(u32, &'a [u8])>, ProtoError> {
    super::wire::fields(buf, at).bytes().collect()
}

/// A watch event: `WatchEvent{type, object: RawExtension{raw: object}}`, where `object` is an
/// already wrapped (`k8s\0` + Unknown) object. The event itself is not wrapped.
pub fn watch_event(ty: &str, object: &[u8]) -> Vec<u8> {
    let raw_ext = field_len(1, object.len());
    let mut out = Vec::with_capacity(field_len(1, ty.len()) + field_len(2, raw_ext));
    put_bytes(&mut out, 1, ty.as_bytes());
    encode_key(2, WireType::LengthDelimited, &mut out);
    encode_varint(raw_ext as u64, &mut out);
    put_bytes(&mut out, 1, object);
    out
}

/// A watch frame on chunked HTTP: the 4-byte big-endian length, then the event (a websocket
/// message carries the bare event). An event longer than 4 GiB cannot be framed: its length is
/// saturated, which a client reads as a broken stream.
pub fn length_prefixed(event: &[u8]) -> Vec<u8> {
    let len = u32::try_from(event.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(4 + event.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(event);
    out
}

/// A chunked-HTTP watch frame: the length-prefixed `WatchEvent` of type `ty` carrying the
/// wrapped `object`.
pub fn watch_frame(ty: &str, object: &[u8]) -> Vec<u8> {
    length_prefixed(&watch_event(ty, object))
}

/// The bytes of a chunked-HTTP watch frame of type `ty` that come before the message body of
/// its object, wrapped as `(api_version, kind)`: the frame is this head, the `raw_len` bytes of
/// the body, then [`TAIL`] — `watch_frame(ty, &wrap(api_version, kind, raw))` without copying
/// the body, so a body shared by many watchers is written to each of them as it is.
pub fn watch_frame_head(ty: &str, api_version: &str, kind: &str, raw_len: usize) -> Vec<u8> {
    let object = envelope_len(api_version, kind, raw_len);
    let raw_ext = field_len(1, object);
    let event = field_len(1, ty.len()) + field_len(2, raw_ext);
    let len = u32::try_from(event).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(4 + event - raw_len - TAIL.len());
    out.extend_from_slice(&len.to_be_bytes());
    put_bytes(&mut out, 1, ty.as_bytes());
    encode_key(2, WireType::LengthDelimited, &mut out);
    encode_varint(raw_ext as u64, &mut out);
    encode_key(1, WireType::LengthDelimited, &mut out);
    encode_varint(object as u64, &mut out);
    head(&mut out, api_version, kind, raw_len);
    out
}

/// The watch frame of an ERROR event carrying the Status whose JSON is `status_json` (an empty
/// object should it not transcode: a Status always does).
pub fn error_frame(status_json: &[u8]) -> Vec<u8> {
    watch_frame("ERROR", &status(status_json).unwrap_or_default())
}

/// A wrapped `XList`: `{1: list_meta, 2: item, 2: item, …}` from an encoded `ListMeta` body and
/// encoded item bodies, so a cached LIST is a concatenation of per-object bytes encoded once.
pub fn list<'a>(
    api_version: &str,
    list_kind: &str,
    list_meta: &[u8],
    items: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<u8> {
    let items: Vec<&[u8]> = items.into_iter().collect();
    let raw_len =
        field_len(1, list_meta.len()) + items.iter().map(|i| field_len(2, i.len())).sum::<usize>();
    let mut out = Vec::with_capacity(envelope_len(api_version, list_kind, raw_len));
    head(&mut out, api_version, list_kind, raw_len);
    put_bytes(&mut out, 1, list_meta);
    for item in items {
        put_bytes(&mut out, 2, item);
    }
    tail(&mut out);
    out
}

/// [`list`] as a stream of chunks of about 64 KiB, made as they are sent: an answer never holds
/// the whole body (a LIST of 100k pods is hundreds of MB), only the items' shared bodies and
/// one chunk. The same bytes as [`list`].
pub fn list_chunks(
    api_version: &str,
    list_kind: &str,
    list_meta: &[u8],
    items: Vec<bytes::Bytes>,
) -> ListChunks {
    let raw_len =
        field_len(1, list_meta.len()) + items.iter().map(|i| field_len(2, i.len())).sum::<usize>();
    let mut head_buf = Vec::with_capacity(CHUNK);
    head(&mut head_buf, api_version, list_kind, raw_len);
    put_bytes(&mut head_buf, 1, list_meta);
    ListChunks {
        total: envelope_len(api_version, list_kind, raw_len),
        head: Some(head_buf),
        items: items.into_iter(),
        finished: false,
    }
}

/// The size of the chunks [`ListChunks`] yields (one item larger than it makes a larger one).
const CHUNK: usize = 64 * 1024;

/// The chunks of a protobuf list body, built one at a time ([`list_chunks`]).
#[derive(Debug)]
pub struct ListChunks {
    total: usize,
    head: Option<Vec<u8>>,
    items: std::vec::IntoIter<bytes::Bytes>,
    finished: bool,
}

impl ListChunks {
    /// The length of the whole body.
    pub fn total_len(&self) -> usize {
        self.total
    }
}

impl Iterator for ListChunks {
    type Item = bytes::Bytes;

    fn next(&mut self) -> Option<bytes::Bytes> {
        if self.finished {
            return None;
        }
        let mut buf = self
            .head
            .take()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK));
        while buf.len() < CHUNK {
            match self.items.next() {
                Some(item) => put_bytes(&mut buf, 2, &item),
                None => {
                    tail(&mut buf);
                    self.finished = true;
                    break;
                }
            }
        }
        Some(bytes::Bytes::from(buf))
    }
}

/// The encoded `ListMeta` of a list's JSON metadata
/// (`{"resourceVersion":…,"continue":…,"remainingItemCount":…}`).
pub fn list_meta(json: &[u8]) -> Result<Vec<u8>, ProtoError> {
    json_to_proto(MessageRef(schema::LIST_META), json)
}

/// The payload of the first length-delimited occurrence of field `tag` of an encoded message
/// (e.g. an object's `metadata`), without decoding anything else.
pub fn field_slice(pb: &[u8], tag: u32) -> Option<&[u8]> {
    fields(pb, "message")
        .ok()?
        .into_iter()
        .find(|(t, _)| *t == tag)
        .map(|(_, v)| v)
}

/// A `PartialObjectMetadata` body (`{1: ObjectMeta}`) from an encoded object of kind `msg`,
/// reusing its encoded `metadata` bytes: no second transcode.
pub fn partial_object_metadata(msg: MessageRef, object: &[u8]) -> Result<Vec<u8>, ProtoError> {
    let tag = msg
        .message()
        .key("metadata")
        .and_then(|path| match path {
            [i] => msg.message().fields.get(usize::from(*i)).map(|f| f.tag),
            _ => None,
        })
        .ok_or_else(|| ProtoError::protobuf(msg.name(), "no metadata field"))?;
    // Every occurrence, in order: repeated occurrences of a message field merge.
    let mut metadata = Vec::new();
    let mut found = false;
    for (t, v) in fields(object, msg.name())? {
        if t == tag {
            metadata.extend_from_slice(v);
            found = true;
        }
    }
    if !found {
        // Go always has an ObjectMeta: its zero value.
        metadata = json_to_proto(MessageRef(schema::OBJECT_META), b"{}")?;
    }
    let mut out = Vec::with_capacity(field_len(1, metadata.len()));
    put_bytes(&mut out, 1, &metadata);
    Ok(out)
}

/// A wrapped `Status` (apiVersion `v1`, kind `Status`) from its JSON, as kube sends errors to
/// protobuf-only clients.
pub fn status(status_json: &[u8]) -> Result<Vec<u8>, ProtoError> {
    let body = json_to_proto(MessageRef(schema::STATUS), status_json)?;
    Ok(wrap("v1", "Status", &body))
}

fn text(b: &[u8]) -> Result<&str, ProtoError> {
    std::str::from_utf8(b).map_err(|_| ProtoError::protobuf("Unknown", "invalid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head, the body and the tail are the frame, whatever the lengths' varint widths.
    #[test]
    fn a_frame_head_body_and_tail_are_the_whole_frame() {
        for len in [0, 1, 100, 127, 128, 16_383, 16_384, 100_000, 2_097_152] {
            let raw: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            for (ty, av, kind) in [
                ("ADDED", "v1", "Pod"),
                ("MODIFIED", "discovery.k8s.io/v1", "EndpointSlice"),
            ] {
                let mut parts = watch_frame_head(ty, av, kind, raw.len());
                parts.extend_from_slice(&raw);
                parts.extend_from_slice(&TAIL);
                assert_eq!(parts, watch_frame(ty, &wrap(av, kind, &raw)), "{ty} {len}");
            }
        }
    }
}
