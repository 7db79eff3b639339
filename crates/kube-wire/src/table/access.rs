//! Printers of the kinds that govern access to the API (rbac.authorization.k8s.io,
//! admissionregistration.k8s.io, certificates.k8s.io, flowcontrol.apiserver.k8s.io,
//! apiregistration.k8s.io, apiextensions.k8s.io), as kube 1.36 prints them: kube-apiserver's
//! `pkg/printers/internalversion/printers.go` for most, kube-aggregator's own `ConvertToTable`
//! (`pkg/registry/apiservice/etcd`) for APIServices.
//!
//! Same interface as [`super::workloads`]: [`Kind`], [`kind_for`], [`columns`], [`cells`];
//! [`KINDS`] lists the kinds printed here and [`GENERIC`] the kinds of this module's groups
//! that kube prints with its default convertor (`Name` + `Created At`): Roles and ClusterRoles
//! (printers.go has printers for their bindings only) and CustomResourceDefinitions
//! (apiextensions-apiserver's CRD storage uses `rest.NewDefaultTableConvertor`).
//!
//! Of the kinds kube 1.36 has printers for, ClusterTrustBundle and PodCertificateRequest are
//! left out: certificates.k8s.io serves them only from v1beta1 and v1alpha1, which are off by
//! default. MutatingAdmissionPolicy(Binding) is admissionregistration.k8s.io/v1 in 1.36, served
//! by default, so it is printed.
//!
//! Cells are read from the v1 JSON form as the apiserver decodes it, defaults included: a
//! FlowSchema without `matchingPrecedence` prints 1000, a Limited priority level without
//! `nominalConcurrencyShares` 30, a queuing configuration's zero fields 64, 8 and 50. Where
//! kube's printer puts a Go integer into a cell its JSON is a number, whatever the column's
//! declared type (FlowSchema and PriorityLevelConfiguration declare `string` columns and fill
//! some with numbers). Pure: no I/O; the clock is an argument.

use serde_json::{Value, json};

use super::cells::{arr, condition, join_strings, name_of, present, str_at, str_or};
use super::{age, age_col, human_duration, integer, name_col, text, wide};

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";
const CERTIFICATES: &str = "certificates.k8s.io";
const FLOWCONTROL: &str = "flowcontrol.apiserver.k8s.io";
const APIREGISTRATION: &str = "apiregistration.k8s.io";
const APIEXTENSIONS: &str = "apiextensions.k8s.io";

// Column descriptions. The swagger docs are k8s.io/api's as printers.go names them in 1.36
// (rbac/v1beta1, certificates/v1beta1, flowcontrol/v1); the others are literal in printers.go
// or in kube-aggregator.
const D_RB_ROLE: &str = "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.";
const D_CRB_ROLE: &str = "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.";
const D_CSR_SIGNER: &str = "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`. If empty, it will be defaulted:\n 1. If it's a kubelet client certificate, it is assigned\n    \"kubernetes.io/kube-apiserver-client-kubelet\".\n 2. If it's a kubelet serving certificate, it is assigned\n    \"kubernetes.io/kubelet-serving\".\n 3. Otherwise, it is assigned \"kubernetes.io/legacy-unknown\".\nDistribution of trust for signers happens out of band. You can select on this field using `spec.signerName`.";
const D_CSR_REQUEST: &str = "Base64-encoded PKCS#10 CSR data";
const D_CSR_DURATION: &str = "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.\n\nThe v1.22+ in-tree implementations of the well-known Kubernetes signers will honor this field as long as the requested duration is not greater than the maximum duration they will honor per the --cluster-signing-duration CLI flag to the Kubernetes controller manager.\n\nCertificate signers may not honor this field for various reasons:\n\n  1. Old signer that is unaware of the field (such as the in-tree\n     implementations prior to v1.22)\n  2. Signer whose configured maximum is shorter than the requested duration\n  3. Signer whose configured minimum is longer than the requested duration\n\nThe minimum valid value for expirationSeconds is 600, i.e. 10 minutes.";
const D_CSR_CONDITIONS: &str = "Conditions applied to the request, such as approval or denial.";
const D_FS_PRIORITY_LEVEL: &str =
    "`name` is the name of the priority level configuration being referenced Required.";
