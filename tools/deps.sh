#!/bin/sh
# Checks that plaingpt's build dependencies are present, installs the missing ones where it can (Debian/Ubuntu as
# root or with sudo, macOS with Homebrew), otherwise stops with the command to run. Needs no network when
# everything is already installed.
#
# On success it prints, on standard output, the make variables that say which BLAS to build with; the Makefile
# saves them as build/config.mk (and reruns this script when it changes):
#   BLAS_NAME    what the build will say it uses
#   BLAS_CFLAGS  BLAS_LIBS
#   MPI_NAME     "yes (Open MPI 4.1.4)" or "no (why)"
#   MPI_CFLAGS   MPI_LIBS   empty without MPI; with it, MPI_CFLAGS holds -DPLAINGPT_MPI
#   HTTPLIB_CFLAGS HTTPLIB_LIBS   cpp-httplib, for ./inspect serve (src/explore/)
#
# cpp-httplib (the explorer's local web server, docs/explore.md) is a header-only library upstream and on Homebrew,
# but Debian's libcpp-httplib-dev splits it: a header of declarations plus libcpp-httplib.so, built with OpenSSL,
# zlib and Brotli support. Its pkg-config module "cpp-httplib" says so (-DCPPHTTPLIB_OPENSSL_SUPPORT …); every file
# that includes httplib.h must be compiled with those flags, or its classes would not match the library's. So the
# flags come from that module when there is one, and a plain header needs none. Either way a program that starts a
# server must compile and link.
#
# Open MPI is optional (data-parallel training with mpirun, docs/distributed.md) and never installed by this
# script: when its development package is there (libopenmpi-dev on Debian, open-mpi on Homebrew) the programs are
# built with it, through its pkg-config module "ompi" or, failing that, mpicxx --showme. MPI=0 builds without it
# even when it is installed; MPI=1 makes its absence an error.
#
# The BLAS. OpenBLAS is the default and it is checked for itself — its pkg-config module, or a program that calls
# openblas_get_config() compiling and linking — never for "some cblas.h": Debian's reference BLAS (libblas-dev,
# pulled in by many numerical packages) ships a cblas.h too, and with it plaingpt would either not compile or run
# every matrix product 10–50× slower. To build against another BLAS on purpose, name its pkg-config module:
# `make BLAS=blis` (or `BLAS=blas` for the reference one); the build then says so.
CXX=${CXX:-g++}
BLAS=${BLAS:-openblas}
MPI=${MPI:-auto}

say() { echo "deps: $*" >&2; }

have_header() {  # $1 = header, $2 = extra flags
  printf '#include <%s>\nint main(){return 0;}\n' "$1" | $CXX -std=c++17 $2 -x c++ -fsyntax-only - 2>/dev/null
}

# OpenBLAS is present when a program that asks OpenBLAS for its build configuration compiles and links.
openblas_flags() {  # prints "cflags|libs" of a working OpenBLAS, or fails
  for how in pkg-config plain; do
    if [ $how = pkg-config ]; then
      pkg-config --exists openblas 2>/dev/null || continue
      cflags=$(pkg-config --cflags openblas) libs=$(pkg-config --libs openblas)
    else
      cflags="" libs="-lopenblas"
    fi
    printf '#include <cblas.h>\n#include <openblas_config.h>\nint main(){return openblas_get_config()==0;}\n' |
      $CXX -std=c++17 $cflags -x c++ - -o /dev/null $libs 2>/dev/null || continue
    echo "$cflags|$libs"
    return 0
  done
  return 1
}

