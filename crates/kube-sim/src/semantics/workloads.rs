//! The write rules of the workload kinds kube-apiserver serves in `apps/v1` (Deployment,
//! ReplicaSet, StatefulSet, DaemonSet, ControllerRevision), `batch/v1` (Job, CronJob) and
//! `coordination.k8s.io/v1` (Lease): what their registry strategies do on create and update
//! (`pkg/registry/{apps,batch,coordination}/*/strategy.go`), the v1 defaulters a client sees in
//! `kubectl get -o yaml` (`pkg/apis/{apps,batch,core}/v1/defaults.go`), and the validation errors
//! a client most often meets (selector and template labels, containers, restart policies,
//! negative counts), with kube's field paths and messages.
//!
//! Defaulting runs on every write of the main endpoint, as kube's decoder defaults every body it
//! reads. No controller is simulated: nothing here creates pods, revisions or jobs, and status is
//! what its writer set (`{}` after a create, as kube's strategies reset it).
//!
//! Not reproduced: immutability rules (selectors, job templates), the check that a job's selector
//! was generated (a user's selector gets the controller uid merged in instead),
//! `ValidateLabelSelector`'s detailed messages, and the many rarer field checks (strategy values,
//! history limits, cron syntax, volume claim templates, ...). Deletion has no per-kind rule here:
//! a job deleted without a propagation policy goes at once, where kube adds the `orphan`
//! finalizer for its garbage collector to remove.

use serde_json::{Map, Value, json};

use super::meta_mut;
use crate::kinds::ResourceType;
use kube_wire::gofmt::quote;
use kube_wire::status::Status;
use kube_wire::table::label_selector_as_selector;

/// A kind with rules here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    ControllerRevision,
    Job,
    CronJob,
    Lease,
}

/// The workload kind `rt` serves, if it is one.
pub(crate) fn workload(rt: &ResourceType) -> Option<Workload> {
    if !rt.builtin || rt.version != "v1" {
        return None;
    }
    Some(match (rt.group.as_str(), rt.resource.as_str()) {
        ("apps", "deployments") => Workload::Deployment,
        ("apps", "replicasets") => Workload::ReplicaSet,
        ("apps", "statefulsets") => Workload::StatefulSet,
        ("apps", "daemonsets") => Workload::DaemonSet,
        ("apps", "controllerrevisions") => Workload::ControllerRevision,
        ("batch", "jobs") => Workload::Job,
        ("batch", "cronjobs") => Workload::CronJob,
        ("coordination.k8s.io", "leases") => Workload::Lease,
        _ => return None,
    })
}

impl Workload {
    /// Kinds with a status (and a `/status` subresource), whose strategies also set
    /// `metadata.generation` to 1 on create and bump it on spec changes.
    pub(crate) fn has_status_and_generation(self) -> bool {
        !matches!(self, Workload::ControllerRevision | Workload::Lease)
    }

    /// The word kube's "empty selector is invalid for ..." message ends with.
    fn selector_noun(self) -> &'static str {
        match self {
            Workload::StatefulSet => "statefulset",
            Workload::DaemonSet => "daemonset",
            // ReplicaSet validation reuses the deployment wording.
            _ => "deployment",
        }
    }
}

/// The annotation that carries a DaemonSet's `spec.templateGeneration` in `apps/v1`.
pub(crate) const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
/// Job labels and selector keys kube generates (`batch.kubernetes.io/...` and the legacy ones).
pub(crate) const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
pub(crate) const JOB_NAME: &str = "batch.kubernetes.io/job-name";
const LEGACY_JOB_NAME: &str = "job-name";

