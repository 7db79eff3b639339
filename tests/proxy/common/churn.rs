//! A pod writer for tests under churn: status updates, relabels (selector moves), node
//! reassignments, creates and immediate deletes, through the simulator's write verbs, one at a
//! time ([`PodWriter`]) or at a rate until stopped ([`Churn`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube_sim::fleet::{self, FleetSpec};
use kube_sim::semantics::DeleteOptions;
use kube_sim::{SimState, Simulator};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A pod writer running at a fixed rate until stopped: status updates, relabels (selector
/// moves), node reassignments, creates and immediate deletes, through the simulator's write
/// verbs (so the test can stop it and compare at a quiet moment).
pub struct Churn {
    stop: CancellationToken,
    writes: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Churn {
    pub fn start(sim: &Simulator, per_second: f64, seed: u64, fleet: &FleetSpec) -> Churn {
        let state: Arc<SimState> = sim.state().clone();
        let stop = CancellationToken::new();
        let writes = Arc::new(AtomicU64::new(0));
        let (s, w) = (stop.clone(), writes.clone());
        let writer = PodWriter::new(state, seed, fleet);
        let task = tokio::spawn(async move { churn(writer, per_second, s, w).await });
        Churn { stop, writes, task }
    }

    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Waits until `n` more writes happened (with a deadline). The writer counts its ticks, so
    /// it slows down with the machine (the clients and the other tests share two cores: a fresh
    /// CI run with 200 clients once made fewer than 75 writes in 30 s), which keeps the load the clients can
    /// follow; the deadline only catches a writer that stopped.
    pub async fn wait_writes(&self, n: u64) {
        let target = self.writes() + n;
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.writes() < target {
            assert!(Instant::now() < deadline, "churn made no progress");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the writer; returns how many writes it made. Panics if a write failed.
    pub async fn stop(self) -> u64 {
        self.stop.cancel();
        self.task.await.expect("churn task");
        self.writes.load(Ordering::SeqCst)
    }
}

/// Makes pod writes one at a time: status updates, relabels (selector moves), node
/// reassignments, creates and immediate deletes.
pub struct PodWriter {
    state: Arc<SimState>,
    rng: StdRng,
    seed: u64,
    nodes: Vec<String>,
    namespaces: Vec<String>,
    live: Vec<(String, String)>,
    created: usize,
}

impl PodWriter {
    /// A writer of the pods of `fleet`'s nodes and namespaces (those the simulator holds now
    /// are its to change).
    pub fn new(state: Arc<SimState>, seed: u64, fleet: &FleetSpec) -> PodWriter {
        let pods = state.registry.core("pods").clone();
        let live = state
            .store
            .list(&pods, None, None, None, 0, &|_| true, false)
            .expect("list")
            .items
            .iter()
            .map(|o| (o.namespace.clone(), o.name.clone()))
            .collect();
        PodWriter {
            state,
            rng: StdRng::seed_from_u64(seed),
            seed,
            nodes: (0..fleet.nodes).map(fleet::node_name).collect(),
            namespaces: fleet::namespace_names(fleet),
            live,
            created: 0,
        }
    }

    /// One write; panics if the simulator refuses it (nobody else writes pods).
    pub fn write_one(&mut self) {
        let pods = self.state.registry.core("pods").clone();
        let ops = &self.state.ops;
        let rng = &mut self.rng;
        let roll = rng.random_range(0..100);
        if self.live.len() < 10 || (75..88).contains(&roll) {
            let ns = self.namespaces[rng.random_range(0..self.namespaces.len())].clone();
            let node = self.nodes[rng.random_range(0..self.nodes.len())].clone();
            self.created += 1;
            let mut p = fleet::pod(2_000_000 + self.created, &ns, &node, rng);
            let name = format!("kchurn-{}-{}", self.seed, self.created);
            p["metadata"]["name"] = Value::String(name.clone());
            ops.create(&pods, Some(&ns), p, true).expect("churn create");
            self.live.push((ns, name));
        } else if roll >= 88 {
            let (ns, name) = self.live.swap_remove(rng.random_range(0..self.live.len()));
            let now = DeleteOptions {
                grace_period_seconds: Some(0),
                ..Default::default()
            };
            ops.delete(&pods, Some(&ns), &name, &now)
                .expect("churn delete");
        } else {
            let (ns, name) = self.live[rng.random_range(0..self.live.len())].clone();
            let node = self.nodes[rng.random_range(0..self.nodes.len())].clone();
            let s: u64 = rng.random();
            ops.modify(&pods, Some(&ns), &name, |v| {
                let mut r = StdRng::seed_from_u64(s);
                match roll {
                    0..55 => fleet::touch_status(v, &mut r),
                    55..65 => fleet::relabel(v, &mut r),
                    _ => fleet::reassign(v, &node),
                }
            })
            .expect("churn modify");
        }
    }
}

async fn churn(mut w: PodWriter, per_second: f64, stop: CancellationToken, writes: Arc<AtomicU64>) {
    let tick = Duration::from_millis(20);
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut budget = 0.0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = interval.tick() => {}
        }
        budget += per_second * tick.as_secs_f64();
        while budget >= 1.0 {
            budget -= 1.0;
            w.write_one();
            writes.fetch_add(1, Ordering::SeqCst);
        }
    }
}
