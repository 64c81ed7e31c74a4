// Tests for the Gated DeltaNet op layer (src/ops/deltanet.*). What every recurrent op satisfies runs here through
// the shared harness (tests/op_harness.h, each check against an independent reference): the fast float forward
// against the double-precision textbook (src/textbook/deltanet.h) at odd sizes — heads of N = 1, 2, 3, 5, the
// convolution's K = 1, 2, 3, 4, T inside, at and across the chunk of 16 (19, 20, 37) — with β in (0, 1) and in
// (0, 2); every gradient (each of the 13 tensors and the input) against central finite differences of the textbook
// forward; one and two threads; an arena carved for a larger run; decoding one token at a time, the state it keeps
// and its size; M against the textbook's; the textbook's recurrence (matrices I − βkkᵀ formed, triple loops)
// against its attention form M[t, s] and its backward against a five-point derivative; the recurrence's reverse
// pass alone against finite differences of the textbook's recurrence. This file gives DeltaNet's traits for it (the
// cases, how a test layer is drawn) and what is DeltaNet's own: β saturated near 0 and near 2, the
// initialisation's ranges, the settings' range checks and tensor names, and at the end the kind in the model (its
// optimizer groups and initialisation, its settings in the metadata).
//
// Tolerances. Float against double, measured against each tensor's largest magnitude (close_to_reference).
// Forward: kTol = 1e-5 of the scale. Gradients: float results against double finite differences (h = 1e-6):
// kGradTol = 5e-5, while a real mistake (a sign, a missing term, an index off by one) is O(1) relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/threads.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "ops/deltanet.h"
#include "mixer_kinds.h"
#include "op_harness.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/deltanet.h"

using namespace testutil;

namespace {

enum class Beta { Free, Zero, Full };  // β as drawn, or saturated at σ → 0 or σ → 1 (β → s)

struct Case {
  int C, H, K, B, T;
  bool negative = false;  // β = 2σ(·)
  Beta beta = Beta::Free;
  DeltaNetDims dims() const { return DeltaNetDims::make(C, H, K, negative ? 1 : 0); }
  std::string describe() const {
    return "C=" + std::to_string(C) + " H=" + std::to_string(H) + " K=" + std::to_string(K) + " B=" +
           std::to_string(B) + " T=" + std::to_string(T) + (negative ? " β∈(0,2)" : "") +
           (beta == Beta::Zero ? " β→0" : beta == Beta::Full ? " β→max" : "");
  }
};

// Gated DeltaNet's op and textbook as the harness (tests/op_harness.h) runs them.
struct DeltaNetOp {
  using Case = ::Case;
  using Dims = DeltaNetDims;
  template <typename Ptr>
  using Tensors = DeltaNetTensors<Ptr>;
  using Activations = DeltaNetActivations;
  static constexpr double kTol = 1e-5;
  static constexpr double kGradTol = 5e-5;
  static constexpr size_t kTwoThreadSamples = 12;
  static constexpr int kChunk = kDeltaNetChunk;

  // N = 3, 1, 3, 5, 2, 1; K = 4, 4, 1, 3, 4, 2; T = 7 (inside a chunk), 37 (two chunks and a partial one), 16
  // (exactly one), 20 and 19 (across), 5; β ∈ (0, 2) in two of them.
  static std::vector<Case> cases() {
    return {
        {6, 2, 4, 2, 7},        {3, 3, 4, 1, 37},       {6, 2, 1, 2, 16},
        {5, 1, 3, 1, 20, true}, {4, 2, 4, 2, 19, true}, {1, 1, 2, 2, 5},
    };
  }
  // B·T·C·N = 53760 and 34560 ≥ worth_threads' 32768: two heads, and one head.
  static std::vector<Case> two_thread_cases() { return {Case{32, 2, 4, 3, 35, true}, Case{24, 1, 3, 3, 20}}; }
  static ArenaCase<Case> arena_case() {
    ArenaCase<Case> arena;
    arena.run = Case{6, 2, 4, 2, 18, true};
    arena.carved_B = 3;
    arena.carved_T = 40;
    return arena;
  }
  static Case long_decode_case() { return Case{6, 2, 4, 1, 300}; }
  static Case five_point_case() { return Case{6, 2, 3, 2, 9, true}; }
  static Case step_case(const Case& c) { return c; }
  static uint32_t case_seed(const Case& c) { return c.T; }

