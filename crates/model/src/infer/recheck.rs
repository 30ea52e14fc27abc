//! Short links checked against fresh measurements before they are kept.
//!
//! Why: a switch-to-switch link a few noise scales long can be made by jitter. The weighing of
//! `refine::contract_weighed` judges it by the very measurements that made it: insertion
//! created the branch point because some pairs happened to read short (or long), and those
//! readings then vouch for it. Under 2 us of normal jitter on the far-apart families, links of
//! 0.7-1.0 us that split a leaf switch of 8 hosts into 6 + 2 kept evidence 28 (16 needed) and
//! were the commonest wrong partition (3 of the 5 inexact trials of 3 clusters x 144 hosts).
//!
//! Fresh readings are free of that selection. For each such link, pairs that decide it are
//! measured again: two pairs across it and one on each side (the hosts nearest the link). The
//! four fresh readings alone measure the path between the two sides, every host's own link
//! cancelling out ([`quartet_path`]), and the link stays when that path is nearer its length
//! than nothing. No threshold is involved: the question is which of the two trees the new data
//! are closer to. Where a pair could not be measured, both trees — with the link and without
//! it, each fitted to everything measured before — predict the pairs that were, and the link
//! stays when it predicts them better. Why the quartet first: both fitted trees carry the host
//! links the selected readings made; around a spurious 0.76 us link both put the hosts 0.4-0.9
//! us too close, the tree with the link (more flexible) fitted the fresh readings better, and
//! kept it (3 x 144 hosts under normal jitter; seed 563 of `bench_infer -- 1200 trials 3`).
//! Wrong trials under 2 us of normal jitter over the far-apart families, seeds 401-1600 and
//! 1601-2800: 47 -> 42 and 45 -> 35 of 12,000. Every pair is measured once more in full and
//! kept in the store afterwards.

use super::driver::Run;
use super::lengths::refit;
use super::tree::{Branch, WorkTree};
use super::InferError;

/// Most rounds spent on fresh readings (all links of all trees share them; pairs that do not
/// fit are left out, and their link is judged on the pairs that were measured).
pub(crate) const RECHECK_ROUNDS: usize = 2;

/// A link the fresh readings contracted, for the report (`InferStats::decisions`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Contracted {
    /// Hosts below the link.
    pub hosts_below: Vec<usize>,
    /// Its fitted length before contraction, seconds.
    pub len_s: f64,
    /// Pairs measured again that judged it.
    pub pairs: usize,
    /// How much nearer the fresh readings are to the tree with the link than to the one
    /// without it, in squared noise units (negative: nearer without it); 0 is where the
    /// recheck decides.
    pub evidence: f64,
}

/// A link under recheck: its lower vertex and the pairs that decide it.
struct Candidate {
    tree: usize,
    v: usize,
    pairs: Vec<(usize, usize)>,
}

/// The pairs that decide the link above `v`: two across it and one within each side, made of
/// the two hosts nearest the link on each side (none when a side has fewer than two hosts).
fn deciding_pairs(t: &WorkTree, v: usize) -> Vec<(usize, usize)> {
    let Some(p) = t.parent(v) else { return Vec::new() };
    let below = t.nearest_hosts(Branch { at: p, via: v }, 2, |_| true);
    let above = t.nearest_hosts(Branch { at: v, via: p }, 2, |_| true);
    if below.len() < 2 || above.len() < 2 {
        return Vec::new();
    }
    let (x1, x2, y1, y2) = (below[0].1, below[1].1, above[0].1, above[1].1);
    vec![(x1, y1), (x2, y2), (x1, x2), (y1, y2)]
}

/// The path between the two sides of a link from fresh readings of its [`deciding_pairs`]
/// (two across, one within each side): `(d(x1, y1) + d(x2, y2) - d(x1, x2) - d(y1, y2)) / 2`,
/// in which every host's own link cancels. `None` unless all four were measured.
fn quartet_path(pairs: &[(usize, usize)], fresh: &std::collections::HashMap<(usize, usize), f64>) -> Option<f64> {
    match pairs {
        [p1, p2, p3, p4] => Some((fresh.get(p1)? + fresh.get(p2)? - fresh.get(p3)? - fresh.get(p4)?) / 2.0),
        _ => None,
    }
}

