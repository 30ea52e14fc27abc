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
