//! kube's v1 defaulters (`pkg/apis/<group>/v1/defaults.go`) for the built-in kinds whose rules
//! live in [`super::rules`]: the values a client sees filled in after a create or an update of
//! the main endpoint (kube's decoder defaults every body it reads).
//!
//! Only what a defaulter sets on a field left out (absent or `null`) is reproduced, as
//! [`set_default`] does; a defaulter that creates a missing optional struct (a Go nil pointer the
//! defaulter leaves nil) is not, so a `matchConstraints` left out stays out. Status defaults are
//! [`super::status`]'s.

use serde_json::{Map, Value, json};

use super::workloads::{default_pod_template, object_at, set_default, spec_mut};
use crate::kinds::ResourceType;
use crate::util::{now_unix, rfc3339};

/// Applies `rt`'s defaulter to `obj`, if it has one here.
pub(super) fn apply(rt: &ResourceType, obj: &mut Value) {
    match (rt.group.as_str(), rt.resource.as_str()) {
        ("", "persistentvolumes") => persistent_volume(obj),
        ("", "limitranges") => limit_range(obj),
        ("", "replicationcontrollers") => replication_controller(obj),
        ("", "podtemplates") => default_pod_template(obj.get_mut("template")),
        ("apiregistration.k8s.io", "apiservices") => api_service(obj),
        ("networking.k8s.io", "networkpolicies") => network_policy(obj),
        ("networking.k8s.io", "ingressclasses") => ingress_class(obj),
        ("storage.k8s.io", "storageclasses") => storage_class(obj),
        ("storage.k8s.io", "csidrivers") => csi_driver(obj),
        ("scheduling.k8s.io", "priorityclasses") => priority_class(obj),
        ("admissionregistration.k8s.io", r) => admission(r, obj),
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => flow_schema(obj),
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => priority_level(obj),
        ("resource.k8s.io", "resourceclaims") => claim_spec(obj.get_mut("spec")),
        ("resource.k8s.io", "resourceclaimtemplates") => {
            claim_spec(obj.get_mut("spec").and_then(|s| s.get_mut("spec")))
        }
        ("resource.k8s.io", "resourceslices") => resource_slice(obj),
        _ => {}
    }
}

/// The object at `key` of `m` when it is one (absent or another type: `None`, nothing created).
fn present<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

/// Each object of the array at `key` of `m`.
fn each<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    m.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Sets `key` when absent, `null` or `0` (a non-pointer Go integer the defaulter fills when zero).
fn set_default_int(m: &mut Map<String, Value>, key: &str, value: i64) {
    if m.get(key)
        .is_none_or(|v| v.is_null() || v.as_i64() == Some(0))
    {
        m.insert(key.to_string(), json!(value));
    }
}

/// `SetDefaults_PersistentVolume` (spec part: status is reset and defaulted on create).
fn persistent_volume(obj: &mut Value) {
    let Some(spec) = spec_mut(obj) else { return };
    set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
    set_default(spec, "volumeMode", json!("Filesystem"));
}

/// `SetDefaults_LimitRangeItem`: a container's default limit from its max, its default request
/// from its default limit, then from its min.
fn limit_range(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for item in each(spec, "limits") {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        fill_from(item, "default", "max");
        fill_from(item, "defaultRequest", "default");
        fill_from(item, "defaultRequest", "min");
        // Go's empty maps are `omitempty`: a map left empty is not written.
        for k in ["default", "defaultRequest"] {
            if item
                .get(k)
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                item.shift_remove(k);
            }
        }
    }
}

/// Copies each resource of `item[from]` into `item[to]` unless `to` has it.
fn fill_from(item: &mut Map<String, Value>, to: &str, from: &str) {
    let Some(source) = item.get(from).and_then(Value::as_object).cloned() else {
        return;
    };
    let Some(target) = object_at(item, to) else {
        return;
    };
    for (k, v) in source {
        target.entry(k).or_insert(v);
    }
}

