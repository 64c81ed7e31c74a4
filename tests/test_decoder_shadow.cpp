// Tests for the decoder's shadow (src/model/decoder.h): while the context fills, every push at position p ≥ D
// (D = block − ⌊block/2⌋) also steps a second set of states at p − D, and at the slide those states are swapped in
// instead of re-encoding the kept half. The references are independent of the step path: GPT::forward over the
// decoder's window (the full recompute) for the logits, and a batched forward of the kept tokens with each layer's
// MixerLab::state_from_forward (the re-encode the shadow replaces) for the states.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/rng.h"
#include "decoder_check.h"
#include "base/threads.h"
#include "generate/generate.h"
#include "model/mixer_lab.h"
#include "model/decoder.h"
#include "model/model.h"
#include "mixer_kinds.h"

namespace {

// A kind of the registry (or a hybrid) at its test shapes (mixer_kinds.h), two layers at widths where every head and
// state has a few channels.
ModelConfig kind_config(const std::string& mixer, int block) {
  const std::string layers = mixer.find(',') == std::string::npos ? mixer + "," + mixer : mixer;
  return testutil::kind_config(layers, 2, 16, block, 11);
}

// Parameters N(0, 0.3): attention is sharp and positions matter, so a state from the wrong positions or tokens
// changes the logits visibly.
std::unique_ptr<GPT> random_model(const ModelConfig& c, uint64_t seed, double scale = 0.3) {
  auto model = std::make_unique<GPT>(c);
  Rng rng(seed);
  for (float& p : model->params_memory()) p = (float)(scale * rng.normal());
  return model;
}

using testutil::full_logits;
using testutil::random_tokens;

// Pushes `tokens` into `decoder`, each push's logits against the full recompute over the context the sliding rule
// gives (at block tokens the newest ⌊block/2⌋ are kept); returns the number of slides.
int expect_pushes_match_full_recompute(GPT& model, Decoder& decoder, std::vector<int>& context,
                                       const std::vector<int>& tokens) {
  const int block = model.config.block_size;
  int slides = 0;
  for (size_t i = 0; i < tokens.size(); i++) {
    if ((int)context.size() == block) context.erase(context.begin(), context.end() - block / 2), slides++;
    context.push_back(tokens[i]);
    const float* got = decoder.push(tokens[i]);
    EXPECT_EQ(decoder.context(), context);
    const std::vector<float> want = full_logits(model, context);
    double worst = 0;
    for (size_t v = 0; v < want.size(); v++) worst = std::max(worst, (double)std::fabs(got[v] - want[v]));
    EXPECT_LT(worst, 1e-4) << "push " << i << ", context " << context.size() << ", slide " << slides;
    const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
    EXPECT_GT(*hi - *lo, 0.1) << "push " << i << ": logits too flat for the comparison to mean anything";
  }
  return slides;
}

// The re-encode the shadow replaces: the layers' states after a batched forward of `kept` (B = 1, T = its length),
// each taken by MixerLab::state_from_forward. It starts from `like`, so that what a state_from_forward leaves
// unwritten (a key/value cache's slots past T) compares equal.
std::vector<float> reencoded_state(GPT& model, const std::vector<int>& kept, const std::vector<float>& like) {
  std::vector<float> state = like;
  model.forward(kept.data(), nullptr, 1, (int)kept.size());
  size_t at = 0, scratch = 0;
  for (int l = 0; l < model.config.n_layer; l++) scratch = std::max(scratch, model.mixer(l).step_scratch_floats());
  std::vector<float> step_scratch(scratch);
  for (int l = 0; l < model.config.n_layer; l++) {
    model.mixer(l).lab().state_from_forward(state.data() + at, model.mixer_pass(l), step_scratch.data());
    at += model.mixer(l).state_floats(model.masks()[l]);
  }
  EXPECT_EQ(at, state.size());
  return state;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, (double)std::fabs(a[i] - b[i]));
  return worst;
}
double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, (double)std::fabs(x));
  return m;
}

}  // namespace

// The shadow starts at D = block − ⌊block/2⌋: D = 4 for block 8, 4 for block 7 (which keeps 3).
TEST(DecoderShadow, StartsWhereTheKeptTokensBegin) {
  EXPECT_EQ(Decoder(*random_model(kind_config("softmax", 8), 1)).shadow_start(), 4);
  EXPECT_EQ(Decoder(*random_model(kind_config("softmax", 7), 1)).shadow_start(), 4);
  ModelConfig bidir = kind_config("softmax", 8);
  GPT model(bidir, parse_layer_masks("bidirectional", bidir.n_layer));
  EXPECT_EQ(Decoder(model).shadow_start(), -1);  // no cache, no shadow
}

