//! Joining the trees of far-apart parts (see `parts`) from coarse measurements between them.
//!
//! In a tree, every path from part `c`'s hosts to part `j`'s hosts leaves `c`'s subtree at one
//! point `p` (its exit towards `j`) and enters `j`'s at one point `q`, so each measured pair
//! `(a, b)` satisfies `d(a, b) = d(a, p) + delta + d(q, b)`. Given the part trees, `p` and `q`
//! are the points that make `d(a, b) - d(a, p) - d(q, b)` the same for every pair: found by a
//! search over switch pairs, then refined along links by alternating one side at a time (on a
//! link, the best position balances the medians of the hosts on either side). The spread is
//! measured as the mean absolute deviation from the median, so a few inflated one-sample
//! measurements do not move the fit. A part whose exits towards different parts disagree (its
//! subtree holds the junction of others) does not fit this model: the graft fails and the
//! caller falls back to one tree. Exits that lie apart but explain the pairs alike (no pair
//! starts between them) are no disagreement: the data cannot place them.
//!
//! With one exit per part, the distances between exits (the medians) form a small tree metric
//! over the parts, joined by [`joining::join`] (two parts: one link); each part's tree hangs at
//! its exit, split from a link where needed.

use super::joining;
use super::tree::{Point, WorkTree};
use crate::util::fasthash::FastMap;

/// Pairs per pair of parts below which an exit cannot be placed.
const MIN_PAIRS: usize = 3;

/// Alternating refinements of the two exits of a pair of parts.
const SWEEPS: usize = 3;

/// Why the part trees do not graft into one tree (the caller then measures more pairs between
/// the parts, or falls back to one tree). Part numbers index the trees given to [`join`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GraftError {
    /// A host is in none of the part trees (a bug of the caller).
    HostInNoPart { host: usize },
    /// Too few coarse pairs between parts `c` and `j` to place their exits.
    TooFewPairs { c: usize, j: usize },
    /// Part `c` leaves towards part `j` elsewhere than towards the others: its subtree holds
    /// the junction of other parts, or a reading (or the part's tree) is off.
    ExitsDisagree {
        c: usize,
        j: usize,
        off_s: f64,
        allowed_s: f64,
    },
    /// Part `c`'s exit falls on one of its hosts (hosts are leaves).
    ExitAtHost { c: usize },
    /// The exits of parts `c` and `j` come out at no positive distance (or none at all).
    ExitsNotApart { c: usize, j: usize, apart_s: f64 },
}

impl std::fmt::Display for GraftError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            GraftError::HostInNoPart { host } => write!(f, "host {host} is in no part"),
            GraftError::TooFewPairs { c, j } => {
                write!(f, "parts {c} and {j}: fewer than {MIN_PAIRS} pairs measured between them")
            }
            GraftError::ExitsDisagree {
                c,
                j,
                off_s,
                allowed_s,
            } => write!(
                f,
                "part {c} leaves towards part {j} {:.2} us away from where it leaves towards the others (allowed {:.2} us)",
                off_s * 1e6,
                allowed_s * 1e6
            ),
            GraftError::ExitAtHost { c } => write!(f, "part {c} would leave the network through a host"),
            GraftError::ExitsNotApart { c, j, apart_s } => {
                write!(f, "parts {c} and {j}: exits {:.2} us apart", apart_s * 1e6)
            }
        }
    }
}

impl std::error::Error for GraftError {}

/// Median and mean absolute deviation from it.
fn spread(r: &[f64]) -> (f64, f64) {
    let mut v = r.to_vec();
    let i = v.len() / 2;
    let med = *v.select_nth_unstable_by(i, f64::total_cmp).1;
    (med, r.iter().map(|x| (x - med).abs()).sum::<f64>() / r.len() as f64)
}

/// How far off a point placed from residuals `r` may be: twice the standard error of a median
/// over half of them (the hosts on one side of a link), from their robust spread (1.4826 x MAD,
/// which heavy-tailed one-sample measurements do not inflate).
fn placement_error(r: &[f64]) -> f64 {
    if r.len() < 2 {
        return 0.0;
    }
    median_error(robust_sigma(r), r.len())
}

