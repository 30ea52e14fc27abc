//! Runtime inside an MPI job: per-communicator state, configuration, and the broadcast entry
//! point shared by the Rust API, the C ABI and the interposer.

pub mod bcast;
pub mod burst;
pub mod calibrate;
pub mod config;
pub mod discovery;
pub mod external;
pub mod hosts;
pub mod last_call;
pub mod library_fit;
pub mod mpi_prober;
pub mod pin;
pub mod plans;
pub mod route;
pub mod setup_cache;
pub mod state;

pub use bcast::{bcast, bcast_with, CallOptions};
pub use config::{config, Config};
pub use external::{begin_external, end_external, ExternalCall};

/// The topology treecast uses for `comm` (setting up its state first if needed; collective on
/// first use) and where it came from.
///
/// # Safety
/// `comm` must be a valid intra-communicator handle.
pub unsafe fn comm_topology(
    comm: mpi::ffi::MPI_Comm,
) -> crate::error::Result<(Option<std::sync::Arc<crate::topology::Topology>>, discovery::Source)> {
    state::check_comm(comm)?;
    let slot = state::get_or_create(comm)?;
    let st = slot.lock().unwrap_or_else(|p| p.into_inner());
    Ok((st.planner.topology_arc(), st.planner.source().clone()))
}

/// The per-message overhead (seconds) the communicator's plans are made with: measured by a
/// token ring between its hosts at start-up, else the planner's default. Creates the
/// communicator's state if needed (collective, like the first `topo_bcast`).
///
/// # Safety
/// `comm` must be a valid communicator handle (or `MPI_COMM_NULL`, which is an error).
pub unsafe fn comm_message_overhead_s(comm: mpi::ffi::MPI_Comm) -> crate::error::Result<f64> {
    state::check_comm(comm)?;
    let slot = state::get_or_create(comm)?;
    let st = slot.lock().unwrap_or_else(|p| p.into_inner());
    Ok(st.planner.message_overhead_s())
}
