// The mixer seam. A block is pre-LN:
//   x ← x + mixer(ln_1(x))          the one place where positions see each other
//   x ← x + mlp(ln_2(x))            each position alone
// A mixer kind is its own files, one of them in src/model/mixers/
// implementing this interface, plus one line in mixers/kinds.h (mixers/registry.h says exactly what a kind is). It
// owns everything about itself: its settings, its rows of the tensor table, its forward and backward, its decoding
// state and one-token step, and which masks it accepts. block.h, model.cpp and decoder.cpp only ever talk to this
// interface. What only the lab asks of a mixer (the weights it implies, its queries and keys) is a second, small
// interface, MixerLab (mixer_lab.h), reached through lab().
//
// Shapes: B batch, T time, C = n_embd, NH = n_head; u and out are (B, T, C) row-major, or one row (C) in step().
// Gradients follow src/ops/README.md: parameter gradients are added to, the input gradient du is written.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/tensor_slot.h"
#include "model/config.h"
#include "ops/mask.h"

class MixerLab;

// A layer's mixer tensors (or their gradients): one pointer per tensor its kind declares, in the order of
// Mixer::tensors(), into the model's arena: the layer's slice of the parameter table (model/params.h). As many as
// the kind declares; nothing here bounds them.
struct MixerParams {
  std::vector<float*> t;
};

// A kind's tensor table, bound: built once (in the kind's constructor) from its op's rows (base/tensor_slot.h), a
// function template of the pointer type, so that the same rows bind the weights and the gradients. Slot i of a
// layer's MixerParams is row i. The one way every kind declares and binds its tensors:
//   tensors()   what Mixer::tensors() returns: each row's name, shape, init, decay and Muon flag
//   weights(p)  the op's Tensors<const float*> pointing into the layer's weights
//   grads(g)    the op's Tensors<float*> pointing into its gradients
template <template <typename> class Tensors>
class MixerSlots {
 public:
  // rows(ptr) returns the op's std::vector<TensorSlot<Tensors, decltype(ptr)>>, for ptr a null const float* or float*.
  template <typename Rows>
  explicit MixerSlots(Rows rows) {
    for (const TensorSlot<Tensors, const float*>& row : rows(static_cast<const float*>(nullptr))) {
      tensors_.push_back(row.decl);
      weight_members_.push_back(row.member);
    }
    for (const TensorSlot<Tensors, float*>& row : rows(static_cast<float*>(nullptr))) grad_members_.push_back(row.member);
  }
  const std::vector<TensorDecl>& tensors() const { return tensors_; }
  Tensors<const float*> weights(const MixerParams& p) const { return bind<const float*>(weight_members_, p); }
  Tensors<float*> grads(const MixerParams& g) const { return bind<float*>(grad_members_, g); }

 private:
  template <typename Ptr>
  static Tensors<Ptr> bind(const std::vector<Ptr Tensors<Ptr>::*>& members, const MixerParams& p) {
    Tensors<Ptr> t{};
    for (size_t i = 0; i < members.size(); i++) t.*members[i] = p.t[i];
    return t;
  }
  std::vector<TensorDecl> tensors_;
  std::vector<const float* Tensors<const float*>::*> weight_members_;
  std::vector<float* Tensors<float*>::*> grad_members_;
};

// The arguments every training-time call shares: the layer's tensors, its mask, its head gates ξ (NH of them, or
// null when the gates are off: GPT::enable_head_gates) and the rows. `saved` is this layer's slice of the
// activation arena (saved_floats), kept from forward to backward; `scratch` is shared by all layers (scratch_floats).
struct MixerPass {
  const MixerParams& p;
  const AttentionMask& mask;
  const float* gates;
  int B;
  int T;
  float* saved;
  float* scratch;
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  // The name --mixer and the checkpoint's "mixer" key use for this kind (its MixerKind's name).
  virtual const char* kind() const = 0;
  virtual std::vector<TensorDecl> tensors() const = 0;
  // Throws, saying why, when this kind cannot run under `mask` (e.g. a recurrence that is causal by construction).
  virtual void check_mask(const AttentionMask& mask) const {}
  // Whether the layer has NH heads that the block's head gates can scale (the pruning lab).
  virtual bool has_head_gates() const { return true; }

  // ---- training: out = residual + mixer(u) (the residual add folded in, as linear_forward does)
  virtual size_t saved_floats(int B, int T, bool gated) const = 0;
  virtual size_t scratch_floats(int B, int T, bool gated) const = 0;
  virtual void forward(float* out, const float* u, const float* residual, const MixerPass& pass) const = 0;
  // du = ∂L/∂u (written); grads += ∂L/∂(tensors); dgates += ∂L/∂ξ when the gates are on.
  virtual void backward(float* du, MixerParams& grads, float* dgates, const float* dout, const float* u,
                        const MixerPass& pass) const = 0;

  // ---- what the lab asks of this mixer (mixer_lab.h)
  virtual const MixerLab& lab() const = 0;

  // ---- decoding, one position at a time (model/decoder.h). The state is what the layer keeps about the past,
  // sized for a context of block_size positions under `mask`; step_scratch is reused by every layer.
  virtual size_t state_floats(const AttentionMask& mask) const = 0;
  virtual size_t step_scratch_floats() const = 0;
  // Position `pos` (0 = a new context: the state is reset): out = residual + mixer(u), one row.
  virtual void step(float* out, const float* u, const float* residual, const MixerParams& p, const AttentionMask& mask,
                    const float* gates, float* state, int pos, float* scratch) const = 0;
  // Two positions at once, each row with its own state and position: the decoder's token and its shadow (the same
  // token at a position block_size − ⌊block_size/2⌋ lower, model/decoder.h). The same as step() on each row, which
  // is what this default does; a kind whose step is mostly products overrides it to read each weight once for both
  // rows (matvec2, ops/linear.h). scratch holds 2·step_scratch_floats(), row r's at r·step_scratch_floats().
  struct StepRow {
    float* out;
    const float* u;
    const float* residual;
    float* state;
    int pos;
  };
  virtual void step2(const StepRow rows[2], const MixerParams& p, const AttentionMask& mask, const float* gates,
                     float* scratch) const {
    for (int r = 0; r < 2; r++)
      step(rows[r].out, rows[r].u, rows[r].residual, p, mask, gates, rows[r].state, rows[r].pos,
           scratch + r * step_scratch_floats());
  }
};
