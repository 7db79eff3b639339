//! Writes as kube-apiserver performs them (the verbs behind POST/PUT/PATCH/DELETE), shared by
//! the HTTP handlers and the in-process Rust API, plus the simulated controllers that finish
//! what a real cluster's kubelets and namespace controller would: graceful pod deletion and
//! namespace termination.
//!
//! The per-kind rules are [`semantics`]'s and each verb commits through one [`Store::write`], so a
//! decision is never made on a stale read. Nothing here knows HTTP. The simulated namespace
//! controller deletes the namespace's objects directly, without honouring their finalizers.
//! The `scale` subresource's reads and writes (of the parent object) are in [`scale`]; what a
//! `CustomResourceDefinition`'s writes do to the types served (kube's apiextensions server:
//! registering them, deleting a deleted CRD's custom resources) is in `crds`.
//!
//! A dry-run `Ops` ([`Ops::dry_run`], kube's `dryRun=All`) decides every verb exactly as the real
//! one and writes nothing ([`Store::dry_write`]): no revision, no event, no controller started.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::kinds::ResourceType;
use super::patch::{PatchError, PatchType, apply_patch, check_supported};
use super::semantics::{
    self, DeleteKind, DeleteOptions, UpdateScope, check_namespace, decide_delete, decide_update,
};
use super::store::{Action, Store, StoredObject, WriteOutcome, WriteView, key_of};
use kube_wire::status::Status;

mod crds;
pub mod scale;

/// The Status kube-apiserver answers for a patch error.
pub fn patch_status(e: &PatchError) -> Status {
    Status::new(e.code(), e.reason(), e.to_string())
}

/// Timings of the simulated controllers.
#[derive(Debug, Clone, Copy)]
pub struct ControllerTimings {
    /// A simulated kubelet finishes a graceful pod deletion after min(grace period, this).
    pub pod_termination: Duration,
    /// The simulated namespace controller starts emptying a deleted namespace after this.
    pub namespace_cleanup: Duration,
}

impl Default for ControllerTimings {
    fn default() -> Self {
        ControllerTimings {
            pod_termination: Duration::from_secs(1),
            namespace_cleanup: Duration::from_millis(200),
        }
    }
}

/// The result of a DELETE.
#[derive(Debug, Clone)]
pub struct DeleteResult {
    /// The object as the DELETE answer carries it: the state before deletion when it is gone,
    /// the marked state when deletion is pending.
    pub object: Arc<StoredObject>,
    /// Whether it is gone now.
    pub deleted: bool,
}

/// The write verbs. Cheap to clone.
#[derive(Clone)]
pub struct Ops {
    store: Arc<Store>,
    timings: ControllerTimings,
    tasks: TaskTracker,
    cancel: CancellationToken,
    /// Decide and answer, write nothing (kube's `dryRun=All`).
    dry_run: bool,
}

impl Ops {
    /// Write verbs over `store`; controller tasks are tracked by `tasks` and stop on `cancel`.
    pub fn new(
        store: Arc<Store>,
        timings: ControllerTimings,
        tasks: TaskTracker,
        cancel: CancellationToken,
    ) -> Ops {
        Ops {
            store,
            timings,
            tasks,
            cancel,
            dry_run: false,
        }
    }

    /// The same verbs as a dry run (kube's `dryRun=All`): each is validated and decided on the
    /// current state and answers what it would have written, but nothing is written, no
    /// revision is consumed, no watcher sees an event and no simulated controller starts.
    pub fn dry_run(&self) -> Ops {
        Ops {
            dry_run: true,
            ..self.clone()
        }
    }

