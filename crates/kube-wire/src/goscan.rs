//! Go's `encoding/json` syntax check, with its error text: `json.Unmarshal` scans its whole
//! input first (`checkValid`) and fails with a `*SyntaxError` whose message kube-apiserver
//! embeds as it is in some answers (a `continue` token whose base64 does not hold JSON:
//! `invalid continue token: continue key is not valid: invalid character '\x81' looking for
//! beginning of value`).
//!
//! A byte-at-a-time state machine with the scanner's states and messages (`scanner.go`); it
//! only says whether the input is JSON and, if not, why. Decoding is serde's.

/// What the scanner expects after a value closes, per open container (`parseState`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// The scanner's step functions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`, `false` or `null`: the rest of the literal still expected.
    Literal(&'static [u8], &'static str),
}

/// Go's `maxNestingDepth`.
const MAX_DEPTH: usize = 10_000;

/// The `*json.SyntaxError` message Go's `json.Unmarshal` gives for `data`, or `None` when it is
/// syntactically valid JSON (one value, surrounded by spaces only).
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut s = Scanner {
        step: Step::BeginValue,
        open: Vec::new(),
        end_top: false,
    };
    for &c in data {
        if let Err(e) = s.feed(c) {
            return Some(e);
        }
    }
    // `eof`: a space ends a number or a literal-free top value; anything else is cut short.
    if s.end_top {
        return None;
    }
    match s.feed(b' ') {
        Err(e) => Some(e),
        Ok(()) if s.end_top => None,
        Ok(()) => Some("unexpected end of JSON input".into()),
    }
}

struct Scanner {
    step: Step,
    open: Vec<Open>,
    end_top: bool,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn error(c: u8, context: &str) -> Result<(), String> {
    Err(format!("invalid character {} {context}", quote_char(c)))
}

impl Scanner {
    fn push(&mut self, c: u8, open: Open, next: Step) -> Result<(), String> {
        self.open.push(open);
        if self.open.len() > MAX_DEPTH {
            return error(c, "exceeded max depth");
        }
        self.step = next;
        Ok(())
    }

    fn feed(&mut self, c: u8) -> Result<(), String> {
        match self.step {
            Step::BeginValueOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b']' {
                    return self.end_value(c);
                }
                self.begin_value(c)
            }
            Step::BeginValue => self.begin_value(c),
            Step::BeginStringOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b'}' {
                    if let Some(top) = self.open.last_mut() {
                        *top = Open::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            Step::BeginString => self.begin_string(c),
            Step::EndValue => self.end_value(c),
            Step::EndTop => {
                if is_space(c) {
                    Ok(())
                } else {
                    error(c, "after top-level value")
                }
            }
            Step::InString => match c {
                b'"' => {
                    self.step = Step::EndValue;
                    Ok(())
                }
                b'\\' => {
                    self.step = Step::InStringEsc;
                    Ok(())
                }
                c if c < 0x20 => error(c, "in string literal"),
                _ => Ok(()),
            },
            Step::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.step = Step::InString;
                    Ok(())
                }
                b'u' => {
                    self.step = Step::InStringEscU(0);
                    Ok(())
                }
                _ => error(c, "in string escape code"),
            },
            Step::InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return error(c, "in \\u hexadecimal character escape");
                }
                self.step = if n == 3 {
                    Step::InString
                } else {
                    Step::InStringEscU(n + 1)
                };
                Ok(())
            }
            Step::Neg => match c {
                b'0' => {
                    self.step = Step::Zero;
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.step = Step::One;
                    Ok(())
                }
                _ => error(c, "in numeric literal"),
            },
            Step::One => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.zero(c)
            }
            Step::Zero => self.zero(c),
            Step::Dot => {
                if c.is_ascii_digit() {
                    self.step = Step::Dot0;
                    return Ok(());
                }
                error(c, "after decimal point in numeric literal")
            }
            Step::Dot0 => match c {
                b'0'..=b'9' => Ok(()),
                b'e' | b'E' => {
                    self.step = Step::E;
                    Ok(())
                }
                _ => self.end_value(c),
            },
            Step::E => {
                if c == b'+' || c == b'-' {
                    self.step = Step::ESign;
                    return Ok(());
                }
                self.e_sign(c)
            }
            Step::ESign => self.e_sign(c),
            Step::E0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.end_value(c)
            }
            Step::Literal(rest, word) => {
                if c != rest[0] {
                    return error(
                        c,
                        &format!("in literal {word} (expecting {})", quote_char(rest[0])),
                    );
                }
                self.step = if rest.len() == 1 {
                    Step::EndValue
                } else {
                    Step::Literal(&rest[1..], word)
                };
                Ok(())
            }
        }
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            self.step = Step::BeginValue;
            return Ok(());
        }
        self.step = match c {
            b'{' => return self.push(c, Open::ObjectKey, Step::BeginStringOrEmpty),
            b'[' => return self.push(c, Open::ArrayValue, Step::BeginValueOrEmpty),
            b'"' => Step::InString,
            b'-' => Step::Neg,
            b'0' => Step::Zero,
            b'1'..=b'9' => Step::One,
            b't' => Step::Literal(b"rue", "true"),
            b'f' => Step::Literal(b"alse", "false"),
            b'n' => Step::Literal(b"ull", "null"),
            _ => return error(c, "looking for beginning of value"),
        };
        Ok(())
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            self.step = Step::BeginString;
            return Ok(());
        }
        if c == b'"' {
            self.step = Step::InString;
            return Ok(());
        }
        error(c, "looking for beginning of object key string")
    }

    fn zero(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'.' => {
                self.step = Step::Dot;
                Ok(())
            }
            b'e' | b'E' => {
                self.step = Step::E;
                Ok(())
            }
            _ => self.end_value(c),
        }
    }

    fn e_sign(&mut self, c: u8) -> Result<(), String> {
        if c.is_ascii_digit() {
            self.step = Step::E0;
            return Ok(());
        }
        error(c, "in exponent of numeric literal")
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(&top) = self.open.last() else {
            self.step = Step::EndTop;
            self.end_top = true;
            return self.feed(c);
        };
        if is_space(c) {
            self.step = Step::EndValue;
            return Ok(());
        }
        match (top, c) {
            (Open::ObjectKey, b':') => {
                *self.open.last_mut().expect("open") = Open::ObjectValue;
                self.step = Step::BeginValue;
                Ok(())
            }
            (Open::ObjectKey, _) => error(c, "after object key"),
            (Open::ObjectValue, b',') => {
                *self.open.last_mut().expect("open") = Open::ObjectKey;
                self.step = Step::BeginString;
                Ok(())
            }
            (Open::ObjectValue, b'}') | (Open::ArrayValue, b']') => {
                self.open.pop();
                self.step = Step::EndValue;
                if self.open.is_empty() {
                    self.step = Step::EndTop;
                    self.end_top = true;
                }
                Ok(())
            }
            (Open::ObjectValue, _) => error(c, "after object key:value pair"),
            (Open::ArrayValue, b',') => {
                self.step = Step::BeginValue;
                Ok(())
            }
            (Open::ArrayValue, _) => error(c, "after array element"),
        }
    }
}

