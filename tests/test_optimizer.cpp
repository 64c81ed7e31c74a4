// The training step after the backward, and the sampler's cut-offs, against their formulas written out here:
//   OptimizerSchedule  the warm-up + cosine learning rate at every step
//   OptimizerClip      global-norm clipping when it binds, when it does not, and when it is off
//   OptimizerAdamW     several AdamW steps on a whole GPT's parameter arena (tensors of every kind) against a
//                      double-precision AdamW written below: bias-corrected moments, decoupled weight decay on the
//                      2-D weights only, the learning rate of that step, clipping by the global norm
//   SamplerCutoffs     top-k and top-p on distributions whose kept set is known exactly (ties, p hitting a
//                      boundary exactly, k ≥ V, top-p measured within the top k)
// Each of these went red when the code was broken on purpose (README "Tests": how to see that a test can fail).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/rng.h"
#include "generate/sampling.h"
#include "model/adamw.h"
#include "model/model.h"
#include "model/params.h"

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
  int t = 0;

  double step(const std::vector<float>& raw_grad, const AdamWConfig& c, double lr) {
    double sum = 0;
    for (float g : raw_grad) sum += double(g) * double(g);
    const double norm = std::sqrt(sum);
    const double scale = c.grad_clip > 0 && norm > c.grad_clip ? c.grad_clip / norm : 1.0;
    t += 1;
    const double b1 = c.beta1, b2 = c.beta2;
    for (size_t i = 0; i < theta.size(); i++) {
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
    AdamWConfig c;
    c.lr = k.lr, c.min_lr = k.min_lr, c.warmup_steps = k.warmup;
    for (int s = 0; s <= k.total + 3; s++)
      ASSERT_NEAR(learning_rate(c, s, k.total), reference_lr(k.lr, k.min_lr, k.warmup, s, k.total), 1e-6 * k.lr)
          << "step " << s << " of " << k.total << ", warm-up " << k.warmup;
  }
  // Closed-form points of nanoGPT's schedule: the peak right after warm-up, the midpoint of the cosine halfway
  // between lr and min_lr, min_lr at the end.
  AdamWConfig c;
  c.lr = 1e-3f, c.min_lr = 1e-4f, c.warmup_steps = 100;
  EXPECT_FLOAT_EQ(learning_rate(c, 0, 2000), 1e-3f / 101);
  EXPECT_FLOAT_EQ(learning_rate(c, 100, 2000), 1e-3f);
  EXPECT_FLOAT_EQ(learning_rate(c, 1050, 2000), 5.5e-4f);
  EXPECT_FLOAT_EQ(learning_rate(c, 2000, 2000), 1e-4f);
}

TEST(OptimizerClip, ScalesToTheLimitWhenItBinds) {
  std::vector<float> g = {3.0f, 0.0f, -4.0f};  // ‖g‖ = 5
  EXPECT_DOUBLE_EQ(clip_global_norm(g, 1.0f), 5.0);  // returns the norm before clipping
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.0f);
  EXPECT_FLOAT_EQ(g[2], -0.8f);
  EXPECT_NEAR(global_norm(g), 1.0, 1e-7);
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
      const float lr = learning_rate(c, step, total);
      adamw.update(*model, c, lr);
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
