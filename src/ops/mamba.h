// The Mamba-2 mixer (Dao & Gu 2024, "Transformers are SSMs"): a selective state-space layer that can stand where
// attention stands in a block. It reads u = the block's ln_1 output (B, T, C) and writes (B, T, C).
//
// Sizes: C = n_embd, E = ssm_expand·C, H = n_head heads of P = E/H channels, N = ssm_state, K = ssm_conv.
// Tensors of a layer (stored [in, out] like every linear weight here; the model names them h.{l}.mamba.*):
//   in_proj.weight  [C, 2E + 2N + H]   columns z (E) | x (E) | B (N) | C (N) | dt (H), no bias
//   conv1d.weight   [E + 2N, K]        depthwise over xBC = [x | B | C];  conv1d.bias [E + 2N]
//   dt_bias [H], A_log [H], D [H], norm.weight [E]
//   out_proj.weight [E, C], no bias
// Forward, for each sequence u_1 … u_T:
//   1. [z_t, xBC_raw_t, dt_raw_t] = u_t · W_in
//   2. xBC_t = silu(conv_b + Σ_{k=0}^{K−1} conv_w[:, k] ⊙ xBC_raw_{t−(K−1)+k}),  xBC_raw_s = 0 for s < 1 (causal:
//      w[:, K−1] multiplies the current position);  xBC_t = [x_t (E) | B_t (N) | C_t (N)]
//   3. Δ_{t,h} = softplus(dt_raw_{t,h} + dt_bias_h),  a_h = −exp(A_log_h),  ā_{t,h} = exp(Δ_{t,h}·a_h) ∈ (0, 1)
//   4. per head, x_{t,h} its P channels, state S_{t,h} (P × N), S_0 = 0:
//        S_t = ā_t·S_{t−1} + Δ_t·x_{t,h} B_tᵀ        y_{t,h} = S_t C_t + D_h·x_{t,h}
//      (B_t and C_t are shared by every head: one "group", as in Mamba-2's default.)
//   5. g_t = y_t ⊙ silu(z_t)  (y_t: the heads side by side, E);   n_t = g_t / √(mean(g_t²) + ε) ⊙ norm_w, ε = 1e-5
//   6. out_t = n_t · W_out
// silu(v) = v·σ(v),  softplus(v) = log(1 + eᵛ) (= v for v > 20, where the two differ by < 2e-9).
// Unrolling step 4 gives the attention form (docs/mamba.md, and the textbook src/textbook/mamba.h computes it so):
//   y_{i,h} = Σ_{j≤i} M^h_ij x_{j,h} + D_h x_{i,h},     M^h_ij = (C_i·B_j) · exp(a_h·Σ_{k=j+1}^{i} Δ_{k,h}) · Δ_{j,h}
//
// Variants (decided by MambaDims):
//   selective = false (--ssm-selective 0, S4D-like): Δ_{t,h} = softplus(dt_bias_h) at every t, and B_t = B, C_t = C
//     are learned constant N-vectors (tensors h.{l}.mamba.B [N], h.{l}.mamba.C [N]). in_proj has only the z | x
//     columns (2E) and the conv runs over x alone (E channels). The scan is the same code with B, C, Δ not varying.
//   K = 0 (--ssm-conv 0): no conv and no conv tensors; xBC_t = silu(xBC_raw_t).
//   K = 1: a per-channel scale and bias, no mixing in time.
//
// Backward (gradients per src/ops/README.md: parameter gradients +=, the input gradient du written). From the
// output back: out_proj and in_proj through linear_backward; the gated norm, silu, softplus and the conv each have
// their own backward below, the derivative above it. The scan's backward is a reverse scan; with dS_t the total
// gradient of the loss with respect to S_t (everything after t reaches S_t through S_{t+1} = ā_{t+1}·S_t + …):
//   dS_t = ā_{t+1}·dS_{t+1} + dy_t C_tᵀ          (dS_{T+1} = 0; dy_t this head's P channels)
//   dC_t = S_tᵀ dy_t   (summed over heads)       dD_h = Σ_t dy_t·x_t
//   dx_t = Δ_t·dS_t B_t + D_h·dy_t               dB_t = Δ_t·dS_tᵀ x_t   (summed over heads)
//   Δ_t enters twice, through the write Δ_t·x_t B_tᵀ and through the decay ā_t = exp(Δ_t·a):
//     ∂L/∂Δ_t = w_t + a·dℓ_t,   w_t = x_tᵀ dS_t B_t,   dℓ_t = ∂L/∂(log ā_t) = ā_t·⟨dS_t, S_{t−1}⟩
//     ∂L/∂a   = Σ_t Δ_t·dℓ_t,   and a = −exp(A_log) so dA_log = a·∂L/∂a
//   dℓ_t needs S_{t−1}, which the reverse scan does not have. But ā_t·S_{t−1} = S_t − Δ_t x_t B_tᵀ, and expanding
//   ⟨dS_t, S_t⟩ with the recursion for dS_t gives ⟨dS_t, S_t⟩ = r_t + ⟨dS_{t+1}, S_{t+1}⟩ − Δ_{t+1}·w_{t+1}, so
//     dℓ_t = Σ_{i≥t} (r_i − Δ_i·w_i),      r_i = dy_i·(S_i C_i) = C_i·dC_i (this head's share of dC_i)
//   a reverse running sum. So the backward scans twice per (batch, head): forward again (rebuilding S_t, for dC_t
//   and r_t), then in reverse (dS_t, for everything else). Neither keeps S per position: the state is P·N floats
//   per (batch, head) for the whole sequence. Memory: the forward keeps no state beyond the activations listed in
//   MambaActivations (no T×T, no T·P·N); the price is one more forward scan in the backward, O(T·P·N) per head,
//   small beside the projections' O(T·C·E).
// Cost: O(T·E·N) for the scan and O(T·C·E) for the projections, linear in T. Training never forms a T×T matrix;
// mamba_hidden_attention forms M for the lab, on request.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/tensor_slot.h"

