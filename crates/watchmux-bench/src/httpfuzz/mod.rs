//! `watchmux-bench httpfuzz`: HTTP-level fuzzing of watchmux end to end. The simulator and
//! watchmux run as child processes (the bench's `sim` and `serve` roles, their output in log
//! files); thousands of generated and mutated requests ([`generate`]: real clients' requests from
//! [`corpus`], changed by [`mutate`]; the kube grammar; websocket, HTTP/2 and raw bytes) go to
//! watchmux from a few concurrent workers ([`wire`]), and every answer is judged ([`check`]).
//! After the run: no panic in either log, watchmux's open files and memory back near their
//! baseline once every client left (but for the watches [`report::held`] explains, and for
//! what the fuzz wrote into the cache), and its cache equal to the simulator ([`after`]); the
//! report ([`report`]) has every finding with the exact bytes that reproduce it.
//!
//! Orchestration only: starting and stopping the processes, the warm-up, the workers, the
//! after-run measurements. Every wait is bounded and both children are killed at the end.

pub mod after;
pub mod case;
pub mod check;
pub mod corpus;
pub mod generate;
pub mod mutate;
pub mod parse;
pub mod report;
pub mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::time::Instant;

use super::BenchError;
use super::client;
use super::procs::{self, Proc};
use super::targets::{self, Env};
use case::{Framing, Req};
use check::Finding;
use corpus::Ctx;
use report::{AfterRun, Stats};

/// What a fuzz run does.
#[derive(Debug, Clone)]
pub struct FuzzOptions {
    /// The `watchmux-bench` binary (also the simulator and watchmux).
    pub exe: PathBuf,
    /// Cases to send.
    pub requests: u64,
    /// Seed: case `i` of a seed is always the same.
    pub seed: u64,
    /// Cases in flight at once.
    pub concurrency: usize,
    /// Only these case indices (reproducing a finding); empty: `0..requests`.
    pub only: Vec<u64>,
    /// Time and size bounds of each exchange.
    pub limits: wire::Limits,
    /// Pods of the simulator's fleet.
    pub pods: usize,
    /// Nodes of the fleet.
    pub nodes: usize,
    /// How much watchmux's RSS may grow over the run and still count as back near its
    /// baseline, bytes (its caches hold what the fuzz wrote).
    pub rss_allowance: u64,
    /// How long to wait for watchmux to close its client connections after the run, and for
    /// its cache to match the simulator.
    pub settle: Duration,
    /// Write `httpfuzz.md`, the logs and each finding's request bytes here.
    pub out: Option<PathBuf>,
    /// watchmux's `cache.mode`: `listed` (the four kinds below, everything else passed
    /// through) or `on-demand` (those four from the start, every other kind read cached too).
    pub cache_mode: String,
    /// Print progress to stderr.
    pub progress: bool,
    /// The command line, for the report.
    pub command: String,
}

