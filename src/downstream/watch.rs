//! WATCH from the cache, as kube-apiserver 1.34+ serves it (spec §1.6, §2): initial events and
//! the `k8s.io/initial-events-end` bookmark for watch-lists, replay from a resourceVersion inside
//! the window, 410 as an ERROR event, periodic bookmarks, one before the deadline and one right
//! after a bridged relist (`crate::hub::WatcherShared::want_bookmark`),
//! `timeoutSeconds` (else a random 30–60 min), move-in/move-out.
//!
//! The 200 and its headers go out before any event. Each watcher is either *live* (the hub's
//! dispatcher pushes matching events into its bounded queue) or *catching up* (it reads the
//! shared log from its cursor after falling behind), through its [`Subscription`]. Frames are
//! shared `Bytes`.
//!
//! A watch has no task of its own: [`start`] returns a [`WatchStream`] and the watch's logic
//! runs inside the transport's task whenever that polls it for the next frame (see
//! [`super::frames`]). A delivery thus wakes one task, the connection's, and an idle watch costs
//! no task and no channel beside the hub's queue.
//!
//! Owns one watch's logic: its start, its frames, bookmarks and deadline, and handing frames to
//! the transport. It must not write to the cache nor move the watcher between live and catching
//! up itself (the cache and the hub do, under the cache's lock; it only asks, through
//! [`ResourceCache::try_go_live`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::Response;
use rand::Rng;
use tokio::time::{Instant, sleep_until};

use super::form::Form;
use super::frames::{Yielder, generate};
use super::list::BLOCK_TIMEOUT;
use super::{protobuf, table};
use crate::app::App;
use crate::cache::{CacheEvent, ResourceCache, Snapshot};
use crate::hub::Subscription;
use crate::hub::watcher::{CUT_FOR_MEMORY, IN_BRIDGED_GAP, REPAIRED};
use crate::metrics::{ResourceMetrics, WatchOutcome, WatchTap};
use kube_wire::event::{EventType, FRAME_TAIL, error_frame};
use kube_wire::negotiate::Encoding;
use kube_wire::options::ListOptions;
use kube_wire::response::Body;
use kube_wire::selector::Filter;
use kube_wire::status::Status;
use kube_wire::table::TablePrinter;

/// Log events read per catch-up step.
const BATCH: usize = 256;

/// One watch event on its way to the transport: a whole frame, or (for initial events, sent
/// without copying) the constant head, the stored body and the constant tail.
#[derive(Debug, Clone)]
pub enum Out {
    /// A complete frame.
    Frame(Bytes),
    /// The three parts of one frame.
    Parts([Bytes; 3]),
}

impl Out {
    /// The frame's bytes, in order.
    pub fn parts(&self) -> &[Bytes] {
        match self {
            Out::Frame(b) => std::slice::from_ref(b),
            Out::Parts(p) => p,
        }
    }

    /// The frame's length in bytes.
    pub fn len(&self) -> usize {
        self.parts().iter().map(Bytes::len).sum()
    }