const D_FS_PRECEDENCE: &str = "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default.";
const D_FS_DISTINGUISHER: &str = "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string.";
const D_PL_TYPE: &str = "`type` indicates whether this priority level is subject to limitation on request execution.  A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `\"Limited\"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server's limited capacity is made available exclusively to this priority level. Required.";
const D_PL_SHARES: &str = "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level. This is the number of execution seats available at this priority level. This is used both for requests dispatched from this priority level as well as requests dispatched from other priority levels borrowing seats from this level. The server's concurrency limit (ServerCL) is divided among the Limited priority levels in proportion to their NCS values:\n\nNominalCL(i)  = ceil( ServerCL * NCS(i) / sum_ncs ) sum_ncs = sum[priority level k] NCS(k)\n\nBigger numbers mean a larger nominal concurrency limit, at the expense of every other priority level.\n\nIf not specified, this field defaults to a value of 30.\n\nSetting this field to zero supports the construction of a \"jail\" for this priority level that is used to hold some request(s)";
const D_PL_QUEUES: &str = "`queues` is the number of queues for this priority level. The queues exist independently at each apiserver. The value must be positive.  Setting it to 1 effectively precludes shufflesharding and thus makes the distinguisher method of associated flow schemas irrelevant.  This field has a default value of 64.";
const D_PL_HAND_SIZE: &str = "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.  When enqueuing a request at this priority level the request's flow identifier (a string pair) is hashed and the hash value is used to shuffle the list of queues and deal a hand of the size specified here.  The request is put into one of the shortest queues in that hand. `handSize` must be no larger than `queues`, and should be significantly smaller (so that a few heavy flows do not saturate most of the queues).  See the user-facing documentation for more extensive guidance on setting this field.  This field has a default value of 8.";
const D_PL_QUEUE_LENGTH: &str = "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected.  This value must be positive.  If not specified, it will be defaulted to 50.";
const D_RB_USERS: &str = "Users in the roleBinding";
const D_RB_GROUPS: &str = "Groups in the roleBinding";
const D_RB_SAS: &str = "ServiceAccounts in the roleBinding";
const D_CRB_USERS: &str = "Users in the clusterRoleBinding";
const D_CRB_GROUPS: &str = "Groups in the clusterRoleBinding";
const D_CRB_SAS: &str = "ServiceAccounts in the clusterRoleBinding";
const D_WEBHOOKS: &str =
    "Webhooks indicates the number of webhooks registered in this configuration";
const D_VALIDATIONS: &str =
    "Validations indicates the number of validation rules defined in this configuration";
const D_MUTATIONS: &str =
    "Mutation indicates the number of mutations rules defined in this configuration";
const D_PARAM_KIND: &str =
    "ParamKind specifies the kind of resources used to parameterize this policy";
const D_POLICY_NAME: &str =
    "PolicyName indicates the policy definition which the policy binding binded to";
const D_PARAM_REF: &str =
    "ParamRef indicates the param resource which sets the configuration param";
const D_FS_MISSING_PL: &str = "references a broken or non-existent PriorityLevelConfiguration";
const D_APISERVICE_SERVICE: &str = "The reference to the service that hosts this API endpoint.";
const D_APISERVICE_AVAILABLE: &str = "Whether this service is available.";

// v1 defaults (pkg/apis/flowcontrol/v1/defaults.go).
const DEFAULT_MATCHING_PRECEDENCE: i64 = 1000;
const DEFAULT_NOMINAL_CONCURRENCY_SHARES: i64 = 30;
const DEFAULT_QUEUES: i64 = 64;
const DEFAULT_HAND_SIZE: i64 = 8;
const DEFAULT_QUEUE_LENGTH_LIMIT: i64 = 50;

/// The kinds printed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    RoleBinding,
    ClusterRoleBinding,
    CertificateSigningRequest,
    MutatingWebhookConfiguration,
    ValidatingWebhookConfiguration,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    MutatingAdmissionPolicy,
    MutatingAdmissionPolicyBinding,
    FlowSchema,
    PriorityLevelConfiguration,
    ApiService,
}

/// Every (group, kind) printed here.
pub(super) const KINDS: &[(&str, &str)] = &[
    (RBAC, "RoleBinding"),
    (RBAC, "ClusterRoleBinding"),
    (CERTIFICATES, "CertificateSigningRequest"),
    (ADMISSION, "MutatingWebhookConfiguration"),
    (ADMISSION, "ValidatingWebhookConfiguration"),
    (ADMISSION, "ValidatingAdmissionPolicy"),
    (ADMISSION, "ValidatingAdmissionPolicyBinding"),
    (ADMISSION, "MutatingAdmissionPolicy"),
    (ADMISSION, "MutatingAdmissionPolicyBinding"),
    (FLOWCONTROL, "FlowSchema"),
    (FLOWCONTROL, "PriorityLevelConfiguration"),
    (APIREGISTRATION, "APIService"),
];

/// The (group, kind)s of this module's groups that kube prints with the default convertor.
pub(super) const GENERIC: &[(&str, &str)] = &[
    (RBAC, "Role"),
    (RBAC, "ClusterRole"),
    (APIEXTENSIONS, "CustomResourceDefinition"),
];

