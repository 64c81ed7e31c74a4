// What the explorer's page asks of a checkpoint, computed without any HTTP: each function takes a loaded
// Checkpoint and token ids and returns the JSON the server sends (docs/explore.md describes every field).
//
//   score      per character t: its surprisal s_t = −log2 p(x_t | context) and the five most likely characters there
//              (a next-token model: context = x_<t, one forward, or for a text longer than the block the sliding
//              windows of ./sample --score; a masked LM: the whole text with [MASK] at t, one row per position in
//              batched forwards); bits/char = mean of s_t over the predicted characters
//   attention  the row of one query position for every layer × head (P[l][h][pos][·], the implied weights of a
//              linear layer) and its column, thumbnails and head scores, on request the full map of one chosen
//              head (each query's allowed keys only, 4 decimals), read as lab/html_report.h's dump_attention
//              reads them, the rows rounded like ./inspect attention's JSON
//   next       the distribution of the character after the text: softmax(z) and the distribution a sample is drawn
//              from after temperature, top-k and top-p (sampling_distribution)
//   fill       a masked LM's blanks filled, most confident first (generate/fill.h)
//   generate   the text continued token by token through the KV-cache decoder (generate/generate.h)
//   refresh    what the page draws after a key: score, attention around the chosen character and next, from one
//              forward pass when the text fits the block (the three read the same characters under the same masks)
//
// Every function uses only the model's public interface (forward, logits, masks, config) and the lab's and the
// generator's functions, and restores the masks the checkpoint was loaded with before it runs, so the order in
// which requests arrive never changes an answer (a prefix-LM's N is set per call).
//
// Forward passes. Every forward this file runs goes through ExploredModel::logits_for or ::forward_rows
// (ExploreApi.EveryForwardGoesThroughTheCountedSeam checks that no other line calls the model), which count them
// in `forwards`. logits_for reuses the last forward when it read the same ids under the same masks (its logits,
// and the weights GPT::mixing_weights rebuilds from it): score, attention and next of one short text cost one
// forward, not three.
#pragma once
#include <climits>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "explore/window_cache.h"
#include "generate/sampling.h"
#include "io/checkpoint.h"

// A request the caller got wrong (the server answers HTTP 400 with its message).
struct BadRequest : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One loaded checkpoint and what the explorer needs beside it.
struct ExploredModel {
  Checkpoint ckpt;
  std::vector<AttentionMask> loaded_masks;  // as load_checkpoint set them; restored before every computation
  int mask_token = -1;                      // [MASK]'s id for a masked-LM checkpoint, else −1
  long forwards = 0;                        // forward passes run on this model (the seam below counts them)
  WindowCache windows;                      // a long text's scored windows (score_text_json), by their characters
  explicit ExploredModel(Checkpoint c);
  GPT& model() { return *ckpt.model; }
  int block_size() const { return ckpt.model->config.block_size; }

  // The logits (T × V) of ids (one row, B = 1) under the masks set now: the last forward's when it read these ids
  // under these masks, else a new forward's. Valid until the model runs again.
  const float* logits_for(const std::vector<int>& ids);
  // B rows of T ids (a masked LM's batch), or, with B = 0, notice that another module is about to run the model
  // (generate, fill): either way no remembered forward matches the model's state afterwards.
  void forward_rows(const int* ids, int B, int T);

 private:
  std::vector<int> last_ids_;  // the last forward's one row (empty: none, or not one row)
  std::vector<AttentionMask> last_masks_;
  void remember(const std::vector<int>& ids);
};

// The request's text as token ids. Throws BadRequest naming `what` for invalid UTF-8 (with the byte offset), a
// character outside the vocabulary (which one, and where), more than max_chars characters, or fewer than min_chars.
// blank ≠ 0: that character becomes [MASK] (fill-in-the-blank).
std::vector<int> request_ids(const ExploredModel& m, const std::string& utf8, const std::string& what, int min_chars,
                             int max_chars, char32_t blank = 0);

nlohmann::json model_summary(ExploredModel& m);
// ids: any length for a next-token model (kMaxScoredChars at the server), at most block_size for a masked LM.
// between: called between forwards (a masked LM's batches, a long text's windows not cached), so that a caller
// can let others use the model, or throw to give up a request nobody waits for any more.
// top_from, top_to: the characters whose ten most likely predictions are listed (null elsewhere): a page asks for
// those near the chosen character of a long text, whose lists were most of a 2 MB answer at 10,000 characters.
nlohmann::json score_text_json(ExploredModel& m, const std::vector<int>& ids,
                               const std::function<void()>& between = nullptr, long top_from = 0,
                               long top_to = LONG_MAX);
// position in [0, T); layer, head: the head whose full map is sent when with_map (the page asks for it on a click:
// at T = 1000 it is a million numbers).
nlohmann::json attention_at_json(ExploredModel& m, const std::vector<int>& ids, int position, int layer, int head,
                                 bool with_map = true);
nlohmann::json next_json(ExploredModel& m, const std::vector<int>& ids, const SamplingOptions& options);
nlohmann::json fill_json(ExploredModel& m, const std::vector<int>& ids_with_masks);
// One refresh of the page: {score, attention, next, window_start, forwards}. ids: the text the score reads (any
// length for a next-token model); position: the chosen character in it; attention reads the block_size
// characters ending at it (a masked LM's: around it), starting at window_start; next reads the last block_size.
// forwards: the forward passes it ran (1 for a next-token model's text of at most block_size characters, 2 for
// a prefix-LM's, whose next reads the text as its prefix).
nlohmann::json refresh_json(ExploredModel& m, const std::vector<int>& ids, int position, int layer, int head,
                            bool with_map, const SamplingOptions& options,
                            const std::function<void()>& between = nullptr, long top_from = 0,
                            long top_to = LONG_MAX);

// The probabilities sample_token (generate/sampling.h) draws token v with, for every v: temperature 0 puts all
// the mass on the most likely token (ties to the lowest id); otherwise softmax(z / temperature) restricted to the
// top_k most likely, then to the shortest most-likely-first prefix whose mass reaches top_p, renormalised.
// Throws std::runtime_error on a non-finite logit, as sample_token does.
std::vector<double> sampling_distribution(const float* logits, int V, const SamplingOptions& options);

// Continues the text by up to n tokens with generate(), calling emit with each token's text; stops early (without
// an error) when emit returns false, e.g. because the reader went away.
void stream_generation(ExploredModel& m, const std::vector<int>& ids, int n, const SamplingOptions& options,
                       uint64_t seed, const std::function<bool(const std::string&)>& emit);
