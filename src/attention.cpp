#include "attention.h"

#include "fast_exp.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "blas.h"
#include "threads.h"

// `omp simd` lets the compiler reorder this one sum into vector lanes (it may not otherwise: float addition is
// not associative), which is most of attention's speed at head sizes like 32.
static float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

void attend_one_query(float* o, float* p, const float* q, const float* keys, const float* values, int stride,
                      KeyRange range, float scale, int HS) {
  float max_s = -INFINITY;
  for (int j = range.begin; j < range.end; j++) {
    p[j] = scale * dot(q, keys + (size_t)j * stride, HS);
    max_s = p[j] > max_s ? p[j] : max_s;
  }
  for (int j = range.begin; j < range.end; j++) p[j] = fast_exp(p[j] - max_s);
  float sum = 0.0f;
  for (int j = range.begin; j < range.end; j++) sum += p[j];
  const float inv_sum = 1.0f / sum;
  for (int d = 0; d < HS; d++) o[d] = 0.0f;
  for (int j = range.begin; j < range.end; j++) {
    p[j] *= inv_sum;
    const float* v = values + (size_t)j * stride;
    for (int d = 0; d < HS; d++) o[d] += p[j] * v[d];
  }
}

// Queries are processed in blocks of this many rows. Each block is a handful of small sgemm calls over the
// union of its rows' key ranges, so a mask skips the blocks of keys no row of the block can see: causal does a
// little over half of bidirectional's work, window:W does O(T·W).
constexpr int kQueryBlock = 16;

// Keys that some query in [i0, i1) may see. For every mask in mask.h a row's range only moves right as i grows,
// so the union is [first row's begin, last row's end).
static KeyRange block_keys(const AttentionMask& mask, int i0, int i1, int T) {
  return {mask.keys_for(i0, T).begin, mask.keys_for(i1 - 1, T).end};
}

// Softmax of one row over [keys.begin, keys.end), in place; zero on the rest of the block's columns [lo, hi).
static void masked_softmax_row(float* s, KeyRange keys, int lo, int hi) {
  float max_s = -INFINITY;
  for (int j = keys.begin; j < keys.end; j++) max_s = s[j] > max_s ? s[j] : max_s;
  for (int j = keys.begin; j < keys.end; j++) s[j] = fast_exp(s[j] - max_s);
  float sum = 0.0f;
  for (int j = keys.begin; j < keys.end; j++) sum += s[j];
  const float inv_sum = 1.0f / sum;
  for (int j = keys.begin; j < keys.end; j++) s[j] *= inv_sum;
  for (int j = lo; j < keys.begin; j++) s[j] = 0.0f;
  for (int j = keys.end; j < hi; j++) s[j] = 0.0f;
}

void attention_forward(float* out, float* probs, const float* qkv, const AttentionMask& mask, float scale, int B,
                       int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * T * C))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float* Q = qkv + (size_t)b * T * C3 + h * HS;  // row t of Q is Q + t·C3; K and V follow at +C, +2C
      const float* K = Q + C;
      const float* V = Q + 2 * C;
      float* P = probs + ((size_t)b * NH + h) * T * T;
      float* O = out + (size_t)b * T * C + h * HS;
      for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int i1 = std::min(T, i0 + kQueryBlock), rows = i1 - i0;
        const KeyRange kr = block_keys(mask, i0, i1, T);
        const int nk = kr.end - kr.begin;
        float* P_block = P + (size_t)i0 * T + kr.begin;
        // S = scale · Q·Kᵀ, written straight into P's rows, then softmax in place
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, HS, scale, Q + (size_t)i0 * C3, C3,
                    K + (size_t)kr.begin * C3, C3, 0.0f, P_block, T);
        for (int i = i0; i < i1; i++) masked_softmax_row(P + (size_t)i * T, mask.keys_for(i, T), kr.begin, kr.end);
        // O = P·V
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, HS, nk, 1.0f, P_block, T,
                    V + (size_t)kr.begin * C3, C3, 0.0f, O + (size_t)i0 * C, C);
      }
    }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs, const float* out,
                        const AttentionMask& mask, float scale, int B, int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
  // Each (b, h) writes only its own head's columns of dqkv, so the pairs run in parallel without races.
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * T * C))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      // dS for one block of queries; grown once per thread, then reused (no allocation in later steps)
      thread_local std::vector<float> dS;
      dS.resize((size_t)kQueryBlock * T);
      const size_t head = (size_t)b * T * C3 + h * HS;
      const float *Q = qkv + head, *K = Q + C, *V = Q + 2 * C;
      float *dQ = dqkv + head, *dK = dQ + C, *dV = dQ + 2 * C;
      const float* P = probs + ((size_t)b * NH + h) * T * T;
      const float* dO = dout + (size_t)b * T * C + h * HS;
      const float* O = out + (size_t)b * T * C + h * HS;
      for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int i1 = std::min(T, i0 + kQueryBlock), rows = i1 - i0;
        const KeyRange kr = block_keys(mask, i0, i1, T);
        const int nk = kr.end - kr.begin;
        const float* P_block = P + (size_t)i0 * T + kr.begin;
        // dP = dO·Vᵀ
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, HS, 1.0f, dO + (size_t)i0 * C, C,
                    V + (size_t)kr.begin * C3, C3, 0.0f, dS.data(), nk);
        // dS = P ⊙ (dP − rowsum(dP ⊙ P)), with rowsum(dP ⊙ P)_i = dO_i·O_i; P is 0 off the mask, so is dS
        for (int r = 0; r < rows; r++) {
          const float row_dot = dot(dO + (size_t)(i0 + r) * C, O + (size_t)(i0 + r) * C, HS);
          float* ds = dS.data() + (size_t)r * nk;
          const float* p = P_block + (size_t)r * T;
          for (int j = 0; j < nk; j++) ds[j] = p[j] * (ds[j] - row_dot);
        }
        // dQ += scale · dS·K      dK += scale · dSᵀ·Q      dV += Pᵀ·dO
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, HS, nk, scale, dS.data(), nk,
                    K + (size_t)kr.begin * C3, C3, 1.0f, dQ + (size_t)i0 * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HS, rows, scale, dS.data(), nk,
                    Q + (size_t)i0 * C3, C3, 1.0f, dK + (size_t)kr.begin * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HS, rows, 1.0f, P_block, T, dO + (size_t)i0 * C, C,
                    1.0f, dV + (size_t)kr.begin * C3, C3);
      }
    }
}
