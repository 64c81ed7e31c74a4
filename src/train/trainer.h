// ./train's run: the training loop (train/loop.h: the step, evaluations, checkpoints) inside the production shell
// that batches, logs metrics.csv and progress, guards against divergence, takes Ctrl-C, keeps processes in step
// and resumes exactly. Its pieces, one job each:
//   train/loop.h         the step and the loop, as a learner reads them
//   train/train_config.h TrainConfig, its table of settings, presets, validation
//   train/plan.h         TrainPlan: the settings' named choices (objective, optimizer, masks, split), parsed once
//   train/output.h       the --out folder: its lock, the checkpoint, the divergence guard, the best kept aside
//   train/batches.h      the corpus, the objective's batches and their sampler
//   train/telemetry.h    metrics.csv and the progress line (progress.h: what is printed while training)
//   train/stop_signal.h  Ctrl-C: finish the step, save, stop
//   train/evaluate.h     losses and scores of a model
//   train/reducer.h      data parallelism's seam (one process: every call is the identity)
//   train/trainer.cpp    TrainingRun: the shell, composed of those parts, one method per job (start, evaluate,
//                        batch, after a step, save)
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "io/checkpoint.h"
#include "train/reducer.h"
#include "train/train_config.h"

struct TrainResult {
  int step = 0;             // steps completed
  double val_loss = 0;      // at the last evaluation
  bool interrupted = false; // stopped by SIGINT/SIGTERM after saving
  double honest_bits = 0;   // next-character bits/char from left context only, at the last evaluation
};

// Extra metrics.csv columns, measured at every evaluation on one fixed validation batch (x, y: (B, T)). ./train
// passes the lab's attention statistics (lab/attention_stats.h); the loop knows nothing about what they are.
struct EvaluationColumns {
  std::string (*header)(int n_layer) = nullptr;  // ",name,…"
  std::string (*empty)(int n_layer) = nullptr;   // the cells of a row without an evaluation: ",,…"
  std::string (*measure)(GPT& model, const int* x, const int* y, int B, int T) = nullptr;  // ",value,…"
};

// Where an extension plugs into the loop without touching it.
struct TrainHooks {
  // Data parallelism (reducer.h): which rows are this process's, the whole batch's gradient, whether to write.
  // dist::reducer() for ./train; one process by default.
  const Reducer* reducer = nullptr;
  EvaluationColumns columns;
};

// Trains from scratch, or continues `resume` (a loaded resumable checkpoint; `config` then holds its own
// settings, see train.cpp). Throws std::runtime_error on bad input or a diverging run, and the last good
// checkpoint on disk is untouched either way.
TrainResult run_training(const TrainConfig& config, Checkpoint* resume = nullptr, const TrainHooks& hooks = {});
