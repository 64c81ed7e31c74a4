// The whole GPT: the double reference model (src/textbook/reference.h) against finite differences of itself, the fast float
// model against the reference (loss, logits, attention probabilities and every gradient), the receptive field that
// each mask allows, learning, determinism and the input checks.
//
// Tolerances. ReferenceGPT vs central differences (h = 1e-6, double): the loss is O(1), so rounding noise in a
// difference quotient is ~ε·|loss|/h ≈ 1e-10 and truncation ~h² ≈ 1e-12: 1e-6 relative + 1e-9 absolute.
// Fast float vs reference: errors are measured against each tensor's largest magnitude; through up to three blocks
// float rounding was measured at ≤ 2e-6 of that scale, so kModelTol = 3e-5 (15× margin) — a wrong term is O(1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/cross_entropy.h"
#include "ops/mask.h"
#include "model/model.h"
#include "model/params.h"
#include "textbook/reference.h"
#include "mixer_kinds.h"
#include "test_util.h"

using namespace testutil;

namespace {

constexpr double kModelTol = 3e-5;

ModelConfig make_config(int n_layer, int n_head, int n_embd, int block_size, int vocab_size) {
  ModelConfig c;
  c.n_layer = n_layer, c.n_head = n_head, c.n_embd = n_embd, c.block_size = block_size, c.vocab_size = vocab_size;
  return c;
}

ModelConfig tiny_config() { return make_config(2, 2, 8, 8, 11); }

std::vector<AttentionMask> masks_from(const std::string& text, int n_layer) { return parse_layer_masks(text, n_layer); }


// Copies values into one of GPT's arenas in place (a Span: its values can change, its size cannot).
void set_arena(Span<float> arena, const std::vector<double>& values) {
  ASSERT_EQ(arena.size(), values.size());
  std::copy(values.begin(), values.end(), arena.begin());
}

struct Batch {
  std::vector<int> inputs, targets;
};

// Random ids; every `ignore_every`-th target (if > 0) is kNoTarget.
Batch random_batch(int B, int T, int V, uint32_t seed, int ignore_every = 0) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, V - 1);
  Batch batch;
  for (int i = 0; i < B * T; i++) {
    batch.inputs.push_back(id(rng));
    batch.targets.push_back(ignore_every > 0 && i % ignore_every == 1 ? kNoTarget : id(rng));
  }
  return batch;
}

// One forward + backward of the fast model (gradients seeded with random values, to check that backward adds
// into them) against the reference given the same weights: loss, logits, every layer's P, every gradient tensor.
void expect_fast_matches_reference(GPT& fast, const std::vector<AttentionMask>& masks, const Batch& batch, int B,
                                   int T) {
  SCOPED_TRACE("masks " + masks_to_string(masks) + " B=" + std::to_string(B) + " T=" + std::to_string(T));
  const ModelConfig& c = fast.config;
  ReferenceGPT<double> ref(c, masks);
  ref.params = to_double(fast.params_memory());
  if (fast.gated()) ref.head_gates = to_double(fast.head_gates());
  std::mt19937 rng(B * 100 + T);
  const std::vector<double> seed = float_exact(uniform(ref.params.size(), rng, -0.01, 0.01));
  std::vector<double> grads = seed;
  const double loss = ref.forward(batch.inputs, batch.targets, B, T);
  ref.backward(grads);

  fast.zero_grad();  // the head gates' gradients start at 0; the parameters' are seeded below
  set_arena(fast.grads_memory(), seed);
  const float loss_f = fast.forward(batch.inputs.data(), batch.targets.data(), B, T);
  fast.backward();
  if (fast.gated()) {
    EXPECT_TRUE(close_to_reference(fast.head_gate_grads(), ref.gate_grads, kModelTol, "head gate gradients"));
  }

  EXPECT_NEAR(loss_f, loss, kModelTol * std::max(1.0, std::fabs(loss)));
  EXPECT_TRUE(close_to_reference(fast.logits(), ref.logits.data(), ref.logits.size(), kModelTol, "logits"));
  for (int l = 0; l < c.n_layer; l++) {
    const std::vector<double>& P = ref.layers[l].probs;
    const float* P_f = fast.mixing_weights(l);
    EXPECT_TRUE(close_to_reference(P_f, P.data(), P.size(), kModelTol, "layer " + std::to_string(l) + " probs"));
    for (int bh = 0; bh < B * c.n_head; bh++)
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
          if (!masks[l].allows(i, j, T)) {
            ASSERT_EQ(P_f[((size_t)bh * T + i) * T + j], 0.0f) << "layer " << l << " P at forbidden " << i << "," << j;
          }
  }
  // Compared after taking the seed back out, so each tensor is judged against its own gradient's scale; a backward
  // that overwrote instead of adding would be off by the seed.
  for (const TensorSpec& t : ref.table) {
    std::vector<float> fast_g(t.numel);
    std::vector<double> ref_g(t.numel);
    for (size_t i = 0; i < t.numel; i++) {
      fast_g[i] = (float)((double)fast.grads_memory()[t.offset + i] - seed[t.offset + i]);
      ref_g[i] = grads[t.offset + i] - seed[t.offset + i];
    }
    EXPECT_TRUE(close_to_reference(fast_g, ref_g, kModelTol, "gradient of " + t.name));
  }
}

