#include "base/threads.h"

#include <omp.h>
#include <unistd.h>

#include <cstdlib>

#include "base/blas.h"

int default_threads() { return omp_get_num_procs(); }

void set_threads(int threads) {
  omp_set_num_threads(threads);
  // Our OpenMP loops hand each thread its own block of every matrix product (linear.cpp), so sgemm itself must
  // stay single-threaded: a second pool of BLAS threads would compete with ours for the same cores. (Another BLAS
  // chosen with `make BLAS=…` keeps its own threading; Accelerate's sgemm is single-threaded at these sizes.)
#ifdef PLAINGPT_OPENBLAS
  openblas_set_num_threads(1);
#endif
}

void prefer_passive_waiting(char** argv) {
#ifdef __linux__
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run on as we are
  unsetenv("OMP_WAIT_POLICY");
#else
  (void)argv;
#endif
}

std::string wait_policy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy ? policy : "spin (libgomp default)";
}
