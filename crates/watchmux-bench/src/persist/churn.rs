//! Part 2 of the persistence bench: write amplification and CPU under churn. Two watchmux
//! processes follow the same simulator in the same run, one with `persist_dir` and one
//! without; the simulator churns its pods at a fixed rate (its realistic mix: mostly status
//! updates, i.e. MODIFIED, with creates and deletes), and after a warm-up each measured window
//! reads, for both processes, the upstream event bytes and events they received, what they
//! wrote to disk (the persist metrics and `/proc/PID/io`), and their CPU.
//!
//! Measuring only: starting and stopping the processes is [`super`]'s.

use std::path::Path;
use std::time::{Duration, Instant};

use super::super::BenchError;
use super::super::procs::{self, PeakRss, Proc};
use super::super::scrape::{self, Metrics};
use super::super::targets::{self, Env};
use super::probe::{self, SimCounters};
use super::{PersistOptions, Watchmux, start_watchmux};

/// The persister thread's name as the kernel keeps it (15 bytes).
const PERSIST_THREAD: &str = "watchmux-persis";

/// One process's figures over one window.
#[derive(Debug, Clone, Default)]
pub struct ChurnSample {
    /// Whether this process persisted.
    pub persisted: bool,
    /// Window number (0-based).
    pub repeat: usize,
    /// Window length, seconds.
    pub secs: f64,
    /// Upstream watch events received (`watchmux_upstream_events_total`).
    pub events: f64,
    /// Upstream watch body bytes received (`watchmux_upstream_bytes_total{verb="watch"}`).
    pub event_bytes: f64,
    /// Bytes the durable cache wrote (`watchmux_persist_bytes_written_total`).
    pub persist_bytes: f64,
    /// Bytes the process wrote to storage (`/proc/PID/io` `write_bytes`).
    pub io_write_bytes: f64,
    /// Full states written (`watchmux_persist_checkpoints_total`).
    pub checkpoints: f64,
    /// Records dropped for a full queue (`watchmux_persist_dropped_records_total`).
    pub dropped: f64,
    /// Failed writes (`watchmux_persist_write_errors_total`).
    pub write_errors: f64,
    /// The directory's bytes at the window's end (`watchmux_persist_disk_bytes`).
    pub disk_bytes: f64,
    /// The process's CPU seconds.
    pub cpu_s: f64,
    /// Of which the persister thread's.
    pub persist_thread_cpu_s: f64,
    /// Largest RSS in the window, bytes.
    pub peak_rss: f64,
    /// Writes the simulator made (its resourceVersion's advance).
    pub sim_writes: f64,
    /// Pod bytes the simulator sent in the window, per watchmux (its two watch streams' bytes
    /// ÷ 2): the upstream's own count of the event bytes.
    pub sim_bytes: f64,
    /// The simulator's CPU seconds (it makes the writes and serves both watches).
    pub sim_cpu_s: f64,
    /// CPU seconds of processes other than the two watchmux, the simulator and the bench.
    pub other_cpu_s: f64,
}

impl ChurnSample {
    /// Events received per second.
    pub fn events_per_s(&self) -> f64 {
        self.events / self.secs
    }

    /// Disk bytes written (the metric) per upstream event byte.
    pub fn amplification(&self) -> f64 {
        self.persist_bytes / self.event_bytes
    }

    /// Disk bytes written (`/proc`) per upstream event byte.
    pub fn io_amplification(&self) -> f64 {
        self.io_write_bytes / self.event_bytes
    }

    /// CPU milliseconds per 1,000 events.
    pub fn cpu_ms_per_1000(&self) -> f64 {
        self.cpu_s * 1000.0 / self.events * 1000.0
    }
}

/// A process's counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Point {
    events: f64,
    event_bytes: f64,
    persist_bytes: f64,
    checkpoints: f64,
    dropped: f64,
    write_errors: f64,
    disk_bytes: f64,
    io: f64,
    cpu: f64,
    thread_cpu: f64,
}

impl Point {
    async fn read(w: &Watchmux) -> Result<Point, BenchError> {
        let m = scrape::scrape(w.addr).await?;
        let pods = [("resource", "pods")];
        let get = |name: &str| m.sum(name, &pods);
        Ok(Point {
            events: get("watchmux_upstream_events_total"),
            event_bytes: m.sum(
                "watchmux_upstream_bytes_total",
                &[("resource", "pods"), ("verb", "watch")],
            ),
            persist_bytes: get("watchmux_persist_bytes_written_total"),
            checkpoints: get("watchmux_persist_checkpoints_total"),
            dropped: get("watchmux_persist_dropped_records_total"),
            write_errors: get("watchmux_persist_write_errors_total"),
            disk_bytes: get("watchmux_persist_disk_bytes"),
            io: probe::io_write_bytes(w.pid()).unwrap_or(0) as f64,
            cpu: procs::usage(&[w.pid()]).cpu_secs,
            thread_cpu: probe::thread_cpu_secs(w.pid(), PERSIST_THREAD),
        })
    }
}

