//! S13's clients: client-go-like watchers of one namespace's pods each, grouped into clients
//! that each keep one HTTP/2 connection (h2c) to the balancer, as a client-go process shares
//! one among its informers. Each watcher is S12's informer ([`crate::nodefleet::informer`]):
//! a watch-list to start, a re-watch from its last resourceVersion (bookmarks included) when a
//! stream ends, a relist only after a 410; the connection is S12's too
//! ([`crate::nodefleet::conn`]: a GOAWAY makes the next request dial a new connection, which
//! the balancer may send to another replica).
//!
//! Each watcher records what the checker needs ([`Record`]): the events it received after each
//! of its syncs, by resourceVersion, and the longest time any of them took from its write (the
//! simulator's stamp) to its receipt since the last [`Watchers::take_gaps`].

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::{Endpoint, parse_stamp};
use crate::nodefleet::counters::Fleet;
use crate::nodefleet::informer::{self, Spec, Store};
use crate::nodefleet::{conn, wire};
use crate::pbframe;
use kube_sim::fleet::WRITE_TIME_ANNOTATION;
use kube_sim::util::now_unix_nanos;

/// The events a watcher received from one sync (the end of a watch-list's initial events) on,
/// until its next relist.
#[derive(Debug, Clone, Default)]
pub struct Segment {
    /// The resourceVersion of the bookmark that ended the watch-list.
    pub from: u64,
    /// The last resourceVersion it had seen when it relisted; `None` for the current segment.
    pub until: Option<u64>,
    /// The resourceVersions of the ADDED, MODIFIED and DELETED events it received, in order.
    pub events: Vec<u64>,
}

/// What one watcher saw.
#[derive(Debug, Default)]
pub struct Record {
    /// One per sync; events before the first sync and a watch-list's initial events are not
    /// recorded (they are a state, not a history).
    pub segments: Vec<Segment>,
    /// The longest write → receipt time of an event since the gaps were last taken, µs.
    pub gap_us: u64,
    /// The last resourceVersion seen (an event's or a bookmark's).
    pub last_rv: u64,
    pub(super) listing: bool,
    pub(super) bookmark_rv: u64,
}

/// The informer's store: fills a [`Record`].
struct Recorder(Arc<Mutex<Record>>);

fn rv_of(meta: &[u8]) -> u64 {
    std::str::from_utf8(wire::resource_version(meta))
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

impl Store for Recorder {
    fn begin_list(&mut self) {
        let mut r = self.0.lock();
        r.listing = true;
        let last = r.last_rv;
        if let Some(s) = r.segments.last_mut()
            && s.until.is_none()
        {
            s.until = Some(last);
        }
    }

    fn apply(&mut self, ty: &[u8], _object: &[u8], meta: &[u8]) {
        let mut r = self.0.lock();
        if r.listing {
            return;
        }
        let rv = rv_of(meta);
        r.last_rv = rv;
        if let Some(s) = r.segments.last_mut() {
            s.events.push(rv);
        }
        // A DELETED event carries the object's last state, and the final update of a deleting
        // pod is not stamped: neither says when its write happened.
        if ty == b"DELETED" || pbframe::deleting(meta) {
            return;
        }
        if let Some(stamp) = pbframe::annotation(meta, WRITE_TIME_ANNOTATION).and_then(parse_stamp)
        {
            let took = (now_unix_nanos() as u64).saturating_sub(stamp) / 1000;
            r.gap_us = r.gap_us.max(took);
        }
    }

    fn end_list(&mut self) {
        let mut r = self.0.lock();
        r.listing = false;
        let from = r.bookmark_rv;
        r.last_rv = from;
        r.segments.push(Segment {
            from,
            until: None,
            events: Vec::new(),
        });
    }

    fn bookmark(&mut self, meta: &[u8]) {
        let mut r = self.0.lock();
        let rv = rv_of(meta);
        r.bookmark_rv = rv;
        if !r.listing {
            r.last_rv = r.last_rv.max(rv);
        }
    }
}

/// What the watchers are.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Watchers in all.
    pub watchers: usize,
    /// Watchers sharing one client's connection.
    pub per_connection: usize,
    /// The namespaces watched, watcher `i` the `i % len`-th.
    pub namespaces: Vec<String>,
    /// client-go's minimum watch timeout: each watch asks for a `timeoutSeconds` between this
    /// and twice this.
    pub min_timeout: Duration,
}