/// Recheck every switch-to-switch link shorter than `below[i]` in tree `i` (see the module
/// documentation) and contract those the fresh readings do not support; each changed tree is
/// refitted with outliers beyond five `noise[i]` left out. Returns the links contracted.
pub(crate) fn recheck_short_links(
    run: &mut Run,
    trees: &mut [&mut WorkTree],
    below: &[f64],
    noise: &[f64],
) -> Result<Vec<Contracted>, InferError> {
    let mut cands: Vec<Candidate> = Vec::new();
    for (ti, t) in trees.iter().enumerate() {
        let mut short: Vec<usize> = t
            .switches()
            .filter(|&v| t.parent(v).is_some_and(|p| !t.is_host(p)) && t.len(v) < below[ti])
            .collect();
        short.sort_by(|&a, &b| t.len(a).total_cmp(&t.len(b)).then(a.cmp(&b)));
        for v in short {
            let pairs = deciding_pairs(t, v);
            if !pairs.is_empty() {
                cands.push(Candidate { tree: ti, v, pairs });
            }
        }
    }
    if cands.is_empty() {
        return Ok(Vec::new());
    }
    // Fresh readings, one distance per pair from its new measurement alone.
    let wanted: Vec<(usize, usize)> = cands.iter().flat_map(|c| c.pairs.iter().copied()).collect();
    let mut fresh: std::collections::HashMap<(usize, usize), f64> = Default::default();
    let mut measured = Vec::new();
    let spec = run.full_spec();
    for round in crate::probe::matching_rounds(&wanted).into_iter().take(RECHECK_ROUNDS) {
        for m in run.prober.ping_round(&round, &spec)? {
            // A reading cut short by a given-up round trip is no fresh reading: the pair
            // counts as unmeasured (see `driver::cut_short`).
            if super::driver::cut_short(&m, &spec) {
                measured.push(m);
                continue;
            }
            fresh.insert((m.a, m.b), run.store.distance_of(&m));
            measured.push(m);
        }
    }
    let mut doomed: Vec<(usize, usize, Contracted)> = Vec::new();
    for c in &cands {
        let t: &WorkTree = trees[c.tree];
        let n = c.pairs.iter().filter(|p| fresh.contains_key(p)).count();
        if n == 0 {
            continue;
        }
        let len = t.len(c.v);
        // The quartet decides where all four were measured (see the module documentation);
        // only otherwise is the tree without the link fitted (300 sweeps over the store).
        let (keep, evidence, why) = match quartet_path(&c.pairs, &fresh) {
            Some(l) => (
                l > len / 2.0,
                l * l - (l - len) * (l - len),
                format!("the path across them is {:.3} us", l * 1e6),
            ),
            None => {
                let mut without = t.clone();
                without.merge_into_parent(c.v);
                refit(&mut without, &run.store, noise[c.tree], 300);
                let (mut with_err, mut without_err) = (0.0, 0.0);
                for (&(a, b), d) in c.pairs.iter().filter_map(|p| Some((p, fresh.get(p)?))) {
                    let at = |t: &WorkTree| t.dist(t.vertex_of(a).expect("in tree"), t.vertex_of(b).expect("in tree"));
                    with_err += (d - at(t)).powi(2);
                    without_err += (d - at(&without)).powi(2);
                }
                (
                    with_err < without_err,
                    without_err - with_err,
                    format!(
                        "squared errors {:.3} with it, {:.3} without, us^2",
                        with_err * 1e12,
                        without_err * 1e12
                    ),
                )
            }
        };
        // A contraction changes the reported structure: said at info level, as merges are.
        let level = if keep { log::Level::Debug } else { log::Level::Info };
        log::log!(
            level,
            "treecast: recheck: the {:.3} us link above {} host(s): {} pair(s) measured again, {why}: {}",
            len * 1e6,
            super::joining::hosts_below(t, c.v).len(),
            n,
            if keep { "kept" } else { "contracted" },
        );
        if !keep {
            let scale = noise[c.tree].max(1e-9).powi(2);
            doomed.push((
                c.tree,
                c.v,
                Contracted {
                    hosts_below: super::joining::hosts_below(t, c.v),
                    len_s: len,
                    pairs: n,
                    evidence: evidence / scale,
                },
            ));
        }
    }
    for m in measured {
        run.store.add(m);
    }
    let mut contracted = Vec::new();
    let mut changed = vec![false; trees.len()];
    for (ti, v, why) in doomed {
        let t = &mut trees[ti];
        // An earlier contraction in the same tree may have removed the link or its parent.
        if t.is_alive(v) && t.parent(v).is_some_and(|p| !t.is_host(p)) {
            t.merge_into_parent(v);
            changed[ti] = true;
            contracted.push(why);
        }
    }
    for (ti, t) in trees.iter_mut().enumerate() {
        if changed[ti] {
            refit(t, &run.store, noise[ti], 300);
        }
    }
    Ok(contracted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{round_robin_rounds, NoiseModel, PingSpec, SimProber};
    use crate::topology::{Topology, TopologyBuilder, VertexKind};

    /// Hosts 0-5 on switch A, hosts 6 and 7 on switch B, B `ab` seconds from A (0: one
    /// switch); host links 12.5 us.
    fn truth(ab: f64) -> Topology {
        let mut b = TopologyBuilder::new();
        let a = b.vertex("A", VertexKind::Switch);
        let s = if ab > 0.0 {
            let s = b.vertex("B", VertexKind::Switch);
            b.link(a, s, ab, 1e9);
            s
        } else {
            a
        };
        for h in 0..8 {
            let v = b.vertex(format!("h{h}"), VertexKind::Node);
            b.link(v, if h < 6 { a } else { s }, 12.5e-6, 1e9);
        }
        b.build().unwrap()
    }

    /// The tree of `truth(0.8 us)` as inference would hold it: A is node 8, B node 9.
    fn split_tree() -> WorkTree {
        let mut t = WorkTree::new(8);
        let mut links: Vec<(usize, usize, f64)> = vec![(8, 0, 12.5e-6)];
        links.extend((1..6).map(|h| (h, 8, 12.5e-6)));
        links.push((9, 8, 0.8e-6));
        links.extend([(6, 9, 12.5e-6), (7, 9, 12.5e-6)]);
        t.build_rooted(0, &links);
        t
    }

    /// Recheck the split tree against hosts of `truth(ab)`, after measuring every pair once.
    fn recheck_against(ab: f64) -> (Vec<Contracted>, WorkTree) {
        let topo = truth(ab);
        let mut prober = SimProber::new(&topo, NoiseModel::default(), 3).unwrap();
        let mut run = Run::new(&mut prober, PingSpec::default(), 3);
        for round in round_robin_rounds(8) {
            run.measure(&round).unwrap();
        }
        let mut t = split_tree();
        let n = recheck_short_links(&mut run, &mut [&mut t], &[2e-6], &[0.0]).unwrap();
        (n, t)
    }

    #[test]
    fn a_link_the_fresh_readings_do_not_show_is_contracted() {
        let (n, t) = recheck_against(0.0);
        assert_eq!(n.len(), 1);
        assert_eq!(t.switches().count(), 1, "one switch for all eight hosts");
        // The report names the two hosts the link split off, the pairs that judged it, and
        // evidence on the contracting side of 0.
        let mut below = n[0].hosts_below.clone();
        below.sort_unstable();
        assert_eq!(below, vec![6, 7]);
        assert_eq!(n[0].pairs, 4);
        assert!(n[0].evidence < 0.0 && n[0].len_s > 0.0, "{:?}", n[0]);
    }

    #[test]
    fn a_real_short_link_is_kept() {
        let (n, t) = recheck_against(0.8e-6);
        assert!(n.is_empty());
        assert_eq!(t.switches().count(), 2);
    }

    #[test]
    fn the_quartet_measures_the_path_whatever_the_host_links() {
        // x1, x2 below a link of 0.8 with host links 1, 2; y1, y2 above it with 3, 4.
        let (x1, x2, y1, y2) = (0, 1, 2, 3);
        let pairs = [(x1, y1), (x2, y2), (x1, x2), (y1, y2)];
        let mut fresh: std::collections::HashMap<(usize, usize), f64> = Default::default();
        fresh.insert((x1, y1), 1.0 + 0.8 + 3.0);
        fresh.insert((x2, y2), 2.0 + 0.8 + 4.0);
        fresh.insert((x1, x2), 3.0);
        fresh.insert((y1, y2), 7.0);
        assert!((quartet_path(&pairs, &fresh).unwrap() - 0.8).abs() < 1e-12);
        // Without the link the path is 0, however long the host links.
        fresh.insert((x1, y1), 4.0);
        fresh.insert((x2, y2), 6.0);
        assert!(quartet_path(&pairs, &fresh).unwrap().abs() < 1e-12);
        // A pair not measured: no quartet.
        fresh.remove(&(y1, y2));
        assert_eq!(quartet_path(&pairs, &fresh), None);
    }

    #[test]
    fn deciding_pairs_cross_the_link_and_stay_on_each_side() {
        let t = split_tree();
        let b = t.vertex_of(6).and_then(|v| t.parent(v)).unwrap();
        let pairs = deciding_pairs(&t, b);
        assert_eq!(pairs.len(), 4);
        let below = |h: usize| h >= 6;
        assert!(below(pairs[0].0) && !below(pairs[0].1) && below(pairs[1].0) && !below(pairs[1].1));
        assert!(below(pairs[2].0) && below(pairs[2].1) && !below(pairs[3].0) && !below(pairs[3].1));
    }
}
