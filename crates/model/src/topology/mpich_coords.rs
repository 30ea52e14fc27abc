//! MPICH's coordinates file (`MPIR_CVAR_COORDINATES_FILE`), written from a rank-level tree.
//!
//! MPICH's topology-aware broadcast trees (`MPIR_CVAR_BCAST_TREE_TYPE=topology_aware`,
//! `topology_aware_k`, `topology_wave`) read each world rank's place in a three-level hierarchy
//! from this file instead of measuring anything:
//!
//! ```text
//! # rank: group_id switch_id port
//! 0: 0 0 -1
//! 1: 0 1 -1
//! ```
//!
//! MPICH skips the first line, reads `RANK: GROUP SWITCH PORT` for every rank of
//! `MPI_COMM_WORLD` and builds world -> groups -> switches -> ranks (the port is not used by
//! the trees; `-1` as in MPICH's own example). Its trees send across the top level once per
//! group, then once per switch inside a group.
//!
//! Mapping a tree of any depth onto those three levels: the chain of vertices from the top
//! (the anchor, [`Topology::anchor`]) down to a rank, without the top and the rank itself, ends
//! in the vertices closest to the rank. The last is the rank's **switch** (its host when the
//! tree has hosts, else its leaf switch) and the one before it its **group** (the leaf switch
//! above that host, or the switch above that leaf switch); a missing level is the top. On the
//! usual two-level cluster (core, leaf switches, hosts) groups are leaf switches and switches
//! are hosts, so the oversubscribed uplinks are crossed once per leaf switch. Deeper levels
//! (pods above leaf switches) are not expressible and are dropped. Identifiers are dense, in
//! order of first appearance by rank.
//!
//! Ranks are world ranks: write the file from a tree inferred on `MPI_COMM_WORLD`
//! (`treecast probe --save`), and run the job with the same rank placement.

use super::{Topology, TopologyError, VertexId, VertexKind};
use std::collections::HashMap;
use std::fmt::Write as _;

/// The coordinates file of a rank-level topology (see the module docs). Errors when the
/// topology has no ranks (a host-level tree, e.g. read from Slurm's topology.conf, says nothing
/// about which rank runs where).
pub fn to_string(t: &Topology) -> Result<String, TopologyError> {
    let n = t.num_ranks();
    if n == 0 {
        return Err(TopologyError::new(
            "mpich-coords: the topology has no ranks (a host-level tree); MPICH needs every \
             world rank's place: write it from a rank-level tree, e.g. `treecast probe --save`",
        ));
    }
    let top = t.anchor();
    let mut ids: [HashMap<VertexId, usize>; 2] = [HashMap::new(), HashMap::new()];
    let mut out = String::from("# rank: group_id switch_id port (MPIR_CVAR_COORDINATES_FILE, written by treecast)\n");
    for r in 0..n as u32 {
        let chain = chain_above(t, t.rank_vertex(r), top);
        let switch = chain.last().copied().unwrap_or(top);
        let group = chain.len().checked_sub(2).map_or(top, |i| chain[i]);
        let mut id = |level: usize, v: VertexId| {
            let next = ids[level].len();
            *ids[level].entry(v).or_insert(next)
        };
        let (g, s) = (id(0, group), id(1, switch));
        let _ = writeln!(out, "{r}: {g} {s} -1");
    }
    Ok(out)
}

/// The vertices strictly between `top` and `v` on their path, top-down, without rank vertices
/// (ranks below other ranks do not occur; a rank is never a level of the hierarchy).
fn chain_above(t: &Topology, v: VertexId, top: VertexId) -> Vec<VertexId> {
    let mut chain = Vec::new();
    let mut u = v;
    while let Some((p, _)) = t.parent(u) {
        if p == top {
            break;
        }
        if t.vertex(p).kind != VertexKind::Rank {
            chain.push(p);
        }
        u = p;
    }
    chain.reverse();
    chain
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::gen::Tree;

    fn lines(text: &str) -> Vec<(u32, usize, usize)> {
        text.lines()
            .skip(1)
            .map(|l| {
                let (r, rest) = l.split_once(':').unwrap();
                let f: Vec<i64> = rest.split_whitespace().map(|x| x.parse().unwrap()).collect();
                assert_eq!(f.len(), 3, "{l}");
                assert_eq!(f[2], -1);
                (r.parse().unwrap(), f[0] as usize, f[1] as usize)
            })
            .collect()
    }

    /// Two leaf switches of two hosts with two ranks each: groups are the leaf switches,
    /// switches the hosts, and every rank is listed once, in order.
    #[test]
    fn two_level_tree_groups_are_leaf_switches_and_switches_are_hosts() {
        let t = Tree::oversubscribed(2, 2, 2.0).with_ranks(2).build().unwrap();
        let text = to_string(&t).unwrap();
        assert!(text.starts_with('#'), "MPICH skips the first line: {text}");
        let got = lines(&text);
        assert_eq!(got.len(), t.num_ranks());
        for (i, &(r, g, s)) in got.iter().enumerate() {
            assert_eq!(r as usize, i);
            let host = t.host_of_rank(r).unwrap();
            let leaf = t.parent(host).unwrap().0;
            // Same group exactly when the same leaf switch; same switch exactly when same host.
            for &(r2, g2, s2) in &got {
                let host2 = t.host_of_rank(r2).unwrap();
                assert_eq!(g == g2, leaf == t.parent(host2).unwrap().0, "ranks {r} {r2}");
                assert_eq!(s == s2, host == host2, "ranks {r} {r2}");
            }
        }
    }

    #[test]
    fn a_tree_without_ranks_is_an_error_naming_the_fix() {
        let t = Tree::oversubscribed(2, 2, 2.0).build().unwrap();
        assert_eq!(t.num_ranks(), 0);
        let e = to_string(&t).unwrap_err().to_string();
        assert!(e.contains("no ranks") && e.contains("probe"), "{e}");
    }
}
