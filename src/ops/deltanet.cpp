#include "ops/deltanet.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "base/arena.h"
#include "base/rng.h"
#include "base/threads.h"
#include "ops/linear.h"

// ---- Initialisation ----------------------------------------------------------------------------------------------

void deltanet_init_conv(float* p, size_t n, int K, Rng& rng) {
  const double bound = 1.0 / std::sqrt((double)K);
  for (size_t i = 0; i < n; i++) p[i] = (float)(bound * (2.0 * rng.uniform() - 1.0));
}

void deltanet_init_A_log(float* p, size_t n, Rng& rng) {
  // A ~ U(0, 16] as 16·(1 − u), u ∈ [0, 1): never 0, so A_log is finite.
  for (size_t h = 0; h < n; h++) p[h] = (float)std::log(16.0 * (1.0 - (double)rng.uniform()));
}

void deltanet_init_dt_bias(float* p, size_t n, Rng& rng) {
  const double lo = std::log(1e-3);
  const double hi = std::log(1e-1);
  for (size_t h = 0; h < n; h++) {
    const double dt = std::exp(lo + rng.uniform() * (hi - lo));  // log-uniform in [1e-3, 1e-1)
    p[h] = (float)(dt + std::log(-std::expm1(-dt)));            // softplus⁻¹(dt) = log(eᵈᵗ − 1)
  }
}

// ---- Memory ------------------------------------------------------------------------------------------------------

namespace {

size_t states_floats(const DeltaNetDims& d, int B, int T) {
  return (size_t)B * d.H * ((size_t)d.chunks(T) + 1) * d.N * d.N;
}

DeltaNetActivations layout_activations(float* base, const DeltaNetDims& d, int B, int T, size_t* count) {
  const size_t R = (size_t)B * T, C = d.C, H = d.H;
  ArenaCarver c{base};
  DeltaNetActivations a;
  for (float** p : {&a.qh, &a.kh, &a.vh, &a.qc, &a.kc, &a.vc, &a.q, &a.k, &a.v}) *p = c.take(R * C);
  for (float** p : {&a.qn, &a.kn, &a.beta, &a.az, &a.alpha}) *p = c.take(R * H);
  a.y = c.take(R * C);
  a.rstd = c.take(R * H);
  a.gl = c.take(R * C);
  a.oin = c.take(R * C);
  a.state = c.take(states_floats(d, B, T));
  a.T = T;
  if (count) *count = c.used;
  return a;
}

// The backward's working memory.
struct Scratch {
  float *doin, *dgl, *dy, *dq, *dk, *dv, *dhat, *dx, *dbeta, *dalpha, *rec;
};
constexpr int kSlots = kDeltaNetChunk + 2;  // per (batch, head): the chunk's kDeltaNetChunk + 1 states and G
Scratch layout_scratch(float* base, const DeltaNetDims& d, int B, int T, size_t* count) {
  const size_t R = (size_t)B * T, C = d.C, H = d.H;
  ArenaCarver c{base};
  Scratch s;
  for (float** p : {&s.doin, &s.dgl, &s.dy, &s.dq, &s.dk, &s.dv, &s.dhat, &s.dx}) *p = c.take(R * C);
  s.dbeta = c.take(R * H);
  s.dalpha = c.take(R * H);
  s.rec = c.take((size_t)B * d.H * kSlots * d.N * d.N);
  if (count) *count = c.used;
  return s;
}

}  // namespace

size_t deltanet_activation_floats(const DeltaNetDims& d, int B, int T) {
  return counted_floats(layout_activations, d, B, T);
}
DeltaNetActivations deltanet_activations(float* memory, const DeltaNetDims& d, int B, int T) {
  return layout_activations(memory, d, B, T, nullptr);
}
size_t deltanet_scratch_floats(const DeltaNetDims& d, int B, int T) {
  return counted_floats(layout_scratch, d, B, T);
}

// ---- The pieces of one row, shared by the batched forward and the one-token step (one float arithmetic) -----------

namespace {

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }
inline float silu(float v) { return v * sigmoid(v); }
inline float silu_grad(float v) {  // silu′(v) = σ(v)·(1 + v·(1 − σ(v)))
  const float s = sigmoid(v);
  return s * (1.0f + v * (1.0f - s));
}
constexpr float kSoftplusLinear = 20.0f;  // softplus(v) = v above it (log(1 + eᵛ) − v < 2.1e-9 there)
inline float softplus(float v) { return v > kSoftplusLinear ? v : std::log1p(std::exp(v)); }

