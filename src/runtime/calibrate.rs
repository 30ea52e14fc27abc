//! Set-up calibration (collective): what a message between two ranks of one host costs in this
//! job, for the predictions profiles make (`crate::estimate::calibrate` and
//! `crate::estimate::send_curve` turn the readings into model parameters).
//!
//! The first two ranks sharing a host (lowest rank first) measure, while every other rank
//! waits in the broadcast of the result (so the machine is as busy as during a broadcast).
//! For each of the [`CURVE_SIZES`]:
//! - transfers timed by the lower rank ([`reps`] after a warm-up), and its blocking send of
//!   each (how long a send keeps its sender). Below [`STREAM_FROM`] they are round trips, the
//!   median's half being the one-way time; from it on, one way with a 0-byte acknowledgement,
//!   the fastest less the acknowledgement's own one-way time (see [`STREAM_FROM`] and
//!   [`STREAM_WARMUP`] for why);
//! - [`LATE_REPS`] sends to a receiver that starts receiving [`LATE_US`] later, once the
//!   message's envelope is there: whether the send waits for it (the median send) and how
//!   long the late receive takes (the fastest: it is the receiver's own work, which a busy
//!   core only slows; with the median, one run of 4 ranks on 2 cores read 4.5 us for 16 KiB,
//!   twice what its broadcasts' late ranks took).
//!
//! The sizes below [`SECOND_PASS_BELOW`] are then measured once more and each reading keeps
//! the lesser of its two passes (a moment that slows the machine spans several sizes).
//!
//! Then a burst of [`BURST`] small non-blocking sends (the per-message overhead at the sender,
//! used between hosts when there is no token ring). The lower of the pair broadcasts the
//! numbers, so every rank holds the same calibration, and keeps them for the communicators made
//! later that have the same pair (`super::setup_cache`). About 100 ms on the VM, most of it the
//! transfers of 4-16 MiB (2 ranks: the communicator was ready in 100-148 ms, median 109; 3 ms
//! without; the second pass adds about 13 ms), only
//! when profiling is configured (on rank 0, which decides for all); `TREECAST_CALIBRATE=0`
//! skips it. Planning never reads it. Where every rank is on one host and there are three or
//! more, [`super::library_fit`] then times the library's broadcast and scales the curve to it.

use super::hosts::Hosts;
use super::setup_cache::{self, Shared};
use crate::error::Result;
use crate::estimate::calibrate::{fit_path_cost, median, overhead_from_burst, split_overhead, Calibration};
use crate::estimate::send_curve::{SendCost, SendCurve};
use crate::exec::raw;
use mpi::ffi::MPI_Comm;
use std::os::raw::c_int;

/// Message sizes measured: powers of 2 from 8 B to 16 MiB, as PLogP tools measure (see
/// `estimate::send_curve`). Sparser points miss the steps between them: the small-message box,
/// the eager limit, the cache (a 1 MiB message between two ranks of the VM moved at 17 GB/s,
/// a 2 MiB one at 10 GB/s; interpolated from 256 KiB and 2 MiB, 1 MiB was 48% too slow). The
/// curve runs to 16 MiB because the last cache step lies beyond 2 MiB: on the VM (32 MiB of L3
/// shared with other guests) 4 MiB broadcasts between two ranks moved at 15 GB/s and 16 MiB
/// ones at 6-8 GB/s, so 16 MiB extrapolated from 2 MiB was predicted 29-60% short.
pub const CURVE_SIZES: [u64; 22] = {
    let mut s = [0u64; 22];
    let mut i = 0;
    while i < 22 {
        s[i] = 8 << i;
        i += 1;
    }
    s
};
/// Timed round trips per size below [`STREAM_FROM`] (after [`WARMUP`]); the median is kept.
pub const REPS: usize = 9;
/// Timed one-way transfers per size from [`STREAM_FROM`] to 2 MiB (after [`STREAM_WARMUP`]);
/// the fastest is kept. Many, because 1 MiB kept speeding up for about 15 transfers.
pub const STREAM_REPS: usize = 16;
/// Timed one-way transfers per size above 2 MiB: each takes 0.3-3 ms.
pub const LARGE_REPS: usize = 6;
/// From this size on, transfers go one way with a 0-byte acknowledgement instead of round
/// trips. A round trip with a send and a receive buffer on each rank touches four buffers of
/// the size, a broadcast between two ranks two (the root's and the receiver's). Once four no
/// longer fit the caches, the round trip reads slower than the broadcast: a 4 MiB round trip
/// read 367-407 us one way, against 277-289 us for 4 MiB broadcasts (3 runs, 2026-11-27), and
/// 1 MiB round trips predicted two-rank broadcasts 12-48% slow in 11 of 20 runs (README).
/// Below it the acknowledgement's own time would be too large a part.
pub const STREAM_FROM: u64 = 256 << 10;