/// The kind printed for `(group, kind)`, if it is one of this module's.
pub(super) fn kind_for(group: &str, kind: &str) -> Option<Kind> {
    Some(match (group, kind) {
        (RBAC, "RoleBinding") => Kind::RoleBinding,
        (RBAC, "ClusterRoleBinding") => Kind::ClusterRoleBinding,
        (CERTIFICATES, "CertificateSigningRequest") => Kind::CertificateSigningRequest,
        (ADMISSION, "MutatingWebhookConfiguration") => Kind::MutatingWebhookConfiguration,
        (ADMISSION, "ValidatingWebhookConfiguration") => Kind::ValidatingWebhookConfiguration,
        (ADMISSION, "ValidatingAdmissionPolicy") => Kind::ValidatingAdmissionPolicy,
        (ADMISSION, "ValidatingAdmissionPolicyBinding") => Kind::ValidatingAdmissionPolicyBinding,
        (ADMISSION, "MutatingAdmissionPolicy") => Kind::MutatingAdmissionPolicy,
        (ADMISSION, "MutatingAdmissionPolicyBinding") => Kind::MutatingAdmissionPolicyBinding,
        (FLOWCONTROL, "FlowSchema") => Kind::FlowSchema,
        (FLOWCONTROL, "PriorityLevelConfiguration") => Kind::PriorityLevelConfiguration,
        (APIREGISTRATION, "APIService") => Kind::ApiService,
        _ => return None,
    })
}

/// The columns of a RoleBinding or a ClusterRoleBinding.
fn binding_columns(role: &str, users: &str, groups: &str, sas: &str) -> Vec<Value> {
    vec![
        name_col(),
        text("Role", role),
        age_col(),
        wide("Users", users),
        wide("Groups", groups),
        wide("ServiceAccounts", sas),
    ]
}

/// The columns of a validating or mutating admission policy binding.
fn policy_binding_columns() -> Vec<Value> {
    vec![
        name_col(),
        text("PolicyName", D_POLICY_NAME),
        text("ParamRef", D_PARAM_REF),
        age_col(),
    ]
}

/// Whether kube writes `kind`'s column definitions even when asked for none (`noHeaders`, every
/// watch event after the first): kube-aggregator's APIService convertor never reads its table
/// options (`pkg/registry/apiservice/etcd` `ConvertToTable`), unlike the printers.
pub(super) fn ignores_no_headers(kind: Kind) -> bool {
    kind == Kind::ApiService
}

/// The column definitions of `kind`.
pub(super) fn columns(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::RoleBinding => binding_columns(D_RB_ROLE, D_RB_USERS, D_RB_GROUPS, D_RB_SAS),
        Kind::ClusterRoleBinding => {
            binding_columns(D_CRB_ROLE, D_CRB_USERS, D_CRB_GROUPS, D_CRB_SAS)
        }
        // kube puts Age second for CertificateSigningRequests.
        Kind::CertificateSigningRequest => vec![
            name_col(),
            age_col(),
            text("SignerName", D_CSR_SIGNER),
            text("Requestor", D_CSR_REQUEST),
            text("RequestedDuration", D_CSR_DURATION),
            text("Condition", D_CSR_CONDITIONS),
        ],
        Kind::MutatingWebhookConfiguration | Kind::ValidatingWebhookConfiguration => {
            vec![name_col(), integer("Webhooks", D_WEBHOOKS), age_col()]
        }
        Kind::ValidatingAdmissionPolicy => vec![
            name_col(),
            integer("Validations", D_VALIDATIONS),
            text("ParamKind", D_PARAM_KIND),
            age_col(),
        ],
        Kind::MutatingAdmissionPolicy => vec![
            name_col(),
            integer("Mutations", D_MUTATIONS),
            text("ParamKind", D_PARAM_KIND),
            age_col(),
        ],
        Kind::ValidatingAdmissionPolicyBinding | Kind::MutatingAdmissionPolicyBinding => {
            policy_binding_columns()
        }
        Kind::FlowSchema => vec![
            name_col(),
            text("PriorityLevel", D_FS_PRIORITY_LEVEL),
            text("MatchingPrecedence", D_FS_PRECEDENCE),
            text("DistinguisherMethod", D_FS_DISTINGUISHER),
            age_col(),
            text("MissingPL", D_FS_MISSING_PL),
        ],
        Kind::PriorityLevelConfiguration => vec![
            name_col(),
            text("Type", D_PL_TYPE),
            text("NominalConcurrencyShares", D_PL_SHARES),
            text("Queues", D_PL_QUEUES),
            text("HandSize", D_PL_HAND_SIZE),
            text("QueueLengthLimit", D_PL_QUEUE_LENGTH),
            age_col(),
        ],
        Kind::ApiService => vec![
            name_col(),
            text("Service", D_APISERVICE_SERVICE),
            text("Available", D_APISERVICE_AVAILABLE),
            age_col(),
        ],
    }
}

