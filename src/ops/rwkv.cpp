#include "ops/rwkv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "base/arena.h"
#include "base/rng.h"
#include "base/threads.h"
#include "ops/linear.h"

// ---- Initialisation ----------------------------------------------------------------------------------------------

namespace {

// n_rows × n_cols with orthonormal rows (n_rows ≤ n_cols) or orthonormal columns (n_rows > n_cols), times `scale`:
// PyTorch's nn.init.orthogonal_, by Gram–Schmidt on a Gaussian matrix instead of a QR factorisation.
void orthogonal(float* p, int n_rows, int n_cols, double scale, Rng& rng) {
  const bool by_rows = n_rows <= n_cols;
  const int count = by_rows ? n_rows : n_cols, len = by_rows ? n_cols : n_rows;
  std::vector<double> q((size_t)count * len);
  for (double& x : q) x = rng.normal();
  for (int i = 0; i < count; i++) {
    double* qi = &q[(size_t)i * len];
    for (int j = 0; j < i; j++) {
      const double* qj = &q[(size_t)j * len];
      double dot = 0;
      for (int e = 0; e < len; e++) dot += qi[e] * qj[e];
      for (int e = 0; e < len; e++) qi[e] -= dot * qj[e];
    }
    double norm = 0;
    for (int e = 0; e < len; e++) norm += qi[e] * qi[e];
    norm = std::sqrt(norm);
    for (int e = 0; e < len; e++) qi[e] /= norm;
  }
  for (int r = 0; r < n_rows; r++)
    for (int c = 0; c < n_cols; c++)
      p[(size_t)r * n_cols + c] = (float)(scale * (by_rows ? q[(size_t)r * len + c] : q[(size_t)c * len + r]));
}

}  // namespace

void rwkv_init_tensor(const std::string& name, float* p, size_t n, const RwkvDims& d, int layer, int n_layer,
                      Rng& rng) {
  const int C = d.C, N = d.N;
  const double ratio_0_to_1 = n_layer > 1 ? (double)layer / (n_layer - 1) : 0.0;
  const double ratio_1_to_0 = 1.0 - (double)layer / n_layer;
  auto linear = [&](int c) { return C > 1 ? (double)c / (C - 1) - 0.5 : 0.0; };      // −½ … ½ across channels
  auto zigzag = [&](int c) {                                                          // −1 … 1 within each head
    if (N == 1) return 0.0;
    const double z = ((c % N) - (N - 1) / 2.0) / ((N - 1) / 2.0);
    return z * std::fabs(z);
  };
  auto uniform = [&](double bound) {
    for (size_t i = 0; i < n; i++) p[i] = (float)(bound * (2.0 * rng.uniform() - 1.0));
  };
  auto each = [&](auto f) {
    for (int c = 0; c < C; c++) p[c] = (float)f(c);
  };
  if (name == "rwkv.mix") {  // μ = 1 − (c/C)^(power · (1 − layer/n_layer)): the powers of r, w, k, v, a, g
    const double power[6] = {0.2, 0.9, 0.7, 0.7, 0.9, 0.2};
    for (int m = 0; m < 6; m++)
      for (int c = 0; c < C; c++) p[(size_t)m * C + c] = (float)(1.0 - std::pow((double)c / C, power[m] * ratio_1_to_0));
  } else if (name == "rwkv.receptance.weight" || name == "rwkv.value.weight") {
    uniform(0.5 / std::sqrt((double)C));
  } else if (name == "rwkv.key.weight") {
    uniform(0.05 / std::sqrt((double)C));
  } else if (name == "rwkv.output.weight" || name == "rwkv.w1" || name == "rwkv.a1" || name == "rwkv.g1" ||
             name == "rwkv.ln_x.bias") {
    std::fill(p, p + n, 0.0f);
  } else if (name == "rwkv.w2" || name == "rwkv.a2" || name == "rwkv.g2") {
    orthogonal(p, d.D, C, 0.1 * (d.D > C ? std::sqrt((double)d.D / C) : 1.0), rng);
  } else if (name == "rwkv.w0") {  // −6 … 0 across channels (slow to fast decay), + the within-head zigzag
    each([&](int c) {
      const double x = C > 1 ? (double)c / (C - 1) : 0.0;
      return -6.0 + 6.0 * std::pow(x, 1.0 + std::pow(ratio_0_to_1, 0.3)) + 0.5 + 2.5 * zigzag(c);
    });
  } else if (name == "rwkv.a0") {
    each([&](int c) { return -0.19 + 0.3 * zigzag(c) + 0.4 * linear(c); });
  } else if (name == "rwkv.k_k") {
    each([&](int c) { return 0.71 - 0.1 * linear(c); });
  } else if (name == "rwkv.k_a") {
    std::fill(p, p + n, 1.02f);
  } else if (name == "rwkv.r_k") {
    std::fill(p, p + n, -0.04f);
  } else if (name == "rwkv.ln_x.weight") {
    std::fill(p, p + n, 1.0f);
  } else {
    throw std::logic_error("rwkv: no init for tensor " + name);
  }
}

