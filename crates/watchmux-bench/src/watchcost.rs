//! S9 (watchcost): what one idle watch costs each target, broken down: the target's RSS, its
//! live heap (the counting allocator of [`super::heap`], in the roles this binary runs), and
//! the kernel's socket memory, over plain HTTP/1.1, HTTP/1.1 over TLS and HTTP/2 over TLS
//! (several watch streams per connection, as a kubelet carries its watches), at sizes up to
//! what the open-file limit allows. A case the limit does not allow is recorded as not run,
//! with the reason, rather than failing the run.
//!
//! It starts fresh target processes for every case (memory freed by an earlier case would
//! stay in the allocator and hide the next one's growth) and measures; it does not decide how
//! targets serve or how clients speak (that is [`super::targets`]' and [`super::client`]'s).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::client::Encoding;
use super::heap;
use super::procs::{self, Proc};
use super::report::{NotRun, Sample, ScenarioSpec, Versus, fmt_num};
use super::scenarios::{MB, Watchers, brief, m};
use super::targets::{self, Env, Launch, Target, TargetKind};
use super::tls::{self, Transport};
use super::{BenchError, Sizes};

/// The transports of every size, in row order.
const TRANSPORTS: [Transport; 3] = [Transport::Plain, Transport::Tls, Transport::H2];

/// Every watch of the scenario: pods of a namespace without pods (`default`), as a client-go
/// informer with the watch-list feature asks (`sendInitialEvents`): the one frame it gets is the
/// end-of-initial-events bookmark, then nothing. That frame matters to nginx: over HTTP/2 with
/// TLS, nginx 1.22 holds a proxied response's HEADERS until the first bytes of its body, so a
/// watch from "now" that receives nothing would never be seen to start through it.
const WATCH: &str = "/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

/// Descriptors a server holds besides its watch connections (listeners, epoll, upstream
/// connections, logs), kept free when deciding whether a case fits.
const FD_MARGIN: u64 = 200;

/// The per-process open-file limit the children inherit (the bench raised its soft limit as far
/// as the machine allows at the start of the run), and the hard limit.
fn nofile() -> (u64, u64) {
    rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap_or((1024, 1024))
}

/// S9's scenario id.
pub const ID: &str = "S9";

/// S9 watchcost.
pub fn spec(s: &Sizes) -> ScenarioSpec {
    let (soft, hard) = nofile();
    let sizes: Vec<String> = s
        .watchcost_watches
        .iter()
        .map(|n| fmt_num(*n as f64))
        .collect();
    ScenarioSpec {
        id: ID,
        name: "watchcost",
        about: format!(
            "Idle watches ({} watches; no writes): `{WATCH}`, pods of a namespace without pods, as a client-go informer with the watch-list feature asks, so each watch receives one frame (the end-of-initial-events bookmark; the limit program ignores `sendInitialEvents` and sends none) and then nothing; each target a fresh process per case (the bookmark also gets nginx's HTTP/2 responses out: over TLS, nginx 1.22 holds a proxied response's HEADERS until the first body bytes). Transports: `N` = HTTP/1.1 over plain TCP (a connection per watch), `N · TLS` = HTTP/1.1 over TLS (ALPN `http/1.1`), `N · h2` = HTTP/2 over TLS (ALPN `h2`, {} watch streams per connection, as one kubelet carries its watches; hyper's client, bodies held open and polled). Per watch, after the watches are established and the target's RSS has stopped growing: RSS = (the target's RSS after − before) ÷ watches established; heap = the same for the live heap bytes the target's process counts with the bench binary's counting allocator (watchmux, the limit program and, for `direct`, the simulator run as roles of that binary; nginx's heap is not known: –; the heap counts the bytes asked of the allocator, buffer capacity never written included, which takes no memory until touched, so it can exceed the RSS); socket buffers = `/proc/net/sockstat`'s `TCP … mem` (pages × page size) and kernel slab = `/proc/meminfo`'s `Slab` (where the socket structures live), after − before ÷ watches (an idle socket has no data queued, so its buffers are ≈ 0): both are machine-wide, so they count both ends of each connection (the bench's client side too) and anything else the machine did meanwhile. Open-file limit: {} per process (soft limit raised to the hard limit, {}; the hard limit cannot be raised without CAP_SYS_RESOURCE), so a case needing more descriptors in one process (an HTTP/1.1 connection per watch; nginx also holds an upstream connection per watch, spread over its workers, and the simulator behind it one per watch) is not run. The limit program speaks HTTP/1.1 only: its h2 rows are –.",
            sizes.join(" and "),
            s.watchcost_streams,
            fmt_num(soft as f64),
            fmt_num(hard as f64),
        ),
        case_label: "watches",
        metrics: vec![
            m("established", "watches established", true),
            m("rss_kb_per_watch", "RSS KB/watch", false),
            m("heap_kb_per_watch", "heap KB/watch", false),
            m(
                "sock_kb_per_watch",
                "socket buffers KB/watch (machine)",
                false,
            ),
            m("slab_kb_per_watch", "kernel slab KB/watch (machine)", false),
            m("rss_mb", "RSS MB", false),
        ],
        ratio_metrics: vec!["rss_kb_per_watch", "heap_kb_per_watch"],
        scaling_metric: None,
        variants: None,
        versus: Some(Versus {
            base: "plain HTTP/1.1",
            variants: vec![Transport::Tls.label(), Transport::H2.label()],
            metrics: vec!["rss_kb_per_watch", "heap_kb_per_watch"],
        }),
    }
}