# A note when OpenBLAS, left to itself, would run kernels older than the CPU's vector units (an OpenBLAS older than
# the CPU: src/base/blas_kernel.h). The programs then choose better kernels themselves when they start; the note
# says so at build time (only a DYNAMIC_ARCH OpenBLAS reads OPENBLAS_CORETYPE). The rule is the programs' own, compiled with a main that prints its verdict.
openblas_kernel_note() {  # $1 = cflags, $2 = libs
  [ "$(uname -s)" = Linux ] && [ -f src/base/blas_kernel.cpp ] || return 0
  probe=$(mktemp "${TMPDIR:-/tmp}/plaingpt_kernel_XXXXXX") || return 0
  verdict=""
  printf '%s\n' '#include <cblas.h>' '#include <cstdio>' '#include <cstring>' '#include "base/blas_kernel.h"' \
    'int main() {' '  const CpuFeatures cpu = this_cpu();' \
    '  const std::string chosen = openblas_get_corename(), better = better_blas_core(cpu, chosen, false);' \
    '  if (!better.empty() && std::strstr(openblas_get_config(), "DYNAMIC_ARCH"))' '    std::printf("%s|%s|%s", describe_cpu(cpu).c_str(), chosen.c_str(), better.c_str());' \
    '}' | $CXX -std=c++17 $1 -Isrc -x c++ - -x none src/base/blas_kernel.cpp -o "$probe" $2 2>/dev/null &&
    verdict=$(env -u OPENBLAS_CORETYPE "$probe" 2>/dev/null)
  rm -f "$probe"
  [ -n "$verdict" ] || return 0
  cpu=${verdict%%|*} rest=${verdict#*|}
  if [ -n "${OPENBLAS_CORETYPE+set}" ]; then
    then_what="your OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE is kept (without it the programs would choose ${rest#*|})"
  else
    then_what="the programs restart themselves with OPENBLAS_CORETYPE=${rest#*|} and say so"
  fi
  say "note: this OpenBLAS does not know this CPU ($cpu) and chooses its ${rest%%|*} kernels, older than the" \
      "CPU's vector units; $then_what (docs/performance.md, \"Kernel choice\"; OpenBLAS 0.3.25 and later know" \
      "more CPUs)"
}

install_missing() {  # $1 = Debian package names (leading space); installs them or exits with the command to run
  cmd="apt-get install -y$1"
  if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"; else SUDO="none"; fi
    if [ "$SUDO" != none ]; then
      say "installing:$1"
      $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive $cmd >&2 && return 0
    fi
    say "missing:$1. Run: sudo apt-get update && sudo $cmd"
    exit 1
  fi
  say "missing:$1 (Debian names). Install the equivalent packages with your system's package manager."
  exit 1
}

# Prints the MPI_* variables. Open MPI counts as present when a program that calls MPI_Init compiles and links.
# OMPI_SKIP_MPICXX: plaingpt calls MPI's C functions; without it, <mpi.h> in C++ also pulls in the long-deprecated
# C++ bindings, which need one more library (libmpi_cxx) that the "ompi" module does not name.
mpi_config() {
  if [ "$MPI" = 0 ]; then echo "MPI_NAME := no (MPI=0)"; return 0; fi
  for how in pkg-config mpicxx; do
    if [ $how = pkg-config ]; then
      pkg-config --exists ompi 2>/dev/null || continue
      cflags="$(pkg-config --cflags ompi) -DOMPI_SKIP_MPICXX" libs=$(pkg-config --libs ompi) version=$(pkg-config --modversion ompi)
    else
      command -v mpicxx >/dev/null 2>&1 || continue
      cflags="$(mpicxx --showme:compile 2>/dev/null) -DOMPI_SKIP_MPICXX" libs=$(mpicxx --showme:link 2>/dev/null) || continue
      version=$(mpicxx --showme:version 2>/dev/null | sed -n 's/.*Open MPI \([0-9.]*\).*/\1/p')
    fi
    printf '#include <mpi.h>\nint main(int c,char**v){MPI_Init(&c,&v);return MPI_Finalize();}\n' |
      $CXX -std=c++17 $cflags -x c++ - -o /dev/null $libs 2>/dev/null || continue
    echo "MPI_NAME := yes (Open MPI $version)"
    echo "MPI_CFLAGS := $cflags -DPLAINGPT_MPI"
    echo "MPI_LIBS := $libs"
    return 0
  done
  if [ "$MPI" = 1 ]; then
    say "MPI=1 but no working Open MPI: install libopenmpi-dev (Debian) or open-mpi (Homebrew)"
    return 1
  fi
  echo "MPI_NAME := no (Open MPI's development package is not installed)"
}

# Prints the HTTPLIB_* variables, or fails when a program that starts an httplib::Server does not build.
# $1 = extra include flags (Homebrew's prefix).
httplib_config() {
  cflags="$1" libs="-lpthread"
  if pkg-config --exists cpp-httplib 2>/dev/null; then
    cflags="$cflags $(pkg-config --cflags cpp-httplib)" libs="$(pkg-config --libs cpp-httplib) -lpthread"
  fi
  printf '#include <httplib.h>\nint main(){httplib::Server s;return s.is_running();}\n' |
    $CXX -std=c++17 $cflags -x c++ - -o /dev/null $libs 2>/dev/null || {
    say "httplib.h is installed but a program using it does not build with '$cflags ... $libs'" \
        "(Debian's libcpp-httplib-dev needs its pkg-config module, cpp-httplib: is pkg-config installed?)"
    return 1
  }
  echo "HTTPLIB_CFLAGS := $cflags"
  echo "HTTPLIB_LIBS := $libs"
}

if [ "$(uname -s)" = Darwin ]; then
  missing=""
  BREW=$(brew --prefix 2>/dev/null)
  inc="-I$BREW/include -I$BREW/opt/libomp/include"
  have_header cxxopts.hpp "$inc" || missing="$missing cxxopts"
  have_header gtest/gtest.h "$inc" || missing="$missing googletest"
  have_header nlohmann/json.hpp "$inc" || missing="$missing nlohmann-json"
  have_header httplib.h "$inc" || missing="$missing cpp-httplib"
  [ -f "$BREW/opt/libomp/include/omp.h" ] || missing="$missing libomp"
  if [ -n "$missing" ]; then
    if command -v brew >/dev/null 2>&1; then
      say "installing with Homebrew:$missing"
      brew install $missing >&2 || exit 1
    else
      say "missing:$missing. Install Homebrew, then run: brew install$missing"
      exit 1
    fi
  fi
  echo "BLAS_NAME := Accelerate"
  httplib_config "$inc" || exit 1
  mpi_config || exit 1
  exit 0
fi

missing=""
if [ "$BLAS" = openblas ]; then
  openblas_flags >/dev/null || {
    if have_header cblas.h; then
      say "a cblas.h is installed but OpenBLAS is not (the reference BLAS, libblas-dev, ships one): installing OpenBLAS"
    fi
    missing="$missing libopenblas-dev pkg-config"
  }
else
  pkg-config --exists "$BLAS" 2>/dev/null || {
    say "BLAS=$BLAS: no pkg-config module '$BLAS' (pkg-config --list-all | grep -i blas lists the installed ones)"
    exit 1
  }
fi
have_header cxxopts.hpp || missing="$missing libcxxopts-dev"
have_header gtest/gtest.h || missing="$missing libgtest-dev"
have_header nlohmann/json.hpp || missing="$missing nlohmann-json3-dev"
have_header httplib.h || missing="$missing libcpp-httplib-dev"
# Debian's split cpp-httplib is only usable through its pkg-config module (above).
case "$missing" in *pkg-config*) ;; *) command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config" ;; esac
# g++ ships OpenMP as libgomp; clang++ needs LLVM's libomp.
case "$($CXX --version 2>/dev/null)" in *clang*) omp_pkg=libomp-dev ;; *) omp_pkg=libgomp1 ;; esac
printf '#include <omp.h>\nint main(){return omp_get_max_threads();}\n' | $CXX -fopenmp -x c++ - -o /dev/null 2>/dev/null \
  || missing="$missing $omp_pkg"
[ -n "$missing" ] && install_missing "$missing"

if [ "$BLAS" = openblas ]; then
  flags=$(openblas_flags) || { say "OpenBLAS was installed but a program still cannot link it; see: $CXX -lopenblas"; exit 1; }
  echo "BLAS_NAME := OpenBLAS"
  echo "BLAS_CFLAGS := ${flags%%|*} -DPLAINGPT_OPENBLAS"
  echo "BLAS_LIBS := ${flags#*|}"
  openblas_kernel_note "${flags%%|*}" "${flags#*|}"
else
  say "building with BLAS=$BLAS ($(pkg-config --modversion "$BLAS")), not OpenBLAS, as asked"
  echo "BLAS_NAME := $BLAS $(pkg-config --modversion "$BLAS") (not OpenBLAS, as asked with BLAS=$BLAS)"
  echo "BLAS_CFLAGS := $(pkg-config --cflags "$BLAS")"
  echo "BLAS_LIBS := $(pkg-config --libs "$BLAS")"
fi
httplib_config "" || exit 1
mpi_config || exit 1
