//! Per-kind write semantics ("registry strategies" in kube-apiserver): defaulting, validation,
//! what create/update/delete do to metadata, status subresources, graceful deletion, finalizers.
//!
//! Each function here works on JSON values and the store's read-only view: no I/O, no locks, no
//! tasks (it does read the clock and draw uids and generated names). [`Ops`](super::ops::Ops)
//! runs the decisions (`decide_update`, `decide_delete`, `check_namespace`) inside a store write
//! so that the decision and the commit are one atomic step; the simulated controllers that finish
//! a graceful or namespace deletion live there too.
//!
//! The workload kinds (`apps/v1`, `batch/v1`, `coordination.k8s.io/v1` Lease) have their
//! strategies, defaulters and validation in the `workloads` submodule; the other built-in kinds'
//! generation, defaults, initial status and update rules are in `rules` (with `defaults` and
//! `status`).

use serde_json::{Map, Value, json};

use super::kinds::ResourceType;
use super::store::{Action, StoredObject, WriteView};
use super::util::{generate_name_suffix, new_uid, now_unix, rfc3339};
use base64::Engine;
use kube_wire::status::{Status, StatusCause, StatusDetails};

pub mod crds;
mod defaults;
mod rules;
mod status;
mod workloads;

/// Options of a DELETE (query parameters or a DeleteOptions body).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_rv: Option<String>,
}

/// What a delete decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteKind {
    /// Gone now.
    Immediate,
    /// Marked with a deletionTimestamp; a simulated kubelet finishes it after this many seconds.
    GracefulPod(i64),
    /// Waiting for finalizers to be removed.
    Finalizers,
    /// Namespace marked Terminating; the simulated namespace controller empties and deletes it.
    Namespace,
}

/// Kinds that get `metadata.generation` and bump it on spec changes.
fn has_generation(rt: &ResourceType) -> bool {
    !rt.builtin
        || (rt.group.is_empty() && rt.resource == "pods")
        || (rt.group == "policy" && rt.resource == "poddisruptionbudgets")
        || workloads::workload(rt).is_some_and(workloads::Workload::has_status_and_generation)
        || rules::has_generation(rt)
}

/// DELETE answers with the deleted object for these kinds (kube's `ReturnDeletedObject`), with a
/// Success Status otherwise.
pub fn returns_deleted_object(rt: &ResourceType) -> bool {
    !rt.builtin
        || (rt.group.is_empty()
            && matches!(rt.resource.as_str(), "pods" | "namespaces" | "services"))
        || (rt.group == "storage.k8s.io" && rt.resource == "volumeattributesclasses")
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let o = obj.as_object_mut().expect("object");
    if !o.get("metadata").is_some_and(Value::is_object) {
        o.insert("metadata".into(), json!({}));
    }
    o.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .expect("metadata")
}

fn meta_str<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj["metadata"][key].as_str().unwrap_or_default()
}

/// 422 for a single field error on an object.
pub fn invalid(rt: &ResourceType, name: &str, cause: &str, field: &str, detail: String) -> Status {
    Status::invalid(&rt.group, &rt.kind, name, &[(cause, field, detail)])
}

fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_label_shaped(s)
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn is_label_shaped(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// kube's `IsDNS1123Subdomain`: at most 253 characters matching its regex; the parts between
/// dots have no length limit of their own (a VolumeAttachment is named `csi-` + 64 hex digits).
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label_shaped)
}

/// Validates `metadata.name` with kube's messages.
pub fn validate_name(rt: &ResourceType, name: &str) -> Result<(), Status> {
    if rt.name_is_path_segment() {
        let problem = match name {
            "." | ".." => Some(format!("may not be '{name}'")),
            _ => ["/", "%"]
                .into_iter()
                .find(|c| name.contains(c))
                .map(|c| format!("may not contain '{c}'")),
        };
        if let Some(problem) = problem {
            return Err(invalid(
                rt,
                name,
                "FieldValueInvalid",
                "metadata.name",
                format!("Invalid value: \"{name}\": {problem}"),
            ));
        }
    } else if rt.name_is_label() {
        if !is_dns1123_label(name) {
            return Err(invalid(
                rt,
                name,
                "FieldValueInvalid",
                "metadata.name",
                format!(
                    "Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                ),
            ));
        }
    } else if !is_dns1123_subdomain(name) {
        return Err(invalid(
            rt,
            name,
            "FieldValueInvalid",
            "metadata.name",
            format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ),
        ));
    }
    Ok(())
}

