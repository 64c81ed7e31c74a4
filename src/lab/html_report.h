// Attention maps of one prompt, as data (JSON) and as one self-contained HTML page (data inline, plain
// JavaScript, no network). For every layer l and head h the pattern A[l][h] (T × T) is what the layer's mixer
// answers to MixerLab::implied_weights (model/mixer_lab.h): for a softmax layer the softmax of the scaled
// query·key products over the keys the layer's mask allows, 0 elsewhere, so each row sums to 1; for another kind
// the matrix its math implies (e.g. φ(q_i)·φ(k_j) / Σ_j φ(q_i)·φ(k_j), or a recurrence's signed hidden
// attention), with the kind's own paragraph on the page saying what it is.
//   JSON  {"tokens": [T strings], "n_layer", "n_head", "T", "attn": [l][h][query][key],
//          "mask": [l][query][key] (1 = allowed), "masks": [l] spellings, "mixers": [l] the mixer kinds,
//          "probabilities": [l] whether each row is a distribution (else signed, coloured blue/red),
//          "implied": [l] whether the weights are implied rather than computed, "descriptions": [l] each layer's
//          mixer's paragraph, "scores": [per head]}
//   HTML  a grid of heatmaps (rows = queries, columns = keys, masked cells grey), a token-to-token line view
//         (bertviz's head view), hover for values, click a head to enlarge it.
#pragma once
#include <string>
#include <vector>

#include "lab/head_scores.h"
#include "ops/mask.h"

class GPT;
class Tokenizer;

struct AttentionDump {
  std::vector<std::string> tokens;  // the characters, decoded
  int n_layer = 0, n_head = 0, T = 0;
  std::vector<float> attn;  // (L, NH, T, T)
  std::vector<AttentionMask> masks;
  // Per layer, what its mixer says (model/mixer_lab.h): its kind, whether its rows are probability distributions,
  // whether they are implied, and its paragraph. Empty: every layer the default mixer's answers.
  std::vector<std::string> mixers;
  std::vector<bool> probabilities, implied;
  std::vector<std::string> descriptions;
  std::vector<HeadScores> scores;  // per head, layer-major; may be empty
};

// Runs the model on `ids` (1 ≤ size ≤ block_size) and keeps every layer's pattern.
AttentionDump dump_attention(GPT& model, const std::vector<int>& ids, const Tokenizer& tokenizer);

std::string attention_json(const AttentionDump& dump);
std::string attention_html(const AttentionDump& dump, const std::string& title);
