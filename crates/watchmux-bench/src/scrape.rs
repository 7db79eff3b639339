//! watchmux's Prometheus `/metrics`, read by a scenario before and after a case: the counters
//! that say how watchmux served it (how its freshness checks ended, which reads went to the
//! upstream), which no client-side figure shows.
//!
//! Parses the text exposition format's sample lines (`name{label="value",…} number`) and
//! fetches the page with one GET; it must not decide what a figure means (the scenarios do).

use std::net::SocketAddr;

use super::BenchError;
use super::client;

/// One sample line: metric name, labels, value.
type Line = (String, Vec<(String, String)>, f64);

/// The samples of one `/metrics` page.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    samples: Vec<Line>,
}

impl Metrics {
    /// Parses the text format; comment lines and lines that do not parse are skipped.
    pub fn parse(text: &str) -> Metrics {
        Metrics {
            samples: text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(parse_line)
                .collect(),
        }
    }

    /// The value of label `key` among `labels` (`""` when absent).
    pub fn label<'a>(labels: &'a [(String, String)], key: &str) -> &'a str {
        labels
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Every sample of `name`: its labels and value, in page order.
    pub fn series(&self, name: &str) -> Vec<(&[(String, String)], f64)> {
        self.samples
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, ls, v)| (ls.as_slice(), *v))
            .collect()
    }

    /// The sum of every sample of `name` whose labels include all of `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(n, ls, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, v)| v)
            .sum()
    }
}

/// A counter's growth per combination of label values (joined by `/`).
pub type Growth = std::collections::BTreeMap<String, f64>;

/// How much counter `name` grew from `before` (nothing: from zero) to `after`, per combination
/// of the labels `keys`, for the series `keep` accepts.
pub fn growth(
    after: &Metrics,
    before: Option<&Metrics>,
    name: &str,
    keys: &[&str],
    keep: impl Fn(&[(String, String)]) -> bool,
) -> Growth {
    let mut by = Growth::new();
    let mut add = |m: &Metrics, sign: f64| {
        for (labels, v) in m.series(name) {
            if !keep(labels) {
                continue;
            }
            let key = keys
                .iter()
                .map(|k| Metrics::label(labels, k))
                .collect::<Vec<_>>()
                .join("/");
            *by.entry(key).or_default() += sign * v;
        }
    };
    add(after, 1.0);
    if let Some(b) = before {
        add(b, -1.0);
    }
    by
}

/// Adds `more` into `total`, key by key.
pub fn add_growth(total: &mut Growth, more: &Growth) {
    for (k, v) in more {
        *total.entry(k.clone()).or_default() += v;
    }
}

/// `key=value, …` of what grew; `none` when nothing did.
pub fn show_growth(g: &Growth) -> String {
    let parts: Vec<String> = g
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// `name{k="v",…} value [timestamp]` or `name value`.
fn parse_line(line: &str) -> Option<Line> {
    let line = line.trim();
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices();
        let mut key = String::new();
        let close = loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => break i,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        };
        rest = &body[close + 1..];
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

/// GETs `/metrics` from watchmux at `addr`.
pub async fn scrape(addr: SocketAddr) -> Result<Metrics, BenchError> {
    scrape_at(&client::Endpoint::plain(addr)).await
}

/// GETs `/metrics` from watchmux at `ep` (over TLS when it says so).
pub async fn scrape_at(ep: &client::Endpoint) -> Result<Metrics, BenchError> {
    let (status, body) = client::get_body_at(ep, "/metrics")
        .await
        .map_err(|e| BenchError::io("reading watchmux's /metrics", e))?;
    if status != 200 {
        return Err(BenchError::Run(format!("/metrics answered {status}")));
    }
    Ok(Metrics::parse(&String::from_utf8_lossy(&body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_samples_by_name_and_labels() {
        let m = Metrics::parse(
            "# HELP watchmux_freshness_checks_total Freshness checks.\n\
             # TYPE watchmux_freshness_checks_total counter\n\
             watchmux_freshness_checks_total{resource=\"pods\",outcome=\"ahead\"} 3\n\
             watchmux_freshness_checks_total{outcome=\"event\",resource=\"pods\"} 2\n\
             watchmux_freshness_checks_total{resource=\"namespaces\",outcome=\"bookmark\"} 5\n\
             watchmux_reads_total{resource=\"pods\",verb=\"list\",source=\"pass_through\",reason=\"a \\\"b\\\"\"} 1\n\
             watchmux_up 1\n\
             garbage{\n",
        );
        let checks = "watchmux_freshness_checks_total";
        assert_eq!(m.sum(checks, &[("resource", "pods")]), 5.0);
        assert_eq!(
            m.sum(checks, &[("resource", "pods"), ("outcome", "event")]),
            2.0
        );
        assert_eq!(m.sum(checks, &[]), 10.0);
        assert_eq!(m.sum(checks, &[("resource", "nodes")]), 0.0);
        assert_eq!(m.sum("watchmux_reads_total", &[("reason", "a \"b\"")]), 1.0);
        assert_eq!(m.sum("watchmux_up", &[]), 1.0);
        let s = m.series(checks);
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].0[1], ("resource".to_string(), "pods".to_string()));
        assert_eq!(s[1].1, 2.0);
    }
}
