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

use base64::Engine;
use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, SEC_WEBSOCKET_PROTOCOL};
use http::{HeaderMap, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use moka::Expiry;
use moka::future::Cache;
use serde_json::{Value, json};

use crate::auth::PeerAuth;
use crate::config::ServerConfig;
use crate::status::{Status, StatusDetails, group_resource};
use crate::upstream::Upstream;

/// The websocket subprotocol prefix that carries a bearer token (kube's websocket authenticator).
pub const WS_BEARER_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// `system:anonymous`.
pub const ANONYMOUS: &str = "system:anonymous";
/// `system:unauthenticated`.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// `system:authenticated`, added to every authenticated identity.
pub const AUTHENTICATED: &str = "system:authenticated";

/// Who a request is made by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// User name.
    pub user: String,
    /// Groups.
    pub groups: Vec<String>,
    /// UID (empty when unknown).
    pub uid: String,
}

impl UserInfo {
    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            user: ANONYMOUS.to_string(),
            groups: vec![UNAUTHENTICATED.to_string()],
            uid: String::new(),
        }
    }
}

/// The resource attributes of a request (kube's `authorizer.Attributes` for resource requests).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Attributes {
    /// `list`, `watch`, `get`, ...
    pub verb: String,
    /// API group, `""` for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource, empty for none.
    pub subresource: String,
    /// Namespace, empty for all namespaces / cluster scope.
    pub namespace: String,
    /// Object name, empty for none.
    pub name: String,
}

/// What a bearer request looks like (kube's `bearertoken` and websocket authenticators).
#[derive(Debug, PartialEq, Eq)]
pub enum Credential {
    /// No credentials at all: anonymous.
    None,
    /// A bearer token.
    Token(String),
    /// An `Authorization` header that is not a usable bearer token: 401.
    Invalid,
}

/// The credential a request carries (the certificate, if any, is the caller's business).
pub fn credential(headers: &HeaderMap) -> Credential {
    if let Some(v) = headers.get(AUTHORIZATION) {
        let Ok(v) = v.to_str() else {
            return Credential::Invalid;
        };
        let mut parts = v.trim().splitn(2, ' ');
        let scheme = parts.next().unwrap_or_default();
        let token = parts.next().unwrap_or_default().trim();
        if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
            return Credential::Invalid;
        }
        return Credential::Token(token.to_string());
    }
    // kube reads the subprotocol only on websocket upgrade requests.
    let upgrade = headers
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"));
    if !upgrade {
        return Credential::None;
    }
    for v in headers.get_all(SEC_WEBSOCKET_PROTOCOL) {
        let Ok(v) = v.to_str() else { continue };
        for p in v.split(',').map(str::trim) {
            if let Some(enc) = p.strip_prefix(WS_BEARER_PREFIX) {
                return match base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(enc.trim_end_matches('='))
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .filter(|t| !t.is_empty())
                {
                    Some(t) => Credential::Token(t),
                    None => Credential::Invalid,
                };
            }
        }
    }
    Credential::None
}

/// kube's 401 for a rejected credential.
pub fn unauthorized() -> Status {
    Status::new(401, "Unauthorized", "Unauthorized")
}

/// kube's 403 for a denied resource request (`responsewriters.ForbiddenStatusError`), `reason`
/// being the authorizer's reason (appended as `: "<reason>"` when not empty).
pub fn forbidden(user: &str, a: &Attributes, reason: &str) -> Status {
    let mut resource = a.resource.clone();
    if !a.subresource.is_empty() {
        resource = format!("{resource}/{}", a.subresource);
    }
    let mut why = if a.namespace.is_empty() {
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            a.verb, a.group
        )
    } else {
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            a.verb, a.group, a.namespace
        )
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason:?}");
    }
    let gr = group_resource(&a.group, &a.resource);
    let message = if a.name.is_empty() {
        format!("{gr} is forbidden: {why}")
    } else {
        format!("{gr} {:?} is forbidden: {why}", a.name)
    };
    Status::new(403, "Forbidden", message).with_details(StatusDetails {
        name: a.name.clone(),
        group: a.group.clone(),
        kind: a.resource.clone(),
        ..Default::default()
    })
}

/// The `metadata.name` value of a field selector that requires exactly one name
/// (`metadata.name=x` / `metadata.name==x`), as kube's requestinfo.go reads it.
pub fn name_from_field_selector(selector: &str) -> Option<String> {
    for term in selector.split(',') {
        let term = term.trim();
        if term.contains("!=") {
            continue;
        }
        if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('='))
            && k.trim() == "metadata.name"
        {
            return Some(v.trim().to_string());
        }
    }
    None
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_match_kube() {
        let a = Attributes {
            verb: "list".into(),
            resource: "pods".into(),
            version: "v1".into(),
            namespace: "y".into(),
            ..Default::default()
        };
        let s = forbidden("x", &a, "");
        assert_eq!(
            String::from_utf8(s.to_json()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \"x\" cannot list resource \"pods\" in API group \"\" in the namespace \"y\"","reason":"Forbidden","details":{"kind":"pods"},"code":403}"#
        );
        let a = Attributes {
            verb: "watch".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            name: "d".into(),
            ..Default::default()
        };
        assert_eq!(
            forbidden("x", &a, "").message,
            r#"deployments.apps "d" is forbidden: User "x" cannot watch resource "deployments" in API group "apps" at the cluster scope"#
        );
        assert_eq!(
            String::from_utf8(unauthorized().to_json()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
    }

    #[test]
    fn credentials_and_names() {
        let mut h = HeaderMap::new();
        assert_eq!(credential(&h), Credential::None);
        h.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(
            SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(
                "v4.channel.k8s.io, base64url.bearer.authorization.k8s.io.YWJj",
            ),
        );
        assert_eq!(credential(&h), Credential::Token("abc".into()));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer t1"));
        assert_eq!(credential(&h), Credential::Token("t1".into()));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Basic dTpw"));
        assert_eq!(credential(&h), Credential::Invalid);
        assert_eq!(
            name_from_field_selector("status.phase=Running,metadata.name==a"),
            Some("a".into())
        );
        assert_eq!(name_from_field_selector("metadata.name!=a"), None);
    }
}
