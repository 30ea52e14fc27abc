//! Every rank's times in one broadcast, as the calibrated models give them (shared by the
//! evaluators of `calibrate` and `send_curve`).

use super::plan_dag::PlanDag;
use super::EstimateError;

/// A plan's times in a calibrated model (seconds from the root's entry, or from the entry
/// times' origin when they are given).
#[derive(Clone, Debug, PartialEq)]
pub struct CalibratedTimes {
    /// Time the last rank leaves the call.
    pub completion_s: f64,
    /// Per rank: time it holds the whole message (0 for the root).
    pub rank_arrival_s: Vec<f64>,
    /// Per rank: time it leaves the call (its data arrived and its sends are done).
    pub rank_done_s: Vec<f64>,
    /// Median over ranks of `rank_done_s` (the mean of the middle two for an even count): what
    /// the median of per-rank call durations measures when the ranks enter together.
    pub rank_median_s: f64,
}

impl CalibratedTimes {
    /// From each rank's arrival (when it holds the whole message) and departure (arrival and
    /// its sends done; raised to the arrival here).
    pub fn new(rank_arrival_s: Vec<f64>, mut rank_done_s: Vec<f64>) -> CalibratedTimes {
        for (r, a) in rank_done_s.iter_mut().zip(&rank_arrival_s) {
            *r = r.max(*a);
        }
        CalibratedTimes {
            completion_s: rank_done_s.iter().copied().fold(0.0, f64::max),
            rank_median_s: median(&rank_done_s),
            rank_arrival_s,
            rank_done_s,
        }
    }

    /// `w` of the way from `a` to `b` (the same ranks; `w` in 0..=1), rank by rank: each
    /// rank arrives and leaves that far between its two times. For a class whose calls pace a
    /// token-bucketed link, between its times with the buckets full and drained
    /// (`super::bucket::drained_weight`). `None` when the rank counts differ.
    pub fn between(a: &CalibratedTimes, b: &CalibratedTimes, w: f64) -> Option<CalibratedTimes> {
        let w = w.clamp(0.0, 1.0);
        let mix = |x: &[f64], y: &[f64]| -> Vec<f64> { x.iter().zip(y).map(|(p, q)| p + w * (q - p)).collect() };
        (a.rank_done_s.len() == b.rank_done_s.len() && a.rank_arrival_s.len() == b.rank_arrival_s.len()).then(|| {
            CalibratedTimes::new(
                mix(&a.rank_arrival_s, &b.rank_arrival_s),
                mix(&a.rank_done_s, &b.rank_done_s),
            )
        })
    }

    /// From the time every send of `dag` is usable at its receiver (`done`, by send id) and
    /// each rank's departure so far: a rank arrives with its last delivery.
    pub(crate) fn from_deliveries(dag: &PlanDag, done: &[f64], rank_done_s: Vec<f64>) -> CalibratedTimes {
        let arrival = dag
            .deliveries
            .iter()
            .map(|ds| ds.iter().map(|&d| done[d]).fold(0.0, f64::max))
            .collect();
        CalibratedTimes::new(arrival, rank_done_s)
    }
}

/// Entry times checked: one finite, non-negative time per rank.
pub(crate) fn checked_entries(enter: Option<&[f64]>, n: usize) -> Result<Option<&[f64]>, EstimateError> {
    match enter {
        Some(e) if e.len() != n || !e.iter().all(|t| t.is_finite() && *t >= 0.0) => {
            Err(EstimateError::BadEntries { ranks: n })
        }
        e => Ok(e),
    }
}

/// Median (mean of the middle two for an even count; 0 when empty).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn between_moves_each_rank_that_far() {
        let a = CalibratedTimes::new(vec![0.0, 1.0, 2.0], vec![0.5, 1.0, 2.0]);
        let b = CalibratedTimes::new(vec![0.0, 3.0, 6.0], vec![0.5, 3.5, 6.0]);
        let m = CalibratedTimes::between(&a, &b, 0.5).unwrap();
        assert_eq!(m.rank_arrival_s, vec![0.0, 2.0, 4.0]);
        assert_eq!(m.rank_done_s, vec![0.5, 2.25, 4.0]);
        assert_eq!(m.completion_s, 4.0);
        assert_eq!(m.rank_median_s, 2.25);
        let q = CalibratedTimes::between(&a, &b, 0.25).unwrap();
        assert_eq!(q.rank_done_s, vec![0.5, 1.625, 3.0]);
        assert_eq!(CalibratedTimes::between(&a, &b, 0.0).unwrap(), a);
        assert_eq!(CalibratedTimes::between(&a, &b, 7.0).unwrap(), b);
        let short = CalibratedTimes::new(vec![0.0], vec![0.0]);
        assert!(CalibratedTimes::between(&a, &short, 0.5).is_none());
    }
}
