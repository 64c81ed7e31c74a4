// The textbook Mamba-2 mixer (test-only, like reference.h): the layer of src/ops/mamba.h computed by its ATTENTION
// form, the O(T²) double loop that needs no state, no scan and no reverse scan:
//   M^h_ij = (C_i·B_j)·exp(a_h·Σ_{k=j+1}^{i} Δ_{k,h})·Δ_{j,h}  (j ≤ i, 0 above the diagonal)
//   y_{i,h} = Σ_{j≤i} M^h_ij x_{j,h} + D_h·x_{i,h}
// Every other step is its formula written out: the products as plain loops, the conv as a sum over the window,
// softplus(v) = log(1 + eᵛ) exactly (no threshold: the fast op's switch to v above 20 is tested against this),
// silu(v) = v/(1 + e^{−v}), and the norm n = g/√(mean(g²) + ε) ⊙ w. Sizes, tensor layout and the variants
// (non-selective: Δ = softplus(dt_bias), constant B, C; K = 0: no conv) as in src/ops/mamba.h, whose sizes
// (MambaDims) and tensor pointers (MambaTensors<const F*>) this file reads; it calls none of the fast op's code. Its
// backward is central finite differences of this forward. Templated on F; the tests use double. At the end: the
// textbook mixer "mamba" (textbook/mixer.h), sized by the model's MambaSettings.
#pragma once
#include <cmath>
#include <vector>

#include "model/config.h"
#include "ops/mamba.h"  // MambaDims, MambaTensors, MambaSettings, kMambaNormEps
#include "textbook/finite_differences.h"
#include "textbook/mixer.h"

template <typename F>
F ref_silu(F v) {
  return v / (1 + std::exp(-v));
}

template <typename F>
F ref_softplus(F v) {
  return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));  // log(1 + eᵛ), never overflowing
}

// out[t, c] = b[c] + Σ_{k=0}^{K−1} w[c, k]·inp[t − (K−1) + k, c], inputs before the first position 0; K = 0: out = inp.
// inp row stride in_stride, out (B, T, X).
template <typename F>
void ref_mamba_conv(F* out, const F* inp, int in_stride, const F* w, const F* b, int B, int T, int X, int K) {
  for (int bb = 0; bb < B; bb++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < X; c++) {
        F s = K == 0 ? inp[(bb * T + t) * in_stride + c] : b[c];
        for (int k = 0; k < K; k++) {
          const int src = t - (K - 1) + k;
          if (src >= 0) s += w[c * K + k] * inp[(bb * T + src) * in_stride + c];
        }
        out[(bb * T + t) * X + c] = s;
      }
}

// Δ[r, h] = softplus(dt_raw[r, h] + dt_bias[h]), or softplus(dt_bias[h]) with dt_raw null. R rows.
template <typename F>
void ref_mamba_delta(F* dt, const F* dt_raw, int raw_stride, const F* dt_bias, int R, int H) {
  for (int r = 0; r < R; r++)
    for (int h = 0; h < H; h++) dt[r * H + h] = ref_softplus((dt_raw ? dt_raw[r * raw_stride + h] : F(0)) + dt_bias[h]);
}

// B_t and C_t of row `row`: columns E … E+N−1 and E+N … E+2N−1 of xbc (B, T, X) when selective, else the constants.
template <typename F>
const F* ref_mamba_B(const F* xbc, int row, const MambaTensors<const F*>& w, const MambaDims& d) {
  return d.selective ? xbc + row * d.conv_channels() + d.E : w.B_const;
}
template <typename F>
const F* ref_mamba_C(const F* xbc, int row, const MambaTensors<const F*>& w, const MambaDims& d) {
  return d.selective ? xbc + row * d.conv_channels() + d.E + d.N : w.C_const;
}

