//! Build script: which MPI we build against.
//!
//! The preprocessor's view of `mpi.h` (through the wrapper rsmpi uses: `$MPICC`, else `mpicc`)
//! names the implementation and its version. The crate gets `cfg(treecast_mpi = "openmpi" |
//! "mpich")` (MPICH derivatives such as Intel MPI count as MPICH: same handle representation)
//! and `TREECAST_MPI_BUILT_WITH` (printed by `treecast --version` and compared with the library
//! actually loaded at run time).
//!
//! That an MPI wrapper and libclang exist at all is checked before cargo runs, by
//! `scripts/setup.sh` (which every script calls first). A build script cannot do it earlier
//! than `mpi-sys`'s: cargo runs a package's build script after those of its dependencies, and
//! schedules a dependency-free checking crate behind the long bindgen chain (tried: on two
//! cores it never started before bindgen failed).

use std::process::Command;

include!("build-support/mpi_rpath.rs");

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build-support/mpi_rpath.rs");
    emit_mpi_rpath();
    for var in ["MPICC", "PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rustc-check-cfg=cfg(treecast_mpi, values(\"openmpi\", \"mpich\", \"unknown\"))");

    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let (family, description) = detect_mpi(&mpicc);
    println!("cargo:rustc-cfg=treecast_mpi=\"{family}\"");
    println!("cargo:rustc-env=TREECAST_MPI_BUILT_WITH={description}");
}

/// The MPI family and a one-line description, from the macros `mpi.h` defines.
fn detect_mpi(mpicc: &str) -> (&'static str, String) {
    let out = Command::new(mpicc)
        .args(["-E", "-dM", "-x", "c", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(b"#include <mpi.h>\n");
            }
            child.wait_with_output()
        });
    let text = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => return ("unknown", "unknown MPI".into()),
    };
    let macro_value = |name: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix("#define ")?.strip_prefix(name)?;
            rest.starts_with(' ').then(|| rest.trim().trim_matches('"').to_string())
        })
    };
    let standard = match (macro_value("MPI_VERSION"), macro_value("MPI_SUBVERSION")) {
        (Some(v), Some(s)) => format!(", MPI {v}.{s}"),
        _ => String::new(),
    };
    if let (Some(a), Some(b), Some(c)) = (
        macro_value("OMPI_MAJOR_VERSION"),
        macro_value("OMPI_MINOR_VERSION"),
        macro_value("OMPI_RELEASE_VERSION"),
    ) {
        return ("openmpi", format!("Open MPI {a}.{b}.{c}{standard}"));
    }
    if let Some(v) = macro_value("I_MPI_VERSION") {
        return ("mpich", format!("Intel MPI {v} (MPICH family){standard}"));
    }
    if let Some(v) = macro_value("MPICH_VERSION") {
        return ("mpich", format!("MPICH {v}{standard}"));
    }
    ("unknown", format!("unknown MPI{standard}"))
}
