//! Topology-aware MPI baselines: a HAN-like two-level broadcast (Open MPI `coll/han`) and
//! MPICH's `topology_wave` tree.
//!
//! Both see the machine the way those libraries do: a rank's *node* is the `node` vertex it
//! hangs below (a rank directly below a switch is its own node); its *switch* is the first
//! switch above it and its *group* the switch above that. Ranks are MPI ranks mapped to leaves
//! by the placement, so a random placement scatters node-mates across rank numbers exactly as
//! it would for the real libraries.

use crate::plan::Plan;
use crate::topology::{Topology, VertexId, VertexKind};

/// Parent vertex of `v`, if any.
fn up(topo: &Topology, v: VertexId) -> Option<VertexId> {
    topo.parent(v).map(|(p, _)| p)
}

/// The node a rank runs on: its parent when that is a `node`, else the rank itself.
fn node_of(topo: &Topology, v: VertexId) -> VertexId {
    match up(topo, v) {
        Some(p) if topo.vertex(p).kind == VertexKind::Node => p,
        _ => v,
    }
}

/// The first switch above a rank, and the switch above that (its group). Vertices without a
/// switch above map to the anchor (one switch, one group).
fn switch_and_group(topo: &Topology, v: VertexId) -> (VertexId, VertexId) {
    let mut s = v;
    while topo.vertex(s).kind != VertexKind::Switch {
        match up(topo, s) {
            Some(p) => s = p,
            None => return (topo.anchor(), topo.anchor()),
        }
    }
    let g = up(topo, s)
        .filter(|&p| topo.vertex(p).kind == VertexKind::Switch)
        .unwrap_or(s);
    (s, g)
}

/// Group items by a key, groups ordered by first appearance, members in input order.
fn group_by(keys: &[VertexId]) -> Vec<Vec<u32>> {
    let mut index = std::collections::HashMap::new();
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for (r, k) in keys.iter().enumerate() {
        let g = *index.entry(*k).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(r as u32);
    }
    groups
}

/// Binomial tree (MPICH order) over `members`, rooted at `members[0]`; children appended into
/// `children` (indexed by MPI rank).
fn binomial_over(members: &[u32], children: &mut [Vec<u32>]) {
    let local = crate::plan::trees::binomial(members.len() as u32, 0);
    for (i, kids) in local.iter().enumerate() {
        children[members[i] as usize].extend(kids.iter().map(|&k| members[k as usize]));
    }
}

/// HAN-like two-level broadcast: per segment, a binomial tree among node leaders (the root
/// leads its own node, elsewhere the lowest rank), then a binomial tree inside each node from
/// its leader. Leaders forward a segment across the network before serving their node, and the
/// next segment's inter-node step overlaps the previous one's intra-node step, as HAN's
/// pipelined `ibcast` tasks do. `seg_bytes` is HAN's `bcast_segsize` (default 64 KiB).
pub fn han(topo: &Topology, verts: &[VertexId], root: u32, bytes: u64, seg_bytes: u64) -> Plan {
    let n = verts.len() as u32;
    let nodes: Vec<VertexId> = verts.iter().map(|&v| node_of(topo, v)).collect();
    let mut groups = group_by(&nodes);
    // Root's node first, the root leading it.
    let rg = groups.iter().position(|g| g.contains(&root)).expect("root is placed");
    groups.swap(0, rg);
    if let Some(i) = groups[0].iter().position(|&r| r == root) {
        groups[0].remove(i);
        groups[0].insert(0, root);
    }
    let mut children = vec![Vec::new(); n as usize];
    let leaders: Vec<u32> = groups.iter().map(|g| g[0]).collect();
    binomial_over(&leaders, &mut children);
    for g in &groups {
        binomial_over(g, &mut children);
    }
    let nsegs = segments(bytes, seg_bytes);
    let mut p = Plan::from_tree(root, &children, nsegs, "han");
    p.info.planned_bytes = bytes;
    p
}

/// Number of plan segments for a segment size (at least one; never more than the bytes).
pub fn segments(bytes: u64, seg_bytes: u64) -> u32 {
    if seg_bytes == 0 {
        return 1;
    }
    bytes.div_ceil(seg_bytes).clamp(1, u32::MAX as u64) as u32
}

