// Measuring a model: mean next-token loss on a split (during training) and on a whole text (./sample --score).
#pragma once
#include <vector>

#include "model.h"

class Rng;

// Mean loss over `iters` random batches of (B, T) drawn with `rng`.
double estimate_loss(GPT& model, const std::vector<int>& tokens, int B, int T, int iters, Rng& rng);

struct TextScore {
  double nats_per_token = 0;  // mean −ln p(next character)
  double bits_per_token = 0;  // the same in bits: nats / ln 2
  long predictions = 0;       // characters predicted (all but the first)
};

// Every character after the first is predicted once, from up to block_size characters of left context:
// windows of block_size start every block_size/2 characters, and each scores only the predictions the previous
// window did not make. Throws if `tokens` holds fewer than 2 tokens.
TextScore score_text(GPT& model, const std::vector<int>& tokens, int batch = 16);
