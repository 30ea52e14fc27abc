//! topo_bcast under real MPI (mpirun, oversubscribed): byte-for-byte equality with MPI_Bcast,
//! errors on bad input without hangs, bounded memory over many calls, messages above 2 GiB.
//!
//! The match matrix covers every value of each dimension — ranks 1, 2, 3, 4, 7, 8, 16; sizes 0,
//! 1, 7, 4096, 1 MiB + 3, 64 MiB; types u8, f64, a derived struct with padding, a strided vector
//! datatype; communicators world, split, dup — with every root for each case.

mod common;
use common::{assert_ok, example, mpirun};

/// A bounded per-call stall turns a hang into a failing test with a message. Every call runs
/// treecast's own route (`TREECAST_ROUTE=plan`): on one host the automatic choice is the MPI
/// library's `MPI_Bcast`, which would leave treecast's sends and error detection untested here
/// (`library_route_matches_mpi_bcast` covers the automatic choice).
const ENV: &[(&str, &str)] = &[("TREECAST_TIMEOUT", "120"), ("TREECAST_ROUTE", "plan")];

fn matrix(np: u32, cases: &[&str]) {
    let mut args = vec!["match"];
    args.extend_from_slice(cases);
    let out = mpirun(np, &example("check_bcast"), &args, ENV, 1500);
    assert_ok(&out, cases.len(), &format!("match on {np} ranks"));
}

/// The automatic route (on one host: the library's MPI_Bcast, its choice settled per size class
/// and root) gives the same bytes as MPI_Bcast for every root, type and communicator.
#[test]
fn library_route_matches_mpi_bcast() {
    let cases = [
        "u8:world:8",
        "f64:split:1",
        "particle:dup:7",
        "strided:world:4096",
        "u8:dup:1MiB+3",
    ];
    for np in [2, 4] {
        let mut args = vec!["match"];
        args.extend_from_slice(&cases);
        let out = mpirun(np, &example("check_bcast"), &args, &[("TREECAST_TIMEOUT", "120")], 900);
        assert_ok(&out, cases.len(), &format!("auto route on {np} ranks"));
    }
}

/// `topo_route` says which route a root and size take (on one host the library's for every
/// root before any call; with `TREECAST_ROUTE=plan` unseen until the first call, then the plan),
/// and broadcasts from each rank in turn (which the fast path serves whatever the root where
/// every root's route is the library's) give MPI_Bcast's bytes.
#[test]
fn route_state_and_rotating_roots() {
    for np in [2, 4] {
        let out = mpirun(
            np,
            &example("check_bcast"),
            &["routes", "library"],
            &[("TREECAST_TIMEOUT", "120")],
            600,
        );
        assert_ok(&out, 1, &format!("routes, automatic, {np} ranks"));
    }
    let out = mpirun(4, &example("check_bcast"), &["routes", "plan"], ENV, 600);
    assert_ok(&out, 1, "routes, TREECAST_ROUTE=plan, 4 ranks");
}

#[test]
fn matches_mpi_bcast_1_rank() {
    matrix(
        1,
        &[
            "u8:world:0",
            "f64:split:1",
            "particle:dup:7",
            "strided:world:4096",
            "u8:split:1MiB+3",
            "f64:dup:64MiB",
        ],
    );
}

#[test]
fn matches_mpi_bcast_2_ranks() {
    matrix(
        2,
        &[
            "u8:dup:0",
            "f64:world:7",
            "particle:split:4096",
            "strided:dup:1MiB+3",
            "u8:world:64MiB",
            "strided:split:1",
        ],
    );
}

#[test]
fn matches_mpi_bcast_3_ranks() {
    matrix(
        3,
        &[
            "u8:split:7",
            "f64:dup:4096",
            "particle:world:1MiB+3",
            "strided:split:0",
            "u8:world:1",
            "f64:world:64MiB",
        ],
    );
}

#[test]
fn matches_mpi_bcast_4_ranks() {
    matrix(
        4,
        &[
            "u8:world:4096",
            "f64:split:1MiB+3",
            "particle:dup:0",
            "strided:world:7",
            "particle:world:1",
            "u8:dup:64MiB",
        ],
    );
}

