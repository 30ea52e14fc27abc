#!/usr/bin/env bash
# predict-stats.sh: how often do a profile's predictions meet issue 23's goal, job after job?
#
#   scripts/predict-stats.sh [--runs K] [--ranks N] [--mpich] [--emulated SHAPE] [--keep DIR]
#                            [--calls C] [--sizes LIST] [--root R] [--fresh] [--interleave]
#                            [--bind] [--against BENCH] [--env NAME=VALUE]...
#                            [--against-env NAME=VALUE]... [--against-arg ARG]...
#
# Runs `predict_bench` (a profiled job of topo_bcast calls, 1 KiB .. 16 MiB, that prints each
# size's measured median against its prediction) K times (default 6), one job at a time, and
# tallies the jobs with scripts/predict_stats_report.py: per size the jobs within 25% both ways
# (all ranks entering together, each call from its ranks' entries) and their errors, the jobs
# whose own calls moved by more than a factor of 1.25 within the job, the jobs whose calls ran
# mostly with other ranks sharing a CPU than the set-up's calls of the size ("placed"), those
# whose calls ran more than a factor of 1.25 off the set-up's timing of the same broadcasts
# ("off"), the range of the measured medians over the jobs and how well the predictions follow
# it, and the jobs that met the goal.
#
# Where: one host with N ranks (default 4) under Open MPI, or under MPICH with --mpich (PyPI's
# wheel, as scripts/env.sh sets it up; built into target/mpich); --emulated SHAPE brings up the
# emulated cluster (scripts/emucluster.sh, 2 extra bridges per uplink, 300mbit uplinks, one rank
# per host, `--mca mpi_yield_when_idle 1` as the demo runs) for the jobs and tears it down after.
# --calls C: calls per size (predict_bench's argument, default 200).
# --sizes LIST, --root R: predict_bench's message sizes (bytes, comma-separated, at most one per
# power-of-two class; default 1 KiB .. 16 MiB in powers of 4, the sizes the one-host set-up
# times) and root (default 0): how the predictions hold on inputs the set-up did not time.
# --fresh: the root writes its data anew before each call (predict_bench --fresh), as a program
# broadcasts what it has just computed; by default the same data goes out call after call.
# --interleave: the sizes in turn, one call of each (predict_bench --interleave), as a program's
# calls of several sizes mix; by default every call of a size in a row.
# --bind: one host, bind each rank to a core (round robin, several ranks to a core where they
# outnumber the cores), so the ranks sharing a core stay the same through set-up and job.
# --keep DIR: keep each job's output (job-K.txt), log (job-K.err) and profile (job-K.json, for
# `treecast report`) in DIR; on the emulated cluster also its start-up probe measurements
# (job-K.probe.json, TREECAST_PROBE_DUMP), so a job that inferred a wrong tree can be replayed
# with `treecast infer --replay`.
#
# --against BENCH: an A/B. Each job of this checkout's predict_bench is followed by one of the
# predict_bench binary BENCH (built from another revision, e.g. in a git worktree), alternating
# so both see the host's same states; both are tallied (BENCH's outputs kept as job-K.against.*).
# --env NAME=VALUE: every job's ranks get this environment variable (repeatable), e.g.
# TREECAST_ALGORITHM=hier-pipeline:segs=1. --against-env NAME=VALUE: only the against jobs get it
# (repeatable); without --against they run this checkout's predict_bench, so two settings are
# compared job for job. --against-arg ARG: likewise, an argument only the against jobs' predict_bench
# gets (repeatable), e.g. --against-arg --interleave.
#
# Builds what it runs (cargo build --release --example predict_bench). Timings on a shared
# machine: run nothing else meanwhile. Exit code 0 when every job ran (whatever it measured).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=6 ranks=4 mpich=0 shape="" keep="" calls=200 sizes="" root="" fresh=0 interleave=0 bind=0 against="" prefix="${EMUCLUSTER_PREFIX:-tcpred}"
envs=() against_envs=() against_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="${2:?}"; shift 2;;
    --ranks) ranks="${2:?}"; shift 2;;
    --mpich) mpich=1; shift;;
    --emulated) shape="${2:?}"; shift 2;;
    --keep) keep="${2:?}"; shift 2;;
    --calls) calls="${2:?}"; shift 2;;
    --sizes) sizes="${2:?}"; shift 2;;
    --root) root="${2:?}"; shift 2;;
    --fresh) fresh=1; shift;;
    --interleave) interleave=1; shift;;
    --against-arg) against_extra+=("${2:?}"); shift 2;;
    --bind) bind=1; shift;;
    --against) against="${2:?}"; shift 2;;
    --env) envs+=("${2:?}"); shift 2;;
    --against-env) against_envs+=("${2:?}"); shift 2;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    *) echo "predict-stats: unknown argument $1" >&2; exit 2;;
  esac
