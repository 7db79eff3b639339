//! JSON → protobuf: the bytes gogo's marshaller writes for the Go value `encoding/json` decodes
//! from a JSON document of a given kind.
//!
//! One pass over the JSON (serde_json, guided by the schema, borrowing strings and raw values
//! from the input) builds a small tree of the fields present; a second pass writes it in tag
//! order into one growing buffer, adding the zero values Go always writes for value fields and
//! patching each nested message's length in place. JSON keys the kind does not have are skipped,
//! as Go's decoder does; a value of the wrong type is an error naming its JSON path.
//!
//! Key matching is case-sensitive, as kube's decoder (`sigs.k8s.io/json`) is. A key given twice:
//! the later value wins, objects and maps merge into the earlier one (as Go decodes into the
//! existing struct or map); a later `null` resets the field.
//!
//! Nothing here decodes protobuf ([`super::decode`]) or builds envelopes ([`super::envelope`]).

use std::borrow::Cow;
use std::fmt;

use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::error::ProtoError;
use super::gotime::{self, Instant};
use super::model::{Elem, Field, INLINE, JsonForm, Message, MessageRef, NO_JSON, Shape};
use super::{gojson, quantity, schema};

/// A decoded JSON value, already in the form the protobuf writer needs.
#[derive(Debug)]
enum Val<'a> {
    /// JSON `null`: the zero value of a value field, nil for the others.
    Null,
    Varint(u64),
    Fixed64(u64),
    Str(Cow<'a, str>),
    Bytes(Vec<u8>),
    Msg(Obj<'a>),
    List(Vec<Val<'a>>),
    Map(Vec<(Cow<'a, str>, Val<'a>)>),
    Time(Instant),
    Duration(i64),
    Quantity(Cow<'a, str>),
    IntOrString {
        string: bool,
        int: i32,
        str: Cow<'a, str>,
    },
    Raw(&'a [u8]),
}

/// The fields of one message present in the JSON: (field index, value), one entry per field.
type Obj<'a> = Vec<(u8, Val<'a>)>;

/// Encodes a JSON document of `msg`'s kind as the protobuf message body (no envelope).
pub fn json_to_proto(msg: MessageRef, json: &[u8]) -> Result<Vec<u8>, ProtoError> {
    let message = msg.message();
    let mut ctx = Ctx::default();
    let mut de = serde_json::Deserializer::from_slice(json);
    let parsed = MsgSeed {
        ctx: &mut ctx,
        msg: message,
        obj: Vec::new(),
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    let val = match parsed {
        Ok(v) => v,
        Err(e) => {
            return Err(match ctx.error.take() {
                Some((path, message)) => ProtoError::Json { path, message },
                None => ProtoError::Syntax(e),
            });
        }
    };
    let obj = match val {
        Val::Msg(obj) => obj,
        _ => Vec::new(),
    };
    let mut out = Vec::with_capacity(json.len() / 2 + 16);
    write_fields(message, obj, &mut out);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Reading JSON.

/// The JSON path being read (for error messages) and the first error.
#[derive(Default)]
struct Ctx<'de> {
    path: Vec<Seg<'de>>,
    error: Option<(String, String)>,
}

enum Seg<'de> {
    Field(&'static str),
    Key(Cow<'de, str>),
    Index(usize),
}

impl Ctx<'_> {
    /// Records the first error with the current path and returns it as a serde error.
    fn fail<E: de::Error>(&mut self, message: String) -> E {
        if self.error.is_none() {
            let mut path = String::new();
            for seg in &self.path {
                match seg {
                    Seg::Field(f) => {
                        if !path.is_empty() {
                            path.push('.');
                        }
                        path.push_str(f);
                    }
                    Seg::Key(k) => {
                        path.push('[');
                        path.push_str(&gojson_quote(k));
                        path.push(']');
                    }
                    Seg::Index(i) => {
                        path.push('[');
                        path.push_str(&i.to_string());
                        path.push(']');
                    }
                }
            }
            if path.is_empty() {
                path.push('.');
            }
            self.error = Some((path, message.clone()));
        }
        E::custom(message)
    }
}

fn gojson_quote(s: &str) -> String {
    let mut out = Vec::new();
    gojson::string(&mut out, s.as_bytes());
    String::from_utf8(out).unwrap_or_default()
}

fn elem_name(elem: Elem) -> &'static str {
    match elem {
        Elem::String => "string",
        Elem::Bool => "bool",
        Elem::Int32 => "int32",
        Elem::Int64 => "int64",
        Elem::Uint32 => "uint32",
        Elem::Uint64 => "uint64",
        Elem::Float64 => "float64",
        Elem::Bytes => "[]byte",
        Elem::Message(id) => schema::MESSAGES
            .get(usize::from(id))
            .map_or("struct", |m| m.name.rsplit('.').next().unwrap_or(m.name)),
        Elem::Time => "metav1.Time",
        Elem::MicroTime => "metav1.MicroTime",
        Elem::Duration => "metav1.Duration",
        Elem::Quantity => "resource.Quantity",
        Elem::IntOrString => "intstr.IntOrString",
        Elem::RawExtension => "runtime.RawExtension",
        Elem::FieldsV1 => "metav1.FieldsV1",
        Elem::JsonRaw => "apiextensions.JSON",
    }
}

fn mismatch(found: &str, want: &str) -> String {
    format!("cannot unmarshal {found} into Go value of type {want}")
}

fn message(id: u16) -> Option<&'static Message> {
    schema::MESSAGES.get(usize::from(id))
}

/// A string key or value, borrowed from the input when it has no escapes.
struct StrSeed;

impl<'de> DeserializeSeed<'de> for StrSeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for StrSeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// A struct (or one of apiextensions' either-or types); `obj` holds what an earlier occurrence
/// of the same key decoded, which this one merges into.
struct MsgSeed<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    msg: &'static Message,
    obj: Obj<'a>,
}

impl<'de> DeserializeSeed<'de> for MsgSeed<'_, 'de> {
    type Value = Val<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// Where a field lives in an [`Obj`]: the entry for `index`, created on first use.
fn slot<'o, 'a>(obj: &'o mut Obj<'a>, index: u8) -> Option<&'o mut Val<'a>> {
    let pos = match obj.iter().position(|(i, _)| *i == index) {
        Some(p) => p,
        None => {
            obj.push((index, Val::Null));
            obj.len() - 1
        }
    };
    obj.get_mut(pos).map(|(_, v)| v)
}

impl<'de> Visitor<'de> for MsgSeed<'_, 'de> {
    type Value = Val<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Val::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let MsgSeed { ctx, msg, mut obj } = self;
        // JSON written by Go has its keys in field order: look a few fields ahead of the last
        // match before searching the key table.
        let mut cursor = 0usize;
        while let Some(key) = map.next_key_seed(StrSeed)? {
            let ahead = msg
                .fields
                .get(cursor..)
                .unwrap_or_default()
                .iter()
                .take(6)
                .position(|f| f.name == key && f.flags & (INLINE | NO_JSON) == 0);
            let direct;
            let path = match ahead {
                Some(n) => {
                    cursor += n + 1;
                    direct = [u8::try_from(cursor - 1).unwrap_or(u8::MAX)];
                    &direct[..]
                }
                None => match msg.key(&key) {
                    Some(path) => path,
                    None => {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                },
            };
            let Some((&last, inline)) = path.split_last() else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            // Walk down the inline (embedded) structs: present once any of their keys is.
            let mut target = &mut obj;
            let mut m = msg;
            for &i in inline {
                let (Some(field), Some(slot)) = (m.fields.get(usize::from(i)), slot(target, i))
                else {
                    return Err(ctx.fail("schema inconsistency".into()));
                };
                let Elem::Message(child) = field.elem else {
                    return Err(ctx.fail("schema inconsistency".into()));
                };
                if !matches!(slot, Val::Msg(_)) {
                    *slot = Val::Msg(Vec::new());
                }
                let Val::Msg(inner) = slot else {
                    return Err(ctx.fail("schema inconsistency".into()));
                };
                target = inner;
                m = message(child).ok_or_else(|| ctx.fail("schema inconsistency".into()))?;
            }
            let Some(field) = m.fields.get(usize::from(last)) else {
                return Err(ctx.fail("schema inconsistency".into()));
            };
            let prior = target
                .iter()
                .position(|(i, _)| *i == last)
                .map(|p| target.swap_remove(p).1);
            ctx.path.push(Seg::Field(field.name));
            let value = map.next_value_seed(FieldSeed {
                ctx: &mut *ctx,
                field,
                prior,
            })?;
            ctx.path.pop();
            if !matches!(value, Val::Null) {
                target.push((last, value));
            }
        }
        Ok(Val::Msg(obj))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("bool", elem_name_msg(self.msg))))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", elem_name_msg(self.msg))))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", elem_name_msg(self.msg))))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", elem_name_msg(self.msg))))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("string", elem_name_msg(self.msg))))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.ctx.fail(mismatch("array", elem_name_msg(self.msg))))
    }
}

