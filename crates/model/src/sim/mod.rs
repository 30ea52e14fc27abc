//! Flow-level network simulator ([Yazaki2010], MFS, with exact max-min sharing and per-hop latency).
//!
//! It runs any broadcast [`Plan`] — or a message pattern such as an all-to-all — on any
//! [`Topology`] at thousands of ranks, so the planner can choose among candidate plans by
//! predicted time and we can compare against the MPI libraries' own algorithms
//! ([`crate::plan::baselines`]) beyond what one machine can launch. It knows plans only as
//! schedules ([`crate::schedule`]), never the planners, so `plan` can predict with it.
//!
//! * [`flow`]: the engine. Flows along tree paths, exact max-min fair sharing by progressive
//!   filling, per-hop latency, FIFO channels; the model is documented precisely there.
//! * [`simulate_plan`]: runs a plan with the execution semantics of [`crate::schedule`] (receives
//!   pre-posted; sends issued in list order once their segments are present, so a rank forwards
//!   only what it has fully received: store-and-forward per message, pipelining across
//!   segments).
//! * [`alltoall`]: all-to-all patterns (simple spread, pairwise exchange).
//! * [`placement`]: which topology rank leaf each MPI rank runs on (block or random).
//! * [`pattern`]: `bcast:root=R,bytes=N` / `alltoall:algo=A,bytes=N` as the CLI spells them.
//! * [`smpi`]: SimGrid platform export for cross-validation against SMPI.
//!
//! Send semantics ([`SimOptions::blocking_sends`]): *non-blocking* (default) starts every
//! issued send at once; messages to the same peer stay FIFO (one connection). *Blocking* lets
//! a rank run one send at a time (MFS style): the next starts when the previous has been
//! delivered, which is when `MPI_Send` of a rendezvous-size message returns.

//!
//! What the tests establish (`sim/tests.rs`, `tests/simgrid_crossval.rs`): exact idle-path times
//! (latency sum + bytes / bottleneck), exact max-min sharing (every re-solve is checked against
//! a reference solver in the property tests), no link ever above capacity, and agreement with
//! SimGrid's SMPI to well under 0.5% on point-to-point and concurrent flows and under 2% on
//! binomial and flat broadcasts. "More bandwidth never makes a plan slower" is *not* true in
//! general — a faster transfer can start a later one early enough to contend with the critical
//! path (a Graham anomaly; `more_bandwidth_can_slow_a_plan` keeps the counterexample). What
//! holds, and is tested: more capacity never makes the max-min allocation lexicographically
//! worse, and scaling every bandwidth by c (no latency) speeds any plan up exactly c times.

pub mod alltoall;
mod error;
pub mod flow;
mod iheap;
pub mod maxmin;
pub(crate) mod network;
pub mod pattern;
pub mod placement;
mod run_plan;
pub mod smpi;
#[cfg(test)]
mod tests;

use crate::schedule::{Plan, SegRange};
use crate::topology::Topology;
pub use error::SimError;
pub use flow::{Delivery, EngineStats, FlowSim, ResourceUsage};

/// Simulation options. `Default` is what the planner wants: non-blocking sends, identity
/// placement, plan validated, nothing recorded.
#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    /// When true, a rank runs one send at a time (blocking sends, MFS style); otherwise a rank's
    /// sends proceed concurrently as soon as issued.
    pub blocking_sends: bool,
    /// `placement[r]` is the topology rank leaf MPI rank `r` runs on; `None` is the identity.
    /// Build one with [`placement::Placement::map`].
    pub placement: Option<Vec<u32>>,
    /// Record per-transfer times (for Gantt charts) and per-link usage in the result.
    pub record: bool,
    /// Skip `Plan::validate` (for planners whose plans are valid by construction). An invalid
    /// plan then yields an error only if it deadlocks.
    pub trusted_plan: bool,
    /// Check every rate re-solve against the reference max-min solver and every link against
    /// its capacity (slow; for tests). A violation panics.
    pub audit: bool,
    /// Re-fill every flow at every event instead of only the affected ones (identical results;
    /// the baseline `examples/bench_sim.rs` measures the incremental solver against).
    pub full_resolve: bool,
    /// CPU time a rank spends on each message it sends or receives (LogP's `o`), one message
    /// at a time: a rank's sends start at least this far apart, and a received message is
    /// usable this long after it arrived (or after the rank's previous message work). The flow
    /// model alone lets a rank start any number of sends at the same instant and relay a
    /// message the moment it lands, which favours wide fan-outs and long chains of small
    /// messages that no MPI library delivers; 0 is the pure flow model.
    pub send_overhead_s: f64,
    /// Time a rank that is idle when a message lands on it takes to get a CPU and start on it
    /// (seconds): paid before the receive overhead, only when the rank's CPU has had nothing
    /// to do since its previous work (or its entry). Why apart from `send_overhead_s`: where
    /// ranks wait by yielding the CPU to others (oversubscribed or emulated hosts), a relay
    /// that was asleep pays tens of microseconds to be scheduled, but the segments of a
    /// pipeline that reach a busy relay do not; charged to every message, it made pipelines
    /// look up to 85% slower than they ran. 0: no such delay.
    pub wake_s: f64,
    /// Ranks that share CPUs: the per-message work (`send_overhead_s`) of ranks in one pool is
    /// served by the pool's CPUs, each doing one thing at a time. Why: hosts emulated on one
    /// machine, or more ranks than cores, run their messages' CPU time on the same few cores,
    /// so a pipeline there is as fast as the cores' total work allows, not each relay's.
    /// `None`: every rank has a CPU of its own.
    pub cpu_pools: Option<CpuPools>,
    /// Messages longer than this many bytes are sent by rendezvous: their data leaves after a
    /// handshake (see `run_plan`). `None`: every message leaves at once.
    pub rendezvous_bytes: Option<f64>,
    /// Per rank (broadcast plans): when it enters the call, seconds. A rank issues no send and
    /// takes no message in before it enters, and a rendezvous waits for the receiver to answer;
    /// an eager message may arrive earlier and is taken in on entry. `None`: every rank enters
    /// at 0. Profiles predict a call from the entries its ranks actually made with this.
    pub enter_s: Option<Vec<f64>>,
    /// Link directions policed by a token bucket ([`FlowSim::set_bucket`]): each passes its
    /// peak while its bucket holds tokens, then its sustained rate (broadcast plans).
    pub buckets: Vec<SimBucket>,
}

