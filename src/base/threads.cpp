#include "base/threads.h"

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#if defined(__SSE2__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

#include "base/blas.h"

int default_threads() { return omp_get_num_procs(); }

// Denormal floats (|x| < 1.2e-38) make x86 cores take a microcode assist per operation, a hundred cycles or more.
// Training with a high learning rate produces enough of them (in products of tiny gradients and activations) that a
// tiny-preset step on an AMD Zen core took twice as long for its first 600 steps (docs/performance.md). Flushing
// them to zero (FTZ: results; DAZ: inputs) changes values below 1.2e-38 only, nothing a float32 sum can see. MXCSR
// is per thread, so it is set in every thread of the OpenMP pool, and new threads inherit it from their creator.
static void flush_denormals_in_every_thread() {
#if defined(__SSE2__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#pragma omp parallel
  {
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  }
#endif
}

int max_threads() { return 4 * omp_get_num_procs() > 64 ? 4 * omp_get_num_procs() : 64; }

void set_threads(int threads) {
  // Far more threads than cores only costs, and the OpenMP runtime crashed creating 100000 of them.
  if (threads > max_threads()) {
    std::fprintf(stderr, "note: %d threads asked for; using %d (the most this program starts on %d cores)\n", threads,
                 max_threads(), omp_get_num_procs());
    threads = max_threads();
  }
  omp_set_num_threads(threads < 1 ? 1 : threads);
  flush_denormals_in_every_thread();
  // Our OpenMP loops hand each thread its own block of every matrix product (linear.cpp), so sgemm itself must
  // stay single-threaded: a second pool of BLAS threads would compete with ours for the same cores. (Another BLAS
  // chosen with `make BLAS=…` keeps its own threading; Accelerate's sgemm is single-threaded at these sizes.)
#ifdef PLAINGPT_OPENBLAS
  openblas_set_num_threads(1);
#endif
}

AtMostThreads::AtMostThreads(int n) : previous_(omp_get_max_threads()) {
  omp_set_num_threads(n < previous_ ? (n < 1 ? 1 : n) : previous_);
}
AtMostThreads::~AtMostThreads() { omp_set_num_threads(previous_); }

std::string wait_policy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy ? policy : "spin (libgomp default)";
}
