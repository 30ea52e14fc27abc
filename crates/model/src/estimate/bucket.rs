//! Links with burst credits: token buckets in predictions.
//!
//! A switch port serializes every message at its rate, and the bandwidth map's 1 MiB transfers
//! measure that rate. A *policed* link does not: a token bucket (Linux `tc tbf`, the emulated
//! cluster's uplinks; a cloud NIC's or fabric's policer) lets traffic pass at the line's peak
//! rate while it holds tokens, and at its sustained rate (the refill rate) once they are spent.
//! Charged the sustained rate, a 4 KiB broadcast across the emulated 3x3 cluster's 300 Mbit/s
//! uplinks was predicted 1.4-3.6x its measured median (5 runs): `tbf` with 75 KB of burst let
//! it cross at the veth's speed.
//!
//! What depends on the bucket is how full it is when a call starts, and that depends on the
//! calls before it. Predictions here take a train of identical calls ([`CallTrain`]: their
//! period and the gap between them, which the profile measures per size class), find the
//! level the bucket holds when each starts ([`steady_level`]). The simulator then runs the
//! call with each bucket at its level ([`Charged::buckets`], `sim::FlowSim::set_bucket`): the
//! link passes the call's first bytes at the peak and the rest at the sustained rate, as a
//! policer does. The evaluators, which give a link one rate, get the rate at which it moves
//! the call's bytes from that level ([`effective_bps`]); that one rate per call let the first
//! of four 4 KiB messages over one uplink wait for the last (the library's binary tree on the
//! emulated 2x4 cluster), and made a pipelined call's first segments as slow as its last.
//! Without a train the bucket is taken as full (the first call after a rest).
//!
//! The buckets are measured at set-up ([`fit`], from transfers each started after a rest
//! across the links [`probe_pairs`] picks); pure arithmetic here, tested without MPI.

use super::plan_dag::{send_paths, PlanDag};
use super::EstimateError;
use crate::plan::Plan;
use crate::topology::{DirLink, Topology, VertexKind};

/// One link direction's token bucket (bytes and bytes per second).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenBucket {
    /// Tokens a full bucket holds: bytes that pass at the peak rate after a rest.
    pub depth_bytes: f64,
    /// Rate while the bucket holds tokens.
    pub peak_bps: f64,
    /// Rate once they are spent, which is also the refill rate.
    pub sustained_bps: f64,
}

/// A measured bucket on one direction of a link of the rank-level topology.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkBucket {
    pub link: usize,
    /// Traffic from the link's `a` to its `b`.
    pub forward: bool,
    pub bucket: TokenBucket,
}

/// A bucket is modelled only when its peak is at least this many times its sustained rate:
/// below, charging the sustained rate is as good, and a fit on noisy readings of a plain link
/// would otherwise find a small "burst" in the noise.
pub const MIN_PEAK_RATIO: f64 = 1.5;

/// Fit a bucket to transfers that each started after a rest (a full bucket): `(bytes,
/// seconds)`, each time including a fixed cost (latency, software, the acknowledgement); the
/// fastest reading of each size is used. Model: `t = c + min(s, D) / P + max(0, s - D) / R`.
///
/// The sustained rate `R` comes from the two largest sizes alone (both beyond the bucket, their
/// difference cancels the fixed cost and the burst): a joint fit of all four unknowns let the
/// noise of the small transfers' times pull it by 8% either way. Then, for each candidate depth
/// `D` up to the second largest size (a logarithmic grid, plus every measured size), `t -
/// max(0, s - D) / R = c + min(s, D) / P` is a line fitted by least squares on relative errors,
/// and the depth with the smallest residual wins. The peak is the least certain number (the
/// small transfers differ by tens of microseconds on a fast line); it only sets how fast the
/// bytes within the bucket pass, which hardly matters beside the fixed cost.
///
/// `None` without at least four distinct sizes, without a positive rate between the two
/// largest, or when there is no burst worth modelling (peak under [`MIN_PEAK_RATIO`] times
/// the sustained rate, or a depth under the smallest size).
pub fn fit(readings: &[(u64, f64)]) -> Option<TokenBucket> {
    let pts = fastest_per_size(readings);
    let n = pts.len();
    if n < 4 {
        return None;
    }
    let sustained = sustained_of(&pts)?;
    let s2 = pts[n - 2].0;
    let lo = pts[0].0;
    let mut depths: Vec<f64> = (0..=64).map(|i| lo * (s2 / lo).powf(i as f64 / 64.0)).collect();
    depths.extend(pts.iter().map(|p| p.0).filter(|&s| s <= s2));
    let mut best: Option<(f64, f64, f64)> = None; // (residual, depth, 1 / peak)
    for &d in &depths {
        let rows: Vec<(f64, f64, f64)> = pts
            .iter()
            .map(|&(s, t)| (s.min(d), t - (s - d).max(0.0) / sustained, t))
            .collect();
        let Some((c, q)) = line(&rows) else { continue };
        let res: f64 = rows.iter().map(|&(x, y, t)| ((c + x * q - y) / t).powi(2)).sum();
        if best.is_none_or(|b| res < b.0 * (1.0 - 1e-9)) {
            best = Some((res, d, q));
        }
    }
    let (_, depth_bytes, q) = best?;
    let peak_bps = (1.0 / q).min(MAX_PEAK_BPS);
    (depth_bytes >= lo && peak_bps >= MIN_PEAK_RATIO * sustained).then_some(TokenBucket {
        depth_bytes,
        peak_bps,
        sustained_bps: sustained,
    })
}

/// The fastest usable reading of each size of `readings`, by size.
fn fastest_per_size(readings: &[(u64, f64)]) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for &(s, t) in readings.iter().filter(|(s, t)| *s > 0 && t.is_finite() && *t > 0.0) {
        match pts.iter_mut().find(|p| p.0 == s as f64) {
            Some(p) => p.1 = p.1.min(t),
            None => pts.push((s as f64, t)),
        }
    }
    pts.sort_by(|x, y| x.0.total_cmp(&y.0));
    pts
}

/// The rate between the two largest sizes of `pts` (sorted by size): their difference cancels
/// the fixed cost and any burst. `None` without two sizes or without a positive rate.
fn sustained_of(pts: &[(f64, f64)]) -> Option<f64> {
    let [(s2, t2), (s1, t1)] = pts.get(pts.len().checked_sub(2)?..)? else {
        return None;
    };
    let r = (s1 - s2) / (t1 - t2);
    (r.is_finite() && r > 0.0).then_some(r)
}

/// The sustained rate [`fit`] would take from `readings`, bucket or not.
pub fn sustained_reading(readings: &[(u64, f64)]) -> Option<f64> {
    sustained_of(&fastest_per_size(readings))
}