fn elem_name_msg(m: &'static Message) -> &'static str {
    m.name.rsplit('.').next().unwrap_or(m.name)
}

/// One field's value: a list, a map, or one element.
struct FieldSeed<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    field: &'static Field,
    /// What an earlier occurrence of the key decoded (objects and maps merge into it).
    prior: Option<Val<'a>>,
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_, 'de> {
    type Value = Val<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let FieldSeed { ctx, field, prior } = self;
        match field.shape {
            Shape::Slice => d.deserialize_any(ListVisitor {
                ctx,
                elem: field.elem,
            }),
            Shape::Map => {
                let entries = match prior {
                    Some(Val::Map(entries)) => entries,
                    _ => Vec::new(),
                };
                d.deserialize_any(MapVisitor {
                    ctx,
                    elem: field.elem,
                    entries,
                })
            }
            Shape::Value | Shape::Pointer => {
                let value = ElemSeed {
                    ctx,
                    elem: field.elem,
                    prior,
                }
                .deserialize(d)?;
                Ok(value)
            }
        }
    }
}

/// One element of a field, list or map.
struct ElemSeed<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    elem: Elem,
    prior: Option<Val<'a>>,
}

impl<'de> DeserializeSeed<'de> for ElemSeed<'_, 'de> {
    type Value = Val<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let ElemSeed { ctx, elem, prior } = self;
        match elem {
            Elem::Quantity | Elem::RawExtension | Elem::FieldsV1 | Elem::JsonRaw => {
                let raw: &'de RawValue = serde::Deserialize::deserialize(d)?;
                raw_elem(ctx, elem, raw.get())
            }
            Elem::Message(id) => {
                let msg = message(id).ok_or_else(|| ctx.fail("schema inconsistency".into()))?;
                let obj = match prior {
                    Some(Val::Msg(obj)) => obj,
                    _ => Vec::new(),
                };
                match msg.form {
                    JsonForm::Struct => d.deserialize_any(MsgSeed { ctx, msg, obj }),
                    JsonForm::Items => d.deserialize_any(ItemsVisitor { ctx, msg }),
                    form => d.deserialize_any(FormVisitor { ctx, msg, form }),
                }
            }
            _ => d.deserialize_any(ScalarVisitor { ctx, elem }),
        }
    }
}

