//! Why a simulation could not run: the errors of the `sim` layer (also those of building the
//! MPI libraries' algorithms where ranks are placed, which resolve placements here).

use crate::schedule::PlanError;
use crate::topology::TopologyError;
use std::fmt;

/// Why a simulation (or a placement) could not run. The texts are what the CLI prints.
#[derive(Clone, Debug, PartialEq)]
pub enum SimError {
    /// A broadcast needs at least one rank.
    NoRanks,
    /// `root` is not one of the `nranks` ranks.
    RootOutOfRange { root: u32, nranks: u32 },
    /// More ranks than the topology has rank leaves.
    RanksDoNotFit { nranks: u32, leaves: usize },
    /// A placement map of the wrong length.
    PlacementLength { mapped: usize, nranks: u32 },
    /// A placement names a leaf the topology does not have.
    NoSuchLeaf { rank: usize, leaf: u32 },
    /// A placement puts two ranks on one leaf.
    SharedLeaf { leaf: u32 },
    /// treecast's planners need a rank on every leaf.
    NotEveryLeaf { nranks: usize, leaves: usize },
    /// Relabelling the topology for a placement failed.
    Topology(TopologyError),
    /// The plan failed validation.
    InvalidPlan(PlanError),
    /// A trusted plan whose header does not match its ops.
    MalformedPlan,
    /// An op of `rank` names a rank the plan does not have.
    UnknownPeer { rank: usize, peer: u32 },
    /// `rank` can never issue its op `op` (it waits for data nobody sends).
    Deadlock { rank: usize, op: usize },
    /// `rank` ended without every segment.
    MissingData { rank: usize },
    /// The pairwise (XOR) all-to-all needs a power-of-two number of ranks.
    PairwiseNeedsPowerOfTwo { nranks: u32 },
    /// An all-to-all schedule sends to a rank that does not exist.
    InvalidSendPeer { rank: usize, peer: u32 },
    /// Entry times that are not one finite, non-negative time per rank.
    BadEntries { ranks: usize },
    /// CPU pools that do not give each of `ranks` ranks a pool (or none), or a pool no CPU.
    BadCpuPools { ranks: usize },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::NoRanks => f.write_str("no ranks to broadcast to"),
            SimError::RootOutOfRange { root, nranks } => write!(f, "root {root} out of range for {nranks} ranks"),
            SimError::RanksDoNotFit { nranks, leaves } => {
                write!(f, "{nranks} ranks do not fit on a topology with {leaves} rank leaves")
            }
            SimError::PlacementLength { mapped, nranks } => {
                write!(f, "placement maps {mapped} ranks but the plan has {nranks}")
            }
            SimError::NoSuchLeaf { rank, leaf } => {
                write!(f, "placement puts rank {rank} on leaf {leaf}, which does not exist")
            }
            SimError::SharedLeaf { leaf } => write!(f, "placement puts two ranks on leaf {leaf}"),
            SimError::NotEveryLeaf { nranks, leaves } => {
                write!(
                    f,
                    "treecast's planners plan for every rank leaf: {nranks} ranks on {leaves} leaves"
                )
            }
            SimError::Topology(e) => e.fmt(f),
            SimError::InvalidPlan(e) => e.fmt(f),
            SimError::MalformedPlan => f.write_str("invalid plan: malformed header"),
            SimError::UnknownPeer { rank, peer } => write!(f, "invalid plan: rank {rank} names rank {peer}"),
            SimError::Deadlock { rank, op } => write!(f, "plan deadlocks: rank {rank} can never issue op {op}"),
            SimError::MissingData { rank } => write!(f, "plan leaves rank {rank} without segment data"),
            SimError::PairwiseNeedsPowerOfTwo { nranks } => {
                write!(
                    f,
                    "pairwise (XOR) all-to-all needs a power-of-two number of ranks, got {nranks}"
                )
            }
            SimError::InvalidSendPeer { rank, peer } => write!(f, "rank {rank} sends to invalid peer {peer}"),
            SimError::BadEntries { ranks } => {
                write!(
                    f,
                    "entry times must be {ranks} finite, non-negative seconds, one per rank"
                )
            }
            SimError::BadCpuPools { ranks } => write!(
                f,
                "CPU pools must name a pool (or none) for each of {ranks} ranks, and every pool needs a CPU"
            ),
        }
    }
}

impl std::error::Error for SimError {}
