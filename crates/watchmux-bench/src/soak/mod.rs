//! `watchmux-bench soak`: a bounded chaos soak. The simulator (churning pods: creates, status
//! updates, relabels and node moves that carry them in and out of selectors, deletes) runs as
//! watchmux's upstream and injects faults on a schedule drawn from the seed; thousands of
//! informer-like watchers ([`watcher`]) of every kind (chunked and websocket, JSON and
//! protobuf, with and without selectors, slow, stalled, resuming, watch-list) read through
//! watchmux. When churn and faults stop and the simulator settles, every watcher's view must
//! equal the simulator's state under its selector, no watcher may have seen a resourceVersion
//! twice or out of order ([`checker`]), watchmux's memory must plateau, its open files must come
//! back to their baseline once the watchers are gone, and neither process may have panicked.
//!
//! Orchestration only: it starts the processes (the bench's `sim` and `serve` roles), the
//! watchers and the fault schedule ([`chaos`]), samples watchmux's RSS and open files, gathers
//! the findings and renders them ([`report`]). The checks' rules live in [`checker`]; the plan
//! (what runs when) in [`plan`]. Every wait is bounded, and every child is killed at the end.

pub mod chaos;
pub mod checker;
pub mod events;
pub mod plan;
pub mod report;
pub mod stream;
pub mod watcher;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

use super::BenchError;
use super::client::{self, Encoding};
use super::procs;
use super::scrape;
use super::targets::{self, Env};
use checker::{Kind, State};
use plan::{FaultKind, Selector, Shape};
use report::{Check, Findings, MixRow, Sample};
use watcher::{Control, Counts, WatcherState};

/// What a soak runs.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// The `watchmux-bench` binary (also the simulator and watchmux).
    pub exe: PathBuf,
    /// Length of the chaos phase (churn and faults).
    pub duration: Duration,
    /// Watchers.
    pub watchers: usize,
    /// Pod writes per second.
    pub churn_per_sec: f64,
    /// Seed of the watcher mix, the fault schedule and the churn.
    pub seed: u64,
    /// Pods of the fleet at the start.
    pub pods: usize,
    /// Nodes of the fleet.
    pub nodes: usize,
    /// Namespaces of the fleet.
    pub namespaces: usize,
    /// How long watchers may take to converge once the simulator settled.
    pub settle_timeout: Duration,
    /// Where to write `soak.md`, `soak-rss.csv` and the two processes' logs (none: nowhere).
    pub out: Option<PathBuf>,
    /// The command line, for the report.
    pub command: String,
}

impl SoakOptions {
    /// The defaults: 10 minutes, 2,000 watchers, 20 writes/s over 200 pods on 10 nodes.
    pub fn new(exe: PathBuf) -> SoakOptions {
        SoakOptions {
            exe,
            duration: Duration::from_secs(600),
            watchers: 2000,
            churn_per_sec: 20.0,
            seed: 1,
            pods: 200,
            nodes: 10,
            namespaces: 5,
            settle_timeout: Duration::from_secs(120),
            out: None,
            command: "watchmux-bench soak".into(),
        }
    }
}

/// What a soak found.
#[derive(Debug)]
pub struct SoakReport {
    /// Every check held.
    pub passed: bool,
    /// Everything gathered (checks, counts, series).
    pub findings: Findings,
    /// The Markdown report.
    pub markdown: String,
}

/// watchmux's `[cache]` settings for a soak: bookmarks every few seconds, and a short watcher
/// queue and lag bound so stalled readers are cut off within seconds rather than minutes.
const CACHE_SETTINGS: &str =
    "bookmark_interval_secs = 5\nwatcher_queue = 16\nwatcher_max_lag_bytes = 262144\n";

/// Violations shown with their evidence in the report, per kind.
const EVIDENCE_PER_KIND: usize = 3;

/// Open files watchmux may hold beyond its baseline once every watcher is gone: idle pooled
/// upstream connections (freshness checks, relists) that the baseline did not have yet.
const FD_SLACK: usize = 8;

/// A stalled reader that finds this much to read when it reads again must have been cut off:
/// Linux lets a socket hold 4 MiB unsent, and watchmux holds a transport queue and its lag
/// bound (256 KiB) on top.
const STALL_BOUND: u64 = 8 << 20;

