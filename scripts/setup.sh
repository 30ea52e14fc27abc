#!/usr/bin/env bash
# Install what treecast needs, only if it is missing. On a cluster where mpicc already exists
# (environment modules), nothing is installed and apt is never called.
#
#   scripts/setup.sh            # MPI + libclang (to build)
#   scripts/setup.sh --test     # also what the test suite uses (SimGrid, gfortran, iproute2)
set -euo pipefail

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

missing=()
have() { command -v "$1" >/dev/null 2>&1; }

have mpicc || missing+=(libopenmpi-dev openmpi-bin)
# rsmpi's bindgen needs libclang.
if [ -z "${LIBCLANG_PATH:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so'; then
  missing+=(libclang-dev)
fi
if [ "$want_test" = 1 ]; then
  have mpifort || have mpif90 || missing+=(gfortran)
  have smpirun || missing+=(libsimgrid-dev)
  have ip || missing+=(iproute2)
  have tc || missing+=(iproute2)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if have apt-get; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing ${missing[*]} and no apt-get here; install them (e.g. module load openmpi)" >&2
    [ "$want_test" = 1 ] || exit 1
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