/// Why `kind` cannot hold `n` watches over `t` (`per_connection` streams per HTTP/2
/// connection) with `limit` descriptors per process and `workers` nginx workers; `None` when it
/// can.
fn unfit(
    kind: TargetKind,
    t: Transport,
    n: usize,
    per_connection: usize,
    limit: u64,
    workers: u64,
) -> Option<String> {
    if kind == TargetKind::Limit && t == Transport::H2 {
        return Some("the limit program speaks HTTP/1.1 only".into());
    }
    let conns = if t == Transport::H2 {
        n.div_ceil(per_connection.max(1))
    } else {
        n
    } as u64;
    let room = limit.saturating_sub(FD_MARGIN);
    let lim = fmt_num(limit as f64);
    if kind == TargetKind::Nginx {
        let n = n as u64;
        if n > room {
            return Some(format!(
                "nginx opens an upstream connection per watch: the simulator behind it needs {} fds, the limit is {lim}",
                fmt_num(n as f64)
            ));
        }
        if conns + n > room * workers.max(1) {
            return Some(format!(
                "nginx needs {} fds (client connections and an upstream connection per watch) over its {workers} workers, the limit is {lim} each",
                fmt_num((conns + n) as f64)
            ));
        }
        return None;
    }
    // The server holds a socket per connection; so does the bench's client side, in one
    // process, which the same limit therefore never stops first.
    (conns > room).then(|| {
        format!(
            "needs {} fds (a socket per {} connection) in one process, the limit is {lim}",
            fmt_num(conns as f64),
            if t == Transport::H2 {
                "HTTP/2"
            } else {
                "HTTP/1.1"
            }
        )
    })
}