// ---- Memory ------------------------------------------------------------------------------------------------------

namespace {

using Carver = ArenaCarver;  // base/arena.h: with base == nullptr it only counts

size_t states_floats(const RwkvDims& d, int B, int T) {
  return (size_t)B * d.H * ((size_t)d.chunks(T) + 1) * d.N * d.N;
}

RwkvActivations layout_activations(float* base, const RwkvDims& d, int B, int T, size_t* count) {
  const size_t BT = (size_t)B * T, C = d.C, D = d.D, H = d.H;
  Carver c{base};
  RwkvActivations a;
  a.xs = c.take(6 * BT * C);
  for (float** p : {&a.r, &a.k, &a.v}) *p = c.take(BT * C);
  for (float** p : {&a.wh, &a.ah, &a.gh}) *p = c.take(BT * D);
  for (float** p : {&a.sw, &a.dec, &a.a, &a.g, &a.kap}) *p = c.take(BT * C);
  a.knorm = c.take(BT * H);
  a.kt = c.take(BT * C);
  a.y = c.take(BT * C);
  a.mean = c.take(BT * H);
  a.rstd = c.take(BT * H);
  a.oin = c.take(BT * C);
  a.state = c.take(states_floats(d, B, T));
  a.last_u = c.take((size_t)B * C);
  a.T = T;
  if (count) *count = c.used;
  return a;
}

// The backward's working memory.
struct Scratch {
  float *doin, *dg, *dy, *dr, *dkt, *dv, *ddec, *dkap, *da, *dk, *dwh, *dah, *dgh, *dxs, *rec;
};
constexpr int kSlots = kRwkvChunk + 2;  // per (batch, head): the chunk's kRwkvChunk + 1 states and dS
Scratch layout_scratch(float* base, const RwkvDims& d, int B, int T, size_t* count) {
  const size_t BT = (size_t)B * T, C = d.C, D = d.D;
  Carver c{base};
  Scratch s;
  for (float** p : {&s.doin, &s.dg, &s.dy, &s.dr, &s.dkt, &s.dv, &s.ddec, &s.dkap, &s.da, &s.dk}) *p = c.take(BT * C);
  for (float** p : {&s.dwh, &s.dah, &s.dgh}) *p = c.take(BT * D);
  s.dxs = c.take(6 * BT * C);
  s.rec = c.take((size_t)B * d.H * kSlots * d.N * d.N);
  if (count) *count = c.used;
  return s;
}

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace

size_t rwkv_activation_floats(const RwkvDims& d, int B, int T) {
  return counted_floats(layout_activations, d, B, T);
}
RwkvActivations rwkv_activations(float* memory, const RwkvDims& d, int B, int T) {
  return layout_activations(memory, d, B, T, nullptr);
}
size_t rwkv_scratch_floats(const RwkvDims& d, int B, int T) {
  return counted_floats(layout_scratch, d, B, T);
}

// ---- The pieces of one row, shared by the batched forward and the one-token step (one float arithmetic) -----------

namespace {

// x*_t = u_t + μ_*⊙(u_{t−1} − u_t); xs[m] is block m's row, prev = u_{t−1} or null at t = 0.
inline void shift_row(float* const xs[6], const float* u, const float* prev, const float* mix, int C) {
  for (int m = 0; m < 6; m++)
    for (int c = 0; c < C; c++) xs[m][c] = u[c] + mix[(size_t)m * C + c] * ((prev ? prev[c] : 0.0f) - u[c]);
}

// In place over n elements: sw ← σ(sw), dec = exp(−e^{−1/2}·sw); a ← σ(a).
inline void decay_rate(float* sw, float* dec, float* a, size_t n) {
  for (size_t i = 0; i < n; i++) {
    sw[i] = sigmoid(sw[i]);
    dec[i] = std::exp(-(float)kRwkvDecayScale * sw[i]);
    a[i] = sigmoid(a[i]);
  }
}

// κ (normalised per head), its norm, and k̃ of one row.
inline void kappa_row(float* kap, float* knorm, float* kt, const float* k, const float* a, const float* k_k,
                      const float* k_a, int H, int N) {
  for (int h = 0; h < H; h++) {
    const int o = h * N;
    float ss = 0.0f;
    for (int j = 0; j < N; j++) {
      const float kk = k[o + j] * k_k[o + j];
      ss += kk * kk;
    }
    const float norm = std::max(std::sqrt(ss), kRwkvKappaEps);
    knorm[h] = norm;
    for (int j = 0; j < N; j++) kap[o + j] = k[o + j] * k_k[o + j] / norm;
  }
  for (int c = 0; c < H * N; c++) kt[c] = k[c] * (1.0f + (a[c] - 1.0f) * k_a[c]);
}

// β_h = Σ_{j in head} r_j k̃_j r_k,j
inline float bonus(const float* r, const float* kt, const float* r_k, int N) {
  float s = 0.0f;
  for (int j = 0; j < N; j++) s += r[j] * kt[j] * r_k[j];
  return s;
}

// Steps 6–8 up to W_o's input: the GroupNorm's mean and 1/σ, and oin = (ŷ⊙ln_w + ln_b + β v) ⊙ g.
inline void norm_bonus_gate_row(float* oin, float* mean, float* rstd, const float* y, const float* r, const float* kt,
                                const float* v, const float* g, const RwkvWeights& w, int H, int N) {
  for (int h = 0; h < H; h++) {
    const int o = h * N;
    float mu = 0.0f;
    for (int j = 0; j < N; j++) mu += y[o + j];
    mu /= N;
    float var = 0.0f;
    for (int j = 0; j < N; j++) var += (y[o + j] - mu) * (y[o + j] - mu);
    const float rs = 1.0f / std::sqrt(var / N + kRwkvNormEps);
    mean[h] = mu, rstd[h] = rs;
    const float beta = bonus(r + o, kt + o, w.r_k + o, N);
    for (int j = 0; j < N; j++) {
      const int c = o + j;
      oin[c] = ((y[c] - mu) * rs * w.ln_w[c] + w.ln_b[c] + beta * v[c]) * g[c];
    }
  }
}

// One position of one head: S ← S·A + v k̃ᵀ with A = diag(d) − e·κ(a⊙κ)ᵀ, row by row (row i = value channel i):
//   S[i, j] ← S[i, j]·d_j − (S[i, :]·κ)·e·a_j κ_j + v_i k̃_j;   then y_i = S[i, :]·r (when y is not null).
// e = 1, or 0 with the erase off (RwkvDims::erase; × 0 gives exact zeros). The forward, the backward's
// recomputation and the decoder all step through this.
inline void recurrence_step(float* S, float* y, const float* r, const float* kt, const float* v, const float* dec,
                            const float* kap, const float* a, float e, int N) {
  for (int i = 0; i < N; i++) {
    float* s = S + (size_t)i * N;
    float sk = 0.0f;
#pragma omp simd reduction(+ : sk)
    for (int j = 0; j < N; j++) sk += s[j] * kap[j];
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int j = 0; j < N; j++) {
      s[j] = s[j] * dec[j] - sk * (e * a[j] * kap[j]) + v[i] * kt[j];
      acc += s[j] * r[j];
    }
    if (y) y[i] = acc;
  }
}

}  // namespace

