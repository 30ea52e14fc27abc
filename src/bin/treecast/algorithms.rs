//! `treecast algorithms`: the registry of broadcast algorithms (`treecast::plan::registry`),
//! one entry per name with its parameters, family and help. Every name listed is accepted by
//! `plan --algorithm`, `simulate --algorithm` and `TREECAST_ALGORITHM`.

use crate::CliError;
use treecast::plan::registry::help_table;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_: Args) -> Result<(), CliError> {
    print!("{}", help_table());
    Ok(())
}