  // Parameters far from the initialisation, so that every term matters: decays α across (0, 1), β across its
  // range, gains away from 1. With β saturated, W_β's row 0 is ∓30 and the inputs' channel 0 is 1 (see
  // BetaNearZeroAndNearTwo), the rest of W_β small: u·W_β = ∓30 ± 0.5 at every row.
  static std::vector<double> draw_tensor(const TensorDecl& s, const Case& c, std::mt19937& rng) {
    TensorRange range(s.name);
    range.set("deltanet.A_log", -1.5, 1.0);
    range.set("deltanet.dt_bias", -2.0, 0.5);
    range.set("deltanet.norm.weight", 0.5, 1.5);
    std::vector<double> v = uniform(numel(s), rng, range.lo, range.hi);
    if (c.beta != Beta::Free && s.name == "deltanet.beta.weight") {
      for (double& x : v) x *= 0.1;
      for (int h = 0; h < c.H; h++) v[h] = c.beta == Beta::Zero ? -30.0 : 30.0;  // row 0, every head
    }
    return v;
  }

  template <typename Ptr>
  static auto tensor_slots(const Dims& d) {
    return deltanet_tensor_slots<Ptr>(d);
  }
  static constexpr auto activation_floats = &deltanet_activation_floats;
  static constexpr auto activations = &deltanet_activations;
  static constexpr auto scratch_floats = &deltanet_scratch_floats;
  static constexpr auto forward = &deltanet_forward;
  static constexpr auto backward = &deltanet_backward;
  static constexpr auto ref_forward = &ref_deltanet_forward<double>;
  static constexpr auto ref_backward = &ref_deltanet_backward<double>;

  // Decoding: the convolutions' last K − 1 inputs (3·(K − 1)·C floats), then S per head; a zeroed state is the
  // start of a sequence.
  static constexpr auto state_floats = &deltanet_state_floats;
  static size_t state_floats_by_hand(const Dims& d) {
    return 3 * (size_t)(d.K - 1) * d.C + (size_t)d.H * d.N * d.N;
  }
  static void state_reset(float* state, const Dims& d) {
    std::fill(state, state + deltanet_state_floats(d), 0.0f);
  }
  static constexpr auto step_scratch_floats = &deltanet_step_scratch_floats;
  static constexpr auto step = &deltanet_step;

  static void implied_attention(float* M, const Activations& a, const DeltaNetWeights&, const Dims& d, int B, int T) {
    deltanet_implied_attention(M, a, d, B, T);
  }
  static constexpr auto ref_implied_attention = &ref_deltanet_implied_attention<double>;

