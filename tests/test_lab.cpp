// The attention lab: head-type scores on hand-built patterns with known answers, the OV copying score on
// hand-built circuits, head gates (gradient vs finite differences, ξ = 0 vs deleting the head's weights), the
// attention dump's JSON, the attention statistics against closed forms, --attn-scale, pruning helpers and
// ./inspect end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "lab/attention_stats.h"
#include "io/checkpoint.h"
#include "train/evaluate.h"
#include "lab/head_scores.h"
#include "lab/html_report.h"
#include "lab/plot.h"
#include "model/model.h"
#include "program_util.h"
#include "lab/pruning.h"
#include "lab/seeds.h"
#include "lab/table_file.h"
#include "base/rng.h"
#include "test_util.h"
#include "data/tokenizer.h"
#include "train/trainer.h"
#include "data/utf8.h"

namespace {

// T × T pattern with P[i][f(i)] = 1.
std::vector<float> one_hot_pattern(int T, const std::function<int(int)>& target) {
  std::vector<float> P((size_t)T * T, 0.0f);
  for (int i = 0; i < T; i++) P[(size_t)i * T + target(i)] = 1.0f;
  return P;
}

std::vector<float> uniform_causal(int T) {
  std::vector<float> P((size_t)T * T, 0.0f);
  for (int i = 0; i < T; i++)
    for (int j = 0; j <= i; j++) P[(size_t)i * T + j] = 1.0f / (i + 1);
  return P;
}

// Tokens 0..n−1 then 0..n−1 again.
std::vector<int> repeated(int n) {
  std::vector<int> t;
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < n; k++) t.push_back(k);
  return t;
}

ModelConfig small_config(int L = 2, int NH = 2, int C = 8, int T = 8, int V = 7) {
  ModelConfig c;
  c.n_layer = L, c.n_head = NH, c.n_embd = C, c.block_size = T, c.vocab_size = V;
  return c;
}

// Every parameter uniform in [−a, a): large enough that heads matter and gradients are far from rounding noise.
void randomise(GPT& model, uint32_t seed, double a = 0.5) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-a, a);
  for (float& p : model.params_memory()) p = dist(rng);
}

std::vector<int> random_tokens(int n, int V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> t(n);
  for (int& x : t) x = (int)(rng() % V);
  return t;
}

}  // namespace

TEST(LabScores, PerfectPreviousTokenScoresOne) {
  const int T = 10;
  std::vector<float> P = one_hot_pattern(T, [](int i) { return i ? i - 1 : 0; });
  EXPECT_DOUBLE_EQ(previous_token_score(P.data(), T), 1.0);
  // A self-attending pattern has no mass on i − 1.
  std::vector<float> self = one_hot_pattern(T, [](int i) { return i; });
  EXPECT_DOUBLE_EQ(previous_token_score(self.data(), T), 0.0);
}

TEST(LabScores, UniformCausalAttentionHasTheExpectedScores) {
  const int T = 12;
  std::vector<float> P = uniform_causal(T);
  HeadScores s;
  score_pattern(s, P.data(), nullptr, T, AttentionMask{});
  double prev = 0, distance = 0;
  for (int i = 1; i < T; i++) prev += 1.0 / (i + 1), distance += i / 2.0;  // Σ_j (i−j)/(i+1) = i/2
  prev /= T - 1, distance /= T - 1;
  EXPECT_NEAR(s.previous_token.value(), prev, 1e-7);
  EXPECT_NEAR(s.sink.value(), prev, 1e-7);  // mass on key 0 is 1/(i+1) too
  EXPECT_NEAR(s.distance.value(), distance, 1e-6);
  EXPECT_NEAR(s.entropy_norm.value(), 1.0, 1e-6);  // uniform over what it may see
  EXPECT_NEAR(s.confidence.value(), prev, 1e-7);
  EXPECT_EQ(s.previous_token.count, T - 1);
}

TEST(LabScores, InductionAndDuplicatePatternsOnRepeatedSequences) {
  const int n = 7, T = 2 * n;
  std::vector<int> tok = repeated(n);
  // Induction: second-half query i attends to i − n + 1, the token after the previous occurrence of its own.
  std::vector<float> ind = one_hot_pattern(T, [&](int i) { return i >= n ? i - n + 1 : i; });
  EXPECT_DOUBLE_EQ(induction_score(ind.data(), tok.data(), T), 1.0);
  EXPECT_DOUBLE_EQ(duplicate_token_score(ind.data(), tok.data(), T), 0.0);
  // Duplicate-token: attends to the earlier copy of itself, i − n.
  std::vector<float> dup = one_hot_pattern(T, [&](int i) { return i >= n ? i - n : i; });
  EXPECT_DOUBLE_EQ(duplicate_token_score(dup.data(), tok.data(), T), 1.0);
  EXPECT_DOUBLE_EQ(induction_score(dup.data(), tok.data(), T), 0.0);
  // Uniform: each second-half row (the only ones with a target) has one target among i + 1 keys.
  std::vector<float> uni = uniform_causal(T);
  double expected = 0;
  for (int i = n; i < T; i++) expected += 1.0 / (i + 1);
  expected /= n;
  EXPECT_NEAR(induction_score(uni.data(), tok.data(), T), expected, 1e-7);
  EXPECT_NEAR(duplicate_token_score(uni.data(), tok.data(), T), expected, 1e-7);
}

