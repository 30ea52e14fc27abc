//! Rate solving for [`FlowSim`]: local progressive filling, the max-min optimality check that
//! widens the re-filled set until the allocation is exact, and applying new rates.

use super::*;

impl FlowSim {
    pub(super) fn resolve(&mut self) {
        self.dirty = false;
        self.gen += 1;
        let gen = self.gen;
        self.w.clear();
        for i in 0..self.seeds.len() {
            let f = self.seeds[i];
            let fl = &mut self.flows[f as usize];
            if fl.live && fl.mark != gen {
                fl.mark = gen;
                self.w.push(f);
            }
        }
        self.seeds.clear();
        for i in 0..self.loosened.len() {
            let r = self.loosened[i];
            for &(g, _) in &self.res[r as usize].present {
                let gl = &mut self.flows[g as usize];
                if gl.bn == r && gl.mark != gen {
                    gl.mark = gen;
                    self.w.push(g);
                }
            }
        }
        self.loosened.clear();
        if self.full && !self.w.is_empty() {
            self.add_all_live();
        }
        if self.w.is_empty() {
            return;
        }
        self.stats.resolves += 1;
        let mut expansions = 0;
        loop {
            self.solve_w();
            if !self.expand_w() {
                break;
            }
            expansions += 1;
            if expansions >= MAX_EXPANSIONS {
                self.stats.full_resolves += 1;
                self.add_all_live();
                self.solve_w();
                break;
            }
        }
        self.stats.refilled += self.w.len() as u64;
        self.apply_w();
        if self.audit {
            self.audit_allocation();
        }
    }

    fn add_all_live(&mut self) {
        let gen = self.gen;
        for f in 0..self.flows.len() {
            let fl = &mut self.flows[f];
            if fl.live && fl.mark != gen {
                fl.mark = gen;
                self.w.push(f as u32);
            }
        }
    }

