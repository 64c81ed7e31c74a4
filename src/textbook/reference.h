// The textbook: the slow, obvious specification of every op of the GPT in src/ops/ and of the whole GPT, with the
// GPT's own mixer, softmax attention. Read this first (docs/tour.md): the fast code in src/ops/ and src/model/
// computes exactly these formulas, and the tests hold it to them (tests/test_ops.cpp, test_model.cpp,
// test_masks.cpp; Muon's step is in textbook/muon.h). Compiled only into the tests.
// The other mixer kinds are textbook mixers in their own headers (textbook/<kind>.h, each registering itself)
// behind the textbook's mixer seam (textbook/mixer.h); the block below calls a layer's mixer through that seam only.
// Header-only and templated on the float type F (the tests use double). Naive loops, no BLAS, no OpenMP, and no
// call into any fast op: each function is the formula in its comment written out, so the fast code can be checked
// against something that shares none of its tricks. Argument order, shapes and the gradient convention of every
// backward are the fast ops' (src/ops/README.md: parameter gradients +=, input gradients =, LayerNorm's dinp +=).
// Indices are plain ints: meant for tiny shapes.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <memory>
#include <type_traits>

#include "base/layer_list.h"    // split_layer_list: config.mixer, one kind per layer
#include "model/config.h"       // ModelConfig
#include "model/params.h"       // gpt_tensor_table: the parameter arena layout
#include "ops/cross_entropy.h"  // kNoTarget
#include "ops/layernorm.h"      // kLayerNormEps
#include "ops/mask.h"           // AttentionMask
#include "textbook/heads.h"     // ref_get_head
#include "textbook/mixer.h"     // RefMixer: the textbook's mixer seam

// ---- Token + position embedding. tokens (B,T), wte (V,C), wpe (maxT,C) or null (no positions), out (B,T,C).
template <typename F>
void ref_embedding_forward(F* out, const int* tokens, const F* wte, const F* wpe, int B, int T, int C) {
  // out[b,t,c] = wte[tokens[b,t], c] + wpe[t, c]
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) out[(b * T + t) * C + c] = wte[tokens[b * T + t] * C + c] + (wpe ? wpe[t * C + c] : F(0));
}

template <typename F>
void ref_embedding_backward(F* dwte, F* dwpe, const F* dout, const int* tokens, int B, int T, int C) {
  // dwte[tokens[b,t], c] += dout[b,t,c];  dwpe[t, c] += dout[b,t,c]
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) {
        dwte[tokens[b * T + t] * C + c] += dout[(b * T + t) * C + c];
        if (dwpe) dwpe[t * C + c] += dout[(b * T + t) * C + c];
      }
}

// ---- LayerNorm over the last dimension. inp, out (N,C); mean, rstd (N); weight, bias (C).
template <typename F>
void ref_layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int N, int C) {
  const F eps = F(kLayerNormEps);
  for (int n = 0; n < N; n++) {
    const F* x = inp + n * C;
    F mu = 0;
    F var = 0;
    for (int c = 0; c < C; c++) mu += x[c] / C;                      // μ = Σx / C
    for (int c = 0; c < C; c++) var += (x[c] - mu) * (x[c] - mu) / C;  // σ² = Σ(x − μ)² / C
    const F r = 1 / std::sqrt(var + eps);                             // r = 1/√(σ² + ε)
    for (int c = 0; c < C; c++) out[n * C + c] = (x[c] - mu) * r * weight[c] + bias[c];  // y = x̂·w + b
    mean[n] = mu;
    rstd[n] = r;
  }
}

template <typename F>
void ref_layernorm_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                            const F* mean, const F* rstd, int N, int C) {
  // Through the full Jacobian: x̂_j = (x_j − μ)·r and ∂x̂_j/∂x_i = r·(δ_ij − 1/C − x̂_i·x̂_j/C), so
  //   dx_i += Σ_j dy_j·w_j·∂x̂_j/∂x_i,   dw_j += Σ_rows dy_j·x̂_j,   db_j += Σ_rows dy_j
  for (int n = 0; n < N; n++) {
    const F* dy = dout + n * C;
    std::vector<F> xhat(C);
    for (int c = 0; c < C; c++) xhat[c] = (inp[n * C + c] - mean[n]) * rstd[n];
    for (int i = 0; i < C; i++)
      for (int j = 0; j < C; j++) {
        const F dxhat_j_dx_i = rstd[n] * ((i == j ? F(1) : F(0)) - F(1) / C - xhat[i] * xhat[j] / C);
        dinp[n * C + i] += dy[j] * weight[j] * dxhat_j_dx_i;
      }
    for (int c = 0; c < C; c++) {
      dweight[c] += dy[c] * xhat[c];
      dbias[c] += dy[c];
    }
  }
}

