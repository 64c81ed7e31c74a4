// Tests for the RWKV-7 op layer (src/ops/rwkv.*). What every recurrent op satisfies runs here through the shared
// harness (tests/op_harness.h, each check against an independent reference): the fast float forward against the
// double-precision textbook (src/textbook/rwkv.h) and every gradient (each of the 18 tensors and the input) against
// central finite differences of the textbook forward, at odd sizes — T below, at and across the chunk of 16 (T = 37:
// two whole chunks and a partial one), heads of N = 1 and N > 1, the erase rate a forced to 0 and to 1, the erase
// off; two threads against one and the textbook; an arena carved for a larger run; decoding one token at a time and
// the state it keeps against the textbook; the state's size; M against the textbook's; the textbook's recurrence
// against its attention form and its backward against a five-point derivative; the recurrence's reverse pass alone
// against finite differences of the textbook's recurrence. This file gives RWKV's traits for it (the cases, how a
// test layer is drawn) and what is RWKV's own: the state keeping the last input, the initialisation, the settings'
// checks and tensor names, and at the end the kind in the model (its tensors, their initialisation and optimizer
// groups, its settings and its state's size).
//
// Tolerances. Float against double, measured against each tensor's largest magnitude (close_to_reference).
// Forward: measured ≤ 1e-6 of the scale, so kTol = 1e-5. Gradients: float results against double finite
// differences (h = 1e-6): kGradTol = 5e-5, while a real mistake (a sign, a missing term, an index off by one) is
// O(1) relative.
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
#include "ops/rwkv.h"
#include "model_check.h"
#include "op_harness.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/rwkv.h"

using namespace testutil;

namespace {

enum class Rate { Free, Zero, One };  // a = σ(a0 + …) as drawn, or forced to 0 (no erase) or 1 (full erase)

struct Case {
  int C, H, D, B, T;
  Rate rate = Rate::Free;
  bool erase = true;  // false: rwkv_erase 0, A_t = diag(d_t)
  RwkvDims dims() const { return RwkvDims::make(C, H, D, erase ? 1 : 0); }
  std::string describe() const {
    return "C=" + std::to_string(C) + " H=" + std::to_string(H) + " D=" + std::to_string(D) + " B=" +
           std::to_string(B) + " T=" + std::to_string(T) +
           (rate == Rate::Zero ? " a=0" : rate == Rate::One ? " a=1" : "") + (erase ? "" : " erase off");
  }
};

// RWKV-7's op and textbook as the harness (tests/op_harness.h) runs them.
struct RwkvOp {
  using Case = ::Case;
  using Dims = RwkvDims;
  template <typename Ptr>
  using Tensors = RwkvTensors<Ptr>;
  using Activations = RwkvActivations;
  static constexpr double kTol = 1e-5;
  static constexpr double kGradTol = 5e-5;
  static constexpr size_t kTwoThreadSamples = 12;
  static constexpr int kChunk = kRwkvChunk;

  // N = 3, 1, 5 and 2; T = 7 (inside a chunk), 16 (exactly one), 37 and 20 (across chunks, the last partial); the
  // erase off (A_t = diag(d_t)) with a free and with a = 1.
  static std::vector<Case> cases() {
    return {
        {6, 2, 3, 2, 7},  {3, 3, 2, 1, 37}, {6, 2, 2, 2, 16},           {5, 1, 2, 1, 20},
        {4, 2, 2, 2, 19, Rate::Zero},       {4, 2, 2, 1, 21, Rate::One}, {1, 1, 1, 2, 5},
        {6, 2, 2, 2, 18, Rate::Free, false}, {4, 2, 1, 1, 9, Rate::One, false},
    };
  }
  // B·T·C·N = 53760 and 34560 ≥ worth_threads' 32768: two heads, and one head.
  static std::vector<Case> two_thread_cases() { return {Case{32, 2, 4, 3, 35}, Case{24, 1, 4, 3, 20}}; }
  static ArenaCase<Case> arena_case() {
    ArenaCase<Case> arena;
    arena.run = Case{6, 2, 3, 2, 18};
    arena.carved_B = 3;
    arena.carved_T = 40;
    return arena;
  }
  static Case long_decode_case() { return Case{6, 2, 3, 1, 300}; }
  static Case five_point_case() { return Case{6, 2, 3, 2, 9}; }
  static Case step_case(const Case& c) { return c; }
  static uint32_t case_seed(const Case& c) { return c.T; }

