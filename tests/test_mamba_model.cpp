// The Mamba mixer kind in the whole model (src/model/mixers/mamba.cpp over src/ops/mamba.h; test_mamba.cpp tests the
// op alone):
//   * the fast model, mamba-only and hybrid (softmax,mamba / mamba,linear), selective or not, conv 0/1/3/4, odd
//     sizes, against the double reference model (textbook/reference.h, whose Mamba layer is textbook/mamba.h and
//     whose Mamba backward is central differences of it): loss, logits, the hidden attention M, every gradient;
//     and the reference against finite differences of the whole model;
//   * the tensor table: names, shapes, initialisation, which tensors AdamW decays and Muon takes;
//   * decoding with the O(1) state against full recomputation, across slides of the context window;
//   * the settings: flags, ranges, metadata (old checkpoints load as before);
//   * masks other than causal refused by name, head gates refused;
//   * the lab: mixing_weights is M, head scores stay finite.
// Exact resume of a mamba run is in test_training.cpp, ./train --mixer mamba end to end in test_programs.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/threads.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "lab/head_scores.h"
#include "model/decoder.h"
#include "model/model.h"
#include "ops/mamba.h"
#include "model_check.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/reference.h"

using namespace testutil;

namespace {

struct SingleThread {
  int saved = default_threads();
  SingleThread() { set_threads(1); }
  ~SingleThread() { set_threads(saved); }
};

// A model's shape and its Mamba settings.
struct ModelCase {
  std::string attention;
  int n_layer, n_head, n_embd, state, expand, conv, selective;
  bool attn_only = false;
  ModelConfig config(int block, int vocab) const {
    ModelConfig c;
    c.n_layer = n_layer, c.n_head = n_head, c.n_embd = n_embd, c.block_size = block, c.vocab_size = vocab;
    c.mixer = attention, c.attn_only = attn_only;
    MambaSettings& m = c.mixer_settings.get<MambaSettings>();
    m.ssm_state = state, m.ssm_expand = expand, m.ssm_conv = conv, m.ssm_selective = selective;
    return c;
  }
  std::string describe() const {
    return attention + " L=" + std::to_string(n_layer) + " NH=" + std::to_string(n_head) + " C=" +
           std::to_string(n_embd) + " N=" + std::to_string(state) + " expand=" + std::to_string(expand) +
           " K=" + std::to_string(conv) + " selective=" + std::to_string(selective) + (attn_only ? " attn-only" : "");
  }
};

// Odd widths (C = 6 with 3 heads: P = 4; C = 5 with one head and expand 3: P = 15), N = 3 and 1, every conv width
// that matters (0: none, 1: a scale, 3 and 4 > T for the short sequence), both variants, hybrids both ways round.
const ModelCase kCases[] = {
    {"mamba", 2, 2, 8, 3, 2, 4, 1},          {"mamba", 2, 2, 8, 3, 2, 4, 0},
    {"mamba", 1, 3, 6, 1, 2, 0, 1},          {"mamba", 1, 1, 5, 2, 3, 1, 0},
    {"softmax,mamba", 2, 3, 6, 3, 2, 3, 1},  {"mamba,linear", 2, 2, 8, 2, 1, 4, 1},
    {"mamba,softmax", 2, 2, 4, 2, 2, 0, 0},  {"mamba", 2, 2, 4, 2, 2, 2, 1, true},
};

std::vector<int> targets_with_gaps(int n, int V, uint32_t seed) {
  std::vector<int> y = random_ids(n, V, seed);
  for (int i = 0; i < n; i++)
    if (i % 4 == 2) y[i] = kNoTarget;
  return y;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The model against the reference

TEST(MambaModel, FastModelMatchesReference) {
  SingleThread one;
  const int B = 2, V = 7;
  for (const ModelCase& mc : kCases)
    for (int T : {3, 9}) {
      SCOPED_TRACE(mc.describe() + " T=" + std::to_string(T));
      const ModelConfig c = mc.config(9, V);
      expect_fast_matches_reference(c, {}, random_ids(B * T, V, 11 + T), targets_with_gaps(B * T, V, 12 + T), B, T);
    }
}

// The reference's backward (analytic around the Mamba layers, finite differences through them) against central
// differences of the whole reference model: the pieces are wired together right, and no gradient is all zero.
TEST(MambaModel, ReferenceMatchesFiniteDifferences) {
  SingleThread one;
  const int B = 1, T = 5, V = 5;
  for (const ModelCase& mc : {ModelCase{"mamba,softmax", 2, 2, 4, 2, 1, 3, 1}, ModelCase{"mamba", 1, 2, 4, 2, 1, 2, 0}}) {
    SCOPED_TRACE(mc.describe());
    expect_reference_matches_finite_differences(mc.config(T, V), {}, random_ids(B * T, V, 21), random_ids(B * T, V, 22),
                                                B, T);
  }
}

// Two threads split the op's (batch, head) pairs and channels: the same gradients.
TEST(MambaModel, TwoThreadsMatchReference) {
  const int saved = default_threads();
  set_threads(2);
  const int B = 3, T = 9, V = 7;
  expect_fast_matches_reference(ModelCase{"softmax,mamba", 2, 2, 8, 3, 2, 4, 1}.config(T, V), {},
                                random_ids(B * T, V, 31), targets_with_gaps(B * T, V, 32), B, T);
  set_threads(saved);
}

// ---------------------------------------------------------------------------------------------------------------
// The tensor table

TEST(MambaModel, TensorsNamesShapesInitAndOptimizerGroups) {
  ModelConfig c = ModelCase{"softmax,mamba", 2, 4, 32, 16, 2, 4, 1}.config(16, 11);
  GPT model(c);
  model.init_weights(7);
  const int C = 32, E = 64, N = 16, H = 4, K = 4;
  struct Expect {
    std::string name;
    std::vector<int64_t> shape;
    bool decay, matrix;
  };
  const std::vector<Expect> expected = {
      {"h.1.mamba.in_proj.weight", {C, 2 * E + 2 * N + H}, true, true},
      {"h.1.mamba.conv1d.weight", {E + 2 * N, K}, false, false},
      {"h.1.mamba.conv1d.bias", {E + 2 * N}, false, false},
      {"h.1.mamba.dt_bias", {H}, false, false},
      {"h.1.mamba.A_log", {H}, false, false},
      {"h.1.mamba.D", {H}, false, false},
      {"h.1.mamba.norm.weight", {E}, false, false},
      {"h.1.mamba.out_proj.weight", {E, C}, true, true},
  };
  std::vector<const TensorSpec*> mamba;
  for (const TensorSpec& t : model.table())
    if (t.name.find("mamba") != std::string::npos) mamba.push_back(&t);
  ASSERT_EQ(mamba.size(), expected.size());
  for (size_t i = 0; i < expected.size(); i++) {
    EXPECT_EQ(mamba[i]->name, expected[i].name);
    EXPECT_EQ(mamba[i]->shape, expected[i].shape) << expected[i].name;
    EXPECT_EQ(mamba[i]->weight_decay, expected[i].decay) << expected[i].name;
    EXPECT_EQ(mamba[i]->matrix, expected[i].matrix) << expected[i].name;
  }
  auto values = [&](const std::string& name) {
    for (const TensorSpec& t : model.table())
      if (t.name == name) return std::vector<float>(model.params_memory().data() + t.offset,
                                                     model.params_memory().data() + t.offset + t.numel);
    ADD_FAILURE() << "no " << name;
    return std::vector<float>{};
  };
  auto std_dev = [](const std::vector<float>& v) {
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += (double)x * x;
    return std::sqrt(s2 / v.size() - (s / v.size()) * (s / v.size()));
  };
  for (float b : values("h.1.mamba.dt_bias")) {
    const double dt = std::log1p(std::exp((double)b));  // softplus
    EXPECT_GE(dt, 1e-3 * (1 - 1e-5));
    EXPECT_LE(dt, 1e-1 * (1 + 1e-5));
  }
  for (float a : values("h.1.mamba.A_log")) EXPECT_TRUE(std::exp(a) >= 1 && std::exp(a) <= 16) << a;
  for (float d : values("h.1.mamba.D")) EXPECT_EQ(d, 1.0f);
  for (float w : values("h.1.mamba.norm.weight")) EXPECT_EQ(w, 1.0f);
  for (const char* conv : {"h.1.mamba.conv1d.weight", "h.1.mamba.conv1d.bias"}) {
    const std::vector<float> v = values(conv);
    for (float w : v) EXPECT_LE(std::fabs(w), 1.0f / std::sqrt((float)K)) << conv;
    EXPECT_NEAR(std_dev(v), 0.5 / std::sqrt(3.0), 0.1) << conv;  // U(−½, ½) for K = 4
  }
  EXPECT_NEAR(std_dev(values("h.1.mamba.in_proj.weight")), 0.02, 0.002);
  EXPECT_NEAR(std_dev(values("h.1.mamba.out_proj.weight")), 0.02 / std::sqrt(2.0 * 2), 0.001);

  // Non-selective, no conv: in_proj has only z | x, the constants B and C appear, no conv tensors.
  c.mixer_settings.get<MambaSettings>().ssm_selective = 0, c.mixer_settings.get<MambaSettings>().ssm_conv = 0;
  GPT lti(c);
  lti.init_weights(7);
  std::vector<std::string> names;
  for (const TensorSpec& t : lti.table())
    if (t.name.find("mamba") != std::string::npos) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"h.1.mamba.in_proj.weight", "h.1.mamba.dt_bias", "h.1.mamba.A_log",
                                             "h.1.mamba.D", "h.1.mamba.B", "h.1.mamba.C", "h.1.mamba.norm.weight",
                                             "h.1.mamba.out_proj.weight"}));
  for (const TensorSpec& t : lti.table()) {
    if (t.name == "h.1.mamba.in_proj.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{C, 2 * E}));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding

namespace {
std::unique_ptr<GPT> random_model(const ModelCase& mc, int block, int vocab, uint64_t seed) {
  return testutil::random_model(mc.config(block, vocab), seed);
}
}  // namespace

// Every pushed token's logits against a full forward of the decoder's context, through slides of the window, and
// after a reset (model_check.h).
TEST(MambaDecoding, StateMatchesFullRecomputeAcrossSlides) {
  SingleThread one;
  const int V = 11, block = 8;
  for (const ModelCase& mc : kCases) {
    SCOPED_TRACE(mc.describe());
    expect_decoder_matches_full_forward(*random_model(mc, block, V, 5), 27);
  }
}

// The state is O(1) in the context: per mamba layer H·P·N + (K − 1)·(E + 2N) floats (E without the 2N when not
// selective), whatever block_size is.
TEST(MambaDecoding, StateSizeIsIndependentOfTheContext) {
  const int V = 11;
  for (int block : {8, 64}) {
    const ModelCase sel{"mamba,softmax", 2, 2, 8, 3, 2, 4, 1}, lti{"mamba", 1, 2, 8, 3, 2, 4, 0};
    const int E = 16, N = 3, H = 2, P = 8, K = 4;
    EXPECT_EQ(Decoder(*random_model(sel, block, V, 1)).memory_floats(),
              (size_t)(H * P * N + (K - 1) * (E + 2 * N)) + 2 * (size_t)block * 8);
    EXPECT_EQ(Decoder(*random_model(lti, block, V, 1)).memory_floats(), (size_t)(H * P * N + (K - 1) * E));
  }
}

// The state columns of docs/mamba.md's tables (make recall-mamba, make bench-mixers), per layer, counted by hand
// from the formulas: softmax's cache 2·C·T, linear H·HS² + C (S per head and z), Mamba H·P·N + (K−1)·(E + 2N)
// (E without the 2N when not selective; no conv rows when K = 0).
TEST(MambaDecoding, StateOfEachKindMatchesAHandCount) {
  auto state = [](const std::string& kind, int C, int NH, int block, int N, int K, int selective) {
    const ModelCase mc{kind, 1, NH, C, N, 2, K, selective};
    GPT model(mc.config(block, 13));
    return model.mixer(0).state_floats(model.masks()[0]);
  };
  // recall: width 64, one head, 8 bound pairs + 8 queries → T = 23; N matched to linear's 64² + 64 = 4160
  EXPECT_EQ(state("softmax", 64, 1, 23, 16, 4, 1), 2944u);              // 2·64·23
  EXPECT_EQ(state("linear", 64, 1, 23, 16, 4, 1), 4160u);               // 64² + 64
  EXPECT_EQ(state("mamba", 64, 1, 23, 28, 4, 1), 4136u);                // 128·28 + 3·(128 + 56)
  EXPECT_EQ(state("mamba", 64, 1, 23, 29, 4, 0), 4096u);                // 128·29 + 3·128
  EXPECT_EQ(state("mamba", 64, 1, 23, 32, 0, 1), 4096u);                // 128·32, no conv
  EXPECT_EQ(state("mamba", 32, 1, 23, 12, 4, 1), 1032u);                // 64·12 + 3·(64 + 24): width 32
  // the tiny model (C = 128, 4 heads of 32; Mamba P = 64, N = 16, K = 4) at T = 256
  EXPECT_EQ(state("softmax", 128, 4, 256, 16, 4, 1), 65536u);           // 2·128·256
  EXPECT_EQ(state("linear", 128, 4, 256, 16, 4, 1), 4224u);             // 4·32² + 128
  EXPECT_EQ(state("mamba", 128, 4, 256, 16, 4, 1), 4960u);              // 4·64·16 + 3·(256 + 32)
}

// ---------------------------------------------------------------------------------------------------------------
// Masks, head gates, settings

TEST(MambaModel, RefusesEveryMaskButCausalSayingWhy) {
  const ModelConfig c = ModelCase{"softmax,mamba", 2, 2, 8, 3, 2, 4, 1}.config(8, 7);
  for (const char* text : {"bidirectional", "prefix:3", "prefix:0", "window:3", "window:20"}) {
    try {
      GPT model(c, parse_layer_masks(std::string("causal,") + text, 2));
      ADD_FAILURE() << "accepted " << text;
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("layer 1"), std::string::npos) << what;
      EXPECT_NE(what.find(text), std::string::npos) << what;
      EXPECT_NE(what.find("causal by construction"), std::string::npos) << what;
    }
  }
  // The softmax layer keeps its mask; the mamba one is causal.
  EXPECT_NO_THROW(GPT(c, parse_layer_masks("window:3,causal", 2)));
  GPT model(c);
  EXPECT_THROW(model.set_masks(parse_layer_masks("causal,bidirectional", 2)), std::runtime_error);
  try {
    model.enable_head_gates();
    ADD_FAILURE() << "head gates on a mamba layer";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("mamba"), std::string::npos) << e.what();
  }
}

