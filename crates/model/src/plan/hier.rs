//! Hierarchical per-switch planning for hundreds to thousands of ranks.
//!
//! The broadcast is planned on the relay hierarchy of [`super::relay`]: at every switch group,
//! its relay broadcasts to the relays of its child groups (the switches below it and the hosts
//! attached to it); inside every host group, the host's relay broadcasts to its ranks. Each of
//! these small broadcasts is planned under the [Hourai2004] cost model on the full topology's
//! links, so it sees the real bandwidths and latencies: at a switch, the child relays are served
//! largest group first (they have the most left to do), each by whichever holder delivers
//! earliest; inside a host, the greedy with a little look-ahead. Only a group's relay ever
//! receives from outside the group: every uplink is crossed once. A rank's sends are ordered by level, outermost first (its outer subtrees are
//! the larger ones), then in its group schedule's order.
//!
//! Planning cost: one greedy per group, cubic in the group's size (the number of child groups
//! or of ranks per host), so linear in the number of groups for fixed fan-outs.

use super::bound::{BoundScratch, Bounds};
use super::cost::CostModel;
use super::greedy::{greedy_ordered, greedy_subset, GreedyOptions};
use super::relay::{GroupKind, Hierarchy};
use crate::topology::Topology;

/// Look-ahead of the per-group greedy (groups are small; a pilot of 3 is cheap).
pub const GROUP_LOOKAHEAD: usize = 3;
/// Groups larger than this are planned with the plain greedy (no look-ahead).
pub const LOOKAHEAD_MAX_GROUP: usize = 48;

/// Children lists (in send order) of the hierarchical tree for a broadcast from `root`.
pub fn hier_tree(model: &CostModel, root: u32) -> Vec<Vec<u32>> {
    hier_tree_on(model, &Hierarchy::new(model.topology(), root))
}

/// [`hier_tree`] on a hierarchy already built for the root.
pub fn hier_tree_on(model: &CostModel, h: &Hierarchy) -> Vec<Vec<u32>> {
    let topo = model.topology();
    let mut children = vec![Vec::new(); topo.num_ranks()];
    for g in h.top_down() {
        let grp = &h.groups[g];
        if grp.kind == GroupKind::Switch {
            // Child relays carry unequal work below them: serve the largest groups first
            // (ties by rank), each from the holder that delivers earliest; relays of switch
            // groups forward at this level only to other switch relays (doubling among the
            // switches), not to hosts (their own, larger group is waiting for them).
            let switch_relays: Vec<u32> = grp
                .children
                .iter()
                .filter(|&&c| h.groups[c].kind == GroupKind::Switch)
                .map(|&c| h.groups[c].relay)
                .collect();
            let mut kids: Vec<(usize, u32)> = grp
                .children
                .iter()
                .map(|&c| (h.groups[c].size, h.groups[c].relay))
                .filter(|&(_, r)| r != grp.relay)
                .collect();
            kids.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let order: Vec<u32> = kids.into_iter().map(|x| x.1).collect();
            if !order.is_empty() {
                let tl = greedy_ordered(model, grp.relay, &order, |s, r| {
                    !switch_relays.contains(&s) || switch_relays.contains(&r)
                });
                for t in &tl.transfers {
                    children[t.src as usize].push(t.dst);
                }
            }
            continue;
        }
        let members = grp.ranks.clone();
        if members.len() < 2 {
            continue;
        }
        let opts = GreedyOptions {
            lookahead: if members.len() <= LOOKAHEAD_MAX_GROUP {
                GROUP_LOOKAHEAD
            } else {
                0
            },
            by_completion: true,
        };
        let tl = greedy_subset(model, &members, grp.relay, &opts);
        for t in &tl.transfers {
            children[t.src as usize].push(t.dst);
        }
    }
    children
}

