//! The transfer cost model of [Hourai2004] (docs/design.md §2.2), shared by every planner here.
//!
//! A transfer of D bytes from rank s to rank r runs over the tree path's links (b1,d1)..(bn,dn)
//! at rate b = min bi. Link i is *reserved* at rate b during [t0 + sum_{j<=i} dj, that + D/b)
//! and r holds the data at t0 + sum dj + D/b. A transfer may start only when every link on its
//! path has spare capacity for its whole reservation; capacities are additive, and a transfer
//! is delayed, never slowed. So each link direction (one shared state for a half-duplex link)
//! carries a reserved-rate profile over time ([`Profile`]), kept as a fraction of the link's
//! bandwidth so that a half-duplex link whose two directions differ in bandwidth still has one
//! well-defined state.
//!
//! Schedules are built by adding transfers one at a time ([`Placement`]): each is placed at the
//! earliest feasible time >= max(start of the previously added transfer, the sender's receive
//! completion). The optimum is taken over such sequences; the schedule's time is its last
//! completion. [`evaluate`] replays a sequence; [`timeline_to_plan`] turns the result into the
//! `Plan` that `exec` and `sim` run.

use super::error::{PlanningError, TransferFault};
use super::{Op, Plan, SegRange};
use crate::topology::{Duplex, Topology, VertexId};

/// Reserved fractions may exceed 1 by this much (float noise from summing rates).
pub const CAP_EPS: f64 = 1e-9;
/// Two instants closer than this (seconds) are the same instant: reservations that overlap by
/// less do not conflict. Far below any latency or transfer time the model is used with.
pub const TIME_EPS: f64 = 1e-12;

/// One step of a profile: the reserved fraction is `level` from `t` until the next step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    pub t: f64,
    pub level: f64,
}

/// Reserved fraction of one link direction (or of a half-duplex link) over time: a step
/// function that is 0 before the first step and after the last one.
#[derive(Debug, Default, PartialEq)]
pub struct Profile {
    steps: Vec<Step>,
}

impl Clone for Profile {
    fn clone(&self) -> Self {
        Profile {
            steps: self.steps.clone(),
        }
    }
    /// Reuses the allocation (the search saves and restores profiles at every node).
    fn clone_from(&mut self, source: &Self) {
        self.steps.clone_from(&source.steps);
    }
}

impl Profile {
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    pub fn is_idle(&self) -> bool {
        self.steps.is_empty()
    }

    /// Reserved fraction at time `t`.
    pub fn level_at(&self, t: f64) -> f64 {
        let i = self.steps.partition_point(|s| s.t <= t);
        if i == 0 {
            0.0
        } else {
            self.steps[i - 1].level
        }
    }

    /// Earliest `s >= from` such that `need` more fits during `[s, s + dur)`.
    pub fn earliest_fit(&self, from: f64, dur: f64, need: f64) -> f64 {
        if dur <= TIME_EPS || need <= 0.0 || self.steps.is_empty() {
            return from;
        }
        let limit = 1.0 + CAP_EPS - need;
        let st = &self.steps;
        let mut s = from;
        // Segment k covers [st[k].t, st[k+1].t); `None` is the idle time before st[0].
        let i = st.partition_point(|x| x.t <= s);
        let mut cur: Option<usize> = i.checked_sub(1);
        loop {
            let (level, end) = match cur {
                None => (0.0, st[0].t),
                Some(k) => (st[k].level, st.get(k + 1).map_or(f64::INFINITY, |x| x.t)),
            };
            if level > limit && end > s + TIME_EPS {
                s = end;
            }
            let next = cur.map_or(0, |k| k + 1);
            if next >= st.len() || st[next].t >= s + dur - TIME_EPS {
                return s;
            }
            cur = Some(next);
        }
    }

    /// Highest reserved fraction during `[a, b)` (instants within `TIME_EPS` of the ends ignored).
    pub fn max_level(&self, a: f64, b: f64) -> f64 {
        let mut m = 0.0f64;
        for (k, s) in self.steps.iter().enumerate() {
            let end = self.steps.get(k + 1).map_or(f64::INFINITY, |x| x.t);
            if s.t < b - TIME_EPS && end > a + TIME_EPS {
                m = m.max(s.level);
            }
        }
        m
    }

