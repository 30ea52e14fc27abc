//! Where does a new host hang in the current tree? The `add` of [Shirai2007] as a stateless function.
//!
//! The `add(T, H)` of [Shirai2007] keeps an anchor A and a candidate set M and repeatedly measures a host
//! B, solves Eq. 1 for the branching point X of A, B, H, inserts X or snaps it to an existing
//! switch, and removes the subtrees at X containing A and B. Here the same search is a pure
//! function of the tree and of every distance measured from H so far: the anchor is the
//! nearest measured host, the deepest Eq. 1 branching point over all measured hosts is where H's
//! path leaves the known part of the tree, and the subtrees at it that contain a measured host
//! are excluded. Being stateless, it stays correct when the tree changes between two of H's
//! measurements (other hosts are inserted concurrently) and when a host is detached and located
//! again later.
//!
//! Beyond [Shirai2007]:
//! - **consistency checks**: every measurement must agree with the placement within its
//!   tolerance; a disagreement triggers a re-measurement (stalls read milliseconds instead of
//!   microseconds) and, if it persists, the measurement is dropped;
//! - **sibling checks only where a hidden switch is possible**: a host hanging directly from
//!   switch V with a leaf no longer than the shortest access link cannot share a hidden switch
//!   with a sibling (the hidden switch's link would add to its leaf), so its host siblings need
//!   not be measured. [Shirai2007] measures all of them (O(p) per insertion, 35-60% of all pairs).

use super::store::{Obs, Store};
use super::tree::{Branch, Point, WorkTree};

/// Tuning of one search.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocateParams {
    /// Explore every branch at the attachment switch, host siblings included ([Shirai2007]'s
    /// behaviour); otherwise branches are pruned by the access-link argument.
    pub exhaustive: bool,
    /// Snapping tolerance = max(`tol_floor`, `kappa` * (u_A + u_B)).
    pub kappa: f64,
    pub tol_floor: f64,
    /// A leaf is *long* (a hidden switch may hide in it) when it differs from the shortest
    /// access link by more than this.
    pub flag_delta: f64,
    /// Check measurements against the placement (and ask for re-measurements).
    pub robust: bool,
    /// The access length (see [`access_length`]); `None`: unknown, nothing is pruned.
    pub access: Option<f64>,
    /// The typical distance of two hosts below one switch (see [`mate_distance`]); `None`:
    /// twice the access length.
    pub mate_d: Option<f64>,
    /// How often a pair may be measured before an inconsistent value is dropped.
    pub max_times: u8,
    /// Hosts are numbered along the network (the run's host-order hint): switch branches are
    /// explored nearest in host order first (see [`branch_rank`]).
    pub hint: bool,
}

/// What the search needs next, or where the host goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Step {
    /// Nothing usable is measured yet: measure any host of the tree.
    Start,
    /// Measure a host of this branch, preferably one about `reach` from `b.at` (the new host's
    /// own distance from there: a host at a similar depth most likely shares its path).
    Branch(Branch, f64),
    /// Measure this host.
    Host(usize),
    /// Measure any host not measured yet, the nearer to this switch the better.
    Around(usize),
    /// Measure this host again (its value is inconsistent with the rest).
    Remeasure(usize),
    /// The measurement with this host is inconsistent and was measured enough: drop it.
    Drop(usize),
    /// Hang the host at `at` with a leaf link of length `leaf`.
    Place { at: Point, leaf: f64 },
}

/// A pair's own interval widens the snapping tolerance up to this many floors, no further
/// (pruned searches; [Shirai2007]'s exhaustive one keeps its rule).
///
/// Why: the interval is the spread of three set statistics, and one pair in a few dozen reads
/// several times the typical spread by chance. Twice its sum snapped a branching point 2.1 us
/// short of a switch onto it (a 0.87 us interval against a median of 0.15 us), hung the host
/// one 2.5 us link too high, and the hosts after it dropped one consistent reading after
/// another for 60 rounds (3 clusters of 48 hosts under 2 us of normal jitter, 0.44 s instead of
/// 0.08 s). A host whose every interval is wide (a loaded one) is placed by the best-fitting
/// switch instead (see [`locate`]).
const TOL_CAP_FLOORS: f64 = 3.0;

impl LocateParams {
    /// The distance two hosts of one switch read: [`LocateParams::mate_d`], else twice the
    /// access length `a0`.
    fn mate_distance(&self, a0: f64) -> f64 {
        self.mate_d.unwrap_or(2.0 * a0)
    }

    pub fn tol(&self, ua: f64, ub: f64) -> f64 {
        let own = self.kappa * (ua + ub);
        let own = if self.exhaustive {
            own
        } else {
            own.min(TOL_CAP_FLOORS * self.tol_floor)
        };
        self.tol_floor.max(own)
    }
}