/// The largest size of the latency-bandwidth line put on rank-to-host links between hosts
/// (`Calibration::host_path`): the size the bandwidth map's transfers are near, not the
/// cache-starved 16 MiB.
const PATH_LINE_TO: u64 = 2 << 20;

/// Timed transfers for a message of `bytes`.
pub fn reps(bytes: u64) -> usize {
    match bytes {
        b if b < STREAM_FROM => REPS,
        b if b <= 2 << 20 => STREAM_REPS,
        _ => LARGE_REPS,
    }
}
const WARMUP: usize = 2;
/// Untimed transfers before the timed ones from [`STREAM_FROM`] on. Back-to-back transfers of
/// a new size speed up over the first ten or so on the VM (1 MiB: 99, 89, 83 ... 70 us; 4 MiB:
/// 392, 364, 308 ... 280 us), and then hold, as the benchmark's hundreds of calls do; so the
/// fastest timed transfer is kept there, not the median.
const STREAM_WARMUP: usize = 4;
/// Sends to a late receiver per size (the median send and the fastest receive are kept),
/// and how late it is (us).
pub const LATE_REPS: usize = 5;
pub const LATE_US: f64 = 50.0;
/// How long the late receiver waits for the message's envelope before receiving anyway.
const ARRIVAL_WAIT_S: f64 = 0.1;
/// Small sends of the overhead burst.
pub const BURST: u32 = 16;
const TAG: c_int = 0x7c_a1;
/// Numbers per size in the broadcast result: sender, one-way, late receive, late sender.
const PER_SIZE: usize = 4;

/// The first two ranks of `hosts` sharing a host, lowest first.
pub fn host_mates(hosts: &Hosts) -> Option<(u32, u32)> {
    let h = &hosts.host_of;
    (0..h.len()).find_map(|a| ((a + 1)..h.len()).find(|&b| h[b] == h[a]).map(|b| (a as u32, b as u32)))
}

/// Busy-wait `seconds` (a sleep would hand the CPU to another rank and come back late).
fn spin(seconds: f64) {
    let t0 = raw::wtime();
    while raw::wtime() - t0 < seconds {
        std::hint::spin_loop();
    }
}

