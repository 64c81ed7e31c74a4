#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ops/cross_entropy.h"
#include "data/dataset.h"
#include "data/objective.h"
#include "base/rng.h"

double estimate_loss(GPT& model, BatchMaker& batches, const std::vector<int>& tokens, int B, int T, int iters,
                     Rng& rng, const Reducer& reducer) {
  Replicas alone(model, 1);
  return estimate_loss(alone, batches, tokens, B, T, iters, rng, reducer);
}

double estimate_loss(Replicas& models, BatchMaker& batches, const std::vector<int>& tokens, int B, int T, int iters,
                     Rng& rng, const Reducer& reducer) {
  std::vector<int> x((size_t)B * T), y((size_t)B * T);
  // One process: rows [0, B), and loss·n/n gives back the loss.
  const Rows rows = reducer.rows(B);
  std::vector<double> sums(2 * (size_t)iters);  // per batch: Σ loss over this process's targets, their number
  for (int i = 0; i < iters; i++) {
    const int prefix = batches.next(tokens, B, T, rng, x.data(), y.data());
    if (prefix >= 0) models.set_prefix_length(prefix);
    const size_t first = (size_t)rows.begin * T;
    const LossSum loss = models.forward(x.data() + first, y.data() + first, rows.count(), T);
    sums[2 * i] = loss.total, sums[2 * i + 1] = loss.count;
  }
  reducer.sum(sums.data(), (int)sums.size());
  double total = 0;
  for (int i = 0; i < iters; i++)
    if (sums[2 * i + 1] > 0) total += sums[2 * i] / sums[2 * i + 1];
  return total / iters;
}

std::vector<ScoreWindow> score_windows(long n, int block_size) {
  if (n < 2) throw std::runtime_error("need at least 2 characters to score");
  const int T = (int)std::min<long>(block_size, n - 1);
  const int stride = std::max(1, T / 2);
  // Window starts: every `stride`, and a last one flush with the end so that the final characters are covered.
  std::vector<long> starts;
  for (long s = 0; s + T < n; s += stride) starts.push_back(s);
  if (starts.back() + T < n - 1) starts.push_back(n - 1 - T);
  std::vector<ScoreWindow> windows;
  long scored_until = 0;  // predictions of inputs at positions < scored_until are done
  for (long s : starts) {
    windows.push_back({s, T, std::max(s, scored_until)});
    scored_until = s + T;
  }
  return windows;
}

