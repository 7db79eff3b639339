//! S13's watchmux replicas: separate processes of the release binary (the bench's `serve`
//! role), each with its own configuration and port, all caching pods from the same simulator,
//! and the rolling restart of them one at a time (SIGTERM, wait for the exit, start again on
//! the same port, wait for its `/readyz` and for the balancer to send it connections again).
//!
//! Also each replica's counters across its restarts: a phase adds up, per replica, what grew
//! from the phase's start (or the replica's) until its stop (the last scrape before SIGTERM)
//! or the phase's end.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::BenchError;
use crate::haproxy::{self, Haproxy};
use crate::procs::{self, Proc};
use crate::scrape::{self, Growth, Metrics};
use crate::targets::{self, Env, Launch, Target};

/// The loopback address the balancer connects to the replicas from when it sends the PROXY
/// protocol: the replicas trust that header from it alone, while the bench's own connections
/// to them (readiness, metrics) come from 127.0.0.1 without one.
pub const BALANCER_SOURCE: &str = "127.0.0.2";

/// How the replicas run.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `server.shutdown_delay_secs`.
    pub shutdown_delay_secs: u64,
    /// `server.shutdown_watch_grace_secs`.
    pub drain_secs: u64,
    /// `server.goaway_chance` (0: off).
    pub goaway_chance: f64,
    /// `server.max_connection_age_secs` (0: off).
    pub max_connection_age_secs: u64,
    /// Trust the balancer's PROXY protocol header (`server.proxy_protocol_trusted`).
    pub proxy_protocol: bool,
    /// Give each replica a `cache.persist_dir` of its own.
    pub persist: bool,
}

impl Settings {
    /// The `[server]` keys.
    fn server_toml(&self) -> String {
        let mut s = format!(
            "shutdown_delay_secs = {}\nshutdown_watch_grace_secs = {}\n",
            self.shutdown_delay_secs, self.drain_secs
        );
        if self.goaway_chance > 0.0 {
            s.push_str(&format!("goaway_chance = {}\n", self.goaway_chance));
        }
        if self.max_connection_age_secs > 0 {
            s.push_str(&format!(
                "max_connection_age_secs = {}\n",
                self.max_connection_age_secs
            ));
        }
        if self.proxy_protocol {
            s.push_str(&format!(
                "proxy_protocol_trusted = [\"{BALANCER_SOURCE}/32\"]\n"
            ));
        }
        s
    }

    /// How long a stop may take: the delay, the drain, and the other requests' bound.
    fn stop_bound(&self) -> Duration {
        Duration::from_secs(self.shutdown_delay_secs + self.drain_secs.max(20) + 10)
    }
}

/// The counters a phase adds up over the replicas: name, labels kept, and which series.
const COUNTERS: [(&str, &[&str]); 2] = [
    ("watchmux_requests_total", &["verb", "resource", "code"]),
    ("watchmux_reads_total", &["verb", "source"]),
];

/// The replicas.
pub struct Replicas<'a> {
    env: &'a Env,
    sim: &'a Proc,
    /// Where each listens (the same across its restarts).
    pub addrs: Vec<SocketAddr>,
    running: Vec<Option<Target>>,
    /// Each one's scrape at the phase's start (`None`: started during the phase).
    base: Vec<Option<Metrics>>,
    /// What grew during the phase, per counter of [`COUNTERS`].
    grown: Vec<Growth>,
}

/// One replica's restart during a roll.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    /// From SIGTERM to its exit.
    pub exit: Duration,
    /// Whether it exited by itself (not killed after the bound).
    pub clean: bool,
    /// From its start to `/readyz` 200.
    pub ready: Duration,
}

