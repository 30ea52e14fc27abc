//! Latency distributions of every link of the inferred tree from the kept ping samples.
//!
//! Probing only observes whole paths: a sample of pair `(a, b)` is a round trip over every link
//! between them. Each sample's **one-way excess** `x = (sample - measurement minimum) / 2` (the
//! minimum is the path's own latency, everything above it is queueing, scheduling and jitter;
//! half of a round trip's excess belongs to each one-way message) is shared among the links of
//! the path, and each link is fitted to `latency + its share` of every sample of every pair whose
//! path crosses it. Host links and switch-to-switch links are treated alike.
//!
//! **How the excess is shared** (network delay tomography, as in Shepp & Vardi's EM for emission
//! tomography and its use for link delays from end-to-end paths): model a link's one-way excess
//! as an independent non-negative variable with mean `m_e`, so a pair's mean excess is the sum
//! of `m_e` over its path (means add along a path whatever the distributions). The `m_e` are
//! estimated from all pairs at once by the multiplicative EM (Richardson-Lucy) iteration
//! `m_e <- m_e * sum_p w_p (mu_p / muhat_p) / sum_p w_p` over the pairs `p` crossing `e`, where
//! `mu_p` is the measured mean excess of the pair, `muhat_p` the current sum along its path and
//! `w_p` its number of samples. It keeps every `m_e >= 0`, converges to the non-negative
//! (Poisson-likelihood) fit of the path means, and splits excess evenly between links no pair
//! can tell apart (e.g. the two links of a two-host tree). Each sample's excess `x` is then split
//! in proportion `m_e / muhat_p`, so the shares of a sample add up to its excess exactly and
//! each link's mean share is its `m_e`: summing link latencies along a path (as the plan-time
//! estimator does) reproduces the measured mean excess of every pair instead of counting the
//! end hosts' jitter once per link. With the simulated prober's end-host jitter (the same on
//! every path, whatever its length) the fit puts the excess on host links and next to nothing on
//! switch-to-switch links, as it should.
//!
//! Models per link: Pareto with minimum `k` = the link's latency and tail index by the Hill /
//! maximum-likelihood estimator `alpha = n / sum ln(x_i / k)` (infinite when every share is 0; no
//! Pareto for a zero-latency link), normal with the samples' mean and standard deviation. The
//! statistics are accumulated, not stored, so a link crossed by many pairs costs no memory.
//! Links with fewer than [`MIN_SAMPLES`] samples get no fit.

use crate::probe::PairMeasurement;
use crate::topology::LatencyFit;

/// Fewest samples a fit is made from.
pub(crate) const MIN_SAMPLES: u64 = 10;

/// Most EM sweeps; stop earlier when no link's mean excess moves by more than [`EM_TOL`]
/// (relative). The path means are fitted far better than the sampling noise of `mu_p` after a
/// few tens of sweeps; the cap bounds the cost on huge trees.
const EM_SWEEPS: usize = 200;
const EM_TOL: f64 = 1e-6;

/// One pair's samples and the links (indices into the link list) its path crosses.
pub(crate) struct PathSamples<'a> {
    pub measurement: &'a PairMeasurement,
    pub links: Vec<usize>,
}

/// Running sums of one link's samples `latency + share`.
#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    n: u64,
    sum_share: f64,
    sum_share2: f64,
    /// sum ln((latency + share) / latency), for Hill with k = latency.
    sum_log: f64,
}

impl Acc {
    fn add(&mut self, latency: f64, share: f64) {
        self.n += 1;
        self.sum_share += share;
        self.sum_share2 += share * share;
        if latency > 0.0 {
            self.sum_log += (share / latency).ln_1p();
        }
    }

    fn finish(&self, latency: f64) -> Option<LatencyFit> {
        if self.n < MIN_SAMPLES {
            return None;
        }
        let n = self.n as f64;
        let mean_share = self.sum_share / n;
        let var = ((self.sum_share2 - n * mean_share * mean_share) / (n - 1.0)).max(0.0);
        let pareto = (latency > 0.0).then(|| {
            let alpha = if self.sum_log > 0.0 {
                n / self.sum_log
            } else {
                f64::INFINITY
            };
            (latency, alpha)
        });
        Some(LatencyFit {
            pareto,
            normal: Some((latency + mean_share, var.sqrt())),
            samples: self.n.min(u32::MAX as u64) as u32,
        })
    }
}

