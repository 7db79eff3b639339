//! The persistence bench's report: `persist.md` (medians over the repeats, the machine and the
//! command) and `persist.csv` (every figure of every start and window).
//!
//! Rendering only: it measures and decides nothing.

use std::fmt::Write as _;
use std::time::Duration;

use super::super::report::{fmt_num, median};
use super::churn::ChurnSample;
use super::probe::SimCounters;
use super::restart::{StartKind, StartSample};
use super::{Fleet, PersistOptions};

/// What the report is made of.
pub struct Inputs<'a> {
    /// The options the bench ran with.
    pub opts: &'a PersistOptions,
    /// The fleet.
    pub fleet: &'a Fleet,
    /// Every start.
    pub starts: &'a [StartSample],
    /// Every churn window.
    pub churn: &'a [ChurnSample],
    /// How long the whole bench took.
    pub took: Duration,
    /// The open-file limit.
    pub nofile: u64,
}

/// The bytes a log of records may reach after a full state before the next one is written
/// (`persist::writer::Settings::default().checkpoint_bytes`).
const CHECKPOINT_BYTES: f64 = (64u64 << 20) as f64;

const MB: f64 = 1e6;

fn label(kind: StartKind) -> &'static str {
    match kind {
        StartKind::Fresh => "fresh: no `persist_dir` (full sync)",
        StartKind::FreshPersisted => "first start: empty `persist_dir` (full sync + first state)",
        StartKind::RestoredUp => "restart from disk, upstream up (load + re-watch)",
        StartKind::RestoredDown => "restart from disk, upstream down (load only)",
    }
}

/// The first `/readyz` 200's time, marked when it said "serving stale".
fn ready_cell(xs: &[&StartSample]) -> String {
    let t = med_range(xs, |s: &StartSample| s.ready_s);
    let stale = xs
        .iter()
        .filter(|s| s.ready_s.is_some() && s.ready_stale)
        .count();
    match stale {
        0 => t,
        n if n == xs.len() => format!("{t} (stale)"),
        n => format!("{t} ({n} of {} stale)", xs.len()),
    }
}

/// The median of `f` over `xs`, with the range when it spans more than one value.
fn med_range<T>(xs: &[&T], f: impl Fn(&T) -> Option<f64>) -> String {
    let v: Vec<f64> = xs.iter().filter_map(|x| f(x)).collect();
    if v.is_empty() {
        return "–".into();
    }
    let m = median(&v);
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = (fmt_num(lo), fmt_num(hi));
    if lo == hi {
        fmt_num(m)
    } else {
        format!("{} ({lo}–{hi})", fmt_num(m))
    }
}

fn med<T>(xs: &[&T], f: impl Fn(&T) -> Option<f64>) -> f64 {
    median(&xs.iter().filter_map(|x| f(x)).collect::<Vec<_>>())
}

/// Renders `persist.md`.
pub fn markdown(i: &Inputs<'_>) -> String {
    let o = i.opts;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# watchmux durable cache: restart time and write amplification\n"
    );
    let _ = writeln!(
        md,
        "Command: `{}` (open-file limit {}); the bench took {:.1} min.\n",
        o.command,
        i.nofile,
        i.took.as_secs_f64() / 60.0
    );
    let _ = writeln!(md, "Machine: {}\n", super::super::machine());
    let _ = writeln!(
        md,
        "Fleet: {} pods on {} nodes from the simulator's fleet generator (Deployment-like pods, 3–8 KB of JSON each: {:.2} KB on average), {:.0} MB as one JSON LIST; the simulator loaded it and answered that LIST {:.0} s after its start. watchmux caches pods only. The simulator, watchmux and the bench's clients are separate processes on the same cores; CPU, RSS and disk writes are read from `/proc` for watchmux's process. The persisted directory is on the same disk as the system; its files were just written, so they load from the page cache (a warm restart, as after a process restart or a crash; a node reboot would read them from the disk).\n",
        i.fleet.pods,
        o.nodes,
        i.fleet.list_bytes as f64 / i.fleet.pods.max(1) as f64 / 1e3,
        i.fleet.list_bytes as f64 / MB,
        i.fleet.load_secs
    );
    restart_section(&mut md, i);
    churn_section(&mut md, i);
    md
}

