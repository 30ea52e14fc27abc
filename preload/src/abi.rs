//! The C symbols: `MPI_Bcast`, `MPI_Init`, `MPI_Init_thread`, `MPI_Finalize`.

use crate::{mode, serve};
use mpi::ffi::{self, MPI_Comm, MPI_Datatype};
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

/// Implementation behind the `MPI_Bcast` trampoline.
unsafe extern "C" fn c_bcast_from(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    return_address: usize,
) -> c_int {
    serve::bcast_entry(buffer, count, datatype, root, comm, return_address)
}

treecast::c_bcast_entry!(c_bcast_from => MPI_Bcast);

/// `MPI_Init`: `PMPI_Init`, then the interposer's start-up (collective over the world).
///
/// # Safety
/// Same contract as `MPI_Init`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    let rc = ffi::PMPI_Init(argc, argv);
    if rc == ffi::MPI_SUCCESS as c_int {
        mode::start_up();
    }
    rc
}

/// `MPI_Init_thread`: `PMPI_Init_thread`, then the interposer's start-up. Every thread level
/// is supported; with `MPI_THREAD_MULTIPLE`, threads may broadcast concurrently on different
/// communicators (as MPI itself allows).
///
/// # Safety
/// Same contract as `MPI_Init_thread`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    let rc = ffi::PMPI_Init_thread(argc, argv, required, provided);
    if rc == ffi::MPI_SUCCESS as c_int {
        mode::start_up();
    }
    rc
}

/// `MPI_Finalize`: `PMPI_Finalize`, inside which treecast's finalize hook writes the profile.
///
/// # Safety
/// Same contract as `MPI_Finalize`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    mode::finalizing();
    let rc = ffi::PMPI_Finalize();
    mode::finalized();
    rc
}
