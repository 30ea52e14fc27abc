//! The staged, concurrent bandwidth map (seed 002 section 6.1).
//!
//! Concurrent transfers that share a bottleneck disturb each other, so without a tree bandwidth
//! must be measured pair after pair. With the tree, links are measured bottom-up in stages:
//! root the tree at its centre (fewest stages); stage i handles the switches at depth h - i.
//! At switch X with children C1..Cp, one representative host per child (the child itself if it
//! is a host, else the host of its subtree with the highest bandwidth up to the child according
//! to the deeper stages already measured) is paired with another child's representative; the
//! p/2 transfers of every switch of the stage run in one round — their paths stay inside
//! disjoint subtrees, so they share no link. An odd one out is measured in a second round
//! against the best-connected representative of its switch. A pair's rate is assigned to the
//! links X-Ci and X-Cj. Every host takes part in at most two transfers per stage, so the map
//! costs O(depth) rounds.
//!
//! Limitation kept from the paper: a slow deep link hides a faster shallow one (the shallow
//! link is then assigned the deep link's rate, a lower bound).

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
    /// Measured rate of the link above each working-tree vertex (bytes/s).
    #[serde(skip)]
    pub(crate) per_link: HashMap<usize, f64>,
}

/// Build the map over `run.tree` with transfers of `bytes`.
pub(crate) fn measure(run: &mut Run, t: &WorkTree, bytes: u64) -> Result<BandwidthMap, InferError> {
    let centre = centre(t);
    // Rooted view at the centre: parent and children by BFS.
    let (parent, order) = bfs(t, centre);
    let mut depth: HashMap<usize, usize> = HashMap::new();
    for &v in &order {
        let d = parent[&v].map_or(0, |p| depth[&p] + 1);
        depth.insert(v, d);
    }
    let children = |v: usize| -> Vec<usize> {
        let mut c: Vec<usize> = t.neighbors(v).into_iter().filter(|w| parent[w] == Some(v)).collect();
        c.sort_unstable();
        c
    };
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
    // Link rate keyed by the lower vertex (in the centre rooting).
    let mut rate: HashMap<usize, f64> = HashMap::new();
    for stage_depth in (0..=height).rev() {
        let switches: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&v| !t.is_host(v) && depth[&v] == stage_depth)
            .collect();
        let mut first: Vec<(usize, usize, usize, usize)> = Vec::new(); // (host a, host b, child a, child b)
        let mut second: Vec<(usize, usize, usize)> = Vec::new(); // (host a, host b, child a)
        for &x in &switches {
            let kids = children(x);
            let reps: Vec<(usize, usize, f64)> = kids
                .iter()
                .map(|&c| {
                    let (h, bw) = representative(t, c, &rate, &children);
                    (c, h, bw)
                })
                .collect();
            for pair in reps.chunks(2) {
                if let [(ca, ha, _), (cb, hb, _)] = pair {
                    first.push((*ha, *hb, *ca, *cb));
                }
            }
            if reps.len() % 2 == 1 && reps.len() >= 3 {
                let (c_odd, h_odd, _) = reps[reps.len() - 1];
                let partner = reps[..reps.len() - 1]
                    .iter()
                    .max_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(&a.0)))
                    .unwrap();
                second.push((h_odd, partner.1, c_odd));
            }
        }
        if !first.is_empty() {
            let pairs: Vec<(usize, usize)> = first.iter().map(|p| (p.0, p.1)).collect();
            let r = run.prober.bandwidth_round(&pairs, bytes)?;
            map.rounds += 1;
            map.transfers += pairs.len();
            for (p, bw) in first.iter().zip(r) {
                rate.insert(p.2, bw);
                rate.insert(p.3, bw);
            }
        }
        if !second.is_empty() {
            let pairs: Vec<(usize, usize)> = second.iter().map(|p| (p.0, p.1)).collect();
            let r = run.prober.bandwidth_round(&pairs, bytes)?;
            map.rounds += 1;
            map.transfers += pairs.len();
            for (p, bw) in second.iter().zip(r) {
                rate.insert(p.2, bw);
            }
        }
    }
    // Re-key by the working tree's own rooting (the link above each vertex).
    for (v, bw) in rate {
        let p = parent[&v].expect("rated vertices have a parent in the centre rooting");
        let lower = if t.parent(v) == Some(p) { v } else { p };
        map.per_link.insert(lower, bw);
    }
    Ok(map)
}

/// The host of `c`'s subtree (centre rooting) with the best known rate up to `c`, and that rate.
fn representative(
    t: &WorkTree,
    c: usize,
    rate: &HashMap<usize, f64>,
    children: &dyn Fn(usize) -> Vec<usize>,
) -> (usize, f64) {
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
        for k in children(v) {
            let r = rate.get(&k).copied().unwrap_or(f64::INFINITY);
            stack.push((k, bw.min(r), lat + t.link_len(v, k)));
        }
    }
    let (h, bw, _) = best.expect("every subtree holds a host");
    (h, bw)
}

/// The switch with the smallest eccentricity in hops (ties: smallest id).
fn centre(t: &WorkTree) -> usize {
    let mut best = (usize::MAX, t.root());
    for s in t.switches() {
        let (parent, order) = bfs(t, s);
        let mut depth: HashMap<usize, usize> = HashMap::new();
        let mut ecc = 0;
        for &v in &order {
            let d = parent[&v].map_or(0, |p| depth[&p] + 1);
            depth.insert(v, d);
            ecc = ecc.max(d);
        }
        if ecc < best.0 {
            best = (ecc, s);
        }
    }
    best.1
}

/// Breadth-first order from `r` with parent pointers.
fn bfs(t: &WorkTree, r: usize) -> (HashMap<usize, Option<usize>>, Vec<usize>) {
    let mut parent = HashMap::new();
    parent.insert(r, None);
    let mut order = vec![r];
    let mut i = 0;
    while i < order.len() {
        let v = order[i];
        for w in t.neighbors(v) {
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(w) {
                e.insert(Some(v));
                order.push(w);
            }
        }
        i += 1;
    }
    (parent, order)
}
