# Probes for what treecast needs, sourced by scripts/setup.sh and by tests/setup_probes.rs.
#
# Each probe answers the question the way the consumer of the tool asks it, not by the presence of
# a file that merely looks right: libclang is searched exactly where and by the names clang-sys
# (rsmpi's bindgen) searches, an MPI compiler wrapper must compile and link an MPI program, a
# Fortran wrapper must compile a `use mpi` program. A probe that says yes when the consumer would
# fail leaves a fresh machine without the package it needs (this happened: libclang-cpp.so.14 from
# the base image was taken for libclang).
#
# SETUP_SYSROOT (tests only) prefixes the fixed system directories searched for libclang, so a test
# can build a fake /usr/lib in a temporary directory.

probe_have() { command -v "$1" >/dev/null 2>&1; }

# A 64-bit ELF file (clang-sys rejects libraries of the wrong class; on our targets that is 64-bit).
probe_is_elf64() {
  [ -f "$1" ] || return 1
  [ "$(od -An -tx1 -N5 "$1" 2>/dev/null | tr -d ' \n')" = "7f454c4602" ]
}

# Does DIR hold a file clang-sys would load as libclang? clang-sys (runtime loading, Linux) matches
# libclang.so, libclang-*.so, libclang.so.*, libclang-*.so.* and skips any name containing "-cpp."
# (libclang-cpp is the C++ library, not the C API bindgen needs).
probe_libclang_in_dir() {
  local d="$1" f name
  [ -n "$d" ] && [ -d "$d" ] || return 1
  for f in "$d"/libclang.so "$d"/libclang-*.so "$d"/libclang.so.* "$d"/libclang-*.so.*; do
    [ -e "$f" ] || continue
    name=${f##*/}
    case "$name" in *-cpp.*) continue ;; esac
    probe_is_elf64 "$f" && return 0
  done
  return 1
}

# clang-sys's search order (build/common.rs, search_libclang_directories):
#   1. LIBCLANG_PATH, if set, and nothing else: a matching file, or a directory holding one;
#   2. `llvm-config --prefix` / {bin,lib,lib64};
#   3. every directory of LD_LIBRARY_PATH (how `module load llvm` provides it);
#   4. fixed globs: /usr/local/llvm*/lib*, /usr/local/lib*/*/*, /usr/local/lib*/*, /usr/local/lib*,
#      /usr/lib*/*/*, /usr/lib*/*, /usr/lib*.
# It never consults the ld cache, so neither do we.
probe_libclang() {
  local d prefix
  if [ -n "${LIBCLANG_PATH+x}" ]; then
    if [ -f "$LIBCLANG_PATH" ]; then
      case "${LIBCLANG_PATH##*/}" in *-cpp.*) return 1 ;; esac
      case "${LIBCLANG_PATH##*/}" in libclang.so | libclang-*.so | libclang.so.* | libclang-*.so.*)
        probe_is_elf64 "$LIBCLANG_PATH" && return 0 ;;
      esac
      return 1
    fi
    probe_libclang_in_dir "$LIBCLANG_PATH"
    return
  fi
  if probe_have llvm-config && prefix=$(llvm-config --prefix 2>/dev/null) && [ -n "$prefix" ]; then
    prefix=${prefix%%$'\n'*}
    for d in "$prefix/bin" "$prefix/lib" "$prefix/lib64"; do
      probe_libclang_in_dir "$d" && return 0
    done
  fi
  local dirs=()
  IFS=: read -r -a dirs <<<"${LD_LIBRARY_PATH:-}"
  for d in "${dirs[@]}"; do
    probe_libclang_in_dir "$d" && return 0
  done
  local root="${SETUP_SYSROOT:-}" pat
  for pat in "/usr/local/llvm*/lib*" "/usr/local/lib*/*/*" "/usr/local/lib*/*" "/usr/local/lib*" \
    "/usr/lib*/*/*" "/usr/lib*/*" "/usr/lib*"; do
    for d in $root$pat; do
      [ -d "$d" ] || continue
      probe_libclang_in_dir "$d" && return 0
    done
  done
  return 1
}

