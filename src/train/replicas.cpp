#include "train/replicas.h"

#include <omp.h>

#include <exception>
#include <stdexcept>

#include "base/threads.h"
#include "data/utf8.h"

// The slices' losses added in replica order (the same bits however the threads were scheduled).
static LossSum in_order(const std::vector<LossSum>& parts) {
  LossSum sum;
  for (const LossSum& p : parts) sum.total += p.total, sum.count += p.count;
  return sum;
}

Replicas::Replicas(GPT& model, int threads) {
  all_.push_back(&model);
  for (int r = 1; r < threads; r++) {
    owned_.push_back(GPT::replica_of(model));
    all_.push_back(owned_.back().get());
  }
}

void Replicas::split(int B, const std::function<void(int, Rows)>& job) {
  const int R = count();
  if (R == 1) return job(0, {0, B});
  std::exception_ptr failure;
#pragma omp parallel num_threads(R)
  {
    omp_set_num_threads(1);  // this thread's ops and products run on it alone (nested regions get one thread)
    // Every slice runs even if the runtime gave fewer threads than asked.
    for (int r = omp_get_thread_num(); r < R; r += omp_get_num_threads()) {
      try {
        job(r, {(int)((long long)r * B / R), (int)((long long)(r + 1) * B / R)});
      } catch (...) {
#pragma omp critical(replicas_failure)
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

LossSum Replicas::forward(const int* x, const int* y, int B, int T) {
  std::vector<LossSum> parts(count());
  split(B, [&](int r, Rows rows) {
    if (rows.count() == 0) return;
    GPT& m = *all_[r];
    const float mean = m.forward(x + (size_t)rows.begin * T, y + (size_t)rows.begin * T, rows.count(), T);
    parts[r] = {(double)mean * m.last_targets(), m.last_targets()};
  });
  return in_order(parts);
}

void Replicas::set_prefix_length(int N) {
  for (GPT* m : all_) m->set_prefix_length(N);
}

SplitChoice parse_split(const std::string& text) {
  if (text == "batch") return SplitChoice::Batch;
  if (text == "ops") return SplitChoice::Ops;
  if (text == "auto") return SplitChoice::Auto;
  throw std::runtime_error("--threads-split: unknown value '" + escape_for_message(text) +
                           "' (expected batch, ops or auto)");
}

ThreadSplit choose_split(SplitChoice setting, int threads, int rows, bool gated) {
  if (setting == SplitChoice::Ops) return ThreadSplit::Ops;
  const bool possible = threads > 1 && rows >= threads && !gated;
  if (setting == SplitChoice::Auto) return possible ? ThreadSplit::Batch : ThreadSplit::Ops;
  if (threads == 1) return ThreadSplit::Ops;  // batch asked for on one thread: the two are the same
  if (!possible)
    throw std::runtime_error("--threads-split batch needs at least one sequence of the batch per thread (--batch " +
                             std::to_string(rows) + ", " + std::to_string(threads) +
                             " threads) and a model without head gates");
  return ThreadSplit::Batch;
}

const char* to_string(ThreadSplit split) { return split == ThreadSplit::Batch ? "batch" : "ops"; }
