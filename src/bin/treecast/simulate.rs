//! `treecast simulate` (being written).

use crate::CliError;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<(), CliError> {
    Err(CliError::Failed("`treecast simulate` is not implemented yet".into()))
}