// One output row of the causal depthwise convolution: out[c] = Σ_{j=0}^{K−1} w[c, j]·rows[j][c], rows[j] the input
// at position t − K + 1 + j, or null before the sequence (a zero row, skipped). The forward and the step both
// accumulate j = 0 … K−1 in this order from 0.
inline void conv_row(float* out, const float* const* rows, const float* w, int C, int K) {
  for (int c = 0; c < C; c++) {
    float acc = 0.0f;
    for (int j = 0; j < K; j++)
      if (rows[j]) acc += w[(size_t)c * K + j] * rows[j][c];
    out[c] = acc;
  }
}

// Step 3 for one row of one of q, k: x = silu(x̃) / max(‖·‖_head, 1e-6) · scale, the norms kept in `norm` (H).
inline void silu_l2_row(float* x, float* norm, const float* xc, float scale, int H, int N) {
  for (int h = 0; h < H; h++) {
    const int o = h * N;
    float ss = 0.0f;
    for (int j = 0; j < N; j++) {
      x[o + j] = silu(xc[o + j]);
      ss += x[o + j] * x[o + j];
    }
    const float nrm = std::max(std::sqrt(ss), kDeltaNetL2Eps);
    norm[h] = nrm;
    const float f = scale / nrm;
    for (int j = 0; j < N; j++) x[o + j] *= f;
  }
}

// Step 4 for one row: β = s·σ(bl) (bl holds u·W_β, overwritten by β); z = u·W_α + dt_bias (az holds u·W_α on
// entry) and α = exp(−e^{A_log}·softplus(z)).
inline void gates_row(float* beta, float* az, float* alpha, const float* A_log, const float* dt_bias, float s, int H) {
  for (int h = 0; h < H; h++) {
    beta[h] = s * sigmoid(beta[h]);
    az[h] += dt_bias[h];
    alpha[h] = std::exp(-std::exp(A_log[h]) * softplus(az[h]));
  }
}

// One position of one head: S ← α S + w kᵀ with w = β(v − α S k), row by row (row i = value channel i), then
// y_i = S[i, :]·q (when y is not null). The forward, the backward's recomputation and the decoder all step through
// this.
inline void recurrence_step(float* S, float* y, const float* q, const float* k, const float* v, float beta,
                            float alpha, int N) {
  for (int i = 0; i < N; i++) {
    float* s = S + (size_t)i * N;
    float p = 0.0f;  // P_i = (S_{t−1} k)_i, the recall
#pragma omp simd reduction(+ : p)
    for (int j = 0; j < N; j++) p += s[j] * k[j];
    const float w = beta * (v[i] - alpha * p);
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int j = 0; j < N; j++) {
      s[j] = alpha * s[j] + w * k[j];
      acc += s[j] * q[j];
    }
    if (y) y[i] = acc;
  }
}

// Steps 6–7 up to W_o's input, one row: the RMS norm's 1/√(mean(y²) + ε) per head and oin = ŷ ⊙ norm_w ⊙ silu(gl).
inline void norm_gate_row(float* oin, float* rstd, const float* y, const float* gl, const float* norm_w, int H, int N) {
  for (int h = 0; h < H; h++) {
    const int o = h * N;
    float ss = 0.0f;
    for (int j = 0; j < N; j++) ss += y[o + j] * y[o + j];
    const float r = 1.0f / std::sqrt(ss / N + kDeltaNetNormEps);
    rstd[h] = r;
    for (int j = 0; j < N; j++) oin[o + j] = y[o + j] * r * norm_w[j] * silu(gl[o + j]);
  }
}

}  // namespace

// ---- The recurrence ----------------------------------------------------------------------------------------------