/// The next step for host `h` (not in the tree) given the tree and all measurements.
pub(crate) fn locate(t: &WorkTree, s: &Store, h: usize, p: &LocateParams) -> Step {
    let obs: Vec<(usize, usize, Obs)> = s
        .partners(h)
        .iter()
        .filter(|&&b| !s.is_bad(h, b))
        .filter_map(|&b| t.vertex_of(b).map(|v| (b, v, s.get(h, b).unwrap())))
        .collect();
    let Some(&(a, va, oa)) = obs.iter().min_by(|x, y| x.2.d.total_cmp(&y.2.d).then(x.0.cmp(&y.0))) else {
        return Step::Start;
    };
    let access = if p.exhaustive { None } else { p.access };
    // Is a leaf longer than an access link (so a hidden switch or link may hide in it)?
    let long = |l: f64| access.is_none_or(|a0| l > a0 + p.flag_delta || l < a0 - p.flag_delta);
    if obs.len() == 1 {
        let p0 = t.host_parent(a).expect("a tree host has a neighbour");
        // One measurement suffices when both the anchor's leaf and the implied leaf of H at the
        // anchor's switch are plain access links: H cannot be anywhere else (any other place
        // adds a link to its leaf, or needs a hidden switch in the anchor's leaf).
        let l = oa.d - t.link_len(va, p0);
        if access.is_some() && !t.is_host(p0) && !long(t.leaf_len(a)) && !long(l) {
            return Step::Place {
                at: Point::At(p0),
                leaf: l.max(0.0),
            };
        }
        // Otherwise any second host will do (Eq. 1 needs two): the nearest ones to the anchor
        // are the cheapest to measure, and the scheduler spreads the requests over them.
        let b = Branch { at: va, via: p0 };
        if t.nearest_hosts(b, 1, |x| s.get(h, x).is_none()).is_empty() {
            // Everyone else was measured and found unusable: hang next to the anchor.
            let l = t.link_len(va, p0);
            return Step::Place {
                at: if t.is_host(p0) {
                    let child = if t.parent(va) == Some(p0) { va } else { p0 };
                    Point::On { child, up: l / 2.0 }
                } else {
                    Point::At(p0)
                },
                leaf: (oa.d - l).max(0.0),
            };
        }
        return Step::Branch(b, oa.d);
    }

    // Eq. 1 for every measured B: H leaves the path a -> B at distance g from a.
    let mut best: Option<(f64, usize, usize, f64)> = None; // (g, host, vertex, tol)
    let mut worst: Option<(f64, usize, f64)> = None; // (severity, host to blame, signed residual)
    for &(b, vb, ob) in &obs {
        if b == a {
            continue;
        }
        let dab = t.dist(va, vb);
        let g = (oa.d + dab - ob.d) / 2.0;
        let tol = p.tol(oa.u, ob.u);
        if p.robust {
            // g < 0: d(H,B) exceeds d(H,a) + d(a,B) (B's value too large); g > dab: d(H,B) is
            // shorter than d(a,B) - d(H,a) allows (a's value too large).
            let (excess, blame) = if g < 0.0 { (-g, b) } else { (g - dab, a) };
            if excess > tol && worst.is_none_or(|w| excess / tol > w.0) {
                worst = Some((excess / tol, blame, 0.0));
            }
        }
        let g = g.max(0.0).min(dab.max(0.0));
        if best.is_none_or(|x| g > x.0) {
            best = Some((g, b, vb, tol));
        }
    }
    let (g, _, vb, tol) = best.expect("two or more measurements");
    let at = t.point_on_path(va, vb, g, tol);
    let leaf = implied_leaf(t, &obs, at);

    if p.robust {
        for &(b, vb, ob) in &obs {
            let r = ob.d - (t.dist_point(vb, at) + leaf);
            let tol = p.tol(oa.u, ob.u);
            if r.abs() > 3.0 * tol && worst.is_none_or(|w| r.abs() / tol > w.0) {
                // Too long: B's value is suspect. Too short: the anchor's value is too long.
                worst = Some((r.abs() / tol, if r > 0.0 { b } else { a }, r));
            }
        }
        if let Some((_, blame, _)) = worst {
            // Readings dropped after they were measured again and read the same are more
            // likely right than the one they all disagree with: the anchor's. Blamed in turn,
            // 27 good readings of one host were dropped over 60 rounds before its too-short
            // anchor reading was (2 clusters of 128 hosts under 2 us of normal jitter). Once
            // only: blaming every anchor after it dropped the good ones one by one instead.
            let dropped = s.partners(h).iter().filter(|&&x| s.is_bad(h, x)).count();
            let blame = if dropped == SUSPECT_ANCHOR_AFTER { a } else { blame };
            return if s.times(h, blame) < p.max_times {
                Step::Remeasure(blame)
            } else {
                Step::Drop(blame)
            };
        }
    }

    // A host whose own measurements are much noisier than everyone's (a loaded host: each
    // sample late by a varying amount) cannot be placed from the deepest Eq. 1 point: the largest
    // of several noisy branch points overshoots. Its constant excess is harmless (Eq. 1 moves it
    // into its own leaf); its variation is averaged by placing it at the switch of the measured
    // paths that fits all its measurements best, from at least `NOISY_MIN` of them.
    // Unless that switch fits clearly worse than the Eq. 1 point (by more than
    // `NOISY_WORSE_TOLS` tolerances): the measurements then agree on a place where no switch
    // is yet (a loaded host's scatter fits no place well). With heavy-tailed jitter a few wide
    // intervals make a host look noisy, and taking the switch hung the first host of a new leaf
    // switch at the nearest existing one with a leaf 5 us too long (2 clusters of 128 hosts,
    // Lomax, seed 42 of `bench_infer`): its block grew a leaf switch on the wrong side of
    // another, and that cost 12 dropped readings and 14 extra rounds.
    if !p.exhaustive && p.robust {
        let mut us: Vec<f64> = obs.iter().map(|o| o.2.u).collect();
        us.sort_by(f64::total_cmp);
        if us[us.len() / 2] > p.tol_floor {
            if obs.len() < NOISY_MIN.min(t.num_hosts_in()) {
                if let Some(v) = switch_near(t, at) {
                    return Step::Around(v);
                }
            }
            if let Some((v, leaf_v, cost)) = best_fitting_switch(t, &obs, va) {
                if cost <= leaf_misfit(t, &obs, at, leaf) + NOISY_WORSE_TOLS * tol {
                    return Step::Place {
                        at: Point::At(v),
                        leaf: leaf_v,
                    };
                }
            }
        }
    }

    // A branching point on a link a little short of a switch, with a long leaf: jitter may
    // have moved the point off the switch H really leaves at (by more than the snapping
    // tolerance), and H may lie beyond it, in a branch nobody measured yet. Exploring that
    // switch's branches first costs a measurement or two; hanging H there at once grew the
    // first host of a new leaf switch 0.6 us below another leaf switch, and its whole leaf
    // after it (a star's centre duplicated below one of its leaves, 2 of 20 trials of the
    // 3-cluster, 144-host family under 2 us of normal jitter).
    let near = match at {
        Point::On { child, up } if !p.exhaustive && long(leaf) => {
            let parent = t.parent(child);
            let to_parent = t.len(child) - up;
            [(Some(child), up), (parent, to_parent)]
                .into_iter()
                .filter_map(|(x, d)| x.filter(|&x| !t.is_host(x)).map(|x| (x, d)))
                .filter(|&(_, d)| d <= NEAR_SWITCH_TOLS * tol)
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(x, _)| x)
        }
        _ => None,
    };
    if let Some(v) = near {
        let leaf_v = implied_leaf(t, &obs, Point::At(v));
        let explored = explored_at(t, s, h, v, leaf_v, &obs, p);
        let host_ok = |c: usize| long(t.leaf_len(c));
        if let Some(step) = next_branch(t, v, h, p, &explored, &host_ok, leaf_v) {
            return step;
        }
    }

    match at {
        Point::On { .. } => Step::Place { at, leaf },
        Point::At(v) => {
            let explored = explored_at(t, s, h, v, leaf, &obs, p);
            // Where H's leaf at v is a plain access link, H cannot be deeper in any branch (a
            // branch adds at least part of a link). Otherwise every switch branch may hold it,
            // and a host leaf only if that leaf is long too (a shared hidden switch lengthens
            // both).
            if !p.exhaustive && !long(leaf) {
                return Step::Place { at, leaf };
            }
            let host_ok = |c: usize| p.exhaustive || long(t.leaf_len(c));
            next_branch(t, v, h, p, &explored, &host_ok, leaf).unwrap_or(Step::Place { at, leaf })
        }
    }
}