/// S9: the memory an idle watch costs, per target and transport.
pub async fn run(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
    not_run: &mut Vec<NotRun>,
) -> Result<(), BenchError> {
    let (limit, _) = nofile();
    let workers = std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1);
    // The upstream of watchmux, nginx and the limit program; `direct` gets a fresh simulator
    // per case, since it is the target measured.
    let shared = targets::start_sim(env, 50, s.broadcast_pods).await?;
    for &n in &s.watchcost_watches {
        for t in TRANSPORTS {
            let case = tls::case(&n.to_string(), t);
            for r in 0..s.watchcost_repeats.unwrap_or(s.repeats) {
                for &kind in kinds {
                    if kind == TargetKind::Nginx && env.nginx.is_none() {
                        continue;
                    }
                    if let Some(reason) = unfit(kind, t, n, s.watchcost_streams, limit, workers) {
                        if r == 0 {
                            eprintln!("  S9 {case} {kind}: not run: {reason}");
                            not_run.push(NotRun {
                                scenario: "S9",
                                case: case.clone(),
                                target: kind,
                                reason,
                            });
                        }
                        continue;
                    }
                    let mut sample = one_case(env, s, kind, t, n, &shared).await?;
                    sample.case = case.clone();
                    sample.repeat = r;
                    eprintln!("  S9 {case} {kind} #{r}: {}", brief(&sample));
                    out.push(sample);
                }
            }
        }
    }
    shared.stop().await;
    Ok(())
}

/// The target's memory at one moment: RSS, live heap (when it reports one), and the machine's
/// TCP buffer and slab memory.
#[derive(Debug, Clone, Copy)]
struct Memory {
    rss: u64,
    heap: Option<i64>,
    sock: u64,
    slab: u64,
}

impl Memory {
    fn now(t: &Target) -> Memory {
        let (sock, slab) = procs::kernel_socket_memory();
        Memory {
            rss: procs::usage(&t.pids()).rss_bytes,
            heap: t.heap_file().and_then(heap::read_file),
            sock,
            slab,
        }
    }
}

