//! Fuzz target `continue_token`: `continue` tokens as a client sends them back
//! ([`ContinueToken::decode`], through the list options and the read point as the router
//! reads them) and as watchmux mints them ([`ContinueToken::after`], [`ContinueToken::encode`]).
//!
//! Input: the token (the query parameter's decoded value); the same bytes are also read as a
//! token to mint: a little-endian `i64` resourceVersion (the first 8 bytes) and the last key.
//!
//! Invariants: a decoded token re-encodes to one that decodes to the same token; a refusal is
//! kube's 400 BadRequest `invalid continue token: continue key is not valid: …`; a minted token
//! is URL-safe and decodes to itself whenever its key is one kube would accept (no empty, `.`
//! or `..` segment, not rooted) and its resourceVersion is not 0.

use kube_wire::continue_token::ContinueToken;
use kube_wire::options::ListOptions;
use watchmux::downstream::read_point::ReadPoint;

use crate::status::assert_status;

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        decoded(text);
    }
    if let Some((rv, key)) = data.split_first_chunk::<8>() {
        minted(i64::from_le_bytes(*rv), &String::from_utf8_lossy(key));
    }
}

fn decoded(text: &str) {
    match ContinueToken::decode(text) {
        Ok(t) => {
            assert_ne!(t.rv, 0, "{text:?}: a token at resourceVersion 0 is refused");
            if !t.start.is_empty() {
                assert_eq!(
                    ContinueToken::decode(&t.encode()).as_ref(),
                    Ok(&t),
                    "{text:?} does not survive re-encoding"
                );
            }
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.starts_with("continue key is not valid: "), "{m:?}");
        }
    }
    let opts = ListOptions {
        continue_token: Some(text.to_string()).filter(|t| !t.is_empty()),
        ..ListOptions::default()
    };
    if let Err(s) = opts.continuation() {
        assert_status(&s, 400, "BadRequest", "continuation");
        assert!(
            s.message.starts_with("invalid continue token: "),
            "{:?}",
            s.message
        );
    }
    if let Err(s) = ReadPoint::for_list(&opts) {
        assert_status(&s, 400, "BadRequest", "read point");
    }
}

fn minted(rv: i64, key: &str) {
    let t = ContinueToken::after(rv, key);
    let enc = t.encode();
    assert!(
        enc.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{enc:?} is not unpadded base64url"
    );
    let decoded = ContinueToken::decode(&enc);
    let clean = !t.start.starts_with('/')
        && t.start
            .split('/')
            .all(|seg| !matches!(seg, "" | "." | ".."));
    if rv == 0 {
        assert!(decoded.is_err(), "rv 0 accepted: {decoded:?}");
    } else if clean {
        assert_eq!(decoded.as_ref(), Ok(&t), "minted after {key:?}");
    }
}
