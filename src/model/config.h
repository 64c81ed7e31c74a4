// The shape of a model (nanoGPT's GPTConfig), its table of settings, and the checks that make a bad one fail early
// with a clear message.
// To add a model setting: a field with its default here, a row in model_settings() (config.cpp), the code that
// uses it, and its test. ./train's flag and --help, the range check, the checkpoint's metadata (written and read)
// and --print-settings follow from the row.
#pragma once
#include <string>
#include <vector>

#include "base/settings.h"

struct ModelConfig {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  int block_size = 64;  // the longest context: every sequence has T ≤ block_size
  int vocab_size = 0;   // set from the tokenizer
  bool attn_only = false;           // blocks without their MLP (for the induction-head experiment)
  std::string attn_scale = "sqrt";  // multiplies q·k: sqrt = 1/√HS, inv = 1/HS, none = 1, or a number
  // The mixer of every layer, or one per layer: "softmax,linear,linear" (model/mixers/registry.cpp lists them).
  // Only softmax layers have q·k logits, so attn_scale applies to those alone.
  std::string attention = "softmax";
  // Mamba layers (attention "mamba": model/mixers/mamba.cpp, ops/mamba.h, docs/mamba.md). Read only when a layer
  // is one; a checkpoint older than them keeps these defaults.
  int ssm_state = 16;     // N, the state's size per channel
  int ssm_expand = 2;     // E = ssm_expand·n_embd inner channels, n_head heads of E/n_head
  int ssm_conv = 4;       // K, the causal depthwise conv's width; 0 = no conv
  int ssm_selective = 1;  // 1: Δ_t, B_t, C_t depend on the input (Mamba); 0: constants (time-invariant, S4D-like)

  int head_size() const { return n_embd / n_head; }
};

// Every model setting, once: its key in the checkpoint's metadata, ./train's flag, help line, range.
const std::vector<Setting<ModelConfig>>& model_settings();

// Throws std::runtime_error naming the offending field, e.g. "n_embd (130) must be divisible by n_head (4)": the
// table's ranges, then the checks that involve two settings or parse a value.
void validate(const ModelConfig& config);

// "4 layers, 4 heads, 128 wide, block 64, vocab 65" ("4 attention-only layers, …" with attn_only).
std::string describe(const ModelConfig& config);

// The number attn_scale stands for; throws on a spelling it does not know.
float attention_scale(const ModelConfig& config);
