//! The tree from a complete distance matrix: rooted neighbour joining with a noise-adaptive
//! threshold.
//!
//! Why a second builder: insertion ([Shirai2007]) decides every placement from a handful of
//! measurements as they arrive, which is what makes it cheap on hundreds of hosts; but where
//! the noise of a minimum RTT is a sizeable fraction of the shortest real link (hosts emulated in
//! network namespaces: ~1 us of noise against 2-4 us links), each early decision can go wrong
//! and later ones build on it. When every pair is measured anyway (small jobs, a complete RTT
//! matrix), all the evidence can be weighed at once.
//!
//! **Rooted neighbour joining** (RNJ, as in Ni et al.'s routing-topology inference): seen from
//! a root host `r`, the *shared length* `rho(i, j) = (d(r,i) + d(r,j) - d(i,j)) / 2` of two
//! hosts is the distance from `r` to the point where their paths part. The pair with the
//! largest shared length are siblings below a new switch at that height; every other node `k`
//! whose shared length with them is within the threshold `delta` of it joins the same switch
//! (a switch with many ports); the new switch's shared lengths are the *means* over its
//! children, so later decisions average the noise of many measurements. Repeat until one node
//! is left: the switch the root host hangs from.
//!
//! **Which switches are real** (the open problem of [Shirai2007]: an adaptive merge threshold). The
//! noise scale comes from the matrix itself, with no tree assumed: for any four hosts the two
//! largest of the three pair sums `d(i,j)+d(k,l)`, `d(i,k)+d(j,l)`, `d(i,l)+d(j,k)` are equal in
//! a tree metric (the four-point condition), so their difference is pure noise; its median
//! estimates the noise `sigma` of one distance. Joining uses `delta = sigma`, so obvious noise
//! rarely makes a switch, and leaves the borderline ones to the evidence. Each switch-to-switch
//! link is then judged by the data as a whole: its *evidence* is how much the weighted residual
//! sum of squares of the least-squares fit grows when it is contracted (in units of the full
//! tree's residual variance; a chi-square statistic with one degree of freedom for a link made
//! by noise). The weakest link is contracted while its evidence is below its threshold — 16, or
//! 8 for a link of at least a tenth of the median distance ([`keep_threshold`]) — and every
//! decision carries a [`confidence`]. A link made by noise barely changes the residuals;
//! contracting a real link moves every distance across it. A single link-length cut cannot make
//! that distinction when the noise reaches a third of the shortest link.

use super::lengths::fit_lengths_weighted;
use super::tree::WorkTree;
use crate::util::rng::Rng;

/// Quartets sampled for the noise estimate when there are more than this many.
const MAX_QUARTETS: usize = 20_000;

/// The outcome of [`join`]: the tree, the estimated noise of one distance and the threshold,
/// and the evidence behind every switch-to-switch link kept or contracted.
pub(crate) struct Joined {
    pub tree: WorkTree,
    pub noise_s: f64,
    pub threshold_s: f64,
    /// Each switch-to-switch link of the final tree: the vertex below it, its evidence and the
    /// evidence it needed.
    pub kept: Vec<(usize, f64, f64)>,
    /// Each link contracted for lack of evidence, shortest first.
    pub merged: Vec<Merged>,
}

/// A switch-to-switch link that [`join`] contracted.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Merged {
    /// Hosts below the link (on the side away from the tree's root when it was contracted).
    pub hosts_below: Vec<usize>,
    pub len_s: f64,
    /// Its evidence (see [`link_evidence`]) and the evidence it would have needed.
    pub evidence: f64,
    pub threshold: f64,
}

/// Evidence at or above which a link is kept: beyond the 99.9% point of chi-square with one
/// degree of freedom (10.8), since the link tested is the shortest of several and the noise
/// variances are themselves estimates.
pub(crate) const KEEP_EVIDENCE: f64 = 16.0;

/// Evidence that keeps a *long* link (see [`LONG_LINK`]): the 99.5% point of chi-square with
/// one degree of freedom.
pub(crate) const KEEP_EVIDENCE_LONG: f64 = 8.0;

/// A link at least this fraction of the median one-way distance between hosts is long.
///
/// Why two thresholds: a prior on effect size. A switch hop is a sizeable part of a path
/// (10-40% on the emulated clusters, where a hop costs about 2 us of 8-20 us; on InfiniBand
/// 0.1-0.2 us of about 1-2 us), while what measurement artefacts fake is small (the emulated
/// one-switch cluster showed spurious "links" of 0.1-0.8 us against 8.5 us paths, some with
/// evidence up to 19). A short link must show overwhelming evidence; a long one needs only
/// clear evidence — which is all a leaf switch of two hosts can give: one pair decides it, and
/// on the emulated 2 x 2 x 2 tree its evidence was 10-16.
pub(crate) const LONG_LINK: f64 = 0.1;

