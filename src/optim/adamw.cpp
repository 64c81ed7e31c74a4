#include "optim/adamw.h"

#include <cmath>

#include "model/model.h"
#include "base/threads.h"

double global_norm(Span<const float> grads) {
  // `simd`: each vector lane keeps a partial sum (without it, one running sum, one element at a time: the double
  // adds in order are the loop's whole cost).
  double sum = 0;
  const float* g = grads.data();
  const size_t n = grads.size();
#pragma omp parallel for simd schedule(static) reduction(+ : sum) if (parallel : worth_threads(n))
  for (size_t i = 0; i < n; i++) sum += (double)g[i] * g[i];
  return std::sqrt(sum);
}

double clip_global_norm(Span<float> grads, float max_norm) {
  double norm = global_norm(grads);
  if (max_norm > 0 && norm > max_norm) {
    const float scale = (float)(max_norm / norm);
    const size_t n = grads.size();
#pragma omp parallel for schedule(static) if (worth_threads(n))
    for (size_t i = 0; i < n; i++) grads[i] *= scale;
  }
  return norm;
}

void AdamW::update(GPT& model, const AdamWConfig& cfg, float lr, bool (*skip)(const TensorSpec&)) {
  if (m.size() != model.params_memory().size()) {
    m.assign(model.params_memory().size(), 0.0f);
    v.assign(model.params_memory().size(), 0.0f);
  }
  t += 1;
  const float correction1 = 1.0f - std::pow(cfg.beta1, (float)t);
  const float correction2 = 1.0f - std::pow(cfg.beta2, (float)t);
  // √v̂ = √v / √(1−β2ᵗ): the corrections become two constants multiplied in, so an element costs one division (of
  // m̂ by √v̂ + ε) instead of three; a division is the slowest of the element's vector operations.
  const float inv_correction1 = 1.0f / correction1;
  const float inv_sqrt_correction2 = 1.0f / std::sqrt(correction2);
  // One parallel region for the whole table (tensors differ only in their weight decay); `nowait` lets a thread
  // go on to the next tensor without waiting for the others, since tensors are independent.
#pragma omp parallel if (worth_threads(model.params_memory().size()))
  for (const TensorSpec& tensor : model.table()) {
    if (skip && skip(tensor)) continue;  // the same answer on every thread, so they all still meet each omp for
    const float decay = tensor.weight_decay ? cfg.weight_decay : 0.0f;
    float* theta = model.params_memory().data() + tensor.offset;
    const float* g = model.grads_memory().data() + tensor.offset;
    float* mt = m.data() + tensor.offset;
    float* vt = v.data() + tensor.offset;
#pragma omp for schedule(static) nowait
    for (size_t i = 0; i < tensor.numel; i++) {
      mt[i] = cfg.beta1 * mt[i] + (1.0f - cfg.beta1) * g[i];
      vt[i] = cfg.beta2 * vt[i] + (1.0f - cfg.beta2) * g[i] * g[i];
      const float m_hat = mt[i] * inv_correction1;
      const float sqrt_v_hat = std::sqrt(vt[i]) * inv_sqrt_correction2;
      theta[i] -= lr * (m_hat / (sqrt_v_hat + cfg.eps) + decay * theta[i]);
    }
  }
}
