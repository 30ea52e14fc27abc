//! Open MPI 4.1's broadcast algorithms (`coll/base`) and the `coll/tuned` fixed decision.
//!
//! The trees (`ompi/mca/coll/base/coll_base_topo.c`, v4.1.x: `build_bmtree`, `build_tree`,
//! `build_kmtree`, `build_chain`) are in [`crate::plan::trees`]. The generic tree broadcast
//! (`coll_base_bcast.c`) sends each segment to all children with `isend` and waits for them, so
//! a tree plan from [`Plan::from_tree`] with the children in this order is its schedule.

use super::Baseline;
use crate::plan::trees::ompi_kary;
use crate::plan::{Op, Plan, SegRange};

/// `split_bintree`: the message is halved; the root sends the first half down its left subtree
/// (odd relative ranks) and the second down its right one (even), then each rank swaps halves
/// with its neighbour (`v` odd pairs with `v + 1`); with an even count the last rank, which has
/// no neighbour, gets the second half from the root. Unsegmented as in the 4.1 fixed rules
/// (two logical segments: the halves).
pub fn split_bintree(n: u32, root: u32) -> Plan {
    if n < 2 {
        return Plan::empty(n, root, "ompi-split-binary");
    }
    let children = ompi_kary(n, root, 2);
    let mut parent = vec![u32::MAX; n as usize];
    for (p, cs) in children.iter().enumerate() {
        for &c in cs {
            parent[c as usize] = p as u32;
        }
    }
    let abs = |v: u32| (v + root) % n;
    let rel = |r: u32| (r + n - root) % n;
    let half = |v: u32| if v % 2 == 1 { 0 } else { 1 }; // lr: odd = left = first half
    let mut ops: Vec<Vec<Op>> = vec![Vec::new(); n as usize];
    // Step 1: halves down the two subtrees.
    for r in 0..n {
        let v = rel(r);
        if v != 0 {
            ops[r as usize].push(Op::Recv {
                peer: parent[r as usize],
                segs: SegRange::one(half(v)),
            });
        }
        for (i, &c) in children[r as usize].iter().enumerate() {
            let s = if v == 0 { i as u32 } else { half(v) };
            ops[r as usize].push(Op::Send {
                peer: c,
                segs: SegRange::one(s),
            });
        }
    }
    // Step 2: swap halves with the neighbour.
    for v in 1..n {
        let pair = if v % 2 == 1 { v + 1 } else { v - 1 };
        let r = abs(v) as usize;
        if pair < n {
            ops[r].push(Op::Send {
                peer: abs(pair),
                segs: SegRange::one(half(v)),
            });
            ops[r].push(Op::Recv {
                peer: abs(pair),
                segs: SegRange::one(1 - half(v)),
            });
        } else {
            // Even count: the last (odd, left) rank gets the right half from the root.
            ops[root as usize].push(Op::Send {
                peer: abs(v),
                segs: SegRange::one(1),
            });
            ops[r].push(Op::Recv {
                peer: root,
                segs: SegRange::one(1),
            });
        }
    }
    let mut p = Plan::empty(n, root, "ompi-split-binary");
    p.nsegs = 2;
    p.ops = ops;
    p
}

