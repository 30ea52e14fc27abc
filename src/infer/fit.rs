//! Latency distributions of host links from the kept ping samples.
//!
//! A host's link gets the one-way latency `leaf + (sample - pair minimum) / 2` for every sample of
//! every pair it took part in: end-host effects dominate jitter (the link latency itself is the
//! minimum), and half of a round trip's excess is attributed to each one-way message. Pareto:
//! minimum `k` = the leaf latency, tail index by the Hill / maximum-likelihood estimator
//! `alpha = n / sum ln(x_i / k)` (infinite when every sample equals the minimum). Normal: sample
//! mean and standard deviation. Fewer than 10 samples give no fit.

use crate::probe::PairMeasurement;
use crate::topology::LatencyFit;

/// Fit one link whose latency is `leaf_s` from the measurements `host` took part in.
pub(crate) fn fit_host_link<'a>(
    leaf_s: f64,
    measurements: impl Iterator<Item = &'a PairMeasurement>,
) -> Option<LatencyFit> {
    let mut xs = Vec::new();
    for m in measurements {
        let min = m.rtt_s();
        xs.extend(m.samples_s.iter().map(|&s| leaf_s + (s - min) / 2.0));
    }
    if xs.len() < 10 {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let pareto = if leaf_s > 0.0 {
        let log_sum: f64 = xs.iter().map(|&x| (x / leaf_s).ln()).sum();
        Some((leaf_s, if log_sum > 0.0 { n / log_sum } else { f64::INFINITY }))
    } else {
        None
    };
    Some(LatencyFit {
        pareto,
        normal: Some((mean, sd)),
        samples: xs.len() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_samples_have_an_infinite_tail_index() {
        let m = PairMeasurement::from_set_minima(0, 1, &[10e-6; 12]);
        let f = fit_host_link(2e-6, std::iter::once(&m)).unwrap();
        assert_eq!(f.samples, 12);
        assert_eq!(f.pareto, Some((2e-6, f64::INFINITY)));
        let (mean, sd) = f.normal.unwrap();
        assert!((mean - 2e-6).abs() < 1e-18 && sd < 1e-18, "{mean} {sd}");
        assert!(fit_host_link(
            2e-6,
            std::iter::once(&PairMeasurement::from_set_minima(0, 1, &[1.0; 3]))
        )
        .is_none());
    }

    #[test]
    fn hill_estimate_of_a_known_tail() {
        // Excess samples 0, 2k(e^(1/a)-1)... simpler: x_i/k = e^(c_i) with sum c_i = n / alpha.
        // Ten samples with x/k in {1, e^0.5 (x9)}: sum ln = 4.5 -> alpha = 10 / 4.5.
        let k = 1e-6;
        let e = 0.5f64.exp();
        let mut rtts = vec![10e-6];
        rtts.extend(std::iter::repeat_n(10e-6 + 2.0 * k * (e - 1.0), 9));
        let m = PairMeasurement {
            a: 0,
            b: 1,
            set_len: vec![10],
            samples_s: rtts,
        };
        let f = fit_host_link(k, std::iter::once(&m)).unwrap();
        let (kk, alpha) = f.pareto.unwrap();
        assert_eq!(kk, k);
        assert!((alpha - 10.0 / 4.5).abs() < 1e-9, "{alpha}");
    }
}
