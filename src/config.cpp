#include "config.h"

#include <stdexcept>

static void require_positive(const char* name, long value, long max_value) {
  if (value <= 0) throw std::runtime_error(std::string(name) + " must be positive (got " + std::to_string(value) + ")");
  if (value > max_value)
    throw std::runtime_error(std::string(name) + " (" + std::to_string(value) + ") is larger than the supported " +
                             std::to_string(max_value));
}

void validate(const ModelConfig& c) {
  // The upper bounds keep every product of sizes below in 64-bit range and every index in int range.
  require_positive("n_layer", c.n_layer, 1024);
  require_positive("n_head", c.n_head, 1024);
  require_positive("n_embd", c.n_embd, 65536);
  require_positive("block_size", c.block_size, 65536);
  require_positive("vocab_size", c.vocab_size, 1 << 21);
  if (c.n_embd % c.n_head != 0)
    throw std::runtime_error("n_embd (" + std::to_string(c.n_embd) + ") must be divisible by n_head (" +
                             std::to_string(c.n_head) + ")");
}

std::string describe(const ModelConfig& c) {
  return std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) + " heads, " + std::to_string(c.n_embd) +
         " wide, block " + std::to_string(c.block_size) + ", vocab " + std::to_string(c.vocab_size);
}
