// The Gated DeltaNet mixer (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks", arXiv 2412.06464; the linear
// layer of Qwen3-Next and Kimi Linear): Mamba-2's gate (forget everything a little) and the delta rule (overwrite
// one association exactly) in one recurrence. It reads u = the block's ln_1 output (B, T, C) and writes (B, T, C).
//
// Shape legend: B batch, T time, R = B·T rows, C = n_embd, H = n_head heads of N = C/H channels, K = deltanet_conv
// (the short convolution's width). σ the logistic function, silu(z) = z·σ(z), softplus(z) = log(1 + eᶻ). Every
// vector is a row and every weight is stored [in, out]: products are u·W. Tensors of a layer (the model names them
// h.{l}.deltanet.*), in the checkpoint's order:
//   q.weight, k.weight, v.weight, g.weight, o.weight [C, C]     (W_q, W_k, W_v, W_g, W_o; no biases)
//   conv_q, conv_k, conv_v [C, K]                               depthwise, no bias
//   beta.weight, alpha.weight [C, H]                            (W_β, W_α)
//   A_log, dt_bias [H]        norm.weight [N] (shared by the heads)
// Forward, for each sequence u_0 … u_{T−1}:
//   1. q̂ = u·W_q    k̂ = u·W_k    v̂ = u·W_v
//   2. causal depthwise convolution over time, per channel c, zero before the sequence:
//        q̃_t[c] = Σ_{j=0}^{K−1} conv_q[c, j]·q̂_{t−K+1+j}[c]        (conv_q[c, K−1] multiplies the current position)
//      and k̃, ṽ the same with conv_k, conv_v
//   3. q = silu(q̃), k = silu(k̃), v = silu(ṽ); q and k L2-normalised within each head, the norm clamped below at
//      1e-6 (x ← x / max(‖x_head‖, 1e-6)); then q ← q / √N
//   4. β_t = s·σ(u_t·W_β)  per head, s = 1, or 2 with deltanet_negative_eigenvalues on
//      α_t = exp(−exp(A_log)·softplus(u_t·W_α + dt_bias))  per head, in (0, 1)
//   5. per head, the state S (N × N: rows = value channels, columns = key channels), S_{−1} = 0:
//        S_t = α_t·S_{t−1}·(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ          y_t = S_t q_t
//      Read as a delta rule: P_t = S_{t−1} k_t is what the state recalls for the key k_t (a unit vector); the
//      update decays the state by α_t, then replaces a β_t share of the (decayed) recall by v_t:
//        S_t = α_t S_{t−1} + w_t k_tᵀ,      w_t = β_t (v_t − α_t P_t)
//      which is the form the code computes (O(N²) per step, never the N × N matrix I − β k kᵀ). The transition's
//      eigenvalue along k_t is α_t(1 − β_t): ≥ 0 by default, down to −α_t with the negative-eigenvalue setting.
//      flash-linear-attention's naive_recurrent_gated_delta_rule keeps h = Sᵀ: h ← α h; v′ = β(v − hᵀk); h ← h + k v′ᵀ.
//   6. a per-head RMS norm: n_t = y_t / √(mean over the head's N channels of y_t² + 1e-5) ⊙ norm.weight
//   7. out_t = (n_t ⊙ silu(u_t·W_g))·W_o
// Unrolling step 5 gives the attention form (textbook/deltanet.h computes it so, docs/deltanet.md derives it):
//   y_t = Σ_{s≤t} M[t, s] v_s,
//   M[t, s] = β_s (∏_{i=s+1}^{t} α_i) k_sᵀ (I − β_{s+1}k_{s+1}k_{s+1}ᵀ) ⋯ (I − β_t k_t k_tᵀ) q_t    (per head)
//
// Backward (gradients per src/ops/README.md: parameter gradients +=, du written). From the output back: W_o through
// linear_backward; the gate: with a = silu(u·W_g), d(u·W_g) = doin ⊙ n ⊙ silu′, dn = doin ⊙ a; the RMS norm, with
// ŷ = y·r, r = 1/√(mean(y²) + ε): dnorm.weight += Σ dn ⊙ ŷ, dŷ = dn ⊙ norm.weight, dy = r·(dŷ − ŷ·(ŷ·dŷ)/N).
// Then the recurrence's reverse pass. With G_t = dS_t the total gradient of the loss with respect to S_t,
//   G_t = dy_t q_tᵀ + α_{t+1} G_{t+1} (I − β_{t+1} k_{t+1} k_{t+1}ᵀ)           (G_T = 0)
//   dq_t = S_tᵀ dy_t
//   and through S_t = α_t S_{t−1} + w_t k_tᵀ, w_t = β_t (v_t − α_t P_t), P_t = S_{t−1} k_t, with g_t = G_t k_t:
//   dv_t = β_t g_t                                    dβ_t = g_t·(v_t − α_t P_t)
//   dα_t = ⟨G_t, S_{t−1}⟩ − β_t g_t·P_t                (the Frobenius product, Σ_ij G[i, j]·S_{t−1}[i, j])
//   dk_t = G_tᵀ w_t − α_t β_t S_{t−1}ᵀ g_t
//   and G_{t−1}'s part from S_t: α_t (G_t − β_t g_t k_tᵀ) = α_t G_t (I − β_t k_t k_tᵀ)
// every term O(N²) per step, each row i of G and S_{t−1} visited once. The reverse pass needs S_{t−1} and S_t at
// every t. The forward stores S only at the start of every chunk of kDeltaNetChunk = 16 positions (and S_{T−1}
// after the last); the backward, chunk by chunk from the last, recomputes the chunk's states from its stored start
// (one more pass through the recurrence in all, O(T·N²) per head) and runs the reverse pass through them.
// Memory: (⌈T/16⌉ + 1) states of N² floats per (sequence, head) kept from the forward — C·N·(⌈T/16⌉ + 1) per
// sequence, against T·C·N to keep them all — and 17 states and G per (sequence, head) of backward scratch, each
// (sequence, head) pair its own, so no two threads share any.
// Then the pieces before the recurrence, each derivative written at its code: α = exp(−e^{A_log}·softplus(z)),
// z = u·W_α + dt_bias:  dz = −dα·α·e^{A_log}·σ(z),  dA_log += −dα·α·e^{A_log}·softplus(z),  ddt_bias += dz;
// β = s·σ(b):  db = dβ·β·(1 − β/s);  the L2 norms (x = x₀/n): dx₀ = (dx − x(x·dx))/n, or dx/n where n is the clamp;
// silu′(z) = σ(z)(1 + z(1 − σ(z))); the convolution:
//   dq̂_s[c] = Σ_j conv_q[c, j]·dq̃_{s+K−1−j}[c] (terms past the sequence are 0),  dconv_q[c, j] += Σ_t dq̃_t[c]·q̂_{t−K+1+j}[c]
// and the six input products through linear_backward, their du summed.
// Cost: O(T·C·(6C + 2H)) for the products and O(T·C·N) for the recurrence, linear in T. Training never forms a T×T
// matrix; deltanet_implied_attention forms M for the lab, on request.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/tensor_slot.h"