fn restart_section(md: &mut String, i: &Inputs<'_>) {
    let _ = writeln!(md, "## Restart time\n");
    let _ = writeln!(
        md,
        "Each repeat starts watchmux four times in this order, the simulator up throughout: without `persist_dir`; with an emptied `persist_dir` (it syncs from the upstream, then writes its first full state; it is stopped with SIGTERM once that is on disk); from the directory it left, with the upstream up (the cache is loaded from disk and served at once, then re-watched from the disk's resourceVersion, so the upstream replays what changed since; a 410 would relist it and bridge the difference); and from the same directory with the upstream down (its URL refuses connections: reads are served from disk only). Times are seconds from the spawn: the process accepts connections; `/readyz` first answers 200 (marked stale when its body said `ok: serving stale`: a cache restored from disk and not reconciled yet, or an outage); `/readyz` first answers 200 without `serving stale`; the first LIST `?resourceVersion=0` answered 200 with all {} pods has been read in full (LISTs tried every 20 ms; before the cache is ready they get 429); the cache follows the upstream again (`watchmux_cache_staleness_seconds` 0, after the re-watch; or a relist installed, `watchmux_cache_relists_total{{outcome=bridged|reset}}`); the first full state was on disk (`watchmux_persist_checkpoints_total`). CPU and peak RSS are watchmux's from the spawn to the last of these; upstream figures are what the simulator served for the start (`/sim/stats`, less the bench's reads); the directory is measured after watchmux stopped.\n",
        i.fleet.pods
    );
    let _ = writeln!(
        md,
        "Medians over {} repeat(s); (min–max) where they differ.\n",
        i.opts.repeats
    );
    let _ = writeln!(
        md,
        "| start | listening s | `/readyz` 200 s | `/readyz` 200 not stale s | full LIST served s | reconciled s | first state on disk s | watchmux CPU s | peak RSS MB | RSS after MB | upstream requests | upstream pod LIST pages | upstream MB | simulator CPU s | persisted dir MB |"
    );
    let _ = writeln!(
        md,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for kind in StartKind::ALL {
        let xs: Vec<&StartSample> = i.starts.iter().filter(|s| s.kind == kind).collect();
        if xs.is_empty() {
            continue;
        }
        let up =
            |f: fn(&SimCounters) -> u64| move |s: &StartSample| s.upstream.map(|u| f(&u) as f64);
        let reconciled = match xs.iter().find_map(|s| s.reconciled_as) {
            Some(how) => format!(
                "{} ({how})",
                med_range(&xs, |s: &StartSample| s.reconciled_s)
            ),
            None => "–".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            label(kind),
            med_range(&xs, |s: &StartSample| Some(s.listening_s)),
            ready_cell(&xs),
            med_range(&xs, |s: &StartSample| s.fresh_s),
            med_range(&xs, |s: &StartSample| s.served_s),
            reconciled,
            med_range(&xs, |s: &StartSample| s.checkpoint_s),
            fmt_num(med(&xs, |s: &StartSample| Some(s.cpu_s))),
            fmt_num(med(&xs, |s: &StartSample| Some(s.peak_rss as f64 / MB))),
            fmt_num(med(&xs, |s: &StartSample| Some(s.rss as f64 / MB))),
            fmt_num(med(&xs, up(|u| u.requests))),
            fmt_num(med(&xs, up(|u| u.pod_lists))),
            fmt_num(med(&xs, |s: &StartSample| s
                .upstream
                .map(|u| u.bytes as f64 / MB))),
            if kind.upstream_up() {
                fmt_num(med(&xs, |s: &StartSample| Some(s.sim_cpu_s)))
            } else {
                "–".into()
            },
            if kind.persisted() {
                fmt_num(med(&xs, |s: &StartSample| Some(s.dir_bytes as f64 / MB)))
            } else {
                "–".into()
            },
        );
    }
    md.push('\n');
    let never: Vec<String> = i
        .starts
        .iter()
        .filter(|s| s.ready_s.is_none())
        .map(|s| format!("{} #{}", s.kind.name(), s.repeat))
        .collect();
    if !never.is_empty() {
        let _ = writeln!(
            md,
            "`/readyz` never answered 200 (within {:?} after the full LIST) in: {}.\n",
            i.opts.ready_grace,
            never.join(", ")
        );
    }
}

fn churn_section(md: &mut String, i: &Inputs<'_>) {
    let o = i.opts;
    let _ = writeln!(
        md,
        "## Write amplification and CPU at {} writes/s\n",
        fmt_num(o.churn_rate)
    );
    let _ = writeln!(
        md,
        "Two watchmux processes follow the same simulator in the same run, one with `persist_dir` (emptied first) and one without. Once both are synced and the first state is on disk, the simulator churns its pods at {} writes/s (its realistic mix: 55% status updates, 10% relabels, 10% node moves — all MODIFIED —, 13% creates, 12% deletes, graceful ones adding a MODIFIED); after {:.0} s of warm-up, {} window(s) of {:.0} s are measured. Events and event bytes are what each watchmux received from its upstream watch (`watchmux_upstream_events_total`, `watchmux_upstream_bytes_total{{verb=\"watch\"}}`: JSON watch lines); the simulator's own count of the pod bytes it sent is shown per process as a cross-check. Written = `watchmux_persist_bytes_written_total` (records appended and full states written) and, independently, `write_bytes` of `/proc/PID/io` (what the process sent to the block layer, metadata and logs included). Amplification = written ÷ upstream event bytes. CPU is the process's (user + system), and of it the persister thread's (`watchmux-persist`). Other CPU = the machine's busy time minus both watchmux, the simulator and the bench (other tenants of the cores).\n",
        fmt_num(o.churn_rate),
        o.warmup.as_secs_f64(),
        o.repeats,
        o.churn_window.as_secs_f64()
    );
    let _ = writeln!(md, "Medians over {} window(s).\n", o.repeats);
    let _ = writeln!(
        md,
        "| watchmux | events/s received | simulator writes/s | upstream event MB | simulator pod MB | written MB (metric) | written MB (`/proc` io) | amplification (metric) | amplification (`/proc`) | full states written | records dropped | dir MB at end | CPU s | CPU ms per 1,000 events | persister CPU s | peak RSS MB | other CPU cores |"
    );
    let _ = writeln!(
        md,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let rows =
        |p: bool| -> Vec<&ChurnSample> { i.churn.iter().filter(|s| s.persisted == p).collect() };
    for p in [false, true] {
        let xs = rows(p);
        if xs.is_empty() {
            continue;
        }
        let f = |g: fn(&ChurnSample) -> f64| fmt_num(med(&xs, |s: &ChurnSample| Some(g(s))));
        let persist_only = |g: fn(&ChurnSample) -> f64| {
            if p {
                fmt_num(med(&xs, |s: &ChurnSample| Some(g(s))))
            } else {
                "–".into()
            }
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            if p { "with `persist_dir`" } else { "without" },
            f(|s| s.events_per_s()),
            f(|s| s.sim_writes / s.secs),
            f(|s| s.event_bytes / MB),
            f(|s| s.sim_bytes / MB),
            persist_only(|s| s.persist_bytes / MB),
            f(|s| s.io_write_bytes / MB),
            persist_only(|s| s.amplification()),
            f(|s| s.io_amplification()),
            persist_only(|s| s.checkpoints),
            persist_only(|s| s.dropped),
            persist_only(|s| s.disk_bytes / MB),
            f(|s| s.cpu_s),
            f(|s| s.cpu_ms_per_1000()),
            persist_only(|s| s.persist_thread_cpu_s),
            f(|s| s.peak_rss / MB),
            f(|s| s.other_cpu_s / s.secs),
        );
    }
    md.push('\n');
    let achieved = med(&rows(false), |s: &ChurnSample| Some(s.events_per_s()));
    let sim_cores = med(&rows(false), |s: &ChurnSample| Some(s.sim_cpu_s / s.secs));
    if achieved.is_finite() {
        let short = achieved < 0.95 * o.churn_rate;
        let _ = writeln!(
            md,
            "Achieved: **{} events/s**, {:.0}% of the {} writes/s asked for{} (the simulator used {} CPU cores meanwhile).\n",
            fmt_num(achieved),
            100.0 * achieved / o.churn_rate,
            fmt_num(o.churn_rate),
            if short {
                ": **short of the requested rate** — the simulator's churn makes its writes from one task, each costing it the parse, update and re-encoding of a pod's JSON, so that task's CPU caps the rate on a machine whose cores it shares with both watchmux"
            } else {
                ""
            },
            fmt_num(sim_cores)
        );
    }
    let with = med(&rows(true), |s: &ChurnSample| Some(s.cpu_ms_per_1000()));
    let without = med(&rows(false), |s: &ChurnSample| Some(s.cpu_ms_per_1000()));
    let thread = med(&rows(true), |s: &ChurnSample| {
        Some(s.persist_thread_cpu_s * 1e6 / s.events)
    });
    if with.is_finite() && without.is_finite() && without > 0.0 {
        let _ = writeln!(
            md,
            "CPU per 1,000 events, with ÷ without persistence: **{}×** ({} vs {} ms; the persister thread alone {} ms per 1,000 events).\n",
            fmt_num(with / without),
            fmt_num(with),
            fmt_num(without),
            fmt_num(thread)
        );
    }
    // What the design bounds: a full state whenever the records after the last one pass the
    // checkpoint bound, so each bound's worth of events costs one state on top.
    let state = med(
        &i.starts
            .iter()
            .filter(|s| s.kind == StartKind::FreshPersisted)
            .collect::<Vec<_>>(),
        |s: &StartSample| Some(s.dir_bytes as f64),
    );
    let amp = med(&rows(true), |s: &ChurnSample| Some(s.amplification()));
    let rate = med(&rows(true), |s: &ChurnSample| Some(s.event_bytes / s.secs));
    if state.is_finite() && amp.is_finite() {
        // A full state is written once the records since the last one pass the larger of
        // 64 MiB and the state itself: per state's worth of events, one state more.
        let bound = CHECKPOINT_BYTES.max(state);
        let persisted = rows(true);
        let total = |f: fn(&ChurnSample) -> f64| persisted.iter().map(|s| f(s)).sum::<f64>();
        let overall = total(|s| s.persist_bytes) / total(|s| s.event_bytes);
        let _ = writeln!(
            md,
            "By design (`persist::writer`: a full state is written whenever the records appended since the last one pass the larger of 64 MiB and the state's own size), each {:.0} MB of events costs one full state of the cache ({:.0} MB here, the directory after the first start): an amplification of about ({:.0} MB + {:.0} MB) ÷ {:.0} MB = **{}×** plus record framing, over a long run. Measured: **{}×** per window (median; a window without a full state is about 1×), **{}×** over all the windows together. At {:.1} MB/s of events that is a full state every {:.0} s.\n",
            bound / MB,
            state / MB,
            bound / MB,
            state / MB,
            bound / MB,
            fmt_num((bound + state) / bound),
            fmt_num(amp),
            fmt_num(overall),
            rate / MB,
            bound / rate
        );
    }
}

/// Renders `persist.csv`: `part,case,repeat,metric,value`, one row per figure.
pub fn csv(starts: &[StartSample], churn: &[ChurnSample]) -> String {
    let mut out = String::from("part,case,repeat,metric,value\n");
    let mut row = |part: &str, case: &str, r: usize, k: &str, v: Option<f64>| {
        if let Some(v) = v {
            let _ = writeln!(out, "{part},{case},{r},{k},{v}");
        }
    };
    for s in starts {
        let c = s.kind.name();
        let r = s.repeat;
        row("restart", c, r, "listening_s", Some(s.listening_s));
        row("restart", c, r, "ready_s", s.ready_s);
        row(
            "restart",
            c,
            r,
            "ready_stale",
            Some(f64::from(u8::from(s.ready_stale))),
        );
        row("restart", c, r, "fresh_s", s.fresh_s);
        row("restart", c, r, "served_s", s.served_s);
        row("restart", c, r, "served_items", Some(s.served_items as f64));
        row("restart", c, r, "served_bytes", Some(s.served_bytes as f64));
        row(
            "restart",
            c,
            r,
            "list_attempts",
            Some(s.list_attempts as f64),
        );
        row("restart", c, r, "reconciled_s", s.reconciled_s);
        row("restart", c, r, "checkpoint_s", s.checkpoint_s);
        row("restart", c, r, "cpu_s", Some(s.cpu_s));
        row("restart", c, r, "peak_rss_bytes", Some(s.peak_rss as f64));
        row("restart", c, r, "rss_bytes", Some(s.rss as f64));
        row("restart", c, r, "sim_cpu_s", Some(s.sim_cpu_s));
        row("restart", c, r, "dir_bytes", Some(s.dir_bytes as f64));
        if let Some(u) = s.upstream {
            row(
                "restart",
                c,
                r,
                "upstream_requests",
                Some(u.requests as f64),
            );
            row("restart", c, r, "upstream_bytes", Some(u.bytes as f64));
            row(
                "restart",
                c,
                r,
                "upstream_pod_lists",
                Some(u.pod_lists as f64),
            );
            row(
                "restart",
                c,
                r,
                "upstream_pod_watches",
                Some(u.pod_watches as f64),
            );
            row(
                "restart",
                c,
                r,
                "upstream_pod_items",
                Some(u.pod_items as f64),
            );
        }
    }
    for s in churn {
        let c = if s.persisted { "persisted" } else { "plain" };
        let r = s.repeat;
        for (k, v) in [
            ("secs", s.secs),
            ("events", s.events),
            ("event_bytes", s.event_bytes),
            ("sim_bytes", s.sim_bytes),
            ("sim_writes", s.sim_writes),
            ("persist_bytes", s.persist_bytes),
            ("io_write_bytes", s.io_write_bytes),
            ("checkpoints", s.checkpoints),
            ("dropped", s.dropped),
            ("write_errors", s.write_errors),
            ("disk_bytes", s.disk_bytes),
            ("cpu_s", s.cpu_s),
            ("persist_thread_cpu_s", s.persist_thread_cpu_s),
            ("peak_rss_bytes", s.peak_rss),
            ("sim_cpu_s", s.sim_cpu_s),
            ("other_cpu_s", s.other_cpu_s),
        ] {
            row("churn", c, r, k, Some(v));
        }
    }
    out
}
