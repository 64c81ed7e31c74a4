#include "ops/cross_entropy.h"

#include "base/fast_exp.h"
#include "base/threads.h"

#include <cmath>
#include <cstddef>

LossSum cross_entropy_forward(float* probs, float* losses, const float* logits, const int* targets, int N, int V) {
  LossSum sum;
  double total = 0;
  int count = 0;
#pragma omp parallel for reduction(+ : total, count) if (worth_threads((size_t)N * V))
  for (int n = 0; n < N; n++) {
    const float* z = logits + (size_t)n * V;
    float* p = probs + (size_t)n * V;
    float max_z = z[0];  // subtracting the max keeps exp() from overflowing; softmax is shift-invariant
    for (int v = 1; v < V; v++) max_z = z[v] > max_z ? z[v] : max_z;
    for (int v = 0; v < V; v++) p[v] = fast_exp(z[v] - max_z);
    double denom = 0;
    for (int v = 0; v < V; v++) denom += p[v];
    for (int v = 0; v < V; v++) p[v] = (float)(p[v] / denom);
    int y = targets[n];
    // −log p[y] computed as log Σ exp − (z_y − max): finite even when p[y] underflows to 0.
    losses[n] = y == kNoTarget ? 0.0f : (float)(std::log(denom) - (z[y] - max_z));
    if (y != kNoTarget) {
      total += losses[n];
      count += 1;
    }
  }
  sum.total = total;
  sum.count = count;
  return sum;
}

void cross_entropy_backward(float* dlogits, const float* probs, const int* targets, int count, int N, int V) {
  const float scale = count ? 1.0f / count : 0.0f;  // d(mean loss)/d(loss_n)
#pragma omp parallel for if (worth_threads((size_t)N * V))
  for (int n = 0; n < N; n++) {
    const int y = targets[n];
    const float* p = probs + (size_t)n * V;
    float* dz = dlogits + (size_t)n * V;
    for (int v = 0; v < V; v++) dz[v] = y == kNoTarget ? 0.0f : scale * (p[v] - (v == y ? 1.0f : 0.0f));
  }
}
