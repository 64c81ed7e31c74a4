// The Mamba-2 mixer (Dao & Gu 2024): a selective state-space layer where attention stands in the block,
//   x ← x + mamba(ln_1(x))
// The math, its backward (a reverse scan), the one-token step and the hidden attention M are in ops/mamba.h; this
// file plugs them into the mixer seam (mixer.h): the layer's tensors and their initialisation, where its activations
// live, its decoding state, and the masks it accepts (only causal: a recurrence is causal by construction).
// Sizes from the model's settings: C = n_embd, E = ssm_expand·C, H = n_head heads of P = E/H channels,
// N = ssm_state, K = ssm_conv (0 = no conv); ssm_selective = 0 makes Δ, B and C constants (time-invariant).
// docs/mamba.md describes the layer, its settings and what the lab shows of it.
#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "base/rng.h"
#include "model/mixer.h"
#include "model/mixer_lab.h"
#include "model/mixers/registry.h"
#include "ops/mamba.h"

namespace {

class Mamba final : public Mixer, public MixerLab {
 public:
  explicit Mamba(const ModelConfig& c) : d_(MambaDims::make(c.n_embd, c.n_head, c.mixer_settings.get<MambaSettings>())) {
    // Slot i of MixerParams is the i-th tensor of mamba_tensor_shapes(d_); remember which slot holds which tensor.
    const std::vector<MambaTensorShape> shapes = mamba_tensor_shapes(d_);
    for (size_t i = 0; i < shapes.size(); i++) slot_of(shapes[i].name) = (int)i;
  }
  const char* kind() const override { return "mamba"; }

  // Names, shapes and order from ops/mamba.h (the checkpoint's contract); here each gets its init (ops/mamba.h's, one
  // function per tensor) and optimizer:
  // in_proj and out_proj are the model's linear weights (N(0, 0.02), out_proj scaled as a residual projection;
  // decayed; Muon's), the rest Mamba-2's own init and AdamW without decay.
  std::vector<MixerTensor> tensors() const override {
    const MambaDims d = d_;
    std::vector<MixerTensor> rows;
    for (const MambaTensorShape& s : mamba_tensor_shapes(d)) {
      MixerTensor t{s.name, {}, Init::Custom, false, false};  // "mamba.in_proj.weight": the model prefixes "h.{l}."
      for (int n : s.shape) t.shape.push_back(n);
      const std::string& n = s.name;
      if (n == "mamba.in_proj.weight") {
        t.init = Init::Normal, t.weight_decay = true, t.matrix = true;
      } else if (n == "mamba.out_proj.weight") {
        t.init = Init::ResidualNormal, t.weight_decay = true, t.matrix = true;
      } else if (n == "mamba.D" || n == "mamba.norm.weight") {
        t.init = Init::Ones;
      } else if (n == "mamba.conv1d.weight" || n == "mamba.conv1d.bias") {
        t.init_fn = [K = d.K](float* p, size_t count, Rng& rng) { mamba_init_conv(p, count, K, rng); };
      } else if (n == "mamba.dt_bias") {
        t.init_fn = mamba_init_dt_bias;
      } else if (n == "mamba.A_log") {
        t.init_fn = mamba_init_A_log;
      } else if (n == "mamba.B" || n == "mamba.C") {
        t.init_fn = mamba_init_state_const;
      } else {
        throw std::logic_error("mamba mixer: no init for tensor " + n);
      }
      rows.push_back(std::move(t));
    }
    return rows;
  }

  void check_mask(const AttentionMask& mask) const override {
    if (mask.kind != AttentionMask::Causal)
      throw std::runtime_error("a mamba layer cannot take mask '" + mask.to_string() +
                               "': it is a recurrence, causal by construction (position t reads a state built from "
                               "positions ≤ t only), so only the causal mask applies to it");
  }
  bool has_head_gates() const override { return false; }

  // ---- training: the op's activations (ops/mamba.h) are the layer's saved slice, its backward scratch the shared one
  size_t saved_floats(int B, int T, bool) const override { return mamba_activation_floats(d_, B, T); }
  size_t scratch_floats(int B, int T, bool) const override { return mamba_scratch_floats(d_, B, T); }

  void forward(float* out, const float* u, const float* residual, const MixerPass& x) const override {
    mamba_forward(out, mamba_activations(x.saved, d_, x.B, x.T), u, weights(x.p), d_, x.B, x.T);
    const size_t n = (size_t)x.B * x.T * d_.C;
    for (size_t i = 0; i < n; i++) out[i] += residual[i];
  }
  void backward(float* du, MixerParams& grads, float*, const float* dout, const float* u,
                const MixerPass& x) const override {
    mamba_backward(du, tensors_of(grads), dout, u, mamba_activations(x.saved, d_, x.B, x.T), weights(x.p), d_, x.B,
                   x.T, x.scratch);
  }

