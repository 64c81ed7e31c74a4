// Tests for src/model/decoder.*, src/generate/sampling.* and score_text in src/train/evaluate.*: the KV-cache decoder against full
// recomputation, the sampler's distribution against softmax computed here, and text scoring against log-softmax
// computed here from the model's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "model/decoder.h"
#include "train/evaluate.h"
#include "ops/softmax_attention.h"
#include "ops/linear.h"
#include "model/model.h"
#include "textbook/reference.h"
#include "base/rng.h"
#include "generate/generate.h"
#include "generate/sampling.h"
#include "decoder_check.h"
#include "mixer_kinds.h"
#include "test_util.h"
#include "base/threads.h"

namespace {

// A random model whose weights are large enough (std 0.3 everywhere, LayerNorm gains included) that attention is
// sharp and positions matter: a decoder that got a position or a cached key wrong changes the logits visibly.
std::unique_ptr<GPT> random_model(const std::string& mask, int n_layer = 2, int block = 8, int vocab = 11,
                                  uint64_t seed = 3, const std::string& attention = "softmax") {
  ModelConfig c;
  c.n_layer = n_layer, c.n_head = 2, c.n_embd = 16, c.block_size = block, c.vocab_size = vocab;
  c.mixer = attention;
  auto model = std::make_unique<GPT>(c, parse_layer_masks(mask, n_layer));
  Rng rng(seed);
  for (float& p : model->params_memory()) p = (float)(0.3 * rng.normal());
  return model;
}

using testutil::full_logits;
using testutil::random_tokens;

double max_abs_diff(const float* a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < b.size(); i++) worst = std::max(worst, (double)std::fabs(a[i] - b[i]));
  return worst;
}

double spread(const std::vector<float>& v) {
  return *std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end());
}