impl FuzzOptions {
    /// Defaults: 10,000 cases, seed 1, 32 at once, 300 pods on 10 nodes.
    pub fn new(exe: PathBuf) -> FuzzOptions {
        FuzzOptions {
            exe,
            requests: 10_000,
            seed: 1,
            concurrency: 32,
            only: Vec::new(),
            limits: wire::Limits::default(),
            pods: 300,
            nodes: 10,
            rss_allowance: 64 << 20,
            settle: Duration::from_secs(30),
            out: None,
            cache_mode: "listed".into(),
            progress: false,
            command: "watchmux-bench httpfuzz".into(),
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct FuzzReport {
    /// Tallies and per-case findings.
    pub stats: Stats,
    /// After-run figures.
    pub after: AfterRun,
    /// After-run findings (panics, leaks, cache).
    pub after_findings: Vec<Finding>,
    /// The report.
    pub markdown: String,
    /// No finding at all.
    pub passed: bool,
}

/// watchmux's configuration for a fuzz run: limits low enough that the fuzz reaches them
/// (64 KiB of headers, a 5 s header timeout), watch limits out of the way (every case comes from
/// one address), pods, nodes, namespaces and configmaps cached from the start (in listed mode,
/// everything else passes through).
fn config(listen: SocketAddr, upstream: SocketAddr, mode: &str) -> String {
    let max_header = check::MAX_HEADER_BYTES;
    let mut s = format!(
        "# Written by `watchmux-bench httpfuzz`.\n[server]\nlisten = \"{listen}\"\nmax_watches_per_client = 1000000\nmax_concurrent_lists = 100000\nmax_header_bytes = {max_header}\nheader_read_timeout_secs = 5\n\n[log]\nlevel = \"warn\"\n\n[upstream]\nurl = \"http://{upstream}\"\n\n[cache]\nmode = \"{mode}\"\n"
    );
    for r in CACHED {
        s.push_str(&format!(
            "\n[[cache.resources]]\ngroup = \"\"\nversion = \"v1\"\nresource = \"{r}\"\n"
        ));
    }
    s
}

/// The resources watchmux caches in a fuzz run.
const CACHED: [&str; 4] = ["pods", "nodes", "namespaces", "configmaps"];
/// The resources compared with the simulator after the run.
const COMPARED: [&str; 3] = ["pods", "nodes", "configmaps"];

async fn wait_ready(addr: SocketAddr, timeout: Duration) -> Result<(), BenchError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(l) = client::list(addr, "/readyz").await
            && l.status == 200
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Setup(format!(
                "watchmux not ready after {timeout:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get_json(addr: SocketAddr, path: &str) -> Result<Value, BenchError> {
    let (status, body) = client::get_body(addr, path)
        .await
        .map_err(|e| BenchError::io(format!("GET {path}"), e))?;
    if status != 200 {
        return Err(BenchError::Setup(format!("GET {path}: {status}")));
    }
    serde_json::from_slice(&body).map_err(|e| BenchError::Setup(format!("GET {path}: {e}")))
}

fn names(v: &Value) -> Vec<(String, String)> {
    v.get("items")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|i| {
                    let s = |k| {
                        i.pointer(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    (s("/metadata/namespace"), s("/metadata/name"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Reads what the simulator holds through watchmux: names, a resourceVersion, real tokens.
async fn harvest(watchmux: SocketAddr, sim: SocketAddr) -> Result<Ctx, BenchError> {
    let pods = get_json(watchmux, "/api/v1/pods?resourceVersion=0").await?;
    let rv = pods
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut ctx = Ctx {
        host: watchmux.to_string(),
        namespaces: names(&get_json(watchmux, "/api/v1/namespaces?resourceVersion=0").await?)
            .into_iter()
            .map(|(_, n)| n)
            .collect(),
        pods: names(&pods),
        nodes: names(&get_json(watchmux, "/api/v1/nodes?resourceVersion=0").await?)
            .into_iter()
            .map(|(_, n)| n)
            .collect(),
        configmaps: names(&get_json(watchmux, "/api/v1/configmaps?resourceVersion=0").await?),
        rv,
        continue_tokens: Vec::new(),
    };
    for (addr, path) in [
        (watchmux, "/api/v1/pods?limit=3"),
        (watchmux, "/api/v1/pods?limit=2&resourceVersion=0"),
        (sim, "/api/v1/pods?limit=5"),
        (watchmux, "/api/v1/configmaps?limit=1"),
    ] {
        let v = get_json(addr, path).await?;
        if let Some(t) = v.pointer("/metadata/continue").and_then(Value::as_str) {
            ctx.continue_tokens.push(t.to_string());
        }
    }
    Ok(ctx)
}

/// Creates a few ConfigMaps on the simulator, so GETs, updates and deletes have targets.
async fn seed_configmaps(sim: SocketAddr, namespaces: &[String], lim: &wire::Limits) {
    for (i, ns) in namespaces.iter().take(10).enumerate() {
        let mut r = Req::get(format!("/api/v1/namespaces/{ns}/configmaps"), &[])
            .with_body(
                "POST",
                corpus::configmap_json(ns, &format!("seed-{i}"), "v"),
            )
            .header("Content-Type", "application/json");
        r.framing = Framing::Auto;
        let c = case::Case {
            index: 0,
            transport: case::Transport::Http1,
            origin: case::Origin::Corpus,
            kind: case::Kind::Write,
            note: String::new(),
            wire: case::Wire::Http1 {
                bytes: r.to_http1(&sim.to_string()),
                half_close: false,
                more: false,
            },
        };
        let _ = wire::exchange(sim, &sim.to_string(), &c, lim).await;
    }
}

/// Runs the fuzz cases `indices` of `seed` with `concurrency` workers against `addr`.
async fn fuzz(
    addr: SocketAddr,
    ctx: Arc<Ctx>,
    seed: u64,
    indices: Arc<Vec<u64>>,
    concurrency: usize,
    lim: wire::Limits,
    progress: bool,
) -> Stats {
    let stats = Arc::new(Mutex::new(Stats::default()));
    let next = Arc::new(AtomicU64::new(0));
    let total = indices.len() as u64;
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (stats, next, ctx, indices) =
            (stats.clone(), next.clone(), ctx.clone(), indices.clone());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&index) = usize::try_from(i).ok().and_then(|i| indices.get(i)) else {
                    return;
                };
                let c = generate::case(seed, index, &ctx);
                let lim = if check::must_answer(&c) {
                    lim
                } else {
                    lim.unsure()
                };
                let x = wire::exchange(addr, &ctx.host, &c, &lim).await;
                let f = check::check(&c, &x);
                stats.lock().record(seed, &ctx.host, &c, &x, &f);
                if progress && total >= 10 && (i + 1) % (total / 10).max(1) == 0 {
                    let s = stats.lock();
                    eprintln!(
                        "httpfuzz: {}/{total} cases, {} findings, {:.0} s",
                        i + 1,
                        s.findings,
                        started.elapsed().as_secs_f64()
                    );
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
    stats.lock().clone()
}

/// Runs the fuzz: starts the simulator and watchmux, sends the cases, checks what is left.
pub async fn run(opts: &FuzzOptions) -> Result<FuzzReport, BenchError> {
    let tmp = tempfile::tempdir().map_err(|e| BenchError::io("creating a work directory", e))?;
    let workdir = match &opts.out {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| BenchError::io(format!("creating {}", d.display()), e))?;
            d.clone()
        }
        None => tmp.path().to_path_buf(),
    };
    let env = Env {
        exe: opts.exe.clone(),
        workdir: workdir.clone(),
        nginx: None,
        pki: None,
    };
    for name in ["simulator", "watchmux"] {
        let _ = std::fs::remove_file(env.log(name));
    }
    let sim = targets::start_sim(&env, opts.nodes, opts.pods).await?;
    let lim = opts.limits;
    let namespaces: Vec<String> = names(&get_json(sim.addr, "/api/v1/namespaces").await?)
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    seed_configmaps(sim.addr, &namespaces, &lim).await;

    let addr = procs::free_addr()?;
    let config_path = workdir.join("watchmux-httpfuzz.toml");
    std::fs::write(&config_path, config(addr, sim.addr, &opts.cache_mode))
        .map_err(|e| BenchError::io(format!("writing {}", config_path.display()), e))?;
    let args = ["serve", "--config", &config_path.display().to_string()].map(String::from);
    let wm = Proc::spawn(
        "watchmux",
        &opts.exe,
        &args,
        addr,
        &env.log("watchmux"),
        Duration::from_secs(30),
    )
    .await?;
    wait_ready(addr, Duration::from_secs(60)).await?;
    let ctx = Arc::new(harvest(addr, sim.addr).await?);

    // Warm-up: every transport once or twice, so lazily built state is in the baseline.
    let warm: Arc<Vec<u64>> = Arc::new((1_000_000_000..1_000_000_060).collect());
    let warm = fuzz(addr, ctx.clone(), opts.seed, warm, 4, lim, false).await;
    after::wait_clients_gone(wm.pid(), addr.port(), sim.addr.port(), opts.settle).await;
    procs::wait_quiet(&[wm.pid()], Duration::from_secs(5)).await;
    let fds_before = after::fds(wm.pid(), addr.port(), sim.addr.port());
    let rss_before = procs::usage(&[wm.pid()]).rss_bytes;
    let counted_before = after::counted_bytes(addr).await;
    let sim_rss_before = procs::usage(&[sim.pid()]).rss_bytes;

    let indices: Vec<u64> = if opts.only.is_empty() {
        (0..opts.requests).collect()
    } else {
        opts.only.clone()
    };
    let cpu0 = [wm.pid(), sim.pid(), 0].map(|p| procs::usage(&[p]).cpu_secs);
    let t0 = Instant::now();
    let mut stats = fuzz(
        addr,
        ctx.clone(),
        opts.seed,
        Arc::new(indices),
        opts.concurrency,
        lim,
        opts.progress,
    )
    .await;
    let secs = t0.elapsed().as_secs_f64();
    // The warm-up's cases count for findings, and its connections are traced back to them.
    stats.absorb_warm_up(warm);
    let cpu = [wm.pid(), sim.pid(), 0].map(|p| procs::usage(&[p]).cpu_secs);
    let cpu = [0, 1, 2].map(|i| cpu[i] - cpu0[i]);

    // Every client is gone: watchmux must let go of their connections, watches and memory
    // (but for those `report::held` explains).
    let deadline = Instant::now() + opts.settle;
    loop {
        let f = after::fds(wm.pid(), addr.port(), sim.addr.port());
        let left = f
            .clients
            .iter()
            .filter(|(port, _)| !stats.ports.get(port).is_some_and(|p| p.held))
            .count();
        if left == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    procs::wait_quiet(&[wm.pid()], Duration::from_secs(10)).await;
    let fds_after = after::fds(wm.pid(), addr.port(), sim.addr.port());
    let rss_after = procs::usage(&[wm.pid()]).rss_bytes;
    let counted_after = after::counted_bytes(addr).await;
    let sim_rss_after = procs::usage(&[sim.pid()]).rss_bytes;
    let mut cache = Vec::new();
    for r in COMPARED {
        cache.push(after::compare(addr, sim.addr, r, opts.settle).await);
    }
    wm.stop().await;
    sim.stop().await;
    let mut panics = Vec::new();
    for name in ["simulator", "watchmux"] {
        let log = std::fs::read_to_string(env.log(name)).unwrap_or_default();
        panics.extend(
            check::panics(&log)
                .into_iter()
                .map(|l| (name.to_string(), l)),
        );
    }
    let (mut open_cases, mut held_cases, mut open_requests) = (Vec::new(), Vec::new(), Vec::new());
    for (port, st) in &fds_after.clients {
        match stats.ports.get(port) {
            Some(p) => {
                let line = format!(
                    "case {} ({}, tcp state {st}): {}",
                    p.index,
                    p.transport.name(),
                    p.note
                );
                if p.held {
                    held_cases.push(line);
                } else {
                    open_cases.push(line);
                    if open_requests.len() < 3 {
                        let c = generate::case(opts.seed, p.index, &ctx);
                        open_requests.push((p.index, c.bytes(&ctx.host)));
                    }
                }
            }
            None => open_cases.push(format!("port {port} (tcp state {st}): not a fuzz case")),
        }
    }
    let held_total = stats.held;
    let after_run = AfterRun {
        counted_before,
        counted_after,
        held_total,
        open_cases,
        open_requests,
        held_cases,
        panics,
        rss_before,
        rss_after,
        rss_allowance: opts.rss_allowance,
        fds_before,
        fds_after,
        sim_rss: (sim_rss_before, sim_rss_after),
        cpu_secs: cpu,
        cache,
    };
    let after_findings = after_run.findings();
    let markdown = report::markdown(
        &opts.command,
        opts.seed,
        opts.concurrency,
        secs,
        &stats,
        &after_run,
        &after_findings,
    );
    if let Some(d) = &opts.out {
        let _ = std::fs::write(d.join("httpfuzz.md"), &markdown);
        for g in stats.groups.values() {
            let e = &g.example;
            let _ = std::fs::write(
                d.join(format!("finding-{}-{}-{}.req", g.rule, e.seed, e.index)),
                &e.request,
            );
        }
    }
    let passed = stats.findings == 0 && after_findings.is_empty();
    Ok(FuzzReport {
        stats,
        after: after_run,
        after_findings,
        markdown,
        passed,
    })
}