/// H's leaf if it hangs at `at`, from every measurement (they agree when it does, deeper or
/// not): the lower median, robust to one bad value (outliers are long) and averaging the
/// jitter of the rest.
fn implied_leaf(t: &WorkTree, obs: &[(usize, usize, Obs)], at: Point) -> f64 {
    let mut leaves: Vec<f64> = obs.iter().map(|&(_, vb, ob)| ob.d - t.dist_point(vb, at)).collect();
    leaves.sort_by(f64::total_cmp);
    leaves[(leaves.len() - 1) / 2].max(0.0)
}

/// A switch this many snapping floors or less from the branching point is not ruled out by one
/// measured host beyond it (see [`explored_at`]).
///
/// Why: in a skeleton, host 31 of a leaf switch hung 0.83 us above its switch (a short link
/// the final refinement contracts). The first host of another leaf switch read 30 us to two
/// hosts of that switch, 31 one of them: its branching point snapped to the switch, the way
/// up to the core counted as ruled out through 31, and it hung below that leaf switch with a
/// leaf 4 us long. Its whole leaf switch came out split (2 clusters of 128 hosts, 2 us normal
/// jitter, trial 746 of `bench_infer`).
const SHORT_LINK_TOLS: f64 = 2.0;

/// A branching point this many snapping tolerances short of a switch, with a long leaf, has
/// that switch's branches explored before H is hung on the link (see [`locate`]).
const NEAR_SWITCH_TOLS: f64 = 3.0;

/// The branches at switch `v` that `h`'s search has explored: towards every host it measured,
/// hosts whose measurement is unusable, branches whose hosts were all measured, and branches
/// its leaf-mates ruled out.
fn explored_at(
    t: &WorkTree,
    s: &Store,
    h: usize,
    v: usize,
    leaf: f64,
    obs: &[(usize, usize, Obs)],
    p: &LocateParams,
) -> Vec<usize> {
    // A switch only a short link away (an artefact of jitter that refinement contracts later)
    // is ruled out by one host beyond it only as far as the snapping went: H's branching point
    // may lie at it as well, and H beyond it. Two hosts measured beyond it rule it out.
    let beyond: Vec<usize> = obs.iter().filter(|o| o.1 != v).map(|o| t.toward(v, o.1)).collect();
    let short = SHORT_LINK_TOLS * p.tol_floor;
    let ruled_out =
        |w: usize| t.is_host(w) || t.link_len(v, w) > short || beyond.iter().filter(|&&x| x == w).count() >= 2;
    let mut explored: Vec<usize> = beyond.iter().copied().filter(|&w| ruled_out(w)).collect();
    explored.sort_unstable();
    explored.dedup();
    // A host whose measurement is unusable counts as explored: its leaf cannot be
    // explored through anyone else.
    explored.extend(
        t.neighbors(v)
            .into_iter()
            .filter(|&w| t.host_of(w).is_some_and(|hw| s.is_bad(h, hw))),
    );
    // So does a branch whose hosts were all measured and found unusable.
    let exhausted: Vec<usize> = t
        .neighbors(v)
        .into_iter()
        .filter(|&w| {
            !explored.contains(&w)
                && t.nearest_hosts(Branch { at: v, via: w }, 1, |x| s.get(h, x).is_none())
                    .is_empty()
        })
        .collect();
    explored.extend(exhausted);
    explored.extend(excluded_by_mates(t, s, h, v, leaf, p));
    explored
}

/// Hosts that share `h`'s switch, not in the tree yet: measured from `h` at two plain access
/// links (their common switch is all that separates them). Empty while the access length is
/// unknown or the search is exhaustive.
pub(crate) fn leaf_mates(t: &WorkTree, s: &Store, h: usize, p: &LocateParams) -> Vec<usize> {
    let Some(a0) = p.access.filter(|_| !p.exhaustive) else {
        return Vec::new();
    };
    let mate_d = p.mate_distance(a0);
    s.partners(h)
        .iter()
        .copied()
        .filter(|&m| t.vertex_of(m).is_none() && !s.is_bad(h, m))
        .filter(|&m| s.get(h, m).is_some_and(|o| (o.d - mate_d).abs() <= p.flag_delta))
        .collect()
}