// ---- The recurrence ----------------------------------------------------------------------------------------------

void rwkv_recurrence_forward(float* y, float* state, const float* r, const float* kt, const float* v, const float* dec,
                             const float* kap, const float* a, const RwkvDims& d, int B, int T) {
  const int H = d.H, N = d.N, C = d.C, chunks = d.chunks(T);
  const size_t NN = (size_t)N * N;
  const float e = d.erase ? 1.0f : 0.0f;
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads((size_t)B * T * C * N))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      float* kept = state + ((size_t)b * H + h) * (chunks + 1) * NN;
      float* S = kept + (size_t)chunks * NN;  // the working state, S_{T−1} at the end
      std::fill(S, S + NN, 0.0f);
      for (int t = 0; t < T; t++) {
        if (t % kRwkvChunk == 0) std::copy(S, S + NN, kept + (size_t)(t / kRwkvChunk) * NN);
        const size_t o = ((size_t)b * T + t) * C + (size_t)h * N;
        recurrence_step(S, y + o, r + o, kt + o, v + o, dec + o, kap + o, a + o, e, N);
      }
    }
}

// Sequences and heads go to whichever thread is free. The planted race (`make test-tsan-planted`, mk/hardening.mk)
// deals them out in fixed halves instead, so that both threads always get a sequence of the same head: under
// `dynamic` one thread could take them all, and then there is no race to report (it happened on a CI machine).
#ifndef PLAINGPT_PLANT_RACE
#define BACKWARD_SCHEDULE dynamic
#else
#define BACKWARD_SCHEDULE static
#endif