// Pushes `tokens` one by one; at every step checks the decoder's context against the documented sliding rule
// (at block_size tokens the oldest half is dropped) and its logits against a full forward on that context.
void check_decoder_matches_forward(GPT& model, const std::vector<int>& tokens, bool expect_cache) {
  Decoder decoder(model);
  EXPECT_EQ(decoder.uses_cache(), expect_cache);
  const int block = model.config.block_size;
  std::vector<int> expected_context;
  int slides = 0;
  double worst = 0;
  for (size_t i = 0; i < tokens.size(); i++) {
    if ((int)expected_context.size() == block) {
      expected_context.erase(expected_context.begin(), expected_context.end() - block / 2);
      slides++;
    }
    expected_context.push_back(tokens[i]);
    const float* logits = decoder.push(tokens[i]);
    ASSERT_EQ(decoder.context(), expected_context) << "after token " << i;
    const std::vector<float> reference = full_logits(model, decoder.context());
    const double diff = max_abs_diff(logits, reference);
    worst = std::max(worst, diff);
    EXPECT_LT(diff, 1e-4) << "token " << i << ", context length " << decoder.context().size();
    // The comparison is only meaningful if the logits are not all alike.
    EXPECT_GT(spread(reference), 0.5) << "token " << i;
  }
  EXPECT_GE(slides, 2);
  // reset() starts over: the same first token gives the same logits as a one-token forward.
  decoder.reset();
  const float* first = decoder.push(tokens[0]);
  EXPECT_LT(max_abs_diff(first, full_logits(model, {tokens[0]})), 1e-4);
  EXPECT_EQ(decoder.context().size(), 1u);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Decoder

TEST(SamplingDecoder, CausalKvCacheMatchesFullRecompute) {
  set_threads(1);
  auto model = random_model("causal");
  check_decoder_matches_forward(*model, random_tokens(29, 11, 5), true);
}

TEST(SamplingDecoder, WindowMaskKvCacheMatchesFullRecompute) {
  set_threads(1);
  auto model = random_model("window:3");
  check_decoder_matches_forward(*model, random_tokens(29, 11, 6), true);
}

TEST(SamplingDecoder, MixedCausalAndWindowLayers) {
  set_threads(1);
  auto model = random_model("window:2,causal");
  check_decoder_matches_forward(*model, random_tokens(23, 11, 7), true);
}

TEST(SamplingDecoder, OddBlockSizeSlides) {
  set_threads(1);
  auto model = random_model("causal", 1, 7);
  check_decoder_matches_forward(*model, random_tokens(25, 11, 8), true);
}

// Layers of the other kinds that take every mask generate from their running state instead of a key/value cache
// (linear attention: S and z per head); the logits must match a full forward at every step, across slides (the
// state is the decoder's shadow's, stepped over the kept half at its new positions), under window masks (keys
// leave the state again) and beside layers of the first kind. Each such kind alone, after the first and before it.
TEST(SamplingDecoder, StatefulLayersUnderEveryMaskMatchFullRecompute) {
  set_threads(1);
  const std::vector<std::string> kinds = testutil::kinds_that_take_every_mask();
  ASSERT_GE(kinds.size(), 2u) << "no kind but the first takes every mask: this test has nothing to run";
  for (size_t k = 1; k < kinds.size(); k++) {
    for (const std::string& attention : {kinds[k], kinds[k] + "," + kinds[0], kinds[0] + "," + kinds[k]}) {
      for (const char* mask : {"causal", "window:3", "window:2,causal"}) {
        SCOPED_TRACE("attention " + attention + ", mask " + mask);
        auto model = random_model(mask, 2, 8, 11, 3, attention);
        check_decoder_matches_forward(*model, random_tokens(29, 11, 12), true);
      }
    }
    const std::string odd_stack = kinds[k] + "," + kinds[0] + "," + kinds[k];
    auto odd = random_model("causal", 3, 7, 11, 4, odd_stack);
    check_decoder_matches_forward(*odd, random_tokens(25, 11, 13), true);
    // A bidirectional model has no recurrent form for the next token: full recompute, same answers.
    auto bidir = random_model("bidirectional", 2, 8, 11, 5, kinds[k]);
    check_decoder_matches_forward(*bidir, random_tokens(21, 11, 14), false);
  }
}

TEST(SamplingDecoder, BidirectionalModelRecomputesAndStillMatches) {
  set_threads(1);
  auto model = random_model("bidirectional");
  check_decoder_matches_forward(*model, random_tokens(21, 11, 9), false);
  // A bidirectional model's last-position logits depend on the whole context: the cache could not give them.
  auto prefix_model = random_model("prefix:4");
  check_decoder_matches_forward(*prefix_model, random_tokens(21, 11, 10), false);
  auto mixed = random_model("causal,bidirectional");
  check_decoder_matches_forward(*mixed, random_tokens(17, 11, 11), false);
}

TEST(SamplingDecoder, CachedLogitsDependOnEarlierTokens) {
  // Guards the comparison above against a degenerate model: two contexts that differ only in their first token
  // must give different logits at the last position (so the cache really is consulted).
  set_threads(1);
  auto model = random_model("causal");
  Decoder a(*model), b(*model);
  const float* la = nullptr;
  const float* lb = nullptr;
  std::vector<int> tokens = {1, 2, 3, 4, 5};
  for (size_t i = 0; i < tokens.size(); i++) {
    la = a.push(tokens[i]);
    lb = b.push(i == 0 ? 7 : tokens[i]);
  }
  std::vector<float> copy_b(lb, lb + model->config.vocab_size);
  EXPECT_GT(max_abs_diff(la, copy_b), 1e-3);
}

TEST(SamplingDecoder, SlideReencodeMatchesFullRecomputeWithGatesAndOddWidths) {
  // After each slide the decoder's states are its shadow's, and every step after it runs two rows (the token and the
  // next shadow) through matvec2. The input widths C = 18 and 4C = 72 (3C = 54 is an output width only)
  // leave 18 mod 8 = 2 rows past matvec2's passes of eight, which exercises its leftover rows, head gates the path both forwards must apply identically (each row
  // of step2 gated), and three layers of different masks the per-layer cache.
  set_threads(1);
  ModelConfig c;
  c.n_layer = 3, c.n_head = 3, c.n_embd = 18, c.block_size = 10, c.vocab_size = 13;
  GPT model(c, parse_layer_masks("causal,window:3,causal", c.n_layer));
  Rng rng(21);
  for (float& p : model.params_memory()) p = (float)(0.3 * rng.normal());
  model.enable_head_gates();
  for (size_t i = 0; i < model.head_gates().size(); i++) model.set_head_gate(i, 0.4f + 0.3f * (float)(i % 4));
  check_decoder_matches_forward(model, random_tokens(41, c.vocab_size, 12), true);
}

TEST(SamplingDecoder, ThreadedDecoderMatchesFullRecompute) {
  // With two threads set the decoder splits its products over a DecodeTeam (base/decode_team.h), at C = 128
  // every product but the LM head's; its logits must still be the full recompute's.
  set_threads(2);
  ModelConfig c;
  c.n_layer = 2, c.n_head = 4, c.n_embd = 128, c.block_size = 16, c.vocab_size = 11;
  GPT model(c);
  Rng rng(13);
  for (float& p : model.params_memory()) p = (float)(0.3 * rng.normal());
  check_decoder_matches_forward(model, random_tokens(50, 11, 13), true);
  set_threads(1);
}

// ---------------------------------------------------------------------------------------------------------------
// matvec and lm_head_matvec: one row of linear_forward / lm_head_forward, against the double references

TEST(SamplingMatvec, MatchesLinearReferenceInDouble) {
  struct Shape {
    int IC, OC;
  };
  // IC mod 4 = 0, 1, 2, 3 (matvec takes rows four at a time), OC small, odd and the tiny preset's.
  for (Shape s : {Shape{1, 1}, Shape{4, 7}, Shape{5, 33}, Shape{18, 54}, Shape{31, 9}, Shape{128, 384}, Shape{512, 128}})
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE("IC=" + std::to_string(s.IC) + " OC=" + std::to_string(s.OC) + (with_bias ? " bias" : " no bias"));
      std::mt19937 rng(11 * s.IC + s.OC + with_bias);
      const std::vector<double> x = testutil::float_exact(testutil::uniform(s.IC, rng)),
                                w = testutil::float_exact(testutil::uniform((size_t)s.IC * s.OC, rng)),
                                b = testutil::float_exact(testutil::uniform(s.OC, rng));
      const std::vector<float> x_f = testutil::to_float(x), w_f = testutil::to_float(w), b_f = testutil::to_float(b);
      std::vector<double> out(s.OC);
      std::vector<float> out_f(s.OC, NAN);  // every output must be written, bias or not
      ref_linear_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, 1, s.IC, s.OC);
      matvec(out_f.data(), x_f.data(), w_f.data(), with_bias ? b_f.data() : nullptr, s.IC, s.OC);
      // Sums of up to 512 products of numbers in [-1, 1]: float rounding stays far below 1e-5 of the largest output.
      EXPECT_TRUE(testutil::close_to_reference(out_f, out, 1e-5, "matvec"));
    }
}

