// Attention maps of one prompt, as data (JSON) and as one self-contained HTML page (data inline, plain
// JavaScript, no network). For every layer l and head h the pattern P[l][h] (T × T) is the softmax of the scaled
// query·key products over the keys the layer's mask allows, 0 elsewhere, so each row sums to 1 over allowed keys:
// A linear-attention layer (ops/linear_attention.h) shows the weights it implies, φ(q_i)·φ(k_j) / Σ_j φ(q_i)·φ(k_j).
//   JSON  {"tokens": [T strings], "n_layer", "n_head", "T", "attn": [l][h][query][key],
//          "mask": [l][query][key] (1 = allowed), "masks": [l] spellings, "attention": [l] softmax or linear,
//          "scores": [per head]}
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
  std::vector<std::string> attention;  // "softmax" or "linear" per layer (a linear layer's attn is its implied weights)
  std::vector<HeadScores> scores;  // per head, layer-major; may be empty
};

// Runs the model on `ids` (1 ≤ size ≤ block_size) and keeps every layer's pattern.
AttentionDump dump_attention(GPT& model, const std::vector<int>& ids, const Tokenizer& tokenizer);

std::string attention_json(const AttentionDump& dump);
std::string attention_html(const AttentionDump& dump, const std::string& title);
