//! The C ABI (`include/treecast.h`), built into `libtreecast.so`.
//!
//! `topo_bcast` has exactly `MPI_Bcast`'s signature and returns MPI error codes. No panic
//! crosses the boundary: every entry point runs under `error::catch_panic`, which turns a panic into
//! `MPI_ERR_INTERN` with a message retrievable by `treecast_last_error`.
//!
//! For per-call-site profiles of C callers, `topo_bcast` is a two-instruction trampoline (on
//! x86_64 and aarch64) that passes its own return address — the caller's call site — to the
//! implementation at no measurable cost; elsewhere the call site is recorded as unknown.

use crate::error::{Error, ErrorKind};
use crate::profile::CallSite;
use mpi::ffi::{MPI_Comm, MPI_Datatype};
use std::cell::RefCell;
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_last_error(msg: &str) {
    LAST_ERROR.with(|e| {
        let mut e = e.borrow_mut();
        e.clear();
        e.push_str(msg);
    });
}

/// Run `f`, mapping its error (or a panic) to an MPI error code and remembering the message.
pub fn guard(f: impl FnOnce() -> crate::error::Result<()>) -> c_int {
    match crate::error::catch_panic(f) {
        Ok(()) => mpi::ffi::MPI_SUCCESS as c_int,
        Err(e) => {
            log::debug!("topo_bcast error: {e}");
            set_last_error(&e.message);
            e.mpi_code()
        }
    }
}

/// Implementation behind `topo_bcast`, with the caller's return address.
///
/// # Safety
/// Same contract as `MPI_Bcast`.
pub unsafe extern "C" fn bcast_from(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    return_address: usize,
) -> c_int {
    let site = if return_address != 0 {
        CallSite::Address(return_address)
    } else {
        CallSite::Unknown
    };
    guard(|| crate::runtime::bcast(comm, buffer, count as i64, datatype, root, site))
}

/// The MPI types of the C entry points, for [`c_bcast_entry`](crate::c_bcast_entry) in other
/// crates.
#[doc(hidden)]
pub use mpi::ffi;

/// Define `#[no_mangle]` functions with `MPI_Bcast`'s C signature that call
/// `$imp(buffer, count, datatype, root, comm, return_address)`: `topo_bcast` here, and the
/// interposer's `MPI_Bcast` (`preload/`), from this one definition.
///
/// On x86_64 and aarch64 the entry is a two-instruction trampoline: the five arguments stay in
/// their registers, the return address (the caller's call site) becomes the sixth argument
/// (`r9` / `x5`) and it tail-jumps, so `$imp` returns straight to the caller. Elsewhere it is a
/// plain call that records the site as unknown. No unwinding passes through it: `$imp` must
/// catch panics (see [`guard`](crate::capi::guard)).
#[macro_export]
#[doc(hidden)]
macro_rules! c_bcast_entry {
    ($imp:path => $($name:ident),+ $(,)?) => {$(
        /// Drop-in replacement for `MPI_Bcast` (see `treecast::capi`).
        ///
        /// # Safety
        /// Same contract as `MPI_Bcast`.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            _buffer: *mut std::ffi::c_void,
            _count: std::os::raw::c_int,
            _datatype: $crate::capi::ffi::MPI_Datatype,
            _root: std::os::raw::c_int,
            _comm: $crate::capi::ffi::MPI_Comm,
        ) -> std::os::raw::c_int {
            // SysV: arguments in rdi, rsi, rdx, rcx, r8; return address at [rsp].
            core::arch::naked_asm!(
                ".cfi_startproc",
                "mov r9, [rsp]",
                "jmp {imp}",
                ".cfi_endproc",
                imp = sym $imp
            )
        }

        /// Drop-in replacement for `MPI_Bcast` (see `treecast::capi`).
        ///
        /// # Safety
        /// Same contract as `MPI_Bcast`.
        #[cfg(target_arch = "aarch64")]
        #[unsafe(naked)]
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            _buffer: *mut std::ffi::c_void,
            _count: std::os::raw::c_int,
            _datatype: $crate::capi::ffi::MPI_Datatype,
            _root: std::os::raw::c_int,
            _comm: $crate::capi::ffi::MPI_Comm,
        ) -> std::os::raw::c_int {
            // AAPCS64: arguments in x0..x4, return address in x30.
            core::arch::naked_asm!("mov x5, x30", "b {imp}", imp = sym $imp)
        }

        /// Drop-in replacement for `MPI_Bcast`; call site unknown on this architecture.
        ///
        /// # Safety
        /// Same contract as `MPI_Bcast`.
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            buffer: *mut std::ffi::c_void,
            count: std::os::raw::c_int,
            datatype: $crate::capi::ffi::MPI_Datatype,
            root: std::os::raw::c_int,
            comm: $crate::capi::ffi::MPI_Comm,
        ) -> std::os::raw::c_int {
            $imp(buffer, count, datatype, root, comm, 0)
        }
    )+};
}