TEST(LabScores, RepeatedRandomSequencesAreDistinctRunsRepeatedTwice) {
  Rng rng(3);
  const int B = 5, n = 9, V = 11;
  std::vector<int> x = repeated_random_sequences(B, n, V, rng);
  ASSERT_EQ(x.size(), (size_t)B * 2 * n);
  for (int b = 0; b < B; b++) {
    std::vector<int> first(x.begin() + b * 2 * n, x.begin() + b * 2 * n + n);
    std::vector<int> second(x.begin() + b * 2 * n + n, x.begin() + (b + 1) * 2 * n);
    EXPECT_EQ(first, second);
    std::sort(first.begin(), first.end());
    EXPECT_EQ(std::unique(first.begin(), first.end()), first.end());
    EXPECT_GE(first.front(), 0);
    EXPECT_LT(first.back(), V);
  }
}

// OV circuit with W_V = W_O = ±I (one head as wide as the model, LayerNorm scales 1): A = ±W_Eᵀ·W_E, so every
// eigenvalue is ≥ 0 (copying = +1) or ≤ 0 (copying = −1).
TEST(LabScores, OvCopyingScoreOfIdentityAndNegatedCircuits) {
  ModelConfig c = small_config(1, 1, 4, 8, 6);
  for (float sign : {1.0f, -1.0f}) {
    GPT model(c);
    randomise(model, 5);
    const int C = c.n_embd;
    const BlockParams& p = model.params().h[0];
    float *qkv_w = testutil::qkv_weight(model, 0), *proj_w = testutil::proj_weight(model, 0);
    std::fill(p.ln_1_w, p.ln_1_w + C, 1.0f), std::fill(model.params().ln_f_w, model.params().ln_f_w + C, 1.0f);
    for (int r = 0; r < C; r++)
      for (int k = 0; k < C; k++) {
        qkv_w[(size_t)r * 3 * C + 2 * C + k] = r == k ? 1.0f : 0.0f;
        proj_w[(size_t)r * C + k] = r == k ? sign : 0.0f;
      }
    EXPECT_NEAR(ov_copying_score(model, 0, 0), sign, 1e-6);
  }
  // A rotation by 90° in every plane: eigenvalues ±i·λ, real parts 0.
  GPT model(c);
  randomise(model, 5);
  const BlockParams& p = model.params().h[0];
  const int C = c.n_embd;
  std::fill(p.ln_1_w, p.ln_1_w + C, 1.0f), std::fill(model.params().ln_f_w, model.params().ln_f_w + C, 1.0f);
  std::fill(model.params().wte, model.params().wte + (size_t)c.vocab_size * C, 0.0f);
  for (int k = 0; k < C; k++) model.params().wte[(size_t)k * C + k] = 1.0f;  // W_EᵀW_E = I
  float *qkv_w = testutil::qkv_weight(model, 0), *proj_w = testutil::proj_weight(model, 0);
  for (int r = 0; r < C; r++)
    for (int k = 0; k < C; k++) {
      qkv_w[(size_t)r * 3 * C + 2 * C + k] = r == k ? 1.0f : 0.0f;
      proj_w[(size_t)r * C + k] = (k == (r ^ 1)) ? (r % 2 ? -1.0f : 1.0f) : 0.0f;
    }
  EXPECT_NEAR(ov_copying_score(model, 0, 0), 0.0, 1e-6);
}

TEST(LabGates, GateGradientEqualsFiniteDifferences) {
  ModelConfig c = small_config();
  GPT model(c);
  randomise(model, 7);
  model.enable_head_gates();
  std::mt19937 rng(9);
  for (size_t i = 0; i < model.head_gates().size(); i++) model.set_head_gate(i, 0.6f + 0.8f * (float)(rng() % 1000) / 1000.0f);
  const int B = 2, T = 8;
  std::vector<int> x = random_tokens(B * T, c.vocab_size, 1), y = random_tokens(B * T, c.vocab_size, 2);
  model.zero_grad();
  model.forward(x.data(), y.data(), B, T);
  model.backward();
  std::vector<double> analytic(model.head_gate_grads().begin(), model.head_gate_grads().end());
  std::vector<double> gates(model.head_gates().begin(), model.head_gates().end());
  auto loss = [&]() {
    for (size_t i = 0; i < gates.size(); i++) model.set_head_gate(i, (float)gates[i]);
    return (double)model.forward(x.data(), y.data(), B, T);
  };
  std::vector<double> numeric = testutil::finite_differences(loss, gates.data(), gates.size(), 1e-2);
  EXPECT_GT(testutil::max_abs(analytic.data(), analytic.size()), 1e-3);  // the heads matter
  EXPECT_TRUE(testutil::all_close(analytic, numeric, 2e-2, 2e-4, "dL/dξ"));
}

TEST(LabGates, ZeroGateEqualsDeletingTheHeadsOutputWeights) {
  ModelConfig c = small_config();
  const int B = 2, T = 8, V = c.vocab_size, C = c.n_embd, HS = c.head_size();
  std::vector<int> x = random_tokens(B * T, V, 3);
  GPT gated(c), cut(c), full(c);
  for (GPT* m : {&gated, &cut, &full}) randomise(*m, 11);
  gated.enable_head_gates();
  gated.set_head_gate(1 * c.n_head + 0, 0.0f);  // L1H0
  for (int r = 0; r < HS; r++)  // rows of W_O that read head 0's output
    std::fill(testutil::proj_weight(cut, 1) + (size_t)r * C, testutil::proj_weight(cut, 1) + (size_t)(r + 1) * C, 0.0f);
  gated.forward(x.data(), nullptr, B, T);
  cut.forward(x.data(), nullptr, B, T);
  full.forward(x.data(), nullptr, B, T);
  std::vector<double> ref = testutil::to_double(cut.logits(), (size_t)B * T * V);
  EXPECT_TRUE(testutil::close_to_reference(gated.logits(), ref.data(), ref.size(), 1e-6, "ξ=0 vs W_O rows = 0"));
  double diff = 0;
  for (size_t i = 0; i < ref.size(); i++) diff = std::max(diff, std::fabs(full.logits()[i] - ref[i]));
  EXPECT_GT(diff, 1e-3) << "the head must have mattered for this test to mean anything";
}

