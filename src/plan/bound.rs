//! Lower bounds on the completion time of a partial broadcast schedule (seed-004 model).
//!
//! Seed 004 bounds a state by the optimal broadcast time of each data-less subtree with its cut
//! point as root. Under this model that is not a valid bound as stated: a transfer entering the
//! subtree from outside may run at a lower rate than the same transfer started at the cut
//! point, so its reservations differ and the subtree's optimum does not bound the real schedule.
//! Every bound here is instead derived from facts that hold for any schedule (the exhaustive
//! property test in `optimal` checks them against brute force):
//!
//! * **When a holder can send.** Every later transfer starts at or after the last start. A
//!   holder's first link (its access link) and, for transfers leaving its unit, the unit's
//!   uplink may still be reserved by earlier transfers; relaxing a transfer to the smallest
//!   share and the shortest reservation any real one needs on such a link ([`Gate`]) gives the
//!   earliest time any real one can fit there.
//! * **Path bound.** A rank r without the data finishes no earlier than
//!   `min over holders h of (a_h + latency(h, r) + D / bottleneck(h, r))`. Relaying through
//!   other ranks never helps: on a tree a detour covers the direct path's links, so the
//!   triangle inequality holds for this cost.
//! * **Unit doubling bound.** Ranks are grouped into *units*: the subtrees hanging from switches
//!   (a host with its ranks, or a rank wired straight to a switch). Every transfer leaving unit u
//!   carries D bytes over u's uplink of bandwidth U_u, so the k-th one to complete finishes no
//!   earlier than `y_u + l_u + max(k D / U_u, D / b_u)` (y_u: earliest start of a reservation on
//!   the uplink; l_u: least latency on to another unit's rank; b_u: best bottleneck). A unit
//!   without data is reached only by such a transfer. Letting every informed unit emit at those
//!   earliest times and every newly reached unit join as an emitter with the best remaining
//!   parameters maximises the number of units reached by any time, so the m-th emission X_m
//!   bounds when the last of the m data-less units is reached. If all of them have a second
//!   rank: either some second rank is served by one more crossing transfer (>= X_{m+1}) or all
//!   are served inside their unit (>= X_m + the fastest internal transfer); and in any case the
//!   last unit's second rank is served inside (+ local) or by a second transfer through its
//!   downlink — when no two transfers fit on that downlink together, that one ends at least
//!   D / W (minus the spread of latencies inside the unit) after the first.
//! * **Cluster bound.** The same process for the units behind an inter-switch link: those
//!   without data are reached only from units behind the link that have it, or from outside
//!   through the link, which acts as one emitter limited by its capacity (one transfer per D / W
//!   through it, from the earliest time a reservation fits there).
//! * **Unit entry bound.** For a data-less unit w with two or more ranks: its second rank is
//!   served either from inside (first arrival + fastest internal transfer) or by a second
//!   transfer through w's downlink (both reservations start no earlier than the earliest
//!   possible arrival sigma_w, so the second ends no earlier than `sigma_w + 2 D / W` plus the
//!   latency on to a rank).
//!
//! The bound of a state is the maximum of these and the completions already scheduled.

use super::cost::{CostModel, Profile};
use crate::topology::{Topology, VertexId, VertexKind};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One unit: a subtree hanging from a switch (see module docs).
#[derive(Clone, Debug)]
pub struct Unit {
    pub root: VertexId,
    pub ranks: Vec<u32>,
    /// D / uplink bandwidth (0 when the unit has no uplink).
    pub tau: f64,
    /// D / best bottleneck from inside the unit to any rank outside it.
    pub delta: f64,
    /// Least latency from a rank of the unit through the uplink and on to any rank outside.
    pub lambda: f64,
    /// Least latency from a rank of the unit to the start of its uplink reservation.
    pub l_pre: f64,
    /// Fastest transfer between two ranks of the unit (infinite for a single rank).
    pub local: f64,
    /// D / downlink bandwidth.
    pub tau_in: f64,
    /// Least latency from the unit root down to one of its ranks.
    pub lat_after: f64,
    /// How much later than the first a second transfer into the unit completes at least
    /// (0 when two can share the downlink).
    pub rem: f64,
}

