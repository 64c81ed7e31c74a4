// What the decoder tests (test_sampling.cpp, test_decoder_shadow.cpp) share: random token ids, and the last row of
// GPT::forward's logits over a context, the full recompute every decoder answer is compared with.
#pragma once
#include <cstdint>
#include <vector>

#include "base/rng.h"
#include "model/model.h"

namespace testutil {

inline std::vector<int> random_tokens(int n, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int> t(n);
  for (int& x : t) x = rng.below(vocab);
  return t;
}

// Last row of GPT::forward's logits for `context` (B = 1, T = its length).
inline std::vector<float> full_logits(GPT& model, const std::vector<int>& context) {
  const int T = (int)context.size(), V = model.config.vocab_size;
  model.forward(context.data(), nullptr, 1, T);
  return std::vector<float>(model.logits() + (size_t)(T - 1) * V, model.logits() + (size_t)T * V);
}

}  // namespace testutil
