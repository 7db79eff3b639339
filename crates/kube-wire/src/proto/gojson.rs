//! The pieces of Go's `encoding/json` output the decoder writes byte for byte: string escaping
//! (with HTML escaping, as kube's serializer leaves it on), the compaction Go applies to a
//! `MarshalJSON` result (raw extensions), float64 formatting, and base64 for `[]byte`.
//!
//! Writing only: choosing what to write is [`super::decode`].

use base64::Engine as _;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string the way Go's encoder does: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
/// `\t`; other control characters, `<`, `>`, `&`, U+2028 and U+2029 as `\u00XX`; each byte of
/// invalid UTF-8 as `\ufffd`.
pub(crate) fn string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    // Usually nothing to escape: copied at once. Otherwise the bytes before the first special
    // one are copied, and the rest goes the long way.
    let (head, s) = s.split_at(plain(s));
    out.extend_from_slice(head);
    if s.is_empty() {
        out.push(b'"');
        return;
    }
    if s.is_ascii() {
        ascii(out, s);
    } else {
        let mut rest = s;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    valid_str(out, valid);
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // The prefix is valid UTF-8 by construction.
                    valid_str(out, std::str::from_utf8(valid).unwrap_or_default());
                    let bad = e.error_len().unwrap_or(after.len());
                    for _ in 0..bad {
                        out.extend_from_slice(b"\\ufffd");
                    }
                    rest = after.get(bad..).unwrap_or_default();
                }
            }
        }
    }
    out.push(b'"');
}

/// [`string`] of `s`, a part of `whole`: a short string that needs no escaping is copied as a
/// fixed 32 bytes of `whole` and the excess cut, quicker than copying a length known only at
/// run time.
pub(crate) fn string_in(out: &mut Vec<u8>, s: &[u8], whole: &[u8]) {
    const N: usize = 32;
    let at = s.as_ptr().addr().wrapping_sub(whole.as_ptr().addr());
    if s.len() < N
        && let Some(chunk) = whole.get(at..at.saturating_add(N))
        && chunk.as_ptr() == s.as_ptr()
        && let Ok(chunk) = <&[u8; N]>::try_from(chunk)
        && plain_in(chunk, s.len())
    {
        out.push(b'"');
        let start = out.len();
        out.extend_from_slice(chunk);
        out.truncate(start + s.len());
        out.push(b'"');
        return;
    }
    string(out, s);
}

/// The bytes a string cannot be copied through as they are: the ASCII ones Go escapes, and
/// every non-ASCII byte (UTF-8 to check, U+2028 and U+2029 to escape).
static SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = b >= 0x80 || escaped(b as u8);
        b += 1;
    }
    table
};

/// Whether the first `len` bytes of `chunk` are none of them [`SPECIAL`]: [`plain`] over a
/// fixed 32 bytes, by words only (the bytes past `len` in the last word are ignored rather
/// than the last ones tested one by one).
#[inline(always)]
fn plain_in(chunk: &[u8; 32], len: usize) -> bool {
    let mut n = 0;
    for word in chunk.chunks_exact(8) {
        if n >= len {
            break;
        }
        let Ok(bytes) = <[u8; 8]>::try_from(word) else {
            break;
        };
        let special = special_bytes(u64::from_le_bytes(bytes));
        if special != 0 {
            return n + (special.trailing_zeros() / 8) as usize >= len;
        }
        n += 8;
    }
    true
}

/// The high bit of each [`SPECIAL`] byte of a word (little-endian), the lowest one exact.
#[inline(always)]
fn special_bytes(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each zero byte. Bytes above a zero one may be marked too (a borrow), but
    // never bytes below it: the lowest mark is exact, and that is all we ask.
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    (x & HIGH) // non-ASCII
        | (x.wrapping_sub(ONES * 0x20) & !x & HIGH) // control characters
        | zero((x ^ (ONES * 0x22)) & (ONES * 0xfb)) // `"` and `&` (0x22, 0x26)
        | zero((x ^ (ONES * 0x3c)) & (ONES * 0xfd)) // `<` and `>` (0x3c, 0x3e)
        | zero(x ^ (ONES * 0x5c)) // `\\`
}

