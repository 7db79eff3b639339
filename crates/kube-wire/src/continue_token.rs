//! `continue` tokens in kube-apiserver's format, so a token minted here is accepted by a real
//! apiserver and vice versa: unpadded base64url of `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>"}`
//! where `start` is the last returned key, relative to the request's key prefix, plus `\0`.
//!
//! kube mints two spellings of the same start key, and reads both: its watch cache trims a key
//! prefix without a trailing slash (`/registry/pods` or `/registry/pods/ns`), so its pages say
//! `"/ns/name\u0000"` ([`ContinueToken::encode`]); its etcd3 storage trims one with the slash, so
//! the token of a 410 Expired continuation says `"ns/name\u0000"`
//! ([`ContinueToken::encode_storage`]). A decoded token keeps the key without the slash.
//!
//! Format and validation only: whether the token's revision can still be served (or is
//! compacted, kube's 410) is the server's decision, made against its own store.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// A decoded token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// Revision the list is pinned to; -1 means "continue at the latest revision".
    pub rv: i64,
    /// Start key relative to the key prefix (inclusive).
    pub start: String,
}

#[derive(Serialize)]
struct Wire {
    v: String,
    rv: i64,
    start: String,
}

/// Why a token was rejected; Display is kube's text (after "invalid continue token: ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContinueError {
    /// Not base64url / not JSON.
    #[error("continue key is not valid: {0}")]
    Malformed(String),
    /// rv == 0.
    #[error(
        "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    )]
    ZeroRv,
    /// Empty start key.
    #[error("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")]
    EmptyStart,
    /// A start key that is not a clean path (path traversal).
    #[error("continue key is not valid: {0}")]
    UncleanStart(String),
    /// Unknown `v`.
    #[error("continue key is not valid: server does not recognize this encoded version {0}")]
    Version(String),
}

impl ContinueToken {
    /// Token continuing after `last_key` (relative to the prefix) at revision `rv`.
    pub fn after(rv: i64, last_key: &str) -> Self {
        ContinueToken {
            rv,
            start: format!("{last_key}\u{0}"),
        }
    }

    /// Encodes as kube-apiserver's watch cache mints a page's token (`cacher.GetList`): the
    /// start key with its leading `/`. What kube 1.34+ answers for every LIST its cache serves.
    pub fn encode(&self) -> String {
        self.encode_as(format!("/{}", self.start))
    }

    /// Encodes as kube's etcd3 storage mints a token (`EncodeContinue` with a key prefix that
    /// ends in `/`): the start key without the slash, as in the new token of a 410 Expired
    /// continuation.
    pub fn encode_storage(&self) -> String {
        self.encode_as(self.start.clone())
    }

    fn encode_as(&self, start: String) -> String {
        let wire = Wire {
            v: "meta.k8s.io/v1".into(),
            rv: self.rv,
            start,
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).expect("token serialises"))
    }

    /// Decodes and validates as kube's `storage.DecodeContinue` does: Go's unpadded base64url
    /// (trailing bits allowed, line breaks skipped), then Go's `encoding/json` into kube's
    /// `continueToken` struct ([`GoToken`]: keys matched case-insensitively, a missing or
    /// `null` field left at its zero value, a mistyped one refused with Go's text), then the
    /// version, `rv` (0 refused; negative means "latest") and the start key (empty, or not a
    /// clean path, refused).
    pub fn decode(s: &str) -> Result<Self, ContinueError> {
        let data = go_base64(s)?;
        // Go's `json.Unmarshal` checks the syntax of the whole input first, in its own words.
        if let Some(e) = crate::goscan::syntax_error(&data) {
            return Err(ContinueError::Malformed(e));
        }
        let w: GoToken =
            serde_json::from_slice(&data).map_err(|e| ContinueError::Malformed(e.to_string()))?;
        if let Some(e) = w.type_error {
            return Err(ContinueError::Malformed(e));
        }
        if w.v != "meta.k8s.io/v1" {
            return Err(ContinueError::Version(w.v));
        }
        if w.rv == 0 {
            return Err(ContinueError::ZeroRv);
        }
        if w.start.is_empty() {
            return Err(ContinueError::EmptyStart);
        }
        let rooted = if w.start.starts_with('/') {
            w.start.clone()
        } else {
            format!("/{}", w.start)
        };
        if clean(&rooted) != rooted {
            return Err(ContinueError::UncleanStart(w.start));
        }
        Ok(ContinueToken {
            rv: w.rv,
            start: rooted[1..].to_string(),
        })
    }
}

