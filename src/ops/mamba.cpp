#include "ops/mamba.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "base/arena.h"
#include "base/fast_exp.h"
#include "base/rng.h"
#include "base/threads.h"
#include "ops/linear.h"

// ---- Initialisation ----------------------------------------------------------------------------------------------

void mamba_init_dt_bias(float* dt_bias, size_t n, Rng& rng) {
  const double lo = std::log(1e-3), hi = std::log(1e-1);
  for (size_t h = 0; h < n; h++) {
    const double dt = std::exp(lo + rng.uniform() * (hi - lo));  // log-uniform in [1e-3, 1e-1)
    dt_bias[h] = (float)(dt + std::log(-std::expm1(-dt)));     // softplus⁻¹(dt) = log(eᵈᵗ − 1)
  }
}

void mamba_init_A_log(float* A_log, size_t n, Rng& rng) {
  for (size_t h = 0; h < n; h++) A_log[h] = std::log(1.0f + 15.0f * rng.uniform());
}

void mamba_init_conv(float* p, size_t n, int K, Rng& rng) {
  const float bound = 1.0f / std::sqrt((float)K);
  for (size_t i = 0; i < n; i++) p[i] = bound * (2.0f * rng.uniform() - 1.0f);
}

void mamba_init_state_const(float* p, size_t N, Rng& rng) {
  const double std_dev = std::pow((double)N, -0.25);
  for (size_t n = 0; n < N; n++) p[n] = (float)(std_dev * rng.normal());
}

// ---- Memory ------------------------------------------------------------------------------------------------------

namespace {


MambaActivations layout_activations(float* base, const MambaDims& d, int B, int T, size_t* count) {
  const size_t BT = (size_t)B * T;
  ArenaCarver c{base};
  MambaActivations a;
  a.proj = c.take(BT * d.in_cols());
  a.xbc_pre = c.take(BT * d.conv_channels());
  a.xbc = c.take(BT * d.conv_channels());
  a.dt = c.take(BT * d.H);
  a.y = c.take(BT * d.E);
  a.g = c.take(BT * d.E);
  a.rstd = c.take(BT);
  a.n = c.take(BT * d.E);
  a.state = c.take((size_t)B * d.E * d.N);
  if (count) *count = c.used;
  return a;
}

// The backward's working memory.
struct Scratch {
  float *dn, *dy, *dproj, *dxbc, *ddt, *scan;
};
size_t scan_scratch(const MambaDims& d, int B, int T) {
  return 2 * (size_t)B * d.H * T * d.N + (size_t)B * d.H * ((size_t)d.P * d.N + d.N + 2);
}
Scratch layout_scratch(float* base, const MambaDims& d, int B, int T, size_t* count) {
  const size_t BT = (size_t)B * T;
  ArenaCarver c{base};
  Scratch s;
  s.dn = c.take(BT * d.E);
  s.dy = c.take(BT * d.E);
  s.dproj = c.take(BT * d.in_cols());
  s.dxbc = c.take(BT * d.conv_channels());
  s.ddt = c.take(BT * d.H);
  s.scan = c.take(scan_scratch(d, B, T));
  if (count) *count = c.used;
  return s;
}

inline float sigmoid(float v) { return 1.0f / (1.0f + fast_exp(-v)); }

}  // namespace

size_t mamba_activation_floats(const MambaDims& d, int B, int T) {
  return counted_floats(layout_activations, d, B, T);
}

MambaActivations mamba_activations(float* memory, const MambaDims& d, int B, int T) {
  return layout_activations(memory, d, B, T, nullptr);
}

size_t mamba_scratch_floats(const MambaDims& d, int B, int T) {
  return counted_floats(layout_scratch, d, B, T);
}

size_t mamba_scan_scratch_floats(const MambaDims& d, int B, int T) { return scan_scratch(d, B, T); }

// ---- Causal depthwise conv ---------------------------------------------------------------------------------------

void mamba_conv_forward(float* out, const float* inp, int in_stride, const float* w, const float* b, int B, int T,
                        int X, int K) {
#pragma omp parallel for collapse(2) if (worth_threads((size_t)B * T * X * std::max(K, 1)))
  for (int bb = 0; bb < B; bb++)
    for (int t = 0; t < T; t++) {
      float* y = out + ((size_t)bb * T + t) * X;
      if (K == 0) {  // no conv
        std::memcpy(y, inp + ((size_t)bb * T + t) * in_stride, sizeof(float) * X);
        continue;
      }
      for (int c = 0; c < X; c++) y[c] = b[c];
      for (int k = std::max(0, K - 1 - t); k < K; k++) {  // input position t − (K−1) + k ≥ 0
        const float* x = inp + ((size_t)bb * T + t - (K - 1) + k) * in_stride;
        for (int c = 0; c < X; c++) y[c] += w[(size_t)c * K + k] * x[c];
      }
    }
}

