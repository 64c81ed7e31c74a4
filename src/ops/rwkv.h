// The RWKV-7 time mix ("Goose", Peng et al. 2025): a recurrent mixer whose state ERASES before it writes — the
// generalized delta rule. It reads u = the block's ln_1 output (B, T, C) and writes (B, T, C).
//
// Sizes: C = n_embd, H = n_head heads of N = C/H channels, D = the LoRA width (rwkv_lora). σ the logistic function.
// All vectors are rows and every weight is stored [in, out]: products are u·W. Tensors of a layer (the model names
// them h.{l}.rwkv.*):
//   mix [6, C]                      rows μ_r, μ_w, μ_k, μ_v, μ_a, μ_g
//   receptance.weight, key.weight, value.weight, output.weight [C, C]  (W_r, W_k, W_v, W_o; no biases)
//   w0, a0 [C]    w1, a1, g1 [C, D]    w2, a2, g2 [D, C]    k_k, k_a, r_k [C]    ln_x.weight, ln_x.bias [C]
// Forward, for each sequence u_0 … u_{T−1}:
//   1. shift:  x*_t = u_t + μ_* ⊙ (u_{t−1} − u_t)   for * in r, w, k, v, a, g;   u_{−1} = 0
//   2. r_t = x^r_t·W_r    k_t = x^k_t·W_k    v_t = x^v_t·W_v
//   3. decay:  d_t = exp(−e^{−1/2}·σ(w0 + tanh(x^w_t·W1)·W2))      ∈ (e^{−e^{−1/2}}, 1) = (0.545, 1) per channel
//      rate:   a_t = σ(a0 + (x^a_t·A1)·A2)                          ∈ (0, 1): how much of the old value to erase
//      gate:   g_t = σ(x^g_t·G1)·G2
//   4. κ_t = k_t ⊙ k_k, L2-normalised within each head: κ ← κ / max(‖κ_head‖, 1e-12)   (the erase direction)
//      k̃_t = k_t ⊙ (1 + (a_t − 1) ⊙ k_a)                                              (the write key)
//   5. per head, the state S (N × N: rows = value channels, columns = key channels), S_{−1} = 0:
//        S_t = S_{t−1}·A_t + v_t k̃_tᵀ,      A_t = diag(d_t) − κ_t (a_t ⊙ κ_t)ᵀ          (column vectors)
//        y_t = S_t r_t
//      Read as a delta rule: S_{t−1}κ_t is what the state recalls for the key κ_t; the update removes that recall
//      at rate a_t (per key channel), decays every column by d_t, then writes v_t at k̃_t.
//   6. GroupNorm per head: ŷ = (y − mean_head(y)) / √(var_head(y) + ε), ε = 64e-5 (variance over N, not N − 1);
//      n_t = ŷ ⊙ ln_x.weight + ln_x.bias
//   7. bonus:  z_t = n_t + β_t v_t,   β_{t,h} = Σ_{j in head h} r_{t,j} k̃_{t,j} r_k,j  (a scalar per head)
//   8. out_t = (z_t ⊙ g_t)·W_o
// Unrolling step 5 gives the attention form (textbook/rwkv.h computes it so, docs/rwkv.md derives it):
//   y_t = Σ_{s≤t} M[t, s] v_s,     M[t, s] = k̃_sᵀ · A_{s+1} ⋯ A_t · r_t     (per head; the empty product is I)
// This is RWKV-LM's RWKV-7 time mix (RWKV-v7/rwkv_v7_numpy.py) without its value residual v_first (docs/rwkv.md).
//
// Backward (gradients per src/ops/README.md: parameter gradients +=, du written). From the output back: W_o through
// linear_backward; the gate dg = d(z⊙g)⊙z, dz = d(z⊙g)⊙g; the bonus; the GroupNorm (below); then the recurrence,
// whose reverse pass is, with dS_t the total gradient of the loss with respect to S_t,
//   dS_t = dy_t r_tᵀ + dS_{t+1} A_{t+1}ᵀ          (dS_T = 0)
//   dr_t = S_tᵀ dy_t     dv_t = dS_t k̃_t     dk̃_t = dS_tᵀ v_t
//   and through A_t, with b_t = a_t ⊙ κ_t and dA_t = S_{t−1}ᵀ dS_t (never formed, N³):
//   dd_t[j] = Σ_i S_{t−1}[i, j]·dS_t[i, j]       (the diagonal of dA_t)
//   dκ_t = −S_{t−1}ᵀ (dS_t b_t)                  db_t = −dS_tᵀ (S_{t−1} κ_t)
//   and b_t = a_t ⊙ κ_t:  da_t = db_t ⊙ κ_t,  dκ_t += db_t ⊙ a_t.
//   dS_{t−1}'s part from A_t is dS_t A_tᵀ = dS_t diag(d_t) − (dS_t b_t) κ_tᵀ: every term O(N²) per step.
// The reverse pass needs S_{t−1} at every t. The forward stores S only at the start of every chunk of
// kRwkvChunk = 16 positions (and S_{T−1} after the last); the backward, chunk by chunk from the last, recomputes the
// chunk's states from its stored start (one more forward through the recurrence in all, O(T·N²) per head) and then
// runs the reverse pass through them. Memory: ⌈T/16⌉ + 1 states of N² floats per (sequence, head) kept from the
// forward — C·N·(⌈T/16⌉ + 1) per sequence, against T·C·N to keep them all — and 17 states and
// dS per (sequence, head) of backward scratch.
// Then the elementwise pieces (each derivative written at its code) and the LoRAs and projections through
// linear_backward; the token shift's gradient reaches u_t from x*_t (weight 1 − μ_*) and from x*_{t+1} (weight μ_*).
// Cost: O(T·C·(4C + 6D)) for the products and O(T·C·N) for the recurrence, linear in T. Training never forms a T×T
// matrix; rwkv_implied_attention forms M for the lab, on request.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/tensor_slot.h"