class Rng;

constexpr float kMambaNormEps = 1e-5f;
constexpr float kSoftplusThreshold = 20.0f;  // softplus(v) = v above it (log(1 + eᵛ) − v < 2.1e-9 there)

// The Mamba kind's own model settings (model/mixers/mamba.cpp gives their rows; the model keeps them in
// ModelConfig::mixer_settings). The checkpoint's metadata stores them under these names.
struct MambaSettings {
  int ssm_state = 16;     // N, the state's size per channel
  int ssm_expand = 2;     // E = ssm_expand·n_embd inner channels, n_head heads of E/n_head
  int ssm_conv = 4;       // K, the causal depthwise conv's width; 0 = no conv
  int ssm_selective = 1;  // 1: Δ_t, B_t, C_t depend on the input (Mamba); 0: constants (time-invariant, S4D-like)
};

// The sizes of one Mamba layer. Build it with make(), which checks the settings.
struct MambaDims {
  int C = 0, E = 0, H = 0, P = 0, N = 0, K = 0;
  bool selective = true;

  // Throws std::runtime_error naming the setting and its flag: ssm_expand (--ssm-expand) ≥ 1, ssm_state
  // (--ssm-state) ≥ 1, ssm_conv (--ssm-conv) ≥ 0, and E = ssm_expand·n_embd divisible by n_head.
  // Inline, so that the textbook (src/textbook/mamba.h) compiles without the fast op's object file.
  static MambaDims make(int n_embd, int n_head, int expand, int state, int conv, bool selective) {
    auto fail = [](const std::string& what) { throw std::runtime_error(what); };
    if (n_embd < 1 || n_head < 1) fail("mamba needs n_embd ≥ 1 and n_head ≥ 1");
    if (expand < 1) fail("ssm_expand (--ssm-expand) must be at least 1, got " + std::to_string(expand));
    if (state < 1) fail("ssm_state (--ssm-state) must be at least 1, got " + std::to_string(state));
    if (conv < 0) fail("ssm_conv (--ssm-conv) must be 0 (no conv) or more, got " + std::to_string(conv));
    if ((long long)expand * n_embd > (1 << 24))
      fail("ssm_expand (--ssm-expand) " + std::to_string(expand) + " is too large");
    const int E = expand * n_embd;
    if (E % n_head != 0)
      fail("ssm_expand (--ssm-expand) " + std::to_string(expand) + " times n_embd " + std::to_string(n_embd) + " = " +
           std::to_string(E) + " is not divisible by n_head " + std::to_string(n_head));
    MambaDims d;
    d.C = n_embd, d.E = E, d.H = n_head, d.P = E / n_head, d.N = state, d.K = conv, d.selective = selective;
    return d;
  }
  static MambaDims make(int n_embd, int n_head, const MambaSettings& s) {
    return make(n_embd, n_head, s.ssm_expand, s.ssm_state, s.ssm_conv, s.ssm_selective != 0);
  }

