#include "generate/generate.h"

#include "data/objective.h"
#include "model/decoder.h"

void generate(GPT& model, const std::vector<int>& prompt, int n, const SamplingOptions& options, Rng& rng,
              int mask_token, const std::function<void(int)>& on_token) {
  model.set_prefix_length((int)prompt.size());
  Decoder decoder(model, mask_token);
  std::vector<std::pair<float, int>> scratch;
  const float* logits = nullptr;
  for (int id : prompt) logits = decoder.push(id);
  for (int i = 0; i < n; i++) {
    const int next = sample_token(logits, model.config.vocab_size, options, rng, scratch);
    on_token(next);
    logits = decoder.push(next);
  }
}
