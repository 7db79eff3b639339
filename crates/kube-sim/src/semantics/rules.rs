//! The registry strategies of the built-in kinds that are neither workloads (`workloads`) nor
//! CustomResourceDefinitions (`crds`), as far as a client notices them
//! (`pkg/registry/<group>/<kind>/strategy.go`): which kinds keep `metadata.generation`, their v1
//! defaults on every write of the main endpoint ([`super::defaults`]), the status a create
//! stores ([`super::status`]) and the few update rules that are simple to state:
//!
//! * a CertificateSigningRequest's spec (and status) cannot change through the main endpoint;
//! * a ServiceCIDR's `spec.cidrs` are immutable but for adding the other IP family to a
//!   single-stack one, an IPAddress's `spec.parentRef` is immutable (kube's messages).
//!
//! Validation of the kinds' fields (required fields, formats, names such as an APIService's
//! `<version>.<group>` or an IPAddress's address) is not reproduced.

use serde_json::Value;

use super::{defaults, invalid, status};
use crate::kinds::ResourceType;
use kube_wire::gofmt::quote;
use kube_wire::status::Status;

/// Kinds whose strategies set `metadata.generation` to 1 on create and bump it when anything but
/// metadata and status changes.
pub(super) fn has_generation(rt: &ResourceType) -> bool {
    if !rt.builtin {
        return false;
    }
    matches!(
        (rt.group.as_str(), rt.resource.as_str()),
        ("", "podtemplates" | "replicationcontrollers")
            | (
                "networking.k8s.io",
                "ingresses" | "ingressclasses" | "networkpolicies"
            )
            | ("storage.k8s.io", "csidrivers")
            | ("admissionregistration.k8s.io", _)
            | ("flowcontrol.apiserver.k8s.io", _)
            | ("resource.k8s.io", "deviceclasses" | "resourceslices")
            | ("discovery.k8s.io", "endpointslices")
    )
}

/// An EndpointSlice's strategy also bumps its generation when its labels change.
pub(super) fn metadata_bumps_generation(rt: &ResourceType, cur: &Value, new: &Value) -> bool {
    let labels = |v: &Value| {
        v.pointer("/metadata/labels")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .cloned()
    };
    rt.group == "discovery.k8s.io" && rt.resource == "endpointslices" && labels(cur) != labels(new)
}

/// Create: defaults and the status the strategy starts from (unless an in-process writer keeps
/// the status it gives, `keep_status`).
pub(super) fn prepare_create(
    rt: &ResourceType,
    obj: &mut Value,
    keep_status: bool,
) -> Result<(), Status> {
    defaults::apply(rt, obj);
    let kept = keep_status && obj.get("status").is_some_and(Value::is_object);
    if !kept
        && status::resets(rt)
        && let Some(s) = status::initial(rt, obj)
        && let Some(o) = obj.as_object_mut()
    {
        o.insert("status".into(), s);
    }
    Ok(())
}

/// Update of the main endpoint: defaults, then the kind's update rules.
pub(super) fn prepare_update(
    rt: &ResourceType,
    cur: &Value,
    new: &mut Value,
) -> Result<(), Status> {
    defaults::apply(rt, new);
    let name = cur["metadata"]["name"].as_str().unwrap_or_default();
    match (rt.group.as_str(), rt.resource.as_str()) {
        ("certificates.k8s.io", "certificatesigningrequests") => {
            if let (Some(o), Some(spec)) = (new.as_object_mut(), cur.get("spec")) {
                o.insert("spec".into(), spec.clone());
            }
            Ok(())
        }
        ("networking.k8s.io", "servicecidrs") => service_cidrs(rt, name, cur, new),
        ("networking.k8s.io", "ipaddresses") => ip_address(rt, name, cur, new),
        _ => Ok(()),
    }
}

fn immutable(rt: &ResourceType, name: &str, field: &str, value: String) -> Status {
    invalid(
        rt,
        name,
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value}: field is immutable"),
    )
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Go's `%#v` of a `[]string`.
fn go_strings(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| quote(s)).collect();
    format!("[]string{{{}}}", items.join(", "))
}

/// `ValidateServiceCIDRUpdate`: each existing CIDR stays; a single-stack ServiceCIDR may gain a
/// second one.
fn service_cidrs(rt: &ResourceType, name: &str, cur: &Value, new: &Value) -> Result<(), Status> {
    let old = strings(cur.pointer("/spec/cidrs"));
    let now = strings(new.pointer("/spec/cidrs"));
    let grows = old.len() == 1 && now.len() == 2;
    if old.len() != now.len() && !grows {
        return Err(immutable(rt, name, "spec.cidrs", go_strings(&now)));
    }
    match old.iter().zip(&now).position(|(a, b)| a != b) {
        Some(i) => Err(immutable(
            rt,
            name,
            &format!("spec.cidrs[{i}]"),
            quote(&now[i]),
        )),
        None => Ok(()),
    }
}