  int conv_channels() const { return selective ? E + 2 * N : E; }  // X: the channels of xBC (also when K = 0)
  int in_cols() const { return E + conv_channels() + (selective ? H : 0); }  // 2E + 2N + H, or 2E
  int xbc_offset() const { return E; }                   // in_proj columns: z at 0, xBC at E, dt at E + X
  int dt_offset() const { return E + conv_channels(); }
  bool has_conv() const { return K > 0; }
};

// A layer's tensors, one pointer each; a tensor the variant does not have is null (conv_w, conv_b when K = 0;
// B_const, C_const when selective). MambaWeights reads them, MambaParams and MambaGrads write them; the textbook
// uses MambaTensors<const double*>.
template <typename Ptr>
struct MambaTensors {
  Ptr in_proj_w = nullptr;   // [C, in_cols]
  Ptr conv_w = nullptr;      // [X, K]
  Ptr conv_b = nullptr;      // [X]
  Ptr dt_bias = nullptr;     // [H]
  Ptr A_log = nullptr;       // [H]
  Ptr D = nullptr;           // [H]
  Ptr norm_w = nullptr;      // [E]
  Ptr out_proj_w = nullptr;  // [E, C]
  Ptr B_const = nullptr;     // [N]  non-selective only
  Ptr C_const = nullptr;     // [N]  non-selective only
};
using MambaWeights = MambaTensors<const float*>;
using MambaParams = MambaTensors<float*>;
using MambaGrads = MambaTensors<float*>;
inline MambaWeights as_weights(const MambaParams& p) {
  return {p.in_proj_w, p.conv_w, p.conv_b, p.dt_bias, p.A_log, p.D, p.norm_w, p.out_proj_w, p.B_const, p.C_const};
}

// ---- Initialisation as Mamba-2, one function per tensor, each filling its n floats: the mixer
// (model/mixers/mamba.cpp) hands each to its tensor's row. in_proj and out_proj are the model's linear weights;
// D and norm.weight start at 1. N(0, σ) names the standard deviation σ, as everywhere in the model (mixer.h).
// softplus(dt_bias) log-uniform in [1e-3, 1e-1]: dt_bias = Δ₀ + log(1 − e^{−Δ₀}), the inverse of softplus.
void mamba_init_dt_bias(float* dt_bias, size_t n, Rng& rng);
// A_log = log U[1, 16], so the decay rate −a = exp(A_log) ∈ [1, 16).
void mamba_init_A_log(float* A_log, size_t n, Rng& rng);
// PyTorch's default for a depthwise Conv1d of width K (fan-in K), for its weight and its bias: U(−1/√K, 1/√K).
void mamba_init_conv(float* p, size_t n, int K, Rng& rng);
// The non-selective variant's constant B or C (N floats): N(0, N^{−1/4}), so that C·B = Σ_n C_n·B_n has variance
// N·(N^{−1/2})² = 1, the order of the skip term D·x.
void mamba_init_state_const(float* p, size_t N, Rng& rng);

// The layer's tensor table (base/tensor_slot.h), in the checkpoint's order: the name after "h.{l}.", the shape
// [in, out], the initialisation, the optimizer's treatment and the member of MambaTensors. in_proj.weight,
// conv1d.weight, conv1d.bias (K > 0), dt_bias, A_log, D, B, C (non-selective), norm.weight, out_proj.weight.
// in_proj and out_proj are the model's linear weights (N(0, 0.02), out_proj scaled as a residual projection;
// decayed by AdamW, orthogonalised by Muon); the rest start as Mamba-2 starts them and are AdamW's without decay.
template <typename Ptr>
std::vector<TensorSlot<MambaTensors, Ptr>> mamba_tensor_slots(const MambaDims& d) {
  using M = MambaTensors<Ptr>;
  const int64_t C = d.C;
  const int64_t E = d.E;
  const int64_t H = d.H;
  const int64_t N = d.N;
  const int64_t X = d.conv_channels();
  std::vector<TensorSlot<MambaTensors, Ptr>> rows;
  auto row = [&rows](const char* name, std::vector<int64_t> shape, Init init, bool linear, Ptr M::*member,
                     std::function<void(float*, size_t, Rng&)> init_fn = nullptr) {
    rows.push_back({{name, std::move(shape), init, linear, linear, std::move(init_fn)}, member});
  };
  auto conv = [K = d.K](float* p, size_t n, Rng& rng) { mamba_init_conv(p, n, K, rng); };
  //  name                     shape             init                  linear member
  row("mamba.in_proj.weight",  {C, d.in_cols()}, Init::Normal,         true,  &M::in_proj_w);
  if (d.has_conv()) {
    row("mamba.conv1d.weight", {X, d.K},         Init::Custom,         false, &M::conv_w, conv);
    row("mamba.conv1d.bias",   {X},              Init::Custom,         false, &M::conv_b, conv);
  }
  row("mamba.dt_bias",         {H},              Init::Custom,         false, &M::dt_bias, mamba_init_dt_bias);
  row("mamba.A_log",           {H},              Init::Custom,         false, &M::A_log, mamba_init_A_log);
  row("mamba.D",               {H},              Init::Ones,           false, &M::D);
  if (!d.selective) {
    row("mamba.B",             {N},              Init::Custom,         false, &M::B_const, mamba_init_state_const);
    row("mamba.C",             {N},              Init::Custom,         false, &M::C_const, mamba_init_state_const);
  }
  row("mamba.norm.weight",     {E},              Init::Ones,           false, &M::norm_w);
  row("mamba.out_proj.weight", {E, C},           Init::ResidualNormal, true,  &M::out_proj_w);
  return rows;
}

