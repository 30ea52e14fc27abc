//! `treecast simulate` end to end on the shipped example topologies, with hand-derived times.

use std::process::Command;

fn treecast(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_treecast"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run treecast");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn time_s(json: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(json).expect("json output");
    v["time_s"].as_f64().expect("time_s")
}

const FAT: &str = "topologies/fat-tree-4x4.json";
/// fat-tree-4x4: hosts on 10 Gbit/s links, every link 1 us.
const MIB_AT_10G: f64 = 1048576.0 / 1.25e9;

#[test]
fn point_to_point_broadcast_time() {
    // Two ranks on one leaf switch: 2 links of 1 us, 1 MiB at 10 Gbit/s.
    let (code, out, err) = treecast(&[
        "simulate",
        "--topology",
        FAT,
        "--pattern",
        "bcast:root=0,bytes=1MiB",
        "--algorithm",
        "flat",
        "--ranks",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let want = 2e-6 + MIB_AT_10G;
    assert!((time_s(&out) - want).abs() < 1e-12, "{out}");
}

#[test]
fn pairwise_alltoall_on_the_fat_tree() {
    // Block placement, blocking sends: every rank runs the same schedule in lockstep and the
    // 40 Gbit/s uplinks carry the four 10 Gbit/s flows of a leaf switch at full speed. Steps
    // 1..3 stay in the leaf switch (2 us), steps 4..15 cross the core (4 us).
    let (code, out, err) = treecast(&[
        "simulate",
        "--topology",
        FAT,
        "--pattern",
        "alltoall:algo=pairwise,bytes=1MiB",
        "--blocking",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let want = 15.0 * MIB_AT_10G + 3.0 * 2e-6 + 12.0 * 4e-6;
    assert!((time_s(&out) - want).abs() < 1e-9 * want, "{} vs {want}", time_s(&out));
}

#[test]
fn shorthand_text_output_and_random_placement() {
    let (code, out, err) = treecast(&[
        "simulate",
        "--topology",
        FAT,
        "--root",
        "3",
        "--bytes",
        "64KiB",
        "--algorithm",
        "knomial:k=3",
        "--placement",
        "random:5",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("time:") && out.contains("random:5") && out.contains("knomial"),
        "{out}"
    );
}

#[test]
fn bad_input_exits_2_with_a_one_line_error() {
    for (args, needle) in [
        (
            vec!["--pattern", "bcast:root=0,bytes=4XB", "--algorithm", "flat"],
            "unknown size unit",
        ),
        (
            vec!["--pattern", "bcast:root=99,bytes=4", "--algorithm", "flat"],
            "root 99 out of range",
        ),
        (
            vec!["--pattern", "bcast:root=0,bytes=4", "--algorithm", "warp"],
            "unknown algorithm 'warp'",
        ),
        (vec!["--pattern", "bcast:root=0,bytes=4"], "--algorithm is required"),
        (vec!["--pattern", "alltoall:bytes=4"], "algo="),
        (
            vec![
                "--pattern",
                "bcast:root=0,bytes=4",
                "--algorithm",
                "flat",
                "--placement",
                "random",
            ],
            "seed",
        ),
        (
            vec![
                "--pattern",
                "bcast:root=0,bytes=4",
                "--algorithm",
                "flat",
                "--ranks",
                "17",
            ],
            "--ranks",
        ),
    ] {
        let mut a = vec!["simulate", "--topology", FAT];
        a.extend(args);
        let (code, _, err) = treecast(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(err.contains(needle), "{a:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let (code, _, err) = treecast(&[
        "simulate",
        "--topology",
        "topologies/missing.json",
        "--root",
        "0",
        "--bytes",
        "1",
        "--algorithm",
        "flat",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.json"), "{err}");
}