void rwkv_recurrence_backward(float* dr, float* dkt, float* dv, float* ddec, float* dkap, float* da, const float* dy,
                              const float* state, const float* r, const float* kt, const float* v, const float* dec,
                              const float* kap, const float* a, const RwkvDims& d, int B, int T, float* scratch) {
  const int H = d.H, N = d.N, C = d.C, chunks = d.chunks(T);
  const size_t NN = (size_t)N * N;
  const float e = d.erase ? 1.0f : 0.0f;
#pragma omp parallel for collapse(2) schedule(BACKWARD_SCHEDULE) if (worth_threads((size_t)B * T * C * N))
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const float* kept = state + ((size_t)b * H + h) * (chunks + 1) * NN;
#ifndef PLAINGPT_PLANT_RACE
      float* slot = scratch + ((size_t)b * H + h) * kSlots * NN;  // slot[k] = S_{t0+k−1}, k = 0 … kRwkvChunk
#else
      // Planted for `make test-tsan-planted` only (mk/hardening.mk): every sequence of head h shares one scratch,
      // a race this loop once had; ThreadSanitizer must report it. No other build defines PLAINGPT_PLANT_RACE.
      float* slot = scratch + (size_t)h * kSlots * NN;
#endif
      float* dS = slot + (size_t)(kRwkvChunk + 1) * NN;           // dS_t, less dy_t r_tᵀ until it is added
      std::fill(dS, dS + NN, 0.0f);
      for (int c = chunks - 1; c >= 0; c--) {
        const int t0 = c * kRwkvChunk, t1 = std::min(T, t0 + kRwkvChunk);
        // Recompute the chunk's states from its kept start; dr_t = S_tᵀ dy_t on the way.
        std::copy(kept + (size_t)c * NN, kept + (size_t)(c + 1) * NN, slot);
        for (int t = t0; t < t1; t++) {
          const size_t o = ((size_t)b * T + t) * C + (size_t)h * N;
          float* S = slot + (size_t)(t - t0 + 1) * NN;
          std::copy(S - NN, S, S);
          recurrence_step(S, nullptr, r + o, kt + o, v + o, dec + o, kap + o, a + o, e, N);
          float* drt = dr + o;
          for (int j = 0; j < N; j++) drt[j] = 0.0f;
          for (int i = 0; i < N; i++) {
            const float dyi = dy[o + i], *si = S + (size_t)i * N;
#pragma omp simd
            for (int j = 0; j < N; j++) drt[j] += si[j] * dyi;
          }
        }
        // The reverse pass through the chunk.
        for (int t = t1 - 1; t >= t0; t--) {
          const size_t o = ((size_t)b * T + t) * C + (size_t)h * N;
          const float* Sp = slot + (size_t)(t - t0) * NN;  // S_{t−1}
          const float *rt = r + o, *ktt = kt + o, *vt = v + o, *dect = dec + o, *kapt = kap + o, *at = a + o;
          const float* dyt = dy + o;
          float *dktt = dkt + o, *dvt = dv + o, *ddect = ddec + o, *dkapt = dkap + o, *db = da + o;
          for (int j = 0; j < N; j++) dktt[j] = ddect[j] = dkapt[j] = db[j] = 0.0f;
          for (int i = 0; i < N; i++) {
            float* ds = dS + (size_t)i * N;
            const float* sp = Sp + (size_t)i * N;
            const float dyi = dyt[i], vi = vt[i];
#pragma omp simd
            for (int j = 0; j < N; j++) ds[j] += dyi * rt[j];  // dS_t = dy_t r_tᵀ + dS_{t+1} A_{t+1}ᵀ
            float q = 0.0f, p = 0.0f, dvi = 0.0f;              // (dS_t b_t)_i, (S_{t−1} κ_t)_i, (dS_t k̃_t)_i
#pragma omp simd reduction(+ : q, p, dvi)
            for (int j = 0; j < N; j++) {
              q += ds[j] * (e * at[j] * kapt[j]);
              p += sp[j] * kapt[j];
              dvi += ds[j] * ktt[j];
            }
            dvt[i] = dvi;
#pragma omp simd
            for (int j = 0; j < N; j++) {
              dktt[j] += ds[j] * vi;      // dS_tᵀ v_t
              ddect[j] += sp[j] * ds[j];  // diag(S_{t−1}ᵀ dS_t)
              dkapt[j] -= sp[j] * q;      // −S_{t−1}ᵀ (dS_t b_t)
              db[j] -= ds[j] * p;         // −dS_tᵀ (S_{t−1} κ_t)
              ds[j] = ds[j] * dect[j] - q * kapt[j];  // dS_t A_tᵀ, the part of dS_{t−1} that flows through A_t
            }
          }
          for (int j = 0; j < N; j++) {  // b = e·a ⊙ κ
            dkapt[j] += e * db[j] * at[j];
            db[j] *= e * kapt[j];
          }
        }
      }
    }
}

