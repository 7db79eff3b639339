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
    // A guard, not a timing: the watch must end by itself.
    let body = tokio::time::timeout(Duration::from_secs(30), watch.into_body().collect())
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
    let mut send = http2_connect(&px.url).await;
    // A watch in flight on the connection before the GOAWAY, with an event.
    let watch = configmaps_watch(
        &px.url,
        &mut send,
        "allowWatchBookmarks=true&timeoutSeconds=60",
    )
    .await;
    create_object(
        &sim.url(),
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "before-goaway"}}),
    )
    .await;
    let cache = px.proxy.cache("", "v1", "configmaps").expect("cached");
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
    let added = lines
        .iter()
        .find(|e| e["object"]["metadata"]["name"] == "before-goaway")
        .expect("the event before the GOAWAY");
    let last = lines.last().expect("lines");
    assert_eq!(last["type"], "BOOKMARK", "{lines:?}");
    assert!(rv_of(last) >= rv_of(added), "{lines:?}");
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
    assert_eq!(
        crate::common::metric_sum(
            &px,
            "watchmux_watches_drained_total",
            &[("resource", "configmaps"), ("cause", "goaway")]
        )
        .await,
        1.0
    );
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
    // A guard, not a timing: the watch must end by itself.
    let all = tokio::time::timeout(MIN * 2 + Duration::from_secs(30), async {
        watch.into_body().collect().await.expect("a clean end")
    })
    .await
    .expect("the watch ends by itself")
    .to_bytes();
    let lasted = started.elapsed();
    assert!(lasted >= MIN, "ended after {lasted:?}, before {MIN:?}");
    let text = String::from_utf8_lossy(&all);
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event"))
        .collect();
    let created = events
        .iter()
        .position(|e| e["object"]["metadata"]["name"] == "before-the-end")
        .expect("the ADDED event");
    let last = events.last().expect("events");
    assert_eq!(last["type"], "BOOKMARK", "{text}");
    assert!(rv_of(last) >= rv_of(&events[created]), "{text}");
}