    /// Runs `decide` through the store: a write, or its dry run.
    fn commit(
        &self,
        rt: &ResourceType,
        key: &str,
        decide: impl FnOnce(&WriteView<'_>, Option<&Arc<StoredObject>>) -> Result<Action, Status>,
    ) -> Result<WriteOutcome, Status> {
        if self.dry_run {
            self.store.dry_write(rt, key, decide)
        } else {
            self.store.write(rt, key, decide)
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn ns_of<'a>(rt: &ResourceType, ns: Option<&'a str>) -> &'a str {
        if rt.namespaced {
            ns.unwrap_or_default()
        } else {
            ""
        }
    }

    /// Current state of an object, or kube's 404.
    pub fn get(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Arc<StoredObject>, Status> {
        self.store
            .get(rt, &key_of(rt, Self::ns_of(rt, ns), name))
            .ok_or_else(|| Status::not_found(&rt.group, &rt.resource, name))
    }

    /// POST: creates `obj`. `keep_status` is for in-process callers only.
    pub fn create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        keep_status: bool,
    ) -> Result<Arc<StoredObject>, Status> {
        let ns = Self::ns_of(rt, ns);
        let obj = semantics::prepare_create(rt, Some(ns), obj, keep_status)?;
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let crd = semantics::crds::is_crd(rt);
        if crd {
            self.check_crd(rt, &name, &obj)?;
        }
        let out = self.commit(rt, &key_of(rt, ns, &name), |view, current| {
            if current.is_some() {
                return Err(Status::already_exists(&rt.group, &rt.resource, &name));
            }
            check_namespace(view, rt, ns, &name)?;
            Ok(Action::Put(obj))
        })?;
        if crd && !self.dry_run {
            self.crd_written(rt, &out);
        }
        Ok(out.object)
    }

    /// Loads objects at start-up as a restored etcd holds them ([`Store::restore`]): each goes
    /// through the create path's defaulting and validation with its status kept, as an
    /// in-process [`create`](Self::create), but keeps the `uid` and `creationTimestamp` it
    /// carries (so a seeded loader makes the same objects every time); no event is logged. The
    /// namespace is not checked: the loader creates namespaces first.
    pub fn restore(&self, rt: &ResourceType, objects: Vec<Value>) -> Result<(), Status> {
        let prepared = crate::util::par_map(objects, |obj| {
            let meta = &obj["metadata"];
            let ns = meta["namespace"].as_str().map(str::to_string);
            let kept = [
                meta.get("uid").cloned(),
                meta.get("creationTimestamp").cloned(),
            ];
            let mut obj = semantics::prepare_create(rt, ns.as_deref(), obj, true)?;
            for (k, v) in ["uid", "creationTimestamp"].into_iter().zip(kept) {
                if let Some(v) = v {
                    obj["metadata"][k] = v;
                }
            }
            Ok(obj)
        });
        let prepared = prepared.into_iter().collect::<Result<Vec<_>, Status>>()?;
        if self.dry_run {
            return Ok(());
        }
        self.store.restore(rt, prepared)
    }

    /// PUT: replaces the object (or its status).
    pub fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        scope: UpdateScope,
    ) -> Result<Arc<StoredObject>, Status> {
        self.modify_with(rt, ns, name, |current| {
            decide_update(rt, current, obj, scope)
        })
    }

