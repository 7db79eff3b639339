//! The JSON of the CL2 shape's objects, as kube's controllers and kubelets write them: a
//! Deployment with its ReplicaSet, pods, ConfigMap, Secret and Service ([`Workload`]), the
//! status the deployment and replica-set controllers write, EndpointSlices as the endpointslice
//! controller writes them, node Leases, and the objects every namespace or cluster has.
//!
//! Builds JSON values only: never writes to the store, never reads the clock (times are
//! arguments), and draws randomness from RNGs seeded by the spec.

use base64::Engine;
use rand::Rng;
use serde_json::{Map, Value, json};

use super::{
    Cl2Spec, DeploymentShape, NAME_LABEL, NODE_LEASE_NAMESPACE, ROOT_CA_CONFIGMAP, SERVICE_LABEL,
    SERVICE_PORT,
};
use crate::fleet::{self, TemplateVolume, ts};

/// The label the deployment controller adds to a ReplicaSet and its pods.
pub(crate) const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The label of the load test's objects.
const GROUP_LABEL: (&str, &str) = ("group", "load");

/// Sets `metadata.uid` and `metadata.creationTimestamp` (seconds since the UNIX epoch).
pub(crate) fn stamp(obj: &mut Value, uid: String, created: i64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(ts(created)));
    }
}

/// A `metav1.MicroTime` (RFC 3339 with microseconds).
fn micro_time(unix: i64, micros: u32) -> String {
    format!("{}.{micros:06}Z", ts(unix).trim_end_matches('Z'))
}

/// A controller's owner reference.
fn controller_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true
    })
}

/// A namespace of the shape.
pub(crate) fn namespace(spec: &Cl2Spec, name: &str, created: i64) -> Value {
    let mut ns = fleet::namespace(name);
    stamp(&mut ns, spec.uid("Namespace", "", name), created);
    ns
}

/// The Lease a node's kubelet keeps in `kube-node-lease`, owned by its Node, renewed shortly
/// before `now`.
pub(crate) fn node_lease(spec: &Cl2Spec, node: &Value, now: i64) -> Value {
    let name = node["metadata"]["name"].as_str().unwrap_or_default();
    let node_uid = node["metadata"]["uid"].as_str().unwrap_or_default();
    let mut rng = spec.rng(&["lease", name]);
    let renew = micro_time(
        now - rng.random_range(0..10),
        rng.random_range(0..1_000_000),
    );
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": NODE_LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": renew}
    });
    let created = node["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(crate::util::parse_rfc3339)
        .unwrap_or(now);
    stamp(
        &mut lease,
        spec.uid("Lease", NODE_LEASE_NAMESPACE, name),
        created + 30,
    );
    lease
}

/// The RuntimeClass kubelets list ([`super::RUNTIME_CLASS`]).
pub(crate) fn runtime_class(spec: &Cl2Spec, created: i64) -> Value {
    let mut rc = json!({
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": super::RUNTIME_CLASS},
        "handler": "runc"
    });
    stamp(
        &mut rc,
        spec.uid("RuntimeClass", "", super::RUNTIME_CLASS),
        created,
    );
    rc
}

/// The CSIDriver kubelets' CSI plugin lists ([`super::CSI_DRIVER`]).
pub(crate) fn csi_driver(spec: &Cl2Spec, created: i64) -> Value {
    let mut d = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": super::CSI_DRIVER},
        "spec": {"attachRequired": true, "podInfoOnMount": false, "fsGroupPolicy": "File"}
    });
    stamp(
        &mut d,
        spec.uid("CSIDriver", "", super::CSI_DRIVER),
        created,
    );
    d
}

/// The cluster's CA bundle (a PEM block of the seed's bytes).
fn ca_bundle(spec: &Cl2Spec) -> String {
    let mut rng = spec.rng(&["root-ca"]);
    let der: Vec<u8> = (0..780).map(|_| rng.random()).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// The `kube-root-ca.crt` ConfigMap kube's root-CA publisher keeps in every namespace.
pub(crate) fn root_ca(spec: &Cl2Spec, ns: &str, created: i64) -> Value {
    let mut cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ROOT_CA_CONFIGMAP,
            "namespace": ns,
            "annotations": {
                "kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
            }
        },
        "data": {"ca.crt": ca_bundle(spec)}
    });
    stamp(
        &mut cm,
        spec.uid("ConfigMap", ns, ROOT_CA_CONFIGMAP),
        created,
    );
    cm
}

