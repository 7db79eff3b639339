//! Per-kind field selectors, as kube-apiserver's built-in registries and apiextensions-apiserver
//! implement them:
//!
//! * which field labels a kind accepts, how legacy labels are rewritten, and the exact message
//!   of the 400 for any other label ("field label conversion": `Scheme.ConvertFieldLabel`, run by
//!   the list/watch handler over every term of the `fieldSelector`), and
//! * the selectable field values of one object (the registry strategy's `ToSelectableFields` /
//!   `GetAttrs`), against which a converted selector is matched.
//!
//! The two lists differ on purpose, as upstream's do: pods accept `status.podIPs` but never
//! populate it (so `status.podIPs=x` matches nothing and `status.podIPs=` matches everything);
//! kinds on the default converter accept `metadata.namespace` even when cluster-scoped, where
//! it then compares as `""`.
//!
//! `apps/v1` registers no conversion at all, so its kinds take the default converter: a replica
//! set's `status.replicas`, although in its strategy's selectable fields, is refused, as
//! kube-apiserver 1.34+ refuses it (kubernetes/kubernetes#135136).
//!
//! For kinds outside its table, whether the kind is namespaced and which selectable fields a CRD
//! declares are the caller's to supply (from discovery); nothing here looks them up.
//!
//! Sources (kubernetes/kubernetes unless noted): `pkg/apis/core/v1/conversion.go`,
//! `pkg/apis/batch/v1/conversion.go`, `pkg/apis/events/v1/conversion.go`,
//! `pkg/apis/certificates/v1/conversion.go`, `pkg/apis/resource/v1/conversion.go`, the
//! `pkg/registry/**/strategy.go` files, kubernetes/apimachinery `pkg/runtime/conversion.go`
//! (`DefaultMetaV1FieldSelectorConversion`) and kubernetes/apiextensions-apiserver
//! `pkg/apiserver/conversion/converter.go` and `pkg/registry/customresource/strategy.go`.

use crate::gofmt::float as go_float;
use std::collections::BTreeMap;

use serde_json::Value;

use super::{FieldSelector, SelectorError, go_quote};

/// API groups whose kinds kube-apiserver serves itself (a kind of one of these groups that has no
/// custom conversion uses the default converter; a kind of any other group is treated as a
/// custom resource).
pub const BUILTIN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "extensions",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// Whether `group` is one of [`BUILTIN_GROUPS`].
pub fn is_builtin_group(group: &str) -> bool {
    BUILTIN_GROUPS.contains(&group)
}

