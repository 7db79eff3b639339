//! The soak's report: whether watchmux's memory plateaued ([`plateau`]), and the Markdown
//! ([`markdown`]) of the checks, counts, watcher mix, watchmux's own metrics and the RSS / open
//! file series, plus that series as CSV ([`samples_csv`]).
//!
//! Rendering only, from [`Findings`] the soak gathered: it measures and decides nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::checker::{Kind, Violation};
use super::plan::{FaultKind, FaultPlan};
use super::watcher::Counts;

/// One sample of watchmux's process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the soak started.
    pub t: f64,
    /// Resident set size, bytes.
    pub rss: u64,
    /// Open file descriptors.
    pub fds: usize,
}

/// The plateau test on RSS: the largest sample of the chaos phase's last third against its
/// middle third's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plateau {
    /// Largest RSS in the middle third, bytes.
    pub middle_max: u64,
    /// Largest RSS in the last third, bytes.
    pub last_max: u64,
    /// `last_max` ≤ 1.1 × `middle_max`.
    pub flat: bool,
}

/// Compares the thirds of the samples taken up to `end` seconds.
pub fn plateau(samples: &[Sample], end: f64) -> Plateau {
    let max_in = |from: f64, to: f64| {
        samples
            .iter()
            .filter(|s| s.t >= from && s.t < to)
            .map(|s| s.rss)
            .max()
            .unwrap_or(0)
    };
    let middle_max = max_in(end / 3.0, 2.0 * end / 3.0);
    let last_max = max_in(2.0 * end / 3.0, end + f64::EPSILON);
    Plateau {
        middle_max,
        last_max,
        flat: last_max as f64 <= 1.1 * middle_max as f64,
    }
}

/// One pass/fail check.
#[derive(Debug, Clone)]
pub struct Check {
    /// What is checked.
    pub name: &'static str,
    /// Whether it held.
    pub passed: bool,
    /// The figures behind it.
    pub detail: String,
}

/// Figures of one kind of watcher.
#[derive(Debug, Clone, Default)]
pub struct MixRow {
    /// Watchers of this kind.
    pub watchers: u64,
    /// Their counts, summed.
    pub counts: Counts,
    /// Their violations.
    pub violations: u64,
}

/// Everything the soak found.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// The command line.
    pub command: String,
    /// Seed, watchers, duration and sizes, one line.
    pub setup: String,
    /// CPU, cores, memory.
    pub machine: String,
    /// Minutes the whole soak took.
    pub minutes: f64,
    /// The checks.
    pub checks: Vec<Check>,
    /// The fault schedule.
    pub fault_plan: Vec<FaultPlan>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// Faults that could not be injected.
    pub fault_failures: Vec<String>,
    /// Every watcher's counts, summed.
    pub totals: Counts,
    /// Violations by kind, over every watcher.
    pub violations: BTreeMap<Kind, u64>,
    /// The first violations with their evidence: watcher id, its kind, the violation.
    pub evidence: Vec<(usize, String, Violation)>,
    /// Figures by watcher kind (`chunked/JSON slow resumer`).
    pub mix: BTreeMap<String, MixRow>,
    /// Figures by selector (`path?query`).
    pub selectors: BTreeMap<String, MixRow>,
    /// watchmux's metrics at the end: name, labels, value.
    pub metrics: Vec<(String, String, f64)>,
    /// The simulator's pod LIST and WATCH requests served (watchmux's upstream traffic).
    pub upstream: (u64, u64),
    /// RSS and fds over time.
    pub samples: Vec<Sample>,
    /// Seconds the chaos phase (churn and faults) lasted.
    pub chaos_secs: f64,
    /// The RSS plateau test.
    pub plateau: Option<Plateau>,
    /// Seconds the watchers took to converge after the simulator settled.
    pub converge_secs: f64,
    /// The simulator's final resourceVersion.
    pub final_rv: u64,
    /// Why watchmux closed watchers (its log), by reason.
    pub closed_reasons: BTreeMap<String, u64>,
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn counts_table(md: &mut String, title: &str, rows: &BTreeMap<String, MixRow>) {
    let _ = writeln!(
        md,
        "| {title} | watchers | events | bookmarks | syncs | relists (410) | resumes | planned disconnects | stalls cut off / measured | violations |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (k, r) in rows {
        let c = &r.counts;
        let _ = writeln!(
            md,
            "| {k} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
            r.watchers,
            c.events.values().sum::<u64>(),
            c.bookmarks,
            c.syncs,
            c.relists,
            c.resumes,
            c.planned_disconnects,
            c.stalls.iter().filter(|(_, cut)| *cut).count(),
            c.stalls.len(),
            r.violations
        );
    }
    md.push('\n');
}

