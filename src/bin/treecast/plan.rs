//! `treecast plan --topology FILE --root R --bytes N [--algorithm NAME] [--time-limit S]
//! [--node-limit N] [--segments S] [--format text|json|svg] [--output FILE]`
//!
//! Computes a broadcast plan (docs/design.md §4.6) and reports the algorithm, the predicted
//! completion time (and which predictor gave it), for the exact search whether it was proven
//! optimal, the nodes it explored and its time, every message with its predicted start and end,
//! and the relay routes. `svg` draws a Gantt chart of the plan per rank.

use crate::CliError;
use std::path::PathBuf;
use std::time::Duration;
use treecast::plan::gantt::gantt_svg;
use treecast::plan::local::{choose, FULL_CHOOSER_MAX_RANKS};
use treecast::plan::relay::relay_routes;
use treecast::plan::{plan_detailed, range_bounds, Algorithm, PlanOptions, Planned};
use treecast::topology::{load_file, Topology, TopologyError, VertexKind};
use treecast::util::bytes::parse_size;

#[derive(clap::Args)]
pub struct Args {
    /// Topology file (JSON or Slurm topology.conf); its rank leaves are the communicator.
    #[arg(long)]
    topology: PathBuf,
    /// Broadcast root rank.
    #[arg(long, default_value_t = 0)]
    root: u32,
    /// Message size: bytes, or with a suffix (64KiB, 4MiB; every suffix is a power of 1024).
    #[arg(long)]
    bytes: String,
    /// Algorithm by name, parameters after a colon (`treecast algorithms` lists them): auto,
    /// treecast's planners (optimal, greedy, hier, dfs-binomial, dfs-chain, two-tree,
    /// hier-pipeline, k-chains[:K]) or an MPI library's (binomial, knomial, scatter-rd, ompi,
    /// ...). Every name a report prints is accepted.
    #[arg(long, default_value = "auto")]
    algorithm: String,
    /// Time limit of the optimal search, seconds (the best schedule found so far is returned,
    /// reported as not proven).
    #[arg(long, allow_negative_numbers = true)]
    time_limit: Option<f64>,
    /// Node limit of the optimal search (a reproducible budget).
    #[arg(long)]
    node_limit: Option<u64>,
    /// Number of segments for segmented algorithms.
    #[arg(long)]
    segments: Option<u32>,
    /// CPU time per message (LogP's o), microseconds, as `treecast probe` measures it between
    /// two hosts: a rank's sends are spaced by it and segment counts weigh it (default 1).
    #[arg(long, allow_negative_numbers = true)]
    message_overhead_us: Option<f64>,
    /// text, json or svg.
    #[arg(long, default_value = "text")]
    format: String,
    /// Write here instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

/// A host-level tree (leaves are hosts, as inferred from RTTs) gets one rank per host leaf,
/// numbered in the file's vertex order (the simulator's convention for such trees).
fn with_host_ranks(topo: Topology) -> Result<Topology, TopologyError> {
    if topo.num_ranks() > 0 {
        return Ok(topo);
    }
    let leaves = topo.leaves();
    let mut b = topo.to_builder();
    for (i, &v) in leaves.iter().enumerate() {
        b.vertices[v].kind = VertexKind::Rank;
        b.vertices[v].rank = Some(i as u32);
    }
    b.build()
}

pub fn run(args: Args) -> Result<(), CliError> {
    let topo = load_file(&args.topology)?;
    let host_level = topo.num_ranks() == 0;
    let topo = with_host_ranks(topo)?;
    let n = topo.num_ranks();
    if n == 0 {
        return Err(CliError::Input(format!(
            "{}: the topology has no rank or host leaves to broadcast to",
            args.topology.display()
        )));
    }
    if args.root as usize >= n {
        return Err(CliError::Input(format!(
            "--root: {} is out of range for the {} ranks of {}",
            args.root,
            n,
            args.topology.display()
        )));
    }
    let bytes = parse_size(&args.bytes).map_err(|e| CliError::Input(format!("--bytes: {e}")))?;
    let algorithm: Algorithm = args
        .algorithm
        .parse()
        .map_err(|e: treecast::plan::NameError| CliError::Input(format!("--algorithm: {e}")))?;
    let time_limit = match args.time_limit {
        Some(t) if !(t.is_finite() && t > 0.0) => {
            return Err(CliError::Input(format!(
                "--time-limit: must be a number of seconds > 0, got {t}"
            )))
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    if args.segments == Some(0) {
        return Err(CliError::Input("--segments: must be at least 1".into()));
    }
    if let Some(o) = args.message_overhead_us.filter(|o| !(o.is_finite() && *o >= 0.0)) {
        return Err(CliError::Input(format!(
            "--message-overhead-us: must be a number of microseconds >= 0, got {o}"
        )));
    }
    let format = args.format.as_str();
    if !matches!(format, "text" | "json" | "svg") {
        return Err(CliError::Input(format!(
            "--format: unknown format '{format}' (expected text, json or svg)"
        )));
    }
    let defaults = PlanOptions::default();
    let opts = PlanOptions {
        algorithm,
        time_limit,
        node_limit: args.node_limit.or(if algorithm == Algorithm::Optimal {
            None
        } else {
            defaults.node_limit
        }),
        segments: args.segments,
        message_overhead_s: args
            .message_overhead_us
            .map_or(defaults.message_overhead_s, |o| o * 1e-6),
        ..defaults
    };
    let planned =
        if algorithm == Algorithm::Auto && opts.segments.is_none() && topo.num_ranks() > FULL_CHOOSER_MAX_RANKS {
            local_planned(&topo, args.root, bytes, opts.message_overhead_s)?
        } else {
            plan_detailed(&topo, args.root, bytes, &opts).map_err(|e| CliError::Failed(e.to_string()))?
        };
    let out = match format {
        "json" => serde_json::to_string_pretty(&json_report(&topo, &planned, bytes)).expect("json") + "\n",
        "svg" => gantt_svg(
            &planned.plan,
            &planned.timing,
            &format!(
                "{} — {} bytes from rank {}, predicted {:.3} ms",
                planned.plan.info.algorithm,
                bytes,
                args.root,
                planned.plan.info.predicted_time_s.unwrap_or(0.0) * 1e3
            ),
        ),
        _ => {
            let mut t = String::new();
            if host_level {
                t.push_str("(host-level tree: one rank per host leaf, in file order)\n");
            }
            t + &text_report(&topo, &planned, bytes)
        }
    };
    match &args.output {
        Some(p) => std::fs::write(p, out).map_err(|e| CliError::Failed(format!("{}: cannot write: {e}", p.display()))),
        None => {
            print!("{out}");
            Ok(())
        }
    }
}

/// `auto` above [`FULL_CHOOSER_MAX_RANKS`] ranks, as the runtime plans such a communicator:
/// the local planner's choice (analytic estimates, no simulator) and the full plan its
/// per-rank ops make up. The full chooser took 1.3 s at 4,096 ranks and would print a plan
/// the runtime does not run.
fn local_planned(topo: &Topology, root: u32, bytes: u64, overhead_s: f64) -> Result<Planned, CliError> {
    let t0 = std::time::Instant::now();
    let c = choose(topo, root, bytes, overhead_s).map_err(|e| CliError::Failed(e.to_string()))?;
    let plan = c.plan(topo);
    Ok(Planned {
        plan,
        timing: Vec::new(),
        evaluated: c.evaluated,
        predicted_by: "analytic",
        planning_time_s: t0.elapsed().as_secs_f64(),
        search: None,
        model_time_s: None,
    })
}

fn json_report(topo: &Topology, p: &Planned, bytes: u64) -> serde_json::Value {
    let plan = &p.plan;
    let info = &plan.info;
    let transfers: Vec<serde_json::Value> = p
        .timing
        .iter()
        .map(|t| {
            let (lo, hi) = range_bounds(bytes, plan.nsegs, t.segs);
            serde_json::json!({
                "src": t.src, "dst": t.dst, "segs": [t.segs.start, t.segs.end],
                "bytes": hi - lo, "start_s": t.start_s, "end_s": t.end_s,
            })
        })
        .collect();
    let relays: Vec<serde_json::Value> = relay_routes(topo, plan)
        .into_iter()
        .map(|r| {
            serde_json::json!({
                "rank": r.rank, "from": r.from, "relays": r.relays, "path": r.path, "switches": r.switches,
            })
        })
        .collect();
    let candidates: Vec<serde_json::Value> = p
        .evaluated
        .iter()
        .map(|e| serde_json::json!({ "name": e.name, "predicted_time_s": e.predicted_s, "predicted_by": e.by }))
        .collect();
    serde_json::json!({
        "algorithm": info.algorithm,
        "ranks": plan.nranks,
        "root": plan.root,
        "bytes": bytes,
        "segments": plan.nsegs,
        "messages": plan.num_messages(),
        "predicted_time_s": info.predicted_time_s,
        "predicted_by": p.predicted_by,
        "model_time_s": p.model_time_s,
        "lower_bound_s": info.lower_bound_s,
        "proven_optimal": info.proven_optimal,
        "nodes_explored": info.nodes_explored,
        "search_time_s": info.search_time_s,
        "planning_time_s": p.planning_time_s,
        "candidates": candidates,
        "transfers": transfers,
        "relays": relays,
    })
}

fn text_report(topo: &Topology, p: &Planned, bytes: u64) -> String {
    use std::fmt::Write;
    let plan = &p.plan;
    let info = &plan.info;
    let mut s = String::new();
    let ms = |x: f64| x * 1e3;
    let _ = writeln!(
        s,
        "plan: {} for {} bytes from rank {} on {} ranks ({} segment(s), {} messages)",
        info.algorithm,
        bytes,
        plan.root,
        plan.nranks,
        plan.nsegs,
        plan.num_messages()
    );
    let _ = writeln!(
        s,
        "predicted time: {:.4} ms ({}), lower bound {:.4} ms",
        ms(info.predicted_time_s.unwrap_or(0.0)),
        p.predicted_by,
        ms(info.lower_bound_s.unwrap_or(0.0))
    );
    if let Some((proven, nodes, secs)) = p.search {
        let _ = writeln!(
            s,
            "exact search (unsegmented [Hourai2004] model): {} after {} nodes, {:.4} s{}",
            if proven {
                "proven optimal"
            } else {
                "not proven (limit reached)"
            },
            nodes,
            secs,
            if info.proven_optimal { "; chosen" } else { "" }
        );
    }
    if let Some(m) = p.model_time_s {
        let _ = writeln!(s, "time under the [Hourai2004] model: {:.4} ms", ms(m));
    }
    let _ = writeln!(s, "planning time: {:.4} s", p.planning_time_s);
    let _ = writeln!(s, "\ncandidates:");
    for e in &p.evaluated {
        let _ = writeln!(s, "  {:<34} {:>12.4} ms  ({})", e.name, ms(e.predicted_s), e.by);
    }
    let limit = 40;
    let _ = writeln!(
        s,
        "\nmessages (first {} of {}):",
        limit.min(p.timing.len()),
        p.timing.len()
    );
    for t in p.timing.iter().take(limit) {
        let _ = writeln!(
            s,
            "  {:>5} -> {:<5} segs {:>4}..{:<4} {:>10.4} -> {:>10.4} ms",
            t.src,
            t.dst,
            t.segs.start,
            t.segs.end,
            ms(t.start_s),
            ms(t.end_s)
        );
    }
    let routes = relay_routes(topo, plan);
    let crossing: Vec<_> = routes.iter().filter(|r| r.switches > 1).collect();
    let _ = writeln!(
        s,
        "\nrelay routes of cross-switch transfers (first {} of {}):",
        limit.min(crossing.len()),
        crossing.len()
    );
    for r in crossing.iter().take(limit) {
        let chain: Vec<String> = r.relays.iter().map(|x| x.to_string()).collect();
        let _ = writeln!(
            s,
            "  rank {:>5} <- {:>5} via relays [{}], path {}",
            r.rank,
            r.from,
            chain.join(" "),
            r.path.join(" > ")
        );
    }
    s
}
