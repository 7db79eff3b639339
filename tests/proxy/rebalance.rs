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

#[tokio::test]
async fn goaway_chance_ends_an_http2_connection_gracefully_and_its_watch_goes_on() {
    let sim = sim().await;
    let px = proxy_for(&sim, |c| {
        c.server.goaway_chance = watchmux::config::MAX_GOAWAY_CHANCE;
    })
    .await;
    let mut send = http2_connect(&px.url).await;
    // A watch in flight on the connection before the GOAWAY.
    let watch = configmaps_watch(&px.url, &mut send, "timeoutSeconds=60").await;
    let answered = requests_until_goaway(&px.url, &mut send).await;
    assert!(
        answered < REQUESTS,
        "no GOAWAY in {REQUESTS} requests at a chance of 0.02"
    );
    // The connection takes no new request; the watch on it still delivers.
    let refused = async {
        send.ready().await.is_err()
            || send
                .send_request(http2_get(&px.url, "/livez", &[]))
                .await
                .is_err()
    };
    assert!(refused.await, "a request after the GOAWAY");
    create_object(
        &sim.url(),
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "after-goaway"}}),
    )
    .await;
    let mut body = watch.into_body();
    let event = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let frame = body
                .frame()
                .await
                .expect("the stream goes on")
                .expect("data");
            if let Ok(d) = frame.into_data()
                && String::from_utf8_lossy(&d).contains("after-goaway")
            {
                return String::from_utf8_lossy(&d).into_owned();
            }
        }
    })
    .await
    .expect("the event after the GOAWAY");
    assert!(event.contains("\"ADDED\""), "{event}");
    // A new connection is served as before.
    let mut again = http2_connect(&px.url).await;
    assert!(requests_until_goaway(&px.url, &mut again).await > 0);
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
    let rv = |e: &serde_json::Value| {
        e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .expect("a resourceVersion")
    };
    assert!(rv(last) >= rv(&events[created]), "{text}");
}
