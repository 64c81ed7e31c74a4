// The RWKV-7 mixer (Peng et al. 2025, "Goose"): a recurrence whose state erases before it writes, where attention
// stands in the block,
//   x ← x + rwkv(ln_1(x))          (the block's MLP stays the GELU MLP, not RWKV's channel mix)
// The math, its backward (a reverse pass through states recomputed chunk by chunk), the one-token step and the
// implied attention M are in ops/rwkv.h; this file plugs them into the mixer seam (mixer.h): the layer's tensors,
// their initialisation and optimizer groups, its decoding state, and the masks it accepts (only causal: a recurrence
// is causal by construction). Sizes: C = n_embd, H = n_head heads of N = C/H, D = rwkv_lora. docs/rwkv.md.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include "model/mixer.h"
#include "model/mixer_lab.h"
#include "model/mixers/registry.h"
#include "ops/rwkv.h"

namespace {

class Rwkv final : public Mixer, public MixerLab {
 public:
  explicit Rwkv(const ModelConfig& c) : d_(RwkvDims::make(c.n_embd, c.n_head, c.mixer_settings.get<RwkvSettings>())) {}
  const char* kind() const override { return "rwkv"; }

  // Names, shapes and order from ops/rwkv.h (the checkpoint's contract). The four C × C projections are the
  // model's linear weights: decayed by AdamW and orthogonalised by Muon, as RWKV-LM decays its ".weight" tensors.
  // Everything else (the mixes, the LoRAs, the biases w0 and a0, k_k, k_a, r_k, ln_x) is AdamW without decay, as
  // RWKV-LM's optimizer groups have them; the LoRAs are not Muon's: they are rank-D factors whose 0.1-scaled init
  // an orthogonalised update (every singular value 1) would swamp. All of them start as RWKV-LM's
  // rwkv7_train_simplified.py starts them (ops/rwkv.h, rwkv_init_tensor), with its depth schedule at layer 0 for
  // every layer: a kind is built from the model's settings alone and does not know its depth (docs/rwkv.md).
  std::vector<MixerTensor> tensors() const override {
    std::vector<MixerTensor> rows;
    for (const auto& s : rwkv_tensor_slots<const float*>(d_)) {
      const bool projection = s.name != "rwkv.ln_x.weight" && s.name.size() > 7 &&
                              s.name.compare(s.name.size() - 7, 7, ".weight") == 0;  // receptance, key, value, output
      MixerTensor t{s.name, {}, Init::Custom, projection, projection};
      for (int n : s.shape) t.shape.push_back(n);
      t.init_fn = [d = d_, name = s.name](float* p, size_t n, Rng& rng) { rwkv_init_tensor(name, p, n, d, 0, 1, rng); };
      rows.push_back(std::move(t));
    }
    return rows;
  }

  void check_mask(const AttentionMask& mask) const override {
    if (mask.kind != AttentionMask::Causal)
      throw std::runtime_error("an rwkv layer cannot take mask '" + mask.to_string() +
                               "': it is a recurrence, causal by construction (position t reads a state built from "
                               "positions ≤ t only), so only the causal mask applies to it");
  }
  bool has_head_gates() const override { return false; }

  // ---- training: the op's activations are the layer's saved slice, its backward scratch the shared one
  size_t saved_floats(int B, int T, bool) const override { return rwkv_activation_floats(d_, B, T); }
  size_t scratch_floats(int B, int T, bool) const override { return rwkv_scratch_floats(d_, B, T); }
  void forward(float* out, const float* u, const float* residual, const MixerPass& x) const override {
    rwkv_forward(out, rwkv_activations(x.saved, d_, x.B, x.T), u, weights(x.p), d_, x.B, x.T);
    const size_t n = (size_t)x.B * x.T * d_.C;
    for (size_t i = 0; i < n; i++) out[i] += residual[i];
  }
  void backward(float* du, MixerParams& g, float*, const float* dout, const float* u, const MixerPass& x) const override {
    rwkv_backward(du, bind<float*>(g), dout, u, rwkv_activations(x.saved, d_, x.B, x.T), weights(x.p), d_, x.B, x.T,
                  x.scratch);
  }

  // ---- the lab: M (B, H, T, T) with y_t = Σ_s M[t, s] v_s before the GroupNorm. Signed, not normalised.
  const MixerLab& lab() const override { return *this; }
  void implied_weights(float* A, const MixerPass& x) const override {
    rwkv_implied_attention(A, rwkv_activations(x.saved, d_, x.B, x.T), d_, x.B, x.T);
  }
  bool weights_are_probabilities() const override { return false; }
  const char* weights_description() const override {
    return "RWKV-7 layers show the attention their recurrence implies: the state S_t = S_{t-1}·A_t + v_t·k̃_tᵀ, with "
           "A_t = diag(d_t) − κ_t(a_t⊙κ_t)ᵀ, unrolled gives y_t = Σ_{s≤t} M[t,s]·v_s with "
           "M[t,s] = k̃_s·(A_{s+1}⋯A_t·r_t) (before the layer's GroupNorm and bonus). Each A decays the state per "
           "channel and erases what it recalls along the key κ at the rate a, so M can be negative where a later "
           "write overwrote an earlier one, and its rows do not sum to 1. Each rwkv head is coloured by its own "
           "largest |M|: blue positive, red negative (docs/rwkv.md).";
  }

  // ---- decoding: u_{t−1} and S (H × N × N), whatever the context length: O(1) per token.
  size_t state_floats(const AttentionMask&) const override { return rwkv_state_floats(d_); }
  size_t step_scratch_floats() const override { return rwkv_step_scratch_floats(d_); }
  void step(float* out, const float* u, const float* residual, const MixerParams& p, const AttentionMask&,
            const float*, float* state, int pos, float* scratch) const override {
    if (pos == 0) std::fill(state, state + rwkv_state_floats(d_), 0.0f);  // a new context: u_{−1} = 0, S_{−1} = 0
    rwkv_step(out, state, u, weights(p), d_, scratch);
    for (int c = 0; c < d_.C; c++) out[c] += residual[c];
  }
  void state_from_forward(float* state, const MixerPass& x, float*) const override {
    rwkv_state_from_forward(state, rwkv_activations(x.saved, d_, 1, x.T), d_, 0);
  }

 private:
  // Slot i of MixerParams is the i-th tensor of rwkv_tensor_slots.
  template <typename Ptr>
  RwkvTensors<Ptr> bind(const MixerParams& p) const {
    RwkvTensors<Ptr> t;
    const auto slots = rwkv_tensor_slots<Ptr>(d_);
    for (size_t i = 0; i < slots.size(); i++) t.*slots[i].member = p.t[i];
    return t;
  }
  RwkvWeights weights(const MixerParams& p) const { return bind<const float*>(p); }

  const RwkvDims d_;
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