# Run a compiler wrapper on a one-line program in a scratch directory: the wrapper exists, the
# compiler behind it exists, and the MPI headers and libraries it names are installed.
probe_compiles() {
  local cc="$1" ext="$2" src="$3" dir rc
  probe_have "$cc" || return 1
  dir=$(mktemp -d "${TMPDIR:-/tmp}/treecast-probe.XXXXXX") || return 1
  printf '%s\n' "$src" >"$dir/p.$ext"
  (cd "$dir" && "$cc" "p.$ext" -o p >/dev/null 2>&1)
  rc=$?
  rm -rf "$dir"
  return $rc
}

# MPI C wrapper that builds an MPI program (`$MPICC` if set, as rsmpi uses it), and a launcher.
probe_mpi_c() {
  probe_have mpirun &&
    probe_compiles "${MPICC:-mpicc}" c '#include <mpi.h>
int main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }'
}

# Open MPI is the default implementation: `mpicc --showme` is Open MPI's wrapper option.
probe_open_mpi() {
  probe_mpi_c && "${MPICC:-mpicc}" --showme >/dev/null 2>&1
}

# The Fortran tests use mpif.h, `use mpi` and `use mpi_f08`; the `use mpi` module is the one the
# mpifort wrapper can only offer with a working Fortran compiler behind it.
probe_mpi_fortran() {
  probe_compiles mpifort f90 'program p
use mpi
integer :: ierr
call MPI_Init(ierr)
call MPI_Finalize(ierr)
end program p'
}

probe_simgrid() { probe_have smpicc && probe_have smpirun; }

# The emulated cluster: namespaces and tc from iproute2, unshare/nsenter from util-linux.
probe_iproute2() { probe_have ip && probe_have tc; }
probe_util_linux() { probe_have unshare && probe_have nsenter; }
probe_binutils() { probe_have nm; }
probe_rsvg() { probe_have rsvg-convert; }
probe_python3() { probe_have python3; }

# MPICH, the second implementation (TREECAST_MPI=mpich, and ./scripts/test.sh, which runs the MPI
# tests against both): PyPI's `mpich` wheel (MPICH 5 with Hydra's mpirun and the MPI 5 standard
# ABI), installed by setup.sh with pip under $TREECAST_MPICH_HOME. Any MPICH installation
# (a cluster module) can be used instead by pointing TREECAST_MPICH_HOME at its prefix.
PROBE_MPICH_WHEEL="mpich==5.0.2"
probe_mpich_home() {
  printf '%s\n' "${TREECAST_MPICH_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/treecast/mpich}"
}
probe_mpich() {
  local home
  home=$(probe_mpich_home)
  [ -x "$home/bin/mpirun" ] && [ -x "$home/bin/mpichversion" ] && "$home/bin/mpichversion" >/dev/null 2>&1 &&
    probe_compiles "$home/bin/mpicc" c '#include <mpi.h>
int main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }'
}
# Debian's own python3 installs `pip install --prefix P` under P/local (its sysconfig scheme is
# posix_local), where a pyenv or upstream Python installs under P: a fresh Debian machine got
# P/local/bin/mpicc and the MPICH tests found no P/bin/mpicc. Link P/bin, P/lib and P/include to
# P/local's when only the latter exist, so the home is the same whichever python3 installed it;
# the wrappers find their prefix from their own path, through the link or not.
mpich_home_from_local() {
  local home="$1" d
  [ -d "$home/local/bin" ] || return 0
  for d in bin lib include; do
    if [ -e "$home/local/$d" ] && [ ! -e "$home/$d" ] && [ ! -L "$home/$d" ]; then
      ln -s "local/$d" "$home/$d" || return 1
    fi
  done
}
# pip, which installs the MPICH wheel.
probe_pip() { probe_have python3 && python3 -m pip --version >/dev/null 2>&1; }