/// A pair's burst readings are taken again when their sustained rate is below this fraction
/// of the bandwidth map's rate for the slowest link of the pair's path. Both measure the
/// link with 1 MiB transfers, and the map's rate (bytes over a transfer's time) also carries
/// the fixed cost and the burst, so a sound reading sits near or above it; a preempted rank
/// only reads slower (readings and their history: `docs/profiling-log.md`, 2026-12-02).
pub const SUSPECT_OF_MAP: f64 = 0.8;

/// A burst probe pair's `times`, whose first entries are one per size of `sizes` (entries
/// after those, such as the sender's own completions, are merged alike but not judged),
/// measured `again` while they read a sustained rate below [`SUSPECT_OF_MAP`] of `map_bps`,
/// or none, at most `max_rounds` times. Each entry keeps its fastest time over the rounds,
/// so a link truly slower than the map says stays slow. Returns the times and the rounds
/// made again; the first error of a round ends it. Deterministic in the times, so ranks
/// holding the same broadcast times decide alike (the runtime's rounds are collective).
pub fn remeasured<E>(
    mut times: Vec<f64>,
    sizes: &[u64],
    map_bps: f64,
    max_rounds: usize,
    mut again: impl FnMut() -> Result<Vec<f64>, E>,
) -> Result<(Vec<f64>, usize), E> {
    let below = |t: &[f64]| {
        let readings: Vec<(u64, f64)> = sizes.iter().copied().zip(t.iter().copied()).collect();
        sustained_reading(&readings).is_none_or(|r| r < SUSPECT_OF_MAP * map_bps)
    };
    let mut rounds = 0;
    while rounds < max_rounds && below(&times) {
        for (t, m) in times.iter_mut().zip(again()?) {
            *t = t.min(m);
        }
        rounds += 1;
    }
    Ok((times, rounds))
}

/// The fastest peak a fit reports (1 TB/s): transfers within the bucket that take no longer
/// than the smallest one fit an infinite peak.
pub const MAX_PEAK_BPS: f64 = 1e12;

/// Least squares of `y = c + x q` on errors relative to `t` over rows `(x, y, t)`, with `q`
/// at least 0 (a peak rate, not a negative one); `None` when the rows do not determine it.
fn line(rows: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let (mut a, mut b, mut cc, mut u, mut v) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y, t) in rows {
        let w = 1.0 / (t * t);
        a += w;
        b += w * x;
        cc += w * x * x;
        u += w * y;
        v += w * x * y;
    }
    if a <= 0.0 {
        return None;
    }
    let det = a * cc - b * b;
    // Every x equal (or a NaN): the rows fix only the mean.
    if det.is_nan() || det <= 1e-12 * a * cc {
        return Some((u / a, 0.0));
    }
    let q = (a * v - b * u) / det;
    if q < 0.0 {
        return Some((u / a, 0.0));
    }
    Some(((u - b * q) / a, q))
}

/// How a size class's calls follow each other, from the calls a profile timed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallTrain {
    /// Start to start (the median over consecutive calls).
    pub period_s: f64,
    /// From the last rank leaving a call to the first entering the next (the median; 0 when
    /// calls overlap): the least the links are idle between two calls.
    pub gap_s: f64,
    /// From a call's first rank entering to its root entering (the median; 0 when the root
    /// is first): idle time of every link in each cycle that the call's own time leaves out
    /// ([`self_paced_levels`]).
    pub lead_s: f64,
}

/// `train` when its period is a usable time (finite, positive); `None` (no train: the bucket
/// full) otherwise.
fn timed(train: Option<CallTrain>) -> Option<CallTrain> {
    train.filter(|t| t.period_s.is_finite() && t.period_s > 0.0)
}

/// What the gap between two calls of `t` refills the bucket with: the level a call that
/// empties it leaves the next.
fn gap_refill(b: &TokenBucket, t: CallTrain) -> f64 {
    (b.sustained_bps * t.gap_s.max(0.0)).min(b.depth_bytes)
}

/// Tokens in the bucket when the median call of a train starts, in a train of calls that each
/// pass `used` bytes over the link. `None`: full.
///
/// Per call the bucket gains `sustained x period` (while not full) and loses `used`. Where the
/// gain is the larger by more than [`PACING_BAND`] of `used` (how well the two are known), it
/// is full when each call starts (a call larger than the bucket still empties it, but the rest
/// of the period refills it). Where it is the smaller by more than that, each call empties it,
/// and what it holds when the next starts is what the gap between them refills (`sustained x
/// gap`, at most the depth). Where they balance, the link paces the calls (their period is
/// what its sustained rate needs for their bytes) and any level repeats from call to call, so
/// the level wanders between the gap's refill and full with the calls' jitter and the median
/// call finds it halfway; between the balance and the band's edges, in proportion.
pub fn steady_level(b: &TokenBucket, used: f64, train: Option<CallTrain>) -> f64 {
    let Some(t) = timed(train) else {
        return b.depth_bytes;
    };
    if used <= 0.0 || !used.is_finite() {
        return b.depth_bytes;
    }
    let emptied = gap_refill(b, t);
    let net = (b.sustained_bps * t.period_s - used) / used;
    let full_share = (0.5 + net / (2.0 * PACING_BAND)).clamp(0.0, 1.0);
    emptied + (b.depth_bytes - emptied) * full_share
}

/// How far (0: full, 1: drained to the gap's refill) the median call of `train`, each call
/// passing `used` bytes over a link with bucket `b`, stands between its times with the bucket
/// full and drained: the shortfall of its level ([`steady_level`]) against what a call can
/// take from the bucket (its bytes, at most the depth), relative to the drained level's, each
/// missing token costing the same time. 0 where the median call finds tokens for all its
/// bytes, as when the calls use a fraction of the bucket; a half at the balance for calls that
/// empty it.
///
/// Measured on the emulated 3x3 cluster (`predict_bench`, 2026-11-27): 64 and 256 KiB
/// broadcasts stand at the balance (refill 0.8-2.0% above use in 3 logged jobs), and their
/// median call sat about halfway in time between the predictions with the buckets full and
/// drained (64 KiB at 0.29-0.66 of the way, 256 KiB at 0.16-0.71, 18 profiled jobs); 4 KiB
/// calls of the library's binary tree, 16 KiB a call against 63-71 KB of bucket, ran as fast
/// as with it full. Before, the level alone went into one rate per call: full above a 5%
/// surplus and the gap's refill below it, 64 KiB flipped between the two from job to job
/// (-33 .. +37% from the entries, 5 of 10 jobs within 25%), and with the level halfway it was
/// predicted 11-29% short (10 jobs).
pub fn drained_weight(b: &TokenBucket, used: f64, train: Option<CallTrain>) -> f64 {
    let Some(t) = timed(train) else {
        return 0.0;
    };
    if used <= 0.0 || !used.is_finite() {
        return 0.0;
    }
    let emptied = gap_refill(b, t);
    let wanted = used.min(b.depth_bytes);
    if wanted <= emptied {
        return 0.0;
    }
    ((wanted - steady_level(b, used, train)) / (wanted - emptied)).clamp(0.0, 1.0)
}

