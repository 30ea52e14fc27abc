//! The normal latency model: the baseline of [Kaishima2005].
//!
//! Fit: sample mean and standard deviation of the window (`n - 1` denominator). A window whose
//! samples are all equal has sigma 0: [Kaishima2005] then replaces the density with a delta at mu,
//! which [`NormalFit::marginal`] does. There is no closed form for E\[max\] of n normals; it is
//! computed by [`MaxOf`](super::MaxOf) quadrature ([`super::normal_expected_max_iid`], beside
//! `MaxOf` so that this module stays below it). Quantiles of the maximum
//! of n iid normals are closed-form: `mu + sigma * Phi^-1(p^(1/n))`.

use super::EstimateError;
use statrs::function::erf::{erfc, erfc_inv};
use std::f64::consts::{FRAC_1_SQRT_2, SQRT_2};

/// Standard normal density.
pub fn std_pdf(z: f64) -> f64 {
    const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
    INV_SQRT_2PI * (-0.5 * z * z).exp()
}

/// Standard normal CDF, accurate in the lower tail (via erfc, no cancellation).
pub fn std_cdf(z: f64) -> f64 {
    0.5 * erfc(-z * FRAC_1_SQRT_2)
}

/// Standard normal survival `1 - Phi(z)`, accurate in the upper tail.
pub fn std_sf(z: f64) -> f64 {
    0.5 * erfc(z * FRAC_1_SQRT_2)
}

/// `z` with `std_sf(z) = q`, accurate for tiny `q` (used for the far quantiles of a maximum).
pub fn std_inv_sf(q: f64) -> f64 {
    SQRT_2 * erfc_inv(2.0 * q)
}

/// Normal latency with mean `mu` and standard deviation `sigma > 0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Normal {
    pub mu: f64,
    pub sigma: f64,
}

impl Normal {
    /// Validated constructor: finite mu, finite sigma > 0.
    pub fn new(mu: f64, sigma: f64) -> Result<Normal, EstimateError> {
        if !mu.is_finite() {
            return Err(EstimateError::NormalMean(mu));
        }
        if !(sigma.is_finite() && sigma > 0.0) {
            return Err(EstimateError::NormalSigma(sigma));
        }
        Ok(Normal { mu, sigma })
    }
    pub fn cdf(&self, x: f64) -> f64 {
        std_cdf((x - self.mu) / self.sigma)
    }
    pub fn sf(&self, x: f64) -> f64 {
        std_sf((x - self.mu) / self.sigma)
    }
    /// Quantile; `p` in (0, 1).
    pub fn quantile(&self, p: f64) -> f64 {
        if p >= 0.5 {
            self.mu + self.sigma * std_inv_sf(1.0 - p)
        } else {
            self.mu - self.sigma * std_inv_sf(p)
        }
    }
    /// `∫_a^b x dF(x)`: mean-preserving discretisation needs the mass-weighted cell centres.
    pub fn partial_expectation(&self, a: f64, b: f64) -> f64 {
        let (za, zb) = ((a - self.mu) / self.sigma, (b - self.mu) / self.sigma);
        let mass = if za > 0.0 {
            std_sf(za) - std_sf(zb)
        } else {
            std_cdf(zb) - std_cdf(za)
        };
        let dens = |z: f64| if z.is_finite() { std_pdf(z) } else { 0.0 };
        self.mu * mass + self.sigma * (dens(za) - dens(zb))
    }
    /// `∫_x^∞ sf(t) dt` (the first-order tail of E\[max\] beyond the quadrature range).
    pub fn tail_integral(&self, x: f64) -> f64 {
        let z = (x - self.mu) / self.sigma;
        self.sigma * (std_pdf(z) - z * std_sf(z))
    }
}

/// Sample mean and standard deviation of a window of `m` observations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NormalFit {
    pub mu: f64,
    /// Standard deviation with the `m - 1` denominator (0 for a single sample).
    pub sigma: f64,
    pub m: usize,
}

/// Fit the normal model to a window. Errors on an empty window or a non-finite sample.
pub fn fit_normal(samples: &[f64]) -> Result<NormalFit, EstimateError> {
    if samples.is_empty() {
        return Err(EstimateError::NoSamples { model: "normal" });
    }
    if let Some((i, x)) = samples.iter().enumerate().find(|(_, x)| !x.is_finite()) {
        return Err(EstimateError::NormalSample {
            index: i + 1,
            value: *x,
        });
    }
    let m = samples.len();
    let mu = samples.iter().sum::<f64>() / m as f64;
    let ss: f64 = samples.iter().map(|x| (x - mu) * (x - mu)).sum();
    let sigma = if m > 1 { (ss / (m - 1) as f64).sqrt() } else { 0.0 };
    Ok(NormalFit { mu, sigma, m })
}