TEST(LabGates, AblationIncreaseIsTheLossDifference) {
  ModelConfig c = small_config();
  GPT model(c);
  randomise(model, 13);
  std::vector<int> tokens = random_tokens(400, c.vocab_size, 4);
  EvalBatches e = make_eval_batches(tokens, 2, 3, 8, 5);
  std::vector<double> d = ablation_increase(model, e);
  const double base = gated_loss(model, e);
  model.set_head_gate(2, 0);
  EXPECT_NEAR(d[2], gated_loss(model, e) - base, 1e-6);
  model.set_head_gate(2, 1);
  std::vector<double> I = head_importance(model, e, true);
  for (int l = 0; l < c.n_layer; l++)
    EXPECT_NEAR(I[l * 2] * I[l * 2] + I[l * 2 + 1] * I[l * 2 + 1], 1.0, 1e-9);  // unit norm per layer
}

TEST(LabPrune, PruneSpecAndCurve) {
  std::vector<float> g = parse_prune_spec("L0H1,l1h0", 2, 2);
  EXPECT_EQ(g, (std::vector<float>{1, 0, 0, 1}));
  EXPECT_THROW(parse_prune_spec("L2H0", 2, 2), std::runtime_error);
  EXPECT_THROW(parse_prune_spec("head3", 2, 2), std::runtime_error);
  ModelConfig c = small_config(2, 4, 8, 8, 7);
  GPT model(c);
  randomise(model, 17);
  std::vector<int> tokens = random_tokens(400, c.vocab_size, 6);
  EvalBatches e = make_eval_batches(tokens, 2, 3, 8, 5);
  for (int64_t seed : {-1, 1}) {
    std::vector<PruneStep> curve = prune_curve(model, e, seed, 0.25);  // 8 heads, 2 per round, ≤ 7 removed
    ASSERT_EQ(curve.size(), 5u);
    EXPECT_EQ(curve.back().removed, 7);
    EXPECT_NEAR(curve[0].loss, gated_loss(model, e), 1e-6);  // gates restored afterwards
    // The loss at the last step is the loss with exactly the listed heads removed.
    model.set_head_gates(parse_prune_spec(curve.back().heads, 2, 4));
    EXPECT_NEAR(gated_loss(model, e), curve.back().loss, 1e-6);
    model.set_head_gates(std::vector<float>(model.head_gates().size(), 1.0f));
  }
}

