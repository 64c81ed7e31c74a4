// Choosing the next token from logits: temperature, then top-k, then top-p (nucleus), then a draw.
#pragma once
#include <vector>

#include "base/settings.h"

class Rng;

struct SamplingOptions {
  float temperature = 0.8f;  // divides the logits; 0 = greedy (always the most likely token)
  int top_k = 40;            // keep the k most likely tokens; 0 = all
  float top_p = 0.95f;       // then keep the smallest set whose probability reaches p; 1 = all
};

// The flags of ./sample that set these options (base/settings.h).
const std::vector<Setting<SamplingOptions>>& sampling_settings();
// Throws on out-of-range options, naming the flag.
void validate(const SamplingOptions& options);

// `scratch` is reused between calls so that sampling allocates nothing per token.
int sample_token(const float* logits, int V, const SamplingOptions& options, Rng& rng,
                 std::vector<std::pair<float, int>>& scratch);
