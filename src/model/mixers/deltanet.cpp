// The Gated DeltaNet mixer (Yang, Kautz & Hatamizadeh 2024): Mamba-2's gate and the delta rule in one recurrence,
// where attention stands in the block,
//   x ← x + deltanet(ln_1(x))
// The math, its backward (a reverse pass through states recomputed chunk by chunk), the one-token step, the implied
// attention M and the tensor table are in ops/deltanet.h; this file plugs them into the recurrent family of the
// mixer seam (recurrent.h: causal only, no head gates, the residual add, the state reset). Sizes: C = n_embd,
// H = n_head heads of N = C/H, K = deltanet_conv. docs/deltanet.md.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/mixers/recurrent.h"
#include "model/mixers/registry.h"
#include "ops/deltanet.h"

namespace {

// Head h at position t of sequence 0 in the last forward, step by step (model/head_steps.h): q, k, v, α and β as
// the forward saved them, then the recurrence carried in double from S_{−1} = 0 to S_t, the read, the norm and
// the gate. The state's N × N numbers are shown by their norm.
HeadSteps deltanet_head_steps(const DeltaNetActivations& a, const DeltaNetWeights& w, const DeltaNetDims& d, int t,
                              int h) {
  const int C = d.C, H = d.H, N = d.N;
  auto head = [&](const float* rows, int s) {  // head h's N channels of a (T, C) activation at position s
    const float* row = rows + (size_t)s * C + (size_t)h * N;
    return std::vector<double>(row, row + N);
  };
  std::vector<double> S((size_t)N * N, 0.0);  // rows value channels, columns key channels
  std::vector<double> recall(N), write(N);
  auto advance = [&](int s) {  // S_s from S_{s−1}: recall = S_{s−1}k_s, write = β_s(v_s − α_s·recall)
    const std::vector<double> k = head(a.k, s);
    const std::vector<double> v = head(a.v, s);
    const double alpha = a.alpha[(size_t)s * H + h];
    const double beta = a.beta[(size_t)s * H + h];
    for (int i = 0; i < N; i++) {
      recall[i] = 0;
      for (int j = 0; j < N; j++) recall[i] += S[(size_t)i * N + j] * k[j];
      write[i] = beta * (v[i] - alpha * recall[i]);
    }
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) S[(size_t)i * N + j] = alpha * S[(size_t)i * N + j] + write[i] * k[j];
  };
  for (int s = 0; s < t; s++) advance(s);
  const double before = frobenius_norm(S);
  advance(t);
  const std::vector<double> q = head(a.q, t);
  std::vector<double> y(N, 0.0);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) y[i] += S[(size_t)i * N + j] * q[j];
  double mean_square = 0;
  for (double e : y) mean_square += e * e / N;
  const double r = 1 / std::sqrt(mean_square + kDeltaNetNormEps);
  std::vector<double> normed(N), gate(N), out(N);
  for (int i = 0; i < N; i++) {
    const double z = a.gl[(size_t)t * C + (size_t)h * N + i];
    normed[i] = y[i] * r * w.norm_w[i];
    gate[i] = z / (1 + std::exp(-z));
    out[i] = normed[i] * gate[i];
  }
  const double alpha = a.alpha[(size_t)t * H + h];
  const double beta = a.beta[(size_t)t * H + h];
  const std::string textbook = "src/textbook/deltanet.h";
  HeadSteps steps;
  steps.steps = {
      {"q, k, v", "the short causal convolutions of u·W_q, u·W_k, u·W_v, silu, q and k L2-normalised per head, q ÷ √N",
       "ref_deltanet_inputs", textbook, {{"q", q}, {"k", head(a.k, t)}, {"v", head(a.v, t)}}},
      {"decay", "α_t = exp(−exp(A_log)·softplus(u_t·W_α + dt_bias)): every association fades by α_t",
       "ref_deltanet_inputs", textbook, {{"α", {alpha}}}},
      {"recall", "S_{t−1}·k_t: what the state holds for the key k_t", "ref_deltanet_recurrence", textbook,
       {{"‖S_{t−1}‖", {before}}, {"S_{t−1}·k", recall}}},
      {"erase and write", "w_t = β_t(v_t − α_t·S_{t−1}k_t): a β_t share of the decayed recall replaced by v_t; the "
       "transition's eigenvalue along k_t is α_t(1 − β_t)", "ref_deltanet_recurrence", textbook,
       {{"β", {beta}}, {"α(1 − β)", {alpha * (1 - beta)}}, {"w", write}}},
      {"state", "S_t = α_t·S_{t−1} + w_t·k_tᵀ  (= α_t·S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ)",
       "ref_deltanet_recurrence", textbook, {{"‖S_t‖", {frobenius_norm(S)}}}},
      {"read", "y_t = S_t·q_t", "ref_deltanet_recurrence", textbook, {{"y", y}}},
      {"norm and gate", "y_t / √(mean(y_t²) + 1e-5) ⊙ norm.weight, times silu(u_t·W_g)", "ref_deltanet_forward",
       textbook, {{"normed", normed}, {"silu(u·W_g)", gate}, {"out", out}}},
  };
  steps.output = out;
  return steps;
}

