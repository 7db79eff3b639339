//! One informer of a simulated node, as client-go ≥ 0.35's reflector runs it: its initial sync
//! is a watch-list (`watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&
//! allowWatchBookmarks=true`, resourceVersion unset) that ends at the BOOKMARK annotated
//! `k8s.io/initial-events-end`, and the stream then goes on; a stream that ends cleanly (its
//! `timeoutSeconds`, or the server) is re-watched from the last resourceVersion seen; a 410
//! (answered or as an ERROR event) starts a new watch-list (a relist); a 429 waits its
//! `Retry-After` (1 s when absent) and tries again; anything else, and a lost connection, waits
//! the reflector's back-off and re-watches from the last resourceVersion (a request that could
//! not be sent because its connection went away is sent again at once on the next one, as
//! client-go's transport does after a GOAWAY).
//!
//! Every request asks for protobuf (`Accept: application/vnd.kubernetes.protobuf;stream=watch`)
//! and `timeoutSeconds` drawn as client-go draws it (between the informer's minimum and twice
//! that). Events are split into frames and read only as far as the informer's [`Store`] needs
//! ([`super::wire`]); what happened is counted in [`Fleet`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::super::pbframe::Frames;
use super::conn::{Backoff, NodeConn, retry_after};
use super::counters::Fleet;
use super::wire::{self, Event};

/// What a watch asks for.
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// What one informer watches.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The collection's path (`/api/v1/pods`, `/api/v1/namespaces/ns/configmaps`).
    pub path: String,
    /// Its selector parameters, URL-encoded (`fieldSelector=…`), or empty.
    pub selector: String,
    /// client-go's minimum watch timeout for it (5 min; the kubelet's per-object ConfigMap and
    /// Secret reflectors 30 min).
    pub min_timeout: Duration,
}

impl Spec {
    /// The request's path and query: a watch-list, or a watch from `rv`.
    pub fn query(&self, rv: Option<&str>, timeout_secs: u64) -> String {
        let sel = if self.selector.is_empty() {
            String::new()
        } else {
            format!("&{}", self.selector)
        };
        match rv {
            None => format!(
                "{}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds={timeout_secs}{sel}",
                self.path
            ),
            Some(rv) => format!(
                "{}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={timeout_secs}{sel}",
                self.path
            ),
        }
    }
}

/// What an informer keeps of the objects it receives.
pub trait Store: Send {
    /// A watch-list starts: its initial events rebuild the store.
    fn begin_list(&mut self);
    /// An ADDED, MODIFIED or DELETED event of `object` (its encoded message).
    fn apply(&mut self, ty: &[u8], object: &[u8], meta: &[u8]);
    /// The watch-list's initial events are all in.
    fn end_list(&mut self);
    /// A BOOKMARK (`meta`: its object's encoded `ObjectMeta`), before [`Store::end_list`] when
    /// it ends a watch-list.
    fn bookmark(&mut self, _meta: &[u8]) {}
}

/// A store that only counts its objects (ADDED +1, DELETED −1; a watch-list starts from 0):
/// what the bench needs of the Node, Service, EndpointSlice, RuntimeClass, CSIDriver and
/// per-object informers, without keeping the objects.
#[derive(Debug, Default)]
pub struct Counted {
    /// Objects now.
    pub objects: Arc<AtomicI64>,
}

impl Store for Counted {
    fn begin_list(&mut self) {
        self.objects.store(0, Ordering::Relaxed);
    }
    fn apply(&mut self, ty: &[u8], _: &[u8], _: &[u8]) {
        match ty {
            b"ADDED" => self.objects.fetch_add(1, Ordering::Relaxed),
            b"DELETED" => self.objects.fetch_sub(1, Ordering::Relaxed),
            _ => 0,
        };
    }
    fn end_list(&mut self) {}
}

/// What others may read of a running informer.
#[derive(Debug, Default)]
pub struct State {
    /// Its current (first or re-) watch-list has ended.
    pub synced: AtomicBool,
    /// A watch stream is open.
    pub streaming: AtomicBool,
    /// What it is doing ([`Step`] as a number) and since when (ms since [`Step::epoch`]): what
    /// a report shows of an informer that stopped receiving.
    step: std::sync::atomic::AtomicU64,
    /// The connection (its number, [`NodeConn::generation`]) its last request went on.
    sent_on: std::sync::atomic::AtomicU64,
}

