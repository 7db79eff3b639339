//! Bench results: raw samples, medians over repeats, ratios of watchmux to each baseline, and
//! their Markdown and CSV renderings.
//!
//! Pure rendering: no I/O (the suite writes the files) and no measuring.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::targets::TargetKind;

/// One measured figure of a scenario.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Key in the CSV.
    pub key: &'static str,
    /// Column header (with unit) in the Markdown table.
    pub label: &'static str,
    /// Whether a larger value is better (for reading ratios).
    pub higher_is_better: bool,
}

/// How a scenario reports itself.
#[derive(Debug, Clone)]
pub struct ScenarioSpec {
    /// "S1".
    pub id: &'static str,
    /// "broadcast".
    pub name: &'static str,
    /// One paragraph: what runs and what is measured.
    pub about: String,
    /// Header of the case column ("watchers").
    pub case_label: &'static str,
    /// The figures, in column order.
    pub metrics: Vec<Metric>,
    /// The figures for which watchmux's ratio to each baseline is reported.
    pub ratio_metrics: Vec<&'static str>,
    /// A figure reported as its last case ÷ its first case for every target (how it scales).
    pub scaling_metric: Option<&'static str>,
    /// When the variable is not the target but a variant of each case (S8: the encoding).
    pub variants: Option<Variants>,
    /// When some cases also ran over other transports ([`super::tls::case`]: `1000 · TLS`
    /// beside `1000`): each one's figures ÷ the bare case's, per target.
    pub versus: Option<Versus>,
}

impl ScenarioSpec {
    /// A scenario whose table is its `metrics` per case and target, and nothing more: no
    /// ratios to baselines, scaling, variants or transports.
    pub fn table(
        id: &'static str,
        name: &'static str,
        about: String,
        case_label: &'static str,
        metrics: Vec<Metric>,
    ) -> ScenarioSpec {
        ScenarioSpec {
            id,
            name,
            about,
            case_label,
            metrics,
            ratio_metrics: vec![],
            scaling_metric: None,
            variants: None,
            versus: None,
        }
    }
}

/// Cases that ran over several transports: the bare case (plain HTTP/1.1) and variants of it
/// named [`variant_case`]`(base, variant)`, compared per target.
#[derive(Debug, Clone)]
pub struct Versus {
    /// What the bare case is ("plain HTTP/1.1").
    pub base: &'static str,
    /// The variants' names, in row order ("TLS", "h2").
    pub variants: Vec<&'static str>,
    /// The figures for which each variant's ratio to the bare case is reported.
    pub metrics: Vec<&'static str>,
}

/// A case a scenario could not set up on this machine, and why (it is listed under the
/// scenario's table instead of failing the run).
#[derive(Debug, Clone)]
pub struct NotRun {
    /// Scenario id.
    pub scenario: &'static str,
    /// The case.
    pub case: String,
    /// The target.
    pub target: TargetKind,
    /// Why ("needs 50,000 fds, the limit is 20,000").
    pub reason: String,
}

/// The Markdown list of the cases not run.
pub fn not_run_markdown(items: &[&NotRun]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut md = String::from("\nNot run on this machine:\n\n");
    for n in items {
        let _ = writeln!(md, "- {} · {}: {}", n.case, n.target, n.reason);
    }
    md
}

/// A scenario whose cases each run in several variants against the same target (S8: JSON and
/// protobuf through watchmux). Its samples' cases are named [`variant_case`]`(base, variant)`;
/// its table has a row per case and variant (the target, always the same, is said in the
/// scenario's `about` instead of on every row), and each variant is compared with the first.
#[derive(Debug, Clone)]
pub struct Variants {
    /// Header of the variant column ("encoding").
    pub label: &'static str,
    /// The variants in row order; the first is the one the others are divided by.
    pub names: Vec<&'static str>,
    /// The figures for which each variant's ratio to the first is reported.
    pub ratio_metrics: Vec<&'static str>,
}

/// The case name of `variant` of case `base`.
pub fn variant_case(base: &str, variant: &str) -> String {
    format!("{base} · {variant}")
}

/// One run's figures.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Scenario id.
    pub scenario: &'static str,
    /// Case within the scenario ("1000").
    pub case: String,
    /// Target measured.
    pub target: TargetKind,
    /// Repeat number (0-based).
    pub repeat: usize,
    /// (metric key, value).
    pub values: Vec<(&'static str, f64)>,
}

