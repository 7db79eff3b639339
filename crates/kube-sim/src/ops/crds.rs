//! What a `CustomResourceDefinition`'s writes do to the types served, as kube-apiserver's
//! apiextensions server does it: a created or updated CRD serves its `served` versions from the
//! moment the write answers; a deleted CRD first loses its custom resources (each a DELETED
//! event), then the CRD object goes (its DELETED event), then its types stop being served (their
//! open watches end, their paths answer 404).
//!
//! The simulator does it synchronously within the DELETE, without kube's
//! `customresourcecleanup.apiextensions.k8s.io` finalizer and `Terminating` condition (the
//! DELETE answers once everything is gone). The CRD rules themselves are
//! [`semantics::crds`](crate::semantics::crds)'s.

use serde_json::Value;

use super::Ops;
use crate::kinds::ResourceType;
use crate::semantics::crds::{group_resource, served_types};
use crate::semantics::{DeleteOptions, decide_delete};
use crate::store::{EventType, WriteOutcome};
use kube_wire::status::Status;

impl Ops {
    /// Before a CRD is created: its group and resource must not be served by a built-in type
    /// or an aggregated API's (422).
    pub(super) fn check_crd(
        &self,
        rt: &ResourceType,
        name: &str,
        crd: &Value,
    ) -> Result<(), Status> {
        let (group, resource) = group_resource(crd);
        self.store
            .registry()
            .check_custom(&group, &resource)
            .map_err(|why| {
                Status::invalid(
                    &rt.group,
                    &rt.kind,
                    name,
                    &[(
                        "FieldValueInvalid",
                        "spec.group",
                        format!("Invalid value: \"{group}\": {why}"),
                    )],
                )
            })
    }

    /// After a CRD write committed: its types are served as it now says, or, if it is gone,
    /// its remaining custom resources are deleted and its types are no longer served.
    pub(super) fn crd_written(&self, rt: &ResourceType, out: &WriteOutcome) {
        let deleted = out
            .event
            .as_ref()
            .is_some_and(|e| e.ty == EventType::Deleted);
        let crd = out.object.to_value(rt);
        let (group, resource) = group_resource(&crd);
        let versions = if deleted {
            self.empty_custom(&group, &resource);
            Vec::new()
        } else if crd["metadata"]["deletionTimestamp"].is_string() {
            // Being deleted (waiting for finalizers): its types are served until it is gone.
            return;
        } else {
            served_types(&crd)
        };
        match self
            .store
            .registry()
            .set_custom(&group, &resource, versions)
        {
            Ok(change) => self.store.custom_changed(&change),
            Err(e) => {
                tracing::warn!(crd = %out.object.name, error = %e, "the CRD's types cannot be served")
            }
        }
    }

    /// Before a CRD is deleted (once its preconditions hold): every custom resource of it is
    /// deleted, and none may be created any more.
    pub(super) fn crd_deleting(
        &self,
        rt: &ResourceType,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(), Status> {
        let current = self.get(rt, None, name)?;
        decide_delete(rt, &current, opts)?;
        let (group, resource) = group_resource(&current.to_value(rt));
        self.empty_custom(&group, &resource);
        Ok(())
    }

    /// Refuses creates of `group`/`resource` and deletes all its objects.
    fn empty_custom(&self, group: &str, resource: &str) {
        for t in self.store.registry().custom_versions(group, resource) {
            if t.builtin || t.aggregated {
                continue;
            }
            self.store.set_terminating(&t);
            self.delete_all(&t, None);
        }
    }
}