/// Quantile `p` of the maximum of `n` iid normal receivers: `mu + sigma * Phi^-1(p^(1/n))`,
/// evaluated through the survival `1 - p^(1/n) = -expm1(ln p / n)` so large `n` keeps precision.
pub fn max_quantile_iid(mu: f64, sigma: f64, n: f64, p: f64) -> f64 {
    let q = -(p.ln() / n).exp_m1();
    let z = if q <= 0.5 { std_inv_sf(q) } else { -std_inv_sf(1.0 - q) };
    mu + sigma * z
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::Marginal;

    #[test]
    fn std_normal_values() {
        // Reference values (correctly rounded erfc): statrs' erfc is good to ~1e-10 relative.
        assert!((std_cdf(1.96) - 0.975_002_104_851_780).abs() < 1e-11);
        assert!((std_pdf(0.0) - 0.398_942_280_401_432_7).abs() < 1e-15);
        assert!((std_cdf(-8.0) / 6.220_960_574_271_784e-16 - 1.0).abs() < 1e-9);
        assert!((std_sf(8.0) / 6.220_960_574_271_784e-16 - 1.0).abs() < 1e-9);
        assert!((std_inv_sf(6.220_960_574_271_784e-16) - 8.0).abs() < 1e-8);
        let n = Normal::new(44.3, 2.8).unwrap();
        assert!((n.quantile(0.975) - (44.3 + 2.8 * 1.959_963_984_540_054)).abs() < 1e-9);
        assert!((n.quantile(0.025) - (44.3 - 2.8 * 1.959_963_984_540_054)).abs() < 1e-9);
    }

    #[test]
    fn fit_and_degenerate_window() {
        let f = fit_normal(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(f.mu, 2.5);
        assert!((f.sigma - (5.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert_eq!(fit_normal(&[7.0, 7.0]).unwrap().marginal(), Marginal::Point(7.0));
        assert_eq!(fit_normal(&[7.0]).unwrap().marginal(), Marginal::Point(7.0));
        assert!(fit_normal(&[]).is_err());
        assert!(fit_normal(&[1.0, f64::NAN]).unwrap_err().to_string().contains("#2"));
        assert!(Normal::new(1.0, 0.0).is_err());
    }

    #[test]
    fn partial_expectation_and_tail_integral() {
        let n = Normal::new(10.0, 2.0).unwrap();
        // Whole line: the mean.
        assert!((n.partial_expectation(f64::NEG_INFINITY, f64::INFINITY) - 10.0).abs() < 1e-12);
        // Symmetric half: mu/2 - sigma * phi(0) on (-inf, mu].
        let half = n.partial_expectation(f64::NEG_INFINITY, 10.0);
        assert!((half - (5.0 - 2.0 * std_pdf(0.0))).abs() < 1e-12);
        // E[(X - mu)^+] = sigma * phi(0) = tail_integral(mu).
        assert!((n.tail_integral(10.0) - 2.0 * std_pdf(0.0)).abs() < 1e-12);
    }

    #[test]
    fn iid_max_small_n() {
        // E[max of 2 standard normals] = 1/sqrt(pi); of 3: 3/(2 sqrt(pi)). The quadrature's
        // default tolerance is 1e-6 of max(E, |start of range|), about 9 sigma here.
        let e2 = super::super::normal_expected_max_iid(0.0, 1.0, 2.0).unwrap();
        assert!((e2 - 1.0 / std::f64::consts::PI.sqrt()).abs() < 1e-7, "{e2}");
        let e3 = super::super::normal_expected_max_iid(5.0, 2.0, 3.0).unwrap();
        assert!(
            (e3 - (5.0 + 2.0 * 1.5 / std::f64::consts::PI.sqrt())).abs() < 1e-7,
            "{e3}"
        );
        assert_eq!(super::super::normal_expected_max_iid(5.0, 0.0, 3.0).unwrap(), 5.0);
        // Median of the max of 2: Phi(z)^2 = 1/2.
        let z = max_quantile_iid(0.0, 1.0, 2.0, 0.5);
        assert!((std_cdf(z).powi(2) - 0.5).abs() < 1e-12);
    }
}
