//! Shared test harness: watchmux in front of a simulator, plus the simulator's test kit (a
//! simulator per test, a raw HTTP client that reads watch streams line by line, kubectl).
#![allow(dead_code)]

use std::time::Duration;

use kube_sim::Simulator;
pub use kube_sim::testkit::*;
pub use relay::Relay;

pub mod churn;
mod informer;
pub mod kubelet;
pub mod recorder;
mod relay;
pub use informer::Informer;
pub mod watch_log;

/// Polls `cond` every 50 ms until it holds; fails, naming `what`, once `secs` seconds passed.
pub async fn wait_until(what: &str, secs: u64, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {secs} s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A watchmux proxy in front of a simulator, on 127.0.0.1; stops when dropped.
pub struct TestProxy {
    pub proxy: std::sync::Arc<watchmux::app::App>,
    pub url: String,
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.proxy.cancel.cancel();
    }
}

/// The resources tests cache: pods, nodes, namespaces, configmaps (listed mode: every other
/// kind passes through; tests of on-demand caching set `mode` themselves).
pub const TEST_CACHE: &str = r#"
[cache]
mode = "listed"
bookmark_interval_secs = 1
[[cache.resources]]
version = "v1"
resource = "pods"
[[cache.resources]]
version = "v1"
resource = "nodes"
[[cache.resources]]
version = "v1"
resource = "namespaces"
[[cache.resources]]
version = "v1"
resource = "configmaps"
"#;

/// Starts watchmux in front of `sim` with [`TEST_CACHE`] adjusted by `f`, and waits until every
/// cached resource has synced.
pub async fn proxy_for(
    sim: &Simulator,
    f: impl FnOnce(&mut watchmux::config::Config),
) -> TestProxy {
    proxy_at(&sim.url(), ANY_PORT, f).await
}

/// watchmux in on-demand mode (nothing listed: every kind is cached from its first read) in
/// front of `sim`, adjusted by `f`.
pub async fn on_demand(
    sim: &Simulator,
    f: impl FnOnce(&mut watchmux::config::Config),
) -> TestProxy {
    proxy_for(sim, |c| {
        c.cache.mode = watchmux::config::CacheMode::OnDemand;
        c.cache.resources.clear();
        f(c)
    })
    .await
}

/// watchmux (plain HTTP on loopback) caching pods, nodes, namespaces and configmaps, with
/// the upstream set by `f`; does not wait for the sync.
pub async fn proxy_with(f: impl FnOnce(&mut watchmux::config::Config)) -> TestProxy {
    let mut config = watchmux::config::Config::from_toml_str(TEST_CACHE, "test config").unwrap();
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    config.cache.not_ready_wait = Duration::ZERO;
    f(&mut config);
    config.validate().expect("valid test config");
    let upstream = watchmux::upstream::Upstream::new(&config.upstream).expect("upstream client");
    let proxy = watchmux::app::App::start(&config, upstream);
    let addr = watchmux::downstream::bind_and_serve(proxy.clone(), config.server.listen)
        .await
        .expect("bind");
    TestProxy {
        proxy,
        url: format!("http://{addr}"),
    }
}

/// Any free loopback port, for [`proxy_at`].
pub const ANY_PORT: std::net::SocketAddr = std::net::SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    0,
));

