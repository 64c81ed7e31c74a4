#include "train/loop.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/model.h"

LearningRates learning_rates(const TrainConfig& config, int step) {
  const AdamWConfig& a = config.adamw;
  LearningRates lr;
  if (step < a.warmup_steps) {
    lr.adamw = a.lr * (step + 1) / (a.warmup_steps + 1);
  } else if (step >= config.steps) {
    lr.adamw = a.min_lr;
  } else {
    const double progress = (double)(step - a.warmup_steps) / std::max(1, config.steps - a.warmup_steps);
    const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));  // 1 → 0
    lr.adamw = (float)(a.min_lr + cosine * (a.lr - a.min_lr));
  }
  lr.muon = config.muon.lr * (lr.adamw / a.lr);
  return lr;
}

LossSum forward_backward(Replicas& model, const int* x, const int* y, int B, int T) {
  const int R = model.count();
  std::vector<LossSum> slices(R);  // each slice's Σ loss and targets
  model.split(B, [&](int r, Rows rows) {
    GPT& m = model[r];
    m.zero_grad();
    if (rows.count() == 0) return;  // fewer rows than threads: this replica's gradient stays 0
    const float mean = m.forward(x + (size_t)rows.begin * T, y + (size_t)rows.begin * T, rows.count(), T);
    m.backward();
    slices[r] = {(double)mean * m.last_targets(), m.last_targets()};
  });
  LossSum sum;  // added in replica order: the same bits however the threads were scheduled
  for (const LossSum& s : slices) {
    sum.total += s.total;
    sum.count += s.count;
  }
  if (R == 1) return sum;  // one model: its gradient is the batch's already
  // g = Σ_r (n_r/n)·g_r into the model's gradient, each element summed in replica order (the multiply-adds fused as
  // written), a chunk of g at a time: the chunk stays in L1 while each replica's gradient streams past it.
  std::vector<float> weight(R, 0.0f);
  std::vector<float*> g(R);
  for (int r = 0; r < R; r++) {
    if (sum.count) weight[r] = (float)((double)slices[r].count / sum.count);
    g[r] = model[r].grads_memory().data();
  }
  const size_t P = model.model().num_params();
  const size_t chunk = 4096;
#pragma omp parallel for schedule(static)
  for (size_t i0 = 0; i0 < P; i0 += chunk)
    for (int r = 0; r < R; r++) {
      float* out = g[0] + i0;
      const float w = weight[r];
      const float* in = g[r] + i0;
#pragma omp simd
      for (size_t i = 0; i < std::min(chunk, P - i0); i++) out[i] = r == 0 ? w * in[i] : std::fma(w, in[i], out[i]);
    }
  return sum;
}

void update_weights(Learner& learner, const TrainConfig& config, const LearningRates& lr) {
  GPT& model = learner.model.model();
  switch (learner.optimizer) {
    case OptimizerKind::AdamW:
      learner.moments.update(model, config.adamw, lr.adamw);
      break;
    case OptimizerKind::Muon:
      learner.moments.update(model, config.adamw, lr.adamw, muon_updates);  // every tensor Muon does not take
      learner.muon.update(model, learner.moments.m, config.muon.momentum, config.adamw.weight_decay, lr.muon);
      break;
  }
}

StepResult train_step(Learner& learner, const TrainConfig& config, int step, const BatchView& batch) {
  GPT& model = learner.model.model();
  StepResult result;
  const LossSum mine = forward_backward(learner.model, batch.x, batch.y, batch.B, batch.T);
  result.loss = learner.processes.gradients(model, (float)mine.mean(), mine.count);
  result.grad_norm = clip_global_norm(model.grads_memory(), config.adamw.grad_clip);
  if (!std::isfinite(result.loss) || !std::isfinite(result.grad_norm)) return result;  // not updated: diverged
  result.lr = learning_rates(config, step);
  update_weights(learner, config, result.lr);
  result.updated = true;
  return result;
}

bool train_loop(Learner& learner, const TrainConfig& config, int first_step, LoopShell& shell) {
  for (int step = first_step; step < config.steps; step++) {
    if (step == first_step || (config.eval_every && step % config.eval_every == 0)) shell.evaluate(step);
    const StepResult result = train_step(learner, config, step, shell.batch(step));
    if (!shell.stepped(step, result)) return false;
    if (config.ckpt_every && (step + 1) % config.ckpt_every == 0 && step + 1 < config.steps) shell.save(step + 1);
  }
  shell.evaluate(config.steps);
  shell.save(config.steps);
  return true;
}