/// The types whose Go `UnmarshalJSON` looks at the raw bytes.
fn raw_elem<'de, E: de::Error>(
    ctx: &mut Ctx<'de>,
    elem: Elem,
    raw: &'de str,
) -> Result<Val<'de>, E> {
    if raw == "null" {
        return Ok(Val::Null);
    }
    match elem {
        Elem::Quantity => {
            // Go strips one pair of quotes without unescaping, then trims spaces.
            let inner = raw
                .strip_prefix('"')
                .and_then(|r| r.strip_suffix('"'))
                .unwrap_or(raw)
                .trim();
            match quantity::canonical(inner) {
                Ok(Cow::Borrowed(s)) => Ok(Val::Quantity(Cow::Borrowed(s))),
                Ok(Cow::Owned(s)) => Ok(Val::Quantity(Cow::Owned(s))),
                Err(e) => Err(ctx.fail(format!("quantity {inner:?}: {e}"))),
            }
        }
        _ => Ok(Val::Raw(raw.as_bytes())),
    }
}

/// Scalars and the hand-marshalled types that read a JSON scalar.
struct ScalarVisitor<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    elem: Elem,
}

impl ScalarVisitor<'_, '_> {
    fn int<E: de::Error>(self, v: i128) -> Result<Val<'static>, E> {
        let range = |lo: i128, hi: i128| (lo..=hi).contains(&v);
        let ok = match self.elem {
            Elem::Int32 | Elem::IntOrString => range(i128::from(i32::MIN), i128::from(i32::MAX)),
            Elem::Int64 => range(i128::from(i64::MIN), i128::from(i64::MAX)),
            Elem::Uint32 => range(0, i128::from(u32::MAX)),
            Elem::Uint64 => range(0, i128::from(u64::MAX)),
            Elem::Float64 => return Ok(Val::Fixed64((v as f64).to_bits())),
            other => return Err(self.ctx.fail(mismatch("number", elem_name(other)))),
        };
        if !ok {
            return Err(self
                .ctx
                .fail(mismatch(&format!("number {v}"), elem_name(self.elem))));
        }
        Ok(match self.elem {
            Elem::IntOrString => Val::IntOrString {
                string: false,
                int: i32::try_from(v).unwrap_or(0),
                str: Cow::Borrowed(""),
            },
            // Negative values are sign-extended to 64 bits, as Go's `uint64(int32)`.
            Elem::Uint64 => Val::Varint(u64::try_from(v).unwrap_or(0)),
            _ => Val::Varint(i64::try_from(v).unwrap_or(0) as u64),
        })
    }

    fn string<'de, E: de::Error>(self, s: Cow<'de, str>) -> Result<Val<'de>, E> {
        match self.elem {
            Elem::String => Ok(Val::Str(s)),
            Elem::Bytes => gojson::unbase64(&s)
                .map(Val::Bytes)
                .map_err(|e| self.ctx.fail(e)),
            Elem::Time | Elem::MicroTime => gotime::parse(&s, self.elem == Elem::MicroTime)
                .map(Val::Time)
                .map_err(|e| self.ctx.fail(e)),
            Elem::Duration => gotime::parse_duration(&s)
                .map(Val::Duration)
                .map_err(|e| self.ctx.fail(e)),
            Elem::IntOrString => Ok(Val::IntOrString {
                string: true,
                int: 0,
                str: s,
            }),
            other => Err(self.ctx.fail(mismatch("string", elem_name(other)))),
        }
    }
}

