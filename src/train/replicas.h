// Batch-split threads (--threads-split batch): data parallelism between the threads of one process, the same
// slicing that train/distributed.h does between processes. Each of R threads runs the forward and backward of its
// slice of the batch on a replica of the model: the parameters are the model's own memory (only read while the
// slices run), the activations and gradients are the replica's, and every op and product inside runs on that one
// thread, so no op waits for another thread until the slice is done. Then the gradients are combined into the
// model's, element by element, in replica order (forward_backward in train/loop.cpp, the training step's):
//     g = Σ_r (n_r / n) · g_r      g_r: the gradient of slice r's mean loss, n_r its targets, n = Σ_r n_r
// which is the gradient of the whole batch's mean loss, and the same bits every run for a given R.
//
// The other way to use the threads (--threads-split ops, R = 1 here) is one model whose every op and matrix
// product is split between the threads (ops/linear.cpp). It pays a start and a stop of the threads at each of a
// step's ~150 ops, which batch-split pays once; batch-split pays for R − 1 more gradient arenas, a combine pass
// over them, and products R times smaller. choose_split() picks from the shapes (measured in docs/performance.md).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "ops/cross_entropy.h"
#include "train/reducer.h"

class Replicas {
 public:
  // R = threads: the model, and R − 1 replicas of it (GPT::replica_of). R = 1: the model alone, op-split.
  Replicas(GPT& model, int threads);
  int count() const { return (int)all_.size(); }
  GPT& model() { return *all_[0]; }
  GPT& operator[](int r) { return *all_[r]; }

  // The forward of (B, T) rows, slice r = rows [r·B/R, (r+1)·B/R) on replica r, the loss summed over the slices
  // in order (evaluation). The training step's forward and backward, and the combine, are forward_backward in
  // train/loop.cpp.
  LossSum forward(const int* x, const int* y, int B, int T);
  // Runs job(r, rows of slice r) for every slice of B rows, each on a thread of its own with one-threaded ops
  // (for R = 1: job(0, all rows) on the calling thread, with every thread for its ops). An exception thrown by a
  // job is rethrown here, after every job has ended.
  void split(int B, const std::function<void(int r, Rows rows)>& job);
  void set_prefix_length(int N);  // on every replica (a prefix-LM's N changes with each batch)

 private:
  std::vector<GPT*> all_;
  std::vector<std::unique_ptr<GPT>> owned_;  // all_[1..]
};

// --threads-split: batch, ops or auto for a batch of `rows` sequences. Batch needs every thread to get at least one
// row and a model without head gates; auto chooses it whenever it can. Measured (make bench-split,
// docs/performance.md#threads-that-split-the-batch), batch-split over op-split on 2 threads: 1.1–2.0× on every
// shape from the tiny widths at batch 2 to the small preset at batch 64, so no shape was found where ops should win.
// The flag's text is parsed once, into the run's plan (train/plan.h); parse_split throws on any other text, naming
// the flag.
enum class SplitChoice { Batch, Ops, Auto };
SplitChoice parse_split(const std::string& text);
enum class ThreadSplit { Batch, Ops };
ThreadSplit choose_split(SplitChoice setting, int threads, int rows, bool gated);
const char* to_string(ThreadSplit split);
