//! The Fortran symbols.
//!
//! What gfortran programs call with Open MPI 4.1 (checked with `nm -u` on programs built by
//! `mpifort`, and `nm -D`/`objdump -d` on Open MPI's libraries):
//!
//! - `mpif.h` and `use mpi`: `mpi_init_`, `mpi_init_thread_`, `mpi_bcast_`, `mpi_finalize_`.
//!   In `libmpi_mpifh.so` these (and the `mpi_x`, `mpi_x__`, `MPI_X` spellings other compilers
//!   use) are aliases of `ompi_x_f`, which call `PMPI_Init`, `PMPI_Bcast`, ... directly — not
//!   the C `MPI_*` names — so the C wrappers never see Fortran calls and the Fortran names must
//!   be defined here.
//! - `use mpi_f08`: `mpi_init_f08_`, `mpi_init_thread_f08_`, `mpi_bcast_f08_`,
//!   `mpi_finalize_f08_` in `libmpi_usempif08.so`. Their disassembly shows the same arguments
//!   as the `mpif.h` bindings (buffer address; `count`, `root` and the handle structs'
//!   `MPI_VAL` integers by reference) except that the optional `ierror` is NULL when absent.
//!   They call `ompi_x_f` through the PLT; we define the `_f08_` names themselves, so the
//!   profile sees the user's call site instead of a site inside `libmpi_usempif08.so`.
//!
//! Broadcasts convert the handles with `MPI_Comm_f2c`/`MPI_Type_f2c` and `MPI_BOTTOM` the way
//! Open MPI's Fortran bindings do (the Fortran `MPI_BOTTOM` is the address of a common block,
//! `mpi_fortran_bottom_`), then take the C path ([`crate::serve`]). Init and finalize call the
//! binding we replace — the next definition of the same name in the dynamic linker's search
//! order (`dlsym(RTLD_NEXT)`) — so the MPI library's Fortran start-up runs unchanged.

use crate::trampoline::fortran_bcast_entry;
use crate::{mode, serve};
use mpi::ffi::{self, RSMPI_Fint as Fint};
use std::ffi::{c_void, CStr};
use std::os::raw::c_int;
use std::sync::OnceLock;

/// Implementation behind the Fortran `MPI_BCAST` trampolines.
unsafe extern "C" fn fortran_bcast_from(
    buffer: *mut c_void,
    count: *const Fint,
    datatype: *const Fint,
    root: *const Fint,
    comm: *const Fint,
    ierr: *mut Fint,
    return_address: usize,
) {
    let c_comm = ffi::RSMPI_Comm_f2c(*comm);
    let c_type = ffi::RSMPI_Type_f2c(*datatype);
    let buffer = if is_fortran_bottom(buffer) {
        std::ptr::null_mut()
    } else {
        buffer
    };
    let rc = serve::bcast(buffer, *count, c_type, *root, c_comm, serve::site(return_address));
    if !ierr.is_null() {
        *ierr = rc as Fint;
    }
}

fortran_bcast_entry!(fortran_bcast_from => mpi_bcast_, mpi_bcast__, mpi_bcast, MPI_BCAST, mpi_bcast_f08_);

/// Whether `p` is Fortran's `MPI_BOTTOM` (Open MPI: the common block `mpi_fortran_bottom`, in
/// each compiler's spelling).
fn is_fortran_bottom(p: *mut c_void) -> bool {
    static BOTTOM: OnceLock<Vec<usize>> = OnceLock::new();
    let bottoms = BOTTOM.get_or_init(|| {
        [
            c"mpi_fortran_bottom_",
            c"mpi_fortran_bottom",
            c"mpi_fortran_bottom__",
            c"MPI_FORTRAN_BOTTOM",
        ]
        .iter()
        .filter_map(|name| {
            // SAFETY: dlsym only reads the loader's tables.
            let a = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!a.is_null()).then_some(a as usize)
        })
        .collect()
    });
    !p.is_null() && bottoms.contains(&(p as usize))
}

