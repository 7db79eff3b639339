//! Observability: `/metrics` after a scenario (churn, watchers, a 410, a 429, a slow client,
//! pass-through calls, an upstream outage with a relist) has the values the scenario implies;
//! `/readyz`, `/livez`, `/healthz`; graceful shutdown; the binary's JSON logs and SIGTERM; the
//! Grafana dashboard and alert rules name only metrics a running watchmux exports (the
//! Kubernetes manifests are checked in `deploy`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use watchmux::app::App;
use watchmux::config::Config;

use crate::common::{Next, TestProxy, WatchStream, dead_port};

const T: Duration = Duration::from_secs(10);

// ---- a Prometheus text-format parser ----------------------------------------------------------

/// One sample: name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The parsed exposition: samples and each family's TYPE.
#[derive(Debug, Default)]
struct Exposition {
    samples: Vec<Sample>,
    types: HashMap<String, String>,
}

impl Exposition {
    /// Parses the Prometheus text format (0.0.4) strictly enough to catch malformed output:
    /// HELP/TYPE lines, label syntax with escapes, float values, every sample under a TYPE,
    /// histogram buckets cumulative and ending at `+Inf` = `_count`.
    fn parse(text: &str) -> Result<Exposition, String> {
        let mut e = Exposition::default();
        for (i, line) in text.lines().enumerate() {
            let at = |m: &str| format!("line {}: {m}: {line:?}", i + 1);
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                let mut parts = rest.splitn(3, ' ');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some("HELP"), Some(n), _) if valid_name(n) => {}
                    (Some("TYPE"), Some(n), Some(t))
                        if valid_name(n)
                            && matches!(
                                t,
                                "counter" | "gauge" | "histogram" | "summary" | "untyped"
                            ) =>
                    {
                        if e.types.insert(n.to_string(), t.to_string()).is_some() {
                            return Err(at("duplicate TYPE"));
                        }
                    }
                    _ => return Err(at("bad comment line")),
                }
                continue;
            }
            let (name, rest) = match line.find(['{', ' ']) {
                Some(p) => line.split_at(p),
                None => return Err(at("no value")),
            };
            if !valid_name(name) {
                return Err(at("bad metric name"));
            }
            let mut labels = BTreeMap::new();
            let rest = if let Some(r) = rest.strip_prefix('{') {
                let mut chars = r.char_indices().peekable();
                let end;
                loop {
                    let start = match chars.peek() {
                        Some((_, '}')) => {
                            end = chars.next().unwrap().0;
                            break;
                        }
                        Some((p, _)) => *p,
                        None => return Err(at("unterminated labels")),
                    };
                    let eq = r[start..].find('=').ok_or_else(|| at("label without ="))? + start;
                    let key = &r[start..eq];
                    if !valid_name(key) || key.contains(':') {
                        return Err(at("bad label name"));
                    }
                    while chars.peek().is_some_and(|(p, _)| *p <= eq) {
                        chars.next();
                    }
                    if chars.next().map(|(_, c)| c) != Some('"') {
                        return Err(at("label value not quoted"));
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next() {
                            Some((_, '\\')) => match chars.next() {
                                Some((_, 'n')) => value.push('\n'),
                                Some((_, '\\')) => value.push('\\'),
                                Some((_, '"')) => value.push('"'),
                                _ => return Err(at("bad escape")),
                            },
                            Some((_, '"')) => break,
                            Some((_, c)) => value.push(c),
                            None => return Err(at("unterminated label value")),
                        }
                    }
                    if labels.insert(key.to_string(), value).is_some() {
                        return Err(at("duplicate label"));
                    }
                    if chars.peek().is_some_and(|(_, c)| *c == ',') {
                        chars.next();
                    }
                }
                &r[end + 1..]
            } else {
                rest
            };
            let value = rest
                .strip_prefix(' ')
                .ok_or_else(|| at("no space before the value"))?;
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                "NaN" => f64::NAN,
                v => v.parse().map_err(|_| at("value is not a float"))?,
            };
            let family = family_of(name, &e.types).ok_or_else(|| at("sample without TYPE"))?;
            let _ = family;
            e.samples.push(Sample {
                name: name.to_string(),
                labels,
                value,
            });
        }
        e.check_histograms()?;
        Ok(e)
    }

    fn check_histograms(&self) -> Result<(), String> {
        for (fam, t) in &self.types {
            if t != "histogram" {
                continue;
            }
            let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for s in self
                .samples
                .iter()
                .filter(|s| s.name == format!("{fam}_bucket"))
            {
                let mut l = s.labels.clone();
                let le = l.remove("le").ok_or("bucket without le")?;
                let le: f64 = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().map_err(|_| format!("bad le {le}"))?
                };
                series
                    .entry(format!("{l:?}"))
                    .or_default()
                    .push((le, s.value));
            }
            for (l, buckets) in series {
                let mut prev = (f64::NEG_INFINITY, 0.0);
                for b in &buckets {
                    if b.0 <= prev.0 || b.1 < prev.1 {
                        return Err(format!("{fam}{l}: buckets not cumulative: {buckets:?}"));
                    }
                    prev = *b;
                }
                if prev.0 != f64::INFINITY {
                    return Err(format!("{fam}{l}: no +Inf bucket"));
                }
                let count = self
                    .samples
                    .iter()
                    .find(|s| s.name == format!("{fam}_count") && format!("{:?}", s.labels) == l)
                    .ok_or_else(|| format!("{fam}{l}: no _count"))?;
                if count.value != prev.1 {
                    return Err(format!("{fam}{l}: +Inf bucket != _count"));
                }
            }
        }
        Ok(())
    }

    /// The value of `name{labels}` (labels must match exactly).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    /// Like [`Exposition::get`], panicking with the available series when absent.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or_else(|| {
            let have: Vec<String> = self
                .samples
                .iter()
                .filter(|s| s.name == name)
                .map(|s| format!("{:?}", s.labels))
                .collect();
            panic!("no sample {name}{labels:?}; have {have:?}")
        })
    }

    fn names(&self) -> BTreeSet<String> {
        self.samples.iter().map(|s| s.name.clone()).collect()
    }
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

fn family_of<'a>(name: &'a str, types: &HashMap<String, String>) -> Option<&'a str> {
    if types.contains_key(name) {
        return Some(name);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && types
                .get(base)
                .is_some_and(|t| t == "histogram" || t == "summary")
        {
            return Some(base);
        }
    }
    None
}

// ---- helpers ------------------------------------------------------------------------------

