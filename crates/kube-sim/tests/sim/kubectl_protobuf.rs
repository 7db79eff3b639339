//! kubectl (the real binary on the machine) against the simulator with its default protobuf
//! request bodies: its generators (`create configmap|secret|namespace|deployment`) send
//! protobuf and ask for protobuf first; `run`, `scale`, `get`, `delete` and `get -w` speak JSON
//! around them. Every command works, and what is stored has kube's JSON shape (no value a Go
//! client's zero values would add).

use std::process::Stdio;

use kube_sim::Simulator;
use kube_sim::testkit::kubectl::{kubectl, next_line, run};
use kube_sim::testkit::{get_json, sim};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

async fn kubectl_ok(sim: &Simulator, home: &tempfile::TempDir, args: &[&str]) -> (String, String) {
    let mut c = kubectl(&sim.url(), home);
    c.args(args);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl {args:?} failed: {err}");
    (out, err)
}

/// `kubectl get -o json` of one object, without the values the server picks (uid, times,
/// resourceVersion), which are checked to be there.
async fn stored(sim: &Simulator, home: &tempfile::TempDir, args: &[&str]) -> Value {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "json"]);
    let (out, _) = kubectl_ok(sim, home, &full).await;
    let mut v: Value = serde_json::from_str(&out).unwrap();
    let meta = v["metadata"].as_object_mut().unwrap();
    for k in ["uid", "resourceVersion", "creationTimestamp"] {
        assert!(meta.shift_remove(k).is_some_and(|v| v.is_string()), "{k}");
    }
    v
}

/// The request and response lines of one call in kubectl's `-v=8` log: from the line naming
/// the call (`POST http://…/configmaps…`) to the end of its response headers.
fn logged_call<'a>(log: &'a str, call: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = log.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains(call))
        .unwrap_or_else(|| panic!("no {call:?} in kubectl's log:\n{log}"));
    lines[start..]
        .iter()
        .take_while(|l| !l.contains("Response Body"))
        .copied()
        .collect()
}

