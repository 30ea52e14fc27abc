//! The host-mates' send curve scaled, per message size, so that the one-host model reproduces
//! the library broadcasts the job timed at set-up.
//!
//! Why: the curve is what one pair of ranks measured, alone on the host's cores. With more
//! ranks than that on the host, copies run at once and, where ranks outnumber cores, wait for
//! one: on the 2-core VM, 4 ranks, the curve put 256 KiB at 17-21 us while Open MPI's
//! broadcast took 23 us in some jobs and 43-54 us in others (10 jobs, 2026-11-27), a state
//! that lasts a job and that the pair does not see. Timing the library's own broadcast at a
//! few sizes at set-up sees it; the model keeps the shape (which rank waits for which, late
//! entries) and only the size's costs are scaled.
//!
//! The fit is on the calls' own entries ([`evaluate_on_one_host`] given when each rank
//! entered), not on the ranks entering together: after a barrier the ranks of an
//! oversubscribed host leave it microseconds apart, and a late rank finds its data there
//! (16 KiB calls measured 3 us against the 5 us of ranks entering together).

use super::library_calls::{around, solve_factor, Around};
pub use super::library_calls::{median_time_in_call, TimedCall, SCALE_RANGE};
use super::plan_dag::PlanDag;
use super::send_curve::{evaluate_dag_on_one_host, SendCurve};
use crate::plan::Plan;

/// Passes whose median times differ by more than this fraction read a host whose state changed
/// during set-up: the profile flags the size's prediction as uncertain.
pub const PASS_SPREAD: f64 = 0.25;

/// What the library's broadcast of one size read at set-up, for the profile: each pass's
/// median over calls of the median rank's time in the call, and the scale kept.
#[derive(Clone, Debug, PartialEq)]
pub struct LibraryTiming {
    pub bytes: u64,
    pub pass_median_s: Vec<f64>,
    pub scale: Option<f64>,
    /// Where the scale is at or near its lower limit, the calls fitted as a release instead
    /// (`super::release`), which the library's broadcasts of this size are predicted with.
    pub release: Option<super::release::ReleaseCost>,
}

impl LibraryTiming {
    /// Whether the passes read more than [`PASS_SPREAD`] apart (the slower against the faster).
    pub fn passes_disagree(&self) -> bool {
        passes_disagree(&self.pass_median_s)
    }
}

/// Whether pass medians (seconds) lie more than [`PASS_SPREAD`] apart.
pub fn passes_disagree(pass_median_s: &[f64]) -> bool {
    let lo = pass_median_s.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = pass_median_s.iter().copied().fold(0.0, f64::max);
    lo > 0.0 && hi > lo * (1.0 + PASS_SPREAD)
}

/// Scale factors measured at some sizes, interpolated linearly in log2 of the size between
/// them and held at the end ones beyond.
#[derive(Clone, Debug, PartialEq)]
pub struct CurveScale {
    points: Vec<(u64, f64)>,
}

impl CurveScale {
    /// From `(bytes, factor)` pairs; those with a factor that is not finite and positive are
    /// dropped. `None` when none is left.
    pub fn new(mut points: Vec<(u64, f64)>) -> Option<CurveScale> {
        points.retain(|&(b, f)| b > 0 && f.is_finite() && f > 0.0);
        points.sort_by_key(|p| p.0);
        points.dedup_by_key(|p| p.0);
        (!points.is_empty()).then_some(CurveScale { points })
    }

    pub fn points(&self) -> &[(u64, f64)] {
        &self.points
    }

    /// The factor for a message of `bytes`.
    pub fn at(&self, bytes: u64) -> f64 {
        match around(&self.points, bytes) {
            Around::End(f) => f,
            Around::Between(f0, f1, x) => f0 + x * (f1 - f0),
        }
    }

    /// `curve` with each point's times multiplied by the factor for its size.
    pub fn apply(&self, curve: &SendCurve) -> SendCurve {
        curve.scaled(|bytes| self.at(bytes))
    }
}

/// The factor by which `curve`'s costs must be multiplied for `plan`'s predicted times, given
/// each call's entries, to have the median (over `calls`) of the median rank's time in the
/// call that the calls measured; within [`SCALE_RANGE`] (clamped at its ends when the
/// readings ask for more). The prediction grows with the factor, so a bisection on its
/// logarithm finds it. `None` without calls or with calls whose rank count is not the plan's
/// or whose times are not usable.
pub fn fit_scale(plan: &Plan, bytes: u64, curve: &SendCurve, issue_s: f64, calls: &[TimedCall]) -> Option<f64> {
    let n = plan.nranks as usize;
    if calls.is_empty()
        || calls.iter().any(|c| {
            c.enter.len() != n
                || c.leave.len() != n
                || !c.enter.iter().chain(&c.leave).all(|t| t.is_finite())
                || c.enter.iter().zip(&c.leave).any(|(e, l)| l < e)
        })
    {
        return None;
    }
    let measured = median_of(calls.iter().map(TimedCall::median_duration));
    // Entries from the earliest one, as the evaluator takes them.
    let entries: Vec<Vec<f64>> = calls
        .iter()
        .map(|c| {
            let t0 = c.enter.iter().copied().fold(f64::INFINITY, f64::min);
            c.enter.iter().map(|e| e - t0).collect()
        })
        .collect();
    let dag = PlanDag::build(plan, bytes).ok()?;
    let predicted = |f: f64| -> Option<f64> {
        let scaled = curve.scaled(|_| f);
        let per_call = entries.iter().map(|e| {
            evaluate_dag_on_one_host(&dag, n, &scaled, issue_s, Some(e)).map(|t| median_time_in_call(e, &t.rank_done_s))
        });
        let v: Result<Vec<f64>, _> = per_call.collect();
        v.ok().map(|v| median_of(v.into_iter()))
    };
    solve_factor(SCALE_RANGE, measured, predicted)
}

