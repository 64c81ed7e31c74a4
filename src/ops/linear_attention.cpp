#include "ops/linear_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "base/threads.h"

// ---- The recurrent form ----------------------------------------------------------------------------------------

void phi_features(float* out, const float* x, int n) {
  for (int i = 0; i < n; i++) out[i] = x[i] > 0 ? x[i] + 1.0f : std::exp(x[i]);  // elu(x) + 1
}

void linear_state_update(float* S, float* z, const float* phi_k, const float* v, float sign, int HS) {
  for (int d = 0; d < HS; d++) {
    const float a = sign * phi_k[d];
    float* row = S + (size_t)d * HS;
#pragma omp simd
    for (int e = 0; e < HS; e++) row[e] += a * v[e];
    z[d] += a;
  }
}

float linear_state_read(float* y, const float* S, const float* z, const float* phi_q, int HS) {
  float den = kLinearAttentionEps;
  for (int e = 0; e < HS; e++) y[e] = 0.0f;
  for (int d = 0; d < HS; d++) {
    const float a = phi_q[d];
    const float* row = S + (size_t)d * HS;
#pragma omp simd
    for (int e = 0; e < HS; e++) y[e] += a * row[e];
    den += a * z[d];
  }
  const float inv = 1.0f / den;
  for (int e = 0; e < HS; e++) y[e] *= inv;
  return den;
}

// ---- One (b, h) pair ---------------------------------------------------------------------------------------------

namespace {

// A head's slice of qkv, φ of its queries and keys (T × HS each, computed once: every scan reads them twice), and
// the running state. thread_local: grown once per thread, then reused, so a step allocates nothing.
struct HeadWork {
  std::vector<float> phi_q, phi_k, S, z, R, r, g, c;
  std::vector<int> lo, hi;
};
thread_local HeadWork work;

struct HeadView {
  const float *Q, *K, *V;  // row t at + t·3C
};
HeadView head_view(const float* qkv, int b, int h, int T, int C, int NH) {
  const float* Q = qkv + (size_t)b * T * 3 * C + (size_t)h * (C / NH);
  return {Q, Q + C, Q + 2 * C};
}

void compute_features(HeadWork& w, const HeadView& hv, int T, int C, int HS) {
  w.phi_q.resize((size_t)T * HS), w.phi_k.resize((size_t)T * HS);
  for (int t = 0; t < T; t++) {
    phi_features(w.phi_q.data() + (size_t)t * HS, hv.Q + (size_t)t * 3 * C, HS);
    phi_features(w.phi_k.data() + (size_t)t * HS, hv.K + (size_t)t * 3 * C, HS);
  }
}

// The forward scan: calls visit(i, S_i, z_i) for every query i in order, with the state holding exactly the keys
// K(i) (added as end_i passes them, subtracted as begin_i passes them).
template <typename Visit>
void scan_keys(HeadWork& w, const HeadView& hv, const AttentionMask& mask, int T, int C, int HS, Visit visit) {
  w.S.assign((size_t)HS * HS, 0.0f), w.z.assign(HS, 0.0f);
  int added = 0, removed = 0;  // the state holds keys [removed, added)
  for (int i = 0; i < T; i++) {
    const KeyRange k = mask.keys_for(i, T);
    for (; added < k.end; added++)
      linear_state_update(w.S.data(), w.z.data(), w.phi_k.data() + (size_t)added * HS, hv.V + (size_t)added * 3 * C,
                          1.0f, HS);
    for (; removed < k.begin; removed++)
      linear_state_update(w.S.data(), w.z.data(), w.phi_k.data() + (size_t)removed * HS,
                          hv.V + (size_t)removed * 3 * C, -1.0f, HS);
    visit(i);
  }
}

}  // namespace

void linear_attention_forward(float* out, float* den, const float* qkv, const AttentionMask& mask, int B, int T, int C,
                              int NH) {
  const int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * C * HS))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      HeadWork& w = work;
      const HeadView hv = head_view(qkv, b, h, T, C, NH);
      float* row_den = den + ((size_t)b * NH + h) * T;
      float* Y = out + (size_t)b * T * C + h * HS;
      compute_features(w, hv, T, C, HS);
      scan_keys(w, hv, mask, T, C, HS, [&](int i) {
        row_den[i] = linear_state_read(Y + (size_t)i * C, w.S.data(), w.z.data(), w.phi_q.data() + (size_t)i * HS, HS);
      });
    }
}