    /// PATCH of the given type.
    pub fn patch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        ty: PatchType,
        body: &[u8],
        scope: UpdateScope,
    ) -> Result<Arc<StoredObject>, Status> {
        check_supported(ty, rt.builtin).map_err(|e| patch_status(&e))?;
        self.modify_with(rt, ns, name, |current| {
            let original = current.to_value(rt);
            let patched =
                apply_patch(ty, &rt.kind, &original, body).map_err(|e| patch_status(&e))?;
            decide_update(rt, current, patched, scope)
        })
    }

    /// Read-modify-write with a closure over the full object (for in-process callers such as
    /// the churn generator and tests). Status changes are kept.
    pub fn modify(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Result<Arc<StoredObject>, Status> {
        self.modify_with(rt, ns, name, |current| {
            let mut v = current.to_value(rt);
            f(&mut v);
            let status = v.get("status").cloned();
            let mut action = decide_update(rt, current, v.clone(), UpdateScope::Main)?;
            match (&mut action, status) {
                (Action::Put(new), Some(s)) => new["status"] = s,
                // Main scope ignores status, so a status-only change looked like a no-op.
                (Action::Keep, Some(_)) if rt.status_subresource => {
                    action = decide_update(rt, current, v, UpdateScope::Status)?;
                }
                _ => {}
            }
            Ok(action)
        })
    }

    fn modify_with(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        decide: impl FnOnce(&StoredObject) -> Result<Action, Status>,
    ) -> Result<Arc<StoredObject>, Status> {
        let key = key_of(rt, Self::ns_of(rt, ns), name);
        let out: WriteOutcome = self.commit(rt, &key, |_, current| {
            let current =
                current.ok_or_else(|| Status::not_found(&rt.group, &rt.resource, name))?;
            decide(current)
        })?;
        if semantics::crds::is_crd(rt) && !self.dry_run {
            self.crd_written(rt, &out);
        }
        Ok(match out.event {
            // An update that removed the last finalizer of a terminating object deleted it.
            Some(ev) if ev.ty == super::store::EventType::Deleted => {
                ev.prev.clone().unwrap_or(out.object)
            }
            _ => out.object,
        })
    }

    /// DELETE of one object.
    pub fn delete(
        &self,
        rt: &Arc<ResourceType>,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteResult, Status> {
        let ns = Self::ns_of(rt, ns).to_string();
        let key = key_of(rt, &ns, name);
        let crd = semantics::crds::is_crd(rt) && !self.dry_run;
        if crd {
            self.crd_deleting(rt, name, opts)?;
        }
        let mut kind = DeleteKind::Immediate;
        let out = self.commit(rt, &key, |_, current| {
            let current =
                current.ok_or_else(|| Status::not_found(&rt.group, &rt.resource, name))?;
            let (action, k) = decide_delete(rt, current, opts)?;
            kind = k;
            Ok(action)
        })?;
        let deleted = out
            .event
            .as_ref()
            .is_some_and(|e| e.ty == super::store::EventType::Deleted);
        match kind {
            _ if self.dry_run => {}
            DeleteKind::GracefulPod(grace) if !deleted => {
                let wait = Duration::from_secs(grace as u64).min(self.timings.pod_termination);
                self.spawn_kubelet_finish(
                    rt.clone(),
                    ns.clone(),
                    name.to_string(),
                    out.object.uid.clone(),
                    wait,
                );
            }
            DeleteKind::Namespace if !deleted => self.spawn_namespace_cleanup(name.to_string()),
            _ => {}
        }
        if crd {
            self.crd_written(rt, &out);
        }
        let object = if deleted {
            out.event.and_then(|e| e.prev.clone()).unwrap_or(out.object)
        } else {
            out.object
        };
        Ok(DeleteResult { object, deleted })
    }

    /// What a kubelet does once a pod's containers stopped: delete it with grace period 0.
    fn spawn_kubelet_finish(
        &self,
        rt: Arc<ResourceType>,
        ns: String,
        name: String,
        uid: String,
        wait: Duration,
    ) {
        let ops = self.clone();
        let cancel = self.cancel.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(wait) => {
                    let opts = DeleteOptions { grace_period_seconds: Some(0), precondition_uid: Some(uid), ..Default::default() };
                    // The pod may already be gone or replaced: nothing to do then.
                    let _ = ops.delete(&rt, Some(&ns), &name, &opts);
                }
            }
        });
    }

    /// What the namespace controller does: delete everything in the namespace, then the namespace.
    fn spawn_namespace_cleanup(&self, ns: String) {
        let ops = self.clone();
        let cancel = self.cancel.clone();
        let wait = self.timings.namespace_cleanup;
        self.tasks.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(wait) => ops.empty_and_delete_namespace(&ns),
            }
        });
    }

    fn empty_and_delete_namespace(&self, ns: &str) {
        let registry = self.store.registry().clone();
        for rt in registry.all().iter().filter(|t| t.namespaced) {
            self.delete_all(rt, Some(ns));
        }
        let nsrt = registry.core("namespaces");
        self.delete_now(&nsrt, ns);
    }

    /// Deletes every object of `rt` (in namespace `ns`, if given) at once, ignoring finalizers
    /// and grace periods, as kube's controllers that empty a namespace or a deleted CRD's
    /// storage do; each deletion is an event.
    fn delete_all(&self, rt: &ResourceType, ns: Option<&str>) {
        let Ok(page) = self.store.list(rt, ns, None, None, 0, &|_| true, false) else {
            return;
        };
        for obj in page.items {
            self.delete_now(rt, &key_of(rt, &obj.namespace, &obj.name));
        }
    }

    /// Deletes the object at `key` now, if it still exists.
    fn delete_now(&self, rt: &ResourceType, key: &str) {
        let _ = self.store.write(rt, key, |_, cur| {
            Ok(if cur.is_some() {
                Action::Delete
            } else {
                Action::Keep
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Registry;
    use crate::store::HistoryConfig;
    use serde_json::json;

    fn ops() -> (Ops, Arc<Registry>) {
        let reg = Arc::new(Registry::new(&[]).unwrap());
        let store = Arc::new(Store::new(reg.clone(), HistoryConfig::default()));
        let timings = ControllerTimings {
            pod_termination: Duration::from_millis(20),
            namespace_cleanup: Duration::from_millis(10),
        };
        let ops = Ops::new(store, timings, TaskTracker::new(), CancellationToken::new());
        ops.create(
            &reg.core("namespaces"),
            None,
            json!({"metadata":{"name":"default"}}),
            false,
        )
        .unwrap();
        (ops, reg)
    }

    fn pod(name: &str, node: &str) -> Value {
        json!({"metadata":{"name":name},"spec":{"nodeName":node,"containers":[{"name":"c","image":"i"}]}})
    }

    #[test]
    fn create_conflicts_and_namespace_checks() {
        let (ops, reg) = ops();
        let pods = &reg.core("pods");
        ops.create(pods, Some("default"), pod("a", ""), false)
            .unwrap();
        assert_eq!(
            ops.create(pods, Some("default"), pod("a", ""), false)
                .unwrap_err()
                .code,
            409
        );
        let e = ops
            .create(pods, Some("nope"), pod("a", ""), false)
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (404, "namespaces \"nope\" not found")
        );
    }

    #[test]
    fn stale_update_conflicts_and_noop_update_keeps_rv() {
        let (ops, reg) = ops();
        let cm = &reg.core("configmaps");
        let o = ops
            .create(
                cm,
                Some("default"),
                json!({"metadata":{"name":"c"},"data":{"a":"1"}}),
                false,
            )
            .unwrap();
        let mut v = o.to_value(cm);
        v["data"]["a"] = json!("2");
        let o2 = ops
            .update(cm, Some("default"), "c", v.clone(), UpdateScope::Main)
            .unwrap();
        assert!(o2.rv > o.rv);
        let e = ops
            .update(cm, Some("default"), "c", v, UpdateScope::Main)
            .unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(e.reason, "Conflict");
        let same = ops
            .update(cm, Some("default"), "c", o2.to_value(cm), UpdateScope::Main)
            .unwrap();
        assert_eq!(same.rv, o2.rv, "a no-op update does not write");
    }

    #[tokio::test]
    async fn bound_pod_is_deleted_gracefully_then_by_the_kubelet() {
        let (ops, reg) = ops();
        let pods = reg.core("pods").clone();
        ops.create(&pods, Some("default"), pod("p", "node-1"), false)
            .unwrap();
        let r = ops
            .delete(&pods, Some("default"), "p", &DeleteOptions::default())
            .unwrap();
        assert!(!r.deleted);
        let v: Value = serde_json::from_slice(&r.object.body).unwrap();
        assert!(v["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 30);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            ops.get(&pods, Some("default"), "p").is_err(),
            "the simulated kubelet finished it"
        );
        ops.create(&pods, Some("default"), pod("q", "node-1"), false)
            .unwrap();
        let r = ops
            .delete(
                &pods,
                Some("default"),
                "q",
                &DeleteOptions {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(r.deleted);
        ops.create(&pods, Some("default"), pod("u", ""), false)
            .unwrap();
        assert!(
            ops.delete(&pods, Some("default"), "u", &DeleteOptions::default())
                .unwrap()
                .deleted,
            "unbound pods go at once"
        );
    }

    #[test]
    fn finalizers_hold_deletion_until_removed() {
        let (ops, reg) = ops();
        let cm = reg.core("configmaps").clone();
        ops.create(
            &cm,
            Some("default"),
            json!({"metadata":{"name":"f","finalizers":["x/y"]}}),
            false,
        )
        .unwrap();
        let r = ops
            .delete(&cm, Some("default"), "f", &DeleteOptions::default())
            .unwrap();
        assert!(!r.deleted);
        ops.modify(&cm, Some("default"), "f", |v| {
            v["metadata"]["finalizers"] = json!([]);
        })
        .unwrap();
        assert!(ops.get(&cm, Some("default"), "f").is_err());
    }

    #[tokio::test]
    async fn namespace_deletion_empties_it() {
        let (ops, reg) = ops();
        let ns = reg.core("namespaces").clone();
        let cm = reg.core("configmaps").clone();
        ops.create(&ns, None, json!({"metadata":{"name":"t"}}), false)
            .unwrap();
        ops.create(&cm, Some("t"), json!({"metadata":{"name":"c"}}), false)
            .unwrap();
        let r = ops
            .delete(&ns, None, "t", &DeleteOptions::default())
            .unwrap();
        assert!(!r.deleted);
        let e = ops
            .create(&cm, Some("t"), json!({"metadata":{"name":"d"}}), false)
            .unwrap_err();
        assert_eq!(e.code, 403);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(ops.get(&ns, None, "t").is_err());
        assert!(ops.get(&cm, Some("t"), "c").is_err());
    }
}
