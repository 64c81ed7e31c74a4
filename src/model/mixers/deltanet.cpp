// The Gated DeltaNet mixer (Yang, Kautz & Hatamizadeh 2024): Mamba-2's gate and the delta rule in one recurrence,
// where attention stands in the block,
//   x ← x + deltanet(ln_1(x))
// The math, its backward (a reverse pass through states recomputed chunk by chunk), the one-token step, the implied
// attention M and the tensor table are in ops/deltanet.h; this file plugs them into the recurrent family of the
// mixer seam (recurrent.h: causal only, no head gates, the residual add, the state reset). Sizes: C = n_embd,
// H = n_head heads of N = C/H, K = deltanet_conv. docs/deltanet.md.
#include <memory>

#include "model/mixers/recurrent.h"
#include "model/mixers/registry.h"
#include "ops/deltanet.h"

namespace {

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
