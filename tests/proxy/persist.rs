//! The durable cache (`cache.persist_dir`) and the offline policy through a real watchmux in
//! front of the simulator: a watchmux restarted while the upstream is down answers cached reads
//! from disk at once, says they are stale (`/readyz`, the freshness headers, the staleness
//! metric), and a client that resumes its watch from the resourceVersion it last saw gets
//! exactly the events it missed once the upstream is back; past `cache.max_staleness_secs`
//! cached reads are refused with 503 until the upstream answers again.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::common::{Next, get_json, proxy_for, request, sim, watch};

mod crash;

const DEADLINE: Duration = Duration::from_secs(30);

/// Creates configmap `name` in `default` in the simulator; its resourceVersion.
fn create_configmap(sim: &kube_sim::Simulator, name: &str) -> u64 {
    let cms = sim.resource("", "v1", "configmaps").unwrap();
    sim.ops()
        .create(
            &cms,
            Some("default"),
            json!({"metadata": {"name": name}, "data": {"k": "v"}}),
            false,
        )
        .expect("create")
        .rv
}

/// `/readyz`'s status and body.
async fn readyz(url: &str, query: &str) -> (u16, String) {
    let (status, _, body) =
        request(http::Method::GET, &format!("{url}/readyz{query}"), &[], "").await;
    (status.as_u16(), String::from_utf8_lossy(&body).into_owned())
}

