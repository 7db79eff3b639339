//! What moves clients between replicas behind a balancer (issue 37): `server.goaway_chance`,
//! kube-apiserver's `--goaway-chance`. An HTTP/2 client stays on the connection it has; a
//! GOAWAY makes it open a new one for its next requests, while the streams in flight (its
//! watches) go on to their end.

use std::time::Duration;

use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::json;

use crate::common::{create_object, http2_connect, http2_get, proxy_for, sim};

/// One HTTP/2 connection's request sender ([`http2_connect`]).
type Http2Send = hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>;

/// The most requests one connection is given before the test gives up on a GOAWAY: at a
/// chance of 0.02 each, none drawn in 2,000 has a probability of 0.98^2000, about 3e-18.
const REQUESTS: usize = 2000;

/// Sends `/livez` on `send` one request at a time until the connection goes away or
/// `REQUESTS` were answered; returns how many were answered with 200.
async fn requests_until_goaway(url: &str, send: &mut Http2Send) -> usize {
    let mut answered = 0;
    for _ in 0..REQUESTS {
        if send.ready().await.is_err() {
            break;
        }
        let Ok(resp) = send.send_request(http2_get(url, "/livez", &[])).await else {
            // Sent while the GOAWAY was on its way: refused, as a client retries it.
            break;
        };
        assert_eq!(resp.status(), StatusCode::OK);
        resp.into_body().collect().await.expect("the body");
        answered += 1;
    }
    answered
}

/// A watch of the default namespace's ConfigMaps with `query` on `send`, its head received.
async fn configmaps_watch(
    url: &str,
    send: &mut Http2Send,
    query: &str,
) -> http::Response<hyper::body::Incoming> {
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&{query}");
    let watch = send
        .send_request(http2_get(url, &path, &[]))
        .await
        .expect("the watch's head");
    assert_eq!(watch.status(), StatusCode::OK);
    watch
}

/// The lines of a watch's whole body, parsed.
async fn lines_until_the_end(
    watch: http::Response<hyper::body::Incoming>,
) -> Vec<serde_json::Value> {
    lines_until_the_end_within(watch, Duration::from_secs(30)).await
}

/// [`lines_until_the_end`], the watch given up to `guard` to end.
async fn lines_until_the_end_within(
    watch: http::Response<hyper::body::Incoming>,
    guard: Duration,
) -> Vec<serde_json::Value> {
    // A guard, not a timing: the watch must end by itself.
    let body = tokio::time::timeout(guard, watch.into_body().collect())
        .await
        .expect("the watch ends")
        .expect("a clean end")
        .to_bytes();
    String::from_utf8_lossy(&body)
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event"))
        .collect()
}