void mamba_conv_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, int in_stride,
                         const float* w, int B, int T, int X, int K) {
#pragma omp parallel if (worth_threads((size_t)B * T * X * std::max(K, 1)))
  {
    // dinp, split by rows: position s feeds outputs t = s + (K−1) − k < T.
#pragma omp for collapse(2)
    for (int bb = 0; bb < B; bb++)
      for (int s = 0; s < T; s++) {
        float* dx = dinp + ((size_t)bb * T + s) * in_stride;
        if (K == 0) {
          std::memcpy(dx, dout + ((size_t)bb * T + s) * X, sizeof(float) * X);
          continue;
        }
        for (int c = 0; c < X; c++) dx[c] = 0.0f;
        for (int k = std::max(0, s + K - T); k < K; k++) {  // t = s + (K−1) − k ≤ T − 1
          const float* dy = dout + ((size_t)bb * T + s + (K - 1) - k) * X;
          for (int c = 0; c < X; c++) dx[c] += w[(size_t)c * K + k] * dy[c];
        }
      }
    // dw, db, split by channels.
    if (K > 0) {
      const Share ch = my_share(X);
      for (int bb = 0; bb < B; bb++)
        for (int t = 0; t < T; t++) {
          const float* dy = dout + ((size_t)bb * T + t) * X;
          for (int c = ch.begin; c < ch.end; c++) db[c] += dy[c];
          for (int k = std::max(0, K - 1 - t); k < K; k++) {
            const float* x = inp + ((size_t)bb * T + t - (K - 1) + k) * in_stride;
            for (int c = ch.begin; c < ch.end; c++) dw[(size_t)c * K + k] += dy[c] * x[c];
          }
        }
    }
  }
}

// ---- silu ----------------------------------------------------------------------------------------------------------

void silu_forward(float* out, const float* inp, size_t n) {
#pragma omp parallel for simd if (worth_threads(n))
  for (size_t i = 0; i < n; i++) out[i] = inp[i] * sigmoid(inp[i]);
}

void silu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for simd if (worth_threads(n))
  for (size_t i = 0; i < n; i++) {
    const float s = sigmoid(inp[i]);
    dinp[i] = dout[i] * s * (1.0f + inp[i] * (1.0f - s));
  }
}

// ---- Δ = softplus(dt_raw + dt_bias) ---------------------------------------------------------------------------------

float softplus(float v) { return v > kSoftplusThreshold ? v : std::log1p(std::exp(v)); }

void mamba_dt_forward(float* dt, const float* dt_raw, int raw_stride, const float* dt_bias, int R, int H) {
  for (int r = 0; r < R; r++)
    for (int h = 0; h < H; h++)
      dt[(size_t)r * H + h] = softplus((dt_raw ? dt_raw[(size_t)r * raw_stride + h] : 0.0f) + dt_bias[h]);
}

void mamba_dt_backward(float* ddt_raw, float* ddt_bias, const float* ddt, const float* dt_raw, int raw_stride,
                       const float* dt_bias, int R, int H) {
  for (int r = 0; r < R; r++)
    for (int h = 0; h < H; h++) {
      const float v = (dt_raw ? dt_raw[(size_t)r * raw_stride + h] : 0.0f) + dt_bias[h];
      const float dv = (v > kSoftplusThreshold ? 1.0f : 1.0f / (1.0f + std::exp(-v))) * ddt[(size_t)r * H + h];
      if (ddt_raw) ddt_raw[(size_t)r * raw_stride + h] = dv;
      ddt_bias[h] += dv;
    }
}

// ---- The selective scan ------------------------------------------------------------------------------------------

