//! After insertion: verification, adaptive merge, latency refit (the least squares itself is
//! [`super::lengths`]).
//!
//! **Verification.** A host whose leaf is not a plain access link (judged with the final,
//! shortest access length) may hide a switch or belong deeper than where it was placed with an
//! earlier, poorer idea of the access length; a host with several measurements that disagree
//! with the finished tree was probably placed from an outlier. Both are detached and located
//! again from everything now known — usually with no new measurement at all.
//!
//! **Adaptive merge** (open problem of [Shirai2007]: "one switch split into several because the
//! interval was too small; a threshold for merging adaptively is left for future work"). Jitter
//! creates switches joined by links about as long as the noise, while real links are much
//! longer. The threshold is derived from the data: the noise scale is the larger of the typical
//! jitter interval and the robust spread (MAD) of the residuals of all measurements against
//! the tree; among the links between switches, the widest multiplicative gap starting below a
//! few noise scales separates jitter-made links from real ones. Links below the threshold are
//! contracted.
//!
//! **Refit.** Insertion computes each link from a handful of measurements; at the end, every
//! link latency is re-estimated by non-negative least squares over all measurements (with a
//! small pull towards the insertion estimate so links no measurement separates stay put).
//! Outliers (residual above five noise scales) are left out of the fit.

use super::driver::{Builder, Run};
use super::lengths::{refit, usable};
use super::locate::{LocateParams, Step};
use super::store::{median_of as median, Store};
use super::tree::{Branch, WorkTree};
use super::InferError;
use crate::util::fasthash::FastMap;
use std::collections::VecDeque;

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct RefineReport {
    pub relocated: u64,
    pub merged: u64,
    pub noise_s: f64,
    pub threshold_s: f64,
    /// Links the recheck on fresh readings contracted (see [`super::recheck`]).
    pub rechecked: Vec<super::recheck::Contracted>,
}

impl RefineReport {
    /// Take in the report of other trees refined apart (far-apart parts): counts and the
    /// contractions add up, the noise and threshold are the largest, as for trees refined
    /// together.
    pub fn absorb(&mut self, o: RefineReport) {
        self.relocated += o.relocated;
        self.merged += o.merged;
        self.noise_s = self.noise_s.max(o.noise_s);
        self.threshold_s = self.threshold_s.max(o.threshold_s);
        self.rechecked.extend(o.rechecked);
    }
}

