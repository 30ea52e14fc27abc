//! The staged, concurrent bandwidth map ([Shirai2007] §6.1), with every link rated by the
//! fastest transfer that crossed it.
//!
//! Concurrent transfers that share a bottleneck disturb each other, so without a tree bandwidth
//! must be measured pair after pair. With the tree, links are measured bottom-up in stages:
//! the tree is rooted at its center (see `center`), and stage i handles the switches at depth
//! h - i. At switch X with children C1..Cp, one representative host per child (the child itself
//! if it is a host, else the host of its subtree with the highest known rate up to the child,
//! from the deeper stages) transfers to another child's representative; the transfers of every
//! switch of a stage run in one round, since their paths stay inside disjoint subtrees.
//!
//! **Attribution.** A transfer's rate is what the slowest link of its path allows, so it is a
//! lower bound on the rate of *every* link it crossed, and says nothing more about which of
//! them is the slow one. Each link is therefore rated by the fastest transfer that crossed it,
//! and every child of a switch takes part in two transfers with two different partners (pairs
//! (C1,C2), (C3,C4), ... in one round, (C2,C3), ..., (Cp,C1) in the next), host children paired
//! with host children first: a fast host link then always meets a fast partner, and a slow
//! uplink cannot stick to the host link of whichever host happened to measure it (which the
//! rule of [Shirai2007] — the pair's rate to both of its links at X — did, putting a 200 Mbit/s uplink's
//! rate on an unshaped host link). A switch with two children gives both links the one rate;
//! the two are in series on every path between them, so plans see the same either way.
//!
//! Every host takes part in at most two transfers per stage, so the map costs O(depth) rounds.
//! Limitation kept from [Shirai2007]: a link crossed only by transfers that a slower link limits
//! gets that slower rate (a lower bound).

use super::driver::Run;
use super::tree::WorkTree;
use super::InferError;
use serde::Serialize;
use std::collections::HashMap;

/// What building the bandwidth map cost.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BandwidthMap {
    /// Number of stages (the height of the tree rooted at its centre).
    pub stages: usize,
    /// Rounds of concurrent transfers.
    pub rounds: usize,
    /// Transfers made.
    pub transfers: usize,
    /// Bytes per transfer.
    pub bytes: u64,
    /// Transfers made again because a link read far below its siblings (see [`SUSPECT`]).
    pub rechecked: usize,
    /// Measured rate of the link above each working-tree vertex (bytes/s).
    #[serde(skip)]
    pub(crate) per_link: HashMap<usize, f64>,
}

/// The links (named by their lower vertex) on the path between vertices `u` and `w`.
fn path_links(t: &WorkTree, u: usize, w: usize) -> Vec<usize> {
    t.path(u, w)
        .windows(2)
        .map(|p| {
            let (x, y) = (p[0].0, p[1].0);
            if t.parent(x) == Some(y) {
                x
            } else {
                y
            }
        })
        .collect()
}

/// Build the map over `t` (rooted at its center) with transfers of `bytes`.
pub(crate) fn measure(run: &mut Run, t: &WorkTree, bytes: u64) -> Result<BandwidthMap, InferError> {
    // Depth of every vertex below the root.
    let mut depth: HashMap<usize, usize> = HashMap::new();
    let mut order = vec![t.root()];
    depth.insert(t.root(), 0);
    let mut i = 0;
    while i < order.len() {
        let v = order[i];
        for &c in t.children(v) {
            depth.insert(c, depth[&v] + 1);
            order.push(c);
        }
        i += 1;
    }
    let height = order
        .iter()
        .filter(|&&v| !t.is_host(v))
        .map(|v| depth[v])
        .max()
        .unwrap_or(0);
    let mut map = BandwidthMap {
        stages: height + 1,
        bytes,
        ..BandwidthMap::default()
    };
    // Best rate seen on the link above each vertex.
    let mut rate: HashMap<usize, f64> = HashMap::new();
    for stage_depth in (0..=height).rev() {
        let switches: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&v| !t.is_host(v) && depth[&v] == stage_depth)
            .collect();
        // The two rounds of the stage: (host a, host b) transfers.
        let mut rounds: [Vec<(usize, usize)>; 2] = [Vec::new(), Vec::new()];
        for &x in &switches {
            // Host children first (in id order), then switch children.
            let mut kids: Vec<usize> = t.children(x).to_vec();
            kids.sort_by_key(|&c| (!t.is_host(c), c));
            let reps: Vec<usize> = kids.iter().map(|&c| representative(t, c, &rate)).collect();
            let k = reps.len();
            for j in (0..k.saturating_sub(1)).step_by(2) {
                rounds[0].push((reps[j], reps[j + 1]));
            }
            if k >= 3 {
                for j in (1..k).step_by(2) {
                    rounds[1].push((reps[j], reps[(j + 1) % k]));
                }
            }
        }
        for pairs in rounds.iter().filter(|r| !r.is_empty()) {
            let r = run.prober.bandwidth_round(pairs, bytes)?;
            map.rounds += 1;
            map.transfers += pairs.len();
            for (&(a, b), bw) in pairs.iter().zip(r) {
                let (Some(va), Some(vb)) = (t.vertex_of(a), t.vertex_of(b)) else {
                    continue;
                };
                for l in path_links(t, va, vb) {
                    let e = rate.entry(l).or_insert(0.0);
                    *e = e.max(bw);
                }
            }
        }
    }
    recheck(run, t, bytes, &mut rate, &mut map)?;
    map.per_link = rate;
    Ok(map)
}

