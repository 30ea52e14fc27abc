//! Set-up calibration on a host with three ranks or more (collective): the library's
//! broadcast timed at [`FIT_SIZES`], and the host-mates' send curve scaled per size so that
//! the one-host model, given each call's entries, reproduces those calls
//! (`crate::estimate::curve_fit` says why the pair's curve alone misses there).
//!
//! Only when every rank of the communicator is on one host: then the predictions are
//! `estimate::send_curve`'s, and `MPI_Bcast` crosses no network. The ranks' entries and exits
//! are read from `CLOCK_MONOTONIC`, one clock for every process of a kernel. Root 0, after a
//! barrier, as a program's broadcasts most often are; the scales serve every root. About
//! 140 ms on the VM with 4 ranks (the communicator was ready in 220-241 ms, against 81-100 ms
//! without it; 3 jobs each), nearly all of it the broadcasts (fitting takes 2.5-4 ms with 4-8
//! ranks: the plan's graph is built once per size); only where `super::calibrate` runs
//! (profiling configured, not `TREECAST_CALIBRATE=0`). Not kept for later communicators: their
//! size, and so the library's algorithm, may differ.

use super::hosts::Hosts;
use crate::error::Result;
use crate::estimate::curve_fit::{fit_scale, CurveScale, LibraryTiming, TimedCall};
use crate::estimate::send_curve::SendCurve;
use crate::exec::raw;
use mpi::ffi::MPI_Comm;

/// Passes over the sizes, whose calls are fitted together. The state of a busy host can change
/// within a job: with 4 ranks on 2 cores the median 1 KiB call read 3.1 us in one pass and
/// 1.7-1.9 us in the next (2 of 3 jobs), and the job's own calls 3.1-3.2 us. Keeping the faster
/// pass's factor (a disturbance can only slow a reading) put 3-rank jobs 22-30% short in 2 of
/// 6 and met the goal from the entries in 1 of 12 four-rank jobs; the pooled fit in 4 of 12
/// (12 + 6 jobs alternating, 2026-11-27). The log gives each pass's factor as well.
pub const PASSES: usize = 2;

/// Sizes timed: 1 KiB to 16 MiB in powers of 4 (the scale is interpolated between them).
pub const FIT_SIZES: [u64; 8] = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24];

/// Untimed and timed calls per size: many where a call takes microseconds (a 1 KiB call of 4
/// ranks on 2 cores read 1.7 us in some jobs and 3.2 us in others, and single calls far
/// more), few where it takes milliseconds.
pub fn calls(bytes: u64) -> (usize, usize) {
    match bytes {
        b if b <= 64 << 10 => (3, 31),
        b if b <= 256 << 10 => (3, 21),
        b if b <= 1 << 20 => (3, 15),
        b if b <= 4 << 20 => (2, 9),
        _ => (1, 5),
    }
}

/// Whether this communicator fits scales: all of its ranks on one host, at least three.
pub fn applies(hosts: &Hosts) -> bool {
    let h = &hosts.host_of;
    h.len() >= 3 && h.iter().all(|&x| x == h[0])
}

