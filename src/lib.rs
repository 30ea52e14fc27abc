//! treecast: network-topology-aware broadcast for MPI programs.
//!
//! Pipeline (docs/design.md §1):
//!
//! ```text
//!   probe --RTT samples--> infer --Topology--> plan --Plan--> exec (MPI sends)
//!                                               sim (flow model)   profile <-- estimate
//! ```
//!
//! Everything above `exec` (topology, probe's protocol, infer, plan, sim, estimate) lives in the
//! `treecast-model` crate (`crates/model`), which has no MPI dependency, so it is tested at
//! scales one machine cannot launch and without an MPI installation; its modules are
//! re-exported here under the same names. This crate adds what talks to MPI: `exec` (a plan's
//! sends), `runtime` (per-communicator state, probing over MPI, routes), `profile` (gathering)
//! and the front ends `api` (Rust) and `capi` (the C ABI).

// The model (no MPI).
pub use treecast_model::{estimate, infer, plan, probe, schedule, sim, topology, util};

// MPI-facing modules.
pub mod api;
pub mod capi;
pub mod error;
pub mod exec;
pub mod host;
pub mod profile;
pub mod runtime;

pub use api::{Route, RouteState, TopoBcast, TopoBuffer};

/// The MPI implementation this build was compiled against (from `mpi.h`, see `build.rs`), e.g.
/// "Open MPI 4.1.4, MPI 3.1".
pub const MPI_BUILT_WITH: &str = env!("TREECAST_MPI_BUILT_WITH");

/// Whether this build is against an MPICH-family MPI (MPICH, Intel MPI, ...: `build.rs`), whose
/// behaviour differs from Open MPI's where the standard leaves room (what `MPI_Bcast` returns
/// after a user error handler returns, for one).
pub const MPICH_FAMILY: bool = cfg!(treecast_mpi = "mpich");
pub use error::{Error, ErrorKind, Result};
