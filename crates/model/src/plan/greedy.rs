//! Greedy schedules under the [Hourai2004] model: earliest completion first, with look-ahead.
//!
//! Each step adds the transfer (holder -> rank without the data) that completes earliest when
//! placed at its earliest feasible time, exactly as the optimal search would place it. Two
//! reductions keep a step cheap at thousands of ranks:
//! * receivers: ranks without the data in the same unit (a host's ranks, see
//!   [`super::bound`]) whose access links have equal parameters are interchangeable — nothing
//!   has touched their links yet — so one representative (the lowest rank) per group is tried;
//! * senders: every holder while there are at most [`ALL_SENDERS_UP_TO`] ranks, else the
//!   [`SENDER_POOL`] holders able to start earliest (ready, and their own link free of their
//!   previous sends) plus the earliest holders inside the receiver's own unit.
//!
//! Look-ahead (the pilot method): the best `lookahead` candidates of a step are each completed
//! greedily, and the step commits the one whose completed schedule finishes first.

use super::bound::unit_root;
use super::cost::{Candidate, CostModel, Placement, Route, Timeline};
use crate::topology::Topology;
use crate::util::fasthash::FastMap;

/// Up to this many ranks every holder is tried as a sender.
pub const ALL_SENDERS_UP_TO: usize = 256;
/// Above that, the number of earliest-available holders tried per step.
pub const SENDER_POOL: usize = 8;

/// Options of the greedy planner.
#[derive(Clone, Debug)]
pub struct GreedyOptions {
    /// Number of best candidates completed greedily before each commitment (0 = plain greedy).
    pub lookahead: usize,
    /// Order candidates by completion (true) or by start time, then completion (false).
    pub by_completion: bool,
}

impl Default for GreedyOptions {
    fn default() -> Self {
        GreedyOptions {
            lookahead: 0,
            by_completion: true,
        }
    }
}

/// Static receiver groups among the participating ranks, in local indices (positions in the
/// participant list): (unit, access-link parameters) -> local ranks ascending.
struct Groups {
    group_of: Vec<u32>,
    members: Vec<Vec<u32>>,
    unit_of: Vec<u32>,
    unit_members: Vec<Vec<u32>>,
}

fn groups(topo: &Topology, ranks: &[u32]) -> Groups {
    let m = ranks.len();
    let mut unit_index: FastMap<usize, u32> = FastMap::default();
    let mut key_to_group: FastMap<(u32, u64, u64, u64, u64, u8), u32> = FastMap::default();
    let mut group_of = vec![0u32; m];
    let mut unit_of = vec![0u32; m];
    let mut members: Vec<Vec<u32>> = Vec::new();
    let mut unit_members: Vec<Vec<u32>> = Vec::new();
    for (i, &r) in ranks.iter().enumerate() {
        let next_unit = unit_index.len() as u32;
        let u = *unit_index.entry(unit_root(topo, r)).or_insert(next_unit);
        if u == next_unit {
            unit_members.push(Vec::new());
        }
        unit_members[u as usize].push(i as u32);
        unit_of[i] = u;
        let v = topo.rank_vertex(r);
        let (ab, ba, dup) = match topo.neighbors(v).first() {
            Some(&(_, l)) => {
                let link = topo.link(l);
                let fwd = link.a == v; // rank -> parent direction
                (link.dir(fwd), link.dir(!fwd), link.duplex as u8)
            }
            None => (
                crate::topology::LinkDir::new(0.0, 0.0),
                crate::topology::LinkDir::new(0.0, 0.0),
                0,
            ),
        };
        let key = (
            u,
            ab.latency_s.to_bits(),
            ab.bandwidth_bps.to_bits(),
            ba.latency_s.to_bits(),
            ba.bandwidth_bps.to_bits(),
            dup,
        );
        let next = members.len() as u32;
        let g = *key_to_group.entry(key).or_insert(next);
        if g == next {
            members.push(Vec::new());
        }
        members[g as usize].push(i as u32);
        group_of[i] = g;
    }
    Groups {
        group_of,
        members,
        unit_of,
        unit_members,
    }
}

