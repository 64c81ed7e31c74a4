// The textbook Gated DeltaNet layer (test-only, like reference.h): the layer of src/ops/deltanet.h written as its
// formulas, in plain loops, with the matrices formed:
//   E_t = I − β_t k_t k_tᵀ                                     an N × N matrix per head and position
//   S_t = α_t·S_{t−1}·E_t + β_t v_t k_tᵀ,   y_t = S_t q_t        the recurrence, matrix products as triple loops
// and its attention form, which needs no state:
//   M[t, s] = β_s (∏_{i=s+1}^{t} α_i) k_sᵀ E_{s+1} ⋯ E_t q_t,   y_t = Σ_{s≤t} M[t, s] v_s
// (the tests hold the two to each other). It reads the sizes (DeltaNetDims) and tensor pointers
// (DeltaNetTensors<const F*>) of src/ops/deltanet.h and calls none of the fast op's code. Its backward (at the end)
// is central finite differences of this forward. Templated on F; the tests use double.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/config.h"
#include "ops/deltanet.h"  // DeltaNetDims, DeltaNetTensors, DeltaNetSettings, the constants
#include "textbook/finite_differences.h"
#include "textbook/mixer.h"

// Steps 1–4 of the layer and the gate's silu, for rows (B·T, C): q, k, v as the recurrence reads them, β and α
// (B·T, H), and a = silu(u·W_g) (B·T, C).
template <typename F>
struct RefDeltaNetInputs {
  std::vector<F> q, k, v, beta, alpha, gate;
};

template <typename F>
RefDeltaNetInputs<F> ref_deltanet_inputs(const F* u, const DeltaNetTensors<const F*>& w, const DeltaNetDims& d, int B,
                                         int T) {
  const int C = d.C, H = d.H, N = d.N, K = d.K, R = B * T;
  auto sigma = [](F x) { return 1 / (1 + std::exp(-x)); };
  auto silu = [&](F x) { return x * sigma(x); };
  auto softplus = [](F x) { return std::log(1 + std::exp(x)); };
  // y (R, O) = u (R, C) · W (C, O)
  auto matmul = [&](const F* W, int O) {
    std::vector<F> y((size_t)R * O);
    for (int r = 0; r < R; r++)
      for (int o = 0; o < O; o++) {
        F s = 0;
        for (int i = 0; i < C; i++) s += u[(size_t)r * C + i] * W[(size_t)i * O + o];
        y[(size_t)r * O + o] = s;
      }
    return y;
  };
  // The causal depthwise convolution: x̃_t[c] = Σ_j w[c, j]·x̂_{t−K+1+j}[c], zero before each sequence.
  auto conv = [&](const std::vector<F>& x, const F* cw) {
    std::vector<F> y((size_t)R * C, F(0));
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
          for (int j = 0; j < K; j++) {
            const int s = t - K + 1 + j;
            if (s >= 0) y[((size_t)b * T + t) * C + c] += cw[(size_t)c * K + j] * x[((size_t)b * T + s) * C + c];
          }
    return y;
  };
  // silu, then each head's N channels divided by max(‖·‖, 1e-6), times `scale`.
  auto silu_l2 = [&](std::vector<F> x, F scale) {
    for (F& e : x) e = silu(e);
    for (int r = 0; r < R; r++)
      for (int h = 0; h < H; h++) {
        F ss = 0;
        for (int j = 0; j < N; j++) ss += x[(size_t)r * C + h * N + j] * x[(size_t)r * C + h * N + j];
        const F norm = std::max(std::sqrt(ss), F(kDeltaNetL2Eps));
        for (int j = 0; j < N; j++) x[(size_t)r * C + h * N + j] *= scale / norm;
      }
    return x;
  };
  RefDeltaNetInputs<F> in;
  in.q = silu_l2(conv(matmul(w.Wq, C), w.conv_q), 1 / std::sqrt(F(N)));
  in.k = silu_l2(conv(matmul(w.Wk, C), w.conv_k), F(1));
  in.v = conv(matmul(w.Wv, C), w.conv_v);
  for (F& e : in.v) e = silu(e);
  in.beta = matmul(w.Wbeta, H);
  const F s = d.negative ? F(2) : F(1);
  for (F& e : in.beta) e = s * sigma(e);
  in.alpha = matmul(w.Walpha, H);
  for (int r = 0; r < R; r++)
    for (int h = 0; h < H; h++) {
      F& e = in.alpha[(size_t)r * H + h];
      e = std::exp(-std::exp(w.A_log[h]) * softplus(e + w.dt_bias[h]));
    }
  in.gate = matmul(w.Wg, C);
  for (F& e : in.gate) e = silu(e);
  return in;
}