    /// Index of the step at time `t`, inserting one (with the level in force there) if none is
    /// within `TIME_EPS`.
    fn breakpoint(&mut self, t: f64) -> usize {
        let i = self.steps.partition_point(|x| x.t < t - TIME_EPS);
        if i < self.steps.len() && self.steps[i].t <= t + TIME_EPS {
            return i;
        }
        let level = if i == 0 { 0.0 } else { self.steps[i - 1].level };
        self.steps.insert(i, Step { t, level });
        i
    }

    /// Add `frac` to the reserved fraction during `[a, b)`.
    pub fn reserve(&mut self, a: f64, b: f64, frac: f64) {
        if b - a <= TIME_EPS || frac <= 0.0 {
            return;
        }
        let ia = self.breakpoint(a);
        let ib = self.breakpoint(b);
        for s in &mut self.steps[ia..ib] {
            s.level += frac;
        }
    }

    /// Drop the part before `t` (it can no longer matter to transfers starting at or after
    /// `t`). Keeps the representation canonical for hashing.
    pub fn clip_before(&mut self, t: f64) {
        let i = self.steps.partition_point(|x| x.t <= t);
        if i == 0 {
            return;
        }
        let level = self.steps[i - 1].level;
        self.steps.drain(..i - 1);
        if level.abs() <= CAP_EPS && self.steps.len() == 1 {
            self.steps.clear();
        } else {
            self.steps[0].t = self.steps[0].t.max(t);
        }
    }
}

/// One link of a route as the cost model sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hop {
    /// Capacity resource (see [`CostModel::resource`]).
    pub res: u32,
    /// Latency from the transfer's start to the start of this link's reservation
    /// (the sum of the latencies of the links up to and including this one).
    pub offset: f64,
    /// Fraction of the link's bandwidth the transfer reserves (rate / bandwidth).
    pub frac: f64,
}

/// A rank-to-rank path with its cost-model parameters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Route {
    pub hops: Vec<Hop>,
    /// Sum of one-way latencies (seconds).
    pub latency: f64,
    /// Transfer rate: the minimum bandwidth on the path (bytes/s).
    pub rate: f64,
    /// Reservation length D / rate (seconds).
    pub dur: f64,
}

impl Route {
    /// Idle-network duration: latency + D / rate.
    pub fn time(&self) -> f64 {
        self.latency + self.dur
    }
}

/// The cost model for one topology and message size. Ranks are the topology's rank leaves.
#[derive(Clone, Debug)]
pub struct CostModel<'t> {
    topo: &'t Topology,
    bytes: f64,
}

impl<'t> CostModel<'t> {
    pub fn new(topo: &'t Topology, bytes: u64) -> Self {
        CostModel {
            topo,
            bytes: bytes as f64,
        }
    }
    pub fn topology(&self) -> &'t Topology {
        self.topo
    }
    pub fn bytes(&self) -> f64 {
        self.bytes
    }
    pub fn num_ranks(&self) -> usize {
        self.topo.num_ranks()
    }
    /// Number of capacity resources: two per link (a half-duplex link uses only its first).
    pub fn num_resources(&self) -> usize {
        2 * self.topo.links().len()
    }
    /// Resource of link `l` traversed forward (a->b) or backward.
    pub fn resource(&self, l: usize, forward: bool) -> u32 {
        let half = self.topo.link(l).duplex == Duplex::Half;
        (2 * l + usize::from(!forward && !half)) as u32
    }

    /// Route between two vertices (usually ranks).
    pub fn route_vertices(&self, from: VertexId, to: VertexId) -> Route {
        // One path buffer per thread: a route's own hops are its only allocation.
        thread_local! {
            static PATH: std::cell::RefCell<Vec<crate::topology::DirLink>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        PATH.with(|buf| {
            let mut path = buf.borrow_mut();
            self.topo.path_into(from, to, &mut path);
            self.route_on(&path)
        })
    }

    /// The route along `path` (directed links in traversal order).
    fn route_on(&self, path: &[crate::topology::DirLink]) -> Route {
        let rate = path
            .iter()
            .map(|&d| self.topo.dir_params(d).bandwidth_bps)
            .fold(f64::INFINITY, f64::min);
        let dur = if self.bytes == 0.0 || rate.is_infinite() {
            0.0
        } else {
            self.bytes / rate
        };
        let mut offset = 0.0;
        let mut hops = Vec::with_capacity(path.len());
        for &d in path {
            let p = self.topo.dir_params(d);
            offset += p.latency_s;
            if dur > 0.0 && p.bandwidth_bps.is_finite() {
                hops.push(Hop {
                    res: self.resource(d.link, d.forward),
                    offset,
                    frac: rate / p.bandwidth_bps,
                });
            }
        }
        Route {
            hops,
            latency: offset,
            rate,
            dur,
        }
    }

    /// Route from rank `src` to rank `dst`.
    pub fn route(&self, src: u32, dst: u32) -> Route {
        self.route_vertices(self.topo.rank_vertex(src), self.topo.rank_vertex(dst))
    }

    /// All rank-to-rank routes, row-major `n x n` (for small communicators).
    pub fn route_table(&self) -> Vec<Route> {
        let n = self.num_ranks() as u32;
        let mut v = Vec::with_capacity((n * n) as usize);
        for s in 0..n {
            for r in 0..n {
                v.push(self.route(s, r));
            }
        }
        v
    }
}

