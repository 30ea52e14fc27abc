//! Why a plan is unusable: the errors of [`Plan::validate`](super::Plan::validate) and
//! [`Plan::from_wire`](super::Plan::from_wire).
//!
//! Each variant names the rank, op and segment at fault so callers (the chooser, the runtime's
//! fallback, the simulator) can tell a malformed header from a schedule that deadlocks;
//! [`Display`](fmt::Display) gives the one-line text that is logged and printed.

use std::fmt;

/// Why a plan is unusable. The message names the rank and op at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// The wire form could not be decoded (the decoder's message).
    Decode(String),
    /// A plan of zero ranks.
    NoRanks,
    /// `root` is not one of the `nranks` ranks.
    RootOutOfRange { root: u32, nranks: usize },
    /// `nsegs` is 0.
    NoSegments,
    /// The number of op lists differs from the number of ranks.
    OpListCount { lists: usize, nranks: usize },
    /// Op `op` of `rank` names itself or a rank that does not exist.
    BadPeer { rank: usize, op: usize, peer: u32 },
    /// Op `op` of `rank` has an empty segment range or one past `nsegs`.
    BadSegments {
        rank: usize,
        op: usize,
        start: u32,
        end: u32,
    },
    /// Op `op` of the root is a receive.
    RootReceives { rank: usize, op: usize },
    /// Op `op` of `rank` receives segment `seg` a second time.
    ReceivedTwice { rank: usize, op: usize, seg: u32 },
    /// Op `op` of `rank` sends segment `seg` before the rank has it.
    SendBeforeReceive { rank: usize, op: usize, seg: u32 },
    /// A non-root `rank` never receives segment `seg`.
    NeverReceives { rank: usize, seg: usize },
    /// The sends `from -> to` differ from the receives `to` posts for them.
    Unmatched { from: u32, to: u32 },
    /// `to` posts receives from `from`, which never sends to it.
    NeverSent { from: u32, to: u32 },
    /// Running the schedule, op `op` of `rank` is never issued.
    Deadlock { rank: usize, op: usize },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use PlanError::*;
        f.write_str("invalid plan: ")?;
        match self {
            Decode(e) => write!(f, "cannot decode wire form: {e}"),
            NoRanks => f.write_str("no ranks"),
            RootOutOfRange { root, nranks } => write!(f, "root {root} out of range for {nranks} ranks"),
            NoSegments => f.write_str("nsegs must be >= 1"),
            OpListCount { lists, nranks } => write!(f, "{lists} op lists for {nranks} ranks"),
            BadPeer { rank, op, peer } => write!(f, "rank {rank} op {op}: bad peer {peer}"),
            BadSegments { rank, op, start, end } => write!(f, "rank {rank} op {op}: bad segment range {start}..{end}"),
            RootReceives { rank, op } => write!(f, "root {rank} op {op}: the root must not receive"),
            ReceivedTwice { rank, op, seg } => write!(f, "rank {rank} op {op}: segment {seg} received twice"),
            SendBeforeReceive { rank, op, seg } => {
                write!(f, "rank {rank} op {op}: sends segment {seg} before receiving it")
            }
            NeverReceives { rank, seg } => write!(f, "rank {rank} never receives segment {seg}"),
            Unmatched { from, to } => write!(f, "sends {from}->{to} do not match the receives posted for them"),
            NeverSent { from, to } => write!(f, "rank {to} expects data from {from} that is never sent"),
            Deadlock { rank, op } => write!(f, "deadlock: rank {rank} can never issue op {op}"),
        }
    }
}

impl std::error::Error for PlanError {}
