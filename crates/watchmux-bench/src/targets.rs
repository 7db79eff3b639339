//! The servers a bench run talks to: the simulator (always the upstream) and the target under
//! test, which is watchmux, the simulator itself ("direct"), nginx, or the limit program.
//!
//! Starting, readiness and stopping only: [`Target::stop`] stops the target's own processes,
//! never the simulator, and what is measured is the scenarios' business. Every target can serve
//! TLS with the run's certificate ([`Launch::tls`]): watchmux through its config, the limit
//! program and the simulator through their flags (the simulator on a second, HTTPS address,
//! its plain one staying the upstream and the control endpoint), nginx through `listen ... ssl`.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::BenchError;
use super::client::{self, Endpoint};
use super::nginx::Nginx;
use super::procs::{self, Proc};
use super::tls::{Pki, Transport};

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
    /// The run's CA and serving certificate; `None` when nothing is served over TLS (then the
    /// simulators have no HTTPS address either).
    pub pki: Option<Arc<Pki>>,
}

impl Env {
    /// Where the child process `name` ("simulator", "watchmux", …) writes its stderr.
    pub fn log(&self, name: &str) -> PathBuf {
        self.workdir.join(format!("{name}.log"))
    }

    /// The run's certificates, or why a TLS case cannot run.
    pub fn pki(&self) -> Result<&Arc<Pki>, BenchError> {
        self.pki.as_ref().ok_or_else(|| {
            BenchError::Setup("TLS asked for, but this run made no certificate".into())
        })
    }
}

/// Starts the simulator with a fleet (no churn: runs start it through `/sim/churn`).
pub async fn start_sim(env: &Env, nodes: usize, pods: usize) -> Result<Proc, BenchError> {
    start_sim_args(env, &fleet_args(nodes, pods)).await
}

/// [`start_sim`], the simulator writing its live heap bytes to `heap_file`.
pub async fn start_sim_with_heap(
    env: &Env,
    nodes: usize,
    pods: usize,
    heap_file: &Path,
) -> Result<Proc, BenchError> {
    let args = fleet_args(nodes, pods);
    start_sim_full(env, &args, Some(heap_file)).await
}