/// A possible next transfer and where it would be placed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub s: u32,
    pub r: u32,
    pub start: f64,
    pub end: f64,
    /// A lower bound of the schedule after this transfer (0 when not computed).
    pub lb: f64,
}

impl Candidate {
    /// Canonical order: bound, completion, start, then rank ids (deterministic ties).
    pub fn order(&self, o: &Candidate) -> std::cmp::Ordering {
        self.lb
            .total_cmp(&o.lb)
            .then(self.end.total_cmp(&o.end))
            .then(self.start.total_cmp(&o.start))
            .then(self.s.cmp(&o.s))
            .then(self.r.cmp(&o.r))
    }
}

/// Earliest `t >= t_min` at which a transfer along `route` fits into `profiles`.
pub fn earliest_start(profiles: &[Profile], route: &Route, t_min: f64) -> f64 {
    let mut t = t_min;
    'again: loop {
        for h in &route.hops {
            let s0 = t + h.offset;
            let s = profiles[h.res as usize].earliest_fit(s0, route.dur, h.frac);
            if s > s0 + TIME_EPS {
                t = s - h.offset;
                continue 'again;
            }
        }
        return t;
    }
}

/// Reserve `route`'s links for a transfer starting at `t0`.
pub fn reserve(profiles: &mut [Profile], route: &Route, t0: f64) {
    for h in &route.hops {
        let a = t0 + h.offset;
        profiles[h.res as usize].reserve(a, a + route.dur, h.frac);
    }
}

/// A scheduled transfer of the whole message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transfer {
    pub src: u32,
    pub dst: u32,
    pub start_s: f64,
    /// When `dst` holds the data.
    pub end_s: f64,
}

/// A schedule: transfers in the order they were added (non-decreasing start), and its time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    pub root: u32,
    pub transfers: Vec<Transfer>,
    /// Last completion (0 for a single rank).
    pub makespan: f64,
}

/// The state of a schedule under construction: link profiles, who holds the data since when,
/// and the start of the last added transfer.
#[derive(Clone, Debug)]
pub struct Placement {
    pub profiles: Vec<Profile>,
    /// Per rank: time it holds the data, `f64::INFINITY` if it has not been scheduled yet.
    pub ready: Vec<f64>,
    pub last_start: f64,
    pub makespan: f64,
    pub informed: usize,
}

impl Placement {
    pub fn new(model: &CostModel, root: u32) -> Placement {
        Placement::sized(model.num_resources(), model.num_ranks(), root)
    }

    /// A placement over `resources` links and `ranks` ranks (for planners that number a subset
    /// of the topology compactly).
    pub fn sized(resources: usize, ranks: usize, root: u32) -> Placement {
        let mut ready = vec![f64::INFINITY; ranks];
        ready[root as usize] = 0.0;
        Placement {
            profiles: vec![Profile::default(); resources],
            ready,
            last_start: 0.0,
            makespan: 0.0,
            informed: 1,
        }
    }

    pub fn has(&self, rank: u32) -> bool {
        self.ready[rank as usize].is_finite()
    }

    /// Earliest time `src` can start sending along `route` if added next.
    pub fn start_time(&self, route: &Route, src: u32) -> f64 {
        earliest_start(&self.profiles, route, self.last_start.max(self.ready[src as usize]))
    }

    /// Add the transfer `src -> dst` starting at `start` (from [`Placement::start_time`]).
    pub fn commit(&mut self, route: &Route, src: u32, dst: u32, start: f64) -> Transfer {
        reserve(&mut self.profiles, route, start);
        let end = start + route.time();
        self.ready[dst as usize] = end;
        self.last_start = start;
        self.makespan = self.makespan.max(end);
        self.informed += 1;
        Transfer {
            src,
            dst,
            start_s: start,
            end_s: end,
        }
    }

