//! Parameterised generators for the model topologies the project is tested and demonstrated on.
//!
//! Families:
//! - [`Star`]: one switch, hosts around it — the star of [Hourai2004] (Fig. 11)
//!   and, with two ranks per host, its dual-CPU cluster (Fig. 12).
//! - [`TwoClusters`]: two clusters joined switch to switch — the two uniform clusters of [Hourai2004]
//!   (Fig. 13) and two non-uniform clusters, Fast Ethernet + GbE (Fig. 14).
//! - [`Testbed`]: the 4-cluster, 256-host testbed of [Shirai2007] (Fig. 6).
//! - [`Clusters`]: several clusters joined to a core over routed or wide-area links.
//! - [`Tree`]: regular trees of switches: a full-bisection fat tree, k:1 oversubscribed uplinks,
//!   and the emulated 3 x 3 cluster of docs/design.md §5.3.
//!
//! Every builder takes `ranks_per_host`: 0 builds a host-level tree whose leaves are the `node`
//! vertices (what inference produces from an RTT matrix); `r >= 1` hangs `r` rank leaves below
//! each node over a shared-memory link, ranks numbered in block order (host 0 gets ranks
//! 0..r-1, host 1 the next r, ...; hosts in the order documented per family). Builders return an
//! error, never panic, on bad parameters (zero counts, negative latencies, huge sizes).
//!
//! Naming: hosts end in zero-padded numbers (`h00`..`h15`) so Slurm hostlists compress; ranks are
//! `r<rank>`.
//!
//! **Where the numbers come from.** [Hourai2004] says its model parameters were "set from measured
//! values" but does not print them, so the [Hourai2004] families use the era's nominal link speeds
//! (GbE = 1 Gbit/s, Fast Ethernet = 100 Mbit/s) and parameters derived from its own
//! broadcast tables where possible (documented at each constant). Fig. 6 of [Shirai2007] (with the
//! testbed's exact switch layout and latencies) was lost in extraction; [`Testbed`] uses every
//! number its prose gives and documents the rest as choices.

use super::decimal::{gbps_to_bps, us_to_s};
use super::{LinkDir, Topology, TopologyBuilder, TopologyError, VertexId, VertexKind};

/// A link direction from microseconds and Gbit/s, converted exactly as a file would be read.
pub fn link(latency_us: f64, bandwidth_gbps: f64) -> LinkDir {
    LinkDir::new(us_to_s(latency_us), gbps_to_bps(bandwidth_gbps))
}

/// A link direction from seconds and bytes/s (for the constants below).
const fn dir(latency_s: f64, bandwidth_bps: f64) -> LinkDir {
    LinkDir {
        latency_s,
        bandwidth_bps,
    }
}

/// Host <-> switch over Gigabit Ethernet in the [Hourai2004] families: 1 Gbit/s nominal; 25 us
/// one-way per link (50 us host to host, 100 us RTT: TCP over GbE in 2004; [Hourai2004] is silent).
pub const PAPER_GBE: LinkDir = dir(25e-6, 1.25e8);

/// Host <-> switch over Fast Ethernet ([Hourai2004], Fig. 14): 100 Mbit/s nominal; 40 us one-way
/// (our choice: the slower NIC and switch of the era).
pub const PAPER_FAST_ETHERNET: LinkDir = dir(40e-6, 1.25e7);

/// CPU <-> SMP shared memory ([Hourai2004] models an SMP as a relay vertex "Shared MEM"): 2 Gbit/s,
/// 1 us. Derived from Table 6 (LAM/MPI, Fig. 12, 4 CPUs on 2 SMPs): the optimal 1 MB broadcast
/// took 12.3 ms = one GbE transfer (8.4 ms) + one intra-SMP copy, so the copy ran at
/// 1 MB / 3.9 ms = 2.2 Gbit/s (MPICH/SCore, Table 5: 12.7 ms -> 2.0 Gbit/s).
pub const PAPER_SMP: LinkDir = dir(1e-6, 2.5e8);

/// Switch <-> switch between the two GbE clusters of Fig. 13: 1 Gbit/s, 5 us (a cascaded
/// switch port; our choice).
pub const PAPER_GBE_INTERSWITCH: LinkDir = dir(5e-6, 1.25e8);

