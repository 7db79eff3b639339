//! S7 consistent reads: LISTs without a resourceVersion, which watchmux answers from its cache
//! once a freshness check (`src/reflector/freshness.rs`: a `limit=1` consistent LIST upstream,
//! then, when the cache is behind, a short watch until an event or the pre-deadline bookmark)
//! has proven that the cache holds every write acknowledged before the request.
//!
//! Two parts, two report tables: S7.1 sets the cost of a consistent LIST of many pods through
//! watchmux against the simulator answering it itself (`direct`), with the upstream's CPU and
//! bytes counted apart from the target's; S7.2 measures the latency the check adds (a
//! consistent LIST minus a `resourceVersion=0` LIST of the same small resource through
//! watchmux) idle and under writes, for a resource that is written to and one that is not,
//! with watchmux's own count of how its checks ended.
//!
//! S7.2 runs two watchmux processes one after the other against the same simulator: one that
//! proves a quiet resource by the short watch alone (`consistent_read_state_max_objects = 0`,
//! the mechanism before the state comparison), and one with the default, which first compares
//! the cache with the upstream's metadata LIST: the two proofs side by side in one run.
//!
//! Drives clients and reads usage and counters; starting and stopping processes is
//! [`targets`]'s. nginx and the limit program are left out: a consistent read through nginx is
//! the simulator's answer, and the limit program has no freshness to prove.

use std::time::{Duration, Instant};

use super::client;
use super::procs::{self, PeakRss, Proc};
use super::report::{Sample, ScenarioSpec, median};
use super::scenarios::{MB, brief, m, start_targets, stop_all};
use super::scrape::{self, Metrics};
use super::targets::{self, Env, Target, TargetKind};
use super::{BenchError, Sizes};

/// Id of the consistent-LIST table.
pub const LIST_ID: &str = "S7.1";
/// Id of the freshness-check table.
pub const CHECK_ID: &str = "S7.2";

