// Softmax attention, the GPT's mixer: each head weighs the values of the keys its query may see by
// P_ij = softmax_j(s·q_i·k_j), s = 1/√HS by default (--attn-scale). The math and the kernels are in ops/softmax_attention.h;
// this file plugs them into the attention family (qkv_attention.h) and keeps the decoder's KV cache.
#include <algorithm>
#include <memory>

#include "model/mixers/qkv_attention.h"
#include "model/mixers/registry.h"
#include "ops/softmax_attention.h"

namespace {

class SoftmaxAttention final : public QKVAttention {
 public:
  explicit SoftmaxAttention(const ModelConfig& c) : QKVAttention(c), scale_(attention_scale(c)) {}
  const char* kind() const override { return "softmax"; }
  float logit_scale() const override { return scale_; }
  bool weights_are_implied() const override { return false; }
  const char* weights_description() const override {
    return "Softmax attention: each row is P_ij = softmax_j(s·q_i·k_j) over the keys the mask allows, the weights "
           "with which query i averages the values; every row sums to 1.";
  }

  // stat holds lse_i, the log-normaliser of each row: the backward rebuilds P from it (ops/softmax_attention.h).
  void heads_forward(float* O, float* lse, const float* qkv, const AttentionMask& mask, int B, int T) const override {
    attention_forward(O, lse, qkv, mask, scale_, B, T, C, NH);
  }
  void heads_backward(float* dqkv, const float* dO, const float* qkv, const float* lse, const float* O,
                      const AttentionMask& mask, int B, int T) const override {
    attention_backward(dqkv, dO, qkv, lse, O, mask, scale_, B, T, C, NH);
  }
  void heads_weights(float* A, const float* qkv, const float* lse, const AttentionMask& mask, int B,
                     int T) const override {
    attention_probs(A, qkv, lse, mask, scale_, B, T, C, NH);
  }

  // Decoding: the KV cache, keys then values. The keys are kept transposed, Kᵀ (C, block_size): row c holds
  // component c of every cached key, so head h's keys are rows h·HS … (h+1)·HS − 1 and one query's scores are a
  // vector loop over positions (attend_one_query). The values stay (block_size, C), one row per position, as the
  // weighted sum of value rows reads them. A token costs O(T) attention work instead of recomputing the O(T²)
  // forward.
  size_t state_floats(const AttentionMask&) const override { return 2 * (size_t)block_size * C; }
  size_t heads_step_scratch() const override { return block_size; }  // one query's weights
  void heads_absorb(const float* qkv, float* state, int pos, const AttentionMask&, float*) const override {
    float* keys_t = state;
    for (int c = 0; c < C; c++) keys_t[(size_t)c * block_size + pos] = qkv[C + c];
    std::copy(qkv + 2 * C, qkv + 3 * C, state + ((size_t)block_size + pos) * C);
  }
  void heads_read(float* O, const float* qkv, const float* state, int pos, const AttentionMask& mask,
                  float* p) const override {
    const float* keys_t = state;
    const float* values = state + (size_t)block_size * C;
    const KeyRange range = mask.keys_for(pos, pos + 1);
    for (int h = 0; h < NH; h++)
      attend_one_query(O + h * HS, p, qkv + h * HS, keys_t + (size_t)h * HS * block_size, block_size,
                       values + h * HS, C, range, scale_, HS);
  }

 private:
  const float scale_;
};

}  // namespace

const MixerKind& softmax_attention_kind() {
  static const MixerKind kind = {"softmax", "softmax attention, the GPT's: P = softmax(q·k/√d_k) (ops/softmax_attention.h)",
                                 [](const ModelConfig& c) -> std::unique_ptr<Mixer> {
                                   return std::make_unique<SoftmaxAttention>(c);
                                 }};
  return kind;
}
