//! The dependency graph of a broadcast plan, and its contention-free evaluation.
//!
//! Execution model (the semantics of [`crate::plan`]): receives are pre-posted; a rank issues
//! its sends strictly in list order, each as soon as (a) all its segments are present and (b)
//! its previous send was *issued*. A send of `b` bytes from `s` to `r` takes
//! `path latency + b / path bandwidth` ([`Topology::transfer_time`]) and transfers never slow
//! each other down. So, with `S_i` the issue time of send `i` and `T_i` its transfer time,
//! `S_i = max(S_prev, max_{d in deps_i} (S_d + T_d))`, a max-plus recursion over the graph
//! built here; a rank's arrival time is the latest of its deliveries `S_d + T_d`.
//!
//! **Which evaluator when.** This contention-free evaluator is exact for latency-bound
//! messages and whenever concurrent transfers do not share a link; it is the basis of the
//! stochastic estimates (which vary latencies, not bandwidth sharing). When transfers compete
//! for links — long or pipelined messages, oversubscribed uplinks, a root feeding many
//! children at once — use the flow simulator [`crate::sim::simulate_plan`], which shares
//! bandwidth max-min fairly. (Here a pipelined chain streams all segments of a hop at once.)
//!
//! Dominance pruning keeps the graph small and the stochastic model honest: if a rank already
//! issued a send that waited for delivery `d`, every later send of that rank starts after it
//! too (`S_prev >= S_d + T_d`), so `d` is not listed again. For a one-segment tree every send
//! then depends on exactly one event and every rank's arrival is a plain sum along its path.

use super::EstimateError;
use crate::plan::{range_bounds, Op, Plan};
use crate::topology::{DirLink, Topology};

/// One point-to-point send of the plan.
#[derive(Clone, Debug)]
pub(crate) struct SendNode {
    pub from: u32,
    pub to: u32,
    pub bytes: u64,
    /// Previous send of the same rank (this one is issued no earlier).
    pub prev: Option<usize>,
    /// Deliveries (send ids) whose arrival this send waits for, after dominance pruning.
    pub deps: Vec<usize>,
}

/// All sends in a topological order (every id in `prev`/`deps` is smaller than the node's).
#[derive(Clone, Debug)]
pub(crate) struct PlanDag {
    pub sends: Vec<SendNode>,
    /// Per rank: the sends that deliver data to it.
    pub deliveries: Vec<Vec<usize>>,
}

impl PlanDag {
    /// Build the graph of a validated plan for a message of `bytes` bytes.
    pub fn build(plan: &Plan, bytes: u64) -> Result<PlanDag, EstimateError> {
        plan.validate()?;
        const NONE: usize = usize::MAX;
        let n = plan.nranks as usize;
        let ns = plan.nsegs as usize;
        // delivered[r][s]: the send that brought segment s to rank r.
        let mut delivered = vec![vec![NONE; ns]; n];
        let mut covered: Vec<bool> = Vec::new();
        let mut cursor = vec![0usize; n];
        let mut last = vec![None; n];
        let mut sends: Vec<SendNode> = Vec::new();
        let mut deliveries = vec![Vec::new(); n];
        let mut queue: Vec<usize> = (0..n).rev().collect();
        let mut queued = vec![true; n];
        while let Some(r) = queue.pop() {
            queued[r] = false;
            let is_root = r as u32 == plan.root;
            while cursor[r] < plan.ops[r].len() {
                match plan.ops[r][cursor[r]] {
                    Op::Recv { .. } => cursor[r] += 1,
                    Op::Send { peer, segs } => {
                        if !is_root && segs.range().any(|s| delivered[r][s as usize] == NONE) {
                            break;
                        }
                        let mut deps: Vec<usize> = Vec::new();
                        if !is_root {
                            for s in segs.range() {
                                let d = delivered[r][s as usize];
                                if !covered[d] && !deps.contains(&d) {
                                    deps.push(d);
                                }
                            }
                        }
                        for &d in &deps {
                            covered[d] = true;
                        }
                        let (lo, hi) = range_bounds(bytes, plan.nsegs, segs);
                        let id = sends.len();
                        sends.push(SendNode {
                            from: r as u32,
                            to: peer,
                            bytes: hi - lo,
                            prev: last[r],
                            deps,
                        });
                        covered.push(false);
                        last[r] = Some(id);
                        for s in segs.range() {
                            delivered[peer as usize][s as usize] = id;
                        }
                        deliveries[peer as usize].push(id);
                        if !queued[peer as usize] {
                            queued[peer as usize] = true;
                            queue.push(peer as usize);
                        }
                        cursor[r] += 1;
                    }
                }
            }
        }
        Ok(PlanDag { sends, deliveries })
    }

