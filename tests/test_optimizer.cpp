// The training step after the backward, and the sampler's cut-offs, against their formulas written out here:
//   OptimizerSchedule  the warm-up + cosine learning rate at every step
//   OptimizerClip      global-norm clipping when it binds, when it does not, and when it is off; the norm of a
//                      long vector against the sum in double
//   OptimizerAdamW     several AdamW steps on a whole GPT's parameter arena (tensors of every kind) against a
//                      double-precision AdamW written below: bias-corrected moments, decoupled weight decay on the
//                      2-D weights only, the learning rate of that step, clipping by the global norm
//   OptimizerMuon      NS5 against the double-precision textbook (wide, tall, square) and against its closed form
//                      on matrices of known SVD; its output's singular values near 1 (proven bounds); the whole
//                      Muon step on a GPT's arena against the textbook's step for Muon's tensors and the AdamW
//                      below for the rest; the same bits on one thread and two
//   SamplerCutoffs     top-k and top-p on distributions whose kept set is known exactly (ties, p hitting a
//                      boundary exactly, k ≥ V, top-p measured within the top k)
// Each of these went red when the code was broken on purpose (README "Tests": how to see that a test can fail).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/rng.h"
#include "generate/sampling.h"
#include "base/threads.h"
#include "optim/adamw.h"
#include "model/model.h"
#include "optim/muon.h"
#include "model/params.h"
#include "textbook/muon.h"
#include "textbook/reference.h"
#include "train/loop.h"

namespace {

// ---- the formulas, in double ------------------------------------------------------------------------------------

// nanoGPT's schedule: lr·(s+1)/(w+1) for s < w; then lr_min + ½(1 + cos(π·(s−w)/(S−w)))·(lr − lr_min); lr_min
// from step S on.
double reference_lr(double lr, double min_lr, int warmup, int step, int total) {
  if (step < warmup) return lr * (step + 1) / (warmup + 1);
  if (step >= total) return min_lr;
  const double progress = double(step - warmup) / double(total - warmup);
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (lr - min_lr);
}

// One AdamW step on θ given the raw gradient g:
//   n = ‖g‖₂;  g ← g · c/n  if c > 0 and n > c                                  (clipping by the global norm)
//   m ← β1·m + (1−β1)·g;   v ← β2·v + (1−β2)·g²;   m̂ = m/(1−β1ᵗ);   v̂ = v/(1−β2ᵗ)
//   θ ← θ − lr·(m̂/(√v̂ + ε) + λ_i·θ),   λ_i = weight_decay for the 2-D weights, 0 for biases and LayerNorm
struct ReferenceAdamW {
  std::vector<double> theta, m, v;
  std::vector<bool> decays;  // per element
  std::vector<bool> skip;    // per element, or empty: left to another optimizer (Muon's tensors), untouched here
  int t = 0;

  double step(const std::vector<float>& raw_grad, const AdamWConfig& c, double lr) {
    double sum = 0;
    for (float g : raw_grad) sum += double(g) * double(g);
    const double norm = std::sqrt(sum);
    const double scale = c.grad_clip > 0 && norm > c.grad_clip ? c.grad_clip / norm : 1.0;
    t += 1;
    const double b1 = c.beta1, b2 = c.beta2;
    for (size_t i = 0; i < theta.size(); i++) {
      if (!skip.empty() && skip[i]) continue;
      const double g = raw_grad[i] * scale;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(b1, t)), v_hat = v[i] / (1 - std::pow(b2, t));
      const double decay = decays[i] ? double(c.weight_decay) : 0.0;
      theta[i] -= lr * (m_hat / (std::sqrt(v_hat) + c.eps) + decay * theta[i]);
    }
    return norm;
  }
};

