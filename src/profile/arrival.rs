//! Arrival skew against transfer time, per call site.
//!
//! A broadcast that takes long on some rank may be slow, or that rank may have waited for
//! others to arrive: mpiP-style per-rank times cannot tell the two apart, and they call for
//! different fixes (a faster plan, or less load imbalance before the call). Every rank times
//! the same calls of a site (the common samples of [`super::tally`]: a fixed subset of sequence
//! numbers, each cell's first call, and every forced call); with the clock offsets measured at
//! gather time their entries and completions share one time base, so for each such call:
//! - **arrival skew**: the last rank's entry minus the first rank's entry;
//! - **transfer**: the last completion minus the last entry (the broadcast itself, once
//!   everybody is there; 0 when some rank was done before the last one arrived).
//!
//! Pure arithmetic on gathered records, so it is tested without MPI.

use super::report::ArrivalReport;
use super::LastCall;

/// One rank's calls every rank timed, with the map of its clock to rank 0's.
pub struct RankCalls<'a> {
    pub rank: u32,
    /// The rank's kernel (boot id; 0 unknown), which tells its CPU numbers from another
    /// host's.
    pub kernel: u64,
    pub clock: super::offset::ClockMap,
    pub calls: &'a [LastCall],
}

/// One call as every rank saw it, on rank 0's clock: `(rank, enter, done)` sorted by rank.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignedCall {
    pub seq: u64,
    pub root: u32,
    pub bytes: u64,
    pub by_mpi: bool,
    pub ranks: Vec<(u32, f64, f64)>,
    /// Each rank's (kernel, CPU) at the end of the call, in the order of `ranks`, where read
    /// (`super::placement`); empty where not gathered.
    pub cpus: Vec<Option<(u64, u32)>>,
}

impl AlignedCall {
    /// Every rank of a communicator of `size` timed the call, listed in rank order: what a
    /// prediction from the call's entries (one per rank) needs.
    pub(crate) fn has_every_rank(&self, size: u32) -> bool {
        self.ranks.len() == size as usize && self.ranks.iter().enumerate().all(|(i, r)| r.0 == i as u32)
    }

    pub(crate) fn first_enter(&self) -> f64 {
        self.ranks.iter().map(|r| r.1).fold(f64::INFINITY, f64::min)
    }

    fn last_enter(&self) -> (u32, f64) {
        self.ranks
            .iter()
            .map(|r| (r.0, r.1))
            .fold((0, f64::NEG_INFINITY), |a, b| if b.1 > a.1 { b } else { a })
    }

    pub(crate) fn last_done(&self) -> f64 {
        self.ranks.iter().map(|r| r.2).fold(f64::NEG_INFINITY, f64::max)
    }

    /// First entry to last completion.
    pub fn span_s(&self) -> f64 {
        self.last_done() - self.first_enter()
    }

    fn skew_s(&self) -> f64 {
        self.last_enter().1 - self.first_enter()
    }

    fn transfer_s(&self) -> f64 {
        (self.last_done() - self.last_enter().1).max(0.0)
    }
}