    /// Whether the frame has no bytes (never, for a watch event).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The frames of one watch, produced on demand by the watch's logic running in the polling
/// task (see [`super::frames`]).
pub type WatchStream = super::frames::Generated<Out>;

/// Starts a watch on `cache` and returns the stream of its events, in `form` (plain JSON, a
/// Table per event, or PartialObjectMetadata). Validation already happened in the router. A
/// watch that sends initial events sends those of `initial`, the state a consistent start was
/// proven at, when the router resolved one (else the cache's current state). When `handover`
/// fires (the watch's HTTP/2 connection drew a GOAWAY), the watch ends after a bookmark, as at
/// a drain.
#[allow(clippy::too_many_arguments)]
pub fn start(
    proxy: &App,
    cache: Arc<ResourceCache>,
    opts: ListOptions,
    filter: Filter,
    transport: &'static str,
    form: Form,
    printer: TablePrinter,
    initial: Option<Result<Snapshot, Status>>,
    handover: Option<tokio_util::sync::CancellationToken>,
) -> Result<WatchStream, Status> {
    // A failed start answered with a Status is counted by the server (`Metrics::finish`).
    let rv = opts.cacher_rv()?;
    let metrics = proxy.metrics.for_info(&cache.info);
    let tap = metrics.watch_tap(transport);
    // kube's arithmetic (`ListOptions::watch_timeout`): a client-supplied number never
    // overflows the deadline.
    let timeout = opts.watch_timeout().unwrap_or_else(|| {
        let min = proxy.min_request_timeout;
        min + min.mul_f64(rand::rng().random::<f64>())
    });
    let cancel = proxy.watches_end.child_token();
    let sie = opts.send_initial_events;
    let bookmarks = opts.allow_watch_bookmarks;
    let deadline = far_deadline(timeout);
    let bookmark_interval = proxy.cache_config.bookmark_interval;
    Ok(generate(move |out| async move {
        let w = Watcher {
            cache,
            filter: Arc::new(filter),
            bookmarks,
            deadline,
            bookmark_interval,
            out,
            last_sent: 0,
            metrics,
            tap,
            start_failed: false,
            form,
            printer,
            headers_sent: !matches!(form, Form::Table { .. }),
            handover,
        };
        // The end of a shutdown's drain ends the watch if its paced end has not (see
        // `App::shutdown_within`): the stream ends cleanly.
        // A child token: every poll of a token takes its node's lock, and one token shared by
        // thousands of watchers would make that lock contended on every delivery.
        tokio::select! {
            biased;
            _ = w.run(rv, sie, initial) => {}
            _ = cancel.cancelled() => {}
        }
    }))
}

/// The chunked HTTP answer carrying a watch's events (200 and headers go out at once), with
/// kube's `Content-Type`: `application/json`, or for `protobuf`
/// `application/vnd.kubernetes.protobuf;stream=watch`. The hyper transports (HTTP/2, and
/// HTTP/1.1 connections that began with another request) poll `stream` from the connection's
/// task; the HTTP/1.1 watch path writes it itself (`super::h1`).
pub fn chunked_response(stream: WatchStream, protobuf: bool) -> Response<Body> {
    let mut r = watch_head(protobuf);
    *r.body_mut() = http_body_util::BodyExt::boxed(WatchBody::new(stream));
    r
}

/// The head of a watch's chunked answer (its body empty).
pub fn watch_head(protobuf: bool) -> Response<Body> {
    let mut r = kube_wire::response::stream_response(futures_util::stream::empty::<
        Result<hyper::body::Frame<Bytes>, std::io::Error>,
    >());
    if protobuf {
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(PROTOBUF_WATCH),
        );
    }
    r
}

/// A watch's frames as an HTTP body. The frames ready at one poll go out as one data chunk of
/// up to [`CHUNK`] bytes: HTTP/2 costs a frame, a queue entry and (over TLS) a record and a
/// write per data chunk, and a watch-list's initial events are thousands of small frames of
/// three parts each. A lone frame (a live event) and a frame of [`CHUNK`] or more go out as
/// they are, without a copy.
struct WatchBody {
    stream: WatchStream,
    /// The parts of a large [`Out::Parts`] not yet handed on.
    rest: [Option<Bytes>; 2],
    /// A frame taken from the stream that did not fit the chunk before it.
    held: Option<Out>,
    /// The stream has ended.
    ended: bool,
}

/// The most bytes of ready frames copied into one data chunk: one HTTP/2 frame at the default
/// `SETTINGS_MAX_FRAME_SIZE` and one TLS record.
const CHUNK: usize = 16 * 1024;

impl WatchBody {
    fn new(stream: WatchStream) -> Self {
        WatchBody {
            stream,
            rest: [None, None],
            held: None,
            ended: false,
        }
    }

    /// The next frame: held back last time, else the stream's if it has one ready.
    fn next_ready(&mut self, cx: &mut std::task::Context<'_>) -> Option<Out> {
        use std::task::Poll;
        if let Some(o) = self.held.take() {
            return Some(o);
        }
        if self.ended {
            return None;
        }
        match futures_util::Stream::poll_next(std::pin::Pin::new(&mut self.stream), cx) {
            Poll::Ready(Some(o)) => Some(o),
            Poll::Ready(None) => {
                self.ended = true;
                None
            }
            Poll::Pending => None,
        }
    }
}

