//! Printers of the dynamic resource allocation kinds (resource.k8s.io DeviceClasses,
//! ResourceClaims, ResourceClaimTemplates, ResourceSlices), as kube 1.36's
//! `pkg/printers/internalversion/printers.go` prints them.
//!
//! Same interface as [`super::workloads`]: [`Kind`], [`kind_for`], [`columns`], [`cells`];
//! [`KINDS`] lists the kinds printed here and [`GENERIC`] the kinds of this module's groups
//! that kube prints with its default convertor (`Name` + `Created At`): none, every kind
//! resource.k8s.io/v1 serves has a printer (DeviceTaintRule and ResourcePoolStatusRequest
//! have printers too, but kube 1.36 serves them only from beta and alpha versions, which are
//! off by default, so they are not printed here).
//!
//! Cells are read from the v1 JSON form. Pure: no I/O; the clock is an argument.

use serde_json::{Value, json};

use super::cells::{arr, being_deleted, name_of, present, str_at};
use super::{age, age_col, name_col, text};

// Column descriptions: the State one is literal in printers.go, the ResourceSlice ones are
// k8s.io/api resource/v1 swagger docs.
const D_CLAIM_STATE: &str = "A summary of the current state (allocated, pending, reserved, etc.).";
const D_SLICE_NODE: &str = "NodeName identifies the node which provides the resources in this pool. A field selector can be used to list only ResourceSlice objects belonging to a certain node.\n\nThis field can be used to limit access from nodes to ResourceSlices with the same node name. It also indicates to autoscalers that adding new nodes of the same type as some old node might also make new resources available.\n\nExactly one of NodeName, NodeSelector, AllNodes, and PerDeviceNodeSelection must be set. This field is immutable.";
const D_SLICE_DRIVER: &str = "Driver identifies the DRA driver providing the capacity information. A field selector can be used to list only ResourceSlice objects with a certain driver name.\n\nMust be a DNS subdomain and should end with a DNS domain owned by the vendor of the driver. It should use only lower case characters. This field is immutable.";
const D_SLICE_POOL: &str = "Name is used to identify the pool. For node-local devices, this is often the node name, but this is not required.\n\nIt must not be longer than 253 characters and must consist of one or more DNS sub-domains separated by slashes. This field is immutable.";

/// The kinds printed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
}

/// Every (group, kind) printed here.
pub(super) const KINDS: &[(&str, &str)] = &[
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceClaim"),
    ("resource.k8s.io", "ResourceClaimTemplate"),
    ("resource.k8s.io", "ResourceSlice"),
];

/// The (group, kind)s of this module's groups that kube prints with the default convertor.
pub(super) const GENERIC: &[(&str, &str)] = &[];

/// The kind printed for `(group, kind)`, if it is one of this module's.
pub(super) fn kind_for(group: &str, kind: &str) -> Option<Kind> {
    Some(match (group, kind) {
        ("resource.k8s.io", "DeviceClass") => Kind::DeviceClass,
        ("resource.k8s.io", "ResourceClaim") => Kind::ResourceClaim,
        ("resource.k8s.io", "ResourceClaimTemplate") => Kind::ResourceClaimTemplate,
        ("resource.k8s.io", "ResourceSlice") => Kind::ResourceSlice,
        _ => return None,
    })
}

/// The column definitions of `kind`.
pub(super) fn columns(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::DeviceClass | Kind::ResourceClaimTemplate => vec![name_col(), age_col()],
        Kind::ResourceClaim => vec![name_col(), text("State", D_CLAIM_STATE), age_col()],
        Kind::ResourceSlice => vec![
            name_col(),
            text("Node", D_SLICE_NODE),
            text("Driver", D_SLICE_DRIVER),
            text("Pool", D_SLICE_POOL),
            age_col(),
        ],
    }
}

/// One row's cells for `obj`, one per column of [`columns`].
pub(super) fn cells(kind: Kind, obj: &Value, now: i64) -> Vec<Value> {
    let name = json!(name_of(obj));
    match kind {
        Kind::DeviceClass | Kind::ResourceClaimTemplate => vec![name, json!(age(obj, now))],
        Kind::ResourceClaim => vec![name, json!(claim_state(obj)), json!(age(obj, now))],
        // spec.nodeName is a pointer in v1: unset prints as "".
        Kind::ResourceSlice => vec![
            name,
            json!(str_at(obj, "/spec/nodeName")),
            json!(str_at(obj, "/spec/driver")),
            json!(str_at(obj, "/spec/pool/name")),
            json!(age(obj, now)),
        ],
    }
}

