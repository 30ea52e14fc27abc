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
    hier_tree_with(model, h, None)
}

/// The schedules of the hierarchy's groups, kept across roots of one topology.
///
/// A group's schedule (which of its ranks sends to which, in what order) depends only on its
/// relay, its members (or its child groups' relays, with sizes), the message size and the
/// links, not on the root, except where the root lies inside the group and becomes its relay.
/// A broadcast from a new root therefore reschedules only the groups on the way from the root
/// to the top; on 4,096 ranks the other 2,100 greedies were most of the time a new root cost
/// (about 20 ms at 1 KiB, against 2-3 ms for the rest). Results are the greedy's, looked up by
/// everything the greedy reads, so a plan made with the cache equals one made without.
/// Only valid for the topology it was filled on (see [`super::local::LocalPlanner`]).
#[derive(Debug, Default)]
pub struct GroupSchedules {
    map: std::sync::Mutex<ScheduleMap>,
}

/// A group's schedule: its transfers (sender, receiver) in the greedy's order.
type Schedule = std::sync::Arc<Vec<(u32, u32)>>;
type ScheduleMap = std::collections::HashMap<GroupKey, Schedule>;

/// Everything a group's greedy reads besides the topology.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct GroupKey {
    bytes_bits: u64,
    relay: u32,
    kind: GroupKind,
    /// Switch groups: child relays in service order; host groups: member ranks.
    ranks: Vec<u32>,
    /// Switch groups: the child relays that are switch relays (see [`hier_tree_with`]).
    switch_relays: Vec<u32>,
}

impl GroupSchedules {
    /// Number of group schedules kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScheduleMap> {
        // Inserts are whole, so a map left by a panic is consistent.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The schedule for `key`, computed by `make` when it is not kept yet.
    fn get_or(&self, key: GroupKey, make: impl FnOnce() -> Vec<(u32, u32)>) -> Schedule {
        if let Some(v) = self.lock().get(&key) {
            return v.clone();
        }
        let v = std::sync::Arc::new(make());
        self.lock().insert(key, v.clone());
        v
    }
}

/// [`hier_tree_on`], taking group schedules from `cache` (and filling it) when given.
pub fn hier_tree_with(model: &CostModel, h: &Hierarchy, cache: Option<&GroupSchedules>) -> Vec<Vec<u32>> {
    let topo = model.topology();
    let mut children = vec![Vec::new(); topo.num_ranks()];
    // One group's schedule, made by `make` or taken from the cache (its key, copies of the
    // group's ranks, is built only when schedules are kept), added to `children`.
    let add = |children: &mut Vec<Vec<u32>>,
               (relay, kind): (u32, GroupKind),
               ranks: &[u32],
               switch_relays: &[u32],
               make: &dyn Fn() -> Vec<(u32, u32)>| {
        let pairs = match cache {
            Some(c) => {
                let key = GroupKey {
                    bytes_bits: model.bytes().to_bits(),
                    relay,
                    kind,
                    ranks: ranks.to_vec(),
                    switch_relays: switch_relays.to_vec(),
                };
                c.get_or(key, make)
            }
            None => std::sync::Arc::new(make()),
        };
        for &(src, dst) in pairs.iter() {
            children[src as usize].push(dst);
        }
    };
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
                let make = || {
                    let tl = greedy_ordered(model, grp.relay, &order, |s, r| {
                        !switch_relays.contains(&s) || switch_relays.contains(&r)
                    });
                    tl.transfers.iter().map(|t| (t.src, t.dst)).collect()
                };
                add(&mut children, (grp.relay, grp.kind), &order, &switch_relays, &make);
            }
            continue;
        }
        let members = &grp.ranks;
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
        let make = || {
            let tl = greedy_subset(model, members, grp.relay, &opts);
            tl.transfers.iter().map(|t| (t.src, t.dst)).collect()
        };
        add(&mut children, (grp.relay, grp.kind), members, &[], &make);
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

    /// Group schedules kept from earlier roots (and sizes) give the tree the greedies give
    /// afresh, and a new root of a known topology reschedules only the groups around it.
    #[test]
    fn kept_group_schedules_give_the_same_tree() {
        let t = Tree::oversubscribed(6, 5, 4.0).with_ranks(3).build().unwrap();
        let n = t.num_ranks() as u32;
        let cache = GroupSchedules::default();
        for bytes in [1000u64, 64 << 10] {
            let m = CostModel::new(&t, bytes);
            for root in [0, 1, n / 2, n - 1, 7] {
                let h = Hierarchy::new(&t, root);
                let before = cache.len();
                assert_eq!(
                    hier_tree_with(&m, &h, Some(&cache)),
                    hier_tree_on(&m, &h),
                    "root {root}"
                );
                if root == 7 && bytes == 1000 {
                    // Root 7's leaf switch and host were already scheduled for other roots:
                    // only the groups whose relay the root takes over are new.
                    assert!(cache.len() - before <= 3, "{} new schedules", cache.len() - before);
                }
            }
        }
        assert!(!cache.is_empty());
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
