//! Who a request to the upstream is made as.
//!
//! **watchmux's own identity** ([`Credentials`]): the token, token file or basic-auth user of its
//! kubeconfig (or the in-cluster service account), plus the client certificate that
//! [`crate::tls`] puts in the rustls config. The reflectors always list and watch as watchmux. A
//! token file is re-read when it changes (checked at most every [`TOKEN_RECHECK`]), so rotated
//! service-account tokens are picked up without a restart.
//!
//! **Pass-through requests** are made as the client, so the upstream authorizes each one as it
//! would have without watchmux in between. [`prepare_pass_through`] applies `server.auth`:
//!
//! | `server.auth` | verified client certificate | client `Authorization` | neither |
//! |---|---|---|---|
//! | `client` (default) | watchmux's credentials + `Impersonate-User`/`-Group` from the certificate | forwarded as it is | watchmux's credentials |
//! | `client-required` | same | forwarded as it is | 401 from watchmux |
//! | `watchmux` | watchmux's credentials | removed; watchmux's credentials | watchmux's credentials |
//!
//! Whenever the request goes with watchmux's credentials, the client's own `Impersonate-*` headers
//! are removed first (they would otherwise be honoured with watchmux's `impersonate` permission).
//! A verified certificate wins over an `Authorization` header, as in kube-apiserver, whose x509
//! authenticator runs before the token authenticators.
//!
//! Owns the credential values and the header policy; it must not send anything (the upstream
//! client does) nor build HTTP answers (a refusal is a [`PassThroughAuthError`], which
//! `crate::error` turns into kube's 401).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use http::header::{AUTHORIZATION, HeaderName};
use http::{HeaderMap, HeaderValue};
use parking_lot::Mutex;

pub use crate::config::AuthMode;
use crate::tls::ClientIdentity;

/// A token file is checked for changes at most this often.
pub const TOKEN_RECHECK: Duration = Duration::from_secs(2);

/// `Impersonate-User`.
pub const IMPERSONATE_USER: HeaderName = HeaderName::from_static("impersonate-user");
/// `Impersonate-Group` (repeated, one per group).
pub const IMPERSONATE_GROUP: HeaderName = HeaderName::from_static("impersonate-group");

/// watchmux's own credentials for the upstream (besides a client certificate).
#[derive(Debug)]
pub struct Credentials {
    kind: Kind,
}

/// Why a credential cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// A token that cannot be sent.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The token file cannot be read.
    #[error("cannot read the token file {}: {error}", path.display())]
    ReadTokenFile {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read (its text is in this error's, so it is not a `source()`).
        error: std::io::Error,
    },
    /// The token file holds a token that cannot be sent.
    #[error("token file {}: {error}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with its token.
        error: TokenError,
    },
    /// The user name and password do not fit in a header.
    #[error("invalid basic-auth credentials")]
    Basic(#[source] http::header::InvalidHeaderValue),
}

/// Why a bearer token cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Nothing but whitespace.
    #[error("the token is empty")]
    Empty,
    /// Characters a header value cannot carry (a newline, say).
    #[error("the token contains characters not allowed in a header")]
    NotAHeaderValue(#[source] http::header::InvalidHeaderValue),
}

#[derive(Debug)]
enum Kind {
    Bearer(HeaderValue),
    BearerFile(TokenFile),
    Basic(HeaderValue, String),
}

#[derive(Debug)]
struct TokenFile {
    path: PathBuf,
    state: Mutex<TokenState>,
}

#[derive(Debug)]
struct TokenState {
    value: HeaderValue,
    stamp: Option<(SystemTime, u64)>,
    checked: Instant,
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The `Basic` value of an `Authorization` or `Proxy-Authorization` header for `user` and
/// `password` (RFC 7617: base64 of `user:password`), marked sensitive.
pub fn basic_header(
    user: &str,
    password: &str,
) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut v = HeaderValue::from_str(&format!("Basic {encoded}"))?;
    v.set_sensitive(true);
    Ok(v)
}

/// The `Authorization: Bearer` value of `token` (trimmed), marked sensitive.
fn bearer_header(token: &str) -> Result<HeaderValue, TokenError> {
    let token = token.trim();
    if token.is_empty() {
        return Err(TokenError::Empty);
    }
    let mut v =
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(TokenError::NotAHeaderValue)?;
    v.set_sensitive(true);
    Ok(v)
}

fn read_token(path: &Path) -> Result<HeaderValue, CredentialsError> {
    let text = std::fs::read_to_string(path).map_err(|error| CredentialsError::ReadTokenFile {
        path: path.to_path_buf(),
        error,
    })?;
    bearer_header(&text).map_err(|error| CredentialsError::TokenFile {
        path: path.to_path_buf(),
        error,
    })
}

