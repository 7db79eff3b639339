//! The built-in resources the simulator serves: every resource kube-apiserver 1.36 serves by
//! default with `list` and `watch` (GA group versions; no beta is on by default for these kinds),
//! with the facts its discovery reports about each (scope, singular, short names, categories,
//! subresources).
//!
//! The table is in kube's group order (the aggregator's: `apiregistration.k8s.io` first, then by
//! APIService group priority, ties by name; `/apis` and aggregated discovery list groups in
//! registration order), each group's resources sorted by name as its discovery document lists
//! them. Not here: resources without `list`/`watch` (`bindings`, `componentstatuses`, the
//! `authentication.k8s.io` and `authorization.k8s.io` reviews), kube's other subresources
//! (`pods/log`, `pods/eviction`, `serviceaccounts/token`, `namespaces/finalize`, proxies, ...),
//! `autoscaling/v1` (kube serves HorizontalPodAutoscalers in `v1` and `v2`; the simulator in `v2`
//! only) and everything behind a beta or alpha gate (ClusterTrustBundle, PodCertificateRequest,
//! StorageVersionMigration, LeaseCandidate, ...).

/// A built-in type: the facts discovery reports about it (kube-apiserver 1.36's `APIResource`s).
pub(super) struct Builtin {
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub status: bool,
    pub scale: bool,
    pub approval: bool,
}

/// A namespaced built-in type with no short name, category or subresource.
const fn builtin(
    group: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
) -> Builtin {
    Builtin {
        group,
        version: "v1",
        resource,
        singular,
        kind,
        namespaced: true,
        short_names: &[],
        categories: &[],
        status: false,
        scale: false,
        approval: false,
    }
}

impl Builtin {
    const fn cluster(mut self) -> Self {
        self.namespaced = false;
        self
    }
    const fn short(mut self, names: &'static [&'static str]) -> Self {
        self.short_names = names;
        self
    }
    /// In the `all` category (`kubectl get all`).
    const fn all(mut self) -> Self {
        self.categories = &["all"];
        self
    }
    /// In the `api-extensions` category (kube's admission, CRD and APIService kinds).
    const fn api_extensions(mut self) -> Self {
        self.categories = &["api-extensions"];
        self
    }
    const fn status(mut self) -> Self {
        self.status = true;
        self
    }
    const fn scale(mut self) -> Self {
        self.scale = true;
        self
    }
    /// Has an `approval` subresource (CertificateSigningRequests).
    const fn approval(mut self) -> Self {
        self.approval = true;
        self
    }
    const fn version(mut self, version: &'static str) -> Self {
        self.version = version;
        self
    }
}