/// One size's readings on the measuring pair: `[sender, one-way, late receive, late sender]`
/// (seconds; the sender times on the lower rank, the late receive on the higher; zeros where
/// the other rank measured). Each rank sends from `out` and receives into `inb`: a ping-pong
/// that sends back the buffer it just received makes the peer read freshly written cache
/// lines of another core, which a broadcast's sends do not (32 KiB one way took 7.2 us so,
/// 3.1 us with two buffers, as a broadcast's transfer does). From [`STREAM_FROM`] on, only the
/// lower rank sends the size and the higher acknowledges with 0 bytes, whose one-way time
/// `ack_s` (measured at the smallest size) is taken off.
fn measure_size(
    comm: MPI_Comm,
    lower: bool,
    peer: c_int,
    (out, inb): (&[u8], &mut [u8]),
    bytes: u64,
    ack_s: f64,
) -> Result<[f64; PER_SIZE]> {
    let stream = bytes >= STREAM_FROM;
    let back = if stream { 0 } else { bytes };
    let (warmup, n) = (if stream { STREAM_WARMUP } else { WARMUP }, reps(bytes));
    let (mut sends, mut trips) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for rep in 0..warmup + n {
        let t0 = raw::wtime();
        if lower {
            send(comm, peer, out, bytes)?;
            let t1 = raw::wtime();
            recv(comm, peer, inb, back)?;
            if rep >= warmup {
                sends.push(t1 - t0);
                trips.push(raw::wtime() - t0);
            }
        } else {
            recv(comm, peer, inb, bytes)?;
            send(comm, peer, out, back)?;
        }
    }
    let (sender, one_way) = if !lower {
        (0.0, 0.0)
    } else if stream {
        settled_one_way(&sends, &trips, ack_s)
    } else {
        (median(&sends), median(&trips) / 2.0)
    };
    let (mut late_sends, mut late_recvs) = (Vec::with_capacity(LATE_REPS), Vec::with_capacity(LATE_REPS));
    for _ in 0..LATE_REPS {
        if lower {
            // Go when the receiver says so; it then waits LATE_US before receiving.
            recv(comm, peer, inb, 0)?;
            let t0 = raw::wtime();
            send(comm, peer, out, bytes)?;
            late_sends.push(raw::wtime() - t0);
        } else {
            send(comm, peer, out, 0)?;
            spin(LATE_US * 1e-6);
            // Time the receive of a message that is there: a sender slow to see the go
            // (MPICH's throttled progress, 4 ranks on 2 cores) made every late receive read
            // 54 us otherwise, the sender's delay and not the receive.
            let t0 = raw::wtime();
            while raw::iprobe(peer, TAG, comm)?.is_none() && raw::wtime() - t0 < ARRIVAL_WAIT_S {
                std::hint::spin_loop();
            }
            let t0 = raw::wtime();
            recv(comm, peer, inb, bytes)?;
            late_recvs.push(raw::wtime() - t0);
        }
    }
    if stream {
        let us = |v: &[f64]| us_list(v, 1);
        if lower {
            log::trace!("treecast: calibration {bytes} B: trips (us) {}", us(&trips));
        } else {
            log::trace!(
                "treecast: calibration {bytes} B: late receives (us) {}",
                us(&late_recvs)
            );
        }
    }
    Ok(if lower {
        [sender, one_way, 0.0, median(&late_sends)]
    } else {
        [0.0, 0.0, late_recvs.iter().copied().fold(f64::INFINITY, f64::min), 0.0]
    })
}

/// Sizes below this are measured twice, the second pass after the first has run through all
/// sizes (about 70 ms later, after the 4-16 MiB transfers), and each reading keeps the lesser of
/// its two passes. A reading can only be slowed by the machine, and the moments that slow it
/// last longer than one size: in 2 of 30 two-rank jobs on the VM (2026-11-29) every size from
/// 1 KiB to 2 MiB read 20-95% slower than in the other jobs, while the jobs' calls ran as fast
/// as elsewhere, so 4 KiB .. 256 KiB were predicted 26-95% slow. One rule for lone bumps
/// (`estimate::send_curve`) cannot see a run of them. The second pass costs about 13 ms; the
/// sizes from 4 MiB on, which take most of the set-up's time, are measured once. Where the
/// library fit rescales the curve (three ranks or more, all on one host) the curve's level
/// cancels out and the pass changes little; it is taken anyway, so that the readings kept for
/// a pair (`super::setup_cache`) are the same whichever communicator measured them.
pub const SECOND_PASS_BELOW: u64 = 4 << 20;

/// Keeps in `out` the lesser of each of its readings and `again`'s (a zero is the other rank's
/// reading, zero in both passes). The late sender's too: a send that waits for its receiver
/// (rendezvous) reads the receiver's delay in both passes, so only a disturbed eager send can
/// read a wait in one pass alone.
fn keep_lesser(out: &mut [f64], again: &[f64]) {
    for (o, &a) in out.iter_mut().zip(again) {
        *o = o.min(a);
    }
}