    /// Progressive filling of the flows in `w`, the other flows' rates held fixed.
    ///
    /// One pass over the W flows' hops maps each incidence to a dense local link index
    /// (`inc`); every later pass works on those arrays only, so the engine's large per-link
    /// records are touched once per incidence.
    fn solve_w(&mut self) {
        self.lgen += 1;
        let lgen = self.lgen;
        self.locals.clear();
        self.inc.clear();
        self.w_off.clear();
        // Local links, how many W flows cross each, and the load the other flows put on it
        // (the link's load minus the W flows' current rates: no scan of the link's flows).
        for (wi, &f) in self.w.iter().enumerate() {
            self.w_off.push(self.inc.len() as u32);
            let fl = &mut self.flows[f as usize];
            fl.wpos = wi as u32;
            let old = if fl.rate.is_finite() { fl.rate } else { 0.0 };
            for h in &fl.hops[..fl.arrived as usize] {
                let r = &mut self.res[h.res as usize];
                if r.lmark != lgen {
                    r.lmark = lgen;
                    r.local = self.locals.len() as u32;
                    self.locals.push(LocalLink {
                        res: h.res,
                        cap: r.cap,
                        fixed: r.load,
                        ..LocalLink::default()
                    });
                }
                let j = r.local;
                let l = &mut self.locals[j as usize];
                l.cnt += 1;
                l.fixed -= old;
                self.inc.push(j);
            }
        }
        self.w_off.push(self.inc.len() as u32);
        self.stats.fills += 1;
        if self.w.len() == 1 {
            // One flow: its rate is its cap or the tightest residual capacity on its links
            // (the same choice progressive filling makes, ties going to the cap, then to the
            // first link). The common case of a new flow joining idle links.
            let f = self.w[0] as usize;
            let (mut x, mut bn) = (self.flows[f].cap, BN_CAP);
            if x.is_infinite() {
                bn = NONE;
            }
            for l in self.locals.iter_mut() {
                l.avail = (l.cap - l.fixed).max(0.0);
                if l.cap.is_finite() && l.avail < x {
                    (x, bn) = (l.avail, l.res);
                }
            }
            self.stats.fill_incidences += self.inc.len() as u64;
            let fl = &mut self.flows[f];
            fl.x_new = x;
            fl.bn_new = bn;
            fl.frozen = true;
            self.summarize();
            return;
        }
        // CSR adjacency local link -> W positions.
        self.adj_off.clear();
        let mut acc = 0u32;
        for l in self.locals.iter_mut() {
            self.adj_off.push(acc);
            acc += l.cnt;
            l.unfrozen = 0; // fill cursor
        }
        self.adj_off.push(acc);
        self.stats.fill_incidences += acc as u64;
        self.adj.clear();
        self.adj.resize(acc as usize, 0);
        for wi in 0..self.w.len() {
            for k in self.w_off[wi]..self.w_off[wi + 1] {
                let j = self.inc[k as usize] as usize;
                let at = self.adj_off[j] + self.locals[j].unfrozen;
                self.adj[at as usize] = wi as u32;
                self.locals[j].unfrozen += 1;
            }
        }
        let mut start = Vec::new();
        std::mem::swap(&mut start, &mut self.heap_buf);
        start.clear();
        for (j, l) in self.locals.iter_mut().enumerate() {
            l.avail = (l.cap - l.fixed).max(0.0);
            l.unfrozen = l.cnt;
            l.frozen_sum = 0.0;
            l.touch = 0;
            if l.cap.is_finite() {
                start.push(Reverse((Level(l.avail / l.cnt as f64), j as u32)));
            }
        }
        // Heapify in O(links) instead of pushing one by one.
        let mut heap = BinaryHeap::from(start);
        // Per-flow caps, merged in ascending order with the link levels.
        self.caps.clear();
        for (wi, &f) in self.w.iter().enumerate() {
            let fl = &mut self.flows[f as usize];
            fl.frozen = false;
            fl.x_new = f64::INFINITY;
            fl.bn_new = NONE;
            if fl.cap.is_finite() {
                self.caps.push((Level(fl.cap), wi as u32));
            }
        }
        self.caps.sort_unstable();
        let mut ci = 0;
        let mut round = 0u32;
        loop {
            // Next valid link level (stale entries: a fresher one was pushed since).
            let link = loop {
                match heap.peek() {
                    None => break None,
                    Some(&Reverse((Level(level), j))) => {
                        let l = &self.locals[j as usize];
                        if l.unfrozen > 0 && (l.avail - l.frozen_sum).max(0.0) / l.unfrozen as f64 == level {
                            break Some((level, j));
                        }
                        heap.pop();
                    }
                }
            };
            let cap = self.caps.get(ci).map(|&(Level(c), wi)| (c, wi));
            round += 1;
            match (link, cap) {
                (None, None) => break,
                (_, Some((c, wi))) if !matches!(link, Some((level, _)) if c > level) => {
                    ci += 1;
                    self.freeze(wi, c, BN_CAP, round);
                }
                (Some((level, j)), _) => {
                    heap.pop();
                    let (lo, hi) = (self.adj_off[j as usize], self.adj_off[j as usize + 1]);
                    let res = self.locals[j as usize].res;
                    for k in lo..hi {
                        let wi = self.adj[k as usize];
                        self.freeze(wi, level, res, round);
                    }
                }
                (None, Some(_)) => unreachable!("handled by the cap arm"),
            }
            // One fresh heap entry per link whose level moved in this round.
            for &j in &self.touched {
                let l = &self.locals[j as usize];
                if l.unfrozen > 0 {
                    let share = (l.avail - l.frozen_sum).max(0.0) / l.unfrozen as f64;
                    heap.push(Reverse((Level(share), j)));
                }
            }
            self.touched.clear();
        }
        self.heap_buf = heap.into_vec();
        self.summarize();
    }

    /// Per local link: the load after the fill, the largest W rate, and the smallest rate of
    /// a W flow bottlenecked there (for the optimality check).
    fn summarize(&mut self) {
        for l in self.locals.iter_mut() {
            l.load_new = l.fixed;
            l.max_w = 0.0;
            l.min_w_bn = f64::INFINITY;
        }
        for (wi, &f) in self.w.iter().enumerate() {
            let fl = &self.flows[f as usize];
            for k in self.w_off[wi]..self.w_off[wi + 1] {
                let l = &mut self.locals[self.inc[k as usize] as usize];
                if fl.x_new.is_finite() {
                    l.load_new += fl.x_new;
                }
                l.max_w = l.max_w.max(fl.x_new);
                if fl.bn_new == l.res {
                    l.min_w_bn = l.min_w_bn.min(fl.x_new);
                }
            }
        }
    }