/// The ranks behind an inter-switch link, entered through it.
#[derive(Clone, Debug)]
struct Side {
    units: Vec<u32>,
    in_side: Vec<bool>,
    gate: Gate,
    tau: f64,
    delta: f64,
    l_after: f64,
    /// Per rank outside: latency to the start of the entry link's reservation.
    lat_in: Vec<f64>,
}

/// A link every transfer of some set crosses, relaxed to the smallest share and shortest
/// reservation any of those transfers needs there: if that relaxed transfer does not fit into
/// the link's current profile at some time, none of the real ones does (a smaller share over a
/// shorter window fits whenever a larger, longer one does).
#[derive(Clone, Copy, Debug)]
struct Gate {
    res: u32,
    /// Latency from the transfer's start to this link's reservation (for access links).
    off: f64,
    need: f64,
    dur: f64,
}

impl Gate {
    const NONE: Gate = Gate {
        res: u32::MAX,
        off: 0.0,
        need: 0.0,
        dur: 0.0,
    };
    /// Earliest start of a reservation on this link at or after `from`.
    fn fit(&self, profiles: &[Profile], from: f64) -> f64 {
        if self.res == u32::MAX {
            from
        } else {
            profiles[self.res as usize].earliest_fit(from, self.dur, self.need)
        }
    }
}

/// Precomputed data for the bounds of one (topology, size).
#[derive(Clone, Debug)]
pub struct Bounds {
    n: usize,
    /// Route times between ranks (latency + D / bottleneck), row-major `n x n`; empty when
    /// `n` is too large to store, then computed on demand.
    time: Vec<f64>,
    pub units: Vec<Unit>,
    pub unit_of: Vec<u32>,
    /// Latency from rank h into unit w's root (through its downlink), `n x units`.
    lat_in: Vec<f64>,
    bytes: f64,
    /// Per rank: its outgoing access link (empty above `DENSE_LIMIT`).
    acc: Vec<Gate>,
    /// Per unit: its uplink.
    up: Vec<Gate>,
    /// Per rank: latency from the rank to the start of its unit's uplink reservation.
    up_off: Vec<f64>,
    sides: Vec<Side>,
    /// Per rank: the sides it lies in.
    sides_of_rank: Vec<Vec<u32>>,
}

/// Largest rank count for which `Bounds` stores rank-to-rank data (time matrix, gates).
const DENSE_LIMIT: usize = 512;

/// Totally ordered f64 for the heap (min-heap by time, then by index for determinism).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Slot {
    t: f64,
    who: u32,
    k: u32,
}
impl Eq for Slot {}
impl PartialOrd for Slot {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Slot {
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.who.cmp(&self.who))
    }
}

/// Reusable buffers of [`Bounds::lower_bound_with`].
#[derive(Clone, Debug, Default)]
pub struct BoundScratch {
    /// (rank, earliest start of any transfer, earliest start of one leaving its unit)
    holders: Vec<(u32, f64, f64)>,
    path: Vec<f64>,
    side_start: Vec<f64>,
    y_unit: Vec<f64>,
    targets: Vec<u32>,
    taus: Vec<f64>,
    lams: Vec<f64>,
    dels: Vec<f64>,
    emitters: Vec<(f64, f64, f64, f64)>,
    heap: BinaryHeap<Slot>,
    params: Vec<(f64, f64, f64, f64)>,
    xs: Vec<f64>,
}