/// Starts watchmux in front of the apiserver at `upstream` (a simulator's URL, or another
/// watchmux's: a tier) listening on `listen`, with [`TEST_CACHE`] adjusted by `f`, and waits
/// until every cached resource has synced (or was restored from `cache.persist_dir`).
/// Connections are accepted as `[server]` says (TLS, the PROXY protocol's trusted sources). A
/// `listen` port that a watchmux just stopped held is bound as soon as its listener is gone
/// (within 10 s): a restart on the same address, so that a tier in front keeps its upstream URL.
pub async fn proxy_at(
    upstream: &str,
    listen: std::net::SocketAddr,
    f: impl FnOnce(&mut watchmux::config::Config),
) -> TestProxy {
    let mut config = watchmux::config::Config::from_toml_str(TEST_CACHE, "test config")
        .expect("test config parses");
    config.upstream.url = Some(upstream.parse().unwrap());
    config.server.listen = listen;
    // Tests simulate whole fleets of clients, all from 127.0.0.1 (one client for
    // `server.max_watches_per_client`): lift the per-client and LIST limits unless `f` sets them
    // (tests/limits.rs does).
    config.server.max_watches_per_client = 100_000;
    config.server.max_concurrent_lists = 100_000;
    f(&mut config);
    config.validate().expect("valid test config");
    let upstream = watchmux::upstream::Upstream::new(&config.upstream).expect("upstream client");
    let proxy = watchmux::app::App::start(&config, upstream);
    let acceptor =
        watchmux::downstream::Acceptor::from_config(&config.server).expect("serving files load");
    let scheme = acceptor.scheme();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let addr = loop {
        let served = watchmux::downstream::bind_and_serve_with(
            proxy.clone(),
            config.server.listen,
            acceptor.clone(),
        );
        match served.await {
            Ok(a) => break a,
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("bind {}: {e}", config.server.listen),
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !proxy.ready() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watchmux did not sync within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    TestProxy {
        proxy,
        url: format!("{scheme}://{addr}"),
    }
}

impl TestProxy {
    /// The address it listens on (to start its successor on, with [`proxy_at`]).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .expect("a plain HTTP proxy URL")
    }

    /// A clean stop, as `SIGTERM` makes one: watches end, connections close, the reflectors
    /// stop and the persisted cache writes its last batch; the port is free once it returns.
    pub async fn stop(self) {
        self.proxy.shutdown().await;
    }
}

/// `path?query` with `resourceVersion`/`resourceVersionMatch` removed and `continue` set, as
/// client-go's pager builds the next page's request.
pub fn continuation(pq: &str, token: &str) -> String {
    let (path, q) = pq.split_once('?').unwrap_or((pq, ""));
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(q.as_bytes()) {
        if k != "resourceVersion" && k != "resourceVersionMatch" && k != "continue" {
            s.append_pair(&k, &v);
        }
    }
    s.append_pair("continue", token);
    format!("{path}?{}", s.finish())
}

/// GETs `path_query` from `base` with `accept`: status and body.
pub async fn get_accepting(
    base: &str,
    path_query: &str,
    accept: &str,
) -> (http::StatusCode, bytes::Bytes) {
    let (s, _, b) = request(
        http::Method::GET,
        &format!("{base}{path_query}"),
        &[("accept", accept)],
        "",
    )
    .await;
    (s, b)
}

/// The simulator's answer to `path_query` with `accept` (which must be a 200).
pub async fn sim_answer(sim: &Simulator, path_query: &str, accept: &str) -> bytes::Bytes {
    let (s, b) = get_accepting(&sim.url(), path_query, accept).await;
    assert_eq!(
        s,
        http::StatusCode::OK,
        "{path_query}: {}",
        String::from_utf8_lossy(&b)
    );
    b
}

/// List, other (get) and watch requests the simulator has served for `resources`.
pub fn upstream_reads(sim: &Simulator, resources: &[&str]) -> (u64, u64, u64) {
    let s = sim.stats();
    let sum = |k: &str| {
        resources
            .iter()
            .map(|r| s["resources"][r][k].as_u64().expect("counter"))
            .sum::<u64>()
    };
    (
        sum("listRequests"),
        sum("otherRequests"),
        sum("watchRequests"),
    )
}

/// Waits until the simulator has a watch open on each of `resources` (the reflectors', when the
/// test holds none of its own): a reflector between its LIST and its WATCH would count its
/// WATCH as a read of whatever the test sends meanwhile.
pub async fn reflectors_watching(sim: &Simulator, resources: &[&str]) {
    wait_until("the reflectors' upstream watches", 10, async || {
        let s = sim.stats();
        resources
            .iter()
            .all(|r| s["resources"][r]["openWatches"].as_u64() >= Some(1))
    })
    .await;
}

/// Waits until the simulator has no watch open on any of `resources`, after a fault that drops
/// them (`refuse_connections_for`): a watch ends asynchronously, and until it has it may still
/// carry what the test writes next. A reflector that heard a burst meant to be learnt by a
/// relist re-watches from the revision a compaction then leaves, which needs no relist.
/// Polled often: the fault's refusal is short, and the reflectors watch again after it.
pub async fn upstream_watches_gone(sim: &Simulator, resources: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = sim.stats();
        if resources
            .iter()
            .all(|r| s["resources"][r]["openWatches"].as_u64() == Some(0))
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream watches of {resources:?} were not dropped"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// watchmux's answer to `path` with `accept` (a 200), which must not reach the simulator's
/// `resources`.
pub async fn from_the_cache(
    sim: &Simulator,
    px: &TestProxy,
    resources: &[&str],
    path: &str,
    accept: &str,
) -> bytes::Bytes {
    reflectors_watching(sim, resources).await;
    let before = upstream_reads(sim, resources);
    let (s, b) = get_accepting(&px.url, path, accept).await;
    assert_eq!(
        s,
        http::StatusCode::OK,
        "{path}: {}",
        String::from_utf8_lossy(&b)
    );
    assert_eq!(
        upstream_reads(sim, resources),
        before,
        "{path} ({accept}) reached the simulator"
    );
    b
}

/// `body` with the list's own resourceVersion (the first one: the list's metadata) blanked: the
/// cache's is its resource's, the simulator's its store's.
pub fn without_list_rv(body: &[u8]) -> String {
    let s = String::from_utf8(body.to_vec()).expect("UTF-8");
    let key = "\"metadata\":{\"resourceVersion\":\"";
    let Some(i) = s.find(key) else { return s };
    let start = i + key.len();
    let end = start + s[start..].find('"').expect("closing quote");
    format!("{}{}", &s[..start], &s[end..])
}

/// Starts the `watchmux` binary with `watchmux serve --config <config>` (a config whose
/// `[log] format = "json"`), killed when the child is dropped; each stdout log line arrives
/// parsed on the receiver (a line that is not JSON fails the test).
pub fn spawn_watchmux(
    config: &std::path::Path,
) -> (
    tokio::process::Child,
    tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchmux"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .env_remove("WATCHMUX_LOG")
        .env_remove("WATCHMUX_LOG_FORMAT")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let stdout = child.stdout.take().unwrap();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            let v: serde_json::Value = serde_json::from_str(&l)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}"));
            let _ = tx.send(v);
        }
    });
    (child, rx)
}

