//! Continuous churn over the fleet's pods at a configured rate: the writes a busy cluster's
//! kubelets, schedulers and controllers make. Every write stamps its wall-clock time into the
//! object ([`fleet::WRITE_TIME_ANNOTATION`]) so watchers can measure delivery latency.
//!
//! Every write goes through [`Ops`](super::ops::Ops), as a client's would, so churn never
//! bypasses the write rules. Over the flat fleet it only picks among the pods present when it
//! started and those it created itself; over the CL2 shape the writes are
//! [`cl2::scaling`]'s (Deployments scaled through their pods, kubelet status updates).

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use super::SimState;
use super::cl2;
use super::fleet;
use super::semantics::DeleteOptions;
use super::util::now_unix_nanos;
use tokio_util::sync::CancellationToken;

/// Churn settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ChurnSpec {
    /// Writes per second (creates + updates + deletes).
    pub per_second: f64,
    /// Seed of the random choices.
    pub seed: u64,
    /// Which writes.
    pub mix: ChurnMix,
}

/// The kinds of write churn makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChurnMix {
    /// [`pick_op`]'s cluster-like mix of status updates, relabels, moves, creates and deletes.
    #[default]
    Realistic,
    /// Status updates only: every write is a MODIFIED event every pod watcher receives, which
    /// is what a broadcast benchmark wants.
    Status,
}

impl std::str::FromStr for ChurnMix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "realistic" => Ok(ChurnMix::Realistic),
            "status" => Ok(ChurnMix::Status),
            other => Err(format!(
                "unknown churn mix {other:?} (expected \"realistic\" or \"status\")"
            )),
        }
    }
}

/// One kind of churn write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChurnOp {
    /// Status change (restart count, conditions): the most common write in a cluster.
    Status,
    /// A label value changes (selector move-in/move-out).
    Relabel,
    /// The pod moves to another node (spec.nodeName index moves).
    Reassign,
    /// A new pod.
    Create,
    /// A pod is deleted (gracefully when bound, as kubectl/controllers do).
    Delete,
}

/// Picks an operation with a realistic mix: mostly status updates, creates balancing deletes.
pub fn pick_op(rng: &mut impl Rng) -> ChurnOp {
    match rng.random_range(0..100) {
        0..55 => ChurnOp::Status,
        55..65 => ChurnOp::Relabel,
        65..75 => ChurnOp::Reassign,
        75..88 => ChurnOp::Create,
        _ => ChurnOp::Delete,
    }
}

/// Starts the churn task; it stops with the simulator.
pub fn spawn(state: &Arc<SimState>, spec: ChurnSpec) {
    spawn_until(state, spec, state.cancel.clone());
}

/// Starts a churn task that stops with `stop` (or with the simulator, whichever comes first).
pub fn spawn_until(state: &Arc<SimState>, spec: ChurnSpec, stop: CancellationToken) {
    let st = state.clone();
    state.tasks.spawn(async move {
        tokio::select! {
            _ = run(st, spec) => {}
            _ = stop.cancelled() => {}
        }
    });
}

/// Replaces the churn started through the `/sim/churn` endpoint (if any) with `spec`; a rate of
/// zero only stops it.
pub fn restart(state: &Arc<SimState>, spec: ChurnSpec) {
    let mut slot = state.churn_control.lock();
    if let Some(old) = slot.take() {
        old.cancel();
    }
    if spec.per_second > 0.0 {
        let stop = state.cancel.child_token();
        spawn_until(state, spec, stop.clone());
        *slot = Some(stop);
    }
}

async fn run(state: Arc<SimState>, spec: ChurnSpec) {
    if spec.per_second <= 0.0 {
        return;
    }
    match state.config.cl2 {
        Some(shape) => {
            let mut scaler = cl2::scaling::Scaler::new(&state, &shape, &spec);
            at_rate(&state, spec.per_second, || scaler.step(&state)).await;
        }
        None => {
            let mut flat = Flat::new(&state, &spec);
            at_rate(&state, spec.per_second, || flat.step(&state)).await;
        }
    }
}

