//! The `LD_PRELOAD` interposer (`libtreecast_preload.so`, package `treecast-preload`) on
//! unmodified MPI programs under mpirun.
//!
//! The C and Fortran programs in `mpi-examples/preload_*` know nothing of treecast; they print
//! every rank's checksum after every broadcast and check the data themselves. Each is built
//! here with mpicc/mpifort and run twice — plain, and with the preload — and the outputs must be
//! identical. Profiles (`TREECAST_PROFILE`) must count every call and byte exactly, per call
//! site, and say who performed the calls (`mpi_bcast_calls`: 0 when treecast served them, all
//! of them with `TREECAST_INTERCEPT=0`); that is also the proof that treecast served them.

mod common;
use common::{mpi_wrapper, mpicc, mpirun, target_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use treecast::profile::{CommReport, ProfileReport, SiteReport};

/// Message sizes of the byte broadcasts in `preload_bcast.c` / `.f90`: 0, 1, 7, 4096,
/// 1 MiB + 3, 16 MiB.
const BYTE_SIZES_SUM: u64 = 1 + 7 + 4096 + (1 << 20) + 3 + (16 << 20);
/// Elements broadcast per root by `preload_bcast_f08.f90` (default integers: 4 bytes).
const F08_INTS_SUM: u64 = 1 + 7 + 1024 + 262_145 + 4_194_304;

fn root_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The preload library of this build profile.
///
/// `cargo test` builds no other package's cdylib (and a nested `cargo build` would resolve
/// dependency features differently and make the two invocations rebuild each other's
/// artifacts), so the library comes from the workspace build that `./scripts/test.sh` runs
/// first (`cargo build --release --all-targets` builds both packages). It must be newer than
/// every source it is built from, so a stale library fails loudly instead of being tested.
fn preload_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let lib = target_dir().join("libtreecast_preload.so");
        let profile = if target_dir().ends_with("release") {
            " --release"
        } else {
            ""
        };
        let built = std::fs::metadata(&lib)
            .and_then(|m| m.modified())
            .unwrap_or_else(|_| panic!("{} is missing: run `cargo build{profile}` first", lib.display()));
        let root = root_dir();
        let sources = [
            root.join("src"),
            root.join("crates/model/src"),
            root.join("preload/src"),
            root.join("preload/build.rs"),
            root.join("Cargo.toml"),
        ];
        if let Some((newest, path)) = sources.iter().filter_map(|p| newest_file(p)).max() {
            assert!(
                newest <= built,
                "{} is older than {}: run `cargo build{profile}` first",
                lib.display(),
                path.display()
            );
        }
        lib
    })
}

/// The most recently modified file at or below `path`.
fn newest_file(path: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_file() {
        // Test modules (`tests.rs`, `*_tests.rs`) are not in the library: editing one does not
        // relink it.
        let name = path.file_name()?.to_string_lossy();
        if name == "tests.rs" || name.ends_with("_tests.rs") {
            return None;
        }
        return Some((meta.modified().ok()?, path.to_path_buf()));
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| newest_file(&e.path()))
        .max()
}

