//! All-to-all message patterns ([Yazaki2010]) and a runner for dependency-free message programs.
//!
//! In an all-to-all every rank sends one message of `bytes` to every other rank; the algorithm
//! only fixes the order in which each rank sends:
//! * **simple spread**: step p = 1..N-1, rank s sends to `(s + p) mod N`;
//! * **pairwise**: step p = 1..N-1, rank s sends to `s XOR p` (N must be a power of two, as in
//!   MFS; otherwise some partners would not exist).
//!
//! Receives are always posted, so a message starts when its sender issues it. MFS runs these
//! with blocking sends (one active message per rank); that is [`super::SimOptions::blocking_sends`].

use super::flow::{Delivery, FlowSim};
use super::{finish, placement, FlatOps, SimError, SimOptions, SimResult, TransferRecord};
use crate::topology::Topology;
use std::fmt;
use std::str::FromStr;

/// Which order ranks send in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlltoallAlgo {
    /// Step p: `dst = (src + p) mod N`.
    SimpleSpread,
    /// Step p: `dst = src XOR p`.
    Pairwise,
}

/// A name that is not an all-to-all algorithm (the name as given). Typed so a pattern parse can
/// wrap it; the text lists the valid names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownAlltoallAlgo(pub String);

impl fmt::Display for UnknownAlltoallAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown all-to-all algorithm '{}' (expected pairwise or simple-spread)",
            self.0
        )
    }
}

impl std::error::Error for UnknownAlltoallAlgo {}

impl FromStr for AlltoallAlgo {
    type Err = UnknownAlltoallAlgo;
    fn from_str(s: &str) -> Result<Self, UnknownAlltoallAlgo> {
        match s {
            "simple-spread" | "spread" | "simple_spread" => Ok(AlltoallAlgo::SimpleSpread),
            "pairwise" => Ok(AlltoallAlgo::Pairwise),
            _ => Err(UnknownAlltoallAlgo(s.into())),
        }
    }
}

impl fmt::Display for AlltoallAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AlltoallAlgo::SimpleSpread => "simple-spread",
            AlltoallAlgo::Pairwise => "pairwise",
        })
    }
}

/// Destinations of every rank in send order. Pairwise needs a power-of-two `n` (the XOR
/// partner of every step must exist); other sizes are an error.
pub fn schedule(algo: AlltoallAlgo, n: u32) -> Result<Vec<Vec<u32>>, SimError> {
    match algo {
        AlltoallAlgo::SimpleSpread => Ok((0..n).map(|s| (1..n).map(|p| (s + p) % n).collect()).collect()),
        AlltoallAlgo::Pairwise => {
            if !n.is_power_of_two() {
                return Err(SimError::PairwiseNeedsPowerOfTwo { nranks: n });
            }
            Ok((0..n).map(|s| (1..n).map(|p| s ^ p).collect()).collect())
        }
    }
}

/// Simulate an all-to-all of `bytes` per message among the first `nranks` ranks.
pub fn simulate_alltoall(
    topo: &Topology,
    algo: AlltoallAlgo,
    nranks: u32,
    bytes: u64,
    opts: &SimOptions,
) -> Result<SimResult, SimError> {
    let dests = schedule(algo, nranks)?;
    let sends: Vec<Vec<(u32, u64)>> = dests
        .into_iter()
        .map(|d| d.into_iter().map(|p| (p, bytes)).collect())
        .collect();
    simulate_messages(topo, &sends, opts)
}

/// Run a dependency-free message program: rank r sends `sends[r]` = [(dst, bytes)] in order.
/// Non-blocking: all sends start at time 0 (FIFO per peer); blocking: one at a time, the next
/// when the previous has been delivered. The time is when the last message arrives.
pub fn simulate_messages(topo: &Topology, sends: &[Vec<(u32, u64)>], opts: &SimOptions) -> Result<SimResult, SimError> {
    let n = sends.len();
    let verts = placement::resolve(topo, n as u32, opts.placement.as_deref())?;
    if let Some((r, &(d, _))) = sends.iter().enumerate().find_map(|(r, s)| {
        s.iter()
            .find(|&&(d, _)| d as usize >= n || d as usize == r)
            .map(|x| (r, x))
    }) {
        return Err(SimError::InvalidSendPeer { rank: r, peer: d });
    }
    let flat = FlatOps::new(sends, |&(d, _)| Some(d));
    let mut sim = FlowSim::new(topo);
    sim.set_audit(opts.audit);
    sim.set_full_resolve(opts.full_resolve);
    let mut next = vec![0usize; n];
    let issue = |r: usize, sim: &mut FlowSim, next: &mut [usize]| {
        let (dst, b) = sends[r][next[r]];
        let f = flat.base[r] + next[r];
        sim.send(verts[r], verts[dst as usize], b as f64, f as u64, Some(flat.channel[f]));
        next[r] += 1;
    };
    for r in 0..n {
        if opts.blocking_sends {
            if !sends[r].is_empty() {
                issue(r, &mut sim, &mut next);
            }
        } else {
            while next[r] < sends[r].len() {
                issue(r, &mut sim, &mut next);
            }
        }
    }
    let mut done = vec![0.0f64; n];
    let mut transfers = Vec::new();
    let mut out: Vec<Delivery> = Vec::new();
    while sim.advance(&mut out).is_some() {
        for d in out.drain(..) {
            let f = d.tag as usize;
            let src = flat.owner[f] as usize;
            let (dst, b) = sends[src][f - flat.base[src]];
            done[dst as usize] = done[dst as usize].max(d.time);
            if opts.record {
                transfers.push(TransferRecord {
                    src: src as u32,
                    dst,
                    segs: None,
                    bytes: b,
                    issued_s: if opts.blocking_sends { d.start } else { 0.0 },
                    start_s: d.start,
                    src_done_s: d.src_done,
                    end_s: d.time,
                });
            }
            if opts.blocking_sends && next[src] < sends[src].len() {
                issue(src, &mut sim, &mut next);
            }
        }
    }
    Ok(finish(sim, done, transfers, opts.record))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_cover_every_pair_once() {
        for algo in [AlltoallAlgo::SimpleSpread, AlltoallAlgo::Pairwise] {
            let n = 8;
            let s = schedule(algo, n).unwrap();
            let mut seen = vec![vec![0; n as usize]; n as usize];
            for (src, ds) in s.iter().enumerate() {
                assert_eq!(ds.len(), n as usize - 1);
                for &d in ds {
                    seen[src][d as usize] += 1;
                }
            }
            for (a, row) in seen.iter().enumerate() {
                for (b, &c) in row.iter().enumerate() {
                    assert_eq!(c, usize::from(a != b), "{algo} {a}->{b}");
                }
            }
            // Every step is a permutation: each rank receives exactly one message per step.
            for p in 0..(n - 1) as usize {
                let mut recv: Vec<u32> = s.iter().map(|d| d[p]).collect();
                recv.sort_unstable();
                assert_eq!(recv, (0..n).collect::<Vec<_>>());
            }
        }
        assert!(schedule(AlltoallAlgo::Pairwise, 6).is_err());
        assert_eq!("pairwise".parse::<AlltoallAlgo>(), Ok(AlltoallAlgo::Pairwise));
        assert!("ring".parse::<AlltoallAlgo>().is_err());
    }
}
