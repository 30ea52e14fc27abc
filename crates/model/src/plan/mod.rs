//! Broadcast planning: the `Plan` type and the planners that produce it.
//!
//! Pure Rust, no MPI: planners are tested at thousands of ranks. Entry point for the runtime:
//! [`plan_broadcast`] (the chooser: candidates below, predicted by the simulator or the cost
//! model, fastest wins); [`default_plan`] is the topology-agnostic fallback.
//!
//! | module | what |
//! |---|---|
//! | [`cost`] | the [Hourai2004] cost model (reserved-rate link profiles), sequence evaluation |
//! | [`isomorphism`] | AHU canonical labelling, orbits (symmetry pruning) |
//! | [`bound`] | lower bounds on broadcast schedules |
//! | [`optimal`] | branch and bound: proven-optimal unsegmented schedules |
//! | [`greedy`] | earliest-completion greedy with look-ahead |
//! | [`relay`] | the relay hierarchy ([Takizawa2009]), depth-first orders, relay routes |
//! | [`hier`] | hierarchical per-switch planning |
//! | [`pipeline`] | segmented plans: chains, two-trees, pipelined trees; segment counts |
//! | [`cost_replay`] | predicted time of any plan under the cost model |
//! | [`registry`] | every algorithm by name: parameters, family, help; `Algorithm` |
//! | [`choose`] | `plan_broadcast`: candidates, one predictor, ranking |
//! | [`local`] | planning at scale: analytic choice among trees, one rank's own ops |
//! | [`orbits`] | ranks the network cannot tell apart (choices shared across roots) |
//! | [`gantt`] | Gantt chart of a plan |
//! | [`baselines`] | the MPI libraries' broadcast algorithms as plans (the baselines to beat) |
//!
//! The `Plan` type itself lives in [`crate::schedule`] (re-exported here), so the simulator
//! runs plans without depending on the planners that make them.

pub mod baselines;
pub mod bound;
pub mod choose;
pub mod cost;
pub mod cost_replay;
mod error;
pub mod gantt;
pub mod greedy;
pub mod hier;
pub mod isomorphism;
pub mod local;
pub mod optimal;
pub mod orbits;
pub mod pipeline;
pub mod registry;
pub mod relay;
pub mod trees;

pub use crate::schedule::{
    class_max_segments, class_representative, range_bounds, seg_bounds, size_class, Op, Plan, PlanError, PlanInfo,
    SegRange,
};
pub use choose::{plan_broadcast, plan_detailed, PlanOptions, Planned};
pub use error::{PlanningError, TransferFault};
pub use registry::{Algorithm, Family, NameError};

/// Segment size used by the topology-agnostic pipeline for long messages.
pub const DEFAULT_SEGMENT_BYTES: u64 = 128 * 1024;

/// Messages at least this long are pipelined in segments by the topology-agnostic planner.
pub const PIPELINE_THRESHOLD_BYTES: u64 = 512 * 1024;

/// The plan without a network topology (one host, or none known): the algorithm Open MPI's
/// tuned component picks for `nranks` and `bytes` (its fixed decision table, measured on real
/// machines; see [`baselines::ompi::decision`]), to be run with treecast's sends.
/// Without a network there is nothing for topology to win, and the library's table beats any one
/// fixed shape (a binomial tree lost 1.5x to its k-nomial at 128 B - 2 KiB on 8 ranks of one
/// host). [`default_plan`] stands in when that plan has more segments than the size class of
/// `bytes` allows.
pub fn library_plan(nranks: u32, root: u32, bytes: u64) -> Plan {
    if nranks <= 1 || bytes == 0 {
        return Plan::empty(nranks, root, "none");
    }
    let p = baselines::ompi::default_bcast(nranks, root, bytes);
    if p.nsegs <= class_max_segments(size_class(bytes)) {
        p
    } else {
        default_plan(nranks, root, bytes)
    }
}

/// [`library_plan`] at the representative size of size class `class`: the plan predictions of
/// the library's calls of that class are made with (`runtime::plans`), and what the one-host
/// curve is fitted on (`runtime::library_fit`), so both see the same algorithm.
pub fn library_plan_for_class(nranks: u32, root: u32, class: u8) -> Plan {
    library_plan(nranks, root, crate::schedule::class_representative(class))
}

/// Topology-agnostic plan for `bytes` from `root` on `nranks` ranks: an unsegmented binomial tree
/// for short messages (latency-bound: depth log2 n), a binomial tree pipelined in
/// [`DEFAULT_SEGMENT_BYTES`] segments for long ones (bandwidth-bound: every link streams segments
/// concurrently). Named `binomial` / `binomial:seg=131072`, the registry's names for them.
pub fn default_plan(nranks: u32, root: u32, bytes: u64) -> Plan {
    if nranks <= 1 || bytes == 0 {
        return Plan::empty(nranks, root, "none");
    }
    let seg = if bytes < PIPELINE_THRESHOLD_BYTES {
        0
    } else {
        DEFAULT_SEGMENT_BYTES
    };
    baselines::Baseline::Binomial { seg }
        .build_ranks(nranks, root, bytes)
        .expect("the binomial tree needs no topology")
}