  // Parameters far from the initialisation, so that every term matters: decays d from ~0.55 to ~0.95, rates a
  // across (0, 1) (or forced: a0 = ∓30 with the rate LoRA zero), gains away from 1.
  static std::vector<double> draw_tensor(const TensorDecl& s, const Case& c, std::mt19937& rng) {
    TensorRange range(s.name);
    range.set("rwkv.mix", 0.0, 1.0);
    range.set("rwkv.w0", -2.0, 1.0);
    range.set("rwkv.a0", -1.0, 1.0);
    range.set("rwkv.k_k", 0.5, 1.5);
    range.set("rwkv.k_a", 0.5, 1.5);
    range.set("rwkv.ln_x.weight", 0.5, 1.5);
    range.set("rwkv.ln_x.bias", -0.3, 0.3);
    std::vector<double> v = uniform(numel(s), rng, range.lo, range.hi);
    if (c.rate != Rate::Free && (s.name == "rwkv.a1" || s.name == "rwkv.a2")) v.assign(v.size(), 0.0);
    if (c.rate != Rate::Free && s.name == "rwkv.a0") v.assign(v.size(), c.rate == Rate::Zero ? -30.0 : 30.0);
    return v;
  }

  template <typename Ptr>
  static auto tensor_slots(const Dims& d) {
    return rwkv_tensor_slots<Ptr>(d);
  }
  static constexpr auto activation_floats = &rwkv_activation_floats;
  static constexpr auto activations = &rwkv_activations;
  static constexpr auto scratch_floats = &rwkv_scratch_floats;
  static constexpr auto forward = &rwkv_forward;
  static constexpr auto backward = &rwkv_backward;
  static constexpr auto ref_forward = &ref_rwkv_forward<double>;
  static constexpr auto ref_backward = &ref_rwkv_backward<double>;

  // Decoding: u_{t−1} (C floats), then S per head; a zeroed state is the start of a sequence.
  static constexpr auto state_floats = &rwkv_state_floats;
  static size_t state_floats_by_hand(const Dims& d) { return (size_t)d.C + (size_t)d.H * d.N * d.N; }
  static void state_reset(float* state, const Dims& d) { std::fill(state, state + rwkv_state_floats(d), 0.0f); }
  static constexpr auto step_scratch_floats = &rwkv_step_scratch_floats;
  static constexpr auto step = &rwkv_step;

  static void implied_attention(float* M, const Activations& a, const RwkvWeights&, const Dims& d, int B, int T) {
    rwkv_implied_attention(M, a, d, B, T);
  }
  static constexpr auto ref_implied_attention = &ref_rwkv_implied_attention<double>;

