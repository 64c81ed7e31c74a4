// The Mamba-2 mixer (Dao & Gu 2024): a selective state-space layer where attention stands in the block,
//   x ← x + mamba(ln_1(x))
// The math, its backward (a reverse scan), the one-token step, the hidden attention M and the tensor table are in
// ops/mamba.h; this file plugs them into the recurrent family of the mixer seam (recurrent.h: causal only, no head
// gates, the residual add, the state reset).
// Sizes from the model's settings: C = n_embd, E = ssm_expand·C, H = n_head heads of P = E/H channels,
// N = ssm_state, K = ssm_conv (0 = no conv); ssm_selective = 0 makes Δ, B and C constants (time-invariant).
// docs/mamba.md describes the layer, its settings and what the lab shows of it.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/mixers/recurrent.h"
#include "model/mixers/registry.h"
#include "ops/mamba.h"

namespace {

// Head h at position t of sequence 0 in the last forward, step by step (model/head_steps.h): x, B, C and Δ as the
// forward saved them, then the scan carried in double from S_0 = 0 to S_t, the read, the gate and the norm. The
// norm divides by the RMS of the whole row (every head's gated output), read from the forward's g.
HeadSteps mamba_head_steps(const MambaActivations& a, const MambaWeights& w, const MambaDims& d, int t, int h) {
  const int E = d.E, H = d.H, P = d.P, N = d.N, X = d.conv_channels(), IN = d.in_cols();
  auto x_at = [&](int s) {  // head h's P channels of x_s, after the conv and silu
    const float* row = a.xbc + (size_t)s * X + (size_t)h * P;
    return std::vector<double>(row, row + P);
  };
  auto B_at = [&](int s) {  // B_s (N), shared by the heads; a constant when not selective
    const float* b = d.selective ? a.xbc + (size_t)s * X + E : w.B_const;
    return std::vector<double>(b, b + N);
  };
  auto C_at = [&](int s) {
    const float* c = d.selective ? a.xbc + (size_t)s * X + E + N : w.C_const;
    return std::vector<double>(c, c + N);
  };
  const double A = -std::exp((double)w.A_log[h]);
  std::vector<double> S((size_t)P * N, 0.0);  // rows the head's channels, columns the state's
  auto advance = [&](int s) {  // S_s = ā_s·S_{s−1} + Δ_s·x_s B_sᵀ
    const double delta = a.dt[(size_t)s * H + h];
    const double decay = std::exp(delta * A);
    const std::vector<double> x = x_at(s);
    const std::vector<double> b = B_at(s);
    for (int i = 0; i < P; i++)
      for (int j = 0; j < N; j++) S[(size_t)i * N + j] = decay * S[(size_t)i * N + j] + delta * x[i] * b[j];
  };
  for (int s = 0; s < t; s++) advance(s);
  const double before = frobenius_norm(S);
  advance(t);
  const std::vector<double> x = x_at(t);
  const std::vector<double> c = C_at(t);
  std::vector<double> y(P, 0.0), gated(P), out(P);
  for (int i = 0; i < P; i++) {
    for (int j = 0; j < N; j++) y[i] += S[(size_t)i * N + j] * c[j];
    y[i] += (double)w.D[h] * x[i];
  }
  double mean_square = 0;
  for (int e = 0; e < E; e++) mean_square += (double)a.g[(size_t)t * E + e] * a.g[(size_t)t * E + e] / E;
  const double r = 1 / std::sqrt(mean_square + kMambaNormEps);
  for (int i = 0; i < P; i++) {
    const double z = a.proj[(size_t)t * IN + (size_t)h * P + i];
    gated[i] = y[i] * z / (1 + std::exp(-z));
    out[i] = gated[i] * r * w.norm_w[(size_t)h * P + i];
  }
  const double delta = a.dt[(size_t)t * H + h];
  const std::string textbook = "src/textbook/mamba.h";
  HeadSteps steps;
  steps.steps = {
      {"x, B, C", "x_t: the head's channels of the causal conv of u·W_in, silu; B_t and C_t (shared by the heads)",
       "ref_mamba_inputs", textbook, {{"x", x}, {"B", B_at(t)}, {"C", c}}},
      {"Δ and decay", "Δ_t = softplus(dt_raw + dt_bias), a = −exp(A_log), ā_t = exp(Δ_t·a): the state fades by ā_t",
       "ref_mamba_delta", textbook, {{"Δ", {delta}}, {"a", {A}}, {"ā", {std::exp(delta * A)}}}},
      {"state", "S_t = ā_t·S_{t−1} + Δ_t·x_t B_tᵀ: nothing erased, the new input written along B_t", "ref_mamba_scan",
       textbook, {{"‖S_{t−1}‖", {before}}, {"‖S_t‖", {frobenius_norm(S)}}}},
      {"read", "y_t = S_t·C_t + D·x_t", "ref_mamba_scan", textbook, {{"D", {(double)w.D[h]}}, {"y", y}}},
      {"gate and norm", "g = y_t ⊙ silu(z_t), divided by √(mean over the whole row's g² + 1e-5), ⊙ norm.weight",
       "ref_gated_rmsnorm", textbook, {{"g", gated}, {"1/rms", {r}}, {"out", out}}},
  };
  steps.output = out;
  return steps;
}

class Mamba final : public RecurrentMixer {
 public:
  explicit Mamba(const ModelConfig& c)
      : RecurrentMixer(c.n_embd),
        d_(MambaDims::make(c.n_embd, c.n_head, c.mixer_settings.get<MambaSettings>())),
        slots_([d = d_](auto ptr) { return mamba_tensor_slots<decltype(ptr)>(d); }) {}
  const char* kind() const override { return "mamba"; }
  // Names, shapes, order, initialisation and optimizer groups: ops/mamba.h's table (the checkpoint's contract).
  std::vector<TensorDecl> tensors() const override { return slots_.tensors(); }

