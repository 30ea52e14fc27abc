#!/usr/bin/env bash
# Set up (installing what is missing), build, and run every test. Used by .ci/run.
#
# Everything runs with Open MPI; then the crate is built again with MPICH (target/mpich) and the
# tests that run MPI jobs run again there. TREECAST_MPI=openmpi or =mpich runs one of the two.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test

# The integration tests that launch MPI jobs (the rest are MPI-free and run once).
mpi_tests=(c_api conformance mpi_bcast preload probe profile)

# MPICH must be there before its build: without it that build would quietly take Open MPI's mpicc
# from the PATH, and only the tests that call MPICH's wrappers by path would fail, naming Open MPI.
need_mpich() {
  if ! probe_mpich; then
    echo "test.sh: no working MPICH under $TREECAST_MPICH_HOME for the MPICH build and tests" \
      "(setup.sh said why above)" >&2
    exit 1
  fi
}

# The MPI tests with MPICH (after `TREECAST_MPI=mpich . scripts/env.sh`). PyPI's MPICH has no
# Fortran bindings, so the Fortran interposer tests are skipped when it has no mpifort.
mpich_tests() {
  local skip=()
  if [ ! -x "$TREECAST_MPICH_HOME/bin/mpifort" ]; then
    echo "   not run with MPICH: tests/preload.rs fortran_* ($TREECAST_MPICH_HOME has no mpifort)"
    skip=(--skip fortran_)
  fi
  cargo test --release "${mpi_tests[@]/#/--test=}" -- --test-threads=1 "${skip[@]}"
}

if [ "${TREECAST_MPI:-}" = mpich ]; then
  echo "== TREECAST_MPI=mpich: only the MPICH build and its MPI tests"
  TREECAST_MPI=mpich . scripts/env.sh
  need_mpich
  cargo build --release --all-targets
  mpich_tests
  echo "== all tests passed (MPICH)"
  exit 0
fi
. scripts/env.sh

echo "== format and lint"
cargo fmt --all -- --check
cargo clippy --release --all-targets -- -D warnings

echo "== the model crate needs no MPI"
if cargo tree -p treecast-model -e normal,build | grep -qiE '\bmpi|bindgen|clang-sys'; then
  echo "treecast-model depends on MPI or bindgen:" >&2
  cargo tree -p treecast-model -e normal,build | grep -iE '\bmpi|bindgen|clang-sys' >&2
  exit 1
fi

echo "== no import cycles between modules"
python3 scripts/module-cycles.py

echo "== build"
cargo build --release --all-targets

echo "== unit and property tests"
cargo test --release --lib --bins

echo "== integration tests (real MPI under mpirun; one job at a time on this machine)"
cargo test --release --test '*' -- --test-threads=1

if [ -z "${TREECAST_MPI:-}" ]; then
  echo "== MPICH: build (target/mpich) and the MPI tests again"
  (
    export TREECAST_MPI=mpich
    . scripts/env.sh
    need_mpich
    cargo build --release --all-targets
    mpich_tests
  )
fi

echo "== all tests passed"