// ---- Linear layer, weight stored [in, out]. inp (N,IC), weight (IC,OC), bias (OC) or null, out (N,OC).
template <typename F>
void ref_linear_forward(F* out, const F* inp, const F* weight, const F* bias, int N, int IC, int OC) {
  // out[n,o] = b[o] + Σ_i inp[n,i]·w[i,o]
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      F s = bias ? bias[o] : F(0);
      for (int i = 0; i < IC; i++) s += inp[n * IC + i] * weight[i * OC + o];
      out[n * OC + o] = s;
    }
}

template <typename F>
void ref_linear_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, int N, int IC,
                         int OC) {
  // dinp[n,i] = Σ_o dout[n,o]·w[i,o];   dw[i,o] += Σ_n inp[n,i]·dout[n,o];   db[o] += Σ_n dout[n,o]
  std::fill(dinp, dinp + (size_t)N * IC, F(0));
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      for (int i = 0; i < IC; i++) {
        dinp[n * IC + i] += dout[n * OC + o] * weight[i * OC + o];
        dweight[i * OC + o] += inp[n * IC + i] * dout[n * OC + o];
      }
      if (dbias) dbias[o] += dout[n * OC + o];
    }
}

// ---- LM head tied to the token embedding wte (V,C). inp (N,C), logits (N,V).
template <typename F>
void ref_lm_head_forward(F* logits, const F* inp, const F* wte, int N, int C, int V) {
  // logits[n,v] = Σ_c inp[n,c]·wte[v,c]
  for (int n = 0; n < N; n++)
    for (int v = 0; v < V; v++) {
      F s = 0;
      for (int c = 0; c < C; c++) s += inp[n * C + c] * wte[v * C + c];
      logits[n * V + v] = s;
    }
}

template <typename F>
void ref_lm_head_backward(F* dinp, F* dwte, const F* dlogits, const F* inp, const F* wte, int N, int C, int V) {
  // dinp[n,c] = Σ_v dlogits[n,v]·wte[v,c];   dwte[v,c] += Σ_n dlogits[n,v]·inp[n,c]
  std::fill(dinp, dinp + (size_t)N * C, F(0));
  for (int n = 0; n < N; n++)
    for (int v = 0; v < V; v++)
      for (int c = 0; c < C; c++) {
        dinp[n * C + c] += dlogits[n * V + v] * wte[v * C + c];
        dwte[v * C + c] += dlogits[n * V + v] * inp[n * C + c];
      }
}

// ---- GELU, tanh approximation. N elements.
template <typename F>
void ref_gelu_forward(F* out, const F* inp, size_t N) {
  const F k = std::sqrt(F(2) / F(M_PI));
  const F a = F(0.044715);
  // y = ½·x·(1 + tanh(u)),   u = √(2/π)·(x + 0.044715·x³)
  for (size_t i = 0; i < N; i++) {
    const F x = inp[i];
    out[i] = F(0.5) * x * (1 + std::tanh(k * (x + a * x * x * x)));
  }
}

template <typename F>
void ref_gelu_backward(F* dinp, const F* inp, const F* dout, size_t N) {
  const F k = std::sqrt(F(2) / F(M_PI));
  const F a = F(0.044715);
  // dy/dx = ½·(1 + tanh u) + ½·x·sech²(u)·du/dx,   du/dx = √(2/π)·(1 + 3·0.044715·x²);   dinp = dy/dx · dout
  for (size_t i = 0; i < N; i++) {
    const F x = inp[i];
    const F u = k * (x + a * x * x * x);
    const F cosh_u = std::cosh(u);
    const F dy_dx = F(0.5) * (1 + std::tanh(u)) + F(0.5) * x / (cosh_u * cosh_u) * k * (1 + 3 * a * x * x);
    dinp[i] = dy_dx * dout[i];
  }
}