/// What an informer is doing, for reports of one that stopped receiving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Waiting for its connection.
    Connecting = 0,
    /// Waiting for a watch request to be sent and its answer's head.
    Requesting = 1,
    /// Reading a watch stream.
    Streaming = 2,
    /// Waiting before trying again (back-off, `Retry-After`).
    Pausing = 3,
}

impl Step {
    /// Every step, at its number.
    const ALL: [Step; 4] = [
        Step::Connecting,
        Step::Requesting,
        Step::Streaming,
        Step::Pausing,
    ];

    fn epoch() -> Instant {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *EPOCH.get_or_init(Instant::now)
    }
}

impl State {
    fn enter(&self, step: Step) {
        let ms = Step::epoch().elapsed().as_millis() as u64;
        self.step.store(ms << 2 | step as u64, Ordering::Relaxed);
    }

    /// The number of the connection its last request went on.
    pub fn sent_on(&self) -> u64 {
        self.sent_on.load(Ordering::Relaxed)
    }

    /// What the informer is doing, and for how long it has.
    pub fn step(&self) -> (Step, Duration) {
        let v = self.step.load(Ordering::Relaxed);
        let step = Step::ALL[(v & 3) as usize];
        let since = Duration::from_millis(v >> 2);
        (step, Step::epoch().elapsed().saturating_sub(since))
    }
}

/// How a stream ended.
enum End {
    /// Cleanly: re-watch from the last resourceVersion.
    Clean,
    /// A 410: relist.
    Gone,
    /// Broken or an ERROR event: back off, then re-watch.
    Failed,
}

/// Starts one informer in a task of `tasks`, running until `stop`; counted as running and
/// waiting for its sync from now on (not from when its task first runs: a fleet whose tasks
/// have not run yet must not look synced).
pub fn spawn(
    tasks: &TaskTracker,
    spec: Spec,
    conn: NodeConn,
    fleet: Arc<Fleet>,
    store: impl Store + 'static,
    stop: CancellationToken,
) -> Arc<State> {
    let state = Arc::new(State::default());
    fleet.informers.fetch_add(1, Ordering::Relaxed);
    fleet.pending_sync.fetch_add(1, Ordering::Relaxed);
    tasks.spawn(run(spec, conn, fleet, store, state.clone(), stop));
    state
}

