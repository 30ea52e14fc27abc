//! Relay routes ([Takizawa2009]): cross each congested uplink once, through a well-connected rank.
//!
//! [Takizawa2009] routes large messages between leaf switches through *relay nodes*: one rank under
//! each switch with the best access link receives on behalf of its switch and forwards after the
//! whole message arrived (store-and-forward). For a broadcast that becomes a hierarchy of groups
//! ([`Hierarchy`]), rooted where the broadcast starts:
//!
//! * a *switch group* is a switch with everything below it (seen from the root); its children are
//!   the switch groups below it and the *host groups* attached to it;
//! * a *host group* (a unit: a host with its ranks, or a rank wired straight to a switch) has
//!   ranks as members.
//!
//! Every group has one relay: the root if the group contains it, else the rank with the best
//! access: the widest two-way path to the switch it hangs from (largest bottleneck bandwidth,
//! then lowest latency, then lowest rank id — deterministic), since the relay both receives for
//! the group and feeds the rest of it. Data enters a group only at its relay, so a plan built on
//! the hierarchy crosses each group's uplink exactly once; everything else stays inside. The
//! cost model and the simulator charge the store-and-forward delay at every relay (a rank
//! forwards only what it has fully received).
//!
//! [`relay_routes`] reports, for every receiver of a plan, the chain of relay ranks its data
//! passed through and the vertex path of the transfer that delivered it.

use super::Plan;
use crate::topology::{Topology, VertexId, VertexKind};

/// What a group is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    Switch,
    Host,
}

/// One group of the hierarchy.
#[derive(Clone, Debug)]
pub struct Group {
    pub kind: GroupKind,
    /// The switch, or the host group's top vertex (a node, or a rank wired to a switch).
    pub vertex: VertexId,
    /// The rank through which data enters the group.
    pub relay: u32,
    /// Child groups (switch groups) — empty for host groups.
    pub children: Vec<usize>,
    /// Member ranks (host groups), ascending — empty for switch groups.
    pub ranks: Vec<u32>,
    /// Number of ranks in the group.
    pub size: usize,
}

/// Groups of a topology as seen from a broadcast root (see module docs).
#[derive(Clone, Debug)]
pub struct Hierarchy {
    pub groups: Vec<Group>,
    /// The outermost group (contains every rank).
    pub top: usize,
}

