//! The CL2 shape: a cluster modelled on Kubernetes' own 5,000-node load test (clusterloader2's
//! `testing/load/config.yaml`), everything scaled from a node count. What a real cluster of that
//! test holds once its Deployments are up: namespaces of 100 nodes each with their Deployments,
//! ReplicaSets and Pods as the controllers write them, each Deployment's own ConfigMap and
//! Secret mounted by its pods, a ClusterIP Service per two Deployments with its EndpointSlices,
//! nodes with their Leases, the objects every namespace has (`kube-root-ca.crt`, the `default`
//! ServiceAccount), a RuntimeClass and a CSIDriver.
//!
//! This module owns the shape: [`Cl2Spec`] and the pure functions that say what it holds (names
//! and counts, for tests and the bench), and loading it at start-up ([`load`]) through
//! [`Ops::restore`](crate::ops::Ops::restore): the objects a create would store, each at its
//! own revision, without events. The JSON of each kind is built by `objects`; the simulated
//! controllers that keep ReplicaSet and Deployment status and the EndpointSlices in step with
//! the pods are in [`controllers`]; the churn that scales Deployments and updates pods is in
//! [`scaling`].
//!
//! The counts per namespace follow the 5,000-node run of the load test: 2 Deployments of 250
//! replicas, 23 of 30 and 298 of 5 (2,680 pods; that run's StatefulSets and Jobs, which make
//! its other 320 pods per namespace, are not modelled), Services `<size>-service-<i>` selecting
//! the pods of `<size>-deployment-<i>` for the first half (rounded up) of each size's
//! Deployments, as the test's templates do. A namespace with fewer than 100 nodes (the last one,
//! or the only one of a small cluster) has its counts scaled by its nodes / 100, rounded, with
//! at least one Deployment of each size, which keeps its size: a 5-node cluster has one
//! Deployment of 250 pods, one of 30 and 15 of 5.
//!
//! Pods are spread over all nodes in turn, in the order namespace, Deployment, replica (as the
//! scheduler spreads them; so each node runs pods of many namespaces, and a kubelet watches
//! many namespaces' `kube-root-ca.crt`): pod number `g` of the cluster runs on node `g mod N`.
//!
//! Everything is deterministic from the seed: uids, timestamps (before
//! [`FLEET_EPOCH_UNIX`](crate::fleet::FLEET_EPOCH_UNIX)), pod IPs and the pods' containers.
//! Names do not depend on the seed.

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;

use crate::SimState;
use crate::fleet;
use kube_wire::status::Status;

pub mod controllers;
mod objects;
pub mod scaling;

/// Nodes per namespace (the test's `NODES_PER_NAMESPACE`).
pub const NODES_PER_NAMESPACE: usize = 100;

/// The Service port (and the pods' target port), as the test's `service.yaml`.
pub const SERVICE_PORT: u16 = 80;

/// At most this many endpoints per EndpointSlice (kube's `--max-endpoints-per-slice` default).
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// The label the test's Deployments select their pods by (`name: <deployment>`).
pub const NAME_LABEL: &str = "name";

/// The label the test's Services select pods by (`svc: <size>-service-<i>`).
pub const SERVICE_LABEL: &str = "svc";

/// The node-lease namespace.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The RuntimeClass every cluster of this shape has.
pub const RUNTIME_CLASS: &str = "runc";

/// The CSIDriver every cluster of this shape has.
pub const CSI_DRIVER: &str = "ebs.csi.aws.com";

/// The ConfigMap kube publishes in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// A Deployment size of the load test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SizeClass {
    /// 250 replicas, 2 per full namespace.
    Big,
    /// 30 replicas, 23 per full namespace.
    Medium,
    /// 5 replicas, 298 per full namespace.
    Small,
}

impl SizeClass {
    /// The three sizes, in the order their objects are made.
    pub const ALL: [SizeClass; 3] = [SizeClass::Big, SizeClass::Medium, SizeClass::Small];