/// kube's `resourceClaimState`: `deleted` while the claim is being deleted, then `pending`
/// (not yet allocated, and not being deleted) or `allocated` and, when something uses it,
/// `reserved`; joined by `,`.
fn claim_state(obj: &Value) -> String {
    let deleting = being_deleted(obj);
    let mut states = Vec::new();
    if deleting {
        states.push("deleted");
    }
    if present(obj.pointer("/status/allocation")).is_none() {
        if !deleting {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if !arr(obj.pointer("/status/reservedFor")).is_empty() {
            states.push("reserved");
        }
    }
    states.join(",")
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{NOW, bare_row, shape, strings, ts};
    use super::super::{column_definitions, has_printer, row_cells};
    use super::*;

    const G: &str = "resource.k8s.io";

    #[test]
    fn every_dra_kind_has_a_printer() {
        for (g, k) in KINDS {
            assert!(has_printer(g, k), "{g} {k}");
        }
        assert!(!has_printer(G, "DeviceTaintRule"));
        assert!(!has_printer(G, "ResourcePoolStatusRequest"));
    }

    #[test]
    fn device_class_and_template_print_name_and_age() {
        for kind in ["DeviceClass", "ResourceClaimTemplate"] {
            assert_eq!(shape(G, kind), strings(&[("Name", "name"), ("Age", "")]));
            let obj = json!({"metadata": {"name": "gpu", "creationTimestamp": ts(61)},
                             "spec": {"selectors": [{"cel": {"expression": "true"}}]}});
            assert_eq!(row_cells(G, kind, &obj, NOW), json!(["gpu", "61s"]));
            assert_eq!(bare_row(G, kind), json!(["x", "<unknown>"]));
        }
    }

    fn claim(status: Value) -> Value {
        json!({
            "metadata": {"name": "gpu-claim", "namespace": "ml", "creationTimestamp": ts(600)},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
            "status": status
        })
    }

    #[test]
    fn resource_claim_states() {
        assert_eq!(
            shape(G, "ResourceClaim"),
            strings(&[("Name", "name"), ("State", ""), ("Age", "")])
        );
        assert_eq!(
            column_definitions(G, "ResourceClaim")[1]["description"],
            D_CLAIM_STATE
        );
        assert_eq!(
            row_cells(G, "ResourceClaim", &claim(json!({})), NOW),
            json!(["gpu-claim", "pending", "10m"])
        );
        let allocation = json!({"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}});
        let allocated = claim(json!({"allocation": allocation}));
        assert_eq!(
            row_cells(G, "ResourceClaim", &allocated, NOW)[1],
            "allocated"
        );
        let reserved = claim(json!({"allocation": allocation,
                                    "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "u1"}]}));
        assert_eq!(
            row_cells(G, "ResourceClaim", &reserved, NOW)[1],
            "allocated,reserved"
        );
        let mut deleting = reserved.clone();
        deleting["metadata"]["deletionTimestamp"] = json!(ts(1));
        assert_eq!(
            row_cells(G, "ResourceClaim", &deleting, NOW)[1],
            "deleted,allocated,reserved"
        );
        let mut gone = claim(json!({"allocation": null}));
        gone["metadata"]["deletionTimestamp"] = json!(ts(1));
        assert_eq!(row_cells(G, "ResourceClaim", &gone, NOW)[1], "deleted");
        assert_eq!(
            bare_row(G, "ResourceClaim"),
            json!(["x", "pending", "<unknown>"])
        );
    }

    #[test]
    fn resource_slice_cells() {
        assert_eq!(
            shape(G, "ResourceSlice"),
            strings(&[
                ("Name", "name"),
                ("Node", ""),
                ("Driver", ""),
                ("Pool", ""),
                ("Age", "")
            ])
        );
        let defs = column_definitions(G, "ResourceSlice");
        assert_eq!(defs[1]["description"], D_SLICE_NODE);
        assert_eq!(defs[3]["description"], D_SLICE_POOL);
        let slice = json!({
            "metadata": {"name": "node-1-gpu.example.com-x7k2p", "creationTimestamp": ts(3600 * 5)},
            "spec": {"driver": "gpu.example.com", "nodeName": "node-1",
                     "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}]}
        });
        assert_eq!(
            row_cells(G, "ResourceSlice", &slice, NOW),
            json!([
                "node-1-gpu.example.com-x7k2p",
                "node-1",
                "gpu.example.com",
                "node-1",
                "5h"
            ])
        );
        let network = json!({"metadata": {"name": "s"},
                             "spec": {"driver": "net.example.com", "allNodes": true, "pool": {"name": "fabric"}}});
        assert_eq!(
            row_cells(G, "ResourceSlice", &network, NOW),
            json!(["s", "", "net.example.com", "fabric", "<unknown>"])
        );
        assert_eq!(
            bare_row(G, "ResourceSlice"),
            json!(["x", "", "", "", "<unknown>"])
        );
    }
}
