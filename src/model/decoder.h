// Incremental decoding: each new token runs the model on one position, and each layer's mixer reads what it kept
// about the earlier positions (its state: Mixer::state_floats and Mixer::step, mixer.h), so a token costs the
// mixer's one-step work instead of a full forward over the context.
// When the context reaches block_size B the window slides: the oldest tokens are dropped and the newest H = ⌊B/2⌋
// kept, now at positions 0 … H−1, so the layers' states must become what a fresh start on those H tokens leaves.
// That state is built while the context fills, by a shadow: with D = B − H, the kept tokens are the context's
// w[D … B), each known when it is pushed, and the state of w[D … D+j] at positions 0 … j depends on nothing else.
// So a push at position p ≥ D also steps the shadow at position p − D, into a second set of states, as a second
// row of the same block_forward (its products read each weight once for both rows: matvec2, Mixer::step2). At the
// slide the shadow's states are swapped in: no re-encode. The rule needs no special case: a prompt is pushed token
// by token through the same push, and after reset() or a slide the shadow starts again at position D, its step at
// position 0 resetting its state. What it costs against the re-encode it replaced: docs/performance.md, "Sampling
// on the Xeon: the shadow stream instead of the slides' re-encode".
// Masks that let a position see later ones (bidirectional, prefix) cannot be decoded this way: for those
// models every step recomputes the whole context with GPT::forward — same answers, more work. A masked-LM model
// (mask_token ≥ 0) is asked for the next character by appending [MASK] and reading the prediction there.
// Threads: with more than one OpenMP thread (--threads), the cached decoder's products are split between a
// DecodeTeam of that many threads (base/decode_team.h, at most DecodeTeam::kMaxThreads): the same logits, bit for
// bit, and each core keeps its share of the weights in its own cache. The team reads a copy of each product's
// weights laid out by share, made at the first token (as many floats as those weights: 0.8M for the tiny model),
// so the model's weights must not change while a Decoder with a team lives.
#pragma once
#include <memory>
#include <vector>

#include "base/decode_team.h"
#include "model/model.h"

class Decoder {
 public:
  explicit Decoder(GPT& model, int mask_token = -1);
  // Appends a token to the context and returns the logits (V) for the token after it.
  const float* push(int token);
  void reset();
  const std::vector<int>& context() const { return context_; }
  bool uses_cache() const { return use_cache_; }
  // Floats the decoder keeps about the past context: the sum of the layers' mixer states. The shadow keeps as
  // many again.
  size_t memory_floats() const { return state_.size(); }
  // The layers' states (memory_floats() of them, layer l's first) and the shadow's: what the tests compare.
  const std::vector<float>& state() const { return state_; }
  const std::vector<float>& shadow_state() const { return shadow_; }
  // The context position at which the shadow starts: block_size − ⌊block_size/2⌋ (or −1 without the cache).
  int shadow_start() const { return use_cache_ ? shadow_start_ : -1; }

 private:
  const float* step_cached(int token, int pos);
  const float* step_full_recompute();

  GPT& model_;
  int mask_token_;
  bool use_cache_;
  int shadow_start_;
  std::vector<int> input_;  // context (+ [MASK]) for the full recompute
  std::vector<int> context_;
  std::vector<float> state_, shadow_;  // the layers' mixer states, layer l's at state_at_[l]
  std::vector<size_t> state_at_;
  std::vector<float> step_scratch_;  // two rows of the largest Mixer::step_scratch_floats
  size_t step_scratch_row_ = 0;
  // Two rows (the token, the shadow) of one position's activations, reused at every step.
  std::vector<float> x_, ln_, res2_, res3_, fc_, fc_gelu_, logits_;
  float mean_[2] = {}, rstd_[2] = {};
  std::unique_ptr<DecodeTeam> team_;  // null on one thread or without the cache
};
