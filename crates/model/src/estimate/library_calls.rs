//! The library's broadcasts as the job timed them at set-up (each rank's entry and exit), and
//! the one question every fit of them answers: by what factor must a model's costs be scaled
//! for it to reproduce the calls' median rank time. Shared by the point-to-point model's fit
//! (`curve_fit`) and the shared-memory release's (`release`).

/// The smallest and largest scale a fit may give: beyond them the readings say more about a
/// disturbed set-up, or about a library whose algorithm is not the modelled one, than about
/// the pair's costs (MPICH's shared-memory broadcast at 1-16 KiB on one host asked for about
/// 0.02, and a range down to 1/64 still left it 45-98% off from the entries: 3 jobs; such
/// sizes are fitted as a release instead, `super::release`).
///
/// Up to 8, not 4: 4 Open MPI ranks on 2 cores sometimes spend a whole job in a state where
/// 1 MiB takes 4.5-5.5 times the pair's costs (900-1100 us against 200-250 us; both set-up
/// passes and the job's own calls alike, 5 of 20 jobs on 2026-11-28), and a fit held at x4
/// predicted those jobs' calls 17-38% short.
pub const SCALE_RANGE: (f64, f64) = (0.25, 8.0);

/// One timed broadcast: each rank's entry and exit (seconds on one clock shared by the ranks).
#[derive(Clone, Debug, PartialEq)]
pub struct TimedCall {
    pub enter: Vec<f64>,
    pub leave: Vec<f64>,
    /// Which ranks ran on one CPU in the call (for each rank, the lowest rank on its CPU),
    /// where read and where the fit models it (`super::send_curve::SharedCpus`).
    pub grouping: Option<Vec<u32>>,
}

impl TimedCall {
    /// Median over ranks of the time in the call.
    pub fn median_duration(&self) -> f64 {
        median_time_in_call(&self.enter, &self.leave)
    }
}

/// Median over ranks of `leave - enter`: the median rank's time in the call, what a profile's
/// median of per-rank durations measures.
pub fn median_time_in_call(enter: &[f64], leave: &[f64]) -> f64 {
    let d: Vec<f64> = enter.iter().zip(leave).map(|(e, l)| l - e).collect();
    super::rank_times::median(&d)
}

/// The factor within `(lo, hi)` for which `predicted` (growing with it) gives `measured`: a
/// bisection on its logarithm, clamped at the range's ends. `None` when `predicted` fails.
pub(crate) fn solve_factor((lo, hi): (f64, f64), measured: f64, predicted: impl Fn(f64) -> Option<f64>) -> Option<f64> {
    if predicted(lo)? >= measured {
        return Some(lo);
    }
    if predicted(hi)? <= measured {
        return Some(hi);
    }
    let (mut a, mut b) = (lo.ln(), hi.ln());
    for _ in 0..40 {
        let m = 0.5 * (a + b);
        if predicted(m.exp())? < measured {
            a = m;
        } else {
            b = m;
        }
    }
    Some((0.5 * (a + b)).exp())
}

/// Where a message size lies among values timed at increasing sizes (at least one).
pub(crate) enum Around<T> {
    /// Below the first or beyond the last: that end's value.
    End(T),
    /// Between two timed sizes: theirs, and how far from the smaller to the larger in log2 of
    /// the size (0 to 1).
    Between(T, T, f64),
}

/// Where `bytes` lies among `points` (sorted by size, not empty).
pub(crate) fn around<T: Copy>(points: &[(u64, T)], bytes: u64) -> Around<T> {
    let i = points.partition_point(|q| q.0 < bytes);
    if i == 0 {
        return Around::End(points[0].1);
    }
    if i == points.len() {
        return Around::End(points[i - 1].1);
    }
    let ((b0, v0), (b1, v1)) = (points[i - 1], points[i]);
    let x = ((bytes as f64).log2() - (b0 as f64).log2()) / ((b1 as f64).log2() - (b0 as f64).log2());
    Around::Between(v0, v1, x)
}