/// The median of `v` (mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Formats a figure with about three significant digits.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "–".to_string();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 1000.0 {
        let s = format!("{:.0}", x);
        // Thousands separators make 6-digit figures readable.
        let (sign, digits) = s.strip_prefix('-').map(|d| ("-", d)).unwrap_or(("", &s));
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        format!("{sign}{out}")
    } else if a >= 100.0 {
        format!("{:.0}", x)
    } else if a >= 10.0 {
        format!("{:.1}", x)
    } else if a >= 1.0 {
        format!("{:.2}", x)
    } else {
        format!("{:.3}", x)
    }
}

/// (case, target, metric).
type Key = (String, TargetKind, &'static str);

/// Median, count, min and max of one figure's finite values.
type Stats = (f64, usize, f64, f64);

/// Medians keyed by (case, target, metric), cases in first-seen order.
pub struct Summary {
    /// Cases in the order they ran.
    pub cases: Vec<String>,
    /// Targets measured, in report order.
    pub targets: Vec<TargetKind>,
    medians: BTreeMap<Key, Stats>,
}

impl Summary {
    /// Summarises the samples of one scenario.
    pub fn of(samples: &[&Sample]) -> Summary {
        let mut cases: Vec<String> = Vec::new();
        let mut targets: Vec<TargetKind> = Vec::new();
        let mut raw: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
        for s in samples {
            if !cases.contains(&s.case) {
                cases.push(s.case.clone());
            }
            if !targets.contains(&s.target) {
                targets.push(s.target);
            }
            for (k, v) in &s.values {
                raw.entry((s.case.clone(), s.target, *k))
                    .or_default()
                    .push(*v);
            }
        }
        targets.sort();
        let medians = raw
            .into_iter()
            .map(|(k, v)| {
                let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
                let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
                let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (k, (median(&v), finite.len(), min, max))
            })
            .collect();
        Summary {
            cases,
            targets,
            medians,
        }
    }

    /// The median of a figure, if measured.
    pub fn get(&self, case: &str, target: TargetKind, metric: &str) -> Option<f64> {
        self.medians
            .iter()
            .find(|((c, t, m), _)| c == case && *t == target && *m == metric)
            .map(|(_, v)| v.0)
            .filter(|v| v.is_finite())
    }

    /// watchmux's median divided by `baseline`'s.
    pub fn ratio(&self, case: &str, metric: &str, baseline: TargetKind) -> Option<f64> {
        let w = self.get(case, TargetKind::Watchmux, metric)?;
        let b = self.get(case, baseline, metric)?;
        (b != 0.0).then_some(w / b).filter(|r| r.is_finite())
    }
}

/// The Markdown section of one scenario: medians per case and target, then ratios.
pub fn markdown(spec: &ScenarioSpec, samples: &[&Sample], repeats: usize) -> String {
    let sum = Summary::of(samples);
    let mut md = String::new();
    let _ = writeln!(md, "### {} {}\n\n{}\n", spec.id, spec.name, spec.about);
    let _ = writeln!(md, "Medians over {repeats} repeat(s).\n");
    if let Some(v) = &spec.variants {
        variant_tables(&mut md, spec, v, &sum);
        return md;
    }
    table_head(&mut md, spec, "target");
    for case in &sum.cases {
        for &t in &sum.targets {
            let _ = write!(md, "| {case} | {t} |");
            for m in &spec.metrics {
                let v = sum.get(case, t, m.key).unwrap_or(f64::NAN);
                let cell = fmt_num(v);
                if t == TargetKind::Watchmux {
                    let _ = write!(md, " **{cell}** |");
                } else {
                    let _ = write!(md, " {cell} |");
                }
            }
            md.push('\n');
        }
    }
    let baselines: Vec<TargetKind> = sum
        .targets
        .iter()
        .copied()
        .filter(|t| *t != TargetKind::Watchmux)
        .collect();
    if !spec.ratio_metrics.is_empty()
        && !baselines.is_empty()
        && sum.targets.contains(&TargetKind::Watchmux)
    {
        let _ = write!(
            md,
            "\nwatchmux ÷ baseline (for figures where lower is better, < 1 means watchmux is better):\n\n| {} | figure |",
            spec.case_label
        );
        for b in &baselines {
            let _ = write!(md, " ÷ {b} |");
        }
        let _ = write!(md, "\n|---|---|");
        for _ in &baselines {
            let _ = write!(md, "---:|");
        }
        md.push('\n');
        for case in &sum.cases {
            for key in &spec.ratio_metrics {
                let Some(m) = spec.metrics.iter().find(|m| m.key == *key) else {
                    continue;
                };
                let _ = write!(md, "| {case} | {} |", m.label);
                for b in &baselines {
                    let cell = sum
                        .ratio(case, key, *b)
                        .map(|r| format!("{}×", fmt_num(r)))
                        .unwrap_or_else(|| "–".into());
                    let _ = write!(md, " {cell} |");
                }
                md.push('\n');
            }
        }
    }
    if let Some(v) = &spec.versus {
        versus_table(&mut md, spec, v, &sum);
    }
    if let Some(key) = spec.scaling_metric
        && let (Some(first), Some(last)) = (sum.cases.first(), sum.cases.last())
        && first != last
        && let Some(m) = spec.metrics.iter().find(|m| m.key == key)
    {
        let _ = write!(
            md,
            "\n{} at {last} {} ÷ at {first}:",
            m.label, spec.case_label
        );
        for &t in &sum.targets {
            let r = match (sum.get(last, t, key), sum.get(first, t, key)) {
                (Some(a), Some(b)) if b != 0.0 => format!("{}×", fmt_num(a / b)),
                _ => "–".into(),
            };
            let _ = write!(md, " {t} {r};");
        }
        md.pop();
        md.push_str(".\n");
    }
    md
}

/// Each variant of each bare case ÷ the bare case, a column per target.
fn versus_table(md: &mut String, spec: &ScenarioSpec, v: &Versus, sum: &Summary) {
    let bases: Vec<&String> = sum.cases.iter().filter(|c| !c.contains(" · ")).collect();
    let mut rows = String::new();
    for base in bases {
        for name in &v.variants {
            let case = variant_case(base, name);
            if !sum.cases.contains(&case) {
                continue;
            }
            for key in &v.metrics {
                let Some(m) = spec.metrics.iter().find(|m| m.key == *key) else {
                    continue;
                };
                let _ = write!(rows, "| {base} | {name} | {} |", m.label);
                for &t in &sum.targets {
                    let r = match (sum.get(&case, t, key), sum.get(base, t, key)) {
                        (Some(a), Some(b)) if b != 0.0 => Some(a / b).filter(|r| r.is_finite()),
                        _ => None,
                    };
                    let cell = r
                        .map(|r| format!("{}×", fmt_num(r)))
                        .unwrap_or_else(|| "–".into());
                    let _ = write!(rows, " {cell} |");
                }
                rows.push('\n');
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        md,
        "\nEach transport ÷ {} of the same target (for figures where lower is better, > 1 means it costs more):\n\n| {} | transport | figure |",
        v.base, spec.case_label
    );
    for t in &sum.targets {
        let _ = write!(md, " {t} |");
    }
    let _ = write!(md, "\n|---|---|---|");
    for _ in &sum.targets {
        let _ = write!(md, "---:|");
    }
    md.push('\n');
    md.push_str(&rows);
}

/// The table of a scenario with [`Variants`], then each variant's ratio to the first.
fn variant_tables(md: &mut String, spec: &ScenarioSpec, v: &Variants, sum: &Summary) {
    // The bases, in the order their cases first ran.
    let mut bases: Vec<&str> = Vec::new();
    for case in &sum.cases {
        if let Some((base, name)) = case.rsplit_once(" · ")
            && v.names.contains(&name)
            && !bases.contains(&base)
        {
            bases.push(base);
        }
    }
    table_head(md, spec, v.label);
    let several = sum.targets.len() > 1;
    for base in &bases {
        for name in &v.names {
            let case = variant_case(base, name);
            for &t in &sum.targets {
                if !spec
                    .metrics
                    .iter()
                    .any(|m| sum.get(&case, t, m.key).is_some())
                {
                    continue;
                }
                let label = if several {
                    format!("{name} ({t})")
                } else {
                    name.to_string()
                };
                let _ = write!(md, "| {base} | {label} |");
                for m in &spec.metrics {
                    let cell = fmt_num(sum.get(&case, t, m.key).unwrap_or(f64::NAN));
                    let _ = write!(md, " {cell} |");
                }
                md.push('\n');
            }
        }
    }
    let Some((first, others)) = v.names.split_first() else {
        return;
    };
    if v.ratio_metrics.is_empty() || others.is_empty() {
        return;
    }
    let _ = write!(
        md,
        "\nEach {} ÷ {first} (for figures where lower is better, < 1 means it is better than {first}):\n\n| {} | figure |",
        v.label, spec.case_label
    );
    for o in others {
        let _ = write!(md, " {o} ÷ {first} |");
    }
    let _ = write!(md, "\n|---|---|");
    for _ in others {
        let _ = write!(md, "---:|");
    }
    md.push('\n');
    for base in &bases {
        for key in &v.ratio_metrics {
            let Some(m) = spec.metrics.iter().find(|m| m.key == *key) else {
                continue;
            };
            let _ = write!(md, "| {base} | {} |", m.label);
            for o in others {
                let r = sum.targets.iter().find_map(|&t| {
                    let a = sum.get(&variant_case(base, o), t, key)?;
                    let b = sum.get(&variant_case(base, first), t, key)?;
                    (b != 0.0).then_some(a / b).filter(|r| r.is_finite())
                });
                let cell = r
                    .map(|r| format!("{}×", fmt_num(r)))
                    .unwrap_or_else(|| "–".into());
                let _ = write!(md, " {cell} |");
            }
            md.push('\n');
        }
    }
}

/// Every sample as CSV rows: `scenario,case,target,repeat,metric,value`.
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut s = String::from("scenario,case,target,repeat,metric,value\n");
    for x in samples {
        for (k, v) in &x.values {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{}",
                x.scenario, x.case, x.target, x.repeat, k, v
            );
        }
    }
    s
}

/// Medians as CSV rows: `scenario,case,target,metric,median,min,max,n`.
pub fn summary_csv(specs: &[ScenarioSpec], samples: &[Sample]) -> String {
    let mut s = String::from("scenario,case,target,metric,median,min,max,n\n");
    for spec in specs {
        let mine: Vec<&Sample> = samples.iter().filter(|x| x.scenario == spec.id).collect();
        let sum = Summary::of(&mine);
        for ((case, t, m), (med, n, min, max)) in &sum.medians {
            let _ = writeln!(s, "{},{case},{t},{m},{med},{min},{max},{n}", spec.id);
        }
    }
    s
}

/// A results table's header: the case and `second` columns, then one right-aligned column per
/// metric.
fn table_head(md: &mut String, spec: &ScenarioSpec, second: &str) {
    let _ = write!(md, "| {} | {second} |", spec.case_label);
    for m in &spec.metrics {
        let _ = write!(md, " {} |", m.label);
    }
    let _ = write!(md, "\n|---|---|");
    for _ in &spec.metrics {
        let _ = write!(md, "---:|");
    }
    md.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(case: &str, t: TargetKind, r: usize, v: f64) -> Sample {
        Sample {
            scenario: "S1",
            case: case.into(),
            target: t,
            repeat: r,
            values: vec![("x", v)],
        }
    }

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        let s = [
            sample("10", TargetKind::Watchmux, 0, 1.0),
            sample("10", TargetKind::Watchmux, 1, 3.0),
            sample("10", TargetKind::Watchmux, 2, 2.0),
            sample("10", TargetKind::Direct, 0, 8.0),
            sample("10", TargetKind::Direct, 1, 8.0),
        ];
        let refs: Vec<&Sample> = s.iter().collect();
        let sum = Summary::of(&refs);
        assert_eq!(sum.get("10", TargetKind::Watchmux, "x"), Some(2.0));
        assert_eq!(sum.ratio("10", "x", TargetKind::Direct), Some(0.25));
        assert_eq!(sum.ratio("10", "x", TargetKind::Nginx), None);
        let spec = ScenarioSpec {
            id: "S1",
            name: "test",
            about: "about".into(),
            case_label: "watchers",
            metrics: vec![Metric {
                key: "x",
                label: "x (ms)",
                higher_is_better: false,
            }],
            ratio_metrics: vec!["x"],
            scaling_metric: Some("x"),
            variants: None,
            versus: None,
        };
        let md = markdown(&spec, &refs, 3);
        assert!(md.contains("| 10 | watchmux | **2.00** |"), "{md}");
        assert!(md.contains("| 10 | x (ms) | 0.250× |"), "{md}");
        let csv = summary_csv(&[spec], &s);
        assert!(csv.contains("S1,10,watchmux,x,2,1,3,3"), "{csv}");
        assert_eq!(fmt_num(1234567.0), "1,234,567");
        assert_eq!(fmt_num(-1234.0), "-1,234");
    }

    #[test]
    fn transports_are_cases_compared_with_plain_per_target() {
        let at = |case: &str, t: TargetKind, x: f64| Sample {
            scenario: "S9",
            case: case.into(),
            target: t,
            repeat: 0,
            values: vec![("x", x)],
        };
        let s = [
            at("10", TargetKind::Watchmux, 4.0),
            at("10", TargetKind::Limit, 2.0),
            at("10 · TLS", TargetKind::Watchmux, 6.0),
            at("10 · TLS", TargetKind::Limit, 5.0),
            at("10 · h2", TargetKind::Watchmux, 1.0),
            at("50 · h2", TargetKind::Watchmux, 1.0),
        ];
        let refs: Vec<&Sample> = s.iter().collect();
        let spec = ScenarioSpec {
            id: "S9",
            name: "test",
            about: "about".into(),
            case_label: "watches",
            metrics: vec![Metric {
                key: "x",
                label: "x KB",
                higher_is_better: false,
            }],
            ratio_metrics: vec!["x"],
            scaling_metric: None,
            variants: None,
            versus: Some(Versus {
                base: "plain HTTP/1.1",
                variants: vec!["TLS", "h2"],
                metrics: vec!["x"],
            }),
        };
        let md = markdown(&spec, &refs, 1);
        // Every case is a row of the main table, with watchmux ÷ each baseline.
        assert!(md.contains("| 10 · TLS | limit | 5.00 |"), "{md}");
        assert!(md.contains("| 10 · TLS | x KB | 1.20× |"), "{md}");
        // Each transport ÷ plain, per target; no plain case at 50: no row.
        assert!(
            md.contains("| watches | transport | figure | watchmux | limit |"),
            "{md}"
        );
        assert!(md.contains("| 10 | TLS | x KB | 1.50× | 2.50× |"), "{md}");
        assert!(md.contains("| 10 | h2 | x KB | 0.250× | – |"), "{md}");
        assert!(!md.contains("| 50 | h2"), "{md}");
        let n = NotRun {
            scenario: "S9",
            case: "50".into(),
            target: TargetKind::Watchmux,
            reason: "needs 50,000 fds".into(),
        };
        assert_eq!(
            not_run_markdown(&[&n]),
            "\nNot run on this machine:\n\n- 50 · watchmux: needs 50,000 fds\n"
        );
        assert_eq!(not_run_markdown(&[]), "");
    }

    #[test]
    fn variants_are_rows_and_compared_with_the_first() {
        let at = |base: &str, v: &str, r: usize, x: f64| Sample {
            scenario: "S8",
            case: variant_case(base, v),
            target: TargetKind::Watchmux,
            repeat: r,
            values: vec![("x", x)],
        };
        let s = [
            at("10", "JSON", 0, 4.0),
            at("10", "pb", 0, 1.0),
            at("10", "JSON", 1, 6.0),
            at("10", "pb", 1, 2.0),
            at("20", "JSON", 0, 8.0),
        ];
        let refs: Vec<&Sample> = s.iter().collect();
        let spec = ScenarioSpec {
            id: "S8",
            name: "test",
            about: "about".into(),
            case_label: "watchers",
            metrics: vec![Metric {
                key: "x",
                label: "x (B)",
                higher_is_better: false,
            }],
            ratio_metrics: vec![],
            scaling_metric: None,
            variants: Some(Variants {
                label: "encoding",
                names: vec!["JSON", "pb"],
                ratio_metrics: vec!["x"],
            }),
            versus: None,
        };
        let md = markdown(&spec, &refs, 2);
        assert!(md.contains("| watchers | encoding | x (B) |"), "{md}");
        assert!(
            md.contains("| 10 | JSON | 5.00 |\n| 10 | pb | 1.50 |\n| 20 | JSON | 8.00 |"),
            "{md}"
        );
        assert!(md.contains("| 10 | x (B) | 0.300× |"), "{md}");
        assert!(md.contains("| 20 | x (B) | – |"), "{md}");
        assert!(!md.contains("watchmux"), "{md}");
    }
}
