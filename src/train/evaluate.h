// Measuring a model: mean next-token loss on a split (during training) and on a whole text (./sample --score).
#pragma once
#include <cstdint>
#include <vector>

#include "model/model.h"
#include "train/reducer.h"
#include "train/replicas.h"

class Rng;

class BatchMaker;

// Mean training-objective loss over `iters` random batches of (B, T) drawn with `rng`. Under data parallelism each
// process scores its rows of every batch (reducer.h) and a batch's loss is the sum of the slices' losses over the
// sum of their targets.
// With batch-split threads (replicas.h) each batch's rows are split between the replicas too.
double estimate_loss(Replicas& models, BatchMaker& batches, const std::vector<int>& tokens, int B, int T, int iters,
                     Rng& rng, const Reducer& reducer = one_process());
double estimate_loss(GPT& model, BatchMaker& batches, const std::vector<int>& tokens, int B, int T, int iters,
                     Rng& rng, const Reducer& reducer = one_process());

struct TextScore {
  double nats_per_token = 0;  // mean −ln p(next character)
  double bits_per_token = 0;  // the same in bits: nats / ln 2
  long predictions = 0;       // characters predicted (all but the first)
};

// Every character after the first is predicted once, from up to block_size characters of left context:
// windows of block_size start every block_size/2 characters, and each scores only the predictions the previous
// window did not make. Throws if `tokens` holds fewer than 2 tokens.
TextScore score_text(GPT& model, const std::vector<int>& tokens, int batch = 16);
// Those windows, for n tokens: window w reads tokens [start, start + length) and scores the predictions made at
// inputs [first, start + length), i.e. of tokens first + 1 … start + length. The explorer scores long texts with them.
struct ScoreWindow {
  long start;
  int length;
  long first;
};
std::vector<ScoreWindow> score_windows(long n, int block_size);

// Equal-terms evaluation of any checkpoint, whatever its mask and objective, in bits per character.
struct CharScore {
  double bits = 0;      // mean −log2 p(true character)
  double accuracy = 0;  // fraction where the most likely character is the true one
  long count = 0;
};

// (a) Next character from left context only: for each position t, the model is given only characters before t
// (for an MLM model: those characters followed by [MASK] at t) and scored on character t. Prefix masks are
// opened to the whole row (all of it is left context). `count` positions drawn with `seed`.
// Under data parallelism each process scores its share of the positions (reducer.h).
CharScore next_char_score(Replicas& models, const std::vector<int>& tokens, int count, uint64_t seed, int mask_token,
                          const Reducer& reducer = one_process());
CharScore next_char_score(GPT& model, const std::vector<int>& tokens, int count, uint64_t seed, int mask_token,
                          const Reducer& reducer = one_process());

// (b) Masked characters: a fixed, seeded `rate` of the positions of consecutive windows. An MLM model sees both
// sides, with [MASK] at every chosen position; any other model sees only the left side of each.
CharScore masked_char_score(GPT& model, const std::vector<int>& tokens, int windows, float rate, uint64_t seed,
                            int mask_token);