/// The greedy works in a local index space: rank i is `ranks[i]`; for small participant sets
/// the routes are cached and their links renumbered compactly, so states (cloned by the
/// look-ahead) only hold the links these ranks use.
struct Greedy<'m, 't> {
    model: &'m CostModel<'t>,
    g: Groups,
    ranks: Vec<u32>,
    /// Route cache (`m x m`, local link numbering) for small sets.
    routes: Option<Vec<Route>>,
    nres: usize,
    opts: GreedyOptions,
}

/// A schedule under construction: the placement plus the greedy's bookkeeping.
#[derive(Clone)]
struct State {
    pl: Placement,
    holders: Vec<u32>,
    /// Per local rank: when its last send leaves its own link (a hint for the sender pool).
    free_at: Vec<f64>,
    /// Per receiver group: index of its next rank without data.
    next: Vec<usize>,
    informed: usize,
}

impl<'m, 't> Greedy<'m, 't> {
    fn new(model: &'m CostModel<'t>, ranks: &[u32], opts: &GreedyOptions) -> Self {
        let mut ranks = ranks.to_vec();
        ranks.sort_unstable();
        ranks.dedup();
        let m = ranks.len();
        let mut nres = model.num_resources();
        let routes = (m <= ALL_SENDERS_UP_TO).then(|| {
            let mut local: FastMap<u32, u32> = FastMap::default();
            let mut v = Vec::with_capacity(m * m);
            for &s in &ranks {
                for &r in &ranks {
                    let mut rt = model.route(s, r);
                    for h in &mut rt.hops {
                        let next = local.len() as u32;
                        h.res = *local.entry(h.res).or_insert(next);
                    }
                    v.push(rt);
                }
            }
            nres = local.len();
            v
        });
        Greedy {
            model,
            g: groups(model.topology(), &ranks),
            ranks,
            routes,
            nres,
            opts: opts.clone(),
        }
    }

