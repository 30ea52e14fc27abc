//! Set-up calibration on a host with three ranks or more, two under MPICH ([`MIN_RANKS`];
//! collective): the library's broadcast timed at [`FIT_SIZES`], and the host-mates' send curve
//! scaled per size so that the one-host model, given each call's entries, reproduces those
//! calls (`crate::estimate::curve_fit` says why the pair's curve alone misses there). Where
//! no scale can (it is held at or near its lower limit: the calls are about as fast as the modelled
//! point-to-point algorithm can be), the same calls are fitted as a shared-memory release
//! instead (`crate::estimate::release`).
//!
//! Only when every rank of the communicator is on one host: then the predictions are
//! `estimate::send_curve`'s, and `MPI_Bcast` crosses no network. The ranks' entries are read
//! from `CLOCK_MONOTONIC`, one clock for every process of a kernel, and each call's duration
//! from the profile's clock. Root 0, after a barrier, as a program's broadcasts most often
//! are; the scales serve every root. About 140 ms on the VM with 4 ranks (the communicator was
//! ready in 220-241 ms, against 81-100 ms without it; 3 jobs each), nearly all of it the
//! broadcasts (fitting takes 2.5-4 ms with 4-8 ranks: the plan's graph is built once per
//! size); only where `super::calibrate` runs (profiling configured, not
//! `TREECAST_CALIBRATE=0`). Kept for later communicators of the same processes in the same
//! order only: elsewhere the size, and so the library's algorithm, may differ.

use super::hosts::Hosts;
use super::setup_cache::{self, Shared};
use crate::error::Result;
use crate::estimate::curve_fit::{
    copies_at_once, fit_scale, found_data_below, median_time_over, CurveScale, LibraryTiming, Over, TimedCall,
    SCALE_RANGE,
};
use crate::estimate::release::{self, ReleaseCost};
use crate::estimate::send_curve::SendCurve;
use crate::exec::raw;
use crate::profile::placement;
use mpi::ffi::MPI_Comm;

/// Passes over the sizes, whose calls are fitted together. The state of a busy host can change
/// within a job: with 4 ranks on 2 cores the median 1 KiB call read 3.1 us in one pass and
/// 1.7-1.9 us in the next (2 of 3 jobs), and the job's own calls 3.1-3.2 us. Keeping the faster
/// pass's factor (a disturbance can only slow a reading) put 3-rank jobs 22-30% short in 2 of
/// 6 and met the goal from the entries in 1 of 12 four-rank jobs; the pooled fit in 4 of 12
/// (12 + 6 jobs alternating, 2026-11-27). The log gives each pass's factor as well.
pub const PASSES: usize = 2;

/// Sizes timed: 1 KiB to 16 MiB in powers of 2, one in each size class, so every class's
/// calls are predicted with a scale of their own. In powers of 4 the classes between took a
/// scale interpolated from their neighbours', which measure other algorithms and other states
/// of the host: 4 Open MPI ranks, 10 jobs of `predict_bench --sizes
/// 1000,3000,100000,700000,2500000,10000000` (2026-11-28), 2.5 MB predicted -23 .. +95% (the
/// 4 MiB scale, x2.8 in one job, carried to it), 3000 B +27 .. +64%; 35 of 60 sizes within 25%.
pub const FIT_SIZES: [u64; 15] = [
    1 << 10,
    1 << 11,
    1 << 12,
    1 << 13,
    1 << 14,
    1 << 15,
    1 << 16,
    1 << 17,
    1 << 18,
    1 << 19,
    1 << 20,
    1 << 21,
    1 << 22,
    1 << 23,
    1 << 24,
];

