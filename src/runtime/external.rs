//! Profiling broadcasts that treecast did not perform.
//!
//! The `LD_PRELOAD` interposer with `TREECAST_INTERCEPT=0` leaves `MPI_Bcast` to the MPI
//! library but still profiles every call, so a job can be profiled (and compared) without
//! treecast changing its communication. [`record_external`] puts such a call into the same
//! per-call-site profile that treecast's own broadcasts go to ([`begin_external`] /
//! [`end_external`] around the library's call).

use super::state;
use crate::error::Result;
use crate::exec::raw;
use crate::profile::{self, CallSite};
use mpi::ffi::{MPI_Comm, MPI_Datatype};

/// A broadcast the MPI library is performing, being profiled ([`begin_external`]).
pub struct ExternalCall {
    slot: &'static state::Slot,
    pending: Option<profile::Pending>,
}

/// Count a broadcast of `count` elements of `datatype` from `root` on `comm` that the MPI
/// library is about to perform outside treecast, and start timing it if it is in the sample
/// (see `profile::tally`). Call [`end_external`] when it returned.
///
/// Collective on first use for `comm`, like any treecast call: the communicator's state is
/// created then (every rank of `comm` must call this for the same broadcasts, which holds when
/// each rank records each of its `MPI_Bcast` calls). Inter-communicators have no state and are
/// rejected with `MPI_ERR_COMM`; a message size that cannot be computed (e.g. an invalid
/// datatype) is recorded as 0 bytes. The call takes a sequence number like a served call, so
/// samples and the profile's sample call line up across ranks.
///
/// # Safety
/// `comm` must be a valid communicator handle and `datatype` a valid or null datatype handle.
pub unsafe fn begin_external(
    comm: MPI_Comm,
    site: CallSite,
    count: i64,
    datatype: MPI_Datatype,
    root: i32,
) -> Result<ExternalCall> {
    let slot = state::get_checked(comm, || Ok(()))?;
    let mut st = slot.lock().unwrap_or_else(|p| p.into_inner());
    let seq = st.calls;
    st.calls += 1;
    let pending = if st.profile.enabled {
        let bytes = message_bytes(count, datatype);
        profile::begin_mpi_bcast(&mut st.profile, site, root.max(0) as u32, bytes, seq)
    } else {
        None
    };
    Ok(ExternalCall { slot, pending })
}

/// The broadcast begun with [`begin_external`] returned (`ok`: successfully).
pub fn end_external(call: ExternalCall, ok: bool) {
    // An untimed call that succeeded is fully counted already: no second lock.
    if let Some(p) = call.pending.filter(|p| p.timed() || !ok) {
        let mut st = call.slot.lock().unwrap_or_else(|p| p.into_inner());
        profile::end(&mut st.profile, p, ok);
    }
}

/// Bytes of `count` elements of `datatype` (0 when not computable). One query (the type size)
/// rather than the executor's full layout description: this runs on every profiled call.
fn message_bytes(count: i64, datatype: MPI_Datatype) -> u64 {
    let Ok(count) = u64::try_from(count) else { return 0 };
    // The null handle is compared first; other handles are valid per the caller.
    if count == 0 || datatype == raw::datatype_null() {
        return 0;
    }
    match raw::type_size(datatype) {
        Ok(size) if size >= 0 => (size as u64).saturating_mul(count),
        _ => 0,
    }
}
