//! Per-call-site profiling of broadcasts in real jobs (`TREECAST_PROFILE=path`).
//!
//! Hot path ([`begin`] / [`end`], see [`tally`]): every call is counted exactly in the
//! communicator's own state (already locked by the call); an adaptive sample of calls is timed
//! with the time-stamp counter ([`clock`]) so that timing costs at most 0.25% of the calls'
//! duration. Off, profiling costs one branch and reads no clock. Measured side by side with
//! `mpi-examples/profile_bench.rs` (README, "Profiling").
//!
//! Gathering happens only where every rank of a communicator is guaranteed to be: when the
//! communicator is freed (inside the collective `MPI_Comm_free`) and in the `MPI_Finalize` hook,
//! where states are released in creation order (which all ranks share, since creation is
//! collective). Each communicator's records go to its rank 0 (with clock offsets measured by
//! ping-pong so per-rank arrival times share one time base); if `MPI_COMM_WORLD` has treecast
//! state, world rank 0 finally collects every communicator's report and writes one JSON file.
//! Whether profiling is on is agreed collectively when a communicator's state is created, so a
//! variable missing on some ranks disables it instead of hanging a gather.

pub mod arrival;
pub mod clock;
pub mod entries;
mod gather;
pub mod hist;
pub mod host_load;
pub mod offset;
pub mod placement;
pub mod render;
pub mod report;
mod sites;
mod tally;

pub use gather::{all_ok, measure_offset};
pub use hist::Histogram;
pub use report::{CommReport, ProfileReport, SiteReport, SizeClassReport};
pub use tally::{Pending, Tally};

use mpi::ffi::MPI_Comm;
use std::collections::BTreeMap;

/// Where a broadcast was called from.
///
/// Compared and hashed by identity (the address of a Rust caller's `Location`, a C caller's
/// return address), which is cheap on the hot path. The compiler may emit one Rust location
/// twice (e.g. in two instances of a generic caller); such duplicates have the same name and
/// are merged when the profile is gathered.
#[derive(Clone, Copy, Debug)]
pub enum CallSite {
    /// A Rust caller (`#[track_caller]`).
    Rust(&'static std::panic::Location<'static>),
    /// A C/C++/Fortran caller: the return address of the call into the C ABI.
    Address(usize),
    /// Unknown.
    Unknown,
}

impl CallSite {
    fn identity(&self) -> (u8, usize) {
        match self {
            CallSite::Rust(loc) => (0, *loc as *const std::panic::Location<'static> as usize),
            CallSite::Address(a) => (1, *a),
            CallSite::Unknown => (2, 0),
        }
    }
}

impl PartialEq for CallSite {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for CallSite {}

impl std::hash::Hash for CallSite {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (kind, id) = self.identity();
        state.write_usize(id ^ (kind as usize).rotate_right(2));
    }
}

/// The per-site map of a communicator's profile.
pub type SiteMap = crate::util::fasthash::FastMap<CallSite, SiteStats>;

/// The last call made from a site on this rank (local clock), for the per-rank Gantt chart.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LastCall {
    pub seq: u64,
    pub root: u32,
    pub bytes: u64,
    pub enter_s: f64,
    pub done_s: f64,
    /// Performed by the MPI library's `MPI_Bcast`, not by treecast (see [`record_mpi_bcast`]).
    #[serde(default)]
    pub by_mpi: bool,
    /// The CPU this rank finished the call on, where it was read (the calls every rank times:
    /// [`placement`]).
    #[serde(default)]
    pub cpu: Option<u32>,
}

/// One site's calls of one message-size class on one rank.
///
/// The runtime plans per size class (`plan::size_class`: class `c` holds `2^(c-1) .. 2^c - 1`
/// bytes), so a prediction is only comparable with the measured times of calls of its own
/// class; a site broadcasting several sizes gets one of these per class.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClassStats {
    pub calls: u64,
    pub bytes: u64,
    pub time: Histogram,
    /// Calls per root (the prediction depends on the root too).
    pub roots: BTreeMap<u32, u64>,
    /// Of `calls`, those whose previous broadcast on the communicator was of another size
    /// class: a program mixing sizes, where the set-up times calls of one size in a row (on
    /// one host a small call after calls of other sizes took 1.3-2.3 times its prediction:
    /// README, "Calls as a program makes them").
    #[serde(default)]
    pub after_other_size: u64,
}

/// One site's statistics on one rank.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SiteStats {
    pub calls: u64,
    pub bytes: u64,
    pub failures: u64,
    /// Times and roots per size class; the site's overall time histogram and roots are their
    /// merge (kept only here, so a call updates one histogram, not two).
    pub classes: BTreeMap<u8, ClassStats>,
    /// Calls also timed with MPI_Bcast (`TREECAST_PROFILE_COMPARE`): MPI_Bcast's times and ours.
    pub compare_mpi: Histogram,
    pub compare_topo: Histogram,
    /// The latest timed call, and the latest that every rank timed (see [`tally`]).
    pub last: Option<LastCall>,
    #[serde(default)]
    pub last_common: Option<LastCall>,
    /// Of `calls`, those performed by the MPI library's `MPI_Bcast` (interposer with
    /// `TREECAST_INTERCEPT=0`) rather than by treecast.
    #[serde(default)]
    pub mpi_bcast_calls: u64,
    /// The latest calls every rank times (at most [`tally::COMMON_KEEP`] per size class, oldest
    /// first): their entries and completions give arrival skew and transfer per call (see
    /// [`arrival`]) and each class's predictions from the entries (see [`entries`]).
    #[serde(default)]
    pub common: Vec<LastCall>,
}

