//! protobuf → JSON: the JSON Go's `encoding/json` writes for the value gogo's unmarshaller
//! decodes from a message body.
//!
//! Each message is scanned once for its known fields (unknown ones skipped, wire types checked
//! as gogo checks them), then written in Go field order with Go's `omitempty` rules. Proto merge
//! semantics are kept: a repeated occurrence of a message field merges into the earlier one
//! (its occurrences are read as one concatenated message), a scalar's last occurrence wins.
//! Input comes from clients: every length is checked, nesting is bounded by [`MAX_DEPTH`], and
//! nothing panics.
//!
//! Nothing here reads JSON ([`super::encode`]) or envelopes ([`super::envelope`]).

use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};

use super::error::ProtoError;
use super::gotime::{self, Instant};
use super::model::{
    Elem, Field, INLINE, JsonForm, Message, MessageRef, NO_JSON, OMITEMPTY, OMITZERO, Shape,
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
    let mut out = Vec::with_capacity(pb.len() * 2 + 64);
    out.push(b'{');
    let mut first = true;
    if let Some((api_version, kind)) = type_meta {
        if !kind.is_empty() {
            key(&mut out, "kind", &mut first);
            gojson::string(&mut out, kind.as_bytes());
        }
        if !api_version.is_empty() {
            key(&mut out, "apiVersion", &mut first);
            gojson::string(&mut out, api_version.as_bytes());
        }
    }
    write_fields(msg.message(), &[pb], &mut out, &mut first, 0)?;
    out.push(b'}');
    Ok(out)
}

/// One occurrence of a field on the wire.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Occ<'a> {
    Varint(u64),
    Fixed64(u64),
    /// A 32-bit value (no kube field has one; read only to be skipped safely).
    Fixed32,
    Bytes(&'a [u8]),
}

impl<'a> Occ<'a> {
    fn bytes(self) -> &'a [u8] {
        match self {
            Occ::Bytes(b) => b,
            _ => &[],
        }
    }
    fn varint(self) -> u64 {
        match self {
            Occ::Varint(v) => v,
            _ => 0,
        }
    }
}

fn message(id: u16) -> Result<&'static Message, ProtoError> {
    schema::MESSAGES
        .get(usize::from(id))
        .ok_or_else(|| ProtoError::protobuf("schema", format!("no message {id}")))
}

/// Reads one value of wire type `wt`.
pub(crate) fn read<'a>(wt: WireType, buf: &mut &'a [u8], at: &str) -> Result<Occ<'a>, ProtoError> {
    let short = || ProtoError::protobuf(at, "unexpected EOF");
    Ok(match wt {
        WireType::Varint => Occ::Varint(decode_varint(buf).map_err(|e| ProtoError::wire(at, e))?),
        WireType::SixtyFourBit => {
            let (head, rest) = buf.split_at_checked(8).ok_or_else(short)?;
            *buf = rest;
            Occ::Fixed64(u64::from_le_bytes(head.try_into().map_err(|_| short())?))
        }
        WireType::ThirtyTwoBit => {
            let (_, rest) = buf.split_at_checked(4).ok_or_else(short)?;
            *buf = rest;
            Occ::Fixed32
        }
        WireType::LengthDelimited => {
            let len = decode_varint(buf).map_err(|e| ProtoError::wire(at, e))?;
            let len = usize::try_from(len).map_err(|_| short())?;
            let (head, rest) = buf.split_at_checked(len).ok_or_else(short)?;
            *buf = rest;
            Occ::Bytes(head)
        }
        WireType::StartGroup | WireType::EndGroup => {
            return Err(ProtoError::protobuf(at, "unexpected group"));
        }
    })
}