    /// `big`, `medium`, `small`: the prefix of the Deployments' and Services' names.
    pub fn name(self) -> &'static str {
        match self {
            SizeClass::Big => "big",
            SizeClass::Medium => "medium",
            SizeClass::Small => "small",
        }
    }

    /// Replicas of a Deployment of this size.
    pub fn replicas(self) -> usize {
        match self {
            SizeClass::Big => 250,
            SizeClass::Medium => 30,
            SizeClass::Small => 5,
        }
    }

    /// Deployments of this size in a namespace of [`NODES_PER_NAMESPACE`] nodes.
    pub fn per_full_namespace(self) -> usize {
        match self {
            SizeClass::Big => 2,
            SizeClass::Medium => 23,
            SizeClass::Small => 298,
        }
    }
}

/// The CL2 shape of a cluster: its node count and seed; everything else follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cl2Spec {
    /// Nodes (`node-00000` …); at least one is made.
    pub nodes: usize,
    /// Seed of every random choice (uids, timestamps, IPs, containers).
    pub seed: u64,
}

/// One Deployment of the shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentShape {
    /// Its namespace.
    pub namespace: String,
    /// Its size.
    pub class: SizeClass,
    /// Its number within its size and namespace (from 0).
    pub index: usize,
    /// `<size>-deployment-<index>`; also the name of its ConfigMap and Secret.
    pub name: String,
    /// Replicas at start ([`SizeClass::replicas`]).
    pub replicas: usize,
    /// The Service selecting its pods, if it has one.
    pub service: Option<String>,
}

impl DeploymentShape {
    /// The value of its pods' [`SERVICE_LABEL`] (`<size>-service-<index>`, whether or not that
    /// Service exists, as in the test).
    pub fn service_label(&self) -> String {
        service_name(self.class, self.index)
    }

    /// Its ReplicaSet: `<name>-<pod-template-hash>`.
    pub fn replica_set(&self) -> String {
        replica_set_name(&self.name)
    }
}

/// Name of namespace number `index` (from 0): `test-cl2-1`, `test-cl2-2`, … (the test numbers
/// its namespaces from 1).
pub fn namespace_name(index: usize) -> String {
    format!("test-cl2-{}", index + 1)
}

/// `<size>-deployment-<index>`.
pub fn deployment_name(class: SizeClass, index: usize) -> String {
    format!("{}-deployment-{index}", class.name())
}

/// `<size>-service-<index>`.
pub fn service_name(class: SizeClass, index: usize) -> String {
    format!("{}-service-{index}", class.name())
}