impl<'de> Visitor<'de> for ScalarVisitor<'_, 'de> {
    type Value = Val<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(elem_name(self.elem))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Val::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        match self.elem {
            Elem::Bool => Ok(Val::Varint(u64::from(v))),
            other => Err(self.ctx.fail(mismatch("bool", elem_name(other)))),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.int(i128::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.int(i128::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        match self.elem {
            Elem::Float64 => Ok(Val::Fixed64(v.to_bits())),
            // serde_json reads `-0` as a float; Go takes it as the integer 0.
            Elem::Int32 | Elem::Int64 | Elem::Uint32 | Elem::Uint64 | Elem::IntOrString
                if v == 0.0 =>
            {
                self.int(0)
            }
            other => Err(self
                .ctx
                .fail(mismatch(&format!("number {v}"), elem_name(other)))),
        }
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        self.string(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.string(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.string(Cow::Owned(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.ctx.fail(mismatch("object", elem_name(self.elem))))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.ctx.fail(mismatch("array", elem_name(self.elem))))
    }
}

/// A JSON array into a Go slice.
struct ListVisitor<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    elem: Elem,
}

impl<'de> Visitor<'de> for ListVisitor<'_, 'de> {
    type Value = Val<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Val::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        loop {
            self.ctx.path.push(Seg::Index(items.len()));
            let item = seq.next_element_seed(ElemSeed {
                ctx: &mut *self.ctx,
                elem: self.elem,
                prior: None,
            })?;
            self.ctx.path.pop();
            match item {
                Some(v) => items.push(v),
                None => break,
            }
        }
        Ok(Val::List(items))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("bool", "slice")))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", "slice")))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", "slice")))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", "slice")))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("string", "slice")))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.ctx.fail(mismatch("object", "slice")))
    }
}

