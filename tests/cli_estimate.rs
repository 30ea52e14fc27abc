//! `treecast estimate` end to end: numbers match the library, bad input exits 2 with one line.

use std::process::Command;
use treecast::estimate::{fit_pareto, normal, pareto};

fn treecast(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_treecast"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = treecast(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn tmp(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("treecast-cli-estimate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn pareto_and_normal_json() {
    let v = json(&[
        "estimate",
        "--pareto",
        "k=41.7,alpha=16.9",
        "--n",
        "64",
        "--format",
        "json",
    ]);
    let want = pareto::expected_max_iid(41.7, 16.9, 64.0);
    assert!((v["expected_max"].as_f64().unwrap() - want).abs() < 1e-9 * want);
    assert!((v["p99"].as_f64().unwrap() - pareto::max_quantile_iid(41.7, 16.9, 64.0, 0.99)).abs() < 1e-9);
    assert_eq!(v["k"].as_f64(), Some(41.7));
    assert_eq!(v["alpha"].as_f64(), Some(16.9));
    let v = json(&[
        "estimate",
        "--normal",
        "mu=44.3,sigma=2.8",
        "--n",
        "2",
        "--quantile",
        "0.9",
        "--format",
        "json",
    ]);
    let want = 44.3 + 2.8 / std::f64::consts::PI.sqrt();
    assert!((v["expected_max"].as_f64().unwrap() - want).abs() < 1e-7);
    let q = &v["quantiles"][2];
    assert_eq!(q["p"].as_f64(), Some(0.9));
    assert!((q["value"].as_f64().unwrap() - normal::max_quantile_iid(44.3, 2.8, 2.0, 0.9)).abs() < 1e-9);
    // alpha <= 1 by hand: no mean, quantiles still defined.
    let v = json(&["estimate", "--pareto", "k=1,alpha=0.5", "--n", "3", "--format", "json"]);
    assert!(v["expected_max"].is_null());
    assert!(v["p50"].as_f64().unwrap() > 1.0);
}

#[test]
fn samples_fit_both_models() {
    let f = tmp(
        "s.txt",
        "# one-way latency, us\n41\n42.5\n\n44 # a comment\n47.1\n41.3\n",
    );
    let v = json(&["estimate", "--samples", &f, "--n", "100", "--format", "json"]);
    assert_eq!(v["samples"].as_u64(), Some(5));
    let fit = fit_pareto(&[41.0, 42.5, 44.0, 47.1, 41.3]).unwrap();
    assert_eq!(v["pareto"]["k"].as_f64(), Some(41.0));
    assert!((v["pareto"]["alpha"].as_f64().unwrap() - fit.alpha).abs() < 1e-12);
    let want = pareto::expected_max_iid(fit.k, fit.alpha, 100.0);
    assert!((v["pareto"]["expected_max"].as_f64().unwrap() - want).abs() < 1e-9 * want);
    assert!((v["normal"]["mu"].as_f64().unwrap() - 43.18).abs() < 1e-12);
    assert!(
        v["normal"]["expected_max"].as_f64().unwrap() < want,
        "Fig. 4: Pareto above normal"
    );
    // Degenerate window: all equal -> point mass (alpha null in JSON, E[max] = k).
    let f = tmp("eq.txt", "5\n5\n5\n");
    let v = json(&["estimate", "--samples", &f, "--n", "10", "--format", "json"]);
    assert!(v["pareto"]["alpha"].is_null());
    assert_eq!(v["pareto"]["expected_max"].as_f64(), Some(5.0));
    assert_eq!(v["normal"]["expected_max"].as_f64(), Some(5.0));
    // alpha <= 1: clipped at x0 = k m^(1/alpha), a finite E[max] and a note.
    let f = tmp("heavy.txt", "1\n10\n100\n1000\n");
    let (code, out, _) = treecast(&["estimate", "--samples", &f, "--n", "2"]);
    assert_eq!(code, 0);
    assert!(out.contains("clipped at x0"), "{out}");
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let bad = tmp("bad.txt", "41\n42\nfast\n");
    let neg = tmp("neg.txt", "41\n-1\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["estimate", "--samples", &bad], "bad.txt:3: not a number: 'fast'"),
        (vec!["estimate", "--samples", &neg], "neg.txt:2: a latency must be"),
        (
            vec!["estimate", "--pareto", "k=1"],
            "--pareto: missing parameter 'alpha'",
        ),
        (
            vec!["estimate", "--pareto", "k=1,alpha=zero"],
            "--pareto: alpha: not a number",
        ),
        (
            vec!["estimate", "--pareto", "k=-1,alpha=2"],
            "--pareto: k must be finite and > 0",
        ),
        (
            vec!["estimate", "--normal", "mu=1,sigma=1", "--n", "0.5"],
            "--n: must be",
        ),
        (
            vec!["estimate", "--pareto", "k=1,alpha=2", "--quantile", "1"],
            "--quantile: must be in (0, 1)",
        ),
        (vec!["estimate"], "give one of"),
        (vec!["estimate", "--samples", "/nonexistent/x.txt"], "cannot read"),
    ];
    for (args, want) in cases {
        let (code, out, err) = treecast(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