/// Untimed and timed calls per size: many where a call takes microseconds (a 1 KiB call of 4
/// ranks on 2 cores read 1.7 us in some jobs and 3.2 us in others, and single calls far
/// more), few where it takes milliseconds. At 4 MiB the first five or so calls after the
/// switch from 1 MiB run slower, settling over the calls (3 Open MPI ranks, a plain
/// `MPI_Bcast` loop timing each: 1561, 1111, 868, 787, 697 us, then 650-750), so two untimed
/// calls left the set-up reading 4 MiB 10-13% slower than the job's own calls (median over the
/// same-placement jobs; 0.96-1.00 at the other sizes) and predicting it +11 .. +13% (median of
/// 22 sizes, two batches of 20 jobs); six read 0.97-1.01 and +0 .. +5% (30 sizes, jobs
/// alternating), for about 8 ms more set-up.
pub fn calls(bytes: u64) -> (usize, usize) {
    match bytes {
        b if b <= 64 << 10 => (3, 31),
        b if b <= 256 << 10 => (3, 21),
        b if b <= 1 << 20 => (3, 15),
        b if b <= 4 << 20 => (6, 9),
        _ => (1, 5),
    }
}

/// The fewest ranks on one host whose communicator fits the library's broadcast. Open MPI's
/// broadcast between two ranks is one message, which the host-mates' curve measured (2 ranks
/// on the VM: 158 of 160 sizes within 25%); MPICH's is its shared-memory collective, which no
/// message of the curve is (2 ranks, 2 jobs, 2026-11-27: 1-16 KiB predicted 64-288% slow, 16
/// MiB 31-76%).
pub const MIN_RANKS: usize = if cfg!(treecast_mpi = "mpich") { 2 } else { 3 };

/// Whether the library's broadcast on one host sends the point-to-point messages that
/// `plan::library_plan` models, so that a rank's time in the call says whether it waited for
/// one (`curve_fit::Over::WaitingRanks`). Open MPI's does. MPICH's small broadcasts are its
/// shared-memory collective, where no rank waits for a message: over the ranks that "waited",
/// 4 MPICH ranks (2026-11-28, 10 jobs alternating with the fit over every rank) had 4 KiB
/// predicted +79 .. +332% in 4 jobs, against -59 .. +62% over every rank; with the release
/// still judged over every rank, 1 KiB once +244% (5 jobs).
pub const SENDS_MESSAGES: bool = !cfg!(treecast_mpi = "mpich");

/// Whether this communicator fits scales: all of its ranks on one host, at least
/// [`MIN_RANKS`].
pub fn applies(hosts: &Hosts) -> bool {
    let h = &hosts.host_of;
    h.len() >= MIN_RANKS && h.iter().all(|&x| x == h[0])
}

/// The scale kept for a size none of whose calls had a copy at once (`Fitted::untold`): the
/// pair's costs (factor 1) are what predicts such a size, rather than a factor carried over
/// from other sizes (the first try held a 4 MiB factor of x4.0 down to 1 KiB, +132 .. +193%).
/// With 3 Open MPI ranks on 2 cores, a set-up whose calls all ran with the two leaves on one
/// CPU, then a job whose calls ran with the root sharing one (60 jobs alternating with 0acf5c8,
/// 2026-11-28): the old fit's factor for such sizes (the two copies in a row, about 2) missed
/// 101 of 131 sizes by more than 25%, the pair's costs 27 of 142. The job's calls read 1.1-5.3
/// times the pair's one-way time there, the host's state, which a set-up in the other placement
/// does not see.
const UNTOLD: f64 = -1.0;

/// Numbers per size in what [`measure`] fits and keeps: the kept scale, the release costs
/// (release, copy, root, whether the root waits), then each pass's median (NaN: none). After
/// every size's, per size the most frequent grouping of the ranks by CPU in its calls, one
/// number per rank (`profile::placement::grouping`; NaN: unknown).
const PER_SIZE: usize = 5 + PASSES;
/// Numbers per rank and timed call: entry, exit, the CPU it finished on (NaN: unknown).
const PER_CALL: usize = 3;

/// The length of what [`measure`] keeps for `nranks` ranks.
fn kept_len(nranks: u32) -> usize {
    FIT_SIZES.len() * (PER_SIZE + nranks as usize)
}

