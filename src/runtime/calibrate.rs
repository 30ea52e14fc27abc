//! Set-up calibration (collective): what a message between two ranks of one host costs in this
//! job, for the predictions profiles make (`crate::estimate::calibrate` turns the readings
//! into model parameters).
//!
//! The first two ranks sharing a host (lowest rank first) measure, while every other rank
//! waits in the broadcast of the result (so the machine is as busy as during a broadcast):
//! round trips of [`SMALL_BYTES`] and [`LARGE_BYTES`] (the median of [`REPS`] each after a
//! warm-up) and a burst of [`BURST`] small non-blocking sends (the per-message overhead at the
//! sender). The lower of the pair broadcasts the three numbers, so every rank holds the same
//! calibration. A few milliseconds, only when profiling is configured (on rank 0, which
//! decides for all); `TREECAST_CALIBRATE=0` skips it. Planning never reads it.

use super::hosts::Hosts;
use crate::error::Result;
use crate::estimate::calibrate::{fit_path_cost, overhead_from_burst, split_overhead, Calibration};
use crate::exec::raw;
use mpi::ffi::MPI_Comm;
use std::os::raw::c_int;

/// Ping-pong sizes: a latency-bound and a bandwidth-bound message.
pub const SMALL_BYTES: u64 = 8;
pub const LARGE_BYTES: u64 = 1 << 20;
/// Timed round trips per size (after [`WARMUP`]); the median is kept.
pub const REPS: usize = 9;
const WARMUP: usize = 2;
/// Small sends of the overhead burst.
pub const BURST: u32 = 16;
const TAG: c_int = 0x7c_a1;

/// The first two ranks of `hosts` sharing a host, lowest first.
pub fn host_mates(hosts: &Hosts) -> Option<(u32, u32)> {
    let h = &hosts.host_of;
    (0..h.len()).find_map(|a| ((a + 1)..h.len()).find(|&b| h[b] == h[a]).map(|b| (a as u32, b as u32)))
}

/// Collective over `comm`: the calibration, the same on every rank (`None` when no two ranks
/// share a host, or when the readings are unusable).
///
/// # Safety
/// `comm` must be our valid duplicate communicator; every rank calls this collectively.
pub unsafe fn measure(comm: MPI_Comm, rank: u32, hosts: &Hosts) -> Result<Option<Calibration>> {
    let Some((a, b)) = host_mates(hosts) else {
        return Ok(None);
    };
    // [small one-way s, large one-way s, overhead s]; zeros mean no reading.
    let mut out = [0.0f64; 3];
    if rank == a || rank == b {
        let peer = if rank == a { b } else { a } as c_int;
        let mut buf = vec![0u8; LARGE_BYTES as usize];
        let mut one_way = [0.0; 2];
        for (i, bytes) in [SMALL_BYTES, LARGE_BYTES].into_iter().enumerate() {
            let mut rtts = Vec::with_capacity(REPS);
            for rep in 0..WARMUP + REPS {
                let t0 = raw::wtime();
                if rank == a {
                    send(comm, peer, &buf, bytes)?;
                    recv(comm, peer, &mut buf, bytes)?;
                } else {
                    recv(comm, peer, &mut buf, bytes)?;
                    send(comm, peer, &buf, bytes)?;
                }
                if rep >= WARMUP {
                    rtts.push(raw::wtime() - t0);
                }
            }
            one_way[i] = crate::estimate::calibrate::median(&rtts) / 2.0;
        }
        let burst = if rank == a {
            let t0 = raw::wtime();
            let mut reqs = Vec::with_capacity(BURST as usize);
            for _ in 0..BURST {
                reqs.push(raw::isend_bytes(buf.as_ptr(), SMALL_BYTES, peer, TAG, comm)?);
            }
            let issued = raw::wtime() - t0;
            raw::wait_all(&mut reqs)?;
            issued
        } else {
            for _ in 0..BURST {
                recv(comm, peer, &mut buf, SMALL_BYTES)?;
            }
            0.0
        };
        out = [one_way[0], one_way[1], burst];
    }
    raw::bcast(&mut out, a as c_int, comm)?;
    let [small, large, burst] = out;
    let path = fit_path_cost((SMALL_BYTES, small), (LARGE_BYTES, large));
    let overhead_s = overhead_from_burst(BURST, burst).unwrap_or(0.0);
    if rank == 0 {
        log::info!(
            "treecast: calibration between ranks {a} and {b} of one host: {SMALL_BYTES} B one way {:.2} us, \
             {LARGE_BYTES} B {:.1} us, {:.2} us per send issued",
            small * 1e6,
            large * 1e6,
            overhead_s * 1e6
        );
    }
    Ok(path.map(|p| Calibration {
        host_path: Some(split_overhead(p, overhead_s)),
        overhead_s,
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
}