// E_t = I − β_t k_t k_tᵀ of head h at row `row` (N × N, row-major).
template <typename F>
std::vector<F> ref_deltanet_E(const RefDeltaNetInputs<F>& in, size_t row, int h, const DeltaNetDims& d) {
  const int N = d.N;
  const size_t o = row * d.C + (size_t)h * N;
  const F beta = in.beta[row * d.H + h];
  std::vector<F> E((size_t)N * N);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) E[i * N + j] = (i == j ? F(1) : F(0)) - beta * in.k[o + i] * in.k[o + j];
  return E;
}

// The recurrence, step 5: y (B·T, C) before the norm; S_final (B, H, N, N) receives S_{T−1} when not null.
template <typename F>
std::vector<F> ref_deltanet_recurrence(const RefDeltaNetInputs<F>& in, const DeltaNetDims& d, int B, int T,
                                       std::vector<F>* S_final = nullptr) {
  const int N = d.N, C = d.C, H = d.H;
  std::vector<F> y((size_t)B * T * C);
  if (S_final) S_final->assign((size_t)B * H * N * N, F(0));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      std::vector<F> S((size_t)N * N, F(0));
      std::vector<F> next((size_t)N * N);
      for (int t = 0; t < T; t++) {
        const size_t row = (size_t)b * T + t;
        const size_t o = row * C + (size_t)h * N;
        const F alpha = in.alpha[row * H + h];
        const F beta = in.beta[row * H + h];
        const std::vector<F> E = ref_deltanet_E(in, row, h, d);
        for (int i = 0; i < N; i++)
          for (int j = 0; j < N; j++) {
            F s = 0;  // (S_{t−1}·E_t)[i, j]
            for (int m = 0; m < N; m++) s += S[i * N + m] * E[m * N + j];
            next[i * N + j] = alpha * s + beta * in.v[o + i] * in.k[o + j];
          }
        S = next;
        for (int i = 0; i < N; i++) {
          F s = 0;
          for (int j = 0; j < N; j++) s += S[i * N + j] * in.q[o + j];
          y[o + i] = s;
        }
      }
      if (S_final) std::copy(S.begin(), S.end(), S_final->begin() + ((size_t)b * H + h) * N * N);
    }
  return y;
}

// The attention form: M (B, H, T, T), M[t, s] = β_s (∏_{i=s+1}^{t} α_i) k_sᵀ (E_{s+1} ⋯ E_t) q_t for s ≤ t, 0 above
// the diagonal; the product of matrices P = E_{s+1} ⋯ E_t is formed, from s = t (P = I) down, and the product of
// α's beside it.
template <typename F>
std::vector<F> ref_deltanet_M(const RefDeltaNetInputs<F>& in, const DeltaNetDims& d, int B, int T) {
  const int N = d.N, C = d.C, H = d.H;
  std::vector<F> M((size_t)B * H * T * T, F(0));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++) {
        std::vector<F> P((size_t)N * N, F(0));
        std::vector<F> next((size_t)N * N);
        for (int i = 0; i < N; i++) P[i * N + i] = 1;
        F decay = 1;
        const size_t ot = ((size_t)b * T + t) * C + (size_t)h * N;
        for (int s = t; s >= 0; s--) {
          const size_t row = (size_t)b * T + s;
          const size_t os = row * C + (size_t)h * N;
          F m = 0;
          for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) m += in.k[os + i] * P[i * N + j] * in.q[ot + j];
          M[(((size_t)b * H + h) * T + t) * T + s] = in.beta[row * H + h] * decay * m;
          const std::vector<F> E = ref_deltanet_E(in, row, h, d);  // P ← E_s · P
          for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
              F e = 0;
              for (int m2 = 0; m2 < N; m2++) e += E[i * N + m2] * P[m2 * N + j];
              next[i * N + j] = e;
            }
          P = next;
          decay *= in.alpha[row * H + h];
        }
      }
  return M;
}

// y (B·T, C) from M: y_t = Σ_{s≤t} M[t, s] v_s per head.
template <typename F>
std::vector<F> ref_deltanet_attention_form(const RefDeltaNetInputs<F>& in, const DeltaNetDims& d, int B, int T) {
  const int N = d.N, C = d.C, H = d.H;
  const std::vector<F> M = ref_deltanet_M(in, d, B, T);
  std::vector<F> y((size_t)B * T * C, F(0));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++)
        for (int s = 0; s <= t; s++)
          for (int i = 0; i < N; i++)
            y[((size_t)b * T + t) * C + h * N + i] +=
                M[(((size_t)b * H + h) * T + t) * T + s] * in.v[((size_t)b * T + s) * C + h * N + i];
  return y;
}

