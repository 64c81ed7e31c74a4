// GELU, tanh approximation (GPT-2).   N elements.
//   forward   y = ½·x·(1 + tanh u),   u = √(2/π)·(x + 0.044715·x³)
// Gradients (src/ops/README.md): the input gradient is written.
//   backward  dx = dy/dx · dout,   dy/dx = ½·(1 + tanh u) + ½·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²)
// The code computes the same function through the logistic σ(z) = 1/(1 + e^{−z}), since ½·(1 + tanh u) = σ(2u):
//   y = x·s,   dy/dx = s + 2·x·s·(1 − s)·du/dx,   s = σ(2u)      (½·(1 − tanh² u) = 2·s·(1 − s))
// one exp and one division per element, and fewer operations around them than the tanh form (gelu.cpp).
#pragma once
#include <cstddef>

void gelu_forward(float* out, const float* inp, size_t N);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N);  // dinp may be dout (in place)

// The backward's two passes over fc, in one (model/block.h): the training backward needs gelu(fc) again (the
// forward does not keep it, for memory) before mlp_proj's backward, and dy/dx after it. Computing both at once
// costs one exp and one division per element instead of two of each.
//   gelu_recompute   out = gelu(inp),  slope = dy/dx at inp
//   gelu_backward_from_slope   dinp = slope ⊙ dout     (dinp may be dout)
void gelu_recompute(float* out, float* slope, const float* inp, size_t N);
void gelu_backward_from_slope(float* dinp, const float* slope, const float* dout, size_t N);
