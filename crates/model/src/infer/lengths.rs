//! Link lengths of a tree by least squares against one-way distances.
//!
//! Both ends of inference need it: joining fits the lengths of the tree it joins (weighted by
//! each pair's noise), and the refinement after insertion refits every link to every usable
//! measurement. It sits below both so that neither depends on the other for it. (Not to be
//! confused with [`super::fit`], which fits each link's latency *distribution* from samples.)

use super::store::Store;
use super::tree::WorkTree;

/// Usable measurements between hosts of the tree: (vertex a, vertex b, one-way distance), for
/// each pair `a < b` in the order of `a`, then of `b`'s first measurement with `a`.
///
/// Walks the measured partners of the tree's hosts rather than every pair measured: inference
/// grows dozens of trees at once (one per block of hosts) and refits each of them every round,
/// and scanning the whole store for each made this a third of inference's time at 2,048 hosts.
pub(crate) fn usable(t: &WorkTree, s: &Store) -> Vec<(usize, usize, f64)> {
    let mut out = Vec::new();
    for a in t.hosts() {
        let Some(va) = t.vertex_of(a) else { continue };
        for &b in s.partners(a) {
            let Some(vb) = t.vertex_of(b).filter(|_| b > a && !s.is_bad(a, b)) else {
                continue;
            };
            if let Some(o) = s.get(a, b) {
                out.push((va, vb, o.d));
            }
        }
    }
    out
}

/// Non-negative least squares of all link lengths against the usable measurements, excluding
/// those off by more than `5 * noise` (when `noise > 0`).
pub(crate) fn refit(t: &mut WorkTree, s: &Store, noise: f64, sweeps: usize) {
    let obs: Vec<(usize, usize, f64)> = usable(t, s)
        .into_iter()
        .filter(|&(a, b, d)| noise <= 0.0 || (d - t.dist(a, b)).abs() <= 5.0 * noise)
        .collect();
    fit_lengths(t, &obs, sweeps);
}

/// Non-negative least squares of all link lengths against `obs` (vertex, vertex, one-way
/// distance), starting from (and gently pulled towards) the current lengths.
pub(crate) fn fit_lengths(t: &mut WorkTree, obs: &[(usize, usize, f64)], sweeps: usize) {
    let weighted: Vec<(usize, usize, f64, f64)> = obs.iter().map(|&(a, b, d)| (a, b, d, 1.0)).collect();
    fit_lengths_weighted(t, &weighted, sweeps);
}

/// [`fit_lengths`] with a weight per observation (vertex, vertex, distance, weight): weighted
/// least squares, weights being inverse noise variances where they differ between pairs.
///
/// Projected Gauss-Seidel over the links, done on the residuals: updating one link touches only
/// the observations whose paths cross it, so a sweep costs the total path length of the
/// observations, not the square of the number of links (what a dense normal matrix costs, and
/// what made refitting a few-hundred-switch tree once per candidate link too slow). A small
/// ridge pulls every link towards its current estimate, which decides links no measurement
/// separates.
pub(crate) fn fit_lengths_weighted(t: &mut WorkTree, obs: &[(usize, usize, f64, f64)], sweeps: usize) {
    let links: Vec<usize> = t.vertices().filter(|&v| t.parent(v).is_some()).collect();
    let m = links.len();
    if m == 0 {
        return;
    }
    let mut index = vec![usize::MAX; links.iter().max().map_or(0, |&v| v + 1)];
    for (i, &v) in links.iter().enumerate() {
        index[v] = i;
    }
    let mut x: Vec<f64> = links.iter().map(|&v| t.len(v)).collect();
    let x0 = x.clone();
    // Each observation's links, each link's observations, and the diagonal of the normal matrix.
    let mut by_link: Vec<Vec<usize>> = vec![Vec::new(); m];
    let mut diag = vec![0.0f64; m];
    let mut resid: Vec<f64> = Vec::with_capacity(obs.len());
    let mut path = Vec::new();
    for (k, &(a, b, d, w)) in obs.iter().enumerate() {
        let mut fitted = 0.0;
        t.path_links(a, b, &mut path);
        for &v in &path {
            let i = index[v];
            by_link[i].push(k);
            diag[i] += w;
            fitted += x[i];
        }
        resid.push(d - fitted);
    }
    let ridge = 1e-6 * (diag.iter().sum::<f64>() / m as f64).max(1.0);
    for _ in 0..sweeps {
        let mut change = 0.0f64;
        for i in 0..m {
            // Minimise sum_k w_k (r_k + x_i - x_i')^2 + ridge (x_i' - x0_i)^2 over x_i' >= 0.
            let num: f64 = by_link[i].iter().map(|&k| obs[k].3 * (resid[k] + x[i])).sum::<f64>() + ridge * x0[i];
            let xi = (num / (diag[i] + ridge)).max(0.0);
            let delta = xi - x[i];
            if delta != 0.0 {
                for &k in &by_link[i] {
                    resid[k] -= delta;
                }
                x[i] = xi;
                change = change.max(delta.abs());
            }
        }
        if change < 1e-13 {
            break;
        }
    }
    for (i, &v) in links.iter().enumerate() {
        t.set_len(v, x[i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::tree::Point;
    use crate::probe::PairMeasurement;

    #[test]
    fn refit_recovers_lengths_from_consistent_measurements() {
        // Star of 3 hosts with leaves 1, 2, 3; the tree starts with wrong lengths.
        let mut t = WorkTree::new(3);
        t.init_pair(0, 1, 5.0);
        let v1 = t.vertex_of(1).unwrap();
        t.attach(Point::On { child: v1, up: 2.5 }, 2, 1.0);
        let mut s = Store::new(3);
        for (a, b, d) in [(0, 1, 3.0), (0, 2, 4.0), (1, 2, 5.0)] {
            s.add(PairMeasurement::from_set_minima(a, b, &[2.0 * d; 3]));
        }
        refit(&mut t, &s, 0.0, 300);
        for (h, want) in [(0, 1.0), (1, 2.0), (2, 3.0)] {
            assert!((t.leaf_len(h) - want).abs() < 1e-4, "host {h}: {}", t.leaf_len(h));
        }
    }
}