// M (B, H, T, T) from the conv's outputs xbc (B, T, X) and Δ (B, T, H): the formula at the top, the decay's sum
// over k written out for every pair.
template <typename F>
void ref_mamba_M(F* M, const F* xbc, const F* dt, const MambaTensors<const F*>& w, const MambaDims& d, int B, int T) {
  const int H = d.H;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const F a = -std::exp(w.A_log[h]);
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
          F m = 0;
          if (j <= i) {
            const F* Ci = ref_mamba_C(xbc, b * T + i, w, d);
            const F* Bj = ref_mamba_B(xbc, b * T + j, w, d);
            F cb = 0, sum_dt = 0;
            for (int n = 0; n < d.N; n++) cb += Ci[n] * Bj[n];
            for (int k = j + 1; k <= i; k++) sum_dt += dt[(b * T + k) * H + h];
            m = cb * std::exp(a * sum_dt) * dt[(b * T + j) * H + h];
          }
          M[((b * H + h) * T + i) * T + j] = m;
        }
    }
}

// y (B, T, E): y_{i,h} = Σ_j M^h_ij x_{j,h} + D_h·x_{i,h}, with x = xbc's first E columns.
template <typename F>
void ref_mamba_scan(F* y, const F* xbc, const F* dt, const MambaTensors<const F*>& w, const MambaDims& d, int B,
                    int T) {
  const int H = d.H, P = d.P, X = d.conv_channels();
  std::vector<F> M(B * H * T * T);
  ref_mamba_M(M.data(), xbc, dt, w, d, B, T);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < T; i++)
        for (int p = 0; p < P; p++) {
          const int c = h * P + p;
          F s = w.D[h] * xbc[(b * T + i) * X + c];
          for (int j = 0; j <= i; j++) s += M[((b * H + h) * T + i) * T + j] * xbc[(b * T + j) * X + c];
          y[(b * T + i) * d.E + c] = s;
        }
}

// n (R, E) = g/√(Σ g²/E + ε) ⊙ w with g = y ⊙ silu(z); z row stride z_stride.
template <typename F>
void ref_gated_rmsnorm(F* n, const F* y, const F* z, int z_stride, const F* w, int R, int E) {
  for (int r = 0; r < R; r++) {
    std::vector<F> g(E);
    F mean_sq = 0;
    for (int e = 0; e < E; e++) {
      g[e] = y[r * E + e] * ref_silu(z[r * z_stride + e]);
      mean_sq += g[e] * g[e] / E;
    }
    const F scale = 1 / std::sqrt(mean_sq + F(kMambaNormEps));
    for (int e = 0; e < E; e++) n[r * E + e] = g[e] * scale * w[e];
  }
}

// Steps 1–3 of the layer: proj = u·W_in (B,T,in_cols), xbc = silu(conv(xBC_raw)) (B,T,X), Δ (B,T,H).
template <typename F>
void ref_mamba_inputs(std::vector<F>& proj, std::vector<F>& xbc, std::vector<F>& dt, const F* u,
                      const MambaTensors<const F*>& w, const MambaDims& d, int B, int T) {
  const int R = B * T, IN = d.in_cols(), X = d.conv_channels();
  proj.assign(R * IN, F(0));
  for (int r = 0; r < R; r++)
    for (int o = 0; o < IN; o++) {
      F s = 0;
      for (int c = 0; c < d.C; c++) s += u[r * d.C + c] * w.in_proj_w[c * IN + o];
      proj[r * IN + o] = s;
    }
  xbc.assign(R * X, F(0));
  ref_mamba_conv(xbc.data(), proj.data() + d.E, IN, w.conv_w, w.conv_b, B, T, X, d.K);
  for (F& v : xbc) v = ref_silu(v);
  dt.assign(R * d.H, F(0));
  ref_mamba_delta(dt.data(), d.selective ? proj.data() + d.E + X : nullptr, IN, w.dt_bias, R, d.H);
}

// The whole layer: out (B, T, C) from u (B, T, C).
template <typename F>
void ref_mamba_forward(F* out, const F* u, const MambaTensors<const F*>& w, const MambaDims& d, int B, int T) {
  const int R = B * T, IN = d.in_cols(), E = d.E;
  std::vector<F> proj, xbc, dt, y(R * E), n(R * E);
  ref_mamba_inputs(proj, xbc, dt, u, w, d, B, T);
  ref_mamba_scan(y.data(), xbc.data(), dt.data(), w, d, B, T);
  ref_gated_rmsnorm(n.data(), y.data(), proj.data(), IN, w.norm_w, R, E);  // z: proj's first E columns
  for (int r = 0; r < R; r++)
    for (int c = 0; c < d.C; c++) {
      F s = 0;
      for (int e = 0; e < E; e++) s += n[r * E + e] * w.out_proj_w[e * d.C + c];
      out[r * d.C + c] = s;
    }
}

