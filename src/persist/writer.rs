//! Writing a resource's log behind the live path. The cache's writer hands each record to a
//! [`Persister`] without waiting (a bounded queue), and a thread of the resource's own appends
//! them in batches, one `fdatasync` per batch, at most one batch per [`Settings::flush`].
//!
//! The live path never waits for the disk. When the queue is full, records are dropped rather
//! than queued. The thread then writes a full state taken from the cache at that moment
//! (a checkpoint), so the disk never holds a history with a hole. It also checkpoints when
//! the records appended since the last state exceed [`Settings::checkpoint_bytes`] or the size
//! of the state itself, whichever is more: the footprint stays at most about two states (or one
//! state plus that many bytes), and writing is amplified at most about twofold whatever the
//! cache's size (a fixed bound would rewrite a 1 GB state for every 64 MiB of events). Dropping the [`Persister`] ends the
//! thread once what was queued is written.
//!
//! The thread also records how fresh the cache is ([`Record::Fresh`]): every
//! [`FRESH_EVERY`] while the cache follows the upstream, once when it stops following it, and
//! at the end, so that a restart knows how old what it serves from disk is.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::format::Record;
use super::resource::DirLock;
use super::segments::{IoError, SegmentWriter};

/// How a resource's log is written.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Records queued for the thread at most; more are dropped and replaced by a checkpoint.
    pub queue: usize,
    /// Time between two batches' syncs, at least (what a crash may lose).
    pub flush: Duration,
    /// Bytes of records after a state that make the next batch a checkpoint, at least (the
    /// state's own size, when larger, is the bound).
    pub checkpoint_bytes: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            queue: 65_536,
            flush: Duration::from_millis(100),
            checkpoint_bytes: 64 << 20,
        }
    }
}

/// The cache's full state now: its resourceVersion and its objects' bytes (`None` until the
/// cache has one: before its first list).
pub type StateFn = Box<dyn Fn() -> Option<(u64, Vec<Bytes>)> + Send>;

/// How fresh the cache is now: `(unix_ms, live)`, the wall-clock time (milliseconds since the
/// Unix epoch) it was last known to follow the upstream, and whether it still does (then
/// `unix_ms` is now). `None` while it has no state.
pub type FreshFn = Box<dyn Fn() -> Option<(u64, bool)> + Send>;

/// How often a live cache's freshness is written: what a crash may make a restart believe
/// the data older than it is, at most.
pub const FRESH_EVERY: Duration = Duration::from_secs(5);

/// What the thread has done, for metrics and tests.
#[derive(Debug, Default)]
pub struct Stats {
    /// Batches appended.
    pub batches: AtomicU64,
    /// Records appended.
    pub records: AtomicU64,
    /// Bytes written (appends and checkpoints).
    pub bytes: AtomicU64,
    /// Checkpoints written.
    pub checkpoints: AtomicU64,
    /// Records dropped because the queue was full (each time, a checkpoint followed).
    pub dropped: AtomicU64,
    /// Bytes of the resource's directory.
    pub disk_bytes: AtomicU64,
    /// Writes that failed (logged; the next batch is a checkpoint).
    pub errors: AtomicU64,
}

/// The live path's handle to a resource's log writer. Dropping it ends the thread once the
/// queued records are written.
#[derive(Debug)]
pub struct Persister {
    tx: SyncSender<Record>,
    overflow: Arc<AtomicBool>,
    stats: Arc<Stats>,
}

