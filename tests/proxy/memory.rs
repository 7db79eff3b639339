//! The memory budget (`cache.memory_limit`, issue 15) through a real watchmux in front of the
//! simulator: driven over its limit by churn, stalled watchers and new watches, it sheds load in
//! the documented order (kept snapshots, then the event log and the watchers furthest behind,
//! then new cached LISTs and WATCHes with 429) and what it counts stays within the stated margin
//! of the limit, while a reading watcher stays exact.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use kube_sim::fleet::FleetSpec;
use kube_sim::testkit::{Next, get_json};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;
use watchmux::cache::budget::{MemoryBudget, Pressure, WATCHER_BYTES};

use crate::common::{proxy_for, request, sim_with, watch};

/// The stated margin: beyond the limit, at most one more watcher (admitted as the budget filled)
/// and the newest event's object and frame per resource, while the objects themselves do not
/// grow.
const MARGIN: u64 = WATCHER_BYTES + (64 << 10);

/// A watch request on a socket that never reads (a tiny receive buffer): its watcher stalls
/// once the kernel's buffers are full.
async fn stalled_watch(addr: &str, path: &str) -> tokio::net::TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(addr.parse().unwrap()).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    s
}

/// `namespace/name` of an object's metadata.
fn key_of(m: &Value) -> String {
    format!(
        "{}/{}",
        m["namespace"].as_str().unwrap(),
        m["name"].as_str().unwrap()
    )
}

/// The pods of a LIST answer, by key, with their resourceVersions.
async fn pod_rvs(url: &str) -> BTreeMap<String, u64> {
    let (_, l) = get_json(url).await;
    l["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            let rv = m["resourceVersion"].as_str().unwrap().parse().unwrap();
            (key_of(m), rv)
        })
        .collect()
}

