//! Set-up burst probe (collective, with the calibration of predictions): whether the slow
//! links of the job's tree pass a burst faster than their rate, as a token bucket does.
//!
//! The bandwidth map rates every link by 1 MiB transfers, which is what a switch port does to
//! every message. A policed link (`tc tbf` in the emulated cluster, a cloud network's
//! policer) passes its first tokens' worth at the line's speed instead, so predictions that
//! charged every byte the 1 MiB rate were up to 3.6x too slow for 4-16 KiB broadcasts across
//! the emulated 3x3 cluster. Here, for each pair of [`probe_pairs`] (one after another, the
//! other ranks asleep in a barrier meanwhile, then all taking the pair's readings), the pair's
//! sender sends [`SIZES`] one at a time, each after a rest that lets a bucket refill, and times
//! it to a one-byte acknowledgement; [`fit`] turns the times into a bucket, or none. Every
//! rank fits the same broadcast readings, so all hold the same buckets. A pair's readings are
//! kept for the communicators made later (`super::setup_cache`). About 0.19 s per pair
//! on the emulated cluster's 300 Mbit/s uplinks (770-780 ms for its 4 pairs); at most
//! [`MAX_PAIRS`] pairs. Planning never reads the result; only predictions do
//! (`estimate::bucket`).
//!
//! The sender also times its own send's completion, which a transport that buffers (TCP:
//! the kernel takes the bytes) reaches long before the acknowledgement: what it held unsent
//! (`estimate::send_buffer::fit`) is how soon a rank sending over a slow link may leave a
//! call, in predictions.

use super::mpi_prober::wait_yielding;
use super::setup_cache::{self, Key, Shared};
use crate::error::Result;
use crate::estimate::bucket::{fit, probe_pairs, remeasured, LinkBucket, ProbePair, TokenBucket};
use crate::estimate::send_buffer;
use crate::exec::raw;
use crate::topology::Topology;
use mpi::ffi::MPI_Comm;
use std::os::raw::c_int;

/// Transfer sizes: octaves from 4 KiB to 256 KiB and the bandwidth map's 1 MiB, so a depth
/// between them falls between two sizes close enough that the peak and the depth do not trade
/// off (with only 16 and 64 KiB around a 72 KB depth, one run read the peak 111 Gbit/s).
pub const SIZES: [u64; 8] = [4096, 8192, 16384, 32768, 65536, 131072, 262144, 1 << 20];
/// Transfers per size, the fastest kept: three up to 64 KiB (a transfer after a rest can
/// wait for a receiver that slept: one run read 4 KiB slower than 16 KiB), two above. With
/// one there and a CPU hog beside, a preempted 256 KiB or 1 MiB transfer put the sustained
/// rate of 300 Mbit/s uplinks at 233-348 Mbit/s; with two, 280-320 (the probe then takes
/// 0.19 s per pair instead of 0.11 on the emulated cluster).
fn reps(bytes: u64) -> usize {
    if bytes <= 65536 {
        3
    } else {
        2
    }
}
/// Pairs measured at most (slowest links first): bounds the set-up time on large trees.
pub const MAX_PAIRS: usize = 8;
/// Bounds of the rest before each transfer, which is long enough for the slowest link to
/// refill what the transfer before took (a bucket deeper than a slow link refills in
/// `REST_MAX_S` reads shallower than it is).
const REST_MIN_S: f64 = 1e-3;
const REST_MAX_S: f64 = 40e-3;
const TAG: c_int = 0x7c_a2;

/// What the burst probe found on a tree's slow links.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Findings {
    /// The token buckets (empty when there is no slow link, or none shows a burst).
    pub buckets: Vec<LinkBucket>,
    /// Bytes a sender's transport held unsent between hosts, the median over the pairs
    /// (`estimate::send_buffer::fit`); `None` without a pair.
    pub send_buffer_bytes: Option<f64>,
}

