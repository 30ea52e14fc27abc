//! Running insertions against a prober, round by round.
//!
//! **Batch insertion** (beyond the paper, whose insertions are sequential): many hosts search
//! the tree at once. In each round every active host asks for one measurement (to some host of
//! the branch it must explore next) and a scheduler turns those requests into disjoint pairs —
//! the committed hosts are the servers, so the number of active hosts is kept at the number of
//! committed ones and the tree roughly doubles every few rounds. A host whose search ends is
//! committed at once, so the next host's search (in the same pass) already sees it: two new
//! hosts of one unseen switch do not create two switches — the second snaps to the first's
//! branch point and, if its leaf is long, checks the first one.
//!
//! **Paper mode** reproduces seed 002's schedule for comparison: hosts are inserted one at a time
//! in a random order, every branch (host siblings included) is checked, and the next ten hosts
//! run `find_close_host` concurrently with the current insertion.

use super::locate::{locate, shortest_access, LocateParams, Step};
use super::store::Store;
use super::tree::{Branch, WorkTree};
use super::InferError;
use crate::probe::{PingSpec, Prober};
use crate::util::rng::Rng;
use std::collections::{HashMap, HashSet, VecDeque};

/// What an active host wants measured.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    Any,
    Branch(Branch),
    Host(usize),
}

/// Shared state of an inference run.
pub(crate) struct Run<'p> {
    pub prober: &'p mut dyn Prober,
    pub spec: PingSpec,
    pub tree: WorkTree,
    pub store: Store,
    pub rng: Rng,
    pub n: usize,
    /// Requests made by each host (to bound pathological searches).
    pub steps: Vec<u32>,
    /// Start each search at the committed host nearest in host order (see [`super::InferOptions`]).
    pub hint: bool,
    /// The access length the pruning assumed when each host was placed (infinite: none).
    pub placed_access: Vec<f64>,
    pub counters: Counters,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub remeasured: u64,
    pub dropped: u64,
    pub forced: u64,
    /// Hosts detached and located again because the access length shrank after their placement.
    pub relocated: u64,
}

impl<'p> Run<'p> {
    pub fn new(prober: &'p mut dyn Prober, spec: PingSpec, seed: u64) -> Self {
        let n = prober.num_hosts();
        Run {
            prober,
            spec,
            tree: WorkTree::new(n),
            store: Store::new(n),
            rng: Rng::new(seed),
            n,
            steps: vec![0; n],
            hint: false,
            placed_access: vec![f64::INFINITY; n],
            counters: Counters::default(),
        }
    }

    /// Measure one round of pairs and store the results.
    pub fn measure(&mut self, pairs: &[(usize, usize)]) -> Result<(), InferError> {
        if pairs.is_empty() {
            return Ok(());
        }
        for m in self.prober.ping_round(pairs, &self.spec)? {
            self.store.add(m);
        }
        Ok(())
    }

    /// Start the tree from the first two hosts of `order` (or one host).
    pub fn seed_tree(&mut self, order: &mut VecDeque<usize>) -> Result<(), InferError> {
        let a = order.pop_front().expect("at least one host");
        match order.pop_front() {
            None => self.tree.init_single(a),
            Some(b) => {
                if self.store.get(a, b).is_none() {
                    self.measure(&[(a, b)])?;
                }
                let d = self.store.get(a, b).unwrap().d;
                self.tree.init_pair(a, b, d);
            }
        }
        Ok(())
    }

    /// The next step of `h`'s search, dropping inconsistent measurements on the way.
    pub fn step(&mut self, h: usize, params: &LocateParams) -> Step {
        // A search that keeps asking is cut short: no sibling checks, no consistency checks.
        let relaxed;
        let p = if self.steps[h] as usize > 4 * self.tree.num_hosts_in() + 40 {
            relaxed = LocateParams {
                exhaustive: false,
                flag_delta: f64::INFINITY,
                robust: false,
                ..*params
            };
            &relaxed
        } else {
            params
        };
        loop {
            match locate(&self.tree, &self.store, h, p) {
                Step::Drop(b) => {
                    self.store.mark_bad(h, b);
                    self.counters.dropped += 1;
                }
                s => return s,
            }
        }
    }