  // ---- training: the op's activations (ops/mamba.h) are the layer's saved slice, its backward scratch the shared one
  size_t saved_floats(int B, int T, bool) const override { return mamba_activation_floats(d_, B, T); }
  size_t scratch_floats(int B, int T, bool) const override { return mamba_scratch_floats(d_, B, T); }
  void mix(float* out, const float* u, const MixerPass& x) const override {
    mamba_forward(out, mamba_activations(x.saved, d_, x.B, x.T), u, slots_.weights(x.p), d_, x.B, x.T);
  }
  void backward(float* du, MixerParams& grads, float*, const float* dout, const float* u,
                const MixerPass& x) const override {
    mamba_backward(du, slots_.grads(grads), dout, u, mamba_activations(x.saved, d_, x.B, x.T), slots_.weights(x.p),
                   d_, x.B, x.T, x.scratch);
  }

  // ---- the lab: M^h (B, H, T, T), the hidden attention over the conv's outputs: y_i = Σ_j M_ij x_j + D x_i. Signed
  // and not normalised.
  void implied_weights(float* A, const MixerPass& x) const override {
    mamba_hidden_attention(A, mamba_activations(x.saved, d_, x.B, x.T), slots_.weights(x.p), d_, x.B, x.T);
  }
  const char* weights_description() const override {
    return "Mamba layers show their hidden attention M: the state-space recurrence unrolled, "
           "y_i = Σ_{j≤i} M_ij x_j + D·x_i with M_ij = (C_i·B_j)·exp(a·(Δ_{j+1} + … + Δ_i))·Δ_j. It is not "
           "normalised (rows do not sum to 1) and can be negative; the x_j it weighs are the outputs of the layer's "
           "causal conv over the last few positions, not the tokens themselves. Each mamba head is coloured by its "
           "own largest |M|: blue positive, red negative (docs/mamba.md).";
  }