    /// Issue times and rank arrival times for given transfer times (`transfer(i)` for send i).
    pub fn evaluate(&self, mut transfer: impl FnMut(usize) -> f64, start: &mut Vec<f64>, arrival: &mut Vec<f64>) {
        start.clear();
        let mut done = Vec::with_capacity(self.sends.len());
        for (i, s) in self.sends.iter().enumerate() {
            let mut t = s.prev.map_or(0.0, |p| start[p]);
            for &d in &s.deps {
                t = t.max(done[d]);
            }
            start.push(t);
            done.push(t + transfer(i));
        }
        arrival.clear();
        arrival.extend(
            self.deliveries
                .iter()
                .map(|ds| ds.iter().map(|&d| done[d]).fold(0.0, f64::max)),
        );
    }
}

/// Paths of every send on the topology (rank r of the plan is rank leaf r of the topology).
pub(crate) fn send_paths(topo: &Topology, plan: &Plan, dag: &PlanDag) -> Result<Vec<Vec<DirLink>>, EstimateError> {
    if topo.num_ranks() != plan.nranks as usize {
        return Err(EstimateError::RankMismatch {
            plan: plan.nranks,
            topology: topo.num_ranks(),
        });
    }
    Ok(dag
        .sends
        .iter()
        .map(|s| topo.path(topo.rank_vertex(s.from), topo.rank_vertex(s.to)))
        .collect())
}

/// Contention-free times of a plan (seconds).
#[derive(Clone, Debug, PartialEq)]
pub struct DeterministicTimes {
    /// Time the last rank holds the whole message.
    pub completion_s: f64,
    /// Per rank: time it holds the whole message (0 for the root).
    pub rank_arrival_s: Vec<f64>,
}

/// Contention-free completion time of `plan` for `bytes` on `topo` with every link at its
/// nominal latency (see the module docs for when to prefer `sim::simulate_plan`).
pub fn evaluate_deterministic(topo: &Topology, plan: &Plan, bytes: u64) -> Result<DeterministicTimes, EstimateError> {
    let dag = PlanDag::build(plan, bytes)?;
    let paths = send_paths(topo, plan, &dag)?;
    let times: Vec<f64> = dag
        .sends
        .iter()
        .zip(&paths)
        .map(|(s, p)| transfer_time(topo, p, s.bytes, |d| topo.dir_params(d).latency_s))
        .collect();
    let (mut start, mut arrival) = (Vec::new(), Vec::new());
    dag.evaluate(|i| times[i], &mut start, &mut arrival);
    Ok(DeterministicTimes {
        completion_s: arrival.iter().copied().fold(0.0, f64::max),
        rank_arrival_s: arrival,
    })
}

/// `Σ latency(link) + bytes / min bandwidth` along a path, with latencies supplied by the caller.
pub(crate) fn transfer_time(
    topo: &Topology,
    path: &[DirLink],
    bytes: u64,
    mut latency: impl FnMut(DirLink) -> f64,
) -> f64 {
    let lat: f64 = path.iter().map(|&d| latency(d)).sum();
    lat + serialization(topo, path, bytes)
}