void deltanet_recurrence_forward(float* y, float* state, const float* q, const float* k, const float* v,
                                 const float* beta, const float* alpha, const DeltaNetDims& d, int B, int T) {
  const int H = d.H, N = d.N, C = d.C, chunks = d.chunks(T);
  const size_t NN = (size_t)N * N;
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * C * N))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      float* kept = state + ((size_t)b * H + h) * (chunks + 1) * NN;
      float* S = kept + (size_t)chunks * NN;  // the working state, S_{T−1} at the end
      std::fill(S, S + NN, 0.0f);
      for (int t = 0; t < T; t++) {
        if (t % kDeltaNetChunk == 0) std::copy(S, S + NN, kept + (size_t)(t / kDeltaNetChunk) * NN);
        const size_t row = (size_t)b * T + t;
        const size_t o = row * C + (size_t)h * N;
        recurrence_step(S, y + o, q + o, k + o, v + o, beta[row * H + h], alpha[row * H + h], N);
      }
    }
}

void deltanet_recurrence_backward(float* dq, float* dk, float* dv, float* dbeta, float* dalpha, const float* dy,
                                  const float* state, const float* q, const float* k, const float* v,
                                  const float* beta, const float* alpha, const DeltaNetDims& d, int B, int T,
                                  float* scratch) {
  const int H = d.H, N = d.N, C = d.C, chunks = d.chunks(T);
  const size_t NN = (size_t)N * N;
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * C * N))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const float* kept = state + ((size_t)b * H + h) * (chunks + 1) * NN;
      // This (batch, head)'s own scratch: slot[m] = S_{t0+m−1}, m = 0 … kDeltaNetChunk, then G.
      float* slot = scratch + ((size_t)b * H + h) * kSlots * NN;
      float* G = slot + (size_t)(kDeltaNetChunk + 1) * NN;  // G_t, less dy_t q_tᵀ until it is added
      std::fill(G, G + NN, 0.0f);
      for (int c = chunks - 1; c >= 0; c--) {
        const int t0 = c * kDeltaNetChunk;
        const int t1 = std::min(T, t0 + kDeltaNetChunk);
        // Recompute the chunk's states from its kept start; dq_t = S_tᵀ dy_t on the way.
        std::copy(kept + (size_t)c * NN, kept + (size_t)(c + 1) * NN, slot);
        for (int t = t0; t < t1; t++) {
          const size_t row = (size_t)b * T + t;
          const size_t o = row * C + (size_t)h * N;
          float* S = slot + (size_t)(t - t0 + 1) * NN;
          std::copy(S - NN, S, S);
          recurrence_step(S, nullptr, q + o, k + o, v + o, beta[row * H + h], alpha[row * H + h], N);
          float* dqt = dq + o;
          for (int j = 0; j < N; j++) dqt[j] = 0.0f;
          for (int i = 0; i < N; i++) {
            const float dyi = dy[o + i];
            const float* si = S + (size_t)i * N;
#pragma omp simd
            for (int j = 0; j < N; j++) dqt[j] += si[j] * dyi;
          }
        }
        // The reverse pass through the chunk.
        for (int t = t1 - 1; t >= t0; t--) {
          const size_t row = (size_t)b * T + t;
          const size_t o = row * C + (size_t)h * N;
          const float* Sp = slot + (size_t)(t - t0) * NN;  // S_{t−1}
          const float* qt = q + o;
          const float* kt = k + o;
          const float* vt = v + o;
          const float* dyt = dy + o;
          const float bt = beta[row * H + h];
          const float at = alpha[row * H + h];
          float* dkt = dk + o;
          float* dvt = dv + o;
          for (int j = 0; j < N; j++) dkt[j] = 0.0f;
          float db = 0.0f;
          float da = 0.0f;
          for (int i = 0; i < N; i++) {
            float* gi = G + (size_t)i * N;
            const float* sp = Sp + (size_t)i * N;
            const float dyi = dyt[i];
#pragma omp simd
            for (int j = 0; j < N; j++) gi[j] += dyi * qt[j];  // G_t = dy_t q_tᵀ + (what flowed back from t + 1)
            float gk = 0.0f;  // (G_t k_t)_i
            float p = 0.0f;   // (S_{t−1} k_t)_i = P_i
            float gs = 0.0f;  // Σ_j G[i, j]·S_{t−1}[i, j]
#pragma omp simd reduction(+ : gk, p, gs)
            for (int j = 0; j < N; j++) {
              gk += gi[j] * kt[j];
              p += sp[j] * kt[j];
              gs += gi[j] * sp[j];
            }
            const float resid = vt[i] - at * p;  // v_i − α P_i
            const float wi = bt * resid;         // w_i
            dvt[i] = bt * gk;
            db += gk * resid;
            da += gs - bt * gk * p;
            const float c2 = at * bt * gk;
#pragma omp simd
            for (int j = 0; j < N; j++) {
              dkt[j] += gi[j] * wi - c2 * sp[j];         // G_tᵀ w − αβ S_{t−1}ᵀ g
              gi[j] = at * (gi[j] - bt * gk * kt[j]);    // α G_t (I − β k kᵀ): G_{t−1}'s part from S_t
            }
          }
          dbeta[row * H + h] = db;
          dalpha[row * H + h] = da;
        }
      }
    }
}

