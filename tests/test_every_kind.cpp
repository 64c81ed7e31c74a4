// The conformance suite: what every mixer kind must satisfy, run over the registry (model/mixers/kinds.h), each kind
// alone and every pair of kinds as a hybrid. A kind's own file tests only what is truly its own (tensor names,
// initialisation, settings, ablations); everything below holds for every kind, and a new kind is covered by its
// registration line and its textbook (textbook/mixer.h: the textbook registers the kind's test shapes too):
//   * the kind has a textbook with test shapes (a kind without them fails here, by name);
//   * the fast model against the double textbook model (loss, logits, the mixing weights, every gradient) at every
//     test shape of the kind, odd sizes, T across a chunk of 16, an MLP-less model, one and two threads; the
//     textbook against finite differences of itself;
//   * batch-split replicas: the combined gradient and loss are the whole batch's;
//   * decoding, one token at a time with the kind's state, against a full forward through slides of the window;
//     the state of a recurrence independent of the context;
//   * masks: each mask either runs and matches the textbook under it, or is refused naming the layer, the kind and
//     the mask; head gates likewise;
//   * a checkpoint round trip (same logits, bit for bit), its metadata holding no other kind's settings, and every
//     tensor of the kind refused by name when its shape is wrong;
//   * the lab: finite head scores, weights zero above the diagonal under the causal mask, the page in the kind's
//     own words;
//   * without positions (--positions none): no wpe.weight, the textbook's numbers, decoding, a round trip;
//   * the explorer's panels (model, score, refresh, mixing weights, next, generation) on a hybrid answer in finite
//     numbers, the kind's layer described in its own words;
//   * ./train → --resume (the same weights as a straight run, bit for bit) → ./sample → ./sample --score, the score
//     equal to the textbook model's loss over the checkpoint's tensors read by name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "base/threads.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "mixer_kinds.h"
#include "lab/head_scores.h"
#include "lab/html_report.h"
#include "model/decoder.h"
#include "model/mixer_lab.h"
#include "model/mixers/recurrent.h"
#include "model/model.h"
#include "explore_running.h"
#include "model_check.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/reference.h"
#include "train/loop.h"
#include "train/replicas.h"
#include "train/train_config.h"

using namespace testutil;

namespace {

struct Threads {
  int saved = default_threads();
  explicit Threads(int n) { set_threads(n); }
  ~Threads() { set_threads(saved); }
};

std::vector<int> targets_with_gaps(int n, int V, uint32_t seed) {
  std::vector<int> y = random_ids(n, V, seed);
  for (int i = 0; i < n; i++)
    if (i % 4 == 2) y[i] = kNoTarget;
  return y;
}

// The largest gradient floor of the textbooks of c's kinds (textbook/mixer.h, RefMixerKind::gradient_floor).
double gradient_floor(const ModelConfig& c) {
  double floor = 0;
  for (const std::string& kind : split_layer_list(c.mixer, c.n_layer, "mixer list"))
    floor = std::max(floor, textbook_of(kind).gradient_floor);
  return floor;
}

// Fast against textbook for one config, B = 2, T tokens.
void expect_matches_textbook(const ModelConfig& c, int T, const std::vector<AttentionMask>& masks = {}, int B = 2) {
  const int V = c.vocab_size;
  expect_fast_matches_reference(c, masks, random_ids(B * T, V, 11 + T), targets_with_gaps(B * T, V, 12 + T), B, T,
                                202, gradient_floor(c));
}

class EveryKind : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& kind() const { return GetParam(); }
  // `layers` layers of this kind at its first test shape.
  ModelConfig config(int layers, int n_head, int n_embd, int block, int vocab) const {
    std::string mixer = kind();
    for (int l = 1; l < layers; l++) mixer += "," + kind();
    return kind_config(mixer, n_head, n_embd, block, vocab);
  }
};