/// Checks the body's `apiVersion`/`kind` (when present) against the endpoint's type.
pub fn check_type_meta(rt: &ResourceType, obj: &Value) -> Result<(), Status> {
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str)
        && !av.is_empty()
        && av != rt.api_version()
    {
        return Err(Status::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != rt.kind
    {
        return Err(Status::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    Ok(())
}

/// Parses a request body into a JSON object.
pub fn parse_body(rt: &ResourceType, body: &[u8]) -> Result<Value, Status> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: json: cannot unmarshal into Go value of type struct",
            rt.kind
        ))),
        Err(e) => Err(Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {e}",
            rt.kind
        ))),
    }
}

/// Prepares an object for creation: namespace and name rules, system metadata, per-kind
/// defaults. `keep_status` lets in-process callers (the fleet generator, simulated kubelets)
/// create objects with a status, which HTTP clients cannot for kinds with a status subresource.
pub fn prepare_create(
    rt: &ResourceType,
    url_namespace: Option<&str>,
    mut obj: Value,
    keep_status: bool,
) -> Result<Value, Status> {
    check_type_meta(rt, &obj)?;
    let body_ns = meta_str(&obj, "namespace").to_string();
    if rt.namespaced {
        let ns = url_namespace.unwrap_or_default();
        if !body_ns.is_empty() && body_ns != ns {
            return Err(Status::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta_mut(&mut obj).insert("namespace".into(), Value::String(ns.to_string()));
    } else {
        meta_mut(&mut obj).shift_remove("namespace");
    }
    let mut name = meta_str(&obj, "name").to_string();
    if name.is_empty() {
        let gen_name = meta_str(&obj, "generateName").to_string();
        if gen_name.is_empty() {
            return Err(invalid(
                rt,
                "",
                "FieldValueRequired",
                "metadata.name",
                "Required value: name or generateName is required".into(),
            ));
        }
        name = format!("{gen_name}{}", generate_name_suffix());
        meta_mut(&mut obj).insert("name".into(), Value::String(name.clone()));
    }
    validate_name(rt, &name)?;
    {
        let m = meta_mut(&mut obj);
        for k in [
            "resourceVersion",
            "selfLink",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            m.shift_remove(k);
        }
        m.insert("uid".into(), Value::String(new_uid()));
        m.insert(
            "creationTimestamp".into(),
            Value::String(rfc3339(now_unix())),
        );
        if has_generation(rt) {
            m.insert("generation".into(), json!(1));
        } else {
            m.shift_remove("generation");
        }
    }
    if rt.status_subresource
        && !keep_status
        && !(rt.group.is_empty() && rt.resource == "nodes")
        && status::resets(rt)
    {
        obj.as_object_mut().expect("object").shift_remove("status");
    }
    match workloads::workload(rt) {
        Some(w) => workloads::prepare_create(w, rt, &name, &mut obj, keep_status)?,
        None if crds::is_crd(rt) => crds::prepare_create(rt, &name, &mut obj)?,
        None => {
            default_and_validate(rt, &name, &mut obj)?;
            rules::prepare_create(rt, &mut obj, keep_status)?;
        }
    }
    Ok(obj)
}

/// Per-kind defaulting (a subset of kube's defaulters) and validation.
fn default_and_validate(rt: &ResourceType, name: &str, obj: &mut Value) -> Result<(), Status> {
    if !rt.group.is_empty() {
        return Ok(());
    }
    let o = obj.as_object_mut().expect("object");
    match rt.resource.as_str() {
        "pods" => {
            // (`Map` indexing panics on a missing key: a pod body may lack `spec`.)
            let containers = o
                .get("spec")
                .and_then(|s| s.get("containers"))
                .and_then(Value::as_array)
                .map(Vec::len)
                .unwrap_or(0);
            if containers == 0 {
                return Err(invalid(
                    rt,
                    name,
                    "FieldValueRequired",
                    "spec.containers",
                    "Required value".into(),
                ));
            }
            for (i, c) in o["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if c["name"].as_str().unwrap_or_default().is_empty() {
                    return Err(invalid(
                        rt,
                        name,
                        "FieldValueRequired",
                        &format!("spec.containers[{i}].name"),
                        "Required value".into(),
                    ));
                }
                if c["image"].as_str().unwrap_or_default().is_empty() {
                    return Err(invalid(
                        rt,
                        name,
                        "FieldValueRequired",
                        &format!("spec.containers[{i}].image"),
                        "Required value".into(),
                    ));
                }
            }
            let spec = o
                .get_mut("spec")
                .and_then(Value::as_object_mut)
                .expect("spec checked");
            for (k, v) in [
                ("restartPolicy", json!("Always")),
                ("terminationGracePeriodSeconds", json!(30)),
                ("dnsPolicy", json!("ClusterFirst")),
                ("securityContext", json!({})),
                ("schedulerName", json!("default-scheduler")),
                ("enableServiceLinks", json!(true)),
                ("preemptionPolicy", json!("PreemptLowerPriority")),
                ("priority", json!(0)),
            ] {
                spec.entry(k).or_insert(v);
            }
            if !o.get("status").is_some_and(Value::is_object) {
                o.insert(
                    "status".into(),
                    json!({"phase":"Pending","qosClass":"BestEffort"}),
                );
            }
        }
        "namespaces" => {
            o.insert("spec".into(), json!({"finalizers":["kubernetes"]}));
            o.insert("status".into(), json!({"phase":"Active"}));
            let labels = meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert(
                    "kubernetes.io/metadata.name".into(),
                    Value::String(name.to_string()),
                );
            }
        }
        "services" => {
            let spec = o.entry("spec").or_insert_with(|| json!({}));
            let Some(spec) = spec.as_object_mut() else {
                return Err(invalid(
                    rt,
                    name,
                    "FieldValueRequired",
                    "spec",
                    "Required value".into(),
                ));
            };
            spec.entry("type").or_insert(json!("ClusterIP"));
            if spec["type"] != "ExternalName" {
                let ip = spec
                    .get("clusterIP")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        let h = new_uid();
                        let b = h.as_bytes();
                        format!("10.96.{}.{}", b[0] % 200 + 1, b[1] % 250 + 2)
                    });
                spec.insert("clusterIP".into(), json!(ip));
                spec.insert("clusterIPs".into(), json!([ip]));
                spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
                spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
                spec.entry("internalTrafficPolicy")
                    .or_insert(json!("Cluster"));
            }
            spec.entry("sessionAffinity").or_insert(json!("None"));
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports {
                    if let Some(p) = p.as_object_mut() {
                        p.entry("protocol").or_insert(json!("TCP"));
                        let port = p.get("port").cloned().unwrap_or(json!(0));
                        p.entry("targetPort").or_insert(port);
                    }
                }
            }
            o.entry("status").or_insert(json!({"loadBalancer":{}}));
        }
        "secrets" => {
            if let Some(Value::Object(sd)) = o.shift_remove("stringData") {
                let data = o.entry("data").or_insert_with(|| json!({}));
                if let Some(d) = data.as_object_mut() {
                    for (k, v) in sd {
                        let s = v.as_str().unwrap_or_default();
                        d.insert(
                            k,
                            json!(base64::engine::general_purpose::STANDARD.encode(s)),
                        );
                    }
                }
            }
            o.entry("type").or_insert(json!("Opaque"));
        }
        "persistentvolumeclaims" => {
            // kube's defaulter: a filesystem volume, and a claim is Pending until bound (no
            // controller binds it here).
            if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                spec.entry("volumeMode").or_insert(json!("Filesystem"));
            }
            o.entry("status").or_insert(json!({"phase": "Pending"}));
        }
        _ => {}
    }
    Ok(())
}