  // The chunked recurrence: S_t = α_t S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ, y_t = S_t q_t, and
  // M[t, s] = β_s ∏α k_sᵀ E_{s+1}⋯E_t q_t.
  static std::vector<double> ref_recurrence(const double* u, const Tensors<const double*>& w, const Dims& d, int B,
                                            int T, std::vector<double>* S) {
    return ref_deltanet_recurrence(ref_deltanet_inputs(u, w, d, B, T), d, B, T, S);
  }
  static std::vector<double> ref_attention_form(const double* u, const Tensors<const double*>& w, const Dims& d,
                                                int B, int T) {
    return ref_deltanet_attention_form(ref_deltanet_inputs(u, w, d, B, T), d, B, T);
  }
  // S is a sum of terms of the size of β·v, which may cancel (N = 1: a scalar): measured against that size.
  static double state_scale(const double* u, const Tensors<const double*>& w, const Dims& d, int B, int T) {
    const RefDeltaNetInputs<double> in = ref_deltanet_inputs(u, w, d, B, T);
    return 2 * max_abs(in.v.data(), in.v.size());
  }
  static size_t matrix_state_offset(const Dims& d) { return 3 * (size_t)(d.K - 1) * d.C; }  // after the convs'
  static constexpr auto final_state = &deltanet_final_state;
  static constexpr auto state_from_forward = &deltanet_state_from_forward;
  static Dims recurrence_dims(int C, int H) { return DeltaNetDims::make(C, H, 4, 1); }
  // q, v; k not normalised; β anywhere in (0, 2), α in (0.5, 1), one per head.
  static std::vector<RecurrenceInput> recurrence_inputs(const Dims& d) {
    return {recurrence_input("q", d.C),
            recurrence_input("k", d.C, -0.7, 0.7),
            recurrence_input("v", d.C),
            recurrence_input("β", d.H, 0.0, 2.0),
            recurrence_input("α", d.H, 0.5, 1.0)};
  }
  static void recurrence_forward(float* y, float* state, const std::vector<const float*>& in, const Dims& d, int B,
                                 int T) {
    deltanet_recurrence_forward(y, state, in[0], in[1], in[2], in[3], in[4], d, B, T);
  }
  static void recurrence_backward(const std::vector<float*>& din, const float* dy, const float* state,
                                  const std::vector<const float*>& in, const Dims& d, int B, int T, float* scratch) {
    deltanet_recurrence_backward(din[0], din[1], din[2], din[3], din[4], dy, state, in[0], in[1], in[2], in[3], in[4],
                                 d, B, T, scratch);
  }
  static std::vector<double> ref_recurrence_of(const std::vector<std::vector<double>>& in, const Dims& d, int B,
                                               int T) {
    RefDeltaNetInputs<double> r;
    r.q = in[0];
    r.k = in[1];
    r.v = in[2];
    r.beta = in[3];
    r.alpha = in[4];
    return ref_deltanet_recurrence(r, d, B, T);
  }
};

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(DeltaNet, RecurrentOp, DeltaNetOp);
INSTANTIATE_TYPED_TEST_SUITE_P(DeltaNet, ChunkedRecurrenceOp, DeltaNetOp);

// β saturated: near 0 (the state only decays: nothing written, nothing erased) and near 2 with the negative
// eigenvalues on (the transition along k is α(1 − β) ≈ −α: the recall flips sign), and near 1 without them (the
// old association along k fully replaced). Forward and every gradient against the textbook.
TEST(DeltaNetOp, BetaNearZeroAndNearTwo) {
  set_threads(1);
  for (const Case& c : {Case{6, 2, 4, 2, 19, false, Beta::Zero}, Case{6, 2, 4, 2, 19, true, Beta::Full},
                        Case{4, 1, 2, 1, 18, false, Beta::Full}, Case{4, 2, 3, 1, 17, true, Beta::Zero}}) {
    SCOPED_TRACE(c.describe());
    // channel 0 is 1 at every row, so that W_β's row 0 saturates σ
    Forwarded<DeltaNetOp> f(c, 51 + c.T, [&c](std::vector<double>& u) {
      for (size_t r = 0; r < (size_t)c.B * c.T; r++) u[r * c.C] = 1.0;
    });
    const float top = c.negative ? 2.0f : 1.0f;
    for (size_t i = 0; i < (size_t)c.B * c.T * c.H; i++) {
      if (c.beta == Beta::Zero) {
        ASSERT_LT(f.a.beta[i], 1e-10f) << "β saturates at 0";
      } else {
        ASSERT_GT(f.a.beta[i], top * (1 - 1e-6f)) << "β saturates at its top";
      }
    }
    EXPECT_TRUE(close_to_reference(f.out, f.ref_out(), DeltaNetOp::kTol, "deltanet out"));
    expect_backward_matches_textbook(f);
  }
}

// The initialisation's stated ranges: softplus(dt_bias) in [1e-3, 1e-1], exp(A_log) in (0, 16], the convolutions
// within ±1/√K (norm.weight and the output projection: DeltaNetModel.TensorsInitAndOptimizerGroups).
TEST(DeltaNetOp, InitialisationRanges) {
  const DeltaNetDims d = DeltaNetDims::make(64, 8, 4, 0);
  Rng rng(3);
  std::vector<float> dt(4096);
  std::vector<float> A(4096);
  std::vector<float> conv(64 * 4);
  deltanet_init_dt_bias(dt.data(), dt.size(), rng);
  deltanet_init_A_log(A.data(), A.size(), rng);
  deltanet_init_conv(conv.data(), conv.size(), d.K, rng);
  for (float x : dt) {
    const double sp = std::log1p(std::exp((double)x));
    ASSERT_GE(sp, 1e-3 * (1 - 1e-5));
    ASSERT_LE(sp, 1e-1 * (1 + 1e-5));
  }
  double lo = 1e9;
  double hi = -1e9;
  for (float x : A) {
    ASSERT_TRUE(std::isfinite(x));
    lo = std::min(lo, std::exp((double)x));
    hi = std::max(hi, std::exp((double)x));
  }
  EXPECT_GT(lo, 0.0);
  EXPECT_LT(lo, 0.1);   // U(0, 16] reaches near 0 in 4096 draws
  EXPECT_LE(hi, 16.0 * (1 + 1e-6));
  EXPECT_GT(hi, 15.9);
  for (float x : conv) ASSERT_LE(std::fabs(x), 0.5f);  // 1/√K, K = 4
}

TEST(DeltaNetOp, SettingsAreCheckedAndTensorsNamed) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message([] { DeltaNetDims::make(8, 2, 0, 0); }).find("--deltanet-conv"), std::string::npos);
  EXPECT_NE(message([] { DeltaNetDims::make(8, 2, 65, 0); }).find("--deltanet-conv"), std::string::npos);
  EXPECT_NO_THROW(DeltaNetDims::make(8, 2, 64, 1));
  EXPECT_NO_THROW(DeltaNetDims::make(8, 2, 1, 0));
  EXPECT_NE(message([] { DeltaNetDims::make(8, 2, 4, 2); }).find("--deltanet-negative-eigenvalues"), std::string::npos);
  EXPECT_NE(message([] { DeltaNetDims::make(8, 2, 4, -1); }).find("--deltanet-negative-eigenvalues"), std::string::npos);
  EXPECT_NE(message([] { DeltaNetDims::make(9, 2, 4, 0); }).find("divisible"), std::string::npos);
  const auto slots = deltanet_tensor_slots<const float*>(DeltaNetDims::make(8, 2, 3, 0));
  ASSERT_EQ(slots.size(), 13u);
  const char* names[] = {"deltanet.q.weight", "deltanet.k.weight",    "deltanet.v.weight",     "deltanet.g.weight",
                         "deltanet.o.weight", "deltanet.conv_q",      "deltanet.conv_k",       "deltanet.conv_v",
                         "deltanet.beta.weight", "deltanet.alpha.weight", "deltanet.A_log", "deltanet.dt_bias",
                         "deltanet.norm.weight"};
  const std::vector<int64_t> shapes[] = {{8, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 3}, {8, 3},
                                         {8, 3}, {8, 2}, {8, 2}, {2},    {2},    {4}};
  for (size_t i = 0; i < slots.size(); i++) {
    EXPECT_EQ(slots[i].decl.name, names[i]);
    EXPECT_EQ(slots[i].decl.shape, shapes[i]) << names[i];
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The kind in the model: what is DeltaNet's own (the tensor table's init and optimizer groups, the settings in the
// metadata). What every kind satisfies (the model against the textbook, alone and in a hybrid with every other
// kind, decoding, masks, checkpoints, the lab, the programs) is the conformance suite's, tests/test_every_kind.cpp.

TEST(DeltaNetModel, TensorsInitAndOptimizerGroups) {
  const ModelConfig c = testutil::sized_config("deltanet", 2, 2, 16, 8, 11);
  GPT model(c);
  model.init_weights(5);
  for (const TensorSpec& t : model.table()) {
    if (t.name.rfind("h.1.deltanet.", 0) != 0) continue;
    const std::string name = t.name.substr(4);
    const bool projection = name == "deltanet.q.weight" || name == "deltanet.k.weight" ||
                            name == "deltanet.v.weight" || name == "deltanet.g.weight" || name == "deltanet.o.weight";
    EXPECT_EQ(t.weight_decay, projection) << name;
    EXPECT_EQ(t.matrix, projection) << name;
  }
  const float* norm = model.parameter("h.1.deltanet.norm.weight");
  for (int i = 0; i < 8; i++) EXPECT_EQ(norm[i], 1.0f);
  const float* wo = model.parameter("h.1.deltanet.o.weight");
  double ss = 0;
  for (int i = 0; i < 16 * 16; i++) ss += (double)wo[i] * wo[i];
  EXPECT_NEAR(std::sqrt(ss / 256), 0.02 / std::sqrt(4.0), 0.004);  // N(0, 0.02/√(2·n_layer))
  const float* A_log = model.parameter("h.1.deltanet.A_log");
  for (int h = 0; h < 2; h++) EXPECT_TRUE(std::exp(A_log[h]) > 0 && std::exp(A_log[h]) <= 16.0f) << A_log[h];
}

// The settings are stored (only) by a model with a deltanet layer, and load back.
TEST(DeltaNetModel, SettingsInTheMetadata) {
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 8;
  c.vocab_size = tok.size();
  c.mixer = "softmax,deltanet";
  c.mixer_settings.get<DeltaNetSettings>().deltanet_conv = 2;
  c.mixer_settings.get<DeltaNetSettings>().deltanet_negative_eigenvalues = 1;
  GPT model(c);
  model.init_weights(4);
  const std::string path = dir / "m.safetensors";
  save_checkpoint(path, model, tok, nullptr);
  const SafetensorsContents file = read_safetensors(path);
  EXPECT_EQ(file.metadata.at("deltanet_conv"), "2");
  EXPECT_EQ(file.metadata.at("deltanet_negative_eigenvalues"), "1");
  const Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.model->config.mixer_settings.get<DeltaNetSettings>().deltanet_conv, 2);
  EXPECT_EQ(loaded.model->config.mixer_settings.get<DeltaNetSettings>().deltanet_negative_eigenvalues, 1);
  EXPECT_NE(describe(loaded.model->config).find("deltanet (conv 2, β in (0, 2))"), std::string::npos)
      << describe(loaded.model->config);
}
