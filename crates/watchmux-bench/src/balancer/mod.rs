//! S13: watchmux replicas behind a real load balancer. HAProxy ([`crate::haproxy`], Debian's
//! package: TCP mode, round robin, health checks on `/readyz`, optionally `send-proxy-v2`) in
//! front of N watchmux replicas ([`replicas`]: separate processes, each its own configuration
//! and port) in front of the simulator; client-go-like watchers over HTTP/2 through HAProxy
//! ([`watchers`]) under the simulator's churn. Phases: (1) a rolling restart of the replicas,
//! then a while to watch the connections spread; (2) an upstream restart (the simulator refuses
//! connections and drops its watches for a while); (3) a second rolling restart that starts the
//! replicas with `server.goaway_chance` on, then the same while; (4) a third that adds
//! `server.max_connection_age_secs`, then the same while.
//!
//! Per phase it reports relists (watch-lists after each watcher's first, 410s, LISTs the
//! replicas served), the events lost, duplicated or out of order against the simulator's log
//! ([`check`]), each watcher's longest write → receipt time (p99 and max over the watchers),
//! how the connections spread over the replicas ([`spread`], from HAProxy's stats every second),
//! the upstream's requests during the restart, and the answers other than 2xx; then which of the
//! issue's targets each phase met. It measures and reports: no figure fails the run.

pub mod check;
pub mod replicas;
pub mod spread;
pub mod watchers;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::Endpoint;
use super::haproxy::{self, Haproxy};
use super::nodefleet::counters::{Fleet, Tally};
use super::procs::{self, Proc};
use super::report::{Sample, ScenarioSpec, fmt_num};
use super::scenarios::{brief, m};
use super::scrape::{self, Growth};
use super::targets::{self, Env, TargetKind};
use super::{BenchError, Sizes};
use replicas::{Replicas, Settings};
use spread::Spread;
use watchers::{Plan, Watchers};

/// The table's id.
pub const ID: &str = "S13";

/// The spread the issue asks the connections to come within after a roll (max ÷ min).
pub const SPREAD_TARGET: f64 = 1.5;
/// How soon after a roll (the "within 5 min").
pub const SPREAD_WITHIN_SECS: f64 = 300.0;
/// The delivery gap p99 the issue asks for during a roll, seconds.
pub const GAP_TARGET_SECS: f64 = 2.0;

/// Whether `spec` is S13's table (one repeat).
pub fn reports(spec: &ScenarioSpec) -> bool {
    spec.id == ID
}

/// A phase of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The replicas restarted one at a time.
    Roll,
    /// The simulator down for a while.
    Upstream,
    /// The replicas restarted one at a time with `goaway_chance` on.
    GoawayRoll,
    /// The replicas restarted one at a time with `goaway_chance` and `max_connection_age_secs`.
    AgeRoll,
}

impl Phase {
    /// All, in run order.
    pub const ALL: [Phase; 4] = [
        Phase::Roll,
        Phase::Upstream,
        Phase::GoawayRoll,
        Phase::AgeRoll,
    ];

    /// Its case name.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Roll => "rolling restart",
            Phase::Upstream => "upstream restart",
            Phase::GoawayRoll => "rolling restart, goaway_chance on",
            Phase::AgeRoll => "rolling restart, max_connection_age on",
        }
    }

    fn rolls(self) -> bool {
        self != Phase::Upstream
    }
}

/// The simulator's flags: a flat fleet whose history outlasts the run.
fn sim_args(s: &Sizes) -> Vec<String> {
    [
        "--nodes",
        &s.balancer_namespaces.max(1).to_string(),
        "--pods",
        &s.balancer_pods.to_string(),
        "--namespaces",
        &s.balancer_namespaces.to_string(),
        "--history-window-secs",
        "7200",
        "--history-max-events",
        "2000000",
        "--seed",
        "1",
    ]
    .iter()
    .map(|x| x.to_string())
    .collect()
}

