//! `watchmux-bench persist`: what the durable cache (`cache.persist_dir`, issue 16) buys and
//! costs. Two parts, against one simulator holding a fleet of N pods:
//!
//! 1. Restart time ([`restart`]): watchmux caching pods is started repeatedly — without a
//!    persisted directory (a full sync from the upstream), with an empty one (the first start,
//!    which also writes the initial state), and from the directory that start left, with the
//!    upstream up (load from disk, then the reconciling relist) and down (reads served from disk
//!    only). Each start is timed to `/readyz` 200, to the first full LIST `resourceVersion=0`
//!    answered with all N items, and (where it applies) to the relist bridged or the first
//!    state written; with the load it put on the upstream and on watchmux itself.
//! 2. Write amplification and CPU ([`churn`]): the simulator churns its pods at a fixed rate
//!    while two watchmux processes, one persisting and one not, follow it in the same run; each
//!    window compares the bytes written to disk with the upstream's event bytes, and the CPU per
//!    event of the two.
//!
//! Orchestration here: options, the simulator, the watchmux processes (this binary's `serve`
//! role, started as children and stopped with SIGTERM so their last batch is written), and the
//! files written ([`report`]). Every wait is bounded; every child is killed when the run ends.

pub mod churn;
pub mod probe;
pub mod report;
pub mod restart;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::BenchError;
use super::procs::{self, Proc};
use super::targets::{self, Env};

/// What a persistence bench runs.
#[derive(Debug, Clone)]
pub struct PersistOptions {
    /// The `watchmux-bench` binary (also the simulator and watchmux).
    pub exe: PathBuf,
    /// Pods of the simulator's fleet.
    pub pods: usize,
    /// Nodes of the fleet.
    pub nodes: usize,
    /// Repeats of each start, and measured churn windows (medians are reported).
    pub repeats: usize,
    /// Simulator writes per second in the churn part (realistic mix: mostly MODIFIED).
    pub churn_rate: f64,
    /// Length of each measured churn window.
    pub churn_window: Duration,
    /// Churn before the first window (watchmux's queues and checkpoints reach their pace).
    pub warmup: Duration,
    /// Bound on each start reaching everything it is timed to.
    pub start_timeout: Duration,
    /// How long after the full LIST was served a start keeps waiting for `/readyz` 200 (with
    /// the upstream down it may never come).
    pub ready_grace: Duration,
    /// Where the persisted directories live (default: a scratch directory, removed after).
    pub data_dir: Option<PathBuf>,
    /// Where to write `persist.md`, `persist.csv` and the processes' logs (none: nowhere).
    pub out: Option<PathBuf>,
    /// The command line, for the report.
    pub command: String,
}

impl PersistOptions {
    /// The sizes: 150,000 pods on 5,000 nodes, 3 repeats, 2,000 writes/s for 60 s
    /// windows after a 15 s warm-up.
    pub fn new(exe: PathBuf) -> PersistOptions {
        PersistOptions {
            exe,
            pods: 150_000,
            nodes: 5000,
            repeats: 3,
            churn_rate: 2000.0,
            churn_window: Duration::from_secs(60),
            warmup: Duration::from_secs(15),
            start_timeout: Duration::from_secs(600),
            ready_grace: Duration::from_secs(20),
            data_dir: None,
            out: None,
            command: "watchmux-bench persist".into(),
        }
    }

    /// Tiny sizes that run in seconds (the smoke test).
    pub fn smoke(exe: PathBuf) -> PersistOptions {
        PersistOptions {
            pods: 300,
            nodes: 20,
            repeats: 1,
            churn_rate: 200.0,
            churn_window: Duration::from_secs(2),
            warmup: Duration::from_secs(1),
            start_timeout: Duration::from_secs(60),
            ready_grace: Duration::from_secs(3),
            ..PersistOptions::new(exe)
        }
    }
}

/// The fleet as the simulator serves it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fleet {
    /// Pods listed from the simulator (every start must serve this many).
    pub pods: u64,
    /// Bytes of that LIST's JSON body.
    pub list_bytes: u64,
    /// Seconds from the simulator's spawn to the end of its first full pod LIST (it loads the
    /// fleet first).
    pub load_secs: f64,
}

/// Everything a persistence bench produced.
#[derive(Debug)]
pub struct PersistReport {
    /// The fleet.
    pub fleet: Fleet,
    /// Every start measured.
    pub starts: Vec<restart::StartSample>,
    /// Every churn window measured (both processes).
    pub churn: Vec<churn::ChurnSample>,
    /// The Markdown report.
    pub markdown: String,
}

/// A running watchmux of this bench.
pub struct Watchmux {
    /// The process.
    pub proc: Proc,
    /// Where it serves.
    pub addr: SocketAddr,
}

