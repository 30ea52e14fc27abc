//! Why a plan could not be made or evaluated: the errors of the `plan` layer.
//!
//! One enum for the planners, the cost model and the chooser, so callers (the CLI, the runtime)
//! can tell a bad request (root, ranks) from a sequence that is not a broadcast; the messages
//! are the ones the CLI prints.

use crate::sim::SimError;
use std::fmt;

/// Why a plan could not be made or evaluated.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanningError {
    /// The topology has no rank leaves.
    NoRanks,
    /// `root` is not one of the `nranks` ranks.
    RootOutOfRange { root: u32, nranks: usize },
    /// The exact search takes at most `limit` ranks.
    TooManyRanks { limit: usize, nranks: usize },
    /// Step `index` of a transfer sequence is not a broadcast step.
    Transfer { index: usize, fault: TransferFault },
    /// A plan for `plan` ranks replayed on a topology of `topology` ranks.
    RankCountMismatch { plan: u32, topology: usize },
    /// Replaying a plan under the cost model left `rank` without every segment.
    ReplayStalled { rank: usize },
    /// The algorithm produced no candidate (none of its families applies).
    NoCandidate { algorithm: String },
    /// One of the MPI libraries' algorithms could not be built where the ranks run.
    Baseline(SimError),
}

/// What is wrong with one step of a transfer sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferFault {
    RankOutOfRange { src: u32, dst: u32 },
    SenderLacksData(u32),
    ReceiverHasData(u32),
}

impl fmt::Display for PlanningError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanningError::NoRanks => f.write_str("the topology has no ranks"),
            PlanningError::RootOutOfRange { root, nranks } => write!(f, "root {root} out of range for {nranks} ranks"),
            PlanningError::TooManyRanks { limit, nranks } => {
                write!(f, "exact search is limited to {limit} ranks, the topology has {nranks}")
            }
            PlanningError::Transfer { index, fault } => match fault {
                TransferFault::RankOutOfRange { src, dst } => {
                    write!(f, "transfer {index}: rank out of range ({src} -> {dst})")
                }
                TransferFault::SenderLacksData(s) => {
                    write!(f, "transfer {index}: sender {s} does not hold the data yet")
                }
                TransferFault::ReceiverHasData(r) => write!(f, "transfer {index}: receiver {r} already holds the data"),
            },
            PlanningError::RankCountMismatch { plan, topology } => {
                write!(f, "the plan has {plan} ranks, the topology {topology}")
            }
            PlanningError::ReplayStalled { rank } => write!(f, "replay stalled: rank {rank} never receives everything"),
            PlanningError::NoCandidate { algorithm } => write!(f, "algorithm '{algorithm}' produced no plan"),
            PlanningError::Baseline(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PlanningError {}

impl From<SimError> for PlanningError {
    fn from(e: SimError) -> Self {
        PlanningError::Baseline(e)
    }
}
