// The parameter table: every trainable tensor is declared once, in gpt_tensor_table(), with its GPT-2 name,
// shape, initialisation rule and whether AdamW decays it. That one table drives the size of the flat arenas
// (parameters, gradients, AdamW m and v), initialisation, the optimizer, the checkpoint's tensor names and the
// typed views below that the forward and backward passes use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

class Rng;

// Pointers into one arena, per transformer block. Linear weights are stored [in, out] as GPT-2's Conv1D stores
// them, so a checkpoint holds exactly the bytes the model computes with.
struct BlockParams {
  float *ln_1_w, *ln_1_b;            // (C) (C)
  float *attn_qkv_w, *attn_qkv_b;    // (C, 3C) (3C)   "attn.c_attn": fused query, key, value
  float *attn_proj_w, *attn_proj_b;  // (C, C) (C)     "attn.c_proj"
  float *ln_2_w, *ln_2_b;            // (C) (C)
  float *mlp_fc_w, *mlp_fc_b;        // (C, 4C) (4C)   "mlp.c_fc"
  float *mlp_proj_w, *mlp_proj_b;    // (4C, C) (C)    "mlp.c_proj"
};

struct GPTParams {
  float* wte;  // (V, C) token embedding, also the LM head (tied)
  float* wpe;  // (maxT, C) position embedding
  std::vector<BlockParams> h;
  float *ln_f_w, *ln_f_b;  // (C) (C)
};

enum class Init {
  Normal,          // N(0, 0.02)
  ResidualNormal,  // N(0, 0.02/√(2·n_layer)): projections that add into the residual stream (GPT-2 paper)
  Zeros,
  Ones,
};

struct TensorSpec {
  std::string name;  // GPT-2 / Hugging Face name, e.g. "h.3.attn.c_attn.weight"
  std::vector<int64_t> shape;
  Init init;
  bool weight_decay;  // AdamW's decoupled decay: on for the 2-D weights (embeddings and linear layers), off for
                      // biases and LayerNorm's weights and biases
  size_t offset;      // first float of this tensor in the arena
  size_t numel;
  // Where the tensor appears in the views: a GPTParams member, or a BlockParams member of layer `layer`.
  float* GPTParams::*model_slot = nullptr;
  float* BlockParams::*block_slot = nullptr;
  int layer = -1;
};

std::vector<TensorSpec> gpt_tensor_table(const ModelConfig& config);
size_t total_floats(const std::vector<TensorSpec>& table);
// Points the views at `arena`, which holds total_floats(table) floats laid out as the table says.
GPTParams bind_params(const std::vector<TensorSpec>& table, float* arena, int n_layer);
// Draws every tensor in table order from `rng` (so a seed fixes the initial model on every platform).
void init_params(const std::vector<TensorSpec>& table, float* arena, int n_layer, Rng& rng);
