//! Accounting of probing, shared by every `Prober` implementation so reports compare like with like.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// What probing has cost so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeStats {
    /// Number of hosts probed over.
    pub hosts: usize,
    /// Ping rounds run.
    pub ping_rounds: u64,
    /// Pair measurements made (a pair measured twice counts twice).
    pub ping_measurements: u64,
    /// Distinct unordered host pairs measured at least once.
    pub distinct_pairs: u64,
    /// Bandwidth rounds run.
    pub bandwidth_rounds: u64,
    /// Bandwidth transfers made.
    pub bandwidth_measurements: u64,
    /// Time spent measuring (the slowest pair of each round), seconds.
    pub measure_time_s: f64,
    /// Time spent coordinating rounds (pair-list broadcast + result gather), seconds.
    pub coordination_time_s: f64,
    /// Of the above, the part spent in bandwidth rounds (measurement + coordination), seconds.
    pub bandwidth_time_s: f64,
}

impl ProbeStats {
    /// Total probing time (measurement + coordination), seconds.
    pub fn time_s(&self) -> f64 {
        self.measure_time_s + self.coordination_time_s
    }
    /// Time of ping rounds only (what topology inference itself costs), seconds.
    pub fn ping_time_s(&self) -> f64 {
        self.time_s() - self.bandwidth_time_s
    }
    /// Fraction of the `hosts * (hosts - 1) / 2` pairs measured at least once (0 for < 2 hosts).
    pub fn pairs_measured_fraction(&self) -> f64 {
        let n = self.hosts as f64;
        if self.hosts < 2 {
            0.0
        } else {
            self.distinct_pairs as f64 / (n * (n - 1.0) / 2.0)
        }
    }
}

/// Records rounds into [`ProbeStats`] and remembers which pairs were measured.
#[derive(Clone, Debug, Default)]
pub struct ProbeLedger {
    stats: ProbeStats,
    seen: HashSet<(usize, usize)>,
}

impl ProbeLedger {
    pub fn new(hosts: usize) -> Self {
        ProbeLedger {
            stats: ProbeStats {
                hosts,
                ..ProbeStats::default()
            },
            seen: HashSet::new(),
        }
    }

    /// Record a ping round: its pairs, the time of its slowest pair and its coordination time.
    pub fn ping_round(&mut self, pairs: &[(usize, usize)], measure_s: f64, coordination_s: f64) {
        self.stats.ping_rounds += 1;
        self.stats.ping_measurements += pairs.len() as u64;
        for &(a, b) in pairs {
            if self.seen.insert((a.min(b), a.max(b))) {
                self.stats.distinct_pairs += 1;
            }
        }
        self.stats.measure_time_s += measure_s;
        self.stats.coordination_time_s += coordination_s;
    }

    /// Record a bandwidth round.
    pub fn bandwidth_round(&mut self, pairs: usize, measure_s: f64, coordination_s: f64) {
        self.stats.bandwidth_rounds += 1;
        self.stats.bandwidth_measurements += pairs as u64;
        self.stats.measure_time_s += measure_s;
        self.stats.coordination_time_s += coordination_s;
        self.stats.bandwidth_time_s += measure_s + coordination_s;
    }

    /// Count what a far-apart part's own prober measured ([`super::Prober::run_parts`]): its
    /// rounds and measurements, and its pairs (`seen`) among the distinct pairs. Its time is
    /// not added: parts that run side by side cost only the slowest one ([`Self::add_time`]).
    pub fn absorb(&mut self, part: &ProbeStats, seen: &[(usize, usize)]) {
        self.stats.ping_rounds += part.ping_rounds;
        self.stats.ping_measurements += part.ping_measurements;
        self.stats.bandwidth_rounds += part.bandwidth_rounds;
        self.stats.bandwidth_measurements += part.bandwidth_measurements;
        self.stats.bandwidth_time_s += part.bandwidth_time_s;
        for &(a, b) in seen {
            if self.seen.insert((a.min(b), a.max(b))) {
                self.stats.distinct_pairs += 1;
            }
        }
    }

    /// Add time spent measuring and coordinating outside this ledger's own rounds.
    pub fn add_time(&mut self, measure_s: f64, coordination_s: f64) {
        self.stats.measure_time_s += measure_s;
        self.stats.coordination_time_s += coordination_s;
    }

    /// The distinct pairs measured so far (unordered, smaller host first), sorted.
    pub fn seen_pairs(&self) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = self.seen.iter().copied().collect();
        v.sort_unstable();
        v
    }

    /// Was the unordered pair measured (by ping) before?
    pub fn measured(&self, a: usize, b: usize) -> bool {
        self.seen.contains(&(a.min(b), a.max(b)))
    }

    pub fn stats(&self) -> &ProbeStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_distinct_pairs_and_time() {
        let mut l = ProbeLedger::new(4);
        l.ping_round(&[(0, 1), (2, 3)], 1e-3, 2e-4);
        l.ping_round(&[(1, 0), (2, 1)], 2e-3, 2e-4);
        l.bandwidth_round(2, 5e-3, 1e-4);
        let s = l.stats();
        assert_eq!((s.ping_rounds, s.ping_measurements, s.distinct_pairs), (2, 4, 3));
        assert!((s.pairs_measured_fraction() - 0.5).abs() < 1e-12); // 3 of 6
        assert!((s.time_s() - (1e-3 + 2e-3 + 5e-3 + 5e-4)).abs() < 1e-12);
        assert!((s.ping_time_s() - (3e-3 + 4e-4)).abs() < 1e-12);
        assert!(l.measured(3, 2) && !l.measured(0, 3));
    }

    #[test]
    fn parts_add_their_counts_and_pairs_but_not_their_time() {
        let mut l = ProbeLedger::new(4);
        l.ping_round(&[(0, 1)], 1e-3, 1e-4);
        let mut part = ProbeLedger::new(4);
        part.ping_round(&[(1, 0), (2, 3)], 2e-3, 3e-4);
        l.absorb(part.stats(), &part.seen_pairs());
        let s = l.stats().clone();
        assert_eq!((s.ping_rounds, s.ping_measurements, s.distinct_pairs), (2, 3, 2));
        assert!((s.time_s() - 1.1e-3).abs() < 1e-15, "time is the caller's to add");
        l.add_time(2e-3, 5e-4);
        assert!((l.stats().measure_time_s - 3e-3).abs() < 1e-15);
        assert!((l.stats().coordination_time_s - 6e-4).abs() < 1e-15);
        assert_eq!(part.seen_pairs(), vec![(0, 1), (2, 3)]);
    }
}
