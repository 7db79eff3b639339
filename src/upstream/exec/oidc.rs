//! The `oidc` auth-provider of a kubeconfig user, as client-go's (removed from kubectl's
//! defaults but still in client-go) keeps it: the user's `id-token` is the bearer token while
//! its `exp` claim (read without verifying the JWT's signature, as client-go does) is more than
//! [`EXPIRY_DELTA`] away; then the `refresh-token` buys a new one from the issuer: OpenID
//! discovery (`<idp-issuer-url>/.well-known/openid-configuration` → `token_endpoint`), then a
//! `grant_type=refresh_token` POST there with `client-id`/`client-secret` (HTTP basic
//! authentication first, then in the form, as Go's oauth2 package tries them), over TLS verified
//! against `idp-certificate-authority(-data)` or the system's roots.
//!
//! [`Oidc::run`] is one such step; when it runs, how its failures are retried and how requests
//! use its token is [`super::ExecCredentials`]'s business (shared with exec plugins). The new
//! id-token (and a rotated refresh token) are kept in memory only: unlike client-go, watchmux
//! never writes the kubeconfig.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use parking_lot::Mutex;

use super::Credential;
use crate::tls::{ServerTrust, certs_from_pem};

/// An id-token is renewed when its `exp` is this close (client-go's `expiryDelta`).
pub const EXPIRY_DELTA: Duration = Duration::from_secs(10);

/// Discovery and the token request together must answer within this.
pub const REFRESH_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this much of an issuer's answer is read.
const MAX_ANSWER: usize = 1 << 20;

/// At most this much of a refused answer goes into the error.
const MAX_QUOTED: usize = 200;

/// The config keys (client-go's names).
pub const ID_TOKEN: &str = "id-token";
/// See [`ID_TOKEN`].
pub const REFRESH_TOKEN: &str = "refresh-token";
/// See [`ID_TOKEN`].
pub const ISSUER_URL: &str = "idp-issuer-url";
/// See [`ID_TOKEN`].
pub const CLIENT_ID: &str = "client-id";
/// See [`ID_TOKEN`].
pub const CLIENT_SECRET: &str = "client-secret";
/// See [`ID_TOKEN`].
pub const EXTRA_SCOPES: &str = "extra-scopes";

/// A kubeconfig user with the `oidc` auth-provider, as the kubeconfig gives it.
#[derive(Clone)]
pub struct OidcUser {
    /// The user entry's name.
    pub user: String,
    /// The auth-provider's `config`.
    pub config: HashMap<String, String>,
    /// `idp-certificate-authority-data` decoded, or the file `idp-certificate-authority` read.
    pub ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for OidcUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config holds secrets: its keys only.
        let mut keys: Vec<&str> = self.config.keys().map(String::as_str).collect();
        keys.sort_unstable();
        f.debug_struct("OidcUser")
            .field("user", &self.user)
            .field("config_keys", &keys)
            .finish_non_exhaustive()
    }
}

/// Why a user's `oidc` auth-provider cannot be used (found at start-up).
#[derive(Debug, thiserror::Error)]
#[error("user {user:?}: auth-provider oidc: {problem}")]
pub struct OidcConfigError {
    /// The kubeconfig's user entry.
    pub user: String,
    /// What is wrong.
    pub problem: OidcConfigProblem,
}

/// What is wrong with an `oidc` auth-provider's config.
#[derive(Debug, thiserror::Error)]
pub enum OidcConfigProblem {
    /// A required key is missing or empty.
    #[error("{0} must be specified")]
    Missing(&'static str),
    /// Neither token.
    #[error("it has neither an id-token nor a refresh-token: log in again (e.g. with kubelogin)")]
    NoTokens,
    /// The id-token is no JWT with a usable `exp`.
    #[error("id-token: {0}")]
    IdToken(JwtError),
    /// The issuer URL is not an http(s) URL.
    #[error("{ISSUER_URL} {0:?} is not an http(s) URL")]
    IssuerUrl(String),
    /// The issuer's CA certificates are unusable.
    #[error("idp-certificate-authority: {0}")]
    CertificateAuthority(crate::tls::PemError),
    /// The TLS client config cannot be built.
    #[error("{0}")]
    Tls(crate::tls::ClientConfigError),
}

/// Why a token is not a JWT whose expiry can be read.
#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    /// Not three dot-separated parts.
    #[error("not a JWT (three dot-separated parts)")]
    NotJwt,
    /// The payload is not base64url.
    #[error("its payload is not base64url: {0}")]
    Payload(base64::DecodeError),
    /// The payload is not a JSON object with a numeric `exp`.
    #[error("its payload has no numeric exp claim")]
    NoExpiry,
    /// It cannot be sent in a header.
    #[error("it cannot be sent in an Authorization header")]
    Header,
}