fn fleet_args(nodes: usize, pods: usize) -> Vec<String> {
    [
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
    .collect()
}

/// Starts the simulator with `sim_args` (its own flags: fleet, history, bookmarks). When the
/// run has certificates, it also serves HTTPS on a second address ([`Proc::tls_addr`]).
pub async fn start_sim_args(env: &Env, sim_args: &[String]) -> Result<Proc, BenchError> {
    start_sim_full(env, sim_args, None).await
}

async fn start_sim_full(
    env: &Env,
    sim_args: &[String],
    heap_file: Option<&Path>,
) -> Result<Proc, BenchError> {
    let mut tries = PORT_TRIES;
    loop {
        match start_sim_once(env, sim_args, heap_file).await {
            Err(BenchError::ExitedEarly(why)) if tries > 1 => {
                tries -= 1;
                eprintln!("{why}; trying another port");
            }
            r => return r,
        }
    }
}

/// [`start_sim_full`] on ports found free now.
async fn start_sim_once(
    env: &Env,
    sim_args: &[String],
    heap_file: Option<&Path>,
) -> Result<Proc, BenchError> {
    let addr = procs::free_addr()?;
    let mut args: Vec<String> = ["--log", "warn", "sim", "--listen", &addr.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend_from_slice(sim_args);
    let tls_addr = match &env.pki {
        Some(pki) => {
            let a = procs::free_addr()?;
            args.extend([
                "--tls-listen".to_string(),
                a.to_string(),
                "--tls-cert-file".into(),
                pki.cert_file.display().to_string(),
                "--tls-key-file".into(),
                pki.key_file.display().to_string(),
            ]);
            Some(a)
        }
        None => None,
    };
    // Loading 150,000 pods takes about half a minute on two cores.
    let mut p = Proc::spawn_with(
        "simulator",
        &env.exe,
        &args,
        heap_file,
        addr,
        &env.log("simulator"),
        Duration::from_secs(300),
    )
    .await?;
    if let Some(a) = tls_addr {
        // Bound once the fleet is loaded: the plain address listens before (the loading's time
        // bound again).
        procs::wait_listening(
            "the simulator's HTTPS address",
            a,
            None,
            Duration::from_secs(300),
        )
        .await?;
        p.tls_addr = Some(a);
    }
    Ok(p)
}

/// POSTs to a simulator control endpoint.
pub async fn sim_control(sim: SocketAddr, path_and_query: &str) -> Result<(), BenchError> {
    let mut c = client::Conn::connect(sim)
        .await
        .map_err(|e| BenchError::io("connecting to the simulator", e))?;
    let status = c
        .send("POST", path_and_query, "application/json", b"")
        .await
        .map_err(|e| BenchError::io(format!("POST {path_and_query} to the simulator"), e))?;
    if status != 200 {
        return Err(BenchError::Setup(format!(
            "simulator answered {status} to POST {path_and_query}"
        )));
    }
    Ok(())
}

/// Takes the simulator down for `down` (it refuses connections and drops its watches:
/// `/sim/faults/refuse`), and returns when it answers again (waiting at most `down` more).
pub async fn upstream_outage(sim: SocketAddr, down: Duration) -> Result<Instant, BenchError> {
    sim_control(sim, &format!("/sim/faults/refuse?ms={}", down.as_millis())).await?;
    tokio::time::sleep(down).await;
    let back = Instant::now();
    while sim_stats(sim).await.is_err() && back.elapsed() < down {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(back)
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
    /// The certificates it serves TLS with at `addr`; plain HTTP when `None`.
    pub tls: Option<Arc<Pki>>,
    running: Running,
    sim_pid: u32,
    /// The simulator's heap file (the `direct` target's heap).
    sim_heap: Option<PathBuf>,
}

/// How to start a target.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Serve TLS with the run's certificate (clients choose HTTP/1.1 or HTTP/2 by ALPN where the
    /// target speaks both; the limit program speaks HTTP/1.1 only).
    pub tls: bool,
    /// Have the target write its live heap bytes to this file (the bench's own roles: watchmux,
    /// the limit program; for `direct`, the simulator is started with one instead).
    pub heap_file: Option<PathBuf>,
    /// Start watchmux (or the limit program) from this build instead of the bench's own binary
    /// (`None`).
    pub build: Option<Build>,
    /// watchmux's own bearer token for the upstream: its configuration then names a kubeconfig
    /// (written beside it) with the simulator's URL and this token, instead of a bare `url`
    /// (no credentials).
    pub upstream_token: Option<String>,
    /// More `[server]` keys for watchmux (TOML lines, e.g. `authz = "delegated"`).
    pub server_extra: String,
    /// Listen on this address instead of a free port (a replica started again where it was).
    pub listen: Option<SocketAddr>,
    /// The process's name in its log file's name, instead of the target's (`watchmux-r0`: one
    /// log per replica).
    pub name: Option<String>,
}

/// A build of watchmux to start: a `watchmux-bench` binary, whose `serve` role takes the
/// bench's configuration (another commit's binary, to compare two builds in one run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// Its name in reports and in its processes' log file names ("baseline", "current").
    pub name: &'static str,
    /// The binary.
    pub exe: PathBuf,
}

enum Running {
    Proc(Proc),
    Nginx(Nginx),
    Direct,
}

/// A resource named by group (`""` for the core group), version and plural resource.
pub type Gvr<'a> = (&'a str, &'a str, &'a str);

/// Core/v1 resources by plural name.
fn core_v1<'a>(resources: &[&'a str]) -> Vec<Gvr<'a>> {
    resources.iter().map(|r| ("", "v1", *r)).collect()
}

