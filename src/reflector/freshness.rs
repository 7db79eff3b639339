//! Consistent reads from the cache: proving, with one or two upstream requests shared by every
//! reader that waits (at most one such check per resource per
//! `cache.consistent_read_check_interval_ms`), that the cache holds every write the upstream
//! acknowledged before a moment (kube-apiserver's "consistent reads from cache", KEP-2340, as
//! a proxy can do it).
//!
//! kube-apiserver asks etcd for its current revision and waits until its watch cache reaches
//! it, making etcd send progress notifications meanwhile. A proxy cannot ask the upstream for
//! progress on its watch, and the upstream's bookmarks come about once a minute, so a
//! [`Freshness`] check proves freshness itself, per resource:
//!
//! 0. **The state, for a small resource.** While the cache holds at most
//!    `cache.consistent_read_state_max_objects` objects, the check first asks for a consistent
//!    LIST of the resource's metadata (no resourceVersion, `as=PartialObjectMetadataList`): the
//!    upstream's state at its current resourceVersion `R`, as keys and object resourceVersions.
//!    A snapshot of the cache taken after the answer arrived that holds exactly those objects
//!    at exactly those resourceVersions *is* that state (an object's resourceVersion names one
//!    version of it), whatever the cache's own resourceVersion: that snapshot, stamped with
//!    `R`, serves every reader of the round, in milliseconds, also for a quiet resource whose
//!    cache never reaches `R` through its own events. While they differ, each snapshot after
//!    the next event the cache's own watch applies is compared again (those events are in
//!    flight), until one holds the state or the cache reaches `R`; no watch of the check's own.
//!    The snapshot itself is handed out: a later one could hold an older state (a create at
//!    `x < R` whose delete, also `≤ R`, the cache has not applied yet). Equal states do not
//!    prove that no event happened between the cache's resourceVersion and `R` (such a create
//!    and delete cancel out), so the cache's resourceVersion is not advanced (no
//!    [`Progress`]): its watchers still get those events when they arrive. A client that read
//!    the state at `R` and watches from `R` starts at once and gets the events after `R`,
//!    as from kube. The metadata LIST costs more bytes than step 1's, so a check begins with
//!    it only while the resource's cache is found behind (a quiet resource in a busy
//!    cluster); a check that begins with step 1 and finds the cache behind takes the state
//!    next: at most two requests, as before, and no wait for a bookmark.
//! 1. **The target.** A consistent LIST of one item (`?limit=1`, no resourceVersion) answers
//!    with the upstream's current resourceVersion `R`: kube serves it from etcd (≤ 1.33) or from
//!    its own cache after the same freshness wait (1.34+), so `R` is at least the revision of
//!    every write acknowledged before the LIST was sent. The resourceVersion is global: other
//!    resources move it, so the cache may well hold every event of *its* resource up to `R`
//!    without its own resourceVersion ever reaching `R`.
//! 2. **The proof.** If the cache's resourceVersion `c` is below `R`, a short watch from `c`
//!    (`allowWatchBookmarks`, `timeoutSeconds=3`) replays, in order, exactly the events of the
//!    resource after `c`. The proof is complete at the first event at or after `R`, or at a
//!    BOOKMARK at or after `R` — kube sends one two seconds before the watch's deadline, with
//!    its cache's resourceVersion, which reached `R` in step 1 (the simulator does the same).
//!    Every event of the resource in `(c, R]` was then seen; once the cache has applied the
//!    last of them (its own watch delivers them), no other event lies below `R`, and the
//!    reflector may advance the cache's resourceVersion to `R` (or the bookmark's) like a
//!    bookmark — a [`Progress`] notification, the counterpart of etcd's. Meanwhile the cache's
//!    own watch may reach `R` first, which ends the check at once.
//!
//! **Sharing the checks.** A read that arrives at `t` waits for the next check whose LIST is
//! sent after `t` (checks already under way started too early), and every reader waiting then
//! shares it. Each check of a resource starts at least
//! `cache.consistent_read_check_interval_ms` (250 ms) after the one before: a read that arrives
//! within that of the last check's start waits for the check that starts when it has passed,
//! with every other reader that arrived meanwhile; a read that arrives later (a lone `kubectl
//! get`) starts one at once. A check does not wait for the one before it to end (a check whose
//! proof waits for the upstream's bookmark takes about a second: run one after the other, a
//! reader arriving just after one began would wait for two, and a herd's reads would pass
//! kube's 3 s); a few overlap at most. Without the interval, a check against a kube-apiserver takes a
//! few milliseconds, so readers that arrive spread out (a kubelet starting one name-scoped
//! watch-list per ConfigMap and Secret it mounts, a fleet of them at once) each found none
//! running and paid for their own: about one upstream request per reader. With it, a herd
//! costs at most one check (one or two small requests) per interval per resource, however
//! many readers it has, and a read waits at most the interval more than its check takes.
//! kube-apiserver does the same where it pays per request: each consistent read asks etcd for
//! its current revision (cheap, in-process), but the progress notifications that make its watch
//! cache catch up are requested at most every 100 ms while readers wait (`progressRequestPeriod`
//! of its `ConditionalProgressRequester`). For a proxy the target is itself an upstream request,
//! so the interval paces the whole check.
//!
//! **Why it is linearizable.** The check a read waits for sends its LIST after the read
//! arrived, so its `R` covers every write acknowledged before `t`; the proof shows the snapshot
//! handed out holds the resource's state at some resourceVersion `≥ R` (by step 2), or exactly
//! its state at `R` (by step 0, stamped `R`), which is a state the upstream had at or after `t`
//! and before the answer. Waiting for the interval only delays that check; it never hands a
//! reader the result of a check that began before it arrived. A check that cannot finish
//! within kube's 3 s fails ([`NotFresh`]) and the caller does what kube-apiserver does: the
//! upstream answers the read.
//!
//! Owns the check, its batching and its pace. It must not write to the cache (the reflector
//! applies the [`Progress`] it sends) nor answer clients.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, timeout_at};

