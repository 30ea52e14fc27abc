//! The Pareto latency model ([Kaishima2005]): `P(X > x) = (k / x)^alpha` for `x >= k`.
//!
//! Fit (Hill MLE over the whole window, [Kaishima2005] Eq. 11): `k = min X_i`,
//! `alpha = m / Σ ln(X_i / k)`. Two degenerate windows need care ([Kaishima2005] §3.3):
//! - all samples equal: the sum is 0, alpha is infinite and the model is a point mass at k;
//! - `alpha <= 1`: the mean (and E\[max\]) diverges. [Kaishima2005] cuts the integral at
//!   `x0 = k m^(1/alpha)` (Eq. 13), the point where the fitted survival equals `1/m`, the
//!   smallest survival a window of `m` samples can resolve. We model this as the latency being
//!   *clipped* at x0 (`min(X, x0)`: a proper distribution with an atom of mass `1/m` at x0), so
//!   quantiles, sampling and E\[max\] stay consistent. [Kaishima2005]'s own Eq. 12 integrates the
//!   unclipped density only up to x0 and drops that atom; [`super::paper_truncated_expected_max`]
//!   reproduces it for comparison.
//!
//! Identical receivers have a closed form (Eq. 8):
//! `E[max] = k Γ(n+1) Γ(1 - 1/α) / Γ(n + 1 - 1/α)`, evaluated through log-gamma. [Kaishima2005] writes
//! it as an alternating binomial sum, kept here ([`expected_max_alternating_sum`]) to show that the
//! sum cancels catastrophically: its terms grow like `2^n` while the result grows like `n^(1/α)`,
//! so double precision is exhausted near n = 40..60.

use super::EstimateError;
use crate::util::rng::Rng;
use statrs::function::gamma::ln_gamma;

/// Pareto latency `shift + Y`, `Y ~ Pareto(k, alpha)`, optionally clipped at `cap` (absolute).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pareto {
    /// Scale: the minimum of `Y` (> 0).
    pub k: f64,
    /// Tail index (> 0, finite; an infinite index is a point mass, see [`Marginal::Point`](super::Marginal::Point)).
    pub alpha: f64,
    /// Location shift `c` (the intra-cluster latency `c_i` of [Kaishima2005]); the support starts at `shift + k`.
    pub shift: f64,
    /// Clip point x0 (absolute, > shift + k): the latency is `min(shift + Y, x0)`.
    pub cap: Option<f64>,
}

