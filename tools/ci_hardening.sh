#!/usr/bin/env bash
# CI for hardening (called by .ci/run): the whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# the tests that run two or more threads under ThreadSanitizer (after checking that a planted race is reported),
# then every libFuzzer target for FUZZ_SECONDS (default 60) each. Measured on 2 busy cores at nice 19 from a fresh
# clone, before the ThreadSanitizer stage: 21 min in all, of which the sanitized build ~13 min, the sanitized suite
# ~2 min, the fuzz build ~3 min and fuzzing 3 × 1 min. make test-tsan alone, from scratch without ccache on 2 cores
# of an Intel Xeon shared with another engineer's builds (load ~3, not niced): 415 s, of which the 41 tests 49 s
# and the planted race under 1 s; the rest is the build (the library, 15 of the 34 test files, three programs).
#
# On a fresh Debian machine as root it installs what it needs beyond .ci/run's packages (the project's own
# libraries are not among them: make runs tools/deps.sh, which installs those, as .ci/run requires):
#   clang                       libFuzzer targets (-fsanitize=fuzzer) are clang-only
#   libclang-rt-<N>-dev         clang's sanitizer and libFuzzer runtimes (N = clang's major version; 14 on bookworm)
#   libomp-<N>-dev              OpenMP for clang (the sources use #pragma omp and omp.h), and libarcher.so, which
#                               tells ThreadSanitizer about libomp's synchronization (make test-tsan)
# Elsewhere (not root, no apt-get) it assumes they are present.
#
# Every stage runs even if an earlier one fails; the exit status is non-zero if any did.
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q || exit 1
  apt-get install -y -q g++ make clang || exit 1
  v=$(clang++ -dumpversion | cut -d. -f1)
  pkgs="libomp-$v-dev"
  # Since LLVM 14 Debian ships the runtimes separately; older releases had them in libclang-common-<N>-dev.
  if apt-cache show "libclang-rt-$v-dev" >/dev/null 2>&1; then pkgs="$pkgs libclang-rt-$v-dev"; fi
  apt-get install -y -q $pkgs || exit 1
fi

echo "nproc: $(nproc)"; g++ --version | head -1; clang++ --version | head -1

status=0
step() {  # step <name> <command...>: runs it, times it, remembers a failure
  local name=$1 start=$SECONDS
  shift
  echo "=== $name"
  if "$@"; then echo "=== $name: ok ($((SECONDS - start)) s)"
  else echo "=== $name: FAILED ($((SECONDS - start)) s)"; status=1; fi
}
step "make test-asan" make -j"$JOBS" test-asan
step "make test-tsan" make -j"$JOBS" test-tsan
step "make fuzz-build" make -j"$JOBS" fuzz-build
step "make fuzz FUZZ_SECONDS=$FUZZ_SECONDS" make fuzz FUZZ_SECONDS="$FUZZ_SECONDS"
exit $status
