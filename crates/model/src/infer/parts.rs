//! Far-apart parts: a network whose hosts fall into groups joined by routed or wide-area links
//! (round trips far above the switched network's) is inferred part by part, and the parts are
//! joined from one-sample measurements.
//!
//! Why: the statistic of [Shirai2007] spends dozens of round trips on every pair, which is what
//! microsecond-scale structure needs; on a 5 ms path one such pair costs 0.2-0.45 s, more than
//! the whole inference of the parts. Mixing one-sample measurements of far pairs into the
//! search of fine structure makes it fragile (their error is larger than the snapping
//! tolerance). So far pairs are kept out of the search entirely:
//! 1. **Detection** ([`detect`]), host by host: chains of neighbours in host order, a threshold
//!    from the gap in the readings ([`far_threshold`]), and rounds of pairs between the groups
//!    of near hosts until every two groups are joined by a near reading or kept apart by far
//!    readings that agree. Nothing of a part straddles another, whatever the cluster sizes.
//! 2. **Parts grow concurrently** ([`grow`]), each as the single tree grew before: its blocks
//!    ([`blocks_of`]) grow their own trees and a skeleton of two hosts per block absorbs them;
//!    every round holds requests of every part. Refinement also runs on all parts in shared
//!    rounds.
//! 3. **Graft** (`graft`): the coarse pairs between parts place each part's exit point in its
//!    tree and the distances between exits; a small tree joins the exits. A graft that does not
//!    fit gets more readings ([`more_far`]), the last time with exits allowed further apart,
//!    then falls back to one tree over all hosts.
//!
//! Only speed depends on any of this being right: groups left undecided are one part, measured
//! in full, and so is everything when the graft cannot be made to fit.

use super::driver::{Builder, Run};
use super::locate::LocateParams;
use super::store::Store;
use super::tree::WorkTree;
use super::InferError;
use std::collections::VecDeque;

/// Smallest ratio between consecutive round trips (sorted) that counts as the gap between near
/// and far: within a switched network, round trips grow by the few microseconds a hop adds and
/// jitter fills the spaces between them; a routed or wide-area path multiplies them.
pub const MIN_FAR_GAP: f64 = 3.0;

/// Round trips below this (seconds) are never far: a pair measured in full at 150 us costs
/// 36 x 150 us = 5.4 ms, about what one coordination across such a path costs anyway, so
/// grafting from one-sample readings (less precise) would save nothing worth its risk.
pub const MIN_FAR_RTT_S: f64 = 150e-6;

/// Share of the one-sample round trips that may fall inside a gap (jitter spikes of near pairs:
/// under a heavy-tailed jitter a few percent of single round trips land anywhere above the LAN),
/// and never fewer than [`GAP_OUTLIERS_MIN`].
pub const GAP_OUTLIERS: f64 = 0.03;

/// Readings always allowed inside a gap. With one, two clusters 0.2 ms apart in 64 hosts
/// (the chain rounds' 63 readings, one of them far) lost their gap to two spikes in 5 of 20
/// trials, and were measured as one part in full: 0.12-0.15 s of probing instead of 0.05-0.06.
pub const GAP_OUTLIERS_MIN: usize = 2;