// matvec2: two rows through one read of W, each against the double reference on its own row. IC mod 8 = 0 … 7
// (matvec2 takes rows eight at a time); the rows differ, so a row reading the other's input shows.
TEST(SamplingMatvec, TwoRowsMatchLinearReferenceInDouble) {
  struct Shape {
    int IC, OC;
  };
  for (Shape s : {Shape{1, 1}, Shape{4, 7}, Shape{5, 33}, Shape{18, 54}, Shape{31, 9}, Shape{11, 5}, Shape{14, 3},
                  Shape{8, 16}, Shape{128, 384}, Shape{512, 128}})
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE("IC=" + std::to_string(s.IC) + " OC=" + std::to_string(s.OC) + (with_bias ? " bias" : " no bias"));
      std::mt19937 rng(13 * s.IC + s.OC + with_bias);
      const std::vector<double> x0 = testutil::float_exact(testutil::uniform(s.IC, rng)),
                                x1 = testutil::float_exact(testutil::uniform(s.IC, rng)),
                                w = testutil::float_exact(testutil::uniform((size_t)s.IC * s.OC, rng)),
                                b = testutil::float_exact(testutil::uniform(s.OC, rng));
      const std::vector<float> w_f = testutil::to_float(w), b_f = testutil::to_float(b);
      std::vector<double> out0(s.OC), out1(s.OC);
      std::vector<float> out0_f(s.OC, NAN), out1_f(s.OC, NAN);
      ref_linear_forward(out0.data(), x0.data(), w.data(), with_bias ? b.data() : nullptr, 1, s.IC, s.OC);
      ref_linear_forward(out1.data(), x1.data(), w.data(), with_bias ? b.data() : nullptr, 1, s.IC, s.OC);
      matvec2(out0_f.data(), out1_f.data(), testutil::to_float(x0).data(), testutil::to_float(x1).data(), w_f.data(),
              with_bias ? b_f.data() : nullptr, s.IC, s.OC);
      EXPECT_TRUE(testutil::close_to_reference(out0_f, out0, 1e-5, "matvec2 row 0"));
      EXPECT_TRUE(testutil::close_to_reference(out1_f, out1, 1e-5, "matvec2 row 1"));
    }
}

