//! Lower bounds on the time [`simulate_plan`](crate::sim::simulate_plan) gives a baseline, at a
//! small fraction of a simulation's cost.
//!
//! Why: the planner's `auto` chooser (`plan::choose`) ranks the MPI baselines next to its own
//! candidates so it never picks a plan the simulator says is slower than one of them. Most
//! baselines simulate in milliseconds even at 4,096 ranks, but a few do not: scatter +
//! recursive-doubling allgather keeps thousands of flows in contention (seconds per
//! simulation there), and scatter + ring allgather has n (n - 1) messages (16 million at 4,096
//! ranks: too large even to build). A baseline whose lower bound already reaches the best
//! predicted time so far cannot be chosen, so it need not be simulated.
//!
//! Both bounds below follow from the flow model as `sim::flow` documents it (non-blocking
//! sends, as the chooser simulates):
//! * a message of `B` bytes over a path with latency sum `D` and bottleneck bandwidth `b`
//!   (the smallest capacity the simulator gives a hop) is delivered no earlier than
//!   `D + B / b` after it starts, and a rank issues a send only once it holds every segment of
//!   it;
//! * a flow is charged on hop i from the moment its head reaches it (`o_i`, the latency of the
//!   hops before i, after the flow starts) until its source has sent everything, at its rate,
//!   which never exceeds `b`; so hop i carries at least `B - o_i b` of its bytes, and no
//!   resource ever carries more than its capacity. Summed over a resource: the last source to
//!   finish on it finishes no earlier than (charged bytes) / capacity, and its message is
//!   delivered `D` later.

use super::Baseline;
use crate::plan::{range_bounds, seg_bounds, Op, Plan};
use crate::sim::network::Network;
use crate::sim::{placement, SimError};
use crate::topology::Topology;

/// Bounds are scaled by this before use, so float rounding in the simulator cannot make a
/// bound exceed the time it bounds.
const SAFETY: f64 = 1.0 - 1e-9;

/// Lower bound on the simulated completion time of `plan` (non-blocking sends; MPI rank r on
/// the topology rank leaf `map[r]`, identity when `None`): the larger of the slowest single
/// message alone and, over every link resource, the bytes it must carry over its capacity plus
/// the least latency of a message using it. O(messages x path length).
pub fn load_bound(topo: &Topology, plan: &Plan, bytes: u64, map: Option<&[u32]>) -> Result<f64, SimError> {
    let verts = placement::resolve(topo, plan.nranks, map)?;
    let net = Network::new(topo);
    let nres = net.num_resources();
    let mut load = vec![0.0f64; nres];
    let mut least_latency = vec![f64::INFINITY; nres];
    let (mut path, mut scratch) = (Vec::new(), Vec::new());
    let mut bound = 0.0f64;
    for (r, ops) in plan.ops.iter().enumerate() {
        for op in ops {
            let Op::Send { peer, segs } = *op else { continue };
            let Some(&to) = verts.get(peer as usize) else {
                return Err(SimError::UnknownPeer { rank: r, peer });
            };
            let (lo, hi) = range_bounds(bytes, plan.nsegs, segs);
            let b = (hi - lo) as f64;
            net.path_into(verts[r], to, &mut path, &mut scratch);
            let bottleneck = path.iter().map(|h| h.bandwidth).fold(f64::INFINITY, f64::min);
            let d: f64 = path.iter().map(|h| h.latency).sum();
            bound = bound.max(d + b / bottleneck);
            let mut before = 0.0;
            for h in &path {
                let res = h.res as usize;
                let charged = b - before * bottleneck;
                if charged > 0.0 {
                    load[res] += charged;
                }
                least_latency[res] = least_latency[res].min(d);
                before += h.latency;
            }
        }
    }
    for (res, &l) in load.iter().enumerate() {
        if l > 0.0 {
            bound = bound.max(l / net.res_cap[res] + least_latency[res]);
        }
    }
    Ok(bound * SAFETY)
}

/// Lower bound on the simulated time of [`super::scatter_allgather::scatter_allgather_ring`] from
/// `root` (with `bytes >= n`), without building its n (n - 1) messages: block 1 (relative
/// numbering) reaches relative rank 1 from the root in the scatter, then travels the ring
/// 1 -> 2 -> ... -> n - 1 one step per message, each sent only after the previous one arrived
/// (no rank on the way holds block 1 from the scatter). So the sum of those n - 1 transfers'
/// idle times bounds the broadcast. O(n x depth).
pub fn ring_chain_bound(topo: &Topology, map: Option<&[u32]>, n: u32, root: u32, bytes: u64) -> Result<f64, SimError> {
    if n < 2 {
        return Ok(0.0);
    }
    let verts = placement::resolve(topo, n, map)?;
    let (lo, hi) = seg_bounds(bytes, n, 1);
    let block = (hi - lo) as f64;
    let at = |v: u32| verts[((v + root) % n) as usize];
    // topology bandwidths are at least the simulator's (half-duplex links share the smaller).
    let sum: f64 = (0..n - 1).map(|v| topo.transfer_time(at(v), at(v + 1), block)).sum();
    Ok(sum * SAFETY)
}