/// The far threshold found in the data (`rtts`: round trips in seconds, one sample each): just
/// above the near readings, where the first gap of ratio [`MIN_FAR_GAP`] begins.
///
/// The top of the near readings is the lowest reading `lo` that a gap follows: a reading of at
/// least [`MIN_FAR_GAP`] x `lo` (and [`MIN_FAR_RTT_S`]) with at most [`GAP_OUTLIERS`] of the
/// readings (at least [`GAP_OUTLIERS_MIN`]) between them, so a few spikes just above the near
/// readings do not hide the gap. The threshold is the geometric middle of the first reading of at least
/// [`MIN_FAR_GAP`] x `lo` and the reading below it (not below [`MIN_FAR_RTT_S`]): everything
/// above the lowest gap is far
/// (clusters 0.2 ms and 5 ms apart are all parts of their own). Infinite when there is no gap:
/// no far-apart parts.
///
/// Why this is safe against jitter: a one-sample round trip can only be inflated, so a spike
/// can only make a near pair look far, and [`detect`] needs several far readings that agree
/// before it keeps two groups of hosts apart; a spike cannot make a far pair look near. Erring
/// low is preferred: a spike taken for far costs a reading, while a far path taken for near
/// joins two clusters into one part, measured in full.
pub fn far_threshold(rtts: &[f64]) -> f64 {
    let mut v: Vec<f64> = rtts.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    v.sort_by(f64::total_cmp);
    let allowed = ((GAP_OUTLIERS * v.len() as f64).floor() as usize).max(GAP_OUTLIERS_MIN);
    for (i, &lo) in v.iter().enumerate() {
        let want = (MIN_FAR_GAP * lo).max(MIN_FAR_RTT_S);
        // The highest reading with at most `allowed` readings strictly between it and `lo`.
        let reach = v[(i + 1 + allowed).min(v.len() - 1)];
        if reach >= want && reach > lo {
            let at = i + 1 + v[i + 1..].partition_point(|&x| x < want);
            return (v[at - 1] * v[at]).sqrt().max(MIN_FAR_RTT_S);
        }
    }
    f64::INFINITY
}

/// Far readings that must agree before two groups of hosts are declared far apart; also what
/// the graft needs to place an exit (`graft::MIN_PAIRS`).
pub(crate) const FAR_READINGS: usize = 3;

/// The two lowest far readings between two groups agree within this ratio: a real far path puts
/// every pair between the groups behind the same long link (they differ by the groups' own
/// spans, tens of microseconds), while spikes that make near pairs look far land anywhere.
pub(crate) const FAR_AGREE: f64 = 1.5;

/// Rounds of pairs across groups after the two chain rounds; groups still undecided are then
/// taken as one part (measured in full: slower, never wrong). Why 6: a round costs one far
/// round trip and its coordination (about 10 ms at 2.5 ms apart), one part measured in full
/// 1-2 s; with 4, 8 clusters of 8 hosts under Lomax jitter left 8 pairs of groups undecided
/// and took 1.4 s (seed 1309 of `bench_infer -- 1200 trials 8`). Goal rows of the far-apart
/// families on seeds 1601-2800, together with `GRAFT_RETRIES` 2 -> 5: 1174 -> 1181 of 1200.
pub(crate) const MAX_CROSS_ROUNDS: usize = 6;

/// Readings per pair of parts the graft gets, at most [`GRAFT_ROUNDS`] more rounds for them.
pub(crate) const GRAFT_READINGS: usize = 8;

/// Rounds of pairs across parts for the graft, after the parts are decided.
pub(crate) const GRAFT_ROUNDS: usize = 2;

/// The far-apart parts found by [`detect`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Detected {
    /// Hosts of each part, sorted; one part when nothing is far.
    pub parts: Vec<Vec<usize>>,
    /// One-sample one-way readings between hosts of different parts, for the graft.
    pub far: Vec<(usize, usize, f64)>,
    /// The far threshold (round trip, seconds): given or found in the data; infinite when the
    /// data shows no gap.
    pub far_rtt_s: f64,
}