    /// Place `src -> dst` at its earliest feasible time.
    pub fn add(&mut self, model: &CostModel, src: u32, dst: u32) -> Transfer {
        let route = model.route(src, dst);
        let t = self.start_time(&route, src);
        self.commit(&route, src, dst, t)
    }
}

/// Replay a sequence of transfers `(src, dst)` under the model. Errors name the first bad step
/// (a sender without the data, a receiver that already has it, an unknown rank).
pub fn evaluate(model: &CostModel, root: u32, seq: &[(u32, u32)]) -> Result<Timeline, PlanningError> {
    let n = model.num_ranks() as u32;
    if root >= n {
        return Err(PlanningError::RootOutOfRange {
            root,
            nranks: n as usize,
        });
    }
    let mut p = Placement::new(model, root);
    let mut transfers = Vec::with_capacity(seq.len());
    for (i, &(s, r)) in seq.iter().enumerate() {
        let fault = if s >= n || r >= n {
            Some(TransferFault::RankOutOfRange { src: s, dst: r })
        } else if !p.has(s) {
            Some(TransferFault::SenderLacksData(s))
        } else if p.has(r) {
            Some(TransferFault::ReceiverHasData(r))
        } else {
            None
        };
        if let Some(fault) = fault {
            return Err(PlanningError::Transfer { index: i, fault });
        }
        transfers.push(p.add(model, s, r));
    }
    Ok(Timeline {
        root,
        transfers,
        makespan: p.makespan,
    })
}