/// A JSON object into a Go `map[string]T`.
struct MapVisitor<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    elem: Elem,
    entries: Vec<(Cow<'a, str>, Val<'a>)>,
}

impl<'de> Visitor<'de> for MapVisitor<'_, 'de> {
    type Value = Val<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Val::Null)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let MapVisitor {
            ctx,
            elem,
            mut entries,
        } = self;
        while let Some(key) = map.next_key_seed(StrSeed)? {
            ctx.path.push(Seg::Key(key.clone()));
            let value = map.next_value_seed(ElemSeed {
                ctx: &mut *ctx,
                elem,
                prior: None,
            })?;
            ctx.path.pop();
            entries.push((key, value));
        }
        Ok(Val::Map(entries))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("bool", "map")))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", "map")))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", "map")))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("number", "map")))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(self.ctx.fail(mismatch("string", "map")))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.ctx.fail(mismatch("array", "map")))
    }
}

/// apiextensions' either-or types, as their Go `UnmarshalJSON` reads them.
struct FormVisitor<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    msg: &'static Message,
    form: JsonForm,
}

impl FormVisitor<'_, '_> {
    /// The field index and element of protobuf field `tag`.
    fn field(&mut self, tag: u32) -> Option<(u8, Elem)> {
        let (i, f) = self.msg.field_by_tag(tag)?;
        Some((u8::try_from(i).ok()?, f.elem))
    }

    fn schema_msg(&mut self, tag: u32) -> Option<(u8, &'static Message)> {
        let (i, elem) = self.field(tag)?;
        match elem {
            Elem::Message(id) => Some((i, message(id)?)),
            _ => None,
        }
    }

    /// Anything but an object or an array: `OrBool` refuses it, the others ignore it.
    fn other<E: de::Error>(self, found: &str) -> Result<Val<'static>, E> {
        match self.form {
            JsonForm::OrBool => Err(self
                .ctx
                .fail(format!("boolean or JSON schema expected, found {found}"))),
            _ => Ok(Val::Msg(Vec::new())),
        }
    }
}

impl<'de> Visitor<'de> for FormVisitor<'_, 'de> {
    type Value = Val<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON schema")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Val::Null)
    }
    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<Self::Value, E> {
        match self.form {
            JsonForm::OrBool => match self.field(1) {
                Some((allows, _)) => Ok(Val::Msg(vec![(allows, Val::Varint(u64::from(v)))])),
                None => Err(self.ctx.fail("schema inconsistency".into())),
            },
            _ => self.other("bool"),
        }
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        self.other("number")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        self.other("number")
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        self.other("number")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        self.other("string")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, map: A) -> Result<Self::Value, A::Error> {
        // Every form reads an object as its `Schema` (OrBool also sets `Allows`).
        let schema_tag = if self.form == JsonForm::OrBool { 2 } else { 1 };
        let Some((schema_index, schema_msg)) = self.schema_msg(schema_tag) else {
            return Err(self.ctx.fail("schema inconsistency".into()));
        };
        let allows = if self.form == JsonForm::OrBool {
            self.field(1).map(|(i, _)| i)
        } else {
            None
        };
        let schema = MsgSeed {
            ctx: &mut *self.ctx,
            msg: schema_msg,
            obj: Vec::new(),
        }
        .visit_map(map)?;
        let mut obj = vec![(schema_index, schema)];
        if let Some(a) = allows {
            obj.push((a, Val::Varint(1)));
        }
        Ok(Val::Msg(obj))
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, seq: A) -> Result<Self::Value, A::Error> {
        match self.form {
            JsonForm::OrBool => {
                // Consume nothing more: the error ends decoding.
                drop(seq);
                self.other("array")
            }
            _ => {
                let Some((index, elem)) = self.field(2) else {
                    return Err(self.ctx.fail("schema inconsistency".into()));
                };
                let list = ListVisitor {
                    ctx: &mut *self.ctx,
                    elem,
                }
                .visit_seq(seq)?;
                Ok(Val::Msg(vec![(index, list)]))
            }
        }
    }
}

