//! What the registry strategies of the built-in kinds in [`super::rules`] do to `status`: the
//! status a create stores (kube resets it to the kind's zero value, which Go writes with its
//! non-`omitempty` members, then defaults it), and the extra rules of some status writes
//! (`pkg/registry/.../strategy.go`):
//!
//! * a PersistentVolume starts `Pending` with `lastPhaseTransitionTime` now, and a status write
//!   that changes the phase without setting that time gets now;
//! * a local APIService (no `spec.service`) starts `Available` ("Local APIServices are always
//!   available");
//! * a CertificateSigningRequest's `approval` subresource writes only `status.conditions`, its
//!   `status` subresource keeps the `Approved`/`Denied` conditions it had (kube refuses a write
//!   that adds or removes one; the simulator keeps the old ones), and both fill each condition's
//!   `status` (`True`), `lastUpdateTime` and `lastTransitionTime` (kept from the same condition
//!   before, else now).

use serde_json::{Map, Value, json};

use crate::kinds::ResourceType;
use crate::util::{now_unix, rfc3339};

/// The status a create stores for `rt` (after the strategy's reset), if its strategy resets it.
pub(super) fn initial(rt: &ResourceType, obj: &Value) -> Option<Value> {
    Some(match (rt.group.as_str(), rt.resource.as_str()) {
        ("", "persistentvolumes") => {
            json!({"phase": "Pending", "lastPhaseTransitionTime": rfc3339(now_unix())})
        }
        ("", "replicationcontrollers") => json!({"replicas": 0}),
        ("networking.k8s.io", "ingresses") => json!({"loadBalancer": {}}),
        ("storage.k8s.io", "volumeattachments") => json!({"attached": false}),
        ("apiregistration.k8s.io", "apiservices") => api_service(obj),
        ("", "resourcequotas")
        | ("certificates.k8s.io", "certificatesigningrequests")
        | ("admissionregistration.k8s.io", "validatingadmissionpolicies")
        | ("flowcontrol.apiserver.k8s.io", _)
        | ("resource.k8s.io", "resourceclaims") => json!({}),
        _ => return None,
    })
}

/// A new APIService's status: a local one (no `spec.service`) is available at once.
fn api_service(obj: &Value) -> Value {
    if obj.pointer("/spec/service").is_some_and(|s| !s.is_null()) {
        return json!({});
    }
    json!({"conditions": [{
        "type": "Available",
        "status": "True",
        "lastTransitionTime": rfc3339(now_unix()),
        "reason": "Local",
        "message": "Local APIServices are always available",
    }]})
}

/// Whether `rt`'s strategy keeps status out of creates and main-endpoint updates. ServiceCIDR's
/// does not (it lists status among its reset fields for server-side apply only).
pub(super) fn resets(rt: &ResourceType) -> bool {
    !(rt.group == "networking.k8s.io" && rt.resource == "servicecidrs")
}

fn is_csr(rt: &ResourceType) -> bool {
    rt.group == "certificates.k8s.io" && rt.resource == "certificatesigningrequests"
}

/// A write of the `status` subresource: `new` is the current object with the written status.
pub(super) fn on_status_write(rt: &ResourceType, cur: &Value, new: &mut Value) {
    if is_csr(rt) {
        keep_approval_conditions(cur, new);
        fill_conditions(cur, new);
        drop_empty_conditions(new);
    } else if rt.group.is_empty() && rt.resource == "persistentvolumes" {
        phase_transition(cur, new);
    }
}

/// A write of a CertificateSigningRequest's `approval` subresource: the current object with the
/// body's `status.conditions` only.
pub(super) fn on_approval_write(cur: &Value, body: &Value) -> Value {
    let mut new = cur.clone();
    let conditions = body.pointer("/status/conditions").cloned();
    if let Some(o) = new.as_object_mut() {
        let status = o.entry("status").or_insert_with(|| json!({}));
        if let Some(s) = status.as_object_mut() {
            match conditions {
                Some(c) if !c.is_null() => {
                    s.insert("conditions".into(), c);
                }
                _ => {
                    s.shift_remove("conditions");
                }
            }
        }
    }
    fill_conditions(cur, &mut new);
    drop_empty_conditions(&mut new);
    new
}

/// `conditions` is `omitempty`: Go writes no member for an empty list.
fn drop_empty_conditions(v: &mut Value) {
    if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut)
        && status
            .get("conditions")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
    {
        status.shift_remove("conditions");
    }
}