/// The `pod-template-hash` of a Deployment's pods (and its ReplicaSet's name suffix): a 32-bit
/// hash written in decimal and mapped through kube's safe alphabet, as the deployment
/// controller's `ComputeHash` and `rand.SafeEncodeString` make it (e.g. `5d4f8b7c9`).
pub fn pod_template_hash(deployment: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let h = fleet::fnv(&["pod-template", deployment]);
    let h32 = ((h >> 32) ^ h) as u32;
    h32.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// A Deployment's ReplicaSet: `<deployment>-<pod-template-hash>`.
pub fn replica_set_name(deployment: &str) -> String {
    format!("{deployment}-{}", pod_template_hash(deployment))
}

/// Name of replica number `ordinal` (from 0) of a Deployment's loaded pods:
/// `<replica set>-<5 characters>`.
pub fn pod_name(deployment: &str, ordinal: usize) -> String {
    format!(
        "{}-{}",
        replica_set_name(deployment),
        fleet::pod_suffix(ordinal)
    )
}

impl Cl2Spec {
    /// Nodes made (at least one).
    pub fn node_count(&self) -> usize {
        self.nodes.max(1)
    }

    /// Namespaces: one per [`NODES_PER_NAMESPACE`] nodes, rounded up.
    pub fn namespace_count(&self) -> usize {
        self.node_count().div_ceil(NODES_PER_NAMESPACE)
    }

    /// The namespaces' names ([`namespace_name`]).
    pub fn namespace_names(&self) -> Vec<String> {
        (0..self.namespace_count()).map(namespace_name).collect()
    }

    /// The nodes' names ([`fleet::node_name`]: `node-00000` …).
    pub fn node_names(&self) -> Vec<String> {
        (0..self.node_count()).map(fleet::node_name).collect()
    }

    /// Nodes namespace `ns` is scaled by: 100, fewer for the last one.
    pub fn namespace_nodes(&self, ns: usize) -> usize {
        self.node_count()
            .saturating_sub(ns * NODES_PER_NAMESPACE)
            .min(NODES_PER_NAMESPACE)
    }

    /// Deployments of `class` in namespace `ns`: the full count scaled by the namespace's
    /// nodes / 100, rounded, at least one.
    pub fn class_count(&self, ns: usize, class: SizeClass) -> usize {
        let scaled = (class.per_full_namespace() * self.namespace_nodes(ns)
            + NODES_PER_NAMESPACE / 2)
            / NODES_PER_NAMESPACE;
        scaled.max(1)
    }

    /// Services of `class` in namespace `ns`: half its Deployments, rounded up.
    pub fn class_services(&self, ns: usize, class: SizeClass) -> usize {
        self.class_count(ns, class).div_ceil(2)
    }

    /// The Deployments of namespace `ns`, big ones first, then medium, then small.
    pub fn deployments(&self, ns: usize) -> Vec<DeploymentShape> {
        let namespace = namespace_name(ns);
        let mut out = Vec::new();
        for class in SizeClass::ALL {
            let services = self.class_services(ns, class);
            for index in 0..self.class_count(ns, class) {
                out.push(DeploymentShape {
                    namespace: namespace.clone(),
                    class,
                    index,
                    name: deployment_name(class, index),
                    replicas: class.replicas(),
                    service: (index < services).then(|| service_name(class, index)),
                });
            }
        }
        out
    }

    /// The Services of namespace `ns`.
    pub fn services(&self, ns: usize) -> Vec<String> {
        SizeClass::ALL
            .into_iter()
            .flat_map(|class| {
                (0..self.class_services(ns, class)).map(move |i| service_name(class, i))
            })
            .collect()
    }

    /// Pods of namespace `ns` at start.
    pub fn namespace_pods(&self, ns: usize) -> usize {
        SizeClass::ALL
            .into_iter()
            .map(|c| self.class_count(ns, c) * c.replicas())
            .sum()
    }

    /// Pods at start.
    pub fn pod_count(&self) -> usize {
        (0..self.namespace_count())
            .map(|ns| self.namespace_pods(ns))
            .sum()
    }

    /// Deployments (and ReplicaSets, ConfigMaps and Secrets of theirs).
    pub fn deployment_count(&self) -> usize {
        (0..self.namespace_count())
            .flat_map(|ns| SizeClass::ALL.map(|c| self.class_count(ns, c)))
            .sum()
    }

    /// Services.
    pub fn service_count(&self) -> usize {
        (0..self.namespace_count())
            .flat_map(|ns| SizeClass::ALL.map(|c| self.class_services(ns, c)))
            .sum()
    }

    /// The node pod number `g` of the cluster runs on (pods numbered in the order namespace,
    /// Deployment, replica).
    pub fn pod_node(&self, g: usize) -> usize {
        g % self.node_count()
    }

    /// Pods node `node` runs at start: the pods spread in turn, so every node runs
    /// ⌊pods / nodes⌋ or one more.
    pub fn pods_on_node(&self, node: usize) -> usize {
        let (pods, nodes) = (self.pod_count(), self.node_count());
        pods / nodes + usize::from(node < pods % nodes)
    }

    /// Namespaces every cluster has, then the shape's.
    pub fn all_namespaces(&self) -> Vec<String> {
        crate::SYSTEM_NAMESPACES
            .iter()
            .map(|s| s.to_string())
            .chain(self.namespace_names())
            .collect()
    }

    /// An RNG for the object `parts` name, from the seed.
    fn rng(&self, parts: &[&str]) -> StdRng {
        let mut all = vec!["rng"];
        all.extend_from_slice(parts);
        StdRng::seed_from_u64(fleet::fnv(&all) ^ self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// The uid of an object, from the seed.
    fn uid(&self, kind: &str, namespace: &str, name: &str) -> String {
        let seed = self.seed.to_string();
        fleet::uuid_from(
            fleet::fnv(&[&seed, kind, namespace, name]),
            fleet::fnv(&[name, namespace, kind, &seed]),
        )
    }
}

/// Whether a pod's `Ready` condition is `True`.
pub(crate) fn pod_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Writes the shape's objects into the store at start-up ([`Ops::restore`]: no events; the
/// system namespaces exist already) and returns what its controllers start from.
pub(crate) fn load(state: &SimState, spec: &Cl2Spec) -> Result<controllers::Model, Status> {
    let reg = &state.registry;
    let restore = |group: &str, resource: &str, objects: Vec<Value>| {
        let rt = reg
            .get(group, "v1", resource)
            .ok_or_else(|| Status::internal(format!("{resource} is not served")))?;
        state.ops.restore(&rt, objects)
    };
    let epoch = fleet::FLEET_EPOCH_UNIX;

    restore(
        "",
        "namespaces",
        spec.namespace_names()
            .iter()
            .map(|ns| objects::namespace(spec, ns, epoch - 30 * 86_400))
            .collect(),
    )?;

    // Nodes, and the Lease each kubelet keeps in kube-node-lease.
    let node_names = spec.node_names();
    let nodes: Vec<Value> = crate::util::par_map((0..spec.node_count()).collect(), |i| {
        let name = fleet::node_name(i);
        let mut node = fleet::node(i, &mut spec.rng(&["node", &name]));
        objects::stamp(&mut node, spec.uid("Node", "", &name), epoch - 61 * 86_400);
        node
    });
    let leases = nodes
        .iter()
        .map(|n| objects::node_lease(spec, n, epoch))
        .collect();
    restore("", "nodes", nodes)?;
    restore("coordination.k8s.io", "leases", leases)?;
    restore(
        "node.k8s.io",
        "runtimeclasses",
        vec![objects::runtime_class(spec, epoch - 61 * 86_400)],
    )?;
    restore(
        "storage.k8s.io",
        "csidrivers",
        vec![objects::csi_driver(spec, epoch - 61 * 86_400)],
    )?;

    // What every namespace has.
    let all_ns = spec.all_namespaces();
    restore(
        "",
        "configmaps",
        all_ns
            .iter()
            .map(|ns| objects::root_ca(spec, ns, epoch - 30 * 86_400))
            .collect(),
    )?;
    restore(
        "",
        "serviceaccounts",
        all_ns
            .iter()
            .map(|ns| objects::default_service_account(spec, ns, epoch - 30 * 86_400))
            .collect(),
    )?;

    let mut model = controllers::Model::new(spec);
    let mut g = 0usize;
    for ns in 0..spec.namespace_count() {
        let namespace = namespace_name(ns);
        let workloads: Vec<objects::Workload> = crate::util::par_map(spec.deployments(ns), |d| {
            objects::Workload::new(spec, d, epoch - 20 * 86_400)
        });
        restore(
            "",
            "configmaps",
            workloads.iter().map(|w| w.config_map(spec)).collect(),
        )?;
        restore(
            "",
            "secrets",
            workloads.iter().map(|w| w.secret(spec)).collect(),
        )?;
        restore(
            "apps",
            "deployments",
            workloads
                .iter()
                .map(objects::Workload::deployment)
                .collect(),
        )?;
        restore(
            "apps",
            "replicasets",
            workloads
                .iter()
                .map(objects::Workload::replica_set)
                .collect(),
        )?;
        for w in &workloads {
            model.add_deployment(&namespace, &w.shape.name, w.shape.replicas);
        }
        let services: Vec<Value> = workloads
            .iter()
            .filter_map(|w| w.service_ref(spec).map(|r| (w, r)))
            .enumerate()
            .filter_map(|(i, (w, r))| {
                let svc = w.service(spec, &cluster_ip(ns, i), epoch - 20 * 86_400);
                model.add_service(r);
                svc
            })
            .collect();
        restore("", "services", services)?;

        // Pods: numbered across the cluster, spread over the nodes in turn.
        let mut jobs = Vec::with_capacity(spec.namespace_pods(ns));
        for (w, workload) in workloads.iter().enumerate() {
            for ordinal in 0..workload.shape.replicas {
                jobs.push((w, ordinal, g));
                g += 1;
            }
        }
        let pods: Vec<Value> = crate::util::par_map(jobs, |(w, ordinal, g)| {
            let node = spec.pod_node(g);
            // Distinct addresses on a node while it runs fewer than 254 pods.
            let ip_host = 2 + (g / spec.node_count()) as u32 % 253;
            workloads[w].pod(spec, ordinal, &node_names[node], ip_host, epoch)
        });
        for p in &pods {
            model.add_pod(p);
        }
        restore("", "pods", pods)?;
        restore(
            "discovery.k8s.io",
            "endpointslices",
            model.loaded_slices(&namespace, epoch - 20 * 86_400, epoch),
        )?;
    }
    model.loaded();
    Ok(model)
}

/// The ClusterIP of Service number `i` (from 0, below 245) of namespace `ns`: in
/// 10.96.0.0/12, the default service CIDR.
fn cluster_ip(ns: usize, i: usize) -> String {
    fleet::ipv4(0x0a60_0000u32 + (((ns as u32) + 1) << 8) + 10 + i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_namespaces_have_the_load_tests_counts() {
        let spec = Cl2Spec {
            nodes: 5_000,
            seed: 1,
        };
        assert_eq!(spec.namespace_count(), 50);
        assert_eq!(spec.deployment_count(), 50 * 323);
        assert_eq!(spec.service_count(), 50 * (1 + 12 + 149));
        assert_eq!(spec.namespace_pods(0), 2 * 250 + 23 * 30 + 298 * 5);
        assert_eq!(spec.pod_count(), 50 * 2_680);
        assert_eq!(spec.pods_on_node(0), 27);
        assert_eq!(spec.pods_on_node(4_999), 26);
        let total: usize = (0..5_000).map(|n| spec.pods_on_node(n)).sum();
        assert_eq!(total, spec.pod_count());
    }

    #[test]
    fn a_partial_namespace_is_scaled_with_one_of_each_size() {
        let spec = Cl2Spec {
            nodes: 250,
            seed: 1,
        };
        assert_eq!(spec.namespace_count(), 3);
        assert_eq!(spec.namespace_nodes(2), 50);
        assert_eq!(SizeClass::ALL.map(|c| spec.class_count(2, c)), [1, 12, 149]);
        let tiny = Cl2Spec { nodes: 5, seed: 1 };
        assert_eq!(SizeClass::ALL.map(|c| tiny.class_count(0, c)), [1, 1, 15]);
        assert_eq!(tiny.services(0).len(), 1 + 1 + 8);
        assert_eq!(tiny.pod_count(), 250 + 30 + 75);
        let d = tiny.deployments(0);
        assert_eq!(d[0].name, "big-deployment-0");
        assert_eq!(d[0].service.as_deref(), Some("big-service-0"));
        assert_eq!(d[2].name, "small-deployment-0");
        assert_eq!(d[10].service, None);
        assert_eq!(d[10].service_label(), "small-service-8");
    }

    #[test]
    fn names_look_like_the_controllers() {
        let hash = pod_template_hash("small-deployment-7");
        assert!((9..=10).contains(&hash.len()), "{hash}");
        assert!(hash.bytes().all(|b| b"456789bcdf".contains(&b)), "{hash}");
        assert_eq!(
            replica_set_name("small-deployment-7"),
            format!("small-deployment-7-{hash}")
        );
        assert!(
            pod_name("small-deployment-7", 3).starts_with(&replica_set_name("small-deployment-7"))
        );
        assert_ne!(pod_template_hash("a"), pod_template_hash("b"));
        assert_eq!(namespace_name(0), "test-cl2-1");
    }
}
