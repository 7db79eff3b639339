//! Resource limits (issue 8), through a real watchmux in front of the simulator: concurrent
//! watches per client, concurrent cached LISTs, URL and header sizes, slow headers.

use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use kube_sim::fleet::FleetSpec;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{TestProxy, metric_sum, proxy_for, request, sim, sim_with, wait_until, watch};

fn addr_of(url: &str) -> std::net::SocketAddr {
    url.trim_start_matches("http://").parse().unwrap()
}

/// Asserts a kube 429 TooManyRequests with `Retry-After: 1`.
fn assert_too_many(status: StatusCode, headers: &http::HeaderMap, body: &[u8]) {
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        String::from_utf8_lossy(body)
    );
    assert_eq!(headers["retry-after"], "1");
    let v: Value = serde_json::from_slice(body).expect("Status JSON");
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["reason"], "TooManyRequests");
    assert_eq!(v["code"], 429);
    assert_eq!(v["details"]["retryAfterSeconds"], 1);
}

/// `watchmux_reads_total` of pods for `verb` from `source` with `reason`.
async fn pod_reads(px: &TestProxy, verb: &str, source: &str, reason: &str) -> f64 {
    metric_sum(
        px,
        "watchmux_reads_total",
        &[
            ("resource", "pods"),
            ("verb", verb),
            ("source", source),
            ("reason", reason),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watches_per_client_are_limited_and_freed() {
    let sim = sim().await;
    let px = proxy_for(&sim, |c| c.server.max_watches_per_client = 2).await;
    let client = "ip:127.0.0.1";
    let pods = format!("{}/api/v1/pods?watch=true&allowWatchBookmarks=true", px.url);
    let w1 = watch(&pods).await;
    assert_eq!(w1.status, StatusCode::OK);
    // The limit counts all cached resources of the client together.
    let w2 = watch(&format!("{}/api/v1/nodes?watch=true", px.url)).await;
    assert_eq!(w2.status, StatusCode::OK);
    assert_eq!(px.proxy.limits.watches_of(client), 2);

    let (s, h, b) = request(Method::GET, &pods, &[], "").await;
    assert_too_many(s, &h, &b);
    // Counted as refused, not as a watch served from the cache.
    assert_eq!(pod_reads(&px, "watch", "refused", "watch_limit").await, 1.0);
    assert_eq!(pod_reads(&px, "watch", "cache", "").await, 1.0, "w1");
    // Cached LISTs and pass-through watches (the upstream limits those) are not counted.
    let (s, _, _) = request(
        Method::GET,
        &format!("{}/api/v1/pods?resourceVersion=0", px.url),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let passed = watch(&format!("{}/api/v1/secrets?watch=true", px.url)).await;
    assert_eq!(passed.status, StatusCode::OK);
    drop(passed);

    // A client that goes away frees its slot: a new watch then succeeds.
    drop(w1);
    wait_until("slot freed after disconnect", 10, async || {
        px.proxy.limits.watches_of(client) == 1
    })
    .await;
    let w3 = watch(&pods).await;
    assert_eq!(w3.status, StatusCode::OK);
    let (s, h, b) = request(Method::GET, &pods, &[], "").await;
    assert_too_many(s, &h, &b);
    assert_eq!(pod_reads(&px, "watch", "refused", "watch_limit").await, 2.0);
    assert_eq!(pod_reads(&px, "watch", "cache", "").await, 2.0, "w1, w3");

    // A watch that ends (timeoutSeconds) frees its slot too.
    drop(w3);
    wait_until("slot freed", 10, async || {
        px.proxy.limits.watches_of(client) == 1
    })
    .await;
    let mut short = watch(&format!("{pods}&timeoutSeconds=1")).await;
    assert_eq!(short.status, StatusCode::OK);
    loop {
        match short.next_line(Duration::from_secs(5)).await {
            crate::common::Next::Line(_) => continue,
            crate::common::Next::End => break,
            other => panic!("watch did not end cleanly: {other:?}"),
        }
    }
    wait_until("slot freed after timeout", 10, async || {
        px.proxy.limits.watches_of(client) == 1
    })
    .await;
    drop(w2);
    wait_until("all slots freed", 10, async || {
        px.proxy.limits.watching_clients() == 0
    })
    .await;
}

/// Starts a cached LIST on a raw connection that stops reading after the status line, so the
/// list body stays in flight.
async fn stalled_list(url: &str) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(addr_of(url)).await.unwrap();
    s.write_all(b"GET /api/v1/pods?resourceVersion=0 HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_lists_are_limited_and_freed() {
    // Enough pods that the list body (~10 MB) cannot fit in the socket buffers.
    let sim = sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 10,
            pods: 6000,
            namespaces: 4,
            seed: 8,
        })
    })
    .await;
    let px = proxy_for(&sim, |c| c.server.max_concurrent_lists = 1).await;
    let list = format!("{}/api/v1/pods?resourceVersion=0", px.url);
    let stalled = stalled_list(&px.url).await;
    assert_eq!(px.proxy.limits.lists_in_flight(), 1);
    let (s, h, b) = request(Method::GET, &list, &[], "").await;
    assert_too_many(s, &h, &b);
    assert_eq!(pod_reads(&px, "list", "refused", "list_limit").await, 1.0);
    assert_eq!(
        metric_sum(
            &px,
            "watchmux_list_requests_total",
            &[("resource", "pods"), ("source", "refused")]
        )
        .await,
        1.0
    );
    // Watches and pass-through LISTs are not counted.
    let w = watch(&format!("{}/api/v1/pods?watch=true", px.url)).await;
    assert_eq!(w.status, StatusCode::OK);
    let (s, _, _) = request(
        Method::GET,
        &format!("{}/api/v1/services?limit=1", px.url),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK);

    // The client disconnects: the slot is freed.
    drop(stalled);
    wait_until("list slot freed", 10, async || {
        px.proxy.limits.lists_in_flight() == 0
    })
    .await;
    let (s, _, b) = request(Method::GET, &list, &[], "").await;
    assert_eq!(s, StatusCode::OK);
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 6000);
    // A list whose body was read to the end has freed its slot as well.
    assert_eq!(px.proxy.limits.lists_in_flight(), 0);
    let (s, _, _) = request(Method::GET, &list, &[], "").await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_urls_get_414_with_a_status() {
    let sim = sim().await;
    let px = proxy_for(&sim, |c| c.server.max_url_bytes = 1024).await;
    let pad = |n: usize| "a".repeat(n);
    // Within the limit: served (pass-through here).
    let ok = format!("/version?pad={}", pad(1000));
    assert!(ok.len() <= 1024);
    let (s, _, _) = request(Method::GET, &format!("{}{ok}", px.url), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    // Synced is not yet watching: each reflector sends its WATCH just after its LIST. Count
    // upstream requests only once all four are open, so a late WATCH is not taken for a leak.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while ["pods", "nodes", "namespaces", "configmaps"]
        .iter()
        .any(|r| sim.stats()["resources"][r]["openWatches"].as_u64() != Some(1))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reflectors did not open their upstream watches within 20 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let before = sim.stats()["requests"].as_u64().unwrap();
    for path in [
        format!("/version?pad={}", pad(1100)),
        format!(
            "/api/v1/pods?resourceVersion=0&labelSelector=a%20notin%20({})",
            pad(1100)
        ),
        format!("/api/v1/namespaces/{}/secrets", pad(1100)),
    ] {
        let (s, _, b) = request(Method::GET, &format!("{}{path}", px.url), &[], "").await;
        assert_eq!(s, StatusCode::URI_TOO_LONG, "{path}");
        let v: Value = serde_json::from_slice(&b).expect("Status JSON");
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["code"], 414);
        assert_eq!(v["reason"], "RequestURITooLong");
    }
    assert_eq!(
        sim.stats()["requests"].as_u64().unwrap(),
        before,
        "a rejected URL never reaches the upstream"
    );
}

