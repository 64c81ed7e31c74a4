// The 1/√d_k lab: statistics of one layer's attention, from its fused qkv activations (B, T, 3C). For every
// batch row b, head h and query i, over the keys K(i) the mask allows:
//   S_ij = scale · q_i·k_j      P_i = softmax(S_i)
//   logit_var    variance of S_ij over all unmasked (b, h, i, j)       ≈ 1 at init with scale = 1/√d_k
//   logit_max    max |S_ij|
//   entropy      mean over rows of −Σ_j P_ij ln P_ij;  entropy_norm: each row's entropy / ln|K(i)|
//   max_weight   mean over rows of max_j P_ij
//   saturated    fraction of rows whose max_j P_ij > 0.99
// Row statistics use rows with |K(i)| ≥ 2 (a one-key row has no choice to make).
// A mixer without softmax logits (MixerLab::logit_scale is 0, model/mixer_lab.h) has NaN logit_var and
// logit_max (empty cells in metrics.csv), and the row statistics are those of the weights it implies
// (GPT::mixing_weights), when they are probabilities; otherwise those are NaN too.
//   grad_q, grad_k  Frobenius norms of ∂L/∂W_Q and ∂L/∂W_K: columns [0, C) and [C, 2C) of attn.c_attn.weight's
//                   gradient (read from model.grads, so call after backward()); NaN for a mixer without them.
#pragma once
#include <string>
#include <vector>

#include "ops/mask.h"

class GPT;

struct LayerAttentionStats {
  double logit_var = 0, logit_max = 0, entropy = 0, entropy_norm = 0, max_weight = 0, saturated = 0;
  double grad_q = 0, grad_k = 0;
};

LayerAttentionStats layer_attention_stats(const float* qkv, const AttentionMask& mask, float scale, int B, int T,
                                          int C, int NH);

// One entry per layer, from the model's last forward (its q·k or implied weights) and backward (the gradients).
std::vector<LayerAttentionStats> attention_statistics(const GPT& model);

// metrics.csv columns: ",L0_logit_var,L0_logit_max,…,L0_grad_k,L1_logit_var,…" and the matching cells (each with
// a leading comma); the empty cells of a row without an evaluation.
std::string attention_stats_header(int n_layer);
std::string attention_stats_cells(const std::vector<LayerAttentionStats>& stats);
std::string attention_stats_empty_cells(int n_layer);

// What ./train logs at every evaluation: one forward and backward of the model on a fixed batch (x, y: (B, T)),
// then the statistics above from that forward's qkv and that backward's gradients. The gradients are this batch's
// own, unclipped, and are zeroed again afterwards, so training is not affected (its next step zeroes them anyway).
// Why a batch of its own rather than the last training step's gradients: those have already been clipped in
// place, and they belong to a different batch at every evaluation; a fixed batch compares like with like.
std::vector<LayerAttentionStats> measure_attention(GPT& model, const int* x, const int* y, int B, int T);
// The same, as metrics.csv cells: with attention_stats_header and attention_stats_empty_cells, the three functions
// ./train hands the training loop as its extra columns (train/trainer.h: EvaluationColumns).
std::string measure_attention_cells(GPT& model, const int* x, const int* y, int B, int T);