/// watchmux's settings for a bench: `resources` cached, limits lifted so the
/// bench's thousands of same-address clients are not mistaken for one abusive client;
/// `upstream` is the `[upstream]` keys (TOML lines: its `url`, or a `kubeconfig`);
/// `server_extra` is more `[server]` keys and `cache_extra` more `[cache]` keys (TOML lines;
/// without a `mode`, the listed mode of the bench's earlier rows); served over TLS with `tls`'s
/// certificate when given.
fn watchmux_config(
    upstream: &str,
    listen: SocketAddr,
    resources: &[Gvr],
    server_extra: &str,
    cache_extra: &str,
    tls: Option<&Pki>,
) -> String {
    let tls = tls
        .map(|p| {
            format!(
                "tls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
                p.cert_file.display(),
                p.key_file.display()
            )
        })
        .unwrap_or_default();
    let mode = if cache_extra.contains("mode =") {
        ""
    } else {
        "mode = \"listed\"\n"
    };
    let mut s = format!(
        "# Written by `watchmux-bench`.\n[server]\nlisten = \"{listen}\"\nmax_watches_per_client = 1000000\nmax_concurrent_lists = 100000\n{tls}{server_extra}\n[log]\nlevel = \"warn\"\n\n[upstream]\n{upstream}\n[cache]\n{mode}{cache_extra}"
    );
    for (g, v, r) in resources {
        s.push_str(&format!(
            "\n[[cache.resources]]\ngroup = \"{g}\"\nversion = \"{v}\"\nresource = \"{r}\"\n"
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

/// [`start_watchmux`] as `launch` says (TLS, a heap file).
pub async fn start_watchmux_launch(
    env: &Env,
    sim: &Proc,
    resources: &[&str],
    launch: &Launch,
) -> Result<Target, BenchError> {
    start_watchmux_full(env, sim, &core_v1(resources), "", None, launch).await
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
    start_watchmux_gvr(env, sim, &core_v1(resources), cache_extra, log).await
}

/// [`start_watchmux_with`] caching `resources` of any group and version.
pub async fn start_watchmux_gvr(
    env: &Env,
    sim: &Proc,
    resources: &[Gvr<'_>],
    cache_extra: &str,
    log: Option<&str>,
) -> Result<Target, BenchError> {
    start_watchmux_full(env, sim, resources, cache_extra, log, &Launch::default()).await
}

/// [`start_watchmux_gvr`] as `launch` says (TLS, a heap file, another build).
pub async fn start_watchmux_full(
    env: &Env,
    sim: &Proc,
    resources: &[Gvr<'_>],
    cache_extra: &str,
    log: Option<&str>,
    launch: &Launch,
) -> Result<Target, BenchError> {
    if let Some(addr) = launch.listen {
        return start_watchmux_at(env, sim, resources, cache_extra, log, launch, addr).await;
    }
    // A port found free can be taken by another process (a test beside) before watchmux binds
    // it: then watchmux exits, and another port is tried.
    let mut tries = PORT_TRIES;
    loop {
        let addr = procs::free_addr()?;
        match start_watchmux_at(env, sim, resources, cache_extra, log, launch, addr).await {
            Err(BenchError::ExitedEarly(why)) if tries > 1 => {
                tries -= 1;
                eprintln!("watchmux on {addr}: {why}; trying another port");
            }
            r => return r,
        }
    }
}

/// How many ports a server the bench starts is given before its start fails (each found free,
/// and possibly taken by another process before the server binds it).
const PORT_TRIES: usize = 3;

/// [`start_watchmux_full`] on `addr`.
async fn start_watchmux_at(
    env: &Env,
    sim: &Proc,
    resources: &[Gvr<'_>],
    cache_extra: &str,
    log: Option<&str>,
    launch: &Launch,
    addr: SocketAddr,
) -> Result<Target, BenchError> {
    let pki = launch.tls.then(|| env.pki()).transpose()?;
    let config = env.workdir.join(format!("watchmux-{}.toml", addr.port()));
    let server = format!("http://{}", sim.addr);
    let upstream = match &launch.upstream_token {
        None => format!("url = \"{server}\"\n"),
        Some(token) => {
            let kc = env
                .workdir
                .join(format!("watchmux-{}.kubeconfig", addr.port()));
            // JSON is YAML.
            let doc = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "sim", "cluster": {"server": server}}],
                "users": [{"name": "watchmux", "user": {"token": token}}],
                "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "watchmux"}}],
                "current-context": "sim",
            });
            std::fs::write(&kc, doc.to_string())
                .map_err(|e| BenchError::io(format!("writing {}", kc.display()), e))?;
            format!("kubeconfig = \"{}\"\n", kc.display())
        }
    };
    let server_extra = if launch.server_extra.is_empty() || launch.server_extra.ends_with('\n') {
        launch.server_extra.clone()
    } else {
        format!("{}\n", launch.server_extra)
    };
    std::fs::write(
        &config,
        watchmux_config(
            &upstream,
            addr,
            resources,
            &server_extra,
            cache_extra,
            pki.map(|p| &**p),
        ),
    )
    .map_err(|e| BenchError::io(format!("writing {}", config.display()), e))?;
    let mut args = ["serve", "--config", &config.display().to_string()]
        .map(String::from)
        .to_vec();
    if let Some(level) = log {
        args.extend(["--log".to_string(), level.to_string()]);
    }
    own_process(env, TargetKind::Watchmux, sim, addr, &args, launch).await
}

/// Runs the bench binary (or `launch`'s build) with `args` (its `serve` or `limit` role) as
/// target `kind` on `addr`.
async fn own_process(
    env: &Env,
    kind: TargetKind,
    sim: &Proc,
    addr: SocketAddr,
    args: &[String],
    launch: &Launch,
) -> Result<Target, BenchError> {
    let (exe, log) = match (&launch.build, &launch.name) {
        (_, Some(n)) => (
            launch.build.as_ref().map_or(&env.exe, |b| &b.exe),
            env.log(n),
        ),
        (Some(b), None) => (&b.exe, env.log(&format!("{}-{}", kind.name(), b.name))),
        (None, None) => (&env.exe, env.log(kind.name())),
    };
    let p = Proc::spawn_with(
        kind.name(),
        exe,
        args,
        launch.heap_file.as_deref(),
        addr,
        &log,
        Duration::from_secs(30),
    )
    .await?;
    Ok(Target {
        kind,
        addr,
        tls: launch.tls.then(|| env.pki().cloned()).transpose()?,
        running: Running::Proc(p),
        sim_pid: sim.pid(),
        sim_heap: sim.heap_file.clone(),
    })
}

/// Starts a target in front of `sim` and waits until it can serve (watchmux: synced).
pub async fn start(
    env: &Env,
    kind: TargetKind,
    sim: &Proc,
    resources: &[&str],
) -> Result<Target, BenchError> {
    start_with(env, kind, sim, resources, &Launch::default()).await
}

/// [`start`] as `launch` says: over TLS, writing its heap to a file.
pub async fn start_with(
    env: &Env,
    kind: TargetKind,
    sim: &Proc,
    resources: &[&str],
    launch: &Launch,
) -> Result<Target, BenchError> {
    let pki = launch.tls.then(|| env.pki().cloned()).transpose()?;
    let t = match kind {
        TargetKind::Watchmux => start_watchmux_launch(env, sim, resources, launch).await?,
        TargetKind::Direct => Target {
            kind,
            addr: match pki {
                Some(_) => sim.tls_addr.ok_or_else(|| {
                    BenchError::Setup("the simulator was started without an HTTPS address".into())
                })?,
                None => sim.addr,
            },
            tls: pki,
            running: Running::Direct,
            sim_pid: sim.pid(),
            sim_heap: sim.heap_file.clone(),
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
            let files = pki
                .as_ref()
                .map(|p| (p.cert_file.as_path(), p.key_file.as_path()));
            let n = Nginx::start_tls(bin, addr, sim.addr, &dir, files)
                .await
                .map_err(|e| BenchError::Setup(format!("nginx: {e}")))?;
            Target {
                kind,
                addr,
                tls: pki,
                running: Running::Nginx(n),
                sim_pid: sim.pid(),
                sim_heap: None,
            }
        }
        TargetKind::Limit => {
            let addr = procs::free_addr()?;
            let upstream = format!("http://{}", sim.addr);
            let mut args: Vec<String> = [
                "limit",
                "--listen",
                &addr.to_string(),
                "--upstream",
                &upstream,
            ]
            .map(String::from)
            .to_vec();
            if let Some(p) = &pki {
                args.extend([
                    "--tls-cert-file".to_string(),
                    p.cert_file.display().to_string(),
                    "--tls-key-file".into(),
                    p.key_file.display().to_string(),
                ]);
            }
            own_process(env, kind, sim, addr, &args, launch).await?
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

    /// Where clients of this target connect over `t` (HTTP/1.1 for plain and TLS, HTTP/2 for
    /// `H2`): the address and, when it serves TLS, a connector offering `t`'s ALPN. A plain
    /// endpoint for `Plain`, whatever the target serves.
    pub fn endpoint(&self, t: Transport) -> Endpoint {
        Endpoint {
            addr: self.addr,
            tls: self.tls.as_ref().and_then(|p| p.connector(t)),
        }
    }

    /// The endpoint of its own transport: HTTP/1.1, over TLS when it serves TLS.
    pub fn h1(&self) -> Endpoint {
        let t = if self.tls.is_some() {
            Transport::Tls
        } else {
            Transport::Plain
        };
        self.endpoint(t)
    }

    /// The file its live heap bytes are written to, when it was started with one (the
    /// simulator's for `direct`; nginx has none).
    pub fn heap_file(&self) -> Option<&Path> {
        match &self.running {
            Running::Proc(p) => p.heap_file.as_deref(),
            Running::Nginx(_) => None,
            Running::Direct => self.sim_heap.as_deref(),
        }
    }

    /// For watchmux, waits until `/readyz` answers 200 (every cached resource synced); returns
    /// how long that took. Other targets are ready once they listen.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<Duration, BenchError> {
        let t0 = Instant::now();
        if self.kind != TargetKind::Watchmux {
            return Ok(Duration::ZERO);
        }
        let ep = self.h1();
        loop {
            if let Ok(l) = client::list_at(&ep, "/readyz").await
                && l.status == 200
            {
                return Ok(t0.elapsed());
            }
            if let Running::Proc(p) = &self.running
                && !procs::alive(p.pid())
            {
                return Err(BenchError::Setup(format!(
                    "watchmux (pid {}) exited before it was ready",
                    p.pid()
                )));
            }
            if t0.elapsed() > timeout {
                return Err(BenchError::Setup(format!(
                    "watchmux not ready after {timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops watchmux or the limit program cleanly: SIGTERM, then killed if it has not exited
    /// after `grace` (nginx and `direct` as [`Target::stop`]). Returns whether it exited on its
    /// own.
    pub async fn terminate(self, grace: Duration) -> bool {
        match self.running {
            Running::Proc(p) => p.terminate(grace).await,
            Running::Nginx(n) => {
                n.stop().await;
                true
            }
            Running::Direct => true,
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
