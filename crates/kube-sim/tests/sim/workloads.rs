//! The workload kinds (`apps/v1`, `batch/v1`, `coordination.k8s.io/v1` Lease) as kube-apiserver
//! serves them: kubectl's create / get / scale / watch / delete, server-side Tables, field
//! selectors, discovery, and the `scale` and `status` subresources over raw HTTP and kube-rs.

use std::process::Stdio;
use std::time::Duration;

use http::{Method, StatusCode};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_sim::Simulator;
use kube_sim::testkit::kubectl::{kubectl, next_line, run};
use kube_sim::testkit::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const T: Duration = Duration::from_secs(10);
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

async fn kubectl_ok(sim: &Simulator, home: &tempfile::TempDir, args: &[&str]) -> String {
    let mut c = kubectl(&sim.url(), home);
    c.args(args);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl {args:?} failed: {err}");
    out
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}
        }
    })
}

fn apps_url(sim: &Simulator, resource: &str) -> String {
    format!("{}/apis/apps/v1/namespaces/default/{resource}", sim.url())
}

async fn post(url: &str, body: Value) -> Value {
    let (s, v) = send_json(Method::POST, url, "application/json", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{url}: {v}");
    v
}

async fn table(url: &str) -> Value {
    let (s, _, b) = request(Method::GET, url, &[("accept", TABLE)], "").await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    serde_json::from_slice(&b).unwrap()
}

/// The first row's cells.
fn cells(t: &Value) -> &[Value] {
    t["rows"][0]["cells"].as_array().unwrap()
}

fn column_names(t: &Value) -> Vec<&str> {
    t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// kubectl
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn kubectl_creates_scales_watches_and_deletes_a_deployment() {
    let sim = sim().await;
    let home = tempfile::tempdir().unwrap();
    // `kubectl create deployment` itself sends protobuf; its manifest goes through a file.
    let yaml = kubectl_ok(
        &sim,
        &home,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
    )
    .await;
    let file = home.path().join("web.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = kubectl_ok(&sim, &home, &["create", "-f", file.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "deployment.apps/web created");

    let out = kubectl_ok(&sim, &home, &["get", "deploy"]).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        words(lines[0]),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    );
    assert_eq!(words(lines[1])[..4], ["web", "0/1", "0", "0"]);
    let out = kubectl_ok(&sim, &home, &["get", "deployments", "-o", "wide"]).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        words(lines[0]),
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row = words(lines[1]);
    assert_eq!(row[5..], ["nginx", "nginx", "app=web"]);

    // A watch started before the scale sees it as a MODIFIED of the deployment.
    let mut c = kubectl(&sim.url(), &home);
    c.args(["get", "deploy", "web", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("kubectl is installed");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = next_line(&mut lines).await;
    assert!(
        header.starts_with("EVENT") && header.contains("READY"),
        "{header}"
    );
    let added = next_line(&mut lines).await;
    assert_eq!(words(&added)[..3], ["ADDED", "web", "0/1"], "{added}");

    let out = kubectl_ok(&sim, &home, &["scale", "deployment", "web", "--replicas=3"]).await;
    assert_eq!(out.trim(), "deployment.apps/web scaled");
    let modified = next_line(&mut lines).await;
    assert_eq!(
        words(&modified)[..3],
        ["MODIFIED", "web", "0/3"],
        "{modified}"
    );
    child.kill().await.ok();

    let out = kubectl_ok(
        &sim,
        &home,
        &[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.generation} {.spec.strategy.rollingUpdate.maxSurge}",
        ],
    )
    .await;
    assert_eq!(out, "3 2 25%");

    let out = kubectl_ok(&sim, &home, &["delete", "deployment", "web"]).await;
    assert_eq!(out.trim(), "deployment.apps \"web\" deleted");
    let deployments = sim.resource("apps", "v1", "deployments").unwrap();
    assert!(sim.ops().get(&deployments, Some("default"), "web").is_err());
}

#[tokio::test]
async fn kubectl_job_and_lease_round_trips() {
    let sim = sim().await;
    let home = tempfile::tempdir().unwrap();
    let yaml = kubectl_ok(
        &sim,
        &home,
        &[
            "create",
            "job",
            "pi",
            "--image=perl:5.34",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
    )
    .await;
    // `... --dry-run=client -o yaml | kubectl create -f -`
    let mut c = kubectl(&sim.url(), &home);
    c.args(["create", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("kubectl is installed");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(yaml.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "job.batch/pi created"
    );

    let out = kubectl_ok(&sim, &home, &["get", "jobs"]).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        words(lines[0]),
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    );
    // DURATION is empty until the job starts.
    assert_eq!(words(lines[1])[..3], ["pi", "Running", "0/1"]);
    let out = kubectl_ok(
        &sim,
        &home,
        &[
            "get",
            "job",
            "pi",
            "-o",
            "jsonpath={.metadata.uid} {.spec.selector.matchLabels.batch\\.kubernetes\\.io/controller-uid} {.metadata.labels.job-name} {.spec.backoffLimit} {.spec.podReplacementPolicy}",
        ],
    )
    .await;
    let parts = words(&out);
    assert_eq!(parts[0], parts[1], "the selector matches the job's uid");
    assert_eq!(parts[2..], ["pi", "6", "TerminatingOrFailed"]);
    let out = kubectl_ok(&sim, &home, &["delete", "job", "pi"]).await;
    assert_eq!(out.trim(), "job.batch \"pi\" deleted");

    let file = home.path().join("lease.yaml");
    std::fs::write(
        &file,
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: node-1\n  namespace: kube-node-lease\nspec:\n  holderIdentity: node-1\n  leaseDurationSeconds: 40\n  renewTime: \"2026-01-02T03:04:05.000000Z\"\n",
    )
    .unwrap();
    let out = kubectl_ok(&sim, &home, &["create", "-f", file.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "lease.coordination.k8s.io/node-1 created");
    let out = kubectl_ok(&sim, &home, &["get", "leases", "-A"]).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(words(lines[0]), ["NAMESPACE", "NAME", "HOLDER", "AGE"]);
    assert_eq!(
        words(lines[1])[..3],
        ["kube-node-lease", "node-1", "node-1"]
    );
    let out = kubectl_ok(
        &sim,
        &home,
        &["delete", "lease", "node-1", "-n", "kube-node-lease"],
    )
    .await;
    assert_eq!(out.trim(), "lease.coordination.k8s.io \"node-1\" deleted");
    let out = kubectl_ok(&sim, &home, &["get", "leases", "-A"]).await;
    assert_eq!(out, "");
}

#[tokio::test]
async fn kubectl_discovers_the_workload_resources() {
    let sim = sim().await;
    let home = tempfile::tempdir().unwrap();
    let out = kubectl_ok(
        &sim,
        &home,
        &[
            "api-resources",
            "--api-group=apps",
            "-o",
            "wide",
            "--sort-by=name",
        ],
    )
    .await;
    let lines: Vec<Vec<&str>> = out.lines().map(words).collect();
    assert_eq!(
        lines[0][..5],
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    );
    let deploy = lines.iter().find(|l| l[0] == "deployments").unwrap();
    assert_eq!(deploy[1..5], ["deploy", "apps/v1", "true", "Deployment"]);
    assert!(
        deploy.iter().any(|w| w.contains("deletecollection")),
        "{deploy:?}"
    );
    assert_eq!(deploy.last(), Some(&"all"), "category");
    let names: Vec<&str> = lines[1..].iter().map(|l| l[0]).collect();
    assert_eq!(
        names,
        [
            "controllerrevisions",
            "daemonsets",
            "deployments",
            "replicasets",
            "statefulsets"
        ]
    );
    let out = kubectl_ok(
        &sim,
        &home,
        &["api-resources", "--api-group=coordination.k8s.io"],
    )
    .await;
    assert!(
        out.lines().nth(1).is_some_and(|l| words(l)[0] == "leases"),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// Discovery over HTTP
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn discovery_lists_resources_verbs_and_subresources() {
    let sim = sim().await;
    let (s, groups) = get_json(&format!("{}/apis", sim.url())).await;
    assert_eq!(s, StatusCode::OK);
    for g in ["apps", "batch", "coordination.k8s.io"] {
        let group = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == g)
            .unwrap_or_else(|| panic!("{g} missing: {groups}"));
        assert_eq!(
            group["preferredVersion"],
            json!({"groupVersion": format!("{g}/v1"), "version": "v1"})
        );
    }
    let all_verbs = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    let sub_verbs = json!(["get", "patch", "update"]);
    let (_, apps) = get_json(&format!("{}/apis/apps/v1", sim.url())).await;
    let find = |doc: &Value, name: &str| -> Value {
        doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    for (name, kind, short, scale) in [
        ("deployments", "Deployment", "deploy", true),
        ("replicasets", "ReplicaSet", "rs", true),
        ("statefulsets", "StatefulSet", "sts", true),
        ("daemonsets", "DaemonSet", "ds", false),
    ] {
        let r = find(&apps, name);
        assert_eq!(r["kind"], kind);
        assert_eq!(r["namespaced"], true);
        assert_eq!(r["verbs"], all_verbs);
        assert_eq!(r["shortNames"], json!([short]));
        assert_eq!(r["categories"], json!(["all"]));
        let status = find(&apps, &format!("{name}/status"));
        assert_eq!(
            (&status["kind"], &status["verbs"]),
            (&json!(kind), &sub_verbs)
        );
        let has_scale = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == format!("{name}/scale"));
        assert_eq!(has_scale, scale, "{name}");
        if scale {
            let s = find(&apps, &format!("{name}/scale"));
            assert_eq!(
                (&s["group"], &s["version"], &s["kind"], &s["verbs"]),
                (
                    &json!("autoscaling"),
                    &json!("v1"),
                    &json!("Scale"),
                    &sub_verbs
                )
            );
        }
    }
    let cr = find(&apps, "controllerrevisions");
    assert!(cr.get("categories").is_none() && cr.get("shortNames").is_none());
    let (_, batch) = get_json(&format!("{}/apis/batch/v1", sim.url())).await;
    assert_eq!(find(&batch, "cronjobs")["shortNames"], json!(["cj"]));
    assert!(find(&batch, "jobs").get("shortNames").is_none());
    find(&batch, "jobs/status");
    find(&batch, "cronjobs/status");
    let (_, coord) = get_json(&format!("{}/apis/coordination.k8s.io/v1", sim.url())).await;
    assert_eq!(
        coord["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["leases"],
        "leases have no subresource"
    );
}

// ---------------------------------------------------------------------------------------------
// Subresources
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn scale_subresource_rescales_the_parent_which_watchers_see() {
    let sim = sim().await;
    let deployments = apps_url(&sim, "deployments");
    let created = post(&deployments, deployment("web")).await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let mut w = watch(&format!("{deployments}?watch=true&resourceVersion={rv}")).await;

    let scale_url = format!("{deployments}/web/scale");
    let (s, scale) = get_json(&scale_url).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        scale,
        json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
               "metadata": {"name": "web", "namespace": "default",
                            "uid": created["metadata"]["uid"], "resourceVersion": rv,
                            "creationTimestamp": created["metadata"]["creationTimestamp"]},
               "spec": {"replicas": 1}, "status": {"replicas": 0, "selector": "app=web"}})
    );

    // kubectl scale's request: a merge patch of the Scale.
    let (s, scaled) = send_json(
        Method::PATCH,
        &scale_url,
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{scaled}");
    assert_eq!(scaled["spec"]["replicas"], 3);
    let ev = w.next_non_bookmark(T).await;
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["spec"]["replicas"], 3);
    assert_eq!(ev["object"]["metadata"]["generation"], 2);
    assert_eq!(
        ev["object"]["metadata"]["resourceVersion"],
        scaled["metadata"]["resourceVersion"]
    );

    // PUT with the current resourceVersion, then again with the stale one.
    let put = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                     "metadata": {"name": "web", "namespace": "default",
                                  "resourceVersion": scaled["metadata"]["resourceVersion"]},
                     "spec": {"replicas": 5}});
    let (s, v) = send_json(Method::PUT, &scale_url, "application/json", &put).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["spec"]["replicas"], 5);
    let ev = w.next_non_bookmark(T).await;
    assert_eq!(
        (&ev["type"], &ev["object"]["spec"]["replicas"]),
        (&json!("MODIFIED"), &json!(5))
    );
    let (s, v) = send_json(Method::PUT, &scale_url, "application/json", &put).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(
        v["message"],
        "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let (s, v) = send_json(
        Method::PATCH,
        &scale_url,
        "application/merge-patch+json",
        &json!({"spec": {"replicas": -2}}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        v["message"],
        "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -2: must be greater than or equal to 0"
    );
    assert_eq!(
        v["details"],
        json!({"name": "web", "group": "autoscaling", "kind": "Scale", "causes": [
        {"reason": "FieldValueInvalid", "message": "Invalid value: -2: must be greater than or equal to 0", "field": "spec.replicas"}]})
    );

    // Errors: no parent, a kind without scale, a method the subresource does not serve.
    let (s, v) = get_json(&format!("{deployments}/nope/scale")).await;
    assert_eq!(
        (s, v["message"].as_str()),
        (
            StatusCode::NOT_FOUND,
            Some("deployments.apps \"nope\" not found")
        )
    );
    let (s, v) = send_json(
        Method::PATCH,
        &format!("{deployments}/nope/scale"),
        "application/merge-patch+json",
        &json!({}),
    )
    .await;
    assert_eq!(
        (s, v["message"].as_str()),
        (
            StatusCode::NOT_FOUND,
            Some("deployments/scale.apps \"nope\" not found")
        )
    );
    let (s, _, _) = request(Method::DELETE, &scale_url, &[], "").await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    let (s, _) = get_json(&format!(
        "{}/apis/apps/v1/namespaces/default/daemonsets/x/scale",
        sim.url()
    ))
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // A scale's Table, as `kubectl get --subresource=scale` asks for it.
    let t = table(&scale_url).await;
    assert_eq!(column_names(&t), ["Name", "Desired", "Available", "Age"]);
    assert_eq!(cells(&t)[..3], [json!("web"), json!(5), json!(0)]);

    // Replica sets and stateful sets scale the same way.
    for (resource, mut body) in [
        ("replicasets", deployment("rs")),
        ("statefulsets", deployment("db")),
    ] {
        body["kind"] = json!(if resource == "replicasets" {
            "ReplicaSet"
        } else {
            "StatefulSet"
        });
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        post(&apps_url(&sim, resource), body).await;
        let url = format!("{}/{name}/scale", apps_url(&sim, resource));
        let (s, v) = send_json(
            Method::PATCH,
            &url,
            "application/strategic-merge-patch+json",
            &json!({"spec": {"replicas": 2}}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{resource}: {v}");
        let (_, parent) = get_json(&format!("{}/{name}", apps_url(&sim, resource))).await;
        assert_eq!(parent["spec"]["replicas"], 2, "{resource}");
        assert_eq!(v["status"]["selector"], format!("app={name}"));
    }
}

#[tokio::test]
async fn kube_rs_reads_and_patches_scales_and_leases() {
    let sim = sim().await;
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse().unwrap())).unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(deployment("api")).unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let scale = deployments.get_scale("api").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=api"));
    let scale = deployments
        .patch_scale(
            "api",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(4));
    let d = deployments.get("api").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(4));
    assert_eq!(d.metadata.generation, Some(2));

    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "node-7"},
        "spec": {"holderIdentity": "node-7", "leaseDurationSeconds": 40,
                 "renewTime": "2026-01-02T03:04:05.123456Z"}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    // A kubelet's renewal.
    leases
        .patch(
            "node-7",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"renewTime": "2026-01-02T03:04:15.000000Z"}})),
        )
        .await
        .unwrap();
    let got = leases.get("node-7").await.unwrap();
    let spec = got.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("node-7"));
    assert_eq!(
        spec.renew_time.unwrap().0.to_string(),
        "2026-01-02T03:04:15Z"
    );
    assert_eq!(got.metadata.generation, None, "leases have no generation");
}

