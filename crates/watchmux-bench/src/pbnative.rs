//! S11 protobuf-native cache: two watchmux builds side by side in one run, on the targets of a
//! cache that keeps built-in objects as their upstream protobuf bytes (JSON made on demand).
//! `baseline` is another commit's `watchmux-bench` binary (`--baseline-exe`), `current` this
//! one; both start the same way ([`targets::start_watchmux_launch`] with a [`Build`]: listed
//! mode, pods cached), one at a time (never two large caches at once), and inside each repeat
//! both run, the one that goes first alternating between repeats. Five tables:
//!
//! - S11.1 memory: a fresh watchmux holding N pods: start to ready, RSS and
//!   `watchmux_memory_used_bytes` after the sync, RSS ÷ the pods' JSON (a JSON LIST from the
//!   simulator itself) then and after each LIST below.
//! - S11.2 protobuf LIST: the first two LISTs after the sync, in protobuf.
//! - S11.3 JSON LIST: then the process's first JSON LIST and a warm one.
//! - S11.4 delivery: S8.1's broadcast (S1's fleet and writer), all watchers protobuf then all
//!   JSON: watchmux's CPU per delivery in each.
//! - S11.5 sync: a larger simulator of its own; start to ready and CPU.
//!
//! Its report puts the two builds in columns with current ÷ baseline and the target of
//! each figure ([`markdown`]); it only measures and reports, nothing is judged.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use super::client::{Conn, Encoding, Head};
use super::procs::{self, Proc};
use super::report::{Sample, ScenarioSpec, Summary, fmt_num, variant_case};
use super::scenarios::{self, MB, StreamRun, brief, m};
use super::scrape;
use super::targets::{self, Build, Env, Launch, Target, TargetKind};
use super::{BenchError, Sizes};

/// The scenario's id (its tables are `S11.1` … `S11.5`).
pub const ID: &str = "S11";
/// Id of the memory table.
pub const MEMORY_ID: &str = "S11.1";
/// Id of the protobuf LIST table.
pub const PB_LIST_ID: &str = "S11.2";
/// Id of the JSON LIST table.
pub const JSON_LIST_ID: &str = "S11.3";
/// Id of the delivery table.
pub const DELIVERY_ID: &str = "S11.4";
/// Id of the sync table.
pub const SYNC_ID: &str = "S11.5";
/// The build given by `--baseline-exe`.
pub const BASELINE: &str = "baseline";
/// This bench's own build.
pub const CURRENT: &str = "current";

/// What every LIST of the scenario reads.
const PODS_RV0: &str = "/api/v1/pods?resourceVersion=0";
/// Bound on one LIST (100k pods take seconds; a first protobuf LIST of today's build, 7 s).
const LIST_TIMEOUT: Duration = Duration::from_secs(300);
/// Bound on a sync.
const SYNC_TIMEOUT: Duration = Duration::from_secs(600);

/// The target of each figure that has one (shown beside it, never checked).
const GOALS: [(&str, &str); 15] = [
    ("rss_per_json", "≤ 1.0"),
    ("rss_per_json_pb1", "≤ 1.0"),
    ("rss_per_json_pb2", "≤ 1.0"),
    ("rss_per_json_json1", "≤ 1.0"),
    ("rss_per_json_json2", "≤ 1.0"),
    ("pb_first_per_later_ms", "≈ 1"),
    ("pb_first_per_later_cpu", "≈ 1"),
    ("json_first_per_warm_ms", "≤ 2"),
    ("json_first_per_warm_cpu", "≤ 2"),
    ("json2_ms", "≤ 450"),
    ("json_per_pb_ms", "≤ 1.5"),
    ("pb_per_json_cpu", "≤ 1"),
    ("sync_s", "current ≤ baseline"),
    ("sync_cpu_s", "current ≤ baseline"),
    ("sync_rss_per_json", "≤ 1.0"),
];

/// The target of figure `key`, if the issue sets one.
pub fn goal(key: &str) -> Option<&'static str> {
    GOALS.iter().find(|(k, _)| *k == key).map(|(_, g)| *g)
}

