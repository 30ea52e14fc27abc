//! `treecast estimate`: E[max] and quantiles of collective time over n receivers ([Kaishima2005]).
//!
//! ```text
//! treecast estimate --pareto k=41.7,alpha=16.9 --n 64
//! treecast estimate --normal mu=44.3,sigma=2.8 --n 64 --quantile 0.9
//! treecast estimate --samples rtt_us.txt --n 1000 --format json
//! ```
//!
//! `--samples` reads one latency per line (microseconds; blank lines and `#` comments are
//! skipped), fits both models (Hill MLE for Pareto, mean/sd for normal) and prints both. JSON
//! output: one object per model with `model`, its parameters, `n`, `expected_max`, `p50`, `p99`
//! and `quantiles` (`[{"p", "value"}]` for each `--quantile`); `--samples` wraps them as
//! `{"file", "samples", "n", "pareto": {..}, "normal": {..}}`. An infinite E[max] (Pareto
//! alpha <= 1 given by hand) is `null`. Bad input exits 2 with one line naming the flag or
//! `file:line`.

use crate::CliError;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use treecast::estimate::{
    fit_normal, fit_pareto, normal, normal_expected_max_iid, pareto, Marginal, MaxOf, Normal, Pareto,
};

#[derive(clap::Args)]
pub struct Args {
    /// Identical Pareto receivers: `k=K,alpha=A` (minimum and tail index).
    #[arg(long, value_name = "k=K,alpha=A")]
    pareto: Option<String>,
    /// Identical normal receivers: `mu=M,sigma=S`.
    #[arg(long, value_name = "mu=M,sigma=S")]
    normal: Option<String>,
    /// Latency samples, one value in microseconds per line; fits and prints both models.
    #[arg(long, value_name = "FILE")]
    samples: Option<PathBuf>,
    /// Number of receivers (>= 1; need not be an integer).
    #[arg(long, value_name = "N", default_value = "1")]
    n: String,
    /// Extra quantile of the maximum to print, 0 < P < 1 (repeatable); p50 and p99 are always printed.
    #[arg(long = "quantile", value_name = "P")]
    quantiles: Vec<String>,
    /// Output format: text or json.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    format: String,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let json_out = match args.format.as_str() {
        "text" => false,
        "json" => true,
        f => return Err(CliError::Input(format!("--format: expected text or json, got '{f}'"))),
    };
    let n = parse_number("--n", &args.n)?;
    if !(n.is_finite() && n >= 1.0) {
        return Err(CliError::Input(format!(
            "--n: must be a finite number >= 1, got {}",
            args.n
        )));
    }
    let mut ps = vec![0.5, 0.99];
    for q in &args.quantiles {
        let p = parse_number("--quantile", q)?;
        if !(p > 0.0 && p < 1.0) {
            return Err(CliError::Input(format!("--quantile: must be in (0, 1), got {q}")));
        }
        ps.push(p);
    }
    let given = [args.pareto.is_some(), args.normal.is_some(), args.samples.is_some()];
    match given.iter().filter(|&&g| g).count() {
        0 => return Err(CliError::Input("give one of --pareto, --normal or --samples".into())),
        1 => {}
        _ => {
            return Err(CliError::Input(
                "give only one of --pareto, --normal or --samples".into(),
            ))
        }
    }
    let out = if let Some(spec) = &args.pareto {
        let kv = parse_params("--pareto", spec, &["k", "alpha"])?;
        let p = Pareto::new(kv[0], kv[1]).map_err(|e| CliError::Input(format!("--{e}")))?;
        vec![report("pareto", &Marginal::Pareto(p), n, &ps, None)?]
    } else if let Some(spec) = &args.normal {
        let kv = parse_params("--normal", spec, &["mu", "sigma"])?;
        let d = Normal::new(kv[0], kv[1]).map_err(|e| CliError::Input(format!("--{e}")))?;
        vec![report("normal", &Marginal::Normal(d), n, &ps, None)?]
    } else {
        let path = args.samples.as_ref().expect("checked above");
        return samples_report(path, n, &ps, json_out);
    };
    for r in out {
        print_one(&r, json_out);
    }
    Ok(())
}

/// One model's results.
struct Report {
    json: Value,
    text: String,
}