/// Branches at `v` that `h`'s leaf-mates (see [`leaf_mates`]) measured and found `h`'s
/// switch outside of: a mate `m` reached host `y` the long way round, through `v`
/// (`d(m, y) >= leaf + d(v, y)` within the tolerance, `leaf` being `h`'s length from `v`,
/// which a mate shares up to the difference of two access links).
///
/// Why: at a switch with many branches (a star of 16 leaf switches) a host whose switch is
/// new must rule out every branch, one measurement per round: 12 rounds and more, while its
/// mates, whose search would end beside it, waited. Each mate measuring another branch rules
/// them out several per round.
fn excluded_by_mates(t: &WorkTree, s: &Store, h: usize, v: usize, leaf: f64, p: &LocateParams) -> Vec<usize> {
    let Some(a0) = p.access else {
        return Vec::new();
    };
    let mate_d = p.mate_distance(a0);
    let mut out = Vec::new();
    for m in leaf_mates(t, s, h, p) {
        // The snapping tolerance, plus how far this pair's distance is from the typical mate
        // distance (the mate's own length from `v` differs from `h`'s by up to that). Wider margins
        // (two long-leaf margins) ruled out the right branch where leaf switches hang 2.5 us
        // below `v`: a mate there reads 5 us short of the long way round.
        let tol = p.tol_floor + (s.get(h, m).map_or(0.0, |o| o.d) - mate_d).abs();
        for &y in s.partners(m) {
            let Some(vy) = t.vertex_of(y).filter(|&vy| vy != v && !s.is_bad(m, y)) else {
                continue;
            };
            let d = s.get(m, y).expect("a partner is measured").d;
            if d >= leaf + t.dist(v, vy) - tol {
                out.push(t.toward(v, vy));
            }
        }
    }
    out
}

/// The switch branches at `v` still open for `h`'s search (most hosts first), given what `h`
/// and its leaf-mates measured: where mates of a searching host can look meanwhile.
pub(crate) fn open_branches(t: &WorkTree, s: &Store, h: usize, v: usize, leaf: f64, p: &LocateParams) -> Vec<usize> {
    let mut explored: Vec<usize> = s
        .partners(h)
        .iter()
        .filter(|&&b| !s.is_bad(h, b))
        .filter_map(|&b| t.vertex_of(b))
        .filter(|&vb| vb != v)
        .map(|vb| t.toward(v, vb))
        .collect();
    explored.extend(excluded_by_mates(t, s, h, v, leaf, p));
    let mut open: Vec<_> = t
        .neighbors(v)
        .into_iter()
        .filter(|w| !explored.contains(w) && t.host_of(*w).is_none())
        .map(|w| (branch_rank(t, v, w, h, p), w))
        .collect();
    open.sort();
    open.into_iter().map(|(_, w)| w).collect()
}

/// When exactly this many of a host's readings were dropped as inconsistent, the next
/// inconsistency is blamed on its anchor reading (see [`locate`]).
const SUSPECT_ANCHOR_AFTER: usize = 2;

/// Measurements a noisy host is placed from.
const NOISY_MIN: usize = 6;

/// How much worse (in snapping tolerances, summed over a host's measurements) the best-fitting
/// switch may explain a noisy host's measurements than its Eq. 1 point does, and still be taken
/// for its place (see `locate`).
const NOISY_WORSE_TOLS: f64 = 3.0;

/// How badly H at `at` with `leaf` explains its measurements: the sum of absolute residuals.
fn leaf_misfit(t: &WorkTree, obs: &[(usize, usize, Obs)], at: Point, leaf: f64) -> f64 {
    obs.iter()
        .map(|&(_, vb, o)| (o.d - t.dist_point(vb, at) - leaf).abs())
        .sum()
}

/// A switch at or next to point `p`.
fn switch_near(t: &WorkTree, p: Point) -> Option<usize> {
    match p {
        Point::At(v) if !t.is_host(v) => Some(v),
        Point::At(v) => t.host_parent(t.host_of(v)?).filter(|&x| !t.is_host(x)),
        Point::On { child, .. } => [Some(child), t.parent(child)]
            .into_iter()
            .flatten()
            .find(|&x| !t.is_host(x)),
    }
}

/// The switch on the paths from the anchor to the measured hosts whose implied leaves agree
/// best (least absolute deviation from their median), that median leaf, and the deviation.
fn best_fitting_switch(t: &WorkTree, obs: &[(usize, usize, Obs)], va: usize) -> Option<(usize, f64, f64)> {
    let mut candidates: Vec<usize> = obs
        .iter()
        .flat_map(|&(_, vb, _)| t.path(va, vb).into_iter().map(|(x, _)| x))
        .filter(|&x| !t.is_host(x))
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    let mut best: Option<(f64, usize, f64)> = None;
    for c in candidates {
        let mut leaves: Vec<f64> = obs.iter().map(|&(_, vb, o)| o.d - t.dist(vb, c)).collect();
        leaves.sort_by(f64::total_cmp);
        let leaf = leaves[(leaves.len() - 1) / 2];
        let cost: f64 = leaves.iter().map(|l| (l - leaf).abs()).sum();
        if best.is_none_or(|b| cost < b.0) {
            best = Some((cost, c, leaf.max(0.0)));
        }
    }
    best.map(|(cost, c, l)| (c, l, cost))
}

/// Where a branch comes in a search: host-order gap, most hosts, lowest vertex (see
/// [`branch_rank`]).
type BranchRank = (usize, std::cmp::Reverse<usize>, usize);

