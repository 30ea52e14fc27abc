//! Open MPI 4.1's broadcast algorithms (`coll/base`) and the `coll/tuned` fixed decision.
//!
//! Shapes follow `ompi/mca/coll/base/coll_base_topo.c` (v4.1.x): the binomial tree
//! (`build_bmtree`: children of relative rank v are `v + 2^j` for `2^j > v`, smallest first),
//! the k-ary tree (`build_tree`: level by level, children of v at level l are `v + k^l * i`),
//! the k-nomial tree (`build_kmtree`) and the chain (`build_chain`). The generic tree broadcast
//! (`coll_base_bcast.c`) sends each segment to all children with `isend` and waits for them, so
//! a tree plan from [`Plan::from_tree`] with the children in this order is its schedule.

use super::scatter_allgather::{scatter_allgather_rd, scatter_allgather_ring};
use crate::plan::{Op, Plan, SegRange};

/// Open MPI's binomial tree (`ompi_coll_base_topo_build_bmtree`), relative to `root`.
pub fn bmtree(n: u32, root: u32) -> Vec<Vec<u32>> {
    let abs = |v: u32| (v + root) % n;
    let mut children = vec![Vec::new(); n as usize];
    for v in 0..n {
        // opal_next_poweroftwo(v): the smallest power of two strictly greater than v.
        let mut mask = if v == 0 { 1 } else { 1u32 << (32 - v.leading_zeros()) };
        let mut kids = Vec::new();
        while mask < n {
            let c = v ^ mask;
            if c >= n {
                break;
            }
            kids.push(abs(c));
            mask <<= 1;
        }
        children[abs(v) as usize] = kids;
    }
    children
}

/// Open MPI's k-ary tree (`ompi_coll_base_topo_build_tree`): fanout 2 is the binary tree of
/// `bintree` and `split_bintree`.
pub fn kary_tree(n: u32, root: u32, fanout: u32) -> Vec<Vec<u32>> {
    let abs = |v: u64| ((v + root as u64) % n as u64) as u32;
    let pown = |l: u32| (fanout as u64).pow(l);
    let mut children = vec![Vec::new(); n as usize];
    for v in 0..n as u64 {
        // calculate_level: the level whose cumulative node count first exceeds v.
        let (mut level, mut num) = (0u32, 0u64);
        while num <= v {
            num += pown(level);
            level += 1;
        }
        let delta = pown(level - 1);
        children[abs(v) as usize] = (1..=fanout as u64)
            .map(|i| v + delta * i)
            .take_while(|&c| c < n as u64)
            .map(abs)
            .collect();
    }
    children
}

/// Open MPI's k-nomial tree (`ompi_coll_base_topo_build_kmtree`).
pub fn kmtree(n: u32, root: u32, radix: u32) -> Vec<Vec<u32>> {
    let (n64, k) = (n as u64, radix.max(2) as u64);
    let abs = |v: u64| ((v + root as u64) % n64) as u32;
    let mut children = vec![Vec::new(); n as usize];
    for v in 0..n64 {
        let mut mask = 1u64;
        while mask < n64 && v % (k * mask) == 0 {
            mask *= k;
        }
        mask /= k;
        let mut kids = Vec::new();
        while mask > 0 {
            for r in 1..k {
                let c = v + mask * r;
                if c < n64 {
                    kids.push(abs(c));
                }
            }
            mask /= k;
        }
        children[abs(v) as usize] = kids;
    }
    children
}

/// `basic_linear`: the root sends to every other rank in absolute rank order (also SMPI's
/// `flattree`).
pub fn linear(n: u32, root: u32) -> Vec<Vec<u32>> {
    let mut children = vec![Vec::new(); n as usize];
    children[root as usize] = (0..n).filter(|&r| r != root).collect();
    children
}

/// A single chain in relative rank order (`build_chain` with fanout 1: Open MPI's `pipeline`,
/// and `chain` with the default fanout).
pub fn chain(n: u32, root: u32) -> Vec<Vec<u32>> {
    crate::plan::trees::rank_chain(n, root)
}

/// `split_bintree`: the message is halved; the root sends the first half down its left subtree
/// (odd relative ranks) and the second down its right one (even), then each rank swaps halves
/// with its neighbour (`v` odd pairs with `v + 1`); with an even count the last rank, which has
/// no neighbour, gets the second half from the root. Unsegmented as in the 4.1 fixed rules
/// (two logical segments: the halves).
pub fn split_bintree(n: u32, root: u32) -> Plan {
    if n < 2 {
        return Plan::empty(n, root, "ompi-split-binary");
    }
    let children = kary_tree(n, root, 2);
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

/// The plan Open MPI 4.1 runs by default for `bytes` on `n` ranks.
pub fn default_bcast(n: u32, root: u32, bytes: u64) -> Plan {
    let (alg, name) = decision(n, bytes);
    let tree = |children: &[Vec<u32>]| Plan::from_tree(root, children, 1, "");
    let mut p = match alg {
        1 => tree(&linear(n, root)),
        2 | 3 => tree(&chain(n, root)),
        4 => split_bintree(n, root),
        5 => tree(&kary_tree(n, root, 2)),
        6 => tree(&bmtree(n, root)),
        7 => tree(&kmtree(n, root, 4)),
        // The scatter-allgather algorithms fall back to basic_linear when count < comm_size.
        8 | 9 if bytes < n as u64 => tree(&linear(n, root)),
        8 => scatter_allgather_rd(n, root),
        _ => scatter_allgather_ring(n, root),
    };
    p.info.algorithm = format!("ompi:{name}");
    p.info.planned_bytes = bytes;
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_match_the_open_mpi_comments() {
        // build_bmtree, size 8: 0 -> 1 2 4; 1 -> 3 5; 2 -> 6; 3 -> 7.
        let b = bmtree(8, 0);
        assert_eq!(b[0], vec![1, 2, 4]);
        assert_eq!(b[1], vec![3, 5]);
        assert_eq!(b[2], vec![6]);
        assert_eq!(b[3], vec![7]);
        // build_tree fanout 2, size 7: 0 -> 1 2; 1 -> 3 5; 2 -> 4 6.
        let t = kary_tree(7, 0, 2);
        assert_eq!(t[0], vec![1, 2]);
        assert_eq!(t[1], vec![3, 5]);
        assert_eq!(t[2], vec![4, 6]);
        // build_kmtree, size 10: radix 4: 0 -> 4 8 1 2 3; 4 -> 5 6 7; 8 -> 9.
        let k = kmtree(10, 0, 4);
        assert_eq!(k[0], vec![4, 8, 1, 2, 3]);
        assert_eq!(k[4], vec![5, 6, 7]);
        assert_eq!(k[8], vec![9]);
        // radix 3: 0 -> 3 6 9 1 2 ... (mask 9: 9; mask 3: 3 6; mask 1: 1 2)
        let k3 = kmtree(10, 0, 3);
        assert_eq!(k3[0], vec![9, 3, 6, 1, 2]);
        assert_eq!(k3[3], vec![4, 5]);
        // Rotation by the root.
        assert_eq!(bmtree(8, 3)[3], vec![4, 5, 7]);
    }

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