/// The evidence needed to keep a link of `len_s` in a network whose median one-way distance
/// between hosts is `scale_s`.
pub(crate) fn keep_threshold(len_s: f64, scale_s: f64) -> f64 {
    if len_s >= LONG_LINK * scale_s {
        KEEP_EVIDENCE_LONG
    } else {
        KEEP_EVIDENCE
    }
}

/// Scale of [`confidence`]: how fast it goes from doubt to certainty around the threshold.
const CONFIDENCE_SCALE: f64 = 4.0;

/// The confidence (0..1) in a decision about a link with evidence `e` (see [`link_evidence`])
/// and keep threshold `threshold` (see [`keep_threshold`]): for a kept link that it is real,
/// for a contracted one that it is not.
///
/// A logistic curve in the evidence, centred on the threshold: 0.5 there, 0.95 at 12 below
/// and above it, 0.998 at 24. It is not a posterior probability — the noise of minimum RTTs is
/// neither normal nor independent between pairs, so no chi-square tail is trustworthy — but
/// it is monotone in the evidence and matches what the emulated clusters showed: noise alone
/// gave evidence 0-19, real switch links 10-3700, and every wrong tree had a decision within
/// 12 of its threshold.
pub(crate) fn confidence(evidence: f64, threshold: f64, kept: bool) -> f64 {
    let real = 1.0 / (1.0 + (-(evidence - threshold) / CONFIDENCE_SCALE).exp());
    if kept {
        real
    } else {
        1.0 - real
    }
}

/// The confidence that the contracted link `m` is not real: [`confidence`], but never more than
/// the data can tell a link that is absent from one as long as `shortest_kept_s` (the shortest
/// switch-to-switch link the tree kept; `None` when it kept none).
///
/// Why: the evidence measures how far the fitted length lies from zero in units of its own
/// standard error, `len / sqrt(evidence)`. Where few pairs witness a link that error is large,
/// and a real link can read short with little evidence. On the emulated uneven cluster (leaf
/// switches of 1, 2 and 4 hosts) the core-to-switch link that only the lone host witnesses
/// fitted 0.83 us with evidence 3.9 beside a kept uplink of 1.71 us, was contracted, and
/// claimed 0.954, with the tree wrong: a 1.71 us link would have read about as well. Weighed
/// at even odds against such a link, `absent` there is 0.56; a 0.2 us blip beside 2 us links
/// keeps its confidence.
pub(crate) fn contracted_confidence(m: &Merged, shortest_kept_s: Option<f64>) -> f64 {
    let c = confidence(m.evidence, m.threshold, false);
    match shortest_kept_s {
        Some(l0) if l0 > 0.0 && m.len_s > 0.0 && m.evidence > 0.0 => {
            let r = l0 / m.len_s;
            // log of (likelihood of a link of l0) / (likelihood of none), the fitted length
            // normal about the truth with the standard error above.
            let log_ratio = m.evidence * r * (1.0 - r / 2.0);
            c.min(1.0 / (1.0 + log_ratio.exp()))
        }
        _ => c,
    }
}

/// The shortest switch-to-switch link `tree` kept (`kept`: the vertices below them).
pub(crate) fn shortest_kept(tree: &WorkTree, kept: impl IntoIterator<Item = usize>) -> Option<f64> {
    kept.into_iter()
        .map(|v| tree.len(v))
        .filter(|l| *l > 0.0)
        .min_by(f64::total_cmp)
}

/// The median of the distances of `obs` (host, host, distance, ...): the network's scale.
pub(crate) fn median_distance(d: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = d.collect();
    if v.is_empty() {
        return 0.0;
    }
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    *m
}

