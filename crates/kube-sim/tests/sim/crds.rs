//! CustomResourceDefinitions created, changed and deleted while the simulator runs, as
//! kube-apiserver's apiextensions server serves them: discovery, the custom resources' verbs and
//! watches, and a deletion that deletes the custom resources, then the CRD, then ends the
//! watches and the paths.

use std::sync::atomic::Ordering;
use std::time::Duration;

use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::testkit::kubectl::{kubectl, run};
use kube_sim::testkit::*;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(5);
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn widgets_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                               "subresources": {"status": {}},
                               "additionalPrinterColumns": [{"name": "Color", "type": "string", "jsonPath": ".spec.color"}],
                               "selectableFields": [{"jsonPath": ".spec.color"}]}]}
    })
}

fn widget(name: &str, color: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": name}, "spec": {"color": color, "size": "L"}})
}

async fn post(url: &str, body: &Value) -> Value {
    let (s, v) = send_json(Method::POST, url, "application/json", body).await;
    assert_eq!(s, StatusCode::CREATED, "POST {url}: {v}");
    v
}

/// A PATCH of `content_type` that must succeed; the object it answers.
async fn patch(url: &str, content_type: &str, body: Value) -> Value {
    let (s, v) = send_json(Method::PATCH, url, content_type, &body).await;
    assert_eq!(s, StatusCode::OK, "PATCH {url}: {v}");
    v
}

/// The string `at` picks from each element of the array `array`.
fn each(array: &Value, at: impl Fn(&Value) -> &Value) -> Vec<String> {
    array
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {array}"))
        .iter()
        .map(|e| at(e).as_str().unwrap().to_string())
        .collect()
}

fn names(list: &Value) -> Vec<String> {
    each(&list["items"], |o| &o["metadata"]["name"])
}

fn group_names(v: &Value) -> Vec<String> {
    each(&v["groups"], |g| &g["name"])
}

/// Whether `path` answers kube's 404 for a path it does not serve.
async fn assert_unserved(sim: &Simulator, path: &str) {
    let (s, v) = get_json(&format!("{}{path}", sim.url())).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{path}: {v}");
    assert_eq!(
        v["message"], "the server could not find the requested resource",
        "{path}"
    );
}

