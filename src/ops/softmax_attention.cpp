#include "ops/softmax_attention.h"

#include "base/fast_exp.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "base/blas.h"
#include "base/threads.h"

// `omp simd` lets the compiler reorder this one sum into vector lanes (it may not otherwise: float addition is
// not associative), which is most of attention's speed at head sizes like 32.
static float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

// out[k] = Σ_i a_i · rows[i·stride + k] for k < width ≤ 32: a weighted sum of `count` row pieces, the sums kept in
// vector registers while i runs (a full-width loop has a fixed trip count, so the compiler can keep them there). The
// sum over i is four interleaved partial sums (i mod 4), added at the end: one running sum would be a chain of
// dependent multiply-adds, each waiting for the last (4 cycles), where four chains keep the FMA units busy. At one
// query per step this loop is the decoder's attention, and a latency-bound chain made it 12% of a sampled token.
constexpr int kLanes = 16, kMaxLanes = 32;
template <int W>  // W lanes, fixed at compile time; W = 0: `width` lanes
static void weighted_rows_in(float* out, const float* a, const float* rows, size_t stride, int count, int width) {
  const int n = W ? W : width;
  float acc[4][W ? W : kMaxLanes] = {};
  int i = 0;
  for (; i + 4 <= count; i += 4)
    for (int u = 0; u < 4; u++) {
      const float ai = a[i + u];
      const float* r = rows + (size_t)(i + u) * stride;
#pragma omp simd
      for (int k = 0; k < n; k++) acc[u][k] += ai * r[k];
    }
  for (; i < count; i++) {
    const float ai = a[i];
    const float* r = rows + (size_t)i * stride;
#pragma omp simd
    for (int k = 0; k < n; k++) acc[0][k] += ai * r[k];
  }
  for (int k = 0; k < n; k++) out[k] = (acc[0][k] + acc[1][k]) + (acc[2][k] + acc[3][k]);
}
static void weighted_rows(float* out, const float* a, const float* rows, size_t stride, int count, int width) {
  if (width == kMaxLanes)
    weighted_rows_in<kMaxLanes>(out, a, rows, stride, count, width);
  else if (width == kLanes)
    weighted_rows_in<kLanes>(out, a, rows, stride, count, width);
  else
    weighted_rows_in<0>(out, a, rows, stride, count, width);
}

void attend_one_query(float* o, float* p, const float* q, const float* keys_t, int key_stride, const float* values,
                      int value_stride, KeyRange range, float scale, int HS) {
  const int begin = range.begin, end = range.end;
  // Scores s_j = scale · Σ_d q_d·k_jd, 32 or 16 keys at a time: a weighted sum of the head's rows of Kᵀ (row d
  // holds component d of every key), so no key ends with a horizontal sum across vector lanes as a dot product
  // would. The last run of fewer than 16 keys is computed as a full 16 ending inside the row of the cache (keys
  // before it or not yet written: read, never kept), since a loop of a run-time width does not vectorize as well.
  int j0 = begin;
  for (; end - j0 >= kMaxLanes; j0 += kMaxLanes) weighted_rows(p + j0, q, keys_t + j0, key_stride, HS, kMaxLanes);
  for (; end - j0 >= kLanes; j0 += kLanes) weighted_rows(p + j0, q, keys_t + j0, key_stride, HS, kLanes);
  if (j0 < end && key_stride < kLanes) {
    weighted_rows(p + j0, q, keys_t + j0, key_stride, HS, end - j0);
  } else if (j0 < end) {
    const int s = std::min(j0, key_stride - kLanes);
    float full[kLanes];
    weighted_rows(full, q, keys_t + s, key_stride, HS, kLanes);
    std::copy(full + (j0 - s), full + (end - s), p + j0);
  }
  float max_s = -INFINITY;
#pragma omp simd reduction(max : max_s)
  for (int j = begin; j < end; j++) {
    p[j] *= scale;
    max_s = p[j] > max_s ? p[j] : max_s;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = begin; j < end; j++) {
    p[j] = fast_exp(p[j] - max_s);
    sum += p[j];
  }
  const float inv_sum = 1.0f / sum;
  for (int j = begin; j < end; j++) p[j] *= inv_sum;
  // O = Σ_j P_j·v_j, 32 components at a time (a head of 32 in one pass over the values).
  for (int d0 = 0; d0 < HS; d0 += kMaxLanes)
    weighted_rows(o + d0, p + begin, values + (size_t)begin * value_stride + d0, value_stride, end - begin,
                  std::min(kMaxLanes, HS - d0));
}

// Queries are processed in blocks of this many rows. Each block is a handful of small sgemm calls over the
// union of its rows' key ranges, so a mask skips the keys no row of the block can see: with n = T/16 blocks causal
// computes (n+1)/2n of bidirectional's scores (62.5% at T = 64, 50.8% at T = 1024; docs/masks.md has the times),
// window:W does O(T·W).
constexpr int kQueryBlock = 16;

