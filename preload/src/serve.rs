//! `MPI_Bcast` as the interposer performs it, shared by the C and Fortran entry points.
//!
//! Which path a call takes must be the same on every rank of the communicator (otherwise ranks
//! wait for each other in different protocols), so it depends only on what all ranks share:
//! the mode (agreed at start-up), the communicator, and the root.
//!
//! - Left to `PMPI_Bcast`, exactly as without the interposer: the null communicator,
//!   inter-communicators, a root out of range, and calls outside `MPI_Init` .. `MPI_Finalize` —
//!   MPI then reports its own errors through its own error handler.
//! - Served by treecast otherwise. One rank's bad arguments (negative count, null datatype,
//!   `MPI_IN_PLACE`, a buffer that does not match the root's) never make that rank skip the
//!   collective: treecast runs it in error mode so nobody waits forever. The error is then
//!   raised on the communicator's error handler, as `MPI_Bcast` would (fatal by default), and
//!   its code returned.
//! - With `TREECAST_INTERCEPT=0`: `PMPI_Bcast`, timed and recorded in the profile.

use crate::mode;
use mpi::ffi::{self, MPI_Comm, MPI_Datatype};
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};
use treecast::capi::guard;
use treecast::profile::CallSite;
use treecast::runtime::{self, CallOptions};
use treecast::{Error, ErrorKind};

extern "C" {
    /// `MPI_IN_PLACE` of the MPI library we were built against (`src/mpi_consts.c`).
    static treecast_preload_mpi_in_place: *mut c_void;
}

const SUCCESS: c_int = ffi::MPI_SUCCESS as c_int;

/// The call site for a return address captured by a trampoline (0: unknown).
pub fn site(return_address: usize) -> CallSite {
    if return_address != 0 {
        CallSite::Address(return_address)
    } else {
        CallSite::Unknown
    }
}

/// The C `MPI_Bcast` entry (behind the trampoline, `return_address` its caller's call site):
/// what a repeated call needs, and nothing else, so that a call on a settled library route
/// costs about what a call through one more function does.
///
/// - Serving, unprofiled, and the call repeats the last remembered one: [`library_on`] the
///   private duplicate.
/// - Neither serving nor profiling: `PMPI_Bcast` as is.
/// - Anything else, or the mode not yet known: [`bcast_from`], the full entry.
///
/// Every exit is a call in tail position with at most six register arguments, so this compiles
/// to loads, compares and a jump, with no stack frame. Inlined, the full path's locals made the
/// entry save six registers and reserve 328 bytes of stack on every call, and a `Result`
/// between `PMPI_Bcast` and the caller kept a frame too (the interposer cost 3.3-4 ns of an
/// 82 ns 8-byte broadcast).
///
/// # Safety
/// Same contract as `MPI_Bcast`.
#[inline(always)]
pub unsafe fn bcast_entry(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    return_address: usize,
) -> c_int {
    if mode::serving_unprofiled() && buf != treecast_preload_mpi_in_place {
        if let Some(dup) = runtime::bcast::fast_library_comm(comm, buf, count, datatype, root) {
            return library_on(buf, count, datatype, root, dup, comm);
        }
    }
    if mode::known().is_some_and(|m| !m.serve && !m.profile) {
        return ffi::PMPI_Bcast(buf, count, datatype, root, comm);
    }
    bcast_from(buf, count, datatype, root, comm, return_address)
}

/// `PMPI_Bcast` on `dup`, the private duplicate of the user's `comm`; a failure is raised on
/// `comm`, as the full path does. The C calling convention, as the entry's, lets the entry jump
/// here.
#[inline(never)]
unsafe extern "C" fn library_on(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    dup: MPI_Comm,
    comm: MPI_Comm,
) -> c_int {
    let rc = ffi::PMPI_Bcast(buf, count, datatype, root, dup);
    if rc == SUCCESS {
        return SUCCESS;
    }
    fast_failed(comm, rc)
}

/// A fast-path `PMPI_Bcast` that failed with `rc`.
#[cold]
#[inline(never)]
unsafe fn fast_failed(comm: MPI_Comm, rc: c_int) -> c_int {
    let code = guard(|| runtime::bcast::library_failed(rc));
    raise(comm, code)
}

/// [`bcast`] with the call site as a return address (six register arguments and the C calling
/// convention of the entry, so the entry can jump here).
#[inline(never)]
unsafe extern "C" fn bcast_from(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    return_address: usize,
) -> c_int {
    bcast(buf, count, datatype, root, comm, site(return_address))
}

