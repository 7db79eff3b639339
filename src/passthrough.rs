//! Pass-through: every request the cache does not answer goes to the upstream untouched.
//!
//! Writes, uncached kinds, Table and protobuf requests, discovery, and upgrades (exec, attach,
//! port-forward over SPDY or websocket) all come here. The request is forwarded with its method,
//! path, query, headers and body; the response comes back with its status, headers and body. Both
//! bodies stream frame by frame and are never buffered, so a chunked watch from the upstream
//! reaches the client event by event, and a large request body is never held in memory. The
//! request body is read to its end by a task of its own (`relay`): the upstream client stops
//! taking it once the answer has begun, and hyper must keep reading the connection to see the
//! client leave; a body that breaks off ends the answer.
//!
//! Only the hop-by-hop headers (RFC 9110 §7.6.1, and every `Proxy-*` header) are dropped: they
//! describe one connection, not the message, and forwarding them would corrupt the framing on the
//! other connection (a `Transfer-Encoding` from the client, a `Connection: close` from the
//! upstream). `Host` is set to the upstream's authority. Every other header passes as it is,
//! except the credentials, which follow `server.auth` (`crate::auth`): by default the client's
//! own `Authorization`, its verified client certificate as `Impersonate-User`/`Impersonate-Group`,
//! or else watchmux's identity.
//!
//! An upgrade (`Connection: Upgrade` + `Upgrade: ...`) is forwarded with those two headers kept;
//! when the upstream answers 101 the client gets the same 101, and the two upgraded connections
//! are then joined byte for byte until both directions have closed.
//!
//! Owns the forwarding only. It must not look into bodies nor answer from the cache; what goes
//! wrong is a [`PassThroughError`], answered with the `Status` `crate::error` maps it to.

use std::io;

use crate::downstream::request_body::ReqBody;
use http::header::{CONNECTION, HeaderName, UPGRADE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::auth::PassThroughAuthError;
use crate::upstream::{Upstream, UpstreamError};
use kube_wire::response::{Body, empty, status_response};
use kube_wire::status::Status;

/// Why a request could not be passed through.
#[derive(Debug, thiserror::Error)]
pub enum PassThroughError {
    /// The request cannot be made as the client (`server.auth`).
    #[error(transparent)]
    Credentials(#[from] PassThroughAuthError),
    /// The upstream could not be reached, or the exchange failed.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The upstream answered 101 to a request that asked for no upgrade.
    #[error("the upstream switched protocols without an upgrade request")]
    UnrequestedUpgrade,
}

/// Headers that describe one connection, never forwarded (besides those `Connection` names).
/// `Upgrade` and `Connection` are put back for an upgrade request.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Forwards `req` to the upstream and returns the upstream's answer, or a kube `Status` 503 when
/// the upstream cannot be reached. Never fails and never panics.
pub async fn pass_through(up: &Upstream, mut req: Request<ReqBody>) -> Response<Body> {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_string();
    let upgrade = upgrade_protocol(req.headers());
    // Must be taken before the request is taken apart: it is the request's extension.
    let downstream = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut req));

    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    // Whose credentials go upstream (server.auth, the client's certificate): see `auth`.
    let peer = parts.extensions.get::<crate::auth::PeerAuth>();
    if let Err(e) = crate::auth::prepare_pass_through(&mut parts.headers, peer) {
        let resp = error_response(&e.into());
        debug!(
            %method, path, status = resp.status().as_u16(),
            "pass-through refused: no client credentials"
        );
        return resp;
    }
    if let Some(protocol) = &upgrade {
        parts
            .headers
            .insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        parts.headers.insert(UPGRADE, protocol.clone());
    }
    let (body, broken) = relay(body);
    let result = up.send(Request::from_parts(parts, body)).await;

    let mut resp = match result {
        Ok(resp) => resp,
        Err(e) => {
            let e = PassThroughError::from(e);
            let resp = error_response(&e);
            debug!(
                %method, path, status = resp.status().as_u16(), error = %e,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "pass-through failed"
            );
            return resp;
        }
    };
    let status = resp.status();
    // The request's debug line is the server's (one per request); this adds upstream detail.
    tracing::trace!(
        %method, path, status = status.as_u16(), upgrade = upgrade.is_some(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "pass-through"
    );

    if status == StatusCode::SWITCHING_PROTOCOLS {
        let Some(downstream) = downstream else {
            // A 101 nobody asked for cannot be relayed: the client would not switch.
            return error_response(&PassThroughError::UnrequestedUpgrade);
        };
        let upstream = hyper::upgrade::on(&mut resp);
        let (mut parts, _) = resp.into_parts();
        let protocol = parts.headers.get(UPGRADE).cloned().or(upgrade);
        strip_hop_by_hop(&mut parts.headers);
        parts
            .headers
            .insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        if let Some(protocol) = protocol {
            parts.headers.insert(UPGRADE, protocol);
        }
        tokio::spawn(tunnel(downstream, upstream, method, path));
        return Response::from_parts(parts, empty());
    }

    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let resp = Response::from_parts(parts, body.map_err(io::Error::other).boxed());
    match broken {
        Some(broken) => fail_when(resp, broken),
        None => resp,
    }
}

/// `resp` with a body that fails once `broken` is cancelled: the request it answers broke off,
/// so hyper reads no more of the connection and the answer (a watch's stream would go on) must
/// end by itself; it fails rather than ends (hyper aborts the connection), as a clean end could
/// fall between the frames of one watch event. The router uses it for the answers it gives.
pub fn fail_when(resp: Response<Body>, broken: CancellationToken) -> Response<Body> {
    resp.map(|inner| {
        FailWhen {
            inner,
            broken: Box::pin(broken.cancelled_owned()),
            failed: false,
        }
        .boxed()
    })
}

/// The body of [`fail_when`].
struct FailWhen {
    inner: Body,
    broken: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
    failed: bool,
}

impl hyper::body::Body for FailWhen {
    type Data = bytes::Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::future::Future as _;
        if self.failed {
            return std::task::Poll::Ready(None);
        }
        if self.broken.as_mut().poll(cx).is_ready() {
            self.failed = true;
            return std::task::Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the request broke off",
            ))));
        }
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The most of a request body [`relay`] reads on after the upstream stopped taking it
/// (kube's request body limit).
const MAX_UNSENT_BODY: usize = 3 << 20;

