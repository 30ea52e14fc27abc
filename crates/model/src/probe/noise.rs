//! Noise models of the simulated prober.
//!
//! Decisions (documented because accuracy results depend on them):
//! - **Jitter is added to each one-way message**, independently: a round trip between `a` and `b`
//!   takes `lat(a->b) + e1 + lat(b->a) + e2`. End-host effects (interrupt coalescing, scheduling,
//!   the MPI progress engine) dominate jitter on real clusters, and they act per message, not per
//!   switch hop; so the noise does not grow with the path length.
//! - `normal:sd_us=X`: `e ~ N(0, X)`, a one-way delay is floored at 0. Symmetric: it models timer
//!   and clock-read jitter; the minimum statistic is then biased low (by about two standard
//!   deviations for ~20 samples), equally for every pair.
//! - `lomax:scale_us=X,alpha=A`: `e ~ Lomax(X, A)` (Pareto type II on [0, inf): `P(e > t) =
//!   (1 + t/X)^-A`), heavy-tailed queueing/scheduling delay that only ever adds.
//! - Outliers: with probability `stall_prob` a whole pair measurement is *descheduled*: every
//!   sample of the window takes `stall` (uniform in 12..16 ms, docs/design.md §5.3) on top;
//!   independently each sample is a *spike* with probability `spike_prob` (uniform extra up to
//!   200 us, "rare outliers up to 200 us").
//! - A loaded host: every one-way message it sends or receives is late by
//!   `extra * (1 + X / 10)`, `X ~ Exp(1)`: every sample involving it is slow by a consistent
//!   additive excess (its minimum RTT is `2 * extra` too high) with some jitter on top, so its
//!   minima also differ a little from pair to pair.

use crate::util::rng::Rng;
use std::fmt;
use std::str::FromStr;

/// Per-message jitter distribution (times in seconds).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum NoiseSpec {
    #[default]
    None,
    Normal {
        sd_s: f64,
    },
    Lomax {
        scale_s: f64,
        alpha: f64,
    },
}

impl NoiseSpec {
    /// Draw the jitter of one one-way message (seconds; may be negative for `Normal`).
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        match *self {
            NoiseSpec::None => 0.0,
            NoiseSpec::Normal { sd_s } => sd_s * rng.normal(),
            NoiseSpec::Lomax { scale_s, alpha } => {
                let u = rng.f64(); // [0, 1)
                scale_s * ((1.0 - u).powf(-1.0 / alpha) - 1.0)
            }
        }
    }
}

impl fmt::Display for NoiseSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NoiseSpec::None => write!(f, "none"),
            NoiseSpec::Normal { sd_s } => write!(f, "normal:sd_us={}", sd_s * 1e6),
            NoiseSpec::Lomax { scale_s, alpha } => write!(f, "lomax:scale_us={},alpha={}", scale_s * 1e6, alpha),
        }
    }
}

/// Why a text is not a [`NoiseSpec`]: the spec as given and what is wrong with it.
/// [`Display`](fmt::Display) gives the line the CLI prints after `--noise`.
#[derive(Clone, Debug, PartialEq)]
pub struct NoiseSpecError {
    /// The spec, trimmed.
    pub spec: String,
    pub why: NoiseFault,
}

/// What is wrong with a noise spec.
#[derive(Clone, Debug, PartialEq)]
pub enum NoiseFault {
    /// A parameter without `=`.
    NotKeyValue(String),
    /// A value that does not parse as a number.
    NotANumber { key: String, value: String },
    /// A value that is negative or not finite.
    Negative { key: String },
    /// A parameter the kind needs and the spec lacks.
    Missing(&'static str),
    /// A parameter the kind does not take.
    UnknownParameter(String),
    /// A Lomax tail index of 0.
    AlphaNotPositive,
    /// A kind other than none, normal or lomax.
    UnknownKind(String),
}

impl fmt::Display for NoiseSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "noise '{}': ", self.spec)?;
        match &self.why {
            NoiseFault::NotKeyValue(part) => write!(f, "parameter '{part}' is not key=value"),
            NoiseFault::NotANumber { key, value } => write!(f, "{key} = '{value}' is not a number"),
            NoiseFault::Negative { key } => write!(f, "{key} must be a finite number >= 0"),
            NoiseFault::Missing(name) => write!(f, "missing parameter '{name}'"),
            NoiseFault::UnknownParameter(k) => write!(f, "unknown parameter '{k}'"),
            NoiseFault::AlphaNotPositive => f.write_str("alpha must be > 0"),
            NoiseFault::UnknownKind(other) => write!(
                f,
                "unknown kind '{other}' (expected none, normal:sd_us=X or lomax:scale_us=X,alpha=A)"
            ),
        }
    }
}

impl std::error::Error for NoiseSpecError {}

impl FromStr for NoiseSpec {
    type Err = NoiseSpecError;

    /// Parse `none`, `normal:sd_us=X` or `lomax:scale_us=X,alpha=A`.
    fn from_str(s: &str) -> Result<Self, NoiseSpecError> {
        let s = s.trim();
        parse_spec(s).map_err(|why| NoiseSpecError { spec: s.into(), why })
    }
}

