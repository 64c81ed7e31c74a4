// The parameter table: every trainable tensor is declared once, in gpt_tensor_table(), with its GPT-2 name,
// shape, initialisation rule and whether AdamW decays it. That one table drives the size of the flat arenas
// (parameters, gradients, AdamW m and v), initialisation, the optimizer, the checkpoint's tensor names and the
// typed views below that the forward and backward passes use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/mixer.h"

class Rng;

// Pointers into one arena, per transformer block. Linear weights are stored [in, out] as GPT-2's Conv1D stores
// them, so a checkpoint holds exactly the bytes the model computes with.
struct BlockParams {
  float* ln_1_w;                     // (C)
  float* ln_1_b;                     // (C)
  MixerParams mixer;                 // the layer's mixer's own tensors, in the order it declares them (mixer.h)
  float* ln_2_w;                     // (C)
  float* ln_2_b;                     // (C)
  float* mlp_fc_w;                   // (C, 4C)  "mlp.c_fc"
  float* mlp_fc_b;                   // (4C)
  float* mlp_proj_w;                 // (4C, C)  "mlp.c_proj"
  float* mlp_proj_b;                 // (C)
};

struct GPTParams {
  float* wte;  // (V, C) token embedding, also the LM head (tied)
  float* wpe;  // (maxT, C) position embedding; null in a model without positions (--positions none)
  std::vector<BlockParams> h;
  float* ln_f_w;  // (C)
  float* ln_f_b;  // (C)
};

struct TensorSpec {
  std::string name;  // GPT-2 / Hugging Face name, e.g. "h.3.attn.c_attn.weight"
  std::vector<int64_t> shape;
  Init init;
  bool weight_decay;  // AdamW's decoupled decay: on for the embeddings and the linear layers' weights, off for
                      // biases, LayerNorm's weights and biases and the mixer tensors whose kind leaves it off
  bool matrix;        // the weight of a linear map inside a block: Muon's (optim/muon.h)
  size_t offset;      // first float of this tensor in the arena
  size_t numel;
  // Where the tensor appears in the views: a GPTParams member, a BlockParams member of layer `layer`, or slot
  // `mixer_slot` of that layer's MixerParams.
  float* GPTParams::*model_slot = nullptr;
  float* BlockParams::*block_slot = nullptr;
  int layer = -1;
  int mixer_slot = -1;
  std::function<void(float* p, size_t n, Rng& rng)> init_fn = nullptr;  // Init::Custom (TensorDecl::init_fn)
};

// The table of a model whose layers run `mixers` (one per layer, made from config: each declares its own rows).
std::vector<TensorSpec> gpt_tensor_table(const ModelConfig& config, const std::vector<std::unique_ptr<Mixer>>& mixers);
std::vector<TensorSpec> gpt_tensor_table(const ModelConfig& config);  // makes the mixers, for the table alone
size_t total_floats(const std::vector<TensorSpec>& table);
// Points the views at `arena`, which holds total_floats(table) floats laid out as the table says.
GPTParams bind_params(const std::vector<TensorSpec>& table, float* arena, int n_layer);
// Draws every tensor in table order from `rng` (so a seed fixes the initial model on every platform).
void init_params(const std::vector<TensorSpec>& table, float* arena, int n_layer, Rng& rng);