/// Find far-apart parts at host granularity from one-sample round trips (with the locality
/// hint: neighbours in host order are likely near).
///
/// 1. **Chains.** Two rounds pair every host with its neighbours in host order, `(2p, 2p+1)`
///    then `(2p+1, 2p+2)`. Runs of near neighbours form groups: with hosts numbered along the
///    network, one group per cluster, whatever the cluster sizes (blocks of a fixed size
///    straddled clusters, which joined them into one part measured in full). With `warm`, the
///    first round is measured with the full protocol (far pairs cut short at the threshold or
///    [`MIN_FAR_RTT_S`]) and serves as the warm-up of insertion.
/// 2. **Threshold.** Given, or the first gap in all readings so far ([`far_threshold`]),
///    recomputed after every round until the groups are decided; no gap, one part.
/// 3. **Groups apart.** Groups are the components of the near readings (a near reading proves a
///    pair near: jitter only inflates). Two groups are far apart once [`FAR_READINGS`] far
///    readings join them and the lowest two agree within [`FAR_AGREE`]. Rounds of pairs
///    between undecided groups (each group's hosts taken in a random order, so they come from
///    different switches) follow until every pair of groups is decided, at most
///    [`MAX_CROSS_ROUNDS`]; undecided groups are then joined. A spike can thus only cost a
///    reading, and a false "far" needs three spikes that agree.
pub(crate) fn detect(run: &mut Run, n: usize, given: Option<f64>, warm: bool) -> Result<Detected, InferError> {
    let one = |far_rtt_s: f64| Detected {
        parts: vec![(0..n).collect()],
        far: Vec::new(),
        far_rtt_s,
    };
    if n < 4 {
        return Ok(one(f64::INFINITY));
    }
    let chain_a: Vec<(usize, usize)> = (0..n / 2).map(|p| (2 * p + 1, 2 * p)).collect();
    let chain_b: Vec<(usize, usize)> = (0..(n - 1) / 2).map(|p| (2 * p + 2, 2 * p + 1)).collect();
    let mut readings: Vec<(usize, usize, f64)> = Vec::new();
    if warm {
        let cut = given.unwrap_or(MIN_FAR_RTT_S);
        readings.extend(run.measure_far(&chain_a, cut)?);
        for &(a, b) in &chain_a {
            if let Some(o) = run.store.get(a, b) {
                readings.push((a, b, o.d));
            }
        }
    } else {
        readings.extend(run.measure_once(&chain_a)?);
    }
    readings.extend(run.measure_once(&chain_b)?);
    let mut order: Vec<Vec<usize>> = Vec::new();
    let mut cursor: Vec<usize> = Vec::new();
    let mut ordered_for: Vec<usize> = Vec::new();
    let mut rounds = 0;
    let mut graft_rounds = 0;
    // The threshold the groups were decided under, once they are: the graft's rounds only add
    // readings between parts already apart, and a threshold recomputed from them could move
    // (one more spike inside the gap lowers it to the spike) and split a decided group.
    let mut decided: Option<f64> = None;
    // The last threshold found in the data, kept when a later round's readings hide its gap.
    let mut found: Option<f64> = None;
    loop {
        let thr = decided
            .or(given)
            .unwrap_or_else(|| far_threshold(&readings.iter().map(|r| 2.0 * r.2).collect::<Vec<f64>>()));
        // A gap once found is not lost to the spikes that later rounds add inside it.
        let thr = if thr.is_finite() { thr } else { found.unwrap_or(thr) };
        found = thr.is_finite().then_some(thr);
        if !thr.is_finite() {
            return Ok(one(thr));
        }
        let group = near_components(n, &readings, thr);
        let k = group.iter().max().map_or(0, |g| g + 1);
        if k == 1 {
            return Ok(one(thr));
        }
        let mut apart: crate::util::fasthash::FastMap<(usize, usize), Vec<f64>> = Default::default();
        for &(a, b, d) in &readings {
            let (x, y) = (group[a], group[b]);
            if x != y {
                apart.entry((x.min(y), x.max(y))).or_default().push(2.0 * d);
            }
        }
        let settled = |x: usize, y: usize| apart.get(&(x, y)).is_some_and(|r| agree(r));
        let needy: Vec<(usize, usize)> = (0..k)
            .flat_map(|x| ((x + 1)..k).map(move |y| (x, y)))
            .filter(|&(x, y)| !settled(x, y))
            .collect();
        let members = members_of(&group, k);
        log::trace!(
            "far-apart parts: threshold {:.1} us, groups {:?}, {} undecided: {:?}",
            thr * 1e6,
            members.iter().map(Vec::len).collect::<Vec<_>>(),
            needy.len(),
            needy.iter().take(8).map(|p| (p, apart.get(p))).collect::<Vec<_>>()
        );
        // Once every pair of groups is decided, the graft gets a few more readings where it has
        // few: it places each part's exit from them, and one-sample readings are rough.
        let needy = if needy.is_empty() && graft_rounds < GRAFT_ROUNDS {
            graft_rounds += 1;
            decided = Some(thr);
            (0..k)
                .flat_map(|x| ((x + 1)..k).map(move |y| (x, y)))
                .filter(|p| apart.get(p).map_or(0, Vec::len) < GRAFT_READINGS)
                .collect()
        } else {
            needy
        };
        let settled_all = needy.iter().all(|&(x, y)| settled(x, y));
        if needy.is_empty() || rounds == MAX_CROSS_ROUNDS {
            let mut sets = crate::util::dsu::Dsu::new(k);
            for &(x, y) in needy.iter().filter(|&&(x, y)| !settled(x, y)) {
                sets.union(x, y);
            }
            if !settled_all {
                log::debug!(
                    "far-apart parts: {} pair(s) of groups undecided after {rounds} rounds; joined",
                    needy.len()
                );
            }
            return Ok(finish(n, &members, &mut sets, readings, thr));
        }
        // Spread orders and cursors follow the groups as they are now (groups only grow by
        // joining, so a new grouping restarts the orders).
        if ordered_for != group {
            order = members.iter().map(|m| shuffled(m, &mut run.rng)).collect();
            cursor = vec![0; k];
            ordered_for = group.clone();
        }
        // Groups next to each other in host order first: a spike that broke a chain left two
        // such groups, and a few more readings join them again. Then the fewest readings.
        let mut adjacent: crate::util::fasthash::FastSet<(usize, usize)> = Default::default();
        for w in group.windows(2) {
            if w[0] != w[1] {
                adjacent.insert((w[0].min(w[1]), w[0].max(w[1])));
            }
        }
        let mut needy = needy;
        needy.sort_by_key(|p| (!adjacent.contains(p), apart.get(p).map_or(0, Vec::len)));
        let pairs = cross_group_pairs(&order, &mut cursor, &needy);
        if pairs.is_empty() {
            rounds = MAX_CROSS_ROUNDS;
            continue;
        }
        readings.extend(run.measure_once(&pairs)?);
        rounds += 1;
    }
}