impl SiteStats {
    /// Add the records of another entry of the same site (same name) on the same rank.
    pub fn absorb(&mut self, other: &SiteStats) {
        self.calls += other.calls;
        self.bytes += other.bytes;
        self.failures += other.failures;
        self.mpi_bcast_calls += other.mpi_bcast_calls;
        for (&class, o) in &other.classes {
            let c = self.classes.entry(class).or_default();
            c.calls += o.calls;
            c.bytes += o.bytes;
            c.after_other_size += o.after_other_size;
            c.time.merge(&o.time);
            for (&r, &n) in &o.roots {
                *c.roots.entry(r).or_insert(0) += n;
            }
        }
        self.compare_mpi.merge(&other.compare_mpi);
        self.compare_topo.merge(&other.compare_topo);
        if other.last.map(|l| l.seq) > self.last.map(|l| l.seq) {
            self.last = other.last;
        }
        if other.last_common.map(|l| l.seq) > self.last_common.map(|l| l.seq) {
            self.last_common = other.last_common;
        }
        self.common.extend_from_slice(&other.common);
        keep_latest(&mut self.common);
    }
}

/// Sort calls by sequence number, drop repeats and keep the latest [`tally::COMMON_KEEP`] of
/// each size class (each class's prediction is checked against its own calls, so a site's
/// large calls must not push its small ones out).
pub(crate) fn keep_latest(calls: &mut Vec<LastCall>) {
    calls.sort_by_key(|c| c.seq);
    calls.dedup_by_key(|c| c.seq);
    let mut kept: BTreeMap<u8, usize> = BTreeMap::new();
    let mut latest: Vec<LastCall> = calls
        .iter()
        .rev()
        .filter(|c| {
            let n = kept.entry(crate::plan::size_class(c.bytes)).or_insert(0);
            *n += 1;
            *n <= tally::COMMON_KEEP
        })
        .copied()
        .collect();
    latest.reverse();
    *calls = latest;
}

/// Profiling state of one communicator.
#[derive(Debug, Default)]
pub struct CommProfile {
    /// Agreed by all ranks of the communicator at creation.
    pub enabled: bool,
    pub compare_every: Option<u64>,
    /// Time every call (`TREECAST_PROFILE_TIMING=all`) rather than an adaptive sample.
    pub time_every_call: bool,
    pub is_world: bool,
    /// Label used in reports, e.g. `MPI_COMM_WORLD` or `comm 2 (4 ranks)`.
    pub label: String,
    /// Counters and times per (site, size class).
    pub tally: Tally,
    /// Set once gathered, so a state is reported once.
    pub gathered: bool,
    /// This rank's clock offset to rank 0 when profiling started (see [`offset`]).
    pub setup_offset: Option<offset::Offset>,
    /// This rank's reading of its kernel's and its own CPU time before the set-up (see
    /// [`host_load`]).
    pub setup_load: Option<host_load::CpuSample>,
}

/// Start recording a call made from `site` (with `bytes`, `root`, sequence number `seq`):
/// counts it, and returns whether and since when it is timed. `None` when profiling is off.
pub fn begin(p: &mut CommProfile, site: CallSite, root: u32, bytes: u64, seq: u64) -> Option<Pending> {
    if !p.enabled {
        return None;
    }
    // A compared call is always timed: its time is set against MPI_Bcast's.
    let force = p.time_every_call || compare_due(p, seq);
    Some(p.tally.begin(site, root, bytes, seq, force))
}

/// Finish recording a call begun with [`begin`]; returns its duration when it was timed.
pub fn end(p: &mut CommProfile, pending: Pending, ok: bool) -> Option<f64> {
    p.tally.end(pending, ok)
}

/// [`begin`] for a call that the MPI library's own `MPI_Bcast` performs (the interposer with
/// serving off), so profiles count every broadcast of a program and say who did the work.
pub fn begin_mpi_bcast(p: &mut CommProfile, site: CallSite, root: u32, bytes: u64, seq: u64) -> Option<Pending> {
    if !p.enabled {
        return None;
    }
    let force = p.time_every_call;
    Some(p.tally.begin_mpi_bcast(site, root, bytes, seq, force))
}

/// Whether this call (by its sequence number, identical on all ranks) is one that is also timed
/// with MPI_Bcast.
pub fn compare_due(p: &CommProfile, seq: u64) -> bool {
    p.enabled && p.compare_every.is_some_and(|n| seq.is_multiple_of(n))
}

