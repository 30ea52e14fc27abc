//! The `Plan`: the broadcast schedule every planner produces and `exec` / `sim` run.
//!
//! A plan divides the message into `nsegs` equal logical segments and gives every rank an
//! ordered list of receives and sends of segment ranges. That is enough to express trees (one
//! op covering all segments), chains and segmented pipelines (one op per segment), and
//! multi-parent schedules such as scatter + allgather. Byte boundaries are derived from the
//! actual message length at run time ([`seg_bounds`]), so one plan serves a whole size class.
//!
//! Execution semantics (shared by `exec` and `sim`): every receive is posted up front; sends are
//! issued strictly in list order, each as soon as all of its segments are present locally. The
//! k-th send from a to b matches the k-th receive at b from a. [`Plan::validate`] checks a plan
//! is complete, consistent and deadlock-free under these semantics.

use serde::{Deserialize, Serialize};
use std::ops::Range;

mod error;
pub use error::PlanError;

/// A half-open range of segment indices `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SegRange {
    pub start: u32,
    pub end: u32,
}

impl SegRange {
    pub fn new(start: u32, end: u32) -> Self {
        SegRange { start, end }
    }
    pub fn one(s: u32) -> Self {
        SegRange { start: s, end: s + 1 }
    }
    pub fn len(&self) -> u32 {
        self.end.saturating_sub(self.start)
    }
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
    pub fn range(&self) -> Range<u32> {
        self.start..self.end
    }
}

/// One step of a rank's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// Receive segments `segs` from rank `peer`.
    Recv { peer: u32, segs: SegRange },
    /// Send segments `segs` to rank `peer` (they must be present locally first).
    Send { peer: u32, segs: SegRange },
}

impl Op {
    pub fn peer(&self) -> u32 {
        match *self {
            Op::Recv { peer, .. } | Op::Send { peer, .. } => peer,
        }
    }
    pub fn segs(&self) -> SegRange {
        match *self {
            Op::Recv { segs, .. } | Op::Send { segs, .. } => segs,
        }
    }
    pub fn is_send(&self) -> bool {
        matches!(self, Op::Send { .. })
    }
}

/// Facts about how a plan was made; carried on the wire so every rank can report them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanInfo {
    /// Name of the algorithm that produced the plan (e.g. `binomial`, `chain`, `optimal`).
    pub algorithm: String,
    /// Predicted completion time for the size the plan was made for, if known (seconds).
    pub predicted_time_s: Option<f64>,
    /// Message size the plan was made (and predicted) for.
    pub planned_bytes: u64,
    /// True when an exhaustive search proved the plan optimal under the cost model.
    pub proven_optimal: bool,
    /// Search statistics, for planners that search.
    pub nodes_explored: u64,
    pub search_time_s: f64,
    /// Best known lower bound on the completion time (seconds), if computed.
    pub lower_bound_s: Option<f64>,
    /// Predicted time of the MPI library's own broadcast (Open MPI's decision), simulated or a
    /// lower bound, when candidates were ranked against it: the runtime skips timing trials
    /// where the plan clearly wins (see `runtime::route`).
    #[serde(default)]
    pub library_time_s: Option<f64>,
}

/// A complete broadcast schedule for a communicator of `nranks` ranks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub nranks: u32,
    pub root: u32,
    /// Number of logical segments the message is divided into (>= 1).
    pub nsegs: u32,
    /// `ops[r]`: rank r's ordered schedule.
    pub ops: Vec<Vec<Op>>,
    pub info: PlanInfo,
}

/// Byte range `[start, end)` of segment `i` when `total` bytes are divided into `nsegs`
/// segments. Segments differ in size by at most one byte; all ranks compute the same bounds
/// from the same `total`.
pub fn seg_bounds(total: u64, nsegs: u32, i: u32) -> (u64, u64) {
    let n = nsegs.max(1) as u128;
    let t = total as u128;
    let lo = t * i as u128 / n;
    let hi = t * (i as u128 + 1) / n;
    (lo as u64, hi as u64)
}

/// Byte range covered by a segment range.
pub fn range_bounds(total: u64, nsegs: u32, r: SegRange) -> (u64, u64) {
    (
        seg_bounds(total, nsegs, r.start).0,
        seg_bounds(total, nsegs, r.end - 1).1,
    )
}

/// Size class of a message: 0 for empty, else `floor(log2(bytes)) + 1` (1..=64). Plans are
/// cached per (root, size class); every message in class c has at least `2^(c-1)` bytes, so a
/// plan for class c may use up to `2^(c-1)` segments without producing an empty one.
pub fn size_class(bytes: u64) -> u8 {
    (64 - bytes.leading_zeros()) as u8
}