namespace {

// One position of one head: S ← ā·S + Δ·x Bᵀ, then y = S C + D·x.   x, y (P), B, C (N).
// S is stored transposed, (N × P): row n is state column n for all P channels. The loops then run over p (P = E/H,
// whole vectors at the usual sizes) and y accumulates across rows without a horizontal sum per channel (the timing
// that chose this layout: docs/mamba.md, "The state's layout in memory").
// The forward and the decoder step through this, so the decoder's one-token step is the forward's float arithmetic;
// the backward's forward re-run writes the same recurrence inline, because it forms dC_t and r_t from each S_t as
// it goes.
inline void scan_step(float* S, float* y, const float* x, const float* Bv, const float* Cv, float delta, float decay,
                      float D, int P, int N) {
  for (int p = 0; p < P; p++) y[p] = D * x[p];
  for (int n = 0; n < N; n++) {
    float* row = S + (size_t)n * P;
    const float db = delta * Bv[n], c = Cv[n];
#pragma omp simd
    for (int p = 0; p < P; p++) {
      row[p] = decay * row[p] + db * x[p];
      y[p] += row[p] * c;
    }
  }
}

// Where head h of row (b, t) finds its x, B and C.
struct HeadRow {
  const float *x, *B, *C;
};
inline HeadRow head_row(const float* xbc, size_t row, int h, const MambaWeights& w, const MambaDims& d) {
  const float* r = xbc + row * d.conv_channels();
  if (d.selective) return {r + (size_t)h * d.P, r + d.E, r + d.E + d.N};
  return {r + (size_t)h * d.P, w.B_const, w.C_const};
}

}  // namespace

void mamba_scan_forward(float* y, float* state, const float* xbc, const float* dt, const MambaWeights& w,
                        const MambaDims& d, int B, int T) {
  const int H = d.H, P = d.P, N = d.N, E = d.E;
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * E * N))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      float* S = state + ((size_t)b * H + h) * P * N;
      std::fill(S, S + (size_t)P * N, 0.0f);
      const float a = -std::exp(w.A_log[h]);
      for (int t = 0; t < T; t++) {
        const size_t row = (size_t)b * T + t;
        const HeadRow hr = head_row(xbc, row, h, w, d);
        const float delta = dt[row * H + h];
        scan_step(S, y + row * E + (size_t)h * P, hr.x, hr.B, hr.C, delta, std::exp(delta * a), w.D[h], P, N);
      }
    }
}