/// The baseline binary, or why S11 cannot run.
pub fn check_baseline(exe: Option<&Path>) -> Result<&Path, BenchError> {
    let exe = exe.ok_or_else(|| {
        BenchError::Setup(
            "S11 (pbnative) compares two watchmux builds: give the baseline build's watchmux-bench binary with --baseline-exe PATH".into(),
        )
    })?;
    if !exe.is_file() {
        return Err(BenchError::Setup(format!(
            "--baseline-exe {}: no such file",
            exe.display()
        )));
    }
    Ok(exe)
}

/// The names of the builds in the order repeat `r` runs them: the baseline first in even
/// repeats, the current one in odd ones.
pub fn order(r: usize) -> [&'static str; 2] {
    if r.is_multiple_of(2) {
        [BASELINE, CURRENT]
    } else {
        [CURRENT, BASELINE]
    }
}

/// `a ÷ b`, NaN (left out of medians) when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::NAN } else { a / b }
}

/// Whether `spec` is one of S11's tables (rendered by [`markdown`]).
pub fn reports(spec: &ScenarioSpec) -> bool {
    spec.id
        .strip_prefix(ID)
        .is_some_and(|rest| rest.starts_with('.'))
}

fn memory_case(s: &Sizes) -> String {
    format!("{} pods", fmt_num(s.pbnative_pods as f64))
}

fn delivery_case(s: &Sizes) -> String {
    format!(
        "{} watchers × {} writes/s",
        fmt_num(s.pbnative_watchers as f64),
        fmt_num(s.broadcast_rate)
    )
}

fn sync_case(s: &Sizes) -> String {
    format!("{} pods", fmt_num(s.pbnative_sync_pods as f64))
}