/// Go's `base64.RawURLEncoding.DecodeString`: no padding (`=` is a bad byte), non-zero trailing
/// bits accepted, `\r` and `\n` skipped; a failure is Go's `illegal base64 data at input byte N`,
/// with Go's `N` ([`go_base64_error`]).
fn go_base64(s: &str) -> Result<Vec<u8>, ContinueError> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const GO_RAW_URL: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        GeneralPurposeConfig::new()
            .with_encode_padding(false)
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireNone),
    );
    let malformed =
        |at: usize| ContinueError::Malformed(format!("illegal base64 data at input byte {at}"));
    if let Some(at) = go_base64_error(s.as_bytes()) {
        return Err(malformed(at));
    }
    let stripped: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    // Go accepted it, so the crate does too; its offset is only a fallback.
    GO_RAW_URL.decode(&stripped).map_err(|e| {
        malformed(match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            _ => stripped.len().saturating_sub(1),
        })
    })
}

/// Where Go's `RawURLEncoding` decoder (`decodeQuantum`) stops with a `CorruptInputError`, if
/// it does: it reads quanta of four symbols in order, skipping `\r` and `\n`; the first byte
/// outside the alphabet (`=` included: the encoding has no padding) is the error at its own
/// offset, and input that ends one symbol into a quantum is the error at that offset minus one
/// (`si - j` with `j == 1`). So the offset counts skipped line breaks, and a bad byte is found
/// before a bad length: `garbage!!` fails at byte 7, the first `!`.
fn go_base64_error(src: &[u8]) -> Option<usize> {
    let symbol = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
    let mut si = 0;
    loop {
        let mut j = 0;
        while j < 4 {
            let Some(&c) = src.get(si) else {
                return (j == 1).then(|| si - 1);
            };
            si += 1;
            if symbol(c) {
                j += 1;
            } else if c != b'\n' && c != b'\r' {
                return Some(si - 1);
            }
        }
    }
}

/// kube's `continueToken` as Go's `encoding/json` fills it: each key is matched to a field
/// case-insensitively (Go folds `ſ` to `s` too), the last occurrence wins, `null` leaves a field
/// as it was, unknown keys are ignored; a value of the wrong JSON type (or an `rv` that is not
/// an int64: `1.5`, `1e3`, beyond 2^63) is Go's `UnmarshalTypeError`, the first of which Go
/// returns once the whole document is read. A document that is not an object is a type error
/// too, except `null` (all fields zero).
#[derive(Debug, Default)]
struct GoToken {
    v: String,
    rv: i64,
    start: String,
    type_error: Option<String>,
}

impl GoToken {
    fn mistyped(&mut self, what: &str, field: &str, ty: &str) {
        self.type_error.get_or_insert_with(|| {
            format!("json: cannot unmarshal {what} into Go struct field continueToken.{field} of type {ty}")
        });
    }

    fn top_level(what: &str) -> GoToken {
        GoToken {
            type_error: Some(format!(
                "json: cannot unmarshal {what} into Go value of type storage.continueToken"
            )),
            ..GoToken::default()
        }
    }

    /// Stores one member's raw JSON value into the field `field` names.
    fn set(&mut self, field: &'static str, raw: &str) -> Result<(), serde_json::Error> {
        let kind = match raw.as_bytes().first() {
            Some(b'n') => return Ok(()),
            Some(b'"') => "string",
            Some(b't' | b'f') => "bool",
            Some(b'{') => "object",
            Some(b'[') => "array",
            _ => "number",
        };
        match (field, kind) {
            ("rv", "number") => match raw.parse::<i64>() {
                Ok(n) => self.rv = n,
                Err(_) => self.mistyped(&format!("number {raw}"), "rv", "int64"),
            },
            ("rv", k) => self.mistyped(k, "rv", "int64"),
            (f, "string") => {
                let text: String = serde_json::from_str(raw)?;
                if f == "v" {
                    self.v = text;
                } else {
                    self.start = text;
                }
            }
            (f, k) => self.mistyped(k, f, "string"),
        }
        Ok(())
    }
}

