//! How the clients' connections spread over the replicas over time: every second, each
//! replica's open connections as HAProxy counts them (its stats socket's `scur`; watchmux has no
//! open-connections gauge of its own), and what a window of those samples says: the spread at
//! its end (max ÷ min) and how long after its start the spread came within a bound and stayed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::haproxy::Haproxy;

/// One sample: when (since the sampler started) and each replica's connections.
pub type Point = (Duration, Vec<u64>);

/// The sampler, running until stopped.
pub struct Spread {
    points: Arc<Mutex<Vec<Point>>>,
    started: Instant,
    stop: CancellationToken,
}

impl Spread {
    /// Samples `h`'s stats every second from now on.
    pub fn start(h: Arc<Haproxy>) -> Spread {
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
                if let Ok(stats) = h.stats().await {
                    let at = started.elapsed();
                    p.lock()
                        .push((at, stats.iter().map(|x| x.current).collect()));
                }
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
            .filter(|(at, _)| *at >= from)
            .map(|(at, c)| (*at - from, c.clone()))
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

/// The time from the window's start after which every sample's ratio was at most `bound`
/// (`None`: the last one was not).
pub fn settled_after(points: &[Point], bound: f64) -> Option<Duration> {
    // NaN (no connections at all) is not within the bound either.
    let within = |c: &[u64]| ratio(c).partial_cmp(&bound).is_some_and(|o| o.is_le());
    let last_over = points.iter().rposition(|(_, c)| !within(c));
    match last_over {
        None => points.first().map(|_| Duration::ZERO),
        Some(i) => points.get(i + 1).map(|(at, _)| *at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_when_they_settle() {
        assert_eq!(ratio(&[10, 5, 8]), 2.0);
        assert!(ratio(&[3, 0, 1]).is_infinite());
        assert!(ratio(&[0, 0]).is_nan() && ratio(&[]).is_nan());
        let s = |secs: u64, c: &[u64]| (Duration::from_secs(secs), c.to_vec());
        let points = vec![
            s(0, &[10, 10, 0]),
            s(1, &[9, 8, 3]),
            s(2, &[8, 7, 6]),
            s(3, &[7, 7, 6]),
        ];
        assert_eq!(settled_after(&points, 1.5), Some(Duration::from_secs(2)));
        assert_eq!(settled_after(&points[..2], 1.5), None);
        assert_eq!(settled_after(&points[3..], 1.5), Some(Duration::ZERO));
        assert_eq!(settled_after(&[], 1.5), None);
    }
}
