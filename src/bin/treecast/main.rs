//! `treecast` command-line interface (docs/design.md §4.6).
//!
//! Exit codes: 0 success, 2 bad input (one-line error naming file/line/field), 1 other failure.
//! Each subcommand lives in its own file with its clap `Args` and a `run` function.

use clap::{Parser, Subcommand};

mod algorithms;
mod bench;
mod cli_error;
mod estimate;
mod infer;
mod plan;
mod probe;
mod report;
mod simulate;
mod topology;

use cli_error::CliError;

#[derive(Parser)]
#[command(
    name = "treecast",
    version = concat!(env!("CARGO_PKG_VERSION"), " (built with ", env!("TREECAST_MPI_BUILT_WITH"), ")"),
    about = "Topology-aware MPI broadcast: infer, plan, simulate, estimate, probe, bench"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the broadcast algorithms: names, parameters, family, one line of help.
    Algorithms(algorithms::Args),
    /// Infer a switch tree from an RTT matrix, or evaluate inference on a model topology.
    Infer(infer::Args),
    /// Compute a broadcast plan for a topology.
    Plan(plan::Args),
    /// Simulate a broadcast or all-to-all on a topology (flow-level).
    Simulate(simulate::Args),
    /// Expected maximum and quantiles of collective time from latency models or samples.
    Estimate(estimate::Args),
    /// (under mpirun) topo_bcast vs MPI_Bcast median times and their ratio.
    Bench(bench::Args),
    /// (under mpirun) The network tree of the live job: hosts, then file, cache or RTT probing.
    Probe(probe::Args),
    /// Text table and SVG charts of a profile written by TREECAST_PROFILE.
    Report(report::Args),
    /// Generate model topologies and convert between topology formats.
    Topology(topology::Args),
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().filter_or("TREECAST_LOG", "warn")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Algorithms(a) => algorithms::run(a),
        Command::Infer(a) => infer::run(a),
        Command::Plan(a) => plan::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Estimate(a) => estimate::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Report(a) => report::run(a),
        Command::Probe(a) => probe::run(a),
        Command::Topology(a) => topology::run(a),
    };
    if let Err(e) = result {
        if !matches!(e, cli_error::CliError::Quiet(_)) {
            eprintln!("treecast: {e}");
        }
        std::process::exit(e.exit_code());
    }
}
