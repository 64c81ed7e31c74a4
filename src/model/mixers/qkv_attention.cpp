#include "model/mixers/qkv_attention.h"

#include "ops/head_gate.h"
#include "ops/linear.h"

QKVAttention::QKVAttention(const ModelConfig& c)
    : C(c.n_embd),
      NH(c.n_head),
      HS(c.head_size()),
      block_size(c.block_size),
      n_layer(c.n_layer),
      slots_([C = c.n_embd](auto ptr) { return qkv_tensor_slots<decltype(ptr)>(C); }) {}

std::vector<TensorDecl> QKVAttention::tensors() const { return slots_.tensors(); }

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

QKVAttention::Saved QKVAttention::carve(float* saved, int B, int T) const {
  const size_t BT = (size_t)B * T;
  Saved s;
  s.qkv = saved;
  s.stat = s.qkv + BT * 3 * C;
  s.O = s.stat + BT * NH;
  s.gated = s.O + BT * C;
  return s;
}

void QKVAttention::forward(float* out, const float* u, const float* residual, const MixerPass& x) const {
  const int BT = x.B * x.T;
  const Saved s = carve(x.saved, x.B, x.T);
  const QKVTensors<const float*> w = slots_.weights(x.p);
  linear_forward(s.qkv, u, w.qkv_w, w.qkv_b, BT, C, 3 * C);
  heads_forward(s.O, s.stat, s.qkv, x.mask, x.B, x.T);
  const float* heads = s.O;
  if (x.gates) {
    head_gate_forward(s.gated, s.O, x.gates, BT, NH, HS);
    heads = s.gated;
  }
  linear_forward(out, heads, w.proj_w, w.proj_b, BT, C, C, residual);
}

void QKVAttention::backward(float* du, MixerParams& g, float* dgates, const float* dout, const float* u,
                            const MixerPass& x) const {
  const int BT = x.B * x.T;
  const Saved s = carve(x.saved, x.B, x.T);
  float* dO = x.scratch;
  float* dqkv = dO + (size_t)BT * C;
  const QKVTensors<const float*> w = slots_.weights(x.p);
  const QKVTensors<float*> dw = slots_.grads(g);
  if (!x.gates) {
    linear_backward(dO, dw.proj_w, dw.proj_b, dout, s.O, w.proj_w, BT, C, C);
  } else {  // through the gates
    float* dgated = dqkv + (size_t)BT * 3 * C;
    linear_backward(dgated, dw.proj_w, dw.proj_b, dout, s.gated, w.proj_w, BT, C, C);
    head_gate_backward(dO, dgates, dgated, s.O, x.gates, BT, NH, HS);
  }
  heads_backward(dqkv, dO, s.qkv, s.stat, s.O, x.mask, x.B, x.T);
  linear_backward(du, dw.qkv_w, dw.qkv_b, dqkv, u, w.qkv_w, BT, C, 3 * C);
}