#[tokio::test]
async fn kubectl_creates_with_protobuf_bodies() {
    let sim = sim().await;
    let home = tempfile::tempdir().unwrap();
    let u = sim.url();

    // Once with -v=8: the POST carries a protobuf body and asks for protobuf first; the
    // simulator answers 201 in protobuf.
    let (out, log) = kubectl_ok(
        &sim,
        &home,
        &["create", "configmap", "x", "--from-literal=a=b", "-v=8"],
    )
    .await;
    assert_eq!(out.trim(), "configmap/x created");
    let call = logged_call(
        &log,
        &format!("POST {u}/api/v1/namespaces/default/configmaps"),
    );
    let has = |needle: &str| call.iter().any(|l| l.trim_end().ends_with(needle));
    assert!(
        has("Content-Type: application/vnd.kubernetes.protobuf"),
        "{call:#?}"
    );
    assert!(
        has("Accept: application/vnd.kubernetes.protobuf,application/json"),
        "{call:#?}"
    );
    assert!(
        call.iter()
            .any(|l| l.contains("Response Status: 201 Created")),
        "{call:#?}"
    );
    let response = call
        .iter()
        .skip_while(|l| !l.contains("Response Status"))
        .any(|l| {
            l.trim_end()
                .ends_with("Content-Type: application/vnd.kubernetes.protobuf")
        });
    assert!(response, "the answer is protobuf: {call:#?}");
    assert_eq!(
        stored(&sim, &home, &["configmap", "x"]).await,
        json!({"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap",
            "metadata":{"name":"x","namespace":"default"}})
    );
    // `-o yaml` shows the same, and nothing else.
    let (yaml, _) = kubectl_ok(&sim, &home, &["get", "configmap", "x", "-o", "yaml"]).await;
    let keys: Vec<&str> = yaml
        .lines()
        .map(|l| l.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        keys,
        [
            "apiVersion",
            "data",
            "  a",
            "kind",
            "metadata",
            "  creationTimestamp",
            "  name",
            "  namespace",
            "  resourceVersion",
            "  uid"
        ],
        "{yaml}"
    );

    let (out, _) = kubectl_ok(
        &sim,
        &home,
        &["create", "secret", "generic", "s", "--from-literal=k=v"],
    )
    .await;
    assert_eq!(out.trim(), "secret/s created");
    assert_eq!(
        stored(&sim, &home, &["secret", "s"]).await,
        json!({"apiVersion":"v1","data":{"k":"dg=="},"kind":"Secret",
            "metadata":{"name":"s","namespace":"default"},"type":"Opaque"})
    );

    let (out, _) = kubectl_ok(&sim, &home, &["create", "namespace", "team"]).await;
    assert_eq!(out.trim(), "namespace/team created");
    assert_eq!(
        stored(&sim, &home, &["namespace", "team"]).await,
        json!({"apiVersion":"v1","kind":"Namespace",
            "metadata":{"labels":{"kubernetes.io/metadata.name":"team"},"name":"team"},
            "spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}})
    );

    let (out, _) = kubectl_ok(&sim, &home, &["create", "deployment", "d", "--image=nginx"]).await;
    assert_eq!(out.trim(), "deployment.apps/d created");
    let d = stored(&sim, &home, &["deployment", "d"]).await;
    assert_eq!(
        d["metadata"],
        json!({"generation":1,"labels":{"app":"d"},"name":"d","namespace":"default"})
    );
    assert_eq!(
        d["spec"],
        json!({
            "progressDeadlineSeconds":600,"replicas":1,"revisionHistoryLimit":10,
            "selector":{"matchLabels":{"app":"d"}},
            "strategy":{"rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"},"type":"RollingUpdate"},
            "template":{"metadata":{"labels":{"app":"d"}},"spec":{
                "containers":[{"image":"nginx","imagePullPolicy":"Always","name":"nginx",
                    "resources":{},"terminationMessagePath":"/dev/termination-log",
                    "terminationMessagePolicy":"File"}],
                "dnsPolicy":"ClusterFirst","restartPolicy":"Always",
                "schedulerName":"default-scheduler","securityContext":{},
                "terminationGracePeriodSeconds":30}}
        })
    );

    let (out, _) = kubectl_ok(&sim, &home, &["run", "p", "--image=nginx"]).await;
    assert_eq!(out.trim(), "pod/p created");
    let (s, p) = get_json(&format!("{u}/api/v1/namespaces/default/pods/p")).await;
    assert_eq!(s, 200);
    assert_eq!(p["spec"]["containers"][0]["image"], "nginx");

    let (out, _) = kubectl_ok(&sim, &home, &["scale", "deployment", "d", "--replicas=3"]).await;
    assert_eq!(out.trim(), "deployment.apps/d scaled");
    let d = stored(&sim, &home, &["deployment", "d"]).await;
    assert_eq!(d["spec"]["replicas"], 3);

    for (kind, name, said) in [
        ("configmap", "x", "configmap \"x\" deleted"),
        ("secret", "s", "secret \"s\" deleted"),
        ("deployment", "d", "deployment.apps \"d\" deleted"),
    ] {
        let (out, _) = kubectl_ok(&sim, &home, &["delete", kind, name]).await;
        assert_eq!(out.trim(), said);
    }
    let (s, _) = get_json(&format!("{u}/api/v1/namespaces/default/configmaps/x")).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn kubectl_watch_shows_objects_created_in_protobuf() {
    let sim = sim().await;
    let home = tempfile::tempdir().unwrap();
    kubectl_ok(
        &sim,
        &home,
        &["create", "configmap", "before", "--from-literal=a=b"],
    )
    .await;
    let mut c = kubectl(&sim.url(), &home);
    c.args(["get", "configmaps", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("kubectl is installed");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = next_line(&mut lines).await;
    assert!(
        header.starts_with("EVENT") && header.contains("NAME"),
        "{header}"
    );
    let first = next_line(&mut lines).await;
    assert!(
        first.starts_with("ADDED") && first.contains("before"),
        "{first}"
    );
    kubectl_ok(
        &sim,
        &home,
        &["create", "configmap", "during", "--from-literal=a=b"],
    )
    .await;
    let line = next_line(&mut lines).await;
    assert!(
        line.starts_with("ADDED") && line.contains("during"),
        "{line}"
    );
    kubectl_ok(&sim, &home, &["delete", "configmap", "before"]).await;
    let line = next_line(&mut lines).await;
    assert!(
        line.starts_with("DELETED") && line.contains("before"),
        "{line}"
    );
    child.kill().await.ok();
}
