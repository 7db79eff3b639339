//! Printers of the storage kinds (core PersistentVolumes and their claims; storage.k8s.io
//! StorageClasses, CSIDrivers, CSINodes, CSIStorageCapacities, VolumeAttachments,
//! VolumeAttributesClasses), as kube's `pkg/printers/internalversion/printers.go` prints them.
//!
//! Same interface as [`super::workloads`]: [`Kind`], [`kind_for`], [`columns`], [`cells`];
//! [`KINDS`] lists the kinds printed here and [`GENERIC`] the kinds of this module's groups
//! that kube prints with its default convertor (`Name` + `Created At`): none, every
//! storage.k8s.io kind has a printer.
//!
//! Cells are read from the v1 JSON as the apiserver would decode it, defaults included: a PV
//! without a reclaim policy prints the defaulter's `Retain`, a CSIDriver without lifecycle
//! modes `Persistent`. Quantities print as the JSON carries them, which for an object read from
//! kube-apiserver is Go's canonical `Quantity.String()`. Pure: no I/O; the clock is an argument.

use serde_json::{Value, json};

use super::cells::{
    annotation, arr, being_deleted, flag, join_strings, name_marked_default, name_of, present,
    quantity, quantity_or_zero, str_at, str_or,
};
use super::{age, age_col, boolean, col, integer, name_col, text, wide};

// The swagger doc strings kube's column definitions carry (k8s.io/api core/v1, storage/v1 and
// storage/v1beta1 types_swagger_doc_generated.go), and the printer's own descriptions.
const D_PV_CAPACITY: &str = "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity";
const D_PV_ACCESS_MODES: &str = "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes";
const D_PV_RECLAIM: &str = "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming";
const D_PV_PHASE: &str = "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase";
const D_PV_CLAIM: &str = "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding";
const D_PV_REASON: &str = "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.";
const D_PV_VOLUME_MODE: &str = "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.";
const D_PVC_PHASE: &str = "phase represents the current phase of PersistentVolumeClaim.";
const D_PVC_VOLUME: &str =
    "volumeName is the binding reference to the PersistentVolume backing this claim.";
const D_PVC_CAPACITY: &str = "capacity represents the actual resources of the underlying volume.";
const D_PVC_ACCESS_MODES: &str = "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1";
const D_PVC_VOLUME_MODE: &str = "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.";
const D_SC_PROVISIONER: &str = "provisioner indicates the type of the provisioner.";
const D_SC_RECLAIM: &str = "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.";
const D_SC_BINDING: &str = "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.";
const D_SC_EXPANSION: &str =
    "allowVolumeExpansion shows whether the storage class allow volume expand.";
const D_VAC_DRIVER: &str = "Name of the CSI driver This field is immutable.";
const D_VA_ATTACHER: &str = "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().";
const D_VA_PV: &str =
    "persistentVolumeName represents the name of the persistent volume to attach.";
