#!/usr/bin/env bash
# Set up (installing what is missing), build, and run the main demo with mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
. scripts/env.sh

cargo build --release --all-targets
np="${NP:-4}"
echo
echo "== topo_bcast from Rust on $np ranks"
mpirun --oversubscribe -np "$np" target/release/examples/rust_bcast
echo
echo "== topo_bcast vs MPI_Bcast on $np ranks (medians, one run)"
mpirun --oversubscribe -np "$np" target/release/treecast bench --max 4MiB