done
for v in "$runs" "$ranks" "$calls"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "predict-stats: --runs, --ranks and --calls take positive numbers" >&2; exit 2; }
done
[ "$mpich" = 0 ] || [ -z "$shape" ] || { echo "predict-stats: --emulated runs Open MPI; drop --mpich" >&2; exit 2; }
[ "$bind" = 0 ] || [ -z "$shape" ] || { echo "predict-stats: --bind is for one host; drop --emulated" >&2; exit 2; }
[ -z "$against" ] || [ -x "$against" ] || { echo "predict-stats: --against takes an executable predict_bench, not $against" >&2; exit 2; }
[ -z "$sizes" ] || [[ "$sizes" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "predict-stats: --sizes takes byte counts separated by commas, not $sizes" >&2; exit 2; }
[ -z "$root" ] || [[ "$root" =~ ^[0-9]+$ ]] || { echo "predict-stats: --root takes a rank, not $root" >&2; exit 2; }
for e in "${envs[@]}" "${against_envs[@]}"; do
  [[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || { echo "predict-stats: --env and --against-env take NAME=VALUE, not $e" >&2; exit 2; }
done
# What each job's predict_bench is given.
bench_args=("$calls")
[ -z "$sizes" ] || bench_args+=(--sizes "$sizes")
[ -z "$root" ] || bench_args+=(--root "$root")
[ "$fresh" = 0 ] || bench_args+=(--fresh)
[ "$interleave" = 0 ] || bench_args+=(--interleave)
against_args=("${bench_args[@]}" "${against_extra[@]}")

if [ "$mpich" = 1 ]; then export TREECAST_MPI=mpich; fi
. scripts/env.sh
cargo build --release --example predict_bench >/dev/null
[ -z "$shape" ] || cargo build --release --bin treecast >/dev/null # emucluster.sh runs it
bench="$TREECAST_RELEASE/examples/predict_bench"
[ -n "$against" ] || { [ "${#against_envs[@]}" = 0 ] && [ "${#against_extra[@]}" = 0 ]; } || against="$bench"

work=$(mktemp -d "${TMPDIR:-/tmp}/predict-stats.XXXXXX")
out="${keep:-$work}"
mkdir -p "$out"
emu=(scripts/emucluster.sh --prefix "$prefix")
cleanup() {
  [ -z "$shape" ] || "${emu[@]}" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# launch K [BENCH [TAG]]: the command of job K (its profile kept as job-K[TAG].json with --keep;
# the against jobs, TAG .against, also get --against-env).
launch() {
  local env=() bench="${2:-$bench}" name="job-$1${3:-}" e extra=("${envs[@]}") bench_args=("${bench_args[@]}")
  [ -z "${3:-}" ] || extra+=("${against_envs[@]}")
  [ -z "${3:-}" ] || bench_args=("${against_args[@]}")
  for e in "${extra[@]}"; do
    if [ "$mpich" = 1 ]; then env+=(-genv "${e%%=*}" "${e#*=}"); else env+=(-x "$e"); fi
  done
  if [ -n "$keep" ]; then
    if [ "$mpich" = 1 ]; then env+=(-genv TREECAST_PROFILE "$out/$name.json"); else env+=(-x "TREECAST_PROFILE=$out/$name.json"); fi
    [ -z "$shape" ] || env+=(-x "TREECAST_PROBE_DUMP=$out/$name.probe.json")
  fi
  if [ -n "$shape" ]; then
    "${emu[@]}" mpirun --mca mpi_yield_when_idle 1 "${env[@]}" "$bench" "${bench_args[@]}"
  elif [ "$mpich" = 1 ]; then
    if [ "$bind" = 1 ]; then env+=(-bind-to core); fi
    mpirun -n "$ranks" "${env[@]}" "$bench" "${bench_args[@]}"
  else
    if [ "$bind" = 1 ]; then env+=(--bind-to core:overload-allowed); fi
    mpirun --allow-run-as-root --oversubscribe -np "$ranks" "${env[@]}" "$bench" "${bench_args[@]}"
  fi
}
if [ -n "$shape" ]; then
  "${emu[@]}" up "$shape" --extra-hops 2 --uplink-rate 300mbit --force >/dev/null
  where="emulated $shape"
elif [ "$mpich" = 1 ]; then
  where="one host, $ranks ranks, MPICH"
else
  where="one host, $ranks ranks, Open MPI"
fi
if [ "$bind" = 1 ]; then where="$where, bound to cores"; fi
[ -z "$sizes" ] || where="$where, sizes $sizes"
[ -z "$root" ] || where="$where, root $root"
[ "$fresh" = 0 ] || where="$where, data written anew before each call"
[ "$interleave" = 0 ] || where="$where, sizes in turn"
[ "${#envs[@]}" = 0 ] || where="$where, ${envs[*]}"

failed=0 files=() against_files=()
for ((k = 1; k <= runs; k++)); do
  if launch "$k" >"$out/job-$k.txt" 2>"$out/job-$k.err"; then
    printf 'job %d: %s\n' "$k" "$(tail -1 "$out/job-$k.txt")"
    files+=("$out/job-$k.txt")
  else
    failed=$((failed + 1))
    printf 'job %d failed: %s\n' "$k" "$(tail -1 "$out/job-$k.err")"
  fi
  [ -n "$against" ] || continue
  if launch "$k" "$against" .against >"$out/job-$k.against.txt" 2>"$out/job-$k.against.err"; then
    printf 'job %d against: %s\n' "$k" "$(tail -1 "$out/job-$k.against.txt")"
    against_files+=("$out/job-$k.against.txt")
  else
    failed=$((failed + 1))
    printf 'job %d against failed: %s\n' "$k" "$(tail -1 "$out/job-$k.against.err")"
  fi
done
echo "== $where: $runs jobs${against:+ each}, $failed failed"
[ "${#files[@]}" = 0 ] || python3 scripts/predict_stats_report.py "${files[@]}"
if [ -n "$against" ] && [ "${#against_files[@]}" != 0 ]; then
  echo "== against $against${against_envs[*]:+ with ${against_envs[*]}}${against_extra[*]:+ given ${against_extra[*]}}, jobs alternating with the above"
  python3 scripts/predict_stats_report.py "${against_files[@]}"
fi
[ "$failed" = 0 ]