/// One more round of one-sample readings between every pair of `parts` (as many pairs as their
/// hosts allow), each part giving its hosts in a random order: for a graft that
/// needs more than it had.
pub(crate) fn more_far(run: &mut Run, parts: &[Vec<usize>]) -> Result<Vec<(usize, usize, f64)>, InferError> {
    let order: Vec<Vec<usize>> = parts.iter().map(|p| shuffled(p, &mut run.rng)).collect();
    let mut cursor = vec![0; order.len()];
    let k = parts.len();
    let all: Vec<(usize, usize)> = (0..k).flat_map(|x| ((x + 1)..k).map(move |y| (x, y))).collect();
    let pairs = cross_group_pairs(&order, &mut cursor, &all);
    run.measure_once(&pairs)
}

/// Enough far readings between two groups, the lowest two within [`FAR_AGREE`].
fn agree(rtts: &[f64]) -> bool {
    if rtts.len() < FAR_READINGS {
        return false;
    }
    let mut v = rtts.to_vec();
    v.sort_by(f64::total_cmp);
    v[1] <= FAR_AGREE * v[0]
}

/// Group of every host: the components of readings below `thr` (round trip), numbered in
/// order of their least host.
fn near_components(n: usize, readings: &[(usize, usize, f64)], thr: f64) -> Vec<usize> {
    let mut sets = crate::util::dsu::Dsu::new(n);
    for &(a, b, d) in readings {
        if 2.0 * d < thr {
            sets.union(a, b);
        }
    }
    numbered(n, |h| sets.find(h))
}

/// Number the classes of `rep` (a representative per item) in order of first appearance.
fn numbered(n: usize, mut rep: impl FnMut(usize) -> usize) -> Vec<usize> {
    let mut index = vec![usize::MAX; n];
    let mut next = 0;
    (0..n)
        .map(|h| {
            let r = rep(h);
            if index[r] == usize::MAX {
                index[r] = next;
                next += 1;
            }
            index[r]
        })
        .collect()
}

fn members_of(group: &[usize], k: usize) -> Vec<Vec<usize>> {
    let mut m = vec![Vec::new(); k];
    for (h, &g) in group.iter().enumerate() {
        m[g].push(h);
    }
    m
}

