//! Scatter + allgather broadcasts (Van de Geijn), as Open MPI 4.1 runs them
//! (`ompi_coll_base_bcast_intra_scatter_allgather{,_ring}` in `coll_base_bcast.c`).
//!
//! The message is cut into `n` blocks (plan segments; relative rank v owns block v). A binomial
//! scatter gives relative rank v the blocks `[v, v + lowbit(v))` (the root keeps all), then an
//! allgather — ring (`n - 1` steps, pass to the right) or recursive doubling (exchange with
//! `v XOR mask`, with Open MPI's recursive-halving fix-up for non-powers of two) — completes
//! everyone.
//!
//! Two deliberate differences, both forced by the `Plan` type and both small:
//! * Open MPI's blocks hold `ceil(count / n)` elements (the last ones shorter or empty); plan
//!   segments differ by at most one byte. Identical when `n` divides the size.
//! * Open MPI's allgather also re-sends blocks the receiver already holds from the scatter (an
//!   intermediate scatter rank keeps its whole subtree's blocks in its buffer). A plan may not
//!   receive a segment twice, so those transfers are left out. Each one runs opposite to a
//!   useful transfer of the same size in the same `sendrecv`, so on full-duplex links dropping
//!   it does not change when the step ends; on half-duplex links the baseline is optimistic.

use crate::plan::{Op, Plan, SegRange};

/// Builds a plan from transfers issued in algorithm order, dropping blocks the receiver has.
struct Builder {
    n: u32,
    root: u32,
    have: Vec<Vec<bool>>,
    ops: Vec<Vec<Op>>,
}

impl Builder {
    fn new(n: u32, root: u32) -> Builder {
        let mut have = vec![vec![false; n as usize]; n as usize];
        have[root as usize].fill(true);
        Builder {
            n,
            root,
            have,
            ops: vec![Vec::new(); n as usize],
        }
    }

    fn abs(&self, v: u32) -> u32 {
        (v + self.root) % self.n
    }

    /// Runs of blocks in `[start, end)` that `to` lacks (and `from` holds, as the algorithm
    /// guarantees), for relative ranks.
    fn runs(&self, from: u32, to: u32, start: u32, end: u32) -> Vec<SegRange> {
        let (f, t) = (self.abs(from) as usize, self.abs(to) as usize);
        let mut out: Vec<SegRange> = Vec::new();
        for b in start..end.min(self.n) {
            if !self.have[t][b as usize] {
                debug_assert!(self.have[f][b as usize], "rank {from} sends block {b} it does not hold");
                match out.last_mut() {
                    Some(r) if r.end == b => r.end = b + 1,
                    _ => out.push(SegRange::one(b)),
                }
            }
        }
        out
    }

    /// Emit the transfers of one step at once: every `(from, to, runs)` is computed against
    /// the holdings before the step (a `sendrecv` exchanges what each side had).
    fn step(&mut self, transfers: &[(u32, u32, u32, u32)]) {
        let planned: Vec<(u32, u32, Vec<SegRange>)> = transfers
            .iter()
            .map(|&(f, t, a, b)| (f, t, self.runs(f, t, a, b)))
            .collect();
        for (f, t, runs) in planned {
            let (fa, ta) = (self.abs(f), self.abs(t));
            for r in runs {
                self.ops[fa as usize].push(Op::Send { peer: ta, segs: r });
                self.ops[ta as usize].push(Op::Recv { peer: fa, segs: r });
                for b in r.range() {
                    self.have[ta as usize][b as usize] = true;
                }
            }
        }
    }

    /// Binomial scatter: relative rank v receives `[v, v + lowbit(v))` from `v - lowbit(v)`;
    /// parents send to their children largest subtree first, as Open MPI does.
    fn scatter(&mut self) {
        let n = self.n;
        let mut top = 1u32;
        while top < n {
            top <<= 1;
        }
        let mut mask = top >> 1;
        while mask > 0 {
            // All transfers at this mask go from ranks that already hold their range.
            let t: Vec<(u32, u32, u32, u32)> = (0..n)
                .filter(|&v| v % (2 * mask) == 0 && v + mask < n)
                .map(|v| (v, v + mask, v + mask, (v + 2 * mask).min(n)))
                .collect();
            self.step(&t);
            mask >>= 1;
        }
    }

    fn finish(self, algorithm: &str) -> Plan {
        let mut p = Plan::empty(self.n, self.root, algorithm);
        p.nsegs = self.n;
        p.ops = self.ops;
        p
    }
}