/// How many bytes `s` starts with that are not [`SPECIAL`]: eight at a time, then one by one.
fn plain(s: &[u8]) -> usize {
    let mut n = 0;
    while let Some(chunk) = s.get(n..n + 8) {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let special = special_bytes(u64::from_le_bytes(bytes));
        if special != 0 {
            // Little-endian: the lowest mark is the first special byte.
            return n + (special.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + s
        .get(n..)
        .unwrap_or_default()
        .iter()
        .position(|&b| SPECIAL[usize::from(b)])
        .unwrap_or(s.len() - n)
}

/// Whether an ASCII byte needs escaping.
const fn escaped(b: u8) -> bool {
    b < 0x20 || matches!(b, b'"' | b'\\' | b'<' | b'>' | b'&')
}

/// The ASCII-only case (almost every Kubernetes string): copy runs, escape single bytes.
fn ascii(out: &mut Vec<u8>, s: &[u8]) {
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        if !escaped(b) {
            continue;
        }
        out.extend_from_slice(s.get(start..i).unwrap_or_default());
        escape_ascii(out, b);
        start = i + 1;
    }
    out.extend_from_slice(s.get(start..).unwrap_or_default());
}

fn escape_ascii(out: &mut Vec<u8>, b: u8) {
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        _ => {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        }
    }
}

fn valid_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<&[u8]> = match c {
            '\u{2028}' => Some(b"\\u2028"),
            '\u{2029}' => Some(b"\\u2029"),
            c if c.is_ascii() && escaped(c as u8) => None,
            _ => continue,
        };
        out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
        match esc {
            Some(e) => out.extend_from_slice(e),
            None => escape_ascii(out, c as u8),
        }
        start = i + c.len_utf8();
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
}

/// Appends the output of a Go `MarshalJSON` that returned `raw`: Go checks it is valid JSON,
/// drops insignificant whitespace and HTML-escapes `<`, `>`, `&`, U+2028 and U+2029.
pub(crate) fn compact(out: &mut Vec<u8>, raw: &[u8]) -> Result<(), String> {
    match Check::valid(raw) {
        // Valid and already compact and escaped (as kube writes it).
        Some(true) => {
            out.extend_from_slice(raw);
            return Ok(());
        }
        Some(false) => {}
        None => {
            serde_json::from_slice::<serde::de::IgnoredAny>(raw).map_err(|e| e.to_string())?;
        }
    }
    compact_valid(out, raw);
    Ok(())
}

/// [`compact`] of `raw` known to be valid JSON (it was checked when first decoded): the check
/// is skipped. Whatever `raw` is, nothing panics; JSON that is not valid is copied through the
/// same rules (whitespace outside strings dropped, `<`, `>`, `&`, U+2028, U+2029 escaped in
/// them), which is then not what Go writes, as Go writes nothing for it.
pub(crate) fn compact_valid(out: &mut Vec<u8>, raw: &[u8]) {
    // Usually (kube wrote it) there is nothing to do: no whitespace, nothing to escape. The
    // test passes more bytes to the long way than it must (every control character, and every
    // byte from 0xe2 up), which writes them as they are, as here: in exchange it is four
    // comparisons the compiler makes over 16 bytes at once (`<` and `>` differ in one bit).
    let special = |b: u8| b <= b' ' || b | 2 == b'>' || b == b'&' || b >= 0xe2;
    let clean = raw.chunks(64).all(|chunk| {
        // Branch-free over a chunk, so the compiler can vectorise it.
        chunk.iter().fold(0u8, |hit, &b| hit | u8::from(special(b))) == 0
    });
    if clean {
        out.extend_from_slice(raw);
        return;
    }
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            match b {
                b'<' | b'>' | b'&' => {
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(b >> 4)]);
                    out.push(HEX[usize::from(b & 0xf)]);
                }
                0xe2 if raw.get(i + 1) == Some(&0x80)
                    && matches!(raw.get(i + 2), Some(0xa8 | 0xa9)) =>
                {
                    let last = if raw.get(i + 2) == Some(&0xa8) {
                        b'8'
                    } else {
                        b'9'
                    };
                    out.extend_from_slice(b"\\u202");
                    out.push(last);
                    i += 2;
                }
                _ => out.push(b),
            }
        } else {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b'"' => {
                    in_string = true;
                    out.push(b);
                }
                _ => out.push(b),
            }
        }
        i += 1;
    }
}