/// Bound on one LIST (the largest, 100k pods, take seconds).
const LIST_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on the rounds of one freshness case (a quiet resource under writes takes about a
/// second per consistent LIST).
const CASE_BOUND: Duration = Duration::from_secs(60);

/// How watchmux's checks end: the `outcome` label values of `watchmux_freshness_checks_total`.
const OUTCOMES: [&str; 6] = ["ahead", "state", "caught_up", "event", "bookmark", "failed"];

/// The two ways S7.2 runs watchmux: its case label, and the `[cache]` line that sets it.
const PROOFS: [(&str, &str); 2] = [
    ("watch proof", "consistent_read_state_max_objects = 0"),
    ("state proof", ""),
];
const CHECKS: &str = "watchmux_freshness_checks_total";
const READS: &str = "watchmux_reads_total";

/// The targets S7 measures, in the order asked for.
fn s7_targets(kinds: &[TargetKind]) -> Vec<TargetKind> {
    kinds
        .iter()
        .copied()
        .filter(|k| matches!(k, TargetKind::Watchmux | TargetKind::Direct))
        .collect()
}

/// The report tables of S7.
pub fn specs(s: &Sizes) -> Vec<ScenarioSpec> {
    vec![list_spec(s), check_spec(s)]
}

fn list_spec(s: &Sizes) -> ScenarioSpec {
    let pods: Vec<String> = s.consistent_pods.iter().map(|p| p.to_string()).collect();
    ScenarioSpec {
        id: LIST_ID,
        name: "consistent LIST",
        about: format!(
            "C clients at once each LIST `/api/v1/pods` with no resourceVersion (a consistent read) of P pods (P = {}; each body read to the end and discarded), no writes. watchmux answers from its cache after a freshness check (a `limit=1` LIST upstream; at idle the cache is already at the upstream's resourceVersion); `direct` is the simulator answering from its store. Latency = median per list, request to last byte. CPU-s per LIST = the target's CPU ÷ C; upstream CPU-s and KB per LIST = the simulator's CPU and the bytes it sent for pods (its `/sim/stats` `bytesSent`) ÷ C, for watchmux only (for `direct` the upstream is the target: its row counts it once); total = target + upstream. Upstream requests = pod LISTs and WATCHes the simulator served ÷ C; checks = watchmux's freshness checks ÷ C (readers that wait share one). RSS growth = the target's peak RSS during the lists (sampled every 20 ms) − its RSS before. nginx and the limit program are left out: a consistent read through nginx is the simulator's answer.",
            pods.join(", ")
        ),
        case_label: "pods × clients",
        metrics: vec![
            m("list_ms", "latency ms (median list)", false),
            m("body_mb", "body MB", false),
            m("cpu_s_per_list", "CPU-s per LIST", false),
            m("upstream_cpu_s_per_list", "upstream CPU-s per LIST", false),
            m("total_cpu_s_per_list", "total CPU-s per LIST", false),
            m("upstream_kb_per_list", "upstream KB per LIST", false),
            m(
                "upstream_requests_per_list",
                "upstream requests per LIST",
                false,
            ),
            m("checks_per_list", "checks per LIST", false),
            m("rss_growth_mb", "RSS growth MB", false),
        ],
        ratio_metrics: vec![
            "list_ms",
            "cpu_s_per_list",
            "total_cpu_s_per_list",
            "upstream_kb_per_list",
            "rss_growth_mb",
        ],
        scaling_metric: None,
        variants: None,
        versus: None,
    }
}

fn check_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: CHECK_ID,
        name: "freshness check",
        about: format!(
            "The latency a freshness check adds, through watchmux caching pods and namespaces from a simulator with {} pods in 50 namespaces: on one connection, {} rounds of a consistent LIST (no resourceVersion) and a `resourceVersion=0` LIST (served from the cache without a check) of the same resource, alternating which goes first; added = median consistent − median RV=0; p99 = the 99th percentile of the consistent LISTs (nearest rank; with few rounds, their maximum). Idle: no writes. Busy: the simulator makes {} status writes/s to its pods (S1's churn), so the global resourceVersion moves; pods are the busy resource (written to), namespaces the quiet one (no writes of their own: the cache cannot reach the upstream's resourceVersion through its own events). Two watchmux processes, one after the other: `watch proof` proves a quiet resource only by a short upstream watch, which ends at the upstream's bookmark about a second after it starts (`consistent_read_state_max_objects = 0`, the mechanism before the state comparison); `state proof` (the default) first compares its cache with a consistent metadata LIST of the resource (50 namespaces; pods are above the 200-object bound and keep the watch proof). Checks = watchmux's `watchmux_freshness_checks_total` for the resource during the case, by outcome (ahead: the cache was already there; state: it held the upstream's state; caught_up: its own watch got there; event, bookmark: the short upstream watch proved it; failed: the read went upstream); passed through = consistent LISTs watchmux handed to the upstream; upstream requests = the simulator's LISTs and WATCHes of the resource during the case (a check is one or two); upstream KB = the bytes the simulator sent for the resource during the case; writes/s = the simulator's resourceVersion rate over all cases of the load.",
            s.freshness_pods, s.freshness_rounds, s.freshness_rate
        ),
        case_label: "resource, load",
        metrics: vec![
            m("consistent_ms", "consistent ms", false),
            m("rv0_ms", "RV=0 ms", false),
            m("added_ms", "added ms", false),
            m("consistent_p99_ms", "consistent p99 ms", false),
            m("consistent_max_ms", "consistent max ms", false),
            m("lists", "consistent LISTs", true),
            m("ahead", "ahead", false),
            m("state", "state", false),
            m("caught_up", "caught_up", false),
            m("event", "event", false),
            m("bookmark", "bookmark", false),
            m("failed", "failed", false),
            m("passed_through", "passed through", false),
            m("upstream_requests", "upstream requests", false),
            m("upstream_kb", "upstream KB", false),
            m("writes_per_s", "writes/s", true),
        ],
        ratio_metrics: vec![],
        scaling_metric: None,
        variants: None,
        versus: None,
    }
}

/// Runs S7: the consistent LISTs of every pod count, then the freshness checks.
pub async fn run(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let kinds = s7_targets(kinds);
    for &pods in &s.consistent_pods {
        lists(env, s, &kinds, pods, out).await?;
    }
    if kinds.contains(&TargetKind::Watchmux) {
        checks(env, s, out).await?;
    }
    Ok(())
}

/// One LIST with a bound; anything but a 200 is an error.
async fn list_ok(conn: &mut client::Conn, path: &str, who: TargetKind) -> Result<u64, BenchError> {
    let l = tokio::time::timeout(LIST_TIMEOUT, client::list_on(conn, path))
        .await
        .map_err(|_| BenchError::Run(format!("{who}: LIST {path} took over {LIST_TIMEOUT:?}")))?
        .map_err(|e| BenchError::io(format!("LIST {path} from {who}"), e))?;
    if l.status != 200 {
        return Err(BenchError::Run(format!(
            "{who} answered {} to LIST {path}",
            l.status
        )));
    }
    Ok(l.bytes)
}

async fn connect(t: &Target) -> Result<client::Conn, BenchError> {
    client::Conn::connect(t.addr)
        .await
        .map_err(|e| BenchError::io(format!("connecting to {}", t.kind), e))
}

/// watchmux's counters, or empty ones for a target without them.
async fn counters(t: &Target) -> Result<Metrics, BenchError> {
    match t.kind {
        TargetKind::Watchmux => scrape::scrape(t.addr).await,
        _ => Ok(Metrics::default()),
    }
}

