//! One receiver's latency distribution.

use super::{Normal, NormalFit, Pareto, ParetoFit};
use crate::util::rng::Rng;

/// The latency of one receiver (or one link): the kinds [Kaishima2005] needs, including the degenerate
/// fits (point mass for alpha = ∞ or sigma = 0, clipped Pareto for alpha <= 1) and the
/// multi-cluster shift `c_i` (a shifted Pareto).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Marginal {
    Pareto(Pareto),
    Normal(Normal),
    /// A deterministic value (the delta function of [Kaishima2005]).
    Point(f64),
}

impl Marginal {
    /// `P(X <= x)`.
    pub fn cdf(&self, x: f64) -> f64 {
        match self {
            Marginal::Pareto(p) => p.cdf(x),
            Marginal::Normal(n) => n.cdf(x),
            Marginal::Point(v) => f64::from(u8::from(x >= *v)),
        }
    }
    /// `P(X > x)`, accurate in the upper tail.
    pub fn sf(&self, x: f64) -> f64 {
        match self {
            Marginal::Pareto(p) => p.sf(x),
            Marginal::Normal(n) => n.sf(x),
            Marginal::Point(v) => f64::from(u8::from(x < *v)),
        }
    }
    /// `ln P(X <= x)`, accurate both where the CDF is tiny and where it is close to 1.
    pub fn ln_cdf(&self, x: f64) -> f64 {
        let q = self.sf(x);
        if q < 0.5 {
            (-q).ln_1p()
        } else {
            self.cdf(x).ln()
        }
    }
    /// Quantile for `p` in (0, 1).
    pub fn quantile(&self, p: f64) -> f64 {
        match self {
            Marginal::Pareto(d) => d.quantile(p),
            Marginal::Normal(n) => n.quantile(p),
            Marginal::Point(v) => *v,
        }
    }
    /// The `x` with survival `P(X > x) = q`, for tiny `q` too (no `1 - q` rounding): far quantiles
    /// bound quadrature ranges and grids.
    pub fn upper_quantile(&self, q: f64) -> f64 {
        match self {
            Marginal::Pareto(p) => (p.shift + p.k * q.powf(-1.0 / p.alpha)).min(p.cap.unwrap_or(f64::INFINITY)),
            Marginal::Normal(n) => n.mu + n.sigma * super::normal::std_inv_sf(q),
            Marginal::Point(v) => *v,
        }
    }
    /// Mean (infinite for an unclipped Pareto with alpha <= 1).
    pub fn mean(&self) -> f64 {
        match self {
            Marginal::Pareto(p) => p.mean(),
            Marginal::Normal(n) => n.mu,
            Marginal::Point(v) => *v,
        }
    }
    /// Smallest value with positive probability (`-inf` for a normal).
    pub fn lower(&self) -> f64 {
        match self {
            Marginal::Pareto(p) => p.lower(),
            Marginal::Normal(_) => f64::NEG_INFINITY,
            Marginal::Point(v) => *v,
        }
    }
    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        match self {
            Marginal::Pareto(p) => p.sample(rng),
            Marginal::Normal(n) => n.mu + n.sigma * rng.normal(),
            Marginal::Point(v) => *v,
        }
    }
    /// `∫_{(a,b]} x dF(x)` (atoms at `b` included, at `a` not: matches `cdf(b) - cdf(a)`).
    pub fn partial_expectation(&self, a: f64, b: f64) -> f64 {
        match self {
            Marginal::Pareto(p) => p.partial_expectation(a, b),
            Marginal::Normal(n) => n.partial_expectation(a, b),
            Marginal::Point(v) => {
                if a < *v && *v <= b {
                    *v
                } else {
                    0.0
                }
            }
        }
    }
    /// `∫_x^∞ P(X > t) dt`.
    pub fn tail_integral(&self, x: f64) -> f64 {
        match self {
            Marginal::Pareto(p) => p.tail_integral(x),
            Marginal::Normal(n) => n.tail_integral(x),
            Marginal::Point(v) => (v - x).max(0.0),
        }
    }
    /// The same distribution shifted right by `c` (a deterministic delay added).
    pub fn shifted(&self, c: f64) -> Marginal {
        match *self {
            Marginal::Pareto(p) => Marginal::Pareto(Pareto {
                shift: p.shift + c,
                cap: p.cap.map(|x| x + c),
                ..p
            }),
            Marginal::Normal(n) => Marginal::Normal(Normal { mu: n.mu + c, ..n }),
            Marginal::Point(v) => Marginal::Point(v + c),
        }
    }
}

/// The fits' receiver models live here, beside `Marginal`, so that the distributions
/// (`normal`, `pareto`) stay below it.
impl NormalFit {
    /// The receiver model: a point mass at mu when sigma is 0 (the delta of [Kaishima2005]), else normal.
    pub fn marginal(&self) -> Marginal {
        if self.sigma > 0.0 {
            Marginal::Normal(Normal {
                mu: self.mu,
                sigma: self.sigma,
            })
        } else {
            Marginal::Point(self.mu)
        }
    }
}

impl ParetoFit {
    /// The receiver model with the degenerate cases of [Kaishima2005]: a point mass at k for infinite
    /// alpha, clipping at `x0 = k m^(1/alpha)` (Eq. 13) for `alpha <= 1`, else plain Pareto.
    pub fn marginal(&self) -> Marginal {
        if self.alpha.is_infinite() {
            return Marginal::Point(self.k);
        }
        let p = Pareto {
            k: self.k,
            alpha: self.alpha,
            shift: 0.0,
            cap: None,
        };
        if self.alpha <= 1.0 {
            Marginal::Pareto(Pareto {
                cap: Some(self.truncation_point()),
                ..p
            })
        } else {
            Marginal::Pareto(p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_agree_on_basic_identities() {
        let ms = [
            Marginal::Pareto(Pareto::new(2.0, 3.0).unwrap()),
            Marginal::Pareto(Pareto::new(2.0, 0.8).unwrap().capped(50.0).unwrap()),
            Marginal::Normal(Normal::new(10.0, 2.0).unwrap()),
            Marginal::Point(4.0),
        ];
        for m in ms {
            for p in [0.1, 0.5, 0.9] {
                let x = m.quantile(p);
                if !matches!(m, Marginal::Point(_)) {
                    // statrs' erfc / erfc_inv are good to ~1e-10 relative.
                    assert!((m.cdf(x) - p).abs() < 1e-10 * p, "{m:?} p={p}");
                }
                assert!((m.cdf(x) + m.sf(x) - 1.0).abs() < 1e-15);
            }
            // Mean = lower part + tail integral from any point, for every kind.
            let x = m.quantile(0.3);
            let split = m.partial_expectation(f64::NEG_INFINITY, x) + m.partial_expectation(x, f64::INFINITY);
            assert!((split - m.mean()).abs() < 1e-10 * m.mean().abs().max(1.0), "{m:?}");
            let s = m.shifted(5.0);
            assert!((s.mean() - m.mean() - 5.0).abs() < 1e-10);
            assert!((s.cdf(x + 5.0) - m.cdf(x)).abs() < 1e-12);
            if !matches!(m, Marginal::Point(_)) {
                let q = 1e-20;
                let x = m.upper_quantile(q);
                let sf = m.sf(x);
                assert!(sf == 0.0 || (sf / q - 1.0).abs() < 1e-9, "{m:?}: {sf:e}");
                // 0 past a clip point
            }
        }
        assert!((Marginal::Point(3.0).ln_cdf(3.0)).abs() < 1e-300);
        assert_eq!(Marginal::Point(3.0).ln_cdf(2.0), f64::NEG_INFINITY);
    }
}