impl http_body::Body for WatchBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        use std::task::Poll;
        let this = self.get_mut();
        let data = |b: Bytes| Poll::Ready(Some(Ok(http_body::Frame::data(b))));
        for r in &mut this.rest {
            if let Some(b) = r.take() {
                return data(b);
            }
        }
        // The first whole frame, kept uncopied until a second one comes.
        let mut lone: Option<Bytes> = None;
        let mut chunk = BytesMut::new();
        while let Some(out) = this.next_ready(cx) {
            let started = lone.is_some() || !chunk.is_empty();
            let have = chunk.len() + lone.as_ref().map_or(0, Bytes::len);
            let len = out.len();
            if started && have + len > CHUNK {
                this.held = Some(out);
                break;
            }
            let out = match out {
                Out::Frame(b) if !started => {
                    lone = Some(b);
                    continue;
                }
                Out::Parts([a, b, c]) if !started && len >= CHUNK => {
                    this.rest = [Some(b), Some(c)];
                    return data(a);
                }
                out => out,
            };
            if chunk.capacity() == 0 {
                // Once, at its full size: growing it copy by copy costs a reallocation each.
                chunk.reserve(CHUNK);
            }
            if let Some(b) = lone.take() {
                chunk.extend_from_slice(&b);
            }
            out.parts().iter().for_each(|x| chunk.extend_from_slice(x));
        }
        if let Some(b) = lone {
            return data(b);
        }
        if !chunk.is_empty() {
            return data(chunk.freeze());
        }
        if this.ended {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    }
}

/// The `Content-Type` of a protobuf watch.
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

struct Watcher {
    cache: Arc<ResourceCache>,
    filter: Arc<Filter>,
    bookmarks: bool,
    deadline: Instant,
    bookmark_interval: Duration,
    /// Where frames go: the transport polling the watch takes them.
    out: Yielder<Out>,
    /// Highest resourceVersion the client has been told about (events or bookmarks).
    last_sent: u64,
    metrics: Arc<ResourceMetrics>,
    /// Counts this watcher as active, and the events and bytes it hands to the connection.
    tap: WatchTap,
    /// `start` already counted a failed start (410, 504).
    start_failed: bool,
    /// The wire form of the events.
    form: Form,
    /// How its Tables are printed: chosen at the start, for the whole watch (kube serves a watch
    /// from its CRD's storage and table convertor as they were when it started).
    printer: TablePrinter,
    /// A Table watch sent its first event, the one with the column definitions (always true
    /// for the other forms).
    headers_sent: bool,
    /// Fires when the watch's HTTP/2 connection drew a GOAWAY (`super::ConnectionGoaway`).
    handover: Option<tokio_util::sync::CancellationToken>,
}

/// The watcher stops (client gone, closed by the hub, deadline).
struct Stop;

impl Watcher {
    async fn run(
        mut self,
        rv: Option<u64>,
        sie: Option<bool>,
        initial: Option<Result<Snapshot, Status>>,
    ) {
        // Boxed: the initial events' state is not kept, in the watch's own, for its whole life.
        let started = Box::pin(self.start(rv, sie, initial)).await;
        if !self.start_failed {
            self.metrics.watch_start(WatchOutcome::Ok);
        }
        let (cursor, sub) = match started {
            Ok(c) => c,
            Err(Stop) => return,
        };
        let sub = match sub {
            Some(s) => s,
            None => self.subscribe(cursor),
        };
        let _ = self.stream(sub, cursor).await;
    }

