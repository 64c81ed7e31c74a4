#include "ops/embedding.h"

#include <cstddef>

#include "base/threads.h"

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C) {
  parallel_for((size_t)B * T, (size_t)B * T * C, [&](size_t row) {  // row = b·T + t
    float* o = out + row * C;
    const float* token_row = wte + (size_t)tokens[row] * C;
    if (wpe == nullptr) {
      for (int c = 0; c < C; c++) o[c] = token_row[c];
      return;
    }
    const float* position_row = wpe + (row % T) * C;
    for (int c = 0; c < C; c++) o[c] = token_row[c] + position_row[c];
  });
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C) {
  // Serial: different (b, t) may share a token row, so a parallel loop over rows would race on dwte.
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      const float* d = dout + ((size_t)b * T + t) * C;
      float* token_row = dwte + (size_t)tokens[b * T + t] * C;
      for (int c = 0; c < C; c++) token_row[c] += d[c];
      if (dwpe == nullptr) continue;
      float* position_row = dwpe + (size_t)t * C;
      for (int c = 0; c < C; c++) position_row[c] += d[c];
    }
}
