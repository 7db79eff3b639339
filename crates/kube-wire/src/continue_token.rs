//! `continue` tokens in kube-apiserver's format, so a token minted here is accepted by a real
//! apiserver and vice versa: unpadded base64url of `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>"}`
//! where `start` is the last returned key, relative to the request's key prefix, plus `\0`.
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

#[derive(Serialize, Deserialize)]
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
    #[error("continue key is not valid: server does not recognize this encoded version {0:?}")]
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

    /// Encodes as kube does.
    pub fn encode(&self) -> String {
        let wire = Wire {
            v: "meta.k8s.io/v1".into(),
            rv: self.rv,
            start: self.start.clone(),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).expect("token serialises"))
    }

    /// Decodes and validates as kube does.
    pub fn decode(s: &str) -> Result<Self, ContinueError> {
        let data = URL_SAFE_NO_PAD.decode(s).map_err(|e| {
            ContinueError::Malformed(match e {
                // Go's `base64.CorruptInputError` text.
                base64::DecodeError::InvalidByte(at, _) => {
                    format!("illegal base64 data at input byte {at}")
                }
                other => other.to_string(),
            })
        })?;
        let w: Wire =
            serde_json::from_slice(&data).map_err(|e| ContinueError::Malformed(e.to_string()))?;
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
        let enc = t.encode();
        let raw = URL_SAFE_NO_PAD.decode(&enc).unwrap();
        assert_eq!(
            std::str::from_utf8(&raw).unwrap(),
            "{\"v\":\"meta.k8s.io/v1\",\"rv\":42,\"start\":\"default/pod-1\\u0000\"}"
        );
        assert_eq!(ContinueToken::decode(&enc).unwrap(), t);
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
}
