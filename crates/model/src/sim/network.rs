//! The simulator's view of a [`Topology`]: capacity resources and allocation-free path walks.
//!
//! Every directed link maps to one *resource* (a capacity that flows share). A full-duplex link
//! gives two resources, one per direction; a half-duplex link gives one resource that both
//! directions share (docs/design.md §2.1). A half-duplex link whose two directions declare
//! different bandwidths is given the smaller one as its shared capacity: the medium is one wire,
//! and the conservative choice never lets the simulator promise more than either end measured.

use crate::topology::{Duplex, Topology, VertexId};

/// Sentinel for "no vertex / no link".
pub(crate) const NONE: u32 = u32::MAX;

/// One hop of a path: the resource it loads and its one-way latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PathHop {
    /// Directed link id: `2 * link + (0 if a->b else 1)`.
    pub dlink: u32,
    pub res: u32,
    pub latency: f64,
    pub bandwidth: f64,
}

/// Capacities and routing of one topology, built in O(vertices + links).
#[derive(Clone, Debug)]
pub(crate) struct Network {
    /// Per directed link: resource id, latency (s), bandwidth (B/s).
    dl_res: Vec<u32>,
    dl_lat: Vec<f64>,
    dl_bw: Vec<f64>,
    /// Per resource: capacity (B/s) and the link it belongs to (`forward` is `None` when both
    /// directions share it).
    pub res_cap: Vec<f64>,
    pub res_link: Vec<(usize, Option<bool>)>,
    /// Per vertex: directed link to its parent (`up`), from its parent (`down`), the parent, depth.
    up: Vec<u32>,
    down: Vec<u32>,
    parent: Vec<u32>,
    depth: Vec<u32>,
}

impl Network {
    pub fn new(topo: &Topology) -> Network {
        let nl = topo.links().len();
        let mut dl_res = vec![0u32; 2 * nl];
        let mut dl_lat = vec![0.0; 2 * nl];
        let mut dl_bw = vec![0.0; 2 * nl];
        let mut res_cap = Vec::with_capacity(2 * nl);
        let mut res_link = Vec::with_capacity(2 * nl);
        for (l, link) in topo.links().iter().enumerate() {
            dl_lat[2 * l] = link.ab.latency_s;
            dl_lat[2 * l + 1] = link.ba.latency_s;
            match link.duplex {
                Duplex::Full => {
                    for (d, dir) in [link.ab, link.ba].into_iter().enumerate() {
                        dl_res[2 * l + d] = res_cap.len() as u32;
                        dl_bw[2 * l + d] = dir.bandwidth_bps;
                        res_cap.push(dir.bandwidth_bps);
                        res_link.push((l, Some(d == 0)));
                    }
                }
                Duplex::Half => {
                    let cap = link.ab.bandwidth_bps.min(link.ba.bandwidth_bps);
                    dl_res[2 * l] = res_cap.len() as u32;
                    dl_res[2 * l + 1] = res_cap.len() as u32;
                    dl_bw[2 * l] = cap;
                    dl_bw[2 * l + 1] = cap;
                    res_cap.push(cap);
                    res_link.push((l, None));
                }
            }
        }
        let nv = topo.num_vertices();
        let mut up = vec![NONE; nv];
        let mut down = vec![NONE; nv];
        let mut parent = vec![NONE; nv];
        let mut depth = vec![0u32; nv];
        for v in 0..nv {
            depth[v] = topo.depth(v);
            if let Some((p, l)) = topo.parent(v) {
                let forward = topo.link(l).a == v; // v -> p is a->b
                up[v] = (2 * l + usize::from(!forward)) as u32;
                down[v] = (2 * l + usize::from(forward)) as u32;
                parent[v] = p as u32;
            }
        }
        Network {
            dl_res,
            dl_lat,
            dl_bw,
            res_cap,
            res_link,
            up,
            down,
            parent,
            depth,
        }
    }

    /// Set resource `res`'s capacity, and the bandwidth of every link direction on it (what
    /// caps a flow's rate), to `bw`.
    pub fn set_res_bandwidth(&mut self, res: u32, bw: f64) {
        self.res_cap[res as usize] = bw;
        for (d, &r) in self.dl_res.iter().enumerate() {
            if r == res {
                self.dl_bw[d] = bw;
            }
        }
    }

    pub fn num_resources(&self) -> usize {
        self.res_cap.len()
    }

    fn hop(&self, dl: u32) -> PathHop {
        let i = dl as usize;
        PathHop {
            dlink: dl,
            res: self.dl_res[i],
            latency: self.dl_lat[i],
            bandwidth: self.dl_bw[i],
        }
    }

    /// Fill `out` with the hops from `from` to `to` in traversal order. `scratch` holds the
    /// downward half while walking; both buffers are reused by the caller, so a walk allocates
    /// nothing once they have grown to the tree's diameter. O(path length).
    pub fn path_into(&self, from: VertexId, to: VertexId, out: &mut Vec<PathHop>, scratch: &mut Vec<PathHop>) {
        out.clear();
        scratch.clear();
        let (mut u, mut v) = (from as u32, to as u32);
        while self.depth[u as usize] > self.depth[v as usize] {
            out.push(self.hop(self.up[u as usize]));
            u = self.parent[u as usize];
        }
        while self.depth[v as usize] > self.depth[u as usize] {
            scratch.push(self.hop(self.down[v as usize]));
            v = self.parent[v as usize];
        }
        while u != v {
            out.push(self.hop(self.up[u as usize]));
            u = self.parent[u as usize];
            scratch.push(self.hop(self.down[v as usize]));
            v = self.parent[v as usize];
        }
        out.extend(scratch.drain(..).rev());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LinkDir, TopologyBuilder, VertexKind};

    #[test]
    fn paths_match_topology_and_half_duplex_shares_one_resource() {
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let n0 = b.vertex("n0", VertexKind::Node);
        let r0 = b.rank(0);
        let r1 = b.rank(1);
        let r2 = b.rank(2);
        b.link(n0, sw, 2e-6, 1e9);
        b.link(r0, n0, 1e-7, 1e10);
        b.link(r1, n0, 1e-7, 1e10);
        let d = LinkDir::new(3e-6, 5e8);
        b.link_full(sw, r2, d, LinkDir::new(3e-6, 4e8), Duplex::Half);
        let t = b.build().unwrap();
        let net = Network::new(&t);
        // 2 full links x 2 + 1 full x 2 ... : links 0..2 full (6 resources) + 1 half (1 resource).
        assert_eq!(net.num_resources(), 7);
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        for a in 0..3u32 {
            for c in 0..3u32 {
                let (va, vc) = (t.rank_vertex(a), t.rank_vertex(c));
                net.path_into(va, vc, &mut out, &mut scratch);
                let expect = t.path(va, vc);
                assert_eq!(out.len(), expect.len());
                for (h, e) in out.iter().zip(&expect) {
                    assert_eq!(h.dlink as usize, 2 * e.link + usize::from(!e.forward));
                    assert_eq!(h.latency, t.dir_params(*e).latency_s);
                }
            }
        }
        // Both directions of the half-duplex link use one resource with the smaller bandwidth.
        net.path_into(t.rank_vertex(0), t.rank_vertex(2), &mut out, &mut scratch);
        let there = out.last().unwrap().res;
        net.path_into(t.rank_vertex(2), t.rank_vertex(0), &mut out, &mut scratch);
        assert_eq!(out[0].res, there);
        assert_eq!(net.res_cap[there as usize], 4e8);
    }
}
