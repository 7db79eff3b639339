//! One soak watcher: an informer against watchmux. It syncs (a consistent LIST, or a
//! watch-list), watches from the resourceVersion it has, resumes from its last one whenever a
//! stream ends (cut off, dropped, timed out, or on purpose), and syncs again on 410 — feeding
//! everything it reads to its [`Tracker`] and counting how each stream ended.
//!
//! It reads as its [`WatcherPlan`] says: at full speed, slowly, or not at all for long stretches
//! (until the soak calms down: [`Control::calm`]). It owns its connections and retries; it
//! judges nothing (the tracker and the soak's final comparison do).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::checker::Tracker;
use super::events::{self, Decoded, ObjEvent, StatusInfo};
use super::plan::{Reader, WatcherPlan};
use super::stream::{self, Dial, End, EventStream, Next, Opened};
use crate::client::{self, Encoding};

/// What a watcher counts (besides its tracker's violations).
#[derive(Debug, Default, Clone)]
pub struct Counts {
    /// Object events by type.
    pub events: BTreeMap<ObjEvent, u64>,
    /// BOOKMARK events.
    pub bookmarks: u64,
    /// Syncs (LISTs or watch-lists that started), the first included.
    pub syncs: u64,
    /// Syncs after a 410.
    pub relists: u64,
    /// Watches opened from a resourceVersion the watcher had (after any stream end).
    pub resumes: u64,
    /// Streams the watcher ended itself to resume.
    pub planned_disconnects: u64,
    /// How streams ended (`clean end (early)`, `ERROR 410 Expired`, …).
    pub ends: BTreeMap<String, u64>,
    /// Requests answered with something else than a stream or a list (`429`, `connect`, …).
    pub refusals: BTreeMap<String, u64>,
    /// Bytes of the events read (JSON lines or protobuf messages).
    pub bytes: u64,
    /// The simulator's malformed-event line, read as is: a watch watchmux passed through to
    /// the simulator (a watch-list while its cache could not be proven fresh) relays the
    /// upstream's bytes, so the fault reaches the client as it would without watchmux.
    pub relayed_malformed: u64,
    /// The stalls that could be judged: the bytes the watcher read when it read again until its
    /// stream ended (watchmux had cut it off: `true`) or until it caught up with what the other
    /// watchers had read (`false`). Stalls whose stream ended at its `timeoutSeconds` or left
    /// otherwise are not judged.
    pub stalls: Vec<(u64, bool)>,
}

/// One watcher's state, shared with the soak (which compares its view at the end).
pub struct WatcherState {
    /// Its plan.
    pub plan: WatcherPlan,
    /// Its view and checks, and its counts (one lock: taken once per event, uncontended).
    pub inner: Mutex<(Tracker, Counts)>,
}

impl WatcherState {
    /// A watcher that has not started.
    pub fn new(plan: WatcherPlan) -> WatcherState {
        WatcherState {
            plan,
            inner: Mutex::new((Tracker::default(), Counts::default())),
        }
    }
}

/// What every watcher shares: where watchmux is and the soak's phases.
pub struct Control {
    /// watchmux's address.
    pub addr: SocketAddr,
    /// The soak's start (plans' offsets count from it).
    pub t0: Instant,
    /// No more stalls, pauses or planned disconnects: the soak is settling.
    pub calm: CancellationToken,
    /// Close everything and return.
    pub stop: CancellationToken,
    /// Bounds connections being opened at once (thousands of watchers would overflow a listen
    /// backlog).
    pub gate: Arc<Semaphore>,
    /// The highest resourceVersion any watcher has read: how far watchmux has delivered.
    pub head: AtomicU64,
    /// Events and their bytes read by every watcher (a stalled watcher that read little of its
    /// own estimates its backlog at this average).
    pub read: (AtomicU64, AtomicU64),
}

impl Control {
    /// A new soak's control, starting now.
    pub fn new(addr: SocketAddr, gate: usize) -> Control {
        Control {
            addr,
            t0: Instant::now(),
            calm: CancellationToken::new(),
            stop: CancellationToken::new(),
            gate: Arc::new(Semaphore::new(gate)),
            head: AtomicU64::new(0),
            read: (AtomicU64::new(0), AtomicU64::new(0)),
        }
    }
}

/// Why opening a watch failed.
enum Refusal {
    /// 410: sync again.
    Gone,
    /// Anything else: retry after this many seconds (the backoff when `None`).
    Retry(Option<u64>),
}