impl Bounds {
    pub fn new(model: &CostModel) -> Bounds {
        let topo = model.topology();
        let n = model.num_ranks();
        let d = model.bytes();
        let dense = n <= DENSE_LIMIT;
        let mut time = Vec::new();
        if dense {
            time = vec![0.0; n * n];
            for s in 0..n {
                let sv = topo.rank_vertex(s as u32);
                let lat = latencies_from(topo, sv, true);
                let bw = bottlenecks_from(topo, sv, true);
                for r in 0..n {
                    if s != r {
                        let rv = topo.rank_vertex(r as u32);
                        time[s * n + r] = lat[rv] + dur(d, bw[rv]);
                    }
                }
            }
        }
        let (units, unit_of) = build_units(topo, d);
        let nu = units.len();
        let mut lat_in = vec![0.0; n * nu];
        for (w, u) in units.iter().enumerate() {
            let dist = latencies_from(topo, u.root, false); // h -> unit root
            for h in 0..n {
                lat_in[h * nu + w] = dist[topo.rank_vertex(h as u32)];
            }
        }
        let (acc, up) = if dense && d > 0.0 {
            (access_gates(model), uplink_gates(model, &units))
        } else {
            (Vec::new(), Vec::new())
        };
        let mut up_off = vec![0.0; n];
        for u in &units {
            if let Some((sw, _)) = topo.parent(u.root) {
                let lat = latencies_from(topo, sw, false);
                for &r in &u.ranks {
                    up_off[r as usize] = lat[topo.rank_vertex(r)];
                }
            }
        }
        let sides = if dense && d > 0.0 {
            build_sides(model, &unit_of)
        } else {
            Vec::new()
        };
        let mut sides_of_rank = vec![Vec::new(); n];
        for (i, side) in sides.iter().enumerate() {
            for (list, _) in sides_of_rank.iter_mut().zip(&side.in_side).filter(|x| *x.1) {
                list.push(i as u32);
            }
        }
        Bounds {
            n,
            time,
            units,
            unit_of,
            lat_in,
            bytes: d,
            acc,
            up,
            up_off,
            sides,
            sides_of_rank,
        }
    }

    /// Idle-network transfer time between two ranks.
    pub fn time(&self, topo: &Topology, s: u32, r: u32) -> f64 {
        if self.time.is_empty() {
            topo.transfer_time(topo.rank_vertex(s), topo.rank_vertex(r), self.bytes)
        } else {
            self.time[s as usize * self.n + r as usize]
        }
    }

    /// Lower bound on the completion time of any schedule continuing from a state where rank h
    /// holds the data from `ready[h]` (`f64::INFINITY` for ranks without it) and the last
    /// transfer started at `last`, on an otherwise idle network.
    pub fn lower_bound(&self, topo: &Topology, ready: &[f64], last: f64) -> f64 {
        self.lower_bound_with(topo, ready, last, None, &mut BoundScratch::default())
    }