/// Build `mpi-examples/<src>` with `compiler` into target/<profile>/preload-tests/<out> (once).
/// Built once per test process and name: rebuilding a program that a test running beside this
/// one is launching replaces the file under it (mpirun then cannot find or execute it).
fn program(compiler: &str, src: &str, out: &str, flags: &[&str]) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, exe)) = built.iter().find(|(name, _)| name == out) {
        return exe.clone();
    }
    let dir = target_dir().join("preload-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(out);
    let o = Command::new(compiler)
        .args(flags)
        .arg(root_dir().join("mpi-examples").join(src))
        .arg("-o")
        .arg(&exe)
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{compiler}: {e} (install libopenmpi-dev, gfortran)"));
    assert!(
        o.status.success(),
        "{compiler} {src} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    built.push((out.to_string(), exe.clone()));
    exe
}

/// The Fortran wrapper of the MPI under test. PyPI's MPICH, which `TREECAST_MPI=mpich` uses,
/// ships none; `scripts/test.sh` then skips these tests by name and says so.
fn fortran() -> String {
    let fc = mpi_wrapper("mpifort").unwrap_or_else(|| {
        panic!(
            "the MPI of {} has no mpifort (no Fortran bindings to interpose): skip the \
             Fortran tests with `-- --skip fortran_`",
            mpicc()
        )
    });
    fc.display().to_string()
}

/// No inlining, so that a subroutine holding an MPI_Bcast call stays one call site in the
/// binary and the profile's per-site counts are the program's.
const FFLAGS: &[&str] = &["-O2", "-fno-inline", "-fno-ipa-cp"];

fn c_program() -> PathBuf {
    program(
        &mpicc(),
        "preload_bcast.c",
        "preload_bcast_c",
        &["-O2", "-Wall", "-Werror"],
    )
}

/// A bounded stall turns a hang into a failure with a message.
const TIMEOUT: (&str, &str) = ("TREECAST_TIMEOUT", "120");

/// Each rank a host of its own: a network, so the interposer serves `MPI_Bcast` (on one host,
/// with nothing forced and profiling off, it passes calls straight to the MPI library).
const SERVED: (&str, &str) = ("TREECAST_VIRTUAL_HOSTS", "1");

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Run `exe` plainly and with the preload (plus `env`); both must succeed with a `CHECK OK`
/// line and print exactly the same. Returns the preloaded run.
fn same_with_preload(np: u32, exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let plain = mpirun(np, exe, args, &[], 900);
    let lib = preload_lib().display().to_string();
    let mut penv = vec![("LD_PRELOAD", lib.as_str()), TIMEOUT];
    penv.extend_from_slice(env);
    let pre = mpirun(np, exe, args, &penv, 900);
    let what = format!("{} {args:?} on {np} ranks with {env:?}", exe.display());
    for (o, how) in [(&plain, "plain"), (&pre, "preloaded")] {
        assert!(
            o.status.success() && stdout(o).lines().any(|l| l.starts_with("CHECK OK")),
            "{what}: {how} run failed (status {:?})\n--- stdout\n{}\n--- stderr\n{}",
            o.status.code(),
            stdout(o),
            stderr(o)
        );
    }
    let (a, b) = (stdout(&plain), stdout(&pre));
    if a != b {
        let diff: Vec<String> = a
            .lines()
            .zip(b.lines())
            .filter(|(x, y)| x != y)
            .take(5)
            .map(|(x, y)| format!("  plain:     {x}\n  preloaded: {y}"))
            .collect();
        panic!(
            "{what}: output differs ({} vs {} lines)\n{}\n--- preloaded stderr\n{}",
            a.lines().count(),
            b.lines().count(),
            diff.join("\n"),
            stderr(&pre)
        );
    }
    pre
}

/// A fresh path for a profile file.
fn profile_path(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("treecast-preload-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("profile.json")
}

fn load(path: &Path) -> ProfileReport {
    let r = ProfileReport::load(path).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    r
}

fn world(r: &ProfileReport) -> &CommReport {
    r.communicators
        .iter()
        .find(|c| c.label == "MPI_COMM_WORLD")
        .unwrap_or_else(|| panic!("no world communicator in {r:#?}"))
}

/// The site of `comm` with exactly `calls` calls.
fn site(comm: &CommReport, calls: u64) -> &SiteReport {
    comm.sites.iter().find(|s| s.calls == calls).unwrap_or_else(|| {
        panic!(
            "{}: no site with {calls} calls: {:?}",
            comm.label,
            comm.sites.iter().map(|s| (&s.site, s.calls)).collect::<Vec<_>>()
        )
    })
}

/// Checks common to every site: all `ranks` ranks called, histograms hold the timed calls, no
/// failure, the call site lies in the program (not in MPI or in the preload), and who performed
/// the calls.
fn check_site(s: &SiteReport, ranks: u32, exe: &Path, served: bool) {
    let module = exe.file_name().unwrap().to_string_lossy();
    assert!(s.site.contains(module.as_ref()), "site {} is not in {module}", s.site);
    assert_eq!(s.ranks, ranks, "{}", s.site);
    assert_eq!(s.rank_calls, s.calls * ranks as u64, "{}", s.site);
    assert_eq!(s.failures, 0, "{}", s.site);
    // Histograms hold the timed calls: a sample of the short ones, at least each rank's first
    // (see `profile::tally`), whoever performed them.
    assert_eq!(s.histogram.iter().map(|h| h.2).sum::<u64>(), s.timed_calls);
    assert!(
        s.timed_calls >= ranks as u64 && s.timed_calls <= s.rank_calls,
        "{}",
        s.site
    );
    // Per size class: every call in exactly one class, with a prediction labelled by its size.
    assert_eq!(
        s.size_classes.iter().map(|c| c.calls).sum::<u64>(),
        s.calls,
        "{}",
        s.site
    );
    assert_eq!(
        s.size_classes.iter().map(|c| c.bytes).sum::<u64>(),
        s.bytes,
        "{}",
        s.site
    );
    assert_eq!(s.size_classes.iter().map(|c| c.rank_calls).sum::<u64>(), s.rank_calls);
    for c in &s.size_classes {
        assert!((c.min_bytes..=c.max_bytes).contains(&c.predicted_bytes), "{c:?}");
    }
    let dominant = s.predicted_size_class().expect("the predicted size class is labelled");
    assert_eq!(dominant.predicted, s.predicted, "{}", s.site);
    assert_eq!(s.predicted_bytes, Some(dominant.predicted_bytes));
    let want_mpi = if served { 0 } else { s.calls };
    assert_eq!(s.mpi_bcast_calls, want_mpi, "{}: calls performed by MPI_Bcast", s.site);
    if let Some(sample) = &s.sample_call {
        assert_eq!(sample.algorithm == "MPI_Bcast", !served, "{}", sample.algorithm);
    }
}

/// The split communicators of `preload_bcast` (world rank parity): sizes of the two halves.
fn split_sizes(np: u32) -> Vec<u32> {
    let mut v = vec![np.div_ceil(2), np / 2];
    v.retain(|&n| n > 0);
    v
}

/// Profile of `preload_bcast.c` match mode on `np` ranks, every count hand-derived from the
/// program: per root, 6 byte sizes; on world also 3 typed calls (1000 ints = 4000 B, 10
/// strided vectors of 12 doubles = 960 B, 64 ints from MPI_BOTTOM = 256 B).
fn check_c_profile(r: &ProfileReport, np: u32, exe: &Path, served: bool) {
    assert_eq!(r.world_size, np);
    let w = world(r);
    assert_eq!(w.sites.len(), 2, "{:#?}", w.sites);
    let bytes = site(w, 6 * np as u64);
    assert_eq!(bytes.bytes, np as u64 * BYTE_SIZES_SUM);
    assert_eq!(bytes.roots, (0..np).map(|r| (r, 6)).collect::<Vec<_>>());
    let typed = site(w, 3 * np as u64);
    assert_eq!(typed.bytes, np as u64 * (4000 + 960 + 256));
    for s in [bytes, typed] {
        check_site(s, np, exe, served);
    }
    for n in split_sizes(np) {
        let c = r
            .communicators
            .iter()
            .find(|c| c.size == n && c.label != "MPI_COMM_WORLD")
            .unwrap_or_else(|| panic!("no split communicator of {n} ranks"));
        assert_eq!(c.sites.len(), 1);
        let s = site(c, 6 * n as u64);
        assert_eq!(s.bytes, n as u64 * BYTE_SIZES_SUM);
        check_site(s, n, exe, served);
    }
    assert_eq!(r.communicators.len(), 1 + split_sizes(np).len());
}

#[test]
fn c_program_same_output_when_served_and_profile_counts_exactly() {
    let exe = c_program();
    for np in [3, 4] {
        let path = profile_path(&format!("c{np}"));
        let out = same_with_preload(
            np,
            &exe,
            &[],
            &[("TREECAST_PROFILE", &path.to_string_lossy()), ("TREECAST_LOG", "info")],
        );
        let start_up = stderr(&out).matches("MPI_Bcast served by treecast").count();
        assert_eq!(start_up, np as usize, "start-up log lines:\n{}", stderr(&out));
        check_c_profile(&load(&path), np, &exe, true);
    }
}

#[test]
fn c_program_same_output_with_serving_off_and_still_profiled() {
    let exe = c_program();
    let np = 4;
    let path = profile_path("c-off");
    let out = same_with_preload(
        np,
        &exe,
        &[],
        &[
            ("TREECAST_PROFILE", &path.to_string_lossy()),
            ("TREECAST_INTERCEPT", "0"),
            ("TREECAST_LOG", "info"),
        ],
    );
    assert!(
        stderr(&out).contains("left to MPI (TREECAST_INTERCEPT=0)"),
        "{}",
        stderr(&out)
    );
    check_c_profile(&load(&path), np, &exe, false);
}

#[test]
fn c_program_same_output_when_served_without_profiling() {
    // The plain serving path (no profile): data and checksums, and which way calls went.
    let lines = |out: &Output, what: &str| stderr(out).matches(what).count();
    // One host, nothing forced: every MPI_Bcast goes straight to the library.
    let out = same_with_preload(2, &c_program(), &[], &[("TREECAST_LOG", "info")]);
    assert_eq!(
        lines(&out, "passed to the MPI library (one host)"),
        2,
        "{}",
        stderr(&out)
    );
    // Each rank a host of its own (a network), or treecast's route forced: served, the
    // repeated calls of the library route on the fast path.
    for env in [SERVED, ("TREECAST_ROUTE", "plan")] {
        let out = same_with_preload(2, &c_program(), &[], &[env, ("TREECAST_LOG", "info")]);
        assert_eq!(
            lines(&out, "MPI_Bcast served by treecast"),
            2,
            "{env:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn fortran_use_mpi_program_same_output_and_profile() {
    let exe = program(&fortran(), "preload_bcast.f90", "preload_bcast_f", FFLAGS);
    let np = 4;
    for (intercept, served) in [("1", true), ("0", false)] {
        let path = profile_path(&format!("f-{intercept}"));
        same_with_preload(
            np,
            &exe,
            &[],
            &[
                ("TREECAST_PROFILE", &path.to_string_lossy()),
                ("TREECAST_INTERCEPT", intercept),
            ],
        );
        let r = load(&path);
        let w = world(&r);
        assert_eq!(w.sites.len(), 2, "{:#?}", w.sites);
        // bcast_bytes: 6 sizes per root; check_bottom: one call of 64 integers per root.
        let bytes = site(w, 6 * np as u64);
        assert_eq!(bytes.bytes, np as u64 * BYTE_SIZES_SUM);
        let bottom = site(w, np as u64);
        assert_eq!(bottom.bytes, np as u64 * 256);
        for s in [bytes, bottom] {
            check_site(s, np, &exe, served);
        }
        for n in split_sizes(np) {
            let c = r
                .communicators
                .iter()
                .find(|c| c.size == n && c.label != "MPI_COMM_WORLD");
            let s = site(c.expect("split communicator"), 6 * n as u64);
            assert_eq!(s.bytes, n as u64 * BYTE_SIZES_SUM);
            check_site(s, n, &exe, served);
        }
    }
}

#[test]
fn fortran_mpi_f08_program_same_output_and_profile() {
    let exe = program(&fortran(), "preload_bcast_f08.f90", "preload_bcast_f08", FFLAGS);
    let np = 3;
    let path = profile_path("f08");
    same_with_preload(np, &exe, &[], &[("TREECAST_PROFILE", &path.to_string_lossy())]);
    let r = load(&path);
    // Two call sites: with ierror (even roots) and without (odd roots), 6 sizes each.
    let w = world(&r);
    assert_eq!(w.sites.len(), 2, "{:#?}", w.sites);
    let even = site(w, 6 * 2);
    let odd = site(w, 6);
    assert_eq!(even.bytes, 2 * 4 * F08_INTS_SUM);
    assert_eq!(odd.bytes, 4 * F08_INTS_SUM);
    for s in [even, odd] {
        check_site(s, np, &exe, true);
    }
    // Splits of 2 ranks (roots 0: with ierror, 1: without) and 1 rank (root 0).
    let pair = r.communicators.iter().find(|c| c.size == 2).expect("split of 2");
    for s in &pair.sites {
        assert_eq!((s.calls, s.bytes), (6, 4 * F08_INTS_SUM), "{}", s.site);
        check_site(s, 2, &exe, true);
    }
    let single = r.communicators.iter().find(|c| c.size == 1).expect("split of 1");
    assert_eq!(single.sites.len(), 1);
    assert_eq!((single.sites[0].calls, single.sites[0].bytes), (6, 4 * F08_INTS_SUM));
}

/// A program that mixes sizes (`mpi-examples/mixed_sizes.c`: four sizes in turn from rank 0,
/// then 100 B from every rank in turn) gives the same output under the interposer, and its
/// profile counts, per size class, the calls that followed a broadcast of another size: every
/// call but the very first.
#[test]
fn mixed_sizes_program_counts_calls_after_another_size() {
    let exe = program(&mpicc(), "mixed_sizes.c", "mixed_sizes", &["-O2", "-Wall", "-Werror"]);
    let np = 2;
    let path = profile_path("mixed");
    let p = path.display().to_string();
    same_with_preload(np, &exe, &[], &[("TREECAST_PROFILE", p.as_str())]);
    let r = load(&path);
    let w = world(&r);
    let main = w.sites.iter().find(|s| s.bytes == 75 * (1000 + 8000 + 64000 + 512000));
    let small = w.sites.iter().find(|s| s.bytes == 300 * 100);
    let (Some(main), Some(small)) = (main, small) else {
        panic!(
            "sites: {:?}",
            w.sites.iter().map(|s| (&s.site, s.bytes)).collect::<Vec<_>>()
        );
    };
    assert_eq!(main.size_classes.len(), 4, "{:#?}", main.size_classes);
    let after: Vec<(u64, u64)> = main
        .size_classes
        .iter()
        .map(|k| (k.calls, k.calls_after_other_size))
        .collect();
    assert_eq!(after, [(75, 74), (75, 75), (75, 75), (75, 75)]);
    assert_eq!(
        small
            .size_classes
            .iter()
            .map(|k| k.calls_after_other_size)
            .collect::<Vec<_>>(),
        [300]
    );
}

#[test]
fn inter_communicators_are_left_to_mpi() {
    let out = same_with_preload(4, &c_program(), &["inter"], &[("TREECAST_LOG", "debug"), SERVED]);
    // Two broadcasts on every rank, each left to PMPI_Bcast.
    let fallbacks = stderr(&out)
        .matches("MPI_Bcast left to the MPI library: inter-communicator")
        .count();
    assert_eq!(fallbacks, 2 * 4, "{}", stderr(&out));
}

#[test]
fn errors_reach_the_communicator_error_handler_as_with_mpi() {
    // Negative count, null datatype, root out of range, MPI_IN_PLACE: the same error class
    // returned and passed once to the communicator's (returning) error handler, then a good
    // broadcast on the same communicator; identical output proves identical classes. Each rank
    // a host of its own, so that the interposer serves the calls (on one host it passes them
    // straight to the library).
    same_with_preload(4, &c_program(), &["errors"], &[SERVED]);
}

#[test]
fn errors_are_fatal_by_default_as_with_mpi() {
    // A negative count on MPI_COMM_WORLD, whose handler is MPI_ERRORS_ARE_FATAL: MPI aborts the
    // job; so must the preload, after logging treecast's explanation.
    let exe = c_program();
    let plain = mpirun(2, &exe, &["fatal"], &[], 300);
    let lib = preload_lib().display().to_string();
    let pre = mpirun(
        2,
        &exe,
        &["fatal"],
        &[("LD_PRELOAD", lib.as_str()), TIMEOUT, SERVED],
        300,
    );
    for (o, how) in [(&plain, "plain"), (&pre, "preloaded")] {
        assert!(!o.status.success(), "{how} run did not abort:\n{}", stdout(o));
        assert!(
            !stdout(o).contains("CHECK FAILED"),
            "{how}: MPI_Bcast returned:\n{}",
            stdout(o)
        );
    }
    assert!(
        stderr(&pre).contains("MPI_Bcast failed: count -1 is negative"),
        "{}",
        stderr(&pre)
    );
}

#[test]
fn thread_multiple_concurrent_broadcasts_on_different_communicators() {
    let exe = program(
        &mpicc(),
        "preload_threads.c",
        "preload_threads",
        &["-O2", "-Wall", "-Werror", "-pthread"],
    );
    let np = 4;
    let path = profile_path("threads");
    same_with_preload(np, &exe, &[], &[("TREECAST_PROFILE", &path.to_string_lossy())]);
    // Four duplicates of the world (two freed by their threads, two left to MPI_Finalize,
    // whose profiles are gathered in the finalize hook) and the world: 40 calls each.
    let r = load(&path);
    assert_eq!(
        r.communicators.len(),
        5,
        "{:?}",
        r.communicators.iter().map(|c| &c.label).collect::<Vec<_>>()
    );
    for c in &r.communicators {
        assert_eq!(c.size, np);
        assert_eq!(c.sites.len(), 1, "{}", c.label);
        assert_eq!(c.sites[0].calls, 40, "{}", c.label);
        check_site(&c.sites[0], np, &exe, true);
    }
}

fn exported(lib: &Path) -> Vec<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect()
}

#[test]
fn preload_exports_the_mpi_symbols_and_libtreecast_none() {
    let names = exported(preload_lib());
    for want in [
        "MPI_Bcast",
        "MPI_Init",
        "MPI_Init_thread",
        "MPI_Finalize",
        "mpi_bcast_",
        "mpi_bcast__",
        "mpi_bcast",
        "MPI_BCAST",
        "mpi_bcast_f08_",
        "mpi_init_",
        "mpi_init_thread_",
        "mpi_finalize_",
        "mpi_init_f08_",
        "mpi_init_thread_f08_",
        "mpi_finalize_f08_",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} not exported by the preload library"
        );
    }
    // Nothing else of MPI's is replaced: every other call resolves to the MPI library.
    let extra: Vec<&String> = names
        .iter()
        .filter(|n| n.to_ascii_lowercase().starts_with("mpi_") || n.starts_with("PMPI_"))
        .filter(|n| {
            let l = n.to_ascii_lowercase();
            !["mpi_bcast", "mpi_init", "mpi_finalize"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    assert!(extra.is_empty(), "unexpected MPI symbols: {extra:?}");
    let root = exported(&target_dir().join("libtreecast.so"));
    let mpi: Vec<&String> = root
        .iter()
        .filter(|n| n.to_ascii_lowercase().starts_with("mpi_") || n.starts_with("PMPI_"))
        .collect();
    assert!(mpi.is_empty(), "libtreecast.so must not export MPI symbols: {mpi:?}");
}