/// Switch <-> switch between the Fast Ethernet and the GbE cluster of Fig. 14: 100 Mbit/s, 5 us.
/// The speed is derived from Tables 5/6: going from 12 to 16 CPUs (3 -> 4 Fast Ethernet hosts)
/// adds one whole 1 MB Fast Ethernet transfer time (~80 ms: 185.6 -> 260.1 ms on LAM). With a
/// faster inter-switch link the GbE side could feed the 4th host in parallel and the time would
/// not grow, so the link between the clusters carries one 100 Mbit/s transfer at a time.
pub const PAPER_FAST_INTERSWITCH: LinkDir = dir(5e-6, 1.25e7);

/// Rank <-> node shared memory for the families not from [Hourai2004]: 0.3 us, 40 Gbit/s (docs/design.md §4.1's
/// example values for a current host).
pub const SHM: LinkDir = dir(0.3e-6, 5e9);

/// Refuse to build trees beyond this many vertices (a typo like `--switches 1000000` should not
/// eat the machine). 4,096-rank simulations need ~5,000.
pub const MAX_VERTICES: usize = 4_000_000;

fn bad(msg: impl Into<String>) -> TopologyError {
    TopologyError::new(msg)
}

fn at_least_one(what: &str, n: usize) -> Result<(), TopologyError> {
    if n == 0 {
        Err(bad(format!("{what} must be at least 1")))
    } else {
        Ok(())
    }
}

fn check_size(vertices: usize) -> Result<(), TopologyError> {
    if vertices > MAX_VERTICES {
        Err(bad(format!(
            "the requested tree has {vertices} vertices, more than the limit of {MAX_VERTICES}"
        )))
    } else {
        Ok(())
    }
}

/// Digits needed to print `0..count` zero-padded to one width.
fn width(count: usize) -> usize {
    count.saturating_sub(1).to_string().len()
}

/// Adds hosts and their ranks to a builder, numbering ranks in block order.
struct Hosts {
    ranks_per_host: usize,
    shm: LinkDir,
    next_rank: u32,
}

impl Hosts {
    fn new(ranks_per_host: usize, shm: LinkDir) -> Self {
        Hosts {
            ranks_per_host,
            shm,
            next_rank: 0,
        }
    }

    /// A `node` named `name` below `parent` over `link`, with its ranks.
    fn add(&mut self, b: &mut TopologyBuilder, parent: VertexId, name: String, link: LinkDir) -> VertexId {
        let h = b.vertex(name, VertexKind::Node);
        b.link(parent, h, link.latency_s, link.bandwidth_bps);
        for _ in 0..self.ranks_per_host {
            let r = b.rank(self.next_rank);
            self.next_rank += 1;
            b.link(h, r, self.shm.latency_s, self.shm.bandwidth_bps);
        }
        h
    }
}

/// One switch with `hosts` hosts (`sw`; hosts `h0`.. padded).
///
/// [Hourai2004] Fig. 11 ("networks with star topology", fully symmetric; Table 1 uses 8-16 nodes) is
/// [`Star::paper_star`]; Fig. 12 ("dual-CPU cluster": 2 CPUs per SMP, SMPs on one GbE switch;
/// Table 2 up to 2 x 8) is [`Star::paper_dual_cpu`].
#[derive(Clone, Debug, PartialEq)]
pub struct Star {
    pub hosts: usize,
    pub ranks_per_host: usize,
    /// Host <-> switch.
    pub link: LinkDir,
    /// Rank <-> host.
    pub shm: LinkDir,
}

impl Star {
    /// The star of [Hourai2004]: each participant is a host with one rank on GbE.
    pub fn paper_star(hosts: usize) -> Star {
        Star {
            hosts,
            ranks_per_host: 1,
            link: PAPER_GBE,
            shm: PAPER_SMP,
        }
    }

    /// The dual-CPU cluster of [Hourai2004]: `smps` SMP hosts with 2 CPUs (ranks) each on GbE.
    pub fn paper_dual_cpu(smps: usize) -> Star {
        Star {
            hosts: smps,
            ranks_per_host: 2,
            link: PAPER_GBE,
            shm: PAPER_SMP,
        }
    }