/// Why a stream was left.
enum Left {
    Shutdown,
    /// An ERROR event.
    Error(StatusInfo),
    Planned,
    Ended(End),
}

/// Socket receive buffer of stalled readers: small, so that what they do not read piles up in
/// watchmux (which must cut them off), not in the kernel.
const STALLED_RECV_BUFFER: u32 = 16 * 1024;

struct Run<'a> {
    w: &'a WatcherState,
    ctl: &'a Control,
    dial: Dial,
    rng: StdRng,
    backoff: Duration,
    next_disconnect: Option<Instant>,
    /// After a stall: the bytes read since, and the resourceVersion others had read when it
    /// ended (reaching it is catching up), until the stream ends or it catches up.
    after_stall: Option<(u64, u64)>,
    /// When the stream being read opened.
    opened: Instant,
}

/// Runs `w` until [`Control::stop`].
pub async fn run(w: Arc<WatcherState>, ctl: Arc<Control>) {
    let p = &w.plan;
    tokio::select! {
        _ = ctl.stop.cancelled() => return,
        _ = sleep_until(ctl.t0 + p.start) => {}
    }
    let (recv_buffer, read_limit) = match &p.reader {
        Reader::Stalled { .. } => (Some(STALLED_RECV_BUFFER), 64 * 1024),
        Reader::Slow { read_limit, .. } => (None, *read_limit),
        Reader::Normal => (None, 64 * 1024),
    };
    let mut r = Run {
        w: &w,
        ctl: &ctl,
        dial: Dial {
            addr: ctl.addr,
            recv_buffer,
            read_limit,
        },
        rng: StdRng::seed_from_u64(p.seed),
        backoff: Duration::from_millis(100),
        next_disconnect: None,
        after_stall: None,
        opened: Instant::now(),
    };
    r.schedule_disconnect();
    r.informer().await;
}