use super::watch::{Line, WatchLines, parse_line};
use super::{MalformedData, ReflectorError, read_body};
use crate::cache::record::object_key;
use crate::cache::{ResourceCache, Snapshot};
use crate::metrics::ResourceMetrics;
use crate::upstream::Upstream;

/// How long one check may take: kube's wait for a fresh cache (`blockTimeout`).
pub const CHECK_BUDGET: Duration = Duration::from_secs(3);

/// The short watch's `timeoutSeconds`: the upstream sends its pre-deadline bookmark 2 s before
/// the deadline, so 3 s asks for one about a second after the watch starts.
const PROOF_WATCH_SECONDS: u64 = 3;

/// A proof that the resource had no event in `(after, rv]`: once the cache's resourceVersion is
/// at least `after`, the reflector may advance it to `rv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The last event of the resource at or below the proven point.
    pub after: u64,
    /// The proven point.
    pub rv: u64,
}

/// Why a consistent read cannot be served from the cache.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotFresh {
    /// The check did not finish within the caller's or kube's bound.
    #[error("the cache could not be proven fresh within {0:?}")]
    Timeout(Duration),
    /// An upstream request of the check failed.
    #[error("freshness check failed")]
    Upstream(#[source] Arc<ReflectorError>),
    /// The cache's resourceVersion is too old for the upstream to replay from.
    #[error("the cache's resourceVersion is too old to replay from")]
    Expired,
}

/// How a check ended (the `outcome` label of the freshness metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// The cache was already at the target.
    Ahead,
    /// The cache held the upstream's state at the target (step 0).
    State,
    /// The cache's own watch reached the target during the check.
    Caught,
    /// The short watch showed an event at or after the target.
    Event,
    /// The short watch's bookmark reached the target.
    Bookmark,
}

