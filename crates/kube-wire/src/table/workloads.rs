//! The Table printers of the workload kinds, as kube-apiserver's
//! `pkg/printers/internalversion/printers.go` prints them: `apps/v1` Deployment, ReplicaSet,
//! StatefulSet, DaemonSet and ControllerRevision, `batch/v1` Job and CronJob, core
//! ReplicationController and PodTemplate, `autoscaling` HorizontalPodAutoscaler, `policy/v1`
//! PodDisruptionBudget, `coordination.k8s.io/v1` Lease, and the `autoscaling/v1` Scale a
//! `scale` subresource answers with.
//!
//! Column definitions and cells only; laying out the Table is [`super`]'s. Cells are read from
//! the v1 JSON form as the apiserver would decode it: a `spec.replicas` absent from the JSON
//! prints as the defaulter's 1. kube prints an HPA from its internal type whichever version
//! was asked for; its cells here come from either served form: `autoscaling/v2` converts field
//! for field, `autoscaling/v1` as kube converts it (the metrics annotations, then the CPU
//! utilization fields), and without any metric the defaulter's 80% CPU utilization. Pure: no
//! I/O; the clock is an argument.

use serde_json::{Value, json};

use super::cells::{
    annotation, arr, being_deleted, condition_is_true, format_label_selector, format_labels,
    go_lower, label_selector_as_selector, name_of, present, quantity, quantity_or_zero, str_at,
};
use super::{D_NAME, age, age_col, boolean, integer, name_col, since, text, wide};

// The swagger doc strings kube's column definitions carry (k8s.io/api apps/v1, batch/v1,
// coordination/v1, autoscaling/v1, autoscaling/v2 and core/v1 types_swagger_doc_generated.go:
// kube 1.36's printers read them from the v1 types, where older printers read extensions/v1beta1
// and apps/v1beta1, whose texts differ for the Deployment, ReplicaSet and DaemonSet selectors,
// DaemonSet's numberReady and ControllerRevision's revision), and the printers' own descriptions.
const D_CONTAINERS: &str = "Names of each container in the template.";
const D_IMAGES: &str = "Images referenced by each container in the template.";
const D_READY_PODS: &str = "Number of the pod with ready state";
const D_DEPLOY_UPDATED: &str = "Total number of non-terminating pods targeted by this deployment that have the desired template spec.";
const D_DEPLOY_AVAILABLE: &str = "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.";
const D_DEPLOY_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.";
const D_RS_DESIRED: &str = "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset";
const D_RS_CURRENT: &str = "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset";
const D_RS_READY: &str =
    "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.";
const D_RS_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_DS_DESIRED: &str = "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
const D_DS_CURRENT: &str = "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
const D_DS_READY: &str = "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.";
const D_DS_UPDATED: &str = "The total number of nodes that are running updated daemon pod";
const D_DS_AVAILABLE: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)";
const D_NODE_SELECTOR: &str = "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/";
const D_DS_SELECTOR: &str = "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_JOB_STATUS: &str = "Status of the job.";
const D_JOB_COMPLETIONS: &str = "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.";
const D_JOB_DURATION: &str = "Time required to complete the job.";
const D_JOB_SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_CJ_SCHEDULE: &str = "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.";
const D_CJ_TIMEZONE: &str = "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones";
const D_CJ_SUSPEND: &str = "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.";
const D_CJ_ACTIVE: &str = "A list of pointers to currently running jobs.";
const D_CJ_LAST_SCHEDULE: &str =
    "Information when was the last time the job was successfully scheduled.";
const D_LEASE_HOLDER: &str = "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.";
const D_CR_CONTROLLER: &str = "Controller of the object";
const D_CR_REVISION: &str = "Revision indicates the revision of the state represented by Data.";
const D_SCALE_DESIRED: &str = "replicas is the desired number of instances for the scaled object.";
const D_SCALE_AVAILABLE: &str =
    "replicas is the actual number of observed instances of the scaled object.";
const D_RC_DESIRED: &str = "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller";
const D_RC_CURRENT: &str = "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller";
const D_RC_READY: &str = "The number of ready replicas for this replication controller.";
const D_RC_SELECTOR: &str = "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_HPA_REFERENCE: &str = "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.";
const D_HPA_TARGETS: &str = "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization.";
const D_HPA_MIN: &str = "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.";
const D_HPA_MAX: &str = "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.";
const D_HPA_REPLICAS: &str = "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.";
const D_POD_LABELS: &str = "The labels for the pod template.";
const D_PDB_MIN: &str = "The minimum number of pods that must be available.";
const D_PDB_MAX: &str = "The maximum number of pods that may be unavailable.";
const D_PDB_ALLOWED: &str = "Calculated number of pods that may be disrupted at this time.";

/// The kinds printed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    Lease,
    ControllerRevision,
    Scale,
    ReplicationController,
    PodTemplate,
    HorizontalPodAutoscaler,
    PodDisruptionBudget,
}

/// Every (group, kind) printed here.
pub(super) const KINDS: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ControllerRevision"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("coordination.k8s.io", "Lease"),
    ("autoscaling", "Scale"),
    ("", "ReplicationController"),
    ("", "PodTemplate"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("policy", "PodDisruptionBudget"),
];

/// The kind printed for `(group, kind)`, if it is one of this module's.
pub(super) fn kind_for(group: &str, kind: &str) -> Option<Kind> {
    Some(match (group, kind) {
        ("apps", "Deployment") => Kind::Deployment,
        ("apps", "ReplicaSet") => Kind::ReplicaSet,
        ("apps", "StatefulSet") => Kind::StatefulSet,
        ("apps", "DaemonSet") => Kind::DaemonSet,
        ("apps", "ControllerRevision") => Kind::ControllerRevision,
        ("batch", "Job") => Kind::Job,
        ("batch", "CronJob") => Kind::CronJob,
        ("coordination.k8s.io", "Lease") => Kind::Lease,
        ("autoscaling", "Scale") => Kind::Scale,
        ("", "ReplicationController") => Kind::ReplicationController,
        ("", "PodTemplate") => Kind::PodTemplate,
        ("autoscaling", "HorizontalPodAutoscaler") => Kind::HorizontalPodAutoscaler,
        ("policy", "PodDisruptionBudget") => Kind::PodDisruptionBudget,
        _ => return None,
    })
}