/// Estimated noise (standard deviation) of one distance of `d` from the four-point condition.
///
/// For a resolved quartet the two largest pair sums differ by the difference of two sums of two
/// noisy distances each (standard deviation `2 sigma`, median absolute value `1.35 sigma`).
pub(crate) fn four_point_noise(n: usize, d: &dyn Fn(usize, usize) -> f64) -> f64 {
    if n < 4 {
        return 0.0;
    }
    let gap = |i: usize, j: usize, k: usize, l: usize| {
        let mut s = [d(i, j) + d(k, l), d(i, k) + d(j, l), d(i, l) + d(j, k)];
        s.sort_by(f64::total_cmp);
        s[2] - s[1]
    };
    let mut gaps = Vec::new();
    let total = n * (n - 1) * (n - 2) * (n - 3) / 24;
    if total <= MAX_QUARTETS {
        for i in 0..n {
            for j in (i + 1)..n {
                for k in (j + 1)..n {
                    for l in (k + 1)..n {
                        gaps.push(gap(i, j, k, l));
                    }
                }
            }
        }
    } else {
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        while gaps.len() < MAX_QUARTETS {
            let mut q = [0usize; 4];
            for x in q.iter_mut() {
                *x = rng.below(n as u64) as usize;
            }
            q.sort_unstable();
            if q.windows(2).any(|w| w[0] == w[1]) {
                continue;
            }
            gaps.push(gap(q[0], q[1], q[2], q[3]));
        }
    }
    let mid = gaps.len() / 2;
    let (_, m, _) = gaps.select_nth_unstable_by(mid, f64::total_cmp);
    *m / 1.35
}

/// One node of the joined tree: a host (`< n`) or a switch (`>= n`).
struct Node {
    /// Distance from the root host (a host's: its distance; a switch's: where its children part).
    height: f64,
    children: Vec<usize>,
}

/// Rooted neighbour joining from host `root` with threshold `delta`. Returns the nodes (hosts
/// first, then switches; the last node is the top switch, or the only other host).
fn rnj(n: usize, d: &dyn Fn(usize, usize) -> f64, root: usize, delta: f64) -> Vec<Node> {
    let cap = 2 * n;
    let mut nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            height: d(root, i),
            children: Vec::new(),
        })
        .collect();
    // Shared lengths between live nodes, a dense cap x cap matrix.
    let mut rho = vec![0.0f64; cap * cap];
    let mut live: Vec<usize> = (0..n).filter(|&i| i != root).collect();
    for &i in &live {
        for &j in &live {
            if i != j {
                rho[i * cap + j] = (d(root, i) + d(root, j) - d(i, j)) / 2.0;
            }
        }
    }
    while live.len() > 1 {
        let (mut bi, mut bj, mut best) = (0, 0, f64::NEG_INFINITY);
        for (x, &i) in live.iter().enumerate() {
            for &j in &live[x + 1..] {
                let r = rho[i * cap + j];
                // Ties go to the lowest node ids (deterministic).
                if r > best {
                    (bi, bj, best) = (i, j, r);
                }
            }
        }
        let mut children = vec![bi, bj];
        for &k in &live {
            if k != bi && k != bj {
                let with = (rho[bi * cap + k] + rho[bj * cap + k]) / 2.0;
                if best - with < delta {
                    children.push(k);
                }
            }
        }
        // The switch's height: the mean shared length over its children's pairs.
        let mut sum = 0.0;
        let mut cnt = 0.0;
        for (x, &a) in children.iter().enumerate() {
            for &b in &children[x + 1..] {
                sum += rho[a * cap + b];
                cnt += 1.0;
            }
        }
        let f = nodes.len();
        live.retain(|x| !children.contains(x));
        for &k in &live {
            let v = children.iter().map(|&c| rho[c * cap + k]).sum::<f64>() / children.len() as f64;
            rho[f * cap + k] = v;
            rho[k * cap + f] = v;
        }
        nodes.push(Node {
            height: sum / cnt,
            children,
        });
        live.push(f);
    }
    nodes
}

/// Fit link lengths by weighted least squares to observations in host terms: (host, host,
/// distance, weight = inverse noise variance). Hosts not in the tree are skipped. Returns the
/// weighted residual sum of squares.
pub(crate) fn fit_hosts(tree: &mut WorkTree, obs: &[(usize, usize, f64, f64)]) -> f64 {
    let vobs: Vec<(usize, usize, f64, f64)> = obs
        .iter()
        .filter_map(|&(a, b, x, w)| Some((tree.vertex_of(a)?, tree.vertex_of(b)?, x, w)))
        .collect();
    fit_lengths_weighted(tree, &vobs, 400);
    vobs.iter()
        .map(|&(va, vb, x, wt)| wt * (x - tree.dist(va, vb)).powi(2))
        .sum()
}

/// Links of `tree` between two switches, each named by its lower vertex.
fn switch_links(tree: &WorkTree) -> Vec<usize> {
    tree.switches()
        .filter(|&v| tree.parent(v).is_some_and(|p| !tree.is_host(p)))
        .collect()
}