/// The report tables of S11; `baseline` and `current` are the binaries (named in the first
/// table's text).
pub fn specs(s: &Sizes, baseline: Option<&Path>, current: &Path) -> Vec<ScenarioSpec> {
    let pods = fmt_num(s.pbnative_pods as f64);
    let baseline = baseline
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(not given)".into());
    let table =
        |id, name, about: String, metrics| ScenarioSpec::table(id, name, about, "case", metrics);
    vec![
        table(
            MEMORY_ID,
            "memory holding the pods",
            format!(
                "Two watchmux builds, each started the way the bench starts watchmux (listed mode, `pods` cached), one at a time in front of one simulator of {pods} pods ({} nodes): `{BASELINE}` = `{baseline}`, `{CURRENT}` = `{}`. Each repeat starts a fresh process of each build (which goes first alternates between repeats) and runs S11.1–S11.3 on it: its sync, then two protobuf LISTs, then two JSON LISTs, each `{PODS_RV0}` read to the last byte (the body is counted, not kept), a second's pause after each. Ready s = from starting the process until `/readyz` answers 200; RSS and `watchmux_memory_used_bytes` a second after that; \"after the LISTs\" = after the last one. JSON MB = the body of a JSON `{PODS_RV0}` from the simulator itself (once per simulator). RSS ÷ JSON = RSS ÷ those bytes, after the sync and a second after each LIST. Target: RSS ≤ 1.0× the pods' JSON whichever encodings clients read.",
                (s.pbnative_pods / 30).max(1),
                current.display(),
            ),
            vec![
                m("ready_s", "start → ready s", false),
                m("rss_mb", "RSS after sync MB", false),
                m("budget_mb", "watchmux_memory_used_bytes MB", false),
                m("budget_end_mb", "watchmux_memory_used_bytes after the LISTs MB", false),
                m("json_mb", "pods' JSON MB (simulator)", false),
                m("rss_per_json", "RSS ÷ JSON after sync", false),
                m("rss_per_json_pb1", "RSS ÷ JSON after 1st protobuf LIST", false),
                m("rss_per_json_pb2", "RSS ÷ JSON after 2nd protobuf LIST", false),
                m("rss_per_json_json1", "RSS ÷ JSON after 1st JSON LIST", false),
                m("rss_per_json_json2", "RSS ÷ JSON after 2nd JSON LIST", false),
            ],
        ),
        table(
            PB_LIST_ID,
            "first protobuf LISTs",
            "The first and second LIST after each build's sync (S11.1's processes), asking for protobuf (`Accept: application/vnd.kubernetes.protobuf,application/json`, as kubelets ask). LIST ms = request to last byte; CPU-s = watchmux's during it (`/proc`, 10 ms ticks); RSS = a second after it. Target: the first protobuf LIST about as fast as later ones (first ÷ second ≈ 1).".into(),
            vec![
                m("pb1_ms", "1st protobuf LIST ms", false),
                m("pb1_cpu_s", "1st protobuf LIST CPU-s", false),
                m("pb1_rss_mb", "RSS after 1st MB", false),
                m("pb2_ms", "2nd protobuf LIST ms", false),
                m("pb2_cpu_s", "2nd protobuf LIST CPU-s", false),
                m("pb2_rss_mb", "RSS after 2nd MB", false),
                m("pb_body_mb", "protobuf body MB", false),
                m("pb_first_per_later_ms", "1st ÷ 2nd LIST ms", false),
                m("pb_first_per_later_cpu", "1st ÷ 2nd LIST CPU-s", false),
            ],
        ),
        table(
            JSON_LIST_ID,
            "first JSON LIST after protobuf only",
            "Then, on the same processes, the first JSON LIST of the process (after the protobuf-only period of S11.2) and a second one right after it (warm). As in S11.2: LIST ms to the last byte, watchmux's CPU-s during it, RSS a second after it; first ÷ warm per repeat. JSON ÷ protobuf = the warm JSON LIST's ms ÷ the 2nd protobuf LIST's, per repeat; transcode µs per pod = (warm JSON LIST CPU-s − 2nd protobuf LIST CPU-s) ÷ pods, the CPU the JSON costs beyond sending the stored bytes (all of watchmux's threads). Targets: the first JSON LIST ≤ 2× a warm one; a JSON LIST ≤ 0.45 s and ≤ 1.5× the protobuf LIST.".into(),
            vec![
                m("json1_ms", "1st JSON LIST ms", false),
                m("json1_cpu_s", "1st JSON LIST CPU-s", false),
                m("json1_rss_mb", "RSS after 1st MB", false),
                m("json2_ms", "warm JSON LIST ms", false),
                m("json2_cpu_s", "warm JSON LIST CPU-s", false),
                m("json2_rss_mb", "RSS after warm MB", false),
                m("json_body_mb", "JSON body MB", false),
                m("json_first_per_warm_ms", "1st ÷ warm LIST ms", false),
                m("json_first_per_warm_cpu", "1st ÷ warm LIST CPU-s", false),
                m("json_per_pb_ms", "warm JSON ÷ 2nd protobuf LIST ms", false),
                m("transcode_us_per_pod", "transcode µs per pod", false),
            ],
        ),
        table(
            DELIVERY_ID,
            "delivery CPU by encoding",
            format!(
                "S8.1's delivery (S1's simulator of {} pods and writer): a fresh watchmux of each build per repeat, {} watchers on all pods all asking for protobuf, then all for JSON, while the simulator makes {} status writes/s for a {} s window (after a warm-up second). CPU-s per 1M deliveries = watchmux's CPU in the window ÷ the events its watchers received in it; delivered % = stamped events received ÷ (watchers × stamped writes); other CPU cores = the busier of the two windows' CPU taken by processes other than watchmux, the simulator and the bench (noise). Target: protobuf delivery CPU ≤ JSON's.",
                s.broadcast_pods, s.pbnative_watchers, s.broadcast_rate, s.window_secs
            ),
            vec![
                m("pb_cpu_per_m", "protobuf CPU-s per 1M deliveries", false),
                m("json_cpu_per_m", "JSON CPU-s per 1M deliveries", false),
                m("pb_per_json_cpu", "protobuf ÷ JSON CPU", false),
                m("pb_p99_ms", "protobuf p99 ms", false),
                m("json_p99_ms", "JSON p99 ms", false),
                m("pb_delivered_pct", "protobuf delivered %", true),
                m("json_delivered_pct", "JSON delivered %", true),
                m("other_cpu_cores", "other CPU cores", false),
            ],
        ),
        table(
            SYNC_ID,
            "sync",
            format!(
                "A simulator of its own with {} pods ({} nodes); per repeat a fresh watchmux of each build (alternating which first), stopped before the other starts. Sync s = from starting the process until `/readyz` answers 200; CPU-s = the process's CPU time then (all of it since start); RSS a second later; JSON MB as in S11.1, of this simulator. Target: current ≤ baseline.",
                fmt_num(s.pbnative_sync_pods as f64),
                (s.pbnative_sync_pods / 30).max(1)
            ),
            vec![
                m("sync_s", "start → ready s", false),
                m("sync_cpu_s", "CPU-s to ready", false),
                m("sync_rss_mb", "RSS after sync MB", false),
                m("sync_json_mb", "pods' JSON MB (simulator)", false),
                m("sync_rss_per_json", "RSS ÷ JSON after sync", false),
            ],
        ),
    ]
}