    /// [`Bounds::lower_bound`] with the current link `profiles` (links still reserved by earlier
    /// transfers delay new ones) and caller-owned buffers (no allocation once warm).
    pub fn lower_bound_with(
        &self,
        topo: &Topology,
        ready: &[f64],
        last: f64,
        profiles: Option<&[Profile]>,
        sc: &mut BoundScratch,
    ) -> f64 {
        let n = self.n;
        let nu = self.units.len();
        let gates = profiles.filter(|_| !self.acc.is_empty());
        let mut lb = 0.0f64;
        sc.holders.clear();
        for h in 0..n as u32 {
            let t = ready[h as usize];
            if t.is_finite() {
                let mut a = t.max(last);
                if let Some(p) = gates {
                    let g = self.acc[h as usize];
                    a = a.max(g.fit(p, a + g.off) - g.off);
                }
                sc.holders.push((h, a, a));
                lb = lb.max(t);
            }
        }
        if sc.holders.len() == n {
            return lb;
        }
        // Earliest uplink reservation start of every unit with data; holders' earliest start of
        // a transfer leaving their unit.
        sc.y_unit.clear();
        sc.y_unit.resize(nu, f64::INFINITY);
        for &(h, a, _) in &sc.holders {
            let u = self.unit_of[h as usize] as usize;
            sc.y_unit[u] = sc.y_unit[u].min(a + self.up_off[h as usize]);
        }
        if let Some(p) = gates {
            for u in 0..nu {
                if sc.y_unit[u].is_finite() {
                    sc.y_unit[u] = self.up[u].fit(p, sc.y_unit[u]);
                }
            }
            for x in sc.holders.iter_mut() {
                let u = self.unit_of[x.0 as usize] as usize;
                x.2 = x.1.max(sc.y_unit[u] - self.up_off[x.0 as usize]);
            }
        }
        // Earliest start of a transfer from each holder into each side's cluster, given its
        // entry link's reservations (`side_start[side * holders + i]`).
        let nh = sc.holders.len();
        sc.side_start.clear();
        if let Some(p) = gates {
            for side in &self.sides {
                for &(h, _, a2) in &sc.holders {
                    let off = side.lat_in[h as usize];
                    sc.side_start.push(if off.is_finite() {
                        a2.max(side.gate.fit(p, a2 + off) - off)
                    } else {
                        a2
                    });
                }
            }
        }
        // Path bound per rank without data.
        sc.path.clear();
        sc.path.resize(n, f64::INFINITY);
        for r in 0..n as u32 {
            if ready[r as usize].is_finite() {
                continue;
            }
            let ur = self.unit_of[r as usize];
            let mut best = f64::INFINITY;
            for (i, &(h, a1, a2)) in sc.holders.iter().enumerate() {
                let mut a = if self.unit_of[h as usize] == ur { a1 } else { a2 };
                if !sc.side_start.is_empty() {
                    for &si in &self.sides_of_rank[r as usize] {
                        if !self.sides[si as usize].in_side[h as usize] {
                            a = a.max(sc.side_start[si as usize * nh + i]);
                        }
                    }
                }
                best = best.min(a + self.time(topo, h, r));
            }
            sc.path[r as usize] = best;
            lb = lb.max(best);
        }
        // Entry bound per data-less unit with two or more ranks.
        for w in 0..nu {
            let unit = &self.units[w];
            if sc.y_unit[w].is_finite() || unit.ranks.len() < 2 {
                continue;
            }
            let first = unit
                .ranks
                .iter()
                .map(|&r| sc.path[r as usize])
                .fold(f64::INFINITY, f64::min);
            let sigma = sc
                .holders
                .iter()
                .map(|&(h, _, a2)| a2 + self.lat_in[h as usize * nu + w])
                .fold(f64::INFINITY, f64::min);
            lb = lb.max((first + unit.local).min(sigma + 2.0 * unit.tau_in + unit.lat_after));
        }
        // Doubling over all units.
        sc.emitters.clear();
        sc.targets.clear();
        for u in 0..nu {
            let x = &self.units[u];
            if sc.y_unit[u].is_finite() {
                sc.emitters.push((sc.y_unit[u] - x.l_pre, x.tau, x.lambda, x.delta));
            } else {
                sc.targets.push(u as u32);
            }
        }
        lb = lb.max(self.emission_bound(sc));
        // Clusters behind inter-switch links: their units without data are reached only from
        // their units with data or through the entry link.
        for side in &self.sides {
            if side.units.len() < 2 {
                continue;
            }
            sc.emitters.clear();
            sc.targets.clear();
            for &u in &side.units {
                let x = &self.units[u as usize];
                if sc.y_unit[u as usize].is_finite() {
                    sc.emitters
                        .push((sc.y_unit[u as usize] - x.l_pre, x.tau, x.lambda, x.delta));
                } else {
                    sc.targets.push(u);
                }
            }
            if sc.targets.is_empty() {
                continue;
            }
            let sigma = sc
                .holders
                .iter()
                .filter(|x| !side.in_side[x.0 as usize])
                .map(|&(h, _, a2)| a2 + side.lat_in[h as usize])
                .fold(f64::INFINITY, f64::min);
            if sigma.is_finite() {
                let y = match gates {
                    Some(p) => side.gate.fit(p, sigma),
                    None => sigma,
                };
                sc.emitters.push((y, side.tau, side.l_after, side.delta));
            }
            lb = lb.max(self.emission_bound(sc));
        }
        lb
    }

    /// Doubling bound for reaching every unit of `sc.targets` from `sc.emitters` (module docs).
    fn emission_bound(&self, sc: &mut BoundScratch) -> f64 {
        let m = sc.targets.len();
        if m == 0 {
            return 0.0;
        }
        sc.taus.clear();
        sc.lams.clear();
        sc.dels.clear();
        let mut all_multi = true;
        let mut local_min = f64::INFINITY;
        let mut second_min = f64::INFINITY;
        for &u in &sc.targets {
            let x = &self.units[u as usize];
            sc.taus.push(x.tau);
            sc.lams.push(x.lambda);
            sc.dels.push(x.delta);
            if x.ranks.len() < 2 {
                all_multi = false;
            }
            local_min = local_min.min(x.local);
            second_min = second_min.min(x.local.min(x.rem));
        }
        sc.taus.sort_by(f64::total_cmp);
        sc.lams.sort_by(f64::total_cmp);
        sc.dels.sort_by(f64::total_cmp);
        emission_times_with(
            &sc.emitters,
            &sc.taus,
            &sc.lams,
            &sc.dels,
            m + 1,
            &mut sc.heap,
            &mut sc.params,
            &mut sc.xs,
        );
        let x_m = sc.xs[m - 1];
        if all_multi {
            sc.xs[m].min(x_m + local_min).max(x_m + second_min)
        } else {
            x_m
        }
    }
}

