//! Predicted time of any [`Plan`] under the [Hourai2004] cost model, by replaying its execution.
//!
//! The plan's own semantics (receives pre-posted; a rank issues its sends in list order, each as
//! soon as all of its segments are present) drive an event loop; every issued send becomes a
//! [Hourai2004] transfer of its segments' bytes, placed at the earliest time at or after its issue
//! at which its path has room (reserved-rate profiles, delayed never slowed), and never before
//! the previous message between the same pair (one FIFO connection). Unlike the optimal
//! search's construction order there is no global "not before the last start" rule: a replay
//! follows the plan, and one delayed message must not hold up unrelated ones.
//!
//! This is the fast predictor the chooser uses to rank candidates before (or instead of, for
//! very large plans) the flow simulator: it charges latency per hop and store-and-forward per
//! message like the simulator does, but contention as delay rather than max-min sharing.

use super::cost::{earliest_start, reserve, CostModel, Profile, Route};
use super::error::PlanningError;
use super::{range_bounds, Op, Plan, SegRange};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// One replayed message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegTransfer {
    pub src: u32,
    pub dst: u32,
    pub segs: SegRange,
    pub start_s: f64,
    pub end_s: f64,
}

/// Outcome of a replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replay {
    pub makespan: f64,
    /// Per rank: when it holds every segment.
    pub rank_done: Vec<f64>,
    /// Every message, in the order it was placed.
    pub transfers: Vec<SegTransfer>,
}

#[derive(Clone, Copy, PartialEq)]
struct Key(f64, u64);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

enum Event {
    /// `rank` may issue its next send.
    Issue { rank: u32 },
    /// `rank` received these segments.
    Arrive { rank: u32, segs: SegRange },
}

