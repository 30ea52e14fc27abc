//! Generator tests: hand-derived structure and path figures, and the shipped example files.

use super::*;
use crate::topology::{groups_string, io, load_file, Format};

fn v(t: &Topology, name: &str) -> VertexId {
    t.find(name).unwrap_or_else(|| panic!("no vertex {name}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-9)
}

const MB: f64 = 1_048_576.0;

#[test]
fn paper_star_and_dual_cpu() {
    let t = Star::paper_star(8).build().unwrap();
    // 1 switch + 8 hosts + 8 ranks.
    assert_eq!(t.num_vertices(), 17);
    assert_eq!(t.num_ranks(), 8);
    // 1 MB rank to rank: shm 1 us + GbE 25 us, twice; 1 Gbit/s bottleneck.
    let (r0, r7) = (t.rank_vertex(0), t.rank_vertex(7));
    assert!(close(t.transfer_time(r0, r7, MB), 52e-6 + MB / 1.25e8));
    assert_eq!(groups_string(&t), "h0 h1 h2 h3 h4 h5 h6 h7\n");

    let t = Star::paper_dual_cpu(8).build().unwrap();
    assert_eq!(t.num_ranks(), 16);
    // Block order: ranks 2i and 2i+1 share SMP i.
    for r in 0..16u32 {
        let h = t.host_of_rank(r).unwrap();
        assert_eq!(t.vertex(h).name, format!("h{}", r / 2));
    }
    // Intra-SMP copy: 2 us, 2 Gbit/s.
    let (a, b) = (t.rank_vertex(0), t.rank_vertex(1));
    assert!(close(t.transfer_time(a, b, MB), 2e-6 + MB / 2.5e8));
}

#[test]
fn paper_two_clusters() {
    let t = TwoClusters::paper_uniform(4).build().unwrap();
    assert_eq!(t.num_ranks(), 16);
    // Rank 8 is the first CPU of cluster 1: 1 + 25 + 5 + 25 + 1 us.
    let (r0, r8) = (t.rank_vertex(0), t.rank_vertex(8));
    assert_eq!(t.vertex(t.host_of_rank(8).unwrap()).name, "c1h0");
    assert!(close(t.path_latency(r0, r8), 57e-6));
    assert_eq!(t.path_bandwidth(r0, r8), 1.25e8);
    assert_eq!(groups_string(&t), "c0h0 c0h1 c0h2 c0h3\nc1h0 c1h1 c1h2 c1h3\n");

    // Non-uniform 2 x 3 x (1+1): cluster 0 Fast Ethernet, cluster 1 GbE, 100 Mbit/s between.
    let t = TwoClusters::paper_nonuniform(3).build().unwrap();
    assert_eq!(t.num_ranks(), 12);
    let r = |i| t.rank_vertex(i);
    assert_eq!(t.path_bandwidth(r(0), r(2)), 1.25e7);
    assert_eq!(t.path_bandwidth(r(6), r(8)), 1.25e8);
    assert_eq!(t.path_bandwidth(r(0), r(6)), 1.25e7);
    assert!(close(
        t.path_latency(r(0), r(6)),
        (1.0 + 40.0 + 5.0 + 25.0 + 1.0) * 1e-6
    ));
    // The 16-CPU case of [Hourai2004] is one more SMP per cluster.
    assert_eq!(TwoClusters::paper_nonuniform(4).build().unwrap().num_ranks(), 16);
}

#[test]
fn testbed_matches_the_papers_figures() {
    let t = Testbed::default().build().unwrap();
    let hosts = t.vertices_of_kind(VertexKind::Node);
    assert_eq!(hosts.len(), 256);
    assert_eq!(t.num_ranks(), 0);
    let rtt_us = |a: &str, b: &str| t.rtt(v(&t, a), v(&t, b)) * 1e6;
    // Inside cluster 1 (3 levels, 16 hosts per edge): 2, 4, 6 hops -> +10 us RTT per 2 hops.
    let same = rtt_us("c1n00", "c1n15");
    let four = rtt_us("c1n00", "c1n16");
    let six = rtt_us("c1n00", "c1n32");
    assert!(close(same, 50.0), "{same}");
    assert!(
        close(four - same, 10.0) && close(six - four, 10.0),
        "{same} {four} {six}"
    );
    assert_eq!(t.path(v(&t, "c1n00"), v(&t, "c1n32")).len(), 6);
    // Cluster 3 is a line of 4 switches: the far end is 5 links away.
    assert_eq!(t.path(v(&t, "c3n00"), v(&t, "c3n63")).len(), 5);
    // Cluster 1 <-> 2: "2 + 3 ms" RTT.
    let wan = rtt_us("c1n00", "c2n00");
    assert!((wan - 5000.0).abs() < 100.0, "{wan}");
    // Cluster 4 -> 3 crosses 3 routers (c4gw, coreB, c3gw).
    let routers: Vec<String> = t
        .path(v(&t, "c4n00"), v(&t, "c3n00"))
        .iter()
        .map(|d| {
            let l = t.link(d.link);
            t.vertex(if d.forward { l.b } else { l.a }).name.clone()
        })
        .filter(|n| n.contains("gw") || n.starts_with("core"))
        .collect();
    assert_eq!(routers, ["c4gw", "coreB", "c3gw"]);
    // Paths 1->3 and 2->4 share the 5 us core link.
    let core = |a: &str, b: &str| {
        t.path(v(&t, a), v(&t, b))
            .iter()
            .map(|d| d.link)
            .filter(|&l| t.link(l).ab.latency_s == 5e-6 && t.link(l).ab.bandwidth_bps == 1.25e8)
            .filter(|&l| {
                let n = |x| t.vertex(x).name.starts_with("core");
                n(t.link(l).a) && n(t.link(l).b)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(core("c1n00", "c3n00").len(), 1);
    assert_eq!(core("c1n00", "c3n00"), core("c2n05", "c4n40"));
    // Cluster 4 trunks: 4 Gbit/s between its switches, 1 Gbit/s to hosts.
    assert_eq!(t.path_bandwidth(v(&t, "c4s0"), v(&t, "c4s2")), 5e8);
    // 16 leaf groups of 16 hosts.
    let groups = groups_string(&t);
    assert_eq!(groups.lines().count(), 16);
    assert!(groups.lines().all(|l| l.split(' ').count() == 16));
}

#[test]
fn fat_tree_and_oversubscribed_uplinks() {
    let t = Tree::fat_tree(4, 4).build().unwrap();
    let up = |t: &Topology, s: &str| t.path_bandwidth(v(t, s), v(t, "core"));
    // Each uplink carries the 4 x 10 Gbit/s below it.
    assert_eq!(up(&t, "s0"), 4.0 * 1.25e9);
    assert_eq!(t.vertices_of_kind(VertexKind::Node).len(), 16);
    let t = Tree::oversubscribed(4, 4, 4.0).build().unwrap();
    assert_eq!(up(&t, "s3"), 1.25e9);
    // Three levels: 2 aggregation switches x 2 leaves x 2 hosts; k compounds per level.
    let t = Tree {
        fanouts: vec![2, 2],
        ..Tree::oversubscribed(2, 0, 2.0)
    }
    .build()
    .unwrap();
    assert_eq!(t.path_bandwidth(v(&t, "s0"), v(&t, "agg1-0")), 2.0 * 1.25e9 / 2.0);
    assert_eq!(t.path_bandwidth(v(&t, "agg1-0"), v(&t, "core")), 4.0 * 1.25e9 / 4.0);
    assert_eq!(t.path(v(&t, "h000"), v(&t, "h007")).len(), 6);
    // Ranks in block order below h000, h001, ...
    let t = Tree::fat_tree(2, 2).with_ranks(3).build().unwrap();
    assert_eq!(t.num_ranks(), 12);
    assert_eq!(t.vertex(t.host_of_rank(7).unwrap()).name, "h002");
}

#[test]
fn emulated_cluster_matches_design_measurements() {
    let t = Tree::emulated(3, 3).build().unwrap();
    let rtt_us = |a: &str, b: &str| t.rtt(v(&t, a), v(&t, b)) * 1e6;
    assert!(close(rtt_us("h000", "h002"), 15.0));
    // 6 extra bridge+veth hops at 1.5 us RTT each.
    assert!(close(rtt_us("h000", "h003") - rtt_us("h000", "h002"), 9.0));
    assert_eq!(t.path_bandwidth(v(&t, "h000"), v(&t, "h008")), 3.75e7);
    assert_eq!(groups_string(&t), "h000 h001 h002\nh003 h004 h005\nh006 h007 h008\n");
}

#[test]
fn bad_parameters_are_errors_not_panics() {
    assert!(Star::paper_star(0)
        .build()
        .unwrap_err()
        .to_string()
        .contains("hosts must be at least 1"));
    let e = Tree {
        oversubscription: 0.0,
        ..Tree::fat_tree(2, 2)
    }
    .build()
    .unwrap_err();
    assert!(e.to_string().contains("oversubscription"), "{e}");
    let e = Tree::fat_tree(1_000_000, 1_000_000).build().unwrap_err();
    assert!(e.to_string().contains("more than the limit"), "{e}");
    let e = Tree {
        host_link: LinkDir::new(-1.0, 1.0),
        ..Tree::fat_tree(2, 2)
    }
    .build()
    .unwrap_err();
    assert!(e.to_string().contains("latency"), "{e}");
    assert!(Tree::fat_tree(2, 0).build().is_err());
}

#[test]
fn families_by_name_and_their_options() {
    let o = GenOptions::default();
    for (name, _) in FAMILIES {
        let t = family(name, &o).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(t.num_vertices() > 1);
    }
    // Defaults are the sizes of [Hourai2004] and the shipped examples.
    assert_eq!(family("star", &o).unwrap(), Star::paper_star(8).build().unwrap());
    assert_eq!(
        family("two-level", &o).unwrap(),
        Tree::oversubscribed(4, 4, 4.0).build().unwrap()
    );
    let o = GenOptions {
        hosts_per_switch: Some(3),
        switches: Some(2),
        ranks_per_host: Some(2),
        oversubscription: Some(3.0),
        latency_us: Some(0.3),
        bandwidth_gbps: Some(0.3),
        ..GenOptions::default()
    };
    let t = family("two-level", &o).unwrap();
    assert_eq!(t.num_ranks(), 12);
    let h = v(&t, "h000");
    assert_eq!(t.path_latency(h, v(&t, "s0")), 3e-7);
    assert_eq!(t.path_bandwidth(v(&t, "s0"), v(&t, "core")), 3.0 * 3.75e7 / 3.0);
    let e = family("star", &o).unwrap_err().to_string();
    assert!(e.starts_with("--switches does not apply to family 'star'"), "{e}");
    let neg = GenOptions {
        latency_us: Some(-3.0),
        ..GenOptions::default()
    };
    let e = family("fat-tree", &neg).unwrap_err().to_string();
    assert_eq!(e, "--latency-us must be a finite number >= 0, got -3");
    let e = family("mesh", &GenOptions::default()).unwrap_err().to_string();
    assert!(e.contains("unknown family 'mesh'"), "{e}");
    let o = GenOptions {
        fanouts: Some(vec![2, 3]),
        ..GenOptions::default()
    };
    assert_eq!(
        family("fat-tree", &o)
            .unwrap()
            .vertices_of_kind(VertexKind::Switch)
            .len(),
        1 + 2 + 6
    );
}

/// The shipped files are exactly what the generators write now, and load back to the same trees.
#[test]
fn shipped_example_files_are_current() {
    // The example files ship at the repository root, two levels above this crate.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
    let examples = examples();
    for (file, t) in &examples {
        let path = dir.join(file);
        let format = Format::from_path(&path).unwrap();
        let shipped = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run `treecast topology examples topologies`)", path.display()));
        assert!(
            shipped == format.write(t).unwrap(),
            "{file} is stale: run `cargo run -- topology examples topologies`"
        );
        let loaded = load_file(&path).unwrap();
        match format {
            Format::Json => assert_eq!(&loaded, t, "{file}"),
            // Slurm keeps structure and bandwidths; latencies become the default.
            _ => {
                let shape = |t: &Topology| {
                    let f = t.canonical_form();
                    let links: Vec<_> = f
                        .links
                        .iter()
                        .map(|l| (l.a.clone(), l.b.clone(), l.ab.bandwidth_bps))
                        .collect();
                    (f.vertices, links)
                };
                assert_eq!(shape(&loaded), shape(t), "{file}");
                assert_eq!(groups_string(&loaded), groups_string(t), "{file}");
                assert!(loaded.canonical_eq(&io::from_str_auto(&format.write(&loaded).unwrap(), file).unwrap()));
            }
        }
    }
    // No leftovers that the generator no longer makes.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".json") || name.ends_with(".conf") {
            assert!(
                examples.iter().any(|(f, _)| *f == name),
                "{name} is not generated any more"
            );
        }
    }
}