fn shed(b: &MemoryBudget) -> [u64; 4] {
    let s = &b.shed;
    [
        s.snapshots.load(Ordering::Relaxed),
        s.log_events.load(Ordering::Relaxed),
        s.watchers.load(Ordering::Relaxed),
        s.requests.load(Ordering::Relaxed),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_budget_sheds_in_order_and_holds_its_bound() {
    let sim = sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 4,
            pods: 400,
            namespaces: 2,
            seed: 15,
        })
    })
    .await;
    // What the caches hold at rest, without a limit: the budget is set to twice that.
    let at_rest = {
        let px = proxy_for(&sim, |_| {}).await;
        let used = px.proxy.budget.used();
        px.proxy.shutdown().await;
        used
    };
    assert!(at_rest > 400 * 1000, "the objects are counted: {at_rest}");
    let limit = at_rest * 2;
    let px = proxy_for(&sim, |c| c.cache.memory_limit = limit).await;
    let b = px.proxy.budget.clone();
    let pods = px.proxy.cache("", "v1", "pods").unwrap();
    assert_eq!(b.pressure(), Pressure::None);

    // A paged LIST keeps its snapshot for the continuation.
    let first = format!("{}/api/v1/pods?limit=50", px.url);
    let (s, page) = get_json(&first).await;
    assert_eq!(s, StatusCode::OK);
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    let listed_rv = page["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(pods.retained_snapshots().count, 1);

    // A watcher that reads everything, and three that never read.
    let mut live = watch(&format!(
        "{}/api/v1/pods?watch=1&resourceVersion={listed_rv}",
        px.url
    ))
    .await;
    assert_eq!(live.status, StatusCode::OK);
    let reader = tokio::spawn(async move {
        let mut seen: Vec<(String, u64, String)> = Vec::new();
        loop {
            match live.next_line(Duration::from_secs(20)).await {
                Next::Line(l) => {
                    let e: Value = serde_json::from_slice(&l).unwrap();
                    let m = &e["object"]["metadata"];
                    seen.push((
                        e["type"].as_str().unwrap().to_string(),
                        m["resourceVersion"].as_str().unwrap().parse().unwrap(),
                        key_of(m),
                    ));
                }
                other => return (seen, format!("{other:?}")),
            }
        }
    });
    let addr = px.url.trim_start_matches("http://").to_string();
    let path = format!("/api/v1/pods?watch=1&resourceVersion={listed_rv}");
    let mut stalled = Vec::new();
    for _ in 0..3 {
        stalled.push(stalled_watch(&addr, &path).await);
    }

    // Churn: every pod grows by a padding annotation, then keeps changing. Step 1 (kept
    // snapshots dropped) comes alone; step 2 (the log cut, the stalled watchers closed) after
    // it; nothing is refused meanwhile.
    let rt = sim.resource("", "v1", "pods").unwrap();
    let names: Vec<(String, String)> = pod_rvs(&format!("{}/api/v1/pods", sim.url()))
        .await
        .into_keys()
        .map(|k| {
            let (ns, name) = k.split_once('/').unwrap();
            (ns.to_string(), name.to_string())
        })
        .collect();
    let pad = "x".repeat(1500);
    let mut soft_checked = false;
    let mut writes = 0usize;
    while shed(&b)[2] < 3 {
        assert!(
            writes < 40_000,
            "the stalled watchers were never cut off: {:?}",
            shed(&b)
        );
        let (ns, name) = &names[writes % names.len()];
        sim.ops()
            .modify(&rt, Some(ns), name, |v| {
                v["metadata"]["annotations"] = json!({ "pad": pad, "n": writes.to_string() })
            })
            .unwrap();
        writes += 1;
        if writes.is_multiple_of(20) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let [snapshots, log, watchers, requests] = shed(&b);
        assert_eq!(requests, 0, "nothing is refused while the log can be cut");
        assert!(
            b.pressure() < Pressure::Full || log > 0,
            "past 100 % without cutting the log"
        );
        if log > 0 || watchers > 0 {
            assert!(
                soft_checked,
                "the log was cut before the kept snapshots were dropped"
            );
        }
        if !soft_checked && b.pressure() >= Pressure::Soft && log == 0 {
            // The housekeeping tick drops the kept snapshot (within about a second).
            let deadline = Instant::now() + Duration::from_secs(5);
            while pods.retained_snapshots().count > 0 || shed(&b)[0] == 0 {
                assert!(
                    Instant::now() < deadline,
                    "kept snapshot not dropped at {:?}",
                    b.pressure()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(snapshots <= shed(&b)[0]);
            assert_eq!(shed(&b)[1..], [0, 0, 0], "only snapshots are shed at 80 %");
            // The continuation is still answered, from the log or the upstream.
            let (s, next) =
                get_json(&format!("{}/api/v1/pods?limit=50&continue={token}", px.url)).await;
            assert_eq!(s, StatusCode::OK, "{next}");
            assert_eq!(next["items"].as_array().unwrap().len(), 50);
            soft_checked = true;
        }
    }
    eprintln!(
        "churn: {writes} writes, shed {:?}, peak {} of {limit}",
        shed(&b),
        b.peak()
    );
    assert!(soft_checked, "pressure never reached 80 %");
    assert!(shed(&b)[1] > 0, "the log was cut");
    // Churn stops: the reading watcher holds exactly the simulator's state, each
    // resourceVersion once, in order.
    let sim_state = pod_rvs(&format!("{}/api/v1/pods", sim.url())).await;
    let last_rv = *sim_state.values().max().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while pods.rv() < last_rv {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The reader ends when watchmux shuts down below; first let it drain.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Step 3: new watches until the budget is full; the one after is refused, as is a new
    // cached LIST. A GET of one object and pass-through requests are not.
    let url = format!("{}/api/v1/pods?watch=1&resourceVersion=0", px.url);
    let mut extra = Vec::new();
    let refused = loop {
        assert!(
            extra.len() as u64 <= limit / WATCHER_BYTES + 1,
            "watches never refused"
        );
        let w = watch(&url).await;
        if w.status == StatusCode::TOO_MANY_REQUESTS {
            break w;
        }
        assert_eq!(w.status, StatusCode::OK);
        extra.push(w);
    };
    assert_eq!(refused.headers["retry-after"], "1");
    let (s, h, body) = request(
        Method::GET,
        &format!("{}/api/v1/pods?resourceVersion=0", px.url),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(h["retry-after"], "1");
    let st: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (
            st["kind"].as_str(),
            st["reason"].as_str(),
            st["code"].as_u64()
        ),
        (Some("Status"), Some("TooManyRequests"), Some(429))
    );
    assert!(
        st["message"].as_str().unwrap().contains("memory limit"),
        "{st}"
    );
    let (ns, name) = &names[0];
    let (s, _, _) = request(
        Method::GET,
        &format!("{}/api/v1/namespaces/{ns}/pods/{name}", px.url),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK, "a GET of one object is served");
    let (s, _, _) = request(Method::GET, &format!("{}/api/v1/secrets", px.url), &[], "").await;
    assert_eq!(s, StatusCode::OK, "pass-through is not refused");
    assert!(shed(&b)[3] >= 2);
    // Closing the watches frees their share: LISTs are served again.
    drop(extra);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (s, _, _) = request(
            Method::GET,
            &format!("{}/api/v1/pods?resourceVersion=0", px.url),
            &[],
            "",
        )
        .await;
        if s == StatusCode::OK {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "LISTs still refused after the watches closed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The bound held all along.
    assert!(
        b.peak() <= limit + MARGIN,
        "peak {} over limit {limit} + margin {MARGIN}",
        b.peak()
    );

    drop(stalled);
    px.proxy.shutdown().await;
    let (seen, end) = reader.await.unwrap();
    let mut view: BTreeMap<String, u64> = BTreeMap::new();
    let mut last = 0;
    for (ty, rv, key) in &seen {
        assert!(
            *rv > last,
            "resourceVersion {rv} after {last}: a duplicate or out of order ({end})"
        );
        last = *rv;
        if ty == "DELETED" {
            view.remove(key);
        } else {
            view.insert(key.clone(), *rv);
        }
    }
    // The reader started from the listed resourceVersion: what it saw on top of that list is
    // the simulator's state.
    let listed = pod_rvs(&format!(
        "{}/api/v1/pods?resourceVersion={listed_rv}&resourceVersionMatch=Exact",
        sim.url()
    ))
    .await;
    let mut state = listed;
    state.extend(view);
    assert_eq!(
        state,
        sim_state,
        "the reading watcher converged ({} events, {end})",
        seen.len()
    );
}

/// The value of a metric line `name{labels} value` in a scrape, 0 when absent.
fn metric(scrape: &str, series: &str) -> f64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_object_over_max_object_bytes_is_refused_counted_and_recovered_from() {
    let sim = crate::common::sim().await;
    let px = proxy_for(&sim, |c| c.cache.max_object_bytes = 4096).await;
    let cms = px.proxy.cache("", "v1", "configmaps").unwrap();
    let url = format!("{}/api/v1/namespaces/default/configmaps", sim.url());
    let big = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"},
        "data": {"blob": "y".repeat(8192)}
    });
    let (s, _, _) = request(
        Method::POST,
        &url,
        &[("content-type", "application/json")],
        &big.to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let big_rv = sim.store().revision();
    let series = "watchmux_upstream_oversize_total{resource=\"configmaps\"}";
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, _, body) = request(Method::GET, &format!("{}/metrics", px.url), &[], "").await;
        if metric(&String::from_utf8_lossy(&body), series) >= 1.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the oversize object was not counted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The cache keeps its last good state: never the big object, never past it.
    assert!(cms.rv() < big_rv);
    assert!(cms.snapshot().objects.keys().all(|k| !k.ends_with("/big")));
    // Once it is gone upstream, the relist takes the cache past it.
    let (s, _, _) = request(Method::DELETE, &format!("{url}/big"), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    let small = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "small", "namespace": "default"},
        "data": {"k": "v"}
    });
    let (s, _, _) = request(
        Method::POST,
        &url,
        &[("content-type", "application/json")],
        &small.to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let deadline = Instant::now() + Duration::from_secs(20);
    while cms.snapshot().objects.get("default/small").is_none() {
        assert!(Instant::now() < deadline, "the cache did not recover");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cms.snapshot().objects.get("default/big").is_none());
    px.proxy.shutdown().await;
}
