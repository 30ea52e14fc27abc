//! The probes of `scripts/setup.sh` (in `scripts/lib/probes.sh`), against fake machines.
//!
//! A probe that answers "present" when the tool that needs it would fail leaves a fresh
//! machine without a package: the base image's `libclang-cpp.so.14` was once taken for
//! libclang, so `libclang-dev` was never installed and `cargo build` died in bindgen. Each
//! case builds a fake file system and a fake PATH in a temporary directory and asks the probe.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Fake {
    dir: PathBuf,
}

impl Fake {
    fn new(name: &str) -> Fake {
        let dir = std::env::temp_dir().join(format!("treecast-probe-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin")).unwrap();
        // The few real tools the probes use, and nothing else of the machine's PATH (which
        // on a set-up machine has the real mpicc and llvm-config).
        for tool in [
            "od", "tr", "mktemp", "rm", "cat", "dirname", "id", "grep", "printf", "ln",
        ] {
            if let Some(p) = which(tool) {
                std::os::unix::fs::symlink(p, dir.join("bin").join(tool)).unwrap();
            }
        }
        Fake { dir }
    }

    /// A file under the fake root with the given first bytes.
    fn file(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.join("root").join(rel.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, bytes).unwrap();
        p
    }

    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// An executable script in the fake PATH.
    fn tool(&self, name: &str, script: &str) {
        tool_at(&self.dir.join("bin"), name, script);
    }

    /// Run `probe` with the fake PATH and root; extra environment in `env`. True if present.
    fn probe(&self, probe: &str, env: &[(&str, String)]) -> bool {
        let mut cmd = Command::new("/bin/bash");
        cmd.arg("-c")
            .arg(format!(". '{}/scripts/lib/probes.sh'; {probe}", repo().display()))
            .env_clear()
            .env("PATH", self.dir.join("bin"))
            .env("TMPDIR", &self.dir)
            .env("SETUP_SYSROOT", self.root());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("bash runs");
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{probe}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.status.success()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.exists())
}

const ELF64: &[u8] = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0";
const ELF32: &[u8] = b"\x7fELF\x01\x01\x01\0\0\0\0\0\0\0\0\0";

/// The base image of a fresh machine: only the C++ library, in the ld cache's directory and
/// in llvm-config's.
fn base_image(f: &Fake) {
    f.file("/usr/lib/x86_64-linux-gnu/libclang-cpp.so.14", ELF64);
    f.file("/usr/lib/llvm-14/lib/libclang-cpp.so.14", ELF64);
    let prefix = f.root().join("usr/lib/llvm-14");
    f.tool(
        "llvm-config",
        &format!("[ \"$1\" = --prefix ] && echo '{}'", prefix.display()),
    );
}

#[test]
fn libclang_cpp_is_not_libclang() {
    let f = Fake::new("cpp");
    base_image(&f);
    assert!(
        !f.probe("probe_libclang", &[]),
        "libclang-cpp.so.14 alone must not count"
    );
}

#[test]
fn debian_libclang_dev_is_found_in_the_multiarch_directory() {
    let f = Fake::new("multiarch");
    base_image(&f);
    f.file("/usr/lib/x86_64-linux-gnu/libclang-14.so.1", ELF64);
    assert!(f.probe("probe_libclang", &[]));
}

#[test]
fn libclang_in_llvm_configs_prefix_is_found() {
    let f = Fake::new("prefix");
    base_image(&f);
    f.file("/usr/lib/llvm-14/lib/libclang.so.1", ELF64);
    assert!(f.probe("probe_libclang", &[]));
}

#[test]
fn libclang_from_ld_library_path_is_found() {
    let f = Fake::new("ldpath");
    base_image(&f);
    let lib = f.file("/opt/llvm-17/lib/libclang.so.17", ELF64);
    let dir = lib.parent().unwrap().display().to_string();
    assert!(f.probe("probe_libclang", &[("LD_LIBRARY_PATH", format!("/nowhere:{dir}"))]));
}

