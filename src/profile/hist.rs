//! Log-bucketed time histogram: bounded memory, mergeable across ranks, quantiles to ~2%.
//!
//! 32 buckets per octave from 1 ns: bucket i covers [2^(i/32), 2^((i+1)/32)) ns. Quantiles are
//! read at the geometric middle of their bucket (relative error <= 1.1%); min, max and sum are
//! kept exactly. Stored sparsely because a call site's times span a few octaves at most.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const PER_OCTAVE: f64 = 32.0;
const MAX_BUCKET: u32 = 32 * 48; // up to 2^48 ns (~3 days)

/// Histogram of durations in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    buckets: BTreeMap<u32, u64>,
    count: u64,
    sum_s: f64,
    min_s: f64,
    max_s: f64,
}

fn bucket_of(t_s: f64) -> u32 {
    let ns = (t_s * 1e9).max(1.0);
    ((ns.log2() * PER_OCTAVE) as u32).min(MAX_BUCKET)
}

fn bucket_mid_s(b: u32) -> f64 {
    2f64.powf((b as f64 + 0.5) / PER_OCTAVE) * 1e-9
}

/// Lower and upper edge of bucket `b` in seconds.
pub fn bucket_edges_s(b: u32) -> (f64, f64) {
    (
        2f64.powf(b as f64 / PER_OCTAVE) * 1e-9,
        2f64.powf((b + 1) as f64 / PER_OCTAVE) * 1e-9,
    )
}

impl Histogram {
    pub fn add(&mut self, t_s: f64) {
        if !t_s.is_finite() || t_s < 0.0 {
            return;
        }
        *self.buckets.entry(bucket_of(t_s)).or_insert(0) += 1;
        if self.count == 0 || t_s < self.min_s {
            self.min_s = t_s;
        }
        if self.count == 0 || t_s > self.max_s {
            self.max_s = t_s;
        }
        self.count += 1;
        self.sum_s += t_s;
    }

    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        for (&b, &c) in &other.buckets {
            *self.buckets.entry(b).or_insert(0) += c;
        }
        if self.count == 0 || other.min_s < self.min_s {
            self.min_s = other.min_s;
        }
        if self.count == 0 || other.max_s > self.max_s {
            self.max_s = other.max_s;
        }
        self.count += other.count;
        self.sum_s += other.sum_s;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn min(&self) -> f64 {
        self.min_s
    }
    pub fn max(&self) -> f64 {
        self.max_s
    }
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.sum_s / self.count as f64
        }
    }

    /// The q-quantile (0..=1), clamped to the exact min and max.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return f64::NAN;
        }
        let target = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        if target >= self.count {
            return self.max_s;
        }
        if target == 1 {
            return self.min_s;
        }
        let mut seen = 0;
        for (&b, &c) in &self.buckets {
            seen += c;
            if seen >= target {
                return bucket_mid_s(b).clamp(self.min_s, self.max_s);
            }
        }
        self.max_s
    }

    /// Non-empty buckets as (lower edge s, upper edge s, count).
    pub fn bins(&self) -> Vec<(f64, f64, u64)> {
        self.buckets
            .iter()
            .map(|(&b, &c)| {
                let (lo, hi) = bucket_edges_s(b);
                (lo, hi, c)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_bucket_resolution() {
        let mut h = Histogram::default();
        // 1..=1000 microseconds.
        for i in 1..=1000 {
            h.add(i as f64 * 1e-6);
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.min(), 1e-6);
        assert_eq!(h.max(), 1e-3);
        assert!((h.mean() - 500.5e-6).abs() < 1e-12);
        let med = h.quantile(0.5);
        assert!((med / 500e-6 - 1.0).abs() < 0.025, "{med}");
        let p99 = h.quantile(0.99);
        assert!((p99 / 990e-6 - 1.0).abs() < 0.025, "{p99}");
        assert_eq!(h.quantile(1.0), 1e-3);
    }

    #[test]
    fn merge_equals_adding_everything() {
        let (mut a, mut b, mut all) = (Histogram::default(), Histogram::default(), Histogram::default());
        for i in 0..500 {
            let t = 1e-6 * (1.0 + i as f64 * 0.37);
            if i % 3 == 0 {
                a.add(t)
            } else {
                b.add(t)
            }
            all.add(t);
        }
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        assert_eq!(a.bins(), all.bins());
        assert_eq!(a.min(), all.min());
        assert_eq!(a.max(), all.max());
        assert!((a.mean() - all.mean()).abs() < 1e-15);
        // Garbage is ignored.
        a.add(f64::NAN);
        a.add(-1.0);
        assert_eq!(a.count(), all.count());
    }
}