/// A link rated below this fraction of the median of its siblings' links (the other children
/// of its switch of its kind, host or switch) is measured again.
///
/// Why: a link is rated by the fastest of its (usually two) transfers, so one busy moment in
/// both rates it for the whole job. On the emulated 3x3 (one 2-core VM, 2026-12-02) one
/// `treecast probe` of twenty rated a host link 431 Mbit/s beside 3.2-7.5 Gbit/s for the other
/// host links of its switch, and in two of ten profiled jobs the set-up then timed its burst
/// probe on host links, and predicted every broadcast from 16 KiB or 64 KiB up 1.6-7x slow.
/// Host links there read 5.6-13.7 Gbit/s, so a half flags one now and then, at the cost of one
/// more 1 MiB transfer; a link that is really slow reads slow again and keeps its rate.
pub(crate) const SUSPECT: f64 = 0.5;
/// Times a suspect link is measured again at most.
const RECHECKS: usize = 2;

/// Measure again, one transfer at a time, every link that reads below [`SUSPECT`] of its
/// siblings' median: from the best host below it to the best host below its fastest sibling;
/// each link keeps the fastest rate it has read.
fn recheck(
    run: &mut Run,
    t: &WorkTree,
    bytes: u64,
    rate: &mut HashMap<usize, f64>,
    map: &mut BandwidthMap,
) -> Result<(), InferError> {
    for _ in 0..RECHECKS {
        let suspects = suspects(t, rate);
        if suspects.is_empty() {
            break;
        }
        for (v, sibling) in suspects {
            let pair = (representative(t, v, rate), representative(t, sibling, rate));
            let bw = run.prober.bandwidth_round(&[pair], bytes)?;
            map.rounds += 1;
            map.transfers += 1;
            map.rechecked += 1;
            let (Some(va), Some(vb)) = (t.vertex_of(pair.0), t.vertex_of(pair.1)) else {
                continue;
            };
            for l in path_links(t, va, vb) {
                let e = rate.entry(l).or_insert(0.0);
                *e = e.max(bw[0]);
            }
        }
    }
    Ok(())
}

/// The links (vertices below them) rated below [`SUSPECT`] of the median of their siblings'
/// rates, each with its fastest sibling, in vertex order.
fn suspects(t: &WorkTree, rate: &HashMap<usize, f64>) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for v in t.vertices() {
        let (Some(p), Some(&r)) = (t.parent(v), rate.get(&v)) else {
            continue;
        };
        let mut sib: Vec<(f64, usize)> = t
            .children(p)
            .iter()
            .filter(|&&c| c != v && t.is_host(c) == t.is_host(v))
            .filter_map(|&c| rate.get(&c).map(|&x| (x, c)))
            .collect();
        if sib.is_empty() {
            continue;
        }
        sib.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // The lower median: with two siblings, the slower one.
        let median = sib[(sib.len() - 1) / 2].0;
        if r < SUSPECT * median {
            out.push((v, sib[sib.len() - 1].1));
        }
    }
    out
}

/// The host of `c`'s subtree with the best known rate up to `c` (ties: shorter latency, then
/// smaller id).
fn representative(t: &WorkTree, c: usize, rate: &HashMap<usize, f64>) -> usize {
    let mut best: Option<(usize, f64, f64)> = None; // (host, rate, latency)
    let mut stack = vec![(c, f64::INFINITY, 0.0)];
    while let Some((v, bw, lat)) = stack.pop() {
        if let Some(h) = t.host_of(v) {
            let better = best.is_none_or(|(bh, bb, bl)| bw > bb || (bw == bb && (lat < bl || (lat == bl && h < bh))));
            if better {
                best = Some((h, bw, lat));
            }
            continue;
        }
        for &k in t.children(v) {
            let r = rate.get(&k).copied().unwrap_or(f64::INFINITY);
            stack.push((k, bw.min(r), lat + t.len(k)));
        }
    }
    best.expect("every subtree holds a host").0
}