// ---- The layer -------------------------------------------------------------------------------------------------------

void deltanet_forward(float* out, const DeltaNetActivations& a, const float* u, const DeltaNetWeights& w,
                      const DeltaNetDims& d, int B, int T) {
  const int R = B * T, C = d.C, H = d.H, N = d.N, K = d.K;
  linear_forward(a.qh, u, w.Wq, nullptr, R, C, C);
  linear_forward(a.kh, u, w.Wk, nullptr, R, C, C);
  linear_forward(a.vh, u, w.Wv, nullptr, R, C, C);
  linear_forward(a.gl, u, w.Wg, nullptr, R, C, C);
  linear_forward(a.beta, u, w.Wbeta, nullptr, R, C, H);  // u·W_β, made β below
  linear_forward(a.az, u, w.Walpha, nullptr, R, C, H);   // u·W_α, made z below
  const float qscale = 1.0f / std::sqrt((float)N);
  parallel_for(R, (size_t)R * C * (3 * K + 12), [&](size_t row) {
    const int t = (int)(row % T);
    const float* rows[3][64];  // the convolutions' K input rows, null before the sequence (K ≤ 64)
    for (int j = 0; j < K; j++) {
      const int s = t - K + 1 + j;
      const size_t r = row - (size_t)(K - 1 - j);
      rows[0][j] = s >= 0 ? a.qh + r * C : nullptr;
      rows[1][j] = s >= 0 ? a.kh + r * C : nullptr;
      rows[2][j] = s >= 0 ? a.vh + r * C : nullptr;
    }
    const size_t o = row * C;
    conv_row(a.qc + o, rows[0], w.conv_q, C, K);
    conv_row(a.kc + o, rows[1], w.conv_k, C, K);
    conv_row(a.vc + o, rows[2], w.conv_v, C, K);
    silu_l2_row(a.q + o, a.qn + row * H, a.qc + o, qscale, H, N);
    silu_l2_row(a.k + o, a.kn + row * H, a.kc + o, 1.0f, H, N);
    for (int c = 0; c < C; c++) a.v[o + c] = silu(a.vc[o + c]);
    gates_row(a.beta + row * H, a.az + row * H, a.alpha + row * H, w.A_log, w.dt_bias, d.beta_scale(), H);
  });
  deltanet_recurrence_forward(a.y, a.state, a.q, a.k, a.v, a.beta, a.alpha, d, B, T);
  parallel_for(R, (size_t)R * C * 4, [&](size_t row) {
    norm_gate_row(a.oin + row * C, a.rstd + row * H, a.y + row * C, a.gl + row * C, w.norm_w, H, N);
  });
  linear_forward(out, a.oin, w.Wo, nullptr, R, C, C);
}

