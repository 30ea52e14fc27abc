//! From the working tree to a [`Topology`], and from a host-level tree to a rank-level one.

use super::fit::fit_host_link;
use super::store::Store;
use super::tree::WorkTree;
use crate::topology::{Duplex, LinkDir, Topology, TopologyBuilder, TopologyError, VertexKind};
use std::collections::{HashMap, HashSet};

/// Build the host-level topology: switches named `sw0, sw1, ...` (in a canonical order: depth
/// first from the root, children by their smallest host name), hosts as `node` leaves named by
/// host. Links are symmetric and full duplex; their bandwidth is the bandwidth map's value, or
/// infinite when no map was built (latency-only planning). Host links carry latency fits.
pub(crate) fn to_topology(
    t: &WorkTree,
    names: &[String],
    store: &Store,
    bandwidth: Option<&HashMap<usize, f64>>,
) -> Result<Topology, TopologyError> {
    let mut b = TopologyBuilder::new();
    let hosts: Vec<usize> = t.hosts().collect();
    if hosts.len() == 1 {
        b.vertex(names[hosts[0]].clone(), VertexKind::Node);
        return b.build();
    }
    let taken: HashSet<&str> = names.iter().map(|s| s.as_str()).collect();
    let mut prefix = String::from("sw");
    while taken.iter().any(|n| n.starts_with(&prefix)) {
        prefix.insert(0, '_');
    }
    let min_name = min_host_names(t, names);
    let root = t.root();
    let mut id: HashMap<usize, usize> = HashMap::new();
    let mut stack = vec![root];
    let mut switches = 0usize;
    let mut order = Vec::new();
    while let Some(v) = stack.pop() {
        let vid = match t.host_of(v) {
            Some(h) => b.vertex(names[h].clone(), VertexKind::Node),
            None => {
                switches += 1;
                b.vertex(format!("{prefix}{}", switches - 1), VertexKind::Switch)
            }
        };
        id.insert(v, vid);
        order.push(v);
        let mut kids: Vec<usize> = t.children(v).to_vec();
        kids.sort_by(|x, y| min_name[x].cmp(&min_name[y]));
        stack.extend(kids.into_iter().rev());
    }
    let fit_of = |h: usize, leaf: f64| {
        fit_host_link(
            leaf,
            store
                .raw
                .iter()
                .filter(|m| (m.a == h || m.b == h) && !store.is_bad(m.a, m.b)),
        )
    };
    if t.is_host(root) {
        // Two hosts and no switch: a switch in the middle (RTTs cannot tell where it is).
        let c = t.children(root)[0];
        let s = b.vertex(format!("{prefix}0"), VertexKind::Switch);
        let bw = bandwidth.and_then(|m| m.get(&c).copied()).unwrap_or(f64::INFINITY);
        for (v, h) in [(root, t.host_of(root).unwrap()), (c, t.host_of(c).unwrap())] {
            let half = t.len(c) / 2.0;
            let l = b.link(id[&v], s, half, bw);
            b.links[l].latency_fit = fit_of(h, half);
        }
        return b.build();
    }
    for &v in &order {
        let Some(p) = t.parent(v) else { continue };
        let lat = t.len(v);
        let bw = bandwidth.and_then(|m| m.get(&v).copied()).unwrap_or(f64::INFINITY);
        let d = LinkDir::new(lat, bw);
        let l = b.link_full(id[&v], id[&p], d, d, Duplex::Full);
        if let Some(h) = t.host_of(v) {
            b.links[l].latency_fit = fit_of(h, lat);
        }
    }
    b.build()
}

/// Smallest host name below every vertex (for canonical ordering).
fn min_host_names(t: &WorkTree, names: &[String]) -> HashMap<usize, String> {
    let mut out: HashMap<usize, String> = HashMap::new();
    let mut post = Vec::new();
    let mut stack = vec![t.root()];
    while let Some(v) = stack.pop() {
        post.push(v);
        stack.extend(t.children(v).iter().copied());
    }
    for &v in post.iter().rev() {
        let mut best: Option<String> = t.host_of(v).map(|h| names[h].clone());
        for c in t.children(v) {
            let m = &out[c];
            if best.as_ref().is_none_or(|b| m < b) {
                best = Some(m.clone());
            }
        }
        out.insert(v, best.unwrap_or_default());
    }
    out
}

/// Hang ranks below the hosts of a host-level tree: rank `r` becomes a `rank` leaf below the
/// `node` named `rank_hosts[r]`, joined by `rank_link` (intra-host latency and bandwidth).
/// Hosts without ranks stay as they are.
pub fn with_ranks(host_tree: &Topology, rank_hosts: &[String], rank_link: LinkDir) -> Result<Topology, TopologyError> {
    let mut b = host_tree.to_builder();
    for (r, host) in rank_hosts.iter().enumerate() {
        let node = host_tree
            .find(host)
            .filter(|&v| host_tree.vertex(v).kind == VertexKind::Node)
            .ok_or_else(|| TopologyError::new(format!("rank {r}: host '{host}' is not a node of the tree")))?;
        let rv = b.rank(r as u32);
        b.link_full(rv, node, rank_link, rank_link, Duplex::Full);
    }
    b.build()
}