impl<'a> Replicas<'a> {
    /// Starts `n` replicas of `settings` in front of `sim` and waits until each is ready.
    pub async fn start(
        env: &'a Env,
        sim: &'a Proc,
        n: usize,
        settings: &Settings,
    ) -> Result<Replicas<'a>, BenchError> {
        let addrs = (0..n)
            .map(|_| procs::free_addr())
            .collect::<Result<Vec<_>, _>>()?;
        let mut r = Replicas {
            env,
            sim,
            addrs,
            running: (0..n).map(|_| None).collect(),
            base: vec![None; n],
            grown: vec![Growth::new(); COUNTERS.len()],
        };
        for i in 0..n {
            r.launch(i, settings).await?;
        }
        Ok(r)
    }

    async fn launch(&mut self, i: usize, settings: &Settings) -> Result<Duration, BenchError> {
        let name = format!("watchmux-{}", haproxy::server_name(i));
        let cache = if settings.persist {
            let dir = self.env.workdir.join(format!("persist-{name}"));
            std::fs::create_dir_all(&dir)
                .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
            format!("persist_dir = \"{}\"\n", dir.display())
        } else {
            String::new()
        };
        let launch = Launch {
            listen: Some(self.addrs[i]),
            name: Some(name),
            server_extra: settings.server_toml(),
            ..Launch::default()
        };
        let t = targets::start_watchmux_full(
            self.env,
            self.sim,
            &[("", "v1", "pods")],
            &cache,
            None,
            &launch,
        )
        .await?;
        let ready = t.wait_ready(Duration::from_secs(120)).await;
        self.running[i] = Some(t);
        ready
    }

    /// The replicas' process ids (those running).
    pub fn pids(&self) -> Vec<u32> {
        self.running
            .iter()
            .flatten()
            .flat_map(Target::pids)
            .collect()
    }

    async fn scrape(&self, i: usize) -> Option<Metrics> {
        let t = self.running[i].as_ref()?;
        scrape::scrape_at(&t.h1()).await.ok()
    }

    /// Adds what replica `i`'s counters grew since the phase's start (or its own) to the phase.
    async fn bank(&mut self, i: usize) {
        let Some(now) = self.scrape(i).await else {
            return;
        };
        for (k, (name, keys)) in COUNTERS.iter().enumerate() {
            let g = scrape::growth(&now, self.base[i].as_ref(), name, keys, |_| true);
            scrape::add_growth(&mut self.grown[k], &g);
        }
        self.base[i] = Some(now);
    }

    /// A phase starts: the counters count from now.
    pub async fn begin_phase(&mut self) {
        for i in 0..self.running.len() {
            self.base[i] = self.scrape(i).await;
        }
        self.grown = vec![Growth::new(); COUNTERS.len()];
    }

    /// A phase ends: what each counter of [`COUNTERS`] grew over every replica during it, by
    /// its labels.
    pub async fn end_phase(&mut self) -> Vec<Growth> {
        for i in 0..self.running.len() {
            self.bank(i).await;
        }
        std::mem::take(&mut self.grown)
    }

    /// Restarts every replica one at a time with `settings`: SIGTERM, its exit, a start on the
    /// same port, its `/readyz`, and the balancer's checks seeing it up, before the next.
    pub async fn roll(
        &mut self,
        settings: &Settings,
        lb: &Haproxy,
    ) -> Result<Vec<Restart>, BenchError> {
        let mut out = Vec::new();
        for i in 0..self.running.len() {
            self.bank(i).await;
            let Some(t) = self.running[i].take() else {
                continue;
            };
            let t0 = Instant::now();
            let clean = t.terminate(settings.stop_bound()).await;
            let exit = t0.elapsed();
            self.base[i] = None;
            let ready = self.launch(i, settings).await?;
            let name = haproxy::server_name(i);
            let t1 = Instant::now();
            loop {
                let stats = lb.stats().await?;
                if stats.iter().any(|s| s.name == name && s.up()) {
                    break;
                }
                if t1.elapsed() > Duration::from_secs(30) {
                    return Err(BenchError::Run(format!(
                        "haproxy does not see replica {name} up 30 s after its /readyz: {stats:?}"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            eprintln!(
                "  S13: replica {name} stopped in {:.1} s{}, ready {:.1} s after its start",
                exit.as_secs_f64(),
                if clean { "" } else { " (killed)" },
                ready.as_secs_f64()
            );
            out.push(Restart { exit, clean, ready });
        }
        Ok(out)
    }

    /// Stops every replica.
    pub async fn stop(self) {
        for t in self.running.into_iter().flatten() {
            t.stop().await;
        }
    }
}

/// The sum of what grew whose key (labels joined by `/`) satisfies `keep`.
pub fn total(g: &Growth, keep: impl Fn(&[&str]) -> bool) -> f64 {
    g.iter()
        .filter(|(k, _)| keep(&k.split('/').collect::<Vec<_>>()))
        .map(|(_, v)| v)
        .sum()
}

/// Index of `name` in [`COUNTERS`].
pub fn counter(name: &str) -> usize {
    COUNTERS
        .iter()
        .position(|(n, _)| *n == name)
        .expect("a counter the replicas add up")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_server_keys_asked_for_and_no_others() {
        let plain = Settings {
            shutdown_delay_secs: 2,
            drain_secs: 5,
            ..Settings::default()
        };
        let t = plain.server_toml();
        assert_eq!(
            t,
            "shutdown_delay_secs = 2\nshutdown_watch_grace_secs = 5\n"
        );
        let all = Settings {
            goaway_chance: 0.02,
            max_connection_age_secs: 180,
            proxy_protocol: true,
            ..plain
        };
        let t = all.server_toml();
        assert!(t.contains("goaway_chance = 0.02\n"), "{t}");
        assert!(t.contains("max_connection_age_secs = 180\n"), "{t}");
        assert!(
            t.contains("proxy_protocol_trusted = [\"127.0.0.2/32\"]\n"),
            "{t}"
        );
        let mut g = Growth::new();
        g.insert("watch/pods/503".into(), 2.0);
        g.insert("get/pods/500".into(), 1.0);
        g.insert("list/pods/200".into(), 7.0);
        assert_eq!(total(&g, |k| k[2].starts_with('5')), 3.0);
        assert_eq!(counter("watchmux_reads_total"), 1);
    }
}
