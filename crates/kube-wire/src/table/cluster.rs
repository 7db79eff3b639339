//! Printers of the cluster-configuration kinds (core ServiceAccounts and ResourceQuotas;
//! scheduling.k8s.io PriorityClasses; node.k8s.io RuntimeClasses), as kube's
//! `pkg/printers/internalversion/printers.go` prints them. kube has no printer for core
//! LimitRanges: it prints them with its default convertor ([`GENERIC`]).
//!
//! Same interface as [`super::workloads`]: [`Kind`], [`kind_for`], [`columns`], [`cells`];
//! [`KINDS`] lists the kinds printed here and [`GENERIC`] the kinds of this module's groups
//! that kube prints with its default convertor (`Name` + `Created At`).
//!
//! Cells are read from the v1 JSON as the apiserver would decode it, defaults included (a
//! PriorityClass without a preemption policy prints the defaulter's `PreemptLowerPriority`).
//! Quantities print as the JSON carries them, which for an object read from kube-apiserver is
//! Go's canonical `Quantity.String()`. Pure: no I/O; the clock is an argument.

use serde_json::{Map, Value, json};

use super::cells::{arr, flag, int_at, name_of, quantity_or_zero, str_at};
use super::{age, age_col, boolean, integer, name_col, text};

// The swagger doc strings kube's column definitions carry (k8s.io/api core/v1 and
// scheduling/v1 types_swagger_doc_generated.go), and the printer's own descriptions.
const D_SA_SECRETS: &str = "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret";
const D_PC_VALUE: &str = "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.";
const D_PC_GLOBAL_DEFAULT: &str = "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.";
const D_PC_PREEMPTION: &str = "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.";
const D_RQ_REQUEST: &str =
    "Request represents a minimum amount of cpu/memory that a container may consume.";
const D_RQ_LIMIT: &str = "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.";
/// kube describes the RuntimeClass handler with `ObjectMeta`'s doc of a `handler` field, which
/// `ObjectMeta` does not have: the description is empty.
const D_RC_HANDLER: &str = "";

/// The kinds printed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    ServiceAccount,
    ResourceQuota,
    PriorityClass,
    RuntimeClass,
}

