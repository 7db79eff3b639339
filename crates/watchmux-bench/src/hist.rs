//! A lock-free latency histogram: log-linear buckets (32 per power of two, so a recorded value
//! is off by at most ~3 %) of atomic counters that every client task updates in place. Ten
//! thousand watchers must not each carry their own histogram, and a mutex would serialise them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Values up to 2^40 µs (about 12 days) are kept apart; larger ones land in the last bucket.
const MAX_EXP: u32 = 40;
const BUCKETS: usize = ((MAX_EXP - SUB_BITS + 2) as usize) * SUB as usize;

/// Histogram of microsecond values.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    max: AtomicU64,
    sum: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            max: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    if exp > MAX_EXP {
        return BUCKETS - 1;
    }
    let shift = exp - SUB_BITS;
    let mantissa = (v >> shift) & (SUB - 1);
    ((shift + 1) as usize) * SUB as usize + mantissa as usize
}

/// The smallest value that lands in bucket `i`.
fn lower_bound(i: usize) -> u64 {
    let (group, mantissa) = (i as u64 / SUB, i as u64 % SUB);
    if group == 0 {
        return mantissa;
    }
    let shift = group - 1;
    (SUB | mantissa) << shift
}

impl Histogram {
    /// Records one value (µs).
    pub fn record(&self, us: u64) {
        self.buckets[index(us)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(us, Ordering::Relaxed);
        self.max.fetch_max(us, Ordering::Relaxed);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Largest value recorded (exact).
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Mean of the values recorded (exact), 0 when empty.
    pub fn mean(&self) -> f64 {
        self.sum.load(Ordering::Relaxed) as f64 / self.count().max(1) as f64
    }

    /// The value below which a fraction `q` (0..=1) of the recorded values lie: the middle of the
    /// bucket holding that rank, capped by the exact maximum. 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        if rank >= n {
            return self.max();
        }
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                let lo = lower_bound(i);
                let hi = if i + 1 < BUCKETS {
                    lower_bound(i + 1)
                } else {
                    lo
                };
                return (lo + (hi.saturating_sub(lo)) / 2).min(self.max());
            }
        }
        self.max()
    }

    /// Forgets everything recorded.
    pub fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.count.store(0, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
        self.sum.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_cover_their_values() {
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, 1 << 39, u64::MAX / 2]) {
            let i = index(v);
            assert!(lower_bound(i) <= v, "v={v} i={i}");
            if i + 1 < BUCKETS && v < 1 << MAX_EXP {
                assert!(v < lower_bound(i + 1), "v={v} i={i}");
            }
        }
        for i in 1..BUCKETS {
            assert!(lower_bound(i) > lower_bound(i - 1));
        }
    }

    #[test]
    fn quantiles_within_three_percent() {
        let h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, want) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.01, 1_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - want).abs() / want < 0.03, "q={q} got={got}");
        }
        assert_eq!(h.max(), 100_000);
        assert_eq!(h.quantile(1.0), 100_000);
        assert!((h.mean() - 50_000.5).abs() < 1e-6);
        h.reset();
        assert_eq!((h.count(), h.quantile(0.5)), (0, 0));
    }
}