impl Pareto {
    /// Validated unshifted, unclipped Pareto.
    pub fn new(k: f64, alpha: f64) -> Result<Pareto, EstimateError> {
        if !(k.is_finite() && k > 0.0) {
            return Err(EstimateError::ParetoScale(k));
        }
        if !(alpha.is_finite() && alpha > 0.0) {
            return Err(EstimateError::ParetoShape(alpha));
        }
        Ok(Pareto {
            k,
            alpha,
            shift: 0.0,
            cap: None,
        })
    }
    /// The same tail shifted by `c` (support starts at `c + k`).
    pub fn shifted(mut self, c: f64) -> Result<Pareto, EstimateError> {
        if !c.is_finite() {
            return Err(EstimateError::ParetoShift(c));
        }
        self.shift = c;
        Ok(self)
    }
    /// Clip at absolute `x0 > shift + k`.
    pub fn capped(mut self, x0: f64) -> Result<Pareto, EstimateError> {
        if x0.is_nan() || x0 <= self.lower() {
            return Err(EstimateError::ParetoCap {
                cap: x0,
                lower: self.lower(),
            });
        }
        self.cap = Some(x0);
        Ok(self)
    }
    /// Smallest possible value, `shift + k`.
    pub fn lower(&self) -> f64 {
        self.shift + self.k
    }
    fn cap_or_inf(&self) -> f64 {
        self.cap.unwrap_or(f64::INFINITY)
    }
    /// Survival `P(X > x)`.
    pub fn sf(&self, x: f64) -> f64 {
        if x < self.lower() {
            1.0
        } else if x >= self.cap_or_inf() {
            0.0
        } else {
            (self.k / (x - self.shift)).powf(self.alpha)
        }
    }
    pub fn cdf(&self, x: f64) -> f64 {
        1.0 - self.sf(x)
    }
    /// Quantile for `p` in [0, 1).
    pub fn quantile(&self, p: f64) -> f64 {
        if p <= 0.0 {
            return self.lower();
        }
        let x = self.shift + self.k * (1.0 - p).powf(-1.0 / self.alpha);
        x.min(self.cap_or_inf())
    }
    /// Mean; infinite when `alpha <= 1` and unclipped.
    pub fn mean(&self) -> f64 {
        self.lower() + self.tail_integral(self.lower())
    }
    /// Inverse-CDF sample.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        self.quantile(rng.f64())
    }
    /// `∫_x^∞ P(X > t) dt`: the first-order tail of E\[max\] beyond the quadrature range.
    pub fn tail_integral(&self, x: f64) -> f64 {
        let lo = self.lower();
        if x < lo {
            return (lo - x) + self.tail_integral(lo);
        }
        let y = x - self.shift;
        match self.cap {
            None if self.alpha <= 1.0 => f64::INFINITY,
            None => y * (self.k / y).powf(self.alpha) / (self.alpha - 1.0),
            Some(x0) if x >= x0 => 0.0,
            // ∫_y^{y0} (k/t)^a dt = k (k/y)^(a-1) [(y0/y)^(1-a) - 1] / (1 - a), stable at a = 1.
            Some(x0) => {
                self.k
                    * (self.k / y).powf(self.alpha - 1.0)
                    * expm1_over(1.0 - self.alpha, ((x0 - self.shift) / y).ln())
            }
        }
    }
    /// `∫_{(a,b]} x dF(x)` including the clip atom when it lies in `(a, b]` (the same half-open
    /// convention as `cdf(b) - cdf(a)`).
    pub fn partial_expectation(&self, a: f64, b: f64) -> f64 {
        let lo = self.lower();
        let hi = self.cap_or_inf();
        let (a1, b1) = (a.max(lo), b.min(hi));
        let mut sum = 0.0;
        if b1 > a1 {
            let (y1, y2) = (a1 - self.shift, b1 - self.shift);
            let (s1, s2) = ((self.k / y1).powf(self.alpha), (self.k / y2).powf(self.alpha));
            // ∫ y dF(y) over [y1, y2) = a k (k/y2)^(a-1) [(y2/y1)^(a-1) - 1] / (a - 1).
            let ey = if y2.is_infinite() {
                if self.alpha <= 1.0 {
                    f64::INFINITY
                } else {
                    self.alpha * self.k * (self.k / y1).powf(self.alpha - 1.0) / (self.alpha - 1.0)
                }
            } else {
                self.alpha
                    * self.k
                    * (self.k / y2).powf(self.alpha - 1.0)
                    * expm1_over(self.alpha - 1.0, (y2 / y1).ln())
            };
            sum += self.shift * (s1 - s2) + ey;
        }
        if let Some(x0) = self.cap {
            if a < x0 && x0 <= b {
                sum += x0 * self.sf_below_cap(x0);
            }
        }
        sum
    }
    /// Mass of the clip atom: the unclipped survival at x0.
    fn sf_below_cap(&self, x0: f64) -> f64 {
        (self.k / (x0 - self.shift)).powf(self.alpha)
    }
}

/// `expm1(t * d) / t`, with the limit `d` at `t = 0`.
fn expm1_over(t: f64, d: f64) -> f64 {
    if t == 0.0 {
        d
    } else {
        (t * d).exp_m1() / t
    }
}

/// Result of the Hill fit over a window of `m` samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParetoFit {
    /// Window minimum.
    pub k: f64,
    /// `m / Σ ln(X_i / k)`; infinite when all samples are equal.
    pub alpha: f64,
    pub m: usize,
}

impl ParetoFit {
    /// The truncation point `x0 = k m^(1/alpha)` of [Kaishima2005] (Eq. 13).
    pub fn truncation_point(&self) -> f64 {
        self.k * (self.m as f64).powf(1.0 / self.alpha)
    }
}

