//! Websocket watch, as kube-apiserver serves it on the same watch URLs (spec §2.7): one message
//! per watch event: a text message whose payload is exactly the chunked frame (JSON and its
//! newline), or in protobuf a binary message with the bare `WatchEvent`; client messages are
//! ignored; when the watch ends the server closes the connection.
//!
//! This is the only file that names the websocket crate (fastwebsockets), behind
//! [`upgrade`] and [`pump`]. A refused handshake is a [`WebsocketError`] (`crate::error` makes
//! it kube's 400). It must not decide what the watch sends: the frames come ready-made from
//! [`super::watch`].

use std::convert::Infallible;

use bytes::{BufMut, BytesMut};
use fastwebsockets::{Frame, OpCode, Payload};
use http::header::{HeaderMap, HeaderValue, SEC_WEBSOCKET_PROTOCOL};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

use super::watch::Out;
use kube_wire::response::{Body, empty};

/// The subprotocol prefix browsers use to carry a bearer token (no Authorization header there).
pub const BEARER_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// Why a websocket handshake is refused.
#[derive(Debug, thiserror::Error)]
pub enum WebsocketError {
    /// Only the bearer-token subprotocol was offered: nothing is left to echo.
    #[error(
        "missing a subprotocol besides the bearer token: websocket clients must offer one (e.g. binary.k8s.io)"
    )]
    OnlyBearerProtocol,
    /// More than one subprotocol besides the bearer token (x/net/websocket's message).
    #[error("You need choose a Protocol")]
    SeveralProtocols,
    /// The upgrade request is not a valid websocket handshake.
    #[error("websocket handshake: {0}")]
    Handshake(#[source] fastwebsockets::WebSocketError),
}

/// Whether the request asks for a websocket.
pub fn is_websocket(req: &Request<Incoming>) -> bool {
    fastwebsockets::upgrade::is_upgrade_request(req)
}

/// The subprotocol to echo: kube's authenticator removes the bearer-token entry, and
/// `x/net/websocket` echoes the one remaining protocol, refusing the handshake (400) when the
/// client offers more than one. No protocol offered: none echoed.
pub fn choose_protocol(headers: &HeaderMap) -> Result<Option<String>, WebsocketError> {
    let offered: Vec<String> = headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    let had_bearer = offered
        .iter()
        .any(|p| p.starts_with(BEARER_PROTOCOL_PREFIX));
    let rest: Vec<String> = offered
        .into_iter()
        .filter(|p| !p.starts_with(BEARER_PROTOCOL_PREFIX))
        .collect();
    match rest.len() {
        0 if had_bearer => Err(WebsocketError::OnlyBearerProtocol),
        0 => Ok(None),
        1 => Ok(rest.into_iter().next()),
        _ => Err(WebsocketError::SeveralProtocols),
    }
}

/// Completes the handshake: the 101 answer and the future of the upgraded connection.
pub fn upgrade(
    req: &mut Request<Incoming>,
    protocol: Option<&str>,
) -> Result<(Response<Body>, fastwebsockets::upgrade::UpgradeFut), WebsocketError> {
    let (resp, fut) = fastwebsockets::upgrade::upgrade(req).map_err(WebsocketError::Handshake)?;
    let (mut parts, _) = resp.into_parts();
    if let Some(p) = protocol.and_then(|p| HeaderValue::from_str(p).ok()) {
        parts.headers.insert(SEC_WEBSOCKET_PROTOCOL, p);
    }
    Ok((Response::from_parts(parts, empty()), fut))
}

fn owned(f: Frame<'_>) -> Frame<'static> {
    Frame::new(f.fin, f.opcode, None, Payload::Owned(f.payload.to_vec()))
}

/// Writes each watch event as one message until the watch ends (then a normal close), the
/// client closes, or the connection fails. Pings are answered. JSON events are text messages
/// (the chunked frame); protobuf events (`binary`) are binary messages carrying the
/// `WatchEvent` without the 4-byte length of the chunked framing, as kube's websocket framer
/// writes them.
pub async fn pump(
    fut: fastwebsockets::upgrade::UpgradeFut,
    mut rx: mpsc::Receiver<Out>,
    binary: bool,
) {
    let Ok(ws) = fut.await else { return };
    let (mut read, mut write) =
        ws.split(|io: TokioIo<hyper::upgrade::Upgraded>| tokio::io::split(io));
    let (ctl_tx, mut ctl_rx) = mpsc::channel::<Frame<'static>>(4);
    let reader = tokio::spawn(async move {
        let tx = ctl_tx.clone();
        loop {
            let mut send = |f: Frame<'_>| {
                let tx = tx.clone();
                let f = owned(f);
                async move {
                    let _ = tx.send(f).await;
                    Ok::<_, Infallible>(())
                }
            };
            match read.read_frame(&mut send).await {
                Ok(f) if f.opcode == OpCode::Close => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        drop(ctl_tx);
    });
    loop {
        tokio::select! {
            out = rx.recv() => {
                let Some(out) = out else {
                    let _ = write.write_frame(Frame::close(1000, b"")).await;
                    break;
                };
                // One websocket message per event, whatever the batching upstream of here.
                let payloads: Vec<BytesMut> = match out {
                    Out::Frame(b) => vec![BytesMut::from(&b[..])],
                    Out::Batch(frames) => frames.iter().map(|b| BytesMut::from(&b[..])).collect(),
                    Out::Parts(parts) => {
                        let [a, b, c] = *parts;
                        let mut m = BytesMut::with_capacity(a.len() + b.len() + c.len());
                        m.put_slice(&a);
                        m.put_slice(&b);
                        m.put_slice(&c);
                        vec![m]
                    }
                };
                let mut failed = false;
                for mut payload in payloads {
                    let frame = if binary {
                        Frame::binary(Payload::Bytes(payload.split_off(4.min(payload.len()))))
                    } else {
                        Frame::text(Payload::Bytes(payload))
                    };
                    if write.write_frame(frame).await.is_err() {
                        failed = true;
                        break;
                    }
                }
                if failed {
                    break;
                }
            }
            ctl = ctl_rx.recv() => {
                match ctl {
                    // A pong or the echo of the client's close.
                    Some(f) => {
                        let close = f.opcode == OpCode::Close;
                        if write.write_frame(f).await.is_err() || close {
                            break;
                        }
                    }
                    None => break,
                }
            }
        }
    }
    reader.abort();
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::status::Status;

    fn headers(v: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for p in v {
            h.append(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_str(p).unwrap());
        }
        h
    }

    #[test]
    fn protocol_choice_follows_kube() {
        assert_eq!(choose_protocol(&headers(&[])).unwrap(), None);
        assert_eq!(
            choose_protocol(&headers(&["binary.k8s.io"]))
                .unwrap()
                .as_deref(),
            Some("binary.k8s.io")
        );
        let dash = format!("{BEARER_PROTOCOL_PREFIX}dG9rZW4, base64.binary.k8s.io");
        assert_eq!(
            choose_protocol(&headers(&[&dash])).unwrap().as_deref(),
            Some("base64.binary.k8s.io")
        );
        assert_eq!(
            Status::from(choose_protocol(&headers(&["a", "b"])).unwrap_err()).code,
            400
        );
        assert_eq!(
            Status::from(
                choose_protocol(&headers(&[&format!("{BEARER_PROTOCOL_PREFIX}x")])).unwrap_err()
            )
            .code,
            400
        );
    }
}
