#include "ops/gelu.h"

#include "base/fast_exp.h"
#include "base/threads.h"

static const float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
static const float kCubic = 0.044715f;

// s = σ(2u) = ½·(1 + tanh u): one vectorizable exp instead of a libm tanh call per element. Exact at both ends:
// e^{−2u} → ∞ gives s = 0, and → 0 gives s = 1. On Zen 5 this form ran forward 15% and backward 9% faster than
// 1 − 2/(e^{2u} + 1) (a microbenchmark of 196,608 elements, 2026-12-03), the same values to 5e-7. `inline`: without
// it g++ 12 once kept this out of line, a scalar call per element, and a tiny-preset step took 42 ms instead of 24.
static inline float half_one_plus_tanh(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 1.0f / (1.0f + fast_exp(-2.0f * u));
}

void gelu_forward(float* out, const float* inp, size_t N) {
  parallel_for(N, N, [&](size_t i) {
    const float x = inp[i];
    out[i] = x * half_one_plus_tanh(x);
  });
}

// dy/dx given x and s = σ(2u).
static inline float slope_of(float x, float s) {
  const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return s + 2.0f * x * s * (1.0f - s) * du_dx;
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
  parallel_for(N, N, [&](size_t i) {
    const float x = inp[i];
    dinp[i] = slope_of(x, half_one_plus_tanh(x)) * dout[i];
  });
}

void gelu_recompute(float* out, float* slope, const float* inp, size_t N) {
  parallel_for(N, N, [&](size_t i) {
    const float x = inp[i], s = half_one_plus_tanh(x);
    out[i] = x * s;
    slope[i] = slope_of(x, s);
  });
}

void gelu_backward_from_slope(float* dinp, const float* slope, const float* dout, size_t N) {
  parallel_for(N, N, [&](size_t i) { dinp[i] = slope[i] * dout[i]; });
}
