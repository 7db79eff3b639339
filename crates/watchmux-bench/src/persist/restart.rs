//! Part 1 of the persistence bench: how long a start of watchmux takes to serve the fleet's
//! pods, with and without a persisted directory, with the upstream up and down, and what each
//! start costs the upstream and watchmux.
//!
//! Each repeat runs the four [`StartKind`]s in order: the second empties the directory and
//! leaves it filled (stopped with SIGTERM once its first state is written), the last two start
//! from it. Times are from just before the process is spawned. Measuring only: starting and
//! stopping watchmux is [`super`]'s.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::super::BenchError;
use super::super::client;
use super::super::procs::{self, PeakRss, Proc};
use super::super::scrape;
use super::super::targets::Env;
use super::probe::{self, SimCounters};
use super::{PersistOptions, start_watchmux};

/// How a start finds its persisted directory and its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StartKind {
    /// No `persist_dir`: a full sync from the upstream.
    Fresh,
    /// An empty `persist_dir`: a full sync, then the first state written.
    FreshPersisted,
    /// The directory a previous start left, the upstream up: load, serve, relist and bridge.
    RestoredUp,
    /// The directory a previous start left, the upstream down: load and serve from disk.
    RestoredDown,
}

impl StartKind {
    /// Every kind, in run and report order.
    pub const ALL: [StartKind; 4] = [
        StartKind::Fresh,
        StartKind::FreshPersisted,
        StartKind::RestoredUp,
        StartKind::RestoredDown,
    ];

    /// Short name (CSV, logs).
    pub fn name(self) -> &'static str {
        match self {
            StartKind::Fresh => "fresh",
            StartKind::FreshPersisted => "fresh-persisted",
            StartKind::RestoredUp => "restored-up",
            StartKind::RestoredDown => "restored-down",
        }
    }

    /// Whether the upstream is reachable.
    pub fn upstream_up(self) -> bool {
        self != StartKind::RestoredDown
    }

    /// Whether `persist_dir` is set.
    pub fn persisted(self) -> bool {
        self != StartKind::Fresh
    }
}

/// One start measured. Times are seconds from the spawn; `None`: not reached (or not
/// applicable to the kind).
#[derive(Debug, Clone)]
pub struct StartSample {
    /// Which start.
    pub kind: StartKind,
    /// Repeat number (0-based).
    pub repeat: usize,
    /// The process accepts connections.
    pub listening_s: f64,
    /// `/readyz` first answered 200.
    pub ready_s: Option<f64>,
    /// That first 200 said "serving stale" (a cache restored from disk and not reconciled, or
    /// an upstream outage).
    pub ready_stale: bool,
    /// `/readyz` first answered 200 without "serving stale" (the cache follows the upstream).
    pub fresh_s: Option<f64>,
    /// The first LIST `resourceVersion=0` answered 200 with every pod had been read in full.
    pub served_s: Option<f64>,
    /// LISTs tried until then (earlier ones: 429 while not synced).
    pub list_attempts: u64,
    /// Items of the served LIST.
    pub served_items: u64,
    /// Bytes of the served LIST.
    pub served_bytes: u64,
    /// [`StartKind::RestoredUp`]: the cache follows the upstream again: re-watched from the
    /// disk's resourceVersion (`watchmux_cache_staleness_seconds` 0), or a relist installed
    /// (bridged or reset: `watchmux_cache_relists_total`).
    pub reconciled_s: Option<f64>,
    /// How ("watched", "bridged", "reset").
    pub reconciled_as: Option<&'static str>,
    /// [`StartKind::FreshPersisted`]: the first full state was on disk
    /// (`watchmux_persist_checkpoints_total`).
    pub checkpoint_s: Option<f64>,
    /// watchmux's CPU seconds from the spawn to the end of the measurement.
    pub cpu_s: f64,
    /// watchmux's largest RSS during the start, bytes (sampled every 20 ms).
    pub peak_rss: u64,
    /// watchmux's RSS at the end of the measurement, bytes.
    pub rss: u64,
    /// What the simulator served for this start (`None` with the upstream down).
    pub upstream: Option<SimCounters>,
    /// The simulator's CPU seconds during the start.
    pub sim_cpu_s: f64,
    /// Bytes of the persisted directory after watchmux stopped (0 without one).
    pub dir_bytes: u64,
}