/// Seconds on the kernel's monotonic clock.
fn monotonic() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Collective over `comm` (every rank on one host, [`applies`]): the scales and what each
/// size read, the same on every rank (`None` when no size could be fitted). `curve` and
/// `issue_s` are the pair's calibration, the same on every rank.
///
/// # Safety
/// `comm` must be our valid duplicate communicator; every rank calls this collectively.
pub unsafe fn measure(
    comm: MPI_Comm,
    rank: u32,
    nranks: u32,
    curve: &SendCurve,
    issue_s: f64,
) -> Result<Option<(CurveScale, Vec<LibraryTiming>)>> {
    let largest = *FIT_SIZES.last().expect("sizes") as usize;
    // Written data (see `calibrate::readings`): the kernel's zero page reads faster.
    let mut buf: Vec<u8> = (0..largest)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(rank as u8) | 1)
        .collect();
    let mut mine: Vec<f64> = Vec::new();
    for _ in 0..PASSES {
        for &bytes in &FIT_SIZES {
            let (warmup, timed) = calls(bytes);
            for k in 0..warmup + timed {
                raw::barrier(comm)?;
                let t0 = monotonic();
                raw::bcast_bytes(&mut buf[..bytes as usize], 0, comm)?;
                let t1 = monotonic();
                if k >= warmup {
                    mine.extend([t0, t1]);
                }
            }
        }
    }
    let mut all = vec![0.0f64; mine.len() * nranks as usize];
    raw::allgather(&mine, &mut all, comm)?;
    // Per size: the kept scale, then each pass's median (NaN: none).
    let per_size = 1 + PASSES;
    let mut out = vec![f64::NAN; FIT_SIZES.len() * per_size];
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
                    logged.then_some((curve, issue_s)),
                )
            })
            .collect();
        let pooled = fit(&all, nranks as usize, mine.len(), &froms, Some((curve, issue_s)));
        if logged {
            log_fit(nranks, &passes, &pooled);
        }
        for (i, o) in out.chunks_exact_mut(per_size).enumerate() {
            o[0] = pooled[i].scale.unwrap_or(f64::NAN);
            for (p, pass) in passes.iter().enumerate() {
                o[1 + p] = pass[i].measured_s;
            }
        }
    }
    raw::bcast(&mut out, 0, comm)?;
    let scale = CurveScale::new(
        FIT_SIZES
            .iter()
            .zip(out.chunks_exact(per_size))
            .map(|(&b, o)| (b, o[0]))
            .collect(),
    );
    let timing = FIT_SIZES
        .iter()
        .zip(out.chunks_exact(per_size))
        .map(|(&bytes, o)| LibraryTiming {
            bytes,
            pass_median_s: o[1..].to_vec(),
            scale: o[0].is_finite().then_some(o[0]),
        })
        .collect();
    Ok(scale.map(|s| (s, timing)))
}

/// One size's fit, for the log.
struct Fitted {
    /// Median over calls of the median rank's time in the call (seconds).
    measured_s: f64,
    scale: Option<f64>,
}

/// The fits (with `model`: the pair's curve and issue cost; without, only the medians) from
/// every rank's readings of the passes starting at `froms` pooled (`all`:
/// `per_rank` numbers per rank, in rank order; per pass, per size, per call, entry then exit).
fn fit(all: &[f64], nranks: usize, per_rank: usize, froms: &[usize], model: Option<(&SendCurve, f64)>) -> Vec<Fitted> {
    let mut offset = 0;
    FIT_SIZES
        .iter()
        .map(|&bytes| {
            let timed = calls(bytes).1;
            let tc: Vec<TimedCall> = froms
                .iter()
                .flat_map(|&from| (0..timed).map(move |k| from + offset + 2 * k))
                .map(|i| TimedCall {
                    enter: (0..nranks).map(|r| all[r * per_rank + i]).collect(),
                    leave: (0..nranks).map(|r| all[r * per_rank + i + 1]).collect(),
                })
                .collect();
            offset += 2 * timed;
            let durations: Vec<f64> = tc.iter().map(TimedCall::median_duration).collect();
            Fitted {
                measured_s: crate::estimate::rank_times::median(&durations),
                scale: model.and_then(|(curve, issue_s)| {
                    fit_scale(&predicted_plan(nranks as u32, bytes), bytes, curve, issue_s, &tc)
                }),
            }
        })
        .collect()
}

/// The plan predictions use for the library's calls of `bytes` on one host.
fn predicted_plan(nranks: u32, bytes: u64) -> crate::plan::Plan {
    crate::plan::library_plan_for_class(nranks, 0, crate::plan::size_class(bytes))
}

fn log_fit(nranks: u32, passes: &[Vec<Fitted>], pooled: &[Fitted]) {
    let (lo, hi) = crate::estimate::curve_fit::SCALE_RANGE;
    let scale = |f: &Fitted| match f.scale {
        None => "no fit".to_string(),
        // The model cannot reach the reading: its algorithm is not the library's (MPICH's
        // shared-memory broadcast at 1-16 KiB) or the set-up was disturbed.
        Some(s) if s <= lo || s >= hi => format!("x{s:.2} (at the limit)"),
        Some(s) => format!("x{s:.2}"),
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
        "treecast: the library's broadcast timed at set-up on one host of {nranks} ranks (per pass, the median rank's time in the call and the scale of the host-mates' costs that reproduces it; then the scale of both passes' calls together, which is kept): {}",
        parts.join(" | ")
    );
}