// Logits after one, two and several slides against the full recompute, for every kind, an even and an odd block.
TEST(DecoderShadow, EveryKindMatchesFullRecomputeThroughSlides) {
  set_threads(1);
  for (const std::string& kind : testutil::every_kind_and_a_hybrid())
    for (int block : {8, 7}) {
      SCOPED_TRACE(std::string(kind) + ", block " + std::to_string(block));
      auto model = random_model(kind_config(kind, block), 17);
      Decoder decoder(*model);
      ASSERT_TRUE(decoder.uses_cache());
      std::vector<int> context;
      EXPECT_GE(expect_pushes_match_full_recompute(*model, decoder, context, random_tokens(5 * block, 11, 23)), 4);
    }
}

// Just before each slide the shadow holds what a fresh re-encode of the tokens about to be kept leaves. (That the
// slide then uses them is what the logits after it say, above.)
TEST(DecoderShadow, StateAtEachSlideEqualsAFreshReencodeOfTheKeptTokens) {
  set_threads(1);
  for (const std::string& kind : testutil::every_kind_and_a_hybrid())
    for (int block : {8, 7}) {
      SCOPED_TRACE(std::string(kind) + ", block " + std::to_string(block));
      auto model = random_model(kind_config(kind, block), 29);
      Decoder decoder(*model);
      const std::vector<int> tokens = random_tokens(4 * block, 11, 31);
      int slides = 0;
      for (int token : tokens) {
        if ((int)decoder.context().size() == block) {
          const std::vector<int> kept(decoder.context().end() - block / 2, decoder.context().end());
          const std::vector<float> want = reencoded_state(*model, kept, decoder.shadow_state());
          ASSERT_GT(max_abs(want), 0.1);
          EXPECT_LT(max_abs_diff(decoder.shadow_state(), want), 1e-4 * std::max(1.0, max_abs(want)))
              << "slide " << slides;
          slides++;
        }
        decoder.push(token);
      }
      EXPECT_GE(slides, 3);
    }
}

// reset() in the middle of a fill, with the shadow already stepping: the next context's first slide must not see
// the old shadow's states.
TEST(DecoderShadow, ResetWhileTheShadowRunsStartsOver) {
  set_threads(1);
  for (const std::string& kind : testutil::every_kind_and_a_hybrid()) {
    SCOPED_TRACE(kind);
    const int block = 8;
    auto model = random_model(kind_config(kind, block), 37);
    Decoder decoder(*model);
    std::vector<int> context;
    expect_pushes_match_full_recompute(*model, decoder, context, random_tokens(block + 6, 11, 41));  // one slide, 6 more
    decoder.reset();
    context.clear();
    EXPECT_GE(expect_pushes_match_full_recompute(*model, decoder, context, random_tokens(3 * block, 11, 43)), 2);
  }
}

// generate() pushes the prompt through the same push: prompts longer than ⌊block/2⌋ and than block (slides inside
// the prompt), then greedy tokens, against a greedy loop on the full recompute over the sliding window.
TEST(DecoderShadow, LongPromptsGenerateAsTheFullRecompute) {
  set_threads(1);
  for (const std::string& kind : testutil::every_kind_and_a_hybrid())
    for (int prompt_length : {5, 8, 11, 19}) {
      SCOPED_TRACE(std::string(kind) + ", prompt " + std::to_string(prompt_length));
      const int block = 8, n = 40;
      auto model = random_model(kind_config(kind, block), 47, 1.0);  // large weights: greedy tokens follow the context
      const std::vector<int> prompt = random_tokens(prompt_length, 11, 53);
      SamplingOptions greedy;
      greedy.temperature = 0;
      Rng rng(1);
      std::vector<int> got;
      generate(*model, prompt, n, greedy, rng, -1, [&](int t) { got.push_back(t); });
      std::vector<int> window, want;
      for (int t : prompt) {
        if ((int)window.size() == block) window.erase(window.begin(), window.end() - block / 2);
        window.push_back(t);
      }
      for (int i = 0; i < n; i++) {
        const std::vector<float> logits = full_logits(*model, window);
        const int next = (int)(std::max_element(logits.begin(), logits.end()) - logits.begin());
        want.push_back(next);
        if ((int)window.size() == block) window.erase(window.begin(), window.end() - block / 2);
        window.push_back(next);
      }
      EXPECT_EQ(got, want);
    }
}