impl Hierarchy {
    /// Build the hierarchy for a broadcast from `root`.
    pub fn new(topo: &Topology, root: u32) -> Hierarchy {
        let nv = topo.num_vertices();
        let root_v = topo.rank_vertex(root);
        // Orient the tree away from the root rank.
        let mut parent = vec![usize::MAX; nv];
        let mut order = vec![root_v];
        let mut seen = vec![false; nv];
        seen[root_v] = true;
        let mut i = 0;
        while i < order.len() {
            let u = order[i];
            let mut nb: Vec<VertexId> = topo.neighbors(u).iter().map(|&(w, _)| w).collect();
            nb.sort_by(|&a, &b| topo.vertex(a).name.cmp(&topo.vertex(b).name));
            for w in nb {
                if !seen[w] {
                    seen[w] = true;
                    parent[w] = u;
                    order.push(w);
                }
            }
            i += 1;
        }
        let is_switch = |v: VertexId| topo.vertex(v).kind == VertexKind::Switch;
        // Host group top of each vertex below a switch: walk up while the parent is not a switch.
        let mut groups: Vec<Group> = Vec::new();
        let mut group_of_vertex = vec![usize::MAX; nv];
        // Switch groups in BFS order from the root.
        for &v in &order {
            if is_switch(v) {
                group_of_vertex[v] = groups.len();
                groups.push(Group {
                    kind: GroupKind::Switch,
                    vertex: v,
                    relay: u32::MAX,
                    children: Vec::new(),
                    ranks: Vec::new(),
                    size: 0,
                });
            }
        }
        // Host groups: a non-switch vertex whose parent (from the root) is a switch, plus the
        // root's own host group (the part of the tree above the first switch).
        let host_top = |mut v: VertexId| {
            while parent[v] != usize::MAX && !is_switch(parent[v]) {
                v = parent[v];
            }
            v
        };
        for &v in &order {
            if is_switch(v) || group_of_vertex[v] != usize::MAX {
                continue;
            }
            let top = host_top(v);
            if group_of_vertex[top] == usize::MAX {
                group_of_vertex[top] = groups.len();
                groups.push(Group {
                    kind: GroupKind::Host,
                    vertex: top,
                    relay: u32::MAX,
                    children: Vec::new(),
                    ranks: Vec::new(),
                    size: 0,
                });
            }
            group_of_vertex[v] = group_of_vertex[top];
        }
        for r in 0..topo.num_ranks() as u32 {
            let g = group_of_vertex[topo.rank_vertex(r)];
            groups[g].ranks.push(r);
        }
        // Parent group of each group: the group of the parent vertex of its top vertex.
        let root_group = group_of_vertex[root_v];
        let mut parent_group = vec![usize::MAX; groups.len()];
        for (g, grp) in groups.iter().enumerate() {
            let pv = parent[grp.vertex];
            if pv != usize::MAX {
                parent_group[g] = group_of_vertex[pv];
            }
        }
        // In the orientation from the root, the root's host group is the ancestor of every
        // switch. Re-hang it below the switch next to it, which becomes the top group (or keep
        // it as the top when there is no switch at all).
        let top =
            match (0..groups.len()).find(|&g| groups[g].kind == GroupKind::Switch && parent_group[g] == root_group) {
                Some(sw) => {
                    parent_group[root_group] = sw;
                    parent_group[sw] = usize::MAX;
                    sw
                }
                None => root_group,
            };
        for (g, &p) in parent_group.iter().enumerate() {
            if p != usize::MAX && g != top {
                groups[p].children.push(g);
            }
        }
        // Sizes in post-order.
        let mut post = Vec::with_capacity(groups.len());
        let mut stack = vec![(top, false)];
        while let Some((g, done)) = stack.pop() {
            if done {
                post.push(g);
            } else {
                stack.push((g, true));
                for &c in &groups[g].children {
                    stack.push((c, false));
                }
            }
        }
        for &g in &post {
            groups[g].size = groups[g].ranks.len() + groups[g].children.iter().map(|&c| groups[c].size).sum::<usize>();
        }
        // A switch with no rank below it (a topology file's unused core, a leaf switch none of
        // the job's ranks are on) takes no part: nothing is sent through it.
        let sizes: Vec<usize> = groups.iter().map(|g| g.size).collect();
        for grp in &mut groups {
            grp.children.retain(|&c| sizes[c] > 0);
        }
        let mut h = Hierarchy { groups, top };
        h.choose_relays(topo, root, &parent_group, &parent);
        h
    }

    /// Relays (module docs): bottom-up each group's preferred relay — for a host group its rank
    /// with the best access to the switch it hangs from, for a switch group the preferred relay
    /// of the child with the best access to that switch — then top-down the root, or a parent's
    /// relay, wherever it lies inside a group.
    fn choose_relays(&mut self, topo: &Topology, root: u32, parent_group: &[usize], parent: &[VertexId]) {
        let n = self.groups.len();
        let order = self.top_down();
        // Group of every rank, to tell whether a rank lies inside a group by walking up the
        // (shallow) group tree: O(depth) per test instead of a scan of the group's ranks.
        let mut group_of_rank = vec![usize::MAX; topo.num_ranks()];
        for (g, grp) in self.groups.iter().enumerate() {
            for &r in &grp.ranks {
                group_of_rank[r as usize] = g;
            }
        }
        let inside = |r: u32, g: usize| {
            let mut x = group_of_rank[r as usize];
            while x != usize::MAX {
                if x == g {
                    return true;
                }
                x = if x == self.top { usize::MAX } else { parent_group[x] };
            }
            false
        };
        // The widest two-way path from a switch (or host top) down to a rank, then latency,
        // then rank id: the best of `candidates`, which all lie below `access` (seen from the
        // root). One sweep of the part below each access vertex, shared by every group hanging
        // from it: O(vertices x depth) in all, where a sweep of the whole tree per group made
        // this quadratic (0.4 s at 4,096 ranks, 5.6 s at 16,384).
        // The top switch is the exception: seen from the root it hangs below the root's host
        // group (re-hung above), so its sweep covers the whole tree.
        let top_vertex = self.groups[self.top].vertex;
        let mut sweeps: std::collections::HashMap<VertexId, Sweep> = std::collections::HashMap::new();
        let mut best_from = |access: VertexId, candidates: &mut dyn Iterator<Item = u32>| -> u32 {
            let sw = sweeps.entry(access).or_insert_with(|| {
                let blocked = if access == top_vertex {
                    usize::MAX
                } else {
                    parent[access]
                };
                Sweep::below(topo, access, blocked)
            });
            let width = |v: VertexId| sw.width(v);
            let lat = |v: VertexId| sw.latency(v);
            candidates
                .min_by(|&a, &b| {
                    let (va, vb) = (topo.rank_vertex(a), topo.rank_vertex(b));
                    width(vb)
                        .total_cmp(&width(va))
                        .then(lat(va).total_cmp(&lat(vb)))
                        .then(a.cmp(&b))
                })
                .expect("groups are not empty")
        };
        let mut pref = vec![u32::MAX; n];
        for &g in order.iter().rev() {
            let grp = &self.groups[g];
            pref[g] = match grp.kind {
                GroupKind::Host => {
                    let p = parent_group[g];
                    let access = if p == usize::MAX {
                        grp.vertex
                    } else {
                        self.groups[p].vertex
                    };
                    best_from(access, &mut grp.ranks.iter().copied())
                }
                GroupKind::Switch => best_from(grp.vertex, &mut grp.children.iter().map(|&c| pref[c])),
            };
        }
        self.groups[self.top].relay = if inside(root, self.top) { root } else { pref[self.top] };
        for &g in &order {
            let r = self.groups[g].relay;
            for c in self.groups[g].children.clone() {
                self.groups[c].relay = if inside(r, c) { r } else { pref[c] };
            }
        }
    }

