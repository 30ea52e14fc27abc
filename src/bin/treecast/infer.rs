//! `treecast infer`: infer the switch tree from a measured RTT matrix, or evaluate inference on a
//! model topology through the simulated prober.
//!
//! - `--rtt FILE.csv [--format json|slurm|dot|groups]`: the matrix acts as the prober (inference
//!   asks for pairs as it would on a live job); a pair it needs but the matrix lacks is an error
//!   naming the pair (exit 2).
//! - `--replay DUMP.json [--format ...]`: a live probe's measurements (written by
//!   `TREECAST_PROBE_DUMP`) replayed through the real protocol: each pair answers with its
//!   recorded round trips in order, and inference runs with the job's recorded settings (its
//!   resolution floor, far threshold, part leaders and give-up rule) unless `--resolution-us`
//!   or `--resolution-of-host-link` (either replaces the whole recorded floor), `--far-rtt-us`
//!   or `--give-up-us` say otherwise.
//! - `--model TOPOLOGY [--noise none|normal:sd_us=X|lomax:scale_us=X,alpha=A] [--seed S]
//!   [--trials K] [--format text|json]`: `K` inferences against simulated RTTs of the model, each
//!   scored (exact leaf-switch partition, shared-link query errors, pairs measured, rounds,
//!   virtual probe time). Extra knobs: `--strategy`, `--no-hint`, `--far-rtt-us`,
//!   `--give-up-us`, `--stall-prob`, `--loaded`, `--queries`, `--bandwidth-bytes`.

use crate::CliError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use treecast::infer::{infer, metrics, InferError, InferOptions, Strategy};
use treecast::probe::{LoadedHost, MatrixProber, NoiseModel, NoiseSpec, Outliers, ProbeDump, ProbeError, ReplayProber};
use treecast::topology::{self, Format};

