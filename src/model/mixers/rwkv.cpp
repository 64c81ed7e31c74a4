// The RWKV-7 mixer (Peng et al. 2025, "Goose"): a recurrence whose state erases before it writes, where attention
// stands in the block,
//   x ← x + rwkv(ln_1(x))          (the block's MLP stays the GELU MLP, not RWKV's channel mix)
// The math, its backward (a reverse pass through states recomputed chunk by chunk), the one-token step, the implied
// attention M and the tensor table are in ops/rwkv.h; this file plugs them into the recurrent family of the mixer
// seam (recurrent.h: causal only, no head gates, the residual add, the state reset). Sizes: C = n_embd, H = n_head
// heads of N = C/H, D = rwkv_lora. docs/rwkv.md.
#include <memory>

#include "model/mixers/recurrent.h"
#include "model/mixers/registry.h"
#include "ops/rwkv.h"

namespace {

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