// ---- The layer -------------------------------------------------------------------------------------------------------

void rwkv_forward(float* out, const RwkvActivations& a, const float* u, const RwkvWeights& w, const RwkvDims& d, int B,
                  int T) {
  const int BT = B * T, C = d.C, D = d.D, H = d.H, N = d.N;
  auto X = [&](int m) { return a.xs + (size_t)m * BT * C; };  // x^r, x^w, x^k, x^v, x^a, x^g
  for (int b = 0; b < B; b++)
    std::copy(u + ((size_t)b * T + T - 1) * C, u + ((size_t)b * T + T) * C, a.last_u + (size_t)b * C);
  parallel_for(BT, (size_t)BT * C * 6, [&](size_t row) {
    float* xs[6];
    for (int m = 0; m < 6; m++) xs[m] = X(m) + row * C;
    shift_row(xs, u + row * C, row % T ? u + (row - 1) * C : nullptr, w.mix, C);
  });
  linear_forward(a.r, X(0), w.Wr, nullptr, BT, C, C);
  linear_forward(a.k, X(2), w.Wk, nullptr, BT, C, C);
  linear_forward(a.v, X(3), w.Wv, nullptr, BT, C, C);
  linear_forward(a.wh, X(1), w.w1, nullptr, BT, C, D);
  for (size_t i = 0; i < (size_t)BT * D; i++) a.wh[i] = std::tanh(a.wh[i]);
  linear_forward(a.sw, a.wh, w.w2, w.w0, BT, D, C);  // w0 + tanh(x^w·W1)·W2, σ'd below
  linear_forward(a.ah, X(4), w.a1, nullptr, BT, C, D);
  linear_forward(a.a, a.ah, w.a2, w.a0, BT, D, C);
  linear_forward(a.gh, X(5), w.g1, nullptr, BT, C, D);
  for (size_t i = 0; i < (size_t)BT * D; i++) a.gh[i] = sigmoid(a.gh[i]);
  linear_forward(a.g, a.gh, w.g2, nullptr, BT, D, C);
  decay_rate(a.sw, a.dec, a.a, (size_t)BT * C);
  parallel_for(BT, (size_t)BT * C * 4, [&](size_t row) {
    const size_t o = row * C;
    kappa_row(a.kap + o, a.knorm + row * H, a.kt + o, a.k + o, a.a + o, w.k_k, w.k_a, H, N);
  });
  rwkv_recurrence_forward(a.y, a.state, a.r, a.kt, a.v, a.dec, a.kap, a.a, d, B, T);
  parallel_for(BT, (size_t)BT * C * 4, [&](size_t row) {
    const size_t o = row * C;
    norm_bonus_gate_row(a.oin + o, a.mean + row * H, a.rstd + row * H, a.y + o, a.r + o, a.kt + o, a.v + o, a.g + o, w,
                        H, N);
  });
  linear_forward(out, a.oin, w.Wo, nullptr, BT, C, C);
}