    /// All ranks of group `g`, ascending.
    pub fn ranks_of(&self, g: usize) -> Vec<u32> {
        let mut out = self.groups[g].ranks.clone();
        let mut stack = self.groups[g].children.clone();
        while let Some(c) = stack.pop() {
            out.extend(self.groups[c].ranks.iter().copied());
            stack.extend(self.groups[c].children.iter().copied());
        }
        out.sort_unstable();
        out
    }

    /// Groups in top-down (BFS) order from the top group.
    pub fn top_down(&self) -> Vec<usize> {
        let mut order = vec![self.top];
        let mut i = 0;
        while i < order.len() {
            order.extend(self.groups[order[i]].children.iter().copied());
            i += 1;
        }
        order
    }
}

/// Widest two-way path and latency from an access vertex to every vertex below it (away from
/// `blocked`, its neighbour towards the root), as [`super::bound::bottlenecks_from`] and
/// [`super::bound::latencies_from`] give them for those vertices (same links, same order of operations), without visiting the
/// rest of the tree.
struct Sweep {
    /// (vertex, width = min(down, up) bottleneck, latency down), in visiting order.
    at: std::collections::HashMap<VertexId, (f64, f64)>,
}

impl Sweep {
    fn below(topo: &Topology, access: VertexId, blocked: VertexId) -> Sweep {
        let mut at = std::collections::HashMap::new();
        // (vertex, bottleneck down, bottleneck up, latency down)
        let mut stack = vec![(access, f64::INFINITY, f64::INFINITY, 0.0f64)];
        at.insert(access, (f64::INFINITY, 0.0));
        while let Some((u, down, up, lat)) = stack.pop() {
            for &(w, l) in topo.neighbors(u) {
                if w == blocked || at.contains_key(&w) {
                    continue;
                }
                let link = topo.link(l);
                let fwd = link.a == u;
                let (d, p, t) = (
                    down.min(link.dir(fwd).bandwidth_bps),
                    up.min(link.dir(!fwd).bandwidth_bps),
                    lat + link.dir(fwd).latency_s,
                );
                at.insert(w, (d.min(p), t));
                stack.push((w, d, p, t));
            }
        }
        Sweep { at }
    }
    fn width(&self, v: VertexId) -> f64 {
        self.at.get(&v).map_or(-1.0, |x| x.0)
    }
    fn latency(&self, v: VertexId) -> f64 {
        self.at.get(&v).map_or(f64::INFINITY, |x| x.1)
    }
}

/// Ranks in depth-first order of the tree walked from the root rank, children by name: a chain
/// in this order crosses every link once in each direction (the pipelined chain of [Shirai2007] §6.2).
pub fn dfs_order(topo: &Topology, root: u32) -> Vec<u32> {
    let nv = topo.num_vertices();
    let mut out = Vec::with_capacity(topo.num_ranks());
    let mut seen = vec![false; nv];
    let rv = topo.rank_vertex(root);
    let mut stack = vec![rv];
    seen[rv] = true;
    while let Some(u) = stack.pop() {
        if let Some(r) = topo.vertex(u).rank {
            out.push(r);
        }
        let mut nb: Vec<VertexId> = topo
            .neighbors(u)
            .iter()
            .map(|&(w, _)| w)
            .filter(|&w| !seen[w])
            .collect();
        // Reverse name order on the stack = name order when popped.
        nb.sort_by(|&a, &b| topo.vertex(b).name.cmp(&topo.vertex(a).name));
        for w in nb {
            seen[w] = true;
            stack.push(w);
        }
    }
    out
}