#[derive(clap::Args)]
pub struct Args {
    /// Infer from this RTT matrix (CSV, microseconds).
    #[arg(long, conflicts_with_all = ["model", "replay"], required_unless_present_any = ["model", "replay"])]
    rtt: Option<PathBuf>,
    /// Infer from a live probe's recorded measurements (JSON written by TREECAST_PROBE_DUMP).
    #[arg(long, conflicts_with = "model")]
    replay: Option<PathBuf>,
    /// Evaluate inference against this model topology (JSON or Slurm topology.conf).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Output: json, slurm, dot or groups for --rtt (default json); text or json for --model
    /// (default text).
    #[arg(long)]
    format: Option<String>,
    /// Jitter of the simulated RTTs (--model): none, normal:sd_us=X or lomax:scale_us=X,alpha=A.
    #[arg(long, default_value = "none")]
    noise: String,
    /// Seed of trial 0 (trial k uses seed + k for noise and insertion order).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of inference trials (--model).
    #[arg(long, default_value_t = 1)]
    trials: usize,
    /// Strategy: auto (default: all-pairs for a complete --rtt matrix and for --model trees of
    /// at most 32 hosts, else batch), batch, paper ([Shirai2007] as published) or all-pairs.
    #[arg(long, default_value = "auto")]
    strategy: String,
    /// Do not use host order as a locality hint.
    #[arg(long)]
    no_hint: bool,
    /// Round trips at least this long (microseconds) are far: such parts of the network are
    /// inferred on their own and grafted from one round trip per far pair; `auto` finds the
    /// threshold in the data (a gap in the first round trips); `inf` measures every pair in full
    /// and builds one tree.
    #[arg(long, default_value = "auto", allow_hyphen_values = true)]
    far_rtt_us: String,
    /// Probability that a whole pair measurement is descheduled (12-16 ms per round trip).
    #[arg(long, default_value_t = 0.0)]
    stall_prob: f64,
    /// A loaded host: NAME=EXTRA_US (every message of NAME is at least EXTRA_US late).
    #[arg(long)]
    loaded: Vec<String>,
    /// Shared-link queries per trial.
    #[arg(long, default_value_t = 100_000)]
    queries: usize,
    /// Sets per pair of the ping-pong protocol (each gives one minimum; default 3).
    #[arg(long)]
    sets: Option<u32>,
    /// Most round trips per set (default 30).
    #[arg(long)]
    round_trips: Option<u32>,
    /// A round trip (after a pair's first) not back after this many microseconds, and 20 times
    /// the pair's fastest, is given up with the rest of the pair's measurement; `inf`: never
    /// (default 10000).
    #[arg(long)]
    give_up_us: Option<f64>,
    /// Also build the staged bandwidth map with transfers of this many bytes.
    #[arg(long)]
    bandwidth_bytes: Option<u64>,
    /// Switch-to-switch links shorter than this (microseconds) are contracted and reported as
    /// uncertain (default 0; with --replay, the job's recorded floor).
    #[arg(long)]
    resolution_us: Option<f64>,
    /// The same floor as a fraction of the median host link, as live jobs set it where hosts
    /// share CPUs (0.2; default 0; with --replay, the job's recorded floor).
    #[arg(long)]
    resolution_of_host_link: Option<f64>,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let strategy = match args.strategy.as_str() {
        "auto" => Strategy::Auto,
        "batch" => Strategy::Batch,
        "paper" => Strategy::Paper,
        "all-pairs" => Strategy::AllPairs,
        s => {
            return Err(CliError::Input(format!(
                "--strategy: unknown strategy '{s}' (auto, batch, paper or all-pairs)"
            )))
        }
    };
    let far_rtt_s = match args.far_rtt_us.parse::<f64>() {
        _ if args.far_rtt_us == "auto" => None,
        Ok(us) if us > 0.0 => Some(us * 1e-6),
        _ => {
            return Err(CliError::Input(format!(
                "--far-rtt-us: '{}' is not a positive number of microseconds, 'auto' or 'inf'",
                args.far_rtt_us
            )))
        }
    };
    let mut ping = treecast::probe::PingSpec::default();
    if let Some(k) = args.sets {
        if k == 0 {
            return Err(CliError::Input("--sets must be at least 1".into()));
        }
        ping.sets = k;
    }
    if let Some(k) = args.round_trips {
        if k == 0 {
            return Err(CliError::Input("--round-trips must be at least 1".into()));
        }
        ping.max_round_trips = k;
    }
    if let Some(us) = args.give_up_us {
        if us.is_nan() || us <= 0.0 {
            return Err(CliError::Input(format!(
                "--give-up-us: {us} is not a positive number of microseconds or 'inf'"
            )));
        }
        ping.give_up_s = us * 1e-6;
    }
    let resolution_s = match args.resolution_us {
        Some(us) if !(us.is_finite() && us >= 0.0) => {
            return Err(CliError::Input(format!(
                "--resolution-us: {us} is not a number of microseconds >= 0"
            )))
        }
        us => us.map(|us| us * 1e-6),
    };
    let resolution_rel = match args.resolution_of_host_link {
        Some(f) if !(f.is_finite() && (0.0..1.0).contains(&f)) => {
            return Err(CliError::Input(format!(
                "--resolution-of-host-link: {f} is not a fraction in [0, 1)"
            )))
        }
        f => f,
    };
    let opts = InferOptions {
        strategy,
        ping,
        seed: args.seed,
        locality_hint: !args.no_hint,
        far_rtt_s,
        bandwidth_bytes: args.bandwidth_bytes,
        resolution_s: resolution_s.unwrap_or(0.0),
        resolution_of_host_link: resolution_rel.unwrap_or(0.0),
        ..InferOptions::default()
    };
    // What the command line sets explicitly wins over a replayed job's recorded settings.
    let given = Given {
        far_rtt: args.far_rtt_us != "auto",
        give_up: args.give_up_us.is_some(),
        resolution: resolution_s.is_some() || resolution_rel.is_some(),
    };
    match (&args.rtt, &args.model, &args.replay) {
        (Some(file), None, None) => from_matrix(file, args.format.as_deref().unwrap_or("json"), &opts),
        (None, Some(file), None) => evaluate(file, &args, &opts),
        (None, None, Some(file)) => from_replay(file, args.format.as_deref().unwrap_or("json"), &opts, given),
        _ => Err(CliError::Input(
            "give one of --rtt FILE.csv, --replay DUMP.json or --model TOPOLOGY".into(),
        )),
    }
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

/// A missing pair is bad input; anything else from inference is a failure.
fn infer_error(e: InferError) -> CliError {
    match e {
        InferError::Probe(ProbeError::Missing(m) | ProbeError::BadRequest(m)) => CliError::Input(m),
        e => CliError::Failed(e.to_string()),
    }
}

fn from_matrix(file: &Path, format: &str, opts: &InferOptions) -> Result<(), CliError> {
    let fmt = Format::parse_name(format).map_err(|e| CliError::Input(e.to_string()))?;
    let name = file.display().to_string();
    let m = topology::rtt_csv::from_str(&read(file)?, &name)?;
    let mut prober = MatrixProber::new(&m, &name)?;
    // Every pair of a complete matrix is free: weigh them all at once.
    let complete = m.rtt_us.iter().all(|row| row.iter().all(Option::is_some));
    let mut opts = opts.clone();
    if opts.strategy == Strategy::Auto {
        opts.strategy = if complete { Strategy::AllPairs } else { Strategy::Batch };
    }
    let r = infer(&mut prober, &opts).map_err(infer_error)?;
    log::info!(
        "inferred {} switches from {} of {} pairs",
        r.topology.vertices_of_kind(topology::VertexKind::Switch).len(),
        r.stats.probe.distinct_pairs,
        m.hosts.len() * m.hosts.len().saturating_sub(1) / 2
    );
    print!("{}", fmt.write(&r.topology)?);
    Ok(())
}

/// Which of the settings a probe dump records were given on the command line.
#[derive(Clone, Copy)]
struct Given {
    far_rtt: bool,
    give_up: bool,
    resolution: bool,
}

/// `opts` with `dump`'s recorded settings, except those `given` on the command line.
fn replay_options(opts: &InferOptions, dump: &ProbeDump, given: Given) -> InferOptions {
    let Some(recorded) = &dump.settings else {
        log::warn!("the probe dump records no settings (written before they were); replaying with the defaults");
        return opts.clone();
    };
    let mut out = opts.clone().with_recorded(recorded);
    if given.far_rtt {
        out.far_rtt_s = opts.far_rtt_s;
    }
    if given.give_up {
        out.ping.give_up_s = opts.ping.give_up_s;
    }
    if given.resolution {
        out.resolution_s = opts.resolution_s;
        out.resolution_of_host_link = opts.resolution_of_host_link;
    }
    out
}

fn from_replay(file: &Path, format: &str, opts: &InferOptions, given: Given) -> Result<(), CliError> {
    let fmt = Format::parse_name(format).map_err(|e| CliError::Input(e.to_string()))?;
    let name = file.display().to_string();
    let dump = ProbeDump::from_json(&read(file)?, &name).map_err(|e| CliError::Input(e.to_string()))?;
    let mut prober = ReplayProber::new(&dump);
    let mut opts = replay_options(opts, &dump, given);
    opts.bandwidth_bytes = None;
    let r = infer(&mut prober, &opts).map_err(infer_error)?;
    log::info!(
        "replayed {} measurements of {} hosts: {} switches; recorded round trips ran out {} time(s)",
        dump.measurements.len(),
        dump.hosts.len(),
        r.topology.vertices_of_kind(topology::VertexKind::Switch).len(),
        prober.reused()
    );
    print!("{}", fmt.write(&r.topology)?);
    Ok(())
}

fn noise_model(args: &Args) -> Result<NoiseModel, CliError> {
    let jitter: NoiseSpec = args
        .noise
        .parse()
        .map_err(|e| CliError::Input(format!("--noise: {e}")))?;
    if !(0.0..=1.0).contains(&args.stall_prob) {
        return Err(CliError::Input(format!(
            "--stall-prob: {} is not a probability in [0, 1]",
            args.stall_prob
        )));
    }
    let mut loaded = Vec::new();
    for l in &args.loaded {
        let (host, us) = l
            .split_once('=')
            .ok_or_else(|| CliError::Input(format!("--loaded: '{l}' is not NAME=EXTRA_US")))?;
        let us: f64 = us
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| CliError::Input(format!("--loaded: '{us}' is not a number of microseconds >= 0")))?;
        loaded.push(LoadedHost {
            host: host.trim().to_string(),
            extra_s: us * 1e-6,
        });
    }
    Ok(NoiseModel {
        jitter,
        outliers: Outliers::emulated(args.stall_prob, 0.0),
        loaded,
    })
}

