//! The one place where watchmux's errors become kube `metav1.Status` answers.
//!
//! Every module reports what went wrong with a typed error of its own, which keeps its cause:
//! [`RouteError`] (the router's checks), [`LimitError`], [`AuthzError`], [`WebsocketError`],
//! [`PassThroughError`] and [`PassThroughAuthError`]. Which HTTP code, `reason` and `message` a
//! client sees for each is decided here and nowhere else, as `impl From<&E> for Status` (and
//! `From<E>`): the router, the pass-through and the tests turn an error into its answer with
//! `status_response(&Status::from(e))`, never with a hand-built `Status`.
//!
//! The shapes come from `kube_wire::status` (named constructors for kube's vocabulary, e.g.
//! [`Status::too_many_requests`]); refusals that the wire vocabulary already phrases as a
//! `Status` (invalid list options, a watch's expired resourceVersion) pass through unchanged.
//! The `message` is the error's `Display` text unless kube's answer says something else (its
//! 401 says just `Unauthorized`).
//!
//! This module must not log, decide whether a request is refused, nor build HTTP responses (that
//! is `kube_wire::response::status_response`, the one status-response helper).

use kube_wire::access;
use kube_wire::status::{Status, StatusDetails};

use crate::auth::PassThroughAuthError;
use crate::downstream::authz::AuthzError;
use crate::downstream::limits::LimitError;
use crate::downstream::router::RouteError;
use crate::downstream::websocket::WebsocketError;
use crate::passthrough::PassThroughError;

/// The `Retry-After` seconds of the 429s answered for a limit, as kube-apiserver's
/// max-in-flight filter sends.
const RETRY_AFTER_SECONDS: u32 = 1;

/// The `Retry-After` seconds of kube's 429 for a request that reached a draining server
/// (`k8s.io/apiserver` `pkg/server/filters/with_retry_after.go`).
const SHUTDOWN_RETRY_AFTER_SECONDS: u32 = 5;

/// The `Retry-After` seconds of kube's 429 for a cache that has not been ready for `downtime`
/// (`k8s.io/apiserver` `pkg/storage/cacher/util.go`, `calculateRetryAfterForUnreadyCache`):
/// e^(0.06·seconds), within 1 and 30, truncated — 1 for the first 11.5 s, 6 after 30 s, 30
/// from about 57 s on.
fn retry_after_for_unready_cache(downtime: std::time::Duration) -> u32 {
    (0.06 * downtime.as_secs_f64()).exp().clamp(1.0, 30.0) as u32
}

impl From<&RouteError> for Status {
    fn from(e: &RouteError) -> Status {
        match e {
            RouteError::Limit(e) => e.into(),
            RouteError::Authz(e) => e.into(),
            RouteError::Websocket(e) => e.into(),
            RouteError::NoRoute => Status::path_not_found(),
            RouteError::NotReady { downtime } => {
                Status::too_many_requests(e.to_string(), retry_after_for_unready_cache(*downtime))
            }
            // kube's cacher answers a read it cannot serve for now with 503.
            RouteError::Stale { .. } => Status::service_unavailable(e.to_string()),
            // kube answers a selector it cannot parse with 400 and the parser's message.
            RouteError::Selector(e) => Status::bad_request(e.to_string()),
            RouteError::Status(s) => s.clone(),
            // kube's body has no details; its `Retry-After: 1` is a header of the answer alone
            // (the router's).
            RouteError::ShuttingDown { watch: true } => Status::service_unavailable(e.to_string()),
            RouteError::ShuttingDown { watch: false } => {
                Status::too_many_requests(e.to_string(), SHUTDOWN_RETRY_AFTER_SECONDS)
            }
        }
    }
}

impl From<&LimitError> for Status {
    fn from(e: &LimitError) -> Status {
        match e {
            LimitError::UrlTooLong { .. } => Status::request_uri_too_long(e.to_string()),
            LimitError::TooManyWatches { .. }
            | LimitError::TooManyLists { .. }
            | LimitError::OverMemory { .. } => {
                Status::too_many_requests(e.to_string(), RETRY_AFTER_SECONDS)
            }
        }
    }
}

