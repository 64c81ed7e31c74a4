#include "generate/fill.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/model.h"

std::vector<int> fill_blanks(GPT& model, std::vector<int> ids, int mask_token, int num_chars) {
  const int T = (int)ids.size(), V = model.config.vocab_size;
  if (num_chars <= 0 || num_chars > V) throw std::runtime_error("--fill: the model has no character tokens");
  if (T > model.config.block_size)
    throw std::runtime_error("--fill: the text has " + std::to_string(T) + " characters; this model reads at most " +
                             std::to_string(model.config.block_size));
  while (std::count(ids.begin(), ids.end(), mask_token) > 0) {
    model.forward(ids.data(), nullptr, 1, T);
    int best_position = -1, best_token = -1;
    float best_prob = -1.0f;
    for (int t = 0; t < T; t++) {
      if (ids[t] != mask_token) continue;
      const float* z = model.logits() + (size_t)t * V;
      // softmax over the character tokens only: probability of the argmax = 1 / Σ exp(z_v − z_max)
      const int top = (int)(std::max_element(z, z + num_chars) - z);
      double denominator = 0;
      for (int v = 0; v < num_chars; v++) denominator += std::exp((double)z[v] - z[top]);
      const float prob = (float)(1.0 / denominator);
      if (prob > best_prob) best_prob = prob, best_position = t, best_token = top;
    }
    if (best_position < 0)  // every probability was NaN: weights so large that the logits overflowed
      throw std::runtime_error("--fill: the model's predictions are not finite numbers");
    ids[best_position] = best_token;
  }
  return ids;
}