/// An event's resourceVersion.
fn rv_of(e: &serde_json::Value) -> u64 {
    e["object"]["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("a resourceVersion")
}

/// Asserts that `lines` end with a BOOKMARK no older than the event of the object `name`.
fn ends_with_a_bookmark_after(lines: &[serde_json::Value], name: &str) {
    let event = lines
        .iter()
        .find(|e| e["object"]["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no event of {name}: {lines:?}"));
    let last = lines.last().expect("lines");
    assert_eq!(last["type"], "BOOKMARK", "{lines:?}");
    assert!(rv_of(last) >= rv_of(event), "{lines:?}");
}

/// A GOAWAY ends the connection gracefully: it takes no new request, and its cached watches
/// end at once, each just after a bookmark at its resourceVersion, so that the client makes
/// them again, from there and with no LIST, on its new connection (which the balancer may send
/// to another replica) instead of keeping the old connection open for as long as they last.
#[tokio::test]
async fn goaway_chance_ends_an_http2_connection_and_hands_its_watches_over() {
    let sim = sim().await;
    let px = proxy_for(&sim, |c| {
        c.server.goaway_chance = watchmux::config::MAX_GOAWAY_CHANCE;
    })
    .await;
    let cache = px.proxy.cache("", "v1", "configmaps").expect("cached");
    // Every HTTP/2 request draws, the watch's own too (as kube's filter draws for any request):
    // a watch that drew the GOAWAY itself is handed over at once, before the event (no request
    // after it is answered), and the test starts again on a new connection. At a chance of
    // 0.02, 5 such draws in a row have a probability of 3e-9.
    for attempt in 1..=5 {
        let mut send = http2_connect(&px.url).await;
        // A watch in flight on the connection before the GOAWAY, with an event.
        let watch = configmaps_watch(
            &px.url,
            &mut send,
            "allowWatchBookmarks=true&timeoutSeconds=60",
        )
        .await;
        let name = format!("before-goaway-{attempt}");
        create_object(
            &sim.url(),
            "/api/v1/namespaces/default/configmaps",
            &json!({"metadata": {"name": name}}),
        )
        .await;
        assert!(
            cache
                .wait_rv(sim.store().revision(), Duration::from_secs(30))
                .await,
            "the cache has the event"
        );
        let answered = requests_until_goaway(&px.url, &mut send).await;
        assert!(
            answered < REQUESTS,
            "no GOAWAY in {REQUESTS} requests at a chance of 0.02"
        );
        if answered == 0 {
            // The watch drew it: ended after its bookmark, as every handed-over watch ends.
            let lines = lines_until_the_end(watch).await;
            let last = lines.last().expect("lines");
            assert_eq!(last["type"], "BOOKMARK", "{lines:?}");
            continue;
        }
        // The connection takes no new request.
        let refused = async {
            send.ready().await.is_err()
                || send
                    .send_request(http2_get(&px.url, "/livez", &[]))
                    .await
                    .is_err()
        };
        assert!(refused.await, "a request after the GOAWAY");
        // The watch ended cleanly, its event first, a bookmark last.
        let lines = lines_until_the_end(watch).await;
        ends_with_a_bookmark_after(&lines, &name);
        let last = lines.last().expect("lines");
        // The client makes it again from the bookmark, on a new connection: what changed since
        // comes, with no 410.
        create_object(
            &sim.url(),
            "/api/v1/namespaces/default/configmaps",
            &json!({"metadata": {"name": "after-goaway"}}),
        )
        .await;
        let mut again = http2_connect(&px.url).await;
        let query = format!("resourceVersion={}&timeoutSeconds=2", rv_of(last));
        let resumed = configmaps_watch(&px.url, &mut again, &query).await;
        let events = lines_until_the_end(resumed).await;
        let names: Vec<&str> = events
            .iter()
            .filter_map(|e| e["object"]["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["after-goaway"], "{events:?}");
        // One watch handed over per connection.
        assert_eq!(
            crate::common::metric_sum(
                &px,
                "watchmux_watches_drained_total",
                &[("resource", "configmaps"), ("cause", "goaway")]
            )
            .await,
            f64::from(attempt)
        );
        return;
    }
    panic!("5 watches in a row drew their connection's GOAWAY");
}

#[tokio::test]
async fn without_goaway_chance_an_http2_connection_is_kept() {
    let sim = sim().await;
    let px = proxy_for(&sim, |c| {
        assert_eq!(c.server.goaway_chance, 0.0, "off by default");
    })
    .await;
    let mut send = http2_connect(&px.url).await;
    assert_eq!(requests_until_goaway(&px.url, &mut send).await, REQUESTS);
}

/// A watch whose client gave no `timeoutSeconds` ends cleanly after a random time in
/// [`min_request_timeout_secs`, twice that), after a bookmark 2 s before its end (kube's
/// cacher), so its client re-watches from where it was without a LIST, on a connection a
/// balancer may send elsewhere.
#[tokio::test]
async fn a_watch_without_timeout_seconds_ends_after_a_bookmark_within_min_request_timeout() {
    const MIN: Duration = Duration::from_secs(3);
    let sim = sim().await;
    let px = proxy_for(&sim, |c| c.server.min_request_timeout = MIN).await;
    let mut send = http2_connect(&px.url).await;
    let started = tokio::time::Instant::now();
    let watch = configmaps_watch(&px.url, &mut send, "allowWatchBookmarks=true").await;
    // The resource moves after the watch began: the bookmark before the end has something to
    // say.
    create_object(
        &sim.url(),
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "before-the-end"}}),
    )
    .await;
    let events = lines_until_the_end_within(watch, MIN * 2 + Duration::from_secs(30)).await;
    let lasted = started.elapsed();
    assert!(lasted >= MIN, "ended after {lasted:?}, before {MIN:?}");
    ends_with_a_bookmark_after(&events, "before-the-end");
}

