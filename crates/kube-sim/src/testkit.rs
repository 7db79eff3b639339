//! Test kit for anything that talks to a simulator over HTTP: a simulator with test-friendly
//! timings, a small raw client whose watch streams are read line by line, and [`kubectl`] runs
//! isolated from the user's kubeconfig. For tests only: every call panics on a failure, with a
//! message that says what did not happen in time.
//!
//! The client speaks plain HTTP only (no TLS) and goes over the wire like any client; nothing here
//! reaches into a simulator's store.

pub mod kubectl;

use std::time::Duration;

use crate::{SimConfig, Simulator};
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// A simulator with test-friendly timings (bookmarks every second).
pub async fn sim() -> Simulator {
    sim_with(|_| {}).await
}

/// A simulator with a customised config.
pub async fn sim_with(f: impl FnOnce(&mut SimConfig)) -> Simulator {
    let mut cfg = SimConfig {
        bookmark_interval: Duration::from_secs(1),
        ..SimConfig::default()
    };
    cfg.timings.pod_termination = Duration::from_millis(200);
    cfg.timings.namespace_cleanup = Duration::from_millis(50);
    f(&mut cfg);
    Simulator::start(cfg).await.expect("simulator starts")
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends a request and returns the response with its body unread.
pub async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> hyper::Response<Incoming> {
    let mut b = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    tokio::time::timeout(Duration::from_secs(10), client().request(req))
        .await
        .expect("response within 10 s")
        .expect("request succeeds")
}

/// Sends a request and reads the whole body.
pub async fn request(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, HeaderMap, Bytes) {
    let resp = send(method, url, headers, body).await;
    let (parts, body) = resp.into_parts();
    let bytes = tokio::time::timeout(Duration::from_secs(10), body.collect())
        .await
        .expect("body within 10 s")
        .expect("body")
        .to_bytes();
    (parts.status, parts.headers, bytes)
}

/// GET returning status and JSON body.
pub async fn get_json(url: &str) -> (StatusCode, Value) {
    let (s, _, b) = request(Method::GET, url, &[], "").await;
    (
        s,
        serde_json::from_slice(&b)
            .unwrap_or_else(|e| panic!("{url}: not JSON ({e}): {}", String::from_utf8_lossy(&b))),
    )
}

/// A request with a JSON body, returning status and JSON body.
pub async fn send_json(
    method: Method,
    url: &str,
    content_type: &str,
    body: &Value,
) -> (StatusCode, Value) {
    let (s, _, b) = request(
        method,
        url,
        &[("content-type", content_type)],
        &body.to_string(),
    )
    .await;
    (
        s,
        serde_json::from_slice(&b)
            .unwrap_or_else(|e| panic!("{url}: not JSON ({e}): {}", String::from_utf8_lossy(&b))),
    )
}

/// What reading a watch stream produced.
#[derive(Debug)]
pub enum Next {
    /// One line (without the newline).
    Line(Bytes),
    /// The stream ended cleanly.
    End,
    /// The connection was aborted.
    Aborted,
    /// Nothing arrived in time.
    Timeout,
}

/// A watch response read line by line.
pub struct WatchStream {
    /// The response status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    body: Incoming,
    buf: BytesMut,
    ended: bool,
}

/// Opens a watch (any GET whose body is a newline-delimited stream).
pub async fn watch(url: &str) -> WatchStream {
    watch_with(url, &[]).await
}

/// Opens a watch with extra headers.
pub async fn watch_with(url: &str, headers: &[(&str, &str)]) -> WatchStream {
    let resp = send(Method::GET, url, headers, "").await;
    let (parts, body) = resp.into_parts();
    WatchStream {
        status: parts.status,
        headers: parts.headers,
        body,
        buf: BytesMut::new(),
        ended: false,
    }
}

/// Opens a watch like [`watch`], but a server that is not there (refusing or dropping the
/// connection, or silent for 10 s) is `None` rather than a panic: for clients that resume
/// against a server that restarts.
pub async fn try_watch(url: &str) -> Option<WatchStream> {
    try_watch_within(url, Duration::from_secs(10)).await
}

/// [`try_watch`] with another bound on the answer's head: `None` when it does not come within
/// `wait`.
pub async fn try_watch_within(url: &str, wait: Duration) -> Option<WatchStream> {
    let req = Request::builder()
        .method(Method::GET)
        .uri(url)
        .body(Full::new(Bytes::new()))
        .ok()?;
    let resp = tokio::time::timeout(wait, client().request(req))
        .await
        .ok()?
        .ok()?;
    let (parts, body) = resp.into_parts();
    Some(WatchStream {
        status: parts.status,
        headers: parts.headers,
        body,
        buf: BytesMut::new(),
        ended: false,
    })
}

impl WatchStream {
    /// The next line, waiting up to `t`.
    pub async fn next_line(&mut self, t: Duration) -> Next {
        let deadline = tokio::time::Instant::now() + t;
        loop {
            if let Some(i) = self.buf.iter().position(|&c| c == b'\n') {
                let line = self.buf.split_to(i + 1).freeze();
                return Next::Line(line.slice(..line.len() - 1));
            }
            if let Some(stop) = self.read_more(deadline).await {
                return stop;
            }
        }
    }

    /// Reads the next piece of the body into the buffer; what stopped the stream instead (its
    /// end, once the buffer was read to it; an abort; nothing by `deadline`).
    async fn read_more(&mut self, deadline: tokio::time::Instant) -> Option<Next> {
        if self.ended {
            return Some(Next::End);
        }
        match tokio::time::timeout_at(deadline, self.body.frame()).await {
            Err(_) => Some(Next::Timeout),
            Ok(None) => {
                self.ended = true;
                None
            }
            Ok(Some(Err(_))) => Some(Next::Aborted),
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    self.buf.extend_from_slice(&d);
                }
                None
            }
        }
    }

    /// The next frame of a protobuf watch (kube's length-delimited framing: a 4-byte big-endian
    /// length, then a `WatchEvent` message), without its length; `Err` with what ended the
    /// stream instead.
    pub async fn next_frame(&mut self, t: Duration) -> Result<Bytes, Next> {
        let deadline = tokio::time::Instant::now() + t;
        loop {
            if self.buf.len() >= 4 {
                let n = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                if self.buf.len() >= 4 + n {
                    let mut f = self.buf.split_to(4 + n);
                    return Ok(f.split_off(4).freeze());
                }
            }
            if let Some(stop) = self.read_more(deadline).await {
                return Err(stop);
            }
        }
    }

    /// The next event as JSON; panics on anything else.
    pub async fn next_event(&mut self, t: Duration) -> Value {
        match self.next_line(t).await {
            Next::Line(l) => serde_json::from_slice(&l)
                .unwrap_or_else(|e| panic!("bad event ({e}): {}", String::from_utf8_lossy(&l))),
            other => panic!("expected an event, got {other:?}"),
        }
    }

    /// The next event that is not a BOOKMARK.
    pub async fn next_non_bookmark(&mut self, t: Duration) -> Value {
        loop {
            let e = self.next_event(t).await;
            if e["type"] != "BOOKMARK" {
                return e;
            }
        }
    }

    /// Collects events until `pred` holds for one (inclusive) or `t` passes.
    pub async fn until(&mut self, t: Duration, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + t;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_line(left).await {
                Next::Line(l) => {
                    let v: Value = serde_json::from_slice(&l).expect("event JSON");
                    let done = pred(&v);
                    out.push(v);
                    if done {
                        return out;
                    }
                }
                other => panic!("stream stopped before the condition held: {other:?}; got {out:?}"),
            }
        }
    }
}

/// A loopback port nothing listens on (bound, then released at once).
#[allow(
    clippy::disallowed_types,
    reason = "bind and local_addr never block; the listener is dropped at once"
)]
pub fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// An object's (or a list's) `metadata.resourceVersion`, as a number.
pub fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion in {v}"))
        .parse()
        .unwrap()
}

/// A minimal valid pod.
pub fn pod(name: &str, node: &str, labels: Value) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]}
    })
}