  // The chunked recurrence: S_t = S_{t−1}A_t + v_t k̃_tᵀ, y_t = S_t r_t, and M[t, s] = k̃_sᵀ A_{s+1}⋯A_t r_t.
  static std::vector<double> ref_recurrence(const double* u, const Tensors<const double*>& w, const Dims& d, int B,
                                            int T, std::vector<double>* S) {
    return ref_rwkv_recurrence(ref_rwkv_inputs(u, w, d, B, T), d, B, T, S);
  }
  static std::vector<double> ref_attention_form(const double* u, const Tensors<const double*>& w, const Dims& d,
                                                int B, int T) {
    return ref_rwkv_attention_form(ref_rwkv_inputs(u, w, d, B, T), d, B, T);
  }
  static double state_scale(const double*, const Tensors<const double*>&, const Dims&, int, int) {
    return 0;  // S against its own largest entry
  }
  static size_t matrix_state_offset(const Dims& d) { return (size_t)d.C; }  // after u_{t−1}
  static constexpr auto final_state = &rwkv_final_state;
  static constexpr auto state_from_forward = &rwkv_state_from_forward;
  static Dims recurrence_dims(int C, int H) { return RwkvDims::make(C, H, 1); }
  // r, k̃, v; the decay d in (0.5, 1); κ not normalised; the rate a anywhere in (0, 1).
  static std::vector<RecurrenceInput> recurrence_inputs(const Dims& d) {
    return {recurrence_input("r", d.C),
            recurrence_input("k̃", d.C),
            recurrence_input("v", d.C),
            recurrence_input("d", d.C, 0.5, 1.0),
            recurrence_input("κ", d.C, -0.7, 0.7),
            recurrence_input("a", d.C, 0.0, 1.0)};
  }
  static void recurrence_forward(float* y, float* state, const std::vector<const float*>& in, const Dims& d, int B,
                                 int T) {
    rwkv_recurrence_forward(y, state, in[0], in[1], in[2], in[3], in[4], in[5], d, B, T);
  }
  static void recurrence_backward(const std::vector<float*>& din, const float* dy, const float* state,
                                  const std::vector<const float*>& in, const Dims& d, int B, int T, float* scratch) {
    rwkv_recurrence_backward(din[0], din[1], din[2], din[3], din[4], din[5], dy, state, in[0], in[1], in[2], in[3],
                             in[4], in[5], d, B, T, scratch);
  }
  static std::vector<double> ref_recurrence_of(const std::vector<std::vector<double>>& in, const Dims& d, int B,
                                               int T) {
    RefRwkvInputs<double> r;
    r.r = in[0];
    r.kt = in[1];
    r.v = in[2];
    r.dec = in[3];
    r.kap = in[4];
    r.a = in[5];
    return ref_rwkv_recurrence(r, d, B, T);
  }
};

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(OpsRwkv, RecurrentOp, RwkvOp);
INSTANTIATE_TYPED_TEST_SUITE_P(OpsRwkv, ChunkedRecurrenceOp, RwkvOp);

// After a sequence the decoding state holds its last input u_{T−1} (the token shift's), as the step read it.
TEST(OpsRwkv, StepStateKeepsTheLastInput) {
  set_threads(1);
  for (const Case& c : RwkvOp::cases()) {
    SCOPED_TRACE(c.describe());
    const Forwarded<RwkvOp> f(c, 31 + c.T);
    const StepChain chain = run_step_chain(f);
    for (int b = 0; b < c.B; b++) {
      const size_t last = ((size_t)b * c.T + c.T - 1) * c.C;
      for (int ch = 0; ch < c.C; ch++) EXPECT_EQ(chain.states[b][ch], f.u_f[last + ch]) << "u_{T−1}";
    }
  }
}

// The initialisation's stated ranges: the decay d = exp(−e^{−1/2}σ(w0)) at init spans slow (≈ 1) to fast channels;
// w2, a2, g2 have orthonormal rows × 0.1; W_o = 0; the mixes in [0, 1], decreasing with depth at a channel.
TEST(OpsRwkv, InitialisationRanges) {
  const RwkvDims d = RwkvDims::make(32, 2, 8);
  Rng rng(3);
  std::vector<float> w0(32), w2(8 * 32), wo(32 * 32, 1.0f), mix0(6 * 32), mix3(6 * 32);
  rwkv_init_tensor("rwkv.w0", w0.data(), w0.size(), d, 0, 4, rng);
  double lo = 1, hi = 0;
  for (float x : w0) {
    const double dec = std::exp(-kRwkvDecayScale / (1 + std::exp(-(double)x)));
    lo = std::min(lo, dec), hi = std::max(hi, dec);
  }
  EXPECT_GT(hi, 0.99);
  EXPECT_LT(lo, 0.7);
  rwkv_init_tensor("rwkv.w2", w2.data(), w2.size(), d, 0, 4, rng);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) {
      double dot = 0;
      for (int c = 0; c < 32; c++) dot += (double)w2[i * 32 + c] * w2[j * 32 + c];
      EXPECT_NEAR(dot, i == j ? 0.01 : 0.0, 1e-6);
    }
  rwkv_init_tensor("rwkv.output.weight", wo.data(), wo.size(), d, 0, 4, rng);
  for (float x : wo) ASSERT_EQ(x, 0.0f);
  rwkv_init_tensor("rwkv.mix", mix0.data(), mix0.size(), d, 0, 4, rng);
  rwkv_init_tensor("rwkv.mix", mix3.data(), mix3.size(), d, 3, 4, rng);
  for (size_t i = 0; i < mix0.size(); i++) {
    EXPECT_GE(mix0[i], 0.0f);
    EXPECT_LE(mix0[i], 1.0f);
    EXPECT_LE(mix3[i], mix0[i] + 1e-6f);
  }
}