TEST(SamplingMatvec, LmHeadMatchesReferenceInDouble) {
  for (int C : {1, 7, 128})
    for (int V : {1, 13, 65}) {
      SCOPED_TRACE("C=" + std::to_string(C) + " V=" + std::to_string(V));
      std::mt19937 rng(5 * C + V);
      const std::vector<double> x = testutil::float_exact(testutil::uniform(C, rng)),
                                wte = testutil::float_exact(testutil::uniform((size_t)V * C, rng));
      std::vector<double> logits(V);
      std::vector<float> logits_f(V, NAN);
      ref_lm_head_forward(logits.data(), x.data(), wte.data(), 1, C, V);
      lm_head_matvec(logits_f.data(), testutil::to_float(x).data(), testutil::to_float(wte).data(), C, V);
      EXPECT_TRUE(testutil::close_to_reference(logits_f, logits, 1e-5, "lm_head_matvec"));
    }
}

// attend_one_query: the decoder's attention for one query against the cache (keys stored transposed), against
// softmax(scale·q·k_j)·v computed here in double.
TEST(SamplingAttention, OneQueryMatchesReferenceInDouble) {
  // `stride` cached positions: the keys Kᵀ are (HS, stride), the values (stride, value_stride). Head sizes around
  // the kernel's 16 and 32 lanes, and key ranges that start past 0 and end inside, at and past a multiple of 16
  // keys (the kernel takes them 32 or 16 at a time, and a last partial run as 16 ending inside the cache's row:
  // [7, 50) takes it from 34, [3, 18) from 3); a cache of fewer than 16 positions has no such run.
  const std::vector<std::pair<int, std::vector<KeyRange>>> cases = {
      {50, {{0, 1}, {3, 18}, {2, 18}, {0, 17}, {0, 32}, {7, 50}}}, {12, {{0, 1}, {3, 12}, {0, 12}, {5, 9}}}};
  for (const auto& [stride, ranges] : cases)
    for (int HS : {1, 5, 16, 32, 37})
      for (KeyRange r : ranges) {
        SCOPED_TRACE("stride=" + std::to_string(stride) + " HS=" + std::to_string(HS) + " keys [" +
                     std::to_string(r.begin) + ", " + std::to_string(r.end) + ")");
        const int value_stride = HS + 3;  // a head's values sit inside a wider row, as in the (T, C) cache
        std::mt19937 rng(100 * HS + r.begin + r.end);
        const std::vector<double> q = testutil::float_exact(testutil::uniform(HS, rng, -2, 2)),
                                  kt = testutil::float_exact(testutil::uniform((size_t)HS * stride, rng, -2, 2)),
                                  v = testutil::float_exact(testutil::uniform((size_t)stride * value_stride, rng));
        const double scale = 0.3;
        std::vector<double> p(stride, 0.0), o(HS, 0.0);
        double max_s = -INFINITY, total = 0;
        for (int j = r.begin; j < r.end; j++) {
          for (int d = 0; d < HS; d++) p[j] += q[d] * kt[(size_t)d * stride + j];
          p[j] *= scale;
          max_s = std::max(max_s, p[j]);
        }
        for (int j = r.begin; j < r.end; j++) total += p[j] = std::exp(p[j] - max_s);
        for (int j = r.begin; j < r.end; j++) {
          p[j] /= total;
          for (int d = 0; d < HS; d++) o[d] += p[j] * v[(size_t)j * value_stride + d];
        }
        std::vector<float> o_f(HS, NAN), p_f(stride, NAN);
        attend_one_query(o_f.data(), p_f.data(), testutil::to_float(q).data(), testutil::to_float(kt).data(), stride,
                         testutil::to_float(v).data(), value_stride, r, (float)scale, HS);
        EXPECT_TRUE(testutil::close_to_reference(o_f, o, 1e-5, "O"));
        const std::vector<float> p_kept(p_f.begin() + r.begin, p_f.begin() + r.end);
        EXPECT_TRUE(testutil::close_to_reference(p_kept, std::vector<double>(p.begin() + r.begin, p.begin() + r.end),
                                                 1e-5, "P"));
      }
}