class Rng;

constexpr float kRwkvNormEps = 64e-5f;    // the GroupNorm's ε, RWKV-7's
constexpr float kRwkvKappaEps = 1e-12f;   // κ's normalisation divides by max(‖κ‖, this)
constexpr int kRwkvChunk = 16;            // positions between the states the forward keeps for the backward
constexpr double kRwkvDecayScale = 0.60653065971263342;  // e^{−1/2}: d = exp(−e^{−1/2}·σ(·))

// The RWKV kind's own model setting (model/mixers/rwkv.cpp gives its row; the checkpoint's metadata stores it
// under this name). D = 32: RWKV-LM's width for the decay and rate LoRAs of a language model,
// max(32, round(2.5·√C / 32)·32), is 32 at every C up to 256 (its gate's formula, 5·√C, would give 64 at C = 128;
// one width serves all three here). docs/rwkv.md.
struct RwkvSettings {
  int rwkv_lora = 32;
  // 1: the delta rule's erase (A_t as above); 0: the erase term left out, A_t = diag(d_t): a state that only decays
  // and adds, with everything else (a in k̃ too) as before. An ablation (docs/rwkv.md, make recall-rwkv).
  int rwkv_erase = 1;
};

// The sizes of one RWKV-7 layer. Build it with make(), which checks the settings.
struct RwkvDims {
  int C = 0, H = 0, N = 0, D = 0;
  bool erase = true;  // false: A_t = diag(d_t) (rwkv_erase 0)
  // Throws std::runtime_error naming the setting: rwkv_lora (--rwkv-lora) in [1, 4096], rwkv_erase (--rwkv-erase)
  // 0 or 1, n_embd divisible by n_head.
  static RwkvDims make(int n_embd, int n_head, int lora, int erase = 1);
  static RwkvDims make(int n_embd, int n_head, const RwkvSettings& s) {
    return make(n_embd, n_head, s.rwkv_lora, s.rwkv_erase);
  }
  int chunks(int T) const { return (T + kRwkvChunk - 1) / kRwkvChunk; }
};

