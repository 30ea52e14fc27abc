//! Long messages: segmented, pipelined plans.
//!
//! A long message is bandwidth-bound: the best any schedule can do for receiver r is about
//! `latency(root, r) + bytes / bottleneck(root, r)`. Reaching that needs every link to stream
//! while the first segments are still travelling, so the message is cut into segments and sent
//! down one or more spanning trees, segment after segment:
//!
//! * **DFS chain** ([Shirai2007] §6.2): one chain through the ranks in depth-first order of the tree, so
//!   each link is crossed once per direction and every rank forwards at its full access rate;
//!   but the pipeline fills over n hops.
//! * **Pipelined hierarchical tree**: the tree of [`super::hier`] (one relay per switch and per
//!   host), segmented. Shallow, but a relay with two children splits its uplink between them.
//! * **Two-tree over hosts** (after Sanders, Speck and Träff's two-tree broadcast): the host
//!   relays form two binary trees in which every relay is an inner node of at most one; even
//!   segments go down one, odd segments down the other. Every host sends at most one copy of the
//!   message over its link (two children x half), so every host link streams at full rate with
//!   depth 2 log2(hosts); in depth-first order a switch's hosts are contiguous, so only a few tree
//!   edges per tree cross each uplink. Inside a host, a chain (or two-tree) over shared memory.
//!   (Two-trees per switch level were tried first: a switch relay then feeds two levels and its
//!   link carries two copies.)
//! * **k chains**: the DFS order cut into k contiguous runs fed by the root in turn — depth n/k
//!   for a root whose link is k times wider than the rest (e.g. shared memory on a big host).
//!
//! All are built as *multi-tree* plans: tree j carries the segments s with s mod K = j, and every
//! rank's ops are ordered segment by segment (receive s, then forward s to its children in that
//! tree, outer groups first), which is deadlock-free by induction on s.

use super::relay::{dfs_order, GroupKind, Hierarchy};
use super::{class_max_segments, size_class, Op, Plan, SegRange};
use crate::topology::Topology;

/// Children lists of one spanning tree, ordered (the order a rank sends in).
pub type Tree = Vec<Vec<u32>>;

/// Smallest segment the planners use (below this, per-message costs dominate real networks).
pub const MIN_SEGMENT_BYTES: u64 = 4 * 1024;
/// Most segments per message (keeps plans and their simulation small).
pub const MAX_SEGMENTS: u32 = 512;
/// Messages longer than this go by rendezvous in the planner's model (a handshake before the
/// data): Open MPI's TCP eager limit. Segments of pipelined plans stay below it where they can;
/// above it every segment would wait for the receiver to answer.
pub const RENDEZVOUS_BYTES: u64 = 64 * 1024;

/// Per-message overhead assumed when none was measured (seconds): what an MPI library spends per
/// message beyond the wire (about 1 us on InfiniBand; the runtime measures its own at start-up,
/// see `runtime::prober`). The flow models charge none, so without it they would always favour
/// the most segments and the widest fan-outs.
pub const MESSAGE_OVERHEAD_S: f64 = 1e-6;

/// The multi-tree plan: tree `j` carries segments `s` with `s % trees.len() == j`.
///
/// Every rank issues its sends in list order, so a send waiting for a late segment blocks the
/// ones behind it. With several trees a rank can sit deep in one and shallow in another (a host
/// relay forwards both halves to its host), so ops are ordered by each segment's estimated
/// arrival at the rank — emitted by the root one after another at its link's rate, then
/// delayed by latency + segment time per hop of its tree — not by segment index. Every send
/// then depends only on ops with a smaller estimate (its data comes from the parent, one hop
/// earlier) or before it in its own list, so the plan cannot deadlock. With one tree this is
/// plain segment order.
pub fn plan_from_trees(topo: &Topology, root: u32, trees: &[Tree], nsegs: u32, bytes: u64, algorithm: &str) -> Plan {
    let n = trees[0].len();
    let nsegs = nsegs.max(trees.len() as u32);
    let seg = segment_estimate(bytes, nsegs);
    let mut parent = vec![vec![u32::MAX; n]; trees.len()];
    let mut dist = vec![vec![0.0f64; n]; trees.len()];
    for (j, t) in trees.iter().enumerate() {
        let mut stack = vec![root];
        while let Some(p) = stack.pop() {
            for &c in &t[p as usize] {
                parent[j][c as usize] = p;
                dist[j][c as usize] = hop_after(topo, dist[j][p as usize], p, c, seg);
                stack.push(c);
            }
        }
    }
    let mut ops = vec![Vec::new(); n];
    let mut keyed = Vec::new();
    for (r, out) in ops.iter_mut().enumerate() {
        let at: Vec<(u32, f64)> = (0..trees.len()).map(|j| (parent[j][r], dist[j][r])).collect();
        *out = rank_ops(topo, root, trees, nsegs, bytes, r as u32, &at, &mut keyed);
    }
    let mut p = Plan::empty(n as u32, root, algorithm);
    p.nsegs = nsegs;
    p.ops = ops;
    p
}

