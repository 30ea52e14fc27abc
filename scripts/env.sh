# Sourced by the scripts: environment for running Open MPI jobs from them.
# Root may run mpirun (containers and CI run as root); oversubscription is explicit per call.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH="$HOME/.cargo/bin:$PATH"
# Keep jobs on this machine's transports; no warnings about absent fabrics.
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader,tcp}"

# TREECAST_MPI picks the MPI implementation the scripts build and run with: openmpi (default:
# Debian's Open MPI on the PATH) or mpich (the MPICH that setup.sh installs under
# $TREECAST_MPICH_HOME, built into target/mpich so the two builds never overwrite each other).
# TREECAST_RELEASE is where the release binaries are.
case "${TREECAST_MPI:-openmpi}" in
  openmpi) ;;
  mpich)
    # shellcheck source=lib/probes.sh
    . "$(dirname "${BASH_SOURCE[0]}")/lib/probes.sh"
    TREECAST_MPICH_HOME=$(probe_mpich_home)
    export TREECAST_MPICH_HOME
    export PATH="$TREECAST_MPICH_HOME/bin:$PATH" MPICC="$TREECAST_MPICH_HOME/bin/mpicc"
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/mpich}"
    export CARGO_TARGET_DIR
    # Idle ranks yield the core (MPICH spins otherwise; Open MPI yields by itself when
    # oversubscribed). Hydra passes the environment to every rank.
    export MPIR_CVAR_CH4_PROGRESS_THROTTLE="${MPIR_CVAR_CH4_PROGRESS_THROTTLE:-1}"
    export MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT="${MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT:-1}"
    ;;
  *)
    echo "TREECAST_MPI=$TREECAST_MPI: expected openmpi or mpich" >&2
    return 2
    ;;
esac
export TREECAST_RELEASE="${CARGO_TARGET_DIR:-target}/release"

# mpirun on NP ranks of this machine with the chosen implementation's options (Open MPI needs
# --oversubscribe beyond the core count; Hydra oversubscribes by itself).
local_mpirun() {
  local np="$1"
  shift
  if [ "${TREECAST_MPI:-openmpi}" = mpich ]; then
    mpirun -n "$np" "$@"
  else
    mpirun --oversubscribe -np "$np" "$@"
  fi
}
