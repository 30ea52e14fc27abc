//! Lower bounds on the completion time of a partial broadcast schedule ([Hourai2004] model).
//!
//! [Hourai2004] §4.6 bounds a state by the optimal broadcast time of each data-less subtree with its cut
//! point as root. Under this model that is not a valid bound as stated: a transfer entering the
//! subtree from outside may run at a lower rate than the same transfer started at the cut
//! point, so it reserves less inside, other transfers fit beside it, and the real schedule can
//! beat the subtree's own optimum. We keep [Hourai2004]'s idea — a data-less subtree costs its entry
//! time plus its own broadcast time from the cut point — in a form that holds for any schedule:
//! the *cluster* and *split* bounds below time the subtree's own broadcast with a relaxation
//! (the doubling process) instead of its exact optimum, and charge the entry through the cut
//! link's capacity. Every bound here is derived from facts that hold for any schedule (the
//! exhaustive property test in `optimal` checks them against brute force):
//!
//! * **When a holder can send.** Every later transfer starts at or after the last start. A
//!   holder's first link (its access link) and, for transfers leaving its unit, the unit's
//!   uplink may still be reserved by earlier transfers; relaxing a transfer to the smallest
//!   share and the shortest reservation any real one needs on such a link (a `Gate`) gives the
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
//! * **Split bound** (a data-less cluster behind an inter-switch link): its first transfer is
//!   some j-th transfer emitted by the rest; take the least over j of the larger of the rest's
//!   doubling bound with that emission lost (transfers back out of the cluster joining once it
//!   has data) and the cluster's own doubling bound from that time (later entries limited by
//!   the link). This couples the clusters: a slow link into a cluster delays whatever the rest
//!   did instead.
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
    /// Longest latency from the entry link on to a rank of the side.
    l_after_max: f64,
    /// Longest reservation a transfer entering the side can need on the entry link.
    d_max: f64,
    /// Per rank outside: latency to the start of the entry link's reservation.
    lat_in: Vec<f64>,
    /// Leaving the side through the same link: (D / bandwidth, least latency from a rank
    /// inside to one outside, D / best bottleneck).
    back: (f64, f64, f64),
    /// Per unit: the least latency of a transfer leaving it (through its uplink) to a rank on
    /// its own side of this link: outside the side for units outside, inside for units inside.
    lam: Vec<f64>,
    /// How much sooner than [`Side::lam`] a unit outside can reach a rank inside (>= 0).
    lam_gap: f64,
    /// Per unit inside: its uplink as a gate for transfers to other ranks inside the side
    /// (they may need a larger share than transfers leaving the side).
    up_in: Vec<Gate>,
}

/// An emitter of the doubling process: its k-th transfer completes no earlier than
/// `max(floor, a + lambda + max(k tau, delta))`.
#[derive(Clone, Copy, Debug)]
struct Emitter {
    a: f64,
    tau: f64,
    lambda: f64,
    delta: f64,
    floor: f64,
}

