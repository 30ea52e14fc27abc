//! `treecast probe` under mpirun: on one machine every rank sits below one node; with virtual
//! hosts (TREECAST_VIRTUAL_HOSTS) and TREECAST_TOPOLOGY the file's tree is used with the job's
//! ranks attached under their hosts; a bad file degrades to no topology with a clear message.

mod common;
use common::mpirun;
use std::path::PathBuf;
use treecast::topology::{self, VertexKind};

fn treecast() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_treecast"))
}

fn probe_json(np: u32, env: &[(&str, &str)]) -> topology::Topology {
    let out = mpirun(np, &treecast(), &["probe", "--format", "json"], env, 300);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    topology::json::from_str(&stdout, "probe output").unwrap_or_else(|e| panic!("{e}\n{stdout}"))
}

#[test]
fn one_machine_is_one_node_with_every_rank() {
    let t = probe_json(4, &[]);
    assert_eq!(t.num_ranks(), 4);
    let nodes = t.vertices_of_kind(VertexKind::Node);
    assert_eq!(nodes.len(), 1);
    assert_eq!(t.ranks_below(nodes[0]), vec![0, 1, 2, 3]);
    assert!(t.vertices_of_kind(VertexKind::Switch).is_empty());
}

#[test]
fn topology_file_is_used_with_ranks_attached_to_hosts() {
    let dir = std::env::temp_dir().join(format!("treecast-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("t.conf");
    std::fs::write(&conf, "# two leaf switches\nSwitchName=s0 Nodes=vhost[0-1]\nSwitchName=s1 Nodes=vhost2\nSwitchName=top Switches=s[0-1]\n").unwrap();
    let t = probe_json(
        6,
        &[
            ("TREECAST_VIRTUAL_HOSTS", "2"),
            ("TREECAST_TOPOLOGY", conf.to_str().unwrap()),
        ],
    );
    assert_eq!(t.num_ranks(), 6);
    for (rank, host) in [(0, "vhost0"), (1, "vhost0"), (2, "vhost1"), (5, "vhost2")] {
        assert_eq!(t.vertex(t.host_of_rank(rank).unwrap()).name, host);
    }
    assert_eq!(topology::groups_string(&t), "vhost0 vhost1\nvhost2\n");

    // A file missing one of the job's hosts: no topology, and the message names the host.
    std::fs::write(&conf, "SwitchName=s0 Nodes=vhost[0-1]\n").unwrap();
    let out = mpirun(
        6,
        &treecast(),
        &["probe"],
        &[
            ("TREECAST_VIRTUAL_HOSTS", "2"),
            ("TREECAST_TOPOLOGY", conf.to_str().unwrap()),
        ],
        300,
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("host 'vhost2'"), "{stderr}");

    // A malformed file: the error names file, line and field.
    std::fs::write(&conf, "SwitchName=s0 Nodes=vhost[0-\n").unwrap();
    let out = mpirun(
        4,
        &treecast(),
        &["probe"],
        &[
            ("TREECAST_VIRTUAL_HOSTS", "2"),
            ("TREECAST_TOPOLOGY", conf.to_str().unwrap()),
        ],
        300,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("t.conf:1"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Real RTT probing + inference over MPI: 8 ranks as 4 virtual hosts of 2 ranks on this
/// machine. Whatever tree inference finds on a loopback "network", every host appears exactly
/// once as a node with its two ranks below it, the tree is identical on every rank (the job
/// checks that itself: `treecast probe` compares by broadcast), and the tree lands in the
/// cache, from which a second job loads it without probing.
#[test]
fn probing_over_mpi_finds_every_virtual_host_and_fills_the_cache() {
    let dir = std::env::temp_dir().join(format!("treecast-probe-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.to_str().unwrap();
    let env = [
        ("TREECAST_VIRTUAL_HOSTS", "2"),
        ("TREECAST_CACHE", cache),
        ("TREECAST_PROBE_PAIRS", "1"),
        ("TREECAST_PROBE_BANDWIDTH", "64KiB"),
        ("TREECAST_LOG", "info"),
    ];
    let out = mpirun(8, &treecast(), &["probe", "--format", "json"], &env, 300);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("probed 4 hosts"), "no probing log line:\n{stderr}");
    let t = topology::json::from_str(&stdout, "probe output").unwrap_or_else(|e| panic!("{e}\n{stdout}"));
    assert_eq!(t.num_ranks(), 8);
    let nodes = t.vertices_of_kind(VertexKind::Node);
    assert_eq!(nodes.len(), 4, "{stdout}");
    for h in 0..4u32 {
        let v = nodes
            .iter()
            .copied()
            .find(|&v| t.vertex(v).name == format!("vhost{h}"))
            .unwrap_or_else(|| panic!("vhost{h} missing:\n{stdout}"));
        assert_eq!(t.ranks_below(v), vec![2 * h, 2 * h + 1]);
    }
    let cached: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(cached.len(), 1, "one cache file expected in {cache}");

    // Second job: same hosts, so the cache answers and nothing is probed.
    let out = mpirun(8, &treecast(), &["probe"], &env, 300);
    let stdout2 = String::from_utf8_lossy(&out.stdout);
    let stderr2 = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout2}\n{stderr2}");
    assert!(stdout2.contains("Cache("), "topology not from the cache:\n{stdout2}");
    assert!(!stderr2.contains("probed 4 hosts"), "probed again:\n{stderr2}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The schedule real clusters use (distinct machines): every pair measures its three sets back
/// to back in one point-to-point window. Forced here on one machine: all virtual hosts are
/// found, each with its ranks.
#[test]
fn back_to_back_sets_over_mpi_find_every_virtual_host() {
    let env = [
        ("TREECAST_VIRTUAL_HOSTS", "2"),
        ("TREECAST_PROBE_PAIRS", "1"),
        ("TREECAST_PROBE_SETS", "back-to-back"),
        ("TREECAST_PROBE_BANDWIDTH", "0"),
        ("TREECAST_LOG", "info"),
    ];
    let t = probe_json(8, &env);
    assert_eq!(t.num_ranks(), 8);
    let nodes = t.vertices_of_kind(VertexKind::Node);
    assert_eq!(nodes.len(), 4);
    for &v in &nodes {
        assert_eq!(t.ranks_below(v).len(), 2, "{}", t.vertex(v).name);
    }
}

/// Round trips given up (`PingSpec::give_up_s`), forced on every round trip slower than its
/// pair's fastest (`TREECAST_PROBE_GIVE_UP_RATIO=1`): receives are cancelled and late pongs
/// arrive in later windows and rounds, on either MPI. Probing must finish with every virtual
/// host and report its give-ups, under both set schedules, the bandwidth map's handshakes
/// afterwards must not trip over a late pong (its own tags), and every late pong must be
/// received before the leaders' communicator is freed (under MPICH, freeing one with a message
/// unmatched aborted the job). That no late pong is taken for a current one is checked where
/// round trips have a floor (`tests/emulated_cluster.rs`).
#[test]
fn round_trips_given_up_over_mpi_leave_probing_intact() {
    for sets in ["interleaved", "back-to-back"] {
        let env = [
            ("TREECAST_VIRTUAL_HOSTS", "1"),
            ("TREECAST_PROBE_PAIRS", "1"),
            ("TREECAST_PROBE_SETS", sets),
            ("TREECAST_PROBE_GIVE_UP_US", "1"),
            ("TREECAST_PROBE_GIVE_UP_RATIO", "1"),
            ("TREECAST_PROBE_BANDWIDTH", "64KiB"),
            ("TREECAST_LOG", "info"),
        ];
        let out = mpirun(4, &treecast(), &["probe", "--format", "json"], &env, 300);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{sets}: {stdout}\n{stderr}");
        let given_up: u64 =
            common::given_up_in_log(&stderr).unwrap_or_else(|| panic!("{sets}: no give-ups reported:\n{stderr}"));
        assert!(given_up > 0, "{sets}: nothing given up:\n{stderr}");
        // Every late pong was received before the communicator was freed (MPICH aborts the job
        // when one with unmatched messages is freed; Open MPI frees it silently).
        assert!(!stderr.contains("late pongs unreceived"), "{sets}:\n{stderr}");
        let t = topology::json::from_str(&stdout, "probe output").unwrap_or_else(|e| panic!("{e}\n{stdout}"));
        assert_eq!(t.num_ranks(), 4);
        assert_eq!(t.vertices_of_kind(VertexKind::Node).len(), 4, "{sets}: {stdout}");
        eprintln!("{sets}: {given_up} measurements given up");
    }
}