/// The smallest size whose passes [`passes_apart`] compares: below it a one-way time is a few
/// tenths of a microsecond, where timer noise alone sets ratios.
pub const PASSES_APART_FROM: u64 = 1 << 10;

/// How far apart the two passes read the one-way time (`first[i]`, `second[i]` per curve
/// size; NaN where a size had no second pass): the median over the sizes from
/// [`PASSES_APART_FROM`] of the slower over the faster. The median, so one disturbed size does
/// not count (the lone-bump rule handles that one); a moment that slowed the set-up spans many.
/// The profile reports it, since the predictions rest on the lesser of each pair: far apart,
/// the host's state changed while the set-up timed it (in 2 of 30 two-rank jobs every size from
/// 1 KiB to 2 MiB read 20-95% slower in one pass). `None` without a usable pair.
pub fn passes_apart(first: &[f64], second: &[f64]) -> Option<f64> {
    let ratios: Vec<f64> = CURVE_SIZES
        .iter()
        .zip(first.iter().zip(second))
        .filter(|(&b, (f, s))| b >= PASSES_APART_FROM && **f > 0.0 && **s > 0.0)
        .map(|(_, (&f, &s))| f.max(s) / f.min(s))
        .filter(|r| r.is_finite())
        .collect();
    (!ratios.is_empty()).then(|| median(&ratios))
}