/// `hosts` in a random order: picks in turn come from all over the group (different switches),
/// and the hosts two groups give each other are unrelated. Orders in fixed steps (bit-reversed
/// or golden-ratio positions) paired the i-th host of one cluster with the i-th of another, so
/// where a reading came from on one side predicted where it went on the other, and the graft
/// could not tell the two exits apart: on the testbed model it failed in 8 trials of 20.
fn shuffled(hosts: &[usize], rng: &mut crate::util::rng::Rng) -> Vec<usize> {
    let mut o = hosts.to_vec();
    rng.shuffle(&mut o);
    o
}

/// One round of disjoint pairs between the groups of `needy` (neediest first), as many as the
/// groups' hosts allow: passes over `needy`, one pair per pair of groups and pass, each group
/// giving its hosts in `order` from its `cursor` on (advanced past the hosts used).
fn cross_group_pairs(order: &[Vec<usize>], cursor: &mut [usize], needy: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut used = vec![0usize; order.len()];
    let mut pairs = Vec::new();
    loop {
        let before = pairs.len();
        for &(x, y) in needy {
            if used[x] < order[x].len() && used[y] < order[y].len() {
                let pick = |g: usize| order[g][(cursor[g] + used[g]) % order[g].len()];
                pairs.push((pick(x), pick(y)));
                used[x] += 1;
                used[y] += 1;
            }
        }
        if pairs.len() == before {
            break;
        }
    }
    for (c, u) in cursor.iter_mut().zip(&used) {
        *c += u;
    }
    pairs
}

/// The parts once undecided groups are joined in `sets`, and the readings between them.
fn finish(
    n: usize,
    members: &[Vec<usize>],
    sets: &mut crate::util::dsu::Dsu,
    readings: Vec<(usize, usize, f64)>,
    thr: f64,
) -> Detected {
    let mut part_rep = vec![0usize; n];
    for (g, m) in members.iter().enumerate() {
        let r = sets.find(g);
        for &h in m {
            part_rep[h] = r;
        }
    }
    let part = numbered(n, |h| part_rep[h]);
    let k = part.iter().max().map_or(0, |p| p + 1);
    let far = readings.into_iter().filter(|&(a, b, _)| part[a] != part[b]).collect();
    Detected {
        parts: members_of(&part, k),
        far,
        far_rtt_s: thr,
    }
}

/// Blocks of hosts for insertion, within each part: the part's hosts with the pairs of the
/// first chain round `(2p, 2p+1)` kept adjacent (their warm-up measurement is then the one
/// already taken), cut into runs of at most `group` hosts (even lengths), each in the spread
/// order of `spread` (offset by `offset`). Returns the blocks and, per part, its block indices.
pub(crate) fn blocks_of(
    parts: &[Vec<usize>],
    group: usize,
    mut offset: impl FnMut(usize) -> usize,
    spread: impl Fn(usize, usize) -> Vec<usize>,
) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut blocks = Vec::new();
    let mut split = Vec::new();
    for part in parts {
        let inside: std::collections::HashSet<usize> = part.iter().copied().collect();
        let (mut paired, mut single) = (Vec::new(), Vec::new());
        for &h in part {
            if inside.contains(&(h ^ 1)) {
                paired.push(h);
            } else {
                single.push(h);
            }
        }
        paired.extend(single);
        let len = paired.len();
        let k = len.div_ceil(group).max(1);
        let mut ids = Vec::new();
        let mut lo = 0;
        for c in 0..k {
            let hi = if c + 1 == k { len } else { ((c + 1) * len / k + 1) & !1 };
            let chunk = &paired[lo..hi.max(lo)];
            ids.push(blocks.len());
            blocks.push(
                spread(chunk.len(), offset(chunk.len()))
                    .into_iter()
                    .map(|i| chunk[i])
                    .collect(),
            );
            lo = hi.max(lo);
        }
        split.push(ids);
    }
    (blocks, split)
}

