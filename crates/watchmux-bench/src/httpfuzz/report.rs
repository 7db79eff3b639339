//! The fuzz run's tallies ([`Stats`]: requests by transport, kind and origin, answers by
//! status, findings grouped by rule and shape, each group with a reproducer) and its Markdown.
//!
//! Counting and rendering only: the verdicts come from [`super::check`] and the after-run
//! figures from [`super::after`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::after::{CacheCheck, Fds};
use super::case::{Case, Kind, Origin, Transport};
use super::check::Finding;
use super::parse;
use super::wire::{End, Exchange};

/// Most distinct finding groups kept (each still counted past it).
const MAX_GROUPS: usize = 200;
/// Bytes of request and answer shown per reproducer in the Markdown.
const SHOWN: usize = 1500;

/// A finding with what reproduces it.
#[derive(Debug, Clone)]
pub struct Example {
    /// Seed of the run.
    pub seed: u64,
    /// Case index.
    pub index: u64,
    /// Transport.
    pub transport: Transport,
    /// What the case was.
    pub note: String,
    /// The finding's detail.
    pub detail: String,
    /// The request bytes, exactly as sent (HTTP/2: their HTTP/1 rendering).
    pub request: Vec<u8>,
    /// The first bytes of the answer.
    pub answer: Vec<u8>,
}

/// Findings of one rule and shape.
#[derive(Debug, Clone)]
pub struct Group {
    /// The rule.
    pub rule: &'static str,
    /// How many cases broke it this way.
    pub count: u64,
    /// The first case that did.
    pub example: Example,
}

/// The case that last used a client port.
#[derive(Debug, Clone)]
pub struct Port {
    /// Case index.
    pub index: u64,
    /// Transport.
    pub transport: Transport,
    /// What the case was.
    pub note: String,
    /// A watch followed by more bytes on its connection (see [`held`]).
    pub held: bool,
}

/// Whether watchmux may keep the connection of these requests open after the client left: a
/// watch followed by more bytes (pipelined, or a body longer than announced). hyper, like
/// Go's server, reads nothing more of an HTTP/1 connection while the answer before a
/// pipelined request is still going, so it sees the client leave only when a write fails: at
/// the watch's next event, bookmark or timeout.
pub fn held(metas: &[super::case::Meta]) -> bool {
    metas
        .iter()
        .enumerate()
        .any(|(i, m)| m.watch && (m.trailing || i + 1 < metas.len()))
}

/// The run's tallies.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Cases by transport and kind.
    pub sent: BTreeMap<(Transport, Kind), u64>,
    /// Milliseconds spent, by transport and kind.
    pub millis: BTreeMap<(Transport, Kind), u64>,
    /// Cases that took 5 s or more.
    pub slow: u64,
    /// The slowest cases (milliseconds, index, transport, note, how it ended), slowest first.
    pub slowest: Vec<(u64, u64, Transport, String, String)>,
    /// Cases by origin.
    pub origins: BTreeMap<Origin, u64>,
    /// Answers by status code, and cases without an answer by how they ended.
    pub statuses: BTreeMap<String, u64>,
    /// Finding groups by (rule, shape).
    pub groups: BTreeMap<(String, String), Group>,
    /// Findings in all.
    pub findings: u64,
    /// Cases in all.
    pub cases: u64,
    /// The slowest case, milliseconds.
    pub slowest_ms: u64,
    /// The last case that used each client port (a socket watchmux keeps open is traced back
    /// to its case by its port).
    pub ports: std::collections::HashMap<u16, Port>,
    /// Cases [`held`] says watchmux may keep open after the client left.
    pub held: usize,
}

/// A finding's detail with numbers and quoted text blurred, so that one bug is one group.
pub fn shape(detail: &str) -> String {
    let mut s = String::new();
    let mut in_digits = false;
    let mut quoted = false;
    for c in detail.chars() {
        if c == '"' {
            quoted = !quoted;
            if quoted {
                s.push_str("\"…\"");
            }
            continue;
        }
        if quoted {
            continue;
        }
        if c.is_ascii_digit() {
            if !in_digits {
                s.push('#');
            }
            in_digits = true;
            continue;
        }
        in_digits = false;
        s.push(c);
        if s.chars().count() >= 80 {
            break;
        }
    }
    s
}

impl Stats {
    /// Takes in the warm-up's findings and client ports (its cases are not counted as sent).
    pub fn absorb_warm_up(&mut self, warm: Stats) {
        self.findings += warm.findings;
        for (k, g) in warm.groups {
            match self.groups.get_mut(&k) {
                Some(mine) => mine.count += g.count,
                None => {
                    self.groups.insert(k, g);
                }
            }
        }
        self.held += warm.held;
        for (port, p) in warm.ports {
            self.ports.entry(port).or_insert(p);
        }
    }