/// The column definitions of `kind`.
pub(super) fn columns(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::Deployment => vec![
            name_col(),
            text("Ready", D_READY_PODS),
            text("Up-to-date", D_DEPLOY_UPDATED),
            text("Available", D_DEPLOY_AVAILABLE),
            age_col(),
            wide("Containers", D_CONTAINERS),
            wide("Images", D_IMAGES),
            wide("Selector", D_DEPLOY_SELECTOR),
        ],
        Kind::ReplicaSet => vec![
            name_col(),
            integer("Desired", D_RS_DESIRED),
            integer("Current", D_RS_CURRENT),
            integer("Ready", D_RS_READY),
            age_col(),
            wide("Containers", D_CONTAINERS),
            wide("Images", D_IMAGES),
            wide("Selector", D_RS_SELECTOR),
        ],
        Kind::StatefulSet => vec![
            name_col(),
            text("Ready", D_READY_PODS),
            age_col(),
            wide("Containers", D_CONTAINERS),
            wide("Images", D_IMAGES),
        ],
        Kind::DaemonSet => vec![
            name_col(),
            integer("Desired", D_DS_DESIRED),
            integer("Current", D_DS_CURRENT),
            integer("Ready", D_DS_READY),
            integer("Up-to-date", D_DS_UPDATED),
            integer("Available", D_DS_AVAILABLE),
            text("Node Selector", D_NODE_SELECTOR),
            age_col(),
            wide("Containers", D_CONTAINERS),
            wide("Images", D_IMAGES),
            wide("Selector", D_DS_SELECTOR),
        ],
        Kind::Job => vec![
            name_col(),
            text("Status", D_JOB_STATUS),
            text("Completions", D_JOB_COMPLETIONS),
            text("Duration", D_JOB_DURATION),
            age_col(),
            wide("Containers", D_CONTAINERS),
            wide("Images", D_IMAGES),
            wide("Selector", D_JOB_SELECTOR),
        ],
        Kind::CronJob => vec![
            name_col(),
            text("Schedule", D_CJ_SCHEDULE),
            text("Timezone", D_CJ_TIMEZONE),
            boolean("Suspend", D_CJ_SUSPEND),
            integer("Active", D_CJ_ACTIVE),
            text("Last Schedule", D_CJ_LAST_SCHEDULE),
            age_col(),
            wide("Containers", D_CONTAINERS),
            wide("Images", D_IMAGES),
            wide("Selector", D_JOB_SELECTOR),
        ],
        Kind::Lease => vec![name_col(), text("Holder", D_LEASE_HOLDER), age_col()],
        Kind::ControllerRevision => vec![
            name_col(),
            text("Controller", D_CR_CONTROLLER),
            text("Revision", D_CR_REVISION),
            age_col(),
        ],
        // kube's Scale columns give the name no `name` format.
        Kind::Scale => vec![
            text("Name", D_NAME),
            integer("Desired", D_SCALE_DESIRED),
            integer("Available", D_SCALE_AVAILABLE),
            age_col(),
        ],
        Kind::ReplicationController => vec![
            name_col(),
            integer("Desired", D_RC_DESIRED),
            integer("Current", D_RC_CURRENT),
            integer("Ready", D_RC_READY),
            age_col(),
            wide("Containers", D_CONTAINERS),
            wide("Images", D_IMAGES),
            wide("Selector", D_RC_SELECTOR),
        ],
        // No age, and every column is priority 0.
        Kind::PodTemplate => vec![
            name_col(),
            text("Containers", D_CONTAINERS),
            text("Images", D_IMAGES),
            text("Pod Labels", D_POD_LABELS),
        ],
        // MaxPods and Replicas are string columns, yet their cells are integers.
        Kind::HorizontalPodAutoscaler => vec![
            name_col(),
            text("Reference", D_HPA_REFERENCE),
            text("Targets", D_HPA_TARGETS),
            text("MinPods", D_HPA_MIN),
            text("MaxPods", D_HPA_MAX),
            text("Replicas", D_HPA_REPLICAS),
            age_col(),
        ],
        Kind::PodDisruptionBudget => vec![
            name_col(),
            text("Min Available", D_PDB_MIN),
            text("Max Unavailable", D_PDB_MAX),
            integer("Allowed Disruptions", D_PDB_ALLOWED),
            age_col(),
        ],
    }
}

/// One row's cells for `obj`, one per column of [`columns`] (wide ones included).
pub(super) fn cells(kind: Kind, obj: &Value, now: i64) -> Vec<Value> {
    let name = json!(name_of(obj));
    match kind {
        Kind::Deployment => {
            let (names, images) = containers(obj.pointer("/spec/template/spec/containers"));
            // LabelSelectorAsSelector(...).String(), "<invalid>" when it does not convert.
            let selector = match label_selector_as_selector(obj.pointer("/spec/selector")) {
                Ok(s) => s.map(|s| s.to_string()).unwrap_or_default(),
                Err(_) => "<invalid>".to_string(),
            };
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    int(obj, "/status/readyReplicas"),
                    replicas(obj)
                )),
                json!(int(obj, "/status/updatedReplicas")),
                json!(int(obj, "/status/availableReplicas")),
                json!(age(obj, now)),
                json!(names),
                json!(images),
                json!(selector),
            ]
        }
        Kind::ReplicaSet => {
            let (names, images) = containers(obj.pointer("/spec/template/spec/containers"));
            vec![
                name,
                json!(replicas(obj)),
                json!(int(obj, "/status/replicas")),
                json!(int(obj, "/status/readyReplicas")),
                json!(age(obj, now)),
                json!(names),
                json!(images),
                json!(format_label_selector(obj.pointer("/spec/selector"))),
            ]
        }
        Kind::StatefulSet => {
            let (names, images) = containers(obj.pointer("/spec/template/spec/containers"));
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    int(obj, "/status/readyReplicas"),
                    replicas(obj)
                )),
                json!(age(obj, now)),
                json!(names),
                json!(images),
            ]
        }
        Kind::DaemonSet => {
            let (names, images) = containers(obj.pointer("/spec/template/spec/containers"));
            vec![
                name,
                json!(int(obj, "/status/desiredNumberScheduled")),
                json!(int(obj, "/status/currentNumberScheduled")),
                json!(int(obj, "/status/numberReady")),
                json!(int(obj, "/status/updatedNumberScheduled")),
                json!(int(obj, "/status/numberAvailable")),
                json!(format_labels(
                    obj.pointer("/spec/template/spec/nodeSelector")
                )),
                json!(age(obj, now)),
                json!(names),
                json!(images),
                json!(format_label_selector(obj.pointer("/spec/selector"))),
            ]
        }
        Kind::Job => {
            let (names, images) = containers(obj.pointer("/spec/template/spec/containers"));
            vec![
                name,
                json!(job_status(obj)),
                json!(job_completions(obj)),
                json!(job_duration(obj, now)),
                json!(age(obj, now)),
                json!(names),
                json!(images),
                json!(format_label_selector(obj.pointer("/spec/selector"))),
            ]
        }
        Kind::CronJob => {
            let (names, images) =
                containers(obj.pointer("/spec/jobTemplate/spec/template/spec/containers"));
            let last = match present(obj.pointer("/status/lastScheduleTime")) {
                Some(t) => since(Some(t), now),
                None => "<none>".to_string(),
            };
            let time_zone = obj
                .pointer("/spec/timeZone")
                .and_then(Value::as_str)
                .unwrap_or("<none>");
            vec![
                name,
                json!(str_at(obj, "/spec/schedule")),
                json!(time_zone),
                json!(bool_ptr(obj.pointer("/spec/suspend"))),
                json!(arr(obj.pointer("/status/active")).len()),
                json!(last),
                json!(age(obj, now)),
                json!(names),
                json!(images),
                json!(format_label_selector(
                    obj.pointer("/spec/jobTemplate/spec/selector")
                )),
            ]
        }
        Kind::Lease => vec![
            name,
            json!(str_at(obj, "/spec/holderIdentity")),
            json!(age(obj, now)),
        ],
        Kind::ControllerRevision => vec![
            name,
            json!(controller_of(obj)),
            json!(int(obj, "/revision")),
            json!(age(obj, now)),
        ],
        Kind::Scale => vec![
            name,
            json!(int(obj, "/spec/replicas")),
            json!(int(obj, "/status/replicas")),
            json!(age(obj, now)),
        ],
        Kind::ReplicationController => {
            let (names, images) = containers(obj.pointer("/spec/template/spec/containers"));
            vec![
                name,
                json!(replicas(obj)),
                json!(int(obj, "/status/replicas")),
                json!(int(obj, "/status/readyReplicas")),
                json!(age(obj, now)),
                json!(names),
                json!(images),
                json!(rc_selector(obj)),
            ]
        }
        Kind::PodTemplate => {
            let (names, images) = containers(obj.pointer("/template/spec/containers"));
            vec![
                name,
                json!(names),
                json!(images),
                json!(format_labels(obj.pointer("/template/metadata/labels"))),
            ]
        }
        Kind::HorizontalPodAutoscaler => vec![
            name,
            json!(format!(
                "{}/{}",
                str_at(obj, "/spec/scaleTargetRef/kind"),
                str_at(obj, "/spec/scaleTargetRef/name")
            )),
            json!(hpa_targets(obj)),
            json!(hpa_min_pods(obj)),
            json!(int(obj, "/spec/maxReplicas")),
            json!(int(obj, "/status/currentReplicas")),
            json!(age(obj, now)),
        ],
        Kind::PodDisruptionBudget => vec![
            name,
            json!(int_or_string(obj.pointer("/spec/minAvailable"))),
            json!(int_or_string(obj.pointer("/spec/maxUnavailable"))),
            json!(int(obj, "/status/disruptionsAllowed")),
            json!(age(obj, now)),
        ],
    }
}