impl Run<'_> {
    fn counts(&self, f: impl FnOnce(&mut Counts)) {
        f(&mut self.w.inner.lock().1);
    }

    fn schedule_disconnect(&mut self) {
        self.next_disconnect = self
            .w
            .plan
            .resume_every
            .map(|(lo, hi)| Instant::now() + lo + (hi - lo).mul_f64(self.rng.random::<f64>()));
    }

    /// Sleeps (unless stopped): `retry_after` seconds, else the backoff, which doubles up to
    /// 5 s with jitter. Returns false when stopped.
    async fn wait(&mut self, retry_after: Option<u64>) -> bool {
        let d = match retry_after {
            Some(s) => Duration::from_secs(s.min(10)),
            None => {
                let d = self.backoff.mul_f64(self.rng.random_range(0.5..1.5));
                self.backoff = (self.backoff * 2).min(Duration::from_secs(5));
                d
            }
        };
        tokio::select! {
            _ = self.ctl.stop.cancelled() => false,
            _ = sleep(d) => true,
        }
    }

    fn refused(&self, what: String) {
        self.counts(|c| *c.refusals.entry(what).or_default() += 1);
    }

    /// The informer loop: sync, then watch and resume until a 410 asks for a new sync.
    async fn informer(&mut self) {
        let w = self.w;
        let p = &w.plan;
        'sync: loop {
            if self.ctl.stop.is_cancelled() {
                return;
            }
            let mut first = None;
            if p.watch_list {
                let url = p.selector.url(&format!(
                    "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds={}",
                    p.timeout_secs
                ));
                match self.open(&url).await {
                    Ok(s) => {
                        self.w.inner.lock().0.watch_list_started();
                        self.counts(|c| c.syncs += 1);
                        first = Some(s);
                    }
                    Err(refusal) => {
                        let retry_after = match refusal {
                            Refusal::Gone => None,
                            Refusal::Retry(r) => r,
                        };
                        if !self.wait(retry_after).await {
                            return;
                        }
                        continue 'sync;
                    }
                }
            } else if !self.list().await {
                if self.ctl.stop.is_cancelled() {
                    return;
                }
                continue 'sync;
            }
            loop {
                let stream = match first.take() {
                    Some(s) => s,
                    None => {
                        let Some(rv) = self.w.inner.lock().0.resume_point() else {
                            continue 'sync;
                        };
                        let url = p.selector.url(&format!(
                            "watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds={}",
                            p.timeout_secs
                        ));
                        match self.open(&url).await {
                            Ok(s) => {
                                self.counts(|c| c.resumes += 1);
                                s
                            }
                            Err(Refusal::Gone) => {
                                self.counts(|c| c.relists += 1);
                                continue 'sync;
                            }
                            Err(Refusal::Retry(retry_after)) => {
                                if !self.wait(retry_after).await {
                                    return;
                                }
                                continue;
                            }
                        }
                    }
                };
                self.opened = Instant::now();
                let left = self.consume(stream).await;
                let lived = self.opened.elapsed();
                let at_timeout =
                    lived + Duration::from_secs(1) >= Duration::from_secs(p.timeout_secs);
                let end = match &left {
                    Left::Shutdown => return,
                    Left::Planned => {
                        self.counts(|c| c.planned_disconnects += 1);
                        continue;
                    }
                    Left::Error(s) => format!("ERROR {} {}", s.code, s.reason),
                    Left::Ended(End::Aborted(_)) => "connection aborted".to_string(),
                    Left::Ended(e) => {
                        let how = match e {
                            End::Closed { code } => format!("websocket close {code}"),
                            _ => "clean end".to_string(),
                        };
                        if at_timeout {
                            format!("{how} at timeoutSeconds")
                        } else {
                            format!("{how} before timeoutSeconds")
                        }
                    }
                };
                self.counts(|c| *c.ends.entry(end).or_default() += 1);
                match left {
                    Left::Error(s) if s.code == 410 => {
                        self.counts(|c| c.relists += 1);
                        continue 'sync;
                    }
                    Left::Error(_) if !self.wait(None).await => return,
                    _ => {}
                }
            }
        }
    }

    /// Opens a watch.
    async fn open(&mut self, url: &str) -> Result<EventStream, Refusal> {
        let w = self.w;
        let p = &w.plan;
        let opened = {
            let _permit = self.ctl.gate.acquire().await;
            tokio::select! {
                _ = self.ctl.stop.cancelled() => return Err(Refusal::Retry(None)),
                r = stream::open(&self.dial, p.transport, p.encoding, url) => r,
            }
        };
        match opened {
            Ok(Opened::Stream(s)) => Ok(s),
            Ok(Opened::Refused {
                status,
                retry_after,
                info,
            }) => {
                self.refused(format!("watch {status} {}", info.reason));
                if status == 410 || info.code == 410 {
                    return Err(Refusal::Gone);
                }
                Err(Refusal::Retry(retry_after))
            }
            Err(e) => {
                self.refused(format!("watch: {}", e.kind()));
                Err(Refusal::Retry(None))
            }
        }
    }

    /// A consistent LIST into the tracker; false (after waiting) when it failed.
    async fn list(&mut self) -> bool {
        let w = self.w;
        let p = &w.plan;
        let url = p.selector.url("");
        let got = {
            let _permit = self.ctl.gate.acquire().await;
            tokio::select! {
                _ = self.ctl.stop.cancelled() => return false,
                r = client::get_body_as(self.dial.addr, &url, p.encoding) => r,
            }
        };
        let retry_after = match got {
            Ok((head, body)) if head.status == 200 => {
                let decoded = if Encoding::Protobuf.answered_by(head.content_type.as_deref()) {
                    events::protobuf_list(&body)
                } else {
                    events::json_list(&body)
                };
                match decoded {
                    Ok((rv, items)) => {
                        let mut g = self.w.inner.lock();
                        g.0.listed(rv, items);
                        g.1.syncs += 1;
                        return true;
                    }
                    Err(e) => {
                        self.refused(format!("list body: {e}"));
                        None
                    }
                }
            }
            Ok((head, _)) => {
                self.refused(format!("list {}", head.status));
                head.retry_after
            }
            Err(e) => {
                self.refused(format!("list: {}", e.kind()));
                None
            }
        };
        self.wait(retry_after).await;
        false
    }

    /// The end of the stall under way at `now`, if any (none once the soak calms down).
    fn stall_until(&self, now: Instant) -> Option<Instant> {
        let Reader::Stalled { stalls } = &self.w.plan.reader else {
            return None;
        };
        if self.ctl.calm.is_cancelled() {
            return None;
        }
        stalls.iter().find_map(|(at, len)| {
            let (from, to) = (self.ctl.t0 + *at, self.ctl.t0 + *at + *len);
            (from <= now && now < to).then_some(to)
        })
    }

    /// Reads `s` into the tracker until it ends, the watcher leaves it, or the soak stops.
    async fn consume(&mut self, mut s: EventStream) -> Left {
        self.after_stall = None;
        loop {
            if let Some(until) = self.stall_until(Instant::now()) {
                tokio::select! {
                    _ = self.ctl.stop.cancelled() => return Left::Shutdown,
                    _ = self.ctl.calm.cancelled() => {}
                    _ = sleep_until(until) => {}
                }
                self.stalled();
            }
            let disconnect = self
                .next_disconnect
                .filter(|_| !self.ctl.calm.is_cancelled());
            let next = tokio::select! {
                biased;
                _ = self.ctl.stop.cancelled() => return Left::Shutdown,
                _ = sleep_until(disconnect.unwrap_or_else(far_future)), if disconnect.is_some() => {
                    self.w.inner.lock().0.interrupted();
                    self.schedule_disconnect();
                    return Left::Planned;
                }
                n = s.next() => n,
            };
            let (data, protobuf) = match next {
                Next::Event { data, protobuf } => (data, protobuf),
                Next::End(end) => {
                    self.stall_ended();
                    self.w.inner.lock().0.interrupted();
                    return Left::Ended(end);
                }
            };
            if let Some((read, _)) = &mut self.after_stall {
                *read += data.len() as u64;
            }
            let decoded = if protobuf {
                events::protobuf_event(&data)
            } else {
                events::json_event(&data)
            };
            let rv = {
                let mut g = self.w.inner.lock();
                let (tracker, counts) = &mut *g;
                counts.bytes += data.len() as u64;
                match decoded {
                    Ok(Decoded::Object { ty, key, obj }) => {
                        *counts.events.entry(ty).or_default() += 1;
                        let rv = obj.rv;
                        tracker.event(ty, key, obj);
                        rv
                    }
                    Ok(Decoded::Bookmark { rv, initial_end }) => {
                        counts.bookmarks += 1;
                        tracker.bookmark(rv, initial_end);
                        rv
                    }
                    Ok(Decoded::Error(info)) => {
                        tracker.interrupted();
                        drop(g);
                        self.stall_ended();
                        return Left::Error(info);
                    }
                    Err(_) if is_simulators_malformed_line(&data) => {
                        counts.relayed_malformed += 1;
                        0
                    }
                    Err(why) => {
                        tracker.undecodable(why);
                        0
                    }
                }
            };
            self.ctl.head.fetch_max(rv, Ordering::Relaxed);
            self.ctl.read.0.fetch_add(1, Ordering::Relaxed);
            self.ctl
                .read
                .1
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            if let Some((read, target)) = self.after_stall
                && rv >= target
            {
                self.after_stall = None;
                self.counts(|c| c.stalls.push((read, false)));
            }
            self.backoff = Duration::from_millis(100);
            if let Reader::Slow { pause, .. } = &self.w.plan.reader
                && !self.ctl.calm.is_cancelled()
            {
                tokio::select! {
                    _ = self.ctl.stop.cancelled() => return Left::Shutdown,
                    _ = sleep(*pause) => {}
                }
            }
        }
    }
}