// The hidden attention of the layer on u: M (B, H, T, T).
template <typename F>
void ref_mamba_hidden_attention(F* M, const F* u, const MambaTensors<const F*>& w, const MambaDims& d, int B, int T) {
  std::vector<F> proj, xbc, dt;
  ref_mamba_inputs(proj, xbc, dt, u, w, d, B, T);
  ref_mamba_M(M, xbc.data(), dt.data(), w, d, B, T);
}

// The layer's backward by central differences of ref_mamba_forward (textbook/finite_differences.h): the textbook
// has no analytic backward of its own (the fast one, a reverse scan, is what the tests hold to this), so the
// reference model (reference.h) differentiates a Mamba layer this way, over the tensors its variant has.
template <typename F>
void ref_mamba_backward(F* du, const MambaTensors<F*>& g, const F* dout, const F* u, const MambaTensors<const F*>& w,
                        const MambaDims& d, int B, int T) {
  ref_backward_by_differences(du, g, dout, u, w, mamba_tensor_slots<const F*>(d), mamba_tensor_slots<F*>(d),
                              (size_t)B * T * d.C, [&](F* out, const F* x, const MambaTensors<const F*>& at) {
                                ref_mamba_forward(out, x, at, d, B, T);
                              });
}

// A mamba layer's tensors "mamba.*" through w(name) (parameters or gradients), by its table's rows
// (mamba_tensor_slots); those its variant lacks (the conv's without a conv, B and C when selective) stay null.
template <typename Ptr, typename W>
MambaTensors<Ptr> ref_mamba_tensors(W w, const MambaDims& d) {
  return bind_by_name(mamba_tensor_slots<Ptr>(d), w);
}

// The textbook mixer "mamba": the layer above; the weights it reports are its hidden attention M (B, H = NH, T, T),
// and its backward is the finite differences of ref_mamba_backward.
class RefMamba final : public RefMixer {
 public:
  explicit RefMamba(const ModelConfig& c) : d_(MambaDims::make(c.n_embd, c.n_head, c.mixer_settings.get<MambaSettings>())) {}
  void forward(double* out, double* A, const double* u, const RefTensor& w, const RefMixerPass& x) const override {
    const MambaTensors<const double*> m = ref_mamba_tensors<const double*>(w, d_);
    ref_mamba_forward(out, u, m, d_, x.B, x.T);
    ref_mamba_hidden_attention(A, u, m, d_, x.B, x.T);
  }
  void backward(double* du, const RefGrad& g, double*, const double* dout, const double* u, const RefTensor& w,
                const RefMixerPass& x) const override {
    ref_mamba_backward(du, ref_mamba_tensors<double*>(g, d_), dout, u, ref_mamba_tensors<const double*>(w, d_), d_,
                       x.B, x.T);
  }

 private:
  const MambaDims d_;
};
// Test shapes: a small selective layer with a conv (every tensor present), then the variant without Δ, B and C
// from the input and without the conv (the tensors mamba.B and mamba.C instead, no conv1d), then expand 2.
inline void ref_mamba_small(ModelConfig& c) {
  MambaSettings& s = c.mixer_settings.get<MambaSettings>();
  s.ssm_state = 3;
  s.ssm_expand = 1;
  s.ssm_conv = 3;
}
inline const bool ref_mamba_registered = register_ref_mixer({
    "mamba",
    [](const ModelConfig& c) -> std::unique_ptr<RefMixer> { return std::make_unique<RefMamba>(c); },
    {
        {"", ref_mamba_small},
        {"time-invariant, no conv",
         [](ModelConfig& c) {
           ref_mamba_small(c);
           c.mixer_settings.get<MambaSettings>().ssm_selective = 0;
           c.mixer_settings.get<MambaSettings>().ssm_conv = 0;
         }},
        {"expand 2, state 2",
         [](ModelConfig& c) {
           ref_mamba_small(c);
           c.mixer_settings.get<MambaSettings>().ssm_expand = 2;
           c.mixer_settings.get<MambaSettings>().ssm_state = 2;
         }},
    },
});