fn int(obj: &Value, path: &str) -> i64 {
    obj.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

/// An integer pointer the v1 defaulter fills: `default` when unset, else its value.
fn defaulted_int(v: Option<&Value>, default: i64) -> i64 {
    present(v).map_or(default, |v| v.as_i64().unwrap_or(0))
}

/// `spec.replicas`, which the v1 defaulter sets to 1 when absent.
fn replicas(obj: &Value) -> i64 {
    defaulted_int(obj.pointer("/spec/replicas"), 1)
}

/// kube's `layoutContainerCells`: the names and the images, each joined by `,`.
fn containers(list: Option<&Value>) -> (String, String) {
    let list = arr(list);
    let names: Vec<&str> = list.iter().map(|c| str_at(c, "/name")).collect();
    let images: Vec<&str> = list.iter().map(|c| str_at(c, "/image")).collect();
    (names.join(","), images.join(","))
}

/// kube's `printBoolPtr`: `True`, `False`, or `<unset>`.
fn bool_ptr(v: Option<&Value>) -> &'static str {
    match v.and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    }
}

/// Whether the job has a condition of type `ty` whose status is `True` (kube's
/// `hasJobCondition` looks at the first condition of that type only).
fn job_condition(obj: &Value, ty: &str) -> bool {
    condition_is_true(arr(obj.pointer("/status/conditions")), ty)
}

fn job_status(obj: &Value) -> &'static str {
    let deleting = being_deleted(obj);
    if job_condition(obj, "Complete") {
        "Complete"
    } else if job_condition(obj, "Failed") {
        "Failed"
    } else if deleting {
        "Terminating"
    } else if job_condition(obj, "Suspended") {
        "Suspended"
    } else if job_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

fn job_completions(obj: &Value) -> String {
    let succeeded = int(obj, "/status/succeeded");
    match obj.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let parallelism = int(obj, "/spec/parallelism");
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    }
}

/// Empty before the job started, the time since its start while it runs, its run time once
/// completed.
fn job_duration(obj: &Value, now: i64) -> String {
    let Some(start) = super::parse_time(obj.pointer("/status/startTime")) else {
        return String::new();
    };
    match super::parse_time(obj.pointer("/status/completionTime")) {
        None => super::since_ns(Some(start), now),
        Some(done) => {
            let d = (done - start).clamp(i64::MIN as i128, i64::MAX as i128);
            super::human_duration_nanos(d as i64)
        }
    }
}

/// `metav1.GetControllerOf` printed as `kind.group/name` in lower case (`statefulset.apps/web`),
/// `<none>` without a controller reference.
fn controller_of(obj: &Value) -> String {
    let Some(owner) = arr(obj.pointer("/metadata/ownerReferences"))
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
    else {
        return "<none>".to_string();
    };
    let name = str_at(owner, "/name");
    let kind = str_at(owner, "/kind");
    // schema.ParseGroupVersion: "v1" has no group, "apps/v1" has "apps".
    let group = str_at(owner, "/apiVersion")
        .split_once('/')
        .map(|(g, _)| g)
        .unwrap_or("");
    let group_kind = match (kind, group) {
        ("", "") => return name.to_string(),
        (k, "") => k.to_string(),
        (k, g) => format!("{k}.{g}"),
    };
    format!("{}/{name}", go_lower(&group_kind))
}

/// A ReplicationController's selector as kube prints it: the v1 defaulter fills an empty
/// selector with the pod template's labels.
fn rc_selector(obj: &Value) -> String {
    let selector = obj.pointer("/spec/selector");
    let has_selector = selector
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty());
    if has_selector {
        format_labels(selector)
    } else {
        format_labels(obj.pointer("/spec/template/metadata/labels"))
    }
}

/// A PodDisruptionBudget's `minAvailable` or `maxUnavailable` (an `IntOrString`) as Go's
/// `String()` prints it, `N/A` when unset.
fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(n @ Value::Number(_)) => n
            .as_i64()
            .map_or_else(|| "N/A".to_string(), |n| n.to_string()),
        _ => "N/A".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// HorizontalPodAutoscaler: the internal object kube prints, read from autoscaling/v2 or
// autoscaling/v1 JSON.

/// The annotation in which autoscaling/v1 keeps the metrics it has no field for.
const HPA_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// The annotation in which autoscaling/v1 keeps every current metric.
const HPA_CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// The CPU utilization the defaulter targets when an HPA has no metric.
const HPA_DEFAULT_CPU_UTILIZATION: i64 = 80;

/// A metric's target (spec) or current value (status): `MetricTarget` / `MetricValueStatus`.
/// Quantities are kept as strings, `None` for a nil `*Quantity`.
#[derive(Clone, Debug, Default, PartialEq)]
struct MetricValues {
    value: Option<String>,
    average_value: Option<String>,
    average_utilization: Option<i64>,
}

/// One `MetricSpec` or `MetricStatus` of the internal type: its type and the sources it
/// carries (`None` for a nil source pointer); resource sources carry their resource name.
#[derive(Clone, Debug, Default, PartialEq)]
struct Metric {
    ty: String,
    external: Option<MetricValues>,
    pods: Option<MetricValues>,
    object: Option<MetricValues>,
    resource: Option<(String, MetricValues)>,
    container_resource: Option<(String, MetricValues)>,
}