TEST(LabAttention, JsonHasTheRightShapeAndRowsSumToOneOverAllowedKeys) {
  ModelConfig c = small_config(2, 2, 8, 16, 0);
  Tokenizer tok = Tokenizer::from_text(U"abcdefg <>\"/");
  c.vocab_size = tok.size();
  GPT model(c, {AttentionMask{}, AttentionMask::parse("window:3")});
  randomise(model, 19);
  std::vector<int> ids = tok.encode(U"a<b>\"c d</", "test");
  AttentionDump d = dump_attention(model, ids, tok);
  d.scores = score_heads(model, tok.num_chars(), 4, 1);
  nlohmann::json j = nlohmann::json::parse(attention_json(d));
  const size_t T = ids.size();
  ASSERT_EQ(j["tokens"].size(), T);
  EXPECT_EQ(j["tokens"][1], "<");
  ASSERT_EQ(j["attn"].size(), 2u);
  ASSERT_EQ(j["mask"].size(), 2u);
  EXPECT_EQ(j["masks"][1], "window:3");
  EXPECT_EQ(j["scores"].size(), 4u);
  for (int l = 0; l < 2; l++) {
    ASSERT_EQ(j["attn"][l].size(), 2u);
    for (int h = 0; h < 2; h++) {
      ASSERT_EQ(j["attn"][l][h].size(), T);
      for (size_t q = 0; q < T; q++) {
        ASSERT_EQ(j["attn"][l][h][q].size(), T);
        double sum = 0;
        for (size_t k = 0; k < T; k++) {
          const bool allowed = l == 0 ? k <= q : (k <= q && k + 3 > q);  // causal; window:3
          EXPECT_EQ(j["mask"][l][q][k].get<int>(), allowed ? 1 : 0) << l << " " << q << " " << k;
          const double p = j["attn"][l][h][q][k];
          if (allowed) sum += p;
          else EXPECT_EQ(p, 0.0);
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
  // The page holds the same data, and nothing in the prompt can close its script block early.
  const std::string html = attention_html(d, "t");
  EXPECT_EQ(progutil::occurrences(html, "</script>"), 2u);  // the data block's and the script's own
  const size_t data_start = html.find("id=\"data\">") + 10, data_end = html.find("</script>", data_start);
  nlohmann::json again = nlohmann::json::parse(html.substr(data_start, data_end - data_start));
  EXPECT_EQ(again["tokens"], j["tokens"]);
  EXPECT_EQ(again["attn"], j["attn"]);
}

// S = scale·q·k. "none" (scale 1) with W_Q, b_Q divided by √HS is the same function as "sqrt" (scale 1/√HS).
TEST(LabScale, AttnScaleNoneChangesTheForwardExactlyAsTheMathSays) {
  ModelConfig sqrt_cfg = small_config(2, 2, 8, 8, 7), none_cfg = sqrt_cfg;
  none_cfg.attn_scale = "none";
  GPT a(sqrt_cfg), b(none_cfg), plain(none_cfg);
  for (GPT* m : {&a, &b, &plain}) randomise(*m, 23, 1.0);
  EXPECT_FLOAT_EQ(a.mixer(0).lab().logit_scale(), 1.0f / std::sqrt(4.0f));
  EXPECT_FLOAT_EQ(b.mixer(0).lab().logit_scale(), 1.0f);
  const int C = 8;
  const float r = 1.0f / std::sqrt(4.0f);
  for (int l = 0; l < 2; l++) {
    for (int row = 0; row < C; row++)
      for (int col = 0; col < C; col++) testutil::qkv_weight(b, l)[(size_t)row * 3 * C + col] *= r;
    float* bias = b.parameter("h." + std::to_string(l) + ".attn.c_attn.bias");
    for (int col = 0; col < C; col++) bias[col] *= r;
  }
  const int B = 2, T = 8;
  std::vector<int> x = random_tokens(B * T, 7, 8);
  a.forward(x.data(), nullptr, B, T), b.forward(x.data(), nullptr, B, T), plain.forward(x.data(), nullptr, B, T);
  std::vector<double> ref = testutil::to_double(a.mixing_weights(1), (size_t)B * 2 * T * T);
  EXPECT_TRUE(testutil::close_to_reference(b.mixing_weights(1), ref.data(), ref.size(), 1e-5, "P, none vs sqrt"));
  double diff = 0;
  for (size_t i = 0; i < ref.size(); i++) diff = std::max(diff, std::fabs(plain.mixing_weights(1)[i] - ref[i]));
  EXPECT_GT(diff, 1e-2) << "without the rescaling, none must change the patterns";
}

// T = 2, one head of size 2, causal: logits S_00 = 0 (q_0 = 0), S_10 = s·a, S_11 = 0. Row 1 is the only row with a
// choice: P_10 = σ(s·a).
TEST(LabScale, AttentionStatisticsMatchClosedForms) {
  const int B = 1, T = 2, C = 2, NH = 1;
  const float a = 3.0f, scale = 0.5f;
  std::vector<float> qkv((size_t)B * T * 3 * C, 0.0f);
  // row t: [q(2) | k(2) | v(2)]
  qkv[0 * 6 + 2] = 1.0f;              // k_0 = (1, 0)
  qkv[1 * 6 + 0] = a;                 // q_1 = (a, 0)
  qkv[1 * 6 + 3] = 1.0f;              // k_1 = (0, 1)
  LayerAttentionStats s = layer_attention_stats(qkv.data(), AttentionMask{}, scale, B, T, C, NH);
  const double z = scale * a, mean = z / 3, var = (z * z) / 3 - mean * mean;
  const double p = 1 / (1 + std::exp(-z)), H = -p * std::log(p) - (1 - p) * std::log(1 - p);
  EXPECT_NEAR(s.logit_var, var, 1e-9);
  EXPECT_NEAR(s.logit_max, z, 1e-9);
  EXPECT_NEAR(s.entropy, H, 1e-9);
  EXPECT_NEAR(s.entropy_norm, H / std::log(2.0), 1e-9);
  EXPECT_NEAR(s.max_weight, p, 1e-9);
  EXPECT_EQ(s.saturated, 0.0);
  // A huge logit saturates the row.
  qkv[1 * 6 + 0] = 100.0f;
  EXPECT_EQ(layer_attention_stats(qkv.data(), AttentionMask{}, scale, B, T, C, NH).saturated, 1.0);
  // At init with scale 1/√HS, unit-variance q and k give logits of variance ≈ 1; scale 1 gives ≈ HS.
  const int HS = 64, TT = 32, CC = HS;
  std::mt19937 rng(1);
  std::normal_distribution<float> n01;
  std::vector<float> big((size_t)TT * 3 * CC);
  for (float& v : big) v = n01(rng);
  const double v_sqrt = layer_attention_stats(big.data(), AttentionMask{}, 1.0f / 8, 1, TT, CC, 1).logit_var;
  const double v_none = layer_attention_stats(big.data(), AttentionMask{}, 1.0f, 1, TT, CC, 1).logit_var;
  EXPECT_NEAR(v_sqrt, 1.0, 0.2);
  EXPECT_NEAR(v_none / v_sqrt, 64.0, 1e-3);
}

// Random q and k, several sequences and heads, causal and a window: every statistic against the definitions written
// out in double (logits q·k·scale, p = softmax over the row's keys, H = −Σ p log p), row by row.
TEST(LabScale, AttentionStatisticsMatchTheirDefinitions) {
  const int B = 3, T = 9, C = 8, NH = 2, HS = C / NH;
  const float scale = 0.7f;
  std::mt19937 rng(5);
  std::normal_distribution<float> n01;
  std::vector<float> qkv((size_t)B * T * 3 * C);
  for (float& v : qkv) v = 2 * n01(rng);
  for (const char* spelling : {"causal", "window:4"}) {
    SCOPED_TRACE(spelling);
    const AttentionMask mask = AttentionMask::parse(spelling);
    double sum = 0, sum_sq = 0, maxabs = 0, H_sum = 0, Hn_sum = 0, pmax_sum = 0, saturated = 0;
    long logits = 0, rows = 0;
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < T; i++) {
          const KeyRange K = mask.keys_for(i, T);
          std::vector<double> S;
          for (int j = K.begin; j < K.end; j++) {
            double dot = 0;
            for (int d = 0; d < HS; d++)
              dot += (double)qkv[((size_t)b * T + i) * 3 * C + h * HS + d] *
                     qkv[((size_t)b * T + j) * 3 * C + C + h * HS + d];
            S.push_back(scale * dot);
            sum += S.back(), sum_sq += S.back() * S.back(), maxabs = std::max(maxabs, std::fabs(S.back()));
            logits++;
          }
          if (S.size() < 2) continue;
          double z = 0, H = 0, pmax = 0;
          for (double x : S) z += std::exp(x);
          for (double x : S) {
            const double p = std::exp(x) / z;
            H -= p * std::log(p), pmax = std::max(pmax, p);
          }
          H_sum += H, Hn_sum += H / std::log((double)S.size()), pmax_sum += pmax, saturated += pmax > 0.99;
          rows++;
        }
    const LayerAttentionStats s = layer_attention_stats(qkv.data(), mask, scale, B, T, C, NH);
    const double mean = sum / logits;
    EXPECT_NEAR(s.logit_var, sum_sq / logits - mean * mean, 1e-9);
    EXPECT_NEAR(s.logit_max, maxabs, 1e-9);
    EXPECT_NEAR(s.entropy, H_sum / rows, 1e-9);
    EXPECT_NEAR(s.entropy_norm, Hn_sum / rows, 1e-9);
    EXPECT_NEAR(s.max_weight, pmax_sum / rows, 1e-9);
    EXPECT_NEAR(s.saturated, saturated / rows, 1e-12);
    EXPECT_GT(s.saturated, 0.0) << "some rows saturate, others do not: the test sees both";
    EXPECT_LT(s.saturated, 1.0);
  }
}

// Queries all zero (W_Q = 0, b_Q = 0) make every logit 0 whatever the keys are: attention is uniform and the loss
// does not depend on W_K at all, so ∂L/∂W_K = 0 exactly while ∂L/∂W_Q is not. Row i (causal) sees i + 1 keys.
TEST(LabScale, MeasureAttentionOnZeroQueries) {
  const int C = 8, T = 8, B = 2;
  GPT model(small_config(2, 2, C, T, 7));
  randomise(model, 31);
  float* qkv_w = testutil::qkv_weight(model, 1);
  float* qkv_b = model.parameter("h.1.attn.c_attn.bias");
  for (int r = 0; r < C; r++) std::fill(qkv_w + (size_t)r * 3 * C, qkv_w + (size_t)r * 3 * C + C, 0.0f);
  std::fill(qkv_b, qkv_b + C, 0.0f);
  std::vector<int> x = random_tokens(B * T, 7, 3), y = random_tokens(B * T, 7, 4);
  std::vector<LayerAttentionStats> s = measure_attention(model, x.data(), y.data(), B, T);
  ASSERT_EQ(s.size(), 2u);
  double mean_max = 0;
  for (int i = 1; i < T; i++) mean_max += 1.0 / (i + 1);
  mean_max /= T - 1;
  EXPECT_EQ(s[1].logit_var, 0.0);
  EXPECT_EQ(s[1].logit_max, 0.0);
  EXPECT_NEAR(s[1].entropy_norm, 1.0, 1e-6);
  EXPECT_NEAR(s[1].max_weight, mean_max, 1e-6);
  EXPECT_EQ(s[1].saturated, 0.0);
  EXPECT_EQ(s[1].grad_k, 0.0);
  EXPECT_GT(s[1].grad_q, 1e-4);
  EXPECT_GT(s[0].grad_k, 1e-4);  // layer 0 has real queries
  EXPECT_GT(s[0].logit_var, 0.0);
  // measure_attention leaves no gradient behind for the next training step.
  EXPECT_TRUE(std::all_of(model.grads_memory().begin(), model.grads_memory().end(), [](float g) { return g == 0; }));
}

// ./train's metrics.csv carries 8 columns per layer after step_ms, filled (finite) at every evaluation and empty
// elsewhere. Two runs that differ only in --attn-scale start from the same weights and measure the same batch, so
// layer 0's logits (its q, k come from the embeddings alone) differ by the factor HS between "none" (S = q·k) and
// "sqrt" (S = q·k/√HS): variance × HS, max |S| × √HS.
TEST(LabScale, TrainingLogsAttentionStatisticsAndScaleNoneMultipliesTheVarianceByHS) {
  progutil::TempDir dir;
  progutil::write_file(dir / "corpus.txt", progutil::generated_text(4000));
  auto run = [&](const std::string& scale) {
    TrainConfig c;
    c.data = dir / "corpus.txt", c.out = dir / scale;
    c.model.n_layer = 2, c.model.n_head = 2, c.model.n_embd = 16, c.model.block_size = 16;  // HS = 8
    c.model.attn_scale = scale;
    c.batch = 4, c.steps = 4, c.eval_every = 2, c.eval_iters = 1, c.ckpt_every = 0, c.threads = 1;
    c.adamw.warmup_steps = 1;
    TrainHooks hooks;  // as ./train plugs them in
    hooks.columns = {attention_stats_header, attention_stats_empty_cells, measure_attention_cells};
    run_training(c, nullptr, hooks);
    return progutil::read_csv(c.out + "/metrics.csv");
  };
  const std::vector<std::vector<std::string>> a = run("sqrt"), b = run("none");
  ASSERT_EQ(a.size(), 6u);  // header + steps 0 … 4
  const std::vector<std::string>& header = a[0];
  const size_t first = std::find(header.begin(), header.end(), "L0_logit_var") - header.begin();
  ASSERT_EQ(header.size(), first + 2 * 8 + 3) << "8 statistics per layer, then wall_s, muon_lr, val_windows (metrics_file.h)";
  EXPECT_EQ(header[first - 1], "step_ms");
  EXPECT_EQ(header[first + 2 * 8 - 1], "L1_grad_k");
  EXPECT_EQ(header[first + 2 * 8], "wall_s");
  for (int step = 0; step <= 4; step++) {
    const std::vector<std::string>& row = a[1 + step];
    ASSERT_EQ(row.size(), header.size());
    for (size_t k = first; k < first + 2 * 8; k++) {
      if (step % 2) {
        EXPECT_EQ(row[k], "") << header[k] << " at step " << step << ", which has no evaluation";
        continue;
      }
      const double v = std::stod(row[k]);
      EXPECT_TRUE(std::isfinite(v) && v >= 0) << header[k] << " = " << row[k] << " at step " << step;
    }
    if (step % 2) continue;
    for (int l = 0; l < 2; l++) {
      EXPECT_GT(std::stod(row[first + 8 * l + 6]), 0.0) << "grad_q of layer " << l;
      EXPECT_GT(std::stod(row[first + 8 * l + 7]), 0.0) << "grad_k of layer " << l;
      EXPECT_LE(std::stod(row[first + 8 * l + 3]), 1.0 + 1e-6) << "entropy / ln|K| of layer " << l;
    }
  }
  EXPECT_NEAR(std::stod(b[1][first]) / std::stod(a[1][first]), 8.0, 1e-3);                 // L0_logit_var, step 0
  EXPECT_NEAR(std::stod(b[1][first + 1]) / std::stod(a[1][first + 1]), std::sqrt(8.0), 1e-3);  // L0_logit_max
  EXPECT_LT(std::stod(b[1][first + 3]), std::stod(a[1][first + 3]));  // sharper logits, lower entropy / ln|K|
}

TEST(LabProgram, InspectWritesJsonHtmlAndHeadsCsv) {
  progutil::TempDir dir;
  ModelConfig c = small_config(2, 2, 8, 16, 0);
  Tokenizer tok = Tokenizer::from_text(U"abcdefghij .");
  c.vocab_size = tok.size();
  GPT model(c);
  model.init_weights(1);
  save_checkpoint(dir / "m.safetensors", model, tok, nullptr);
  ASSERT_TRUE(progutil::file_exists("./inspect")) << "build ./inspect first (make programs)";
  progutil::RunResult r = progutil::run_command(
      "./inspect attention --ckpt " + dir / "m.safetensors" + " --prompt 'abc dea.' --out " + dir / "a.html" +
          " --json " + dir / "a.json" + " --threads 1",
      dir.path());
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  nlohmann::json j = nlohmann::json::parse(progutil::read_file(dir / "a.json"));
  EXPECT_EQ(j["attn"].size(), 2u);
  EXPECT_EQ(j["attn"][1][1].size(), 8u);
  EXPECT_NE(progutil::read_file(dir / "a.html").find("data-status"), std::string::npos);
  r = progutil::run_command("./inspect heads --ckpt " + dir / "m.safetensors" + " --csv " + dir / "h.csv" +
                                " --antecedents /nonexistent --threads 1",
                            dir.path());
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  std::vector<std::vector<std::string>> rows = progutil::read_csv(dir / "h.csv");
  ASSERT_EQ(rows.size(), 5u);  // header + 4 heads
  EXPECT_EQ(rows[0][4], "induction");
  r = progutil::run_command("./inspect attention --ckpt " + dir / "m.safetensors" + " --prompt 'xyz' --json " +
                                dir / "b.json",
                            dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not in the model's vocabulary"), std::string::npos) << r.err;
}

TEST(LabProgram, SamplePruneRunsTheModelWithoutThoseHeads) {
  progutil::TempDir dir;
  ModelConfig c = small_config(2, 2, 8, 16, 0);
  Tokenizer tok = Tokenizer::from_text(U"abcdefghij .");
  c.vocab_size = tok.size();
  GPT model(c);
  randomise(model, 29);
  save_checkpoint(dir / "m.safetensors", model, tok, nullptr);
  const std::string text = "abc def. ghij abc def. ghij a bad cafe. hij ";
  progutil::write_file(dir / "t.txt", text);
  // The in-process reference: the same model with L0H1 and L1H0 gated to 0, scored the same way.
  std::vector<int> ids = tok.encode(utf8_decode(text, "t"), "t");
  model.enable_head_gates();
  model.set_head_gates({1, 0, 0, 1});
  char expected[64];
  std::snprintf(expected, sizeof expected, "%.4f nats/char", score_text(model, ids).nats_per_token);
  auto run = [&](const std::string& extra) {
    return progutil::run_command("./sample --ckpt " + dir / "m.safetensors" + " --score " + dir / "t.txt" +
                                     " --threads 1 " + extra, dir.path());
  };
  progutil::RunResult pruned = run("--prune L0H1,L1H0"), full = run("");
  ASSERT_EQ(pruned.exit_code, 0) << pruned.describe();
  EXPECT_NE(pruned.out.find(expected), std::string::npos) << pruned.out << " expected " << expected;
  EXPECT_NE(pruned.out.substr(0, pruned.out.find('\n')), full.out.substr(0, full.out.find('\n')));
  progutil::RunResult bad = run("--prune L2H0");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("no head L2H0"), std::string::npos) << bad.err;
}


// ---- charts (lab/plot.h) --------------------------------------------------------------------------------------

// The x coordinates of the first polyline of an SVG, in drawing order.
static std::vector<double> polyline_xs(const std::string& svg) {
  const size_t at = svg.find("points=\"", svg.find("<polyline")) + 8;
  std::vector<double> xs;
  std::string points = svg.substr(at, svg.find('"', at) - at);
  for (size_t pos = 0; pos < points.size();) {
    const size_t comma = points.find(',', pos), space = points.find(' ', comma);
    xs.push_back(std::stod(points.substr(pos, comma - pos)));
    pos = space + 1;
  }
  return xs;
}

TEST(LabPlot, LogAxisSpacesPowersOfTenEquallyAndTicksAtOneTwoFive) {
  Chart chart;
  chart.log_x = true;
  chart.series.push_back({"run", {1, 10, 100, 1000}, {3, 2, 1.5, 1.4}});
  const std::string svg = render_svg(chart);
  const std::vector<double> xs = polyline_xs(svg);
  ASSERT_EQ(xs.size(), 4u);
  EXPECT_NEAR(xs[1] - xs[0], xs[2] - xs[1], 0.2);  // a decade is a decade, wherever it is (0.1 px rounding)
  EXPECT_NEAR(xs[2] - xs[1], xs[3] - xs[2], 0.2);
  const std::string x_tick = "text-anchor=\"middle\">";  // x tick labels are centred under their tick
  for (const char* label : {"1<", "2<", "5<", "10<", "20<", "50<", "100<", "500<", "1000<"})
    EXPECT_CONTAINS(svg, x_tick + label);
  EXPECT_EQ(svg.find(x_tick + "3<"), std::string::npos) << "a log axis has no tick at 3";
  // x ≤ 0 has no place on a log axis: skipped, never a NaN coordinate.
  chart.series[0].x[0] = 0;
  EXPECT_EQ(render_svg(chart).find("nan"), std::string::npos);
  EXPECT_EQ(polyline_xs(render_svg(chart)).size(), 3u);
}

TEST(LabPlot, LinearAxisXsAreProportionalAndZeroTickIsZero) {
  Chart chart;
  chart.series.push_back({"run", {0, 1, 3}, {-0.6, 0.1, 0.2}});
  const std::string svg = render_svg(chart);
  const std::vector<double> xs = polyline_xs(svg);
  ASSERT_EQ(xs.size(), 3u);
  EXPECT_NEAR(xs[2] - xs[1], 2 * (xs[1] - xs[0]), 0.3);
  EXPECT_CONTAINS(svg, ">0<");  // the y tick at zero, reached by adding 0.2 three times to −0.6
  EXPECT_EQ(svg.find("e-1"), std::string::npos) << "a rounding residue labelled as a tick";
  EXPECT_EQ(svg.find(">-0<"), std::string::npos);
}

// A series without a label (a second seed in the first one's colour) is drawn and gets no legend entry; the
// labelled ones keep consecutive legend rows.
TEST(LabPlot, AnUnlabelledSeriesIsDrawnButNotListed) {
  Chart chart{"title", "x", "y", {}};  // every text of the chart has words, so an empty one is a legend's
  chart.series.push_back({"first", {0, 1}, {1, 2}});
  chart.series.push_back({"", {0, 1}, {2, 1}});
  chart.series.push_back({"third", {0, 1}, {1.5, 1.5}});
  const std::string svg = render_svg(chart);
  EXPECT_EQ(progutil::occurrences(svg, "<polyline"), 3u);
  EXPECT_EQ(progutil::occurrences(svg, "stroke-width=\"3\""), 2u) << svg << "\n(one legend line for each label)";
  EXPECT_EQ(svg.find("\"></text>"), std::string::npos) << "an empty legend label";
  const size_t first = svg.find(">first</text>"), third = svg.find(">third</text>");
  ASSERT_NE(third, std::string::npos);
  const double y_first = std::stod(svg.substr(svg.rfind("y=\"", first) + 3));
  const double y_third = std::stod(svg.substr(svg.rfind("y=\"", third) + 3));
  EXPECT_NEAR(y_third - y_first, 20, 1e-9) << "the third series takes the second legend row";
}

// The numbers of attribute `name` of every element `tag` of an SVG, in drawing order.
static std::vector<double> attribute_values(const std::string& svg, const std::string& tag, const std::string& name) {
  std::vector<double> out;
  for (size_t at = svg.find("<" + tag + " "); at != std::string::npos; at = svg.find("<" + tag + " ", at + 1)) {
    const size_t end = svg.find('>', at);
    const size_t value = svg.find(" " + name + "=\"", at);
    if (value < end) out.push_back(std::stod(svg.substr(value + name.size() + 3)));
  }
  return out;
}

TEST(LabPlot, ErrorBarsSpanTheSeriesValuePlusAndMinusItsError) {
  Chart chart;
  Series s{"mean", {1, 2, 3}, {1.0, 2.0, 3.0}};
  s.err = {0.5, 0.0, 0.25};  // no bar where the error is 0
  chart.series.push_back(s);
  const std::string svg = render_svg(chart);
  const std::vector<double> xs = polyline_xs(svg);
  ASSERT_EQ(xs.size(), 3u);
  // The y of each point, read back from the polyline: "x,y x,y …".
  const size_t at = svg.find("points=\"") + 8;
  std::stringstream points(svg.substr(at, svg.find('"', at) - at));
  std::vector<double> ys;
  for (std::string pair; points >> pair;) ys.push_back(std::stod(pair.substr(pair.find(',') + 1)));
  const double pixels_per_unit = ys[0] - ys[1];  // y = 1 and y = 2, one unit apart (y grows upwards)
  // Error bars are the lines drawn with stroke-width 1.5; grid lines and the legend use other widths.
  std::vector<double> x1, y1, y2;
  for (size_t line = svg.find("<line "); line != std::string::npos; line = svg.find("<line ", line + 1)) {
    const std::string element = svg.substr(line, svg.find('>', line) - line);
    if (element.find("stroke-width=\"1.5\"") == std::string::npos) continue;
    x1.push_back(attribute_values(element + ">", "line", "x1")[0]);
    y1.push_back(attribute_values(element + ">", "line", "y1")[0]);
    y2.push_back(attribute_values(element + ">", "line", "y2")[0]);
  }
  ASSERT_EQ(x1.size(), 2u) << "one bar for each point with an error above 0";
  EXPECT_NEAR(x1[0], xs[0], 0.01);
  EXPECT_NEAR(x1[1], xs[2], 0.01);
  EXPECT_NEAR(y1[0] - y2[0], 2 * 0.5 * pixels_per_unit, 0.2);
  EXPECT_NEAR((y1[0] + y2[0]) / 2, ys[0], 0.1);
  EXPECT_NEAR(y1[1] - y2[1], 2 * 0.25 * pixels_per_unit, 0.2);
  EXPECT_NEAR((y1[1] + y2[1]) / 2, ys[2], 0.1);
  // The axis takes the bars in: the lowest bar ends at 0.5, inside the plot's frame.
  EXPECT_LT(y1[0], attribute_values(svg, "rect", "height")[1] + attribute_values(svg, "rect", "y")[0]);
}

TEST(LabTableFile, CommaSeparatedCellsKeepQuotedCommasAndErrorsNameTheLine) {
  progutil::TempDir dir;
  progutil::write_file(dir / "runs.csv", "sweep,model,accuracy\nwidth,\"first,second\",0.5\n\nwidth,third,0.25\n");
  std::vector<std::vector<std::string>> rows;
  auto keep = [&](const std::vector<std::string>& cells) { rows.push_back(cells); };
  for_each_csv_row(dir / "runs.csv", "runs", 3, keep);
  ASSERT_EQ(rows.size(), 2u) << "the header and the empty line are not rows";
  EXPECT_EQ(rows[0][1], "first,second");
  EXPECT_EQ(cell_number(rows[0], 2, "accuracy"), 0.5);
  EXPECT_EQ(rows[1][1], "third");
  progutil::write_file(dir / "bad.csv", "a,b\n1,2\n1,x\n");
  std::string message;
  try {
    auto read_b = [](const std::vector<std::string>& cells) { cell_number(cells, 1, "b"); };
    for_each_csv_row(dir / "bad.csv", "runs", 2, read_b);
  } catch (const std::exception& e) {
    message = e.what();
  }
  EXPECT_CONTAINS(message, "bad.csv:3: column 2 (b): expected a number, not 'x'");
  EXPECT_THROW(cell_number({"1.5e"}, 0, "a"), std::runtime_error) << "a number must be the whole cell";
  EXPECT_THROW(for_each_csv_row(dir / "runs.csv", "runs", 4, [](const std::vector<std::string>&) {}), std::runtime_error);
}

TEST(LabSeeds, MeanAndSampleStandardDeviationAsClosedForms) {
  EXPECT_DOUBLE_EQ(mean_of({1, 2, 3, 4}), 2.5);
  EXPECT_NEAR(sample_sd({1, 2, 3, 4}), std::sqrt(5.0 / 3.0), 1e-12);  // Σ(x − 2.5)² = 5, over n − 1 = 3
  EXPECT_EQ(sample_sd({7}), 0.0);
  EXPECT_EQ(mean_spread({2.0}, "%.1f"), "2.0");
  EXPECT_EQ(mean_spread({1, 2, 3, 4}, "%.2f"), "2.50 ± 1.29");
}

TEST(LabPlot, DashedSeriesAndSharedColour) {
  Chart chart;
  chart.series.push_back({"ours", {1, 2}, {2, 1}});
  Series twin{"twin", {1, 2}, {2.5, 1.5}};
  twin.colour = 0, twin.dashed = true;
  chart.series.push_back(twin);
  const std::string svg = render_svg(chart);
  EXPECT_EQ(progutil::occurrences(svg, "stroke-dasharray"), 2u) << "the twin's line and its legend entry, nothing else";
  EXPECT_EQ(progutil::occurrences(svg, "#1f77b4"), 4u) << "both series in palette colour 0, line and legend each";
}
