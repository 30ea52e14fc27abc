//! Broadcast planning: the `Plan` type and the planners that produce it.
//!
//! Pure Rust, no MPI: planners are tested at thousands of ranks. The runtime asks
//! [`default_plan`] for a plan per (root, size class) until a topology-aware planner is chosen.

pub mod bound;
pub mod canon;
pub mod cost;
pub mod greedy;
pub mod optimal;
mod schedule;
pub mod trees;

pub use schedule::{
    class_max_segments, class_representative, range_bounds, seg_bounds, size_class, Op, Plan, PlanError, PlanInfo,
    SegRange,
};

/// Segment size used by the topology-agnostic pipeline for long messages.
pub const DEFAULT_SEGMENT_BYTES: u64 = 128 * 1024;

/// Messages at least this long are pipelined in segments by the topology-agnostic planner.
pub const PIPELINE_THRESHOLD_BYTES: u64 = 512 * 1024;

/// Topology-agnostic plan for `bytes` from `root` on `nranks` ranks: an unsegmented binomial tree
/// for short messages (latency-bound: depth log2 n), a segmented binomial pipeline for long ones
/// (bandwidth-bound: every link streams segments concurrently).
pub fn default_plan(nranks: u32, root: u32, bytes: u64) -> Plan {
    if nranks <= 1 || bytes == 0 {
        return Plan::empty(nranks, root, "none");
    }
    let children = trees::binomial(nranks, root);
    if bytes < PIPELINE_THRESHOLD_BYTES {
        let mut p = Plan::from_tree(root, &children, 1, "binomial");
        p.info.planned_bytes = bytes;
        return p;
    }
    let nsegs = bytes
        .div_ceil(DEFAULT_SEGMENT_BYTES)
        .clamp(1, class_max_segments(size_class(bytes)) as u64) as u32;
    let mut p = Plan::from_tree(root, &children, nsegs, "binomial-pipeline");
    p.info.planned_bytes = bytes;
    p
}
