// One transformer block's forward pass, written once and used by both forwards of the model:
//   GPT::forward (model.cpp)        all B·T rows at once; products through sgemm (linear_forward);
//                                   attention over the whole sequence (attention_forward)
//   Decoder::step_cached (decoder.cpp)  one new position; products as matrix-vector products (matvec);
//                                   attention of that one query over the KV cache
// The block is pre-LN, as in GPT-2:
//   residual2 = x + attn_proj(gate(attention(qkv(ln_1(x)))))       gate: head gates ξ, when on (head_gate.h)
//   residual3 = residual2 + mlp_proj(gelu(mlp_fc(ln_2(residual2))))   (attention-only blocks: residual3 = residual2)
// Its backward is only in GPT::backward (the decoder never trains).
#pragma once
#include <algorithm>
#include <cstddef>

#include "model/params.h"
#include "ops/gelu.h"
#include "ops/head_gate.h"
#include "ops/layernorm.h"
#include "ops/linear.h"

// Where a block's forward writes, N rows each (N = B·T, or 1 for the decoder). The LayerNorm statistics and
// qkv, att_out, residual2, fc, residual3 are what the backward needs; ln and fc_gelu are scratch.
struct BlockBuffers {
  float* ln;                        // (N, C)   LayerNorm 1 or 2's output
  float *ln1_mean, *ln1_rstd;       // (N) (N)
  float* qkv;                       // (N, 3C)
  float* att_out;                   // (N, C)   the heads' outputs side by side
  float* att_gated;                 // (N, C)   ξ_h·O per head; only read when gates are given
  float* residual2;                 // (N, C)
  float *ln2_mean, *ln2_rstd;       // (N) (N)
  float* fc;                        // (N, 4C)  before GELU
  float* fc_gelu;                   // (N, 4C)
  float* residual3;                 // (N, C)   the block's output
};

// The products of the batched forward (sgemm over N rows) and of the one-row decoder (matvec). Both compute
// out = residual + inp·W + b, with the residual optional.
struct BatchedProducts {
  static void linear(float* out, const float* inp, const float* w, const float* b, int N, int IC, int OC,
                     const float* residual = nullptr) {
    linear_forward(out, inp, w, b, N, IC, OC, residual);
  }
};
struct OneRowProducts {
  static void linear(float* out, const float* inp, const float* w, const float* b, int /*N = 1*/, int IC, int OC,
                     const float* residual = nullptr) {
    matvec(out, inp, w, b, IC, OC);
    if (residual)
      for (int o = 0; o < OC; o++) out[o] += residual[o];
  }
};

// x (N, C) is the block's input. attend(qkv, att_out) fills the heads' outputs from qkv: the batched forward
// attends over the sequence, the decoder over its cache. gates: this layer's NH head gates, or null.
template <typename Products, typename Attend>
void block_forward(const BlockBuffers& a, const float* x, const BlockParams& p, const float* gates, bool attn_only,
                   int N, int C, int NH, Attend&& attend) {
  // residual2 = x + attn_proj(gate(attention(qkv(ln_1(x)))))
  layernorm_forward(a.ln, a.ln1_mean, a.ln1_rstd, x, p.ln_1_w, p.ln_1_b, N, C);
  Products::linear(a.qkv, a.ln, p.attn_qkv_w, p.attn_qkv_b, N, C, 3 * C);
  attend(a.qkv, a.att_out);
  const float* heads = a.att_out;
  if (gates) {
    head_gate_forward(a.att_gated, a.att_out, gates, N, NH, C / NH);
    heads = a.att_gated;
  }
  Products::linear(a.residual2, heads, p.attn_proj_w, p.attn_proj_b, N, C, C, x);
  if (attn_only) {  // no MLP: the block's output is the attention residual
    std::copy(a.residual2, a.residual2 + (size_t)N * C, a.residual3);
    return;
  }
  // residual3 = residual2 + mlp_proj(gelu(mlp_fc(ln_2(residual2))))
  layernorm_forward(a.ln, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln_2_w, p.ln_2_b, N, C);
  Products::linear(a.fc, a.ln, p.mlp_fc_w, p.mlp_fc_b, N, C, 4 * C);
  gelu_forward(a.fc_gelu, a.fc, (size_t)N * 4 * C);
  Products::linear(a.residual3, a.fc_gelu, p.mlp_proj_w, p.mlp_proj_b, N, 4 * C, C, a.residual2);
}
