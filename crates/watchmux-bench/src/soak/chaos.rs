//! Carries out a soak's fault schedule on the simulator through its `/sim/` control endpoints
//! (kube-sim's `faults` switches, `/sim/compact`), one fault at a time, each lasting as its
//! plan says, and records what was injected.
//!
//! It touches the simulator only: never watchmux, never the store's data (faults change how the
//! simulator answers, not what it holds, except compaction, which drops history only).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::plan::{FaultKind, FaultPlan};
use crate::targets::sim_control;

/// What was injected.
#[derive(Debug, Clone, Default)]
pub struct Injected {
    /// Faults injected, by kind.
    pub by_kind: BTreeMap<FaultKind, u64>,
    /// Faults that could not be injected (a control request kept failing), with why.
    pub failed: Vec<String>,
}

/// POSTs a control request, retrying for a few seconds: one sent right after an outage may
/// still meet it.
async fn post(sim: SocketAddr, path: &str) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..40 {
        match sim_control(sim, path).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        sleep(Duration::from_millis(250)).await;
    }
    Err(format!("POST {path}: {last}"))
}

/// Injects one fault and waits for it to end (outage, slow responses, lag).
pub async fn inject(sim: SocketAddr, f: &FaultPlan) -> Result<(), String> {
    let ms = f.length.as_millis();
    match f.kind {
        FaultKind::DropWatches => post(sim, "/sim/faults/drop-watches").await?,
        FaultKind::Outage => {
            post(sim, &format!("/sim/faults/refuse?ms={ms}")).await?;
            sleep(f.length + Duration::from_millis(100)).await;
        }
        FaultKind::TooManyRequests | FaultKind::ServerError => {
            let code = if f.kind == FaultKind::ServerError {
                500
            } else {
                429
            };
            // The proxy meets them on its next requests: the re-watch after the drop, a
            // relist, a freshness check.
            post(
                sim,
                &format!(
                    "/sim/faults/errors?code={code}&count={}&retryAfter=1&path=/pods",
                    f.amount
                ),
            )
            .await?;
            post(sim, "/sim/faults/drop-watches").await?;
        }
        FaultKind::Compaction => post(sim, "/sim/compact").await?,
        FaultKind::GoneOnRewatch => {
            // History compacted while the proxy's watch is down: its re-watch from its last
            // resourceVersion gets 410 (the switch makes it so even when no write landed
            // between its last event and the compaction).
            post(sim, "/sim/compact").await?;
            post(sim, "/sim/faults/expire-watches?count=1").await?;
            post(sim, "/sim/faults/drop-watches").await?;
        }
        FaultKind::Malformed => post(sim, "/sim/faults/malformed-event").await?,
        FaultKind::SlowResponses => {
            post(sim, &format!("/sim/faults/delay?ms={}", f.amount)).await?;
            sleep(f.length).await;
            post(sim, "/sim/faults/delay?ms=0").await?;
        }
        FaultKind::WatchLag => {
            post(sim, &format!("/sim/faults/watch-lag?ms={}", f.amount)).await?;
            sleep(f.length).await;
            post(sim, "/sim/faults/watch-lag?ms=0").await?;
        }
    }
    Ok(())
}

/// Runs `faults` (offsets from `t0`) until done or `stop`; then clears every fault.
pub async fn run(
    sim: SocketAddr,
    t0: Instant,
    faults: &[FaultPlan],
    stop: CancellationToken,
) -> Injected {
    let mut out = Injected::default();
    for f in faults {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = sleep_until(t0 + f.at) => {}
        }
        match inject(sim, f).await {
            Ok(()) => *out.by_kind.entry(f.kind).or_default() += 1,
            Err(e) => out.failed.push(format!("{}: {e}", f.kind.name())),
        }
    }
    if let Err(e) = clear(sim).await {
        out.failed.push(e);
    }
    out
}

/// Clears every fault (also the delay and lag, which `faults/clear` resets too).
pub async fn clear(sim: SocketAddr) -> Result<(), String> {
    post(sim, "/sim/faults/clear").await
}
