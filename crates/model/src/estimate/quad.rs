//! Adaptive quadrature on panels of equally spaced points, evaluated in batches.
//!
//! Why not Gauss-Kronrod: every integrand evaluation for E\[max\] costs O(n) (a pass over all
//! receivers), and the fast receiver kernel walks a *geometric progression* of abscissae with one
//! multiply per point instead of one exponential. So panels use 9 equally spaced points with a
//! Romberg estimate (order h^8, error = |R33 - R22|), and a panel splits by evaluating only its 8
//! midpoints: the children reuse the parent's 9 values. All panels refined in one round are
//! evaluated in a single batch (adjacent panels merge into one longer equally spaced run), so the
//! number of O(n) passes is the number of rounds, not the number of points.

/// Equally spaced abscissae `u0, u0 + h, .., u0 + (count - 1) h`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Run {
    pub u0: f64,
    pub h: f64,
    pub count: usize,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct QuadOptions {
    /// Stop when the summed error estimate is below `rel_tol * max(|integral|, scale)` ...
    pub rel_tol: f64,
    /// ... or below this absolute bound.
    pub abs_tol: f64,
    /// Initial panels spread over the segments in proportion to their length (at least 2 each).
    pub initial_panels: usize,
    pub max_panels: usize,
    pub max_rounds: usize,
}

