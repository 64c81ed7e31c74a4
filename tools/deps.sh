#!/bin/sh
# Checks that plaingpt's build dependencies are present; installs the missing ones where it can
# (Debian/Ubuntu as root or with sudo, macOS with Homebrew), otherwise stops with the command to run.
# Needs no network when everything is already installed.
CXX=${CXX:-g++}

have_header() {  # $1 = header, $2 = extra flags
  printf '#include <%s>\nint main(){return 0;}\n' "$1" | $CXX -std=c++17 $2 -x c++ -fsyntax-only - 2>/dev/null
}

missing=""
if [ "$(uname -s)" = Darwin ]; then
  BREW=$(brew --prefix 2>/dev/null)
  inc="-I$BREW/include -I$BREW/opt/libomp/include"
  have_header cxxopts.hpp "$inc" || missing="$missing cxxopts"
  have_header gtest/gtest.h "$inc" || missing="$missing googletest"
  have_header nlohmann/json.hpp "$inc" || missing="$missing nlohmann-json"
  [ -f "$BREW/opt/libomp/include/omp.h" ] || missing="$missing libomp"
  [ -z "$missing" ] && exit 0
  if command -v brew >/dev/null 2>&1; then
    echo "deps: installing with Homebrew:$missing"
    brew install $missing && exit 0
  fi
  echo "deps: missing:$missing. Install Homebrew, then run: brew install$missing" >&2
  exit 1
fi

blas="$(pkg-config --cflags openblas 2>/dev/null)"
have_header cblas.h "$blas" || missing="$missing libopenblas-dev pkg-config"
have_header cxxopts.hpp || missing="$missing libcxxopts-dev"
have_header gtest/gtest.h || missing="$missing libgtest-dev"
have_header nlohmann/json.hpp || missing="$missing nlohmann-json3-dev"
# g++ ships OpenMP as libgomp; clang++ needs LLVM's libomp.
case "$($CXX --version 2>/dev/null)" in *clang*) omp_pkg=libomp-dev ;; *) omp_pkg=libgomp1 ;; esac
printf '#include <omp.h>\nint main(){return omp_get_max_threads();}\n' | $CXX -fopenmp -x c++ - -o /dev/null 2>/dev/null \
  || missing="$missing $omp_pkg"
[ -z "$missing" ] && exit 0

cmd="apt-get install -y$missing"
if command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"; else SUDO="none"; fi
  if [ "$SUDO" != none ]; then
    echo "deps: installing:$missing"
    $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive $cmd && exit 0
  fi
  echo "deps: missing:$missing. Run: sudo apt-get update && sudo $cmd" >&2
  exit 1
fi
echo "deps: missing:$missing (Debian names). Install the equivalent packages with your system's package manager." >&2
exit 1
