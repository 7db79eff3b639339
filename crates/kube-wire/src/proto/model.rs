//! The shape of the generated schema ([`super::schema`]): what a Kubernetes Go type looks like
//! to the transcoder. One [`Message`] per Go struct, one [`Field`] per protobuf-tagged Go field,
//! in Go declaration order (which is also `encoding/json`'s output order).
//!
//! Data only: the types here carry no behaviour beyond small lookups; encoding is
//! [`super::encode`], decoding [`super::decode`]. The generator (`crates/proto-gen`) writes
//! values of these types and must be kept in step with them.

/// Index of a message in [`super::schema::MESSAGES`].
pub type MsgId = u16;

/// A handle on one message of the schema, as returned by [`super::message_for`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageRef(pub(crate) MsgId);

impl MessageRef {
    /// The schema entry.
    pub fn message(self) -> &'static Message {
        // Only the schema and `message_for` make `MessageRef`s, always from a valid index.
        &super::schema::MESSAGES[usize::from(self.0)]
    }

    /// The fully qualified protobuf name, e.g. `k8s.io.api.core.v1.Pod`.
    pub fn name(self) -> &'static str {
        self.message().name
    }
}

/// How a Go field's type holds its element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `T`: always present in Go, so always written to protobuf (gogo writes zero values).
    Value,
    /// `*T`: written only when non-nil; JSON `null` is nil.
    Pointer,
    /// `[]T`: each element is one occurrence of the field (scalars unpacked, as kube's proto2).
    Slice,
    /// `map[string]T`: each entry is one `{1: key, 2: value}` occurrence, keys sorted.
    Map,
}

/// A Go element type: a scalar, a generated struct, or one of the types whose Go code marshals
/// them by hand (handled one by one by the transcoder, never expanded from their Go fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    /// `string` (and named string types): length-delimited.
    String,
    /// `bool`: varint 0/1.
    Bool,
    /// `int32`: varint, sign-extended to 64 bits.
    Int32,
    /// `int64` (and Go `int`): varint.
    Int64,
    /// `uint32`: varint.
    Uint32,
    /// `uint64`: varint.
    Uint64,
    /// `float64`: fixed64 (`double`).
    Float64,
    /// `[]byte`: length-delimited, base64 in JSON, written when non-nil.
    Bytes,
    /// A generated struct.
    Message(MsgId),
    /// `metav1.Time`: `Timestamp{seconds}` (nanos dropped), RFC 3339 seconds in JSON, zero = `null`.
    Time,
    /// `metav1.MicroTime`: `Timestamp{seconds, nanos}` truncated to microseconds.
    MicroTime,
    /// `metav1.Duration`: `{1: int64 nanoseconds}`, Go's `Duration.String()` in JSON.
    Duration,
    /// `resource.Quantity`: `{1: canonical string}`.
    Quantity,
    /// `intstr.IntOrString`: `{1: type, 2: intVal, 3: strVal}`, all three always written.
    IntOrString,
    /// `runtime.RawExtension`: `{1: raw}` written when non-nil; the raw JSON value in JSON.
    RawExtension,
    /// `metav1.FieldsV1`: `{1: raw}` written when non-empty; the raw JSON value in JSON.
    FieldsV1,
    /// apiextensions `JSON`: `{1: raw}` written when non-nil; the raw JSON value in JSON.
    JsonRaw,
}

/// `omitempty` in the field's `json` tag.
pub const OMITEMPTY: u8 = 1;
/// `omitzero` in the field's `json` tag (only on `metav1.Time` fields in kube 1.36).
pub const OMITZERO: u8 = 2;
/// An embedded struct (`json:",inline"`): a nested message in protobuf, flattened in JSON.
pub const INLINE: u8 = 4;
/// `json:"-"`: in protobuf only.
pub const NO_JSON: u8 = 8;

/// One protobuf-tagged Go field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The JSON key (empty for inline and `json:"-"` fields).
    pub name: &'static str,
    /// The protobuf field number.
    pub tag: u32,
    /// Value, pointer, slice or map.
    pub shape: Shape,
    /// The element type (a map's value type; keys are always strings).
    pub elem: Elem,
    /// [`OMITEMPTY`], [`OMITZERO`], [`INLINE`], [`NO_JSON`].
    pub flags: u8,
}

impl Field {
    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// How a message looks in JSON: most are plain structs; apiextensions has three "either-or"
/// types with hand-written JSON marshalling; a few named slice types are wrapped in a message
/// for protobuf only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonForm {
    /// A Go struct marshalled by `encoding/json`.
    Struct,
    /// `JSONSchemaPropsOrBool{Allows: 1, Schema: 2}`: a schema object or `true`/`false`.
    OrBool,
    /// `JSONSchemaPropsOrArray{Schema: 1, JSONSchemas: 2}`: a schema object or an array of them.
    OrArray,
    /// `JSONSchemaPropsOrStringArray{Schema: 1, Property: 2}`: a schema object or a string array.
    OrStringArray,
    /// A named slice type marked `+protobuf.nullable=true` (certificates' `ExtraValue
    /// []string`): in protobuf a message whose field 1 (`items`) holds the elements, in JSON the
    /// bare array; `null` when it has none (gogo decodes no items to a nil slice).
    Items,
}

/// One JSON key a message accepts: the path of field indices that leads to it, through inline
/// (embedded) fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonKey {
    /// The key.
    pub name: &'static str,
    /// Field indices: `[i]` for a field of the message itself, `[i, j]` for field `j` of the
    /// inline field `i`, and so on.
    pub path: &'static [u8],
}

/// One Go struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// Fully qualified protobuf name, e.g. `k8s.io.api.core.v1.Pod`.
    pub name: &'static str,
    /// JSON form.
    pub form: JsonForm,
    /// Fields in Go declaration order.
    pub fields: &'static [Field],
    /// Indices into `fields`, in ascending tag order (protobuf output order).
    pub by_tag: &'static [u8],
    /// Every JSON key the message accepts (its own and its inline fields'), sorted by name.
    pub keys: &'static [JsonKey],
}

impl Message {
    /// The field with protobuf number `tag`.
    pub fn field_by_tag(&self, tag: u32) -> Option<(usize, &'static Field)> {
        let fields = self.fields;
        let pos = self
            .by_tag
            .binary_search_by(|&i| fields.get(usize::from(i)).map_or(0, |f| f.tag).cmp(&tag))
            .ok()?;
        let index = usize::from(*self.by_tag.get(pos)?);
        Some((index, fields.get(index)?))
    }

    /// The path of the field a JSON key names.
    pub fn key(&self, name: &str) -> Option<&'static [u8]> {
        let keys = self.keys;
        let pos = keys.binary_search_by(|k| k.name.cmp(name)).ok()?;
        keys.get(pos).map(|k| k.path)
    }
}

/// A root kind: `(apiVersion, kind)` and its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Root {
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: &'static str,
    /// `kind`, e.g. `Deployment`.
    pub kind: &'static str,
    /// The message.
    pub message: MsgId,
}
