//! Distributions on a uniform time grid: the arithmetic of the semi-analytic plan-time model.
//!
//! A random time is a vector of masses at `t_i = i * dt`, `i = 0..m`. Sums of independent times
//! are convolutions (FFT when both supports are long, direct otherwise); maxima of independent
//! times are products of CDFs. Mass that would fall beyond the last point is kept *at* the last
//! point and reported, so totals stay 1 and callers can see how much was clipped.
//!
//! Continuous latencies are discretised **mean-preservingly**: the mass of each cell `[t_i,
//! t_{i+1})` is split between its two end points so that the cell's conditional mean is kept.
//! Means of sums are then exact; each discretisation adds at most `dt²/4` of variance.

use super::Marginal;

/// The grid: `m` points spaced `dt` seconds apart, starting at 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Grid {
    pub dt: f64,
    pub m: usize,
}

/// Masses on the grid. `lo..hi` brackets the non-zero entries (the rest of `p` is zero).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pmf {
    pub p: Vec<f64>,
    pub lo: usize,
    pub hi: usize,
}

impl Grid {
    pub fn t(&self, i: usize) -> f64 {
        i as f64 * self.dt
    }

    fn empty(&self) -> Pmf {
        Pmf {
            p: vec![0.0; self.m],
            lo: 0,
            hi: 0,
        }
    }

    /// A deterministic time `x >= 0`, split between its two neighbouring points (mean kept).
    /// Returns the mass clipped at the last point.
    pub fn point(&self, x: f64) -> (Pmf, f64) {
        let mut out = self.empty();
        let clipped = self.add_at(&mut out.p, x.max(0.0), 1.0);
        out.trim();
        (out, clipped)
    }

    /// Add `mass` at position `x` (split linearly between neighbours); returns clipped mass.
    fn add_at(&self, p: &mut [f64], x: f64, mass: f64) -> f64 {
        let pos = x / self.dt;
        let last = self.m - 1;
        if pos >= last as f64 {
            p[last] += mass;
            return if pos > last as f64 { mass } else { 0.0 };
        }
        let i = pos.floor() as usize;
        let w = pos - i as f64;
        p[i] += mass * (1.0 - w);
        p[i + 1] += mass * w;
        0.0
    }

    /// Mean-preserving discretisation of a latency, clamped at 0 (latencies are not negative).
    /// Returns the pmf and the mass clipped at the last point.
    pub fn discretize(&self, d: &Marginal) -> (Pmf, f64) {
        if let Marginal::Point(v) = d {
            return self.point(*v);
        }
        let mut out = self.empty();
        let mut clipped = 0.0;
        // Cells outside [Q(1e-17), Q(1 - 1e-17)] hold less than 1e-17 each side: lump them.
        let x_lo = d.quantile(1e-17).max(0.0);
        let x_hi = d.upper_quantile(1e-17);
        let below = d.cdf(x_lo);
        if below > 0.0 {
            let m = d.partial_expectation(f64::NEG_INFINITY, x_lo).max(0.0);
            clipped += self.add_at(&mut out.p, (m / below).max(0.0), below);
        }
        let i0 = (x_lo / self.dt).floor() as usize;
        let i1 = ((x_hi / self.dt).ceil() as usize).min(self.m - 1);
        let mut a = x_lo;
        for i in i0..i1 {
            let b = self.t(i + 1).min(x_hi);
            if b <= a {
                continue;
            }
            let mass = d.cdf(b) - d.cdf(a);
            if mass > 0.0 {
                let mean = d.partial_expectation(a, b) / mass;
                clipped += self.add_at(&mut out.p, mean.clamp(a, b), mass);
            }
            a = b;
        }
        let rest = 1.0 - d.cdf(a);
        if rest > 0.0 {
            let m = d.partial_expectation(a, f64::INFINITY);
            let mean = if m.is_finite() { m / rest } else { f64::INFINITY };
            clipped += self.add_at(&mut out.p, mean.max(a), rest);
        }
        out.trim();
        (out, clipped)
    }
}

impl Pmf {
    /// Recompute `lo..hi` (exact zeros only: tails are kept however small).
    pub fn trim(&mut self) {
        self.lo = self.p.iter().position(|&x| x != 0.0).unwrap_or(0);
        self.hi = self.p.iter().rposition(|&x| x != 0.0).map_or(self.lo, |i| i + 1);
    }

    pub fn mean(&self, g: &Grid) -> f64 {
        (self.lo..self.hi).map(|i| self.p[i] * g.t(i)).sum()
    }

