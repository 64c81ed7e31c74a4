// Tests for linear attention (src/ops/linear_attention.*): the O(T) op against the O(T²) textbook version
// (src/textbook/linear_attention.h) under every mask and at odd shapes, the textbook backward against finite
// differences, the per-layer choice in checkpoints (old files without the key load as softmax), and the lab's view
// of a linear layer (implied weights, head scores, attention statistics).
// The model-level checks (mixed stacks vs ReferenceGPT, finite differences, the receptive field) are in
// test_masks.cpp and test_model.cpp, the decoder's generation from the state in test_sampling.cpp, each over every
// kind that takes every mask; what the decoder keeps for a linear layer is here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/decoder.h"
#include "io/safetensors.h"
#include "lab/attention_stats.h"
#include "lab/head_scores.h"
#include "lab/html_report.h"
#include "model/mixers/registry.h"
#include "model/model.h"
#include "ops/linear_attention.h"
#include "ops/mask.h"
#include "mixer_kinds.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/linear_attention.h"
#include "textbook/reference.h"
#include "base/threads.h"

using namespace testutil;

namespace {

// Tolerances as in test_ops.cpp: float against double measured against the tensor's own scale. The linear op sums
// up to T terms into its state and (window, prefix) subtracts keys again, so the state's scale, not the output's,
// bounds the rounding; 2e-5 was chosen with measured errors ≤ 2e-6 at these sizes.
constexpr double kTol = 2e-5;
constexpr double kFdRel = 1e-6, kFdAbs = 1e-8;

// HS = 1, 3 (odd), 5 (odd), 2, 4; T = 1, 2, 7, 16, 37 (not multiples of anything in particular).
const AttentionShape kShapes[] = {{1, 1, 3, 1}, {2, 2, 3, 3}, {1, 7, 9, 3}, {2, 7, 5, 1}, {1, 16, 15, 3}, {1, 37, 8, 2}};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The op

TEST(OpsLinearAttention, MatchesTextbookAndFiniteDifferencesForEveryMask) {
  set_threads(1);
  for (const AttentionShape& s : kShapes)
    for (const AttentionMask& mask : all_masks(s.T)) {
      SCOPED_TRACE(describe(s, mask));
      const int B = s.B, T = s.T, C = s.C, NH = s.NH;
      const size_t BTC = (size_t)B * T * C, nP = (size_t)B * NH * T * T;
      std::mt19937 rng(B * 1000 + T * 100 + C * 10 + NH + (int)mask.kind * 7 + mask.size);
      // Both signs, so both branches of φ (x + 1 and eˣ) and of φ' are used.
      std::vector<double> qkv = float_exact(uniform(3 * BTC, rng, -1.5, 1.5));
      std::vector<float> qkv_f = to_float(qkv);

      std::vector<double> out(BTC), probs(nP);
      ref_linear_attention_forward(out.data(), probs.data(), qkv.data(), mask, B, T, C, NH);
      std::vector<float> out_f(BTC, NAN), den_f((size_t)B * NH * T, NAN), probs_f(nP, NAN);
      linear_attention_forward(out_f.data(), den_f.data(), qkv_f.data(), mask, B, T, C, NH);
      EXPECT_TRUE(close_to_reference(out_f, out, kTol, "linear attention out"));
      // The implied weights: the textbook's s_ij / den_i, exactly 0 outside the mask, rows summing to 1 (−ε/den).
      linear_attention_probs(probs_f.data(), qkv_f.data(), mask, B, T, C, NH);
      EXPECT_TRUE(close_to_reference(probs_f, probs, kTol, "implied weights"));
      for (int bh = 0; bh < B * NH; bh++)
        for (int i = 0; i < T; i++) {
          double sum = 0;
          for (int j = 0; j < T; j++) {
            const float p = probs_f[((size_t)bh * T + i) * T + j];
            if (!mask.allows(i, j, T)) {
              ASSERT_EQ(p, 0.0f) << "weight at forbidden (" << i << "," << j << ")";
            } else {
              EXPECT_GT(p, 0.0f);
              sum += p;
            }
          }
          EXPECT_NEAR(sum, 1.0 - kLinearAttentionEps / den_f[(size_t)bh * T + i], 1e-5);
        }

      const std::vector<double> dout = float_exact(uniform(BTC, rng)), seed = float_exact(uniform(3 * BTC, rng));
      std::vector<double> dqkv = seed;
      std::vector<float> dqkv_f = to_float(seed), dout_f = to_float(dout);
      ref_linear_attention_backward(dqkv.data(), dout.data(), qkv.data(), mask, B, T, C, NH);
      linear_attention_backward(dqkv_f.data(), dout_f.data(), qkv_f.data(), den_f.data(), out_f.data(), mask, B, T, C,
                                NH);
      EXPECT_TRUE(close_to_reference(dqkv_f, dqkv, kTol, "linear attention dqkv"));

      auto loss = [&] {
        ref_linear_attention_forward(out.data(), probs.data(), qkv.data(), mask, B, T, C, NH);
        return dot(dout, out);
      };
      if (T <= 16) {  // finite differences of the O(T²·HS) textbook forward: 2·3·B·T·C evaluations
        EXPECT_TRUE(all_close(dqkv, finite_differences(loss, qkv.data(), qkv.size()), kFdRel, kFdAbs,
                              "textbook dqkv vs finite differences"));
      }
    }
}

// The same with two threads splitting the (batch, head) pairs.
TEST(OpsLinearAttention, TwoThreadsGiveTheSameResult) {
  const int saved = default_threads();
  const int B = 3, T = 29, C = 12, NH = 3;
  const size_t BTC = (size_t)B * T * C;
  std::mt19937 rng(5);
  std::vector<double> qkv = float_exact(uniform(3 * BTC, rng, -1.5, 1.5)), dout = float_exact(uniform(BTC, rng));
  const AttentionMask mask = AttentionMask::parse("window:5");
  std::vector<double> out(BTC), probs((size_t)B * NH * T * T), dqkv(3 * BTC);
  ref_linear_attention_forward(out.data(), probs.data(), qkv.data(), mask, B, T, C, NH);
  ref_linear_attention_backward(dqkv.data(), dout.data(), qkv.data(), mask, B, T, C, NH);
  set_threads(2);
  std::vector<float> qkv_f = to_float(qkv), dout_f = to_float(dout), out_f(BTC), den_f((size_t)B * NH * T),
                     dqkv_f(3 * BTC);
  linear_attention_forward(out_f.data(), den_f.data(), qkv_f.data(), mask, B, T, C, NH);
  linear_attention_backward(dqkv_f.data(), dout_f.data(), qkv_f.data(), den_f.data(), out_f.data(), mask, B, T, C, NH);
  set_threads(saved);
  EXPECT_TRUE(close_to_reference(out_f, out, kTol, "out"));
  EXPECT_TRUE(close_to_reference(dqkv_f, dqkv, kTol, "dqkv"));
}

// With the upstream gradient non-zero only at query i, no gradient may reach another query, nor a key or value i
// cannot see. Exactly 0.0f for keys after i (never in the state when i reads it: the causal property) and for
// every hidden key of the masks that only add; a window subtracts keys again, which leaves a float residue of
// ~1e-8 of the gradient's scale on the keys behind it, allowed here up to 1e-5 of the scale.
TEST(OpsLinearAttention, NoGradientToKeysAQueryCannotSee) {
  set_threads(1);
  for (const AttentionShape& s : kShapes)
    for (const AttentionMask& mask : all_masks(s.T))
      for (int i : {0, s.T / 2, s.T - 1}) {
        SCOPED_TRACE(describe(s, mask) + " query " + std::to_string(i));
        const int B = s.B, T = s.T, C = s.C, NH = s.NH;
        const size_t BTC = (size_t)B * T * C;
        std::mt19937 rng(17 + i + T);
        std::vector<float> qkv = to_float(uniform(3 * BTC, rng, -1.5, 1.5)), out(BTC), den((size_t)B * NH * T),
                           dout(BTC, 0.0f), dqkv(3 * BTC, 1.0f);
        for (int b = 0; b < B; b++)
          for (int c = 0; c < C; c++) dout[((size_t)b * T + i) * C + c] = 0.5f + 0.1f * c;
        linear_attention_forward(out.data(), den.data(), qkv.data(), mask, B, T, C, NH);
        linear_attention_backward(dqkv.data(), dout.data(), qkv.data(), den.data(), out.data(), mask, B, T, C, NH);
        float largest = 0;
        for (float g : dqkv) largest = std::max(largest, std::fabs(g));
        ASSERT_GT(largest, 0.0f);
        for (int b = 0; b < B; b++)
          for (int t = 0; t < T; t++) {
            const float* row = dqkv.data() + ((size_t)b * T + t) * 3 * C;
            const bool exact = t > i || mask.kind != AttentionMask::Window;
            for (int c = 0; c < C; c++) {
              if (t != i) {
                ASSERT_EQ(row[c], 0.0f) << "dq at position " << t;
              }
              if (!mask.allows(i, t, T) && exact) {
                ASSERT_EQ(row[C + c], 0.0f) << "dk at hidden position " << t;
                ASSERT_EQ(row[2 * C + c], 0.0f) << "dv at hidden position " << t;
              } else if (!mask.allows(i, t, T)) {
                ASSERT_LE(std::fabs(row[C + c]), 1e-5f * largest) << "dk behind the window, position " << t;
                ASSERT_LE(std::fabs(row[2 * C + c]), 1e-5f * largest) << "dv behind the window, position " << t;
              }
            }
          }
      }
}

// The recurrent form (what the decoder runs, one token at a time) against the textbook, causal.
TEST(OpsLinearAttention, RecurrentStateMatchesTextbook) {
  const int T = 11, C = 5, NH = 1, HS = 5;
  std::mt19937 rng(8);
  std::vector<double> qkv = float_exact(uniform(3 * T * C, rng, -1.5, 1.5)), out(T * C), probs(T * T);
  ref_linear_attention_forward(out.data(), probs.data(), qkv.data(), AttentionMask{}, 1, T, C, NH);
  std::vector<float> S(HS * HS, 0.0f), z(HS, 0.0f), phi_q(HS), phi_k(HS), y(T * C);
  const std::vector<float> qkv_f = to_float(qkv);
  for (int t = 0; t < T; t++) {
    const float* row = qkv_f.data() + (size_t)t * 3 * C;
    phi_features(phi_q.data(), row, HS);
    phi_features(phi_k.data(), row + C, HS);
    linear_state_update(S.data(), z.data(), phi_k.data(), row + 2 * C, 1.0f, HS);
    linear_state_read(y.data() + t * C, S.data(), z.data(), phi_q.data(), HS);
  }
  EXPECT_TRUE(close_to_reference(y, out, kTol, "recurrent y"));
}

TEST(OpsLinearAttention, ParsesKindsLikeLayerMasks) {
  auto kinds = [](const std::string& text, int n) {
    ModelConfig c;
    c.n_layer = n, c.mixer = text;
    std::string out;
    for (const auto& m : make_layer_mixers(c)) out += std::string(out.empty() ? "" : " ") + m->kind();
    return out;
  };
  auto canonical = [](const std::string& text, int n) {
    ModelConfig c;
    c.n_layer = n, c.mixer = text;
    return canonical_mixers(c);
  };
  EXPECT_EQ(kinds("linear", 3), "linear linear linear");
  EXPECT_EQ(kinds("softmax,linear", 2), "softmax linear");
  EXPECT_EQ(canonical("softmax,linear", 2), "softmax,linear");
  EXPECT_EQ(canonical("linear,linear", 2), "linear");
  for (auto [text, n] : std::vector<std::pair<std::string, int>>{
           {"softmax,linear", 3}, {"quadratic", 2}, {"linear,", 2}, {"", 1}, {"Linear", 1}, {"linear,,linear", 3}}) {
    try {
      kinds(text, n);
      ADD_FAILURE() << "accepted '" << text << "' for " << n << " layers";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("'"), std::string::npos) << e.what();
    }
  }
  ModelConfig c;
  c.vocab_size = 5, c.n_layer = 2, c.mixer = "linear,softmax,linear";
  EXPECT_THROW(validate(c), std::runtime_error);
  c.mixer = "linear", c.attn_scale = "inv";  // 1/d_k of logits a linear layer does not have
  EXPECT_THROW(validate(c), std::runtime_error);
  c.mixer = "linear,softmax";
  EXPECT_NO_THROW(validate(c));
}