class Rng;

constexpr float kDeltaNetNormEps = 1e-5f;  // the output RMS norm's ε
constexpr float kDeltaNetL2Eps = 1e-6f;    // q and k are divided by max(‖x_head‖, this)
constexpr int kDeltaNetChunk = 16;         // positions between the states the forward keeps for the backward

// The deltanet kind's own model settings (model/mixers/deltanet.cpp gives their rows; the checkpoint's metadata
// stores them under these names). ints, so that the settings table binds them.
struct DeltaNetSettings {
  int deltanet_conv = 4;                  // K, the short convolution's width, [1, 64]
  int deltanet_negative_eigenvalues = 0;  // 1: β ∈ (0, 2), the transition's eigenvalue along k in (−1, 1)
};

// The sizes of one DeltaNet layer. Build it with make(), which checks the settings.
struct DeltaNetDims {
  int C = 0, H = 0, N = 0, K = 0;
  bool negative = false;  // β = 2σ(·) (deltanet_negative_eigenvalues 1)
  // Throws std::runtime_error naming the setting and its flag: deltanet_conv (--deltanet-conv) in [1, 64],
  // deltanet_negative_eigenvalues (--deltanet-negative-eigenvalues) 0 or 1, n_embd divisible by n_head.
  static DeltaNetDims make(int n_embd, int n_head, int conv, int negative);
  static DeltaNetDims make(int n_embd, int n_head, const DeltaNetSettings& s) {
    return make(n_embd, n_head, s.deltanet_conv, s.deltanet_negative_eigenvalues);
  }
  int chunks(int T) const { return (T + kDeltaNetChunk - 1) / kDeltaNetChunk; }
  float beta_scale() const { return negative ? 2.0f : 1.0f; }  // s in β = s·σ(u·W_β)
};