/// Seconds as microseconds with `decimals` decimals, separated by spaces: the logs' lists of
/// readings.
fn us_list(v: &[f64], decimals: usize) -> String {
    v.iter()
        .map(|t| format!("{:.*}", decimals, t * 1e6))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Logs (debug) the sizes where the second pass read any of this rank's readings more than 10%
/// lower than the first.
fn log_passes(lower: bool, first: &[f64], kept: &[f64]) {
    if !log::log_enabled!(log::Level::Debug) {
        return;
    }
    let us = |r: &[f64]| us_list(r, 2);
    let moved: Vec<String> = CURVE_SIZES
        .iter()
        .zip(first.chunks_exact(PER_SIZE).zip(kept.chunks_exact(PER_SIZE)))
        .filter(|(_, (f, k))| f.iter().zip(k.iter()).any(|(a, b)| *b < 0.9 * *a))
        .map(|(b, (f, k))| format!("{b} B: {} -> {}", us(f), us(k)))
        .collect();
    if !moved.is_empty() {
        let what = if lower {
            "sender, one way, 0, late sender"
        } else {
            "0, 0, late receive, 0"
        };
        log::debug!(
            "treecast: calibration's second pass read lower ({what}; us): {}",
            moved.join("; ")
        );
    }
}

/// `(sender, one-way)` from one-way transfers with an acknowledgement (`sends[i]` and
/// `trips[i]` of one transfer): the fastest transfer's, less the acknowledgement's own
/// `ack_s` (never below half the trip, should a slow acknowledgement reading exceed it).
/// The fastest, because the first transfers of a size are slow and the rest hold (see
/// `STREAM_WARMUP`).
fn settled_one_way(sends: &[f64], trips: &[f64], ack_s: f64) -> (f64, f64) {
    let Some(fastest) = (0..trips.len()).min_by(|&i, &j| trips[i].total_cmp(&trips[j])) else {
        return (0.0, 0.0);
    };
    let trip = trips[fastest];
    (sends[fastest], (trip - ack_s).max(0.5 * trip))
}

/// The curve from the broadcast readings (`PER_SIZE` numbers per size of [`CURVE_SIZES`]): a
/// send that, with its receiver [`LATE_US`] late, kept its sender more than half that long
/// waited for the receiver.
pub fn curve_from_readings(readings: &[f64]) -> Option<SendCurve> {
    let points = CURVE_SIZES
        .iter()
        .zip(readings.chunks_exact(PER_SIZE))
        .map(|(&bytes, r)| SendCost {
            bytes,
            sender_s: r[0],
            one_way_s: r[1],
            late_recv_s: r[2],
            waits_for_receiver: r[3] > 0.5 * LATE_US * 1e-6,
        })
        .collect();
    SendCurve::new(points)
}

/// Collective over `comm`: the calibration, the same on every rank (`None` when no two ranks
/// share a host, or when the readings are unusable).
///
/// # Safety
/// `comm` must be our valid duplicate communicator; every rank calls this collectively.
pub unsafe fn measure(comm: MPI_Comm, rank: u32, hosts: &Hosts, shared: &Shared) -> Result<Option<Calibration>> {
    let Some((a, b)) = host_mates(hosts) else {
        return Ok(None);
    };
    let n = CURVE_SIZES.len() * PER_SIZE;
    let key = shared.host_mates(a, b);
    let kept = shared.lookup(comm, &[key], n + EXTRA)?.pop().flatten();
    let reused = kept.is_some();
    let out = match kept {
        Some(out) => out,
        None => {
            let out = readings(comm, rank, (a, b))?;
            setup_cache::keep(key, &out);
            out
        }
    };
    let Some(mut c) = calibration(rank, (a, b), &out, reused)? else {
        return Ok(None);
    };
    if let (true, Some(curve)) = (super::library_fit::applies(hosts), &c.send_curve) {
        let nranks = hosts.host_of.len() as u32;
        if let Some((scale, timing)) = super::library_fit::measure(comm, rank, nranks, (curve, c.overhead_s), shared)? {
            c.pair_curve = Some(curve.clone());
            c.send_curve = Some(scale.apply(curve));
            c.library_timing = timing;
        }
    }
    Ok(Some(c))
}

/// Numbers after the sizes' readings: the burst, then how far apart the two passes read
/// ([`passes_apart`]).
const EXTRA: usize = 2;

/// Collective: the pair `(a, b)` measures, the others wait; every rank returns the readings:
/// `PER_SIZE` numbers per curve size, then the burst and the passes' distance (zeros mean no
/// reading).
///
/// # Safety
/// As [`measure`].
unsafe fn readings(comm: MPI_Comm, rank: u32, (a, b): (u32, u32)) -> Result<Vec<f64>> {
    // The higher rank's late receives are sent to the lower one, which broadcasts everything.
    let n = CURVE_SIZES.len() * PER_SIZE;
    let mut out = vec![0.0f64; n + EXTRA];
    if rank == a || rank == b {
        let lower = rank == a;
        let peer = if lower { b } else { a } as c_int;
        // Written data in both (an untouched zeroed buffer is the kernel's shared zero page,
        // which reads faster than any real data).
        let largest = *CURVE_SIZES.last().expect("sizes") as usize;
        let data: Vec<u8> = (0..largest).map(|i| (i as u8).wrapping_mul(31) | 1).collect();
        let mut buf = data.clone();
        for (i, &bytes) in CURVE_SIZES.iter().enumerate() {
            // The smallest size is measured first, by round trips.
            let ack_s = out[1];
            let r = measure_size(comm, lower, peer, (&data, &mut buf), bytes, ack_s)?;
            out[i * PER_SIZE..(i + 1) * PER_SIZE].copy_from_slice(&r);
        }
        let first = out.clone();
        let mut second = vec![f64::NAN; CURVE_SIZES.len()];
        for (i, &bytes) in CURVE_SIZES
            .iter()
            .enumerate()
            .take_while(|(_, &b)| b < SECOND_PASS_BELOW)
        {
            let ack_s = out[1];
            let r = measure_size(comm, lower, peer, (&data, &mut buf), bytes, ack_s)?;
            keep_lesser(&mut out[i * PER_SIZE..(i + 1) * PER_SIZE], &r);
            second[i] = r[1];
        }
        log_passes(lower, &first, &out);
        if lower {
            let firsts: Vec<f64> = (0..CURVE_SIZES.len()).map(|i| first[i * PER_SIZE + 1]).collect();
            out[n + 1] = passes_apart(&firsts, &second).unwrap_or(0.0);
        }
        let late: Vec<f64> = (0..CURVE_SIZES.len()).map(|i| out[i * PER_SIZE + 2]).collect();
        if lower {
            let t0 = raw::wtime();
            let mut reqs = Vec::with_capacity(BURST as usize);
            for _ in 0..BURST {
                reqs.push(raw::isend_bytes(data.as_ptr(), 8, peer, TAG, comm)?);
            }
            out[n] = raw::wtime() - t0;
            raw::wait_all(&mut reqs)?;
            let mut theirs = vec![0.0f64; late.len()];
            raw::recv(&mut theirs, peer, TAG, comm)?;
            for (i, t) in theirs.into_iter().enumerate() {
                out[i * PER_SIZE + 2] = t;
            }
        } else {
            for _ in 0..BURST {
                recv(comm, peer, &mut buf, 8)?;
            }
            raw::send(&late, peer, TAG, comm)?;
        }
    }
    raw::bcast(&mut out, a as c_int, comm)?;
    Ok(out)
}

/// The calibration from the pair `(a, b)`'s readings (`reused`: kept from an earlier
/// communicator, which the log says).
fn calibration(rank: u32, (a, b): (u32, u32), out: &[f64], reused: bool) -> Result<Option<Calibration>> {
    let n = CURVE_SIZES.len() * PER_SIZE;
    let curve = curve_from_readings(&out[..n]);
    let line_to = CURVE_SIZES
        .iter()
        .position(|&b| b == PATH_LINE_TO)
        .expect("a curve size");
    let (small, large) = (out[1], out[line_to * PER_SIZE + 1]);
    let path = fit_path_cost((CURVE_SIZES[0], small), (PATH_LINE_TO, large));
    let overhead_s = overhead_from_burst(BURST, out[n]).unwrap_or(0.0);
    if rank == 0 {
        let us = |t: f64| format!("{:.2}", t * 1e6);
        let points: Vec<String> = curve
            .iter()
            .flat_map(|c| c.points())
            .map(|p| {
                format!(
                    "{} B: send {} one way {} late receive {}{}",
                    p.bytes,
                    us(p.sender_s),
                    us(p.one_way_s),
                    us(p.late_recv_s),
                    if p.waits_for_receiver {
                        " (waits for the receiver)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        log::info!(
            "treecast: calibration between ranks {a} and {b} of one host{} (us): {}; {} per send issued",
            if reused {
                ", kept from an earlier communicator"
            } else {
                ""
            },
            points.join("; "),
            us(overhead_s)
        );
    }
    Ok(path.map(|p| Calibration {
        host_path: Some(split_overhead(p, overhead_s)),
        overhead_s,
        send_curve: curve,
        pair_curve: None,
        library_timing: Vec::new(),
        curve_passes_apart: (out[n + 1] > 0.0).then_some(out[n + 1]),
    }))
}

/// The first `bytes` of `buf` to `peer` (`buf` is the largest message's buffer).
fn send(comm: MPI_Comm, peer: c_int, buf: &[u8], bytes: u64) -> Result<()> {
    raw::send(&buf[..bytes as usize], peer, TAG, comm)
}

/// A message of `bytes` from `peer` into the start of `buf`.
fn recv(comm: MPI_Comm, peer: c_int, buf: &mut [u8], bytes: u64) -> Result<()> {
    raw::recv(&mut buf[..bytes as usize], peer, TAG, comm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reading_keeps_the_lesser_of_its_two_passes() {
        // The lower rank's slots (sender, one way, -, late sender), a size of the first pass
        // disturbed in its one-way time and sender, the other slots zero in both passes.
        let mut out = [3.1e-6, 4.8e-6, 0.0, 53.0e-6];
        keep_lesser(&mut out, &[2.4e-6, 3.9e-6, 0.0, 53.2e-6]);
        assert_eq!(out, [2.4e-6, 3.9e-6, 0.0, 53.0e-6]);
        // Only sizes below 4 MiB get a second pass; they are a prefix of the curve's sizes.
        let again = CURVE_SIZES.iter().take_while(|&&b| b < SECOND_PASS_BELOW).count();
        assert_eq!(again, 19);
        assert!(CURVE_SIZES[again..].iter().all(|&b| b >= SECOND_PASS_BELOW));
    }

    #[test]
    fn passes_apart_is_the_median_ratio_from_1_kib() {
        let n = CURVE_SIZES.len();
        let first: Vec<f64> = CURVE_SIZES.iter().map(|&b| 1e-6 + b as f64 * 1e-10).collect();
        // A second pass reading every size 1.5x faster, but for one size 3x slower and the
        // sizes below 1 KiB 10x faster (timer noise there is not counted); none from 4 MiB.
        let second: Vec<f64> = CURVE_SIZES
            .iter()
            .zip(&first)
            .map(|(&b, &f)| match b {
                b if b >= SECOND_PASS_BELOW => f64::NAN,
                b if b < PASSES_APART_FROM => f / 10.0,
                b if b == 64 << 10 => f * 3.0,
                _ => f / 1.5,
            })
            .collect();
        let apart = passes_apart(&first, &second).unwrap();
        assert!((apart - 1.5).abs() < 1e-9, "{apart}");
        assert_eq!(passes_apart(&first, &first), Some(1.0));
        assert_eq!(passes_apart(&first, &vec![f64::NAN; n]), None);
        assert_eq!(passes_apart(&vec![0.0; n], &first), None);
    }

    #[test]
    fn host_mates_are_the_first_pair_sharing_a_host() {
        let hosts = |host_of: Vec<u32>| Hosts {
            host_of,
            names: vec![],
            leaders: vec![],
        };
        assert_eq!(host_mates(&hosts(vec![0, 0, 0, 0])), Some((0, 1)));
        assert_eq!(host_mates(&hosts(vec![0, 1, 2, 1, 0])), Some((0, 4)));
        assert_eq!(host_mates(&hosts(vec![0, 1, 2, 2])), Some((2, 3)));
        assert_eq!(host_mates(&hosts(vec![0, 1, 2])), None);
        assert_eq!(host_mates(&hosts(vec![])), None);
    }

    #[test]
    fn one_way_transfers_keep_the_settled_fastest_less_the_acknowledgement() {
        // Slow first transfers, then settled, with one preempted transfer among them.
        let trips = [98.8, 89.2, 83.3, 71.0, 70.4, 69.9, 1885.8, 70.5].map(|t| t * 1e-6);
        let sends = [98.0, 88.0, 82.0, 70.2, 69.5, 69.1, 1885.0, 69.8].map(|t| t * 1e-6);
        let (sender, one_way) = settled_one_way(&sends, &trips, 0.4e-6);
        assert_eq!(sender, sends[5]);
        assert!((one_way - 69.5e-6).abs() < 1e-12, "{one_way}");
        // An acknowledgement reading larger than half the trip does not make it negative.
        assert_eq!(settled_one_way(&[1e-6], &[2e-6], 5e-6), (1e-6, 1e-6));
        assert_eq!(settled_one_way(&[], &[], 1e-6), (0.0, 0.0));
    }

    #[test]
    fn readings_become_a_curve_and_slow_late_sends_mark_waiting_sizes() {
        // Sizes up to 4 KiB leave at once; larger sends took the receiver's 50 us lateness.
        let readings: Vec<f64> = CURVE_SIZES
            .iter()
            .flat_map(|&b| {
                let us = 1.0 + b as f64 / 1e4;
                let late_send = if b > 4096 { 52.0 } else { 0.1 };
                [us * 0.5, us, us * 0.8, late_send].map(|t| t * 1e-6)
            })
            .collect();
        let c = curve_from_readings(&readings).unwrap();
        assert_eq!(c.points().len(), CURVE_SIZES.len());
        for p in c.points() {
            assert_eq!(p.waits_for_receiver, p.bytes > 4096, "{p:?}");
            assert!((p.one_way_s - (1.0 + p.bytes as f64 / 1e4) * 1e-6).abs() < 1e-15);
        }
        // Too few readings for a curve.
        assert!(curve_from_readings(&readings[..PER_SIZE]).is_none());
    }
}