void mamba_scan_backward(float* dxbc, float* ddt, const MambaGrads& g, const float* dy, const float* xbc,
                         const float* dt, const MambaWeights& w, const MambaDims& d, int B, int T, float* scratch) {
  const int H = d.H, P = d.P, N = d.N, E = d.E, X = d.conv_channels();
  // Per (batch, head): this head's share of dB_t and dC_t (the heads are summed afterwards), its state, and its
  // partial sums of ∂L/∂a and dD.
  float* dB_heads = scratch;                                 // (B, H, T, N)
  float* dC_heads = dB_heads + (size_t)B * H * T * N;        // (B, H, T, N)
  float* per_head = dC_heads + (size_t)B * H * T * N;        // (B, H) × (P·N + N + 2)
  const size_t per_head_floats = (size_t)P * N + N + 2;

#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * E * N))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      float* S = per_head + ((size_t)b * H + h) * per_head_floats;  // S_t, then dS_t, (N × P) as in scan_step
      float* v = S + (size_t)P * N;                                 // dS_tᵀ x_t (N)
      float* da_sum = v + N;                                        // ∂L/∂a
      float* dD_sum = da_sum + 1;                                   // dD_h
      const float a = -std::exp(w.A_log[h]), Dh = w.D[h];
      float* dB_h = dB_heads + ((size_t)b * H + h) * T * N;
      float* dC_h = dC_heads + ((size_t)b * H + h) * T * N;

      // Forward again, rebuilding S_t:  dC_t = S_tᵀ dy_t,  r_t = C_t·dC_t (kept in ddt until the reverse scan
      // reads it),  dD += dy_t·x_t.
      std::fill(S, S + (size_t)P * N, 0.0f);
      float dD = 0.0f;
      for (int t = 0; t < T; t++) {
        const size_t row = (size_t)b * T + t;
        const HeadRow hr = head_row(xbc, row, h, w, d);
        const float* dyt = dy + row * E + (size_t)h * P;
        const float delta = dt[row * H + h], decay = std::exp(delta * a);
        float* dC = dC_h + (size_t)t * N;
        float xdy = 0.0f;
#pragma omp simd reduction(+ : xdy)
        for (int p = 0; p < P; p++) xdy += dyt[p] * hr.x[p];
        dD += xdy;
        float r = 0.0f;
        for (int n = 0; n < N; n++) {
          float* srow = S + (size_t)n * P;
          const float db = delta * hr.B[n];
          float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
          for (int p = 0; p < P; p++) {
            srow[p] = decay * srow[p] + db * hr.x[p];
            acc += srow[p] * dyt[p];
          }
          dC[n] = acc;
          r += hr.C[n] * acc;
        }
        ddt[row * H + h] = r;
      }

      // In reverse: dS_t = ā_{t+1}·dS_{t+1} + dy_t C_tᵀ, then dx_t, dB_t, w_t, and dℓ_t = Σ_{i≥t}(r_i − Δ_i·w_i).
      std::fill(S, S + (size_t)P * N, 0.0f);
      float next_decay = 0.0f, dl = 0.0f, da = 0.0f;
      for (int t = T - 1; t >= 0; t--) {
        const size_t row = (size_t)b * T + t;
        const HeadRow hr = head_row(xbc, row, h, w, d);
        const float* dyt = dy + row * E + (size_t)h * P;
        float* dx = dxbc + row * X + (size_t)h * P;
        const float delta = dt[row * H + h];
        for (int p = 0; p < P; p++) dx[p] = 0.0f;  // dS_t B_t first, then scaled by Δ_t below
        for (int n = 0; n < N; n++) {
          float* srow = S + (size_t)n * P;
          const float c = hr.C[n], bn = hr.B[n];
          float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
          for (int p = 0; p < P; p++) {
            srow[p] = next_decay * srow[p] + dyt[p] * c;
            dx[p] += srow[p] * bn;
            acc += srow[p] * hr.x[p];
          }
          v[n] = acc;
        }
        for (int p = 0; p < P; p++) dx[p] = delta * dx[p] + Dh * dyt[p];
        float wt = 0.0f;
        float* dB = dB_h + (size_t)t * N;
        for (int n = 0; n < N; n++) wt += hr.B[n] * v[n], dB[n] = delta * v[n];
        dl += ddt[row * H + h] - delta * wt;  // + r_t − Δ_t·w_t
        ddt[row * H + h] = wt + a * dl;       // ∂L/∂Δ_t: the write term and the decay term
        da += delta * dl;
        next_decay = std::exp(delta * a);
      }
      *da_sum = da, *dD_sum = dD;
    }

  // Sum the heads' shares.
  if (d.selective) {
#pragma omp parallel for collapse(2) if (worth_threads((size_t)B * T * H * N))
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        float* r = dxbc + ((size_t)b * T + t) * X;
        for (int n = 0; n < N; n++) r[E + n] = 0.0f, r[E + N + n] = 0.0f;
        for (int h = 0; h < H; h++) {
          const size_t at = (((size_t)b * H + h) * T + t) * N;
          for (int n = 0; n < N; n++) r[E + n] += dB_heads[at + n], r[E + N + n] += dC_heads[at + n];
        }
      }
  } else {
    for (size_t i = 0; i < (size_t)B * H * T; i++)
      for (int n = 0; n < N; n++) g.B_const[n] += dB_heads[i * N + n], g.C_const[n] += dC_heads[i * N + n];
  }
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const float* sums = per_head + ((size_t)b * H + h) * per_head_floats + (size_t)P * N + N;
      g.A_log[h] += -std::exp(w.A_log[h]) * sums[0];  // dA_log = a·∂L/∂a
      g.D[h] += sums[1];
    }
}

// ---- The gated RMS norm --------------------------------------------------------------------------------------------

void gated_rmsnorm_forward(float* n, float* g, float* rstd, const float* y, const float* z, int z_stride,
                           const float* w, int R, int E) {
#pragma omp parallel for if (worth_threads((size_t)R * E * 8))
  for (int r = 0; r < R; r++) {
    const float* yr = y + (size_t)r * E;
    const float* zr = z + (size_t)r * z_stride;
    float* gr = g + (size_t)r * E;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int e = 0; e < E; e++) {
      gr[e] = yr[e] * zr[e] * sigmoid(zr[e]);
      ss += gr[e] * gr[e];
    }
    const float rs = 1.0f / std::sqrt(ss / E + kMambaNormEps);
    rstd[r] = rs;
    for (int e = 0; e < E; e++) n[(size_t)r * E + e] = gr[e] * rs * w[e];
  }
}

