//! The one reader of protobuf fields on the wire: a message's fields, one at a time, as
//! (tag, [`Value`]) without allocating, every length checked, groups refused (kube's messages
//! have none, and gogo refuses them). The transcoder ([`super::decode`]), the field paths
//! ([`super::fields`]), the envelope ([`super::envelope`]) and watchmux's record and reflector
//! read messages through it, so that a malformed message is refused the same way everywhere.
//!
//! Owns only the wire format (keys, varints, lengths), and [`put_bytes`], the writer of a
//! length-delimited field; what a tag means is its callers'.

use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};

use super::error::ProtoError;

/// One occurrence of a field on the wire: its value, by wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// A varint (ints, bools, enums).
    Varint(u64),
    /// A 64-bit fixed value (doubles).
    Fixed64(u64),
    /// A 32-bit value (no kube field has one; read only to be skipped safely).
    Fixed32,
    /// A length-delimited value (strings, bytes, messages, packed lists, map entries).
    Bytes(&'a [u8]),
}

/// [`Value`] under the transcoder's name for it.
pub(crate) type Occ<'a> = Value<'a>;

impl<'a> Value<'a> {
    /// The bytes of a length-delimited value; empty for the others.
    pub fn bytes(self) -> &'a [u8] {
        match self {
            Occ::Bytes(b) => b,
            _ => &[],
        }
    }
    /// A varint's value; 0 for the others.
    pub fn varint(self) -> u64 {
        match self {
            Occ::Varint(v) => v,
            _ => 0,
        }
    }
}

/// prost's `decode_varint`, with the one- and two-byte varints (tags, lengths and most values)
/// read inline.
#[inline(always)]
pub(crate) fn varint(buf: &mut &[u8]) -> Result<u64, prost::DecodeError> {
    match **buf {
        [b, ref rest @ ..] if b < 0x80 => {
            *buf = rest;
            Ok(u64::from(b))
        }
        [b0, b1, ref rest @ ..] if b1 < 0x80 => {
            *buf = rest;
            Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7)
        }
        _ => decode_varint(buf),
    }
}

/// prost's `decode_key` (the same keys, the same errors), one-byte keys read inline.
#[inline(always)]
pub(crate) fn field_key(buf: &mut &[u8]) -> Result<(u32, WireType), prost::DecodeError> {
    if let [b, ref rest @ ..] = **buf
        && (8..0x80).contains(&b)
        && let Ok(wt) = WireType::try_from(u64::from(b & 7))
    {
        *buf = rest;
        return Ok((u32::from(b >> 3), wt));
    }
    decode_key(buf)
}

