// The seam between the training loop and data parallelism. The loop asks a Reducer which rows of each batch are
// this process's, hands it every quantity that must span the whole batch (the gradient, evaluation sums, a stop
// request) and asks it whether to write (print, metrics.csv, checkpoints). The base class is one process, where
// every call is the identity; train/distributed.h implements it over Open MPI (dist::reducer()).
#pragma once
#include <string>

#include "base/span.h"

class GPT;
struct Corpus;
struct TrainConfig;

struct Rows {
  int begin = 0;  // rows [begin, end) of the global batch
  int end = 0;
  int count() const { return end - begin; }
};

class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual Rows rows(int B) const { return {0, B}; }
  // After the backward on this process's rows: turns the model's gradient and `loss` (the mean over its `targets`)
  // into the whole batch's, and returns that loss.
  virtual float gradients(GPT& model, float loss, int targets) const { return loss; }
  virtual void sum(double* values, int n) const {}      // in place: each value becomes its sum over the processes
  virtual bool any(bool flag) const { return flag; }    // true everywhere when true in one (a stop request)
  // Throws, naming the step, when the processes' parameters differ.
  virtual void check_same(Span<const float> params, int step) const {}
  // Before the first step: throws, naming the process and the first thing that differs, unless every process trains
  // the same run (settings, corpus, step, sampler state, parameters).
  virtual void check_agreement(const TrainConfig& config, const Corpus& corpus, int step, const std::string& batch_rng,
                               Span<const float> params) const {}
  virtual bool writes() const { return true; }          // this process prints and writes for the run
  virtual int processes() const { return 1; }
  virtual int default_threads() const;                  // for --threads 0: the cores this process may use
};

constexpr int kCheckEvery = 100;  // steps between the loop's check_same calls

// The one-process reducer.
const Reducer& one_process();