std::unique_ptr<GPT> small_gpt() {
  ModelConfig c;
  c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.block_size = 5, c.vocab_size = 7;
  auto model = std::make_unique<GPT>(c, parse_layer_masks("causal", c.n_layer));
  model->init_weights(5);  // biases 0, LayerNorm gains 1, weights N(0, 0.02): every kind of starting value
  return model;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

TEST(OptimizerSchedule, WarmupThenCosineAtEveryStep) {
  struct Case { float lr, min_lr; int warmup, total; };
  for (const Case& k : {Case{1e-3f, 1e-4f, 100, 2000}, Case{3e-2f, 0.0f, 0, 10}, Case{1.0f, 0.5f, 7, 8}}) {
    TrainConfig c;
    c.adamw.lr = k.lr, c.adamw.min_lr = k.min_lr, c.adamw.warmup_steps = k.warmup, c.steps = k.total;
    c.muon.lr = 0.02f;
    for (int s = 0; s <= k.total + 3; s++) {
      const double expected = reference_lr(k.lr, k.min_lr, k.warmup, s, k.total);
      const LearningRates lr = learning_rates(c, s);
      ASSERT_NEAR(lr.adamw, expected, 1e-6 * k.lr) << "step " << s << " of " << k.total << ", warm-up " << k.warmup;
      // Muon's η: its own peak on the same schedule, η = muon_lr · lr(step)/lr.
      ASSERT_NEAR(lr.muon, 0.02 * expected / k.lr, 1e-6 * 0.02) << "step " << s << " of " << k.total;
    }
  }
  // Closed-form points of nanoGPT's schedule: the peak right after warm-up, the midpoint of the cosine halfway
  // between lr and min_lr, min_lr at the end.
  TrainConfig c;
  c.adamw.lr = 1e-3f, c.adamw.min_lr = 1e-4f, c.adamw.warmup_steps = 100, c.steps = 2000;
  EXPECT_FLOAT_EQ(learning_rates(c, 0).adamw, 1e-3f / 101);
  EXPECT_FLOAT_EQ(learning_rates(c, 100).adamw, 1e-3f);
  EXPECT_FLOAT_EQ(learning_rates(c, 1050).adamw, 5.5e-4f);
  EXPECT_FLOAT_EQ(learning_rates(c, 2000).adamw, 1e-4f);
  EXPECT_FLOAT_EQ(learning_rates(c, 1050).muon, 0.02f * 0.55f);  // the default Muon peak, at the cosine's middle
}

TEST(OptimizerClip, ScalesToTheLimitWhenItBinds) {
  std::vector<float> g = {3.0f, 0.0f, -4.0f};  // ‖g‖ = 5
  EXPECT_DOUBLE_EQ(clip_global_norm(g, 1.0f), 5.0);  // returns the norm before clipping
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.0f);
  EXPECT_FLOAT_EQ(g[2], -0.8f);
  EXPECT_NEAR(global_norm(g), 1.0, 1e-7);
}

// The norm of a model-sized vector, whose sum runs in vector lanes (and on two threads, split between them), against
// the sum of squares in double in index order. A length that is no multiple of any vector width leaves a tail.
TEST(OptimizerClip, GlobalNormOfALongVectorMatchesTheDoubleSum) {
  const int saved = default_threads();
  Rng rng(5);
  for (size_t n : {(size_t)1000, (size_t)100003}) {
    std::vector<float> g(n);
    for (float& x : g) x = (float)rng.normal();
    g[n - 1] = 300.0f;  // the tail's last element, big enough that leaving it out shows
    double sum = 0;
    for (float x : g) sum += (double)x * x;
    for (int threads : {1, 2}) {
      set_threads(threads);
      EXPECT_NEAR(global_norm(g), std::sqrt(sum), 1e-12 * std::sqrt(sum)) << "n " << n << ", threads " << threads;
    }
  }
  set_threads(saved);
}

TEST(OptimizerClip, LeavesTheGradientAloneWhenItDoesNotBindOrIsOff) {
  for (float limit : {1.0f, 0.5f, 0.0f}) {  // below the limit, exactly at it, clipping off
    std::vector<float> g = {0.3f, -0.4f};  // ‖g‖ = 0.5
    const std::vector<float> before = g;
    EXPECT_NEAR(clip_global_norm(g, limit), 0.5, 1e-7);
    EXPECT_EQ(g, before) << "limit " << limit;
  }
  std::vector<float> big = {300.0f, -400.0f};
  clip_global_norm(big, 0.0f);
  EXPECT_EQ(big, (std::vector<float>{300.0f, -400.0f})) << "a limit of 0 turns clipping off";
}

