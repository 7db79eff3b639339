//! The read probe: while a phase runs, one client on its own HTTP/2 connection reads what
//! Kubernetes' API call latency SLO covers (non-streaming GETs and LISTs), so each phase has a
//! GET and a LIST p99 to set against the SLO's 1 s (single object) and 30 s (cluster-scope
//! list): in turn, a random node's Node by GET without and with `resourceVersion=0`, and its
//! pods by LIST (`fieldSelector=spec.nodeName=<node>`) without and with `resourceVersion=0`,
//! one request every 250 ms, in protobuf. Latency is from the request to the last body byte.
//!
//! Measures only; the fleet's own traffic is the nodes' ([`super::node`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::super::client::Endpoint;
use super::conn;
use super::counters::Fleet;

/// One request every this long.
const EVERY: Duration = Duration::from_millis(250);

/// What the probe asks for.
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Starts the probe against `ep` over `nodes` nodes until `stop`, its requests carrying `token`
/// as their bearer token when given.
pub fn start(
    tasks: &TaskTracker,
    ep: Endpoint,
    token: Option<&str>,
    nodes: usize,
    fleet: Arc<Fleet>,
    stop: CancellationToken,
) {
    let mut c = conn::connect(tasks, ep, token, fleet.clone(), stop.clone());
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for i in 0u64.. {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let Some(mut sender) = c.sender(&stop).await else {
                return;
            };
            let node = kube_sim::fleet::node_name(rand::random_range(0..nodes.max(1)));
            let (list, path) = match i % 4 {
                0 => (false, format!("/api/v1/nodes/{node}")),
                1 => (false, format!("/api/v1/nodes/{node}?resourceVersion=0")),
                2 => (
                    true,
                    format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"),
                ),
                _ => (
                    true,
                    format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}&resourceVersion=0"),
                ),
            };
            let t0 = Instant::now();
            let uri = format!("{}{path}", c.base);
            let sent = conn::exchange(
                &c,
                &mut sender,
                http::Method::GET,
                &uri,
                ACCEPT,
                Bytes::new(),
            );
            let answer = tokio::select! {
                _ = stop.cancelled() => return,
                a = sent => a,
            };
            match answer {
                Ok(a) if a.status == 200 => {
                    let us = t0.elapsed().as_micros() as u64;
                    if list {
                        fleet.list_latency.record(us);
                    } else {
                        fleet.get_latency.record(us);
                    }
                }
                Ok(a) if a.status == 429 => Fleet::add(&fleet.counts.probe_429),
                Ok(a) => {
                    Fleet::add(&fleet.counts.probe_errors);
                    fleet.error(|| format!("probe {path} answered {}", a.status));
                }
                Err(_) => Fleet::add(&fleet.counts.probe_errors),
            }
        }
    });
}
