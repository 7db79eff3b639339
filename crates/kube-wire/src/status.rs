//! Kubernetes `metav1.Status` bodies: the shape of every error answer watchmux and the simulator
//! send, built with kube's named constructors, and parsed back from an upstream's answers and
//! watch `ERROR` events.
//!
//! kube clients look at `code`, `reason`, `details.causes` and the message text (client-go decides
//! "too large resource version" partly by message), so the shape and the field order here follow
//! kube-apiserver exactly: `kind, apiVersion, metadata, status, message, reason, details, code`.
//!
//! The body only: the HTTP answer (with `Retry-After` from `details.retryAfterSeconds`) is
//! [`crate::response::status_response`], and which error becomes which Status is the caller's
//! decision (watchmux's `error` module).

use serde::{Deserialize, Serialize};

/// One cause inside `details.causes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusCause {
    /// Machine-readable cause type, e.g. `FieldValueForbidden`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable text.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field the cause refers to, if any.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// `details` of a Status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StatusDetails {
    /// Name of the object concerned.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group of the resource concerned.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Resource (plural, lower case) concerned; kube calls it `kind`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// UID of the object concerned.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Individual causes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds a client should wait before retrying; also sent as `Retry-After`.
    #[serde(skip_serializing_if = "is_zero")]
    pub retry_after_seconds: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// A failure `Status` as kube-apiserver writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// HTTP status code (also the `code` field).
    pub code: u16,
    /// `reason`, e.g. `NotFound`, `Expired`; empty for a plain 500 without reason.
    pub reason: String,
    /// `message`.
    pub message: String,
    /// `details`, omitted when `None`.
    pub details: Option<Box<StatusDetails>>,
    /// `metadata.continue`, used by the 410 answer to an expired continue token.
    pub continue_token: Option<String>,
}

#[derive(Serialize)]
struct Wire<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: WireMeta<'a>,
    status: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a StatusDetails>,
    code: u16,
}

#[derive(Serialize)]
struct WireMeta<'a> {
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    continue_token: Option<&'a str>,
}

impl std::fmt::Display for Status {
    /// `<code> <reason>: <message>` (the reason left out when empty).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.reason.is_empty(), self.message.is_empty()) {
            (true, _) => write!(f, "{}: {}", self.code, self.message),
            (false, true) => write!(f, "{} {}", self.code, self.reason),
            (false, false) => write!(f, "{} {}: {}", self.code, self.reason, self.message),
        }
    }
}

impl std::error::Error for Status {}

/// Why a body is not a `metav1.Status`.
#[derive(Debug, thiserror::Error)]
pub enum ParseStatusError {
    /// Not JSON, or a field of the wrong type.
    #[error("not a Status body: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but `kind` is not `Status`.
    #[error("not a Status body: kind is {0:?}")]
    NotStatus(String),
}

