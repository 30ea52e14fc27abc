//! `libtreecast_preload.so`: serve and profile the broadcasts of unmodified MPI programs.
//!
//! ```text
//! mpirun -x LD_PRELOAD=$PWD/target/release/libtreecast_preload.so ./app
//! ```
//!
//! Like profilers built on the MPI profiling interface (mpiP, IPM), the library defines a few
//! `MPI_*` symbols, which the dynamic linker resolves before the MPI library's, and reaches MPI
//! itself through the `PMPI_*` names. Everything it does not define is the MPI library's, as
//! usual. It defines:
//!
//! - `MPI_Bcast` (C, and C++, whose bindings call it) and the Fortran bindings `mpi_bcast_`,
//!   `mpi_bcast__`, `mpi_bcast`, `MPI_BCAST` (`mpif.h`, `use mpi`) and `mpi_bcast_f08_`
//!   (`use mpi_f08`): served by treecast's broadcast, or passed to `PMPI_Bcast` and profiled
//!   when `TREECAST_INTERCEPT=0` ([`serve`]);
//! - `MPI_Init`, `MPI_Init_thread`, `MPI_Finalize` and their Fortran bindings: start-up (ranks
//!   agree on the mode and set up treecast on `MPI_COMM_WORLD`) and shutdown ([`mode`]).
//!   Open MPI's Fortran `mpi_init_` calls `PMPI_Init` directly, not `MPI_Init`, so the Fortran
//!   names are wrapped too ([`fortran`]).
//!
//! For per-call-site profiles the broadcast entry points are trampolines that pass their return
//! address — the caller's call site — to the implementation ([`trampoline`]).

mod abi;
mod fortran;
mod mode;
mod serve;
mod trampoline;
