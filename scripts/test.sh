#!/usr/bin/env bash
# Set up (installing what is missing), build, and run every test. Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
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

echo "== all tests passed"
