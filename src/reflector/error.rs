//! Why one reflector step (discovery, a LIST, a watch) failed, with its cause kept typed.
//!
//! Owns [`ReflectorError`] and the reading of an upstream's error answer into it: the body is
//! parsed as a `metav1.Status` ([`Status::parse`]); a 410 (or reason `Expired`/`Gone`) is
//! [`ReflectorError::Expired`]. These errors are logged and counted, never sent to a client:
//! this module must not build downstream answers (that is `crate::downstream`).

use std::num::ParseIntError;

use http::StatusCode;

use crate::cache::DecodeError;
use crate::config::ResourceSpec;
use crate::upstream::UpstreamError;
use kube_wire::status::{ParseStatusError, Status};

/// Why one discovery, list or watch attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ReflectorError {
    /// Transport failure.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The upstream answered with an error status.
    #[error("upstream answered {} to {what}: {}", .status.code, .status.message)]
    Status {
        /// The request (path and query), or `watch` for a watch's ERROR event.
        what: String,
        /// The upstream's Status.
        #[source]
        status: Status,
    },
    /// The resourceVersion we asked for is gone (410): relist.
    #[error("resourceVersion expired: {}", .0.message)]
    Expired(#[source] Status),
    /// The body could not be read or parsed.
    #[error("malformed upstream data for {what}: {cause}")]
    Malformed {
        /// The request, or `watch event` for one line of a watch.
        what: String,
        /// What was wrong.
        #[source]
        cause: MalformedData,
    },
    /// Discovery does not list the resource.
    #[error("the upstream does not serve {0}")]
    NotServed(ResourceSpec),
}

/// What was wrong with the upstream's data.
#[derive(Debug, thiserror::Error)]
pub enum MalformedData {
    /// The body could not be read.
    #[error(transparent)]
    Body(hyper::Error),
    /// Not the JSON expected (a discovery document, a list page, a watch event).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Not the protobuf expected (a list page, a watch frame, an envelope).
    #[error(transparent)]
    Protobuf(kube_wire::proto::ProtoError),
    /// An object the cache cannot ingest.
    #[error(transparent)]
    Object(#[from] DecodeError),
    /// A watch ERROR event whose object is not a Status.
    #[error(transparent)]
    NotStatus(#[from] ParseStatusError),
    /// A list's `metadata.resourceVersion` that is not a number.
    #[error("list resourceVersion {value:?}")]
    ListResourceVersion {
        /// The value seen.
        value: String,
        /// Why it is not one.
        #[source]
        source: ParseIntError,
    },
    /// A BOOKMARK's `metadata.resourceVersion` that is not a number.
    #[error("bookmark resourceVersion {value:?}")]
    BookmarkResourceVersion {
        /// The value seen.
        value: String,
        /// Why it is not one.
        #[source]
        source: ParseIntError,
    },
    /// A watch event's `metadata.resourceVersion` that is not a number.
    #[error("event resourceVersion {value:?}")]
    EventResourceVersion {
        /// The value seen.
        value: String,
        /// Why it is not one.
        #[source]
        source: ParseIntError,
    },
    /// A watch event of a type kube does not send.
    #[error("unknown event type {0:?}")]
    EventType(String),
    /// The watch stream broke mid-way.
    #[error("watch stream broke: {0}")]
    StreamBroke(#[source] hyper::Error),
    /// One watch line exceeded the bound (`cache.max_object_bytes` and room for the envelope).
    #[error("a watch event line longer than {limit} bytes (cache.max_object_bytes)")]
    EventTooLarge {
        /// The bound.
        limit: usize,
    },
    /// One object (listed or in a watch event) exceeded `cache.max_object_bytes`.
    #[error("an object of {size} bytes, more than cache.max_object_bytes ({limit})")]
    ObjectTooLarge {
        /// Its size.
        size: usize,
        /// The bound.
        limit: usize,
    },
    /// A list page's body exceeded its bound (`cache.max_object_bytes` times the page size).
    #[error("a list page longer than {limit} bytes (cache.max_object_bytes × list_page_size)")]
    PageTooLarge {
        /// The bound.
        limit: usize,
    },
}

impl MalformedData {
    /// A list's `metadata.resourceVersion` as a number, or [`MalformedData::ListResourceVersion`].
    pub fn parse_list_rv(value: &str) -> Result<u64, MalformedData> {
        crate::cache::record::parse_rv(value).map_err(|source| MalformedData::ListResourceVersion {
            value: value.to_string(),
            source,
        })
    }

    /// Whether this is one of the size bounds (counted in `watchmux_upstream_oversize_total`).
    pub fn is_oversize(&self) -> bool {
        matches!(
            self,
            MalformedData::EventTooLarge { .. }
                | MalformedData::ObjectTooLarge { .. }
                | MalformedData::PageTooLarge { .. }
        )
    }
}

impl ReflectorError {
    /// Whether the upstream sent more than a size bound allows.
    pub fn is_oversize(&self) -> bool {
        matches!(self, ReflectorError::Malformed { cause, .. } if cause.is_oversize())
    }

    /// Whether the upstream refused watchmux's credentials (401) or its identity's access to
    /// the request (403).
    pub fn is_refused(&self) -> bool {
        matches!(self, ReflectorError::Status { status, .. } if matches!(status.code, 401 | 403))
    }

    /// `cause` found in the answer to `what`.
    pub fn malformed(what: impl Into<String>, cause: impl Into<MalformedData>) -> Self {
        ReflectorError::Malformed {
            what: what.into(),
            cause: cause.into(),
        }
    }

    /// The upstream's error answer `code` with `body` to `what`. A body that is not a Status (a
    /// load balancer's page) counts as a Status of that code with no reason and no message.
    pub fn from_answer(code: StatusCode, what: &str, body: &[u8]) -> Self {
        let code = code.as_u16();
        let body = super::protobuf::status_json(body);
        let status = Status::parse(&body, code).unwrap_or_else(|_| Status::new(code, "", ""));
        Self::from_status(what, status)
    }

    /// An upstream Status answering `what`: [`ReflectorError::Expired`] if it is kube's
    /// "resourceVersion too old".
    pub fn from_status(what: &str, status: Status) -> Self {
        if status.is_expired() {
            ReflectorError::Expired(status)
        } else {
            ReflectorError::Status {
                what: what.to_string(),
                status,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_keep_their_log_text() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
        let e = ReflectorError::from_answer(StatusCode::UNAUTHORIZED, "/api/v1", body);
        assert_eq!(
            e.to_string(),
            "upstream answered 401 to /api/v1: Unauthorized"
        );
        let e = ReflectorError::from_answer(StatusCode::BAD_GATEWAY, "/api/v1", b"<html>");
        assert_eq!(e.to_string(), "upstream answered 502 to /api/v1: ");
        let gone = br#"{"kind":"Status","message":"too old resource version: 1 (5)","reason":"Expired","code":410}"#;
        let e = ReflectorError::from_answer(StatusCode::GONE, "/api/v1/pods?watch=1", gone);
        assert_eq!(
            e.to_string(),
            "resourceVersion expired: too old resource version: 1 (5)"
        );
        assert!(matches!(e, ReflectorError::Expired(s) if s.code == 410));
        let e = ReflectorError::malformed("watch event", MalformedData::EventType("FOO".into()));
        assert_eq!(
            e.to_string(),
            "malformed upstream data for watch event: unknown event type \"FOO\""
        );
    }
}