void rwkv_backward(float* du, const RwkvGrads& g, const float* dout, const float* u, const RwkvActivations& a,
                   const RwkvWeights& w, const RwkvDims& d, int B, int T, float* scratch) {
  const int BT = B * T, C = d.C, D = d.D, H = d.H, N = d.N;
  const Scratch s = layout_scratch(scratch, d, B, T, nullptr);
  auto X = [&](int m) { return a.xs + (size_t)m * BT * C; };
  auto dX = [&](int m) { return s.dxs + (size_t)m * BT * C; };

  linear_backward(s.doin, g.Wo, nullptr, dout, a.oin, w.Wo, BT, C, C);
  // The gate and the GroupNorm: z = ŷ⊙ln_w + ln_b + βv (recomputed), dg = doin⊙z, dz = doin⊙g;
  // dŷ = dz⊙ln_w, dy = rstd·(dŷ − mean(dŷ) − ŷ·mean(dŷ⊙ŷ)).
  for (int row = 0; row < BT; row++)
    for (int h = 0; h < H; h++) {
      const size_t o = (size_t)row * C + (size_t)h * N;
      const float mu = a.mean[(size_t)row * H + h], rs = a.rstd[(size_t)row * H + h];
      const float beta = bonus(a.r + o, a.kt + o, w.r_k + h * N, N);
      float m1 = 0.0f, m2 = 0.0f;
      for (int j = 0; j < N; j++) {
        const int c = h * N + j;
        const float yh = (a.y[o + j] - mu) * rs;
        const float z = yh * w.ln_w[c] + w.ln_b[c] + beta * a.v[o + j];
        const float dz = s.doin[o + j] * a.g[o + j];
        s.dg[o + j] = s.doin[o + j] * z;
        g.ln_w[c] += dz * yh;
        g.ln_b[c] += dz;
        m1 += dz * w.ln_w[c];
        m2 += dz * w.ln_w[c] * yh;
      }
      m1 /= N, m2 /= N;
      for (int j = 0; j < N; j++) {
        const int c = h * N + j;
        const float yh = (a.y[o + j] - mu) * rs;
        s.dy[o + j] = rs * (s.doin[o + j] * a.g[o + j] * w.ln_w[c] - m1 - yh * m2);
      }
    }
  rwkv_recurrence_backward(s.dr, s.dkt, s.dv, s.ddec, s.dkap, s.da, s.dy, a.state, a.r, a.kt, a.v, a.dec, a.kap, a.a,
                           d, B, T, s.rec);
  // The bonus βv with β = Σ r⊙k̃⊙r_k: dβ = dz·v, dv += β·dz, dr += dβ·k̃⊙r_k, dk̃ += dβ·r⊙r_k, dr_k += dβ·r⊙k̃.
  for (int row = 0; row < BT; row++)
    for (int h = 0; h < H; h++) {
      const size_t o = (size_t)row * C + (size_t)h * N;
      const float* rk = w.r_k + h * N;
      const float beta = bonus(a.r + o, a.kt + o, rk, N);
      float dbeta = 0.0f;
      for (int j = 0; j < N; j++) dbeta += s.doin[o + j] * a.g[o + j] * a.v[o + j];
      for (int j = 0; j < N; j++) {
        s.dv[o + j] += beta * s.doin[o + j] * a.g[o + j];
        s.dr[o + j] += dbeta * a.kt[o + j] * rk[j];
        s.dkt[o + j] += dbeta * a.r[o + j] * rk[j];
        g.r_k[h * N + j] += dbeta * a.r[o + j] * a.kt[o + j];
      }
    }
  // k̃ = k⊙(1 + (a−1)⊙k_a):  dk = dk̃⊙(1 + (a−1)⊙k_a),  da += dk̃⊙k⊙k_a,  dk_a += dk̃⊙k⊙(a−1).
  // κ = kk/n, kk = k⊙k_k, n = max(‖kk‖, ε) per head:  dkk = (dκ − κ(κ·dκ))/n, or dκ/n where n is the clamp;
  // dk += dkk⊙k_k,  dk_k += dkk⊙k.
  for (int row = 0; row < BT; row++)
    for (int h = 0; h < H; h++) {
      const size_t o = (size_t)row * C + (size_t)h * N;
      const float n = a.knorm[(size_t)row * H + h];
      float ss = 0.0f, dot = 0.0f;
      for (int j = 0; j < N; j++) {
        const float kk = a.k[o + j] * w.k_k[h * N + j];
        ss += kk * kk;
        dot += a.kap[o + j] * s.dkap[o + j];
      }
      const bool clamped = std::sqrt(ss) < kRwkvKappaEps;
      for (int j = 0; j < N; j++) {
        const int c = h * N + j;
        const float k = a.k[o + j], dkt = s.dkt[o + j];
        const float dkk = (s.dkap[o + j] - (clamped ? 0.0f : a.kap[o + j] * dot)) / n;
        s.dk[o + j] = dkt * (1.0f + (a.a[o + j] - 1.0f) * w.k_a[c]) + dkk * w.k_k[c];
        s.da[o + j] += dkt * k * w.k_a[c];
        g.k_a[c] += dkt * k * (a.a[o + j] - 1.0f);
        g.k_k[c] += dkk * k;
      }
    }
  // The decay d = exp(−c·σ(ℓ)):  dℓ = dd·d·(−c)·σ(1 − σ);  the rate a = σ(ℓ_a):  dℓ_a = da·a(1 − a). In place.
  for (size_t i = 0; i < (size_t)BT * C; i++) {
    s.ddec[i] *= a.dec[i] * -(float)kRwkvDecayScale * a.sw[i] * (1.0f - a.sw[i]);
    s.da[i] *= a.a[i] * (1.0f - a.a[i]);
  }
  linear_backward(s.dwh, g.w2, g.w0, s.ddec, a.wh, w.w2, BT, D, C);
  for (size_t i = 0; i < (size_t)BT * D; i++) s.dwh[i] *= 1.0f - a.wh[i] * a.wh[i];  // tanh' = 1 − tanh²
  linear_backward(dX(1), g.w1, nullptr, s.dwh, X(1), w.w1, BT, C, D);
  linear_backward(s.dah, g.a2, g.a0, s.da, a.ah, w.a2, BT, D, C);
  linear_backward(dX(4), g.a1, nullptr, s.dah, X(4), w.a1, BT, C, D);
  linear_backward(s.dgh, g.g2, nullptr, s.dg, a.gh, w.g2, BT, D, C);
  for (size_t i = 0; i < (size_t)BT * D; i++) s.dgh[i] *= a.gh[i] * (1.0f - a.gh[i]);  // σ' = σ(1 − σ)
  linear_backward(dX(5), g.g1, nullptr, s.dgh, X(5), w.g1, BT, C, D);
  linear_backward(dX(0), g.Wr, nullptr, s.dr, X(0), w.Wr, BT, C, C);
  linear_backward(dX(2), g.Wk, nullptr, s.dk, X(2), w.Wk, BT, C, C);
  linear_backward(dX(3), g.Wv, nullptr, s.dv, X(3), w.Wv, BT, C, C);
  // The shift x*_t = (1 − μ_*)⊙u_t + μ_*⊙u_{t−1}:  du_t = Σ_* (1 − μ_*)⊙dx*_t + μ_*⊙dx*_{t+1},
  // dμ_* += Σ_t dx*_t⊙(u_{t−1} − u_t).
  for (int row = 0; row < BT; row++) {
    const bool first = row % T == 0, last = row % T == T - 1;
    for (int c = 0; c < C; c++) du[(size_t)row * C + c] = 0.0f;
    for (int m = 0; m < 6; m++) {
      const float* mu = w.mix + (size_t)m * C;
      const float* dx = dX(m) + (size_t)row * C;
      for (int c = 0; c < C; c++) {
        float sum = (1.0f - mu[c]) * dx[c];
        if (!last) sum += mu[c] * dx[c + C];
        du[(size_t)row * C + c] += sum;
        g.mix[(size_t)m * C + c] += dx[c] * ((first ? 0.0f : u[(size_t)(row - 1) * C + c]) - u[(size_t)row * C + c]);
      }
    }
  }
}

