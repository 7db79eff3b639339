//! kubectl (the real binary on the machine) against the simulator: the tables it prints, JSON
//! output, create/delete, and a watch that shows a change made meanwhile.

use kube_sim::testkit::kubectl::{kubectl, next_line, run};

use std::process::Stdio;

use kube_sim::Simulator;
use kube_sim::fleet::FleetSpec;
use kube_sim::semantics::DeleteOptions;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

async fn fleet_sim() -> Simulator {
    kube_sim::testkit::sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 3,
            pods: 9,
            namespaces: 2,
            seed: 7,
        });
    })
    .await
}

#[tokio::test]
async fn get_pods_all_namespaces_prints_the_server_table() {
    let sim = fleet_sim().await;
    let home = tempfile::tempdir().unwrap();
    let mut c = kubectl(&sim.url(), &home);
    c.args(["get", "pods", "-A"]);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl failed: {err}");
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 9, "{out}");
    let pods = sim.resource("", "v1", "pods").unwrap();
    let page = sim
        .store()
        .list(&pods, None, None, None, 0, &|_| true, false)
        .unwrap();
    for (row, obj) in rows.iter().zip(&page.items) {
        assert_eq!(row[0], obj.namespace);
        assert_eq!(row[1], obj.name);
        let v: Value = serde_json::from_slice(&obj.body).unwrap();
        let total = v["spec"]["containers"].as_array().unwrap().len();
        assert!(
            row[2].ends_with(&format!("/{total}")),
            "READY column {} for {total} containers",
            row[2]
        );
        assert_eq!(row[3], v["status"]["phase"].as_str().unwrap());
    }
}

#[tokio::test]
async fn get_nodes_json_is_a_list_of_the_nodes() {
    let sim = fleet_sim().await;
    let home = tempfile::tempdir().unwrap();
    let mut c = kubectl(&sim.url(), &home);
    c.args(["get", "nodes", "-o", "json"]);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl failed: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "List");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["node-00000", "node-00001", "node-00002"]);
    for i in v["items"].as_array().unwrap() {
        assert_eq!(i["kind"], "Node");
        assert!(
            i["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                > 0
        );
        assert!(i["status"]["nodeInfo"]["kubeletVersion"].is_string());
    }
}

#[tokio::test]
async fn create_from_file_then_delete() {
    let sim = kube_sim::testkit::sim().await;
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("objs.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n  labels:\n    app: demo\ndata:\n  mode: fast\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  nodeName: node-1\n  containers:\n  - name: nginx\n    image: nginx:1.27\n",
    )
    .unwrap();
    let mut c = kubectl(&sim.url(), &home);
    c.arg("create").arg("-f").arg(&file);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl create failed: {err}");
    assert!(
        out.contains("configmap/settings created") && out.contains("pod/web created"),
        "{out}"
    );

    let cms = sim.resource("", "v1", "configmaps").unwrap();
    let cm = sim
        .ops()
        .get(&cms, Some("default"), "settings")
        .expect("created in the simulator");
    let v: Value = serde_json::from_slice(&cm.body).unwrap();
    assert_eq!(v["data"]["mode"], "fast");
    assert_eq!(cm.labels, vec![("app".to_string(), "demo".to_string())]);

    // A second create conflicts, as on a real cluster.
    let mut c = kubectl(&sim.url(), &home);
    c.arg("create").arg("-f").arg(&file);
    let (ok, _, err) = run(c).await;
    assert!(!ok);
    assert!(
        err.contains("AlreadyExists") && err.contains("configmaps \"settings\" already exists"),
        "{err}"
    );

    // The pod is bound to a node: kubectl waits for the graceful deletion to finish.
    let mut c = kubectl(&sim.url(), &home);
    c.args(["delete", "pod", "web", "-n", "default"]);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl delete failed: {err}");
    assert!(out.contains("pod \"web\" deleted"), "{out}");
    let pods = sim.resource("", "v1", "pods").unwrap();
    assert!(
        sim.ops().get(&pods, Some("default"), "web").is_err(),
        "the pod is gone once kubectl returns"
    );

    let mut c = kubectl(&sim.url(), &home);
    c.args(["delete", "configmap", "settings", "-n", "default"]);
    let (ok, _, err) = run(c).await;
    assert!(ok, "{err}");
    assert!(sim.ops().get(&cms, Some("default"), "settings").is_err());
}

