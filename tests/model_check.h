// The whole-model checks shared by test_masks.cpp and the conformance suite (test_every_kind.cpp): the double
// reference model (textbook/reference.h) against central differences of its own forward, and the fast float model
// against the reference (loss, logits, each layer's mixing weights — P, or the M a recurrence implies — and every
// gradient).
//
// Tolerances as in test_model.cpp: the reference's difference quotients with h = 1e-6 carry ~1e-10 of rounding and
// ~1e-12 of truncation, so 1e-6 relative + 1e-9 absolute; the fast model through ≤ 3 float blocks is within ~2e-6
// of each tensor's scale, so 3e-5 of that scale (a wrong term is O(1)). Also the decoder's check of the suite: its
// cached one-token steps against full forwards.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/rng.h"
#include "model/decoder.h"
#include "model/model.h"
#include "test_util.h"
#include "textbook/reference.h"

namespace testutil {

constexpr double kFastTol = 3e-5;
// The gradients' relative tolerance: a gradient goes through every layer's backward as well as its forward, in float
// and in an order of sums the build chooses. Measured: 3.05e-5 (rwkv's wpe.weight, the sanitized -O1 build of
// make test-asan on an Intel Xeon, with OpenBLAS's own choice of kernels there: Prescott, for a CPU it does not
// know); a wrong formula is off by O(1).
constexpr double kFastGradTol = 1e-4;
// The float model's gradients are measured against max(their tensor's largest magnitude, this fraction of the
// model's largest gradient): float rounds each term of a long sum, so a tensor whose gradients are small because
// their terms cancel (mamba's dt_bias, rwkv's w0) carries the rounding of the larger terms. Measured on an Intel
// Xeon with OpenBLAS's Prescott kernels (its own choice there): rwkv's w0 off by 4.8e-7 of the largest gradient,
// mamba's dt_bias by 6.8e-5 of its own. A wrong formula is still caught in any tensor whose gradients reach 1e-3 of
// the largest (its error there is O(1) of its own scale, against 5e-6 of the largest allowed).
constexpr double kFloatGradientFloor = 5e-2;

// Writes into the model's arena in place (GPT's views point into it; it must never be reassigned).
inline void load_params(GPT& model, const std::vector<double>& values) {
  ASSERT_EQ(model.params_memory().size(), values.size());
  std::copy(values.begin(), values.end(), model.params_memory().begin());
}

inline void expect_reference_matches_finite_differences(const ModelConfig& c, const std::vector<AttentionMask>& masks,
                                                        const std::vector<int>& x, const std::vector<int>& y, int B,
                                                        int T, uint32_t seed = 201) {
  ReferenceGPT<double> ref(c, masks);
  ref.params = random_params(c, seed);
  std::vector<double> grads(ref.params.size(), 0.0);
  ref.forward(x, y, B, T);
  ref.backward(grads);
  const std::vector<double> numeric =
      finite_differences([&] { return ref.forward(x, y, B, T); }, ref.params.data(), ref.params.size(), 1e-6);
  for (const TensorSpec& t : ref.table) {
    const std::vector<double> a(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
    const std::vector<double> n(numeric.begin() + t.offset, numeric.begin() + t.offset + t.numel);
    EXPECT_TRUE(all_close(a, n, 1e-6, 1e-9, t.name));
    EXPECT_GT(max_abs(a.data(), a.size()), 0.0) << t.name << " has an all-zero gradient";
  }
}

// `gradient_floor` > kFloatGradientFloor measures each gradient against max(its own largest magnitude,
// gradient_floor × the largest gradient of the model): for a reference that differentiates a layer by central
// differences (an rwkv layer, h = 1e-6), whose error, ~1e-9 of the loss's scale, is the same for every tensor, so
// that a tensor whose own gradients are 1e-4 meets it at 1e-5 relative, while a wrong formula is O(1) of its own
// scale.
inline void expect_fast_matches_reference(const ModelConfig& c, const std::vector<AttentionMask>& masks,
                                          const std::vector<int>& x, const std::vector<int>& y, int B, int T,
                                          uint32_t seed = 202, double gradient_floor = 0) {
  GPT fast(c, masks);
  load_params(fast, random_params(c, seed));
  ReferenceGPT<double> ref(c, masks);
  ref.params = to_double(fast.params_memory());
  std::vector<double> grads(ref.params.size(), 0.0);
  const double loss = ref.forward(x, y, B, T);
  ref.backward(grads);
  fast.zero_grad();
  const float loss_f = fast.forward(x.data(), y.data(), B, T);
  fast.backward();
  EXPECT_NEAR(loss_f, loss, kFastTol * std::max(1.0, std::fabs(loss)));
  EXPECT_TRUE(close_to_reference(fast.logits(), ref.logits.data(), ref.logits.size(), kFastTol, "logits"));
  for (int l = 0; l < c.n_layer; l++)
    EXPECT_TRUE(close_to_reference(fast.mixing_weights(l), ref.layers[l].probs.data(), ref.layers[l].probs.size(),
                                   kFastTol, "layer " + std::to_string(l) + " P"));
  const double largest = max_abs(grads.data(), grads.size());
  const double floor = std::max(gradient_floor, kFloatGradientFloor) * largest;
  for (const TensorSpec& t : ref.table)
    EXPECT_TRUE(close_to_reference(fast.grads_memory().data() + t.offset, grads.data() + t.offset, t.numel,
                                   kFastGradTol, "gradient of " + t.name, floor));
}

// A model of `c` with every parameter N(0, 0.3): far from the initialisation, so that every term matters.
inline std::unique_ptr<GPT> random_model(const ModelConfig& c, uint64_t seed) {
  auto model = std::make_unique<GPT>(c);
  Rng rng(seed);
  for (float& p : model->params_memory()) p = (float)(0.3 * rng.normal());
  return model;
}

// `pushes` tokens pushed one at a time into a decoder of `model` (V = vocab_size): every pushed token's logits
// against a full forward of the decoder's context, through at least three slides of the window (the states are the
// shadow's, model/decoder.h); then reset() starts a new sequence, and the state
// left by the last one must not leak into it.
inline void expect_decoder_matches_full_forward(GPT& model, int pushes) {
  const int V = model.config.vocab_size, block = model.config.block_size;
  Decoder decoder(model);
  ASSERT_TRUE(decoder.uses_cache());
  std::vector<int> context;
  Rng rng(9);
  int slides = 0;
  for (int i = 0; i < pushes; i++) {
    const int token = rng.below(V);
    if ((int)context.size() == block) context.erase(context.begin(), context.end() - block / 2), slides++;
    context.push_back(token);
    const float* cached = decoder.push(token);
    const std::vector<float> got(cached, cached + V);
    ASSERT_EQ(decoder.context(), context);
    const int T = (int)context.size();
    model.forward(context.data(), nullptr, 1, T);
    const float* full = model.logits() + (size_t)(T - 1) * V;
    double worst = 0, lo = full[0], hi = full[0];
    for (int v = 0; v < V; v++) {
      worst = std::max(worst, (double)std::fabs(got[v] - full[v]));
      lo = std::min(lo, (double)full[v]), hi = std::max(hi, (double)full[v]);
    }
    EXPECT_LT(worst, 1e-4) << "token " << i << ", context " << T;
    EXPECT_GT(hi - lo, 0.1) << "token " << i << ": logits too flat for the comparison to mean anything";
  }
  EXPECT_GE(slides, 3);
  decoder.reset();
  const std::vector<int> fresh = {3, 1, 4};
  const float* cached = nullptr;
  for (int token : fresh) cached = decoder.push(token);
  model.forward(fresh.data(), nullptr, 1, 3);
  for (int v = 0; v < V; v++) EXPECT_NEAR(cached[v], model.logits()[2 * V + v], 1e-4) << "after reset, logit " << v;
}

// A row of a model's tensor table as a kind's own test states it: the name, shape, AdamW's decay, Muon's flag.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool decay;
  bool matrix;
};

// The table's rows whose names start with `prefix` (one layer's own tensors, e.g. "h.1.rwkv."), in table order,
// against `expected`.
inline void expect_tensor_rows(const GPT& model, const std::string& prefix, const std::vector<ExpectedTensor>& expected) {
  std::vector<const TensorSpec*> rows;
  for (const TensorSpec& t : model.table())
    if (t.name.rfind(prefix, 0) == 0) rows.push_back(&t);
  ASSERT_EQ(rows.size(), expected.size()) << prefix;
  for (size_t i = 0; i < expected.size(); i++) {
    EXPECT_EQ(rows[i]->name, expected[i].name);
    EXPECT_EQ(rows[i]->shape, expected[i].shape) << expected[i].name;
    EXPECT_EQ(rows[i]->weight_decay, expected[i].decay) << expected[i].name;
    EXPECT_EQ(rows[i]->matrix, expected[i].matrix) << expected[i].name;
  }
}

// A tensor's values, by its name in the table.
inline std::vector<float> tensor_values(const GPT& model, const std::string& name) {
  for (const TensorSpec& t : model.table())
    if (t.name == name)
      return std::vector<float>(model.params_memory().data() + t.offset, model.params_memory().data() + t.offset + t.numel);
  ADD_FAILURE() << "no " << name;
  return {};
}

}  // namespace testutil