void gated_rmsnorm_backward(float* dy, float* dz, float* dw, const float* dn, const float* y, const float* z,
                            int z_stride, const float* g, const float* rstd, const float* w, int R, int E) {
#pragma omp parallel if (worth_threads((size_t)R * E * 8))
  {
#pragma omp for
    for (int r = 0; r < R; r++) {
      const float *dnr = dn + (size_t)r * E, *yr = y + (size_t)r * E, *gr = g + (size_t)r * E;
      const float* zr = z + (size_t)r * z_stride;
      const float rs = rstd[r];
      float dot = 0.0f;  // dĝ·ĝ
#pragma omp simd reduction(+ : dot)
      for (int e = 0; e < E; e++) dot += dnr[e] * w[e] * gr[e] * rs;
      const float mean_dot = dot / E;
#pragma omp simd
      for (int e = 0; e < E; e++) {
        const float dg = rs * (dnr[e] * w[e] - gr[e] * rs * mean_dot);
        const float s = sigmoid(zr[e]);
        dy[(size_t)r * E + e] = dg * zr[e] * s;                                        // ⊙ silu(z)
        dz[(size_t)r * z_stride + e] = dg * yr[e] * s * (1.0f + zr[e] * (1.0f - s));  // ⊙ y ⊙ silu'(z)
      }
    }
    const Share ch = my_share(E);  // dw += Σ_rows dn ⊙ ĝ, each thread its own channels
    for (int r = 0; r < R; r++)
      for (int e = ch.begin; e < ch.end; e++) dw[e] += dn[(size_t)r * E + e] * g[(size_t)r * E + e] * rstd[r];
  }
}

// ---- The layer -------------------------------------------------------------------------------------------------------

void mamba_forward(float* out, const MambaActivations& a, const float* u, const MambaWeights& w, const MambaDims& d,
                   int B, int T) {
  const int BT = B * T, IN = d.in_cols(), X = d.conv_channels();
  linear_forward(a.proj, u, w.in_proj_w, nullptr, BT, d.C, IN);
  mamba_conv_forward(a.xbc_pre, a.proj + d.xbc_offset(), IN, w.conv_w, w.conv_b, B, T, X, d.K);
  silu_forward(a.xbc, a.xbc_pre, (size_t)BT * X);
  mamba_dt_forward(a.dt, d.selective ? a.proj + d.dt_offset() : nullptr, IN, w.dt_bias, BT, d.H);
  mamba_scan_forward(a.y, a.state, a.xbc, a.dt, w, d, B, T);
  gated_rmsnorm_forward(a.n, a.g, a.rstd, a.y, a.proj, IN, w.norm_w, BT, d.E);  // z: in_proj's first E columns
  linear_forward(out, a.n, w.out_proj_w, nullptr, BT, d.E, d.C);
}

void mamba_backward(float* du, const MambaGrads& g, const float* dout, const float* u, const MambaActivations& a,
                    const MambaWeights& w, const MambaDims& d, int B, int T, float* scratch) {
  const int BT = B * T, IN = d.in_cols(), X = d.conv_channels();
  const Scratch s = layout_scratch(scratch, d, B, T, nullptr);
  linear_backward(s.dn, g.out_proj_w, nullptr, dout, a.n, w.out_proj_w, BT, d.E, d.C);
  gated_rmsnorm_backward(s.dy, s.dproj, g.norm_w, s.dn, a.y, a.proj, IN, a.g, a.rstd, w.norm_w, BT, d.E);  // dz
  mamba_scan_backward(s.dxbc, s.ddt, g, s.dy, a.xbc, a.dt, w, d, B, T, s.scan);
  mamba_dt_backward(d.selective ? s.dproj + d.dt_offset() : nullptr, g.dt_bias, s.ddt,
                    d.selective ? a.proj + d.dt_offset() : nullptr, IN, w.dt_bias, BT, d.H);
  silu_backward(s.dxbc, a.xbc_pre, s.dxbc, (size_t)BT * X);
  mamba_conv_backward(s.dproj + d.xbc_offset(), g.conv_w, g.conv_b, s.dxbc, a.proj + d.xbc_offset(), IN, w.conv_w, B,
                      T, X, d.K);
  linear_backward(du, g.in_proj_w, nullptr, s.dproj, u, w.in_proj_w, BT, d.C, IN);
}

// ---- Decoding ----------------------------------------------------------------------------------------------------------