fn dur(bytes: f64, bw: f64) -> f64 {
    if bytes == 0.0 || bw.is_infinite() {
        0.0
    } else {
        bytes / bw
    }
}

/// The first `count` emission times of the unit doubling process (module docs): emitters
/// `(start, tau, lambda, delta)` emit their k-th transfer at `start + lambda + max(k tau,
/// delta)`; the j-th unit reached joins with the j-th smallest of each parameter.
pub fn emission_times(
    emitters: &[(f64, f64, f64, f64)],
    taus: &[f64],
    lams: &[f64],
    dels: &[f64],
    count: usize,
) -> Vec<f64> {
    let mut out = Vec::new();
    emission_times_with(
        emitters,
        taus,
        lams,
        dels,
        count,
        &mut BinaryHeap::new(),
        &mut Vec::new(),
        &mut out,
    );
    out
}

#[allow(clippy::too_many_arguments)]
fn emission_times_with(
    emitters: &[(f64, f64, f64, f64)],
    taus: &[f64],
    lams: &[f64],
    dels: &[f64],
    count: usize,
    heap: &mut BinaryHeap<Slot>,
    params: &mut Vec<(f64, f64, f64, f64)>,
    out: &mut Vec<f64>,
) {
    let slot = |a: f64, tau: f64, lam: f64, del: f64, k: u32| a + lam + (k as f64 * tau).max(del);
    params.clear();
    params.extend_from_slice(emitters);
    heap.clear();
    for (i, &(a, tau, lam, del)) in emitters.iter().enumerate() {
        heap.push(Slot {
            t: slot(a, tau, lam, del, 1),
            who: i as u32,
            k: 1,
        });
    }
    out.clear();
    while out.len() < count {
        let Some(s) = heap.pop() else { break };
        out.push(s.t);
        let (a, tau, lam, del) = params[s.who as usize];
        heap.push(Slot {
            t: slot(a, tau, lam, del, s.k + 1),
            who: s.who,
            k: s.k + 1,
        });
        let j = out.len() - 1;
        if j < taus.len() {
            params.push((s.t, taus[j], lams[j], dels[j]));
            heap.push(Slot {
                t: slot(s.t, taus[j], lams[j], dels[j], 1),
                who: (params.len() - 1) as u32,
                k: 1,
            });
        }
    }
    while out.len() < count {
        out.push(f64::INFINITY);
    }
}

/// Every rank's outgoing access link as a [`Gate`].
fn access_gates(model: &CostModel) -> Vec<Gate> {
    let topo = model.topology();
    let n = topo.num_ranks();
    let d = model.bytes();
    let rank_vs: Vec<VertexId> = (0..n as u32).map(|r| topo.rank_vertex(r)).collect();
    let mut acc = vec![Gate::NONE; n];
    for (h, &hv) in rank_vs.iter().enumerate() {
        let Some(&(_, l)) = topo.neighbors(hv).first() else {
            continue;
        };
        let link = topo.link(l);
        let fwd = link.a == hv;
        let dir = link.dir(fwd);
        let bn = bottlenecks_from(topo, hv, true);
        let (lo, hi) = rank_vs
            .iter()
            .filter(|&&v| v != hv)
            .map(|&v| bn[v])
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), b| (lo.min(b), hi.max(b)));
        if !dir.bandwidth_bps.is_finite() || !hi.is_finite() || hi <= 0.0 {
            continue;
        }
        acc[h] = Gate {
            res: model.resource(l, fwd),
            off: dir.latency_s,
            need: lo / dir.bandwidth_bps,
            dur: d / hi,
        };
    }
    acc
}