// The table's rule for decay, stated independently: every 2-D weight (embeddings and linear weights), nothing else.
TEST(OptimizerAdamW, DecayIsMarkedOnExactlyTheTwoDimensionalWeights) {
  auto model = small_gpt();
  int decayed = 0, kept = 0;
  for (const TensorSpec& t : model->table()) {
    EXPECT_EQ(t.weight_decay, t.shape.size() == 2) << t.name;
    (t.weight_decay ? decayed : kept)++;
  }
  EXPECT_EQ(decayed, 2 + 2 * 4);  // wte, wpe; per layer c_attn, attn.c_proj, c_fc, mlp.c_proj
  EXPECT_EQ(kept, 2 + 2 * 8);     // ln_f; per layer ln_1, ln_2 (weight, bias) and four linear biases
}

TEST(OptimizerAdamW, StepsMatchTheFormulaOnEveryKindOfTensor) {
  struct Case { const char* name; float beta1, beta2, weight_decay, grad_clip; };
  // β1 = 0.8, β2 = 0.95: (1−β1)/√(1−β2) ≠ 1, so a missing bias correction shows from the first step.
  for (const Case& k : {Case{"defaults", 0.9f, 0.99f, 0.1f, 1.0f}, Case{"other betas", 0.8f, 0.95f, 0.5f, 1.0f},
                        Case{"no clipping", 0.8f, 0.95f, 0.5f, 0.0f}}) {
    SCOPED_TRACE(k.name);
    auto model = small_gpt();
    AdamWConfig c;
    c.lr = 1e-2f, c.min_lr = 1e-3f, c.warmup_steps = 2, c.beta1 = k.beta1, c.beta2 = k.beta2, c.eps = 1e-8f;
    c.weight_decay = k.weight_decay, c.grad_clip = k.grad_clip;
    const int total = 7;

    ReferenceAdamW ref;
    ref.theta.assign(model->params_memory().begin(), model->params_memory().end());
    ref.m.assign(ref.theta.size(), 0.0), ref.v.assign(ref.theta.size(), 0.0);
    ref.decays.assign(ref.theta.size(), false);
    for (const TensorSpec& t : model->table())
      for (size_t i = 0; i < t.numel; i++) ref.decays[t.offset + i] = t.shape.size() == 2;

    AdamW adamw;
    Rng rng(42);
    const double n = double(model->params_memory().size());
    for (int step = 0; step < total; step++) {
      // A gradient of global norm 3 on even steps (clipping to 1 binds) and 0.4 on odd ones (it does not).
      const double target_norm = step % 2 == 0 ? 3.0 : 0.4;
      std::vector<float> g(model->params_memory().size());
      for (float& x : g) x = float(rng.normal() * target_norm / std::sqrt(n));
      std::copy(g.begin(), g.end(), model->grads_memory().begin());

      const double norm = clip_global_norm(model->grads_memory(), c.grad_clip);
      TrainConfig schedule;
      schedule.adamw = c, schedule.steps = total;
      adamw.update(*model, c, learning_rates(schedule, step).adamw);
      const double ref_norm = ref.step(g, c, reference_lr(c.lr, c.min_lr, c.warmup_steps, step, total));

      ASSERT_NEAR(norm, ref_norm, 1e-9 * ref_norm) << "step " << step;
      ASSERT_EQ(adamw.t, step + 1);
      // Float against double: a few float roundings per step on numbers of size |θ| and lr (the update divides m̂
      // by √v̂, so it carries m's relative error); m and v are sums that may cancel, so their error is measured
      // against the largest moment in the arena.
      double max_m = 0, max_v = 0;
      for (size_t i = 0; i < ref.m.size(); i++) max_m = std::max(max_m, std::fabs(ref.m[i])), max_v = std::max(max_v, ref.v[i]);
      for (const TensorSpec& t : model->table())
        for (size_t i = 0; i < t.numel; i++) {
          const size_t at = t.offset + i;
          const double expected = ref.theta[at], got = model->params_memory()[at];
          ASSERT_NEAR(got, expected, 1e-5 * (std::fabs(expected) + c.lr))
              << t.name << "[" << i << "] after step " << step << " (decayed: " << t.weight_decay << ")";
          ASSERT_NEAR(adamw.m[at], ref.m[at], 1e-5 * max_m) << t.name << " m";
          ASSERT_NEAR(adamw.v[at], ref.v[at], 1e-5 * max_v) << t.name << " v";
        }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Muon (optim/muon.h): NS5 against the double-precision textbook (src/textbook/reference.h) and against its closed
// form on matrices of known SVD; the whole step on a GPT's arena against ref_muon_step and the AdamW above.

namespace {

std::vector<float> random_matrix(int rows, int cols, double scale, Rng& rng) {
  std::vector<float> u((size_t)rows * cols);
  for (float& x : u) x = float(scale * rng.normal());
  return u;
}

// An r × k matrix (k ≤ r) with orthonormal columns: Gram–Schmidt (twice, for double's full accuracy) on normal draws.
std::vector<double> orthonormal_columns(int r, int k, Rng& rng) {
  std::vector<double> q((size_t)r * k);
  for (double& x : q) x = rng.normal();
  for (int j = 0; j < k; j++)
    for (int pass = 0; pass < 2; pass++) {
      for (int p = 0; p < j; p++) {
        double dot = 0;
        for (int i = 0; i < r; i++) dot += q[i * k + j] * q[i * k + p];
        for (int i = 0; i < r; i++) q[i * k + j] -= dot * q[i * k + p];
      }
      double norm = 0;
      for (int i = 0; i < r; i++) norm += q[i * k + j] * q[i * k + j];
      for (int i = 0; i < r; i++) q[i * k + j] /= std::sqrt(norm);
    }
  return q;
}

// φ⁵(x), the quintic of one NS5 round applied five times: what NS5 does to each singular value.
double quintic5(double x) {
  for (int round = 0; round < 5; round++) x = 3.4445 * x - 4.7750 * x * x * x + 2.0315 * x * x * x * x * x;
  return x;
}

// An upper bound on the largest eigenvalue of a symmetric positive semi-definite n × n matrix M: with k = 2^s,
// λmax^k ≤ tr(M^k) = Σ λᵢ^k ≤ n·λmax^k, so λmax ≤ tr(M^k)^(1/k) ≤ n^(1/k)·λmax. M^k by s squarings, rescaled to
// trace 1 after each (the log of the scale is carried) so nothing overflows.
double largest_eigenvalue_bound(std::vector<double> M, int n, int squarings = 8) {
  double log_scale = 0;  // M^k = P·exp(log_scale), P the current matrix
  std::vector<double> P2((size_t)n * n);
  for (int s = 0; s <= squarings; s++) {
    if (s > 0) {
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
          double x = 0;
          for (int l = 0; l < n; l++) x += M[i * n + l] * M[l * n + j];
          P2[i * n + j] = x;
        }
      M.swap(P2);
      log_scale *= 2;
    }
    double trace = 0;
    for (int i = 0; i < n; i++) trace += M[i * n + i];
    for (double& x : M) x /= trace;
    log_scale += std::log(trace);
  }
  return std::exp(log_scale / std::pow(2.0, squarings));
}

}  // namespace

// Which tensors Muon takes, stated independently of muon_updates: by name, the four linear weights of each block.
TEST(OptimizerMuon, TakesExactlyTheBlocksLinearWeights) {
  auto model = small_gpt();
  int muon = 0;
  for (const TensorSpec& t : model->table()) {
    bool linear_weight = false;
    for (const char* suffix : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
      linear_weight = linear_weight || (t.name.rfind("h.", 0) == 0 && t.name.size() > std::strlen(suffix) &&
                                        t.name.substr(t.name.size() - std::strlen(suffix)) == suffix);
    EXPECT_EQ(muon_updates(t), linear_weight) << t.name;
    muon += linear_weight;
  }
  EXPECT_EQ(muon, 2 * 4);  // wte, wpe, biases and LayerNorm stay with AdamW
}

// Wide, tall and square, at gradient-like and large scales: the float NS5 against the double textbook (13 × 13 and
// 20 × 12 go round one round at a time, the others in phases on their Gram matrix: muon.cpp).
TEST(OptimizerMuon, NewtonSchulzMatchesTheDoubleReference) {
  struct Case { int rows, cols; double scale; };
  Rng rng(3);
  for (const Case& k :
       {Case{7, 19, 1e-3}, Case{19, 7, 1e-3}, Case{13, 13, 1.0}, Case{20, 12, 1.0}, Case{24, 96, 10.0},
        Case{96, 24, 1e-2}}) {
    SCOPED_TRACE(std::to_string(k.rows) + "×" + std::to_string(k.cols));
    const std::vector<float> u = random_matrix(k.rows, k.cols, k.scale, rng);
    std::vector<float> out(u.size()), scratch(newton_schulz5_scratch(k.rows, k.cols));
    newton_schulz5(out.data(), u.data(), k.rows, k.cols, scratch.data());
    const std::vector<double> ud(u.begin(), u.end());
    std::vector<double> expected(u.size());
    ref_newton_schulz5(expected.data(), ud.data(), k.rows, k.cols);
    // Entries are about 1/√min(rows, cols) at most (singular values ≈ 1). Float rounds each of the 15 products'
    // sums (up to 96 terms) at 6e-8 relative, and a round can stretch an error by its slope (up to a = 3.4 near
    // σ = 0): measured ≤ 9e-7 here, so 1e-5. A wrong sign, index or coefficient moves entries by 1e-2 or more.
    double worst = 0;
    for (size_t i = 0; i < u.size(); i++) worst = std::max(worst, std::fabs(out[i] - expected[i]));
    EXPECT_LT(worst, 1e-5);
    double size = 0;
    for (double x : expected) size = std::max(size, std::fabs(x));
    EXPECT_GT(size, 0.1) << "the output is not near zero (the comparison is not between two empty matrices)";
  }
}

// The closed form, independent of the textbook: for U = P·diag(s)·Qᵀ (P, Q orthonormal columns), every round maps
// each singular value σ to φ(σ) = aσ + bσ³ + cσ⁵ and keeps P and Q, so NS5(U) = P·diag(φ⁵(sᵢ/(‖s‖ + 1e-7)))·Qᵀ.
// 6 × 10 goes round one round at a time and 6 × 16 in phases on its Gram matrix (muon.cpp), each also transposed.
TEST(OptimizerMuon, NewtonSchulzMapsEachSingularValueByTheQuintic) {
  for (int c : {10, 16}) {
    const int r = 6, k = 6;
    SCOPED_TRACE("6×" + std::to_string(c));
    const std::vector<double> s = {3.0, 1.0, 0.5, 0.2, 0.05, 0.01};  // ‖s‖ ≈ 3.2: σ/‖s‖ from 0.94 down to 0.003
    Rng rng(11);
    const std::vector<double> P = orthonormal_columns(r, k, rng), Q = orthonormal_columns(c, k, rng);
    double norm = 0;
    for (double x : s) norm += x * x;
    norm = std::sqrt(norm);
    std::vector<float> u((size_t)r * c);
    std::vector<double> expected((size_t)r * c);
    for (int i = 0; i < r; i++)
      for (int j = 0; j < c; j++) {
        double x = 0, y = 0;
        for (int l = 0; l < k; l++) {
          x += P[i * k + l] * s[l] * Q[j * k + l];
          y += P[i * k + l] * quintic5(s[l] / (norm + 1e-7)) * Q[j * k + l];
        }
        u[i * c + j] = float(x), expected[i * c + j] = y;
      }
    std::vector<float> scratch(newton_schulz5_scratch(r, c));
    // As given (wide), and transposed (tall: NS5(Uᵀ) = NS5(U)ᵀ).
    for (bool tall : {false, true}) {
      SCOPED_TRACE(tall ? "tall" : "wide");
      const int rows = tall ? c : r, cols = tall ? r : c;
      std::vector<float> in(u.size()), out(u.size());
      for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) in[tall ? j * r + i : i * c + j] = u[i * c + j];
      newton_schulz5(out.data(), in.data(), rows, cols, scratch.data());
      for (int i = 0; i < r; i++)
        // Float rounding of u and of the rounds, as in the test above: measured 1.3e-6 for 6 × 10, 2.8e-6 for 6 × 16
        // (one phase of 5 rounds, or 1 + 4, errs by more than 5e-6 on 6 × 16: docs/testing.md).
        for (int j = 0; j < c; j++)
          EXPECT_NEAR(out[tall ? j * r + i : i * c + j], expected[i * c + j], 5e-6) << "(" << i << ", " << j << ")";
    }
  }
}

// What NS5 is for: its output's singular values lie near 1 ([0.68, 1.21] for inputs whose σ/‖U‖_F ≥ 0.002, as a
// Gaussian matrix's are: muon.h), checked here with proven bounds on the eigenvalues σ² of G = O·Oᵀ (smaller
// side): λmax(G) ≤ bound(G), and λmin(G) ≥ c − bound(c·I − G) for any c ≥ λmax (c·I − G is then semi-definite).
// The bounds give away at most 32^(1/256) ≈ 1.4% on λ (measured here: σ ≥ 0.680, σ ≤ 1.045).
TEST(OptimizerMuon, OutputSingularValuesLieNearOne) {
  Rng rng(5);
  for (bool tall : {false, true}) {
    SCOPED_TRACE(tall ? "96×32" : "32×96");
    const int n = 32, m = 96, rows = tall ? m : n, cols = tall ? n : m;
    const std::vector<float> u = random_matrix(rows, cols, 0.02, rng);
    std::vector<float> o(u.size()), scratch(newton_schulz5_scratch(rows, cols));
    newton_schulz5(o.data(), u.data(), rows, cols, scratch.data());
    std::vector<double> G((size_t)n * n, 0.0);  // O·Oᵀ (wide) or Oᵀ·O (tall): n × n
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        for (int l = 0; l < m; l++)
          G[i * n + j] += tall ? double(o[l * cols + i]) * o[l * cols + j] : double(o[i * cols + l]) * o[j * cols + l];
    const double top = largest_eigenvalue_bound(G, n);
    std::vector<double> flipped = G;
    for (double& x : flipped) x = -x;
    for (int i = 0; i < n; i++) flipped[i * n + i] += top;
    const double bottom = top - largest_eigenvalue_bound(flipped, n);
    EXPECT_LE(std::sqrt(top), 1.22);
    EXPECT_GE(std::sqrt(std::max(bottom, 0.0)), 0.67);
  }
}

// The whole step on a GPT's arena (2 layers, 8 wide: c_attn 8×24 and c_fc 8×32 wide, attn.c_proj 8×8 square,
// mlp.c_proj 32×8 tall), several steps with momentum, clipping that binds and that does not: Muon's tensors against
// ref_muon_step in double, every other tensor against the double AdamW above with the same clipped gradient.
TEST(OptimizerMuon, StepsMatchTheFormulaOnEveryKindOfTensor) {
  for (float momentum : {0.95f, 0.5f}) {
    SCOPED_TRACE("momentum " + std::to_string(momentum));
    auto model = small_gpt();
    AdamWConfig c;
    c.lr = 1e-2f, c.min_lr = 1e-3f, c.warmup_steps = 2, c.beta1 = 0.8f, c.beta2 = 0.95f, c.eps = 1e-8f;
    c.weight_decay = 0.5f, c.grad_clip = 1.0f;
    MuonConfig mc;
    mc.lr = 0.05f, mc.momentum = momentum;
    const int total = 6;

    ReferenceAdamW ref;
    ref.theta.assign(model->params_memory().begin(), model->params_memory().end());
    ref.m.assign(ref.theta.size(), 0.0), ref.v.assign(ref.theta.size(), 0.0);
    ref.decays.assign(ref.theta.size(), false), ref.skip.assign(ref.theta.size(), false);
    std::vector<double> buf(ref.theta.size(), 0.0);  // Muon's momentum, same layout
    for (const TensorSpec& t : model->table())
      for (size_t i = 0; i < t.numel; i++) {
        ref.decays[t.offset + i] = t.shape.size() == 2;
        ref.skip[t.offset + i] = muon_updates(t);
      }

    TrainConfig schedule;
    schedule.adamw = c, schedule.muon = mc, schedule.steps = total;
    Replicas one(*model, 1);
    AdamW state;
    Learner learner{one, OptimizerKind::Muon, state};
    Rng rng(42);
    const double n = double(model->params_memory().size());
    for (int step = 0; step < total; step++) {
      const double target_norm = step % 2 == 0 ? 3.0 : 0.4;  // clipping to 1 binds on even steps
      std::vector<float> g(model->params_memory().size());
      for (float& x : g) x = float(rng.normal() * target_norm / std::sqrt(n));
      std::copy(g.begin(), g.end(), model->grads_memory().begin());
      clip_global_norm(model->grads_memory(), c.grad_clip);
      update_weights(learner, schedule, learning_rates(schedule, step));  // AdamW's tensors and Muon's

      const double lr = reference_lr(c.lr, c.min_lr, c.warmup_steps, step, total), muon_lr = lr * mc.lr / c.lr;
      const double norm = ref.step(g, c, lr);  // the AdamW tensors; returns the norm before clipping
      const double clip = norm > c.grad_clip ? c.grad_clip / norm : 1.0;
      for (const TensorSpec& t : model->table()) {
        if (!muon_updates(t)) continue;
        std::vector<double> clipped(t.numel);
        for (size_t i = 0; i < t.numel; i++) clipped[i] = g[t.offset + i] * clip;
        ref_muon_step(&ref.theta[t.offset], &buf[t.offset], clipped.data(), int(t.shape[0]), int(t.shape[1]),
                      muon_lr, double(momentum), double(c.weight_decay));
      }

      ASSERT_EQ(state.t, step + 1);
      for (const TensorSpec& t : model->table())
        for (size_t i = 0; i < t.numel; i++) {
          const size_t at = t.offset + i;
          const double expected = ref.theta[at], got = model->params_memory()[at];
          if (muon_updates(t)) {
            // NS5's float error (1e-5 at most, test above) times η ≤ 0.05 and the scale ≤ 2 (measured: 8e-8).
            ASSERT_NEAR(got, expected, 1e-6) << t.name << "[" << i << "] after step " << step;
            ASSERT_NEAR(state.m[at], buf[at], 1e-6 * (1 + std::fabs(buf[at]))) << t.name << " momentum";
            ASSERT_EQ(state.v[at], 0.0f) << t.name << ": v is unused for a Muon tensor";
          } else {
            ASSERT_NEAR(got, expected, 1e-5 * (std::fabs(expected) + c.lr))
                << t.name << "[" << i << "] after step " << step;
          }
        }
    }
  }
}

// Threads take whole matrices, each with single-threaded sgemm: one thread and two give the same bits.
TEST(OptimizerMuon, TheStepDoesNotDependOnTheThreadCount) {
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2}) {
    set_threads(threads);
    auto model = small_gpt();
    Rng rng(9);
    for (float& x : model->grads_memory()) x = float(0.01 * rng.normal());
    Muon muon;
    std::vector<float> momentum(model->num_params(), 0.0f);
    for (int step = 0; step < 3; step++) muon.update(*model, momentum, 0.95f, 0.1f, 1e-3f);
    results.push_back(model->params_memory().to_vector());
  }
  set_threads(1);
  EXPECT_EQ(results[0], results[1]);
}

