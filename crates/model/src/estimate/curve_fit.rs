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
use super::send_curve::{evaluate_dag_on_one_host, SendCurve, SharedCpus};
use crate::plan::Plan;

/// Passes whose median times differ by more than this fraction read a host whose state changed
/// during set-up: the profile flags the size's prediction as uncertain.
pub const PASS_SPREAD: f64 = 0.25;

/// What the library's broadcast of one size read at set-up, for the profile: each pass's
/// median over calls of the median rank's time in the call (over the ranks the scale is
/// fitted over, [`Over`]), and the scale kept.
#[derive(Clone, Debug, PartialEq)]
pub struct LibraryTiming {
    pub bytes: u64,
    pub pass_median_s: Vec<f64>,
    pub scale: Option<f64>,
    /// Where the scale is at or near its lower limit, the calls fitted as a release instead
    /// (`super::release`), which the library's broadcasts of this size are predicted with.
    pub release: Option<super::release::ReleaseCost>,
    /// The ranks' most frequent grouping by CPU in these calls: for each rank, the lowest rank
    /// that ran on the same CPU (`None`: not read). Where ranks outnumber cores the scheduler
    /// picks it, and the same broadcast runs at different speeds by it alone.
    pub cpu_grouping: Vec<Option<u32>>,
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

    /// The factor for a message of `bytes`: that of the measured size whose power-of-two
    /// class holds it (the library's algorithm is chosen per class, and the set-up times one
    /// size in each); between measured sizes further apart, interpolated linearly in log2 of
    /// the size; beyond the ends, the end's.
    pub fn at(&self, bytes: u64) -> f64 {
        let i = self.points.partition_point(|p| p.0 <= bytes);
        if let Some(&(b, f)) = i.checked_sub(1).map(|i| &self.points[i]) {
            if bytes < b.saturating_mul(2) {
                return f;
            }
        }
        match around(&self.points, bytes) {
            Around::End(f) => f,
            Around::Between(f0, f1, x) => f0 + x * (f1 - f0),
        }
    }

    /// `curve` with each point's times multiplied by the factor for its size, and points at
    /// the first and last byte of each measured size's class, so that a message between two measured
    /// sizes takes its own class's factor. Why: the line from a 2 MiB point at its factor to
    /// a 4 MiB point at its own put 3 MB (2 MiB class, 3 Open MPI ranks) at x1.69 where 2 MiB
    /// read x1.41, +29% (10 jobs, 2026-11-29).
    pub fn apply(&self, curve: &SendCurve) -> SendCurve {
        let classes: Vec<u64> = self
            .points
            .iter()
            .flat_map(|p| [p.0, p.0.saturating_mul(2) - 1])
            .collect();
        curve.scaled_at(&classes, |bytes| self.at(bytes))
    }
}

/// The factor by which `curve`'s costs must be multiplied for `plan`'s predicted times, given
/// each call's entries, to have the median (over `calls`) of the median rank's time in the
/// call that the calls measured; within [`SCALE_RANGE`] (clamped at its ends when the
/// readings ask for more). The prediction grows with the factor, so a bisection on its
/// logarithm finds it. `None` without calls, with calls whose rank count is not the plan's
/// or whose times are not usable, or where no call tells the scale: calls in which every
/// receiver copied queued behind another on its CPU (the two leaves of 3 ranks on one CPU of
/// 2) ran at the pair's own costs whatever the scale (`super::send_curve::SharedCpus`), and
/// are left out.
///
/// `over`: the ranks whose median is taken ([`Over`]).
pub fn fit_scale(
    plan: &Plan,
    bytes: u64,
    curve: &SendCurve,
    issue_s: f64,
    calls: &[TimedCall],
    over: Over,
) -> Option<f64> {
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
    let dag = PlanDag::build(plan, bytes).ok()?;
    let calls: Vec<TimedCall> = calls
        .iter()
        .filter(|c| !all_queued(c, &dag, n, curve))
        .cloned()
        .collect();
    if calls.is_empty() {
        return None;
    }
    let waited = ranks_over(&calls, curve, bytes, over);
    let measured = median_over(&calls, &waited);
    // Entries from the earliest one, as the evaluator takes them.
    let entries: Vec<Vec<f64>> = calls
        .iter()
        .map(|c| {
            let t0 = c.enter.iter().copied().fold(f64::INFINITY, f64::min);
            c.enter.iter().map(|e| e - t0).collect()
        })
        .collect();
    let predicted = |f: f64| -> Option<f64> {
        let scaled = curve.scaled(|_| f);
        // The calls left have a copy at once: at the scaled costs, receivers sharing a CPU
        // queued as the predictions queue them.
        let per_call = entries.iter().zip(&waited).zip(&calls).map(|((e, w), c)| {
            let shared = c
                .grouping
                .as_deref()
                .map(|grouping| SharedCpus { grouping, pair: curve });
            evaluate_dag_on_one_host(&dag, n, &scaled, issue_s, Some(e), shared)
                .map(|t| median_where(e, &t.rank_done_s, w))
        });
        let v: Result<Vec<f64>, _> = per_call.collect();
        v.ok().map(|v| median_of(v.into_iter()))
    };
    solve_factor(SCALE_RANGE, measured, predicted)
}

