//! Several clusters joined over routed or wide-area links: the family inference's far-part
//! detection is measured on (`bench_infer`).

use super::{at_least_one, check_size, dir, width, Hosts, SHM};
use crate::topology::{LinkDir, Topology, TopologyBuilder, TopologyError, VertexKind};

/// `uplinks.len()` clusters, each a root switch with `leaves` leaf switches of `hosts_per_leaf`
/// GbE hosts ([`Clusters::HOST_LINK`], [`Clusters::SWITCH_LINK`] as in the testbed), each
/// cluster's root joined to a core router `core` by a link of `uplinks[c]` one-way: the latency
/// between two clusters is the sum of their two uplinks.
///
/// Names: `core`, cluster roots `c0r`, leaves `c0s0`.., hosts `c0n00`.. (clusters in order, so
/// host order follows the clusters as a hostfile would).
#[derive(Clone, Debug, PartialEq)]
pub struct Clusters {
    pub uplinks: Vec<f64>,
    pub leaves: usize,
    pub hosts_per_leaf: usize,
    pub ranks_per_host: usize,
}

impl Clusters {
    pub const HOST_LINK: LinkDir = dir(12.5e-6, 1.25e8);
    pub const SWITCH_LINK: LinkDir = dir(2.5e-6, 1.25e8);
    /// Bandwidth of a cluster's uplink (1 Gbit/s).
    pub const UPLINK_BPS: f64 = 1.25e8;

    /// `clusters` clusters of `hosts` hosts in all (as evenly as leaves of `hosts_per_leaf`
    /// allow: each cluster gets `ceil(hosts / clusters / hosts_per_leaf)` leaves), with uplink
    /// latencies spread evenly over `[lo, hi]` one-way.
    pub fn spread(clusters: usize, hosts: usize, hosts_per_leaf: usize, lo: f64, hi: f64) -> Clusters {
        let per = hosts.div_ceil(clusters.max(1));
        let uplinks = (0..clusters)
            .map(|c| {
                if clusters <= 1 {
                    lo
                } else {
                    lo + (hi - lo) * c as f64 / (clusters - 1) as f64
                }
            })
            .collect();
        Clusters {
            uplinks,
            leaves: per.div_ceil(hosts_per_leaf.max(1)),
            hosts_per_leaf,
            ranks_per_host: 0,
        }
    }

    pub fn build(&self) -> Result<Topology, TopologyError> {
        at_least_one("clusters", self.uplinks.len())?;
        at_least_one("leaf switches per cluster", self.leaves)?;
        at_least_one("hosts per leaf switch", self.hosts_per_leaf)?;
        let hosts = self.uplinks.len() * self.leaves * self.hosts_per_leaf;
        check_size(1 + self.uplinks.len() * (1 + self.leaves) + hosts * (1 + self.ranks_per_host))?;
        if let Some(&bad) = self.uplinks.iter().find(|u| !(u.is_finite() && **u >= 0.0)) {
            return Err(TopologyError::new(format!(
                "cluster uplink latency must be a finite number >= 0 s, got {bad}"
            )));
        }
        let mut b = TopologyBuilder::new();
        let core = b.vertex("core", VertexKind::Switch);
        let mut h = Hosts::new(self.ranks_per_host, SHM);
        let w = width(self.leaves * self.hosts_per_leaf);
        for (c, &up) in self.uplinks.iter().enumerate() {
            let root = b.vertex(format!("c{c}r"), VertexKind::Switch);
            b.link(core, root, up, Self::UPLINK_BPS);
            let mut n = 0;
            for s in 0..self.leaves {
                let leaf = b.vertex(format!("c{c}s{s}"), VertexKind::Switch);
                b.link(root, leaf, Self::SWITCH_LINK.latency_s, Self::SWITCH_LINK.bandwidth_bps);
                for _ in 0..self.hosts_per_leaf {
                    h.add(&mut b, leaf, format!("c{c}n{n:0w$}"), Self::HOST_LINK);
                    n += 1;
                }
            }
        }
        b.build()
    }
}