namespace {

// Step 3's backward for one of q, k, in place over (R, C): dx holds ∂L/∂x on entry (x the normalised, scaled
// output), ∂L/∂x̃ (x̃ the convolution's output) on exit. With x̂ = silu(x̃)/n the unit vector, n the clamped norm:
//   ∂L/∂silu(x̃) = (dx̂ − x̂(x̂·dx̂))/n  (dx̂/n where n is the clamp),  dx̂ = scale·dx;  then × silu′(x̃).
// x̂ is recomputed from x̃ rather than read back as x/scale: with one channel per head (N = 1) it is then exactly ±1
// (√(s²) rounds to |s|), so the gradient through the norm is exactly 0, as it is in exact arithmetic, instead of
// float noise divided by a possibly small n.
void silu_l2_backward(float* dx, const float* norm, const float* xc, float scale, int R, int H, int N) {
  parallel_for(R, (size_t)R * H * N * 8, [&](size_t row) {
    for (int h = 0; h < H; h++) {
      const size_t o = row * H * N + (size_t)h * N;
      const float nrm = norm[row * H + h];
      const bool clamped = nrm <= kDeltaNetL2Eps;
      float dot = 0.0f;  // x̂·dx̂
      for (int j = 0; j < N; j++) dot += (silu(xc[o + j]) / nrm) * (dx[o + j] * scale);
      for (int j = 0; j < N; j++) {
        const float xhat = silu(xc[o + j]) / nrm;
        const float dxhat = dx[o + j] * scale;
        const float ds = (dxhat - (clamped ? 0.0f : xhat * dot)) / nrm;
        dx[o + j] = ds * silu_grad(xc[o + j]);
      }
    }
  });
}

// The convolution's backward for one of q, k, v: dhat (R, C) written from dconv_out (R, C); dw (C, K) +=.
void conv_backward(float* dhat, float* dw, const float* dconv_out, const float* hat, const float* w, int B, int T,
                   int C, int K) {
  const int R = B * T;
  // dq̂_s[c] = Σ_j w[c, j]·dq̃_{s+K−1−j}[c], terms past the sequence 0.
  parallel_for(R, (size_t)R * C * K, [&](size_t row) {
    const int s = (int)(row % T);
    float* out = dhat + row * C;
    for (int c = 0; c < C; c++) out[c] = 0.0f;
    for (int j = 0; j < K; j++) {
      const int t = s + K - 1 - j;
      if (t >= T) continue;
      const float* dr = dconv_out + (row + (size_t)(K - 1 - j)) * C;
      for (int c = 0; c < C; c++) out[c] += w[(size_t)c * K + j] * dr[c];
    }
  });
  // dw[c, j] += Σ_t dq̃_t[c]·q̂_{t−K+1+j}[c]: one thread, every row adds into the same C·K sums.
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      const size_t row = (size_t)b * T + t;
      const float* dr = dconv_out + row * C;
      for (int j = 0; j < K; j++) {
        const int s = t - K + 1 + j;
        if (s < 0) continue;
        const float* in = hat + (row - (size_t)(K - 1 - j)) * C;
        for (int c = 0; c < C; c++) dw[(size_t)c * K + j] += dr[c] * in[c];
      }
    }
}

}  // namespace