/// S13's table.
pub fn spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec::table(
        ID,
        "replicas behind a balancer",
        format!(
            "HAProxy ({}; TCP mode, `balance roundrobin`, each replica checked with `GET /readyz` every 250 ms, down after 2 failures, up after 2 successes, `option redispatch`{}) on 127.0.0.1 in front of {} watchmux replicas (separate processes of this build, each its own configuration and port, caching pods from the same simulator; `server.shutdown_delay_secs = {}`, `server.shutdown_watch_grace_secs = {}`{}) in front of the simulator (`kube-sim {}`), {} pod writes/s of its `realistic` churn throughout (creates, deletes, status updates, relabels, each stamped with its write time). {} client-go-like watchers, each of one namespace's pods (watcher i of namespace i mod {}), {} to a client whose one HTTP/2 connection (h2c) through HAProxy they share: a watch-list to start (protobuf), a re-watch from the last resourceVersion seen (bookmarks included) when a stream ends, a relist only after a 410, `timeoutSeconds` between {} s and twice that (client-go's minimum is 300 s; shortened so that the watches end, and are made again, within the run), and, as client-go's transport, a new connection at once after a GOAWAY. Phases: **rolling restart** = each replica in turn gets SIGTERM, the bench waits for its exit, starts it again on its port and waits for its `/readyz` and for HAProxy to see it up before the next; then {} s of watching the connections spread. **upstream restart** = the simulator refuses connections and drops its watches for {} s (`/sim/faults/refuse`), then until every replica's upstream watch is back, then {} s. **rolling restart, goaway_chance on** = the same roll, each replica started again with `server.goaway_chance = {}`, then {} s. **rolling restart, max_connection_age on** = the same roll, each replica started again with `server.goaway_chance = {}` and `server.max_connection_age_secs = {}` (each client connection ended gracefully at that age ± 10 %, its watches handed over after a bookmark), then {} s. The issue's \"within 5 min\" after a roll is this run's watching time. Figures per phase: relists = watch-lists the replicas answered after each watcher's first; 410s = watch answers and ERROR events 410; LISTs at replicas = `watchmux_reads_total{{verb=\"list\"}}` over the replicas; lost, duplicated, out of order = events of each watcher's namespace after its sync that it did not receive, received more than once, or received after a later one, against the simulator's own log (its history, read after the run), counted in the phase in which the event was written (lost) or received; delivery gap = for each watcher, the longest time from a write (the simulator's stamp) to its receipt among the events it received during the phase, p99 and max over the watchers; connections = each replica's open connections in HAProxy's stats (`scur`, sampled every second) at the phase's end: fewest, most, most ÷ fewest (– when one has none), and settled s = from the restart's end until most ÷ fewest stayed ≤ {SPREAD_TARGET} (– if it did not by the phase's end); watches most ÷ fewest and watches settled s = the same of each replica's open watches (`watchmux_watchers`, scraped every second): a connection that drew a GOAWAY stays open, and counted, until its watches end, while its client's new watches go to its new connection; upstream requests, LISTs, WATCHes = what the simulator served from the phase's start until the roll (or the upstream's recovery) ended; restart s = that time; non-2xx to clients = watch requests the watchers saw answered other than 200 or 410 (429s included); ERROR events other than 410; 5xx, 500s at replicas = the replicas' `watchmux_requests_total` by code, added up across their restarts from their scrapes (the last before each SIGTERM: a replica that stops accepting closes its HTTP/1.1 connections, so what it answers while it drains is counted by the clients only); clean stream ends = streams the replicas ended before their `timeoutSeconds` (during a roll: the drains); dials = the clients' new connections.",
            haproxy_version(),
            if s.balancer_proxy_protocol {
                ", `send-proxy-v2` and `check-send-proxy` from 127.0.0.2, which the replicas trust (`server.proxy_protocol_trusted`)"
            } else {
                ", no PROXY protocol"
            },
            s.balancer_replicas,
            s.balancer_shutdown_delay_secs,
            s.balancer_drain_secs,
            if s.balancer_persist {
                ", each its own `cache.persist_dir`"
            } else {
                ", no `persist_dir`"
            },
            sim_args(s).join(" "),
            s.balancer_rate,
            s.balancer_watchers,
            s.balancer_namespaces,
            s.balancer_per_connection,
            s.balancer_watch_timeout_secs,
            observe_secs(s, Phase::Roll),
            s.balancer_outage_secs,
            observe_secs(s, Phase::Upstream),
            s.balancer_goaway_chance,
            observe_secs(s, Phase::GoawayRoll),
            s.balancer_goaway_chance,
            s.balancer_max_connection_age_secs,
            observe_secs(s, Phase::AgeRoll),
        ),
        "phase",
        vec![
            m("secs", "phase s", false),
            m("restart_s", "restart s", false),
            m("relists", "relists", false),
            m("gone_410", "410s", false),
            m("replica_lists", "LISTs at replicas", false),
            m("lost", "lost", false),
            m("duplicated", "duplicated", false),
            m("out_of_order", "out of order", false),
            m("gap_p99_s", "delivery gap p99 s", false),
            m("gap_max_s", "delivery gap max s", false),
            m("conns_min", "connections fewest", true),
            m("conns_max", "connections most", false),
            m("conn_ratio", "most ÷ fewest", false),
            m("settled_s", "settled s", false),
            m("watch_ratio", "watches most ÷ fewest", false),
            m("watch_settled_s", "watches settled s", false),
            m("up_requests", "upstream requests", false),
            m("up_lists", "upstream LISTs", false),
            m("up_watches", "upstream WATCHes", false),
            m("client_non_2xx", "non-2xx to clients", false),
            m("error_events", "ERROR events", false),
            m("replica_5xx", "5xx at replicas", false),
            m("replica_500", "500s at replicas", false),
            m("stream_ends", "clean stream ends", true),
            m("dials", "dials", false),
        ],
    )
}