TEST(MambaModel, SettingsAreCheckedNamingTheirFlags) {
  ModelConfig c = ModelCase{"mamba", 2, 2, 8, 3, 2, 4, 1}.config(8, 7);
  EXPECT_NO_THROW(validate(c));
  auto expect_refused = [&](ModelConfig bad, const std::string& flag) {
    try {
      validate(bad);
      ADD_FAILURE() << "accepted a config that " << flag << " should refuse";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  ModelConfig bad = c;
  auto ssm = [](ModelConfig& config) -> MambaSettings& { return config.mixer_settings.get<MambaSettings>(); };
  ssm(bad).ssm_state = 0, expect_refused(bad, "--ssm-state");
  bad = c, ssm(bad).ssm_expand = 0, expect_refused(bad, "--ssm-expand");
  bad = c, ssm(bad).ssm_conv = -1, expect_refused(bad, "--ssm-conv");
  bad = c, ssm(bad).ssm_selective = 2, expect_refused(bad, "--ssm-selective");
  bad = c, bad.attn_scale = "inv", expect_refused(bad, "--attn-scale");  // no softmax logits in a mamba model
  EXPECT_NE(describe(c).find("mixer mamba (ssm state 3, expand 2, conv 4, selective)"), std::string::npos)
      << describe(c);
}

// The metadata names mamba per layer and records the ssm settings; they load back; a checkpoint without the keys
// (written before mamba existed) loads with the defaults and as before.
TEST(MambaModel, CheckpointRoundTripAndMetadata) {
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  ModelConfig c = ModelCase{"softmax,mamba,mamba", 3, 2, 8, 3, 2, 3, 0}.config(8, tok.size());
  GPT model(c);
  model.init_weights(4);
  const std::string path = dir / "m.safetensors";
  save_checkpoint(path, model, tok, nullptr);
  const auto meta = read_safetensors(path).metadata;
  EXPECT_EQ(meta.at("mixer"), "softmax,mamba,mamba");
  EXPECT_EQ(meta.at("ssm_state"), "3");
  EXPECT_EQ(meta.at("ssm_expand"), "2");
  EXPECT_EQ(meta.at("ssm_conv"), "3");
  EXPECT_EQ(meta.at("ssm_selective"), "0");
  Checkpoint loaded = load_checkpoint(path);
  EXPECT_TRUE(loaded.defaulted_settings.empty());
  EXPECT_EQ(loaded.model->config.mixer_settings.get<MambaSettings>().ssm_selective, 0);
  EXPECT_STREQ(loaded.model->mixer(2).kind(), "mamba");
  const std::vector<int> x = {1, 2, 3, 4, 5, 6, 7};
  model.forward(x.data(), nullptr, 1, 7);
  loaded.model->forward(x.data(), nullptr, 1, 7);
  for (int i = 0; i < 7 * tok.size(); i++) ASSERT_EQ(model.logits()[i], loaded.model->logits()[i]);
  // The committed fixture predates the ssm keys: they default, the model is softmax.
  Checkpoint old = load_checkpoint(progutil::source_root() + "/tests/fixtures/ckpt_5b9387c.safetensors");
  for (const char* key : {"ssm_state", "ssm_expand", "ssm_conv", "ssm_selective"})
    EXPECT_NE(std::find(old.defaulted_settings.begin(), old.defaulted_settings.end(), key),
              old.defaulted_settings.end()) << key;
  EXPECT_STREQ(old.model->mixer(0).kind(), "softmax");
}

// ---------------------------------------------------------------------------------------------------------------
// The lab

// mixing_weights of a mamba layer is M (compared with the textbook's in FastModelMatchesReference); the head scores
// read it beside softmax heads and stay finite, though M is signed and not normalised.
TEST(MambaLab, HeadScoresAreFiniteOnMambaLayers) {
  SingleThread one;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefghijklmnop");
  GPT model(ModelCase{"softmax,mamba", 2, 2, 8, 3, 2, 4, 1}.config(16, tok.size()));
  model.init_weights(3);
  const std::vector<HeadScores> scores = score_heads(model, 8, 2, 11);
  ASSERT_EQ(scores.size(), 4u);
  for (const HeadScores& s : scores) {
    EXPECT_TRUE(std::isfinite(s.previous_token.value()));
    EXPECT_TRUE(std::isfinite(s.induction.value()));
    EXPECT_TRUE(std::isfinite(s.duplicate_token.value()));
  }
  EXPECT_TRUE(std::isnan(scores[2].ov_copying));  // no values and output projection per head
  // M is exactly 0 above the diagonal.
  const int T = model.last_T();
  const float* M = model.mixing_weights(1);
  for (int i = 0; i < T; i++)
    for (int j = i + 1; j < T; j++) ASSERT_EQ(M[(size_t)i * T + j], 0.0f);
}