/// Below this chaos phase the RSS plateau is reported, not judged (start-up dominates), and
/// stalls need not reach [`STALL_BOUND`].
const PLATEAU_MIN: Duration = Duration::from_secs(120);

/// Open file descriptors of `pid` (0 when unreadable).
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `line` without its terminal colour codes (`ESC [ … m`).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// watchmux's "watcher closed" log lines, counted by reason.
fn close_reasons(log: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        if !line.contains("watcher closed") {
            continue;
        }
        let line = plain(line);
        let reason = line
            .split_once("reason=\"")
            .and_then(|(_, r)| r.split_once('"'))
            .map_or("(none given)", |(r, _)| r);
        *out.entry(reason.to_string()).or_default() += 1;
    }
    out
}

/// Lines of `log` that report a panic.
fn panic_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("panicked at") || l.contains("panicked:"))
        .take(5)
        .map(str::to_string)
        .collect()
}

/// The simulator's pods under `sel`, read from the simulator itself.
async fn sim_state(sim: SocketAddr, sel: &Selector) -> Result<State, BenchError> {
    let (head, body) = client::get_body_as(sim, &sel.url(""), Encoding::Json)
        .await
        .map_err(|e| BenchError::io("listing the simulator's pods", e))?;
    if head.status != 200 {
        return Err(BenchError::Run(format!(
            "the simulator answered {} to {}",
            head.status,
            sel.url("")
        )));
    }
    let (_, items) = events::json_list(&body).map_err(BenchError::Run)?;
    Ok(items.into_iter().collect())
}

/// Waits (at most `max`) until the simulator's resourceVersion stays put for 3 s: churn has
/// stopped and the simulated kubelets finished their graceful deletions.
async fn settled_rv(sim: SocketAddr, max: Duration) -> Result<u64, BenchError> {
    let t0 = Instant::now();
    let read = || async {
        targets::current_rv(sim, "pods")
            .await
            .map(|r| r.parse::<u64>().unwrap_or(0))
    };
    let mut last = read().await?;
    let mut since = Instant::now();
    while t0.elapsed() < max {
        sleep(Duration::from_millis(500)).await;
        let now = read().await?;
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_secs(3) {
            return Ok(last);
        }
    }
    Err(BenchError::Run(format!(
        "the simulator did not settle within {max:?} (resourceVersion still moving at {last})"
    )))
}

/// Samples watchmux's RSS and open files every `every` until `stop`.
fn sample(
    pid: u32,
    t0: Instant,
    every: Duration,
    stop: CancellationToken,
) -> Arc<Mutex<Vec<Sample>>> {
    let out = Arc::new(Mutex::new(Vec::new()));
    let o = out.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {
                    let s = Sample {
                        t: t0.elapsed().as_secs_f64(),
                        rss: procs::usage(&[pid]).rss_bytes,
                        fds: fd_count(pid),
                    };
                    o.lock().push(s);
                }
            }
        }
    });
    out
}

