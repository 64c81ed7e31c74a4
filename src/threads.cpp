#include "threads.h"

#include <omp.h>

#include "blas.h"

int default_threads() { return omp_get_num_procs(); }

void set_threads(int threads) {
  omp_set_num_threads(threads);
  // Our OpenMP loops hand each thread its own block of every matrix product (linear.cpp), so sgemm itself must
  // stay single-threaded: a second pool of BLAS threads would compete with ours for the same cores.
#ifndef PLAINGPT_ACCELERATE
  openblas_set_num_threads(1);
#endif
}
