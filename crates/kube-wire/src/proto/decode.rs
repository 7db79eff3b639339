//! protobuf → JSON: the JSON Go's `encoding/json` writes for the value gogo's unmarshaller
//! decodes from a message body.
//!
//! Each message is scanned once for its known fields (unknown ones skipped, wire types checked
//! as gogo checks them), then written in Go field order with Go's `omitempty` rules. Proto merge
//! semantics are kept: a repeated occurrence of a message field merges into the earlier one
//! (its occurrences are read as one concatenated message), a scalar's last occurrence wins.
//! Input comes from clients: every length is checked, nesting is bounded by [`MAX_DEPTH`], and
//! nothing panics. Bytes decoded once before (a cache's) may be decoded again through
//! [`stored_proto_to_json_into`], which skips the checks that cannot fail a second time.
//!
//! Speed: an object's cache lines are read ahead at once (`touch`); the scanning buffers are
//! kept per thread between decodes; the commonest fields (strings, structs, lists of structs,
//! bools and integers, short map entries, times, quantities) take short paths that write what
//! the general ones do; what to do with each field is decided once from the schema, into one
//! small table entry a field (`ACTS`), rather than from its shape, type and flags at every
//! write; keys and short strings are copied as fixed 32 bytes and cut (`gojson::string_in`);
//! trusted raw JSON is tested for work to do 16 bytes at a time (`gojson::compact_valid`).
//!
//! Nothing here reads JSON ([`super::encode`]) or envelopes ([`super::envelope`]).

use prost::encoding::{DecodeContext, WireType, skip_field};

use super::wire::{Occ, field_key, read, varint};

use super::error::ProtoError;
use super::gotime::{self, Instant};
use super::model::{
    Elem, Field, INLINE, JsonForm, Message, MessageRef, MsgId, NO_JSON, OMITEMPTY, OMITZERO, Shape,
};
use super::{gojson, quantity, schema};

/// How deep messages may nest before decoding gives up.
pub const MAX_DEPTH: usize = 128;

/// Decodes a protobuf message body of `msg`'s kind to JSON. With `type_meta`
/// (`(apiVersion, kind)`), `"kind"` and `"apiVersion"` come first, as Go writes the embedded
/// `TypeMeta`.
pub fn proto_to_json(
    msg: MessageRef,
    pb: &[u8],
    type_meta: Option<(&str, &str)>,
) -> Result<Vec<u8>, ProtoError> {
    let mut out = Vec::new();
    proto_to_json_into(msg, pb, type_meta, &mut out)?;
    Ok(out)
}

/// [`proto_to_json`] appending to `out` (e.g. the items of a list, one after the other, into
/// one buffer). On error `out` is as it was.
pub fn proto_to_json_into(
    msg: MessageRef,
    pb: &[u8],
    type_meta: Option<(&str, &str)>,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    decode_into(msg, pb, type_meta, out, false)
}

/// [`proto_to_json_into`] for bytes it has already decoded without error (a cache stores only
/// such bytes): checks that cannot fail a second time are skipped — the validity of raw JSON
/// values (`RawExtension`, `FieldsV1`, apiextensions `JSON`) is not checked again — and the
/// output is byte-identical to [`proto_to_json_into`]'s for such bytes.
///
/// Any other input is still read safely (every length checked, nothing panics), but raw JSON
/// that is not valid JSON is then copied (compacted as if it were) instead of refused.
pub fn stored_proto_to_json_into(
    msg: MessageRef,
    pb: &[u8],
    type_meta: Option<(&str, &str)>,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    decode_into(msg, pb, type_meta, out, true)
}

fn decode_into(
    msg: MessageRef,
    pb: &[u8],
    type_meta: Option<(&str, &str)>,
    out: &mut Vec<u8>,
    trusted: bool,
) -> Result<(), ProtoError> {
    let start = out.len();
    let written = object_with_type_meta(msg, pb, type_meta, out, trusted);
    if written.is_err() {
        out.truncate(start);
    }
    written
}

fn object_with_type_meta(
    msg: MessageRef,
    pb: &[u8],
    type_meta: Option<(&str, &str)>,
    out: &mut Vec<u8>,
    trusted: bool,
) -> Result<(), ProtoError> {
    out.reserve(pb.len() * 5 / 2 + 128);
    touch(pb);
    out.push(b'{');
    let mut first = true;
    if let Some((api_version, kind)) = type_meta {
        if !kind.is_empty() {
            key(out, "kind", &mut first);
            gojson::string(out, kind.as_bytes());
        }
        if !api_version.is_empty() {
            key(out, "apiVersion", &mut first);
            gojson::string(out, api_version.as_bytes());
        }
    }
    let (occs, entries) = SPARE.take();
    let mut pool = Pool {
        input: pb,
        trusted,
        occs,
        entries,
    };
    let written = write_fields(msg.0, &[pb], out, &mut first, 0, &mut pool);
    SPARE.set(pool.spare());
    written?;
    out.push(b'}');
    Ok(())
}

/// Reads a byte of each cache line of (the first [`TOUCHED`] bytes of) the input, all at once,
/// before decoding it. The decoder reaches a message's fields one after the other, each key's
/// position known only once the previous length is read: for an object not in the cache (one
/// of a list's, a cache's) each new cache line was a wait of its own. These reads depend on
/// nothing, so the processor has them all under way together, and the decoder then finds its
/// bytes in the cache. For an object already there, they cost a few nanoseconds.
#[inline]
fn touch(pb: &[u8]) {
    let head = pb.get(..TOUCHED).unwrap_or(pb);
    let sum = head.iter().step_by(64).fold(0u8, |a, &b| a ^ b);
    std::hint::black_box(sum);
}

/// How much of an input [`touch`] reads ahead: within the second-level cache.
const TOUCHED: usize = 64 * 1024;