fn median_of(v: impl Iterator<Item = f64>) -> f64 {
    super::rank_times::median(&v.collect::<Vec<f64>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::send_curve::{evaluate_on_one_host, SendCost};
    use crate::plan::trees;

    fn curve() -> SendCurve {
        let cost = |bytes: u64, us: f64, waits: bool| SendCost {
            bytes,
            sender_s: us * 1e-6,
            one_way_s: us * 1e-6,
            late_recv_s: 0.5 * us * 1e-6,
            waits_for_receiver: waits,
        };
        SendCurve::new(vec![
            cost(1024, 2.0, false),
            cost(65536, 8.0, true),
            cost(1 << 20, 80.0, true),
        ])
        .unwrap()
    }

    #[test]
    fn scales_are_interpolated_in_log_size_and_held_beyond() {
        let s = CurveScale::new(vec![(4096, 2.0), (1024, 1.0), (8192, f64::NAN)]).unwrap();
        assert_eq!(s.points(), &[(1024, 1.0), (4096, 2.0)]);
        assert_eq!(s.at(8), 1.0);
        assert!((s.at(2048) - 1.5).abs() < 1e-12);
        assert_eq!(s.at(1 << 30), 2.0);
        let c = s.apply(&curve());
        assert_eq!(c.points()[0].one_way_s, 2e-6);
        assert!((c.points()[1].one_way_s - 16e-6).abs() < 1e-15);
        assert!(CurveScale::new(vec![(1024, 0.0)]).is_none());
    }

    #[test]
    fn passes_more_than_a_quarter_apart_disagree() {
        let t = |p: Vec<f64>| LibraryTiming {
            bytes: 1024,
            pass_median_s: p,
            scale: Some(1.0),
            release: None,
        };
        assert!(!t(vec![3.1e-6, 3.0e-6]).passes_disagree());
        assert!(!t(vec![2.0e-6, 2.45e-6]).passes_disagree());
        assert!(t(vec![2.0e-6, 2.55e-6]).passes_disagree());
        assert!(t(vec![3.1e-6, 1.8e-6]).passes_disagree());
        assert!(!t(vec![3.1e-6]).passes_disagree());
        assert!(!t(vec![]).passes_disagree());
    }

    /// Calls "measured" by the model itself with the curve scaled by `f`, ranks entering at
    /// the given offsets.
    fn calls_of(plan: &Plan, bytes: u64, f: f64, entries: &[Vec<f64>]) -> Vec<TimedCall> {
        let c = curve().scaled(|_| f);
        entries
            .iter()
            .map(|e| {
                let t = evaluate_on_one_host(plan, bytes, &c, 0.2e-6, Some(e)).unwrap();
                // On a clock that does not start at the first entry.
                TimedCall {
                    enter: e.iter().map(|x| x + 100.0).collect(),
                    leave: t.rank_done_s.iter().map(|x| x + 100.0).collect(),
                }
            })
            .collect()
    }

    #[test]
    fn the_fit_recovers_the_scale_that_made_the_calls() {
        let plan = Plan::from_tree(0, &trees::flat(4, 0), 1, "flat");
        let entries = vec![
            vec![0.0, 0.0, 0.0, 0.0],
            vec![0.0, 3e-6, 1e-6, 40e-6],
            vec![5e-6, 0.0, 2e-6, 1e-6],
        ];
        for f in [0.5, 1.0, 1.7, 3.0] {
            for bytes in [1024, 65536, 1 << 20] {
                let calls = calls_of(&plan, bytes, f, &entries);
                let got = fit_scale(&plan, bytes, &curve(), 0.2e-6, &calls).unwrap();
                assert!((got - f).abs() < 0.01 * f, "{bytes} B: fitted {got}, made with {f}");
            }
        }
        // Readings beyond the range are clamped to it.
        let calls = calls_of(&plan, 65536, 9.0, &entries);
        assert_eq!(fit_scale(&plan, 65536, &curve(), 0.2e-6, &calls), Some(SCALE_RANGE.1));
        // Unusable calls give no fit.
        assert_eq!(fit_scale(&plan, 65536, &curve(), 0.2e-6, &[]), None);
        let mut bad = calls_of(&plan, 65536, 1.0, &entries);
        bad[1].leave.pop();
        assert_eq!(fit_scale(&plan, 65536, &curve(), 0.2e-6, &bad), None);
        let mut bad = calls_of(&plan, 65536, 1.0, &entries);
        bad[0].leave[2] = bad[0].enter[2] - 1e-6;
        assert_eq!(fit_scale(&plan, 65536, &curve(), 0.2e-6, &bad), None);
    }
}