// ---- Multi-head attention on fused qkv (B,T,3C): row [q | k | v], head h owns columns h·HS … (h+1)·HS−1 of each
// third. out (B,T,C), probs (B,NH,T,T). Each (b, h) is worked on as T×HS matrices Q, K, V.
// P (T×T): S_ij = scale·q_i·k_j,  P_ij = softmax_j(S_ij) over the keys the mask allows, exactly 0 elsewhere.
template <typename F>
std::vector<F> ref_attention_probs(const std::vector<F>& Q, const std::vector<F>& K, const AttentionMask& mask,
                                   F scale, int T, int HS) {
  std::vector<F> P(T * T, F(0));
  for (int i = 0; i < T; i++) {
    std::vector<F> S(T, F(0));
    F max_s = -INFINITY;
    F sum = 0;
    for (int j = 0; j < T; j++) {
      if (!mask.allows(i, j, T)) continue;
      for (int d = 0; d < HS; d++) S[j] += scale * Q[i * HS + d] * K[j * HS + d];
      max_s = std::max(max_s, S[j]);
    }
    for (int j = 0; j < T; j++)
      if (mask.allows(i, j, T)) sum += std::exp(S[j] - max_s);
    for (int j = 0; j < T; j++)
      if (mask.allows(i, j, T)) P[i * T + j] = std::exp(S[j] - max_s) / sum;
  }
  return P;
}

template <typename F>
void ref_attention_forward(F* out, F* probs, const F* qkv, const AttentionMask& mask, F scale, int B, int T, int C,
                           int NH) {
  const int HS = C / NH;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const std::vector<F> Q = ref_get_head(qkv, 0, b, h, T, C, NH);
      const std::vector<F> K = ref_get_head(qkv, 1, b, h, T, C, NH);
      const std::vector<F> V = ref_get_head(qkv, 2, b, h, T, C, NH);
      const std::vector<F> P = ref_attention_probs(Q, K, mask, scale, T, HS);
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) probs[((b * NH + h) * T + i) * T + j] = P[i * T + j];
      for (int i = 0; i < T; i++)  // O = P·V
        for (int d = 0; d < HS; d++) {
          F o = 0;
          for (int j = 0; j < T; j++) o += P[i * T + j] * V[j * HS + d];
          out[(b * T + i) * C + h * HS + d] = o;
        }
    }
}

// The textbook backward from qkv alone: P is recomputed, so `probs` and `out` (kept for the fast op's signature)
// are not read.
template <typename F>
void ref_attention_backward(F* dqkv, const F* dout, const F* qkv, const F* probs, const F* out,
                            const AttentionMask& mask, F scale, int B, int T, int C, int NH) {
  (void)probs;  // the backward recomputes P from q and k: the fast op's arguments, unused here
  (void)out;
  const int HS = C / NH;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const std::vector<F> Q = ref_get_head(qkv, 0, b, h, T, C, NH);
      const std::vector<F> K = ref_get_head(qkv, 1, b, h, T, C, NH);
      const std::vector<F> V = ref_get_head(qkv, 2, b, h, T, C, NH);
      const std::vector<F> P = ref_attention_probs(Q, K, mask, scale, T, HS);
      std::vector<F> dO(T * HS);
      std::vector<F> dP(T * T, F(0));
      std::vector<F> dS(T * T, F(0));
      std::vector<F> dQ(T * HS, F(0));
      std::vector<F> dK(T * HS, F(0));
      std::vector<F> dV(T * HS, F(0));
      for (int i = 0; i < T; i++)
        for (int d = 0; d < HS; d++) dO[i * HS + d] = dout[(b * T + i) * C + h * HS + d];
      for (int i = 0; i < T; i++)  // dP = dO·Vᵀ
        for (int j = 0; j < T; j++)
          for (int d = 0; d < HS; d++) dP[i * T + j] += dO[i * HS + d] * V[j * HS + d];
      for (int i = 0; i < T; i++) {  // dS = P ⊙ (dP − rowsum(dP ⊙ P))
        F rowsum = 0;
        for (int j = 0; j < T; j++) rowsum += dP[i * T + j] * P[i * T + j];
        for (int j = 0; j < T; j++) dS[i * T + j] = P[i * T + j] * (dP[i * T + j] - rowsum);
      }
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
          for (int d = 0; d < HS; d++) {
            dQ[i * HS + d] += dS[i * T + j] * K[j * HS + d] * scale;  // dQ = dS·K·scale
            dK[j * HS + d] += dS[i * T + j] * Q[i * HS + d] * scale;  // dK = dSᵀ·Q·scale
            dV[j * HS + d] += P[i * T + j] * dO[i * HS + d];          // dV = Pᵀ·dO
          }
      for (int t = 0; t < T; t++)  // write dQ, dK, dV into this head's columns of dqkv
        for (int d = 0; d < HS; d++) {
          F* row = dqkv + (b * T + t) * 3 * C + h * HS + d;
          row[0] = dQ[t * HS + d];
          row[C] = dK[t * HS + d];
          row[2 * C] = dV[t * HS + d];
        }
    }
}

