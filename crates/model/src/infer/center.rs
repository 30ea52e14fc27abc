//! Rooting the inferred tree where the physical hierarchy has its top: at its *center*.
//!
//! Round-trip times determine an unrooted tree only: every distance is the same whichever
//! vertex is called the top. But the outputs that describe a hierarchy (Slurm's
//! `topology.conf`, whose topology/tree plugin schedules jobs by it; the JSON and DOT trees; the
//! drawn tree) need a top, and the tree as built hangs from wherever inference started (a leaf
//! switch, typically), which put hosts of two pods below a common switch that does not exist.
//!
//! **Rule.** The top is the point of the switch tree that minimises the largest one-way latency
//! to any switch with hosts below it: the midpoint of the longest path between two such
//! switches (in a tree the center of a set of vertices is unique and lies there). Host links
//! are left out on purpose: a loaded host or a slow NIC lengthens its own link by tens of
//! microseconds, which says nothing about where the core is. When the midpoint lies in the
//! outer thirds of a link, or within `tol` of an end (fitted link lengths carry errors of their
//! own), the tree is rooted at the nearer switch; when it lies in the middle third, a top
//! switch is inserted there — as where two leaf switches hang from a
//! core switch that joins nothing else, which RTTs cannot see but whose position they do pin
//! down.
//!
//! **Limits.** This recovers the physical top for trees whose core sits in the middle: fat
//! trees, two- and three-level trees with pods of similar depth, a star of leaf switches. A
//! core placed off-center (one pod many hops deeper than the others, or a top switch with most
//! of its latency on one side) is rooted nearer the deep side, since latency is all the data
//! says; the unrooted tree, and with it every plan, is unaffected by the choice.

use super::tree::WorkTree;

