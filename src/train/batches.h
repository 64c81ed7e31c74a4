// The batches of a run: the corpus, what the objective makes of its windows (BatchMaker, data/objective.h), the
// training batches' sampler, whose state every checkpoint keeps (so a resumed run draws the batches it would have
// drawn), this process's rows of each batch (reducer.h), and one fixed validation batch, on which the extra
// metrics.csv columns are measured (TrainHooks, trainer.h). The evaluations and the divergence guard draw batches of
// their own, each with its own seed (trainer.cpp), so the training batches never depend on them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/rng.h"
#include "data/dataset.h"
#include "data/objective.h"
#include "train/loop.h"
#include "train/reducer.h"
#include "train/replicas.h"

class RunBatches {
 public:
  Corpus corpus;  // loaded by the run: with its own vocabulary, or with a resumed checkpoint's

  // What the batches are: the objective's, of B sequences of T tokens, of which this process computes `rows`.
  void start(Objective objective, float mlm_rate, int B, int T, Rows rows);
  // The training batches' sampler: its state, as a checkpoint stores it (Rng::state), set and read.
  void set_sampler_state(const std::string& state) { rng_.set_state(state); }
  std::string sampler_state() const { return rng_.state(); }
  // The buffers of the step's batch and of the fixed validation batch (after the run's memory check).
  void allocate();
  BatchMaker& maker() { return *maker_; }
  int mask_token() const { return mask_token_; }  // [MASK]'s id, or −1 (not MLM)

  // The next training batch: this process's rows of it. A prefix-LM's N (drawn per batch) goes to every replica.
  BatchView next(Replicas& replicas);
  // Draws the fixed validation batch, with its own seed.
  void draw_fixed(uint64_t seed);
  BatchView fixed() const { return {fixed_x_.data(), fixed_y_.data(), B_, T_}; }  // all of its rows
  int fixed_prefix() const { return fixed_prefix_; }  // its prefix-LM N; −1 for the other objectives

 private:
  int B_ = 0;
  int T_ = 0;
  Rows rows_;                         // this process's rows of every batch; every process draws the whole batch
  int mask_token_ = -1;
  std::unique_ptr<BatchMaker> maker_;
  Rng rng_;                           // the training batches' sampler
  std::vector<int> x_;                // the step's batch, (B, T)
  std::vector<int> y_;
  std::vector<int> fixed_x_;          // the fixed validation batch, (B, T)
  std::vector<int> fixed_y_;
  int fixed_prefix_ = -1;
};