#[test]
fn matches_mpi_bcast_7_ranks() {
    matrix(
        7,
        &[
            "u8:split:1MiB+3",
            "f64:world:0",
            "particle:split:1",
            "strided:dup:4096",
            "u8:dup:7",
            "f64:split:64MiB",
        ],
    );
}

#[test]
fn matches_mpi_bcast_8_ranks() {
    matrix(
        8,
        &[
            "u8:dup:1",
            "f64:world:4096",
            "particle:world:7",
            "strided:split:1MiB+3",
            "f64:dup:0",
            "u8:world:64MiB",
        ],
    );
}

#[test]
fn matches_mpi_bcast_16_ranks() {
    matrix(
        16,
        &[
            "u8:world:7",
            "f64:dup:1MiB+3",
            "particle:split:4096",
            "strided:world:1",
            "u8:split:0",
            "u8:dup:64MiB",
        ],
    );
}

#[test]
fn bad_input_errors_without_hangs() {
    for np in [1, 2, 3, 4, 7, 8, 16] {
        let out = mpirun(np, &example("check_bcast"), &["bad"], ENV, 900);
        assert_ok(&out, 4, &format!("bad input on {np} ranks"));
    }
}

/// A 7-byte segment is raised to the planners' smallest (4 KiB) and a message is never cut into
/// more than their limit of segments: the forced pipeline broadcast of 1 MiB completes (it used
/// to run past 300 s as 150,000 messages per call) and delivers the data.
#[test]
fn absurd_segment_sizes_are_raised() {
    let env = [
        ("TREECAST_TIMEOUT", "120"),
        ("TREECAST_ROUTE", "plan"),
        ("TREECAST_SEGMENT", "7"),
        ("TREECAST_ALGORITHM", "pipeline"),
    ];
    let out = mpirun(4, &example("check_bcast"), &["match", "u8:world:1MiB+3"], &env, 600);
    assert_ok(&out, 1, "1 MiB + 3 B with TREECAST_SEGMENT=7");
}

#[test]
fn ten_thousand_calls_do_not_grow_memory() {
    let out = mpirun(4, &example("check_bcast"), &["soak", "10000"], ENV, 900);
    assert_ok(&out, 1, "soak");
}

/// Communicators freed and made again while their calls of several sizes sit in the fast
/// path's entries: every call gives MPI_Bcast's bytes, profiled or not (a profiled entry also
/// names the communicator's state), with the library's route and with treecast's plan.
#[test]
fn mixed_sizes_on_communicators_freed_and_made_again() {
    let profile = std::env::temp_dir().join(format!("treecast-churn-{}.json", std::process::id()));
    let profile = profile.display().to_string();
    for np in [2, 4] {
        for env in [
            vec![("TREECAST_TIMEOUT", "120")],
            vec![("TREECAST_TIMEOUT", "120"), ("TREECAST_PROFILE", profile.as_str())],
            vec![
                ("TREECAST_TIMEOUT", "120"),
                ("TREECAST_ROUTE", "library"),
                ("TREECAST_PROFILE", profile.as_str()),
            ],
        ] {
            let out = mpirun(np, &example("check_bcast"), &["churn", "40"], &env, 900);
            assert_ok(&out, 1, &format!("churn on {np} ranks, {env:?}"));
        }
    }
    let _ = std::fs::remove_file(&profile);
}

#[test]
fn message_above_2_gib() {
    let out = mpirun(2, &example("check_bcast"), &["large", "2GiB+5"], ENV, 900);
    assert_ok(&out, 1, "2 GiB + 5 bytes");
}

#[test]
fn rust_example_runs() {
    let out = mpirun(3, &example("rust_bcast"), &[], &[], 300);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("correct: true").count(), 3, "{stdout}");
}

/// Write, in `dir`, a Slurm topology.conf of 9 hosts `vhost0` .. `vhost8` (10 Gbit/s links)
/// below 3 leaf switches whose uplinks run at `uplink_mbit` Mbit/s; its path.
fn three_switches(dir: &std::path::Path, uplink_mbit: u32) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let conf = dir.join("topology.conf");
    std::fs::write(
        &conf,
        format!(
            "SwitchName=s0 Nodes=vhost[0-2] LinkSpeed=10000\nSwitchName=s1 Nodes=vhost[3-5] LinkSpeed=10000\n\
             SwitchName=s2 Nodes=vhost[6-8] LinkSpeed=10000\nSwitchName=top Switches=s[0-2] LinkSpeed={uplink_mbit}\n"
        ),
    )
    .unwrap();
    conf
}

