#include "model/config.h"

#include "ops/linear_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

// name is "n_layer (--n-layer)": the field as a checkpoint stores it and the flag that sets it.
static void require_positive(const char* name, long value, long max_value) {
  if (value <= 0) throw std::runtime_error(std::string(name) + " must be positive (got " + std::to_string(value) + ")");
  if (value > max_value)
    throw std::runtime_error(std::string(name) + " (" + std::to_string(value) + ") is larger than the supported " +
                             std::to_string(max_value));
}

void validate(const ModelConfig& c) {
  // The upper bounds keep every product of sizes below in 64-bit range and every index in int range.
  require_positive("n_layer (--n-layer)", c.n_layer, 1024);
  require_positive("n_head (--n-head)", c.n_head, 1024);
  require_positive("n_embd (--n-embd)", c.n_embd, 65536);
  require_positive("block_size (--block)", c.block_size, 65536);
  require_positive("vocab_size", c.vocab_size, 1 << 21);
  attention_scale(c);
  std::vector<AttentionKind> kinds;
  try {
    kinds = parse_layer_attention(c.attention, c.n_layer);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("attention (--attention, --layer-attention): ") + e.what());
  }
  if (c.attn_scale != "sqrt" && std::find(kinds.begin(), kinds.end(), AttentionKind::Softmax) == kinds.end())
    throw std::runtime_error("attn_scale '" + c.attn_scale + "' (--attn-scale) scales softmax logits, and every layer "
                             "of this model is linear (linear attention has no 1/√d_k)");
  if (c.n_embd % c.n_head != 0)
    throw std::runtime_error("n_embd (" + std::to_string(c.n_embd) + ") must be divisible by n_head (" +
                             std::to_string(c.n_head) + "): check --n-embd and --n-head");
}

float attention_scale(const ModelConfig& c) {
  const float HS = (float)(c.n_embd / c.n_head);
  if (c.attn_scale == "sqrt") return 1.0f / std::sqrt(HS);  // unit-variance logits when q, k have unit variance
  if (c.attn_scale == "inv") return 1.0f / HS;
  if (c.attn_scale == "none") return 1.0f;
  char* end = nullptr;
  const float value = std::strtof(c.attn_scale.c_str(), &end);
  if (c.attn_scale.empty() || *end != '\0' || !(value > 0) || !std::isfinite(value))
    throw std::runtime_error("attn_scale '" + c.attn_scale + "' should be sqrt, inv, none or a positive number");
  return value;
}

std::string describe(const ModelConfig& c) {
  return std::to_string(c.n_layer) + (c.attn_only ? " attention-only" : "") + " layers, " + std::to_string(c.n_head) + " heads, " + std::to_string(c.n_embd) +
         " wide, block " + std::to_string(c.block_size) + ", vocab " + std::to_string(c.vocab_size) +
         (c.attention == "softmax" ? "" : ", attention " + c.attention);
}