/// How the data reached one receiver.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayRoute {
    pub rank: u32,
    /// The rank it received from (its first receive).
    pub from: u32,
    /// Ranks that forwarded the data on the way from the root, root first, `from` last.
    pub relays: Vec<u32>,
    /// Vertex names of the path of the last transfer (`from` -> `rank`).
    pub path: Vec<String>,
    /// Switches crossed by that transfer.
    pub switches: usize,
}

/// For every receiver of `plan`: where its data came from — the chain of senders of its first
/// segment (in multi-tree plans other segments may travel other trees).
pub fn relay_routes(topo: &Topology, plan: &Plan) -> Vec<RelayRoute> {
    let n = plan.nranks as usize;
    // First sender of segment 0 per rank.
    let mut from = vec![u32::MAX; n];
    for (r, ops) in plan.ops.iter().enumerate() {
        for op in ops {
            if let super::Op::Recv { peer, segs } = *op {
                if segs.start == 0 {
                    from[r] = peer;
                    break;
                }
            }
        }
    }
    let mut out = Vec::new();
    for r in 0..n as u32 {
        if r == plan.root || from[r as usize] == u32::MAX {
            continue;
        }
        let mut chain = Vec::new();
        let mut x = from[r as usize];
        let mut guard = 0;
        while x != u32::MAX && guard <= n {
            chain.push(x);
            if x == plan.root {
                break;
            }
            x = from[x as usize];
            guard += 1;
        }
        chain.reverse();
        let (a, b) = (topo.rank_vertex(from[r as usize]), topo.rank_vertex(r));
        let mut path = vec![topo.vertex(a).name.clone()];
        let mut v = a;
        for d in topo.path(a, b) {
            let l = topo.link(d.link);
            v = if l.a == v { l.b } else { l.a };
            path.push(topo.vertex(v).name.clone());
        }
        let switches = topo
            .path(a, b)
            .iter()
            .filter(|d| {
                let l = topo.link(d.link);
                let to = if d.forward { l.b } else { l.a };
                topo.vertex(to).kind == VertexKind::Switch
            })
            .count();
        out.push(RelayRoute {
            rank: r,
            from: from[r as usize],
            relays: chain,
            path,
            switches,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::gen::{Tree, TwoClusters};

    #[test]
    fn hierarchy_of_two_clusters() {
        // 2 clusters x 3 hosts x 2 ranks; root rank 7 (cluster 1, host 0 -> ranks 6,7).
        let t = TwoClusters::paper_uniform(3).build().unwrap();
        let h = Hierarchy::new(&t, 7);
        let top = &h.groups[h.top];
        assert_eq!(top.kind, GroupKind::Switch);
        assert_eq!(top.relay, 7);
        assert_eq!(top.size, 12);
        // Top switch (the root's) has its 3 hosts and the other switch as children.
        assert_eq!(top.children.len(), 4);
        let other = top
            .children
            .iter()
            .copied()
            .find(|&c| h.groups[c].kind == GroupKind::Switch)
            .unwrap();
        assert_eq!(h.groups[other].size, 6);
        assert_eq!(h.ranks_of(other), vec![0, 1, 2, 3, 4, 5]);
        // A group's relay is the relay of the child group containing it.
        for g in &h.groups {
            if g.kind == GroupKind::Switch {
                assert!(g.children.iter().any(|&c| h.groups[c].relay == g.relay));
            }
        }
        // Every host group's relay is one of its ranks; the root's host relays through the root.
        for g in &h.groups {
            if g.kind == GroupKind::Host {
                assert!(g.ranks.contains(&g.relay));
                if g.ranks.contains(&7) {
                    assert_eq!(g.relay, 7);
                }
            }
        }
    }

    #[test]
    fn relay_prefers_the_widest_access() {
        // Two-level tree, hosts with one rank; make one host link faster by editing the tree.
        let t = Tree::oversubscribed(3, 2, 4.0).with_ranks(1).build().unwrap();
        let mut b = t.to_builder();
        // Host h004 (second switch, second host) gets a 4x faster link.
        let hv = b.vertices.iter().position(|v| v.name == "h004").unwrap();
        for l in &mut b.links {
            if l.a == hv || l.b == hv {
                l.ab.bandwidth_bps *= 4.0;
                l.ba.bandwidth_bps *= 4.0;
            }
        }
        let t = b.build().unwrap();
        let h = Hierarchy::new(&t, 0);
        let sw1 = h
            .groups
            .iter()
            .find(|g| g.kind == GroupKind::Switch && t.vertex(g.vertex).name == "s1")
            .unwrap();
        // Its rank (rank 4) relays for switch s1.
        assert_eq!(sw1.relay, 4);
        assert_eq!(t.host_of_rank(4), t.find("h004"));
    }

    /// The relays equal those chosen with whole-tree sweeps from every access vertex (what
    /// `choose_relays` did before it swept only below each access vertex), on trees whose links
    /// all differ, for roots everywhere.
    #[test]
    fn relays_match_whole_tree_sweeps() {
        use crate::plan::bound::{bottlenecks_from, latencies_from};
        let t = Tree::oversubscribed(3, 3, 4.0).with_ranks(3).build().unwrap();
        let mut b = t.to_builder();
        for (i, l) in b.links.iter_mut().enumerate() {
            let f = 1.0 + ((i * 7919) % 13) as f64 / 4.0;
            l.ab.bandwidth_bps *= f;
            l.ba.bandwidth_bps *= 1.0 + ((i * 104729) % 11) as f64 / 3.0;
            l.ab.latency_s *= f;
        }
        let t = b.build().unwrap();
        let best = |access: VertexId, cands: &[u32]| {
            let (down, up, lat) = (
                bottlenecks_from(&t, access, true),
                bottlenecks_from(&t, access, false),
                latencies_from(&t, access, true),
            );
            let w = |v: VertexId| down[v].min(up[v]);
            *cands
                .iter()
                .min_by(|&&a, &&b| {
                    let (va, vb) = (t.rank_vertex(a), t.rank_vertex(b));
                    w(vb)
                        .total_cmp(&w(va))
                        .then(lat[va].total_cmp(&lat[vb]))
                        .then(a.cmp(&b))
                })
                .unwrap()
        };
        for root in 0..t.num_ranks() as u32 {
            let h = Hierarchy::new(&t, root);
            let parent_of = |g: usize| h.groups.iter().position(|p| p.children.contains(&g));
            for (g, grp) in h.groups.iter().enumerate() {
                if grp.kind != GroupKind::Host || grp.ranks.contains(&root) {
                    continue;
                }
                let access = h.groups[parent_of(g).unwrap()].vertex;
                assert_eq!(grp.relay, best(access, &grp.ranks), "root {root}, group {g}");
            }
        }
    }

    #[test]
    fn switches_without_ranks_take_no_part() {
        // One host of 8 ranks below s0, below a core that has nothing else (a generated fat
        // tree of one leaf switch), and an empty leaf switch beside s0: the planners used to
        // panic on the empty switch groups.
        let t = Tree::fat_tree(1, 1).with_ranks(8).build().unwrap();
        let mut b = t.to_builder();
        let core = b.vertices.iter().position(|v| v.name == "core").unwrap();
        let empty = b.vertex("s-empty", crate::topology::VertexKind::Switch);
        b.link(core, empty, 1e-6, 1e9);
        let t = b.build().unwrap();
        for root in [0, 5] {
            let h = Hierarchy::new(&t, root);
            assert_eq!(h.groups[h.top].size, 8);
            for bytes in [8u64, 4096, 1 << 20] {
                let opts = crate::plan::choose::PlanOptions::default();
                let p = crate::plan::choose::plan_broadcast(&t, root, bytes, &opts).unwrap();
                p.validate().unwrap();
            }
        }
    }

    #[test]
    fn dfs_order_visits_hosts_contiguously() {
        let t = Tree::oversubscribed(2, 2, 4.0);
        let t = Tree { ranks_per_host: 2, ..t }.build().unwrap();
        let order = dfs_order(&t, 5);
        assert_eq!(order.len(), 8);
        assert_eq!(order[0], 5);
        // Host of rank 5 = ranks 4, 5: 4 comes next, then the rest of that switch.
        assert_eq!(order[1], 4);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..8).collect::<Vec<_>>());
        // Pairs (host mates) stay adjacent.
        for w in order.chunks(2) {
            assert_eq!(w[0] / 2, w[1] / 2, "{order:?}");
        }
    }
}