/// `bytes / min bandwidth` along a path (0 for an empty message).
pub(crate) fn serialization(topo: &Topology, path: &[DirLink], bytes: u64) -> f64 {
    if bytes == 0 {
        return 0.0;
    }
    let bw = path
        .iter()
        .map(|&d| topo.dir_params(d).bandwidth_bps)
        .fold(f64::INFINITY, f64::min);
    bytes as f64 / bw
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::trees;
    use crate::topology::{TopologyBuilder, VertexKind};

    /// `switches` leaf switches under one top switch, `per` ranks on each, rank i on switch
    /// i / per. Rank links: `lat_rank` s, uplinks `lat_up` s; bandwidth 1e9 B/s everywhere.
    pub fn two_level(switches: usize, per: usize, lat_rank: f64, lat_up: f64) -> Topology {
        let mut b = TopologyBuilder::new();
        let top = b.vertex("top", VertexKind::Switch);
        for s in 0..switches {
            let sw = b.vertex(format!("s{s}"), VertexKind::Switch);
            b.link(sw, top, lat_up, 1e9);
            for j in 0..per {
                let r = b.rank((s * per + j) as u32);
                b.link(r, sw, lat_rank, 1e9);
            }
        }
        b.build().unwrap()
    }

    #[test]
    fn tree_times_are_path_sums() {
        // 2 switches x 2 ranks; flat plan from rank 0.
        let t = two_level(2, 2, 1e-6, 5e-6);
        let plan = Plan::from_tree(0, &trees::flat(4, 0), 1, "flat");
        let d = evaluate_deterministic(&t, &plan, 1000).unwrap();
        let ser = 1000.0 / 1e9;
        assert!((d.rank_arrival_s[1] - (2e-6 + ser)).abs() < 1e-15);
        assert!((d.rank_arrival_s[2] - (12e-6 + ser)).abs() < 1e-15);
        assert_eq!(d.rank_arrival_s[0], 0.0);
        assert!((d.completion_s - (12e-6 + ser)).abs() < 1e-15);
        // Binomial: 0 -> {1, 2}, 2 -> 3. Rank 3 = (0 -> 2) + (2 -> 3).
        let plan = Plan::from_tree(0, &trees::binomial(4, 0), 1, "binomial");
        let d = evaluate_deterministic(&t, &plan, 0).unwrap();
        assert!(
            (d.rank_arrival_s[3] - (12e-6 + 2e-6)).abs() < 1e-15,
            "{:?}",
            d.rank_arrival_s
        );
        // Wrong rank count is an error, not a panic.
        let plan5 = Plan::from_tree(0, &trees::flat(5, 0), 1, "flat");
        assert!(evaluate_deterministic(&t, &plan5, 8)
            .unwrap_err()
            .to_string()
            .contains("5 ranks"));
    }

    #[test]
    fn pipelined_chain_is_contention_free() {
        // Chain 0 -> 1 -> 2 -> 3, 4 segments. Sends are issued back to back and never slow each
        // other, so every hop delivers all segments one transfer time after its sender had them.
        let t = two_level(1, 4, 1e-6, 0.0);
        let plan = Plan::from_tree(0, &trees::rank_chain(4, 0), 4, "chain");
        let bytes = 4000;
        let hop = 2e-6 + 1000.0 / 1e9;
        let d = evaluate_deterministic(&t, &plan, bytes).unwrap();
        for r in 1..4 {
            assert!((d.rank_arrival_s[r] - r as f64 * hop).abs() < 1e-15, "rank {r}");
        }
        // The graph: rank 1's k-th send waits for delivery k (and its previous send) only.
        let dag = PlanDag::build(&plan, bytes).unwrap();
        assert_eq!(dag.sends.len(), 12);
        assert!(dag.sends.iter().all(|s| s.deps.len() <= 1));
        // A flat tree: every send of the root depends on nothing; after the first, on `prev`.
        let flat = PlanDag::build(&Plan::from_tree(0, &trees::flat(4, 0), 1, "f"), 8).unwrap();
        assert!(flat.sends.iter().all(|s| s.deps.is_empty()));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
        /// Every rank's contention-free arrival in a one-segment tree is the sum of transfer
        /// times along its tree path (checked against a direct walk up the parent pointers).
        #[test]
        fn tree_arrivals_are_path_sums(n in 2u32..40, k in 1u32..5, root_seed in 0u32..1000, bytes in 0u64..100_000) {
            let t = two_level(4, 10, 1e-6, 4e-6);
            let root = root_seed % n;
            let mut children = trees::kary(n, root, k);
            children.resize(40, Vec::new()); // the topology has 40 ranks
            let extra: Vec<u32> = (n..40).collect();
            children[root as usize].extend(extra); // the rest hang directly off the root
            let plan = Plan::from_tree(root, &children, 1, "kary");
            let d = evaluate_deterministic(&t, &plan, bytes).unwrap();
            let parents = plan.tree_parents().unwrap();
            for r in 0..40u32 {
                let mut want = 0.0;
                let mut v = r;
                while v != root {
                    let p = parents[v as usize];
                    want += t.transfer_time(t.rank_vertex(p), t.rank_vertex(v), bytes as f64);
                    v = p;
                }
                proptest::prop_assert!((d.rank_arrival_s[r as usize] - want).abs() < 1e-15, "rank {}", r);
            }
        }
    }

    #[test]
    fn dominated_deliveries_are_pruned() {
        // Rank 1 receives one segment then forwards it to 2 and 3: the second send depends on
        // the first (prev) only.
        let children = vec![vec![1], vec![2, 3], vec![], vec![]];
        let dag = PlanDag::build(&Plan::from_tree(0, &children, 1, "t"), 8).unwrap();
        let from1: Vec<&SendNode> = dag.sends.iter().filter(|s| s.from == 1).collect();
        assert_eq!(from1.len(), 2);
        assert_eq!(from1[0].deps.len(), 1);
        assert!(from1[1].deps.is_empty() && from1[1].prev.is_some());
    }
}