const D_VA_NODE: &str = "nodeName represents the node that the volume should be attached to.";
const D_VA_ATTACHED: &str = "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.";
const D_CSID_ATTACH: &str = "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.";
const D_CSID_POD_INFO: &str = "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.\n\nThe CSI driver specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is responsible for parsing and validating the information passed in as VolumeContext.\n\nThe following VolumeContext will be passed if podInfoOnMount is set to true. This list might grow, but the prefix will be used. \"csi.storage.k8s.io/pod.name\": pod.Name \"csi.storage.k8s.io/pod.namespace\": pod.Namespace \"csi.storage.k8s.io/pod.uid\": string(pod.UID) \"csi.storage.k8s.io/ephemeral\": \"true\" if the volume is an ephemeral inline volume\n                                defined by a CSIVolumeSource, otherwise \"false\"\n\n\"csi.storage.k8s.io/ephemeral\" is a new feature in Kubernetes 1.16. It is only required for drivers which support both the \"Persistent\" and \"Ephemeral\" VolumeLifecycleMode. Other drivers can leave pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn't support this field, drivers can only support one mode when deployed on such a cluster and the deployment determines which mode that is, for example via a command line parameter of the driver.\n\nThis field was immutable in Kubernetes < 1.29 and now is mutable.";
const D_CSID_CAPACITY: &str = "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.\n\nThe check can be enabled immediately when deploying a driver. In that case, provisioning new volumes with late binding will pause until the driver deployment has published some suitable CSIStorageCapacity object.\n\nAlternatively, the driver can be deployed with the field unset or false and it can be flipped later when storage capacity information has been published.\n\nThis field was immutable in Kubernetes <= 1.22 and now is mutable.";
const D_CSID_TOKENS: &str = "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls. The CSI driver should parse and validate the following VolumeContext: \"csi.storage.k8s.io/serviceAccount.tokens\": {\n  \"<audience>\": {\n    \"token\": <token>,\n    \"expirationTimestamp\": <expiration timestamp in RFC3339>,\n  },\n  ...\n}\n\nNote: Audience in each TokenRequest should be different and at most one token is empty string. To receive a new token after expiry, RequiresRepublish can be used to trigger NodePublishVolume periodically.";
const D_CSID_REPUBLISH: &str = "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.\n\nNote: After a successful initial NodePublishVolume call, subsequent calls to NodePublishVolume should only update the contents of the volume. New mount points will not be seen by a running container.";
const D_CSID_MODES: &str = "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.\n\nThe other mode is \"Ephemeral\". In this mode, volumes are defined inline inside the pod spec with CSIVolumeSource and their lifecycle is tied to the lifecycle of that pod. A driver has to be aware of this because it is only going to get a NodePublishVolume call for such a volume.\n\nFor more information about implementing this mode, see https://kubernetes-csi.github.io/docs/ephemeral-local-volumes.html A driver can support one or more of these modes and more modes may be added in the future.\n\nThis field is beta. This field is immutable.";
const D_CSC_CLASS: &str = "storageClassName represents the name of the StorageClass that the reported capacity applies to. It must meet the same requirements as the name of a StorageClass object (non-empty, DNS subdomain). If that object no longer exists, the CSIStorageCapacity object is obsolete and should be removed by its creator. This field is immutable.";
const D_CSC_CAPACITY: &str = "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields.\n\nThe semantic is currently (CSI spec 1.2) defined as: The available capacity, in bytes, of the storage that can be used to provision volumes. If not set, that information is currently unavailable.";
const D_PV_CLASS: &str = "StorageClass of the pv";
const D_PV_VAC: &str = "VolumeAttributesClass of the pv";
const D_PVC_CLASS: &str = "StorageClass of the pvc";
const D_PVC_VAC: &str = "VolumeAttributesClass of the pvc";
const D_CSINODE_DRIVERS: &str =
    "Drivers indicates the number of CSI drivers registered on the node";

/// The beta annotation that names a volume's or claim's class before `storageClassName`.
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// The annotations that mark a StorageClass as the default one.
const DEFAULT_CLASS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];
/// The annotation that marks a VolumeAttributesClass as the default one.
const DEFAULT_VAC: &str = "volumeattributesclass.alpha.kubernetes.io/is-default-class";

/// The kinds printed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttributesClass,
    CsiDriver,
    CsiNode,
    CsiStorageCapacity,
    VolumeAttachment,
}

/// Every (group, kind) printed here.
pub(super) const KINDS: &[(&str, &str)] = &[
    ("", "PersistentVolume"),
    ("", "PersistentVolumeClaim"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "CSIStorageCapacity"),
    ("storage.k8s.io", "VolumeAttachment"),
];

/// The (group, kind)s of this module's groups that kube prints with the default convertor:
/// none, kube has a printer for every storage.k8s.io kind.
pub(super) const GENERIC: &[(&str, &str)] = &[];

/// The kind printed for `(group, kind)`, if it is one of this module's.
pub(super) fn kind_for(group: &str, kind: &str) -> Option<Kind> {
    Some(match (group, kind) {
        ("", "PersistentVolume") => Kind::PersistentVolume,
        ("", "PersistentVolumeClaim") => Kind::PersistentVolumeClaim,
        ("storage.k8s.io", "StorageClass") => Kind::StorageClass,
        ("storage.k8s.io", "VolumeAttributesClass") => Kind::VolumeAttributesClass,
        ("storage.k8s.io", "CSIDriver") => Kind::CsiDriver,
        ("storage.k8s.io", "CSINode") => Kind::CsiNode,
        ("storage.k8s.io", "CSIStorageCapacity") => Kind::CsiStorageCapacity,
        ("storage.k8s.io", "VolumeAttachment") => Kind::VolumeAttachment,
        _ => return None,
    })
}