/// MPICH's default `topology_wave` cost parameters (CVARs `MPIR_CVAR_BCAST_TOPO_OVERHEAD`,
/// `_SAME_SWITCHES`, `_DIFF_SWITCHES`, `_DIFF_GROUPS`), in MPICH's own abstract units.
pub const WAVE_OVERHEAD: i64 = 200;
pub const WAVE_SAME_SWITCH: i64 = 1600;
pub const WAVE_DIFF_SWITCH: i64 = 1900;
pub const WAVE_DIFF_GROUP: i64 = 2800;

/// MPICH's `topology_wave` tree (`MPII_Treeutil_tree_topology_wave_init`, MPICH 4.1+): a greedy
/// earliest-arrival tree built switch by switch. Each visited switch keeps a min-heap of its
/// ranks by the time they are free to send; an unvisited rank u can be reached from the top of
/// heap j at `top_j + lat(u, top_j) + 2 * overhead` (lat by same switch / same group / other
/// group), and the globally earliest (u, j) is connected; the sender then is busy `overhead`
/// longer. When a switch is done, the next switch (root's group first, switches from the
/// root's position) joins with its first rank as leader. Unsegmented; MPICH's tree broadcast
/// posts non-blocking sends to all children. Reordering (`TOPO_REORDER_ENABLE`) is not modelled.
pub fn topology_wave(topo: &Topology, verts: &[VertexId], root: u32) -> Plan {
    let n = verts.len();
    let sg: Vec<(VertexId, VertexId)> = verts.iter().map(|&v| switch_and_group(topo, v)).collect();
    let lat = |a: u32, b: u32| {
        let (x, y) = (sg[a as usize], sg[b as usize]);
        if x.1 != y.1 {
            WAVE_DIFF_GROUP
        } else if x.0 != y.0 {
            WAVE_DIFF_SWITCH
        } else {
            WAVE_SAME_SWITCH
        }
    };
    // Switches grouped, in order of first appearance; ranks within a switch in rank order.
    let switches = group_by(&sg.iter().map(|x| x.0).collect::<Vec<_>>());
    let switch_group: Vec<VertexId> = switches.iter().map(|s| sg[s[0] as usize].1).collect();
    let groups = group_by(&switch_group); // lists of switch indices
    let root_sw = switches.iter().position(|s| s.contains(&root)).expect("root placed");
    let root_gr = groups
        .iter()
        .position(|g| g.contains(&(root_sw as u32)))
        .expect("root group");
    let root_sw_idx = groups[root_gr].iter().position(|&s| s as usize == root_sw).unwrap();
    // Switch visiting order after the root's: groups from the root's, switches within a group
    // from the root's switch position (MPICH applies that offset in every group).
    let mut order = Vec::new();
    for go in 0..groups.len() {
        let g = &groups[(root_gr + go) % groups.len()];
        for so in 0..g.len() {
            let s = g[(root_sw_idx + so) % g.len()] as usize;
            if s != root_sw {
                order.push(s);
            }
        }
    }
    let mut children = vec![Vec::new(); n];
    let mut heaps: Vec<Vec<(u32, i64)>> = vec![vec![(root, 0)]];
    let mut unvisited: Vec<u32> = switches[root_sw].iter().copied().filter(|&r| r != root).collect();
    let mut next_switch = 0;
    loop {
        if unvisited.is_empty() {
            match order.get(next_switch) {
                Some(&s) => {
                    unvisited.extend(&switches[s]);
                    heaps.push(Vec::new());
                    next_switch += 1;
                }
                None => break,
            }
        }
        let (mut best_u, mut best_j, mut best_t) = (usize::MAX, usize::MAX, i64::MAX);
        for (i, &u) in unvisited.iter().enumerate() {
            let mut reach = i64::MAX;
            for (j, h) in heaps.iter().enumerate() {
                if let Some(&(top, t)) = h.first() {
                    reach = reach.min(t + lat(u, top) + 2 * WAVE_OVERHEAD);
                    if best_t > reach {
                        best_t = reach;
                        (best_u, best_j) = (i, j);
                    }
                }
            }
        }
        let u = unvisited.remove(best_u);
        let sender = heaps[best_j][0].0;
        children[sender as usize].push(u);
        heaps[best_j][0].1 += WAVE_OVERHEAD;
        heapify(&mut heaps[best_j], 0);
        let last = heaps.len() - 1;
        heap_insert(&mut heaps[last], (u, best_t));
    }
    let mut p = Plan::from_tree(root, &children, 1, "topo-wave");
    p.info.planned_bytes = 0;
    p
}