    pub fn build(&self) -> Result<Topology, TopologyError> {
        at_least_one("hosts", self.hosts)?;
        check_size(1 + self.hosts.saturating_mul(1 + self.ranks_per_host))?;
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let mut hosts = Hosts::new(self.ranks_per_host, self.shm);
        let w = width(self.hosts);
        for i in 0..self.hosts {
            hosts.add(&mut b, sw, format!("h{i:0w$}"), self.link);
        }
        b.build()
    }
}

/// Two clusters, each one switch with `hosts_per_cluster` hosts, the switches joined directly.
/// Switches `c0sw`, `c1sw`; hosts `c0h0`.., `c1h0`..; cluster 0's hosts (and ranks) come first.
///
/// [Hourai2004] Fig. 13 (two uniform dual-CPU GbE clusters; Table 3 up to 2 x 4 x 2 = 2 CPUs x 4
/// SMPs x 2 clusters) is [`TwoClusters::paper_uniform`]; Fig. 14 (a Fast Ethernet and a GbE
/// dual-CPU cluster; Table 4 up to 2 x 4 x (1+1)) is [`TwoClusters::paper_nonuniform`]. [Hourai2004]
/// does not say how the clusters are joined; a direct switch-to-switch link is the simplest tree
/// its experiment ("machines connected to switching hubs") fits.
#[derive(Clone, Debug, PartialEq)]
pub struct TwoClusters {
    pub hosts_per_cluster: usize,
    pub ranks_per_host: usize,
    /// Host <-> switch in cluster 0 and in cluster 1.
    pub host_link: [LinkDir; 2],
    /// Switch <-> switch.
    pub inter: LinkDir,
    pub shm: LinkDir,
}

impl TwoClusters {
    /// Two uniform dual-CPU GbE clusters of `smps` hosts each.
    pub fn paper_uniform(smps: usize) -> TwoClusters {
        TwoClusters {
            hosts_per_cluster: smps,
            ranks_per_host: 2,
            host_link: [PAPER_GBE, PAPER_GBE],
            inter: PAPER_GBE_INTERSWITCH,
            shm: PAPER_SMP,
        }
    }

    /// Cluster 0 on Fast Ethernet, cluster 1 on GbE, `smps` dual-CPU hosts each, joined at
    /// 100 Mbit/s ([`PAPER_FAST_INTERSWITCH`]). Fast Ethernet is cluster 0 because [Hourai2004]'s
    /// optimal 12-CPU schedule (0->6, 0->2, 6->8, 6->4, 8->10, ...) only makes sense that way:
    /// host 0 feeds one host of the other cluster, then both feed the rest of cluster 0's hosts
    /// (0, 2, 4) in parallel over their slow links, while CPUs 6..11 spread on GbE.
    pub fn paper_nonuniform(smps: usize) -> TwoClusters {
        TwoClusters {
            hosts_per_cluster: smps,
            ranks_per_host: 2,
            host_link: [PAPER_FAST_ETHERNET, PAPER_GBE],
            inter: PAPER_FAST_INTERSWITCH,
            shm: PAPER_SMP,
        }
    }

    pub fn build(&self) -> Result<Topology, TopologyError> {
        at_least_one("hosts per cluster", self.hosts_per_cluster)?;
        check_size(2 + 2 * self.hosts_per_cluster.saturating_mul(1 + self.ranks_per_host))?;
        let mut b = TopologyBuilder::new();
        let s0 = b.vertex("c0sw", VertexKind::Switch);
        let s1 = b.vertex("c1sw", VertexKind::Switch);
        b.link_full(s0, s1, self.inter, self.inter, super::Duplex::Full);
        let mut hosts = Hosts::new(self.ranks_per_host, self.shm);
        let w = width(self.hosts_per_cluster);
        for (c, sw) in [s0, s1].into_iter().enumerate() {
            for i in 0..self.hosts_per_cluster {
                hosts.add(&mut b, sw, format!("c{c}h{i:0w$}"), self.host_link[c]);
            }
        }
        b.build()
    }
}