impl From<&AuthzError> for Status {
    fn from(e: &AuthzError) -> Status {
        match e {
            AuthzError::MalformedCredential | AuthzError::TokenNotAuthenticated => {
                access::unauthorized()
            }
            AuthzError::Forbidden {
                user,
                attributes,
                reason,
            } => access::forbidden(user, attributes, reason),
            // No verdict: kube's delegated authenticator and authorizer answer 500 too.
            AuthzError::TokenReview(_) | AuthzError::AccessReview(_) => {
                Status::internal(e.to_string())
            }
        }
    }
}

impl From<&WebsocketError> for Status {
    fn from(e: &WebsocketError) -> Status {
        Status::bad_request(e.to_string())
    }
}

impl From<&PassThroughAuthError> for Status {
    fn from(e: &PassThroughAuthError) -> Status {
        match e {
            PassThroughAuthError::NoClientCredentials => access::unauthorized(),
            PassThroughAuthError::SubjectNotAHeaderValue { .. } => {
                Status::unauthorized(e.to_string())
            }
        }
    }
}

impl From<&PassThroughError> for Status {
    fn from(e: &PassThroughError) -> Status {
        match e {
            PassThroughError::Credentials(e) => e.into(),
            // The client's own path and query do not make a URI on the upstream: its mistake.
            PassThroughError::Upstream(u) if u.is_invalid_uri() => {
                Status::bad_request(e.to_string())
            }
            // No answer from the upstream (it is away, restarting, or the connection broke):
            // the client may retry shortly, as kube's clients do on `Retry-After`.
            PassThroughError::Upstream(_) => Status::service_unavailable(e.to_string())
                .with_details(StatusDetails {
                    retry_after_seconds: RETRY_AFTER_SECONDS,
                    ..Default::default()
                }),
            PassThroughError::UnrequestedUpgrade => Status::bad_gateway(e.to_string()),
        }
    }
}

/// `From<E>` for every error mapped above, by reference.
macro_rules! from_owned {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for Status {
            fn from(e: $error) -> Status {
                Status::from(&e)
            }
        }
    )*};
}

from_owned!(
    RouteError,
    LimitError,
    AuthzError,
    WebsocketError,
    PassThroughAuthError,
    PassThroughError,
);

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: Status) -> String {
        String::from_utf8(s.to_json()).unwrap()
    }

    #[test]
    fn limits_answer_kubes_codes() {
        let s = Status::from(LimitError::UrlTooLong {
            length: 9000,
            limit: 8192,
        });
        assert_eq!(
            json(s),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the request URL is 9000 bytes long, more than the 8192 allowed","reason":"RequestURITooLong","code":414}"#
        );
        let s = Status::from(LimitError::TooManyLists { limit: 2 });
        assert_eq!(
            json(s),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too many concurrent LIST requests (limit 2), please try again later","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}"#
        );
    }

    #[test]
    fn a_cache_that_is_not_ready_is_kubes_429() {
        let not_ready = |secs: f64| RouteError::NotReady {
            downtime: std::time::Duration::from_secs_f64(secs),
        };
        // kube's `errors.NewTooManyRequests(err.Error(), retryAfter)`, byte for byte.
        assert_eq!(
            json(Status::from(not_ready(0.0))),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"storage is (re)initializing","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}"#
        );
        // clamp(e^(0.06·s), 1, 30), truncated as Go's int() does.
        for (secs, want) in [
            (0.0, 1),
            (11.5, 1),
            (11.6, 2),
            (30.0, 6),
            (45.0, 14),
            (56.0, 28),
            (57.0, 30),
            (3600.0, 30),
        ] {
            assert_eq!(
                Status::from(not_ready(secs)).retry_after(),
                Some(want),
                "{secs} s"
            );
        }
        assert_eq!(Status::from(RouteError::NoRoute), Status::path_not_found());
    }

    #[test]
    fn pass_through_refusals() {
        assert_eq!(
            json(Status::from(PassThroughError::UnrequestedUpgrade)),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the upstream switched protocols without an upgrade request","code":502}"#
        );
        assert_eq!(
            json(Status::from(PassThroughAuthError::NoClientCredentials)),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        let e = PassThroughError::from(crate::upstream::UpstreamError::InvalidUri {
            path: "x".into(),
            reason: "bad".into(),
        });
        let s = Status::from(&e);
        assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
        assert_eq!(s.message, e.to_string());
    }
}
