//! Printers of the kinds that govern access to the API (rbac.authorization.k8s.io, admissionregistration.k8s.io, certificates.k8s.io, flowcontrol.apiserver.k8s.io, apiregistration.k8s.io, apiextensions.k8s.io), as kube's printers print them.
//!
//! Same interface as [`super::workloads`]: [`Kind`], [`kind_for`], [`columns`], [`cells`];
//! [`KINDS`] lists the kinds printed here and [`GENERIC`] the kinds of this module's groups
//! that kube prints with its default convertor (`Name` + `Created At`).

use serde_json::Value;

/// The kinds printed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {}

/// Every (group, kind) printed here.
pub(super) const KINDS: &[(&str, &str)] = &[];

/// The (group, kind)s of this module's groups that kube prints with the default convertor.
pub(super) const GENERIC: &[(&str, &str)] = &[];

/// The kind printed for `(group, kind)`, if it is one of this module's.
pub(super) fn kind_for(_group: &str, _kind: &str) -> Option<Kind> {
    None
}

/// The column definitions of `kind`.
pub(super) fn columns(kind: Kind) -> Vec<Value> {
    match kind {}
}

/// One row's cells for `obj`, one per column of [`columns`].
pub(super) fn cells(kind: Kind, _obj: &Value, _now: i64) -> Vec<Value> {
    match kind {}
}