// The whole layer: out (B, T, C) from u (B, T, C), through the recurrence.
template <typename F>
void ref_deltanet_forward(F* out, const F* u, const DeltaNetTensors<const F*>& w, const DeltaNetDims& d, int B,
                          int T) {
  const int N = d.N, C = d.C, R = B * T;
  const RefDeltaNetInputs<F> in = ref_deltanet_inputs(u, w, d, B, T);
  const std::vector<F> y = ref_deltanet_recurrence(in, d, B, T);
  std::vector<F> z((size_t)R * C);
  for (int r = 0; r < R; r++)
    for (int h = 0; h < d.H; h++) {
      const size_t o = (size_t)r * C + (size_t)h * N;
      F ms = 0;  // mean of y² over the head
      for (int j = 0; j < N; j++) ms += y[o + j] * y[o + j] / N;
      for (int j = 0; j < N; j++) z[o + j] = y[o + j] / std::sqrt(ms + F(kDeltaNetNormEps)) * w.norm_w[j] * in.gate[o + j];
    }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      F s = 0;
      for (int i = 0; i < C; i++) s += z[(size_t)r * C + i] * w.Wo[(size_t)i * C + c];
      out[(size_t)r * C + c] = s;
    }
}

// The layer's implied attention on u: M (B, H, T, T).
template <typename F>
std::vector<F> ref_deltanet_implied_attention(const F* u, const DeltaNetTensors<const F*>& w, const DeltaNetDims& d,
                                              int B, int T) {
  return ref_deltanet_M(ref_deltanet_inputs(u, w, d, B, T), d, B, T);
}

// The layer's backward by central differences of ref_deltanet_forward: du = ∂⟨dout, out⟩/∂u written, every
// tensor's gradient added to (src/ops/README.md). Two forwards per input and parameter value, h = 1e-6: double and
// tiny shapes only.
template <typename F>
void ref_deltanet_backward(F* du, const DeltaNetTensors<F*>& g, const F* dout, const F* u,
                           const DeltaNetTensors<const F*>& w, const DeltaNetDims& d, int B, int T) {
  ref_backward_by_differences(du, g, dout, u, w, deltanet_tensor_slots<const F*>(d), deltanet_tensor_slots<F*>(d),
                              (size_t)B * T * d.C, [&](F* out, const F* x, const DeltaNetTensors<const F*>& at) {
                                ref_deltanet_forward(out, x, at, d, B, T);
                              });
}

// A layer's tensors "deltanet.*" through w(name) (parameters or gradients).
template <typename Ptr, typename W>
DeltaNetTensors<Ptr> ref_deltanet_tensors(W w, const DeltaNetDims& d) {
  return bind_by_name(deltanet_tensor_slots<Ptr>(d), w);
}

// The textbook mixer "deltanet": the layer above; the weights it reports are M (B, H = NH, T, T), and its backward
// is the finite differences of ref_deltanet_backward.
class RefDeltaNet final : public RefMixer {
 public:
  explicit RefDeltaNet(const ModelConfig& c)
      : d_(DeltaNetDims::make(c.n_embd, c.n_head, c.mixer_settings.get<DeltaNetSettings>())) {}
  void forward(double* out, double* A, const double* u, const RefTensor& w, const RefMixerPass& x) const override {
    const DeltaNetTensors<const double*> t = ref_deltanet_tensors<const double*>(w, d_);
    ref_deltanet_forward(out, u, t, d_, x.B, x.T);
    const std::vector<double> M = ref_deltanet_implied_attention(u, t, d_, x.B, x.T);
    std::copy(M.begin(), M.end(), A);
  }
  void backward(double* du, const RefGrad& g, double*, const double* dout, const double* u, const RefTensor& w,
                const RefMixerPass& x) const override {
    ref_deltanet_backward(du, ref_deltanet_tensors<double*>(g, d_), dout, u, ref_deltanet_tensors<const double*>(w, d_),
                          d_, x.B, x.T);
  }

 private:
  const DeltaNetDims d_;
};
// Test shapes: a convolution of width 3, then width 1 with the negative-eigenvalue setting on (β in (0, 2)).
inline const bool ref_deltanet_registered = register_ref_mixer({
    "deltanet",
    [](const ModelConfig& c) -> std::unique_ptr<RefMixer> { return std::make_unique<RefDeltaNet>(c); },
    {
        {"", [](ModelConfig& c) { c.mixer_settings.get<DeltaNetSettings>().deltanet_conv = 3; }},
        {"conv 1, β in (0, 2)",
         [](ModelConfig& c) {
           c.mixer_settings.get<DeltaNetSettings>().deltanet_conv = 1;
           c.mixer_settings.get<DeltaNetSettings>().deltanet_negative_eigenvalues = 1;
         }},
    },
    // Its backward is central differences of its forward (h = 1e-6), as RWKV-7's textbook's: the same floor.
    1e-2,
});