/// Collective over `comm` (every rank on one host, [`applies`]): the scales and what each
/// size read, the same on every rank (`None` when no size could be fitted). `curve` and
/// `issue_s` are the pair's calibration, the same on every rank. A communicator of the same
/// processes in the same order as an earlier one (a duplicate of `MPI_COMM_WORLD`, as many
/// libraries make) takes what that one measured (`setup_cache`): same size, same library
/// algorithm, same host. It saved about 140 ms of a profiled duplicate's set-up with 4 ranks.
///
/// # Safety
/// `comm` must be our valid duplicate communicator; every rank calls this collectively.
pub unsafe fn measure(
    comm: MPI_Comm,
    rank: u32,
    nranks: u32,
    (curve, issue_s): (&SendCurve, f64),
    shared: &Shared,
) -> Result<Option<(CurveScale, Vec<LibraryTiming>)>> {
    let key = shared.ranks();
    let out = match shared.lookup(comm, &[key], kept_len(nranks))?.pop().flatten() {
        Some(out) => {
            if rank == 0 {
                log_kept(nranks, &out);
            }
            out
        }
        None => {
            let out = time_and_fit(comm, rank, nranks, curve, issue_s)?;
            setup_cache::keep(key, &out);
            out
        }
    };
    let scale = CurveScale::new(
        FIT_SIZES
            .iter()
            .zip(out.chunks_exact(PER_SIZE))
            .map(|(&b, o)| (b, if o[0] == UNTOLD { 1.0 } else { o[0] }))
            .collect(),
    );
    let (fits, groupings) = out.split_at(FIT_SIZES.len() * PER_SIZE);
    let timing = FIT_SIZES
        .iter()
        .zip(fits.chunks_exact(PER_SIZE))
        .zip(groupings.chunks_exact(nranks as usize))
        .map(|((&bytes, o), g)| LibraryTiming {
            bytes,
            pass_median_s: o[5..].to_vec(),
            scale: (o[0].is_finite() && o[0] > 0.0).then_some(o[0]),
            release: o[1..5].iter().all(|x| x.is_finite()).then_some(ReleaseCost {
                release_s: o[1],
                copy_s: o[2],
                root_s: o[3],
                root_waits: o[4] > 0.5,
            }),
            cpu_grouping: g.iter().map(|&x| x.is_finite().then_some(x as u32)).collect(),
        })
        .collect();
    Ok(scale.map(|s| (s, timing)))
}

