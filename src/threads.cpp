#include "threads.h"

#include <omp.h>

#include "blas.h"

int default_threads() { return omp_get_num_procs(); }

void set_threads(int threads) {
  omp_set_num_threads(threads);
#ifndef PLAINGPT_ACCELERATE
  openblas_set_num_threads(threads);
#endif
}
