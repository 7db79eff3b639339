//! Go formatting that Kubernetes clients see byte for byte: `strconv.Quote` (`%q` in error
//! messages), `%v` of a float64, `encoding/json`'s HTML escaping, and its indentation
//! (`json.MarshalIndent(v, "", "  ")`, kube's `?pretty=true`).
//!
//! Only the verbs whose output reaches a client are here: this is not a general `fmt` port.

/// Quotes a string the way Go's `strconv.Quote` (and so `fmt`'s `%q`) does.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Quotes a string the way Go's `time` package does in its parse errors (its own `quote`, not
/// `strconv.Quote`): `"` and `\\` escaped, every byte of a control or non-ASCII character as
/// `\xNN`.
pub fn time_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='\u{7f}' => out.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint` for non-ASCII characters: letters, marks, numbers, punctuation and
/// symbols. Rust's `escape_debug` keeps exactly the same classes unescaped (it escapes the
/// categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs), except that it also escapes a grapheme extender
/// at the start of a string; placing the character second sidesteps that.
fn go_is_print(c: char) -> bool {
    let mut buf = [0u8; 8];
    buf[0] = b'a';
    let len = 1 + c.encode_utf8(&mut buf[1..]).len();
    let Ok(s) = std::str::from_utf8(&buf[..len]) else {
        return false;
    };
    s.escape_debug().eq(s.chars())
}

/// Go's `%v` for a float64 (`strconv` 'g', shortest): `%e` form when the decimal exponent is
/// < -4 or >= 6 (`1e+06`, `1.5e-05`), plain decimal otherwise.
pub fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let n = digits.len() as i32;
    let body = if exp < 0 {
        format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
    } else if exp + 1 >= n {
        format!("{}{}", digits, "0".repeat((exp + 1 - n) as usize))
    } else {
        let (int, frac) = digits.split_at((exp + 1) as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

/// Applies Go's HTML escaping to already serialised JSON.
pub fn escape_html(raw: Vec<u8>) -> Vec<u8> {
    let needs = raw
        .iter()
        .any(|&c| c == b'<' || c == b'>' || c == b'&' || c == 0xE2);
    if !needs {
        return raw;
    }
    let mut out = Vec::with_capacity(raw.len() + 16);
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        match c {
            b'<' => out.extend_from_slice(b"\\u003c"),
            b'>' => out.extend_from_slice(b"\\u003e"),
            b'&' => out.extend_from_slice(b"\\u0026"),
            0xE2 if i + 2 < raw.len()
                && raw[i + 1] == 0x80
                && (raw[i + 2] == 0xA8 || raw[i + 2] == 0xA9) =>
            {
                out.extend_from_slice(if raw[i + 2] == 0xA8 {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                });
                i += 2;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// Go's name of the type of a decoded JSON value (`reflect.TypeOf` of what `encoding/json`
/// decodes into an `interface{}`), as error messages print it; `<nil>` for null.
pub fn go_type(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Indents compact JSON as Go's `json.Indent(dst, src, "", "  ")` does (so
/// `json.MarshalIndent`): a newline and two spaces per level after `{`, `[` and `,`, a space
/// after `:`, empty objects and arrays kept as `{}` and `[]`, strings copied byte for byte (so
/// Go's escaping survives). Whitespace between tokens is dropped; the input is not validated.
pub fn indent(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(src.len() + src.len() / 2);
    let mut depth = 0usize;
    let mut i = 0;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', depth * 2));
    };
    while i < src.len() {
        let c = src[i];
        match c {
            b'"' => {
                let start = i;
                i += 1;
                while i < src.len() {
                    match src[i] {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                i = (i + 1).min(src.len());
                out.extend_from_slice(&src[start..i]);
                continue;
            }
            b'{' | b'[' => {
                out.push(c);
                let close = if c == b'{' { b'}' } else { b']' };
                let mut j = i + 1;
                while j < src.len() && src[j].is_ascii_whitespace() {
                    j += 1;
                }
                if src.get(j) == Some(&close) {
                    out.push(close);
                    i = j + 1;
                    continue;
                }
                depth += 1;
                newline(&mut out, depth);
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            b',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indents_like_go_marshal_indent() {
        let src =
            br#"{"kind":"PodList","metadata":{},"items":[{"a":[1,2],"b":"x,\"y:{"},{"e":[]}]}"#;
        let want = "{\n  \"kind\": \"PodList\",\n  \"metadata\": {},\n  \"items\": [\n    {\n      \"a\": [\n        1,\n        2\n      ],\n      \"b\": \"x,\\\"y:{\"\n    },\n    {\n      \"e\": []\n    }\n  ]\n}";
        assert_eq!(String::from_utf8(indent(src)).unwrap(), want);
        assert_eq!(indent(b"{}"), b"{}");
    }
}