class DeltaNet final : public RecurrentMixer {
 public:
  explicit DeltaNet(const ModelConfig& c)
      : RecurrentMixer(c.n_embd),
        d_(DeltaNetDims::make(c.n_embd, c.n_head, c.mixer_settings.get<DeltaNetSettings>())),
        slots_([d = d_](auto ptr) { return deltanet_tensor_slots<decltype(ptr)>(d); }) {}
  const char* kind() const override { return "deltanet"; }
  // Names, shapes, order, initialisation and optimizer groups: ops/deltanet.h's table (the checkpoint's contract).
  std::vector<TensorDecl> tensors() const override { return slots_.tensors(); }

  // ---- training: the op's activations are the layer's saved slice, its backward scratch the shared one
  size_t saved_floats(int B, int T, bool) const override { return deltanet_activation_floats(d_, B, T); }
  size_t scratch_floats(int B, int T, bool) const override { return deltanet_scratch_floats(d_, B, T); }
  void mix(float* out, const float* u, const MixerPass& x) const override {
    deltanet_forward(out, deltanet_activations(x.saved, d_, x.B, x.T), u, slots_.weights(x.p), d_, x.B, x.T);
  }
  void backward(float* du, MixerParams& g, float*, const float* dout, const float* u, const MixerPass& x) const override {
    deltanet_backward(du, slots_.grads(g), dout, u, deltanet_activations(x.saved, d_, x.B, x.T), slots_.weights(x.p),
                      d_, x.B, x.T, x.scratch);
  }

  // ---- the lab: M (B, H, T, T) with y_t = Σ_s M[t, s] v_s before the RMS norm. Signed, not normalised.
  void implied_weights(float* A, const MixerPass& x) const override {
    deltanet_implied_attention(A, deltanet_activations(x.saved, d_, x.B, x.T), d_, x.B, x.T);
  }
  const char* weights_description() const override {
    return "Gated DeltaNet layers show the attention their recurrence implies: the state "
           "S_t = α_t·S_{t-1}·(I − β_t·k_t·k_tᵀ) + β_t·v_t·k_tᵀ, unrolled, gives y_t = Σ_{s≤t} M[t,s]·v_s with "
           "M[t,s] = β_s·(α_{s+1}⋯α_t)·k_sᵀ·(I − β_{s+1}k_{s+1}k_{s+1}ᵀ)⋯(I − β_t k_t k_tᵀ)·q_t (before the layer's "
           "RMS norm and gate). α forgets everything a little; each (I − βkkᵀ) erases what the state holds along a "
           "later key before writing there, so M can be negative where a later write overwrote an earlier one, and "
           "its rows do not sum to 1. Each deltanet head is coloured by its own largest |M|: blue positive, red "
           "negative (docs/deltanet.md).";
  }

  // What each head adds (model/head_shares.h): n ⊙ silu(u·W_g) (B, T, C), each head's N channels side by side, enters W_o (no bias).
  HeadShares head_shares(const MixerPass& x) const override {
    return {deltanet_activations(x.saved, d_, x.B, x.T).oin, d_.C, slots_.weights(x.p).Wo, nullptr};
  }

  HeadSteps head_steps(const MixerPass& x, int position, int head) const override {
    return deltanet_head_steps(deltanet_activations(x.saved, d_, x.B, x.T), slots_.weights(x.p), d_, position, head);
  }

  // ---- decoding: the convolutions' last K − 1 inputs and S (H × N × N), whatever the context: O(1) per token.
  size_t fixed_state_floats() const override { return deltanet_state_floats(d_); }
  size_t step_scratch_floats() const override { return deltanet_step_scratch_floats(d_); }
  void mix_step(float* out, float* state, const float* u, const MixerParams& p, float* scratch) const override {
    deltanet_step(out, state, u, slots_.weights(p), d_, scratch);
  }
  void state_from_forward(float* state, const MixerPass& x, float*) const override {
    deltanet_state_from_forward(state, deltanet_activations(x.saved, d_, 1, x.T), d_, 0);
  }

 private:
  const DeltaNetDims d_;
  const MixerSlots<DeltaNetTensors> slots_;
};

}  // namespace

const MixerKind& deltanet_kind() {
  // clang-format off
  static const MixerKind kind = {
    "deltanet", "Gated DeltaNet: a gated delta-rule recurrence (Qwen3-Next's linear layer), O(T), causal only "
                "(docs/deltanet.md)",
    [](const ModelConfig& c) -> std::unique_ptr<Mixer> { return std::make_unique<DeltaNet>(c); },
    {
      {"deltanet_conv", "deltanet-conv", "deltanet layers: width K of the short causal convolution on q, k, v",
       MIXER_SETTING_FIELD(DeltaNetSettings, deltanet_conv), between(1, 64, false, false), Scope::Run},
      {"deltanet_negative_eigenvalues", "deltanet-negative-eigenvalues",
       "deltanet layers: 1 = β in (0, 2), the transition's eigenvalue along k in (−1, 1); 0 = β in (0, 1)",
       MIXER_SETTING_FIELD(DeltaNetSettings, deltanet_negative_eigenvalues), between(0, 1, false, false), Scope::Run},
    },
    [](const ModelConfig& c) {
      const DeltaNetSettings& s = c.mixer_settings.get<DeltaNetSettings>();
      return "conv " + std::to_string(s.deltanet_conv) + (s.deltanet_negative_eigenvalues ? ", β in (0, 2)" : "");
    },
  };
  // clang-format on
  return kind;
}
