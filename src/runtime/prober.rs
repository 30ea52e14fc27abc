//! The MPI implementation of RTT probing between host leaders (issue 4).
//!
//! STUB until the pure probing protocol and inference land: reports that probing is
//! unavailable, identically on every rank, so start-up falls back to topology-agnostic plans.

use super::config::Config;
use super::topo::Hosts;
use crate::error::{Error, ErrorKind, Result};
use crate::topology::Topology;
use mpi::ffi::MPI_Comm;

/// Collective over `comm`: measure RTTs between host leaders and infer the host-level tree;
/// the tree is returned on rank 0 (other ranks get `Ok` of an unspecified tree or `Err`).
///
/// # Safety
/// `comm` must be our valid duplicate communicator.
pub unsafe fn probe_and_infer(_comm: MPI_Comm, _rank: u32, _hosts: &Hosts, _cfg: &Config) -> Result<Topology> {
    Err(Error::new(
        ErrorKind::Other,
        "RTT probing is not available in this build",
    ))
}