// Inline, so that the textbook (textbook/rwkv.h) builds without the fast op.
inline RwkvDims RwkvDims::make(int n_embd, int n_head, int lora, int erase) {
  if (n_embd < 1 || n_head < 1) throw std::runtime_error("rwkv needs n_embd ≥ 1 and n_head ≥ 1");
  if (lora < 1 || lora > 4096)
    throw std::runtime_error("rwkv_lora (--rwkv-lora) must be between 1 and 4096, got " + std::to_string(lora));
  if (erase != 0 && erase != 1)
    throw std::runtime_error("rwkv_erase (--rwkv-erase) must be 1 (the delta rule's erase) or 0 (decay and add "
                             "only), got " + std::to_string(erase));
  if (n_embd % n_head != 0)
    throw std::runtime_error("rwkv: n_embd " + std::to_string(n_embd) + " is not divisible by n_head " +
                             std::to_string(n_head));
  RwkvDims d;
  d.C = n_embd, d.H = n_head, d.N = n_embd / n_head, d.D = lora, d.erase = erase == 1;
  return d;
}

// A layer's tensors, one pointer each, in the order of the checkpoint's table (rwkv_tensor_shapes). RwkvWeights
// reads them, RwkvGrads writes them; the textbook uses RwkvTensors<const double*>.
template <typename Ptr>
struct RwkvTensors {
  Ptr mix = nullptr;                                    // [6, C]
  Ptr Wr = nullptr, Wk = nullptr, Wv = nullptr, Wo = nullptr;  // [C, C]
  Ptr w0 = nullptr, w1 = nullptr, w2 = nullptr;         // [C], [C, D], [D, C]
  Ptr a0 = nullptr, a1 = nullptr, a2 = nullptr;         // [C], [C, D], [D, C]
  Ptr g1 = nullptr, g2 = nullptr;                       // [C, D], [D, C]
  Ptr k_k = nullptr, k_a = nullptr, r_k = nullptr;      // [C]
  Ptr ln_w = nullptr, ln_b = nullptr;                   // [C]
};
using RwkvWeights = RwkvTensors<const float*>;
using RwkvGrads = RwkvTensors<float*>;

// ---- Initialisation as RWKV-LM's rwkv7_train_simplified.py, adapted to [in, out] (docs/rwkv.md). `layer` of
// `n_layer` sets the depth-dependent parts; `name` is one of the slots' names. W_r, W_v ~ U(±0.5/√C),
// W_k ~ U(±0.05/√C), W_o = 0; w1, a1, g1 = 0; w2, a2, g2 orthogonal rows × 0.1; mix, w0, a0, k_k, k_a, r_k as
// RWKV-LM's formulas; ln_x weight 1, bias 0.
void rwkv_init_tensor(const std::string& name, float* p, size_t n, const RwkvDims& d, int layer, int n_layer, Rng& rng);