impl Emitter {
    fn new(a: f64, tau: f64, lambda: f64, delta: f64) -> Emitter {
        Emitter {
            a,
            tau,
            lambda,
            delta,
            floor: f64::NEG_INFINITY,
        }
    }
    fn slot(&self, k: u32) -> f64 {
        (self.a + self.lambda + (k as f64 * self.tau).max(self.delta)).max(self.floor)
    }
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
    emitters: Vec<Emitter>,
    r_targets: Vec<u32>,
    r_emitters: Vec<Emitter>,
    heap: BinaryHeap<Slot>,
    params: Vec<Emitter>,
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
            build_sides(model, &units, &unit_of)
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
        self.lower_bound_with(topo, ready, last, None, f64::INFINITY, &mut BoundScratch::default())
    }

    /// [`Bounds::lower_bound`] with the current link `profiles` (links still reserved by earlier
    /// transfers delay new ones) and caller-owned buffers (no allocation once warm). Returns
    /// early, with a smaller but still valid bound, as soon as the bound reaches `stop`.
    pub fn lower_bound_with(
        &self,
        topo: &Topology,
        ready: &[f64],
        last: f64,
        profiles: Option<&[Profile]>,
        stop: f64,
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
        if lb >= stop {
            return lb;
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
                sc.emitters
                    .push(Emitter::new(sc.y_unit[u] - x.l_pre, x.tau, x.lambda, x.delta));
            } else {
                sc.targets.push(u as u32);
            }
        }
        lb = lb.max(self.emission_bound(sc, usize::MAX, None, None).0);
        if lb >= stop {
            return lb;
        }
        // Clusters behind inter-switch links: their units without data are reached only from
        // their units with data or through the entry link.
        for side in &self.sides {
            let dataless = side.units.iter().all(|&u| sc.y_unit[u as usize].is_infinite());
            // Earliest reservation start on the entry link: from holders outside, or from ranks
            // outside that get the data later (they cannot send before their path bound).
            let sigma = (0..n)
                .filter(|&r| !side.in_side[r])
                .map(|r| match sc.holders.binary_search_by_key(&(r as u32), |x| x.0) {
                    Ok(i) => sc.holders[i].2 + side.lat_in[r],
                    Err(_) => sc.path[r] + side.lat_in[r],
                })
                .fold(f64::INFINITY, f64::min);
            let y = match gates {
                Some(p) if sigma.is_finite() => side.gate.fit(p, sigma),
                _ => sigma,
            };
            if side.units.len() >= 2 {
                sc.emitters.clear();
                sc.targets.clear();
                for &u in &side.units {
                    let x = &self.units[u as usize];
                    if sc.y_unit[u as usize].is_finite() {
                        let lam = side.lam[u as usize];
                        let mut y = sc.y_unit[u as usize];
                        if let Some(p) = gates {
                            y = side.up_in[u as usize].fit(p, y);
                        }
                        sc.emitters.push(Emitter::new(y - x.l_pre, x.tau, lam, x.delta));
                    } else {
                        sc.targets.push(u);
                    }
                }
                if !sc.targets.is_empty() {
                    if y.is_finite() {
                        sc.emitters.push(Emitter::new(y, side.tau, side.l_after, side.delta));
                    }
                    lb = lb.max(self.emission_bound(sc, usize::MAX, None, Some(&side.lam)).0);
                }
            }
            if dataless && y.is_finite() && lb < stop {
                lb = lb.max(self.split_bound(side, y, sc));
            }
            if lb >= stop {
                return lb;
            }
        }
        lb
    }

    /// Split bound for a side without data (module docs): the first transfer into it is the
    /// j-th transfer emitted by the rest; minimise over j the larger of the rest's bound (that
    /// emission lost to the side, transfers back out of the side joining once it has data) and
    /// the side's bound (first reached at that emission's time, later entries limited by the
    /// link from `y`, the earliest reservation start on it).
    fn split_bound(&self, side: &Side, y: f64, sc: &mut BoundScratch) -> f64 {
        sc.r_emitters.clear();
        sc.r_targets.clear();
        for (u, x) in self.units.iter().enumerate() {
            if sc.y_unit[u].is_finite() {
                sc.r_emitters
                    .push(Emitter::new(sc.y_unit[u] - x.l_pre, x.tau, side.lam[u], x.delta));
            } else if !side.units.contains(&(u as u32)) {
                sc.r_targets.push(u as u32);
            }
        }
        // A crossing after the rest's (m+1)-th emission is no better than right at it.
        let m_r = sc.r_targets.len();
        let mut best = f64::INFINITY;
        for j in 0..=m_r + 1 {
            sc.emitters.clear();
            sc.emitters.extend_from_slice(&sc.r_emitters);
            sc.targets.clear();
            sc.targets.extend_from_slice(&sc.r_targets);
            let (t, l, d) = side.back;
            let (lb_r, x_j) = self.emission_bound(sc, j, Some((t, l, d, side.lam_gap)), Some(&side.lam));
            if !x_j.is_finite() {
                continue;
            }
            // The crossing transfer itself may reach the side sooner than the rest's latencies.
            let x_j = x_j - side.lam_gap;
            sc.emitters.clear();
            sc.emitters.push(Emitter {
                a: y.max(x_j - side.l_after_max - side.d_max),
                tau: side.tau,
                lambda: side.l_after,
                delta: side.delta,
                floor: x_j,
            });
            sc.targets.clear();
            sc.targets.extend_from_slice(&side.units);
            let (lb_s, _) = self.emission_bound(sc, usize::MAX, None, Some(&side.lam));
            best = best.min(lb_r.max(lb_s).max(x_j));
        }
        best
    }

    /// Doubling bound for reaching every unit of `sc.targets` from `sc.emitters` (module docs).
    /// With `skip = j`, the j-th emission (0-based, in time order) goes elsewhere and `back`
    /// (tau, lambda, delta, early) joins as an emitter `early` before its time; returns that
    /// time too.
    fn emission_bound(
        &self,
        sc: &mut BoundScratch,
        skip: usize,
        back: Option<(f64, f64, f64, f64)>,
        lam: Option<&[f64]>,
    ) -> (f64, f64) {
        let m = sc.targets.len();
        sc.taus.clear();
        sc.lams.clear();
        sc.dels.clear();
        let mut all_multi = true;
        let mut local_min = f64::INFINITY;
        let mut second_min = f64::INFINITY;
        for &u in &sc.targets {
            let x = &self.units[u as usize];
            sc.taus.push(x.tau);
            sc.lams.push(lam.map_or(x.lambda, |l| l[u as usize]));
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
        let skipped = emission_times_with(
            &sc.emitters,
            &sc.taus,
            &sc.lams,
            &sc.dels,
            m + 1,
            skip,
            back,
            &mut sc.heap,
            &mut sc.params,
            &mut sc.xs,
        );
        if m == 0 {
            return (0.0, skipped);
        }
        let x_m = sc.xs[m - 1];
        let lb = if all_multi {
            sc.xs[m].min(x_m + local_min).max(x_m + second_min)
        } else {
            x_m
        };
        (lb, skipped)
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
    let em: Vec<Emitter> = emitters.iter().map(|&(a, t, l, d)| Emitter::new(a, t, l, d)).collect();
    emission_times_with(
        &em,
        taus,
        lams,
        dels,
        count,
        usize::MAX,
        None,
        &mut BinaryHeap::new(),
        &mut Vec::new(),
        &mut out,
    );
    out
}

/// Emission times into `out` until `count` units are reached; the emission with index `skip`
/// reaches nothing here (its time is returned) and starts `back` = (tau, lambda, delta, early)
/// as a new emitter `early` before its time (that emission may arrive sooner than the others).
#[allow(clippy::too_many_arguments)]
fn emission_times_with(
    emitters: &[Emitter],
    taus: &[f64],
    lams: &[f64],
    dels: &[f64],
    count: usize,
    skip: usize,
    back: Option<(f64, f64, f64, f64)>,
    heap: &mut BinaryHeap<Slot>,
    params: &mut Vec<Emitter>,
    out: &mut Vec<f64>,
) -> f64 {
    params.clear();
    params.extend_from_slice(emitters);
    heap.clear();
    for (i, e) in emitters.iter().enumerate() {
        heap.push(Slot {
            t: e.slot(1),
            who: i as u32,
            k: 1,
        });
    }
    out.clear();
    let mut skipped = f64::INFINITY;
    let mut index = 0;
    while out.len() < count || (skip != usize::MAX && index <= skip) {
        let Some(s) = heap.pop() else { break };
        let next = params[s.who as usize].slot(s.k + 1);
        heap.push(Slot {
            t: next,
            who: s.who,
            k: s.k + 1,
        });
        let joined = if index == skip {
            skipped = s.t;
            back.map(|(tau, lambda, delta, early)| Emitter::new(s.t - early, tau, lambda, delta))
        } else {
            out.push(s.t);
            let j = out.len() - 1;
            (j < taus.len()).then(|| Emitter::new(s.t, taus[j], lams[j], dels[j]))
        };
        index += 1;
        if let Some(e) = joined {
            params.push(e);
            heap.push(Slot {
                t: e.slot(1),
                who: (params.len() - 1) as u32,
                k: 1,
            });
        }
    }
    while out.len() < count {
        out.push(f64::INFINITY);
    }
    skipped
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
fn build_sides(model: &CostModel, all_units: &[Unit], unit_of: &[u32]) -> Vec<Side> {
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
            let (mut l_after, mut l_after_max) = (f64::INFINITY, 0.0f64);
            let mut lat_in = vec![f64::INFINITY; n];
            // Leaving the side: inside ranks -> inner (to), inner -> outside ranks (from).
            let (mut back_in_lat, mut back_out_lat) = (f64::INFINITY, f64::INFINITY);
            let (mut back_in_hi, mut back_out_hi) = (0.0f64, 0.0f64);
            for r in 0..n {
                let v = topo.rank_vertex(r as u32);
                if in_side[r] {
                    lo = lo.min(bn_from[v]);
                    in_hi = in_hi.max(bn_from[v]);
                    l_after = l_after.min(lat_from[v]);
                    l_after_max = l_after_max.max(lat_from[v]);
                    back_in_lat = back_in_lat.min(lat_to[v]);
                    back_in_hi = back_in_hi.max(bn_to[v]);
                } else {
                    lo = lo.min(bn_to[v]);
                    out_hi = out_hi.max(bn_to[v]);
                    lat_in[r] = lat_to[v];
                    back_out_lat = back_out_lat.min(lat_from[v]);
                    back_out_hi = back_out_hi.max(bn_from[v]);
                }
            }
            let hi = in_hi.min(out_hi);
            let back_hi = back_in_hi.min(back_out_hi);
            if !dir.bandwidth_bps.is_finite() || !hi.is_finite() || hi <= 0.0 || back_hi <= 0.0 {
                continue;
            }
            let rev = link.dir(!fwd);
            // Per unit: least latency through its uplink to a rank on its own side / inside.
            let mut lam = vec![f64::INFINITY; all_units.len()];
            let mut lam_gap = 0.0f64;
            let mut up_in = vec![Gate::NONE; all_units.len()];
            for (u, unit) in all_units.iter().enumerate() {
                let Some((sw, ul)) = topo.parent(unit.root) else {
                    continue;
                };
                let from_sw = latencies_from(topo, sw, true);
                let bn_out = bottlenecks_from(topo, sw, true);
                let bn_in = bottlenecks_from(topo, sw, false);
                let inside_u = |r: usize| unit_of[r] as usize == u;
                let u_in_side = in_side[unit.ranks[0] as usize];
                let (mut same, mut other) = (f64::INFINITY, f64::INFINITY);
                let (mut same_lo, mut same_hi) = (f64::INFINITY, 0.0f64);
                for r in (0..n).filter(|&r| !inside_u(r)) {
                    let v = topo.rank_vertex(r as u32);
                    let l = from_sw[v];
                    if in_side[r] == u_in_side {
                        same = same.min(l);
                        same_lo = same_lo.min(bn_out[v]);
                        same_hi = same_hi.max(bn_out[v]);
                    } else {
                        other = other.min(l);
                    }
                }
                if u_in_side && same.is_finite() {
                    let (in_lo, in_hi) = unit
                        .ranks
                        .iter()
                        .map(|&r| bn_in[topo.rank_vertex(r)])
                        .fold((f64::INFINITY, 0.0f64), |(lo, hi), b| (lo.min(b), hi.max(b)));
                    let uplink = topo.link(ul);
                    let ufwd = uplink.a == unit.root;
                    let ubw = uplink.dir(ufwd).bandwidth_bps;
                    let hi = in_hi.min(same_hi);
                    if ubw.is_finite() && hi.is_finite() && hi > 0.0 {
                        up_in[u] = Gate {
                            res: model.resource(ul, ufwd),
                            off: 0.0,
                            need: in_lo.min(same_lo) / ubw,
                            dur: d / hi,
                        };
                    }
                }
                // A unit with nothing else on its own side only ever sends across.
                lam[u] = unit.l_pre + if same.is_finite() { same } else { other };
                if !u_in_side && other.is_finite() && same.is_finite() {
                    lam_gap = lam_gap.max(same - other);
                }
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
                l_after_max,
                d_max: d / lo,
                lat_in,
                back: (dur(d, rev.bandwidth_bps), back_in_lat + back_out_lat, dur(d, back_hi)),
                lam,
                lam_gap,
                up_in,
            });
        }
    }
    sides
}