/// Why one refresh gave no id-token. Its text names the kubeconfig, user and issuer, then the
/// problem; [`std::error::Error::source`] is the problem's own cause, never the problem again.
#[derive(Debug)]
pub struct OidcError {
    origin: String,
    issuer: String,
    problem: OidcProblem,
}

impl OidcError {
    /// What went wrong.
    pub fn problem(&self) -> &OidcProblem {
        &self.problem
    }
}

impl std::fmt::Display for OidcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: oidc auth-provider, issuer {}: {}",
            self.origin, self.issuer, self.problem
        )
    }
}

impl std::error::Error for OidcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.problem.source()
    }
}

/// What went wrong in one refresh.
#[derive(Debug, thiserror::Error)]
pub enum OidcProblem {
    /// The id-token expired and there is no refresh token.
    #[error("no valid id-token, and no refresh-token to renew it: log in again")]
    NoRefreshToken,
    /// A URL (the discovery document's, or its `token_endpoint`) is unusable.
    #[error("{0:?} is not a usable URL")]
    Url(String),
    /// The issuer could not be reached.
    #[error("cannot reach {url}")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// Cause.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// Its answer could not be read.
    #[error("cannot read the answer of {url}")]
    Read {
        /// The URL asked.
        url: String,
        /// Cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// It answered with an error status.
    #[error("{url} answered {status}: {body:?}")]
    Refused {
        /// The URL asked.
        url: String,
        /// Its status.
        status: StatusCode,
        /// The start of its answer.
        body: String,
    },
    /// Its answer is not the JSON expected.
    #[error("the answer of {url} is not JSON")]
    Json {
        /// The URL asked.
        url: String,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// The discovery document names no token endpoint.
    #[error("its discovery document {0} has no token_endpoint")]
    NoTokenEndpoint(String),
    /// The token answer has no access token (Go's oauth2 refuses it too).
    #[error("the answer of {0} has no access_token")]
    NoAccessToken(String),
    /// The token answer has no id-token.
    #[error(
        "the answer of {0} has no id_token: either the scope \"openid\" was not requested at \
         login, or the issuer gives no id_token when refreshing"
    )]
    NoIdToken(String),
    /// The id-token it gave cannot be used.
    #[error("the id_token it gave: {0}")]
    IdToken(JwtError),
    /// The id-token it gave has (nearly) expired.
    #[error("the id_token it gave expires at {0} (unix time), within {EXPIRY_DELTA:?}")]
    Expired(u64),
    /// No answer in time.
    #[error("no answer within {}s", REFRESH_TIMEOUT.as_secs())]
    Timeout,
}

/// How the client id and secret go to the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AuthStyle {
    Header,
    Params,
}

#[derive(Default)]
struct Tokens {
    /// The kubeconfig's id-token, until it has been handed out once.
    initial: Option<String>,
    refresh: Option<String>,
    /// The way of sending the client's credentials that the token endpoint accepted.
    style: Option<AuthStyle>,
}