/// One S11 table: for each case, its figures as rows, the builds' medians side by side, then
/// current ÷ baseline and the figure's target.
pub fn markdown(spec: &ScenarioSpec, samples: &[&Sample], repeats: usize) -> String {
    let sum = Summary::of(samples);
    let mut md = String::new();
    let _ = writeln!(md, "### {} {}\n\n{}\n", spec.id, spec.name, spec.about);
    let _ = writeln!(
        md,
        "Medians over {repeats} repeat(s) of each build; {CURRENT} ÷ {BASELINE} = the ratio of the medians (for figures where lower is better, < 1 means {CURRENT} is better).\n"
    );
    let mut bases: Vec<&str> = Vec::new();
    for case in &sum.cases {
        if let Some((base, _)) = case.rsplit_once(" · ")
            && !bases.contains(&base)
        {
            bases.push(base);
        }
    }
    for base in bases {
        let _ = writeln!(
            md,
            "| {base} | {BASELINE} | {CURRENT} | {CURRENT} ÷ {BASELINE} | target |\n|---|---:|---:|---:|---|"
        );
        for metric in &spec.metrics {
            let get = |build| sum.get(&variant_case(base, build), TargetKind::Watchmux, metric.key);
            let (b, c) = (get(BASELINE), get(CURRENT));
            if b.is_none() && c.is_none() {
                continue;
            }
            let r = match (b, c) {
                (Some(b), Some(c)) => Some(ratio(c, b)).filter(|r| r.is_finite()),
                _ => None,
            };
            let cell = |v: Option<f64>| fmt_num(v.unwrap_or(f64::NAN));
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                metric.label,
                cell(b),
                cell(c),
                r.map(|r| format!("{}×", fmt_num(r)))
                    .unwrap_or_else(|| "–".into()),
                goal(metric.key).unwrap_or("")
            );
        }
        md.push('\n');
    }
    md
}

/// Runs S11 (watchmux only): `baseline` is the other build's binary, the current build is the
/// bench's own (`env.exe`).
pub async fn run(
    env: &Env,
    s: &Sizes,
    baseline: &Path,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    if !kinds.contains(&TargetKind::Watchmux) {
        eprintln!("  {ID} compares watchmux builds: left out without the watchmux target");
        return Ok(());
    }
    let builds = [
        Build {
            name: BASELINE,
            exe: baseline.to_path_buf(),
        },
        Build {
            name: CURRENT,
            exe: env.exe.clone(),
        },
    ];
    holding(env, s, &builds, out).await?;
    delivery(env, s, &builds, out).await?;
    sync(env, s, &builds, out).await
}

/// `builds` in the order repeat `r` runs them.
fn in_order(builds: &[Build; 2], r: usize) -> [&Build; 2] {
    order(r).map(|name| builds.iter().find(|b| b.name == name).unwrap_or(&builds[0]))
}

