// Pronoun resolution, tested as a reviewer would (Clark et al. 2019, "What Does BERT Look At?", §5):
//
//   candidates   the mentions of people (and groups) by name in the pronoun's story, before it, inside the window
//                the model reads; a case is kept when they name at least two different people
//   choice       a head "chooses" the candidate mention with the most attention mass from the query row,
//                mass(m) = Σ_{k ∈ characters of m} P_qk     (ties: the earlier mention)
//   accuracy     fraction of cases whose chosen mention names the antecedent (any mention of that person counts)
//   baselines    nearest   always choose the last candidate before the pronoun
//                random    choose uniformly: expected accuracy #correct mentions / #candidates, exactly
//                best head the head with the highest accuracy (chosen after looking: an optimistic number)
//   split        "nearest" cases: the antecedent is the nearest name; "not nearest": it is not, so recency is
//                wrong by construction and only something like gender agreement can be right
//   queries      own     the pronoun's last character ("she" is read)
//                before  the character just before the pronoun, whose logits predict the pronoun's first
//                        character: where the model must choose between "he", "she" and "they"
//   behaviour    −ln p(first character of the pronoun | text before), against the loss on every other character
//                of the same windows
//   ablation     head gates ξ_h = 0 (head_gate.h) for a set of heads; the change in those two losses
//   intervals    percentile bootstrap over cases (resampled with replacement, seeded)
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

class GPT;
struct PronounNote;

// ---------------------------------------------------------------------------------------------- cases
// One person or group written by name (data/make_stories.cpp --mentions): a character offset into the text.
struct NameMention {
  long offset = 0, length = 0;
  std::string name, pronoun;  // "Mira", "she"
};
// Reads the generator's TSV (offset, length, name, pronoun); throws naming the file and line on a malformed line.
std::vector<NameMention> read_name_mentions(const std::string& path);

struct Candidate {
  long offset = 0, length = 0;
  bool correct = false;  // names the antecedent
};

struct PronounCase {
  long pronoun_offset = 0, pronoun_length = 0;
  std::string pronoun, antecedent;
  std::vector<Candidate> candidates;  // in text order: the last one is the nearest
  long window_start = 0;              // the window of T characters the model reads ends at the pronoun
  bool nearest_correct() const { return candidates.back().correct; }
  double random_accuracy() const;  // #correct / #candidates: the exact expectation of a uniform choice
};

// Cases for every note whose antecedent is a name mention, with window T over a text of `text_size` characters;
// `story_starts` (sorted) are the offsets where stories begin (candidates never cross one). Cases with fewer than
// two different names among the candidates are dropped. Only notes with offsets in [from, to) are used.
std::vector<PronounCase> build_cases(const std::vector<PronounNote>& notes, const std::vector<NameMention>& mentions,
                                     const std::vector<long>& story_starts, long text_size, int T, long from = 0,
                                     long to = -1);
// Offsets of the characters after each blank line ("\n\n"), and 0.
std::vector<long> story_starts(const std::u32string& text);

// ---------------------------------------------------------------------------------------------- one row
// row: one query row of P for the window starting at window_start (row[k − window_start] is the mass on k).
double mention_mass(const float* row, long window_start, const Candidate& c);
int choose_candidate(const float* row, long window_start, const std::vector<Candidate>& candidates);
// Mass on the antecedent's mentions, and the mean mass per other candidate mention.
void antecedent_masses(const float* row, long window_start, const std::vector<Candidate>& candidates,
                       double* antecedent, double* other);

// ---------------------------------------------------------------------------------------------- a model
enum Query { kOwn = 0, kBefore = 1 };