/// The wire types gogo accepts for a field: scalars packed or not when repeated.
fn accepts(field: &Field, wt: WireType) -> bool {
    let scalar = match field.elem {
        Elem::Bool | Elem::Int32 | Elem::Int64 | Elem::Uint32 | Elem::Uint64 => WireType::Varint,
        Elem::Float64 => WireType::SixtyFourBit,
        _ => return wt == WireType::LengthDelimited,
    };
    wt == scalar || (field.shape == Shape::Slice && wt == WireType::LengthDelimited)
}

/// Reads every known field of a message given as one or more chunks (merged occurrences),
/// skipping unknown ones, sorted stably by field index.
fn scan<'a>(msg: &'static Message, chunks: &[&'a [u8]]) -> Result<Vec<(u8, Occ<'a>)>, ProtoError> {
    let mut occs = Vec::with_capacity(msg.fields.len());
    for chunk in chunks {
        let mut buf: &'a [u8] = chunk;
        // Fields come in tag order: try the next one before searching.
        let mut next = 0usize;
        while !buf.is_empty() {
            let (tag, wt) = decode_key(&mut buf).map_err(|e| ProtoError::wire(msg.name, e))?;
            let expected = msg.by_tag.get(next).and_then(|&i| {
                let f = msg.fields.get(usize::from(i))?;
                (f.tag == tag).then_some((usize::from(i), f))
            });
            let found = match expected {
                Some(hit) => {
                    next += 1;
                    Some(hit)
                }
                None => msg.field_by_tag(tag),
            };
            match found {
                None => skip_field(wt, tag, &mut buf, DecodeContext::default())
                    .map_err(|e| ProtoError::wire(msg.name, e))?,
                Some((index, field)) => {
                    if !accepts(field, wt) {
                        return Err(ProtoError::protobuf(
                            msg.name,
                            format!("wrong wireType = {} for field {tag}", wt as u8),
                        ));
                    }
                    let occ = read(wt, &mut buf, msg.name)?;
                    occs.push((u8::try_from(index).unwrap_or(u8::MAX), occ));
                }
            }
        }
    }
    if !occs.is_sorted_by_key(|(i, _)| *i) {
        occs.sort_by_key(|(i, _)| *i);
    }
    Ok(occs)
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
            let (tag, wt) = decode_key(&mut buf).map_err(|e| ProtoError::wire(at, e))?;
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

fn key(out: &mut Vec<u8>, name: &str, first: &mut bool) {
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

/// Writes a message's fields (without braces: inline structs share their parent's object).
fn write_fields(
    msg: &'static Message,
    chunks: &[&[u8]],
    out: &mut Vec<u8>,
    first: &mut bool,
    depth: usize,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep(MAX_DEPTH));
    }
    let occs = scan(msg, chunks)?;
    let mut rest: &[(u8, Occ)] = &occs;
    for (index, field) in msg.fields.iter().enumerate() {
        let n = rest
            .iter()
            .take_while(|(i, _)| usize::from(*i) == index)
            .count();
        let (group, tail) = rest.split_at_checked(n).unwrap_or((&[], &[]));
        rest = tail;
        if field.has(NO_JSON) {
            continue;
        }
        if field.has(INLINE) {
            if group.is_empty() && field.shape == Shape::Pointer {
                continue;
            }
            let Elem::Message(id) = field.elem else {
                continue;
            };
            with_chunks(group, |chunks| {
                write_fields(message(id)?, chunks, out, first, depth + 1)
            })?;
            continue;
        }
        write_field(msg, field, group, out, first, depth)?;
    }
    Ok(())
}

