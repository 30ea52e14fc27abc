//! Per-call-site profiling of broadcasts (`TREECAST_PROFILE=path`).
//!
//! STUB: records nothing yet; the call sites and hooks are wired so that the runtime does not
//! change when profiling lands.

use crate::runtime::state::CommState;

/// Where a broadcast was called from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallSite {
    /// A Rust caller (`#[track_caller]`).
    Rust(&'static std::panic::Location<'static>),
    /// A C/C++/Fortran caller: the return address of the call into the C ABI.
    Address(usize),
    /// Unknown.
    Unknown,
}

/// Record one call (no-op when profiling is off).
#[allow(clippy::too_many_arguments)]
pub fn record(_st: &mut CommState, _site: CallSite, _root: u32, _bytes: u64, _t0: f64, _t1: f64, _ok: bool, _seq: u64) {
}

/// The communicator is being freed: keep its records for the report.
pub fn on_comm_free(_st: &mut CommState) {}

/// MPI is finalizing: gather and write the report.
pub fn on_finalize() {}