/// Verification passes on each builder's tree, then merge and refit. The trees hold disjoint
/// hosts (far-apart parts of the network) and share every round; the report's noise and
/// threshold are the largest over the trees.
pub(crate) fn refine(
    run: &mut Run,
    mains: &mut [Builder],
    params: &dyn Fn(&Store, &[&WorkTree]) -> LocateParams,
) -> Result<RefineReport, InferError> {
    let mut relocated = 0u64;
    let mut duplicates = 0u64;
    let big = |t: &WorkTree| t.num_hosts_in() > 3;
    for _pass in 0..3 {
        if !mains.iter().any(|b| big(&b.tree)) {
            break;
        }
        duplicates += merge_duplicates(run, mains, params, None)?;
        let p = {
            let trees: Vec<&WorkTree> = mains.iter().map(|b| &b.tree).collect();
            LocateParams {
                hint: run.hint,
                ..params(&run.store, &trees)
            }
        };
        let mut waiting = 0;
        for main in mains.iter_mut().filter(|b| big(&b.tree)) {
            let mut pending = VecDeque::new();
            let hosts: Vec<usize> = main.tree.hosts().collect();
            for h in hosts {
                let Some(v) = main.tree.host_parent(h) else { continue };
                if main.tree.is_host(v) {
                    continue;
                }
                let leaf = main.tree.leaf_len(h);
                let long = p
                    .access
                    .is_none_or(|a0| (leaf - a0).abs() > p.flag_delta || leaf <= p.tol_floor);
                if !long && inconsistent(&main.tree, &run.store, h, &p) < 2 {
                    continue;
                }
                let before = siblings(&main.tree, h);
                if !main.tree.detach(h) {
                    continue;
                }
                match run.step(&main.tree, h, &p) {
                    Step::Place { at, leaf } => {
                        main.tree.attach(at, h, leaf);
                        if siblings(&main.tree, h) != before {
                            relocated += 1;
                        }
                    }
                    _ => pending.push_back(h),
                }
            }
            waiting += pending.len();
            relocated += pending.len() as u64;
            main.pending = pending;
        }
        log::trace!("verification: {waiting} hosts to locate again");
        if waiting == 0 {
            break;
        }
        run.grow(mains, params)?;
    }

    let mut report = RefineReport {
        relocated,
        merged: duplicates,
        noise_s: 0.0,
        threshold_s: 0.0,
        rechecked: Vec::new(),
    };
    let mut noises = Vec::with_capacity(mains.len());
    for main in mains.iter_mut() {
        let t = &mut main.tree;
        refit(t, &run.store, 0.0, 300);
        let noise = noise_scale(t, &run.store);
        let threshold = merge_threshold(t, noise);
        let mut merged = merge_short_links(t, threshold);
        merged += contract_weighed(t, &run.store, noise, WEIGH_UPTO * noise);
        if merged > 0 {
            refit(t, &run.store, noise, 300);
        }
        log::debug!(
            "refine: noise {:.3} us, merge threshold {:.3} us, {merged} short link(s) contracted, {duplicates} duplicate switch(es) merged",
            noise * 1e6,
            threshold * 1e6
        );
        report.merged += merged;
        noises.push(noise);
        report.noise_s = report.noise_s.max(noise);
        report.threshold_s = report.threshold_s.max(threshold);
    }
    // Short links still standing are judged once more, on fresh readings (see `recheck`).
    let below: Vec<f64> = mains
        .iter()
        .zip(&noises)
        .map(|(b, n)| if big(&b.tree) { WEIGH_UPTO * n } else { 0.0 })
        .collect();
    let mut trees: Vec<&mut WorkTree> = mains.iter_mut().map(|b| &mut b.tree).collect();
    report.rechecked = super::recheck::recheck_short_links(run, &mut trees, &below, &noises)?;
    report.merged += report.rechecked.len() as u64;
    // Contracting a short link makes the switches below it siblings of those beside it: two
    // halves of one switch, split by a jitter-made link, have never been compared. One more
    // duplicate check (it measures only pairs of siblings no measurement crosses yet).
    report.merged += merge_duplicates(run, mains, params, Some(report.noise_s))?;
    Ok(report)
}

/// The duplicate-switch check on every tree of more than three hosts: measure one pair across
/// each pair of sibling switches that no measurement crosses yet, then merge the siblings the
/// measurements say are one switch. With `refit_noise`, a tree that changed is refitted
/// (outliers beyond five times that noise left out). Returns how many switches were merged.
fn merge_duplicates(
    run: &mut Run,
    mains: &mut [Builder],
    params: &dyn Fn(&Store, &[&WorkTree]) -> LocateParams,
    refit_noise: Option<f64>,
) -> Result<u64, InferError> {
    let big = |t: &WorkTree| t.num_hosts_in() > 3;
    let p = {
        let trees: Vec<&WorkTree> = mains.iter().map(|b| &b.tree).collect();
        params(&run.store, &trees)
    };
    // One round at a time, merging after each: a merge makes the checks of the merged switch
    // against its other siblings moot (its hosts' measurements cross them already). With the
    // host-order hint, pairs of hosts close in host order go first: a duplicate is most often
    // a host's own leaf switch found a second time.
    let mut measured: std::collections::HashSet<(usize, usize)> = Default::default();
    let (mut merged, mut rounds) = (0, 0);
    loop {
        let mut need: Vec<(usize, usize)> = mains
            .iter()
            .filter(|b| big(&b.tree))
            .flat_map(|b| duplicate_check_pairs(&b.tree, &run.store))
            .filter(|&(a, b)| !measured.contains(&(a.min(b), a.max(b))))
            .collect();
        if need.is_empty() {
            break;
        }
        if run.hint {
            need.sort_by_key(|&(a, b)| a.abs_diff(b));
        }
        let round = crate::probe::matching_rounds(&need).swap_remove(0);
        measured.extend(round.iter().map(|&(a, b)| (a.min(b), a.max(b))));
        run.measure_fully(&round)?;
        rounds += 1;
        for b in mains.iter_mut().filter(|b| big(&b.tree)) {
            let m = merge_duplicate_siblings(&mut b.tree, &run.store, &p);
            if let Some(noise) = refit_noise.filter(|_| m > 0) {
                refit(&mut b.tree, &run.store, noise, 300);
            }
            merged += m;
        }
    }
    log::trace!(
        "duplicate-switch check: {} pairs measured in {rounds} rounds, {merged} merged",
        measured.len()
    );
    Ok(merged)
}