/// The `default` ServiceAccount kube's service-account controller makes in every namespace.
pub(crate) fn default_service_account(spec: &Cl2Spec, ns: &str, created: i64) -> Value {
    let mut sa = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": ns}
    });
    stamp(&mut sa, spec.uid("ServiceAccount", ns, "default"), created);
    sa
}

/// What a ReplicaSet's controller counts of its pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodCounts {
    /// Pods that are not being deleted (`status.replicas`).
    pub replicas: usize,
    /// Of those, the ready ones (`readyReplicas`; `availableReplicas` too: no
    /// `minReadySeconds`).
    pub ready: usize,
}

/// A ReplicaSet's status as the replica-set controller writes it (Go's `omitempty` members
/// left out when zero).
pub(crate) fn replica_set_status(counts: PodCounts, generation: i64) -> Value {
    let mut s = Map::new();
    s.insert("replicas".into(), json!(counts.replicas));
    for (k, v) in [
        ("fullyLabeledReplicas", counts.replicas),
        ("readyReplicas", counts.ready),
        ("availableReplicas", counts.ready),
    ] {
        if v > 0 {
            s.insert(k.into(), json!(v));
        }
    }
    s.insert("observedGeneration".into(), json!(generation));
    Value::Object(s)
}

/// A Deployment's status as the deployment controller writes it for its one ReplicaSet
/// `rs_name` with `desired` replicas: counts, `observedGeneration`, and the `Available` and
/// `Progressing` conditions (a condition whose status is unchanged in `previous` keeps its
/// `lastTransitionTime`; `Available` needs all but 25% of `desired`, rounded down, available).
pub(crate) fn deployment_status(
    desired: usize,
    counts: PodCounts,
    generation: i64,
    rs_name: &str,
    previous: Option<&Value>,
    now: i64,
) -> Value {
    let max_unavailable = desired / 4;
    let available = counts.ready + max_unavailable >= desired;
    let complete = counts.replicas == desired && counts.ready == desired;
    let condition = |ty: &str, ok: bool, reason: &str, message: String| {
        let status = if ok { "True" } else { "False" };
        let transition = previous
            .and_then(|p| p["conditions"].as_array())
            .and_then(|cs| cs.iter().find(|c| c["type"] == ty && c["status"] == status))
            .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_string))
            .unwrap_or_else(|| ts(now));
        json!({
            "type": ty,
            "status": status,
            "lastUpdateTime": ts(now),
            "lastTransitionTime": transition,
            "reason": reason,
            "message": message
        })
    };
    let (available_reason, available_message) = if available {
        (
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let progressing = if complete {
        condition(
            "Progressing",
            true,
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
        )
    } else {
        condition(
            "Progressing",
            true,
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{rs_name}\" is progressing."),
        )
    };
    let mut s = Map::new();
    s.insert("observedGeneration".into(), json!(generation));
    for (k, v) in [
        ("replicas", counts.replicas),
        ("updatedReplicas", counts.replicas),
        ("readyReplicas", counts.ready),
        ("availableReplicas", counts.ready),
        ("unavailableReplicas", desired.saturating_sub(counts.ready)),
    ] {
        if v > 0 {
            s.insert(k.into(), json!(v));
        }
    }
    s.insert(
        "conditions".into(),
        json!([
            condition(
                "Available",
                available,
                available_reason,
                available_message.to_string()
            ),
            progressing
        ]),
    );
    Value::Object(s)
}

/// The `deployment.kubernetes.io/max-replicas` annotation's value: `desired` plus the 25%
/// surge, rounded up.
pub(crate) fn max_replicas(desired: usize) -> usize {
    desired + desired.div_ceil(4)
}

/// One endpoint of an EndpointSlice, as the endpointslice controller makes it of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The pod's IP.
    pub ip: String,
    /// Ready and not terminating.
    pub ready: bool,
    /// Ready (whether terminating or not).
    pub serving: bool,
    /// Being deleted.
    pub terminating: bool,
    /// The pod's node.
    pub node: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's uid.
    pub uid: String,
}