impl Credentials {
    /// A fixed bearer token.
    pub fn token(token: &str) -> Result<Credentials, TokenError> {
        Ok(Credentials {
            kind: Kind::Bearer(bearer_header(token)?),
        })
    }

    /// A bearer token read from `path` now and again whenever the file changes.
    pub fn token_file(path: &Path) -> Result<Credentials, CredentialsError> {
        let value = read_token(path)?;
        Ok(Credentials {
            kind: Kind::BearerFile(TokenFile {
                path: path.to_path_buf(),
                state: Mutex::new(TokenState {
                    value,
                    stamp: stamp(path),
                    checked: Instant::now(),
                }),
            }),
        })
    }

    /// HTTP basic authentication.
    pub fn basic(user: &str, password: &str) -> Result<Credentials, CredentialsError> {
        let v = basic_header(user, password).map_err(CredentialsError::Basic)?;
        Ok(Credentials {
            kind: Kind::Basic(v, user.to_string()),
        })
    }

    /// The `Authorization` value to send now.
    pub fn authorization(&self) -> HeaderValue {
        match &self.kind {
            Kind::Bearer(v) | Kind::Basic(v, _) => v.clone(),
            Kind::BearerFile(f) => f.current(),
        }
    }

    /// For the log: what kind of credential this is, never its value.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Bearer(_) => "bearer token".to_string(),
            Kind::BearerFile(f) => format!("bearer token file {}", f.path.display()),
            Kind::Basic(_, user) => format!("basic auth as {user:?}"),
        }
    }
}

impl TokenFile {
    fn current(&self) -> HeaderValue {
        let mut st = self.state.lock();
        if st.checked.elapsed() >= TOKEN_RECHECK {
            st.checked = Instant::now();
            let now = stamp(&self.path);
            if now != st.stamp {
                match read_token(&self.path) {
                    Ok(v) => {
                        st.value = v;
                        st.stamp = now;
                        tracing::info!(path = %self.path.display(), "re-read the upstream token file");
                    }
                    // Mid-rotation or briefly missing: keep the previous token, try again later.
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot re-read the upstream token file; keeping the previous token")
                    }
                }
            }
        }
        st.value.clone()
    }
}

/// What the accept loop knows about a downstream connection, attached to each of its requests
/// as an extension: the `server.auth` mode and the verified client certificate, if any.
#[derive(Debug, Clone, Default)]
pub struct PeerAuth {
    /// `server.auth`.
    pub mode: AuthMode,
    /// The verified client certificate's identity.
    pub identity: Option<Arc<ClientIdentity>>,
}

/// Why a pass-through request cannot be made as the client.
#[derive(Debug, thiserror::Error)]
pub enum PassThroughAuthError {
    /// `server.auth = "client-required"` and the client sent neither a verified certificate nor
    /// an `Authorization` header.
    #[error("no client credentials")]
    NoClientCredentials,
    /// A subject CN or O of the verified client certificate cannot be a header value.
    #[error(
        "the client certificate's subject {subject:?} cannot be sent as an impersonation header"
    )]
    SubjectNotAHeaderValue {
        /// The CN or O value.
        subject: String,
        /// Why it is not a header value.
        #[source]
        source: http::header::InvalidHeaderValue,
    },
}

/// Removes every `Impersonate-*` header.
fn strip_impersonation(headers: &mut HeaderMap) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("impersonate-"))
        .cloned()
        .collect();
    for n in names {
        headers.remove(n);
    }
}