fn conditions(v: &Value) -> Vec<Value> {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn conditions_mut(v: &mut Value) -> Option<&mut Vec<Value>> {
    v.pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
}

/// kube's `preserveConditionInstances` for `Approved` and `Denied`; where the count differs, the
/// old instances replace the new ones.
fn keep_approval_conditions(cur: &Value, new: &mut Value) {
    let old = conditions(cur);
    let is_approval = |c: &Value| matches!(c["type"].as_str(), Some("Approved" | "Denied"));
    let Some(list) = conditions_mut(new) else {
        if old.iter().any(is_approval)
            && let Some(s) = new.get_mut("status").and_then(Value::as_object_mut)
        {
            s.insert(
                "conditions".into(),
                Value::Array(old.into_iter().filter(is_approval).collect()),
            );
        }
        return;
    };
    for ty in ["Approved", "Denied"] {
        let olds: Vec<&Value> = old.iter().filter(|c| c["type"] == ty).collect();
        let news: Vec<usize> = (0..list.len()).filter(|&i| list[i]["type"] == ty).collect();
        if olds.len() == news.len() {
            for (i, o) in news.into_iter().zip(olds) {
                list[i] = o.clone();
            }
        } else {
            list.retain(|c| c["type"] != ty);
            list.extend(olds.into_iter().cloned());
        }
    }
}

/// `SetDefaults_CertificateSigningRequestCondition` (status `True`) and kube's
/// `populateConditionTimestamps`.
fn fill_conditions(cur: &Value, new: &mut Value) {
    let old = conditions(cur);
    let now = rfc3339(now_unix());
    let Some(list) = conditions_mut(new) else {
        return;
    };
    for c in list.iter_mut().filter_map(Value::as_object_mut) {
        if c.get("status")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            c.insert("status".into(), json!("True"));
        }
        if is_unset(c, "lastUpdateTime") {
            c.insert("lastUpdateTime".into(), json!(now));
        }
        if is_unset(c, "lastTransitionTime") {
            let before = old
                .iter()
                .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
                .and_then(|o| o["lastTransitionTime"].as_str())
                .filter(|t| !t.is_empty());
            c.insert(
                "lastTransitionTime".into(),
                json!(before.map_or(now.clone(), str::to_string)),
            );
        }
    }
}

fn is_unset(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key)
        .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
}

/// The PersistentVolume status strategy's phase transition time: kept while the phase stays,
/// now when it changes and the writer did not set a new one.
fn phase_transition(cur: &Value, new: &mut Value) {
    let old_phase = cur.pointer("/status/phase").cloned();
    let old_time = cur.pointer("/status/lastPhaseTransitionTime").cloned();
    let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let unset = is_unset(status, "lastPhaseTransitionTime");
    if status.get("phase") == old_phase.as_ref() {
        if unset && let Some(t) = old_time {
            status.insert("lastPhaseTransitionTime".into(), t);
        }
    } else if unset || status.get("lastPhaseTransitionTime") == old_time.as_ref() {
        status.insert("lastPhaseTransitionTime".into(), json!(rfc3339(now_unix())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Registry;

    fn rt(group: &str, resource: &str) -> std::sync::Arc<ResourceType> {
        Registry::new(&[])
            .unwrap()
            .get(group, "v1", resource)
            .unwrap()
    }

    #[test]
    fn creates_start_from_kubes_zero_status() {
        let pv = initial(&rt("", "persistentvolumes"), &json!({})).unwrap();
        assert_eq!(pv["phase"], "Pending");
        assert!(pv["lastPhaseTransitionTime"].is_string());
        assert_eq!(
            initial(&rt("", "replicationcontrollers"), &json!({})),
            Some(json!({"replicas": 0}))
        );
        assert_eq!(
            initial(&rt("networking.k8s.io", "ingresses"), &json!({})),
            Some(json!({"loadBalancer": {}}))
        );
        assert_eq!(
            initial(&rt("storage.k8s.io", "volumeattachments"), &json!({})),
            Some(json!({"attached": false}))
        );
        assert_eq!(
            initial(&rt("", "resourcequotas"), &json!({})),
            Some(json!({}))
        );
        let local = initial(&rt("apiregistration.k8s.io", "apiservices"), &json!({}));
        assert_eq!(local.unwrap()["conditions"][0]["reason"], "Local");
        let remote = initial(
            &rt("apiregistration.k8s.io", "apiservices"),
            &json!({"spec": {"service": {"name": "m"}}}),
        );
        assert_eq!(remote, Some(json!({})));
        assert!(initial(&rt("", "configmaps"), &json!({})).is_none());
        assert!(!resets(&rt("networking.k8s.io", "servicecidrs")));
        assert!(resets(&rt("networking.k8s.io", "ingresses")));
    }

    #[test]
    fn approval_writes_only_conditions_and_status_writes_keep_them() {
        let cur = json!({"spec": {"signerName": "s"}, "status": {"certificate": "Y2VydA=="}});
        let body = json!({"spec": {"signerName": "other"}, "status": {"certificate": "", "conditions": [
            {"type": "Approved", "reason": "OK"}]}});
        let approved = on_approval_write(&cur, &body);
        assert_eq!(approved["spec"]["signerName"], "s");
        assert_eq!(approved["status"]["certificate"], "Y2VydA==");
        let c = &approved["status"]["conditions"][0];
        assert_eq!(c["status"], "True");
        assert!(c["lastUpdateTime"].is_string() && c["lastTransitionTime"].is_string());
        let csr = rt("certificates.k8s.io", "certificatesigningrequests");
        let mut denied = approved.clone();
        denied["status"]["conditions"] = json!([{"type": "Denied", "status": "True"}]);
        on_status_write(&csr, &approved, &mut denied);
        assert_eq!(
            denied["status"]["conditions"],
            approved["status"]["conditions"]
        );
    }

    #[test]
    fn a_volume_phase_change_stamps_its_transition_time() {
        let pv = rt("", "persistentvolumes");
        let cur = json!({"status": {"phase": "Pending", "lastPhaseTransitionTime": "2020-01-01T00:00:00Z"}});
        let mut same = json!({"status": {"phase": "Pending"}});
        on_status_write(&pv, &cur, &mut same);
        assert_eq!(
            same["status"]["lastPhaseTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        let mut bound = json!({"status": {"phase": "Bound", "lastPhaseTransitionTime": "2020-01-01T00:00:00Z"}});
        on_status_write(&pv, &cur, &mut bound);
        assert_ne!(
            bound["status"]["lastPhaseTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
    }
}
