// The RWKV-7 mixer kind in the whole model (src/model/mixers/rwkv.cpp over src/ops/rwkv.h; test_rwkv.cpp tests the
// op alone):
//   * the fast model, rwkv-only and hybrid (softmax,rwkv / rwkv,mamba), at odd sizes (N = 1 and N > 1, T across
//     the op's chunk of 16), against the double reference model (textbook/reference.h, whose rwkv layer is
//     textbook/rwkv.h and whose rwkv backward is central differences of it): loss, logits, M, every gradient; and
//     the reference against finite differences of the whole model;
//   * the tensor table: the issue's names and shapes, the initialisation, which tensors AdamW decays and Muon takes;
//   * decoding with the O(1) state against full recomputation, across slides of the context window;
//   * the setting rwkv_lora: flag, range, metadata; checkpoints whose rwkv tensors have the wrong shape refused,
//     naming the tensor;
//   * masks other than causal refused saying why, head gates refused;
//   * the lab: mixing_weights is M, the page describes it in the kind's own words, head scores stay finite;
//   * ./train --attention rwkv → --resume (exactly the straight run) → ./sample → ./sample --score, the score
//     against the reference model loaded by tensor name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/threads.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "data/dataset.h"
#include "io/safetensors.h"
#include "lab/head_scores.h"
#include "lab/html_report.h"
#include "model/decoder.h"
#include "model/model.h"
#include "model_check.h"
#include "ops/mamba.h"
#include "ops/rwkv.h"
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

struct ModelCase {
  std::string attention;
  int n_layer, n_head, n_embd, lora;
  bool attn_only = false;
  ModelConfig config(int block, int vocab) const {
    ModelConfig c;
    c.n_layer = n_layer, c.n_head = n_head, c.n_embd = n_embd, c.block_size = block, c.vocab_size = vocab;
    c.mixer = attention, c.attn_only = attn_only;
    c.mixer_settings.get<RwkvSettings>().rwkv_lora = lora;
    MambaSettings& m = c.mixer_settings.get<MambaSettings>();  // small, for the rwkv,mamba hybrid
    m.ssm_state = 2, m.ssm_expand = 1, m.ssm_conv = 2;
    return c;
  }
  std::string describe() const {
    return attention + " L=" + std::to_string(n_layer) + " NH=" + std::to_string(n_head) + " C=" +
           std::to_string(n_embd) + " D=" + std::to_string(lora) + (attn_only ? " attn-only" : "");
  }
};

// N = 3, 2 and 4; hybrids both ways round; an attention-only model. (N = 1 is the op tests': in a model a
// one-channel head's GroupNorm output is ln_x.bias whatever y is, so the recurrence's gradients are float noise
// around an exact 0, and a tensor-by-tensor relative comparison has no scale to measure them against.)
const ModelCase kCases[] = {
    {"rwkv", 2, 2, 6, 3},          {"rwkv", 1, 2, 4, 2},        {"softmax,rwkv", 2, 2, 8, 2},
    {"rwkv,mamba", 2, 2, 8, 3},    {"rwkv", 2, 2, 4, 1, true},
};

std::vector<int> targets_with_gaps(int n, int V, uint32_t seed) {
  std::vector<int> y = random_ids(n, V, seed);
  for (int i = 0; i < n; i++)
    if (i % 4 == 2) y[i] = kNoTarget;
  return y;
}