/// One row's cells for `obj`, one per column of [`columns`] (wide ones included).
pub(super) fn cells(kind: Kind, obj: &Value, now: i64) -> Vec<Value> {
    match kind {
        Kind::RoleBinding | Kind::ClusterRoleBinding => binding_cells(obj, now),
        Kind::CertificateSigningRequest => csr_cells(obj, now),
        Kind::MutatingWebhookConfiguration | Kind::ValidatingWebhookConfiguration => vec![
            json!(name_of(obj)),
            json!(arr(obj.get("webhooks")).len()),
            json!(age(obj, now)),
        ],
        Kind::ValidatingAdmissionPolicy => policy_cells(obj, "/spec/validations", now),
        Kind::MutatingAdmissionPolicy => policy_cells(obj, "/spec/mutations", now),
        Kind::ValidatingAdmissionPolicyBinding | Kind::MutatingAdmissionPolicyBinding => vec![
            json!(name_of(obj)),
            json!(str_at(obj, "/spec/policyName")),
            json!(param_ref(obj.pointer("/spec/paramRef"))),
            json!(age(obj, now)),
        ],
        Kind::FlowSchema => flow_schema_cells(obj, now),
        Kind::PriorityLevelConfiguration => priority_level_cells(obj, now),
        Kind::ApiService => vec![
            json!(name_of(obj)),
            json!(api_service_service(obj)),
            json!(api_service_available(obj)),
            json!(age(obj, now)),
        ],
    }
}

/// A RoleBinding's or ClusterRoleBinding's cells: `kind/name` of its role, and in wide mode its
/// subjects by kind (`rbac.SubjectsStrings`: users and groups by name, service accounts as
/// `namespace/name`, subjects of any other kind left out), each list joined by `, `.
fn binding_cells(obj: &Value, now: i64) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        str_at(obj, "/roleRef/kind"),
        str_at(obj, "/roleRef/name")
    );
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in arr(obj.get("subjects")) {
        let name = str_at(s, "/name");
        match str_at(s, "/kind") {
            "ServiceAccount" => sas.push(format!("{}/{name}", str_at(s, "/namespace"))),
            "User" => users.push(name.to_string()),
            "Group" => groups.push(name.to_string()),
            _ => {}
        }
    }
    vec![
        json!(name_of(obj)),
        json!(role),
        json!(age(obj, now)),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(sas.join(", ")),
    ]
}

/// A CertificateSigningRequest's cells: age second, then the signer (`<none>` if empty), the
/// requesting user, the requested duration (`<none>` if unset) and the condition summary.
fn csr_cells(obj: &Value, now: i64) -> Vec<Value> {
    let signer = str_or(obj.pointer("/spec/signerName"), "<none>");
    let duration = match obj
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
    {
        Some(secs) => human_duration(secs),
        None => "<none>".to_string(),
    };
    vec![
        json!(name_of(obj)),
        json!(age(obj, now)),
        json!(signer),
        json!(str_at(obj, "/spec/username")),
        json!(duration),
        json!(csr_status(obj)),
    ]
}

/// kube's `extractCSRStatus`: `Denied`, else `Approved`, else `Pending` (by the conditions'
/// types, whatever their status), then `,Failed` for a Failed condition and `,Issued` once a
/// certificate is set.
fn csr_status(obj: &Value) -> String {
    let conditions = arr(obj.pointer("/status/conditions"));
    let has = |ty: &str| conditions.iter().any(|c| str_at(c, "/type") == ty);
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !str_at(obj, "/status/certificate").is_empty() {
        status.push_str(",Issued");
    }
    status
}

/// A validating or mutating admission policy's cells: how many rules `rules_path` holds, and
/// its `paramKind` as `apiVersion/kind` (`<unset>` without one).
fn policy_cells(obj: &Value, rules_path: &str, now: i64) -> Vec<Value> {
    let param_kind = match present(obj.pointer("/spec/paramKind")) {
        Some(p) => format!("{}/{}", str_at(p, "/apiVersion"), str_at(p, "/kind")),
        None => "<unset>".to_string(),
    };
    vec![
        json!(name_of(obj)),
        json!(arr(obj.pointer(rules_path)).len()),
        json!(param_kind),
        json!(age(obj, now)),
    ]
}

/// An admission policy binding's `paramRef`: `namespace/name` (`*/name` without a namespace,
/// since kube cannot tell whether the param is cluster-scoped), else its selector as Go's
/// generated `LabelSelector.String()` prints it, else `<unset>`.
fn param_ref(param: Option<&Value>) -> String {
    let Some(p) = present(param) else {
        return "<unset>".to_string();
    };
    let name = str_at(p, "/name");
    if !name.is_empty() {
        return match str_at(p, "/namespace") {
            "" => format!("*/{name}"),
            ns => format!("{ns}/{name}"),
        };
    }
    match present(p.get("selector")) {
        Some(sel) => label_selector_go_string(sel),
        None => "<unset>".to_string(),
    }
}

/// The gogo-protobuf `String()` of a `metav1.LabelSelector`:
/// `&LabelSelector{MatchLabels:map[string]string{k: v,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[a b],},},}`
/// with the labels sorted by key.
fn label_selector_go_string(sel: &Value) -> String {
    let mut labels: Vec<(&str, &str)> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    labels.sort_unstable();
    let mut s = String::from("&LabelSelector{MatchLabels:map[string]string{");
    for (k, v) in labels {
        s.push_str(&format!("{k}: {v},"));
    }
    s.push_str("},MatchExpressions:[]LabelSelectorRequirement{");
    for e in arr(sel.get("matchExpressions")) {
        s.push_str(&format!(
            "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
            str_at(e, "/key"),
            str_at(e, "/operator"),
            join_strings(arr(e.get("values")), " ")
        ));
    }
    s.push_str("},}");
    s
}