/// The field of kube's `continueToken` a JSON key names under Go's case folding.
fn go_field(key: &str) -> Option<&'static str> {
    let folded: String = key
        .chars()
        .map(|c| {
            if c == '\u{17f}' {
                's'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    ["v", "rv", "start"].into_iter().find(|f| *f == folded)
}

impl<'de> Deserialize<'de> for GoToken {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = GoToken;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<GoToken, A::Error> {
                let mut t = GoToken::default();
                while let Some(key) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    let raw: &'de serde_json::value::RawValue = m.next_value()?;
                    if let Some(field) = go_field(&key) {
                        t.set(field, raw.get()).map_err(serde::de::Error::custom)?;
                    }
                }
                Ok(t)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<GoToken, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(GoToken::top_level("array"))
            }
            fn visit_unit<E>(self) -> Result<GoToken, E> {
                Ok(GoToken::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<GoToken, E> {
                Ok(GoToken::top_level("bool"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<GoToken, E> {
                Ok(GoToken::top_level("number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<GoToken, E> {
                Ok(GoToken::top_level("number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<GoToken, E> {
                Ok(GoToken::top_level("number"))
            }
            fn visit_str<E>(self, _: &str) -> Result<GoToken, E> {
                Ok(GoToken::top_level("string"))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Go's `path.Clean` for rooted paths.
fn clean(p: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    let mut s = format!("/{}", out.join("/"));
    // path.Clean keeps no trailing slash except for the root.
    if s.len() > 1 && s.ends_with('/') {
        s.pop();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_kube_format() {
        let t = ContinueToken::after(42, "default/pod-1");
        let raw = |enc: &str| String::from_utf8(URL_SAFE_NO_PAD.decode(enc).unwrap()).unwrap();
        // The watch cache's spelling (kube 1.36's pages), with the leading slash...
        let enc = t.encode();
        assert_eq!(
            raw(&enc),
            "{\"v\":\"meta.k8s.io/v1\",\"rv\":42,\"start\":\"/default/pod-1\\u0000\"}"
        );
        assert_eq!(ContinueToken::decode(&enc).unwrap(), t);
        // ...and etcd3's, without it: both read back as the same token.
        let storage = t.encode_storage();
        assert_eq!(
            raw(&storage),
            "{\"v\":\"meta.k8s.io/v1\",\"rv\":42,\"start\":\"default/pod-1\\u0000\"}"
        );
        assert_eq!(ContinueToken::decode(&storage).unwrap(), t);
    }

    #[test]
    fn rejects_bad_tokens_with_kube_messages() {
        let enc = |j: &str| URL_SAFE_NO_PAD.encode(j);
        assert!(matches!(
            ContinueToken::decode("!!"),
            Err(ContinueError::Malformed(_))
        ));
        assert_eq!(
            ContinueToken::decode(&enc(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#))
                .unwrap_err()
                .to_string(),
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        );
        assert_eq!(
            ContinueToken::decode(&enc(r#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#)).unwrap_err(),
            ContinueError::EmptyStart
        );
        assert_eq!(
            ContinueToken::decode(&enc(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../x"}"#))
                .unwrap_err(),
            ContinueError::UncleanStart("../x".into())
        );
        assert!(matches!(
            ContinueToken::decode(&enc(r#"{"v":"x","rv":3,"start":"a"}"#)),
            Err(ContinueError::Version(_))
        ));
        assert_eq!(
            ContinueToken::decode(&enc(
                r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"a/b\u0000"}"#
            ))
            .unwrap()
            .rv,
            -1
        );
    }
    /// kube's `DecodeContinue` decodes with Go's `encoding/json`: these tokens are the numbers
    /// and shapes a client can send, each with what kube-apiserver answers (after `invalid
    /// continue token: `).
    #[test]
    fn decodes_numbers_and_shapes_as_gos_encoding_json() {
        let dec = |j: &str| ContinueToken::decode(&URL_SAFE_NO_PAD.encode(j));
        let msg = |j: &str| dec(j).unwrap_err().to_string();
        // rv: negative is "latest", however negative; 0, missing and null are the zero value.
        assert_eq!(
            dec(r#"{"v":"meta.k8s.io/v1","rv":-9223372036854775808,"start":"a"}"#)
                .unwrap()
                .rv,
            i64::MIN
        );
        for j in [
            r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#,
            r#"{"v":"meta.k8s.io/v1","rv":-0,"start":"a"}"#,
            r#"{"v":"meta.k8s.io/v1","start":"a"}"#,
            r#"{"v":"meta.k8s.io/v1","rv":null,"start":"a"}"#,
        ] {
            assert_eq!(dec(j).unwrap_err(), ContinueError::ZeroRv, "{j}");
        }
        // Not an int64: Go's UnmarshalTypeError, with the literal for a number.
        let ty = |what: &str| {
            format!(
                "continue key is not valid: json: cannot unmarshal {what} into Go struct field continueToken.rv of type int64"
            )
        };
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":9223372036854775808,"start":"a"}"#),
            ty("number 9223372036854775808")
        );
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":99999999999999999999999,"start":"a"}"#),
            ty("number 99999999999999999999999")
        );
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":1.5,"start":"a"}"#),
            ty("number 1.5")
        );
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":1e3,"start":"a"}"#),
            ty("number 1e3")
        );
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":"5","start":"a"}"#),
            ty("string")
        );
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":true,"start":"a"}"#),
            ty("bool")
        );
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":[1],"start":"a"}"#),
            ty("array")
        );
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":5,"start":7}"#),
            "continue key is not valid: json: cannot unmarshal number into Go struct field continueToken.start of type string"
        );
        // Go reads the whole document and returns the first type error.
        assert_eq!(msg(r#"{"rv":"x","v":1}"#), ty("string"));
        // Keys fold as Go's do; the last occurrence wins; unknown keys are ignored.
        let t = dec(r#"{"V":"meta.k8s.io/v1","Rv":3,"ſTART":"b","rv":4,"other":[]}"#).unwrap();
        assert_eq!((t.rv, t.start.as_str()), (4, "b"));
        // The version is printed as it is (%v), not quoted.
        assert_eq!(
            msg(r#"{"v":"x","rv":3,"start":"a"}"#),
            "continue key is not valid: server does not recognize this encoded version x"
        );
        assert_eq!(
            msg("null"),
            "continue key is not valid: server does not recognize this encoded version "
        );
        assert_eq!(
            msg("[1,2]"),
            "continue key is not valid: json: cannot unmarshal array into Go value of type storage.continueToken"
        );
        // Start keys: whatever path, as long as it is clean.
        assert_eq!(
            msg(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"a//b"}"#),
            "continue key is not valid: a//b"
        );
    }

    #[test]
    fn decodes_base64_as_gos_raw_url_encoding() {
        let json = r#"{"v":"meta.k8s.io/v1","rv":3,"start":"a"}"#;
        let enc = URL_SAFE_NO_PAD.encode(json);
        // Line breaks are skipped.
        let broken = format!("{}\n{}", &enc[..5], &enc[5..]);
        assert_eq!(ContinueToken::decode(&broken).unwrap().rv, 3);
        // Padding is a bad byte where it stands.
        let padded = URL_SAFE_NO_PAD.encode("{}") + "==";
        assert_eq!(
            ContinueToken::decode(&padded).unwrap_err().to_string(),
            "continue key is not valid: illegal base64 data at input byte 3"
        );
        // Non-zero trailing bits are accepted ("e30" and "e31" both decode to "{}").
        assert!(
            matches!(ContinueToken::decode("e31"), Err(ContinueError::Version(v)) if v.is_empty())
        );
        assert_eq!(
            ContinueToken::decode("e30*").unwrap_err().to_string(),
            "continue key is not valid: illegal base64 data at input byte 3"
        );
    }

    #[test]
    fn json_that_does_not_scan_is_gos_syntax_error() {
        let msg = |raw: &[u8]| ContinueToken::decode(&URL_SAFE_NO_PAD.encode(raw)).unwrap_err();
        assert_eq!(
            msg(b"\x81\x02\x03").to_string(),
            r"continue key is not valid: invalid character '\x81' looking for beginning of value"
        );
        assert_eq!(
            msg(b"{\"v\":\"meta.k8s.io/v1\",").to_string(),
            "continue key is not valid: unexpected end of JSON input"
        );
        // Syntax first, even where a type error comes earlier in the text.
        assert_eq!(
            msg(b"{\"rv\":\"1\"} x").to_string(),
            "continue key is not valid: invalid character 'x' after top-level value"
        );
    }

    /// Go's offsets (kube 1.36 answers `garbage!!` with byte 7): a bad byte where it stands,
    /// before any length check; a lone last symbol at its own offset; line breaks counted.
    #[test]
    fn base64_errors_name_gos_byte_offset() {
        let at = |s: &str| match ContinueToken::decode(s).unwrap_err() {
            ContinueError::Malformed(m) => m,
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(at("garbage!!"), "illegal base64 data at input byte 7");
        assert_eq!(at("!!!"), "illegal base64 data at input byte 0");
        assert_eq!(at("eyJ2Ijoi!"), "illegal base64 data at input byte 8");
        // Nine symbols: the ninth starts a quantum alone.
        assert_eq!(at("abcdefghi"), "illegal base64 data at input byte 8");
        // A line break is skipped but counted in the offset.
        assert_eq!(at("ab\ncd!"), "illegal base64 data at input byte 5");
        assert_eq!(at("abcd\ne"), "illegal base64 data at input byte 5");
        assert_eq!(go_base64_error(b"e30"), None);
        assert_eq!(go_base64_error(b""), None);
    }
}