/// A token bucket on one direction of a topology link, as a call finds it
/// ([`SimOptions::buckets`]; rates in bytes per second).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimBucket {
    pub link: usize,
    /// From the link's `a` to its `b`.
    pub forward: bool,
    pub depth_bytes: f64,
    /// Tokens when the call starts.
    pub level_bytes: f64,
    pub peak_bps: f64,
    pub sustained_bps: f64,
}

/// Which ranks share CPUs ([`SimOptions::cpu_pools`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuPools {
    /// Per plan rank: its pool, or `None` for a rank with a CPU of its own.
    pub pool_of: Vec<Option<u32>>,
    /// Per pool: how many CPUs its ranks share (at least 1).
    pub cpus: Vec<u32>,
}

/// One point-to-point transfer of a simulated run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransferRecord {
    pub src: u32,
    pub dst: u32,
    /// Segments carried (broadcast plans) or `None` (message patterns).
    pub segs: Option<SegRange>,
    pub bytes: u64,
    /// When the sender issued the send.
    pub issued_s: f64,
    /// When the first byte left (later than `issued_s` if it queued behind a message to the
    /// same peer).
    pub start_s: f64,
    /// When the last byte left the sender.
    pub src_done_s: f64,
    /// When the receiver had every byte.
    pub end_s: f64,
}

/// Outcome of a simulation.
#[derive(Clone, Debug, Default)]
pub struct SimResult {
    /// Completion time of the whole operation (seconds).
    pub time_s: f64,
    /// Per rank: time at which it holds the whole message (broadcast) or received its last
    /// message (patterns); 0 for a rank that receives nothing.
    pub rank_done_s: Vec<f64>,
    /// Every transfer, in delivery order (only with [`SimOptions::record`]).
    pub transfers: Vec<TransferRecord>,
    /// Usage of every capacity resource (only with [`SimOptions::record`]).
    pub links: Vec<ResourceUsage>,
    /// Work the engine did.
    pub stats: EngineStats,
}

/// Flat numbering of per-rank op lists (the engine tag of item i of rank r is `base[r] + i`),
/// the owner of every flat item, and a FIFO channel per ordered pair that exchanges messages,
/// numbered densely so the engine's channel table stays as small as the pattern.
pub(crate) struct FlatOps {
    pub base: Vec<usize>,
    pub owner: Vec<u32>,
    /// Channel of every flat item that is a send (`u32::MAX` otherwise).
    pub channel: Vec<u32>,
}

impl FlatOps {
    pub fn new<T>(lists: &[Vec<T>], send_peer: impl Fn(&T) -> Option<u32>) -> FlatOps {
        let mut base = Vec::with_capacity(lists.len() + 1);
        let mut total = 0;
        for l in lists {
            base.push(total);
            total += l.len();
        }
        base.push(total);
        let mut owner = vec![0u32; total];
        let mut channel = vec![u32::MAX; total];
        let mut ids: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
        for (r, l) in lists.iter().enumerate() {
            owner[base[r]..base[r + 1]].fill(r as u32);
            for (i, item) in l.iter().enumerate() {
                if let Some(p) = send_peer(item) {
                    let next = ids.len() as u32;
                    channel[base[r] + i] = *ids.entry((r as u64) << 32 | p as u64).or_insert(next);
                }
            }
        }
        FlatOps { base, owner, channel }
    }
}

/// Assemble a result once the engine has drained.
pub(crate) fn finish(
    mut sim: FlowSim,
    rank_done_s: Vec<f64>,
    transfers: Vec<TransferRecord>,
    record: bool,
) -> SimResult {
    SimResult {
        time_s: rank_done_s.iter().copied().fold(0.0, f64::max),
        links: if record { sim.usage() } else { Vec::new() },
        rank_done_s,
        transfers,
        stats: sim.stats(),
    }
}

/// Simulate `plan` broadcasting `bytes` on `topo` (ranks of the plan = rank leaves of `topo`,
/// mapped through [`SimOptions::placement`]).
pub fn simulate_plan(topo: &Topology, plan: &Plan, bytes: u64, opts: &SimOptions) -> Result<SimResult, SimError> {
    run_plan::run(topo, plan, bytes, opts)
}