#[tokio::test]
async fn status_is_a_separate_subresource_and_generation_follows_the_spec() {
    let sim = sim().await;
    let deployments = apps_url(&sim, "deployments");
    let mut body = deployment("web");
    body["status"] = json!({"replicas": 7});
    let created = post(&deployments, body).await;
    assert_eq!(created["status"], json!({}), "a create cannot set status");
    assert_eq!(created["metadata"]["generation"], 1);

    // The main endpoint ignores status.
    let mut v = created.clone();
    v["status"] = json!({"replicas": 2});
    let (s, v) = send_json(
        Method::PUT,
        &format!("{deployments}/web"),
        "application/json",
        &v,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["status"], json!({}));
    assert_eq!(
        v["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "nothing changed, nothing written"
    );

    // The status endpoint changes status only; generation stays.
    let mut st = v.clone();
    st["status"] =
        json!({"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1});
    st["spec"]["replicas"] = json!(9);
    let (s, v) = send_json(
        Method::PUT,
        &format!("{deployments}/web/status"),
        "application/json",
        &st,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["status"]["readyReplicas"], 1);
    assert_eq!(
        v["spec"]["replicas"], 1,
        "status writes leave the spec alone"
    );
    assert_eq!(v["metadata"]["generation"], 1);

    let t = table(&deployments).await;
    assert_eq!(
        cells(&t)[..4],
        [json!("web"), json!("1/1"), json!(2), json!(1)]
    );

    // Spec changes bump the generation; so do a deployment's annotations.
    let (s, v) = send_json(
        Method::PATCH,
        &format!("{deployments}/web"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}}}}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["metadata"]["generation"], 2);
    assert_eq!(
        v["status"]["readyReplicas"], 1,
        "status survives spec writes"
    );
    let (_, v) = send_json(
        Method::PATCH,
        &format!("{deployments}/web"),
        "application/merge-patch+json",
        &json!({"metadata": {"annotations": {"team": "web"}}}),
    )
    .await;
    assert_eq!(v["metadata"]["generation"], 3);
    let (_, v) = send_json(
        Method::PATCH,
        &format!("{deployments}/web"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"team": "web"}}}),
    )
    .await;
    assert_eq!(
        v["metadata"]["generation"], 3,
        "labels are not copied to replica sets"
    );
    // Defaults are applied to every write, as kube's decoder does.
    let (_, v) = send_json(
        Method::PATCH,
        &format!("{deployments}/web"),
        "application/merge-patch+json",
        &json!({"spec": {"revisionHistoryLimit": null}}),
    )
    .await;
    assert_eq!(v["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        v["metadata"]["generation"], 3,
        "defaulted back: no spec change"
    );

    // A job's status: written through /status, seen by field selectors.
    let jobs = format!("{}/apis/batch/v1/namespaces/default/jobs", sim.url());
    let job = post(
        &jobs,
        json!({"metadata": {"name": "pi"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}}}),
    )
    .await;
    let (_, none) = get_json(&format!("{jobs}?fieldSelector=status.successful%3D1")).await;
    assert_eq!(none["items"], json!([]));
    let mut done = job.clone();
    done["status"] = json!({"succeeded": 1, "startTime": "2026-01-01T00:00:00Z",
                            "completionTime": "2026-01-01T00:01:05Z",
                            "conditions": [{"type": "Complete", "status": "True"}]});
    let (s, v) = send_json(
        Method::PUT,
        &format!("{jobs}/pi/status"),
        "application/json",
        &done,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, one) = get_json(&format!("{jobs}?fieldSelector=status.successful%3D1")).await;
    assert_eq!(one["items"].as_array().unwrap().len(), 1);
    let t = table(&jobs).await;
    assert_eq!(
        cells(&t)[..4],
        [json!("pi"), json!("Complete"), json!("1/1"), json!("65s")]
    );
}