/// A quick JSON validity check for [`compact`], for the common case only: `Some` when `raw` is
/// valid JSON that `serde_json` also accepts (ASCII strings, nesting under [`Check::MAX_DEPTH`]),
/// with whether it is already compact and escaped; `None` for anything else, valid or not, which
/// `serde_json` then judges (and words the error). One pass, no recursion: open arrays and
/// objects are bits of a stack.
struct Check<'a> {
    s: &'a [u8],
    i: usize,
    /// Whitespace between tokens, or a `<`, `>`, `&` in a string: [`compact`] has work to do.
    dirty: bool,
}

impl<'a> Check<'a> {
    /// Well below `serde_json`'s recursion limit (128), and within the bits of the stack.
    const MAX_DEPTH: u32 = 100;

    fn valid(raw: &'a [u8]) -> Option<bool> {
        let mut c = Check {
            s: raw,
            i: 0,
            dirty: false,
        };
        // Bit 0: whether the innermost open value is an object.
        let mut stack = 0u128;
        let mut depth = 0u32;
        'value: loop {
            match c.next()? {
                open @ (b'{' | b'[') => {
                    if depth >= Self::MAX_DEPTH {
                        return None;
                    }
                    c.i += 1;
                    let object = open == b'{';
                    let close = if object { b'}' } else { b']' };
                    if c.next()? == close {
                        c.i += 1;
                    } else {
                        stack = stack << 1 | u128::from(object);
                        depth += 1;
                        if object {
                            c.key()?;
                        }
                        continue 'value;
                    }
                }
                b'"' => {
                    c.i += 1;
                    c.string()?;
                }
                b't' => c.literal(b"true")?,
                b'f' => c.literal(b"false")?,
                b'n' => c.literal(b"null")?,
                _ => c.number()?,
            }
            // After a value: the end, or what follows it in its array or object.
            loop {
                if depth == 0 {
                    return match c.next() {
                        None => Some(!c.dirty),
                        Some(_) => None,
                    };
                }
                let object = stack & 1 == 1;
                match c.next()? {
                    b',' => {
                        c.i += 1;
                        if object {
                            c.key()?;
                        }
                        continue 'value;
                    }
                    b'}' if object => {}
                    b']' if !object => {}
                    _ => return None,
                }
                c.i += 1;
                stack >>= 1;
                depth -= 1;
            }
        }
    }

    /// The next byte that is not whitespace, not consumed (`None` at the end).
    #[inline]
    fn next(&mut self) -> Option<u8> {
        let b = *self.s.get(self.i)?;
        // Whitespace is at most b' '.
        if b > b' ' {
            Some(b)
        } else {
            self.after_space()
        }
    }

    #[cold]
    fn after_space(&mut self) -> Option<u8> {
        loop {
            let b = *self.s.get(self.i)?;
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(b);
            }
            self.dirty = true;
            self.i += 1;
        }
    }

    /// An object's key and its colon.
    fn key(&mut self) -> Option<()> {
        if self.next()? != b'"' {
            return None;
        }
        self.i += 1;
        self.string()?;
        if self.next()? != b':' {
            return None;
        }
        self.i += 1;
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.s.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// The rest of a string after its opening quote.
    fn string(&mut self) -> Option<()> {
        loop {
            // Byte by byte: a raw value's strings are mostly a few bytes long (FieldsV1's
            // `f:name`), too short for `plain`'s eight at a time to pay.
            let b = loop {
                let b = *self.s.get(self.i)?;
                self.i += 1;
                if SPECIAL[usize::from(b)] {
                    break b;
                }
            };
            match b {
                b'"' => return Some(()),
                b'\\' => match *self.s.get(self.i)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                    b'u' => {
                        let hex = self.s.get(self.i + 1..self.i + 5)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        self.i += 5;
                    }
                    _ => return None,
                },
                b'<' | b'>' | b'&' => self.dirty = true,
                // Control characters (invalid) and non-ASCII bytes (left to serde_json).
                _ => return None,
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
    }
}

/// Appends a float64 as Go's encoder writes it (ES6 style: `%f` for 1e-6 <= |f| < 1e21, else
/// `%e` with the exponent's leading zero dropped). NaN and infinities are refused, as Go does.
pub(crate) fn float(out: &mut Vec<u8>, f: f64) -> Result<(), String> {
    if !f.is_finite() {
        return Err(format!("unsupported value: {f}"));
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust's `{:e}` is the shortest round-trip mantissa with a bare exponent (`1.5e-7`,
        // `1e21`); Go writes the exponent's sign always and at least two digits, then strips
        // the leading zero of a negative one: `1.5e-7`, `1e+21`.
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mant, exp)) => {
                out.extend_from_slice(mant.as_bytes());
                out.push(b'e');
                if !exp.starts_with('-') {
                    out.push(b'+');
                }
                out.extend_from_slice(exp.as_bytes());
            }
            None => out.extend_from_slice(s.as_bytes()),
        }
    } else {
        out.extend_from_slice(format!("{f}").as_bytes());
    }
    Ok(())
}