/// The residual variance factor of a fit: weighted RSS per degree of freedom, at least one (the
/// weights are estimates; where they are too optimistic every statistic is scaled back).
fn variance_factor(tree: &WorkTree, observations: usize, rss: f64) -> f64 {
    let links = tree.vertices().filter(|&v| tree.parent(v).is_some()).count();
    let dof = observations.saturating_sub(links).max(1) as f64;
    (rss / dof).max(1.0)
}

/// Evidence for each switch-to-switch link of `tree` (named by its lower vertex): how much the
/// weighted residual sum of squares of the fit to `obs` grows when the link is contracted, in
/// units of the fit's variance factor — a chi-square statistic with one degree of freedom when
/// the link is not real and the noise normal. The tree's link lengths are refitted to `obs`.
///
/// A root with two neighbours (a top switch inserted on a link, see `center`) is no branch
/// point: its two links are one link of the unrooted tree, and both get the evidence of
/// contracting them together.
pub(crate) fn link_evidence(tree: &mut WorkTree, obs: &[(usize, usize, f64, f64)]) -> Vec<(usize, f64)> {
    let rss = fit_hosts(tree, obs);
    let factor = variance_factor(tree, obs.len(), rss);
    let root = tree.root();
    let two_way_root = tree.parent(root).is_none() && tree.children(root).len() == 2;
    switch_links(tree)
        .into_iter()
        .map(|v| {
            let mut trial = tree.clone();
            trial.merge_into_parent(v);
            if two_way_root && tree.parent(v) == Some(root) {
                let other = tree.children(root).iter().copied().find(|&c| c != v);
                if let Some(o) = other.filter(|&o| !tree.is_host(o)) {
                    trial.merge_into_parent(o);
                }
            }
            (v, (fit_hosts(&mut trial, obs) - rss) / factor)
        })
        .collect()
}

/// Observation weights from per-host noise variances (as in [`join`]) of the unweighted fit of
/// `tree` to `obs` (host, host, distance), never below `sigma` squared: the observations with
/// their weights. Refits `tree`.
pub(crate) fn weighted_obs(
    tree: &mut WorkTree,
    obs: &[(usize, usize, f64)],
    sigma: f64,
) -> Vec<(usize, usize, f64, f64)> {
    let scale = obs.iter().map(|o| o.2).fold(0.0, f64::max).max(1e-12);
    let floor = (sigma * sigma).max((1e-6 * scale).powi(2));
    let unit: Vec<(usize, usize, f64, f64)> = obs.iter().map(|&(a, b, d)| (a, b, d, 1.0 / floor)).collect();
    fit_hosts(tree, &unit);
    let var = residual_variances(tree, obs, floor);
    obs.iter()
        .map(|&(a, b, d)| (a, b, d, 1.0 / ((var[a] + var[b]) / 2.0).max(floor)))
        .collect()
}

/// The [`link_evidence`] of every switch-to-switch link with [`weighted_obs`] weights.
pub(crate) fn weighted_evidence(tree: &mut WorkTree, obs: &[(usize, usize, f64)], sigma: f64) -> Vec<(usize, f64)> {
    let weighted = weighted_obs(tree, obs, sigma);
    link_evidence(tree, &weighted)
}

/// Per-host noise variance from the residuals of `obs` against `tree`: the median of the
/// host's squared residuals / 0.455 (the median of chi-square with one degree of freedom), at
/// least `floor`; hosts without observations get `floor`.
///
/// Why per host: a loaded host (busy CPU, slow NIC driver) answers every ping late by a varying
/// amount, so its whole row is noisier than the rest. Judged by the common noise scale, that
/// row's scatter looks like structure and the host ends up below a switch of its own.
fn residual_variances(tree: &WorkTree, obs: &[(usize, usize, f64)], floor: f64) -> Vec<f64> {
    let n = obs.iter().map(|o| o.0.max(o.1) + 1).max().unwrap_or(0);
    let mut sq: Vec<Vec<f64>> = vec![Vec::new(); n];
    for &(a, b, d) in obs {
        if let (Some(va), Some(vb)) = (tree.vertex_of(a), tree.vertex_of(b)) {
            let r = (d - tree.dist(va, vb)).powi(2);
            sq[a].push(r);
            sq[b].push(r);
        }
    }
    sq.into_iter()
        .map(|mut v| {
            if v.is_empty() {
                return floor;
            }
            let mid = v.len() / 2;
            let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
            (*m / 0.455).max(floor)
        })
        .collect()
}