/// The calls that every rank in `ranks` recorded (by sequence number), aligned on rank 0's
/// clock, oldest first.
pub fn align(ranks: &[RankCalls<'_>]) -> Vec<AlignedCall> {
    let Some(first) = ranks.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in first.calls {
        let mut parts = Vec::with_capacity(ranks.len());
        for r in ranks {
            let Some(l) = r.calls.iter().find(|l| l.seq == c.seq) else {
                break;
            };
            let cpu = l.cpu.filter(|_| r.kernel != 0).map(|cpu| (r.kernel, cpu));
            parts.push(((r.rank, r.clock.to_rank0(l.enter_s), r.clock.to_rank0(l.done_s)), cpu));
        }
        if parts.len() == ranks.len() && parts.iter().all(|p| p.0 .1.is_finite() && p.0 .2.is_finite()) {
            parts.sort_by_key(|p| p.0 .0);
            out.push(AlignedCall {
                seq: c.seq,
                root: c.root,
                bytes: c.bytes,
                by_mpi: c.by_mpi,
                ranks: parts.iter().map(|p| p.0).collect(),
                cpus: parts.iter().map(|p| p.1).collect(),
            });
        }
    }
    out.sort_by_key(|c| c.seq);
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// Skew and transfer over the aligned calls of a site, with the rank that arrives last most
/// often and what would help; `None` without a call every rank timed or with a single rank.
pub fn analyse(calls: &[AlignedCall]) -> Option<ArrivalReport> {
    if calls.is_empty() || calls[0].ranks.len() < 2 {
        return None;
    }
    let skew = median(calls.iter().map(AlignedCall::skew_s).collect());
    let transfer = median(calls.iter().map(AlignedCall::transfer_s).collect());
    let mut last: std::collections::BTreeMap<u32, u64> = Default::default();
    for c in calls {
        *last.entry(c.last_enter().0).or_insert(0) += 1;
    }
    let (&last_rank, &times) = last.iter().max_by_key(|(r, n)| (**n, std::cmp::Reverse(**r)))?;
    let share = times as f64 / calls.len() as f64;
    let us = |s: f64| s * 1e6;
    let verdict = if skew > transfer {
        format!(
            "load imbalance before the call: the last rank enters {:.1} us after the first (rank {last_rank} in {:.0}% of calls), \
             the broadcast then takes {:.1} us; a faster broadcast would save at most that",
            us(skew),
            100.0 * share,
            us(transfer)
        )
    } else {
        format!(
            "the transfer dominates: {:.1} us after the last rank enters, against {:.1} us of arrival skew; a faster plan helps",
            us(transfer),
            us(skew)
        )
    };
    Some(ArrivalReport {
        calls: calls.len() as u64,
        skew_median_s: skew,
        transfer_median_s: transfer,
        last_rank,
        last_rank_share: share,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(seq: u64, enter_s: f64, done_s: f64) -> LastCall {
        LastCall {
            seq,
            root: 0,
            bytes: 1024,
            enter_s,
            done_s,
            by_mpi: false,
            cpu: None,
        }
    }

    #[test]
    fn calls_every_rank_timed_are_aligned_on_one_clock() {
        // Rank 1's clock is 1 s behind rank 0's; it did not record call 7.
        let r0 = [call(3, 10.0, 10.001), call(7, 11.0, 11.001), call(9, 12.0, 12.001)];
        let r1 = [call(3, 9.0005, 9.002), call(9, 11.0, 11.0015)];
        let a = align(&[
            RankCalls {
                rank: 0,
                kernel: 1,
                clock: crate::profile::offset::ClockMap::constant(0.0),
                calls: &r0,
            },
            RankCalls {
                rank: 1,
                kernel: 1,
                clock: crate::profile::offset::ClockMap::constant(1.0),
                calls: &r1,
            },
        ]);
        assert_eq!(a.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![3, 9]);
        let c = &a[0];
        assert!((c.skew_s() - 0.0005).abs() < 1e-9, "{c:?}");
        assert!((c.transfer_s() - 0.0015).abs() < 1e-9, "{c:?}");
        assert!((c.span_s() - 0.002).abs() < 1e-9);
    }

    #[test]
    fn a_late_rank_is_named_and_imbalance_is_told_from_transfer() {
        // Rank 2 enters 3 ms late in 4 calls of 5; the broadcast takes 20 us once all are in.
        let calls: Vec<AlignedCall> = (0..5u64)
            .map(|i| {
                let late = if i < 4 { 3e-3 } else { 0.0 };
                let t0 = i as f64;
                AlignedCall {
                    seq: i,
                    root: 0,
                    bytes: 1024,
                    by_mpi: false,
                    ranks: vec![
                        (0, t0, t0 + late + 20e-6),
                        (1, t0 + 1e-6, t0 + late + 20e-6),
                        (2, t0 + late, t0 + late + 20e-6),
                    ],
                    cpus: vec![],
                }
            })
            .collect();
        let r = analyse(&calls).unwrap();
        assert_eq!((r.calls, r.last_rank), (5, 2));
        assert!((r.last_rank_share - 0.8).abs() < 1e-12);
        assert!((r.skew_median_s - 3e-3).abs() < 1e-9, "{r:?}");
        assert!((r.transfer_median_s - 20e-6).abs() < 1e-9, "{r:?}");
        assert!(r.verdict.starts_with("load imbalance"), "{}", r.verdict);
        // Everybody on time, a slow transfer: the plan is what to improve.
        let slow: Vec<AlignedCall> = (0..3u64)
            .map(|i| AlignedCall {
                seq: i,
                root: 0,
                bytes: 1 << 20,
                by_mpi: false,
                ranks: vec![(0, 0.0, 1e-3), (1, 2e-6, 2e-3)],
                cpus: vec![],
            })
            .collect();
        let r = analyse(&slow).unwrap();
        assert!(r.verdict.starts_with("the transfer dominates"), "{}", r.verdict);
        assert!(analyse(&[]).is_none());
    }
}
