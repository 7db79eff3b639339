//! Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) on `/api` and
//! `/apis`, as kube-apiserver 1.30+ serves it (`k8s.io/apiserver`
//! `pkg/endpoints/discovery/aggregated`): one document with every group, version and resource,
//! for a request whose `Accept` header's first acceptable media type asks for it. JSON only (a
//! client asking for it in protobuf first gets it in JSON if it lists the JSON form after, the
//! legacy document otherwise).
//!
//! The document is built from the legacy resource lists ([`super::resource_list`]) the way kube
//! converts them (`ConvertGroupVersionIntoToDiscovery`: subresources nested in their resource),
//! so both always agree, CRDs created at run time included. A custom resource's `responseKind`
//! names its group and version, as the apiextensions server's discovery controller writes it;
//! a built-in one's only its kind (kube's installer fills group and version only for kinds of
//! another group, such as `autoscaling/v1` `Scale`).

use std::hash::{Hash, Hasher};

use serde_json::{Value, json};

use super::super::kinds::Registry;

/// The media type of the document (the `Content-Type` of the answer).
pub const MEDIA_TYPE: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether a request with this `Accept` header gets the aggregated document: the first media
/// range (in `goautoneg`'s order) that the simulator can answer is JSON (or a wildcard) with
/// `g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`. A range without `as` is the legacy
/// document; one asking for another `as` (`v2beta1`, removed in 1.33) or the aggregated document
/// in protobuf is passed over, as kube's negotiation passes over what it cannot serve.
pub fn requested(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    for r in kube_wire::negotiate::media_ranges(accept) {
        if r.q <= 0.0 {
            continue;
        }
        let json = (r.ty == "application" && matches!(r.subtype, "json" | "*"))
            || (r.ty == "*" && r.subtype == "*");
        match r.param("as") {
            None => return false,
            Some("APIGroupDiscoveryList")
                if json
                    && r.param("g") == Some("apidiscovery.k8s.io")
                    && r.param("v") == Some("v2") =>
            {
                return true;
            }
            Some(_) => continue,
        }
    }
    false
}

/// The `APIGroupDiscoveryList` of `/api` (`core`: the core group alone, whose name is empty) or
/// `/apis` (every other group, in legacy `/apis` order).
pub fn document(reg: &Registry, core: bool) -> Value {
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        reg.groups()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|version| {
                    json!({
                        "version": version,
                        "resources": resources(reg, group, version),
                        "freshness": "Current",
                    })
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !group.is_empty() {
                metadata["name"] = json!(group);
            }
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// The quoted `ETag` of a document (kube's is the SHA-512 of the JSON; any digest that changes
/// with the content serves clients the same).
pub fn etag(body: &[u8]) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("\"{:016X}\"", h.finish())
}

/// One version's `APIResourceDiscovery`s, from its legacy `APIResourceList`.
fn resources(reg: &Registry, group: &str, version: &str) -> Vec<Value> {
    let Some(list) = super::resource_list(reg, group, version) else {
        return Vec::new();
    };
    let legacy = list["resources"].as_array().cloned().unwrap_or_default();
    let scope = |r: &Value| {
        if r["namespaced"] == true {
            "Namespaced"
        } else {
            "Cluster"
        }
    };
    // A custom resource's kinds name its group and version; a built-in one's only the entries
    // that name them (`Scale`).
    let response_kind = |r: &Value, parent: &str| {
        let custom = reg
            .get(group, version, parent)
            .is_some_and(|t| !t.builtin && r.get("group").is_none());
        let (g, v) = if custom {
            (group, version)
        } else {
            (
                r["group"].as_str().unwrap_or_default(),
                r["version"].as_str().unwrap_or_default(),
            )
        };
        json!({"group": g, "version": v, "kind": r["kind"]})
    };
    let mut out: Vec<Value> = Vec::new();
    for r in &legacy {
        let name = r["name"].as_str().unwrap_or_default();
        if name.contains('/') {
            continue;
        }
        let mut d = json!({
            "resource": name,
            "responseKind": response_kind(r, name),
            "scope": scope(r),
            "singularResource": r["singularName"],
            "verbs": r["verbs"],
        });
        for k in ["shortNames", "categories"] {
            if let Some(v) = r.get(k) {
                d[k] = v.clone();
            }
        }
        out.push(d);
    }
    for r in &legacy {
        let name = r["name"].as_str().unwrap_or_default();
        let Some((parent, sub)) = name.split_once('/') else {
            continue;
        };
        let Some(p) = out.iter_mut().find(|d| d["resource"] == parent) else {
            continue;
        };
        let entry = json!({
            "subresource": sub,
            "responseKind": response_kind(r, parent),
            "verbs": r["verbs"],
        });
        match p.get_mut("subresources").and_then(Value::as_array_mut) {
            Some(subs) => subs.push(entry),
            None => p["subresources"] = json!([entry]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_acceptable_range_decides() {
        assert!(requested(Some(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        )));
        // client-go's order: protobuf first (not served), then JSON v2, then legacy.
        assert!(requested(Some(
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
        )));
        assert!(!requested(Some(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
        )));
        assert!(!requested(Some(
            "application/json,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )));
        assert!(!requested(Some("application/json")));
        assert!(!requested(None));
        assert!(requested(Some(
            "application/json;q=0.5,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )));
    }

    #[test]
    fn documents_nest_subresources_and_name_kinds_as_kube() {
        let reg =
            Registry::new(&["example.com/v1/widgets=Widget,cluster".parse().unwrap()]).unwrap();
        let core = document(&reg, true);
        assert_eq!(core["kind"], "APIGroupDiscoveryList");
        let items = core["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert!(items[0]["metadata"].get("name").is_none());
        let v1 = &items[0]["versions"][0];
        assert_eq!(v1["version"], "v1");
        assert_eq!(v1["freshness"], "Current");
        let pods = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(
            *pods,
            json!({
                "resource": "pods",
                "responseKind": {"group": "", "version": "", "kind": "Pod"},
                "scope": "Namespaced",
                "singularResource": "pod",
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                "shortNames": ["po"],
                "categories": ["all"],
                "subresources": [{
                    "subresource": "status",
                    "responseKind": {"group": "", "version": "", "kind": "Pod"},
                    "verbs": ["get", "patch", "update"],
                }],
            })
        );
        let apis = document(&reg, false);
        let names: Vec<&str> = apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].as_str().unwrap())
            .collect();
        // kube-aggregator lists its own group first, then by APIService priority.
        assert_eq!(
            names[..3],
            ["apiregistration.k8s.io", "apps", "events.k8s.io"]
        );
        assert_eq!(names.last(), Some(&"example.com"));
        let apps = &apis["items"][1]["versions"][0]["resources"];
        let deploy = apps
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(
            deploy["subresources"][0],
            json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]})
        );
        let widgets =
            &apis["items"].as_array().unwrap().last().unwrap()["versions"][0]["resources"][0];
        assert_eq!(widgets["scope"], "Cluster");
        assert_eq!(
            widgets["responseKind"],
            json!({"group": "example.com", "version": "v1", "kind": "Widget"})
        );
        assert_eq!(
            widgets["subresources"][0]["responseKind"],
            json!({"group": "example.com", "version": "v1", "kind": "Widget"})
        );
    }
}
