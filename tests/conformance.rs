//! Conformance and hostile input (`mpi-examples/conformance.c`), through the C ABI and through
//! the `LD_PRELOAD` interposer, under real MPI.
//!
//! - `correct` on 1-4 ranks, both routes (automatic, and treecast's checked route): every root,
//!   communicator shapes, a pool of datatypes including a zero-size one, counts 0 .. 1000; the
//!   bytes a datatype covers must equal the root's and no other byte may change.
//! - `hostile` on 2-4 ranks, checked route (`TREECAST_ROUTE=plan`), tag bound 32767: receivers
//!   with count 0 against a root sending data, and the reverse, must get errors without hanging,
//!   and after the tag sequence wraps a correct broadcast must receive its own data, not a
//!   message the erroneous call left behind.

mod common;
use common::{assert_ok, mpirun, target_dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn root_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The program against the C ABI (`topo_bcast`) or as a plain MPI program, built once per
/// test process. Every `run` rebuilt it, so one test could be executing the binary while a test
/// running beside it replaced it ("mpirun was unable to launch ... could not access").
fn build(topo: bool) -> PathBuf {
    static BUILT: [OnceLock<PathBuf>; 2] = [OnceLock::new(), OnceLock::new()];
    BUILT[topo as usize].get_or_init(|| compile(topo)).clone()
}

fn compile(topo: bool) -> PathBuf {
    let root = root_dir();
    let dir = target_dir();
    let out = dir.join(if topo { "conformance_topo" } else { "conformance_mpi" });
    let mut cmd = Command::new(common::mpicc());
    cmd.args(["-O2", "-Wall", "-Werror"])
        .arg(root.join("mpi-examples/conformance.c"));
    if topo {
        cmd.arg("-DUSE_TOPO")
            .arg("-I")
            .arg(root.join("include"))
            .arg(format!("-L{}", dir.display()))
            .arg("-ltreecast")
            .arg(format!("-Wl,-rpath,{}", dir.display()));
    }
    let status = cmd
        .arg("-o")
        .arg(&out)
        .status()
        .expect("mpicc not found (install libopenmpi-dev)");
    assert!(status.success(), "mpicc failed to build conformance.c");
    out
}

fn preload() -> String {
    let lib = target_dir().join("libtreecast_preload.so");
    assert!(
        Path::new(&lib).exists(),
        "{} not built (cargo build --release builds it)",
        lib.display()
    );
    lib.display().to_string()
}

/// Run `mode` on `np` ranks with extra environment; `via_preload` runs the plain MPI program
/// under the interposer.
fn run(np: u32, topo: bool, mode: &str, env: &[(&str, &str)], what: &str) {
    let exe = build(topo);
    let lib = preload();
    let mut all: Vec<(&str, &str)> = vec![("TREECAST_TIMEOUT", "60")];
    all.extend_from_slice(env);
    if !topo {
        all.push(("LD_PRELOAD", &lib));
    }
    let out = mpirun(np, &exe, &[mode], &all, 900);
    assert_ok(&out, 1, &format!("{what}: {mode} on {np} ranks"));
}

#[test]
fn correct_broadcasts_through_the_c_abi_and_the_interposer() {
    for np in [1, 2, 3, 4] {
        for route in ["auto", "plan"] {
            run(
                np,
                true,
                "correct",
                &[("TREECAST_ROUTE", route)],
                &format!("C ABI, route {route}"),
            );
            run(
                np,
                false,
                "correct",
                &[("TREECAST_ROUTE", route)],
                &format!("interposer, route {route}"),
            );
        }
        // On one host the interposer passes automatic-route calls straight to the library;
        // each rank a host of its own makes it serve them (trials, the fast path).
        run(
            np,
            false,
            "correct",
            &[("TREECAST_ROUTE", "auto"), ("TREECAST_VIRTUAL_HOSTS", "1")],
            "interposer, route auto, a host per rank",
        );
    }
}

#[test]
fn erroneous_calls_fail_without_hangs_and_leave_nothing_behind() {
    let env = [("TREECAST_ROUTE", "plan"), ("TREECAST_TAG_UB", "32767")];
    for np in [2, 3, 4] {
        run(np, true, "hostile", &env, "C ABI");
        run(np, false, "hostile", &env, "interposer");
    }
}