fn print_one(r: &Report, json_out: bool) {
    if json_out {
        println!("{}", r.json);
    } else {
        print!("{}", r.text);
    }
}

fn samples_report(path: &Path, n: f64, ps: &[f64], json_out: bool) -> Result<(), CliError> {
    let xs = read_samples(path)?;
    let file = path.display().to_string();
    // read_samples guarantees a non-empty window of finite values > 0, so both fits succeed.
    let pf = fit_pareto(&xs).map_err(|e| CliError::Input(format!("{file}: {e}")))?;
    let nf = fit_normal(&xs).map_err(|e| CliError::Input(format!("{file}: {e}")))?;
    let note = if pf.alpha.is_infinite() {
        Some("all samples equal: alpha is infinite, the model is a point mass at k".to_string())
    } else if pf.alpha <= 1.0 {
        Some(format!(
            "alpha <= 1: clipped at x0 = k m^(1/alpha) = {:.6} ([Kaishima2005] Eq. 13)",
            pf.truncation_point()
        ))
    } else {
        None
    };
    let p = report_fitted("pareto", &pf.marginal(), (pf.k, pf.alpha), n, ps, note)?;
    let nnote = (nf.sigma == 0.0).then(|| "sigma is 0: the model is a point mass at mu".to_string());
    let q = report_fitted("normal", &nf.marginal(), (nf.mu, nf.sigma), n, ps, nnote)?;
    if json_out {
        println!(
            "{}",
            json!({"file": file, "samples": xs.len(), "n": n, "pareto": p.json, "normal": q.json})
        );
    } else {
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "{file}: {} samples (us), min {min:.6}, max {max:.6}, mean {:.6}, sd {:.6}",
            xs.len(),
            nf.mu,
            nf.sigma
        );
        print!("{}{}", p.text, q.text);
    }
    Ok(())
}

/// A fitted model: the parameters printed are the fit's (alpha may be infinite, sigma 0), the
/// numbers come from the degenerate-case marginal.
fn report_fitted(
    name: &str,
    m: &Marginal,
    params: (f64, f64),
    n: f64,
    ps: &[f64],
    note: Option<String>,
) -> Result<Report, CliError> {
    let mut r = report(name, m, n, ps, note)?;
    let (a, b) = params;
    let (ka, kb) = if name == "pareto" {
        ("k", "alpha")
    } else {
        ("mu", "sigma")
    };
    r.json[ka] = finite_or_null(a);
    r.json[kb] = finite_or_null(b);
    let first_line_end = r.text.find('\n').unwrap_or(r.text.len());
    let header = format!("{name}: {ka}={a} {kb}={b} (n = {n} receivers)");
    r.text.replace_range(..first_line_end, &header);
    Ok(r)
}