/// 1.4826 x the median absolute deviation from the median of `r` (0 when empty).
fn robust_sigma(r: &[f64]) -> f64 {
    if r.is_empty() {
        return 0.0;
    }
    let (med, _) = spread(r);
    let dev: Vec<f64> = r.iter().map(|x| (x - med).abs()).collect();
    1.4826 * spread(&dev).0
}

/// Twice the standard error of a median over half of `n` readings of noise `sigma`.
fn median_error(sigma: f64, n: usize) -> f64 {
    2.0 * 1.2533 * sigma / (n.max(2) as f64 / 2.0).sqrt()
}

/// Distance between two points of a tree: the path leaves each link through one of its ends.
fn point_dist(t: &WorkTree, p: Point, q: Point) -> f64 {
    let ends = |p: Point| match p {
        Point::At(v) => vec![(v, 0.0)],
        Point::On { child, up } => vec![(child, up), (t.parent(child).expect("a link"), t.len(child) - up)],
    };
    if let (Point::On { child: a, up: x }, Point::On { child: b, up: y }) = (p, q) {
        if a == b {
            return (x - y).abs();
        }
    }
    let mut best = f64::INFINITY;
    for (u, du) in ends(p) {
        for &(v, dv) in &ends(q) {
            best = best.min(du + t.dist(u, v) + dv);
        }
    }
    best
}

/// The vertices an exit may be at: the switches, or every vertex of a tree without switches
/// (one host, or two hosts joined by one link).
fn vertex_candidates(t: &WorkTree) -> Vec<Point> {
    let few = t.switches().next().is_none();
    t.vertices().filter(|&v| few || !t.is_host(v)).map(Point::At).collect()
}

/// The links an exit may lie on: between switches, or any link of a tree without switches
/// (an exit on an access link is not told apart from its switch). Yields `(child, parent)`.
fn link_candidates(t: &WorkTree) -> impl Iterator<Item = (usize, usize)> + '_ {
    let few = t.switches().next().is_none();
    t.vertices().filter_map(move |u| {
        let w = t.parent(u)?;
        (few || !(t.is_host(u) || t.is_host(w))).then_some((u, w))
    })
}

/// A point on a link within `snap` of a switch at one of its ends is that switch: a point a
/// fraction of a microsecond beside it would be a switch that does not exist.
fn snap_to_switch(t: &WorkTree, p: Point, snap: f64) -> Point {
    let Point::On { child, up } = p else { return p };
    let parent = t.parent(child).expect("a link");
    if up <= snap && !t.is_host(child) {
        Point::At(child)
    } else if t.len(child) - up <= snap && !t.is_host(parent) {
        Point::At(parent)
    } else {
        p
    }
}

/// Where the paths to the other side leave `t`: the point minimising the spread of
/// `y[k] - d(hosts[k], point)` (`y`: the distance of each pair's far end beyond the exit, plus
/// the unknown length between the exits), among the vertex candidates and, on each candidate
/// link, the position that balances the medians of the hosts on either side; snapped to a
/// switch within `snap` or the placement error. Returns the point and its spread.
fn best_point(t: &WorkTree, hosts: &[usize], y: &[f64], snap: f64) -> (Point, f64) {
    let vs: Vec<usize> = hosts
        .iter()
        .map(|&h| t.vertex_of(h).expect("host in its part's tree"))
        .collect();
    let resid = |p: Point| -> Vec<f64> { vs.iter().zip(y).map(|(&v, &yk)| yk - t.dist_point(v, p)).collect() };
    let mut cands = vertex_candidates(t);
    for (u, w) in link_candidates(t) {
        let l = t.len(u);
        let (mut below, mut above) = (Vec::new(), Vec::new());
        for (&v, &yk) in vs.iter().zip(y) {
            if t.is_ancestor(u, v) {
                below.push(yk - t.dist(v, u));
            } else {
                above.push(yk - t.dist(v, w));
            }
        }
        if below.is_empty() || above.is_empty() || l <= 0.0 {
            continue; // all on one side: the vertices decide
        }
        // Residuals: below - up, above - (l - up); equal medians at this `up`.
        let up = (spread(&below).0 - spread(&above).0 + l) / 2.0;
        if up > 0.0 && up < l {
            cands.push(Point::On { child: u, up });
        }
    }
    let best = cands
        .into_iter()
        .map(|p| (p, spread(&resid(p)).1))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("a part's tree has a vertex")
        .0;
    let p = snap_to_switch(t, best, snap.max(placement_error(&resid(best))));
    (p, spread(&resid(p)).1)
}

