#include "model/decoder.h"

#include <algorithm>

#include "model/block.h"
#include "ops/attention.h"
#include "ops/embedding.h"
#include "ops/linear_attention.h"

Decoder::Decoder(GPT& model, int mask_token) : model_(model), mask_token_(mask_token) {
  const ModelConfig& c = model.config;
  use_cache_ = mask_token < 0 && std::none_of(model.masks().begin(), model.masks().end(), [&](const AttentionMask& m) {
                 return m.sees_future(c.block_size);
               });
  const size_t C = c.n_embd, HS = c.head_size();
  size_t cached = 0;
  for (int l = 0; l < c.n_layer; l++) {
    const bool needs_cache = model.attention_kind(l) == AttentionKind::Softmax ||
                             model.masks()[l].kind == AttentionMask::Window;
    cache_at_.push_back(needs_cache ? cached : kNoCache);
    cached += needs_cache ? (size_t)c.block_size * C : 0;
  }
  k_cache_.assign(cached, 0.0f);
  v_cache_.assign(cached, 0.0f);
  state_S_.assign((size_t)c.n_layer * c.n_head * HS * HS, 0.0f);
  state_z_.assign((size_t)c.n_layer * C, 0.0f);
  state_begin_.assign(c.n_layer, 0);
  phi_q_.resize(C), phi_k_.resize(C);
  x_.resize(C), ln_.resize(C), qkv_.resize(3 * C), att_.resize(C), gated_.resize(C), res2_.resize(C), res3_.resize(C);
  fc_.resize(4 * C), fc_gelu_.resize(4 * C), logits_.resize(c.vocab_size), probs_.resize(c.block_size);
}

void Decoder::reset() { context_.clear(); }

size_t Decoder::memory_floats() const {
  size_t linear_layers = 0;
  for (int l = 0; l < model_.config.n_layer; l++) linear_layers += model_.attention_kind(l) == AttentionKind::Linear;
  const size_t per_layer_state = state_S_.size() / model_.config.n_layer + state_z_.size() / model_.config.n_layer;
  return k_cache_.size() + v_cache_.size() + linear_layers * per_layer_state;
}

const float* Decoder::push(int token) {
  const int block = model_.config.block_size - (mask_token_ >= 0);  // an MLM model needs a slot for [MASK]
  if ((int)context_.size() == block) {
    // Slide: keep the newest half. Their positions change, so their cached keys and values are stale.
    context_.erase(context_.begin(), context_.end() - block / 2);
    if (use_cache_) refill_cache();
  }
  context_.push_back(token);
  return use_cache_ ? step_cached(token, (int)context_.size() - 1) : step_full_recompute();
}

// Re-encodes the whole context in one batched forward (B = 1, T = its length) and copies each layer's keys and
// values out of that forward's qkv activations. Pushing the kept tokens one at a time would give the same cache
// (up to float rounding) but through T one-row products instead of one T-row sgemm per layer: after every slide
// that was as many extra single-token steps as the tokens generated since, doubling the work of a long sample.
void Decoder::refill_cache() {
  const ModelConfig& c = model_.config;
  const int T = (int)context_.size(), C = c.n_embd;
  if (T == 0) return;
  model_.forward(context_.data(), nullptr, 1, T);
  for (int l = 0; l < c.n_layer; l++) {
    const float* qkv = model_.layer_qkv(l);  // (1, T, 3C); row t is [q | k | v]
    if (cache_at_[l] != kNoCache) {
      float* keys = k_cache_.data() + cache_at_[l];
      float* values = v_cache_.data() + cache_at_[l];
      for (int t = 0; t < T; t++) {
        const float* row = qkv + (size_t)t * 3 * C;
        std::copy(row + C, row + 2 * C, keys + (size_t)t * C);
        std::copy(row + 2 * C, row + 3 * C, values + (size_t)t * C);
      }
    }
    // A linear layer's state: the same adds and removals, in the same order, as the forward's scan.
    if (model_.attention_kind(l) == AttentionKind::Linear)
      for (int t = 0; t < T; t++) linear_step(l, t, qkv + (size_t)t * 3 * C, att_.data());
  }
}