/// What a `metav1.Status` body carries, as read from an upstream (every field optional).
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireIn {
    kind: String,
    metadata: WireMetaIn,
    message: String,
    reason: String,
    details: Option<StatusDetails>,
    code: u16,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireMetaIn {
    #[serde(rename = "continue")]
    continue_token: Option<String>,
}

impl Status {
    /// Parses a `metav1.Status` body (an upstream's error answer, or the object of a watch
    /// `ERROR` event). `code` 0 in the body becomes `http_code` (an ERROR event may omit it).
    pub fn parse(body: &[u8], http_code: u16) -> Result<Status, ParseStatusError> {
        let w: WireIn = serde_json::from_slice(body)?;
        if w.kind != "Status" {
            return Err(ParseStatusError::NotStatus(w.kind));
        }
        Ok(Status {
            code: if w.code == 0 { http_code } else { w.code },
            reason: w.reason,
            message: w.message,
            details: w.details.map(Box::new),
            continue_token: w.metadata.continue_token.filter(|c| !c.is_empty()),
        })
    }

    /// Whether this is kube's "resourceVersion too old" answer (410, reason `Expired` or `Gone`).
    pub fn is_expired(&self) -> bool {
        self.code == 410 || self.reason == "Expired" || self.reason == "Gone"
    }

    /// A Status with no details.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            continue_token: None,
        }
    }

    /// Adds `details`.
    pub fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// `Retry-After` seconds, if any.
    pub fn retry_after(&self) -> Option<u32> {
        self.details
            .as_deref()
            .map(|d| d.retry_after_seconds)
            .filter(|s| *s > 0)
    }

    /// Compact JSON exactly as kube-apiserver encodes it (no trailing newline).
    pub fn to_json(&self) -> Vec<u8> {
        let wire = Wire {
            kind: "Status",
            api_version: "v1",
            metadata: WireMeta {
                continue_token: self.continue_token.as_deref(),
            },
            status: "Failure",
            message: &self.message,
            reason: &self.reason,
            details: self.details.as_deref(),
            code: self.code,
        };
        // Go's encoding/json escapes `<`, `>`, `&` (e.g. in a selector echoed by a message).
        crate::gofmt::escape_html(serde_json::to_vec(&wire).expect("Status always serialises"))
    }

    /// The `details` block naming a resource (and object).
    fn resource_details(group: &str, resource: &str, name: &str) -> StatusDetails {
        StatusDetails {
            name: name.to_string(),
            group: group.to_string(),
            kind: resource.to_string(),
            ..Default::default()
        }
    }

    /// 404 for an object: `pods "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Status::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", group_resource(group, resource), name),
        )
        .with_details(Self::resource_details(group, resource, name))
    }

    /// 404 for a path the server does not serve.
    pub fn path_not_found() -> Self {
        Status::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(StatusDetails::default())
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Status::new(
            409,
            "AlreadyExists",
            format!(
                "{} \"{}\" already exists",
                group_resource(group, resource),
                name
            ),
        )
        .with_details(Self::resource_details(group, resource, name))
    }

    /// 409 Conflict for a stale resourceVersion on update.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Status::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                group_resource(group, resource),
                name,
                why
            ),
        )
        .with_details(Self::resource_details(group, resource, name))
    }

    /// The standard optimistic-concurrency conflict message.
    pub const MODIFIED: &'static str = "the object has been modified; please apply your changes to the latest version and try again";

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Status::new(400, "BadRequest", message)
    }

    /// 422 Invalid with field causes; `kind_group` is the kind's group, `kind` e.g. `Pod` or
    /// `ListOptions`, `name` the object name. Causes are (cause type, field, detail).
    pub fn invalid(
        kind_group: &str,
        kind: &str,
        name: &str,
        causes: &[(&str, &str, String)],
    ) -> Self {
        let qualified = if kind_group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{kind_group}")
        };
        let errs: Vec<String> = causes
            .iter()
            .map(|(_, field, detail)| format!("{field}: {detail}"))
            .collect();
        let joined = if errs.len() == 1 {
            errs[0].clone()
        } else {
            format!("[{}]", errs.join(", "))
        };
        Status::new(
            422,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {joined}"),
        )
        .with_details(StatusDetails {
            name: name.to_string(),
            group: kind_group.to_string(),
            kind: kind.to_string(),
            causes: causes
                .iter()
                .map(|(reason, field, detail)| StatusCause {
                    reason: reason.to_string(),
                    message: detail.clone(),
                    field: field.to_string(),
                })
                .collect(),
            ..Default::default()
        })
    }

    /// 422 for a forbidden ListOptions combination (spec §1.3).
    pub fn list_options_forbidden(field: &str, detail: &str) -> Self {
        Status::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            &[("FieldValueForbidden", field, format!("Forbidden: {detail}"))],
        )
    }

    /// 422 for an unsupported ListOptions value (spec §1.3).
    pub fn list_options_not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        Status::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            &[(
                "FieldValueNotSupported",
                field,
                format!(
                    "Unsupported value: \"{value}\": supported values: {}",
                    list.join(", ")
                ),
            )],
        )
    }

    /// 410 Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Status::new(410, "Expired", message)
    }

    /// 504 "Too large resource version" (spec §1.4).
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        Status::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                reason: "ResourceVersionTooLarge".into(),
                message: "Too large resource version".into(),
                field: String::new(),
            }],
            retry_after_seconds: 1,
            ..Default::default()
        })
    }

    /// 429 TooManyRequests with Retry-After.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        Status::new(429, "TooManyRequests", message).with_details(StatusDetails {
            retry_after_seconds,
            ..Default::default()
        })
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Status::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(StatusDetails::default())
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Status::new(406, "NotAcceptable", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        Status::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                reason: String::new(),
                message,
                field: String::new(),
            }],
            ..Default::default()
        })
    }

    /// 403 Forbidden with a free message.
    pub fn forbidden(group: &str, resource: &str, name: &str, message: impl Into<String>) -> Self {
        Status::new(403, "Forbidden", message)
            .with_details(Self::resource_details(group, resource, name))
    }

    /// 413 RequestEntityTooLarge.
    pub fn request_entity_too_large(message: impl Into<String>) -> Self {
        Status::new(413, "RequestEntityTooLarge", message)
    }

    /// 401 Unauthorized with a free message (kube's own answer says just `Unauthorized`).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Status::new(401, "Unauthorized", message)
    }

    /// 414 RequestURITooLong.
    pub fn request_uri_too_long(message: impl Into<String>) -> Self {
        Status::new(414, "RequestURITooLong", message)
    }

    /// 503 ServiceUnavailable, without `Retry-After`.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Status::new(503, "ServiceUnavailable", message)
    }

    /// 502 with no reason: kube has no `StatusReason` for a bad gateway, so its generic answer
    /// for an unexpected code carries `StatusReasonUnknown`, the empty reason.
    pub fn bad_gateway(message: impl Into<String>) -> Self {
        Status::new(502, "", message)
    }
}

