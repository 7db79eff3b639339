//! kubectl (the real binary on the machine) through watchmux: tables (Table requests pass
//! through), a watch that follows a change made in the simulator, JSON output equal to the
//! simulator's, and writes that pass through and take effect upstream. Each test compares with
//! the same kubectl command run against the simulator directly where the output is comparable.

use crate::common::kubectl::{kubectl, next_line, run};

use std::process::Stdio;
use std::time::Duration;

use kube_sim::Simulator;
use kube_sim::fleet::FleetSpec;
use kube_sim::semantics::DeleteOptions;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Runs `args` against `server` and returns stdout; fails the test on a kubectl error.
async fn ok(server: &str, home: &tempfile::TempDir, args: &[&str]) -> String {
    let mut c = kubectl(server, home);
    c.args(args);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl {args:?} via {server} failed: {err}");
    out
}

async fn fleet_sim() -> Simulator {
    crate::common::sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 3,
            pods: 9,
            namespaces: 2,
            seed: 7,
        });
    })
    .await
}

/// Table rows without the AGE column (the one cell that depends on when the server printed).
fn rows_without_age(out: &str) -> Vec<Vec<String>> {
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    let age = header.iter().position(|h| *h == "AGE");
    let keep = |(i, _): &(usize, &str)| Some(*i) != age;
    std::iter::once(
        header
            .iter()
            .copied()
            .enumerate()
            .filter(keep)
            .map(|(_, s)| s.to_string())
            .collect(),
    )
    .chain(lines.map(|l| {
        l.split_whitespace()
            .enumerate()
            .filter(keep)
            .map(|(_, s)| s.to_string())
            .collect()
    }))
    .collect()
}

#[tokio::test]
async fn get_pods_all_namespaces_prints_the_server_table() {
    let sim = fleet_sim().await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let home = tempfile::tempdir().unwrap();
    let before = sim.stats()["resources"]["pods"]["listRequests"]
        .as_u64()
        .unwrap();
    let via = ok(&px.url, &home, &["get", "pods", "-A"]).await;
    // kubectl asks for a server-side Table, which only the upstream can print: it passed through.
    assert!(
        sim.stats()["resources"]["pods"]["listRequests"]
            .as_u64()
            .unwrap()
            > before,
        "the Table LIST reached the simulator"
    );
    let direct = ok(&sim.url(), &home, &["get", "pods", "-A"]).await;
    assert_eq!(rows_without_age(&via), rows_without_age(&direct));

    let rows = rows_without_age(&via);
    assert_eq!(
        rows[0],
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS"]
    );
    let pods = sim.resource("", "v1", "pods").unwrap();
    let page = sim
        .store()
        .list(&pods, None, None, None, 0, &|_| true, false)
        .unwrap();
    assert_eq!(rows.len() - 1, page.items.len(), "{via}");
    for (row, obj) in rows[1..].iter().zip(&page.items) {
        assert_eq!(row[0], obj.namespace);
        assert_eq!(row[1], obj.name);
        let v: Value = serde_json::from_slice(&obj.body).unwrap();
        assert_eq!(row[3], v["status"]["phase"].as_str().unwrap());
    }
}