// ---------------------------------------------------------------------------------------------------------------
// sample_token

namespace {

const std::vector<float> kLogits = {0.3f, 2.0f, -1.0f, 1.2f, 0.0f, 1.9f, -3.0f};  // argmax 1, then 5, then 3

std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); i++) total += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p) x /= total;
  return p;
}

std::vector<int> counts_of(const SamplingOptions& o, int draws, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::pair<float, int>> scratch;
  std::vector<int> counts(kLogits.size(), 0);
  for (int i = 0; i < draws; i++) counts.at(sample_token(kLogits.data(), (int)kLogits.size(), o, rng, scratch))++;
  return counts;
}

// Pearson's chi-square of observed counts against probabilities (bins with p = 0 must be empty).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int draws) {
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); i++) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double expected = p[i] * draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

}  // namespace

TEST(SamplingToken, TemperatureZeroIsArgmax) {
  Rng rng(1);
  std::vector<std::pair<float, int>> scratch;
  for (int i = 0; i < 50; i++)
    EXPECT_EQ(sample_token(kLogits.data(), (int)kLogits.size(), {0.0f, 0, 1.0f}, rng, scratch), 1);
  // Argmax elsewhere in the vector, and with top-k and top-p set.
  const std::vector<float> last_is_max = {0.1f, 0.2f, 0.3f, 5.0f};
  EXPECT_EQ(sample_token(last_is_max.data(), 4, {0.0f, 2, 0.5f}, rng, scratch), 3);
}

TEST(SamplingToken, TopKOneIsArgmaxAtAnyTemperature) {
  Rng rng(2);
  std::vector<std::pair<float, int>> scratch;
  for (float temperature : {0.1f, 1.0f, 5.0f, 100.0f})
    for (int i = 0; i < 200; i++)
      EXPECT_EQ(sample_token(kLogits.data(), (int)kLogits.size(), {temperature, 1, 1.0f}, rng, scratch), 1);
}

TEST(SamplingToken, TinyTopPKeepsOnlyTheArgmax) {
  Rng rng(3);
  std::vector<std::pair<float, int>> scratch;
  for (float temperature : {0.5f, 1.0f, 10.0f})
    for (int i = 0; i < 200; i++)
      EXPECT_EQ(sample_token(kLogits.data(), (int)kLogits.size(), {temperature, 0, 1e-6f}, rng, scratch), 1);
}

