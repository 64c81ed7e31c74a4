// Linear attention (Katharopoulos et al. 2020): the softmax's exp(q·k) replaced by φ(q)·φ(k), so the sums over
// keys become a running state S (HS × HS) and z (HS) per head: O(T) in the sequence, a fixed state to decode with.
// The math and the kernels are in ops/linear_attention.h; this file plugs them into the attention family
// (qkv_attention.h). docs/linear_attention.md has the experiments.
#include <algorithm>
#include <memory>

#include "model/mixers/qkv_attention.h"
#include "model/mixers/registry.h"
#include "ops/linear_attention.h"

namespace {

class LinearAttention final : public QKVAttention {
 public:
  explicit LinearAttention(const ModelConfig& c) : QKVAttention(c) {}
  const char* kind() const override { return "linear"; }
  const char* weights_description() const override {
    return "Linear attention: the weights its math implies, A_ij = φ(q_i)·φ(k_j) / Σ_j φ(q_i)·φ(k_j) with "
           "φ = elu + 1, over the keys the mask allows; every row sums to 1 (up to ε), but no softmax sharpens it.";
  }

  // stat holds den_i = φ(q_i)·z_i + ε, which the backward needs.
  void heads_forward(float* O, float* den, const float* qkv, const AttentionMask& mask, int B, int T) const override {
    linear_attention_forward(O, den, qkv, mask, B, T, C, NH);
  }
  void heads_backward(float* dqkv, const float* dO, const float* qkv, const float* den, const float* O,
                      const AttentionMask& mask, int B, int T) const override {
    linear_attention_backward(dqkv, dO, qkv, den, O, mask, B, T, C, NH);
  }
  // A_ij = φ(q_i)·φ(k_j) / den_i: rows sum to 1 − ε/den_i.
  void heads_weights(float* A, const float* qkv, const float*, const AttentionMask& mask, int B,
                     int T) const override {
    linear_attention_probs(A, qkv, mask, B, T, C, NH);
  }

  // Decoding: S (NH, HS, HS) and z (C), whatever the context length. Under window:W the key that leaves the
  // window must be subtracted again, so that mask also keeps the keys and values, (block_size, C) each.
  size_t state_floats(const AttentionMask& mask) const override {
    return (size_t)NH * HS * HS + C + (mask.kind == AttentionMask::Window ? 2 * (size_t)block_size * C : 0);
  }
  size_t heads_step_scratch() const override { return 2 * (size_t)C; }  // φ(q), φ(k) of one position
  void heads_absorb(const float* qkv, float* state, int pos, const AttentionMask& mask, float* scratch) const override {
    float *S = state, *z = S + (size_t)NH * HS * HS, *keys = z + C, *values = keys + (size_t)block_size * C;
    float* phi_k = scratch + C;
    if (pos == 0) std::fill(S, z + C, 0.0f);  // a new context
    phi_features(phi_k, qkv + C, C);
    for (int h = 0; h < NH; h++)
      linear_state_update(S + (size_t)h * HS * HS, z + h * HS, phi_k + h * HS, qkv + 2 * C + h * HS, 1.0f, HS);
    if (mask.kind != AttentionMask::Window) return;
    std::copy(qkv + C, qkv + 2 * C, keys + (size_t)pos * C);
    std::copy(qkv + 2 * C, qkv + 3 * C, values + (size_t)pos * C);
    // The keys that left the window at this position: [begin at pos − 1, begin at pos).
    const int left = pos == 0 ? 0 : mask.keys_for(pos - 1, pos).begin;
    for (int j = left; j < mask.keys_for(pos, pos + 1).begin; j++) {
      phi_features(phi_k, keys + (size_t)j * C, C);
      for (int h = 0; h < NH; h++)
        linear_state_update(S + (size_t)h * HS * HS, z + h * HS, phi_k + h * HS, values + (size_t)j * C + h * HS,
                            -1.0f, HS);
    }
  }
  void heads_read(float* O, const float* qkv, const float* state, int, const AttentionMask&,
                  float* scratch) const override {
    const float *S = state, *z = S + (size_t)NH * HS * HS;
    float* phi_q = scratch;
    phi_features(phi_q, qkv, C);
    for (int h = 0; h < NH; h++) linear_state_read(O + h * HS, S + (size_t)h * HS * HS, z + h * HS, phi_q + h * HS, HS);
  }
};

}  // namespace

const MixerKind& linear_attention_kind() {
  static const MixerKind kind = {"linear",
                                 "linear attention: φ(q)·φ(k) weights, O(T), a fixed-size state (docs/linear_attention.md)",
                                 [](const ModelConfig& c) -> std::unique_ptr<Mixer> {
                                   return std::make_unique<LinearAttention>(c);
                                 }};
  return kind;
}
