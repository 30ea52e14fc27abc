//! Entry points that pass their caller's call site (their own return address) to the
//! implementation, for per-call-site profiles, at the cost of two or five instructions.
//!
//! - Five arguments (C `MPI_Bcast`): the return address becomes the sixth argument, still a
//!   register on x86_64 (`r9`) and aarch64 (`x5`), and the trampoline tail-jumps, so the
//!   implementation returns straight to the caller. That trampoline is `treecast::capi`'s own
//!   ([`treecast::c_bcast_entry`]), which also defines `topo_bcast`: one copy for both.
//! - Six arguments (Fortran `mpi_bcast_(buf, count, datatype, root, comm, ierr)`): on aarch64
//!   the seventh argument is still a register (`x6`). On x86_64 the six argument registers are
//!   taken and a seventh argument lives on the stack, where a tail jump cannot put it (the
//!   slot above the return address belongs to the caller). So the trampoline makes a real
//!   call: it pushes the return address as the stack argument — which also restores the
//!   16-byte alignment the ABI requires at a call — calls the implementation, drops the
//!   argument and returns.
//!
//! Other architectures get plain functions that record the site as unknown. No unwinding ever
//! passes through a trampoline: the implementations catch panics (`treecast::capi::guard`).

/// Define `#[no_mangle]` functions with the Fortran `MPI_BCAST` binding's signature (all
/// arguments by reference, `ierr` possibly NULL for `mpi_f08`'s optional `ierror`) that call
/// `$imp(buffer, count, datatype, root, comm, ierr, return_address)`.
macro_rules! fortran_bcast_entry {
    ($imp:path => $($name:ident),+ $(,)?) => {$(
        /// Interposed Fortran `MPI_BCAST` (see the crate docs).
        ///
        /// # Safety
        /// Same contract as the Fortran `MPI_BCAST` binding.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            _buffer: *mut std::ffi::c_void,
            _count: *const mpi::ffi::RSMPI_Fint,
            _datatype: *const mpi::ffi::RSMPI_Fint,
            _root: *const mpi::ffi::RSMPI_Fint,
            _comm: *const mpi::ffi::RSMPI_Fint,
            _ierr: *mut mpi::ffi::RSMPI_Fint,
        ) {
            // Entry: rsp = 8 (mod 16). After the push rsp = 0 (mod 16), as a call requires, and
            // the pushed return address is the seventh argument at [rsp + 8] in the callee.
            // Naked functions get no unwind tables; the CFI directives describe this frame so
            // debuggers and backtraces (e.g. MPI's on a fatal error) can walk through it.
            core::arch::naked_asm!(
                ".cfi_startproc",
                "mov rax, [rsp]",
                "push rax",
                ".cfi_adjust_cfa_offset 8",
                "call {imp}",
                "add rsp, 8",
                ".cfi_adjust_cfa_offset -8",
                "ret",
                ".cfi_endproc",
                imp = sym $imp
            )
        }

        /// Interposed Fortran `MPI_BCAST` (see the crate docs).
        ///
        /// # Safety
        /// Same contract as the Fortran `MPI_BCAST` binding.
        #[cfg(target_arch = "aarch64")]
        #[unsafe(naked)]
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            _buffer: *mut std::ffi::c_void,
            _count: *const mpi::ffi::RSMPI_Fint,
            _datatype: *const mpi::ffi::RSMPI_Fint,
            _root: *const mpi::ffi::RSMPI_Fint,
            _comm: *const mpi::ffi::RSMPI_Fint,
            _ierr: *mut mpi::ffi::RSMPI_Fint,
        ) {
            // AAPCS64: the seventh argument is x6.
            core::arch::naked_asm!("mov x6, x30", "b {imp}", imp = sym $imp)
        }

        /// Interposed Fortran `MPI_BCAST` (see the crate docs); call site unknown here.
        ///
        /// # Safety
        /// Same contract as the Fortran `MPI_BCAST` binding.
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            buffer: *mut std::ffi::c_void,
            count: *const mpi::ffi::RSMPI_Fint,
            datatype: *const mpi::ffi::RSMPI_Fint,
            root: *const mpi::ffi::RSMPI_Fint,
            comm: *const mpi::ffi::RSMPI_Fint,
            ierr: *mut mpi::ffi::RSMPI_Fint,
        ) {
            $imp(buffer, count, datatype, root, comm, ierr, 0)
        }
    )+};
}

pub(crate) use fortran_bcast_entry;