// `int topo_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)`:
// drop-in replacement for `MPI_Bcast`.
crate::c_bcast_entry!(bcast_from => topo_bcast);

/// `int treecast_init(MPI_Comm comm)`: collective; set up treecast's state for `comm` now
/// (duplicate, topology) instead of at the first `topo_bcast`.
///
/// # Safety
/// `comm` must be a valid communicator handle.
#[no_mangle]
pub unsafe extern "C" fn treecast_init(comm: MPI_Comm) -> c_int {
    guard(|| {
        crate::runtime::state::check_comm(comm)?;
        crate::runtime::state::get_or_create(comm).map(|_| ())
    })
}

/// `int treecast_route(MPI_Comm comm, int root, long long bytes, int *route)`: local; which
/// route broadcasts of `bytes` bytes from `root` take on `comm` (`TREECAST_ROUTE_*` of
/// `treecast.h`, in the order of [`route_code`]), as `TopoBcast::topo_route` gives it.
///
/// # Safety
/// `comm` must be a valid communicator handle or `MPI_COMM_NULL`; `route` writable or NULL.
#[no_mangle]
pub unsafe extern "C" fn treecast_route(comm: MPI_Comm, root: c_int, bytes: i64, route: *mut c_int) -> c_int {
    guard(|| {
        if route.is_null() {
            return Err(Error::new(
                ErrorKind::Mpi(mpi::ffi::MPI_ERR_ARG as i32),
                "treecast_route: route is NULL",
            ));
        }
        let bytes = u64::try_from(bytes)
            .map_err(|_| Error::new(ErrorKind::Count, format!("treecast_route: bytes {bytes} is negative")))?;
        crate::runtime::state::check_comm(comm)?;
        crate::runtime::bcast::check_root(root, crate::exec::raw::comm_size(comm)?)?;
        *route = route_code(crate::runtime::state::route_state(comm, root as u32, bytes)?);
        Ok(())
    })
}

/// `TREECAST_ROUTE_UNSEEN` 0, `_TRIAL` 1, `_PLAN` 2, `_LIBRARY` 3 (`treecast.h`).
pub fn route_code(state: crate::RouteState) -> c_int {
    use crate::{Route, RouteState};
    match state {
        RouteState::Unseen => 0,
        RouteState::Trial => 1,
        RouteState::Settled(Route::Plan) => 2,
        RouteState::Settled(Route::Library) => 3,
    }
}

/// `int treecast_last_error(char *buf, int len)`: copy the message of this thread's last
/// treecast error (NUL-terminated, truncated to `len`), returning its full length.
///
/// # Safety
/// `buf` must be writable for `len` bytes (or NULL with `len` 0 to query the length).
#[no_mangle]
pub unsafe extern "C" fn treecast_last_error(buf: *mut c_char, len: c_int) -> c_int {
    LAST_ERROR.with(|e| {
        let e = e.borrow();
        let bytes = e.as_bytes();
        if !buf.is_null() && len > 0 {
            let n = bytes.len().min(len as usize - 1);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
        bytes.len() as c_int
    })
}