/// Hosts below vertex `v`.
pub(crate) fn hosts_below(tree: &WorkTree, v: usize) -> Vec<usize> {
    let mut out = tree.hosts_below(v);
    out.sort_unstable();
    out
}

/// Contract switch-to-switch links while the tree without one of them explains the
/// observations (host, host, distance, weight) as well within the noise: each step contracts
/// the link whose evidence ([`link_evidence`]) falls furthest below its threshold
/// ([`keep_threshold`] for a network of median distance `scale_s`), until every link left has
/// the evidence it needs (backward elimination). Returns what was contracted, in order. Used by
/// all-pairs joining and by the refinement of trees grown by insertion alike.
///
/// Weakest first, not shortest first: a link made by noise is not always shorter than the real
/// ones (2.5 us leaf links beside a 3 us spurious one under 2 us of normal jitter), and stopping
/// at the first real link left the spurious one in place.
pub(crate) fn contract_by_evidence(tree: &mut WorkTree, obs: &[(usize, usize, f64, f64)], scale_s: f64) -> Vec<Merged> {
    contract_by_evidence_among(tree, obs, scale_s, &|_, _| true)
}

/// [`contract_by_evidence`] over the switch-to-switch links `candidate` accepts (named by
/// their lower vertex in the current tree); the others are kept whatever their evidence.
pub(crate) fn contract_by_evidence_among(
    tree: &mut WorkTree,
    obs: &[(usize, usize, f64, f64)],
    scale_s: f64,
    candidate: &dyn Fn(&WorkTree, usize) -> bool,
) -> Vec<Merged> {
    let rss = fit_hosts(tree, obs);
    // The noise scale of every test is the full tree's (as in backward elimination): measured
    // against the current, already contracted tree, each real link contracted would inflate
    // the scale and weaken the evidence of the next (2-host leaf switches fell one after the
    // other that way, at evidence 15.7, 12.7, 8.7, 5.8).
    let factor = variance_factor(tree, obs.len(), rss);
    let mut rss = rss;
    let mut merged = Vec::new();
    loop {
        let weakest = switch_links(tree)
            .into_iter()
            .filter(|&v| candidate(tree, v))
            .map(|v| {
                let mut trial = tree.clone();
                trial.merge_into_parent(v);
                let trial_rss = fit_hosts(&mut trial, obs);
                let evidence = (trial_rss - rss) / factor;
                let threshold = keep_threshold(tree.len(v), scale_s);
                (v, evidence, threshold, trial, trial_rss)
            })
            .filter(|c| c.1 <= c.2)
            .min_by(|a, b| (a.1 - a.2).total_cmp(&(b.1 - b.2)).then(a.0.cmp(&b.0)));
        let Some((v, evidence, threshold, trial, trial_rss)) = weakest else {
            break;
        };
        log::trace!(
            "contracting a {:.3} us switch link: evidence {evidence:.2} below {threshold}",
            tree.len(v) * 1e6
        );
        merged.push(Merged {
            hosts_below: hosts_below(tree, v),
            len_s: tree.len(v),
            evidence,
            threshold,
        });
        *tree = trial;
        rss = trial_rss;
    }
    merged
}