/// The message size a class is planned for: the geometric middle of `[2^(c-1), 2^c)`.
pub fn class_representative(class: u8) -> u64 {
    match class {
        0 => 0,
        1 => 1,
        c => {
            let lo = 1u64 << (c - 1);
            lo + lo / 2
        }
    }
}

/// Largest number of segments usable in a class without empty segments.
pub fn class_max_segments(class: u8) -> u32 {
    match class {
        0 => 1,
        c => 1u64
            .checked_shl((c - 1) as u32)
            .unwrap_or(u64::MAX)
            .min(u32::MAX as u64) as u32,
    }
}

impl Plan {
    /// Each rank's role in the plan: its depth (hops from the root along the first message it
    /// receives) and how many ranks it sends to. Ranks of equal roles are interchangeable for
    /// what sharing a CPU does to the broadcast (the two leaves of a 3-rank tree: the root
    /// sharing a core with either is the same placement).
    pub fn rank_roles(&self) -> Vec<(u32, u32)> {
        let n = self.nranks as usize;
        let parent: Vec<Option<u32>> = self
            .ops
            .iter()
            .map(|ops| ops.iter().find(|o| !o.is_send()).map(Op::peer))
            .collect();
        (0..n)
            .map(|r| {
                let (mut depth, mut at) = (0u32, r);
                // At most n hops: a plan whose first receives form a cycle gets depth n.
                while at as u32 != self.root && (depth as usize) < n {
                    let Some(Some(p)) = parent.get(at) else { break };
                    depth += 1;
                    at = *p as usize;
                }
                let mut peers: Vec<u32> = self.ops.get(r).map_or_else(Vec::new, |ops| {
                    ops.iter().filter(|o| o.is_send()).map(Op::peer).collect()
                });
                peers.sort_unstable();
                peers.dedup();
                (depth, peers.len() as u32)
            })
            .collect()
    }

    /// A plan in which nobody communicates (a communicator of one rank, or an empty message).
    pub fn empty(nranks: u32, root: u32, algorithm: &str) -> Plan {
        Plan {
            nranks,
            root,
            nsegs: 1,
            ops: vec![Vec::new(); nranks as usize],
            info: PlanInfo {
                algorithm: algorithm.to_string(),
                ..PlanInfo::default()
            },
        }
    }

    /// Build a plan that pipelines `nsegs` segments down a tree: each rank receives segment s
    /// from its parent, then forwards it to its children in the given order, segment by segment.
    /// `children[r]` lists r's children; the tree must be rooted at `root` and span all ranks.
    pub fn from_tree(root: u32, children: &[Vec<u32>], nsegs: u32, algorithm: &str) -> Plan {
        let n = children.len();
        let nsegs = nsegs.max(1);
        let mut parent = vec![u32::MAX; n];
        for (p, cs) in children.iter().enumerate() {
            for &c in cs {
                parent[c as usize] = p as u32;
            }
        }
        let mut ops = vec![Vec::new(); n];
        for r in 0..n {
            let mut v = Vec::with_capacity(nsegs as usize * (children[r].len() + 1));
            for s in 0..nsegs {
                if r as u32 != root {
                    v.push(Op::Recv {
                        peer: parent[r],
                        segs: SegRange::one(s),
                    });
                }
                for &c in &children[r] {
                    v.push(Op::Send {
                        peer: c,
                        segs: SegRange::one(s),
                    });
                }
            }
            ops[r] = v;
        }
        Plan {
            nranks: n as u32,
            root,
            nsegs,
            ops,
            info: PlanInfo {
                algorithm: algorithm.to_string(),
                ..PlanInfo::default()
            },
        }
    }

    /// Parent of each rank if the plan is a tree (every rank receives everything from one peer);
    /// `None` otherwise. The root's entry is `u32::MAX`.
    pub fn tree_parents(&self) -> Option<Vec<u32>> {
        let mut parent = vec![u32::MAX; self.nranks as usize];
        for (r, ops) in self.ops.iter().enumerate() {
            for op in ops {
                if let Op::Recv { peer, .. } = *op {
                    if parent[r] != u32::MAX && parent[r] != peer {
                        return None;
                    }
                    parent[r] = peer;
                }
            }
        }
        Some(parent)
    }

    /// Total number of point-to-point messages the plan sends.
    pub fn num_messages(&self) -> usize {
        self.ops.iter().flatten().filter(|o| o.is_send()).count()
    }

