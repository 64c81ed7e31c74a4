#include "ops/head_gate.h"

#include <cstddef>

#include "base/threads.h"

void head_gate_forward(float* out, const float* inp, const float* gates, int N, int NH, int HS) {
  const int C = NH * HS;
  parallel_for(N, (size_t)N * NH * HS, [&](size_t n) {
    for (int h = 0; h < NH; h++)
      for (int d = 0; d < HS; d++) out[n * C + h * HS + d] = gates[h] * inp[n * C + h * HS + d];
  });
}

void head_gate_backward(float* dinp, float* dgates, const float* dout, const float* inp, const float* gates, int N,
                        int NH, int HS) {
  const int C = NH * HS;
  // Heads outermost: each thread owns whole heads, so dξ_h needs no cross-thread sum.
#pragma omp parallel for if (worth_threads((size_t)N * NH * HS))
  for (int h = 0; h < NH; h++) {
    double dgate = 0;
    for (int n = 0; n < N; n++)
      for (int d = 0; d < HS; d++) {
        const size_t i = (size_t)n * C + h * HS + d;
        dinp[i] = gates[h] * dout[i];
        dgate += (double)dout[i] * inp[i];
      }
    dgates[h] += (float)dgate;
  }
}