/// Collective: the library's broadcast timed at every size in every pass, and rank 0's fit,
/// broadcast ([`PER_SIZE`] numbers per size).
///
/// # Safety
/// As [`measure`].
unsafe fn time_and_fit(comm: MPI_Comm, rank: u32, nranks: u32, curve: &SendCurve, issue_s: f64) -> Result<Vec<f64>> {
    let largest = *FIT_SIZES.last().expect("sizes") as usize;
    // Written data (see `calibrate::readings`): the kernel's zero page reads faster.
    let mut buf: Vec<u8> = (0..largest)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(rank as u8) | 1)
        .collect();
    // Entries on the kernel's clock, shared by the ranks; each call's duration on the
    // profile's clock, as the profile times the job's calls: at 1 KiB under MPICH a call takes
    // about 0.1 us, and two monotonic-clock reads put 20-40 ns more into it than two of the
    // time-stamp counter (predictions from the entries were 14-39% slow in 5 of 6 jobs).
    let clock = crate::profile::clock::Clock::global();
    let mut mine: Vec<f64> = Vec::new();
    // Where ranks outnumber the host's CPUs, the scheduler picks which share one, and with 3
    // Open MPI ranks on 2 cores it picked the two leaves together for a third of the set-ups:
    // then no call has a copy running at once and no scale is told (`UNTOLD`), while the job's
    // calls mostly ran with the root sharing. Pinned round robin (as `--bind-to
    // core:overload-allowed`) the set-up reads the root with a leaf, the placement whose
    // scale is told, and a job that runs with the leaves together is predicted from the
    // queued copies. 3 ranks, 2 batches of 20 jobs alternating with the set-up unpinned:
    // 144 -> 152 and 139 -> 152 of 160 sizes within 25%, jobs 10 -> 14 and 8 -> 14 of 20;
    // 4 ranks: 143 -> 153 and 141 -> 144, 9 -> 14 and 9 -> 8. Not under MPICH, whose fit reads
    // no placements (`SENDS_MESSAGES`): pinned, its set-up read faster than the unpinned job's
    // calls, 72 -> 48 of 80 sizes (4 ranks, 10 jobs alternating). The mask is given back after.
    let _pin = SENDS_MESSAGES.then(|| super::pin::Pinned::round_robin(rank, nranks));
    for _ in 0..PASSES {
        for &bytes in &FIT_SIZES {
            let (warmup, timed) = calls(bytes);
            for k in 0..warmup + timed {
                raw::barrier(comm)?;
                let t0 = crate::host::monotonic_s();
                let c0 = clock.now();
                raw::bcast_bytes(&mut buf[..bytes as usize], 0, comm)?;
                let c1 = clock.now();
                if k >= warmup {
                    let cpu = placement::current_cpu().map_or(f64::NAN, f64::from);
                    mine.extend([t0, t0 + clock.seconds(c0, c1), cpu]);
                }
            }
        }
    }
    let mut all = vec![0.0f64; mine.len() * nranks as usize];
    raw::allgather(&mine, &mut all, comm)?;
    let mut out = vec![f64::NAN; kept_len(nranks)];
    if rank == 0 {
        let froms: Vec<usize> = (0..PASSES).map(|p| p * mine.len() / PASSES).collect();
        // Each pass's own scale is only for the log; fitting it doubled the fitting time
        // (30 ms of set-up with 4 ranks, 67 ms with 8, for all three fits).
        let logged = log::log_enabled!(log::Level::Info);
        let passes: Vec<Vec<Fitted>> = froms
            .iter()
            .map(|&f| {
                fit(
                    &all,
                    nranks as usize,
                    mine.len(),
                    &[f],
                    curve,
                    logged.then_some(issue_s),
                )
            })
            .collect();
        let pooled = fit(&all, nranks as usize, mine.len(), &froms, curve, Some(issue_s));
        if logged {
            log_fit(nranks, &passes, &pooled);
        }
        let at = FIT_SIZES.len() * PER_SIZE;
        for (i, o) in out[..at].chunks_exact_mut(PER_SIZE).enumerate() {
            o[0] = match pooled[i] {
                Fitted { untold: true, .. } => UNTOLD,
                Fitted { scale, .. } => scale.unwrap_or(f64::NAN),
            };
            if let Some(r) = pooled[i].release {
                o[1..5].copy_from_slice(&[r.release_s, r.copy_s, r.root_s, f64::from(u8::from(r.root_waits))]);
            }
            for (p, pass) in passes.iter().enumerate() {
                o[5 + p] = pass[i].measured_s;
            }
        }
        let groupings = most_frequent_groupings(&all, nranks as usize, mine.len(), &froms);
        for (o, g) in out[at..].chunks_exact_mut(nranks as usize).zip(groupings) {
            for (x, lead) in o.iter_mut().zip(g.into_iter().flatten()) {
                *x = f64::from(lead);
            }
        }
    }
    raw::bcast(&mut out, 0, comm)?;
    Ok(out)
}

