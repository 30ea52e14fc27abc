//! treecast: network-topology-aware broadcast for MPI programs.
//!
//! Pipeline (DESIGN.md section 1):
//!
//! ```text
//!   probe --RTT samples--> infer --Topology--> plan --Plan--> exec (MPI sends)
//!                                               sim (flow model)   profile <-- estimate
//! ```
//!
//! Everything above `exec` is pure Rust with no MPI dependency, so it is tested at scales one
//! machine cannot launch. `runtime` holds per-communicator state; `capi` is the C ABI.

pub mod plan;
pub mod topology;