/// The order in which `h` explores the switch branch `v -> w` (lowest first): without the
/// host-order hint, the branch with the most hosts first (it most likely holds the new host);
/// with it, the branch holding the host nearest to `h` in host order first, then the most
/// hosts. Why: hosts are numbered along the network, so `h`'s switch is most likely where its
/// neighbours in host order are. By host count alone, the first host of a leaf switch new to a
/// 16-way star searched the star's leaves one per round, its own last as often as not (2 x 256
/// hosts under normal jitter: 7 rounds of 2 pairs at the end of a part).
fn branch_rank(t: &WorkTree, v: usize, w: usize, h: usize, p: &LocateParams) -> BranchRank {
    let b = Branch { at: v, via: w };
    if !p.hint {
        return (0, std::cmp::Reverse(t.branch_host_count(b)), w);
    }
    // One walk of the branch gives both its hosts' count and their nearest in host order.
    let hosts = t.branch_hosts(b);
    let gap = hosts.iter().map(|x| x.abs_diff(h)).min().unwrap_or(usize::MAX);
    (gap, std::cmp::Reverse(hosts.len()), w)
}

/// The next unexplored branch at switch `v` for `h`: switch branches first, in
/// [`branch_rank`] order; host leaves accepted by `check_host`.
fn next_branch(
    t: &WorkTree,
    v: usize,
    h: usize,
    p: &LocateParams,
    explored: &[usize],
    check_host: &dyn Fn(usize) -> bool,
    reach: f64,
) -> Option<Step> {
    let mut best: Option<(BranchRank, usize)> = None; // (rank, via)
    let mut host_leaf: Option<usize> = None;
    for w in t.neighbors(v) {
        if explored.contains(&w) {
            continue;
        }
        if let Some(hw) = t.host_of(w) {
            if check_host(hw) && host_leaf.is_none_or(|x| hw < x) {
                host_leaf = Some(hw);
            }
            continue;
        }
        let rank = branch_rank(t, v, w, h, p);
        if best.is_none_or(|(br, _)| rank < br) {
            best = Some((rank, w));
        }
    }
    best.map(|(_, via)| Step::Branch(Branch { at: v, via }, reach))
        .or(host_leaf.map(Step::Host))
}

/// The access length: how long a host's own link is, as a robust low quantile (the
/// `1 + count / 20`-th smallest) of the leaves of the hosts hanging from a switch in `trees` and
/// of half of every measured host-to-host distance (two hosts on one switch are two access links
/// apart, which gives the access length from the first round, before any tree has a switch).
/// `None` while nothing qualifies or where access lengths differ (then nothing may be pruned):
/// at least a fifth of the values (and eight) must lie within `spread` (or 5%) of it.
///
/// Why a quantile and not the minimum: leaves and distances carry jitter, and the minimum of
/// hundreds of them sinks by several standard deviations, making every leaf look long. Why
/// global and not "around the switch": early in a run the hosts around a switch often all hang
/// one hidden switch too high, so a local value overestimates the access length and would let
/// misplaced hosts pass unchecked. Where access links truly differ (mixed NICs), hosts with
/// slower ones are checked for nothing — extra measurements, never a wrong tree.
///
/// Leaves not longer than `floor` are left out: a (near) zero leaf is an artefact of hosts placed
/// against a wrong part of the tree, not a real link.
pub(crate) fn access_length(trees: &[&WorkTree], s: &Store, floor: f64, spread: f64) -> Option<f64> {
    let mut v: Vec<f64> = switch_leaves(trees)
        .chain(s.pairs().map(|(_, _, o)| o.d / 2.0))
        .filter(|&l| l > floor)
        .collect();
    if v.is_empty() {
        return None;
    }
    let k = v.len() / 20;
    let a0 = *v.select_nth_unstable_by(k, f64::total_cmp).1;
    // The pruning assumes every host's access link is at least `a0`, which holds where access
    // links are alike: then many values sit at the bottom together. Where they are spread (mixed
    // access links), `a0` is no bound for anyone: prune nothing.
    let near = v.iter().filter(|&&x| (x - a0).abs() <= spread.max(0.05 * a0)).count();
    (near >= (v.len() / 5).max(8)).then_some(a0)
}