    /// Serialized wire form (postcard), so one rank can compute a plan and all run it.
    pub fn to_wire(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("plan serialization cannot fail")
    }

    /// Decode and validate a plan received on the wire.
    pub fn from_wire(bytes: &[u8]) -> Result<Plan, PlanError> {
        let p: Plan = postcard::from_bytes(bytes).map_err(|e| PlanError::Decode(e.to_string()))?;
        p.validate()?;
        Ok(p)
    }

    /// Check the plan is complete, consistent and deadlock-free (see module docs).
    pub fn validate(&self) -> Result<(), PlanError> {
        let n = self.nranks as usize;
        if n == 0 {
            return Err(PlanError::NoRanks);
        }
        if self.root as usize >= n {
            return Err(PlanError::RootOutOfRange {
                root: self.root,
                nranks: n,
            });
        }
        if self.nsegs == 0 {
            return Err(PlanError::NoSegments);
        }
        if self.ops.len() != n {
            return Err(PlanError::OpListCount {
                lists: self.ops.len(),
                nranks: n,
            });
        }
        let ns = self.nsegs as usize;
        // Per rank: which segments are received (each exactly once), and that sends only use
        // segments received earlier in list order.
        for (r, ops) in self.ops.iter().enumerate() {
            let mut have = vec![r as u32 == self.root; ns];
            let mut got = vec![false; ns];
            for (i, op) in ops.iter().enumerate() {
                let (peer, segs) = (op.peer(), op.segs());
                if peer as usize >= n || peer as usize == r {
                    return Err(PlanError::BadPeer { rank: r, op: i, peer });
                }
                if segs.is_empty() || segs.end > self.nsegs {
                    return Err(PlanError::BadSegments {
                        rank: r,
                        op: i,
                        start: segs.start,
                        end: segs.end,
                    });
                }
                match op {
                    Op::Recv { .. } => {
                        if r as u32 == self.root {
                            return Err(PlanError::RootReceives { rank: r, op: i });
                        }
                        for s in segs.range() {
                            if got[s as usize] {
                                return Err(PlanError::ReceivedTwice { rank: r, op: i, seg: s });
                            }
                            got[s as usize] = true;
                            have[s as usize] = true;
                        }
                    }
                    Op::Send { .. } => {
                        if let Some(s) = segs.range().find(|&s| !have[s as usize]) {
                            return Err(PlanError::SendBeforeReceive { rank: r, op: i, seg: s });
                        }
                    }
                }
            }
            if r as u32 != self.root {
                if let Some(s) = got.iter().position(|g| !g) {
                    return Err(PlanError::NeverReceives { rank: r, seg: s });
                }
            }
        }
        // Matching: per ordered pair, the send sequence equals the receive sequence.
        let mut sends: std::collections::HashMap<(u32, u32), Vec<SegRange>> = Default::default();
        let mut recvs: std::collections::HashMap<(u32, u32), Vec<SegRange>> = Default::default();
        for (r, ops) in self.ops.iter().enumerate() {
            for op in ops {
                match *op {
                    Op::Send { peer, segs } => sends.entry((r as u32, peer)).or_default().push(segs),
                    Op::Recv { peer, segs } => recvs.entry((peer, r as u32)).or_default().push(segs),
                }
            }
        }
        for (k, s) in &sends {
            match recvs.get(k) {
                Some(rv) if rv == s => {}
                _ => return Err(PlanError::Unmatched { from: k.0, to: k.1 }),
            }
        }
        if let Some(k) = recvs.keys().find(|k| !sends.contains_key(k)) {
            return Err(PlanError::NeverSent { from: k.0, to: k.1 });
        }
        self.check_progress()
    }