/// Topology-aware plans over real MPI: 9 ranks as 9 virtual hosts below 3 leaf switches with
/// slow uplinks (a file, so the plans are the chooser's relay / chain / segmented choices for a
/// real oversubscribed tree), the same planned rank by rank as communicators above 512 ranks
/// are, and 12 ranks as 6 probed virtual hosts of 2 ranks. Correctness
/// must not depend on the tree, so both are compared byte for byte with MPI_Bcast for every root.
#[test]
fn topology_aware_plans_match_mpi_bcast() {
    let dir = std::env::temp_dir().join(format!("treecast-aware-{}", std::process::id()));
    let conf = three_switches(&dir, 1000);
    let cases = ["u8:world:7", "f64:split:4096", "particle:dup:1MiB+3", "u8:world:9MiB"];
    let mut args = vec!["match"];
    args.extend_from_slice(&cases);
    let file_env = [
        ("TREECAST_TIMEOUT", "120"),
        ("TREECAST_VIRTUAL_HOSTS", "1"),
        ("TREECAST_TOPOLOGY", conf.to_str().unwrap()),
        ("TREECAST_LOG", "info"),
    ];
    let out = mpirun(9, &example("check_bcast"), &args, &file_env, 1500);
    assert_ok(&out, cases.len(), "match on 9 ranks with a 3-switch topology file");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("topology-aware auto"),
        "plans were not topology-aware:\n{stderr}"
    );

    // The same with the planning of large communicators (above 512 ranks: each rank builds
    // only its own ops from the chosen trees), which no machine here could otherwise run.
    let mut env = file_env.to_vec();
    env.push(("TREECAST_LOCAL_PLAN_ABOVE", "4"));
    let out = mpirun(9, &example("check_bcast"), &args, &env, 1500);
    assert_ok(&out, cases.len(), "match on 9 ranks planned rank by rank");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("each rank plans only its own part"),
        "the local planner did not plan:\n{stderr}"
    );

    let env = [
        ("TREECAST_TIMEOUT", "120"),
        ("TREECAST_VIRTUAL_HOSTS", "2"),
        ("TREECAST_PROBE_PAIRS", "1"),
        ("TREECAST_LOG", "info"),
    ];
    let out = mpirun(12, &example("check_bcast"), &args, &env, 1500);
    assert_ok(&out, cases.len(), "match on 12 ranks with a probed topology");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("probed 6 hosts"), "no probing:\n{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A route's trial of the planner's segmented plan against its unsegmented one, over real MPI:
/// 9 ranks as 9 virtual hosts below 3 leaf switches with 100 Mbit/s uplinks (a file), plans
/// charging 20 us per message whatever the token ring reads on a busy host (under load it read
/// 1.3-1.8 ms, and the planner then cut nothing): the planner splits 16 KiB in 4, and its
/// unsegmented plan is cheap enough to try. Every call is compared with `MPI_Bcast`, while the
/// two plans alternate and after the planner plans the class with the winner.
#[test]
fn a_trial_of_segments_keeps_every_call_correct() {
    let dir = std::env::temp_dir().join(format!("treecast-segments-{}", std::process::id()));
    let conf = three_switches(&dir, 100);
    let env = [
        ("TREECAST_TIMEOUT", "120"),
        ("TREECAST_VIRTUAL_HOSTS", "1"),
        ("TREECAST_TOPOLOGY", conf.to_str().unwrap()),
        ("TREECAST_MESSAGE_OVERHEAD_US", "20"),
        ("TREECAST_LOG", "info"),
    ];
    let out = mpirun(9, &example("check_bcast"), &["trial", "16KiB", "1KiB"], &env, 900);
    assert_ok(&out, 2, "trial on 9 ranks with a 3-switch topology file");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("plans charge 20.0 us per message, as TREECAST_MESSAGE_OVERHEAD_US sets"),
        "the set overhead was not taken:\n{stderr}"
    );
    assert!(
        stderr.contains("16384 .. 32767 B: ")
            && stderr.contains("slowest rank: treecast plan ")
            && stderr.contains(" us, unsegmented treecast plan "),
        "no trial of the 16 KiB plan's segments:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