    /// Route between local ranks.
    fn route(&self, s: u32, r: u32) -> std::borrow::Cow<'_, Route> {
        match &self.routes {
            Some(rt) => std::borrow::Cow::Borrowed(&rt[s as usize * self.ranks.len() + r as usize]),
            None => std::borrow::Cow::Owned(self.model.route(self.ranks[s as usize], self.ranks[r as usize])),
        }
    }

    /// Candidates of the current state, best first (local ranks).
    fn candidates(&self, st: &State) -> Vec<Candidate> {
        let pl = &st.pl;
        let many = self.ranks.len() > ALL_SENDERS_UP_TO;
        let avail = |h: u32| pl.ready[h as usize].max(pl.last_start).max(st.free_at[h as usize]);
        let pool: Vec<u32> = if !many {
            st.holders.clone()
        } else {
            let mut hs = st.holders.clone();
            hs.sort_by(|&a, &b| avail(a).total_cmp(&avail(b)).then(a.cmp(&b)));
            hs.truncate(SENDER_POOL);
            hs
        };
        let mut out = Vec::new();
        for (gi, m) in self.g.members.iter().enumerate() {
            let Some(&r) = m.get(st.next[gi]) else { continue };
            let mut senders = pool.clone();
            if many {
                // Holders of the receiver's unit (local transfers are the cheap ones).
                let u = self.g.unit_of[r as usize] as usize;
                let mut local: Vec<u32> = self.g.unit_members[u].iter().copied().filter(|&h| pl.has(h)).collect();
                local.sort_by(|&a, &b| avail(a).total_cmp(&avail(b)).then(a.cmp(&b)));
                local.truncate(SENDER_POOL);
                senders.extend(local);
                senders.sort_unstable();
                senders.dedup();
            }
            for s in senders {
                let route = self.route(s, r);
                let start = pl.start_time(&route, s);
                out.push(Candidate {
                    s,
                    r,
                    start,
                    end: start + route.time(),
                    lb: 0.0,
                });
            }
        }
        if self.opts.by_completion {
            out.sort_by(Candidate::order);
        } else {
            out.sort_by(|a, b| {
                a.start
                    .total_cmp(&b.start)
                    .then(a.end.total_cmp(&b.end))
                    .then(a.s.cmp(&b.s))
                    .then(a.r.cmp(&b.r))
            });
        }
        out
    }

    fn commit(&self, st: &mut State, c: Candidate) -> super::cost::Transfer {
        let route = self.route(c.s, c.r);
        let t = st.pl.commit(&route, c.s, c.r, c.start);
        if let Some(h) = route.hops.first() {
            let f = &mut st.free_at[c.s as usize];
            *f = f.max(c.start + h.offset + route.dur);
        }
        st.holders.push(c.r);
        st.informed += 1;
        let g = self.g.group_of[c.r as usize] as usize;
        let m = &self.g.members[g];
        while st.next[g] < m.len() && st.pl.has(m[st.next[g]]) {
            st.next[g] += 1;
        }
        t
    }

    /// Complete a state greedily without look-ahead; returns the makespan.
    fn rollout(&self, mut st: State) -> f64 {
        while st.informed < self.ranks.len() {
            let c = self.candidates(&st)[0];
            self.commit(&mut st, c);
        }
        st.pl.makespan
    }

    fn run(&self, root: u32) -> Timeline {
        let m = self.ranks.len();
        let lroot = self.ranks.binary_search(&root).expect("the root participates") as u32;
        let mut st = State {
            pl: Placement::sized(self.nres, m, lroot),
            holders: vec![lroot],
            free_at: vec![0.0; m],
            next: vec![0; self.g.members.len()],
            informed: 1,
        };
        for (g, mem) in self.g.members.iter().enumerate() {
            while st.next[g] < mem.len() && st.pl.has(mem[st.next[g]]) {
                st.next[g] += 1;
            }
        }
        let mut transfers = Vec::with_capacity(m.saturating_sub(1));
        while st.informed < m {
            let cands = self.candidates(&st);
            let chosen = if self.opts.lookahead > 1 && cands.len() > 1 {
                let mut best = (f64::INFINITY, 0usize);
                for (i, &c) in cands.iter().take(self.opts.lookahead).enumerate() {
                    let mut s2 = st.clone();
                    self.commit(&mut s2, c);
                    let ms = self.rollout(s2);
                    if ms < best.0 {
                        best = (ms, i);
                    }
                }
                cands[best.1]
            } else {
                cands[0]
            };
            let mut t = self.commit(&mut st, chosen);
            t.src = self.ranks[t.src as usize];
            t.dst = self.ranks[t.dst as usize];
            transfers.push(t);
        }
        Timeline {
            root,
            transfers,
            makespan: st.pl.makespan,
        }
    }
}

/// Greedy schedule from `root` over the whole communicator.
pub fn greedy_timeline(model: &CostModel, root: u32, opts: &GreedyOptions) -> Timeline {
    let all: Vec<u32> = (0..model.num_ranks() as u32).collect();
    greedy_subset(model, &all, root, opts)
}

/// Greedy schedule from `root` among `ranks` only (which must contain `root`); other ranks
/// neither send nor receive, but their links are modelled as usual.
pub fn greedy_subset(model: &CostModel, ranks: &[u32], root: u32, opts: &GreedyOptions) -> Timeline {
    Greedy::new(model, ranks, opts).run(root)
}

/// Receivers served in the given order, each by the holder that completes it earliest (list
/// scheduling): for groups whose members carry unequal work downstream, the heaviest first.
/// A holder `s` may serve receiver `r` only if `may_send(s, r)` (the root always may).
pub fn greedy_ordered(model: &CostModel, root: u32, order: &[u32], may_send: impl Fn(u32, u32) -> bool) -> Timeline {
    let mut ranks = order.to_vec();
    ranks.push(root);
    let g = Greedy::new(model, &ranks, &GreedyOptions::default());
    let local = |r: u32| g.ranks.binary_search(&r).expect("a participant") as u32;
    let lroot = local(root);
    let mut st = State {
        pl: Placement::sized(g.nres, g.ranks.len(), lroot),
        holders: vec![lroot],
        free_at: vec![0.0; g.ranks.len()],
        next: vec![0; g.g.members.len()],
        informed: 1,
    };
    let mut transfers = Vec::with_capacity(order.len());
    for &r in order {
        let lr = local(r);
        let best = st
            .holders
            .iter()
            .filter(|&&s| s == lroot || may_send(g.ranks[s as usize], r))
            .map(|&s| {
                let route = g.route(s, lr);
                let start = st.pl.start_time(&route, s);
                Candidate {
                    s,
                    r: lr,
                    start,
                    end: start + route.time(),
                    lb: 0.0,
                }
            })
            .min_by(Candidate::order)
            .expect("the root holds the data");
        let mut t = g.commit(&mut st, best);
        t.src = g.ranks[t.src as usize];
        t.dst = g.ranks[t.dst as usize];
        transfers.push(t);
    }
    Timeline {
        root,
        transfers,
        makespan: st.pl.makespan,
    }
}

