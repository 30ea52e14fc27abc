//! Families by name (for `treecast topology generate`) and the example files shipped under
//! `topologies/`.

use super::{Star, Testbed, Tree, TwoClusters};
use crate::topology::decimal::{gbps_to_bps, us_to_s};
use crate::topology::{LinkDir, Topology, TopologyError};

/// Options of `treecast topology generate`; `None` takes the family's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenOptions {
    /// Hosts per (leaf/edge) switch, SMPs per cluster, or star size, by family.
    pub hosts_per_switch: Option<usize>,
    /// Leaf switches below the top (tree families).
    pub switches: Option<usize>,
    pub ranks_per_host: Option<usize>,
    /// k of k:1 uplinks (`two-level`).
    pub oversubscription: Option<f64>,
    /// Host link one-way latency (us).
    pub latency_us: Option<f64>,
    /// Host link bandwidth (Gbit/s).
    pub bandwidth_gbps: Option<f64>,
    /// Switch <-> switch one-way latency (us).
    pub uplink_latency_us: Option<f64>,
    /// Switch fan-out per level from the top, for deeper trees (overrides `switches`).
    pub fanouts: Option<Vec<usize>>,
}

/// Family names with a one-line description (what `--family` accepts).
pub const FAMILIES: &[(&str, &str)] = &[
    (
        "star",
        "[Hourai2004] Fig. 11: one GbE switch, hosts with 1 rank (--hosts-per-switch, default 8)",
    ),
    (
        "dual-cpu",
        "[Hourai2004] Fig. 12: dual-CPU SMPs on one GbE switch (--hosts-per-switch SMPs, default 8)",
    ),
    (
        "uniform",
        "[Hourai2004] Fig. 13: two dual-CPU GbE clusters (--hosts-per-switch SMPs each, default 4)",
    ),
    (
        "nonuniform",
        "[Hourai2004] Fig. 14: Fast Ethernet + GbE dual-CPU clusters (--hosts-per-switch SMPs each, default 3)",
    ),
    (
        "testbed",
        "[Shirai2007] Fig. 6: 4 clusters x 4 edge switches x 16 hosts (--hosts-per-switch per edge)",
    ),
    (
        "fat-tree",
        "full-bisection tree, 10 Gbit/s hosts (--switches 4 --hosts-per-switch 4, --fanouts A,B)",
    ),
    (
        "two-level",
        "2-level tree with k:1 uplinks (--oversubscription 4, --switches 4 --hosts-per-switch 4)",
    ),
    (
        "emu",
        "emulated cluster of docs/design.md §5.3: 3 bridges x 3 hosts, 300 Mbit/s uplinks (--switches, --hosts-per-switch)",
    ),
];

