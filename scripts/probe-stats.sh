#!/usr/bin/env bash
# probe-stats.sh: how often does live probing find the emulated cluster's true tree?
#
#   scripts/probe-stats.sh [--shape 3x3|TOPOLOGY] [--runs K] [--extra-hops N] [--uplink-rate RATE]
#                          [--yield alternate|on|off] [--hog SECONDS] [--keep DIR] [--prefix P]
#
# Brings up an emulated cluster (scripts/emucluster.sh; default 3x3, 2 extra bridges per uplink,
# 300mbit uplinks), runs `treecast probe` K times (default 10) across its hosts, compares every
# inferred tree with the emulated one (`treecast topology compare`: leaf groups, tree, rooted
# hierarchy) and prints one line per run and the tally, then tears the cluster down.
#
# --yield: `alternate` (default) runs half of the probes with `--mca mpi_yield_when_idle 1` (as
# the demo and cluster-bench run) and half without; `on` / `off` all one way.
# --hog S: keep one core busy with a CPU hog for the whole run (at most S seconds), to check that
# probing holds on a loaded machine.
# --keep DIR: keep each run's inferred tree (run-K.json), raw measurements (run-K.dump.json, for
# `treecast infer --replay`) and log (run-K.log) in DIR.
#
# Needs root (network namespaces) and a built target/release/treecast. Exit code 0 when the
# runs completed (whatever they found), 1 when the cluster or a probe failed to run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

shape=3x3 runs=10 hops=2 rate=300mbit yield=alternate hog=0 keep="" prefix="${EMUCLUSTER_PREFIX:-tcstats}"
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) shape="${2:?}"; shift 2;;
    --runs) runs="${2:?}"; shift 2;;
    --extra-hops) hops="${2:?}"; shift 2;;
    --uplink-rate) rate="${2:?}"; shift 2;;
    --yield) yield="${2:?}"; shift 2;;
    --hog) hog="${2:?}"; shift 2;;
    --keep) keep="${2:?}"; shift 2;;
    --prefix) prefix="${2:?}"; shift 2;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    *) echo "probe-stats: unknown argument $1" >&2; exit 2;;
  esac
done
case "$yield" in alternate|on|off) ;; *) echo "probe-stats: --yield takes alternate, on or off" >&2; exit 2;; esac
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "probe-stats: --runs takes a positive number" >&2; exit 2; }
[[ "$hog" =~ ^[0-9]+$ ]] || { echo "probe-stats: --hog takes seconds" >&2; exit 2; }
bin=target/release/treecast
[ -x "$bin" ] || { echo "probe-stats: build first (cargo build --release)" >&2; exit 1; }

emu=(scripts/emucluster.sh --prefix "$prefix")
work=$(mktemp -d "${TMPDIR:-/tmp}/probe-stats.XXXXXX")
out="${keep:-$work}"
mkdir -p "$out"
hog_pid=""
cleanup() {
  [ -z "$hog_pid" ] || kill "$hog_pid" 2>/dev/null || true
  "${emu[@]}" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

uplink=(--uplink-rate "$rate")
[ "$rate" != none ] || uplink=()
"${emu[@]}" up "$shape" --extra-hops "$hops" "${uplink[@]}" --force >/dev/null
"${emu[@]}" truth >"$work/truth"
# The truth as JSON (the file emucluster was given may be Slurm or JSON; compare reads both).
truth="$work/truth.conf"
cp "$work/truth" "$truth"

if [ "$hog" -gt 0 ]; then
  # Self-bounded, one process: killing it ends it (a killed timeout wrapper can orphan its loop).
  bash -c "while [ \$SECONDS -lt $hog ]; do :; done" &
  hog_pid=$!
fi

rooted=0 groups=0 failed=0
printf '%-4s %-6s %-7s %s\n' run yield time verdict
for ((k = 1; k <= runs; k++)); do
  case "$yield" in
    on) y=1;;
    off) y=0;;
    *) y=$(( k % 2 ));;
  esac
  mca=()
  [ "$y" = 0 ] || mca=(--mca mpi_yield_when_idle 1)
  t0=$(date +%s.%N)
  if "${emu[@]}" mpirun "${mca[@]}" -x TREECAST_LOG=info -x "TREECAST_PROBE_DUMP=$out/run-$k.dump.json" \
      "$bin" probe --format json >"$out/run-$k.json" 2>"$out/run-$k.log"; then
    t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    verdict=$("$bin" topology compare "$truth" "$out/run-$k.json" --format json || true)
    line=$("$bin" topology compare "$truth" "$out/run-$k.json" || true)
    case "$verdict" in *'"rooted":true'*) rooted=$((rooted + 1));; esac
    case "$verdict" in *'"leaf_groups":true'*) groups=$((groups + 1));; esac
    conf=$(grep -o 'confidence [0-9.]*' "$out/run-$k.log" | tail -1 || true)
    printf '%-4s %-6s %-7.1f %s%s\n' "$k" "$([ "$y" = 1 ] && echo yes || echo no)" "$t" "$line" "${conf:+ ($conf)}"
  else
    failed=$((failed + 1))
    printf '%-4s %-6s %-7s %s\n' "$k" "$([ "$y" = 1 ] && echo yes || echo no)" - "probe failed: $(tail -1 "$out/run-$k.log")"
  fi
done
echo "exact rooted tree: $rooted/$runs; leaf groups right: $groups/$runs; failed: $failed (shape $shape, $hops extra hops, uplinks $rate, yield $yield, hog ${hog}s)"
[ "$failed" = 0 ]