/// A kubeconfig user's `oidc` auth-provider (see the module doc).
pub struct Oidc {
    origin: String,
    issuer: String,
    client_id: String,
    client_secret: String,
    tokens: Mutex<Tokens>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("origin", &self.origin)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl Oidc {
    /// The provider of `user` (configured in `origin`); checks the config, reads no network.
    pub fn new(user: &OidcUser, origin: &str) -> Result<Oidc, OidcConfigError> {
        let fail = |problem| OidcConfigError {
            user: user.user.clone(),
            problem,
        };
        let get = |k: &str| user.config.get(k).filter(|v| !v.is_empty()).cloned();
        let issuer = get(ISSUER_URL).ok_or_else(|| fail(OidcConfigProblem::Missing(ISSUER_URL)))?;
        let client_id =
            get(CLIENT_ID).ok_or_else(|| fail(OidcConfigProblem::Missing(CLIENT_ID)))?;
        let id_token = get(ID_TOKEN);
        let refresh = get(REFRESH_TOKEN);
        if id_token.is_none() && refresh.is_none() {
            return Err(fail(OidcConfigProblem::NoTokens));
        }
        if let Some(t) = &id_token {
            expiry(t).map_err(|e| fail(OidcConfigProblem::IdToken(e)))?;
        }
        match issuer.parse::<http::Uri>() {
            Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) => {}
            _ => return Err(fail(OidcConfigProblem::IssuerUrl(issuer))),
        }
        if get(EXTRA_SCOPES).is_some() {
            tracing::info!(%origin, "the oidc auth-provider's extra-scopes is not sent when refreshing (as in client-go)");
        }
        let trust = match &user.ca_pem {
            Some(pem) => ServerTrust::Roots(
                certs_from_pem(pem)
                    .map_err(|e| fail(OidcConfigProblem::CertificateAuthority(e)))?,
            ),
            None => ServerTrust::System,
        };
        let tls = crate::tls::client_config(&trust, None, &[])
            .map_err(|e| fail(OidcConfigProblem::Tls(e)))?;
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Oidc {
            origin: origin.to_string(),
            issuer,
            client_id,
            client_secret: get(CLIENT_SECRET).unwrap_or_default(),
            tokens: Mutex::new(Tokens {
                initial: id_token,
                refresh,
                style: None,
            }),
            client,
        })
    }

    /// Where it is configured: `upstream.kubeconfig (…), context …, user "…"`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The issuer URL.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// A usable id-token: the kubeconfig's the first time, if it has not expired; else a new
    /// one, bought with the refresh token.
    pub async fn run(&self) -> Result<Credential, OidcError> {
        let initial = self.tokens.lock().initial.take();
        if let Some(t) = initial
            && let Ok(c) = credential(&t)
        {
            return Ok(c);
        }
        let fail = |problem| OidcError {
            origin: self.origin.clone(),
            issuer: self.issuer.clone(),
            problem,
        };
        match tokio::time::timeout(REFRESH_TIMEOUT, self.refresh()).await {
            Ok(r) => r.map_err(fail),
            Err(_) => Err(fail(OidcProblem::Timeout)),
        }
    }

    async fn refresh(&self) -> Result<Credential, OidcProblem> {
        let refresh = self
            .tokens
            .lock()
            .refresh
            .clone()
            .ok_or(OidcProblem::NoRefreshToken)?;
        let discovery = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let doc = self.exchange(Method::GET, &discovery, None, None).await?;
        let endpoint = doc
            .get("token_endpoint")
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| OidcProblem::NoTokenEndpoint(discovery.clone()))?
            .to_string();
        let style = self.tokens.lock().style;
        let styles: &[AuthStyle] = match style {
            Some(AuthStyle::Header) => &[AuthStyle::Header],
            Some(AuthStyle::Params) => &[AuthStyle::Params],
            None => &[AuthStyle::Header, AuthStyle::Params],
        };
        let mut result = Err(OidcProblem::Timeout);
        for &s in styles {
            result = self.token_request(&endpoint, &refresh, s).await;
            if result.is_ok() {
                self.tokens.lock().style = Some(s);
                break;
            }
        }
        let answer = result?;
        if answer
            .get("access_token")
            .and_then(|v| v.as_str())
            .is_none_or(str::is_empty)
        {
            return Err(OidcProblem::NoAccessToken(endpoint));
        }
        let id_token = answer
            .get("id_token")
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| OidcProblem::NoIdToken(endpoint.clone()))?;
        let exp = expiry(id_token).map_err(OidcProblem::IdToken)?;
        let c = credential(id_token).map_err(|e| match e {
            Some(e) => OidcProblem::IdToken(e),
            None => OidcProblem::Expired(exp),
        })?;
        if let Some(r) = answer
            .get("refresh_token")
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
        {
            self.tokens.lock().refresh = Some(r.to_string());
        }
        Ok(c)
    }

    /// The refresh-token grant, with the client's credentials sent as `style`.
    async fn token_request(
        &self,
        endpoint: &str,
        refresh: &str,
        style: AuthStyle,
    ) -> Result<serde_json::Value, OidcProblem> {
        let (body, basic) = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "refresh_token");
            form.append_pair("refresh_token", refresh);
            let mut basic = None;
            match style {
                AuthStyle::Params => {
                    form.append_pair("client_id", &self.client_id);
                    if !self.client_secret.is_empty() {
                        form.append_pair("client_secret", &self.client_secret);
                    }
                }
                AuthStyle::Header => {
                    // RFC 6749 2.3.1: each is form-encoded before the basic encoding.
                    let enc =
                        |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                    let v =
                        crate::auth::basic_header(&enc(&self.client_id), &enc(&self.client_secret))
                            .map_err(|_| OidcProblem::Url(endpoint.to_string()))?;
                    basic = Some(v);
                }
            }
            (form.finish(), basic)
        };
        self.exchange(Method::POST, endpoint, Some(body), basic)
            .await
    }

    /// One request to the issuer; its JSON answer.
    async fn exchange(
        &self,
        method: Method,
        url: &str,
        form: Option<String>,
        authorization: Option<HeaderValue>,
    ) -> Result<serde_json::Value, OidcProblem> {
        let uri = url
            .parse::<http::Uri>()
            .ok()
            .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
            .ok_or_else(|| OidcProblem::Url(url.to_string()))?;
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header(ACCEPT, "application/json");
        if form.is_some() {
            req = req.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        if let Some(a) = authorization {
            req = req.header(AUTHORIZATION, a);
        }
        let req = req
            .body(Full::new(Bytes::from(form.unwrap_or_default())))
            .map_err(|_| OidcProblem::Url(url.to_string()))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|source| OidcProblem::Unreachable {
                url: url.to_string(),
                source,
            })?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|source| OidcProblem::Read {
                url: url.to_string(),
                source,
            })?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let mut quoted: String = text.chars().take(MAX_QUOTED).collect();
            if quoted.len() < text.len() {
                quoted.push('…');
            }
            return Err(OidcProblem::Refused {
                url: url.to_string(),
                status,
                body: quoted,
            });
        }
        serde_json::from_slice(&body).map_err(|source| OidcProblem::Json {
            url: url.to_string(),
            source,
        })
    }
}

