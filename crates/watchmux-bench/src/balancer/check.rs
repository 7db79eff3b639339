//! S13's checker: what each watcher received against the simulator's own log of the pods'
//! events. The simulator keeps its history (`--history-window-secs` longer than the run), so a
//! watch on it from the earliest resourceVersion any watcher synced at replays every event
//! since, in order; each watcher must have received, after each of its syncs, exactly the
//! events of its namespace that came after the sync's resourceVersion (until its next relist,
//! if any), once each and in order.
//!
//! Reads only, after the churn stopped.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;

use super::watchers::Record;
use crate::BenchError;
use crate::client::{self, Encoding};
use crate::nodefleet::wire::{self, Event};
use crate::pbframe::Frames;

/// The simulator's pod events after a resourceVersion, by namespace.
#[derive(Debug, Default)]
pub struct History {
    /// Each namespace's events' resourceVersions, ascending.
    pub by_namespace: BTreeMap<String, Vec<u64>>,
    /// The last resourceVersion in the log.
    pub last: u64,
}

impl History {
    /// The last event of namespace `ns` (0: none).
    pub fn last_of(&self, ns: &str) -> u64 {
        self.by_namespace
            .get(ns)
            .and_then(|v| v.last().copied())
            .unwrap_or(0)
    }
}

/// Reads the simulator's pod events after `from` (a watch from it, in protobuf, that the
/// simulator ends after `secs` seconds: its history comes first, at once).
pub async fn history(sim: SocketAddr, from: u64, secs: u64) -> Result<History, BenchError> {
    let path = format!("/api/v1/pods?watch=true&resourceVersion={from}&timeoutSeconds={secs}");
    let (head, body) = client::get_body_as(sim, &path, Encoding::Protobuf)
        .await
        .map_err(|e| BenchError::io(format!("reading the simulator's history: GET {path}"), e))?;
    if head.status != 200 {
        return Err(BenchError::Run(format!(
            "the simulator answered {} to {path}",
            head.status
        )));
    }
    let mut h = History::default();
    let mut failure = None;
    let whole = Frames::default().push(&body, |frame| {
        let e = Event::read(frame);
        match e.ty {
            b"ADDED" | b"MODIFIED" | b"DELETED" => {
                let Some(meta) = e.meta() else { return };
                let ns = String::from_utf8_lossy(wire::namespace(meta)).into_owned();
                let rv = std::str::from_utf8(wire::resource_version(meta))
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                h.last = h.last.max(rv);
                h.by_namespace.entry(ns).or_default().push(rv);
            }
            b"ERROR" => {
                failure.get_or_insert(e.object.map(wire::status_code).unwrap_or(0));
            }
            _ => {}
        }
    });
    if let Some(code) = failure {
        return Err(BenchError::Run(format!(
            "the simulator's history from {from}: ERROR {code} (its window is too short?)"
        )));
    }
    if !whole {
        return Err(BenchError::Run(
            "the simulator's history ends inside a frame".into(),
        ));
    }
    for v in h.by_namespace.values_mut() {
        v.sort_unstable();
    }
    Ok(h)
}

/// What was wrong with one watcher's events, by resourceVersion.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Events of its namespace it should have received and did not.
    pub lost: Vec<u64>,
    /// Events it received more than once (each repeat).
    pub duplicated: Vec<u64>,
    /// Events it received after one with a higher resourceVersion.
    pub out_of_order: Vec<u64>,
    /// Events it received that are not in the namespace's log.
    pub unknown: Vec<u64>,
}

/// Checks one watcher's record against `log`, its namespace's events (ascending).
pub fn check(record: &Record, log: &[u64]) -> Verdict {
    let mut v = Verdict::default();
    let known: HashSet<u64> = log.iter().copied().collect();
    for s in &record.segments {
        let mut seen = HashSet::with_capacity(s.events.len());
        let mut highest = 0;
        for &rv in &s.events {
            if !seen.insert(rv) {
                v.duplicated.push(rv);
                continue;
            }
            if rv < highest {
                v.out_of_order.push(rv);
            }
            highest = highest.max(rv);
            if !known.contains(&rv) {
                v.unknown.push(rv);
            }
        }
        let until = s.until.unwrap_or(u64::MAX);
        v.lost.extend(
            log.iter()
                .copied()
                .filter(|rv| *rv > s.from && *rv <= until && !seen.contains(rv)),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::watchers::Segment;
    use super::*;

    #[test]
    fn finds_lost_duplicated_reordered_and_unknown_events_per_sync() {
        let log = [5, 7, 9, 12, 20, 25, 30];
        let seg = |from, until, events: &[u64]| Segment {
            from,
            until,
            events: events.to_vec(),
        };
        let record = |segments| Record {
            segments,
            ..Record::default()
        };
        // All after the sync at 6, once each, in order.
        let ok = record(vec![seg(6, None, &[7, 9, 12, 20, 25, 30])]);
        assert_eq!(check(&ok, &log), Verdict::default());
        // 12 lost, 20 twice, 25 before 9, 99 never written.
        let bad = record(vec![seg(6, None, &[7, 25, 9, 20, 20, 30, 99])]);
        let v = check(&bad, &log);
        assert_eq!(v.lost, vec![12]);
        assert_eq!(v.duplicated, vec![20]);
        assert_eq!(v.out_of_order, vec![9, 20]);
        assert_eq!(v.unknown, vec![99]);
        // A relist at 9 and a new sync at 22: 12 and 20 are covered by the relist's state.
        let relisted = record(vec![seg(6, Some(9), &[7, 9]), seg(22, None, &[25, 30])]);
        assert_eq!(check(&relisted, &log), Verdict::default());
    }
}