/// Runs one informer until `stop` (counted by [`spawn`]).
async fn run(
    spec: Spec,
    mut conn: NodeConn,
    fleet: Arc<Fleet>,
    mut store: impl Store,
    state: Arc<State>,
    stop: CancellationToken,
) {
    let mut rv: Option<String> = None;
    let mut listing = true;
    let mut listed_before = false;
    let mut backoff = Backoff::default();
    'requests: loop {
        state.enter(Step::Connecting);
        let Some(mut sender) = conn.sender(&stop).await else {
            break;
        };
        state.enter(Step::Requesting);
        state.sent_on.store(conn.generation().0, Ordering::Relaxed);
        let min = spec.min_timeout.as_secs().max(1);
        let timeout = min + rand::random_range(0..=min);
        let pq = spec.query(if listing { None } else { rv.as_deref() }, timeout);
        let req = conn
            .request(http::Method::GET, &format!("{}{pq}", conn.base))
            .header(http::header::ACCEPT, ACCEPT)
            .body(Full::new(Bytes::new()));
        let Ok(req) = req else {
            fleet.error(|| format!("bad request URI {pq}"));
            break;
        };
        Fleet::add(&fleet.counts.watch_requests);
        if listing {
            Fleet::add(&fleet.counts.watch_lists);
        }
        let sent = async {
            sender.ready().await?;
            sender.send_request(req).await
        };
        let resp = tokio::select! {
            _ = stop.cancelled() => break,
            r = sent => r,
            _ = orphaned(&conn, state.sent_on()) => {
                Fleet::add(&fleet.counts.orphaned);
                fleet.error(|| format!(
                    "a watch request got neither an answer nor an error {ORPHAN_GRACE:?} after its connection was replaced: sent again"
                ));
                continue;
            }
        };
        let resp = match resp {
            Ok(r) => r,
            Err(_) => {
                Fleet::add(&fleet.counts.send_failures);
                // On a connection that went away meanwhile (a GOAWAY), client-go's transport
                // sends the request again on the next connection, unseen by the reflector: no
                // back-off (the connection's own task backs off when dialing fails). A request
                // that raced the GOAWAY fails a moment before the connection's task has seen it
                // and closed the sender: that moment is waited for, briefly.
                if went_away(&sender).await {
                    continue;
                }
                if !pause(backoff.next_wait(), &stop, &state).await {
                    break;
                }
                continue;
            }
        };
        match resp.status().as_u16() {
            200 => {}
            429 => {
                Fleet::add(&fleet.counts.watch_429);
                let wait = retry_after(resp.headers()).unwrap_or(1);
                if !pause(Duration::from_secs(wait), &stop, &state).await {
                    break;
                }
                continue;
            }
            410 => {
                Fleet::add(&fleet.counts.gone_410);
                start_relist(&mut listing, &state, &fleet);
                continue;
            }
            code => {
                Fleet::add(&fleet.counts.watch_other_status);
                fleet.error(|| format!("watch {pq} answered {code}"));
                if !pause(backoff.next_wait(), &stop, &state).await {
                    break;
                }
                continue;
            }
        }
        backoff.reset();
        let opened = Instant::now();
        if listing {
            // A relist is a watch-list the server answered after the informer's first (one
            // that was refused or never sent is not).
            if listed_before {
                Fleet::add(&fleet.counts.relists);
            }
            listed_before = true;
            store.begin_list();
        }
        state.streaming.store(true, Ordering::Relaxed);
        state.enter(Step::Streaming);
        fleet.streaming.fetch_add(1, Ordering::Relaxed);
        let mut body = resp.into_body();
        let mut frames = Frames::default();
        let mut end: Option<End> = None;
        while end.is_none() {
            let frame = tokio::select! {
                _ = stop.cancelled() => {
                    fleet.streaming.fetch_sub(1, Ordering::Relaxed);
                    break 'requests;
                }
                f = body.frame() => f,
            };
            let data = match frame {
                None => {
                    end = Some(End::Clean);
                    break;
                }
                Some(Err(_)) => {
                    Fleet::add(&fleet.counts.broken);
                    end = Some(End::Failed);
                    break;
                }
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
            };
            fleet
                .counts
                .bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            let whole = frames.push(&data, |frame| {
                if end.is_some() {
                    return;
                }
                let e = Event::read(frame);
                fleet.stats.on_protobuf_read(frame.len(), e.ty, || e.meta());
                match e.ty {
                    b"ADDED" | b"MODIFIED" | b"DELETED" => {
                        if let (Some(obj), Some(meta)) = (e.object, e.meta()) {
                            store.apply(e.ty, obj, meta);
                            set_rv(&mut rv, wire::resource_version(meta));
                        }
                    }
                    b"BOOKMARK" => {
                        if let Some(meta) = e.meta() {
                            store.bookmark(meta);
                            set_rv(&mut rv, wire::resource_version(meta));
                            if listing && wire::ends_initial_events(meta) {
                                store.end_list();
                                listing = false;
                                state.synced.store(true, Ordering::Relaxed);
                                fleet.pending_sync.fetch_sub(1, Ordering::Relaxed);
                                Fleet::add(&fleet.counts.syncs);
                            }
                        }
                    }
                    b"ERROR" => {
                        let code = e.object.map(wire::status_code).unwrap_or(0);
                        if code == 410 {
                            Fleet::add(&fleet.counts.gone_410);
                            end = Some(End::Gone);
                        } else if code == 504 {
                            Fleet::add(&fleet.counts.error_504);
                            end = Some(End::Failed);
                        } else {
                            Fleet::add(&fleet.counts.error_events);
                            fleet.error(|| format!("ERROR event {code} on {pq}"));
                            end = Some(End::Failed);
                        }
                    }
                    other => {
                        Fleet::add(&fleet.counts.error_events);
                        fleet.error(|| {
                            format!(
                                "unreadable event type {:?} on {pq}",
                                String::from_utf8_lossy(other)
                            )
                        });
                    }
                }
            });
            if !whole {
                fleet.error(|| format!("a protobuf frame over 64 MiB on {pq}"));
                Fleet::add(&fleet.counts.broken);
                end = Some(End::Failed);
            }
        }
        fleet.streaming.fetch_sub(1, Ordering::Relaxed);
        state.streaming.store(false, Ordering::Relaxed);
        match end {
            Some(End::Clean) => {
                if opened.elapsed() + Duration::from_secs(1) < Duration::from_secs(timeout) {
                    Fleet::add(&fleet.counts.ended_early);
                } else {
                    Fleet::add(&fleet.counts.ended_timeout);
                }
                // A watch-list cut before its end starts over (its resourceVersion is none).
            }
            Some(End::Gone) => start_relist(&mut listing, &state, &fleet),
            Some(End::Failed) | None => {
                if !pause(backoff.next_wait(), &stop, &state).await {
                    break;
                }
            }
        }
    }
    fleet.informers.fetch_sub(1, Ordering::Relaxed);
    if !state.synced.load(Ordering::Relaxed) {
        fleet.pending_sync.fetch_sub(1, Ordering::Relaxed);
    }
}