/// Create: status reset to `{}` (unless `keep_status`, for in-process writers), the job's
/// generated selector and labels, the DaemonSet's template generation, v1 defaults, validation.
pub(crate) fn prepare_create(
    w: Workload,
    rt: &ResourceType,
    name: &str,
    obj: &mut Value,
    keep_status: bool,
) -> Result<(), Status> {
    check_decodes(rt, obj)?;
    let o = obj.as_object_mut().expect("object");
    if w.has_status_and_generation()
        && !(keep_status && o.get("status").is_some_and(Value::is_object))
    {
        o.insert("status".into(), json!({}));
    }
    match w {
        Workload::Job => {
            // kube defaults the decoded body, lets the strategy generate the selector, and
            // defaults again when it decodes what it stored: a job without labels gets its
            // template's labels, generated ones included.
            default_job(obj);
            if obj.pointer("/spec/manualSelector") != Some(&Value::Bool(true)) {
                let uid = obj["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                generate_job_selector(obj, name, &uid);
            }
        }
        Workload::DaemonSet => {
            let given = template_generation(rt, obj)?;
            set_template_generation(obj, given.filter(|g| *g >= 1).unwrap_or(1));
        }
        _ => {}
    }
    apply_defaults(w, obj);
    validate(w, rt, name, obj)
}

/// Update of the main endpoint: v1 defaults (kube defaults every decoded body), the DaemonSet's
/// template generation (server-owned: bumped when the template changes), validation.
pub(crate) fn prepare_update(
    w: Workload,
    rt: &ResourceType,
    cur: &Value,
    new: &mut Value,
) -> Result<(), Status> {
    check_decodes(rt, new)?;
    apply_defaults(w, new);
    if w == Workload::DaemonSet {
        // Parsed (a bad value fails decoding), then replaced by the server's own count.
        template_generation(rt, new)?;
        let old = template_generation(rt, cur).ok().flatten().unwrap_or(1);
        let changed = cur.pointer("/spec/template") != new.pointer("/spec/template");
        set_template_generation(new, if changed { old.saturating_add(1) } else { old });
    }
    let name = new["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    validate(w, rt, &name, new)
}

/// Whether an update bumps `metadata.generation` for reasons other than a spec change: a
/// Deployment's annotations are copied to its replica sets, so its strategy counts them too.
pub(crate) fn metadata_bumps_generation(rt: &ResourceType, cur: &Value, new: &Value) -> bool {
    let annotations = |v: &Value| {
        v.pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .cloned()
    };
    workload(rt) == Some(Workload::Deployment) && annotations(cur) != annotations(new)
}

/// What kube's JSON decoding refuses before any rule runs: a `spec` that is not an object.
fn check_decodes(rt: &ResourceType, obj: &Value) -> Result<(), Status> {
    let Some(spec) = obj.get("spec").filter(|s| !s.is_null() && !s.is_object()) else {
        return Ok(());
    };
    let ty = match spec {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        _ => "array",
    };
    Err(Status::bad_request(format!(
        "{k} in version \"{v}\" cannot be handled as a {k}: json: cannot unmarshal {ty} into Go struct field {k}.spec of type {v}.{k}Spec",
        k = rt.kind,
        v = rt.version,
    )))
}

// ---------------------------------------------------------------------------------------------
// Defaults

/// Sets `key` when it is absent or `null` (a Go nil pointer or zero value the defaulter fills).
pub(super) fn set_default(m: &mut Map<String, Value>, key: &str, value: Value) {
    match m.get(key) {
        None | Some(Value::Null) => {
            m.insert(key.to_string(), value);
        }
        Some(Value::String(s)) if s.is_empty() && value.is_string() => {
            m.insert(key.to_string(), value);
        }
        _ => {}
    }
}

/// The object at `key` of `m`, created (replacing `null`) when absent; `None` when it holds
/// something else, which the rules then leave alone.
pub(super) fn object_at<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), json!({}));
    }
    m.get_mut(key).and_then(Value::as_object_mut)
}

pub(super) fn spec_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    object_at(obj.as_object_mut()?, "spec")
}