// Keys that some query in [i0, i1) may see. For every mask in mask.h a row's range only moves right as i grows,
// so the union is [first row's begin, last row's end).
static KeyRange block_keys(const AttentionMask& mask, int i0, int i1, int T) {
  return {mask.keys_for(i0, T).begin, mask.keys_for(i1 - 1, T).end};
}

// One (b, h) pair's slice of the fused qkv: row t of Q is Q + t·C3, and K, V sit C and 2C columns to the right.
struct Head {
  const float *Q, *K, *V;
  const float* lse;  // (T) this head's log-normalisers
};
static Head head_of(const float* qkv, const float* lse, int b, int h, int T, int C, int NH) {
  const float* Q = qkv + (size_t)b * T * 3 * C + (size_t)h * (C / NH);
  return {Q, Q + C, Q + 2 * C, lse + ((size_t)b * NH + h) * T};
}

// A head's keys (or values) transposed, (HS, T): row d holds component d of every key. With this copy a block's
// scores S = Q·Kᵀ are a product of two matrices stored row by row, which OpenBLAS's small-matrix kernels ran 1.3–2.1×
// faster than Q times K read transposed (there the inner dimension is contiguous in both operands: a dot product
// per score), on Zen 5 for 16 queries × 16–64 keys × 32 (docs/performance.md, "Attention's scores and softmax").
static float* transposed(std::vector<float>& buffer, const float* rows, int T, int HS, int C3) {
  buffer.resize((size_t)HS * T);
  for (int d = 0; d < HS; d++)  // writes in order, reads across rows: 2× faster than the other order here
    for (int t = 0; t < T; t++) buffer[(size_t)d * T + t] = rows[(size_t)t * C3 + d];
  return buffer.data();
}

// A block's scores, S = scale · Q[i0, i0+rows)·K[keys]ᵀ, into s (rows × nk, row stride nk); Kt is K transposed.
static void block_scores(float* s, const Head& hd, const float* Kt, int i0, int rows, KeyRange keys, float scale,
                         int T, int HS, int C3) {
  const int nk = keys.end - keys.begin;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, nk, HS, scale, hd.Q + (size_t)i0 * C3, C3,
              Kt + keys.begin, T, 0.0f, s, nk);
}

// A block's row of n scores with its own keys at columns [begin, end): the others set to −∞, whose exp is exactly 0
// (fast_exp.h), so that the loops after it run over the whole row, from its start. Rows are 16 to a few hundred keys
// long, and loops over [begin, end), with their peeled ends, made the tiny preset's attention forward 1.2× slower on
// Zen 5 (docs/performance.md, "Attention's scores and softmax").
static void mask_outside(float* row, int n, int begin, int end) {
  std::fill(row, row + begin, -INFINITY);
  std::fill(row + end, row + n, -INFINITY);
}

// Softmax of one row of a block in place over its own keys, columns [begin, end) of the n the block spans, and
// exactly 0 on the rest. Returns lse = log Σ_j exp(s_j); subtracting the max first keeps exp from overflowing.
static float softmax_row(float* s, int n, int begin, int end) {
  mask_outside(s, n, begin, end);
  float max_s = -INFINITY;
#pragma omp simd reduction(max : max_s)
  for (int j = 0; j < n; j++) max_s = s[j] > max_s ? s[j] : max_s;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; j++) {
    s[j] = fast_exp(s[j] - max_s);
    sum += s[j];
  }
  const float inv_sum = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j < n; j++) s[j] *= inv_sum;
  return max_s + std::log(sum);
}

// The forward's P for queries [i0, i1), rebuilt into p (rows × nk): P_ij = exp(S_ij − lse_i) inside the mask, 0
// outside it.
static void rebuild_block_probs(float* p, const Head& hd, const float* Kt, const AttentionMask& mask, int i0, int i1,
                                KeyRange keys, float scale, int T, int HS, int C3) {
  const int nk = keys.end - keys.begin;
  block_scores(p, hd, Kt, i0, i1 - i0, keys, scale, T, HS, C3);
  for (int i = i0; i < i1; i++) {
    float* row = p + (size_t)(i - i0) * nk;
    const KeyRange k = mask.keys_for(i, T);
    const int begin = k.begin - keys.begin, end = k.end - keys.begin;
    const float lse = hd.lse[i];
    mask_outside(row, nk, begin, end);
#pragma omp simd
    for (int j = 0; j < nk; j++) row[j] = fast_exp(row[j] - lse);
  }
}

// Scratch for one block of queries (kQueryBlock × T), grown once per thread, then reused: no allocation in a step.
static float* block_scratch(std::vector<float>& buffer, int T) {
  buffer.resize((size_t)kQueryBlock * T);
  return buffer.data();
}

