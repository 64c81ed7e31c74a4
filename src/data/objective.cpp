#include "data/objective.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ops/cross_entropy.h"
#include "data/dataset.h"
#include "base/rng.h"

Objective parse_objective(const std::string& text) {
  if (text == "clm") return Objective::CLM;
  if (text == "mlm") return Objective::MLM;
  if (text == "prefix-lm") return Objective::PrefixLM;
  throw std::runtime_error("unknown objective '" + text + "' (expected clm, mlm or prefix-lm)");
}

std::string to_string(Objective objective) {
  switch (objective) {
    case Objective::CLM: return "clm";
    case Objective::MLM: return "mlm";
    case Objective::PrefixLM: return "prefix-lm";
  }
  return "?";
}

std::string default_mask(Objective objective) {
  switch (objective) {
    case Objective::CLM: return "causal";
    case Objective::MLM: return "bidirectional";
    case Objective::PrefixLM: return "prefix:0";
  }
  return "causal";
}

void check_no_leak(Objective objective, const std::vector<AttentionMask>& masks, int T) {
  if (objective == Objective::MLM) return;
  for (size_t l = 0; l < masks.size(); l++) {
    // A prefix-LM's prefix masks are safe: every position with a target sees only its own past.
    if (objective == Objective::PrefixLM && masks[l].kind == AttentionMask::Prefix) continue;
    if (masks[l].sees_future(T))
      throw std::runtime_error(
          "--objective " + to_string(objective) + " with mask '" + masks[l].to_string() + "' on layer " +
          std::to_string(l) + " leaks the answer: a position must predict the next character, and this mask lets " +
          "it see that character, so the loss would fall by copying instead of by learning. Use --mask causal " +
          "(or window:W), train BERT-style with --objective mlm, or add --allow-leak to watch the leak happen.");
  }
}

BatchMaker::BatchMaker(Objective obj, float mlm_rate, int mask_token, int num_chars)
    : objective(obj), mlm_rate_(mlm_rate), mask_token_(mask_token), num_chars_(num_chars) {
  if (objective == Objective::MLM && (mask_token < 0 || num_chars <= 0))
    throw std::runtime_error("MLM needs a [MASK] token in the vocabulary");
  if (!(mlm_rate > 0.0f && mlm_rate <= 1.0f)) throw std::runtime_error("--mlm-rate must be in (0, 1]");
}

void BatchMaker::corrupt(int* x, int* y, int T, Rng& rng) {
  const int chosen = std::max(1, (int)std::lround(mlm_rate_ * T));
  positions_.resize(T);
  for (int t = 0; t < T; t++) positions_[t] = t, y[t] = kNoTarget;
  for (int k = 0; k < chosen; k++) {  // the first `chosen` steps of a Fisher–Yates shuffle: distinct positions
    std::swap(positions_[k], positions_[k + rng.below(T - k)]);
    const int t = positions_[k];
    y[t] = x[t];
    const float u = rng.uniform();
    if (u < 0.8f) x[t] = mask_token_;
    else if (u < 0.9f) x[t] = rng.below(num_chars_);
    // else: keep the true character, so the model cannot assume that every visible character is genuine
  }
}

int BatchMaker::next(const std::vector<int>& tokens, int B, int T, Rng& rng, int* x, int* y) {
  sample_batch(tokens, B, T, rng, x, y);
  switch (objective) {
    case Objective::CLM: return -1;
    case Objective::MLM:
      // sample_batch put the window in x; corrupt() turns it into the masked input and its targets.
      for (int b = 0; b < B; b++) corrupt(x + b * T, y + b * T, T, rng);
      return -1;
    case Objective::PrefixLM: {
      const int N = T > 1 ? 1 + rng.below(T - 1) : 0;  // 1 … T−1: always some prefix and some suffix
      for (int b = 0; b < B; b++)
        for (int t = 0; t < N - 1; t++) y[b * T + t] = kNoTarget;  // inside the prefix the next token is visible
      return N;
    }
  }
  return -1;
}