/// Starts watchmux in front of `upstream` with the test cache config adjusted by `f`, without
/// waiting for anything.
async fn start(upstream: &str, f: impl FnOnce(&mut Config)) -> TestProxy {
    let mut config = Config::from_toml_str(crate::common::TEST_CACHE, "test config").unwrap();
    config.upstream.url = Some(upstream.parse().unwrap());
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    f(&mut config);
    config.validate().expect("valid test config");
    let upstream = watchmux::upstream::Upstream::new(&config.upstream).unwrap();
    let proxy = App::start(&config, upstream);
    let addr = watchmux::downstream::bind_and_serve(proxy.clone(), config.server.listen)
        .await
        .unwrap();
    TestProxy {
        proxy,
        url: format!("http://{addr}"),
    }
}

async fn wait_synced(p: &TestProxy, resources: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    for r in resources {
        loop {
            if p.proxy.cache("", "v1", r).is_some_and(|c| c.is_synced()) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{r} did not sync");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn scrape(url: &str) -> Exposition {
    let (s, h, b) = crate::common::request(Method::GET, &format!("{url}/metrics"), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        h["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = String::from_utf8(b.to_vec()).expect("metrics are UTF-8");
    Exposition::parse(&text).unwrap_or_else(|e| panic!("/metrics does not parse: {e}"))
}

/// Scrapes until `pred` holds (or panics after `t`).
async fn scrape_until(url: &str, t: Duration, pred: impl Fn(&Exposition) -> bool) -> Exposition {
    let deadline = tokio::time::Instant::now() + t;
    loop {
        let e = scrape(url).await;
        if pred(&e) {
            return e;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the metrics did not reach the expected state in {t:?}: {:?}",
            e.samples
                .iter()
                .filter(|s| s.name.starts_with("watchmux_watchers")
                    || s.name.starts_with("watchmux_slow_watchers")
                    || s.name.starts_with("watchmux_upstream_watch_up"))
                .map(|s| format!("{}{:?}={}", s.name, s.labels, s.value))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn text_get(url: &str) -> (StatusCode, String) {
    let (s, _, b) = crate::common::request(Method::GET, url, &[], "").await;
    (s, String::from_utf8(b.to_vec()).unwrap())
}

/// What a client read from a watch: lines by event type, and bytes (newlines included).
#[derive(Debug, Default, Clone)]
struct Seen {
    by_type: BTreeMap<String, u64>,
    bytes: u64,
    lines: Vec<Value>,
}

impl Seen {
    fn add(&mut self, line: &[u8]) {
        let v: Value = serde_json::from_slice(line).expect("event JSON");
        *self
            .by_type
            .entry(v["type"].as_str().unwrap().to_string())
            .or_default() += 1;
        self.bytes += line.len() as u64 + 1;
        self.lines.push(v);
    }

    fn count(&self, ty: &str) -> u64 {
        self.by_type.get(ty).copied().unwrap_or(0)
    }

    fn non_bookmarks(&self) -> usize {
        self.lines
            .iter()
            .filter(|v| v["type"] != "BOOKMARK")
            .count()
    }
}

/// Reads a chunked watch until it has `n` non-bookmark events.
async fn read_chunked(w: &mut WatchStream, seen: &mut Seen, n: usize) {
    while seen.non_bookmarks() < n {
        match w.next_line(T).await {
            Next::Line(l) => seen.add(&l),
            other => panic!("watch stopped after {seen:?}: {other:?}"),
        }
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn read_ws(ws: &mut Ws, seen: &mut Seen, n: usize) {
    while seen.non_bookmarks() < n {
        match tokio::time::timeout(T, ws.next()).await.expect("a message") {
            Some(Ok(Message::Text(t))) => {
                let t = t.as_bytes();
                assert_eq!(t.last(), Some(&b'\n'));
                seen.add(&t[..t.len() - 1]);
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("websocket watch stopped: {other:?}"),
        }
    }
}

/// The number of items of a List body and the sum of their JSON lengths as sent.
fn list_items(body: &[u8]) -> (usize, u64) {
    #[derive(serde::Deserialize)]
    struct L<'a> {
        #[serde(borrow)]
        items: Vec<&'a serde_json::value::RawValue>,
    }
    let l: L<'_> = serde_json::from_slice(body).expect("a List");
    (
        l.items.len(),
        l.items.iter().map(|r| r.get().len() as u64).sum(),
    )
}

/// The items of a protobuf List answer and their bytes.
fn protobuf_list_items(body: &[u8]) -> (usize, u64) {
    let items = crate::common::protobuf_list_items(body);
    (items.len(), items.iter().map(|i| i.len() as u64).sum())
}

/// Collects JSON log lines until one satisfies `pred`.
async fn log_until(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    log: &mut Vec<Value>,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        let v = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a log line in time")
            .expect("the process is running");
        log.push(v.clone());
        if pred(&v) {
            return v;
        }
    }
}

fn unbound_pod(name: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "obs"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    })
    .to_string()
}

// ---- the scenario -------------------------------------------------------------------------

const WIDGETS: &str = "widgets.example.com";

/// Churn, watchers on both transports, a 410, a 429, a bad watch, a slow client, cache and
/// pass-through LISTs, writes, an upstream outage with a compaction (relist after 410): every
/// metric has the value that implies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_a_scenario_have_the_implied_values() {
    let sim = crate::common::sim().await;
    let p = start(&sim.url(), |c| {
        // Watchers fall back to the log after 4 queued events, and are closed 128 KiB behind.
        c.cache.watcher_queue = 4;
        c.cache.watcher_max_lag_bytes = 128 << 10;
        // No periodic bookmarks: every byte a watcher gets is an event the test counts.
        c.cache.bookmark_interval = Duration::from_secs(3600);
        // A cached resource the upstream does not serve: never synced, answers 429 at once.
        c.cache.not_ready_wait = Duration::ZERO;
        c.cache.resources.push(watchmux::config::ResourceSpec::new(
            "example.com",
            "v1",
            "widgets",
        ));
    })
    .await;
    wait_synced(&p, &["pods", "nodes", "namespaces", "configmaps"]).await;
    let url = p.url.clone();
    let pods_url = format!("{url}/api/v1/namespaces/default/pods");

    // Watchers: chunked, watch-list (chunked), websocket. Each start is "ok".
    let mut w1 = crate::common::watch(&format!("{url}/api/v1/pods?watch=1")).await;
    assert_eq!(w1.status, 200);
    let mut w2 = crate::common::watch(&format!(
        "{url}/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
    ))
    .await;
    assert_eq!(w2.status, 200);
    let (mut s1, mut s2, mut s3) = (Seen::default(), Seen::default(), Seen::default());
    // The watch-list's only bookmark: the end of the (empty) initial events.
    match w2.next_line(T).await {
        Next::Line(l) => s2.add(&l),
        other => panic!("{other:?}"),
    }
    assert_eq!(s2.count("BOOKMARK"), 1);
    let req = format!("{url}/api/v1/pods?watch=1")
        .replace("http://", "ws://")
        .into_client_request()
        .unwrap();
    let (mut w3, _) = tokio_tungstenite::connect_async(req).await.unwrap();

    // A watch from a resourceVersion older than the cache's window: an ERROR event with 410.
    let mut gone =
        crate::common::watch(&format!("{url}/api/v1/pods?watch=1&resourceVersion=1")).await;
    let mut s_gone = Seen::default();
    match gone.next_line(T).await {
        Next::Line(l) => s_gone.add(&l),
        other => panic!("{other:?}"),
    }
    assert_eq!(s_gone.lines[0]["object"]["code"], 410);
    assert!(matches!(gone.next_line(T).await, Next::End));
    // A malformed watch (error) and two requests for the resource that never syncs (429).
    let (s, _, _) = crate::common::request(
        Method::GET,
        &format!("{url}/api/v1/pods?watch=1&timeoutSeconds=x"),
        &[],
        "",
    )
    .await;
    assert!(s.is_client_error(), "{s}");
    let widgets = format!("{url}/apis/example.com/v1/widgets");
    let (s, _, _) =
        crate::common::request(Method::GET, &format!("{widgets}?watch=1"), &[], "").await;
    assert_eq!(s, 429);
    let (s, _, _) = crate::common::request(
        Method::GET,
        &format!("{widgets}?resourceVersion=0"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 429);

    // Churn through watchmux (pass-through writes): 10 creates, 5 patches, 3 deletes.
    let mut pass_bytes: HashMap<&str, u64> = HashMap::new();
    let json_ct = [("content-type", "application/json")];
    for i in 0..10 {
        let (s, _, b) = crate::common::request(
            Method::POST,
            &pods_url,
            &json_ct,
            &unbound_pod(&format!("p{i}")),
        )
        .await;
        assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
        *pass_bytes.entry("create").or_default() += b.len() as u64;
    }
    for i in 0..5 {
        let (s, _, b) = crate::common::request(
            Method::PATCH,
            &format!("{pods_url}/p{i}"),
            &[("content-type", "application/merge-patch+json")],
            r#"{"metadata":{"labels":{"patched":"yes"}}}"#,
        )
        .await;
        assert_eq!(s, 200);
        *pass_bytes.entry("patch").or_default() += b.len() as u64;
    }
    for i in 7..10 {
        let (s, _, b) =
            crate::common::request(Method::DELETE, &format!("{pods_url}/p{i}"), &[], "").await;
        assert_eq!(s, 200);
        *pass_bytes.entry("delete").or_default() += b.len() as u64;
    }
    read_chunked(&mut w1, &mut s1, 18).await;
    read_chunked(&mut w2, &mut s2, 18).await;
    read_ws(&mut w3, &mut s3, 18).await;
    for s in [&s1, &s2, &s3] {
        assert_eq!(
            (s.count("ADDED"), s.count("MODIFIED"), s.count("DELETED")),
            (10, 5, 3)
        );
    }

    // LISTs of pods: 7 from the cache (any state, consistent, a page, a Table), 1 passed
    // through (a v1beta1 Table, which the cache does not print); 1 of an uncached kind.
    for q in [
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/pods?resourceVersion=0&limit=2",
        "/api/v1/pods?resourceVersion=0&labelSelector=patched%3Dyes",
        "/api/v1/namespaces/default/pods?resourceVersion=0",
    ] {
        let (s, _, b) = crate::common::request(Method::GET, &format!("{url}{q}"), &[], "").await;
        assert_eq!(s, 200);
        assert_eq!(
            list_items(&b).0,
            if q.contains("patched") { 5 } else { 7 },
            "{q}"
        );
    }
    for (q, accept, cached) in [
        ("/api/v1/pods", "application/json", true),
        ("/api/v1/pods?limit=3", "application/json", true),
        (
            "/api/v1/pods?resourceVersion=0",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            true,
        ),
        (
            "/api/v1/pods?resourceVersion=0",
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            false,
        ),
        ("/api/v1/services", "application/json", false),
    ] {
        let (s, _, b) =
            crate::common::request(Method::GET, &format!("{url}{q}"), &[("accept", accept)], "")
                .await;
        assert_eq!(s, 200, "{q}");
        if !cached {
            *pass_bytes.entry("list").or_default() += b.len() as u64;
        }
    }
    // A GET of one pod: from the cache (a consistent read).
    let (s, _, _) = crate::common::request(Method::GET, &format!("{pods_url}/p0"), &[], "").await;
    assert_eq!(s, 200);

    // An upstream outage: the reflectors' watches break; 3 pods are created and the history
    // compacted meanwhile, so the re-watch gets 410 and the relist is bridged to the watchers.
    let pods_rt = sim.resource("", "v1", "pods").unwrap();
    sim.faults()
        .refuse_connections_for(Duration::from_millis(1500));
    crate::common::upstream_watches_gone(&sim, &["pods"]).await;
    for i in 10..13 {
        sim.ops()
            .create(
                &pods_rt,
                Some("default"),
                serde_json::from_str(&unbound_pod(&format!("p{i}"))).unwrap(),
                false,
            )
            .unwrap();
    }
    sim.store().compact_now();
    read_chunked(&mut w1, &mut s1, 21).await;
    read_chunked(&mut w2, &mut s2, 21).await;
    read_ws(&mut w3, &mut s3, 21).await;
    for s in [&s1, &s2, &s3] {
        assert_eq!(s.count("ADDED"), 13, "the bridge delivered the 3 new pods");
    }

    // A slow client: a raw connection with a tiny receive buffer that sends a configmaps watch
    // and never reads; then 5 MB of configmaps.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut slow = sock
        .connect(p.url.trim_start_matches("http://").parse().unwrap())
        .await
        .unwrap();
    // From any state (`resourceVersion=0`): a consistent start right after the outage could be
    // handed to the upstream (the quiet configmaps' resourceVersion may be older than the
    // upstream's compacted history, so freshness cannot be proven by replaying from it).
    slow.write_all(
        b"GET /api/v1/configmaps?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: watchmux\r\n\r\n",
    )
    .await
    .unwrap();
    scrape_until(&url, T, |e| {
        e.get(
            "watchmux_watchers",
            &[("resource", "configmaps"), ("transport", "chunked")],
        ) == Some(1.0)
    })
    .await;
    // Kernel socket buffers (loopback autotunes up to several MB), hyper's queue and the
    // watcher's channel absorb a few MB before the watcher falls behind: write 1 MB batches
    // until it is closed (at most 40 MB).
    let cm = sim.resource("", "v1", "configmaps").unwrap();
    let filler = "x".repeat(40 << 10);
    let mut configmaps = 0;
    loop {
        for _ in 0..25 {
            sim.ops()
                .create(
                    &cm,
                    Some("default"),
                    json!({"metadata": {"name": format!("cm{configmaps}")}, "data": {"filler": filler}}),
                    false,
                )
                .unwrap();
            configmaps += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let e = scrape(&url).await;
        if e.get(
            "watchmux_slow_watchers_closed_total",
            &[("resource", "configmaps")],
        ) == Some(1.0)
        {
            break;
        }
        assert!(configmaps < 1000, "the slow client was never closed");
    }
    let m = scrape_until(&url, Duration::from_secs(30), |e| {
        e.get(
            "watchmux_slow_watchers_closed_total",
            &[("resource", "configmaps")],
        ) == Some(1.0)
            && e.get(
                "watchmux_watchers",
                &[("resource", "configmaps"), ("transport", "chunked")],
            ) == Some(0.0)
            && e.get("watchmux_upstream_watch_up", &[("resource", "pods")]) == Some(1.0)
    })
    .await;
    drop(slow);

    // ---- what the scenario implies ----
    let pods = [("resource", "pods")];
    let v = |name: &str, labels: &[(&str, &str)]| m.value(name, labels);
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut l = vec![("resource", "pods")];
        l.extend_from_slice(extra);
        l
    };

    // Cache.
    assert_eq!(v("watchmux_cache_objects", &pods), 10.0);
    // Cached bytes: a protobuf LIST from the cache carries each stored object verbatim (pods
    // are read from the upstream, and stored, in protobuf; taken after the scrape, so it does
    // not count in it).
    let (_, _, b) = crate::common::request(
        Method::GET,
        &format!("{url}/api/v1/pods?resourceVersion=0"),
        &[("accept", "application/vnd.kubernetes.protobuf")],
        "",
    )
    .await;
    assert_eq!(
        protobuf_list_items(&b),
        (10, v("watchmux_cache_bytes", &pods) as u64)
    );
    let cache_rv = v("watchmux_cache_resource_version", &pods);
    assert!(cache_rv > 0.0 && cache_rv <= sim.store().revision() as f64);
    assert_eq!(v("watchmux_cache_synced", &pods), 1.0);
    assert_eq!(v("watchmux_cache_synced", &[("resource", WIDGETS)]), 0.0);
    assert_eq!(v("watchmux_cache_events_applied_total", &pods), 18.0);
    assert_eq!(
        v("watchmux_cache_window_events", &pods),
        21.0,
        "18 events + 3 bridged"
    );
    assert!(v("watchmux_cache_window_age_seconds", &pods) > 0.0);
    assert_eq!(
        v(
            "watchmux_cache_relists_total",
            &with(&[("outcome", "bridged")])
        ),
        1.0
    );
    assert_eq!(
        v(
            "watchmux_cache_relists_total",
            &with(&[("outcome", "reset")])
        ),
        0.0
    );
    assert!(v("watchmux_cache_deliveries_total", &pods) >= 3.0 * 18.0);
    assert!(v("watchmux_cache_selector_evaluations_total", &pods) >= 3.0 * 18.0);
    assert_eq!(
        v("watchmux_cache_objects", &[("resource", "configmaps")]),
        configmaps as f64
    );

    // Upstream.
    let up_events = |ty: &'static str| v("watchmux_upstream_events_total", &with(&[("type", ty)]));
    assert_eq!(up_events("ADDED"), 10.0);
    assert_eq!(up_events("MODIFIED"), 5.0);
    assert_eq!(up_events("DELETED"), 3.0);
    let expired_answers = up_events("ERROR")
        + m.get(
            "watchmux_upstream_requests_total",
            &with(&[("verb", "watch"), ("code", "410")]),
        )
        .unwrap_or(0.0);
    assert_eq!(
        expired_answers, 1.0,
        "one re-watch found its resourceVersion compacted"
    );
    assert_eq!(
        v(
            "watchmux_upstream_relists_total",
            &with(&[("reason", "initial")])
        ),
        1.0
    );
    assert_eq!(
        v(
            "watchmux_upstream_relists_total",
            &with(&[("reason", "expired")])
        ),
        1.0
    );
    assert_eq!(
        v(
            "watchmux_upstream_watch_ends_total",
            &with(&[("reason", "expired")])
        ),
        1.0
    );
    assert!(
        v(
            "watchmux_upstream_watch_ends_total",
            &with(&[("reason", "error")])
        ) >= 1.0
    );
    assert!(v("watchmux_upstream_watch_connects_total", &pods) >= 2.0);
    assert!(
        v(
            "watchmux_upstream_requests_total",
            &with(&[("verb", "list"), ("code", "200")])
        ) >= 2.0
    );
    assert!(
        v(
            "watchmux_upstream_requests_total",
            &with(&[("verb", "watch"), ("code", "200")])
        ) >= 2.0
    );
    let failed: f64 = m
        .samples
        .iter()
        .filter(|s| {
            s.name == "watchmux_upstream_requests_total"
                && s.labels["resource"] == "pods"
                && s.labels["code"] != "200"
                && s.labels["code"] != "410"
        })
        .map(|s| s.value)
        .sum();
    assert!(
        failed
            + v(
                "watchmux_upstream_watch_ends_total",
                &with(&[("reason", "error")])
            )
            >= 1.0,
        "the outage shows as failed requests or broken watches"
    );
    assert!(v("watchmux_upstream_bytes_total", &with(&[("verb", "list")])) > 0.0);
    assert!(v("watchmux_upstream_bytes_total", &with(&[("verb", "watch")])) > 0.0);
    assert_eq!(
        v("watchmux_upstream_list_duration_seconds_count", &pods),
        2.0,
        "initial list and the relist"
    );
    assert!(v("watchmux_upstream_last_event_age_seconds", &pods) < 30.0);
    assert_eq!(v("watchmux_upstream_watch_up", &pods), 1.0);
    assert_eq!(v("watchmux_upstream_outage_seconds", &pods), 0.0);
    assert!(v("watchmux_upstream_outage_seconds", &[("resource", WIDGETS)]) > 0.0);

    // Downstream watchers.
    let chunked = [("resource", "pods"), ("transport", "chunked")];
    let websocket = [("resource", "pods"), ("transport", "websocket")];
    assert_eq!(
        v("watchmux_watchers", &chunked),
        2.0,
        "w1, w2 (the 410 watch ended)"
    );
    assert_eq!(v("watchmux_watchers", &websocket), 1.0);
    let starts = |r: &'static str, o: &'static str| {
        v(
            "watchmux_watch_starts_total",
            &[("resource", r), ("outcome", o)],
        )
    };
    assert_eq!(starts("pods", "ok"), 3.0);
    assert_eq!(starts("pods", "410"), 1.0);
    assert_eq!(starts("pods", "error"), 1.0);
    assert_eq!(starts("pods", "429"), 0.0);
    assert_eq!(starts(WIDGETS, "429"), 1.0);
    assert_eq!(starts("configmaps", "ok"), 1.0);
    let chunked_seen = [&s1, &s2, &s_gone];
    for ty in ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"] {
        let want: u64 = chunked_seen.iter().map(|s| s.count(ty)).sum();
        let mut l = chunked.to_vec();
        l.push(("type", ty));
        assert_eq!(
            v("watchmux_watch_events_sent_total", &l),
            want as f64,
            "chunked {ty}"
        );
        let mut l = websocket.to_vec();
        l.push(("type", ty));
        assert_eq!(
            v("watchmux_watch_events_sent_total", &l),
            s3.count(ty) as f64,
            "ws {ty}"
        );
    }
    let chunked_bytes: u64 = chunked_seen.iter().map(|s| s.bytes).sum();
    assert_eq!(
        v("watchmux_watch_bytes_sent_total", &chunked),
        chunked_bytes as f64
    );
    assert_eq!(
        v("watchmux_watch_bytes_sent_total", &websocket),
        s3.bytes as f64
    );
    assert_eq!(
        v(
            "watchmux_slow_watchers_closed_total",
            &[("resource", "configmaps")]
        ),
        1.0
    );
    assert_eq!(v("watchmux_slow_watchers_closed_total", &pods), 0.0);
    let cm_sent = v(
        "watchmux_watch_events_sent_total",
        &[
            ("resource", "configmaps"),
            ("transport", "chunked"),
            ("type", "ADDED"),
        ],
    );
    assert!(
        cm_sent > 0.0 && cm_sent < configmaps as f64,
        "the slow client was handed part of the configmaps: {cm_sent}"
    );

    // Requests by verb and code, LIST sources, latency histograms, pass-through bytes.
    let req = |verb: &'static str, resource: &'static str, code: &'static str| {
        m.get(
            "watchmux_requests_total",
            &[("verb", verb), ("resource", resource), ("code", code)],
        )
        .unwrap_or(0.0)
    };
    assert_eq!(req("create", "pods", "201"), 10.0);
    assert_eq!(req("patch", "pods", "200"), 5.0);
    assert_eq!(req("delete", "pods", "200"), 3.0);
    assert_eq!(req("get", "pods", "200"), 1.0);
    assert_eq!(req("list", "pods", "200"), 8.0);
    assert_eq!(req("list", "other", "200"), 1.0);
    assert_eq!(req("list", WIDGETS, "429"), 1.0);
    assert_eq!(req("watch", "pods", "200"), 3.0, "w1, w2, the 410 watch");
    assert_eq!(req("watch", "pods", "101"), 1.0, "the websocket");
    assert_eq!(req("watch", WIDGETS, "429"), 1.0);
    assert_eq!(req("watch", "configmaps", "200"), 1.0);
    let bad_watch: f64 = m
        .samples
        .iter()
        .filter(|s| {
            s.name == "watchmux_requests_total"
                && s.labels["verb"] == "watch"
                && s.labels["resource"] == "pods"
                && s.labels["code"].starts_with('4')
        })
        .map(|s| s.value)
        .sum();
    assert_eq!(bad_watch, 1.0);
    let lists = |r: &'static str, src: &'static str| {
        (
            v(
                "watchmux_list_requests_total",
                &[("resource", r), ("source", src)],
            ),
            v(
                "watchmux_list_duration_seconds_count",
                &[("resource", r), ("source", src)],
            ),
        )
    };
    assert_eq!(lists("pods", "cache"), (7.0, 7.0));
    assert_eq!(lists("pods", "pass_through"), (1.0, 1.0));
    let reads = |verb: &'static str, src: &'static str, reason: &'static str| {
        v(
            "watchmux_reads_total",
            &[
                ("resource", "pods"),
                ("verb", verb),
                ("source", src),
                ("reason", reason),
            ],
        )
    };
    assert_eq!(reads("list", "cache", ""), 7.0);
    assert_eq!(reads("list", "pass_through", "representation"), 1.0);
    // A GET with no resourceVersion: upstream, as kube-apiserver reads it from etcd.
    assert_eq!(reads("get", "pass_through", "consistent_get"), 1.0);
    assert_eq!(reads("get", "cache", ""), 0.0);
    assert_eq!(reads("get", "pass_through", "not_cached"), 0.0);
    assert_eq!(lists("other", "pass_through"), (1.0, 1.0));
    // The resource that never syncs: its LIST and WATCH were refused (429), not served.
    assert_eq!(lists(WIDGETS, "refused"), (1.0, 1.0));
    assert_eq!(lists(WIDGETS, "cache"), (0.0, 0.0));
    for verb in ["list", "watch"] {
        let widgets = |src: &'static str, reason: &'static str| {
            v(
                "watchmux_reads_total",
                &[
                    ("resource", WIDGETS),
                    ("verb", verb),
                    ("source", src),
                    ("reason", reason),
                ],
            )
        };
        assert_eq!(widgets("refused", "not_ready"), 1.0, "{verb}");
        assert_eq!(widgets("cache", ""), 0.0, "{verb}");
    }
    assert_eq!(lists("nodes", "cache"), (0.0, 0.0));
    assert_eq!(
        v(
            "watchmux_request_duration_seconds_count",
            &[("verb", "list"), ("resource", "pods")]
        ),
        8.0
    );
    assert_eq!(
        v(
            "watchmux_request_duration_seconds_count",
            &[("verb", "create"), ("resource", "pods")]
        ),
        10.0
    );
    for (verb, bytes) in &pass_bytes {
        assert_eq!(
            v("watchmux_passthrough_bytes_total", &[("verb", verb)]),
            *bytes as f64,
            "pass-through bytes of {verb}"
        );
    }

    // Readiness: everything synced but the resource the upstream does not serve.
    assert_eq!(v("watchmux_ready", &[]), 0.0);
    let (s, body) = text_get(&format!("{url}/readyz?verbose")).await;
    assert_eq!(s, 503);
    assert!(body.contains("[+]cache/pods ok\n"), "{body}");
    assert!(
        body.contains(&format!(
            "[-]cache/{WIDGETS} failed: waiting for upstream discovery\n"
        )),
        "{body}"
    );
    assert!(body.ends_with("readyz check failed\n"), "{body}");

    // Process.
    assert!(v("watchmux_process_resident_memory_bytes", &[]) > 0.0);
    assert!(v("watchmux_process_open_fds", &[]) > 0.0);
    assert!(v("watchmux_process_threads", &[]) >= 1.0);
    assert!(v("watchmux_process_cpu_seconds_total", &[]) >= 0.0);

    // Labels stay bounded: no names, namespaces or addresses.
    for s in &m.samples {
        for (k, val) in &s.labels {
            assert!(
                !val.starts_with("p1")
                    && !val.starts_with("cm")
                    && val != "default"
                    && !val.contains("127.0.0.1"),
                "{} has an unbounded label {k}={val}",
                s.name
            );
        }
    }
    drop((w1, w2, w3));
}

// ---- health -------------------------------------------------------------------------------

#[tokio::test]
async fn readyz_is_503_before_sync_and_200_once_a_late_upstream_synced() {
    let port = dead_port();
    let p = start(&format!("http://127.0.0.1:{port}"), |_| {}).await;
    let (s, body) = text_get(&format!("{}/readyz", p.url)).await;
    assert_eq!(s, 503);
    assert!(
        body.contains("[-]cache/pods failed: waiting for upstream discovery\n"),
        "{body}"
    );
    assert!(body.ends_with("readyz check failed\n"));
    assert_eq!(
        text_get(&format!("{}/livez", p.url)).await,
        (StatusCode::OK, "ok".into())
    );
    assert_eq!(
        text_get(&format!("{}/healthz", p.url)).await,
        (StatusCode::OK, "ok".into())
    );
    assert_eq!(
        text_get(&format!("{}/livez?verbose", p.url)).await,
        (StatusCode::OK, "[+]ping ok\nlivez check passed\n".into())
    );
    assert_eq!(text_get(&format!("{}/readyz/ping", p.url)).await.0, 200);
    assert_eq!(
        text_get(&format!("{}/readyz/cache/pods", p.url)).await.0,
        503
    );
    let m = scrape(&p.url).await;
    assert_eq!(m.value("watchmux_ready", &[]), 0.0);
    assert_eq!(
        m.value("watchmux_cache_synced", &[("resource", "pods")]),
        0.0
    );
    // The outage counts from the reflector's first failed attempt, which runs on its own thread
    // and may not have come yet.
    crate::common::wait_until("the outage to count", 10, async || {
        let m = scrape(&p.url).await;
        m.value("watchmux_upstream_outage_seconds", &[("resource", "pods")]) > 0.0
    })
    .await;
    // Health endpoints are watchmux's own: never passed through, other methods refused.
    let (s, _, _) =
        crate::common::request(Method::POST, &format!("{}/readyz", p.url), &[], "").await;
    assert_eq!(s, 405);

    // The upstream comes up on that port: discovery, list, watch; ready.
    let _sim =
        crate::common::sim_with(|c| c.listen = format!("127.0.0.1:{port}").parse().unwrap()).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (s, body) = text_get(&format!("{}/readyz?verbose", p.url)).await;
        if s == 200 {
            for r in ["pods", "nodes", "namespaces", "configmaps"] {
                assert!(body.contains(&format!("[+]cache/{r} ok\n")), "{body}");
            }
            assert!(body.ends_with("readyz check passed\n"));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ready: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        text_get(&format!("{}/readyz", p.url)).await,
        (StatusCode::OK, "ok".into())
    );
    assert_eq!(scrape(&p.url).await.value("watchmux_ready", &[]), 1.0);
}

#[tokio::test]
async fn readyz_fails_after_an_upstream_outage_longer_than_the_bound() {
    let sim = crate::common::sim().await;
    let p = start(&sim.url(), |c| {
        c.server.ready_outage = Duration::from_secs(1)
    })
    .await;
    wait_synced(&p, &["pods", "nodes", "namespaces", "configmaps"]).await;
    assert_eq!(text_get(&format!("{}/readyz", p.url)).await.0, 200);
    sim.faults().refuse_connections_for(Duration::from_secs(4));
    // Within the bound: still ready.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(text_get(&format!("{}/readyz", p.url)).await.0, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    let body = loop {
        let (s, body) = text_get(&format!("{}/readyz?verbose", p.url)).await;
        if s == 503 {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still ready during the outage"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        body.lines().any(
            |l| l.starts_with("[-]cache/pods failed: upstream watch broken for ")
                && l.ends_with("s (limit 1s)")
        ),
        "{body}"
    );
    let m = scrape(&p.url).await;
    assert_eq!(m.value("watchmux_ready", &[]), 0.0);
    assert!(m.value("watchmux_upstream_outage_seconds", &[("resource", "pods")]) > 1.0);
    assert_eq!(
        m.value("watchmux_upstream_watch_up", &[("resource", "pods")]),
        0.0
    );
    // The upstream is back: the watches resume, ready again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let (s, body) = text_get(&format!("{}/readyz?verbose", p.url)).await;
        if s == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not ready after the outage: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m = scrape(&p.url).await;
    assert_eq!(
        m.value("watchmux_upstream_outage_seconds", &[("resource", "pods")]),
        0.0
    );
}

// ---- graceful shutdown --------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fails_readyz_ends_watches_cleanly_and_stops_accepting() {
    let sim = crate::common::sim().await;
    let p = crate::common::proxy_for(&sim, |_| {}).await;
    let mut w = crate::common::watch(&format!("{}/api/v1/pods?watch=1", p.url)).await;
    assert_eq!(w.status, 200);
    let proxy: Arc<watchmux::app::App> = p.proxy.clone();
    let started = std::time::Instant::now();
    let done = tokio::spawn(async move {
        proxy
            .shutdown_within(Duration::from_millis(800), Duration::from_secs(5))
            .await
    });
    // During the delay: not ready, still serving.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (s, body) = text_get(&format!("{}/readyz?verbose", p.url)).await;
    assert_eq!(s, 503);
    assert!(
        body.contains("[-]shutdown failed: the process is shutting down\n"),
        "{body}"
    );
    let (s, _, _) = crate::common::request(
        Method::GET,
        &format!("{}/api/v1/pods?resourceVersion=0", p.url),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 200);
    // Then the watch ends cleanly (the client re-watches elsewhere) and nothing is accepted.
    match w.next_line(Duration::from_secs(5)).await {
        Next::End => {}
        other => panic!("the watch should end cleanly, got {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert!(
        done.await.unwrap(),
        "every connection finished within the bound"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let addr = p.url.trim_start_matches("http://");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting"
    );
}

/// The binary: `[log] format = "json"` at debug gives one JSON line per request and none per
/// event at info; SIGTERM ends a watch cleanly and the process exits 0 within the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_logs_json_and_exits_cleanly_on_sigterm() {
    let sim = crate::common::sim().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("watchmux.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nshutdown_timeout_secs = 5\n\n[upstream]\nurl = \"{}\"\n\n[log]\nformat = \"json\"\nlevel = \"watchmux=debug,info\"\n{}",
            sim.url(),
            crate::common::TEST_CACHE
        ),
    )
    .unwrap();
    let (mut child, mut rx) = crate::common::spawn_watchmux(&path);
    let mut log = Vec::new();
    let serving = log_until(&mut rx, &mut log, |v| v["message"] == "watchmux serving").await;
    let url = format!("http://{}", serving["listen"].as_str().unwrap());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while text_get(&format!("{url}/readyz")).await.0 != 200 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut w = crate::common::watch(&format!("{url}/api/v1/pods?watch=1")).await;
    let pods = sim.resource("", "v1", "pods").unwrap();
    for i in 0..20 {
        sim.ops()
            .create(
                &pods,
                Some("default"),
                serde_json::from_str(&unbound_pod(&format!("p{i}"))).unwrap(),
                false,
            )
            .unwrap();
    }
    let mut seen = Seen::default();
    read_chunked(&mut w, &mut seen, 20).await;
    let (s, _, _) = crate::common::request(
        Method::GET,
        &format!("{url}/api/v1/pods?resourceVersion=0"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 200);
    let req = log_until(&mut rx, &mut log, |v| {
        v["message"] == "request" && v["verb"] == "list"
    })
    .await;
    assert_eq!(req["level"], "DEBUG");
    assert_eq!(req["resource"], "pods");
    assert_eq!(req["source"], "cache");
    assert_eq!(req["code"], 200);

    let started = std::time::Instant::now();
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    match w.next_line(Duration::from_secs(5)).await {
        Next::End => {}
        other => panic!("the watch should end cleanly on SIGTERM, got {other:?}"),
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits within the bound")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(started.elapsed() < Duration::from_secs(6));
    while let Ok(v) = rx.try_recv() {
        log.push(v);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    while let Ok(v) = rx.try_recv() {
        log.push(v);
    }
    let messages: Vec<&str> = log.iter().filter_map(|v| v["message"].as_str()).collect();
    assert!(messages.contains(&"shut down cleanly"), "{messages:?}");
    let infos = log.iter().filter(|v| v["level"] == "INFO").count();
    assert!(
        infos < 20,
        "20 events must not produce info lines: {messages:?}"
    );
    assert!(
        log.iter()
            .all(|v| v["timestamp"].is_string() && v["level"].is_string()),
        "every line is a JSON log record"
    );
}

// ---- config -------------------------------------------------------------------------------

#[test]
fn observability_config_keys_parse_and_are_checked() {
    let c = Config::from_toml_str(
        "[server]\nready_outage_secs = 5\nshutdown_delay_secs = 3\nshutdown_timeout_secs = 7\n[log]\nformat = \"json\"\nlevel = \"watchmux=debug\"\n",
        "t",
    )
    .unwrap();
    assert_eq!(c.server.ready_outage, Duration::from_secs(5));
    assert_eq!(c.server.shutdown_delay, Duration::from_secs(3));
    assert_eq!(c.server.shutdown_timeout, Duration::from_secs(7));
    // kube's floor for the drain's rate, over a grace longer than this timeout (the drain cuts
    // it to the timeout).
    assert_eq!(c.server.shutdown_watch_grace, Duration::from_secs(10));
    assert_eq!(c.server.shutdown_watch_min_rate, 200);
    assert_eq!(c.log.format, watchmux::config::LogFormat::Json);
    assert_eq!(c.log.level, "watchmux=debug");
    let d = Config::from_toml_str("", "t").unwrap();
    assert_eq!(d.log.format, watchmux::config::LogFormat::Text);
    // By default an outage alone never fails /readyz ("serving stale"), and cached reads have
    // no staleness bound: an edge cache keeps answering.
    assert_eq!(d.server.ready_outage, Duration::ZERO);
    assert_eq!(d.cache.max_staleness, None);
    let c = Config::from_toml_str("[cache]\nmax_staleness_secs = 90\n", "t").unwrap();
    assert_eq!(c.cache.max_staleness, Some(Duration::from_secs(90)));
    for (text, key, line) in [
        (
            "[server]\nready_outage_secs = 1e3\n",
            "server.ready_outage_secs",
            2,
        ),
        (
            "[cache]\n\nmax_staleness_secs = 99999999999\n",
            "cache.max_staleness_secs",
            3,
        ),
        (
            "[server]\n\nshutdown_timeout_secs = 0\n",
            "server.shutdown_timeout_secs",
            3,
        ),
        (
            "[server]\nshutdown_watch_min_rate = 0\n",
            "server.shutdown_watch_min_rate",
            2,
        ),
        (
            "[server]\nshutdown_watch_grace_secs = -1\n",
            "server.shutdown_watch_grace_secs",
            2,
        ),
        ("[log]\nformat = \"xml\"\n", "log.format", 2),
        ("[log]\nlevel = \"watchmux=loud\"\n", "log.level", 2),
        ("[log]\ncolour = true\n", "log", 2),
    ] {
        let e = Config::from_toml_str(text, "f.toml").unwrap_err();
        assert!(e.key().is_some_and(|k| k.starts_with(key)), "{text}: {e}");
        assert_eq!(e.line(), Some(line), "{text}: {e}");
        assert!(e.to_string().starts_with("f.toml: line "), "{e}");
    }
    // The documented example parses to the defaults for these keys.
    let example = Config::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/config.toml")).unwrap();
    assert_eq!(example.server.ready_outage, d.server.ready_outage);
    assert_eq!(example.cache.max_staleness, d.cache.max_staleness);
    assert_eq!(example.server.shutdown_timeout, d.server.shutdown_timeout);
    assert_eq!(
        example.server.shutdown_watch_grace,
        d.server.shutdown_watch_grace
    );
    assert_eq!(
        example.server.shutdown_watch_min_rate,
        d.server.shutdown_watch_min_rate
    );
    assert_eq!(example.log, d.log);
}

// ---- dashboard and alerts -----------------------------------------------------------------

/// Every `watchmux_…` identifier in a PromQL expression.
pub(crate) fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while let Some(p) = expr[i..].find("watchmux_") {
        let start = i + p;
        let before_ok =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        if before_ok {
            out.insert(expr[start..end].to_string());
        }
        i = end;
    }
    out
}

/// Every string under a key named `key`, anywhere in `v`.
pub(crate) fn strings_under(v: &Value, key: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == key
                    && let Some(s) = x.as_str()
                {
                    out.push(s.to_string());
                }
                strings_under(x, key, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| strings_under(x, key, out)),
        _ => {}
    }
}

/// The sample names of a running watchmux after some traffic (every family has samples).
async fn live_metric_names() -> BTreeSet<String> {
    let sim = crate::common::sim().await;
    // With every optional part on (the durable cache's metrics exist only with it).
    let dir = tempfile::tempdir().unwrap();
    let persist = dir.path().to_path_buf();
    let p = crate::common::proxy_for(&sim, |c| c.cache.persist_dir = Some(persist)).await;
    for q in [
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/pods",
        "/api/v1/services",
    ] {
        crate::common::request(Method::GET, &format!("{}{q}", p.url), &[], "").await;
    }
    let mut w = crate::common::watch(&format!(
        "{}/api/v1/pods?watch=1&allowWatchBookmarks=true",
        p.url
    ))
    .await;
    let _ = w.next_line(Duration::from_secs(3)).await;
    scrape(&p.url).await.names()
}

fn repo_file(rel: &str) -> String {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test]
async fn dashboard_and_alert_rules_use_only_exported_metrics() {
    let live = live_metric_names().await;

    // The dashboard: importable JSON with datasource and resource variables and the rows.
    let dash: Value = serde_json::from_str(&repo_file("grafana/watchmux.json")).expect("JSON");
    assert!(dash["title"].is_string() && dash["uid"].is_string());
    assert!(dash["schemaVersion"].as_u64().is_some_and(|v| v >= 30));
    let vars = dash["templating"]["list"].as_array().expect("variables");
    let var = |name: &str| {
        vars.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no ${name} variable"))
    };
    assert_eq!(var("datasource")["type"], "datasource");
    assert_eq!(var("datasource")["query"], "prometheus");
    assert_eq!(var("resource")["type"], "query");
    assert!(var("resource")["multi"].as_bool().unwrap_or(false));
    let panels = dash["panels"].as_array().expect("panels");
    let rows: Vec<String> = panels
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap().to_lowercase())
        .collect();
    for want in [
        "upstream", "cache", "fan-out", "latency", "errors", "process",
    ] {
        assert!(
            rows.iter().any(|r| r.contains(want)),
            "no {want} row in {rows:?}"
        );
    }
    let mut ids = BTreeSet::new();
    for p in panels.iter().filter(|p| p["type"] != "row") {
        assert!(
            ids.insert(p["id"].as_u64().expect("panel id")),
            "duplicate id"
        );
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{}", p["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            assert!(!metric_names(expr).is_empty(), "{expr}");
        }
    }
    let mut exprs = Vec::new();
    strings_under(&dash, "expr", &mut exprs);
    strings_under(&dash["templating"], "query", &mut exprs);
    if let Some(q) = var("resource")["query"]["query"].as_str() {
        exprs.push(q.to_string());
    }
    let mut used = BTreeSet::new();
    for e in &exprs {
        for n in metric_names(e) {
            assert!(
                live.contains(&n),
                "the dashboard queries {n}, which /metrics lacks ({e})"
            );
            used.insert(n);
        }
    }
    assert!(
        used.len() >= 25,
        "the dashboard covers the metrics: {used:?}"
    );

    // The alert rules: a Prometheus rules file.
    let rules: Value = serde_saphyr::from_str(&repo_file("grafana/alerts.yaml")).expect("YAML");
    let mut alerts = BTreeMap::new();
    for g in rules["groups"].as_array().expect("groups") {
        assert!(g["name"].is_string());
        for r in g["rules"].as_array().expect("rules") {
            let name = r["alert"].as_str().expect("alert name").to_string();
            let expr = r["expr"].as_str().expect("expr");
            assert!(r["for"].is_string(), "{name}: for");
            assert!(
                matches!(
                    r["labels"]["severity"].as_str(),
                    Some("critical" | "warning" | "info")
                ),
                "{name}: severity"
            );
            assert!(r["annotations"]["summary"].is_string(), "{name}: summary");
            assert!(
                r["annotations"]["description"].is_string(),
                "{name}: description"
            );
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{name}");
            for n in names {
                assert!(
                    live.contains(&n),
                    "alert {name} uses {n}, which /metrics lacks"
                );
            }
            alerts.insert(name, expr.to_string());
        }
    }
    for want in ["NotReady", "RelistStorm", "SlowWatchers", "Lag"] {
        assert!(
            alerts.keys().any(|a| a.contains(want)),
            "no {want} alert in {:?}",
            alerts.keys()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_endpoints_answer_head_over_http2() {
    use http_body_util::BodyExt;
    let sim = crate::common::sim().await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    // Over HTTP/2 the answer to a HEAD must come without its body: hyper sent watchmux's own
    // bodies (health, metrics), and h2 reset the stream (found by `watchmux-bench httpfuzz`).
    for path in ["/healthz", "/livez", "/readyz", "/metrics"] {
        let req = http::Request::head(format!("{}{path}", px.url))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(5), client.request(req))
            .await
            .expect("answer within 5 s")
            .unwrap_or_else(|e| panic!("HEAD {path}: {e}"));
        assert_eq!(resp.version(), http::Version::HTTP_2);
        assert_eq!(resp.status(), StatusCode::OK, "HEAD {path}");
        let body = resp.into_body().collect().await;
        assert!(
            body.is_ok_and(|b| b.to_bytes().is_empty()),
            "HEAD {path}: the stream must end cleanly, without a body"
        );
    }
}
