#include "ops/linear.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "base/blas.h"
#include "base/decode_team.h"
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

// Four rows' terms of one output, x0·w0 + x1·w1 + x2·w2 + x3·w3, with every multiply-add fused as written: left
// to the compiler (-ffp-contract) the fusing may differ between two loops computing the same sum, and between
// compilers, so the one-thread products and a DecodeTeam's shares would not give the same bits.
static inline float four_rows(float x0, float x1, float x2, float x3, float w0, float w1, float w2, float w3) {
  return std::fma(x3, w3, std::fma(x2, w2, std::fma(x1, w1, x0 * w0)));
}

// y = b + Σ_i x_i·W[i, :]: W is read once, row after row in storage order, each row an axpy over contiguous
// memory (vectorizes). At one thread the weights do not stay in the core's cache between tokens (3.2 MB for the
// tiny model), so this is bound by how fast W streams in. Four rows per pass halve the loads and stores of y (it
// stays in L1) per weight, and four sequential streams keep the hardware prefetcher busy.
// Columns [lo, hi) of a W whose rows are `ld` floats apart: a DecodeTeam's share (base/decode_team.h) reads its
// own block of the team's copy of W. Each y[o] is the same sum in the same order whatever the range.
static void matvec_columns(float* out, const float* inp, const float* weight, size_t ld, const float* bias, int IC,
                           int lo, int hi) {
  for (int o = lo; o < hi; o++) out[o] = bias ? bias[o] : 0.0f;
  int i = 0;
  for (; i + 4 <= IC; i += 4) {
    const float x0 = inp[i], x1 = inp[i + 1], x2 = inp[i + 2], x3 = inp[i + 3];
    const float* w0 = weight + (size_t)i * ld;
    const float *w1 = w0 + ld, *w2 = w1 + ld, *w3 = w2 + ld;
    for (int o = lo; o < hi; o++) out[o] += four_rows(x0, x1, x2, x3, w0[o], w1[o], w2[o], w3[o]);
  }
  for (; i < IC; i++)  // the last IC mod 4 rows
    for (int o = lo; o < hi; o++) out[o] = std::fma(inp[i], weight[(size_t)i * ld + o], out[o]);
}

// Two rows through one read of W: y0 = b + x0ᵀ·W and y1 = b + x1ᵀ·W, matvec's loop with a second accumulator row,
// so each weight loaded feeds two multiply-adds. Eight rows of W per pass (matvec takes four): the two rows of
// sums stay in registers across eight weights each, which halves their loads and stores per weight; the second
// row's extra multiply-adds are what is left to hide behind the weights' stream.
// __restrict: the outputs alias neither W nor the inputs, so each weight is loaded once for both rows.
// Each vector of columns carries two chains of eight dependent multiply-adds (4 cycles each), so one vector at a
// time waits on latency, not on the weights. g++ vectorizes the column loop one vector per iteration; unrolled 4×,
// four vectors' chains are in flight: `bench --sample-bound` on a Zen 4, six runs alternated with the loop as it
// was, took the two rows from 1.49× to 1.13× one row's matvec (1.55× to 1.36× built for AVX2;
// docs/performance_log.md, "matvec2: four vectors of columns in flight"). clang interleaves vectorized loops by
// itself, and reads "GCC unroll" as an unroll that stops it vectorizing this loop (4× slower), so the pragma is
// g++'s alone. The sums, and their order, are unchanged.
#if defined(__GNUC__) && !defined(__clang__)
#define UNROLL_VECTOR_LOOP_4 _Pragma("GCC unroll 4")
#else
#define UNROLL_VECTOR_LOOP_4
#endif
static void matvec2_columns(float* __restrict out0, float* __restrict out1, const float* __restrict inp0,
                            const float* __restrict inp1, const float* __restrict weight, size_t ld,
                            const float* __restrict bias, int IC, int lo, int hi) {
  for (int o = lo; o < hi; o++) out0[o] = out1[o] = bias ? bias[o] : 0.0f;
  constexpr int R = 8;
  int i = 0;
  for (; i + R <= IC; i += R) {
    const float* w = weight + (size_t)i * ld;
    UNROLL_VECTOR_LOOP_4
    for (int o = lo; o < hi; o++) {
      float s0 = out0[o], s1 = out1[o];
      for (int r = 0; r < R; r++) {
        const float v = w[(size_t)r * ld + o];
        s0 = std::fma(inp0[i + r], v, s0);
        s1 = std::fma(inp1[i + r], v, s1);
      }
      out0[o] = s0, out1[o] = s1;
    }
  }
  for (; i < IC; i++) {  // the last IC mod 8 rows
    const float* w = weight + (size_t)i * ld;
    for (int o = lo; o < hi; o++)
      out0[o] = std::fma(inp0[i], w[o], out0[o]), out1[o] = std::fma(inp1[i], w[o], out1[o]);
  }
}

