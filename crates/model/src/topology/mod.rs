//! The network tree every part of treecast reads and writes.
//!
//! Leaves are MPI ranks (or, in host-level trees such as those inferred from an RTT matrix, the
//! hosts themselves); internal vertices are relays: a `node` (one host's shared memory) or a
//! `switch`. Every link carries, per direction, a latency and a bandwidth, and is full or half
//! duplex (docs/design.md §2.1). Units inside the library are SI: seconds and bytes per second;
//! the file formats use microseconds and Gbit/s and convert at the edge.
//!
//! A `Topology` is immutable once built: `TopologyBuilder::build` validates that the graph is a
//! tree and precomputes a rooting (parent pointers, depths) so that paths between any two
//! vertices cost O(path length). Submodules read and write the stable file formats.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

mod model_error;
pub use model_error::TopologyError;

/// Index of a vertex in `Topology::vertices`.
pub type VertexId = usize;
/// Index of a link in `Topology::links`.
pub type LinkId = usize;

/// What a vertex is. Ranks are leaves; nodes and switches relay traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VertexKind {
    /// An MPI rank (a process). Always a leaf.
    Rank,
    /// A host: its shared memory joins the ranks running on it.
    Node,
    /// A network switch (or router).
    Switch,
}

impl fmt::Display for VertexKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VertexKind::Rank => "rank",
            VertexKind::Node => "node",
            VertexKind::Switch => "switch",
        })
    }
}

/// A vertex of the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Vertex {
    /// Unique name (host name, switch name, or e.g. `r12` for a rank).
    pub name: String,
    pub kind: VertexKind,
    /// For `Rank` vertices: the rank number (0..n-1, unique, contiguous).
    pub rank: Option<u32>,
}

/// One direction of a link.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkDir {
    /// One-way latency in seconds (>= 0).
    pub latency_s: f64,
    /// Bandwidth in bytes per second (> 0, may be `f64::INFINITY` for an ideal link).
    pub bandwidth_bps: f64,
}

impl LinkDir {
    pub fn new(latency_s: f64, bandwidth_bps: f64) -> Self {
        LinkDir {
            latency_s,
            bandwidth_bps,
        }
    }
}

/// Full duplex links carry both directions independently; half duplex links share one capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Duplex {
    #[default]
    Full,
    Half,
}

/// Fitted one-way latency distribution of a link ([Kaishima2005]), filled in by probing.
/// Times in seconds. Either model may be absent.
#[derive(Clone, Copy, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencyFit {
    /// Pareto minimum k and tail index alpha (alpha may be infinite: all samples equal).
    pub pareto: Option<(f64, f64)>,
    /// Normal mean and standard deviation.
    pub normal: Option<(f64, f64)>,
    /// Number of samples the fit used.
    pub samples: u32,
}

/// An undirected edge of the tree with per-direction parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub a: VertexId,
    pub b: VertexId,
    /// Parameters for traffic from `a` to `b`.
    pub ab: LinkDir,
    /// Parameters for traffic from `b` to `a`.
    pub ba: LinkDir,
    pub duplex: Duplex,
    /// Optional latency distribution (used by `estimate`).
    pub latency_fit: Option<LatencyFit>,
    /// For an inferred switch-to-switch link: the confidence (0..1) that it is real, from how
    /// much worse the measurements fit without it (see `infer`). `None`: given, not inferred.
    pub confidence: Option<f64>,
}

impl Link {
    /// Parameters for traversal in the given direction.
    pub fn dir(&self, forward: bool) -> LinkDir {
        if forward {
            self.ab
        } else {
            self.ba
        }
    }
}

/// A link traversed in one direction: `forward` means from `a` to `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DirLink {
    pub link: LinkId,
    pub forward: bool,
}