void Decoder::linear_step(int l, int pos, const float* qkv_row, float* out) {
  const ModelConfig& c = model_.config;
  const int C = c.n_embd, NH = c.n_head, HS = c.head_size();
  float* S = state_S_.data() + (size_t)l * NH * HS * HS;
  float* z = state_z_.data() + (size_t)l * C;
  if (pos == 0) {  // a new context (the first token, or after reset())
    std::fill(S, S + (size_t)NH * HS * HS, 0.0f), std::fill(z, z + C, 0.0f);
    state_begin_[l] = 0;
  }
  phi_features(phi_q_.data(), qkv_row, C);
  phi_features(phi_k_.data(), qkv_row + C, C);
  const KeyRange range = model_.masks()[l].keys_for(pos, pos + 1);
  for (int h = 0; h < NH; h++)
    linear_state_update(S + (size_t)h * HS * HS, z + h * HS, phi_k_.data() + h * HS, qkv_row + 2 * C + h * HS, 1.0f,
                        HS);
  for (; state_begin_[l] < range.begin; state_begin_[l]++) {  // window:W only: the key that left the window
    const float* key = k_cache_.data() + cache_at_[l] + (size_t)state_begin_[l] * C;
    const float* value = v_cache_.data() + cache_at_[l] + (size_t)state_begin_[l] * C;
    phi_features(phi_k_.data(), key, C);
    for (int h = 0; h < NH; h++)
      linear_state_update(S + (size_t)h * HS * HS, z + h * HS, phi_k_.data() + h * HS, value + h * HS, -1.0f, HS);
  }
  for (int h = 0; h < NH; h++)
    linear_state_read(out + h * HS, S + (size_t)h * HS * HS, z + h * HS, phi_q_.data() + h * HS, HS);
}

const float* Decoder::step_full_recompute() {
  input_ = context_;
  if (mask_token_ >= 0) input_.push_back(mask_token_);
  const int T = (int)input_.size(), V = model_.config.vocab_size;
  model_.forward(input_.data(), nullptr, 1, T);
  std::copy(model_.logits() + (size_t)(T - 1) * V, model_.logits() + (size_t)T * V, logits_.begin());
  return logits_.data();
}

// The forward pass of GPT::forward for one position (B = T = 1): the same block_forward (block.h), with attention
// over the cache and every product a matrix-vector product (matvec): for one row, sgemm's repacking of the weights
// costs more than the math.
const float* Decoder::step_cached(int token, int pos) {
  const ModelConfig& c = model_.config;
  const int C = c.n_embd, NH = c.n_head, HS = c.head_size();
  const GPTParams& p = model_.params();
  // A one-token "sequence" whose position-0 row is wpe row `pos`.
  embedding_forward(x_.data(), &token, p.wte, p.wpe + (size_t)pos * C, 1, 1, C);
  for (int l = 0; l < c.n_layer; l++) {
    // x_ is the block's input and, after the block, its output (residual3 → x_ for the next layer).
    const BlockBuffers buffers{ln_.data(), &mean_,      &rstd_, qkv_.data(),     att_.data(), gated_.data(),
                               res2_.data(), &mean_, &rstd_, fc_.data(), fc_gelu_.data(), res3_.data()};
    const float* gates = model_.gated() ? &model_.head_gates()[(size_t)l * NH] : nullptr;
    block_forward<OneRowProducts>(buffers, x_.data(), p.h[l], gates, c.attn_only, 1, C, NH,
                                  [&](const float* qkv, float* att_out) {
                                    // This position's key and value join the cache (if the layer keeps one).
                                    if (cache_at_[l] != kNoCache) {
                                      std::copy(qkv + C, qkv + 2 * C, k_cache_.data() + cache_at_[l] + (size_t)pos * C);
                                      std::copy(qkv + 2 * C, qkv + 3 * C,
                                                v_cache_.data() + cache_at_[l] + (size_t)pos * C);
                                    }
                                    // ---- the one place a layer's attention kind matters ----
                                    if (model_.attention_kind(l) == AttentionKind::Linear) {
                                      linear_step(l, pos, qkv, att_out);
                                      return;
                                    }
                                    const float* keys = k_cache_.data() + cache_at_[l];
                                    const float* values = v_cache_.data() + cache_at_[l];
                                    const KeyRange range = model_.masks()[l].keys_for(pos, pos + 1);
                                    for (int h = 0; h < NH; h++)
                                      attend_one_query(att_out + h * HS, probs_.data(), qkv + h * HS, keys + h * HS,
                                                       values + h * HS, C, range, model_.attn_scale, HS);
                                  });
    std::swap(x_, res3_);
  }
  layernorm_forward(ln_.data(), &mean_, &rstd_, x_.data(), p.ln_f_w, p.ln_f_b, 1, C);
  lm_head_matvec(logits_.data(), ln_.data(), p.wte, C, c.vocab_size);
  return logits_.data();
}