// ---- Decoding ----------------------------------------------------------------------------------------------------------

size_t rwkv_state_floats(const RwkvDims& d) { return (size_t)d.C + (size_t)d.H * d.N * d.N; }

void rwkv_state_from_forward(float* state, const RwkvActivations& a, const RwkvDims& d, int b) {
  std::copy(a.last_u + (size_t)b * d.C, a.last_u + (size_t)(b + 1) * d.C, state);
  for (int h = 0; h < d.H; h++) {
    const float* S = rwkv_final_state(a, d, b, h);
    std::copy(S, S + (size_t)d.N * d.N, state + d.C + (size_t)h * d.N * d.N);
  }
}

size_t rwkv_step_scratch_floats(const RwkvDims& d) { return 17 * (size_t)d.C + 3 * (size_t)d.D + 3 * (size_t)d.H; }

void rwkv_step(float* out, float* state, const float* u, const RwkvWeights& w, const RwkvDims& d, float* scratch) {
  const int C = d.C, D = d.D, H = d.H, N = d.N;
  float* prev = state;  // u_{t−1}: zeros at the start of a sequence, as u_{−1} = 0
  float* S = state + C;
  float* xs[6];
  for (int m = 0; m < 6; m++) xs[m] = scratch + (size_t)m * C;
  float* r = scratch + 6 * (size_t)C;
  float *k = r + C, *v = k + C, *sw = v + C, *dec = sw + C, *a = dec + C, *g = a + C, *kap = g + C, *kt = kap + C;
  float *y = kt + C, *oin = y + C, *wh = oin + C, *ah = wh + D, *gh = ah + D, *knorm = gh + D, *mean = knorm + H;
  float* rstd = mean + H;
  shift_row(xs, u, prev, w.mix, C);
  std::copy(u, u + C, prev);
  matvec(r, xs[0], w.Wr, nullptr, C, C);
  matvec(k, xs[2], w.Wk, nullptr, C, C);
  matvec(v, xs[3], w.Wv, nullptr, C, C);
  matvec(wh, xs[1], w.w1, nullptr, C, D);
  for (int i = 0; i < D; i++) wh[i] = std::tanh(wh[i]);
  matvec(sw, wh, w.w2, w.w0, D, C);
  matvec(ah, xs[4], w.a1, nullptr, C, D);
  matvec(a, ah, w.a2, w.a0, D, C);
  matvec(gh, xs[5], w.g1, nullptr, C, D);
  for (int i = 0; i < D; i++) gh[i] = sigmoid(gh[i]);
  matvec(g, gh, w.g2, nullptr, D, C);
  decay_rate(sw, dec, a, C);
  kappa_row(kap, knorm, kt, k, a, w.k_k, w.k_a, H, N);
  for (int h = 0; h < H; h++) {
    const int o = h * N;
    recurrence_step(S + (size_t)h * N * N, y + o, r + o, kt + o, v + o, dec + o, kap + o, a + o, d.erase ? 1.0f : 0.0f,
                    N);
  }
  norm_bonus_gate_row(oin, mean, rstd, y, r, kt, v, g, w, H, N);
  matvec(out, oin, w.Wo, nullptr, C, C);
}