/// A validated tree network. Build with [`TopologyBuilder`].
#[derive(Clone, Debug)]
pub struct Topology {
    vertices: Vec<Vertex>,
    links: Vec<Link>,
    by_name: HashMap<String, VertexId>,
    adj: Vec<Vec<(VertexId, LinkId)>>,
    /// Rooting used for path queries: parent vertex and the link to it.
    parent: Vec<Option<(VertexId, LinkId)>>,
    depth: Vec<u32>,
    anchor: VertexId,
    /// rank number -> vertex
    rank_vertex: Vec<VertexId>,
    /// For an inferred tree: the confidence (0..1) of its least certain link decision.
    confidence: Option<f64>,
}

impl PartialEq for Topology {
    fn eq(&self, other: &Self) -> bool {
        self.vertices == other.vertices && self.links == other.links
    }
}

impl Topology {
    pub fn vertices(&self) -> &[Vertex] {
        &self.vertices
    }
    pub fn vertex(&self, v: VertexId) -> &Vertex {
        &self.vertices[v]
    }
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    pub fn link(&self, l: LinkId) -> &Link {
        &self.links[l]
    }
    pub fn num_vertices(&self) -> usize {
        self.vertices.len()
    }
    /// Number of rank leaves (0 for a host-level tree).
    pub fn num_ranks(&self) -> usize {
        self.rank_vertex.len()
    }
    /// Vertex of the given rank. Panics if `rank >= num_ranks()`.
    pub fn rank_vertex(&self, rank: u32) -> VertexId {
        self.rank_vertex[rank as usize]
    }
    /// Vertex id by name.
    pub fn find(&self, name: &str) -> Option<VertexId> {
        self.by_name.get(name).copied()
    }
    /// Neighbours of `v` with the connecting link.
    pub fn neighbors(&self, v: VertexId) -> &[(VertexId, LinkId)] {
        &self.adj[v]
    }
    pub fn degree(&self, v: VertexId) -> usize {
        self.adj[v].len()
    }
    pub fn is_leaf(&self, v: VertexId) -> bool {
        self.adj[v].len() <= 1
    }
    /// The vertex the internal rooting hangs from (the first switch, else the first node, else
    /// vertex 0). Used for canonical traversals.
    pub fn anchor(&self) -> VertexId {
        self.anchor
    }
    /// Parent of `v` in the anchor rooting, with the connecting link.
    pub fn parent(&self, v: VertexId) -> Option<(VertexId, LinkId)> {
        self.parent[v]
    }
    /// Depth of `v` below the anchor (anchor = 0).
    pub fn depth(&self, v: VertexId) -> u32 {
        self.depth[v]
    }
    /// Children of `v` in the anchor rooting, in canonical (name) order.
    pub fn children(&self, v: VertexId) -> Vec<VertexId> {
        let mut c: Vec<VertexId> = self.adj[v]
            .iter()
            .map(|&(u, _)| u)
            .filter(|&u| self.parent[u].map(|(p, _)| p) == Some(v))
            .collect();
        c.sort_by(|&x, &y| self.vertices[x].name.cmp(&self.vertices[y].name));
        c
    }

    /// Leaves of the tree that are not switches (ranks, or the hosts of a host-level tree), in
    /// vertex order.
    pub fn leaves(&self) -> Vec<VertexId> {
        (0..self.vertices.len())
            .filter(|&v| self.adj[v].len() <= 1 && self.vertices[v].kind != VertexKind::Switch)
            .collect()
    }

    /// All vertices of `kind`, in vertex order.
    pub fn vertices_of_kind(&self, kind: VertexKind) -> Vec<VertexId> {
        (0..self.vertices.len())
            .filter(|&v| self.vertices[v].kind == kind)
            .collect()
    }

    /// The directed links from `from` to `to` along the unique tree path, in traversal order.
    pub fn path(&self, from: VertexId, to: VertexId) -> Vec<DirLink> {
        let mut out = Vec::new();
        self.path_into(from, to, &mut out);
        out
    }