impl Watchmux {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Stops it with SIGTERM (so its persister writes what is queued), killing it after 30 s.
    pub async fn stop(self) {
        if !self.proc.terminate(Duration::from_secs(30)).await {
            eprintln!("  watchmux did not stop within 30 s of SIGTERM: killed");
        }
    }
}

/// watchmux's configuration: pods cached from `upstream`, persisted under `persist` if given,
/// the request limits lifted (the bench is one client address).
fn config(listen: SocketAddr, upstream: SocketAddr, persist: Option<&Path>) -> String {
    let persist = persist
        .map(|p| {
            let p = p
                .display()
                .to_string()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            format!("persist_dir = \"{p}\"\n")
        })
        .unwrap_or_default();
    format!(
        "# Written by `watchmux-bench persist`.\n[server]\nlisten = \"{listen}\"\nmax_watches_per_client = 1000000\nmax_concurrent_lists = 100000\n\n[upstream]\nurl = \"http://{upstream}\"\n\n[cache]\nmode = \"listed\"\n{persist}\n[[cache.resources]]\ngroup = \"\"\nversion = \"v1\"\nresource = \"pods\"\n"
    )
}

/// Starts watchmux (`label` names its config and log) and returns it once it listens.
pub async fn start_watchmux(
    env: &Env,
    label: &str,
    upstream: SocketAddr,
    persist: Option<&Path>,
) -> Result<Watchmux, BenchError> {
    let addr = procs::free_addr()?;
    let cfg = env.workdir.join(format!("watchmux-{label}.toml"));
    std::fs::write(&cfg, config(addr, upstream, persist))
        .map_err(|e| BenchError::io(format!("writing {}", cfg.display()), e))?;
    let args = [
        "--log",
        "info",
        "serve",
        "--config",
        &cfg.display().to_string(),
    ]
    .map(String::from);
    let proc = Proc::spawn(
        "watchmux",
        &env.exe,
        &args,
        addr,
        &env.log(&format!("watchmux-{label}")),
        Duration::from_secs(60),
    )
    .await?;
    Ok(Watchmux { proc, addr })
}

/// Runs both parts and writes the report.
pub async fn run(opts: &PersistOptions) -> Result<PersistReport, BenchError> {
    let started = Instant::now();
    let nofile = super::raise_nofile_limit();
    let scratch = tempfile::Builder::new()
        .prefix("watchmux-bench-persist-")
        .tempdir()
        .map_err(|e| BenchError::io("creating a scratch directory", e))?;
    let workdir = match &opts.out {
        Some(out) => {
            let logs = out.join("persist-logs");
            std::fs::create_dir_all(&logs)
                .map_err(|e| BenchError::io(format!("creating {}", logs.display()), e))?;
            logs
        }
        None => scratch.path().to_path_buf(),
    };
    let env = Env {
        exe: opts.exe.clone(),
        workdir,
        nginx: None,
        pki: None,
    };
    let data = opts
        .data_dir
        .clone()
        .unwrap_or_else(|| scratch.path().join("data"));
    eprintln!("persist: loading {} pods into the simulator …", opts.pods);
    let t0 = Instant::now();
    let sim = targets::start_sim(&env, opts.nodes.max(1), opts.pods).await?;
    // The simulator binds before it loads the fleet, and answers once loaded.
    let listed = probe::count_list(sim.addr, "/api/v1/pods")
        .await
        .map_err(|e| BenchError::io("listing the simulator's pods", e))?;
    let load_secs = t0.elapsed().as_secs_f64();
    if listed.status != 200 || listed.items == 0 {
        return Err(BenchError::Setup(format!(
            "the simulator's pod LIST answered {} with {} items",
            listed.status, listed.items
        )));
    }
    let fleet = Fleet {
        pods: listed.items,
        list_bytes: listed.bytes,
        load_secs,
    };
    eprintln!(
        "persist: {} pods, {:.0} MB of JSON, loaded and listed in {load_secs:.0} s",
        fleet.pods,
        fleet.list_bytes as f64 / 1e6
    );
    let result = async {
        let starts = restart::run(&env, opts, &sim, &data, fleet.pods).await?;
        let churn = churn::run(&env, opts, &sim, &data).await?;
        Ok::<_, BenchError>((starts, churn))
    }
    .await;
    sim.stop().await;
    let (starts, churn) = result?;
    let md = report::markdown(&report::Inputs {
        opts,
        fleet: &fleet,
        starts: &starts,
        churn: &churn,
        took: started.elapsed(),
        nofile,
    });
    if let Some(out) = &opts.out {
        let write = |name: &str, body: &str| {
            let p = out.join(name);
            std::fs::write(&p, body)
                .map_err(|e| BenchError::io(format!("writing {}", p.display()), e))
        };
        write("persist.md", &md)?;
        write("persist.csv", &report::csv(&starts, &churn))?;
    }
    Ok(PersistReport {
        fleet,
        starts,
        churn,
        markdown: md,
    })
}
