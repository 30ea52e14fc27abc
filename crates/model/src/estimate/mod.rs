//! Collective-time estimation from latency distributions ([Kaishima2005], extended to multi-stage plans).
//!
//! A collective finishes when its slowest receiver does, so its time is a *maximum* and is governed
//! by the tail of the latency distribution: a normal model underestimates E\[max\] for many
//! receivers when latencies are long-tailed (Pareto). This module is pure Rust (no MPI):
//!
//! - [`pareto`] / [`normal`]: the two latency models, their fits to a window of samples (Hill MLE
//!   with the degenerate cases of [Kaishima2005]; sample mean / sd) and closed forms for identical receivers
//!   (E\[max\] via log-gamma, the alternating sum of Eq. 8 for comparison, quantiles of the max).
//! - [`Marginal`]: one receiver's latency (Pareto, shifted or truncated Pareto, normal, point mass).
//! - [`MaxOf`]: E\[max\] and quantiles of the maximum over heterogeneous receivers by adaptive
//!   quadrature of `x_lo + ∫ (1 - Π F_j(x)) dx`, O(n) work per quadrature point.
//! - [`plan_time`]: the completion-time distribution of a whole broadcast [`Plan`](crate::plan::Plan)
//!   when every link's latency is random: a contention-free evaluator, Monte Carlo over the plan's
//!   dependency graph, and a semi-analytic grid approximation; [`predict_plan_time`] is the entry
//!   point the runtime profiler calls.
//!
//! Units: the closed forms and [`MaxOf`] are unit-free (give microseconds, get microseconds);
//! everything that reads a [`Topology`](crate::topology::Topology) works in seconds.

pub mod bucket;
pub mod calibrate;
pub mod curve_fit;
mod error;
mod fastmath;
mod grid;
pub mod library_calls;
mod marginal;
mod max_of;
pub mod normal;
pub mod pareto;
mod plan_dag;
pub mod plan_time;
mod quad;
pub mod rank_times;
pub mod release;
pub mod send_buffer;
pub mod send_curve;

pub use error::EstimateError;
pub use marginal::Marginal;
pub use max_of::{normal_expected_max_iid, paper_truncated_expected_max, MaxDistribution, MaxOf};
pub use normal::{fit_normal, Normal, NormalFit};
pub use pareto::{fit_pareto, Pareto, ParetoFit};
pub use plan_dag::{evaluate_deterministic, DeterministicTimes};
pub use plan_time::{
    analytic_plan_time, monte_carlo_plan_time, predict_plan_time, AnalyticOptions, CompletionStats, LatencyFamily,
    LinkLatencies, MaxRule, MonteCarloOptions, PlanPrediction, PlanTimeDistribution, PredictMethod, PredictOptions,
};

/// Fit both models to one window of latency samples (seconds) for a topology link.
///
/// The prober keeps the samples it takes per link and stores this on
/// [`Link::latency_fit`](crate::topology::Link); [`plan_time`] reads it back. A model whose fit
/// fails (e.g. a non-positive sample for Pareto) is left `None`.
pub fn fit_latency(samples_s: &[f64]) -> crate::topology::LatencyFit {
    crate::topology::LatencyFit {
        pareto: fit_pareto(samples_s).ok().map(|f| (f.k, f.alpha)),
        normal: fit_normal(samples_s).ok().map(|f| (f.mu, f.sigma)),
        samples: samples_s.len().min(u32::MAX as usize) as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fig4_pareto_overtakes_normal_and_the_gap_grows() {
        // The matched pairs of [Kaishima2005] (same mean and variance; Table 1 medians).
        let pairs: [((f64, f64), (f64, f64)); 2] = [((44.3, 2.8), (41.7, 16.9)), ((42.5, 1.59), (41.0, 27.7))];
        for ((mu, sigma), (k, alpha)) in pairs {
            let pm = alpha * k / (alpha - 1.0);
            let psd = k * (alpha / ((alpha - 1.0) * (alpha - 1.0) * (alpha - 2.0))).sqrt();
            assert!((pm - mu).abs() < 0.05 && (psd - sigma).abs() < 0.05, "pair is matched");
            // n = 2: the normal is still ahead (its E[max] is mu + sigma / sqrt(pi) exactly).
            let n2 = normal_expected_max_iid(mu, sigma, 2.0).unwrap();
            assert!((n2 - (mu + sigma / std::f64::consts::PI.sqrt())).abs() < 1e-7);
            assert!(pareto::expected_max_iid(k, alpha, 2.0) < n2);
            let mut prev_gap = 0.0;
            for e in 2..=12 {
                let n = f64::from(1u32 << e);
                let gap = pareto::expected_max_iid(k, alpha, n) - normal_expected_max_iid(mu, sigma, n).unwrap();
                assert!(gap > prev_gap, "n={n}: gap {gap} not above {prev_gap}");
                prev_gap = gap;
            }
            // By n = 4096 the normal model underestimates by more than 15%.
            assert!(prev_gap > 0.15 * normal_expected_max_iid(mu, sigma, 4096.0).unwrap());
        }
    }

    #[test]
    fn fit_latency_fills_both_models() {
        let s = [10e-6, 11e-6, 12e-6, 15e-6];
        let f = fit_latency(&s);
        assert_eq!(f.samples, 4);
        let (k, a) = f.pareto.unwrap();
        assert_eq!(k, 10e-6);
        let want = 4.0 / [1.0f64, 1.1, 1.2, 1.5].iter().map(|r| r.ln()).sum::<f64>();
        assert!((a - want).abs() < 1e-12 * want);
        let (mu, sd) = f.normal.unwrap();
        assert!((mu - 12e-6).abs() < 1e-18);
        assert!(sd > 0.0);
        // A non-positive sample rules out the Pareto model only.
        let g = fit_latency(&[0.0, 1e-6]);
        assert!(g.pareto.is_none() && g.normal.is_some());
    }
}
