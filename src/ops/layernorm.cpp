#include "ops/layernorm.h"

#include "base/threads.h"

#include <omp.h>

#include <cmath>
#include <cstddef>
#include <vector>

// The sums over a row's channels are marked `omp simd reduction`: a float sum is ordered in C++, so without it the
// compiler keeps one running sum and the loop runs one channel at a time; with it, each SIMD lane keeps a partial
// sum and the lanes are added at the end. That order depends on the build, not on the data, the row or the
// threads, so every row of every run of one binary still sums the same way.

// y = (x − μ)·r·w + b for one row: the last step of the forward, shared with the recompute.
static void normalize_row(float* y, const float* x, const float* weight, const float* bias, float m, float r, int C) {
  for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c] + bias[c];
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
  parallel_for(N, (size_t)N * C, [&](size_t n) {
    const float* x = inp + n * C;
    float* y = out + n * C;
    float m = 0.0f;
#pragma omp simd reduction(+ : m)
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
    var /= C;
    float r = 1.0f / std::sqrt(var + kLayerNormEps);
    normalize_row(y, x, weight, bias, m, r, C);
    mean[n] = m;
    rstd[n] = r;
  });
}

void layernorm_recompute(float* out, const float* inp, const float* weight, const float* bias, const float* mean,
                         const float* rstd, int N, int C) {
  parallel_for(N, (size_t)N * C, [&](size_t n) {
    normalize_row(out + n * C, inp + n * C, weight, bias, mean[n], rstd[n], C);
  });
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C) {
  // dweight and dbias sum over rows. Each thread sums its own rows into a partial of its own (rows are read once,
  // in order), then the partials are added up in thread order, so the result does not depend on scheduling.
  const bool parallel = worth_threads((size_t)N * C);
  const int threads = parallel ? omp_get_max_threads() : 1;
  thread_local std::vector<float> partials_buffer;
  partials_buffer.assign((size_t)threads * 2 * C, 0.0f);
  float* partials = partials_buffer.data();  // (threads, 2, C): this thread's dweight, then dbias
#pragma omp parallel num_threads(threads) if (parallel)
  {
    float* dw = partials + (size_t)omp_get_thread_num() * 2 * C;
    float* db = dw + C;
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      const float* x = inp + (size_t)n * C;
      const float* dy = dout + (size_t)n * C;
      float* dx = dinp + (size_t)n * C;
      const float m = mean[n], r = rstd[n];
      float mean_g = 0.0f, mean_g_xhat = 0.0f;  // mean(g) and mean(g·x̂), g = dy·γ
#pragma omp simd reduction(+ : mean_g, mean_g_xhat)
      for (int c = 0; c < C; c++) {
        float xhat = (x[c] - m) * r, g = dy[c] * weight[c];
        mean_g += g;
        mean_g_xhat += g * xhat;
      }
      mean_g /= C;
      mean_g_xhat /= C;
#pragma omp simd  // dx, dw and db are three different buffers (a row of dinp, this thread's partials)
      for (int c = 0; c < C; c++) {
        float xhat = (x[c] - m) * r, g = dy[c] * weight[c];
        dx[c] += r * (g - mean_g - xhat * mean_g_xhat);
        dw[c] += dy[c] * xhat;
        db[c] += dy[c];
      }
    }
#pragma omp for schedule(static)
    for (int c = 0; c < C; c++)
      for (int t = 0; t < threads; t++) {
        dweight[c] += partials[(size_t)t * 2 * C + c];
        dbias[c] += partials[(size_t)t * 2 * C + C + c];
      }
  }
}
