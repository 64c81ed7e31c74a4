#include "attention.h"

#include <cmath>
#include <cstddef>

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
  float sum = 0.0f;
  for (int j = range.begin; j < range.end; j++) {
    p[j] = std::exp(p[j] - max_s);
    sum += p[j];
  }
  const float inv_sum = 1.0f / sum;
  for (int d = 0; d < HS; d++) o[d] = 0.0f;
  for (int j = range.begin; j < range.end; j++) {
    p[j] *= inv_sum;
    const float* v = values + (size_t)j * stride;
    for (int d = 0; d < HS; d++) o[d] += p[j] * v[d];
  }
}

void attention_forward(float* out, float* probs, const float* qkv, const AttentionMask& mask, float scale, int B,
                       int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
#pragma omp parallel for collapse(2)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float* base = qkv + (size_t)b * T * C3 + h * HS;  // q of (b, t=0, h); k is +C, v is +2C
      for (int i = 0; i < T; i++) {
        float* p = probs + (((size_t)b * NH + h) * T + i) * T;
        float* o = out + ((size_t)b * T + i) * C + h * HS;
        attend_one_query(o, p, base + (size_t)i * C3, base + C, base + 2 * C, C3, mask.keys_for(i, T), scale, HS);
      }
    }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs, const float* out,
                        const AttentionMask& mask, float scale, int B, int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
  // Each (b, h) writes only its own head's columns of dqkv, so the pairs run in parallel without races.
#pragma omp parallel for collapse(2)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const size_t base = (size_t)b * T * C3 + h * HS;
      for (int i = 0; i < T; i++) {
        const float* p = probs + (((size_t)b * NH + h) * T + i) * T;
        const float* dO = dout + ((size_t)b * T + i) * C + h * HS;
        const float* O = out + ((size_t)b * T + i) * C + h * HS;
        const float* q = qkv + base + (size_t)i * C3;
        float* dq = dqkv + base + (size_t)i * C3;
        const float row_dot = dot(dO, O, HS);  // rowsum(dP ⊙ P)_i
        KeyRange keys = mask.keys_for(i, T);
        for (int j = keys.begin; j < keys.end; j++) {
          const float* k = qkv + base + (size_t)j * C3 + C;
          const float* v = k + C;
          float* dk = dqkv + base + (size_t)j * C3 + C;
          float* dv = dk + C;
          const float dS = p[j] * (dot(dO, v, HS) - row_dot);
          for (int d = 0; d < HS; d++) {
            dq[d] += scale * dS * k[d];
            dk[d] += scale * dS * q[d];
            dv[d] += p[j] * dO[d];
          }
        }
      }
    }
}
