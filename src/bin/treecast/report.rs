//! `treecast report PROFILE.json [--svg DIR]`: mpiP-style text table and SVG charts of a
//! profile written by `TREECAST_PROFILE`.

use crate::CliError;
use std::path::PathBuf;
use treecast::profile::{render, ProfileReport};

#[derive(clap::Args)]
pub struct Args {
    /// Profile file written by a job run with TREECAST_PROFILE=path.
    profile: PathBuf,
    /// Also write SVG charts (per-site histograms, predicted vs measured, a Gantt chart of one
    /// call per rank) into this directory.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Output format of the table.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let report = ProfileReport::load(&args.profile).map_err(|e| CliError::Input(e.to_string()))?;
    if args.format == "json" {
        println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    } else {
        print!("{}", render::text(&report));
    }
    if let Some(dir) = args.svg {
        let files = render::write_svgs(&report, &dir)
            .map_err(|e| CliError::Failed(format!("cannot write charts to {}: {e}", dir.display())))?;
        eprintln!("wrote {} charts to {}", files.len(), dir.display());
    }
    Ok(())
}