TEST(OpsRwkv, SettingsAreCheckedAndTensorsNamed) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message([] { RwkvDims::make(8, 2, 0); }).find("--rwkv-lora"), std::string::npos);
  EXPECT_NE(message([] { RwkvDims::make(9, 2, 4); }).find("divisible"), std::string::npos);
  EXPECT_NE(message([] { RwkvDims::make(8, 2, 4, 2); }).find("--rwkv-erase"), std::string::npos);
  const auto slots = rwkv_tensor_slots<const float*>(RwkvDims::make(8, 2, 4));
  ASSERT_EQ(slots.size(), 18u);
  EXPECT_EQ(slots[0].decl.name, "rwkv.mix");
  EXPECT_EQ(slots[0].decl.shape, (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(slots[7].decl.name, "rwkv.w2");
  EXPECT_EQ(slots[7].decl.shape, (std::vector<int64_t>{4, 8}));
}

// ---------------------------------------------------------------------------------------------------------------
// The kind in the model: what is RWKV's own (tensor names, initialisation, optimizer groups, its settings and their
// metadata, the state's size by hand). What every kind satisfies (the model against the textbook, decoding, masks,
// the checkpoint round trip, the lab, the programs) is the conformance suite's, tests/test_every_kind.cpp.

namespace {
// `n_layer` rwkv layers with LoRAs of width `lora`.
ModelConfig rwkv_model(int n_layer, int n_head, int n_embd, int lora, int block) {
  ModelConfig c;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_embd = n_embd;
  c.block_size = block;
  c.vocab_size = 11;
  c.mixer = "rwkv";
  c.mixer_settings.get<RwkvSettings>().rwkv_lora = lora;
  return c;
}
}  // namespace

TEST(RwkvModel, TensorsNamesShapesInitAndOptimizerGroups) {
  const ModelConfig c = rwkv_model(2, 4, 32, 8, 16);
  GPT model(c);
  model.init_weights(7);
  const int64_t C = 32, D = 8;
  const std::vector<ExpectedTensor> expected = {  // decay and Muon alike
      {"h.1.rwkv.mix", {6, C}, false, false},
      {"h.1.rwkv.receptance.weight", {C, C}, true, true},
      {"h.1.rwkv.key.weight", {C, C}, true, true},
      {"h.1.rwkv.value.weight", {C, C}, true, true},
      {"h.1.rwkv.output.weight", {C, C}, true, true},
      {"h.1.rwkv.w0", {C}, false, false},
      {"h.1.rwkv.w1", {C, D}, false, false},
      {"h.1.rwkv.w2", {D, C}, false, false},
      {"h.1.rwkv.a0", {C}, false, false},
      {"h.1.rwkv.a1", {C, D}, false, false},
      {"h.1.rwkv.a2", {D, C}, false, false},
      {"h.1.rwkv.g1", {C, D}, false, false},
      {"h.1.rwkv.g2", {D, C}, false, false},
      {"h.1.rwkv.k_k", {C}, false, false},
      {"h.1.rwkv.k_a", {C}, false, false},
      {"h.1.rwkv.r_k", {C}, false, false},
      {"h.1.rwkv.ln_x.weight", {C}, false, false},
      {"h.1.rwkv.ln_x.bias", {C}, false, false},
  };
  expect_tensor_rows(model, "h.1.rwkv.", expected);
  auto values = [&](const std::string& name) { return tensor_values(model, name); };
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

// O(1) in the context: per rwkv layer C + H·N² floats (u_{t−1} and S), whatever block_size is.
TEST(RwkvModel, StateMatchesAHandCountWhateverTheContext) {
  for (int block : {8, 64}) {
    GPT small(rwkv_model(1, 2, 8, 3, block));
    EXPECT_EQ(small.mixer(0).state_floats(small.masks()[0]), (size_t)(8 + 2 * 4 * 4));
    GPT tiny(rwkv_model(1, 4, 128, 32, block));  // the tiny model's shape: 128 + 4·32² = 4224
    EXPECT_EQ(tiny.mixer(0).state_floats(tiny.masks()[0]), 4224u);
  }
}

TEST(RwkvModel, SettingIsCheckedNamingItsFlag) {
  ModelConfig c = rwkv_model(2, 2, 8, 3, 8);
  EXPECT_NO_THROW(validate(c));
  for (int bad : {0, -1, 5000}) {
    ModelConfig b = c;
    b.mixer_settings.get<RwkvSettings>().rwkv_lora = bad;
    // The row's range alone (what ./train's flag and a checkpoint's metadata meet first), then validate, which also
    // meets the op's own check (RwkvDims::make, for callers of ops/rwkv.h that bypass the table).
    for (const bool table_only : {true, false}) {
      try {
        if (table_only)
          check_ranges(model_settings(), b);
        else
          validate(b);
        ADD_FAILURE() << "accepted rwkv_lora " << bad << (table_only ? " in the settings row's range" : "");
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("--rwkv-lora"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_NE(describe(c).find("rwkv (lora 3)"), std::string::npos) << describe(c);
  EXPECT_EQ(ModelConfig{}.mixer_settings.get<RwkvSettings>().rwkv_lora, 32);
}

// The metadata records rwkv_lora and rwkv_erase; they load back; a model without rwkv layers (the committed
// fixture, older than the kind) stores neither and loads with the defaults.
TEST(RwkvModel, SettingsInTheMetadata) {
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  ModelConfig c = rwkv_model(2, 2, 8, 3, 8);
  c.vocab_size = tok.size();
  c.mixer_settings.get<RwkvSettings>().rwkv_erase = 0;
  GPT model(c);
  model.init_weights(4);
  const std::string path = dir / "m.safetensors";
  save_checkpoint(path, model, tok, nullptr);
  const SafetensorsContents file = read_safetensors(path);
  EXPECT_EQ(file.metadata.at("rwkv_lora"), "3");
  EXPECT_EQ(file.metadata.at("rwkv_erase"), "0");
  Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.model->config.mixer_settings.get<RwkvSettings>().rwkv_lora, 3);
  EXPECT_EQ(loaded.model->config.mixer_settings.get<RwkvSettings>().rwkv_erase, 0);
  Checkpoint old = load_checkpoint(progutil::source_root() + "/tests/fixtures/ckpt_5b9387c.safetensors");
  EXPECT_EQ(old.model->config.mixer_settings.get<RwkvSettings>().rwkv_lora, 32);
  for (const char* key : {"rwkv_lora", "rwkv_erase"})
    EXPECT_EQ(std::find(old.defaulted_settings.begin(), old.defaulted_settings.end(), key),
              old.defaulted_settings.end()) << key;
}
