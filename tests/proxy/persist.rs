//! The durable cache (`cache.persist_dir`) through a real watchmux in front of the simulator:
//! a watchmux restarted while the upstream is down answers cached reads from disk at once,
//! and a client that resumes its watch from the resourceVersion it last saw gets exactly the
//! events it missed once the upstream is back.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::common::{Next, get_json, proxy_for, request, sim, watch};

const DEADLINE: Duration = Duration::from_secs(30);

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
    let create = |name: &str| {
        sim.ops()
            .create(
                &cms,
                Some("default"),
                json!({"metadata": {"name": name}, "data": {"k": "v"}}),
                false,
            )
            .expect("create")
            .rv
    };
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

    // The restarted writer went on from the restored state: its figures are scraped.
    let (status, _, body) = request(
        http::Method::GET,
        &format!("{}/metrics", proxy.url),
        &[],
        "",
    )
    .await;
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    let value = |name: &str| -> f64 {
        let prefix = format!("{name}{{resource=\"configmaps\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {prefix}"))
            .parse()
            .unwrap()
    };
    assert!(value("watchmux_persist_disk_bytes") > 0.0);
    assert!(value("watchmux_persist_bytes_written_total") > 0.0);
    assert_eq!(value("watchmux_persist_write_errors_total"), 0.0);
}