/// How a custom converter words its rejection.
#[derive(Clone, Copy)]
enum Reject {
    /// `field label not supported: <label>` (core/v1, events.k8s.io, certificates.k8s.io).
    NotSupported,
    /// `field label "<label>" not supported for Job` (batch/v1).
    Job,
    /// `field label not supported for <group/version, Kind=K>: <label>` (resource.k8s.io).
    ForGvk(&'static str),
}

impl Reject {
    fn message(self, label: &str) -> String {
        match self {
            Reject::NotSupported => format!("field label not supported: {label}"),
            Reject::Job => format!("field label {} not supported for Job", go_quote(label)),
            Reject::ForGvk(gvk) => format!("field label not supported for {gvk}: {label}"),
        }
    }
}

type FieldsFn = fn(&Value, &mut BTreeMap<String, String>);

/// A kind with a custom field label conversion function.
struct KindSpec {
    group: &'static str,
    kind: &'static str,
    namespaced: bool,
    /// Labels accepted from clients and the canonical label each becomes.
    labels: &'static [(&'static str, &'static str)],
    reject: Reject,
    /// Adds the kind's selectable fields beyond `metadata.name` / `metadata.namespace`.
    fields: FieldsFn,
}

const fn same(l: &'static str) -> (&'static str, &'static str) {
    (l, l)
}

const NAME: (&str, &str) = same("metadata.name");
const NAMESPACE: (&str, &str) = same("metadata.namespace");

static KINDS: &[KindSpec] = &[
    KindSpec {
        group: "",
        kind: "Pod",
        namespaced: true,
        labels: &[
            NAME,
            NAMESPACE,
            same("spec.nodeName"),
            same("spec.restartPolicy"),
            same("spec.schedulerName"),
            same("spec.serviceAccountName"),
            same("spec.hostNetwork"),
            same("status.phase"),
            same("status.podIP"),
            same("status.podIPs"),
            same("status.nominatedNodeName"),
            // Backwards compatibility with old v1 clients.
            ("spec.host", "spec.nodeName"),
        ],
        reject: Reject::NotSupported,
        fields: pod_fields,
    },
    KindSpec {
        group: "",
        kind: "Node",
        namespaced: false,
        labels: &[NAME, same("spec.unschedulable")],
        reject: Reject::NotSupported,
        fields: node_fields,
    },
    KindSpec {
        group: "",
        kind: "ReplicationController",
        namespaced: true,
        labels: &[NAME, NAMESPACE, same("status.replicas")],
        reject: Reject::NotSupported,
        fields: replication_controller_fields,
    },
    KindSpec {
        group: "",
        kind: "Event",
        namespaced: true,
        labels: &[
            same("involvedObject.kind"),
            same("involvedObject.namespace"),
            same("involvedObject.name"),
            same("involvedObject.uid"),
            same("involvedObject.apiVersion"),
            same("involvedObject.resourceVersion"),
            same("involvedObject.fieldPath"),
            same("reason"),
            same("reportingComponent"),
            same("source"),
            same("type"),
            NAMESPACE,
            NAME,
        ],
        reject: Reject::NotSupported,
        fields: core_event_fields,
    },
    KindSpec {
        group: "",
        kind: "Namespace",
        namespaced: false,
        labels: &[same("status.phase"), NAME],
        reject: Reject::NotSupported,
        fields: namespace_fields,
    },
    KindSpec {
        group: "",
        kind: "Secret",
        namespaced: true,
        labels: &[same("type"), NAMESPACE, NAME],
        reject: Reject::NotSupported,
        fields: secret_fields,
    },
    KindSpec {
        group: "",
        kind: "Service",
        namespaced: true,
        labels: &[NAMESPACE, NAME, same("spec.clusterIP"), same("spec.type")],
        reject: Reject::NotSupported,
        fields: service_fields,
    },
    KindSpec {
        group: "batch",
        kind: "Job",
        namespaced: true,
        labels: &[NAME, NAMESPACE, same("status.successful")],
        reject: Reject::Job,
        fields: job_fields,
    },
    // events.k8s.io shares core Event storage: its labels are rewritten to the core names.
    KindSpec {
        group: "events.k8s.io",
        kind: "Event",
        namespaced: true,
        labels: &[
            same("reason"),
            ("regarding.kind", "involvedObject.kind"),
            ("regarding.namespace", "involvedObject.namespace"),
            ("regarding.name", "involvedObject.name"),
            ("regarding.uid", "involvedObject.uid"),
            ("regarding.apiVersion", "involvedObject.apiVersion"),
            (
                "regarding.resourceVersion",
                "involvedObject.resourceVersion",
            ),
            ("regarding.fieldPath", "involvedObject.fieldPath"),
            ("reportingController", "reportingComponent"),
            same("source"),
            same("type"),
            NAMESPACE,
            NAME,
        ],
        reject: Reject::NotSupported,
        fields: events_event_fields,
    },
    KindSpec {
        group: "certificates.k8s.io",
        kind: "CertificateSigningRequest",
        namespaced: false,
        labels: &[NAME, same("spec.signerName")],
        reject: Reject::NotSupported,
        fields: signer_name_fields,
    },
    KindSpec {
        group: "certificates.k8s.io",
        kind: "ClusterTrustBundle",
        namespaced: false,
        labels: &[NAME, same("spec.signerName")],
        reject: Reject::NotSupported,
        fields: signer_name_fields,
    },
    // Namespaced, yet its converter does not accept metadata.namespace.
    KindSpec {
        group: "certificates.k8s.io",
        kind: "PodCertificateRequest",
        namespaced: true,
        labels: &[
            NAME,
            same("spec.signerName"),
            same("spec.podName"),
            same("spec.nodeName"),
        ],
        reject: Reject::NotSupported,
        fields: pod_certificate_request_fields,
    },
    KindSpec {
        group: "resource.k8s.io",
        kind: "ResourceSlice",
        namespaced: false,
        labels: &[NAME, same("spec.nodeName"), same("spec.driver")],
        // The message embeds the request's group/version; v1 is the served, preferred version.
        reject: Reject::ForGvk("resource.k8s.io/v1, Kind=ResourceSlice"),
        fields: resource_slice_fields,
    },
];

fn kind_spec(group: &str, kind: &str) -> Option<&'static KindSpec> {
    KINDS.iter().find(|k| k.group == group && k.kind == kind)
}

enum Converter<'a> {
    Builtin(&'static KindSpec),
    /// apimachinery `DefaultMetaV1FieldSelectorConversion`.
    Default {
        namespaced: bool,
    },
    /// apiextensions-apiserver `crConverter` (+ KEP-4358 selectable fields).
    CustomResource {
        namespaced: bool,
        extra: &'a [String],
    },
}

fn converter<'a>(group: &str, kind: &str, namespaced: bool, extra: &'a [String]) -> Converter<'a> {
    if let Some(spec) = kind_spec(group, kind) {
        Converter::Builtin(spec)
    } else if extra.is_empty() && is_builtin_group(group) {
        Converter::Default { namespaced }
    } else {
        Converter::CustomResource { namespaced, extra }
    }
}

/// A CRD `selectableFields[].jsonPath` (`.spec.color`) as the field label (`spec.color`).
fn extra_name(json_path: &str) -> &str {
    json_path.strip_prefix('.').unwrap_or(json_path)
}