/// Runs every kind `opts.repeats` times; `dir` is the persisted directory (emptied by the
/// first persisted start of each repeat), `expected` the pods a full LIST must hold.
pub async fn run(
    env: &Env,
    opts: &PersistOptions,
    sim: &Proc,
    dir: &Path,
    expected: u64,
) -> Result<Vec<StartSample>, BenchError> {
    let mut out = Vec::new();
    for r in 0..opts.repeats {
        for kind in StartKind::ALL {
            procs::wait_quiet(&[sim.pid()], Duration::from_secs(10)).await;
            let s = measure(env, opts, sim, dir, expected, kind, r).await?;
            eprintln!("  {} #{r}: {}", kind.name(), brief(&s));
            out.push(s);
        }
    }
    Ok(out)
}

fn brief(s: &StartSample) -> String {
    let t = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into());
    format!(
        "listening {:.2} s, ready {} s{}, not stale {} s, served {} s ({} items, {} tries), reconciled {} s, checkpoint {} s, CPU {:.1} s, peak RSS {:.0} MB, upstream {} MB, dir {:.0} MB",
        s.listening_s,
        t(s.ready_s),
        if s.ready_stale { " (stale)" } else { "" },
        t(s.fresh_s),
        t(s.served_s),
        s.served_items,
        s.list_attempts,
        t(s.reconciled_s),
        t(s.checkpoint_s),
        s.cpu_s,
        s.peak_rss as f64 / 1e6,
        s.upstream
            .map(|u| format!("{:.0}", u.bytes as f64 / 1e6))
            .unwrap_or_else(|| "–".into()),
        s.dir_bytes as f64 / 1e6,
    )
}

async fn measure(
    env: &Env,
    opts: &PersistOptions,
    sim: &Proc,
    dir: &Path,
    expected: u64,
    kind: StartKind,
    repeat: usize,
) -> Result<StartSample, BenchError> {
    if kind == StartKind::FreshPersisted {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BenchError::io(format!("emptying {}", dir.display()), e)),
        }
    }
    let upstream = if kind.upstream_up() {
        sim.addr
    } else {
        // Nothing listens there: every upstream request is refused at once.
        procs::free_addr()?
    };
    let before = SimCounters::read(sim.addr).await?;
    let sim_cpu = procs::usage(&[sim.pid()]).cpu_secs;
    let t0 = Instant::now();
    let label = format!("{}-{repeat}", kind.name());
    let wm = start_watchmux(env, &label, upstream, kind.persisted().then_some(dir)).await?;
    let listening_s = t0.elapsed().as_secs_f64();
    let peak = PeakRss::start(vec![wm.pid()]);
    let deadline = t0 + opts.start_timeout;
    let (stop_ready, ready_seen) = (CancellationToken::new(), CancellationToken::new());
    let served = async {
        let r = poll_full_list(wm.addr, expected, t0, deadline).await;
        // With the upstream down `/readyz` never says "ok" without "serving stale" (and may
        // not pass at all): it is polled until its first 200, or a grace period past the LIST.
        if !kind.upstream_up() {
            tokio::select! {
                _ = ready_seen.cancelled() => {}
                _ = tokio::time::sleep(opts.ready_grace) => {}
            }
            stop_ready.cancel();
        }
        r
    };
    let ready = poll_ready(wm.addr, t0, deadline, &stop_ready, &ready_seen);
    let reconciled = async {
        if kind != StartKind::RestoredUp {
            return None;
        }
        poll_metric(wm.addr, t0, deadline, |m| {
            let of = |o| {
                m.sum(
                    "watchmux_cache_relists_total",
                    &[("resource", "pods"), ("outcome", o)],
                )
            };
            if of("bridged") > 0.0 {
                Some("bridged")
            } else if of("reset") > 0.0 {
                Some("reset")
            } else if m.sum("watchmux_cache_synced", &[("resource", "pods")]) == 1.0
                && m.sum("watchmux_cache_staleness_seconds", &[("resource", "pods")]) == 0.0
            {
                // (Before the restored cache is published its staleness reads 0 too: the synced
                // gauge tells the two apart.)
                // Re-watched from the disk's resourceVersion: following the upstream again
                // without a relist.
                Some("watched")
            } else {
                None
            }
        })
        .await
    };
    let checkpoint = async {
        if kind != StartKind::FreshPersisted {
            return None;
        }
        poll_metric(wm.addr, t0, deadline, |m| {
            (m.sum(
                "watchmux_persist_checkpoints_total",
                &[("resource", "pods")],
            ) >= 1.0)
                .then_some(())
        })
        .await
    };
    let (served, ready, reconciled, checkpoint) =
        tokio::join!(served, ready, reconciled, checkpoint);
    let (served_s, list_attempts, counted) = served;
    let usage = procs::usage(&[wm.pid()]);
    let peak_rss = peak.finish();
    let upstream_load = if kind.upstream_up() {
        Some(probe::settled(sim.addr).await?.since(&before))
    } else {
        None
    };
    let sim_cpu_s = procs::usage(&[sim.pid()]).cpu_secs - sim_cpu;
    wm.stop().await;
    let sample = StartSample {
        kind,
        repeat,
        listening_s,
        ready_s: ready.first,
        ready_stale: ready.first_stale,
        fresh_s: ready.fresh,
        served_s,
        list_attempts,
        served_items: counted.items,
        served_bytes: counted.bytes,
        reconciled_s: reconciled.map(|(t, _)| t),
        reconciled_as: reconciled.map(|(_, how)| how),
        checkpoint_s: checkpoint.map(|(t, ())| t),
        cpu_s: usage.cpu_secs,
        peak_rss: peak_rss.max(usage.rss_bytes),
        rss: usage.rss_bytes,
        upstream: upstream_load,
        sim_cpu_s,
        dir_bytes: if kind.persisted() {
            probe::dir_bytes(dir)
        } else {
            0
        },
    };
    if sample.served_s.is_none() {
        return Err(BenchError::Run(format!(
            "{} start #{repeat}: no full LIST of {expected} pods within {:?} (last answer: {} with {} items; log: {})",
            kind.name(),
            opts.start_timeout,
            counted.status,
            counted.items,
            env.log(&format!("watchmux-{label}")).display()
        )));
    }
    Ok(sample)
}

