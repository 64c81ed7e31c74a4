// The RWKV-7 mixer (Peng et al. 2025, "Goose"): a recurrence whose state erases before it writes, where attention
// stands in the block,
//   x ← x + rwkv(ln_1(x))          (the block's MLP stays the GELU MLP, not RWKV's channel mix)
// The math, its backward (a reverse pass through states recomputed chunk by chunk), the one-token step, the implied
// attention M and the tensor table are in ops/rwkv.h; this file plugs them into the recurrent family of the mixer
// seam (recurrent.h: causal only, no head gates, the residual add, the state reset). Sizes: C = n_embd, H = n_head
// heads of N = C/H, D = rwkv_lora. docs/rwkv.md.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/mixers/recurrent.h"
#include "model/mixers/registry.h"
#include "ops/rwkv.h"

namespace {

// Head h at position t of sequence 0 in the last forward, step by step (model/head_steps.h): r, k̃, v, the decay,
// κ and the rate as the forward saved them, then the recurrence carried in double from S_{−1} = 0 to S_t, the
// read, the GroupNorm, the bonus and the gate.
HeadSteps rwkv_head_steps(const RwkvActivations& a, const RwkvWeights& w, const RwkvDims& d, int t, int h) {
  const int C = d.C, N = d.N;
  const double e = d.erase ? 1.0 : 0.0;
  auto head = [&](const float* rows, int s) {  // head h's N channels of a (T, C) activation at position s
    const float* row = rows + (size_t)s * C + (size_t)h * N;
    return std::vector<double>(row, row + N);
  };
  std::vector<double> S((size_t)N * N, 0.0);  // rows value channels, columns key channels
  std::vector<double> recall(N);
  auto advance = [&](int s) {  // S_s = S_{s−1}(diag(d_s) − e·κ_s(a_s⊙κ_s)ᵀ) + v_s k̃_sᵀ; recall = S_{s−1}κ_s
    const std::vector<double> dec = head(a.dec, s);
    const std::vector<double> kap = head(a.kap, s);
    const std::vector<double> rate = head(a.a, s);
    const std::vector<double> v = head(a.v, s);
    const std::vector<double> kt = head(a.kt, s);
    for (int i = 0; i < N; i++) {
      recall[i] = 0;
      for (int j = 0; j < N; j++) recall[i] += S[(size_t)i * N + j] * kap[j];
      for (int j = 0; j < N; j++) {
        double& x = S[(size_t)i * N + j];
        x = x * dec[j] - e * recall[i] * rate[j] * kap[j] + v[i] * kt[j];
      }
    }
  };
  for (int s = 0; s < t; s++) advance(s);
  const double before = frobenius_norm(S);
  advance(t);
  const std::vector<double> r = head(a.r, t);
  const std::vector<double> kt = head(a.kt, t);
  const std::vector<double> v = head(a.v, t);
  const std::vector<double> g = head(a.g, t);
  std::vector<double> y(N, 0.0);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) y[i] += S[(size_t)i * N + j] * r[j];
  double mean = 0;
  for (double x : y) mean += x / N;
  double var = 0;
  for (double x : y) var += (x - mean) * (x - mean) / N;
  const double rstd = 1 / std::sqrt(var + kRwkvNormEps);
  double bonus = 0;
  for (int j = 0; j < N; j++) bonus += r[j] * kt[j] * w.r_k[(size_t)h * N + j];
  std::vector<double> normed(N), out(N);
  for (int i = 0; i < N; i++) {
    const size_t c = (size_t)h * N + i;
    normed[i] = (y[i] - mean) * rstd * w.ln_w[c] + w.ln_b[c];
    out[i] = (normed[i] + bonus * v[i]) * g[i];
  }
  const std::string textbook = "src/textbook/rwkv.h";
  const std::string erase = d.erase ? "S_{t−1}·κ_t: what the state recalls along the erase key κ_t; a share a_t of it "
                                      "is removed from each key channel"
                                    : "off (rwkv_erase 0): the state only decays and adds; S_{t−1}·κ_t is shown, unused";
  HeadSteps steps;
  steps.steps = {
      {"r, k̃, v", "the token shift, then r_t = x^r·W_r, k̃_t the write key (k_t ⊙ (1 + (a_t − 1) ⊙ k_a)), v_t = x^v·W_v",
       "ref_rwkv_inputs", textbook, {{"r", r}, {"k̃", kt}, {"v", v}}},
      {"decay", "d_t = exp(−e^{−1/2}·σ(w0 + tanh(x^w·W1)·W2)), per key channel", "ref_rwkv_inputs", textbook,
       {{"d", head(a.dec, t)}}},
      {"erase", erase, "ref_rwkv_A", textbook,
       {{"κ", head(a.kap, t)}, {"a", head(a.a, t)}, {"‖S_{t−1}‖", {before}}, {"S_{t−1}·κ", recall}}},
      {"state", "S_t = S_{t−1}·(diag(d_t) − κ_t(a_t ⊙ κ_t)ᵀ) + v_t·k̃_tᵀ", "ref_rwkv_recurrence", textbook,
       {{"‖S_t‖", {frobenius_norm(S)}}}},
      {"read", "y_t = S_t·r_t", "ref_rwkv_recurrence", textbook, {{"y", y}}},
      {"group norm", "(y_t − mean) / √(var + 64e-5) ⊙ ln_x.weight + ln_x.bias, over the head's N channels",
       "ref_rwkv_forward", textbook, {{"normed", normed}}},
      {"bonus and gate", "(normed + β·v_t) ⊙ g_t, β = Σ_j r_t,j·k̃_t,j·r_k,j (the current token's own term)",
       "ref_rwkv_forward", textbook, {{"β", {bonus}}, {"g", g}, {"out", out}}},
  };
  steps.output = out;
  return steps;
}