/// Calls `write` `per_second` times a second (in 10 ms ticks) until the simulator stops.
async fn at_rate(state: &SimState, per_second: f64, mut write: impl FnMut()) {
    let tick = Duration::from_millis(10);
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut budget = 0.0f64;
    loop {
        tokio::select! {
            _ = state.cancel.cancelled() => return,
            _ = interval.tick() => {}
        }
        budget += per_second * tick.as_secs_f64();
        while budget >= 1.0 {
            budget -= 1.0;
            write();
        }
    }
}

/// Churn over the flat fleet's pods ([`pick_op`]'s mix, or status updates only).
struct Flat {
    rng: StdRng,
    mix: ChurnMix,
    seed: u64,
    nodes: Vec<String>,
    namespaces: Vec<String>,
    /// The pods churn picks from: loaded once, then kept up to date with churn's own writes.
    live: Vec<(String, String)>,
    created: usize,
}

impl Flat {
    fn new(state: &SimState, spec: &ChurnSpec) -> Flat {
        let pods = state.registry.core("pods");
        let nodes: Vec<String> = {
            let nrt = state.registry.core("nodes");
            let page = state
                .store
                .list(&nrt, None, None, None, 0, &|_| true, false);
            page.map(|p| p.items.iter().map(|o| o.name.clone()).collect())
                .unwrap_or_default()
        };
        let namespaces: Vec<String> = state
            .config
            .fleet
            .as_ref()
            .map(fleet::namespace_names)
            .unwrap_or_else(|| vec!["default".to_string()]);
        let live: Vec<(String, String)> = state
            .store
            .list(&pods, None, None, None, 0, &|_| true, false)
            .map(|p| {
                p.items
                    .iter()
                    .map(|o| (o.namespace.clone(), o.name.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Flat {
            rng: StdRng::seed_from_u64(spec.seed),
            mix: spec.mix,
            seed: spec.seed,
            nodes,
            namespaces,
            live,
            created: 0,
        }
    }

    fn random_node(&mut self) -> String {
        if self.nodes.is_empty() {
            String::new()
        } else {
            self.nodes[self.rng.random_range(0..self.nodes.len())].clone()
        }
    }

    fn step(&mut self, state: &SimState) {
        let pods = state.registry.core("pods").clone();
        let idx = (!self.live.is_empty()).then(|| self.rng.random_range(0..self.live.len()));
        let target = idx.map(|i| self.live[i].clone());
        let op = match (self.mix, &target) {
            (_, None) => ChurnOp::Create,
            (ChurnMix::Status, _) => ChurnOp::Status,
            (ChurnMix::Realistic, _) => pick_op(&mut self.rng),
        };
        let stamp = |v: &mut Value| fleet::stamp_write_time(v, now_unix_nanos());
        let result = match (op, target) {
            (ChurnOp::Create, _) => {
                let ns = self.namespaces[self.rng.random_range(0..self.namespaces.len())].clone();
                let node = self.random_node();
                let mut p = fleet::pod(1_000_000 + self.created, &ns, &node, &mut self.rng);
                self.created += 1;
                let name = format!("churn-{}-{}", self.seed, self.created);
                p["metadata"]["name"] = Value::String(name.clone());
                stamp(&mut p);
                let r = state.ops.create(&pods, Some(&ns), p, true).map(|_| ());
                if r.is_ok() {
                    self.live.push((ns, name));
                }
                r
            }
            (ChurnOp::Delete, Some((ns, name))) => {
                if let Some(i) = idx {
                    self.live.swap_remove(i);
                }
                state
                    .ops
                    .delete(&pods, Some(&ns), &name, &DeleteOptions::default())
                    .map(|_| ())
            }
            (op, Some((ns, name))) => {
                let node = self.random_node();
                let seed: u64 = self.rng.random();
                state
                    .ops
                    .modify(&pods, Some(&ns), &name, |v| {
                        let mut r = StdRng::seed_from_u64(seed);
                        match op {
                            ChurnOp::Relabel => fleet::relabel(v, &mut r),
                            ChurnOp::Reassign => fleet::reassign(v, &node),
                            _ => fleet::touch_status(v, &mut r),
                        }
                        stamp(v);
                    })
                    .map(|_| ())
            }
            (_, None) => Ok(()),
        };
        // Someone else deleted it: forget it.
        if let (Err(e), Some(i)) = (result, idx)
            && e.code == 404
            && i < self.live.len()
            && op != ChurnOp::Create
            && op != ChurnOp::Delete
        {
            self.live.swap_remove(i);
        }
    }
}