/// A 4-cluster testbed like that of [Shirai2007] (Fig. 6): 4 clusters of 4 edge switches x
/// `hosts_per_edge` GbE hosts (16 -> 64 per cluster, 256 in all), L2 switches inside a cluster,
/// L3 routers between clusters.
///
/// From the prose of [Shirai2007]:
/// - all hosts on Gigabit Ethernet; clusters built from L2 switches, joined by L3 routers;
/// - inside a cluster the RTT grows about 10 us per 2 hops (Fig. 4 measured 2-, 4- and 6-hop
///   pairs in cluster 4): every switch <-> switch link is [`Testbed::SWITCH_LINK`], 2.5 us one-way
///   (2 more hops = 2 more links, crossed twice per round trip = 4 x 2.5 us);
/// - cluster 4's switches are joined by trunks of 4 links: 4 Gbit/s ([`Testbed::TRUNK`]);
/// - cluster 4 reaches cluster 3 through 3 L3 routers: each cluster has a gateway router `cKgw`,
///   and gateways meet at core routers; clusters 3 and 4 share a building (core `coreB`);
/// - a 5 us core link that no host is near: `coreA` -- `coreB`, with clusters 1 and 2 on
///   `coreA`, so the paths 1->3 and 2->4 share it, as the error analysis of [Shirai2007] describes;
/// - clusters 1 and 2 are 25 and 31 km away, and cluster 1 <-> 2 measured "2 + 3 ms": their
///   gateways are 1 ms and 1.5 ms one-way from `coreA` (RTT contributions 2 and 3 ms).
///
/// Our choices (Fig. 6 is lost): host <-> edge 12.5 us one-way (50 us same-switch RTT, GbE TCP
/// of 2007); cluster root <-> gateway 5 us; gateways 3, 4 <-> `coreB` 20 us (routed, same
/// building); all inter-cluster links 1 Gbit/s (the 150-200 Mbit/s [Shirai2007] measured between
/// clusters were TCP-window limits, not link speeds). Cluster shapes follow the inferred
/// pictures [Shirai2007] describes (Fig. 7): cluster 1 three levels (root, 2 aggregation switches,
/// 2 edge switches each: the 2/4/6-hop pairs), cluster 2 a cross (root with 4 edge switches),
/// cluster 3 a line of 4 switches each with hosts, cluster 4 three levels like cluster 1 but with
/// trunks.
///
/// Names: routers `coreA`, `coreB`, `c1gw`..`c4gw`; switches `c1s0`..; hosts `c1n00`..`c4n63`
/// (clusters in order 1..4, so ranks 0..63 x r are cluster 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Testbed {
    pub hosts_per_edge: usize,
    pub ranks_per_host: usize,
    pub shm: LinkDir,
}

impl Default for Testbed {
    fn default() -> Self {
        Testbed {
            hosts_per_edge: 16,
            ranks_per_host: 0,
            shm: SHM,
        }
    }
}

impl Testbed {
    pub const HOST_LINK: LinkDir = dir(12.5e-6, 1.25e8);
    pub const SWITCH_LINK: LinkDir = dir(2.5e-6, 1.25e8);
    pub const TRUNK: LinkDir = dir(2.5e-6, 5e8);
    pub const GATEWAY_LINK: LinkDir = dir(5e-6, 1.25e8);
    pub const CORE_LINK: LinkDir = dir(5e-6, 1.25e8);
    /// Gateway <-> core for clusters 1, 2, 3, 4.
    pub const WAN: [LinkDir; 4] = [
        dir(1e-3, 1.25e8),
        dir(1.5e-3, 1.25e8),
        dir(20e-6, 1.25e8),
        dir(20e-6, 1.25e8),
    ];