// ---------------------------------------------------------------------------------------------------------------
// Checkpoints

namespace {
std::unique_ptr<GPT> small_model(const std::string& attention, const Tokenizer& tok) {
  ModelConfig c;
  c.n_layer = 3, c.n_head = 2, c.n_embd = 8, c.block_size = 8, c.vocab_size = tok.size(), c.mixer = attention;
  auto model = std::make_unique<GPT>(c);
  model->init_weights(3);
  return model;
}
}  // namespace

TEST(LinearAttentionCheckpoint, PerLayerKindsRoundTripAndOldFilesAreSoftmax) {
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  const std::string path = dir / "m.safetensors";
  auto mixed = small_model("linear,softmax,linear", tok);
  save_checkpoint(path, *mixed, tok, nullptr);
  EXPECT_EQ(read_safetensors(path).metadata.at("mixer"), "linear,softmax,linear");
  Checkpoint loaded = load_checkpoint(path);
  for (int l = 0; l < 3; l++) EXPECT_STREQ(loaded.model->mixer(l).kind(), mixed->mixer(l).kind()) << l;
  const std::vector<int> x = {1, 2, 3, 4, 5, 6};
  mixed->forward(x.data(), nullptr, 1, 6);
  loaded.model->forward(x.data(), nullptr, 1, 6);
  for (int i = 0; i < 6 * tok.size(); i++) ASSERT_EQ(mixed->logits()[i], loaded.model->logits()[i]);

  // A checkpoint written before linear attention existed has no "mixer" key (nor its old name "attention"): it is
  // all softmax, and its logits are those of a softmax model with the same weights.
  auto soft = small_model("softmax", tok);
  save_checkpoint(path, *soft, tok, nullptr);
  SafetensorsContents file = read_safetensors(path);
  file.metadata.erase("mixer");
  file.metadata["format_version"] = "1";  // format 2 requires every key; an old file is format 1
  std::vector<TensorView> views;
  for (const auto& [name, t] : file.tensors) views.push_back({name, t.shape, t.data.data()});
  write_safetensors(path, views, file.metadata);
  Checkpoint old = load_checkpoint(path);
  for (int l = 0; l < 3; l++) EXPECT_STREQ(old.model->mixer(l).kind(), "softmax");
  soft->forward(x.data(), nullptr, 1, 6);
  old.model->forward(x.data(), nullptr, 1, 6);
  for (int i = 0; i < 6 * tok.size(); i++) ASSERT_EQ(soft->logits()[i], old.model->logits()[i]);

  // A bad value names the file and the field's spelling.
  file.metadata["attention"] = "softmax,quadratic,linear";
  write_safetensors(path, views, file.metadata);
  try {
    load_checkpoint(path);
    ADD_FAILURE() << "loaded a checkpoint with attention 'softmax,quadratic,linear'";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("quadratic"), std::string::npos) << what;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The lab

// GPT::mixing_weights of a linear layer is the implied-weight matrix, computed here in double from the model's
// own qkv; a softmax layer beside it still gives softmax rows.
TEST(LinearAttentionLab, AttentionProbsAreTheImpliedWeights) {
  set_threads(1);
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  auto model = small_model("linear,softmax,linear", tok);
  const int T = 7, C = 8, NH = 2;
  const std::vector<int> x = {3, 1, 4, 1, 5, 9, 2};
  model->forward(x.data(), nullptr, 1, T);
  for (int l : {0, 2}) {
    std::vector<double> qkv = to_double(layer_qkv(*model, l), (size_t)T * 3 * C), out(T * C), probs(NH * T * T);
    ref_linear_attention_forward(out.data(), probs.data(), qkv.data(), AttentionMask{}, 1, T, C, NH);
    EXPECT_TRUE(close_to_reference(model->mixing_weights(l), probs.data(), probs.size(), kTol, "layer " + std::to_string(l)));
  }
  std::vector<double> qkv = to_double(layer_qkv(*model, 1), (size_t)T * 3 * C), out(T * C), probs(NH * T * T);
  ref_attention_forward(out.data(), probs.data(), qkv.data(), AttentionMask{}, 1.0 / std::sqrt(4.0), 1, T, C, NH);
  EXPECT_TRUE(close_to_reference(model->mixing_weights(1), probs.data(), probs.size(), kTol, "softmax layer 1"));
}

// Head scores read mixing_weights, so they work on linear layers: the previous-token score of every head equals
// the mass on key i−1 computed here from the textbook weights, and score_heads gives finite scores in range.
TEST(LinearAttentionLab, HeadScoresAndStatisticsWorkOnLinearLayers) {
  set_threads(1);
  const Tokenizer tok = Tokenizer::from_text(U"abcdefghijklmnop");
  auto model = small_model("linear,softmax,linear", tok);
  const int T = 8, C = 8, NH = 2;
  const std::vector<int> x = {3, 1, 4, 1, 5, 9, 2, 6};
  model->forward(x.data(), nullptr, 1, T);
  std::vector<double> qkv = to_double(layer_qkv(*model, 0), (size_t)T * 3 * C), out(T * C), probs(NH * T * T);
  ref_linear_attention_forward(out.data(), probs.data(), qkv.data(), AttentionMask{}, 1, T, C, NH);
  for (int h = 0; h < NH; h++) {
    double expected = 0;
    for (int i = 1; i < T; i++) expected += probs[((size_t)h * T + i) * T + i - 1] / (T - 1);
    EXPECT_NEAR(previous_token_score(model->mixing_weights(0) + (size_t)h * T * T, T), expected, 1e-5) << h;
  }
  const std::vector<HeadScores> scores = score_heads(*model, 8, 2, 11);
  ASSERT_EQ(scores.size(), 6u);
  for (const HeadScores& s : scores) {
    EXPECT_TRUE(std::isfinite(s.induction.value()) && s.induction.value() >= 0 && s.induction.value() <= 1);
    EXPECT_TRUE(std::isfinite(s.entropy_norm.value()) && s.entropy_norm.value() > 0 && s.entropy_norm.value() <= 1.0001);
  }
  // Attention statistics: a linear layer has no logits (NaN, written as empty cells) but its weights have an
  // entropy, the same as the one computed from the textbook weights.
  const std::vector<int> y = {1, 4, 1, 5, 9, 2, 6, 5};
  const std::vector<LayerAttentionStats> st = measure_attention(*model, x.data(), y.data(), 1, T);
  EXPECT_TRUE(std::isnan(st[0].logit_var) && std::isnan(st[0].logit_max));
  EXPECT_FALSE(std::isnan(st[1].logit_var));
  double entropy = 0;
  int rows = 0;
  for (int h = 0; h < NH; h++)
    for (int i = 1; i < T; i++, rows++)
      for (int j = 0; j <= i; j++) {
        const double p = probs[((size_t)h * T + i) * T + j];
        entropy -= p * std::log(p);
      }
  EXPECT_NEAR(st[0].entropy, entropy / rows, 1e-5);
  const std::string cells = attention_stats_cells(st);
  EXPECT_EQ(cells.substr(0, 3), ",,,") << cells;  // layer 0: two empty logit cells, then the entropy
  EXPECT_EQ(cells.find("nan"), std::string::npos) << cells;
}

// ./inspect attention's data: a linear layer's pattern is its implied weights, and the dump says which layers are
// linear (the page labels them).
TEST(LinearAttentionLab, InspectDumpLabelsLinearLayers) {
  set_threads(1);
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  auto model = small_model("linear,softmax,linear", tok);
  const std::vector<int> ids = tok.encode(U"abc def", "test");
  const AttentionDump dump = dump_attention(*model, ids, tok);
  ASSERT_EQ(dump.mixers, (std::vector<std::string>{"linear", "softmax", "linear"}));
  const int T = (int)ids.size(), NH = 2;
  for (size_t k = 0; k < (size_t)NH * T * T; k++) ASSERT_EQ(dump.attn[k], model->mixing_weights(0)[k]);
  EXPECT_NE(attention_json(dump).find("\"mixers\":[\"linear\",\"softmax\",\"linear\"]"), std::string::npos);
}

// A key or query far negative makes φ exactly 0 in float (e^-200 underflows), so the sum φ(q)·z is exactly 0 and only
// ε keeps the denominator from 0 and the output from 0/0 (a deliberate break that dropped ε survived every other
// test). The denominator must be exactly φ(q)·z + ε, here computed in double from its definition, and every output
// finite.
TEST(LinearAttentionEps, KeysOrQueriesFarNegativeLeaveTheDenominatorExactlyEps) {
  const int B = 1, T = 4, C = 4, NH = 1;
  for (const bool keys_negative : {true, false}) {
    SCOPED_TRACE(keys_negative ? "keys at -200" : "queries at -200");
    std::vector<float> qkv((size_t)B * T * 3 * C);
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) {
        qkv[t * 3 * C + c] = keys_negative ? 0.5f + 0.1f * c : -200.0f;          // q
        qkv[t * 3 * C + C + c] = keys_negative ? -200.0f : 0.3f - 0.2f * c;      // k
        qkv[t * 3 * C + 2 * C + c] = 1.0f + t - c;                               // v
      }
    std::vector<float> out((size_t)B * T * C), den((size_t)B * NH * T);
    linear_attention_forward(out.data(), den.data(), qkv.data(), AttentionMask::parse("causal"), B, T, C, NH);
    auto phi = [](double x) { return x > 0 ? x + 1 : std::exp(x); };
    for (int t = 0; t < T; t++) {
      double expected = 0;  // φ(q_t)·z_t with z_t = Σ_{j≤t} φ(k_j), in float's range: exactly 0 here
      for (int c = 0; c < C; c++) {
        double z = 0;
        for (int j = 0; j <= t; j++) z += (float)phi(qkv[j * 3 * C + C + c]);
        expected += (float)phi(qkv[t * 3 * C + c]) * z;
      }
      EXPECT_EQ(expected, 0.0);
      EXPECT_EQ(den[t], (float)(expected + kLinearAttentionEps)) << "row " << t;
      for (int c = 0; c < C; c++) EXPECT_TRUE(std::isfinite(out[t * C + c])) << "row " << t << " channel " << c;
    }
    // The decoder's recurrent read: the same denominator, the same finite output.
    std::vector<float> S(C * C, 0.0f), z(C, 0.0f), phi_k(C), phi_q(C), y(C);
    phi_features(phi_k.data(), &qkv[C], C);
    linear_state_update(S.data(), z.data(), phi_k.data(), &qkv[2 * C], 1.0f, C);
    phi_features(phi_q.data(), &qkv[0], C);
    EXPECT_EQ(linear_state_read(y.data(), S.data(), z.data(), phi_q.data(), C), kLinearAttentionEps);
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
  }
}

// What the decoder keeps: a causal linear layer its state, NH·(HS² + HS) floats (S and z per head: 2·(64 + 8) at 2
// heads of 8), whatever the context; a layer of the first kind (the GPT's softmax attention) beside it its keys and
// values, 2·block·C.
TEST(LinearAttentionDecoder, KeepsItsStateInsteadOfACache) {
  GPT linear(testutil::sized_config("linear", 2, 2, 16, 8, 11), parse_layer_masks("causal", 2));
  EXPECT_EQ(Decoder(linear).memory_floats(), 2u * 2 * (64 + 8));
  const std::string hybrid_mixers = std::string("linear,") + mixer_kinds().front()->name;
  GPT hybrid(testutil::sized_config(hybrid_mixers, 2, 2, 16, 8, 11), parse_layer_masks("causal", 2));
  EXPECT_EQ(Decoder(hybrid).memory_floats(), 2u * (64 + 8) + 2 * 8 * 16);
}