/// Record an MPI_Bcast comparison for the call begun as `pending`.
pub fn record_compare(p: &mut CommProfile, pending: &Pending, topo_s: f64, mpi_s: f64) {
    p.tally.record_compare(pending, topo_s, mpi_s);
}

/// The communicator is being freed (collectively): gather its records to its rank 0.
pub fn on_comm_free(st: &mut dyn ProfiledComm) {
    let p = st.profile();
    if p.enabled && !p.gathered && !p.is_world {
        gather::gather_comm(st);
    }
}

/// `MPI_Finalize` hook, after non-world states were gathered: gather the world state, collect
/// every communicator's report at world rank 0 and write the file.
/// `path` is `TREECAST_PROFILE`; nothing is gathered without one.
pub fn on_finalize_world(world: Option<&mut dyn ProfiledComm>, path: Option<&str>) {
    if let Some(path) = path {
        gather::finish(world, path);
    }
}

/// What gathering a communicator's profile needs from the runtime's state of it (implemented by
/// `runtime::state::CommState`). The runtime calls into this module on every broadcast, so this
/// module reaches back only through this interface, never to the runtime's types.
pub trait ProfiledComm {
    /// treecast's duplicate of the communicator (collectives of the gather run on it).
    fn comm(&self) -> MPI_Comm;
    fn rank(&self) -> u32;
    fn size(&self) -> u32;
    /// A tag no broadcast uses, for the clock-offset ping-pongs.
    fn control_tag(&self) -> i32;
    fn profile(&self) -> &CommProfile;
    fn profile_mut(&mut self) -> &mut CommProfile;
    /// The predicted time of the plan for `bytes` from `root` (see `runtime::planner`), for
    /// calls that follow each other as `train` says (`None`: unknown).
    fn predict_time(
        &self,
        root: u32,
        bytes: u64,
        train: Option<crate::estimate::bucket::CallTrain>,
    ) -> Option<report::Predicted>;
    /// The name of the algorithm predictions of `bytes` from `root` model (the plan's, or the
    /// library's where the calls take the library's route).
    fn predicted_algorithm(&self, root: u32, bytes: u64) -> String;
    /// Predicted per-rank completions for `bytes` from `root`, every rank entering with the
    /// root (seconds after its entry).
    fn predict_arrivals(&self, root: u32, bytes: u64) -> Option<Vec<f64>>;
    /// With the set-up calibration: for each call of `bytes` from `root` whose ranks entered at
    /// `calls.0[i]` (one time per rank, rank 0's clock) and shared CPUs as `calls.1[i]` says
    /// (`placement::grouping`, `None`: not read), each rank's predicted exit; the calls follow
    /// each other as `train` says.
    fn predict_given_entries(
        &self,
        root: u32,
        bytes: u64,
        calls: (&[Vec<f64>], &[Option<Vec<u32>>]),
        train: Option<crate::estimate::bucket::CallTrain>,
    ) -> Vec<Option<Vec<f64>>>;
    /// Each rank's role in the plan predicted for `bytes` from `root` (`Plan::rank_roles`):
    /// which ranks sharing a CPU are interchangeable (`placement`). `None`: not known.
    fn rank_roles(&self, _root: u32, _bytes: u64) -> Option<Vec<(u32, u32)>> {
        None
    }
    /// The token buckets predictions charge (found at set-up; empty without).
    fn link_buckets(&self) -> Vec<report::LinkBucketReport>;
    /// What a sender's transport holds unsent between hosts (found at set-up; `None` without).
    fn send_buffer_bytes(&self) -> Option<f64>;
    /// The library's broadcast timed at set-up on one host (empty without).
    fn library_timing(&self) -> Vec<report::LibraryTimingReport>;
    /// The route chosen for every (root, size class) used so far, in order.
    fn routes(&self) -> Vec<report::RouteReport>;
    /// The per-message overheads plans and predictions charge (`None` without a topology).
    fn message_overhead(&self) -> Option<report::MessageOverheadReport>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_calls_are_kept_per_size_class() {
        // Many large calls after a few small ones: the small ones stay.
        let call = |seq: u64, bytes: u64| LastCall {
            seq,
            bytes,
            ..Default::default()
        };
        let mut calls: Vec<LastCall> = (0..5).map(|s| call(s, 1024)).collect();
        calls.extend((5..5 + 3 * tally::COMMON_KEEP as u64).map(|s| call(s, 1 << 20)));
        calls.push(call(3, 1024)); // a repeat
        keep_latest(&mut calls);
        let small: Vec<u64> = calls.iter().filter(|c| c.bytes == 1024).map(|c| c.seq).collect();
        assert_eq!(small, vec![0, 1, 2, 3, 4]);
        let large: Vec<u64> = calls.iter().filter(|c| c.bytes > 1024).map(|c| c.seq).collect();
        assert_eq!(large.len(), tally::COMMON_KEEP);
        assert_eq!(large.first(), Some(&(5 + 2 * tally::COMMON_KEEP as u64)));
        assert!(calls.windows(2).all(|w| w[0].seq < w[1].seq));
    }
}