#[derive(Serialize)]
struct Report<'a> {
    model: String,
    noise: String,
    strategy: Strategy,
    seed: u64,
    #[serde(flatten)]
    evaluation: &'a metrics::Evaluation,
}

fn evaluate(file: &Path, args: &Args, opts: &InferOptions) -> Result<(), CliError> {
    let format = args.format.as_deref().unwrap_or("text");
    if format != "text" && format != "json" {
        return Err(CliError::Input(format!(
            "--format: '{format}' is not one of text, json (for --model)"
        )));
    }
    if args.trials == 0 {
        return Err(CliError::Input("--trials must be at least 1".into()));
    }
    let truth = topology::load_file(file)?;
    let noise = noise_model(args)?;
    let e = metrics::evaluate(&truth, &noise, opts, args.trials, args.seed, args.queries).map_err(infer_error)?;
    let report = Report {
        model: file.display().to_string(),
        noise: args.noise.clone(),
        strategy: opts.strategy,
        seed: args.seed,
        evaluation: &e,
    };
    if format == "json" {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| CliError::Failed(e.to_string()))?
        );
        return Ok(());
    }
    println!(
        "model {} ({} hosts), noise {}, strategy {:?}, {} trial(s) from seed {}",
        report.model, e.hosts, report.noise, report.strategy, e.trials, args.seed
    );
    println!(
        "exact leaf-switch partition   {:.1}% of trials",
        100.0 * e.exact_partition_rate
    );
    println!(
        "wrong but confident           {:.1}% of trials (a wrong partition stating >= {})",
        100.0 * e.wrong_confident_rate,
        metrics::CONFIDENT
    );
    println!(
        "shared-link query errors      fp {:.4}%  fn {:.4}%  ({} queries per trial)",
        100.0 * e.shared_link_fp_rate,
        100.0 * e.shared_link_fn_rate,
        args.queries
    );
    println!(
        "pairs measured                {:.2}% (max {:.2}%)",
        100.0 * e.pairs_measured_fraction,
        100.0 * e.max_pairs_measured_fraction
    );
    println!("rounds                        {:.1}", e.rounds);
    println!(
        "virtual probe time            {:.4} s (max {:.4} s)",
        e.virtual_probe_time_s, e.max_virtual_probe_time_s
    );
    if e.trials > 1 {
        println!("trial  seed  exact  conf   fp%      fn%      pairs%  rounds  time_s");
        for (i, t) in e.per_trial.iter().enumerate() {
            println!(
                "{i:5}  {:4}  {:5}  {:.3}  {:7.4}  {:7.4}  {:6.2}  {:6}  {:.4}",
                t.seed,
                if t.exact_partition { "yes" } else { "no" },
                t.confidence,
                100.0 * t.shared_link_fp_rate,
                100.0 * t.shared_link_fn_rate,
                100.0 * t.pairs_measured_fraction,
                t.rounds,
                t.virtual_probe_time_s
            );
        }
    }
    Ok(())
}