    /// Cumulative masses `F(t_i)` over the whole grid.
    pub fn cdf(&self) -> Vec<f64> {
        let mut acc = 0.0;
        self.p
            .iter()
            .map(|&x| {
                acc += x;
                acc.min(1.0)
            })
            .collect()
    }
}

/// Quantile with linear interpolation inside the cell that crosses `p` (masses are treated as
/// spread over `(t_{i-1}, t_i]`).
pub(crate) fn quantile_of_cdf(cdf: &[f64], g: &Grid, p: f64) -> f64 {
    let i = cdf.iter().position(|&f| f >= p).unwrap_or(cdf.len() - 1);
    if i == 0 {
        return 0.0;
    }
    let (f0, f1) = (cdf[i - 1], cdf[i]);
    let w = if f1 > f0 { (p - f0) / (f1 - f0) } else { 1.0 };
    g.t(i - 1) + w * g.dt
}

pub(crate) fn mean_of_cdf(cdf: &[f64], g: &Grid) -> f64 {
    let mut prev = 0.0;
    let mut m = 0.0;
    for (i, &f) in cdf.iter().enumerate() {
        m += (f - prev) * g.t(i);
        prev = f;
    }
    m
}

/// Distribution of the sum of two independent times. Returns it and the mass clipped at the
/// last point.
pub(crate) fn convolve(a: &Pmf, b: &Pmf, g: &Grid) -> (Pmf, f64) {
    let (la, lb) = (a.hi - a.lo, b.hi - b.lo);
    let mut out = vec![0.0; g.m];
    if la == 0 || lb == 0 {
        return (Pmf { p: out, lo: 0, hi: 0 }, 0.0);
    }
    let full = if la.min(lb) <= 48 || la * lb <= 1 << 16 {
        let mut full = vec![0.0; la + lb - 1];
        for (i, &x) in a.p[a.lo..a.hi].iter().enumerate() {
            if x != 0.0 {
                for (j, &y) in b.p[b.lo..b.hi].iter().enumerate() {
                    full[i + j] += x * y;
                }
            }
        }
        full
    } else {
        fft_convolve(&a.p[a.lo..a.hi], &b.p[b.lo..b.hi])
    };
    let start = a.lo + b.lo;
    let mut clipped = 0.0;
    for (k, &v) in full.iter().enumerate() {
        let v = v.max(0.0); // FFT round-off can leave -1e-17
        let idx = start + k;
        if idx < g.m {
            out[idx] += v;
        } else {
            out[g.m - 1] += v;
            clipped += v;
        }
    }
    let mut pmf = Pmf { p: out, lo: 0, hi: 0 };
    pmf.trim();
    (pmf, clipped)
}

/// Distribution of the maximum of independent times: the product of their CDFs.
pub(crate) fn max_independent(parts: &[&Pmf], g: &Grid) -> Pmf {
    let mut cdf = vec![1.0; g.m];
    for part in parts {
        for (c, f) in cdf.iter_mut().zip(part.cdf()) {
            *c *= f;
        }
    }
    pmf_of_cdf(&cdf)
}

pub(crate) fn pmf_of_cdf(cdf: &[f64]) -> Pmf {
    let mut prev = 0.0;
    let p = cdf
        .iter()
        .map(|&f| {
            let d = (f - prev).max(0.0);
            prev = prev.max(f);
            d
        })
        .collect();
    let mut pmf = Pmf { p, lo: 0, hi: 0 };
    pmf.trim();
    pmf
}

/// Linear convolution by a radix-2 complex FFT (both inputs real).
fn fft_convolve(a: &[f64], b: &[f64]) -> Vec<f64> {
    let n_out = a.len() + b.len() - 1;
    let n = n_out.next_power_of_two();
    // Pack a into the real part and b into the imaginary part: one forward transform.
    let mut z: Vec<(f64, f64)> = (0..n)
        .map(|i| (a.get(i).copied().unwrap_or(0.0), b.get(i).copied().unwrap_or(0.0)))
        .collect();
    fft(&mut z, false);
    // A(k) = (Z(k) + conj Z(n-k)) / 2, B(k) = (Z(k) - conj Z(n-k)) / 2i; product A*B.
    let mut c = vec![(0.0, 0.0); n];
    for k in 0..n {
        let (zr, zi) = z[k];
        let (wr, wi) = z[(n - k) % n];
        let (ar, ai) = (0.5 * (zr + wr), 0.5 * (zi - wi));
        let (br, bi) = (0.5 * (zi + wi), -0.5 * (zr - wr));
        c[k] = (ar * br - ai * bi, ar * bi + ai * br);
    }
    fft(&mut c, true);
    c.truncate(n_out);
    c.into_iter().map(|(re, _)| re / n as f64).collect()
}

