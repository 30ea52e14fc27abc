//! Topology-agnostic broadcast trees (the classic MPI shapes), as children lists.
//!
//! The one place tree shapes are built: the fallback planner before a topology is known, the
//! chooser's rank-order safety net and the MPI libraries' algorithms ([`super::baselines`]) all
//! take their trees from here. Ranks are relabelled relative to the root (`vr = (r - root) mod
//! n`) as MPICH and Open MPI do, so the shape is the same for every root.
//!
//! | shape | children of relative rank v | as in |
//! |---|---|---|
//! | [`binomial`] | `v + 2^j` below v's lowest set bit, largest first | MPICH; Open MPI `build_kmtree` radix 2 |
//! | [`ompi_binomial`] | `v ^ 2^j` above v's highest set bit, smallest first | Open MPI `build_bmtree` |
//! | [`knomial`] / [`ompi_knomial`] | `v + j k^p` below v's lowest non-zero base-k digit | MPICH order / Open MPI `build_kmtree` |
//! | [`kary`] | `k v + 1 ..= k v + k` (heap order) | |
//! | [`ompi_kary`] | `v + k^l i` for v on level l | Open MPI `build_tree` (`k = 2`: its binary tree) |
//! | [`rank_chain`] / [`chain`] | the next rank / the next in a given order | Open MPI `build_chain` fanout 1 |
//! | [`flat`] | the root sends to all, in absolute rank order | Open MPI `basic_linear`, SMPI `flattree` |
//!
//! Two k-ary trees exist because they are different trees: for 7 ranks and k = 2 the heap
//! order gives 1 -> 3 4, Open MPI's level order 1 -> 3 5 (the diagram in `coll_base_topo.c`).

/// Children lists of a binomial tree rooted at `root` (MPICH order: the child with the largest
/// subtree first, so the longest branch starts earliest). The same tree, in the same order, as
/// Open MPI's k-nomial tree of radix 2.
pub fn binomial(n: u32, root: u32) -> Vec<Vec<u32>> {
    knomial(n, root, 2)
}

/// Children lists of a k-nomial tree (radix `k >= 2`; `k = 2` is the binomial tree), siblings
/// at one digit position in decreasing order (`2 p, p` for radix 3).
pub fn knomial(n: u32, root: u32, k: u32) -> Vec<Vec<u32>> {
    knomial_ordered(n, root, k, false)
}

/// Open MPI's k-nomial tree (`ompi_coll_base_topo_build_kmtree`): [`knomial`] with the siblings
/// at one digit position in increasing order (`p, 2 p` for radix 3).
pub fn ompi_knomial(n: u32, root: u32, k: u32) -> Vec<Vec<u32>> {
    knomial_ordered(n, root, k, true)
}

/// The k-nomial tree: relative rank v hangs below the rank that clears v's lowest non-zero
/// base-k digit; its children take the digit positions below that one, largest position first
/// (the root owns every position). The libraries differ only in the order of the `k - 1`
/// siblings at one position, `ascending` being Open MPI's.
fn knomial_ordered(n: u32, root: u32, k: u32, ascending: bool) -> Vec<Vec<u32>> {
    assert!(k >= 2, "k-nomial radix must be >= 2");
    let (n64, k64) = (n as u64, k as u64);
    let abs = |vr: u64| ((vr + root as u64) % n64) as u32;
    let mut children = vec![Vec::new(); n as usize];
    for vr in 0..n64 {
        // The lowest non-zero digit's position (for the root: the first power of k >= n).
        let mut span = 1u64;
        while span < n64 && (vr / span).is_multiple_of(k64) {
            span *= k64;
        }
        let mut kids = Vec::new();
        let mut pos = span / k64;
        while pos >= 1 {
            let mut add = |j: u64| {
                if vr + j * pos < n64 {
                    kids.push(abs(vr + j * pos));
                }
            };
            if ascending {
                (1..k64).for_each(&mut add);
            } else {
                (1..k64).rev().for_each(&mut add);
            }
            pos /= k64;
        }
        children[abs(vr) as usize] = kids;
    }
    children
}

