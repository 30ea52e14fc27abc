//! Compiles `src/mpi_consts.c` (MPI constants that are C macros) with the MPI headers, found the
//! way `mpi-sys` finds them.

include!("../build-support/mpi_rpath.rs");

fn main() {
    println!("cargo:rerun-if-changed=src/mpi_consts.c");
    println!("cargo:rerun-if-changed=../build-support/mpi_rpath.rs");
    emit_mpi_rpath();
    let lib = match build_probe_mpi::probe() {
        Ok(lib) => lib,
        Err(errs) => {
            for e in errs {
                println!("cargo:warning=MPI not found: {e}");
            }
            panic!("no MPI library found (install libopenmpi-dev, or put mpicc on PATH)");
        }
    };
    let mut b = cc::Build::new();
    b.file("src/mpi_consts.c");
    match lib.mpicc {
        Some(mpicc) => {
            b.compiler(mpicc);
        }
        None => {
            for inc in &lib.include_paths {
                b.include(inc);
            }
        }
    }
    b.compile("treecast_preload_consts");
}