/// The column definitions of `kind`.
pub(super) fn columns(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::PersistentVolume => vec![
            name_col(),
            text("Capacity", D_PV_CAPACITY),
            text("Access Modes", D_PV_ACCESS_MODES),
            text("Reclaim Policy", D_PV_RECLAIM),
            text("Status", D_PV_PHASE),
            text("Claim", D_PV_CLAIM),
            text("StorageClass", D_PV_CLASS),
            text("VolumeAttributesClass", D_PV_VAC),
            text("Reason", D_PV_REASON),
            age_col(),
            wide("VolumeMode", D_PV_VOLUME_MODE),
        ],
        Kind::PersistentVolumeClaim => vec![
            name_col(),
            text("Status", D_PVC_PHASE),
            text("Volume", D_PVC_VOLUME),
            text("Capacity", D_PVC_CAPACITY),
            text("Access Modes", D_PVC_ACCESS_MODES),
            text("StorageClass", D_PVC_CLASS),
            text("VolumeAttributesClass", D_PVC_VAC),
            age_col(),
            wide("VolumeMode", D_PVC_VOLUME_MODE),
        ],
        // kube types AllowVolumeExpansion as a string column, yet its cell is a boolean.
        Kind::StorageClass => vec![
            name_col(),
            text("Provisioner", D_SC_PROVISIONER),
            text("ReclaimPolicy", D_SC_RECLAIM),
            text("VolumeBindingMode", D_SC_BINDING),
            text("AllowVolumeExpansion", D_SC_EXPANSION),
            age_col(),
        ],
        Kind::VolumeAttributesClass => {
            vec![name_col(), text("DriverName", D_VAC_DRIVER), age_col()]
        }
        Kind::CsiDriver => vec![
            name_col(),
            boolean("AttachRequired", D_CSID_ATTACH),
            boolean("PodInfoOnMount", D_CSID_POD_INFO),
            boolean("StorageCapacity", D_CSID_CAPACITY),
            text("TokenRequests", D_CSID_TOKENS),
            boolean("RequiresRepublish", D_CSID_REPUBLISH),
            text("Modes", D_CSID_MODES),
            age_col(),
        ],
        Kind::CsiNode => vec![name_col(), integer("Drivers", D_CSINODE_DRIVERS), age_col()],
        // kube prints no age for a CSIStorageCapacity.
        Kind::CsiStorageCapacity => vec![
            name_col(),
            text("StorageClassName", D_CSC_CLASS),
            text("Capacity", D_CSC_CAPACITY),
        ],
        // kube gives the attacher the `name` format too.
        Kind::VolumeAttachment => vec![
            name_col(),
            col("Attacher", "string", "name", D_VA_ATTACHER, 0),
            text("PV", D_VA_PV),
            text("Node", D_VA_NODE),
            boolean("Attached", D_VA_ATTACHED),
            age_col(),
        ],
    }
}

/// One row's cells for `obj`, one per column of [`columns`].
pub(super) fn cells(kind: Kind, obj: &Value, now: i64) -> Vec<Value> {
    match kind {
        Kind::PersistentVolume => persistent_volume(obj, now),
        Kind::PersistentVolumeClaim => persistent_volume_claim(obj, now),
        Kind::StorageClass => storage_class(obj, now),
        Kind::VolumeAttributesClass => vec![
            json!(name_marked_default(obj, &[DEFAULT_VAC])),
            json!(str_at(obj, "/driverName")),
            json!(age(obj, now)),
        ],
        Kind::CsiDriver => csi_driver(obj, now),
        Kind::CsiNode => vec![
            json!(name_of(obj)),
            json!(arr(obj.pointer("/spec/drivers")).len()),
            json!(age(obj, now)),
        ],
        Kind::CsiStorageCapacity => vec![
            json!(name_of(obj)),
            json!(str_at(obj, "/storageClassName")),
            json!(quantity(obj.get("capacity")).unwrap_or_else(|| "<unset>".to_string())),
        ],
        Kind::VolumeAttachment => vec![
            json!(name_of(obj)),
            json!(str_at(obj, "/spec/attacher")),
            json!(str_at(obj, "/spec/source/persistentVolumeName")),
            json!(str_at(obj, "/spec/nodeName")),
            json!(flag(obj.pointer("/status/attached"), false)),
            json!(age(obj, now)),
        ],
    }
}