fn apply_defaults(w: Workload, obj: &mut Value) {
    match w {
        Workload::Deployment => {
            let Some(spec) = spec_mut(obj) else { return };
            set_default(spec, "replicas", json!(1));
            if let Some(strategy) = object_at(spec, "strategy") {
                set_default(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate"))
                    && let Some(ru) = object_at(strategy, "rollingUpdate")
                {
                    set_default(ru, "maxUnavailable", json!("25%"));
                    set_default(ru, "maxSurge", json!("25%"));
                }
            }
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
            default_pod_template(spec.get_mut("template"));
        }
        Workload::ReplicaSet => {
            let Some(spec) = spec_mut(obj) else { return };
            set_default(spec, "replicas", json!(1));
            default_pod_template(spec.get_mut("template"));
        }
        Workload::StatefulSet => {
            let Some(spec) = spec_mut(obj) else { return };
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            if let Some(strategy) = object_at(spec, "updateStrategy") {
                if strategy.get("type").is_none_or(|t| t.is_null() || t == "") {
                    strategy.insert("type".into(), json!("RollingUpdate"));
                    object_at(strategy, "rollingUpdate");
                }
                if strategy.get("type") == Some(&json!("RollingUpdate"))
                    && let Some(ru) = strategy
                        .get_mut("rollingUpdate")
                        .and_then(Value::as_object_mut)
                {
                    set_default(ru, "partition", json!(0));
                    // MaxUnavailableStatefulSet is beta and on by default.
                    set_default(ru, "maxUnavailable", json!(1));
                }
            }
            if let Some(policy) = object_at(spec, "persistentVolumeClaimRetentionPolicy") {
                set_default(policy, "whenDeleted", json!("Retain"));
                set_default(policy, "whenScaled", json!("Retain"));
            }
            set_default(spec, "replicas", json!(1));
            set_default(spec, "revisionHistoryLimit", json!(10));
            default_pod_template(spec.get_mut("template"));
        }
        Workload::DaemonSet => {
            let Some(spec) = spec_mut(obj) else { return };
            if let Some(strategy) = object_at(spec, "updateStrategy") {
                set_default(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate"))
                    && let Some(ru) = object_at(strategy, "rollingUpdate")
                {
                    set_default(ru, "maxUnavailable", json!(1));
                    set_default(ru, "maxSurge", json!(0));
                }
            }
            set_default(spec, "revisionHistoryLimit", json!(10));
            default_pod_template(spec.get_mut("template"));
        }
        Workload::Job => default_job(obj),
        Workload::CronJob => {
            let Some(spec) = spec_mut(obj) else { return };
            set_default(spec, "concurrencyPolicy", json!("Allow"));
            set_default(spec, "suspend", json!(false));
            set_default(spec, "successfulJobsHistoryLimit", json!(3));
            set_default(spec, "failedJobsHistoryLimit", json!(1));
            // The job template's spec gets pod defaults only (there is no JobSpec defaulter).
            let template = spec
                .get_mut("jobTemplate")
                .and_then(|t| t.get_mut("spec"))
                .and_then(|s| s.get_mut("template"));
            default_pod_template(template);
        }
        Workload::ControllerRevision | Workload::Lease => {}
    }
}

/// `SetDefaults_Job` (and the pod template's defaults).
fn default_job(obj: &mut Value) {
    let template_labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.is_object())
        .cloned();
    if let Some(spec) = spec_mut(obj) {
        let unset = |spec: &Map<String, Value>, k: &str| spec.get(k).is_none_or(Value::is_null);
        if unset(spec, "completions") && unset(spec, "parallelism") {
            spec.insert("completions".into(), json!(1));
        }
        set_default(spec, "parallelism", json!(1));
        let backoff = if unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i64::from(i32::MAX)
        };
        set_default(spec, "backoffLimit", json!(backoff));
        set_default(spec, "completionMode", json!("NonIndexed"));
        set_default(spec, "suspend", json!(false));
        let replacement = if unset(spec, "podFailurePolicy") {
            "TerminatingOrFailed"
        } else {
            "Failed"
        };
        set_default(spec, "podReplacementPolicy", json!(replacement));
        default_pod_template(spec.get_mut("template"));
    }
    // A job without labels takes its pod template's.
    let no_labels = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty);
    if let Some(labels) = template_labels
        && no_labels
    {
        meta_mut(obj).insert("labels".into(), labels);
    }
}