/// `SetDefaults_ReplicationController`: selector and labels from the template's labels, one
/// replica, and the pod template's defaults.
fn replication_controller(obj: &mut Value) {
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    if let Some(labels) = &labels
        && obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
        && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("labels".into(), labels.clone());
    }
    let Some(spec) = spec_mut(obj) else { return };
    if let Some(labels) = labels
        && spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        spec.insert("selector".into(), labels);
    }
    set_default(spec, "replicas", json!(1));
    default_pod_template(spec.get_mut("template"));
}

/// `SetDefaults_ServiceReference` of an APIService: port 443.
fn api_service(obj: &mut Value) {
    if let Some(service) = obj
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .and_then(|s| present(s, "service"))
    {
        set_default(service, "port", json!(443));
    }
}

/// `SetDefaults_NetworkPolicy` (policy types: Ingress, and Egress when egress rules are given)
/// and `SetDefaults_NetworkPolicyPort` (TCP).
fn network_policy(obj: &mut Value) {
    let Some(spec) = spec_mut(obj) else { return };
    for rules in ["ingress", "egress"] {
        for rule in each(spec, rules) {
            for port in each(rule, "ports") {
                set_default(port, "protocol", json!("TCP"));
            }
        }
    }
    if spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
}

/// `SetDefaults_IngressClass`: parameters are cluster-scoped unless said otherwise.
fn ingress_class(obj: &mut Value) {
    if let Some(params) = obj
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .and_then(|s| present(s, "parameters"))
    {
        set_default(params, "scope", json!("Cluster"));
    }
}

/// `SetDefaults_StorageClass`: reclaim policy Delete, binding mode Immediate.
fn storage_class(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else { return };
    set_default(o, "reclaimPolicy", json!("Delete"));
    set_default(o, "volumeBindingMode", json!("Immediate"));
}

/// `SetDefaults_CSIDriver`.
fn csi_driver(obj: &mut Value) {
    let Some(spec) = spec_mut(obj) else { return };
    set_default(spec, "attachRequired", json!(true));
    set_default(spec, "podInfoOnMount", json!(false));
    set_default(spec, "storageCapacity", json!(false));
    set_default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
    if spec
        .get("volumeLifecycleModes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
    }
    set_default(spec, "requiresRepublish", json!(false));
    set_default(spec, "seLinuxMount", json!(false));
}

