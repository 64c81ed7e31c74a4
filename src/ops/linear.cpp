#include "ops/linear.h"

#include <omp.h>

#include <cstddef>

#include "base/blas.h"
#include "base/threads.h"

// Threads split each product themselves: every thread calls single-threaded sgemm on its own block of rows or
// columns. At these sizes OpenBLAS would barely use a second core, and one thread pool (OpenMP) instead of two
// means the pools never fight over the cores (see threads.cpp). Each thread's block is its my_share (threads.h).

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IC, int OC,
                    const float* residual) {
#pragma omp parallel if (worth_threads((size_t)N * IC * OC))
  {
    const Share rows = my_share(N);
    float* y = out + (size_t)rows.begin * OC;
    const float* r = residual ? residual + (size_t)rows.begin * OC : nullptr;
    float beta = 0.0f;
    if (bias || residual) {  // start each output row at r + b, then let sgemm add X·W to it (beta = 1)
      for (int n = 0; n < rows.size(); n++)
        for (int o = 0; o < OC; o++)
          y[(size_t)n * OC + o] = (r ? r[(size_t)n * OC + o] : 0.0f) + (bias ? bias[o] : 0.0f);
      beta = 1.0f;
    }
    if (rows.size() > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows.size(), OC, IC, 1.0f, inp + (size_t)rows.begin * IC,
                  IC, weight, OC, beta, y, OC);
  }
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IC, int OC) {
#pragma omp parallel if (worth_threads((size_t)N * IC * OC))
  {
    // dX = dY·Wᵀ, split by rows of dX
    const Share rows = my_share(N);
    if (rows.size() > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows.size(), IC, OC, 1.0f, dout + (size_t)rows.begin * OC,
                  OC, weight, OC, 0.0f, dinp + (size_t)rows.begin * IC, IC);
    // dW += Xᵀ·dY and db += Σ_rows dY, split by output columns
    const Share cols = my_share(OC);
    if (cols.size() > 0)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IC, cols.size(), N, 1.0f, inp, IC, dout + cols.begin, OC,
                  1.0f, dweight + cols.begin, OC);
    if (dbias)
      for (int n = 0; n < N; n++)
        for (int o = cols.begin; o < cols.end; o++) dbias[o] += dout[(size_t)n * OC + o];
  }
}

void lm_head_forward(float* logits, const float* inp, const float* wte, int N, int C, int V) {
#pragma omp parallel if (worth_threads((size_t)N * C * V))
  {
    const Share rows = my_share(N);
    if (rows.size() > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows.size(), V, C, 1.0f, inp + (size_t)rows.begin * C, C,
                  wte, C, 0.0f, logits + (size_t)rows.begin * V, V);
  }
}

void lm_head_backward(float* dinp, float* dwte, const float* dlogits, const float* inp, const float* wte, int N,
                      int C, int V) {
#pragma omp parallel if (worth_threads((size_t)N * C * V))
  {
    const Share rows = my_share(N);  // dX = dlogits·wte
    if (rows.size() > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows.size(), C, V, 1.0f,
                  dlogits + (size_t)rows.begin * V, V, wte, C, 0.0f, dinp + (size_t)rows.begin * C, C);
    const Share vocab = my_share(V);  // dwte += dlogitsᵀ·X, split by vocabulary rows
    if (vocab.size() > 0)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, vocab.size(), C, N, 1.0f, dlogits + vocab.begin, V, inp,
                  C, 1.0f, dwte + (size_t)vocab.begin * C, C);
  }
}

// y = b + Σ_i x_i·W[i, :]: W is read once, row after row in storage order, each row an axpy over contiguous
// memory (vectorizes). For one token the weights do not stay in cache between tokens (3 MB for the tiny model),
// so this is bound by how fast W streams in. Four rows per pass halve the loads and stores of y (it stays in
// L1) per weight, and four sequential streams keep the hardware prefetcher busy.
void matvec(float* out, const float* inp, const float* weight, const float* bias, int IC, int OC) {
  for (int o = 0; o < OC; o++) out[o] = bias ? bias[o] : 0.0f;
  int i = 0;
  for (; i + 4 <= IC; i += 4) {
    const float x0 = inp[i], x1 = inp[i + 1], x2 = inp[i + 2], x3 = inp[i + 3];
    const float* w0 = weight + (size_t)i * OC;
    const float* w1 = w0 + OC;
    const float* w2 = w1 + OC;
    const float* w3 = w2 + OC;
    for (int o = 0; o < OC; o++) out[o] += x0 * w0[o] + x1 * w1[o] + x2 * w2[o] + x3 * w3[o];
  }
  for (; i < IC; i++)  // the last IC mod 4 rows
    for (int o = 0; o < OC; o++) out[o] += inp[i] * weight[(size_t)i * OC + o];
}

// Two rows through one read of W: y0 = b + x0ᵀ·W and y1 = b + x1ᵀ·W, matvec's loop with a second accumulator row,
// so each weight loaded feeds two multiply-adds. Eight rows of W per pass (matvec takes four): the two rows of
// sums stay in registers across eight weights each, which halves their loads and stores per weight; the second
// row's extra multiply-adds are what is left to hide behind the weights' stream.
// __restrict: the outputs alias neither W nor the inputs, so each weight is loaded once for both rows.
void matvec2(float* __restrict out0, float* __restrict out1, const float* __restrict inp0,
             const float* __restrict inp1, const float* __restrict weight, const float* __restrict bias, int IC,
             int OC) {
  for (int o = 0; o < OC; o++) out0[o] = out1[o] = bias ? bias[o] : 0.0f;
  constexpr int R = 8;
  int i = 0;
  for (; i + R <= IC; i += R) {
    const float* w = weight + (size_t)i * OC;
    for (int o = 0; o < OC; o++) {
      float s0 = out0[o], s1 = out1[o];
      for (int r = 0; r < R; r++) {
        const float v = w[(size_t)r * OC + o];
        s0 += inp0[i + r] * v;
        s1 += inp1[i + r] * v;
      }
      out0[o] = s0, out1[o] = s1;
    }
  }
  for (; i < IC; i++) {  // the last IC mod 8 rows
    const float* w = weight + (size_t)i * OC;
    for (int o = 0; o < OC; o++) out0[o] += inp0[i] * w[o], out1[o] += inp1[i] * w[o];
  }
}

// logits_v = Σ_c x_c·wte[v, c]: one dot product per vocabulary row (rows of wte are contiguous).
void lm_head_matvec(float* logits, const float* inp, const float* wte, int C, int V) {
  for (int v = 0; v < V; v++) {
    const float* w = wte + (size_t)v * C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; c++) s += inp[c] * w[c];
    logits[v] = s;
  }
}