// ---------------------------------------------------------------------------------------------
// Field selectors and Tables per kind
// ---------------------------------------------------------------------------------------------

/// One object of each kind, created over HTTP; (list URL, Table columns, first row's leading
/// cells).
async fn one_of_each(sim: &Simulator) -> Vec<(String, Vec<&'static str>, Vec<Value>)> {
    let base = sim.url();
    let ns = |g: &str, r: &str| {
        if g.is_empty() {
            format!("{base}/api/v1/namespaces/default/{r}")
        } else {
            format!("{base}/apis/{g}/v1/namespaces/default/{r}")
        }
    };
    let template = json!({"metadata": {"labels": {"app": "a"}},
                          "spec": {"containers": [{"name": "c", "image": "img:1"}]}});
    let job_template = json!({"spec": {"restartPolicy": "OnFailure",
                                       "containers": [{"name": "c", "image": "img:1"}]}});
    let selector = json!({"matchLabels": {"app": "a"}});
    let cases = vec![
        (
            ns("apps", "deployments"),
            json!({"metadata": {"name": "a"}, "spec": {"replicas": 2, "selector": selector, "template": template}}),
            vec![
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector",
            ],
            vec![json!("a"), json!("0/2"), json!(0), json!(0)],
        ),
        (
            ns("apps", "replicasets"),
            json!({"metadata": {"name": "a"}, "spec": {"selector": selector, "template": template}}),
            vec![
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Age",
                "Containers",
                "Images",
                "Selector",
            ],
            vec![json!("a"), json!(1), json!(0), json!(0)],
        ),
        (
            ns("apps", "statefulsets"),
            json!({"metadata": {"name": "a"}, "spec": {"selector": selector, "template": template, "serviceName": "a"}}),
            vec!["Name", "Ready", "Age", "Containers", "Images"],
            vec![json!("a"), json!("0/1")],
        ),
        (
            ns("apps", "daemonsets"),
            json!({"metadata": {"name": "a"}, "spec": {"selector": selector, "template": template}}),
            vec![
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
                "Containers",
                "Images",
                "Selector",
            ],
            vec![
                json!("a"),
                json!(0),
                json!(0),
                json!(0),
                json!(0),
                json!(0),
                json!("<none>"),
            ],
        ),
        (
            ns("apps", "controllerrevisions"),
            json!({"metadata": {"name": "a"}, "data": {"spec": {}}, "revision": 3}),
            vec!["Name", "Controller", "Revision", "Age"],
            vec![json!("a"), json!("<none>"), json!(3)],
        ),
        (
            ns("batch", "jobs"),
            json!({"metadata": {"name": "a"}, "spec": {"template": job_template}}),
            vec![
                "Name",
                "Status",
                "Completions",
                "Duration",
                "Age",
                "Containers",
                "Images",
                "Selector",
            ],
            vec![json!("a"), json!("Running"), json!("0/1"), json!("")],
        ),
        (
            ns("batch", "cronjobs"),
            json!({"metadata": {"name": "a"}, "spec": {"schedule": "@hourly", "jobTemplate": {"spec": {"template": job_template}}}}),
            vec![
                "Name",
                "Schedule",
                "Timezone",
                "Suspend",
                "Active",
                "Last Schedule",
                "Age",
                "Containers",
                "Images",
                "Selector",
            ],
            vec![
                json!("a"),
                json!("@hourly"),
                json!("<none>"),
                json!("False"),
                json!(0),
                json!("<none>"),
            ],
        ),
        (
            ns("coordination.k8s.io", "leases"),
            json!({"metadata": {"name": "a"}, "spec": {"holderIdentity": "me"}}),
            vec!["Name", "Holder", "Age"],
            vec![json!("a"), json!("me")],
        ),
    ];
    let mut out = Vec::new();
    for (url, body, cols, cells) in cases {
        post(&url, body).await;
        out.push((url, cols, cells));
    }
    out
}