/// The body of [`NoiseSpec::from_str`] on a trimmed spec; the caller adds the spec to the error.
fn parse_spec(s: &str) -> Result<NoiseSpec, NoiseFault> {
    let (kind, params) = s.split_once(':').unwrap_or((s, ""));
    let mut kv = Vec::new();
    for part in params.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| NoiseFault::NotKeyValue(part.into()))?;
        let x: f64 = v.trim().parse().map_err(|_| NoiseFault::NotANumber {
            key: k.trim().into(),
            value: v.trim().into(),
        })?;
        if !x.is_finite() || x < 0.0 {
            return Err(NoiseFault::Negative { key: k.trim().into() });
        }
        kv.push((k.trim().to_string(), x));
    }
    let get = |name: &'static str| -> Result<f64, NoiseFault> {
        kv.iter()
            .find(|(k, _)| k == name)
            .map(|&(_, v)| v)
            .ok_or(NoiseFault::Missing(name))
    };
    let allow = |names: &[&str]| -> Result<(), NoiseFault> {
        match kv.iter().find(|(k, _)| !names.contains(&k.as_str())) {
            Some((k, _)) => Err(NoiseFault::UnknownParameter(k.clone())),
            None => Ok(()),
        }
    };
    match kind {
        "none" => {
            allow(&[])?;
            Ok(NoiseSpec::None)
        }
        "normal" => {
            allow(&["sd_us"])?;
            Ok(NoiseSpec::Normal {
                sd_s: get("sd_us")? * 1e-6,
            })
        }
        "lomax" => {
            allow(&["scale_us", "alpha"])?;
            let alpha = get("alpha")?;
            if alpha <= 0.0 {
                return Err(NoiseFault::AlphaNotPositive);
            }
            Ok(NoiseSpec::Lomax {
                scale_s: get("scale_us")? * 1e-6,
                alpha,
            })
        }
        other => Err(NoiseFault::UnknownKind(other.into())),
    }
}

/// Rare disturbances on top of the jitter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outliers {
    /// Probability that a whole pair measurement is descheduled.
    pub stall_prob: f64,
    /// Extra time of every round trip of a descheduled measurement: uniform in this range (s).
    pub stall_s: (f64, f64),
    /// Probability that one round trip is a spike.
    pub spike_prob: f64,
    /// Largest extra time of a spike (uniform in 0..this), seconds.
    pub spike_max_s: f64,
}

impl Outliers {
    /// No outliers.
    pub const NONE: Outliers = Outliers {
        stall_prob: 0.0,
        stall_s: (12e-3, 16e-3),
        spike_prob: 0.0,
        spike_max_s: 200e-6,
    };

    /// The shapes measured on the emulated cluster (docs/design.md §5.3) at the given rates.
    pub fn emulated(stall_prob: f64, spike_prob: f64) -> Outliers {
        Outliers {
            stall_prob,
            spike_prob,
            ..Outliers::NONE
        }
    }
}

impl Default for Outliers {
    fn default() -> Self {
        Outliers::NONE
    }
}

/// A host whose every message is late (busy CPU, slow NIC driver).
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedHost {
    /// Host name (a `node` vertex, or a leaf of a host-level tree).
    pub host: String,
    /// Minimum extra one-way delay of each of its messages, seconds.
    pub extra_s: f64,
}

/// Everything that perturbs simulated RTT samples.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NoiseModel {
    pub jitter: NoiseSpec,
    pub outliers: Outliers,
    pub loaded: Vec<LoadedHost>,
}

impl NoiseModel {
    /// Only jitter, no outliers, no loaded host.
    pub fn jitter(jitter: NoiseSpec) -> Self {
        NoiseModel {
            jitter,
            ..NoiseModel::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_cli_forms() {
        assert_eq!("none".parse::<NoiseSpec>().unwrap(), NoiseSpec::None);
        assert_eq!(
            "normal:sd_us=1.5".parse::<NoiseSpec>().unwrap(),
            NoiseSpec::Normal { sd_s: 1.5e-6 }
        );
        let l = "lomax:scale_us=2,alpha=1.5".parse::<NoiseSpec>().unwrap();
        assert_eq!(
            l,
            NoiseSpec::Lomax {
                scale_s: 2e-6,
                alpha: 1.5
            }
        );
        assert_eq!(l.to_string(), "lomax:scale_us=2,alpha=1.5");
        for (bad, needle) in [
            ("gauss:sd_us=1", "unknown kind"),
            ("normal", "missing parameter 'sd_us'"),
            ("normal:sd_us=x", "not a number"),
            ("normal:sd_us=-1", ">= 0"),
            ("lomax:scale_us=2", "alpha"),
            ("lomax:scale_us=2,alpha=0", "alpha must be > 0"),
            ("normal:sd_us=1,beta=2", "unknown parameter 'beta'"),
            ("normal:sd_us", "key=value"),
        ] {
            let e = bad.parse::<NoiseSpec>().unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn lomax_has_the_right_tail() {
        // P(e > t) = (1 + t/scale)^-alpha; with scale 2, alpha 1.5: P(e > 2) = 2^-1.5 = 0.3536,
        // P(e > 6) = 4^-1.5 = 0.125; the median is 2 * (2^(1/1.5) - 1) = 1.1748.
        let spec = NoiseSpec::Lomax {
            scale_s: 2.0,
            alpha: 1.5,
        };
        let mut rng = Rng::new(3);
        let n = 200_000;
        let mut xs: Vec<f64> = (0..n).map(|_| spec.sample(&mut rng)).collect();
        assert!(xs.iter().all(|&x| x >= 0.0));
        let frac = |t: f64| xs.iter().filter(|&&x| x > t).count() as f64 / n as f64;
        assert!((frac(2.0) - 0.3536).abs() < 0.005, "{}", frac(2.0));
        assert!((frac(6.0) - 0.125).abs() < 0.004, "{}", frac(6.0));
        xs.sort_by(f64::total_cmp);
        assert!((xs[n / 2] - 1.1748).abs() < 0.02, "{}", xs[n / 2]);
    }
}