/// Seconds of watching after a phase's restart: all of `balancer_observe_secs` after the rolls
/// that turn `goaway_chance` and `max_connection_age_secs` on (the phases whose connections are
/// expected to move), a third after the first roll and a ninth after the upstream's recovery
/// (at least 1 s).
fn observe_secs(s: &Sizes, phase: Phase) -> f64 {
    let part = match phase {
        Phase::Roll => 3.0,
        Phase::Upstream => 9.0,
        Phase::GoawayRoll | Phase::AgeRoll => 1.0,
    };
    (s.balancer_observe_secs / part).max(1.0)
}

fn haproxy_version() -> String {
    Haproxy::find()
        .and_then(|bin| procs::version_line(&bin))
        .map(|l| l.split(" - ").next().unwrap_or(&l).trim().to_string())
        .unwrap_or_else(|| "not installed".into())
}

/// What a phase measured while it ran (the checker's figures come after the run).
struct PhaseRun {
    phase: Phase,
    secs: f64,
    restart_s: f64,
    tally: Tally,
    gaps: Vec<u64>,
    up: (u64, u64, u64),
    grown: Vec<Growth>,
    points: Vec<spread::Point>,
    /// The simulator's resourceVersion at the phase's start.
    from_rv: u64,
}

/// The running setup.
struct Rig<'a> {
    s: &'a Sizes,
    sim: &'a Proc,
    lb: Arc<Haproxy>,
    spread: Spread,
    watchers: Watchers,
}

/// Runs S13 (watchmux only; needs haproxy).
pub async fn run(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    if !kinds.contains(&TargetKind::Watchmux) {
        return Ok(());
    }
    let bin = Haproxy::find().ok_or_else(|| {
        BenchError::Setup(
            "S13 needs haproxy, which is not installed (crates/watchmux-bench/scripts/install-haproxy installs it)"
                .into(),
        )
    })?;
    let sim = targets::start_sim_args(env, &sim_args(s)).await?;
    let settings = settings(s, 0.0, 0);
    let result = async {
        let mut reps = Replicas::start(env, &sim, s.balancer_replicas, &settings).await?;
        let r = with_replicas(env, s, &bin, &sim, &mut reps, out).await;
        reps.stop().await;
        r
    }
    .await;
    sim.stop().await;
    result
}

fn settings(s: &Sizes, goaway_chance: f64, max_connection_age_secs: u64) -> Settings {
    Settings {
        shutdown_delay_secs: s.balancer_shutdown_delay_secs,
        drain_secs: s.balancer_drain_secs,
        goaway_chance,
        max_connection_age_secs,
        proxy_protocol: s.balancer_proxy_protocol,
        persist: s.balancer_persist,
    }
}