/// Every (group, kind) printed here.
pub(super) const KINDS: &[(&str, &str)] = &[
    ("", "ServiceAccount"),
    ("", "ResourceQuota"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
];

/// The (group, kind)s of this module's groups that kube prints with the default convertor:
/// `printers.go` registers no handler for LimitRange.
pub(super) const GENERIC: &[(&str, &str)] = &[("", "LimitRange")];

/// The kind printed for `(group, kind)`, if it is one of this module's.
pub(super) fn kind_for(group: &str, kind: &str) -> Option<Kind> {
    Some(match (group, kind) {
        ("", "ServiceAccount") => Kind::ServiceAccount,
        ("", "ResourceQuota") => Kind::ResourceQuota,
        ("scheduling.k8s.io", "PriorityClass") => Kind::PriorityClass,
        ("node.k8s.io", "RuntimeClass") => Kind::RuntimeClass,
        _ => return None,
    })
}

/// The column definitions of `kind`.
pub(super) fn columns(kind: Kind) -> Vec<Value> {
    match kind {
        // kube types the secret count as a string column, yet its cell is an integer.
        Kind::ServiceAccount => vec![name_col(), text("Secrets", D_SA_SECRETS), age_col()],
        Kind::ResourceQuota => vec![
            name_col(),
            text("Request", D_RQ_REQUEST),
            text("Limit", D_RQ_LIMIT),
            age_col(),
        ],
        // The preemption policy is a wide cell, yet kube gives its column priority 0.
        Kind::PriorityClass => vec![
            name_col(),
            integer("Value", D_PC_VALUE),
            boolean("Global-Default", D_PC_GLOBAL_DEFAULT),
            age_col(),
            text("PreemptionPolicy", D_PC_PREEMPTION),
        ],
        Kind::RuntimeClass => vec![name_col(), text("Handler", D_RC_HANDLER), age_col()],
    }
}

/// One row's cells for `obj`, one per column of [`columns`].
pub(super) fn cells(kind: Kind, obj: &Value, now: i64) -> Vec<Value> {
    let name = json!(name_of(obj));
    match kind {
        Kind::ServiceAccount => vec![
            name,
            json!(arr(obj.get("secrets")).len()),
            json!(age(obj, now)),
        ],
        Kind::ResourceQuota => {
            let (request, limit) = quota_columns(obj);
            vec![name, json!(request), json!(limit), json!(age(obj, now))]
        }
        Kind::PriorityClass => vec![
            name,
            json!(int_at(obj, "value")),
            json!(flag(obj.get("globalDefault"), false)),
            json!(age(obj, now)),
            // The v1 defaulter sets a missing policy.
            json!(
                obj.get("preemptionPolicy")
                    .and_then(Value::as_str)
                    .unwrap_or("PreemptLowerPriority")
            ),
        ],
        Kind::RuntimeClass => vec![name, json!(str_at(obj, "/handler")), json!(age(obj, now))],
    }
}

/// kube's ResourceQuota cells: every resource of `status.hard`, sorted by name, as
/// `name: used/hard`, joined by `, `; resources named `limits.*` go to the limit column, the
/// others to the request column.
fn quota_columns(obj: &Value) -> (String, String) {
    let empty = Map::new();
    let hard = obj
        .pointer("/status/hard")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let used = obj.pointer("/status/used");
    let mut names: Vec<&String> = hard.keys().collect();
    names.sort();
    let mut request = Vec::new();
    let mut limit = Vec::new();
    for resource in names {
        let entry = format!(
            "{resource}: {}/{}",
            quantity_or_zero(used.and_then(|u| u.get(resource.as_str()))),
            quantity_or_zero(hard.get(resource.as_str()))
        );
        // strings.Split(resource, ".") with more than one piece, the first being "limits".
        if resource
            .split_once('.')
            .is_some_and(|(first, _)| first == "limits")
        {
            limit.push(entry);
        } else {
            request.push(entry);
        }
    }
    (request.join(", "), limit.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{NOW, bare_row, ts, typed, typed_cols};
    use super::super::{column_definitions, has_printer, row_cells};
    use super::*;

    #[test]
    fn limit_ranges_print_with_the_default_convertor() {
        assert!(has_printer("", "LimitRange"));
        assert!(kind_for("", "LimitRange").is_none());
        let defs = column_definitions("", "LimitRange");
        assert_eq!(defs[1]["name"], "Created At");
        let lr = json!({"metadata": {"name": "limits", "creationTimestamp": "2023-11-14T22:13:20Z"},
                        "spec": {"limits": [{"type": "Container"}]}});
        assert_eq!(
            row_cells("", "LimitRange", &lr, NOW),
            json!(["limits", "2023-11-14T22:13:20Z"])
        );
        for (g, k) in KINDS {
            assert!(has_printer(g, k), "{g} {k}");
        }
    }

    #[test]
    fn service_account_cells() {
        assert_eq!(
            typed("", "ServiceAccount"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Secrets", "string", 0),
                ("Age", "string", 0)
            ])
        );
        let defs = column_definitions("", "ServiceAccount");
        assert_eq!(defs[0]["format"], "name");
        assert!(
            defs[1]["description"]
                .as_str()
                .unwrap()
                .starts_with("Secrets is a list of the secrets in the same namespace")
        );
        let sa = json!({"metadata": {"name": "default", "creationTimestamp": ts(100)},
                        "secrets": [{"name": "default-token-abc"}, {"name": "other"}]});
        assert_eq!(
            row_cells("", "ServiceAccount", &sa, NOW),
            json!(["default", 2, "100s"])
        );
        assert_eq!(bare_row("", "ServiceAccount"), json!(["x", 0, "<unknown>"]));
    }

    #[test]
    fn resource_quota_cells() {
        assert_eq!(
            typed("", "ResourceQuota"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Request", "string", 0),
                ("Limit", "string", 0),
                ("Age", "string", 0)
            ])
        );
        // Requests and limits, each sorted by resource name; spec.hard is not printed.
        let rq = json!({
            "metadata": {"name": "test-resource-quota", "creationTimestamp": ts(600)},
            "spec": {"hard": {"cpu": "4"}},
            "status": {
                "hard": {"cpu": "1", "memory": "1Gi", "pods": "10", "services": "10",
                         "replicationcontrollers": "10", "services.nodeports": "10",
                         "requests.cpu": "1", "requests.memory": "1Gi",
                         "limits.cpu": "2", "limits.memory": "2Gi"},
                "used": {"cpu": "100m", "memory": "500Mi", "pods": "1", "services": "0",
                         "replicationcontrollers": "1", "services.nodeports": "0",
                         "requests.cpu": "100m", "requests.memory": "500Mi",
                         "limits.cpu": "200m", "limits.memory": "1Gi"}
            }
        });
        assert_eq!(
            row_cells("", "ResourceQuota", &rq, NOW),
            json!([
                "test-resource-quota",
                "cpu: 100m/1, memory: 500Mi/1Gi, pods: 1/10, replicationcontrollers: 1/10, requests.cpu: 100m/1, requests.memory: 500Mi/1Gi, services: 0/10, services.nodeports: 0/10",
                "limits.cpu: 200m/2, limits.memory: 1Gi/2Gi",
                "10m"
            ])
        );
        // Nothing used yet: Go's zero quantity. A resource named "limits" alone is a request.
        let fresh = json!({"metadata": {"name": "q"},
                           "status": {"hard": {"limits": "1", "count/pods": "5"}}});
        assert_eq!(
            row_cells("", "ResourceQuota", &fresh, NOW),
            json!(["q", "count/pods: 0/5, limits: 0/1", "", "<unknown>"])
        );
        assert_eq!(
            bare_row("", "ResourceQuota"),
            json!(["x", "", "", "<unknown>"])
        );
    }

    #[test]
    fn priority_and_runtime_classes() {
        assert_eq!(
            typed("scheduling.k8s.io", "PriorityClass"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Value", "integer", 0),
                ("Global-Default", "boolean", 0),
                ("Age", "string", 0),
                ("PreemptionPolicy", "string", 0)
            ])
        );
        let pc = json!({"metadata": {"name": "high", "creationTimestamp": ts(86_400 * 3)},
                        "value": 1_000_000, "globalDefault": true, "preemptionPolicy": "Never",
                        "description": "important"});
        assert_eq!(
            row_cells("scheduling.k8s.io", "PriorityClass", &pc, NOW),
            json!(["high", 1_000_000, true, "3d", "Never"])
        );
        assert_eq!(
            bare_row("scheduling.k8s.io", "PriorityClass"),
            json!(["x", 0, false, "<unknown>", "PreemptLowerPriority"])
        );

        assert_eq!(
            typed("node.k8s.io", "RuntimeClass"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Handler", "string", 0),
                ("Age", "string", 0)
            ])
        );
        assert_eq!(
            column_definitions("node.k8s.io", "RuntimeClass")[1]["description"],
            ""
        );
        let rc = json!({"metadata": {"name": "gvisor", "creationTimestamp": ts(20)},
                        "handler": "runsc", "overhead": {"podFixed": {"memory": "64Mi"}}});
        assert_eq!(
            row_cells("node.k8s.io", "RuntimeClass", &rc, NOW),
            json!(["gvisor", "runsc", "20s"])
        );
        assert_eq!(
            bare_row("node.k8s.io", "RuntimeClass"),
            json!(["x", "", "<unknown>"])
        );
    }
}
