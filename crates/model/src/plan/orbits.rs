//! Which ranks the network cannot tell apart: rank orbits under the topology's symmetries.
//!
//! Two ranks are in one orbit when an automorphism of the topology tree maps one onto the other
//! while keeping every vertex's kind and every link's parameters (both directions' latency and
//! bandwidth, duplex mode) — rank ids and vertex names play no part. A broadcast from either
//! root then faces the same network: the planners' predictions for one hold for the other, so
//! the choice made for one root serves the whole orbit ([`super::local::LocalPlanner`]). On a
//! generated two-level tree every rank is in one orbit; on a real machine, ranks on identical
//! hosts under identical switches are.
//!
//! Computed with the AHU labelling of [`super::isomorphism`] rooted at the tree's centroid (which
//! every automorphism fixes), in O(vertices) plus a sort of the distinct link parameters.

use super::isomorphism::Labeller;
use crate::topology::Topology;
use std::collections::HashMap;

/// Orbit id of every rank, and the smallest rank of every orbit (its representative).
#[derive(Clone, Debug)]
pub struct RankOrbits {
    orbit: Vec<u32>,
    representative: HashMap<u32, u32>,
}

impl RankOrbits {
    pub fn new(topo: &Topology) -> RankOrbits {
        let nv = topo.num_vertices();
        let links: Vec<(u32, u32)> = topo.links().iter().map(|l| (l.a as u32, l.b as u32)).collect();
        let mut lab = Labeller::new(nv, &links);
        let root = lab.centroid_root();
        lab.set_root(root);
        // Own label: the vertex kind and the link to its parent, seen from the parent (the
        // virtual root of an edge rooting, at index nv, has a label of its own).
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut own = vec![0u32; nv + 1];
        for (v, own_v) in own.iter_mut().enumerate() {
            let key = if v == nv {
                "virtual root".to_string()
            } else {
                let kind = format!("{:?}", topo.vertex(v).kind);
                match lab.parent_link(v as u32) {
                    u32::MAX => kind,
                    l => {
                        let link = topo.link(l as usize);
                        let (down, up) = if link.b == v {
                            (link.ab, link.ba)
                        } else {
                            (link.ba, link.ab)
                        };
                        format!(
                            "{kind} {:x} {:x} {:x} {:x} {:?}",
                            down.latency_s.to_bits(),
                            down.bandwidth_bps.to_bits(),
                            up.latency_s.to_bits(),
                            up.bandwidth_bps.to_bits(),
                            link.duplex
                        )
                    }
                }
            };
            let next = ids.len() as u32;
            *own_v = *ids.entry(key).or_insert(next);
        }
        let mut class = Vec::new();
        let mut vertex_orbit = Vec::new();
        lab.classes(&own, ids.len(), &mut class);
        lab.orbits(&class, &mut vertex_orbit);
        let orbit: Vec<u32> = (0..topo.num_ranks() as u32)
            .map(|r| vertex_orbit[topo.rank_vertex(r)])
            .collect();
        let mut representative = HashMap::new();
        for (r, &o) in orbit.iter().enumerate() {
            representative.entry(o).or_insert(r as u32);
        }
        RankOrbits { orbit, representative }
    }

    /// The smallest rank in `rank`'s orbit (`rank` itself if out of range).
    pub fn representative(&self, rank: u32) -> u32 {
        self.orbit
            .get(rank as usize)
            .and_then(|o| self.representative.get(o))
            .copied()
            .unwrap_or(rank)
    }

    /// Number of orbits.
    pub fn count(&self) -> usize {
        self.representative.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::gen::{Tree, TwoClusters};

    #[test]
    fn a_generated_tree_is_one_orbit_until_a_link_differs() {
        let t = Tree::oversubscribed(3, 3, 4.0).with_ranks(2).build().unwrap();
        let o = RankOrbits::new(&t);
        assert_eq!(o.count(), 1);
        assert_eq!(o.representative(17), 0);
        // A faster link to one host sets its two ranks apart from the others.
        let mut b = t.to_builder();
        let h = b.vertices.iter().position(|v| v.name == "h004").unwrap();
        for l in &mut b.links {
            if l.a == h || l.b == h {
                l.ab.bandwidth_bps *= 2.0;
            }
        }
        let t = b.build().unwrap();
        let o = RankOrbits::new(&t);
        let on_h: Vec<u32> = (0..t.num_ranks() as u32)
            .filter(|&r| t.host_of_rank(r) == Some(h))
            .collect();
        assert_eq!(on_h.len(), 2);
        assert_eq!(o.representative(on_h[1]), on_h[0]);
        assert_ne!(o.representative(on_h[0]), o.representative(0));
        assert!(o.count() >= 2);
    }

    #[test]
    fn unequal_clusters_are_different_orbits() {
        let t = TwoClusters::paper_nonuniform(3).build().unwrap();
        let o = RankOrbits::new(&t);
        assert!(o.count() >= 2);
        // Every representative is the smallest of its orbit.
        for r in 0..t.num_ranks() as u32 {
            assert!(o.representative(r) <= r);
            assert_eq!(o.representative(o.representative(r)), o.representative(r));
        }
    }
}
