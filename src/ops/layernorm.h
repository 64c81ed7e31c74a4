// LayerNorm over the last dimension.   N rows (= B·T), C channels.
//   forward   μ = mean(x),  σ² = mean((x − μ)²),  r = 1/√(σ² + ε),  x̂ = (x − μ)·r,  y = x̂·w + b
//   backward  with g = dy·w:
//             dx += r · (g − mean(g) − x̂·mean(g·x̂))     dw += Σ_rows dy·x̂      db += Σ_rows dy
// The forward keeps μ and r per row so the backward needs no second pass over x to recover them.
#pragma once

constexpr float kLayerNormEps = 1e-5f;

void layernorm_forward(float* out, float* mean, float* rstd,     // (N, C), (N), (N)
                       const float* inp,                          // (N, C)
                       const float* weight, const float* bias,    // (C), (C)
                       int N, int C);

// The forward's output again from the μ and r it kept: one pass over x instead of three. For the backward, which
// recomputes the output (the input of the next layer's weight gradient) rather than keeping it for every layer.
void layernorm_recompute(float* out,                              // (N, C)
                         const float* inp,                        // (N, C)
                         const float* weight, const float* bias,  // (C), (C)
                         const float* mean, const float* rstd,    // (N), (N)
                         int N, int C);

// The one exception to the gradient convention (src/ops/README.md): dinp is ADDED to, not written. Every
// LayerNorm reads the residual stream, whose gradient sums over its readers, so the caller passes the stream's
// gradient buffer and this adds its branch's share, saving an add pass.
void layernorm_backward(float* dinp, float* dweight, float* dbias,  // (N, C) added to, (C), (C) added to
                        const float* dout, const float* inp,        // (N, C), (N, C)
                        const float* weight,                        // (C)
                        const float* mean, const float* rstd,       // (N), (N)
                        int N, int C);
