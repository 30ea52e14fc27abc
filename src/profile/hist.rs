//! Log-bucketed time histogram: bounded memory, mergeable across ranks, quantiles to ~2%.
//!
//! 32 buckets per octave from 1 ns: bucket i covers [2^(i/32), 2^((i+1)/32)) ns. Quantiles are
//! read at the geometric middle of their bucket (relative error <= 1.1%); min, max and sum are
//! kept exactly. Buckets are stored densely from the lowest to the highest one used: adding a
//! time is an index into a vector (it runs on every profiled call), and a call site's times
//! span a few octaves (a hundred-odd buckets), at most 48 octaves (12 KiB).

use serde::{Deserialize, Serialize};

const PER_OCTAVE: f64 = 32.0;
const MAX_BUCKET: u32 = 32 * 48; // up to 2^48 ns (~3 days)

/// Histogram of durations in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Bucket of `counts[0]`.
    first: u32,
    /// Counts of buckets `first ..`; the first and last are non-zero (or the vector is empty).
    counts: Vec<u64>,
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
    /// Make buckets `lo ..= hi` addressable.
    fn cover(&mut self, lo: u32, hi: u32) {
        if self.counts.is_empty() {
            self.first = lo;
            self.counts.resize((hi - lo + 1) as usize, 0);
            return;
        }
        if lo < self.first {
            let grow = (self.first - lo) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.first = lo;
        }
        let need = (hi - self.first + 1) as usize;
        if need > self.counts.len() {
            self.counts.resize(need, 0);
        }
    }

    /// Count of bucket `b` (mutable), which must be covered.
    fn slot(&mut self, b: u32) -> &mut u64 {
        &mut self.counts[(b - self.first) as usize]
    }

    pub fn add(&mut self, t_s: f64) {
        if !t_s.is_finite() || t_s < 0.0 {
            return;
        }
        let b = bucket_of(t_s);
        let covered = !self.counts.is_empty() && b >= self.first && ((b - self.first) as usize) < self.counts.len();
        if !covered {
            self.cover(b, b);
        }
        *self.slot(b) += 1;
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
        if let Some(n) = (other.counts.len() as u32).checked_sub(1) {
            self.cover(other.first, other.first + n);
            for (i, &c) in other.counts.iter().enumerate() {
                *self.slot(other.first + i as u32) += c;
            }
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

    /// Non-empty buckets as (bucket, count), in order.
    fn buckets(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (self.first + i as u32, c))
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
        for (b, c) in self.buckets() {
            seen += c;
            if seen >= target {
                return bucket_mid_s(b).clamp(self.min_s, self.max_s);
            }
        }
        self.max_s
    }

    /// Non-empty buckets as (lower edge s, upper edge s, count).
    pub fn bins(&self) -> Vec<(f64, f64, u64)> {
        self.buckets()
            .map(|(b, c)| {
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
        assert_eq!(
            (a.first, &a.counts),
            (all.first, &all.counts),
            "same buckets, same storage"
        );
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

    #[test]
    fn storage_grows_both_ways() {
        let mut h = Histogram::default();
        for t in [1e-5, 1e-7, 1e-3, 1e-5] {
            h.add(t);
        }
        let bins = h.bins();
        assert_eq!(bins.iter().map(|b| b.2).collect::<Vec<_>>(), [1, 2, 1]);
        assert!(bins[0].0 <= 1e-7 && 1e-7 < bins[0].1 && bins[2].0 <= 1e-3 && 1e-3 < bins[2].1);
        assert_eq!(h.counts.first(), Some(&1));
        assert_eq!(h.counts.last(), Some(&1));
        let q = h.quantile(0.5);
        assert!((q / 1e-5 - 1.0).abs() < 0.02, "{q}");
        let mut e = Histogram::default();
        e.merge(&Histogram::default());
        assert_eq!(e, Histogram::default());
        e.merge(&h);
        assert_eq!(e.bins(), bins);
    }
}