impl Proof {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Proof::Ahead => "ahead",
            Proof::State => "state",
            Proof::Caught => "caught_up",
            Proof::Event => "event",
            Proof::Bookmark => "bookmark",
        }
    }
}

/// Most rounds of one job in flight at once. A round (a freshness check) can take a second or
/// more (its short watch waits for the upstream's bookmark); were rounds run one at a time, a
/// reader arriving just after one started would wait for it to end and then for its own, and
/// under a herd that pushed reads past kube's 3 s. Rounds still start `interval` apart, so this
/// only bounds how many of those overlap.
const MAX_ROUNDS_IN_FLIGHT: usize = 8;

/// Readers that share the rounds of a job (here, a freshness check): each waits for the next
/// round that starts after it arrived. Each round starts at least `interval` after the one
/// before (the first after a quiet spell at once), without waiting for the one before to end,
/// at most [`MAX_ROUNDS_IN_FLIGHT`] at a time.
struct Rounds<T> {
    interval: Duration,
    /// The runtime the rounds run on: the one that made the check (the reflector's, the
    /// control runtime), not the reader's (see `crate::control`).
    runtime: tokio::runtime::Handle,
    in_flight: Arc<tokio::sync::Semaphore>,
    state: Mutex<RoundsState<T>>,
}

struct RoundsState<T> {
    /// A task starts rounds while readers wait for one.
    running: bool,
    /// The readers waiting for the next round.
    next: Option<watch::Sender<Option<T>>>,
    /// When the last round started.
    last_start: Option<Instant>,
}

impl<T: Clone + Send + Sync + 'static> Rounds<T> {
    /// Rounds at least `interval` apart, run on the current runtime.
    fn new(interval: Duration) -> Arc<Rounds<T>> {
        Arc::new(Rounds {
            interval,
            runtime: tokio::runtime::Handle::current(),
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_ROUNDS_IN_FLIGHT)),
            state: Mutex::new(RoundsState {
                running: false,
                next: None,
                last_start: None,
            }),
        })
    }

    /// Joins the next round; its outcome arrives through the receiver. `run` is one round: the
    /// task that starts them is started by the reader that finds none running.
    fn join<F, Fut>(self: &Arc<Self>, run: F) -> watch::Receiver<Option<T>>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        let mut s = self.state.lock();
        let rx = s
            .next
            .get_or_insert_with(|| watch::channel(None).0)
            .subscribe();
        if !s.running {
            s.running = true;
            let me = self.clone();
            self.runtime.spawn(async move { me.drive(run).await });
        }
        rx
    }

    /// Starts rounds while readers wait for one, each `interval` after the last one's start
    /// and while fewer than [`MAX_ROUNDS_IN_FLIGHT`] run.
    async fn drive<F, Fut>(self: Arc<Self>, mut run: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        loop {
            // Readers that arrive meanwhile join the round that starts then.
            let not_before = self.state.lock().last_start.map(|t| t + self.interval);
            if let Some(t) = not_before.filter(|t| *t > Instant::now()) {
                tokio::time::sleep_until(t).await;
            }
            let Ok(permit) = self.in_flight.clone().acquire_owned().await else {
                return;
            };
            // Taken just before the round starts: every reader in it arrived before.
            let round = {
                let mut s = self.state.lock();
                match s.next.take() {
                    Some(tx) => {
                        s.last_start = Some(Instant::now());
                        tx
                    }
                    None => {
                        s.running = false;
                        return;
                    }
                }
            };
            let fut = run();
            tokio::spawn(async move {
                round.send_replace(Some(fut.await));
                drop(permit);
            });
        }
    }
}

