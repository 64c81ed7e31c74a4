// Error bars for ./inspect heads. Every attention mass in the table gets a 95% percentile-bootstrap interval:
//   pattern scores (previous-token, duplicate, induction, sink, confidence) are means over query rows, and the
//   rows of one sequence share its keys, so they are not independent: the sequences are resampled (cluster
//   bootstrap of Σ mass / Σ rows, bootstrap_ratio in pronouns.h);
//   the pronoun columns (mass on the antecedent, mean mass on another name) are one value per pronoun: the
//   pronouns are resampled.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lab/head_scores.h"
#include "lab/pronouns.h"

class GPT;

// Per head (layer-major): intervals for prev, dup, induct, sink, conf on the same sequences score_heads uses
// (same vocab, B and seed).
struct HeadIntervals {
  Interval previous_token, duplicate_token, induction, sink, confidence, pronoun, pronoun_baseline;
};
std::vector<HeadIntervals> head_intervals(GPT& model, int vocab, int B, uint64_t seed,
                                          const std::vector<HeadScores>& with_pronouns, int resamples = 1000);
// The table `./inspect heads` prints under the scores: one row per head, "value [lo, hi]" per column.
std::string head_intervals_table(const std::vector<HeadIntervals>& intervals, int n_head);
