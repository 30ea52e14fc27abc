//! Profiling broadcasts that treecast did not perform.
//!
//! The `LD_PRELOAD` interposer with `TREECAST_INTERCEPT=0` leaves `MPI_Bcast` to the MPI
//! library but still profiles every call, so a job can be profiled (and compared) without
//! treecast changing its communication. [`record_external`] puts such a call into the same
//! per-call-site profile that treecast's own broadcasts go to.

use super::state;
use crate::error::Result;
use crate::profile::{self, CallSite};
use mpi::ffi::{self, MPI_Comm, MPI_Datatype};

/// Record a broadcast of `count` elements of `datatype` from `root` on `comm` that ran from
/// `t0` to `t1` (`MPI_Wtime` seconds) outside treecast, `ok` telling whether it succeeded.
///
/// Collective on first use for `comm`, like any treecast call: the communicator's state is
/// created then (every rank of `comm` must call this for the same broadcasts, which holds when
/// each rank records each of its `MPI_Bcast` calls). Inter-communicators have no state and are
/// rejected with `MPI_ERR_COMM`; a message size that cannot be computed (e.g. an invalid
/// datatype) is recorded as 0 bytes. The call takes a sequence number like a served call, so a
/// profile's sample call lines up across ranks.
///
/// # Safety
/// `comm` must be a valid communicator handle and `datatype` a valid or null datatype handle.
#[allow(clippy::too_many_arguments)]
pub unsafe fn record_external(
    comm: MPI_Comm,
    site: CallSite,
    count: i64,
    datatype: MPI_Datatype,
    root: i32,
    t0: f64,
    t1: f64,
    ok: bool,
) -> Result<()> {
    state::check_comm(comm)?;
    let bytes = message_bytes(count, datatype);
    let slot = state::get_or_create(comm)?;
    let mut st = slot.lock().unwrap_or_else(|p| p.into_inner());
    let seq = st.seq;
    st.seq += 1;
    profile::record_mpi_bcast(&mut st, site, root.max(0) as u32, bytes, t0, t1, ok, seq);
    Ok(())
}

/// Bytes of `count` elements of `datatype` (0 when not computable). One query (the type size)
/// rather than the executor's full layout description: this runs on every profiled call.
fn message_bytes(count: i64, datatype: MPI_Datatype) -> u64 {
    let Ok(count) = u64::try_from(count) else { return 0 };
    // SAFETY: the null handle is compared first; other handles are valid per the caller.
    unsafe {
        if count == 0 || datatype == ffi::RSMPI_DATATYPE_NULL {
            return 0;
        }
        let mut size: ffi::MPI_Count = 0;
        if ffi::PMPI_Type_size_x(datatype, &mut size) != ffi::MPI_SUCCESS as i32 || size < 0 {
            return 0;
        }
        (size as u64).saturating_mul(count)
    }
}
