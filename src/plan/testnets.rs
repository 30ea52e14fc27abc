//! The four model families of seed 004 (figures 11-14), for the planner's tests and benches.
//!
//! The paper's parameters were "based on measurements" and are not printed; these are
//! period-typical values: Gigabit Ethernet 125 MB/s with 25 us per link, Fast Ethernet
//! 12.5 MB/s with 40 us, an SMP's shared memory 400 MB/s with 1 us per CPU link, the
//! inter-cluster link Gigabit Ethernet with 10 us. Ranks are numbered depth-first (cluster,
//! node, CPU), as in the paper's figures.

use crate::topology::{Topology, TopologyBuilder, VertexKind};

pub const GBE: (f64, f64) = (25e-6, 125e6);
pub const FAST_E: (f64, f64) = (40e-6, 12.5e6);
pub const SHM: (f64, f64) = (1e-6, 400e6);
pub const INTER: (f64, f64) = (10e-6, 125e6);

/// Figure 11: `n` single-CPU hosts on one Gigabit Ethernet switch.
pub fn star(n: u32) -> Topology {
    let mut b = TopologyBuilder::new();
    let sw = b.vertex("sw", VertexKind::Switch);
    for i in 0..n {
        let r = b.rank(i);
        b.link(r, sw, GBE.0, GBE.1);
    }
    b.build().expect("valid star")
}

/// Figure 12: `nodes` dual-CPU SMP hosts on one Gigabit Ethernet switch (2 x nodes ranks).
pub fn dual_cpu(nodes: u32) -> Topology {
    clusters(&[(nodes, GBE)], 2)
}

/// Figure 13: two uniform clusters of `nodes` dual-CPU hosts each (2 x nodes x 2 ranks).
pub fn two_clusters(nodes: u32) -> Topology {
    clusters(&[(nodes, GBE), (nodes, GBE)], 2)
}

/// Figure 14: a Gigabit Ethernet cluster and a Fast Ethernet cluster of `nodes` dual-CPU hosts
/// each (2 x nodes x (1+1) ranks).
pub fn two_nonuniform(nodes: u32) -> Topology {
    clusters(&[(nodes, GBE), (nodes, FAST_E)], 2)
}

/// Clusters of SMP hosts: each cluster is a switch with `(hosts, nic)`; the cluster switches
/// hang off the first one over `INTER` links; `cpus` ranks per host over shared memory.
pub fn clusters(spec: &[(u32, (f64, f64))], cpus: u32) -> Topology {
    let mut b = TopologyBuilder::new();
    let mut rank = 0;
    let mut first_sw = None;
    for (c, &(hosts, nic)) in spec.iter().enumerate() {
        let sw = b.vertex(format!("sw{c}"), VertexKind::Switch);
        match first_sw {
            None => first_sw = Some(sw),
            Some(s0) => {
                b.link(sw, s0, INTER.0, INTER.1);
            }
        }
        for h in 0..hosts {
            let host = b.vertex(format!("c{c}h{h}"), VertexKind::Node);
            b.link(host, sw, nic.0, nic.1);
            for _ in 0..cpus {
                let r = b.rank(rank);
                rank += 1;
                b.link(r, host, SHM.0, SHM.1);
            }
        }
    }
    b.build().expect("valid clusters")
}
