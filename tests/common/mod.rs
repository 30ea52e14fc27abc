//! Helpers for integration tests that launch real MPI jobs with mpirun.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Directory holding the test's cargo artifacts (target/<profile>).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test-binary>
    exe.parent().and_then(Path::parent).expect("target dir").to_path_buf()
}

/// Path of an example binary built by `cargo test` (e.g. `check_bcast`).
pub fn example(name: &str) -> PathBuf {
    let p = target_dir().join("examples").join(name);
    assert!(p.exists(), "{} not built (cargo test builds examples)", p.display());
    p
}

/// The MPI compiler wrapper the crate was built with: `$MPICC` (as rsmpi and `build.rs` read
/// it), else `mpicc` on the PATH.
pub fn mpicc() -> String {
    std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into())
}

/// Another compiler wrapper of the MPI under test (`mpifort`, `mpicxx`): the one beside
/// `$MPICC` when that names a path (None when that installation has none: PyPI's MPICH ships
/// no Fortran bindings), else the one on the PATH.
pub fn mpi_wrapper(name: &str) -> Option<PathBuf> {
    match std::env::var("MPICC") {
        Ok(cc) if cc.contains('/') => {
            let p = Path::new(&cc).with_file_name(name);
            p.exists().then_some(p)
        }
        _ => Some(PathBuf::from(name)),
    }
}

/// Which launcher `mpirun` on the PATH is: Open MPI's (ORTE/PRRTE) or MPICH's Hydra. They take
/// different options for the same things (environment, oversubscription, transports).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Launcher {
    OpenMpi,
    Hydra,
}

/// The launcher, asked once per test process (`mpirun --version`).
pub fn launcher() -> Launcher {
    static L: std::sync::OnceLock<Launcher> = std::sync::OnceLock::new();
    *L.get_or_init(|| {
        let out = Command::new("mpirun")
            .arg("--version")
            .output()
            .expect("failed to start mpirun (is an MPI installed? scripts/setup.sh installs it)");
        let text =
            String::from_utf8_lossy(&out.stdout).to_lowercase() + &String::from_utf8_lossy(&out.stderr).to_lowercase();
        if text.contains("hydra") {
            Launcher::Hydra
        } else {
            Launcher::OpenMpi
        }
    })
}

/// MPICH's counterpart of Open MPI's yield-when-idle (which Open MPI turns on by itself when
/// oversubscribed): a rank whose progress loop finds nothing to do yields the core. Without
/// it, ranks waiting in MPICH spin through whole scheduler time slices: 1,000 broadcasts of 4
/// bytes on 4 ranks of 2 cores took 2.1-4.4 s, with it 0.014 s (MPICH's own CI sets the same
/// variables for oversubscribed runs).
pub const MPICH_YIELD: [(&str, &str); 2] = [
    ("MPIR_CVAR_CH4_PROGRESS_THROTTLE", "1"),
    ("MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT", "1"),
];

/// Run `exe args` on `np` local ranks (oversubscribed) with a hard time limit. `env` is
/// exported to every rank (TREECAST_* variables, LD_PRELOAD).
pub fn mpirun(np: u32, exe: &Path, args: &[&str], env: &[(&str, &str)], limit_s: u32) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.arg("--kill-after=10").arg(limit_s.to_string()).arg("mpirun");
    match launcher() {
        Launcher::OpenMpi => {
            cmd.args(["--oversubscribe", "-np", &np.to_string()]);
            // Keep jobs on this machine and quiet about missing high-speed fabrics.
            cmd.args(["--mca", "btl", "self,vader,tcp"]);
            for (k, v) in env {
                cmd.args(["-x", &format!("{k}={v}")]);
            }
        }
        Launcher::Hydra => {
            // Hydra runs every rank on this host when given no host list, oversubscribed.
            cmd.args(["-n", &np.to_string()]);
            for (k, v) in MPICH_YIELD {
                cmd.args(["-genv", k, v]);
            }
            for (k, v) in env {
                cmd.args(["-genv", k, v]);
            }
        }
    }
    cmd.arg(exe).args(args);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    cmd.output().expect("failed to start mpirun (is an MPI installed?)")
}

/// Assert the job succeeded and printed `want` `CHECK OK` lines; show its output otherwise.
pub fn assert_ok(out: &Output, want_ok_lines: usize, what: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let oks = stdout.lines().filter(|l| l.starts_with("CHECK OK")).count();
    assert!(
        out.status.success() && oks == want_ok_lines,
        "{what}: status {:?}, {oks}/{want_ok_lines} CHECK OK lines\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status.code()
    );
}

/// How many pair measurements a `treecast probe` run with `TREECAST_LOG=info` says it gave up
/// on a stalled round trip (`None`: the log line is missing).
pub fn given_up_in_log(stderr: &str) -> Option<u64> {
    stderr
        .split(" given up on a stalled round trip")
        .next()
        .filter(|head| head.len() < stderr.len())
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
}
