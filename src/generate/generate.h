// Generation: continue a prompt one token at a time, left to right.
#pragma once
#include <functional>
#include <vector>

#include "generate/sampling.h"

class GPT;
struct ModelConfig;
class Rng;

// Threads worth using to generate from this model. A new token (and its shadow, which replaces the re-encode after
// the context window slides: model/decoder.h) is a chain of one- or two-row matrix-vector products on the calling
// thread; splitting a product that small between threads costs more in wake-ups than it saves (ops/linear.h), and
// the full recompute of a model whose masks see the future is the one part of generation that runs in parallel.
// The measured rule (docs/performance.md: the tiny model samples no faster on 2 threads than on 1): a model with
// fewer than 4M weights in its blocks (12·n_layer·n_embd²) generates on one thread, whatever --threads says; a
// larger one uses them all.
int generation_threads(const ModelConfig& config);

// Continues `prompt` (non-empty) by n tokens, calling on_token with each as soon as it is chosen (so text can
// stream), on at most generation_threads(model.config) threads. A prefix-LM reads the prompt as its bidirectional
// prefix; an MLM model (mask_token ≥ 0) predicts at an appended [MASK] — allowed, and visibly worse than a model
// trained to generate.
void generate(GPT& model, const std::vector<int>& prompt, int n, const SamplingOptions& options, Rng& rng,
              int mask_token, const std::function<void(int)>& on_token);
