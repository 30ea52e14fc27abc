#!/usr/bin/env bash
# Install what treecast needs, only if it is missing.
#
#   scripts/setup.sh            # MPI + libclang (to build)
#   scripts/setup.sh --test     # also what the test suite uses (SimGrid, gfortran, iproute2, binutils, librsvg2-bin, python3, MPICH)
#
# TREECAST_MPI=mpich (the implementation to build with; default openmpi) also installs MPICH:
# PyPI's `mpich` wheel, with pip, under $TREECAST_MPICH_HOME (see lib/probes.sh). --test installs
# it unless TREECAST_MPI=openmpi, since ./scripts/test.sh runs the MPI tests against both.
#
# When apt is used:
# - mpicc missing (a fresh Debian machine): everything missing is installed with apt-get, through sudo
#   when not root -- without MPI nothing can be built, so this is the only way forward.
# - mpicc present (a cluster with environment modules, or a machine already set up): apt-get is used
#   only when we are root on a Debian-like machine (CI containers), and sudo is never called. Anywhere
#   else nothing is installed: one line names what is missing and what needs it, and for --test the
#   script goes on, so the tests needing a missing tool fail with their own message while the rest run.
set -euo pipefail

want_test=0
[ "${1:-}" = "--test" ] && want_test=1
case "${TREECAST_MPI:-}" in
  "" | openmpi | mpich) ;;
  *) echo "setup: TREECAST_MPI=$TREECAST_MPI: expected openmpi or mpich" >&2; exit 2 ;;
esac
want_mpich=0
if [ "${TREECAST_MPI:-}" = mpich ] || { [ "$want_test" = 1 ] && [ -z "${TREECAST_MPI:-}" ]; }; then
  want_mpich=1
fi

have() { command -v "$1" >/dev/null 2>&1; }

# shellcheck source=lib/probes.sh
. "$(dirname "$0")/lib/probes.sh"

# add "what is missing (what needs it)" PACKAGE...: record it in `notes` and its packages in `pkgs`.
add() {
  notes+=("$1")
  shift
  local p
  for p in "$@"; do
    case " ${pkgs[*]:-} " in *" $p "*) ;; *) pkgs+=("$p") ;; esac
  done
}

# Fill `pkgs` (Debian packages to install) and `notes` (what is missing and what needs it).
detect() {
  pkgs=()
  notes=()
  probe_mpi_c || add "mpicc/mpirun that build an MPI program (Open MPI: building and running everything)" libopenmpi-dev openmpi-bin
  probe_libclang || add "libclang where clang-sys looks (rsmpi's bindgen: cargo build)" libclang-dev
  if [ "$want_test" = 1 ]; then
    probe_mpi_fortran ||
      add "an mpifort that compiles 'use mpi' (Fortran compiler: tests/preload.rs Fortran cases)" gfortran
    probe_simgrid || add "smpicc/smpirun (SimGrid: tests/simgrid_crossval.rs)" libsimgrid-dev
    probe_iproute2 || add "ip/tc (iproute2: tests/emulated_cluster.rs)" iproute2
    probe_util_linux || add "unshare/nsenter (util-linux: tests/emulated_cluster.rs)" util-linux
    probe_binutils || add "nm (binutils: tests/c_api.rs, tests/preload.rs symbol checks)" binutils
    probe_rsvg || add "rsvg-convert (librsvg2-bin: tests/profile.rs renders the report's charts)" librsvg2-bin
    probe_python3 || add "python3 (scripts/module-cycles.py: test.sh fails on import cycles; tests/profile.rs tallies predict_bench with scripts/predict_stats_report.py)" python3
  fi
  if [ "$want_mpich" = 1 ] && ! probe_mpich; then
    probe_pip || add "python3 -m pip (installs PyPI's MPICH: TREECAST_MPI=mpich, the MPICH tests)" python3-pip
  fi
}
detect
if [ ${#pkgs[@]} -gt 0 ]; then
  sudo=none
  if have apt-get && [ -f /etc/debian_version ]; then
    if [ "$(id -u)" = 0 ]; then
      sudo=""
    elif ! have mpicc && have sudo; then
      sudo="sudo"
    fi
  fi
  if [ "$sudo" != none ]; then
    echo "setup: installing ${pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; }; then
      echo "setup: apt-get failed installing ${pkgs[*]}" >&2
    fi
    hash -r
    detect
    why="apt-get did not provide them"
  elif have mpicc; then
    why="not installing: mpicc exists and this is not root on a machine with apt-get"
  else
    why="cannot install: needs apt-get on Debian/Ubuntu as root or with sudo"
  fi
  if [ ${#notes[@]} -gt 0 ]; then
    list=$(printf '%s, ' "${notes[@]}")
    echo "setup: missing ${list%, } -- $why; install them (Debian packages: ${pkgs[*]}) or load the modules providing them" >&2
    # Without MPI or libclang nothing builds. A missing test tool only fails the tests that need it.
    probe_mpi_c || exit 1
    probe_libclang || exit 1
  fi
fi

# MPICH from PyPI (no Debian package ships MPICH 5; Debian's MPICH 4.0 was seen hanging in
# MPI_Finalize when oversubscribed). pip's --prefix install needs no virtual environment and is
# not refused on "externally managed" Pythons; the wrappers in it find their prefix themselves.
if [ "$want_mpich" = 1 ] && ! probe_mpich; then
  home=$(probe_mpich_home)
  if probe_pip; then
    echo "setup: installing MPICH ($PROBE_MPICH_WHEEL from PyPI) under $home"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
      --no-deps --prefix "$home" "$PROBE_MPICH_WHEEL" >&2 ||
      echo "setup: pip failed installing $PROBE_MPICH_WHEEL" >&2
    mpich_home_from_local "$home"
  fi
  if ! probe_mpich; then
    echo "setup: missing MPICH under $home (TREECAST_MPI=mpich, the MPICH tests); install it with" \
      "'python3 -m pip install --prefix $home $PROBE_MPICH_WHEEL' or set TREECAST_MPICH_HOME to an MPICH prefix" >&2
    [ "${TREECAST_MPI:-}" = mpich ] && exit 1
  fi
fi

if ! have cargo; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: cargo not found; install Rust (https://rustup.rs) first" >&2
    exit 1
  fi
fi