/// The batch strategy's `generateSelector`: the pod template gets the job-name and controller-uid
/// labels (new and legacy keys, unless set), the selector matches the controller uid.
fn generate_job_selector(obj: &mut Value, name: &str, uid: &str) {
    let Some(spec) = spec_mut(obj) else { return };
    if let Some(labels) = object_at(spec, "template")
        .and_then(|t| object_at(t, "metadata"))
        .and_then(|m| object_at(m, "labels"))
    {
        for (k, v) in [
            (LEGACY_JOB_NAME, name),
            (JOB_NAME, name),
            (LEGACY_CONTROLLER_UID, uid),
            (CONTROLLER_UID, uid),
        ] {
            labels.entry(k).or_insert_with(|| json!(v));
        }
        labels.sort_keys();
    }
    if let Some(match_labels) =
        object_at(spec, "selector").and_then(|s| object_at(s, "matchLabels"))
    {
        match_labels
            .entry(CONTROLLER_UID)
            .or_insert_with(|| json!(uid));
        match_labels.sort_keys();
    }
}

/// `SetDefaults_PodSpec` and `SetDefaults_Container` on a pod template's spec.
pub(super) fn default_pod_template(template: Option<&mut Value>) {
    let Some(spec) = template
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let policy = if image_tag(image) == "latest" {
                "Always"
            } else {
                "IfNotPresent"
            };
            set_default(c, "imagePullPolicy", json!(policy));
            set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
            set_default(c, "terminationMessagePolicy", json!("File"));
            for port in c
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                set_default(port, "protocol", json!("TCP"));
            }
        }
    }
}

/// The tag of an image reference as kube's `parsers.ParseImageName` reads it: `latest` when the
/// reference names neither a tag nor a digest, empty when it has a digest only.
fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => tag,
        None if digest => "",
        None => "latest",
    }
}

/// The DaemonSet's template generation annotation, parsed as the v1 conversion does.
fn template_generation(rt: &ResourceType, obj: &Value) -> Result<Option<i64>, Status> {
    let Some(v) = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(TEMPLATE_GENERATION))
    else {
        return Ok(None);
    };
    let s = v.as_str().unwrap_or_default();
    s.parse().map(Some).map_err(|_| {
        Status::bad_request(format!(
            "{k} in version \"v1\" cannot be handled as a {k}: strconv.ParseInt: parsing {}: invalid syntax",
            quote(s),
            k = rt.kind
        ))
    })
}

fn set_template_generation(obj: &mut Value, g: i64) {
    let annotations = meta_mut(obj)
        .entry("annotations")
        .or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    if let Some(a) = annotations.as_object_mut() {
        a.insert(TEMPLATE_GENERATION.into(), json!(g.to_string()));
    }
}

// ---------------------------------------------------------------------------------------------
// Validation