// ---- Head gates: head h's output scaled by ξ_h before the output projection. inp, out (N, C) = (N, NH·HS).
template <typename F>
void ref_head_gate_forward(F* out, const F* inp, const F* gates, int N, int NH, int HS) {
  // y[n, h, d] = ξ_h · x[n, h, d]
  for (int n = 0; n < N; n++)
    for (int h = 0; h < NH; h++)
      for (int d = 0; d < HS; d++) out[(n * NH + h) * HS + d] = gates[h] * inp[(n * NH + h) * HS + d];
}

template <typename F>
void ref_head_gate_backward(F* dinp, F* dgates, const F* dout, const F* inp, const F* gates, int N, int NH, int HS) {
  // dx[n, h, d] = ξ_h · dy[n, h, d];   dξ_h += Σ_n Σ_d dy[n, h, d] · x[n, h, d]
  for (int n = 0; n < N; n++)
    for (int h = 0; h < NH; h++)
      for (int d = 0; d < HS; d++) {
        const int i = (n * NH + h) * HS + d;
        dinp[i] = gates[h] * dout[i];
        dgates[h] += dout[i] * inp[i];
      }
}

// The number that multiplies q·k, in F: attn_scale "sqrt" = 1/√HS, "inv" = 1/HS, "none" = 1, or the number given.
template <typename F>
F ref_attention_scale(const ModelConfig& c) {
  const F HS = F(c.head_size());
  if (c.attn_scale == "sqrt") return 1 / std::sqrt(HS);
  if (c.attn_scale == "inv") return 1 / HS;
  if (c.attn_scale == "none") return F(1);
  return F(std::stod(c.attn_scale));
}

// ---- Softmax + cross-entropy. logits, probs (N,V); losses, targets (N). Returns the mean loss over counted rows.
template <typename F>
F ref_cross_entropy_forward(F* probs, F* losses, const F* logits, const int* targets, int N, int V) {
  F total = 0;
  int count = 0;
  for (int n = 0; n < N; n++) {
    const F* z = logits + n * V;
    F max_z = z[0];
    F sum = 0;
    for (int v = 0; v < V; v++) max_z = std::max(max_z, z[v]);
    for (int v = 0; v < V; v++) sum += std::exp(z[v] - max_z);
    for (int v = 0; v < V; v++) probs[n * V + v] = std::exp(z[v] - max_z) / sum;  // p = softmax(z)
    const int y = targets[n];
    losses[n] = y == kNoTarget ? F(0) : std::log(sum) - (z[y] - max_z);  // −log p_y = log Σ exp(z) − z_y
    if (y != kNoTarget) {
      total += losses[n];
      count++;
    }
  }
  return count ? total / count : F(0);  // mean over rows with a target
}

template <typename F>
void ref_cross_entropy_backward(F* dlogits, const F* probs, const int* targets, int count, int N, int V) {
  // dz_n = (p_n − onehot(target_n)) / count for rows with a target, 0 for the others
  for (int n = 0; n < N; n++)
    for (int v = 0; v < V; v++)
      dlogits[n * V + v] = targets[n] == kNoTarget ? F(0) : (probs[n * V + v] - (v == targets[n] ? F(1) : F(0))) / count;
}

