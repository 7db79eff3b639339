//! Whether simulated nodes converged: for each node checked, what its clients hold is what the
//! simulator holds (asked directly, in protobuf): the kubelet's pod informer holds exactly the
//! pods bound to the node; it has exactly one informer open per ConfigMap and Secret those pods
//! reference, each synced and holding the object when it exists (none when it does not); and
//! every other informer of the node is synced.
//!
//! Reads only; run with the churn stopped, retried until it holds or a deadline passes (events
//! still in flight are not a failure).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::super::client::{self, Encoding};
use super::super::pbframe::field;
use super::node::{Node, ObjKey};
use super::wire::{self, RefKind};

/// The outcome of a check.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Nodes checked.
    pub checked: usize,
    /// Of them, those whose clients hold what the simulator holds.
    pub converged: usize,
    /// Why the first node that did not, did not.
    pub first_mismatch: Option<String>,
}

/// The nodes to check: all of them up to `max`, else `max` spread evenly.
pub fn sample(nodes: usize, max: usize) -> Vec<usize> {
    if nodes <= max {
        return (0..nodes).collect();
    }
    (0..max).map(|i| i * nodes / max).collect()
}

/// Checks `nodes[i]` for each `i` of `which` against the simulator at `sim` (asked with `token`
/// as the bearer token when given), again every 200 ms until all hold or `deadline` passes.
pub async fn converged(
    sim: SocketAddr,
    token: Option<&str>,
    nodes: &[Node],
    which: &[usize],
    deadline: Duration,
) -> Outcome {
    let sim = Sim { addr: sim, token };
    let t0 = Instant::now();
    loop {
        let mut out = Outcome::default();
        for &i in which {
            let Some(n) = nodes.get(i) else { continue };
            out.checked += 1;
            match node(&sim, n).await {
                Ok(()) => out.converged += 1,
                Err(why) => {
                    out.first_mismatch
                        .get_or_insert(format!("{}: {why}", n.name));
                }
            }
        }
        if out.converged == out.checked || t0.elapsed() > deadline {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The simulator checked against, and the token it is asked with.
struct Sim<'a> {
    addr: SocketAddr,
    token: Option<&'a str>,
}

/// GETs `path` from the simulator in protobuf: status and body.
async fn get(sim: &Sim<'_>, path: &str) -> Result<(u16, Vec<u8>), String> {
    client::get_body_as_bearer(sim.addr, path, Encoding::Protobuf, sim.token)
        .await
        .map(|(h, b)| (h.status, b))
        .map_err(|e| format!("GET {path}: {e}"))
}

/// One node against the simulator.
async fn node(sim: &Sim<'_>, n: &Node) -> Result<(), String> {
    if let Some(i) = n
        .informers
        .iter()
        .position(|s| !s.synced.load(Ordering::Relaxed))
    {
        return Err(format!("informer {i} not synced"));
    }
    let path = format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{}", n.name);
    let (status, body) = get(sim, &path).await?;
    if status != 200 {
        return Err(format!("the simulator answered {status} to {path}"));
    }
    let mut pods: BTreeSet<(String, String)> = BTreeSet::new();
    let mut refs: BTreeSet<(RefKind, String, String)> = BTreeSet::new();
    let read = wire::list_items(&body, |pod| {
        let Some(meta) = field(pod, 1) else { return };
        let ns = String::from_utf8_lossy(wire::namespace(meta)).into_owned();
        pods.insert((ns.clone(), String::from_utf8_lossy(wire::name(meta)).into()));
        wire::pod_refs(pod, |k, name| {
            refs.insert((k, ns.clone(), String::from_utf8_lossy(name).into()));
        });
    });
    if !read {
        return Err(format!("{path}: not a protobuf list"));
    }
    // The pods held; each object informer open, what it holds and whether it synced.
    type Held = (BTreeSet<(String, String)>, Vec<(ObjKey, i64, bool)>);
    let (held, open): Held = {
        let v = n.view.lock();
        (
            v.pods
                .keys()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            v.objects
                .iter()
                .map(|(k, o)| {
                    (
                        k.clone(),
                        o.objects.load(Ordering::Relaxed),
                        o.state.synced.load(Ordering::Relaxed),
                    )
                })
                .collect(),
        )
    };
    same("pods", &held, &pods)?;
    let watched: BTreeSet<(RefKind, String, String)> = open
        .iter()
        .map(|((k, ns, name), _, _)| (*k, ns.to_string(), name.to_string()))
        .collect();
    same("ConfigMap/Secret informers", &watched, &refs)?;
    for ((k, ns, name), objects, synced) in open {
        if !synced {
            return Err(format!("{k:?} {ns}/{name} not synced"));
        }
        let path = format!("/api/v1/namespaces/{ns}/{}/{name}", k.resource());
        let (status, _) = get(sim, &path).await?;
        let want = i64::from(status == 200);
        if objects != want {
            return Err(format!(
                "{k:?} {ns}/{name}: holds {objects}, the simulator answers {status}"
            ));
        }
    }
    Ok(())
}

/// Whether the node holds exactly what the simulator has (`what`: for the message).
fn same<T: Ord + std::fmt::Debug>(
    what: &str,
    held: &BTreeSet<T>,
    want: &BTreeSet<T>,
) -> Result<(), String> {
    if held == want {
        return Ok(());
    }
    Err(format!(
        "{what}: holds {}, the simulator's pods say {} (missing {:?}, extra {:?})",
        held.len(),
        want.len(),
        want.difference(held).next(),
        held.difference(want).next()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_spread_over_the_fleet() {
        assert_eq!(sample(3, 50), vec![0, 1, 2]);
        let s = sample(5000, 50);
        assert_eq!((s.len(), s[0], s[1], s[49]), (50, 0, 100, 4900));
    }
}