/// The leaf lengths of the hosts hanging from a switch in `trees` (not those of a tree of two
/// hosts, whose one link is both leaves).
fn switch_leaves<'a>(trees: &'a [&'a WorkTree]) -> impl Iterator<Item = f64> + 'a {
    trees.iter().flat_map(|t| {
        t.hosts()
            .filter(|&h| t.host_parent(h).is_some_and(|p| !t.is_host(p)))
            .map(|h| t.leaf_len(h))
    })
}

/// The typical distance between two hosts below one switch: twice the median leaf among the
/// leaves within `spread` of the access length `a0`.
///
/// Why: `a0` is a low quantile (the pruning needs a bound), so twice it sits below the
/// distance two hosts of one switch read, by about half a long-leaf margin under normal jitter.
/// Leaf-mates judged against twice `a0` missed one true pair in six (2 clusters of 128 hosts,
/// 2 us normal jitter: 15% read more than a margin above it), and a host whose mates went
/// unrecognised ruled out a 16-way star alone, one branch per round, while they waited.
pub(crate) fn mate_distance(trees: &[&WorkTree], a0: f64, spread: f64) -> Option<f64> {
    let mut v: Vec<f64> = switch_leaves(trees).filter(|&l| (l - a0).abs() <= spread).collect();
    if v.len() < 8 {
        return None;
    }
    let k = v.len() / 2;
    Some(2.0 * *v.select_nth_unstable_by(k, f64::total_cmp).1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::PairMeasurement;

    fn params() -> LocateParams {
        LocateParams {
            exhaustive: false,
            kappa: 1.0,
            tol_floor: 1e-9,
            flag_delta: 1e-9,
            robust: true,
            max_times: 2,
            access: None,
            mate_d: None,
            hint: false,
        }
    }

    fn meas(s: &mut Store, a: usize, b: usize, d: f64) {
        s.add(PairMeasurement::from_set_minima(a, b, &[2.0 * d; 3]));
    }

    /// Hosts 0,1 on switch X (leaves 1), hosts 2 (leaf 1) and 3 (leaf `l3`) on switch Y, X - Y = 4.
    fn tree_with(l3: f64) -> WorkTree {
        let mut t = WorkTree::new(8);
        t.init_pair(0, 2, 6.0);
        let (v0, v2) = (t.vertex_of(0).unwrap(), t.vertex_of(2).unwrap());
        let p = t.point_on_path(v0, v2, 1.0, 0.0);
        t.attach(p, 1, 1.0);
        let (v0, v2) = (t.vertex_of(0).unwrap(), t.vertex_of(2).unwrap());
        let p = t.point_on_path(v2, v0, 1.0, 0.0);
        t.attach(p, 3, l3);
        t
    }

    fn tree() -> WorkTree {
        tree_with(1.0)
    }

    /// A star of three leaf switches: A {0, 1}, B {8, 9, 10}, C {4, 5}; returns it and its centre.
    fn star() -> (WorkTree, usize) {
        let mut t = WorkTree::new(12);
        t.init_pair(0, 8, 6.0);
        let (v0, v8) = (t.vertex_of(0).unwrap(), t.vertex_of(8).unwrap());
        t.attach(t.point_on_path(v0, v8, 1.0, 0.0), 1, 1.0);
        let (v0, v8) = (t.vertex_of(0).unwrap(), t.vertex_of(8).unwrap());
        t.attach(t.point_on_path(v8, v0, 1.0, 0.0), 9, 1.0);
        let (a, b) = (t.host_parent(0).unwrap(), t.host_parent(8).unwrap());
        t.attach(Point::At(b), 10, 1.0);
        let core = t.attach(t.point_on_path(a, b, 2.0, 0.0), 4, 3.0);
        let core = t.parent(core).unwrap();
        let v4 = t.vertex_of(4).unwrap();
        t.attach(t.point_on_path(v4, core, 2.0, 0.0), 5, 1.0);
        (t, core)
    }

    #[test]
    fn mates_are_judged_against_the_typical_mate_distance() {
        // Hosts 4 and 5 read 2.15 apart; access links of 1 (a low quantile), margin 0.1.
        let t = tree();
        let mut s = Store::new(8);
        meas(&mut s, 4, 5, 2.15);
        let p = LocateParams {
            access: Some(1.0),
            flag_delta: 0.1,
            ..params()
        };
        assert!(leaf_mates(&t, &s, 4, &p).is_empty());
        let typical = LocateParams { mate_d: Some(2.1), ..p };
        assert_eq!(leaf_mates(&t, &s, 4, &typical), vec![5]);
    }

    #[test]
    fn the_mate_distance_is_twice_the_median_access_like_leaf() {
        // Eight leaves of 1.0 .. 1.7 around an access length of 1, one of 3 (a long leaf, not
        // an access link): twice the median of the eight.
        let mut t = WorkTree::new(12);
        t.init_pair(0, 1, 2.0);
        let (v0, v1) = (t.vertex_of(0).unwrap(), t.vertex_of(1).unwrap());
        t.attach(t.point_on_path(v0, v1, 1.0, 0.0), 2, 1.2);
        let sw = t.host_parent(0).unwrap();
        for (h, l) in [(3, 1.3), (4, 1.4), (5, 1.5), (6, 1.6), (7, 1.7), (8, 3.0)] {
            t.attach(Point::At(sw), h, l);
        }
        let d = mate_distance(&[&t], 1.0, 0.75).unwrap();
        // Leaves 1.0, 1.0, 1.2 .. 1.7: the median (upper) of eight is 1.4.
        assert!((d - 2.8).abs() < 1e-9, "{d}");
        assert_eq!(mate_distance(&[&t], 1.0, 0.1), None, "fewer than 8 leaves near a0");
    }

    #[test]
    fn the_host_order_hint_explores_the_branch_of_a_hosts_neighbours_first() {
        let (t, core) = star();
        assert_eq!(t.neighbors(core).len(), 3, "a star of three leaf switches");
        let toward = |h: usize| t.toward(core, t.vertex_of(h).unwrap());
        let explored = [toward(0)];
        let any = |_: usize| true;
        let plain = params();
        let hinted = LocateParams { hint: true, ..params() };
        let branch = |p: &LocateParams, h: usize| match next_branch(&t, core, h, p, &explored, &any, 2.0) {
            Some(Step::Branch(b, _)) => b.via,
            other => panic!("expected a branch, got {other:?}"),
        };
        // Without the hint, the branch with the most hosts (B) first; with it, the branch of
        // host 6's neighbours in host order (C: 5 is one away), and B for host 11 (10).
        assert_eq!(branch(&plain, 6), toward(8));
        assert_eq!(branch(&hinted, 6), toward(4));
        assert_eq!(branch(&hinted, 11), toward(8));
        let mut c_hosts = t.branch_hosts(Branch {
            at: core,
            via: toward(4),
        });
        c_hosts.sort_unstable();
        assert_eq!(c_hosts, vec![4, 5]);
        // Upwards too: from C's switch, the branch towards the core holds 0, 1 and 8-10.
        let c = t.host_parent(4).unwrap();
        let mut up = t.branch_hosts(Branch { at: c, via: core });
        up.sort_unstable();
        assert_eq!(up, vec![0, 1, 8, 9, 10]);
        // Mates take the open branches in the same order.
        let s = Store::new(12);
        let open = open_branches(&t, &s, 6, core, 2.0, &hinted);
        assert_eq!(open.first(), Some(&toward(4)), "{open:?}");
    }

    #[test]
    fn walks_the_paper_search() {
        let t = tree();
        let mut s = Store::new(8);
        let p = params();
        assert_eq!(locate(&t, &s, 5, &p), Step::Start);
        // Host 5 truly hangs from Y with leaf 1: d(5,0) = 6, d(5,2) = 2.
        meas(&mut s, 5, 0, 6.0);
        let x = t.host_parent(0).unwrap();
        let y = t.host_parent(2).unwrap();
        // One measurement: any other host, preferably as far from 0 as host 5 is (6).
        assert_eq!(
            locate(&t, &s, 5, &p),
            Step::Branch(
                Branch {
                    at: t.vertex_of(0).unwrap(),
                    via: x
                },
                6.0
            )
        );
        meas(&mut s, 5, 2, 2.0);
        // Anchor 2 (nearest), B = 0: g = (2 + 6 - 6)/2 = 1 = Y. At Y, branches to 2 and to 0
        // are explored; with no access length known, host 3 may share a hidden switch with 5.
        assert_eq!(locate(&t, &s, 5, &p), Step::Host(3));
        // Knowing the access length (1): 5's leaf at Y is one, nothing can hide in it.
        let pruned = LocateParams {
            access: Some(1.0),
            ..params()
        };
        assert_eq!(
            locate(&t, &s, 5, &pruned),
            Step::Place {
                at: Point::At(y),
                leaf: 1.0
            }
        );
        // The exhaustive search of [Shirai2007] checks 3 regardless.
        let paper = LocateParams {
            exhaustive: true,
            ..pruned
        };
        assert_eq!(locate(&t, &s, 5, &paper), Step::Host(3));
    }

    #[test]
    fn one_measurement_suffices_for_a_plain_sibling() {
        let t = tree();
        let mut s = Store::new(8);
        let pruned = LocateParams {
            access: Some(1.0),
            ..params()
        };
        // d(5,2) = 2 = leaf(2) + access: 5 hangs from 2's switch.
        meas(&mut s, 5, 2, 2.0);
        let y = t.host_parent(2).unwrap();
        assert_eq!(
            locate(&t, &s, 5, &pruned),
            Step::Place {
                at: Point::At(y),
                leaf: 1.0
            }
        );
        // d(6,2) = 2.5: a longer leaf may hide a switch; ask for a second host.
        meas(&mut s, 6, 2, 2.5);
        assert!(matches!(locate(&t, &s, 6, &pruned), Step::Branch(..)));
    }

    #[test]
    fn long_leaves_are_checked_against_long_siblings() {
        // Host 3 hangs 3 below Y: 2 through a hidden switch Z plus its access link of 1.
        let t = tree_with(3.0);
        let mut s = Store::new(8);
        let pruned = LocateParams {
            access: Some(1.0),
            ..params()
        };
        // Host 6 also hangs from Z (access 1): d(6,2) = 1 + 2 + 1, d(6,0) = 1 + 2 + 4 + 1.
        meas(&mut s, 6, 2, 4.0);
        meas(&mut s, 6, 0, 8.0);
        // At Y, 6's leaf is 3 (long) and so is 3's: they may share a hidden switch.
        assert_eq!(locate(&t, &s, 6, &pruned), Step::Host(3));
        meas(&mut s, 6, 3, 2.0);
        match locate(&t, &s, 6, &pruned) {
            Step::Place {
                at: Point::On { child, up },
                leaf,
            } => {
                assert_eq!(child, t.vertex_of(3).unwrap());
                assert!((up - 1.0).abs() < 1e-9 && (leaf - 1.0).abs() < 1e-9, "{up} {leaf}");
            }
            s => panic!("{s:?}"),
        }
        // A short sibling is not checked: a hidden switch would make its access shorter than 1.
        let t = tree();
        let mut s = Store::new(8);
        meas(&mut s, 6, 2, 4.0);
        meas(&mut s, 6, 0, 8.0);
        let y = t.host_parent(2).unwrap();
        assert_eq!(
            locate(&t, &s, 6, &pruned),
            Step::Place {
                at: Point::At(y),
                leaf: 3.0
            }
        );
    }

    #[test]
    fn inconsistent_values_are_remeasured_then_dropped() {
        let t = tree();
        let mut s = Store::new(8);
        let p = params();
        meas(&mut s, 5, 2, 2.0);
        meas(&mut s, 5, 0, 6000.0); // a stall: far too long for the triangle via 2
        assert_eq!(locate(&t, &s, 5, &p), Step::Remeasure(0));
        meas(&mut s, 5, 0, 7000.0);
        assert_eq!(locate(&t, &s, 5, &p), Step::Drop(0));
        s.mark_bad(5, 0);
        // Without it, one usable measurement remains: ask for another host.
        assert!(matches!(locate(&t, &s, 5, &p), Step::Branch(b, _) if b.at == t.vertex_of(2).unwrap()));
    }

    #[test]
    fn a_leaf_mate_rules_out_a_branch_it_reached_the_long_way_round() {
        // Hosts 4 and 5 share a switch Z hanging 2 below X (access links 1): d(4, 5) = 2. At X,
        // host 4's leaf is 3. Mate 5 read host 2 (behind Y, 5 from X) at 8 = 3 + 5: Y's branch
        // is out for 4 too; at 4 (Z inside Y's branch) it would not be.
        let t = tree();
        let x = t.host_parent(0).unwrap();
        let towards_y = t.toward(x, t.vertex_of(2).unwrap());
        let p = LocateParams {
            access: Some(1.0),
            tol_floor: 0.1,
            flag_delta: 0.1,
            ..params()
        };
        for (d52, out) in [(8.0, true), (4.0, false)] {
            let mut s = Store::new(8);
            meas(&mut s, 4, 5, 2.0);
            meas(&mut s, 5, 2, d52);
            assert_eq!(leaf_mates(&t, &s, 4, &p), vec![5]);
            assert_eq!(
                excluded_by_mates(&t, &s, 4, x, 3.0, &p).contains(&towards_y),
                out,
                "d(5, 2) = {d52}"
            );
            assert_eq!(!open_branches(&t, &s, 4, x, 3.0, &p).contains(&towards_y), out);
        }
        // Not a mate: 6 is two access links and a switch link away.
        let mut s = Store::new(8);
        meas(&mut s, 4, 6, 4.0);
        assert!(leaf_mates(&t, &s, 4, &p).is_empty());
    }

    /// `d` one-way, with set minima spread so that the pair's interval `u` is `u`.
    fn meas_wide(s: &mut Store, a: usize, b: usize, d: f64, u: f64) {
        s.add(PairMeasurement::from_set_minima(
            a,
            b,
            &[2.0 * d, 2.0 * (d + u), 2.0 * (d + u)],
        ));
    }

    #[test]
    fn a_noisy_looking_host_goes_where_its_readings_agree_not_to_the_nearest_switch() {
        // Host 3 hangs 3 below Y (access 1: a long leaf, a hidden switch may sit in it). Host 5
        // hangs from a switch W in that leaf, 2 below Y, with a leaf of 1, and every interval
        // of its readings is wide (0.2 against a floor of 0.05), so it counts as noisy.
        let t = tree_with(3.0);
        let p = LocateParams {
            tol_floor: 0.05,
            flag_delta: 0.3,
            access: Some(1.0),
            ..params()
        };
        let y = t.host_parent(2).unwrap();
        let mut s = Store::new(8);
        for (b, d) in [(0, 8.0), (1, 8.0), (2, 4.0), (3, 2.0)] {
            meas_wide(&mut s, 5, b, d, 0.2);
        }
        // The readings agree on W exactly; the best switch, Y, explains them 4 worse (a leaf of
        // 3 there): W it is, a new switch on 3's leaf, 1 above 3.
        match locate(&t, &s, 5, &p) {
            Step::Place {
                at: Point::On { child, up },
                leaf,
            } => {
                assert_eq!(Some(child), t.vertex_of(3));
                assert!((up - 1.0).abs() < 1e-9 && (leaf - 1.0).abs() < 1e-9, "{up} {leaf}");
            }
            s => panic!("{s:?}"),
        }
        // A loaded host at Y whose readings scatter (late by 0 to 0.5): its deepest Eq. 1
        // point overshoots Y by 0.25 onto the link to X, and fits no better than Y does: Y.
        let mut s = Store::new(8);
        for (b, d) in [(0, 6.4), (1, 6.0), (2, 2.5), (3, 4.3)] {
            meas_wide(&mut s, 6, b, d, 0.2);
        }
        match locate(&t, &s, 6, &p) {
            Step::Place { at, .. } => assert_eq!(at, Point::At(y)),
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn a_point_just_short_of_a_switch_with_a_long_leaf_explores_that_switch_first() {
        // Host 5 hangs from a new switch W, 2 below Y (access 1): d(5,2) = 4, but its reading
        // to 3 came out 0.2 short, so Eq. 1 puts its branching point on 3's leaf, 0.1 below Y.
        let t = tree();
        let mut s = Store::new(8);
        let p = LocateParams {
            tol_floor: 0.05,
            flag_delta: 0.3,
            access: Some(1.0),
            ..params()
        };
        meas(&mut s, 5, 2, 4.0);
        meas(&mut s, 5, 3, 3.8);
        let x = t.host_parent(0).unwrap();
        let y = t.host_parent(2).unwrap();
        // Hanging there at once would give 5 a leaf of 2.9 on 3's leaf; the branch towards X,
        // which nobody measured, is explored first.
        match locate(&t, &s, 5, &p) {
            Step::Branch(b, _) => assert_eq!((b.at, b.via), (y, x)),
            s => panic!("{s:?}"),
        }
        // Once it is, the point stands: nothing else is open at Y.
        meas(&mut s, 5, 0, 8.0);
        assert!(matches!(
            locate(&t, &s, 5, &p),
            Step::Place {
                at: Point::On { .. },
                ..
            }
        ));
        // A point well inside the link (1 from Y: more than three tolerances) is placed at once.
        let mut s = Store::new(8);
        meas(&mut s, 6, 2, 4.0);
        meas(&mut s, 6, 3, 2.0);
        assert!(matches!(
            locate(&t, &s, 6, &p),
            Step::Place {
                at: Point::On { .. },
                ..
            }
        ));
    }

    #[test]
    fn a_pair_interval_widens_the_snapping_tolerance_only_so_far() {
        let p = LocateParams {
            kappa: 2.0,
            tol_floor: 0.05,
            ..params()
        };
        assert!((p.tol(0.01, 0.0) - 0.05).abs() < 1e-12, "the floor");
        assert!((p.tol(0.05, 0.0) - 0.1).abs() < 1e-12, "kappa times the intervals");
        assert!((p.tol(1.0, 0.0) - TOL_CAP_FLOORS * 0.05).abs() < 1e-12, "capped");
        let paper = LocateParams { exhaustive: true, ..p };
        assert!((paper.tol(1.0, 0.0) - 2.0).abs() < 1e-12, "[Shirai2007]'s rule is kept");
    }

    #[test]
    fn after_two_dropped_readings_the_anchor_is_suspected() {
        let t = tree();
        let mut s = Store::new(8);
        let p = params();
        meas(&mut s, 5, 2, 2.0);
        meas(&mut s, 5, 0, 6000.0);
        assert_eq!(locate(&t, &s, 5, &p), Step::Remeasure(0));
        // Two of 5's readings were dropped already (measured twice, inconsistent both times):
        // the reading they all disagree with, the anchor's, is measured again instead.
        for x in [6, 7] {
            meas(&mut s, 5, x, 3.0);
            s.mark_bad(5, x);
        }
        assert_eq!(locate(&t, &s, 5, &p), Step::Remeasure(2));
        meas(&mut s, 5, 2, 2.0);
        assert_eq!(locate(&t, &s, 5, &p), Step::Drop(2));
        // Once: with the anchor dropped too, the next inconsistency is blamed as before.
        s.mark_bad(5, 2);
        meas(&mut s, 5, 3, 2.0);
        assert_eq!(locate(&t, &s, 5, &p), Step::Remeasure(0));
    }
}