/// [`drained_weight`] for calls of `plan` with `bytes` in `train`: the largest over the
/// bucketed links they use (the link nearest to pacing them decides). 0 without buckets or
/// without a train.
pub fn plan_drained_weight(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    buckets: &[LinkBucket],
    train: Option<CallTrain>,
) -> Result<f64, EstimateError> {
    if buckets.is_empty() || train.is_none() {
        return Ok(0.0);
    }
    let used = bytes_per_link(topo, plan, bytes)?;
    Ok(buckets
        .iter()
        .filter_map(|lb| {
            let u = used.get(lb.link)?[lb.forward as usize];
            (u > 0.0).then(|| drained_weight(&lb.bucket, u, train))
        })
        .fold(0.0, f64::max))
}

/// How near a train's refill per period must come to a call's use of a bucketed link, relative
/// to that use, for the prediction to be uncertain ([`paced`]). On the emulated 3x3 cluster
/// 16 and 64 KiB broadcasts in `predict_bench` sit within it (64 KiB: 1.84 ms periods against
/// the 1.83 ms its bytes need at the sustained rate), and they were the sizes missed from the
/// entries (3 and 2 of 12 runs); 1-4 KiB and 256 KiB-16 MiB sit far outside, and were not.
pub const PACED_BAND: f64 = 0.25;

/// Whether calls in `train` that each pass `used` bytes over a link with bucket `b` come about
/// as fast as its sustained rate carries them (their period's refill within [`PACED_BAND`] of
/// their use), and the bucket is deep enough against a call for its level to matter (at least
/// a tenth of it). There the level each call finds depends on how the calls fall (a slightly
/// longer period, or a pause, refills the bucket), which [`steady_level`] cannot know from
/// medians, so the prediction is uncertain.
pub fn paced(b: &TokenBucket, used: f64, train: Option<CallTrain>) -> bool {
    let Some(t) = timed(train) else {
        return false;
    };
    used > 0.0 && b.depth_bytes >= 0.1 * used && (b.sustained_bps * t.period_s - used).abs() <= PACED_BAND * used
}

/// Whether calls in `train` that each pass `used` bytes over a link with bucket `b` come as
/// fast as its sustained rate carries them, as well as the period and the rate are known
/// (their period's refill within [`PACING_BAND`] of their use): the link itself sets their
/// period, which then cannot tell its level ([`self_paced_levels`]). Further from it, the
/// period says the bucket refills (a longer one: the calls wait on something else) or not.
pub fn balanced(b: &TokenBucket, used: f64, train: Option<CallTrain>) -> bool {
    let Some(t) = timed(train) else {
        return false;
    };
    used > 0.0 && (b.sustained_bps * t.period_s - used).abs() <= PACING_BAND * used
}

/// Whether any of `used`'s links sets the pace of calls in `train` ([`balanced`]): where
/// [`self_paced_levels`] gives the levels.
pub fn sets_the_pace(used: &[UsedBucket], train: CallTrain) -> bool {
    used.iter().any(|u| balanced(&u.at.bucket, u.used, Some(train)))
}

/// The buckets (indices into `buckets`) whose links calls of `plan` with `bytes` in `train`
/// use [`paced`].
pub fn paced_buckets(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    buckets: &[LinkBucket],
    train: Option<CallTrain>,
) -> Result<Vec<usize>, EstimateError> {
    if buckets.is_empty() || train.is_none() {
        return Ok(Vec::new());
    }
    let used = bytes_per_link(topo, plan, bytes)?;
    Ok(buckets
        .iter()
        .enumerate()
        .filter(|(_, lb)| {
            used.get(lb.link)
                .is_some_and(|u| paced(&lb.bucket, u[lb.forward as usize], train))
        })
        .map(|(i, _)| i)
        .collect())
}

/// A train like `train` in which each call finds the buckets refilled only by the gap between
/// calls (the lower end of what [`paced`] calls uncertain; the upper end is a full bucket,
/// `None`).
pub fn drained(train: CallTrain) -> CallTrain {
    CallTrain {
        period_s: f64::MIN_POSITIVE,
        ..train
    }
}

/// How well a period's refill is known against a call's use (relative): the rate between the
/// two largest probe sizes and the median period each to a few percent, so their ratio to
/// about 10%.
pub const PACING_BAND: f64 = 0.10;

/// The rate at which the link moves `used` bytes starting from `level` tokens: the bytes
/// within the level at the peak rate, the rest at the sustained rate.
pub fn effective_bps(b: &TokenBucket, used: f64, level: f64) -> f64 {
    if used <= 0.0 {
        return b.peak_bps;
    }
    let level = level.clamp(0.0, b.depth_bytes);
    let t = used.min(level) / b.peak_bps + (used - level).max(0.0) / b.sustained_bps;
    (used / t).clamp(b.sustained_bps, b.peak_bps)
}

/// Bytes the plan's sends put on each link direction in one call of `bytes`:
/// `[link][forward as usize]`.
pub fn bytes_per_link(topo: &Topology, plan: &Plan, bytes: u64) -> Result<Vec<[f64; 2]>, EstimateError> {
    let dag = PlanDag::build(plan, bytes)?;
    let paths = send_paths(topo, plan, &dag)?;
    let mut used = vec![[0.0f64; 2]; topo.links().len()];
    for (s, p) in dag.sends.iter().zip(&paths) {
        for d in p {
            used[d.link][d.forward as usize] += s.bytes as f64;
        }
    }
    Ok(used)
}

/// `topo` as one call of `plan` with `bytes` in `train` finds it: each bucketed link
/// direction at its level ([`steady_level`], [`with_levels`]); other links unchanged.
/// Unchanged without buckets.
pub fn with_buckets(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    buckets: &[LinkBucket],
    train: Option<CallTrain>,
) -> Result<Charged, EstimateError> {
    if buckets.is_empty() {
        return Ok(Charged {
            topology: topo.clone(),
            buckets: Vec::new(),
        });
    }
    let used = used_buckets(topo, plan, bytes, buckets)?;
    let levels: Vec<f64> = used.iter().map(|u| steady_level(&u.at.bucket, u.used, train)).collect();
    Ok(with_levels(topo, &used, &levels))
}

/// A bucketed link direction a call uses, and the bytes the call puts on it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsedBucket {
    pub at: LinkBucket,
    pub used: f64,
}

/// The buckets among `buckets` whose link directions calls of `plan` with `bytes` use (those
/// on links `topo` does not have are left out), with the bytes each call puts on them.
pub fn used_buckets(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    buckets: &[LinkBucket],
) -> Result<Vec<UsedBucket>, EstimateError> {
    let used = bytes_per_link(topo, plan, bytes)?;
    Ok(buckets
        .iter()
        .filter_map(|lb| {
            let u = used.get(lb.link)?[lb.forward as usize];
            Some(UsedBucket { at: *lb, used: u })
        })
        .collect())
}

