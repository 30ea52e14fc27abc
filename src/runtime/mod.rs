//! Runtime inside an MPI job: per-communicator state, configuration, and the broadcast entry
//! point shared by the Rust API, the C ABI and the interposer.

pub mod bcast;
pub mod config;
pub mod planner;
pub mod state;

pub use bcast::bcast;
pub use config::{config, Config};
