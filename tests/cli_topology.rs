//! `treecast topology`: output on success, exit code 2 and a one-line error on bad input.

use std::process::Command;

fn treecast(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_treecast"))
        .args(args)
        .output()
        .expect("run treecast");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn shipped(file: &str) -> String {
    format!("{}/topologies/{file}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn generate_and_convert() {
    let (code, out, _) = treecast(&["topology", "generate", "--family", "two-level", "--format", "groups"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 4);
    assert_eq!(out.lines().next(), Some("h000 h001 h002 h003"));

    let (code, out, _) = treecast(&[
        "topology",
        "generate",
        "--family",
        "fat-tree",
        "--switches",
        "2",
        "--hosts-per-switch",
        "3",
        "--ranks-per-host",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    let t = treecast::topology::json::from_str(&out, "stdout").unwrap();
    assert_eq!(t.num_ranks(), 12);

    // Slurm in, groups out: the testbed's 16 edge switches of 16 hosts.
    let (code, out, _) = treecast(&[
        "topology",
        "convert",
        &shipped("testbed-256.conf"),
        "--format",
        "groups",
    ]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 16);
    let (code, out, _) = treecast(&["topology", "convert", &shipped("emu-3x3.json"), "--format", "dot"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("\"core\" -- \"s0\" [label=\"2.25 us, 0.3 Gb/s\"];"),
        "{out}"
    );
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = std::env::temp_dir().join(format!("treecast-cli-topo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.conf");
    std::fs::write(&bad, "SwitchName=s0 Nodes=h[0-3]\nSwitchName=top Switches=s0,s1\n").unwrap();
    let bad = bad.display().to_string();
    let missing = dir.join("missing.json").display().to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["topology", "convert", &bad],
            format!("treecast: {bad}:2: field 'Switches': unknown switch 's1' (no SwitchName=s1 line)"),
        ),
        (
            vec!["topology", "convert", &missing],
            format!("treecast: {missing}: cannot read"),
        ),
        (
            vec!["topology", "generate", "--family", "star", "--oversubscription", "4"],
            "treecast: --oversubscription does not apply to family 'star'".into(),
        ),
        (
            vec!["topology", "generate", "--family", "emu", "--format", "svg"],
            "treecast: --format: 'svg' is not one of json, slurm, dot, groups".into(),
        ),
        (
            vec!["topology", "generate", "--family", "two-level", "--latency-us", "-1"],
            "treecast: --latency-us must be a finite number >= 0, got -1".into(),
        ),
        (
            vec!["topology", "generate", "--family", "fat-tree", "--switches", "0"],
            "treecast: switch fan-out must be at least 1".into(),
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = treecast(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with(&want), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// MPICH's coordinates file: one line per world rank after the header, and a clear error (exit
/// 2) for a host-level tree, which says nothing about ranks.
#[test]
fn convert_to_mpich_coordinates() {
    let (code, out, err) = treecast(&[
        "topology",
        "convert",
        &shipped("paper-uniform-2x4x2.json"),
        "--format",
        "mpich-coords",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with('#'), "MPICH skips the first line: {out}");
    assert_eq!(lines.len(), 1 + 16, "{out}");
    for (r, l) in lines[1..].iter().enumerate() {
        let (rank, rest) = l.split_once(':').expect("RANK: GROUP SWITCH PORT");
        assert_eq!(rank.parse::<usize>().unwrap(), r);
        assert_eq!(rest.split_whitespace().count(), 3, "{l}");
    }
    let (code, _, err) = treecast(&[
        "topology",
        "convert",
        &shipped("testbed-256.conf"),
        "--format",
        "mpich-coords",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no ranks"), "{err}");
    let (code, _, err) = treecast(&["topology", "convert", &shipped("emu-3x3.json"), "--format", "coords"]);
    assert_eq!(code, 2);
    assert!(err.contains("mpich-coords"), "the error lists the formats: {err}");
}
