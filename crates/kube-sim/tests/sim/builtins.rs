//! Every built-in resource kube-apiserver 1.36 serves with list and watch, walked through the
//! simulator's own discovery: each one created from a minimal valid object, read, listed, seen
//! in a watch, updated and deleted; and the client-visible rules of the kinds that have them
//! (defaults, status on create, generation, the CSR `approval` and RC `scale` subresources,
//! immutability, field selectors).

use std::time::Duration;

use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::testkit::*;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);

/// kube 1.36's built-in resources with list and watch (GA versions; no beta is on by default
/// for these), `group/version/resource`.
const KUBE_136: &[&str] = &[
    "v1/configmaps",
    "v1/endpoints",
    "v1/events",
    "v1/limitranges",
    "v1/namespaces",
    "v1/nodes",
    "v1/persistentvolumeclaims",
    "v1/persistentvolumes",
    "v1/pods",
    "v1/podtemplates",
    "v1/replicationcontrollers",
    "v1/resourcequotas",
    "v1/secrets",
    "v1/serviceaccounts",
    "v1/services",
    "apiregistration.k8s.io/v1/apiservices",
    "apps/v1/controllerrevisions",
    "apps/v1/daemonsets",
    "apps/v1/deployments",
    "apps/v1/replicasets",
    "apps/v1/statefulsets",
    "events.k8s.io/v1/events",
    "autoscaling/v2/horizontalpodautoscalers",
    "batch/v1/cronjobs",
    "batch/v1/jobs",
    "certificates.k8s.io/v1/certificatesigningrequests",
    "networking.k8s.io/v1/ingressclasses",
    "networking.k8s.io/v1/ingresses",
    "networking.k8s.io/v1/ipaddresses",
    "networking.k8s.io/v1/networkpolicies",
    "networking.k8s.io/v1/servicecidrs",
    "policy/v1/poddisruptionbudgets",
    "rbac.authorization.k8s.io/v1/clusterrolebindings",
    "rbac.authorization.k8s.io/v1/clusterroles",
    "rbac.authorization.k8s.io/v1/rolebindings",
    "rbac.authorization.k8s.io/v1/roles",
    "storage.k8s.io/v1/csidrivers",
    "storage.k8s.io/v1/csinodes",
    "storage.k8s.io/v1/csistoragecapacities",
    "storage.k8s.io/v1/storageclasses",
    "storage.k8s.io/v1/volumeattachments",
    "storage.k8s.io/v1/volumeattributesclasses",
    "admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
    "admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings",
    "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
    "admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "apiextensions.k8s.io/v1/customresourcedefinitions",
    "scheduling.k8s.io/v1/priorityclasses",
    "coordination.k8s.io/v1/leases",
    "node.k8s.io/v1/runtimeclasses",
    "discovery.k8s.io/v1/endpointslices",
    "resource.k8s.io/v1/deviceclasses",
    "resource.k8s.io/v1/resourceclaims",
    "resource.k8s.io/v1/resourceclaimtemplates",
    "resource.k8s.io/v1/resourceslices",
    "flowcontrol.apiserver.k8s.io/v1/flowschemas",
    "flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
];

/// One resource as discovery describes it.
#[derive(Debug, Clone)]
struct Served {
    /// `v1` or `group/version`.
    group_version: String,
    resource: String,
    kind: String,
    namespaced: bool,
}

impl Served {
    fn base(&self) -> String {
        if self.group_version == "v1" {
            "/api/v1".into()
        } else {
            format!("/apis/{}", self.group_version)
        }
    }

    fn collection(&self, url: &str) -> String {
        if self.namespaced {
            format!("{url}{}/namespaces/default/{}", self.base(), self.resource)
        } else {
            format!("{url}{}/{}", self.base(), self.resource)
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.group_version, self.resource)
    }
}

