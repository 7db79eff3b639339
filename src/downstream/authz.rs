//! `server.authz = "delegated"`: who may read what the cache answers.
//!
//! Every request the cache answers (LIST and WATCH of a cached resource) is first authenticated
//! and then authorized through the upstream, as kube-apiserver's delegated authn/authz does:
//!
//! * **identity**: a verified client certificate ([`PeerAuth`]: user = CN, groups = O), else a
//!   bearer token (the `Authorization` header, or the websocket subprotocol
//!   `base64url.bearer.authorization.k8s.io.<token>`) sent in a TokenReview, else
//!   `system:anonymous` / `system:unauthenticated`. A token the upstream rejects gets kube's 401.
//! * **authorization**: a SubjectAccessReview with the identity and the request's resource
//!   attributes (verb `list` or `watch`, group, version, resource, namespace, and the name of a
//!   `metadata.name` field selector or legacy watch path). Denied: kube's 403.
//!
//! Both reviews are made with watchmux's own credentials. Their results are cached (moka): allow
//! and deny with their own TTLs, bounded in size, keyed on the token or on identity + attributes;
//! concurrent misses for one key make a single review. Upstream failures are not cached.
//!
//! Owns the reviews and their caches. Failures are [`AuthzError`]s (`crate::error` makes them
//! kube's 401, 403 or 500); it must not build answers, nor look at pass-through requests (the
//! upstream authorizes those itself, with the client's own credentials).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Limited};
use moka::Expiry;
use moka::future::Cache;
use serde_json::{Value, json};

use crate::auth::PeerAuth;
use crate::config::ServerConfig;
use crate::upstream::{Upstream, UpstreamError};
use kube_wire::access::{AUTHENTICATED, Attributes, Credential, UserInfo, credential};
use kube_wire::response::full;
use kube_wire::status::Status;

