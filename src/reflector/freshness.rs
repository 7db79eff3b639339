//! Consistent reads from the cache: proving, with one or two upstream requests shared by every
//! reader that waits, that the cache holds every write the upstream acknowledged before a
//! moment (kube-apiserver's "consistent reads from cache", KEP-2340, as a proxy can do it).
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
//! **Why it is linearizable.** A read that arrives at `t` waits for the next check whose LIST is
//! sent after `t` (checks already under way started too early). That LIST's `R` covers every
//! write acknowledged before `t`; the proof shows the snapshot handed out holds the resource's
//! state at some resourceVersion `≥ R` (by step 2), or exactly its state at `R` (by step 0,
//! stamped `R`), which is a state the upstream had at or after `t` and before the answer.
//! Checks run one at a time per resource and every reader that arrived while one ran shares
//! the next, so the upstream sees at most two small requests per batch of readers, never
//! one per reader. A check that cannot finish within kube's 3 s fails ([`NotFresh`]) and the
//! caller does what kube-apiserver does: the upstream answers the read.
//!
//! Owns the check and its batching. It must not write to the cache (the reflector applies the
//! [`Progress`] it sends) nor answer clients.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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

type Outcome = Option<Result<Snapshot, NotFresh>>;

/// The readers waiting for the next check, and whether one runs.
#[derive(Default)]
struct Rounds {
    running: bool,
    next: Option<watch::Sender<Outcome>>,
}

/// The freshness check of one resource (see the module doc), shared by its readers.
pub struct Freshness {
    up: Upstream,
    path: String,
    cache: Arc<ResourceCache>,
    progress: mpsc::Sender<Progress>,
    metrics: Arc<ResourceMetrics>,
    rounds: Mutex<Rounds>,
    unchecked: AtomicBool,
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
        Arc::new(Freshness {
            up,
            path,
            cache,
            progress,
            metrics,
            rounds: Mutex::new(Rounds::default()),
            unchecked: AtomicBool::new(false),
            state_first: AtomicBool::new(true),
        })
    }

    /// Breaks the check on purpose: the cache is taken as fresh as it is. Only for tests that
    /// show the check is what makes consistent reads linearizable.
    #[doc(hidden)]
    pub fn set_unchecked(&self, unchecked: bool) {
        self.unchecked.store(unchecked, Ordering::Relaxed);
    }

    /// Waits, at most `within`, until a check that started after this call proved the cache
    /// fresh; returns the snapshot that serves a consistent read (the upstream's state at or
    /// after the call).
    pub async fn ensure_fresh(self: &Arc<Self>, within: Duration) -> Result<Snapshot, NotFresh> {
        if self.unchecked.load(Ordering::Relaxed) {
            return Ok(self.cache.snapshot());
        }
        let deadline = Instant::now() + within;
        let mut rx = {
            let mut r = self.rounds.lock();
            let tx = r.next.get_or_insert_with(|| watch::channel(None).0);
            let rx = tx.subscribe();
            if !r.running {
                r.running = true;
                let me = self.clone();
                tokio::spawn(async move { me.drive().await });
            }
            rx
        };
        match timeout_at(deadline, rx.wait_for(Option::is_some)).await {
            Ok(Ok(outcome)) => outcome.clone().unwrap_or(Err(NotFresh::Timeout(within))),
            _ => Err(NotFresh::Timeout(within)),
        }
    }

    /// Runs checks one after the other while readers wait for one.
    async fn drive(self: Arc<Self>) {
        loop {
            // Taken just before the LIST goes out: every reader in this round arrived before it.
            let round = {
                let mut r = self.rounds.lock();
                match r.next.take() {
                    Some(tx) => tx,
                    None => {
                        r.running = false;
                        return;
                    }
                }
            };
            let started = Instant::now();
            let result = self.check(started + CHECK_BUDGET).await;
            self.metrics.freshness_checked(
                result.as_ref().map(|(_, p)| p.as_str()).unwrap_or("failed"),
                started.elapsed(),
            );
            if let Err(e) = &result {
                tracing::debug!(resource = %self.cache.info.group_resource(), error = %e, "freshness check failed");
            }
            round.send_replace(Some(result.map(|(snap, _)| snap)));
        }
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
    async fn upstream_rv(&self) -> Result<u64, NotFresh> {
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
        MalformedData::parse_list_rv(&head.metadata.resource_version).map_err(malformed)
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
        #[derive(Deserialize)]
        struct List {
            metadata: ListMeta,
            #[serde(default, deserialize_with = "kube_wire::list::nullable")]
            items: Vec<Item>,
        }
        #[derive(Deserialize)]
        struct ListMeta {
            #[serde(rename = "resourceVersion")]
            resource_version: String,
            #[serde(rename = "continue", default)]
            continue_token: Option<String>,
        }
        #[derive(Deserialize)]
        struct Item {
            metadata: ItemMeta,
        }
        #[derive(Deserialize)]
        struct ItemMeta {
            #[serde(default)]
            namespace: String,
            name: String,
            #[serde(rename = "resourceVersion")]
            resource_version: String,
        }
        let list: List = serde_json::from_slice(body)?;
        let mut objects = Vec::with_capacity(list.items.len());
        for i in list.items {
            let m = i.metadata;
            let rv = MalformedData::parse_list_rv(&m.resource_version)?;
            objects.push((object_key(&m.namespace, &m.name), rv));
        }
        Ok(UpstreamState {
            rv: MalformedData::parse_list_rv(&list.metadata.resource_version)?,
            objects,
            more: list.metadata.continue_token.is_some_and(|c| !c.is_empty()),
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