/// An EndpointSlice of Service `service` (uid `service_uid`) in `ns` named `name`, as the
/// endpointslice controller writes it: IPv4, the Service's port, the managed-by and
/// service-name labels, owned by the Service; the zone of each endpoint is its node's.
pub(crate) fn endpoint_slice(
    ns: &str,
    service: &str,
    service_uid: &str,
    name: &str,
    endpoints: &[Endpoint],
    changed: i64,
) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|e| {
            json!({
                "addresses": [e.ip],
                "conditions": {"ready": e.ready, "serving": e.serving, "terminating": e.terminating},
                "targetRef": {"kind": "Pod", "namespace": ns, "name": e.pod, "uid": e.uid},
                "nodeName": e.node,
                "zone": fleet::node_zone(fleet::node_index(&e.node))
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "generateName": format!("{service}-"),
            "namespace": ns,
            "labels": {
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                "kubernetes.io/service-name": service
            },
            "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": ts(changed)},
            "ownerReferences": [controller_ref("v1", "Service", service, service_uid)]
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "", "protocol": "TCP", "port": SERVICE_PORT}]
    })
}

/// A Service of the shape, as [`endpoint_slice`] and the controllers need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name, also the [`SERVICE_LABEL`] value of the pods it selects.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

/// A Deployment of the shape with everything that is its own: pod template, uids, times.
pub(crate) struct Workload {
    /// What it is.
    pub shape: DeploymentShape,
    /// The pod template of its ReplicaSet (with the `pod-template-hash` label).
    template: Value,
    uid: String,
    rs_uid: String,
    created: i64,
}

impl Workload {
    /// The Deployment `shape` of `spec`, created at `created`. Its pod template is the same in
    /// every namespace (the test's templates are), mounting its own ConfigMap at
    /// `/var/configmap` and Secret at `/var/secret`.
    pub fn new(spec: &Cl2Spec, shape: DeploymentShape, created: i64) -> Workload {
        let mut rng = spec.rng(&["template", &shape.name]);
        let mut labels = Map::new();
        labels.insert(GROUP_LABEL.0.into(), json!(GROUP_LABEL.1));
        labels.insert(NAME_LABEL.into(), json!(shape.name));
        labels.insert(
            POD_TEMPLATE_HASH.into(),
            json!(super::pod_template_hash(&shape.name)),
        );
        labels.insert(SERVICE_LABEL.into(), json!(shape.service_label()));
        let volumes = [
            TemplateVolume {
                name: "configmap".into(),
                mount_path: "/var/configmap".into(),
                source: json!({"configMap": {"name": shape.name, "defaultMode": 420}}),
            },
            TemplateVolume {
                name: "secret".into(),
                mount_path: "/var/secret".into(),
                source: json!({"secret": {"secretName": shape.name, "defaultMode": 420}}),
            },
        ];
        let app = (fleet::fnv(&[&shape.name]) as usize) % fleet::APP_COUNT;
        let template = fleet::pod_template(
            app,
            fleet::fnv(&["version", &shape.name]),
            labels,
            &volumes,
            None,
            &mut rng,
        );
        Workload {
            uid: spec.uid("Deployment", &shape.namespace, &shape.name),
            rs_uid: spec.uid("ReplicaSet", &shape.namespace, &shape.replica_set()),
            template,
            created,
            shape,
        }
    }

    fn labels(&self) -> Value {
        json!({GROUP_LABEL.0: GROUP_LABEL.1, SERVICE_LABEL: self.shape.service_label()})
    }