// ---- The implied attention -------------------------------------------------------------------------------------------

void rwkv_implied_attention(float* M, const RwkvActivations& a, const RwkvDims& d, int B, int T) {
  const int H = d.H, N = d.N, C = d.C;
  const double e = d.erase ? 1.0 : 0.0;
  std::vector<double> q(N);  // A_{s+1} ⋯ A_t r_t, built from s = t down: A_s q = d_s⊙q − κ_s (a_s⊙κ_s · q)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      float* Mh = M + ((size_t)b * H + h) * T * T;
      for (int t = 0; t < T; t++) {
        const size_t ot = ((size_t)b * T + t) * C + (size_t)h * N;
        for (int j = 0; j < N; j++) q[j] = a.r[ot + j];
        for (int s = T - 1; s > t; s--) Mh[(size_t)t * T + s] = 0.0f;
        for (int s = t; s >= 0; s--) {
          const size_t os = ((size_t)b * T + s) * C + (size_t)h * N;
          double m = 0, bq = 0;
          for (int j = 0; j < N; j++) m += (double)a.kt[os + j] * q[j];
          Mh[(size_t)t * T + s] = (float)m;
          for (int j = 0; j < N; j++) bq += e * a.a[os + j] * a.kap[os + j] * q[j];
          for (int j = 0; j < N; j++) q[j] = a.dec[os + j] * q[j] - a.kap[os + j] * bq;
        }
      }
    }
}