/// Go's `quoteChar` as Go 1.21+ writes it: `'\''` and `'"'` themselves, ASCII as
/// `strconv.Quote` escapes it ([`crate::gofmt::quote`]: `'\x00'`, `'\n'`, `'\\'`) between
/// single quotes, and a byte above ASCII as `'\xNN'`, the byte it is (not the Latin-1
/// character older Go versions printed).
pub fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => r#"'"'"#.into(),
        0x80.. => format!("'\\x{c:02x}'"),
        _ => {
            let q = crate::gofmt::quote(char::from(c).encode_utf8(&mut [0; 4]));
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_json_passes() {
        for ok in [
            &b"{}"[..],
            b" {\"v\":\"meta.k8s.io/v1\",\"rv\":-12,\"start\":\"a\\u0000\"} ",
            b"[1, 2.5e-3, true, false, null, \"x\", {\"a\": []}]",
            b"0",
            b"-0.0E+1",
            b"\"\\/\"",
        ] {
            assert_eq!(syntax_error(ok), None, "{}", String::from_utf8_lossy(ok));
        }
    }

    #[test]
    fn errors_are_gos_words() {
        let e = |d: &[u8]| syntax_error(d).unwrap();
        let cases: &[(&[u8], &str)] = &[
            (
                b"\x81\x02",
                r"invalid character '\x81' looking for beginning of value",
            ),
            (b"", "unexpected end of JSON input"),
            (b"{\"v\":", "unexpected end of JSON input"),
            (b"{\"v\" 1}", "invalid character '1' after object key"),
            (
                b"{\"v\":1 2}",
                "invalid character '2' after object key:value pair",
            ),
            (
                b"{x}",
                "invalid character 'x' looking for beginning of object key string",
            ),
            (b"[1 2]", "invalid character '2' after array element"),
            (b"{} x", "invalid character 'x' after top-level value"),
            // At the end, Go feeds a space: a cut literal fails on it.
            (
                b"tru",
                "invalid character ' ' in literal true (expecting 'e')",
            ),
            (
                b"trux",
                "invalid character 'x' in literal true (expecting 'e')",
            ),
            (
                b"nul!",
                "invalid character '!' in literal null (expecting 'l')",
            ),
            (b"-a", "invalid character 'a' in numeric literal"),
            (
                b"1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (
                b"1e+x",
                "invalid character 'x' in exponent of numeric literal",
            ),
            (b"\"a\nb\"", r"invalid character '\n' in string literal"),
            (b"\"\\q\"", "invalid character 'q' in string escape code"),
            (
                b"\"\\u12g4\"",
                r"invalid character 'g' in \u hexadecimal character escape",
            ),
            (
                b"'",
                r"invalid character '\'' looking for beginning of value",
            ),
            (b"01", "invalid character '1' after top-level value"),
        ];
        for (input, want) in cases {
            assert_eq!(e(input), *want, "{}", String::from_utf8_lossy(input));
        }
        let deep = vec![b'['; MAX_DEPTH + 1];
        assert_eq!(e(&deep), "invalid character '[' exceeded max depth");
    }
}
