// What the lab (src/lab/, the explorer, tests) asks of a mixer beyond what a block needs (mixer.h): the weights
// with which each position mixes the others, what those weights mean, for the attention family its queries,
// keys and weights, and for the tests a second route to the decoding state. A mixer kind implements it beside Mixer and returns itself from Mixer::lab(). The lab asks
// these questions instead of comparing kind names, so a new kind is drawn and described by its own answers.
#pragma once
#include "model/head_shares.h"
#include "model/head_steps.h"
#include "model/mixer.h"

class MixerLab {
 public:
  virtual ~MixerLab() = default;
  // The weights A (B, NH, T, T) with which position i mixes positions j in the last forward: what the mixer
  // computes, or the matrix its math implies; 0 where nothing flows.
  virtual void implied_weights(float* A, const MixerPass& pass) const = 0;
  // Whether each row of A is a probability distribution (entropy, max weight and saturation mean something);
  // otherwise A may be signed and unnormalised, and the page colours it so.
  virtual bool weights_are_probabilities() const { return true; }
  // Whether A is implied by the mixer's math rather than computed by its forward (a softmax layer's P is what it computes).
  virtual bool weights_are_implied() const { return true; }
  // One paragraph for the page (plain text): what this kind's A is and how to read it.
  virtual const char* weights_description() const = 0;
  // The (B, T, 3C) q|k|v rows of the last forward, for mixers that have them (the lab's statistics and head
  // scores read queries and keys); null otherwise. logit_scale: what multiplies q·k when q·k are softmax logits, 0
  // when they are not (config.attn_scale means something to a model only if some layer's logit_scale is > 0).
  virtual const float* qkv(const float* saved) const { return nullptr; }
  virtual float logit_scale() const { return 0; }
  // The attention family's weights, for the lab's OV circuits and query/key gradient norms: W_qkv (C, 3C) and
  // W_proj (C, C) inside `p` (parameters or gradients); null for mixers that have none.
  struct QKVWeights {
    const float* qkv = nullptr;
    const float* proj = nullptr;
  };
  virtual QKVWeights qkv_weights(const MixerParams& p) const { return {}; }
  // What each head adds to the layer's output in the last forward (model/head_shares.h): the output projection's
  // input, the projection and its bias. The explorer's ablation and logit attribution read it.
  virtual HeadShares head_shares(const MixerPass& pass) const = 0;
  // Head `head`'s computation at `position` of sequence 0 in the last forward, step by step (model/head_steps.h),
  // for the kinds whose weights are not read from queries and keys (the explorer draws those from qkv()). A kind
  // that tells none returns no steps.
  virtual HeadSteps head_steps(const MixerPass& pass, int position, int head) const { return {}; }

  // The decoding state (Mixer::state_floats) after positions 0 … T−1, from a batched forward of them (B = 1): what
  // T single-row steps leave, up to float rounding. Nothing in the programs needs it (the decoder's shadow builds
  // the slide's state step by step); the tests hold the shadow and step() to it as a second, batched route to the
  // same state. scratch holds Mixer::step_scratch_floats().
  virtual void state_from_forward(float* state, const MixerPass& pass, float* scratch) const = 0;
};