// ---- What the forward keeps for the backward (and for the lab): one float arena carved by mamba_activations.
//   proj    (B,T,in_cols)  u·W_in: z | xBC_raw | dt_raw
//   xbc_pre (B,T,X)        the conv's output, before silu (= xBC_raw when K = 0)
//   xbc     (B,T,X)        silu(xbc_pre): x | B | C
//   dt      (B,T,H)        Δ
//   y       (B,T,E)        the scan's output, D·x included
//   g       (B,T,E)        y ⊙ silu(z)
//   rstd    (B,T)          1/√(mean(g²) + ε)
//   n       (B,T,E)        the norm's output, out_proj's input
//   state   (B,H,N,P)      the scan's working state; after the forward, S_T of every (batch, head), transposed:
//                          [n][p] holds S[p, n]
// Per position in_cols + 2X + H + 3E + 1 floats (C = 128, E = 256, N = 16, H = 4: 1897, against attention's
// 4C + NH = 516 for qkv, lse and its output), plus the state, B·E·N.
struct MambaActivations {
  float *proj, *xbc_pre, *xbc, *dt, *y, *g, *rstd, *n, *state;
};
// Carve them once for the largest (B, T) a run uses: a forward on fewer rows uses the start of every block, and its
// backward must be called with the same B and T as the forward. The same holds for the scratch below.
size_t mamba_activation_floats(const MambaDims& d, int B, int T);
MambaActivations mamba_activations(float* memory, const MambaDims& d, int B, int T);  // memory: that many floats

// The backward's working memory, so that a step allocates nothing: B·T·(2E + in_cols + X + H) + 2·B·H·T·N +
// B·H·(P·N + N + 2) floats.
size_t mamba_scratch_floats(const MambaDims& d, int B, int T);

// ---- The layer.
void mamba_forward(float* out,                  // (B, T, C)  written
                   const MambaActivations& a,   // filled
                   const float* u,              // (B, T, C)
                   const MambaWeights& w, const MambaDims& d, int B, int T);

void mamba_backward(float* du,                  // (B, T, C)  written
                    const MambaGrads& g,        // +=, every tensor the variant has
                    const float* dout,          // (B, T, C)
                    const float* u,             // (B, T, C)  the forward's input
                    const MambaActivations& a,  // from the forward
                    const MambaWeights& w, const MambaDims& d, int B, int T,
                    float* scratch);            // mamba_scratch_floats(d, B, T)

// ---- Its parts, each forward above its backward. Row-major (rows, channels) with an explicit row stride where
// the part reads or writes columns of a wider tensor (in_proj's output).

// Causal depthwise conv over X channels of (B, T, ·) rows, input row stride `in_stride`:
//   out[t, c] = b[c] + Σ_{k=0}^{K−1} w[c, k]·inp[t − (K−1) + k, c]     (terms before the first position are 0)
// K = 0: out = inp (no conv; w and b unused).
// Backward: dinp[s, c] = Σ_k w[c, k]·dout[s + (K−1) − k, c] (terms past the last position are 0), written into
// dinp's columns (row stride in_stride);  dw[c, k] += Σ_t dout[t, c]·inp[t − (K−1) + k, c];  db[c] += Σ_t dout[t, c].
void mamba_conv_forward(float* out, const float* inp, int in_stride, const float* w, const float* b, int B, int T,
                        int X, int K);
void mamba_conv_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, int in_stride,
                         const float* w, int B, int T, int X, int K);

// silu(v) = v·σ(v);   silu'(v) = σ(v)·(1 + v·(1 − σ(v))).   n elements; dinp may be dout (in place).
void silu_forward(float* out, const float* inp, size_t n);
void silu_backward(float* dinp, const float* inp, const float* dout, size_t n);

