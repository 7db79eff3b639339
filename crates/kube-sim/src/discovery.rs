//! Legacy discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/{g}/{v}`, `/version`), enough
//! for kubectl and client libraries to map kinds to resources, and the aggregated discovery
//! document (apidiscovery v2, [`aggregated`]) that `/api` and `/apis` answer clients asking for
//! it. Also a minimal `/openapi/v3` (operations and kinds, no schemas), which kubectl reads to
//! learn that the server validates fields.
//!
//! Documents only, built from the [`Registry`]: routing and method checks are `http`'s.

use serde_json::{Value, json};

use super::kinds::Registry;

pub mod aggregated;

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "emulationMajor": "1",
        "emulationMinor": "34",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "33",
        "gitVersion": "v1.34.2",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-11-01T00:00:00Z",
        "goVersion": "go1.24.9",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs[0].clone()})
}

/// `/apis`.
pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if served.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let (g, vs) = reg.groups().into_iter().find(|(g, _)| g == name)?;
    let mut doc = group_doc(&g, &vs);
    let o = doc.as_object_mut().expect("object");
    let mut out = serde_json::Map::new();
    out.insert("kind".into(), json!("APIGroup"));
    out.insert("apiVersion".into(), json!("v1"));
    out.append(o);
    Some(Value::Object(out))
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|t| t.group == group && t.version == version)
        .collect();
    if types.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for t in &types {
        let mut verbs = vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ];
        if t.group.is_empty() && t.resource == "namespaces" {
            verbs.retain(|v| *v != "deletecollection");
        }
        let mut r = json!({
            "name": t.resource,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": verbs,
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        // Subresources follow their resource in name order (`approval`, `scale`, `status`), as
        // kube sorts them. A scale is an `autoscaling/v1` `Scale`, which the entry names.
        if t.approval_subresource {
            resources.push(json!({
                "name": format!("{}/approval", t.resource),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if t.scale_subresource {
            resources.push(json!({
                "name": format!("{}/scale", t.resource),
                "singularName": "",
                "namespaced": t.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if t.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", t.resource),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// `/openapi/v3`: the index of per-group-version documents.
pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(String, String)> = Vec::new();
    for t in reg.all() {
        let gv = (t.group.clone(), t.version.clone());
        if !gvs.contains(&gv) {
            gvs.push(gv);
        }
    }
    for (g, v) in gvs {
        let p = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=0")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{g}/{v}`: a minimal OpenAPI document listing each
/// resource's operations with their `x-kubernetes-group-version-kind` and the `fieldValidation`
/// parameter, which is what kubectl reads to decide that the server validates fields itself.
/// Schemas are not described (`kubectl explain` does not work against the simulator).
pub fn openapi_v3_group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|t| t.group == group && t.version == version)
        .collect();
    if types.is_empty() {
        return None;
    }
    let field_validation = json!({"name":"fieldValidation","in":"query","description":"fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.","schema":{"type":"string","uniqueItems":true}});
    let mut paths = serde_json::Map::new();
    for t in types {
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let op = |verb: &str, with_validation: bool| {
            let mut o = json!({"operationId": format!("{verb}{}", t.kind), "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk.clone(), "responses": {"200": {"description": "OK"}}});
            if with_validation {
                o["parameters"] = json!([field_validation.clone()]);
            }
            o
        };
        let base = if t.group.is_empty() {
            format!("/api/{}", t.version)
        } else {
            format!("/apis/{}/{}", t.group, t.version)
        };
        let coll = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", t.resource)
        } else {
            format!("{base}/{}", t.resource)
        };
        paths.insert(
            coll.clone(),
            json!({"get": op("list", false), "post": op("post", true)}),
        );
        paths.insert(
            format!("{coll}/{{name}}"),
            json!({"get": op("get", false), "put": op("put", true), "patch": op("patch", true), "delete": op("delete", false)}),
        );
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.34.2"}, "paths": paths}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_list_served_types() {
        let reg = Registry::new(&["example.com/v1/widgets=Widget".parse().unwrap()]).unwrap();
        let core = resource_list(&reg, "", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"pods")
                && names.contains(&"pods/status")
                && names.contains(&"configmaps")
        );
        assert_eq!(core["groupVersion"], "v1");
        let groups = group_list(&reg);
        let gnames: Vec<&str> = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        // CustomResourceDefinitions are always served, as kube-apiserver does, and the groups
        // come in kube-apiserver's order (`apiregistration.k8s.io` first, then by APIService
        // priority, ties by name; the review groups, which list nothing, are not served),
        // custom groups last.
        assert_eq!(
            gnames,
            vec![
                "apiregistration.k8s.io",
                "apps",
                "events.k8s.io",
                "autoscaling",
                "batch",
                "certificates.k8s.io",
                "networking.k8s.io",
                "policy",
                "rbac.authorization.k8s.io",
                "storage.k8s.io",
                "admissionregistration.k8s.io",
                "apiextensions.k8s.io",
                "scheduling.k8s.io",
                "coordination.k8s.io",
                "node.k8s.io",
                "discovery.k8s.io",
                "resource.k8s.io",
                "flowcontrol.apiserver.k8s.io",
                "example.com"
            ]
        );
        let crds = resource_list(&reg, "apiextensions.k8s.io", "v1").unwrap();
        assert_eq!(crds["resources"][0]["name"], "customresourcedefinitions");
        assert_eq!(crds["resources"][0]["namespaced"], false);
        assert_eq!(crds["resources"][0]["shortNames"], json!(["crd", "crds"]));
        assert_eq!(
            crds["resources"][0]["categories"],
            json!(["api-extensions"])
        );
        assert_eq!(
            group(&reg, "example.com").unwrap()["preferredVersion"]["groupVersion"],
            "example.com/v1"
        );
        assert!(resource_list(&reg, "apps", "v2").is_none());
        assert!(resource_list(&reg, "policy", "v1beta1").is_none());
        assert!(resource_list(&reg, "storage.k8s.io", "v1beta1").is_none());
        assert!(resource_list(&reg, "certificates.k8s.io", "v1beta1").is_none());
    }

    #[test]
    fn workload_kinds_list_their_subresources_in_kube_order() {
        let reg = Registry::new(&[]).unwrap();
        let apps = resource_list(&reg, "apps", "v1").unwrap();
        assert_eq!(apps["groupVersion"], "apps/v1");
        let names: Vec<&str> = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ]
        );
        let r = &apps["resources"];
        assert_eq!(r[3]["shortNames"], json!(["deploy"]));
        assert_eq!(r[3]["categories"], json!(["all"]));
        assert_eq!(r[3]["singularName"], "deployment");
        assert_eq!(
            r[4],
            json!({"name":"deployments/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get","patch","update"]})
        );
        assert!(r[0].get("categories").is_none() && r[0].get("shortNames").is_none());
        let batch = resource_list(&reg, "batch", "v1").unwrap();
        let names: Vec<&str> = batch["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]
        );
        assert_eq!(batch["resources"][0]["shortNames"], json!(["cj"]));
        let leases = resource_list(&reg, "coordination.k8s.io", "v1").unwrap();
        assert_eq!(
            leases["resources"].as_array().unwrap().len(),
            1,
            "no status"
        );
        assert_eq!(leases["resources"][0]["kind"], "Lease");
        assert_eq!(
            group(&reg, "apps").unwrap()["preferredVersion"],
            json!({"groupVersion": "apps/v1", "version": "v1"})
        );
    }

    #[test]
    fn deployment_kinds_are_served_with_kubes_names_and_order() {
        let reg = Registry::new(&[]).unwrap();
        let names = |g: &str, v: &str| -> Vec<String> {
            resource_list(&reg, g, v).unwrap()["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap().to_string())
                .collect()
        };
        // /api/v1 lists its resources sorted by name, subresources after their resource.
        let core = names("", "v1");
        let mut sorted = core.clone();
        sorted.sort();
        assert_eq!(core, sorted);
        for r in [
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "serviceaccounts",
        ] {
            assert!(core.iter().any(|n| n == r), "{r} in {core:?}");
        }
        assert_eq!(
            names("rbac.authorization.k8s.io", "v1"),
            [
                "clusterrolebindings",
                "clusterroles",
                "rolebindings",
                "roles"
            ]
        );
        assert_eq!(
            names("policy", "v1"),
            ["poddisruptionbudgets", "poddisruptionbudgets/status"]
        );
        assert_eq!(
            names("autoscaling", "v2"),
            [
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status"
            ]
        );
        let hpa = &resource_list(&reg, "autoscaling", "v2").unwrap()["resources"][0];
        assert_eq!(hpa["shortNames"], json!(["hpa"]));
        assert_eq!(hpa["categories"], json!(["all"]));
        assert_eq!(hpa["kind"], "HorizontalPodAutoscaler");
        let roles = resource_list(&reg, "rbac.authorization.k8s.io", "v1").unwrap();
        assert_eq!(roles["resources"][1]["namespaced"], false);
        assert_eq!(roles["resources"][3]["namespaced"], true);
        assert_eq!(
            group(&reg, "autoscaling").unwrap()["preferredVersion"]["groupVersion"],
            "autoscaling/v2"
        );
    }

    #[test]
    fn the_other_built_in_groups_list_kubes_resources_and_subresources() {
        let reg = Registry::new(&[]).unwrap();
        let names = |g: &str| -> Vec<String> {
            resource_list(&reg, g, "v1").unwrap()["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            names("certificates.k8s.io"),
            [
                "certificatesigningrequests",
                "certificatesigningrequests/approval",
                "certificatesigningrequests/status"
            ]
        );
        assert_eq!(
            names("networking.k8s.io"),
            [
                "ingressclasses",
                "ingresses",
                "ingresses/status",
                "ipaddresses",
                "networkpolicies",
                "servicecidrs",
                "servicecidrs/status"
            ]
        );
        assert_eq!(
            names("resource.k8s.io"),
            [
                "deviceclasses",
                "resourceclaims",
                "resourceclaims/status",
                "resourceclaimtemplates",
                "resourceslices"
            ]
        );
        let core = names("");
        for r in [
            "limitranges",
            "persistentvolumes/status",
            "podtemplates",
            "replicationcontrollers/scale",
            "replicationcontrollers/status",
            "resourcequotas/status",
        ] {
            assert!(core.contains(&r.to_string()), "{r} in {core:?}");
        }
        let admission = resource_list(&reg, "admissionregistration.k8s.io", "v1").unwrap();
        for r in admission["resources"].as_array().unwrap() {
            if !r["name"].as_str().unwrap().contains('/') {
                assert_eq!(r["categories"], json!(["api-extensions"]), "{r}");
                assert_eq!(r["namespaced"], false);
            }
        }
        let csr = &resource_list(&reg, "certificates.k8s.io", "v1").unwrap()["resources"];
        assert_eq!(csr[0]["shortNames"], json!(["csr"]));
        assert_eq!(
            csr[1],
            json!({"name": "certificatesigningrequests/approval", "singularName": "", "namespaced": false, "kind": "CertificateSigningRequest", "verbs": ["get", "patch", "update"]})
        );
        let sc = &resource_list(&reg, "storage.k8s.io", "v1").unwrap()["resources"];
        let vac = sc.as_array().unwrap().last().unwrap();
        assert_eq!(vac["name"], "volumeattributesclasses");
        assert_eq!(vac["shortNames"], json!(["vac"]));
        assert_eq!(
            group(&reg, "flowcontrol.apiserver.k8s.io").unwrap()["preferredVersion"]["groupVersion"],
            "flowcontrol.apiserver.k8s.io/v1"
        );
    }
}