    /// [`Self::path`] written into `out` (cleared first), so that callers asking for many
    /// short paths (the planners' routes: hundreds of thousands at 16,384 ranks) reuse one
    /// buffer: the links up from `from` to the common ancestor, then those up from `to`,
    /// reversed in place.
    pub fn path_into(&self, from: VertexId, to: VertexId, out: &mut Vec<DirLink>) {
        out.clear();
        let w = self.lca(from, to);
        out.reserve((self.depth[from] + self.depth[to] - 2 * self.depth[w]) as usize);
        let mut u = from;
        while u != w {
            let (p, l) = self.parent[u].expect("a vertex below the common ancestor has a parent");
            out.push(self.dir_link(l, u, p));
            u = p;
        }
        let up = out.len();
        let mut v = to;
        while v != w {
            let (p, l) = self.parent[v].expect("a vertex below the common ancestor has a parent");
            out.push(self.dir_link(l, p, v));
            v = p;
        }
        out[up..].reverse();
    }

    /// Lowest common ancestor in the anchor rooting.
    pub fn lca(&self, mut u: VertexId, mut v: VertexId) -> VertexId {
        while self.depth[u] > self.depth[v] {
            u = self.parent[u].unwrap().0;
        }
        while self.depth[v] > self.depth[u] {
            v = self.parent[v].unwrap().0;
        }
        while u != v {
            u = self.parent[u].unwrap().0;
            v = self.parent[v].unwrap().0;
        }
        u
    }

    fn dir_link(&self, l: LinkId, from: VertexId, _to: VertexId) -> DirLink {
        DirLink {
            link: l,
            forward: self.links[l].a == from,
        }
    }

    /// Parameters of a directed link.
    pub fn dir_params(&self, d: DirLink) -> LinkDir {
        self.links[d.link].dir(d.forward)
    }

    /// Sum of one-way latencies along the path (seconds).
    pub fn path_latency(&self, from: VertexId, to: VertexId) -> f64 {
        self.path(from, to).iter().map(|&d| self.dir_params(d).latency_s).sum()
    }

    /// Minimum bandwidth along the path (bytes/s); infinite for an empty path.
    pub fn path_bandwidth(&self, from: VertexId, to: VertexId) -> f64 {
        self.path(from, to)
            .iter()
            .map(|&d| self.dir_params(d).bandwidth_bps)
            .fold(f64::INFINITY, f64::min)
    }

    /// Idle-network time for `bytes` from `from` to `to`: sum of latencies + bytes / min bandwidth.
    pub fn transfer_time(&self, from: VertexId, to: VertexId, bytes: f64) -> f64 {
        let bw = self.path_bandwidth(from, to);
        let lat = self.path_latency(from, to);
        if bytes == 0.0 {
            lat
        } else {
            lat + bytes / bw
        }
    }

    /// Round-trip time of a zero-byte message between two vertices (2 x path latency when the
    /// link latencies are symmetric; asymmetric links contribute both directions).
    pub fn rtt(&self, a: VertexId, b: VertexId) -> f64 {
        self.path_latency(a, b) + self.path_latency(b, a)
    }

    /// All vertices in the subtree below `v` (including `v`) in the anchor rooting.
    pub fn subtree(&self, v: VertexId) -> Vec<VertexId> {
        let mut out = vec![v];
        let mut i = 0;
        while i < out.len() {
            let u = out[i];
            for &(w, _) in &self.adj[u] {
                if self.parent[w].map(|(p, _)| p) == Some(u) {
                    out.push(w);
                }
            }
            i += 1;
        }
        out
    }

    /// Ranks in the subtree below `v`, sorted.
    pub fn ranks_below(&self, v: VertexId) -> Vec<u32> {
        let mut r: Vec<u32> = self
            .subtree(v)
            .into_iter()
            .filter_map(|u| self.vertices[u].rank)
            .collect();
        r.sort_unstable();
        r
    }