/// A nullable slice ([`JsonForm::Items`]): a JSON array (or `null`) into the message whose field
/// 1 holds the elements.
struct ItemsVisitor<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    msg: &'static Message,
}

impl ItemsVisitor<'_, '_> {
    fn other<E: de::Error>(self, found: &str) -> Result<Val<'static>, E> {
        let name = elem_name_msg(self.msg);
        Err(self.ctx.fail(mismatch(found, name)))
    }
}

impl<'de> Visitor<'de> for ItemsVisitor<'_, 'de> {
    type Value = Val<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Val::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let Some((index, field)) = self.msg.field_by_tag(1) else {
            return Err(self.ctx.fail("schema inconsistency".into()));
        };
        let index =
            u8::try_from(index).map_err(|_| self.ctx.fail("schema inconsistency".into()))?;
        let list = ListVisitor {
            ctx: &mut *self.ctx,
            elem: field.elem,
        }
        .visit_seq(seq)?;
        Ok(Val::Msg(vec![(index, list)]))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        self.other("bool")
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        self.other("number")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        self.other("number")
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        self.other("number")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        self.other("string")
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        self.other("object")
    }
}

// ---------------------------------------------------------------------------------------------
// Writing protobuf.

/// Writes a message's fields in tag order; value fields absent from the JSON get Go's zero
/// value, as gogo writes every non-pointer field.
fn write_fields(msg: &'static Message, mut obj: Obj<'_>, out: &mut Vec<u8>) {
    let tag_of = |i: u8| msg.fields.get(usize::from(i)).map_or(0, |f| f.tag);
    obj.sort_by_key(|(i, _)| tag_of(*i));
    let mut entries = obj.into_iter().peekable();
    for &index in msg.by_tag {
        let Some(field) = msg.fields.get(usize::from(index)) else {
            continue;
        };
        let value = match entries.peek() {
            Some((i, _)) if *i == index => entries.next().map(|(_, v)| v),
            _ => None,
        };
        write_field(field, value, out);
    }
}

fn write_field(field: &'static Field, value: Option<Val<'_>>, out: &mut Vec<u8>) {
    let tag = field.tag;
    match (field.shape, value) {
        (Shape::Value, None | Some(Val::Null)) => write_zero(tag, field.elem, out),
        (Shape::Pointer, None | Some(Val::Null)) => {}
        (Shape::Value | Shape::Pointer, Some(v)) => write_elem(tag, field.elem, v, out),
        (Shape::Slice, Some(Val::List(items))) => {
            for item in items {
                write_elem(tag, field.elem, item, out);
            }
        }
        (Shape::Map, Some(Val::Map(mut entries))) => {
            // Go's map keeps the last value of a key; gogo writes keys sorted.
            entries.reverse();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, earlier| later.0 == earlier.0);
            for (key, value) in entries {
                encode_key(tag, WireType::LengthDelimited, out);
                nested(out, |out| {
                    write_str(1, key.as_bytes(), out);
                    match (field.elem, value) {
                        // A nil []byte value: the entry has no value field.
                        (Elem::Bytes, Val::Null) => {}
                        (elem, value) => write_elem(2, elem, value, out),
                    }
                });
            }
        }
        _ => {}
    }
}

fn write_str(tag: u32, s: &[u8], out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(s.len() as u64, out);
    out.extend_from_slice(s);
}

fn write_varint(tag: u32, v: u64, out: &mut Vec<u8>) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(v, out);
}

/// Writes a length-delimited body produced by `body`, patching the length in place: one byte is
/// reserved, and the body moved only when its length needs more.
fn nested(out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.push(0);
    body(out);
    let len = out.len() - start - 1;
    if len < 0x80 {
        if let Some(b) = out.get_mut(start) {
            *b = len as u8;
        }
        return;
    }
    let n = encoded_len_varint(len as u64);
    out.resize(out.len() + n - 1, 0);
    out.copy_within(start + 1..start + 1 + len, start + n);
    if let Some(mut dst) = out.get_mut(start..start + n) {
        encode_varint(len as u64, &mut dst);
    }
}

