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

/// Run `exe args` under `mpirun -np N --oversubscribe` with a hard time limit. TREECAST_*
/// variables in `env` are exported to every rank.
pub fn mpirun(np: u32, exe: &Path, args: &[&str], env: &[(&str, &str)], limit_s: u32) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.arg("--kill-after=10").arg(limit_s.to_string()).arg("mpirun");
    cmd.args(["--oversubscribe", "-np", &np.to_string()]);
    // Keep jobs on this machine and quiet about missing high-speed fabrics.
    cmd.args(["--mca", "btl", "self,vader,tcp"]);
    for (k, v) in env {
        cmd.args(["-x", &format!("{k}={v}")]);
    }
    cmd.arg(exe).args(args);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    cmd.output().expect("failed to start mpirun (is Open MPI installed?)")
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