/// The running watchers.
pub struct Watchers {
    /// Their counters (S12's: requests, 410s, relists, streams ended, connections dialed).
    pub fleet: Arc<Fleet>,
    /// Each watcher's namespace (an index into the plan's) and record.
    pub records: Vec<(usize, Arc<Mutex<Record>>)>,
    /// Each watcher's informer state, in the order of `records`.
    pub states: Vec<Arc<informer::State>>,
    /// Each watcher's client connection, in the order of `records`.
    pub conns: Vec<conn::NodeConn>,
    tasks: TaskTracker,
    stop: CancellationToken,
}

impl Watchers {
    /// Starts every watcher against `ep` (h2c), clients of `plan.per_connection` watchers each.
    pub fn start(ep: &Endpoint, plan: &Plan) -> Watchers {
        let fleet = Arc::new(Fleet::default());
        let tasks = TaskTracker::new();
        let stop = CancellationToken::new();
        let per = plan.per_connection.max(1);
        let mut records = Vec::with_capacity(plan.watchers);
        let mut states = Vec::with_capacity(plan.watchers);
        let mut conns = Vec::with_capacity(plan.watchers);
        let mut client = None;
        for i in 0..plan.watchers {
            if i % per == 0 {
                client = Some(conn::connect(
                    &tasks,
                    ep.clone(),
                    None,
                    fleet.clone(),
                    stop.child_token(),
                ));
            }
            let c = client.clone().expect("a client for every watcher");
            conns.push(c.clone());
            let ns = i % plan.namespaces.len().max(1);
            let record = Arc::new(Mutex::new(Record::default()));
            let state = informer::spawn(
                &tasks,
                Spec {
                    path: format!("/api/v1/namespaces/{}/pods", plan.namespaces[ns]),
                    selector: String::new(),
                    min_timeout: plan.min_timeout,
                },
                c,
                fleet.clone(),
                Recorder(record.clone()),
                stop.child_token(),
            );
            records.push((ns, record));
            states.push(state);
        }
        Watchers {
            fleet,
            records,
            states,
            conns,
            tasks,
            stop,
        }
    }

    /// Each watcher's longest write → receipt time since the last call, µs (0: no stamped
    /// event), and starts over.
    pub fn take_gaps(&self) -> Vec<u64> {
        self.records
            .iter()
            .map(|(_, r)| std::mem::take(&mut r.lock().gap_us))
            .collect()
    }

    /// Stops every task (bounded).
    pub async fn stop(self) {
        self.stop.cancel();
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.tasks.wait()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::proto::{envelope, json_to_proto, message_for};

    fn meta(obj: serde_json::Value) -> Vec<u8> {
        let pod = json_to_proto(
            message_for("v1", "Pod").unwrap(),
            obj.to_string().as_bytes(),
        )
        .unwrap();
        let ev = envelope::watch_event("ADDED", &envelope::wrap("v1", "Pod", &pod));
        wire::Event::read(&ev).meta().unwrap().to_vec()
    }

    #[test]
    fn records_events_per_sync_and_the_longest_delay() {
        let rec = Arc::new(Mutex::new(Record::default()));
        let mut s = Recorder(rec.clone());
        let now = now_unix_nanos() as u64;
        let pod = |rv: u64, stamp: u64| {
            meta(
                serde_json::json!({"metadata": {"name": "p", "namespace": "n",
                "resourceVersion": rv.to_string(),
                "annotations": {WRITE_TIME_ANNOTATION: stamp.to_string()}}}),
            )
        };
        let bookmark =
            |rv: u64| meta(serde_json::json!({"metadata": {"resourceVersion": rv.to_string()}}));
        // A watch-list: its initial events are not recorded.
        s.begin_list();
        s.apply(b"ADDED", b"", &pod(3, now - 9_000_000_000));
        s.bookmark(&bookmark(10));
        s.end_list();
        s.apply(b"MODIFIED", b"", &pod(11, now - 2_000_000));
        s.bookmark(&bookmark(15));
        s.apply(b"DELETED", b"", &pod(16, now - 9_000_000_000));
        // A relist after a 410.
        s.begin_list();
        s.bookmark(&bookmark(30));
        s.end_list();
        s.apply(b"ADDED", b"", &pod(31, now));
        let r = rec.lock();
        assert_eq!(r.segments.len(), 2);
        assert_eq!(
            (
                r.segments[0].from,
                r.segments[0].until,
                r.segments[0].events.clone()
            ),
            (10, Some(16), vec![11, 16])
        );
        assert_eq!((r.segments[1].from, r.segments[1].until), (30, None));
        assert_eq!(r.segments[1].events, vec![31]);
        assert_eq!(r.last_rv, 31);
        // 2 ms, not the initial event's or the DELETED's old stamps.
        assert!(r.gap_us >= 2000 && r.gap_us < 1_000_000, "{}", r.gap_us);
    }
}
