//! `exec`: runs a [`Plan`](crate::plan::Plan) with MPI point-to-point calls.
//!
//! The only planning-side module that touches MPI. It works on a private duplicate of the user's
//! communicator (so our tags never clash with the application's) with `MPI_ERRORS_RETURN`, moves
//! contiguous byte ranges (packing non-contiguous datatypes, see [`layout`]), and never lets a bad
//! buffer on one rank turn into a hang elsewhere (see [`engine`]).

pub mod engine;
pub mod layout;
pub mod raw;
pub mod tags;

use crate::plan::{Op, Plan};

/// One rank's share of a plan: all that rank needs to run it. The runtime caches these per
/// (root, size class) instead of whole plans, so memory per rank stays O(its own ops) even on
/// thousands of ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalPlan {
    pub root: u32,
    pub nsegs: u32,
    pub ops: Vec<Op>,
    /// Name of the algorithm that made the plan (for logs and profiles).
    pub algorithm: String,
    /// Predicted completion time of the whole broadcast for the planned size, if known.
    pub predicted_time_s: Option<f64>,
    /// Message size the plan (and its prediction) was made for.
    pub planned_bytes: u64,
    /// Predicted time of the MPI library's broadcast for that size, if ranked (see
    /// `PlanInfo::library_time_s`).
    pub library_time_s: Option<f64>,
}

impl LocalPlan {
    /// Extract rank `me`'s part of `plan`.
    pub fn from_plan(plan: &Plan, me: u32) -> LocalPlan {
        LocalPlan {
            root: plan.root,
            nsegs: plan.nsegs,
            ops: plan.ops[me as usize].clone(),
            algorithm: plan.info.algorithm.clone(),
            predicted_time_s: plan.info.predicted_time_s,
            planned_bytes: plan.info.planned_bytes,
            library_time_s: plan.info.library_time_s,
        }
    }
}
