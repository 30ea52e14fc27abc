//! Running insertions against a prober, round by round.
//!
//! **Parallel insertion** (beyond [Shirai2007], whose insertions are sequential): many hosts search
//! a tree at once. In each round every searching host asks for one measurement (to some host of
//! the branch it must explore next) and a scheduler turns those requests into disjoint pairs —
//! committed hosts are the servers, so a tree lets as many hosts search as it holds and roughly
//! doubles every few rounds. A host whose search ends is committed at once, so the next host's
//! search (in the same pass) already sees it: two new hosts of one unseen switch do not create
//! two switches — the second snaps to the first's branch point or, if its leaf is long, checks
//! the first one.
//!
//! Several trees ([`Builder`]s) grow in the same rounds (their host sets are disjoint): the
//! blocks of hosts close in host order, and a skeleton of two hosts per block that absorbs the
//! blocks' hosts as they are committed ([`Run::grow_feeding`]). A host measured against a host
//! still searching waits for it rather than searching from scratch: once that host is committed,
//! the measurement is free.
//!
//! **Paper mode** reproduces the schedule of [Shirai2007] for comparison: hosts are inserted one at a time
//! in a random order, every branch (host siblings included) is checked, and the next ten hosts
//! run `find_close_host` concurrently with the current insertion.

use super::lengths::refit;
use super::locate::{self, locate, LocateParams, Step};
use super::store::Store;
use super::tree::{Branch, Point, WorkTree};
use super::InferError;
use crate::probe::{PairMeasurement, PingSpec, Prober};
use crate::util::rng::Rng;
use std::collections::{HashMap, HashSet, VecDeque};

/// What an active host wants measured.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    Any,
    Branch(Branch, f64),
    Host(usize),
    Around(usize),
}

/// Rounds a request may go unserved before it is scheduled ahead of all others.
const STARVED_ROUNDS: u32 = 6;

/// A host that has dropped this many readings as inconsistent is placed from what is left,
/// without further consistency checks (refinement locates it again if they disagree). Why: when
/// the tree itself is off (two hosts of one leaf switch each made a leaf switch of their own in
/// one round), a host of that switch finds every other reading inconsistent with the two it is
/// anchored on and dropped 25 good readings over 50 rounds (5 clusters of 32, Lomax jitter:
/// 0.24 s against 0.08 s).
const STUCK_AFTER_DROPS: u32 = 6;

/// Searching hosts per committed host (each committed host serves one measurement per round).
const CAPACITY: usize = 1;

/// One tree being grown: the hosts waiting for it, the hosts searching it, and the order in
/// which hosts were committed to it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Builder {
    pub tree: WorkTree,
    pub pending: VecDeque<usize>,
    active: Vec<usize>,
    /// Hosts in the order they were committed (the seed first).
    pub committed: Vec<usize>,
}

impl Builder {
    pub fn new(num_hosts: usize, pending: VecDeque<usize>) -> Self {
        Builder {
            tree: WorkTree::new(num_hosts),
            pending,
            ..Builder::default()
        }
    }

    fn done(&self) -> bool {
        self.pending.is_empty() && self.active.is_empty()
    }
}

/// Shared state of an inference run.
pub(crate) struct Run<'p> {
    pub prober: &'p mut dyn Prober,
    /// The protocol measurements use now: `protocol`, or what the warm-up showed suffices
    /// (see [`super::budget`]).
    pub spec: PingSpec,
    /// The protocol the run was given.
    pub protocol: PingSpec,
    /// Pairs asked for again because they disagreed: measured under the full protocol.
    again: HashSet<(usize, usize)>,
    pub store: Store,
    pub rng: Rng,
    /// Requests made by each host (to bound pathological searches).
    pub steps: Vec<u32>,
    /// Start each search at the committed host nearest in host order (see [`super::InferOptions`]).
    pub hint: bool,
    /// The access length the pruning assumed when each host was placed (infinite: none).
    pub placed_access: Vec<f64>,
    /// Hosts whose requests could not be served: their search settles for what is known.
    stuck: HashSet<usize>,
    /// Rounds in a row each host asked for a measurement and got none (see `schedule`).
    unserved: Vec<u32>,
    /// Readings each host has dropped as inconsistent (see [`STUCK_AFTER_DROPS`]).
    drops: Vec<u32>,
    /// Pairs whose measurement was cut short once and not stored (see [`cut_short`]).
    cut_once: HashSet<(usize, usize)>,
    /// The longest round trip any reading has shown so far (seconds; 0 before any), which
    /// sets when the next round gives a pair's first round trip up ([`first_give_up`]).
    longest: f64,
    /// Pairs whose first round trip was given up: a round that measures one of them again
    /// waits for its first round trip, so that every pair is measured in the end.
    first_waited: HashSet<(usize, usize)>,
    pub counters: Counters,
}