/// Applies `server.auth` to a pass-through request's headers (see the module docs). Without a
/// [`PeerAuth`] the request is treated as coming in `client` mode without a certificate. An
/// `Authorization` header left on the request is the client's own; when there is none, the
/// upstream client adds watchmux's. `Err` says why the request cannot go (kube's 401).
pub fn prepare_pass_through(
    headers: &mut HeaderMap,
    peer: Option<&PeerAuth>,
) -> Result<(), PassThroughAuthError> {
    let mode = peer.map(|p| p.mode).unwrap_or_default();
    let identity = peer.and_then(|p| p.identity.as_deref());
    if mode == AuthMode::Watchmux {
        headers.remove(AUTHORIZATION);
        strip_impersonation(headers);
        return Ok(());
    }
    if let Some(id) = identity {
        headers.remove(AUTHORIZATION);
        strip_impersonation(headers);
        let value = |s: &str| {
            HeaderValue::from_bytes(s.as_bytes()).map_err(|source| {
                PassThroughAuthError::SubjectNotAHeaderValue {
                    subject: s.to_string(),
                    source,
                }
            })
        };
        headers.insert(IMPERSONATE_USER, value(&id.user)?);
        for g in &id.groups {
            headers.append(IMPERSONATE_GROUP, value(g)?);
        }
        return Ok(());
    }
    if headers.contains_key(AUTHORIZATION) {
        return Ok(());
    }
    if mode == AuthMode::ClientRequired {
        return Err(PassThroughAuthError::NoClientCredentials);
    }
    strip_impersonation(headers);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn peer(mode: AuthMode, id: Option<(&str, &[&str])>) -> PeerAuth {
        PeerAuth {
            mode,
            identity: id.map(|(u, g)| {
                Arc::new(ClientIdentity {
                    user: u.to_string(),
                    groups: g.iter().map(|s| s.to_string()).collect(),
                })
            }),
        }
    }

    fn all(h: &HeaderMap, name: &str) -> Vec<String> {
        h.get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn client_mode_forwards_the_clients_token_and_its_impersonation() {
        let mut h = headers(&[("authorization", "Bearer c"), ("impersonate-user", "bob")]);
        prepare_pass_through(&mut h, Some(&peer(AuthMode::Client, None))).unwrap();
        assert_eq!(all(&h, "authorization"), ["Bearer c"]);
        assert_eq!(all(&h, "impersonate-user"), ["bob"]);
    }

    #[test]
    fn anonymous_requests_lose_their_impersonation_headers() {
        let mut h = headers(&[
            ("impersonate-user", "admin"),
            ("impersonate-group", "system:masters"),
            ("impersonate-extra-x", "y"),
        ]);
        prepare_pass_through(&mut h, None).unwrap();
        assert!(h.is_empty(), "{h:?}");
        let mut h = HeaderMap::new();
        let e = kube_wire::status::Status::from(
            prepare_pass_through(&mut h, Some(&peer(AuthMode::ClientRequired, None))).unwrap_err(),
        );
        assert_eq!(e.code, 401);
    }

    #[test]
    fn a_certificate_becomes_impersonation() {
        let mut h = headers(&[
            ("authorization", "Bearer c"),
            ("impersonate-user", "admin"),
            ("accept", "application/json"),
        ]);
        let p = peer(AuthMode::ClientRequired, Some(("alice", &["dev", "ops"])));
        prepare_pass_through(&mut h, Some(&p)).unwrap();
        assert_eq!(all(&h, "authorization"), Vec::<String>::new());
        assert_eq!(all(&h, "impersonate-user"), ["alice"]);
        assert_eq!(all(&h, "impersonate-group"), ["dev", "ops"]);
        assert_eq!(all(&h, "accept"), ["application/json"]);
    }

    #[test]
    fn watchmux_mode_drops_client_credentials() {
        let mut h = headers(&[("authorization", "Bearer c"), ("impersonate-user", "admin")]);
        let p = peer(AuthMode::Watchmux, Some(("alice", &[])));
        prepare_pass_through(&mut h, Some(&p)).unwrap();
        assert!(h.is_empty(), "{h:?}");
    }

    #[test]
    fn token_file_is_re_read_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "one\n").unwrap();
        let c = Credentials::token_file(&path).unwrap();
        assert_eq!(c.authorization(), "Bearer one");
        std::fs::write(&path, "two-two\n").unwrap();
        // Not before the recheck interval…
        assert_eq!(c.authorization(), "Bearer one");
        if let Kind::BearerFile(f) = &c.kind {
            f.state.lock().checked -= TOKEN_RECHECK;
        }
        // …then the new token.
        assert_eq!(c.authorization(), "Bearer two-two");
        // A file that vanishes keeps the last good token.
        std::fs::remove_file(&path).unwrap();
        if let Kind::BearerFile(f) = &c.kind {
            f.state.lock().checked -= TOKEN_RECHECK;
        }
        assert_eq!(c.authorization(), "Bearer two-two");
        assert!(c.describe().contains("token file"));
    }

    #[test]
    fn bad_tokens_are_errors() {
        assert!(Credentials::token("  ").is_err());
        assert!(Credentials::token("a\nb").is_err());
        assert!(
            Credentials::token_file(Path::new("/nonexistent/token"))
                .unwrap_err()
                .to_string()
                .contains("/nonexistent/token")
        );
        assert_eq!(
            Credentials::basic("u", "p").unwrap().authorization(),
            "Basic dTpw"
        );
    }
}