/// The freshness headers of a cached LIST of configmaps: the cache's resourceVersion and age
/// (seconds).
async fn freshness(url: &str) -> (u64, u64) {
    let (status, headers, _) = request(
        http::Method::GET,
        &format!("{url}/api/v1/configmaps?resourceVersion=0"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, 200);
    let num = |h: &str| -> u64 {
        headers
            .get(h)
            .unwrap_or_else(|| panic!("no {h}: {headers:?}"))
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    (
        num("x-watchmux-cache-resource-version"),
        num("x-watchmux-cache-age"),
    )
}

/// A sample of `/metrics` for `resource`.
async fn metric(url: &str, name: &str, resource: &str) -> f64 {
    let (status, _, body) = request(http::Method::GET, &format!("{url}/metrics"), &[], "").await;
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    let prefix = format!("{name}{{resource=\"{resource}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {prefix}"))
        .parse()
        .unwrap()
}

/// The configmaps a LIST answered (`name` → resourceVersion), and its resourceVersion.
async fn configmaps(url: &str) -> (u64, BTreeMap<String, String>) {
    let (status, v) = get_json(&format!("{url}/api/v1/configmaps?resourceVersion=0")).await;
    assert_eq!(status, 200, "{v}");
    let items = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            (
                m["name"].as_str().unwrap().to_string(),
                m["resourceVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let rv = v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    (rv, items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_the_upstream_down_serves_from_disk_and_resumes_watches() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let sim = sim().await;
    let cms = sim.resource("", "v1", "configmaps").unwrap();
    let create = |name: &str| create_configmap(&sim, name);
    let proxy = proxy_for(&sim, |c| c.cache.persist_dir = Some(root.clone())).await;
    let mut last = 0;
    for i in 0..20 {
        last = create(&format!("c{i}"));
    }
    // The proxy has them (and so, behind it, the disk will).
    let deadline = Instant::now() + DEADLINE;
    let (rv_before, before) = loop {
        let (rv, items) = configmaps(&proxy.url).await;
        if rv >= last {
            break (rv, items);
        }
        assert!(Instant::now() < deadline, "the proxy never reached {last}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // A clean stop waits for the persisted cache's last batch: the directory is free after it.
    proxy.proxy.shutdown().await;
    drop(proxy);
    let cm_dir = root.join("core_v1_configmaps");
    drop(
        watchmux::persist::resource::lock(&cm_dir)
            .expect("the stopped writer let the directory go"),
    );

    // While watchmux is down the cluster changes; then the upstream goes away too.
    let late = create("late");
    sim.ops()
        .delete(&cms, Some("default"), "c1", &Default::default())
        .expect("delete");
    sim.faults()
        .refuse_connections_for(Duration::from_secs(120));

    let proxy = proxy_for(&sim, |c| c.cache.persist_dir = Some(root.clone())).await;
    let (rv_restored, restored) = configmaps(&proxy.url).await;
    assert_eq!(
        restored, before,
        "the restored cache answers as the old one did"
    );
    assert!(rv_restored >= rv_before);
    // Restored, not following the upstream: ready, serving stale, and every cached answer says
    // how fresh it is (as old as the persisted freshness mark: the clean stop's).
    let (code, body) = readyz(&proxy.url, "").await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.starts_with("ok: serving stale (") && body.contains("cache/configmaps"),
        "{body}"
    );
    let (_, verbose) = readyz(&proxy.url, "?verbose").await;
    assert!(
        verbose.contains("[+]cache/configmaps ok: serving stale, not following the upstream for "),
        "{verbose}"
    );
    assert!(
        verbose.ends_with("readyz check passed, serving stale\n"),
        "{verbose}"
    );
    let (header_rv, _) = freshness(&proxy.url).await;
    assert_eq!(header_rv, rv_restored);
    assert!(metric(&proxy.url, "watchmux_cache_staleness_seconds", "configmaps").await > 0.0);

    // A client resumes from the last resourceVersion it saw, while the upstream is still down.
    let mut w = watch(&format!(
        "{}/api/v1/configmaps?watch=1&resourceVersion={rv_before}",
        proxy.url
    ))
    .await;
    assert_eq!(w.status, 200);
    sim.faults().clear();
    // Once the upstream is back, the relist is bridged: the client hears what it missed.
    let mut heard: Vec<(String, String)> = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while heard.len() < 2 {
        assert!(Instant::now() < deadline, "heard only {heard:?}");
        match w.next_line(Duration::from_secs(1)).await {
            Next::Line(l) => {
                let v: Value = serde_json::from_slice(&l).unwrap();
                let ty = v["type"].as_str().unwrap().to_string();
                if ty != "BOOKMARK" {
                    heard.push((ty, v["object"]["metadata"]["name"].as_str().unwrap().into()));
                }
            }
            Next::Timeout => {}
            other => panic!("the watch ended: {other:?}"),
        }
    }
    heard.sort();
    assert_eq!(
        heard,
        [
            ("ADDED".to_string(), "late".to_string()),
            ("DELETED".to_string(), "c1".to_string())
        ]
    );
    let (rv_now, now) = configmaps(&proxy.url).await;
    assert!(rv_now > late);
    assert!(now.contains_key("late") && !now.contains_key("c1"));
    // Reconciled and following the upstream again: plain "ok", age 0.
    let deadline = Instant::now() + DEADLINE;
    while readyz(&proxy.url, "").await != (200, "ok".to_string()) {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            readyz(&proxy.url, "?verbose").await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(freshness(&proxy.url).await.1, 0);
    assert_eq!(
        metric(&proxy.url, "watchmux_cache_staleness_seconds", "configmaps").await,
        0.0
    );

    // The restarted writer went on from the restored state (the bridge's events are written
    // behind the live path, within a flush interval): its figures are scraped.
    let value = |name: &'static str| metric(&proxy.url, name, "configmaps");
    let deadline = Instant::now() + DEADLINE;
    while value("watchmux_persist_bytes_written_total").await == 0.0 {
        assert!(
            Instant::now() < deadline,
            "the restarted writer wrote nothing"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(value("watchmux_persist_disk_bytes").await > 0.0);
    assert_eq!(value("watchmux_persist_write_errors_total").await, 0.0);
}

/// `cache.max_staleness_secs`: through an upstream outage cached reads are served (saying how
/// stale) until the bound, then refused with kube's 503 and a message naming the bound, and
/// `/readyz` fails; once the upstream answers they are served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_staleness_cached_reads_get_503_until_the_upstream_is_back() {
    let sim = sim().await;
    let proxy = proxy_for(&sim, |c| {
        c.cache.max_staleness = Some(Duration::from_secs(1))
    })
    .await;
    let url = format!("{}/api/v1/configmaps?resourceVersion=0", proxy.url);
    assert_eq!(get_json(&url).await.0, 200);
    sim.faults().refuse_connections_for(Duration::from_secs(60));
    // Within the bound: served, stale; then refused.
    let deadline = Instant::now() + DEADLINE;
    let mut saw_stale = false;
    let status = loop {
        let (code, v) = get_json(&url).await;
        if code == 200 {
            saw_stale |= readyz(&proxy.url, "")
                .await
                .1
                .starts_with("ok: serving stale");
        } else {
            break v;
        }
        assert!(Instant::now() < deadline, "never refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(saw_stale, "never reported serving stale before the bound");
    assert_eq!(status["code"], 503, "{status}");
    assert_eq!(status["reason"], "ServiceUnavailable", "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("the cache of configmaps has not followed the upstream for ")
            && message.contains("longer than cache.max_staleness_secs (1s)"),
        "{message}"
    );
    // A resumed watch and a GET are refused alike; /readyz fails and says why.
    let (code, _) = get_json(&format!(
        "{}/api/v1/configmaps?watch=1&resourceVersion=1",
        proxy.url
    ))
    .await;
    assert_eq!(code, 503);
    let (code, _) = get_json(&format!(
        "{}/api/v1/namespaces/default/configmaps/any?resourceVersion=0",
        proxy.url
    ))
    .await;
    assert_eq!(code, 503);
    let (code, body) = readyz(&proxy.url, "?verbose").await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("[-]cache/configmaps failed: not following the upstream for "),
        "{body}"
    );
    // The upstream is back: served again, fresh.
    sim.faults().clear();
    let deadline = Instant::now() + DEADLINE;
    while get_json(&url).await.0 != 200 {
        assert!(Instant::now() < deadline, "still refused after the outage");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(freshness(&proxy.url).await.1, 0);
}

/// A directory made for another type than the upstream now serves (here: its `info.json`
/// names another kind, as after a custom resource was re-created differently) is not served
/// from: the upstream answered discovery, so the cache syncs afresh and the directory is
/// rewritten for the type the upstream serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_of_another_type_is_replaced_by_a_fresh_sync() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let sim = sim().await;
    let create = |name: &str| create_configmap(&sim, name);
    create("old");
    let proxy = proxy_for(&sim, |c| c.cache.persist_dir = Some(root.clone())).await;
    proxy.proxy.shutdown().await;
    drop(proxy);
    let info = root.join("core_v1_configmaps").join("info.json");
    let text = std::fs::read_to_string(&info).unwrap();
    assert!(text.contains(r#""kind":"ConfigMap""#), "{text}");
    std::fs::write(
        &info,
        text.replace(r#""kind":"ConfigMap""#, r#""kind":"Other""#),
    )
    .unwrap();
    // Meanwhile the upstream changed: a restored cache would not know "new".
    create("new");

    let proxy = proxy_for(&sim, |c| c.cache.persist_dir = Some(root.clone())).await;
    let (_, items) = configmaps(&proxy.url).await;
    assert!(
        items.contains_key("new") && items.contains_key("old"),
        "{items:?}"
    );
    let (_, v) = get_json(&format!(
        "{}/api/v1/configmaps?resourceVersion=0",
        proxy.url
    ))
    .await;
    assert_eq!(v["kind"], "ConfigMapList");
    assert_eq!(readyz(&proxy.url, "").await, (200, "ok".to_string()));
    assert!(
        std::fs::read_to_string(&info)
            .unwrap()
            .contains(r#""kind":"ConfigMap""#)
    );
}