/// Build a family by name. Options a family does not take are errors, so a typo in a script
/// does not silently produce the default tree.
pub fn family(name: &str, o: &GenOptions) -> Result<Topology, TopologyError> {
    let given: Vec<&str> = [
        ("--hosts-per-switch", o.hosts_per_switch.is_some()),
        ("--switches", o.switches.is_some()),
        ("--ranks-per-host", o.ranks_per_host.is_some()),
        ("--oversubscription", o.oversubscription.is_some()),
        ("--latency-us", o.latency_us.is_some()),
        ("--bandwidth-gbps", o.bandwidth_gbps.is_some()),
        ("--uplink-latency-us", o.uplink_latency_us.is_some()),
        ("--fanouts", o.fanouts.is_some()),
    ]
    .into_iter()
    .filter(|&(_, set)| set)
    .map(|(flag, _)| flag)
    .collect();
    for (flag, value, strict) in [
        ("--latency-us", o.latency_us, false),
        ("--uplink-latency-us", o.uplink_latency_us, false),
        ("--bandwidth-gbps", o.bandwidth_gbps, true),
        ("--oversubscription", o.oversubscription, true),
    ] {
        if let Some(x) = value {
            if !x.is_finite() || x < 0.0 || (strict && x == 0.0) {
                let bound = if strict { "> 0" } else { ">= 0" };
                return Err(TopologyError::new(format!(
                    "{flag} must be a finite number {bound}, got {x}"
                )));
            }
        }
    }
    let takes = |allowed: &[&str]| -> Result<(), TopologyError> {
        let mut ok = vec!["--hosts-per-switch", "--ranks-per-host"];
        ok.extend_from_slice(allowed);
        match given.iter().find(|f| !ok.contains(f)) {
            Some(f) => Err(TopologyError::new(format!(
                "{f} does not apply to family '{name}' (it takes {})",
                ok.join(", ")
            ))),
            None => Ok(()),
        }
    };
    let host_link = |default: LinkDir| LinkDir {
        latency_s: o.latency_us.map(us_to_s).unwrap_or(default.latency_s),
        bandwidth_bps: o.bandwidth_gbps.map(gbps_to_bps).unwrap_or(default.bandwidth_bps),
    };
    let hps = |d: usize| o.hosts_per_switch.unwrap_or(d);
    let rph = |d: usize| o.ranks_per_host.unwrap_or(d);
    match name {
        "star" | "dual-cpu" => {
            takes(&["--latency-us", "--bandwidth-gbps"])?;
            let mut s = if name == "star" {
                Star::paper_star(hps(8))
            } else {
                Star::paper_dual_cpu(hps(8))
            };
            s.ranks_per_host = rph(s.ranks_per_host);
            s.link = host_link(s.link);
            s.build()
        }
        "uniform" | "nonuniform" => {
            takes(&[])?;
            let mut c = if name == "uniform" {
                TwoClusters::paper_uniform(hps(4))
            } else {
                TwoClusters::paper_nonuniform(hps(3))
            };
            c.ranks_per_host = rph(2);
            c.build()
        }
        "testbed" => {
            takes(&[])?;
            Testbed {
                hosts_per_edge: hps(16),
                ranks_per_host: rph(0),
                ..Testbed::default()
            }
            .build()
        }
        "fat-tree" | "two-level" | "emu" => {
            let mut t = match name {
                "fat-tree" => {
                    takes(&[
                        "--switches",
                        "--latency-us",
                        "--bandwidth-gbps",
                        "--uplink-latency-us",
                        "--fanouts",
                    ])?;
                    Tree::fat_tree(hps(4), o.switches.unwrap_or(4))
                }
                "two-level" => {
                    takes(&[
                        "--switches",
                        "--oversubscription",
                        "--latency-us",
                        "--bandwidth-gbps",
                        "--uplink-latency-us",
                    ])?;
                    Tree::oversubscribed(hps(4), o.switches.unwrap_or(4), o.oversubscription.unwrap_or(4.0))
                }
                _ => {
                    takes(&["--switches"])?;
                    Tree::emulated(o.switches.unwrap_or(3), hps(3))
                }
            };
            if let Some(f) = &o.fanouts {
                if o.switches.is_some() {
                    return Err(TopologyError::new("give either --switches or --fanouts, not both"));
                }
                t.fanouts = f.clone();
            }
            t.ranks_per_host = rph(0);
            t.host_link = host_link(t.host_link);
            if let Some(l) = o.uplink_latency_us {
                t.uplink_latency_s = us_to_s(l);
            }
            t.build()
        }
        _ => {
            let names: Vec<&str> = FAMILIES.iter().map(|(n, _)| *n).collect();
            Err(TopologyError::new(format!(
                "unknown family '{name}' (one of: {})",
                names.join(", ")
            )))
        }
    }
}

/// The example files shipped in `topologies/`, as (file name, topology); the extension picks the
/// format (`.json` or Slurm `.conf`). A test checks the shipped files equal these, and
/// `treecast topology examples DIR` rewrites them.
pub fn examples() -> Vec<(&'static str, Topology)> {
    let ok = |r: Result<Topology, TopologyError>| r.expect("example parameters are valid");
    let testbed = ok(Testbed::default().build());
    vec![
        ("paper-star-8.json", ok(Star::paper_star(8).build())),
        ("paper-star-12.json", ok(Star::paper_star(12).build())),
        ("paper-star-16.json", ok(Star::paper_star(16).build())),
        ("paper-dual-cpu-2x8.json", ok(Star::paper_dual_cpu(8).build())),
        ("paper-uniform-2x4x2.json", ok(TwoClusters::paper_uniform(4).build())),
        (
            "paper-nonuniform-2x3.json",
            ok(TwoClusters::paper_nonuniform(3).build()),
        ),
        (
            "paper-nonuniform-2x4.json",
            ok(TwoClusters::paper_nonuniform(4).build()),
        ),
        ("testbed-256.json", testbed.clone()),
        ("testbed-256.conf", testbed),
        ("fat-tree-4x4.json", ok(Tree::fat_tree(4, 4).build())),
        ("two-level-4to1-4x4.json", ok(Tree::oversubscribed(4, 4, 4.0).build())),
        ("emu-3x3.json", ok(Tree::emulated(3, 3).build())),
    ]
}