// Inline, so that the textbook (textbook/deltanet.h) builds without the fast op.
inline DeltaNetDims DeltaNetDims::make(int n_embd, int n_head, int conv, int negative) {
  if (n_embd < 1 || n_head < 1) throw std::runtime_error("deltanet needs n_embd ≥ 1 and n_head ≥ 1");
  if (conv < 1 || conv > 64)
    throw std::runtime_error("deltanet_conv (--deltanet-conv) must be between 1 and 64, got " + std::to_string(conv));
  if (negative != 0 && negative != 1)
    throw std::runtime_error("deltanet_negative_eigenvalues (--deltanet-negative-eigenvalues) must be 0 (β in (0, 1)) "
                             "or 1 (β in (0, 2)), got " + std::to_string(negative));
  if (n_embd % n_head != 0)
    throw std::runtime_error("deltanet: n_embd " + std::to_string(n_embd) + " is not divisible by n_head " +
                             std::to_string(n_head));
  DeltaNetDims d;
  d.C = n_embd;
  d.H = n_head;
  d.N = n_embd / n_head;
  d.K = conv;
  d.negative = negative == 1;
  return d;
}

// A layer's tensors, one pointer each, in the order of the checkpoint's table (deltanet_tensor_slots).
// DeltaNetWeights reads them, DeltaNetGrads writes them; the textbook uses DeltaNetTensors<const double*>.
template <typename Ptr>
struct DeltaNetTensors {
  Ptr Wq = nullptr, Wk = nullptr, Wv = nullptr, Wg = nullptr, Wo = nullptr;  // [C, C]
  Ptr conv_q = nullptr, conv_k = nullptr, conv_v = nullptr;                  // [C, K]
  Ptr Wbeta = nullptr, Walpha = nullptr;                                     // [C, H]
  Ptr A_log = nullptr, dt_bias = nullptr;                                    // [H]
  Ptr norm_w = nullptr;                                                      // [N]
};
using DeltaNetWeights = DeltaNetTensors<const float*>;
using DeltaNetGrads = DeltaNetTensors<float*>;

// ---- Initialisation, flash-linear-attention's GatedDeltaNet layer adapted to [in, out] (docs/deltanet.md):
//   q, k, v, g, beta, alpha weights  N(0, 0.02)                 (Init::Normal)
//   o.weight                         N(0, 0.02/√(2·n_layer))    (Init::ResidualNormal: it adds into the stream)
//   conv_q, conv_k, conv_v           U(−1/√K, 1/√K)             (PyTorch's default for a depthwise Conv1d, fan-in K)
//   A_log                            log of U(0, 16], drawn as 16·(1 − u), u ∈ [0, 1): fla draws U(0, 16), whose 0
//                                    would give A_log = −∞; this never does. exp(A_log) ∈ (0, 16]
//   dt_bias                          softplus(dt_bias) log-uniform in [1e-3, 1e-1] as Mamba-2's (and fla's, whose
//                                    floor 1e-4 never binds): dt_bias = Δ₀ + log(1 − e^{−Δ₀}), softplus's inverse
//   norm.weight                      1
// At init α = exp(−e^{A_log}·softplus(dt_bias)) ∈ [e^{−1.6}, 1) ≈ [0.2, 1): slow and fast heads.
void deltanet_init_conv(float* p, size_t n, int K, Rng& rng);
void deltanet_init_A_log(float* p, size_t n, Rng& rng);
void deltanet_init_dt_bias(float* p, size_t n, Rng& rng);