/// Starts watchmux of `build` caching pods from `sim`, once it listens (not yet synced).
async fn start_build(env: &Env, sim: &Proc, build: &Build) -> Result<Target, BenchError> {
    let launch = Launch {
        build: Some(build.clone()),
        ..Launch::default()
    };
    targets::start_watchmux_launch(env, sim, &["pods"], &launch).await
}

/// Records one sample of `build` in table `id`.
fn push(
    out: &mut Vec<Sample>,
    id: &'static str,
    base: &str,
    build: &Build,
    r: usize,
    values: Vec<(&'static str, f64)>,
) {
    let sample = Sample {
        scenario: id,
        case: variant_case(base, build.name),
        target: TargetKind::Watchmux,
        repeat: r,
        values,
    };
    eprintln!("  {id} {} #{r}: {}", build.name, brief(&sample));
    out.push(sample);
}

/// GETs `path` from `addr` asking for `enc` and reads the body to its end, counting its bytes
/// (not keeping them).
async fn read_counted(addr: SocketAddr, path: &str, enc: Encoding) -> std::io::Result<(Head, u64)> {
    let mut c = Conn::connect(addr).await?;
    c.get_as(path, enc).await?;
    let head = c.read_head().await?;
    let mut n = 0u64;
    c.read_body(&head, |p| n += p.len() as u64).await?;
    Ok((head, n))
}

/// The bytes of the pods' JSON `resourceVersion=0` LIST from the simulator itself.
async fn json_size(sim: &Proc) -> Result<u64, BenchError> {
    let (head, n) = tokio::time::timeout(
        LIST_TIMEOUT,
        read_counted(sim.addr, PODS_RV0, Encoding::Json),
    )
    .await
    .map_err(|_| {
        BenchError::Run(format!(
            "{ID}: the simulator's LIST took over {LIST_TIMEOUT:?}"
        ))
    })?
    .map_err(|e| BenchError::io(format!("{ID}: the simulator's JSON LIST"), e))?;
    if head.status != 200 || n == 0 {
        return Err(BenchError::Run(format!(
            "{ID}: the simulator answered {} ({n} bytes) to the JSON LIST",
            head.status
        )));
    }
    Ok(n)
}

/// One LIST from watchmux: request to last byte, its CPU during it, its RSS after a pause.
#[derive(Debug, Clone, Copy)]
struct Listed {
    ms: f64,
    cpu_s: f64,
    rss_bytes: u64,
    body_bytes: u64,
}

async fn list(s: &Sizes, t: &Target, enc: Encoding) -> Result<Listed, BenchError> {
    let pids = t.pids();
    let before = procs::usage(&pids);
    let t0 = Instant::now();
    let (head, body_bytes) =
        tokio::time::timeout(LIST_TIMEOUT, read_counted(t.addr, PODS_RV0, enc))
            .await
            .map_err(|_| {
                BenchError::Run(format!(
                    "{ID}: a {} LIST took over {LIST_TIMEOUT:?}",
                    enc.name()
                ))
            })?
            .map_err(|e| BenchError::io(format!("{ID}: {} LIST", enc.name()), e))?;
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    let after = procs::usage(&pids);
    if head.status != 200 || !enc.answered_by(head.content_type.as_deref()) {
        return Err(BenchError::Run(format!(
            "{ID}: watchmux answered {} ({:?}) to a {} LIST",
            head.status,
            head.content_type,
            enc.name()
        )));
    }
    tokio::time::sleep(s.pause(1.0)).await;
    Ok(Listed {
        ms,
        cpu_s: after.cpu_secs - before.cpu_secs,
        rss_bytes: procs::usage(&pids).rss_bytes,
        body_bytes,
    })
}

/// S11.1–S11.3: one simulator of `pbnative_pods` pods; per repeat a fresh process of each
/// build, its sync, two protobuf LISTs and two JSON LISTs.
async fn holding(
    env: &Env,
    s: &Sizes,
    builds: &[Build; 2],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let pods = s.pbnative_pods;
    let sim = targets::start_sim(env, (pods / 30).max(1), pods).await?;
    let result = async {
        let json = json_size(&sim).await?;
        let base = memory_case(s);
        for r in 0..s.repeats {
            for b in in_order(builds, r) {
                procs::wait_quiet(&[sim.pid()], Duration::from_secs(10)).await;
                let t0 = Instant::now();
                let t = start_build(env, &sim, b).await?;
                let figures = holding_figures(s, &t, t0, json).await;
                t.stop().await;
                let [mem, pb, js] = figures?;
                push(out, MEMORY_ID, &base, b, r, mem);
                push(out, PB_LIST_ID, &base, b, r, pb);
                push(out, JSON_LIST_ID, &base, b, r, js);
            }
        }
        Ok(())
    }
    .await;
    sim.stop().await;
    result
}

/// The figures of S11.1, S11.2 and S11.3 of one process `t`, started at `t0`.
async fn holding_figures(
    s: &Sizes,
    t: &Target,
    t0: Instant,
    json: u64,
) -> Result<[Vec<(&'static str, f64)>; 3], BenchError> {
    t.wait_ready(SYNC_TIMEOUT).await?;
    let ready_s = t0.elapsed().as_secs_f64();
    tokio::time::sleep(s.pause(1.0)).await;
    let rss = procs::usage(&t.pids()).rss_bytes;
    let budget = scrape::scrape(t.addr)
        .await?
        .sum("watchmux_memory_used_bytes", &[]);
    let pb1 = list(s, t, Encoding::Protobuf).await?;
    let pb2 = list(s, t, Encoding::Protobuf).await?;
    let js1 = list(s, t, Encoding::Json).await?;
    let js2 = list(s, t, Encoding::Json).await?;
    let budget_end = scrape::scrape(t.addr)
        .await?
        .sum("watchmux_memory_used_bytes", &[]);
    let per_json = |rss: u64| rss as f64 / json as f64;
    let mb = |b: u64| b as f64 / MB;
    let memory = vec![
        ("ready_s", ready_s),
        ("rss_mb", mb(rss)),
        ("budget_mb", budget / MB),
        ("budget_end_mb", budget_end / MB),
        ("json_mb", mb(json)),
        ("rss_per_json", per_json(rss)),
        ("rss_per_json_pb1", per_json(pb1.rss_bytes)),
        ("rss_per_json_pb2", per_json(pb2.rss_bytes)),
        ("rss_per_json_json1", per_json(js1.rss_bytes)),
        ("rss_per_json_json2", per_json(js2.rss_bytes)),
    ];
    let pb = vec![
        ("pb1_ms", pb1.ms),
        ("pb1_cpu_s", pb1.cpu_s),
        ("pb1_rss_mb", mb(pb1.rss_bytes)),
        ("pb2_ms", pb2.ms),
        ("pb2_cpu_s", pb2.cpu_s),
        ("pb2_rss_mb", mb(pb2.rss_bytes)),
        ("pb_body_mb", mb(pb2.body_bytes)),
        ("pb_first_per_later_ms", ratio(pb1.ms, pb2.ms)),
        ("pb_first_per_later_cpu", ratio(pb1.cpu_s, pb2.cpu_s)),
    ];
    let js = vec![
        ("json1_ms", js1.ms),
        ("json1_cpu_s", js1.cpu_s),
        ("json1_rss_mb", mb(js1.rss_bytes)),
        ("json2_ms", js2.ms),
        ("json2_cpu_s", js2.cpu_s),
        ("json2_rss_mb", mb(js2.rss_bytes)),
        ("json_body_mb", mb(js2.body_bytes)),
        ("json_first_per_warm_ms", ratio(js1.ms, js2.ms)),
        ("json_first_per_warm_cpu", ratio(js1.cpu_s, js2.cpu_s)),
        ("json_per_pb_ms", ratio(js2.ms, pb2.ms)),
        (
            "transcode_us_per_pod",
            (js2.cpu_s - pb2.cpu_s) / s.pbnative_pods.max(1) as f64 * 1e6,
        ),
    ];
    Ok([memory, pb, js])
}

/// A figure of a streaming run by key (NaN when it has none).
fn figure(run: &StreamRun, key: &str) -> f64 {
    run.figures()
        .into_iter()
        .find(|(k, _)| *k == key)
        .map_or(f64::NAN, |(_, v)| v)
}

/// S11.4: S1's simulator and writer; per repeat a fresh process of each build, its watchers in
/// protobuf then in JSON.
async fn delivery(
    env: &Env,
    s: &Sizes,
    builds: &[Build; 2],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let sim = targets::start_sim(env, 50, s.broadcast_pods).await?;
    let result = async {
        let base = delivery_case(s);
        let w = s.pbnative_watchers;
        for r in 0..s.repeats {
            for b in in_order(builds, r) {
                let t = start_build(env, &sim, b).await?;
                let runs = async {
                    t.wait_ready(SYNC_TIMEOUT).await?;
                    let mut runs = Vec::new();
                    for enc in [Encoding::Protobuf, Encoding::Json] {
                        let paths = vec!["/api/v1/pods?watch=1".to_string(); w];
                        runs.push(scenarios::broadcast_run(&sim, &t, paths, enc, s, w).await?);
                    }
                    Ok::<_, BenchError>(runs)
                }
                .await;
                t.stop().await;
                let runs = runs?;
                let (pb, js) = (&runs[0], &runs[1]);
                let delivered = |x: &StreamRun| {
                    100.0 * x.stamped_in_window as f64
                        / (w as u64 * x.upstream_stamped).max(1) as f64
                };
                let (pb_cpu, js_cpu) = (
                    figure(pb, "cpu_s_per_million"),
                    figure(js, "cpu_s_per_million"),
                );
                let values = vec![
                    ("pb_cpu_per_m", pb_cpu),
                    ("json_cpu_per_m", js_cpu),
                    ("pb_per_json_cpu", ratio(pb_cpu, js_cpu)),
                    ("pb_p99_ms", figure(pb, "p99_ms")),
                    ("json_p99_ms", figure(js, "p99_ms")),
                    ("pb_delivered_pct", delivered(pb)),
                    ("json_delivered_pct", delivered(js)),
                    (
                        "other_cpu_cores",
                        pb.other_cpu_cores().max(js.other_cpu_cores()),
                    ),
                ];
                push(out, DELIVERY_ID, &base, b, r, values);
            }
        }
        Ok(())
    }
    .await;
    sim.stop().await;
    result
}

/// S11.5: a simulator of `pbnative_sync_pods` pods; per repeat a fresh process of each build,
/// timed to ready.
async fn sync(
    env: &Env,
    s: &Sizes,
    builds: &[Build; 2],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let pods = s.pbnative_sync_pods;
    let sim = targets::start_sim(env, (pods / 30).max(1), pods).await?;
    let result = async {
        let json = json_size(&sim).await?;
        let base = sync_case(s);
        for r in 0..s.repeats {
            for b in in_order(builds, r) {
                procs::wait_quiet(&[sim.pid()], Duration::from_secs(10)).await;
                let t0 = Instant::now();
                let t = start_build(env, &sim, b).await?;
                let figures = async {
                    t.wait_ready(SYNC_TIMEOUT).await?;
                    let secs = t0.elapsed().as_secs_f64();
                    let cpu = procs::usage(&t.pids()).cpu_secs;
                    tokio::time::sleep(s.pause(1.0)).await;
                    let rss = procs::usage(&t.pids()).rss_bytes;
                    Ok::<_, BenchError>(vec![
                        ("sync_s", secs),
                        ("sync_cpu_s", cpu),
                        ("sync_rss_mb", rss as f64 / MB),
                        ("sync_json_mb", json as f64 / MB),
                        ("sync_rss_per_json", rss as f64 / json as f64),
                    ])
                }
                .await;
                t.stop().await;
                push(out, SYNC_ID, &base, b, r, figures?);
            }
        }
        Ok(())
    }
    .await;
    sim.stop().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_alternate_and_the_baseline_is_required() {
        assert_eq!(order(0), [BASELINE, CURRENT]);
        assert_eq!(order(1), [CURRENT, BASELINE]);
        assert_eq!(order(2), order(0));
        let e = check_baseline(None).unwrap_err().to_string();
        assert!(e.contains("--baseline-exe"), "{e}");
        let missing = Path::new("/nonexistent/watchmux-bench");
        let e = check_baseline(Some(missing)).unwrap_err().to_string();
        assert!(e.contains("no such file"), "{e}");
        let exe = std::env::current_exe().unwrap();
        assert_eq!(check_baseline(Some(&exe)).unwrap(), exe.as_path());
        assert!(ratio(1.0, 0.0).is_nan());
        assert_eq!(ratio(3.0, 2.0), 1.5);
    }

    #[test]
    fn every_goal_names_a_figure_and_only_s11_tables_are_its_own() {
        let specs = specs(&Sizes::smoke(), None, Path::new("/x"));
        let keys: Vec<&str> = specs
            .iter()
            .flat_map(|s| s.metrics.iter().map(|m| m.key))
            .collect();
        for (k, _) in GOALS {
            assert!(keys.contains(&k), "{k}");
        }
        // Keys are unique over the tables (the targets are looked up by key).
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len());
        assert!(specs.iter().all(reports));
        let other = ScenarioSpec::table("S1", "x", String::new(), "c", vec![]);
        assert!(!reports(&other));
        let s10 = ScenarioSpec::table("S10", "x", String::new(), "c", vec![]);
        assert!(!reports(&s10));
        assert!(specs[0].about.contains("`baseline` = `(not given)`"));
    }

    #[test]
    fn builds_are_columns_with_their_ratio_and_target() {
        let at = |build: &str, r: usize, values: Vec<(&'static str, f64)>| Sample {
            scenario: MEMORY_ID,
            case: variant_case("100 pods", build),
            target: TargetKind::Watchmux,
            repeat: r,
            values,
        };
        let s = [
            at(BASELINE, 0, vec![("rss_per_json", 2.0), ("ready_s", 4.0)]),
            at(CURRENT, 0, vec![("rss_per_json", 1.0), ("ready_s", 3.0)]),
            at(BASELINE, 1, vec![("rss_per_json", 4.0), ("ready_s", 4.0)]),
            at(CURRENT, 1, vec![("rss_per_json", 0.5)]),
        ];
        let refs: Vec<&Sample> = s.iter().collect();
        let spec = ScenarioSpec::table(
            MEMORY_ID,
            "memory",
            "about".into(),
            "case",
            vec![
                m("ready_s", "ready s", false),
                m("rss_per_json", "RSS ÷ JSON", false),
                m("budget_mb", "budget MB", false),
            ],
        );
        let md = markdown(&spec, &refs, 2);
        assert!(md.starts_with("### S11.1 memory\n\nabout\n"), "{md}");
        assert!(
            md.contains("| 100 pods | baseline | current | current ÷ baseline | target |\n|---|---:|---:|---:|---|\n"),
            "{md}"
        );
        assert!(
            md.contains("| ready s | 4.00 | 3.00 | 0.750× |  |\n"),
            "{md}"
        );
        // Medians 3.0 and 0.75.
        assert!(
            md.contains("| RSS ÷ JSON | 3.00 | 0.750 | 0.250× | ≤ 1.0 |\n"),
            "{md}"
        );
        // A figure neither build measured has no row.
        assert!(!md.contains("budget MB"), "{md}");
        // One build missing: no ratio.
        let only: Vec<&Sample> = s.iter().filter(|x| x.case.ends_with(BASELINE)).collect();
        let md = markdown(&spec, &only, 2);
        assert!(md.contains("| ready s | 4.00 | – | – |  |\n"), "{md}");
    }
}