/// Every resource of the preferred version of every group (and of `/api/v1`) whose verbs include
/// list and watch, from the simulator's legacy discovery.
async fn discovered(url: &str) -> Vec<Served> {
    let (_, apis) = get_json(&format!("{url}/apis")).await;
    let mut gvs = vec!["v1".to_string()];
    for g in apis["groups"].as_array().unwrap() {
        gvs.push(
            g["preferredVersion"]["groupVersion"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let mut out = Vec::new();
    for gv in gvs {
        let path = if gv == "v1" {
            format!("{url}/api/v1")
        } else {
            format!("{url}/apis/{gv}")
        };
        let (s, list) = get_json(&path).await;
        assert_eq!(s, StatusCode::OK, "{path}");
        for r in list["resources"].as_array().unwrap() {
            let verbs: Vec<&str> = r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let name = r["name"].as_str().unwrap();
            if name.contains('/') || !verbs.contains(&"list") || !verbs.contains(&"watch") {
                continue;
            }
            out.push(Served {
                group_version: gv.clone(),
                resource: name.to_string(),
                kind: r["kind"].as_str().unwrap().to_string(),
                namespaced: r["namespaced"] == true,
            });
        }
    }
    out
}

/// The name of the walk's object of `resource` (some kinds name their objects by rule).
fn name_of(resource: &str) -> &'static str {
    match resource {
        "apiservices" => "v1.walk.example.com",
        "customresourcedefinitions" => "walks.walk.example.com",
        "ipaddresses" => "10.96.100.10",
        "csidrivers" => "csi.walk.example.com",
        _ => "walk-1",
    }
}

/// A minimal valid object of each resource kube 1.36 serves but events (its body without
/// metadata).
fn minimal(resource: &str) -> Option<Value> {
    let labels = json!({"app": "walk"});
    let containers = json!([{"name": "c", "image": "nginx:1.27"}]);
    let template = |restart: &str| json!({"metadata": {"labels": labels}, "spec": {"containers": containers, "restartPolicy": restart}});
    let rules = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]);
    let claim = json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}});
    Some(match resource {
        "configmaps" => json!({"data": {"k": "v"}}),
        "endpoints" => {
            json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]})
        }
        "limitranges" => {
            json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}})
        }
        "namespaces" | "nodes" | "serviceaccounts" => json!({}),
        "persistentvolumeclaims" => json!({"spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
        "persistentvolumes" => json!({"spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/walk"}}}),
        "pods" => json!({"spec": {"containers": containers}}),
        "podtemplates" => json!({"template": template("Always")}),
        "replicationcontrollers" => {
            json!({"spec": {"selector": labels, "template": template("Always")}})
        }
        "resourcequotas" => json!({"spec": {"hard": {"pods": "10"}}}),
        "secrets" => json!({"stringData": {"k": "v"}}),
        "services" => json!({"spec": {"ports": [{"port": 80}]}}),
        "apiservices" => json!({"spec": {"group": "walk.example.com", "version": "v1",
            "groupPriorityMinimum": 100, "versionPriority": 10}}),
        "controllerrevisions" => json!({"data": {}, "revision": 1}),
        "daemonsets" | "deployments" | "replicasets" => {
            json!({"spec": {"selector": {"matchLabels": labels}, "template": template("Always")}})
        }
        "statefulsets" => json!({"spec": {"serviceName": "walk",
            "selector": {"matchLabels": labels}, "template": template("Always")}}),
        "horizontalpodautoscalers" => json!({"spec": {"maxReplicas": 3,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}),
        "cronjobs" => json!({"spec": {"schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": template("Never")}}}}),
        "jobs" => json!({"spec": {"template": template("Never")}}),
        "certificatesigningrequests" => json!({"spec": {
            "request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg==",
            "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}}),
        "ingressclasses" => json!({"spec": {"controller": "example.com/ingress"}}),
        "ingresses" => json!({"spec": {"defaultBackend": {"service": {"name": "web",
            "port": {"number": 80}}}}}),
        "ipaddresses" => json!({"spec": {"parentRef": {"group": "", "resource": "services",
            "namespace": "default", "name": "web"}}}),
        "networkpolicies" => json!({"spec": {"podSelector": {}}}),
        "servicecidrs" => json!({"spec": {"cidrs": ["10.100.0.0/16"]}}),
        "poddisruptionbudgets" => {
            json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}})
        }
        "clusterrolebindings" | "rolebindings" => json!({"roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}),
        "clusterroles" | "roles" => json!({"rules": [{"apiGroups": [""],
            "resources": ["pods"], "verbs": ["get"]}]}),
        "csidrivers" => json!({"spec": {}}),
        "csinodes" => json!({"spec": {"drivers": []}}),
        "csistoragecapacities" => json!({"storageClassName": "standard"}),
        "storageclasses" => json!({"provisioner": "csi.example.com"}),
        "volumeattachments" => json!({"spec": {"attacher": "csi.example.com",
            "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}}),
        "volumeattributesclasses" => {
            json!({"driverName": "csi.example.com", "parameters": {"iops": "100"}})
        }
        "mutatingadmissionpolicies" => json!({"spec": {
            "matchConstraints": {"resourceRules": rules},
            "mutations": [{"patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Object{}"}}],
            "reinvocationPolicy": "Never"}}),
        "mutatingadmissionpolicybindings" => json!({"spec": {"policyName": "walk-1"}}),
        "mutatingwebhookconfigurations" | "validatingwebhookconfigurations" => {
            json!({"webhooks": []})
        }
        "validatingadmissionpolicies" => json!({"spec": {
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": "true"}]}}),
        "validatingadmissionpolicybindings" => {
            json!({"spec": {"policyName": "walk-1", "validationActions": ["Deny"]}})
        }
        "customresourcedefinitions" => json!({"spec": {
            "group": "walk.example.com", "scope": "Namespaced",
            "names": {"plural": "walks", "singular": "walk", "kind": "Walk", "listKind": "WalkList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        "priorityclasses" => json!({"value": 1000}),
        "leases" => json!({"spec": {"holderIdentity": "walk"}}),
        "runtimeclasses" => json!({"handler": "runc"}),
        "endpointslices" => {
            json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]})
        }
        "deviceclasses" => json!({"spec": {}}),
        "resourceclaims" => json!({"spec": claim}),
        "resourceclaimtemplates" => json!({"spec": {"spec": claim}}),
        "resourceslices" => json!({"spec": {"driver": "gpu.example.com", "nodeName": "n1",
            "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1}}}),
        "flowschemas" => json!({"spec": {"priorityLevelConfiguration": {"name": "walk-1"},
            "matchingPrecedence": 9000}}),
        "prioritylevelconfigurations" => json!({"spec": {"type": "Limited",
            "limited": {"limitResponse": {"type": "Reject"}}}}),
        _ => return None,
    })
}

/// A core or events.k8s.io Event (both named `events`, told apart by their group version).
fn event(group_version: &str) -> Value {
    if group_version == "v1" {
        json!({"involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
            "reason": "Walk", "message": "walked", "type": "Normal"})
    } else {
        json!({"eventTime": "2026-01-02T03:04:05.000000Z", "reportingController": "walk",
            "reportingInstance": "walk-1", "action": "Walk", "reason": "Walk", "type": "Normal",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "p"}})
    }
}

fn body_of(r: &Served, name: &str) -> Value {
    let mut body = if r.resource == "events" {
        event(&r.group_version)
    } else {
        minimal(&r.resource).unwrap_or_else(|| panic!("no minimal object for {}", r.key()))
    };
    body["apiVersion"] = json!(r.group_version);
    body["kind"] = json!(r.kind);
    body["metadata"] = json!({"name": name});
    body
}

/// The next event of `w` that is not a bookmark (and, for namespaces, not their
/// `Terminating` update).
async fn next_of(w: &mut WatchStream, ty: &str) -> Value {
    let seen = w.until(T, |e| e["type"] == ty).await;
    seen.into_iter()
        .last()
        .unwrap_or_else(|| panic!("no {ty} event"))
}

async fn walk(url: &str, r: &Served) {
    let key = r.key();
    let name = name_of(&r.resource);
    let coll = r.collection(url);
    let mut w = watch(&format!(
        "{coll}?watch=1&allowWatchBookmarks=true&fieldSelector=metadata.name%3D{name}"
    ))
    .await;
    assert_eq!(w.status, StatusCode::OK, "{key}: watch");

    let (s, created) = send_json(Method::POST, &coll, "application/json", &body_of(r, name)).await;
    assert_eq!(s, StatusCode::CREATED, "{key}: create: {created}");
    assert_eq!(created["kind"], r.kind, "{key}");
    let added = next_of(&mut w, "ADDED").await;
    assert_eq!(added["object"]["metadata"]["name"], name, "{key}");
    assert_eq!(added["object"]["kind"], r.kind, "{key}");

    let item = format!("{coll}/{name}");
    let (s, got) = get_json(&item).await;
    assert_eq!(s, StatusCode::OK, "{key}: get");
    assert_eq!(got["metadata"]["uid"], created["metadata"]["uid"], "{key}");
    let (s, list) = get_json(&coll).await;
    assert_eq!(s, StatusCode::OK, "{key}: list");
    assert_eq!(list["kind"], format!("{}List", r.kind), "{key}");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["metadata"]["name"] == name),
        "{key}: {name} not listed"
    );

    let mut changed = got.clone();
    changed["metadata"]["labels"] = json!({"walk": "updated"});
    let (s, updated) = send_json(Method::PUT, &item, "application/json", &changed).await;
    assert_eq!(s, StatusCode::OK, "{key}: update: {updated}");
    let modified = next_of(&mut w, "MODIFIED").await;
    assert_eq!(
        modified["object"]["metadata"]["labels"]["walk"], "updated",
        "{key}"
    );

    let (s, _, b) = request(Method::DELETE, &item, &[], "").await;
    assert!(
        s.is_success(),
        "{key}: delete: {s} {}",
        String::from_utf8_lossy(&b)
    );
    let deleted = next_of(&mut w, "DELETED").await;
    assert_eq!(deleted["object"]["metadata"]["name"], name, "{key}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_serves_exactly_kubes_list_and_watch_resources() {
    let sim = sim().await;
    let mut served: Vec<String> = discovered(&sim.url())
        .await
        .iter()
        .map(Served::key)
        .collect();
    let mut expected: Vec<String> = KUBE_136.iter().map(|s| s.to_string()).collect();
    served.sort();
    expected.sort();
    assert_eq!(served, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_built_in_resource_is_created_read_listed_watched_updated_and_deleted() {
    let sim = sim().await;
    let url = sim.url();
    let served = discovered(&url).await;
    assert_eq!(served.len(), KUBE_136.len());
    for r in &served {
        walk(&url, r).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Per-kind rules over HTTP
// ---------------------------------------------------------------------------------------------

async fn create(sim: &Simulator, path: &str, body: Value) -> Value {
    let url = format!("{}{path}", sim.url());
    let (s, v) = send_json(Method::POST, &url, "application/json", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{path}: {v}");
    v
}

async fn put(sim: &Simulator, path: &str, body: &Value) -> (StatusCode, Value) {
    send_json(
        Method::PUT,
        &format!("{}{path}", sim.url()),
        "application/json",
        body,
    )
    .await
}

#[tokio::test]
async fn storage_kinds_are_defaulted_and_volumes_start_pending() {
    let sim = sim().await;
    let sc = create(
        &sim,
        "/apis/storage.k8s.io/v1/storageclasses",
        json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com"}),
    )
    .await;
    assert_eq!(sc["reclaimPolicy"], "Delete");
    assert_eq!(sc["volumeBindingMode"], "Immediate");
    let pv = create(
        &sim,
        "/api/v1/persistentvolumes",
        json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv1"}},
            "status": {"phase": "Bound"}}),
    )
    .await;
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
    assert_eq!(pv["status"]["phase"], "Pending", "{pv}");
    assert!(pv["status"]["lastPhaseTransitionTime"].is_string());
    let pvc = create(
        &sim,
        "/api/v1/namespaces/default/persistentvolumeclaims",
        json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    assert_eq!(pvc["status"]["phase"], "Pending");
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    let ic = create(
        &sim,
        "/apis/networking.k8s.io/v1/ingressclasses",
        json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}}),
    )
    .await;
    assert_eq!(ic["spec"], json!({"controller": "k8s.io/ingress-nginx"}));
    assert_eq!(ic["metadata"]["generation"], 1);
    // kube's VolumeAttributesClass store returns the deleted object; a StorageClass's a Status.
    create(
        &sim,
        "/apis/storage.k8s.io/v1/volumeattributesclasses",
        json!({"metadata": {"name": "gold"}, "driverName": "csi.example.com"}),
    )
    .await;
    for (path, kind) in [
        ("volumeattributesclasses/gold", "VolumeAttributesClass"),
        ("storageclasses/fast", "Status"),
    ] {
        let url = format!("{}/apis/storage.k8s.io/v1/{path}", sim.url());
        let (s, _, b) = request(Method::DELETE, &url, &[], "").await;
        assert_eq!(s, StatusCode::OK);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["kind"], kind, "{path}");
    }
    // A status write that changes the phase stamps its transition time.
    let mut bound = pv.clone();
    bound["status"] = json!({"phase": "Bound"});
    let (s, v) = put(&sim, "/api/v1/persistentvolumes/pv1/status", &bound).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["status"]["phase"], "Bound");
    assert!(v["status"]["lastPhaseTransitionTime"].is_string());
}

#[tokio::test]
async fn status_is_reset_on_create_and_kept_on_update() {
    let sim = sim().await;
    let q = create(
        &sim,
        "/api/v1/namespaces/default/resourcequotas",
        json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10"}},
            "status": {"hard": {"pods": "99"}}}),
    )
    .await;
    assert_eq!(q["status"], json!({}));
    let mut given = q.clone();
    given["status"] = json!({"hard": {"pods": "10"}, "used": {"pods": "1"}});
    let (s, v) = put(&sim, "/api/v1/namespaces/default/resourcequotas/q", &given).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["status"], json!({}), "main endpoint ignores status");
    let (s, v) = put(
        &sim,
        "/api/v1/namespaces/default/resourcequotas/q/status",
        &given,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["status"]["used"]["pods"], "1");
    let ing = create(
        &sim,
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
        json!({"metadata": {"name": "web"}, "spec": {"defaultBackend": {"service": {"name": "web",
            "port": {"number": 80}}}}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
    )
    .await;
    assert_eq!(ing["status"], json!({"loadBalancer": {}}));
    assert_eq!(ing["metadata"]["generation"], 1);
    let va = create(
        &sim,
        "/apis/storage.k8s.io/v1/volumeattachments",
        json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1",
            "source": {"persistentVolumeName": "pv1"}}, "status": {"attached": true}}),
    )
    .await;
    assert_eq!(va["status"], json!({"attached": false}));
    let api = create(
        &sim,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        json!({"metadata": {"name": "v1.example.com"}, "spec": {"group": "example.com",
            "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10}}),
    )
    .await;
    let c = &api["status"]["conditions"][0];
    assert_eq!(
        (&c["type"], &c["status"], &c["reason"]),
        (&json!("Available"), &json!("True"), &json!("Local"))
    );
    // A ServiceCIDR's strategy keeps the status it is given.
    let cidr = create(
        &sim,
        "/apis/networking.k8s.io/v1/servicecidrs",
        json!({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.100.0.0/16"]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
    )
    .await;
    assert_eq!(cidr["status"]["conditions"][0]["type"], "Ready");
}

#[tokio::test]
async fn csrs_are_approved_through_their_approval_subresource() {
    let sim = sim().await;
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let csr = create(
        &sim,
        path,
        json!({"metadata": {"name": "alice"}, "spec": {"request": "cmVx",
            "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}}),
    )
    .await;
    assert_eq!(csr["status"], json!({}), "no pre-approved requests");
    assert!(csr["metadata"].get("generation").is_none());
    // The main endpoint changes metadata only.
    let mut spec = csr.clone();
    spec["spec"]["signerName"] = json!("example.com/other");
    spec["metadata"]["labels"] = json!({"team": "a"});
    let (s, v) = put(&sim, &format!("{path}/alice"), &spec).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        v["spec"]["signerName"],
        "kubernetes.io/kube-apiserver-client"
    );
    assert_eq!(v["metadata"]["labels"]["team"], "a");
    // A status write cannot approve.
    let mut by_status = v.clone();
    by_status["status"] =
        json!({"conditions": [{"type": "Approved", "status": "True", "reason": "R"}]});
    let (s, v) = put(&sim, &format!("{path}/alice/status"), &by_status).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["status"].get("conditions").is_none(), "{v}");
    // kubectl certificate approve: a PUT of the approval subresource.
    let mut approve = v.clone();
    approve["status"] = json!({"conditions": [{"type": "Approved", "reason": "KubectlApprove",
        "message": "This CSR was approved by kubectl certificate approve."}], "certificate": "eA=="});
    let (s, v) = put(&sim, &format!("{path}/alice/approval"), &approve).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let c = &v["status"]["conditions"][0];
    assert_eq!(c["type"], "Approved");
    assert_eq!(c["status"], "True");
    assert!(c["lastUpdateTime"].is_string() && c["lastTransitionTime"].is_string());
    assert!(
        v["status"].get("certificate").is_none(),
        "approval writes conditions only"
    );
    let (s, got) = get_json(&format!("{}{path}/alice/approval", sim.url())).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got["status"]["conditions"][0]["type"], "Approved");
    // Field selector on the signer.
    let (s, l) = get_json(&format!(
        "{}{path}?fieldSelector=spec.signerName%3Dkubernetes.io/kube-apiserver-client",
        sim.url()
    ))
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    let (_, l) = get_json(&format!(
        "{}{path}?fieldSelector=spec.signerName%3Dexample.com/other",
        sim.url()
    ))
    .await;
    assert!(l["items"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn replication_controllers_scale_and_count_generations() {
    let sim = sim().await;
    let path = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = create(
        &sim,
        path,
        json!({"metadata": {"name": "web"}, "spec": {"template": {"metadata": {"labels": {"app": "web", "tier": "fe"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}),
    )
    .await;
    assert_eq!(rc["spec"]["replicas"], 1);
    assert_eq!(rc["spec"]["selector"], json!({"app": "web", "tier": "fe"}));
    assert_eq!(
        rc["metadata"]["labels"],
        json!({"app": "web", "tier": "fe"})
    );
    assert_eq!(rc["status"], json!({"replicas": 0}));
    assert_eq!(rc["metadata"]["generation"], 1);
    let (s, scale) = get_json(&format!("{}{path}/web/scale", sim.url())).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(scale["status"]["selector"], "app=web,tier=fe");
    assert_eq!(scale["spec"]["replicas"], 1);
    let (s, v) = put(
        &sim,
        &format!("{path}/web/scale"),
        &json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"},
            "spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, rc) = get_json(&format!("{}{path}/web", sim.url())).await;
    assert_eq!(rc["spec"]["replicas"], 3);
    assert_eq!(rc["metadata"]["generation"], 2);
    let mut labelled = rc.clone();
    labelled["metadata"]["annotations"] = json!({"a": "b"});
    let (_, v) = put(&sim, &format!("{path}/web"), &labelled).await;
    assert_eq!(v["metadata"]["generation"], 2, "metadata only");
}

#[tokio::test]
async fn service_cidrs_and_ip_addresses_refuse_changes_as_kube() {
    let sim = sim().await;
    let cidrs = "/apis/networking.k8s.io/v1/servicecidrs";
    let c = create(
        &sim,
        cidrs,
        json!({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.100.0.0/16"]}}),
    )
    .await;
    let mut moved = c.clone();
    moved["spec"]["cidrs"] = json!(["10.101.0.0/16"]);
    let (s, v) = put(&sim, &format!("{cidrs}/extra"), &moved).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        v["message"],
        "ServiceCIDR.networking.k8s.io \"extra\" is invalid: spec.cidrs[0]: Invalid value: \"10.101.0.0/16\": field is immutable"
    );
    let mut dual = c.clone();
    dual["spec"]["cidrs"] = json!(["10.100.0.0/16", "fd00:10:100::/108"]);
    let (s, _) = put(&sim, &format!("{cidrs}/extra"), &dual).await;
    assert_eq!(s, StatusCode::OK, "single-stack to dual-stack");
    let ips = "/apis/networking.k8s.io/v1/ipaddresses";
    let ip = create(
        &sim,
        ips,
        json!({"metadata": {"name": "10.96.0.10"}, "spec": {"parentRef": {"group": "",
            "resource": "services", "namespace": "kube-system", "name": "kube-dns"}}}),
    )
    .await;
    let mut other = ip.clone();
    other["spec"]["parentRef"]["name"] = json!("other");
    let (s, v) = put(&sim, &format!("{ips}/10.96.0.10"), &other).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["details"]["causes"][0]["field"], "spec.parentRef");
}

#[tokio::test]
async fn resource_slices_select_on_node_and_driver() {
    let sim = sim().await;
    let path = "/apis/resource.k8s.io/v1/resourceslices";
    for (name, node, driver) in [
        ("a", "n1", "gpu.example.com"),
        ("b", "n2", "gpu.example.com"),
        ("c", "n1", "nic.example.com"),
    ] {
        let s = create(
            &sim,
            path,
            json!({"metadata": {"name": name}, "spec": {"driver": driver, "nodeName": node,
                "pool": {"name": node, "generation": 0, "resourceSliceCount": 1}}}),
        )
        .await;
        assert_eq!(s["metadata"]["generation"], 1);
    }
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, v) = get_json(&format!(
        "{}{path}?fieldSelector=spec.nodeName%3Dn1",
        sim.url()
    ))
    .await;
    assert_eq!(names(&v), ["a", "c"]);
    let (_, v) = get_json(&format!(
        "{}{path}?fieldSelector=spec.driver%3Dgpu.example.com,spec.nodeName%3Dn2",
        sim.url()
    ))
    .await;
    assert_eq!(names(&v), ["b"]);
    let (s, v) = get_json(&format!("{}{path}?fieldSelector=spec.pool%3Dx", sim.url())).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["message"],
        "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool"
    );
    // A watch with the selector sees only its node's slices.
    let mut w = watch(&format!(
        "{}{path}?watch=1&fieldSelector=spec.nodeName%3Dn2",
        sim.url()
    ))
    .await;
    let first = w.next_non_bookmark(T).await;
    assert_eq!(first["object"]["metadata"]["name"], "b");
    create(
        &sim,
        path,
        json!({"metadata": {"name": "d"}, "spec": {"driver": "gpu.example.com", "nodeName": "n2",
            "pool": {"name": "n2", "generation": 0, "resourceSliceCount": 1}}}),
    )
    .await;
    let next = w.next_non_bookmark(T).await;
    assert_eq!(next["type"], "ADDED");
    assert_eq!(next["object"]["metadata"]["name"], "d");
}