    pub fn build(&self) -> Result<Topology, TopologyError> {
        at_least_one("hosts per edge switch", self.hosts_per_edge)?;
        check_size(40 + 16 * self.hosts_per_edge.saturating_mul(1 + self.ranks_per_host))?;
        let mut b = TopologyBuilder::new();
        let link = |b: &mut TopologyBuilder, p: VertexId, c: VertexId, d: LinkDir| {
            b.link(p, c, d.latency_s, d.bandwidth_bps);
        };
        let core_a = b.vertex("coreA", VertexKind::Switch);
        let core_b = b.vertex("coreB", VertexKind::Switch);
        link(&mut b, core_a, core_b, Self::CORE_LINK);
        let mut hosts = Hosts::new(self.ranks_per_host, self.shm);
        let w = width(4 * self.hosts_per_edge);
        for c in 1..=4usize {
            let core = if c <= 2 { core_a } else { core_b };
            let gw = b.vertex(format!("c{c}gw"), VertexKind::Switch);
            link(&mut b, core, gw, Self::WAN[c - 1]);
            let mut switches = 0;
            let mut switch = |b: &mut TopologyBuilder| {
                switches += 1;
                b.vertex(format!("c{c}s{}", switches - 1), VertexKind::Switch)
            };
            let root = switch(&mut b);
            link(&mut b, gw, root, Self::GATEWAY_LINK);
            let inner = if c == 4 { Self::TRUNK } else { Self::SWITCH_LINK };
            // Edge switches (the ones with hosts), in host order.
            let mut edges = Vec::new();
            match c {
                1 | 4 => {
                    for _ in 0..2 {
                        let agg = switch(&mut b);
                        link(&mut b, root, agg, inner);
                        for _ in 0..2 {
                            let e = switch(&mut b);
                            link(&mut b, agg, e, inner);
                            edges.push(e);
                        }
                    }
                }
                2 => {
                    for _ in 0..4 {
                        let e = switch(&mut b);
                        link(&mut b, root, e, inner);
                        edges.push(e);
                    }
                }
                _ => {
                    let mut prev = root;
                    edges.push(root);
                    for _ in 0..3 {
                        let e = switch(&mut b);
                        link(&mut b, prev, e, inner);
                        edges.push(e);
                        prev = e;
                    }
                }
            }
            let mut n = 0;
            for e in edges {
                for _ in 0..self.hosts_per_edge {
                    hosts.add(&mut b, e, format!("c{c}n{n:0w$}"), Self::HOST_LINK);
                    n += 1;
                }
            }
        }
        b.build()
    }
}

/// A regular tree of switches: `fanouts[0]` switches below the top switch `core`, `fanouts[1]`
/// below each of those, ...; the last level's switches (`s0`, `s1`, ...) each have
/// `hosts_per_switch` hosts (`h000`, ... numbered across the tree, left to right). Intermediate
/// switches are `agg<level>-<i>`.
///
/// Uplinks: a switch's uplink carries the sum of the bandwidth of its downlinks divided by
/// `oversubscription` (so with k = 1 every uplink carries everything below it: a full-bisection
/// fat tree; with k = 4 each uplink is 4:1 oversubscribed, compounding per level), unless
/// `uplink_bandwidth_bps` fixes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tree {
    pub hosts_per_switch: usize,
    pub fanouts: Vec<usize>,
    pub ranks_per_host: usize,
    pub oversubscription: f64,
    /// Host <-> leaf switch.
    pub host_link: LinkDir,
    /// One-way latency of every switch <-> switch link.
    pub uplink_latency_s: f64,
    /// Fixed bandwidth of every switch <-> switch link, overriding `oversubscription`.
    pub uplink_bandwidth_bps: Option<f64>,
    pub shm: LinkDir,
}

impl Tree {
    /// A 2-level full-bisection fat tree: `switches` leaf switches of `hosts_per_switch` hosts
    /// on 10 Gbit/s, 1 us links; uplinks 1 us.
    pub fn fat_tree(hosts_per_switch: usize, switches: usize) -> Tree {
        Tree {
            hosts_per_switch,
            fanouts: vec![switches],
            ranks_per_host: 0,
            oversubscription: 1.0,
            host_link: link(1.0, 10.0),
            uplink_latency_s: 1e-6,
            uplink_bandwidth_bps: None,
            shm: SHM,
        }
    }

    /// The same tree with `ranks_per_host` ranks below every host.
    pub fn with_ranks(self, ranks_per_host: usize) -> Tree {
        Tree { ranks_per_host, ..self }
    }

