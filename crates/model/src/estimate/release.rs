//! A library broadcast on one host that is not made of messages: the root writes the data into
//! shared memory once and releases it, and every other rank copies it out once both it and the
//! data are there (MPICH's release-gather broadcast; Open MPI's `coll/sm` works alike).
//!
//! Why: the one-host model of `send_curve` evaluates the library's point-to-point algorithm
//! with the host-mates' per-message costs, scaled to the library's broadcast timed at set-up
//! (`curve_fit`). Under MPICH that scale cannot be found at 1-16 KiB: the median rank spent
//! 0.1-0.4 us in the call on the 2-core VM (4 ranks), while the point-to-point tree, with
//! every cost at a quarter of the pair's, still predicted 0.5-3 us given the same entries
//! (2026-11-27, 2 jobs: +164 .. +800%). There, a rank that enters after the root has left
//! finds the data released and pays only its copy. So where the scale fit is held at its lower
//! limit, the library's broadcast of that size is modelled as a release, with two costs taken
//! from the same set-up calls: the root's time in the call and the copy-out.

use super::library_calls::{around, median_time_in_call, solve_factor, Around, TimedCall, SCALE_RANGE};
use super::rank_times::{checked_entries, median, CalibratedTimes};
use super::EstimateError;

/// The costs of a released broadcast (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReleaseCost {
    /// From the root's entry to the data's release (it writes the data).
    pub release_s: f64,
    /// A receiver's time from when both it and the released data are there to its leaving.
    pub copy_s: f64,
    /// The root's time in the call (from its entry), or with `root_waits` from the last
    /// receiver's leaving.
    pub root_s: f64,
    /// The root leaves only after every receiver has copied (MPICH at 16 KiB on the VM: the
    /// root left 1.5-3 us after the last of 3 receivers in every call, where at 1-4 KiB it
    /// left 0.3 us after entering, before any).
    pub root_waits: bool,
}

impl ReleaseCost {
    fn usable(&self) -> bool {
        let ok = |t: f64| t.is_finite() && t >= 0.0;
        ok(self.release_s) && ok(self.copy_s) && ok(self.root_s)
    }
}

/// Every rank's times in a released broadcast of `n` ranks from `root`: the data is released
/// `release_s` after the root enters; every other rank leaves `copy_s` after the later of its
/// entry and the release; the root leaves `root_s` after it entered (no earlier than the
/// release) or, with `root_waits`, `root_s` after the last receiver left. `enter`: each rank's
/// entry, `None` for all at 0.
pub fn evaluate(
    n: usize,
    root: usize,
    cost: ReleaseCost,
    enter: Option<&[f64]>,
) -> Result<CalibratedTimes, EstimateError> {
    let enter = checked_entries(enter, n)?;
    if root >= n {
        return Err(EstimateError::BadRoot { root, ranks: n });
    }
    let entered = |r: usize| enter.map_or(0.0, |e| e[r]);
    let released = entered(root) + cost.release_s;
    let arrival: Vec<f64> = (0..n)
        .map(|r| if r == root { 0.0 } else { entered(r).max(released) })
        .collect();
    let mut done: Vec<f64> = (0..n).map(|r| arrival[r] + cost.copy_s).collect();
    let last = (0..n).filter(|&r| r != root).map(|r| done[r]).fold(released, f64::max);
    done[root] = if cost.root_waits {
        last + cost.root_s
    } else {
        released.max(entered(root) + cost.root_s)
    };
    Ok(CalibratedTimes::new(arrival, done))
}

/// Grid steps per dimension of the release/copy search, and refinements around the best.
const GRID: usize = 48;
const REFINE: usize = 3;

