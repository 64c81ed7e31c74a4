// The attention family of mixers: a fused q|k|v projection, NH heads that each mix the values of the positions
// they attend to, optional head gates ξ, and an output projection:
//   qkv = u·W_qkv + b_qkv                 (B, T, 3C)   row t is [q | k | v]; head h owns columns h·HS … (h+1)·HS − 1
//   O   = heads(qkv)                      (B, T, C)    the heads side by side; what "heads" is, is the subclass's
//   G   = ξ_h · O[:, h, :]                (B, T, C)    head gates (ops/head_gate.h), when on
//   out = residual + G·W_proj + b_proj    (B, T, C)
// Its tensors are GPT-2's: h.{l}.attn.c_attn.{weight,bias} and h.{l}.attn.c_proj.{weight,bias}.
// Softmax attention (softmax_attention.cpp) and linear attention (linear_attention.cpp) are the two subclasses:
// each says only how its heads turn q, k, v into O, forward and backward, one step at a time, and as weights for
// the lab.
#pragma once
#include "model/mixer.h"
#include "model/mixer_lab.h"

// The family's tensors, one pointer each (base/tensor_slot.h): QKVWeights reads them, the backward adds to them.
template <typename Ptr>
struct QKVTensors {
  Ptr qkv_w = nullptr;   // [C, 3C]  "attn.c_attn.weight"
  Ptr qkv_b = nullptr;   // [3C]     "attn.c_attn.bias"
  Ptr proj_w = nullptr;  // [C, C]   "attn.c_proj.weight"
  Ptr proj_b = nullptr;  // [C]      "attn.c_proj.bias"
};

// The family's tensor table, in the checkpoint's order: GPT-2's names, N(0, 0.02) weights (the projection that adds
// into the residual stream scaled down: Init::ResidualNormal), zero biases; the weights decayed by AdamW and
// orthogonalised by Muon.
template <typename Ptr>
std::vector<TensorSlot<QKVTensors, Ptr>> qkv_tensor_slots(int C) {
  using Q = QKVTensors<Ptr>;
  const int64_t c = C;
  //       name                    shape       init                   decay  Muon           member
  return {{{"attn.c_attn.weight", {c, 3 * c}, Init::Normal,          true,  true},  &Q::qkv_w},
          {{"attn.c_attn.bias",   {3 * c},    Init::Zeros,           false, false}, &Q::qkv_b},
          {{"attn.c_proj.weight", {c, c},     Init::ResidualNormal,  true,  true},  &Q::proj_w},
          {{"attn.c_proj.bias",   {c},        Init::Zeros,           false, false}, &Q::proj_b}};
}

class QKVAttention : public Mixer, public MixerLab {
 public:
  explicit QKVAttention(const ModelConfig& config);
  std::vector<TensorDecl> tensors() const override;

  size_t saved_floats(int B, int T, bool gated) const override;
  size_t scratch_floats(int B, int T, bool gated) const override;
  void forward(float* out, const float* u, const float* residual, const MixerPass& pass) const override;
  void backward(float* du, MixerParams& grads, float* dgates, const float* dout, const float* u,
                const MixerPass& pass) const override;
  const MixerLab& lab() const override { return *this; }
  void implied_weights(float* A, const MixerPass& pass) const override;
  const float* qkv(const float* saved) const override { return saved; }
  QKVWeights qkv_weights(const MixerParams& p) const override {
    const QKVTensors<const float*> w = slots_.weights(p);
    return {w.qkv_w, w.proj_w};
  }

  // Decoding and the lab's weights (qkv_attention_steps.cpp: code training does not run).
  size_t step_scratch_floats() const override;
  void step(float* out, const float* u, const float* residual, const MixerParams& p, const AttentionMask& mask,
            const float* gates, float* state, int pos, float* scratch) const override;
  void step2(const StepRow rows[2], const MixerParams& p, const AttentionMask& mask, const float* gates,
             float* scratch) const override;
  void state_from_forward(float* state, const MixerPass& pass, float* scratch) const override;
  HeadShares head_shares(const MixerPass& pass) const override;

 protected:
  // What a subclass supplies. `stat` (B, NH, T) is one number per query that the forward keeps for the backward.
  virtual void heads_forward(float* O, float* stat, const float* qkv, const AttentionMask& mask, int B,
                             int T) const = 0;
  virtual void heads_backward(float* dqkv, const float* dO, const float* qkv, const float* stat, const float* O,
                              const AttentionMask& mask, int B, int T) const = 0;
  virtual void heads_weights(float* A, const float* qkv, const float* stat, const AttentionMask& mask, int B,
                             int T) const = 0;
  // One position, in two halves: absorb takes its q|k|v row (3C) into the state (pos 0: a new context); read
  // then writes its row of O (C) from the state and its query.
  virtual void heads_absorb(const float* qkv_row, float* state, int pos, const AttentionMask& mask,
                            float* scratch) const = 0;
  virtual void heads_read(float* O, const float* qkv_row, const float* state, int pos, const AttentionMask& mask,
                          float* scratch) const = 0;
  virtual size_t heads_step_scratch() const = 0;

  const int C;
  const int NH;
  const int HS;  // C / NH
  const int block_size;
  const int n_layer;

  // What the forward keeps, carved from the layer's slice (qkv_attention.cpp says the sizes).
  struct Saved {
    float* qkv;
    float* stat;
    float* O;
    float* gated;
  };
  Saved carve(float* saved, int B, int T) const;

 private:
  const MixerSlots<QKVTensors> slots_;
};