/// The algorithm `ompi_coll_tuned_bcast_intra_dec_fixed` picks, as its 4.1 id and name.
///
/// Transcribed from Open MPI v4.1.x `ompi/mca/coll/tuned/coll_tuned_decision_fixed.c` (the
/// "new default fixed decision functions" averaged from the ompi-collectives-tuning runs; ids:
/// 1 basic_linear, 2 chain, 3 pipeline, 4 split_binary_tree, 5 binary_tree, 6 binomial,
/// 7 knomial, 8 scatter_allgather, 9 scatter_allgather_ring). It calls
/// `ompi_coll_tuned_bcast_intra_do_this(..., alg, 0, 0)`: fan-out 0 and **segment size 0**, so
/// none of these runs segmented (`COLL_BASE_COMPUTED_SEGCOUNT` keeps the whole count for a
/// segment size below the type size), the chain falls back to fan-out 1, and the k-nomial
/// radix is the MCA default 4.
pub fn decision(n: u32, bytes: u64) -> (u32, &'static str) {
    let s = bytes;
    let alg = if n < 4 {
        match s {
            _ if s < 32 => 3,
            _ if s < 256 => 5,
            _ if s < 512 => 3,
            _ if s < 1024 => 7,
            _ if s < 32768 => 1,
            _ if s < 131072 => 5,
            _ if s < 262144 => 2,
            _ if s < 524288 => 1,
            _ if s < 1048576 => 6,
            _ => 5,
        }
    } else if n < 8 {
        match s {
            _ if s < 64 => 5,
            _ if s < 128 => 6,
            _ if s < 2048 => 5,
            _ if s < 8192 => 6,
            _ if s < 1048576 => 1,
            _ => 2,
        }
    } else if n < 16 {
        match s {
            _ if s < 8 => 7,
            _ if s < 64 => 5,
            _ if s < 4096 => 7,
            _ if s < 16384 => 5,
            _ if s < 32768 => 6,
            _ => 1,
        }
    } else if n < 32 {
        match s {
            _ if s < 4096 => 7,
            _ if s < 1048576 => 6,
            _ => 8,
        }
    } else if n < 64 {
        if s < 2048 {
            6
        } else {
            7
        }
    } else if n < 128 {
        7
    } else if n < 256 {
        match s {
            _ if s < 2 => 6,
            _ if s < 16384 => 5,
            _ if s < 32768 => 1,
            _ if s < 65536 => 5,
            _ => 7,
        }
    } else if n < 1024 {
        match s {
            _ if s < 16384 => 7,
            _ if s < 32768 => 4,
            _ => 7,
        }
    } else if n < 2048 {
        if s < 524288 {
            7
        } else {
            8
        }
    } else if n < 4096 {
        if s < 262144 {
            7
        } else {
            8
        }
    } else {
        match s {
            _ if s < 8192 => 7,
            _ if s < 16384 => 5,
            _ if s < 262144 => 7,
            _ => 8,
        }
    };
    let name = match alg {
        1 => "basic_linear",
        2 => "chain",
        3 => "pipeline",
        4 => "split_binary_tree",
        5 => "binary_tree",
        6 => "binomial",
        7 => "knomial",
        8 => "scatter_allgather",
        _ => "scatter_allgather_ring",
    };
    (alg, name)
}

/// The algorithm [`decision`] picks, as our [`Baseline`]: segment size 0 everywhere, so
/// Open MPI's `pipeline` (id 3) is the unsegmented chain, and the k-nomial radix is 4.
pub fn decision_baseline(n: u32, bytes: u64) -> Baseline {
    match decision(n, bytes).0 {
        1 => Baseline::Flat,
        2 | 3 => Baseline::Chain { seg: 0 },
        4 => Baseline::SplitBinary,
        5 => Baseline::Binary { seg: 0 },
        6 => Baseline::OmpiBinomial { seg: 0 },
        7 => Baseline::Knomial {
            k: super::KNOMIAL_RADIX,
            seg: 0,
        },
        8 => Baseline::ScatterRd,
        _ => Baseline::ScatterRing,
    }
}

/// The plan Open MPI 4.1 runs by default for `bytes` on `n` ranks, named by the algorithm it
/// picked (`knomial:k=4`, `flat`, ...; the scatter-allgather algorithms fall back to
/// basic_linear when count < comm_size, as Open MPI's do).
pub fn default_bcast(n: u32, root: u32, bytes: u64) -> Plan {
    decision_baseline(n, bytes)
        .build_ranks(n, root, bytes)
        .expect("Open MPI's fixed decision picks rank-order algorithms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_table_samples() {
        assert_eq!(decision(2, 16), (3, "pipeline"));
        assert_eq!(decision(4, 1 << 20), (2, "chain"));
        assert_eq!(decision(8, 100_000), (1, "basic_linear"));
        assert_eq!(decision(16, 1 << 20), (8, "scatter_allgather"));
        assert_eq!(decision(100, 1), (7, "knomial"));
        assert_eq!(decision(300, 20_000), (4, "split_binary_tree"));
        assert_eq!(decision(5000, 10_000), (5, "binary_tree"));
        assert_eq!(decision(5000, 1 << 20), (8, "scatter_allgather"));
    }

    #[test]
    fn split_bintree_validates() {
        for n in 1..40 {
            for root in [0, n / 2, n - 1] {
                split_bintree(n, root).validate().unwrap();
            }
        }
    }
}
