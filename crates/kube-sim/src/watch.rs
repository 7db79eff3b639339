//! WATCH streams as kube-apiserver 1.34+ serves them from its watch cache (spec §1.6, §2):
//! initial events and the `k8s.io/initial-events-end` bookmark for watch-lists, replay from a
//! resourceVersion, 410 as an ERROR event, selector move-in/move-out, periodic bookmarks,
//! `timeoutSeconds`, and the faults that cut streams.
//!
//! Each watch is one task reading the resource's shared event log from its own cursor; frames of
//! plain JSON watches are encoded once per event and shared. A watch is served in JSON (a
//! Table, PartialObjectMetadata) or in protobuf ([`super::protobuf`]'s length-prefixed
//! `WatchEvent`s), on a chunked body or, when the request asks to upgrade, a websocket
//! ([`Sink`]: one message per event).
//!
//! Read-only over the store: a watch copies a batch of events out under a short read lock and
//! sends them after releasing it, so a slow client never blocks writers.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use rand::Rng;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::SimState;
use super::faults::MALFORMED_EVENT;
use super::http::{Body, Filter};
use super::kinds::ResourceType;
use super::protobuf;
use super::store::{Event, EventType, StoredObject, encode_frame};
use super::util::now_unix;
use kube_wire::event::{bookmark_object, error_frame};
use kube_wire::negotiate::{Encoding, Negotiated, Repr};
use kube_wire::options::ListOptions;
use kube_wire::status::Status;
use kube_wire::table::{self, IncludeObject, TablePrinter};

pub use kube_wire::event::INITIAL_EVENTS_END;
pub use websocket::Sink;

mod websocket;

/// Events read from the log per lock acquisition.
const BATCH: usize = 256;
/// How long a watch-list waits for a future resourceVersion before an ERROR 504.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(3);

type Tx = mpsc::Sender<Result<Frame<Bytes>, io::Error>>;

/// Starts a watch: returns the 200 response at once (headers are flushed before any event, as
/// kube-apiserver does) and streams events from a task.
pub async fn serve(
    state: Arc<SimState>,
    rt: Arc<ResourceType>,
    opts: ListOptions,
    filter: Filter,
    wire: Negotiated,
    query: Option<&str>,
    sink: Sink,
) -> Result<Response<Body>, Status> {
    // A resourceVersion kube's versioner refuses is rejected before the stream starts, as
    // kube's watch cache does (a bare storage error: 500).
    let rv = opts.cacher_rv()?;
    // kube validates a Table watch's `includeObject` before the stream starts.
    let include = super::http::table_include(wire.repr, query)?;
    let protobuf = wire.encoding == Encoding::Protobuf;
    // Only then does the websocket handshake happen (and can fail).
    let upgrade = match sink {
        Sink::Chunked => None,
        Sink::Websocket(response, fut) => Some((response, fut)),
        Sink::Refused(response) => return Ok(response),
    };
    // kube's arithmetic (`ListOptions::watch_timeout`): a client-supplied number never
    // overflows the deadline.
    let timeout = opts.watch_timeout().unwrap_or_else(|| {
        let min = state.config.min_request_timeout;
        min + min.mul_f64(rand::rng().random::<f64>())
    });
    let (tx, mut rx) = mpsc::channel(16);
    // A watch prints with the columns of its start: kube serves it from the storage (and table
    // convertor) of the CRD as it was then.
    let printer = state.table_printer(&rt);
    let w = Watcher {
        state: state.clone(),
        rt,
        printer,
        filter,
        repr: wire.repr,
        protobuf,
        include,
        bookmarks: opts.allow_watch_bookmarks,
        deadline: far_deadline(timeout),
        tx,
        first_table: true,
        last_sent: 0,
    };
    let sie = opts.send_initial_events;
    // Counted before the response goes out: a client holding the response head finds its watch
    // in the counters (the stream task adopts the count).
    state.stats.count_open_watch(w.rt.index);
    state.tasks.spawn(async move { w.run(rv, sie).await });
    if let Some((response, fut)) = upgrade {
        state
            .tasks
            .spawn(websocket::pump(fut, rx, protobuf, state.cancel.clone()));
        return Ok(response);
    }
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    *r.status_mut() = StatusCode::OK;
    // kube names the stream for protobuf (`;stream=watch`), not for JSON.
    let content_type = if protobuf {
        "application/vnd.kubernetes.protobuf;stream=watch"
    } else {
        "application/json"
    };
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    Ok(r)
}