/// A round gives a pair's first round trip (and the untimed opening one) up once it has taken
/// this many times the longest round trip read so far, and at least `PingSpec::give_up_s`; the
/// first round never does, and a pair given up there is waited for the next time.
///
/// Why: the protocol never gives a first round trip up by itself (nothing to judge it by), and
/// a round lasts as long as its slowest pair. Under heavy-tailed jitter one spike held a whole
/// round back: in a one-sample round of far-apart detection (6 x 96 and 8 x 64 hosts, Lomax
/// jitter, trials 2427 and 2261 of `bench_infer`: spikes of 0.68 and 0.42 s, 0.76 and 0.50 s of
/// probing), and in a pair's first round trip in an insertion round (2 x 256, trial 1538:
/// 0.25 s).
/// A reading given up is a reading lost: detection and the graft go on without it, a search
/// asks for the pair again; it costs speed only. Why 4: between parts joined through a core,
/// no path is longer than twice the longest uplink, and a round trip across it is at least
/// one uplink; 4 leaves a factor of 2 for paths the rounds so far did not cross.
const FIRST_GIVE_UP_RATIO: f64 = 4.0;

/// Was `m` given up (`PingSpec::give_up_s`) before it had the fewest round trips any set may
/// have ([`super::budget::MIN_SET`], or the whole protocol's when that allows fewer)? Such a
/// measurement is not stored the first time; the pair is measured again when a search asks for
/// it, and stored then, however it ends.
///
/// Why: a give-up ends the pair's measurement where it stands, and a minimum of one or two
/// round trips under heavy-tailed jitter is microseconds high. Its interval (one set: none)
/// called it precise. Traced: 8 x 256 under Lomax jitter, trial 1350, one round trip of host
/// 31 towards a host of another leaf switch, then a 10 ms stall: 38.2 us where the path is 30.
/// Host 31 was placed with a 4 us long leaf, its leaf-mates split around it into three
/// switches, the graft of the eight parts was refused, and one tree over all 256 hosts was
/// inferred instead: 2.1 s of probing, and still wrong.
pub(crate) fn cut_short(m: &PairMeasurement, spec: &PingSpec) -> bool {
    let least = super::budget::MIN_SET.min(spec.max_round_trips.max(1)) as usize;
    m.waited_s > 0.0 && m.samples_s.len() < least
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Counters {
    pub remeasured: u64,
    pub dropped: u64,
    pub forced: u64,
    /// Hosts detached and located again because the access length shrank after their placement.
    pub relocated: u64,
    /// Pair measurements ended by a round trip given up (`PingSpec::give_up_s`).
    pub given_up: u64,
}

impl Counters {
    /// Add another run's counts (a far-apart part inferred by its leader).
    pub fn absorb(&mut self, o: &Counters) {
        self.remeasured += o.remeasured;
        self.dropped += o.dropped;
        self.forced += o.forced;
        self.relocated += o.relocated;
        self.given_up += o.given_up;
    }
}

impl<'p> Run<'p> {
    pub fn new(prober: &'p mut dyn Prober, spec: PingSpec, seed: u64) -> Self {
        let n = prober.num_hosts();
        Run {
            prober,
            spec,
            protocol: spec,
            again: HashSet::new(),
            store: Store::new(n),
            rng: Rng::new(seed),
            steps: vec![0; n],
            hint: false,
            placed_access: vec![f64::INFINITY; n],
            stuck: HashSet::new(),
            unserved: vec![0; n],
            drops: vec![0; n],
            cut_once: HashSet::new(),
            longest: 0.0,
            first_waited: HashSet::new(),
            counters: Counters::default(),
        }
    }

    /// Measure one round of pairs and store the results.
    pub fn measure(&mut self, pairs: &[(usize, usize)]) -> Result<(), InferError> {
        let coarse = self.measure_far(pairs, self.spec.far_s)?;
        debug_assert!(coarse.is_empty(), "the run's own protocol cuts no pair short");
        Ok(())
    }

    /// Measure one round under the full protocol the run was given, whatever the warm-up
    /// showed suffices (see [`super::budget`]): pairs measured again because they disagree,
    /// and the pairs that decide whether a link is kept, need every round trip they can get
    /// (a host whose messages are late reads noisier than the rest).
    pub fn measure_fully(&mut self, pairs: &[(usize, usize)]) -> Result<(), InferError> {
        let full = self.full_spec();
        let now = std::mem::replace(&mut self.spec, full);
        let r = self.measure(pairs);
        self.spec = now;
        r
    }

    /// The protocol [`measure_fully`](Self::measure_fully) uses.
    pub fn full_spec(&self) -> PingSpec {
        PingSpec {
            far_s: self.spec.far_s,
            ..self.protocol
        }
    }

    /// Measure one round with far pairs cut short ([`PingSpec::far_s`] = `far_s`): the fine
    /// measurements go to the store, the coarse ones (one-way distance estimates of pairs at
    /// least `far_s` apart) are returned instead — only the join of far-apart parts may use them.
    pub fn measure_far(
        &mut self,
        pairs: &[(usize, usize)],
        far_s: f64,
    ) -> Result<Vec<(usize, usize, f64)>, InferError> {
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let waited = pairs
            .iter()
            .any(|&(a, b)| self.first_waited.contains(&(a.min(b), a.max(b))));
        let first_give_up_s = if waited { f64::INFINITY } else { self.first_give_up() };
        let spec = PingSpec {
            far_s,
            first_give_up_s,
            ..self.spec
        };
        let ms = self.prober.ping_round(pairs, &spec)?;
        self.counters.given_up += ms.iter().filter(|m| m.waited_s > 0.0).count() as u64;
        if log::log_enabled!(log::Level::Trace) {
            let rtt = ms.iter().map(|m| m.rtt_s()).fold(0.0, f64::max);
            let dur = ms.iter().map(|m| m.duration_s()).fold(0.0, f64::max);
            let far = ms.iter().filter(|m| spec.ended_far(m)).count();
            log::trace!(
                "ping round: {} pairs ({far} far, measured once), longest RTT {:.1} us, slowest pair {:.2} ms",
                pairs.len(),
                rtt * 1e6,
                dur * 1e3
            );
        }
        let mut coarse = Vec::new();
        for m in ms {
            if m.samples_s.is_empty() {
                // Given up before its first round trip came back: nothing to store; a search
                // that still needs the pair asks again, and waits for it then.
                log::debug!(
                    "{} - {}: first round trip not back within {:.1} ms; measured again when asked",
                    m.a,
                    m.b,
                    first_give_up_s * 1e3
                );
                self.first_waited.insert((m.a.min(m.b), m.a.max(m.b)));
                continue;
            }
            self.longest = self.longest.max(m.rtt_s());
            if spec.ended_far(&m) {
                coarse.push((m.a, m.b, m.rtt_s() / 2.0));
            } else if cut_short(&m, &spec) && self.cut_once.insert((m.a.min(m.b), m.a.max(m.b))) {
                log::debug!(
                    "{} - {}: given up after {} round trip(s); not stored, measured again when asked",
                    m.a,
                    m.b,
                    m.samples_s.len()
                );
            } else {
                self.store.add(m);
            }
        }
        Ok(coarse)
    }

    /// One round trip per pair (after the opening one), stored nowhere: the one-way distance
    /// estimate of every pair, enough to tell near pairs from far ones (jitter only inflates a
    /// round trip, so a reading below the far threshold proves a pair near).
    pub fn measure_once(&mut self, pairs: &[(usize, usize)]) -> Result<Vec<(usize, usize, f64)>, InferError> {
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let first_give_up_s = self.first_give_up();
        let spec = PingSpec {
            sets: 1,
            max_round_trips: 1,
            first_give_up_s,
            ..self.spec
        };
        let ms = self.prober.ping_round(pairs, &spec)?;
        let given_up = ms.iter().filter(|m| m.samples_s.is_empty()).count();
        if given_up > 0 {
            log::debug!(
                "one-sample round: {given_up} of {} round trip(s) not back within {:.1} ms, given up",
                ms.len(),
                first_give_up_s * 1e3
            );
        }
        self.counters.given_up += given_up as u64;
        let readings: Vec<(usize, usize, f64)> = ms
            .iter()
            .filter(|m| !m.samples_s.is_empty())
            .map(|m| (m.a, m.b, m.rtt_s() / 2.0))
            .collect();
        self.longest = readings.iter().fold(self.longest, |x, r| x.max(2.0 * r.2));
        Ok(readings)
    }

    /// How long a round waits for a pair's first round trip (and the opening one before it):
    /// [`FIRST_GIVE_UP_RATIO`] times the longest round trip read so far, and at least as long as
    /// the protocol waits for any later one (`PingSpec::give_up_s`, 10 ms by default; infinite,
    /// never); no limit before anything was read.
    fn first_give_up(&self) -> f64 {
        if self.longest > 0.0 {
            self.spec.give_up_s.max(FIRST_GIVE_UP_RATIO * self.longest)
        } else {
            f64::INFINITY
        }
    }

    /// Start a builder's tree from the first two of its pending hosts (measured already), or
    /// from its only host.
    fn seed_one(&mut self, b: &mut Builder) {
        let Some(a) = b.pending.pop_front() else { return };
        b.committed.push(a);
        match b.pending.pop_front() {
            None => b.tree.init_single(a),
            Some(c) => {
                let d = self.store.get(a, c).expect("seed pair measured").d;
                b.tree.init_pair(a, c, d);
                b.committed.push(c);
            }
        }
    }

    /// Seed a builder (paper mode): measure its first pair if needed.
    pub fn seed_paper(&mut self, b: &mut Builder) -> Result<(), InferError> {
        if let (Some(a), Some(c)) = (b.pending.front().copied(), b.pending.get(1).copied()) {
            // Three times at most: a first round trip given up is waited for the next time,
            // and a measurement cut short is stored the second time.
            for _ in 0..3 {
                if self.store.get(a, c).is_none() {
                    self.measure(&[(a, c)])?;
                }
            }
        }
        self.seed_one(b);
        Ok(())
    }

    /// The next step of `h`'s search in `tree`, dropping inconsistent measurements on the way.
    pub fn step(&mut self, tree: &WorkTree, h: usize, params: &LocateParams) -> Step {
        // A search that keeps asking is cut short: no sibling checks, no consistency checks.
        let relaxed;
        let p = if self.steps[h] as usize > 4 * tree.num_hosts_in() + 40 || self.stuck.contains(&h) {
            relaxed = LocateParams {
                exhaustive: false,
                flag_delta: f64::INFINITY,
                robust: false,
                access: params.access.or(Some(0.0)),
                ..*params
            };
            &relaxed
        } else {
            params
        };
        loop {
            match locate(tree, &self.store, h, p) {
                Step::Drop(b) => {
                    log::debug!("dropping the measurement {h} - {b}: inconsistent after re-measuring");
                    self.store.mark_bad(h, b);
                    self.counters.dropped += 1;
                    self.drops[h] += 1;
                    if self.drops[h] >= STUCK_AFTER_DROPS && self.stuck.insert(h) {
                        log::debug!("host {h}: {} readings dropped; placed from what is left", self.drops[h]);
                        return self.step(tree, h, params);
                    }
                }
                s => return s,
            }
        }
    }

    /// Grow every builder until its hosts are all committed; the builders' requests share rounds
    /// (their host sets are disjoint). `params` is re-derived before every round from what has
    /// been measured so far.
    pub fn grow(
        &mut self,
        builders: &mut [Builder],
        params: &dyn Fn(&Store, &[&WorkTree]) -> LocateParams,
    ) -> Result<(), InferError> {
        self.grow_feeding(builders, params, &[])
    }

    /// [`grow`](Self::grow), where builder `j` with `feed[j] = Some(s)` feeds skeleton `s` (a
    /// builder seeded with hosts of the builders it absorbs): the skeleton also absorbs builder
    /// `j`'s hosts as they are committed there, in commit order (early hosts anchor the later
    /// ones) and only once `j`'s first host is in the skeleton. What a builder measured among
    /// its hosts is reused, so merging costs a few new measurements, made while the builders
    /// still grow.
    pub fn grow_feeding(
        &mut self,
        builders: &mut [Builder],
        params: &dyn Fn(&Store, &[&WorkTree]) -> LocateParams,
        feed: &[Option<usize>],
    ) -> Result<(), InferError> {
        let mut fed: Vec<HashSet<usize>> = vec![HashSet::new(); builders.len()];
        let feeding = feed.iter().any(Option::is_some);
        let mut feed_all = |builders: &mut [Builder]| -> usize {
            let mut added = 0;
            for (j, target) in feed.iter().enumerate() {
                let Some(s) = *target else { continue };
                let Some(&first) = builders[j].committed.first() else {
                    continue;
                };
                if builders[s].tree.vertex_of(first).is_none() {
                    continue;
                }
                let hosts = builders[j].committed.clone();
                let main = &mut builders[s];
                for h in hosts {
                    if fed[j].insert(h)
                        && main.tree.vertex_of(h).is_none()
                        && !main.pending.contains(&h)
                        && !main.active.contains(&h)
                    {
                        main.pending.push_back(h);
                        added += 1;
                    }
                }
            }
            added
        };
        loop {
            if feeding {
                feed_all(builders);
            }
            let trees: Vec<&WorkTree> = builders.iter().map(|b| &b.tree).collect();
            let p = LocateParams {
                hint: self.hint,
                ..params(&self.store, &trees)
            };
            log::trace!(
                "round parameters: snap tolerance {:.3} us, long-leaf margin {:.3} us, access {:?} us",
                p.tol_floor * 1e6,
                p.flag_delta * 1e6,
                p.access.map(|x| x * 1e6)
            );
            let mut wants: Vec<(usize, usize, Want)> = Vec::new();
            for (bi, b) in builders.iter_mut().enumerate() {
                for (h, w) in self.plan(b, &p) {
                    wants.push((bi, h, w));
                }
            }
            if builders.iter().all(Builder::done) && !(feeding && feed_all(builders) > 0) {
                return Ok(());
            }
            if wants.is_empty() {
                continue; // commits made progress; plan again
            }
            let pairs = self.schedule(builders, &wants);
            if pairs.is_empty() {
                // Nobody left to measure what they ask for: settle for what is known.
                let fresh: Vec<usize> = wants.iter().map(|w| w.1).filter(|h| !self.stuck.contains(h)).collect();
                if fresh.is_empty() {
                    // Searches already cut short still ask for what no committed host can
                    // give: place each beside its nearest measured host rather than lose the
                    // whole tree (refinement locates it again if its measurements disagree).
                    let placed = wants
                        .iter()
                        .filter(|&&(bi, h, _)| self.place_beside_nearest(&mut builders[bi], h))
                        .count();
                    if placed == 0 {
                        return Err(InferError::Internal(format!(
                            "no measurement could be scheduled for {} waiting hosts",
                            wants.len()
                        )));
                    }
                    continue;
                }
                self.stuck.extend(fresh);
                continue;
            }
            for &(h, _) in &pairs {
                self.steps[h] += 1;
            }
            let again = pairs
                .iter()
                .filter(|&&(a, b)| self.again.remove(&(a.min(b), a.max(b))))
                .count();
            if again > 0 {
                self.measure_fully(&pairs)?;
            } else {
                self.measure(&pairs)?;
            }
        }
    }

    /// Commit `h` to `b` beside the committed host it is measured closest to (measurements
    /// dropped as inconsistent only when there is nothing else): below that host's switch with
    /// the access length the measurement implies, or halfway along the link of a tree of two
    /// hosts. False when `h` is not searching `b` or has no measurement into its tree.
    fn place_beside_nearest(&mut self, b: &mut Builder, h: usize) -> bool {
        if !b.active.contains(&h) || b.tree.vertex_of(h).is_some() {
            return false;
        }
        let nearest = self
            .store
            .partners(h)
            .iter()
            .filter_map(|&x| Some((x, self.store.get(h, x)?.d, b.tree.vertex_of(x)?)))
            .min_by(|p, q| {
                (self.store.is_bad(h, p.0), p.1)
                    .partial_cmp(&(self.store.is_bad(h, q.0), q.1))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        let Some((x, d, vx)) = nearest else { return false };
        let (at, leaf) = match b.tree.parent(vx) {
            Some(sw) if !b.tree.is_host(sw) => (Point::At(sw), (d - b.tree.leaf_len(x)).max(0.0)),
            Some(_) => {
                let half = b.tree.len(vx) / 2.0;
                (Point::On { child: vx, up: half }, (d - half).max(0.0))
            }
            None => match b.tree.children(vx).first().copied() {
                Some(c) => {
                    let half = b.tree.len(c) / 2.0;
                    (Point::On { child: c, up: half }, (d - half).max(0.0))
                }
                None => return false,
            },
        };
        log::debug!("host {h}: its search found nothing to measure; placed beside host {x}");
        b.tree.attach(at, h, leaf);
        b.committed.push(h);
        b.active.retain(|&a| a != h);
        self.counters.forced += 1;
        true
    }

    /// One builder's part of a round: re-queue hosts placed under a stale access length,
    /// evaluate the searching hosts (committing finished ones at once, so the hosts after them
    /// see the grown tree), activate waiting hosts, and return what the searching hosts want.
    fn plan(&mut self, b: &mut Builder, p: &LocateParams) -> Vec<(usize, Want)> {
        let mut wants = Vec::new();
        // Each link was estimated from the few measurements of the host that created it, and
        // hosts placed against estimated links inherit their errors; a few least-squares sweeps
        // over everything measured stop the errors from adding up along chains of insertions.
        if b.tree.num_hosts_in() >= 4 {
            refit(&mut b.tree, &self.store, 0.0, 20);
        }
        if b.tree.num_hosts_in() == 0 {
            // Not seeded yet: the seed pair is measured in a shared round first. Everything
            // else is placed against the seed link, so a seed measured once and far longer than
            // is usual (a stalled window) is measured again first (its minimum is kept).
            match (b.pending.front().copied(), b.pending.get(1).copied()) {
                (Some(a), Some(c)) => {
                    let suspect = match self.store.get(a, c) {
                        None => true,
                        Some(o) => self.store.times(a, c) < 2 && o.d > 10.0 * self.store.d_quantile(0.5),
                    };
                    if suspect {
                        return vec![(a, Want::Host(c))];
                    }
                    self.seed_one(b);
                }
                _ => self.seed_one(b),
            }
        }
        let a0 = p.access;
        if let Some(a0) = a0.filter(|_| !p.exhaustive) {
            // Hosts placed while the access length looked longer than it now does may hide a
            // switch the pruning did not look for: locate them again.
            let suspects: Vec<usize> = b
                .tree
                .hosts()
                .filter(|&h| {
                    let leaf = b.tree.leaf_len(h);
                    self.placed_access[h] > a0 + p.flag_delta
                        && ((leaf - a0).abs() > p.flag_delta || leaf <= p.tol_floor)
                })
                .collect();
            for h in suspects.into_iter().rev() {
                if b.tree.detach(h) {
                    self.counters.relocated += 1;
                    b.committed.retain(|&x| x != h);
                    b.pending.push_front(h);
                }
            }
        }
        let mut still = Vec::with_capacity(b.active.len());
        let mut queue: VecDeque<usize> = std::mem::take(&mut b.active).into();
        let capacity = CAPACITY * b.tree.num_hosts_in().max(1);
        // Hosts ahead of a waiting host that are not committed yet (searching, or waiting
        // themselves): a waiting host measured against one of them gets that measurement for
        // free once it is committed, so it waits rather than searching from scratch (its warm-up
        // partner, or the anchors of its own earlier search when trees are merged).
        let mut ahead: HashSet<usize> = queue.iter().copied().collect();
        let mut deferred: Vec<usize> = Vec::new();
        loop {
            // Active hosts first, then newly activated ones while there is capacity.
            let h = match queue.pop_front() {
                Some(h) => h,
                None if still.len() < capacity => match b.pending.pop_front() {
                    Some(h) => {
                        let usable = self
                            .store
                            .partners(h)
                            .iter()
                            .filter(|&&x| b.tree.vertex_of(x).is_some())
                            .count();
                        let awaited = self.store.partners(h).iter().any(|x| ahead.contains(x));
                        ahead.insert(h);
                        if usable < 2 && awaited {
                            deferred.push(h);
                            continue;
                        }
                        h
                    }
                    None => break,
                },
                None => break,
            };
            match self.step(&b.tree, h, p) {
                Step::Place { at, leaf } => {
                    if log::log_enabled!(log::Level::Trace) {
                        let obs: Vec<(usize, f64)> = self
                            .store
                            .partners(h)
                            .iter()
                            .filter(|&&x| b.tree.vertex_of(x).is_some() && !self.store.is_bad(h, x))
                            .map(|&x| (x, (self.store.get(h, x).unwrap().d * 1e8).round() / 100.0))
                            .collect();
                        log::trace!(
                            "host {h} placed at {at:?}, leaf {:.3} us, from (host, us) {obs:?}",
                            leaf * 1e6
                        );
                    }
                    if self.steps[h] as usize > 4 * b.tree.num_hosts_in() + 40 {
                        self.counters.forced += 1;
                    }
                    b.tree.attach(at, h, leaf);
                    b.committed.push(h);
                    self.placed_access[h] = a0.unwrap_or(f64::INFINITY);
                }
                Step::Start => wants.push((h, Want::Any)),
                Step::Branch(br, reach) => wants.push((h, Want::Branch(br, reach))),
                Step::Host(x) => wants.push((h, Want::Host(x))),
                Step::Around(v) => wants.push((h, Want::Around(v))),
                Step::Remeasure(x) => {
                    self.counters.remeasured += 1;
                    self.again.insert((h.min(x), h.max(x)));
                    wants.push((h, Want::Host(x)));
                }
                Step::Drop(_) => unreachable!("drops are handled in step()"),
            }
            if !matches!(wants.last(), Some(&(x, _)) if x == h) {
                continue;
            }
            still.push(h);
        }
        // Hosts of one switch ruling out branches at a switch share what they find (see
        // `locate::excluded_by_mates`), so they should not measure the same branch: each takes
        // another open one, and mates still waiting take one each too.
        let mut taken: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
        // Each branching host's mates, once per round (every want and waiting host asks).
        let mut mates: HashMap<usize, Vec<usize>> = HashMap::new();
        for &(h, w) in &wants {
            if matches!(w, Want::Branch(..)) {
                mates.insert(h, locate::leaf_mates(&b.tree, &self.store, h, p));
            }
        }
        let key = |h: usize, v: usize| (v, mates[&h].iter().copied().chain([h]).min().expect("h itself"));
        for (h, want) in wants.iter_mut() {
            let Want::Branch(br, reach) = *want else { continue };
            let taken = taken.entry(key(*h, br.at)).or_default();
            if taken.contains(&br.via) {
                let open = locate::open_branches(&b.tree, &self.store, *h, br.at, reach, p);
                if let Some(&w) = open.iter().find(|w| !taken.contains(w)) {
                    *want = Want::Branch(Branch { at: br.at, via: w }, reach);
                }
            }
            if let Want::Branch(br, _) = *want {
                taken.push(br.via);
            }
        }
        let mut helping = Vec::new();
        for &m in &deferred {
            let lead = wants.iter().find_map(|&(h, w)| match w {
                Want::Branch(br, reach) if mates[&h].contains(&m) => Some((h, br, reach)),
                _ => None,
            });
            let Some((h, br, reach)) = lead else { continue };
            let taken = taken.entry(key(h, br.at)).or_default();
            let open = locate::open_branches(&b.tree, &self.store, h, br.at, reach, p);
            if let Some(&w) = open.iter().find(|w| !taken.contains(w)) {
                taken.push(w);
                helping.push((m, Want::Branch(Branch { at: br.at, via: w }, reach)));
            }
        }
        wants.extend(helping);
        b.active = still;
        for h in deferred.into_iter().rev() {
            b.pending.push_front(h);
        }
        wants
    }

    /// Turn requests into disjoint (requester, server) pairs: the most constrained first. A
    /// server is a committed host of the requester's builder.
    fn schedule(&mut self, builders: &[Builder], wants: &[(usize, usize, Want)]) -> Vec<(usize, usize)> {
        let mut busy: HashSet<usize> = HashSet::new();
        let mut pairs = Vec::new();
        let rank = |w: &Want| match w {
            Want::Host(_) => 0,
            Want::Branch(..) | Want::Around(_) => 1,
            Want::Any => 2,
        };
        // Requests left unserved for STARVED_ROUNDS rounds go first. Why: a block's first
        // searchers can only be served by its two committed hosts, which also search in the
        // skeleton; ranked by kind alone, the skeleton's requests took them every round and a
        // 32-host block waited 17 rounds before its first insertion (2 clusters of 128 hosts:
        // 32 rounds instead of 21). Served after one round already, they took servers from
        // searches closer to their end and cost the 4-cluster testbed 4-8% of its probe time.
        let mut order: Vec<usize> = (0..wants.len()).collect();
        order.sort_by_key(|&i| (self.unserved[wants[i].1] < STARVED_ROUNDS, rank(&wants[i].2)));
        // Committed hosts per builder: sorted (for the hint) and shuffled (otherwise).
        let committed: Vec<Vec<usize>> = builders.iter().map(|b| b.tree.hosts().collect()).collect();
        let mut pools: Vec<Vec<usize>> = committed.clone();
        for pool in &mut pools {
            self.rng.shuffle(pool);
        }
        let mut pool_next = vec![0usize; builders.len()];
        for i in order {
            let (bi, h, w) = wants[i];
            if busy.contains(&h) {
                continue;
            }
            let tree = &builders[bi].tree;
            let free = |x: usize| !busy.contains(&x) && self.store.get(h, x).is_none();
            // A vertex named by a request may have gone since (contracted by a relocation).
            let stale = match w {
                Want::Branch(b, _) => !tree.is_alive(b.at) || !tree.is_alive(b.via) || b.at == b.via,
                Want::Around(v) => !tree.is_alive(v),
                _ => false,
            };
            if stale {
                continue;
            }
            let server = match w {
                Want::Host(x) => Some(x).filter(|x| !busy.contains(x) && !busy.contains(&h)),
                // A commit earlier in the pass may have split the link at -> via.
                Want::Branch(b, reach) => tree.host_at_distance(
                    Branch {
                        at: b.at,
                        via: tree.toward(b.at, b.via),
                    },
                    reach,
                    free,
                ),
                Want::Around(v) => tree
                    .neighbors(v)
                    .into_iter()
                    .filter_map(|w| tree.nearest_hosts(Branch { at: v, via: w }, 1, free).first().copied())
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, x)| x),
                Want::Any if self.hint => nearest_in_order(&committed[bi], h, free),
                Want::Any => {
                    let pool = &pools[bi];
                    let mut found = None;
                    while pool_next[bi] < pool.len() {
                        let x = pool[pool_next[bi]];
                        pool_next[bi] += 1;
                        if free(x) {
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
        // A requester may also serve another builder's request (committed in a block while it
        // searches in the skeleton), so `busy` does not tell whether its own request was served.
        let served: HashSet<usize> = pairs.iter().map(|p| p.0).collect();
        for &(_, h, _) in wants {
            self.unserved[h] = if served.contains(&h) {
                0
            } else {
                self.unserved[h].saturating_add(1)
            };
        }
        pairs
    }

    /// The sequential insertion of [Shirai2007] with `find_close_host` pipelined ten hosts ahead.
    pub fn insert_paper(&mut self, b: &mut Builder, params: &LocateParams) -> Result<(), InferError> {
        let mut pending = std::mem::take(&mut b.pending);
        const AHEAD: usize = 10;
        // find_close_host state of the hosts waiting: remaining candidates M.
        let mut close: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut window: VecDeque<usize> = VecDeque::new();
        loop {
            while window.len() < AHEAD + 1 {
                let Some(h) = pending.pop_front() else { break };
                let mut m: Vec<usize> = b.tree.hosts().collect();
                self.rng.shuffle(&mut m);
                close.insert(h, m);
                window.push_back(h);
            }
            let Some(&head) = window.front() else { return Ok(()) };
            let mut busy: HashSet<usize> = HashSet::new();
            let mut pairs = Vec::new();
            // The head inserts itself once its find_close_host is done.
            if close[&head].is_empty() {
                match self.step(&b.tree, head, params) {
                    Step::Place { at, leaf } => {
                        b.tree.attach(at, head, leaf);
                        b.committed.push(head);
                        window.pop_front();
                        close.remove(&head);
                        continue;
                    }
                    Step::Start => unreachable!("find_close_host measured at least one host"),
                    Step::Branch(br, _) => {
                        let x = b.tree.nearest_hosts(br, 1, |x| self.store.get(head, x).is_none());
                        pairs.push((head, x.first().map_or(br.via, |&(_, x)| x)));
                    }
                    Step::Host(x) | Step::Remeasure(x) => pairs.push((head, x)),
                    Step::Around(_) => unreachable!("the search of [Shirai2007] is exhaustive"),
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
                let (Some(x), Some(vj)) = (self.store.get(h, j), b.tree.vertex_of(j)) else {
                    continue;
                };
                let t = &b.tree;
                m.retain(|&k| {
                    let y = t.dist(t.vertex_of(k).unwrap(), vj);
                    y <= 3.0 * x.d && y >= x.d / 3.0
                });
            }
        }
    }
}

/// The host of `sorted` nearest to `h` in host order that `ok` accepts (MPI hosts usually come
/// in hostfile order, which follows racks and switches).
fn nearest_in_order(sorted: &[usize], h: usize, ok: impl Fn(usize) -> bool) -> Option<usize> {
    let at = sorted.partition_point(|&x| x < h);
    let (mut lo, mut hi) = (at, at);
    while lo > 0 || hi < sorted.len() {
        let take_hi = hi < sorted.len() && (lo == 0 || sorted[hi] - h <= h - sorted[lo - 1]);
        let x = if take_hi {
            hi += 1;
            sorted[hi - 1]
        } else {
            lo -= 1;
            sorted[lo]
        };
        if ok(x) {
            return Some(x);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::MatrixProber;
    use crate::topology::RttMatrix;

    #[test]
    fn only_a_measurement_given_up_before_a_sets_worth_is_cut_short() {
        let m = |samples: usize, waited_s: f64| PairMeasurement {
            a: 0,
            b: 1,
            samples_s: vec![30e-6; samples],
            set_len: vec![samples as u32],
            waited_s,
        };
        let spec = PingSpec::default();
        assert!(cut_short(&m(1, 10e-3), &spec));
        assert!(cut_short(&m(5, 10e-3), &spec));
        assert!(!cut_short(&m(6, 10e-3), &spec), "a set's worth");
        assert!(!cut_short(&m(1, 0.0), &spec), "not given up: a one-round-trip protocol");
        let one = PingSpec {
            max_round_trips: 2,
            sets: 1,
            ..spec
        };
        assert!(!cut_short(&m(2, 10e-3), &one), "all the protocol asks for");
    }

    #[test]
    fn requests_left_unserved_go_first_next_round() {
        let n = 6;
        let m = RttMatrix {
            hosts: (0..n).map(|h| format!("h{h}")).collect(),
            rtt_us: (0..n)
                .map(|a| (0..n).map(|b| Some(if a == b { 0.0 } else { 50.0 })).collect())
                .collect(),
        };
        let mut prober = MatrixProber::new(&m, "test").unwrap();
        let mut run = Run::new(&mut prober, PingSpec::default(), 1);
        // A skeleton with hosts 2 and 3, where hosts 0 and 1 search; a block whose tree is
        // hosts 0 and 1, where hosts 4 and 5 search and only 0 or 1 can serve them.
        let mut skeleton = Builder::new(n, VecDeque::new());
        skeleton.tree.init_pair(2, 3, 50e-6);
        let mut block = Builder::new(n, VecDeque::new());
        block.tree.init_pair(0, 1, 50e-6);
        let builders = [skeleton, block];
        let wants = [
            (0, 0, Want::Host(2)),
            (0, 1, Want::Host(3)),
            (1, 4, Want::Any),
            (1, 5, Want::Any),
        ];
        for _ in 0..STARVED_ROUNDS {
            let first = run.schedule(&builders, &wants);
            assert_eq!(first.len(), 2, "{first:?}");
            assert!(first.iter().all(|p| p.0 < 2), "the exact requests first: {first:?}");
        }
        // Ranked by kind alone, the block would wait as long as the skeleton searches.
        let second = run.schedule(&builders, &wants);
        assert!(second.iter().any(|p| p.0 == 4 && p.1 < 2), "{second:?}");
        assert!(second.iter().any(|p| p.0 == 5 && p.1 < 2), "{second:?}");
    }

    #[test]
    fn pairs_measured_again_get_the_full_protocol() {
        use crate::probe::{NoiseModel, SimProber};
        use crate::topology::gen::Tree;
        let t = Tree::fat_tree(4, 2).build().unwrap();
        let mut prober = SimProber::new(&t, NoiseModel::default(), 1).unwrap();
        let mut run = Run::new(&mut prober, PingSpec::default(), 1);
        // What the warm-up may have cut the run's sets to.
        run.spec = PingSpec {
            max_round_trips: 2,
            ..run.protocol
        };
        run.measure(&[(0, 1)]).unwrap();
        assert!(run.store.raw[0].set_len.iter().all(|&n| n <= 2));
        // Under the full protocol every set runs at least patience + 1 round trips.
        run.measure_fully(&[(0, 1)]).unwrap();
        assert!(
            run.store.raw[1].set_len.iter().all(|&n| n > 2),
            "{:?}",
            run.store.raw[1].set_len
        );
        assert_eq!(run.spec.max_round_trips, 2, "the run's own protocol is restored");
    }
}