impl Metric {
    /// The CPU utilization metric the v1 fields and the defaulter stand for.
    fn cpu_utilization(utilization: i64) -> Metric {
        Metric {
            ty: "Resource".to_string(),
            resource: Some((
                "cpu".to_string(),
                MetricValues {
                    average_utilization: Some(utilization),
                    ..MetricValues::default()
                },
            )),
            ..Metric::default()
        }
    }
}

/// An object member that is present and not null (a non-nil Go pointer).
fn member<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    present(v.get(key))
}

fn opt_int(v: Option<&Value>) -> Option<i64> {
    v.and_then(Value::as_i64)
}

/// An autoscaling/v2 `MetricTarget` (`values = "target"`) or `MetricValueStatus`
/// (`values = "current"`) of a source.
fn v2_values(source: &Value, values: &str) -> MetricValues {
    let v = source.get(values).unwrap_or(&Value::Null);
    MetricValues {
        value: quantity(v.get("value")),
        average_value: quantity(v.get("averageValue")),
        average_utilization: opt_int(v.get("averageUtilization")),
    }
}

/// An autoscaling/v2 `MetricSpec` or `MetricStatus` (`values` as for [`v2_values`]), which
/// converts to the internal type field for field.
fn v2_metric(m: &Value, values: &str) -> Metric {
    let named =
        |key: &str| member(m, key).map(|s| (str_at(s, "/name").to_string(), v2_values(s, values)));
    Metric {
        ty: str_at(m, "/type").to_string(),
        external: member(m, "external").map(|s| v2_values(s, values)),
        pods: member(m, "pods").map(|s| v2_values(s, values)),
        object: member(m, "object").map(|s| v2_values(s, values)),
        resource: named("resource"),
        container_resource: named("containerResource"),
    }
}

/// An autoscaling/v1 `MetricSpec` (from the metrics annotation) as kube converts it: the
/// `targetValue` of an object source and the `targetAverageValue` of a pods source are values,
/// not pointers, so they convert to a quantity even when absent.
fn v1_metric_spec(m: &Value) -> Metric {
    let resource = |s: &Value| {
        (
            str_at(s, "/name").to_string(),
            MetricValues {
                average_value: quantity(s.get("targetAverageValue")),
                average_utilization: opt_int(s.get("targetAverageUtilization")),
                ..MetricValues::default()
            },
        )
    };
    Metric {
        ty: str_at(m, "/type").to_string(),
        external: member(m, "external").map(|s| MetricValues {
            value: quantity(s.get("targetValue")),
            average_value: quantity(s.get("targetAverageValue")),
            ..MetricValues::default()
        }),
        pods: member(m, "pods").map(|s| MetricValues {
            average_value: Some(quantity_or_zero(s.get("targetAverageValue"))),
            ..MetricValues::default()
        }),
        object: member(m, "object").map(|s| MetricValues {
            value: Some(quantity_or_zero(s.get("targetValue"))),
            average_value: quantity(s.get("averageValue")),
            ..MetricValues::default()
        }),
        resource: member(m, "resource").map(resource),
        container_resource: member(m, "containerResource").map(resource),
    }
}

/// An autoscaling/v1 `MetricStatus` (from the current-metrics annotation) as kube converts it.
fn v1_metric_status(m: &Value) -> Metric {
    let resource = |s: &Value| {
        (
            str_at(s, "/name").to_string(),
            MetricValues {
                average_value: Some(quantity_or_zero(s.get("currentAverageValue"))),
                average_utilization: opt_int(s.get("currentAverageUtilization")),
                ..MetricValues::default()
            },
        )
    };
    Metric {
        ty: str_at(m, "/type").to_string(),
        external: member(m, "external").map(|s| MetricValues {
            value: Some(quantity_or_zero(s.get("currentValue"))),
            average_value: quantity(s.get("currentAverageValue")),
            ..MetricValues::default()
        }),
        pods: member(m, "pods").map(|s| MetricValues {
            average_value: Some(quantity_or_zero(s.get("currentAverageValue"))),
            ..MetricValues::default()
        }),
        object: member(m, "object").map(|s| MetricValues {
            value: Some(quantity_or_zero(s.get("currentValue"))),
            average_value: quantity(s.get("averageValue")),
            ..MetricValues::default()
        }),
        resource: member(m, "resource").map(resource),
        container_resource: member(m, "containerResource").map(resource),
    }
}

/// The metric list an autoscaling/v1 annotation holds, `None` when the annotation is absent
/// or does not decode (kube then ignores it). JSON `null` decodes to no metric.
fn v1_annotation_metrics(
    obj: &Value,
    key: &str,
    convert: fn(&Value) -> Metric,
) -> Option<Vec<Metric>> {
    let raw = annotation(obj, key)?;
    match serde_json::from_str::<Value>(raw).ok()? {
        Value::Null => Some(Vec::new()),
        Value::Array(items) if items.iter().all(Value::is_object) => {
            Some(items.iter().map(convert).collect())
        }
        _ => None,
    }
}

/// Whether an HPA is in its autoscaling/v1 form: by its `apiVersion`, or, without one, by
/// the v1-only fields it has and the v2 ones it lacks.
fn hpa_is_v1(obj: &Value) -> bool {
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(api_version) => api_version == "autoscaling/v1",
        None => {
            obj.pointer("/spec/metrics").is_none()
                && obj.pointer("/status/currentMetrics").is_none()
                && (obj
                    .pointer("/spec/targetCPUUtilizationPercentage")
                    .is_some()
                    || obj
                        .pointer("/status/currentCPUUtilizationPercentage")
                        .is_some())
        }
    }
}

/// The internal object's `spec.metrics` and `status.currentMetrics`, defaults applied (no
/// metric at all means the defaulter's 80% CPU utilization).
fn hpa_metrics(obj: &Value) -> (Vec<Metric>, Vec<Metric>) {
    let (mut specs, statuses) = if hpa_is_v1(obj) {
        hpa_v1_metrics(obj)
    } else {
        let convert = |path: &str, values: &str| -> Vec<Metric> {
            arr(obj.pointer(path))
                .iter()
                .map(|m| v2_metric(m, values))
                .collect()
        };
        (
            convert("/spec/metrics", "target"),
            convert("/status/currentMetrics", "current"),
        )
    };
    if specs.is_empty() {
        specs.push(Metric::cpu_utilization(HPA_DEFAULT_CPU_UTILIZATION));
    }
    (specs, statuses)
}

/// autoscaling/v1's metrics as kube converts them: the annotation's metrics, then the CPU
/// utilization target; the current-metrics annotation, else the current CPU utilization.
fn hpa_v1_metrics(obj: &Value) -> (Vec<Metric>, Vec<Metric>) {
    let cpu = |path: &str| opt_int(obj.pointer(path)).map(Metric::cpu_utilization);
    let mut specs =
        v1_annotation_metrics(obj, HPA_METRICS_ANNOTATION, v1_metric_spec).unwrap_or_default();
    specs.extend(cpu("/spec/targetCPUUtilizationPercentage"));
    let statuses = v1_annotation_metrics(obj, HPA_CURRENT_METRICS_ANNOTATION, v1_metric_status)
        .unwrap_or_else(|| {
            cpu("/status/currentCPUUtilizationPercentage")
                .into_iter()
                .collect()
        });
    (specs, statuses)
}

