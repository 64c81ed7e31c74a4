// One knob for the threads: OpenMP runs our loops and splits every matrix product between its threads; OpenBLAS
// runs single-threaded inside each of them. Two pools that each assume they own every core would oversubscribe
// a small machine.
#pragma once

#include <omp.h>

#include <cstddef>
#include <string>

int default_threads();          // the number of cores OpenMP sees
// OpenMP threads; OpenBLAS is set to 1 thread per caller. More than max_threads() are capped, with a note on stderr.
void set_threads(int threads);
int max_threads();              // 4 threads per core, and at least 64

// Waking a second thread costs a few microseconds: loops smaller than this run on the calling thread alone
// (`#pragma omp parallel if (worth_threads(work))`). It matters most for generation, one position at a time.
inline bool worth_threads(size_t work) { return work >= 32768; }

// body(i) for 0 ≤ i < n: split between the threads when `work` is worth it, else a plain loop on the calling thread.
// Not `#pragma omp parallel for if (worth_threads(work))`: libgomp still builds a one-thread team for a region whose
// `if` is false (an allocation, a free and futex calls, a fraction of a µs), and the one-token decoder runs 14 such
// small ops per token.
template <typename Body>
void parallel_for(size_t n, size_t work, Body&& body) {
  if (!worth_threads(work)) {
    for (size_t i = 0; i < n; i++) body(i);
    return;
  }
#pragma omp parallel for
  for (size_t i = 0; i < n; i++) body(i);
}

// The indices [begin, end) of 0 … n−1 that the calling thread owns inside a parallel region, in equal contiguous
// shares: each thread runs its own block of rows of a product, or keeps a sum to its own columns (so that no two
// threads add into the same gradient).
struct Share {
  int begin, end;
  int size() const { return end - begin; }
};
inline Share my_share(int n) {
  const int threads = omp_get_num_threads(), me = omp_get_thread_num();
  return {(int)((long)n * me / threads), (int)((long)n * (me + 1) / threads)};
}

// Within its scope, OpenMP regions use at most `n` threads (never more than before); the count is restored after.
class AtMostThreads {
 public:
  explicit AtMostThreads(int n);
  ~AtMostThreads();
  AtMostThreads(const AtMostThreads&) = delete;
  AtMostThreads& operator=(const AtMostThreads&) = delete;

 private:
  int previous_;
};

// OMP_WAIT_POLICY as this process runs with it (base/runtime.h sets it), or "spin (libgomp default)".
std::string wait_policy();
