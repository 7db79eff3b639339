//! The `scale` subresource of deployments, replica sets, stateful sets and replication
//! controllers, as kube's `ScaleREST` (`pkg/registry/apps/{deployment,replicaset,statefulset}/
//! storage/storage.go`, `pkg/registry/core/replicationcontroller/storage/storage.go`) serves it:
//! an `autoscaling/v1` `Scale` whose `spec.replicas` is the parent's, `status.replicas` the
//! parent's `status.replicas` and `status.selector` the parent's selector as a label selector
//! string (a replication controller's selector is a plain label map).
//!
//! A write to the scale is a write of the parent through the parent's own rules
//! ([`decide_update`]): its `spec.replicas` changes, its generation and resourceVersion move and
//! its watchers see one MODIFIED event; a scale carrying a resourceVersion or uid is a
//! precondition on the parent. Nothing here knows HTTP.

use serde_json::{Map, Value, json};

use super::{Ops, patch_status};
use crate::kinds::ResourceType;
use crate::patch::{PatchType, apply_patch, check_supported};
use crate::semantics::{UpdateScope, decide_update};
use crate::store::key_of;
use kube_wire::status::Status;
use kube_wire::table::label_selector_as_selector;

/// The group/version of a `Scale`.
pub const SCALE_API_VERSION: &str = "autoscaling/v1";

impl Ops {
    /// GET of `.../{name}/scale`: the parent's scale, or the parent's own 404 (kube's
    /// `ScaleREST.Get` passes the store's error through; only writes name `{resource}/scale`).
    pub fn get_scale(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, Status> {
        let key = key_of(rt, Self::ns_of(rt, ns), name);
        let parent = self
            .store
            .get(rt, &key)
            .ok_or_else(|| Status::not_found(&rt.group, &rt.resource, name))?;
        scale_of(rt, &parent.to_value(rt))
    }

    /// PUT of `.../{name}/scale` with `scale` (a decoded request body): the parent rescaled, as a
    /// `Scale`.
    pub fn update_scale(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        scale: Value,
    ) -> Result<Value, Status> {
        self.write_scale(rt, ns, name, |_| Ok(scale))
    }

    /// PATCH of `.../{name}/scale`: the patch applies to the current `Scale` (a strategic merge
    /// patch with `Scale`'s metadata), then as [`Ops::update_scale`].
    pub fn patch_scale(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        ty: PatchType,
        body: &[u8],
    ) -> Result<Value, Status> {
        check_supported(ty, true).map_err(|e| patch_status(&e))?;
        self.write_scale(rt, ns, name, |old| {
            apply_patch(ty, "Scale", old, body).map_err(|e| patch_status(&e))
        })
    }

    fn write_scale(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        new_scale: impl FnOnce(&Value) -> Result<Value, Status>,
    ) -> Result<Value, Status> {
        let ns = Self::ns_of(rt, ns);
        let key = key_of(rt, ns, name);
        let out = self.commit(rt, &key, |_, current| {
            let current = current.ok_or_else(|| not_found(rt, name))?;
            let parent = current.to_value(rt);
            let scale = new_scale(&scale_of(rt, &parent)?)?;
            let replicas = check_scale(rt, ns, name, &current.uid, &scale)?;
            let mut new = parent;
            if let Some(o) = new.as_object_mut() {
                let spec = o.entry("spec").or_insert_with(|| json!({}));
                if let Some(spec) = spec.as_object_mut() {
                    spec.insert("replicas".into(), json!(replicas));
                }
                // The scale's resourceVersion becomes the parent's precondition.
                let rv = scale
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("resourceVersion".into(), json!(rv));
                }
            }
            decide_update(rt, current, new, UpdateScope::Main)
        })?;
        scale_of(rt, &out.object.to_value(rt))
    }
}

/// kube's 404 for a write to the scale of a missing parent: `deployments/scale.apps "x" not
/// found` (from `scaleUpdatedObjectInfo.UpdatedObject`).
fn not_found(rt: &ResourceType, name: &str) -> Status {
    Status::not_found(&rt.group, &format!("{}/scale", rt.resource), name)
}