/// A topology as the calls of one class find it ([`with_levels`]).
#[derive(Clone, Debug)]
pub struct Charged {
    /// Each bucketed link direction the calls use at the one rate that moves a call's bytes
    /// from its level: what the evaluators, which give a link one rate, charge.
    pub topology: Topology,
    /// Those buckets at their levels: what the simulator charges, a call's first bytes at the
    /// peak and the rest at the sustained rate, as the link passes them.
    pub buckets: Vec<crate::sim::SimBucket>,
}

/// `topo` as calls find it whose buckets (`used`) hold `levels[i]` tokens at the start:
/// [`Charged`]; other links unchanged.
pub fn with_levels(topo: &Topology, used: &[UsedBucket], levels: &[f64]) -> Charged {
    let buckets = used
        .iter()
        .zip(levels)
        .map(|(u, &level)| crate::sim::SimBucket {
            link: u.at.link,
            forward: u.at.forward,
            depth_bytes: u.at.bucket.depth_bytes,
            level_bytes: level.clamp(0.0, u.at.bucket.depth_bytes),
            peak_bps: u.at.bucket.peak_bps,
            sustained_bps: u.at.bucket.sustained_bps,
        })
        .filter(|s| s.link < topo.links().len())
        .collect();
    Charged {
        topology: with_rates(topo, used, levels),
        buckets,
    }
}

/// `topo` with each of `used`'s link directions at the rate it moves its call's bytes from
/// `levels[i]` tokens ([`effective_bps`]); other links unchanged.
fn with_rates(topo: &Topology, used: &[UsedBucket], levels: &[f64]) -> Topology {
    let mut b = topo.to_builder();
    for (u, &level) in used.iter().zip(levels) {
        let Some(l) = b.links.get_mut(u.at.link) else {
            continue;
        };
        let rate = effective_bps(&u.at.bucket, u.used, level);
        log::debug!(
            "bucket on link {} {}: calls put {} B on it; {level:.0} B of tokens at the start, {:.1} Mbit/s",
            u.at.link,
            if u.at.forward { "a->b" } else { "b->a" },
            u.used,
            rate * 8e-6
        );
        if u.at.forward {
            l.ab.bandwidth_bps = rate;
        } else {
            l.ba.bandwidth_bps = rate;
        }
    }
    b.build().expect("changing link rates keeps a valid tree")
}

/// How long a link with bucket `b` takes to pass `used` bytes from `level` tokens: those
/// within the level at the peak rate, the rest at the sustained rate.
fn busy_s(b: &TokenBucket, used: f64, level: f64) -> f64 {
    used.min(level) / b.peak_bps + (used - level).max(0.0) / b.sustained_bps
}

/// The tokens the next call finds, where this call found `level`, put `used` bytes on the link,
/// and the next starts `period_s` after it: what this call left plus the refill over the
/// period; but where the call spent every token, the refill only while the link was not
/// passing its bytes (the bytes waited for each token as it came). At most the depth.
fn next_level(b: &TokenBucket, used: f64, level: f64, period_s: f64) -> f64 {
    let next = match level >= used {
        true => level - used + b.sustained_bps * period_s,
        false => b.sustained_bps * (period_s - busy_s(b, used, level)).max(0.0),
    };
    next.clamp(0.0, b.depth_bytes)
}

/// Most rounds [`self_paced_levels`] takes to settle; each simulates the call once.
pub const SELF_PACED_ROUNDS: usize = 60;

/// The tokens each of `used`'s buckets holds when a call starts, in a train of such calls that
/// follow each other as fast as the calls themselves allow: each call starts `lead + span +
/// gap` after the one before (`train`'s lead and gap, the program's; `span(levels)`, the time
/// from the root's entry to the last rank leaving a call that finds `levels`, as the model
/// predicts it). `None` when `span` fails.
///
/// Why not the measured period: where calls are paced by a link they come as fast as its
/// sustained rate carries their bytes, whatever its bucket holds at each start, so their
/// period is the same for every level and cannot tell it (the lead, the gap and the call's
/// own latencies can: a link refills while it is not passing the call's bytes). On the
/// emulated 3x3 cluster 32 KiB calls from root 4 crossed two bucketed uplinks in turn, each
/// refilled 33.0 KB per 0.92 ms period against the 32.8 KB a call used, and the median rank
/// took 399-554 us (3 jobs) against the 169-182 us predicted with the level read from the
/// period's surplus: the ranks behind the first uplink were done at 430-490 us, those behind
/// the second at 740-800, as if each uplink held about 20 KB at each start.
///
/// Each round simulates a call with the levels, takes the period it gives, and moves each
/// level halfway to what that period leaves ([`next_level`]); until no level moves by a
/// thousandth of its bucket, or [`SELF_PACED_ROUNDS`]. A bucket whose refill per period
/// exceeds its use fills; one that paces the calls settles where its refill, over the part
/// of the cycle it is idle, meets its use. Links paced in series share the slack: the
/// period is the same for any split of it between them, and the rounds keep the split they
/// start from: every bucket at the smallest depth, so an even one.
pub fn self_paced_levels(
    used: &[UsedBucket],
    train: CallTrain,
    mut span: impl FnMut(&[f64]) -> Option<f64>,
) -> Option<Vec<f64>> {
    let start = used
        .iter()
        .map(|u| u.at.bucket.depth_bytes)
        .fold(f64::INFINITY, f64::min);
    let mut levels: Vec<f64> = vec![start; used.len()];
    for _ in 0..SELF_PACED_ROUNDS {
        let period = train.lead_s.max(0.0) + span(&levels)? + train.gap_s.max(0.0);
        let mut moved = 0.0f64;
        for (u, l) in used.iter().zip(levels.iter_mut()) {
            let b = &u.at.bucket;
            let new = 0.5 * (*l + next_level(b, u.used, *l, period));
            moved = moved.max((new - *l).abs() / b.depth_bytes);
            *l = new;
        }
        if moved < 1e-3 {
            break;
        }
    }
    Some(levels)
}

/// A rank pair whose transfers measure buckets, and the links a fit of them is put on.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbePair {
    pub from: u32,
    pub to: u32,
    /// The path's slow link directions (those [`probe_pairs`] looks for): what a fit is put
    /// on. A burst that crosses the path passed every one of them (a slow link without a
    /// bucket would have held it to its rate), so each holds at least that bucket; which of
    /// them holds more is not told apart (the map's rates of two links in series differ only by
    /// noise, and taking only the slower one left 4 of 6 directions without a bucket in one
    /// run).
    pub slow_links: Vec<DirLink>,
}

/// The widest gap between the rates of a tree's links must be at least this factor for the
/// links below it to count as slow: the oversubscribed ones, where a burst allowance changes
/// what a broadcast costs.
pub const SLOW_LINK_GAP: f64 = 2.0;