fn write_field(
    msg: &'static Message,
    field: &'static Field,
    occs: Group,
    out: &mut Vec<u8>,
    first: &mut bool,
    depth: usize,
) -> Result<(), ProtoError> {
    let omitempty = field.has(OMITEMPTY);
    match field.shape {
        Shape::Pointer | Shape::Slice | Shape::Map if occs.is_empty() => {
            if !omitempty {
                key(out, field.name, first);
                out.extend_from_slice(b"null");
            }
            Ok(())
        }
        Shape::Pointer => {
            key(out, field.name, first);
            elem(msg, field.elem, occs, out, depth, false)
        }
        Shape::Slice => {
            key(out, field.name, first);
            list(msg, field.elem, occs, out, depth)
        }
        Shape::Map => {
            key(out, field.name, first);
            map(msg, field.elem, occs, out, depth)
        }
        Shape::Value => {
            if omitempty && is_empty(field.elem, occs) {
                return Ok(());
            }
            if field.has(OMITZERO) && matches!(field.elem, Elem::Time | Elem::MicroTime) {
                let t = time(occs, field.elem == Elem::MicroTime, msg.name)?;
                if t.is_none_or(Instant::is_zero) {
                    return Ok(());
                }
            }
            if field.elem == Elem::Bytes && occs.is_empty() {
                key(out, field.name, first);
                out.extend_from_slice(b"null");
                return Ok(());
            }
            key(out, field.name, first);
            elem(msg, field.elem, occs, out, depth, false)
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
fn elem(
    msg: &'static Message,
    elem: Elem,
    occs: Group,
    out: &mut Vec<u8>,
    depth: usize,
    in_map: bool,
) -> Result<(), ProtoError> {
    let last = last(occs);
    match elem {
        Elem::String => gojson::string(out, last.map_or(&[][..], Occ::bytes)),
        Elem::Bytes => match last {
            None if !in_map => out.extend_from_slice(b"null"),
            _ => gojson::bytes(out, last.map_or(&[][..], Occ::bytes)),
        },
        Elem::Bool => out.extend_from_slice(if last.is_some_and(|o| o.varint() != 0) {
            b"true"
        } else {
            b"false"
        }),
        Elem::Int32 => {
            out.extend_from_slice((last.map_or(0, Occ::varint) as i32).to_string().as_bytes())
        }
        Elem::Int64 => {
            out.extend_from_slice((last.map_or(0, Occ::varint) as i64).to_string().as_bytes())
        }
        Elem::Uint32 => {
            out.extend_from_slice((last.map_or(0, Occ::varint) as u32).to_string().as_bytes())
        }
        Elem::Uint64 => out.extend_from_slice(last.map_or(0, Occ::varint).to_string().as_bytes()),
        Elem::Float64 => {
            let bits = match last {
                Some(Occ::Fixed64(b)) => b,
                _ => 0,
            };
            gojson::float(out, f64::from_bits(bits))
                .map_err(|e| ProtoError::unencodable(msg.name, e))?;
        }
        Elem::Message(id) => {
            with_chunks(occs, |chunks| object(message(id)?, chunks, out, depth + 1))?;
        }
        Elem::Time | Elem::MicroTime => {
            let micro = elem == Elem::MicroTime;
            match time(occs, micro, msg.name)? {
                Some(t) if !t.is_zero() => {
                    out.push(b'"');
                    gotime::format(out, t, micro);
                    out.push(b'"');
                }
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
            let mut s: &[u8] = b"0";
            with_chunks(occs, |chunks| {
                inner(
                    chunks,
                    "Quantity",
                    |t| (t == 1).then_some(WireType::LengthDelimited),
                    |_, o| s = o.bytes(),
                )
            })?;
            let s = std::str::from_utf8(s)
                .map_err(|_| ProtoError::protobuf("Quantity", "not a quantity"))?;
            let canonical = quantity::canonical(s)
                .map_err(|e| ProtoError::protobuf("Quantity", format!("{s:?}: {e}")))?;
            out.push(b'"');
            out.extend_from_slice(canonical.as_bytes());
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
                0 => out.extend_from_slice((int as i32).to_string().as_bytes()),
                1 => gojson::string(out, s),
                _ => {
                    return Err(ProtoError::unencodable(
                        "IntOrString",
                        "impossible IntOrString.Type",
                    ));
                }
            }
        }
        Elem::RawExtension | Elem::FieldsV1 | Elem::JsonRaw => {
            let mut raw: Option<&[u8]> = None;
            with_chunks(occs, |chunks| {
                inner(
                    chunks,
                    "raw",
                    |t| (t == 1).then_some(WireType::LengthDelimited),
                    |_, o| raw = Some(o.bytes()),
                )
            })?;
            match raw {
                None => out.extend_from_slice(b"null"),
                // FieldsV1 and apiextensions JSON write an empty raw as null; RawExtension
                // returns it as is, which Go's encoder refuses.
                Some([]) if elem != Elem::RawExtension => out.extend_from_slice(b"null"),
                Some(raw) => gojson::compact(out, raw)
                    .map_err(|e| ProtoError::unencodable(msg.name, format!("raw JSON: {e}")))?,
            }
        }
    }
    Ok(())
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
    let (mut secs, mut nanos) = (0u64, 0u64);
    inner(
        &[data],
        at,
        |t| matches!(t, 1 | 2).then_some(WireType::Varint),
        |t, o| {
            if t == 1 {
                secs = o.varint();
            } else {
                nanos = o.varint();
            }
        },
    )?;
    let nanos = if micro {
        // int32 nanos truncated toward zero to whole microseconds.
        i64::from(nanos as i32 / 1000 * 1000)
    } else {
        0
    };
    Ok(Some(Instant::unix(secs as i64, nanos)))
}

/// Writes a slice: each occurrence one element (packed scalars expanded).
fn list(
    msg: &'static Message,
    elem_ty: Elem,
    occs: Group,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtoError> {
    out.push(b'[');
    let mut first = true;
    let mut item = |out: &mut Vec<u8>, o: Occ| -> Result<(), ProtoError> {
        if !first {
            out.push(b',');
        }
        first = false;
        elem(msg, elem_ty, &[(0, o)], out, depth, false)
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
fn map(
    msg: &'static Message,
    elem_ty: Elem,
    occs: Group,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep(MAX_DEPTH));
    }
    let value_wire = match elem_ty {
        Elem::Bool | Elem::Int32 | Elem::Int64 | Elem::Uint32 | Elem::Uint64 => WireType::Varint,
        Elem::Float64 => WireType::SixtyFourBit,
        _ => WireType::LengthDelimited,
    };
    // Entries as (key, range of their values in `values`): two allocations per map.
    let mut values: Vec<(u8, Occ)> = Vec::with_capacity(occs.len());
    let mut entries: Vec<(&[u8], usize, usize)> = Vec::with_capacity(occs.len());
    for (_, o) in occs {
        let mut k: &[u8] = &[];
        let start = values.len();
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
    entries.reverse();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries.dedup_by(|later, earlier| later.0 == earlier.0);
    out.push(b'{');
    for (i, &(k, start, end)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        gojson::string(out, k);
        out.push(b':');
        let group = values.get(start..end).unwrap_or_default();
        elem(msg, elem_ty, group, out, depth + 1, true)?;
    }
    out.push(b'}');
    Ok(())
}

/// Writes a struct (or one of apiextensions' either-or types) from its merged occurrences.
fn object(
    msg: &'static Message,
    chunks: &[&[u8]],
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep(MAX_DEPTH));
    }
    if msg.form == JsonForm::Struct {
        out.push(b'{');
        let mut first = true;
        write_fields(msg, chunks, out, &mut first, depth)?;
        out.push(b'}');
        return Ok(());
    }
    let occs = scan(msg, chunks)?;
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
                Some(e) if !schema.is_empty() => elem(msg, e, &schema, out, depth, false)?,
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
                (_, Some(e)) if !items.is_empty() => list(msg, e, &items, out, depth + 1)?,
                (Some(e), _) if !schema.is_empty() => elem(msg, e, &schema, out, depth, false)?,
                _ => out.extend_from_slice(b"null"),
            }
        }
        JsonForm::Struct => {}
    }
    Ok(())
}