// The same two products for a DecodeTeam's share (base/decode_team.h), which reads its own block of the team's copy
// of W from its core's L2: a block of kBlock output columns keeps its sums in registers while it walks down all
// IC rows, and stores them once. The loops above load and store y at every pass, and a thread whose share ends
// inside a cache line of y would pull that line from the other core at every pass. Per column the sums are the
// same as above, in the same order (DecodeTeam.SplitProductsGiveTheOneThreadBits checks the bits); streaming from
// L3 on one thread the loops above are faster (W read in storage order).
constexpr int kBlock = 64;  // columns whose sums a block keeps in registers (four AVX-512 vectors)

template <int K>
static void matvec_block(float* out, const float* inp, const float* w, size_t ld, const float* bias, int IC, int k) {
  float acc[K];
  for (int j = 0; j < K; j++) acc[j] = j < k ? (bias ? bias[j] : 0.0f) : 0.0f;
  int i = 0;
  for (; i + 4 <= IC; i += 4) {
    const float x0 = inp[i], x1 = inp[i + 1], x2 = inp[i + 2], x3 = inp[i + 3];
    const float* w0 = w + (size_t)i * ld;
    const float *w1 = w0 + ld, *w2 = w1 + ld, *w3 = w2 + ld;
    if (k == K) {
      for (int j = 0; j < K; j++) acc[j] += four_rows(x0, x1, x2, x3, w0[j], w1[j], w2[j], w3[j]);
    } else {
      for (int j = 0; j < k; j++) acc[j] += four_rows(x0, x1, x2, x3, w0[j], w1[j], w2[j], w3[j]);
    }
  }
  for (; i < IC; i++)  // the last IC mod 4 rows
    for (int j = 0; j < k; j++) acc[j] = std::fma(inp[i], w[(size_t)i * ld + j], acc[j]);
  for (int j = 0; j < k; j++) out[j] = acc[j];
}

static void matvec_blocks(float* out, const float* inp, const float* weight, size_t ld, const float* bias, int IC,
                           int lo, int hi) {
  int o = lo;
  for (; o + kBlock <= hi; o += kBlock)
    matvec_block<kBlock>(out + o, inp, weight + o, ld, bias ? bias + o : nullptr, IC, kBlock);
  for (; o < hi; o += 16)
    matvec_block<16>(out + o, inp, weight + o, ld, bias ? bias + o : nullptr, IC, std::min(16, hi - o));
}

