// Generation: continue a prompt one token at a time, left to right.
#pragma once
#include <functional>
#include <vector>

#include "generate/sampling.h"

class GPT;
class Rng;

// Threads: every OpenMP thread (--threads). The cached decoder splits each token's products between them through
// a DecodeTeam (model/decoder.h, base/decode_team.h); the full recompute of a model whose masks see the future
// splits its ops as training does.
//
// Continues `prompt` (non-empty) by n tokens, calling on_token with each as soon as it is chosen (so text can
// stream). A prefix-LM reads the prompt as its bidirectional prefix; an MLM model (mask_token ≥ 0) predicts at an
// appended [MASK] — allowed, and visibly worse than a model trained to generate.
void generate(GPT& model, const std::vector<int>& prompt, int n, const SamplingOptions& options, Rng& rng,
              int mask_token, const std::function<void(int)>& on_token);