/// `ValidateIPAddressUpdate`: the parent reference is immutable (kube prints the internal
/// `networking.ParentReference`).
fn ip_address(rt: &ResourceType, name: &str, cur: &Value, new: &Value) -> Result<(), Status> {
    let old = cur.pointer("/spec/parentRef");
    let now = new.pointer("/spec/parentRef");
    if old == now {
        return Ok(());
    }
    let value = match now.filter(|v| v.is_object()) {
        None => "null".to_string(),
        Some(r) => {
            let f = |k: &str| quote(r[k].as_str().unwrap_or_default());
            format!(
                "networking.ParentReference{{Group:{}, Resource:{}, Namespace:{}, Name:{}}}",
                f("group"),
                f("resource"),
                f("namespace"),
                f("name")
            )
        }
    };
    Err(immutable(rt, name, "spec.parentRef", value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Registry;
    use serde_json::json;

    fn rt(group: &str, resource: &str) -> std::sync::Arc<ResourceType> {
        Registry::new(&[])
            .unwrap()
            .get(group, "v1", resource)
            .unwrap()
    }

    #[test]
    fn generation_follows_the_strategies() {
        for (g, r) in [
            ("", "replicationcontrollers"),
            ("", "podtemplates"),
            ("networking.k8s.io", "ingresses"),
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
            ),
            ("flowcontrol.apiserver.k8s.io", "flowschemas"),
            ("resource.k8s.io", "resourceslices"),
            ("discovery.k8s.io", "endpointslices"),
            ("storage.k8s.io", "csidrivers"),
        ] {
            assert!(has_generation(&rt(g, r)), "{g}/{r}");
        }
        for (g, r) in [
            ("", "persistentvolumes"),
            ("storage.k8s.io", "storageclasses"),
            ("resource.k8s.io", "resourceclaims"),
            ("certificates.k8s.io", "certificatesigningrequests"),
        ] {
            assert!(!has_generation(&rt(g, r)), "{g}/{r}");
        }
        let eps = rt("discovery.k8s.io", "endpointslices");
        assert!(metadata_bumps_generation(
            &eps,
            &json!({"metadata": {"labels": {"a": "1"}}}),
            &json!({"metadata": {"labels": {"a": "2"}}})
        ));
    }

    #[test]
    fn service_cidrs_and_ip_addresses_are_immutable() {
        let sc = rt("networking.k8s.io", "servicecidrs");
        let one = json!({"metadata": {"name": "c"}, "spec": {"cidrs": ["10.0.0.0/24"]}});
        let mut dual = json!({"spec": {"cidrs": ["10.0.0.0/24", "fd00::/108"]}});
        prepare_update(&sc, &one, &mut dual).unwrap();
        let mut moved = json!({"spec": {"cidrs": ["10.1.0.0/24"]}});
        let e = prepare_update(&sc, &one, &mut moved).unwrap_err();
        assert_eq!(
            e.message,
            "ServiceCIDR.networking.k8s.io \"c\" is invalid: spec.cidrs[0]: Invalid value: \"10.1.0.0/24\": field is immutable"
        );
        let mut none = json!({"spec": {"cidrs": []}});
        let e = prepare_update(&sc, &one, &mut none).unwrap_err();
        assert!(
            e.message
                .ends_with("spec.cidrs: Invalid value: []string{}: field is immutable")
        );
        let ip = rt("networking.k8s.io", "ipaddresses");
        let cur = json!({"metadata": {"name": "10.0.0.1"}, "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "a"}}});
        let mut same = cur.clone();
        prepare_update(&ip, &cur, &mut same).unwrap();
        let mut other = json!({"spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "b"}}});
        let e = prepare_update(&ip, &cur, &mut other).unwrap_err();
        assert!(e.message.ends_with(
            "spec.parentRef: Invalid value: networking.ParentReference{Group:\"\", Resource:\"services\", Namespace:\"default\", Name:\"b\"}: field is immutable"
        ), "{}", e.message);
    }

    #[test]
    fn a_csr_spec_cannot_change_through_the_main_endpoint() {
        let csr = rt("certificates.k8s.io", "certificatesigningrequests");
        let cur = json!({"metadata": {"name": "x"}, "spec": {"signerName": "a"}});
        let mut new =
            json!({"metadata": {"name": "x", "labels": {"l": "1"}}, "spec": {"signerName": "b"}});
        prepare_update(&csr, &cur, &mut new).unwrap();
        assert_eq!(new["spec"]["signerName"], "a");
        assert_eq!(new["metadata"]["labels"]["l"], "1");
    }
}