  // What each head adds (model/head_shares.h): the gated norm's output n (B, T, E), each head's P channels side by side, enters out_proj (no bias).
  HeadShares head_shares(const MixerPass& x) const override {
    return {mamba_activations(x.saved, d_, x.B, x.T).n, d_.E, slots_.weights(x.p).out_proj_w, nullptr};
  }

  HeadSteps head_steps(const MixerPass& x, int position, int head) const override {
    return mamba_head_steps(mamba_activations(x.saved, d_, x.B, x.T), slots_.weights(x.p), d_, position, head);
  }

  // ---- decoding: the conv's last K − 1 inputs and S (H × P × N), whatever the context length: O(1) per token.
  size_t fixed_state_floats() const override { return mamba_state_floats(d_); }
  size_t step_scratch_floats() const override { return mamba_step_scratch_floats(d_); }
  void mix_step(float* out, float* state, const float* u, const MixerParams& p, float* scratch) const override {
    mamba_step(out, mamba_state(state, d_), u, slots_.weights(p), d_, scratch);
  }
  // After a forward over positions 0 … T−1 (B = 1) the scan's working state holds S_T, laid out as the decoder keeps
  // it; the conv's inputs are the xBC columns of in_proj's output, of which the last K − 1 rows are kept (zeros
  // standing for the positions before the first, as in the forward).
  void state_from_forward(float* state, const MixerPass& x, float*) const override {
    const MambaActivations a = mamba_activations(x.saved, d_, 1, x.T);
    const MambaState s = mamba_state(state, d_);
    std::copy(a.state, a.state + (size_t)d_.H * d_.P * d_.N, s.S);
    const int X = d_.conv_channels();
    const int IN = d_.in_cols();
    const int rows = std::max(d_.K - 1, 0);
    for (int r = 0; r < rows; r++) {
      const int t = x.T - rows + r;  // row K−2 is the newest input, position T−1
      float* dst = s.conv + (size_t)r * X;
      if (t < 0)
        std::fill(dst, dst + X, 0.0f);
      else
        std::copy(a.proj + (size_t)t * IN + d_.xbc_offset(), a.proj + (size_t)t * IN + d_.xbc_offset() + X, dst);
    }
  }

 private:
  const MambaDims d_;
  const MixerSlots<MambaTensors> slots_;
};

}  // namespace

#define FIELD(member) MIXER_SETTING_FIELD(MambaSettings, member)

const MixerKind& mamba_kind() {
  // clang-format off
  static const MixerKind kind = {
    "mamba", "Mamba-2: a selective state-space recurrence, O(T), causal only (docs/mamba.md)",
    [](const ModelConfig& c) -> std::unique_ptr<Mixer> { return std::make_unique<Mamba>(c); },
    {
      {"ssm_state",  "ssm-state",  "mamba layers: state size N per channel",           FIELD(ssm_state),  between(1, 4096, false, false),   Scope::Run},
      {"ssm_expand", "ssm-expand", "mamba layers: inner width = ssm_expand × n_embd",   FIELD(ssm_expand), between(1, 64, false, false),     Scope::Run},
      {"ssm_conv",   "ssm-conv",   "mamba layers: causal conv width K (0 = no conv)",  FIELD(ssm_conv),   between(0, 64, false, false),     Scope::Run},
      {"ssm_selective", "ssm-selective", "mamba layers: 1 = selective (Δ, B, C from the input), 0 = time-invariant",
                                                                                        FIELD(ssm_selective), between(0, 1, false, false),   Scope::Run},
    },
    [](const ModelConfig& c) {
      const MambaSettings& s = c.mixer_settings.get<MambaSettings>();
      return "ssm state " + std::to_string(s.ssm_state) + ", expand " + std::to_string(s.ssm_expand) + ", conv " +
             std::to_string(s.ssm_conv) + (s.ssm_selective ? ", selective" : ", time-invariant");
    },
  };
  // clang-format on
  return kind;
}

#undef FIELD