/// Binomial tree over the ranks in depth-first order from the root: the root sends to the
/// middle of the order, then the quarters, ...; every block of the order is a run of whole
/// hosts and switches, so each is entered by few transfers, and the tree keeps the binomial's
/// log2(n) rounds (the relay hierarchy pays a rounding-up of log2 at every level instead).
pub fn dfs_binomial(topo: &Topology, root: u32) -> Vec<Vec<u32>> {
    let order = super::relay::dfs_order(topo, root);
    let n = order.len() as u32;
    let by_pos = super::trees::binomial(n, 0);
    let mut children = vec![Vec::new(); n as usize];
    for (p, kids) in by_pos.iter().enumerate() {
        children[order[p] as usize] = kids.iter().map(|&k| order[k as usize]).collect();
    }
    children
}

/// Lower bound ([Hourai2004] model, whole message per transfer) on any unsegmented schedule.
pub fn unsegmented_lower_bound(model: &CostModel, root: u32) -> f64 {
    let topo: &Topology = model.topology();
    let b = Bounds::new(model);
    let mut ready = vec![f64::INFINITY; topo.num_ranks()];
    ready[root as usize] = 0.0;
    b.lower_bound_with(topo, &ready, 0.0, None, f64::INFINITY, &mut BoundScratch::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cost_replay::replay;
    use crate::plan::{trees, Plan};
    use crate::topology::gen::{Tree, TwoClusters};

    #[test]
    fn crosses_each_uplink_once() {
        // 4 leaf switches x 4 hosts x 4 ranks, 4:1 uplinks; any root.
        let t = Tree::oversubscribed(4, 4, 4.0).with_ranks(4).build().unwrap();
        let m = CostModel::new(&t, 64 * 1024);
        for root in [0, 37] {
            let ch = hier_tree(&m, root);
            assert!(trees::spans(&ch, root));
            // Tree edges entering each leaf switch's subtree and each host from outside: one.
            let h = Hierarchy::new(&t, root);
            let mut parent = vec![u32::MAX; t.num_ranks()];
            for (p, cs) in ch.iter().enumerate() {
                for &c in cs {
                    parent[c as usize] = p as u32;
                }
            }
            for (gi, g) in h.groups.iter().enumerate() {
                let inside = h.ranks_of(gi);
                let entering = inside
                    .iter()
                    .filter(|&&r| r != root && !inside.contains(&parent[r as usize]))
                    .count();
                let expect = usize::from(!inside.contains(&root));
                assert_eq!(entering, expect, "group {:?} {:?}", g.kind, t.vertex(g.vertex).name);
            }
        }
    }

    #[test]
    fn dfs_binomial_spans_and_follows_the_tree() {
        let t = Tree::oversubscribed(4, 4, 4.0).with_ranks(4).build().unwrap();
        for root in [0, 9, 63] {
            let ch = dfs_binomial(&t, root);
            assert!(trees::spans(&ch, root));
            // Block 32 of the DFS order is the other half of the switches: the root's first
            // child, entered once.
            let order = crate::plan::relay::dfs_order(&t, root);
            assert_eq!(ch[root as usize][0], order[32]);
        }
    }

    #[test]
    fn beats_binomial_on_two_clusters() {
        let t = TwoClusters::paper_nonuniform(4).build().unwrap();
        let bytes = 1 << 20;
        let m = CostModel::new(&t, bytes);
        let ch = hier_tree(&m, 1);
        let p = Plan::from_tree(1, &ch, 1, "hier");
        p.validate().unwrap();
        let ours = replay(&m, &p, bytes).unwrap().makespan;
        let bin = replay(&m, &Plan::from_tree(1, &trees::binomial(16, 1), 1, "binomial"), bytes)
            .unwrap()
            .makespan;
        let lb = unsegmented_lower_bound(&m, 1);
        assert!(ours < bin, "hier {ours} binomial {bin}");
        assert!(lb <= ours * (1.0 + 1e-12));
    }
}