    /// Batch insertion of `pending` (in that order) into the tree. `params` is re-derived before
    /// every round from what has been measured so far.
    pub fn insert_batch(
        &mut self,
        mut pending: VecDeque<usize>,
        params: &dyn Fn(&Store) -> LocateParams,
    ) -> Result<(), InferError> {
        let mut active: Vec<usize> = Vec::new();
        loop {
            let p = params(&self.store);
            // Hosts placed while the access length looked longer than it now does may hide a
            // switch the pruning did not look for: locate them again.
            let a0 = shortest_access(&self.tree, p.tol_floor);
            if let Some(a0) = a0.filter(|_| !p.exhaustive) {
                let suspects: Vec<usize> = self
                    .tree
                    .hosts()
                    .filter(|&h| {
                        let leaf = self.tree.leaf_len(h);
                        self.placed_access[h] > a0 + p.flag_delta
                            && ((leaf - a0).abs() > p.flag_delta || leaf <= p.tol_floor)
                    })
                    .collect();
                for h in suspects.into_iter().rev() {
                    if self.tree.detach(h) {
                        self.counters.relocated += 1;
                        pending.push_front(h);
                    }
                }
            }
            // Evaluate every active host; commit finished searches immediately so the hosts
            // after them see the grown tree.
            let mut wants: Vec<(usize, Want)> = Vec::new();
            let mut still = Vec::with_capacity(active.len());
            for &h in &active {
                match self.step(h, &p) {
                    Step::Place { at, leaf } => {
                        if self.steps[h] as usize > 4 * self.tree.num_hosts_in() + 40 {
                            self.counters.forced += 1;
                        }
                        if std::env::var("TC_TRACE").is_ok() {
                            eprintln!("commit {h} at {at:?} leaf {leaf:e} meas {:?}", self.store.partners(h).iter().map(|&b| (b, self.store.get(h,b).unwrap().d)).collect::<Vec<_>>());
                        }
                        self.tree.attach(at, h, leaf);
                        self.placed_access[h] = a0.unwrap_or(f64::INFINITY);
                    }
                    Step::Start => {
                        wants.push((h, Want::Any));
                        still.push(h);
                    }
                    Step::Branch(b) => {
                        wants.push((h, Want::Branch(b)));
                        still.push(h);
                    }
                    Step::Host(x) => {
                        wants.push((h, Want::Host(x)));
                        still.push(h);
                    }
                    Step::Remeasure(x) => {
                        self.counters.remeasured += 1;
                        wants.push((h, Want::Host(x)));
                        still.push(h);
                    }
                    Step::Drop(_) => unreachable!("drops are handled in step()"),
                }
            }
            active = still;
            let capacity = self.tree.num_hosts_in().max(1);
            while active.len() < capacity {
                let Some(h) = pending.pop_front() else { break };
                // A host re-entering with measurements may already know where it goes.
                match self.step(h, &p) {
                    Step::Place { at, leaf } => {
                        self.tree.attach(at, h, leaf);
                        self.placed_access[h] = a0.unwrap_or(f64::INFINITY);
                        continue;
                    }
                    Step::Start => wants.push((h, Want::Any)),
                    Step::Branch(b) => wants.push((h, Want::Branch(b))),
                    Step::Host(x) | Step::Remeasure(x) => wants.push((h, Want::Host(x))),
                    Step::Drop(_) => unreachable!(),
                }
                active.push(h);
            }
            if active.is_empty() {
                return Ok(());
            }
            let pairs = self.schedule(&wants);
            if pairs.is_empty() {
                return Err(InferError::Internal(format!(
                    "no measurement could be scheduled for {} waiting hosts",
                    active.len()
                )));
            }
            for &(h, _) in &pairs {
                self.steps[h] += 1;
            }
            self.measure(&pairs)?;
        }
    }