/// Field errors in kube's `field.ErrorList` form: (cause reason, field path, message body).
#[derive(Default)]
struct Errors(Vec<(&'static str, String, String)>);

impl Errors {
    fn required(&mut self, field: &str, detail: &str) {
        let body = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        self.0.push(("FieldValueRequired", field.to_string(), body));
    }

    /// `value` as kube prints the bad value (`%v` of numbers, `%q` of strings, `%#v` of others).
    fn invalid(&mut self, field: &str, value: &str, detail: &str) {
        self.0.push((
            "FieldValueInvalid",
            field.to_string(),
            format!("Invalid value: {value}: {detail}"),
        ));
    }

    fn not_supported(&mut self, field: &str, value: &str, supported: &[&str]) {
        let supported: Vec<String> = supported.iter().map(|s| quote(s)).collect();
        self.0.push((
            "FieldValueNotSupported",
            field.to_string(),
            format!(
                "Unsupported value: {}: supported values: {}",
                quote(value),
                supported.join(", ")
            ),
        ));
    }

    fn nonnegative(&mut self, obj: &Value, pointer: &str, field: &str) {
        if let Some(n) = obj.pointer(pointer).and_then(Value::as_i64)
            && n < 0
        {
            self.invalid(field, &n.to_string(), "must be greater than or equal to 0");
        }
    }

    fn into_result(self, rt: &ResourceType, name: &str) -> Result<(), Status> {
        if self.0.is_empty() {
            return Ok(());
        }
        let causes: Vec<(&str, &str, String)> = self
            .0
            .iter()
            .map(|(r, f, d)| (*r, f.as_str(), d.clone()))
            .collect();
        Err(Status::invalid(&rt.group, &rt.kind, name, &causes))
    }
}

fn validate(w: Workload, rt: &ResourceType, name: &str, obj: &Value) -> Result<(), Status> {
    let mut errs = Errors::default();
    match w {
        Workload::Deployment | Workload::ReplicaSet | Workload::StatefulSet => {
            errs.nonnegative(obj, "/spec/replicas", "spec.replicas");
            selector_and_template(&mut errs, w, obj);
            pod_template(
                &mut errs,
                obj.pointer("/spec/template"),
                "spec.template",
                &["Always"],
            );
        }
        Workload::DaemonSet => {
            selector_and_template(&mut errs, w, obj);
            pod_template(
                &mut errs,
                obj.pointer("/spec/template"),
                "spec.template",
                &["Always"],
            );
        }
        Workload::Job => {
            for f in ["parallelism", "completions", "backoffLimit"] {
                errs.nonnegative(obj, &format!("/spec/{f}"), &format!("spec.{f}"));
            }
            let sel = obj.pointer("/spec/selector").filter(|s| !s.is_null());
            if sel.is_none() {
                errs.required("spec.selector", "");
            }
            template_matches(&mut errs, sel, obj);
            pod_template(
                &mut errs,
                obj.pointer("/spec/template"),
                "spec.template",
                &["OnFailure", "Never"],
            );
        }
        Workload::CronJob => {
            if obj
                .pointer("/spec/schedule")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errs.required("spec.schedule", "");
            }
            pod_template(
                &mut errs,
                obj.pointer("/spec/jobTemplate/spec/template"),
                "spec.jobTemplate.spec.template",
                &["OnFailure", "Never"],
            );
        }
        Workload::Lease => {
            if let Some(d) = obj
                .pointer("/spec/leaseDurationSeconds")
                .and_then(Value::as_i64)
                && d <= 0
            {
                errs.invalid(
                    "spec.leaseDurationSeconds",
                    &d.to_string(),
                    "must be greater than 0",
                );
            }
            errs.nonnegative(obj, "/spec/leaseTransitions", "spec.leaseTransitions");
        }
        Workload::ControllerRevision => {
            if obj.get("data").is_none_or(Value::is_null) {
                errs.required("data", "data is mandatory");
            }
            errs.nonnegative(obj, "/revision", "revision");
        }
    }
    errs.into_result(rt, name)
}

/// The apps kinds' selector rules: required, not empty, and matching the template's labels.
fn selector_and_template(errs: &mut Errors, w: Workload, obj: &Value) {
    let sel = obj.pointer("/spec/selector").filter(|s| !s.is_null());
    match sel {
        None => errs.required("spec.selector", ""),
        Some(s) => {
            let count = |k: &str| {
                s.get(k)
                    .map(|v| match v {
                        Value::Object(m) => m.len(),
                        Value::Array(a) => a.len(),
                        _ => 0,
                    })
                    .unwrap_or(0)
            };
            if count("matchLabels") + count("matchExpressions") == 0 {
                errs.invalid(
                    "spec.selector",
                    &go_empty_label_selector(s),
                    &format!("empty selector is invalid for {}", w.selector_noun()),
                );
            }
        }
    }
    template_matches(errs, sel, obj);
}

/// The template's labels must match the selector (a missing selector matches nothing; an empty
/// one is not checked).
fn template_matches(errs: &mut Errors, sel: Option<&Value>, obj: &Value) {
    let labels = obj.pointer("/spec/template/metadata/labels");
    let set: std::collections::BTreeMap<String, String> = labels
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let matches = match label_selector_as_selector(sel) {
        Err(e) => {
            errs.invalid(
                "spec.selector",
                &quote(&sel.map(Value::to_string).unwrap_or_default()),
                &format!("invalid label selector: {e}"),
            );
            return;
        }
        Ok(None) => false,
        Ok(Some(s)) => s.is_empty() || s.matches(&set),
    };
    if !matches {
        errs.invalid(
            "spec.template.metadata.labels",
            &go_string_map(labels),
            "`selector` does not match template `labels`",
        );
    }
}

/// `ValidatePodTemplateSpec`'s container checks and the kind's allowed restart policies.
fn pod_template(errs: &mut Errors, template: Option<&Value>, path: &str, restart: &[&str]) {
    let spec = template.and_then(|t| t.get("spec"));
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if containers.is_empty() {
        errs.required(&format!("{path}.spec.containers"), "");
    }
    for (i, c) in containers.iter().enumerate() {
        for f in ["name", "image"] {
            if c.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.required(&format!("{path}.spec.containers[{i}].{f}"), "");
            }
        }
    }
    let policy = spec
        .and_then(|s| s.get("restartPolicy"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !restart.contains(&policy) {
        errs.not_supported(&format!("{path}.spec.restartPolicy"), policy, restart);
    }
}

/// Go's `%#v` of a `map[string]string` (keys sorted, `(nil)` when absent).
fn go_string_map(v: Option<&Value>) -> String {
    let Some(m) = v.and_then(Value::as_object) else {
        return "map[string]string(nil)".to_string();
    };
    let mut pairs: Vec<(&String, &str)> = m
        .iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    let items: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}:{}", quote(k), quote(v)))
        .collect();
    format!("map[string]string{{{}}}", items.join(", "))
}

/// Go's `%#v` of an empty `metav1.LabelSelector`.
fn go_empty_label_selector(sel: &Value) -> String {
    let labels = match sel.get("matchLabels") {
        Some(Value::Object(_)) => "map[string]string{}",
        _ => "map[string]string(nil)",
    };
    let exprs = match sel.get("matchExpressions") {
        Some(Value::Array(_)) => "[]v1.LabelSelectorRequirement{}",
        _ => "[]v1.LabelSelectorRequirement(nil)",
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Registry;
    use crate::semantics::prepare_create as create;

    fn rt(group: &str, resource: &str) -> std::sync::Arc<ResourceType> {
        Registry::new(&[])
            .unwrap()
            .get(group, "v1", resource)
            .unwrap()
            .clone()
    }

    fn deployment(labels: Value, selector: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "selector": selector,
                "strategy": {},
                "template": {"metadata": {"labels": labels},
                             "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}}
            },
            "status": {"replicas": 9}
        })
    }

    #[test]
    fn deployment_create_defaults_as_kube() {
        let d = rt("apps", "deployments");
        let v = create(
            &d,
            Some("default"),
            deployment(
                json!({"app": "web"}),
                json!({"matchLabels": {"app": "web"}}),
            ),
            false,
        )
        .unwrap();
        assert_eq!(v["metadata"]["generation"], 1);
        assert_eq!(v["status"], json!({}), "status is reset on create");
        let spec = &v["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["progressDeadlineSeconds"], 600);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["schedulerName"], "default-scheduler");
        assert_eq!(pod["securityContext"], json!({}));
        let c = &pod["containers"][0];
        assert_eq!(
            c["imagePullPolicy"], "Always",
            "untagged images are :latest"
        );
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        // Recreate strategy gets no rollingUpdate.
        let mut body = deployment(
            json!({"app": "web"}),
            json!({"matchLabels": {"app": "web"}}),
        );
        body["spec"]["strategy"] = json!({"type": "Recreate"});
        body["spec"]["replicas"] = json!(0);
        let v = create(&d, Some("default"), body, false).unwrap();
        assert_eq!(v["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(v["spec"]["replicas"], 0);
    }

    #[test]
    fn image_tags_pick_the_pull_policy() {
        assert_eq!(image_tag("nginx"), "latest");
        assert_eq!(image_tag("nginx:1.27"), "1.27");
        assert_eq!(image_tag("registry:5000/team/app"), "latest");
        assert_eq!(image_tag("registry:5000/team/app:v2"), "v2");
        assert_eq!(image_tag("app@sha256:abc"), "");
        assert_eq!(image_tag("app:v1@sha256:abc"), "v1");
    }

    #[test]
    fn apps_selector_errors_are_kubes() {
        let d = rt("apps", "deployments");
        let e = create(
            &d,
            Some("default"),
            deployment(json!({"app": "web"}), Value::Null),
            false,
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "Deployment.apps \"web\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`]"
        );
        let e = create(
            &d,
            Some("default"),
            deployment(
                json!({"app": "web"}),
                json!({"matchLabels": {"app": "api"}}),
            ),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
        );
        let e = create(
            &d,
            Some("default"),
            deployment(Value::Null, json!({})),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "Deployment.apps \"web\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
        );
        let mut body = deployment(
            json!({"app": "web"}),
            json!({"matchLabels": {"app": "web"}}),
        );
        body["spec"]["replicas"] = json!(-1);
        body["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        body["spec"]["template"]["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("image");
        let e = create(&d, Some("default"), body, false).unwrap_err();
        assert_eq!(
            e.message,
            "Deployment.apps \"web\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.containers[0].image: Required value, spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"]"
        );
        let causes = &e.details.as_ref().unwrap().causes;
        assert_eq!(causes[0].reason, "FieldValueInvalid");
        assert_eq!(causes[1].field, "spec.template.spec.containers[0].image");
        assert_eq!(causes[2].reason, "FieldValueNotSupported");
        let mut body = deployment(json!({}), json!({}));
        body["spec"] = json!(3);
        let e = create(&d, Some("default"), body, false).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal number into Go struct field Deployment.spec of type v1.DeploymentSpec"
            )
        );
    }

    #[test]
    fn job_create_generates_selector_and_labels() {
        let j = rt("batch", "jobs");
        let v = create(
            &j,
            Some("default"),
            json!({"metadata": {"name": "pi"}, "spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5.34"}]}}}}),
            false,
        )
        .unwrap();
        let uid = v["metadata"]["uid"].as_str().unwrap();
        let generated = json!({
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": "pi",
            "controller-uid": uid,
            "job-name": "pi",
        });
        assert_eq!(v["spec"]["template"]["metadata"]["labels"], generated);
        assert_eq!(
            serde_json::to_string(&v["spec"]["template"]["metadata"]["labels"]).unwrap(),
            serde_json::to_string(&generated).unwrap(),
            "labels are in Go's (sorted) map order"
        );
        assert_eq!(
            v["metadata"]["labels"], generated,
            "the job takes its template's labels"
        );
        assert_eq!(
            v["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        );
        assert!(v["spec"].get("manualSelector").is_none());
        for (k, want) in [
            ("completions", json!(1)),
            ("parallelism", json!(1)),
            ("backoffLimit", json!(6)),
            ("completionMode", json!("NonIndexed")),
            ("suspend", json!(false)),
            ("podReplacementPolicy", json!("TerminatingOrFailed")),
        ] {
            assert_eq!(v["spec"][k], want, "{k}");
        }
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(v["metadata"]["generation"], 1);
        assert_eq!(v["status"], json!({}));

        // User labels on the template: the job keeps those, not the generated ones.
        let v = create(
            &j,
            Some("default"),
            json!({"metadata": {"name": "p2"}, "spec": {"parallelism": 3, "template": {
                "metadata": {"labels": {"app": "pi"}},
                "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "pi", "image": "perl"}]}}}}),
            false,
        )
        .unwrap();
        assert_eq!(v["metadata"]["labels"], json!({"app": "pi"}));
        assert!(
            v["spec"].get("completions").is_none(),
            "parallelism was set"
        );
        assert_eq!(
            v["spec"]["template"]["metadata"]["labels"]["job-name"],
            "p2"
        );

        let e = create(
            &j,
            Some("default"),
            json!({"metadata": {"name": "bad"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "Job.batch \"bad\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
        );
        let e = create(
            &j,
            Some("default"),
            json!({"metadata": {"name": "m"}, "spec": {"manualSelector": true, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "Job.batch \"m\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: map[string]string(nil): `selector` does not match template `labels`]"
        );
    }

    #[test]
    fn cronjob_lease_and_revision_rules() {
        let cj = rt("batch", "cronjobs");
        let v = create(
            &cj,
            Some("default"),
            json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}}}),
            false,
        )
        .unwrap();
        assert_eq!(v["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(v["spec"]["suspend"], false);
        assert_eq!(v["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(v["spec"]["failedJobsHistoryLimit"], 1);
        assert!(
            v["spec"]["jobTemplate"]["spec"]
                .get("backoffLimit")
                .is_none()
        );
        let e = create(
            &cj,
            Some("default"),
            json!({"metadata": {"name": "c"}, "spec": {}}),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "CronJob.batch \"c\" is invalid: [spec.schedule: Required value, spec.jobTemplate.spec.template.spec.containers: Required value, spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: \"\": supported values: \"OnFailure\", \"Never\"]"
        );

        let lease = rt("coordination.k8s.io", "leases");
        let v = create(
            &lease,
            Some("kube-node-lease"),
            json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}),
            false,
        )
        .unwrap();
        assert!(v["metadata"].get("generation").is_none());
        assert!(v.get("status").is_none());
        let e = create(
            &lease,
            Some("x"),
            json!({"metadata": {"name": "n1"}, "spec": {"leaseDurationSeconds": 0}}),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "Lease.coordination.k8s.io \"n1\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
        );
        let cr = rt("apps", "controllerrevisions");
        let e = create(
            &cr,
            Some("x"),
            json!({"metadata": {"name": "r"}, "revision": -2}),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "ControllerRevision.apps \"r\" is invalid: [data: Required value: data is mandatory, revision: Invalid value: -2: must be greater than or equal to 0]"
        );
    }

    #[test]
    fn daemonset_and_statefulset_defaults() {
        let ds = rt("apps", "daemonsets");
        let body = json!({"metadata": {"name": "agent"}, "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "agent:1", "ports": [{"containerPort": 80}]}]}}}});
        let v = create(&ds, Some("default"), body, false).unwrap();
        assert_eq!(v["metadata"]["annotations"][TEMPLATE_GENERATION], "1");
        assert_eq!(
            v["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(v["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"],
            "TCP"
        );
        let sts = rt("apps", "statefulsets");
        let body = json!({"metadata": {"name": "db"}, "spec": {
            "selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}}}});
        let v = create(&sts, Some("default"), body, false).unwrap();
        let spec = &v["spec"];
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(
            (&spec["replicas"], &spec["revisionHistoryLimit"]),
            (&json!(1), &json!(10))
        );
        let e = create(
            &ds,
            Some("default"),
            json!({"metadata": {"name": "x", "annotations": {TEMPLATE_GENERATION: "one"}}}),
            false,
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message
                .ends_with("strconv.ParseInt: parsing \"one\": invalid syntax"),
            "{}",
            e.message
        );
    }
}
