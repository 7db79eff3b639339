//! The servers a bench run talks to: the simulator (always the upstream) and the target under
//! test, which is watchmux, the simulator itself ("direct"), nginx, or the limit program.
//!
//! Starting, readiness and stopping only: [`Target::stop`] stops the target's own processes,
//! never the simulator, and what is measured is the scenarios' business.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::BenchError;
use super::client;
use super::nginx::Nginx;
use super::procs::{self, Proc};

/// What the clients talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    /// watchmux in front of the simulator.
    Watchmux,
    /// The simulator itself, no proxy.
    Direct,
    /// nginx as a streaming reverse proxy in front of the simulator.
    Nginx,
    /// The minimal program writing the same bytes to the same sockets.
    Limit,
}

impl TargetKind {
    /// All, in report order.
    pub const ALL: [TargetKind; 4] = [
        TargetKind::Watchmux,
        TargetKind::Direct,
        TargetKind::Nginx,
        TargetKind::Limit,
    ];

    /// Name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Watchmux => "watchmux",
            TargetKind::Direct => "direct",
            TargetKind::Nginx => "nginx",
            TargetKind::Limit => "limit",
        }
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TargetKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TargetKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown target {s:?} (watchmux, direct, nginx, limit)"))
    }
}

/// Where child processes come from and where they write.
#[derive(Debug, Clone)]
pub struct Env {
    /// The `watchmux-bench` binary: it is also the simulator, watchmux and the limit program.
    pub exe: PathBuf,
    /// Scratch directory: configs and logs.
    pub workdir: PathBuf,
    /// The nginx binary, when installed.
    pub nginx: Option<PathBuf>,
}

impl Env {
    /// Where the child process `name` ("simulator", "watchmux", …) writes its stderr.
    pub fn log(&self, name: &str) -> PathBuf {
        self.workdir.join(format!("{name}.log"))
    }
}