/// A scale at most this (the range's lower end, or within the set-up's spread of it,
/// `curve_fit::PASS_SPREAD`) says the calls are about as fast as the point-to-point model can
/// be made, or faster: they are fitted as a release. Under MPICH with 2 ranks 4 KiB fitted
/// 0.25-0.38 and, kept as messages, was predicted 24-66% short from the entries; taking the
/// release up to 0.3125 met the goal from the entries in 5 of 6 two-rank and 6 of 6 four-rank
/// jobs, against 3 and 4 of 6 (alternating, 2026-11-27). Open MPI's scales on the VM lie at
/// 0.74-2.6.
pub const RELEASE_BELOW: f64 = SCALE_RANGE.0 * (1.0 + crate::estimate::curve_fit::PASS_SPREAD);

/// One size's fit, for the log.
struct Fitted {
    /// Median over calls of the median rank's time in the call (seconds): of the ranks that
    /// waited for their data where the scale is fitted over those (`curve_fit::Over`).
    measured_s: f64,
    scale: Option<f64>,
    /// In every call each receiver copied queued behind another on its CPU
    /// (`curve_fit::copies_at_once`): no scale to fit, the pair's costs are kept.
    untold: bool,
    /// Where the scale is at most [`RELEASE_BELOW`] (the point-to-point model can hardly be as fast
    /// as the calls): the calls fitted as a release (`estimate::release`).
    release: Option<ReleaseCost>,
}

/// The fits (with `issue_s`, the pair's issue cost; without, only the medians) of the pair's
/// `curve` to every rank's readings of the passes starting at `froms` pooled (`all`:
/// `per_rank` numbers per rank, in rank order; per pass, per size, per call, entry then exit).
fn fit(
    all: &[f64],
    nranks: usize,
    per_rank: usize,
    froms: &[usize],
    curve: &SendCurve,
    issue_s: Option<f64>,
) -> Vec<Fitted> {
    let mut offset = 0;
    FIT_SIZES
        .iter()
        .map(|&bytes| {
            let timed = calls(bytes).1;
            let tc: Vec<TimedCall> = froms
                .iter()
                .flat_map(|&from| (0..timed).map(move |k| from + offset + PER_CALL * k))
                .map(|i| TimedCall {
                    enter: (0..nranks).map(|r| all[r * per_rank + i]).collect(),
                    leave: (0..nranks).map(|r| all[r * per_rank + i + 1]).collect(),
                    grouping: if SENDS_MESSAGES {
                        call_grouping(all, nranks, per_rank, i)
                    } else {
                        None
                    },
                })
                .collect();
            offset += PER_CALL * timed;
            // The ranks whose median is read and reproduced: those that waited for their data
            // where the library sends it ([`SENDS_MESSAGES`]) and their times tell them apart.
            let over = if SENDS_MESSAGES && found_data_below(curve, bytes).is_some() {
                Over::WaitingRanks
            } else {
                Over::AllRanks
            };
            let plan = predicted_plan(nranks as u32, bytes);
            let fit_over = |over| issue_s.and_then(|i| fit_scale(&plan, bytes, curve, i, &tc, over));
            // Whether the size is a release is judged over every rank, as the release is fitted.
            let every = fit_over(Over::AllRanks);
            let release = every.filter(|&s| s <= RELEASE_BELOW).and_then(|_| release::fit(0, &tc));
            let scale = match over {
                Over::WaitingRanks if release.is_none() => fit_over(over),
                _ => every,
            };
            Fitted {
                measured_s: median_time_over(&tc, curve, bytes, over),
                scale,
                untold: scale.is_none() && !copies_at_once(&plan, bytes, curve, &tc),
                release,
            }
        })
        .collect()
}

/// Per size, the most frequent grouping of the ranks by CPU over the calls of the passes
/// starting at `froms` (`all` as [`fit`] reads it; `None` where no call's CPUs were all
/// known). The ranks are on one host, so on one kernel.
fn most_frequent_groupings(all: &[f64], nranks: usize, per_rank: usize, froms: &[usize]) -> Vec<Option<Vec<u32>>> {
    let mut offset = 0;
    FIT_SIZES
        .iter()
        .map(|&bytes| {
            let timed = calls(bytes).1;
            let groupings: Vec<Option<Vec<u32>>> = froms
                .iter()
                .flat_map(|&from| (0..timed).map(move |k| from + offset + PER_CALL * k))
                .map(|i| call_grouping(all, nranks, per_rank, i))
                .collect();
            offset += PER_CALL * timed;
            placement::most_frequent(groupings).map(|(g, _, _)| g)
        })
        .collect()
}