async fn with_replicas(
    env: &Env,
    s: &Sizes,
    bin: &std::path::Path,
    sim: &Proc,
    reps: &mut Replicas<'_>,
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let opts = haproxy::Options {
        send_proxy_v2: s.balancer_proxy_protocol,
        source: s
            .balancer_proxy_protocol
            .then(|| replicas::BALANCER_SOURCE.parse().expect("an address")),
        check_interval: Duration::from_millis(250),
    };
    let lb = Haproxy::start(
        bin,
        procs::free_addr()?,
        &reps.addrs,
        &env.workdir.join("haproxy"),
        &opts,
    )
    .await?;
    lb.wait_all_up(Duration::from_secs(30)).await?;
    let lb = Arc::new(lb);
    let spec = kube_sim::fleet::FleetSpec {
        nodes: 1,
        pods: 0,
        namespaces: s.balancer_namespaces,
        seed: 1,
    };
    let plan = Plan {
        watchers: s.balancer_watchers,
        per_connection: s.balancer_per_connection,
        namespaces: kube_sim::fleet::namespace_names(&spec),
        min_timeout: Duration::from_secs_f64(s.balancer_watch_timeout_secs.max(1.0)),
    };
    let t0 = Instant::now();
    let w = Watchers::start(&Endpoint::plain(lb.addr), &plan);
    if w.fleet
        .until(Duration::from_secs(300), Fleet::synced)
        .await
        .is_none()
    {
        let why = w.fleet.first_error.lock().clone();
        w.stop().await;
        return Err(BenchError::Run(format!(
            "S13: the watchers did not all sync in 300 s (first error: {why:?})"
        )));
    }
    eprintln!(
        "  S13: {} watchers synced through haproxy in {:.1} s",
        s.balancer_watchers,
        t0.elapsed().as_secs_f64()
    );
    // Each phase reports its own first client error.
    if let Some(e) = w.fleet.first_error.lock().take() {
        eprintln!("  S13: first client error while syncing: {e}");
    }
    let rig = Rig {
        s,
        sim,
        lb: lb.clone(),
        spread: Spread::start(lb.clone(), reps.addrs.clone()),
        watchers: w,
    };
    let result = rig.phases(reps, out).await;
    let Rig {
        spread,
        watchers,
        lb: held,
        ..
    } = rig;
    spread.stop();
    watchers.stop().await;
    drop(spread);
    drop(held);
    // The sampler's task lets go of its handle once cancelled.
    tokio::time::sleep(Duration::from_millis(100)).await;
    match Arc::try_unwrap(lb) {
        Ok(h) => h.stop().await,
        Err(h) => drop(h),
    }
    result
}

