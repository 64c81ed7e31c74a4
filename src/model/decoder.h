// Incremental decoding with a KV cache: each new token runs the model on one position and attends to the keys
// and values cached for the earlier ones, so a token costs O(T) attention work instead of a full O(T²) recompute.
// When the context reaches block_size the window slides: the oldest half is dropped and the rest re-encoded in
// one batched GPT::forward (positions change, so their cached keys and values must be recomputed).
// Masks that let a position see later ones (bidirectional, prefix) cannot be cached this way: for those
// models every step recomputes the whole context with GPT::forward — same answers, more work. A masked-LM model
// (mask_token ≥ 0) is asked for the next character by appending [MASK] and reading the prediction there.
// Linear-attention layers (ops/linear_attention.h) keep no keys and values: their whole past is the running state
// S (HS×HS) and z (HS) per head, updated in O(HS²) per token, so their memory does not grow with the context. The
// exception is a linear layer with a window:W mask: removing the key that leaves the window needs that key, so it
// keeps a key/value cache like a softmax layer.
#pragma once
#include <vector>

#include "model/model.h"

class Decoder {
 public:
  explicit Decoder(GPT& model, int mask_token = -1);
  // Appends a token to the context and returns the logits (V) for the token after it.
  const float* push(int token);
  void reset();
  const std::vector<int>& context() const { return context_; }
  bool uses_cache() const { return use_cache_; }
  // Floats the decoder keeps about the past: key/value caches plus linear layers' states. A causal linear layer
  // adds NH·(HS² + HS) whatever the context length; a softmax layer 2·block_size·C.
  size_t memory_floats() const;

 private:
  const float* step_cached(int token, int pos);
  void refill_cache();  // the K/V cache (and linear states) of the whole context, from one GPT::forward
  // Linear layer l at position pos: adds key pos to the state, removes the keys the mask no longer shows, then
  // reads the state with the query into out (C). qkv: (3C) row of that position.
  void linear_step(int l, int pos, const float* qkv_row, float* out);
  const float* step_full_recompute();

  GPT& model_;
  int mask_token_;
  bool use_cache_;
  std::vector<int> input_;  // context (+ [MASK]) for the full recompute
  std::vector<int> context_;
  // Keys and values of the layers that need them (softmax, and linear window:W), (block_size, C) per such layer
  // at offset cache_at_[l]; other layers have no cache (cache_at_[l] = npos).
  std::vector<float> k_cache_, v_cache_;
  std::vector<size_t> cache_at_;
  static constexpr size_t kNoCache = (size_t)-1;
  // Linear layers' state: S (NH, HS, HS) and z (NH, HS) per layer, holding keys [state_begin_[l], next position).
  std::vector<float> state_S_, state_z_;
  std::vector<int> state_begin_;
  std::vector<float> phi_q_, phi_k_;  // (C) φ of one position's queries and keys
  // One position's activations, reused at every step.
  std::vector<float> x_, ln_, qkv_, att_, gated_, res2_, res3_, fc_, fc_gelu_, logits_, probs_;
  float mean_ = 0, rstd_ = 0;
};