// The layer's tensor table (base/tensor_slot.h), in the checkpoint's order: the name after "h.{l}." (e.g.
// "deltanet.q.weight"), the shape, the initialisation above, the optimizer's treatment, and the member of
// DeltaNetTensors that holds it. The five C × C projections are the model's linear weights: decayed by AdamW and
// orthogonalised by Muon. The rest — the convolutions, W_β and W_α (C × H, one column per head: gates, not linear
// maps of the stream), A_log, dt_bias and norm.weight — are AdamW's without decay, as fla marks A_log and dt_bias
// _no_weight_decay; decaying A_log or dt_bias would pull every head's forgetting rate toward one value.
template <typename Ptr>
std::vector<TensorSlot<DeltaNetTensors, Ptr>> deltanet_tensor_slots(const DeltaNetDims& d) {
  using D = DeltaNetTensors<Ptr>;
  const int64_t C = d.C;
  const int64_t H = d.H;
  const int64_t N = d.N;
  const int64_t K = d.K;
  std::vector<TensorSlot<DeltaNetTensors, Ptr>> rows;
  auto row = [&rows](const char* name, std::vector<int64_t> shape, Init init, bool linear, Ptr D::*member,
                     std::function<void(float*, size_t, Rng&)> init_fn = nullptr) {
    rows.push_back({{name, std::move(shape), init, linear, linear, std::move(init_fn)}, member});
  };
  auto conv = [K = d.K](float* p, size_t n, Rng& rng) { deltanet_init_conv(p, n, K, rng); };
  //  name                     shape    init                  linear member
  row("deltanet.q.weight",     {C, C},  Init::Normal,         true,  &D::Wq);
  row("deltanet.k.weight",     {C, C},  Init::Normal,         true,  &D::Wk);
  row("deltanet.v.weight",     {C, C},  Init::Normal,         true,  &D::Wv);
  row("deltanet.g.weight",     {C, C},  Init::Normal,         true,  &D::Wg);
  row("deltanet.o.weight",     {C, C},  Init::ResidualNormal, true,  &D::Wo);
  row("deltanet.conv_q",       {C, K},  Init::Custom,         false, &D::conv_q, conv);
  row("deltanet.conv_k",       {C, K},  Init::Custom,         false, &D::conv_k, conv);
  row("deltanet.conv_v",       {C, K},  Init::Custom,         false, &D::conv_v, conv);
  row("deltanet.beta.weight",  {C, H},  Init::Normal,         false, &D::Wbeta);
  row("deltanet.alpha.weight", {C, H},  Init::Normal,         false, &D::Walpha);
  row("deltanet.A_log",        {H},     Init::Custom,         false, &D::A_log, deltanet_init_A_log);
  row("deltanet.dt_bias",      {H},     Init::Custom,         false, &D::dt_bias, deltanet_init_dt_bias);
  row("deltanet.norm.weight",  {N},     Init::Ones,           false, &D::norm_w);
  return rows;
}

// ---- What the forward keeps for the backward (and the lab and the decoder): one float arena.
//   qh, kh, vh  (R, C)  u·W_q, u·W_k, u·W_v: the convolutions' inputs
//   qc, kc, vc  (R, C)  the convolutions' outputs q̃, k̃, ṽ
//   q, k, v     (R, C)  step 3's: q normalised and scaled by 1/√N, k normalised, v = silu(ṽ)
//   qn, kn      (R, H)  max(‖silu(q̃)_head‖, 1e-6), the same for k
//   beta        (R, H)  β
//   az, alpha   (R, H)  z = u·W_α + dt_bias and α
//   y           (R, C)  S_t q_t, before the norm;   rstd (R, H) the RMS norm's 1/√(mean(y²) + ε)
//   gl          (R, C)  u·W_g;   oin (R, C) n ⊙ silu(u·W_g), W_o's input
//   state (B, H, ⌈T/16⌉ + 1, N, N)  S before each chunk, then S_{T−1}
// Per position 12C + 6H floats (C = 128, H = 4: 1560, against attention's 4C + NH = 516) plus the states,
// B·H·(⌈T/16⌉ + 1)·N² (C = 128, H = 4, T = 64: 5·4·32² = 20480 per sequence, 320 per position).
struct DeltaNetActivations {
  float *qh, *kh, *vh, *qc, *kc, *vc, *q, *k, *v, *qn, *kn, *beta, *az, *alpha, *y, *rstd, *gl, *oin, *state;
  int T = 0;  // the T the arena was carved for (the states' chunk count)
};
// Carve once for the largest (B, T) a run uses; a backward must be called with the forward's B and T.
size_t deltanet_activation_floats(const DeltaNetDims& d, int B, int T);
DeltaNetActivations deltanet_activations(float* memory, const DeltaNetDims& d, int B, int T);
// The state S_{T−1} of sequence b, head h after a forward (N × N, rows value channels).
inline float* deltanet_final_state(const DeltaNetActivations& a, const DeltaNetDims& d, int b, int h) {
  const size_t per = ((size_t)d.chunks(a.T) + 1) * d.N * d.N;
  return a.state + ((size_t)b * d.H + h) * per + (size_t)d.chunks(a.T) * d.N * d.N;
}