/// An integer field with its v1 default: `default` when missing, `null` or zero (Go's
/// defaulters test the decoded zero value).
fn int_or_default(v: Option<&Value>, default: i64) -> i64 {
    match v.and_then(Value::as_i64) {
        Some(n) if n != 0 => n,
        _ => default,
    }
}

/// A FlowSchema's cells: its priority level, its matching precedence (a number; 1000 when
/// unset), its distinguisher method's type (`<none>` without one), age, and the status of its
/// `Dangling` condition (`?` without one).
fn flow_schema_cells(obj: &Value, now: i64) -> Vec<Value> {
    let precedence = int_or_default(
        obj.pointer("/spec/matchingPrecedence"),
        DEFAULT_MATCHING_PRECEDENCE,
    );
    let distinguisher = match present(obj.pointer("/spec/distinguisherMethod")) {
        Some(d) => str_at(d, "/type"),
        None => "<none>",
    };
    let missing = condition(arr(obj.pointer("/status/conditions")), "Dangling")
        .map_or("?", |c| str_at(c, "/status"));
    vec![
        json!(name_of(obj)),
        json!(str_at(obj, "/spec/priorityLevelConfiguration/name")),
        json!(precedence),
        json!(distinguisher),
        json!(age(obj, now)),
        json!(missing),
    ]
}

/// A PriorityLevelConfiguration's cells: its type, then for a Limited level its nominal
/// concurrency shares and, when it queues, its queues, hand size and queue length limit, as
/// numbers with their v1 defaults; `<none>` for what the level does not have.
fn priority_level_cells(obj: &Value, now: i64) -> Vec<Value> {
    let none = || json!("<none>");
    let (mut shares, mut queues, mut hand_size, mut queue_length) =
        (none(), none(), none(), none());
    if let Some(limited) = present(obj.pointer("/spec/limited")) {
        // nominalConcurrencyShares is a pointer in v1: only an unset one defaults, 0 stays 0.
        shares = json!(
            present(limited.get("nominalConcurrencyShares"))
                .and_then(Value::as_i64)
                .unwrap_or(DEFAULT_NOMINAL_CONCURRENCY_SHARES)
        );
        if let Some(q) = present(limited.pointer("/limitResponse/queuing")) {
            queues = json!(int_or_default(q.get("queues"), DEFAULT_QUEUES));
            hand_size = json!(int_or_default(q.get("handSize"), DEFAULT_HAND_SIZE));
            queue_length = json!(int_or_default(
                q.get("queueLengthLimit"),
                DEFAULT_QUEUE_LENGTH_LIMIT
            ));
        }
    }
    vec![
        json!(name_of(obj)),
        json!(str_at(obj, "/spec/type")),
        shares,
        queues,
        hand_size,
        queue_length,
        json!(age(obj, now)),
    ]
}

/// An APIService's `Service`: `namespace/name` of the service behind it, `Local` when the
/// group is served by kube-apiserver itself.
fn api_service_service(obj: &Value) -> String {
    match present(obj.pointer("/spec/service")) {
        Some(s) => format!("{}/{}", str_at(s, "/namespace"), str_at(s, "/name")),
        None => "Local".to_string(),
    }
}