/// Shared length `(d_tree - d_measured) / 2` across each switch triple (V, W1, W2) on the
/// path of a usable measurement.
fn shared_across(t: &WorkTree, s: &Store) -> FastMap<(usize, usize, usize), Vec<f64>> {
    let mut across: FastMap<(usize, usize, usize), Vec<f64>> = FastMap::default();
    for (a, b, d) in usable(t, s) {
        let path = t.path(a, b);
        let sh = (t.dist(a, b) - d) / 2.0;
        for w in path.windows(3) {
            let (x, v, y) = (w[0].0, w[1].0, w[2].0);
            if !t.is_host(x) && !t.is_host(v) && !t.is_host(y) {
                across.entry((v, x.min(y), x.max(y))).or_default().push(sh);
            }
        }
    }
    across
}

/// Hosts of a branch a duplicate check may measure from (see [`duplicate_check_pairs`]).
const CHECK_CANDIDATES: usize = 8;

/// Two switches next to one switch V that are really one (an unseen switch discovered twice by
/// concurrent insertions, each from a different host): hosts below them are closer than the tree
/// says, because their paths share the link up to V. Every pair of switch neighbours of every
/// switch needs one measurement across it: these are the pairs no insertion measured across
/// (measured in a few rounds at most before [`merge_duplicate_siblings`]).
///
/// Each pair takes, from each side, the least used of the branch's [`CHECK_CANDIDATES`] nearest
/// hosts: any host below a switch measures across it alike, and pairs sharing a host need a
/// round each. With the nearest host always, a switch new to a 16-way star put its one host in
/// 12 checks, 12 rounds of one pair (2 x 256 hosts under Lomax jitter, seed 395: 40 ms of a
/// 0.19 s probe).
fn duplicate_check_pairs(t: &WorkTree, s: &Store) -> Vec<(usize, usize)> {
    let across = shared_across(t, s);
    let mut need = Vec::new();
    let mut busy = std::collections::HashSet::new();
    let mut uses: FastMap<usize, usize> = FastMap::default();
    for v in t.switches().collect::<Vec<_>>() {
        let ws: Vec<usize> = t.neighbors(v).into_iter().filter(|&w| !t.is_host(w)).collect();
        for (i, &w1) in ws.iter().enumerate() {
            for &w2 in &ws[i + 1..] {
                if across.contains_key(&(v, w1.min(w2), w1.max(w2))) {
                    continue;
                }
                let least_used = |w, uses: &FastMap<usize, usize>| {
                    t.nearest_hosts(Branch { at: v, via: w }, CHECK_CANDIDATES, |_| true)
                        .into_iter()
                        .min_by_key(|x| uses.get(&x.1).copied().unwrap_or(0))
                        .map(|x| x.1)
                };
                if let (Some(a), Some(b)) = (least_used(w1, &uses), least_used(w2, &uses)) {
                    if busy.insert((a.min(b), a.max(b))) {
                        need.push((a, b));
                        *uses.entry(a).or_default() += 1;
                        *uses.entry(b).or_default() += 1;
                    }
                }
            }
        }
    }
    need
}

/// Merge the sibling switches whose measurements say their paths share more than the
/// tolerance (see [`duplicate_check_pairs`]); returns how many were merged.
fn merge_duplicate_siblings(t: &mut WorkTree, s: &Store, p: &LocateParams) -> u64 {
    let across = shared_across(t, s);
    let mut merged = 0;
    let mut groups: Vec<(usize, usize, usize)> = across
        .into_iter()
        .filter(|(_, sh)| {
            let mut sh = sh.clone();
            median(&mut sh) > p.tol_floor
        })
        .map(|(k, _)| k)
        .collect();
    groups.sort_unstable();
    for (v, w1, w2) in groups {
        // Both still switches next to v (earlier merges may have removed one)?
        if !t.is_alive(v)
            || !t.is_alive(w1)
            || !t.is_alive(w2)
            || !t.neighbors(v).contains(&w1)
            || !t.neighbors(v).contains(&w2)
        {
            continue;
        }
        t.reroot(v);
        t.merge_siblings(w1, w2);
        merged += 1;
    }
    merged
}

