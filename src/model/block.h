// One transformer block, pre-LN as in GPT-2, its forward right above its backward:
//   residual2 = x + mixer(ln_1(x))                                     mixer: the layer's kind (mixer.h)
//   residual3 = residual2 + mlp_proj(gelu(mlp_fc(ln_2(residual2))))    (--no-mlp blocks: residual3 = residual2)
// The forward is written once for both of the model's forwards:
//   GPT::forward (model.cpp)            all N = B·T rows at once; products through sgemm (linear_forward)
//   Decoder::step_cached (decoder.cpp)  the new position and, while the context fills, its shadow (N = 1 or 2);
//                                       products as matrix-vector products that read each weight once (matvec2)
// and the mixer is handed in as `mix`, so the same lines serve the whole sequence and the one-token step.
#pragma once
#include <algorithm>
#include <cstddef>

#include "model/mixer.h"
#include "model/params.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/linear.h"

// Where a block's forward writes, N rows each (N = B·T, or 1 for the decoder). The LayerNorm statistics, the
// mixer's saved activations, residual2, fc and residual3 are what the backward needs; ln and fc_gelu are scratch,
// recomputed by the backward (cheaper than keeping them for every layer), gelu_slope the backward's own scratch.
struct BlockBuffers {
  float* ln = nullptr;          // (N, C)   LayerNorm 1 or 2's output
  float* ln1_mean = nullptr;    // (N)
  float* ln1_rstd = nullptr;    // (N)
  float* mixer = nullptr;       // the mixer's saved activations (Mixer::saved_floats)
  float* residual2 = nullptr;   // (N, C)
  float* ln2_mean = nullptr;    // (N)
  float* ln2_rstd = nullptr;    // (N)
  float* fc = nullptr;          // (N, 4C)  before GELU
  float* fc_gelu = nullptr;     // (N, 4C)  after it
  float* gelu_slope = nullptr;  // (N, 4C)  d gelu/d fc (none in the decoder)
  float* residual3 = nullptr;   // (N, C)   the block's output
};

// The products of the batched forward (sgemm over N rows); the decoder has its own (N ≤ 2 rows: matvec, or matvec2,
// which reads each weight once for both; decoder.cpp). Both compute out = residual + inp·W + b, the residual
// optional.
struct BatchedProducts {
  static void linear(float* out, const float* inp, const float* w, const float* b, int N, int IC, int OC,
                     const float* residual = nullptr) {
    linear_forward(out, inp, w, b, N, IC, OC, residual);
  }
};

// x (N, C) is the block's input. mix(u, x, out) writes out = x + mixer(u): the batched forward calls
// Mixer::forward, the decoder Mixer::step on each row (Mixer::step2 for two). Only the first mlp_rows rows go on
// through the MLP (all by default); the rest of residual3 is left unwritten: the decoder's shadow needs only the
// last layer's mixer state.
template <typename Products, typename Mix>
void block_forward(const BlockBuffers& a, const float* x, const BlockParams& p, bool no_mlp, int N, int C,
                   Mix&& mix, int mlp_rows = -1) {
  // residual2 = x + mixer(ln_1(x))
  layernorm_forward(a.ln, a.ln1_mean, a.ln1_rstd, x, p.ln_1_w, p.ln_1_b, N, C);
  mix(a.ln, x, a.residual2);
  if (no_mlp) {  // no MLP: the block's output is the mixer's residual
    std::copy(a.residual2, a.residual2 + (size_t)N * C, a.residual3);
    return;
  }
  // residual3 = residual2 + mlp_proj(gelu(mlp_fc(ln_2(residual2))))
  if (mlp_rows >= 0) N = mlp_rows;
  layernorm_forward(a.ln, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln_2_w, p.ln_2_b, N, C);
  Products::linear(a.fc, a.ln, p.mlp_fc_w, p.mlp_fc_b, N, C, 4 * C);
  gelu_forward(a.fc_gelu, a.fc, (size_t)N * 4 * C);
  Products::linear(a.residual3, a.fc_gelu, p.mlp_proj_w, p.mlp_proj_b, N, 4 * C, C, a.residual2);
}

// The backward of block_forward (training only: N = B·T rows). d_residual holds ∂L/∂residual3 on entry and
// ∂L/∂x on return: a residual add passes its gradient through unchanged, so each branch only adds its own share
// (LayerNorm's backward adds into its dinp, src/ops/README.md). d_ln (N, C) and d_mlp (N, 4C) are scratch;
// mix_back(dout, u, du) is the mixer's backward: du = ∂L/∂u written, its tensors' gradients added.
template <typename MixBack>
void block_backward(float* d_residual, BlockParams& g, const BlockBuffers& a, const float* x, const BlockParams& p,
                    bool no_mlp, int N, int C, float* d_ln, float* d_mlp, MixBack&& mix_back) {
  const size_t NC = (size_t)N * C;
  // residual3 = residual2 + mlp_proj(gelu(mlp_fc(ln_2(residual2))))
  if (!no_mlp) {
    gelu_recompute(a.fc_gelu, a.gelu_slope, a.fc, 4 * NC);  // gelu(fc) recomputed, not kept; and its slope
    linear_backward(d_mlp, g.mlp_proj_w, g.mlp_proj_b, d_residual, a.fc_gelu, p.mlp_proj_w, N, 4 * C, C);
    gelu_backward_from_slope(d_mlp, a.gelu_slope, d_mlp, 4 * NC);  // in place: ∂/∂gelu(fc) → ∂/∂fc
    layernorm_recompute(a.ln, a.residual2, p.ln_2_w, p.ln_2_b, a.ln2_mean, a.ln2_rstd, N, C);
    linear_backward(d_ln, g.mlp_fc_w, g.mlp_fc_b, d_mlp, a.ln, p.mlp_fc_w, N, C, 4 * C);
    layernorm_backward(d_residual, g.ln_2_w, g.ln_2_b, d_ln, a.residual2, p.ln_2_w, a.ln2_mean, a.ln2_rstd, N, C);
  }
  // residual2 = x + mixer(ln_1(x))
  layernorm_recompute(a.ln, x, p.ln_1_w, p.ln_1_b, a.ln1_mean, a.ln1_rstd, N, C);
  mix_back(d_residual, a.ln, d_ln);
  layernorm_backward(d_residual, g.ln_1_w, g.ln_1_b, d_ln, x, p.ln_1_w, a.ln1_mean, a.ln1_rstd, N, C);
}