    /// Initial events / start point. Returns the cursor to continue from, and the subscription
    /// when it had to be made before the initial events.
    async fn start(
        &mut self,
        rv: Option<u64>,
        sie: Option<bool>,
        initial: Option<Result<Snapshot, Status>>,
    ) -> Result<(u64, Option<Subscription>), Stop> {
        let cache = self.cache.clone();
        match (sie, rv) {
            // A resourceVersion that parses to 0 without being the literal "0" ("00") is not
            // defaulted to a watch-list: kube's cacher serves it as the legacy RV=0 watch (the
            // state as ADDED events, no initial-events-end bookmark).
            (Some(true), _) | (None, Some(0)) => {
                // The state a consistent start was proven at (a later one may be older than
                // the upstream's at the request, and its resourceVersion may be the upstream's,
                // ahead of the cache's: see `reflector::freshness`), else the latest, once the
                // cache reached the requested resourceVersion.
                let snap = match initial {
                    Some(Ok(s)) => s,
                    Some(Err(s)) => {
                        self.start_failed = true;
                        self.metrics.watch_start(WatchOutcome::Error);
                        self.send(self.error_frame(&s)).await;
                        return Err(Stop);
                    }
                    None => {
                        let target = rv.unwrap_or(0);
                        if target > cache.rv() && !cache.wait_rv(target, BLOCK_TIMEOUT).await {
                            let s = Status::too_large_resource_version(target, cache.rv());
                            self.start_failed = true;
                            self.metrics.watch_start(WatchOutcome::Error);
                            self.send(self.error_frame(&s)).await;
                            return Err(Stop);
                        }
                        cache.snapshot()
                    }
                };
                // Registered (catching up from the snapshot's RV) before the initial events, so
                // a client that stops reading during them is closed like any slow watcher and
                // the snapshot it pins is released.
                let sub = self.subscribe(snap.rv);
                let info = &cache.info;
                let head = info.frame_head(EventType::Added).clone();
                let ns = if info.namespaced {
                    self.filter.namespace.as_deref()
                } else {
                    None
                };
                // Age cells of a Table are printed against one clock reading per answer.
                let now = table::now_unix();
                for obj in snap.select(info, ns, &self.filter) {
                    let r = &obj.rec;
                    if !self.filter.matches(&r.namespace, &r.labels, |f| r.field(f)) {
                        continue;
                    }
                    if self.form.encoding() == Encoding::Protobuf {
                        match protobuf::initial_frame(info, obj, &self.form) {
                            Ok(parts) => self.send_parts(Out::Parts(parts)).await,
                            Err(s) => self.send(protobuf::error_frame(&s)).await,
                        }
                        continue;
                    }
                    if self.form != Form::Json {
                        let f = table::event_frame(
                            info,
                            &self.printer,
                            EventType::Added,
                            obj,
                            &self.form,
                            self.headers_sent,
                            now,
                        );
                        self.headers_sent = true;
                        self.send(f).await;
                        continue;
                    }
                    // No copy: the constant head, the stored body, the tail.
                    self.send_parts(Out::Parts([
                        head.clone(),
                        obj.json().slice(1..),
                        Bytes::from_static(FRAME_TAIL),
                    ]))
                    .await;
                }
                self.last_sent = snap.rv;
                if self.bookmarks && sie == Some(true) {
                    let b = self.bookmark(snap.rv, true);
                    self.send(b).await;
                }
                Ok((snap.rv, Some(sub)))
            }
            (Some(false), None | Some(0)) | (None, None) => {
                self.last_sent = cache.rv();
                Ok((self.last_sent, None))
            }
            (_, Some(n)) => {
                if let Err(oldest) = cache.check_watch_start(n) {
                    let s = Status::expired(format!("too old resource version: {n} ({oldest})"));
                    self.start_failed = true;
                    self.metrics.watch_start(WatchOutcome::Gone);
                    self.send(self.error_frame(&s)).await;
                    return Err(Stop);
                }
                self.last_sent = n;
                Ok((n, None))
            }
        }
    }

    /// Registers the watcher in the hub, catching up from `cursor`. Should the transport stop
    /// polling this watch (its client stopped reading), closing the watcher drops it after a
    /// grace (`WatcherShared::on_abandoned`), with its queue and any snapshot it holds.
    fn subscribe(&self, cursor: u64) -> Subscription {
        let sub = self.cache.subscribe(self.filter.clone(), cursor);
        let d = self.out.dropper();
        sub.shared().on_abandoned(move || d.drop_producer());
        sub
    }