impl Run<'_> {
    /// A stall just ended: from now on, count what is read until the stream ends or catches up.
    fn stalled(&mut self) {
        if self.after_stall.is_none() {
            self.after_stall = Some((0, self.ctl.head.load(Ordering::Relaxed)));
        }
    }

    /// The stream ended after a stall, before catching up: watchmux cut it off, unless it just
    /// reached its `timeoutSeconds` (not judged).
    fn stall_ended(&mut self) {
        let Some((read, _)) = self.after_stall.take() else {
            return;
        };
        let lived = self.opened.elapsed() + Duration::from_secs(1);
        if lived < Duration::from_secs(self.w.plan.timeout_secs) {
            self.counts(|c| c.stalls.push((read, true)));
        }
    }
}

/// Whether `data` is the simulator's malformed-event line (its trailing newline optional).
fn is_simulators_malformed_line(data: &[u8]) -> bool {
    let trim = |b: &'static [u8]| b.strip_suffix(b"\n").unwrap_or(b);
    data.strip_suffix(b"\n").unwrap_or(data) == trim(kube_sim::faults::MALFORMED_EVENT)
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_simulators_own_malformed_line_is_recognised() {
        let line = kube_sim::faults::MALFORMED_EVENT;
        assert!(is_simulators_malformed_line(line));
        assert!(is_simulators_malformed_line(&line[..line.len() - 1]));
        assert!(!is_simulators_malformed_line(&line[..line.len() - 2]));
        assert!(!is_simulators_malformed_line(b"{\"type\":\"MODIFIED\"}"));
    }
}
