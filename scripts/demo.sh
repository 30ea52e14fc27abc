#!/usr/bin/env bash
# Set up (installing what is missing), build, and run the main demo.
#
# As root (with network namespaces, bridges and tc available) the demo runs on an emulated
# cluster built by scripts/emucluster.sh: 3 leaf switches x 3 hosts below a core switch, 2 extra
# bridges per uplink, uplinks shaped to 300 Mbit/s (an oversubscribed tree). It shows
#   1. the tree treecast infers from RTTs alone (`treecast probe`, drawn as text),
#   2. the plan topo_bcast runs for a 4 MiB broadcast from rank 0 on that tree,
#   3. topo_bcast against Open MPI's MPI_Bcast, side by side in one run, with the physical
#      bound bytes / uplink rate, and the headline ratios.
# Otherwise (not root, or the kernel lacks what emulation needs) it runs on plain local mpirun:
# the Rust example and the benchmark on NP ranks (default 4) of this machine.
#
# Environment: NP (local ranks), DEMO_LOCAL=1 (skip the emulated cluster), EMUCLUSTER_PREFIX,
# TREECAST_MPI=mpich (MPICH instead of Open MPI; see README "Open MPI or MPICH").
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
. scripts/env.sh

cargo build --release --all-targets

local_demo() {
  local np="${NP:-4}"
  echo
  echo "== topo_bcast from Rust on $np ranks"
  local_mpirun "$np" "$TREECAST_RELEASE/examples/rust_bcast"
  echo
  echo "== topo_bcast vs MPI_Bcast on $np ranks (medians, one run)"
  local_mpirun "$np" "$TREECAST_RELEASE/treecast" bench --max 4MiB
}

if [ "${DEMO_LOCAL:-0}" = 1 ] || [ "$(id -u)" != 0 ]; then
  [ "$(id -u)" = 0 ] || echo "demo: not root, so no emulated cluster (it needs network namespaces); running locally"
  local_demo
  exit 0
fi

prefix="${EMUCLUSTER_PREFIX:-tcdemo}"
emu=(scripts/emucluster.sh --prefix "$prefix")
rate_mbit=300
echo
echo "== building an emulated cluster: 3 switches x 3 hosts, uplinks ${rate_mbit} Mbit/s"
if ! "${emu[@]}" up 3x3 --extra-hops 2 --uplink-rate "${rate_mbit}mbit" --force; then
  echo "demo: the emulated cluster could not be built (see above); running locally instead"
  local_demo
  exit 0
fi
trap '"${emu[@]}" down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

work=$(mktemp -d "${TMPDIR:-/tmp}/treecast-demo.XXXXXX")
trap '"${emu[@]}" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# 9 ranks share this machine's cores: idle ranks yield the CPU instead of busy-polling, so the
# times below are the network's and the algorithms', not the scheduler's (both sides alike).
# With MPICH, env.sh exports its counterpart (the progress throttle), which Hydra passes on.
yield=(--mca mpi_yield_when_idle 1)
log_info=(-x TREECAST_LOG=info)
mpi_name="Open MPI's MPI_Bcast (tuned)"
if [ "${TREECAST_MPI:-openmpi}" = mpich ]; then
  yield=()
  log_info=(-genv TREECAST_LOG info)
  mpi_name="MPICH's MPI_Bcast"
fi
tc="$TREECAST_RELEASE/treecast"

echo
echo "== 1. the tree treecast inferred from RTTs (treecast probe under mpirun; the truth is"
echo "      s0: h000-h002, s1: h003-h005, s2: h006-h008, uplinks 300 Mbit/s)"
"${emu[@]}" mpirun "${yield[@]}" "${log_info[@]}" "$tc" probe --save "$work/tree.json" \
  2>"$work/probe.log"
grep -E "probed|hosts run on|inferred|uncertain|no structure" "$work/probe.log" | sed 's/^.*treecast: /   log: /' | sort -u
# Is it right? Compare with the cluster as emulated (leaf groups, tree, rooted hierarchy).
"${emu[@]}" truth >"$work/truth"
if verdict=$("$tc" topology compare "$work/truth" "$work/tree.json"); then
  echo "   check: the inferred tree matches the emulated cluster ($verdict)"
else
  echo "   check: the inferred tree does NOT match the emulated cluster: $verdict"
fi

echo
echo "== 2. the plan topo_bcast runs for 4 MiB from rank 0 on that tree"
"$tc" plan --topology "$work/tree.json" --root 0 --bytes 4MiB --format text \
  | sed -n '1,4p;/^candidates:/,/^$/p;/^relay routes/,$p' | head -40

echo
echo "== 3. topo_bcast vs $mpi_name, same job, medians over iterations"
"${emu[@]}" mpirun "${yield[@]}" "$tc" bench --mode barrier --min 1KiB --max 16MiB --step 4 --iters 40 \
  2>/dev/null | tee "$work/bench.txt"

echo
echo "== headline (bound = bytes / uplink rate: every byte must cross one 300 Mbit/s uplink)"
awk -v rate="$rate_mbit" '
  $1 ~ /^[0-9]+$/ && NF >= 5 {
    bytes = $1; mpi = $3 / 1000; topo = $4 / 1000; bound = bytes * 8 / (rate * 1e6) * 1000
    label = bytes >= 1048576 ? sprintf("%d MiB", bytes / 1048576) : sprintf("%d KiB", bytes / 1024)
    if (bytes >= 1048576)
      printf "   %-7s topo_bcast %8.1f ms  MPI_Bcast %8.1f ms  -> %.1fx faster; %.2fx the bound (%.1f ms)\n",
        label, topo, mpi, mpi / topo, topo / bound, bound
    else
      printf "   %-7s topo_bcast %8.3f ms  MPI_Bcast %8.3f ms  -> ratio topo/MPI %.2f\n", label, topo, mpi, topo / mpi
  }' "$work/bench.txt"
echo
echo "demo: done (scripts/cluster-bench.sh measures block and round-robin placement, HAN, and plots)"