/// The client's request body as the upstream request's: a task reads it to its end and hands
/// the frames on, a few at a time (the upstream's pace is kept). hyper reads a connection only
/// as a request body is read, and its client, once the answer has begun (a watch's stream),
/// stops taking the request body: the client's last chunk would stay unread, the connection
/// unread, the client's leaving unseen, and the watch served to nobody until its timeout. So
/// once the upstream stops taking it, the rest is read and dropped. Returns, for a request with
/// a body, a token cancelled when the body breaks off (the client left, or broke its framing)
/// or, untaken, goes past [`MAX_UNSENT_BODY`] (then left unread): hyper then reads no more of
/// the connection. An empty body is passed as it is; the length announced is kept.
fn relay(body: ReqBody) -> (Body, Option<CancellationToken>) {
    use hyper::body::Body as _;
    if body.is_end_stream() {
        return (body.map_err(io::Error::other).boxed(), None);
    }
    let hint = body.size_hint();
    let broken = CancellationToken::new();
    let on_break = broken.clone();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        let mut body = body;
        let mut unsent = MAX_UNSENT_BODY;
        let mut taking = true;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(io::Error::other);
            if frame.is_err() {
                on_break.cancel();
            }
            let failed = frame.is_err();
            if taking {
                taking = tx.send(frame).await.is_ok();
            } else if let Ok(f) = &frame {
                let n = f.data_ref().map_or(0, |d| d.len());
                match unsent.checked_sub(n) {
                    Some(u) => unsent = u,
                    None => return on_break.cancel(),
                }
            }
            if failed {
                return;
            }
        }
    });
    (Relayed { rx, hint }.boxed(), Some(broken))
}

/// The upstream request's body, fed by [`relay`].
struct Relayed {
    rx: tokio::sync::mpsc::Receiver<Result<hyper::body::Frame<bytes::Bytes>, io::Error>>,
    hint: hyper::body::SizeHint,
}

impl hyper::body::Body for Relayed {
    type Data = bytes::Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.rx.poll_recv(cx)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.hint
    }
}

/// The requested protocol of an upgrade request: `Upgrade`'s value when `Connection` lists the
/// `upgrade` token (both are needed, RFC 9110 §7.8).
fn upgrade_protocol(headers: &HeaderMap) -> Option<HeaderValue> {
    let wants = connection_tokens(headers).any(|t| t.eq_ignore_ascii_case("upgrade"));
    if !wants {
        return None;
    }
    headers.get(UPGRADE).cloned()
}

/// The comma-separated tokens of every `Connection` header.
fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Removes the hop-by-hop headers: the fixed set, every `Proxy-*` header, and whatever
/// `Connection` names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = connection_tokens(headers)
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
    let proxy_headers: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for name in proxy_headers {
        headers.remove(name);
    }
}

/// Joins the client's and the upstream's upgraded connections until both directions are done
/// (each side's EOF is passed on as a write shutdown, so half-closed exec streams work).
async fn tunnel(downstream: OnUpgrade, upstream: OnUpgrade, method: http::Method, path: String) {
    let (down, up) = match tokio::try_join!(downstream, upstream) {
        Ok(pair) => pair,
        Err(e) => {
            debug!(%method, path, error = %e, "upgrade failed");
            return;
        }
    };
    let mut down = TokioIo::new(down);
    let mut up = TokioIo::new(up);
    match tokio::io::copy_bidirectional(&mut down, &mut up).await {
        Ok((to_up, to_down)) => {
            debug!(%method, path, to_up, to_down, "upgraded connection closed");
        }
        Err(e) => debug!(%method, path, error = %e, "upgraded connection aborted"),
    }
}

/// The kube Status answer for a request that could not be passed through.
fn error_response(e: &PassThroughError) -> Response<Body> {
    status_response(&Status::from(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::CONTENT_TYPE;

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

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut h = headers(&[
            ("connection", "keep-alive, X-Conn-Only"),
            ("keep-alive", "timeout=5"),
            ("x-conn-only", "1"),
            ("proxy-authorization", "Basic x"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("trailer", "x-t"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("authorization", "Bearer t"),
            ("accept", "application/json"),
            ("content-length", "3"),
        ]);
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        left.sort();
        assert_eq!(left, ["accept", "authorization", "content-length"]);
    }

    #[test]
    fn upgrade_needs_both_headers() {
        assert_eq!(
            upgrade_protocol(&headers(&[
                ("connection", "keep-alive, Upgrade"),
                ("upgrade", "SPDY/3.1")
            ])),
            Some(HeaderValue::from_static("SPDY/3.1"))
        );
        assert_eq!(
            upgrade_protocol(&headers(&[("upgrade", "websocket")])),
            None
        );
        assert_eq!(
            upgrade_protocol(&headers(&[("connection", "upgrade")])),
            None
        );
    }

    #[test]
    fn errors_become_status_bodies() {
        let e = UpstreamError::InvalidUri {
            path: "x".into(),
            reason: "bad".into(),
        };
        let r = error_response(&e.into());
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert_eq!(r.headers()[CONTENT_TYPE], "application/json");
    }
}