/// Sends `req` on a raw connection and reads what comes back until the server closes.
async fn raw_exchange(url: &str, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr_of(url)).await.unwrap();
    s.write_all(req).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return out,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("server did not close the connection"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn oversized_headers_get_431() {
    let sim = sim().await;
    let px = proxy_for(&sim, |c| c.server.max_header_bytes = 16384).await;
    // Just within: served.
    let v = "b".repeat(12000);
    let (s, _, _) = request(
        Method::GET,
        &format!("{}/api/v1/pods?resourceVersion=0", px.url),
        &[("x-big", &v)],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    // Past it: hyper answers 431 (no body) and closes the connection. The request is a little
    // larger than the limit and fully sent, so hyper's read consumes it (no reset).
    let big = "b".repeat(16500);
    let req =
        format!("GET /api/v1/pods?resourceVersion=0 HTTP/1.1\r\nhost: x\r\nx-big: {big}\r\n\r\n");
    let resp = raw_exchange(&px.url, req.as_bytes()).await;
    let text = String::from_utf8_lossy(&resp);
    assert!(
        text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_headers_are_disconnected() {
    let sim = sim().await;
    let px = proxy_for(&sim, |c| {
        c.server.header_read_timeout = Duration::from_secs(1)
    })
    .await;
    let addr = addr_of(&px.url);
    // A partial request line, then nothing: closed without a response (no 408), like Go.
    let started = Instant::now();
    let resp = raw_exchange(&px.url, b"GET /api/v1/pods?wat").await;
    let took = started.elapsed();
    assert!(resp.is_empty(), "{}", String::from_utf8_lossy(&resp));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    // Headers trickling in past the timeout: the same.
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /api/v1/pods HTTP/1.1\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let mut closed = false;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        if s.write_all(b"x-a: b\r\n").await.is_err() {
            closed = true;
            break;
        }
        if let Ok(r) = tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf)).await {
            assert!(matches!(r, Ok(0) | Err(_)), "got a response");
            closed = true;
            break;
        }
    }
    assert!(closed, "still open after {:?}", started.elapsed());
    // A connection that sends nothing at all is closed too.
    let started = Instant::now();
    let resp = raw_exchange(&px.url, b"").await;
    assert!(resp.is_empty());
    assert!(started.elapsed() < Duration::from_secs(5));
    // A prompt request on the same server is still served.
    let resp = raw_exchange(
        &px.url,
        b"GET /api/v1/pods?resourceVersion=0 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(resp.starts_with(b"HTTP/1.1 200 OK\r\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_whose_request_has_a_body_ends_when_its_client_leaves() {
    let sim = sim().await;
    let px = proxy_for(&sim, |_| {}).await;
    let client = "ip:127.0.0.1";
    // A body announced and never (fully) sent: the watch does not read it, watchmux must still
    // read the connection, or it would not see the client leave and would serve the watch to
    // nobody until its timeout (found by `watchmux-bench httpfuzz`).
    for framing in [
        "content-length: 10\r\n\r\n{}",
        "transfer-encoding: chunked\r\n\r\n",
    ] {
        let mut s = TcpStream::connect(addr_of(&px.url)).await.unwrap();
        let req = format!("GET /api/v1/nodes?watch=true HTTP/1.1\r\nhost: x\r\n{framing}");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 200", "{framing}");
        assert_eq!(px.proxy.limits.watches_of(client), 1);
        drop(s);
        wait_until("the watch ends with its client", 10, async || {
            px.proxy.limits.watches_of(client) == 0
        })
        .await;
    }
    // A body past kube's 3 MiB request limit is not read to its end: the watch ends at once
    // (with the connection) rather than going on unread.
    let mut s = TcpStream::connect(addr_of(&px.url)).await.unwrap();
    let head =
        "GET /api/v1/nodes?watch=true HTTP/1.1\r\nhost: x\r\ncontent-length: 8000000\r\n\r\n";
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    let (mut rd, mut wr) = s.into_split();
    let writer = tokio::spawn(async move {
        let chunk = vec![b'x'; 64 << 10];
        for _ in 0..64 {
            if wr.write_all(&chunk).await.is_err() {
                return;
            }
        }
        std::future::pending::<()>().await;
    });
    wait_until("the watch ends past the body limit", 10, async || {
        px.proxy.limits.watches_of(client) == 0
    })
    .await;
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), rd.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the connection ends");
    writer.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_to_a_request_with_a_body_arrives_whole() {
    // A list body larger than the socket buffers, so it is still being written when the
    // request's body has been received.
    let sim = sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 4,
            pods: 1500,
            namespaces: 4,
            seed: 3,
        })
    })
    .await;
    let px = proxy_for(&sim, |_| {}).await;
    // kube ignores a GET's body; unread, it made the connection close with a reset that cut
    // the answer short (found by `watchmux-bench httpfuzz`).
    let body = "x".repeat(100_000);
    let (s, _, b) = request(
        Method::GET,
        &format!("{}/api/v1/pods?resourceVersion=0", px.url),
        &[],
        &body,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let v: Value = serde_json::from_slice(&b).expect("the whole list");
    assert_eq!(v["items"].as_array().map(Vec::len), Some(1500));
}