/// Grow one tree per part (`parts`: block indices into `blocks`, each block an insertion order)
/// in shared rounds, and return them in the order of `parts`, every host of a part in its tree.
pub(crate) fn grow(
    run: &mut Run,
    num_hosts: usize,
    blocks: &[Vec<usize>],
    parts: &[Vec<usize>],
    params: &dyn Fn(&Store, &[&WorkTree]) -> LocateParams,
) -> Result<Vec<Builder>, InferError> {
    // A skeleton of two hosts per block for every part of several blocks, then the blocks,
    // each feeding its part's skeleton.
    let mut builders: Vec<Builder> = Vec::new();
    let mut main_of: Vec<usize> = Vec::with_capacity(parts.len());
    let mut feed: Vec<Option<usize>> = Vec::new();
    for part in parts {
        if part.len() > 1 {
            main_of.push(builders.len());
            builders.push(Builder::new(
                num_hosts,
                part.iter().flat_map(|&b| blocks[b].iter().take(2).copied()).collect(),
            ));
            feed.push(None);
        } else {
            main_of.push(usize::MAX);
        }
    }
    for (pi, part) in parts.iter().enumerate() {
        for &b in part {
            if part.len() == 1 {
                main_of[pi] = builders.len();
            }
            feed.push((part.len() > 1).then_some(main_of[pi]));
            builders.push(Builder::new(num_hosts, blocks[b].iter().copied().collect()));
        }
    }
    run.grow_feeding(&mut builders, params, &feed)?;
    let mut slots: Vec<Option<Builder>> = builders.into_iter().map(Some).collect();
    let mut mains: Vec<Builder> = main_of
        .iter()
        .map(|&i| slots[i].take().expect("one main builder per part"))
        .collect();
    // Hosts a block moved after they were merged (or never merged) go in now.
    let mut missing = false;
    for (main, part) in mains.iter_mut().zip(parts) {
        let left: VecDeque<usize> = part
            .iter()
            .flat_map(|&b| blocks[b].iter().copied())
            .filter(|&h| main.tree.vertex_of(h).is_none())
            .collect();
        missing |= !left.is_empty();
        main.pending = left;
    }
    if missing {
        run.grow(&mut mains, params)?;
    }
    Ok(mains)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_far_threshold_sits_in_the_first_gap() {
        let us = |v: &[f64]| v.iter().map(|x| x * 1e-6).collect::<Vec<f64>>();
        // A LAN: 20-60 us round trips, no gap -> no far parts.
        assert!(far_threshold(&us(&[20.0, 25.0, 31.0, 44.0, 52.0, 60.0])).is_infinite());
        // Hops of a few microseconds times 3 are still no far path: the upper side is short.
        assert!(far_threshold(&us(&[10.0, 11.0, 40.0, 41.0, 120.0])).is_infinite());
        // Clusters 0.2 ms and 5 ms apart: the first gap, between the LAN and 200 us, decides.
        let t = far_threshold(&us(&[20.0, 30.0, 45.0, 210.0, 230.0, 5000.0, 5100.0]));
        assert!((t - MIN_FAR_RTT_S).abs() < 1e-12, "{t}");
        let t = far_threshold(&us(&[20.0, 30.0, 45.0, 2000.0, 2100.0, 5000.0]));
        assert!((t - (45.0f64 * 2000.0).sqrt() * 1e-6).abs() < 1e-9, "{t}");
        // Two spikes between the LAN and one far reading, 63 readings in all (the chain rounds
        // of two clusters 0.2 ms apart; seen in the families' 2 x 64 under Lomax jitter).
        let mut chains: Vec<f64> = (0..60).map(|i| 20.0 + 0.8 * i as f64).collect();
        chains.extend([150.3, 162.7, 262.4]);
        let t = far_threshold(&us(&chains));
        assert!((t - (162.7f64 * 262.4).sqrt() * 1e-6).abs() < 1e-9, "{t}");
        // A spike just above the LAN does not hide the gap (readings between are allowed),
        // and the threshold lies between it and the far readings.
        let mut lan: Vec<f64> = (0..60).map(|i| 20.0 + i as f64).collect();
        lan.extend([120.0, 300.0, 310.0, 320.0]);
        let t = far_threshold(&us(&lan));
        assert!((t - (120.0f64 * 300.0).sqrt() * 1e-6).abs() < 1e-9, "{t}");
        // Spikes inside a wide gap: far at 680 us, spikes at 161 and 195 us (3% of 70 readings
        // allowed between: 2). The threshold errs low (spikes read far; `detect` resolves them)
        // but stays above the LAN and below the far readings.
        let mut lan: Vec<f64> = (0..60).map(|i| 10.0 + 0.7 * i as f64).collect();
        lan.extend([161.0, 195.0]);
        lan.extend((0..8).map(|i| 680.0 + i as f64));
        let t = far_threshold(&us(&lan));
        assert!(t > 51.3e-6 && t < 680e-6, "{t}");
        let dense: Vec<f64> = (0..200).map(|i| 20.0 * 1.02f64.powi(i)).collect();
        assert!(far_threshold(&us(&dense)).is_infinite());
        // Garbage is ignored; nothing measured, nothing far.
        assert!(far_threshold(&[f64::NAN, -1.0, 0.0]).is_infinite());
        assert!(far_threshold(&[]).is_infinite());
    }

    #[test]
    fn far_readings_keep_groups_apart_only_when_they_agree() {
        assert!(!agree(&[2e-3, 2.1e-3]), "two readings are not enough");
        assert!(
            agree(&[2e-3, 2.1e-3, 9e-3]),
            "the lowest two agree; a spike above is ignored"
        );
        assert!(!agree(&[2e-3, 3.5e-3, 9e-3]), "spikes that disagree");
    }

    #[test]
    fn near_readings_join_hosts_into_groups_numbered_by_least_host() {
        // 0-1 near, 1-2 far, 2-3 near, 4 alone; readings are one-way, the threshold a round trip.
        let r = [(0, 1, 10e-6), (1, 2, 400e-6), (3, 2, 12e-6)];
        assert_eq!(near_components(5, &r, 150e-6), vec![0, 0, 1, 1, 2]);
    }

    #[test]
    fn cross_group_rounds_are_disjoint_spread_and_move_on() {
        let order: Vec<Vec<usize>> = vec![vec![0, 3, 2, 1], vec![4, 7, 6, 5], vec![8]];
        let mut cursor = vec![0; 3];
        let needy = [(0, 2), (0, 1), (1, 2)];
        let round = cross_group_pairs(&order, &mut cursor, &needy);
        let mut seen = std::collections::HashSet::new();
        for &(a, b) in &round {
            assert!(seen.insert(a) && seen.insert(b), "host twice in {round:?}");
        }
        // Group 2 has one host: it serves the neediest pair only; 0 and 1 fill the rest.
        assert_eq!(round, vec![(0, 8), (3, 4), (2, 7), (1, 6)]);
        assert_eq!(cursor, vec![4, 3, 1]);
        let next = cross_group_pairs(&order, &mut cursor, &needy);
        assert_eq!(next[0], (0, 8), "the cursor wraps round");
        assert_eq!(next[1], (3, 5), "group 1 goes on where it stopped");
    }

    #[test]
    fn blocks_stay_inside_parts_and_keep_chain_pairs_adjacent() {
        // Parts {0..5} (odd size: 4 pairs with 5's partner outside) and {5..12}, blocks of 4.
        let parts = vec![(0..5).collect::<Vec<usize>>(), (5..12).collect()];
        let identity = |len: usize, _| (0..len).collect::<Vec<usize>>();
        let (blocks, split) = blocks_of(&parts, 4, |_| 0, identity);
        assert_eq!(
            blocks,
            vec![vec![0, 1], vec![2, 3, 4], vec![6, 7, 8, 9], vec![10, 11, 5]]
        );
        assert_eq!(split, vec![vec![0, 1], vec![2, 3]]);
        for (p, ids) in parts.iter().zip(&split) {
            let mut got: Vec<usize> = ids.iter().flat_map(|&b| blocks[b].clone()).collect();
            got.sort_unstable();
            assert_eq!(&got, p);
        }
    }
}