/// The rate under which a link direction of `rates` (the tree's links, rank-to-host links
/// excluded) is slow: the geometric middle of the widest ratio between two consecutive rates,
/// if that ratio is at least [`SLOW_LINK_GAP`]; `None` when no link stands apart. Not a fraction
/// of the fastest link: under load the bandwidth map rates some host links under half the
/// fastest, and with "under half the fastest" four of four jobs with a CPU hog beside probed
/// host links of the emulated 3x3 too (6-8 pairs instead of 4). The widest gap still lay
/// between its 300 Mbit/s uplinks and every host link: with this test, 4 of 4 hog jobs
/// probed only the uplinks' 4 pairs.
pub fn slow_rate_threshold(rates: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut r: Vec<f64> = rates.into_iter().filter(|b| b.is_finite() && *b > 0.0).collect();
    r.sort_by(f64::total_cmp);
    let (lo, hi) = r
        .windows(2)
        .map(|w| (w[0], w[1]))
        .max_by(|x, y| (x.1 / x.0).total_cmp(&(y.1 / y.0)))?;
    (hi / lo >= SLOW_LINK_GAP).then(|| (lo * hi).sqrt())
}

/// Pairs whose transfers cover every slow link direction of `topo` (rate under
/// [`slow_rate_threshold`]; rank-to-host links excluded), slowest first, at most `max_pairs`:
/// for each direction not yet on a chosen path, the lowest rank on its sending side to the
/// lowest rank on its receiving side.
pub fn probe_pairs(topo: &Topology, max_pairs: usize) -> Vec<ProbePair> {
    let is_rank = |v: usize| topo.vertex(v).kind == VertexKind::Rank;
    let links = topo.links();
    let Some(threshold) = slow_rate_threshold(
        links
            .iter()
            .filter(|l| !is_rank(l.a) && !is_rank(l.b))
            .flat_map(|l| [l.ab.bandwidth_bps, l.ba.bandwidth_bps]),
    ) else {
        return Vec::new();
    };
    let mut slow: Vec<(f64, DirLink)> = Vec::new();
    for (i, l) in links.iter().enumerate() {
        if is_rank(l.a) || is_rank(l.b) {
            continue;
        }
        for forward in [true, false] {
            let bw = l.dir(forward).bandwidth_bps;
            if bw < threshold {
                slow.push((bw, DirLink { link: i, forward }));
            }
        }
    }
    slow.sort_by(|x, y| {
        x.0.total_cmp(&y.0)
            .then(x.1.link.cmp(&y.1.link))
            .then(y.1.forward.cmp(&x.1.forward))
    });
    let ranks = topo.num_ranks() as u32;
    // Whether `v` lies in the subtree hanging from `top` (anchor rooting).
    let below = |mut v: usize, top: usize| loop {
        if v == top {
            return true;
        }
        match topo.parent(v) {
            Some((p, _)) => v = p,
            None => return false,
        }
    };
    let mut covered = vec![[false; 2]; links.len()];
    let mut out = Vec::new();
    for (_, d) in slow {
        if out.len() >= max_pairs {
            break;
        }
        if covered[d.link][d.forward as usize] {
            continue;
        }
        let l = &links[d.link];
        let from_end = if d.forward { l.a } else { l.b };
        // The endpoint below the other one in the anchor rooting holds one side as a subtree.
        let child = if topo.parent(l.a).map(|p| p.1) == Some(d.link) {
            l.a
        } else {
            l.b
        };
        let on_from_side = |r: u32| below(topo.rank_vertex(r), child) == (child == from_end);
        let (Some(from), Some(to)) = (
            (0..ranks).find(|&r| on_from_side(r)),
            (0..ranks).find(|&r| !on_from_side(r)),
        ) else {
            continue;
        };
        let path = topo.path(topo.rank_vertex(from), topo.rank_vertex(to));
        for p in &path {
            covered[p.link][p.forward as usize] = true;
        }
        let slow_links = path
            .into_iter()
            .filter(|p| !is_rank(links[p.link].a) && !is_rank(links[p.link].b))
            .filter(|&p| topo.dir_params(p).bandwidth_bps < threshold)
            .collect();
        out.push(ProbePair { from, to, slow_links });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::trees;
    use crate::topology::{LinkDir, TopologyBuilder};

    /// Time of a transfer of `s` bytes from a full bucket, plus a fixed cost.
    fn t(b: &TokenBucket, c: f64, s: f64) -> f64 {
        c + s.min(b.depth_bytes) / b.peak_bps + (s - b.depth_bytes).max(0.0) / b.sustained_bps
    }

    const TBF: TokenBucket = TokenBucket {
        depth_bytes: 75e3,
        peak_bps: 1.5e9,
        sustained_bps: 37.5e6,
    };

    #[test]
    fn a_bucket_is_recovered_from_transfers_after_rests() {
        let sizes = [4096u64, 16384, 65536, 262144, 1 << 20];
        // Exact readings, then with +-3% of noise in a fixed pattern.
        for noise in [[0.0; 5], [0.03, -0.02, 0.01, -0.03, 0.02]] {
            let r: Vec<(u64, f64)> = sizes
                .iter()
                .zip(noise)
                .map(|(&s, e)| (s, t(&TBF, 60e-6, s as f64) * (1.0 + e)))
                .collect();
            let b = fit(&r).expect("a bucket");
            assert!((b.depth_bytes / TBF.depth_bytes - 1.0).abs() < 0.2, "{b:?}");
            assert!((b.sustained_bps / TBF.sustained_bps - 1.0).abs() < 0.05, "{b:?}");
            assert!(b.peak_bps > 10.0 * b.sustained_bps, "{b:?}");
        }
    }

    /// The runtime's burst probe sizes: octaves from 4 KiB to 256 KiB and 1 MiB.
    const PROBE_SIZES: [u64; 8] = [4096, 8192, 16384, 32768, 65536, 131072, 262144, 1 << 20];

    /// A probe pair's times over [`TBF`] with a 200 us fixed cost, the sends' completions
    /// after them; `slow` stretches the 1 MiB transfer as a preempted receiver does.
    fn pair_times(slow: f64) -> Vec<f64> {
        let mut v: Vec<f64> = PROBE_SIZES
            .iter()
            .map(|&s| 200e-6 + (s as f64 - TBF.depth_bytes).max(0.0) / TBF.sustained_bps)
            .collect();
        *v.last_mut().unwrap() *= slow;
        v.extend(v.clone());
        v
    }

    #[test]
    fn a_preempted_reading_is_measured_again_and_a_slow_link_stays_slow() {
        let map = 40e6; // the map's 1 MiB rate, burst included
        let mut calls = 0;
        let (v, rounds) = remeasured::<()>(pair_times(2.0), &PROBE_SIZES, map, 2, || {
            calls += 1;
            Ok(pair_times(1.0))
        })
        .unwrap();
        assert_eq!((rounds, calls), (1, 1));
        assert_eq!(v, pair_times(1.0));
        let r = sustained_reading(&PROBE_SIZES.iter().copied().zip(v).collect::<Vec<_>>());
        assert!((r.unwrap() / TBF.sustained_bps - 1.0).abs() < 1e-9, "{r:?}");

        // Agreeing with the map: not measured again.
        let (_, rounds) = remeasured::<()>(pair_times(1.0), &PROBE_SIZES, map, 2, || panic!("again")).unwrap();
        assert_eq!(rounds, 0);

        // A link slower than the map says, every time: every round, then kept as read.
        let (v, rounds) = remeasured::<()>(pair_times(2.0), &PROBE_SIZES, map, 2, || Ok(pair_times(2.0))).unwrap();
        assert_eq!((rounds, v), (2, pair_times(2.0)));

        // A round that fails fails the probe.
        assert_eq!(
            remeasured(pair_times(2.0), &PROBE_SIZES, map, 2, || Err("lost")),
            Err("lost")
        );
    }

    #[test]
    fn a_plain_link_has_no_bucket() {
        // A switch port: every byte at one rate, with a little noise.
        let r: Vec<(u64, f64)> = [4096u64, 16384, 65536, 262144, 1 << 20]
            .iter()
            .zip([0.02, -0.01, 0.01, -0.02, 0.0])
            .map(|(&s, e)| (s, (30e-6 + s as f64 / 125e6) * (1.0 + e)))
            .collect();
        assert_eq!(fit(&r), None);
        // Too few sizes to tell.
        assert_eq!(fit(&r[..3]), None);
        assert_eq!(fit(&[(4096, f64::NAN), (1, 1.0), (2, 1.0), (3, -1.0)]), None);
    }

    #[test]
    fn the_level_settles_where_refill_meets_use() {
        let train = |period_s: f64, gap_s: f64| {
            Some(CallTrain {
                period_s,
                gap_s,
                lead_s: 0.0,
            })
        };
        // Calls that use less than a period refills find the bucket full.
        assert_eq!(steady_level(&TBF, 16384.0, train(1e-3, 0.0)), TBF.depth_bytes);
        assert_eq!(steady_level(&TBF, 16384.0, None), TBF.depth_bytes);
        assert_eq!(steady_level(&TBF, 0.0, train(1e-6, 0.0)), TBF.depth_bytes);
        // More than the bucket holds, far apart: emptied by each call, full again by the next.
        assert_eq!(steady_level(&TBF, 1e6, train(1.0, 0.9)), TBF.depth_bytes);
        // Calls that need more than a period at the sustained rate: what the gap refills.
        assert_eq!(steady_level(&TBF, 131072.0, train(3e-3, 0.0)), 0.0);
        let l = steady_level(&TBF, 131072.0, train(3e-3, 0.2e-3));
        assert!((l - 0.2e-3 * TBF.sustained_bps).abs() < 1e-6, "{l}");
        assert_eq!(steady_level(&TBF, 131072.0, train(3e-3, 1.0)), TBF.depth_bytes);
        // The link paces the calls: refill and use balanced, the median call finds the bucket
        // halfway between the gap's refill and full; half the band more refill, three
        // quarters; beyond the band either way, full or the gap's refill.
        let u = 65536.0;
        let balanced = u / TBF.sustained_bps;
        let gap = 0.3e-3;
        let emptied = gap * TBF.sustained_bps;
        let at = |f: f64| steady_level(&TBF, u, train(f * balanced, gap));
        let weight = |f: f64| drained_weight(&TBF, u, train(f * balanced, gap));
        assert!((at(1.0) - (emptied + TBF.depth_bytes) / 2.0).abs() < 1e-6);
        assert!((at(1.0 + PACING_BAND / 2.0) - (emptied + 0.75 * (TBF.depth_bytes - emptied))).abs() < 1e-6);
        assert_eq!(at(1.0 + 1.01 * PACING_BAND), TBF.depth_bytes);
        assert!((at(1.0 - 1.01 * PACING_BAND) - emptied).abs() < 1e-6);
        // Between full and drained in time: the level's shortfall against the call's 64 KiB
        // (less than the 75 KB bucket), relative to the drained level's.
        let w = weight(1.0);
        assert!((w - (u - at(1.0)) / (u - emptied)).abs() < 1e-12, "{w}");
        assert!(w > 0.4 && w < 0.5, "{w}");
        assert_eq!(weight(1.0 + 1.01 * PACING_BAND), 0.0);
        assert_eq!(weight(1.0 - 1.01 * PACING_BAND), 1.0);
        // A call larger than the bucket: halfway at the balance.
        let big = 4.0 * TBF.depth_bytes;
        let wb = drained_weight(&TBF, big, train(big / TBF.sustained_bps, gap));
        assert!((wb - 0.5).abs() < 1e-9, "{wb}");
        // Calls taking a fifth of the bucket find enough for all their bytes at the balance.
        let small = TBF.depth_bytes / 5.0;
        assert_eq!(
            drained_weight(&TBF, small, train(small / TBF.sustained_bps, 0.1e-3)),
            0.0
        );
        assert_eq!(drained_weight(&TBF, u, None), 0.0);
        assert_eq!(drained_weight(&TBF, 0.0, train(balanced, gap)), 0.0);
        let l = at(1.0);
        // The rate for a call: the peak within the level, the sustained rate beyond.
        assert_eq!(effective_bps(&TBF, 4096.0, TBF.depth_bytes), TBF.peak_bps);
        assert!((effective_bps(&TBF, 1e9, 0.0) - TBF.sustained_bps).abs() < 1e-6);
        let e = effective_bps(&TBF, u, l);
        assert!(e > TBF.sustained_bps && e < TBF.peak_bps, "{e}");
    }

    #[test]
    fn calls_paced_by_their_own_links_find_what_the_idle_part_refills() {
        let on = |link: usize| UsedBucket {
            at: LinkBucket {
                link,
                forward: true,
                bucket: TBF,
            },
            used: 32768.0,
        };
        let train = |gap_s: f64| CallTrain {
            period_s: 1e-3,
            gap_s,
            lead_s: 40e-6,
        };
        let r = TBF.sustained_bps;
        // One bucketed link on the calls' path: 30 us before its bytes, 50 after. Each cycle it
        // is idle for the lead, those 80 us and the gap, and refills that much: 140 us, 5.25 KB.
        let one = [on(0)];
        let span = |l: &[f64]| Some(30e-6 + busy_s(&TBF, 32768.0, l[0]) + 50e-6);
        let l = self_paced_levels(&one, train(20e-6), span).unwrap();
        assert!((l[0] - r * 140e-6).abs() < 1e-3 * TBF.depth_bytes, "{l:?}");
        // The same calls 2 ms apart: the bucket stays full.
        assert_eq!(
            self_paced_levels(&one, train(2e-3), span).unwrap(),
            vec![TBF.depth_bytes]
        );
        // Two such links in turn (store and forward): each refills while the other passes
        // its bytes, and together they hold the idle part's refill plus one call's bytes.
        let two = [on(0), on(1)];
        let span = |l: &[f64]| Some(30e-6 + busy_s(&TBF, 32768.0, l[0]) + busy_s(&TBF, 32768.0, l[1]) + 50e-6);
        let l = self_paced_levels(&two, train(20e-6), span).unwrap();
        let period = 40e-6 + span(&l).unwrap() + 20e-6;
        for &li in &l {
            let refill = r * (period - busy_s(&TBF, 32768.0, li));
            assert!(
                (li - refill).abs() < 1e-3 * TBF.depth_bytes,
                "{l:?}: {li} against {refill}"
            );
        }
        // (Less what their peak rate takes; a fortieth of the sustained here.)
        let want = r * 140e-6 + 32768.0;
        assert!((l[0] + l[1] - want).abs() < 0.03 * want, "{l:?} against {want}");
        assert!((l[0] - l[1]).abs() < 1e-6, "{l:?}");
        // A model that cannot time the call gives no levels.
        assert_eq!(self_paced_levels(&one, train(20e-6), |_| None), None);
    }

    #[test]
    fn calls_as_fast_as_the_sustained_rate_are_paced() {
        let train = |period_s: f64| {
            Some(CallTrain {
                period_s,
                gap_s: 0.1e-3,
                lead_s: 0.0,
            })
        };
        let u = 65536.0;
        let balanced = u / TBF.sustained_bps;
        // Around the balance, within the band either way: the level is uncertain.
        for f in [0.8, 1.0, 1.2] {
            assert!(paced(&TBF, u, train(f * balanced)), "{f}");
        }
        // Whether the link sets their pace: only within the narrower band.
        for (f, at) in [(0.85, false), (0.95, true), (1.0, true), (1.05, true), (1.15, false)] {
            assert_eq!(super::balanced(&TBF, u, train(f * balanced)), at, "{f}");
        }
        assert!(!super::balanced(&TBF, u, None));
        assert!(!super::balanced(&TBF, 0.0, train(balanced)));
        let on = |used: f64| UsedBucket {
            at: LinkBucket {
                link: 0,
                forward: true,
                bucket: TBF,
            },
            used,
        };
        let t = train(balanced).unwrap();
        assert!(super::sets_the_pace(&[on(0.0), on(u)], t));
        assert!(!super::sets_the_pace(&[on(0.0), on(2.0 * u)], t));
        // Far from it: full (a long period) or drained (calls back to back); no train: full.
        assert!(!paced(&TBF, u, train(1.3 * balanced)));
        assert!(!paced(&TBF, u, train(0.7 * balanced)));
        assert!(!paced(&TBF, u, None));
        assert!(!paced(&TBF, 0.0, train(balanced)));
        // A call that dwarfs the bucket: its level cannot matter much.
        let big = 20.0 * TBF.depth_bytes;
        assert!(!paced(&TBF, big, train(big / TBF.sustained_bps)));
        // The drained train finds only the gap's refill.
        let d = drained(CallTrain {
            period_s: balanced,
            gap_s: 0.1e-3,
            lead_s: 0.0,
        });
        let l = steady_level(&TBF, u, Some(d));
        assert!((l - 0.1e-3 * TBF.sustained_bps).abs() < 1e-6, "{l}");
    }

    /// Three switches of two hosts (one rank each) under a core, uplinks at `up` B/s.
    fn three_by_two(up: f64) -> Topology {
        let mut b = TopologyBuilder::new();
        let core = b.vertex("core", VertexKind::Switch);
        for s in 0..3u32 {
            let sw = b.vertex(format!("s{s}"), VertexKind::Switch);
            b.link(sw, core, 1e-6, up);
            for h in 0..2u32 {
                let r = s * 2 + h;
                let node = b.vertex(format!("h{r}"), VertexKind::Node);
                b.link(node, sw, 1e-6, 1.5e9);
                let rv = b.rank(r);
                b.link(rv, node, 0.0, 8e9);
            }
        }
        b.build().unwrap()
    }

    /// [`TBF`] on both directions of every slow link of `topo` (those under 100 MB/s).
    fn tbf_on_uplinks(topo: &Topology) -> Vec<LinkBucket> {
        (0..topo.links().len())
            .filter(|&l| topo.link(l).ab.bandwidth_bps < 1e8)
            .flat_map(|link| {
                [true, false].map(|forward| LinkBucket {
                    link,
                    forward,
                    bucket: TBF,
                })
            })
            .collect()
    }

    #[test]
    fn probe_pairs_cover_every_slow_direction_once() {
        let topo = three_by_two(37.5e6);
        let pairs = probe_pairs(&topo, 16);
        let mut seen = std::collections::HashSet::new();
        for p in &pairs {
            assert_ne!(topo.host_of_rank(p.from), topo.host_of_rank(p.to), "{p:?}");
            // Two uplinks in series on every cross-switch path, both slow.
            assert_eq!(p.slow_links.len(), 2, "{p:?}");
            for d in topo.path(topo.rank_vertex(p.from), topo.rank_vertex(p.to)) {
                seen.insert((d.link, d.forward));
            }
        }
        let slow: Vec<(usize, bool)> = (0..topo.links().len())
            .filter(|&l| topo.link(l).ab.bandwidth_bps < 1e8)
            .flat_map(|l| [(l, true), (l, false)])
            .collect();
        assert_eq!(slow.len(), 6);
        assert!(slow.iter().all(|d| seen.contains(d)), "{pairs:?}");
        assert!(pairs.len() <= 4, "{pairs:?}");
        assert_eq!(probe_pairs(&topo, 1).len(), 1);
        // Nothing slow, nothing to probe.
        assert!(probe_pairs(&three_by_two(1.5e9), 16).is_empty());
    }

    #[test]
    fn slow_links_are_those_below_the_widest_gap_between_rates() {
        // Rates like a loaded 3x3's (illustrative, not a recorded map): uplinks at 300 Mbit/s,
        // host links read from 2 to 16 Gbit/s. Half the fastest would take the 2-6 Gbit/s host
        // links too.
        let gbit = 1e9 / 8.0;
        let loaded = [0.3, 0.29, 0.31, 2.0, 3.5, 6.0, 9.0, 12.5, 16.0].map(|g| g * gbit);
        let t = slow_rate_threshold(loaded).unwrap();
        assert!(t > 0.31 * gbit && t < 2.0 * gbit, "{t}");
        // Two rates 1.5x apart: nothing stands apart. Fewer than two rates: nothing to compare.
        assert_eq!(slow_rate_threshold([1e9, 1.5e9, 1.2e9]), None);
        assert_eq!(slow_rate_threshold([1e9]), None);
        assert_eq!(slow_rate_threshold([f64::NAN, 0.0, 1e9]), None);
        // Three tiers: the widest gap decides (100 -> 40 is 2.5x, 40 -> 10 is 4x).
        let t = slow_rate_threshold([100.0, 100.0, 40.0, 10.0, 10.0]).unwrap();
        assert!(t > 10.0 && t < 40.0, "{t}");
        // On a tree: a host link read at a third of the others is not probed; the uplinks are.
        let mut topo = three_by_two(37.5e6);
        let host_link = (0..topo.links().len())
            .find(|&l| topo.link(l).ab.bandwidth_bps == 1.5e9)
            .unwrap();
        topo = {
            let mut b = topo.to_builder();
            b.links[host_link].ab.bandwidth_bps = 0.5e9;
            b.build().unwrap()
        };
        let pairs = probe_pairs(&topo, 16);
        assert!(!pairs.is_empty());
        assert!(pairs
            .iter()
            .flat_map(|p| &p.slow_links)
            .all(|d| topo.dir_params(*d).bandwidth_bps < 1e8));
    }

    /// The first of a call's messages over a policed link pass at its peak: with 10 kB of
    /// tokens on every uplink direction, four 4 KiB messages from the root to the other
    /// switches' ranks one after another (blocking), the first arrives in microseconds where
    /// one rate for the 16 kB the root's uplink carries made it wait; the last arrives about
    /// as late either way.
    #[test]
    fn a_calls_first_messages_pass_at_the_peak() {
        let topo = three_by_two(TBF.sustained_bps);
        let plan = Plan::from_tree(0, &trees::flat(6, 0), 1, "flat");
        let buckets = tbf_on_uplinks(&topo);
        let used = used_buckets(&topo, &plan, 4096, &buckets).unwrap();
        // The root switch's uplink carries all four; each other switch's downlink two.
        let mut loads: Vec<f64> = used.iter().map(|u| u.used).filter(|&u| u > 0.0).collect();
        loads.sort_by(f64::total_cmp);
        assert_eq!(loads, [8192.0, 8192.0, 16384.0]);
        let charged = with_levels(&topo, &used, &vec![10e3; used.len()]);
        assert!(charged.buckets.iter().all(|b| b.level_bytes == 10e3));
        let opts = |buckets: Vec<crate::sim::SimBucket>| crate::sim::SimOptions {
            blocking_sends: true,
            buckets,
            ..Default::default()
        };
        let run = |o| crate::sim::simulate_plan(&charged.topology, &plan, 4096, &o).unwrap();
        let (exact, one_rate) = (run(opts(charged.buckets.clone())), run(opts(Vec::new())));
        let remote = |d: &[f64]| {
            let mut v: Vec<f64> = d[2..].to_vec();
            v.sort_by(f64::total_cmp);
            v
        };
        let (e, o) = (remote(&exact.rank_done_s), remote(&one_rate.rank_done_s));
        assert!(e[0] < 20e-6, "{e:?}");
        assert!(o[0] > 40e-6, "{o:?}");
        assert!((e[3] - o[3]).abs() < 0.15 * o[3], "{e:?} {o:?}");
    }

    #[test]
    fn buckets_speed_up_only_what_fits_them() {
        let topo = three_by_two(TBF.sustained_bps);
        let train = |period_s: f64| {
            Some(CallTrain {
                period_s,
                gap_s: period_s / 2.0,
                lead_s: 0.0,
            })
        };
        let plan = Plan::from_tree(0, &trees::binomial(6, 0), 1, "binomial");
        let buckets = tbf_on_uplinks(&topo);
        let rate_on_uplinks = |t: &Topology| {
            (0..t.links().len())
                .filter(|&l| topo.link(l).ab.bandwidth_bps < 1e8)
                .flat_map(|l| [t.link(l).ab.bandwidth_bps, t.link(l).ba.bandwidth_bps])
                .fold(f64::INFINITY, f64::min)
        };
        // Small calls: the peak; 1 MiB calls with time to refill in between: a little above the
        // sustained rate (only the first 75 KB pass at the peak).
        let small = with_buckets(&topo, &plan, 4096, &buckets, train(1e-3)).unwrap();
        assert_eq!(rate_on_uplinks(&small.topology), TBF.peak_bps);
        // The simulator gets the buckets the call uses, full: those its sends cross.
        let used = bytes_per_link(&topo, &plan, 4096).unwrap();
        let crossed = buckets
            .iter()
            .filter(|lb| used[lb.link][lb.forward as usize] > 0.0)
            .count();
        assert!(
            crossed > 0 && small.buckets.len() == buckets.len(),
            "{:?}",
            small.buckets
        );
        assert!(
            small.buckets.iter().all(|s| s.level_bytes == TBF.depth_bytes),
            "{:?}",
            small.buckets
        );
        let big = with_buckets(&topo, &plan, 1 << 20, &buckets, train(100e-3)).unwrap();
        let r = rate_on_uplinks(&big.topology);
        assert!(r > TBF.sustained_bps && r < 1.2 * TBF.sustained_bps, "{r}");
        // Host links untouched; no buckets, no change.
        let host = (0..topo.links().len())
            .find(|&l| topo.link(l).ab.bandwidth_bps == 1.5e9)
            .unwrap();
        assert_eq!(big.topology.link(host).ab, LinkDir::new(1e-6, 1.5e9));
        let same = with_buckets(&topo, &plan, 4096, &[], train(1e-3)).unwrap();
        assert_eq!(same.topology, topo);
        assert!(same.buckets.is_empty());
        // The plan's weight toward drained is its most loaded bucketed link's: the binomial
        // tree over 3x2 puts one 64 KiB message on two uplink directions and two on the root
        // switch's up direction (0 -> 2, 0 -> 4), so a period that just refills two
        // balances there, and a period 20% longer puts every link past the band.
        let u = 65536.0;
        let used = bytes_per_link(&topo, &plan, 1 << 16).unwrap();
        let most = buckets
            .iter()
            .map(|lb| used[lb.link][lb.forward as usize])
            .fold(0.0, f64::max);
        assert_eq!(most, 2.0 * u);
        let at = |period_s: f64| plan_drained_weight(&topo, &plan, 1 << 16, &buckets, train(period_s)).unwrap();
        let w = at(most / TBF.sustained_bps);
        assert!((w - 0.5).abs() < 1e-9, "{w}");
        assert_eq!(at(1.2 * most / TBF.sustained_bps), 0.0);
        assert_eq!(at(0.5 * most / TBF.sustained_bps), 1.0);
        assert_eq!(
            plan_drained_weight(&topo, &plan, 1 << 16, &[], train(1e-3)).unwrap(),
            0.0
        );
        assert_eq!(plan_drained_weight(&topo, &plan, 1 << 16, &buckets, None).unwrap(), 0.0);
    }
}
