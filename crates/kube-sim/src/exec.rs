//! The streaming subresources of pods (`exec`, `attach`, `portforward`) as an echo: enough to
//! prove that a proxy carries the upgrade (SPDY/3.1 or websocket) and the bytes both ways.
//! A real kubelet behind kube-apiserver would run a process; the simulator echoes what it gets.
//!
//! It does not look at the pod's containers or phase: the caller checks only that the pod exists.

use bytes::Bytes;
use http::header::{CONNECTION, SEC_WEBSOCKET_PROTOCOL, UPGRADE};
use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http::{Body, full};
use kube_wire::status::Status;

/// Subresources served by [`serve`].
pub const STREAMING: &[&str] = &["exec", "attach", "portforward"];

/// Answers an upgrade request to a pod's streaming subresource with 101 and echoes.
pub fn serve(
    mut req: Request<Incoming>,
    tasks: &tokio_util::task::TaskTracker,
) -> Result<Response<Body>, Status> {
    let upgrade = req
        .headers()
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let protocols: Vec<String> = req
        .headers()
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .chain(req.headers().get_all("X-Stream-Protocol-Version").iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty() && !p.starts_with("base64url.bearer.authorization.k8s.io."))
        .collect();
    let chosen = protocols
        .first()
        .cloned()
        .unwrap_or_else(|| "v4.channel.k8s.io".into());
    if upgrade.contains("websocket") {
        let (resp, fut) = fastwebsockets::upgrade::upgrade(&mut req)
            .map_err(|e| Status::bad_request(format!("websocket handshake: {e}")))?;
        tasks.spawn(async move {
            let Ok(mut ws) = fut.await else { return };
            ws.set_auto_close(true);
            ws.set_auto_pong(true);
            while let Ok(frame) = ws.read_frame().await {
                match frame.opcode {
                    fastwebsockets::OpCode::Close => break,
                    fastwebsockets::OpCode::Text | fastwebsockets::OpCode::Binary => {
                        let echo = fastwebsockets::Frame::new(
                            true,
                            frame.opcode,
                            None,
                            fastwebsockets::Payload::Owned(frame.payload.to_vec()),
                        );
                        if ws.write_frame(echo).await.is_err() {
                            break;
                        }
                    }
                    _ => {}
                }
            }
        });
        let (mut parts, _) = resp.into_parts();
        if let Ok(v) = HeaderValue::from_str(&chosen) {
            parts.headers.insert(SEC_WEBSOCKET_PROTOCOL, v);
        }
        return Ok(Response::from_parts(parts, full(Bytes::new())));
    }
    if upgrade.starts_with("spdy/") {
        let on = hyper::upgrade::on(&mut req);
        tasks.spawn(async move {
            let Ok(up) = on.await else { return };
            let mut io = TokioIo::new(up);
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match io.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if io.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut r = Response::new(full(Bytes::new()));
        *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        r.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        r.headers_mut()
            .insert(UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        if let Ok(v) = HeaderValue::from_str(&chosen) {
            r.headers_mut().insert("X-Stream-Protocol-Version", v);
        }
        return Ok(r);
    }
    Err(Status::bad_request("Upgrade request required"))
}