/// Bytes per segment as [`plan_from_trees`] orders ops by.
fn segment_estimate(bytes: u64, nsegs: u32) -> f64 {
    (bytes as f64 / nsegs as f64).max(1.0)
}

/// A segment's estimated arrival at child `c` given its arrival `at_parent` at `p`: latency +
/// segment time of the path, plus a tiny term that keeps estimates strictly increasing down a
/// tree.
fn hop_after(topo: &Topology, at_parent: f64, p: u32, c: u32, seg: f64) -> f64 {
    let (pv, cv) = (topo.rank_vertex(p), topo.rank_vertex(c));
    let bw = topo.path_bandwidth(pv, cv);
    let hop = topo.path_latency(pv, cv) + if bw.is_finite() { seg / bw } else { 0.0 };
    at_parent + hop + 1e-12
}

/// Rank `me`'s ops in the multi-tree plan of [`plan_from_trees`] — the same list, computed from
/// the trees alone: its parent in every tree and the estimated arrival there come from the path
/// down from the root, not from the whole plan. O(ranks) to find the parents, then O(depth +
/// own ops). What a rank of a large communicator runs without building everybody's ops.
pub fn local_ops_from_trees(topo: &Topology, root: u32, trees: &[Tree], nsegs: u32, bytes: u64, me: u32) -> Vec<Op> {
    let nsegs = nsegs.max(trees.len() as u32);
    let seg = segment_estimate(bytes, nsegs);
    let at: Vec<(u32, f64)> = trees
        .iter()
        .map(|t| {
            let parent = super::trees::parents(t);
            let mut path = vec![me];
            while let Some(&p) = parent.get(*path.last().expect("not empty") as usize) {
                if p == u32::MAX || path.len() > t.len() {
                    break;
                }
                path.push(p);
            }
            // Accumulated root-first, in the order plan_from_trees adds them up.
            let dist = path
                .windows(2)
                .rev()
                .fold(0.0, |d, w| hop_after(topo, d, w[1], w[0], seg));
            (parent[me as usize], dist)
        })
        .collect();
    rank_ops(topo, root, trees, nsegs, bytes, me, &at, &mut Vec::new())
}

/// Ops of rank `me` (module docs: by each segment's estimated arrival) from its parent and the
/// estimated first arrival in every tree (`at[j]`).
#[allow(clippy::too_many_arguments)]
fn rank_ops(
    topo: &Topology,
    root: u32,
    trees: &[Tree],
    nsegs: u32,
    bytes: u64,
    me: u32,
    at: &[(u32, f64)],
    keyed: &mut Vec<(f64, u32, u32, Op)>,
) -> Vec<Op> {
    let k = trees.len() as u32;
    let seg = segment_estimate(bytes, nsegs);
    let root_bw = access_bandwidth(topo, root);
    let emit = |s: u32| {
        if root_bw.is_finite() {
            s as f64 * seg / root_bw
        } else {
            s as f64 * 1e-12
        }
    };
    keyed.clear();
    for s in 0..nsegs {
        let j = (s % k) as usize;
        let (parent, dist) = at[j];
        let t = emit(s) + dist;
        if me != root {
            keyed.push((
                t,
                s,
                0,
                Op::Recv {
                    peer: parent,
                    segs: SegRange::one(s),
                },
            ));
        }
        for (i, &c) in trees[j][me as usize].iter().enumerate() {
            keyed.push((
                t,
                s,
                1 + i as u32,
                Op::Send {
                    peer: c,
                    segs: SegRange::one(s),
                },
            ));
        }
    }
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    keyed.iter().map(|x| x.3).collect()
}

