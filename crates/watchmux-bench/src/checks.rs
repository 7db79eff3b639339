//! S14.1 consistency checks (S14.2, shard dispatch, is [`super::shards`]): what one check of a cache against the upstream costs
//! (`cache.consistency_check_secs`, `src/reflector/consistency.rs`): the upstream bytes it reads
//! (the metadata LIST at the cache's resourceVersion, pages of 10,000, protobuf), watchmux's CPU
//! and the upstream's (the simulator's) CPU, beside the full LIST of the sync it repeats in part.
//!
//! One simulator holds P pods (its fleet); no writes. In each repeat two fresh watchmux processes
//! caching pods run one after the other against it: `checks` with `consistency_check_secs = 1`,
//! so that checks follow each other (the next 1–1.5 s after the end of the last), measured over
//! a window of C checks from the end of its first; then `idle` with the checks off, measured
//! over a window of the same length that starts as long after its sync: its CPU per second is
//! what the process costs without checks, taken off the checks' figure. The idle process runs
//! second so its window can be exactly as long as the one it is compared with.
//!
//! Drives the two processes and reads counters (watchmux's `/metrics`, `/proc`); starting and
//! stopping processes is [`targets`]'s. Timings are measured, never asserted: the scenario fails
//! only when a check does not succeed, or C checks do not end within their bound.

use std::time::{Duration, Instant};

use super::procs::{self, PeakRss, Proc, Usage};
use super::report::{Sample, ScenarioSpec};
use super::scenarios::{MB, brief, m};
use super::scrape::{self, Metrics};
use super::targets::{self, Env, Target, TargetKind};
use super::{BenchError, Sizes};

/// The scenario's id.
pub const ID: &str = "S14.1";
/// The resource cached and checked.
const RESOURCE: &str = "pods";
/// How often `/metrics` is read while a window runs (in both processes: its own cost is in the
/// idle figure too). Well under the 1 s between checks, so a window starts and ends between
/// two; not more often, as a page costs watchmux a few CPU-ms (at 50 ms, 20 pages a second were
/// most of the idle process's 66 CPU-ms/s).
const POLL: Duration = Duration::from_millis(250);
/// Bound on each check a wait counts (the first after the sync, then each of the window's).
const PER_CHECK_BOUND: Duration = Duration::from_secs(60);
/// Bound on a process's sync.
const SYNC_BOUND: Duration = Duration::from_secs(600);
const CHECKS: &str = "watchmux_consistency_checks_total";
const BYTES: &str = "watchmux_upstream_bytes_total";
const REQUESTS: &str = "watchmux_upstream_requests_total";

/// The report table of S14.
pub fn spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec::table(
        ID,
        "consistency checks",
        format!(
            "One simulator holds P pods (its fleet, {} namespaces), no writes. Each repeat runs two fresh watchmux processes caching pods (`mode = \"listed\"`), one after the other: `checks` with `consistency_check_secs = 1`, so the checks follow each other (each compares the cache with the upstream's PartialObjectMetadataList at the cache's resourceVersion, `resourceVersionMatch=Exact`, pages of 10,000, protobuf; the next starts 1–1.5 s after the end of the last); then `idle` with `consistency_check_secs = 0` (no checks). The checks window starts when the first check after the sync has succeeded and ends when {} more have (`{CHECKS}{{status=\"success\"}}`, read every {} ms; the idle process's `/metrics` is read as often); the idle window starts as long after its sync and lasts as long. Every check must succeed: a failure or a skip after the sync fails the scenario, as does a check not ending within {} s. Checks = successes in the window; s per check = window ÷ checks (a check and the 1–1.5 s wait after it). Check MB = `{BYTES}{{verb=\"consistency\"}}` ÷ checks; pages = `{REQUESTS}{{verb=\"consistency\"}}` ÷ checks; LIST MB = `{BYTES}{{verb=\"list\"}}` after the sync (the reflector's full protobuf LIST); check ÷ LIST = their ratio. CPU-ms per check = the `checks` process's CPU (`/proc`, 10 ms ticks) over the window ÷ checks; idle CPU-ms/s = the `idle` process's CPU ÷ its window; net = CPU-ms per check − idle CPU-ms/s × window ÷ checks. Upstream CPU-ms per check, idle CPU-ms/s and net: the same for the simulator's process over the same windows. Peak RSS growth = the `checks` process's highest RSS during the window (sampled every 20 ms) − its RSS at the window's start. Sync s = from starting the `checks` process to `/readyz` 200.",
            50,
            s.checks_count,
            POLL.as_millis(),
            PER_CHECK_BOUND.as_secs(),
        ),
        "pods",
        vec![
            m("checks", "checks", true),
            m("s_per_check", "s per check", false),
            m("check_mb", "check MB", false),
            m("pages_per_check", "pages per check", false),
            m("list_mb", "LIST MB", false),
            m("check_list_ratio", "check ÷ LIST", false),
            m("cpu_ms_per_check", "CPU-ms per check", false),
            m("idle_cpu_ms_per_s", "idle CPU-ms/s", false),
            m("net_cpu_ms_per_check", "net CPU-ms per check", false),
            m("sim_cpu_ms_per_check", "upstream CPU-ms per check", false),
            m("sim_idle_cpu_ms_per_s", "upstream idle CPU-ms/s", false),
            m(
                "sim_net_cpu_ms_per_check",
                "upstream net CPU-ms per check",
                false,
            ),
            m("peak_rss_growth_mb", "peak RSS growth MB", false),
            m("sync_s", "sync s", false),
        ],
    )
}

