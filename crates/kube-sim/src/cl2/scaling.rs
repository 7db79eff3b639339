//! Churn over the CL2 shape: the pod writes of the load test's scaling phase and of kubelets.
//! A Deployment is scaled to a size drawn in [½, 1½] of its size class's replicas (the test's
//! `RandomizedScalingTimeLimited` phase: over time about a quarter of the pods are created or
//! deleted): its `spec.replicas` and its ReplicaSet's are written, then, one pod write per step,
//! new pods go through what the replica-set controller, the scheduler and the kubelet write
//! (created `Pending` without a node, bound, then `Running` and ready) and surplus pods are
//! deleted (gracefully, as the replica-set controller does; the simulated kubelet finishes it).
//! Between those, kubelet status updates of running pods ([`fleet::touch_status`]: restarts,
//! readiness flips, probe times). ReplicaSet and Deployment status and EndpointSlices follow
//! through [`super::controllers`], not from here.
//!
//! Each step is one pod write through [`Ops`](crate::ops::Ops), stamped with its wall-clock time
//! ([`fleet::WRITE_TIME_ANNOTATION`]); the [`crate::churn`] task paces the steps. The Deployment
//! and ReplicaSet `spec.replicas` writes of a scaling come on top of the pod writes.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::objects::max_replicas;
use super::{Cl2Spec, DeploymentShape, NAME_LABEL};
use crate::SimState;
use crate::churn::{ChurnMix, ChurnSpec};
use crate::fleet;
use crate::semantics::DeleteOptions;
use crate::store::StoredObject;
use crate::util::{now_unix, now_unix_nanos};

/// One pod write to come.
#[derive(Debug)]
enum Step {
    /// The replica-set controller creates the pod (`Pending`, no node).
    Create { ns: String, pod: Box<Value> },
    /// The scheduler binds it.
    Bind { ns: String, pod: Box<Value> },
    /// The kubelet runs it: `Running`, ready.
    Run { ns: String, pod: Box<Value> },
    /// The replica-set controller deletes it.
    Delete { ns: String, name: String },
}

impl Step {
    fn pod_name(&self) -> &str {
        match self {
            Step::Create { pod, .. } | Step::Bind { pod, .. } | Step::Run { pod, .. } => {
                pod["metadata"]["name"].as_str().unwrap_or_default()
            }
            Step::Delete { name, .. } => name,
        }
    }
}

/// A pod as the scaler sees it.
struct Live {
    name: String,
    bound: bool,
    running: bool,
    rv: u64,
}

/// The churn writer of the CL2 shape.
pub struct Scaler {
    mix: ChurnMix,
    rng: StdRng,
    deployments: Vec<DeploymentShape>,
    queue: VecDeque<Step>,
    nodes: Vec<String>,
    /// Where the scheduler places the next new pod (in turn over the nodes).
    next_node: usize,
    /// Pods placed on each node so far (for distinct pod IPs).
    placed: Vec<u32>,
}

/// Whether a stored object is being deleted (its metadata has a `deletionTimestamp`).
fn terminating(obj: &StoredObject) -> bool {
    const KEY: &[u8] = b"\"deletionTimestamp\":";
    obj.body.windows(KEY.len()).any(|w| w == KEY)
}

impl Scaler {
    /// A scaler of `spec`'s Deployments with `churn`'s mix; its random choices come from
    /// `churn.seed` and the store's revision (so a restarted churn makes other choices).
    pub fn new(state: &SimState, spec: &Cl2Spec, churn: &ChurnSpec) -> Scaler {
        let nodes = spec.node_names();
        Scaler {
            mix: churn.mix,
            rng: StdRng::seed_from_u64(churn.seed ^ state.store.revision().rotate_left(17)),
            deployments: (0..spec.namespace_count())
                .flat_map(|ns| spec.deployments(ns))
                .collect(),
            queue: VecDeque::new(),
            next_node: spec.pod_count() % nodes.len(),
            placed: (0..nodes.len())
                .map(|n| spec.pods_on_node(n) as u32)
                .collect(),
            nodes,
        }
    }

    /// Makes one pod write (none if the pick found nothing to write).
    pub fn step(&mut self, state: &SimState) {
        if self.mix == ChurnMix::Realistic && self.rng.random_bool(0.75) {
            if self.queue.is_empty() {
                self.plan(state);
            }
            if let Some(step) = self.queue.pop_front() {
                self.run(state, step);
                return;
            }
        }
        self.touch(state);
    }

    fn pick(&mut self) -> DeploymentShape {
        let i = self.rng.random_range(0..self.deployments.len());
        self.deployments[i].clone()
    }

    /// The Deployment's pods that are not being deleted.
    fn live(state: &SimState, d: &DeploymentShape) -> Vec<Live> {
        let pods = state.registry.core("pods");
        let selected = |o: &StoredObject| {
            o.labels
                .iter()
                .any(|(k, v)| k == NAME_LABEL && *v == d.name)
                && !terminating(o)
        };
        let Ok(page) = state
            .store
            .list(&pods, Some(&d.namespace), None, None, 0, &selected, false)
        else {
            return Vec::new();
        };
        page.items
            .iter()
            .map(|o| Live {
                name: o.name.clone(),
                bound: o.field("spec.nodeName").is_some_and(|n| !n.is_empty()),
                running: o.field("status.phase") == Some("Running"),
                rv: o.rv,
            })
            .collect()
    }