/// The Markdown report.
pub fn markdown(f: &Findings) -> String {
    let mut md = String::new();
    let passed = f.checks.iter().all(|c| c.passed);
    let _ = writeln!(
        md,
        "# watchmux chaos soak: {}\n",
        if passed { "PASSED" } else { "FAILED" }
    );
    let _ = writeln!(
        md,
        "Command: `{}` ({:.1} min).\n\nSetup: {}.\n\nMachine: {}.\n",
        f.command, f.minutes, f.setup, f.machine
    );

    let _ = writeln!(
        md,
        "## Checks\n\n| check | result | figures |\n|---|---|---|"
    );
    for c in &f.checks {
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            c.name,
            if c.passed { "pass" } else { "**FAIL**" },
            c.detail.replace('|', "\\|")
        );
    }

    let t = &f.totals;
    let _ = writeln!(md, "\n## Counts\n");
    let events: u64 = t.events.values().sum();
    let by_type = t
        .events
        .iter()
        .map(|(k, v)| format!("{} {v}", k.name()))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        md,
        "- Events delivered: {events} ({by_type}), bookmarks {}; {:.1} MiB read.\n- Syncs {} (LISTs or watch-lists, the first included), relists after 410: {}, resumes from a resourceVersion: {}, planned disconnects: {}, stalls cut off: {} of {} measured.\n- Simulator: {} pod LISTs and {} pod WATCHes served (watchmux's upstream requests); final resourceVersion {}; watchers converged {:.1} s after it settled.",
        t.bookmarks,
        mib(t.bytes),
        t.syncs,
        t.relists,
        t.resumes,
        t.planned_disconnects,
        t.stalls.iter().filter(|(_, cut)| *cut).count(),
        t.stalls.len(),
        f.upstream.0,
        f.upstream.1,
        f.final_rv,
        f.converge_secs
    );
    if t.relayed_malformed > 0 {
        let _ = writeln!(
            md,
            "- The simulator's malformed-event line reached clients {} times as is, through watches watchmux passed through to it (not counted as violations: pass-through relays the upstream's bytes).",
            t.relayed_malformed
        );
    }
    let total_violations: u64 = f.violations.values().sum();
    let _ = writeln!(md, "- Violations: {total_violations}.");
    for (k, n) in &f.violations {
        let _ = writeln!(md, "  - {}: {n}", k.name());
    }
    if !f.evidence.is_empty() {
        let _ = writeln!(md, "\nFirst violations:\n");
        for (id, kind, v) in &f.evidence {
            let _ = writeln!(
                md,
                "- watcher {id} ({kind}): {}: {}",
                v.kind.name(),
                v.detail
            );
        }
    }

    let _ = writeln!(md, "\n### Faults injected\n\n| fault | count |\n|---|---:|");
    for (k, n) in &f.faults {
        let _ = writeln!(md, "| {} | {n} |", k.name());
    }
    for e in &f.fault_failures {
        let _ = writeln!(md, "\nNot injected: {e}");
    }
    let _ = writeln!(md, "\nSchedule (s from the start): {}", {
        f.fault_plan
            .iter()
            .map(|p| {
                let mut s = format!("{:.1} {}", p.at.as_secs_f64(), p.kind.name());
                if !p.length.is_zero() {
                    let _ = write!(s, " {:.1} s", p.length.as_secs_f64());
                }
                if p.amount > 0 {
                    let _ = write!(s, " ({})", p.amount);
                }
                s
            })
            .collect::<Vec<_>>()
            .join("; ")
    });

    let _ = writeln!(
        md,
        "\n### How watch streams ended (client side)\n\n| end | count |\n|---|---:|"
    );
    for (k, n) in &t.ends {
        let _ = writeln!(md, "| {k} | {n} |");
    }
    if !f.closed_reasons.is_empty() {
        let _ = writeln!(
            md,
            "\nWatchers watchmux closed, by the reason it logged:\n\n| reason | count |\n|---|---:|"
        );
        for (k, n) in &f.closed_reasons {
            let _ = writeln!(md, "| {k} | {n} |");
        }
    }
    if !t.refusals.is_empty() {
        let _ = writeln!(
            md,
            "\nRequests not answered with a stream or a list:\n\n| answer | count |\n|---|---:|"
        );
        for (k, n) in &t.refusals {
            let _ = writeln!(md, "| {k} | {n} |");
        }
    }

    let _ = writeln!(md, "\n### watchmux's metrics at the end\n");
    let _ = writeln!(md, "| metric | labels | value |\n|---|---|---:|");
    for (name, labels, v) in &f.metrics {
        let _ = writeln!(md, "| {name} | {labels} | {v} |");
    }

    let _ = writeln!(md, "\n## Watchers\n");
    counts_table(&mut md, "kind", &f.mix);
    counts_table(&mut md, "selector", &f.selectors);

    let _ = writeln!(md, "## watchmux memory and open files\n");
    if let Some(p) = f.plateau {
        let _ = writeln!(
            md,
            "RSS plateau: largest in the chaos phase's last third {:.1} MiB, in its middle third {:.1} MiB: {}.\n",
            mib(p.last_max),
            mib(p.middle_max),
            if p.flat { "flat" } else { "still growing" }
        );
    }
    let _ = writeln!(md, "| t (s) | RSS (MiB) | open fds |\n|---:|---:|---:|");
    let step = (f.samples.len() / 30).max(1);
    for (i, s) in f.samples.iter().enumerate() {
        if i % step == 0 || i + 1 == f.samples.len() {
            let _ = writeln!(md, "| {:.0} | {:.1} | {} |", s.t, mib(s.rss), s.fds);
        }
    }
    let _ = writeln!(
        md,
        "\nThe chaos phase ended at {:.0} s; the full series is in `soak-rss.csv`.",
        f.chaos_secs
    );
    md
}