/// Go's `%s` of a `*Quantity`: `<nil>` for nil.
fn shown(q: &Option<String>) -> &str {
    q.as_deref().unwrap_or("<nil>")
}

/// An external or object metric: `current/target (avg)` for an average-value target, else
/// `current/target` of values; `<unknown>` while the status has no such source.
fn value_target(target: &MetricValues, current: Option<&MetricValues>) -> String {
    if let Some(average) = &target.average_value {
        let current = current
            .and_then(|c| c.average_value.as_deref())
            .unwrap_or("<unknown>");
        format!("{current}/{average} (avg)")
    } else {
        let current = current.map_or("<unknown>", |c| shown(&c.value));
        format!("{current}/{}", shown(&target.value))
    }
}

/// A resource or container-resource metric: `name: current/target` of average values, or of
/// utilizations (`<auto>` without a target utilization).
fn resource_target(name: &str, target: &MetricValues, current: Option<&MetricValues>) -> String {
    if let Some(average) = &target.average_value {
        let current = current.map_or("<unknown>", |c| shown(&c.average_value));
        format!("{name}: {current}/{average}")
    } else {
        let current = current
            .and_then(|c| c.average_utilization)
            .map_or_else(|| "<unknown>".to_string(), |u| format!("{u}%"));
        let target = target
            .average_utilization
            .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
        format!("{name}: {current}/{target}")
    }
}

/// One metric of the Targets cell; `status` is the current metric at the same index.
fn hpa_target(spec: &Metric, status: Option<&Metric>) -> String {
    let zero = MetricValues::default();
    let unnamed = (String::new(), MetricValues::default());
    match spec.ty.as_str() {
        "External" => value_target(
            spec.external.as_ref().unwrap_or(&zero),
            status.and_then(|s| s.external.as_ref()),
        ),
        "Pods" => {
            let target = spec.pods.as_ref().unwrap_or(&zero);
            let current = status
                .and_then(|s| s.pods.as_ref())
                .map_or("<unknown>", |c| shown(&c.average_value));
            format!("{current}/{}", shown(&target.average_value))
        }
        "Object" => value_target(
            spec.object.as_ref().unwrap_or(&zero),
            status.and_then(|s| s.object.as_ref()),
        ),
        "Resource" => {
            let (name, target) = spec.resource.as_ref().unwrap_or(&unnamed);
            resource_target(
                name,
                target,
                status.and_then(|s| s.resource.as_ref()).map(|r| &r.1),
            )
        }
        "ContainerResource" => {
            let (name, target) = spec.container_resource.as_ref().unwrap_or(&unnamed);
            let current = status
                .and_then(|s| s.container_resource.as_ref())
                .map(|r| &r.1);
            resource_target(name, target, current)
        }
        _ => "<unknown type>".to_string(),
    }
}

/// kube's `formatHPAMetrics`: the first two metrics joined by `, `, then `+ N more...`.
fn hpa_targets(obj: &Value) -> String {
    const MAX: usize = 2;
    let (specs, statuses) = hpa_metrics(obj);
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .take(MAX)
        .map(|(i, spec)| hpa_target(spec, statuses.get(i)))
        .collect();
    let joined = list.join(", ");
    if specs.len() > MAX {
        format!("{joined} + {} more...", specs.len() - MAX)
    } else {
        joined
    }
}

