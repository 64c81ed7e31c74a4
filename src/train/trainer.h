// The training loop behind ./train: batches, forward, backward, clip, AdamW, evaluation, metrics.csv,
// progress, checkpoints (periodic, final and on Ctrl-C) and exact resume. Its pieces, one job each:
//   train/settings.h     TrainConfig, its table of settings, presets, validation
//   train/output.h       the --out folder and metrics.csv
//   train/progress.h     what is printed while training
//   train/stop_signal.h  Ctrl-C: finish the step, save, stop
//   train/evaluate.h     losses and scores of a model
//   train/trainer.cpp    TrainingRun: one method per job of the loop (start, evaluate, step, save)
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "io/checkpoint.h"
#include "train/settings.h"

struct TrainResult {
  int step = 0;             // steps completed
  double val_loss = 0;      // at the last evaluation
  bool interrupted = false; // stopped by SIGINT/SIGTERM after saving
  double honest_bits = 0;   // next-character bits/char from left context only, at the last evaluation
};

// Points where an extension hooks into every step without touching the loop.
// train/distributed.h makes the hooks of a data-parallel (mpirun) run.
struct TrainHooks {
  // After backward() and before clipping and the optimizer step: the gradients and the step's loss are complete
  // here. A data-parallel hook replaces this process's slice's gradient and loss with the whole batch's.
  std::function<void(GPT& model, float& loss)> after_backward;
  // False: train without printing or writing anything — no header, progress, metrics.csv or checkpoint (every
  // process of a data-parallel job but rank 0, which writes for all).
  bool writes_output = true;
};

// Trains from scratch, or continues `resume` (a loaded resumable checkpoint; `config` then holds its own
// settings, see train.cpp). Throws std::runtime_error on bad input or a diverging run, and the last good
// checkpoint on disk is untouched either way.
TrainResult run_training(const TrainConfig& config, Checkpoint* resume = nullptr, const TrainHooks& hooks = {});