/// The RSS and fd series as CSV.
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut s = String::from("t_secs,rss_bytes,open_fds\n");
    for x in samples {
        let _ = writeln!(s, "{:.2},{},{}", x.t, x.rss, x.fds);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(rss: &[u64]) -> Vec<Sample> {
        rss.iter()
            .enumerate()
            .map(|(i, &r)| Sample {
                t: i as f64,
                rss: r,
                fds: 10,
            })
            .collect()
    }

    #[test]
    fn plateau_compares_the_last_third_with_the_middle_one() {
        let flat = plateau(&series(&[10, 50, 100, 100, 101, 100, 100, 104, 100]), 9.0);
        assert_eq!(
            (flat.middle_max, flat.last_max, flat.flat),
            (101, 104, true)
        );
        let growing = plateau(&series(&[10, 20, 30, 40, 50, 60, 70, 80, 90]), 9.0);
        assert!(!growing.flat, "{growing:?}");
        // Samples after the end (settling) do not count.
        let p = plateau(&series(&[1, 1, 1, 5, 5, 5, 5, 5, 5, 900]), 9.0);
        assert!(p.flat);
    }

    #[test]
    fn the_report_shows_failed_checks_and_evidence() {
        let mut f = Findings {
            checks: vec![Check {
                name: "no violations",
                passed: false,
                detail: "1".into(),
            }],
            ..Findings::default()
        };
        f.violations.insert(Kind::Duplicate, 1);
        f.evidence.push((
            3,
            "chunked/JSON normal".into(),
            Violation {
                kind: Kind::Duplicate,
                detail: "MODIFIED n/a at 7 after 7".into(),
            },
        ));
        let md = markdown(&f);
        assert!(md.starts_with("# watchmux chaos soak: FAILED"));
        assert!(md.contains("| no violations | **FAIL** | 1 |"));
        assert!(md.contains("watcher 3 (chunked/JSON normal): duplicate resourceVersion"));
    }
}
