// One knob for the threads: OpenMP runs our loops and splits every matrix product between its threads; OpenBLAS
// runs single-threaded inside each of them. Two pools that each assume they own every core would oversubscribe
// a small machine.
#pragma once

#include <cstddef>

int default_threads();          // the number of cores OpenMP sees
void set_threads(int threads);  // OpenMP threads; OpenBLAS is set to 1 thread per caller

// Waking a second thread costs a few microseconds: loops smaller than this run on the calling thread alone
// (`#pragma omp parallel if (worth_threads(work))`). It matters most for generation, one position at a time.
inline bool worth_threads(size_t work) { return work >= 32768; }