/// Every unit's uplink as a [`Gate`] (for transfers leaving the unit).
fn uplink_gates(model: &CostModel, units: &[Unit]) -> Vec<Gate> {
    let topo = model.topology();
    let d = model.bytes();
    let n = topo.num_ranks();
    units
        .iter()
        .map(|unit| {
            let Some((sw, l)) = topo.parent(unit.root) else {
                return Gate::NONE;
            };
            let link = topo.link(l);
            let fwd = link.a == unit.root;
            let dir = link.dir(fwd);
            let bn_in = bottlenecks_from(topo, sw, false); // x -> sw
            let bn_out = bottlenecks_from(topo, sw, true); // sw -> x
            let inside: std::collections::HashSet<u32> = unit.ranks.iter().copied().collect();
            let (mut lo, mut in_hi, mut out_hi) = (f64::INFINITY, 0.0f64, 0.0f64);
            for r in 0..n as u32 {
                let v = topo.rank_vertex(r);
                if inside.contains(&r) {
                    lo = lo.min(bn_in[v]);
                    in_hi = in_hi.max(bn_in[v]);
                } else {
                    lo = lo.min(bn_out[v]);
                    out_hi = out_hi.max(bn_out[v]);
                }
            }
            let hi = in_hi.min(out_hi);
            if !dir.bandwidth_bps.is_finite() || !hi.is_finite() || hi <= 0.0 {
                return Gate::NONE;
            }
            Gate {
                res: model.resource(l, fwd),
                off: 0.0,
                need: lo / dir.bandwidth_bps,
                dur: d / hi,
            }
        })
        .collect()
}

/// Both sides of every switch-to-switch link (that hold ranks and do not hold all of them).
fn build_sides(model: &CostModel, unit_of: &[u32]) -> Vec<Side> {
    let topo = model.topology();
    let d = model.bytes();
    let n = topo.num_ranks();
    let mut sides = Vec::new();
    for (l, link) in topo.links().iter().enumerate() {
        if topo.vertex(link.a).kind != VertexKind::Switch || topo.vertex(link.b).kind != VertexKind::Switch {
            continue;
        }
        for (outer, inner) in [(link.a, link.b), (link.b, link.a)] {
            // Ranks on `inner`'s side: reachable from it without crossing link l.
            let mut in_side_v = vec![false; topo.num_vertices()];
            in_side_v[inner] = true;
            let mut stack = vec![inner];
            while let Some(u) = stack.pop() {
                for &(w, lw) in topo.neighbors(u) {
                    if lw != l && !in_side_v[w] {
                        in_side_v[w] = true;
                        stack.push(w);
                    }
                }
            }
            let in_side: Vec<bool> = (0..n as u32).map(|r| in_side_v[topo.rank_vertex(r)]).collect();
            let mut units: Vec<u32> = (0..n).filter(|&r| in_side[r]).map(|r| unit_of[r]).collect();
            units.sort_unstable();
            units.dedup();
            if units.is_empty() || in_side.iter().all(|&x| x) {
                continue;
            }
            let fwd = link.a == outer;
            let dir = link.dir(fwd);
            let lat_to = latencies_from(topo, inner, false); // x -> inner (through l)
            let lat_from = latencies_from(topo, inner, true); // inner -> x
            let bn_to = bottlenecks_from(topo, inner, false);
            let bn_from = bottlenecks_from(topo, inner, true);
            let (mut lo, mut out_hi, mut in_hi) = (f64::INFINITY, 0.0f64, 0.0f64);
            let mut l_after = f64::INFINITY;
            let mut lat_in = vec![f64::INFINITY; n];
            for r in 0..n {
                let v = topo.rank_vertex(r as u32);
                if in_side[r] {
                    lo = lo.min(bn_from[v]);
                    in_hi = in_hi.max(bn_from[v]);
                    l_after = l_after.min(lat_from[v]);
                } else {
                    lo = lo.min(bn_to[v]);
                    out_hi = out_hi.max(bn_to[v]);
                    lat_in[r] = lat_to[v];
                }
            }
            let hi = in_hi.min(out_hi);
            if !dir.bandwidth_bps.is_finite() || !hi.is_finite() || hi <= 0.0 {
                continue;
            }
            sides.push(Side {
                units,
                in_side,
                gate: Gate {
                    res: model.resource(l, fwd),
                    off: 0.0,
                    need: lo / dir.bandwidth_bps,
                    dur: d / hi,
                },
                tau: dur(d, dir.bandwidth_bps),
                delta: d / hi,
                l_after,
                lat_in,
            });
        }
    }
    sides
}