#[test]
fn libclang_path_is_the_only_place_searched_when_set() {
    let f = Fake::new("libclang-path");
    base_image(&f);
    f.file("/usr/lib/x86_64-linux-gnu/libclang-14.so.1", ELF64);
    let empty = f.root().join("empty");
    fs::create_dir_all(&empty).unwrap();
    // clang-sys searches nothing else once LIBCLANG_PATH is set, so neither may the probe.
    assert!(!f.probe("probe_libclang", &[("LIBCLANG_PATH", empty.display().to_string())]));
    let file = f.file("/opt/x/libclang.so", ELF64);
    assert!(f.probe("probe_libclang", &[("LIBCLANG_PATH", file.display().to_string())]));
    let dir = file.parent().unwrap().display().to_string();
    assert!(f.probe("probe_libclang", &[("LIBCLANG_PATH", dir)]));
}

#[test]
fn a_library_clang_sys_would_reject_is_not_libclang() {
    let f = Fake::new("reject");
    base_image(&f);
    f.file("/usr/lib/libclang.so", b"/* GNU ld script */\nINPUT(libclang-14.so)\n");
    f.file("/usr/lib/i386-linux-gnu/libclang-14.so.1", ELF32);
    assert!(
        !f.probe("probe_libclang", &[]),
        "a linker script or a 32-bit library is not loadable"
    );
}

#[test]
fn an_mpi_wrapper_must_build_a_program() {
    let f = Fake::new("mpicc");
    assert!(!f.probe("probe_mpi_c", &[]), "nothing installed");
    // A wrapper left behind without its compiler or headers (it fails to compile).
    f.tool("mpicc", "echo 'mpicc: error trying to exec cc1' >&2; exit 1");
    f.tool("mpirun", "exit 0");
    assert!(!f.probe("probe_mpi_c", &[]));
    // A working wrapper: writes the output file the way a compiler would.
    f.tool(
        "mpicc",
        "[ \"$1\" = --showme ] && exit 0; while [ $# -gt 0 ]; do [ \"$1\" = -o ] && : >\"$2\"; shift; done",
    );
    assert!(f.probe("probe_mpi_c", &[]));
    assert!(f.probe("probe_open_mpi", &[]));
    // No launcher: nothing can run.
    fs::remove_file(f.dir.join("bin/mpirun")).unwrap();
    assert!(!f.probe("probe_mpi_c", &[]));
}

/// MPICH is found under TREECAST_MPICH_HOME (else ~/.local/share/treecast/mpich) only when
/// its wrapper builds a program and its launcher and `mpichversion` are there: a prefix left
/// half-installed is missing, so setup.sh installs it again.
#[test]
fn mpich_is_a_home_whose_wrapper_builds_a_program() {
    let f = Fake::new("mpich");
    let home = f.dir.join("mpich");
    let bin = home.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let tool = |name: &str, script: &str| tool_at(&bin, name, script);
    let env = [("TREECAST_MPICH_HOME", home.display().to_string())];
    assert!(!f.probe("probe_mpich", &env), "an empty prefix");
    tool("mpicc", WRAPPER_THAT_COMPILES);
    tool("mpirun", "exit 0");
    assert!(!f.probe("probe_mpich", &env), "no mpichversion: not an MPICH");
    tool("mpichversion", "echo 'MPICH Version: 5.0.2'");
    assert!(f.probe("probe_mpich", &env));
    tool("mpicc", "echo 'mpicc: cc not found' >&2; exit 1");
    assert!(!f.probe("probe_mpich", &env), "a wrapper that cannot compile");
    // The default home is under HOME (XDG_DATA_HOME unset).
    let default = [("HOME", f.dir.display().to_string())];
    assert!(!f.probe("probe_mpich", &default));
    let moved = f.dir.join(".local/share/treecast");
    fs::create_dir_all(&moved).unwrap();
    fs::rename(&home, moved.join("mpich")).unwrap();
    tool_at(&moved.join("mpich/bin"), "mpicc", WRAPPER_THAT_COMPILES);
    assert!(f.probe("probe_mpich", &default));
}