// The layer's tensor table (base/tensor_slot.h), in the checkpoint's order: the name after "h.{l}." (e.g.
// "rwkv.key.weight"), the shape, the initialisation (rwkv_init_tensor below, every row), the optimizer's treatment,
// and the member of RwkvTensors that holds it. The four C × C projections are the model's linear weights: decayed
// by AdamW and orthogonalised by Muon, as RWKV-LM decays its ".weight" tensors. Everything else (the mixes, the
// LoRAs, the biases w0 and a0, k_k, k_a, r_k, ln_x) is AdamW without decay, as RWKV-LM's optimizer groups have
// them; the LoRAs are not Muon's: they are rank-D factors whose 0.1-scaled init an orthogonalised update (every
// singular value 1) would swamp. Every row starts as RWKV-LM's rwkv7_train_simplified.py starts it, with its depth
// schedule at layer 0 for every layer: a kind is built from the model's settings alone and does not know its depth
// (docs/rwkv.md).
template <typename Ptr>
std::vector<TensorSlot<RwkvTensors, Ptr>> rwkv_tensor_slots(const RwkvDims& d) {
  using R = RwkvTensors<Ptr>;
  const int64_t C = d.C;
  const int64_t D = d.D;
  auto row = [&d](const char* name, std::vector<int64_t> shape, bool projection, Ptr R::*member) {
    auto init = [d, name = std::string(name)](float* p, size_t n, Rng& rng) { rwkv_init_tensor(name, p, n, d, 0, 1, rng); };
    return TensorSlot<RwkvTensors, Ptr>{{name, std::move(shape), Init::Custom, projection, projection, init}, member};
  };
  //            name                       shape    projection  member
  return {row("rwkv.mix",               {6, C},  false, &R::mix),
          row("rwkv.receptance.weight", {C, C},  true,  &R::Wr),
          row("rwkv.key.weight",        {C, C},  true,  &R::Wk),
          row("rwkv.value.weight",      {C, C},  true,  &R::Wv),
          row("rwkv.output.weight",     {C, C},  true,  &R::Wo),
          row("rwkv.w0",                {C},     false, &R::w0),
          row("rwkv.w1",                {C, D},  false, &R::w1),
          row("rwkv.w2",                {D, C},  false, &R::w2),
          row("rwkv.a0",                {C},     false, &R::a0),
          row("rwkv.a1",                {C, D},  false, &R::a1),
          row("rwkv.a2",                {D, C},  false, &R::a2),
          row("rwkv.g1",                {C, D},  false, &R::g1),
          row("rwkv.g2",                {D, C},  false, &R::g2),
          row("rwkv.k_k",               {C},     false, &R::k_k),
          row("rwkv.k_a",               {C},     false, &R::k_a),
          row("rwkv.r_k",               {C},     false, &R::r_k),
          row("rwkv.ln_x.weight",       {C},     false, &R::ln_w),
          row("rwkv.ln_x.bias",         {C},     false, &R::ln_b)};
}

// ---- What the forward keeps for the backward (and the lab and the decoder): one float arena.
//   xs    (6, B·T, C)  the shifted inputs x^r | x^w | x^k | x^v | x^a | x^g, each a (B·T, C) block
//   r, k, v (B·T, C)   the projections
//   wh, ah, gh (B·T, D)  tanh(x^w·W1), x^a·A1, σ(x^g·G1)
//   sw    (B·T, C)     σ(w0 + wh·W2);   dec (B·T, C) the decay d = exp(−e^{−1/2}·sw)
//   a, g  (B·T, C)     the rate and the gate
//   kap   (B·T, C)     κ, normalised;   knorm (B·T, H) max(‖k ⊙ k_k‖, 1e-12) per head
//   kt    (B·T, C)     k̃
//   y     (B·T, C)     S_t r_t, before the norm;  mean, rstd (B·T, H) the GroupNorm's
//   oin   (B·T, C)     z ⊙ g, W_o's input
//   state (B, H, ⌈T/16⌉ + 1, N, N)  S before each chunk, then S_{T−1}
//   last_u (B, C)      u_{T−1} of each sequence (with S_{T−1}, the decoder's state after the forward)
// Per position 17C + 3D + 3H floats (C = 128, D = 16, H = 4: 2236, against attention's 4C + NH = 516) plus the
// states, B·H·(⌈T/16⌉ + 1)·N² (C = 128, H = 4, T = 64: 5·4·32² = 20480 per sequence, 320 per position).
struct RwkvActivations {
  float *xs, *r, *k, *v, *wh, *ah, *gh, *sw, *dec, *a, *g, *kap, *knorm, *kt, *y, *mean, *rstd, *oin, *state, *last_u;
  int T = 0;  // the T the arena was carved for (the states' chunk count)
};
// Carve once for the largest (B, T) a run uses; a backward must be called with the forward's B and T.
size_t rwkv_activation_floats(const RwkvDims& d, int B, int T);
RwkvActivations rwkv_activations(float* memory, const RwkvDims& d, int B, int T);
// The state S_{T−1} of sequence b, head h after a forward (N × N, rows value channels).
inline float* rwkv_final_state(const RwkvActivations& a, const RwkvDims& d, int b, int h) {
  const size_t per = ((size_t)d.chunks(a.T) + 1) * d.N * d.N;
  return a.state + ((size_t)b * d.H + h) * per + (size_t)d.chunks(a.T) * d.N * d.N;
}

