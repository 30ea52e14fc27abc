//! treecast's model: everything about the network and about broadcasts that needs no MPI.
//!
//! Pipeline (docs/design.md §1), the part above the sends:
//!
//! ```text
//!   probe --RTT samples--> infer --Topology--> plan --Plan--> (treecast: exec, MPI sends)
//!                                               sim (flow model)        estimate
//! ```
//!
//! - [`topology`]: the tree of ranks, hosts and switches; JSON, Slurm, DOT, RTT-matrix and
//!   groups formats; generators of model topologies.
//! - [`probe`]: the ping-pong protocol and the [`probe::Prober`] trait, with the simulated,
//!   matrix and replay probers (the MPI prober lives in the `treecast` crate).
//! - [`infer`]: the switch tree from RTTs, with confidence and rooting.
//! - [`schedule`]: the [`schedule::Plan`] every planner produces and `sim` / `exec` run.
//! - [`plan`]: the planners: cost model, optimal search, heuristics, pipelines, relays, the MPI
//!   libraries' algorithms, and the chooser that predicts them with `sim`.
//! - [`sim`]: the flow-level network simulator (runs any `Plan`; knows no planner).
//! - [`estimate`]: latency distributions and expected collective times.
//!
//! Nothing here links MPI, so `cargo test -p treecast-model` runs on any machine, and inference
//! and planning are tested at thousands of ranks. The `treecast` crate re-exports every module
//! under the same path (`treecast::infer`, ...).

pub mod estimate;
pub mod infer;
pub mod plan;
pub mod probe;
pub mod schedule;
pub mod sim;
pub mod topology;
pub mod util;