    /// The same 2-level tree with k:1 oversubscribed uplinks (the usual k = 4).
    pub fn oversubscribed(hosts_per_switch: usize, switches: usize, k: f64) -> Tree {
        Tree {
            oversubscription: k,
            ..Tree::fat_tree(hosts_per_switch, switches)
        }
    }

    /// The emulated cluster of docs/design.md §5.3: `switches` Linux bridges with
    /// `hosts_per_switch` network namespaces each, joined by a top bridge; each uplink runs
    /// through 2 extra bridges and is shaped to 300 Mbit/s with `tc tbf`.
    ///
    /// Latencies from the measurements there: a bridge+veth hop adds about 1.5 us RTT
    /// (0.75 us one-way), an uplink is 3 such hops (leaf -> 2 extra bridges -> top) = 2.25 us;
    /// same-switch RTT is about 15 us over Open MPI TCP, i.e. 3.75 us one-way per host link
    /// (software cost folded into the host links, as an RTT-inferred tree would). The extra
    /// bridges are not vertices: they do not branch, so RTTs cannot see them ([Shirai2007]'s logical
    /// topology). Unshaped veth host links are taken as 10 Gbit/s.
    pub fn emulated(switches: usize, hosts_per_switch: usize) -> Tree {
        Tree {
            hosts_per_switch,
            fanouts: vec![switches],
            ranks_per_host: 0,
            oversubscription: 1.0,
            host_link: link(3.75, 10.0),
            uplink_latency_s: 2.25e-6,
            uplink_bandwidth_bps: Some(3.75e7),
            shm: SHM,
        }
    }

    pub fn build(&self) -> Result<Topology, TopologyError> {
        at_least_one("hosts per switch", self.hosts_per_switch)?;
        if self.fanouts.is_empty() {
            return Err(bad("a tree needs at least one level of switches below the top"));
        }
        let mut leaves: usize = 1;
        let mut switches: usize = 1;
        for &f in &self.fanouts {
            at_least_one("switch fan-out", f)?;
            leaves = leaves.saturating_mul(f);
            switches = switches.saturating_add(leaves);
        }
        let n_hosts = leaves.saturating_mul(self.hosts_per_switch);
        check_size(switches.saturating_add(n_hosts.saturating_mul(1 + self.ranks_per_host)))?;
        if !(self.oversubscription.is_finite() && self.oversubscription > 0.0) {
            return Err(bad(format!(
                "oversubscription must be a number > 0, got {}",
                self.oversubscription
            )));
        }
        let mut b = TopologyBuilder::new();
        let core = b.vertex("core", VertexKind::Switch);
        // Build top-down; remember each leaf switch.
        let mut level = vec![core];
        let depth = self.fanouts.len();
        for (d, &f) in self.fanouts.iter().enumerate() {
            let mut next = Vec::with_capacity(level.len() * f);
            for &p in &level {
                for _ in 0..f {
                    let i = next.len();
                    let name = if d + 1 == depth {
                        format!("s{i}")
                    } else {
                        format!("agg{}-{i}", d + 1)
                    };
                    let s = b.vertex(name, VertexKind::Switch);
                    // Bandwidth below this switch, divided by k per level below it.
                    let below: f64 = self.fanouts[d + 1..].iter().map(|&x| x as f64).product::<f64>()
                        * self.hosts_per_switch as f64
                        * self.host_link.bandwidth_bps;
                    let levels_up = (depth - d) as i32;
                    let bw = self
                        .uplink_bandwidth_bps
                        .unwrap_or(below / self.oversubscription.powi(levels_up));
                    b.link(p, s, self.uplink_latency_s, bw);
                    next.push(s);
                }
            }
            level = next;
        }
        let mut hosts = Hosts::new(self.ranks_per_host, self.shm);
        let w = width(n_hosts).max(3);
        let mut n = 0;
        for &s in &level {
            for _ in 0..self.hosts_per_switch {
                hosts.add(&mut b, s, format!("h{n:0w$}"), self.host_link);
                n += 1;
            }
        }
        b.build()
    }
}

mod catalog;
mod clusters;
pub use catalog::{examples, family, GenOptions, FAMILIES};
pub use clusters::Clusters;

#[cfg(test)]
mod tests;