/// kube's PV row: capacity, access modes, reclaim policy, phase, claim, class, attributes
/// class, reason, age and volume mode.
fn persistent_volume(obj: &Value, now: i64) -> Vec<Value> {
    let claim = match present(obj.pointer("/spec/claimRef")) {
        Some(c) => format!("{}/{}", str_at(c, "/namespace"), str_at(c, "/name")),
        None => String::new(),
    };
    // The v1 defaulter fills an empty reclaim policy and phase.
    let reclaim = str_or(obj.pointer("/spec/persistentVolumeReclaimPolicy"), "Retain");
    let class = annotation(obj, BETA_STORAGE_CLASS)
        .unwrap_or_else(|| str_at(obj, "/spec/storageClassName"));
    vec![
        json!(name_of(obj)),
        json!(storage_quantity(obj.pointer("/spec/capacity"))),
        json!(access_modes(obj.pointer("/spec/accessModes"))),
        json!(reclaim),
        json!(phase(obj)),
        json!(claim),
        json!(class),
        json!(attributes_class(obj)),
        json!(str_at(obj, "/status/reason")),
        json!(age(obj, now)),
        json!(volume_mode(obj)),
    ]
}

/// kube's PVC row: capacity and access modes are the bound volume's, empty until the claim
/// names a volume.
fn persistent_volume_claim(obj: &Value, now: i64) -> Vec<Value> {
    let volume = str_at(obj, "/spec/volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            storage_quantity(obj.pointer("/status/capacity")),
            access_modes(obj.pointer("/status/accessModes")),
        )
    };
    let class = annotation(obj, BETA_STORAGE_CLASS).unwrap_or_else(|| {
        obj.pointer("/spec/storageClassName")
            .and_then(Value::as_str)
            .unwrap_or("")
    });
    vec![
        json!(name_of(obj)),
        json!(phase(obj)),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(attributes_class(obj)),
        json!(age(obj, now)),
        json!(volume_mode(obj)),
    ]
}

/// kube's StorageClass row; the name carries ` (default)` when an is-default-class
/// annotation is `true`.
fn storage_class(obj: &Value, now: i64) -> Vec<Value> {
    vec![
        json!(name_marked_default(obj, &DEFAULT_CLASS)),
        json!(str_at(obj, "/provisioner")),
        json!(optional_str(obj.get("reclaimPolicy")).unwrap_or("Delete")),
        json!(optional_str(obj.get("volumeBindingMode")).unwrap_or("Immediate")),
        json!(flag(obj.get("allowVolumeExpansion"), false)),
        json!(age(obj, now)),
    ]
}