/// The RBAC group (Roles, ClusterRoles and their bindings).
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";
const NETWORKING_GROUP: &str = "networking.k8s.io";
const STORAGE_GROUP: &str = "storage.k8s.io";
const RESOURCE_GROUP: &str = "resource.k8s.io";
const FLOWCONTROL_GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// Every built-in type, in kube's group order (see the module documentation).
pub(super) const BUILTINS: &[Builtin] = &[
    builtin("", "configmaps", "configmap", "ConfigMap").short(&["cm"]),
    builtin("", "endpoints", "endpoints", "Endpoints").short(&["ep"]),
    builtin("", "events", "event", "Event").short(&["ev"]),
    builtin("", "limitranges", "limitrange", "LimitRange").short(&["limits"]),
    builtin("", "namespaces", "namespace", "Namespace")
        .cluster()
        .short(&["ns"])
        .status(),
    builtin("", "nodes", "node", "Node")
        .cluster()
        .short(&["no"])
        .status(),
    builtin(
        "",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
    )
    .short(&["pvc"])
    .status(),
    builtin(
        "",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
    )
    .cluster()
    .short(&["pv"])
    .status(),
    builtin("", "pods", "pod", "Pod")
        .short(&["po"])
        .all()
        .status(),
    builtin("", "podtemplates", "podtemplate", "PodTemplate"),
    builtin(
        "",
        "replicationcontrollers",
        "replicationcontroller",
        "ReplicationController",
    )
    .short(&["rc"])
    .all()
    .status()
    .scale(),
    builtin("", "resourcequotas", "resourcequota", "ResourceQuota")
        .short(&["quota"])
        .status(),
    builtin("", "secrets", "secret", "Secret"),
    builtin("", "serviceaccounts", "serviceaccount", "ServiceAccount").short(&["sa"]),
    builtin("", "services", "service", "Service")
        .short(&["svc"])
        .all()
        .status(),
    builtin(
        "apiregistration.k8s.io",
        "apiservices",
        "apiservice",
        "APIService",
    )
    .cluster()
    .api_extensions()
    .status(),
    builtin(
        "apps",
        "controllerrevisions",
        "controllerrevision",
        "ControllerRevision",
    ),
    builtin("apps", "daemonsets", "daemonset", "DaemonSet")
        .short(&["ds"])
        .all()
        .status(),
    builtin("apps", "deployments", "deployment", "Deployment")
        .short(&["deploy"])
        .all()
        .status()
        .scale(),
    builtin("apps", "replicasets", "replicaset", "ReplicaSet")
        .short(&["rs"])
        .all()
        .status()
        .scale(),
    builtin("apps", "statefulsets", "statefulset", "StatefulSet")
        .short(&["sts"])
        .all()
        .status()
        .scale(),
    builtin("events.k8s.io", "events", "event", "Event").short(&["ev"]),
    // kube serves autoscaling/v1 too (the same objects); the simulator serves v2 only.
    builtin(
        "autoscaling",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
    )
    .version("v2")
    .short(&["hpa"])
    .all()
    .status(),
    builtin("batch", "cronjobs", "cronjob", "CronJob")
        .short(&["cj"])
        .all()
        .status(),
    builtin("batch", "jobs", "job", "Job").all().status(),
    builtin(
        "certificates.k8s.io",
        "certificatesigningrequests",
        "certificatesigningrequest",
        "CertificateSigningRequest",
    )
    .cluster()
    .short(&["csr"])
    .approval()
    .status(),
    builtin(
        NETWORKING_GROUP,
        "ingressclasses",
        "ingressclass",
        "IngressClass",
    )
    .cluster(),
    builtin(NETWORKING_GROUP, "ingresses", "ingress", "Ingress")
        .short(&["ing"])
        .status(),
    builtin(NETWORKING_GROUP, "ipaddresses", "ipaddress", "IPAddress")
        .cluster()
        .short(&["ip"]),
    builtin(
        NETWORKING_GROUP,
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
    )
    .short(&["netpol"]),
    builtin(
        NETWORKING_GROUP,
        "servicecidrs",
        "servicecidr",
        "ServiceCIDR",
    )
    .cluster()
    .status(),
    builtin(
        "policy",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
    )
    .short(&["pdb"])
    .status(),
    builtin(
        RBAC_GROUP,
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
    )
    .cluster(),
    builtin(RBAC_GROUP, "clusterroles", "clusterrole", "ClusterRole").cluster(),
    builtin(RBAC_GROUP, "rolebindings", "rolebinding", "RoleBinding"),
    builtin(RBAC_GROUP, "roles", "role", "Role"),
    builtin(STORAGE_GROUP, "csidrivers", "csidriver", "CSIDriver").cluster(),
    builtin(STORAGE_GROUP, "csinodes", "csinode", "CSINode").cluster(),
    builtin(
        STORAGE_GROUP,
        "csistoragecapacities",
        "csistoragecapacity",
        "CSIStorageCapacity",
    ),
    builtin(
        STORAGE_GROUP,
        "storageclasses",
        "storageclass",
        "StorageClass",
    )
    .cluster()
    .short(&["sc"]),
    builtin(
        STORAGE_GROUP,
        "volumeattachments",
        "volumeattachment",
        "VolumeAttachment",
    )
    .cluster()
    .status(),
    builtin(
        STORAGE_GROUP,
        "volumeattributesclasses",
        "volumeattributesclass",
        "VolumeAttributesClass",
    )
    .cluster()
    .short(&["vac"]),
    builtin(
        ADMISSION_GROUP,
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicy",
        "MutatingAdmissionPolicy",
    )
    .cluster()
    .api_extensions(),
    builtin(
        ADMISSION_GROUP,
        "mutatingadmissionpolicybindings",
        "mutatingadmissionpolicybinding",
        "MutatingAdmissionPolicyBinding",
    )
    .cluster()
    .api_extensions(),
    builtin(
        ADMISSION_GROUP,
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        "MutatingWebhookConfiguration",
    )
    .cluster()
    .api_extensions(),
    builtin(
        ADMISSION_GROUP,
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
        "ValidatingAdmissionPolicy",
    )
    .cluster()
    .api_extensions()
    .status(),
    builtin(
        ADMISSION_GROUP,
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
        "ValidatingAdmissionPolicyBinding",
    )
    .cluster()
    .api_extensions(),
    builtin(
        ADMISSION_GROUP,
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        "ValidatingWebhookConfiguration",
    )
    .cluster()
    .api_extensions(),
    builtin(
        super::CRD_GROUP,
        super::CRD_RESOURCE,
        "customresourcedefinition",
        "CustomResourceDefinition",
    )
    .cluster()
    .short(&["crd", "crds"])
    .api_extensions()
    .status(),
    builtin(
        "scheduling.k8s.io",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
    )
    .cluster()
    .short(&["pc"]),
    builtin("coordination.k8s.io", "leases", "lease", "Lease"),
    builtin(
        "node.k8s.io",
        "runtimeclasses",
        "runtimeclass",
        "RuntimeClass",
    )
    .cluster(),
    builtin(
        "discovery.k8s.io",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
    ),
    builtin(
        RESOURCE_GROUP,
        "deviceclasses",
        "deviceclass",
        "DeviceClass",
    )
    .cluster(),
    builtin(
        RESOURCE_GROUP,
        "resourceclaims",
        "resourceclaim",
        "ResourceClaim",
    )
    .status(),
    builtin(
        RESOURCE_GROUP,
        "resourceclaimtemplates",
        "resourceclaimtemplate",
        "ResourceClaimTemplate",
    ),
    builtin(
        RESOURCE_GROUP,
        "resourceslices",
        "resourceslice",
        "ResourceSlice",
    )
    .cluster(),
    builtin(FLOWCONTROL_GROUP, "flowschemas", "flowschema", "FlowSchema")
        .cluster()
        .status(),
    builtin(
        FLOWCONTROL_GROUP,
        "prioritylevelconfigurations",
        "prioritylevelconfiguration",
        "PriorityLevelConfiguration",
    )
    .cluster()
    .status(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_is_contiguous_and_sorted_by_resource() {
        let mut seen: Vec<&str> = Vec::new();
        for (i, b) in BUILTINS.iter().enumerate() {
            if seen.last() != Some(&b.group) {
                assert!(!seen.contains(&b.group), "{} split", b.group);
                seen.push(b.group);
            } else {
                assert!(
                    BUILTINS[i - 1].resource < b.resource,
                    "{} unsorted",
                    b.resource
                );
            }
        }
        assert_eq!(BUILTINS.len(), 59);
    }
}