/// `server.max_connection_age_secs`: an HTTP/2 connection is ended gracefully at its age (give
/// or take 10 %) whether or not its client sends requests, its cached watches each just after a
/// bookmark at its resourceVersion: what spreads the clients of a rolled replica set again in a
/// bounded time, where `goaway_chance` waits for requests.
#[tokio::test]
async fn an_http2_connection_ends_at_max_connection_age_and_hands_its_watches_over() {
    const AGE: Duration = Duration::from_secs(2);
    let sim = sim().await;
    let px = proxy_for(&sim, |c| c.server.max_connection_age = AGE).await;
    let started = tokio::time::Instant::now();
    let mut send = http2_connect(&px.url).await;
    // No timeoutSeconds, and min_request_timeout_secs at its 1800: only the age ends it.
    let watch = configmaps_watch(&px.url, &mut send, "allowWatchBookmarks=true").await;
    create_object(
        &sim.url(),
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "before-the-age"}}),
    )
    .await;
    let lines = lines_until_the_end(watch).await;
    let lasted = started.elapsed();
    assert!(
        lasted >= AGE.mul_f64(0.9),
        "ended after {lasted:?}, before {AGE:?} less 10 %"
    );
    ends_with_a_bookmark_after(&lines, "before-the-age");
    // The connection takes no new request.
    let refused = send.ready().await.is_err()
        || send
            .send_request(http2_get(&px.url, "/livez", &[]))
            .await
            .is_err();
    assert!(refused, "a request after the connection's age");
    for (name, labels) in [
        ("watchmux_connection_goaways_total", &[("cause", "age")][..]),
        (
            "watchmux_watches_drained_total",
            &[("resource", "configmaps"), ("cause", "goaway")][..],
        ),
    ] {
        assert_eq!(
            crate::common::metric_sum(&px, name, labels).await,
            1.0,
            "{name}"
        );
    }
}

/// The same age over HTTP/1.1 keep-alive: the cached watches a connection carries one after
/// another (each to its own `timeoutSeconds`) go on until it is that old; then the connection
/// closes after the watch in flight instead of reading another request.
#[tokio::test]
async fn an_http1_keep_alive_connection_closes_after_max_connection_age() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const AGE: Duration = Duration::from_secs(2);
    /// More watches of 1 s than fit in the age and its 10 %.
    const WATCHES: usize = 8;
    let sim = sim().await;
    let px = proxy_for(&sim, |c| c.server.max_connection_age = AGE).await;
    let addr = px.url.strip_prefix("http://").expect("a plain HTTP URL");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let started = tokio::time::Instant::now();
    let request = "GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1 HTTP/1.1\r\n\
                   Host: watchmux\r\n\r\n";
    let mut served = 0;
    let mut closed = false;
    let mut got = Vec::new();
    for _ in 0..WATCHES {
        if tcp.write_all(request.as_bytes()).await.is_err() {
            closed = true;
            break;
        }
        // Read to the chunked body's end, or to the connection's close.
        got.clear();
        let mut buf = [0u8; 4096];
        loop {
            let n = tokio::time::timeout(Duration::from_secs(30), tcp.read(&mut buf))
                .await
                .expect("a watch of 1 s ends")
                .unwrap_or(0);
            if n == 0 {
                closed = true;
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if got.ends_with(b"0\r\n\r\n") {
                break;
            }
        }
        if closed {
            break;
        }
        assert!(
            got.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&got)
        );
        served += 1;
        if started.elapsed() > AGE.mul_f64(1.1) {
            // Past the age: the connection closes after the watch just ended.
            let mut rest = [0u8; 1];
            let n = tokio::time::timeout(Duration::from_secs(30), tcp.read(&mut rest))
                .await
                .expect("closed")
                .unwrap_or(0);
            closed = n == 0;
            break;
        }
    }
    assert!(
        closed,
        "the connection served {served} watches and stayed open"
    );
    assert!(
        served >= 2,
        "closed after {served} watch(es), before its age"
    );
    assert_eq!(
        crate::common::metric_sum(
            &px,
            "watchmux_connection_goaways_total",
            &[("cause", "age")]
        )
        .await,
        1.0
    );
}