// Two rows through one read of W: y0 = b + x0ᵀ·W and y1 = b + x1ᵀ·W, so each weight loaded feeds two
// multiply-adds. A block of K columns keeps both rows' sums in registers down all the rows, each sum taking the
// rows one by one (the order this product has always had).
// __restrict: the outputs alias neither W nor the inputs.
template <int K>
static void matvec2_block(float* __restrict out0, float* __restrict out1, const float* __restrict inp0,
                          const float* __restrict inp1, const float* __restrict w, size_t ld,
                          const float* __restrict bias, int IC, int k) {
  float s0[K], s1[K];
  for (int j = 0; j < K; j++) s0[j] = s1[j] = j < k ? (bias ? bias[j] : 0.0f) : 0.0f;
  for (int i = 0; i < IC; i++) {
    const float a = inp0[i], b = inp1[i];
    const float* wr = w + (size_t)i * ld;
    if (k == K) {
      for (int j = 0; j < K; j++) s0[j] = std::fma(a, wr[j], s0[j]), s1[j] = std::fma(b, wr[j], s1[j]);
    } else {
      for (int j = 0; j < k; j++) s0[j] = std::fma(a, wr[j], s0[j]), s1[j] = std::fma(b, wr[j], s1[j]);
    }
  }
  for (int j = 0; j < k; j++) out0[j] = s0[j], out1[j] = s1[j];
}

static void matvec2_blocks(float* out0, float* out1, const float* inp0, const float* inp1, const float* weight,
                            size_t ld, const float* bias, int IC, int lo, int hi) {
  int o = lo;
  for (; o + kBlock <= hi; o += kBlock)
    matvec2_block<kBlock>(out0 + o, out1 + o, inp0, inp1, weight + o, ld, bias ? bias + o : nullptr, IC, kBlock);
  for (; o < hi; o += 16)
    matvec2_block<16>(out0 + o, out1 + o, inp0, inp1, weight + o, ld, bias ? bias + o : nullptr, IC,
                      std::min(16, hi - o));
}

// logits_v = Σ_c x_c·wte[v, c]: one dot product per vocabulary row (rows of wte are contiguous).
static void lm_head_rows(float* logits, const float* inp, const float* wte, int C, int lo, int hi) {
  for (int v = lo; v < hi; v++) {
    const float* w = wte + (size_t)v * C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; c++) s += inp[c] * w[c];
    logits[v] = s;
  }
}

// Inside a DecodeTeam's scope a product worth handing over is split between the team's threads: matvec's and
// matvec2's shares are whole blocks of kBlock columns, the LM head's whole cache lines of logits.
static DecodeTeam* team_for(size_t weights) { return weights >= 8192 ? DecodeTeam::current() : nullptr; }

// Share [lo, hi) reads its own block of the team's copy of W (DecodeTeam::columns_by_share): hi − lo columns,
// rows hi − lo floats apart, starting at IC·lo.
void matvec(float* out, const float* inp, const float* weight, const float* bias, int IC, int OC) {
  if (DecodeTeam* team = team_for((size_t)IC * OC)) {
    const float* w = team->columns_by_share(weight, IC, OC, kBlock);
    return team->split(OC, kBlock, [&](int lo, int hi) {
      matvec_blocks(out + lo, inp, w + (size_t)IC * lo, hi - lo, bias ? bias + lo : nullptr, IC, 0, hi - lo);
    });
  }
  matvec_columns(out, inp, weight, OC, bias, IC, 0, OC);
}

void matvec2(float* out0, float* out1, const float* inp0, const float* inp1, const float* weight, const float* bias,
             int IC, int OC) {
  if (DecodeTeam* team = team_for((size_t)IC * OC)) {
    const float* w = team->columns_by_share(weight, IC, OC, kBlock);
    return team->split(OC, kBlock, [&](int lo, int hi) {
      matvec2_blocks(out0 + lo, out1 + lo, inp0, inp1, w + (size_t)IC * lo, hi - lo, bias ? bias + lo : nullptr,
                      IC, 0, hi - lo);
    });
  }
  matvec2_columns(out0, out1, inp0, inp1, weight, OC, bias, IC, 0, OC);
}

void lm_head_matvec(float* logits, const float* inp, const float* wte, int C, int V) {
  if (DecodeTeam* team = team_for((size_t)C * V))
    return team->split(V, 16, [&](int lo, int hi) { lm_head_rows(logits, inp, wte, C, lo, hi); });
  lm_head_rows(logits, inp, wte, C, 0, V);
}
