//! The `groups` output format: which hosts share a leaf switch.
//!
//! This is the partition that topology inference must recover exactly (docs/design.md §4.4) and that
//! `infer --format groups` prints, so it is defined on the switch/host boundary only:
//! - a **host** is a non-switch vertex adjacent to a switch: the `node` vertices of a host-level
//!   tree or of a rank-level tree with nodes, or a `rank` hung directly on a switch in a
//!   rank-level tree without nodes (ranks below a node belong to that node's host, not listed);
//! - a **leaf switch** is a switch with at least one host adjacent (it may also have child
//!   switches); its group is its adjacent hosts. Switches with only switch neighbours give no line;
//! - a tree without switches is one group: its `node` vertices, or its ranks if it has no nodes.
//!
//! One line per group: host names sorted bytewise, separated by one space; lines sorted bytewise;
//! every line ends in `\n`.

use super::{Topology, VertexKind};

/// The groups text of a topology (see the module docs).
pub fn groups_string(t: &Topology) -> String {
    let name = |v: usize| t.vertex(v).name.clone();
    let mut lines: Vec<String> = Vec::new();
    let switches = t.vertices_of_kind(VertexKind::Switch);
    if switches.is_empty() {
        let mut hosts: Vec<String> = t.vertices_of_kind(VertexKind::Node).into_iter().map(name).collect();
        if hosts.is_empty() {
            hosts = t.vertices_of_kind(VertexKind::Rank).into_iter().map(name).collect();
        }
        hosts.sort();
        lines.push(hosts.join(" "));
    }
    for s in switches {
        let mut hosts: Vec<String> = t
            .neighbors(s)
            .iter()
            .filter(|&&(u, _)| t.vertex(u).kind != VertexKind::Switch)
            .map(|&(u, _)| name(u))
            .collect();
        if hosts.is_empty() {
            continue;
        }
        hosts.sort();
        lines.push(hosts.join(" "));
    }
    lines.sort();
    lines.into_iter().map(|l| l + "\n").collect()
}