class Rwkv final : public RecurrentMixer {
 public:
  explicit Rwkv(const ModelConfig& c)
      : RecurrentMixer(c.n_embd),
        d_(RwkvDims::make(c.n_embd, c.n_head, c.mixer_settings.get<RwkvSettings>())),
        slots_([d = d_](auto ptr) { return rwkv_tensor_slots<decltype(ptr)>(d); }) {}
  const char* kind() const override { return "rwkv"; }
  // Names, shapes, order, initialisation and optimizer groups: ops/rwkv.h's table (the checkpoint's contract).
  std::vector<TensorDecl> tensors() const override { return slots_.tensors(); }

  // ---- training: the op's activations are the layer's saved slice, its backward scratch the shared one
  size_t saved_floats(int B, int T, bool) const override { return rwkv_activation_floats(d_, B, T); }
  size_t scratch_floats(int B, int T, bool) const override { return rwkv_scratch_floats(d_, B, T); }
  void mix(float* out, const float* u, const MixerPass& x) const override {
    rwkv_forward(out, rwkv_activations(x.saved, d_, x.B, x.T), u, slots_.weights(x.p), d_, x.B, x.T);
  }
  void backward(float* du, MixerParams& g, float*, const float* dout, const float* u, const MixerPass& x) const override {
    rwkv_backward(du, slots_.grads(g), dout, u, rwkv_activations(x.saved, d_, x.B, x.T), slots_.weights(x.p), d_,
                  x.B, x.T, x.scratch);
  }

  // ---- the lab: M (B, H, T, T) with y_t = Σ_s M[t, s] v_s before the GroupNorm. Signed, not normalised.
  void implied_weights(float* A, const MixerPass& x) const override {
    rwkv_implied_attention(A, rwkv_activations(x.saved, d_, x.B, x.T), d_, x.B, x.T);
  }
  const char* weights_description() const override {
    return "RWKV-7 layers show the attention their recurrence implies: the state S_t = S_{t-1}·A_t + v_t·k̃_tᵀ, with "
           "A_t = diag(d_t) − κ_t(a_t⊙κ_t)ᵀ, unrolled gives y_t = Σ_{s≤t} M[t,s]·v_s with "
           "M[t,s] = k̃_s·(A_{s+1}⋯A_t·r_t) (before the layer's GroupNorm and bonus). Each A decays the state per "
           "channel and erases what it recalls along the key κ at the rate a, so M can be negative where a later "
           "write overwrote an earlier one, and its rows do not sum to 1. Each rwkv head is coloured by its own "
           "largest |M|: blue positive, red negative (docs/rwkv.md).";
  }

  // What each head adds (model/head_shares.h): z ⊙ g (B, T, C), each head's N channels side by side, enters W_o (no bias).
  HeadShares head_shares(const MixerPass& x) const override {
    return {rwkv_activations(x.saved, d_, x.B, x.T).oin, d_.C, slots_.weights(x.p).Wo, nullptr};
  }

  HeadSteps head_steps(const MixerPass& x, int position, int head) const override {
    return rwkv_head_steps(rwkv_activations(x.saved, d_, x.B, x.T), slots_.weights(x.p), d_, position, head);
  }

  // ---- decoding: u_{t−1} and S (H × N × N), whatever the context length: O(1) per token.
  size_t fixed_state_floats() const override { return rwkv_state_floats(d_); }
  size_t step_scratch_floats() const override { return rwkv_step_scratch_floats(d_); }
  void mix_step(float* out, float* state, const float* u, const MixerParams& p, float* scratch) const override {
    rwkv_step(out, state, u, slots_.weights(p), d_, scratch);
  }
  void state_from_forward(float* state, const MixerPass& x, float*) const override {
    rwkv_state_from_forward(state, rwkv_activations(x.saved, d_, 1, x.T), d_, 0);
  }

 private:
  const RwkvDims d_;
  const MixerSlots<RwkvTensors> slots_;
};

}  // namespace

const MixerKind& rwkv_kind() {
  // clang-format off
  static const MixerKind kind = {
    "rwkv", "RWKV-7: a recurrence whose state erases before it writes (the delta rule), O(T), causal only (docs/rwkv.md)",
    [](const ModelConfig& c) -> std::unique_ptr<Mixer> { return std::make_unique<Rwkv>(c); },
    {
      {"rwkv_lora", "rwkv-lora", "rwkv layers: width D of the decay, rate and gate LoRAs",
       MIXER_SETTING_FIELD(RwkvSettings, rwkv_lora), between(1, 4096, false, false), Scope::Run},
      {"rwkv_erase", "rwkv-erase", "rwkv layers: 1 = erase before write (the delta rule), 0 = decay and add only",
       MIXER_SETTING_FIELD(RwkvSettings, rwkv_erase), between(0, 1, false, false), Scope::Run},
    },
    [](const ModelConfig& c) {
      const RwkvSettings& s = c.mixer_settings.get<RwkvSettings>();
      return "lora " + std::to_string(s.rwkv_lora) + (s.rwkv_erase ? "" : ", erase off");
    },
  };
  // clang-format on
  return kind;
}