/// Convert one field label for a kind (`Scheme.ConvertFieldLabel`): the canonical label and
/// value, or the kind's exact 400 message.
///
/// * Kinds with a custom converter (core Pod, Node, Namespace, Secret, Service,
///   ReplicationController, Event; batch Job; events.k8s.io Event; certificates.k8s.io
///   CertificateSigningRequest, ClusterTrustBundle, PodCertificateRequest; resource.k8s.io
///   ResourceSlice) accept their own list (their scope is fixed; `namespaced` is ignored).
/// * Other kinds of a built-in group accept `metadata.name` and `metadata.namespace`.
/// * Custom resources (any other group, or any kind given `extra` selectable fields) accept
///   `metadata.name`, `metadata.namespace` when `namespaced`, and the `extra` fields; others get
///   `field label not supported: <label>`.
pub fn convert_field_label(
    group: &str,
    kind: &str,
    namespaced: bool,
    extra: &[String],
    label: &str,
    value: &str,
) -> Result<(String, String), SelectorError> {
    match converter(group, kind, namespaced, extra) {
        Converter::Builtin(spec) => spec
            .labels
            .iter()
            .find(|(from, _)| *from == label)
            .map(|(_, to)| ((*to).to_owned(), value.to_owned()))
            .ok_or_else(|| SelectorError::FieldLabel(spec.reject.message(label))),
        Converter::Default { .. } => match label {
            "metadata.name" | "metadata.namespace" => Ok((label.to_owned(), value.to_owned())),
            _ => Err(SelectorError::FieldLabel(format!(
                "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                go_quote(label)
            ))),
        },
        Converter::CustomResource { namespaced, extra } => {
            let ok = label == "metadata.name"
                || (namespaced && label == "metadata.namespace")
                || extra.iter().any(|e| extra_name(e) == label);
            if ok {
                Ok((label.to_owned(), value.to_owned()))
            } else {
                Err(SelectorError::FieldLabel(format!(
                    "field label not supported: {label}"
                )))
            }
        }
    }
}

/// Validate and canonicalise a field selector for a kind (group `""` for core; kind like
/// `"Pod"`), as the list/watch handler does before serving: every term goes through
/// [`convert_field_label`]; aliases (pods' `spec.host`, events.k8s.io's `regarding.*`) are
/// rewritten; the first unsupported label (in the selector's canonical order) fails with its
/// exact 400 message. `extra` are the selectable fields declared for a CRD version (KEP-4358),
/// as `jsonPath`s (`.spec.color`) or labels (`spec.color`).
pub fn convert_field_selector(
    group: &str,
    kind: &str,
    namespaced: bool,
    extra: &[String],
    sel: &FieldSelector,
) -> Result<FieldSelector, SelectorError> {
    sel.transform(|label, value| convert_field_label(group, kind, namespaced, extra, label, value))
}

/// The field labels a kind accepts in a field selector (before canonicalisation).
pub fn supported_field_labels(
    group: &str,
    kind: &str,
    namespaced: bool,
    extra: &[String],
) -> Vec<String> {
    match converter(group, kind, namespaced, extra) {
        Converter::Builtin(spec) => spec.labels.iter().map(|(l, _)| (*l).to_owned()).collect(),
        Converter::Default { .. } => vec!["metadata.name".into(), "metadata.namespace".into()],
        Converter::CustomResource { namespaced, extra } => {
            let mut v = vec!["metadata.name".to_owned()];
            if namespaced {
                v.push("metadata.namespace".to_owned());
            }
            v.extend(extra.iter().map(|e| extra_name(e).to_owned()));
            v
        }
    }
}

/// The selectable field values of one object (its full JSON), keyed by canonical field label
/// and sorted by it, as kube computes them for that kind: `metadata.name`,
/// `metadata.namespace` (namespaced kinds), and the kind's own fields (for pods
/// `spec.nodeName`, `spec.restartPolicy`, `spec.schedulerName`, `spec.serviceAccountName`,
/// `spec.hostNetwork` (`"true"`/`"false"`), `status.phase`, `status.podIP`,
/// `status.nominatedNodeName`; for nodes `spec.unschedulable`; ...). Unset fields have their Go
/// zero value (`""`, `"false"`, `"0"`). For custom resources each `extra` field is read by its
/// dotted path and printed as Go's `fmt.Sprint` prints it (`""` when absent).
pub fn selectable_fields(
    group: &str,
    kind: &str,
    namespaced: bool,
    extra: &[String],
    obj: &Value,
) -> Vec<(String, String)> {
    let mut out = BTreeMap::new();
    let meta = |out: &mut BTreeMap<String, String>, namespaced: bool| {
        put(out, "metadata.name", str_at(obj, &["metadata", "name"]));
        if namespaced {
            put(
                out,
                "metadata.namespace",
                str_at(obj, &["metadata", "namespace"]),
            );
        }
    };
    match converter(group, kind, namespaced, extra) {
        Converter::Builtin(spec) => {
            meta(&mut out, spec.namespaced);
            (spec.fields)(obj, &mut out);
        }
        Converter::Default { namespaced } => meta(&mut out, namespaced),
        Converter::CustomResource { namespaced, extra } => {
            meta(&mut out, namespaced);
            for e in extra {
                let name = extra_name(e);
                let path: Vec<&str> = name.split('.').collect();
                let value = at(obj, &path).and_then(go_sprint).unwrap_or_default();
                out.insert(name.to_owned(), value);
            }
        }
    }
    out.into_iter().collect()
}