  // ---- the lab: M^h (B, H, T, T), the hidden attention over the conv's outputs: y_i = Σ_j M_ij x_j + D x_i. Signed
  // and not normalised.
  const MixerLab& lab() const override { return *this; }
  void implied_weights(float* A, const MixerPass& x) const override {
    mamba_hidden_attention(A, mamba_activations(x.saved, d_, x.B, x.T), weights(x.p), d_, x.B, x.T);
  }
  bool weights_are_probabilities() const override { return false; }
  const char* weights_description() const override {
    return "Mamba layers show their hidden attention M: the state-space recurrence unrolled, "
           "y_i = Σ_{j≤i} M_ij x_j + D·x_i with M_ij = (C_i·B_j)·exp(a·(Δ_{j+1} + … + Δ_i))·Δ_j. It is not "
           "normalised (rows do not sum to 1) and can be negative; the x_j it weighs are the outputs of the layer's "
           "causal conv over the last few positions, not the tokens themselves. Each mamba head is coloured by its "
           "own largest |M|: blue positive, red negative (docs/mamba.md).";
  }

  // ---- decoding: the conv's last K − 1 inputs and S (H × P × N), whatever the context length: O(1) per token.
  size_t state_floats(const AttentionMask&) const override { return mamba_state_floats(d_); }
  size_t step_scratch_floats() const override { return mamba_step_scratch_floats(d_); }
  void step(float* out, const float* u, const float* residual, const MixerParams& p, const AttentionMask&,
            const float*, float* state, int pos, float* scratch) const override {
    const MambaState s = mamba_state(state, d_);
    if (pos == 0) mamba_state_reset(s, d_);  // a new context
    mamba_step(out, s, u, weights(p), d_, scratch);
    for (int c = 0; c < d_.C; c++) out[c] += residual[c];
  }
  // After a forward over positions 0 … T−1 (B = 1) the scan's working state holds S_T, laid out as the decoder keeps
  // it; the conv's inputs are the xBC columns of in_proj's output, of which the last K − 1 rows are kept (zeros
  // standing for the positions before the first, as in the forward).
  void state_from_forward(float* state, const MixerPass& x, float*) const override {
    const MambaActivations a = mamba_activations(x.saved, d_, 1, x.T);
    const MambaState s = mamba_state(state, d_);
    std::copy(a.state, a.state + (size_t)d_.H * d_.P * d_.N, s.S);
    const int X = d_.conv_channels(), IN = d_.in_cols(), rows = std::max(d_.K - 1, 0);
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
  // The op's tensors from the layer's slots; a tensor this variant lacks stays null.
  MambaParams tensors_of(const MixerParams& p) const {
    auto at = [&](int slot) { return slot >= 0 ? p.t[slot] : nullptr; };
    MambaParams m;
    m.in_proj_w = at(in_proj_), m.conv_w = at(conv_w_), m.conv_b = at(conv_b_), m.dt_bias = at(dt_bias_);
    m.A_log = at(A_log_), m.D = at(D_), m.norm_w = at(norm_w_), m.out_proj_w = at(out_proj_);
    m.B_const = at(B_const_), m.C_const = at(C_const_);
    return m;
  }
  MambaWeights weights(const MixerParams& p) const { return as_weights(tensors_of(p)); }
  int& slot_of(const std::string& name) {
    if (name == "mamba.in_proj.weight") return in_proj_;
    if (name == "mamba.conv1d.weight") return conv_w_;
    if (name == "mamba.conv1d.bias") return conv_b_;
    if (name == "mamba.dt_bias") return dt_bias_;
    if (name == "mamba.A_log") return A_log_;
    if (name == "mamba.D") return D_;
    if (name == "mamba.norm.weight") return norm_w_;
    if (name == "mamba.out_proj.weight") return out_proj_;
    if (name == "mamba.B") return B_const_;
    if (name == "mamba.C") return C_const_;
    throw std::logic_error("mamba mixer: unknown tensor " + name);
  }

  const MambaDims d_;
  int in_proj_ = -1, conv_w_ = -1, conv_b_ = -1, dt_bias_ = -1, A_log_ = -1, D_ = -1, norm_w_ = -1, out_proj_ = -1,
      B_const_ = -1, C_const_ = -1;
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