fn finite_or_null(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// E[max] and quantiles of the maximum of `n` iid receivers with latency `m`.
fn report(name: &str, m: &Marginal, n: f64, ps: &[f64], note: Option<String>) -> Result<Report, CliError> {
    let fail = |e: treecast::estimate::EstimateError| CliError::Failed(e.to_string());
    // Closed forms where they exist; quadrature (MaxOf with multiplicity n) otherwise.
    let (expected, quantiles): (f64, Vec<f64>) = match m {
        Marginal::Pareto(p) if p.shift == 0.0 && p.cap.is_none() => (
            pareto::expected_max_iid(p.k, p.alpha, n),
            ps.iter()
                .map(|&q| pareto::max_quantile_iid(p.k, p.alpha, n, q))
                .collect(),
        ),
        Marginal::Normal(d) => (
            normal_expected_max_iid(d.mu, d.sigma, n).map_err(fail)?,
            ps.iter()
                .map(|&q| normal::max_quantile_iid(d.mu, d.sigma, n, q))
                .collect(),
        ),
        m => {
            let mut set = MaxOf::new();
            set.push_many(*m, n).map_err(fail)?;
            let d = set.distribution().map_err(fail)?;
            (d.expected_max(), ps.iter().map(|&q| d.quantile(q)).collect())
        }
    };
    let mut j = json!({"model": name, "n": n, "expected_max": finite_or_null(expected)});
    match m {
        Marginal::Pareto(p) => {
            j["k"] = json!(p.k);
            j["alpha"] = json!(p.alpha);
            if let Some(x0) = p.cap {
                j["x0"] = json!(x0);
            }
        }
        Marginal::Normal(d) => {
            j["mu"] = json!(d.mu);
            j["sigma"] = json!(d.sigma);
        }
        Marginal::Point(v) => j["point"] = json!(v),
    }
    j["p50"] = json!(quantiles[0]);
    j["p99"] = json!(quantiles[1]);
    j["quantiles"] = Value::Array(
        ps.iter()
            .zip(&quantiles)
            .map(|(p, v)| json!({"p": p, "value": v}))
            .collect(),
    );
    if let Some(t) = &note {
        j["note"] = json!(t);
    }
    let params = match m {
        Marginal::Pareto(p) => format!("k={} alpha={}", p.k, p.alpha),
        Marginal::Normal(d) => format!("mu={} sigma={}", d.mu, d.sigma),
        Marginal::Point(v) => format!("point={v}"),
    };
    let mut text = format!("{name}: {params} (n = {n} receivers)\n");
    if let Some(t) = &note {
        text += &format!("  note: {t}\n");
    }
    if expected.is_finite() {
        text += &format!("  E[max] = {expected:.6}\n");
    } else {
        text += "  E[max] = infinite (alpha <= 1: the mean does not exist)\n";
    }
    for (p, v) in ps.iter().zip(&quantiles) {
        text += &format!("  {:<6} = {v:.6}\n", percentile_label(*p));
    }
    Ok(Report { json: j, text })
}

/// `p50`, `p99`, `p99.9` (no floating-point noise such as `p98.99999999999999`).
fn percentile_label(p: f64) -> String {
    let s = format!("{:.6}", p * 100.0);
    format!("p{}", s.trim_end_matches('0').trim_end_matches('.'))
}

fn parse_number(what: &str, s: &str) -> Result<f64, CliError> {
    s.trim()
        .parse::<f64>()
        .map_err(|_| CliError::Input(format!("{what}: not a number: '{s}'")))
}

/// Parse `a=1,b=2` with exactly the given keys (any order).
fn parse_params(flag: &str, spec: &str, keys: &[&str]) -> Result<Vec<f64>, CliError> {
    let mut vals = vec![None; keys.len()];
    for part in spec.split(',') {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            CliError::Input(format!(
                "{flag}: expected {}, got '{spec}'",
                keys.iter().map(|k| format!("{k}=..")).collect::<Vec<_>>().join(",")
            ))
        })?;
        let k = k.trim();
        let i = keys.iter().position(|&key| key == k).ok_or_else(|| {
            CliError::Input(format!(
                "{flag}: unknown parameter '{k}' (expected {})",
                keys.join(", ")
            ))
        })?;
        if vals[i].is_some() {
            return Err(CliError::Input(format!("{flag}: parameter '{k}' given twice")));
        }
        vals[i] = Some(parse_number(&format!("{flag}: {k}"), v)?);
    }
    keys.iter()
        .zip(vals)
        .map(|(k, v)| v.ok_or_else(|| CliError::Input(format!("{flag}: missing parameter '{k}'"))))
        .collect()
}

/// One latency (microseconds, finite, > 0) per line; `#` comments and blank lines skipped.
fn read_samples(path: &Path) -> Result<Vec<f64>, CliError> {
    let file = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| CliError::Input(format!("{file}: cannot read: {e}")))?;
    let mut xs = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if line.contains(|c: char| c == ',' || c.is_whitespace()) {
            return Err(CliError::Input(format!(
                "{file}:{}: expected one value per line, got '{line}'",
                i + 1
            )));
        }
        let x: f64 = line
            .parse()
            .map_err(|_| CliError::Input(format!("{file}:{}: not a number: '{line}'", i + 1)))?;
        if !(x.is_finite() && x > 0.0) {
            return Err(CliError::Input(format!(
                "{file}:{}: a latency must be a finite number > 0, got {line}",
                i + 1
            )));
        }
        xs.push(x);
    }
    if xs.is_empty() {
        return Err(CliError::Input(format!("{file}: no samples")));
    }
    Ok(xs)
}