/// `MPI_Bcast` with the interposer's semantics (see the module docs).
///
/// # Safety
/// Same contract as `MPI_Bcast`.
#[inline(never)]
pub unsafe fn bcast(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    site: CallSite,
) -> c_int {
    let mode = mode::current();
    if !mode.serve && !mode.profile {
        return ffi::PMPI_Bcast(buf, count, datatype, root, comm);
    }
    // A call repeating the last remembered one on a settled library route: no checks needed
    // (it was valid, on a live intra-communicator; see `runtime::bcast::try_fast`).
    if mode.serve && buf != treecast_preload_mpi_in_place {
        if let Some(r) = runtime::bcast::try_fast(comm, buf, count as i64, datatype, root, site) {
            return match r {
                Ok(()) => SUCCESS,
                Err(e) => {
                    let rc = guard(|| Err(e));
                    raise(comm, rc)
                }
            };
        }
    }
    if let Some(why) = left_to_mpi(comm, root, mode.initialized) {
        log::debug!("treecast preload: MPI_Bcast left to the MPI library: {why}");
        return ffi::PMPI_Bcast(buf, count, datatype, root, comm);
    }
    if mode.serve {
        serve(buf, count, datatype, root, comm, site)
    } else {
        profiled_pmpi(buf, count, datatype, root, comm, site)
    }
}

/// Why a call must go to `PMPI_Bcast` unchanged, decided from what every rank of `comm` shares.
/// Queries only valid handles (null is compared first), so no MPI error handler runs here.
unsafe fn left_to_mpi(comm: MPI_Comm, root: c_int, known_initialized: bool) -> Option<&'static str> {
    if comm == ffi::RSMPI_COMM_NULL {
        return Some("MPI_COMM_NULL");
    }
    if !known_initialized && (!runtime::state::mpi_initialized() || runtime::state::mpi_finalized()) {
        return Some("called outside MPI_Init .. MPI_Finalize");
    }
    let mut inter: c_int = 0;
    if ffi::PMPI_Comm_test_inter(comm, &mut inter) != SUCCESS {
        return Some("MPI_Comm_test_inter failed");
    }
    if inter != 0 {
        return Some("inter-communicator");
    }
    let mut size: c_int = 0;
    if ffi::PMPI_Comm_size(comm, &mut size) != SUCCESS {
        return Some("MPI_Comm_size failed");
    }
    if root < 0 || root >= size {
        return Some("root out of range");
    }
    None
}

/// Serve with treecast; raise errors on the communicator's error handler.
unsafe fn serve(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    site: CallSite,
) -> c_int {
    let opts = CallOptions {
        null_is_bottom: true,
        reject: (buf == treecast_preload_mpi_in_place).then(|| {
            Error::new(
                ErrorKind::Mpi(ffi::MPI_ERR_ARG as i32),
                "MPI_IN_PLACE is not a valid buffer for MPI_Bcast",
            )
        }),
    };
    let rc = guard(|| runtime::bcast_with(comm, buf, count as i64, datatype, root, site, opts));
    if rc != SUCCESS {
        return raise(comm, rc);
    }
    rc
}

/// `PMPI_Bcast`, counted (and, when sampled, timed) in the profile.
unsafe fn profiled_pmpi(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    site: CallSite,
) -> c_int {
    let mut call = None;
    if guard(|| {
        call = Some(runtime::begin_external(comm, site, count as i64, datatype, root)?);
        Ok(())
    }) != SUCCESS
    {
        log::debug!("treecast preload: MPI_Bcast not profiled: {}", last_error());
    }
    let rc = ffi::PMPI_Bcast(buf, count, datatype, root, comm);
    if let Some(call) = call {
        let ok = rc == SUCCESS;
        guard(|| {
            runtime::end_external(call, ok);
            Ok(())
        });
    }
    rc
}

/// Invoke `comm`'s error handler with `code`, as `MPI_Bcast` does on error, and return what
/// the MPI library's `MPI_Bcast` returns then: `code`, except after a user-defined handler
/// returns under MPICH, which returns `MPI_SUCCESS` (Open MPI returns the code). With the
/// default `MPI_ERRORS_ARE_FATAL` MPI aborts the job; treecast's message, which names what went
/// wrong more precisely than the error class, is logged first.
unsafe fn raise(comm: MPI_Comm, code: c_int) -> c_int {
    let mut handler = std::mem::MaybeUninit::<ffi::MPI_Errhandler>::uninit();
    let (fatal, user) = if ffi::PMPI_Comm_get_errhandler(comm, handler.as_mut_ptr()) == SUCCESS {
        let mut h = handler.assume_init();
        let fatal = h == ffi::RSMPI_ERRORS_ARE_FATAL;
        let user = !fatal && h != ffi::RSMPI_ERRORS_RETURN;
        ffi::PMPI_Errhandler_free(&mut h);
        (fatal, user)
    } else {
        (true, false)
    };
    if fatal {
        log::error!("treecast preload: MPI_Bcast failed: {}", last_error());
    } else {
        log::debug!("treecast preload: MPI_Bcast returns an error: {}", last_error());
    }
    ffi::PMPI_Comm_call_errhandler(comm, code);
    if user && treecast::MPICH_FAMILY {
        SUCCESS
    } else {
        code
    }
}

/// This thread's last treecast error message.
pub fn last_error() -> String {
    let mut buf = [0 as c_char; 512];
    // SAFETY: the buffer holds 512 bytes.
    unsafe {
        treecast::capi::treecast_last_error(buf.as_mut_ptr(), buf.len() as c_int);
        std::ffi::CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    }
}