/// The tree plan of a timeline: every rank receives from its sender, then sends to its
/// receivers in start-time order (ties in the order the transfers were added). Unsegmented.
pub fn timeline_to_plan(nranks: u32, tl: &Timeline, algorithm: &str) -> Plan {
    let mut plan = Plan::empty(nranks, tl.root, algorithm);
    let mut order: Vec<usize> = (0..tl.transfers.len()).collect();
    order.sort_by(|&a, &b| {
        tl.transfers[a]
            .start_s
            .total_cmp(&tl.transfers[b].start_s)
            .then(a.cmp(&b))
    });
    for t in &tl.transfers {
        plan.ops[t.dst as usize].push(Op::Recv {
            peer: t.src,
            segs: SegRange::one(0),
        });
    }
    for &i in &order {
        let t = tl.transfers[i];
        plan.ops[t.src as usize].push(Op::Send {
            peer: t.dst,
            segs: SegRange::one(0),
        });
    }
    plan.info.predicted_time_s = Some(tl.makespan);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LinkDir, TopologyBuilder, VertexKind};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-9)
    }

    /// r0, r1, r2 on one switch; r0's link 2 B/s, the others 1 B/s; latency 1 s each.
    fn star3() -> Topology {
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let r: Vec<_> = (0..3).map(|i| b.rank(i)).collect();
        b.link(r[0], sw, 1.0, 2.0);
        b.link(r[1], sw, 1.0, 1.0);
        b.link(r[2], sw, 1.0, 1.0);
        b.build().unwrap()
    }

    #[test]
    fn single_transfer_timing() {
        let t = star3();
        let m = CostModel::new(&t, 4);
        let tl = evaluate(&m, 0, &[(0, 1)]).unwrap();
        // 2 s of latency + 4 B at min(2, 1) = 1 B/s.
        assert!(close(tl.makespan, 6.0), "{}", tl.makespan);
        let r = m.route(0, 1);
        assert_eq!(r.hops.len(), 2);
        assert!(close(r.hops[0].frac, 0.5) && close(r.hops[1].frac, 1.0));
        assert!(close(r.hops[0].offset, 1.0) && close(r.hops[1].offset, 2.0));
    }

    #[test]
    fn sender_runs_two_transfers_when_bandwidth_allows() {
        // r0's uplink (2 B/s) carries both 1 B/s transfers at once: both start at 0.
        let t = star3();
        let m = CostModel::new(&t, 4);
        let tl = evaluate(&m, 0, &[(0, 1), (0, 2)]).unwrap();
        assert!(close(tl.transfers[1].start_s, 0.0));
        assert!(close(tl.makespan, 6.0));
    }

    #[test]
    fn contention_delays_never_slows() {
        // All links 1 B/s: the second transfer from r0 must wait for the first to leave r0's
        // uplink: reservation [1, 5) on r0->sw, so the second starts at 4 and ends at 4+2+4.
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let r: Vec<_> = (0..3).map(|i| b.rank(i)).collect();
        for &x in &r {
            b.link(x, sw, 1.0, 1.0);
        }
        let t = b.build().unwrap();
        let m = CostModel::new(&t, 4);
        let tl = evaluate(&m, 0, &[(0, 1), (0, 2)]).unwrap();
        assert!(close(tl.transfers[1].start_s, 4.0), "{:?}", tl.transfers);
        assert!(close(tl.makespan, 10.0));
        // Relaying instead: 1 gets it at 6 and forwards: 6 + 6 = 12.
        let tl = evaluate(&m, 0, &[(0, 1), (1, 2)]).unwrap();
        assert!(close(tl.makespan, 12.0));
    }

    #[test]
    fn half_duplex_shares_one_state() {
        // r0 - sw - r1 - and r2 on sw; r1's link is half or full duplex, all 1 B/s, no latency.
        let build = |duplex| {
            let mut b = TopologyBuilder::new();
            let sw = b.vertex("sw", VertexKind::Switch);
            let r: Vec<_> = (0..3).map(|i| b.rank(i)).collect();
            b.link(r[0], sw, 0.0, 1.0);
            let d = LinkDir::new(0.0, 1.0);
            b.link_full(r[1], sw, d, d, duplex);
            b.link(r[2], sw, 0.0, 1.0);
            b.build().unwrap()
        };
        for (duplex, expect) in [(Duplex::Half, 4.0), (Duplex::Full, 0.0)] {
            let t = build(duplex);
            let m = CostModel::new(&t, 4);
            // r1 sends to r0 during [0, 4) over r1 -> sw.
            let mut p = Placement::new(&m, 1);
            p.commit(&m.route(1, 0), 1, 0, 0.0);
            // Traffic into r1 (sw -> r1) shares that state only when the link is half duplex.
            let s = earliest_start(&p.profiles, &m.route(2, 1), 0.0);
            assert!(close(s, expect), "{duplex:?}: {s}");
        }
    }

    #[test]
    fn start_not_before_previous_start() {
        // The second transfer could run at 0 on free links but must start >= the first's start.
        let t = star3();
        let m = CostModel::new(&t, 4);
        let mut p = Placement::new(&m, 0);
        let r01 = m.route(0, 1);
        p.commit(&r01, 0, 1, 3.0);
        let r02 = m.route(0, 2);
        assert!(close(p.start_time(&r02, 0), 3.0));
    }

    #[test]
    fn profile_fit_and_clip() {
        let mut p = Profile::default();
        p.reserve(1.0, 3.0, 0.6);
        p.reserve(2.0, 4.0, 0.5);
        assert!(close(p.level_at(2.5), 1.1));
        assert!(close(p.max_level(0.0, 1.0), 0.0));
        assert!(close(p.max_level(0.0, 2.5), 1.1));
        // Levels: [1,2) 0.6, [2,3) 1.1, [3,4) 0.5, then 0.
        assert!(close(p.earliest_fit(0.0, 1.0, 0.5), 0.0));
        // 0.5 more: [1,2) and [2,3) are too full, [3,4) takes exactly 1.0.
        assert!(close(p.earliest_fit(0.5, 1.0, 0.5), 3.0));
        assert!(close(p.earliest_fit(0.5, 1.0, 0.4), 0.5));
        assert!(close(p.earliest_fit(0.5, 1.0, 0.6), 4.0));
        p.clip_before(3.5);
        assert_eq!(p.steps().len(), 2);
        assert!(close(p.level_at(3.7), 0.5));
        p.clip_before(10.0);
        assert!(p.is_idle());
    }

    #[test]
    fn plan_from_timeline_validates() {
        let t = star3();
        let m = CostModel::new(&t, 4);
        let tl = evaluate(&m, 2, &[(2, 0), (0, 1)]).unwrap();
        let plan = timeline_to_plan(3, &tl, "test");
        plan.validate().unwrap();
        assert_eq!(plan.tree_parents().unwrap(), vec![2, 0, u32::MAX]);
        assert!(evaluate(&m, 0, &[(1, 2)]).unwrap_err().to_string().contains("sender 1"));
        assert!(evaluate(&m, 0, &[(0, 1), (0, 1)])
            .unwrap_err()
            .to_string()
            .contains("already"));
    }
}
