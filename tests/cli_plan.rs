//! `treecast plan`: json/text/svg output on success, exit code 2 and a one-line error on bad
//! input.

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
fn optimal_json_reports_the_search() {
    let topo = shipped("paper-nonuniform-2x3.json");
    let (code, out, err) = treecast(&[
        "plan",
        "--topology",
        &topo,
        "--root",
        "0",
        "--bytes",
        "1MiB",
        "--algorithm",
        "optimal",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["algorithm"], "optimal");
    assert_eq!(v["proven_optimal"], true);
    assert!(v["nodes_explored"].as_u64().unwrap() > 0);
    assert!(v["search_time_s"].as_f64().unwrap() >= 0.0);
    let predicted = v["predicted_time_s"].as_f64().unwrap();
    // The proven optimum under the [Hourai2004] model (the Fig. 14 instance of [Hourai2004]: 180.5 ms).
    let model = v["model_time_s"].as_f64().unwrap();
    assert!((model - 0.1805).abs() < 1e-3, "{model}");
    assert!(predicted >= v["lower_bound_s"].as_f64().unwrap());
    // One unsegmented transfer per receiver, each ending no later than the predicted time.
    let transfers = v["transfers"].as_array().unwrap();
    assert_eq!(transfers.len(), 11);
    for t in transfers {
        assert!(t["end_s"].as_f64().unwrap() <= predicted * (1.0 + 1e-9));
        assert!(t["start_s"].as_f64().unwrap() < t["end_s"].as_f64().unwrap());
        assert_eq!(t["bytes"], 1 << 20);
    }
    // Every receiver has a relay route starting at the root.
    let relays = v["relays"].as_array().unwrap();
    assert_eq!(relays.len(), 11);
    for r in relays {
        assert_eq!(r["relays"][0], 0);
        assert!(r["path"].as_array().unwrap().len() >= 3);
    }
}

#[test]
fn auto_text_and_svg() {
    // A host-level tree (host leaves, no ranks): one rank per host.
    let topo = shipped("two-level-4to1-4x4.json");
    let (code, out, err) = treecast(&["plan", "--topology", &topo, "--bytes", "4MiB"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("(host-level tree") && out.contains("on 16 ranks"),
        "{out}"
    );
    let topo = shipped("paper-dual-cpu-2x8.json");
    let (code, out, err) = treecast(&["plan", "--topology", &topo, "--root", "3", "--bytes", "4MiB"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("plan: "), "{out}");
    assert!(out.contains("predicted time:") && out.contains("candidates:"), "{out}");
    let (code, out, err) = treecast(&[
        "plan",
        "--topology",
        &topo,
        "--bytes",
        "64KiB",
        "--algorithm",
        "chain",
        "--format",
        "svg",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("<svg") && out.trim_end().ends_with("</svg>"));
}

#[test]
fn auto_ranks_the_mpi_baselines_by_name() {
    // The MPI libraries' broadcasts are candidates of `auto`, listed as mpi:NAME, and the
    // choice is the fastest prediction of all (baselines left unsimulated carry a lower bound
    // that is already no better).
    let topo = shipped("two-level-4to1-4x4.json");
    for bytes in ["1KiB", "1MiB"] {
        let (code, out, err) = treecast(&["plan", "--topology", &topo, "--bytes", bytes, "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        let cands = v["candidates"].as_array().unwrap();
        let names: Vec<&str> = cands.iter().map(|c| c["name"].as_str().unwrap()).collect();
        for want in ["mpi:scatter-rd", "mpi:scatter-ring", "mpi:knomial:k=4"] {
            assert!(names.contains(&want), "{bytes}: {names:?}");
        }
        let algorithm = v["algorithm"].as_str().unwrap();
        assert!(names.contains(&algorithm), "{algorithm}");
        let chosen = v["predicted_time_s"].as_f64().unwrap();
        for c in cands {
            assert!(
                chosen <= c["predicted_time_s"].as_f64().unwrap(),
                "{bytes}: {algorithm} {chosen} vs {c}"
            );
        }
        // The text report names the chosen candidate the same way.
        let (code, out, err) = treecast(&["plan", "--topology", &topo, "--bytes", bytes]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&format!("plan: {algorithm} for ")), "{out}");
        assert!(out.contains("  mpi:scatter-rd "), "{out}");
    }
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let topo = shipped("paper-star-8.json");
    for (args, want) in [
        (vec!["--root", "8", "--bytes", "1"], "--root"),
        (vec!["--bytes", "lots"], "--bytes"),
        (vec!["--bytes", "1", "--algorithm", "fastest"], "--algorithm"),
        (vec!["--bytes", "1", "--time-limit", "-1"], "--time-limit"),
        (vec!["--bytes", "1", "--format", "xml"], "--format"),
        (vec!["--bytes", "1", "--segments", "0"], "--segments"),
    ] {
        let mut a = vec!["plan", "--topology", &topo];
        a.extend(args);
        let (code, out, err) = treecast(&a);
        assert_eq!(code, 2, "{a:?}: {out}{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{a:?}: {err}");
    }
    let (code, _, err) = treecast(&["plan", "--topology", "/nonexistent.json", "--bytes", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent.json"), "{err}");
}

#[test]
fn every_printed_name_can_be_passed_back() {
    // Each candidate `auto` lists is a registry name: given to --algorithm it builds the same
    // plan, predicted by the same predictor at the same time, and to `simulate` too.
    let topo = shipped("two-level-4to1-4x4.json");
    let (code, out, err) = treecast(&["plan", "--topology", &topo, "--bytes", "1MiB", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    for c in v["candidates"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let (code, out, err) = treecast(&[
            "plan",
            "--topology",
            &topo,
            "--bytes",
            "1MiB",
            "--algorithm",
            name,
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{name}: {err}");
        let again: serde_json::Value = serde_json::from_str(&out).expect("json");
        let back = again["algorithm"].as_str().unwrap();
        assert_eq!(back, name.trim_start_matches("mpi:"), "{name}");
        if c["predicted_by"] == "simulator" && again["predicted_by"] == "simulator" {
            let (a, b) = (
                c["predicted_time_s"].as_f64().unwrap(),
                again["predicted_time_s"].as_f64().unwrap(),
            );
            assert!((a - b).abs() <= 1e-12 * a, "{name}: {a} vs {b}");
        }
        let (code, _, err) = treecast(&[
            "simulate",
            "--topology",
            &topo,
            "--root",
            "0",
            "--bytes",
            "1MiB",
            "--algorithm",
            name,
        ]);
        assert_eq!(code, 0, "simulate {name}: {err}");
    }
    let (code, out, _) = treecast(&["algorithms"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("dfs-chain[:segs=S]") && out.contains("knomial[:k=K,seg=SIZE]"),
        "{out}"
    );
}

/// Above 512 ranks `auto` plans as the runtime does (the local planner, analytic estimates):
/// the printed plan is the one the runtime would run, its name builds the same plan when passed
/// back, and the whole plan is printed (every rank receives).
#[test]
fn auto_on_a_large_communicator_is_the_runtimes_local_plan() {
    let dir = std::env::temp_dir().join(format!("treecast-cli-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("t1024.json");
    let topo = topo.to_str().unwrap();
    let (code, _, err) = treecast(&[
        "topology",
        "generate",
        "--family",
        "two-level",
        "--hosts-per-switch",
        "16",
        "--switches",
        "16",
        "--ranks-per-host",
        "4",
        "--oversubscription",
        "4",
        "-o",
        topo,
    ]);
    assert_eq!(code, 0, "{err}");
    // `treecast plan` on the generated topology, root 77, JSON out, with `extra` arguments.
    let plan = |bytes: &str, extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "plan",
            "--topology",
            topo,
            "--bytes",
            bytes,
            "--root",
            "77",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = treecast(&args);
        assert_eq!(code, 0, "{bytes} {extra:?}: {err}");
        serde_json::from_str(&out).expect("json")
    };
    for bytes in ["1KiB", "4MiB"] {
        let v = plan(bytes, &[]);
        assert_eq!(v["ranks"], 1024);
        assert_eq!(v["predicted_by"], "analytic", "{bytes}");
        let candidates = v["candidates"].as_array().unwrap();
        assert!(candidates.iter().all(|c| c["predicted_by"] == "analytic"), "{bytes}");
        assert!(v["predicted_time_s"].as_f64().unwrap() >= v["lower_bound_s"].as_f64().unwrap());
        let name = v["algorithm"].as_str().unwrap().to_string();
        let relays = v["relays"].as_array().unwrap();
        assert_eq!(relays.len(), 1023, "{bytes}: every rank but the root receives");
        // The name, forced, rebuilds a plan of the same size.
        let again = plan(bytes, &["--algorithm", &name]);
        assert_eq!(again["algorithm"].as_str().unwrap(), name);
        assert_eq!(again["messages"], v["messages"], "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