/// The chain of [Shirai2007] §6.2: the ranks in depth-first order from the root.
pub fn dfs_chain(topo: &Topology, root: u32) -> Tree {
    super::trees::chain(topo.num_ranks() as u32, &dfs_order(topo, root))
}

/// The DFS order cut into `k` contiguous runs, each a chain fed by the root (root sends to the
/// heads in turn). `k = 1` is [`dfs_chain`].
pub fn k_chains(topo: &Topology, root: u32, k: usize) -> Tree {
    let order = dfs_order(topo, root);
    let rest = &order[1..];
    let n = topo.num_ranks();
    let mut children = vec![Vec::new(); n];
    let k = k.clamp(1, rest.len().max(1));
    let len = rest.len().div_ceil(k);
    for run in rest.chunks(len.max(1)) {
        children[root as usize].push(run[0]);
        for w in run.windows(2) {
            children[w[0] as usize].push(w[1]);
        }
    }
    children
}

/// Two spanning trees over `members` (in locality order) fed by `source`, such that every
/// member is an inner node of at most one: in tree A only members at odd positions have
/// children, in tree B only even positions. Each is an in-order binary tree over the positions
/// (depth about log2 m). Appends the edges to `a` and `b` (children lists of all ranks).
pub fn two_trees(source: u32, members: &[u32], a: &mut Tree, b: &mut Tree) {
    if members.is_empty() {
        return;
    }
    for (tree, inner_parity) in [(a, 1usize), (b, 0usize)] {
        let root = build_range(members, 0, members.len(), inner_parity, tree);
        tree[source as usize].push(members[root]);
    }
}

/// In-order binary tree over positions `[lo, hi)` whose inner nodes all have `parity`; returns
/// the position of its root.
fn build_range(members: &[u32], lo: usize, hi: usize, parity: usize, tree: &mut Tree) -> usize {
    debug_assert!(hi > lo);
    if hi - lo == 1 {
        return lo;
    }
    // The position of the right parity nearest the middle.
    let mid = (lo + hi) / 2;
    let root = if mid % 2 == parity {
        mid
    } else if mid + 1 < hi {
        mid + 1
    } else {
        mid - 1
    };
    debug_assert!(root >= lo && root < hi && root % 2 == parity);
    let r = members[root];
    if root > lo {
        let left = build_range(members, lo, root, parity, tree);
        tree[r as usize].push(members[left]);
    }
    if root + 1 < hi {
        let right = build_range(members, root + 1, hi, parity, tree);
        tree[r as usize].push(members[right]);
    }
    root
}

/// How a host group distributes inside the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostScheme {
    /// Both trees use a chain through the host's ranks (one copy per rank link).
    Chain,
    /// Two-trees inside the host as well.
    TwoTree,
}

/// Two-tree over hosts (module docs): the hosts other than the root's (in depth-first order,
/// so a switch's hosts are contiguous and subtrees stay under their switch as far as possible)
/// form the two trees fed by the root's host; inside every host, per `host`.
///
/// Inside a host with two or more ranks, the relay only receives from the network; a second
/// rank (the *sender*) does all of the host's network sends, fed by the relay over shared
/// memory; the other ranks hang below the relay. So no rank both forwards locally and sends
/// over the network: a shared-memory transfer wants the whole rank link, and a rank that also
/// streams to the network would starve one or the other.
pub fn host_two_trees(topo: &Topology, root: u32, host: HostScheme) -> [Tree; 2] {
    host_two_trees_on(topo, root, &Hierarchy::new(topo, root), host)
}