/// The switches with hosts directly below them.
fn leaf_switches(t: &WorkTree) -> Vec<usize> {
    let mut out: Vec<usize> = t.hosts().filter_map(|h| t.host_parent(h)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The vertex of `among` farthest from `from`, and its distance (ties: the smallest id).
fn farthest(t: &WorkTree, from: usize, among: &[usize]) -> Option<(usize, f64)> {
    among
        .iter()
        .map(|&v| (v, t.dist(from, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// Root `t` at its center (see the module documentation), snapping to the nearer end of the
/// link holding it unless it lies in the link's middle third and farther than `tol` (seconds;
/// at least 1 ns, for rounding) from both ends.
/// Returns the new root vertex, which is a switch inserted on a link when no switch is close
/// enough. Trees of fewer than two hosts are left alone.
pub(crate) fn root_at_center(t: &mut WorkTree, tol: f64) -> Option<usize> {
    if t.num_hosts_in() < 2 {
        return None;
    }
    let leaves = leaf_switches(t);
    let tol = tol.max(1e-9);
    let Some(&first) = leaves.first() else {
        // Two hosts joined by one link, no switch yet: one in the middle.
        let b = *t.children(t.root()).first()?;
        let mid = t.split(b, t.len(b) / 2.0);
        t.reroot(mid);
        return Some(mid);
    };
    // Double sweep: the leaf switch farthest from any leaf switch is one end of a longest
    // path between them (tree metrics), and the one farthest from it the other end.
    let (u, _) = farthest(t, first, &leaves)?;
    let (v, diameter) = farthest(t, u, &leaves)?;
    let half = diameter / 2.0;
    // The link holding the midpoint: its ends (in u -> v order), where along it the midpoint
    // lies, and its length. `path` lists the vertices from u with their distance from u.
    let path = t.path(u, v);
    let (a, b, into, len) = path
        .windows(2)
        .find(|w| w[1].1 >= half)
        .map(|w| (w[0].0, w[1].0, half - w[0].1, w[1].1 - w[0].1))?;
    // Snap to an end of the link unless the midpoint is in its middle third (and farther than
    // `tol` from both ends): fitted link lengths carry errors of their own, so a midpoint a
    // little inside a link says "this switch", one well inside it says "a switch here".
    let snap = tol.max(len / 3.0);
    let root = if into <= snap && into <= len - into {
        a
    } else if len - into <= snap {
        b
    } else if t.parent(a) == Some(b) {
        t.split(a, into)
    } else {
        debug_assert_eq!(t.parent(b), Some(a));
        t.split(b, len - into)
    };
    t.reroot(root);
    Some(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hosts 0..n below switches given as (node, parent, len) links hanging from host 0.
    fn tree(n: usize, links: &[(usize, usize, f64)]) -> WorkTree {
        let mut t = WorkTree::new(n);
        t.build_rooted(0, links);
        t
    }

    fn hosts_below(t: &WorkTree, v: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![v];
        while let Some(x) = stack.pop() {
            if let Some(h) = t.host_of(x) {
                out.push(h);
            }
            stack.extend(t.children(x).iter().copied());
        }
        out.sort_unstable();
        out
    }

    /// 3 leaf switches (9, 10, 11) x 3 hosts below core 12; built hanging from host 0, so the
    /// tree starts rooted at leaf switch 9.
    fn three_by_three(uplinks: [f64; 3]) -> WorkTree {
        let mut links = vec![(9, 0, 3e-6)];
        links.push((12, 9, uplinks[0]));
        for (s, up) in [(10, uplinks[1]), (11, uplinks[2])] {
            links.push((s, 12, up));
        }
        for h in 1..9 {
            links.push((h, 9 + h / 3, 3e-6));
        }
        tree(9, &links)
    }

    #[test]
    fn the_core_of_a_symmetric_tree_becomes_the_top() {
        let mut t = three_by_three([2e-6; 3]);
        assert_eq!(hosts_below(&t, t.root()).len(), 9);
        let leaf = t.root();
        assert!(
            t.children(leaf).iter().filter(|&&c| t.is_host(c)).count() == 3,
            "starts at a leaf switch"
        );
        let r = root_at_center(&mut t, 0.3e-6).unwrap();
        assert_eq!(t.root(), r);
        let mut groups: Vec<Vec<usize>> = t.children(r).iter().map(|&c| hosts_below(&t, c)).collect();
        groups.sort();
        assert_eq!(groups, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]);
    }

    #[test]
    fn noise_in_the_uplinks_snaps_to_the_core_within_tolerance() {
        // Uplinks 1.8 / 2.2 / 2.0 us: the midpoint of the longest path is 0.2 us off the core.
        let mut t = three_by_three([1.8e-6, 2.2e-6, 2.0e-6]);
        let switches = t.switches().count();
        let r = root_at_center(&mut t, 0.5e-6).unwrap();
        assert_eq!(t.switches().count(), switches, "no switch inserted");
        assert_eq!(t.children(r).len(), 3);
        // A midpoint in the middle third of a link is a switch of its own: uplinks 1 / 4 / 1 us
        // put it 2.5 us up the 4 us link, 1.5 us from the core.
        let mut t = three_by_three([1e-6, 4e-6, 1e-6]);
        root_at_center(&mut t, 0.5e-6).unwrap();
        assert_eq!(t.switches().count(), switches + 1);
        let r = t.root();
        let mut groups: Vec<Vec<usize>> = t.children(r).iter().map(|&c| hosts_below(&t, c)).collect();
        groups.sort();
        assert_eq!(groups, vec![vec![0, 1, 2, 6, 7, 8], vec![3, 4, 5]]);
    }

    #[test]
    fn two_leaf_switches_get_a_top_switch_between_them() {
        // s0 (6) with hosts 0,1,2 and s1 (7) with hosts 3,4,5, joined by a 4 us link.
        let links = [
            (6, 0, 3e-6),
            (1, 6, 3e-6),
            (2, 6, 3e-6),
            (7, 6, 4e-6),
            (3, 7, 3e-6),
            (4, 7, 3e-6),
            (5, 7, 3e-6),
        ];
        let mut t = tree(6, &links);
        let r = root_at_center(&mut t, 0.5e-6).unwrap();
        let mut groups: Vec<Vec<usize>> = t.children(r).iter().map(|&c| hosts_below(&t, c)).collect();
        groups.sort();
        assert_eq!(groups, vec![vec![0, 1, 2], vec![3, 4, 5]]);
        for &c in t.children(r) {
            assert!((t.len(c) - 2e-6).abs() < 1e-12, "midpoint of the 4 us link");
        }
    }

    #[test]
    fn tiny_trees() {
        let mut t = WorkTree::new(1);
        t.init_single(0);
        assert_eq!(root_at_center(&mut t, 0.0), None);
        let mut t = WorkTree::new(2);
        t.init_pair(0, 1, 4e-6);
        let r = root_at_center(&mut t, 0.0).unwrap();
        assert!(!t.is_host(r));
        assert_eq!(t.children(r).len(), 2);
    }
}