/// Runs the soak and writes its report (when `out` is set). Checks that fail make
/// [`SoakReport::passed`] false; an `Err` means the soak itself could not run.
pub async fn run(opts: &SoakOptions) -> Result<SoakReport, BenchError> {
    let started = Instant::now();
    let nofile = super::raise_nofile_limit();
    let work = tempfile::Builder::new()
        .prefix("watchmux-soak-")
        .tempdir()
        .map_err(|e| BenchError::io("creating a scratch directory", e))?;
    let env = Env {
        exe: opts.exe.clone(),
        workdir: work.path().to_path_buf(),
        nginx: None,
        pki: None,
    };
    let sim_args: Vec<String> = [
        "--nodes",
        &opts.nodes.to_string(),
        "--pods",
        &opts.pods.to_string(),
        "--namespaces",
        &opts.namespaces.to_string(),
        "--seed",
        &opts.seed.to_string(),
        "--history-window-secs",
        "600",
        "--bookmark-interval-secs",
        "5",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let sim = targets::start_sim_args(&env, &sim_args).await?;
    // At info, watchmux logs why it closed each watcher: the report counts the reasons.
    let wm =
        targets::start_watchmux_with(&env, &sim, &["pods"], CACHE_SETTINGS, Some("info")).await?;
    wm.wait_ready(Duration::from_secs(120)).await?;
    let pid = wm.pids().first().copied().unwrap_or(0);
    sleep(Duration::from_millis(500)).await;
    let baseline_fds = fd_count(pid);

    let d = opts.duration;
    let the_plan = plan::plan(
        opts.seed,
        Shape {
            watchers: opts.watchers,
            duration: d,
            nodes: opts.nodes,
            namespaces: opts.namespaces,
        },
    );
    targets::sim_control(
        sim.addr,
        &format!(
            "/sim/churn?perSecond={}&mix=realistic&seed={}",
            opts.churn_per_sec, opts.seed
        ),
    )
    .await?;
    let ctl = Arc::new(Control::new(wm.addr, 64));
    let t0 = ctl.t0;
    let sampler_stop = CancellationToken::new();
    let every = (d / 300).clamp(Duration::from_millis(500), Duration::from_secs(5));
    let samples = sample(pid, t0, every, sampler_stop.clone());

    let states: Vec<Arc<WatcherState>> = the_plan
        .watchers
        .iter()
        .map(|p| Arc::new(WatcherState::new(p.clone())))
        .collect();
    let tasks: Vec<_> = states
        .iter()
        .map(|w| tokio::spawn(watcher::run(w.clone(), ctl.clone())))
        .collect();
    let faults_stop = CancellationToken::new();
    let faults = tokio::spawn({
        let (sim_addr, plan, stop) = (sim.addr, the_plan.faults.clone(), faults_stop.clone());
        async move { chaos::run(sim_addr, t0, &plan, stop).await }
    });

    // The chaos phase, with a progress line now and then.
    let progress = Duration::from_secs(30).min(d / 10);
    while t0.elapsed() < d {
        sleep(progress.min(d.saturating_sub(t0.elapsed()))).await;
        let events: u64 = states
            .iter()
            .map(|w| w.inner.lock().1.events.values().sum::<u64>())
            .sum();
        // Namespaces, not pods: injected errors apply to pod requests, which are watchmux's.
        let sim_rv = targets::current_rv(sim.addr, "namespaces").await.ok();
        let cache_rv = scrape::scrape(wm.addr)
            .await
            .map(|m| m.sum("watchmux_cache_resource_version", &[]))
            .ok();
        eprintln!(
            "soak: {:.0} s, {events} events delivered, watchmux RSS {:.1} MiB, {} open fds, simulator at {}, watchmux's cache at {}",
            t0.elapsed().as_secs_f64(),
            procs::usage(&[pid]).rss_bytes as f64 / 1048576.0,
            fd_count(pid),
            sim_rv.unwrap_or_default(),
            cache_rv.unwrap_or_default()
        );
    }

    // Settle: faults and churn stop, stalled and slow readers read again.
    faults_stop.cancel();
    let injected = faults.await.unwrap_or_default();
    let mut fault_failures = injected.failed.clone();
    if let Err(e) = chaos::clear(sim.addr).await {
        fault_failures.push(e);
    }
    targets::sim_control(sim.addr, "/sim/churn?perSecond=0").await?;
    let chaos_secs = t0.elapsed().as_secs_f64();
    ctl.calm.cancel();
    eprintln!("soak: chaos over after {chaos_secs:.0} s; settling");
    let final_rv = settled_rv(sim.addr, Duration::from_secs(60)).await?;
    let settled_at = Instant::now();
    let mut expected: HashMap<Selector, State> = HashMap::new();
    for w in &states {
        if !expected.contains_key(&w.plan.selector) {
            let s = sim_state(sim.addr, &w.plan.selector).await?;
            expected.insert(w.plan.selector.clone(), s);
        }
    }
    let empty = State::new();
    let want = |w: &WatcherState| expected.get(&w.plan.selector).unwrap_or(&empty);
    loop {
        let pending = states
            .iter()
            .filter(|w| !w.inner.lock().0.diff(want(w), 1).is_empty())
            .count();
        if pending == 0 || settled_at.elapsed() >= opts.settle_timeout {
            break;
        }
        sleep(Duration::from_millis(500)).await;
    }
    let converge_secs = settled_at.elapsed().as_secs_f64();
    for w in &states {
        let mut g = w.inner.lock();
        let diff = g.0.diff(want(w), 5);
        if !diff.is_empty() {
            g.0.diverged(diff);
        }
    }
    let upstream = targets::sim_requests(sim.addr, "pods")
        .await
        .map(|(l, w, _)| (l, w))
        .unwrap_or_default();

    // Close every watcher; watchmux's open files must come back to their baseline.
    ctl.stop.cancel();
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
    }
    let fd_deadline = Instant::now() + Duration::from_secs(30);
    let mut end_fds = fd_count(pid);
    while end_fds > baseline_fds + FD_SLACK && Instant::now() < fd_deadline {
        sleep(Duration::from_millis(250)).await;
        end_fds = fd_count(pid);
    }
    let metrics = scrape::scrape(wm.addr).await;
    sampler_stop.cancel();
    wm.stop().await;
    sim.stop().await;
    let closed_reasons = close_reasons(&env.log("watchmux"));
    let mut panics = panic_lines(&env.log("watchmux"));
    panics.extend(panic_lines(&env.log("simulator")));

    let samples = samples.lock().clone();
    let mut f = Findings {
        command: opts.command.clone(),
        setup: format!(
            "seed {}, {} watchers, {:.0} s of chaos, churn {} writes/s over {} pods on {} nodes in {} namespaces, open-file limit {nofile}",
            opts.seed,
            opts.watchers,
            d.as_secs_f64(),
            opts.churn_per_sec,
            opts.pods,
            opts.nodes,
            opts.namespaces
        ),
        machine: super::machine(),
        fault_plan: the_plan.faults.clone(),
        faults: injected.by_kind.clone(),
        fault_failures,
        chaos_secs,
        converge_secs,
        final_rv,
        upstream,
        closed_reasons,
        ..Findings::default()
    };
    gather(&mut f, &states);
    if let Ok(m) = &metrics {
        f.metrics = metric_rows(m);
    }
    f.plateau = Some(report::plateau(&samples, chaos_secs));
    let peak_fds = samples.iter().map(|s| s.fds).max().unwrap_or(0);
    f.samples = samples;
    f.checks = checks(
        &f,
        opts,
        &states,
        metrics.as_ref().ok(),
        (baseline_fds, peak_fds, end_fds),
        &panics,
    );
    f.minutes = started.elapsed().as_secs_f64() / 60.0;
    let markdown = report::markdown(&f);
    if let Some(out) = &opts.out {
        write_out(out, &markdown, &f.samples, &env)?;
    }
    Ok(SoakReport {
        passed: f.checks.iter().all(|c| c.passed),
        findings: f,
        markdown,
    })
}

