// One float arena, carved into consecutive blocks. A layout function written with it serves twice: with base null
// it only counts (every block is null, `used` ends at the total), with memory it points the blocks into it, so the
// size allocated and the layout used can never disagree (model.cpp's activations, the ops' activations and scratch).
#pragma once
#include <cstddef>

struct ArenaCarver {
  float* base;
  size_t used = 0;
  float* take(size_t n) {
    float* p = base ? base + used : nullptr;
    used += n;
    return p;
  }
};

// The floats a layout function written this way carves: `layout(nullptr, args…, &count)`, run only to count (an
// op's *_activation_floats and *_scratch_floats).
template <typename Layout, typename... Args>
size_t counted_floats(Layout layout, const Args&... args) {
  size_t n = 0;
  layout(nullptr, args..., &n);
  return n;
}