/// The `Scale` of a parent object (`scaleFromDeployment` and its siblings); a selector that does
/// not convert is kube's 400 with the conversion's error.
pub fn scale_of(rt: &ResourceType, parent: &Value) -> Result<Value, Status> {
    let selector = if rt.group.is_empty() {
        set_selector(parent.pointer("/spec/selector"))
    } else {
        label_selector_as_selector(parent.pointer("/spec/selector"))
            .map_err(Status::bad_request)?
            .map(|s| s.to_string())
            .unwrap_or_default()
    };
    let mut meta = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = parent
            .pointer(&format!("/metadata/{k}"))
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            meta.insert(k.into(), v.clone());
        }
    }
    let int = |p: &str| parent.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    // `ScaleSpec.replicas` is omitempty, `ScaleStatus.replicas` is not, `selector` is.
    let mut spec = Map::new();
    let replicas = int("/spec/replicas");
    if replicas != 0 {
        spec.insert("replicas".into(), json!(replicas));
    }
    let mut status = Map::new();
    status.insert("replicas".into(), json!(int("/status/replicas")));
    if !selector.is_empty() {
        status.insert("selector".into(), json!(selector));
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": SCALE_API_VERSION,
        "metadata": meta,
        "spec": spec,
        "status": status,
    }))
}