    /// Counts one case.
    pub fn record(
        &mut self,
        seed: u64,
        host: &str,
        case: &Case,
        x: &Exchange,
        findings: &[Finding],
    ) {
        self.cases += 1;
        *self.sent.entry((case.transport, case.kind)).or_default() += 1;
        *self.origins.entry(case.origin).or_default() += 1;
        for a in &x.answers {
            *self.statuses.entry(a.head.status.to_string()).or_default() += 1;
        }
        if x.answers.is_empty() {
            let k = match &x.end {
                End::Done if x.h2_frames.is_some() => "h2 frames only",
                End::Done => "no answer (dropped by the client)",
                End::Closed => "closed",
                End::Reset(_) => "reset",
                End::Timeout(_) => "timeout",
                End::Malformed(_) => "malformed",
            };
            *self.statuses.entry(k.to_string()).or_default() += 1;
        }
        if !x.h2_errors.is_empty() {
            *self.statuses.entry("h2 stream error".into()).or_default() += x.h2_errors.len() as u64;
        }
        self.slowest_ms = self.slowest_ms.max(x.millis);
        *self.millis.entry((case.transport, case.kind)).or_default() += x.millis;
        if x.millis >= 5000 {
            self.slow += 1;
        }
        if self.slowest.len() < 5 || self.slowest.last().is_some_and(|l| l.0 < x.millis) {
            let end = format!("{:?}, {} answers", x.end, x.answers.len());
            self.slowest
                .push((x.millis, case.index, case.transport, case.note.clone(), end));
            self.slowest.sort_by_key(|b| std::cmp::Reverse(b.0));
            self.slowest.truncate(5);
        }
        if held(&x.metas) {
            self.held += 1;
        }
        if let Some(p) = x.local_port {
            self.ports.insert(
                p,
                Port {
                    index: case.index,
                    transport: case.transport,
                    note: case.note.clone(),
                    held: held(&x.metas),
                },
            );
        }
        for f in findings {
            self.findings += 1;
            let key = (f.rule.to_string(), shape(&f.detail));
            if let Some(g) = self.groups.get_mut(&key) {
                g.count += 1;
            } else if self.groups.len() < MAX_GROUPS {
                self.groups.insert(
                    key,
                    Group {
                        rule: f.rule,
                        count: 1,
                        example: Example {
                            seed,
                            index: case.index,
                            transport: case.transport,
                            note: case.note.clone(),
                            detail: f.detail.clone(),
                            request: case.bytes(host),
                            answer: x.received.clone(),
                        },
                    },
                );
            }
        }
    }
}

/// How [`super::after::fds`] names a socket missing from `/proc/net/tcp*`.
pub const GONE_SOCKET: &str = super::after::GONE_SOCKET;

/// The after-run figures.
#[derive(Debug, Clone, Default)]
pub struct AfterRun {
    /// Lines of either log that report a panic (process, line).
    pub panics: Vec<(String, String)>,
    /// watchmux's RSS before the fuzz (after warm-up), bytes.
    pub rss_before: u64,
    /// Its RSS after the fuzz, once its clients are gone, bytes.
    pub rss_after: u64,
    /// The most RSS may grow and still count as back near the baseline, bytes, besides twice
    /// what the cache's memory budget counts more than before (what the fuzz wrote is cached).
    pub rss_allowance: u64,
    /// Bytes watchmux's memory budget counted before the fuzz (`watchmux_memory_used_bytes`).
    pub counted_before: u64,
    /// The same after.
    pub counted_after: u64,
    /// Cases whose connection watchmux may hold after the client left ([`held`]).
    pub held_total: usize,
    /// Its open files before.
    pub fds_before: Fds,
    /// Its open files after.
    pub fds_after: Fds,
    /// The simulator's RSS before and after, bytes (for reference).
    pub sim_rss: (u64, u64),
    /// CPU seconds of watchmux, the simulator and the fuzzer over the fuzz.
    pub cpu_secs: [f64; 3],
    /// Cache against simulator, per resource.
    pub cache: Vec<CacheCheck>,
    /// The cases whose connections watchmux kept open (index, transport, TCP state, note).
    pub open_cases: Vec<String>,
    /// The requests of the first few cases of `open_cases` (index, bytes).
    pub open_requests: Vec<(u64, Vec<u8>)>,
    /// The cases whose connections it kept open as [`held`] says it may.
    pub held_cases: Vec<String>,
}