/// Checks that `ns` exists and is not terminating before creating into it.
pub fn check_namespace(
    view: &WriteView<'_>,
    rt: &ResourceType,
    ns: &str,
    name: &str,
) -> Result<(), Status> {
    if !rt.namespaced {
        return Ok(());
    }
    let Some(nsobj) = view.namespace(ns) else {
        return Err(Status::not_found("", "namespaces", ns));
    };
    let v: Value = serde_json::from_slice(&nsobj.body).unwrap_or_default();
    if v["metadata"]["deletionTimestamp"].is_string() {
        let msg = format!(
            "unable to create new content in namespace {ns} because it is being terminated"
        );
        return Err(Status::forbidden(
            &rt.group,
            &rt.resource,
            name,
            format!("{} \"{name}\" is forbidden: {msg}", rt.group_resource()),
        )
        .with_details(StatusDetails {
            name: name.to_string(),
            group: rt.group.clone(),
            kind: rt.resource.clone(),
            causes: vec![StatusCause {
                reason: "NamespaceTerminating".into(),
                message: msg,
                field: "metadata.namespace".into(),
            }],
            ..Default::default()
        }));
    }
    Ok(())
}

/// Which part of an object an update may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateScope {
    /// The main endpoint: everything but status (for kinds with a status subresource).
    Main,
    /// The `/status` subresource: only status.
    Status,
    /// The `/approval` subresource (CertificateSigningRequests): only `status.conditions`.
    Approval,
}