/// Debian's own python3 puts `pip install --prefix HOME` under HOME/local (its posix_local
/// scheme): on a fresh Debian machine the MPICH wheel landed in HOME/local/bin and the MPICH
/// tests found no HOME/bin/mpicc. `mpich_home_from_local`, which setup.sh runs after pip, links
/// the home's bin, lib and include to local's, after which the probe finds it; a home that
/// already has its own bin is left as it is.
#[test]
fn mpich_installed_under_local_is_linked_into_its_home() {
    let f = Fake::new("mpich-local");
    let home = f.dir.join("mpich");
    let local_bin = home.join("local/bin");
    fs::create_dir_all(&local_bin).unwrap();
    fs::create_dir_all(home.join("local/lib")).unwrap();
    tool_at(&local_bin, "mpicc", WRAPPER_THAT_COMPILES);
    tool_at(&local_bin, "mpirun", "exit 0");
    tool_at(&local_bin, "mpichversion", "echo 'MPICH Version: 5.0.2'");
    let env = [("TREECAST_MPICH_HOME", home.display().to_string())];
    assert!(!f.probe("probe_mpich", &env), "the wheel's files under local/ only");
    let link = format!("mpich_home_from_local '{}'", home.display());
    assert!(f.probe(&link, &env));
    assert!(f.probe("probe_mpich", &env), "linked: the home is an MPICH");
    assert!(fs::symlink_metadata(home.join("bin")).unwrap().file_type().is_symlink());
    assert!(
        home.join("lib").exists() && !home.join("include").exists(),
        "only what local/ has"
    );
    // Again, and on a home with a bin of its own: nothing changes.
    assert!(f.probe(&link, &env));
    let other = f.dir.join("other");
    fs::create_dir_all(other.join("bin")).unwrap();
    fs::create_dir_all(other.join("local/bin")).unwrap();
    assert!(f.probe(&format!("mpich_home_from_local '{}'", other.display()), &env));
    assert!(!fs::symlink_metadata(other.join("bin"))
        .unwrap()
        .file_type()
        .is_symlink());
}

/// A compiler wrapper that "builds" any program: it creates the file named by `-o`.
const WRAPPER_THAT_COMPILES: &str = "while [ $# -gt 0 ]; do [ \"$1\" = -o ] && : >\"$2\"; shift; done";

/// An executable script `bin/name`.
fn tool_at(bin: &Path, name: &str, script: &str) {
    let p = bin.join(name);
    fs::write(&p, format!("#!/bin/sh\n{script}\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn an_mpifort_without_a_fortran_compiler_is_missing() {
    let f = Fake::new("mpifort");
    // Open MPI's wrapper without gfortran: it exists, and fails to compile.
    f.tool(
        "mpifort",
        "echo 'The Open MPI wrapper compiler was unable to find the specified compiler' >&2; exit 1",
    );
    assert!(!f.probe("probe_mpi_fortran", &[]));
    f.tool("mpifort", "exit 0");
    assert!(f.probe("probe_mpi_fortran", &[]));
}

/// The whole script on a machine that has nothing: it must ask apt for every package, and
/// stop (exit 1) when apt provides nothing, naming what is missing.
#[test]
fn setup_on_a_bare_machine_asks_apt_for_everything_and_stops_when_it_fails() {
    let f = Fake::new("setup");
    base_image(&f);
    for tool in ["bash", "sort", "head", "sed"] {
        if let Some(p) = which(tool) {
            std::os::unix::fs::symlink(p, f.dir.join("bin").join(tool)).unwrap();
        }
    }
    let log = f.dir.join("apt.log");
    f.tool("apt-get", &format!("echo \"$@\" >>'{}'", log.display()));
    f.tool("cargo", "exit 0");
    let out = Command::new("/bin/bash")
        .arg(repo().join("scripts/setup.sh"))
        .arg("--test")
        .env_clear()
        .env("PATH", f.dir.join("bin"))
        .env("HOME", &f.dir)
        .env("TMPDIR", &f.dir)
        .env("SETUP_SYSROOT", f.root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let asked = fs::read_to_string(&log).unwrap_or_default();
    if !Path::new("/etc/debian_version").exists() {
        // setup.sh uses apt only on Debian-like machines; elsewhere it only reports.
        assert!(asked.is_empty(), "{asked}");
    } else if is_root() {
        for pkg in [
            "libopenmpi-dev",
            "openmpi-bin",
            "libclang-dev",
            "gfortran",
            "libsimgrid-dev",
            "iproute2",
            "librsvg2-bin",
            "python3",
            // pip for PyPI's MPICH: the fake machine has no python3.
            "python3-pip",
        ] {
            assert!(asked.contains(pkg), "apt-get was not asked for {pkg}: {asked}");
        }
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("libclang") && stderr.contains("mpicc"), "{stderr}");
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