/// Whether in call `c` every receiver of `dag` (`n` ranks) shared its CPU with another
/// receiver (false without a grouping).
fn all_queued(c: &TimedCall, dag: &PlanDag, n: usize, pair: &SendCurve) -> bool {
    c.grouping
        .as_deref()
        .is_some_and(|grouping| SharedCpus { grouping, pair }.all_queued(dag, n))
}

/// Whether any of `calls` (of `plan` for `bytes`) had a receiver copy at the curve's costs,
/// not queued behind another receiver on its CPU (`super::send_curve::SharedCpus`; a call
/// without a grouping counts as one): only such calls tell [`fit_scale`] a scale. Where none
/// did, the pair's own costs are all the calls say of copies at once.
pub fn copies_at_once(plan: &Plan, bytes: u64, curve: &SendCurve, calls: &[TimedCall]) -> bool {
    let n = plan.nranks as usize;
    let Ok(dag) = PlanDag::build(plan, bytes) else {
        return false;
    };
    calls.iter().any(|c| !all_queued(c, &dag, n, curve))
}

/// The ranks (one mask per call) whose median [`fit_scale`] takes: those that waited for
/// their data where that can be told from the time ([`found_data_below`]) and at least half of
/// the call's ranks did; all of them otherwise (where most found their data, the median rank is
/// one of those, and the fit must reproduce it).
fn ranks_over(calls: &[TimedCall], curve: &SendCurve, bytes: u64, over: Over) -> Vec<Vec<bool>> {
    let below = match over {
        Over::AllRanks => None,
        Over::WaitingRanks => found_data_below(curve, bytes),
    };
    calls
        .iter()
        .map(|c| {
            let n = c.enter.len().min(c.leave.len());
            let w: Vec<bool> = c
                .enter
                .iter()
                .zip(&c.leave)
                .map(|(e, l)| below.is_none_or(|b| l - e > b))
                .collect();
            if 2 * w.iter().filter(|&&x| x).count() >= n {
                w
            } else {
                vec![true; n]
            }
        })
        .collect()
}

/// The median over `calls` of each call's median time in the call over the ranks `over`
/// names: what [`fit_scale`] reproduces, and what the set-up reports per pass.
pub fn median_time_over(calls: &[TimedCall], curve: &SendCurve, bytes: u64, over: Over) -> f64 {
    median_over(calls, &ranks_over(calls, curve, bytes, over))
}

/// The median over `calls` of each call's median time in the call over the ranks its mask in
/// `which` marks.
fn median_over(calls: &[TimedCall], which: &[Vec<bool>]) -> f64 {
    median_of(
        calls
            .iter()
            .zip(which)
            .map(|(c, w)| median_where(&c.enter, &c.leave, w)),
    )
}

/// Which ranks of each call [`fit_scale`] takes the median over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// Every rank: the median rank of the call, what a profile's median measures.
    AllRanks,
    /// Where a rank that found its data is told apart from one that waited for it by its time
    /// alone ([`found_data_below`]) and at least half of a call's ranks waited, those, on both
    /// sides (see there why); every rank elsewhere.
    WaitingRanks,
}