/// Why a request the cache would answer is not let through.
#[derive(Debug, thiserror::Error)]
pub enum AuthzError {
    /// The `Authorization` header or the websocket bearer subprotocol is malformed.
    #[error("the bearer credential is malformed")]
    MalformedCredential,
    /// The upstream's TokenReview did not authenticate the token.
    #[error("the token is not authenticated by the upstream's TokenReview")]
    TokenNotAuthenticated,
    /// The upstream's SubjectAccessReview did not allow the request.
    #[error(
        "{user:?} may not {} {}: denied by the SubjectAccessReview",
        .attributes.verb,
        .attributes.resource
    )]
    Forbidden {
        /// Who asked.
        user: String,
        /// What was asked for.
        attributes: Box<Attributes>,
        /// The authorizer's reason (may be empty).
        reason: String,
    },
    /// The TokenReview failed (no verdict).
    #[error("token review failed: {0}")]
    TokenReview(#[source] Arc<ReviewError>),
    /// The SubjectAccessReview failed (no verdict).
    #[error("subject access review failed: {0}")]
    AccessReview(#[source] Arc<ReviewError>),
}

/// Why a TokenReview or SubjectAccessReview gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The review could not be sent, or no answer came.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The answer's body could not be read, or is larger than [`MAX_REVIEW_BYTES`].
    #[error("{0}")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The upstream answered with an error (not 2xx).
    #[error("{path}: HTTP {code}: {excerpt}")]
    Refused {
        /// The review's path.
        path: &'static str,
        /// The HTTP status.
        code: StatusCode,
        /// The start of the body, as text.
        excerpt: String,
        /// The body as a kube Status, when it is one.
        #[source]
        status: Option<Status>,
    },
    /// A 2xx answer whose body is not JSON.
    #[error("{path}: {source}")]
    Malformed {
        /// The review's path.
        path: &'static str,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

#[derive(Debug, Clone)]
struct Decision {
    allowed: bool,
    reason: String,
}

/// A TokenReview's verdict: who the token belongs to, or `None` when it is not authenticated.
type TokenVerdict = Option<UserInfo>;

#[derive(Debug, Clone, Copy)]
struct Ttls {
    allow: Duration,
    deny: Duration,
}

impl Expiry<String, TokenVerdict> for Ttls {
    fn expire_after_create(&self, _: &String, v: &TokenVerdict, _: Instant) -> Option<Duration> {
        Some(if v.is_some() { self.allow } else { self.deny })
    }
}

impl Expiry<(UserInfo, Attributes), Decision> for Ttls {
    fn expire_after_create(
        &self,
        _: &(UserInfo, Attributes),
        v: &Decision,
        _: Instant,
    ) -> Option<Duration> {
        Some(if v.allowed { self.allow } else { self.deny })
    }
}

/// Delegated authentication and authorization with cached results.
pub struct Authorizer {
    upstream: Upstream,
    tokens: Cache<String, TokenVerdict>,
    decisions: Cache<(UserInfo, Attributes), Decision>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

/// Largest review response read.
pub const MAX_REVIEW_BYTES: usize = 1 << 20;

/// Bytes of a refused review's body kept in [`ReviewError::Refused`]'s text.
const EXCERPT_BYTES: usize = 512;

/// Where TokenReviews are posted.
const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// Where SubjectAccessReviews are posted.
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

impl Authorizer {
    /// From `[server]`'s `authz_*` keys; reviews go to `upstream` as watchmux.
    pub fn new(upstream: Upstream, server: &ServerConfig) -> Authorizer {
        let ttls = Ttls {
            allow: server.authz_allow_ttl,
            deny: server.authz_deny_ttl,
        };
        Authorizer {
            upstream,
            tokens: Cache::builder()
                .max_capacity(server.authz_cache_size)
                .expire_after(ttls)
                .build(),
            decisions: Cache::builder()
                .max_capacity(server.authz_cache_size)
                .expire_after(ttls)
                .build(),
        }
    }

    /// Who the request is made by.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerAuth>,
    ) -> Result<UserInfo, AuthzError> {
        if let Some(id) = peer.and_then(|p| p.identity.as_deref()) {
            let mut groups = id.groups.clone();
            groups.push(AUTHENTICATED.to_string());
            return Ok(UserInfo {
                user: id.user.clone(),
                groups,
                uid: String::new(),
            });
        }
        let token = match credential(headers) {
            Credential::None => return Ok(UserInfo::anonymous()),
            Credential::Invalid => return Err(AuthzError::MalformedCredential),
            Credential::Token(t) => t,
        };
        let r = self
            .tokens
            .try_get_with(token.clone(), self.token_review(token))
            .await;
        match r {
            Ok(Some(u)) => Ok(u),
            Ok(None) => Err(AuthzError::TokenNotAuthenticated),
            Err(e) => Err(AuthzError::TokenReview(e)),
        }
    }

    /// Whether `user` may do `attrs`.
    pub async fn authorize(&self, user: UserInfo, attrs: &Attributes) -> Result<(), AuthzError> {
        let name = user.user.clone();
        let key = (user, attrs.clone());
        let fut = self.access_review(key.clone());
        match self.decisions.try_get_with(key, fut).await {
            Ok(d) if d.allowed => Ok(()),
            Ok(d) => Err(AuthzError::Forbidden {
                user: name,
                attributes: Box::new(attrs.clone()),
                reason: d.reason,
            }),
            Err(e) => Err(AuthzError::AccessReview(e)),
        }
    }

    /// Posts a review to `path` as watchmux and returns the answer's JSON.
    async fn review(&self, path: &'static str, body: Value) -> Result<Value, ReviewError> {
        let mut req = Request::new(full(body.to_string()));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = Uri::from_static(path);
        req.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        req.headers_mut().insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        let resp = self.upstream.send(req).await?;
        let code = resp.status();
        let bytes = Limited::new(resp.into_body(), MAX_REVIEW_BYTES)
            .collect()
            .await
            .map_err(ReviewError::Body)?
            .to_bytes();
        if !code.is_success() {
            return Err(ReviewError::Refused {
                path,
                code,
                excerpt: String::from_utf8_lossy(&bytes[..bytes.len().min(EXCERPT_BYTES)])
                    .into_owned(),
                status: Status::parse(&bytes, code.as_u16()).ok(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| ReviewError::Malformed { path, source })
    }

    async fn token_review(&self, token: String) -> Result<TokenVerdict, ReviewError> {
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        let v = self.review(TOKEN_REVIEWS, body).await?;
        let st = &v["status"];
        if st["authenticated"].as_bool() != Some(true) {
            return Ok(None);
        }
        let u = &st["user"];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|g| g.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(Some(UserInfo {
            user: u["username"].as_str().unwrap_or_default().to_string(),
            groups: strings(&u["groups"]),
            uid: u["uid"].as_str().unwrap_or_default().to_string(),
        }))
    }

    async fn access_review(&self, key: (UserInfo, Attributes)) -> Result<Decision, ReviewError> {
        let (u, a) = key;
        let mut ra = json!({
            "verb": a.verb,
            "group": a.group,
            "version": a.version,
            "resource": a.resource,
        });
        for (k, v) in [
            ("subresource", &a.subresource),
            ("namespace", &a.namespace),
            ("name", &a.name),
        ] {
            if !v.is_empty() {
                ra[k] = json!(v);
            }
        }
        let mut spec = json!({"user": u.user, "groups": u.groups, "resourceAttributes": ra});
        if !u.uid.is_empty() {
            spec["uid"] = json!(u.uid);
        }
        let body = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        });
        let v = self.review(ACCESS_REVIEWS, body).await?;
        let st = &v["status"];
        Ok(Decision {
            allowed: st["allowed"].as_bool() == Some(true) && st["denied"].as_bool() != Some(true),
            reason: st["reason"].as_str().unwrap_or_default().to_string(),
        })
    }
}