/// The grouping of the ranks by CPU in the timed call at `i` of every rank's readings (`all`
/// as [`fit`] reads it); `None` unless every rank's CPU was read. The ranks are on one host,
/// so on one kernel.
fn call_grouping(all: &[f64], nranks: usize, per_rank: usize, i: usize) -> Option<Vec<u32>> {
    let cpus: Vec<Option<(u64, u32)>> = (0..nranks)
        .map(|r| all[r * per_rank + i + 2])
        .map(|c| (c.is_finite() && c >= 0.0).then_some((1, c as u32)))
        .collect();
    placement::grouping(&cpus)
}

/// The plan predictions use for the library's calls of `bytes` on one host.
fn predicted_plan(nranks: u32, bytes: u64) -> crate::plan::Plan {
    crate::plan::library_plan_for_class(nranks, 0, crate::plan::size_class(bytes))
}

fn log_fit(nranks: u32, passes: &[Vec<Fitted>], pooled: &[Fitted]) {
    let (lo, hi) = crate::estimate::curve_fit::SCALE_RANGE;
    let scale = |f: &Fitted| {
        match (f.scale, f.release) {
        (None, _) if f.untold => "no fit (every receiver queued behind another on its CPU): the pair's costs".to_string(),
        (None, _) => "no fit".to_string(),
        // The point-to-point model cannot be as fast as the calls: the library does not send
        // messages there (MPICH's shared-memory broadcast at 1-16 KiB).
        (Some(s), Some(r)) => format!(
            "x{s:.2} (at or near the limit: released after {:.2} us, copied in {:.2} us, the root leaving {:.2} us after {})",
            r.release_s * 1e6,
            r.copy_s * 1e6,
            r.root_s * 1e6,
            if r.root_waits { "the last receiver" } else { "entering" }
        ),
        // The set-up was disturbed, or the library's algorithm is not the modelled one.
        (Some(s), None) if s <= lo || s >= hi => format!("x{s:.2} (at the limit)"),
        (Some(s), None) => format!("x{s:.2}"),
    }
    };
    let parts: Vec<String> = (0..FIT_SIZES.len())
        .map(|i| {
            let each: Vec<String> = passes
                .iter()
                .map(|p| format!("{:.1} us {}", p[i].measured_s * 1e6, scale(&p[i])))
                .collect();
            format!("{} B {}; kept {}", FIT_SIZES[i], each.join(", "), scale(&pooled[i]))
        })
        .collect();
    log::info!(
        "treecast: the library's broadcast timed at set-up on one host of {nranks} ranks (per pass, the median rank's time in the call, below 4 KiB under Open MPI of the ranks that waited for their data, and the scale of the host-mates' costs that reproduces it; then the scale of both passes' calls together, which is kept): {}",
        parts.join(" | ")
    );
}

/// The log line of readings kept from an earlier communicator (`out`: [`PER_SIZE`] per size).
fn log_kept(nranks: u32, out: &[f64]) {
    let parts: Vec<String> = FIT_SIZES
        .iter()
        .zip(out.chunks_exact(PER_SIZE))
        .map(|(b, o)| {
            let released = if o[1].is_finite() { " (released)" } else { "" };
            if o[0] == UNTOLD {
                format!("{b} B the pair's costs (no copies at once)")
            } else {
                format!("{b} B x{:.2}{released}", o[0])
            }
        })
        .collect();
    log::info!(
        "treecast: the library's broadcast on one host of {nranks} ranks, kept from an earlier communicator of the same ranks: {}",
        parts.join(" | ")
    );
}