impl Default for QuadOptions {
    fn default() -> Self {
        QuadOptions {
            rel_tol: 1e-9,
            abs_tol: 0.0,
            initial_panels: 16,
            max_panels: 20_000,
            max_rounds: 60,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct QuadResult {
    pub value: f64,
    pub error: f64,
    /// Integrand evaluations (points), and batches (O(n) passes of the caller's evaluator).
    pub evals: usize,
    pub rounds: usize,
    pub converged: bool,
}

struct Panel {
    u0: f64,
    h: f64,
    v: [f64; 9],
    est: f64,
    err: f64,
}

impl Panel {
    fn new(u0: f64, h: f64, v: [f64; 9]) -> Panel {
        let (est, err) = romberg9(&v, h);
        Panel { u0, h, v, est, err }
    }
}

/// Romberg table from 9 equally spaced values (trapezoid with 1, 2, 4, 8 intervals).
fn romberg9(v: &[f64; 9], h: f64) -> (f64, f64) {
    let ends = 0.5 * (v[0] + v[8]);
    let t0 = 8.0 * h * ends;
    let t1 = 4.0 * h * (ends + v[4]);
    let t2 = 2.0 * h * (ends + v[2] + v[4] + v[6]);
    let t3 = h * (ends + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]);
    let r11 = t1 + (t1 - t0) / 3.0;
    let r21 = t2 + (t2 - t1) / 3.0;
    let r31 = t3 + (t3 - t2) / 3.0;
    let r22 = r21 + (r21 - r11) / 15.0;
    let r32 = r31 + (r31 - r21) / 15.0;
    let r33 = r32 + (r32 - r22) / 63.0;
    (r33, (r33 - r22).abs())
}

/// One stretch of the integration range: the integrand must be smooth inside it (it may jump
/// between segments).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Segment {
    pub a: f64,
    pub b: f64,
    /// The first round samples the segment at most this far apart. A feature narrower than the
    /// first round's spacing can fall between samples, where no error estimate sees it, so the
    /// caller, who knows where its features are, says how fine they need the start to be.
    pub max_h: f64,
}

#[cfg(test)]
impl Segment {
    /// A segment with no known feature: the first round spreads its panels by length.
    pub fn plain(a: f64, b: f64) -> Segment {
        Segment {
            a,
            b,
            max_h: f64::INFINITY,
        }
    }
}

/// Panels the first round needs on a segment of `len` for its samples to lie at most `max_h`
/// apart (8 intervals per panel); 0 when nothing narrow needs resolving (`max_h` infinite).
pub(crate) fn feature_panels(len: f64, max_h: f64) -> usize {
    let n = (len / (8.0 * max_h)).ceil();
    if n.is_finite() {
        n as usize
    } else {
        0
    }
}

/// Integrate over consecutive `segments`. `eval(runs, out)` appends one value per abscissa.
pub(crate) fn integrate<F>(segments: &[Segment], opts: &QuadOptions, scale: f64, mut eval: F) -> QuadResult
where
    F: FnMut(&[Run], &mut Vec<f64>),
{
    let segments: Vec<Segment> = segments.iter().copied().filter(|s| s.b > s.a).collect();
    let total: f64 = segments.iter().map(|s| s.b - s.a).sum();
    if segments.is_empty() || !total.is_finite() {
        return QuadResult {
            converged: segments.is_empty(),
            ..QuadResult::default()
        };
    }
    let mut runs = Vec::with_capacity(segments.len());
    let mut per_seg = Vec::with_capacity(segments.len());
    for &Segment { a, b, max_h } in &segments {
        let by_length = (opts.initial_panels as f64 * (b - a) / total).round() as usize;
        let by_feature = feature_panels(b - a, max_h);
        let np = by_length.max(by_feature).max(2);
        per_seg.push(np);
        runs.push(Run {
            u0: a,
            h: (b - a) / (8 * np) as f64,
            count: 8 * np + 1,
        });
    }
    let mut out = Vec::new();
    eval(&runs, &mut out);
    let mut res = QuadResult {
        evals: out.len(),
        rounds: 1,
        ..QuadResult::default()
    };
    let mut panels = Vec::new();
    let mut off = 0;
    for (run, &np) in runs.iter().zip(&per_seg) {
        for i in 0..np {
            let mut v = [0.0; 9];
            v.copy_from_slice(&out[off + 8 * i..off + 8 * i + 9]);
            panels.push(Panel::new(run.u0 + (8 * i) as f64 * run.h, run.h, v));
        }
        off += run.count;
    }
    loop {
        let value: f64 = panels.iter().map(|p| p.est).sum();
        let error: f64 = panels.iter().map(|p| p.err).sum();
        let target = (opts.rel_tol * value.abs().max(scale)).max(opts.abs_tol);
        res.value = value;
        res.error = error;
        if error <= target {
            res.converged = true;
            return res;
        }
        if res.rounds >= opts.max_rounds {
            return res;
        }
        // Split the worst panels until the unsplit ones account for at most half the target.
        let mut order: Vec<usize> = (0..panels.len()).collect();
        order.sort_by(|&i, &j| panels[j].err.total_cmp(&panels[i].err));
        let mut rest = error;
        let mut chosen = Vec::new();
        for &i in &order {
            if rest <= 0.5 * target {
                break;
            }
            rest -= panels[i].err;
            chosen.push(i);
        }
        if panels.len() + chosen.len() > opts.max_panels {
            return res;
        }
        chosen.sort_by(|&i, &j| panels[i].u0.total_cmp(&panels[j].u0));
        // One run per maximal group of adjacent panels with the same spacing.
        let mut runs: Vec<Run> = Vec::new();
        for &i in &chosen {
            let p = &panels[i];
            let start = p.u0 + 0.5 * p.h;
            match runs.last_mut() {
                Some(r)
                    if (r.h - p.h).abs() <= 1e-12 * p.h
                        && (r.u0 + r.count as f64 * r.h - start).abs() <= 1e-9 * p.h =>
                {
                    r.count += 8
                }
                _ => runs.push(Run {
                    u0: start,
                    h: p.h,
                    count: 8,
                }),
            }
        }
        out.clear();
        eval(&runs, &mut out);
        res.evals += out.len();
        res.rounds += 1;
        for (c, &i) in chosen.iter().enumerate() {
            let mid = &out[8 * c..8 * c + 8];
            let p = &panels[i];
            let (h2, v) = (0.5 * p.h, p.v);
            let mut left = [0.0; 9];
            let mut right = [0.0; 9];
            for j in 0..9 {
                left[j] = if j % 2 == 0 { v[j / 2] } else { mid[j / 2] };
                right[j] = if j % 2 == 0 { v[4 + j / 2] } else { mid[4 + j / 2] };
            }
            let u0 = p.u0;
            panels[i] = Panel::new(u0, h2, left);
            panels.push(Panel::new(u0 + 8.0 * h2, h2, right));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval_fn(f: impl Fn(f64) -> f64) -> impl FnMut(&[Run], &mut Vec<f64>) {
        move |runs: &[Run], out: &mut Vec<f64>| {
            for r in runs {
                for i in 0..r.count {
                    out.push(f(r.u0 + i as f64 * r.h));
                }
            }
        }
    }

    #[test]
    fn smooth_and_peaked_integrands() {
        let o = QuadOptions::default();
        // ∫_0^π sin = 2.
        let r = integrate(&[Segment::plain(0.0, std::f64::consts::PI)], &o, 0.0, eval_fn(f64::sin));
        assert!(r.converged && (r.value - 2.0).abs() < 1e-12, "{r:?}");
        // A bump much narrower than the domain: refinement concentrates where the error is.
        let want = 0.1 * std::f64::consts::PI.sqrt();
        let r = integrate(
            &[Segment::plain(0.0, 10.0)],
            &QuadOptions { rel_tol: 1e-10, ..o },
            0.0,
            eval_fn(|u| (-((u - 3.3) / 0.1f64).powi(2)).exp()),
        );
        assert!(r.converged && (r.value - want).abs() < 1e-10 * want, "{r:?}");
        // Jumps between segments are exact when the segments split at them.
        // (The caller shrinks segments by a hair at a jump so end points see one-sided limits.)
        let segs = [Segment::plain(0.0, 1.0 - 1e-12), Segment::plain(1.0 + 1e-12, 3.0)];
        let r = integrate(&segs, &o, 0.0, eval_fn(|u| if u < 1.0 { 1.0 } else { 2.0 }));
        assert!((r.value - 5.0).abs() < 1e-11 && r.rounds == 1, "{r:?}");
    }

    #[test]
    fn a_feature_between_first_samples_needs_its_spacing() {
        // A bump 0.05 wide on [0, 100]: 16 panels sample it 0.78 apart, every sample misses
        // it, and the error estimate is 0. Sampled at most 0.05 apart where it lies, it is found.
        let f = |u: f64| 1.0 + (-((u - 37.3) / 0.05f64).powi(2)).exp();
        let want = 100.0 + 0.05 * std::f64::consts::PI.sqrt();
        let o = QuadOptions::default();
        let plain = integrate(&[Segment::plain(0.0, 100.0)], &o, 0.0, eval_fn(f));
        assert!(plain.converged && (plain.value - 100.0).abs() < 1e-6, "{plain:?}");
        let segs = [
            Segment::plain(0.0, 37.0),
            Segment {
                a: 37.0,
                b: 37.6,
                max_h: 0.05,
            },
            Segment::plain(37.6, 100.0),
        ];
        let found = integrate(&segs, &o, 0.0, eval_fn(f));
        assert!(found.converged && (found.value - want).abs() < 1e-9, "{found:?}");
    }

    #[test]
    fn batches_are_rounds_and_children_reuse_points() {
        let mut batches = 0;
        let mut points = 0;
        let r = integrate(
            &[Segment::plain(0.0, 30.0)],
            &QuadOptions::default(),
            0.0,
            |runs, out| {
                batches += 1;
                for run in runs {
                    points += run.count;
                    for i in 0..run.count {
                        let u = run.u0 + i as f64 * run.h;
                        out.push((-u).exp() * (1.0 + (3.0 * u).sin()));
                    }
                }
            },
        );
        // ∫_0^30 e^-u (1 + sin 3u) du = 1 + 3/10 (up to e^-30).
        assert!((r.value - 1.3).abs() < 1e-9, "{r:?}");
        assert_eq!(batches, r.rounds);
        assert_eq!(points, r.evals);
    }
}