    /// The node (host) vertex a rank hangs below, if its parent is a node.
    pub fn host_of_rank(&self, rank: u32) -> Option<VertexId> {
        let v = self.rank_vertex(rank);
        self.adj[v]
            .iter()
            .map(|&(u, _)| u)
            .find(|&u| self.vertices[u].kind == VertexKind::Node)
    }

    /// Rebuild as a builder (to edit or extend).
    pub fn to_builder(&self) -> TopologyBuilder {
        TopologyBuilder {
            vertices: self.vertices.clone(),
            links: self.links.clone(),
            confidence: self.confidence,
        }
    }

    /// For an inferred tree, the confidence (0..1) of its least certain link decision (a link
    /// kept, or one contracted for lack of evidence); `None` for a tree that was given.
    pub fn confidence(&self) -> Option<f64> {
        self.confidence
    }
}

/// Collects vertices and links, then validates them into a [`Topology`].
#[derive(Clone, Debug, Default)]
pub struct TopologyBuilder {
    pub vertices: Vec<Vertex>,
    pub links: Vec<Link>,
    /// See [`Topology::confidence`].
    pub confidence: Option<f64>,
}

impl TopologyBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a vertex and return its id. Names are checked for uniqueness in `build`.
    pub fn vertex(&mut self, name: impl Into<String>, kind: VertexKind) -> VertexId {
        self.vertices.push(Vertex {
            name: name.into(),
            kind,
            rank: None,
        });
        self.vertices.len() - 1
    }

    /// Add a rank leaf named `r<rank>`.
    pub fn rank(&mut self, rank: u32) -> VertexId {
        self.vertices.push(Vertex {
            name: format!("r{rank}"),
            kind: VertexKind::Rank,
            rank: Some(rank),
        });
        self.vertices.len() - 1
    }

    /// Add a symmetric full-duplex link.
    pub fn link(&mut self, a: VertexId, b: VertexId, latency_s: f64, bandwidth_bps: f64) -> LinkId {
        let d = LinkDir::new(latency_s, bandwidth_bps);
        self.link_full(a, b, d, d, Duplex::Full)
    }

    /// Add a link with explicit per-direction parameters and duplex mode.
    pub fn link_full(&mut self, a: VertexId, b: VertexId, ab: LinkDir, ba: LinkDir, duplex: Duplex) -> LinkId {
        self.links.push(Link {
            a,
            b,
            ab,
            ba,
            duplex,
            latency_fit: None,
            confidence: None,
        });
        self.links.len() - 1
    }

    /// Validate and freeze. Errors name the offending vertex or link.
    pub fn build(self) -> Result<Topology, TopologyError> {
        let TopologyBuilder {
            vertices,
            links,
            confidence,
        } = self;
        let n = vertices.len();
        if n == 0 {
            return Err(TopologyError::new("topology has no vertices"));
        }
        let mut by_name = HashMap::with_capacity(n);
        for (i, v) in vertices.iter().enumerate() {
            if v.name.is_empty() {
                return Err(TopologyError::new(format!("vertex #{i} has an empty name")));
            }
            if by_name.insert(v.name.clone(), i).is_some() {
                return Err(TopologyError::new(format!("duplicate vertex name '{}'", v.name)));
            }
            match (v.kind, v.rank) {
                (VertexKind::Rank, None) => {
                    return Err(TopologyError::new(format!(
                        "rank vertex '{}' has no rank number",
                        v.name
                    )))
                }
                (k, Some(_)) if k != VertexKind::Rank => {
                    return Err(TopologyError::new(format!(
                        "{k} vertex '{}' must not carry a rank number",
                        v.name
                    )))
                }
                _ => {}
            }
        }
        let mut adj: Vec<Vec<(VertexId, LinkId)>> = vec![Vec::new(); n];
        for (i, l) in links.iter().enumerate() {
            let name = |v: VertexId| vertices.get(v).map(|x| x.name.as_str()).unwrap_or("?");
            if l.a >= n || l.b >= n {
                return Err(TopologyError::new(format!("link #{i} refers to an unknown vertex")));
            }
            if l.a == l.b {
                return Err(TopologyError::new(format!("link #{i} joins '{}' to itself", name(l.a))));
            }
            for (dir, d) in [("a->b", l.ab), ("b->a", l.ba)] {
                if d.latency_s.is_nan() || d.latency_s < 0.0 || d.latency_s.is_infinite() {
                    return Err(TopologyError::new(format!(
                        "link {}-{} ({dir}): latency must be a finite number >= 0, got {}",
                        name(l.a),
                        name(l.b),
                        d.latency_s
                    )));
                }
                if d.bandwidth_bps.is_nan() || d.bandwidth_bps <= 0.0 {
                    return Err(TopologyError::new(format!(
                        "link {}-{} ({dir}): bandwidth must be > 0, got {}",
                        name(l.a),
                        name(l.b),
                        d.bandwidth_bps
                    )));
                }
            }
            adj[l.a].push((l.b, i));
            adj[l.b].push((l.a, i));
        }
        // Duplicate edges between the same pair form a cycle.
        if links.len() + 1 != n {
            // Find a helpful message: cycle vs disconnected.
            if links.len() + 1 > n {
                return Err(TopologyError::new(format!(
                    "not a tree: {} links for {} vertices (there is a cycle)",
                    links.len(),
                    n
                )));
            }
        }
        for (v, vert) in vertices.iter().enumerate() {
            if vert.kind == VertexKind::Rank && adj[v].len() > 1 {
                return Err(TopologyError::new(format!(
                    "rank vertex '{}' must be a leaf, has {} links",
                    vert.name,
                    adj[v].len()
                )));
            }
        }
        let anchor = vertices
            .iter()
            .position(|v| v.kind == VertexKind::Switch)
            .or_else(|| vertices.iter().position(|v| v.kind == VertexKind::Node))
            .unwrap_or(0);
        // BFS from the anchor: parent pointers, depth, and cycle / connectivity checks.
        let mut parent: Vec<Option<(VertexId, LinkId)>> = vec![None; n];
        let mut depth = vec![u32::MAX; n];
        depth[anchor] = 0;
        let mut queue = std::collections::VecDeque::from([anchor]);
        while let Some(u) = queue.pop_front() {
            for &(w, l) in &adj[u] {
                if parent[u].map(|(_, pl)| pl) == Some(l) {
                    continue;
                }
                if depth[w] != u32::MAX {
                    return Err(TopologyError::new(format!(
                        "not a tree: cycle through '{}' and '{}'",
                        vertices[u].name, vertices[w].name
                    )));
                }
                depth[w] = depth[u] + 1;
                parent[w] = Some((u, l));
                queue.push_back(w);
            }
        }
        if let Some(v) = depth.iter().position(|&d| d == u32::MAX) {
            return Err(TopologyError::new(format!(
                "not a tree: vertex '{}' is not connected to '{}'",
                vertices[v].name, vertices[anchor].name
            )));
        }
        // Ranks: unique and contiguous 0..r.
        let mut ranks: Vec<(u32, VertexId)> = vertices
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.rank.map(|r| (r, i)))
            .collect();
        ranks.sort_unstable();
        let mut rank_vertex = Vec::with_capacity(ranks.len());
        for (i, &(r, v)) in ranks.iter().enumerate() {
            if r as usize != i {
                if i > 0 && ranks[i - 1].0 == r {
                    return Err(TopologyError::new(format!("rank {r} appears twice")));
                }
                return Err(TopologyError::new(format!(
                    "ranks must be numbered 0..{} without gaps; rank {i} is missing",
                    ranks.len()
                )));
            }
            rank_vertex.push(v);
        }
        Ok(Topology {
            vertices,
            links,
            by_name,
            adj,
            parent,
            depth,
            anchor,
            rank_vertex,
            confidence,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sw - n0 - {r0, r1}; sw - n1 - {r2}
    fn small() -> Topology {
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let n0 = b.vertex("n0", VertexKind::Node);
        let n1 = b.vertex("n1", VertexKind::Node);
        let r0 = b.rank(0);
        let r1 = b.rank(1);
        let r2 = b.rank(2);
        b.link(n0, sw, 2e-6, 1e9);
        b.link(n1, sw, 3e-6, 5e8);
        b.link(r0, n0, 1e-7, 1e10);
        b.link(r1, n0, 1e-7, 1e10);
        b.link(r2, n1, 1e-7, 1e10);
        b.build().unwrap()
    }

    #[test]
    fn path_and_transfer_time() {
        let t = small();
        let (r0, r2) = (t.rank_vertex(0), t.rank_vertex(2));
        let p = t.path(r0, r2);
        assert_eq!(p.len(), 4);
        let lat = t.path_latency(r0, r2);
        assert!((lat - (1e-7 + 2e-6 + 3e-6 + 1e-7)).abs() < 1e-15);
        assert_eq!(t.path_bandwidth(r0, r2), 5e8);
        assert!((t.transfer_time(r0, r2, 1e6) - (lat + 1e6 / 5e8)).abs() < 1e-12);
        // Reverse path uses the same links in the other direction.
        let q = t.path(r2, r0);
        assert_eq!(q.len(), 4);
        assert_eq!(q[0].link, p[3].link);
        assert_ne!(q[0].forward, p[3].forward);
        assert_eq!(t.path(r0, r0), vec![]);
        assert_eq!(t.host_of_rank(1), t.find("n0"));
        assert_eq!(t.ranks_below(t.find("n0").unwrap()), vec![0, 1]);
        assert_eq!(t.lca(r0, t.rank_vertex(1)), t.find("n0").unwrap());
    }

    #[test]
    fn rejects_bad_graphs() {
        let mut b = TopologyBuilder::new();
        let a = b.vertex("a", VertexKind::Switch);
        let c = b.vertex("c", VertexKind::Switch);
        let _d = b.vertex("d", VertexKind::Node);
        b.link(a, c, 0.0, 1.0);
        let e = b.build().unwrap_err();
        assert!(e.to_string().contains("not connected"), "{e}");

        let mut b = TopologyBuilder::new();
        let a = b.vertex("a", VertexKind::Switch);
        let c = b.vertex("c", VertexKind::Switch);
        b.link(a, c, 0.0, 1.0);
        b.link(c, a, 0.0, 1.0);
        assert!(b.build().unwrap_err().to_string().contains("cycle"));

        let mut b = TopologyBuilder::new();
        let a = b.vertex("a", VertexKind::Switch);
        let c = b.vertex("a", VertexKind::Switch);
        b.link(a, c, 0.0, 1.0);
        assert!(b.build().unwrap_err().to_string().contains("duplicate"));

        let mut b = TopologyBuilder::new();
        let a = b.vertex("a", VertexKind::Switch);
        let c = b.vertex("c", VertexKind::Switch);
        b.link(a, c, f64::NAN, 1.0);
        assert!(b.build().unwrap_err().to_string().contains("latency"));

        let mut b = TopologyBuilder::new();
        let a = b.vertex("a", VertexKind::Switch);
        let r = b.rank(1);
        b.link(a, r, 0.0, 1.0);
        assert!(b.build().unwrap_err().to_string().contains("rank 0 is missing"));
    }
}
mod decimal;
pub mod dot;
pub mod gen;
mod groups;
pub mod hostlist;
pub mod io;
pub mod json;
mod jsontext;
pub mod mpich_coords;
mod normal_form;
pub mod rtt_csv;
pub mod slurm;
pub mod text;
pub use groups::groups_string;
pub use io::{load_file, save_file, Format, RttMatrix};
pub use normal_form::{CanonicalForm, CanonicalLink};

#[cfg(test)]
mod io_tests;
