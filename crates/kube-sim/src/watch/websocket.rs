//! Watches on a websocket, as kube-apiserver serves them on the watch URLs
//! (`handlers/watch.go` `HandleWS` over `golang.org/x/net/websocket`): one message per watch
//! event, a text message carrying exactly the chunked JSON frame (its newline included), or in
//! protobuf a binary message with the bare `WatchEvent` (no 4-byte length); client messages are
//! ignored; when the watch ends the server closes the connection.
//!
//! It only carries frames the watcher made; it decides nothing about what a watch sends.

use std::convert::Infallible;
use std::io;

use bytes::{Bytes, BytesMut};
use fastwebsockets::upgrade::UpgradeFut;
use fastwebsockets::{Frame, OpCode, Payload};
use http::header::{HeaderValue, SEC_WEBSOCKET_PROTOCOL};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::http::Body;
use kube_wire::response::empty;

/// The subprotocol prefix that carries a bearer token (kube's authenticator strips it).
const BEARER_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// Where a watch's frames go.
pub enum Sink {
    /// The chunked body of the answer.
    Chunked,
    /// A websocket: the `101 Switching Protocols` answer, and the connection it upgrades to.
    Websocket(Response<Body>, UpgradeFut),
    /// A websocket handshake that fails, and its answer (a bare 400, as `x/net/websocket`).
    Refused(Response<Body>),
}

impl Sink {
    /// The sink a watch request asks for: a websocket when it is an upgrade request (echoing
    /// the one subprotocol offered besides a bearer token; several fail the handshake), the
    /// chunked body otherwise.
    pub fn of(req: &mut Request<Incoming>) -> Sink {
        if !fastwebsockets::upgrade::is_upgrade_request(req) {
            return Sink::Chunked;
        }
        let offered: Vec<String> = req
            .headers()
            .get_all(SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|p| !p.is_empty() && !p.starts_with(BEARER_PROTOCOL_PREFIX))
            .map(str::to_string)
            .collect();
        if offered.len() > 1 {
            return Sink::Refused(bad_handshake());
        }
        match fastwebsockets::upgrade::upgrade(req) {
            Ok((resp, fut)) => {
                let (mut parts, _) = resp.into_parts();
                if let Some(p) = offered.first().and_then(|p| HeaderValue::from_str(p).ok()) {
                    parts.headers.insert(SEC_WEBSOCKET_PROTOCOL, p);
                }
                Sink::Websocket(Response::from_parts(parts, empty()), fut)
            }
            Err(_) => Sink::Refused(bad_handshake()),
        }
    }
}

fn bad_handshake() -> Response<Body> {
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r
}

fn owned(f: Frame<'_>) -> Frame<'static> {
    Frame::new(f.fin, f.opcode, None, Payload::Owned(f.payload.to_vec()))
}

/// Writes each frame the watcher sends as one message (`binary`: protobuf frames, sent without
/// their length) until the watch ends (then a normal close), the client closes, the
/// connection fails, or the simulator stops. A watcher's abort (an `Err`) drops the connection
/// without a close, as a cut stream.
pub async fn pump(
    fut: UpgradeFut,
    mut rx: mpsc::Receiver<Result<hyper::body::Frame<Bytes>, io::Error>>,
    binary: bool,
    cancel: CancellationToken,
) {
    let Ok(ws) = fut.await else { return };
    let (mut read, mut write) =
        ws.split(|io: TokioIo<hyper::upgrade::Upgraded>| tokio::io::split(io));
    // The reader answers pings and echoes a close through this channel; it ends with the
    // connection.
    let (ctl_tx, mut ctl_rx) = mpsc::channel::<Frame<'static>>(4);
    let reader = tokio::spawn(async move {
        loop {
            let mut send = |f: Frame<'_>| {
                let tx = ctl_tx.clone();
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
    });
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                None => {
                    let _ = write.write_frame(Frame::close(1000, b"")).await;
                    break;
                }
                Some(Err(_)) => break,
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else { continue };
                    let message = if binary {
                        Frame::binary(Payload::Bytes(BytesMut::from(data.get(4..).unwrap_or_default())))
                    } else {
                        Frame::text(Payload::Bytes(BytesMut::from(&data[..])))
                    };
                    if write.write_frame(message).await.is_err() {
                        break;
                    }
                }
            },
            ctl = ctl_rx.recv() => match ctl {
                Some(f) => {
                    let close = f.opcode == OpCode::Close;
                    if write.write_frame(f).await.is_err() || close {
                        break;
                    }
                }
                None => break,
            },
            _ = cancel.cancelled() => break,
        }
    }
    reader.abort();
}