/// When `/readyz` passed: first at all, and first without "serving stale" (seconds from the
/// spawn).
#[derive(Debug, Clone, Copy, Default)]
struct Readiness {
    first: Option<f64>,
    first_stale: bool,
    fresh: Option<f64>,
}

/// Polls `/readyz` every 20 ms until it answers 200 without "serving stale", `deadline` or
/// `stop`; cancels `seen` at its first 200.
async fn poll_ready(
    addr: SocketAddr,
    t0: Instant,
    deadline: Instant,
    stop: &CancellationToken,
    seen: &CancellationToken,
) -> Readiness {
    let mut r = Readiness::default();
    while Instant::now() < deadline && !stop.is_cancelled() {
        if let Ok((200, body)) = client::get_body(addr, "/readyz").await {
            let at = t0.elapsed().as_secs_f64();
            let stale = memchr::memmem::find(&body, b"stale").is_some();
            if r.first.is_none() {
                r.first = Some(at);
                r.first_stale = stale;
                seen.cancel();
            }
            if !stale {
                r.fresh = Some(at);
                return r;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
    r
}

/// LISTs `resourceVersion=0` until one answers 200 with `expected` pods: the seconds from `t0`
/// to the end of that body, the LISTs tried, and the last answer.
async fn poll_full_list(
    addr: SocketAddr,
    expected: u64,
    t0: Instant,
    deadline: Instant,
) -> (Option<f64>, u64, probe::Counted) {
    let mut tries = 0;
    let mut last = probe::Counted::default();
    while Instant::now() < deadline {
        tries += 1;
        if let Ok(c) = probe::count_list(addr, "/api/v1/pods?resourceVersion=0").await {
            last = c;
            if c.status == 200 && c.items == expected {
                return (Some(t0.elapsed().as_secs_f64()), tries, c);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (None, tries, last)
}

/// Scrapes `/metrics` every 100 ms until `check` finds what it looks for: the seconds from
/// `t0` and what it found.
async fn poll_metric<T>(
    addr: SocketAddr,
    t0: Instant,
    deadline: Instant,
    check: impl Fn(&scrape::Metrics) -> Option<T>,
) -> Option<(f64, T)> {
    while Instant::now() < deadline {
        if let Ok(m) = scrape::scrape(addr).await
            && let Some(v) = check(&m)
        {
            return Some((t0.elapsed().as_secs_f64(), v));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