/// The time in the call at or below which a rank of a call of `bytes` is taken to have found
/// its data there rather than waited for it: the shortest transfer any scale in
/// [`FOUND_DATA_SCALES`] gives, where that is longer than the longest late receive any such
/// scale gives
/// (`None` elsewhere: the two overlap, as they do from 4 KiB with Open MPI on one host, where
/// a late receive copies nearly as long as a transfer takes).
///
/// Why: the median rank of a call, with half of the ranks finding their data, is a rank of
/// either kind, and which kind depends on which ranks left the barrier late. 4 Open MPI ranks
/// on 2 cores, 1 KiB: the receivers that found their data read 0.1 us, the rest 3.6-4.1 us;
/// one of the binary tree's leaves found it in every call, the other in some passes and not
/// in others, so the median rank read 2.0-2.9 us in 13 of 60 set-up passes (30 jobs,
/// 2026-11-28) and 3.7-5.9 us in every job's own calls. The model, given the same entries,
/// kept that leaf waiting, so the fit scaled the costs down to reproduce the fast median (x1.0
/// against x1.7-2.1) and predicted the job's calls 28-49% short in 8 of the 30 jobs. Over the
/// ranks that waited, both readings ask the same of the model.
pub fn found_data_below(curve: &SendCurve, bytes: u64) -> Option<f64> {
    let c = curve.at(bytes);
    let (lo, hi) = FOUND_DATA_SCALES;
    (hi * c.late_recv_s < lo * c.one_way_s).then_some(lo * c.one_way_s)
}

/// The scales [`found_data_below`] allows for: the range fits gave below 256 KiB, narrower
/// than [`SCALE_RANGE`], which reaches 8 for the 1 MiB state that alone asks for more than 4.
/// The wider one would leave no threshold at 1 KiB under Open MPI (a late receive of 0.07 us
/// against a one-way 1.94 us: x8 of the one is longer than x0.25 of the other).
pub const FOUND_DATA_SCALES: (f64, f64) = (0.25, 4.0);