/// Appends an integer in decimal, as Go writes it.
pub(crate) fn int(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    uint(out, v.unsigned_abs());
}

/// Appends an unsigned integer in decimal.
pub(crate) fn uint(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    out.extend_from_slice(digits(&mut buf, v));
}

/// The decimal digits of `v`, written at the end of `buf` (20 digits hold any `u64`).
pub(crate) fn digits(buf: &mut [u8; 20], mut v: u64) -> &[u8] {
    let mut start = buf.len();
    for slot in buf.iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
        start -= 1;
        if v == 0 {
            break;
        }
    }
    buf.get(start..).unwrap_or_default()
}

/// Appends `[]byte` as Go does: a standard, padded base64 string.
pub(crate) fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'"');
    let start = out.len();
    out.resize(start + base64::encoded_len(b.len(), true).unwrap_or(0), 0);
    if let Some(dst) = out.get_mut(start..) {
        let n = base64::engine::general_purpose::STANDARD
            .encode_slice(b, dst)
            .unwrap_or(0);
        out.truncate(start + n);
    }
    out.push(b'"');
}

/// Decodes a JSON string into `[]byte` as Go does: standard base64 with padding, line breaks
/// ignored, non-zero trailing bits accepted.
pub(crate) fn unbase64(s: &str) -> Result<Vec<u8>, String> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const GO_STD: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    let decoded = if s.contains(['\r', '\n']) {
        let cleaned: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        GO_STD.decode(cleaned)
    } else {
        GO_STD.decode(s)
    };
    decoded.map_err(|e| format!("illegal base64 data: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(input: &[u8]) -> String {
        let mut out = Vec::new();
        string(&mut out, input);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_within_a_buffer_as_alone() {
        let whole: Vec<u8> =
            b"0123456789abcdef<x>\"q\"\xffzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\\".to_vec();
        for start in 0..whole.len() {
            for end in start..=whole.len() {
                let part = &whole[start..end];
                let mut within = Vec::new();
                string_in(&mut within, part, &whole);
                assert_eq!(String::from_utf8_lossy(&within), s(part), "{start}..{end}");
                // Not a part of `whole`: the same.
                let copy = part.to_vec();
                let mut outside = Vec::new();
                string_in(&mut outside, &copy, &whole);
                assert_eq!(outside, within);
            }
        }
    }

    #[test]
    fn plain_prefixes() {
        let specials = b"\"\\<>&\x00\x1f\x80\xff";
        for len in 0..20 {
            for at in 0..=len {
                for &special in specials {
                    let mut s = vec![b'a'; len];
                    if at < len {
                        s[at] = special;
                    }
                    assert_eq!(plain(&s), at, "{s:?}");
                }
            }
        }
        // Two special bytes in one word: the first counts.
        for first in 0..8 {
            for second in first + 1..12 {
                for &(a, b) in &[(b'"', 0x00), (0x1f, b'<'), (b'&', b'\\'), (0x80, b'"')] {
                    let mut s = vec![b'a'; 16];
                    s[first] = a;
                    s[second] = b;
                    assert_eq!(plain(&s), first, "{s:?}");
                }
            }
        }
        let all: Vec<u8> = (0..=255).collect();
        for b in all {
            let s = [b'x', b'y', b'z', b, b'x', b'x', b'x', b'x', b'x'];
            assert_eq!(plain(&s) == 3, SPECIAL[usize::from(b)], "{b}");
        }
    }

    #[test]
    fn strings_escape_as_go() {
        assert_eq!(s(b"a<b>&c"), r#""a\u003cb\u003e\u0026c""#);
        assert_eq!(s(b"\x01\x08\x0c\n\r\t\"\\"), r#""\u0001\b\f\n\r\t\"\\""#);
        assert_eq!(s("\u{2028}x\u{2029}é".as_bytes()), r#""\u2028x\u2029é""#);
        assert_eq!(s(b"a\xffb\xe2\x82"), r#""a\ufffdb\ufffd\ufffd""#);
        assert_eq!(s(b"\x7f"), "\"\x7f\"");
    }

    #[test]
    fn floats_format_as_go() {
        let f = |v: f64| {
            let mut out = Vec::new();
            float(&mut out, v).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(f(1.0), "1");
        assert_eq!(f(0.5), "0.5");
        assert_eq!(f(-0.0), "-0");
        assert_eq!(f(1e21), "1e+21");
        assert_eq!(f(1.5e-7), "1.5e-7");
        assert_eq!(f(1e-10), "1e-10");
        assert_eq!(f(123456789.0), "123456789");
        assert_eq!(f(0.000001), "0.000001");
        assert!(float(&mut Vec::new(), f64::NAN).is_err());
    }

    #[test]
    fn compaction_as_go() {
        let mut out = Vec::new();
        compact(
            &mut out,
            b" { \"a\" : [1, 2], \"b\":\"x <y> \\\" \\u0041\"\n}",
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":[1,2],"b":"x \u003cy\u003e \" \u0041"}"#
        );
        assert!(compact(&mut Vec::new(), b"{").is_err());
        assert!(compact(&mut Vec::new(), b"").is_err());
    }

    /// Compacting JSON known to be valid writes what compacting it with the check does, clean or
    /// not, with each byte that may need work at every place of a 64-byte chunk.
    #[test]
    fn compact_valid_as_compact() {
        // In strings (raw control characters are not valid there), and between tokens.
        let specials: &[&str] = &[" ", "<", ">", "&", "\u{2028}", "é", "日", "\\\"", "\\n"];
        let spaces: &[&str] = &[" ", "\n", "\t", "\r", ""];
        for (i, special) in specials.iter().enumerate() {
            let space = spaces[i % spaces.len()];
            for at in 0..70 {
                let pad = "x".repeat(at);
                for raw in [
                    format!("{{\"{pad}{special}\":[1, 2]}}"),
                    format!("[\"{pad}\",{space}1]"),
                ] {
                    let (mut checked, mut trusted) = (Vec::new(), Vec::new());
                    compact(&mut checked, raw.as_bytes()).unwrap();
                    compact_valid(&mut trusted, raw.as_bytes());
                    assert_eq!(trusted, checked, "{raw}");
                }
            }
        }
    }

    /// The quick check never calls valid what serde_json refuses, and knows the usual forms.
    #[test]
    fn quick_check_agrees_with_serde_json() {
        let serde = |raw: &[u8]| serde_json::from_slice::<serde::de::IgnoredAny>(raw).is_ok();
        let samples: &[&[u8]] = &[
            br#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"k:{\"uid\":\"x\"}":{}}"#,
            b"[1,-2,3.5,-0.25e+10,1E3,0,true,false,null,\"\\u00e9\\n\\/\"]",
            b" { \"a\" : [ ] } ",
            b"\"x<y\"",
            b"-0",
            b"01",
            b"1.",
            b".5",
            b"1e",
            b"+1",
            b"-",
            b"[1,]",
            b"{\"a\":1,}",
            b"{\"a\" 1}",
            b"{1:2}",
            b"[1 2]",
            b"\"\\x\"",
            b"\"\\u12G4\"",
            b"\"\x01\"",
            b"\"\xc3\xa9\"",
            b"tru",
            b"nulll",
            b"{}{}",
            b"",
            b"   ",
            b"\"unterminated",
        ];
        let deep = format!("{}{}", "[".repeat(99), "]".repeat(99));
        let deeper = format!("{}{}", "[".repeat(101), "]".repeat(101));
        let too_deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let mut all: Vec<&[u8]> = samples.to_vec();
        all.extend([deep.as_bytes(), deeper.as_bytes(), too_deep.as_bytes()]);
        for raw in all {
            if let Some(clean) = Check::valid(raw) {
                assert!(serde(raw), "{}", String::from_utf8_lossy(raw));
                let mut out = Vec::new();
                compact(&mut out, raw).unwrap();
                assert_eq!(clean, out == raw, "{}", String::from_utf8_lossy(raw));
            }
        }
        assert_eq!(Check::valid(samples[0]), Some(true));
        assert_eq!(Check::valid(samples[1]), Some(true));
        assert_eq!(Check::valid(samples[2]), Some(false));
        assert_eq!(Check::valid(samples[3]), Some(false));
        assert_eq!(Check::valid(deep.as_bytes()), Some(true));
        // Random strings of JSON's tokens: never valid where serde_json says otherwise, and
        // compacted as it says.
        let pieces: &[&[u8]] = &[
            b"{", b"}", b"[", b"]", b"\"", b"\"a", b":", b",", b"0", b"12", b"-", b".", b"e", b"+",
            b" ", b"\n", b"true", b"nul", b"null", b"\\", b"\\u00ff", b"<", b"\x01",
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let (mut known, mut valid) = (0, 0);
        for _ in 0..200_000 {
            let mut raw = Vec::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut r = x;
            for _ in 0..(r % 12) {
                r = r.rotate_left(5) ^ 0x5555;
                raw.extend_from_slice(pieces[(r % pieces.len() as u64) as usize]);
            }
            if let Some(clean) = Check::valid(&raw) {
                known += 1;
                assert!(serde(&raw), "{}", String::from_utf8_lossy(&raw));
                let mut out = Vec::new();
                compact(&mut out, &raw).unwrap();
                assert_eq!(clean, out == raw, "{}", String::from_utf8_lossy(&raw));
            }
            valid += usize::from(serde(&raw));
        }
        assert!(known > 1000 && known <= valid, "{known} {valid}");
        // Every prefix and every one-byte change of a valid document.
        let doc = samples[1];
        for cut in 0..doc.len() {
            if Check::valid(&doc[..cut]).is_some() {
                assert!(serde(&doc[..cut]));
            }
            for b in [
                b' ', b'"', b'\\', b'0', b'e', b'.', b'-', b',', b']', b'}', 0x01, 0xff,
            ] {
                let mut changed = doc.to_vec();
                changed[cut] = b;
                if Check::valid(&changed).is_some() {
                    assert!(serde(&changed), "{}", String::from_utf8_lossy(&changed));
                }
            }
        }
    }

    #[test]
    fn base64_as_go() {
        let mut out = Vec::new();
        bytes(&mut out, b"hello");
        assert_eq!(out, b"\"aGVsbG8=\"");
        assert_eq!(unbase64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(unbase64("aGVs\nbG8=").unwrap(), b"hello");
        assert!(unbase64("aGVsbG8").is_err());
    }
}
