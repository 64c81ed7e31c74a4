#include "evaluate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cross_entropy.h"
#include "dataset.h"
#include "rng.h"

double estimate_loss(GPT& model, const std::vector<int>& tokens, int B, int T, int iters, Rng& rng) {
  std::vector<int> x((size_t)B * T), y((size_t)B * T);
  double total = 0;
  for (int i = 0; i < iters; i++) {
    sample_batch(tokens, B, T, rng, x.data(), y.data());
    total += model.forward(x.data(), y.data(), B, T);
  }
  return total / iters;
}

TextScore score_text(GPT& model, const std::vector<int>& tokens, int batch) {
  const long n = (long)tokens.size();
  if (n < 2) throw std::runtime_error("need at least 2 characters to score");
  const int T = (int)std::min<long>(model.config.block_size, n - 1);
  const int stride = std::max(1, T / 2);
  // Window starts: every `stride`, and a last one flush with the end so that the final characters are covered.
  std::vector<long> starts;
  for (long s = 0; s + T < n; s += stride) starts.push_back(s);
  if (starts.back() + T < n - 1) starts.push_back(n - 1 - T);

  std::vector<int> x((size_t)batch * T), y((size_t)batch * T);
  long scored_until = 0;  // predictions of inputs at positions < scored_until are done
  double total = 0;
  long count = 0;
  for (size_t w0 = 0; w0 < starts.size(); w0 += batch) {
    const int B = (int)std::min<size_t>(batch, starts.size() - w0);
    int counted = 0;
    for (int b = 0; b < B; b++) {
      const long s = starts[w0 + b];
      for (int t = 0; t < T; t++) {
        x[b * T + t] = tokens[s + t];
        y[b * T + t] = s + t >= scored_until ? tokens[s + t + 1] : kNoTarget;
        counted += y[b * T + t] != kNoTarget;
      }
      scored_until = s + T;
    }
    if (counted) total += (double)model.forward(x.data(), y.data(), B, T) * counted;
    count += counted;
  }
  TextScore score;
  score.predictions = count;
  score.nats_per_token = total / count;
  score.bits_per_token = score.nats_per_token / std::log(2.0);
  return score;
}