/// How many repeats S14 runs.
pub fn repeats(s: &Sizes) -> usize {
    s.checks_repeats.unwrap_or(s.repeats)
}

/// Runs S14 (watchmux only: the checks are its own).
pub async fn run(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    if !kinds.contains(&TargetKind::Watchmux) {
        return Ok(());
    }
    let pods = s.checks_pods;
    let sim = targets::start_sim(env, (pods / 30).max(1), pods).await?;
    let result = async {
        for r in 0..repeats(s) {
            let values = repeat(env, s, &sim).await?;
            let sample = Sample {
                scenario: ID,
                case: pods.to_string(),
                target: TargetKind::Watchmux,
                repeat: r,
                values,
            };
            eprintln!("  {ID} P={pods} #{r}: {}", brief(&sample));
            out.push(sample);
        }
        Ok(())
    }
    .await;
    sim.stop().await;
    result
}

/// watchmux's counters of the pods' checks and upstream bytes at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    success: f64,
    failure: f64,
    skipped: f64,
    check_bytes: f64,
    pages: f64,
    list_bytes: f64,
}

impl Counters {
    fn of(m: &Metrics) -> Counters {
        let checks = |status| m.sum(CHECKS, &[("resource", RESOURCE), ("status", status)]);
        let verb = |name, verb| m.sum(name, &[("resource", RESOURCE), ("verb", verb)]);
        Counters {
            success: checks("success"),
            failure: checks("failure"),
            skipped: checks("skipped"),
            check_bytes: verb(BYTES, "consistency"),
            pages: verb(REQUESTS, "consistency"),
            list_bytes: verb(BYTES, "list"),
        }
    }

    async fn read(t: &Target) -> Result<Counters, BenchError> {
        Ok(Counters::of(&scrape::scrape(t.addr).await?))
    }
}

/// The CPU of watchmux and of the simulator at one moment, and when.
#[derive(Debug, Clone, Copy)]
struct Mark {
    at: Instant,
    watchmux: Usage,
    sim: Usage,
}

impl Mark {
    fn now(t: &Target, sim: &Proc) -> Mark {
        Mark {
            at: Instant::now(),
            watchmux: procs::usage(&t.pids()),
            sim: procs::usage(&[sim.pid()]),
        }
    }

    /// Seconds, watchmux's CPU-ms and the simulator's CPU-ms from `self` to `later`.
    fn until(&self, later: &Mark) -> (f64, f64, f64) {
        (
            (later.at - self.at).as_secs_f64(),
            (later.watchmux.cpu_secs - self.watchmux.cpu_secs) * 1000.0,
            (later.sim.cpu_secs - self.sim.cpu_secs) * 1000.0,
        )
    }
}