void deltanet_backward(float* du, const DeltaNetGrads& g, const float* dout, const float* u,
                       const DeltaNetActivations& a, const DeltaNetWeights& w, const DeltaNetDims& d, int B, int T,
                       float* scratch) {
  const int R = B * T, C = d.C, H = d.H, N = d.N, K = d.K;
  const Scratch s = layout_scratch(scratch, d, B, T, nullptr);
  const size_t RC = (size_t)R * C;

  linear_backward(s.doin, g.Wo, nullptr, dout, a.oin, w.Wo, R, C, C);
  // The gate and the RMS norm: oin = ŷ ⊙ norm_w ⊙ silu(gl), ŷ = y·r.
  //   dgl = doin ⊙ ŷ ⊙ norm_w ⊙ silu′(gl);   dn = doin ⊙ silu(gl);   dnorm_w += Σ dn ⊙ ŷ;
  //   dŷ = dn ⊙ norm_w;   dy = r·(dŷ − ŷ·(ŷ·dŷ)/N).
  // One thread: every row adds into norm_w's N sums.
  for (int row = 0; row < R; row++)
    for (int h = 0; h < H; h++) {
      const size_t o = (size_t)row * C + (size_t)h * N;
      const float r = a.rstd[(size_t)row * H + h];
      float m = 0.0f;  // Σ_j ŷ_j dŷ_j
      for (int j = 0; j < N; j++) {
        const float yh = a.y[o + j] * r;
        const float gate = silu(a.gl[o + j]);
        const float dn = s.doin[o + j] * gate;
        s.dgl[o + j] = s.doin[o + j] * yh * w.norm_w[j] * silu_grad(a.gl[o + j]);
        g.norm_w[j] += dn * yh;
        m += yh * dn * w.norm_w[j];
      }
      m /= N;
      for (int j = 0; j < N; j++) {
        const float yh = a.y[o + j] * r;
        const float dyh = s.doin[o + j] * silu(a.gl[o + j]) * w.norm_w[j];
        s.dy[o + j] = r * (dyh - yh * m);
      }
    }
  deltanet_recurrence_backward(s.dq, s.dk, s.dv, s.dbeta, s.dalpha, s.dy, a.state, a.q, a.k, a.v, a.beta, a.alpha, d,
                               B, T, s.rec);
  // The gates, in place: β = s·σ(b): db = dβ·β·(1 − β/s).
  // α = exp(−e^{A_log}·softplus(z)): dz = −dα·α·e^{A_log}·σ(z), dA_log += −dα·α·e^{A_log}·softplus(z), ddt_bias += dz.
  const float bs = d.beta_scale();
  for (int row = 0; row < R; row++)
    for (int h = 0; h < H; h++) {
      const size_t i = (size_t)row * H + h;
      const float be = a.beta[i];
      s.dbeta[i] *= be * (1.0f - be / bs);
      const float z = a.az[i];
      const float A = std::exp(w.A_log[h]);
      const float common = -s.dalpha[i] * a.alpha[i] * A;
      g.A_log[h] += common * softplus(z);
      s.dalpha[i] = common * (z > kSoftplusLinear ? 1.0f : sigmoid(z));
      g.dt_bias[h] += s.dalpha[i];
    }
  // v = silu(ṽ): dṽ = dv ⊙ silu′(ṽ), in place; q and k through their normalisation and silu, in place.
  for (size_t i = 0; i < RC; i++) s.dv[i] *= silu_grad(a.vc[i]);
  silu_l2_backward(s.dq, a.qn, a.qc, 1.0f / std::sqrt((float)N), R, H, N);
  silu_l2_backward(s.dk, a.kn, a.kc, 1.0f, R, H, N);
  // The six products of u: du = Σ their input gradients, the first written, the others added.
  linear_backward(du, g.Wg, nullptr, s.dgl, u, w.Wg, R, C, C);
  auto add_dx = [&](size_t n) {
    for (size_t i = 0; i < n; i++) du[i] += s.dx[i];
  };
  linear_backward(s.dx, g.Wbeta, nullptr, s.dbeta, u, w.Wbeta, R, C, H);
  add_dx(RC);
  linear_backward(s.dx, g.Walpha, nullptr, s.dalpha, u, w.Walpha, R, C, H);
  add_dx(RC);
  conv_backward(s.dhat, g.conv_q, s.dq, a.qh, w.conv_q, B, T, C, K);
  linear_backward(s.dx, g.Wq, nullptr, s.dhat, u, w.Wq, R, C, C);
  add_dx(RC);
  conv_backward(s.dhat, g.conv_k, s.dk, a.kh, w.conv_k, B, T, C, K);
  linear_backward(s.dx, g.Wk, nullptr, s.dhat, u, w.Wk, R, C, C);
  add_dx(RC);
  conv_backward(s.dhat, g.conv_v, s.dv, a.vh, w.conv_v, B, T, C, K);
  linear_backward(s.dx, g.Wv, nullptr, s.dhat, u, w.Wv, R, C, C);
  add_dx(RC);
}

// ---- Decoding ----------------------------------------------------------------------------------------------------------

size_t deltanet_state_floats(const DeltaNetDims& d) {
  return 3 * (size_t)(d.K - 1) * d.C + (size_t)d.H * d.N * d.N;
}

void deltanet_state_from_forward(float* state, const DeltaNetActivations& a, const DeltaNetDims& d, int b) {
  const int C = d.C, K = d.K, T = a.T;
  const float* hats[3] = {a.qh, a.kh, a.vh};
  for (int m = 0; m < 3; m++) {
    float* buf = state + (size_t)m * (K - 1) * C;
    for (int r = 0; r < K - 1; r++) {  // row r holds position T − (K − 1) + r, zeros before the sequence
      const int t = T - (K - 1) + r;
      float* dst = buf + (size_t)r * C;
      if (t < 0) {
        std::fill(dst, dst + C, 0.0f);
        continue;
      }
      const float* src = hats[m] + ((size_t)b * T + t) * C;
      std::copy(src, src + C, dst);
    }
  }
  float* S = state + 3 * (size_t)(K - 1) * C;
  for (int h = 0; h < d.H; h++) {
    const float* Sf = deltanet_final_state(a, d, b, h);
    std::copy(Sf, Sf + (size_t)d.N * d.N, S + (size_t)h * d.N * d.N);
  }
}

size_t deltanet_step_scratch_floats(const DeltaNetDims& d) { return 12 * (size_t)d.C + 6 * (size_t)d.H; }