TextScore score_text(GPT& model, const std::vector<int>& tokens, int batch) {
  const std::vector<ScoreWindow> windows = score_windows((long)tokens.size(), model.config.block_size);
  const int T = windows[0].length;
  std::vector<int> x((size_t)batch * T), y((size_t)batch * T);
  double total = 0;
  long count = 0;
  for (size_t w0 = 0; w0 < windows.size(); w0 += batch) {
    const int B = (int)std::min<size_t>(batch, windows.size() - w0);
    int counted = 0;
    for (int b = 0; b < B; b++) {
      const ScoreWindow& w = windows[w0 + b];
      for (int t = 0; t < T; t++) {
        x[b * T + t] = tokens[w.start + t];
        y[b * T + t] = w.start + t >= w.first ? tokens[w.start + t + 1] : kNoTarget;
        counted += y[b * T + t] != kNoTarget;
      }
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

// Scores rows whose only target is the last position, in batches. Row r is tokens[end_r − n, end_r) with
// n = T (or T − 1 followed by [MASK] for an MLM model), and the target is tokens[end_r].
static CharScore score_last_positions(Replicas& models, const std::vector<int>& tokens, const std::vector<long>& ends,
                                      int mask_token, const Reducer& reducer) {
  const int T = models.model().config.block_size, V = models.model().config.vocab_size, batch = 32;
  // Every input character is left context: let a prefix-LM see all of it, and put its masks back afterwards
  // even if a forward pass throws.
  struct RestoreMasks {
    Replicas& models;
    std::vector<AttentionMask> saved;
    ~RestoreMasks() {
      for (int r = 0; r < models.count(); r++) models[r].set_masks(saved);
    }
  } restore{models, models.model().masks()};
  models.set_prefix_length(T);
  std::vector<int> x((size_t)batch * T), y((size_t)batch * T, kNoTarget);
  // Each process scores its share of the rows and the sums are added up.
  const Rows mine = reducer.rows((int)ends.size());
  CharScore score;
  double nats = 0;
  long correct = 0;
  std::vector<long> slice_correct(models.count());
  std::vector<double> slice_nats(models.count());
  for (size_t r0 = mine.begin; r0 < (size_t)mine.end; r0 += batch) {
    const int B = (int)std::min<size_t>(batch, mine.end - r0);
    for (int b = 0; b < B; b++) {
      const long end = ends[r0 + b];
      int* row = x.data() + (size_t)b * T;
      if (mask_token >= 0) {  // MLM: T−1 characters of context, then [MASK] where the answer goes
        for (int t = 0; t < T - 1; t++) row[t] = tokens[end - (T - 1) + t];
        row[T - 1] = mask_token;
        y[(size_t)b * T + T - 1] = tokens[end];
      } else {  // next-token models predict tokens[end] at the position of tokens[end − 1]
        for (int t = 0; t < T; t++) row[t] = tokens[end - T + t];
        y[(size_t)b * T + T - 1] = tokens[end];
      }
    }
    // One target per row: Σ loss is the slices' sum, and each replica counts its rows' argmax hits.
    std::fill(slice_correct.begin(), slice_correct.end(), 0);
    std::fill(slice_nats.begin(), slice_nats.end(), 0.0);
    models.split(B, [&](int r, Rows rows) {
      if (rows.count() == 0) return;
      GPT& m = models[r];
      const size_t first = (size_t)rows.begin * T;
      slice_nats[r] = (double)m.forward(x.data() + first, y.data() + first, rows.count(), T) * rows.count();
      for (int b = 0; b < rows.count(); b++) {
        const float* z = m.logits() + ((size_t)b * T + T - 1) * V;
        slice_correct[r] += std::max_element(z, z + V) - z == tokens[ends[r0 + rows.begin + b]];
      }
    });
    for (int r = 0; r < models.count(); r++) nats += slice_nats[r], correct += slice_correct[r];  // in order
  }
  double sums[2] = {nats, (double)correct};
  reducer.sum(sums, 2);
  nats = sums[0], correct = (long)sums[1];
  score.count = (long)ends.size();
  score.bits = score.count ? nats / score.count / std::log(2.0) : 0;
  score.accuracy = score.count ? (double)correct / score.count : 0;
  return score;
}

CharScore next_char_score(GPT& model, const std::vector<int>& tokens, int count, uint64_t seed, int mask_token,
                          const Reducer& reducer) {
  Replicas alone(model, 1);
  return next_char_score(alone, tokens, count, seed, mask_token, reducer);
}

CharScore next_char_score(Replicas& models, const std::vector<int>& tokens, int count, uint64_t seed, int mask_token,
                          const Reducer& reducer) {
  const long T = models.model().config.block_size;
  if ((long)tokens.size() <= T) throw std::runtime_error("the text is too short to score with a context of " +
                                                         std::to_string(T) + " characters");
  Rng rng(seed);
  std::vector<long> ends(count);
  for (long& end : ends) end = T + rng.below((int)(tokens.size() - T));  // any t with a full context before it
  return score_last_positions(models, tokens, ends, mask_token, reducer);
}

CharScore masked_char_score(GPT& model, const std::vector<int>& tokens, int windows, float rate, uint64_t seed,
                            int mask_token) {
  const int T = model.config.block_size, V = model.config.vocab_size;
  if ((long)tokens.size() < (long)T * (windows + 1))
    throw std::runtime_error("the text is too short for " + std::to_string(windows) + " windows of " +
                             std::to_string(T) + " characters");
  // Window w covers tokens[(w+1)·T, (w+2)·T): a whole window of left context precedes it for the left-only case.
  Rng rng(seed);
  std::vector<std::vector<int>> chosen(windows);
  std::vector<long> ends;
  for (int w = 0; w < windows; w++)
    for (int t = 0; t < T; t++)
      if (rng.uniform() < rate) chosen[w].push_back(t), ends.push_back((long)(w + 1) * T + t);
  if (mask_token < 0) {
    Replicas alone(model, 1);
    return score_last_positions(alone, tokens, ends, -1, one_process());
  }

  std::vector<int> x((size_t)T), y((size_t)T);
  CharScore score;
  double nats = 0;
  long correct = 0;
  for (int w = 0; w < windows; w++) {
    if (chosen[w].empty()) continue;
    const long start = (long)(w + 1) * T;
    for (int t = 0; t < T; t++) x[t] = tokens[start + t], y[t] = kNoTarget;
    for (int t : chosen[w]) y[t] = x[t], x[t] = mask_token;
    nats += (double)model.forward(x.data(), y.data(), 1, T) * chosen[w].size();
    for (int t : chosen[w]) {
      const float* z = model.logits() + (size_t)t * V;
      correct += std::max_element(z, z + V) - z == y[t];
    }
    score.count += (long)chosen[w].size();
  }
  score.bits = score.count ? nats / score.count / std::log(2.0) : 0;
  score.accuracy = score.count ? (double)correct / score.count : 0;
  return score;
}