/// Latency from `from` to every vertex along tree paths (`down`: in the direction away from
/// `from`, i.e. as a transfer from `from` would see it; else towards `from`).
pub fn latencies_from(topo: &Topology, from: VertexId, down: bool) -> Vec<f64> {
    let nv = topo.num_vertices();
    let mut dist = vec![f64::INFINITY; nv];
    dist[from] = 0.0;
    let mut stack = vec![from];
    while let Some(u) = stack.pop() {
        for &(w, l) in topo.neighbors(u) {
            if dist[w].is_finite() {
                continue;
            }
            let link = topo.link(l);
            // Direction u -> w for `down`, w -> u otherwise.
            let forward = (link.a == u) == down;
            dist[w] = dist[u] + link.dir(forward).latency_s;
            stack.push(w);
        }
    }
    dist
}

/// Bottleneck bandwidth from `from` to every vertex (`down` as in [`latencies_from`]).
pub fn bottlenecks_from(topo: &Topology, from: VertexId, down: bool) -> Vec<f64> {
    let nv = topo.num_vertices();
    let mut bw = vec![-1.0; nv];
    bw[from] = f64::INFINITY;
    let mut stack = vec![from];
    while let Some(u) = stack.pop() {
        for &(w, l) in topo.neighbors(u) {
            if bw[w] >= 0.0 {
                continue;
            }
            let link = topo.link(l);
            let forward = (link.a == u) == down;
            bw[w] = bw[u].min(link.dir(forward).bandwidth_bps);
            stack.push(w);
        }
    }
    bw
}