void deltanet_step(float* out, float* state, const float* u, const DeltaNetWeights& w, const DeltaNetDims& d,
                   float* scratch) {
  const int C = d.C, H = d.H, N = d.N, K = d.K;
  float* hat[3];
  for (int m = 0; m < 3; m++) hat[m] = scratch + (size_t)m * C;  // q̂, k̂, v̂ of this token
  float* qc = scratch + 3 * (size_t)C;
  float* kc = qc + C;
  float* vc = kc + C;
  float* q = vc + C;
  float* k = q + C;
  float* v = k + C;
  float* y = v + C;
  float* gl = y + C;
  float* oin = gl + C;
  float* qn = oin + C;
  float* kn = qn + H;
  float* beta = kn + H;
  float* az = beta + H;
  float* alpha = az + H;
  float* rstd = alpha + H;
  matvec(hat[0], u, w.Wq, nullptr, C, C);
  matvec(hat[1], u, w.Wk, nullptr, C, C);
  matvec(hat[2], u, w.Wv, nullptr, C, C);
  matvec(gl, u, w.Wg, nullptr, C, C);
  matvec(beta, u, w.Wbeta, nullptr, C, H);
  matvec(az, u, w.Walpha, nullptr, C, H);
  const float* convs[3] = {w.conv_q, w.conv_k, w.conv_v};
  float* outs[3] = {qc, kc, vc};
  for (int m = 0; m < 3; m++) {
    float* buf = state + (size_t)m * (K - 1) * C;  // the K − 1 previous inputs, oldest first
    const float* rows[64];
    for (int j = 0; j < K - 1; j++) rows[j] = buf + (size_t)j * C;
    rows[K - 1] = hat[m];
    conv_row(outs[m], rows, convs[m], C, K);
    if (K > 1) {  // slide the window: drop the oldest, append this token's input
      std::copy(buf + C, buf + (size_t)(K - 1) * C, buf);
      std::copy(hat[m], hat[m] + C, buf + (size_t)(K - 2) * C);
    }
  }
  silu_l2_row(q, qn, qc, 1.0f / std::sqrt((float)N), H, N);
  silu_l2_row(k, kn, kc, 1.0f, H, N);
  for (int c = 0; c < C; c++) v[c] = silu(vc[c]);
  gates_row(beta, az, alpha, w.A_log, w.dt_bias, d.beta_scale(), H);
  float* S = state + 3 * (size_t)(K - 1) * C;
  for (int h = 0; h < H; h++) {
    const int o = h * N;
    recurrence_step(S + (size_t)h * N * N, y + o, q + o, k + o, v + o, beta[h], alpha[h], N);
  }
  norm_gate_row(oin, rstd, y, gl, w.norm_w, H, N);
  matvec(out, oin, w.Wo, nullptr, C, C);
}

// ---- The implied attention -------------------------------------------------------------------------------------------

void deltanet_implied_attention(float* M, const DeltaNetActivations& a, const DeltaNetDims& d, int B, int T) {
  const int H = d.H, N = d.N, C = d.C;
  std::vector<double> x(N);  // (I − β_{s+1}k_{s+1}k_{s+1}ᵀ) ⋯ (I − β_t k_t k_tᵀ) q_t, built from s = t down
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      float* Mh = M + ((size_t)b * H + h) * T * T;
      for (int t = 0; t < T; t++) {
        const size_t ot = ((size_t)b * T + t) * C + (size_t)h * N;
        for (int j = 0; j < N; j++) x[j] = a.q[ot + j];
        for (int s = T - 1; s > t; s--) Mh[(size_t)t * T + s] = 0.0f;
        double decay = 1.0;  // ∏_{i=s+1}^{t} α_i
        for (int s = t; s >= 0; s--) {
          const size_t rs = (size_t)b * T + s;
          const size_t os = rs * C + (size_t)h * N;
          const double bs = a.beta[rs * H + h];
          double kx = 0;
          for (int j = 0; j < N; j++) kx += (double)a.k[os + j] * x[j];
          Mh[(size_t)t * T + s] = (float)(bs * decay * kx);
          for (int j = 0; j < N; j++) x[j] -= bs * a.k[os + j] * kx;  // x ← (I − β_s k_s k_sᵀ) x
          decay *= a.alpha[rs * H + h];
        }
      }
    }
}