/// Reads one value of wire type `wt`.
#[inline]
pub(crate) fn read<'a>(wt: WireType, buf: &mut &'a [u8], at: &str) -> Result<Occ<'a>, ProtoError> {
    #[cold]
    fn eof(at: &str) -> ProtoError {
        ProtoError::protobuf(at, "unexpected EOF")
    }
    let short = || eof(at);
    Ok(match wt {
        WireType::Varint => Occ::Varint(varint(buf).map_err(|e| ProtoError::wire(at, e))?),
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
            let len = varint(buf).map_err(|e| ProtoError::wire(at, e))?;
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

/// The fields of an encoded message in wire order ([`fields`]); after an error, none.
#[derive(Debug, Clone)]
pub struct Fields<'a, 'p> {
    buf: &'a [u8],
    at: &'p str,
}

/// The fields of the encoded message `buf` in wire order; `at` names the message in errors.
pub fn fields<'a, 'p>(buf: &'a [u8], at: &'p str) -> Fields<'a, 'p> {
    Fields { buf, at }
}

impl<'a> Fields<'a, '_> {
    /// The length-delimited fields only (tag, bytes): strings, bytes, messages, map entries;
    /// the others are read and passed over.
    pub fn bytes(self) -> impl Iterator<Item = Result<(u32, &'a [u8]), ProtoError>> {
        self.filter_map(|f| match f {
            Ok((tag, Value::Bytes(b))) => Some(Ok((tag, b))),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
    }

    /// Each field with its whole encoding (key, length and value) as the third member: what a
    /// writer that copies some fields unchanged and rewrites others needs.
    pub fn with_encoding(
        mut self,
    ) -> impl Iterator<Item = Result<(u32, Value<'a>, &'a [u8]), ProtoError>> {
        std::iter::from_fn(move || {
            let start = self.buf;
            let field = self.next()?;
            let encoding = &start[..start.len() - self.buf.len()];
            Some(field.map(|(tag, v)| (tag, v, encoding)))
        })
    }

    /// The value of the last occurrence of field `tag` (proto's rule for a scalar), reading
    /// every field (so malformed bytes anywhere are an error).
    pub fn last(self, tag: u32) -> Result<Option<Value<'a>>, ProtoError> {
        let mut found = None;
        for f in self {
            let (t, v) = f?;
            if t == tag {
                found = Some(v);
            }
        }
        Ok(found)
    }
}

impl<'a> Iterator for Fields<'a, '_> {
    type Item = Result<(u32, Value<'a>), ProtoError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let mut buf = self.buf;
        let read = field_key(&mut buf)
            .map_err(|e| ProtoError::wire(self.at, e))
            .and_then(|(tag, wt)| Ok((tag, read(wt, &mut buf, self.at)?)));
        // After an error nothing more is read.
        self.buf = if read.is_ok() { buf } else { &[] };
        Some(read)
    }
}

impl std::iter::FusedIterator for Fields<'_, '_> {}

/// Appends the length-delimited field `tag` holding `b` (its key, length and bytes).
pub fn put_bytes(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::encoding::{encode_key, encode_varint};

    #[test]
    fn reads_each_wire_type_and_refuses_what_is_malformed() {
        let mut m = Vec::new();
        encode_key(1, WireType::LengthDelimited, &mut m);
        encode_varint(2, &mut m);
        m.extend_from_slice(b"hi");
        encode_key(2, WireType::Varint, &mut m);
        encode_varint(300, &mut m);
        encode_key(3, WireType::SixtyFourBit, &mut m);
        m.extend_from_slice(&7u64.to_le_bytes());
        encode_key(4, WireType::ThirtyTwoBit, &mut m);
        m.extend_from_slice(&[0; 4]);
        encode_key(2, WireType::Varint, &mut m);
        encode_varint(5, &mut m);
        let got: Vec<_> = fields(&m, "m").collect::<Result<_, _>>().unwrap();
        assert_eq!(
            got,
            [
                (1, Value::Bytes(b"hi")),
                (2, Value::Varint(300)),
                (3, Value::Fixed64(7)),
                (4, Value::Fixed32),
                (2, Value::Varint(5)),
            ]
        );
        assert_eq!(fields(&m, "m").last(2).unwrap(), Some(Value::Varint(5)));
        assert_eq!(fields(&m, "m").last(9).unwrap(), None);
        // A length past the end: one error, then nothing.
        let mut it = fields(&m[..3], "m");
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
        // A group.
        let mut g = Vec::new();
        encode_key(5, WireType::StartGroup, &mut g);
        assert!(fields(&g, "m").next().unwrap().is_err());
        // The length-delimited ones, and each field's encoding.
        let bytes: Vec<_> = fields(&m, "m").bytes().collect::<Result<_, _>>().unwrap();
        assert_eq!(bytes, [(1, &b"hi"[..])]);
        let enc: Vec<_> = fields(&m, "m")
            .with_encoding()
            .map(|f| f.unwrap().2)
            .collect();
        assert_eq!(enc.concat(), m);
        assert_eq!(enc[0], &m[..4]);
        let mut w = Vec::new();
        put_bytes(&mut w, 1, b"hi");
        assert_eq!(w, &m[..4]);
    }
}