fn write_out(out: &Path, markdown: &str, samples: &[Sample], env: &Env) -> Result<(), BenchError> {
    std::fs::create_dir_all(out)
        .map_err(|e| BenchError::io(format!("creating {}", out.display()), e))?;
    let write = |name: &str, body: &str| {
        let p = out.join(name);
        std::fs::write(&p, body).map_err(|e| BenchError::io(format!("writing {}", p.display()), e))
    };
    write("soak.md", markdown)?;
    write("soak-rss.csv", &report::samples_csv(samples))?;
    for name in ["watchmux", "simulator"] {
        let _ = std::fs::copy(env.log(name), out.join(format!("soak-{name}.log")));
    }
    Ok(())
}

fn add(into: &mut Counts, c: &Counts) {
    for (k, v) in &c.events {
        *into.events.entry(*k).or_default() += v;
    }
    into.bookmarks += c.bookmarks;
    into.syncs += c.syncs;
    into.relists += c.relists;
    into.resumes += c.resumes;
    into.planned_disconnects += c.planned_disconnects;
    into.bytes += c.bytes;
    into.relayed_malformed += c.relayed_malformed;
    into.stalls.extend_from_slice(&c.stalls);
    for (k, v) in &c.ends {
        *into.ends.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &c.refusals {
        *into.refusals.entry(k.clone()).or_default() += v;
    }
}

/// Sums every watcher's counts and violations, overall, by kind and by selector.
fn gather(f: &mut Findings, states: &[Arc<WatcherState>]) {
    for w in states {
        let g = w.inner.lock();
        let (tracker, counts) = &*g;
        let kind = w.plan.kind();
        let violations: u64 = tracker.counts().values().sum();
        add(&mut f.totals, counts);
        for (k, v) in tracker.counts() {
            *f.violations.entry(*k).or_default() += v;
        }
        // The first few of each kind, over every watcher.
        for v in tracker.kept() {
            let same = f
                .evidence
                .iter()
                .filter(|(_, _, e)| e.kind == v.kind)
                .count();
            if same < EVIDENCE_PER_KIND {
                f.evidence.push((w.plan.id, kind.clone(), v.clone()));
            }
        }
        for (table, key) in [
            (&mut f.mix, kind),
            (&mut f.selectors, w.plan.selector.url("")),
        ] {
            let row: &mut MixRow = table.entry(key).or_default();
            row.watchers += 1;
            row.violations += violations;
            add(&mut row.counts, counts);
        }
    }
}

/// The metrics the report shows: how watchmux cut watchers off, relisted, met the faults.
fn metric_rows(m: &scrape::Metrics) -> Vec<(String, String, f64)> {
    const NAMES: [&str; 11] = [
        "watchmux_slow_watchers_closed_total",
        "watchmux_watch_starts_total",
        "watchmux_reads_total",
        "watchmux_upstream_relists_total",
        "watchmux_cache_relists_total",
        "watchmux_upstream_watch_ends_total",
        "watchmux_upstream_watch_connects_total",
        "watchmux_upstream_requests_total",
        "watchmux_freshness_checks_total",
        "watchmux_watch_events_sent_total",
        "watchmux_cache_objects",
    ];
    let mut rows = Vec::new();
    for name in NAMES {
        for (labels, v) in m.series(name) {
            let labels = labels
                .iter()
                .filter(|(k, _)| k != "resource")
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            rows.push((name.to_string(), labels, v));
        }
    }
    rows
}

/// The pass/fail checks.
fn checks(
    f: &Findings,
    opts: &SoakOptions,
    states: &[Arc<WatcherState>],
    metrics: Option<&scrape::Metrics>,
    (baseline_fds, peak_fds, end_fds): (usize, usize, usize),
    panics: &[String],
) -> Vec<Check> {
    let mut out = Vec::new();
    let mut check = |name, passed, detail: String| {
        out.push(Check {
            name,
            passed,
            detail,
        })
    };
    let stream_violations: u64 = f
        .violations
        .iter()
        .filter(|(k, _)| **k != Kind::Divergence)
        .map(|(_, v)| v)
        .sum();
    check(
        "every resourceVersion at most once, in order; every event fits the view",
        stream_violations == 0,
        format!(
            "{stream_violations} violations over {} events",
            f.totals.events.values().sum::<u64>()
        ),
    );
    let diverged = states
        .iter()
        .filter(|w| w.inner.lock().0.counts().contains_key(&Kind::Divergence))
        .count();
    check(
        "every watcher's view equals the simulator's state under its selector",
        diverged == 0,
        format!(
            "{diverged} of {} watchers differ after {:.1} s (bound {:.0} s)",
            states.len(),
            f.converge_secs,
            opts.settle_timeout.as_secs_f64()
        ),
    );
    let resumers: Vec<_> = states
        .iter()
        .filter(|w| w.plan.resume_every.is_some())
        .collect();
    let resumed = resumers
        .iter()
        .filter(|w| w.inner.lock().1.planned_disconnects > 0)
        .count();
    let resumer_violations: u64 = resumers
        .iter()
        .map(|w| w.inner.lock().0.counts().values().sum::<u64>())
        .sum();
    check(
        "resuming watchers lost nothing",
        resumer_violations == 0 && (resumers.is_empty() || resumed > 0),
        format!(
            "{resumed} of {} resuming watchers disconnected and resumed ({} planned disconnects); {resumer_violations} violations among them",
            resumers.len(),
            resumers
                .iter()
                .map(|w| w.inner.lock().1.planned_disconnects)
                .sum::<u64>()
        ),
    );
    let missing: Vec<&str> = FaultKind::ALL
        .iter()
        .filter(|k| !f.faults.contains_key(k))
        .map(|k| k.name())
        .collect();
    check(
        "every fault kind injected",
        missing.is_empty() && f.fault_failures.is_empty(),
        format!(
            "{} faults; missing: {}; failed: {}",
            f.faults.values().sum::<u64>(),
            if missing.is_empty() {
                "none".to_string()
            } else {
                missing.join(", ")
            },
            if f.fault_failures.is_empty() {
                "none".to_string()
            } else {
                f.fault_failures.join("; ")
            }
        ),
    );
    let stalled = states
        .iter()
        .filter(|w| w.plan.reader.name() == "stalled")
        .count();
    let closed = metrics
        .map(|m| m.sum("watchmux_slow_watchers_closed_total", &[]))
        .unwrap_or(0.0);
    let stalls = &f.totals.stalls;
    let judged: Vec<&(u64, bool)> = stalls.iter().filter(|(b, _)| *b >= STALL_BOUND).collect();
    let not_cut = judged.iter().filter(|(_, cut)| !cut).count();
    let cut = stalls.iter().filter(|(_, cut)| *cut).count();
    let largest_uncut = stalls.iter().filter(|(_, c)| !c).map(|(b, _)| *b).max();
    let smallest_cut = stalls.iter().filter(|(_, c)| *c).map(|(b, _)| *b).min();
    let mib = |b: Option<u64>| {
        b.map_or("none".to_string(), |b| {
            format!("{:.1} MiB", b as f64 / 1048576.0)
        })
    };
    // A long soak must cut some stalled readers off; a short one may not get that far.
    let must_cut = stalled > 0 && opts.duration >= PLATEAU_MIN;
    check(
        "watchmux cut stalled readers off (none left 8 MiB behind)",
        not_cut == 0 && (!must_cut || (cut > 0 && closed >= 1.0)),
        format!(
            "{stalled} stalled watchers, {} stalls measured: {cut} cut off, {not_cut} not cut off with 8 MiB or more to read; most read without being cut {}, least read before a cut {}; watchmux_slow_watchers_closed_total {closed}",
            stalls.len(),
            mib(largest_uncut),
            mib(smallest_cut)
        ),
    );
    check(
        "watchmux's open files back to baseline after the watchers closed",
        end_fds <= baseline_fds + FD_SLACK,
        format!(
            "baseline {baseline_fds}, peak {peak_fds}, after closing {end_fds} (slack {FD_SLACK})"
        ),
    );
    if let Some(p) = f.plateau {
        let judged = opts.duration >= PLATEAU_MIN;
        check(
            "watchmux's RSS plateaus",
            p.flat || !judged,
            format!(
                "max RSS last third {:.1} MiB vs middle third {:.1} MiB{}",
                p.last_max as f64 / 1048576.0,
                p.middle_max as f64 / 1048576.0,
                if judged {
                    ""
                } else {
                    " (not judged: chaos phase under 120 s)"
                }
            ),
        );
    }
    check(
        "no panic in watchmux's or the simulator's log",
        panics.is_empty(),
        if panics.is_empty() {
            "none".to_string()
        } else {
            panics.join(" / ")
        },
    );
    check(
        "watchmux answered /metrics at the end",
        metrics.is_some(),
        String::new(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_are_read_from_coloured_and_plain_log_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("watchmux.log");
        std::fs::write(
            &log,
            "\u{1b}[2m2026-01-01T00:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m watcher closed \u{1b}[3mreason\u{1b}[0m\u{1b}[2m=\u{1b}[0m\"lagging beyond the byte bound\" \u{1b}[3mcursor\u{1b}[0m=7\n\
             INFO watcher closed reason=\"lagging beyond the byte bound\" cursor=8\n\
             INFO watcher closed reason=\"fell out of the event window\" cursor=9\n\
             INFO listed objects=3\n",
        )
        .unwrap();
        let r = close_reasons(&log);
        assert_eq!(r.get("lagging beyond the byte bound"), Some(&2));
        assert_eq!(r.get("fell out of the event window"), Some(&1));
        assert_eq!(r.len(), 2);
        assert!(panic_lines(&log).is_empty());
    }
}