TEST(SamplingToken, FrequenciesMatchSoftmax) {
  const int draws = 200000;
  for (float temperature : {1.0f, 0.5f, 2.0f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    const std::vector<int> counts = counts_of({temperature, 0, 1.0f}, draws, 11);
    const std::vector<double> p = softmax(kLogits, temperature);
    // 6 degrees of freedom: P(chi² > 30) ≈ 4e-5, so a correct sampler essentially never fails (the seed is fixed
    // anyway) while a wrong temperature or an off-by-one in the draw gives chi² in the hundreds or more.
    EXPECT_LT(chi_square(counts, p, draws), 30.0);
    for (size_t i = 0; i < p.size(); i++) {
      const double se = std::sqrt(p[i] * (1 - p[i]) / draws);
      EXPECT_NEAR((double)counts[i] / draws, p[i], 5 * se + 1e-9) << "token " << i;
    }
  }
}

TEST(SamplingToken, TopKTwoDrawsOnlyTheTopTwoInProportion) {
  const int draws = 100000;
  const std::vector<int> counts = counts_of({1.0f, 2, 1.0f}, draws, 12);
  // Top two: tokens 1 (2.0) and 5 (1.9), renormalised.
  std::vector<double> p(kLogits.size(), 0.0);
  const double e1 = std::exp(2.0), e5 = std::exp(1.9);
  p[1] = e1 / (e1 + e5), p[5] = e5 / (e1 + e5);
  EXPECT_LT(chi_square(counts, p, draws), 20.0);  // 1 degree of freedom
  EXPECT_EQ(counts[1] + counts[5], draws);
}

TEST(SamplingToken, TopPKeepsTheSmallestNucleus) {
  const std::vector<double> full = softmax(kLogits);
  // Sorted: 1, 5, 3, 0, 4, 2, 6. Choose top_p between the mass of the first two and the first three.
  const double two = full[1] + full[5], three = two + full[3];
  const float top_p = (float)((two + three) / 2);
  const int draws = 100000;
  const std::vector<int> counts = counts_of({1.0f, 0, top_p}, draws, 13);
  std::vector<double> p(kLogits.size(), 0.0);
  for (int id : {1, 5, 3}) p[id] = full[id] / three;
  EXPECT_LT(chi_square(counts, p, draws), 25.0);  // 2 degrees of freedom
}

// Top-k and top-p together on distinct logits: the nucleus is cut in probability order inside the k kept, so the
// k kept must be sorted (a partial selection such as nth_element keeps the right k in some other order, and the cut
// then keeps the wrong tokens). Checked against the distribution computed here in double precision, for kLogits
// and for 40 distinct logits in shuffled order.
TEST(SamplingToken, TopKThenTopPOnDistinctLogitsCutsInProbabilityOrder) {
  std::vector<float> shuffled(40);
  for (int i = 0; i < 40; i++) shuffled[i] = 0.1f * (float)((i * 17) % 40);  // 0 … 3.9, each once, out of order
  for (const std::vector<float>& logits : {kLogits, shuffled}) {
    const int V = (int)logits.size(), k = V == 7 ? 4 : 12;
    std::vector<int> order(V);
    for (int i = 0; i < V; i++) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    // Renormalised over the top k; top_p halfway between the mass of the first 2 and the first 3 of them.
    const std::vector<double> full = softmax(logits);
    double top = 0;
    for (int i = 0; i < k; i++) top += full[order[i]];
    const double two = (full[order[0]] + full[order[1]]) / top, three = two + full[order[2]] / top;
    const SamplingOptions o{1.0f, k, (float)((two + three) / 2)};
    const int draws = 60000;
    Rng rng(21);
    std::vector<std::pair<float, int>> scratch;
    std::vector<int> counts(V, 0);
    for (int i = 0; i < draws; i++) counts.at(sample_token(logits.data(), V, o, rng, scratch))++;
    std::vector<double> p(V, 0.0);
    const double kept = full[order[0]] + full[order[1]] + full[order[2]];
    for (int i = 0; i < 3; i++) p[order[i]] = full[order[i]] / kept;
    EXPECT_LT(chi_square(counts, p, draws), 25.0) << "V = " << V;  // 2 degrees of freedom
  }
}

TEST(SamplingToken, FixedSeedGivesIdenticalSequences) {
  auto draw = [](uint64_t seed) {
    Rng rng(seed);
    std::vector<std::pair<float, int>> scratch;
    std::vector<int> out;
    for (int i = 0; i < 300; i++) out.push_back(sample_token(kLogits.data(), (int)kLogits.size(), {}, rng, scratch));
    return out;
  };
  EXPECT_EQ(draw(5), draw(5));
  EXPECT_NE(draw(5), draw(6));
}

TEST(SamplingToken, ValidateRejectsOutOfRangeOptions) {
  auto message = [](SamplingOptions o) -> std::string {
    try {
      validate(o);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message({}), "");
  EXPECT_EQ(message({0.0f, 0, 1.0f}), "");
  EXPECT_NE(message({-0.1f, 40, 0.9f}).find("--temperature"), std::string::npos);
  EXPECT_NE(message({NAN, 40, 0.9f}).find("--temperature"), std::string::npos);
  EXPECT_NE(message({INFINITY, 40, 0.9f}).find("--temperature"), std::string::npos);
  EXPECT_NE(message({1.0f, 40, 0.0f}).find("--top-p"), std::string::npos);
  EXPECT_NE(message({1.0f, 40, 1.01f}).find("--top-p"), std::string::npos);
  EXPECT_NE(message({1.0f, 40, NAN}).find("--top-p"), std::string::npos);
  EXPECT_NE(message({1.0f, -1, 0.9f}).find("--top-k"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// score_text

namespace {

// −ln softmax(logits)[target], in double, from a row of logits.
double nll(const float* logits, int V, int target) {
  double max = *std::max_element(logits, logits + V);
  double total = 0;
  for (int v = 0; v < V; v++) total += std::exp((double)logits[v] - max);
  return std::log(total) - ((double)logits[target] - max);
}

}  // namespace

TEST(SamplingScore, ShortTextEqualsOneForwardPass) {
  set_threads(1);
  auto model = random_model("causal", 2, 8);
  const int V = model->config.vocab_size;
  for (int n : {2, 5, 9}) {  // 9 = block_size + 1: one full window
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<int> tokens = random_tokens(n, V, 20 + n);
    const TextScore s = score_text(*model, tokens);
    EXPECT_EQ(s.predictions, n - 1);
    // Independently: the logits of one forward over tokens[0..n-2], log-softmax computed here.
    model->forward(tokens.data(), nullptr, 1, n - 1);
    double total = 0;
    for (int t = 0; t < n - 1; t++) total += nll(model->logits() + (size_t)t * V, V, tokens[t + 1]);
    EXPECT_NEAR(s.nats_per_token, total / (n - 1), 1e-5);
    EXPECT_NEAR(s.bits_per_token, s.nats_per_token / std::log(2.0), 1e-12);
    // And it is the plain mean loss of that forward pass.
    std::vector<int> targets(tokens.begin() + 1, tokens.end());
    const float mean = model->forward(tokens.data(), targets.data(), 1, n - 1);
    EXPECT_NEAR(s.nats_per_token, mean, 1e-5);
  }
}

TEST(SamplingScore, LongTextPredictsEveryCharacterOnce) {
  // A model without attention output and without position embeddings predicts from the current token alone, so
  // however the text is cut into windows the exact score is the mean of a bigram table computed here. A position
  // scored twice, skipped, or paired with the wrong target changes the mean.
  set_threads(1);
  auto model = random_model("causal", 2, 8);
  const ModelConfig& c = model->config;
  const int V = c.vocab_size;
  for (const TensorSpec& t : model->table())
    if (t.name == "wpe.weight" || t.name.find("attn.c_proj") != std::string::npos)
      std::fill(model->params_memory().begin() + t.offset, model->params_memory().begin() + t.offset + t.numel, 0.0f);
  std::vector<std::vector<double>> bigram(V, std::vector<double>(V));
  for (int a = 0; a < V; a++) {
    model->forward(&a, nullptr, 1, 1);
    for (int b = 0; b < V; b++) bigram[a][b] = nll(model->logits(), V, b);
  }
  for (int n : {10, 11, 17, 40, 101}) {
    for (int batch : {1, 2, 16}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", batch = " + std::to_string(batch));
      const std::vector<int> tokens = random_tokens(n, V, 100 + n);
      const TextScore s = score_text(*model, tokens, batch);
      EXPECT_EQ(s.predictions, n - 1);
      double total = 0;
      for (int i = 0; i + 1 < n; i++) total += bigram[tokens[i]][tokens[i + 1]];
      EXPECT_NEAR(s.nats_per_token, total / (n - 1), 2e-5);
      EXPECT_NEAR(s.bits_per_token, s.nats_per_token / std::log(2.0), 1e-12);
    }
  }
}

TEST(SamplingScore, LongTextWithContextCountsEveryPrediction) {
  set_threads(1);
  auto model = random_model("causal", 2, 8);
  for (int n : {10, 12, 33, 64, 100}) {
    const std::vector<int> tokens = random_tokens(n, model->config.vocab_size, 200 + n);
    const TextScore s = score_text(*model, tokens, 3);
    EXPECT_EQ(s.predictions, n - 1) << "n = " << n;
    EXPECT_TRUE(std::isfinite(s.nats_per_token));
    EXPECT_NEAR(s.bits_per_token, s.nats_per_token / std::log(2.0), 1e-12);
  }
}

TEST(SamplingScore, TooShortTextThrows) {
  auto model = random_model("causal");
  EXPECT_THROW(score_text(*model, {3}), std::runtime_error);
  EXPECT_THROW(score_text(*model, {}), std::runtime_error);
}