// The backward's working memory: 9·R·C + 2·R·H + B·H·(kDeltaNetChunk + 2)·N² floats.
size_t deltanet_scratch_floats(const DeltaNetDims& d, int B, int T);

// ---- The layer.
void deltanet_forward(float* out,                     // (B, T, C) written
                      const DeltaNetActivations& a,   // filled
                      const float* u,                 // (B, T, C)
                      const DeltaNetWeights& w, const DeltaNetDims& d, int B, int T);

void deltanet_backward(float* du,                     // (B, T, C) written
                       const DeltaNetGrads& g,        // += every tensor
                       const float* dout,             // (B, T, C)
                       const float* u,                // (B, T, C) the forward's input
                       const DeltaNetActivations& a,  // from the forward
                       const DeltaNetWeights& w, const DeltaNetDims& d, int B, int T,
                       float* scratch);               // deltanet_scratch_floats(d, B, T)

// ---- The recurrence alone, step 5 (q, k, v (R, C) with head h's channels at h·N; beta, alpha (R, H)): y written;
// `state` (B, H, ⌈T/16⌉ + 1, N, N) receives the chunk starts and S_{T−1}. Threads over (batch, head).
void deltanet_recurrence_forward(float* y, float* state, const float* q, const float* k, const float* v,
                                 const float* beta, const float* alpha, const DeltaNetDims& d, int B, int T);
// The reverse pass derived above: dq, dk, dv (R, C) and dbeta, dalpha (R, H) written from dy.
// scratch: B·H·(kDeltaNetChunk + 2)·N².
void deltanet_recurrence_backward(float* dq, float* dk, float* dv, float* dbeta, float* dalpha, const float* dy,
                                  const float* state, const float* q, const float* k, const float* v,
                                  const float* beta, const float* alpha, const DeltaNetDims& d, int B, int T,
                                  float* scratch);

// ---- Decoding, O(1) per token whatever the context: the last K − 1 inputs of each convolution and S per head.
//   conv_q, conv_k, conv_v  (K−1, C) each, row K−2 the newest (q̂_{t−1}), zeros before the sequence
//   S                       (H, N, N)
// deltanet_state_floats = 3·(K−1)·C + H·N² per layer. A zeroed state is the start of a sequence.
size_t deltanet_state_floats(const DeltaNetDims& d);
// The state after a forward of sequence b (the last K − 1 rows of q̂, k̂, v̂ and every head's S_{T−1}), as
// deltanet_step keeps it.
void deltanet_state_from_forward(float* state, const DeltaNetActivations& a, const DeltaNetDims& d, int b);
// One token: out (C) written, the state advanced by one position; the same float arithmetic as deltanet_forward's
// row for the convolution, the normalisations and the recurrence (the projections are matrix-vector products
// here). scratch: deltanet_step_scratch_floats(d).
size_t deltanet_step_scratch_floats(const DeltaNetDims& d);
void deltanet_step(float* out, float* state, const float* u, const DeltaNetWeights& w, const DeltaNetDims& d,
                   float* scratch);

// ---- For the lab: M (B, H, T, T) written from a forward's activations, M[t, s] as above for s ≤ t and exactly 0
// above the diagonal, so that y_t = Σ_s M[t, s] v_s before the norm. Signed, not normalised. O(T²·N) per head:
// never for training.
void deltanet_implied_attention(float* M, const DeltaNetActivations& a, const DeltaNetDims& d, int B, int T);