/// An APIService's `Available`: the status of its first `Available` condition, with the
/// reason in parentheses when it is not `True` and has one; `Unknown` without the condition.
fn api_service_available(obj: &Value) -> String {
    let Some(c) = condition(arr(obj.pointer("/status/conditions")), "Available") else {
        return "Unknown".to_string();
    };
    let status = str_at(c, "/status");
    let reason = str_at(c, "/reason");
    if status == "True" || reason.is_empty() {
        status.to_string()
    } else {
        format!("{status} ({reason})")
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{NOW, bare_row, ts, typed, typed_cols};
    use super::super::{column_definitions, has_printer, printed_kinds, row_cells};
    use super::*;

    #[test]
    fn printed_and_generic_kinds() {
        for (g, k) in KINDS.iter().chain(GENERIC) {
            assert!(has_printer(g, k), "{g} {k}");
            assert!(printed_kinds().contains(&(*g, *k)), "{g} {k}");
        }
        for (g, k) in GENERIC {
            assert!(kind_for(g, k).is_none(), "{g} {k}");
            assert_eq!(
                typed(g, k),
                typed_cols(&[("Name", "string", 0), ("Created At", "date", 0)])
            );
            let role =
                json!({"metadata": {"name": "view", "creationTimestamp": "2024-05-01T10:00:00Z"}});
            assert_eq!(
                row_cells(g, k, &role, NOW),
                json!(["view", "2024-05-01T10:00:00Z"])
            );
        }
        // Served only from versions that are off by default.
        assert!(!has_printer(CERTIFICATES, "ClusterTrustBundle"));
        assert!(!has_printer(CERTIFICATES, "PodCertificateRequest"));
    }

    #[test]
    fn role_binding_columns_and_cells() {
        let binding_shape = typed_cols(&[
            ("Name", "string", 0),
            ("Role", "string", 0),
            ("Age", "string", 0),
            ("Users", "string", 1),
            ("Groups", "string", 1),
            ("ServiceAccounts", "string", 1),
        ]);
        assert_eq!(typed(RBAC, "RoleBinding"), binding_shape);
        assert_eq!(typed(RBAC, "ClusterRoleBinding"), binding_shape);
        let rb = column_definitions(RBAC, "RoleBinding");
        let crb = column_definitions(RBAC, "ClusterRoleBinding");
        assert_eq!(rb[0]["format"], "name");
        assert_eq!(rb[1]["description"], D_RB_ROLE);
        assert_eq!(crb[1]["description"], D_CRB_ROLE);
        assert_eq!(rb[3]["description"], "Users in the roleBinding");
        assert_eq!(
            crb[5]["description"],
            "ServiceAccounts in the clusterRoleBinding"
        );

        let binding = json!({
            "metadata": {"name": "dev-edit", "namespace": "dev", "creationTimestamp": ts(3600)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "ServiceAccount", "name": "ci", "namespace": "dev"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"},
                {"kind": "Robot", "name": "r2"},
                {"kind": "ServiceAccount", "name": "deployer"}
            ]
        });
        let expected = json!([
            "dev-edit",
            "ClusterRole/edit",
            "60m",
            "alice, bob",
            "devs",
            "dev/ci, /deployer"
        ]);
        assert_eq!(row_cells(RBAC, "RoleBinding", &binding, NOW), expected);
        assert_eq!(
            row_cells(RBAC, "ClusterRoleBinding", &binding, NOW),
            expected
        );
        for kind in ["RoleBinding", "ClusterRoleBinding"] {
            assert_eq!(
                bare_row(RBAC, kind),
                json!(["x", "/", "<unknown>", "", "", ""])
            );
        }
    }

    #[test]
    fn certificate_signing_request_cells() {
        assert_eq!(
            typed(CERTIFICATES, "CertificateSigningRequest"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Age", "string", 0),
                ("SignerName", "string", 0),
                ("Requestor", "string", 0),
                ("RequestedDuration", "string", 0),
                ("Condition", "string", 0)
            ])
        );
        let defs = column_definitions(CERTIFICATES, "CertificateSigningRequest");
        assert_eq!(defs[3]["description"], "Base64-encoded PKCS#10 CSR data");
        assert_eq!(defs[5]["description"], D_CSR_CONDITIONS);
        let csr = json!({
            "metadata": {"name": "csr-8fj2k", "creationTimestamp": ts(90)},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                     "username": "system:node:node-1", "expirationSeconds": 86400,
                     "request": "LS0t", "usages": ["client auth"]},
            "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved"}],
                       "certificate": "LS0tLS1CRUdJTg=="}
        });
        assert_eq!(
            row_cells(CERTIFICATES, "CertificateSigningRequest", &csr, NOW),
            json!([
                "csr-8fj2k",
                "90s",
                "kubernetes.io/kube-apiserver-client-kubelet",
                "system:node:node-1",
                "24h",
                "Approved,Issued"
            ])
        );
        let status = |conditions: Value| {
            let o = json!({"metadata": {"name": "c"}, "status": {"conditions": conditions}});
            row_cells(CERTIFICATES, "CertificateSigningRequest", &o, NOW)[5].clone()
        };
        assert_eq!(
            status(json!([{"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}])),
            "Denied,Failed"
        );
        assert_eq!(
            status(json!([{"type": "Failed", "status": "True"}])),
            "Pending,Failed"
        );
        assert_eq!(
            bare_row(CERTIFICATES, "CertificateSigningRequest"),
            json!(["x", "<unknown>", "<none>", "", "<none>", "Pending"])
        );
        let short = json!({"metadata": {"name": "c"}, "spec": {"expirationSeconds": 600}});
        assert_eq!(
            row_cells(CERTIFICATES, "CertificateSigningRequest", &short, NOW)[4],
            "10m"
        );
    }

    #[test]
    fn webhook_configurations_count_their_webhooks() {
        for kind in [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ] {
            assert_eq!(
                typed(ADMISSION, kind),
                typed_cols(&[
                    ("Name", "string", 0),
                    ("Webhooks", "integer", 0),
                    ("Age", "string", 0)
                ])
            );
            assert_eq!(
                column_definitions(ADMISSION, kind)[1]["description"],
                D_WEBHOOKS
            );
            let cfg = json!({"metadata": {"name": "policy-hooks", "creationTimestamp": ts(30)},
                             "webhooks": [{"name": "a.example.com"}, {"name": "b.example.com"}]});
            assert_eq!(
                row_cells(ADMISSION, kind, &cfg, NOW),
                json!(["policy-hooks", 2, "30s"])
            );
            assert_eq!(bare_row(ADMISSION, kind), json!(["x", 0, "<unknown>"]));
        }
    }

    #[test]
    fn admission_policy_cells() {
        assert_eq!(
            typed(ADMISSION, "ValidatingAdmissionPolicy"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Validations", "integer", 0),
                ("ParamKind", "string", 0),
                ("Age", "string", 0)
            ])
        );
        assert_eq!(
            typed(ADMISSION, "MutatingAdmissionPolicy"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Mutations", "integer", 0),
                ("ParamKind", "string", 0),
                ("Age", "string", 0)
            ])
        );
        let vap = json!({
            "metadata": {"name": "replicas-limit", "creationTimestamp": ts(120)},
            "spec": {"paramKind": {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
                     "validations": [{"expression": "object.spec.replicas <= params.maxReplicas"},
                                     {"expression": "true"}, {"expression": "true"}]}
        });
        assert_eq!(
            row_cells(ADMISSION, "ValidatingAdmissionPolicy", &vap, NOW),
            json!([
                "replicas-limit",
                3,
                "rules.example.com/v1/ReplicaLimit",
                "2m"
            ])
        );
        let map = json!({
            "metadata": {"name": "sidecar", "creationTimestamp": ts(120)},
            "spec": {"mutations": [{"patchType": "ApplyConfiguration"}], "reinvocationPolicy": "Never"}
        });
        assert_eq!(
            row_cells(ADMISSION, "MutatingAdmissionPolicy", &map, NOW),
            json!(["sidecar", 1, "<unset>", "2m"])
        );
        for kind in ["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"] {
            assert_eq!(
                bare_row(ADMISSION, kind),
                json!(["x", 0, "<unset>", "<unknown>"])
            );
        }
    }

    #[test]
    fn admission_policy_binding_cells() {
        for kind in [
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicyBinding",
        ] {
            assert_eq!(
                typed(ADMISSION, kind),
                typed_cols(&[
                    ("Name", "string", 0),
                    ("PolicyName", "string", 0),
                    ("ParamRef", "string", 0),
                    ("Age", "string", 0)
                ])
            );
            let defs = column_definitions(ADMISSION, kind);
            assert_eq!(defs[1]["description"], D_POLICY_NAME);
            assert_eq!(defs[2]["description"], D_PARAM_REF);
            let binding = |param_ref: Value| {
                json!({"metadata": {"name": "limit-prod", "creationTimestamp": ts(5)},
                       "spec": {"policyName": "replicas-limit", "paramRef": param_ref,
                                "validationActions": ["Deny"]}})
            };
            let cells = |param_ref: Value| row_cells(ADMISSION, kind, &binding(param_ref), NOW);
            assert_eq!(
                cells(
                    json!({"name": "limits", "namespace": "prod", "parameterNotFoundAction": "Deny"})
                ),
                json!(["limit-prod", "replicas-limit", "prod/limits", "5s"])
            );
            assert_eq!(cells(json!({"name": "limits"}))[2], "*/limits");
            assert_eq!(
                cells(json!({"selector": {
                "matchLabels": {"tier": "prod", "env": "a b"},
                "matchExpressions": [
                    {"key": "team", "operator": "In", "values": ["x", "y"]},
                    {"key": "gone", "operator": "DoesNotExist"}
                ]}}))[2],
                "&LabelSelector{MatchLabels:map[string]string{env: a b,tier: prod,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:team,Operator:In,Values:[x y],},LabelSelectorRequirement{Key:gone,Operator:DoesNotExist,Values:[],},},}"
            );
            assert_eq!(
                cells(json!({"selector": {}}))[2],
                "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}"
            );
            assert_eq!(cells(json!({"namespace": "prod"}))[2], "<unset>");
            assert_eq!(cells(Value::Null)[2], "<unset>");
            assert_eq!(
                bare_row(ADMISSION, kind),
                json!(["x", "", "<unset>", "<unknown>"])
            );
        }
    }

    #[test]
    fn flow_schema_cells_are_numbers_where_kube_puts_integers() {
        assert_eq!(
            typed(FLOWCONTROL, "FlowSchema"),
            typed_cols(&[
                ("Name", "string", 0),
                ("PriorityLevel", "string", 0),
                ("MatchingPrecedence", "string", 0),
                ("DistinguisherMethod", "string", 0),
                ("Age", "string", 0),
                ("MissingPL", "string", 0)
            ])
        );
        let defs = column_definitions(FLOWCONTROL, "FlowSchema");
        assert_eq!(defs[1]["description"], D_FS_PRIORITY_LEVEL);
        assert_eq!(defs[5]["description"], D_FS_MISSING_PL);
        let fs = json!({
            "metadata": {"name": "kube-controller-manager", "creationTimestamp": ts(86_400 * 10)},
            "spec": {"priorityLevelConfiguration": {"name": "workload-high"},
                     "matchingPrecedence": 800,
                     "distinguisherMethod": {"type": "ByNamespace"},
                     "rules": []},
            "status": {"conditions": [{"type": "Dangling", "status": "False", "reason": "Found"}]}
        });
        assert_eq!(
            row_cells(FLOWCONTROL, "FlowSchema", &fs, NOW),
            json!([
                "kube-controller-manager",
                "workload-high",
                800,
                "ByNamespace",
                "10d",
                "False"
            ])
        );
        assert_eq!(
            bare_row(FLOWCONTROL, "FlowSchema"),
            json!(["x", "", 1000, "<none>", "<unknown>", "?"])
        );
    }

    #[test]
    fn priority_level_cells_default_as_v1_does() {
        let defs = column_definitions(FLOWCONTROL, "PriorityLevelConfiguration");
        assert_eq!(
            typed(FLOWCONTROL, "PriorityLevelConfiguration"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Type", "string", 0),
                ("NominalConcurrencyShares", "string", 0),
                ("Queues", "string", 0),
                ("HandSize", "string", 0),
                ("QueueLengthLimit", "string", 0),
                ("Age", "string", 0)
            ])
        );
        assert_eq!(defs[4]["description"], D_PL_HAND_SIZE);
        let limited = json!({
            "metadata": {"name": "workload-low", "creationTimestamp": ts(60)},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 100, "lendablePercent": 90,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}
        });
        assert_eq!(
            row_cells(FLOWCONTROL, "PriorityLevelConfiguration", &limited, NOW),
            json!(["workload-low", "Limited", 100, 128, 6, 50, "60s"])
        );
        let defaulted = json!({"metadata": {"name": "d"},
                               "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {"queues": 0}}}}});
        assert_eq!(
            row_cells(FLOWCONTROL, "PriorityLevelConfiguration", &defaulted, NOW),
            json!(["d", "Limited", 30, 64, 8, 50, "<unknown>"])
        );
        let jail = json!({"metadata": {"name": "j"},
                          "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0, "limitResponse": {"type": "Reject"}}}});
        assert_eq!(
            row_cells(FLOWCONTROL, "PriorityLevelConfiguration", &jail, NOW),
            json!(["j", "Limited", 0, "<none>", "<none>", "<none>", "<unknown>"])
        );
        let exempt = json!({"metadata": {"name": "exempt"},
                            "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0}}});
        assert_eq!(
            row_cells(FLOWCONTROL, "PriorityLevelConfiguration", &exempt, NOW),
            json!([
                "exempt",
                "Exempt",
                "<none>",
                "<none>",
                "<none>",
                "<none>",
                "<unknown>"
            ])
        );
        assert_eq!(
            bare_row(FLOWCONTROL, "PriorityLevelConfiguration"),
            json!(["x", "", "<none>", "<none>", "<none>", "<none>", "<unknown>"])
        );
    }

    #[test]
    fn api_service_cells() {
        assert_eq!(
            typed(APIREGISTRATION, "APIService"),
            typed_cols(&[
                ("Name", "string", 0),
                ("Service", "string", 0),
                ("Available", "string", 0),
                ("Age", "string", 0)
            ])
        );
        let defs = column_definitions(APIREGISTRATION, "APIService");
        assert_eq!(defs[0]["format"], "name");
        assert_eq!(defs[1]["description"], D_APISERVICE_SERVICE);
        let aggregated = json!({
            "metadata": {"name": "v1beta1.metrics.k8s.io", "creationTimestamp": ts(600)},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server", "port": 443},
                     "group": "metrics.k8s.io", "version": "v1beta1",
                     "groupPriorityMinimum": 100, "versionPriority": 100},
            "status": {"conditions": [{"type": "Available", "status": "False",
                                       "reason": "MissingEndpoints", "message": "endpoints for service/metrics-server in \"kube-system\" have no addresses"}]}
        });
        assert_eq!(
            row_cells(APIREGISTRATION, "APIService", &aggregated, NOW),
            json!([
                "v1beta1.metrics.k8s.io",
                "kube-system/metrics-server",
                "False (MissingEndpoints)",
                "10m"
            ])
        );
        let local = json!({
            "metadata": {"name": "v1.apps", "creationTimestamp": ts(600)},
            "spec": {"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}
        });
        assert_eq!(
            row_cells(APIREGISTRATION, "APIService", &local, NOW),
            json!(["v1.apps", "Local", "True", "10m"])
        );
        let no_reason = json!({"metadata": {"name": "a"},
                               "status": {"conditions": [{"type": "Other", "status": "True"},
                                                         {"type": "Available", "status": "Unknown"}]}});
        assert_eq!(
            row_cells(APIREGISTRATION, "APIService", &no_reason, NOW)[2],
            "Unknown"
        );
        assert_eq!(
            bare_row(APIREGISTRATION, "APIService"),
            json!(["x", "Local", "Unknown", "<unknown>"])
        );
    }
}