/// Scatter + ring allgather (`ompi_coll_base_bcast_intra_scatter_allgather_ring`). Needs
/// `bytes >= n` (Open MPI switches to the linear broadcast below that).
pub fn scatter_allgather_ring(n: u32, root: u32) -> Plan {
    let mut b = Builder::new(n, root);
    b.scatter();
    // Step i: relative rank v passes block (v - i + 1) mod n to v + 1.
    for i in 1..n {
        let t: Vec<(u32, u32, u32, u32)> = (0..n)
            .map(|v| {
                let blk = (v + n - (i - 1)) % n;
                (v, (v + 1) % n, blk, blk + 1)
            })
            .collect();
        b.step(&t);
    }
    b.finish("scatter-ring")
}

/// Scatter + recursive-doubling allgather (`ompi_coll_base_bcast_intra_scatter_allgather`),
/// including its fix-up for non-power-of-two sizes: when the partner subtree is incomplete, the
/// ranks that received it forward their last received blocks down a recursive-halving tree.
/// Needs `bytes >= n`.
pub fn scatter_allgather_rd(n: u32, root: u32) -> Plan {
    let mut b = Builder::new(n, root);
    b.scatter();
    let rd = |v: u32, m: u32| v / m * m;
    // Open MPI's per-rank counters, in blocks: how many blocks v holds contiguously from its
    // tree root, and how many it received last.
    let mut curr = vec![1u32; n as usize];
    let mut recv_count = vec![0u32; n as usize];
    let mut mask = 1u32;
    while mask < n {
        // Exchange with v XOR mask.
        let mut t = Vec::new();
        for v in 0..n {
            let u = v ^ mask;
            if u < n {
                t.push((v, u, rd(v, mask), rd(v, mask) + curr[v as usize]));
            }
        }
        b.step(&t);
        let before = curr.clone();
        for v in 0..n {
            let u = v ^ mask;
            if u < n {
                recv_count[v as usize] = before[u as usize];
                curr[v as usize] += before[u as usize];
            }
        }
        // Fix-up: ranks whose partner subtree is cut off by n get its data by recursive halving.
        let mut rh = mask >> 1;
        while rh > 0 {
            let mut t = Vec::new();
            let mut sent = Vec::new();
            for v in 0..n {
                let vroot = rd(v, mask);
                if rd(v ^ mask, mask) + mask <= n {
                    continue;
                }
                // Signed, as in Open MPI: negative when v's own half is cut off too.
                let alldata = n as i64 - vroot as i64 - mask as i64;
                let offset = vroot + mask;
                let u = v ^ rh;
                let limit = rd(v, rh << 1) as i64 + alldata;
                if u > v && (v as i64) < limit && u as i64 >= limit && u < n {
                    let c = recv_count[v as usize];
                    t.push((v, u, offset, offset + c));
                    sent.push((u, c));
                }
            }
            b.step(&t);
            for (u, c) in sent {
                recv_count[u as usize] = c;
                curr[u as usize] += c;
            }
            rh >>= 1;
        }
        mask <<= 1;
    }
    b.finish("scatter-rd")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_validate_for_many_sizes_and_roots() {
        for n in 1..=40u32 {
            for root in [0, n / 3, n - 1] {
                scatter_allgather_ring(n, root)
                    .validate()
                    .unwrap_or_else(|e| panic!("ring n={n}: {e}"));
                scatter_allgather_rd(n, root)
                    .validate()
                    .unwrap_or_else(|e| panic!("rd n={n}: {e}"));
            }
        }
    }

    #[test]
    fn power_of_two_scatter_then_doubling_volumes() {
        // n = 8: scatter moves 4 + 2*2 + 4*1 = 12 blocks (root -> 4 gets 4, ...). Recursive
        // doubling without the redundant halves: every rank ends with 8 blocks.
        let p = scatter_allgather_rd(8, 0);
        let recv_blocks: u32 = p
            .ops
            .iter()
            .flatten()
            .filter(|o| !o.is_send())
            .map(|o| o.segs().len())
            .sum();
        // Each of the 7 non-roots receives each of its 8 blocks exactly once.
        assert_eq!(recv_blocks, 7 * 8);
        // Root 0 never receives and sends its scatter first: 4..8 to rank 4.
        assert_eq!(
            p.ops[0][0],
            Op::Send {
                peer: 4,
                segs: SegRange::new(4, 8)
            }
        );
    }
}
