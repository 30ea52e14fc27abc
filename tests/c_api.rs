//! The C ABI: build `mpi-examples/c_bcast.c` with mpicc against `include/treecast.h` and the
//! `libtreecast.so` cargo built, run it under mpirun, and check that the library exports
//! `topo_bcast` but no `MPI_*` symbol (those belong to the MPI library and the interposer).

mod common;
use common::{assert_ok, mpirun, target_dir};
use std::path::PathBuf;
use std::process::Command;

fn libtreecast() -> PathBuf {
    let p = target_dir().join("libtreecast.so");
    assert!(p.exists(), "{} not built", p.display());
    p
}

/// Built once per test process: the tests run side by side, and rebuilding the program while
/// another test launches it replaces the file under mpirun.
fn build_c_example() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(compile_c_example).clone()
}

fn compile_c_example() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = target_dir().join("c_bcast_test");
    let lib = libtreecast();
    let status = Command::new(common::mpicc())
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(root.join("mpi-examples/c_bcast.c"))
        .arg(format!("-L{}", lib.parent().unwrap().display()))
        .args([
            "-ltreecast",
            &format!("-Wl,-rpath,{}", lib.parent().unwrap().display()),
            "-o",
        ])
        .arg(&out)
        .status()
        .expect("mpicc not found (install libopenmpi-dev)");
    assert!(status.success(), "mpicc failed to build c_bcast.c");
    out
}

#[test]
fn c_example_matches_mpi_bcast_and_returns_error_codes() {
    let exe = build_c_example();
    for np in [1, 2, 4, 7] {
        let out = mpirun(np, &exe, &[], &[("TREECAST_TIMEOUT", "120")], 600);
        assert_ok(&out, 1, &format!("c_bcast on {np} ranks"));
    }
    // treecast's own route for every call (treecast_route must then say so).
    let out = mpirun(
        4,
        &exe,
        &[],
        &[("TREECAST_TIMEOUT", "120"), ("TREECAST_ROUTE", "plan")],
        600,
    );
    assert_ok(&out, 1, "c_bcast on 4 ranks, TREECAST_ROUTE=plan");
}

#[test]
fn library_exports_topo_bcast_and_no_mpi_symbols() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(libtreecast())
        .output()
        .expect("nm");
    let syms = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = syms.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    for want in ["topo_bcast", "treecast_init", "treecast_last_error"] {
        assert!(names.contains(&want), "{want} not exported");
    }
    let mpi: Vec<&&str> = names
        .iter()
        .filter(|n| n.starts_with("MPI_") || n.starts_with("mpi_"))
        .collect();
    assert!(mpi.is_empty(), "libtreecast.so must not export MPI symbols: {mpi:?}");
}

/// A program built with the MPI under test and linked with libtreecast.so loads exactly one MPI
/// library. With two implementations installed, a build whose MPI probe is stale (rsmpi's
/// `mpi-sys` does not rerun when `$MPICC` changes) links libtreecast.so against the other
/// one; both then load, and which one a call reaches depends on symbol lookup order.
#[test]
fn one_mpi_library_is_loaded() {
    let exe = build_c_example();
    let out = Command::new("ldd").arg(&exe).output().expect("ldd");
    let text = String::from_utf8_lossy(&out.stdout);
    let mpis: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("libmpi.so") || l.starts_with("libmpi_abi.so"))
        .collect();
    assert_eq!(
        mpis.len(),
        1,
        "{} must load one MPI library, not {mpis:?}; if libtreecast.so brings another, \
         rebuild its MPI probe: cargo clean -p mpi-sys --release\n{text}",
        exe.display()
    );
    assert!(!mpis[0].contains("not found"), "{}", mpis[0]);
}
