//! HTTP response building shared by the proxy and the simulator: JSON and Status answers with
//! kube-apiserver's headers, and list bodies streamed from stored bytes.

use std::convert::Infallible;
use std::io;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;

use crate::status::Status;

/// The response body type used everywhere.
pub type Body = BoxBody<Bytes, io::Error>;

/// A complete body.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|e: Infallible| match e {})
        .boxed()
}

/// A JSON response with kube-apiserver's standard headers.
pub fn json_response(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    with_json_headers(Response::new(full(body)), code)
}

fn with_json_headers(mut r: Response<Body>, code: StatusCode) -> Response<Body> {
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    r
}

/// The HTTP answer for a Status (with `Retry-After` when it carries one).
pub fn status_response(s: &Status) -> Response<Body> {
    let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = json_response(code, s.to_json());
    if let Some(ra) = s.retry_after() {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(ra));
    }
    r
}

/// A streamed JSON response (a watch, or a list built from stored items).
pub fn stream_response<S>(stream: S) -> Response<Body>
where
    S: futures_util::Stream<Item = Result<Frame<Bytes>, io::Error>> + Send + Sync + 'static,
{
    with_json_headers(
        Response::new(BodyExt::boxed(StreamBody::new(stream))),
        StatusCode::OK,
    )
}

/// The head of a List body: `{"kind":…,"apiVersion":…,"metadata":{…},"items":[`.
pub fn list_head(list_kind: &str, api_version: &str, metadata: &serde_json::Value) -> String {
    format!(
        "{{\"kind\":\"{list_kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{metadata},\"items\":["
    )
}

/// Streams `head`, the items joined by commas, then `]}` in chunks of about 64 KiB, so a large
/// list is never copied into one buffer and never re-encoded. Returns the body and its length.
pub fn stream_list(head: String, items: Vec<Bytes>) -> (Response<Body>, usize) {
    const CHUNK: usize = 64 * 1024;
    let total = head.len()
        + items.iter().map(Bytes::len).sum::<usize>()
        + items.len().saturating_sub(1)
        + 2;
    let mut iter = items.into_iter().enumerate();
    let mut head = Some(head);
    let mut finished = false;
    let stream = futures_util::stream::poll_fn(move |_| {
        if finished {
            return std::task::Poll::Ready(None);
        }
        let mut buf = BytesMut::with_capacity(CHUNK);
        if let Some(h) = head.take() {
            buf.put_slice(h.as_bytes());
        }
        while buf.len() < CHUNK {
            match iter.next() {
                Some((i, item)) => {
                    if i > 0 {
                        buf.put_u8(b',');
                    }
                    buf.put_slice(&item);
                }
                None => {
                    buf.put_slice(b"]}");
                    finished = true;
                    break;
                }
            }
        }
        std::task::Poll::Ready(Some(Ok::<_, io::Error>(Frame::data(buf.freeze()))))
    });
    (stream_response(stream), total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn streams_a_list_that_parses() {
        let items: Vec<Bytes> = (0..3000)
            .map(|i| Bytes::from(format!("{{\"metadata\":{{\"name\":\"n{i}\"}}}}")))
            .collect();
        let head = list_head("PodList", "v1", &serde_json::json!({"resourceVersion":"5"}));
        let (resp, total) = stream_list(head, items);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), total);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["items"].as_array().unwrap().len(), 3000);
        let (resp, _) = stream_list(
            list_head("PodList", "v1", &serde_json::json!({})),
            Vec::new(),
        );
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            &body[..],
            br#"{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}"#
        );
    }

    #[test]
    fn status_carries_retry_after() {
        let r = status_response(&Status::too_many_requests("storage is (re)initializing", 1));
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[RETRY_AFTER], "1");
    }
}
