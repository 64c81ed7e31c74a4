#include "model/mixers/qkv_attention.h"

#include "ops/head_gate.h"
#include "ops/linear.h"

QKVAttention::QKVAttention(const ModelConfig& c)
    : C(c.n_embd), NH(c.n_head), HS(c.head_size()), block_size(c.block_size), n_layer(c.n_layer) {}

std::vector<MixerTensor> QKVAttention::tensors() const {
  const int64_t c = C;
  //       name                   shape       init                   decay  matrix      (order = QKVSlot)
  return {{"attn.c_attn.weight", {c, 3 * c}, Init::Normal,          true,  true},
          {"attn.c_attn.bias",   {3 * c},    Init::Zeros,           false, false},
          {"attn.c_proj.weight", {c, c},     Init::ResidualNormal,  true,  true},
          {"attn.c_proj.bias",   {c},        Init::Zeros,           false, false}};
}

// What the forward keeps, per layer: qkv (B,T,3C), the heads' per-query number (B,NH,T), O (B,T,C), and with
// gates ξ·O (B,T,C). The backward's scratch, shared by the layers: dO, dqkv and, with gates, d(ξ·O).
size_t QKVAttention::saved_floats(int B, int T, bool gated) const {
  const size_t BT = (size_t)B * T;
  return BT * 3 * C + BT * NH + BT * C + (gated ? BT * C : 0);
}
size_t QKVAttention::scratch_floats(int B, int T, bool gated) const {
  const size_t BT = (size_t)B * T;
  return BT * C + BT * 3 * C + (gated ? BT * C : 0);
}

namespace {
struct Saved {
  float *qkv, *stat, *O, *gated;
};
Saved carve(float* saved, int B, int T, int C, int NH) {
  const size_t BT = (size_t)B * T;
  return {saved, saved + BT * 3 * C, saved + BT * 3 * C + BT * NH, saved + BT * 3 * C + BT * NH + BT * C};
}
}  // namespace

void QKVAttention::forward(float* out, const float* u, const float* residual, const MixerPass& x) const {
  const int BT = x.B * x.T;
  const Saved s = carve(x.saved, x.B, x.T, C, NH);
  linear_forward(s.qkv, u, x.p.t[kQKVWeight], x.p.t[kQKVBias], BT, C, 3 * C);
  heads_forward(s.O, s.stat, s.qkv, x.mask, x.B, x.T);
  const float* heads = s.O;
  if (x.gates) {
    head_gate_forward(s.gated, s.O, x.gates, BT, NH, HS);
    heads = s.gated;
  }
  linear_forward(out, heads, x.p.t[kProjWeight], x.p.t[kProjBias], BT, C, C, residual);
}

void QKVAttention::backward(float* du, MixerParams& g, float* dgates, const float* dout, const float* u,
                            const MixerPass& x) const {
  const int BT = x.B * x.T;
  const Saved s = carve(x.saved, x.B, x.T, C, NH);
  float* dO = x.scratch;
  float* dqkv = dO + (size_t)BT * C;
  if (!x.gates) {
    linear_backward(dO, g.t[kProjWeight], g.t[kProjBias], dout, s.O, x.p.t[kProjWeight], BT, C, C);
  } else {  // through the gates
    float* dgated = dqkv + (size_t)BT * 3 * C;
    linear_backward(dgated, g.t[kProjWeight], g.t[kProjBias], dout, s.gated, x.p.t[kProjWeight], BT, C, C);
    head_gate_backward(dO, dgates, dgated, s.O, x.gates, BT, NH, HS);
  }
  heads_backward(dqkv, dO, s.qkv, s.stat, s.O, x.mask, x.B, x.T);
  linear_backward(du, g.t[kQKVWeight], g.t[kQKVBias], dqkv, u, x.p.t[kQKVWeight], BT, C, 3 * C);
}

void QKVAttention::implied_weights(float* A, const MixerPass& x) const {
  const Saved s = carve(x.saved, x.B, x.T, C, NH);
  heads_weights(A, s.qkv, s.stat, x.mask, x.B, x.T);
}

// ---- one position: the same math with matrix-vector products (for one row, sgemm's repacking costs more than
// the product: ops/linear.h)

size_t QKVAttention::step_scratch_floats() const { return 3 * (size_t)C + 2 * (size_t)C + heads_step_scratch(); }

void QKVAttention::step(float* out, const float* u, const float* residual, const MixerParams& p,
                        const AttentionMask& mask, const float* gates, float* state, int pos, float* scratch) const {
  float* qkv = scratch;
  float* O = qkv + 3 * C;
  float* gated = O + C;
  matvec(qkv, u, p.t[kQKVWeight], p.t[kQKVBias], C, 3 * C);
  heads_absorb(qkv, state, pos, mask, gated + C);
  heads_read(O, qkv, state, pos, mask, gated + C);
  const float* heads = O;
  if (gates) {
    head_gate_forward(gated, O, gates, 1, NH, HS);
    heads = gated;
  }
  matvec(out, heads, p.t[kProjWeight], p.t[kProjBias], C, C);
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
  matvec2(qkv[0], qkv[1], rows[0].u, rows[1].u, p.t[kQKVWeight], p.t[kQKVBias], C, 3 * C);
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
  matvec2(rows[0].out, rows[1].out, heads[0], heads[1], p.t[kProjWeight], p.t[kProjBias], C, C);
  for (int r = 0; r < 2; r++)
    for (int o = 0; o < C; o++) rows[r].out[o] += rows[r].residual[o];
}

// Each position's q|k|v row is absorbed in order, exactly as decoding them one by one would, but the rows come
// from one batched forward (one sgemm per layer instead of T matrix-vector products).
void QKVAttention::state_from_forward(float* state, const MixerPass& x, float* scratch) const {
  const Saved s = carve(x.saved, 1, x.T, C, NH);
  for (int t = 0; t < x.T; t++) heads_absorb(s.qkv + (size_t)t * 3 * C, state, t, x.mask, scratch);
}