/// Points on each link tried by [`common_exit`] (besides the vertices and the exits fitted
/// towards each partner alone).
const GRID: usize = 16;

/// How much farther apart a part's exits may be on the last try before the caller infers one
/// tree over all hosts. Why: the allowed distance is the placement error of the coarse pairs,
/// which shrinks as rounds add pairs, but the part trees' own errors (a leaf switch's hosts
/// hung 0.3 us too far from the core, say) do not. After five more rounds (126 pairs between
/// two 64-host parts) an exit fitted towards one partner alone still sat 1.1-1.6 us up a leaf
/// switch's uplink, 1.2x the allowed 0.95 us, and one tree took 2.9 s (4 x 256, normal jitter,
/// seed 366). Refusals of grafts that are right came out at most 2.3x the allowance (208 in
/// 8,000 trials of the far-apart families, seeds 1-400); a part holding the junction of others
/// is as far off as the link between them (30 us in `tests/infer.rs`). An exit kept within
/// this of the truth misplaces a part by microseconds on paths of milliseconds.
pub(crate) const LAST_TRY_ALLOWANCE: f64 = 2.0;

/// Exits towards one partner that differ from the common exit are a misfit only when the mean
/// absolute deviation of that pair of parts' residuals grows by more than this many noise
/// scales over the square root of their pairs (its standard error is about 0.6 of that).
const SPREAD_NOISE: f64 = 1.2;

/// Exits towards one partner that differ from the common exit are a misfit only when at least
/// this many of that pair of parts' pairs start nearer the partner's own exit than the common
/// one (see [`join`]).
const MIN_SIDE_PAIRS: usize = 2;