/// A kubelet multiplexes all its watches on one HTTP/2 connection: watchmux lets one client
/// have `server.http2_max_concurrent_streams` (1,000) streams open at once, not hyper's 200.
/// 300 cached watches opened together on one connection all start (past the server's limit,
/// the client would queue the rest until a watch ends, and none does).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_http2_connection_carries_more_than_200_watches_at_once() {
    const WATCHES: usize = 300;
    let sim = sim().await;
    let px = proxy_for(&sim, |c| {
        assert_eq!(c.server.http2_max_concurrent_streams, 1000, "the default");
    })
    .await;
    let send = crate::common::http2_connect(&px.url).await;
    let heads = (0..WATCHES).map(|i| {
        let mut send = send.clone();
        let req = crate::common::http2_get(
            &px.url,
            &format!(
                "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds={}",
                600 + i
            ),
            &[],
        );
        async move { send.send_request(req).await }
    });
    // Not a timing: a guard, should the connection hold fewer than WATCHES streams.
    let started = tokio::time::timeout(
        Duration::from_secs(60),
        futures_util::future::join_all(heads),
    )
    .await
    .expect("every watch's response head arrives");
    let mut open = Vec::new();
    for r in started {
        let resp = r.expect("a response");
        assert_eq!(resp.version(), http::Version::HTTP_2);
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(
            resp.headers()
                .contains_key("x-watchmux-cache-resource-version")
        );
        open.push(resp);
    }
    assert_eq!(open.len(), WATCHES);
    assert_eq!(px.proxy.limits.watches_of("ip:127.0.0.1"), WATCHES);
    assert_eq!(sim.stats()["resources"]["pods"]["openWatches"], 1);
}