/// Waits until `t` has written its heap file (it does every 100 ms once running), at most 5 s.
async fn heap_reported(t: &Target) {
    let Some(f) = t.heap_file() else { return };
    let t0 = Instant::now();
    while heap::read_file(f).is_none() && t0.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls the RSS of `pids` until it has stopped growing (four polls in a row within 0.2 % or
/// 128 KB of the one before), at most about six windows; returns the seconds it took.
async fn settle(pids: &[u32], s: &Sizes) -> f64 {
    let step = Duration::from_secs_f64((s.window_secs / 10.0).clamp(0.05, 0.25));
    let max = Duration::from_secs_f64((s.window_secs * 6.0).clamp(0.5, 30.0));
    let t0 = Instant::now();
    let mut last = procs::usage(pids).rss_bytes;
    let mut calm = 0;
    while t0.elapsed() < max && calm < 4 {
        tokio::time::sleep(step).await;
        let now = procs::usage(pids).rss_bytes;
        if now.saturating_sub(last) <= (last / 500).max(128 * 1024) {
            calm += 1;
        } else {
            calm = 0;
        }
        last = now;
    }
    t0.elapsed().as_secs_f64()
}

/// One case: a fresh target (and, for `direct`, a fresh simulator) with `n` idle watches over
/// `t`. The sample's case and repeat are the caller's to set.
async fn one_case(
    env: &Env,
    s: &Sizes,
    kind: TargetKind,
    t: Transport,
    n: usize,
    shared: &Proc,
) -> Result<Sample, BenchError> {
    let heap_file = env.workdir.join(format!("heap-{kind}-{}.txt", t.name()));
    let _ = std::fs::remove_file(&heap_file);
    let own_sim = match kind {
        TargetKind::Direct => {
            Some(targets::start_sim_with_heap(env, 50, s.broadcast_pods, &heap_file).await?)
        }
        _ => None,
    };
    let sim = own_sim.as_ref().unwrap_or(shared);
    let launch = Launch {
        tls: t.is_tls(),
        heap_file: matches!(kind, TargetKind::Watchmux | TargetKind::Limit).then(|| heap_file),
        ..Launch::default()
    };
    let target = targets::start_with(env, kind, sim, &["pods"], &launch).await?;
    heap_reported(&target).await;
    // Half a second for the new process to finish starting (less in smoke runs).
    tokio::time::sleep(Duration::from_secs_f64((s.window_secs / 5.0).min(0.5))).await;
    let before = Memory::now(&target);
    let t0 = Instant::now();
    let watchers = match t {
        Transport::H2 => Watchers::start_h2(&target.endpoint(t), WATCH, n, s.watchcost_streams),
        _ => Watchers::start(
            &target.endpoint(t),
            vec![WATCH.to_string(); n],
            Encoding::Json,
        ),
    };
    // 10 ms a watch (TLS handshakes on two busy cores), at least 10 s; a watch not established
    // by then is not counted.
    let bound = Duration::from_secs_f64((n as f64 * 0.01).clamp(10.0, 300.0));
    let (established, failed) = watchers.wait_started(bound).await;
    let connect_s = t0.elapsed().as_secs_f64();
    if failed > 0 {
        let why = watchers
            .stats
            .first_failure
            .lock()
            .clone()
            .unwrap_or_default();
        eprintln!(
            "  S9 {n} {} {kind}: {failed} watches failed (first: {why})",
            t.name()
        );
    }
    let settle_s = settle(&target.pids(), s).await;
    // A heap report written after the last RSS poll (one every 100 ms).
    tokio::time::sleep(Duration::from_millis(150)).await;
    let after = Memory::now(&target);
    let ended = watchers.stats.ended.load(Ordering::Relaxed);
    watchers.close().await;
    target.stop().await;
    if let Some(p) = own_sim {
        p.stop().await;
    }
    let per = |bytes: f64| {
        if established == 0 {
            f64::NAN
        } else {
            bytes / 1000.0 / established as f64
        }
    };
    let heap_kb = match (before.heap, after.heap) {
        (Some(b), Some(a)) => per((a - b) as f64),
        _ => f64::NAN,
    };
    Ok(Sample {
        scenario: "S9",
        case: String::new(),
        target: kind,
        repeat: 0,
        values: vec![
            ("established", established as f64),
            ("failed", failed as f64),
            ("ended", ended as f64),
            (
                "rss_kb_per_watch",
                per(after.rss as f64 - before.rss as f64),
            ),
            ("heap_kb_per_watch", heap_kb),
            (
                "sock_kb_per_watch",
                per(after.sock as f64 - before.sock as f64),
            ),
            (
                "slab_kb_per_watch",
                per(after.slab as f64 - before.slab as f64),
            ),
            ("rss_mb", after.rss as f64 / MB),
            ("rss_before_mb", before.rss as f64 / MB),
            (
                "heap_mb",
                after.heap.map(|h| h as f64 / MB).unwrap_or(f64::NAN),
            ),
            ("connect_s", connect_s),
            ("settle_s", settle_s),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_beyond_the_open_file_limit_are_refused_with_the_reason() {
        let (l, w) = (20_000, 2);
        // HTTP/1.1 at 50,000 needs 50,000 server sockets; HTTP/2 carries them on 3,334.
        let why = unfit(TargetKind::Watchmux, Transport::Plain, 50_000, 15, l, w).unwrap();
        assert!(
            why.contains("needs 50,000 fds") && why.contains("the limit is 20,000"),
            "{why}"
        );
        assert!(unfit(TargetKind::Watchmux, Transport::Tls, 10_000, 15, l, w).is_none());
        assert!(unfit(TargetKind::Watchmux, Transport::H2, 50_000, 15, l, w).is_none());
        assert!(unfit(TargetKind::Direct, Transport::H2, 50_000, 15, l, w).is_none());
        // nginx proxies each stream on an upstream connection of its own.
        assert!(unfit(TargetKind::Nginx, Transport::H2, 50_000, 15, l, w).is_some());
        assert!(unfit(TargetKind::Nginx, Transport::Plain, 10_000, 15, l, w).is_none());
        assert!(unfit(TargetKind::Nginx, Transport::Plain, 10_000, 15, l, 1).is_some());
        assert!(
            unfit(TargetKind::Limit, Transport::H2, 50, 15, l, w)
                .unwrap()
                .contains("HTTP/1.1 only")
        );
        assert!(unfit(TargetKind::Limit, Transport::Tls, 50, 15, l, w).is_none());
    }
}
