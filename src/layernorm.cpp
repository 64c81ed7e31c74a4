#include "layernorm.h"

#include "threads.h"

#include <cmath>
#include <cstddef>

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
#pragma omp parallel for if (worth_threads((size_t)N * C))
  for (int n = 0; n < N; n++) {
    const float* x = inp + (size_t)n * C;
    float* y = out + (size_t)n * C;
    float m = 0.0f;
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    float var = 0.0f;
    for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
    var /= C;
    float r = 1.0f / std::sqrt(var + kLayerNormEps);
    for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = r;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C) {
#pragma omp parallel for if (worth_threads((size_t)N * C))
  for (int n = 0; n < N; n++) {
    const float* x = inp + (size_t)n * C;
    const float* dy = dout + (size_t)n * C;
    float* dx = dinp + (size_t)n * C;
    const float m = mean[n], r = rstd[n];
    float mean_g = 0.0f, mean_g_xhat = 0.0f;  // mean(g) and mean(g·x̂)
    for (int c = 0; c < C; c++) {
      float xhat = (x[c] - m) * r, g = dy[c] * weight[c];
      mean_g += g;
      mean_g_xhat += g * xhat;
    }
    mean_g /= C;
    mean_g_xhat /= C;
    for (int c = 0; c < C; c++) {
      float xhat = (x[c] - m) * r, g = dy[c] * weight[c];
      dx[c] += r * (g - mean_g - xhat * mean_g_xhat);
    }
  }
  // Parameter gradients sum over rows; looping channels outermost lets threads own disjoint channels.
#pragma omp parallel for if (worth_threads((size_t)N * C))
  for (int c = 0; c < C; c++) {
    float dw = 0.0f, db = 0.0f;
    for (int n = 0; n < N; n++) {
      float dy = dout[(size_t)n * C + c];
      dw += dy * (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
      db += dy;
    }
    dweight[c] += dw;
    dbias[c] += db;
  }
}