/// Join the `n` hosts of a complete one-way distance matrix `d` (seconds) into a tree.
pub(crate) fn join(n: usize, d: &dyn Fn(usize, usize) -> f64) -> Joined {
    let mut tree = WorkTree::new(n);
    match n {
        0 => {}
        1 => tree.init_single(0),
        2 => tree.init_pair(0, 1, d(0, 1)),
        _ => {}
    }
    if n <= 2 {
        return Joined {
            tree,
            noise_s: 0.0,
            threshold_s: 0.0,
            kept: Vec::new(),
            merged: Vec::new(),
        };
    }
    let sigma = four_point_noise(n, d);
    // Root: the host with the smallest total distance (central: its shared lengths are the
    // shortest sums, so they carry the least absolute error in a heterogeneous network).
    let total = |a: usize| (0..n).map(|x| d(a, x)).sum::<f64>();
    let root = (0..n).min_by(|&a, &b| total(a).total_cmp(&total(b))).unwrap_or(0);
    // Scale of the network: a noise-free matrix has sigma 0, and exact ties must still join.
    let scale = (total(root) / (n - 1) as f64).max(1e-12);
    let delta = sigma.max(1e-9 * scale);
    let nodes = rnj(n, d, root, delta);
    tree.build_rooted(root, &rooted_links(&nodes, n, root));
    // Noise variance per pair from per-host variances of the first fit (see
    // `residual_variances`), never below the common estimate.
    let floor = (sigma * sigma).max((1e-6 * scale).powi(2));
    let mut obs: Vec<(usize, usize, f64, f64)> = Vec::with_capacity(n * (n - 1) / 2);
    for a in 0..n {
        for b in (a + 1)..n {
            obs.push((a, b, d(a, b), 1.0 / floor));
        }
    }
    fit_hosts(&mut tree, &obs);
    let plain: Vec<(usize, usize, f64)> = obs.iter().map(|o| (o.0, o.1, o.2)).collect();
    let var = residual_variances(&tree, &plain, floor);
    for o in obs.iter_mut() {
        o.3 = 1.0 / ((var[o.0] + var[o.1]) / 2.0).max(floor);
    }
    let median = median_distance(obs.iter().map(|o| o.2));
    let merged = contract_by_evidence(&mut tree, &obs, median);
    let kept: Vec<(usize, f64, f64)> = link_evidence(&mut tree, &obs)
        .into_iter()
        .map(|(v, e)| (v, e, keep_threshold(tree.len(v), median)))
        .collect();
    // The cut between the longest contracted and the shortest kept link.
    let longest_merged = merged
        .iter()
        .map(|m| m.len_s)
        .fold(None, |a: Option<f64>, l| Some(a.map_or(l, |a| a.max(l))));
    let shortest_kept = kept.iter().map(|&(v, _, _)| tree.len(v)).fold(f64::INFINITY, f64::min);
    let threshold_s = match longest_merged {
        Some(m) if shortest_kept.is_finite() => (m + shortest_kept) / 2.0,
        Some(m) => m,
        None => delta,
    };
    Joined {
        tree,
        noise_s: sigma,
        threshold_s,
        kept,
        merged,
    }
}