impl AfterRun {
    /// The after-run findings: panics, files not back at the baseline (client connections left
    /// open, or more files than before beyond the upstream pool's idle connections), memory
    /// not back near the baseline, a cache that does not match the simulator.
    pub fn findings(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        for (p, l) in &self.panics {
            out.push(Finding {
                rule: "panic",
                detail: format!("{p}: {l}"),
            });
        }
        let (b, a) = (&self.fds_before, &self.fds_after);
        if !self.open_cases.is_empty() {
            out.push(Finding {
                rule: "fd-leak",
                detail: format!(
                    "{} client connections still open after every client left: {}",
                    self.open_cases.len(),
                    self.open_cases.join("; ")
                ),
            });
        }
        // Sockets whose connection is gone (reset) but whose file is still open: a held
        // connection the client reset is one (it leaves /proc/net/tcp, so its case is unknown),
        // as many as the held cases not seen open; any more is a leak.
        let gone = |f: &Fds| f.other_kinds.get(GONE_SOCKET).copied().unwrap_or(0);
        let reset = gone(a).saturating_sub(gone(b));
        let may_be_held = self.held_total.saturating_sub(self.held_cases.len());
        if reset > may_be_held {
            out.push(Finding {
                rule: "fd-leak",
                detail: format!(
                    "{reset} sockets of closed connections still open, at most {may_be_held} of them held watches"
                ),
            });
        }
        let rest = |f: &Fds| {
            f.total
                .saturating_sub(f.upstream + f.downstream + f.listening + gone(f))
        };
        if rest(a) > rest(b) + 4 {
            out.push(Finding {
                rule: "fd-leak",
                detail: format!("{} files besides connections, {} before", rest(a), rest(b)),
            });
        }
        let allowance = self
            .rss_allowance
            .saturating_add(2 * self.counted_after.saturating_sub(self.counted_before));
        if self.rss_after > self.rss_before.saturating_add(allowance) {
            out.push(Finding {
                rule: "rss",
                detail: format!(
                    "RSS {} MiB after, {} MiB before (allowance {} MiB: {} MiB, and twice the {} MiB more the cache counts)",
                    self.rss_after >> 20,
                    self.rss_before >> 20,
                    allowance >> 20,
                    self.rss_allowance >> 20,
                    self.counted_after.saturating_sub(self.counted_before) >> 20
                ),
            });
        }
        for c in &self.cache {
            if !c.matched {
                out.push(Finding {
                    rule: "cache-mismatch",
                    detail: format!(
                        "{}: watchmux {} objects, simulator {}: {} {}",
                        c.resource,
                        c.watchmux,
                        c.sim,
                        c.differences.join("; "),
                        c.error.clone().unwrap_or_default()
                    ),
                });
            }
        }
        out
    }
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1u64 << 20) as f64)
}