void attention_forward(float* out, float* lse, const float* qkv, const AttentionMask& mask, float scale, int B,
                       int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * T * C))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      thread_local std::vector<float> p_buffer, kt_buffer;
      float* P = block_scratch(p_buffer, T);
      const Head hd = head_of(qkv, lse, b, h, T, C, NH);
      const float* Kt = transposed(kt_buffer, hd.K, T, HS, C3);
      float* row_lse = lse + ((size_t)b * NH + h) * T;
      float* O = out + (size_t)b * T * C + h * HS;
      for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int i1 = std::min(T, i0 + kQueryBlock), rows = i1 - i0;
        const KeyRange kr = block_keys(mask, i0, i1, T);
        const int nk = kr.end - kr.begin;
        block_scores(P, hd, Kt, i0, rows, kr, scale, T, HS, C3);
        for (int i = i0; i < i1; i++) {
          const KeyRange k = mask.keys_for(i, T);
          row_lse[i] = softmax_row(P + (size_t)(i - i0) * nk, nk, k.begin - kr.begin, k.end - kr.begin);
        }
        // O = P·V
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, HS, nk, 1.0f, P, nk,
                    hd.V + (size_t)kr.begin * C3, C3, 0.0f, O + (size_t)i0 * C, C);
      }
    }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* lse, const float* out,
                        const AttentionMask& mask, float scale, int B, int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
  // dQ, dK, dV start at 0, all of dqkv at once: the blocks below add into them (a key is seen by several blocks).
  std::fill_n(dqkv, (size_t)B * T * C3, 0.0f);
  // Each (b, h) writes only its own head's columns of dqkv, so the pairs run in parallel without races.
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * T * C))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      thread_local std::vector<float> p_buffer, ds_buffer, kt_buffer, vt_buffer;
      float *P = block_scratch(p_buffer, T), *dS = block_scratch(ds_buffer, T);
      const Head hd = head_of(qkv, lse, b, h, T, C, NH);
      const float* Kt = transposed(kt_buffer, hd.K, T, HS, C3);
      const float* Vt = transposed(vt_buffer, hd.V, T, HS, C3);
      float* dQ = dqkv + (size_t)b * T * C3 + h * HS;
      float *dK = dQ + C, *dV = dQ + 2 * C;
      const float* dO = dout + (size_t)b * T * C + h * HS;
      const float* O = out + (size_t)b * T * C + h * HS;
      for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int i1 = std::min(T, i0 + kQueryBlock), rows = i1 - i0;
        const KeyRange kr = block_keys(mask, i0, i1, T);
        const int nk = kr.end - kr.begin;
        rebuild_block_probs(P, hd, Kt, mask, i0, i1, kr, scale, T, HS, C3);
        // dP = dO·Vᵀ
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, nk, HS, 1.0f, dO + (size_t)i0 * C, C,
                    Vt + kr.begin, T, 0.0f, dS, nk);
        // dS = P ⊙ (dP − rowsum(dP ⊙ P)), with rowsum(dP ⊙ P)_i = dO_i·O_i; P is 0 off the mask, so is dS
        for (int r = 0; r < rows; r++) {
          const float row_dot = dot(dO + (size_t)(i0 + r) * C, O + (size_t)(i0 + r) * C, HS);
          float* ds = dS + (size_t)r * nk;
          const float* p = P + (size_t)r * nk;
          for (int j = 0; j < nk; j++) ds[j] = p[j] * (ds[j] - row_dot);
        }
        // dQ += scale · dS·K      dK += scale · dSᵀ·Q      dV += Pᵀ·dO
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, HS, nk, scale, dS, nk,
                    hd.K + (size_t)kr.begin * C3, C3, 1.0f, dQ + (size_t)i0 * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HS, rows, scale, dS, nk, hd.Q + (size_t)i0 * C3, C3,
                    1.0f, dK + (size_t)kr.begin * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HS, rows, 1.0f, P, nk, dO + (size_t)i0 * C, C, 1.0f,
                    dV + (size_t)kr.begin * C3, C3);
      }
    }
}

void attention_probs(float* probs, const float* qkv, const float* lse, const AttentionMask& mask, float scale, int B,
                     int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
  std::vector<float> block((size_t)kQueryBlock * T), kt_buffer;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const Head hd = head_of(qkv, lse, b, h, T, C, NH);
      const float* Kt = transposed(kt_buffer, hd.K, T, HS, C3);
      float* P = probs + ((size_t)b * NH + h) * T * T;
      for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int i1 = std::min(T, i0 + kQueryBlock);
        const KeyRange kr = block_keys(mask, i0, i1, T);
        const int nk = kr.end - kr.begin;
        rebuild_block_probs(block.data(), hd, Kt, mask, i0, i1, kr, scale, T, HS, C3);
        for (int i = i0; i < i1; i++) {  // the block's columns, and 0 for keys outside them
          float* row = P + (size_t)i * T;
          std::fill(row, row + T, 0.0f);
          std::copy_n(block.data() + (size_t)(i - i0) * nk, nk, row + kr.begin);
        }
      }
    }
}
