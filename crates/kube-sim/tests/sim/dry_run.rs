//! `dryRun=All` as kube-apiserver does it: every write verb is validated and decided as the
//! real one and answers what it would have written, but nothing is stored, no resourceVersion is
//! consumed and no watcher sees an event; a value other than `All` is kube's 422. Also the kinds
//! `kubectl apply -k deploy/overlays/...` writes (ServiceAccount, PersistentVolumeClaim, RBAC,
//! PodDisruptionBudget, HorizontalPodAutoscaler) and kubectl's own server-side dry runs.

use std::time::Duration;

use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::testkit::kubectl::{kubectl, run};
use kube_sim::testkit::{get_json, request, send_json, sim, watch};
use serde_json::{Value, json};

const CM: &str = "/api/v1/namespaces/default/configmaps";

fn body(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(b)))
}

/// Every change the simulator has stored so far: its global revision.
fn revision(sim: &Simulator) -> u64 {
    sim.store().revision()
}

async fn create_cm(sim: &Simulator, name: &str) -> Value {
    let (s, v) = send_json(
        Method::POST,
        &format!("{}{CM}", sim.url()),
        "application/json",
        &json!({"metadata": {"name": name}, "data": {"k": "1"}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v
}

#[tokio::test]
async fn dry_run_writes_answer_as_kube_and_store_nothing() {
    let sim = sim().await;
    let base = sim.url();
    let cm = create_cm(&sim, "real").await;
    let rv = cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let before = revision(&sim);
    // A watcher from now on must see only the real write at the end, never a dry run.
    let mut w = watch(&format!("{base}{CM}?watch=1&resourceVersion={rv}")).await;

    // Create: 201 with the object as it would be stored (uid, creationTimestamp), without a
    // resourceVersion (none was consumed).
    let (s, v) = send_json(
        Method::POST,
        &format!(
            "{base}{CM}?dryRun=All&fieldManager=kubectl-client-side-apply&fieldValidation=Strict"
        ),
        "application/json",
        &json!({"metadata": {"name": "dry"}, "data": {"k": "1"}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["kind"], "ConfigMap");
    assert_eq!(v["metadata"]["name"], "dry");
    assert_eq!(v["metadata"]["namespace"], "default");
    assert!(v["metadata"]["uid"].is_string() && v["metadata"]["creationTimestamp"].is_string());
    assert!(v["metadata"].get("resourceVersion").is_none(), "{v}");
    let (s, _) = get_json(&format!("{base}{CM}/dry")).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a dry-run create stores nothing");

    // Update and patch: the changed object at the current resourceVersion; the stored one
    // keeps its data.
    let mut changed = cm.clone();
    changed["data"]["k"] = json!("2");
    let (s, v) = send_json(
        Method::PUT,
        &format!("{base}{CM}/real?dryRun=All"),
        "application/json",
        &changed,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["data"]["k"], "2");
    assert_eq!(v["metadata"]["resourceVersion"], rv.as_str());
    let (s, v) = send_json(
        Method::PATCH,
        &format!("{base}{CM}/real?dryRun=All"),
        "application/merge-patch+json",
        &json!({"data": {"k": "3"}}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["data"]["k"], "3");
    assert_eq!(v["metadata"]["resourceVersion"], rv.as_str());

    // Delete (query or DeleteOptions body) and delete-collection: kube's answers, nothing gone.
    let (s, _, b) = request(
        Method::DELETE,
        &format!("{base}{CM}/real?dryRun=All"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body(&b)["status"], "Success");
    let (s, _, b) = request(
        Method::DELETE,
        &format!("{base}{CM}/real"),
        &[("content-type", "application/json")],
        r#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let (s, _, b) = request(Method::DELETE, &format!("{base}{CM}?dryRun=All"), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    let list = body(&b);
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"real"), "what would be deleted: {names:?}");

    let (s, v) = get_json(&format!("{base}{CM}/real")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["data"]["k"], "1");
    assert_eq!(v["metadata"]["resourceVersion"], rv.as_str());
    assert_eq!(revision(&sim), before, "no resourceVersion was consumed");

    // The watcher's first event is the real write made now.
    create_cm(&sim, "after").await;
    let ev = w.next_non_bookmark(Duration::from_secs(5)).await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "after", "{ev}");
}

#[tokio::test]
async fn dry_runs_fail_as_the_real_writes_would() {
    let sim = sim().await;
    let base = sim.url();
    create_cm(&sim, "taken").await;
    let before = revision(&sim);
    let post = |url: String, v: Value| async move {
        send_json(Method::POST, &url, "application/json", &v).await
    };
    let (s, v) = post(
        format!("{base}{CM}?dryRun=All"),
        json!({"metadata": {"name": "taken"}}),
    )
    .await;
    assert_eq!(
        (s, v["reason"].as_str()),
        (StatusCode::CONFLICT, Some("AlreadyExists"))
    );
    let (s, v) = post(
        format!("{base}/api/v1/namespaces/nowhere/configmaps?dryRun=All"),
        json!({"metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["message"], "namespaces \"nowhere\" not found");
    let (s, v) = post(
        format!("{base}{CM}?dryRun=All"),
        json!({"metadata": {"name": "Not_A_Name"}}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let (s, v) = send_json(
        Method::PUT,
        &format!("{base}{CM}/taken?dryRun=All"),
        "application/json",
        &json!({"metadata": {"name": "taken", "resourceVersion": "1"}}),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "a stale resourceVersion: {v}");
    let (s, _, _) = request(
        Method::DELETE,
        &format!("{base}{CM}/gone?dryRun=All"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // A dryRun value other than All: kube's 422 on the verb's options, before the body is read.
    let (s, v) = post(
        format!("{base}{CM}?dryRun=Server"),
        json!({"metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        v["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Server"]: supported values: "All""#
    );
    assert_eq!(v["details"]["causes"][0]["field"], "dryRun");
    assert_eq!(
        v["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
    let (s, _, b) = request(
        Method::POST,
        &format!("{base}{CM}?dryRun=x"),
        &[("content-type", "application/json")],
        "not json",
    )
    .await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "the options before the body"
    );
    assert!(
        body(&b)["message"]
            .as_str()
            .unwrap()
            .starts_with("CreateOptions")
    );
    for (method, url, ct, what) in [
        (
            Method::PUT,
            format!("{base}{CM}/taken?dryRun=All&dryRun=x"),
            "application/json",
            "UpdateOptions",
        ),
        (
            Method::PATCH,
            format!("{base}{CM}/taken?dryRun=x"),
            "application/merge-patch+json",
            "PatchOptions",
        ),
        (
            Method::DELETE,
            format!("{base}{CM}/taken?dryRun=x"),
            "application/json",
            "DeleteOptions",
        ),
    ] {
        let body_text = if method == Method::DELETE { "" } else { "{}" };
        let (s, _, b) = request(method, &url, &[("content-type", ct)], body_text).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{url}");
        let m = body(&b)["message"].as_str().unwrap().to_string();
        assert!(
            m.starts_with(&format!(
                "{what}.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
            )),
            "{m}"
        );
    }
    let (s, _, b) = request(
        Method::DELETE,
        &format!("{base}{CM}/taken"),
        &[("content-type", "application/json")],
        r#"{"dryRun":["Bogus"]}"#,
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body(&b)["message"],
        r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Bogus"]: supported values: "All""#
    );
    assert_eq!(revision(&sim), before, "nothing was written");
    let (s, _) = get_json(&format!("{base}{CM}/taken")).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn a_dry_run_pod_deletion_starts_no_kubelet() {
    let sim = sim().await;
    let base = sim.url();
    let pods = format!("{base}/api/v1/namespaces/default/pods");
    let pod = kube_sim::testkit::pod("p", "node-1", json!({}));
    let (s, _) = send_json(Method::POST, &pods, "application/json", &pod).await;
    assert_eq!(s, StatusCode::CREATED);
    let before = revision(&sim);
    // A bound pod is deleted gracefully: the answer is the pod marked for deletion...
    let (s, _, b) = request(Method::DELETE, &format!("{pods}/p?dryRun=All"), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    let v = body(&b);
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    // ...but the pod is not marked, and no simulated kubelet finishes the deletion (the
    // testkit's kubelet takes 200 ms).
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (s, v) = get_json(&format!("{pods}/p")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["metadata"].get("deletionTimestamp").is_none(), "{v}");
    assert_eq!(revision(&sim), before);
}

/// Every member of `want` is in `got` with the same value (`got` may have defaults besides).
/// Whether `got` holds everything `want` says. An empty list sent comes back `null` where the
/// kind is stored in protobuf and its Go field has no `omitempty` (a Role's `rules: []` reads
/// back as `"rules": null` from kube, as here).
fn contains(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Null, Value::Array(w)) => w.is_empty(),
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|x| contains(x, v))),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(x, v)| contains(x, v))
        }
        _ => got == want,
    }
}

/// The objects of a rendered overlay, as kubectl applies them (the kinds the deploy/ overlays
/// use), created for real: each is served and comes back as sent.
#[tokio::test]
async fn the_deployment_kinds_are_served() {
    let sim = sim().await;
    let base = sim.url();
    let objects = [
        (
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}),
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "cr"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "crb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cr"}, "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": []}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
        ),
        (
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}}, "status": {"currentHealthy": 9}}),
        ),
        (
            "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "hpa"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "x"}, "minReplicas": 2, "maxReplicas": 3}}),
        ),
    ];
    for (path, obj) in &objects {
        let (s, v) = send_json(
            Method::POST,
            &format!("{base}{path}"),
            "application/json",
            obj,
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{path}: {v}");
        assert_eq!(v["kind"], obj["kind"]);
        let name = obj["metadata"]["name"].as_str().unwrap();
        let (s, got) = get_json(&format!("{base}{path}/{name}")).await;
        assert_eq!(s, StatusCode::OK, "{path}/{name}");
        assert_eq!(got["apiVersion"], obj["apiVersion"]);
        for k in ["spec", "rules", "roleRef", "subjects"] {
            assert!(contains(&got[k], &obj[k]), "{path}: {k}: {got}");
        }
    }
    let (_, pvc) = get_json(&format!(
        "{base}/api/v1/namespaces/default/persistentvolumeclaims/pvc"
    ))
    .await;
    assert_eq!(pvc["status"]["phase"], "Pending");
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    let (_, pdb) = get_json(&format!(
        "{base}/apis/policy/v1/namespaces/default/poddisruptionbudgets/pdb"
    ))
    .await;
    assert_eq!(pdb["metadata"]["generation"], 1);
    // A create cannot set the status; Go writes the zero status (its counters have no
    // omitempty), as kube answers for a new PodDisruptionBudget.
    assert_eq!(
        pdb["status"],
        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
        "a create cannot set the status: {pdb}"
    );
    let (_, crb) = get_json(&format!(
        "{base}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/crb"
    ))
    .await;
    assert!(crb["metadata"].get("namespace").is_none(), "cluster-scoped");
}

/// kubectl's server-side dry runs (`apply`, `create`, `delete`): what it sends (a GET, then a
/// POST or PATCH with `dryRun=All`), and nothing stays behind.
#[tokio::test]
async fn kubectl_server_dry_runs_change_nothing() {
    let sim = sim().await;
    let home = tempfile::tempdir().unwrap();
    let manifest = home.path().join("m.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: robot\n  namespace: default\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n  namespace: default\ndata:\n  k: changed\n",
    )
    .unwrap();
    let existing = create_cm(&sim, "existing").await;
    let before = revision(&sim);
    let mut c = kubectl(&sim.url(), &home);
    c.arg("apply")
        .arg("--dry-run=server")
        .arg("-f")
        .arg(&manifest);
    let (ok, out, err) = run(c).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("serviceaccount/robot created (server dry run)"),
        "{out}"
    );
    assert!(
        out.contains("configmap/existing configured (server dry run)"),
        "{out}"
    );
    let mut c = kubectl(&sim.url(), &home);
    c.args(["delete", "configmap", "existing", "--dry-run=server"]);
    let (ok, out, err) = run(c).await;
    assert!(ok, "{err}");
    assert!(out.contains("deleted (server dry run)"), "{out}");
    assert_eq!(revision(&sim), before, "kubectl's dry runs wrote nothing");
    let (s, _) = get_json(&format!(
        "{}/api/v1/namespaces/default/serviceaccounts/robot",
        sim.url()
    ))
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, cm) = get_json(&format!("{}{CM}/existing", sim.url())).await;
    assert_eq!(cm, existing);
}