/// Starts the two processes (the persisting one in an emptied `dir`), waits until both are
/// synced and the first state is on disk, churns, and measures `opts.repeats` windows.
pub async fn run(
    env: &Env,
    opts: &PersistOptions,
    sim: &Proc,
    dir: &Path,
) -> Result<Vec<ChurnSample>, BenchError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(BenchError::io(format!("emptying {}", dir.display()), e)),
    }
    let plain = start_watchmux(env, "churn-plain", sim.addr, None).await?;
    let persisted = start_watchmux(env, "churn-persisted", sim.addr, Some(dir)).await?;
    let r = async {
        for w in [&plain, &persisted] {
            wait_until(w, opts.start_timeout, "synced", |m| {
                m.sum("watchmux_cache_synced", &[("resource", "pods")]) >= 1.0
            })
            .await?;
        }
        wait_until(&persisted, opts.start_timeout, "the first state", |m| {
            m.sum(
                "watchmux_persist_checkpoints_total",
                &[("resource", "pods")],
            ) >= 1.0
        })
        .await?;
        procs::wait_quiet(
            &[plain.pid(), persisted.pid(), sim.pid()],
            Duration::from_secs(30),
        )
        .await;
        targets::set_churn(sim.addr, opts.churn_rate, "realistic").await?;
        let windows = measure(opts, sim, &plain, &persisted).await;
        targets::set_churn(sim.addr, 0.0, "realistic").await?;
        windows
    }
    .await;
    plain.stop().await;
    persisted.stop().await;
    r
}

async fn measure(
    opts: &PersistOptions,
    sim: &Proc,
    plain: &Watchmux,
    persisted: &Watchmux,
) -> Result<Vec<ChurnSample>, BenchError> {
    tokio::time::sleep(opts.warmup).await;
    let mut out = Vec::new();
    let me = std::process::id();
    for r in 0..opts.repeats {
        let rv0 = sim_revision(sim).await?;
        let sim0 = SimCounters::read(sim.addr).await?;
        let busy0 = procs::machine_busy_secs();
        let sim_cpu0 = procs::usage(&[sim.pid()]).cpu_secs;
        let ours0 = procs::usage(&[sim.pid(), me]).cpu_secs;
        let a0 = Point::read(plain).await?;
        let b0 = Point::read(persisted).await?;
        let peaks = (
            PeakRss::start(vec![plain.pid()]),
            PeakRss::start(vec![persisted.pid()]),
        );
        let t0 = Instant::now();
        tokio::time::sleep(opts.churn_window).await;
        let a1 = Point::read(plain).await?;
        let b1 = Point::read(persisted).await?;
        let secs = t0.elapsed().as_secs_f64();
        let busy = procs::machine_busy_secs() - busy0;
        let ours = procs::usage(&[sim.pid(), me]).cpu_secs - ours0;
        let sim_cpu_s = procs::usage(&[sim.pid()]).cpu_secs - sim_cpu0;
        let sim_writes = sim_revision(sim).await?.saturating_sub(rv0) as f64;
        let sim_bytes = SimCounters::read(sim.addr).await?.since(&sim0).pod_bytes as f64 / 2.0;
        let other = busy - ours - (a1.cpu - a0.cpu) - (b1.cpu - b0.cpu);
        for (persisted, p0, p1, peak) in [(false, a0, a1, peaks.0), (true, b0, b1, peaks.1)] {
            let s = ChurnSample {
                persisted,
                repeat: r,
                secs,
                events: p1.events - p0.events,
                event_bytes: p1.event_bytes - p0.event_bytes,
                persist_bytes: p1.persist_bytes - p0.persist_bytes,
                io_write_bytes: p1.io - p0.io,
                checkpoints: p1.checkpoints - p0.checkpoints,
                dropped: p1.dropped - p0.dropped,
                write_errors: p1.write_errors - p0.write_errors,
                disk_bytes: p1.disk_bytes,
                cpu_s: p1.cpu - p0.cpu,
                persist_thread_cpu_s: p1.thread_cpu - p0.thread_cpu,
                peak_rss: peak.finish() as f64,
                sim_writes,
                sim_bytes,
                sim_cpu_s,
                other_cpu_s: other.max(0.0),
            };
            eprintln!(
                "  churn {} #{r}: {:.0} events/s (simulator {:.0} writes/s), {:.1} MB of events, {:.1} MB written ({:.1} MB per /proc), {} checkpoints, amplification {:.2}, CPU {:.2} s = {:.1} ms per 1,000 events (persister {:.2} s), peak RSS {:.0} MB",
                if persisted { "persisted" } else { "plain" },
                s.events_per_s(),
                s.sim_writes / s.secs,
                s.event_bytes / 1e6,
                s.persist_bytes / 1e6,
                s.io_write_bytes / 1e6,
                s.checkpoints,
                s.amplification(),
                s.cpu_s,
                s.cpu_ms_per_1000(),
                s.persist_thread_cpu_s,
                s.peak_rss / 1e6
            );
            out.push(s);
        }
    }
    Ok(out)
}

/// The simulator's current resourceVersion (every write advances it by one).
async fn sim_revision(sim: &Proc) -> Result<u64, BenchError> {
    let rv = targets::current_rv(sim.addr, "pods").await?;
    rv.parse()
        .map_err(|_| BenchError::Setup(format!("resourceVersion {rv:?} is not a number")))
}

/// Scrapes `w` every 100 ms until `check` holds (at most `timeout`).
async fn wait_until(
    w: &Watchmux,
    timeout: Duration,
    what: &str,
    check: impl Fn(&Metrics) -> bool,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(m) = scrape::scrape(w.addr).await
            && check(&m)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Run(format!(
                "watchmux did not reach {what} within {timeout:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