/// `SetDefaults_PriorityClass`: preempt lower priorities.
fn priority_class(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        set_default(o, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
}

/// The admissionregistration.k8s.io/v1 defaulters: webhooks, policies and their bindings.
fn admission(resource: &str, obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else { return };
    match resource {
        "validatingwebhookconfigurations" | "mutatingwebhookconfigurations" => {
            let mutating = resource.starts_with("mutating");
            for hook in each(o, "webhooks") {
                webhook(hook, mutating);
            }
        }
        _ => {
            let Some(spec) = present(o, "spec") else {
                return;
            };
            if resource.ends_with("policies") {
                set_default(spec, "failurePolicy", json!("Fail"));
            }
            for key in ["matchConstraints", "matchResources"] {
                if let Some(m) = present(spec, key) {
                    match_resources(m);
                }
            }
        }
    }
}

/// `SetDefaults_ValidatingWebhook` / `SetDefaults_MutatingWebhook`, their rules' scope and their
/// service's port.
fn webhook(hook: &mut Map<String, Value>, mutating: bool) {
    set_default(hook, "failurePolicy", json!("Fail"));
    set_default(hook, "matchPolicy", json!("Equivalent"));
    set_default(hook, "namespaceSelector", json!({}));
    set_default(hook, "objectSelector", json!({}));
    set_default(hook, "timeoutSeconds", json!(10));
    if mutating {
        set_default(hook, "reinvocationPolicy", json!("Never"));
    }
    for rule in each(hook, "rules") {
        set_default(rule, "scope", json!("*"));
    }
    if let Some(service) = present(hook, "clientConfig").and_then(|c| present(c, "service")) {
        set_default(service, "port", json!(443));
    }
}

/// `SetDefaults_MatchResources` and the scope of its rules.
fn match_resources(m: &mut Map<String, Value>) {
    set_default(m, "matchPolicy", json!("Equivalent"));
    set_default(m, "namespaceSelector", json!({}));
    set_default(m, "objectSelector", json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        for rule in each(m, key) {
            set_default(rule, "scope", json!("*"));
        }
    }
}

/// `SetDefaults_FlowSchemaSpec`: matching precedence 1000.
fn flow_schema(obj: &mut Value) {
    if let Some(spec) = spec_mut(obj) {
        set_default_int(spec, "matchingPrecedence", 1000);
    }
}

/// The priority level defaulters: exempt and limited shares, queuing.
fn priority_level(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(exempt) = present(spec, "exempt") {
        set_default(exempt, "nominalConcurrencyShares", json!(0));
        set_default(exempt, "lendablePercent", json!(0));
    }
    let Some(limited) = present(spec, "limited") else {
        return;
    };
    set_default(limited, "nominalConcurrencyShares", json!(30));
    set_default(limited, "lendablePercent", json!(0));
    if let Some(queuing) = present(limited, "limitResponse").and_then(|r| present(r, "queuing")) {
        set_default_int(queuing, "handSize", 8);
        set_default_int(queuing, "queues", 64);
        set_default_int(queuing, "queueLengthLimit", 50);
    }
}

/// `SetDefaults_ExactDeviceRequest` / `SetDefaults_DeviceSubRequest` over a claim spec's
/// requests: exact count, one device.
fn claim_spec(spec: Option<&mut Value>) {
    let Some(devices) = spec
        .and_then(Value::as_object_mut)
        .and_then(|s| present(s, "devices"))
    else {
        return;
    };
    for request in each(devices, "requests") {
        if let Some(exactly) = present(request, "exactly") {
            device_count(exactly);
        }
        for sub in each(request, "firstAvailable") {
            device_count(sub);
        }
    }
}

fn device_count(request: &mut Map<String, Value>) {
    set_default(request, "allocationMode", json!("ExactCount"));
    if request.get("allocationMode") == Some(&json!("ExactCount")) {
        set_default_int(request, "count", 1);
    }
}

/// `SetDefaults_DeviceTaint`: a taint's time added is now (whole seconds).
fn resource_slice(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let now = rfc3339(now_unix());
    for device in each(spec, "devices") {
        for taint in each(device, "taints") {
            set_default(taint, "timeAdded", json!(now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Registry;

    fn defaulted(group: &str, resource: &str, obj: Value) -> Value {
        let reg = Registry::new(&[]).unwrap();
        let rt = reg.get(group, "v1", resource).unwrap();
        let mut obj = obj;
        apply(&rt, &mut obj);
        obj
    }

    #[test]
    fn storage_kinds_get_kubes_defaults() {
        let sc = defaulted(
            "storage.k8s.io",
            "storageclasses",
            json!({"provisioner": "x"}),
        );
        assert_eq!(sc["reclaimPolicy"], "Delete");
        assert_eq!(sc["volumeBindingMode"], "Immediate");
        let sc = defaulted(
            "storage.k8s.io",
            "storageclasses",
            json!({"reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"}),
        );
        assert_eq!(sc["reclaimPolicy"], "Retain");
        assert_eq!(sc["volumeBindingMode"], "WaitForFirstConsumer");
        let pv = defaulted("", "persistentvolumes", json!({"spec": {}}));
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
        let d = defaulted(
            "storage.k8s.io",
            "csidrivers",
            json!({"spec": {"attachRequired": false}}),
        );
        assert_eq!(d["spec"]["attachRequired"], false);
        assert_eq!(d["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
        assert_eq!(d["spec"]["volumeLifecycleModes"], json!(["Persistent"]));
    }

    #[test]
    fn limit_ranges_default_container_limits_and_requests() {
        let lr = defaulted(
            "",
            "limitranges",
            json!({"spec": {"limits": [
                {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}},
                {"type": "Pod", "max": {"cpu": "4"}},
            ]}}),
        );
        let c = &lr["spec"]["limits"][0];
        assert_eq!(c["default"], json!({"cpu": "2"}));
        assert_eq!(c["defaultRequest"], json!({"cpu": "2", "memory": "64Mi"}));
        assert!(lr["spec"]["limits"][1].get("default").is_none());
        let empty = defaulted(
            "",
            "limitranges",
            json!({"spec": {"limits": [{"type": "Container"}]}}),
        );
        assert_eq!(empty["spec"]["limits"][0], json!({"type": "Container"}));
    }

    #[test]
    fn replication_controllers_take_their_selector_and_labels_from_the_template() {
        let rc = defaulted(
            "",
            "replicationcontrollers",
            json!({"metadata": {"name": "rc"}, "spec": {"template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        );
        assert_eq!(rc["spec"]["selector"], json!({"app": "web"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        assert_eq!(rc["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let own = defaulted(
            "",
            "replicationcontrollers",
            json!({"metadata": {"labels": {"x": "y"}}, "spec": {"replicas": 0, "selector": {"a": "b"},
                "template": {"metadata": {"labels": {"a": "b"}}}}}),
        );
        assert_eq!(own["metadata"]["labels"], json!({"x": "y"}));
        assert_eq!(own["spec"]["selector"], json!({"a": "b"}));
        assert_eq!(own["spec"]["replicas"], 0);
    }

    #[test]
    fn webhooks_policies_and_bindings_get_admission_defaults() {
        let v = defaulted(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            json!({"webhooks": [{"name": "a.example.com",
                "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
                "rules": [{"operations": ["CREATE"]}]}]}),
        );
        let w = &v["webhooks"][0];
        assert_eq!(w["failurePolicy"], "Fail");
        assert_eq!(w["matchPolicy"], "Equivalent");
        assert_eq!(w["timeoutSeconds"], 10);
        assert_eq!(w["reinvocationPolicy"], "Never");
        assert_eq!(w["namespaceSelector"], json!({}));
        assert_eq!(w["rules"][0]["scope"], "*");
        assert_eq!(w["clientConfig"]["service"]["port"], 443);
        let v = defaulted(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            json!({"webhooks": [{"name": "a.example.com"}]}),
        );
        assert!(v["webhooks"][0].get("reinvocationPolicy").is_none());
        let p = defaulted(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies",
            json!({"spec": {"matchConstraints": {"resourceRules": [{"resources": ["pods"]}]}}}),
        );
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(
            p["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
            "*"
        );
        let b = defaulted(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicybindings",
            json!({"spec": {"policyName": "p"}}),
        );
        assert_eq!(b, json!({"spec": {"policyName": "p"}}));
    }

    #[test]
    fn flow_control_and_networking_defaults() {
        let fs = defaulted(
            "flowcontrol.apiserver.k8s.io",
            "flowschemas",
            json!({"spec": {"priorityLevelConfiguration": {"name": "x"}}}),
        );
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        let pl = defaulted(
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
            json!({"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}}),
        );
        let l = &pl["spec"]["limited"];
        assert_eq!(l["nominalConcurrencyShares"], 30);
        assert_eq!(l["lendablePercent"], 0);
        assert_eq!(
            l["limitResponse"]["queuing"],
            json!({"handSize": 8, "queues": 64, "queueLengthLimit": 50})
        );
        let np = defaulted(
            "networking.k8s.io",
            "networkpolicies",
            json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}),
        );
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let np = defaulted(
            "networking.k8s.io",
            "networkpolicies",
            json!({"spec": {"podSelector": {}}}),
        );
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
        let ic = defaulted(
            "networking.k8s.io",
            "ingressclasses",
            json!({"spec": {"controller": "example.com/c"}}),
        );
        assert_eq!(ic, json!({"spec": {"controller": "example.com/c"}}));
        let pc = defaulted("scheduling.k8s.io", "priorityclasses", json!({"value": 5}));
        assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
    }

    #[test]
    fn resource_claims_request_one_device_exactly() {
        let c = defaulted(
            "resource.k8s.io",
            "resourceclaims",
            json!({"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu"}},
                {"name": "any", "firstAvailable": [{"name": "a", "deviceClassName": "gpu", "allocationMode": "All"}]},
            ]}}}),
        );
        let r = &c["spec"]["devices"]["requests"];
        assert_eq!(r[0]["exactly"]["allocationMode"], "ExactCount");
        assert_eq!(r[0]["exactly"]["count"], 1);
        assert!(r[1]["firstAvailable"][0].get("count").is_none());
        let t = defaulted(
            "resource.k8s.io",
            "resourceclaimtemplates",
            json!({"spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}}),
        );
        assert_eq!(
            t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"],
            1
        );
    }
}