/// The items of a protobuf List answer (`k8s\0` + `Unknown{raw: XList{2: item…}}`), each the
/// object's message as the cache stores it.
pub fn protobuf_list_items(body: &[u8]) -> Vec<&[u8]> {
    use prost::encoding::{WireType, decode_key, decode_varint, skip_field};
    let unk = kube_wire::proto::envelope::unwrap(body).expect("a protobuf List");
    let mut buf = unk.raw;
    let mut items = Vec::new();
    while !buf.is_empty() {
        let (tag, wt) = decode_key(&mut buf).unwrap();
        if tag == 2 && wt == WireType::LengthDelimited {
            let len = decode_varint(&mut buf).unwrap() as usize;
            items.push(&buf[..len]);
            buf = &buf[len..];
        } else {
            skip_field(wt, tag, &mut buf, Default::default()).unwrap();
        }
    }
    items
}

/// One HTTP/2 connection to `base` (`http://host:port`, prior knowledge, as a kubelet's
/// client-go speaks it after ALPN): requests are sent on it with absolute URIs, as many at once
/// as the server's `SETTINGS_MAX_CONCURRENT_STREAMS` allows (past it they queue in the client).
pub async fn http2_connect(
    base: &str,
) -> hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>> {
    let addr = base.strip_prefix("http://").expect("a plain HTTP URL");
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let _ = tcp.set_nodelay(true);
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("HTTP/2 handshake");
    tokio::spawn(conn);
    send
}

/// A GET of `base` + `path_query` with `headers`, for [`http2_connect`]'s connection.
pub fn http2_get(
    base: &str,
    path_query: &str,
    headers: &[(&str, &str)],
) -> http::Request<http_body_util::Empty<bytes::Bytes>> {
    let mut b = http::Request::get(format!("{base}{path_query}"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(http_body_util::Empty::new()).expect("a request")
}

/// Creates `obj` at `collection` (a path on the simulator, or on a proxy in front of it);
/// panics unless that succeeds.
pub async fn create_object(base: &str, collection: &str, obj: &serde_json::Value) {
    let (s, body) = send_json(
        http::Method::POST,
        &format!("{base}{collection}"),
        "application/json",
        obj,
    )
    .await;
    assert!(s.is_success(), "create at {collection}: {s} {body}");
}

/// The sum of the samples of the metric `name` on `px`'s `/metrics` whose labels include all of
/// `labels`.
pub async fn metric_sum(px: &TestProxy, name: &str, labels: &[(&str, &str)]) -> f64 {
    let (_, _, body) = request(http::Method::GET, &format!("{}/metrics", px.url), &[], "").await;
    let text = String::from_utf8(body.to_vec()).expect("UTF-8 metrics");
    let mut sum = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
        if n != name {
            continue;
        }
        let have = rest.trim_end_matches('}');
        if labels
            .iter()
            .all(|(k, v)| have.split(',').any(|p| p == format!("{k}=\"{v}\"")))
        {
            sum += value.parse::<f64>().expect("a number");
        }
    }
    sum
}
