//! Printers of the networking.k8s.io kinds (Ingresses, IngressClasses, NetworkPolicies, ServiceCIDRs, IPAddresses), as kube's `pkg/printers/internalversion/printers.go` prints them.
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
