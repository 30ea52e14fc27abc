//! `treecast infer`: output on success; exit code 2 and a one-line error on bad input.

use std::path::PathBuf;
use std::process::Command;
use treecast::probe::{NoiseModel, Prober, SimProber};
use treecast::topology::gen::Tree;
use treecast::topology::{rtt_csv, RttMatrix};

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

/// Write `text` to a fresh temporary file and return its path.
fn temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("treecast-cli-infer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The noise-free RTT matrix of a 3 x 3 fat tree (hosts h000..h008, 3 per leaf switch).
fn matrix() -> RttMatrix {
    let t = Tree::fat_tree(3, 3).build().unwrap();
    let p = SimProber::new(&t, NoiseModel::default(), 1).unwrap();
    let n = p.num_hosts();
    RttMatrix {
        hosts: (0..n).map(|h| p.host_name(h).to_string()).collect(),
        rtt_us: (0..n)
            .map(|i| (0..n).map(|j| Some(p.true_rtt(i, j) * 1e6)).collect())
            .collect(),
    }
}

fn assert_input_error(args: &[&str], needle: &str) {
    let (code, out, err) = treecast(args);
    assert_eq!(code, 2, "{args:?}: {out}{err}");
    assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
    assert!(err.contains(needle), "{args:?}: '{err}' lacks '{needle}'");
}

#[test]
fn infers_groups_from_a_matrix() {
    let p = temp("full.csv", &rtt_csv::to_string(&matrix()));
    let (code, out, err) = treecast(&["infer", "--rtt", p.to_str().unwrap(), "--format", "groups"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "h000 h001 h002\nh003 h004 h005\nh006 h007 h008\n");
    let (code, out, _) = treecast(&["infer", "--rtt", p.to_str().unwrap()]);
    assert_eq!(code, 0);
    let t = treecast::topology::json::from_str(&out, "stdout").unwrap();
    assert_eq!(t.vertices_of_kind(treecast::topology::VertexKind::Node).len(), 9);
    let (code, out, _) = treecast(&["infer", "--rtt", p.to_str().unwrap(), "--format", "slurm"]);
    assert_eq!(code, 0);
    assert!(out.contains("SwitchName="), "{out}");
}

#[test]
fn bad_matrices_are_input_errors() {
    let good = rtt_csv::to_string(&matrix());
    let mut lines: Vec<String> = good.lines().map(String::from).collect();
    // Ragged: drop the last cell of row 3.
    let mut ragged = lines.clone();
    let cut = ragged[3].rfind(',').unwrap();
    ragged[3].truncate(cut);
    let p = temp("ragged.csv", &(ragged.join("\n") + "\n"));
    assert_input_error(&["infer", "--rtt", p.to_str().unwrap()], "ragged.csv");
    // Asymmetric far beyond measurement noise: 13 ms one way.
    let mut cells: Vec<String> = lines[1].split(',').map(String::from).collect();
    cells[2] = "13000".into();
    lines[1] = cells.join(",");
    let p = temp("asym.csv", &(lines.join("\n") + "\n"));
    assert_input_error(&["infer", "--rtt", p.to_str().unwrap()], "asym.csv");
    // Negative.
    let neg = good.replacen(",0,", ",0,-", 1);
    let p = temp("neg.csv", &neg);
    assert_input_error(&["infer", "--rtt", p.to_str().unwrap()], "neg.csv");
    // Missing: nothing known about h000 except to itself.
    let mut m = matrix();
    for k in 1..m.hosts.len() {
        m.rtt_us[0][k] = None;
        m.rtt_us[k][0] = None;
    }
    let p = temp("holes.csv", &rtt_csv::to_string(&m));
    assert_input_error(&["infer", "--rtt", p.to_str().unwrap()], "h000");
    assert_input_error(&["infer", "--rtt", "/nonexistent/x.csv"], "/nonexistent/x.csv");
}

#[test]
fn model_evaluation_reports() {
    let model = shipped("fat-tree-4x4.json");
    let (code, out, err) = treecast(&[
        "infer",
        "--model",
        &model,
        "--noise",
        "lomax:scale_us=0.2,alpha=1.5",
        "--trials",
        "2",
        "--format",
        "json",
        "--queries",
        "2000",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in [
        "trials",
        "exact_partition_rate",
        "shared_link_fp_rate",
        "shared_link_fn_rate",
        "pairs_measured_fraction",
        "rounds",
        "virtual_probe_time_s",
    ] {
        assert!(v.get(key).is_some_and(|x| x.is_number()), "missing {key}: {out}");
    }
    assert_eq!(v["trials"], 2);
    assert_eq!(v["exact_partition_rate"], 1.0);
    assert!(v["virtual_probe_time_s"].as_f64().unwrap() > 0.0);
    let (code, out, _) = treecast(&["infer", "--model", &model, "--queries", "100"]);
    assert_eq!(code, 0);
    assert!(out.contains("exact leaf-switch partition   100.0%"), "{out}");
}

#[test]
fn bad_options_are_input_errors() {
    let model = shipped("fat-tree-4x4.json");
    assert_input_error(&["infer", "--model", &model, "--noise", "gauss:sd_us=1"], "--noise");
    assert_input_error(&["infer", "--model", &model, "--trials", "0"], "--trials");
    assert_input_error(&["infer", "--model", &model, "--format", "dot"], "--format");
    assert_input_error(&["infer", "--model", &model, "--strategy", "magic"], "--strategy");
    assert_input_error(&["infer", "--model", &model, "--loaded", "h001"], "--loaded");
    assert_input_error(&["infer", "--model", &model, "--loaded", "nohost=5"], "nohost");
    assert_input_error(&["infer", "--model", "/nonexistent/t.json"], "/nonexistent/t.json");
    assert_input_error(&["infer", "--model", &model, "--far-rtt-us", "-5"], "--far-rtt-us");
    assert_input_error(&["infer", "--model", &model, "--far-rtt-us", "1ms"], "--far-rtt-us");
    let (code, _, _) = treecast(&["infer"]);
    assert_eq!(code, 2);
}

/// `--far-rtt-us inf` turns the graft of far-apart parts off: on the shipped testbed (clusters
/// 1 and 1.5 ms from the core) the same inference then measures far pairs in full and costs
/// many times the virtual probe time.
#[test]
fn far_rtt_threshold_switches_the_graft() {
    let model = shipped("testbed-256.json");
    let time = |far: &str| {
        let (code, out, err) = treecast(&[
            "infer",
            "--model",
            &model,
            "--noise",
            "lomax:scale_us=2,alpha=1.5",
            "--far-rtt-us",
            far,
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["exact_partition_rate"], 1.0, "{out}");
        v["virtual_probe_time_s"].as_f64().unwrap()
    };
    let (grafted, one_tree) = (time("1000"), time("inf"));
    assert!(one_tree > 4.0 * grafted, "graft {grafted} s, one tree {one_tree} s");
}

/// A probe dump of six hosts on one switch (one-way 10 us each, a little jitter per pair) in
/// which the pair h0 / h1 reads 0.3 us shorter than the rest, as hosts sharing CPUs read:
/// a hidden switch by the evidence, a few hundredths of a microsecond above the others, below the 1 us floor `settings` may record.
fn dump_with_a_short_pair(settings: &str) -> String {
    let mut ms = Vec::new();
    for set in 0..3 {
        for a in 0..6usize {
            for b in (a + 1)..6 {
                let floor_us = if (a, b) == (0, 1) { 19.7 } else { 20.0 } + 0.01 * ((a * 7 + b * 3 + set) % 5) as f64;
                let samples: Vec<String> = (0..12)
                    .map(|k| format!("{:e}", (floor_us + [0.0, 0.8, 2.5, 0.4][k % 4]) * 1e-6))
                    .collect();
                ms.push(format!(
                    r#"{{"a":{a},"b":{b},"samples_s":[{}],"set_len":[12],"waited_s":0.0}}"#,
                    samples.join(",")
                ));
            }
        }
    }
    format!(
        r#"{{"version":1,"hosts":["h0","h1","h2","h3","h4","h5"],"measurements":[{}]{settings}}}"#,
        ms.join(",")
    )
}

/// The switches and the confidence of a tree `treecast infer` wrote as JSON.
fn switches_and_confidence(json: &str) -> (usize, f64) {
    let t = treecast::topology::io::from_str_auto(json, "replayed.json").expect("a tree");
    (
        t.vertices_of_kind(treecast::topology::VertexKind::Switch).len(),
        t.confidence().expect("an inferred tree states its confidence"),
    )
}

#[test]
fn a_replay_infers_with_the_jobs_recorded_settings() {
    let floor = r#","settings":{"resolution_s":1e-6,"far_rtt_s":null,"one_tree":false,"led_part_min_hosts":64,"give_up_s":0.01,"give_up_ratio":20.0}"#;
    let with = temp("settings.json", &dump_with_a_short_pair(floor));
    let with = with.to_str().unwrap();
    // The job's floor: the short pair's link is contracted and the tree says it is unsure.
    let (code, out, err) = treecast(&["infer", "--replay", with]);
    assert_eq!(code, 0, "{err}");
    let (switches, confidence) = switches_and_confidence(&out);
    assert_eq!(switches, 1, "{out}");
    assert!(
        confidence <= 0.5,
        "contracted below the floor, yet confidence {confidence}: {out}"
    );
    // The command line overrides it; the evidence alone keeps the link.
    let (code, out, err) = treecast(&["infer", "--replay", with, "--resolution-us", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(switches_and_confidence(&out).0 > 1, "{out}");
    // A dump written before settings were recorded replays with the defaults (no floor).
    let old = temp("no-settings.json", &dump_with_a_short_pair(""));
    let (code, out, err) = treecast(&["infer", "--replay", old.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(switches_and_confidence(&out).0 > 1, "{out}");
    assert!(err.contains("records no settings"), "{err}");
}

#[test]
fn unusable_recorded_settings_are_named() {
    let bad = r#","settings":{"resolution_s":-1e-6,"far_rtt_s":null,"one_tree":false,"led_part_min_hosts":64,"give_up_s":0.01,"give_up_ratio":20.0}"#;
    let p = temp("bad-settings.json", &dump_with_a_short_pair(bad));
    assert_input_error(
        &["infer", "--replay", p.to_str().unwrap()],
        "resolution_s -0.000001 is not a length >= 0",
    );
    let bad = r#","settings":{"resolution_s":0,"far_rtt_s":null,"one_tree":false,"led_part_min_hosts":64,"give_up_s":0.01,"give_up_ratio":0.5}"#;
    let p = temp("bad-ratio.json", &dump_with_a_short_pair(bad));
    assert_input_error(
        &["infer", "--replay", p.to_str().unwrap()],
        "give_up_ratio 0.5 is not at least 1",
    );
    assert_input_error(
        &["infer", "--replay", p.to_str().unwrap(), "--resolution-us=-2"],
        "--resolution-us: -2 is not",
    );
    assert_input_error(
        &[
            "infer",
            "--replay",
            p.to_str().unwrap(),
            "--resolution-of-host-link",
            "1.5",
        ],
        "--resolution-of-host-link: 1.5 is not a fraction",
    );
    let bad = r#","settings":{"resolution_s":0,"resolution_of_host_link":-0.2,"far_rtt_s":null,"one_tree":false,"led_part_min_hosts":64,"give_up_s":0.01,"give_up_ratio":20.0}"#;
    let p = temp("bad-rel.json", &dump_with_a_short_pair(bad));
    assert_input_error(
        &["infer", "--replay", p.to_str().unwrap()],
        "resolution_of_host_link -0.2 is not a fraction in [0, 1)",
    );
}

/// A start-up probe of the emulated cluster of `uneven_leaf_switches` (tests/emulated_cluster.rs:
/// leaf switches of 1, 2 and 4 hosts below a core), recorded by a CI run on 2026-11-29 in which
/// it was the one probe of six that inferred a wrong tree with confidence above 0.9. h000 sits
/// alone under the core, and its round trips read 1.2 us shorter to the 4-host switch than to
/// the 2-host one (one-way 11.2-12.6 against 12.5-13.5 us, noise 0.7). The core-to-switch link
/// that only h000 witnesses then fits at 0.83 us with evidence 3.9, is contracted, and the
/// contraction claims 0.954, though a link as long as the kept uplink (1.71 us) would give
/// about the threshold's evidence with these weights: the test cannot tell the two apart.
/// The contraction's confidence is now bounded by the power of its test
/// (`infer::joining::contracted_confidence`): 0.56 here.
#[test]
fn a_link_only_one_host_witnesses_is_not_contracted_with_confidence() {
    uneven_leaf_replay_is_exact_or_unsure("uneven-leaf-probe.json");
}

/// Replays `tests/data/NAME`, a probe of `uneven_leaf_switches`' cluster: the leaf groups must
/// come out exact, or the tree must claim a confidence below 0.9.
fn uneven_leaf_replay_is_exact_or_unsure(name: &str) {
    let dump = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let (code, out, err) = treecast(&["infer", "--replay", dump.to_str().unwrap(), "--format", "groups"]);
    assert_eq!(code, 0, "{err}");
    let exact = out.lines().any(|l| l.trim() == "h003 h004 h005 h006") && out.lines().any(|l| l.trim() == "h001 h002");
    let (code, json, err) = treecast(&["infer", "--replay", dump.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (_, confidence) = switches_and_confidence(&json);
    assert!(
        exact || confidence < 0.9,
        "wrong tree at confidence {confidence}:\n{out}"
    );
}

/// Another probe of the same cluster, recorded by the clean-clone CI on 2026-12-04 (samples
/// rounded to 4 digits; replays to the same tree): h000 is placed under the 2-host switch
/// instead of under the core, at confidence 0.991. Its round trips read 34.6-35.5 us to h001
/// and h002 and 35.0-39.3 to the 4-host switch's hosts; where it hangs, under the 2-host switch
/// or above it, the branch of its path from h001's towards h003..h006 sits 13.1 or 18.9 us from
/// h001 by the fitted links, and the readings give 15.1-18.7 (mean 16.9). The uplink above
/// {h000, h001, h002} is weighed as a link (h001 and h002's 26 us against 35 us across carry
/// it), but h000's place below it is no decision of the weighing, so its doubt is not reported.
#[test]
#[ignore = "known gap, not yet fixed: a host's place below a kept link is not weighed \
            (docs/inference-log.md, 2026-12-04); run with --ignored to see it"]
fn a_host_placed_below_a_switch_it_may_hang_above_is_not_confident() {
    uneven_leaf_replay_is_exact_or_unsure("uneven-leaf-probe-2.json");
}

/// A start-up probe of the emulated three-level tree of `three_level_tree`
/// (tests/emulated_cluster.rs: 2 pods x 2 leaf switches x 2 hosts, every switch link 2 extra
/// bridges), recorded on 2026-12-02 (samples rounded to 4 digits; settings as a live job on
/// hosts sharing CPUs records them now: no absolute floor, 0.2 of the median host link).
///
/// The same cluster on a machine whose kernel is faster reads every round trip shorter, bridges
/// included. A CI machine about 25% faster than the one that recorded this read the switch hops
/// near 1 us, and the absolute 1 us floor of the time contracted real uplinks: 0 of 6 probes of
/// this shape were exact. Replayed with every sample scaled by 0.6, 1 and 1.5, the tree must
/// come out exact each time; at 0.6 the old floor must lose a switch, so the data is near the
/// floor where it matters.
#[test]
fn a_faster_machine_resolves_the_same_tree() {
    use treecast::infer::metrics;
    use treecast::topology::io::from_str_auto;
    let truth = from_str_auto(
        "SwitchName=l0 Nodes=h000,h001\nSwitchName=l1 Nodes=h002,h003\n\
         SwitchName=l2 Nodes=h004,h005\nSwitchName=l3 Nodes=h006,h007\n\
         SwitchName=p0 Switches=l[0-1]\nSwitchName=p1 Switches=l[2-3]\n\
         SwitchName=core Switches=p[0-1]\n",
        "truth.conf",
    )
    .unwrap();
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/three-level-probe.json");
    let dump: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let scaled = |factor: f64| {
        let mut d = dump.clone();
        for m in d["measurements"].as_array_mut().unwrap() {
            for x in m["samples_s"].as_array_mut().unwrap() {
                *x = serde_json::json!(x.as_f64().unwrap() * factor);
            }
        }
        temp(&format!("three-level-x{factor}.json"), &d.to_string())
    };
    let infer = |path: &PathBuf, extra: &[&str]| {
        let mut args = vec!["infer", "--replay", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let (code, out, err) = treecast(&args);
        assert_eq!(code, 0, "{err}");
        let t = from_str_auto(&out, "replayed.json").expect("a tree");
        let c = metrics::compare(&truth, &t).unwrap();
        (c.rooted && c.leaf_groups, c.summary(), t.confidence().unwrap())
    };
    for factor in [0.6, 1.0, 1.5] {
        let (exact, summary, confidence) = infer(&scaled(factor), &[]);
        assert!(exact, "samples x{factor}: {summary} (confidence {confidence:.3})");
    }
    let (exact, summary, _) = infer(&scaled(0.6), &["--resolution-us", "1"]);
    assert!(
        !exact,
        "x0.6 under a 1 us floor still came out exact ({summary}): the test lost its edge"
    );
}