/// The costs that reproduce `calls` (root `root`, at least two ranks):
/// - the release and the copy minimize the summed absolute error of the receivers' predicted
///   leaving times, given each call's entries (absolute, not squared: a preempted rank's one
///   long reading must not pull the fit), by a grid search refined around its best point;
/// - the root waits when it left after every receiver in at least half of the calls; its time
///   is then the median of how long after the last receiver it left, else the median of its
///   times in the calls.
///
/// `None` without usable calls.
pub fn fit(root: usize, calls: &[TimedCall]) -> Option<ReleaseCost> {
    let n = calls.first()?.enter.len();
    let usable = |c: &TimedCall| {
        c.enter.len() == n
            && c.leave.len() == n
            && c.enter.iter().chain(&c.leave).all(|t| t.is_finite())
            && c.enter.iter().zip(&c.leave).all(|(e, l)| l >= e)
    };
    if n < 2 || root >= n || !calls.iter().all(usable) {
        return None;
    }
    // Each receiver's (entry, leaving) in one call, from the root's entry.
    let seen: Vec<(f64, f64)> = calls
        .iter()
        .flat_map(|c| {
            let r0 = c.enter[root];
            (0..n)
                .filter(move |&r| r != root)
                .map(move |r| (c.enter[r] - r0, c.leave[r] - r0))
        })
        .collect();
    let error =
        |release_s: f64, copy_s: f64| -> f64 { seen.iter().map(|&(e, l)| (e.max(release_s) + copy_s - l).abs()).sum() };
    let span = seen.iter().map(|&(_, l)| l).fold(0.0, f64::max);
    let (mut best, mut step) = ((0.0, 0.0), span / GRID as f64);
    let mut lo = (0.0, 0.0);
    for _ in 0..=REFINE {
        let mut best_err = f64::INFINITY;
        for i in 0..=GRID {
            for j in 0..=GRID {
                let (a, b) = (lo.0 + i as f64 * step, lo.1 + j as f64 * step);
                let err = error(a, b);
                if err < best_err {
                    (best_err, best) = (err, (a, b));
                }
            }
        }
        lo = ((best.0 - step).max(0.0), (best.1 - step).max(0.0));
        step *= 2.0 / GRID as f64;
    }
    let (release_s, copy_s) = best;
    let root_waits = 2 * calls
        .iter()
        .filter(|c| (0..n).filter(|&r| r != root).all(|r| c.leave[root] >= c.leave[r]))
        .count()
        >= calls.len();
    let root_times: Vec<f64> = calls
        .iter()
        .map(|c| {
            if root_waits {
                let last = (0..n)
                    .filter(|&r| r != root)
                    .map(|r| c.leave[r])
                    .fold(f64::MIN, f64::max);
                (c.leave[root] - last).max(0.0)
            } else {
                c.leave[root] - c.enter[root]
            }
        })
        .collect();
    let shape = ReleaseCost {
        release_s,
        copy_s,
        root_s: median(&root_times),
        root_waits,
    };
    let cost = reproduce_median(n, root, shape, calls)?;
    cost.usable().then_some(cost)
}

/// `shape` with its three times scaled alike (within [`SCALE_RANGE`]) so that the median over `calls` of
/// the median rank's predicted time in the call, given each call's entries, is the calls'
/// measured one: what `curve_fit::fit_scale` asks of the point-to-point model, and what a
/// profile compares. The receivers' fit alone left a 2-rank job's 1 KiB calls predicted 50-65%
/// slow (2 jobs under MPICH), the root's and the receiver's times weighing alike in the median
/// of two ranks. `None` when the calls cannot be evaluated.
fn reproduce_median(n: usize, root: usize, shape: ReleaseCost, calls: &[TimedCall]) -> Option<ReleaseCost> {
    let measured = median(&calls.iter().map(TimedCall::median_duration).collect::<Vec<f64>>());
    let scaled = |f: f64| ReleaseCost {
        release_s: shape.release_s * f,
        copy_s: shape.copy_s * f,
        root_s: shape.root_s * f,
        ..shape
    };
    let predicted = |f: f64| -> Option<f64> {
        let per_call: Option<Vec<f64>> = calls
            .iter()
            .map(|c| {
                let t = evaluate(n, root, scaled(f), Some(&c.enter)).ok()?;
                Some(median_time_in_call(&c.enter, &t.rank_done_s))
            })
            .collect();
        Some(median(&per_call?))
    };
    let f = solve_factor(SCALE_RANGE, measured, predicted)?;
    Some(scaled(f))
}