/// [`host_two_trees`] on a hierarchy already built for the root.
pub fn host_two_trees_on(topo: &Topology, root: u32, h: &Hierarchy, host: HostScheme) -> [Tree; 2] {
    let n = topo.num_ranks();
    let pos = dfs_positions(topo, root);
    let mut a: Tree = vec![Vec::new(); n];
    let mut b: Tree = vec![Vec::new(); n];
    let mut hosts: Vec<usize> = h
        .top_down()
        .into_iter()
        .filter(|&g| h.groups[g].kind == GroupKind::Host)
        .collect();
    hosts.sort_by_key(|&g| pos[h.groups[g].relay as usize]);
    // Per host: (receiver = relay, sender, the rest in DFS order).
    let layout: Vec<(u32, u32, Vec<u32>)> = hosts
        .iter()
        .map(|&g| {
            let grp = &h.groups[g];
            let mut rest: Vec<u32> = grp.ranks.iter().copied().filter(|&r| r != grp.relay).collect();
            rest.sort_by_key(|&r| pos[r as usize]);
            let sender = if rest.is_empty() { grp.relay } else { rest.remove(0) };
            (grp.relay, sender, rest)
        })
        .collect();
    let root_host = layout.iter().position(|x| x.0 == root).expect("the root's host");
    // Two trees over host indices, then map edges host u -> host v to sender(u) -> relay(v).
    let others: Vec<u32> = (0..layout.len() as u32).filter(|&i| i as usize != root_host).collect();
    let mut ha: Tree = vec![Vec::new(); layout.len()];
    let mut hb: Tree = vec![Vec::new(); layout.len()];
    two_trees(root_host as u32, &others, &mut ha, &mut hb);
    for (t, ht) in [(&mut a, &ha), (&mut b, &hb)] {
        for (u, vs) in ht.iter().enumerate() {
            for &v in vs {
                t[layout[u].1 as usize].push(layout[v as usize].0);
            }
        }
    }
    for (relay, sender, rest) in &layout {
        for t in [&mut a, &mut b] {
            if sender != relay {
                // The sender first: the network is waiting for it.
                t[*relay as usize].insert(0, *sender);
            }
        }
        match host {
            HostScheme::Chain => {
                for t in [&mut a, &mut b] {
                    let mut prev = *relay;
                    for &m in rest {
                        t[prev as usize].push(m);
                        prev = m;
                    }
                }
            }
            HostScheme::TwoTree => two_trees(*relay, rest, &mut a, &mut b),
        }
    }
    [a, b]
}

fn dfs_positions(topo: &Topology, root: u32) -> Vec<usize> {
    let mut pos = vec![0; topo.num_ranks()];
    for (i, r) in dfs_order(topo, root).into_iter().enumerate() {
        pos[r as usize] = i;
    }
    pos
}

/// Analytic time of a multi-tree pipelined plan, for ranking candidates at scales where
/// replaying or simulating every one is too slow: `fill + (S / K - 1) x period`, where `fill`
/// is the latest arrival of a first segment (per hop: latency + segment time + the per-message
/// `overhead`, a rank's i-th child waiting for the i earlier ones) and `period` the longer of
/// the busiest link's time to carry one segment of every tree (the volume every tree edge puts
/// on every link of its path, divided by the link's bandwidth; one shared capacity for
/// half-duplex links) and the busiest rank's per-message overheads: its sends and, but the
/// root's, its receives, as the planner's simulator charges them
/// (`choose::planning_sim_options`). Counting sends alone, the estimate chose 4 segments for a
/// 16 KiB broadcast on the emulated 3x3 cluster's probed tree at 40 us per message, which the
/// simulator ranked 5% behind 2 (2026-11-28). Contention
/// beyond that steady state is ignored; the chooser confirms the best candidates with the
/// simulator. The overhead term is what makes the estimate prefer fewer, larger segments
/// where the flow models (which charge none) would not.
pub fn estimate(topo: &Topology, root: u32, trees: &[Tree], nsegs: u32, bytes: u64, overhead: f64) -> f64 {
    Estimator::new(topo, root, trees, overhead).at(nsegs, bytes)
}

/// [`estimate`] with the walk of the trees done once: every term of it is affine in the
/// segment size, so the candidates' segment counts (and size classes) are then compared in
/// O(ranks) each, without walking the topology's paths again.
#[derive(Clone, Debug)]
pub struct Estimator {
    k: u32,
    /// Per (tree, rank): first-segment arrival = `.0 + .1 x segment bytes`.
    arrivals: Vec<(f64, f64)>,
    /// Largest, over link directions, of the seconds per byte of segment its load costs.
    load_per_byte: f64,
    /// Per-message overheads of the busiest rank per round (sends and receives), in seconds.
    busiest_overhead: f64,
}