/// One-way excess of every sample of a measurement over its minimum, and their mean.
fn excess(m: &PairMeasurement) -> (impl Iterator<Item = f64> + '_, f64) {
    let min = m.rtt_s();
    let n = m.samples_s.len().max(1) as f64;
    let mean = m.samples_s.iter().map(|&s| (s - min) / 2.0).sum::<f64>() / n;
    (m.samples_s.iter().map(move |&s| (s - min) / 2.0), mean)
}

/// Mean one-way excess of every link (the EM fit of the path means, see the module docs).
/// Links no path crosses get 0.
pub(crate) fn link_mean_excess(num_links: usize, paths: &[PathSamples]) -> Vec<f64> {
    let obs: Vec<(f64, f64)> = paths
        .iter()
        .map(|p| (p.measurement.samples_s.len() as f64, excess(p.measurement).1))
        .collect();
    // Start from each link's average equal share of the pairs crossing it: positive wherever
    // some crossing pair has excess, and symmetric between links no pair tells apart.
    let mut weight = vec![0.0; num_links];
    let mut m = vec![0.0; num_links];
    for (p, &(w, mu)) in paths.iter().zip(&obs) {
        if p.links.is_empty() || w == 0.0 {
            continue;
        }
        for &e in &p.links {
            weight[e] += w;
            m[e] += w * mu / p.links.len() as f64;
        }
    }
    for e in 0..num_links {
        if weight[e] > 0.0 {
            m[e] /= weight[e];
        }
    }
    let mut ratio = vec![0.0; num_links];
    for _ in 0..EM_SWEEPS {
        ratio.iter_mut().for_each(|r| *r = 0.0);
        for (p, &(w, mu)) in paths.iter().zip(&obs) {
            let fitted: f64 = p.links.iter().map(|&e| m[e]).sum();
            if fitted > 0.0 {
                for &e in &p.links {
                    ratio[e] += w * mu / fitted;
                }
            }
        }
        let mut moved = 0.0f64;
        for e in 0..num_links {
            if weight[e] > 0.0 && m[e] > 0.0 {
                let next = m[e] * ratio[e] / weight[e];
                moved = moved.max((next - m[e]).abs() / next.max(m[e]));
                m[e] = next;
            }
        }
        if moved < EM_TOL {
            break;
        }
    }
    m
}