/// Open MPI's binomial tree (`ompi_coll_base_topo_build_bmtree`): the children of relative rank
/// v are `v ^ 2^j` for every `2^j` above v's highest set bit, smallest first, so the root sends
/// to 1 before 2 before 4 (MPICH's [`binomial`] has the same parent of every rank but sends to
/// the largest subtree first).
pub fn ompi_binomial(n: u32, root: u32) -> Vec<Vec<u32>> {
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

/// Children lists of a complete k-ary tree in heap order: the children of relative rank vr are
/// `k vr + 1 ..= k vr + k`. Not Open MPI's k-ary tree ([`ompi_kary`]).
pub fn kary(n: u32, root: u32, k: u32) -> Vec<Vec<u32>> {
    assert!(k >= 1);
    let abs = |vr: u64| ((vr + root as u64) % n as u64) as u32;
    (0..n as u64)
        .map(|r| {
            let vr = (r + n as u64 - root as u64) % n as u64;
            (1..=k as u64)
                .map(|j| k as u64 * vr + j)
                .filter(|&c| c < n as u64)
                .map(abs)
                .collect()
        })
        .collect()
}

/// Open MPI's k-ary tree (`ompi_coll_base_topo_build_tree`), level by level: relative rank v on
/// level l (levels hold 1, k, k^2, ... ranks) has the children `v + k^l i`, i = 1..=k. Fanout 2
/// is the binary tree of its `bintree` and `split_bintree` broadcasts.
pub fn ompi_kary(n: u32, root: u32, fanout: u32) -> Vec<Vec<u32>> {
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

/// Children lists of a chain visiting `order` (which must start with the root).
pub fn chain(n: u32, order: &[u32]) -> Vec<Vec<u32>> {
    let mut children = vec![Vec::new(); n as usize];
    for w in order.windows(2) {
        children[w[0] as usize].push(w[1]);
    }
    children
}

/// Chain in rank order starting at the root: root, root+1, ..., wrapping around (Open MPI's
/// `build_chain` with fanout 1: its `pipeline`, and its `chain` as the fixed rules run it).
pub fn rank_chain(n: u32, root: u32) -> Vec<Vec<u32>> {
    let order: Vec<u32> = (0..n).map(|i| (root + i) % n).collect();
    chain(n, &order)
}

/// Flat tree: the root sends to every other rank in absolute rank order (Open MPI's
/// `basic_linear` loops `i = 0..size` skipping itself; SMPI's `flattree`).
pub fn flat(n: u32, root: u32) -> Vec<Vec<u32>> {
    let mut children = vec![Vec::new(); n as usize];
    children[root as usize] = (0..n).filter(|&r| r != root).collect();
    children
}

/// Parent of every rank in a tree given by its children lists (`u32::MAX` for the root and for
/// ranks the tree does not reach).
pub fn parents(children: &[Vec<u32>]) -> Vec<u32> {
    let mut parent = vec![u32::MAX; children.len()];
    for (p, cs) in children.iter().enumerate() {
        for &c in cs {
            if let Some(x) = parent.get_mut(c as usize) {
                *x = p as u32;
            }
        }
    }
    parent
}

/// True when `children` describes a tree rooted at `root` that reaches every rank exactly once.
pub fn spans(children: &[Vec<u32>], root: u32) -> bool {
    let n = children.len();
    if root as usize >= n {
        return false;
    }
    let mut seen = vec![false; n];
    seen[root as usize] = true;
    let mut stack = vec![root];
    while let Some(u) = stack.pop() {
        for &c in &children[u as usize] {
            if c as usize >= n || seen[c as usize] {
                return false;
            }
            seen[c as usize] = true;
            stack.push(c);
        }
    }
    seen.iter().all(|&x| x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    fn check_spanning(children: &[Vec<u32>], root: u32) {
        let n = children.len();
        let mut seen = vec![false; n];
        let mut stack = vec![root];
        seen[root as usize] = true;
        while let Some(u) = stack.pop() {
            for &c in &children[u as usize] {
                assert!(!seen[c as usize], "{c} reached twice");
                seen[c as usize] = true;
                stack.push(c);
            }
        }
        assert!(seen.iter().all(|&s| s), "not spanning: {children:?}");
    }

    #[test]
    fn all_shapes_span_for_every_root() {
        for n in 1..=33u32 {
            for root in 0..n {
                for ch in [
                    binomial(n, root),
                    knomial(n, root, 3),
                    knomial(n, root, 4),
                    kary(n, root, 2),
                    ompi_kary(n, root, 2),
                    ompi_kary(n, root, 3),
                    ompi_binomial(n, root),
                    ompi_knomial(n, root, 4),
                    rank_chain(n, root),
                    flat(n, root),
                ] {
                    check_spanning(&ch, root);
                    Plan::from_tree(root, &ch, 3, "t").validate().unwrap();
                }
            }
        }
    }

    #[test]
    fn binomial_matches_mpich_shape() {
        // n = 8, root 0: 0 -> 4, 2, 1; 4 -> 6, 5; 2 -> 3; 6 -> 7.
        let c = binomial(8, 0);
        assert_eq!(c[0], vec![4, 2, 1]);
        assert_eq!(c[4], vec![6, 5]);
        assert_eq!(c[2], vec![3]);
        assert_eq!(c[6], vec![7]);
        assert!(c[1].is_empty());
        // Rotated root keeps the shape.
        let c = binomial(8, 3);
        assert_eq!(c[3], vec![7, 5, 4]);
        // Depth of a binomial tree is ceil(log2 n).
        let c = binomial(16, 0);
        assert_eq!(c[0], vec![8, 4, 2, 1]);
    }

    #[test]
    fn knomial_radix3() {
        // n = 9: root -> 6, 3, 2, 1 ; 3 -> 5, 4 ; 6 -> 8, 7
        let c = knomial(9, 0, 3);
        assert_eq!(c[0], vec![6, 3, 2, 1]);
        assert_eq!(c[3], vec![5, 4]);
        assert_eq!(c[6], vec![8, 7]);
    }

    // The diagrams in Open MPI's ompi/mca/coll/base/coll_base_topo.c, child sets and the order
    // its loops produce them in.

    #[test]
    fn ompi_build_tree_diagram() {
        // fanout 2, comm_size 7: 0 -> 1 2; 1 -> 3 5; 2 -> 4 6 (delta 1, 2, 4 per level).
        let t = ompi_kary(7, 0, 2);
        assert_eq!(t[0], vec![1, 2]);
        assert_eq!(t[1], vec![3, 5]);
        assert_eq!(t[2], vec![4, 6]);
        assert!(t[3..].iter().all(Vec::is_empty));
        // Not the heap-ordered tree.
        assert_eq!(kary(7, 0, 2)[1], vec![3, 4]);
        // Rotation by the root keeps the shape.
        assert_eq!(ompi_kary(7, 3, 2)[4], vec![6, 1]);
    }

    #[test]
    fn ompi_bmtree_diagram() {
        // size 2: 0 -> 1. size 4: 0 -> {2, 1}; 1 -> 3. size 8: 0 -> {4, 2, 1}; 2 -> 6;
        // 1 -> {5, 3}; 3 -> 7. The loop runs the mask upwards: smallest child first.
        assert_eq!(ompi_binomial(2, 0), vec![vec![1], vec![]]);
        let b = ompi_binomial(4, 0);
        assert_eq!(b[0], vec![1, 2]);
        assert_eq!(b[1], vec![3]);
        let b = ompi_binomial(8, 0);
        assert_eq!(b[0], vec![1, 2, 4]);
        assert_eq!(b[1], vec![3, 5]);
        assert_eq!(b[2], vec![6]);
        assert_eq!(b[3], vec![7]);
        assert_eq!(ompi_binomial(8, 3)[3], vec![4, 5, 7]);
    }

    #[test]
    fn ompi_kmtree_diagram() {
        // comm_size 10. radix 2: 0 -> 8 4 2 1; 8 -> 9; 4 -> 6 5; 6 -> 7; 2 -> 3.
        let k = ompi_knomial(10, 0, 2);
        assert_eq!(k[0], vec![8, 4, 2, 1]);
        assert_eq!(k[8], vec![9]);
        assert_eq!(k[4], vec![6, 5]);
        assert_eq!(k[6], vec![7]);
        assert_eq!(k[2], vec![3]);
        // ... which is MPICH's binomial tree, order included.
        assert_eq!(k, binomial(10, 0));
        // radix 3: 0 -> 9 3 6 1 2; 3 -> 4 5; 6 -> 7 8.
        let k = ompi_knomial(10, 0, 3);
        assert_eq!(k[0], vec![9, 3, 6, 1, 2]);
        assert_eq!(k[3], vec![4, 5]);
        assert_eq!(k[6], vec![7, 8]);
        // radix 4: 0 -> 4 8 1 2 3; 4 -> 5 6 7; 8 -> 9.
        let k = ompi_knomial(10, 0, 4);
        assert_eq!(k[0], vec![4, 8, 1, 2, 3]);
        assert_eq!(k[4], vec![5, 6, 7]);
        assert_eq!(k[8], vec![9]);
    }

    #[test]
    fn flat_is_basic_linear() {
        assert_eq!(flat(5, 2)[2], vec![0, 1, 3, 4]);
        assert_eq!(rank_chain(4, 2), vec![vec![1], vec![], vec![3], vec![0]]);
    }
}
