//! `treecast probe` (run under mpirun): the network tree of the live job as treecast sees it —
//! grouped by host, then from TREECAST_TOPOLOGY, the cache, or RTT probing + inference.

use crate::CliError;
use mpi::traits::*;
use std::path::PathBuf;
use treecast::topology::{self, Format};

#[derive(clap::Args)]
pub struct Args {
    /// Output format: text (a drawn tree), json, slurm, dot, groups or mpich-coords (MPICH's
    /// MPIR_CVAR_COORDINATES_FILE, for its topology-aware trees).
    #[arg(long, default_value = "text", value_parser = ["text", "json", "slurm", "dot", "groups", "mpich-coords"])]
    format: String,
    /// Also save the tree to this file (format from its extension: .json, .conf, .dot, .groups).
    #[arg(long)]
    save: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let universe = mpi::initialize().ok_or_else(|| CliError::Failed("MPI is already initialized".into()))?;
    let world = universe.world();
    let t0 = mpi::time();
    // SAFETY: the world communicator handle is valid while `universe` lives.
    let (topo, source) =
        unsafe { treecast::runtime::comm_topology(world.as_raw()) }.map_err(|e| CliError::Failed(e.to_string()))?;
    let elapsed = mpi::time() - t0;
    // SAFETY: as above (the state exists now).
    let overhead = unsafe { treecast::runtime::comm_message_overhead_s(world.as_raw()) }
        .map_err(|e| CliError::Failed(e.to_string()))?;
    // Every rank must hold the very same tree: compare a hash of its JSON across the job.
    let text = topo.as_ref().map(|t| topology::json::to_string(t)).unwrap_or_default();
    let h = treecast::util::fnv1a(text.as_bytes());
    let (mut lo, mut hi) = (0u64, 0u64);
    world.all_reduce_into(&h, &mut lo, mpi::collective::SystemOperation::min());
    world.all_reduce_into(&h, &mut hi, mpi::collective::SystemOperation::max());
    if lo != hi {
        return Err(CliError::Failed(format!(
            "rank {} holds a different topology than another rank (hash {h:016x})",
            world.rank()
        )));
    }
    if world.rank() != 0 {
        return Ok(());
    }
    let Some(t) = topo else {
        return Err(CliError::Failed(format!("no topology: {source:?}")));
    };
    match args.format.as_str() {
        "text" => {
            println!(
                "# {} ranks; topology from {source:?}; set-up took {:.3} s; plans charge {:.1} us per message",
                world.size(),
                elapsed,
                overhead * 1e6
            );
            print!("{}", topology::text::to_string(&t));
        }
        name => {
            let fmt = Format::parse_name(name).map_err(|e| CliError::Input(e.to_string()))?;
            print!("{}", fmt.write(&t)?);
        }
    }
    if let Some(p) = args.save {
        topology::save_file(&p, &t).map_err(|e| CliError::Failed(e.to_string()))?;
        eprintln!("saved to {}", p.display());
    }
    Ok(())
}
