// The textbook RWKV-7 time mix (test-only, like reference.h): the layer of src/ops/rwkv.h written as its formulas,
// in plain loops, with the matrices formed:
//   A_t = diag(d_t) − κ_t (a_t ⊙ κ_t)ᵀ                      an N × N matrix per head and position
//   S_t = S_{t−1} · A_t + v_t k̃_tᵀ,   y_t = S_t r_t           the recurrence, matrix products as triple loops
// and its attention form, which needs no state:
//   M[t, s] = k̃_sᵀ · A_{s+1} ⋯ A_t · r_t,   y_t = Σ_{s≤t} M[t, s] v_s
// (the tests hold the two to each other). It reads the sizes (RwkvDims) and tensor pointers (RwkvTensors<const F*>)
// of src/ops/rwkv.h and calls none of the fast op's code. Its backward (at the end) is central finite differences
// of this forward. Templated on F; the tests use double.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/config.h"
#include "ops/rwkv.h"  // RwkvDims, RwkvTensors, RwkvSettings, the constants
#include "textbook/finite_differences.h"
#include "textbook/mixer.h"

// Steps 1–4 of the layer, for rows (B·T, C): r, k̃, v, the decay d, κ, the rate a and the gate g.
template <typename F>
struct RefRwkvInputs {
  std::vector<F> r, kt, v, dec, kap, a, g;
};

template <typename F>
RefRwkvInputs<F> ref_rwkv_inputs(const F* u, const RwkvTensors<const F*>& w, const RwkvDims& d, int B, int T) {
  const int C = d.C, D = d.D, N = d.N, R = B * T;
  auto sigma = [](F x) { return 1 / (1 + std::exp(-x)); };
  // y (R, O) = x (R, I) · W (I, O) + bias (O) or 0
  auto matmul = [R](const std::vector<F>& x, const F* W, const F* bias, int I, int O) {
    std::vector<F> y((size_t)R * O);
    for (int r = 0; r < R; r++)
      for (int o = 0; o < O; o++) {
        F s = bias ? bias[o] : F(0);
        for (int i = 0; i < I; i++) s += x[(size_t)r * I + i] * W[(size_t)i * O + o];
        y[(size_t)r * O + o] = s;
      }
    return y;
  };
  std::vector<std::vector<F>> x(6, std::vector<F>((size_t)R * C));  // x^r, x^w, x^k, x^v, x^a, x^g
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) {
        const F now = u[((size_t)b * T + t) * C + c], prev = t > 0 ? u[((size_t)b * T + t - 1) * C + c] : F(0);
        for (int m = 0; m < 6; m++) x[m][((size_t)b * T + t) * C + c] = now + w.mix[m * C + c] * (prev - now);
      }
  RefRwkvInputs<F> in;
  in.r = matmul(x[0], w.Wr, nullptr, C, C);
  std::vector<F> k = matmul(x[2], w.Wk, nullptr, C, C);
  in.v = matmul(x[3], w.Wv, nullptr, C, C);
  std::vector<F> wh = matmul(x[1], w.w1, nullptr, C, D);
  for (F& e : wh) e = std::tanh(e);
  in.dec = matmul(wh, w.w2, w.w0, D, C);
  for (F& e : in.dec) e = std::exp(-F(kRwkvDecayScale) * sigma(e));
  in.a = matmul(matmul(x[4], w.a1, nullptr, C, D), w.a2, w.a0, D, C);
  for (F& e : in.a) e = sigma(e);
  std::vector<F> gh = matmul(x[5], w.g1, nullptr, C, D);
  for (F& e : gh) e = sigma(e);
  in.g = matmul(gh, w.g2, nullptr, D, C);
  in.kap.resize((size_t)R * C), in.kt.resize((size_t)R * C);
  for (int r = 0; r < R; r++)
    for (int h = 0; h < d.H; h++) {
      F ss = 0;
      for (int j = 0; j < N; j++) ss += std::pow(k[(size_t)r * C + h * N + j] * w.k_k[h * N + j], 2);
      const F norm = std::max(std::sqrt(ss), F(kRwkvKappaEps));
      for (int j = 0; j < N; j++) {
        const size_t c = (size_t)r * C + h * N + j;
        in.kap[c] = k[c] * w.k_k[h * N + j] / norm;
        in.kt[c] = k[c] * (1 + (in.a[c] - 1) * w.k_a[h * N + j]);
      }
    }
  return in;
}