class EveryPair : public ::testing::TestWithParam<std::string> {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Registry, EveryKind, ::testing::ValuesIn(registered_kinds()),
                         [](const auto& info) { return param_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Registry, EveryPair, ::testing::ValuesIn(every_pair_of_kinds()),
                         [](const auto& info) { return param_name(info.param); });

// ---------------------------------------------------------------------------------------------------------------
// The textbook

TEST_P(EveryKind, HasATextbookWithTestShapes) {
  const RefMixerKind* ref = find_ref_mixer_kind(kind());
  ASSERT_NE(ref, nullptr) << "kind '" << kind() << "' has no textbook registered (textbook/mixer.h)";
  EXPECT_FALSE(ref->test_shapes.empty()) << "kind '" << kind() << "' registers no test shapes";
  for (const RefTestShape& shape : ref->test_shapes) {
    ModelConfig c = config(1, 2, 6, 8, 5);
    shape.apply(c);
    EXPECT_NO_THROW(validate(c)) << shape.name;
    EXPECT_NO_THROW(make_ref_mixer(kind(), c)) << shape.name;
  }
}

// Every test shape of the kind, two layers at an odd width (heads of 3 channels), T = 3 and T = 19 (across the
// chunks of 16 the recurrences keep their states by); then one layer of one 5-channel head, and an MLP-less model.
TEST_P(EveryKind, FastModelMatchesTextbook) {
  Threads one(1);
  for (const RefTestShape& shape : textbook_of(kind()).test_shapes)
    for (int T : {3, 19}) {
      SCOPED_TRACE(shape.name + " T=" + std::to_string(T));
      ModelConfig c = config(2, 2, 6, 19, 7);
      shape.apply(c);
      expect_matches_textbook(c, T);
    }
  SCOPED_TRACE("one layer, one head of 5");
  expect_matches_textbook(config(1, 1, 5, 9, 7), 9);
  ModelConfig no_mlp = config(2, 2, 4, 9, 7);
  no_mlp.no_mlp = true;
  SCOPED_TRACE("no MLP");
  expect_matches_textbook(no_mlp, 9);
}

// The textbook's backward (the kind's, wired into the block's) against central differences of the whole textbook
// model: the pieces are wired together right, and no gradient is all zero.
TEST_P(EveryKind, TextbookMatchesFiniteDifferences) {
  const int B = 1;
  const int T = 5;
  const int V = 5;
  ModelConfig hybrid = kind_config(kind() + ",softmax", 2, 4, T, V);
  for (const ModelConfig& c : {config(1, 1, 3, T, V), hybrid}) {
    SCOPED_TRACE(c.mixer);
    expect_reference_matches_finite_differences(c, {}, random_ids(B * T, V, 21), random_ids(B * T, V, 22), B, T);
  }
}

// Two threads split the ops' (batch, head) pairs and channels: the same numbers as the textbook.
TEST_P(EveryKind, TwoThreadsMatchTextbook) {
  Threads two(2);
  expect_matches_textbook(config(2, 2, 8, 9, 7), 9, {}, 3);
}

// ---------------------------------------------------------------------------------------------------------------
// Batch-split replicas (train/replicas.h)

// The combined gradient is the whole batch's: g = Σ_r (n_r/n) g_r equals the gradient of the mean over all n
// targets, computed by one model over all B rows. B = 5 does not divide by 2 or 3: the slices differ in size.
TEST_P(EveryKind, BatchSplitReplicasGiveTheWholeBatchsGradient) {
  const ModelConfig c = config(1, 2, 16, 9, 11);
  const int B = 5;
  const int T = c.block_size;
  std::vector<int> x;
  std::vector<int> y;
  std::vector<int> x0;  // another batch, run first: each step starts from zero
  std::vector<int> y0;
  uneven_batch(B, T, c.vocab_size, 7, x, y);
  uneven_batch(B, T, c.vocab_size, 8, x0, y0);
  Threads one(1);
  GPT whole(c);
  whole.init_weights(3);
  const float whole_loss = whole.forward(x.data(), y.data(), B, T);
  whole.zero_grad();
  whole.backward();
  const std::vector<double> whole_grads = to_double(whole.grads_memory());
  const double scale = max_abs(whole_grads.data(), whole_grads.size());
  ASSERT_GT(scale, 0.0);
  for (int R : {2, 3}) {
    Threads threads(R);
    GPT split_model(c);
    split_model.init_weights(3);
    Replicas replicas(split_model, R);
    forward_backward(replicas, x0.data(), y0.data(), B, T);  // another batch first: each step starts from zero
    const LossSum loss = forward_backward(replicas, x.data(), y.data(), B, T);
    EXPECT_EQ(loss.count, whole.last_targets()) << R << " replicas";
    EXPECT_NEAR(loss.mean(), whole_loss, 1e-5) << R << " replicas";
    double worst = 0;
    for (size_t i = 0; i < whole.grads_memory().size(); i++)
      worst = std::max(worst, (double)std::fabs(split_model.grads_memory()[i] - whole.grads_memory()[i]));
    EXPECT_LT(worst, 1e-5 * scale) << R << " replicas: the combined gradient is not the whole batch's";
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding

// A model without positions (--positions none): no wpe.weight in its table or its checkpoint, the fast model equal
// to the textbook's (which adds no position row either), decoding equal to the full recompute, and a checkpoint
// round trip that keeps the setting.
TEST_P(EveryKind, WithoutPositionsMatchesTextbookDecodesAndRoundTrips) {
  Threads one(1);
  ModelConfig c = config(2, 2, 6, 19, 7);
  c.positions = "none";
  for (const TensorSpec& t : gpt_tensor_table(c)) EXPECT_NE(t.name, "wpe.weight");
  expect_matches_textbook(c, 19);
  ModelConfig decoding = config(2, 2, 6, 8, 11);
  decoding.positions = "none";
  expect_decoder_matches_full_forward(*random_model(decoding, 5), 3 * 8 + 3);
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  ModelConfig saved = config(1, 2, 8, 8, tok.size());
  saved.positions = "none";
  GPT model(saved);
  model.init_weights(4);
  const std::string path = dir / "m.safetensors";
  save_checkpoint(path, model, tok, nullptr);
  const SafetensorsContents file = read_safetensors(path);
  EXPECT_EQ(file.metadata.at("positions"), "none");
  EXPECT_EQ(file.tensors.count("wpe.weight"), 0u);
  EXPECT_EQ(load_checkpoint(path).model->config.positions, "none");
  EXPECT_NE(describe(saved).find(", no position embedding"), std::string::npos) << describe(saved);
}

// Every pushed token's logits against a full forward of the decoder's context, through slides of the window, and
// after a reset (model_check.h), at every test shape. Block 24: contexts that reach past a chunk of 16.
TEST_P(EveryKind, DecodingMatchesFullRecomputeAcrossSlides) {
  Threads one(1);
  for (const RefTestShape& shape : textbook_of(kind()).test_shapes)
    for (int block : {8, 24}) {
      SCOPED_TRACE(shape.name + " block=" + std::to_string(block));
      ModelConfig c = config(2, 2, 6, block, 11);
      shape.apply(c);
      expect_decoder_matches_full_forward(*random_model(c, 5), 3 * block + 3);
    }
}

// A recurrence (model/mixers/recurrent.h) keeps the same state whatever the context; every kind's state grows at
// most in proportion to it (softmax's cache of keys and values).
TEST_P(EveryKind, StateIsFixedForARecurrenceAndAtMostLinearInTheContext) {
  GPT short_context(config(1, 2, 8, 8, 11));
  GPT long_context(config(1, 2, 8, 64, 11));
  const size_t at_8 = short_context.mixer(0).state_floats(short_context.masks()[0]);
  const size_t at_64 = long_context.mixer(0).state_floats(long_context.masks()[0]);
  EXPECT_GT(at_8, 0u);
  EXPECT_LE(at_64, 8 * at_8);
  if (dynamic_cast<const RecurrentMixer*>(&short_context.mixer(0))) {
    EXPECT_EQ(at_64, at_8);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Masks and head gates

namespace {
// A model that takes `mask` must honour it: in one layer of the kind under it, the logits at position i move when
// the token at j ≠ i changes exactly when the mask lets i see j (the textbook computes the same model, so a mask
// both ignore would pass the comparison with it).
void expect_mask_is_honoured(const ModelConfig& two_layers, const AttentionMask& mask, int T) {
  ModelConfig c = two_layers;
  c.n_layer = 1;
  c.mixer = split_layer_list(two_layers.mixer, two_layers.n_layer, "mixer list")[1];
  auto model = random_model(c, 41);
  model->set_masks({mask});
  const int V = c.vocab_size;
  std::vector<int> x = random_ids(T, V, 43);
  model->forward(x.data(), nullptr, 1, T);
  const std::vector<float> base(model->logits(), model->logits() + (size_t)T * V);
  for (int j = 0; j < T; j++) {
    std::vector<int> changed = x;
    changed[j] = (x[j] + 1) % V;
    model->forward(changed.data(), nullptr, 1, T);
    for (int i = 0; i < T; i++) {
      if (i == j) continue;
      double moved = 0;
      for (int v = 0; v < V; v++) moved = std::max(moved, (double)std::fabs(model->logits()[i * V + v] - base[i * V + v]));
      const KeyRange keys = mask.keys_for(i, T);
      const bool sees = j >= keys.begin && j < keys.end;
      EXPECT_EQ(moved > 1e-6, sees) << "position " << i << " and the token at " << j << " under " << mask.to_string()
                                    << " (the logits moved by " << moved << ")";
    }
  }
}
}  // namespace

// Layer 1 of a softmax,<kind> model under each mask: either it runs, matches the textbook under that mask and
// honours it (a layer of the kind alone lets position i see j exactly where the mask says), or the model refuses it
// at construction, naming the layer, the kind and the mask. The causal mask always runs.
TEST_P(EveryKind, EachMaskRunsAndMatchesTheTextbookOrIsRefusedSayingWhy) {
  Threads one(1);
  const ModelConfig c = kind_config("softmax," + kind(), 2, 6, 7, 7);
  EXPECT_NO_THROW(GPT(c, parse_layer_masks("causal,causal", 2)));
  expect_mask_is_honoured(c, AttentionMask{}, 7);
  for (const std::string text : {"bidirectional", "prefix:3", "window:3"}) {
    SCOPED_TRACE(text);
    const std::vector<AttentionMask> masks = parse_layer_masks("causal," + text, 2);
    bool refused = false;
    try {
      GPT model(c, masks);
    } catch (const std::runtime_error& e) {
      refused = true;
      const std::string what = e.what();
      EXPECT_NE(what.find("layer 1"), std::string::npos) << what;
      EXPECT_NE(what.find(kind()), std::string::npos) << what;
      EXPECT_NE(what.find(text), std::string::npos) << what;
    }
    if (refused) continue;
    expect_matches_textbook(c, 7, masks);
    expect_mask_is_honoured(c, masks[1], 7);
  }
}

// Gates can be turned on over any model (a layer without head gates ignores its ξ); removing a head of a kind
// without them is refused, naming the head and the kind.
TEST_P(EveryKind, HeadGatesWorkOrRefuseToRemoveAHeadNamingTheKind) {
  GPT model(config(1, 2, 8, 8, 7));
  EXPECT_NO_THROW(model.enable_head_gates());
  if (model.mixer(0).has_head_gates()) {
    EXPECT_NO_THROW(model.set_head_gate(1, 0.0f));
    EXPECT_NO_THROW(model.set_head_gates({0.0f, 1.0f}));
    return;
  }
  EXPECT_NO_THROW(model.set_head_gates({1.0f, 1.0f}));
  for (int attempt = 0; attempt < 2; attempt++) {
    try {
      if (attempt == 0) model.set_head_gate(1, 0.0f);
      else model.set_head_gates({1.0f, 0.0f});
      ADD_FAILURE() << "a head removed from a layer that has no head gates";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(kind()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("L0H1"), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Checkpoints

namespace {
// A shape of the same number of elements that is not `shape`: [n] → [1, n], [a, b] → [b, a] (or [1, a·b] if a = b).
std::vector<int64_t> other_shape(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (shape.size() == 2 && shape[0] != shape[1]) return {shape[1], shape[0]};
  return {1, n};
}
}  // namespace

// Saved and loaded: the same logits, bit for bit; the metadata (and the run's settings a resumable checkpoint keeps)
// names the kind and holds no setting of a kind the model does not use; every tensor of the kind's layer with another shape is refused, naming the tensor.
TEST_P(EveryKind, CheckpointRoundTripMetadataAndWrongShapes) {
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  GPT model(config(1, 2, 8, 8, tok.size()));
  model.init_weights(4);
  const std::string path = dir / "m.safetensors";
  save_checkpoint(path, model, tok, nullptr);
  const SafetensorsContents file = read_safetensors(path);
  EXPECT_EQ(file.metadata.at("mixer"), kind());
  std::set<std::string> own_keys;
  for (const MixerKind* k : mixer_kinds())
    if (k->name == kind())
      for (const Setting<ModelConfig>& s : k->settings) own_keys.insert(s.key);
  for (const MixerKind* k : mixer_kinds())
    for (const Setting<ModelConfig>& s : k->settings)
      if (!own_keys.count(s.key)) {
        EXPECT_EQ(file.metadata.count(s.key), 0u) << s.key << " of kind " << k->name;
      }
  for (const std::string& key : own_keys) EXPECT_EQ(file.metadata.count(key), 1u) << key;
  TrainConfig run;  // what a resumable checkpoint stores of the run: the same rule
  run.model = model.config;
  const nlohmann::json stored = nlohmann::json::parse(to_json(run));
  for (const MixerKind* k : mixer_kinds())
    for (const Setting<ModelConfig>& s : k->settings)
      EXPECT_EQ(stored.contains(s.key), own_keys.count(s.key) == 1) << s.key << " in the run's settings";
  Checkpoint loaded = load_checkpoint(path);
  EXPECT_TRUE(loaded.defaulted_settings.empty());
  EXPECT_EQ(std::string(loaded.model->mixer(0).kind()), kind());
  const std::vector<int> x = {1, 2, 3, 4, 5, 6, 7};
  model.forward(x.data(), nullptr, 1, 7);
  loaded.model->forward(x.data(), nullptr, 1, 7);
  for (int i = 0; i < 7 * tok.size(); i++) ASSERT_EQ(model.logits()[i], loaded.model->logits()[i]);

  for (const TensorSpec& t : model.table()) {
    if (t.mixer_slot < 0) continue;
    SCOPED_TRACE(t.name);
    std::vector<TensorView> views;
    for (const auto& [n, loaded_tensor] : file.tensors)
      views.push_back({n, n == t.name ? other_shape(t.shape) : loaded_tensor.shape, loaded_tensor.data.data()});
    std::map<std::string, std::string> meta = file.metadata;
    meta.erase(kDataChecksumKey);
    meta.erase(kHeaderChecksumKey);
    const std::string bad = dir / "bad.safetensors";
    write_safetensors(bad, views, meta);
    try {
      load_checkpoint(bad);
      ADD_FAILURE() << "loaded a checkpoint whose " << t.name << " has the wrong shape";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + t.name + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the config needs"), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The lab

TEST_P(EveryKind, LabScoresAreFiniteAndThePageUsesTheKindsOwnWords) {
  Threads one(1);
  const Tokenizer tok = Tokenizer::from_text(U"abcdefghijklmnop");
  GPT model(kind_config("softmax," + kind(), 2, 8, 16, tok.size()));
  model.init_weights(3);
  const std::vector<HeadScores> scores = score_heads(model, 8, 2, 11);
  ASSERT_EQ(scores.size(), 4u);
  for (const HeadScores& s : scores) {
    EXPECT_TRUE(std::isfinite(s.previous_token.value()));
    EXPECT_TRUE(std::isfinite(s.induction.value()));
    EXPECT_TRUE(std::isfinite(s.duplicate_token.value()));
  }
  const int T = model.last_T();
  const float* A = model.mixing_weights(1);
  for (int i = 0; i < T; i++)
    for (int j = i + 1; j < T; j++) ASSERT_EQ(A[(size_t)i * T + j], 0.0f) << "nothing flows from the future";
  const AttentionDump d = dump_attention(model, tok.encode(U"abcabcd", "prompt"), tok);
  const std::string html = attention_html(d, "t");
  const std::string words = model.mixer(1).lab().weights_description();
  EXPECT_NE(html.find(words.substr(0, 40)), std::string::npos) << "the page does not describe the kind's weights";
}

// ---------------------------------------------------------------------------------------------------------------
// The programs

namespace {
std::vector<float> weights_of(const std::string& path) { return load_checkpoint(path).model->params_memory().to_vector(); }

// The textbook model's mean loss over `text_file` with the checkpoint's tensors, read by their names from the file.
double textbook_nats(const std::string& ckpt, const std::string& text_file) {
  const Checkpoint c = load_checkpoint(ckpt);
  const std::vector<int> ids = c.tokenizer.encode(read_text_file(text_file), text_file);
  const int T = (int)ids.size() - 1;
  ReferenceGPT<double> ref(c.model->config, c.model->masks());
  const SafetensorsContents file = read_safetensors(ckpt);
  for (const TensorSpec& t : ref.table) {
    const std::vector<float>& data = file.tensors.at(t.name).data;
    EXPECT_EQ(data.size(), t.numel) << t.name;
    std::copy(data.begin(), data.end(), ref.params.begin() + t.offset);
  }
  return ref.forward(std::vector<int>(ids.begin(), ids.end() - 1), std::vector<int>(ids.begin() + 1, ids.end()), 1, T);
}
}  // namespace

// ./train --mixer <kind>, and a softmax,<kind> hybrid under Muon: 6 steps straight, and 3 steps then --resume, end
// on the same weights bit for bit; the checkpoint samples (the kind's decoding state) and scores, and the score
// equals the textbook model's loss. The kind's settings keep their defaults: what a user gets.
TEST_P(EveryKind, TrainResumeSampleAndScore) {
  ASSERT_TRUE(progutil::file_exists("./train") && progutil::file_exists("./sample"))
      << "run the tests from the repository root after `make programs`";
  progutil::TempDir dir;
  const std::string corpus = dir / "corpus.txt";
  const std::string text_file = dir / "held_out.txt";
  progutil::write_file(corpus, progutil::generated_text(4000));
  progutil::write_file(text_file, "The cat sat on");
  auto run = [&](const std::string& command) {
    return progutil::run_command(command, dir.path());
  };
  auto train = [&](const std::string& out, const std::string& extra) {
    return run("./train " + std::string(progutil::tiny_flags()) + " --data " + progutil::quote(corpus) + " --out " +
               progutil::quote(out) + " " + extra);
  };
  for (const std::string& flags : {"--mixer " + kind(), "--n-layer 2 --layer-mixer softmax," + kind() + " --optimizer muon"}) {
    SCOPED_TRACE(flags);
    const std::string straight = dir / "straight";
    const std::string out = dir / "resumed";
    std::filesystem::remove_all(straight);
    std::filesystem::remove_all(out);
    progutil::RunResult r = train(straight, flags + " --steps 6");
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    r = train(out, flags + " --steps 6 --stop-at 3");
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    r = run("./train --resume " + progutil::quote(out));
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    const std::string ckpt = out + "/ckpt.safetensors";
    EXPECT_EQ(weights_of(ckpt), weights_of(straight + "/ckpt.safetensors")) << "resume is not exact";
    EXPECT_EQ(load_checkpoint(ckpt).resume.step, 6);
    r = run("./sample --threads 1 --ckpt " + progutil::quote(ckpt) + " --prompt 'The' -n 40 --seed 3");
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    EXPECT_GE(r.out.size(), 43u);
    r = run("./sample --threads 1 --ckpt " + progutil::quote(ckpt) + " --score " + progutil::quote(text_file));
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(([0-9.]+) nats/char)"))) << r.out;
    EXPECT_NEAR(std::stod(m[1]), textbook_nats(ckpt, text_file), 1e-4);
  }
}

// ./inspect heads and prune on a softmax,<kind> checkpoint, with no flag but --ckpt and sizes: both answer, every
// score that applies to the kind is a number, and one that does not is n/a saying why (a recurrence has no OV circuit,
// no head gates, and weights that are not a distribution), never "the model is broken". With no --data, the text is
// the run's own corpus; when that is gone, prune says which flag to give. ./inspect attention answers too, and heads
// scores pronouns against their antecedents on the kind's layer (a break refusing gateless kinds there goes red).
TEST_P(EveryKind, InspectHeadsAndPruneAnswerAndSayWhatDoesNotApply) {
  ASSERT_TRUE(progutil::file_exists("./inspect")) << "run the tests from the repository root after `make programs`";
  progutil::TempDir dir;
  const std::string root = std::filesystem::current_path().string() + "/";
  auto run = [&](const std::string& command) {  // in the folder: the relative paths below are the folder's
    return progutil::run_command("cd " + progutil::quote(dir.path()) + " && " + root + command, dir.path());
  };
  // Stories with pronouns and a table of their antecedents (data/make_stories.cpp's probes), in the corpus too, so
  // that the model can read them.
  ASSERT_TRUE(progutil::file_exists(root + "build/make_stories")) << "make builds it before the tests";
  progutil::RunResult r =
      run("build/make_stories --probes 40 --seed 3 --out probes.txt --antecedents probes.tsv --mentions names.tsv");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  const std::string corpus = dir / "corpus.txt";
  progutil::write_file(corpus, progutil::generated_text(4000) + progutil::read_file(dir / "probes.txt"));
  const std::string hybrid = ModelConfig{}.mixer + "," + kind();  // the GPT's own mixer, then the kind
  r = run("train " + std::string(progutil::tiny_flags()) + " --n-layer 2 --layer-mixer " + hybrid +
                              " --steps 2 --data " + progutil::quote(corpus) + " --out run");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  const Checkpoint ckpt = load_checkpoint(dir / "run/ckpt.safetensors");
  const MixerLab& lab = ckpt.model->mixer(1).lab();
  const bool has_ov = lab.qkv_weights(ckpt.model->params().h[1].mixer).qkv != nullptr;
  const bool distribution = lab.weights_are_probabilities();
  const bool gates = ckpt.model->mixer(1).has_head_gates();

  r = run("inspect heads --threads 1 --resamples 0 --sequences 4 --ckpt run --csv heads.csv");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_EQ(r.out.find("n/a") != std::string::npos, !has_ov || !distribution) << r.out;
  const std::vector<std::vector<std::string>> heads = progutil::read_csv(dir / "heads.csv");
  ASSERT_EQ(heads.size(), 5u);  // the header and 2 layers × 2 heads
  ASSERT_EQ(heads[0][7], "entropy");
  ASSERT_EQ(heads[0][10], "ov_copying");
  for (size_t row = 1; row < heads.size(); row++) {
    const bool kinds_layer = heads[row][0] == "1";
    EXPECT_FALSE(heads[row][2].empty()) << "prev_token, row " << row;
    EXPECT_EQ(heads[row][7].empty(), kinds_layer && !distribution) << "entropy, row " << row;
    EXPECT_EQ(heads[row][10].empty(), kinds_layer && !has_ov) << "ov_copying, row " << row;
  }

  r = run("inspect prune --threads 1 --batches 1 --batch 2 --seeds 1 --ckpt run --out prune");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  const std::string no_gates = "n/a: layer 1's mixer (" + kind() + ") has no head gates";
  EXPECT_EQ(r.out.find(no_gates) != std::string::npos, !gates) << r.out;
  const std::vector<std::vector<std::string>> importance = progutil::read_csv(dir / "prune/head_importance.csv");
  ASSERT_EQ(importance.size(), 5u);
  for (size_t row = 1; row < importance.size(); row++)
    EXPECT_EQ(importance[row][2].empty(), importance[row][0] == "1" && !gates) << "importance, row " << row;
  const std::vector<std::vector<std::string>> curve = progutil::read_csv(dir / "prune/prune.csv");
  ASSERT_GE(curve.size(), 3u);  // the header, importance's and random's first rows at least
  for (size_t row = 1; row < curve.size() && !gates; row++)
    EXPECT_EQ(curve[row].back().find("L1H"), std::string::npos) << "a head without gates was pruned: " << curve[row].back();

  // ./inspect attention's page and JSON, and heads' pronoun column on the stories with their antecedents: the
  // kind's layer answers, a number or n/a.
  r = run("inspect attention --threads 1 --ckpt run --prompt " + progutil::quote("the cat sat") + " --json a.json");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  r = run("inspect heads --threads 1 --resamples 0 --sequences 4 --ckpt run --data probes.txt --antecedents "
          "probes.tsv --mentions names.tsv --csv pronouns.csv");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_NE(r.out.find("pronoun → antecedent: "), std::string::npos) << r.out;

  std::filesystem::remove(corpus);
  r = run("inspect prune --threads 1 --batches 1 --batch 2 --seeds 0 --ckpt run --out prune2");
  EXPECT_TRUE(r.exited && r.exit_code == 1) << r.describe();
  EXPECT_NE(r.err.find("give --data"), std::string::npos) << r.err;
}

// Every number in a JSON answer is finite, and none of the arrays named in `numbers_only` (at any depth) holds a
// null. The answers use null for what does not apply (the first character's surprisal, a score a kind has no
// meaning for); nlohmann writes a NaN as null too, so where a number must be, a null is a NaN.
void expect_finite_numbers(const nlohmann::json& j, const std::string& where, const std::set<std::string>& numbers_only,
                           bool in_numbers_only = false) {
  if (in_numbers_only) {
    EXPECT_FALSE(j.is_null()) << where << ": null where a number must be";
  }
  if (j.is_number_float()) {
    EXPECT_TRUE(std::isfinite(j.get<double>())) << where;
  }
  if (!j.is_structured()) return;
  for (auto item = j.begin(); item != j.end(); ++item) {
    const bool numbers = in_numbers_only || (j.is_object() && numbers_only.count(item.key()) > 0);
    expect_finite_numbers(*item, where + "/" + (j.is_object() ? item.key() : std::string("[]")), numbers_only, numbers);
  }
}

// The explorer's panels (./inspect serve: the model, the score, the refresh of score, mixing weights and next, the
// weights alone, the next-token distribution, generation) on a hybrid whose second layer is the kind: each answers,
// in finite numbers, and the weights panel describes the kind's layer in its own words.
TEST_P(EveryKind, TheExplorersPanelsAnswerOnAHybrid) {
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefghij .");
  const std::string hybrid = ModelConfig{}.mixer + "," + kind();
  ModelConfig c = kind_config(hybrid, 2, 16, 32, tok.size());
  GPT model(c);
  const std::string ckpt = dir / "ckpt.safetensors";
  save_checkpoint(ckpt, model, tok, nullptr);
  Running server(ckpt);
  const std::string text = "a bad cafe. jig";
  const std::vector<std::pair<std::string, httplib::Params>> panels = {
      {"/api/model", {}},
      {"/api/score", {{"text", text}}},
      {"/api/refresh", {{"text", text}, {"position", "9"}, {"layer", "1"}, {"head", "0"}, {"map", "1"}}},
      {"/api/attention", {{"text", text}, {"position", "9"}, {"layer", "1"}, {"head", "0"}, {"map", "1"}}},
      {"/api/next", {{"text", text}}},
  };
  for (const auto& [path, params] : panels) {
    SCOPED_TRACE(path);
    const auto [status, answer] = server.post(path, params);
    ASSERT_EQ(status, 200) << answer.dump();
    expect_finite_numbers(answer, path, {"cols", "rows", "logits"});
    // A score's first character has no surprisal and no p (nothing predicts it); every other one has both.
    const nlohmann::json& score = answer.contains("score") ? answer["score"] : answer;
    for (const char* per_character : {"bits", "p"})
      for (size_t i = 1; score.contains("bits") && i < text.size(); i++)
        EXPECT_TRUE(score[per_character][i].is_number()) << per_character << " " << i;
    const nlohmann::json& next = answer.contains("next") ? answer["next"] : answer;
    for (size_t i = 0; !next.contains("bits") && next.contains("p") && i < next["p"].size(); i++)
      EXPECT_TRUE(next["p"][i].is_number()) << "next p " << i;
    if (path == "/api/attention") {
      ASSERT_EQ(answer["mixers"].size(), 2u) << answer.dump();
      const std::string about = answer["mixers"][1]["about"].get<std::string>();
      EXPECT_FALSE(about.empty());
      if (kind() != ModelConfig{}.mixer) {
        EXPECT_NE(about, answer["mixers"][0]["about"].get<std::string>()) << "the kind's layer described as the GPT's";
      }
    }
  }
  httplib::Client client = server.client();
  auto generated = client.Post("/api/generate", httplib::Params{{"text", text}, {"n", "20"}, {"seed", "3"}});
  ASSERT_TRUE(generated);
  EXPECT_EQ(generated->status, 200) << generated->body;
  EXPECT_NE(generated->body.find("\"done\""), std::string::npos) << generated->body;
}

// ---------------------------------------------------------------------------------------------------------------
// Every pair of kinds as a hybrid

TEST_P(EveryPair, FastModelMatchesTextbookAndDecodesAsTheFullRecompute) {
  Threads one(1);
  const ModelConfig c = kind_config(GetParam(), 2, 6, 19, 7);
  expect_matches_textbook(c, 19);
  ModelConfig short_block = c;
  short_block.block_size = 8;
  expect_decoder_matches_full_forward(*random_model(short_block, 5), 27);
}