    /// Freeze the W flow at position `wi` at `level` (bottlenecked at `bn`), if not yet frozen.
    fn freeze(&mut self, wi: u32, level: f64, bn: u32, round: u32) {
        let fl = &mut self.flows[self.w[wi as usize] as usize];
        if fl.frozen {
            return;
        }
        fl.frozen = true;
        fl.x_new = level;
        fl.bn_new = bn;
        for k in self.w_off[wi as usize]..self.w_off[wi as usize + 1] {
            let j = self.inc[k as usize];
            let l = &mut self.locals[j as usize];
            l.frozen_sum += level;
            l.unfrozen -= 1;
            if l.touch != round && l.cap.is_finite() {
                l.touch = round;
                self.touched.push(j);
            }
        }
    }

    /// Max-min optimality on every link the W flows touch: each fixed flow bottlenecked there
    /// must still be on a full link with the largest rate, and no fixed flow may exceed a W flow
    /// bottlenecked there. Violators join W. Returns whether W grew. Links that were not full
    /// before and are not full now cannot hold a violation (only full links are bottlenecks),
    /// so their flows are not scanned.
    fn expand_w(&mut self) -> bool {
        let gen = self.gen;
        let mut grew = false;
        for j in 0..self.locals.len() {
            let l = self.locals[j];
            let r = &self.res[l.res as usize];
            if !r.cap.is_finite() {
                continue;
            }
            let full_now = l.load_new >= r.cap * (1.0 - EPS);
            let full_before = r.load >= r.cap * (1.0 - EPS);
            if !full_now && !full_before {
                continue;
            }
            for &(g, _) in &r.present {
                let gl = &mut self.flows[g as usize];
                if gl.mark == gen {
                    continue;
                }
                let starved = gl.bn == l.res && (!full_now || gl.rate < l.max_w * (1.0 - EPS));
                let greedy = gl.rate > l.min_w_bn * (1.0 + EPS);
                if starved || greedy {
                    gl.mark = gen;
                    self.w.push(g);
                    grew = true;
                }
            }
        }
        grew
    }

    fn apply_w(&mut self) {
        let now = self.now;
        for i in 0..self.w.len() {
            let f = self.w[i];
            let fl = &mut self.flows[f as usize];
            fl.bn = fl.bn_new;
            if fl.x_new == fl.rate {
                continue;
            }
            if fl.rate > 0.0 && fl.rate.is_finite() {
                fl.left = (fl.left - fl.rate * (now - fl.t_upd)).max(0.0);
            }
            fl.t_upd = now;
            fl.rate = fl.x_new;
            let done = if fl.rate.is_infinite() || fl.left <= 0.0 {
                Some(now)
            } else if fl.rate > 0.0 {
                Some(now + fl.left / fl.rate)
            } else {
                None
            };
            match done {
                Some(t) => self.done.set(f, t),
                None => self.done.remove(f),
            }
        }
        for j in 0..self.locals.len() {
            let l = self.locals[j];
            self.res[l.res as usize].settle(now, l.load_new);
        }
    }

    /// Compare the live allocation with the reference solver and check capacities.
    fn audit_allocation(&self) {
        let live: Vec<usize> = (0..self.flows.len()).filter(|&f| self.flows[f].live).collect();
        let caps: Vec<f64> = self.res.iter().map(|r| r.cap).collect();
        let flows: Vec<(f64, Vec<usize>)> = live
            .iter()
            .map(|&f| {
                let fl = &self.flows[f];
                (
                    fl.cap,
                    fl.hops[..fl.arrived as usize].iter().map(|h| h.res as usize).collect(),
                )
            })
            .collect();
        let want = crate::sim::maxmin::reference(&caps, &flows);
        for (i, &f) in live.iter().enumerate() {
            let got = self.flows[f].rate;
            let ok = (got == want[i]) || (got - want[i]).abs() <= 1e-6 * want[i].abs().max(1e-300);
            assert!(ok, "audit: flow {f} rate {got} but max-min gives {}", want[i]);
        }
        for (k, r) in self.res.iter().enumerate() {
            let load: f64 = r.present.iter().map(|&(g, _)| self.flows[g as usize].rate).sum();
            if load.is_finite() {
                assert!(
                    (load - r.load).abs() <= 1e-9 * r.cap.min(1e300).max(load),
                    "audit: resource {k} books load {} but its flows carry {load}",
                    r.load
                );
            }
            assert!(
                load <= r.cap * (1.0 + 1e-9),
                "audit: resource {k} carries {load} > capacity {}",
                r.cap
            );
        }
    }
}