fn write_elem(tag: u32, elem: Elem, value: Val<'_>, out: &mut Vec<u8>) {
    match (elem, value) {
        (_, Val::Null) => write_zero(tag, elem, out),
        (Elem::String, Val::Str(s)) => write_str(tag, s.as_bytes(), out),
        (Elem::Bytes, Val::Bytes(b)) => write_str(tag, &b, out),
        (Elem::Float64, Val::Fixed64(bits)) => {
            encode_key(tag, WireType::SixtyFourBit, out);
            out.extend_from_slice(&bits.to_le_bytes());
        }
        (_, Val::Varint(v)) => write_varint(tag, v, out),
        (Elem::Message(id), Val::Msg(obj)) => {
            if let Some(msg) = message(id) {
                encode_key(tag, WireType::LengthDelimited, out);
                nested(out, |out| write_fields(msg, obj, out));
            }
        }
        (Elem::Time | Elem::MicroTime, Val::Time(t)) => {
            encode_key(tag, WireType::LengthDelimited, out);
            nested(out, |out| {
                if !t.is_zero() {
                    write_varint(1, t.secs as u64, out);
                    // Time keeps whole seconds; MicroTime microseconds.
                    let nanos = if elem == Elem::MicroTime {
                        t.nanos / 1000 * 1000
                    } else {
                        0
                    };
                    write_varint(2, u64::from(nanos), out);
                }
            });
        }
        (Elem::Duration, Val::Duration(d)) => {
            encode_key(tag, WireType::LengthDelimited, out);
            nested(out, |out| write_varint(1, d as u64, out));
        }
        (Elem::Quantity, Val::Quantity(s)) => {
            encode_key(tag, WireType::LengthDelimited, out);
            nested(out, |out| write_str(1, s.as_bytes(), out));
        }
        (Elem::IntOrString, Val::IntOrString { string, int, str }) => {
            encode_key(tag, WireType::LengthDelimited, out);
            nested(out, |out| {
                write_varint(1, u64::from(string), out);
                write_varint(2, i64::from(int) as u64, out);
                write_str(3, str.as_bytes(), out);
            });
        }
        (Elem::RawExtension | Elem::FieldsV1 | Elem::JsonRaw, Val::Raw(raw)) => {
            encode_key(tag, WireType::LengthDelimited, out);
            nested(out, |out| write_str(1, raw, out));
        }
        // The readers only produce matching pairs; anything else is written as the zero value.
        _ => write_zero(tag, elem, out),
    }
}

/// Go's zero value of an element, as gogo writes it for a non-pointer field.
fn write_zero(tag: u32, elem: Elem, out: &mut Vec<u8>) {
    match elem {
        Elem::String => write_str(tag, b"", out),
        Elem::Bool | Elem::Int32 | Elem::Int64 | Elem::Uint32 | Elem::Uint64 => {
            write_varint(tag, 0, out)
        }
        Elem::Float64 => {
            encode_key(tag, WireType::SixtyFourBit, out);
            out.extend_from_slice(&[0; 8]);
        }
        // A nil []byte is not written.
        Elem::Bytes => {}
        Elem::Message(id) => {
            if let Some(msg) = message(id) {
                encode_key(tag, WireType::LengthDelimited, out);
                nested(out, |out| write_fields(msg, Vec::new(), out));
            }
        }
        // Zero times and nil raw bytes marshal to nothing.
        Elem::Time | Elem::MicroTime | Elem::RawExtension | Elem::FieldsV1 | Elem::JsonRaw => {
            write_str(tag, b"", out)
        }
        Elem::Duration => {
            encode_key(tag, WireType::LengthDelimited, out);
            nested(out, |out| write_varint(1, 0, out));
        }
        Elem::Quantity => {
            encode_key(tag, WireType::LengthDelimited, out);
            nested(out, |out| write_str(1, b"0", out));
        }
        Elem::IntOrString => {
            encode_key(tag, WireType::LengthDelimited, out);
            nested(out, |out| {
                write_varint(1, 0, out);
                write_varint(2, 0, out);
                write_str(3, b"", out);
            });
        }
    }
}
