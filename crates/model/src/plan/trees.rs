//! Topology-agnostic broadcast trees (the classic MPI shapes), as children lists.
//!
//! These serve as the fallback planner before a topology is known and as the MPI baselines the
//! simulator compares against. Ranks are relabelled relative to the root (`vr = (r - root) mod
//! n`) as MPICH and Open MPI do, so the shape is the same for every root.

/// Children lists of a binomial tree rooted at `root` (MPICH order: the child with the largest
/// subtree first, so the longest branch starts earliest).
pub fn binomial(n: u32, root: u32) -> Vec<Vec<u32>> {
    knomial(n, root, 2)
}

/// Children lists of a k-nomial tree (radix `k >= 2`); `k = 2` is the binomial tree.
pub fn knomial(n: u32, root: u32, k: u32) -> Vec<Vec<u32>> {
    assert!(k >= 2, "k-nomial radix must be >= 2");
    let mut children = vec![Vec::new(); n as usize];
    let abs = |vr: u64| ((vr + root as u64) % n as u64) as u32;
    for vr in 0..n as u64 {
        // The lowest non-zero base-k digit of vr marks where vr hangs; its children use the
        // digit positions below that one.
        let mut span = 1u64;
        while span < n as u64 && (vr / span).is_multiple_of(k as u64) {
            span *= k as u64;
        }
        // Positions below `span`, largest first.
        let mut pos = span / k as u64;
        let mut kids = Vec::new();
        while pos >= 1 {
            for j in (1..k as u64).rev() {
                let c = vr + j * pos;
                if c < n as u64 {
                    kids.push(abs(c));
                }
            }
            pos /= k as u64;
        }
        if vr == 0 {
            // The root owns every digit position.
            kids.clear();
            let mut top = 1u64;
            while top * (k as u64) < n as u64 {
                top *= k as u64;
            }
            let mut pos = top;
            while pos >= 1 {
                for j in (1..k as u64).rev() {
                    let c = j * pos;
                    if c < n as u64 {
                        kids.push(abs(c));
                    }
                }
                pos /= k as u64;
            }
        }
        children[abs(vr) as usize] = kids;
    }
    children
}

/// Children lists of a complete k-ary tree in relative-rank order (`k = 2`: Open MPI's binary
/// tree; children of vr are k*vr+1 .. k*vr+k).
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

/// Children lists of a chain visiting `order` (which must start with the root).
pub fn chain(n: u32, order: &[u32]) -> Vec<Vec<u32>> {
    let mut children = vec![Vec::new(); n as usize];
    for w in order.windows(2) {
        children[w[0] as usize].push(w[1]);
    }
    children
}

/// Chain in rank order starting at the root: root, root+1, ..., wrapping around.
pub fn rank_chain(n: u32, root: u32) -> Vec<Vec<u32>> {
    let order: Vec<u32> = (0..n).map(|i| (root + i) % n).collect();
    chain(n, &order)
}

/// Flat tree: the root sends to everyone, in rank order.
pub fn flat(n: u32, root: u32) -> Vec<Vec<u32>> {
    let mut children = vec![Vec::new(); n as usize];
    children[root as usize] = (1..n).map(|i| (root + i) % n).collect();
    children
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
}