/// Lower bound for any schedule, segmented or not: every receiver r needs at least
/// `latency(root -> r) + bytes / bottleneck(root -> r)` (its data crosses its path's slowest
/// link from the root's side; relaying only adds links).
pub fn pipelined_lower_bound(topo: &Topology, root: u32, bytes: u64) -> f64 {
    let rv = topo.rank_vertex(root);
    let lat = latencies_from(topo, rv, true);
    let bw = bottlenecks_from(topo, rv, true);
    (0..topo.num_ranks() as u32)
        .filter(|&r| r != root)
        .map(|r| {
            let v = topo.rank_vertex(r);
            lat[v] + dur(bytes as f64, bw[v])
        })
        .fold(0.0, f64::max)
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

/// Top vertex of a rank's unit: walk up (in the topology's anchor rooting) until the parent is
/// a switch.
pub fn unit_root(topo: &Topology, rank: u32) -> VertexId {
    let mut v = topo.rank_vertex(rank);
    while let Some((p, _)) = topo.parent(v) {
        if topo.vertex(p).kind == VertexKind::Switch {
            break;
        }
        v = p;
    }
    v
}

/// Units of a topology (module docs) and the unit of every rank.
pub fn build_units(topo: &Topology, bytes: f64) -> (Vec<Unit>, Vec<u32>) {
    let n = topo.num_ranks();
    let mut roots: Vec<VertexId> = Vec::new();
    let mut index: std::collections::HashMap<VertexId, u32> = Default::default();
    let mut unit_of = vec![0u32; n];
    for r in 0..n as u32 {
        let v = unit_root(topo, r);
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