/// Decides an update (PUT, or the result of a PATCH) of `current` to `new`.
/// `check_rv`: the body's resourceVersion must match (PUT, or a patch that carries one).
pub fn decide_update(
    rt: &ResourceType,
    current: &StoredObject,
    mut new: Value,
    scope: UpdateScope,
) -> Result<Action, Status> {
    check_type_meta(rt, &new)?;
    let cur = current.to_value(rt);
    let body_rv = meta_str(&new, "resourceVersion").to_string();
    if !body_rv.is_empty() && body_rv != current.rv.to_string() {
        return Err(Status::conflict(
            &rt.group,
            &rt.resource,
            &current.name,
            Status::MODIFIED,
        ));
    }
    let body_name = meta_str(&new, "name");
    if !body_name.is_empty() && body_name != current.name {
        return Err(Status::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            current.name
        )));
    }
    let body_ns = meta_str(&new, "namespace");
    if rt.namespaced && !body_ns.is_empty() && body_ns != current.namespace {
        return Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let body_uid = meta_str(&new, "uid");
    if !body_uid.is_empty() && body_uid != current.uid {
        return Err(Status::conflict(
            &rt.group,
            &rt.resource,
            &current.name,
            &format!(
                "Precondition failed: UID in precondition: {body_uid}, UID in object meta: {}",
                current.uid
            ),
        ));
    }
    if scope == UpdateScope::Approval {
        new = status::on_approval_write(&cur, &new);
    } else if scope == UpdateScope::Status {
        let status = new.get("status").cloned();
        new = cur.clone();
        match status {
            Some(s) => {
                new.as_object_mut()
                    .expect("object")
                    .insert("status".into(), s);
            }
            None => {
                new.as_object_mut().expect("object").shift_remove("status");
            }
        }
        status::on_status_write(rt, &cur, &mut new);
    } else if rt.status_subresource && status::resets(rt) {
        let o = new.as_object_mut().expect("object");
        match cur.get("status") {
            Some(s) => {
                o.insert("status".into(), s.clone());
            }
            None => {
                o.shift_remove("status");
            }
        }
    }
    // System metadata is owned by the server.
    {
        let nm = meta_mut(&mut new);
        let cm = cur["metadata"].as_object().expect("stored metadata");
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ] {
            match cm.get(k) {
                Some(v) => {
                    nm.insert(k.into(), v.clone());
                }
                None => {
                    nm.shift_remove(k);
                }
            }
        }
        nm.shift_remove("resourceVersion");
        nm.shift_remove("selfLink");
    }
    if rt.group.is_empty()
        && rt.resource == "secrets"
        && let Some(Value::Object(sd)) = new
            .as_object_mut()
            .expect("object")
            .shift_remove("stringData")
    {
        let data = new
            .as_object_mut()
            .expect("object")
            .entry("data")
            .or_insert_with(|| json!({}));
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                d.insert(
                    k,
                    json!(
                        base64::engine::general_purpose::STANDARD
                            .encode(v.as_str().unwrap_or_default())
                    ),
                );
            }
        }
    }
    if scope == UpdateScope::Main
        && let Some(w) = workloads::workload(rt)
    {
        workloads::prepare_update(w, rt, &cur, &mut new)?;
    }
    if scope == UpdateScope::Main && crds::is_crd(rt) {
        crds::prepare_update(rt, &cur, &mut new)?;
    }
    if scope == UpdateScope::Main && workloads::workload(rt).is_none() && !crds::is_crd(rt) {
        rules::prepare_update(rt, &cur, &mut new)?;
    }
    if has_generation(rt)
        && (spec_changed(&cur, &new)
            || workloads::metadata_bumps_generation(rt, &cur, &new)
            || rules::metadata_bumps_generation(rt, &cur, &new))
    {
        let g = cur["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        meta_mut(&mut new).insert("generation".into(), json!(g));
    }
    // An object being deleted whose last finalizer is removed is deleted now.
    let finalizers_empty = new["metadata"]["finalizers"]
        .as_array()
        .is_none_or(Vec::is_empty);
    if cur["metadata"]["deletionTimestamp"].is_string()
        && finalizers_empty
        && !is_graceful_pod_pending(rt, &cur)
    {
        return Ok(Action::Delete);
    }
    let mut cur_cmp = cur;
    meta_mut(&mut cur_cmp).shift_remove("resourceVersion");
    let mut new_cmp = new.clone();
    for v in [&mut cur_cmp, &mut new_cmp] {
        if let Some(o) = v.as_object_mut() {
            o.shift_remove("kind");
            o.shift_remove("apiVersion");
        }
    }
    if cur_cmp == new_cmp {
        return Ok(Action::Keep);
    }
    Ok(Action::Put(new))
}