#[tokio::test]
async fn a_crd_created_at_run_time_is_served_until_it_is_deleted_and_again_when_recreated() {
    let sim = sim().await;
    let url = sim.url();
    assert_unserved(&sim, WIDGETS).await;

    let crd = post(&format!("{url}{CRDS}"), &widgets_crd()).await;
    // Established as kube's controllers leave it, with kube's defaults.
    assert_eq!(crd["spec"]["names"]["singular"], "widget");
    assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    let conditions: Vec<(&str, &str)> = crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        conditions,
        [("NamesAccepted", "True"), ("Established", "True")]
    );

    // Discovery, from the moment the create answered.
    let (_, groups) = get_json(&format!("{url}/apis")).await;
    assert!(group_names(&groups).contains(&"example.com".to_string()));
    let (s, g) = get_json(&format!("{url}/apis/example.com")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(g["preferredVersion"]["groupVersion"], "example.com/v1");
    let (_, rl) = get_json(&format!("{url}/apis/example.com/v1")).await;
    assert_eq!(
        each(&rl["resources"], |r| &r["name"]),
        ["widgets", "widgets/status"]
    );
    assert_eq!(rl["resources"][0]["shortNames"], json!(["wd"]));
    assert_eq!(rl["resources"][0]["namespaced"], true);

    // The custom resources' verbs, selectable fields and watches.
    let a = post(&format!("{url}{WIDGETS}"), &widget("a", "blue")).await;
    assert_eq!(a["kind"], "Widget");
    assert_eq!(a["metadata"]["generation"], 1);
    post(&format!("{url}{WIDGETS}"), &widget("b", "red")).await;
    let (_, list) = get_json(&format!("{url}{WIDGETS}")).await;
    assert_eq!(names(&list), ["a", "b"]);
    assert_eq!(list["items"][0]["apiVersion"], "example.com/v1");
    let (_, red) = get_json(&format!("{url}{WIDGETS}?fieldSelector=spec.color%3Dred")).await;
    assert_eq!(names(&red), ["b"]);
    let (s, v) = get_json(&format!("{url}{WIDGETS}?fieldSelector=spec.size%3DL")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "not a selectable field: {v}");
    let patched = patch(
        &format!("{url}{WIDGETS}/a"),
        "application/merge-patch+json",
        json!({"spec": {"color": "green"}}),
    )
    .await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();

    let stats = sim
        .resource_stats("example.com", "v1", "widgets")
        .expect("counted");
    let mut w = watch(&format!("{url}{WIDGETS}?watch=1&resourceVersion={rv}")).await;
    assert_eq!(w.status, StatusCode::OK);
    let ev = w.next_event(T).await;
    assert_eq!(
        (ev["type"].as_str(), ev["object"]["spec"]["color"].as_str()),
        (Some("MODIFIED"), Some("green"))
    );
    let mut crd_watch = watch(&format!(
        "{url}{CRDS}?watch=1&resourceVersion={}",
        patched["metadata"]["resourceVersion"].as_str().unwrap()
    ))
    .await;
    assert_eq!(stats.open_watches.load(Ordering::Relaxed), 1);
    assert_eq!(
        sim.stats()["resources"]["widgets.example.com"]["openWatches"],
        1
    );

    // Deleting the CRD: its widgets go first, then the CRD, then the watches end.
    let (s, _, body) = request(
        Method::DELETE,
        &format!("{url}{CRDS}/widgets.example.com"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let mut deleted = Vec::new();
    let mut last_rv = 0u64;
    loop {
        match w.next_line(T).await {
            Next::Line(l) => {
                let ev: Value = serde_json::from_slice(&l).unwrap();
                assert_eq!(ev["type"], "DELETED", "{ev}");
                deleted.push(
                    ev["object"]["metadata"]["name"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                );
                last_rv = rv_of(&ev["object"]);
            }
            Next::End => break,
            other => panic!("the watch did not end cleanly: {other:?}"),
        }
    }
    deleted.sort();
    assert_eq!(deleted, ["a", "b"]);
    let ev = crd_watch.next_non_bookmark(T).await;
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(ev["object"]["metadata"]["name"], "widgets.example.com");
    assert!(
        rv_of(&ev["object"]) > last_rv,
        "the CRD goes after its widgets"
    );
    for _ in 0..100 {
        if stats.open_watches.load(Ordering::Relaxed) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stats.open_watches.load(Ordering::Relaxed), 0);

    // Gone: every path of it is kube's 404 for an unknown resource, discovery forgets it.
    assert_unserved(&sim, WIDGETS).await;
    assert_unserved(&sim, &format!("{WIDGETS}/a")).await;
    assert_unserved(&sim, "/apis/example.com/v1").await;
    assert_unserved(&sim, "/apis/example.com").await;
    let (s, _) = send_json(
        Method::POST,
        &format!("{url}{WIDGETS}"),
        "application/json",
        &widget("c", "red"),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, groups) = get_json(&format!("{url}/apis")).await;
    assert!(!group_names(&groups).contains(&"example.com".to_string()));
    assert!(sim.resource("example.com", "v1", "widgets").is_none());
    assert_eq!(
        sim.stats()["resources"]["widgets.example.com"]["openWatches"],
        0,
        "the last counters of a deleted CRD's type stay readable"
    );

    // Created again: served afresh, empty.
    post(&format!("{url}{CRDS}"), &widgets_crd()).await;
    let (s, list) = get_json(&format!("{url}{WIDGETS}")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(names(&list).is_empty());
    post(&format!("{url}{WIDGETS}"), &widget("c", "red")).await;
    let (_, red) = get_json(&format!("{url}{WIDGETS}?fieldSelector=spec.color%3Dred")).await;
    assert_eq!(names(&red), ["c"]);
    let fresh = sim.resource_stats("example.com", "v1", "widgets").unwrap();
    assert_eq!(
        fresh.list_requests.load(Ordering::Relaxed),
        2,
        "counted afresh"
    );
}

#[tokio::test]
async fn invalid_crds_and_crds_for_built_in_resources_are_refused() {
    let sim = sim().await;
    let url = format!("{}{CRDS}", sim.url());
    let refused = |mutate: fn(&mut Value)| {
        let url = url.clone();
        async move {
            let mut crd = widgets_crd();
            mutate(&mut crd);
            let (s, v) = send_json(Method::POST, &url, "application/json", &crd).await;
            assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
            assert_eq!(v["reason"], "Invalid");
            v["message"].as_str().unwrap().to_string()
        }
    };
    let m = refused(|c| c["metadata"]["name"] = json!("gadgets.example.com")).await;
    assert_eq!(
        m,
        "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\" is invalid: metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group"
    );
    let m = refused(|c| {
        c["metadata"]["name"] = json!("widgets.example");
        c["spec"]["group"] = json!("example");
    })
    .await;
    assert!(
        m.ends_with(
            "spec.group: Invalid value: \"example\": should be a domain with at least one dot"
        ),
        "{m}"
    );
    let m = refused(|c| {
        let mut v2 = c["spec"]["versions"][0].clone();
        v2["name"] = json!("v2");
        c["spec"]["versions"].as_array_mut().unwrap().push(v2);
    })
    .await;
    assert!(
        m.ends_with("must have exactly one version marked as storage version"),
        "{m}"
    );
    let m = refused(|c| {
        c["metadata"]["name"] = json!("leases.coordination.k8s.io");
        c["spec"]["group"] = json!("coordination.k8s.io");
        c["spec"]["names"]["plural"] = json!("leases");
    })
    .await;
    assert!(
        m.contains("spec.group: Invalid value: \"coordination.k8s.io\""),
        "{m}"
    );
    let (_, list) = get_json(&url).await;
    assert!(names(&list).is_empty(), "nothing was stored");
    assert!(
        sim.resource("coordination.k8s.io", "v1", "leases")
            .unwrap()
            .builtin
    );
}

#[tokio::test]
async fn updating_a_crd_changes_its_served_versions_and_selectable_fields() {
    let sim = sim().await;
    let url = sim.url();
    post(&format!("{url}{CRDS}"), &widgets_crd()).await;
    post(&format!("{url}{WIDGETS}"), &widget("a", "blue")).await;
    let mut v1_watch = watch(&format!("{url}{WIDGETS}?watch=1")).await;
    assert_eq!(v1_watch.status, StatusCode::OK);
    let ev = v1_watch.next_non_bookmark(T).await;
    assert_eq!(ev["type"], "ADDED", "the current state first");

    // A second version, served and the storage version from now on, selecting on spec.size.
    let crd = patch(
        &format!("{url}{CRDS}/widgets.example.com"),
        "application/json-patch+json",
        json!([
            {"op": "replace", "path": "/spec/versions/0/storage", "value": false},
            {"op": "add", "path": "/spec/versions/0/selectableFields/-", "value": {"jsonPath": ".spec.size"}},
            {"op": "add", "path": "/spec/versions/-", "value": {"name": "v2", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
        ]),
    )
    .await;
    assert_eq!(crd["status"]["storedVersions"], json!(["v1", "v2"]));
    let (_, g) = get_json(&format!("{url}/apis/example.com")).await;
    assert_eq!(each(&g["versions"], |v| &v["version"]), ["v1", "v2"]);
    let (s, _) = get_json(&format!(
        "{url}/apis/example.com/v2/namespaces/default/widgets"
    ))
    .await;
    assert_eq!(s, StatusCode::OK);
    // The new selectable field selects the objects stored before it was declared.
    let (s, large) = get_json(&format!("{url}{WIDGETS}?fieldSelector=spec.size%3DL")).await;
    assert_eq!(s, StatusCode::OK, "{large}");
    assert_eq!(names(&large), ["a"]);
    // v1's watch goes on.
    post(&format!("{url}{WIDGETS}"), &widget("b", "red")).await;
    let ev = v1_watch.next_non_bookmark(T).await;
    assert_eq!(
        (
            ev["type"].as_str(),
            ev["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("b"))
    );

    // v1 no longer served: its watch ends, its paths are gone, v2 stays.
    patch(
        &format!("{url}{CRDS}/widgets.example.com"),
        "application/json-patch+json",
        json!([{"op": "replace", "path": "/spec/versions/0/served", "value": false}]),
    )
    .await;
    match v1_watch.next_line(T).await {
        Next::End => {}
        other => panic!("v1's watch should end: {other:?}"),
    }
    assert_unserved(&sim, WIDGETS).await;
    let (s, _) = get_json(&format!(
        "{url}/apis/example.com/v2/namespaces/default/widgets"
    ))
    .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn deleting_the_crd_of_a_type_declared_at_start_stops_serving_it() {
    let sim = sim_with(|c| {
        c.custom_types.push(
            "example.com/v1/widgets=Widget,field=spec.color"
                .parse()
                .unwrap(),
        )
    })
    .await;
    let url = sim.url();
    let before = sim.resource("example.com", "v1", "widgets").unwrap();
    post(&format!("{url}{WIDGETS}"), &widget("a", "blue")).await;
    let (_, crd) = get_json(&format!("{url}{CRDS}/widgets.example.com")).await;
    assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
    assert_eq!(
        sim.resource("example.com", "v1", "widgets").unwrap().index,
        before.index,
        "storing its CRD at start kept its slot"
    );
    let mut w = watch(&format!("{url}{WIDGETS}?watch=1")).await;
    assert_eq!(w.next_non_bookmark(T).await["type"], "ADDED");
    let (s, _, _) = request(
        Method::DELETE,
        &format!("{url}{CRDS}/widgets.example.com"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let ev = w.next_non_bookmark(T).await;
    assert_eq!(ev["type"], "DELETED");
    assert!(matches!(w.next_line(T).await, Next::End));
    assert_unserved(&sim, WIDGETS).await;
}

#[tokio::test]
async fn kubectl_applies_a_crd_and_its_custom_resources() {
    let sim = sim().await;
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    std::fs::write(dir.join("crd.json"), widgets_crd().to_string()).unwrap();
    let mut w = widget("a", "blue");
    w["metadata"]["namespace"] = json!("default");
    std::fs::write(dir.join("widget.json"), w.to_string()).unwrap();
    let mut c = kubectl(&sim.url(), &home);
    c.args(["apply", "-f"]).arg(dir.join("crd.json"));
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl apply (CRD) failed: {err}");
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"),
        "{out}"
    );
    let mut c = kubectl(&sim.url(), &home);
    c.args(["create", "-f"]).arg(dir.join("widget.json"));
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl create (widget) failed: {err}");
    assert!(out.contains("widget.example.com/a created"), "{out}");
    let mut c = kubectl(&sim.url(), &home);
    c.args(["get", "wd", "-n", "default"]);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl get failed: {err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "COLOR"], "{out}");
    assert_eq!(lines[1], ["a", "blue"], "{out}");
    let mut c = kubectl(&sim.url(), &home);
    c.args(["delete", "crd", "widgets.example.com"]);
    let (ok, _, err) = run(c).await;
    assert!(ok, "kubectl delete failed: {err}");
    assert_unserved(&sim, WIDGETS).await;
}

#[tokio::test]
async fn a_type_served_without_a_crd_is_served_as_an_aggregated_apis_type() {
    let sim = sim_with(|c| {
        c.custom_types.push(
            "metrics.k8s.io/v1beta1/pods=PodMetrics,aggregated"
                .parse()
                .unwrap(),
        )
    })
    .await;
    let url = sim.url();
    let pods = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods";
    // Discovery and the verbs, as for any custom type.
    let (_, groups) = get_json(&format!("{url}/apis")).await;
    assert!(group_names(&groups).contains(&"metrics.k8s.io".to_string()));
    let (_, rl) = get_json(&format!("{url}/apis/metrics.k8s.io/v1beta1")).await;
    assert_eq!(rl["resources"][0]["kind"], "PodMetrics");
    let mut w = watch(&format!("{url}{pods}?watch=1")).await;
    assert_eq!(w.status, StatusCode::OK);
    let m = json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                   "metadata": {"name": "web"}, "containers": [{"name": "c", "usage": {"cpu": "1m"}}]});
    post(&format!("{url}{pods}"), &m).await;
    let ev = w.next_non_bookmark(T).await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "PodMetrics");
    let (_, list) = get_json(&format!("{url}{pods}")).await;
    assert_eq!(names(&list), ["web"]);
    let stats = sim
        .resource_stats("metrics.k8s.io", "v1beta1", "pods")
        .unwrap();
    assert_eq!(stats.open_watches.load(Ordering::Relaxed), 1);
    // No CustomResourceDefinition, and none may be created for it.
    let (_, crds) = get_json(&format!("{url}{CRDS}")).await;
    assert!(names(&crds).is_empty(), "{crds}");
    let mut crd = widgets_crd();
    crd["metadata"]["name"] = json!("pods.metrics.k8s.io");
    crd["spec"]["group"] = json!("metrics.k8s.io");
    crd["spec"]["names"] = json!({"plural": "pods", "kind": "PodMetrics"});
    let (s, v) = send_json(
        Method::POST,
        &format!("{url}{CRDS}"),
        "application/json",
        &crd,
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .ends_with("the resource pods.metrics.k8s.io is served by an aggregated API already"),
        "{v}"
    );
}