/// Starts the simulator with a fleet (no churn: runs start it through `/sim/churn`).
pub async fn start_sim(env: &Env, nodes: usize, pods: usize) -> Result<Proc, BenchError> {
    let args: Vec<String> = [
        "--nodes",
        &nodes.to_string(),
        "--pods",
        &pods.to_string(),
        "--namespaces",
        "50",
        "--history-window-secs",
        "600",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    start_sim_args(env, &args).await
}

/// Starts the simulator with `sim_args` (its own flags: fleet, history, bookmarks).
pub async fn start_sim_args(env: &Env, sim_args: &[String]) -> Result<Proc, BenchError> {
    let addr = procs::free_addr()?;
    let mut args: Vec<String> = ["--log", "warn", "sim", "--listen", &addr.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend_from_slice(sim_args);
    // Loading 150,000 pods takes about half a minute on two cores.
    Proc::spawn(
        "simulator",
        &env.exe,
        &args,
        addr,
        &env.log("simulator"),
        Duration::from_secs(300),
    )
    .await
}

/// POSTs to a simulator control endpoint.
pub async fn sim_control(sim: SocketAddr, path_and_query: &str) -> Result<(), BenchError> {
    let mut c = client::Conn::connect(sim)
        .await
        .map_err(|e| BenchError::io("connecting to the simulator", e))?;
    let req = format!("POST {path_and_query} HTTP/1.1\r\nHost: {sim}\r\nContent-Length: 0\r\n\r\n");
    c.raw_write(req.as_bytes())
        .await
        .map_err(|e| BenchError::io("writing to the simulator", e))?;
    let head = c
        .read_head()
        .await
        .map_err(|e| BenchError::io("reading the simulator's answer", e))?;
    if head.status != 200 {
        return Err(BenchError::Setup(format!(
            "simulator answered {} to POST {path_and_query}",
            head.status
        )));
    }
    Ok(())
}

/// Sets the simulator's churn: `mix` is `status` or `realistic`; 0 stops it.
pub async fn set_churn(sim: SocketAddr, per_second: f64, mix: &str) -> Result<(), BenchError> {
    sim_control(
        sim,
        &format!("/sim/churn?perSecond={per_second}&mix={mix}&seed=7"),
    )
    .await
}

/// The simulator's JSON counters.
pub async fn sim_stats(sim: SocketAddr) -> Result<serde_json::Value, BenchError> {
    let mut c = client::Conn::connect(sim)
        .await
        .map_err(|e| BenchError::io("connecting to the simulator", e))?;
    c.get("/sim/stats")
        .await
        .map_err(|e| BenchError::io("asking for /sim/stats", e))?;
    let head = c
        .read_head()
        .await
        .map_err(|e| BenchError::io("reading /sim/stats", e))?;
    let mut body = Vec::new();
    c.read_body(&head, |p| body.extend_from_slice(p))
        .await
        .map_err(|e| BenchError::io("reading /sim/stats", e))?;
    serde_json::from_slice(&body).map_err(|e| BenchError::Setup(format!("/sim/stats: {e}")))
}

/// The list and watch requests the simulator has served for `resource`, and the bytes sent.
pub async fn sim_requests(sim: SocketAddr, resource: &str) -> Result<(u64, u64, u64), BenchError> {
    let s = sim_stats(sim).await?;
    let r = &s["resources"][resource];
    Ok((
        r["listRequests"].as_u64().unwrap_or(0),
        r["watchRequests"].as_u64().unwrap_or(0),
        r["bytesSent"].as_u64().unwrap_or(0),
    ))
}

/// [`sim_requests`] once the counters stop moving (at most a second): the simulator counts a
/// watch when its stream starts, which can be a moment after the client read the response head.
pub async fn settled_requests(
    sim: SocketAddr,
    resource: &str,
) -> Result<(u64, u64, u64), BenchError> {
    let mut last = sim_requests(sim, resource).await?;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = sim_requests(sim, resource).await?;
        if now == last {
            break;
        }
        last = now;
    }
    Ok(last)
}

/// The current resourceVersion of `resource` (a consistent LIST of one item).
pub async fn current_rv(addr: SocketAddr, resource: &str) -> Result<String, BenchError> {
    let l = client::list(addr, &format!("/api/v1/{resource}?limit=1"))
        .await
        .map_err(|e| BenchError::io("listing for the current resourceVersion", e))?;
    l.resource_version
        .ok_or_else(|| BenchError::Setup(format!("no resourceVersion in the {resource} list")))
}

/// A running target.
pub struct Target {
    /// Which.
    pub kind: TargetKind,
    /// Where clients connect.
    pub addr: SocketAddr,
    running: Running,
    sim_pid: u32,
}

enum Running {
    Proc(Proc),
    Nginx(Nginx),
    Direct,
}

/// watchmux's settings for a bench: `resources` cached (core/v1 names), limits lifted so the
/// bench's thousands of same-address clients are not mistaken for one abusive client;
/// `cache_extra` is more `[cache]` keys (TOML lines).
fn watchmux_config(
    upstream: SocketAddr,
    listen: SocketAddr,
    resources: &[&str],
    cache_extra: &str,
) -> String {
    let mut s = format!(
        "# Written by `watchmux-bench`.\n[server]\nlisten = \"{listen}\"\nmax_watches_per_client = 1000000\nmax_concurrent_lists = 100000\n\n[log]\nlevel = \"warn\"\n\n[upstream]\nurl = \"http://{upstream}\"\n\n[cache]\n{cache_extra}"
    );
    for r in resources {
        s.push_str(&format!(
            "\n[[cache.resources]]\ngroup = \"\"\nversion = \"v1\"\nresource = \"{r}\"\n"
        ));
    }
    s
}

/// Starts watchmux caching `resources` from `sim` and returns it once it listens (not yet
/// synced: see [`Target::wait_ready`]).
pub async fn start_watchmux(
    env: &Env,
    sim: &Proc,
    resources: &[&str],
) -> Result<Target, BenchError> {
    start_watchmux_with(env, sim, resources, "", None).await
}

/// [`start_watchmux`] with more `[cache]` settings (`cache_extra`: TOML lines) and, when
/// given, its own log filter (else the bench's `--log`).
pub async fn start_watchmux_with(
    env: &Env,
    sim: &Proc,
    resources: &[&str],
    cache_extra: &str,
    log: Option<&str>,
) -> Result<Target, BenchError> {
    let addr = procs::free_addr()?;
    let config = env.workdir.join(format!("watchmux-{}.toml", addr.port()));
    std::fs::write(
        &config,
        watchmux_config(sim.addr, addr, resources, cache_extra),
    )
    .map_err(|e| BenchError::io(format!("writing {}", config.display()), e))?;
    let mut args = ["serve", "--config", &config.display().to_string()]
        .map(String::from)
        .to_vec();
    if let Some(level) = log {
        args.extend(["--log".to_string(), level.to_string()]);
    }
    own_process(env, TargetKind::Watchmux, sim, addr, &args).await
}

/// Runs the bench binary with `args` (its `serve` or `limit` role) as target `kind` on `addr`.
async fn own_process(
    env: &Env,
    kind: TargetKind,
    sim: &Proc,
    addr: SocketAddr,
    args: &[String],
) -> Result<Target, BenchError> {
    let p = Proc::spawn(
        kind.name(),
        &env.exe,
        args,
        addr,
        &env.log(kind.name()),
        Duration::from_secs(30),
    )
    .await?;
    Ok(Target {
        kind,
        addr,
        running: Running::Proc(p),
        sim_pid: sim.pid(),
    })
}

/// Starts a target in front of `sim` and waits until it can serve (watchmux: synced).
pub async fn start(
    env: &Env,
    kind: TargetKind,
    sim: &Proc,
    resources: &[&str],
) -> Result<Target, BenchError> {
    let t = match kind {
        TargetKind::Watchmux => start_watchmux(env, sim, resources).await?,
        TargetKind::Direct => Target {
            kind,
            addr: sim.addr,
            running: Running::Direct,
            sim_pid: sim.pid(),
        },
        TargetKind::Nginx => {
            let bin = env.nginx.as_deref().ok_or_else(|| {
                BenchError::Setup(
                    "nginx is not installed (run crates/watchmux-bench/scripts/install-nginx)"
                        .into(),
                )
            })?;
            let addr = procs::free_addr()?;
            let dir = env.workdir.join(format!("nginx-{}", addr.port()));
            std::fs::create_dir_all(&dir)
                .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
            let n = Nginx::start(bin, addr, sim.addr, &dir)
                .await
                .map_err(|e| BenchError::Setup(format!("nginx: {e}")))?;
            Target {
                kind,
                addr,
                running: Running::Nginx(n),
                sim_pid: sim.pid(),
            }
        }
        TargetKind::Limit => {
            let addr = procs::free_addr()?;
            let upstream = format!("http://{}", sim.addr);
            let args = [
                "limit",
                "--listen",
                &addr.to_string(),
                "--upstream",
                &upstream,
            ]
            .map(String::from);
            own_process(env, kind, sim, addr, &args).await?
        }
    };
    t.wait_ready(Duration::from_secs(600)).await?;
    Ok(t)
}

impl Target {
    /// Processes whose CPU and memory count as this target's (for `direct`, the simulator).
    pub fn pids(&self) -> Vec<u32> {
        match &self.running {
            Running::Proc(p) => vec![p.pid()],
            Running::Nginx(n) => n.pids(),
            Running::Direct => vec![self.sim_pid],
        }
    }

    /// For watchmux, waits until `/readyz` answers 200 (every cached resource synced); returns
    /// how long that took. Other targets are ready once they listen.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<Duration, BenchError> {
        let t0 = Instant::now();
        if self.kind != TargetKind::Watchmux {
            return Ok(Duration::ZERO);
        }
        loop {
            if let Ok(l) = client::list(self.addr, "/readyz").await
                && l.status == 200
            {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > timeout {
                return Err(BenchError::Setup(format!(
                    "watchmux not ready after {timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the target's own processes (never the simulator).
    pub async fn stop(self) {
        match self.running {
            Running::Proc(p) => p.stop().await,
            Running::Nginx(n) => n.stop().await,
            Running::Direct => {}
        }
    }
}

/// The nginx binary if installed.
pub fn find_nginx() -> Option<PathBuf> {
    Nginx::find()
}