void linear_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* den, const float* out,
                               const AttentionMask& mask, int B, int T, int C, int NH) {
  const int HS = C / NH, C3 = 3 * C;
  // Each (b, h) writes only its own head's columns of dqkv, so the pairs run in parallel without races.
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * C * HS))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      HeadWork& w = work;
      const HeadView hv = head_view(qkv, b, h, T, C, NH);
      const float* row_den = den + ((size_t)b * NH + h) * T;
      const float* dY = dout + (size_t)b * T * C + h * HS;
      const float* Y = out + (size_t)b * T * C + h * HS;
      float* dQ = dqkv + (size_t)b * T * C3 + h * HS;
      float *dK = dQ + C, *dV = dQ + 2 * C;
      compute_features(w, hv, T, C, HS);

      // g_i = dy_i / den_i,  c_i = −(dy_i·y_i) / den_i
      w.g.resize((size_t)T * HS), w.c.resize(T);
      for (int i = 0; i < T; i++) {
        const float* dy = dY + (size_t)i * C;
        const float* y = Y + (size_t)i * C;
        const float inv = 1.0f / row_den[i];
        float dy_y = 0.0f;
        for (int e = 0; e < HS; e++) w.g[(size_t)i * HS + e] = dy[e] * inv, dy_y += dy[e] * y[e];
        w.c[i] = -dy_y * inv;
      }

      // Queries: ∂L/∂φ(q_i) = S_i g_i + c_i z_i, then dq = ∂L/∂φ(q) ⊙ φ'(q)
      scan_keys(w, hv, mask, T, C, HS, [&](int i) {
        const float* g = w.g.data() + (size_t)i * HS;
        const float* q = hv.Q + (size_t)i * C3;
        float* dq = dQ + (size_t)i * C3;
        for (int d = 0; d < HS; d++) {
          const float* row = w.S.data() + (size_t)d * HS;
          float s = 0.0f;
#pragma omp simd reduction(+ : s)
          for (int e = 0; e < HS; e++) s += row[e] * g[e];
          const float dphi = s + w.c[i] * w.z[d];
          dq[d] = q[d] > 0 ? dphi : dphi * w.phi_q[(size_t)i * HS + d];  // φ'(x) = eˣ = φ(x) for x ≤ 0
        }
      });

      // Keys: Q(j) = [lo_j, hi_j), lo_j = the first query whose range ends after j, hi_j = the first query whose
      // range begins after j (both only move right with j, as the ranges do).
      w.lo.assign(T, 0), w.hi.assign(T, T);
      for (int i = 0, j_end = 0, j_begin = 0; i < T; i++) {
        const KeyRange k = mask.keys_for(i, T);
        for (; j_end < k.end; j_end++) w.lo[j_end] = i;
        for (; j_begin < k.begin; j_begin++) w.hi[j_begin] = i;
      }
      // Reverse scan: the state R = Σ_{i∈[lo, hi)} φ(q_i) g_iᵀ, r = Σ c_i φ(q_i) over the queries that see key j.
      w.R.assign((size_t)HS * HS, 0.0f), w.r.assign(HS, 0.0f);
      auto add_query = [&](int i, float sign) {  // sign = +1 adds query i, −1 removes it
        const float* pq = w.phi_q.data() + (size_t)i * HS;
        const float* g = w.g.data() + (size_t)i * HS;
        for (int d = 0; d < HS; d++) {
          const float a = sign * pq[d];
          float* row = w.R.data() + (size_t)d * HS;
#pragma omp simd
          for (int e = 0; e < HS; e++) row[e] += a * g[e];
          w.r[d] += a * w.c[i];
        }
      };
      int lo = T, hi = T;  // the state holds queries [lo, hi)
      for (int j = T - 1; j >= 0; j--) {
        while (lo > w.lo[j]) add_query(--lo, 1.0f);
        while (hi > w.hi[j]) add_query(--hi, -1.0f);
        // ∂L/∂φ(k_j) = R v_j + r,  ∂L/∂v_j = Rᵀ φ(k_j)
        const float* v = hv.V + (size_t)j * C3;
        const float* k = hv.K + (size_t)j * C3;
        const float* pk = w.phi_k.data() + (size_t)j * HS;
        float* dk = dK + (size_t)j * C3;
        float* dv = dV + (size_t)j * C3;
        for (int e = 0; e < HS; e++) dv[e] = 0.0f;
        for (int d = 0; d < HS; d++) {
          const float* row = w.R.data() + (size_t)d * HS;
          float s = 0.0f;
#pragma omp simd reduction(+ : s)
          for (int e = 0; e < HS; e++) s += row[e] * v[e];
#pragma omp simd
          for (int e = 0; e < HS; e++) dv[e] += pk[d] * row[e];
          const float dphi = s + w.r[d];
          dk[d] = k[d] > 0 ? dphi : dphi * pk[d];
        }
      }
    }
}

void linear_attention_probs(float* probs, const float* qkv, const AttentionMask& mask, int B, int T, int C, int NH) {
  const int HS = C / NH;
  HeadWork w;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const HeadView hv = head_view(qkv, b, h, T, C, NH);
      compute_features(w, hv, T, C, HS);
      float* P = probs + ((size_t)b * NH + h) * T * T;
      for (int i = 0; i < T; i++) {
        float* row = P + (size_t)i * T;
        std::fill(row, row + T, 0.0f);
        const KeyRange k = mask.keys_for(i, T);
        const float* pq = w.phi_q.data() + (size_t)i * HS;
        float den = kLinearAttentionEps;
        for (int j = k.begin; j < k.end; j++) {
          const float* pk = w.phi_k.data() + (size_t)j * HS;
          float s = 0.0f;
          for (int d = 0; d < HS; d++) s += pq[d] * pk[d];
          row[j] = s, den += s;
        }
        for (int j = k.begin; j < k.end; j++) row[j] /= den;
      }
    }
}
