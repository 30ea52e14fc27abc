//! treecast: network-topology-aware broadcast for MPI programs.
//!
//! Pipeline (docs/design.md §1):
//!
//! ```text
//!   probe --RTT samples--> infer --Topology--> plan --Plan--> exec (MPI sends)
//!                                               sim (flow model)   profile <-- estimate
//! ```
//!
//! Everything above `exec` (topology, probe's protocol, infer, plan, sim, estimate) is pure Rust
//! with no MPI dependency, so it is tested at scales one machine cannot launch. `exec`,
//! `runtime` (per-communicator state), `profile` (gathering) and `capi` (the C ABI) use MPI.

// Pure modules.
pub mod estimate;
pub mod infer;
pub mod plan;
pub mod probe;
pub mod sim;
pub mod topology;
pub mod util;

// MPI-facing modules.
pub mod api;
pub mod capi;
pub mod error;
pub mod exec;
pub mod profile;
pub mod runtime;

pub use api::{TopoBcast, TopoBuffer};

/// The MPI implementation this build was compiled against (from `mpi.h`, see `build.rs`), e.g.
/// "Open MPI 4.1.4, MPI 3.1".
pub const MPI_BUILT_WITH: &str = env!("TREECAST_MPI_BUILT_WITH");
pub use error::{Error, ErrorKind, Result};