// Per head (layer-major, L·NH) and case: what the model did.
struct ResolutionScores {
  int n_heads = 0, n_cases = 0;
  std::vector<unsigned char> correct[2];  // [query][head · n_cases + case]: the head chose the antecedent
  std::vector<unsigned char> chose_nearest[2];
  std::vector<float> antecedent_mass[2], other_mass[2];
  std::vector<float> first_char_loss;  // per case
  std::vector<float> other_loss;       // per case: mean loss over the window's characters that are not pronouns
  // per case: ln p(first character) − ln p(its rival), e.g. "S" of "She" against "H" of "He"; NaN without a rival.
  // > 0: the model prefers the right pronoun (the probes' behavioural test of gender agreement).
  std::vector<float> rival_margin;
};
// Fills head `head`'s entries for case `i` from its two query rows (own, before) of a window starting at
// c.window_start. score_resolution calls it for every head and case; the tests call it with hand-built rows.
void score_case(ResolutionScores& r, int head, int i, const PronounCase& c, const float* row_own,
                const float* row_before);
ResolutionScores empty_scores(int n_heads, int n_cases);
// One forward per case (batched): the window's attention rows at both queries and the losses. `pronoun_chars`
// marks every character of every annotated pronoun in the text (excluded from other_loss); may be empty.
// `rival` (may be empty) maps a token id to the id of its rival first character (or −1): see rival_margin.
ResolutionScores score_resolution(GPT& model, const std::vector<int>& tokens, const std::vector<PronounCase>& cases,
                                  const std::vector<unsigned char>& pronoun_chars, const std::vector<int>& rival = {});

// Mean first-character loss and other-character loss over the cases with the model's current head gates.
struct LossPair {
  std::vector<float> pronoun, other;  // per case
};
LossPair case_losses(GPT& model, const std::vector<int>& tokens, const std::vector<PronounCase>& cases,
                     const std::vector<unsigned char>& pronoun_chars);

// −ln softmax(logits)[target] for each of n rows of V logits, in double precision.
std::vector<float> position_losses(const float* logits, const int* targets, int n, int V);

// Sets the model's head gates: all 1 except `off` (layer-major indices), which are 0. Turns the gates on.
void set_heads_off(GPT& model, const std::vector<int>& off);

// ---------------------------------------------------------------------------------------------- intervals
struct Interval {
  double value = 0, lo = 0, hi = 0;  // the statistic on the sample, and its percentile interval
};
// Percentile bootstrap: `resamples` draws of n indices with replacement (splitmix64 from `seed`); the statistic
// of each draw; the (1−level)/2 and (1+level)/2 quantiles (linear interpolation between order statistics).
Interval bootstrap(int n, const std::function<double(const std::vector<int>&)>& statistic, int resamples,
                   uint64_t seed, double level = 0.95);
Interval bootstrap_mean(const std::vector<double>& x, int resamples = 1000, uint64_t seed = 1, double level = 0.95);
// Cluster bootstrap of Σ sums / Σ counts (resampling clusters, e.g. sequences): a mean over rows that are not
// independent within a cluster.
Interval bootstrap_ratio(const std::vector<double>& sums, const std::vector<double>& counts, int resamples = 1000,
                         uint64_t seed = 1, double level = 0.95);
// A per-case value averaged over all cases, the "nearest" cases and the "not nearest" ones, each with its interval.
struct SplitStat {
  Interval all, nearest, not_nearest;
  int n_all = 0, n_nearest = 0, n_not_nearest = 0;
};
SplitStat split_mean(const std::vector<PronounCase>& cases, const std::function<double(int)>& value,
                     int resamples = 1000, uint64_t seed = 1, double level = 0.95);
// The per-head table (markdown): rows for the nearest-name and random baselines, then one per head: accuracy
// before the pronoun and at it (all / nearest / not nearest) and, at the pronoun, the mass on the antecedent's
// mentions and the mean mass per other name's mention, each with its interval. Also the point values.
struct ResolutionTable {
  std::string markdown;
  std::vector<double> not_nearest[2];  // [query][head] accuracy where the antecedent is not the nearest name
  double random_not_nearest = 0;
};
ResolutionTable resolution_table(const std::vector<PronounCase>& cases, const ResolutionScores& r, int n_head,
                                 int resamples = 1000);
std::string format_interval(const Interval& i, int decimals = 3);  // "0.412 [0.380, 0.441]"