/// The plain greedy (earliest completion first): the incumbent the optimal search starts from
/// (its own first, bound-guided dives usually improve on it, so a cheap one is best).
pub fn best_heuristic_timeline(model: &CostModel, root: u32) -> Timeline {
    greedy_timeline(model, root, &GreedyOptions::default())
}

/// The best of the greedy variants, adding a `lookahead`-wide pilot variant when > 1.
pub fn best_of(model: &CostModel, root: u32, lookahead: usize) -> Timeline {
    let mut variants = vec![
        GreedyOptions {
            lookahead: 0,
            by_completion: true,
        },
        GreedyOptions {
            lookahead: 0,
            by_completion: false,
        },
    ];
    if lookahead > 1 {
        variants.push(GreedyOptions {
            lookahead,
            by_completion: true,
        });
    }
    let mut best: Option<Timeline> = None;
    for o in &variants {
        let t = greedy_timeline(model, root, o);
        if best.as_ref().is_none_or(|b| t.makespan < b.makespan) {
            best = Some(t);
        }
    }
    best.expect("at least one variant")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cost::evaluate;
    use crate::topology::gen::{Star, TwoClusters};

    #[test]
    fn greedy_schedules_are_complete_and_replayable() {
        for t in [
            Star::paper_star(9).build().unwrap(),
            Star::paper_dual_cpu(5).build().unwrap(),
            TwoClusters::paper_nonuniform(3).build().unwrap(),
        ] {
            let m = CostModel::new(&t, 1 << 20);
            for root in [0, 3] {
                for la in [0, 3] {
                    let tl = greedy_timeline(
                        &m,
                        root,
                        &GreedyOptions {
                            lookahead: la,
                            by_completion: true,
                        },
                    );
                    assert_eq!(tl.transfers.len(), t.num_ranks() - 1);
                    let seq: Vec<(u32, u32)> = tl.transfers.iter().map(|x| (x.src, x.dst)).collect();
                    let re = evaluate(&m, root, &seq).unwrap();
                    assert_eq!(re.makespan, tl.makespan);
                }
            }
        }
    }

    #[test]
    fn ordered_serves_in_order() {
        let t = Star::paper_star(6).build().unwrap();
        let m = CostModel::new(&t, 1 << 20);
        let tl = greedy_ordered(&m, 2, &[5, 0, 4, 1, 3], |_, _| true);
        let dsts: Vec<u32> = tl.transfers.iter().map(|x| x.dst).collect();
        assert_eq!(dsts, vec![5, 0, 4, 1, 3]);
        // Doubling: 2 -> 5, then 2 and 5 serve 0 and 4, then 1 and 3.
        assert_eq!(tl.transfers[1].src, 2);
        assert_eq!(tl.transfers[2].src, 5);
        // With 5 barred from forwarding, the root serves 0 too.
        let tl = greedy_ordered(&m, 2, &[5, 0, 4], |s, _| s != 5);
        assert!(tl.transfers.iter().all(|x| x.src != 5));
    }

    #[test]
    fn star_greedy_is_doubling() {
        let t = Star::paper_star(16).build().unwrap();
        let m = CostModel::new(&t, 1 << 20);
        let tl = greedy_timeline(&m, 0, &GreedyOptions::default());
        let round = 52e-6 + (1u64 << 20) as f64 / 125e6;
        assert!((tl.makespan - 4.0 * round).abs() < 1e-9, "{}", tl.makespan);
    }
}