/// Collective over `comm`: what [`Findings`] `topo`'s slow links show.
///
/// # Safety
/// `comm` must be our valid duplicate communicator whose ranks `topo` describes; every rank
/// calls this collectively with the same `topo`.
pub unsafe fn measure(comm: MPI_Comm, rank: u32, topo: &Topology, shared: &Shared) -> Result<Findings> {
    let t0 = raw::wtime();
    let pairs = probe_pairs(topo, MAX_PAIRS);
    let keys: Vec<Key> = pairs.iter().map(|p| shared.burst(p.from, p.to)).collect();
    let kept = shared.lookup(comm, &keys, 2 * SIZES.len())?;
    let n_kept = kept.iter().filter(|k| k.is_some()).count();
    let probes = pairs
        .iter()
        .zip(&kept)
        .any(|(p, k)| k.is_none() && (p.from == rank || p.to == rank));
    let largest = *SIZES.last().expect("sizes") as usize;
    let mut buf: Vec<u8> = if probes {
        (0..largest).map(|i| (i as u8).wrapping_mul(31) | 1).collect()
    } else {
        Vec::new()
    };
    let mut out: Vec<LinkBucket> = Vec::new();
    let mut held: Vec<f64> = Vec::new();
    let mut n_again = 0usize;
    for ((p, kept), &key) in pairs.iter().zip(kept).zip(&keys) {
        let reused = kept.is_some();
        let times = match kept {
            Some(t) => t,
            None => {
                let first = probe(comm, rank, topo, p, &mut buf)?;
                let (t, again) = remeasured(first, &SIZES, map_rate(topo, p), RECHECKS, || {
                    probe(comm, rank, topo, p, &mut buf)
                })?;
                n_again += again;
                setup_cache::keep(key, &t);
                t
            }
        };
        let (acked, sent) = times.split_at(SIZES.len());
        let readings: Vec<(u64, f64)> = SIZES.iter().copied().zip(acked.iter().copied()).collect();
        let bucket = fit(&readings);
        let buffer = send_buffer::fit(&readings, sent);
        held.extend(buffer);
        if rank == 0 {
            log_pair(p, &readings, sent, bucket, buffer, reused);
        }
        let Some(bucket) = bucket else { continue };
        for d in &p.slow_links {
            // A direction on several pairs' paths: the deepest reading (a path's burst is
            // the shallowest of its buckets in series, so each reading is a lower bound).
            match out.iter_mut().find(|b| b.link == d.link && b.forward == d.forward) {
                Some(b) if b.bucket.depth_bytes >= bucket.depth_bytes => {}
                Some(b) => b.bucket = bucket,
                None => out.push(LinkBucket {
                    link: d.link,
                    forward: d.forward,
                    bucket,
                }),
            }
        }
    }
    let send_buffer_bytes = (!held.is_empty()).then(|| crate::estimate::calibrate::median(&held));
    if rank == 0 {
        log::info!(
            "treecast: burst probe: {} pairs ({} kept from an earlier communicator, {} measured again) \
             in {:.0} ms, {} link directions with a token bucket, senders' transport holding {}",
            pairs.len(),
            n_kept,
            n_again,
            (raw::wtime() - t0) * 1e3,
            out.len(),
            send_buffer_bytes.map_or("(unknown)".into(), |b| format!("{:.0} KB", b / 1e3))
        );
    }
    Ok(Findings {
        buckets: out,
        send_buffer_bytes,
    })
}

/// Times of a pair read below what the bandwidth map rates its path are measured again, at
/// most this many times (each about 0.19 s on the emulated cluster; `remeasured`).
const RECHECKS: usize = 2;

/// The bandwidth map's rate of the slowest of `p`'s slow links.
fn map_rate(topo: &Topology, p: &ProbePair) -> f64 {
    p.slow_links
        .iter()
        .map(|&d| topo.dir_params(d).bandwidth_bps)
        .fold(f64::INFINITY, f64::min)
}