/// MPICH's min-heap `heapify` (strict comparisons, so ties keep MPICH's order).
fn heapify(h: &mut [(u32, i64)], i: usize) {
    let (l, r) = (2 * i + 1, 2 * i + 2);
    let mut smallest = if l < h.len() && h[l].1 < h[i].1 { l } else { i };
    if r < h.len() && h[r].1 < h[smallest].1 {
        smallest = r;
    }
    if smallest != i {
        h.swap(i, smallest);
        heapify(h, smallest);
    }
}

/// MPICH's `insertNode`: sift up while strictly smaller than the parent.
fn heap_insert(h: &mut Vec<(u32, i64)>, x: (u32, i64)) {
    h.push(x);
    let mut i = h.len() - 1;
    while i > 0 && x.1 < h[(i - 1) / 2].1 {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologyBuilder;

    /// 2 groups x 2 switches x 2 nodes x 2 ranks = 16 ranks, ranks numbered node by node.
    fn machine() -> Topology {
        let mut b = TopologyBuilder::new();
        let top = b.vertex("top", VertexKind::Switch);
        let mut r = 0;
        for g in 0..2 {
            let gs = b.vertex(format!("g{g}"), VertexKind::Switch);
            b.link(gs, top, 1e-6, 1e9);
            for s in 0..2 {
                let sw = b.vertex(format!("s{g}{s}"), VertexKind::Switch);
                b.link(sw, gs, 1e-6, 1e9);
                for h in 0..2 {
                    let nd = b.vertex(format!("n{g}{s}{h}"), VertexKind::Node);
                    b.link(nd, sw, 1e-6, 1e9);
                    for _ in 0..2 {
                        let rv = b.rank(r);
                        r += 1;
                        b.link(rv, nd, 1e-7, 1e10);
                    }
                }
            }
        }
        b.build().unwrap()
    }

    fn verts(t: &Topology) -> Vec<VertexId> {
        (0..t.num_ranks() as u32).map(|r| t.rank_vertex(r)).collect()
    }

    #[test]
    fn han_crosses_each_node_once() {
        let t = machine();
        for root in [0, 5, 15] {
            let p = han(&t, &verts(&t), root, 1 << 20, 64 << 10);
            p.validate().unwrap();
            assert_eq!(p.nsegs, 16);
            let parents = p.tree_parents().unwrap();
            // Exactly one rank per non-root node receives from outside its node.
            let outside = (0..16u32)
                .filter(|&r| r != root && parents[r as usize] / 2 != r / 2)
                .count();
            assert_eq!(outside, 7, "root {root}");
        }
    }

    #[test]
    fn topology_wave_greedy_by_hand() {
        let t = machine();
        let p = topology_wave(&t, &verts(&t), 0);
        p.validate().unwrap();
        let parents = p.tree_parents().unwrap();
        // Root switch s00 holds ranks 0..4. Root reaches 1 at 0+1600+400 = 2000 (root busy
        // until 200); then from the heap top (root at 200): 2 at 2200 (root -> 400); then root
        // (400) vs rank 1 (2000): 3 at 2400 from the root.
        assert_eq!(&parents[1..4], &[0, 0, 0]);
        // Next switch s01 (same group): its leader 4 comes from the root heap's top (root at
        // 600): 600 + 1900 + 400 = 2900.
        assert_eq!(parents[4], 0);
        // The remaining ranks of s01 (5, 6, 7) come from switch heaps: from the leader 4
        // (2900 + 1600 + 400 = 4900) or from s00's top (root at 800: 800+1900+400 = 3100):
        // the root is still earlier.
        assert_eq!(parents[5], 0);
        // Every rank is reached.
        assert!(parents.iter().enumerate().all(|(r, &p)| r == 0 || p != u32::MAX));
    }
}