/// A replication controller's selector as `labels.SelectorFromSet(...).String()` writes it:
/// `key=value` pairs sorted by key, comma-separated.
fn set_selector(selector: Option<&Value>) -> String {
    let mut pairs: Vec<(&String, &str)> = selector
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    let pairs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

/// What kube checks of a new `Scale` before it touches the parent, in its order: the type, the
/// name and namespace against the URL, decoding of `spec.replicas`, validation (not negative),
/// then the uid precondition. The replicas to set.
fn check_scale(
    rt: &ResourceType,
    ns: &str,
    name: &str,
    uid: &str,
    scale: &Value,
) -> Result<i64, Status> {
    let text = |p: &str| scale.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let api_version = text("/apiVersion");
    if !api_version.is_empty() && api_version != SCALE_API_VERSION {
        return Err(Status::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({SCALE_API_VERSION})"
        )));
    }
    let kind = text("/kind");
    if !kind.is_empty() && kind != "Scale" {
        return Err(Status::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (Scale)"
        )));
    }
    let body_name = text("/metadata/name");
    if !body_name.is_empty() && body_name != name {
        return Err(Status::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_ns = text("/metadata/namespace");
    if rt.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_i64()
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| {
                let ty = match v {
                    Value::Number(_) => "number",
                    Value::String(_) => "string",
                    Value::Bool(_) => "bool",
                    Value::Array(_) => "array",
                    _ => "object",
                };
                let what = if ty == "number" {
                    format!("number {v}")
                } else {
                    ty.to_string()
                };
                Status::bad_request(format!(
                    "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {what} into Go struct field ScaleSpec.spec.replicas of type int32"
                ))
            })?,
    };
    if replicas < 0 {
        return Err(Status::invalid(
            "autoscaling",
            "Scale",
            name,
            &[(
                "FieldValueInvalid",
                "spec.replicas",
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            )],
        ));
    }
    let body_uid = text("/metadata/uid");
    if !body_uid.is_empty() && body_uid != uid {
        return Err(Status::conflict(
            &rt.group,
            &format!("{}/scale", rt.resource),
            name,
            &format!(
                "Precondition failed: UID in precondition: {body_uid}, UID in object meta: {uid}"
            ),
        ));
    }
    Ok(replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Registry;
    use crate::ops::ControllerTimings;
    use crate::store::{HistoryConfig, Store};
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;
    use tokio_util::task::TaskTracker;

    fn setup() -> (Ops, Arc<ResourceType>) {
        let reg = Arc::new(Registry::new(&[]).unwrap());
        let store = Arc::new(Store::new(reg.clone(), HistoryConfig::default()));
        let ops = Ops::new(
            store,
            ControllerTimings::default(),
            TaskTracker::new(),
            CancellationToken::new(),
        );
        ops.create(
            &reg.core("namespaces"),
            None,
            json!({"metadata": {"name": "default"}}),
            false,
        )
        .unwrap();
        let d = reg.get("apps", "v1", "deployments").unwrap().clone();
        ops.create(
            &d,
            Some("default"),
            json!({"metadata": {"name": "web"}, "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
            false,
        )
        .unwrap();
        (ops, d)
    }

    #[test]
    fn scale_reads_and_writes_the_parent() {
        let (ops, d) = setup();
        let parent = ops.get(&d, Some("default"), "web").unwrap();
        let s = ops.get_scale(&d, Some("default"), "web").unwrap();
        assert_eq!(
            s,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "web", "namespace": "default", "uid": parent.uid,
                                "resourceVersion": parent.rv.to_string(),
                                "creationTimestamp": s["metadata"]["creationTimestamp"]},
                   "spec": {"replicas": 1}, "status": {"replicas": 0, "selector": "app=web"}})
        );
        let s = ops
            .patch_scale(
                &d,
                Some("default"),
                "web",
                PatchType::Merge,
                br#"{"spec":{"replicas":3}}"#,
            )
            .unwrap();
        assert_eq!(s["spec"]["replicas"], 3);
        let after = ops.get(&d, Some("default"), "web").unwrap();
        assert!(after.rv > parent.rv);
        assert_eq!(s["metadata"]["resourceVersion"], after.rv.to_string());
        let v = after.to_value(&d);
        assert_eq!(v["spec"]["replicas"], 3);
        assert_eq!(v["metadata"]["generation"], 2, "a scale is a spec change");

        // A stale resourceVersion conflicts on the parent; a scale to 0 omits spec.replicas.
        let stale = json!({"metadata": {"name": "web", "resourceVersion": parent.rv.to_string()}, "spec": {"replicas": 0}});
        let e = ops
            .update_scale(&d, Some("default"), "web", stale)
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                409,
                "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
            )
        );
        let s = ops
            .update_scale(&d, Some("default"), "web", json!({"spec": {}}))
            .unwrap();
        assert_eq!(s["spec"], json!({}));

        // The same replicas again writes nothing.
        let before = ops.get(&d, Some("default"), "web").unwrap().rv;
        ops.update_scale(&d, Some("default"), "web", json!({"spec": {}}))
            .unwrap();
        assert_eq!(ops.get(&d, Some("default"), "web").unwrap().rv, before);
    }

    #[test]
    fn scale_errors_are_kubes() {
        let (ops, d) = setup();
        let e = ops.get_scale(&d, Some("default"), "nope").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (404, "deployments.apps \"nope\" not found")
        );
        let e = ops
            .update_scale(&d, Some("default"), "nope", json!({}))
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (404, "deployments/scale.apps \"nope\" not found")
        );
        let e = ops
            .update_scale(
                &d,
                Some("default"),
                "web",
                json!({"spec": {"replicas": -1}}),
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                422,
                "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
            )
        );
        let e = ops
            .update_scale(
                &d,
                Some("default"),
                "web",
                json!({"metadata": {"name": "api"}}),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "the name of the object (api) does not match the name on the URL (web)"
        );
        let e = ops
            .update_scale(
                &d,
                Some("default"),
                "web",
                json!({"metadata": {"uid": "u"}}),
            )
            .unwrap_err();
        assert_eq!(e.code, 409);
        assert!(
            e.message.starts_with("Operation cannot be fulfilled on deployments/scale.apps \"web\": Precondition failed: UID in precondition: u, UID in object meta: "),
            "{}",
            e.message
        );
        let e = ops
            .update_scale(
                &d,
                Some("default"),
                "web",
                json!({"spec": {"replicas": "3"}}),
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"
            )
        );
        let e = ops
            .update_scale(
                &d,
                Some("default"),
                "web",
                json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = ops
            .patch_scale(&d, Some("default"), "web", PatchType::Apply, b"{}")
            .unwrap_err();
        assert_eq!(e.code, 415);
    }
}