// ---- The attention family as a textbook mixer (the fast one: src/model/mixers/qkv_attention.h):
//   qkv = u·W_qkv + b_qkv    O = heads(qkv)    G = ξ_h·O[:, h, :] (head gates, when on)    out = G·W_proj + b_proj
// with GPT-2's tensors attn.c_attn.{weight,bias} and attn.c_proj.{weight,bias}. A kind of the family says only what
// its heads compute, forward and backward; softmax attention is the one below, the GPT's.
class RefQKVAttention : public RefMixer {
 public:
  void forward(double* out, double* A, const double* u, const RefTensor& w, const RefMixerPass& x) const override {
    const int N = x.B * x.T;
    const int C = x.C;
    std::vector<double> qkv(N * 3 * C);
    std::vector<double> att(N * C);
    std::vector<double> gated(N * C);
    ref_linear_forward(qkv.data(), u, w("attn.c_attn.weight"), w("attn.c_attn.bias"), N, C, 3 * C);
    heads_forward(att.data(), A, qkv.data(), x);
    if (x.gates) ref_head_gate_forward(gated.data(), att.data(), x.gates, N, x.NH, C / x.NH);
    ref_linear_forward(out, x.gates ? gated.data() : att.data(), w("attn.c_proj.weight"), w("attn.c_proj.bias"), N, C,
                       C);
  }
  void backward(double* du, const RefGrad& g, double* dgates, const double* dout, const double* u, const RefTensor& w,
                const RefMixerPass& x) const override {
    const int N = x.B * x.T;
    const int C = x.C;
    std::vector<double> qkv(N * 3 * C);
    std::vector<double> att(N * C);
    std::vector<double> gated(N * C);
    std::vector<double> A(x.B * x.NH * x.T * x.T);
    ref_linear_forward(qkv.data(), u, w("attn.c_attn.weight"), w("attn.c_attn.bias"), N, C, 3 * C);  // recomputed
    heads_forward(att.data(), A.data(), qkv.data(), x);
    std::vector<double> d_att(N * C, 0.0);
    std::vector<double> d_qkv(N * 3 * C, 0.0);
    if (!x.gates) {
      ref_linear_backward(d_att.data(), g("attn.c_proj.weight"), g("attn.c_proj.bias"), dout, att.data(),
                          w("attn.c_proj.weight"), N, C, C);
    } else {  // through the gates
      std::vector<double> d_gated(N * C, 0.0);
      ref_head_gate_forward(gated.data(), att.data(), x.gates, N, x.NH, C / x.NH);
      ref_linear_backward(d_gated.data(), g("attn.c_proj.weight"), g("attn.c_proj.bias"), dout, gated.data(),
                          w("attn.c_proj.weight"), N, C, C);
      ref_head_gate_backward(d_att.data(), dgates, d_gated.data(), att.data(), x.gates, N, x.NH, C / x.NH);
    }
    heads_backward(d_qkv.data(), d_att.data(), qkv.data(), x);
    ref_linear_backward(du, g("attn.c_attn.weight"), g("attn.c_attn.bias"), d_qkv.data(), u, w("attn.c_attn.weight"),
                        N, C, 3 * C);
  }

 protected:
  // O (B·T, C) and the weights A (B, NH, T, T) from qkv (B·T, 3C); dqkv written from dO.
  virtual void heads_forward(double* O, double* A, const double* qkv, const RefMixerPass& x) const = 0;
  virtual void heads_backward(double* dqkv, const double* dO, const double* qkv, const RefMixerPass& x) const = 0;
};

// Softmax attention, the GPT's mixer: ref_attention_forward's heads, scaled by config.attn_scale.
class RefSoftmaxAttention final : public RefQKVAttention {
 public:
  explicit RefSoftmaxAttention(const ModelConfig& c) : scale_(ref_attention_scale<double>(c)) {}