struct Watcher {
    state: Arc<SimState>,
    rt: Arc<ResourceType>,
    /// How this watch prints Tables.
    printer: TablePrinter,
    filter: Filter,
    repr: Repr,
    /// Frames are protobuf `WatchEvent`s (JSON lines otherwise).
    protobuf: bool,
    include: IncludeObject,
    bookmarks: bool,
    deadline: Instant,
    tx: Tx,
    first_table: bool,
    /// Highest resourceVersion announced to the client (events after the initial ones, bookmarks).
    last_sent: u64,
}

/// Why the stream stops.
enum End {
    /// Clean end of the body.
    Clean,
    /// Abort the connection (fault injection).
    Abort,
}

impl Watcher {
    async fn run(mut self, rv: Option<u64>, sie: Option<bool>) {
        let state = self.state.clone();
        let _open = state.stats.adopt_open_watch(self.rt.index);
        let mut drops = state.faults.watch_drops();
        drops.borrow_and_update();
        let mut restarts = state.faults.restarts();
        restarts.borrow_and_update();
        let tx = self.tx.clone();
        let end = tokio::select! {
            end = self.stream(rv, sie) => end,
            _ = drops.changed() => End::Abort,
            _ = restarts.changed() => End::Clean,
            _ = tx.closed() => End::Clean,
            _ = state.cancel.cancelled() => End::Clean,
        };
        if let End::Abort = end {
            let _ = self
                .tx
                .send(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "watch dropped by fault injection",
                )))
                .await;
        }
    }

    async fn stream(&mut self, rv: Option<u64>, sie: Option<bool>) -> End {
        let store = self.state.store.clone();
        let mut changed = store.subscribe(&self.rt);
        changed.borrow_and_update();
        let mut cursor = match (sie, rv) {
            // A resourceVersion that parses to 0 without being the literal "0" ("00") is not
            // defaulted to a watch-list: kube's cacher answers it as the legacy RV=0 watch, the
            // current state as ADDED events then the changes, with no initial-events-end
            // bookmark.
            (Some(true), _) | (None, Some(0)) => {
                // Watch-list: wait for a requested RV (W6), then the current state (W2/W4).
                let target = rv.unwrap_or(0);
                if target > store.revision()
                    && !store.wait_for_revision(target, BLOCK_TIMEOUT).await
                {
                    let s = Status::too_large_resource_version(target, store.revision());
                    self.send_error(&s).await;
                    return End::Clean;
                }
                let Ok(page) = store.list(
                    &self.rt,
                    self.filter.namespace.as_deref(),
                    None,
                    None,
                    0,
                    &|o| self.filter.matches(o),
                    false,
                ) else {
                    return End::Clean;
                };
                for obj in &page.items {
                    let frame = self.encode(EventType::Added, obj, None);
                    if !self.send_event(frame).await {
                        return End::Clean;
                    }
                }
                if self.bookmarks && sie == Some(true) {
                    self.last_sent = page.rev;
                    let b = self.bookmark(page.rev, true);
                    if !self.send(b).await {
                        return End::Clean;
                    }
                }
                page.rev
            }
            // W7/W8: start now, no initial events.
            (Some(false), None | Some(0)) => store.revision(),
            // W5/W9: exactly after N (N in the future simply waits).
            (_, Some(n)) => {
                // The expired-watch fault answers as a compaction at the current revision would.
                let expired = n > 0 && self.state.faults.take_expired_watch();
                let check = if expired {
                    Err(store.revision())
                } else {
                    store.check_watch_start(&self.rt, n)
                };
                if let Err(oldest) = check {
                    let s = Status::expired(format!("too old resource version: {n} ({oldest})"));
                    self.send_error(&s).await;
                    return End::Clean;
                }
                n
            }
            // Not reachable after watch-list defaulting; treat as "from now".
            (None, None) => store.revision(),
        };
        // The client knows everything up to its start point: no bookmark may go below it. As
        // kube's cacher, every bookmark past the start goes out, even one equal to the last
        // event sent (observed-1.36.md): the periodic ones and the one before the deadline.
        self.last_sent = self.last_sent.max(cursor);
        let start = cursor;
        let interval = self.state.config.bookmark_interval;
        let mut next_bookmark = self.next_bookmark(interval);
        let mut bookmark_due = false;
        loop {
            // Drain the log from the cursor.
            let caught_up = loop {
                let batch = match store.events_after(&self.rt, cursor, BATCH) {
                    Ok(b) => b,
                    // The log moved past this watcher: kube closes it silently.
                    Err(_) => return End::Clean,
                };
                for ev in &batch.events {
                    cursor = ev.rev;
                    if self.state.faults.is_lost(&ev.key, ev.rev) {
                        continue;
                    }
                    if let Some(frame) = self.event_frame(ev) {
                        self.last_sent = ev.rev;
                        if !self.send_event(frame).await {
                            return End::Clean;
                        }
                    }
                }
                if let Some(rev) = batch.caught_up_to {
                    break rev;
                }
            };
            // The bookmark carries the revision read just now, with every event up to it sent.
            if std::mem::take(&mut bookmark_due) && self.bookmarks && caught_up > start {
                self.last_sent = caught_up;
                let b = self.bookmark(caught_up, false);
                if !self.send(b).await {
                    return End::Clean;
                }
            }
            let wake_at = match next_bookmark {
                Some(b) => b.min(self.deadline),
                None => self.deadline,
            };
            tokio::select! {
                r = changed.changed() => {
                    if r.is_err() {
                        return End::Clean;
                    }
                    let lag = self.state.faults.watch_lag();
                    if !lag.is_zero() {
                        tokio::time::sleep(lag).await;
                    }
                    changed.borrow_and_update();
                }
                _ = sleep_until(wake_at) => {
                    if Instant::now() >= self.deadline {
                        return End::Clean;
                    }
                    bookmark_due = true;
                    next_bookmark = self.next_bookmark(interval);
                }
            }
        }
    }

    /// kube: next bookmark at min(now + interval, deadline − 2 s); none once that has passed.
    fn next_bookmark(&self, interval: Duration) -> Option<Instant> {
        let now = Instant::now();
        // `--bookmark-interval-secs` is the operator's number: one past an `Instant`'s range
        // means "never" rather than a panic.
        let periodic = now.checked_add(interval).unwrap_or(self.deadline);
        let t = periodic.min(self.deadline.checked_sub(Duration::from_secs(2))?);
        (t > now).then_some(t)
    }

    /// The frame this watcher gets for a logged change, after selector move-in/move-out.
    fn event_frame(&mut self, ev: &Arc<Event>) -> Option<Bytes> {
        let now = self.filter.matches(&ev.obj);
        let before = ev.prev.as_ref().is_some_and(|p| self.filter.matches(p));
        let emitted = ev.ty.emitted(before, now)?;
        if self.repr == Repr::Json && !self.protobuf {
            return Some(ev.frame(&self.rt, emitted));
        }
        let obj = if emitted == EventType::Deleted && ev.ty == EventType::Modified {
            ev.prev
                .as_ref()
                .map(|p| Arc::new(p.restamped(&self.rt, ev.rev)))?
        } else {
            ev.obj.clone()
        };
        Some(self.encode(emitted, &obj, None))
    }

    /// Encodes one event for this watcher's representation.
    fn encode(&mut self, ty: EventType, obj: &StoredObject, value: Option<Value>) -> Bytes {
        if self.protobuf {
            return protobuf::event_frame(&self.rt, ty.as_str(), obj, self.repr)
                .unwrap_or_else(|s| protobuf::error_frame(&s));
        }
        match self.repr {
            Repr::Json => encode_frame(&self.rt, ty.as_str(), &obj.body),
            Repr::Table | Repr::Metadata => {
                let v = value.unwrap_or_else(|| obj.to_value(&self.rt));
                self.wrap(ty.as_str(), v)
            }
        }
    }

    /// The frame of an event whose object is `v` in this watcher's representation; only the
    /// first object of a Table watch carries the column definitions.
    fn wrap(&mut self, ty: &str, v: Value) -> Bytes {
        let object = self.printer.event_object(
            self.repr,
            &self.rt.group,
            &self.rt.kind,
            &v,
            self.include,
            !self.first_table,
            now_unix(),
        );
        if self.repr == Repr::Table {
            self.first_table = false;
        }
        table::event_frame(ty, &object)
    }

    /// A BOOKMARK: an empty object of the kind carrying only the resourceVersion (in a Table
    /// watch, a row embedding it as PartialObjectMetadata so the annotation survives).
    fn bookmark(&mut self, rv: u64, initial_end: bool) -> Bytes {
        if self.protobuf {
            return protobuf::bookmark_frame(&self.rt, rv, initial_end, self.repr);
        }
        let core = self.rt.builtin;
        let v = bookmark_object(&self.rt.kind, &self.rt.api_version(), core, rv, initial_end);
        table::event_frame("BOOKMARK", &table::bookmark_event_object(self.repr, &v, rv))
    }

    async fn send_error(&mut self, s: &Status) {
        let frame = if self.protobuf {
            protobuf::error_frame(s)
        } else {
            error_frame(s)
        };
        self.send(frame).await;
    }

    /// Sends an event frame, preceded by a malformed line if that fault is armed.
    async fn send_event(&mut self, frame: Bytes) -> bool {
        if self.state.faults.take_malformed() && !self.send(self.malformed()).await {
            return false;
        }
        if self.state.faults.take_undecodable() && !self.send(self.undecodable()).await {
            return false;
        }
        self.send(frame).await
    }

    /// The malformed event of that fault: a truncated JSON line, or in protobuf those bytes
    /// as a frame (no `WatchEvent` decodes from them).
    fn malformed(&self) -> Bytes {
        if self.protobuf {
            Bytes::from(kube_wire::proto::envelope::length_prefixed(MALFORMED_EVENT))
        } else {
            Bytes::from_static(MALFORMED_EVENT)
        }
    }

    /// The event of the undecodable-object fault ([`Faults::send_undecodable_object`]).
    fn undecodable(&self) -> Bytes {
        let meta =
            r#"{"metadata":{"name":"undecodable","namespace":"default","resourceVersion":"1"}}"#;
        if self.protobuf
            && let Some(msg) = protobuf::message(&self.rt)
            && let Ok(mut object) = kube_wire::proto::json_to_proto(msg, meta.as_bytes())
        {
            // A pod's spec { containers { name: "c", resources: <a field that runs past its
            // end> } }: deep inside, where nothing that files the object reads.
            let container = [0x0a, 0x01, b'c', 0x42, 0x02, 0x0a, 0x7f];
            let containers = [&[0x12, container.len() as u8][..], &container].concat();
            object.extend_from_slice(&[0x12, containers.len() as u8]);
            object.extend_from_slice(&containers);
            let wrapped =
                kube_wire::proto::envelope::wrap(&self.rt.api_version(), &self.rt.kind, &object);
            return Bytes::from(kube_wire::proto::envelope::watch_frame(
                "MODIFIED", &wrapped,
            ));
        }
        let line = format!(
            r#"{{"type":"MODIFIED","object":{{"kind":"{}","apiVersion":"{}","metadata":{{"name":"undecodable","namespace":"default","resourceVersion":"x1"}}}}}}"#,
            self.rt.kind,
            self.rt.api_version()
        );
        Bytes::from(line + "\n")
    }

    async fn send(&mut self, b: Bytes) -> bool {
        self.state.stats.sent(Some(self.rt.index), b.len());
        self.tx.send(Ok(Frame::data(b))).await.is_ok()
    }
}

/// `now + timeout`, or a deadline centuries away if that does not fit an `Instant`.
fn far_deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}