/// A baseline prepared for ranking: its lower bound, and its plan unless it is too large to
/// build (more than `message_limit` messages).
pub struct Screened {
    pub bound: f64,
    pub plan: Option<Plan>,
}

/// Build `baseline` for `bytes` from `root` (ranks at `map`, see [`Baseline::build`]) and bound
/// its simulated time, skipping the build when the plan would exceed `message_limit` messages.
pub fn screen(
    baseline: &Baseline,
    topo: &Topology,
    map: &[u32],
    root: u32,
    bytes: u64,
    message_limit: usize,
) -> Result<Screened, SimError> {
    let n = map.len() as u32;
    let mut bound = 0.0f64;
    if *baseline == Baseline::ScatterRing && bytes >= n as u64 && n >= 2 {
        bound = ring_chain_bound(topo, Some(map), n, root, bytes)?;
        if n as u64 * (n as u64 - 1) > message_limit as u64 {
            return Ok(Screened { bound, plan: None });
        }
    }
    let plan = baseline.build(topo, map, root, bytes)?;
    if plan.num_messages() > message_limit {
        return Ok(Screened { bound, plan: None });
    }
    bound = bound.max(load_bound(topo, &plan, bytes, Some(map))?);
    Ok(Screened {
        bound,
        plan: Some(plan),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{simulate_plan, SimOptions};
    use crate::topology::gen::{Star, Tree, TwoClusters};
    use crate::topology::{Duplex, LinkDir, TopologyBuilder, VertexKind};

    fn topologies() -> Vec<Topology> {
        let mut v = vec![
            Tree::oversubscribed(3, 3, 4.0).with_ranks(3).build().unwrap(),
            Tree::oversubscribed(4, 2, 4.0).with_ranks(1).build().unwrap(),
            TwoClusters::paper_nonuniform(3).build().unwrap(),
            Star::paper_star(6).build().unwrap(),
        ];
        // A half-duplex uplink with different declared bandwidths per direction.
        let mut b = TopologyBuilder::new();
        let top = b.vertex("top", VertexKind::Switch);
        for s in 0..2 {
            let sw = b.vertex(format!("s{s}"), VertexKind::Switch);
            b.link_full(sw, top, LinkDir::new(2e-6, 2e8), LinkDir::new(1e-6, 5e8), Duplex::Half);
            for i in 0..3 {
                let r = b.rank(s * 3 + i);
                b.link(r, sw, 1e-6, 1e9);
            }
        }
        v.push(b.build().unwrap());
        v
    }

    #[test]
    fn bounds_never_exceed_simulated_times() {
        for topo in topologies() {
            let n = topo.num_ranks() as u32;
            let ident: Vec<u32> = (0..n).collect();
            // A strided placement (stride coprime with n) as well as the identity.
            let gcd = |mut a: u32, mut b: u32| {
                while b != 0 {
                    (a, b) = (b, a % b);
                }
                a
            };
            let stride = (2..n).find(|&k| gcd(k, n) == 1).unwrap_or(1);
            let rr: Vec<u32> = (0..n).map(|r| (r * stride) % n).collect();
            for map in [&ident, &rr] {
                for root in [0, n / 2] {
                    for bytes in [1u64, 1000, 1 << 16, 3 << 20] {
                        for b in Baseline::all() {
                            let s = screen(&b, &topo, map, root, bytes, usize::MAX).unwrap();
                            let plan = s.plan.expect("no limit");
                            let o = SimOptions {
                                placement: Some(map.clone()),
                                ..SimOptions::default()
                            };
                            let t = simulate_plan(&topo, &plan, bytes, &o).unwrap().time_s;
                            assert!(
                                s.bound <= t,
                                "{b} n={n} root={root} bytes={bytes}: bound {} > simulated {t}",
                                s.bound
                            );
                            if b == Baseline::ScatterRing && bytes >= n as u64 {
                                // The chain bound is the ring's, and not a vacuous one.
                                let c = ring_chain_bound(&topo, Some(map), n, root, bytes).unwrap();
                                assert!(c <= t && c > 0.0, "{c} vs {t}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn screen_skips_building_large_rings_but_bounds_them() {
        let topo = Tree::oversubscribed(4, 4, 4.0).with_ranks(4).build().unwrap();
        let n = topo.num_ranks() as u32;
        let ident: Vec<u32> = (0..n).collect();
        let s = screen(&Baseline::ScatterRing, &topo, &ident, 0, 1 << 16, 100).unwrap();
        assert!(s.plan.is_none());
        let full = super::super::scatter_allgather::scatter_allgather_ring(n, 0);
        let t = simulate_plan(&topo, &full, 1 << 16, &SimOptions::default())
            .unwrap()
            .time_s;
        assert!(s.bound > 0.0 && s.bound <= t);
        // Small plans come back built.
        let s = screen(&Baseline::Flat, &topo, &ident, 0, 1 << 16, 1000).unwrap();
        assert_eq!(s.plan.unwrap().num_messages(), n as usize - 1);
    }
}