impl Persister {
    /// Starts the writer thread of the resource whose log is in `dir` (which [`super::segments::load`]
    /// has read and repaired), holding `lock` until its last write. `state` is called on that thread whenever a full state must be
    /// written (first of all when the directory holds none: `on_disk` `None`). `on_disk` is what
    /// [`super::segments::load`] found: the bytes of the directory's state and of the records
    /// after it.
    pub fn spawn(
        dir: PathBuf,
        lock: Option<DirLock>,
        on_disk: Option<(u64, u64)>,
        state: StateFn,
        fresh: FreshFn,
        settings: Settings,
    ) -> Result<(Persister, std::thread::JoinHandle<()>), IoError> {
        let mut seg = SegmentWriter::open(&dir)?;
        if let Some((state_bytes, tail_bytes)) = on_disk {
            seg.resume_after(state_bytes, tail_bytes);
        }
        let (tx, rx) = sync_channel(settings.queue.max(1));
        let overflow = Arc::new(AtomicBool::new(on_disk.is_none()));
        let stats = Arc::new(Stats::default());
        stats.disk_bytes.store(seg.disk_bytes(), Ordering::Relaxed);
        let t = Thread {
            _lock: lock,
            dir,
            seg,
            rx,
            state,
            fresh,
            fresh_written: None,
            settings,
            overflow: overflow.clone(),
            stats: stats.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("watchmux-persist".into())
            .spawn(move || t.run())
            .map_err(|source| IoError {
                path: PathBuf::from("(thread)"),
                source,
            })?;
        Ok((
            Persister {
                tx,
                overflow,
                stats,
            },
            handle,
        ))
    }

    /// Queues `r` without waiting; when the queue is full it is dropped and the thread writes
    /// a full state instead.
    pub fn record(&self, r: Record) {
        match self.tx.try_send(r) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                self.overflow.store(true, Ordering::Release);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Has the thread write a full state next (after an initial list or a relist that replaced
    /// the cache's history).
    pub fn need_state(&self) {
        self.overflow.store(true, Ordering::Release);
    }

    /// What the thread has done.
    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }
}

struct Thread {
    /// The directory's lock, held until the last write (`None` in tests that do not lock).
    _lock: Option<DirLock>,
    dir: PathBuf,
    seg: SegmentWriter,
    rx: Receiver<Record>,
    state: StateFn,
    fresh: FreshFn,
    /// The last freshness written (its value, and when), if any since the last state.
    fresh_written: Option<(u64, Instant)>,
    settings: Settings,
    overflow: Arc<AtomicBool>,
    stats: Arc<Stats>,
}

/// The resourceVersion below or at which a record is covered by a state at that version.
fn covered_at(r: &Record) -> u64 {
    match r {
        Record::Event { rv, .. } | Record::Progress { rv } => *rv,
        Record::Gap { list_rv, .. } => *list_rv,
        Record::StateBegin { rv, .. } | Record::StateEnd { rv } => *rv,
        Record::Object { .. } => 0,
        // Never covered: a state carries no freshness.
        Record::Fresh { .. } => u64::MAX,
    }
}

impl Thread {
    // The thread runs outside the runtime: waiting on the queue blocks nothing else.
    #[allow(clippy::disallowed_methods)]
    fn run(mut self) {
        let mut batch: Vec<Record> = Vec::new();
        let mut last_sync = Instant::now() - self.settings.flush;
        // Records at or below this are in a state already written.
        let mut covered = 0u64;
        loop {
            let need_state = self.overflow.load(Ordering::Acquire);
            // Waiting for a state (the cache has none yet), the thread polls at the flush rate.
            let wait = if need_state {
                self.settings.flush
            } else {
                Duration::from_secs(1)
            };
            let (first, last) = match self.rx.recv_timeout(wait) {
                Ok(r) => (Some(r), false),
                Err(RecvTimeoutError::Timeout) if need_state || self.fresh_due(false).is_some() => {
                    (None, false)
                }
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => (None, true),
            };
            // Wait out the flush interval, collecting what arrives meanwhile.
            let until = last_sync + self.settings.flush;
            batch.extend(first);
            // (After the queue closed there is nothing to wait for.)
            if !last {
                loop {
                    let left = until.saturating_duration_since(Instant::now());
                    match self.rx.recv_timeout(left) {
                        Ok(r) => batch.push(r),
                        Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                    }
                    if left.is_zero() {
                        break;
                    }
                }
            }
            while let Ok(r) = self.rx.try_recv() {
                batch.push(r);
            }
            if self.overflow.swap(false, Ordering::AcqRel)
                || self.seg.since_state()
                    > self.settings.checkpoint_bytes.max(self.seg.state_bytes())
            {
                match self.checkpoint() {
                    Ok(Some(rv)) => covered = rv,
                    // No state yet: what came before it is of no use.
                    Ok(None) => {
                        self.overflow.store(true, Ordering::Release);
                        batch.clear();
                    }
                    Err(e) => self.failed(e),
                }
            }
            batch.retain(|r| covered_at(r) > covered);
            if let Some(unix_ms) = self.fresh_due(last) {
                self.fresh_written = Some((unix_ms, Instant::now()));
                batch.push(Record::Fresh { unix_ms });
            }
            if !batch.is_empty() {
                match self.seg.append(&batch) {
                    Ok(bytes) => {
                        self.stats.batches.fetch_add(1, Ordering::Relaxed);
                        self.stats
                            .records
                            .fetch_add(batch.len() as u64, Ordering::Relaxed);
                        self.stats.bytes.fetch_add(bytes, Ordering::Relaxed);
                    }
                    Err(e) => self.failed(e),
                }
                batch.clear();
            }
            self.stats
                .disk_bytes
                .store(self.seg.disk_bytes(), Ordering::Relaxed);
            if last {
                return;
            }
            last_sync = Instant::now();
        }
    }

    /// The freshness to write now, if a record of it is due (see the module doc); `last`: the
    /// thread's final batch, which records a live cache's freshness whatever the interval.
    fn fresh_due(&self, last: bool) -> Option<u64> {
        let (unix_ms, live) = (self.fresh)()?;
        let due = match self.fresh_written {
            None => true,
            Some((_, at)) if live => last || at.elapsed() >= FRESH_EVERY,
            Some((written, _)) => written != unix_ms,
        };
        due.then_some(unix_ms)
    }

    /// Writes the cache's state now; returns its resourceVersion, or `None` when the cache has
    /// none yet.
    fn checkpoint(&mut self) -> Result<Option<u64>, IoError> {
        let Some((rv, objects)) = (self.state)() else {
            return Ok(None);
        };
        self.seg.checkpoint(rv, objects.iter())?;
        // The new segment has no freshness yet: the batch that follows writes it.
        self.fresh_written = None;
        self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.stats
            .bytes
            .fetch_add(self.seg.disk_bytes(), Ordering::Relaxed);
        Ok(Some(rv))
    }

    /// A write failed: the history on disk may have a hole, so the next batch starts over
    /// from a full state.
    fn failed(&mut self, e: IoError) {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(dir = %self.dir.display(), error = %e, "could not write the persisted cache; a full state follows");
        self.overflow.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::segments::load;
    use kube_wire::event::EventType;
    use parking_lot::Mutex;

    fn obj(name: &str, rv: u64) -> Bytes {
        Bytes::from(format!(
            r#"{{"metadata":{{"name":"{name}","resourceVersion":"{rv}"}}}}"#
        ))
    }

    /// A stand-in for the cache: its state, changed by the test as it "applies" records.
    type Shared = Arc<Mutex<(u64, Vec<Bytes>)>>;

    fn spawn(
        dir: &std::path::Path,
        s: &Shared,
        settings: Settings,
    ) -> (Persister, std::thread::JoinHandle<()>) {
        let s = s.clone();
        Persister::spawn(
            dir.to_path_buf(),
            None,
            None,
            Box::new(move || Some(s.lock().clone())),
            Box::new(|| None),
            settings,
        )
        .unwrap()
    }

    #[test]
    fn records_reach_the_disk_after_a_first_state() {
        let d = tempfile::tempdir().unwrap();
        let shared: Shared = Arc::new(Mutex::new((5, vec![obj("a", 5)])));
        let (p, t) = spawn(
            d.path(),
            &shared,
            Settings {
                flush: Duration::from_millis(5),
                ..Settings::default()
            },
        );
        for rv in 6..=8 {
            p.record(Record::Event {
                ty: EventType::Added,
                rv,
                body: obj(&format!("n{rv}"), rv),
            });
        }
        p.record(Record::Progress { rv: 9 });
        drop(p);
        t.join().unwrap();
        let got = load(d.path()).unwrap();
        assert_eq!((got.state_rv, got.objects.len(), got.tail.len()), (5, 1, 4));
        assert_eq!(got.rv(), 9);
    }

    /// The log records when the cache was last known current: now, while it follows the
    /// upstream (also in the thread's last batch); the moment it stopped, once it has.
    #[test]
    fn freshness_is_recorded_live_and_when_it_stops() {
        let d = tempfile::tempdir().unwrap();
        let shared: Shared = Arc::new(Mutex::new((5, vec![obj("a", 5)])));
        let fresh: Arc<Mutex<(u64, bool)>> = Arc::new(Mutex::new((0, true)));
        let s = shared.clone();
        let f = fresh.clone();
        let (p, t) = Persister::spawn(
            d.path().to_path_buf(),
            None,
            None,
            Box::new(move || Some(s.lock().clone())),
            Box::new(move || {
                let (ms, live) = *f.lock();
                Some((
                    if live {
                        crate::cache::staleness::now_unix_ms()
                    } else {
                        ms
                    },
                    live,
                ))
            }),
            Settings {
                flush: Duration::from_millis(5),
                ..Settings::default()
            },
        )
        .unwrap();
        let before = crate::cache::staleness::now_unix_ms();
        p.record(Record::Progress { rv: 6 });
        // Live at the end: the last record says "current when the thread stopped".
        drop(p);
        t.join().unwrap();
        let got = load(d.path()).unwrap();
        let at = got.fresh_ms.unwrap();
        assert!(
            at >= before && at <= crate::cache::staleness::now_unix_ms(),
            "{at}"
        );
        assert_eq!(got.rv(), 6, "freshness marks are not part of the history");

        // Stopped following at a known moment: that moment is recorded, whatever the end.
        *fresh.lock() = (1_700_000_000_000, false);
        let s = shared.clone();
        let f = fresh.clone();
        let (p, t) = Persister::spawn(
            d.path().to_path_buf(),
            None,
            Some((0, 0)),
            Box::new(move || Some(s.lock().clone())),
            Box::new(move || Some(*f.lock())),
            Settings {
                flush: Duration::from_millis(5),
                ..Settings::default()
            },
        )
        .unwrap();
        p.record(Record::Progress { rv: 7 });
        drop(p);
        t.join().unwrap();
        let got = load(d.path()).unwrap();
        assert_eq!((got.fresh_ms, got.rv()), (Some(1_700_000_000_000), 7));
    }

    /// The checkpoint bound grows with the state: records up to the state's own size follow
    /// it without a rewrite (a fixed bound would rewrite a large state for every few events),
    /// and a start on a directory counts what already follows its state.
    #[test]
    fn the_checkpoint_bound_is_at_least_the_state() {
        let d = tempfile::tempdir().unwrap();
        let big: Vec<Bytes> = (0..40)
            .map(|i| {
                Bytes::from(format!(
                    r#"{{"metadata":{{"name":"o{i}"}},"pad":"{}"}}"#,
                    "x".repeat(1000)
                ))
            })
            .collect();
        let shared: Shared = Arc::new(Mutex::new((1, big)));
        let settings = Settings {
            flush: Duration::from_millis(1),
            checkpoint_bytes: 1024,
            ..Settings::default()
        };
        let append = |p: &Persister, from: u64, n: u64| {
            // (The stand-in's state stays at 1: what the first state covers is then decided
            // before the events, as when the cache's state is taken before they arrive.)
            for rv in from..from + n {
                p.record(Record::Event {
                    ty: EventType::Modified,
                    rv,
                    body: Bytes::from(format!(
                        r#"{{"metadata":{{"name":"o1"}},"pad":"{}"}}"#,
                        "y".repeat(500)
                    )),
                });
            }
        };
        let (p, t) = spawn(d.path(), &shared, settings.clone());
        // ~20 KB of events after a ~41 KB state: more than checkpoint_bytes, less than the state.
        append(&p, 2, 40);
        let stats = p.stats().clone();
        drop(p);
        t.join().unwrap();
        assert_eq!(
            stats.checkpoints.load(Ordering::Relaxed),
            1,
            "only the first state"
        );
        let got = load(d.path()).unwrap();
        assert!(
            got.tail_bytes > 15_000 && got.tail_bytes < got.state_bytes,
            "{got:?}"
        );

        // Restarted on the directory: the tail already there counts, so another ~25 KB passes
        // the state's size and the next batch is a checkpoint.
        let s = shared.clone();
        let (p, t) = Persister::spawn(
            d.path().to_path_buf(),
            None,
            Some((got.state_bytes, got.tail_bytes)),
            Box::new(move || Some(s.lock().clone())),
            Box::new(|| None),
            settings,
        )
        .unwrap();
        append(&p, 42, 50);
        let stats = p.stats().clone();
        drop(p);
        t.join().unwrap();
        assert!(stats.checkpoints.load(Ordering::Relaxed) >= 1);
    }

    /// A full queue drops records, and a state taken afterwards replaces them: the disk holds
    /// the cache's state with no hole.
    #[test]
    fn a_full_queue_becomes_a_checkpoint() {
        let d = tempfile::tempdir().unwrap();
        let shared: Shared = Arc::new(Mutex::new((1, vec![])));
        let settings = Settings {
            queue: 4,
            flush: Duration::from_millis(50),
            ..Settings::default()
        };
        let (p, t) = spawn(d.path(), &shared, settings);
        for rv in 2..200u64 {
            let body = obj(&format!("n{rv}"), rv);
            {
                let mut s = shared.lock();
                s.0 = rv;
                s.1.push(body.clone());
            }
            p.record(Record::Event {
                ty: EventType::Added,
                rv,
                body,
            });
        }
        assert!(
            p.stats().dropped.load(Ordering::Relaxed) > 0,
            "the queue overflowed"
        );
        let stats = p.stats().clone();
        drop(p);
        t.join().unwrap();
        assert!(stats.checkpoints.load(Ordering::Relaxed) >= 1);
        let got = load(d.path()).unwrap();
        assert!(got.dropped.is_empty(), "{:?}", got.dropped);
        // The state plus the records after it rebuild every object, in order, up to 199.
        let mut names: Vec<Bytes> = got.objects.clone();
        for r in &got.tail {
            match r {
                Record::Event { body, .. } => names.push(body.clone()),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(names, shared.lock().1);
        assert_eq!(got.rv(), 199);
    }

    /// The directory holds at most a state, the records after it up to the checkpoint bound,
    /// and one batch (a batch is at most the queue's records).
    #[test]
    fn the_footprint_stays_bounded_by_checkpoints() {
        let d = tempfile::tempdir().unwrap();
        let shared: Shared = Arc::new(Mutex::new((1, vec![obj("a", 1)])));
        let settings = Settings {
            queue: 64,
            flush: Duration::from_millis(1),
            checkpoint_bytes: 4096,
        };
        let (p, t) = spawn(d.path(), &shared, settings);
        let mut peak = 0;
        for rv in 2..2000u64 {
            shared.lock().0 = rv;
            p.record(Record::Progress { rv });
            peak = peak.max(p.stats().disk_bytes.load(Ordering::Relaxed));
        }
        let stats = p.stats().clone();
        drop(p);
        t.join().unwrap();
        // At least the first state; how many more depends on how the thread kept up (by
        // bytes, or after the queue overflowed), and the bound holds either way.
        assert!(stats.checkpoints.load(Ordering::Relaxed) >= 1);
        let state = (crate::persist::format::MAGIC.len()
            + Record::StateBegin { rv: 0, count: 1 }.encoded_len()
            + Record::Object { body: obj("a", 1) }.encoded_len()
            + Record::StateEnd { rv: 0 }.encoded_len()) as u64;
        let bound = state + 4096 + 64 * Record::Progress { rv: 0 }.encoded_len() as u64;
        let on_disk: u64 = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(on_disk <= bound, "{on_disk} bytes on disk, bound {bound}");
        assert!(peak <= bound, "{peak} bytes at the peak, bound {bound}");
        assert_eq!(load(d.path()).unwrap().rv(), 1999);
    }
}
