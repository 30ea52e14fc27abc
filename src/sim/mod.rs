//! Flow-level network simulator (seed 001 with exact max-min sharing and per-hop latency).
//!
//! STUB: being written. Pinned entry point used by the planner's chooser:
//! `simulate_plan(topo, plan, bytes, &SimOptions) -> Result<SimResult, SimError>`.

use crate::plan::Plan;
use crate::topology::Topology;

/// Simulation options.
#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    /// When true, a rank runs one send at a time (blocking sends, MFS style); otherwise a rank's
    /// sends proceed concurrently as soon as issued.
    pub blocking_sends: bool,
}

/// Outcome of simulating a plan.
#[derive(Clone, Debug, Default)]
pub struct SimResult {
    /// Completion time of the whole broadcast (seconds).
    pub time_s: f64,
    /// Per rank: time at which it holds the whole message (seconds).
    pub rank_done_s: Vec<f64>,
}

/// Why a simulation could not run.
#[derive(Clone, Debug)]
pub struct SimError(pub String);

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for SimError {}

/// Simulate `plan` broadcasting `bytes` on `topo` (ranks of the plan = rank leaves of `topo`).
pub fn simulate_plan(topo: &Topology, plan: &Plan, bytes: u64, opts: &SimOptions) -> Result<SimResult, SimError> {
    let _ = (topo, plan, bytes, opts);
    Err(SimError("simulator not implemented yet".into()))
}
