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

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use moka::Expiry;
use moka::future::Cache;
use serde_json::{Value, json};

use crate::auth::PeerAuth;
use crate::config::ServerConfig;
use crate::upstream::Upstream;
use kube_wire::access::{
    AUTHENTICATED, Attributes, Credential, UserInfo, credential, forbidden, unauthorized,
};
use kube_wire::status::Status;

#[derive(Debug, Clone)]
struct Decision {
    allowed: bool,
    reason: String,
}

type TokenResult = Option<UserInfo>;

#[derive(Debug, Clone, Copy)]
struct Ttls {
    allow: Duration,
    deny: Duration,
}

impl Expiry<String, TokenResult> for Ttls {
    fn expire_after_create(&self, _: &String, v: &TokenResult, _: Instant) -> Option<Duration> {
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
    tokens: Cache<String, TokenResult>,
    decisions: Cache<(UserInfo, Attributes), Decision>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

/// Largest review response read.
const MAX_REVIEW: usize = 1 << 20;

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
    ) -> Result<UserInfo, Status> {
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
            Credential::Invalid => return Err(unauthorized()),
            Credential::Token(t) => t,
        };
        let r = self
            .tokens
            .try_get_with(token.clone(), self.token_review(token))
            .await;
        match r {
            Ok(Some(u)) => Ok(u),
            Ok(None) => Err(unauthorized()),
            Err(e) => Err(Status::internal(format!("token review failed: {e}"))),
        }
    }

    /// Whether `user` may do `attrs`.
    pub async fn authorize(&self, user: UserInfo, attrs: &Attributes) -> Result<(), Status> {
        let name = user.user.clone();
        let key = (user, attrs.clone());
        let fut = self.access_review(key.clone());
        match self.decisions.try_get_with(key, fut).await {
            Ok(d) if d.allowed => Ok(()),
            Ok(d) => Err(forbidden(&name, attrs, &d.reason)),
            Err(e) => Err(Status::internal(format!(
                "subject access review failed: {e}"
            ))),
        }
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, String> {
        let mut req = Request::new(
            Full::new(Bytes::from(body.to_string()))
                .map_err(|e| match e {})
                .boxed(),
        );
        *req.method_mut() = Method::POST;
        *req.uri_mut() = path.parse().map_err(|e| format!("{e}"))?;
        req.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        req.headers_mut().insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        let resp = self.upstream.send(req).await.map_err(|e| e.to_string())?;
        let code = resp.status();
        let bytes = Limited::new(resp.into_body(), MAX_REVIEW)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        if !code.is_success() {
            return Err(format!(
                "{path}: HTTP {code}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
            ));
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("{path}: {e}"))
    }

    async fn token_review(&self, token: String) -> Result<TokenResult, String> {
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        let v = self
            .post("/apis/authentication.k8s.io/v1/tokenreviews", body)
            .await?;
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

    async fn access_review(&self, key: (UserInfo, Attributes)) -> Result<Decision, String> {
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
        let v = self
            .post("/apis/authorization.k8s.io/v1/subjectaccessreviews", body)
            .await?;
        let st = &v["status"];
        Ok(Decision {
            allowed: st["allowed"].as_bool() == Some(true) && st["denied"].as_bool() != Some(true),
            reason: st["reason"].as_str().unwrap_or_default().to_string(),
        })
    }
}

/// The shared handle the proxy keeps.
pub type SharedAuthorizer = Arc<Authorizer>;