/// After a 410: the next request is a watch-list, and the informer is not synced until it ends.
fn start_relist(listing: &mut bool, state: &State, fleet: &Fleet) {
    if !*listing {
        *listing = true;
        state.synced.store(false, Ordering::Relaxed);
        fleet.pending_sync.fetch_add(1, Ordering::Relaxed);
    }
}

/// Keeps `rv` as the last resourceVersion seen (its allocation reused).
fn set_rv(rv: &mut Option<String>, seen: &[u8]) {
    if seen.is_empty() {
        return;
    }
    let Ok(seen) = std::str::from_utf8(seen) else {
        return;
    };
    match rv {
        Some(r) => {
            r.clear();
            r.push_str(seen);
        }
        None => *rv = Some(seen.to_string()),
    }
}

/// How long a request waits for its answer's head after the connection it went on was
/// replaced, before it is given up and sent again. Normally hyper answers such a request, or
/// fails it, at once. But a request handed to a connection's dispatch channel at the moment the
/// connection's task ends can be lost there: tokio's unbounded channel counts the message in
/// before it pushes it, the receiver's drop drains what is pushed in between, and the message
/// pushed after is kept (with the callback the request waits on) until every sender is gone,
/// one of which the waiting client holds (the mechanism as read in tokio 1.54's and hyper
/// 1.12's code; not reproduced in isolation). Seen in S13 with `max_connection_age_secs`: 2 of
/// about 2,400 connection ends under load left a request waiting for good (before this guard,
/// its watcher's events were lost to the end of the run). Go's HTTP/2 transport, which
/// client-go uses, has no such channel. Short: a request resent late may find that a replica
/// restarted meanwhile has no history back to its resourceVersion (a 410, and a relist).
const ORPHAN_GRACE: Duration = Duration::from_secs(1);

/// Resolves [`ORPHAN_GRACE`] after the connection numbered `sent_on` was replaced or went down
/// ([`NodeConn::replaced`]); never while it is the newest and up.
async fn orphaned(conn: &NodeConn, sent_on: u64) {
    conn.replaced(sent_on).await;
    tokio::time::sleep(ORPHAN_GRACE).await;
}

/// How long a failed request waits for its connection to turn out closed ([`went_away`]).
const GOING_AWAY_WAIT: Duration = Duration::from_millis(100);

/// Whether `sender`'s connection is closed, or closes within [`GOING_AWAY_WAIT`] (checked every
/// 5 ms): after a request failed, that is the difference between a connection that went away
/// (a GOAWAY: send again on the next) and a request that failed on a live one (back off).
async fn went_away(sender: &super::conn::Sender) -> bool {
    let t0 = Instant::now();
    while !sender.is_closed() {
        if t0.elapsed() >= GOING_AWAY_WAIT {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// Sleeps `d` unless `stop` comes first; false when stopped.
async fn pause(d: Duration, stop: &CancellationToken, state: &State) -> bool {
    state.enter(Step::Pausing);
    tokio::select! {
        _ = stop.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_client_gos() {
        let s = Spec {
            path: "/api/v1/pods".into(),
            selector: "fieldSelector=spec.nodeName%3Dnode-00001".into(),
            min_timeout: Duration::from_secs(300),
        };
        assert_eq!(
            s.query(None, 301),
            "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=301&fieldSelector=spec.nodeName%3Dnode-00001"
        );
        assert_eq!(
            s.query(Some("42"), 400),
            "/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion=42&timeoutSeconds=400&fieldSelector=spec.nodeName%3Dnode-00001"
        );
        let mut rv = None;
        set_rv(&mut rv, b"7");
        set_rv(&mut rv, b"");
        assert_eq!(rv.as_deref(), Some("7"));
        set_rv(&mut rv, b"12");
        assert_eq!(rv.as_deref(), Some("12"));
    }
}
