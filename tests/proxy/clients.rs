//! Real clients' default reads, served from the cache: what they get through watchmux equals what
//! the simulator answers the same requests directly, and the simulator's counters show that no
//! full LIST reached it — only the small freshness requests.
//!
//! The official Python client (`list_namespaced_pod()` and `list_pod_for_all_namespaces()` with
//! their defaults: consistent LISTs), kube-rs reflectors with kube-runtime's default watcher
//! configuration (consistent LISTs in pages of 500), kubectl.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use kube_sim::fleet::FleetSpec;

const PODS: usize = 300;

async fn fleet_sim() -> kube_sim::Simulator {
    sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 12,
            pods: PODS,
            namespaces: 3,
            seed: 7,
        });
    })
    .await
}

fn pods_stats(sim: &kube_sim::Simulator) -> (u64, u64) {
    let s = sim.stats();
    let p = &s["resources"]["pods"];
    (
        p["listRequests"].as_u64().unwrap(),
        p["listItemsSent"].as_u64().unwrap(),
    )
}

/// The Python interpreter of the environment `.ci/install-deps` prepares.
fn python() -> std::path::PathBuf {
    let env = std::env::var_os("WATCHMUX_PYENV").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/watchmux/pyenv")
        },
        std::path::PathBuf::from,
    );
    let py = env.join("bin/python");
    assert!(
        py.exists(),
        "{} missing: run .ci/install-deps (it installs the Kubernetes Python client)",
        py.display()
    );
    py
}

/// Runs `lists` default `list_namespaced_pod(ns)` and `list_pod_for_all_namespaces()` calls of
/// the official Python client against `url`; returns for each answer the SHA-256 of its bytes,
/// its item count and resourceVersion, and checks the typed call deserializes.
async fn python_lists(url: &str, ns: &str, lists: usize) -> Vec<Value> {
    const SCRIPT: &str = r#"
import hashlib, json, sys
from kubernetes import client
cfg = client.Configuration()
cfg.host = sys.argv[1]
api = client.CoreV1Api(client.ApiClient(cfg))
ns, n = sys.argv[2], int(sys.argv[3])
out = []
for i in range(n):
    if i % 2 == 0:
        r = api.list_namespaced_pod(ns, _preload_content=False)
    else:
        r = api.list_pod_for_all_namespaces(_preload_content=False)
    body = json.loads(r.data)
    out.append({"sha256": hashlib.sha256(r.data).hexdigest(), "items": len(body["items"]),
                "resourceVersion": body["metadata"]["resourceVersion"]})
typed = api.list_namespaced_pod(ns)
assert len(typed.items) == out[0]["items"], "typed list"
print(json.dumps(out))
"#;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("lists.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python())
            .arg(&script)
            .arg(url)
            .arg(ns)
            .arg(lists.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python finishes within 120 s")
    .expect("python runs");
    assert!(
        out.status.success(),
        "python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_default_lists_come_from_the_cache() {
    let sim = fleet_sim().await;
    let p = proxy_for(&sim, |_| {}).await;
    // Enough for many freshness checks (one full LIST would send 100 to 300 items, more
    // than the bound below allows); each list is a Python call, so a few dozen suffice.
    let lists = 20;
    let direct = python_lists(&sim.url(), "fleet-1", lists).await;
    let before = pods_stats(&sim);
    let proxied = python_lists(&p.url, "fleet-1", lists).await;
    let after = pods_stats(&sim);
    assert_eq!(proxied.len(), lists);
    for (i, (a, b)) in proxied.iter().zip(&direct).enumerate() {
        assert_eq!(
            a, b,
            "answer {i} differs from the simulator's, byte for byte"
        );
    }
    assert_eq!(
        direct[1]["items"], PODS,
        "the all-namespaces list has every pod"
    );
    // Each freshness check LISTs one item; a full LIST would send hundreds.
    let (lists_up, items_up) = (after.0 - before.0, after.1 - before.1);
    assert!(
        items_up <= lists_up && lists_up <= lists as u64 + 1,
        "{lists} Python lists cost the upstream {lists_up} LISTs with {items_up} items"
    );
}

/// `kubectl get pods -A` with its defaults: a consistent LIST in pages of 500, asking for a
/// Table.
async fn kubectl_get_pods(server: &str, home: &tempfile::TempDir) -> String {
    let mut c = crate::common::kubectl::kubectl(server, home);
    c.args(["get", "pods", "-A"]);
    let (ok, out, err) = crate::common::kubectl::run(c).await;
    assert!(ok, "kubectl get pods -A via {server}: {err}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_tables_come_from_the_cache() {
    let sim = fleet_sim().await;
    let p = proxy_for(&sim, |_| {}).await;
    let home = tempfile::tempdir().unwrap();
    // Rows without the AGE column (the last one), the one cell that depends on when the server
    // printed.
    let without_age = |out: &str| -> Vec<Vec<String>> {
        out.lines()
            .map(|l| {
                let mut cells: Vec<String> = l.split_whitespace().map(str::to_string).collect();
                cells.pop();
                cells
            })
            .collect()
    };
    let direct = kubectl_get_pods(&sim.url(), &home).await;
    assert_eq!(direct.lines().count(), PODS + 1, "{direct}");
    let before = pods_stats(&sim);
    // Each run is a kubectl process (about 0.4 CPU-s, most of it kubectl's own start); one
    // full LIST would send 300 items, more than the bound below allows for any number of runs.
    let runs = 10;
    for i in 0..runs {
        let out = kubectl_get_pods(&p.url, &home).await;
        assert_eq!(
            without_age(&out),
            without_age(&direct),
            "kubectl get pods -A #{i} through watchmux"
        );
    }
    let after = pods_stats(&sim);
    let (lists_up, items_up) = (after.0 - before.0, after.1 - before.1);
    assert!(
        items_up <= lists_up && lists_up <= runs,
        "{runs} kubectl get pods -A cost the upstream {lists_up} LISTs with {items_up} items"
    );
}
