// The training loop behind ./train: batches, forward, backward, clip, AdamW, evaluation, metrics.csv,
// progress, checkpoints (periodic, final and on Ctrl-C) and exact resume.
#pragma once
#include <cstdint>
#include <string>

#include "model/adamw.h"
#include "model/config.h"

struct TrainConfig {
  std::string data = "data/stories.txt";
  std::string out = "out";
  ModelConfig model;         // vocab_size comes from the corpus
  std::string objective = "clm";  // clm | mlm | prefix-lm  (objective.h)
  std::string mask;          // "" = the objective's own: causal, bidirectional, prefix:0; or "m0,m1,…" per layer
  float mlm_rate = 0.15f;    // MLM: fraction of positions chosen per sequence
  bool allow_leak = false;   // train even when the mask lets a position see its answer (a demonstration)
  int batch = 12;
  int steps = 2000;          // total optimizer steps of the run (the cosine schedule ends here)
  AdamWConfig adamw;
  int eval_every = 250;      // 0 = only at the start and the end
  int eval_iters = 20;       // batches per split per evaluation
  int ckpt_every = 500;      // 0 = only at the end
  int log_every = 50;        // progress lines when stdout is not a terminal
  uint64_t seed = 1337;
  int threads = 0;           // 0 = all cores
  int stop_at = -1;          // this invocation only (not saved): checkpoint and stop after this step, as if
                             // interrupted; resume later to continue. −1 = run to `steps`
  bool overwrite = false;    // this invocation only: a fresh run (or one resumed into another run's folder) may
                             // replace the checkpoint and metrics.csv in `out`; otherwise refused (io/run_folder.h)
};

std::string to_json(const TrainConfig& config);
TrainConfig train_config_from_json(const std::string& json, const std::string& source);
// "tiny" (nanoGPT's CPU recipe) or "small" (nanoGPT's shakespeare_char model); throws on other names.
TrainConfig preset(const std::string& name);
// Throws, naming the flag, on a setting that cannot work (zero batch, negative steps, lr ≤ 0, …).
void validate(const TrainConfig& config);

struct TrainResult {
  int step = 0;             // steps completed
  double val_loss = 0;      // at the last evaluation
  bool interrupted = false; // stopped by SIGINT/SIGTERM after saving
  double honest_bits = 0;   // next-character bits/char from left context only, at the last evaluation
};

struct Checkpoint;

// Trains from scratch, or continues `resume` (a loaded resumable checkpoint; `config` then holds its own
// settings, see train.cpp). Throws std::runtime_error on bad input or a diverging run, and the last good
// checkpoint on disk is untouched either way.
TrainResult run_training(const TrainConfig& config, Checkpoint* resume = nullptr);

std::string checkpoint_path(const std::string& out_dir);  // out_dir + "/ckpt.safetensors"
