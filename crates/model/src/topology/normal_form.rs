//! Name-based normal form of a topology, independent of vertex and link order.
//!
//! Two files describing the same tree list vertices and links in different orders (a Slurm file is
//! read top-down, a JSON file keeps the author's order, a link may be written `a-b` or `b-a`).
//! `Topology::eq` compares the stored order; round-trip tests and tools that ask "is this the same
//! network?" need the order-free comparison below.

use super::{Duplex, LatencyFit, LinkDir, Topology, VertexKind};

/// A link oriented so that `a < b` by name, its directions swapped accordingly.
#[derive(Clone, Debug, PartialEq)]
pub struct CanonicalLink {
    pub a: String,
    pub b: String,
    /// Parameters for traffic from `a` to `b`.
    pub ab: LinkDir,
    /// Parameters for traffic from `b` to `a`.
    pub ba: LinkDir,
    pub duplex: Duplex,
    pub latency_fit: Option<LatencyFit>,
    pub confidence: Option<f64>,
}

/// Vertices sorted by name and links sorted by their (oriented) endpoint names. Since vertex
/// names are unique, two topologies are the same network exactly when their canonical forms are
/// equal.
#[derive(Clone, Debug, PartialEq)]
pub struct CanonicalForm {
    /// `(name, kind, rank)` sorted by name.
    pub vertices: Vec<(String, VertexKind, Option<u32>)>,
    pub links: Vec<CanonicalLink>,
}

impl Topology {
    /// The order-independent normal form (see [`CanonicalForm`]).
    pub fn canonical_form(&self) -> CanonicalForm {
        let mut vertices: Vec<(String, VertexKind, Option<u32>)> = self
            .vertices()
            .iter()
            .map(|v| (v.name.clone(), v.kind, v.rank))
            .collect();
        vertices.sort_by(|x, y| x.0.cmp(&y.0));
        let mut links: Vec<CanonicalLink> = self
            .links()
            .iter()
            .map(|l| {
                let (na, nb) = (&self.vertex(l.a).name, &self.vertex(l.b).name);
                let (a, b, ab, ba) = if na <= nb {
                    (na, nb, l.ab, l.ba)
                } else {
                    (nb, na, l.ba, l.ab)
                };
                CanonicalLink {
                    a: a.clone(),
                    b: b.clone(),
                    ab,
                    ba,
                    duplex: l.duplex,
                    latency_fit: l.latency_fit,
                    confidence: l.confidence,
                }
            })
            .collect();
        links.sort_by(|x, y| (&x.a, &x.b).cmp(&(&y.a, &y.b)));
        CanonicalForm { vertices, links }
    }

    /// Same network (names, kinds, ranks, links and all their parameters), in any vertex or link
    /// order and with links in either orientation.
    pub fn canonical_eq(&self, other: &Topology) -> bool {
        self.num_vertices() == other.num_vertices()
            && self.links().len() == other.links().len()
            && self.canonical_form() == other.canonical_form()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LinkDir, TopologyBuilder, VertexKind};

    #[test]
    fn order_and_orientation_do_not_matter_but_parameters_do() {
        let mut b = TopologyBuilder::new();
        let s = b.vertex("s", VertexKind::Switch);
        let h1 = b.vertex("h1", VertexKind::Node);
        let h2 = b.vertex("h2", VertexKind::Node);
        let fast = LinkDir::new(1e-6, 1e9);
        let slow = LinkDir::new(2e-6, 1e8);
        b.link_full(s, h1, fast, slow, super::Duplex::Full);
        b.link(h2, s, 1e-6, 1e9);
        let t1 = b.build().unwrap();

        // Same network: other vertex order, links reversed and listed the other way round.
        let mut b = TopologyBuilder::new();
        let h2 = b.vertex("h2", VertexKind::Node);
        let h1 = b.vertex("h1", VertexKind::Node);
        let s = b.vertex("s", VertexKind::Switch);
        b.link(s, h2, 1e-6, 1e9);
        b.link_full(h1, s, slow, fast, super::Duplex::Full);
        let t2 = b.build().unwrap();
        assert_ne!(t1, t2);
        assert!(t1.canonical_eq(&t2));

        // Swapping the directions of the asymmetric link makes it a different network.
        let mut b = t2.to_builder();
        let l = &mut b.links[1];
        std::mem::swap(&mut l.ab, &mut l.ba);
        assert!(!t1.canonical_eq(&b.build().unwrap()));

        // So does half duplex.
        let mut b = t2.to_builder();
        b.links[0].duplex = super::Duplex::Half;
        assert!(!t1.canonical_eq(&b.build().unwrap()));
    }
}
