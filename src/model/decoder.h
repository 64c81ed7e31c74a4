// Incremental decoding: each new token runs the model on one position, and each layer's mixer reads what it kept
// about the earlier positions (its state: Mixer::state_floats and Mixer::step, mixer.h), so a token costs the
// mixer's one-step work instead of a full forward over the context.
// When the context reaches block_size the window slides: the oldest half is dropped and the rest re-encoded in
// one batched forward through the same block_forward as GPT::forward (positions change, so what the layers kept
// about them must be recomputed).
// Masks that let a position see later ones (bidirectional, prefix) cannot be decoded this way: for those
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
  // Floats the decoder keeps about the past: the sum of the layers' mixer states.
  size_t memory_floats() const { return state_.size(); }

 private:
  const float* step_cached(int token, int pos);
  void refill_cache();  // every layer's state for the whole context, from one batched forward
  const float* step_full_recompute();

  GPT& model_;
  int mask_token_;
  bool use_cache_;
  std::vector<int> input_;  // context (+ [MASK]) for the full recompute
  std::vector<int> context_;
  std::vector<float> state_;         // the layers' mixer states, layer l's at state_at_[l]
  std::vector<size_t> state_at_;
  std::vector<float> step_scratch_;  // the largest Mixer::step_scratch_floats
  // One position's activations, reused at every step.
  std::vector<float> x_, ln_, res2_, res3_, fc_, fc_gelu_, logits_;
  float mean_ = 0, rstd_ = 0;
  // The re-encode's activations, for up to block_size rows (T, ·), and one layer's mixer buffers at a time.
  std::vector<float> batch_x_, batch_ln_, batch_res2_, batch_res3_, batch_fc_, batch_fc_gelu_, batch_stats_;
  std::vector<float> batch_saved_, batch_scratch_;
};