/// Hill MLE over the whole window. Errors on an empty window or a sample that is not a finite
/// positive number (the Pareto model needs `k > 0`); the message names the sample.
pub fn fit_pareto(samples: &[f64]) -> Result<ParetoFit, EstimateError> {
    if samples.is_empty() {
        return Err(EstimateError::NoSamples { model: "pareto" });
    }
    if let Some((i, x)) = samples.iter().enumerate().find(|(_, x)| !(x.is_finite() && **x > 0.0)) {
        return Err(EstimateError::ParetoSample {
            index: i + 1,
            value: *x,
        });
    }
    let k = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let s: f64 = samples.iter().map(|x| (x / k).ln()).sum();
    let m = samples.len();
    let alpha = if s > 0.0 { m as f64 / s } else { f64::INFINITY };
    Ok(ParetoFit { k, alpha, m })
}

/// `ln Γ(x) - ln Γ(x - b)` without the cancellation of two huge log-gammas for large `x`.
pub fn ln_gamma_ratio(x: f64, b: f64) -> f64 {
    let y = x - b;
    if x < 30.0 || y < 30.0 {
        return ln_gamma(x) - ln_gamma(y);
    }
    // Stirling: ln Γ(z) = (z - 1/2) ln z - z + ln(2π)/2 + c(z); subtracting term by term,
    // (x - 1/2) ln x - (y - 1/2) ln y = b ln x - (y - 1/2) ln(1 - b/x).
    let c = |z: f64| {
        let z2 = z * z;
        (1.0 / 12.0 - (1.0 / 360.0 - (1.0 / 1260.0 - 1.0 / (1680.0 * z2)) / z2) / z2) / z
    };
    b * x.ln() - (y - 0.5) * (-b / x).ln_1p() - b + c(x) - c(y)
}

/// E\[max\] of `n` iid `Pareto(k, alpha)` receivers: `k Γ(n+1) Γ(1-1/α) / Γ(n+1-1/α)` (Eq. 8's
/// closed form) via log-gamma. Infinite for `alpha <= 1`. `n >= 1` may be fractional.
pub fn expected_max_iid(k: f64, alpha: f64, n: f64) -> f64 {
    if alpha <= 1.0 {
        return f64::INFINITY;
    }
    if alpha.is_infinite() {
        return k;
    }
    let b = 1.0 / alpha;
    k * (ln_gamma_ratio(n + 1.0, b) + ln_gamma(1.0 - b)).exp()
}

/// [Kaishima2005] Eq. 8 as printed: `n k α Σ_{i=1}^{n} (-1)^(i-1) C(n-1, i-1) / (i α - 1)`, summed
/// in double precision. Exact in exact arithmetic; numerically useless beyond n ≈ 40..60.
pub fn expected_max_alternating_sum(k: f64, alpha: f64, n: u32) -> f64 {
    let mut binom = 1.0; // C(n-1, i-1)
    let mut sum = 0.0;
    for i in 1..=n {
        let sign = if i % 2 == 1 { 1.0 } else { -1.0 };
        sum += sign * binom / (i as f64 * alpha - 1.0);
        binom = binom * (n - i) as f64 / i as f64;
    }
    n as f64 * k * alpha * sum
}