/// Hosts sharing `h`'s switch, sorted (identifies where a host hangs across tree edits).
fn siblings(t: &WorkTree, h: usize) -> Vec<usize> {
    let Some(v) = t.host_parent(h) else { return Vec::new() };
    let mut s: Vec<usize> = t.neighbors(v).into_iter().filter_map(|w| t.host_of(w)).collect();
    s.sort_unstable();
    s
}

/// Number of `h`'s measurements that disagree with the tree by more than three tolerances.
fn inconsistent(t: &WorkTree, s: &Store, h: usize, p: &LocateParams) -> usize {
    let vh = t.vertex_of(h).unwrap();
    s.partners(h)
        .iter()
        .filter(|&&b| !s.is_bad(h, b))
        .filter_map(|&b| t.vertex_of(b).map(|vb| (b, vb)))
        .filter(|&(b, vb)| {
            let o = s.get(h, b).unwrap();
            (o.d - t.dist(vh, vb)).abs() > 3.0 * p.tol(o.u, o.u)
        })
        .count()
}

/// The noise scale of one-way distances: typical jitter interval, or the robust spread of the
/// residuals against the tree, whichever is larger.
fn noise_scale(t: &WorkTree, s: &Store) -> f64 {
    residual_spread(&[t], s).unwrap_or(0.0).max(s.u_quantile(0.5))
}

/// Robust spread (1.4826 x MAD) of the residuals of all usable measurements against the trees
/// that hold both hosts; `None` below 20 residuals.
pub(crate) fn residual_spread(trees: &[&WorkTree], s: &Store) -> Option<f64> {
    let mut r: Vec<f64> = trees
        .iter()
        .flat_map(|t| usable(t, s).into_iter().map(move |(a, b, d)| d - t.dist(a, b)))
        .collect();
    if r.len() < 20 {
        return None;
    }
    let med = median(&mut r);
    let mut dev: Vec<f64> = r.iter().map(|x| (x - med).abs()).collect();
    Some(1.4826 * median(&mut dev))
}

/// Links between switches shorter than the returned length are artefacts of jitter.
fn merge_threshold(t: &WorkTree, noise: f64) -> f64 {
    let mut lens: Vec<f64> = t
        .switches()
        .filter(|&v| t.parent(v).is_some_and(|p| !t.is_host(p)))
        .map(|v| t.len(v))
        .collect();
    lens.sort_by(f64::total_cmp);
    let base = 3.0 * noise;
    // The widest gap (ratio) between consecutive lengths that starts within a few noise
    // scales: everything below it is noise-sized.
    let mut best: Option<(f64, f64)> = None; // (ratio, threshold)
    for w in lens.windows(2) {
        let (lo, hi) = (w[0].max(1e-15), w[1]);
        if lo > 6.0 * noise || hi <= 4.0 * noise {
            continue;
        }
        let ratio = hi / lo;
        if ratio >= 3.0 && best.is_none_or(|b| ratio > b.0) {
            best = Some((ratio, (lo * hi).sqrt()));
        }
    }
    let th = best.map_or(base, |b| b.1.max(base));
    th.max(1e-12)
}

/// Switch links shorter than this many noise scales (and longer than the merge threshold) are
/// kept only on their evidence.
pub(crate) const WEIGH_UPTO: f64 = 8.0;

/// Beyond [`super::EVIDENCE_MAX_HOSTS`] hosts, links are weighed only while at most this many
/// pairs are measured (batch inference of 256 hosts measures about 650).
const WEIGH_MAX_PAIRS: usize = 4_000;