size_t mamba_state_floats(const MambaDims& d) {
  return (size_t)d.H * d.P * d.N + (size_t)std::max(d.K - 1, 0) * d.conv_channels();
}

MambaState mamba_state(float* memory, const MambaDims& d) {
  return {memory, memory + (size_t)std::max(d.K - 1, 0) * d.conv_channels()};
}

void mamba_state_reset(const MambaState& s, const MambaDims& d) {
  std::fill(s.conv, s.conv + mamba_state_floats(d), 0.0f);  // conv rows, then S: one block
}

size_t mamba_step_scratch_floats(const MambaDims& d) {
  return d.in_cols() + 2 * (size_t)d.conv_channels() + d.H + 3 * (size_t)d.E + 1;
}

void mamba_step(float* out, const MambaState& s, const float* u, const MambaWeights& w, const MambaDims& d,
                float* scratch) {
  const int IN = d.in_cols(), X = d.conv_channels(), K = d.K;
  float* proj = scratch;
  float* pre = proj + IN;
  float* xbc = pre + X;
  float* dt = xbc + X;
  float* y = dt + d.H;
  float* g = y + d.E;
  float* n = g + d.E;
  float* rstd = n + d.E;
  matvec(proj, u, w.in_proj_w, nullptr, d.C, IN);
  const float* raw = proj + d.xbc_offset();
  if (K == 0) {
    std::memcpy(pre, raw, sizeof(float) * X);
  } else {  // the conv over the K − 1 kept inputs and this one, in the forward's order of the terms
    for (int c = 0; c < X; c++) pre[c] = w.conv_b[c];
    for (int k = 0; k < K - 1; k++)
      for (int c = 0; c < X; c++) pre[c] += w.conv_w[(size_t)c * K + k] * s.conv[(size_t)k * X + c];
    for (int c = 0; c < X; c++) pre[c] += w.conv_w[(size_t)c * K + K - 1] * raw[c];
    if (K > 1) {  // the oldest input leaves, this one arrives
      std::memmove(s.conv, s.conv + X, sizeof(float) * (size_t)(K - 2) * X);
      std::memcpy(s.conv + (size_t)(K - 2) * X, raw, sizeof(float) * X);
    }
  }
  silu_forward(xbc, pre, X);
  mamba_dt_forward(dt, d.selective ? proj + d.dt_offset() : nullptr, 0, w.dt_bias, 1, d.H);
  for (int h = 0; h < d.H; h++) {
    const HeadRow hr = head_row(xbc, 0, h, w, d);
    const float a = -std::exp(w.A_log[h]);
    scan_step(s.S + (size_t)h * d.P * d.N, y + (size_t)h * d.P, hr.x, hr.B, hr.C, dt[h], std::exp(dt[h] * a), w.D[h],
              d.P, d.N);
  }
  gated_rmsnorm_forward(n, g, rstd, y, proj, IN, w.norm_w, 1, d.E);
  matvec(out, n, w.out_proj_w, nullptr, d.E, d.C);
}

// ---- Hidden attention --------------------------------------------------------------------------------------------------

void mamba_hidden_attention(float* M, const MambaActivations& a, const MambaWeights& w, const MambaDims& d, int B,
                            int T) {
  const int H = d.H, N = d.N;
  std::vector<double> cum(T + 1);  // cum[t] = Σ_{k<t} Δ_k: Σ_{k=j+1}^{i} Δ_k = cum[i+1] − cum[j+1]
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const double ah = -std::exp((double)w.A_log[h]);
      cum[0] = 0;
      for (int t = 0; t < T; t++) cum[t + 1] = cum[t] + a.dt[((size_t)b * T + t) * H + h];
      float* Mh = M + ((size_t)b * H + h) * T * T;
      for (int i = 0; i < T; i++) {
        const HeadRow ri = head_row(a.xbc, (size_t)b * T + i, h, w, d);
        for (int j = 0; j < T; j++) {
          if (j > i) {
            Mh[(size_t)i * T + j] = 0.0f;
            continue;
          }
          const HeadRow rj = head_row(a.xbc, (size_t)b * T + j, h, w, d);
          double cb = 0;
          for (int n = 0; n < N; n++) cb += (double)ri.C[n] * rj.B[n];
          Mh[(size_t)i * T + j] = (float)(cb * std::exp(ah * (cum[i + 1] - cum[j + 1])) * a.dt[((size_t)b * T + j) * H + h]);
        }
      }
    }
}