/// Quantile `p` of the maximum of `n` iid receivers: `F^n = p`, so
/// `x = k (1 - p^(1/n))^(-1/α)` with `1 - p^(1/n) = -expm1(ln p / n)` (no cancellation).
pub fn max_quantile_iid(k: f64, alpha: f64, n: f64, p: f64) -> f64 {
    if alpha.is_infinite() {
        return k;
    }
    let q = -(p.ln() / n).exp_m1();
    k * q.powf(-1.0 / alpha)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::Marginal;

    #[test]
    fn hill_fit_by_hand() {
        // k = 2, logs: ln1 + ln2 + ln4 = 3 ln 2, alpha = 3 / (3 ln 2).
        let f = fit_pareto(&[4.0, 2.0, 8.0]).unwrap();
        assert_eq!(f.k, 2.0);
        assert!((f.alpha - 1.0 / 2f64.ln()).abs() < 1e-12);
        assert_eq!(f.m, 3);
        assert!(fit_pareto(&[]).is_err());
        assert!(fit_pareto(&[1.0, -1.0]).unwrap_err().to_string().contains("#2"));
        assert!(fit_pareto(&[1.0, 0.0]).is_err());
    }

    #[test]
    fn degenerate_windows() {
        // All equal: alpha infinite, point mass.
        let f = fit_pareto(&[5.0, 5.0, 5.0]).unwrap();
        assert!(f.alpha.is_infinite());
        assert_eq!(f.marginal(), Marginal::Point(5.0));
        // alpha <= 1: clipped at x0 = k m^(1/alpha) where the survival is exactly 1/m.
        let f = fit_pareto(&[1.0, 10.0, 100.0, 1000.0]).unwrap(); // sum ln = 6 ln 10, alpha = 0.2895
        assert!(f.alpha < 1.0);
        let x0 = f.truncation_point();
        assert!((x0 - 4f64.powf(1.0 / f.alpha)).abs() < 1e-9 * x0);
        match f.marginal() {
            Marginal::Pareto(p) => {
                assert_eq!(p.cap, Some(x0));
                let just_below = p.sf(x0 * (1.0 - 1e-12));
                assert!((just_below - 0.25).abs() < 1e-9, "{just_below}");
                assert_eq!(p.sf(x0), 0.0);
                assert!(p.mean().is_finite());
            }
            m => panic!("expected a clipped Pareto, got {m:?}"),
        }
    }

    #[test]
    fn hill_recovers_alpha_on_1e5_samples() {
        // Standard error of the Hill estimate is alpha / sqrt(m) = 0.3%; 5% is ~16 standard errors.
        for (k, alpha, seed) in [(41.7, 16.9, 1u64), (1e-5, 1.5, 2), (3.0, 3.0, 3)] {
            let p = Pareto::new(k, alpha).unwrap();
            let mut rng = Rng::new(seed);
            let xs: Vec<f64> = (0..100_000).map(|_| p.sample(&mut rng)).collect();
            let f = fit_pareto(&xs).unwrap();
            assert!(
                (f.alpha / alpha - 1.0).abs() < 0.05,
                "alpha {alpha}: fitted {}",
                f.alpha
            );
            assert!(f.k >= k && f.k < k * 1.001);
        }
    }

    #[test]
    fn distribution_functions() {
        let p = Pareto::new(2.0, 3.0).unwrap().shifted(1.0).unwrap();
        assert_eq!(p.lower(), 3.0);
        assert_eq!(p.sf(2.9), 1.0);
        assert!((p.sf(5.0) - 0.125).abs() < 1e-15); // (2/4)^3
        assert!((p.quantile(0.875) - 5.0).abs() < 1e-12);
        assert!((p.mean() - (1.0 + 3.0 * 2.0 / 2.0)).abs() < 1e-12);
        // Partial expectations over a split of the support add up to the mean.
        let parts = p.partial_expectation(0.0, 4.0) + p.partial_expectation(4.0, f64::INFINITY);
        assert!((parts - p.mean()).abs() < 1e-12);
        // Near alpha = 1 the stable forms still add up (clipped so the mean exists).
        let q = Pareto::new(1.0, 1.0).unwrap().capped(100.0).unwrap();
        let mean = 1.0 + 100f64.ln(); // k + ∫_1^100 dt/t
        assert!((q.mean() - mean).abs() < 1e-12);
        let parts = q.partial_expectation(0.0, 10.0) + q.partial_expectation(10.0, 1e9);
        assert!((parts - mean).abs() < 1e-12, "{parts} vs {mean}");
    }

    #[test]
    fn gamma_ratio_matches_direct_form() {
        for &x in &[31.0, 100.5, 1000.0, 12345.0] {
            for &b in &[0.01, 0.5, 1.0 / 1.05] {
                let direct = ln_gamma(x) - ln_gamma(x - b);
                assert!((ln_gamma_ratio(x, b) - direct).abs() < 1e-11 * direct.abs().max(1.0));
            }
        }
        // Γ(n+1)/Γ(n) = n exactly.
        assert!((ln_gamma_ratio(1e12 + 1.0, 1.0) - 1e12f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn closed_form_small_n_by_hand() {
        // n = 1: the mean a k / (a - 1). n = 2, a = 2: E[max] = k * 2 * Γ(1/2) / Γ(5/2) = 8k/3.
        assert!((expected_max_iid(3.0, 4.0, 1.0) - 4.0).abs() < 1e-12);
        assert!((expected_max_iid(1.5, 2.0, 2.0) - 4.0).abs() < 1e-12);
        assert!(expected_max_iid(1.0, 1.0, 5.0).is_infinite());
        // Quantile of the max: F(x)^n = p.
        let x = max_quantile_iid(2.0, 3.0, 10.0, 0.99);
        assert!(((1.0 - (2.0 / x).powi(3)).powi(10) - 0.99).abs() < 1e-12);
    }

    #[test]
    fn closed_form_matches_monte_carlo_within_half_a_percent() {
        // Monte Carlo of the maximum itself: if U ~ U(0,1), then Q_F(U^(1/n)) has CDF F^n, the
        // law of the maximum of n iid receivers, so one draw costs O(1) for any n (drawing n
        // receivers and taking the max is the same distribution). Sample counts come from the
        // closed-form variance of the maximum, E[M^2] = k^2 Γ(n+1) Γ(1-2/α) / Γ(n+1-2/α)
        // (finite for α > 2), so that 0.5% is five standard errors for every case.
        let mut rng = Rng::new(2024);
        let mut total = 0usize;
        for &(k, a) in &[(1.0, 3.0), (0.5, 5.0), (41.7, 16.9), (41.0, 27.7)] {
            for &n in &[1u32, 2, 3, 10, 50, 100, 1000, 5000, 10_000] {
                let nf = n as f64;
                let exact = expected_max_iid(k, a, nf);
                let m2 = k * k * (ln_gamma_ratio(nf + 1.0, 2.0 / a) + ln_gamma(1.0 - 2.0 / a)).exp();
                let sd = (m2 - exact * exact).sqrt();
                let samples = ((5.0 * sd / (0.005 * exact)).powi(2).ceil() as usize).max(1000);
                total += samples;
                let mut sum = 0.0;
                for _ in 0..samples {
                    let u = rng.f64().max(f64::MIN_POSITIVE);
                    let q = -(u.ln() / nf).exp_m1(); // 1 - u^(1/n), no cancellation
                    sum += k * q.powf(-1.0 / a);
                }
                let mc = sum / samples as f64;
                assert!(
                    (mc / exact - 1.0).abs() < 0.005,
                    "k={k} a={a} n={n}: MC {mc} vs closed form {exact} ({samples} samples)"
                );
            }
        }
        assert!(total < 6_000_000, "{total} samples");
    }

    #[test]
    fn alternating_sum_breaks_down_where_lgamma_does_not() {
        let (k, a) = (41.7, 16.9);
        for n in 1..=20u32 {
            let exact = expected_max_iid(k, a, n as f64);
            let alt = expected_max_alternating_sum(k, a, n);
            assert!((alt / exact - 1.0).abs() < 1e-9, "n={n}: {alt} vs {exact}");
        }
        // Terms grow like 2^n: by n = 60 the cancellation leaves no correct digit.
        let first_bad = (20..=100u32)
            .find(|&n| {
                let exact = expected_max_iid(k, a, n as f64);
                (expected_max_alternating_sum(k, a, n) / exact - 1.0).abs() > 0.01
            })
            .expect("the sum must break down");
        assert!((35..=65).contains(&first_bad), "breaks down at n = {first_bad}");
        let n = 80u32;
        let exact = expected_max_iid(k, a, n as f64);
        assert!((expected_max_alternating_sum(k, a, n) / exact - 1.0).abs() > 1.0);
        // The log-gamma form stays monotone and on the n^(1/α) asymptote (Eq. 9).
        let mut prev = 0.0;
        for n in [1.0, 10.0, 100.0, 1e3, 1e4, 1e6] {
            let e = expected_max_iid(k, a, n);
            assert!(e > prev);
            prev = e;
        }
        let asym = k * ln_gamma(1.0 - 1.0 / a).exp() * 1e6f64.powf(1.0 / a);
        assert!((prev / asym - 1.0).abs() < 1e-6);
    }
}