/// `(vertex, parent, length)` of every joined node but the root host, as
/// [`WorkTree::build_rooted`] takes them: hosts keep their ids, switch `f` becomes `n + k`.
fn rooted_links(nodes: &[Node], n: usize, root: usize) -> Vec<(usize, usize, f64)> {
    let top = nodes.len() - 1;
    let mut links = vec![(top, root, nodes[top].height.max(0.0))];
    for (f, node) in nodes.iter().enumerate().skip(n) {
        for &c in &node.children {
            links.push((c, f, (nodes[c].height - node.height).max(0.0)));
        }
    }
    links
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // matrices read best by index
mod tests {
    use super::*;

    #[test]
    fn a_contraction_is_no_surer_than_its_test_can_be() {
        let merged = |len_us: f64, evidence: f64| Merged {
            hosts_below: vec![0],
            len_s: len_us * 1e-6,
            evidence,
            threshold: KEEP_EVIDENCE,
        };
        // The uneven cluster's lone witness: 0.83 us, evidence 3.9, beside a kept 1.71 us link.
        let m = merged(0.83, 3.9);
        assert!(confidence(3.9, KEEP_EVIDENCE, false) > 0.95);
        let c = contracted_confidence(&m, Some(1.71e-6));
        assert!((c - 0.56).abs() < 0.01, "{c}");
        // A blip beside 2 us links, or a tree that kept no link: as the evidence says.
        let blip = merged(0.2, 5.0);
        let plain = confidence(5.0, KEEP_EVIDENCE, false);
        assert!((contracted_confidence(&blip, Some(2e-6)) - plain).abs() < 1e-12);
        assert_eq!(contracted_confidence(&m, None), confidence(3.9, KEEP_EVIDENCE, false));
    }

    /// Distances of a tree given as parent links: vertex -> (parent, length); hosts 0..n.
    fn tree_metric(n: usize, parents: &[(usize, usize, f64)]) -> Vec<Vec<f64>> {
        let total = parents.iter().map(|p| p.0.max(p.1)).max().unwrap() + 1;
        let mut up: Vec<Option<(usize, f64)>> = vec![None; total];
        for &(v, p, l) in parents {
            up[v] = Some((p, l));
        }
        let anc = |mut v: usize| {
            let mut path = vec![(v, 0.0)];
            let mut acc = 0.0;
            while let Some((p, l)) = up[v] {
                acc += l;
                path.push((p, acc));
                v = p;
            }
            path
        };
        let mut d = vec![vec![0.0; n]; n];
        for i in 0..n {
            for j in 0..n {
                let (a, b) = (anc(i), anc(j));
                let mut best = f64::INFINITY;
                for &(x, dx) in &a {
                    if let Some(&(_, dy)) = b.iter().find(|&&(y, _)| y == x) {
                        best = best.min(dx + dy);
                    }
                }
                d[i][j] = best;
            }
        }
        d
    }

    /// 3 leaf switches x 3 hosts below a core: leaves 3 us, uplinks 2.25 us (the emulated 3x3).
    fn three_by_three() -> Vec<Vec<f64>> {
        let mut links = Vec::new();
        let core = 12;
        for s in 0..3 {
            links.push((9 + s, core, 2.25e-6));
            for h in 0..3 {
                links.push((3 * s + h, 9 + s, 3e-6));
            }
        }
        tree_metric(9, &links)
    }

    fn groups(t: &WorkTree, n: usize) -> Vec<Vec<usize>> {
        let mut g: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for h in 0..n {
            g.entry(t.host_parent(h).unwrap()).or_default().push(h);
        }
        let mut v: Vec<Vec<usize>> = g.into_values().collect();
        v.sort();
        v
    }

    #[test]
    fn noise_free_three_by_three_is_exact() {
        let d = three_by_three();
        let j = join(9, &|a, b| d[a][b]);
        assert_eq!(groups(&j.tree, 9), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]);
        assert_eq!(j.tree.switches().count(), 4);
        assert!(j.noise_s < 1e-12, "noise {}", j.noise_s);
        for a in 0..9 {
            for b in 0..9 {
                let (va, vb) = (j.tree.vertex_of(a).unwrap(), j.tree.vertex_of(b).unwrap());
                assert!((j.tree.dist(va, vb) - d[a][b]).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn noisy_emulated_matrix_groups_by_switch() {
        // Measured on the emulated 3x3 cluster (pingpong, 3 rounds x 11 round trips; RTT us).
        let rtt = [
            [0.00, 14.33, 13.71, 22.73, 24.07, 23.46, 24.69, 24.02, 26.29],
            [14.33, 0.00, 13.93, 23.60, 23.98, 23.71, 22.40, 24.09, 25.25],
            [13.71, 13.93, 0.00, 26.79, 24.03, 23.35, 23.54, 23.92, 24.00],
            [22.73, 23.60, 26.79, 0.00, 14.58, 14.35, 22.59, 24.10, 25.09],
            [24.07, 23.98, 24.03, 14.58, 0.00, 14.01, 23.95, 24.37, 24.05],
            [23.46, 23.71, 23.35, 14.35, 14.01, 0.00, 24.70, 25.17, 24.21],
            [24.69, 22.40, 23.54, 22.59, 23.95, 24.70, 0.00, 14.79, 14.78],
            [24.02, 24.09, 23.92, 24.10, 24.37, 25.17, 14.79, 0.00, 15.57],
            [26.29, 25.25, 24.00, 25.09, 24.05, 24.21, 14.78, 15.57, 0.00],
        ];
        let j = join(9, &|a, b| rtt[a][b] * 0.5e-6);
        assert_eq!(groups(&j.tree, 9), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]);
        assert!(j.noise_s > 0.05e-6 && j.noise_s < 1e-6, "noise {}", j.noise_s);
        assert!(j.threshold_s < 2.0e-6, "threshold {}", j.threshold_s);
    }

    #[test]
    fn noisier_prober_matrix_groups_by_switch() {
        // Measured by the MPI prober on the emulated 3x3 cluster (one-way us): noise 0.7 us
        // against 2.25 us uplinks, where a plain link-length cut merged everything.
        let d = [
            [0.00, 7.30, 8.08, 10.50, 12.12, 11.15, 10.57, 11.47, 11.99],
            [7.30, 0.00, 6.56, 12.07, 10.68, 11.35, 11.27, 11.07, 11.19],
            [8.08, 6.56, 0.00, 12.14, 12.11, 11.83, 11.41, 11.21, 11.14],
            [10.50, 12.07, 12.14, 0.00, 6.63, 6.82, 10.55, 11.21, 12.38],
            [12.12, 10.68, 12.11, 6.63, 0.00, 7.34, 11.87, 12.57, 11.15],
            [11.15, 11.35, 11.83, 6.82, 7.34, 0.00, 12.75, 11.39, 12.58],
            [10.57, 11.27, 11.41, 10.55, 11.87, 12.75, 0.00, 7.56, 6.57],
            [11.47, 11.07, 11.21, 11.21, 12.57, 11.39, 7.56, 0.00, 7.15],
            [11.99, 11.19, 11.14, 12.38, 11.15, 12.58, 6.57, 7.15, 0.00],
        ];
        let j = join(9, &|a, b| d[a][b] * 1e-6);
        assert_eq!(groups(&j.tree, 9), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]);
    }

    #[test]
    fn a_flat_switch_stays_flat_under_noise() {
        // 12 hosts on one switch, leaves 3 us +- noise: no spurious switch may survive.
        let mut rng = Rng::new(5);
        let mut d = vec![vec![0.0; 12]; 12];
        for a in 0..12 {
            for b in (a + 1)..12 {
                let v = 6e-6 + 0.4e-6 * rng.normal();
                d[a][b] = v;
                d[b][a] = v;
            }
        }
        let j = join(12, &|a, b| d[a][b]);
        assert_eq!(j.tree.switches().count(), 1, "threshold {}", j.threshold_s);
    }

    #[test]
    fn tiny_cases() {
        for n in 0..3 {
            let j = join(n, &|_, _| 1e-6);
            assert_eq!(j.tree.num_hosts_in(), n);
        }
        let j = join(3, &|a, b| if a == b { 0.0 } else { 2e-6 });
        assert_eq!(j.tree.switches().count(), 1);
    }
}
#[cfg(test)]
#[allow(clippy::needless_range_loop)] // matrices read best by index
mod noise_tests {
    use super::*;

    /// Exact leaf-switch partitions (and switch counts) out of `trials` noisy matrices of a
    /// two-level tree: `leaves` leaf switches of `per` hosts, `per_agg` leaf switches per
    /// aggregation switch, access links 3 us, leaf uplinks `up1`, aggregation uplinks `up2`;
    /// noise `sigma` per distance, half-normal (inflation only, like minimum RTTs) or normal.
    #[allow(clippy::too_many_arguments)]
    fn exact(
        leaves: usize,
        per: usize,
        per_agg: usize,
        up1: f64,
        up2: f64,
        sigma: f64,
        half: bool,
        trials: usize,
    ) -> (usize, usize) {
        let n = leaves * per;
        let aggs = leaves / per_agg;
        let want_sw = leaves
            + if aggs > 2 {
                aggs + 1
            } else if aggs == 2 {
                2
            } else {
                1
            };
        let want: Vec<Vec<usize>> = (0..leaves).map(|l| (l * per..(l + 1) * per).collect()).collect();
        let mut rng = Rng::new(42);
        let (mut part, mut shape) = (0, 0);
        for _ in 0..trials {
            let mut d = vec![vec![0.0; n]; n];
            for a in 0..n {
                for b in (a + 1)..n {
                    let mut t = 6e-6;
                    if a / per != b / per {
                        t += 2.0 * up1;
                    }
                    if a / per / per_agg != b / per / per_agg {
                        t += 2.0 * up2;
                    }
                    let z = rng.normal();
                    d[a][b] = t + sigma * if half { z.abs() } else { z };
                    d[b][a] = d[a][b];
                }
            }
            let j = join(n, &|a, b| d[a][b]);
            let mut g: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
            for h in 0..n {
                g.entry(j.tree.host_parent(h).unwrap()).or_default().push(h);
            }
            let mut v: Vec<Vec<usize>> = g.into_values().collect();
            v.sort();
            if v == want {
                part += 1;
                if j.tree.switches().count() == want_sw {
                    shape += 1;
                }
            }
        }
        (part, shape)
    }

    #[test]
    fn three_by_three_under_noise_up_to_a_quarter_of_the_uplink() {
        for half in [true, false] {
            for sigma in [0.2e-6, 0.4e-6, 0.55e-6] {
                let (part, shape) = exact(3, 3, 3, 2.25e-6, 0.0, sigma, half, 100);
                assert!(part >= 95 && shape >= 95, "sigma {sigma} half {half}: {part} {shape}");
            }
        }
        // Inflation-only noise (what minimum RTTs have) is tolerated well beyond that.
        let (part, _) = exact(3, 3, 3, 2.25e-6, 0.0, 1.0e-6, true, 100);
        assert!(part >= 95, "{part}");
    }

    #[test]
    fn two_level_trees_under_noise() {
        for half in [true, false] {
            let (part, shape) = exact(4, 6, 2, 2.0e-6, 1.5e-6, 0.4e-6, half, 50);
            assert!(part >= 48 && shape >= 48, "4x6 half {half}: {part} {shape}");
            let (part, shape) = exact(8, 4, 2, 2.0e-6, 2.0e-6, 0.4e-6, half, 50);
            assert!(part >= 48 && shape >= 48, "8x4 half {half}: {part} {shape}");
        }
    }
}