/// Units of a topology (module docs) and the unit of every rank.
pub fn build_units(topo: &Topology, bytes: f64) -> (Vec<Unit>, Vec<u32>) {
    let n = topo.num_ranks();
    let mut roots: Vec<VertexId> = Vec::new();
    let mut index: std::collections::HashMap<VertexId, u32> = Default::default();
    let mut unit_of = vec![0u32; n];
    for r in 0..n as u32 {
        let mut v = topo.rank_vertex(r);
        while let Some((p, _)) = topo.parent(v) {
            if topo.vertex(p).kind == VertexKind::Switch {
                break;
            }
            v = p;
        }
        let next = roots.len() as u32;
        let id = *index.entry(v).or_insert(next);
        if id == next {
            roots.push(v);
        }
        unit_of[r as usize] = id;
    }
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); roots.len()];
    for r in 0..n as u32 {
        members[unit_of[r as usize] as usize].push(r);
    }
    let dur = |bw: f64| dur(bytes, bw);
    let units = roots
        .iter()
        .zip(members)
        .map(|(&root, ranks)| {
            let up = topo.parent(root);
            // Latencies/bottlenecks from the unit root outwards and inwards.
            let lat_down = latencies_from(topo, root, true); // root -> x
            let lat_up = latencies_from(topo, root, false); // x -> root
            let bw_down = bottlenecks_from(topo, root, true);
            let bw_up = bottlenecks_from(topo, root, false);
            let inside: std::collections::HashSet<u32> = ranks.iter().copied().collect();
            let outside: Vec<u32> = (0..n as u32).filter(|r| !inside.contains(r)).collect();
            let (tau, tau_in, up_lat, down_bw) = match up {
                Some((_, l)) => {
                    let link = topo.link(l);
                    let fwd_up = link.a == root;
                    (
                        dur(link.dir(fwd_up).bandwidth_bps),
                        dur(link.dir(!fwd_up).bandwidth_bps),
                        link.dir(fwd_up).latency_s,
                        link.dir(!fwd_up).bandwidth_bps,
                    )
                }
                None => (0.0, 0.0, 0.0, f64::INFINITY),
            };
            let min_in_up = ranks
                .iter()
                .map(|&r| lat_up[topo.rank_vertex(r)])
                .fold(f64::INFINITY, f64::min);
            let min_out = outside
                .iter()
                .map(|&r| lat_down[topo.rank_vertex(r)])
                .fold(f64::INFINITY, f64::min);
            let best_in_bw = ranks.iter().map(|&r| bw_up[topo.rank_vertex(r)]).fold(0.0, f64::max);
            let best_out_bw = outside
                .iter()
                .map(|&r| bw_down[topo.rank_vertex(r)])
                .fold(0.0, f64::max);
            let lat_after = ranks
                .iter()
                .map(|&r| lat_down[topo.rank_vertex(r)])
                .fold(f64::INFINITY, f64::min);
            let mut local = f64::INFINITY;
            if ranks.len() >= 2 && ranks.len() <= 64 {
                for &x in &ranks {
                    for &y in &ranks {
                        if x != y {
                            local = local.min(topo.transfer_time(topo.rank_vertex(x), topo.rank_vertex(y), bytes));
                        }
                    }
                }
            } else if ranks.len() >= 2 {
                // Large unit: internal paths need not pass its root; 0 is always valid.
                local = 0.0;
            }
            // A second transfer into the unit cannot share the downlink with the first when
            // every transfer into it needs more than half of it; then it ends D/W later, less
            // the spread of latencies from the unit root down to its ranks.
            let into_min = outside
                .iter()
                .map(|&r| bw_up[topo.rank_vertex(r)])
                .fold(f64::INFINITY, f64::min)
                .min(
                    ranks
                        .iter()
                        .map(|&r| bw_down[topo.rank_vertex(r)])
                        .fold(f64::INFINITY, f64::min),
                );
            let lat_max = ranks.iter().map(|&r| lat_down[topo.rank_vertex(r)]).fold(0.0, f64::max);
            let rem = if up.is_some() && 2.0 * into_min > down_bw {
                (tau_in - (lat_max - lat_after)).max(0.0)
            } else {
                0.0
            };
            Unit {
                root,
                ranks,
                tau,
                delta: dur(best_in_bw.min(best_out_bw)),
                lambda: if outside.is_empty() { 0.0 } else { min_in_up + min_out },
                l_pre: min_in_up + up_lat,
                local,
                tau_in,
                lat_after,
                rem,
            }
        })
        .collect();
    (units, unit_of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologyBuilder;

    fn star(n: u32, lat: f64, bw: f64) -> Topology {
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        for i in 0..n {
            let r = b.rank(i);
            b.link(r, sw, lat, bw);
        }
        b.build().unwrap()
    }

    #[test]
    fn star_doubling_bound_is_exact() {
        // 8 ranks, latency 1 per link, 1 B/s, 4 bytes: a transfer takes 2 + 4 = 6 when alone,
        // and a sender's uplink frees every 4, so a holder ready at a completes transfers at
        // a + 2 + 4k. Root: 6, 10, 14, 18; r1 (6): 12, 16; r2 (10): 16; r3 (12): 18. The
        // seventh receiver completes at 18, which the real schedule achieves too.
        let t = star(8, 1.0, 1.0);
        let m = CostModel::new(&t, 4);
        let b = Bounds::new(&m);
        let mut ready = vec![f64::INFINITY; 8];
        ready[0] = 0.0;
        let lb = b.lower_bound(&t, &ready, 0.0);
        assert!((lb - 18.0).abs() < 1e-9, "{lb}");
    }

    #[test]
    fn path_bound_uses_last_start() {
        let t = star(3, 1.0, 1.0);
        let m = CostModel::new(&t, 4);
        let b = Bounds::new(&m);
        let ready = vec![0.0, 6.0, f64::INFINITY];
        // Holders 0 (usable from last=5) and 1 (from 6): r2 >= min(5 + 6, 6 + 6) = 11.
        let lb = b.lower_bound(&t, &ready, 5.0);
        assert!((lb - 11.0).abs() < 1e-9, "{lb}");
    }

    #[test]
    fn entry_bound_for_two_rank_host() {
        // Host h with two ranks on a shared-memory node (fast), reached over a 1 B/s link.
        // r0 on the switch. D = 4: first arrival >= 1+1+0 latency + 4 = 6 (bottleneck 1 B/s);
        // the second rank: locally +(0 latency, 4/100) = 6.04, or a second transfer through
        // the 1 B/s downlink: 1 + 1 + 2*4 = 10. Bound 6.04.
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let h = b.vertex("h", VertexKind::Node);
        let r0 = b.rank(0);
        let r1 = b.rank(1);
        let r2 = b.rank(2);
        b.link(r0, sw, 1.0, 1.0);
        b.link(h, sw, 1.0, 1.0);
        b.link(r1, h, 0.0, 100.0);
        b.link(r2, h, 0.0, 100.0);
        let t = b.build().unwrap();
        let m = CostModel::new(&t, 4);
        let bd = Bounds::new(&m);
        let ready = vec![0.0, f64::INFINITY, f64::INFINITY];
        let lb = bd.lower_bound(&t, &ready, 0.0);
        assert!((lb - 6.04).abs() < 1e-9, "{lb}");
    }
}