/// In-place iterative radix-2 FFT; `inverse` conjugates the twiddles (no 1/n scaling).
fn fft(x: &mut [(f64, f64)], inverse: bool) {
    let n = x.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            x.swap(i, j);
        }
    }
    let sign = if inverse { 1.0 } else { -1.0 };
    let mut len = 2;
    while len <= n {
        let ang = sign * 2.0 * std::f64::consts::PI / len as f64;
        let half = len / 2;
        let tw: Vec<(f64, f64)> = (0..half)
            .map(|k| ((ang * k as f64).cos(), (ang * k as f64).sin()))
            .collect();
        for start in (0..n).step_by(len) {
            for k in 0..half {
                let (ur, ui) = x[start + k];
                let (vr, vi) = x[start + k + half];
                let (wr, wi) = tw[k];
                let (tr, ti) = (vr * wr - vi * wi, vr * wi + vi * wr);
                x[start + k] = (ur + tr, ui + ti);
                x[start + k + half] = (ur - tr, ui - ti);
            }
        }
        len <<= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::{Normal, Pareto};

    #[test]
    fn discretisation_keeps_mass_and_mean() {
        let g = Grid { dt: 0.05, m: 4000 };
        for d in [
            Marginal::Pareto(Pareto::new(2.0, 3.0).unwrap()),
            Marginal::Pareto(Pareto::new(1.0, 5.0).unwrap().shifted(3.0).unwrap()),
            Marginal::Normal(Normal::new(10.0, 1.5).unwrap()),
            Marginal::Point(7.03),
        ] {
            let (p, clipped) = g.discretize(&d);
            let mass: f64 = p.p.iter().sum();
            assert!((mass - 1.0).abs() < 1e-12, "{d:?}: mass {mass}");
            // Pareto(2, 3) has mass 8e-6 beyond the grid end 200; it is clipped there.
            assert!(clipped < 1e-5);
            assert!(
                (p.mean(&g) - d.mean()).abs() < 2e-3 * d.mean(),
                "{d:?}: {} vs {}",
                p.mean(&g),
                d.mean()
            );
        }
        // A point exactly on the grid is one mass; between points it is split by the mean.
        let (p, _) = g.point(0.125);
        assert!((p.p[2] - 0.5).abs() < 1e-12 && (p.p[3] - 0.5).abs() < 1e-12);
    }

    #[test]
    fn convolution_direct_and_fft_agree() {
        let g = Grid { dt: 0.01, m: 3000 };
        let a = g.discretize(&Marginal::Normal(Normal::new(5.0, 1.0).unwrap())).0;
        let b = g.discretize(&Marginal::Pareto(Pareto::new(3.0, 4.0).unwrap())).0;
        assert!((a.hi - a.lo) * (b.hi - b.lo) > 1 << 16, "must take the FFT path");
        let (c, clipped) = convolve(&a, &b, &g);
        let direct = {
            let mut full = vec![0.0; g.m];
            for i in a.lo..a.hi {
                for j in b.lo..b.hi {
                    full[(i + j).min(g.m - 1)] += a.p[i] * b.p[j];
                }
            }
            full
        };
        let worst = c.p.iter().zip(&direct).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-14, "{worst}");
        // Means add (Pareto(3,4) mean 4; the part beyond the grid end is held there, so a hair less).
        assert!((c.mean(&g) - 9.0).abs() < 2e-3, "{}", c.mean(&g));
        // Mass beyond the grid end (30) is P(Pareto + N(5, 1) > 30) ≈ (3 / 25)^4.
        let want = (3.0f64 / 25.0).powi(4);
        assert!((clipped / want - 1.0).abs() < 0.1, "{clipped} vs {want}");
    }

    #[test]
    fn maximum_of_two_points_and_quantiles() {
        let g = Grid { dt: 1.0, m: 10 };
        let (a, _) = g.point(3.0);
        let (b, _) = g.point(5.0);
        let m = max_independent(&[&a, &b], &g);
        assert_eq!(m.mean(&g), 5.0);
        // Two fair coins on {1, 2}: max is 2 with probability 3/4.
        let mut c = g.point(1.0).0;
        c.p[1] = 0.5;
        c.p[2] = 0.5;
        c.trim();
        let m = max_independent(&[&c, &c], &g);
        assert!((m.mean(&g) - 1.75).abs() < 1e-15);
        assert!((quantile_of_cdf(&m.cdf(), &g, 0.25) - 1.0).abs() < 1e-12);
        assert!((quantile_of_cdf(&m.cdf(), &g, 0.625) - 1.5).abs() < 1e-12);
        assert!((mean_of_cdf(&m.cdf(), &g) - 1.75).abs() < 1e-15);
    }
}
