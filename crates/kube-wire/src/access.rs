//! Who a request is made by and what it asks for, in kube-apiserver's authentication and
//! authorization vocabulary: [`UserInfo`], the resource [`Attributes`] of a SubjectAccessReview,
//! the bearer [`Credential`] a request carries (header or websocket subprotocol), and kube's exact
//! 401 and 403 `Status` answers.
//!
//! Owns the vocabulary only: deciding (TokenReview, SubjectAccessReview, caching decisions) is the
//! caller's job; nothing here does I/O.

use base64::Engine;
use http::HeaderMap;
use http::header::{AUTHORIZATION, SEC_WEBSOCKET_PROTOCOL};

use crate::status::{Status, StatusDetails, group_resource};

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
    Status::unauthorized("Unauthorized")
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

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