impl Rig<'_> {
    async fn phases(
        &self,
        reps: &mut Replicas<'_>,
        out: &mut Vec<Sample>,
    ) -> Result<(), BenchError> {
        let s = self.s;
        targets::set_churn(self.sim.addr, s.balancer_rate, "realistic").await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut runs = Vec::new();
        for phase in Phase::ALL {
            eprintln!("  S13: {} …", phase.label());
            runs.push(self.phase(phase, reps).await?);
            let r = runs.last().expect("just pushed");
            eprintln!(
                "  S13: {} done in {:.1} s: {}",
                phase.label(),
                r.secs,
                summary(&r.tally)
            );
            // The phase's first client error, if any (each phase starts without one).
            if let Some(e) = self.watchers.fleet.first_error.lock().take() {
                eprintln!("  S13: {}: first client error: {e}", phase.label());
            }
        }
        targets::set_churn(self.sim.addr, 0.0, "realistic").await?;
        let verdicts = self.check(&runs, &reps.addrs).await?;
        for (r, v) in runs.iter().zip(verdicts) {
            let sample = sample(r, &v);
            eprintln!("  {ID} {}: {}", r.phase.label(), brief(&sample));
            out.push(sample);
        }
        let mine: Vec<&Sample> = out.iter().filter(|x| x.scenario == ID).collect();
        eprint!("{}", targets_markdown(&mine));
        Ok(())
    }

    async fn phase(&self, phase: Phase, reps: &mut Replicas<'_>) -> Result<PhaseRun, BenchError> {
        let s = self.s;
        let at = Instant::now();
        let tally = self.watchers.fleet.counts.tally();
        self.watchers.take_gaps();
        reps.begin_phase().await;
        let from_rv = sim_rv(self.sim).await?;
        let sim0 = targets::sim_stats(self.sim.addr).await?;
        match phase {
            Phase::Roll => {
                reps.roll(&settings(s, 0.0, 0), &self.lb).await?;
            }
            Phase::GoawayRoll => {
                reps.roll(&settings(s, s.balancer_goaway_chance, 0), &self.lb)
                    .await?;
            }
            Phase::AgeRoll => {
                let with_age = settings(
                    s,
                    s.balancer_goaway_chance,
                    s.balancer_max_connection_age_secs,
                );
                reps.roll(&with_age, &self.lb).await?;
            }
            Phase::Upstream => {
                let down = Duration::from_secs_f64(s.balancer_outage_secs);
                targets::upstream_outage(self.sim.addr, down).await?;
                if !self
                    .upstream_watches_up(reps, Duration::from_secs(120))
                    .await
                {
                    eprintln!("  S13: the replicas' upstream watches not all back after 120 s");
                }
            }
        }
        let restart_end = Instant::now();
        let restart_s = at.elapsed().as_secs_f64();
        let sim1 = targets::sim_stats(self.sim.addr).await?;
        // Watching, with a line on how the clients spread every 30 s.
        let watch_end = restart_end + Duration::from_secs_f64(observe_secs(s, phase));
        loop {
            let left = watch_end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            tokio::time::sleep(left.min(Duration::from_secs(30))).await;
            if let Some(p) = self.spread.since(restart_end).last() {
                eprintln!(
                    "  S13: {:.0} s after the restart: connections {:?}, watches {:?}",
                    p.at.as_secs_f64(),
                    p.conns,
                    p.watches
                );
            }
        }
        let grown = reps.end_phase().await;
        let d = |k: &str| {
            sim1[k]
                .as_u64()
                .unwrap_or(0)
                .saturating_sub(sim0[k].as_u64().unwrap_or(0))
        };
        let pods = |v: &Value, k: &str| v["resources"]["pods"][k].as_u64().unwrap_or(0);
        Ok(PhaseRun {
            phase,
            secs: at.elapsed().as_secs_f64(),
            restart_s,
            tally: self.watchers.fleet.counts.tally().since(&tally),
            gaps: self.watchers.take_gaps(),
            up: (
                d("requests"),
                pods(&sim1, "listRequests").saturating_sub(pods(&sim0, "listRequests")),
                pods(&sim1, "watchRequests").saturating_sub(pods(&sim0, "watchRequests")),
            ),
            grown,
            points: self.spread.since(restart_end),
            from_rv,
        })
    }

    /// Waits until every replica's upstream watches are up (`watchmux_upstream_watch_up`).
    async fn upstream_watches_up(&self, reps: &Replicas<'_>, max: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < max {
            let mut all = true;
            for a in &reps.addrs {
                let up = scrape::scrape(*a).await.ok().is_some_and(|m| {
                    let s = m.series("watchmux_upstream_watch_up");
                    !s.is_empty() && s.iter().all(|(_, v)| *v == 1.0)
                });
                all &= up;
            }
            if all {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// After the churn stopped: the simulator's log, the watchers caught up with it (bounded),
    /// and each phase's lost, duplicated and reordered events.
    async fn check(
        &self,
        runs: &[PhaseRun],
        replicas: &[std::net::SocketAddr],
    ) -> Result<Vec<[u64; 4]>, BenchError> {
        let w = &self.watchers;
        let from = w
            .records
            .iter()
            .filter_map(|(_, r)| r.lock().segments.first().map(|s| s.from))
            .min()
            .unwrap_or(0);
        let history = check::history(self.sim.addr, from, 2).await?;
        let names = w_namespaces(self.s);
        // The watchers (index, resourceVersion) not caught up with the log yet.
        let behind = || {
            w.records.iter().enumerate().filter_map(|(i, (ns, r))| {
                let last = r.lock().last_rv;
                (last < history.last_of(&names[*ns])).then_some((i, last))
            })
        };
        let t0 = Instant::now();
        while behind().next().is_some() && t0.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if behind().next().is_some() {
            // What the ones behind are doing: a request without an answer, a stream that
            // sends nothing, or a wait.
            let lagging: Vec<String> = behind()
                .map(|(i, last)| {
                    let (ns, st, c) = (w.records[i].0, &w.states[i], &w.conns[i]);
                    let (step, for_) = st.step();
                    let (newest, up) = c.generation();
                    format!(
                        "watcher {i} of {} at {last}: {step:?} for {:.1} s, its last request on its client's connection #{} (newest #{newest}, {})",
                        names[ns],
                        for_.as_secs_f64(),
                        st.sent_on(),
                        if up { "up" } else { "down" }
                    )
                })
                .collect();
            eprintln!(
                "  S13: {} watchers not caught up with the simulator within 30 s, e.g. {:?}",
                lagging.len(),
                &lagging[..lagging.len().min(5)]
            );
            // And what the replicas have open: requests without an answer, connections
            // ended gracefully whose streams have not all ended.
            for a in replicas {
                if let Ok(m) = scrape::scrape(*a).await {
                    let g = |n: &str| m.series(n).iter().map(|(_, v)| *v).sum::<f64>();
                    eprintln!(
                        "  S13: replica {a}: {} requests in flight, {} connections closing",
                        g("watchmux_requests_in_flight"),
                        g("watchmux_connections_closing")
                    );
                }
            }
        }
        // [lost, duplicated, out of order, unknown] per phase, by the resourceVersion's phase.
        let mut per = vec![[0u64; 4]; runs.len()];
        let phase_of = |rv: u64| runs.iter().rposition(|r| rv > r.from_rv).unwrap_or(0);
        let mut first_problem: Option<String> = None;
        for (i, (ns, r)) in w.records.iter().enumerate() {
            let empty = Vec::new();
            let log = history.by_namespace.get(&names[*ns]).unwrap_or(&empty);
            let v = check::check(&r.lock(), log);
            for (k, rvs) in [&v.lost, &v.duplicated, &v.out_of_order, &v.unknown]
                .into_iter()
                .enumerate()
            {
                for &rv in rvs {
                    per[phase_of(rv)][k] += 1;
                }
            }
            if first_problem.is_none() && v != check::Verdict::default() {
                first_problem = Some(format!("watcher {i} of {}: {v:?}", names[*ns]));
            }
        }
        if let Some(p) = first_problem {
            eprintln!("  S13: first watcher whose events differ from the simulator's: {p}");
        }
        eprintln!(
            "  S13: checked {} watchers against {} events of the simulator's log",
            w.records.len(),
            history.by_namespace.values().map(Vec::len).sum::<usize>()
        );
        Ok(per)
    }
}

fn w_namespaces(s: &Sizes) -> Vec<String> {
    kube_sim::fleet::namespace_names(&kube_sim::fleet::FleetSpec {
        nodes: 1,
        pods: 0,
        namespaces: s.balancer_namespaces,
        seed: 1,
    })
}

/// The simulator's current resourceVersion.
async fn sim_rv(sim: &Proc) -> Result<u64, BenchError> {
    let rv = targets::current_rv(sim.addr, "pods").await?;
    rv.parse()
        .map_err(|_| BenchError::Run(format!("the simulator's resourceVersion {rv:?}")))
}

fn summary(t: &Tally) -> String {
    format!(
        "{} re-watches, {} relists, {} 410s, {} 429s, {} other statuses, {} clean ends, {} broken, {} dials ({} failed), {} requests not sent, {} lost by the client's dispatch and sent again",
        t.watch_requests,
        t.relists,
        t.gone_410,
        t.watch_429,
        t.watch_other_status,
        t.ended_early,
        t.broken,
        t.dials,
        t.dial_failures,
        t.send_failures,
        t.orphaned
    )
}

/// The p-quantile of `v` (sorted in place); NaN when empty.
fn quantile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn sample(r: &PhaseRun, checked: &[u64; 4]) -> Sample {
    let mut gaps: Vec<f64> = r
        .gaps
        .iter()
        .filter(|g| **g > 0)
        .map(|g| *g as f64 / 1e6)
        .collect();

    let t = &r.tally;
    let requests = &r.grown[replicas::counter("watchmux_requests_total")];
    let reads = &r.grown[replicas::counter("watchmux_reads_total")];
    let opt = |x: Option<f64>| x.unwrap_or(f64::NAN);
    let last = r.points.last().cloned().unwrap_or_default();
    let settled = |of: fn(&spread::Point) -> &[u64]| {
        opt(spread::settled_after(&r.points, of, SPREAD_TARGET).map(|d| d.as_secs_f64()))
    };
    Sample {
        scenario: ID,
        case: r.phase.label().to_string(),
        target: TargetKind::Watchmux,
        repeat: 0,
        values: vec![
            ("secs", r.secs),
            ("restart_s", r.restart_s),
            ("relists", t.relists as f64),
            ("gone_410", t.gone_410 as f64),
            (
                "replica_lists",
                replicas::total(reads, |k| k.first() == Some(&"list")),
            ),
            ("lost", checked[0] as f64),
            ("duplicated", checked[1] as f64),
            ("out_of_order", checked[2] as f64),
            ("gap_p99_s", quantile(&mut gaps, 0.99)),
            ("gap_max_s", quantile(&mut gaps, 1.0)),
            ("conns_min", opt(last.conns.iter().min().map(|x| *x as f64))),
            ("conns_max", opt(last.conns.iter().max().map(|x| *x as f64))),
            ("conn_ratio", spread::ratio(&last.conns)),
            ("settled_s", settled(spread::conns)),
            ("watch_ratio", spread::ratio(&last.watches)),
            ("watch_settled_s", settled(spread::watches)),
            ("up_requests", r.up.0 as f64),
            ("up_lists", r.up.1 as f64),
            ("up_watches", r.up.2 as f64),
            (
                "client_non_2xx",
                (t.watch_429 + t.watch_other_status) as f64,
            ),
            ("error_events", (t.error_events + t.error_504) as f64),
            (
                "replica_5xx",
                replicas::total(requests, |k| code(k).starts_with('5')),
            ),
            (
                "replica_500",
                replicas::total(requests, |k| code(k) == "500"),
            ),
            ("stream_ends", t.ended_early as f64),
            ("dials", t.dials as f64),
        ],
    }
}

/// A connections ratio: `∞` when a replica has none (the table shows `–`).
fn show_ratio(r: f64) -> String {
    if r.is_infinite() {
        "∞ (a replica has none)".into()
    } else {
        fmt_num(r)
    }
}

/// The status code of a `watchmux_requests_total` growth key (`verb/resource/code`).
fn code<'a>(k: &[&'a str]) -> &'a str {
    k.get(2).copied().unwrap_or("")
}