/// Replay `plan` for a message of `bytes` (the plan must be valid; see [`Plan::validate`]).
pub fn replay(model: &CostModel, plan: &Plan, bytes: u64) -> Result<Replay, PlanningError> {
    let n = plan.nranks as usize;
    if n != model.num_ranks() {
        return Err(PlanningError::RankCountMismatch {
            plan: plan.nranks,
            topology: model.num_ranks(),
        });
    }
    let ns = plan.nsegs as usize;
    // A one-byte model gives every pair's hops and shares (they do not depend on the size).
    let shape = CostModel::new(model.topology(), 1);
    let mut have = vec![false; n * ns];
    let mut missing = vec![ns; n];
    let mut rank_done = vec![f64::INFINITY; n];
    for s in 0..ns {
        have[plan.root as usize * ns + s] = true;
    }
    missing[plan.root as usize] = 0;
    rank_done[plan.root as usize] = 0.0;
    // Per rank: index of the next op to look at, whether an Issue is pending.
    let mut cursor = vec![0usize; n];
    let mut profiles = vec![Profile::default(); model.num_resources()];
    let mut routes: HashMap<(u32, u32), Route> = HashMap::new();
    let mut pair_last: HashMap<(u32, u32), f64> = HashMap::new();
    let mut events: BinaryHeap<Reverse<(Key, usize)>> = BinaryHeap::new();
    let mut store: Vec<Event> = Vec::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<Reverse<(Key, usize)>>, store: &mut Vec<Event>, t: f64, e: Event| {
        store.push(e);
        events.push(Reverse((Key(t, seq), store.len() - 1)));
        seq += 1;
    };
    let ready_to_send = |have: &[bool], r: usize, segs: SegRange| segs.range().all(|s| have[r * ns + s as usize]);
    let mut transfers = Vec::new();
    let mut makespan = 0.0f64;
    for r in 0..n as u32 {
        push(&mut events, &mut store, 0.0, Event::Issue { rank: r });
    }
    while let Some(Reverse((Key(now, _), idx))) = events.pop() {
        let ev = std::mem::replace(&mut store[idx], Event::Issue { rank: u32::MAX });
        match ev {
            Event::Arrive { rank, segs } => {
                let r = rank as usize;
                for s in segs.range() {
                    if !have[r * ns + s as usize] {
                        have[r * ns + s as usize] = true;
                        missing[r] -= 1;
                    }
                }
                if missing[r] == 0 && rank_done[r].is_infinite() {
                    rank_done[r] = now;
                    makespan = makespan.max(now);
                }
                push(&mut events, &mut store, now, Event::Issue { rank });
            }
            Event::Issue { rank } if rank == u32::MAX => {}
            Event::Issue { rank } => {
                let r = rank as usize;
                // Issue every send that is ready, in list order (non-blocking sends).
                while cursor[r] < plan.ops[r].len() {
                    match plan.ops[r][cursor[r]] {
                        Op::Recv { .. } => cursor[r] += 1,
                        Op::Send { peer, segs } => {
                            if !ready_to_send(&have, r, segs) {
                                break;
                            }
                            cursor[r] += 1;
                            // Route shape (hops, shares) once per pair; duration per message.
                            let route = routes.entry((rank, peer)).or_insert_with(|| shape.route(rank, peer));
                            let (lo, hi) = range_bounds(bytes, plan.nsegs, segs);
                            let size = (hi - lo) as f64;
                            let mut rt = route.clone();
                            rt.dur = if rt.rate.is_infinite() || size == 0.0 {
                                0.0
                            } else {
                                size / rt.rate
                            };
                            let floor = pair_last.get(&(rank, peer)).copied().unwrap_or(0.0).max(now);
                            for h in &rt.hops {
                                profiles[h.res as usize].clip_before(now);
                            }
                            let t0 = earliest_start(&profiles, &rt, floor);
                            reserve(&mut profiles, &rt, t0);
                            pair_last.insert((rank, peer), t0);
                            let end = t0 + rt.latency + rt.dur;
                            transfers.push(SegTransfer {
                                src: rank,
                                dst: peer,
                                segs,
                                start_s: t0,
                                end_s: end,
                            });
                            push(&mut events, &mut store, end, Event::Arrive { rank: peer, segs });
                        }
                    }
                }
            }
        }
    }
    if let Some(r) = (0..n).find(|&r| missing[r] > 0) {
        return Err(PlanningError::ReplayStalled { rank: r });
    }
    Ok(Replay {
        makespan,
        rank_done,
        transfers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::trees;
    use crate::topology::{TopologyBuilder, VertexKind};

    /// r0 - sw - r1 - ... all 1 B/s, latency 1 s per link.
    fn star(n: u32) -> crate::topology::Topology {
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        for i in 0..n {
            let r = b.rank(i);
            b.link(r, sw, 1.0, 1.0);
        }
        b.build().unwrap()
    }

    #[test]
    fn unsegmented_chain_is_store_and_forward() {
        // Chain 0 -> 1 -> 2 with 4 bytes: each hop 2 s latency + 4 s.
        let t = star(3);
        let m = CostModel::new(&t, 4);
        let plan = Plan::from_tree(0, &trees::chain(3, &[0, 1, 2]), 1, "chain");
        let r = replay(&m, &plan, 4).unwrap();
        assert!((r.makespan - 12.0).abs() < 1e-9, "{}", r.makespan);
        assert!((r.rank_done[1] - 6.0).abs() < 1e-9);
    }

    #[test]
    fn segments_pipeline() {
        // Same chain, 4 segments of 1 byte: segment k leaves r0 at k (the uplink serialises
        // them), reaches r1 at k + 3, and r2 one hop later: the last arrives at 3 + 3 + 3 = 9.
        let t = star(3);
        let m = CostModel::new(&t, 4);
        let plan = Plan::from_tree(0, &trees::chain(3, &[0, 1, 2]), 4, "chain");
        let r = replay(&m, &plan, 4).unwrap();
        assert!((r.rank_done[1] - 6.0).abs() < 1e-9, "{:?}", r.rank_done);
        assert!((r.makespan - 9.0).abs() < 1e-9, "{}", r.makespan);
    }

    #[test]
    fn flat_tree_serialises_on_the_root_uplink() {
        // Root sends 4 bytes to 3 ranks: its uplink carries one at a time: ends 6, 10, 14.
        let t = star(4);
        let m = CostModel::new(&t, 4);
        let plan = Plan::from_tree(0, &trees::flat(4, 0), 1, "flat");
        let r = replay(&m, &plan, 4).unwrap();
        assert!((r.makespan - 14.0).abs() < 1e-9, "{}", r.makespan);
    }
}
