// Head-type scores: what kind of attention head is this? Each score reads one head's pattern P (T × T; row i is
// query i, P_ij the weight on key j, rows sum to 1 over the keys K(i) the mask allows, 0 elsewhere).
// Pattern scores (TransformerLens's head detector: attention mass on the pattern's positions, averaged over the
// query rows that have at least one such position):
//   previous-token   targets(i) = {i − 1}
//   duplicate-token  targets(i) = {j < i : tok_j = tok_i}
//   induction        targets(i) = {j < i : tok_{j−1} = tok_i}   (attend to what followed the last occurrence)
//   score = mean_{i : targets(i) ≠ ∅} Σ_{j ∈ targets(i)} P_ij
// Row statistics, averaged over rows with ≥ 2 visible keys (a row with one key has no choice to make):
//   sink        P_i0                           mass on the first token
//   distance    Σ_j P_ij |i − j|               mean attention distance
//   entropy     −Σ_j P_ij ln P_ij,  and entropy / ln|K(i)| (1 = uniform over what the head may see)
//   confidence  max_j P_ij
// OV copying (Elhage et al. 2021): the head's full OV circuit M = W_E·diag(γ₁)·W_V^h·W_O^h·diag(γ_f)·W_Eᵀ
// (V × V, LayerNorm scales folded in, centring and 1/σ ignored) maps a token attended to onto the logits it
// raises. Its nonzero eigenvalues are those of A = W_O^h·diag(γ_f)·W_Eᵀ·W_E·diag(γ₁)·W_V^h (HS × HS), and
//   copying = Σ Re λ / Σ |λ|  ∈ [−1, 1]     (+1: attending to a token raises that same token's logit)
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "lab/table_file.h"
#include "ops/mask.h"

class GPT;
class Rng;

// A running mean; it keeps the values too, for bootstrap intervals (lab/pronouns.h).
struct Mean {
  double sum = 0;
  long count = 0;
  std::vector<float> values;
  void add(double v) { sum += v, count++, values.push_back((float)v); }
  double value() const { return count ? sum / count : 0.0; }
};

// One head's scores accumulated over any number of patterns.
struct HeadScores {
  Mean previous_token, duplicate_token, induction, sink, distance, entropy, entropy_norm, confidence;
  Mean pronoun, pronoun_baseline;  // antecedent mass of a pronoun's query, and the mass on another name
  double ov_copying = 0;
  // What applies to the head's layer (score_heads fills these from its mixer); a score that does not is NaN in
  // row values and the CSV, and "n/a" in the table, never a broken model.
  bool has_ov = true;         // ov_copying needs values and an output projection per head (an OV circuit)
  bool probabilities = true;  // distance, entropy and confidence need weights that are a distribution; a
                              // recurrence's implied weights are signed and unnormalised
};

// Adds one pattern P (T × T, row-major) with its tokens to `s` (tokens may be null: pattern scores that need
// them are then skipped).
void score_pattern(HeadScores& s, const float* P, const int* tokens, int T, const AttentionMask& mask);

// Convenience for a single pattern (tests, the HTML report).
double previous_token_score(const float* P, int T, const AttentionMask& mask = {});
double duplicate_token_score(const float* P, const int* tokens, int T, const AttentionMask& mask = {});
double induction_score(const float* P, const int* tokens, int T, const AttentionMask& mask = {});

// B sequences of length 2n: a run of n distinct token ids drawn from [0, vocab) repeated twice. (B, 2n) ids.
std::vector<int> repeated_random_sequences(int B, int n, int vocab, Rng& rng);

// Runs `model` on `B` repeated random sequences (length min(block_size, 2·vocab) rounded down to even) and
// returns the scores of every head, layer-major (index l·NH + h), with ov_copying filled in.
std::vector<HeadScores> score_heads(GPT& model, int vocab, int B, uint64_t seed);

double ov_copying_score(const GPT& model, int layer, int head);

// One pronoun of the story corpus (data/make_stories.cpp --antecedents): character offsets into the text.
struct PronounNote {
  long pronoun_offset, pronoun_length;
  long antecedent_offset, antecedent_length;
  std::string pronoun, antecedent;
};
// Reads the generator's TSV; throws naming the file on a malformed line.
std::vector<PronounNote> read_pronoun_notes(const std::string& path);
// The whole number ≥ lowest in cells[column] (0-based; `name` is the column's header); throws naming the column
// (1-based, as an editor counts), what was expected and what is there.
long tsv_whole_number(const std::vector<std::string>& cells, size_t column, const char* name, long lowest);

// For each note whose antecedent lies within block_size − 1 characters before the pronoun's last character, runs
// the window that ends at that character and adds, per head, the query row's mass on the antecedent's characters
// to `pronoun` and its mean mass per other name in the window (another annotated antecedent, different text) to
// `pronoun_baseline`. Uses at most `max_notes` notes. Returns the number of notes used.
int score_pronouns(GPT& model, const std::vector<int>& text_tokens, const std::vector<PronounNote>& notes,
                   std::vector<HeadScores>& scores, int max_notes);

// The table `./inspect heads` prints, and the same as CSV (header + one row per head).
std::string heads_table(const std::vector<HeadScores>& scores, int n_head);
std::string heads_csv(const std::vector<HeadScores>& scores, int n_head);