/// The definition of `name` after this library in the search order (the one the program would
/// have called without the interposer).
fn next(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym only reads the loader's tables; RTLD_NEXT is relative to this library.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        log::warn!(
            "treecast preload: {} not found in the MPI libraries",
            name.to_string_lossy()
        );
        None
    } else {
        Some(p)
    }
}

/// Store `rc` in the optional `ierr`.
unsafe fn set_ierr(ierr: *mut Fint, rc: c_int) {
    if !ierr.is_null() {
        *ierr = rc as Fint;
    }
}

type InitF = unsafe extern "C" fn(*mut Fint);
type InitThreadF = unsafe extern "C" fn(*const Fint, *mut Fint, *mut Fint);
type FinalizeF = unsafe extern "C" fn(*mut Fint);

/// `MPI_INIT(ierr)`: the MPI library's binding, then start-up.
unsafe fn init(name: &CStr, ierr: *mut Fint) {
    match next(name) {
        Some(f) => std::mem::transmute::<*mut c_void, InitF>(f)(ierr),
        None => set_ierr(ierr, ffi::PMPI_Init(std::ptr::null_mut(), std::ptr::null_mut())),
    }
    mode::start_up();
}

/// `MPI_INIT_THREAD(required, provided, ierr)`: the MPI library's binding, then start-up.
unsafe fn init_thread(name: &CStr, required: *const Fint, provided: *mut Fint, ierr: *mut Fint) {
    match next(name) {
        Some(f) => std::mem::transmute::<*mut c_void, InitThreadF>(f)(required, provided, ierr),
        None => {
            let mut p: c_int = 0;
            let rc = ffi::PMPI_Init_thread(std::ptr::null_mut(), std::ptr::null_mut(), *required as c_int, &mut p);
            *provided = p as Fint;
            set_ierr(ierr, rc);
        }
    }
    mode::start_up();
}

/// `MPI_FINALIZE(ierr)`: the MPI library's binding (treecast's finalize hook runs inside it).
unsafe fn finalize(name: &CStr, ierr: *mut Fint) {
    mode::finalizing();
    match next(name) {
        Some(f) => std::mem::transmute::<*mut c_void, FinalizeF>(f)(ierr),
        None => set_ierr(ierr, ffi::PMPI_Finalize()),
    }
    mode::finalized();
}

/// The symbol name of an identifier as a C string (checked at compile time).
macro_rules! cname {
    ($name:ident) => {{
        const NAME: &CStr = match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("symbol names have no NUL"),
        };
        NAME
    }};
}

macro_rules! fortran_wrappers {
    (init: $($i:ident),+; init_thread: $($t:ident),+; finalize: $($f:ident),+;) => {
        $(
            /// Interposed Fortran `MPI_INIT` (see the module docs).
            ///
            /// # Safety
            /// Same contract as the Fortran binding.
            #[no_mangle]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $i(ierr: *mut Fint) {
                init(cname!($i), ierr)
            }
        )+
        $(
            /// Interposed Fortran `MPI_INIT_THREAD` (see the module docs).
            ///
            /// # Safety
            /// Same contract as the Fortran binding.
            #[no_mangle]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $t(required: *const Fint, provided: *mut Fint, ierr: *mut Fint) {
                init_thread(cname!($t), required, provided, ierr)
            }
        )+
        $(
            /// Interposed Fortran `MPI_FINALIZE` (see the module docs).
            ///
            /// # Safety
            /// Same contract as the Fortran binding.
            #[no_mangle]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $f(ierr: *mut Fint) {
                finalize(cname!($f), ierr)
            }
        )+
    };
}

fortran_wrappers! {
    init: mpi_init_, mpi_init__, mpi_init, MPI_INIT, mpi_init_f08_;
    init_thread: mpi_init_thread_, mpi_init_thread__, mpi_init_thread, MPI_INIT_THREAD, mpi_init_thread_f08_;
    finalize: mpi_finalize_, mpi_finalize__, mpi_finalize, MPI_FINALIZE, mpi_finalize_f08_;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_addresses_are_not_bottom() {
        let mut x = 0u8;
        assert!(!is_fortran_bottom(&mut x as *mut u8 as *mut c_void));
        assert!(!is_fortran_bottom(std::ptr::null_mut()));
    }
}