/// Median over the ranks `which` marks of `leave - enter`.
fn median_where(enter: &[f64], leave: &[f64], which: &[bool]) -> f64 {
    let d: Vec<f64> = enter
        .iter()
        .zip(leave)
        .zip(which)
        .filter(|(_, &w)| w)
        .map(|((e, l), _)| l - e)
        .collect();
    super::rank_times::median(&d)
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
    fn scales_hold_in_their_class_are_interpolated_between_and_held_beyond() {
        let s = CurveScale::new(vec![(4096, 2.0), (1024, 1.0), (8192, f64::NAN)]).unwrap();
        assert_eq!(s.points(), &[(1024, 1.0), (4096, 2.0)]);
        assert_eq!(s.at(8), 1.0);
        // A measured size's factor holds in its class (1024 .. 2047, 4096 .. 8191).
        assert_eq!(s.at(2047), 1.0);
        assert_eq!(s.at(6000), 2.0);
        // A class without a measured size: in log2 between its neighbours.
        assert!((s.at(2048) - 1.5).abs() < 1e-12);
        assert_eq!(s.at(1 << 30), 2.0);
        let c = s.apply(&curve());
        let at = |b: u64| c.points().iter().find(|p| p.bytes == b).copied().unwrap();
        assert_eq!(at(1024).one_way_s, 2e-6);
        assert!((at(65536).one_way_s - 16e-6).abs() < 1e-15);
        // Points at the classes' last bytes: a message of 1500 B takes 1 KiB's factor, not a
        // line towards 4 KiB's.
        assert!(c.points().iter().any(|p| p.bytes == 2047) && c.points().iter().any(|p| p.bytes == 8191));
        let raw = curve();
        assert!((c.at(1500).one_way_s - raw.at(1500).one_way_s).abs() < 1e-15);
        assert!((c.at(6000).one_way_s - 2.0 * raw.at(6000).one_way_s).abs() < 1e-15);
        assert!(CurveScale::new(vec![(1024, 0.0)]).is_none());
    }

    #[test]
    fn passes_more_than_a_quarter_apart_disagree() {
        let t = |p: Vec<f64>| LibraryTiming {
            bytes: 1024,
            pass_median_s: p,
            scale: Some(1.0),
            release: None,
            cpu_grouping: vec![],
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
                let t = evaluate_on_one_host(plan, bytes, &c, 0.2e-6, Some(e), None).unwrap();
                // On a clock that does not start at the first entry.
                TimedCall {
                    enter: e.iter().map(|x| x + 100.0).collect(),
                    leave: t.rank_done_s.iter().map(|x| x + 100.0).collect(),
                    grouping: None,
                }
            })
            .collect()
    }

    /// A curve whose late receives are a small part of a transfer, as the pair measured them
    /// at 1 KiB under Open MPI (0.08 us against 1.95 us one way).
    fn curve_with_cheap_late_receives() -> SendCurve {
        let cost = |bytes: u64, us: f64, late_us: f64| SendCost {
            bytes,
            sender_s: us * 1e-6,
            one_way_s: us * 1e-6,
            late_recv_s: late_us * 1e-6,
            waits_for_receiver: false,
        };
        SendCurve::new(vec![cost(1024, 2.0, 0.04), cost(65536, 8.0, 6.0)]).unwrap()
    }

    #[test]
    fn ranks_that_found_their_data_are_told_apart_only_where_the_times_can_tell() {
        // 4 x 0.04 us is below 0.25 x 2 us: a late receive cannot last as long as a transfer,
        // and a rank done sooner than any transfer found its data.
        let b = found_data_below(&curve_with_cheap_late_receives(), 1024).unwrap();
        assert!((b - 0.5e-6).abs() < 1e-12, "{b}");
        // Late receives of half a transfer overlap the transfers the range allows.
        assert_eq!(found_data_below(&curve(), 1024), None);
        assert_eq!(found_data_below(&curve(), 1 << 20), None);
    }

    #[test]
    fn a_leaf_that_found_its_data_in_some_calls_does_not_move_the_scale() {
        // A binary tree of 4 ranks (0 -> 1, 2; 1 -> 3), every rank entering together, made by
        // the model at x2. Then rank 2 found its data in every call and rank 3 in every other
        // (read 0.1 us, where the model, given the same entries, has them waiting): the median
        // rank of those calls is one of each kind, as on a 2-core host after a barrier.
        let plan = Plan::from_tree(0, &trees::kary(4, 0, 2), 1, "binary");
        let c = curve_with_cheap_late_receives();
        let entries = vec![vec![0.0; 4]; 8];
        let made = c.scaled(|_| 2.0);
        let mut calls: Vec<TimedCall> = entries
            .iter()
            .map(|e| TimedCall {
                enter: e.clone(),
                leave: evaluate_on_one_host(&plan, 1024, &made, 0.2e-6, Some(e), None)
                    .unwrap()
                    .rank_done_s,
                grouping: None,
            })
            .collect();
        let clean_fit = fit_scale(&plan, 1024, &c, 0.2e-6, &calls, Over::WaitingRanks).unwrap();
        assert!((clean_fit - 2.0).abs() < 0.02, "{clean_fit}");
        let clean = calls.clone();
        for (k, call) in calls.iter_mut().enumerate() {
            call.leave[2] = call.enter[2] + 0.1e-6;
            if k % 2 == 0 {
                call.leave[3] = call.enter[3] + 0.1e-6;
            }
        }
        let got = fit_scale(&plan, 1024, &c, 0.2e-6, &calls, Over::WaitingRanks).unwrap();
        assert!((got - 2.0).abs() < 0.1, "fitted x{got} where the waiting ranks read x2");
        // Over every rank, the fast median asks for less (x1.34).
        let all = fit_scale(&plan, 1024, &c, 0.2e-6, &calls, Over::AllRanks).unwrap();
        assert!(all < 1.5, "x{all}");
        // What set-up reports per pass is the median the fit reproduces: over the ranks that
        // waited, no less than before any leaf found its data; over every rank, far less.
        let before = median_time_over(&clean, &c, 1024, Over::AllRanks);
        let waiting = median_time_over(&calls, &c, 1024, Over::WaitingRanks);
        let every = median_time_over(&calls, &c, 1024, Over::AllRanks);
        assert!(waiting >= before, "{waiting} against {before}");
        assert!(every < 0.8 * before, "{every} against {before}");
    }

    #[test]
    fn the_fit_recovers_the_scale_that_made_the_calls() {
        let plan = Plan::from_tree(0, &trees::flat(4, 0), 1, "flat");
        let entries = vec![
            vec![0.0, 0.0, 0.0, 0.0],
            vec![0.0, 3e-6, 1e-6, 40e-6],
            vec![5e-6, 0.0, 2e-6, 1e-6],
        ];
        for f in [0.5, 1.0, 1.7, 3.0, 5.5] {
            for bytes in [1024, 65536, 1 << 20] {
                let calls = calls_of(&plan, bytes, f, &entries);
                let got = fit_scale(&plan, bytes, &curve(), 0.2e-6, &calls, Over::WaitingRanks).unwrap();
                assert!((got - f).abs() < 0.01 * f, "{bytes} B: fitted {got}, made with {f}");
            }
        }
        // Readings beyond the range are clamped to it.
        let calls = calls_of(&plan, 65536, 9.0, &entries);
        assert_eq!(
            fit_scale(&plan, 65536, &curve(), 0.2e-6, &calls, Over::WaitingRanks),
            Some(SCALE_RANGE.1)
        );
        // Unusable calls give no fit.
        assert_eq!(fit_scale(&plan, 65536, &curve(), 0.2e-6, &[], Over::WaitingRanks), None);
        let mut bad = calls_of(&plan, 65536, 1.0, &entries);
        bad[1].leave.pop();
        assert_eq!(
            fit_scale(&plan, 65536, &curve(), 0.2e-6, &bad, Over::WaitingRanks),
            None
        );
        let mut bad = calls_of(&plan, 65536, 1.0, &entries);
        bad[0].leave[2] = bad[0].enter[2] - 1e-6;
        assert_eq!(
            fit_scale(&plan, 65536, &curve(), 0.2e-6, &bad, Over::WaitingRanks),
            None
        );
    }

    #[test]
    fn copies_queued_on_a_shared_cpu_do_not_tell_the_scale() {
        // 3 ranks, the root with leaf 1 on one CPU: both copies at once, scaled; the fit finds
        // the scale the calls were made with.
        let plan = Plan::from_tree(0, &trees::flat(3, 0), 1, "flat");
        let entries = vec![vec![0.0; 3], vec![0.0, 2e-6, 0.0], vec![1e-6, 0.0, 0.0]];
        let with = |grouping: &[u32]| {
            let mut calls = calls_of(&plan, 1 << 20, 1.7, &entries);
            for c in &mut calls {
                c.grouping = Some(grouping.to_vec());
            }
            calls
        };
        let got = fit_scale(&plan, 1 << 20, &curve(), 0.2e-6, &with(&[0, 1, 0]), Over::AllRanks).unwrap();
        assert!((got - 1.7).abs() < 0.02, "x{got}");
        // The two leaves on one CPU: their copies run at the pair's costs whatever the scale,
        // so the calls give none (not an end of the range).
        assert_eq!(
            fit_scale(&plan, 1 << 20, &curve(), 0.2e-6, &with(&[0, 1, 1]), Over::AllRanks),
            None
        );
        // Some calls of each: only those with a copy at once are fitted, whatever the others
        // read (here ten times as long).
        let mut mixed = with(&[0, 1, 0]);
        for mut c in with(&[0, 1, 1]) {
            for (l, e) in c.leave.iter_mut().zip(&c.enter) {
                *l = e + 10.0 * (*l - e);
            }
            mixed.push(c.clone());
            mixed.push(c);
        }
        let got = fit_scale(&plan, 1 << 20, &curve(), 0.2e-6, &mixed, Over::AllRanks).unwrap();
        assert!((got - 1.7).abs() < 0.02, "x{got}");
        assert!(copies_at_once(&plan, 1 << 20, &curve(), &mixed));
        assert!(!copies_at_once(&plan, 1 << 20, &curve(), &with(&[0, 1, 1])));
        assert!(copies_at_once(
            &plan,
            1 << 20,
            &curve(),
            &calls_of(&plan, 1 << 20, 1.0, &entries)
        ));
    }
}