// ---------------------------------------------------------------------------------------------
// Per-kind selectable fields (from the v1 JSON form of the object)

fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, seg| v.get(*seg))
}

fn str_at(obj: &Value, path: &[&str]) -> String {
    at(obj, path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn bool_at(obj: &Value, path: &[&str]) -> String {
    let b = at(obj, path).and_then(Value::as_bool).unwrap_or(false);
    b.to_string()
}

fn int_at(obj: &Value, path: &[&str]) -> String {
    at(obj, path)
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .to_string()
}

fn put(out: &mut BTreeMap<String, String>, key: &str, value: String) {
    out.insert(key.to_owned(), value);
}

fn first_non_empty(a: String, b: impl FnOnce() -> String) -> String {
    if a.is_empty() { b() } else { a }
}

fn pod_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(out, "spec.nodeName", str_at(obj, &["spec", "nodeName"]));
    put(
        out,
        "spec.restartPolicy",
        str_at(obj, &["spec", "restartPolicy"]),
    );
    put(
        out,
        "spec.schedulerName",
        str_at(obj, &["spec", "schedulerName"]),
    );
    // v1 -> internal conversion: the deprecated serviceAccount fills an empty serviceAccountName.
    let sa = first_non_empty(str_at(obj, &["spec", "serviceAccountName"]), || {
        str_at(obj, &["spec", "serviceAccount"])
    });
    put(out, "spec.serviceAccountName", sa);
    // Internally spec.securityContext.hostNetwork; false when unset.
    put(
        out,
        "spec.hostNetwork",
        bool_at(obj, &["spec", "hostNetwork"]),
    );
    put(out, "status.phase", str_at(obj, &["status", "phase"]));
    // The first of status.podIPs; v1 -> internal conversion makes a non-empty status.podIP
    // authoritative (it becomes podIPs[0]).
    let ip = first_non_empty(str_at(obj, &["status", "podIP"]), || {
        at(obj, &["status", "podIPs"])
            .and_then(|ips| ips.get(0))
            .map(|ip| str_at(ip, &["ip"]))
            .unwrap_or_default()
    });
    put(out, "status.podIP", ip);
    put(
        out,
        "status.nominatedNodeName",
        str_at(obj, &["status", "nominatedNodeName"]),
    );
}

fn node_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(
        out,
        "spec.unschedulable",
        bool_at(obj, &["spec", "unschedulable"]),
    );
}

fn replication_controller_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(out, "status.replicas", int_at(obj, &["status", "replicas"]));
}

fn namespace_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(out, "status.phase", str_at(obj, &["status", "phase"]));
    // Upstream keeps a bare "name" for backward compatibility (no converter accepts it).
    put(out, "name", str_at(obj, &["metadata", "name"]));
}

fn secret_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(out, "type", str_at(obj, &["type"]));
}

fn service_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(out, "spec.clusterIP", str_at(obj, &["spec", "clusterIP"]));
    put(out, "spec.type", str_at(obj, &["spec", "type"]));
}

fn job_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(
        out,
        "status.successful",
        int_at(obj, &["status", "succeeded"]),
    );
}

/// Core event fields from the JSON names of the involved object, reporting controller and
/// source component of either Event representation.
fn event_fields(
    obj: &Value,
    out: &mut BTreeMap<String, String>,
    involved: &str,
    reporting: &str,
    source: &str,
) {
    for f in [
        "kind",
        "namespace",
        "name",
        "uid",
        "apiVersion",
        "resourceVersion",
        "fieldPath",
    ] {
        put(
            out,
            &format!("involvedObject.{f}"),
            str_at(obj, &[involved, f]),
        );
    }
    put(out, "reason", str_at(obj, &["reason"]));
    let reporting_controller = str_at(obj, &[reporting]);
    let src = first_non_empty(str_at(obj, &[source, "component"]), || {
        reporting_controller.clone()
    });
    put(out, "reportingComponent", reporting_controller);
    put(out, "source", src);
    put(out, "type", str_at(obj, &["type"]));
}

fn core_event_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    event_fields(obj, out, "involvedObject", "reportingComponent", "source");
}

fn events_event_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    event_fields(
        obj,
        out,
        "regarding",
        "reportingController",
        "deprecatedSource",
    );
}

fn signer_name_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(out, "spec.signerName", str_at(obj, &["spec", "signerName"]));
}

fn pod_certificate_request_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(out, "spec.signerName", str_at(obj, &["spec", "signerName"]));
    put(out, "spec.podName", str_at(obj, &["spec", "podName"]));
    put(out, "spec.nodeName", str_at(obj, &["spec", "nodeName"]));
}

fn resource_slice_fields(obj: &Value, out: &mut BTreeMap<String, String>) {
    put(out, "spec.nodeName", str_at(obj, &["spec", "nodeName"]));
    put(out, "spec.driver", str_at(obj, &["spec", "driver"]));
}

// ---------------------------------------------------------------------------------------------
// Go fmt.Sprint of an unstructured (JSON-decoded) value

