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
    out.push(b'"');
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

/// Whether an ASCII byte needs escaping.
fn escaped(b: u8) -> bool {
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
    serde_json::from_slice::<serde::de::IgnoredAny>(raw).map_err(|e| e.to_string())?;
    // Usually (kube wrote it) there is nothing to do: no whitespace, nothing to escape.
    let special = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'<' | b'>' | b'&' | 0xe2);
    let clean = raw.chunks(32).all(|chunk| {
        // Branch-free over a chunk, so the compiler can vectorise it.
        !chunk.iter().fold(false, |hit, &b| hit | special(b))
    });
    if clean {
        out.extend_from_slice(raw);
        return Ok(());
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
    Ok(())
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
