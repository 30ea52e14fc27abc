//! `treecast simulate`: flow-level simulated time of a broadcast or an all-to-all on a topology.
//!
//! `treecast simulate --topology FILE --pattern bcast:root=R,bytes=N --algorithm NAME
//! [--placement block|random:SEED] [--blocking] [--ranks N] [--format text|json]`, or
//! `--pattern alltoall:algo=pairwise|simple-spread,bytes=N`. `--root R --bytes N` is a shorthand
//! for the broadcast pattern. Broadcast algorithms are every name of the registry
//! (`treecast algorithms`): the MPI libraries' (`binomial`, `knomial:k=4`, `pipeline:seg=64KiB`,
//! `ompi`, `han`, `topo-wave`, ...) and treecast's own (`auto`, `dfs-chain`, ..., which plan for
//! the placed ranks and need one on every rank leaf). JSON output carries `time_s`.

use crate::CliError;
use std::path::PathBuf;
use treecast::plan::{plan_broadcast, registry, Algorithm, PlanOptions};
use treecast::sim::alltoall::simulate_alltoall;
use treecast::sim::pattern::Pattern;
use treecast::sim::placement::{endpoints, relabelled, Placement};
use treecast::sim::{simulate_plan, SimOptions, SimResult};
use treecast::topology::load_file;
use treecast::util::bytes::parse_size;

#[derive(clap::Args)]
pub struct Args {
    /// Topology file (JSON or Slurm topology.conf, detected by content).
    #[arg(long)]
    topology: PathBuf,
    /// bcast:root=R,bytes=N or alltoall:algo=pairwise|simple-spread,bytes=N (sizes like 4MiB).
    #[arg(long)]
    pattern: Option<String>,
    /// Broadcast root (with --bytes, instead of --pattern).
    #[arg(long)]
    root: Option<u32>,
    /// Broadcast size (with --root, instead of --pattern).
    #[arg(long)]
    bytes: Option<String>,
    /// Broadcast algorithm by name, parameters after a colon (pipeline:seg=64KiB; `treecast
    /// algorithms` lists them), or the all-to-all order (pairwise, simple-spread).
    #[arg(long)]
    algorithm: Option<String>,
    /// Rank placement on the topology's rank leaves: block or random:SEED.
    #[arg(long, default_value = "block")]
    placement: String,
    /// Number of ranks taking part (default: every rank leaf).
    #[arg(long)]
    ranks: Option<u32>,
    /// One active send per rank (MFS style) instead of all issued sends at once.
    #[arg(long)]
    blocking: bool,
    /// CPU time per send (LogP's o), microseconds: a rank's sends start at least this far
    /// apart (the plan chooser uses 1 us; 0 is the pure flow model).
    #[arg(long, default_value_t = 0.0)]
    send_overhead_us: f64,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
}

fn input<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> CliError + '_ {
    move |e| CliError::Input(format!("{what}: {e}"))
}

fn pattern(args: &Args) -> Result<Pattern, CliError> {
    match (&args.pattern, args.root, &args.bytes) {
        (Some(p), None, None) => p.parse().map_err(input("--pattern")),
        (None, root, Some(b)) => Ok(Pattern::Bcast {
            root: root.unwrap_or(0),
            bytes: parse_size(b).map_err(input("--bytes"))?,
        }),
        (None, _, None) => Err(CliError::Input(
            "give --pattern bcast:root=R,bytes=N (or alltoall:...), or --root R --bytes N".into(),
        )),
        (Some(_), _, _) => Err(CliError::Input(
            "--pattern and --root/--bytes are alternatives; give one".into(),
        )),
    }
}