/// A phase's figure by its key (NaN when it has none).
type Figures<'a> = dyn Fn(&str) -> f64 + 'a;

/// One of the targets, as a phase's figures meet it.
struct Goal {
    what: &'static str,
    /// The phases it applies to.
    applies: fn(Phase) -> bool,
    /// Whether a phase's figures meet it, and the figure shown.
    judge: fn(&Figures) -> (bool, String),
}

const GOALS: [Goal; 5] = [
    Goal {
        what: "0 relists (watch-lists after the first, 410s, LISTs at the replicas)",
        applies: |_| true,
        judge: |v| {
            let (a, b, c) = (v("relists"), v("gone_410"), v("replica_lists"));
            (
                a + b + c == 0.0,
                format!("{} / {} / {}", fmt_num(a), fmt_num(b), fmt_num(c)),
            )
        },
    },
    Goal {
        what: "0 events lost or duplicated (and none out of order)",
        applies: |_| true,
        judge: |v| {
            let (a, b, c) = (v("lost"), v("duplicated"), v("out_of_order"));
            (
                a + b + c == 0.0,
                format!("{} / {} / {}", fmt_num(a), fmt_num(b), fmt_num(c)),
            )
        },
    },
    Goal {
        what: "delivery gap p99 ≤ 2 s during the roll",
        applies: Phase::rolls,
        judge: |v| {
            let g = v("gap_p99_s");
            (g <= GAP_TARGET_SECS, format!("{} s", fmt_num(g)))
        },
    },
    Goal {
        what: "connections most ÷ fewest ≤ 1.5 within 5 min after the roll (this run's watching time)",
        applies: Phase::rolls,
        judge: |v| {
            let s = v("settled_s");
            (
                s <= SPREAD_WITHIN_SECS,
                format!(
                    "{} at the end; settled after {} s; watches: {}, settled after {} s",
                    show_ratio(v("conn_ratio")),
                    fmt_num(s),
                    show_ratio(v("watch_ratio")),
                    fmt_num(v("watch_settled_s"))
                ),
            )
        },
    },
    Goal {
        what: "no 500 to any client through an upstream restart",
        applies: |p| p == Phase::Upstream,
        judge: |v| {
            let (a, b) = (v("replica_500"), v("client_non_2xx"));
            (
                a + b == 0.0,
                format!(
                    "{} 500s at replicas, {} non-2xx seen by clients",
                    fmt_num(a),
                    fmt_num(b)
                ),
            )
        },
    },
];