/// The freshness check of one resource (see the module doc), shared by its readers.
pub struct Freshness {
    up: Upstream,
    path: String,
    cache: Arc<ResourceCache>,
    progress: mpsc::Sender<Progress>,
    metrics: Arc<ResourceMetrics>,
    rounds: Arc<Rounds<Result<Snapshot, NotFresh>>>,
    unchecked: AtomicBool,
    /// The highest resourceVersion the upstream answered a check with (0: none yet).
    upstream_seen: AtomicU64,
    /// The last check found the cache behind the upstream: begin with the state (step 0).
    state_first: AtomicBool,
}

impl std::fmt::Debug for Freshness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Freshness")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Freshness {
    /// The check for the resource at collection `path`, whose cache is `cache`; proofs go to
    /// the reflector through `progress`.
    pub fn new(
        up: Upstream,
        path: String,
        cache: Arc<ResourceCache>,
        progress: mpsc::Sender<Progress>,
        metrics: Arc<ResourceMetrics>,
    ) -> Arc<Freshness> {
        let interval = cache.settings().consistent_read_check_interval;
        Arc::new(Freshness {
            up,
            path,
            cache,
            progress,
            metrics,
            rounds: Rounds::new(interval),
            unchecked: AtomicBool::new(false),
            upstream_seen: AtomicU64::new(0),
            state_first: AtomicBool::new(true),
        })
    }

    /// Breaks the check on purpose: the cache is taken as fresh as it is. Only for tests that
    /// show the check is what makes consistent reads linearizable.
    #[doc(hidden)]
    pub fn set_unchecked(&self, unchecked: bool) {
        self.unchecked.store(unchecked, Ordering::Relaxed);
    }

    /// Waits until a check that started after this call proved the cache fresh; returns the
    /// snapshot that serves a consistent read (the upstream's state at or after the call).
    /// Gives up after `within` plus the checks' interval: the wait for the check to start is
    /// the interval's, not the read's, so a read is never given up on while the check that
    /// serves it still runs within its own `within` (kube's 3 s, [`CHECK_BUDGET`]). A fleet's
    /// watch-lists of a quiet kind, whose proof waits for the upstream's bookmark, were passed
    /// upstream as not fresh while their checks succeeded.
    pub async fn ensure_fresh(self: &Arc<Self>, within: Duration) -> Result<Snapshot, NotFresh> {
        if self.unchecked.load(Ordering::Relaxed) {
            return Ok(self.cache.snapshot());
        }
        let arrived = Instant::now();
        let deadline = arrived + within + self.rounds.interval;
        self.metrics.freshness_wait();
        let me = self.clone();
        let mut rx = self.rounds.join(move || me.clone().round());
        match timeout_at(deadline, rx.wait_for(Option::is_some)).await {
            Ok(Ok(outcome)) => outcome.clone().unwrap_or(Err(NotFresh::Timeout(within))),
            _ => {
                tracing::debug!(resource = %self.cache.info.group_resource(), waited_ms = arrived.elapsed().as_millis() as u64, "consistent read gave up waiting for its freshness check");
                Err(NotFresh::Timeout(within))
            }
        }
    }

    /// One round: a check, counted.
    async fn round(self: Arc<Self>) -> Result<Snapshot, NotFresh> {
        let started = Instant::now();
        let result = self.check(started + CHECK_BUDGET).await;
        let took = started.elapsed();
        self.metrics.freshness_checked(
            result.as_ref().map(|(_, p)| p.as_str()).unwrap_or("failed"),
            took,
        );
        let elapsed_ms = took.as_millis() as u64;
        match &result {
            Err(e) => {
                tracing::debug!(resource = %self.cache.info.group_resource(), error = %e, elapsed_ms, "freshness check failed")
            }
            Ok((_, p)) => {
                tracing::debug!(resource = %self.cache.info.group_resource(), proof = p.as_str(), elapsed_ms, "freshness check done")
            }
        }
        result.map(|(snap, _)| snap)
    }

    /// One check (see the module doc), bounded by `deadline`.
    async fn check(&self, deadline: Instant) -> Result<(Snapshot, Proof), NotFresh> {
        let budget = CHECK_BUDGET;
        let max = self.cache.settings().state_proof_max_objects;
        let small = max > 0 && self.cache.len() <= max;
        // A resource whose cache is usually at the upstream's resourceVersion is asked for one
        // item first (cheaper); one that is usually behind, for its state at once.
        if small && self.state_first.load(Ordering::Relaxed) {
            return self.by_state(max, deadline).await;
        }
        let target = timeout_at(deadline, self.upstream_rv())
            .await
            .map_err(|_| NotFresh::Timeout(budget))??;
        if small && self.cache.rv() < target {
            // Behind: the state proves it without a watch (a second request, not a wait).
            self.state_first.store(true, Ordering::Relaxed);
            return self.by_state(max, deadline).await;
        }
        loop {
            let snap = self.cache.snapshot();
            if snap.rv >= target {
                return Ok((snap, Proof::Ahead));
            }
            let from = snap.rv;
            let proof = tokio::select! {
                biased;
                caught = self.cache.wait_rv(target, deadline.saturating_duration_since(Instant::now())) => {
                    if caught {
                        return Ok((self.cache.snapshot(), Proof::Caught));
                    }
                    return Err(NotFresh::Timeout(budget));
                }
                p = timeout_at(deadline, self.replay(from, target)) => p.map_err(|_| NotFresh::Timeout(budget))??,
            };
            // The stream ended before it proved anything (an upstream restart, a short answer):
            // try again from wherever the cache is now.
            let Some((last, proven, how)) = proof else {
                continue;
            };
            // Every event of the resource up to `target` is `last` or before it: once the cache
            // holds `last`, nothing lies between it and `proven`.
            let left = deadline.saturating_duration_since(Instant::now());
            if !self.cache.wait_rv(last, left).await {
                return Err(NotFresh::Timeout(budget));
            }
            if self.cache.rv() < target {
                let _ = self.progress.try_send(Progress {
                    after: last,
                    rv: proven,
                });
                let left = deadline.saturating_duration_since(Instant::now());
                if !self.cache.wait_rv(target, left).await {
                    return Err(NotFresh::Timeout(budget));
                }
            }
            return Ok((self.cache.snapshot(), how));
        }
    }

    /// Step 0 (see the module doc): the upstream's state at `R` against the cache's snapshots,
    /// the current one and each one after it while the cache's own watch catches up, until one
    /// holds that state (or the cache reaches `R`). No watch of its own: the events the cache
    /// misses are in flight on its watch.
    async fn by_state(&self, max: usize, deadline: Instant) -> Result<(Snapshot, Proof), NotFresh> {
        let budget = CHECK_BUDGET;
        let state = timeout_at(deadline, self.upstream_state(max))
            .await
            .map_err(|_| NotFresh::Timeout(budget))??;
        self.upstream_seen.fetch_max(state.rv, Ordering::Relaxed);
        let mut checked_behind = false;
        loop {
            let snap = self.cache.snapshot();
            if snap.rv >= state.rv {
                if !checked_behind {
                    // Usually current: the next check asks for one item first.
                    self.state_first.store(false, Ordering::Relaxed);
                    return Ok((snap, Proof::Ahead));
                }
                return Ok((snap, Proof::Caught));
            }
            if state.held_by(&snap) {
                // The upstream's state at `R`: handed out as the state at `R`.
                return Ok((
                    Snapshot {
                        rv: state.rv,
                        ..snap
                    },
                    Proof::State,
                ));
            }
            checked_behind = true;
            let left = deadline.saturating_duration_since(Instant::now());
            if !self.cache.wait_rv(snap.rv + 1, left).await {
                return Err(NotFresh::Timeout(budget));
            }
        }
    }

    /// Step 0: the upstream's current state, as keys and object resourceVersions, from a
    /// consistent LIST of the resource's metadata. At most `max + 1` items are asked for: a
    /// `continue` in the answer means more objects than the cache holds.
    async fn upstream_state(&self, max: usize) -> Result<UpstreamState, NotFresh> {
        let q = format!("{}?limit={}", self.path, max + 1);
        let body = self.consistent_list(&q, METADATA_LIST).await?;
        UpstreamState::parse(&body)
            .map_err(|e| NotFresh::Upstream(Arc::new(ReflectorError::malformed(&q, e))))
    }

    /// The body of the consistent LIST `q` (a path and query), asked for in `accept`.
    async fn consistent_list(&self, q: &str, accept: &str) -> Result<bytes::Bytes, NotFresh> {
        let resp = self.up.get(q, accept).await;
        self.metrics
            .upstream_request("freshness", resp.as_ref().ok().map(|r| r.status().as_u16()));
        let resp = resp.map_err(|e| NotFresh::Upstream(Arc::new(e.into())))?;
        let code = resp.status();
        let body = read_body(resp, q)
            .await
            .map_err(|e| NotFresh::Upstream(Arc::new(e)))?;
        if !code.is_success() {
            return Err(NotFresh::Upstream(Arc::new(ReflectorError::from_answer(
                code, q, &body,
            ))));
        }
        Ok(body)
    }

    /// Step 1: the upstream's current resourceVersion, from a consistent LIST of one item.
    pub(super) async fn upstream_rv(&self) -> Result<u64, NotFresh> {
        let q = format!("{}?limit=1", self.path);
        let body = self.consistent_list(&q, "application/json").await?;
        #[derive(Deserialize)]
        struct Head {
            metadata: Meta,
        }
        #[derive(Deserialize)]
        struct Meta {
            #[serde(rename = "resourceVersion")]
            resource_version: String,
        }
        let malformed = |e| NotFresh::Upstream(Arc::new(ReflectorError::malformed(&q, e)));
        let head: Head =
            serde_json::from_slice(&body).map_err(|e| malformed(MalformedData::from(e)))?;
        let rv =
            MalformedData::parse_list_rv(&head.metadata.resource_version).map_err(malformed)?;
        self.upstream_seen.fetch_max(rv, Ordering::Relaxed);
        Ok(rv)
    }

    /// The highest resourceVersion the upstream answered a check of this resource with, if
    /// any: what a read the check could not serve waited for (kube's "Too large resource
    /// version: R" names its storage's revision).
    pub fn upstream_rv_seen(&self) -> Option<u64> {
        Some(self.upstream_seen.load(Ordering::Relaxed)).filter(|rv| *rv > 0)
    }

    /// Step 2: a short watch from `from`, read until it proves that every event of the resource
    /// up to `target` was seen. Returns the last event at or below `target` (or `from`), the
    /// proven resourceVersion and how it was proven; `None` if the stream ended first.
    async fn replay(&self, from: u64, target: u64) -> Result<Option<(u64, u64, Proof)>, NotFresh> {
        let q = format!(
            "{}?watch=1&allowWatchBookmarks=true&resourceVersion={from}&timeoutSeconds={PROOF_WATCH_SECONDS}",
            self.path
        );
        let resp = self.up.get(&q, "application/json").await;
        self.metrics
            .upstream_request("freshness", resp.as_ref().ok().map(|r| r.status().as_u16()));
        let resp = resp.map_err(|e| NotFresh::Upstream(Arc::new(e.into())))?;
        let code = resp.status();
        if !code.is_success() {
            let body = read_body(resp, &q)
                .await
                .map_err(|e| NotFresh::Upstream(Arc::new(e)))?;
            return Err(match ReflectorError::from_answer(code, &q, &body) {
                ReflectorError::Expired(_) => NotFresh::Expired,
                e => NotFresh::Upstream(Arc::new(e)),
            });
        }
        let mut lines = WatchLines::new(resp.into_body(), &q, None);
        let mut last = from;
        while let Some(line) = lines
            .next(|_| {})
            .await
            .map_err(|e| NotFresh::Upstream(Arc::new(e)))?
        {
            match parse_line(&line).map_err(|e| NotFresh::Upstream(Arc::new(e)))? {
                Line::Event(rv) if rv >= target => {
                    if rv == target {
                        last = rv;
                    }
                    return Ok(Some((last, target, Proof::Event)));
                }
                Line::Event(rv) => last = last.max(rv),
                Line::Bookmark(rv) if rv >= target => {
                    return Ok(Some((last, rv, Proof::Bookmark)));
                }
                Line::Bookmark(_) => {}
                Line::Error(s) if s.is_expired() => return Err(NotFresh::Expired),
                Line::Error(s) => {
                    return Err(NotFresh::Upstream(Arc::new(ReflectorError::Status {
                        what: "watch".into(),
                        status: s,
                    })));
                }
            }
        }
        Ok(None)
    }
}