/// A [`Pool`]'s buffers, empty, kept per thread between decodes (a list's objects, a watch's
/// events): a decode then allocates nothing but its output.
type Spare = (Vec<Vec<(u8, Occ<'static>)>>, Vec<Vec<Entry<'static>>>);

thread_local! {
    static SPARE: std::cell::Cell<Spare> = const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// How many buffers of each kind, and how many elements each, [`SPARE`] keeps at most: enough
/// for usual objects (a pod nests about eight deep, with tens of fields a level), not so much
/// that one huge object keeps its memory held: at most about 0.5 MiB a thread, and a list is
/// made on up to one blocking thread per core.
const SPARE_BUFFERS: usize = 16;
const SPARE_CAPACITY: usize = 1024;

/// Buffers reused across the messages of one decode: a message's occurrences are scanned into
/// a buffer taken from here and given back once the message is written, so a decode allocates
/// about once per nesting level instead of once per message.
struct Pool<'a> {
    /// The whole message being decoded: every value read is a part of it.
    input: &'a [u8],
    /// The input was decoded without error before ([`stored_proto_to_json_into`]): raw JSON
    /// is known to be valid.
    trusted: bool,
    occs: Vec<Vec<(u8, Occ<'a>)>>,
    entries: Vec<Vec<Entry<'a>>>,
}

/// A map entry: its key and the range of its values' occurrences.
type Entry<'a> = (&'a [u8], usize, usize);

impl<'a> Pool<'a> {
    /// The buffers, emptied, to keep for the next decode. An empty buffer of values borrowing
    /// this input is turned into one of values borrowing nothing by collecting its (no)
    /// elements: the standard library collects a `Vec`'s own iterator into the same allocation
    /// when the element types have the same size and alignment, as here, so the memory is kept
    /// (were it not, the buffer would merely be allocated again).
    fn spare(self) -> Spare {
        fn keep<T, U>(buffers: Vec<Vec<T>>) -> Vec<Vec<U>> {
            buffers
                .into_iter()
                .filter(|b| b.capacity() <= SPARE_CAPACITY)
                .take(SPARE_BUFFERS)
                .map(|b| b.into_iter().filter_map(|_| None).collect())
                .collect()
        }
        (keep(self.occs), keep(self.entries))
    }

    fn occs(&mut self) -> Vec<(u8, Occ<'a>)> {
        let mut v = self.occs.pop().unwrap_or_else(|| Vec::with_capacity(32));
        v.clear();
        v
    }
    fn entries(&mut self) -> Vec<Entry<'a>> {
        let mut v = self.entries.pop().unwrap_or_else(|| Vec::with_capacity(16));
        v.clear();
        v
    }
}

/// The schema's message `id` (every message of every struct): inline, its error apart.
#[inline]
fn message(id: MsgId) -> Result<&'static Message, ProtoError> {
    #[cold]
    #[inline(never)]
    fn missing(id: MsgId) -> ProtoError {
        ProtoError::protobuf("schema", format!("no message {id}"))
    }
    schema::MESSAGES
        .get(usize::from(id))
        .ok_or_else(|| missing(id))
}

/// Tags below this are looked up in [`BY_TAG`] (kube's highest is 43).
const TAGS: usize = 64;

/// Per message, per tag below [`TAGS`]: 0 for no field, else 1 + the index of the field with
/// that tag, and in the high byte the wire types it accepts ([`accepted`]): all that reading a
/// field's occurrence needs of the schema.
static BY_TAG: [[u16; TAGS]; schema::MESSAGES.len()] = by_tag();

const fn by_tag() -> [[u16; TAGS]; schema::MESSAGES.len()] {
    let mut table = [[0u16; TAGS]; schema::MESSAGES.len()];
    let mut m = 0;
    while m < table.len() {
        let fields = schema::MESSAGES[m].fields;
        let mut i = 0;
        while i < fields.len() {
            let tag = fields[i].tag as usize;
            assert!(
                tag < TAGS && i < u8::MAX as usize,
                "BY_TAG cannot hold the schema"
            );
            table[m][tag] = (i as u16 + 1) | (accepted(&fields[i]) as u16) << 8;
            i += 1;
        }
        m += 1;
    }
    table
}

/// The wire types gogo accepts for a field, a bit each: scalars packed or not when repeated.
const fn accepted(field: &Field) -> u8 {
    let scalar = match field.elem {
        Elem::Bool | Elem::Int32 | Elem::Int64 | Elem::Uint32 | Elem::Uint64 => WireType::Varint,
        Elem::Float64 => WireType::SixtyFourBit,
        _ => return 1 << WireType::LengthDelimited as u8,
    };
    let packed = if matches!(field.shape, Shape::Slice) {
        1 << WireType::LengthDelimited as u8
    } else {
        0
    };
    1 << scalar as u8 | packed
}

/// Per message, a bit per field (by index) that writes something, or may fail, when the field is
/// absent: `null` for a nil pointer, slice or map without `omitempty`, a zero value Go does not
/// omit (structs, times, quantities, non-`omitempty` scalars), an inline struct's fields. The
/// other absent fields write nothing and are not visited.
static ABSENT: [u64; schema::MESSAGES.len()] = absent();

const fn absent() -> [u64; schema::MESSAGES.len()] {
    let mut table = [0u64; schema::MESSAGES.len()];
    let mut m = 0;
    while m < table.len() {
        let fields = schema::MESSAGES[m].fields;
        assert!(fields.len() <= 64, "ABSENT cannot hold the schema");
        let mut i = 0;
        while i < fields.len() {
            let f = &fields[i];
            let (omitempty, omitzero) = (f.flags & OMITEMPTY != 0, f.flags & OMITZERO != 0);
            let scalar = matches!(
                f.elem,
                Elem::String
                    | Elem::Bytes
                    | Elem::Bool
                    | Elem::Int32
                    | Elem::Int64
                    | Elem::Uint32
                    | Elem::Uint64
                    | Elem::Float64
            );
            let time = matches!(f.elem, Elem::Time | Elem::MicroTime);
            let writes = if f.flags & NO_JSON != 0 {
                false
            } else if f.flags & INLINE != 0 {
                matches!(f.shape, Shape::Value) && matches!(f.elem, Elem::Message(_))
            } else {
                match f.shape {
                    Shape::Pointer | Shape::Slice | Shape::Map => !omitempty,
                    Shape::Value => !(omitempty && scalar || omitzero && time),
                }
            };
            if writes {
                table[m] |= 1 << i;
            }
            i += 1;
        }
        m += 1;
    }
    table
}

