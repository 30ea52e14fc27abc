//! Runtime inside an MPI job: per-communicator state, configuration, and the broadcast entry
//! point shared by the Rust API, the C ABI and the interposer.

pub mod bcast;
pub mod config;
pub mod external;
pub mod planner;
pub mod state;

pub use bcast::{bcast, bcast_with, CallOptions};
pub use config::{config, Config};
pub use external::record_external;
