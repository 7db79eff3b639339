//! Websocket watch, as kube-apiserver serves it on the same watch URLs (spec §2.7): one message
//! per watch event: a text message whose payload is exactly the chunked frame (JSON and its
//! newline), or in protobuf a binary message with the bare `WatchEvent`; client messages are
//! ignored (read as kube reads them, [`kube_wire::websocket_in`]: never buffered, a ping
//! answered, a close or a frame over 32 MiB ending the watch); when the watch ends the server
//! closes the connection.
//!
//! This is the only file that names the websocket crate (fastwebsockets), behind
//! [`upgrade`] and [`pump`] ([`pump_io`] on any byte stream: the fuzz harness drives it with
//! in-memory I/O). A refused handshake is a [`WebsocketError`] (`crate::error` makes
//! it kube's 400). It must not decide what the watch sends: the frames come ready-made from
//! [`super::watch`].

use crate::downstream::request_body::ReqBody;
use bytes::{BufMut, BytesMut};
use fastwebsockets::{Frame, OpCode, Payload, Role};
use futures_util::{Stream, StreamExt};
use http::header::{HeaderMap, HeaderValue, SEC_WEBSOCKET_PROTOCOL};
use http::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite};
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
pub fn is_websocket(req: &Request<ReqBody>) -> bool {
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
    req: &mut Request<ReqBody>,
    protocol: Option<&str>,
) -> Result<(Response<Body>, fastwebsockets::upgrade::UpgradeFut), WebsocketError> {
    let (resp, fut) = fastwebsockets::upgrade::upgrade(req).map_err(WebsocketError::Handshake)?;
    let (mut parts, _) = resp.into_parts();
    if let Some(p) = protocol.and_then(|p| HeaderValue::from_str(p).ok()) {
        parts.headers.insert(SEC_WEBSOCKET_PROTOCOL, p);
    }
    Ok((Response::from_parts(parts, empty()), fut))
}

/// Reads the client's side of a watch websocket as kube does ([`kube_wire::websocket_in`]):
/// data frames skipped unread, pings answered, and the watch ended (with a close frame) by the
/// client's close, a frame over 32 MiB, an unmasked frame or the end of its stream. Reads into a
/// fixed buffer: nothing a client announces is ever buffered.
async fn read_client<R: AsyncRead + Unpin>(mut read: R, ctl: mpsc::Sender<Frame<'static>>) {
    use kube_wire::websocket_in::{ClientFrames, Inbound};
    use tokio::io::AsyncReadExt;
    let mut frames = ClientFrames::default();
    let mut buf = vec![0u8; 8 * 1024];
    let mut out = Vec::new();
    while !frames.ended() {
        match read.read(&mut buf).await {
            Ok(0) | Err(_) => frames.finish(&mut out),
            Ok(n) => frames.feed(buf.get(..n).unwrap_or_default(), &mut out),
        }
        for e in out.drain(..) {
            let f = match e {
                Inbound::Ping(p) => Frame::pong(Payload::Owned(p)),
                Inbound::End(code) => Frame::close(code, b""),
            };
            if ctl.send(f).await.is_err() {
                return;
            }
        }
    }
}

/// Writes each watch event as one message until the watch ends (then a normal close), the
/// client's side ends it (see [`read_client`]), or the connection fails. Pings are answered. JSON events are text messages
/// (the chunked frame); protobuf events (`binary`) are binary messages carrying the
/// `WatchEvent` without the 4-byte length of the chunked framing, as kube's websocket framer
/// writes them.
pub async fn pump(
    fut: fastwebsockets::upgrade::UpgradeFut,
    rx: impl Stream<Item = Out> + Unpin + Send,
    binary: bool,
) {
    let Ok(ws) = fut.await else { return };
    // Nothing was read from the socket yet: its stream is all there is to it.
    pump_io(ws.into_inner(), rx, binary).await;
}

/// [`pump`] on the byte stream of an upgraded connection: the server's side of the websocket
/// is set up here, so the connections the server upgrades and the in-memory ones the fuzz
/// harness drives are read with the same settings.
pub async fn pump_io<S>(io: S, mut rx: impl Stream<Item = Out> + Unpin + Send, binary: bool)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (read, write) = tokio::io::split(io);
    let (_, mut write) =
        fastwebsockets::after_handshake_split(tokio::io::empty(), write, Role::Server);
    // The reader answers pings and ends the watch through this channel.
    let (ctl_tx, mut ctl_rx) = mpsc::channel::<Frame<'static>>(4);
    let reader = tokio::spawn(read_client(read, ctl_tx));
    loop {
        tokio::select! {
            out = rx.next() => {
                let Some(out) = out else {
                    let _ = write.write_frame(Frame::close(1000, b"")).await;
                    break;
                };
                // One websocket message per event, whatever the batching upstream of here.
                let mut m = BytesMut::with_capacity(out.len());
                for part in out.parts() {
                    m.put_slice(part);
                }
                let payloads = [m];
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