fn is_graceful_pod_pending(rt: &ResourceType, cur: &Value) -> bool {
    rt.group.is_empty()
        && rt.resource == "pods"
        && cur["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap_or(0)
            > 0
}

/// Everything but metadata and status compared.
fn spec_changed(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| {
                        !matches!(k.as_str(), "metadata" | "status" | "kind" | "apiVersion")
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(a) != strip(b)
}

/// Decides a DELETE of `current`.
pub fn decide_delete(
    rt: &ResourceType,
    current: &StoredObject,
    opts: &DeleteOptions,
) -> Result<(Action, DeleteKind), Status> {
    // kube's `rest.BeforeDelete` checks the preconditions first and names the *kind* as the
    // resource (`GroupResource{Group: gvk.Group, Resource: gvk.Kind}`).
    if let Some(uid) = &opts.precondition_uid
        && *uid != current.uid
    {
        return Err(Status::conflict(
            &rt.group,
            &rt.kind,
            &current.name,
            &format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                current.uid
            ),
        ));
    }
    if let Some(rv) = &opts.precondition_rv
        && *rv != current.rv.to_string()
    {
        return Err(Status::conflict(
            &rt.group,
            &rt.kind,
            &current.name,
            &format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                current.rv
            ),
        ));
    }
    let mut v = current.to_value(rt);
    let terminating = v["metadata"]["deletionTimestamp"].is_string();
    let has_finalizers = v["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    let now = now_unix();

    if rt.group.is_empty() && rt.resource == "namespaces" {
        if terminating {
            return Ok((Action::Keep, DeleteKind::Namespace));
        }
        meta_mut(&mut v).insert("deletionTimestamp".into(), json!(rfc3339(now)));
        meta_mut(&mut v).insert("deletionGracePeriodSeconds".into(), json!(0));
        v["status"] = json!({"phase":"Terminating"});
        return Ok((Action::Put(v), DeleteKind::Namespace));
    }

    if rt.group.is_empty() && rt.resource == "pods" {
        let bound = !v["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .is_empty();
        let phase = v["status"]["phase"].as_str().unwrap_or_default();
        let mut grace = opts
            .grace_period_seconds
            .or_else(|| v["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30);
        // kube's `rest.BeforeDelete`: a negative grace period is 1 s.
        if grace < 0 {
            grace = 1;
        }
        if !bound || phase == "Succeeded" || phase == "Failed" {
            grace = 0;
        }
        if grace > 0 {
            let existing = v["metadata"]["deletionGracePeriodSeconds"].as_i64();
            if terminating && existing.is_some_and(|g| g <= grace) {
                return Ok((
                    Action::Keep,
                    DeleteKind::GracefulPod(existing.unwrap_or(grace)),
                ));
            }
            meta_mut(&mut v).insert(
                "deletionTimestamp".into(),
                json!(rfc3339(go_after_seconds(now, grace))),
            );
            meta_mut(&mut v).insert("deletionGracePeriodSeconds".into(), json!(grace));
            return Ok((Action::Put(v), DeleteKind::GracefulPod(grace)));
        }
    }

    if has_finalizers {
        if terminating && v["metadata"]["deletionGracePeriodSeconds"].as_i64() == Some(0) {
            return Ok((Action::Keep, DeleteKind::Finalizers));
        }
        if !terminating {
            meta_mut(&mut v).insert("deletionTimestamp".into(), json!(rfc3339(now)));
        }
        meta_mut(&mut v).insert("deletionGracePeriodSeconds".into(), json!(0));
        return Ok((Action::Put(v), DeleteKind::Finalizers));
    }
    Ok((Action::Delete, DeleteKind::Immediate))
}

/// `now.Add(time.Second * time.Duration(secs))` as kube computes a deletion timestamp: the
/// product is Go's int64 nanoseconds, which wraps for a grace period beyond about 292 years
/// (so the timestamp can land in the past), and never overflows here.
fn go_after_seconds(now: i64, secs: i64) -> i64 {
    let ns = secs.wrapping_mul(1_000_000_000);
    now.saturating_add(ns.div_euclid(1_000_000_000))
}

/// The `Status` kube returns for a completed DELETE of a kind that does not return the object.
pub fn delete_success_status(rt: &ResourceType, obj: &StoredObject) -> Value {
    let mut details = Map::new();
    details.insert("name".into(), json!(obj.name));
    if !rt.group.is_empty() {
        details.insert("group".into(), json!(rt.group));
    }
    details.insert("kind".into(), json!(rt.resource));
    details.insert("uid".into(), json!(obj.uid));
    json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":details})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Registry;

    fn reg() -> Registry {
        Registry::new(&[]).unwrap()
    }

    #[test]
    fn create_fills_system_metadata_and_pod_defaults() {
        let r = reg();
        let pods = &r.core("pods");
        let v = prepare_create(
            pods,
            Some("default"),
            json!({"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-"},"spec":{"containers":[{"name":"c","image":"nginx"}]},"status":{"phase":"Running"}}),
            false,
        )
        .unwrap();
        let name = v["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("web-") && name.len() == 9);
        assert_eq!(v["metadata"]["namespace"], "default");
        assert_eq!(v["metadata"]["generation"], 1);
        assert_eq!(v["spec"]["restartPolicy"], "Always");
        assert_eq!(v["status"]["phase"], "Pending", "status is reset on create");
        assert_eq!(v["metadata"]["uid"].as_str().unwrap().len(), 36);
    }

    #[test]
    fn rbac_names_are_path_segments() {
        let r = reg();
        let roles = r
            .get("rbac.authorization.k8s.io", "v1", "clusterroles")
            .unwrap();
        for ok in ["system:kube-scheduler", "Cluster_Admin", "a.b"] {
            assert!(validate_name(&roles, ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("..", "may not be '..'"),
            ("a/b", "may not contain '/'"),
            ("a%b", "may not contain '%'"),
        ] {
            let e = validate_name(&roles, bad).unwrap_err();
            assert!(
                e.message
                    .ends_with(&format!("metadata.name: Invalid value: \"{bad}\": {why}")),
                "{}",
                e.message
            );
        }
        let attachments = r.get("storage.k8s.io", "v1", "volumeattachments").unwrap();
        let csi = format!("csi-{}", "0a".repeat(32));
        assert!(
            validate_name(&attachments, &csi).is_ok(),
            "a subdomain's parts may be long"
        );
        assert!(validate_name(&attachments, &"a".repeat(254)).is_err());
        // Other kinds keep the DNS subdomain rule.
        assert!(validate_name(&r.core("configmaps"), "system:x").is_err());
    }

    #[test]
    fn create_rejects_bad_names_and_mismatches() {
        let r = reg();
        let cm = &r.core("configmaps");
        let e = prepare_create(
            cm,
            Some("a"),
            json!({"metadata":{"name":"Bad_Name"}}),
            false,
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value"),
            "{}",
            e.message
        );
        let e = prepare_create(
            cm,
            Some("a"),
            json!({"metadata":{"name":"x","namespace":"b"}}),
            false,
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
        let e = prepare_create(cm, Some("a"), json!({"metadata":{}}), false).unwrap_err();
        assert_eq!(
            e.message,
            "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
        );
        let e = prepare_create(
            cm,
            Some("a"),
            json!({"kind":"Pod","metadata":{"name":"x"}}),
            false,
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
        let pods = &r.core("pods");
        let e = prepare_create(
            pods,
            Some("a"),
            json!({"metadata":{"name":"x"},"spec":{}}),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "Pod \"x\" is invalid: spec.containers: Required value"
        );
    }

    #[test]
    fn secrets_fold_string_data() {
        let r = reg();
        let s = &r.core("secrets");
        let v = prepare_create(
            s,
            Some("a"),
            json!({"metadata":{"name":"x"},"stringData":{"k":"hi"}}),
            false,
        )
        .unwrap();
        assert_eq!(v["data"]["k"], "aGk=");
        assert_eq!(v["type"], "Opaque");
        assert!(v.get("stringData").is_none());
    }
}