// A_t of head h at row `row` (N × N, row-major): A[i][j] = d_j δ_ij − κ_i a_j κ_j (the last term only with the erase).
template <typename F>
std::vector<F> ref_rwkv_A(const RefRwkvInputs<F>& in, size_t row, int h, const RwkvDims& d) {
  const int N = d.N;
  const size_t o = row * d.C + (size_t)h * N;
  std::vector<F> A((size_t)N * N);
  const F erase = d.erase ? F(1) : F(0);  // rwkv_erase 0: A_t = diag(d_t)
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      A[i * N + j] = (i == j ? in.dec[o + j] : F(0)) - erase * in.kap[o + i] * in.a[o + j] * in.kap[o + j];
  return A;
}

// The recurrence, step 5: y (B·T, C) before the norm; S_final (B, H, N, N) receives S_{T−1} when not null.
template <typename F>
std::vector<F> ref_rwkv_recurrence(const RefRwkvInputs<F>& in, const RwkvDims& d, int B, int T,
                                   std::vector<F>* S_final = nullptr) {
  const int N = d.N, C = d.C;
  std::vector<F> y((size_t)B * T * C);
  if (S_final) S_final->assign((size_t)B * d.H * N * N, F(0));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < d.H; h++) {
      std::vector<F> S((size_t)N * N, F(0)), next((size_t)N * N);
      for (int t = 0; t < T; t++) {
        const size_t row = (size_t)b * T + t, o = row * C + (size_t)h * N;
        const std::vector<F> A = ref_rwkv_A(in, row, h, d);
        for (int i = 0; i < N; i++)
          for (int j = 0; j < N; j++) {
            F s = in.v[o + i] * in.kt[o + j];  // S_{t−1}·A_t + v_t k̃_tᵀ
            for (int m = 0; m < N; m++) s += S[i * N + m] * A[m * N + j];
            next[i * N + j] = s;
          }
        S = next;
        for (int i = 0; i < N; i++) {
          F s = 0;
          for (int j = 0; j < N; j++) s += S[i * N + j] * in.r[o + j];
          y[o + i] = s;
        }
      }
      if (S_final) std::copy(S.begin(), S.end(), S_final->begin() + ((size_t)b * d.H + h) * N * N);
    }
  return y;
}

// The attention form: M (B, H, T, T), M[t, s] = k̃_sᵀ (A_{s+1} ⋯ A_t) r_t for s ≤ t, 0 above the diagonal; the
// product of matrices P = A_{s+1} ⋯ A_t is formed, from s = t (P = I) down.
template <typename F>
std::vector<F> ref_rwkv_M(const RefRwkvInputs<F>& in, const RwkvDims& d, int B, int T) {
  const int N = d.N, C = d.C;
  std::vector<F> M((size_t)B * d.H * T * T, F(0));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < d.H; h++)
      for (int t = 0; t < T; t++) {
        std::vector<F> P((size_t)N * N, F(0)), next((size_t)N * N);
        for (int i = 0; i < N; i++) P[i * N + i] = 1;
        const size_t ot = ((size_t)b * T + t) * C + (size_t)h * N;
        for (int s = t; s >= 0; s--) {
          const size_t row = (size_t)b * T + s, os = row * C + (size_t)h * N;
          F m = 0;
          for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) m += in.kt[os + i] * P[i * N + j] * in.r[ot + j];
          M[(((size_t)b * d.H + h) * T + t) * T + s] = m;
          const std::vector<F> A = ref_rwkv_A(in, row, h, d);  // P ← A_s · P
          for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
              F e = 0;
              for (int m2 = 0; m2 < N; m2++) e += A[i * N + m2] * P[m2 * N + j];
              next[i * N + j] = e;
            }
          P = next;
        }
      }
  return M;
}

// y (B·T, C) from M: y_t = Σ_{s≤t} M[t, s] v_s per head.
template <typename F>
std::vector<F> ref_rwkv_attention_form(const RefRwkvInputs<F>& in, const RwkvDims& d, int B, int T) {
  const int N = d.N, C = d.C;
  const std::vector<F> M = ref_rwkv_M(in, d, B, T);
  std::vector<F> y((size_t)B * T * C, F(0));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < d.H; h++)
      for (int t = 0; t < T; t++)
        for (int s = 0; s <= t; s++)
          for (int i = 0; i < N; i++)
            y[((size_t)b * T + t) * C + h * N + i] +=
                M[(((size_t)b * d.H + h) * T + t) * T + s] * in.v[((size_t)b * T + s) * C + h * N + i];
  return y;
}