/// S7.1 at one pod count: a simulator of `pods`, every target in front of it, every client
/// count, the targets interleaved inside each repeat.
async fn lists(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    pods: usize,
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let sim = targets::start_sim(env, (pods / 30).max(1), pods).await?;
    let ts = start_targets(env, kinds, &sim, &["pods"]).await?;
    let path = "/api/v1/pods";
    // One list each first: every target warms up (and watchmux's first check runs).
    for t in &ts {
        list_ok(&mut connect(t).await?, path, t.kind).await?;
    }
    for &c in &s.consistent_clients {
        for r in 0..s.repeats {
            for t in &ts {
                tokio::time::sleep(s.pause(0.5)).await;
                let values = list_run(&sim, t, c).await?;
                let sample = Sample {
                    scenario: LIST_ID,
                    case: format!("{pods} × {c}"),
                    target: t.kind,
                    repeat: r,
                    values,
                };
                eprintln!(
                    "  {LIST_ID} P={pods} C={c} {} #{r}: {}",
                    t.kind,
                    brief(&sample)
                );
                out.push(sample);
            }
        }
    }
    stop_all(ts).await;
    sim.stop().await;
    Ok(())
}

/// `c` consistent LISTs of all pods at once from `t`; the figures of S7.1.
async fn list_run(
    sim: &Proc,
    t: &Target,
    c: usize,
) -> Result<Vec<(&'static str, f64)>, BenchError> {
    let path = "/api/v1/pods";
    let pids = t.pids();
    let direct = t.kind == TargetKind::Direct;
    let m0 = counters(t).await?;
    let (l0, w0, b0) = targets::sim_requests(sim.addr, "pods").await?;
    let (before, up0) = (procs::usage(&pids), procs::usage(&[sim.pid()]));
    let peak = PeakRss::start(pids.clone());
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..c {
        let (addr, kind) = (t.addr, t.kind);
        set.spawn(async move {
            let t0 = Instant::now();
            let mut conn = client::Conn::connect(addr)
                .await
                .map_err(|e| BenchError::io(format!("connecting to {kind}"), e))?;
            let bytes = list_ok(&mut conn, path, kind).await?;
            Ok::<_, BenchError>((bytes, t0.elapsed()))
        });
    }
    let (mut bytes, mut lat) = (0u64, Vec::new());
    while let Some(j) = set.join_next().await {
        let (b, el) = j.map_err(|e| BenchError::Run(e.to_string()))??;
        bytes += b;
        lat.push(el.as_secs_f64() * 1000.0);
    }
    let peak = peak.finish();
    let (after, up1) = (procs::usage(&pids), procs::usage(&[sim.pid()]));
    let (l1, w1, b1) = targets::sim_requests(sim.addr, "pods").await?;
    let m1 = counters(t).await?;
    let n = c as f64;
    let cpu = (after.cpu_secs - before.cpu_secs) / n;
    let upstream_cpu = (up1.cpu_secs - up0.cpu_secs) / n;
    let mut v = vec![
        ("list_ms", median(&lat)),
        ("body_mb", bytes as f64 / n / MB),
        ("cpu_s_per_list", cpu),
        (
            "total_cpu_s_per_list",
            if direct { cpu } else { cpu + upstream_cpu },
        ),
        ("upstream_kb_per_list", (b1 - b0) as f64 / n / 1000.0),
        (
            "upstream_requests_per_list",
            ((l1 - l0) + (w1 - w0)) as f64 / n,
        ),
        (
            "rss_growth_mb",
            peak.saturating_sub(before.rss_bytes) as f64 / MB,
        ),
    ];
    if !direct {
        v.push(("upstream_cpu_s_per_list", upstream_cpu));
        let checks = |m: &Metrics| m.sum(CHECKS, &[("resource", "pods")]);
        v.push(("checks_per_list", (checks(&m1) - checks(&m0)) / n));
    }
    Ok(v)
}