/// The `exp` claim of a JWT, unix seconds (its signature is not verified: the upstream does).
pub fn expiry(jwt: &str) -> Result<u64, JwtError> {
    let mut parts = jwt.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::NotJwt);
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(JwtError::Payload)?;
    let claims: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| JwtError::NoExpiry)?;
    let exp = claims.get("exp").ok_or(JwtError::NoExpiry)?;
    exp.as_u64()
        .or_else(|| exp.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        .ok_or(JwtError::NoExpiry)
}

/// `jwt` as a credential usable until [`EXPIRY_DELTA`] before its `exp`; `Err(None)` when that
/// has passed.
fn credential(jwt: &str) -> Result<Credential, Option<JwtError>> {
    let exp = expiry(jwt).map_err(Some)?;
    let expires = UNIX_EPOCH + Duration::from_secs(exp) - EXPIRY_DELTA;
    if expires <= SystemTime::now() {
        return Err(None);
    }
    let mut v =
        HeaderValue::from_str(&format!("Bearer {jwt}")).map_err(|_| Some(JwtError::Header))?;
    v.set_sensitive(true);
    Ok(Credential {
        authorization: Some(v),
        certificate: None,
        expires: Some(expires),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &str) -> String {
        let e = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", e("{\"alg\":\"none\"}"), e(claims))
    }

    #[test]
    fn the_expiry_is_read_from_the_payload() {
        assert_eq!(expiry(&jwt("{\"exp\":1700000000}")).unwrap(), 1700000000);
        assert_eq!(expiry(&jwt("{\"exp\":1700000000.5}")).unwrap(), 1700000000);
        assert!(matches!(expiry("a.b"), Err(JwtError::NotJwt)));
        assert!(matches!(expiry("a.!!.c"), Err(JwtError::Payload(_))));
        assert!(matches!(
            expiry(&jwt("{\"sub\":\"x\"}")),
            Err(JwtError::NoExpiry)
        ));
        // Within EXPIRY_DELTA of its exp, a token is no longer used.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(matches!(
            credential(&jwt(&format!("{{\"exp\":{}}}", now + 5))),
            Err(None)
        ));
        let c = credential(&jwt(&format!("{{\"exp\":{}}}", now + 600))).unwrap();
        assert!(c.expires.unwrap() > SystemTime::now());
    }
}