/// The HPA's `spec.minReplicas` (the defaulter's 1 when absent), printed as a string.
fn hpa_min_pods(obj: &Value) -> String {
    defaulted_int(obj.pointer("/spec/minReplicas"), 1).to_string()
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{NOW, bare_row, named_cols, names, ts};
    use super::super::{TablePrinter, column_definitions, has_printer, row_cells};
    use super::*;

    #[test]
    fn every_workload_kind_has_a_printer() {
        for (g, k) in [
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("apps", "ControllerRevision"),
            ("batch", "Job"),
            ("batch", "CronJob"),
            ("coordination.k8s.io", "Lease"),
            ("autoscaling", "Scale"),
            ("", "ReplicationController"),
            ("", "PodTemplate"),
            ("autoscaling", "HorizontalPodAutoscaler"),
            ("policy", "PodDisruptionBudget"),
        ] {
            assert!(has_printer(g, k), "{g} {k}");
            // One cell per column, for an empty object too.
            let n = column_definitions(g, k).as_array().unwrap().len();
            let cells = row_cells(g, k, &json!({}), NOW);
            assert_eq!(cells.as_array().unwrap().len(), n, "{g} {k}");
        }
        assert!(!has_printer("apps", "Frobnicator"));
        assert!(!has_printer("batch", "Deployment"));
    }

    fn deployment() -> Value {
        json!({
            "kind": "Deployment", "apiVersion": "apps/v1",
            "metadata": {"name": "web", "creationTimestamp": ts(90)},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web", "tier": "fe"},
                             "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]},
                "template": {"spec": {"containers": [
                    {"name": "nginx", "image": "nginx:1.27"},
                    {"name": "proxy", "image": "envoy:1"}
                ]}}
            },
            "status": {"replicas": 3, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1}
        })
    }

    #[test]
    fn deployment_columns_and_cells() {
        assert_eq!(
            names("apps", "Deployment"),
            named_cols(&[
                ("Name", 0),
                ("Ready", 0),
                ("Up-to-date", 0),
                ("Available", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1)
            ])
        );
        assert_eq!(
            row_cells("apps", "Deployment", &deployment(), NOW),
            json!([
                "web",
                "1/3",
                2,
                1,
                "90s",
                "nginx,proxy",
                "nginx:1.27,envoy:1",
                "app=web,env in (dev,prod),tier=fe"
            ])
        );
        // A fresh deployment: no status yet; no selector prints as nothing.
        let fresh = json!({"metadata": {"name": "x"}, "spec": {"replicas": 0}});
        assert_eq!(
            row_cells("apps", "Deployment", &fresh, NOW),
            json!(["x", "0/0", 0, 0, "<unknown>", "", "", ""])
        );
        let bad = json!({"metadata": {"name": "x"}, "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}});
        assert_eq!(
            row_cells("apps", "Deployment", &bad, NOW)[7],
            json!("<invalid>")
        );
    }

    #[test]
    fn replicaset_statefulset_and_daemonset_cells() {
        let mut rs = deployment();
        rs["spec"]["selector"] = json!({"matchLabels": {"app": "web"}});
        assert_eq!(
            row_cells("apps", "ReplicaSet", &rs, NOW),
            json!([
                "web",
                3,
                3,
                1,
                "90s",
                "nginx,proxy",
                "nginx:1.27,envoy:1",
                "app=web"
            ])
        );
        rs["spec"]["selector"] = json!({});
        assert_eq!(row_cells("apps", "ReplicaSet", &rs, NOW)[7], "<none>");
        assert_eq!(
            names("apps", "StatefulSet"),
            named_cols(&[
                ("Name", 0),
                ("Ready", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1)
            ])
        );
        let mut sts = deployment();
        sts["spec"].as_object_mut().unwrap().remove("replicas");
        assert_eq!(
            row_cells("apps", "StatefulSet", &sts, NOW),
            json!(["web", "1/1", "90s", "nginx,proxy", "nginx:1.27,envoy:1"]),
            "replicas default to 1"
        );
        let ds = json!({
            "metadata": {"name": "agent", "creationTimestamp": ts(3600)},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"spec": {"nodeSelector": {"zone": "a", "os": "linux"},
                                           "containers": [{"name": "a", "image": "agent:2"}]}}},
            "status": {"desiredNumberScheduled": 5, "currentNumberScheduled": 4, "numberReady": 3,
                       "updatedNumberScheduled": 2, "numberAvailable": 1}
        });
        assert_eq!(
            names("apps", "DaemonSet")
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>(),
            [
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            row_cells("apps", "DaemonSet", &ds, NOW),
            json!([
                "agent",
                5,
                4,
                3,
                2,
                1,
                "os=linux,zone=a",
                "60m",
                "a",
                "agent:2",
                "app=agent"
            ])
        );
    }

    fn job(status: Value) -> Value {
        json!({
            "metadata": {"name": "pi", "creationTimestamp": ts(600)},
            "spec": {"completions": 1, "parallelism": 1,
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
                     "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
            "status": status
        })
    }

    #[test]
    fn job_status_completions_and_duration() {
        assert_eq!(
            names("batch", "Job"),
            named_cols(&[
                ("Name", 0),
                ("Status", 0),
                ("Completions", 0),
                ("Duration", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1)
            ])
        );
        assert_eq!(
            row_cells("batch", "Job", &job(json!({})), NOW),
            json!([
                "pi",
                "Running",
                "0/1",
                "",
                "10m",
                "pi",
                "perl",
                "batch.kubernetes.io/controller-uid=u-1"
            ])
        );
        let running = job(json!({"startTime": ts(125), "active": 1}));
        assert_eq!(row_cells("batch", "Job", &running, NOW)[3], "2m5s");
        let done = job(json!({
            "startTime": ts(300), "completionTime": ts(250), "succeeded": 1,
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                           {"type": "Complete", "status": "True"}]
        }));
        let cells = row_cells("batch", "Job", &done, NOW);
        assert_eq!(
            (&cells[1], &cells[2], &cells[3]),
            (&json!("Complete"), &json!("1/1"), &json!("50s"))
        );
        let failed = job(json!({"conditions": [{"type": "Failed", "status": "True"}]}));
        assert_eq!(row_cells("batch", "Job", &failed, NOW)[1], "Failed");
        let suspended = job(json!({"conditions": [{"type": "Suspended", "status": "True"}]}));
        assert_eq!(row_cells("batch", "Job", &suspended, NOW)[1], "Suspended");
        let not_yet = job(json!({"conditions": [{"type": "Complete", "status": "False"}]}));
        assert_eq!(row_cells("batch", "Job", &not_yet, NOW)[1], "Running");
        let mut deleting = job(json!({"conditions": [{"type": "Suspended", "status": "True"}]}));
        deleting["metadata"]["deletionTimestamp"] = json!(ts(1));
        assert_eq!(row_cells("batch", "Job", &deleting, NOW)[1], "Terminating");
        let mut parallel = job(json!({"succeeded": 2}));
        parallel["spec"] = json!({"parallelism": 4});
        let cells = row_cells("batch", "Job", &parallel, NOW);
        assert_eq!(cells[2], "2/1 of 4");
        assert_eq!(cells[7], "<none>");
    }

    #[test]
    fn cronjob_lease_revision_and_scale_cells() {
        let cj = json!({
            "metadata": {"name": "nightly", "creationTimestamp": ts(7200)},
            "spec": {"schedule": "0 3 * * *", "suspend": false,
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": ts(60)}
        });
        assert_eq!(
            row_cells("batch", "CronJob", &cj, NOW),
            json!([
                "nightly",
                "0 3 * * *",
                "<none>",
                "False",
                1,
                "60s",
                "120m",
                "c",
                "busybox",
                "<none>"
            ])
        );
        let fresh = json!({"metadata": {"name": "c"}, "spec": {"schedule": "@hourly", "timeZone": "Etc/UTC"}});
        let cells = row_cells("batch", "CronJob", &fresh, NOW);
        assert_eq!(
            (&cells[2], &cells[3], &cells[4], &cells[5]),
            (
                &json!("Etc/UTC"),
                &json!("<unset>"),
                &json!(0),
                &json!("<none>")
            )
        );
        let cdefs = column_definitions("batch", "CronJob");
        assert_eq!(cdefs[3]["type"], "boolean");

        let lease = json!({"metadata": {"name": "node-1", "creationTimestamp": ts(5)},
                           "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}});
        assert_eq!(
            names("coordination.k8s.io", "Lease"),
            named_cols(&[("Name", 0), ("Holder", 0), ("Age", 0)])
        );
        assert_eq!(
            row_cells("coordination.k8s.io", "Lease", &lease, NOW),
            json!(["node-1", "node-1", "5s"])
        );
        assert_eq!(
            row_cells(
                "coordination.k8s.io",
                "Lease",
                &json!({"metadata": {"name": "l"}}),
                NOW
            ),
            json!(["l", "", "<unknown>"])
        );

        let rev = json!({"metadata": {"name": "web-6d4f", "creationTimestamp": ts(30),
                                      "ownerReferences": [
                                          {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "1"},
                                          {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "2", "controller": true}]},
                         "data": {}, "revision": 4});
        assert_eq!(
            row_cells("apps", "ControllerRevision", &rev, NOW),
            json!(["web-6d4f", "statefulset.apps/web", 4, "30s"])
        );
        let orphan = json!({"metadata": {"name": "r"}, "revision": 1});
        assert_eq!(
            row_cells("apps", "ControllerRevision", &orphan, NOW)[1],
            "<none>"
        );
        let core_owner = json!({"metadata": {"name": "r", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": true}]}});
        assert_eq!(
            row_cells("apps", "ControllerRevision", &core_owner, NOW)[1],
            "pod/p"
        );

        let scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                           "metadata": {"name": "web", "creationTimestamp": ts(10)},
                           "spec": {"replicas": 3}, "status": {"replicas": 1, "selector": "app=web"}});
        let defs = column_definitions("autoscaling", "Scale");
        assert_eq!(
            defs[0]["format"], "",
            "kube's Scale name column has no format"
        );
        assert_eq!(
            row_cells("autoscaling", "Scale", &scale, NOW),
            json!(["web", 3, 1, "10s"])
        );
        assert!(!TablePrinter::for_kind("autoscaling", "Scale").is_crd());
    }

    #[test]
    fn replication_controller_and_pod_template_cells() {
        assert_eq!(
            names("", "ReplicationController"),
            named_cols(&[
                ("Name", 0),
                ("Desired", 0),
                ("Current", 0),
                ("Ready", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1)
            ])
        );
        let defs = column_definitions("", "ReplicationController");
        assert_eq!(defs[1]["type"], "integer");
        assert!(defs[7]["description"].as_str().unwrap().starts_with(
            "Selector is a label query over pods that should match the Replicas count."
        ));
        let rc = json!({
            "kind": "ReplicationController", "apiVersion": "v1",
            "metadata": {"name": "web", "creationTimestamp": ts(90)},
            "spec": {"replicas": 3, "selector": {"app": "web"},
                     "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}},
                                  "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"},
                                                          {"name": "proxy", "image": "envoy:1"}]}}},
            "status": {"replicas": 3, "readyReplicas": 2}
        });
        assert_eq!(
            row_cells("", "ReplicationController", &rc, NOW),
            json!([
                "web",
                3,
                3,
                2,
                "90s",
                "nginx,proxy",
                "nginx:1.27,envoy:1",
                "app=web"
            ])
        );
        // The defaulter gives a controller without a selector its template's labels.
        let mut unselected = rc.clone();
        unselected["spec"]["selector"] = json!({});
        assert_eq!(
            row_cells("", "ReplicationController", &unselected, NOW)[7],
            "app=web,tier=fe"
        );
        assert_eq!(
            bare_row("", "ReplicationController"),
            json!(["x", 1, 0, 0, "<unknown>", "", "", "<none>"])
        );

        assert_eq!(
            names("", "PodTemplate"),
            named_cols(&[
                ("Name", 0),
                ("Containers", 0),
                ("Images", 0),
                ("Pod Labels", 0)
            ])
        );
        // printers_test.go TestPrintPodTemplate.
        let template = json!({
            "metadata": {"name": "pod-template-1"},
            "template": {"metadata": {"name": "pod-template-1", "labels": {"foo": "bar"}},
                         "spec": {"containers": [{"name": "foo", "image": "bar"}]}}
        });
        assert_eq!(
            row_cells("", "PodTemplate", &template, NOW),
            json!(["pod-template-1", "foo", "bar", "foo=bar"])
        );
        assert_eq!(bare_row("", "PodTemplate"), json!(["x", "", "", "<none>"]));
    }

    #[test]
    fn pod_disruption_budget_cells() {
        assert_eq!(
            names("policy", "PodDisruptionBudget"),
            named_cols(&[
                ("Name", 0),
                ("Min Available", 0),
                ("Max Unavailable", 0),
                ("Allowed Disruptions", 0),
                ("Age", 0)
            ])
        );
        let defs = column_definitions("policy", "PodDisruptionBudget");
        assert_eq!(defs[3]["type"], "integer");
        assert_eq!(
            defs[1]["description"],
            "The minimum number of pods that must be available."
        );
        // printers_test.go TestPrintPodDisruptionBudget's two budgets.
        let min = json!({
            "metadata": {"namespace": "ns1", "name": "pdb1", "creationTimestamp": ts(10)},
            "spec": {"minAvailable": 22},
            "status": {"disruptionsAllowed": 5}
        });
        assert_eq!(
            row_cells("policy", "PodDisruptionBudget", &min, NOW),
            json!(["pdb1", "22", "N/A", 5, "10s"])
        );
        let max = json!({
            "metadata": {"namespace": "ns2", "name": "pdb2", "creationTimestamp": ts(10)},
            "spec": {"maxUnavailable": 11},
            "status": {"disruptionsAllowed": 5}
        });
        assert_eq!(
            row_cells("policy", "PodDisruptionBudget", &max, NOW),
            json!(["pdb2", "N/A", "11", 5, "10s"])
        );
        let percent = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "50%", "maxUnavailable": null}});
        assert_eq!(
            row_cells("policy", "PodDisruptionBudget", &percent, NOW),
            json!(["p", "50%", "N/A", 0, "<unknown>"])
        );
        assert_eq!(
            bare_row("policy", "PodDisruptionBudget"),
            json!(["x", "N/A", "N/A", 0, "<unknown>"])
        );
    }

    /// An autoscaling/v2 HPA of `ReplicationController/some-rc` with these metrics and current
    /// metrics (printers_test.go TestPrintHPA's shape).
    fn hpa_v2(metrics: Value, current: Value) -> Value {
        json!({
            "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
            "metadata": {"name": "some-hpa"},
            "spec": {"scaleTargetRef": {"kind": "ReplicationController", "name": "some-rc"},
                     "minReplicas": 2, "maxReplicas": 10, "metrics": metrics},
            "status": {"currentReplicas": 4, "desiredReplicas": 5, "currentMetrics": current}
        })
    }

    fn targets(hpa: &Value) -> Value {
        row_cells("autoscaling", "HorizontalPodAutoscaler", hpa, NOW)[2].clone()
    }

    #[test]
    fn hpa_columns_and_v2_cells() {
        assert_eq!(
            names("autoscaling", "HorizontalPodAutoscaler"),
            named_cols(&[
                ("Name", 0),
                ("Reference", 0),
                ("Targets", 0),
                ("MinPods", 0),
                ("MaxPods", 0),
                ("Replicas", 0),
                ("Age", 0)
            ])
        );
        let defs = column_definitions("autoscaling", "HorizontalPodAutoscaler");
        assert_eq!(defs[4]["type"], "string", "MaxPods is a string column");
        assert!(
            defs[2]["description"].as_str().unwrap().ends_with(
                "If not set, the default metric will be set to 80% average CPU utilization."
            ),
            "autoscaling/v2's metrics doc"
        );

        let external_avg = json!([{"type": "External", "external": {
            "metric": {"name": "some-external-metric", "selector": {"matchLabels": {"label": "value"}}},
            "target": {"type": "AverageValue", "averageValue": "100m"}}}]);
        let hpa = hpa_v2(external_avg.clone(), json!([]));
        assert_eq!(
            row_cells("autoscaling", "HorizontalPodAutoscaler", &hpa, NOW),
            json!([
                "some-hpa",
                "ReplicationController/some-rc",
                "<unknown>/100m (avg)",
                "2",
                10,
                4,
                "<unknown>"
            ])
        );
        let current_avg = json!([{"type": "External", "external": {
            "metric": {"name": "some-external-metric"}, "current": {"averageValue": "50m"}}}]);
        assert_eq!(
            targets(&hpa_v2(external_avg, current_avg)),
            "50m/100m (avg)"
        );
        let external_value = json!([{"type": "External", "external": {
            "metric": {"name": "m"}, "target": {"type": "Value", "value": "100m"}}}]);
        assert_eq!(
            targets(&hpa_v2(external_value.clone(), json!(null))),
            "<unknown>/100m"
        );
        let current_value = json!([{"type": "External", "external": {
            "metric": {"name": "m"}, "current": {"value": "50m"}}}]);
        assert_eq!(targets(&hpa_v2(external_value, current_value)), "50m/100m");
        let pods = json!([{"type": "Pods", "pods": {
            "metric": {"name": "some-pods-metric"}, "target": {"type": "AverageValue", "averageValue": "100m"}}}]);
        assert_eq!(targets(&hpa_v2(pods.clone(), json!([]))), "<unknown>/100m");
        let pods_current = json!([{"type": "Pods", "pods": {
            "metric": {"name": "some-pods-metric"}, "current": {"averageValue": "50m"}}}]);
        assert_eq!(targets(&hpa_v2(pods, pods_current)), "50m/100m");
        let object = json!([{"type": "Object", "object": {
            "describedObject": {"kind": "Service", "name": "some-service"},
            "metric": {"name": "some-service-metric"}, "target": {"type": "Value", "value": "100m"}}}]);
        let object_current = json!([{"type": "Object", "object": {
            "describedObject": {"kind": "Service", "name": "some-service"},
            "metric": {"name": "some-service-metric"}, "current": {"value": "50m"}}}]);
        assert_eq!(targets(&hpa_v2(object, object_current)), "50m/100m");
        let cpu_value = json!([{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "AverageValue", "averageValue": "100m"}}}]);
        assert_eq!(
            targets(&hpa_v2(cpu_value.clone(), json!([]))),
            "cpu: <unknown>/100m"
        );
        let cpu_current = json!([{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageValue": "50m"}}}]);
        assert_eq!(
            targets(&hpa_v2(cpu_value.clone(), cpu_current)),
            "cpu: 50m/100m"
        );
        // A current resource metric without the value: Go prints its nil *Quantity.
        let utilization_only = json!([{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": 50}}}]);
        assert_eq!(
            targets(&hpa_v2(cpu_value, utilization_only.clone())),
            "cpu: <nil>/100m"
        );
        let cpu_util = json!([{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]);
        assert_eq!(
            targets(&hpa_v2(cpu_util.clone(), json!([]))),
            "cpu: <unknown>/80%"
        );
        assert_eq!(targets(&hpa_v2(cpu_util, utilization_only)), "cpu: 50%/80%");
        let no_target = json!([{"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization"}}}]);
        assert_eq!(
            targets(&hpa_v2(no_target, json!([]))),
            "memory: <unknown>/<auto>"
        );
        let container = json!([{"type": "ContainerResource", "containerResource": {
            "name": "cpu", "container": "app", "target": {"type": "Utilization", "averageUtilization": 80}}}]);
        let container_current = json!([{"type": "ContainerResource", "containerResource": {
            "name": "cpu", "container": "app", "current": {"averageUtilization": 50, "averageValue": "10m"}}}]);
        assert_eq!(
            targets(&hpa_v2(container, container_current)),
            "cpu: 50%/80%"
        );
        // Statuses pair with specs by index, whatever their type.
        let three = json!([
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
            {"type": "Frobnicate"}
        ]);
        let swapped = json!([
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "500"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "2k"}}}
        ]);
        assert_eq!(
            targets(&hpa_v2(three.clone(), swapped)),
            "cpu: <unknown>/80%, 2k/1k + 1 more..."
        );
        let mut unknown = hpa_v2(three, json!([]));
        unknown["spec"]["metrics"] = json!([{"type": "Frobnicate"}]);
        assert_eq!(targets(&unknown), "<unknown type>");

        // The defaulter's minimum of 1 and 80% CPU utilization.
        assert_eq!(
            bare_row("autoscaling", "HorizontalPodAutoscaler"),
            json!(["x", "/", "cpu: <unknown>/80%", "1", 0, 0, "<unknown>"])
        );
        let mut defaulted = hpa_v2(json!([]), json!([]));
        defaulted["spec"]
            .as_object_mut()
            .unwrap()
            .remove("minReplicas");
        let cells = row_cells("autoscaling", "HorizontalPodAutoscaler", &defaulted, NOW);
        assert_eq!(
            (&cells[2], &cells[3]),
            (&json!("cpu: <unknown>/80%"), &json!("1"))
        );
    }

    /// An autoscaling/v1 HPA, as kube-apiserver serves it.
    fn hpa_v1(spec: Value, status: Value, annotations: Value) -> Value {
        json!({
            "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web", "creationTimestamp": ts(300), "annotations": annotations},
            "spec": spec,
            "status": status
        })
    }

    #[test]
    fn hpa_v1_cells_convert_as_kube_converts() {
        let spec = json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                          "minReplicas": 2, "maxReplicas": 10, "targetCPUUtilizationPercentage": 50});
        let status = json!({"currentReplicas": 3, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 30});
        assert_eq!(
            row_cells(
                "autoscaling",
                "HorizontalPodAutoscaler",
                &hpa_v1(spec.clone(), status.clone(), json!({})),
                NOW
            ),
            json!(["web", "Deployment/web", "cpu: 30%/50%", "2", 10, 3, "5m"])
        );
        // Without apiVersion, the v1 fields tell the version.
        let mut bare_v1 = hpa_v1(spec.clone(), status.clone(), json!({}));
        bare_v1.as_object_mut().unwrap().remove("apiVersion");
        assert_eq!(targets(&bare_v1), "cpu: 30%/50%");
        // The other metrics live in annotations: they come first, the CPU target last; the
        // current metrics annotation replaces the current CPU utilization.
        let annotations = json!({
            "autoscaling.alpha.kubernetes.io/metrics":
                "[{\"type\":\"Pods\",\"pods\":{\"metricName\":\"qps\",\"targetAverageValue\":\"100\"}}]",
            "autoscaling.alpha.kubernetes.io/current-metrics":
                "[{\"type\":\"Pods\",\"pods\":{\"metricName\":\"qps\",\"currentAverageValue\":\"50\"}},{\"type\":\"Resource\",\"resource\":{\"name\":\"cpu\",\"currentAverageUtilization\":40,\"currentAverageValue\":\"4m\"}}]"
        });
        assert_eq!(
            targets(&hpa_v1(spec.clone(), status.clone(), annotations)),
            "50/100, cpu: 40%/50%"
        );
        // v1's value fields convert to quantities even when absent.
        let zero = json!({"autoscaling.alpha.kubernetes.io/metrics":
            "[{\"type\":\"Pods\",\"pods\":{\"metricName\":\"qps\"}},{\"type\":\"Object\",\"object\":{\"target\":{\"kind\":\"Service\",\"name\":\"s\"},\"metricName\":\"rps\"}}]"});
        let mut no_cpu = spec.clone();
        no_cpu
            .as_object_mut()
            .unwrap()
            .remove("targetCPUUtilizationPercentage");
        assert_eq!(
            targets(&hpa_v1(no_cpu.clone(), json!({}), zero)),
            "<unknown>/0, <unknown>/0"
        );
        // An annotation that does not decode is ignored; no metric means the default.
        let broken = json!({"autoscaling.alpha.kubernetes.io/metrics": "[{\"type\":",
                            "autoscaling.alpha.kubernetes.io/current-metrics": "{}"});
        assert_eq!(targets(&hpa_v1(no_cpu, status, broken)), "cpu: 30%/80%");
        let mut unset_min = spec;
        unset_min.as_object_mut().unwrap().remove("minReplicas");
        assert_eq!(
            row_cells(
                "autoscaling",
                "HorizontalPodAutoscaler",
                &hpa_v1(unset_min, json!(null), json!(null)),
                NOW
            )[3],
            "1"
        );
    }
}
