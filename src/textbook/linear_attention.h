// The textbook linear attention (test-only, like reference.h): the obvious O(T²) double loop over (query, key)
// pairs, with the weights written out, sharing none of the fast op's running sums or reverse scans.
//   φ(x) = elu(x) + 1,   s_ij = φ(q_i)·φ(k_j) for j ∈ K(i) (0 elsewhere),   den_i = Σ_j s_ij + ε
//   y_i = Σ_j s_ij v_j / den_i                                          (the fast op's formula, ops/linear_attention.h)
// Backward, differentiating that formula directly (y_i depends on s_ij through the numerator and den_i):
//   ∂L/∂s_ij = dy_i·(v_j − y_i) / den_i          ∂L/∂v_j = Σ_i (s_ij / den_i) dy_i
//   ∂L/∂φ(q_i) = Σ_j ∂L/∂s_ij φ(k_j)              ∂L/∂φ(k_j) = Σ_i ∂L/∂s_ij φ(q_i)
//   dq = ∂L/∂φ(q) ⊙ φ'(q),  dk = ∂L/∂φ(k) ⊙ φ'(k),  φ'(x) = 1 (x > 0), eˣ (x ≤ 0)
// qkv (B,T,3C) with row [q | k | v], head h owning columns h·HS … (h+1)·HS−1 of each third; out (B,T,C);
// probs (B,NH,T,T) the implied weights s_ij / den_i. Templated on F; the tests use double.
// At the end: the textbook mixer "linear", these heads inside the attention family of reference.h.
#pragma once
#include <cmath>
#include <vector>

#include "ops/linear_attention.h"  // kLinearAttentionEps
#include "ops/mask.h"
#include "textbook/heads.h"
#include "textbook/reference.h"  // RefQKVAttention: the attention family's projections and gates

template <typename F>
F ref_phi(F x) {
  return x > 0 ? x + 1 : std::exp(x);
}
template <typename F>
F ref_phi_grad(F x) {
  return x > 0 ? F(1) : std::exp(x);
}

// s (T×T), exactly 0 outside the mask, and den (T).
template <typename F>
void ref_linear_scores(std::vector<F>& s, std::vector<F>& den, const std::vector<F>& Q, const std::vector<F>& K,
                       const AttentionMask& mask, int T, int HS) {
  s.assign(T * T, F(0)), den.assign(T, F(kLinearAttentionEps));
  for (int i = 0; i < T; i++)
    for (int j = 0; j < T; j++) {
      if (!mask.allows(i, j, T)) continue;
      F dot = 0;
      for (int d = 0; d < HS; d++) dot += ref_phi(Q[i * HS + d]) * ref_phi(K[j * HS + d]);
      s[i * T + j] = dot;
      den[i] += dot;
    }
}

template <typename F>
void ref_linear_attention_forward(F* out, F* probs, const F* qkv, const AttentionMask& mask, int B, int T, int C,
                                  int NH) {
  const int HS = C / NH;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const std::vector<F> Q = ref_get_head(qkv, 0, b, h, T, C, NH), K = ref_get_head(qkv, 1, b, h, T, C, NH),
                           V = ref_get_head(qkv, 2, b, h, T, C, NH);
      std::vector<F> s, den;
      ref_linear_scores(s, den, Q, K, mask, T, HS);
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) probs[((b * NH + h) * T + i) * T + j] = s[i * T + j] / den[i];
      for (int i = 0; i < T; i++)
        for (int e = 0; e < HS; e++) {
          F y = 0;
          for (int j = 0; j < T; j++) y += s[i * T + j] * V[j * HS + e];
          out[(b * T + i) * C + h * HS + e] = y / den[i];
        }
    }
}

// From qkv alone (s, den and y are recomputed): the fast op's `den` and `out` arguments have no counterpart here.
template <typename F>
void ref_linear_attention_backward(F* dqkv, const F* dout, const F* qkv, const AttentionMask& mask, int B, int T,
                                   int C, int NH) {
  const int HS = C / NH;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const std::vector<F> Q = ref_get_head(qkv, 0, b, h, T, C, NH), K = ref_get_head(qkv, 1, b, h, T, C, NH),
                           V = ref_get_head(qkv, 2, b, h, T, C, NH);
      std::vector<F> s, den;
      ref_linear_scores(s, den, Q, K, mask, T, HS);
      std::vector<F> Y(T * HS, F(0)), dY(T * HS), ds(T * T, F(0)), dphiq(T * HS, F(0)), dphik(T * HS, F(0)),
          dV(T * HS, F(0));
      for (int i = 0; i < T; i++)
        for (int e = 0; e < HS; e++) {
          dY[i * HS + e] = dout[(b * T + i) * C + h * HS + e];
          for (int j = 0; j < T; j++) Y[i * HS + e] += s[i * T + j] * V[j * HS + e] / den[i];
        }
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
          if (!mask.allows(i, j, T)) continue;
          F g = 0;  // ∂L/∂s_ij = dy_i·(v_j − y_i) / den_i
          for (int e = 0; e < HS; e++) g += dY[i * HS + e] * (V[j * HS + e] - Y[i * HS + e]);
          ds[i * T + j] = g / den[i];
          for (int e = 0; e < HS; e++) dV[j * HS + e] += s[i * T + j] / den[i] * dY[i * HS + e];
        }
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
          for (int d = 0; d < HS; d++) {
            dphiq[i * HS + d] += ds[i * T + j] * ref_phi(K[j * HS + d]);
            dphik[j * HS + d] += ds[i * T + j] * ref_phi(Q[i * HS + d]);
          }
      for (int t = 0; t < T; t++)  // write dq, dk, dv into this head's columns of dqkv
        for (int d = 0; d < HS; d++) {
          F* row = dqkv + (b * T + t) * 3 * C + h * HS + d;
          row[0] = dphiq[t * HS + d] * ref_phi_grad(Q[t * HS + d]);
          row[C] = dphik[t * HS + d] * ref_phi_grad(K[t * HS + d]);
          row[2 * C] = dV[t * HS + d];
        }
    }
}

// The textbook mixer "linear": the attention family (reference.h) with the heads above.
class RefLinearAttention final : public RefQKVAttention {
 protected:
  void heads_forward(double* O, double* A, const double* qkv, const RefMixerPass& x) const override {
    ref_linear_attention_forward(O, A, qkv, x.mask, x.B, x.T, x.C, x.NH);
  }
  void heads_backward(double* dqkv, const double* dO, const double* qkv, const RefMixerPass& x) const override {
    ref_linear_attention_backward(dqkv, dO, qkv, x.mask, x.B, x.T, x.C, x.NH);
  }
};
inline const bool ref_linear_registered = register_ref_mixer({
    "linear",
    [](const ModelConfig&) -> std::unique_ptr<RefMixer> { return std::make_unique<RefLinearAttention>(); },
    {{"", [](ModelConfig&) {}}},  // no settings of its own
});