/// S7.2: a small simulator, watchmux caching pods and namespaces, each resource idle and busy,
/// with each of the two proofs.
async fn checks(env: &Env, s: &Sizes, out: &mut Vec<Sample>) -> Result<(), BenchError> {
    let sim = targets::start_sim(env, 50, s.freshness_pods).await?;
    let mut result = Ok(());
    for (proof, setting) in PROOFS {
        let t =
            match targets::start_watchmux_with(env, &sim, &["pods", "namespaces"], setting, None)
                .await
            {
                Ok(t) => t,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
        result = check_loads(&sim, &t, s, proof, out).await;
        // Stop the writes even when a case failed: a failed control request must not hide
        // the case's error.
        let stopped = targets::set_churn(sim.addr, 0.0, "status").await;
        t.stop().await;
        result = result.and(stopped);
        if result.is_err() {
            break;
        }
    }
    sim.stop().await;
    result
}

async fn check_loads(
    sim: &Proc,
    t: &Target,
    s: &Sizes,
    proof: &str,
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let busy = format!("{} writes/s", s.freshness_rate);
    for (rate, load) in [(0.0, "idle"), (s.freshness_rate, busy.as_str())] {
        targets::set_churn(sim.addr, rate, "status").await?;
        tokio::time::sleep(s.pause(1.0)).await;
        // The write rate is read over the whole load, not per case: the simulator writes in
        // ticks, and a case of quick LISTs may fall between two.
        let (rv0, t0) = (global_rv(sim).await?, Instant::now());
        let mut phase = Vec::new();
        for r in 0..s.repeats {
            for resource in ["pods", "namespaces"] {
                let values = check_case(sim, t, resource, s.freshness_rounds).await?;
                phase.push(Sample {
                    scenario: CHECK_ID,
                    case: format!("{resource} {load}, {proof}"),
                    target: t.kind,
                    repeat: r,
                    values,
                });
            }
        }
        let rate = global_rv(sim).await?.saturating_sub(rv0) as f64 / t0.elapsed().as_secs_f64();
        for mut sample in phase {
            sample.values.push(("writes_per_s", rate));
            eprintln!(
                "  {CHECK_ID} {} #{}: {}",
                sample.case,
                sample.repeat,
                brief(&sample)
            );
            out.push(sample);
        }
    }
    targets::set_churn(sim.addr, 0.0, "status").await
}

/// `rounds` pairs of a consistent and an RV=0 LIST of `resource` on one connection (bounded by
/// [`CASE_BOUND`]); the figures of S7.2.
async fn check_case(
    sim: &Proc,
    t: &Target,
    resource: &str,
    rounds: usize,
) -> Result<Vec<(&'static str, f64)>, BenchError> {
    let consistent = format!("/api/v1/{resource}");
    let any = format!("/api/v1/{resource}?resourceVersion=0");
    let (l0, w0, b0) = targets::sim_requests(sim.addr, resource).await?;
    let m0 = scrape::scrape(t.addr).await?;
    let mut conn = connect(t).await?;
    let (mut cons, mut rv0_lat) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    for i in 0..rounds {
        if t0.elapsed() > CASE_BOUND {
            eprintln!("  {CHECK_ID} {resource}: stopped after {i} rounds ({CASE_BOUND:?})");
            break;
        }
        for consistent_now in [i % 2 == 0, i % 2 != 0] {
            let (path, into) = if consistent_now {
                (&consistent, &mut cons)
            } else {
                (&any, &mut rv0_lat)
            };
            let t1 = Instant::now();
            list_ok(&mut conn, path, t.kind).await?;
            into.push(t1.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let m1 = scrape::scrape(t.addr).await?;
    let (l1, w1, b1) = targets::sim_requests(sim.addr, resource).await?;
    let (c, a) = (median(&cons), median(&rv0_lat));
    let mut sorted = cons.clone();
    sorted.sort_by(f64::total_cmp);
    // Nearest rank: the smallest value with at least 99 % of the values at or below it.
    let p99 = sorted
        .get((sorted.len() * 99).div_ceil(100).saturating_sub(1))
        .copied()
        .unwrap_or(f64::NAN);
    let mut v = vec![
        ("consistent_ms", c),
        ("rv0_ms", a),
        ("added_ms", c - a),
        ("consistent_p99_ms", p99),
        (
            "consistent_max_ms",
            cons.iter().copied().fold(f64::NAN, f64::max),
        ),
        ("lists", cons.len() as f64),
        ("upstream_requests", ((l1 - l0) + (w1 - w0)) as f64),
        ("upstream_kb", b1.saturating_sub(b0) as f64 / 1000.0),
    ];
    for outcome in OUTCOMES {
        let at = [("resource", resource), ("outcome", outcome)];
        v.push((outcome, m1.sum(CHECKS, &at) - m0.sum(CHECKS, &at)));
    }
    let passed = [
        ("resource", resource),
        ("verb", "list"),
        ("source", "pass_through"),
    ];
    v.push((
        "passed_through",
        m1.sum(READS, &passed) - m0.sum(READS, &passed),
    ));
    Ok(v)
}

/// The simulator's global resourceVersion (every write bumps it by one). It is read with a
/// LIST of pods: never inside a case, whose upstream requests are counted.
async fn global_rv(sim: &Proc) -> Result<u64, BenchError> {
    let rv = targets::current_rv(sim.addr, "pods").await?;
    rv.parse()
        .map_err(|_| BenchError::Run(format!("resourceVersion {rv:?} is not a number")))
}