/// A fresh watchmux caching pods with `consistency_check_secs = secs`, synced; how long the
/// sync took.
async fn start(env: &Env, sim: &Proc, secs: u64) -> Result<(Target, f64), BenchError> {
    procs::wait_quiet(&[sim.pid()], Duration::from_secs(10)).await;
    let t0 = Instant::now();
    let extra = format!("consistency_check_secs = {secs}\n");
    let t = targets::start_watchmux_with(env, sim, &[RESOURCE], &extra, None).await?;
    match t.wait_ready(SYNC_BOUND).await {
        Ok(_) => Ok((t, t0.elapsed().as_secs_f64())),
        Err(e) => {
            t.stop().await;
            Err(e)
        }
    }
}

/// Reads `/metrics` every [`POLL`] until `n` more checks than `from` counted have succeeded
/// (at most `n` × [`PER_CHECK_BOUND`]); the counters then. A failed or skipped check beyond
/// `from`'s is an error.
async fn wait_checks(t: &Target, from: &Counters, n: usize) -> Result<Counters, BenchError> {
    let bound = PER_CHECK_BOUND * n as u32;
    let t0 = Instant::now();
    loop {
        let c = Counters::read(t).await?;
        if c.failure > from.failure || c.skipped > from.skipped {
            return Err(BenchError::Run(format!(
                "{ID}: a consistency check of {RESOURCE} did not succeed ({} failed, {} skipped since the sync; see watchmux's log)",
                c.failure - from.failure,
                c.skipped - from.skipped
            )));
        }
        if c.success >= from.success + n as f64 {
            return Ok(c);
        }
        if t0.elapsed() > bound {
            return Err(BenchError::Run(format!(
                "{ID}: {} of {n} consistency checks of {RESOURCE} succeeded within {bound:?}",
                c.success - from.success
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The `checks` process's window.
struct Window {
    /// From the sync to the window's start.
    lead: Duration,
    /// Its length.
    len: Duration,
    checks: f64,
    cpu_ms: f64,
    sim_cpu_ms: f64,
    check_bytes: f64,
    pages: f64,
    list_bytes: f64,
    peak_rss_growth: f64,
    sync_s: f64,
}

/// The `checks` process: its sync, its first check, then the window of the next
/// `checks_count`.
async fn checks_window(env: &Env, s: &Sizes, sim: &Proc) -> Result<Window, BenchError> {
    let (t, sync_s) = start(env, sim, 1).await?;
    let result = async {
        let synced = Instant::now();
        let at_sync = Counters::read(&t).await?;
        let c0 = wait_checks(&t, &at_sync, 1).await?;
        let m0 = Mark::now(&t, sim);
        let peak = PeakRss::start(t.pids());
        let c1 = wait_checks(&t, &c0, s.checks_count).await;
        let m1 = Mark::now(&t, sim);
        let peak = peak.finish();
        let c1 = c1?;
        let (secs, cpu_ms, sim_cpu_ms) = m0.until(&m1);
        Ok(Window {
            lead: m0.at - synced,
            len: Duration::from_secs_f64(secs),
            checks: c1.success - c0.success,
            cpu_ms,
            sim_cpu_ms,
            check_bytes: c1.check_bytes - c0.check_bytes,
            pages: c1.pages - c0.pages,
            list_bytes: at_sync.list_bytes,
            peak_rss_growth: peak.saturating_sub(m0.watchmux.rss_bytes) as f64,
            sync_s,
        })
    }
    .await;
    t.stop().await;
    result
}

/// The `idle` process: `lead` after its sync, a window of `len` reading `/metrics` as the
/// checks window did; watchmux's and the simulator's CPU-ms per second over it.
async fn idle_rates(
    env: &Env,
    sim: &Proc,
    lead: Duration,
    len: Duration,
) -> Result<(f64, f64), BenchError> {
    let (t, _) = start(env, sim, 0).await?;
    let result = async {
        tokio::time::sleep(lead).await;
        let m0 = Mark::now(&t, sim);
        while m0.at.elapsed() < len {
            Counters::read(&t).await?;
            tokio::time::sleep(POLL.min(len.saturating_sub(m0.at.elapsed()))).await;
        }
        let m1 = Mark::now(&t, sim);
        let end = Counters::read(&t).await?;
        if end.success + end.failure + end.skipped > 0.0 {
            return Err(BenchError::Run(format!(
                "{ID}: the idle process (consistency_check_secs = 0) made consistency checks"
            )));
        }
        let (secs, cpu_ms, sim_cpu_ms) = m0.until(&m1);
        Ok((cpu_ms / secs, sim_cpu_ms / secs))
    }
    .await;
    t.stop().await;
    result
}

/// One repeat: the `checks` process, then the `idle` one; the row's figures.
async fn repeat(env: &Env, s: &Sizes, sim: &Proc) -> Result<Vec<(&'static str, f64)>, BenchError> {
    let w = checks_window(env, s, sim).await?;
    let (idle, sim_idle) = idle_rates(env, sim, w.lead, w.len).await?;
    Ok(figures(&w, idle, sim_idle))
}

/// The row of a checks window and the idle CPU-ms per second of watchmux and the simulator.
fn figures(w: &Window, idle: f64, sim_idle: f64) -> Vec<(&'static str, f64)> {
    let n = w.checks.max(1.0);
    let secs = w.len.as_secs_f64();
    let per_check = w.check_bytes / n;
    let cpu = w.cpu_ms / n;
    let sim_cpu = w.sim_cpu_ms / n;
    vec![
        ("checks", w.checks),
        ("s_per_check", secs / n),
        ("check_mb", per_check / MB),
        ("pages_per_check", w.pages / n),
        ("list_mb", w.list_bytes / MB),
        ("check_list_ratio", per_check / w.list_bytes.max(1.0)),
        ("cpu_ms_per_check", cpu),
        ("idle_cpu_ms_per_s", idle),
        ("net_cpu_ms_per_check", cpu - idle * secs / n),
        ("sim_cpu_ms_per_check", sim_cpu),
        ("sim_idle_cpu_ms_per_s", sim_idle),
        ("sim_net_cpu_ms_per_check", sim_cpu - sim_idle * secs / n),
        ("peak_rss_growth_mb", w.peak_rss_growth / MB),
        ("sync_s", w.sync_s),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_read_the_pods_checks_and_bytes_by_verb() {
        let m = Metrics::parse(
            "watchmux_consistency_checks_total{resource=\"pods\",status=\"success\"} 4\n\
             watchmux_consistency_checks_total{resource=\"pods\",status=\"skipped\"} 2\n\
             watchmux_consistency_checks_total{resource=\"nodes\",status=\"failure\"} 1\n\
             watchmux_upstream_bytes_total{resource=\"pods\",verb=\"consistency\"} 800\n\
             watchmux_upstream_bytes_total{resource=\"pods\",verb=\"list\"} 9000\n\
             watchmux_upstream_bytes_total{resource=\"pods\",verb=\"watch\"} 50\n\
             watchmux_upstream_requests_total{resource=\"pods\",verb=\"consistency\",code=\"200\"} 8\n\
             watchmux_upstream_requests_total{resource=\"pods\",verb=\"consistency\",code=\"410\"} 1\n",
        );
        let c = Counters::of(&m);
        assert_eq!((c.success, c.failure, c.skipped), (4.0, 0.0, 2.0), "{c:?}");
        assert_eq!((c.check_bytes, c.list_bytes, c.pages), (800.0, 9000.0, 9.0));
    }

    #[test]
    fn net_cpu_takes_the_idle_rate_over_the_window_off() {
        let w = Window {
            lead: Duration::from_secs(1),
            len: Duration::from_secs(10),
            checks: 5.0,
            cpu_ms: 2000.0,
            sim_cpu_ms: 3000.0,
            check_bytes: 5_000_000.0,
            pages: 50.0,
            list_bytes: 20_000_000.0,
            peak_rss_growth: 0.0,
            sync_s: 3.0,
        };
        let f = figures(&w, 10.0, 20.0);
        let get = |k: &str| f.iter().find(|(n, _)| *n == k).map(|(_, v)| *v).unwrap();
        assert_eq!(get("s_per_check"), 2.0);
        assert_eq!(get("check_mb"), 1.0);
        assert_eq!(get("pages_per_check"), 10.0);
        assert_eq!(get("check_list_ratio"), 0.05);
        assert_eq!(get("cpu_ms_per_check"), 400.0);
        // 10 CPU-ms/s × 10 s ÷ 5 checks = 20 ms per check of idle.
        assert_eq!(get("net_cpu_ms_per_check"), 380.0);
        assert_eq!(get("sim_net_cpu_ms_per_check"), 560.0);
    }
}
