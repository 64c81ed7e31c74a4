// The training loop as a learner reads it: one step, then the loop of steps with its evaluations and checkpoints.
// ./train runs it inside TrainingRun (train/trainer.cpp), the production shell around it: the run folder's lock,
// the batches, metrics.csv, the progress line, the divergence guard, Ctrl-C, the processes' agreement and resume.
// The experiments and the benchmark call train_step alone.
//
// One step on a batch of B rows (nanoGPT's train.py loop body, llm.c's train_gpt2.c main loop):
//   for each slice r of the batch, on replica r:         one slice (the whole batch, on the model) unless the
//     zero_grad; loss_r = forward(slice r); backward      threads split the batch (train/replicas.h)
//   g = Σ_r (n_r/n)·g_r                                   the whole batch's gradient; n_r: slice r's targets
//   g = the whole batch's over the processes              one process: unchanged (train/reducer.h)
//   g ← g·min(1, grad_clip/‖g‖)                           ‖g‖ over every parameter (optim/adamw.h)
//   (lr, η) = learning_rates(step)                        warm-up, then cosine decay (below)
//   θ ← Muon(θ, g, η) on the blocks' matrices and AdamW(θ, g, lr) on the rest (optim/muon.h), or AdamW everywhere
#pragma once
#include <string>

#include "optim/adamw.h"
#include "optim/muon.h"
#include "optim/optimizer.h"
#include "train/reducer.h"
#include "train/replicas.h"
#include "train/train_config.h"

// The step's learning rates, the one place they are computed (the update, the progress line and metrics.csv
// read them here):
//   adamw = lr·(step + 1)/(warmup + 1)                                  during the warm-up (step < warmup)
//         = min_lr + ½·(1 + cos(π·(step − warmup)/(steps − warmup)))·(lr − min_lr)   then, down to min_lr at `steps`
//   muon  = muon_lr·adamw/lr                                            Muon's η: the same warm-up and cosine shape
struct LearningRates {
  float adamw = 0;  // AdamW's (every tensor under AdamW; under Muon, those Muon does not take)
  float muon = 0;   // Muon's η (used only under Muon)
};
LearningRates learning_rates(const TrainConfig& config, int step);

// What a step trains and changes.
struct Learner {
  Replicas& model;          // model.model() is the model; with batch-split, one replica per thread (replicas.h)
  OptimizerKind optimizer;  // AdamW, or Muon for the blocks' matrices and AdamW for the rest
  AdamW& moments;           // the moments: AdamW's m, v and t, Muon's momentum in m; what a checkpoint keeps to continue
  const Reducer& processes = one_process();  // the whole batch's gradient across processes (reducer.h)
  Muon muon = {};           // Muon's scratch
};

// A batch: x and y are (B, T) inputs and targets.
struct BatchView {
  const int* x = nullptr;
  const int* y = nullptr;
  int B = 0;
  int T = 0;
};

struct StepResult {
  float loss = 0;         // the whole batch's mean loss, before the update
  double grad_norm = 0;   // ‖g‖ before clipping
  LearningRates lr;
  bool updated = false;   // false: the loss or the gradient was not finite, and the weights were left as they were
};

// θ ← the optimizer's update of θ with the gradient the model holds, at the rates `lr`: AdamW on every tensor, or
// Muon on the tensors muon_updates() takes and AdamW on the rest.
void update_weights(Learner& learner, const TrainConfig& config, const LearningRates& lr);

// Forward and backward of (B, T) rows: slice r on replica r, then the model's gradient becomes the whole batch's
// (of the mean loss over all its targets). Returns that loss and the target count.
LossSum forward_backward(Replicas& model, const int* x, const int* y, int B, int T);

// One optimizer step (the top of this file) on `batch`, step `step` of config.steps.
StepResult train_step(Learner& learner, const TrainConfig& config, int step, const BatchView& batch);

// What the loop asks of the run around it (./train's: TrainingRun in train/trainer.cpp). Any of them may throw
// to stop the run (a divergence).
class LoopShell {
 public:
  virtual ~LoopShell() = default;
  virtual void evaluate(int step) = 0;  // the losses of the model as it is before step `step` (and at the end)
  virtual BatchView batch(int step) = 0;  // step `step`'s batch (this process's rows of it)
  virtual bool stepped(int step, const StepResult& result) = 0;  // false stops the loop (the shell has saved)
  virtual void save(int steps_done) = 0;  // a checkpoint of the model after `steps_done` steps
};

// Steps first_step … config.steps − 1, each preceded by an evaluation at the first step and every eval_every
// steps; a checkpoint every ckpt_every steps; at the end one more evaluation and the last checkpoint. Returns false
// when the shell stopped it early.
bool train_loop(Learner& learner, const TrainConfig& config, int first_step, LoopShell& shell);