/// The targets against each phase's figures: a table of met / not met.
pub fn targets_markdown(samples: &[&Sample]) -> String {
    let mut md = String::from("\nTargets (the issue's), per phase:\n\n| target |");
    for p in Phase::ALL {
        let _ = write!(md, " {} |", p.label());
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(Phase::ALL.len()));
    md.push('\n');
    for t in &GOALS {
        let _ = write!(md, "| {} |", t.what);
        for p in Phase::ALL {
            let row = samples.iter().find(|x| x.case == p.label());
            let cell = match row {
                _ if !(t.applies)(p) => "–".to_string(),
                None => "not run".to_string(),
                Some(x) => {
                    let v = |k: &str| {
                        x.values
                            .iter()
                            .find(|(n, _)| *n == k)
                            .map_or(f64::NAN, |(_, v)| *v)
                    };
                    let (met, shown) = (t.judge)(&v);
                    format!("{} ({shown})", if met { "**met**" } else { "not met" })
                }
            };
            let _ = write!(md, " {cell} |");
        }
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_each_target_on_its_phases() {
        let row = |case: &str, values: Vec<(&'static str, f64)>| Sample {
            scenario: ID,
            case: case.into(),
            target: TargetKind::Watchmux,
            repeat: 0,
            values,
        };
        let zero = |extra: Vec<(&'static str, f64)>| {
            let mut v: Vec<(&'static str, f64)> = [
                "relists",
                "gone_410",
                "replica_lists",
                "lost",
                "duplicated",
                "out_of_order",
                "replica_500",
                "client_non_2xx",
            ]
            .into_iter()
            .filter(|k| extra.iter().all(|(e, _)| e != k))
            .map(|k| (k, 0.0))
            .collect();
            v.extend(extra);
            v
        };
        let a = row(
            Phase::Roll.label(),
            zero(vec![
                ("gap_p99_s", 0.5),
                ("settled_s", f64::NAN),
                ("conn_ratio", f64::INFINITY),
            ]),
        );
        let b = row(Phase::Upstream.label(), zero(vec![("replica_500", 2.0)]));
        let md = targets_markdown(&[&a, &b]);
        assert!(
            md.contains(
                "| delivery gap p99 ≤ 2 s during the roll | **met** (0.500 s) | – | not run | not run |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| not met (∞ (a replica has none) at the end; settled after – s; watches: –, settled after – s) | – |"),
            "{md}"
        );
        assert!(md.contains("| – | not met (2.00 500s at replicas"), "{md}");
        let mut v = vec![3.0, 1.0, 2.0, 10.0];
        assert_eq!(quantile(&mut v, 0.99), 10.0);
        assert_eq!(quantile(&mut v, 0.5), 2.0);
    }
}