    /// An ERROR event in this watch's encoding.
    fn error_frame(&self, s: &Status) -> Bytes {
        match self.form.encoding() {
            Encoding::Protobuf => protobuf::error_frame(s),
            _ => error_frame(s),
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        table::bookmark_frame(&self.cache.info, rv, initial_end, &self.form)
    }

    /// The frame of a logged change for this watcher, in its form: shared with every watcher
    /// of the same form (encoded once per event), except a Table watch's first event, which
    /// alone carries the column definitions, and the Tables of a custom resource, whose columns
    /// are this watch's own (they may have changed since other watches started).
    fn frame_of(&mut self, ev: &CacheEvent, emitted: EventType) -> Bytes {
        let info = &self.cache.info;
        if self.form.encoding() == Encoding::Protobuf {
            let form = self.form;
            return ev.frame_in(info, emitted, &form, |obj| {
                protobuf::event_frame(info, emitted, obj, &form)
                    .unwrap_or_else(|s| protobuf::error_frame(&s))
            });
        }
        if !self.headers_sent || self.printer.is_crd() {
            let no_headers = self.headers_sent;
            self.headers_sent = true;
            let obj = ev.emitted_object(emitted);
            return table::event_frame(
                info,
                &self.printer,
                emitted,
                &obj,
                &self.form,
                no_headers,
                table::now_unix(),
            );
        }
        let (form, printer) = (self.form, &self.printer);
        ev.frame_in(info, emitted, &form, |obj| {
            table::event_frame(info, printer, emitted, obj, &form, true, table::now_unix())
        })
    }

    /// kube: next bookmark at min(now + interval, deadline − 2 s); none once that has passed.
    fn next_bookmark(&self) -> Option<Instant> {
        let now = Instant::now();
        let t =
            (now + self.bookmark_interval).min(self.deadline.checked_sub(Duration::from_secs(2))?);
        (t > now).then_some(t)
    }

    async fn stream(&mut self, mut sub: Subscription, mut cursor: u64) -> Result<(), Stop> {
        // kube's cacher sends a watcher every bookmark whose resourceVersion is past the
        // watch's start, even one equal to the last event already sent (observed-1.36.md): the
        // periodic ones and the one just before the deadline.
        let start_rv = cursor;
        let mut next_bookmark = self.next_bookmark();
        // The timer and the two "stop" futures live across iterations: building them anew for
        // every event would register and remove a timer and take the token's lock per delivery.
        let sleep = sleep_until(self.deadline);
        tokio::pin!(sleep);
        let cancelled = sub.shared().closed_owned();
        tokio::pin!(cancelled);
        let bookmark_asks = sub.shared().bookmark_asks();
        let handover = self.handover.take();
        let handover = async move {
            match handover {
                Some(t) => t.cancelled_owned().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(handover);
        let mut handed_over = false;
        loop {
            if !sub.shared().is_live() && sub.queue_is_empty() {
                if sub.shared().is_closed() {
                    self.closed(&sub);
                    return Err(Stop);
                }
                // Catch up from the shared log.
                let batch = match self.cache.events_after(cursor, BATCH) {
                    Ok(b) => b,
                    Err(_) => {
                        // A slow watcher, as when the reaper closes it.
                        self.cache.close_fell_behind(&sub);
                        self.closed(&sub);
                        return Err(Stop);
                    }
                };
                for ev in &batch.events {
                    cursor = cursor.max(ev.rv);
                    if let Some(emitted) = ev.emitted_for(&self.filter) {
                        let f = self.frame_of(ev, emitted);
                        self.send(f).await;
                        self.last_sent = self.last_sent.max(ev.rv);
                    }
                }
                sub.shared().set_cursor(cursor);
                if batch.at_head {
                    self.cache.try_go_live(&sub, cursor);
                }
                if Instant::now() >= self.deadline {
                    return Ok(());
                }
                continue;
            }
            let wake = match next_bookmark {
                Some(b) => b.min(self.deadline),
                None => self.deadline,
            };
            if sleep.deadline() != wake {
                sleep.as_mut().reset(wake);
            }
            tokio::select! {
                // Events first: when one is waiting, the other branches need not be polled.
                biased;
                // Whatever else is queued comes next without waiting: the transport takes
                // frames as long as they come and writes them together.
                d = sub.recv() => {
                    let Some((ev, emitted)) = d else {
                        // Closed (by the hub), with nothing left queued.
                        self.closed(&sub);
                        return Err(Stop);
                    };
                    if ev.rv > cursor {
                        cursor = ev.rv;
                        let f = self.frame_of(&ev, emitted);
                        self.send(f).await;
                        self.last_sent = self.last_sent.max(ev.rv);
                    }
                    sub.shared().set_cursor(cursor);
                }
                _ = &mut sleep => {
                    if Instant::now() >= self.deadline {
                        return Ok(());
                    }
                    if self.bookmarks
                        && let Some(rv) = self.cache.bookmark_rv(&sub, || sub.queue_is_empty())
                        && rv > start_rv
                    {
                        self.last_sent = rv;
                        let b = self.bookmark(rv, false);
                        self.send(b).await;
                    }
                    next_bookmark = self.next_bookmark();
                }
                // A bridged relist moved the cache past this watcher's last event (see
                // `WatcherShared::want_bookmark`): the bookmark goes now, once what the relist
                // queued is sent (events come first in this select). Or a shutdown's drain asked
                // the watch to end (`WatcherShared::end_after_bookmark`).
                _ = bookmark_asks.notified() => {
                    if sub.shared().is_ending() {
                        let Some(rv) = self.cache.bookmark_rv(&sub, || sub.queue_is_empty()) else {
                            // Not caught up yet: what is queued (or the log) goes first, then
                            // this branch again.
                            sub.shared().want_bookmark();
                            continue;
                        };
                        // The resourceVersion the client re-watches from elsewhere: the
                        // cache's, though no event of this watcher's is there (kube's bookmarks
                        // say the same), and sent even when it is the last event's, so that
                        // every drained watch ends the same way; none for a client that did not
                        // ask for bookmarks, which resumes from its last event.
                        if self.bookmarks && rv >= self.last_sent {
                            self.last_sent = rv;
                            let b = self.bookmark(rv, false);
                            self.send(b).await;
                        }
                        let counters = &self.cache.counters;
                        let count = if handed_over {
                            &counters.watches_handed_over
                        } else {
                            &counters.watches_drained
                        };
                        count.fetch_add(1, Ordering::Relaxed);
                        return Ok(());
                    }
                    if self.bookmarks
                        && let Some(rv) = self.cache.bookmark_rv(&sub, || sub.queue_is_empty())
                        && rv > start_rv.max(self.last_sent)
                    {
                        self.last_sent = rv;
                        let b = self.bookmark(rv, false);
                        self.send(b).await;
                    }
                }
                _ = &mut cancelled => {
                    self.closed(&sub);
                    return Err(Stop);
                }
                // The connection drew a GOAWAY: end as at a drain (the branch above).
                _ = &mut handover, if !handed_over => {
                    handed_over = true;
                    sub.shared().end_after_bookmark();
                }
            }
        }
    }

    /// The hub closed the watcher. One cut off under memory pressure, one that started inside
    /// a bridged relist's gap, or one a repair changed an object of silently, is also told, when
    /// its queue has room, what its re-watch would hear: kube's 410 for its resourceVersion,
    /// which the log cannot serve (informers relist on it). One a repair closed is told so in
    /// any case: its client holds a state the log cannot lead from, and must relist.
    fn closed(&self, sub: &Subscription) {
        let reason = sub.shared().reason().unwrap_or("closed");
        let cursor = sub.shared().cursor();
        tracing::info!(resource = %self.cache.info.group_resource(), reason, cursor, "watcher closed");
        let oldest = match self.cache.check_watch_start(self.last_sent) {
            Err(oldest) if reason == CUT_FOR_MEMORY || reason == IN_BRIDGED_GAP => oldest,
            Err(oldest) if reason == REPAIRED => oldest,
            Ok(()) if reason == REPAIRED => self.cache.rv(),
            _ => return,
        };
        let s = Status::expired(format!(
            "too old resource version: {} ({oldest})",
            self.last_sent
        ));
        self.out.offer(Out::Frame(self.error_frame(&s)));
    }

    /// Hands one frame to the transport, once it has taken the previous one, and counts it.
    /// A client that stops reading stops its transport polling this watch: the hub then finds
    /// its queue full and lets it fall behind, and closes it when the log moves past it (the
    /// transport's own write bounds see to the connection).
    async fn send(&self, b: Bytes) {
        let (head, len) = frame_head_of(&b);
        self.out.send(Out::Frame(b)).await;
        self.tap.event(&head.0[..head.1], len);
    }

    /// Hands on a frame in parts (its first part holds the start the tap reads).
    async fn send_parts(&self, out: Out) {
        let (head, _) = frame_head_of(&out.parts()[0]);
        let len = out.len();
        self.out.send(out).await;
        self.tap.event(&head.0[..head.1], len);
    }
}

/// The start of a frame (enough for its `{"type":"…"`), copied so that counting it touches no
/// shared reference count; and the frame's length.
fn frame_head_of(b: &Bytes) -> (([u8; 24], usize), usize) {
    let mut head = [0u8; 24];
    let k = b.len().min(head.len());
    head[..k].copy_from_slice(&b[..k]);
    ((head, k), b.len())
}

/// `now + timeout`, or a deadline centuries away if that does not fit an `Instant`.
fn far_deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn chunked_body_carries_frames_and_parts_in_order() {
        let f = |s: &'static str| Bytes::from_static(s.as_bytes());
        let stream = generate(move |y| async move {
            y.send(Out::Frame(f("{\"a\":1}\n"))).await;
            y.send(Out::Parts([f("{\"d\""), f(":4"), f("}\n")])).await;
            y.send(Out::Frame(f("{\"b\":2}\n"))).await;
        });
        let frames = data_chunks(chunked_response(stream, false).into_body()).await;
        // All three were ready at once: one chunk.
        let sizes: Vec<usize> = frames.iter().map(Bytes::len).collect();
        assert_eq!(sizes, [24]);
        let all: Vec<u8> = frames.concat();
        assert_eq!(all, b"{\"a\":1}\n{\"d\":4}\n{\"b\":2}\n");
        // An empty frame first loses nothing after it.
        let stream = generate(move |y| async move {
            y.send(Out::Frame(Bytes::new())).await;
            y.send(Out::Parts([f("{\"d\""), f(":4"), f("}\n")])).await;
        });
        let frames = data_chunks(chunked_response(stream, false).into_body()).await;
        assert_eq!(frames.concat(), b"{\"d\":4}\n");
    }

    /// Every data chunk of `body`, in order.
    async fn data_chunks(mut body: Body) -> Vec<Bytes> {
        let mut chunks = Vec::new();
        while let Some(fr) = body.frame().await {
            chunks.push(fr.unwrap().into_data().unwrap());
        }
        chunks
    }

    #[tokio::test]
    async fn ready_frames_share_chunks_of_at_most_chunk_bytes_and_large_ones_are_not_copied() {
        let small: Vec<Bytes> = (0..100u8).map(|i| Bytes::from(vec![i; 1000])).collect();
        let big = Bytes::from(vec![7u8; CHUNK + 1]);
        let (s, b) = (small.clone(), big.clone());
        let stream = generate(move |y| async move {
            for x in s {
                y.send(Out::Parts([
                    Bytes::from_static(b"<"),
                    x,
                    Bytes::from_static(b">"),
                ]))
                .await;
            }
            y.send(Out::Parts([
                Bytes::from_static(b"<"),
                b,
                Bytes::from_static(b">"),
            ]))
            .await;
        });
        let chunks = data_chunks(chunked_response(stream, true).into_body()).await;
        let mut want = Vec::new();
        for x in &small {
            want.extend_from_slice(b"<");
            want.extend_from_slice(x);
            want.extend_from_slice(b">");
        }
        let n_small = chunks.len() - 3;
        assert!(
            n_small < 10,
            "100 ready frames of 1 KB took {n_small} chunks"
        );
        assert!(chunks[..n_small].iter().all(|c| c.len() <= CHUNK));
        assert_eq!(chunks[..n_small].concat(), want);
        // The large frame's parts as they are: its body is the stored bytes, not a copy.
        assert_eq!(chunks[n_small + 1].as_ptr(), big.as_ptr());
        assert_eq!(chunks[n_small..].concat().len(), CHUNK + 3);
    }

    #[tokio::test]
    async fn a_lone_event_goes_out_without_a_copy() {
        let ev = Bytes::from(vec![1u8; 300]);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let e = ev.clone();
        let stream = generate(move |y| async move {
            y.send(Out::Frame(e.clone())).await;
            let _ = rx.await;
            y.send(Out::Frame(e)).await;
        });
        let mut body = chunked_response(stream, true).into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(
            first.as_ptr(),
            ev.as_ptr(),
            "a frame alone is the shared frame"
        );
        tx.send(()).unwrap();
        let rest = data_chunks(body).await;
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].as_ptr(), ev.as_ptr());
    }
}