// ---------------------------------------------------------------------------------------------------------------
// Top-k and top-p. The kept set is read off many draws: every kept token has probability ≥ 1/8 and appears in
// 4000 draws (missing one has probability < 1e-200); a token outside the set must never appear.

namespace {

std::map<int, int> draws_of(const std::vector<float>& logits, const SamplingOptions& o, int draws = 4000) {
  Rng rng(7);
  std::vector<std::pair<float, int>> scratch;
  std::map<int, int> counts;
  for (int i = 0; i < draws; i++) counts[sample_token(logits.data(), int(logits.size()), o, rng, scratch)]++;
  return counts;
}

std::set<int> kept_set(const std::vector<float>& logits, const SamplingOptions& o) {
  std::set<int> kept;
  for (const auto& [token, count] : draws_of(logits, o)) kept.insert(token);
  return kept;
}

}  // namespace

TEST(SamplerCutoffs, TopKBreaksTiesByTokenId) {
  // Three tokens tie for the top; k = 2 keeps the two with the lower ids.
  EXPECT_EQ(kept_set({1.0f, 3.0f, 3.0f, 3.0f, 0.0f}, {1.0f, 2, 1.0f}), (std::set<int>{1, 2}));
  EXPECT_EQ(kept_set({1.0f, 3.0f, 3.0f, 3.0f, 0.0f}, {1.0f, 4, 1.0f}), (std::set<int>{0, 1, 2, 3}));
}