 protected:
  void heads_forward(double* O, double* A, const double* qkv, const RefMixerPass& x) const override {
    ref_attention_forward(O, A, qkv, x.mask, scale_, x.B, x.T, x.C, x.NH);
  }
  void heads_backward(double* dqkv, const double* dO, const double* qkv, const RefMixerPass& x) const override {
    ref_attention_backward(dqkv, dO, qkv, (const double*)nullptr, (const double*)nullptr, x.mask, scale_, x.B, x.T,
                           x.C, x.NH);
  }

 private:
  const double scale_;
};
inline const bool ref_softmax_registered = register_ref_mixer({
    "softmax",
    [](const ModelConfig& c) -> std::unique_ptr<RefMixer> { return std::make_unique<RefSoftmaxAttention>(c); },
    {{"", [](ModelConfig&) {}}},  // no settings of its own
});

// ---- One block, pre-LN, its forward right above its backward (the fast one: src/model/block.h):
//   res2 = x + mixer(ln_1(x))                              the layer's textbook mixer (textbook/mixer.h)
//   res3 = res2 + mlp_proj(gelu(mlp_fc(ln_2(res2))))       (--no-mlp blocks: res3 = res2)
// w(name) is the block's tensor "h.{l}.name", gates its NH head gates ξ or null, N = B·T rows.
template <typename F>
struct RefBlock {  // what the forward keeps for the backward, zero-initialised for N rows and P = B·NH·T·T
  std::vector<F> ln1;
  std::vector<F> ln1_mean;
  std::vector<F> ln1_rstd;
  std::vector<F> probs;
  std::vector<F> res2;
  std::vector<F> ln2;
  std::vector<F> ln2_mean;
  std::vector<F> ln2_rstd;
  std::vector<F> fc;
  std::vector<F> fc_gelu;
  std::vector<F> res3;
  RefBlock(int N, int C, int P)
      : ln1(N * C), ln1_mean(N), ln1_rstd(N), probs(P), res2(N * C), ln2(N * C), ln2_mean(N), ln2_rstd(N),
        fc(N * 4 * C), fc_gelu(N * 4 * C), res3(N * C) {}
};
struct RefBlockShape {
  AttentionMask mask;
  bool no_mlp;
  int B;
  int T;
  int C;
  int NH;
};

template <typename F, typename W>
void ref_block_forward(RefBlock<F>& a, const F* x, W w, const F* gates, const RefMixer& mixer, const RefBlockShape& s) {
  const int N = s.B * s.T;
  const int C = s.C;
  // res2 = x + mixer(ln_1(x)); probs = the weights the mixer reports
  ref_layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, w("ln_1.weight"), w("ln_1.bias"), N, C);
  mixer.forward(a.res2.data(), a.probs.data(), a.ln1.data(), w, RefMixerPass{s.mask, gates, s.B, s.T, C, s.NH});
  for (int i = 0; i < N * C; i++) a.res2[i] += x[i];
  if (s.no_mlp) {  // no MLP: res3 = res2
    a.res3 = a.res2;
    return;
  }
  // res3 = res2 + mlp_proj(gelu(mlp_fc(ln_2(res2))))
  ref_layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), w("ln_2.weight"),
                        w("ln_2.bias"), N, C);
  ref_linear_forward(a.fc.data(), a.ln2.data(), w("mlp.c_fc.weight"), w("mlp.c_fc.bias"), N, C, 4 * C);
  ref_gelu_forward(a.fc_gelu.data(), a.fc.data(), (size_t)N * 4 * C);
  ref_linear_forward(a.res3.data(), a.fc_gelu.data(), w("mlp.c_proj.weight"), w("mlp.c_proj.bias"), N, 4 * C, C);
  for (int i = 0; i < N * C; i++) a.res3[i] += a.res2[i];
}