/// Fit every link from the samples of the pairs whose paths cross it. `latency[e]` is link
/// `e`'s one-way latency (the Pareto minimum); `paths` name links by index into `latency`.
pub(crate) fn fit_links(latency: &[f64], paths: &[PathSamples]) -> Vec<Option<LatencyFit>> {
    let m = link_mean_excess(latency.len(), paths);
    let mut acc = vec![Acc::default(); latency.len()];
    for p in paths {
        let fitted: f64 = p.links.iter().map(|&e| m[e]).sum();
        let (xs, _) = excess(p.measurement);
        for x in xs {
            for &e in &p.links {
                // No link of this path has any mean excess: only pairs whose excess is all 0
                // (then every share is 0) or, in degenerate input, split evenly.
                let share = if fitted > 0.0 {
                    x * m[e] / fitted
                } else {
                    x / p.links.len() as f64
                };
                acc[e].add(latency[e], share);
            }
        }
    }
    acc.iter().zip(latency).map(|(a, &l)| a.finish(l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::rng::Rng;

    fn one_link(k: f64, m: &PairMeasurement) -> Option<LatencyFit> {
        fit_links(
            &[k],
            &[PathSamples {
                measurement: m,
                links: vec![0],
            }],
        )[0]
    }

    #[test]
    fn constant_samples_have_an_infinite_tail_index() {
        let m = PairMeasurement::from_set_minima(0, 1, &[10e-6; 12]);
        let f = one_link(2e-6, &m).unwrap();
        assert_eq!(f.samples, 12);
        assert_eq!(f.pareto, Some((2e-6, f64::INFINITY)));
        let (mean, sd) = f.normal.unwrap();
        assert!((mean - 2e-6).abs() < 1e-18 && sd < 1e-18, "{mean} {sd}");
        assert!(one_link(2e-6, &PairMeasurement::from_set_minima(0, 1, &[1.0; 3])).is_none());
    }

    #[test]
    fn hill_estimate_of_a_known_tail() {
        // Ten samples with x/k in {1, e^0.5 (x9)}: sum ln = 4.5 -> alpha = 10 / 4.5.
        let k = 1e-6;
        let e = 0.5f64.exp();
        let mut rtts = vec![10e-6];
        rtts.extend(std::iter::repeat_n(10e-6 + 2.0 * k * (e - 1.0), 9));
        let m = PairMeasurement {
            a: 0,
            b: 1,
            set_len: vec![10],
            waited_s: 0.0,
            samples_s: rtts,
        };
        let f = one_link(k, &m).unwrap();
        let (kk, alpha) = f.pareto.unwrap();
        assert_eq!(kk, k);
        assert!((alpha - 10.0 / 4.5).abs() < 1e-9, "{alpha}");
    }

    /// Three hosts below switch s, s below the root r, and two more hosts on r: links 0..3 =
    /// host links of h0..h2, 3 = s-r, 4 and 5 = host links of h3 and h4 (with only one host on
    /// r, links 3 and 4 would always be crossed together and only their sum could be known;
    /// hence the fifth host). Every link's one-way excess is 0 half of the time (so every pair's
    /// minimum is its base latency, as probing assumes) and exponential otherwise, with a known
    /// mean; a round trip draws each link twice (there and back). The EM recovers every link's
    /// mean, the inner link's included, and each link's fitted samples have that mean excess.
    #[test]
    fn inner_links_get_their_own_excess() {
        let means = [1e-6, 2e-6, 0.5e-6, 3e-6, 1.5e-6, 0.8e-6];
        let lat = [2e-6, 2e-6, 2e-6, 1e-6, 4e-6, 3e-6];
        let path = |a: usize, b: usize| -> Vec<usize> {
            let up = |h: usize| if h < 3 { vec![h, 3] } else { vec![h + 1] };
            let (pa, pb) = (up(a), up(b));
            if a < 3 && b < 3 {
                vec![a, b]
            } else {
                pa.into_iter().chain(pb).collect()
            }
        };
        let mut rng = Rng::new(7);
        let mut ms = Vec::new();
        let mut links = Vec::new();
        for a in 0..5 {
            for b in a + 1..5 {
                let p = path(a, b);
                let base: f64 = 2.0 * p.iter().map(|&e| lat[e]).sum::<f64>();
                let samples: Vec<f64> = (0..20_000)
                    .map(|_| {
                        // No delay half the time (so the pair's minimum is its base
                        // latency, as probing assumes), else exponential: mean means[e].
                        let draw = |e: usize, rng: &mut Rng| {
                            if rng.f64() < 0.5 {
                                0.0
                            } else {
                                -2.0 * means[e] * (1.0 - rng.f64()).ln()
                            }
                        };
                        base + p.iter().map(|&e| draw(e, &mut rng) + draw(e, &mut rng)).sum::<f64>()
                    })
                    .collect();
                ms.push(PairMeasurement {
                    a,
                    b,
                    set_len: vec![samples.len() as u32],
                    waited_s: 0.0,
                    samples_s: samples,
                });
                links.push(p);
            }
        }
        let paths: Vec<PathSamples> = ms
            .iter()
            .zip(&links)
            .map(|(m, l)| PathSamples {
                measurement: m,
                links: l.clone(),
            })
            .collect();
        let m = link_mean_excess(lat.len(), &paths);
        for (e, (&got, &want)) in m.iter().zip(&means).enumerate() {
            assert!((got / want - 1.0).abs() < 0.05, "link {e}: {got:e} vs {want:e}");
        }
        let fits = fit_links(&lat, &paths);
        for (e, f) in fits.iter().enumerate() {
            let f = f.unwrap();
            let crossing = links.iter().filter(|l| l.contains(&e)).count() as u32;
            assert_eq!(f.samples, crossing * 20_000, "link {e}");
            assert_eq!(f.pareto.unwrap().0, lat[e]);
            let (mu, _) = f.normal.unwrap();
            assert!(((mu - lat[e]) / means[e] - 1.0).abs() < 0.05, "link {e}: mean {mu:e}");
        }
    }

    /// Two links no pair tells apart (a two-host tree, exported as two half links): the excess
    /// is split evenly.
    #[test]
    fn indistinguishable_links_share_evenly() {
        let m = PairMeasurement::from_set_minima(0, 1, &[10e-6, 12e-6, 11e-6, 10e-6, 30e-6, 10.5e-6]);
        let paths = [PathSamples {
            measurement: &m,
            links: vec![0, 1],
        }];
        let mean = link_mean_excess(2, &paths);
        assert!((mean[0] - mean[1]).abs() < 1e-18 && mean[0] > 0.0, "{mean:?}");
        let mu = (0.0 + 2.0 + 1.0 + 0.0 + 20.0 + 0.5) * 1e-6 / 2.0 / 6.0;
        assert!((mean[0] + mean[1] - mu).abs() < 1e-15, "{mean:?} vs {mu}");
    }
}
