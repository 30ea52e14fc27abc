//! `treecast topology`: generate model topologies and convert between formats.
//!
//! - `generate --family NAME [--hosts-per-switch N --switches N --ranks-per-host N
//!   --oversubscription K --latency-us X --bandwidth-gbps X --uplink-latency-us X --fanouts A,B]
//!   [--format json|slurm|dot|groups|mpich-coords] [--output FILE]`
//! - `convert FILE [--format json|slurm|dot|groups|mpich-coords] [--output FILE]` (input JSON or Slurm, by content)
//! - `compare TRUTH INFERRED [--format text|json]`: leaf groups, unrooted tree and rooted
//!   hierarchy of INFERRED against TRUTH; exit 0 when everything matches, 1 when something
//!   differs (printed), 2 on bad input.
//! - `examples DIR`: write the example files shipped in `topologies/` (regenerates them).

use crate::CliError;
use std::path::{Path, PathBuf};
use treecast::topology::gen::{self, GenOptions};
use treecast::topology::{load_file, Format, Topology};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Generate a topology family (star, dual-cpu, uniform, nonuniform, testbed, fat-tree, two-level, emu).
    Generate(Box<GenerateArgs>),
    /// Convert a topology file (JSON or Slurm topology.conf, detected by content).
    Convert(ConvertArgs),
    /// Compare an inferred topology with the truth: leaf groups, tree, rooted hierarchy (exit 1
    /// when they differ).
    Compare(CompareArgs),
    /// Write the example topologies shipped with treecast into DIR.
    Examples {
        /// Output directory (created if missing).
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// Family name; an unknown name lists the families.
    #[arg(long)]
    family: String,
    /// Hosts per leaf switch (SMPs per cluster for the cluster families of [Hourai2004]).
    #[arg(long)]
    hosts_per_switch: Option<usize>,
    /// Leaf switches below the top switch.
    #[arg(long)]
    switches: Option<usize>,
    /// 0: host-level tree (node leaves); N >= 1: N rank leaves below each host.
    #[arg(long)]
    ranks_per_host: Option<usize>,
    /// k of k:1 oversubscribed uplinks (two-level).
    #[arg(long, allow_negative_numbers = true)]
    oversubscription: Option<f64>,
    /// One-way latency of host links, microseconds.
    #[arg(long, allow_negative_numbers = true)]
    latency_us: Option<f64>,
    /// Bandwidth of host links, Gbit/s.
    #[arg(long, allow_negative_numbers = true)]
    bandwidth_gbps: Option<f64>,
    /// One-way latency of switch-to-switch links, microseconds.
    #[arg(long, allow_negative_numbers = true)]
    uplink_latency_us: Option<f64>,
    /// Switch fan-out per level from the top, e.g. 2,4 (fat-tree).
    #[arg(long, value_delimiter = ',')]
    fanouts: Option<Vec<usize>>,
    /// Output format: json, slurm, dot, groups or mpich-coords (MPICH's MPIR_CVAR_COORDINATES_FILE).
    #[arg(long, default_value = "json")]
    format: String,
    /// Write here instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ConvertArgs {
    /// Topology file (JSON or Slurm topology.conf).
    file: PathBuf,
    /// Output format: json, slurm, dot, groups or mpich-coords (MPICH's MPIR_CVAR_COORDINATES_FILE).
    #[arg(long, default_value = "json")]
    format: String,
    /// Write here instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// The true topology (JSON or Slurm topology.conf).
    truth: PathBuf,
    /// The inferred topology (JSON or Slurm topology.conf).
    inferred: PathBuf,
    /// text (one line) or json.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
}

fn format(name: &str) -> Result<Format, CliError> {
    Format::parse_name(name).map_err(|e| CliError::Input(e.to_string()))
}

fn emit(t: &Topology, fmt: Format, output: Option<&Path>) -> Result<(), CliError> {
    let text = fmt.write(t)?;
    match output {
        None => {
            print!("{text}");
            Ok(())
        }
        Some(p) => std::fs::write(p, text).map_err(|e| CliError::Failed(format!("{}: cannot write: {e}", p.display()))),
    }
}

pub fn run(args: Args) -> Result<(), CliError> {
    match args.command {
        Cmd::Generate(a) => {
            let fmt = format(&a.format)?;
            let opts = GenOptions {
                hosts_per_switch: a.hosts_per_switch,
                switches: a.switches,
                ranks_per_host: a.ranks_per_host,
                oversubscription: a.oversubscription,
                latency_us: a.latency_us,
                bandwidth_gbps: a.bandwidth_gbps,
                uplink_latency_us: a.uplink_latency_us,
                fanouts: a.fanouts,
            };
            let t = gen::family(&a.family, &opts)?;
            emit(&t, fmt, a.output.as_deref())
        }
        Cmd::Convert(a) => {
            let fmt = format(&a.format)?;
            let t = load_file(&a.file)?;
            emit(&t, fmt, a.output.as_deref())
        }
        Cmd::Compare(a) => {
            let (truth, inferred) = (load_file(&a.truth)?, load_file(&a.inferred)?);
            let c = treecast::infer::metrics::compare(&truth, &inferred)?;
            if a.format == "json" {
                println!(
                    "{}",
                    serde_json::to_string(&c).map_err(|e| CliError::Failed(e.to_string()))?
                );
            } else {
                println!("{}", c.summary());
            }
            if c.rooted && c.leaf_groups {
                Ok(())
            } else {
                Err(CliError::Quiet(1))
            }
        }
        Cmd::Examples { dir } => {
            std::fs::create_dir_all(&dir).map_err(|e| CliError::Failed(format!("{}: {e}", dir.display())))?;
            for (file, t) in gen::examples() {
                let path = dir.join(file);
                let fmt = Format::from_path(&path).expect("example files have known extensions");
                emit(&t, fmt, Some(&path))?;
                println!("{}", path.display());
            }
            Ok(())
        }
    }
}
