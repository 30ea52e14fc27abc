// Included by the build scripts of `treecast` and `treecast-preload` (`include!`).

/// Record the MPI library's directories as the run-time search path of what this package links
/// (binaries, tests, examples, the cdylib), as the MPI compiler wrappers do (`mpicc -show` of
/// MPICH passes `-Wl,-rpath`): an MPI installed outside the linker's default directories, such
/// as the MPICH that `scripts/setup.sh` installs with pip, is then found without
/// LD_LIBRARY_PATH. rsmpi's probe drops the wrapper's rpath, so it is added back here.
fn emit_mpi_rpath() {
    println!("cargo:rerun-if-env-changed=MPICC");
    if let Ok(lib) = build_probe_mpi::probe() {
        for dir in &lib.lib_paths {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
}