// Central differences of the reference loss for every parameter, against its backward.
void expect_reference_matches_finite_differences(const ModelConfig& c, const std::vector<AttentionMask>& masks,
                                                 const Batch& batch, int B, int T) {
  SCOPED_TRACE("masks " + masks_to_string(masks) + " B=" + std::to_string(B) + " T=" + std::to_string(T));
  ReferenceGPT<double> ref(c, masks);
  ref.params = testutil::random_params(c, 7);
  std::vector<double> grads(ref.params.size(), 0.0);
  ref.forward(batch.inputs, batch.targets, B, T);
  ref.backward(grads);
  const std::vector<double> numeric = finite_differences([&] { return ref.forward(batch.inputs, batch.targets, B, T); },
                                                         ref.params.data(), ref.params.size(), 1e-6);
  for (const TensorSpec& t : ref.table) {
    std::vector<double> a(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
    std::vector<double> n(numeric.begin() + t.offset, numeric.begin() + t.offset + t.numel);
    EXPECT_TRUE(all_close(a, n, 1e-6, 1e-9, t.name));
    EXPECT_GT(max_abs(a.data(), a.size()), 0.0) << t.name << " has an all-zero gradient";
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The reference model against finite differences, every parameter

TEST(ReferenceModel, BackwardMatchesFiniteDifferencesCausal) {
  const ModelConfig c = tiny_config();
  expect_reference_matches_finite_differences(c, {}, random_batch(2, 8, c.vocab_size, 1), 2, 8);
}

TEST(ReferenceModel, BackwardMatchesFiniteDifferencesShortSequenceMixedMasksIgnoredTargets) {
  const ModelConfig c = tiny_config();
  expect_reference_matches_finite_differences(c, masks_from("causal,window:2", 2),
                                              random_batch(2, 5, c.vocab_size, 2, 3), 2, 5);
}

TEST(ReferenceModel, BackwardMatchesFiniteDifferencesBidirectionalOddHeads) {
  const ModelConfig c = make_config(1, 3, 9, 6, 7);  // head size 3
  expect_reference_matches_finite_differences(c, masks_from("bidirectional", 1), random_batch(2, 6, c.vocab_size, 3, 2),
                                              2, 6);
}

// ---------------------------------------------------------------------------------------------------------------
// The fast model against the reference

TEST(FastModel, MatchesReferenceCausal) {
  const ModelConfig c = tiny_config();
  GPT fast(c);
  set_arena(fast.params_memory(), testutil::random_params(c, 11));
  expect_fast_matches_reference(fast, fast.masks(), random_batch(2, 8, c.vocab_size, 4), 2, 8);
}

// One model run at several shapes in turn (T < block_size, a smaller B, back to the full shape), so the activation
// arena is re-carved between calls.
TEST(FastModel, MatchesReferenceAcrossShapes) {
  const ModelConfig c = tiny_config();
  GPT fast(c, masks_from("window:3", 2));
  set_arena(fast.params_memory(), testutil::random_params(c, 12));
  const int shapes[][2] = {{2, 8}, {2, 5}, {1, 8}, {3, 3}, {2, 8}};
  for (auto [B, T] : shapes)
    expect_fast_matches_reference(fast, fast.masks(), random_batch(B, T, c.vocab_size, B * 10 + T), B, T);
}

// Windows longer than the attention's query block (16 rows in src/ops/softmax_attention.cpp), at lengths that are not a
// multiple of it, under a causal and a windowed mask, with ignored targets: the shapes the experiments train at.
TEST(FastModel, MatchesReferenceBeyondOneQueryBlock) {
  const ModelConfig c = make_config(2, 2, 16, 40, 13);
  for (const char* masks : {"causal", "window:5,causal"}) {
    GPT fast(c, masks_from(masks, 2));
    set_arena(fast.params_memory(), testutil::random_params(c, 31));
    for (int T : {17, 23, 31, 40}) {
      SCOPED_TRACE(std::string(masks) + ", T = " + std::to_string(T));
      expect_fast_matches_reference(fast, fast.masks(), random_batch(2, T, c.vocab_size, 40 + T, 3), 2, T);
    }
  }
}

TEST(FastModel, MatchesReferenceMixedMasks) {
  const ModelConfig c = tiny_config();
  for (const char* masks : {"causal,window:2", "window:2,causal", "prefix:3,window:1"}) {
    GPT fast(c, masks_from(masks, 2));
    set_arena(fast.params_memory(), testutil::random_params(c, 13));
    expect_fast_matches_reference(fast, fast.masks(), random_batch(2, 8, c.vocab_size, 5), 2, 8);
    expect_fast_matches_reference(fast, fast.masks(), random_batch(2, 6, c.vocab_size, 6), 2, 6);
  }
}

TEST(FastModel, MatchesReferenceBidirectionalWithIgnoredTargets) {
  const ModelConfig c = tiny_config();
  GPT fast(c, masks_from("bidirectional", 2));
  set_arena(fast.params_memory(), testutil::random_params(c, 14));
  expect_fast_matches_reference(fast, fast.masks(), random_batch(2, 8, c.vocab_size, 7, 3), 2, 8);
}

TEST(FastModel, MatchesReferenceCausalWithIgnoredTargets) {
  const ModelConfig c = tiny_config();
  GPT fast(c);
  set_arena(fast.params_memory(), testutil::random_params(c, 15));
  expect_fast_matches_reference(fast, fast.masks(), random_batch(2, 8, c.vocab_size, 8, 2), 2, 8);
}

TEST(FastModel, MatchesReferenceOddHeadsThreeLayers) {
  const ModelConfig c = make_config(3, 3, 9, 7, 5);  // head size 3
  GPT fast(c, masks_from("causal,bidirectional,window:3", 3));
  set_arena(fast.params_memory(), testutil::random_params(c, 16));
  expect_fast_matches_reference(fast, fast.masks(), random_batch(2, 7, c.vocab_size, 9, 4), 2, 7);
}

// Init-scale weights (what training starts from) rather than the large random ones above.
TEST(FastModel, MatchesReferenceAtInitialisation) {
  const ModelConfig c = tiny_config();
  GPT fast(c);
  fast.init_weights(1234);
  expect_fast_matches_reference(fast, fast.masks(), random_batch(2, 8, c.vocab_size, 10), 2, 8);
}

// Every option of the fast model against the textbook (src/textbook/reference.h), under every kind of mask:
// the attention scale (sqrt, inv, none, a number), blocks without MLPs, head gates (ξ ≠ 1, one ξ = 0), and every
// other registered kind that takes every mask (every layer, or a hybrid after the first kind).
TEST(FastModel, MatchesReferenceUnderEveryOption) {
  struct Option {
    std::string name;
    const char* attn_scale;
    bool no_mlp, gates;
    std::string mixer = mixer_kinds().front()->name;  // the GPT's own attention
  };
  std::vector<Option> options = {{"scale inv", "inv", false, false},     {"scale none", "none", false, false},
                                 {"scale 0.7", "0.7", false, false},     {"no MLP", "sqrt", true, false},
                                 {"head gates", "sqrt", false, true},    {"all three", "inv", true, true}};
  // And every other kind that takes these masks: alone, and as the second layer after a gated first kind.
  const std::vector<std::string> kinds = testutil::kinds_that_take_every_mask();
  for (size_t k = 1; k < kinds.size(); k++) {
    options.push_back({kinds[k], "sqrt", false, false, kinds[k]});
    options.push_back({"hybrid, gated, inv: " + kinds[0] + "," + kinds[k], "inv", false, true, kinds[0] + "," + kinds[k]});
  }
  for (const Option& o : options)
    for (const char* masks : {"causal", "bidirectional", "prefix:3", "window:2", "causal,window:3"}) {
      SCOPED_TRACE(o.name + ", masks " + masks);
      ModelConfig c = tiny_config();
      c.attn_scale = o.attn_scale, c.no_mlp = o.no_mlp, c.mixer = o.mixer;
      GPT fast(c, masks_from(masks, 2));
      set_arena(fast.params_memory(), testutil::random_params(c, 21));
      if (o.gates) {
        fast.enable_head_gates();
        fast.set_head_gates({0.5f, -1.25f, 0.0f, 2.0f});  // L × NH = 2 × 2; one head removed
      }
      expect_fast_matches_reference(fast, fast.masks(), random_batch(2, 8, c.vocab_size, 22), 2, 8);
    }
}

// The textbook's own backward under the same options, against central differences of its loss (the head gates'
// gradient included), so that the comparison above is against something known to be right.
TEST(ReferenceModel, BackwardMatchesFiniteDifferencesUnderEveryOption) {
  for (int option = 0; option < 3; option++) {
    ModelConfig c = tiny_config();
    c.attn_scale = option == 0 ? "inv" : option == 1 ? "none" : "sqrt";
    c.no_mlp = option == 1;
    const Batch batch = random_batch(2, 5, c.vocab_size, 30 + option);
    ReferenceGPT<double> ref(c, masks_from(option == 2 ? "prefix:2,window:2" : "causal", 2));
    ref.params = testutil::random_params(c, 31);
    if (option == 2) ref.head_gates = {0.5, -1.25, 0.75, 2.0};
    std::vector<double> grads(ref.params.size(), 0.0);
    ref.forward(batch.inputs, batch.targets, 2, 5);
    ref.backward(grads);
    auto loss = [&] { return ref.forward(batch.inputs, batch.targets, 2, 5); };
    const std::vector<double> numeric = finite_differences(loss, ref.params.data(), ref.params.size(), 1e-6);
    for (const TensorSpec& t : ref.table) {
      if (c.no_mlp && (t.name.find("mlp") != std::string::npos || t.name.find("ln_2") != std::string::npos))
        continue;  // unused without the MLP: both gradients are 0
      std::vector<double> a(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
      std::vector<double> n(numeric.begin() + t.offset, numeric.begin() + t.offset + t.numel);
      EXPECT_TRUE(all_close(a, n, 1e-6, 1e-9, "option " + std::to_string(option) + " " + t.name));
    }
    if (option == 2) {
      const std::vector<double> gate_grads = ref.gate_grads;
      const std::vector<double> numeric_gates =
          finite_differences(loss, ref.head_gates.data(), ref.head_gates.size(), 1e-6);
      EXPECT_TRUE(all_close(gate_grads, numeric_gates, 1e-6, 1e-9, "head gates"));
    }
  }
}

// Backward adds into the gradients: running it twice doubles them exactly.
TEST(FastModel, BackwardAccumulates) {
  const ModelConfig c = tiny_config();
  GPT fast(c);
  set_arena(fast.params_memory(), testutil::random_params(c, 17));
  const Batch batch = random_batch(2, 8, c.vocab_size, 11);
  fast.zero_grad();
  fast.forward(batch.inputs.data(), batch.targets.data(), 2, 8);
  fast.backward();
  const std::vector<float> once = fast.grads_memory().to_vector();
  fast.backward();
  // Not bit-exact: sgemm with beta = 1 adds its partial products into the existing gradient one by one, and
  // (g + a) + b need not equal g + (a + b) in float. The difference is rounding, ≲ 1e-6 of the tensor's scale.
  const double scale = max_abs(to_double(once).data(), once.size());
  for (size_t i = 0; i < once.size(); i++)
    ASSERT_NEAR(fast.grads_memory()[i], 2.0 * once[i], 1e-6 * scale) << "parameter " << i;
}

// With every target kNoTarget the loss is 0 (nothing counted) and backward adds nothing.
TEST(FastModel, AllTargetsIgnoredGivesZeroLossAndNoGradient) {
  const ModelConfig c = tiny_config();
  GPT fast(c);
  set_arena(fast.params_memory(), testutil::random_params(c, 18));
  Batch batch = random_batch(2, 8, c.vocab_size, 12);
  std::fill(batch.targets.begin(), batch.targets.end(), kNoTarget);
  fast.zero_grad();
  EXPECT_EQ(fast.forward(batch.inputs.data(), batch.targets.data(), 2, 8), 0.0f);
  fast.backward();
  for (size_t i = 0; i < fast.num_params(); i++) ASSERT_EQ(fast.grads_memory()[i], 0.0f) << "parameter " << i;
}

// ---------------------------------------------------------------------------------------------------------------
// Receptive fields: with a target only at position t, the loss cannot depend on positions the masks hide from t.
// wpe row j is used only at position j, so its gradient is ∂loss/∂(input at j), summed over the batch.

namespace {

// Positions j with lowest ≤ j ≤ t must get a non-zero wpe gradient, all others exactly 0 (fast and reference).
void expect_receptive_field(const ModelConfig& c, const std::string& mask_text, int t, int lowest) {
  SCOPED_TRACE("masks " + mask_text + " target at t=" + std::to_string(t));
  const int B = 2, T = c.block_size, C = c.n_embd;
  GPT fast(c, masks_from(mask_text, c.n_layer));
  set_arena(fast.params_memory(), testutil::random_params(c, 21));
  Batch batch = random_batch(B, T, c.vocab_size, 22);
  for (int b = 0; b < B; b++)
    for (int j = 0; j < T; j++)
      if (j != t) batch.targets[b * T + j] = kNoTarget;
  fast.zero_grad();
  fast.forward(batch.inputs.data(), batch.targets.data(), B, T);
  fast.backward();
  ReferenceGPT<double> ref(c, fast.masks());
  ref.params = to_double(fast.params_memory());
  std::vector<double> grads(ref.params.size(), 0.0);
  ref.forward(batch.inputs, batch.targets, B, T);
  ref.backward(grads);
  const float* dwpe = fast.grads().wpe;
  const double* dwpe_ref = grads.data() + ref.offset("wpe.weight");
  for (int j = 0; j < T; j++) {
    double row = 0;
    for (int k = 0; k < C; k++) {
      if (j < lowest || j > t) {
        EXPECT_EQ(dwpe[j * C + k], 0.0f) << "position " << j << " is hidden from " << t;
        EXPECT_EQ(dwpe_ref[j * C + k], 0.0) << "reference: position " << j << " is hidden from " << t;
      }
      row += std::fabs(dwpe[j * C + k]);
    }
    if (j >= lowest && j <= t) {
      EXPECT_GT(row, 0.0) << "position " << j << " is visible from " << t << " but has no gradient";
    }
  }
}

}  // namespace

TEST(ModelReceptiveField, CausalTargetAtTSeesNothingLater) {
  const ModelConfig c = tiny_config();
  for (int t : {0, 3, 7}) expect_receptive_field(c, "causal", t, 0);
}

TEST(ModelReceptiveField, WindowTwoOneLayerSeesOnlyTMinusOneAndT) {
  const ModelConfig c = make_config(1, 2, 8, 8, 11);
  for (int t : {0, 1, 4, 7}) expect_receptive_field(c, "window:2", t, std::max(0, t - 1));
}

// Windows compose across layers: with L layers of window:W the target at t depends on t − L·(W−1) … t.
TEST(ModelReceptiveField, WindowTwoTwoLayersSeesTMinusTwoToT) {
  const ModelConfig c = tiny_config();
  for (int t : {2, 5, 7}) expect_receptive_field(c, "window:2", t, t - 2);
  for (int t : {4, 7}) expect_receptive_field(c, "window:2,causal", t, 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Training: a plain Adam written here (not the project's AdamW)

namespace {


float train_step(GPT& model, testutil::TestAdam& adam, const Batch& batch, int B, int T, float lr) {
  model.zero_grad();
  const float loss = model.forward(batch.inputs.data(), batch.targets.data(), B, T);
  model.backward();
  adam.update(model, lr);
  return loss;
}

}  // namespace

// One fixed batch of next-token sequences; row b starts with token b so every position's context determines its
// target and the batch can be memorised exactly.
TEST(ModelTraining, MemorisesOneBatch) {
  const ModelConfig c = make_config(2, 2, 32, 16, 10);
  const int B = 4, T = 16;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> id(0, c.vocab_size - 1);
  Batch batch;
  for (int b = 0; b < B; b++) {
    std::vector<int> seq(T + 1);
    for (int& x : seq) x = id(rng);
    seq[0] = b;
    batch.inputs.insert(batch.inputs.end(), seq.begin(), seq.end() - 1);
    batch.targets.insert(batch.targets.end(), seq.begin() + 1, seq.end());
  }
  GPT model(c);
  model.init_weights(5);
  testutil::TestAdam adam;
  const float first = train_step(model, adam, batch, B, T, 1e-2f);
  EXPECT_NEAR(first, std::log((double)c.vocab_size), 0.3);  // an untrained model is close to uniform
  float loss = first;
  int steps = 1;
  for (; steps < 400 && loss >= 0.05f; steps++) loss = train_step(model, adam, batch, B, T, 1e-2f);
  const float final_loss = model.forward(batch.inputs.data(), batch.targets.data(), B, T);
  EXPECT_LT(final_loss, 0.05f) << "started at " << first << ", after " << steps << " steps";
  RecordProperty("steps", steps);
}

TEST(ModelTraining, SameSeedIsBitIdenticalDifferentSeedDiffers) {
  const ModelConfig c = make_config(2, 2, 16, 8, 9);
  const int B = 3, T = 8;
  GPT a(c), b(c), other(c);
  a.init_weights(77);
  b.init_weights(77);
  other.init_weights(78);
  ASSERT_EQ(a.params_memory().to_vector(), b.params_memory().to_vector());
  size_t differing = 0;
  for (size_t i = 0; i < a.num_params(); i++) differing += a.params_memory()[i] != other.params_memory()[i];
  // Everything drawn from the generator differs (only the constant LayerNorm weights, biases agree).
  size_t drawn = 0;
  for (const TensorSpec& t : a.table()) drawn += (t.init == Init::Normal || t.init == Init::ResidualNormal) ? t.numel : 0;
  EXPECT_EQ(differing, drawn);

  testutil::TestAdam adam_a, adam_b;
  for (int step = 0; step < 20; step++) {
    const Batch batch = random_batch(B, T, c.vocab_size, 1000 + step);
    const float la = train_step(a, adam_a, batch, B, T, 1e-2f), lb = train_step(b, adam_b, batch, B, T, 1e-2f);
    uint32_t bits_a, bits_b;
    std::memcpy(&bits_a, &la, 4), std::memcpy(&bits_b, &lb, 4);
    ASSERT_EQ(bits_a, bits_b) << "step " << step << ": " << la << " vs " << lb;
  }
  EXPECT_EQ(std::memcmp(a.params_memory().data(), b.params_memory().data(), a.num_params() * sizeof(float)), 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Input checks

namespace {

// The message GPT's constructor throws for config c, or "" if it accepts it.
std::string construction_error(const ModelConfig& c, std::vector<AttentionMask> masks = {}) {
  try {
    GPT model(c, std::move(masks));
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

std::string forward_error(GPT& model, const std::vector<int>& inputs, const std::vector<int>& targets, int B, int T) {
  try {
    model.forward(inputs.data(), targets.empty() ? nullptr : targets.data(), B, T);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(ModelChecks, ConstructorRejectsBadConfigsNamingTheField) {
  EXPECT_EQ(construction_error(tiny_config()), "");
  ModelConfig c = tiny_config();
  c.n_embd = 10, c.n_head = 4;
  const std::string indivisible = construction_error(c);
  EXPECT_TRUE(contains(indivisible, "n_embd") && contains(indivisible, "n_head")) << indivisible;
  const struct {
    int ModelConfig::*field;
    const char* name;
  } fields[] = {{&ModelConfig::n_layer, "n_layer"},
                {&ModelConfig::n_head, "n_head"},
                {&ModelConfig::n_embd, "n_embd"},
                {&ModelConfig::block_size, "block_size"},
                {&ModelConfig::vocab_size, "vocab_size"}};
  for (const auto& f : fields)
    for (int bad : {0, -1, -64}) {
      ModelConfig b = tiny_config();
      b.*f.field = bad;
      const std::string message = construction_error(b);
      EXPECT_TRUE(contains(message, f.name)) << f.name << " = " << bad << " gave: '" << message << "'";
    }
  const std::string wrong_masks = construction_error(tiny_config(), masks_from("causal", 3));
  EXPECT_TRUE(contains(wrong_masks, "mask")) << wrong_masks;
}

TEST(ModelChecks, ForwardRejectsBadTokensAndLengths) {
  const ModelConfig c = tiny_config();
  GPT model(c);
  model.init_weights(1);
  const Batch ok = random_batch(2, 8, c.vocab_size, 31, 3);
  EXPECT_EQ(forward_error(model, ok.inputs, ok.targets, 2, 8), "");  // kNoTarget is a valid target
  EXPECT_EQ(forward_error(model, ok.inputs, {}, 2, 8), "");          // no targets: logits only
  for (int bad : {c.vocab_size, -1, 1000}) {
    Batch b = ok;
    b.inputs[5] = bad;
    EXPECT_TRUE(contains(forward_error(model, b.inputs, b.targets, 2, 8), "out of range")) << "input " << bad;
  }
  for (int bad : {c.vocab_size, -2}) {
    Batch b = ok;
    b.targets[6] = bad;
    EXPECT_TRUE(contains(forward_error(model, b.inputs, b.targets, 2, 8), "out of range")) << "target " << bad;
  }
  std::vector<int> long_inputs(9, 0), long_targets(9, 0);
  const std::string too_long = forward_error(model, long_inputs, long_targets, 1, 9);
  EXPECT_TRUE(contains(too_long, "block_size")) << too_long;
  EXPECT_NE(forward_error(model, ok.inputs, ok.targets, 0, 8), "");
  EXPECT_NE(forward_error(model, ok.inputs, ok.targets, 2, 0), "");
  // backward needs a forward with targets
  model.forward(ok.inputs.data(), nullptr, 2, 8);
  EXPECT_THROW(model.backward(), std::runtime_error);
}