/// `fmt.Sprint(v)` for a value of a Go unstructured object; `None` for JSON null (which the CRD
/// strategy turns into `""`).
fn go_sprint(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        other => Some(go_sprint_inner(other)),
    }
}

fn go_sprint_inner(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.as_f64().map(go_float).unwrap_or_else(|| n.to_string()),
        },
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_sprint_inner).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_sprint_inner(&map[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conv(group: &str, kind: &str, namespaced: bool, sel: &str) -> Result<String, String> {
        let sel = FieldSelector::parse(sel).map_err(|e| e.to_string())?;
        convert_field_selector(group, kind, namespaced, &[], &sel)
            .map(|s| s.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn convert_accepts_and_rejects_per_kind() {
        let default_msg = |l: &str| {
            format!(
                "\"{l}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )
        };
        let not_supported = |l: &str| format!("field label not supported: {l}");
        type Case<'a> = (&'a str, &'a str, bool, &'a str, Result<String, String>);
        let ok = |s: &str| Ok(s.to_owned());
        let cases: Vec<Case> = vec![
            // Pod
            ("", "Pod", true, "spec.nodeName=n1", ok("spec.nodeName=n1")),
            ("", "Pod", true, "spec.host=n1", ok("spec.nodeName=n1")),
            (
                "",
                "Pod",
                true,
                "metadata.namespace=ns,status.phase!=Running,spec.hostNetwork=true",
                ok("metadata.namespace=ns,spec.hostNetwork=true,status.phase!=Running"),
            ),
            ("", "Pod", true, "status.podIPs=10.0.0.1", ok("status.podIPs=10.0.0.1")),
            (
                "",
                "Pod",
                true,
                "spec.restartPolicy=Always,spec.schedulerName=s,spec.serviceAccountName=sa,status.podIP=1.2.3.4,status.nominatedNodeName=n",
                ok("spec.restartPolicy=Always,spec.schedulerName=s,spec.serviceAccountName=sa,status.nominatedNodeName=n,status.podIP=1.2.3.4"),
            ),
            ("", "Pod", true, "spec.foo=x", Err(not_supported("spec.foo"))),
            ("", "Pod", true, "metadata.labels=x", Err(not_supported("metadata.labels"))),
            ("", "Pod", true, "spec.nodeName =x", Err(not_supported("spec.nodeName "))),
            ("", "Pod", true, "=x", Err(not_supported(""))),
            // the first unsupported term in canonical order is reported
            ("", "Pod", true, "z=1,b=2,spec.nodeName=n", Err(not_supported("b"))),
            // Node: cluster-scoped, no metadata.namespace
            ("", "Node", false, "spec.unschedulable=false", ok("spec.unschedulable=false")),
            ("", "Node", false, "metadata.name=n", ok("metadata.name=n")),
            ("", "Node", false, "metadata.namespace=", Err(not_supported("metadata.namespace"))),
            // Namespace
            ("", "Namespace", false, "status.phase=Active", ok("status.phase=Active")),
            ("", "Namespace", false, "name=x", Err(not_supported("name"))),
            ("", "Namespace", false, "metadata.namespace=x", Err(not_supported("metadata.namespace"))),
            // Secret, Service, ReplicationController
            ("", "Secret", true, "type=kubernetes.io/tls", ok("type=kubernetes.io/tls")),
            ("", "Secret", true, "data=x", Err(not_supported("data"))),
            ("", "Service", true, "spec.clusterIP=None,spec.type=ClusterIP", ok("spec.clusterIP=None,spec.type=ClusterIP")),
            ("", "Service", true, "spec.ports=x", Err(not_supported("spec.ports"))),
            ("", "ReplicationController", true, "status.replicas=3", ok("status.replicas=3")),
            ("", "ReplicationController", true, "spec.replicas=3", Err(not_supported("spec.replicas"))),
            // core Event
            (
                "",
                "Event",
                true,
                "involvedObject.kind=Pod,involvedObject.name=p,involvedObject.uid=u,reason=Failed,source=kubelet,type=Warning,reportingComponent=k",
                ok("involvedObject.kind=Pod,involvedObject.name=p,involvedObject.uid=u,reason=Failed,reportingComponent=k,source=kubelet,type=Warning"),
            ),
            ("", "Event", true, "regarding.kind=Pod", Err(not_supported("regarding.kind"))),
            // events.k8s.io Event: regarding.* rewritten to core names
            (
                "events.k8s.io",
                "Event",
                true,
                "regarding.kind=Pod,reportingController=k,type=Normal",
                ok("involvedObject.kind=Pod,reportingComponent=k,type=Normal"),
            ),
            ("events.k8s.io", "Event", true, "involvedObject.kind=Pod", Err(not_supported("involvedObject.kind"))),
            // ConfigMap, Endpoints, EndpointSlice, apps: default converter
            ("", "ConfigMap", true, "metadata.name=a,metadata.namespace=b", ok("metadata.name=a,metadata.namespace=b")),
            ("", "ConfigMap", true, "data.x=y", Err(default_msg("data.x"))),
            ("", "Endpoints", true, "subsets=x", Err(default_msg("subsets"))),
            ("discovery.k8s.io", "EndpointSlice", true, "metadata.name=a", ok("metadata.name=a")),
            ("discovery.k8s.io", "EndpointSlice", true, "addressType=IPv4", Err(default_msg("addressType"))),
            ("apps", "ReplicaSet", true, "status.replicas=1", Err(default_msg("status.replicas"))),
            // apps/v1 registers no converter: StatefulSet's `status.successful` was v1beta1/2's
            ("apps", "StatefulSet", true, "status.successful=1", Err(default_msg("status.successful"))),
            ("apps", "Deployment", true, "metadata.name=web", ok("metadata.name=web")),
            ("coordination.k8s.io", "Lease", true, "spec.holderIdentity=n", Err(default_msg("spec.holderIdentity"))),
            // the default converter accepts metadata.namespace for cluster-scoped kinds too
            ("rbac.authorization.k8s.io", "ClusterRole", false, "metadata.namespace=x", ok("metadata.namespace=x")),
            // %q quoting of the label
            ("", "ConfigMap", true, "a\"b\\c\té=1", Err("\"a\\\"b\\\\c\\té\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"".to_owned())),
            // Job
            ("batch", "Job", true, "status.successful=1,metadata.namespace=ns", ok("metadata.namespace=ns,status.successful=1")),
            ("batch", "Job", true, "status.succeeded=1", Err("field label \"status.succeeded\" not supported for Job".to_owned())),
            ("batch", "CronJob", true, "spec.suspend=true", Err(default_msg("spec.suspend"))),
            // certificates.k8s.io, resource.k8s.io
            ("certificates.k8s.io", "CertificateSigningRequest", false, "spec.signerName=kubernetes.io/kubelet-serving", ok("spec.signerName=kubernetes.io/kubelet-serving")),
            ("certificates.k8s.io", "CertificateSigningRequest", false, "metadata.namespace=x", Err(not_supported("metadata.namespace"))),
            ("certificates.k8s.io", "PodCertificateRequest", true, "spec.podName=p,spec.nodeName=n", ok("spec.nodeName=n,spec.podName=p")),
            ("certificates.k8s.io", "PodCertificateRequest", true, "metadata.namespace=x", Err(not_supported("metadata.namespace"))),
            ("resource.k8s.io", "ResourceSlice", false, "spec.driver=d", ok("spec.driver=d")),
            ("resource.k8s.io", "ResourceSlice", false, "spec.pool=p", Err("field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool".to_owned())),
            // custom resources without selectable fields
            ("example.com", "Widget", true, "metadata.namespace=a", ok("metadata.namespace=a")),
            ("example.com", "Widget", true, "spec.color=red", Err(not_supported("spec.color"))),
            ("example.com", "ClusterWidget", false, "metadata.namespace=a", Err(not_supported("metadata.namespace"))),
            // empty selectors stay empty
            ("", "Pod", true, "", ok("")),
            ("", "ConfigMap", true, "=", ok("")),
        ];
        for (group, kind, namespaced, sel, want) in cases {
            assert_eq!(
                conv(group, kind, namespaced, sel),
                want,
                "{group}/{kind} {sel:?}"
            );
        }
    }

    #[test]
    fn custom_resource_selectable_fields() {
        let extra = vec![
            ".spec.color".to_owned(),
            "spec.size".to_owned(),
            ".status.ready".to_owned(),
        ];
        let sel = FieldSelector::parse("spec.color=red,spec.size!=4,metadata.name=w").unwrap();
        let conv = convert_field_selector("example.com", "Widget", true, &extra, &sel).unwrap();
        assert_eq!(conv, sel);
        let err = convert_field_selector(
            "example.com",
            "Widget",
            true,
            &extra,
            &FieldSelector::parse("spec.shape=round").unwrap(),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "field label not supported: spec.shape");
        // `extra` makes a built-in-group kind behave as a custom resource too.
        assert!(convert_field_label("apps", "Thing", false, &extra, "spec.color", "x").is_ok());
        assert_eq!(
            supported_field_labels("example.com", "Widget", true, &extra),
            [
                "metadata.name",
                "metadata.namespace",
                "spec.color",
                "spec.size",
                "status.ready"
            ]
        );

        let obj = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"color": "red", "size": 3},
            "status": {"ready": true}
        });
        let fields = selectable_fields("example.com", "Widget", true, &extra, &obj);
        assert_eq!(
            fields,
            vec![
                ("metadata.name".to_owned(), "w".to_owned()),
                ("metadata.namespace".to_owned(), "ns".to_owned()),
                ("spec.color".to_owned(), "red".to_owned()),
                ("spec.size".to_owned(), "3".to_owned()),
                ("status.ready".to_owned(), "true".to_owned()),
            ]
        );
        assert!(conv.matches_set(&fields));
        let bare = json!({"metadata": {"name": "c"}, "spec": {"size": null}});
        let fields = selectable_fields("example.com", "ClusterWidget", false, &extra, &bare);
        assert_eq!(
            fields,
            vec![
                ("metadata.name".to_owned(), "c".to_owned()),
                ("spec.color".to_owned(), String::new()),
                ("spec.size".to_owned(), String::new()),
                ("status.ready".to_owned(), String::new()),
            ]
        );
    }

    fn realistic_pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-7d4b9c8f5-x2k9p",
                "namespace": "prod",
                "uid": "0b2c6f3e-1f7a-4c55-9f0e-3d2a1b8c7e6f",
                "resourceVersion": "123456",
                "labels": {"app": "web", "pod-template-hash": "7d4b9c8f5"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f5", "uid": "u", "controller": true}]
            },
            "spec": {
                "containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}],
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
                "serviceAccountName": "web-sa",
                "serviceAccount": "web-sa",
                "nodeName": "node-a",
                "dnsPolicy": "ClusterFirst",
                "securityContext": {}
            },
            "status": {
                "phase": "Running",
                "hostIP": "10.0.0.5",
                "podIP": "10.244.1.7",
                "podIPs": [{"ip": "10.244.1.7"}, {"ip": "fd00::7"}],
                "qosClass": "BestEffort",
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        })
    }

    fn map(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pod_selectable_fields() {
        let pod = realistic_pod();
        let fields = selectable_fields("", "Pod", true, &[], &pod);
        assert_eq!(
            fields,
            map(&[
                ("metadata.name", "web-7d4b9c8f5-x2k9p"),
                ("metadata.namespace", "prod"),
                ("spec.hostNetwork", "false"),
                ("spec.nodeName", "node-a"),
                ("spec.restartPolicy", "Always"),
                ("spec.schedulerName", "default-scheduler"),
                ("spec.serviceAccountName", "web-sa"),
                ("status.nominatedNodeName", ""),
                ("status.phase", "Running"),
                ("status.podIP", "10.244.1.7"),
            ])
        );
        let matches = |s: &str| {
            let sel =
                convert_field_selector("", "Pod", true, &[], &FieldSelector::parse(s).unwrap())
                    .unwrap();
            sel.matches_set(&fields)
        };
        assert!(matches("spec.host=node-a"));
        assert!(matches(
            "spec.nodeName=node-a,status.phase!=Succeeded,status.phase!=Failed"
        ));
        assert!(matches("spec.hostNetwork=false,status.nominatedNodeName="));
        assert!(!matches("spec.hostNetwork=true"));
        assert!(matches("status.podIP=10.244.1.7"));
        // accepted but never populated: compares as ""
        assert!(!matches("status.podIPs=10.244.1.7"));
        assert!(matches("status.podIPs="));
        assert!(!matches("metadata.namespace=default"));

        // hostNetwork, podIPs-only status, deprecated serviceAccount, nothing set
        let pod = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"hostNetwork": true, "serviceAccount": "old"},
            "status": {"podIPs": [{"ip": "fd00::1"}]}
        });
        let fields = selectable_fields("", "Pod", true, &[], &pod);
        assert!(fields.contains(&("spec.hostNetwork".into(), "true".into())));
        assert!(fields.contains(&("status.podIP".into(), "fd00::1".into())));
        assert!(fields.contains(&("spec.serviceAccountName".into(), "old".into())));
        assert!(fields.contains(&("status.phase".into(), String::new())));
        let empty = selectable_fields("", "Pod", true, &[], &json!({}));
        assert_eq!(empty.len(), 10);
        assert!(empty.contains(&("metadata.name".into(), String::new())));
    }

    #[test]
    fn other_kinds_selectable_fields() {
        let node = json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}});
        assert_eq!(
            selectable_fields("", "Node", false, &[], &node),
            map(&[("metadata.name", "n1"), ("spec.unschedulable", "true")])
        );
        // namespaced=true is ignored for a cluster-scoped built-in kind
        assert_eq!(
            selectable_fields("", "Node", true, &[], &json!({"metadata": {"name": "n2"}})),
            map(&[("metadata.name", "n2"), ("spec.unschedulable", "false")])
        );
        let ns = json!({"metadata": {"name": "kube-system"}, "status": {"phase": "Active"}});
        assert_eq!(
            selectable_fields("", "Namespace", false, &[], &ns),
            map(&[
                ("metadata.name", "kube-system"),
                ("name", "kube-system"),
                ("status.phase", "Active")
            ])
        );
        let secret = json!({"metadata": {"name": "s", "namespace": "ns"}, "type": "Opaque"});
        assert_eq!(
            selectable_fields("", "Secret", true, &[], &secret),
            map(&[
                ("metadata.name", "s"),
                ("metadata.namespace", "ns"),
                ("type", "Opaque")
            ])
        );
        let svc = json!({"metadata": {"name": "k", "namespace": "default"}, "spec": {"clusterIP": "10.96.0.1", "type": "ClusterIP"}});
        assert_eq!(
            selectable_fields("", "Service", true, &[], &svc),
            map(&[
                ("metadata.name", "k"),
                ("metadata.namespace", "default"),
                ("spec.clusterIP", "10.96.0.1"),
                ("spec.type", "ClusterIP"),
            ])
        );
        let rc = json!({"metadata": {"name": "r", "namespace": "ns"}, "status": {"replicas": 3}});
        assert_eq!(
            selectable_fields("", "ReplicationController", true, &[], &rc),
            map(&[
                ("metadata.name", "r"),
                ("metadata.namespace", "ns"),
                ("status.replicas", "3")
            ])
        );
        let job = json!({"metadata": {"name": "j", "namespace": "ns"}, "status": {}});
        assert_eq!(
            selectable_fields("batch", "Job", true, &[], &job),
            map(&[
                ("metadata.name", "j"),
                ("metadata.namespace", "ns"),
                ("status.successful", "0")
            ])
        );
        let cm = json!({"metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "v"}});
        assert_eq!(
            selectable_fields("", "ConfigMap", true, &[], &cm),
            map(&[("metadata.name", "c"), ("metadata.namespace", "ns")])
        );
        assert_eq!(
            selectable_fields("discovery.k8s.io", "EndpointSlice", true, &[], &cm),
            map(&[("metadata.name", "c"), ("metadata.namespace", "ns")])
        );
        assert_eq!(
            selectable_fields("rbac.authorization.k8s.io", "ClusterRole", false, &[], &cm),
            map(&[("metadata.name", "c")])
        );
        let csr = json!({"metadata": {"name": "csr-1"}, "spec": {"signerName": "kubernetes.io/kubelet-serving"}});
        assert_eq!(
            selectable_fields(
                "certificates.k8s.io",
                "CertificateSigningRequest",
                false,
                &[],
                &csr
            ),
            map(&[
                ("metadata.name", "csr-1"),
                ("spec.signerName", "kubernetes.io/kubelet-serving")
            ])
        );
    }

    #[test]
    fn event_selectable_fields() {
        let core = json!({
            "metadata": {"name": "p.17f", "namespace": "prod"},
            "involvedObject": {"kind": "Pod", "namespace": "prod", "name": "p", "uid": "u1", "apiVersion": "v1", "resourceVersion": "9", "fieldPath": "spec.containers{web}"},
            "reason": "BackOff", "type": "Warning",
            "source": {"component": "kubelet", "host": "node-a"},
            "reportingComponent": "kubelet-x"
        });
        let want = map(&[
            ("involvedObject.apiVersion", "v1"),
            ("involvedObject.fieldPath", "spec.containers{web}"),
            ("involvedObject.kind", "Pod"),
            ("involvedObject.name", "p"),
            ("involvedObject.namespace", "prod"),
            ("involvedObject.resourceVersion", "9"),
            ("involvedObject.uid", "u1"),
            ("metadata.name", "p.17f"),
            ("metadata.namespace", "prod"),
            ("reason", "BackOff"),
            ("reportingComponent", "kubelet-x"),
            ("source", "kubelet"),
            ("type", "Warning"),
        ]);
        assert_eq!(selectable_fields("", "Event", true, &[], &core), want);

        // The same event as events.k8s.io/v1 serves it; no source component: falls back to the
        // reporting controller.
        let ev = json!({
            "metadata": {"name": "p.17f", "namespace": "prod"},
            "regarding": {"kind": "Pod", "namespace": "prod", "name": "p", "uid": "u1", "apiVersion": "v1", "resourceVersion": "9", "fieldPath": "spec.containers{web}"},
            "reason": "BackOff", "type": "Warning",
            "reportingController": "kubelet-x"
        });
        let fields = selectable_fields("events.k8s.io", "Event", true, &[], &ev);
        let mut want2 = want.clone();
        for (k, v) in &mut want2 {
            if k == "source" {
                *v = "kubelet-x".into();
            }
        }
        assert_eq!(fields, want2);
        let sel = convert_field_selector(
            "events.k8s.io",
            "Event",
            true,
            &[],
            &FieldSelector::parse("regarding.name=p,reportingController=kubelet-x").unwrap(),
        )
        .unwrap();
        assert!(sel.matches_set(&fields));
    }

    #[test]
    fn go_sprint_formats() {
        let cases = [
            (json!("s"), Some("s")),
            (json!(true), Some("true")),
            (json!(42), Some("42")),
            (json!(-7), Some("-7")),
            (json!(1.0), Some("1")),
            (json!(1.5), Some("1.5")),
            (json!(0.0001), Some("0.0001")),
            (json!(0.00001), Some("1e-05")),
            (json!(999999.5), Some("999999.5")),
            (json!(1e6), Some("1e+06")),
            (json!(123456789.0), Some("1.23456789e+08")),
            (json!(1e21), Some("1e+21")),
            (json!(-2.5e-7), Some("-2.5e-07")),
            (
                json!(18446744073709551615u64),
                Some("1.8446744073709552e+19"),
            ),
            (json!(["a", 1, null]), Some("[a 1 <nil>]")),
            (json!({"b": 1, "a": "x"}), Some("map[a:x b:1]")),
            (json!(null), None),
        ];
        for (v, want) in cases {
            assert_eq!(go_sprint(&v).as_deref(), want, "{v}");
        }
    }
}