/// `pods` or `deployments.apps`: how kube names a resource in messages.
pub fn group_resource(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_writes_and_what_kube_sends() {
        let s = Status::too_many_requests("slow down", 3);
        let back = Status::parse(&s.to_json(), 500).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.to_string(), "429 TooManyRequests: slow down");
        let gone = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}"#;
        let g = Status::parse(gone, 200).unwrap();
        assert!(g.is_expired());
        assert_eq!(g.message, "too old resource version: 1 (5)");
        assert!(Status::parse(br#"{"kind":"Pod"}"#, 500).is_err());
        assert!(Status::parse(b"<html>", 502).is_err());
        assert_eq!(
            Status::parse(br#"{"kind":"Status"}"#, 503).unwrap().code,
            503
        );
        let e: Box<dyn std::error::Error> = Box::new(Status::internal("x"));
        assert!(e.to_string().contains("500"));
    }

    #[test]
    fn too_large_matches_kube_bytes() {
        let s = Status::too_large_resource_version(1200, 1100);
        assert_eq!(
            String::from_utf8(s.to_json()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 1200, current: 1100","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#
        );
        assert_eq!(s.retry_after(), Some(1));
    }

    #[test]
    fn too_many_requests_matches_kube_bytes() {
        let s = Status::too_many_requests("storage is (re)initializing", 1);
        assert_eq!(
            String::from_utf8(s.to_json()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"storage is (re)initializing","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}"#
        );
    }

    #[test]
    fn invalid_list_options_matches_kube_bytes() {
        let s = Status::list_options_forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        );
        assert_eq!(
            String::from_utf8(s.to_json()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided","reason":"Invalid","details":{"group":"meta.k8s.io","kind":"ListOptions","causes":[{"reason":"FieldValueForbidden","message":"Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided","field":"resourceVersionMatch"}]},"code":422}"#
        );
    }

    #[test]
    fn expired_has_no_details() {
        let s = Status::expired("too old resource version: 1 (3473)");
        assert_eq!(
            String::from_utf8(s.to_json()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (3473)","reason":"Expired","code":410}"#
        );
    }

    #[test]
    fn plain_constructors_match_kube_bytes() {
        let json = |s: Status| String::from_utf8(s.to_json()).unwrap();
        assert_eq!(
            json(Status::unauthorized("Unauthorized")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        assert_eq!(
            json(Status::request_uri_too_long("long")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"long","reason":"RequestURITooLong","code":414}"#
        );
        assert_eq!(
            json(Status::service_unavailable("down")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"down","reason":"ServiceUnavailable","code":503}"#
        );
        assert_eq!(
            json(Status::bad_gateway("switched")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"switched","code":502}"#
        );
    }

    #[test]
    fn not_found_names_group_resource() {
        let s = Status::not_found("apps", "deployments", "web");
        let v: serde_json::Value = serde_json::from_slice(&s.to_json()).unwrap();
        assert_eq!(v["message"], "deployments.apps \"web\" not found");
        assert_eq!(v["details"]["group"], "apps");
        assert_eq!(v["details"]["kind"], "deployments");
        assert_eq!(v["code"], 404);
    }
}
