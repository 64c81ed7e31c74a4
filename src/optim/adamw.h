// AdamW with decoupled weight decay, and gradient clipping. The learning rate of each step comes from the schedule in
// train/loop.h (learning_rates).
//   m ← β1·m + (1−β1)·g          v ← β2·v + (1−β2)·g²          m̂ = m/(1−β1ᵗ)      v̂ = v/(1−β2ᵗ)
//   θ ← θ − lr·( m̂/(√v̂ + ε) + λ·θ )      with λ = weight_decay only for tensors the table marks for decay
#pragma once
#include <cstddef>
#include <vector>

#include "base/span.h"

class GPT;
struct TensorSpec;

struct AdamWConfig {  // the tiny preset's values (train/train_config.cpp says how they were chosen)
  float lr = 6e-3f;         // peak learning rate (the schedule: train/loop.h)
  float min_lr = 6e-4f;     // floor of the cosine decay
  int warmup_steps = 50;    // linear warm-up from ~0 to lr
  float beta1 = 0.9f;
  float beta2 = 0.99f;
  float eps = 1e-8f;
  float weight_decay = 0.05f;  // 0.1 before the tiny preset took 0.05 (train/train_config.cpp)
  float grad_clip = 1.0f;   // clip the global gradient norm to this; 0 = off
};

// √(Σ g²) over every gradient, accumulated in double so the order of terms hardly matters.
double global_norm(Span<const float> grads);
// Scales the gradients so their global norm is at most max_norm; returns the norm before clipping.
double clip_global_norm(Span<float> grads, float max_norm);

struct AdamW {
  std::vector<float> m;  // same layout as the parameter arena; under Muon, m of a Muon tensor is its momentum
  std::vector<float> v;
                            // buffer and v stays 0 there (optim/muon.h)
  int t = 0;                // updates taken, for the bias correction

  // One step on every tensor of the model but those `skip` returns true for (under Muon, Muon's: optim/muon.h).
  void update(GPT& model, const AdamWConfig& cfg, float lr, bool (*skip)(const TensorSpec&) = nullptr);
};