/// Part `c`'s exit fitted to its pairs towards every partner `j` (at `partner[j]`): the point
/// minimising the sum over partners of the spread of their residuals, among the switches,
/// `extra` points, and a grid along every link between switches; a point on a link within the
/// placement error of a switch is that switch.
fn common_exit(
    trees: &[WorkTree],
    links: &FastMap<(usize, usize), Link>,
    c: usize,
    partner: &[Point],
    tol: f64,
    extra: impl Iterator<Item = Point>,
) -> Point {
    let t = &trees[c];
    let m = trees.len();
    let res = |p: Point, j: usize| {
        let l = &links[&(c.min(j), c.max(j))];
        if c < j {
            residuals(trees, l, p, partner[j])
        } else {
            residuals(trees, l, partner[j], p)
        }
    };
    let cost = |p: Point| (0..m).filter(|&j| j != c).map(|j| spread(&res(p, j)).1).sum::<f64>();
    let mut cands = vertex_candidates(t);
    cands.extend(extra);
    for (u, _) in link_candidates(t) {
        cands.extend((1..GRID).map(|i| Point::On {
            child: u,
            up: t.len(u) * i as f64 / GRID as f64,
        }));
    }
    let best = cands
        .into_iter()
        .map(|p| (p, cost(p)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("a part's tree has a vertex")
        .0;
    // Centred residuals of all partners together tell the placement error.
    let centred: Vec<f64> = (0..m)
        .filter(|&j| j != c)
        .flat_map(|j| {
            let r = res(best, j);
            let med = spread(&r).0;
            r.into_iter().map(move |x| x - med)
        })
        .collect();
    snap_to_switch(t, best, tol.max(placement_error(&centred)))
}

/// The coarse pairs between two parts, oriented `(a in c, b in j, one-way distance)`.
struct Link {
    c: usize,
    j: usize,
    pairs: Vec<(usize, usize, f64)>,
}

/// Exits `(p in c, q in j)` of one pair of parts: a joint search over the vertex candidates of
/// both, then alternating refinement of one side at a time.
fn fit_pair(trees: &[WorkTree], l: &Link, snap: f64) -> (Point, Point) {
    let (tc, tj) = (&trees[l.c], &trees[l.j]);
    let a: Vec<usize> = l.pairs.iter().map(|p| p.0).collect();
    let b: Vec<usize> = l.pairs.iter().map(|p| p.1).collect();
    let d: Vec<f64> = l.pairs.iter().map(|p| p.2).collect();
    let dists = |t: &WorkTree, hosts: &[usize], p: Point| -> Vec<f64> {
        hosts
            .iter()
            .map(|&h| t.dist_point(t.vertex_of(h).unwrap(), p))
            .collect()
    };
    let qs: Vec<(Point, Vec<f64>)> = vertex_candidates(tj)
        .into_iter()
        .map(|q| (q, dists(tj, &b, q)))
        .collect();
    let mut best: Option<(Point, Point, f64)> = None;
    for p in vertex_candidates(tc) {
        let dp = dists(tc, &a, p);
        for (q, dq) in &qs {
            let r: Vec<f64> = (0..d.len()).map(|k| d[k] - dp[k] - dq[k]).collect();
            let c = spread(&r).1;
            if best.is_none_or(|x| c < x.2) {
                best = Some((p, *q, c));
            }
        }
    }
    let (mut p, mut q, _) = best.expect("parts have vertices");
    for _ in 0..SWEEPS {
        let dq = dists(tj, &b, q);
        let y: Vec<f64> = (0..d.len()).map(|k| d[k] - dq[k]).collect();
        p = best_point(tc, &a, &y, snap).0;
        let dp = dists(tc, &a, p);
        let y: Vec<f64> = (0..d.len()).map(|k| d[k] - dp[k]).collect();
        q = best_point(tj, &b, &y, snap).0;
    }
    (p, q)
}

/// Residuals of a pair of parts for exits `ec`, `ej`: median (the length between the exits)
/// and spread.
fn between(trees: &[WorkTree], l: &Link, ec: Point, ej: Point) -> (f64, f64) {
    spread(&residuals(trees, l, ec, ej))
}

/// `d(a, b) - d(a, ec) - d(ej, b)` of every pair between two parts.
fn residuals(trees: &[WorkTree], l: &Link, ec: Point, ej: Point) -> Vec<f64> {
    l.pairs
        .iter()
        .map(|&(a, b, d)| {
            d - trees[l.c].dist_point(trees[l.c].vertex_of(a).unwrap(), ec)
                - trees[l.j].dist_point(trees[l.j].vertex_of(b).unwrap(), ej)
        })
        .collect()
}

/// Join the part trees (disjoint hosts, every one of the `num_hosts` hosts in one of them) with
/// the coarse pairs `far` (host, host, one-way distance; pairs inside a part are ignored).
/// `tol` (seconds): the least snapping tolerance of exits to switches, and the least distance
/// allowed between a part's exits towards different partners (both grow with the noise of the
/// coarse pairs). `allowance` scales the distance allowed between a part's exits: 1, or
/// [`LAST_TRY_ALLOWANCE`] on the caller's last try. Errors say why the parts do not fit one
/// tree.
pub(crate) fn join(
    num_hosts: usize,
    trees: &[WorkTree],
    far: &[(usize, usize, f64)],
    tol: f64,
    allowance: f64,
) -> Result<WorkTree, GraftError> {
    let m = trees.len();
    log::trace!("graft: {m} parts, tolerance {:.3} us", tol * 1e6);
    let mut part_of = vec![usize::MAX; num_hosts];
    for (c, t) in trees.iter().enumerate() {
        for h in t.hosts() {
            part_of[h] = c;
        }
    }
    if let Some(h) = part_of.iter().position(|&c| c == usize::MAX) {
        return Err(GraftError::HostInNoPart { host: h });
    }
    let mut links: FastMap<(usize, usize), Link> = FastMap::default();
    for &(a, b, d) in far {
        let (ca, cb) = (part_of[a], part_of[b]);
        if ca == cb {
            continue;
        }
        let (c, j, x, y) = if ca < cb { (ca, cb, a, b) } else { (cb, ca, b, a) };
        links
            .entry((c, j))
            .or_insert_with(|| Link {
                c,
                j,
                pairs: Vec::new(),
            })
            .pairs
            .push((x, y, d));
    }
    let mut fits: FastMap<(usize, usize), (Point, Point)> = FastMap::default();
    for c in 0..m {
        for j in (c + 1)..m {
            let Some(l) = links.get(&(c, j)).filter(|l| l.pairs.len() >= MIN_PAIRS) else {
                return Err(GraftError::TooFewPairs { c, j });
            };
            fits.insert((c, j), fit_pair(trees, l, tol));
        }
    }
    // One exit per part, fitted to the pairs towards all its partners at once (each partner
    // at its exit, each pair of parts with its own length between exits); twice, the second
    // time against the partners' common exits. It must agree with the exit fitted towards each
    // partner alone, or the part holds the junction of others.
    let exit_towards = |c: usize, j: usize| if c < j { fits[&(c, j)].0 } else { fits[&(j, c)].1 };
    let mut partner: Vec<Vec<Point>> = (0..m)
        .map(|c| {
            (0..m)
                .map(|j| if c == j { Point::At(0) } else { exit_towards(j, c) })
                .collect()
        })
        .collect();
    let mut exits: Vec<Point> = Vec::new();
    for _ in 0..2 {
        exits = (0..m)
            .map(|c| {
                let own = (0..m).filter(|&j| j != c).map(|j| exit_towards(c, j));
                common_exit(trees, &links, c, &partner[c], tol, own)
            })
            .collect();
        partner = vec![exits.clone(); m];
    }
    // The noise of one coarse pair, pooled over every pair of parts: a handful of pairs
    // between two parts cannot say how far their own exits may be off (three residuals once
    // gave a spread of 0.1 us where one-sample readings scatter by 1.4 us).
    let pooled: Vec<f64> = fits
        .iter()
        .flat_map(|(&(c, j), &(x, y))| {
            let r = residuals(trees, &links[&(c, j)], x, y);
            let (med, _) = spread(&r);
            r.into_iter().map(move |v| v - med)
        })
        .collect();
    let sigma = robust_sigma(&pooled);
    for c in 0..m {
        for j in (0..m).filter(|&j| j != c) {
            let own = exit_towards(c, j);
            let off = point_dist(&trees[c], exits[c], own);
            let (x, y) = fits[&(c.min(j), c.max(j))];
            let r = residuals(trees, &links[&(c.min(j), c.max(j))], x, y);
            let allowed = allowance * tol.max(2.0 * placement_error(&r).max(median_error(sigma, r.len())));
            // Apart, but do the pairs tell? Where none of them reaches the part of c's tree
            // between the two exits (no host of the leaf switch between them was measured
            // towards j), both explain every pair alike and the position towards j alone is a
            // tie broken at random: an 8-part graft failed on it in 1 of 20 trials and fell
            // back to one tree (2.9 s). The graft is refused only when the common exits
            // explain these pairs worse than their own by more than the noise allows.
            let worse = || {
                let (xc, xj) = if c < j {
                    (exits[c], exits[j])
                } else {
                    (exits[j], exits[c])
                };
                spread(&residuals(trees, &links[&(c.min(j), c.max(j))], xc, xj)).1 - spread(&r).1
            };
            // And is it more than one reading? Moving the exit towards the hosts of one pair
            // changes only that pair's residual (the others shift alike), so a single reading
            // far off pulls the exit to its host's leaf switch: one 6 us short one-sample
            // reading (normal jitter, 1.4 us scatter) refused an 8-part graft three times, as
            // the pairs measured after it came from other leaf switches, and one tree was
            // inferred instead (2.5 s).
            let side = || {
                let l = &links[&(c.min(j), c.max(j))];
                let t = &trees[c];
                l.pairs
                    .iter()
                    .map(|&(x, y, _)| if c < j { x } else { y })
                    .filter(|&h| {
                        let v = t.vertex_of(h).expect("host in its part's tree");
                        t.dist_point(v, own) < t.dist_point(v, exits[c])
                    })
                    .count()
            };
            if off > allowed && worse() > SPREAD_NOISE * sigma / (r.len() as f64).sqrt() && side() >= MIN_SIDE_PAIRS {
                return Err(GraftError::ExitsDisagree {
                    c,
                    j,
                    off_s: off,
                    allowed_s: allowed,
                });
            }
        }
        if log::log_enabled!(log::Level::Trace) {
            let t = &trees[c];
            let e = exits[c];
            let d: Vec<String> = t
                .hosts()
                .map(|h| format!("{h}:{:.1}", t.dist_point(t.vertex_of(h).unwrap(), e) * 1e6))
                .collect();
            log::trace!("graft: part {c} exit {e:?}; us from its hosts {}", d.join(" "));
        }
    }
    // Hosts are leaves: an exit at a host only makes sense for a part of one host.
    for (c, &e) in exits.iter().enumerate() {
        if let Point::At(v) = e {
            if trees[c].is_host(v) && trees[c].num_hosts_in() > 1 {
                return Err(GraftError::ExitAtHost { c });
            }
        }
    }
    // Lengths between exits.
    let mut delta = vec![0.0f64; m * m];
    for c in 0..m {
        for j in (c + 1)..m {
            let (med, dev) = between(trees, &links[&(c, j)], exits[c], exits[j]);
            log::debug!(
                "graft: parts {c} - {j}: {:.1} us between exits (spread {:.2} us over {} pairs)",
                med * 1e6,
                dev * 1e6,
                links[&(c, j)].pairs.len()
            );
            if med.is_nan() || med <= 0.0 {
                return Err(GraftError::ExitsNotApart { c, j, apart_s: med });
            }
            delta[c * m + j] = med;
            delta[j * m + c] = med;
        }
    }
    let core = joining::join(m, &|x, y| delta[x * m + y]).tree;
    Ok(assemble(num_hosts, trees, &exits, &core, tol))
}

/// One tree from the part trees hung at their exits and the core joining the exits (core host
/// `c` stands for part `c`'s exit). Core links to an exit shorter than `tol` are contracted.
fn assemble(num_hosts: usize, trees: &[WorkTree], exits: &[Point], core: &WorkTree, tol: f64) -> WorkTree {
    let mut next = num_hosts;
    let mut edges: Vec<(usize, usize, f64)> = Vec::new();
    let mut exit_id = Vec::with_capacity(trees.len());
    for (t, &e) in trees.iter().zip(exits) {
        let mut t = t.clone();
        let ev = match e {
            Point::At(v) => v,
            Point::On { child, up } => t.split(child, up),
        };
        let mut id: FastMap<usize, usize> = FastMap::default();
        for v in t.vertices() {
            let g = t.host_of(v).unwrap_or_else(|| {
                next += 1;
                next - 1
            });
            id.insert(v, g);
        }
        for v in t.vertices() {
            if let Some(p) = t.parent(v) {
                edges.push((id[&v], id[&p], t.len(v)));
            }
        }
        exit_id.push(id[&ev]);
    }
    // Core: hosts are exits; a switch within `tol` of a (switch) exit is that exit.
    let mut cid: FastMap<usize, usize> = FastMap::default();
    for v in core.vertices() {
        if let Some(c) = core.host_of(v) {
            cid.insert(v, exit_id[c]);
        }
    }
    for v in core.vertices() {
        let Some(c) = core.host_of(v) else { continue };
        let Some(w) = core.neighbors(v).into_iter().find(|&w| !core.is_host(w)) else {
            continue;
        };
        if core.link_len(v, w) < tol && exit_id[c] >= num_hosts && !cid.contains_key(&w) {
            cid.insert(w, exit_id[c]);
        }
    }
    for v in core.vertices() {
        cid.entry(v).or_insert_with(|| {
            next += 1;
            next - 1
        });
    }
    for v in core.vertices() {
        if let Some(p) = core.parent(v) {
            if cid[&v] != cid[&p] {
                edges.push((cid[&v], cid[&p], core.len(v)));
            }
        }
    }
    // Orient from host 0 and build.
    let mut adj: FastMap<usize, Vec<(usize, f64)>> = FastMap::default();
    for &(u, v, l) in &edges {
        adj.entry(u).or_default().push((v, l));
        adj.entry(v).or_default().push((u, l));
    }
    let root = 0;
    let mut links = Vec::with_capacity(edges.len());
    let mut seen = std::collections::HashSet::from([root]);
    let mut stack = vec![root];
    while let Some(u) = stack.pop() {
        for &(v, l) in adj.get(&u).map_or(&[][..], |x| &x[..]) {
            if seen.insert(v) {
                links.push((v, u, l));
                stack.push(v);
            }
        }
    }
    let mut t = WorkTree::new(num_hosts);
    t.build_rooted(root, &links);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Part trees of a known tree: part 0 = hosts 0..4 under switches s0 {0, 1} and s1 {2, 3}
    /// joined by a 4 us link; part 1 = hosts 4..8 likewise. The exit of part 0 sits 1 us above
    /// s0 on the s0-s1 link, that of part 1 at its switch s3 (hosts 6, 7); 1000 us between.
    fn parts() -> (Vec<WorkTree>, Vec<(usize, usize, f64)>) {
        let us = 1e-6;
        let mk = |base: usize| {
            let mut t = WorkTree::new(8);
            // hosts base, base+1 on s_a; base+2, base+3 on s_b; access 2 us.
            t.init_pair(base, base + 2, 8.0 * us);
            let (va, vb) = (t.vertex_of(base).unwrap(), t.vertex_of(base + 2).unwrap());
            let sa = t.point_on_path(va, vb, 2.0 * us, 0.0);
            t.attach(sa, base + 1, 2.0 * us);
            let vb = t.vertex_of(base + 2).unwrap();
            let va = t.vertex_of(base).unwrap();
            let sb = t.point_on_path(va, vb, 6.0 * us, 0.0);
            t.attach(sb, base + 3, 2.0 * us);
            t
        };
        let trees = vec![mk(0), mk(4)];
        // True distance from host h of part 0 to its exit (1 us above s0 towards s1): hosts 0, 1
        // 3 us, hosts 2, 3 5 us; from part 1's exit (s_b = s3) hosts 4, 5 6 us, hosts 6, 7 2 us.
        let to_exit = |h: usize| match h {
            0 | 1 => 3.0,
            2 | 3 => 5.0,
            4 | 5 => 6.0,
            _ => 2.0,
        };
        let jitter = [0.3, 0.0, 0.1, 0.2, 9.0, 0.0, 0.1, 0.05];
        let mut far = Vec::new();
        for (k, (a, b)) in [(0, 4), (1, 6), (2, 5), (3, 7), (0, 7), (2, 6)].into_iter().enumerate() {
            far.push((a, b, (to_exit(a) + 1000.0 + to_exit(b) + jitter[k]) * us));
        }
        (trees, far)
    }

    #[test]
    fn exits_and_length_are_recovered() {
        let (trees, far) = parts();
        let t = join(8, &trees, &far, 0.5e-6, 1.0).unwrap();
        let d = |a: usize, b: usize| t.dist(t.vertex_of(a).unwrap(), t.vertex_of(b).unwrap()) * 1e6;
        // One inflated reading (9 us) does not move the fit.
        assert!((d(0, 4) - 1009.0).abs() < 0.5, "{}", d(0, 4));
        assert!((d(1, 6) - 1005.0).abs() < 0.5, "{}", d(1, 6));
        assert!((d(3, 5) - 1011.0).abs() < 0.5, "{}", d(3, 5));
        // Inside the parts nothing changed.
        assert!((d(0, 1) - 4.0).abs() < 1e-9 && (d(0, 3) - 8.0).abs() < 1e-9);
        assert_eq!(t.num_hosts_in(), 8);
    }

    #[test]
    fn too_few_pairs_is_an_error() {
        let (trees, far) = parts();
        let e = join(8, &trees, &far[..2], 0.5e-6, 1.0).unwrap_err();
        assert_eq!(e, GraftError::TooFewPairs { c: 0, j: 1 });
        assert!(e.to_string().contains("fewer than 3 pairs"), "{e}");
    }

    /// Three parts of 4 hosts (switches {a, a+1} and {a+2, a+3}, 4 us apart, access 2 us).
    fn parts_of_four() -> Vec<WorkTree> {
        let us = 1e-6;
        let mk = |base: usize| {
            let mut t = WorkTree::new(12);
            t.init_pair(base + 2, base, 8.0 * us);
            let (vb, va) = (t.vertex_of(base + 2).unwrap(), t.vertex_of(base).unwrap());
            t.attach(t.point_on_path(vb, va, 2.0 * us, 0.0), base + 3, 2.0 * us);
            let (vb, va) = (t.vertex_of(base + 2).unwrap(), t.vertex_of(base).unwrap());
            t.attach(t.point_on_path(vb, va, 6.0 * us, 0.0), base + 1, 2.0 * us);
            t
        };
        vec![mk(0), mk(4), mk(8)]
    }

    /// Microseconds from a host of [`parts_of_four`] to its part's switch of {a, a+1}.
    fn to_exit(h: usize) -> f64 {
        if h % 4 < 2 {
            2.0
        } else {
            6.0
        }
    }

    #[test]
    fn an_exit_the_pairs_cannot_place_is_no_disagreement() {
        // Three parts of 4 hosts (switches {a, a+1} and {a+2, a+3}, 4 us apart, access 2 us),
        // each leaving at the switch of {a, a+1}, 500 us from a common core. Part 0's pairs
        // towards part 2 all start at hosts 2 and 3: every exit between part 0's switches
        // explains them alike, and the fit towards part 2 alone takes the first candidate, the
        // switch of {2, 3} (created first), 4 us from the exit the other pairs place.
        let us = 1e-6;
        let trees = parts_of_four();
        let jitter = [0.2, 0.0, 0.1, 0.15, 0.05, 0.1];
        let sets = [
            [(0, 4), (1, 6), (2, 5), (3, 7), (0, 7), (2, 6)],
            [(2, 8), (3, 9), (2, 10), (3, 11), (2, 9), (3, 8)],
            [(4, 8), (5, 10), (6, 9), (7, 11), (4, 11), (6, 10)],
        ];
        let mut far = Vec::new();
        for pairs in sets {
            for (k, (a, b)) in pairs.into_iter().enumerate() {
                far.push((a, b, (to_exit(a) + 1000.0 + to_exit(b) + jitter[k]) * us));
            }
        }
        let t = join(12, &trees, &far, 0.3e-6, 1.0).unwrap();
        let d = |a: usize, b: usize| t.dist(t.vertex_of(a).unwrap(), t.vertex_of(b).unwrap()) * 1e6;
        assert!((d(0, 8) - 1004.0).abs() < 0.5, "{}", d(0, 8));
        assert!((d(2, 10) - 1012.0).abs() < 0.5, "{}", d(2, 10));
        assert!((d(1, 5) - 1004.0).abs() < 0.5, "{}", d(1, 5));
        assert!((d(0, 2) - 8.0).abs() < 1e-9, "the parts are kept");
    }

    #[test]
    fn one_reading_far_off_does_not_move_an_exit() {
        // The parts of the test above, every exit at the switch of {a, a+1}. Between parts 0
        // and 1 one pair starts at host 2 (the other switch of part 0) and reads 5 us short:
        // towards part 1 alone the exit then fits best at the switch of {2, 3}, 4 us from the
        // exit the other pairs place, though only that one reading says so.
        let us = 1e-6;
        let trees = parts_of_four();
        let jitter = [0.2, 0.0, 0.1, 0.15, 0.05];
        let sets = [
            [(0, 4), (1, 5), (0, 5), (1, 4), (2, 4)],
            [(0, 8), (1, 9), (2, 10), (3, 11), (0, 9)],
            [(4, 8), (5, 10), (6, 9), (7, 11), (4, 11)],
        ];
        let mut far = Vec::new();
        for pairs in sets {
            for (k, (a, b)) in pairs.into_iter().enumerate() {
                let off = if (a, b) == (2, 4) { -5.0 } else { jitter[k] };
                far.push((a, b, (to_exit(a) + 1000.0 + to_exit(b) + off) * us));
            }
        }
        let t = join(12, &trees, &far, 0.3e-6, 1.0).unwrap();
        let d = |a: usize, b: usize| t.dist(t.vertex_of(a).unwrap(), t.vertex_of(b).unwrap()) * 1e6;
        assert!((d(0, 4) - 1004.0).abs() < 0.5, "{}", d(0, 4));
        assert!((d(2, 4) - 1008.0).abs() < 0.5, "{}", d(2, 4));
        assert!((d(0, 8) - 1004.0).abs() < 0.5, "{}", d(0, 8));
    }
}
