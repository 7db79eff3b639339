//! Aggregated discovery (`apidiscovery.k8s.io/v2`) on `/api` and `/apis`: what client-go and
//! kubectl ask for first, with the legacy documents still answered to everyone else.

use http::{Method, StatusCode};
use kube_sim::testkit::*;
use serde_json::{Value, json};

const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

async fn discover(url: &str, accept: &str) -> (StatusCode, http::HeaderMap, Value) {
    let (s, h, b) = request(Method::GET, url, &[("accept", accept)], "").await;
    let v = serde_json::from_slice(&b).unwrap_or(Value::Null);
    (s, h, v)
}

fn group<'a>(doc: &'a Value, name: &str) -> Option<&'a Value> {
    doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"].as_str().unwrap_or_default() == name)
}

fn resource<'a>(group: &'a Value, version: &str, resource: &str) -> Option<&'a Value> {
    let v = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["version"] == version)?;
    v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == resource)
}

#[tokio::test]
async fn aggregated_discovery_lists_built_ins_and_crds_created_at_run_time() {
    let sim = sim().await;
    let url = sim.url();
    let accept = format!("{V2},application/json");

    // /api: the core group alone, unnamed.
    let (s, h, core) = discover(&format!("{url}/api"), &accept).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h["content-type"], V2);
    assert_eq!(h["vary"], "Accept");
    assert_eq!(core["kind"], "APIGroupDiscoveryList");
    assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
    assert_eq!(core["items"].as_array().unwrap().len(), 1);
    let pods = resource(&core["items"][0], "v1", "pods").expect("pods");
    assert_eq!(pods["scope"], "Namespaced");
    assert_eq!(pods["singularResource"], "pod");
    assert_eq!(pods["responseKind"]["kind"], "Pod");
    assert_eq!(pods["subresources"][0]["subresource"], "status");
    assert_eq!(core["items"][0]["versions"][0]["freshness"], "Current");
    let nodes = resource(&core["items"][0], "v1", "nodes").expect("nodes");
    assert_eq!(nodes["scope"], "Cluster");

    // A client that has the document sends its ETag back and gets 304.
    let etag = h["etag"].to_str().unwrap().to_string();
    let (s, _, _) = request(
        Method::GET,
        &format!("{url}/api"),
        &[("accept", &accept), ("if-none-match", &etag)],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::NOT_MODIFIED);

    // /apis: the other groups; no custom group yet.
    let (_, _, apis) = discover(&format!("{url}/apis"), &accept).await;
    assert!(group(&apis, "").is_none());
    let deploy = resource(group(&apis, "apps").unwrap(), "v1", "deployments").unwrap();
    assert_eq!(deploy["shortNames"], json!(["deploy"]));
    assert!(group(&apis, "example.com").is_none());

    // A CRD created now is in the next document.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let (s, v) = send_json(
        Method::POST,
        &format!("{url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
        "application/json",
        &crd,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (_, h2, apis) = discover(&format!("{url}/apis"), &accept).await;
    let gadgets = resource(
        group(&apis, "example.com").expect("example.com"),
        "v1",
        "gadgets",
    )
    .expect("gadgets");
    assert_eq!(gadgets["scope"], "Cluster");
    assert_eq!(gadgets["singularResource"], "gadget");
    assert_eq!(
        gadgets["responseKind"],
        json!({"group": "example.com", "version": "v1", "kind": "Gadget"})
    );
    assert_ne!(h2["etag"], h["etag"]);

    // Plain JSON (and no Accept at all) still gets the legacy documents.
    for accept in ["application/json", "*/*"] {
        let (s, h, legacy) = discover(&format!("{url}/apis"), accept).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(h["content-type"], "application/json");
        assert_eq!(legacy["kind"], "APIGroupList", "{accept}");
        let (_, _, legacy) = discover(&format!("{url}/api"), accept).await;
        assert_eq!(legacy["kind"], "APIVersions", "{accept}");
    }
    let (_, legacy) = get_json(&format!("{url}/apis")).await;
    assert_eq!(legacy["kind"], "APIGroupList");
}