/// The index of `msg`'s field with protobuf number `tag`, and the wire types it accepts.
#[inline]
fn field_index(id: MsgId, msg: &'static Message, tag: u32) -> Option<(u8, u8)> {
    match BY_TAG
        .get(usize::from(id))
        .and_then(|row| row.get(usize::try_from(tag).ok()?))
    {
        Some(&0) => None,
        Some(&entry) => Some(((entry & 0xff) as u8 - 1, (entry >> 8) as u8)),
        None => msg
            .field_by_tag(tag)
            .and_then(|(i, f)| Some((u8::try_from(i).ok()?, accepted(f)))),
    }
}

/// Reads every known field of a message given as one or more chunks (merged occurrences) into
/// `occs`, skipping unknown ones, sorted stably by field index.
fn scan<'a>(
    id: MsgId,
    msg: &'static Message,
    chunks: &[&'a [u8]],
    occs: &mut Vec<(u8, Occ<'a>)>,
) -> Result<u64, ProtoError> {
    let mut present = 0u64;
    let mut sorted = true;
    let mut previous = 0u8;
    for chunk in chunks {
        let mut buf: &'a [u8] = chunk;
        while !buf.is_empty() {
            let (tag, wt) = field_key(&mut buf).map_err(|e| ProtoError::wire(msg.name, e))?;
            match field_index(id, msg, tag) {
                None => skip_field(wt, tag, &mut buf, DecodeContext::default())
                    .map_err(|e| ProtoError::wire(msg.name, e))?,
                Some((index, accepted)) => {
                    if accepted & 1 << wt as u8 == 0 {
                        return Err(ProtoError::protobuf(
                            msg.name,
                            format!("wrong wireType = {} for field {tag}", wt as u8),
                        ));
                    }
                    // Short strings and messages and small numbers inline; `read` for the rest.
                    let occ = match (wt, buf) {
                        (WireType::LengthDelimited, &[len, ref rest @ ..])
                            if len < 0x80 && usize::from(len) <= rest.len() =>
                        {
                            let (head, tail) = rest.split_at(usize::from(len));
                            buf = tail;
                            Occ::Bytes(head)
                        }
                        (WireType::Varint, &[v, ref rest @ ..]) if v < 0x80 => {
                            buf = rest;
                            Occ::Varint(u64::from(v))
                        }
                        _ => read(wt, &mut buf, msg.name)?,
                    };
                    sorted &= index >= previous;
                    previous = index;
                    present |= 1u64.checked_shl(u32::from(index)).unwrap_or(0);
                    occs.push((index, occ));
                }
            }
        }
    }
    if !sorted {
        occs.sort_by_key(|(i, _)| *i);
    }
    Ok(present)
}

/// Reads the fields of a small hand-marshalled message (Timestamp, Quantity, …): `f` gets each
/// known field's tag and value; `wire` names the wire type each known tag must have.
fn inner<'a>(
    chunks: &[&'a [u8]],
    at: &str,
    wire: impl Fn(u32) -> Option<WireType>,
    mut f: impl FnMut(u32, Occ<'a>),
) -> Result<(), ProtoError> {
    for chunk in chunks {
        let mut buf: &'a [u8] = chunk;
        while !buf.is_empty() {
            let (tag, wt) = field_key(&mut buf).map_err(|e| ProtoError::wire(at, e))?;
            match wire(tag) {
                None => skip_field(wt, tag, &mut buf, DecodeContext::default())
                    .map_err(|e| ProtoError::wire(at, e))?,
                Some(want) if want == wt => f(tag, read(wt, &mut buf, at)?),
                Some(_) => {
                    return Err(ProtoError::protobuf(
                        at,
                        format!("wrong wireType = {} for field {tag}", wt as u8),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// How many fields the schema has, all messages together.
const FIELDS: usize = {
    let mut n = 0;
    let mut m = 0;
    while m < schema::MESSAGES.len() {
        n += schema::MESSAGES[m].fields.len();
        m += 1;
    }
    n
};

/// Room after the last key, so that a fixed-size read from any key's start stays in [`KEYS`].
const KEY_SLACK: usize = 32;

/// The size of [`KEYS`].
const KEYS_LEN: usize = {
    let mut n = KEY_SLACK;
    let mut m = 0;
    while m < schema::MESSAGES.len() {
        let fields = schema::MESSAGES[m].fields;
        let mut i = 0;
        while i < fields.len() {
            n += fields[i].name.len() + 4;
            i += 1;
        }
        m += 1;
    }
    n
};

/// Every field's key as written after another one, `,"name":`, field after field and message
/// after message: [`key`] copies them with one fixed-size copy instead of four small ones.
static KEYS: [u8; KEYS_LEN] = {
    let mut keys = [0u8; KEYS_LEN];
    let mut at = 0;
    let mut m = 0;
    while m < schema::MESSAGES.len() {
        let fields = schema::MESSAGES[m].fields;
        let mut i = 0;
        while i < fields.len() {
            let name = fields[i].name.as_bytes();
            keys[at] = b',';
            keys[at + 1] = b'"';
            let mut c = 0;
            while c < name.len() {
                keys[at + 2 + c] = name[c];
                c += 1;
            }
            keys[at + 2 + name.len()] = b'"';
            keys[at + 3 + name.len()] = b':';
            at += name.len() + 4;
            i += 1;
        }
        m += 1;
    }
    keys
};

/// Per message, the number of the first of its fields in [`KEY_AT`].
static FIELD_BASE: [u16; schema::MESSAGES.len()] = {
    let mut base = [0u16; schema::MESSAGES.len()];
    let mut n = 0;
    let mut m = 0;
    while m < schema::MESSAGES.len() {
        assert!(n <= u16::MAX as usize, "FIELD_BASE cannot hold the schema");
        base[m] = n as u16;
        n += schema::MESSAGES[m].fields.len();
        m += 1;
    }
    base
};

/// Per field (message after message), where its key starts in [`KEYS`].
static KEY_AT: [u32; FIELDS] = {
    let mut key_at = [0u32; FIELDS];
    let (mut n, mut at) = (0, 0);
    let mut m = 0;
    while m < schema::MESSAGES.len() {
        let fields = schema::MESSAGES[m].fields;
        let mut i = 0;
        while i < fields.len() {
            key_at[n] = at as u32;
            at += fields[i].name.len() + 4;
            n += 1;
            i += 1;
        }
        m += 1;
    }
    key_at
};

/// Writes a field's key (`at`: from [`KEY_AT`]): [`KEYS`]'s bytes copied 32 at once and the
/// excess cut, which is quicker than copying a few bytes of a length known only at run time.
#[inline(always)]
fn schema_key(out: &mut Vec<u8>, at: Option<usize>, name: &str, first: &mut bool) {
    let (from, len) = if *first {
        (at.map(|a| a + 1), name.len() + 3)
    } else {
        (at, name.len() + 4)
    };
    let chunk = from.and_then(|f| KEYS.get(f..f + KEY_SLACK));
    match chunk.and_then(|c| <&[u8; KEY_SLACK]>::try_from(c).ok()) {
        Some(chunk) if len <= KEY_SLACK => {
            *first = false;
            let start = out.len();
            out.extend_from_slice(chunk);
            out.truncate(start + len);
        }
        _ => key(out, name, first),
    }
}

#[inline]
fn key(out: &mut Vec<u8>, name: &str, first: &mut bool) {
    out.reserve(name.len() + 4);
    if !*first {
        out.push(b',');
    }
    *first = false;
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// Occurrences of one field: (field index, value).
type Group<'g, 'a> = &'g [(u8, Occ<'a>)];

/// Runs `f` on the payloads of a group of occurrences (read as one merged message), without
/// allocating for the usual single occurrence.
fn with_chunks<'a, R>(group: Group<'_, 'a>, f: impl FnOnce(&[&'a [u8]]) -> R) -> R {
    match group {
        [] => f(&[]),
        [(_, o)] => f(&[o.bytes()]),
        _ => {
            let chunks: Vec<&'a [u8]> = group.iter().map(|(_, o)| o.bytes()).collect();
            f(&chunks)
        }
    }
}

fn last<'a>(group: Group<'_, 'a>) -> Option<Occ<'a>> {
    group.last().map(|(_, o)| *o)
}

/// What [`write_fields`] does with a field, decided once per field from the schema ([`ACTS`]):
/// one small table entry read per field, instead of the field's shape, type and flags, each
/// a branch of its own on data the processor cannot predict.
#[derive(Clone, Copy)]
struct Act {
    /// Where the field's key starts in [`KEYS`].
    key_at: u32,
    /// The length of the key with its leading comma (`,"name":`).
    key_len: u8,
    /// One of the `DO_` constants.
    what: u8,
    /// The message of a struct field, for the `DO_` that write one.
    child: MsgId,
}

/// Nothing (`json:"-"`, or an inline field that is not a struct).
const DO_NOTHING: u8 = 0;
/// [`write_field`], the general way.
const DO_FIELD: u8 = 1;
/// An inline struct value: its fields in the parent's object.
const DO_INLINE: u8 = 2;
/// An inline struct pointer: its fields in the parent's object when present.
const DO_INLINE_POINTER: u8 = 3;
/// A string value, written even when empty.
const DO_STRING: u8 = 4;
/// A string value, `omitempty`.
const DO_STRING_OMITEMPTY: u8 = 5;
/// A struct value (a [`JsonForm::Struct`] message).
const DO_STRUCT: u8 = 6;
/// A struct pointer.
const DO_STRUCT_POINTER: u8 = 7;
/// A slice of structs.
const DO_STRUCTS: u8 = 8;
/// A bool, int32 or int64 value (which: `child`, one of the `SCALAR_`), written even when zero.
const DO_SCALAR: u8 = 9;
/// A bool, int32 or int64 value, `omitempty`.
const DO_SCALAR_OMITEMPTY: u8 = 10;
/// A pointer to a bool, int32 or int64: when present, its value.
const DO_SCALAR_POINTER: u8 = 11;

/// The scalars of the `DO_SCALAR` actions, in their [`Act`]'s `child`.
const SCALAR_BOOL: MsgId = 0;
const SCALAR_INT32: MsgId = 1;
const SCALAR_INT64: MsgId = 2;

/// Per field (message after message, from [`FIELD_BASE`]), its [`Act`].
static ACTS: [Act; FIELDS] = {
    let mut acts = [Act {
        key_at: 0,
        key_len: 0,
        what: DO_NOTHING,
        child: 0,
    }; FIELDS];
    let mut n = 0;
    let mut m = 0;
    while m < schema::MESSAGES.len() {
        let fields = schema::MESSAGES[m].fields;
        let mut i = 0;
        while i < fields.len() {
            let f = &fields[i];
            let child = match f.elem {
                Elem::Message(child) => Some(child),
                _ => None,
            };
            let scalar = match f.elem {
                Elem::Bool => Some(SCALAR_BOOL),
                Elem::Int32 => Some(SCALAR_INT32),
                Elem::Int64 => Some(SCALAR_INT64),
                _ => None,
            };
            let is_struct = match child {
                Some(c) => matches!(schema::MESSAGES[c as usize].form, JsonForm::Struct),
                None => false,
            };
            let what = if f.flags & NO_JSON != 0 {
                DO_NOTHING
            } else if f.flags & INLINE != 0 {
                match (child, f.shape) {
                    (Some(_), Shape::Value) => DO_INLINE,
                    (Some(_), Shape::Pointer) => DO_INLINE_POINTER,
                    _ => DO_NOTHING,
                }
            } else if matches!(f.shape, Shape::Value) && matches!(f.elem, Elem::String) {
                if f.flags & OMITEMPTY != 0 {
                    DO_STRING_OMITEMPTY
                } else {
                    DO_STRING
                }
            } else if scalar.is_some() && f.flags & OMITZERO == 0 {
                match (f.shape, f.flags & OMITEMPTY != 0) {
                    (Shape::Value, false) => DO_SCALAR,
                    (Shape::Value, true) => DO_SCALAR_OMITEMPTY,
                    (Shape::Pointer, _) => DO_SCALAR_POINTER,
                    _ => DO_FIELD,
                }
            } else if is_struct {
                match f.shape {
                    Shape::Value => DO_STRUCT,
                    Shape::Pointer => DO_STRUCT_POINTER,
                    Shape::Slice => DO_STRUCTS,
                    Shape::Map => DO_FIELD,
                }
            } else {
                DO_FIELD
            };
            let key_len = f.name.len() + 4;
            acts[n] = Act {
                key_at: KEY_AT[n],
                key_len: if key_len <= KEY_SLACK {
                    key_len as u8
                } else {
                    0
                },
                what,
                child: match (child, scalar) {
                    (Some(c), _) | (None, Some(c)) => c,
                    (None, None) => 0,
                },
            };
            n += 1;
            i += 1;
        }
        m += 1;
    }
    acts
};

/// Writes a field's key as [`schema_key`] does, from its [`Act`]: the key's length is in the
/// table, the field's name read only for a key too long for one fixed-size copy.
#[inline(always)]
fn act_key(out: &mut Vec<u8>, act: Act, field: impl FnOnce() -> &'static str, first: &mut bool) {
    let skip = usize::from(*first);
    let from = act.key_at as usize + skip;
    let chunk = KEYS.get(from..from + KEY_SLACK);
    match chunk.and_then(|c| <&[u8; KEY_SLACK]>::try_from(c).ok()) {
        Some(chunk) if act.key_len != 0 => {
            *first = false;
            let start = out.len();
            out.extend_from_slice(chunk);
            out.truncate(start + usize::from(act.key_len) - skip);
        }
        _ => key(out, field(), first),
    }
}

/// Writes a message's fields (without braces: inline structs share their parent's object).
fn write_fields<'a>(
    id: MsgId,
    chunks: &[&'a [u8]],
    out: &mut Vec<u8>,
    first: &mut bool,
    depth: usize,
    pool: &mut Pool<'a>,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep(MAX_DEPTH));
    }
    let msg = message(id)?;
    let base = usize::from(FIELD_BASE.get(usize::from(id)).copied().unwrap_or(0));
    let acts = ACTS.get(base..base + msg.fields.len()).unwrap_or_default();
    let mut occs = pool.occs();
    let present = scan(id, msg, chunks, &mut occs)?;
    let mut rest: &[(u8, Occ<'a>)] = &occs;
    // The fields present or written when absent, in Go order.
    let mut todo = present | ABSENT.get(usize::from(id)).copied().unwrap_or(u64::MAX);
    while todo != 0 {
        let index = todo.trailing_zeros() as usize;
        todo &= todo - 1;
        let Some(&act) = acts.get(index) else {
            break;
        };
        // Usually one occurrence, or none (a field written when absent).
        let n = match rest {
            [] => 0,
            [(i, _), ..] if usize::from(*i) != index => 0,
            [_] => 1,
            [_, (i, _), ..] if usize::from(*i) != index => 1,
            _ => rest
                .iter()
                .position(|(i, _)| usize::from(*i) != index)
                .unwrap_or(rest.len()),
        };
        let (group, tail) = rest.split_at_checked(n).unwrap_or((&[], &[]));
        rest = tail;
        let name = || msg.fields.get(index).map_or("", |f| f.name);
        match (act.what, group) {
            (DO_NOTHING, _) | (DO_INLINE_POINTER, []) => {}
            (DO_INLINE | DO_INLINE_POINTER, _) => {
                with_chunks(group, |chunks| {
                    write_fields(act.child, chunks, out, first, depth + 1, pool)
                })?;
            }
            // The commonest field, a string set once, written here: what `write_field` does.
            (DO_STRING | DO_STRING_OMITEMPTY, [(_, Occ::Bytes(s))]) => {
                if !(s.is_empty() && act.what == DO_STRING_OMITEMPTY) {
                    act_key(out, act, name, first);
                    gojson::string_in(out, s, pool.input);
                }
            }
            // A struct, or a list of them (no `null` to write, the list not empty): its fields
            // straight away, as `write_field`, `elem` and `object` would go.
            (DO_STRUCT, _) | (DO_STRUCT_POINTER, [_, ..]) => {
                act_key(out, act, name, first);
                with_chunks(group, |chunks| {
                    struct_object(act.child, chunks, out, depth + 1, pool)
                })?;
            }
            // Numbers and bools, as `write_field` and `elem` write them.
            (DO_SCALAR | DO_SCALAR_OMITEMPTY, _) | (DO_SCALAR_POINTER, [_, ..]) => {
                let v = last(group).map_or(0, Occ::varint);
                let zero = match act.child {
                    SCALAR_INT32 => v as u32 == 0,
                    _ => v == 0,
                };
                if !(zero && act.what == DO_SCALAR_OMITEMPTY) {
                    act_key(out, act, name, first);
                    match act.child {
                        SCALAR_BOOL => out.extend_from_slice(if zero { b"false" } else { b"true" }),
                        SCALAR_INT32 => gojson::int(out, i64::from(v as i32)),
                        _ => gojson::int(out, v as i64),
                    }
                }
            }
            (DO_STRUCTS, [_, ..]) => {
                act_key(out, act, name, first);
                out.push(b'[');
                for (i, (_, o)) in group.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    struct_object(act.child, &[o.bytes()], out, depth + 1, pool)?;
                }
                out.push(b']');
            }
            _ => {
                let Some(field) = msg.fields.get(index) else {
                    break;
                };
                write_field(
                    msg,
                    field,
                    Some(act.key_at as usize),
                    group,
                    out,
                    first,
                    depth,
                    pool,
                )?;
            }
        }
    }
    pool.occs.push(occs);
    Ok(())
}

/// [`object`] of a [`JsonForm::Struct`] message.
#[inline(always)]
fn struct_object<'a>(
    id: MsgId,
    chunks: &[&'a [u8]],
    out: &mut Vec<u8>,
    depth: usize,
    pool: &mut Pool<'a>,
) -> Result<(), ProtoError> {
    out.push(b'{');
    let mut first = true;
    write_fields(id, chunks, out, &mut first, depth, pool)?;
    out.push(b'}');
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn write_field<'a>(
    msg: &'static Message,
    field: &'static Field,
    at: Option<usize>,
    occs: Group<'_, 'a>,
    out: &mut Vec<u8>,
    first: &mut bool,
    depth: usize,
    pool: &mut Pool<'a>,
) -> Result<(), ProtoError> {
    let omitempty = field.has(OMITEMPTY);
    match field.shape {
        Shape::Pointer | Shape::Slice | Shape::Map if occs.is_empty() => {
            if !omitempty {
                schema_key(out, at, field.name, first);
                out.extend_from_slice(b"null");
            }
            Ok(())
        }
        Shape::Pointer => {
            schema_key(out, at, field.name, first);
            elem(msg, field.elem, occs, out, depth, false, pool)
        }
        Shape::Slice => {
            schema_key(out, at, field.name, first);
            list(msg, field.elem, occs, out, depth, pool)
        }
        Shape::Map => {
            schema_key(out, at, field.name, first);
            map(msg, field.elem, occs, out, depth, pool)
        }
        Shape::Value => {
            if omitempty && is_empty(field.elem, occs) {
                return Ok(());
            }
            if field.has(OMITZERO) && matches!(field.elem, Elem::Time | Elem::MicroTime) {
                // Read once: omitted when zero, else written here.
                let micro = field.elem == Elem::MicroTime;
                match time(occs, micro, msg.name)? {
                    Some(t) if !t.is_zero() => {
                        schema_key(out, at, field.name, first);
                        write_time(out, t, micro);
                    }
                    _ => {}
                }
                return Ok(());
            }
            if field.elem == Elem::Bytes && occs.is_empty() {
                schema_key(out, at, field.name, first);
                out.extend_from_slice(b"null");
                return Ok(());
            }
            schema_key(out, at, field.name, first);
            elem(msg, field.elem, occs, out, depth, false, pool)
        }
    }
}

/// Go's `isEmptyValue` for a value field: zero scalars, empty strings and byte slices (structs
/// are never empty).
fn is_empty(elem: Elem, occs: Group) -> bool {
    let last = last(occs);
    match elem {
        Elem::String | Elem::Bytes => last.is_none_or(|o| o.bytes().is_empty()),
        Elem::Bool | Elem::Int64 | Elem::Uint64 => last.is_none_or(|o| o.varint() == 0),
        Elem::Int32 | Elem::Uint32 => last.is_none_or(|o| o.varint() as u32 == 0),
        Elem::Float64 => last.is_none_or(|o| match o {
            Occ::Fixed64(bits) => f64::from_bits(bits) == 0.0,
            _ => true,
        }),
        _ => false,
    }
}

/// Writes one element from its occurrences (`in_map`: a map value, where a missing `[]byte`
/// is gogo's empty, non-nil slice).
fn elem<'a>(
    msg: &'static Message,
    elem: Elem,
    occs: Group<'_, 'a>,
    out: &mut Vec<u8>,
    depth: usize,
    in_map: bool,
    pool: &mut Pool<'a>,
) -> Result<(), ProtoError> {
    let last = last(occs);
    match elem {
        Elem::String => gojson::string_in(out, last.map_or(&[][..], Occ::bytes), pool.input),
        Elem::Bytes => match last {
            None if !in_map => out.extend_from_slice(b"null"),
            _ => gojson::bytes(out, last.map_or(&[][..], Occ::bytes)),
        },
        Elem::Bool => out.extend_from_slice(if last.is_some_and(|o| o.varint() != 0) {
            b"true"
        } else {
            b"false"
        }),
        Elem::Int32 => gojson::int(out, i64::from(last.map_or(0, Occ::varint) as i32)),
        Elem::Int64 => gojson::int(out, last.map_or(0, Occ::varint) as i64),
        Elem::Uint32 => gojson::uint(out, u64::from(last.map_or(0, Occ::varint) as u32)),
        Elem::Uint64 => gojson::uint(out, last.map_or(0, Occ::varint)),
        Elem::Float64 => {
            let bits = match last {
                Some(Occ::Fixed64(b)) => b,
                _ => 0,
            };
            gojson::float(out, f64::from_bits(bits))
                .map_err(|e| ProtoError::unencodable(msg.name, e))?;
        }
        Elem::Message(id) => {
            with_chunks(occs, |chunks| object(id, chunks, out, depth + 1, pool))?;
        }
        Elem::Time | Elem::MicroTime => {
            let micro = elem == Elem::MicroTime;
            match time(occs, micro, msg.name)? {
                Some(t) if !t.is_zero() => write_time(out, t, micro),
                _ => out.extend_from_slice(b"null"),
            }
        }
        Elem::Duration => {
            let mut d = 0u64;
            with_chunks(occs, |chunks| {
                inner(
                    chunks,
                    "Duration",
                    |t| (t == 1).then_some(WireType::Varint),
                    |_, o| d = o.varint(),
                )
            })?;
            gojson::string(out, gotime::duration_string(d as i64).as_bytes());
        }
        Elem::Quantity => {
            let s = bytes_field_1(occs, "Quantity")?.unwrap_or(b"0");
            let s = std::str::from_utf8(s)
                .map_err(|_| ProtoError::protobuf("Quantity", "not a quantity"))?;
            out.push(b'"');
            quantity::write_canonical(out, s)
                .map_err(|e| ProtoError::protobuf("Quantity", format!("{s:?}: {e}")))?;
            out.push(b'"');
        }
        Elem::IntOrString => {
            let (mut ty, mut int, mut s) = (0u64, 0u64, &[][..]);
            with_chunks(occs, |chunks| {
                inner(
                    chunks,
                    "IntOrString",
                    |t| match t {
                        1 | 2 => Some(WireType::Varint),
                        3 => Some(WireType::LengthDelimited),
                        _ => None,
                    },
                    |t, o| match t {
                        1 => ty = o.varint(),
                        2 => int = o.varint(),
                        _ => s = o.bytes(),
                    },
                )
            })?;
            match ty as i64 {
                0 => gojson::int(out, i64::from(int as i32)),
                1 => gojson::string_in(out, s, pool.input),
                _ => {
                    return Err(ProtoError::unencodable(
                        "IntOrString",
                        "impossible IntOrString.Type",
                    ));
                }
            }
        }
        Elem::RawExtension | Elem::FieldsV1 | Elem::JsonRaw => {
            match bytes_field_1(occs, "raw")? {
                None => out.extend_from_slice(b"null"),
                // FieldsV1 and apiextensions JSON write an empty raw as null; RawExtension
                // returns it as is, which Go's encoder refuses.
                Some([]) if elem != Elem::RawExtension => out.extend_from_slice(b"null"),
                Some(raw) if pool.trusted => gojson::compact_valid(out, raw),
                Some(raw) => gojson::compact(out, raw)
                    .map_err(|e| ProtoError::unencodable(msg.name, format!("raw JSON: {e}")))?,
            }
        }
    }
    Ok(())
}

/// The last value of field 1, length-delimited, of a small message given as its occurrences
/// (`Quantity`, `FieldsV1`, `RawExtension`, apiextensions `JSON`): [`inner`] for these, without
/// its closures, and a message holding only that field, as Go writes it, read at once.
fn bytes_field_1<'a>(occs: Group<'_, 'a>, at: &str) -> Result<Option<&'a [u8]>, ProtoError> {
    if let [(_, Occ::Bytes(&[0x0a, len, ref value @ ..]))] = *occs
        && len < 0x80
        && usize::from(len) == value.len()
    {
        return Ok(Some(value));
    }
    let mut found = None;
    for (_, o) in occs {
        let mut buf = o.bytes();
        while !buf.is_empty() {
            let (tag, wt) = field_key(&mut buf).map_err(|e| ProtoError::wire(at, e))?;
            match (tag, wt) {
                (1, WireType::LengthDelimited) => found = Some(read(wt, &mut buf, at)?.bytes()),
                (1, _) => {
                    return Err(ProtoError::protobuf(
                        at,
                        format!("wrong wireType = {} for field {tag}", wt as u8),
                    ));
                }
                _ => skip_field(wt, tag, &mut buf, DecodeContext::default())
                    .map_err(|e| ProtoError::wire(at, e))?,
            }
        }
    }
    Ok(found)
}

/// A `metav1.Time`/`MicroTime` from its occurrences: each replaces the previous (Go's
/// hand-written `Unmarshal`); an empty one is the zero time; `None` when absent.
fn time(occs: Group, micro: bool, at: &str) -> Result<Option<Instant>, ProtoError> {
    let Some(last) = last(occs) else {
        return Ok(None);
    };
    let data = last.bytes();
    if data.is_empty() {
        return Ok(Some(Instant::unix(gotime::ZERO_UNIX, 0)));
    }
    // `inner`'s loop, written out: a time is read for every timestamp of every object.
    let (mut secs, mut nanos) = (0u64, 0u64);
    let mut buf = data;
    while !buf.is_empty() {
        let (tag, wt) = field_key(&mut buf).map_err(|e| ProtoError::wire(at, e))?;
        match (tag, wt) {
            (1 | 2, WireType::Varint) => {
                let v = varint(&mut buf).map_err(|e| ProtoError::wire(at, e))?;
                if tag == 1 {
                    secs = v;
                } else {
                    nanos = v;
                }
            }
            (1 | 2, _) => {
                return Err(ProtoError::protobuf(
                    at,
                    format!("wrong wireType = {} for field {tag}", wt as u8),
                ));
            }
            _ => skip_field(wt, tag, &mut buf, DecodeContext::default())
                .map_err(|e| ProtoError::wire(at, e))?,
        }
    }
    let nanos = if micro {
        // int32 nanos truncated toward zero to whole microseconds.
        i64::from(nanos as i32 / 1000 * 1000)
    } else {
        0
    };
    Ok(Some(Instant::unix(secs as i64, nanos)))
}

/// Writes a time that is not zero, quoted.
#[inline]
fn write_time(out: &mut Vec<u8>, t: Instant, micro: bool) {
    out.push(b'"');
    gotime::format(out, t, micro);
    out.push(b'"');
}

/// Writes a slice: each occurrence one element (packed scalars expanded).
fn list<'a>(
    msg: &'static Message,
    elem_ty: Elem,
    occs: Group<'_, 'a>,
    out: &mut Vec<u8>,
    depth: usize,
    pool: &mut Pool<'a>,
) -> Result<(), ProtoError> {
    out.push(b'[');
    let mut first = true;
    let mut item = |out: &mut Vec<u8>, o: Occ<'a>| -> Result<(), ProtoError> {
        if !first {
            out.push(b',');
        }
        first = false;
        elem(msg, elem_ty, &[(0, o)], out, depth, false, pool)
    };
    let packable = matches!(
        elem_ty,
        Elem::Bool | Elem::Int32 | Elem::Int64 | Elem::Uint32 | Elem::Uint64 | Elem::Float64
    );
    for &(_, o) in occs {
        match o {
            Occ::Bytes(mut packed) if packable => {
                while !packed.is_empty() {
                    let wt = if elem_ty == Elem::Float64 {
                        WireType::SixtyFourBit
                    } else {
                        WireType::Varint
                    };
                    let v = read(wt, &mut packed, msg.name)?;
                    item(out, v)?;
                }
            }
            o => item(out, o)?,
        }
    }
    out.push(b']');
    Ok(())
}

/// Writes a `map[string]T`: entries `{1: key, 2: value}`, the last of a key winning, keys sorted
/// as Go's encoder sorts them.
fn map<'a>(
    msg: &'static Message,
    elem_ty: Elem,
    occs: Group<'_, 'a>,
    out: &mut Vec<u8>,
    depth: usize,
    pool: &mut Pool<'a>,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep(MAX_DEPTH));
    }
    let value_wire = match elem_ty {
        Elem::Bool | Elem::Int32 | Elem::Int64 | Elem::Uint32 | Elem::Uint64 => WireType::Varint,
        Elem::Float64 => WireType::SixtyFourBit,
        _ => WireType::LengthDelimited,
    };
    // Entries as (key, range of their values in `values`).
    let mut values = pool.occs();
    let mut entries = pool.entries();
    for (_, o) in occs {
        let mut k: &[u8] = &[];
        let start = values.len();
        // The usual entry, a short key and a short length-delimited value, Go's way, at once.
        if let Occ::Bytes(&[0x0a, klen, ref rest @ ..]) = *o
            && value_wire == WireType::LengthDelimited
            && klen < 0x80
            && let Some((key, &[0x12, vlen, ref value @ ..])) = rest.split_at_checked(klen.into())
            && vlen < 0x80
            && usize::from(vlen) == value.len()
        {
            values.push((0, Occ::Bytes(value)));
            entries.push((key, start, values.len()));
            continue;
        }
        inner(
            &[o.bytes()],
            msg.name,
            |t| match t {
                1 => Some(WireType::LengthDelimited),
                2 => Some(value_wire),
                _ => None,
            },
            |t, v| {
                if t == 1 {
                    k = v.bytes();
                } else {
                    values.push((0, v));
                }
            },
        )?;
        entries.push((k, start, values.len()));
    }
    // gogo writes keys sorted, each once: then there is nothing to sort or drop.
    if !entries.is_sorted_by(|a, b| a.0 < b.0) {
        entries.reverse();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries.dedup_by(|later, earlier| later.0 == earlier.0);
    }
    out.push(b'{');
    for (i, &(k, start, end)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        gojson::string_in(out, k, pool.input);
        out.push(b':');
        let group = values.get(start..end).unwrap_or_default();
        elem(msg, elem_ty, group, out, depth + 1, true, pool)?;
    }
    out.push(b'}');
    pool.occs.push(values);
    pool.entries.push(entries);
    Ok(())
}