/// What step 0 asks for: PartialObjectMetadataList, or the full list from an upstream that does
/// not serve it (its items have the same metadata).
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// The upstream's state in step 0: its resourceVersion, and each object's key and
/// resourceVersion (in the answer's order).
#[derive(Debug)]
struct UpstreamState {
    rv: u64,
    objects: Vec<(String, u64)>,
    /// The answer had a `continue`: there are more objects than were asked for.
    more: bool,
}

impl UpstreamState {
    fn parse(body: &[u8]) -> Result<UpstreamState, MalformedData> {
        let mut objects = Vec::new();
        let meta = super::consistency::read_page(body, false, |ns, name, rv| {
            objects.push((object_key(ns, name), rv));
            Ok(())
        })?;
        Ok(UpstreamState {
            rv: MalformedData::parse_list_rv(&meta.resource_version)?,
            objects,
            more: !meta.continue_token.is_empty(),
        })
    }

    /// Whether `snap` holds exactly these objects, each at its resourceVersion.
    fn held_by(&self, snap: &Snapshot) -> bool {
        !self.more
            && snap.objects.len() == self.objects.len()
            && self.objects.iter().all(|(key, rv)| {
                snap.objects
                    .get(key.as_str())
                    .is_some_and(|o| o.rec.rv == *rv)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long each round of the tests' job takes, unless a test says otherwise: readers
    /// arrive while one runs.
    const ROUND: Duration = Duration::from_millis(20);

    /// The rounds' job: each round takes `round`, records when it starts and ends, and answers
    /// its start.
    fn job(
        log: &Arc<Mutex<Vec<(Instant, Instant)>>>,
        round: Duration,
    ) -> impl FnMut() -> RoundFuture + use<> {
        let log = log.clone();
        move || {
            let log = log.clone();
            Box::pin(async move {
                let start = Instant::now();
                tokio::time::sleep(round).await;
                log.lock().push((start, Instant::now()));
                start
            })
        }
    }

    type RoundFuture = std::pin::Pin<Box<dyn Future<Output = Instant> + Send>>;

    /// Joins the next round of `rounds` and waits for it: when it started.
    async fn wait_round(
        rounds: &Arc<Rounds<Instant>>,
        log: &Arc<Mutex<Vec<(Instant, Instant)>>>,
        round: Duration,
    ) -> Instant {
        let mut rx = rounds.join(job(log, round));
        let out = *rx.wait_for(Option::is_some).await.expect("a round");
        out.expect("its start")
    }

    /// `n` readers of `rounds`, arriving `spacing` apart from now, each waiting for its round
    /// (rounds of `round`): when each arrived, and when its round started.
    fn readers(
        rounds: &Arc<Rounds<Instant>>,
        log: &Arc<Mutex<Vec<(Instant, Instant)>>>,
        n: u32,
        spacing: Duration,
        round: Duration,
    ) -> Vec<tokio::task::JoinHandle<(Instant, Instant)>> {
        let t0 = Instant::now();
        (0..n)
            .map(|i| {
                let (rounds, log) = (rounds.clone(), Arc::clone(log));
                tokio::spawn(async move {
                    tokio::time::sleep_until(t0 + spacing * i).await;
                    let arrived = Instant::now();
                    (arrived, wait_round(&rounds, &log, round).await)
                })
            })
            .collect()
    }

    /// Most rounds of `log` running at one moment.
    fn most_in_flight(log: &[(Instant, Instant)]) -> usize {
        log.iter()
            .map(|(s, _)| log.iter().filter(|(s1, e1)| s1 <= s && s < e1).count())
            .max()
            .unwrap_or(0)
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_reader_starts_a_round_at_once() {
        let rounds = Rounds::new(Duration::from_millis(250));
        let log = Arc::default();
        let t0 = Instant::now();
        assert_eq!(
            wait_round(&rounds, &log, ROUND).await,
            t0,
            "the first round"
        );
        // Once the interval has passed since the last start, the next reader starts one at once
        // too.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t1 = Instant::now();
        assert_eq!(
            wait_round(&rounds, &log, ROUND).await,
            t1,
            "after a quiet spell"
        );
        assert_eq!(log.lock().len(), 2);
    }

    /// Readers arriving one every 5 ms for 1.5 s: each waits for a round that started after it
    /// arrived (what makes a consistent read linearizable), not a round under way, and the
    /// rounds start the interval apart: 7 for 300 readers, where no interval makes a round per
    /// reader (each of 20 ms, so about 4 in flight). A round
    /// longer than the interval (600 ms: a check waiting for the upstream's bookmark) does not
    /// hold back the next: a reader still waits at most the interval for its round to start,
    /// with a few rounds in flight.
    #[tokio::test(start_paused = true)]
    async fn readers_share_rounds_that_start_after_them_and_the_interval_apart() {
        let long = Duration::from_millis(600);
        for (interval, round, most, overlap) in [
            (Duration::from_millis(250), ROUND, 7, 1),
            (Duration::ZERO, ROUND, 300, 4),
            (Duration::from_millis(250), long, 7, 3),
        ] {
            let case = format!("interval {interval:?}, rounds of {round:?}");
            let rounds = Rounds::new(interval);
            let log = Arc::default();
            let readers = readers(&rounds, &log, 300, Duration::from_millis(5), round);
            let mut starts = Vec::new();
            for r in readers {
                let (arrived, started) = r.await.unwrap();
                assert!(started >= arrived, "{case}: a round that began before it");
                // Not kept waiting longer than needed: the round that serves it starts at once,
                // or once the interval since the last start has passed.
                assert!(
                    started - arrived <= interval,
                    "{case}: waited {:?}",
                    started - arrived
                );
                starts.push(started);
            }
            let log = log.lock().clone();
            assert_eq!(log.len(), most, "{case}: rounds");
            for w in log.windows(2) {
                let ((s0, _), (s1, _)) = (w[0], w[1]);
                assert!(s1 - s0 >= interval, "{case}: {:?} apart", s1 - s0);
            }
            assert_eq!(most_in_flight(&log), overlap, "{case}: rounds in flight");
            starts.dedup();
            assert_eq!(starts.len(), most, "{case}: every round served a reader");
        }
    }

    /// However long rounds take, no more than [`MAX_ROUNDS_IN_FLIGHT`] run at once.
    #[tokio::test(start_paused = true)]
    async fn rounds_in_flight_are_bounded() {
        let rounds = Rounds::new(Duration::from_millis(10));
        let log = Arc::default();
        let ten_ms = Duration::from_millis(10);
        for r in readers(&rounds, &log, 100, ten_ms, Duration::from_secs(5)) {
            r.await.unwrap();
        }
        assert_eq!(most_in_flight(&log.lock()), MAX_ROUNDS_IN_FLIGHT);
    }
}
