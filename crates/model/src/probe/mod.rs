//! Measuring the network: the ping-pong protocol, the `Prober` trait and its pure implementations.
//!
//! Inference is host-level: ranks on one host are grouped exactly (by
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` in a real job, by the `node` vertices of a model
//! topology in simulation) and one leader per host takes part in probing. Hosts are numbered
//! `0..num_hosts()`.
//!
//! Probing proceeds in **rounds**. A round is a set of *disjoint* host pairs measured
//! concurrently; the coordinator (rank 0 in MPI) decides each round from everything measured so
//! far, so one round costs sending each pair its part (point to point), the measurements
//! themselves (the slowest pair dominates), and the results coming back. Inference therefore
//! tries to need few rounds, with many pairs per round, and few pairs in total.
//!
//! The per-pair protocol ([`ping_pair`], [Shirai2007] §4.1) is pure and shared by every
//! implementation: it is driven by a closure performing one round trip.
//!
//! Implementations: [`SimProber`] (a true tree plus a noise model, any scale, virtual time),
//! [`MatrixProber`] (a measured RTT matrix), and the MPI prober (in the MPI-facing part of the
//! crate), all obeying the contract documented on [`Prober`].

mod dump;
mod ledger;
mod matrix;
mod noise;
mod protocol;
mod rounds;
mod sim;

pub use dump::{DumpError, DumpFault, ProbeDump, RecordedSettings, ReplayProber, DUMP_VERSION};
pub use ledger::{ProbeLedger, ProbeStats};
pub use matrix::MatrixProber;
pub use noise::{LoadedHost, NoiseFault, NoiseModel, NoiseSpec, NoiseSpecError, Outliers};
pub use protocol::{ping_pair, ping_pair_opened, PairMeasurement, PingSpec, GIVE_UP_RATIO, GIVE_UP_S};
pub use rounds::{check_round, matching_rounds, round_robin_rounds};
pub use sim::{bandwidth_shares, host_vertices, SimProber};

/// How a ping round schedules the sets of its pairs. The MPI prober picks one per job and the
/// simulated prober follows the same rules, so virtual time is what the MPI prober spends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SetSchedule {
    /// Every set of a pair back to back after one coordination and one untimed opening round
    /// trip: hosts on distinct machines. Each extra coordination would cross the whole job's
    /// network (milliseconds where it spans a wide-area link) for little: a disturbance on a
    /// real host is rarer than the coordination that would dodge it, and a minimum it inflates
    /// is caught by inference's consistency checks and measured again.
    BackToBack,
    /// One set of every pair at a time, each set coordinated and opened on its own: hosts
    /// emulated on one kernel, where a descheduled pair stays descheduled for milliseconds and
    /// would spoil back-to-back sets together. A pair that ended far in its first set
    /// ([`PingSpec::far_s`]) takes no part in later sets.
    Interleaved,
}

impl SetSchedule {
    /// The windows of a ping round under `spec`: how many, and the protocol each window runs
    /// (all sets back to back, or one set).
    pub fn windows(self, spec: &PingSpec) -> (u32, PingSpec) {
        match self {
            SetSchedule::BackToBack => (1, *spec),
            SetSchedule::Interleaved => (spec.sets.max(1), PingSpec { sets: 1, ..*spec }),
        }
    }
}

use std::fmt;

/// Why probing failed. Carries a one-line message naming the hosts involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeError {
    /// The caller asked for something invalid (host out of range, pairs not disjoint, ...).
    BadRequest(String),
    /// A pair that was asked for cannot be measured (e.g. missing from an RTT matrix).
    Missing(String),
    /// The transport failed (MPI error, peer lost).
    Transport(String),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::BadRequest(m) | ProbeError::Missing(m) | ProbeError::Transport(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ProbeError {}

/// One far-apart part's inference, run on a prober whose coordinator is the part's leader: it
/// takes the part's job and returns its outcome, both encoded by inference (postcard), or an
/// error of that prober. A plain function, so that an MPI leader runs the very same code on
/// its own rank (see [`Prober::run_parts`]).
pub type PartWork = fn(&mut dyn Prober, &[u8]) -> Result<Vec<u8>, ProbeError>;

/// Access to the job's hosts for measuring the network between them.
///
/// # Contract (every implementation, including the MPI one)
/// - Hosts are `0..num_hosts()`; `host_name(h)` is stable and unique (the MPI prober uses the
///   processor name of each host's leader). Number hosts in the order of their lowest rank:
///   ranks follow the hostfile / allocation order, which usually follows racks and switches, and
///   inference uses host order as a locality hint (for speed only, never for correctness).
/// - `ping_round(pairs, spec)`: `pairs` must be disjoint (no host twice), each `(a, b)` with
///   `a != b`, both in range — check with [`check_round`] and return `BadRequest` otherwise.
///   All pairs are measured **concurrently**; for each pair, host `a` runs [`ping_pair`] with
///   `spec` against `b` (its closure does one small-message round trip and returns its duration
///   in seconds) while `b` answers each ping until `a` tells it to stop. Hosts not in any pair
///   wait politely (no busy polling, docs/design.md §5.3). The result has one
///   [`PairMeasurement`] per pair, **in the order of `pairs`**, with `a`/`b` as given.
/// - `bandwidth_round(pairs, bytes)`: same pairing rules; `a` sends `bytes` to `b` while every
///   other pair of the round transfers at the same time; returns the achieved rate in bytes/s
///   per pair, in order.
/// - `stats()`: rounds, pairs and time spent so far; keep them in a [`ProbeLedger`]. Time is
///   wall-clock seconds for real probing and virtual seconds for simulation, and includes the
///   coordination of each round (the parts sent to the pairs, the results sent back).
///
/// # What the MPI implementation must do per call
/// The coordinator (rank 0) calls the method; every other host leader runs a matching loop:
/// 1. the coordinator sends each leader of each pair its part of the round (kind, `spec`/`bytes`,
///    its pair, how many pairs measure at once) point to point; a "done" message ends a leader's
///    loop. Leaders in no pair hear nothing and wait politely (`MPI_Iprobe` + sleep);
/// 2. as `a` a leader runs [`ping_pair`] (or the bulk send) with its partner, as `b` it serves
///    pings until the stop message;
/// 3. each `a` sends its [`PairMeasurement`] (postcard) back to the coordinator, which orders
///    them to match `pairs` and records the round in its ledger.
///
/// Sets follow a [`SetSchedule`]: back to back in one such round on distinct machines,
/// interleaved (one round per set) where hosts share a kernel.
pub trait Prober {
    /// Number of hosts (one leader each).
    fn num_hosts(&self) -> usize;
    /// Unique, stable name of host `h` (used to name the leaves of the inferred tree).
    fn host_name(&self, h: usize) -> &str;
    /// Measure the RTT of every pair concurrently with the ping-pong protocol.
    fn ping_round(&mut self, pairs: &[(usize, usize)], spec: &PingSpec) -> Result<Vec<PairMeasurement>, ProbeError>;
    /// Measure the bandwidth (bytes/s) of every pair concurrently with a `bytes`-long transfer a -> b.
    fn bandwidth_round(&mut self, pairs: &[(usize, usize)], bytes: u64) -> Result<Vec<f64>, ProbeError>;
    /// Accounting of everything probed so far.
    fn stats(&self) -> &ProbeStats;

    /// Run the inference of far-apart parts, part `i` coordinated by its leader, host
    /// `leaders[i]` (a host of that part), by `work` on `jobs[i]`; returns the outcomes in order.
    ///
    /// Why: a round coordinated from one host crosses the far paths twice even when all its
    /// pairs lie in one part (milliseconds per round over a wide-area link, where a part's own
    /// rounds need microseconds), and parts wait for each other's slowest pair. With a
    /// coordinator per part, each part proceeds at its own pace and the far paths are crossed
    /// once each way per part: the job out, the outcome back. Parts of hosts on distinct
    /// machines run side by side (the slowest decides the time); where hosts share a kernel
    /// ([`SetSchedule::Interleaved`]) one after another, since their pairs would share CPUs.
    ///
    /// `None` (the default): this prober has no coordinators but its own, and the caller runs
    /// the jobs in turn on it. Every host of a part takes part only in its part's rounds until
    /// the outcome is back; the prober's stats afterwards include the parts' rounds and time.
    fn run_parts(
        &mut self,
        _leaders: &[usize],
        _jobs: &[Vec<u8>],
        _work: PartWork,
    ) -> Option<Result<Vec<Vec<u8>>, ProbeError>> {
        None
    }
}