/// The report's Markdown.
pub fn markdown(
    command: &str,
    seed: u64,
    concurrency: usize,
    secs: f64,
    s: &Stats,
    after: &AfterRun,
    after_findings: &[Finding],
) -> String {
    let mut m = String::new();
    let passed = s.findings == 0 && after_findings.is_empty();
    let _ = writeln!(
        m,
        "# HTTP fuzz: {}\n",
        if passed { "passed" } else { "FINDINGS" }
    );
    let _ = writeln!(m, "`{command}`\n");
    let _ = writeln!(
        m,
        "Seed {seed}, {} cases at concurrency {concurrency} in {secs:.1} s ({:.0} cases/s); slowest case {} ms. CPU seconds: watchmux {:.1}, simulator {:.1}, fuzzer {:.1}. Any case: `watchmux-bench httpfuzz --seed {seed} --only INDEX`.\n",
        s.cases,
        s.cases as f64 / secs.max(0.001),
        s.slowest_ms,
        after.cpu_secs[0],
        after.cpu_secs[1],
        after.cpu_secs[2],
    );
    let _ = writeln!(
        m,
        "## Requests by transport and kind\n\n| transport | kind | cases | mean ms |\n|---|---|---:|---:|"
    );
    for ((t, k), n) in &s.sent {
        let ms = s.millis.get(&(*t, *k)).copied().unwrap_or(0) / (*n).max(1);
        let _ = writeln!(m, "| {} | {} | {n} | {ms} |", t.name(), k.name());
    }
    let _ = writeln!(m, "\nCases of 5 s or more: {}. Slowest:\n", s.slow);
    for (ms, i, t, note, end) in &s.slowest {
        let _ = writeln!(m, "- {ms} ms: case {i} ({}): {note} ({end})", t.name());
    }
    let _ = writeln!(m);
    let _ = writeln!(
        m,
        "\nBy origin: {}.\n",
        s.origins
            .iter()
            .map(|(o, n)| format!("{} {n}", o.name()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(m, "## Answers by status\n\n| status | count |\n|---|---:|");
    for (k, n) in &s.statuses {
        let _ = writeln!(m, "| {k} | {n} |");
    }
    let _ = writeln!(m, "\n## After the run\n");
    let (b, a) = (&after.fds_before, &after.fds_after);
    let _ = writeln!(m, "| watchmux | before | after |\n|---|---:|---:|");
    let _ = writeln!(
        m,
        "| RSS, MiB | {} | {} |",
        mib(after.rss_before),
        mib(after.rss_after)
    );
    let _ = writeln!(
        m,
        "| counted by the cache's memory budget, MiB | {} | {} |",
        mib(after.counted_before),
        mib(after.counted_after)
    );
    let _ = writeln!(m, "| open files | {} | {} |", b.total, a.total);
    let _ = writeln!(
        m,
        "| · client connections | {} | {} |",
        b.downstream, a.downstream
    );
    let _ = writeln!(
        m,
        "| · upstream connections | {} | {} |",
        b.upstream, a.upstream
    );
    let _ = writeln!(m, "| · listening | {} | {} |", b.listening, a.listening);
    let _ = writeln!(m, "| · other | {} | {} |", b.other, a.other);
    let kinds = |f: &Fds| {
        f.other_kinds
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        m,
        "\nOther files before: {}; after: {}.",
        kinds(b),
        kinds(a)
    );
    let _ = writeln!(
        m,
        "\nSimulator RSS {} → {} MiB. RSS allowance {} MiB.\n",
        mib(after.sim_rss.0),
        mib(after.sim_rss.1),
        mib(after.rss_allowance)
    );
    let _ = writeln!(
        m,
        "| cached resource | watchmux | simulator | matches |\n|---|---:|---:|---|"
    );
    for c in &after.cache {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} |",
            c.resource,
            c.watchmux,
            c.sim,
            if c.matched { "yes" } else { "NO" }
        );
    }
    let _ = writeln!(m, "\nPanics in the logs: {}.\n", after.panics.len());
    if !after.held_cases.is_empty() {
        let _ = writeln!(
            m,
            "Connections kept open as hyper (and Go) keep a watch with bytes pipelined after it, until the watch's next write: {}\n",
            after.held_cases.join("; ")
        );
    }
    let _ = writeln!(
        m,
        "## Findings: {} in {} groups, {} after the run\n",
        s.findings,
        s.groups.len(),
        after_findings.len()
    );
    for f in after_findings {
        let _ = writeln!(m, "- **{}**: {}", f.rule, f.detail);
    }
    for (i, b) in &after.open_requests {
        let _ = writeln!(
            m,
            "\nCase {i}, kept open ({} bytes):\n```\n{}\n```",
            b.len(),
            parse::lossy(b, SHOWN)
        );
    }
    for g in s.groups.values() {
        let e = &g.example;
        let _ = writeln!(
            m,
            "\n### {} ×{}: {}\n\nCase {} (seed {}, {}): {}\n",
            g.rule,
            g.count,
            parse::escape(e.detail.chars().take(300).collect::<String>().as_bytes()),
            e.index,
            e.seed,
            e.transport.name(),
            e.note
        );
        let _ = writeln!(
            m,
            "Request ({} bytes):\n```\n{}\n```",
            e.request.len(),
            parse::lossy(&e.request, SHOWN)
        );
        let _ = writeln!(
            m,
            "Answer ({} bytes kept):\n```\n{}\n```",
            e.answer.len(),
            parse::lossy(&e.answer, SHOWN)
        );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_blur_numbers_and_quotes() {
        assert_eq!(shape("500 (x): \"abc\" 12 bytes"), "# (x): \"…\" # bytes");
        assert_eq!(shape("a"), "a");
    }

    #[test]
    fn after_run_findings() {
        let mut a = AfterRun {
            rss_before: 100 << 20,
            rss_after: 120 << 20,
            rss_allowance: 64 << 20,
            ..AfterRun::default()
        };
        a.fds_before = Fds {
            total: 20,
            upstream: 4,
            downstream: 0,
            listening: 1,
            other: 15,
            ..Fds::default()
        };
        a.fds_after = Fds {
            total: 40,
            upstream: 24,
            downstream: 0,
            listening: 1,
            other: 15,
            ..Fds::default()
        };
        assert!(
            a.findings().is_empty(),
            "idle upstream connections are the pool's"
        );
        a.fds_after.downstream = 2;
        a.open_cases.push("case 1".into());
        a.rss_after = 200 << 20;
        a.panics
            .push(("watchmux".into(), "thread 'x' panicked at y".into()));
        a.cache.push(CacheCheck {
            resource: "pods".into(),
            ..CacheCheck::default()
        });
        let rules: Vec<&str> = a.findings().iter().map(|f| f.rule).collect();
        assert_eq!(rules, ["panic", "fd-leak", "rss", "cache-mismatch"]);
    }
}