// The backward's working memory: B·T·(16C + 3D) + B·H·(kRwkvChunk + 2)·N² floats.
size_t rwkv_scratch_floats(const RwkvDims& d, int B, int T);

// ---- The layer.
void rwkv_forward(float* out,                 // (B, T, C) written
                  const RwkvActivations& a,   // filled
                  const float* u,             // (B, T, C)
                  const RwkvWeights& w, const RwkvDims& d, int B, int T);

void rwkv_backward(float* du,                 // (B, T, C) written
                   const RwkvGrads& g,        // += every tensor
                   const float* dout,         // (B, T, C)
                   const float* u,            // (B, T, C) the forward's input
                   const RwkvActivations& a,  // from the forward
                   const RwkvWeights& w, const RwkvDims& d, int B, int T,
                   float* scratch);           // rwkv_scratch_floats(d, B, T)

// ---- The recurrence alone, step 5 (all (B, T, C) rows, head h's channels at h·N): y written; `state`
// (B, H, ⌈T/16⌉ + 1, N, N) receives the chunk starts and S_{T−1}. Threads over (batch, head).
void rwkv_recurrence_forward(float* y, float* state, const float* r, const float* kt, const float* v, const float* dec,
                             const float* kap, const float* a, const RwkvDims& d, int B, int T);
// The reverse pass derived above: dr, dkt, dv, ddec, dkap, da written from dy. scratch: B·H·(kRwkvChunk + 2)·N².
void rwkv_recurrence_backward(float* dr, float* dkt, float* dv, float* ddec, float* dkap, float* da, const float* dy,
                              const float* state, const float* r, const float* kt, const float* v, const float* dec,
                              const float* kap, const float* a, const RwkvDims& d, int B, int T, float* scratch);

// ---- Decoding, O(1) per token: u_{t−1} (C) and S for every head (H, N, N). rwkv_state_floats = C + H·N² per
// layer. A zeroed state is the start of a sequence.
size_t rwkv_state_floats(const RwkvDims& d);
// The state after a forward of sequence b (u_{T−1} and every head's S_{T−1}), as rwkv_step keeps it: what the
// decoder refills after its window slides, from one batched forward instead of T steps.
void rwkv_state_from_forward(float* state, const RwkvActivations& a, const RwkvDims& d, int b);
// One token: out (C) written, the state advanced by one position; the same float arithmetic as rwkv_forward's row
// for the recurrence (the projections are matrix-vector products here). scratch: rwkv_step_scratch_floats(d).
size_t rwkv_step_scratch_floats(const RwkvDims& d);
void rwkv_step(float* out, float* state, const float* u, const RwkvWeights& w, const RwkvDims& d, float* scratch);

// ---- For the lab: M (B, H, T, T) written from a forward's activations, M[t, s] = k̃_sᵀ A_{s+1} ⋯ A_t r_t for s ≤ t
// and exactly 0 above the diagonal, so that y_t = Σ_s M[t, s] v_s before the norm. Signed, not normalised.
// O(T²·N) per head: never for training.
void rwkv_implied_attention(float* M, const RwkvActivations& a, const RwkvDims& d, int B, int T);
