//! Watches on a websocket, as kube-apiserver serves them on the watch URLs
//! (`handlers/watch.go` `HandleWS` over `golang.org/x/net/websocket`): one message per watch
//! event, a text message carrying exactly the chunked JSON frame (its newline included), or in
//! protobuf a binary message with the bare `WatchEvent` (no 4-byte length); client messages are
//! ignored (read as kube reads them, [`kube_wire::websocket_in`]: never buffered, a ping
//! answered, a close or a frame over 32 MiB ending the watch); when the watch ends the server
//! closes the connection.
//!
//! It only carries frames the watcher made; it decides nothing about what a watch sends.

use std::io;

use bytes::{Bytes, BytesMut};
use fastwebsockets::upgrade::UpgradeFut;
use fastwebsockets::{Frame, OpCode, Payload};
use http::header::{HeaderValue, SEC_WEBSOCKET_PROTOCOL};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
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

/// Reads the client's side of a watch websocket as kube does ([`kube_wire::websocket_in`]):
/// data frames skipped unread, pings answered, and the watch ended (with a close frame) by the
/// client's close, a frame over 32 MiB, an unmasked frame or the end of its stream. Reads into a
/// fixed buffer: nothing a client announces is ever buffered.
async fn read_client<R: tokio::io::AsyncRead + Unpin>(
    mut read: R,
    ctl: mpsc::Sender<Frame<'static>>,
) {
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

/// Writes each frame the watcher sends as one message (`binary`: protobuf frames, sent without
/// their length) until the watch ends (then a normal close), the client's side ends it (see
/// [`read_client`]), the connection fails, or the simulator stops. A watcher's abort (an `Err`)
/// drops the connection without a close, as a cut stream.
pub async fn pump(
    fut: UpgradeFut,
    mut rx: mpsc::Receiver<Result<hyper::body::Frame<Bytes>, io::Error>>,
    binary: bool,
    cancel: CancellationToken,
) {
    let Ok(ws) = fut.await else { return };
    // Nothing was read from the connection yet: its stream is all there is to it.
    let (read, write) = tokio::io::split(ws.into_inner());
    let (_, mut write) = fastwebsockets::after_handshake_split(
        tokio::io::empty(),
        write,
        fastwebsockets::Role::Server,
    );
    // The reader answers pings and ends the watch through this channel.
    let (ctl_tx, mut ctl_rx) = mpsc::channel::<Frame<'static>>(4);
    let reader = tokio::spawn(read_client(read, ctl_tx));
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
