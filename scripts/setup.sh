#!/usr/bin/env bash
# Install what treecast needs, only if it is missing.
#
#   scripts/setup.sh            # MPI + libclang (to build)
#   scripts/setup.sh --test     # also what the test suite uses (SimGrid, gfortran, iproute2, binutils)
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

have() { command -v "$1" >/dev/null 2>&1; }

# rsmpi's bindgen loads libclang. clang-sys looks in LIBCLANG_PATH, the ld cache, LD_LIBRARY_PATH
# (how `module load llvm` provides it) and llvm-config's libdir; look in the same places.
have_libclang() {
  [ -n "${LIBCLANG_PATH:-}" ] && return 0
  ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' && return 0
  local dirs=() d f
  IFS=: read -r -a dirs <<<"${LD_LIBRARY_PATH:-}"
  have llvm-config && dirs+=("$(llvm-config --libdir 2>/dev/null || true)")
  for d in "${dirs[@]}"; do
    [ -n "$d" ] || continue
    for f in "$d"/libclang.so* "$d"/libclang-*.so*; do
      [ -e "$f" ] && return 0
    done
  done
  return 1
}

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
  have mpicc || add "mpicc/mpirun (Open MPI: building and running everything)" libopenmpi-dev openmpi-bin
  have_libclang || add "libclang (rsmpi's bindgen: cargo build)" libclang-dev
  if [ "$want_test" = 1 ]; then
    # The mpifort wrapper exists without a Fortran compiler behind it; --version runs that compiler.
    mpifort --version >/dev/null 2>&1 ||
      add "a working mpifort (Fortran compiler: tests/preload.rs Fortran cases)" gfortran
    { have smpicc && have smpirun; } ||
      add "smpicc/smpirun (SimGrid: tests/simgrid_crossval.rs)" libsimgrid-dev
    { have ip && have tc; } || add "ip/tc (iproute2: tests/emulated_cluster.rs)" iproute2
    { have unshare && have nsenter; } ||
      add "unshare/nsenter (util-linux: tests/emulated_cluster.rs)" util-linux
    have nm || add "nm (binutils: tests/c_api.rs, tests/preload.rs symbol checks)" binutils
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
    # Without MPI nothing builds. A missing test tool only fails the tests that need it, and libclang
    # may sit where only clang-sys looks (cargo build then says so), so both go on.
    have mpicc || exit 1
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