pub fn run(args: Args) -> Result<(), CliError> {
    let pat = pattern(&args)?;
    let placement: Placement = args.placement.parse().map_err(input("--placement"))?;
    let topo = load_file(&args.topology)?;
    let leaves = endpoints(&topo).len();
    let n = args.ranks.unwrap_or(leaves as u32);
    if n == 0 || n as usize > leaves {
        return Err(CliError::Input(format!(
            "--ranks: {n} ranks do not fit on {} ({leaves} rank leaves)",
            args.topology.display()
        )));
    }
    let map = placement.map(n, leaves).map_err(|e| CliError::Input(e.to_string()))?;
    if !(args.send_overhead_us.is_finite() && args.send_overhead_us >= 0.0) {
        return Err(CliError::Input(format!(
            "--send-overhead-us: {} is not a number of microseconds >= 0",
            args.send_overhead_us
        )));
    }
    let opts = SimOptions {
        blocking_sends: args.blocking,
        placement: Some(map.clone()),
        send_overhead_s: args.send_overhead_us * 1e-6,
        ..SimOptions::default()
    };
    let failed = |e: treecast::sim::SimError| CliError::Failed(e.to_string());
    let (name, detail, result, bytes) = match pat {
        Pattern::Bcast { root, bytes } => {
            if root >= n {
                return Err(CliError::Input(format!(
                    "--pattern: root {root} out of range for {n} ranks"
                )));
            }
            let alg = args.algorithm.as_deref().ok_or_else(|| {
                CliError::Input(format!(
                    "--algorithm is required for a broadcast (one of: {})",
                    registry::names(None).join(", ")
                ))
            })?;
            let algorithm: Algorithm = alg.parse().map_err(input("--algorithm"))?;
            let plan = match algorithm {
                Algorithm::Library(b) => b.build(&topo, &map, root, bytes).map_err(failed)?,
                a => {
                    let placed = relabelled(&topo, &map).map_err(input("--algorithm"))?;
                    let opts = PlanOptions {
                        algorithm: a,
                        ..PlanOptions::default()
                    };
                    plan_broadcast(&placed, root, bytes, &opts).map_err(|e| CliError::Failed(e.to_string()))?
                }
            };
            let detail = format!(
                "plan {} ({} messages, {} segment{})",
                plan.info.algorithm,
                plan.num_messages(),
                plan.nsegs,
                if plan.nsegs == 1 { "" } else { "s" }
            );
            let r = simulate_plan(&topo, &plan, bytes, &opts).map_err(failed)?;
            (algorithm.to_string(), detail, r, bytes)
        }
        Pattern::Alltoall { algo, bytes } => {
            let from_flag = args
                .algorithm
                .as_deref()
                .map(|a| a.parse().map_err(input("--algorithm")))
                .transpose()?;
            let algo = match (algo, from_flag) {
                (Some(a), Some(b)) if a != b => {
                    return Err(CliError::Input(format!(
                        "--algorithm {b} contradicts the pattern's algo={a}"
                    )))
                }
                (Some(a), _) | (None, Some(a)) => a,
                (None, None) => {
                    return Err(CliError::Input(
                        "all-to-all needs algo=pairwise|simple-spread in --pattern (or --algorithm)".into(),
                    ))
                }
            };
            let r = simulate_alltoall(&topo, algo, n, bytes, &opts).map_err(failed)?;
            let detail = format!("{} messages", n as u64 * (n as u64 - 1));
            (algo.to_string(), detail, r, bytes)
        }
    };
    print(&args, &pat, &name, &detail, &result, n, bytes, &placement);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn print(args: &Args, pat: &Pattern, name: &str, detail: &str, r: &SimResult, n: u32, bytes: u64, place: &Placement) {
    let (kind, root) = match pat {
        Pattern::Bcast { root, .. } => ("bcast", Some(*root)),
        Pattern::Alltoall { .. } => ("alltoall", None),
    };
    if args.format == "json" {
        let out = serde_json::json!({
            "topology": args.topology.display().to_string(),
            "pattern": kind,
            "root": root,
            "bytes": bytes,
            "algorithm": name,
            "detail": detail,
            "ranks": n,
            "placement": place.to_string(),
            "blocking_sends": args.blocking,
            "time_s": r.time_s,
            "rank_done_s": r.rank_done_s,
            "engine": {
                "flows": r.stats.flows,
                "events": r.stats.events,
                "resolves": r.stats.resolves,
            },
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        return;
    }
    let mut done = r.rank_done_s.clone();
    done.sort_by(f64::total_cmp);
    let at = |q: f64| done[((done.len() - 1) as f64 * q).round() as usize];
    println!("topology:   {} ({n} ranks, placement {place})", args.topology.display());
    match root {
        Some(root) => println!("pattern:    broadcast of {bytes} bytes from rank {root}"),
        None => println!("pattern:    all-to-all, {bytes} bytes per message"),
    }
    println!(
        "algorithm:  {name}: {detail}; {} sends",
        if args.blocking { "blocking" } else { "non-blocking" }
    );
    println!("time:       {:.6} ms", r.time_s * 1e3);
    println!(
        "per rank:   done at min {:.6} / median {:.6} / max {:.6} ms",
        at(0.0) * 1e3,
        at(0.5) * 1e3,
        at(1.0) * 1e3
    );
}
