// The recurrent family of mixers, beside the attention family (qkv_attention.h): a layer that reads the past through
// a state it updates one position at a time, S_t = f(S_{t−1}, u_t), and answers from it, y_t = g(S_t, u_t)
// (Mamba-2, RWKV-7). What every member shares, written once here:
//   * causal by construction: position t reads a state built from positions ≤ t only, so only the causal mask
//     applies to it (any other is refused, saying why);
//   * no head gates: the gates scale an attention head's output before the shared projection (ops/head_gate.h),
//     and the family's heads go through a shared norm first;
//   * out = residual + mixer(u), one row or all of them;
//   * a decoding state of a fixed size whatever the context (the recurrence's S and whatever the kind keeps of the
//     last few inputs), zeroed at position 0 (a new context: S_{−1} = 0, and zeros before the first input);
//   * its mixing weights are implied by the recurrence unrolled, signed and not normalised.
// A member supplies its op's calls: mix (all rows), mix_step (one row), the state's size, and the lab's answers.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/mixer.h"
#include "model/mixer_lab.h"

class RecurrentMixer : public Mixer, public MixerLab {
 public:
  explicit RecurrentMixer(int n_embd) : C_(n_embd) {}

  void check_mask(const AttentionMask& mask) const final {
    if (mask.kind != AttentionMask::Causal)
      throw std::runtime_error(std::string("a layer of kind ") + kind() + " cannot take mask '" + mask.to_string() +
                               "': it is a recurrence, causal by construction (position t reads a state built from "
                               "positions ≤ t only), so only the causal mask applies to it");
  }
  bool has_head_gates() const final { return false; }

  void forward(float* out, const float* u, const float* residual, const MixerPass& pass) const final {
    mix(out, u, pass);
    const size_t n = (size_t)pass.B * pass.T * C_;
    for (size_t i = 0; i < n; i++) out[i] += residual[i];
  }

  const MixerLab& lab() const final { return *this; }
  bool weights_are_probabilities() const final { return false; }

  size_t state_floats(const AttentionMask&) const final { return fixed_state_floats(); }
  void step(float* out, const float* u, const float* residual, const MixerParams& p, const AttentionMask&,
            const float*, float* state, int pos, float* scratch) const final {
    if (pos == 0) std::fill(state, state + fixed_state_floats(), 0.0f);  // a new context
    mix_step(out, state, u, p, scratch);
    for (int c = 0; c < C_; c++) out[c] += residual[c];
  }

 protected:
  // out (B, T, C) = mixer(u), without the residual; the op keeps what its backward needs in pass.saved.
  virtual void mix(float* out, const float* u, const MixerPass& pass) const = 0;
  // One row: out (C) = mixer(u) at the next position, the state advanced past it.
  virtual void mix_step(float* out, float* state, const float* u, const MixerParams& p, float* scratch) const = 0;
  // The floats of the decoding state, the same for every context length.
  virtual size_t fixed_state_floats() const = 0;

 private:
  const int C_;
};