/// kube's CSIDriver row, with the v1 defaults (attach required, lifecycle mode `Persistent`).
fn csi_driver(obj: &Value, now: i64) -> Vec<Value> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    // An empty list reads back from storage as no list at all.
    let tokens = arr(spec.get("tokenRequests"));
    let tokens = if tokens.is_empty() {
        "<unset>".to_string()
    } else {
        tokens
            .iter()
            .map(|t| str_at(t, "/audience"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let modes = arr(spec.get("volumeLifecycleModes"));
    let modes = if modes.is_empty() {
        "Persistent".to_string()
    } else {
        join_strings(modes, ",")
    };
    vec![
        json!(name_of(obj)),
        json!(flag(spec.get("attachRequired"), true)),
        json!(flag(spec.get("podInfoOnMount"), false)),
        json!(flag(spec.get("storageCapacity"), false)),
        json!(tokens),
        json!(flag(spec.get("requiresRepublish"), false)),
        json!(modes),
        json!(age(obj, now)),
    ]
}

/// The phase of a PV or PVC (the defaulter's `Pending` when empty), `Terminating` once it is
/// being deleted.
fn phase(obj: &Value) -> &str {
    if being_deleted(obj) {
        return "Terminating";
    }
    str_or(obj.pointer("/status/phase"), "Pending")
}

/// `spec.volumeAttributesClassName`, `<unset>` when absent (an empty name prints empty).
fn attributes_class(obj: &Value) -> &str {
    optional_str(obj.pointer("/spec/volumeAttributesClassName")).unwrap_or("<unset>")
}

/// `spec.volumeMode`, which the defaulter sets to `Filesystem` when absent.
fn volume_mode(obj: &Value) -> &str {
    optional_str(obj.pointer("/spec/volumeMode")).unwrap_or("Filesystem")
}

/// kube's `GetAccessModesAsString`: the modes present, each once, always in the order
/// RWO, ROX, RWX, RWOP.
fn access_modes(modes: Option<&Value>) -> String {
    let modes = arr(modes);
    let has = |mode: &str| modes.iter().any(|m| m.as_str() == Some(mode));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The `storage` entry of a resource list as Go prints a `Quantity`: `0` when absent.
fn storage_quantity(list: Option<&Value>) -> String {
    quantity_or_zero(list.and_then(|l| l.get("storage")))
}

/// An optional string field (a Go `*string`): `None` when absent or null, even if empty
/// otherwise.
fn optional_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{NOW, bare_row, cols, shape, ts};
    use super::super::{column_definitions, has_printer, row_cells};
    use super::*;

    #[test]
    fn every_storage_kind_is_printed_here() {
        for (g, k) in KINDS {
            assert!(has_printer(g, k), "{g} {k}");
            assert!(kind_for(g, k).is_some(), "{g} {k}");
        }
        assert!(kind_for("storage.k8s.io", "PersistentVolume").is_none());
        assert!(kind_for("", "StorageClass").is_none());
    }

    #[test]
    fn persistent_volume_columns_and_cells() {
        assert_eq!(
            shape("", "PersistentVolume"),
            cols(&[
                ("Name", "string", "name", 0),
                ("Capacity", "string", "", 0),
                ("Access Modes", "string", "", 0),
                ("Reclaim Policy", "string", "", 0),
                ("Status", "string", "", 0),
                ("Claim", "string", "", 0),
                ("StorageClass", "string", "", 0),
                ("VolumeAttributesClass", "string", "", 0),
                ("Reason", "string", "", 0),
                ("Age", "string", "", 0),
                ("VolumeMode", "string", "", 1),
            ])
        );
        let defs = column_definitions("", "PersistentVolume");
        assert_eq!(defs[6]["description"], "StorageClass of the pv");
        assert!(
            defs[3]["description"]
                .as_str()
                .unwrap()
                .starts_with("persistentVolumeReclaimPolicy defines what happens")
        );
        let pv = json!({
            "metadata": {"name": "pv-1", "creationTimestamp": ts(3600)},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce", "ReadWriteOncePod"],
                "persistentVolumeReclaimPolicy": "Delete",
                "claimRef": {"namespace": "default", "name": "data"},
                "storageClassName": "fast",
                "volumeAttributesClassName": "gold",
                "volumeMode": "Block"
            },
            "status": {"phase": "Failed", "reason": "Recycling failed"}
        });
        assert_eq!(
            row_cells("", "PersistentVolume", &pv, NOW),
            json!([
                "pv-1",
                "10Gi",
                "RWO,RWX,RWOP",
                "Delete",
                "Failed",
                "default/data",
                "fast",
                "gold",
                "Recycling failed",
                "60m",
                "Block"
            ])
        );
        // Defaults: Retain, Pending, Filesystem; a zero capacity; no claim, no class.
        assert_eq!(
            bare_row("", "PersistentVolume"),
            json!([
                "x",
                "0",
                "",
                "Retain",
                "Pending",
                "",
                "",
                "<unset>",
                "",
                "<unknown>",
                "Filesystem"
            ])
        );
        let mut deleting = pv.clone();
        deleting["metadata"]["deletionTimestamp"] = json!(ts(1));
        deleting["metadata"]["annotations"] =
            json!({"volume.beta.kubernetes.io/storage-class": "legacy"});
        let cells = row_cells("", "PersistentVolume", &deleting, NOW);
        assert_eq!(
            (&cells[4], &cells[6]),
            (&json!("Terminating"), &json!("legacy"))
        );
    }

    #[test]
    fn persistent_volume_claim_columns_and_cells() {
        assert_eq!(
            shape("", "PersistentVolumeClaim"),
            cols(&[
                ("Name", "string", "name", 0),
                ("Status", "string", "", 0),
                ("Volume", "string", "", 0),
                ("Capacity", "string", "", 0),
                ("Access Modes", "string", "", 0),
                ("StorageClass", "string", "", 0),
                ("VolumeAttributesClass", "string", "", 0),
                ("Age", "string", "", 0),
                ("VolumeMode", "string", "", 1),
            ])
        );
        let pvc = json!({
            "metadata": {"name": "data", "creationTimestamp": ts(90)},
            "spec": {"volumeName": "pv-1", "storageClassName": "fast",
                     "resources": {"requests": {"storage": "5Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"},
                       "accessModes": ["ReadOnlyMany"]}
        });
        assert_eq!(
            row_cells("", "PersistentVolumeClaim", &pvc, NOW),
            json!([
                "data",
                "Bound",
                "pv-1",
                "10Gi",
                "ROX",
                "fast",
                "<unset>",
                "90s",
                "Filesystem"
            ])
        );
        // Unbound: no capacity nor modes, whatever the request.
        let pending = json!({
            "metadata": {"name": "data", "annotations": {"volume.beta.kubernetes.io/storage-class": ""}},
            "spec": {"storageClassName": "fast", "volumeAttributesClassName": "",
                     "volumeMode": "Block", "resources": {"requests": {"storage": "5Gi"}}},
            "status": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadOnlyMany"]}
        });
        assert_eq!(
            row_cells("", "PersistentVolumeClaim", &pending, NOW),
            json!(["data", "Pending", "", "", "", "", "", "<unknown>", "Block"])
        );
        assert_eq!(
            bare_row("", "PersistentVolumeClaim"),
            json!([
                "x",
                "Pending",
                "",
                "",
                "",
                "",
                "<unset>",
                "<unknown>",
                "Filesystem"
            ])
        );
    }

    #[test]
    fn storage_and_attributes_classes() {
        assert_eq!(
            shape("storage.k8s.io", "StorageClass"),
            cols(&[
                ("Name", "string", "name", 0),
                ("Provisioner", "string", "", 0),
                ("ReclaimPolicy", "string", "", 0),
                ("VolumeBindingMode", "string", "", 0),
                ("AllowVolumeExpansion", "string", "", 0),
                ("Age", "string", "", 0),
            ])
        );
        let sc = json!({
            "metadata": {"name": "standard", "creationTimestamp": ts(600),
                         "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "kubernetes.io/gce-pd",
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": true
        });
        assert_eq!(
            row_cells("storage.k8s.io", "StorageClass", &sc, NOW),
            json!([
                "standard (default)",
                "kubernetes.io/gce-pd",
                "Retain",
                "WaitForFirstConsumer",
                true,
                "10m"
            ])
        );
        let beta = json!({"metadata": {"name": "old",
            "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"}}});
        assert_eq!(
            row_cells("storage.k8s.io", "StorageClass", &beta, NOW)[0],
            "old (default)"
        );
        let not_default = json!({"metadata": {"name": "b",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "yes"}}});
        assert_eq!(
            row_cells("storage.k8s.io", "StorageClass", &not_default, NOW)[0],
            "b"
        );
        assert_eq!(
            bare_row("storage.k8s.io", "StorageClass"),
            json!(["x", "", "Delete", "Immediate", false, "<unknown>"])
        );

        assert_eq!(
            shape("storage.k8s.io", "VolumeAttributesClass"),
            cols(&[
                ("Name", "string", "name", 0),
                ("DriverName", "string", "", 0),
                ("Age", "string", "", 0),
            ])
        );
        let vac = json!({
            "metadata": {"name": "gold", "creationTimestamp": ts(5),
                         "annotations": {"volumeattributesclass.alpha.kubernetes.io/is-default-class": "true"}},
            "driverName": "pd.csi.storage.gke.io",
            "parameters": {"iops": "3000"}
        });
        assert_eq!(
            row_cells("storage.k8s.io", "VolumeAttributesClass", &vac, NOW),
            json!(["gold (default)", "pd.csi.storage.gke.io", "5s"])
        );
        assert_eq!(
            bare_row("storage.k8s.io", "VolumeAttributesClass"),
            json!(["x", "", "<unknown>"])
        );
    }

    #[test]
    fn csi_driver_node_and_capacity() {
        assert_eq!(
            shape("storage.k8s.io", "CSIDriver"),
            cols(&[
                ("Name", "string", "name", 0),
                ("AttachRequired", "boolean", "", 0),
                ("PodInfoOnMount", "boolean", "", 0),
                ("StorageCapacity", "boolean", "", 0),
                ("TokenRequests", "string", "", 0),
                ("RequiresRepublish", "boolean", "", 0),
                ("Modes", "string", "", 0),
                ("Age", "string", "", 0),
            ])
        );
        let driver = json!({
            "metadata": {"name": "csi.example.com", "creationTimestamp": ts(30)},
            "spec": {"attachRequired": false, "podInfoOnMount": true, "storageCapacity": true,
                     "tokenRequests": [{"audience": "vault"}, {"audience": "gcp", "expirationSeconds": 3600}],
                     "requiresRepublish": true,
                     "volumeLifecycleModes": ["Persistent", "Ephemeral"]}
        });
        assert_eq!(
            row_cells("storage.k8s.io", "CSIDriver", &driver, NOW),
            json!([
                "csi.example.com",
                false,
                true,
                true,
                "vault,gcp",
                true,
                "Persistent,Ephemeral",
                "30s"
            ])
        );
        assert_eq!(
            bare_row("storage.k8s.io", "CSIDriver"),
            json!([
                "x",
                true,
                false,
                false,
                "<unset>",
                false,
                "Persistent",
                "<unknown>"
            ])
        );

        assert_eq!(
            shape("storage.k8s.io", "CSINode"),
            cols(&[
                ("Name", "string", "name", 0),
                ("Drivers", "integer", "", 0),
                ("Age", "string", "", 0),
            ])
        );
        let node = json!({"metadata": {"name": "node-1", "creationTimestamp": ts(7200)},
                          "spec": {"drivers": [{"name": "a", "nodeID": "n"}, {"name": "b", "nodeID": "n"}]}});
        assert_eq!(
            row_cells("storage.k8s.io", "CSINode", &node, NOW),
            json!(["node-1", 2, "120m"])
        );
        assert_eq!(
            bare_row("storage.k8s.io", "CSINode"),
            json!(["x", 0, "<unknown>"])
        );

        assert_eq!(
            shape("storage.k8s.io", "CSIStorageCapacity"),
            cols(&[
                ("Name", "string", "name", 0),
                ("StorageClassName", "string", "", 0),
                ("Capacity", "string", "", 0),
            ])
        );
        let cap = json!({"metadata": {"name": "csisc-1", "creationTimestamp": ts(1)},
                         "storageClassName": "fast", "capacity": "100Gi"});
        assert_eq!(
            row_cells("storage.k8s.io", "CSIStorageCapacity", &cap, NOW),
            json!(["csisc-1", "fast", "100Gi"])
        );
        assert_eq!(
            bare_row("storage.k8s.io", "CSIStorageCapacity"),
            json!(["x", "", "<unset>"])
        );
    }

    #[test]
    fn volume_attachment_columns_and_cells() {
        assert_eq!(
            shape("storage.k8s.io", "VolumeAttachment"),
            cols(&[
                ("Name", "string", "name", 0),
                ("Attacher", "string", "name", 0),
                ("PV", "string", "", 0),
                ("Node", "string", "", 0),
                ("Attached", "boolean", "", 0),
                ("Age", "string", "", 0),
            ])
        );
        let va = json!({
            "metadata": {"name": "csi-123", "creationTimestamp": ts(45)},
            "spec": {"attacher": "csi.example.com", "nodeName": "node-1",
                     "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": true}
        });
        assert_eq!(
            row_cells("storage.k8s.io", "VolumeAttachment", &va, NOW),
            json!(["csi-123", "csi.example.com", "pv-1", "node-1", true, "45s"])
        );
        assert_eq!(
            bare_row("storage.k8s.io", "VolumeAttachment"),
            json!(["x", "", "", "", false, "<unknown>"])
        );
    }
}
