#include "lab/head_intervals.h"

#include <algorithm>
#include <stdexcept>

#include "base/rng.h"
#include "lab/pruning.h"
#include "model/model.h"

std::vector<HeadIntervals> head_intervals(GPT& model, int vocab, int B, uint64_t seed,
                                          const std::vector<HeadScores>& with_pronouns, int resamples) {
  const int L = model.config.n_layer, NH = model.config.n_head;
  const int n = std::min(model.config.block_size, 2 * vocab) / 2, T = 2 * n;
  if (n < 2) throw std::runtime_error("head_intervals: need block_size ≥ 4 and at least 2 characters");
  Rng rng(seed);  // the same sequences as score_heads(model, vocab, B, seed)
  std::vector<int> x = repeated_random_sequences(B, n, vocab, rng);
  model.forward(x.data(), nullptr, B, T);
  std::vector<HeadIntervals> out((size_t)L * NH);
  for (int l = 0; l < L; l++) {
    const float* probs = model.mixing_weights(l);
    for (int h = 0; h < NH; h++) {
      // One HeadScores per sequence: its sums and counts are the clusters.
      std::vector<HeadScores> per(B);
      for (int b = 0; b < B; b++)
        score_pattern(per[b], probs + ((size_t)b * NH + h) * T * T, &x[(size_t)b * T], T, model.masks()[l]);
      auto interval = [&](Mean HeadScores::*m, uint64_t s) {
        std::vector<double> sums(B), counts(B);
        for (int b = 0; b < B; b++) sums[b] = (per[b].*m).sum, counts[b] = (double)(per[b].*m).count;
        return bootstrap_ratio(sums, counts, resamples, s);
      };
      HeadIntervals& iv = out[(size_t)l * NH + h];
      const uint64_t s = 1000 + 10 * (uint64_t)(l * NH + h);
      iv.previous_token = interval(&HeadScores::previous_token, s);
      iv.duplicate_token = interval(&HeadScores::duplicate_token, s + 1);
      iv.induction = interval(&HeadScores::induction, s + 2);
      iv.sink = interval(&HeadScores::sink, s + 3);
      iv.confidence = interval(&HeadScores::confidence, s + 4);
      const HeadScores& p = with_pronouns[(size_t)l * NH + h];
      auto values = [](const Mean& m) { return std::vector<double>(m.values.begin(), m.values.end()); };
      iv.pronoun = bootstrap_mean(values(p.pronoun), resamples, s + 5);
      iv.pronoun_baseline = bootstrap_mean(values(p.pronoun_baseline), resamples, s + 6);
    }
  }
  return out;
}

std::string head_intervals_table(const std::vector<HeadIntervals>& intervals, int NH) {
  std::string out = "95% bootstrap intervals (sequences resampled for the pattern scores, pronouns for the pronoun "
                    "columns)\nhead   prev                  dup                   induct                sink            "
                    "      conf                  pronoun               other names\n";
  for (size_t i = 0; i < intervals.size(); i++) {
    const HeadIntervals& v = intervals[i];
    std::string line = head_name((int)i, NH);
    line.resize(7, ' ');
    for (const Interval* c : {&v.previous_token, &v.duplicate_token, &v.induction, &v.sink, &v.confidence,
                              &v.pronoun, &v.pronoun_baseline}) {
      std::string cell = format_interval(*c);
      cell.resize(22, ' ');
      line += cell;
    }
    out += line + "\n";
  }
  return out;
}