std::unique_ptr<GPT> random_model(const ModelCase& mc, int block, int vocab, uint64_t seed) {
  return testutil::random_model(mc.config(block, vocab), seed);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The model against the reference

TEST(RwkvModel, FastModelMatchesReference) {
  SingleThread one;
  const int B = 2, V = 7;
  for (const ModelCase& mc : kCases)
    for (int T : {3, 19}) {  // 19: the op's states recomputed across a chunk boundary
      SCOPED_TRACE(mc.describe() + " T=" + std::to_string(T));
      expect_fast_matches_reference(mc.config(19, V), {}, random_ids(B * T, V, 11 + T),
                                    targets_with_gaps(B * T, V, 12 + T), B, T, 202, /*gradient_floor=*/1e-2);
    }
}

TEST(RwkvModel, ReferenceMatchesFiniteDifferences) {
  SingleThread one;
  const int B = 1, T = 5, V = 5;
  for (const ModelCase& mc : {ModelCase{"rwkv,softmax", 2, 2, 4, 2}, ModelCase{"rwkv", 1, 1, 3, 1}}) {
    SCOPED_TRACE(mc.describe());
    expect_reference_matches_finite_differences(mc.config(T, V), {}, random_ids(B * T, V, 21), random_ids(B * T, V, 22),
                                                B, T);
  }
}

TEST(RwkvModel, TwoThreadsMatchReference) {
  const int saved = default_threads();
  set_threads(2);
  const int B = 3, T = 9, V = 7;
  expect_fast_matches_reference(ModelCase{"softmax,rwkv", 2, 2, 8, 3}.config(T, V), {}, random_ids(B * T, V, 31),
                                targets_with_gaps(B * T, V, 32), B, T, 202, /*gradient_floor=*/1e-2);
  set_threads(saved);
}

// ---------------------------------------------------------------------------------------------------------------
// The tensor table

TEST(RwkvModel, TensorsNamesShapesInitAndOptimizerGroups) {
  const ModelConfig c = ModelCase{"softmax,rwkv", 2, 4, 32, 8}.config(16, 11);
  GPT model(c);
  model.init_weights(7);
  const int64_t C = 32, D = 8;
  struct Expect {
    std::string name;
    std::vector<int64_t> shape;
    bool decay_and_muon;
  };
  const std::vector<Expect> expected = {
      {"h.1.rwkv.mix", {6, C}, false},           {"h.1.rwkv.receptance.weight", {C, C}, true},
      {"h.1.rwkv.key.weight", {C, C}, true},     {"h.1.rwkv.value.weight", {C, C}, true},
      {"h.1.rwkv.output.weight", {C, C}, true},  {"h.1.rwkv.w0", {C}, false},
      {"h.1.rwkv.w1", {C, D}, false},            {"h.1.rwkv.w2", {D, C}, false},
      {"h.1.rwkv.a0", {C}, false},               {"h.1.rwkv.a1", {C, D}, false},
      {"h.1.rwkv.a2", {D, C}, false},            {"h.1.rwkv.g1", {C, D}, false},
      {"h.1.rwkv.g2", {D, C}, false},            {"h.1.rwkv.k_k", {C}, false},
      {"h.1.rwkv.k_a", {C}, false},              {"h.1.rwkv.r_k", {C}, false},
      {"h.1.rwkv.ln_x.weight", {C}, false},      {"h.1.rwkv.ln_x.bias", {C}, false},
  };
  std::vector<const TensorSpec*> rwkv;
  for (const TensorSpec& t : model.table())
    if (t.name.find(".rwkv.") != std::string::npos) rwkv.push_back(&t);
  ASSERT_EQ(rwkv.size(), expected.size());
  for (size_t i = 0; i < expected.size(); i++) {
    EXPECT_EQ(rwkv[i]->name, expected[i].name);
    EXPECT_EQ(rwkv[i]->shape, expected[i].shape) << expected[i].name;
    EXPECT_EQ(rwkv[i]->weight_decay, expected[i].decay_and_muon) << expected[i].name;
    EXPECT_EQ(rwkv[i]->matrix, expected[i].decay_and_muon) << expected[i].name;
  }
  auto values = [&](const std::string& name) {
    for (const TensorSpec& t : model.table())
      if (t.name == name)
        return std::vector<float>(model.params_memory().data() + t.offset,
                                  model.params_memory().data() + t.offset + t.numel);
    ADD_FAILURE() << "no " << name;
    return std::vector<float>{};
  };
  for (float w : values("h.1.rwkv.output.weight")) ASSERT_EQ(w, 0.0f);
  for (const char* zero : {"h.1.rwkv.w1", "h.1.rwkv.a1", "h.1.rwkv.g1", "h.1.rwkv.ln_x.bias"})
    for (float w : values(zero)) ASSERT_EQ(w, 0.0f) << zero;
  for (float w : values("h.1.rwkv.k_a")) EXPECT_EQ(w, 1.02f);
  for (float w : values("h.1.rwkv.r_k")) EXPECT_EQ(w, -0.04f);
  for (float w : values("h.1.rwkv.ln_x.weight")) EXPECT_EQ(w, 1.0f);
  for (float w : values("h.1.rwkv.key.weight")) EXPECT_LE(std::fabs(w), 0.05 / std::sqrt((double)C));
  double largest = 0;
  for (float w : values("h.1.rwkv.receptance.weight")) largest = std::max(largest, (double)std::fabs(w));
  EXPECT_LE(largest, 0.5 / std::sqrt((double)C));
  EXPECT_GT(largest, 0.4 / std::sqrt((double)C));
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding

// Every pushed token's logits against a full forward of the decoder's context, through slides of the window, and
// after a reset (model_check.h). block 24: re-encodings of 12 positions
// and contexts that reach past the op's chunk of 16.
TEST(RwkvDecoding, StateMatchesFullRecomputeAcrossSlides) {
  SingleThread one;
  const int V = 11;
  for (const ModelCase& mc : kCases)
    for (int block : {8, 24}) {
      SCOPED_TRACE(mc.describe() + " block=" + std::to_string(block));
      expect_decoder_matches_full_forward(*random_model(mc, block, V, 5), 3 * block + 3);
    }
}

// O(1) in the context: per rwkv layer C + H·N² floats (u_{t−1} and S), whatever block_size is.
TEST(RwkvDecoding, StateSizeIsIndependentOfTheContext) {
  for (int block : {8, 64}) {
    EXPECT_EQ(Decoder(*random_model(ModelCase{"rwkv", 2, 2, 8, 3}, block, 11, 1)).memory_floats(),
              2 * (size_t)(8 + 2 * 4 * 4));
    GPT model(ModelCase{"rwkv", 1, 4, 128, 32}.config(block, 11));  // the tiny model's shape: 128 + 4·32² = 4224
    EXPECT_EQ(model.mixer(0).state_floats(model.masks()[0]), 4224u);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Masks, head gates, settings, checkpoints

TEST(RwkvModel, RefusesEveryMaskButCausalSayingWhy) {
  const ModelConfig c = ModelCase{"softmax,rwkv", 2, 2, 8, 3}.config(8, 7);
  for (const char* text : {"bidirectional", "prefix:3", "window:3"}) {
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
  EXPECT_NO_THROW(GPT(c, parse_layer_masks("window:3,causal", 2)));
  GPT model(c);
  try {
    model.enable_head_gates();
    ADD_FAILURE() << "head gates on an rwkv layer";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rwkv"), std::string::npos) << e.what();
  }
}

TEST(RwkvModel, SettingIsCheckedNamingItsFlag) {
  ModelConfig c = ModelCase{"rwkv", 2, 2, 8, 3}.config(8, 7);
  EXPECT_NO_THROW(validate(c));
  for (int bad : {0, -1, 5000}) {
    ModelConfig b = c;
    b.mixer_settings.get<RwkvSettings>().rwkv_lora = bad;
    // The row's range alone (what ./train's flag and a checkpoint's metadata meet first), then validate, which also
    // meets the op's own check (RwkvDims::make, for callers of ops/rwkv.h that bypass the table).
    for (const bool table_only : {true, false}) {
      try {
        if (table_only) check_ranges(model_settings(), b);
        else validate(b);
        ADD_FAILURE() << "accepted rwkv_lora " << bad << (table_only ? " in the settings row's range" : "");
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("--rwkv-lora"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_NE(describe(c).find("rwkv (lora 3)"), std::string::npos) << describe(c);
  EXPECT_EQ(ModelConfig{}.mixer_settings.get<RwkvSettings>().rwkv_lora, 32);
}

// The metadata records rwkv_lora; it loads back; the committed fixture, older than the kind, loads with the default.
// A checkpoint whose rwkv tensor has another shape is refused, naming the tensor and both shapes.
TEST(RwkvModel, CheckpointRoundTripAndWrongShapesRefused) {
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  GPT model(ModelCase{"softmax,rwkv", 2, 2, 8, 3}.config(8, tok.size()));
  model.init_weights(4);
  const std::string path = dir / "m.safetensors";
  save_checkpoint(path, model, tok, nullptr);
  SafetensorsContents file = read_safetensors(path);
  EXPECT_EQ(file.metadata.at("mixer"), "softmax,rwkv");
  EXPECT_EQ(file.metadata.at("rwkv_lora"), "3");
  Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.model->config.mixer_settings.get<RwkvSettings>().rwkv_lora, 3);
  EXPECT_STREQ(loaded.model->mixer(1).kind(), "rwkv");
  const std::vector<int> x = {1, 2, 3, 4, 5, 6, 7};
  model.forward(x.data(), nullptr, 1, 7);
  loaded.model->forward(x.data(), nullptr, 1, 7);
  for (int i = 0; i < 7 * tok.size(); i++) ASSERT_EQ(model.logits()[i], loaded.model->logits()[i]);
  Checkpoint old = load_checkpoint(progutil::source_root() + "/tests/fixtures/ckpt_5b9387c.safetensors");
  EXPECT_EQ(old.model->config.mixer_settings.get<RwkvSettings>().rwkv_lora, 32);

  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"h.1.rwkv.w1", {3, 8}}, {"h.1.rwkv.mix", {8, 6}}, {"h.1.rwkv.k_k", {2, 4}}}) {
    SCOPED_TRACE(name);
    std::vector<TensorView> views;
    for (const auto& [n, t] : file.tensors) views.push_back({n, n == name ? shape : t.shape, t.data.data()});
    std::map<std::string, std::string> meta = file.metadata;
    meta.erase(kDataChecksumKey), meta.erase(kHeaderChecksumKey);
    const std::string bad = dir / "bad.safetensors";
    write_safetensors(bad, views, meta);
    try {
      load_checkpoint(bad);
      ADD_FAILURE() << "loaded a checkpoint whose " << name << " has the wrong shape";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + name + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the config needs"), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The lab

TEST(RwkvLab, PageDescribesMAndHeadScoresAreFinite) {
  SingleThread one;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefghijklmnop");
  GPT model(ModelCase{"softmax,rwkv", 2, 2, 8, 3}.config(16, tok.size()));
  model.init_weights(3);
  const std::vector<HeadScores> scores = score_heads(model, 8, 2, 11);
  ASSERT_EQ(scores.size(), 4u);
  for (const HeadScores& s : scores) {
    EXPECT_TRUE(std::isfinite(s.previous_token.value()));
    EXPECT_TRUE(std::isfinite(s.induction.value()));
  }
  const int T = model.last_T();
  const float* M = model.mixing_weights(1);
  for (int i = 0; i < T; i++)
    for (int j = i + 1; j < T; j++) ASSERT_EQ(M[(size_t)i * T + j], 0.0f);
  EXPECT_FALSE(model.mixer(1).lab().weights_are_probabilities());
  const AttentionDump d = dump_attention(model, tok.encode(U"abcabcd", "prompt"), tok);
  const std::string html = attention_html(d, "t");
  EXPECT_NE(html.find("RWKV-7 layers show the attention their recurrence implies"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// The programs

namespace {
std::vector<float> weights_of(const std::string& path) { return load_checkpoint(path).model->params_memory().to_vector(); }
}  // namespace

// ./train --attention rwkv: 6 steps straight, and 3 steps then --resume, end on the same weights bit for bit; the
// checkpoint samples (the O(1) state) and scores, and the score equals the double reference model's loss over the
// checkpoint's tensors read by their names. A hybrid trains too; a bad --rwkv-lora and a non-causal mask fail
// cleanly, saying why.
TEST(RwkvPrograms, TrainResumeSampleAndScore) {
  ASSERT_TRUE(progutil::file_exists("./train") && progutil::file_exists("./sample"))
      << "run the tests from the repository root after `make programs`";
  progutil::TempDir dir;
  const std::string corpus = dir / "corpus.txt", text_file = dir / "held_out.txt";
  progutil::write_file(corpus, progutil::generated_text(4000));
  progutil::write_file(text_file, "The cat sat on");
  auto run = [&](const std::string& command) { return progutil::run_command(command, dir.path()); };
  auto train = [&](const std::string& out, const std::string& extra) {
    return run("./train " + std::string(progutil::tiny_flags()) + " --data " + progutil::quote(corpus) + " --out " +
               progutil::quote(out) + " " + extra);
  };
  for (const std::string& flags : {std::string("--attention rwkv --rwkv-lora 4"),
                                   std::string("--n-layer 2 --layer-attention softmax,rwkv --optimizer muon")}) {
    SCOPED_TRACE(flags);
    const std::string straight = dir / "straight", out = dir / "rwkv";
    std::filesystem::remove_all(straight), std::filesystem::remove_all(out);
    progutil::RunResult r = train(straight, flags + " --steps 6");
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    r = train(out, flags + " --steps 6 --stop-at 3");
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    r = run("./train --resume " + progutil::quote(out));
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    const std::string ckpt = out + "/ckpt.safetensors";
    EXPECT_EQ(weights_of(ckpt), weights_of(straight + "/ckpt.safetensors")) << "resume is not exact";
    Checkpoint c = load_checkpoint(ckpt);
    EXPECT_EQ(c.resume.step, 6);
    EXPECT_NE(c.model->config.mixer.find("rwkv"), std::string::npos);
    r = run("./sample --threads 1 --ckpt " + progutil::quote(ckpt) + " --prompt 'The' -n 40 --seed 3");
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    EXPECT_GE(r.out.size(), 43u);
    r = run("./sample --threads 1 --ckpt " + progutil::quote(ckpt) + " --score " + progutil::quote(text_file));
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(([0-9.]+) nats/char)"))) << r.out;
    const std::vector<int> ids = c.tokenizer.encode(read_text_file(text_file), text_file);
    const int T = (int)ids.size() - 1;
    ReferenceGPT<double> ref(c.model->config, c.model->masks());
    const SafetensorsContents file = read_safetensors(ckpt);
    for (const TensorSpec& t : ref.table) {  // by name, from the file: the names are the contract
      const std::vector<float>& data = file.tensors.at(t.name).data;
      ASSERT_EQ(data.size(), t.numel) << t.name;
      std::copy(data.begin(), data.end(), ref.params.begin() + t.offset);
    }
    const double nats = ref.forward(std::vector<int>(ids.begin(), ids.end() - 1),
                                    std::vector<int>(ids.begin() + 1, ids.end()), 1, T);
    EXPECT_NEAR(std::stod(m[1]), nats, 1e-4);
  }
  auto expect_clean_failure = [](const progutil::RunResult& r, const std::vector<std::string>& words) {
    EXPECT_TRUE(r.exited && r.exit_code == 1) << r.describe();
    EXPECT_NE(r.err.find("train: error: "), std::string::npos) << r.err;
    for (const std::string& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << r.err;
  };
  expect_clean_failure(train(dir / "bad", "--attention rwkv --mask bidirectional --steps 2"),
                       {"bidirectional", "causal by construction"});
  expect_clean_failure(train(dir / "bad", "--attention rwkv --rwkv-lora 0 --steps 2"), {"--rwkv-lora"});
}