TEST(SamplerCutoffs, TopKAtOrAboveTheVocabularyKeepsEveryToken) {
  const std::vector<float> logits = {0.5f, 0.0f, -0.5f, 1.0f};
  for (int k : {4, 5, 1000, 0}) EXPECT_EQ(kept_set(logits, {1.0f, k, 1.0f}), (std::set<int>{0, 1, 2, 3})) << k;
  // and in proportion to the softmax: p = e^z / Σ e^z
  const std::map<int, int> counts = draws_of(logits, {1.0f, 1000, 1.0f}, 40000);
  double total = 0;
  for (float z : logits) total += std::exp(double(z));
  for (int v = 0; v < 4; v++) {
    const double p = std::exp(double(logits[v])) / total, se = std::sqrt(p * (1 - p) / 40000);
    EXPECT_NEAR(counts.at(v) / 40000.0, p, 5 * se) << "token " << v;
  }
}

TEST(SamplerCutoffs, TopPStopsWhereTheMassReachesPExactly) {
  // Four equal logits: every probability is exactly 1/4 (e^0 = 1, sums of quarters are exact), so the running
  // mass hits 0.5 and 0.75 exactly. The nucleus is the shortest prefix whose mass reaches p (≥, not >).
  const std::vector<float> flat = {0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(kept_set(flat, {1.0f, 0, 0.25f}), (std::set<int>{0}));
  EXPECT_EQ(kept_set(flat, {1.0f, 0, 0.5f}), (std::set<int>{0, 1}));
  EXPECT_EQ(kept_set(flat, {1.0f, 0, 0.75f}), (std::set<int>{0, 1, 2}));
  EXPECT_EQ(kept_set(flat, {1.0f, 0, 1.0f}), (std::set<int>{0, 1, 2, 3}));
  // Just past a boundary takes one more token; just below it does not.
  EXPECT_EQ(kept_set(flat, {1.0f, 0, 0.5000001f}), (std::set<int>{0, 1, 2}));
  EXPECT_EQ(kept_set(flat, {1.0f, 0, 0.4999999f}), (std::set<int>{0, 1}));
}

TEST(SamplerCutoffs, TopPIsMeasuredWithinTheTopK) {
  // Eight equal logits, k = 4: after top-k each kept token has probability 1/4, so p = 0.5 keeps two (measured
  // against all eight, p = 0.5 would keep four).
  const std::vector<float> flat(8, 0.0f);
  EXPECT_EQ(kept_set(flat, {1.0f, 4, 0.5f}), (std::set<int>{0, 1}));
  EXPECT_EQ(kept_set(flat, {1.0f, 0, 0.5f}), (std::set<int>{0, 1, 2, 3}));
  // A skewed distribution: probabilities 1/2, 1/4, 1/8, 1/8 up to float rounding (logits ln 4, ln 2, 0, 0);
  // p = 0.7 needs the first two (0.75), p = 0.8 the first three.
  const std::vector<float> skewed = {float(std::log(4.0)), float(std::log(2.0)), 0.0f, 0.0f};
  EXPECT_EQ(kept_set(skewed, {1.0f, 0, 0.7f}), (std::set<int>{0, 1}));
  EXPECT_EQ(kept_set(skewed, {1.0f, 0, 0.8f}), (std::set<int>{0, 1, 2}));
  // and the kept tokens are drawn in proportion, renormalised: 2/3 and 1/3
  const std::map<int, int> counts = draws_of(skewed, {1.0f, 0, 0.7f}, 40000);
  EXPECT_NEAR(counts.at(0) / 40000.0, 2.0 / 3, 5 * std::sqrt(2.0 / 9 / 40000));
}