// dx: ∂loss/∂res3 on entry, ∂loss/∂x on return. g(name) is the gradient of tensor "h.{l}.name" (added to);
// dgates += ∂loss/∂ξ when gates are given.
template <typename F, typename W, typename G>
void ref_block_backward(std::vector<F>& dx, G g, const RefBlock<F>& a, const F* x, W w, const F* gates, F* dgates,
                        const RefMixer& mixer, const RefBlockShape& s) {
  const int N = s.B * s.T;
  const int C = s.C;
  // res3 = res2 + mlp_proj(gelu(mlp_fc(ln_2(res2)))): d_res2 = dx + the MLP branch's gradient
  std::vector<F> d_res2 = dx;
  std::vector<F> d_fc_gelu(N * 4 * C, F(0));
  std::vector<F> d_fc(N * 4 * C, F(0));
  std::vector<F> d_ln2(N * C, F(0));
  if (!s.no_mlp) {
    ref_linear_backward(d_fc_gelu.data(), g("mlp.c_proj.weight"), g("mlp.c_proj.bias"), dx.data(), a.fc_gelu.data(),
                        w("mlp.c_proj.weight"), N, 4 * C, C);
    ref_gelu_backward(d_fc.data(), a.fc.data(), d_fc_gelu.data(), (size_t)N * 4 * C);
    ref_linear_backward(d_ln2.data(), g("mlp.c_fc.weight"), g("mlp.c_fc.bias"), d_fc.data(), a.ln2.data(),
                        w("mlp.c_fc.weight"), N, C, 4 * C);
    ref_layernorm_backward(d_res2.data(), g("ln_2.weight"), g("ln_2.bias"), d_ln2.data(), a.res2.data(),
                           w("ln_2.weight"), a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
  }
  // res2 = x + mixer(ln_1(x)): d_x = d_res2 + the mixer branch's gradient
  std::vector<F> d_x = d_res2;
  std::vector<F> d_ln1(N * C, F(0));
  mixer.backward(d_ln1.data(), g, dgates, d_res2.data(), a.ln1.data(), w, RefMixerPass{s.mask, gates, s.B, s.T, C, s.NH});
  ref_layernorm_backward(d_x.data(), g("ln_1.weight"), g("ln_1.bias"), d_ln1.data(), x, w("ln_1.weight"),
                         a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
  dx = d_x;
}

// ---- The whole model: the embedding, the blocks above, the final LayerNorm, the LM head tied to wte and the mean
// cross-entropy. Every option of the fast model: the attention scale (config.attn_scale), blocks without MLPs
// (config.no_mlp), head gates ξ (head_gates, L × NH, empty = off; their gradient goes to gate_grads) and one
// mask per layer.
template <typename F>
struct ReferenceGPT {
  static_assert(std::is_same<F, double>::value, "the textbook mixers compute in double");
  using Layer = RefBlock<F>;
  ModelConfig config;
  std::vector<AttentionMask> masks;  // one per layer
  std::vector<std::shared_ptr<const RefMixer>> mixers;  // one per layer, by its kind in config.mixer
  std::vector<TensorSpec> table;     // the arena layout
  std::vector<F> params;             // laid out exactly as gpt_tensor_table(config) says
  std::vector<F> head_gates;         // ξ, L × NH; empty = no gates (the plain model)
  std::vector<F> gate_grads;         // ∂loss/∂ξ, accumulated by backward when the gates are on
  // The last forward's inputs and activations.
  int B = 0;
  int T = 0;
  std::vector<int> inputs;
  std::vector<int> targets;
  std::vector<F> encoded;
  std::vector<F> lnf;
  std::vector<F> lnf_mean;
  std::vector<F> lnf_rstd;
  std::vector<F> logits;
  std::vector<F> probs;
  std::vector<F> losses;
  std::vector<Layer> layers;

  explicit ReferenceGPT(const ModelConfig& c, std::vector<AttentionMask> layer_masks = {})
      : config(c), masks(std::move(layer_masks)), table(gpt_tensor_table(c)), params(total_floats(table), F(0)) {
    if (masks.empty()) masks.assign(c.n_layer, AttentionMask{});
    for (const std::string& kind : split_layer_list(c.mixer, c.n_layer, "mixer list"))
      mixers.push_back(make_ref_mixer(kind, c));
  }

  // Where tensor `name` ("wte.weight", "h.0.mlp.c_fc.weight", ...) starts in an arena with this layout.
  size_t offset(const std::string& name) const {
    for (const TensorSpec& t : table)
      if (t.name == name) return t.offset;
    throw std::runtime_error("ReferenceGPT: no tensor named " + name);
  }
  const F* p(const std::string& name) const { return params.data() + offset(name); }
  const F* p(int l, const std::string& name) const { return p("h." + std::to_string(l) + "." + name); }
  const std::vector<F>& block_input(int l) const { return l == 0 ? encoded : layers[l - 1].res3; }
  RefBlockShape shape(int l) const { return {masks[l], config.no_mlp, B, T, config.n_embd, config.n_head}; }
  const F* gates(int l) const { return head_gates.empty() ? nullptr : &head_gates[l * config.n_head]; }

  // inputs, targets (B·T); targets may be empty (logits only) and may hold kNoTarget. Returns the mean loss.
  F forward(const std::vector<int>& in, const std::vector<int>& tg, int B_, int T_) {
    B = B_;
    T = T_;
    inputs = in;
    targets = tg;
    const int N = B * T;
    const int C = config.n_embd;
    const int V = config.vocab_size;
    const int NH = config.n_head;
    if ((int)inputs.size() != N || (!targets.empty() && (int)targets.size() != N))
      throw std::runtime_error("ReferenceGPT::forward: inputs and targets must hold B·T ids");
    encoded.assign(N * C, F(0));
    const F* wpe = config.positions == "learned" ? p("wpe.weight") : nullptr;
    ref_embedding_forward(encoded.data(), inputs.data(), p("wte.weight"), wpe, B, T, C);
    layers.assign(config.n_layer, Layer(N, C, B * NH * T * T));
    for (int l = 0; l < config.n_layer; l++)
      ref_block_forward(layers[l], block_input(l).data(), [&](const std::string& n) { return p(l, n); }, gates(l),
                        *mixers[l], shape(l));
    lnf.assign(N * C, F(0));
    lnf_mean.assign(N, F(0));
    lnf_rstd.assign(N, F(0));
    logits.assign(N * V, F(0));
    ref_layernorm_forward(lnf.data(), lnf_mean.data(), lnf_rstd.data(), block_input(config.n_layer).data(),
                          p("ln_f.weight"), p("ln_f.bias"), N, C);
    ref_lm_head_forward(logits.data(), lnf.data(), p("wte.weight"), N, C, V);
    if (targets.empty()) return F(0);
    probs.assign(N * V, F(0));
    losses.assign(N, F(0));
    return ref_cross_entropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
  }

  // Accumulates the gradient of the last forward's mean loss into grads (same layout as params), and into
  // gate_grads when the head gates are on.
  void backward(std::vector<F>& grads) {
    if (targets.empty()) throw std::runtime_error("ReferenceGPT::backward: the last forward had no targets");
    if (grads.size() != params.size()) throw std::runtime_error("ReferenceGPT::backward: grads has the wrong size");
    const int N = B * T;
    const int C = config.n_embd;
    const int V = config.vocab_size;
    const int NH = config.n_head;
    if (!head_gates.empty() && gate_grads.size() != head_gates.size()) gate_grads.assign(head_gates.size(), F(0));
    auto g = [&](const std::string& name) {
      return grads.data() + offset(name);
    };
    int count = 0;
    for (int y : targets) count += y != kNoTarget;
    std::vector<F> dlogits(N * V, F(0));
    std::vector<F> dlnf(N * C, F(0));
    std::vector<F> dx(N * C, F(0));  // ∂loss/∂(residual stream)
    ref_cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), count, N, V);
    ref_lm_head_backward(dlnf.data(), g("wte.weight"), dlogits.data(), lnf.data(), p("wte.weight"), N, C, V);
    ref_layernorm_backward(dx.data(), g("ln_f.weight"), g("ln_f.bias"), dlnf.data(), block_input(config.n_layer).data(),
                           p("ln_f.weight"), lnf_mean.data(), lnf_rstd.data(), N, C);
    for (int l = config.n_layer - 1; l >= 0; l--)
      ref_block_backward(
          dx, [&](const std::string& n) { return g("h." + std::to_string(l) + "." + n); }, layers[l],
          block_input(l).data(), [&](const std::string& n) { return p(l, n); }, gates(l),
          head_gates.empty() ? nullptr : &gate_grads[l * NH], *mixers[l], shape(l));
    F* dwpe = config.positions == "learned" ? g("wpe.weight") : nullptr;
    ref_embedding_backward(g("wte.weight"), dwpe, dx.data(), inputs.data(), B, T, C);
  }
};