impl Estimator {
    pub fn new(topo: &Topology, root: u32, trees: &[Tree], overhead: f64) -> Estimator {
        let model = super::cost::CostModel::new(topo, 1);
        let mut load = vec![0.0f64; model.num_resources()];
        let mut arrivals = Vec::with_capacity(trees.len() * topo.num_ranks());
        let per_byte = |b: f64| if b.is_finite() { 1.0 / b } else { 0.0 };
        let root_bw = access_bandwidth(topo, root);
        for (j, t) in trees.iter().enumerate() {
            let mut stack = vec![(root, 0.0, j as f64 * per_byte(root_bw))];
            while let Some((p, fixed, slope)) = stack.pop() {
                arrivals.push((fixed, slope));
                let pv = topo.rank_vertex(p);
                for (i, &c) in t[p as usize].iter().enumerate() {
                    let mut lat = 0.0;
                    let mut bw = f64::INFINITY;
                    for d in topo.path(pv, topo.rank_vertex(c)) {
                        let dir = topo.dir_params(d);
                        lat += dir.latency_s;
                        bw = bw.min(dir.bandwidth_bps);
                        load[model.resource(d.link, d.forward) as usize] += per_byte(dir.bandwidth_bps);
                    }
                    let m = (i + 1) as f64;
                    stack.push((c, fixed + lat + m * overhead, slope + m * per_byte(bw)));
                }
            }
        }
        // Per round of one segment in each tree, a rank's messages: its sends, and (but the
        // root) one receive per tree.
        let busiest_rank = (0..topo.num_ranks())
            .map(|r| {
                trees
                    .iter()
                    .map(|t| t[r].len() + usize::from(r as u32 != root))
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0) as f64;
        Estimator {
            k: trees.len().max(1) as u32,
            arrivals,
            load_per_byte: load.iter().copied().fold(0.0, f64::max),
            busiest_overhead: busiest_rank * overhead,
        }
    }

    /// The estimate for `bytes` in `nsegs` segments (see [`estimate`]).
    pub fn at(&self, nsegs: u32, bytes: u64) -> f64 {
        let nsegs = nsegs.max(self.k);
        let seg = bytes as f64 / nsegs as f64;
        let fill = self.arrivals.iter().map(|&(a, b)| a + b * seg).fold(0.0, f64::max);
        let period = (seg * self.load_per_byte).max(self.busiest_overhead);
        fill + (nsegs / self.k - 1) as f64 * period
    }

    /// What the busiest link (or sender) needs for the whole message, however the segments
    /// overlap: `S / K` periods. For unsegmented trees the estimate above charges no contention
    /// at all; this is a lower bound on any schedule over the same trees.
    pub fn link_bound(&self, nsegs: u32, bytes: u64) -> f64 {
        let nsegs = nsegs.max(self.k);
        let seg = bytes as f64 / nsegs as f64;
        (nsegs / self.k) as f64 * (seg * self.load_per_byte).max(self.busiest_overhead)
    }
}

/// Bandwidth of a rank's own link in the sending direction (infinite for a lone rank).
pub fn access_bandwidth(topo: &Topology, rank: u32) -> f64 {
    let rv = topo.rank_vertex(rank);
    topo.neighbors(rv)
        .first()
        .map(|&(_, l)| topo.link(l).dir(topo.link(l).a == rv).bandwidth_bps)
        .unwrap_or(f64::INFINITY)
}

/// Number of hops on the longest root-to-leaf path of a tree.
pub fn depth(tree: &Tree, root: u32) -> usize {
    let mut best = 0;
    let mut stack = vec![(root, 0usize)];
    while let Some((u, d)) = stack.pop() {
        best = best.max(d);
        for &c in &tree[u as usize] {
            stack.push((c, d + 1));
        }
    }
    best
}

/// Segment count for a pipeline of `depth` hops whose hops stream at `bw` bytes/s: the
/// minimiser of `(S + depth - 1) (bytes / (S bw) + overhead)`, i.e.
/// `sqrt((depth - 1) bytes / (bw overhead))` for the per-message `overhead` (seconds), clamped so segments are at least
/// [`MIN_SEGMENT_BYTES`], at most [`MAX_SEGMENTS`] and within the size class's limit, and a
/// multiple of `trees` (every tree gets the same number).
pub fn segment_count(bytes: u64, depth: usize, bw: f64, trees: u32, overhead: f64) -> u32 {
    if bytes == 0 {
        return trees.max(1);
    }
    let d = depth.max(1) as f64;
    let ideal = ((d - 1.0).max(1.0) * bytes as f64 / (bw * overhead.max(1e-12))).sqrt();
    let by_size = (bytes / MIN_SEGMENT_BYTES).max(1) as f64;
    let cap = (MAX_SEGMENTS as f64)
        .min(class_max_segments(size_class(bytes)) as f64)
        .min(by_size);
    // Segments stay below the rendezvous threshold where the cap allows.
    let floor = (bytes as f64 / RENDEZVOUS_BYTES as f64).ceil().min(cap).max(1.0);
    let s = ideal.clamp(floor, cap.max(1.0)).round() as u32;
    let t = trees.max(1);
    (s.div_ceil(t) * t).max(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cost::CostModel;
    use crate::plan::cost_replay::replay;
    use crate::topology::gen::Tree as GenTree;

    #[test]
    fn two_trees_have_disjoint_inner_nodes() {
        for m in 1..40usize {
            let members: Vec<u32> = (1..=m as u32).collect();
            let mut a = vec![Vec::new(); m + 1];
            let mut b = vec![Vec::new(); m + 1];
            two_trees(0, &members, &mut a, &mut b);
            assert!(
                crate::plan::trees::spans(&a, 0) && crate::plan::trees::spans(&b, 0),
                "m = {m}"
            );
            for r in 1..=m {
                assert!(a[r].len() <= 2 && b[r].len() <= 2);
                assert!(a[r].is_empty() || b[r].is_empty(), "m = {m}: rank {r} inner in both");
            }
            // Depth is logarithmic.
            let bound = 2 + (m as f64).log2().ceil() as usize;
            assert!(depth(&a, 0) <= bound && depth(&b, 0) <= bound, "m = {m}");
        }
    }

    fn two_level(ranks_per_host: usize) -> crate::topology::Topology {
        GenTree::oversubscribed(4, 4, 4.0)
            .with_ranks(ranks_per_host)
            .build()
            .unwrap()
    }

    #[test]
    fn multi_tree_plans_validate() {
        let t = two_level(4);
        let n = t.num_ranks() as u32;
        for root in [0, 21] {
            let [a, b] = host_two_trees(&t, root, HostScheme::Chain);
            assert!(crate::plan::trees::spans(&a, root) && crate::plan::trees::spans(&b, root));
            let p = plan_from_trees(&t, root, &[a, b], 8, 1 << 20, "two-tree");
            p.validate().unwrap();
            let p = plan_from_trees(&t, root, &[dfs_chain(&t, root)], 5, 1 << 20, "chain");
            p.validate().unwrap();
            let kc = k_chains(&t, root, 3);
            assert!(crate::plan::trees::spans(&kc, root));
            assert_eq!(kc[root as usize].len(), 3);
            plan_from_trees(&t, root, &[kc], 4, 1 << 20, "k-chains")
                .validate()
                .unwrap();
            assert_eq!(p.nranks, n);
        }
    }

    /// A rank's ops computed alone are its row of the full multi-tree plan, for every family,
    /// segment count and root (trees of one and of two; shared memory and network hops).
    #[test]
    fn local_ops_are_the_full_plans_rows() {
        let t = GenTree::oversubscribed(3, 2, 4.0).with_ranks(3).build().unwrap();
        let n = t.num_ranks() as u32;
        let m = CostModel::new(&t, 1 << 20);
        for root in [0, 7, n - 1] {
            let [a, b] = host_two_trees(&t, root, HostScheme::TwoTree);
            let families: Vec<Vec<Tree>> = vec![
                vec![dfs_chain(&t, root)],
                vec![k_chains(&t, root, 3)],
                vec![a, b],
                host_two_trees(&t, root, HostScheme::Chain).into(),
                vec![crate::plan::hier::hier_tree(&m, root)],
                vec![crate::plan::trees::binomial(n, root)],
            ];
            for trees in &families {
                for nsegs in [1, 5, 8] {
                    for bytes in [1000u64, 1 << 20] {
                        let p = plan_from_trees(&t, root, trees, nsegs, bytes, "x");
                        for r in 0..n {
                            assert_eq!(
                                local_ops_from_trees(&t, root, trees, nsegs, bytes, r),
                                p.ops[r as usize]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn pipelining_approaches_the_bandwidth_bound() {
        // 8 switches x 8 hosts x 2 ranks, 4 MiB: the two-tree streams near the host link rate;
        // the unsegmented hierarchical tree is several times slower.
        let t = GenTree::oversubscribed(8, 8, 4.0).with_ranks(2).build().unwrap();
        let bytes = 4u64 << 20;
        let m = CostModel::new(&t, bytes);
        let lb = crate::plan::bound::pipelined_lower_bound(&t, 0, bytes);
        let [a, b] = host_two_trees(&t, 0, HostScheme::Chain);
        let two = replay(&m, &plan_from_trees(&t, 0, &[a, b], 256, bytes, "two-tree"), bytes)
            .unwrap()
            .makespan;
        let tree = crate::plan::hier::hier_tree(&m, 0);
        let whole = replay(&m, &plan_from_trees(&t, 0, &[tree], 1, bytes, "hier"), bytes)
            .unwrap()
            .makespan;
        assert!(two < 1.25 * lb, "two-tree {two} lb {lb}");
        assert!(whole > 2.0 * lb, "unsegmented {whole} lb {lb}");
    }

    #[test]
    fn estimate_of_a_chain() {
        // Star of 1 B/s, 1 s links: chain 0 -> 1 -> 2, 4 bytes in 4 segments. Fill: each hop
        // 2 s + 1 s; period: every link carries one segment per round (1 s). 2 * 3 + 3 * 1 = 9,
        // which is what the replay gives too.
        let mut b = crate::topology::TopologyBuilder::new();
        let sw = b.vertex("sw", crate::topology::VertexKind::Switch);
        for i in 0..3 {
            let r = b.rank(i);
            b.link(r, sw, 1.0, 1.0);
        }
        let t = b.build().unwrap();
        let chain = crate::plan::trees::chain(3, &[0, 1, 2]);
        // Plus the per-message overhead on each of the 2 hops of the fill.
        let e = estimate(&t, 0, std::slice::from_ref(&chain), 4, 4, MESSAGE_OVERHEAD_S);
        assert!((e - (9.0 + 2.0 * MESSAGE_OVERHEAD_S)).abs() < 1e-9, "{e}");
        // The planner's simulator agrees, also where the relay's CPU sets the period: it
        // receives and sends each segment, 2 x 0.6 s a round against the links' 1 s, so
        // 2 x (3 + 0.6) + 3 x 1.2 = 10.8 (counting its sends alone gave 2 x 3.6 + 3 x 1 = 10.2).
        for (o, want) in [(0.1, 9.2), (0.6, 10.8)] {
            let e = estimate(&t, 0, std::slice::from_ref(&chain), 4, 4, o);
            let plan = plan_from_trees(&t, 0, std::slice::from_ref(&chain), 4, 4, "dfs-chain");
            let opts = crate::plan::choose::planning_sim_options(o);
            let sim = crate::sim::simulate_plan(&t, &plan, 4, &opts).unwrap().time_s;
            assert!((e - want).abs() < 1e-9, "o {o}: estimate {e}");
            assert!((sim - want).abs() < 1e-9, "o {o}: simulated {sim}");
        }
    }

    #[test]
    fn segment_counts() {
        // Deep pipeline, big message: many segments, capped; tiny message: one segment.
        let o = MESSAGE_OVERHEAD_S;
        assert_eq!(segment_count(4 << 20, 100, 1.25e9, 1, o), 512);
        assert_eq!(segment_count(4 << 10, 100, 1.25e9, 1, o), 1);
        assert_eq!(segment_count(16 << 10, 100, 1.25e9, 1, o), 4);
        // A costlier message: fewer, larger segments (sqrt(3 MiB / (1.25e9 x 100 us)) ~ 5),
        // but none above the rendezvous threshold: 1 MiB / 64 KiB = 16.
        assert_eq!(segment_count(1 << 20, 4, 1.25e9, 1, 100e-6), 16);
        assert_eq!(segment_count(256 << 10, 4, 1.25e9, 1, 100e-6), 4);
        let s = segment_count(1 << 20, 4, 1.25e9, 2, o);
        assert!(s.is_multiple_of(2) && (2..=128).contains(&s), "{s}");
    }
}