/// Release costs fitted at some message sizes, among all the sizes the library's broadcast was
/// timed at (`None` where the point-to-point model was kept). A size takes the model of the
/// nearest timed size in log size (the smaller one at a tie); between two released sizes the
/// costs are interpolated linearly in log size.
#[derive(Clone, Debug, PartialEq)]
pub struct ReleaseSizes {
    points: Vec<(u64, Option<ReleaseCost>)>,
}

impl ReleaseSizes {
    /// From `(bytes, costs)` at each timed size; `None` when no size is released.
    pub fn new(mut points: Vec<(u64, Option<ReleaseCost>)>) -> Option<ReleaseSizes> {
        points.retain(|p| p.0 > 0);
        for p in &mut points {
            p.1 = p.1.filter(ReleaseCost::usable);
        }
        points.sort_by_key(|p| p.0);
        points.dedup_by_key(|p| p.0);
        points.iter().any(|p| p.1.is_some()).then_some(ReleaseSizes { points })
    }

    /// The release costs for a message of `bytes`, `None` where the point-to-point model holds.
    pub fn at(&self, bytes: u64) -> Option<ReleaseCost> {
        let (c0, c1, x) = match around(&self.points, bytes) {
            Around::End(c) => return c,
            Around::Between(c0, c1, x) => (c0, c1, x),
        };
        match (c0, c1) {
            (Some(c0), Some(c1)) => {
                let lerp = |a: f64, b: f64| a + x * (b - a);
                Some(ReleaseCost {
                    release_s: lerp(c0.release_s, c1.release_s),
                    copy_s: lerp(c0.copy_s, c1.copy_s),
                    root_s: lerp(c0.root_s, c1.root_s),
                    root_waits: if x <= 0.5 { c0.root_waits } else { c1.root_waits },
                })
            }
            _ if x <= 0.5 => c0,
            _ => c1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(release_us: f64, copy_us: f64, root_us: f64, root_waits: bool) -> ReleaseCost {
        ReleaseCost {
            release_s: release_us * 1e-6,
            copy_s: copy_us * 1e-6,
            root_s: root_us * 1e-6,
            root_waits,
        }
    }

    fn us(v: &[f64]) -> Vec<f64> {
        v.iter().map(|t| (t * 1e9).round() / 1e3).collect()
    }

    #[test]
    fn a_rank_after_the_release_pays_only_its_copy() {
        let c = cost(0.5, 0.2, 0.3, false);
        let together = evaluate(4, 0, c, None).unwrap();
        // The root leaves at the release, even though its own time is shorter.
        assert_eq!(us(&together.rank_done_s), vec![0.5, 0.7, 0.7, 0.7]);
        // Rank 2 enters 10 us late, rank 3 before the release, rank 1 at it; root 1 us late.
        let e = [1e-6, 1.5e-6, 10e-6, 1.2e-6];
        let t = evaluate(4, 0, c, Some(&e)).unwrap();
        assert_eq!(us(&t.rank_done_s), vec![1.5, 1.7, 10.2, 1.7]);
        // A root that waits for the gather leaves after the last receiver.
        let t = evaluate(4, 0, cost(0.5, 0.2, 0.3, true), Some(&e)).unwrap();
        assert_eq!(us(&t.rank_done_s), vec![10.5, 1.7, 10.2, 1.7]);
        let root2 = evaluate(3, 2, cost(0.5, 0.2, 0.8, false), None).unwrap();
        assert_eq!(us(&root2.rank_done_s), vec![0.7, 0.7, 0.8]);
        assert!(evaluate(4, 4, c, None).is_err());
        assert!(evaluate(4, 0, c, Some(&e[..3])).is_err());
    }

    /// Calls "measured" by the model itself, on a clock that does not start at 0.
    fn calls_of(c: ReleaseCost, entries: &[Vec<f64>]) -> Vec<TimedCall> {
        entries
            .iter()
            .map(|e| {
                let t = evaluate(e.len(), 0, c, Some(e)).unwrap();
                TimedCall {
                    enter: e.iter().map(|x| x + 50.0).collect(),
                    leave: t.rank_done_s.iter().map(|x| x + 50.0).collect(),
                    grouping: None,
                }
            })
            .collect()
    }

    /// Receivers entering before and after the release, as after a barrier on a busy host.
    fn entries() -> Vec<Vec<f64>> {
        let us = |v: [f64; 4]| v.iter().map(|x| x * 1e-6).collect::<Vec<f64>>();
        vec![
            us([0.0, 0.0, 0.0, 0.0]),
            us([0.0, 3.0, 0.1, 4.0]),
            us([0.0, 2.0, 0.2, 1.0]),
            us([0.5, 0.0, 2.0, 5.0]),
            us([0.0, 6.5, 0.9, 3.8]),
            us([0.3, 3.6, 4.2, 0.7]),
        ]
    }

    #[test]
    fn the_fit_recovers_the_costs_that_made_the_calls() {
        for made in [
            cost(0.3, 0.1, 0.35, false),
            cost(1.0, 0.4, 0.2, false),
            cost(2.0, 0.4, 2.0, true),
            cost(0.2, 3.0, 0.5, true),
        ] {
            let got = fit(0, &calls_of(made, &entries())).unwrap();
            let close = |a: f64, b: f64| (a - b).abs() < 0.02e-6;
            assert!(
                close(got.release_s, made.release_s) && close(got.copy_s, made.copy_s),
                "{got:?} from {made:?}"
            );
            assert_eq!(got.root_waits, made.root_waits, "{got:?} from {made:?}");
            // A root that does not wait leaves no earlier than the release: its own time is
            // read only when longer.
            let root_s = if made.root_waits {
                made.root_s
            } else {
                made.root_s.max(made.release_s)
            };
            assert!(close(got.root_s, root_s), "{got:?} from {made:?}");
        }
        // One receiver preempted for 100 us in one call does not move the fit.
        let made = cost(1.0, 0.4, 0.2, false);
        let mut calls = calls_of(made, &entries());
        calls[2].leave[3] += 100e-6;
        let got = fit(0, &calls).unwrap();
        assert!((got.copy_s - made.copy_s).abs() < 0.02e-6, "{got:?}");
        assert_eq!(fit(0, &[]), None);
        let mut bad = calls_of(made, &entries());
        bad[1].leave[2] = bad[1].enter[2] - 1e-6;
        assert_eq!(fit(0, &bad), None);
        assert_eq!(fit(4, &calls_of(made, &entries())), None);
    }

    #[test]
    fn a_size_takes_the_model_of_the_nearest_timed_size() {
        let s = ReleaseSizes::new(vec![
            (16384, Some(cost(2.0, 0.6, 2.0, true))),
            (1024, Some(cost(0.2, 0.1, 0.2, false))),
            (4096, Some(cost(0.4, 0.2, 0.4, false))),
            (65536, None),
            (1 << 20, None),
        ])
        .unwrap();
        assert_eq!(s.at(8), Some(cost(0.2, 0.1, 0.2, false)));
        let mid = s.at(2048).unwrap();
        assert!(
            (mid.release_s - 0.3e-6).abs() < 1e-15 && (mid.copy_s - 0.15e-6).abs() < 1e-15,
            "{mid:?}"
        );
        // 32 KiB lies halfway (in log size) between 16 KiB, released, and 64 KiB: the smaller.
        assert_eq!(s.at(32768), Some(cost(2.0, 0.6, 2.0, true)));
        assert_eq!(s.at(40000), None);
        assert_eq!(s.at(1 << 30), None);
        assert!(ReleaseSizes::new(vec![(1024, None), (4096, None)]).is_none());
    }
}
