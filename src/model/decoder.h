// Incremental decoding with a KV cache: each new token runs the model on one position and attends to the keys
// and values cached for the earlier ones, so a token costs O(T) attention work instead of a full O(T²) recompute.
// When the context reaches block_size the window slides: the oldest half is dropped and the rest re-encoded in
// one batched GPT::forward (positions change, so their cached keys and values must be recomputed).
// Masks that let a position see later ones (bidirectional, prefix) cannot be cached this way: for those
// models every step recomputes the whole context with GPT::forward — same answers, more work. A masked-LM model
// (mask_token ≥ 0) is asked for the next character by appending [MASK] and reading the prediction there.
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

 private:
  const float* step_cached(int token, int pos);
  void refill_cache();  // the K/V cache of the whole context, from one GPT::forward
  const float* step_full_recompute();

  GPT& model_;
  int mask_token_;
  bool use_cache_;
  std::vector<int> input_;  // context (+ [MASK]) for the full recompute
  std::vector<int> context_;
  std::vector<float> k_cache_, v_cache_;  // (L, block_size, C) each
  // One position's activations, reused at every step.
  std::vector<float> x_, ln_, qkv_, att_, gated_, res2_, res3_, fc_, fc_gelu_, logits_, probs_;
  float mean_ = 0, rstd_ = 0;
};