#[tokio::test]
async fn get_pods_watch_follows_a_change_made_in_the_simulator() {
    let sim = fleet_sim().await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let pods = sim.resource("", "v1", "pods").unwrap();
    let existing = sim.store().count(&pods);
    let home = tempfile::tempdir().unwrap();
    let mut c = kubectl(&px.url, &home);
    c.args(["get", "pods", "-A", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("kubectl is installed");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = next_line(&mut lines).await;
    assert!(
        header.starts_with("EVENT")
            && header.contains("NAMESPACE")
            && header.contains("NAME")
            && header.contains("STATUS"),
        "{header}"
    );
    for _ in 0..existing {
        let l = next_line(&mut lines).await;
        assert!(l.starts_with("ADDED"), "the listed pods first: {l}");
    }
    // kubectl watches from its list's RV once the list is printed; wait until its (Table)
    // watch is registered in watchmux's cache before changing anything.
    let cache = px.proxy.cache("", "v1", "pods").expect("pods are cached");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while cache.watcher_count() < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "kubectl's watch never reached watchmux's cache"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ns = {
        let page = sim
            .store()
            .list(&pods, None, None, None, 1, &|_| true, false)
            .unwrap();
        page.items[0].namespace.clone()
    };
    sim.ops()
        .create(
            &pods,
            Some(&ns),
            crate::common::pod("during", "node-00000", json!({})),
            false,
        )
        .unwrap();
    let line = next_line(&mut lines).await;
    assert!(
        line.starts_with("ADDED") && line.contains(&ns) && line.contains("during"),
        "{line}"
    );
    sim.ops()
        .delete(
            &pods,
            Some(&ns),
            "during",
            &DeleteOptions {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
    let line = next_line(&mut lines).await;
    assert!(
        line.starts_with("DELETED") && line.contains("during"),
        "{line}"
    );
    child.kill().await.ok();
}

#[tokio::test]
async fn get_nodes_json_equals_the_simulators_nodes() {
    let sim = fleet_sim().await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let home = tempfile::tempdir().unwrap();
    let via: Value =
        serde_json::from_str(&ok(&px.url, &home, &["get", "nodes", "-o", "json"]).await)
            .expect("JSON output");
    let direct: Value =
        serde_json::from_str(&ok(&sim.url(), &home, &["get", "nodes", "-o", "json"]).await)
            .expect("JSON output");
    assert_eq!(via, direct);

    // And it is exactly what the simulator stores, each item with its type meta.
    let nodes = sim.resource("", "v1", "nodes").unwrap();
    let page = sim
        .store()
        .list(&nodes, None, None, None, 0, &|_| true, false)
        .unwrap();
    let items = via["items"].as_array().unwrap();
    assert_eq!(items.len(), page.items.len());
    for (item, obj) in items.iter().zip(&page.items) {
        let mut stored: Value = serde_json::from_slice(&obj.body).unwrap();
        let m = stored.as_object_mut().unwrap();
        m.insert("kind".into(), json!("Node"));
        m.insert("apiVersion".into(), json!("v1"));
        assert_eq!(item, &stored);
    }

    // The single-object form too (a GET, passed through).
    let one: Value = serde_json::from_str(
        &ok(&px.url, &home, &["get", "node", "node-00001", "-o", "json"]).await,
    )
    .unwrap();
    assert_eq!(one, items[1]);
}

#[tokio::test]
async fn create_and_delete_go_through_and_take_effect_upstream() {
    let sim = crate::common::sim().await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("objs.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n  labels:\n    app: demo\ndata:\n  mode: fast\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  nodeName: node-1\n  containers:\n  - name: nginx\n    image: nginx:1.27\n",
    )
    .unwrap();
    let out = ok(&px.url, &home, &["create", "-f", file.to_str().unwrap()]).await;
    assert!(
        out.contains("configmap/settings created") && out.contains("pod/web created"),
        "{out}"
    );
    let cms = sim.resource("", "v1", "configmaps").unwrap();
    let pods = sim.resource("", "v1", "pods").unwrap();
    let cm = sim
        .ops()
        .get(&cms, Some("default"), "settings")
        .expect("created in the simulator");
    let v: Value = serde_json::from_slice(&cm.body).unwrap();
    assert_eq!(v["data"]["mode"], "fast");
    assert_eq!(cm.labels, vec![("app".to_string(), "demo".to_string())]);
    sim.ops()
        .get(&pods, Some("default"), "web")
        .expect("created in the simulator");

    // A second create conflicts with the upstream's own Status.
    let mut c = kubectl(&px.url, &home);
    c.arg("create").arg("-f").arg(&file);
    let (okay, _, err) = run(c).await;
    assert!(!okay);
    assert!(
        err.contains("AlreadyExists") && err.contains("configmaps \"settings\" already exists"),
        "{err}"
    );

    // Reads through watchmux see the writes (its cache followed the upstream).
    let got: Value = serde_json::from_str(
        &ok(
            &px.url,
            &home,
            &[
                "get",
                "configmap",
                "settings",
                "-n",
                "default",
                "-o",
                "json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(got["data"]["mode"], "fast");

    // The pod is bound to a node: kubectl waits (with a watch on metadata.name through watchmux)
    // for the graceful deletion to finish.
    let out = ok(&px.url, &home, &["delete", "pod", "web", "-n", "default"]).await;
    assert!(out.contains("pod \"web\" deleted"), "{out}");
    assert!(
        sim.ops().get(&pods, Some("default"), "web").is_err(),
        "the pod is gone once kubectl returns"
    );
    let out = ok(
        &px.url,
        &home,
        &["delete", "configmap", "settings", "-n", "default"],
    )
    .await;
    assert!(out.contains("configmap \"settings\" deleted"), "{out}");
    assert!(sim.ops().get(&cms, Some("default"), "settings").is_err());

    // kubectl sees the deletions through watchmux too.
    let mut c = kubectl(&px.url, &home);
    c.args(["get", "configmap", "settings", "-n", "default"]);
    let (okay, _, err) = run(c).await;
    assert!(!okay);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
}

/// kubectl with its protobuf request bodies (its generators send protobuf and ask for protobuf
/// first) through watchmux, deployments and configmaps cached: create, run, scale, get (Table,
/// `-o yaml`, `-w`) and delete all work.
#[tokio::test]
async fn kubectl_protobuf_commands_work_through_watchmux() {
    let sim = crate::common::sim().await;
    let px = crate::common::proxy_for(&sim, |c| {
        c.cache.resources.push(watchmux::config::ResourceSpec::new(
            "apps",
            "v1",
            "deployments",
        ));
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    let u = &px.url;
    let out = ok(
        u,
        &home,
        &["create", "configmap", "x", "--from-literal=a=b"],
    )
    .await;
    assert_eq!(out.trim(), "configmap/x created");
    let out = ok(u, &home, &["create", "deployment", "d", "--image=nginx"]).await;
    assert_eq!(out.trim(), "deployment.apps/d created");
    let out = ok(u, &home, &["create", "namespace", "team"]).await;
    assert_eq!(out.trim(), "namespace/team created");
    let out = ok(u, &home, &["run", "web", "--image=nginx", "-n", "team"]).await;
    assert_eq!(out.trim(), "pod/web created");
    // `get -w` on the deployment sees the scale as a MODIFIED (a row with 3 desired).
    let mut c = kubectl(u, &home);
    c.args([
        "get",
        "deployment",
        "d",
        "-w",
        "--no-headers",
        "-o",
        "custom-columns=N:.metadata.name,R:.spec.replicas",
    ])
    .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = next_line(&mut lines).await;
    assert_eq!(first.split_whitespace().collect::<Vec<_>>(), ["d", "1"]);
    let out = ok(u, &home, &["scale", "deployment", "d", "--replicas=3"]).await;
    assert_eq!(out.trim(), "deployment.apps/d scaled");
    let next = next_line(&mut lines).await;
    assert_eq!(next.split_whitespace().collect::<Vec<_>>(), ["d", "3"]);
    let _ = child.kill().await;
    // Reads of cached kinds: the Table (printed by the cache) and the YAML.
    let table = ok(u, &home, &["get", "deployments", "--no-headers"]).await;
    let cells: Vec<&str> = table.split_whitespace().collect();
    assert_eq!(cells[..4], ["d", "0/3", "0", "0"], "{table}");
    let yaml = ok(u, &home, &["get", "configmap", "x", "-o", "yaml"]).await;
    let v: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(v["data"], serde_json::json!({"a": "b"}));
    // What kubectl sent in protobuf was stored as kube stores it: no zero values a Go client's
    // empty fields would add.
    let meta = v["metadata"].as_object().unwrap();
    let mut keys: Vec<&str> = meta.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "creationTimestamp",
            "name",
            "namespace",
            "resourceVersion",
            "uid"
        ]
    );
    // Deletes pass through and the cache follows.
    let out = ok(u, &home, &["delete", "deployment", "d"]).await;
    assert_eq!(out.trim(), "deployment.apps \"d\" deleted");
    let out = ok(u, &home, &["delete", "configmap", "x"]).await;
    assert_eq!(out.trim(), "configmap \"x\" deleted");
    let mut c = kubectl(u, &home);
    c.args(["get", "deployment", "d"]);
    let (okay, _, err) = run(c).await;
    assert!(!okay && err.contains("not found"), "{err}");
}