    /// Scales a Deployment: writes the new size and queues its pods' writes.
    fn plan(&mut self, state: &SimState) {
        let d = self.pick();
        let base = d.class.replicas();
        let target = self.rng.random_range(base / 2..=base * 3 / 2).max(1);
        let mut live = Self::live(state, &d);
        if target == live.len() {
            return;
        }
        let reg = &state.registry;
        let (Some(deploy_rt), Some(rs_rt)) = (
            reg.get("apps", "v1", "deployments"),
            reg.get("apps", "v1", "replicasets"),
        ) else {
            return;
        };
        let ns = d.namespace.clone();
        let rs_name = d.replica_set();
        let scaled = state.ops.modify(&deploy_rt, Some(&ns), &d.name, |v| {
            v["spec"]["replicas"] = json!(target);
        });
        let rs = state.ops.modify(&rs_rt, Some(&ns), &rs_name, |v| {
            v["spec"]["replicas"] = json!(target);
            let ann = &mut v["metadata"]["annotations"];
            ann["deployment.kubernetes.io/desired-replicas"] = json!(target.to_string());
            ann["deployment.kubernetes.io/max-replicas"] = json!(max_replicas(target).to_string());
        });
        let (Ok(_), Ok(rs)) = (scaled, rs) else {
            return;
        };
        if target > live.len() {
            let rs = rs.to_value(&rs_rt);
            let pods: Vec<Value> = (live.len()..target)
                .map(|_| self.new_pod(&rs, &ns))
                .collect();
            for p in &pods {
                self.queue.push_back(Step::Create {
                    ns: ns.clone(),
                    pod: Box::new(p.clone()),
                });
            }
            for p in &pods {
                self.queue.push_back(Step::Bind {
                    ns: ns.clone(),
                    pod: Box::new(p.clone()),
                });
            }
            for p in pods {
                self.queue.push_back(Step::Run {
                    ns: ns.clone(),
                    pod: Box::new(p),
                });
            }
        } else {
            // The replica-set controller deletes unscheduled pods first, then pending ones,
            // then the most recently written.
            live.sort_by_key(|p| (p.bound, p.running, std::cmp::Reverse(p.rv)));
            for p in live.iter().take(live.len() - target) {
                self.queue.push_back(Step::Delete {
                    ns: ns.clone(),
                    name: p.name.clone(),
                });
            }
        }
    }

    /// A new pod of ReplicaSet `rs` as it will be once running, on the next node in turn.
    fn new_pod(&mut self, rs: &Value, ns: &str) -> Value {
        let rs_name = rs["metadata"]["name"].as_str().unwrap_or_default();
        let name = format!("{rs_name}-{}", fleet::alphabet_string(self.rng.random(), 5));
        let owner = json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": rs_name,
            "uid": rs["metadata"]["uid"],
            "controller": true,
            "blockOwnerDeletion": true
        });
        let node = self.next_node % self.nodes.len();
        self.next_node = (self.next_node + 1) % self.nodes.len();
        let ip_host = 2 + self.placed[node] % 253;
        self.placed[node] += 1;
        let origin = fleet::PodOrigin {
            name: &name,
            generate_name: &format!("{rs_name}-"),
            namespace: ns,
            owner: &owner,
        };
        fleet::pod_from_template(
            &rs["spec"]["template"],
            &origin,
            &self.nodes[node],
            ip_host,
            now_unix() - 45,
            &mut self.rng,
        )
    }

    fn run(&mut self, state: &SimState, step: Step) {
        let pods = state.registry.core("pods").clone();
        let stamp = |v: &mut Value| fleet::stamp_write_time(v, now_unix_nanos());
        let name = step.pod_name().to_string();
        let result = match &step {
            Step::Create { ns, pod } => {
                let mut p = (**pod).clone();
                if let Some(spec) = p["spec"].as_object_mut() {
                    spec.shift_remove("nodeName");
                }
                p["status"] = json!({"phase": "Pending", "qosClass": pod["status"]["qosClass"]});
                if let Some(mf) = p["metadata"]["managedFields"].as_array_mut() {
                    mf.truncate(1);
                }
                stamp(&mut p);
                state.ops.create(&pods, Some(ns), p, true).map(|_| ())
            }
            Step::Bind { ns, pod } => {
                let scheduled = pod["status"]["conditions"]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
                    .cloned()
                    .unwrap_or(Value::Null);
                state
                    .ops
                    .modify(&pods, Some(ns), &name, |v| {
                        v["spec"]["nodeName"] = pod["spec"]["nodeName"].clone();
                        v["status"]["conditions"] = json!([scheduled]);
                        stamp(v);
                    })
                    .map(|_| ())
            }
            Step::Run { ns, pod } => state
                .ops
                .modify(&pods, Some(ns), &name, |v| {
                    v["status"] = pod["status"].clone();
                    v["metadata"]["managedFields"] = pod["metadata"]["managedFields"].clone();
                    stamp(v);
                })
                .map(|_| ()),
            Step::Delete { ns, name } => state
                .ops
                .delete(&pods, Some(ns), name, &DeleteOptions::default())
                .map(|_| ()),
        };
        if result.is_err() {
            // Its pod is not there (taken, or deleted by someone else): nothing more for it.
            self.queue.retain(|s| s.pod_name() != name);
        }
    }

    /// A kubelet status update of a running pod of a random Deployment.
    fn touch(&mut self, state: &SimState) {
        let d = self.pick();
        let running: Vec<Live> = Self::live(state, &d)
            .into_iter()
            .filter(|p| p.bound && p.running)
            .collect();
        if running.is_empty() {
            return;
        }
        let name = running[self.rng.random_range(0..running.len())]
            .name
            .clone();
        let seed: u64 = self.rng.random();
        let pods = state.registry.core("pods").clone();
        let _ = state.ops.modify(&pods, Some(&d.namespace), &name, |v| {
            fleet::touch_status(v, &mut StdRng::seed_from_u64(seed));
            fleet::stamp_write_time(v, now_unix_nanos());
        });
    }
}