#[tokio::test]
async fn tables_print_each_kind_as_kube_does() {
    let sim = sim().await;
    for (url, cols, cells) in one_of_each(&sim).await {
        let t = table(&url).await;
        assert_eq!(column_names(&t), cols, "{url}");
        let row = t["rows"][0]["cells"].as_array().unwrap();
        assert_eq!(row.len(), cols.len(), "{url}");
        assert_eq!(row[..cells.len()], cells[..], "{url}");
        // A single object's Table is the same row, but for its Age, which may tick between
        // the two reads (the object is seconds old).
        let one = table(&format!("{url}/a")).await;
        let age = cols.iter().position(|c| *c == "Age");
        let without_age = |t: &Value| {
            let mut cells = t["rows"][0]["cells"].clone();
            if let (Some(i), Some(c)) = (age, cells.as_array_mut()) {
                c.remove(i);
            }
            cells
        };
        assert_eq!(without_age(&one), without_age(&t), "{url}");
    }
}

#[tokio::test]
async fn field_selectors_follow_each_kinds_converter() {
    let sim = sim().await;
    let kinds = one_of_each(&sim).await;
    let default_msg = |label: &str| {
        format!(
            "\"{label}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        )
    };
    for (url, _, _) in &kinds {
        // Every kind selects by name and namespace.
        let (s, v) = get_json(&format!(
            "{url}?fieldSelector=metadata.name%3Da,metadata.namespace%3Ddefault"
        ))
        .await;
        assert_eq!(s, StatusCode::OK, "{url}: {v}");
        assert_eq!(v["items"].as_array().unwrap().len(), 1, "{url}");
        let (_, v) = get_json(&format!("{url}?fieldSelector=metadata.name%3Db")).await;
        assert_eq!(v["items"], json!([]), "{url}");
    }
    // apps/v1 registers no field label conversion: replica sets' `status.replicas` (in their
    // strategy's selectable fields) is refused as in kube-apiserver 1.34+.
    for (url, label) in [
        (&kinds[1].0, "status.replicas"),
        (&kinds[0].0, "spec.replicas"),
        (&kinds[2].0, "status.successful"),
        (&kinds[6].0, "spec.schedule"),
        (&kinds[7].0, "spec.holderIdentity"),
    ] {
        let (s, v) = get_json(&format!("{url}?fieldSelector={label}%3D1")).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{url}");
        assert_eq!(v["reason"], "BadRequest");
        assert_eq!(v["message"], default_msg(label), "{url}");
    }
    // batch/v1 Jobs have their own converter and message.
    let jobs = &kinds[5].0;
    let (s, v) = get_json(&format!("{jobs}?fieldSelector=status.successful%3D0")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["items"].as_array().unwrap().len(), 1);
    let (s, v) = get_json(&format!("{jobs}?fieldSelector=status.active%3D0")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["message"],
        "field label \"status.active\" not supported for Job"
    );
    // The same rules hold for watches.
    let (s, _, b) = request(
        Method::GET,
        &format!(
            "{}?watch=true&fieldSelector=status.replicas%3D1",
            kinds[1].0
        ),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["message"], default_msg("status.replicas"));
}