/// Collective: pair `p` times [`SIZES`] while the others wait; every rank returns the
/// fastest time per size to the acknowledgement, then the fastest completion of the sender's
/// own send per size (`buf`: the largest size's written data on the pair's ranks).
///
/// # Safety
/// As [`measure`].
unsafe fn probe(comm: MPI_Comm, rank: u32, topo: &Topology, p: &ProbePair, buf: &mut [u8]) -> Result<Vec<f64>> {
    let slowest = map_rate(topo, p);
    // The bucket holds what it held before the last transfer once that transfer's bytes
    // are refilled (a quarter more for safety); the first rest covers a 1 MiB transfer
    // of the previous pair.
    let rest = |prev: u64| (1.25 * prev as f64 / slowest).clamp(REST_MIN_S, REST_MAX_S);
    let mut times = [0.0f64; 2 * SIZES.len()];
    let (from, to) = (p.from as c_int, p.to as c_int);
    let mut ack = [0u8; 1];
    if rank == p.from {
        // An untimed exchange first: it opens the connection (made lazily by most
        // transports).
        raw::send(&ack, to, TAG, comm)?;
        raw::recv(&mut ack, to, TAG, comm)?;
        let mut prev = *SIZES.last().expect("sizes");
        let (acked, sent) = times.split_at_mut(SIZES.len());
        for ((t, t_sent), &s) in acked.iter_mut().zip(sent.iter_mut()).zip(&SIZES) {
            *t = f64::INFINITY;
            *t_sent = f64::INFINITY;
            for _ in 0..reps(s) {
                std::thread::sleep(std::time::Duration::from_secs_f64(rest(prev)));
                prev = s;
                let t0 = raw::wtime();
                // Waiting yields the core between tests instead of spinning in MPI: with a
                // CPU hog on one core, the pair shares the other, and a spinning sender kept
                // its receiver off it for scheduler slices (the fastest of three 4 KiB transfers
                // read 0.3-2.4 ms, not 26 us, in 11 of 16 pairs over four hog jobs).
                let mut sending = raw::isend_bytes(buf.as_ptr(), s, to, TAG, comm)?;
                wait_yielding(&mut sending)?;
                *t_sent = t_sent.min(raw::wtime() - t0);
                let mut acked = raw::irecv_bytes(ack.as_mut_ptr(), 1, to, TAG, comm)?;
                wait_yielding(&mut acked)?;
                *t = t.min(raw::wtime() - t0);
            }
        }
    } else if rank == p.to {
        raw::recv(&mut ack, from, TAG, comm)?;
        raw::send(&ack, from, TAG, comm)?;
        for &s in &SIZES {
            for _ in 0..reps(s) {
                let mut got = raw::irecv_bytes(buf.as_mut_ptr(), s, from, TAG, comm)?;
                wait_yielding(&mut got)?;
                raw::send(&ack, from, TAG, comm)?;
            }
        }
    }
    // The others wait asleep (a rank spinning in a broadcast took the measuring pair's
    // core: with 9 ranks on 2 cores, one job read the 300 Mbit/s uplinks at 175-786
    // Mbit/s), then all take the readings.
    let mut done = raw::ibarrier(comm)?;
    super::mpi_prober::wait_politely(&mut done)?;
    raw::bcast(&mut times, from, comm)?;
    Ok(times.to_vec())
}

/// The info log line of one pair's readings and fits.
fn log_pair(
    p: &ProbePair,
    readings: &[(u64, f64)],
    sent: &[f64],
    bucket: Option<TokenBucket>,
    buffer: Option<f64>,
    reused: bool,
) {
    let us: Vec<String> = readings
        .iter()
        .zip(sent)
        .map(|((s, t), d)| format!("{s} B {:.1} (sent {:.1})", t * 1e6, d * 1e6))
        .collect();
    log::info!(
        "treecast: burst probe ranks {} -> {}{} (us): {}; {}; the sender's transport held {}",
        p.from,
        p.to,
        if reused {
            ", kept from an earlier communicator"
        } else {
            ""
        },
        us.join(", "),
        match bucket {
            Some(b) => format!(
                "a token bucket of {:.0} KB at {:.0} Mbit/s (at most {:.0}), then {:.0} Mbit/s",
                b.depth_bytes / 1e3,
                b.peak_bps * 8e-6,
                crate::estimate::bucket::MAX_PEAK_BPS * 8e-6,
                b.sustained_bps * 8e-6
            ),
            None => "no burst".into(),
        },
        buffer.map_or("(unreadable)".into(), |b| format!("{:.0} KB", b / 1e3))
    );
}