/// Writes a struct (or one of apiextensions' either-or types, or a nullable slice) from its
/// merged occurrences.
fn object<'a>(
    id: MsgId,
    chunks: &[&'a [u8]],
    out: &mut Vec<u8>,
    depth: usize,
    pool: &mut Pool<'a>,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep(MAX_DEPTH));
    }
    let msg = message(id)?;
    if msg.form == JsonForm::Struct {
        return struct_object(id, chunks, out, depth, pool);
    }
    let mut occs = Vec::new();
    scan(id, msg, chunks, &mut occs)?;
    let of = |tag: u32| -> (Vec<(u8, Occ)>, Option<Elem>) {
        match msg.field_by_tag(tag) {
            Some((i, f)) => (
                occs.iter()
                    .filter(|(j, _)| usize::from(*j) == i)
                    .copied()
                    .collect(),
                Some(f.elem),
            ),
            None => (Vec::new(), None),
        }
    };
    match msg.form {
        JsonForm::OrBool => {
            let (allows, _) = of(1);
            let (schema, schema_elem) = of(2);
            match schema_elem {
                Some(e) if !schema.is_empty() => elem(msg, e, &schema, out, depth, false, pool)?,
                _ => out.extend_from_slice(if last(&allows).is_some_and(|o| o.varint() != 0) {
                    b"true"
                } else {
                    b"false"
                }),
            }
        }
        JsonForm::OrArray | JsonForm::OrStringArray => {
            let (schema, schema_elem) = of(1);
            let (items, items_elem) = of(2);
            match (schema_elem, items_elem) {
                (_, Some(e)) if !items.is_empty() => list(msg, e, &items, out, depth + 1, pool)?,
                (Some(e), _) if !schema.is_empty() => {
                    elem(msg, e, &schema, out, depth, false, pool)?
                }
                _ => out.extend_from_slice(b"null"),
            }
        }
        JsonForm::Items => {
            let (items, items_elem) = of(1);
            match items_elem {
                Some(e) if !items.is_empty() => list(msg, e, &items, out, depth + 1, pool)?,
                _ => out.extend_from_slice(b"null"),
            }
        }
        JsonForm::Struct => {}
    }
    Ok(())
}