    /// Run the execution semantics abstractly: receives pre-posted, sends in list order once
    /// their data is present. Every send must eventually be issued.
    fn check_progress(&self) -> Result<(), PlanError> {
        let n = self.nranks as usize;
        let ns = self.nsegs as usize;
        let mut have: Vec<Vec<bool>> = (0..n).map(|r| vec![r as u32 == self.root; ns]).collect();
        let mut cursor = vec![0usize; n];
        let mut queue: Vec<usize> = (0..n).collect();
        let mut queued = vec![true; n];
        while let Some(r) = queue.pop() {
            queued[r] = false;
            let ops = &self.ops[r];
            while cursor[r] < ops.len() {
                match ops[cursor[r]] {
                    Op::Recv { .. } => cursor[r] += 1,
                    Op::Send { peer, segs } => {
                        if segs.range().all(|s| have[r][s as usize]) {
                            for s in segs.range() {
                                have[peer as usize][s as usize] = true;
                            }
                            if !queued[peer as usize] {
                                queued[peer as usize] = true;
                                queue.push(peer as usize);
                            }
                            cursor[r] += 1;
                        } else {
                            break;
                        }
                    }
                }
            }
        }
        for (r, (&c, ops)) in cursor.iter().zip(&self.ops).enumerate() {
            if c < ops.len() {
                return Err(PlanError::Deadlock { rank: r, op: c });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_depth_and_fan_out() {
        // Open MPI's binary tree for 4 ranks: 0 -> 1, 2; 1 -> 3. Every rank differs.
        let p = Plan::from_tree(0, &[vec![1, 2], vec![3], vec![], vec![]], 4, "binary");
        assert_eq!(p.rank_roles(), vec![(0, 2), (1, 1), (1, 0), (2, 0)]);
        // 3 ranks: the two leaves have one role.
        let p = Plan::from_tree(2, &[vec![], vec![], vec![0, 1]], 1, "flat");
        assert_eq!(p.rank_roles(), vec![(1, 0), (1, 0), (0, 2)]);
        assert_eq!(Plan::empty(2, 0, "none").rank_roles(), vec![(0, 0), (0, 0)]);
    }

    #[test]
    fn seg_bounds_cover_exactly() {
        for total in [0u64, 1, 7, 100, 1 << 20, (1 << 20) + 3] {
            for nsegs in [1u32, 2, 3, 7, 64] {
                let mut prev = 0;
                for i in 0..nsegs {
                    let (lo, hi) = seg_bounds(total, nsegs, i);
                    assert_eq!(lo, prev);
                    assert!(hi >= lo && hi - lo <= total / nsegs as u64 + 1);
                    prev = hi;
                }
                assert_eq!(prev, total);
            }
        }
        assert_eq!(range_bounds(100, 4, SegRange::new(1, 3)), (25, 75));
    }

    #[test]
    fn size_classes() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(1), 1);
        assert_eq!(size_class(2), 2);
        assert_eq!(size_class(3), 2);
        assert_eq!(size_class(4), 3);
        assert_eq!(size_class(u64::MAX), 64);
        for c in 1..=40u8 {
            let rep = class_representative(c);
            assert_eq!(size_class(rep), c);
            assert!(class_max_segments(c) as u64 <= 1u64 << (c - 1));
        }
    }

    fn chain(n: u32, nsegs: u32) -> Plan {
        let children: Vec<Vec<u32>> = (0..n).map(|r| if r + 1 < n { vec![r + 1] } else { vec![] }).collect();
        Plan::from_tree(0, &children, nsegs, "chain")
    }

    #[test]
    fn tree_plans_validate_and_round_trip() {
        let p = chain(5, 4);
        p.validate().unwrap();
        assert_eq!(p.num_messages(), 16);
        let q = Plan::from_wire(&p.to_wire()).unwrap();
        assert_eq!(p, q);
        assert_eq!(q.tree_parents().unwrap()[3], 2);
    }

    #[test]
    fn validation_catches_errors() {
        // Missing receive.
        let mut p = chain(3, 1);
        p.ops[2].clear();
        assert!(p.validate().is_err());
        // Send before receive.
        let mut p = chain(3, 2);
        p.ops[1].swap(0, 1);
        assert!(p.validate().unwrap_err().to_string().contains("before receiving"));
        // Mismatched order between a pair.
        let mut p = chain(2, 2);
        p.ops[1].swap(0, 1);
        assert!(p.validate().unwrap_err().to_string().contains("do not match"));
        // Deadlock: 1 and 2 each wait for the other (root sends nothing).
        let p = Plan {
            nranks: 3,
            root: 0,
            nsegs: 1,
            ops: vec![
                vec![],
                vec![
                    Op::Recv {
                        peer: 2,
                        segs: SegRange::one(0),
                    },
                    Op::Send {
                        peer: 2,
                        segs: SegRange::one(0),
                    },
                ],
                vec![
                    Op::Recv {
                        peer: 1,
                        segs: SegRange::one(0),
                    },
                    Op::Send {
                        peer: 1,
                        segs: SegRange::one(0),
                    },
                ],
            ],
            info: PlanInfo::default(),
        };
        assert!(p.validate().is_err());
        // Garbage wire bytes.
        assert!(Plan::from_wire(&[1, 2, 3]).is_err());
    }
}