/// Contract the switch-to-switch links shorter than `below` that the measurements do not
/// support (backward elimination by evidence, as all-pairs joining does); returns how many.
///
/// Why: a link a few noise scales long can be a jitter artefact when few measurements cross
/// it, and the gap rule only contracts links below a threshold of about 3 noise scales. Its
/// evidence — how much worse the tree explains every measurement without it — tells the two
/// apart; real links are crossed by many measured pairs. Under 2 us of normal jitter this took
/// the 4-cluster, 128-host family from 80% to 95% exact (20 seeds). It is no cure-all: a 0.8 us
/// link that split a leaf switch of 8 hosts into 2 + 6 had evidence 28 and stayed. Trees of
/// more than [`super::EVIDENCE_MAX_HOSTS`] hosts keep the gap rule alone.
pub(crate) fn contract_weighed(t: &mut WorkTree, s: &Store, noise: f64, below: f64) -> u64 {
    let weak = |t: &WorkTree, v: usize| t.len(v) < below;
    // One least-squares refit over the measured pairs per candidate and step: affordable for
    // the pairs batch inference measures (a few percent of all), not for all-pairs at
    // thousands of hosts.
    if t.num_hosts_in() > super::EVIDENCE_MAX_HOSTS && s.pairs().count() > WEIGH_MAX_PAIRS {
        return 0;
    }
    if !t
        .switches()
        .any(|v| t.parent(v).is_some_and(|p| !t.is_host(p)) && weak(t, v))
    {
        return 0;
    }
    let obs: Vec<(usize, usize, f64)> = s
        .pairs()
        .filter(|&(a, b, _)| !s.is_bad(a, b) && t.vertex_of(a).is_some() && t.vertex_of(b).is_some())
        .map(|(a, b, o)| (a, b, o.d))
        .collect();
    let scale = super::joining::median_distance(obs.iter().map(|o| o.2));
    let weighted = super::joining::weighted_obs(t, &obs, noise);
    let merged = super::joining::contract_by_evidence_among(t, &weighted, scale, &weak);
    for m in &merged {
        log::trace!(
            "contracted a {:.3} us link: evidence {:.1} below {}",
            m.len_s * 1e6,
            m.evidence,
            m.threshold
        );
    }
    merged.len() as u64
}

/// Contract every switch-switch link shorter than `threshold`; returns how many.
fn merge_short_links(t: &mut WorkTree, threshold: f64) -> u64 {
    let mut merged = 0;
    loop {
        let short = t
            .switches()
            .filter(|&v| t.parent(v).is_some_and(|p| !t.is_host(p)) && t.len(v) < threshold)
            .min_by(|&a, &b| t.len(a).total_cmp(&t.len(b)));
        match short {
            Some(v) => {
                t.merge_into_parent(v);
                merged += 1;
            }
            None => return merged,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tree::Point;
    use super::*;

    #[test]
    fn threshold_sits_in_the_gap() {
        // Switch links 0.05, 0.1 (jitter-made) and 2.0, 2.5 (real) with noise 0.05: the gap
        // 0.1 -> 2.0 gives sqrt(0.2) = 0.447.
        let mut t = WorkTree::new(10);
        t.init_pair(0, 1, 10.0);
        let (v0, v1) = (t.vertex_of(0).unwrap(), t.vertex_of(1).unwrap());
        for (i, at) in [1.0, 1.05, 3.05, 3.15, 5.65].iter().enumerate() {
            let p = t.point_on_path(v0, v1, *at, 0.0);
            t.attach(p, 2 + i, 1.0);
        }
        let th = merge_threshold(&t, 0.05);
        assert!((th - 0.2f64.sqrt()).abs() < 1e-9, "{th}");
        assert_eq!(merge_short_links(&mut t, th), 2);
        assert_eq!(t.switches().count(), 3);
    }

    #[test]
    fn duplicate_checks_spread_over_each_switchs_hosts() {
        // A core with four leaf switches of three hosts each (3k, 3k+1, 3k+2), nothing measured:
        // six sibling pairs to check, each leaf in three of them. From one host per leaf they
        // would need three rounds at least; spread over the leaves' hosts, one.
        let mut t = WorkTree::new(12);
        t.init_pair(0, 3, 4.0);
        let (v0, v3) = (t.vertex_of(0).unwrap(), t.vertex_of(3).unwrap());
        let core = t.attach(t.point_on_path(v0, v3, 2.0, 0.0), 6, 2.0);
        let core = t.parent(core).unwrap();
        t.attach(Point::At(core), 9, 2.0);
        for k in 0..4 {
            let first = t.vertex_of(3 * k).unwrap();
            t.attach(t.point_on_path(first, core, 1.0, 0.0), 3 * k + 1, 1.0);
            let leaf = t.host_parent(3 * k).unwrap();
            t.attach(Point::At(leaf), 3 * k + 2, 1.0);
        }
        assert_eq!(t.neighbors(core).len(), 4, "a star of four leaf switches");
        let need = duplicate_check_pairs(&t, &Store::new(12));
        assert_eq!(need.len(), 6, "{need:?}");
        let mut uses = [0; 12];
        for &(a, b) in &need {
            assert_ne!(a / 3, b / 3, "a check crosses two leaves: {need:?}");
            uses[a] += 1;
            uses[b] += 1;
        }
        assert!(uses.iter().all(|&u| u <= 1), "{uses:?}");
        assert_eq!(crate::probe::matching_rounds(&need).len(), 1);
    }
}
