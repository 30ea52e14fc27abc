//! `treecast infer` (being written).

use crate::CliError;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<(), CliError> {
    Err(CliError::Failed("`treecast infer` is not implemented yet".into()))
}