#[tokio::test]
async fn get_pods_watch_shows_a_change_made_meanwhile() {
    let sim = kube_sim::testkit::sim().await;
    let pods = sim.resource("", "v1", "pods").unwrap();
    sim.ops()
        .create(
            &pods,
            Some("default"),
            kube_sim::testkit::pod("before", "node-1", json!({})),
            false,
        )
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut c = kubectl(&sim.url(), &home);
    c.args([
        "get",
        "pods",
        "-n",
        "default",
        "-w",
        "--output-watch-events",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().expect("kubectl is installed");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = next_line(&mut lines).await;
    assert!(
        header.starts_with("EVENT") && header.contains("NAME") && header.contains("STATUS"),
        "{header}"
    );
    let first = next_line(&mut lines).await;
    assert!(
        first.starts_with("ADDED") && first.contains("before"),
        "{first}"
    );

    // Changes made while kubectl watches appear as they happen.
    sim.ops()
        .create(
            &pods,
            Some("default"),
            kube_sim::testkit::pod("during", "node-1", json!({})),
            false,
        )
        .unwrap();
    let line = next_line(&mut lines).await;
    assert!(
        line.starts_with("ADDED") && line.contains("during"),
        "{line}"
    );
    sim.ops()
        .delete(
            &pods,
            Some("default"),
            "before",
            &DeleteOptions {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
    let line = next_line(&mut lines).await;
    assert!(
        line.starts_with("DELETED") && line.contains("before"),
        "{line}"
    );
    child.kill().await.ok();
}

#[tokio::test]
async fn apply_twice_and_label_use_strategic_merge_patches() {
    let sim = kube_sim::testkit::sim().await;
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("pod.yaml");
    let manifest = |image: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\n  namespace: default\n  labels:\n    tier: web\nspec:\n  containers:\n  - name: main\n    image: {image}\n  - name: sidecar\n    image: envoy:1\n"
        )
    };
    std::fs::write(&file, manifest("nginx:1.26")).unwrap();
    let mut c = kubectl(&sim.url(), &home);
    c.arg("apply").arg("-f").arg(&file);
    let (ok, out, err) = run(c).await;
    assert!(ok, "first apply: {err}");
    assert!(out.contains("pod/app created"), "{out}");

    std::fs::write(&file, manifest("nginx:1.27")).unwrap();
    let mut c = kubectl(&sim.url(), &home);
    c.arg("apply").arg("-f").arg(&file);
    let (ok, out, err) = run(c).await;
    assert!(ok, "second apply: {err}");
    assert!(out.contains("pod/app configured"), "{out}");

    let mut c = kubectl(&sim.url(), &home);
    c.args(["label", "pod", "app", "-n", "default", "track=canary"]);
    let (ok, _, err) = run(c).await;
    assert!(ok, "label: {err}");

    let pods = sim.resource("", "v1", "pods").unwrap();
    let p = sim.ops().get(&pods, Some("default"), "app").unwrap();
    let v: Value = serde_json::from_slice(&p.body).unwrap();
    let images: Vec<&str> = v["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["image"].as_str().unwrap())
        .collect();
    assert_eq!(
        images,
        ["nginx:1.27", "envoy:1"],
        "the patch merged containers by name"
    );
    assert_eq!(v["metadata"]["labels"]["tier"], "web");
    assert_eq!(v["metadata"]["labels"]["track"], "canary");
    assert!(
        v["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    assert_eq!(
        v["metadata"]["generation"], 2,
        "one spec change since creation"
    );

    // Applying the same manifest again changes nothing: no new resourceVersion.
    let before = p.rv;
    let mut c = kubectl(&sim.url(), &home);
    c.arg("apply").arg("-f").arg(&file);
    let (ok, out, err) = run(c).await;
    assert!(ok, "third apply: {err}");
    assert!(out.contains("pod/app unchanged"), "{out}");
    assert_eq!(
        sim.ops().get(&pods, Some("default"), "app").unwrap().rv,
        before
    );
}