    /// Turn requests into disjoint (requester, server) pairs: the most constrained first.
    fn schedule(&mut self, wants: &[(usize, Want)]) -> Vec<(usize, usize)> {
        let mut busy: HashSet<usize> = HashSet::new();
        let mut pairs = Vec::new();
        let rank = |w: &Want| match w {
            Want::Host(_) => 0,
            Want::Branch(_) => 1,
            Want::Any => 2,
        };
        let mut order: Vec<usize> = (0..wants.len()).collect();
        order.sort_by_key(|&i| rank(&wants[i].1));
        let committed: Vec<usize> = self.tree.hosts().collect(); // sorted
        let mut any_pool = committed.clone();
        self.rng.shuffle(&mut any_pool);
        let mut any_next = 0usize;
        for i in order {
            let (h, w) = wants[i];
            if busy.contains(&h) {
                continue;
            }
            let server = match w {
                Want::Host(x) => Some(x).filter(|x| !busy.contains(x)),
                Want::Branch(b) => self
                    .tree
                    // A commit earlier in this pass may have split the link at -> via.
                    .nearest_hosts(Branch { at: b.at, via: self.tree.toward(b.at, b.via) }, 1, |x| {
                        !busy.contains(&x) && self.store.get(h, x).is_none()
                    })
                    .first()
                    .map(|&(_, x)| x),
                Want::Any if self.hint => {
                    // The committed host nearest in host order: MPI hosts usually come in
                    // hostfile order, which follows racks and switches.
                    let at = committed.partition_point(|&x| x < h);
                    let (mut lo, mut hi) = (at, at);
                    let mut found = None;
                    while found.is_none() && (lo > 0 || hi < committed.len()) {
                        let take_hi = hi < committed.len() && (lo == 0 || committed[hi] - h <= h - committed[lo - 1]);
                        let x = if take_hi {
                            hi += 1;
                            committed[hi - 1]
                        } else {
                            lo -= 1;
                            committed[lo]
                        };
                        if !busy.contains(&x) && self.store.get(h, x).is_none() {
                            found = Some(x);
                        }
                    }
                    found
                }
                Want::Any => {
                    let mut found = None;
                    while any_next < any_pool.len() {
                        let x = any_pool[any_next];
                        any_next += 1;
                        if !busy.contains(&x) && self.store.get(h, x).is_none() {
                            found = Some(x);
                            break;
                        }
                    }
                    found
                }
            };
            if let Some(x) = server {
                busy.insert(h);
                busy.insert(x);
                pairs.push((h, x));
            }
        }
        pairs
    }

    /// Seed 002's sequential insertion with `find_close_host` pipelined ten hosts ahead.
    pub fn insert_paper(&mut self, mut pending: VecDeque<usize>, params: &LocateParams) -> Result<(), InferError> {
        const AHEAD: usize = 10;
        // find_close_host state of the hosts waiting: remaining candidates M.
        let mut close: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut window: VecDeque<usize> = VecDeque::new();
        loop {
            while window.len() < AHEAD + 1 {
                let Some(h) = pending.pop_front() else { break };
                let mut m: Vec<usize> = self.tree.hosts().collect();
                self.rng.shuffle(&mut m);
                close.insert(h, m);
                window.push_back(h);
            }
            let Some(&head) = window.front() else { return Ok(()) };
            let mut busy: HashSet<usize> = HashSet::new();
            let mut pairs = Vec::new();
            // The head inserts itself once its find_close_host is done.
            if close[&head].is_empty() {
                match self.step(head, params) {
                    Step::Place { at, leaf } => {
                        self.tree.attach(at, head, leaf);
                        window.pop_front();
                        close.remove(&head);
                        continue;
                    }
                    Step::Start => unreachable!("find_close_host measured at least one host"),
                    Step::Branch(b) => {
                        let x = self.tree.nearest_hosts(b, 1, |x| self.store.get(head, x).is_none());
                        pairs.push((head, x.first().map_or(b.via, |&(_, x)| x)));
                    }
                    Step::Host(x) | Step::Remeasure(x) => pairs.push((head, x)),
                    Step::Drop(_) => unreachable!(),
                }
                busy.extend([pairs[0].0, pairs[0].1]);
            }
            // The others (and the head, if still searching) continue find_close_host.
            for &h in &window {
                if busy.contains(&h) {
                    continue;
                }
                let m = close.get_mut(&h).unwrap();
                if let Some(pos) = m.iter().position(|j| !busy.contains(j)) {
                    let j = m.remove(pos);
                    busy.extend([h, j]);
                    pairs.push((h, j));
                }
            }
            self.measure(&pairs)?;
            // find_close_host's filter: drop candidates surely farther (> 3x) or no closer (< x/3).
            for &(h, j) in &pairs {
                let Some(m) = close.get_mut(&h) else { continue };
                let (Some(x), Some(vj)) = (self.store.get(h, j), self.tree.vertex_of(j)) else { continue };
                let t = &self.tree;
                m.retain(|&k| {
                    let y = t.dist(t.vertex_of(k).unwrap(), vj);
                    y <= 3.0 * x.d && y >= x.d / 3.0
                });
            }
        }
    }
}
