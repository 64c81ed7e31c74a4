// Training objectives: what the model is shown (x) and what it must predict (y), for one batch of windows w of
// T+1 tokens. The mask decides what each position may look at; the objective decides what it is asked.
//   clm        x = w[0:T]             y = w[1:T+1]                       next token everywhere (GPT)
//   mlm        x = corrupt(w[0:T])    y = w at the chosen positions      fill in the blanks (BERT)
//   prefix-lm  x = w[0:T]             y = w[1:T+1] at positions ≥ N−1    the first N tokens see each other
//                                                                         (T5, UniLM); N is drawn every batch
// MLM corruption (BERT): choose rate·T positions per sequence; replace 80% of them with [MASK], 10% with a random
// character, keep 10%; the loss is on the chosen positions only, and the choice is redrawn every batch.
#pragma once
#include <string>
#include <vector>

#include "ops/mask.h"

class Rng;

enum class Objective { CLM, MLM, PrefixLM };

Objective parse_objective(const std::string& text);  // "clm", "mlm", "prefix-lm"; throws otherwise
std::string to_string(Objective objective);
// The mask an objective is trained with unless the user picks one: causal, bidirectional, prefix:0.
std::string default_mask(Objective objective);

constexpr const char* kMaskToken = "[MASK]";

// Throws with an explanation when the masks let a position see the token it is asked to predict: the loss
// would then fall by copying the answer instead of by learning (next-token prediction with a bidirectional
// layer, for example). MLM hides its answers by corrupting the input, so it never leaks this way.
void check_no_leak(Objective objective, const std::vector<AttentionMask>& masks, int T);

class BatchMaker {
 public:
  // mask_token and num_chars matter for MLM only: the [MASK] id, and random replacements come from [0, num_chars).
  BatchMaker(Objective objective, float mlm_rate = 0.15f, int mask_token = -1, int num_chars = 0);
  // Fills x and y, each (B, T), from random windows of `tokens`. Returns the prefix length N for prefix-LM
  // (pass it to GPT::set_prefix_length before the forward pass) and −1 for the other objectives.
  int next(const std::vector<int>& tokens, int B, int T, Rng& rng, int* x, int* y);
  // The MLM corruption of one sequence in place: x holds w[0:T] on entry; y receives targets or kNoTarget.
  void corrupt(int* x, int* y, int T, Rng& rng);

  Objective objective;

 private:
  float mlm_rate_;
  int mask_token_, num_chars_;
  std::vector<int> positions_;  // scratch for choosing MLM positions without allocating per batch
};