// Δ[r, h] = softplus(dt_raw[r, h] + dt_bias[h]) over rows r < R, dt_raw's row stride `raw_stride`; with
// dt_raw = null (non-selective) Δ[r, h] = softplus(dt_bias[h]).
// softplus'(v) = σ(v) (= 1 above the threshold, where softplus is v).
// Backward: ddt_raw[r, h] = σ(v)·dΔ[r, h] written (skipped when null), ddt_bias[h] += Σ_r σ(v)·dΔ[r, h].
float softplus(float v);
void mamba_dt_forward(float* dt, const float* dt_raw, int raw_stride, const float* dt_bias, int R, int H);
void mamba_dt_backward(float* ddt_raw, float* ddt_bias, const float* ddt, const float* dt_raw, int raw_stride,
                       const float* dt_bias, int R, int H);

// The selective scan, step 4 above: y (B,T,E) written from xbc (B,T,X) (x, and B, C when selective), dt (B,T,H),
// w.A_log, w.D (and w.B_const, w.C_const when not selective). `state` (B,H,N,P) is its working memory and holds
// S_T afterwards. Threads over (batch, head).
void mamba_scan_forward(float* y, float* state, const float* xbc, const float* dt, const MambaWeights& w,
                        const MambaDims& d, int B, int T);
// The reverse scan derived above: dxbc (B,T,X) and ddt (B,T,H) written; g.A_log, g.D (and g.B_const, g.C_const
// when not selective) +=. scratch: mamba_scan_scratch_floats(d, B, T).
size_t mamba_scan_scratch_floats(const MambaDims& d, int B, int T);
void mamba_scan_backward(float* dxbc, float* ddt, const MambaGrads& g, const float* dy, const float* xbc,
                         const float* dt, const MambaWeights& w, const MambaDims& d, int B, int T, float* scratch);

// The gated RMS norm, step 5, over R rows of E channels; z read with row stride z_stride:
//   s = silu(z),  g = y ⊙ s,  r = 1/√(Σ g²/E + ε),  ĝ = g·r,  n = ĝ ⊙ w
// Backward: with dĝ = dn ⊙ w,  dg = r·(dĝ − ĝ·(dĝ·ĝ)/E)  (r depends on every g through the mean);
//   dy = dg ⊙ s (written),  dz = dg ⊙ y ⊙ silu'(z) (written, stride z_stride),  dw += Σ_rows dn ⊙ ĝ.
void gated_rmsnorm_forward(float* n, float* g, float* rstd, const float* y, const float* z, int z_stride,
                           const float* w, int R, int E);
void gated_rmsnorm_backward(float* dy, float* dz, float* dw, const float* dn, const float* y, const float* z,
                            int z_stride, const float* g, const float* rstd, const float* w, int R, int E);

// ---- Decoding, O(1) per token: the state of one sequence is the conv's last K − 1 inputs and S for every head.
//   conv (K−1, X): row K−2 is the newest input;   S (H, N, P), each head's S transposed as in the scan
// mamba_state_floats = H·P·N + (K−1)·X floats per layer (0 conv rows when K ≤ 1).
struct MambaState {
  float *conv, *S;
};
size_t mamba_state_floats(const MambaDims& d);
MambaState mamba_state(float* memory, const MambaDims& d);  // carves; call mamba_state_reset before the first step
void mamba_state_reset(const MambaState& s, const MambaDims& d);  // zeroes both: the start of a sequence

// One token: out (C) written, the state advanced by one position. After steps on u_1 … u_t from a reset state,
// out equals row t of mamba_forward on u_1 … u_T (the same float arithmetic for the scan; the projections are
// matrix-vector products here). scratch: mamba_step_scratch_floats(d).
size_t mamba_step_scratch_floats(const MambaDims& d);
void mamba_step(float* out, const MambaState& s, const float* u, const MambaWeights& w, const MambaDims& d,
                float* scratch);

// ---- For the lab: the hidden attention of a forward, M (B, H, T, T) written:
//   M^h_ij = (C_i·B_j)·exp(a_h·Σ_{k=j+1}^{i} Δ_{k,h})·Δ_{j,h} for j ≤ i, exactly 0 above the diagonal,
// so that y_{i,h} = Σ_j M^h_ij x_{j,h} + D_h x_{i,h} with x the conv's (silu'd) outputs. Not normalised (rows do
// not sum to 1) and signed. O(T²·N) per head: never for training.
void mamba_hidden_attention(float* M, const MambaActivations& a, const MambaWeights& w, const MambaDims& d, int B,
                            int T);
