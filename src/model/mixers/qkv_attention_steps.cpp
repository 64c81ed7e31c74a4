// The attention family's code that training does not run: the weights the lab draws, and decoding one position at a
// time (model/decoder.h), with matrix-vector products (for one row, sgemm's repacking costs more than the product:
// ops/linear.h). The family and its training-time forward and backward are in qkv_attention.cpp.
#include "model/mixers/qkv_attention.h"

#include "ops/head_gate.h"
#include "ops/linear.h"

void QKVAttention::implied_weights(float* A, const MixerPass& x) const {
  const Saved s = carve(x.saved, x.B, x.T);
  heads_weights(A, s.qkv, s.stat, x.mask, x.B, x.T);
}

// ---- one position: the same math as the forward, one row

size_t QKVAttention::step_scratch_floats() const { return 3 * (size_t)C + 2 * (size_t)C + heads_step_scratch(); }

void QKVAttention::step(float* out, const float* u, const float* residual, const MixerParams& p,
                        const AttentionMask& mask, const float* gates, float* state, int pos, float* scratch) const {
  float* qkv = scratch;
  float* O = qkv + 3 * C;
  float* gated = O + C;
  const QKVTensors<const float*> w = slots_.weights(p);
  matvec(qkv, u, w.qkv_w, w.qkv_b, C, 3 * C);
  heads_absorb(qkv, state, pos, mask, gated + C);
  heads_read(O, qkv, state, pos, mask, gated + C);
  const float* heads = O;
  if (gates) {
    head_gate_forward(gated, O, gates, 1, NH, HS);
    heads = gated;
  }
  matvec(out, heads, w.proj_w, w.proj_b, C, C);
  for (int o = 0; o < C; o++) out[o] += residual[o];
}

// step() on two rows, each with its state and position, the two q|k|v and output products each one read of the
// weights (matvec2): the weights are a third of a block's, and a second one-row read of them, even from L2,
// costs about as much as the heads' work of the second row.
void QKVAttention::step2(const StepRow rows[2], const MixerParams& p, const AttentionMask& mask, const float* gates,
                         float* scratch) const {
  const size_t per_row = step_scratch_floats();
  float* qkv[2];
  float* heads[2];
  for (int r = 0; r < 2; r++) {
    qkv[r] = scratch + r * per_row;
    heads[r] = qkv[r] + 3 * C;  // O, or with gates ξ·O after it
  }
  const QKVTensors<const float*> w = slots_.weights(p);
  matvec2(qkv[0], qkv[1], rows[0].u, rows[1].u, w.qkv_w, w.qkv_b, C, 3 * C);
  for (int r = 0; r < 2; r++) {
    float* O = qkv[r] + 3 * C;
    float* gated = O + C;
    heads_absorb(qkv[r], rows[r].state, rows[r].pos, mask, gated + C);
    heads_read(O, qkv[r], rows[r].state, rows[r].pos, mask, gated + C);
    if (gates) {
      head_gate_forward(gated, O, gates, 1, NH, HS);
      heads[r] = gated;
    }
  }
  matvec2(rows[0].out, rows[1].out, heads[0], heads[1], w.proj_w, w.proj_b, C, C);
  for (int r = 0; r < 2; r++)
    for (int o = 0; o < C; o++) rows[r].out[o] += rows[r].residual[o];
}

// Each position's q|k|v row is absorbed in order, exactly as decoding them one by one would, but the rows come
// from one batched forward (one sgemm per layer instead of T matrix-vector products).
void QKVAttention::state_from_forward(float* state, const MixerPass& x, float* scratch) const {
  const Saved s = carve(x.saved, 1, x.T);
  for (int t = 0; t < x.T; t++) heads_absorb(s.qkv + (size_t)t * 3 * C, state, t, x.mask, scratch);
}

// The heads' O (ξ·O with the head gates on) is c_proj's input: head h's share is O's columns h·HS … (h+1)·HS − 1.
HeadShares QKVAttention::head_shares(const MixerPass& x) const {
  const Saved s = carve(x.saved, x.B, x.T);
  const QKVTensors<const float*> w = slots_.weights(x.p);
  return {x.gates ? s.gated : s.O, C, w.proj_w, w.proj_b};
}