    /// Its ConfigMap (named as the Deployment).
    pub fn config_map(&self, spec: &Cl2Spec) -> Value {
        let name = &self.shape.name;
        let ns = &self.shape.namespace;
        let mut cm = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {GROUP_LABEL.0: GROUP_LABEL.1}},
            "data": {
                "app.properties": format!("deployment={name}\nreplicas={}\nlog.level=info\n", self.shape.replicas)
            }
        });
        stamp(&mut cm, spec.uid("ConfigMap", ns, name), self.created - 5);
        cm
    }

    /// Its Secret (named as the Deployment).
    pub fn secret(&self, spec: &Cl2Spec) -> Value {
        let name = &self.shape.name;
        let ns = &self.shape.namespace;
        let mut rng = spec.rng(&["secret", ns, name]);
        let password = fleet::hex(&mut rng, 16);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let mut secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": ns, "labels": {GROUP_LABEL.0: GROUP_LABEL.1}},
            "type": "Opaque",
            "data": {"password": b64(&password), "username": b64(name)}
        });
        stamp(&mut secret, spec.uid("Secret", ns, name), self.created - 5);
        secret
    }

    /// The Deployment, with the status of `replicas` ready pods.
    pub fn deployment(&self) -> Value {
        let mut template = self.template.clone();
        if let Some(l) = template
            .pointer_mut("/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            l.shift_remove(POD_TEMPLATE_HASH);
        }
        let n = self.shape.replicas;
        let counts = PodCounts {
            replicas: n,
            ready: n,
        };
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": self.shape.name,
                "namespace": self.shape.namespace,
                "uid": self.uid,
                "creationTimestamp": ts(self.created),
                "labels": self.labels(),
                "annotations": {"deployment.kubernetes.io/revision": "1"}
            },
            "spec": {
                "replicas": n,
                "selector": {"matchLabels": {NAME_LABEL: self.shape.name}},
                "template": template,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600
            },
            "status": deployment_status(n, counts, 1, &self.shape.replica_set(), None, self.created + 90)
        })
    }

    fn replica_set_ref(&self) -> Value {
        controller_ref(
            "apps/v1",
            "ReplicaSet",
            &self.shape.replica_set(),
            &self.rs_uid,
        )
    }

    /// The ReplicaSet, with the status of `replicas` ready pods.
    pub fn replica_set(&self) -> Value {
        let n = self.shape.replicas;
        let hash = super::pod_template_hash(&self.shape.name);
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": self.shape.replica_set(),
                "namespace": self.shape.namespace,
                "uid": self.rs_uid,
                "creationTimestamp": ts(self.created),
                "labels": self.template["metadata"]["labels"],
                "annotations": {
                    "deployment.kubernetes.io/desired-replicas": n.to_string(),
                    "deployment.kubernetes.io/max-replicas": max_replicas(n).to_string(),
                    "deployment.kubernetes.io/revision": "1"
                },
                "ownerReferences": [controller_ref("apps/v1", "Deployment", &self.shape.name, &self.uid)]
            },
            "spec": {
                "replicas": n,
                "selector": {"matchLabels": {NAME_LABEL: self.shape.name, POD_TEMPLATE_HASH: hash}},
                "template": self.template
            },
            "status": replica_set_status(PodCounts { replicas: n, ready: n }, 1)
        })
    }

    /// Loaded pod number `ordinal` ([`super::pod_name`]), running on `node` with address
    /// `ip_host` of its pod CIDR, created in the two weeks before `now`.
    pub fn pod(&self, spec: &Cl2Spec, ordinal: usize, node: &str, ip_host: u32, now: i64) -> Value {
        let name = super::pod_name(&self.shape.name, ordinal);
        let ns = &self.shape.namespace;
        let mut rng = spec.rng(&["pod", ns, &name]);
        let created = now - rng.random_range(60..86_400 * 14);
        let owner = self.replica_set_ref();
        let origin = fleet::PodOrigin {
            name: &name,
            generate_name: &format!("{}-", self.shape.replica_set()),
            namespace: ns,
            owner: &owner,
        };
        let mut pod =
            fleet::pod_from_template(&self.template, &origin, node, ip_host, created, &mut rng);
        stamp(&mut pod, spec.uid("Pod", ns, &name), created);
        pod
    }

    /// Its Service (if it has one) at ClusterIP `cluster_ip`.
    pub fn service(&self, spec: &Cl2Spec, cluster_ip: &str, created: i64) -> Option<Value> {
        let r = self.service_ref(spec)?;
        let mut svc = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": r.name, "namespace": r.namespace},
            "spec": {
                "selector": {SERVICE_LABEL: r.name},
                "ports": [{"protocol": "TCP", "port": SERVICE_PORT, "targetPort": SERVICE_PORT}],
                "type": "ClusterIP",
                "clusterIP": cluster_ip
            }
        });
        stamp(&mut svc, r.uid, created);
        Some(svc)
    }

    /// Its Service's identity, if it has one.
    pub fn service_ref(&self, spec: &Cl2Spec) -> Option<ServiceRef> {
        let name = self.shape.service.clone()?;
        Some(ServiceRef {
            uid: spec.uid("Service", &self.shape.namespace, &name),
            namespace: self.shape.namespace.clone(),
            name,
        })
    }
}
