//! How the clients spread over the replicas over time: every second, each replica's open
//! connections as HAProxy counts them (its stats socket's `scur`; watchmux has no
//! open-connections gauge of its own) and the watches it serves (its `watchmux_watchers`), and
//! what a window of those samples says: the spread at its end (max ÷ min) and how long after
//! its start the spread came within a bound and stayed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::haproxy::Haproxy;
use crate::scrape;

/// One sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Point {
    /// When (since the sampler started, or since a window's start).
    pub at: Duration,
    /// Each replica's open connections (HAProxy's `scur`).
    pub conns: Vec<u64>,
    /// Each replica's open watches (`watchmux_watchers`; 0 while it does not answer).
    pub watches: Vec<u64>,
}

/// The sampler, running until stopped.
pub struct Spread {
    points: Arc<Mutex<Vec<Point>>>,
    started: Instant,
    stop: CancellationToken,
}

impl Spread {
    /// Samples `h`'s stats and the replicas' (at `replicas`) watchers every second from now on.
    pub fn start(h: Arc<Haproxy>, replicas: Vec<SocketAddr>) -> Spread {
        let points = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let started = Instant::now();
        let (p, s) = (points.clone(), stop.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = s.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let Ok(stats) = h.stats().await else { continue };
                let at = started.elapsed();
                let mut watches = Vec::with_capacity(replicas.len());
                for a in &replicas {
                    let m = scrape::scrape(*a).await.ok();
                    watches.push(m.map_or(0, |m| m.sum("watchmux_watchers", &[]) as u64));
                }
                p.lock().push(Point {
                    at,
                    conns: stats.iter().map(|x| x.current).collect(),
                    watches,
                });
            }
        });
        Spread {
            points,
            started,
            stop,
        }
    }

    /// The samples taken since `t`, their times counted from `t`.
    pub fn since(&self, t: Instant) -> Vec<Point> {
        let from = t.saturating_duration_since(self.started);
        self.points
            .lock()
            .iter()
            .filter(|p| p.at >= from)
            .map(|p| Point {
                at: p.at - from,
                ..p.clone()
            })
            .collect()
    }

    /// Stops sampling.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Spread {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The busiest replica's connections ÷ the idlest's: infinite when one has none while another
/// has some, NaN without connections.
pub fn ratio(counts: &[u64]) -> f64 {
    let (Some(&max), Some(&min)) = (counts.iter().max(), counts.iter().min()) else {
        return f64::NAN;
    };
    match (max, min) {
        (0, _) => f64::NAN,
        (_, 0) => f64::INFINITY,
        _ => max as f64 / min as f64,
    }
}

/// The time from the window's start after which every sample's ratio (of what `of` picks:
/// connections or watches) was at most `bound` (`None`: the last one's was not).
pub fn settled_after(
    points: &[Point],
    of: impl Fn(&Point) -> &[u64],
    bound: f64,
) -> Option<Duration> {
    // NaN (none at all) is not within the bound either.
    let within = |c: &[u64]| ratio(c).partial_cmp(&bound).is_some_and(|o| o.is_le());
    let last_over = points.iter().rposition(|p| !within(of(p)));
    match last_over {
        None => points.first().map(|_| Duration::ZERO),
        Some(i) => points.get(i + 1).map(|p| p.at),
    }
}

/// A point's connections.
pub fn conns(p: &Point) -> &[u64] {
    &p.conns
}

/// A point's watches.
pub fn watches(p: &Point) -> &[u64] {
    &p.watches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_when_they_settle() {
        assert_eq!(ratio(&[10, 5, 8]), 2.0);
        assert!(ratio(&[3, 0, 1]).is_infinite());
        assert!(ratio(&[0, 0]).is_nan() && ratio(&[]).is_nan());
        let s = |secs: u64, c: &[u64]| Point {
            at: Duration::from_secs(secs),
            conns: c.to_vec(),
            watches: c.iter().map(|x| x * 10).collect(),
        };
        let points = vec![
            s(0, &[10, 10, 0]),
            s(1, &[9, 8, 3]),
            s(2, &[8, 7, 6]),
            s(3, &[7, 7, 6]),
        ];
        assert_eq!(
            settled_after(&points, conns, 1.5),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            settled_after(&points, watches, 1.5),
            Some(Duration::from_secs(2))
        );
        assert_eq!(settled_after(&points[..2], conns, 1.5), None);
        assert_eq!(
            settled_after(&points[3..], conns, 1.5),
            Some(Duration::ZERO)
        );
        assert_eq!(settled_after(&[], conns, 1.5), None);
    }
}