// The whole layer: out (B, T, C) from u (B, T, C), through the recurrence.
template <typename F>
void ref_rwkv_forward(F* out, const F* u, const RwkvTensors<const F*>& w, const RwkvDims& d, int B, int T) {
  const int N = d.N, C = d.C, R = B * T;
  const RefRwkvInputs<F> in = ref_rwkv_inputs(u, w, d, B, T);
  const std::vector<F> y = ref_rwkv_recurrence(in, d, B, T);
  std::vector<F> z((size_t)R * C);
  for (int r = 0; r < R; r++)
    for (int h = 0; h < d.H; h++) {
      const size_t o = (size_t)r * C + (size_t)h * N;
      F mean = 0, var = 0, beta = 0;
      for (int j = 0; j < N; j++) mean += y[o + j] / N;
      for (int j = 0; j < N; j++) var += (y[o + j] - mean) * (y[o + j] - mean) / N;
      for (int j = 0; j < N; j++) beta += in.r[o + j] * in.kt[o + j] * w.r_k[h * N + j];
      for (int j = 0; j < N; j++) {
        const int c = h * N + j;
        const F normed = (y[o + j] - mean) / std::sqrt(var + F(kRwkvNormEps)) * w.ln_w[c] + w.ln_b[c];
        z[o + j] = (normed + beta * in.v[o + j]) * in.g[o + j];
      }
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
std::vector<F> ref_rwkv_implied_attention(const F* u, const RwkvTensors<const F*>& w, const RwkvDims& d, int B,
                                          int T) {
  return ref_rwkv_M(ref_rwkv_inputs(u, w, d, B, T), d, B, T);
}

// The layer's backward by central differences of ref_rwkv_forward: du = ∂⟨dout, out⟩/∂u written, every tensor's
// gradient added to (src/ops/README.md). Two forwards per input and parameter value, h = 1e-6: double and tiny
// shapes only.
template <typename F>
void ref_rwkv_backward(F* du, const RwkvTensors<F*>& g, const F* dout, const F* u, const RwkvTensors<const F*>& w,
                       const RwkvDims& d, int B, int T) {
  ref_backward_by_differences(du, g, dout, u, w, rwkv_tensor_slots<const F*>(d), rwkv_tensor_slots<F*>(d),
                              (size_t)B * T * d.C, [&](F* out, const F* x, const RwkvTensors<const F*>& at) {
                                ref_rwkv_forward(out, x, at, d, B, T);
                              });
}

// A layer's tensors "rwkv.*" through w(name) (parameters or gradients).
template <typename Ptr, typename W>
RwkvTensors<Ptr> ref_rwkv_tensors(W w, const RwkvDims& d) {
  return bind_by_name(rwkv_tensor_slots<Ptr>(d), w);
}

// The textbook mixer "rwkv": the layer above; the weights it reports are M (B, H = NH, T, T), and its backward is
// the finite differences of ref_rwkv_backward.
class RefRwkv final : public RefMixer {
 public:
  explicit RefRwkv(const ModelConfig& c) : d_(RwkvDims::make(c.n_embd, c.n_head, c.mixer_settings.get<RwkvSettings>())) {}
  void forward(double* out, double* A, const double* u, const RefTensor& w, const RefMixerPass& x) const override {
    const RwkvTensors<const double*> t = ref_rwkv_tensors<const double*>(w, d_);
    ref_rwkv_forward(out, u, t, d_, x.B, x.T);
    const std::vector<double> M = ref_rwkv_implied_attention(u, t, d_, x.B, x.T);
    std::copy(M.begin(), M.end(), A);
  }
  void backward(double* du, const RefGrad& g, double*, const double* dout, const double* u, const RefTensor& w,
                const RefMixerPass& x) const override {
    ref_rwkv_backward(du, ref_rwkv_tensors<double*>(g, d_), dout, u, ref_rwkv_tensors<const double*>(w, d_), d_, x.B,
                      x.T);
  }

 private:
  const RwkvDims d_;
};
// Test shapes: LoRAs of width 3, then width 1, then the ablation without the erase.
inline const bool ref_rwkv_registered = register_ref_mixer({
    "rwkv",
    [](const ModelConfig& c) -> std::unique_ptr<RefMixer> { return std::make_unique<RefRwkv>(c); },
    {
        {"", [](ModelConfig& c) { c.mixer_settings.get<RwkvSettings>().rwkv_lora = 3; }},
        {"lora 1", [](ModelConfig& c) { c.mixer_settings.get<RwkvSettings>().rwkv_lora = 1; }},
        {"erase off",
         [](ModelConfig& c) {
           c.mixer_settings.get<RwkvSettings>().rwkv_lora = 2;
           c.mixer_settings.get<RwkvSettings>().rwkv_erase = 0;
         }},
    },
    // Its backward is central differences (h = 1e-6): ~1e-9 of the loss's scale in every tensor, so a tensor whose
    // own gradients are 1e-4 of the largest is measured against 1e-2 of the largest (tests/model_check.h).
    1e-2,
});
