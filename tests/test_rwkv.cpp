// Tests for the RWKV-7 op layer (src/ops/rwkv.*), each against an independent reference:
//   the textbook's recurrence (matrices A_t formed, triple loops) against its attention form M[t, s] (no state);
//   the fast float forward against the textbook in double at odd sizes — T below, at and across the chunk of 16
//   (T = 37: two whole chunks and a partial one), heads of N = 1 and N > 1, the erase rate a forced to 0 and to 1 —
//   and with two threads; every gradient (each of the 18 tensors and the input) against central finite differences
//   of the textbook forward; the recurrence's reverse pass alone against finite differences of the textbook's
//   recurrence; decoding one token at a time and the state it keeps against the textbook; M against the textbook's.
// At the end, what is the kind's own in the model: its tensors, their initialisation and optimizer groups, its
// settings and its state's size.
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
#include "op_layer.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/rwkv.h"

using namespace testutil;

namespace {

constexpr double kTol = 1e-5;
constexpr double kGradTol = 5e-5;

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

// N = 3, 1, 5 and 2; T = 7 (inside a chunk), 16 (exactly one), 37 and 20 (across chunks, the last partial); the
// erase off (A_t = diag(d_t)) with a free and with a = 1.
const Case kCases[] = {
    {6, 2, 3, 2, 7},  {3, 3, 2, 1, 37}, {6, 2, 2, 2, 16},           {5, 1, 2, 1, 20},
    {4, 2, 2, 2, 19, Rate::Zero},       {4, 2, 2, 1, 21, Rate::One}, {1, 1, 1, 2, 5},
    {6, 2, 2, 2, 18, Rate::Free, false}, {4, 2, 1, 1, 9, Rate::One, false},
};

// A layer with random parameters far from the initialisation, so that every term matters: decays d from ~0.55 to
// ~0.95, rates a across (0, 1) (or forced: a0 = ∓30 with the rate LoRA zero), gains away from 1.
struct Layer : OpLayer<RwkvTensors, Layer> {
  RwkvDims d;  // tensors in rwkv_tensor_slots order

  Layer(const RwkvDims& dims, uint32_t seed, Rate rate = Rate::Free) : d(dims) {
    std::mt19937 rng(seed);
    for (const auto& slot : rwkv_tensor_slots<const float*>(d)) {
      const TensorDecl& s = slot.decl;
      size_t n = 1;
      for (int64_t k : s.shape) n *= (size_t)k;
      double lo = -0.6, hi = 0.6;
      if (s.name == "rwkv.mix") lo = 0.0, hi = 1.0;
      if (s.name == "rwkv.w0") lo = -2.0, hi = 1.0;
      if (s.name == "rwkv.a0") lo = -1.0, hi = 1.0;
      if (s.name == "rwkv.k_k" || s.name == "rwkv.k_a" || s.name == "rwkv.ln_x.weight") lo = 0.5, hi = 1.5;
      if (s.name == "rwkv.ln_x.bias") lo = -0.3, hi = 0.3;
      std::vector<double> v = uniform(n, rng, lo, hi);
      if (rate != Rate::Free && (s.name == "rwkv.a1" || s.name == "rwkv.a2")) v.assign(n, 0.0);
      if (rate != Rate::Free && s.name == "rwkv.a0") v.assign(n, rate == Rate::Zero ? -30.0 : 30.0);
      tensors.emplace_back(s.name, v);
    }
  }
  template <typename Ptr>
  Ptr RwkvTensors<Ptr>::*slot(size_t i) const {
    return rwkv_tensor_slots<Ptr>(d)[i].member;
  }
};

// A case's layer, input u, upstream gradient R (the loss is Σ out ⊙ R), and the fast forward on u.
struct Forwarded : OpInputs {
  Case c;
  RwkvDims d;
  Layer L;
  std::vector<float> acts, scratch, out;
  RwkvActivations a;
  Forwarded(const Case& cs, uint32_t seed)
      : OpInputs((size_t)cs.B * cs.T * cs.C, seed), c(cs), d(cs.dims()), L(d, seed, cs.rate),
        acts(rwkv_activation_floats(d, cs.B, cs.T), NAN), scratch(rwkv_scratch_floats(d, cs.B, cs.T), NAN),
        out((size_t)cs.B * cs.T * cs.C, NAN), a(rwkv_activations(acts.data(), d, cs.B, cs.T)) {
    rwkv_forward(out.data(), a, u_f.data(), L.weights(), d, c.B, c.T);
  }
  void backward(float* du) {
    rwkv_backward(du, L.grads(), R_f.data(), u_f.data(), a, L.weights(), d, c.B, c.T, scratch.data());
  }
  std::vector<double> ref_out() {
    std::vector<double> o(u.size());
    ref_rwkv_forward(o.data(), u.data(), L.ref(), d, c.B, c.T);
    return o;
  }
};

void expect_gradients(const std::vector<GradCheck>& checks) { testutil::expect_gradients(checks, kGradTol); }

}  // namespace

// The textbook against itself: the recurrence (S_t = S_{t−1}A_t + v_t k̃_tᵀ, y_t = S_t r_t) and the attention form
// (M[t, s] = k̃_sᵀ A_{s+1}⋯A_t r_t, y_t = Σ_s M[t, s] v_s) give the same y, in double.
TEST(TextbookRwkv, RecurrenceEqualsAttentionForm) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    const RwkvDims d = c.dims();
    Layer L(d, 3 + c.T, c.rate);
    std::mt19937 rng(5);
    const std::vector<double> u = uniform((size_t)c.B * c.T * c.C, rng);
    const RefRwkvInputs<double> in = ref_rwkv_inputs(u.data(), L.ref(), d, c.B, c.T);
    const std::vector<double> y1 = ref_rwkv_recurrence(in, d, c.B, c.T), y2 = ref_rwkv_attention_form(in, d, c.B, c.T);
    EXPECT_TRUE(all_close(y1, y2, 1e-12, 1e-12 * (1 + max_abs(y1.data(), y1.size())), "recurrence vs M"));
  }
}

TEST(OpsRwkv, ForwardMatchesTextbook) {
  set_threads(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 11 + c.T);
    EXPECT_TRUE(close_to_reference(f.out, f.ref_out(), kTol, "rwkv out"));
  }
}

// Every gradient against central finite differences of the textbook forward; then a second backward checks the
// convention (parameters +=, du =).
TEST(OpsRwkv, BackwardMatchesFiniteDifferencesOfTextbook) {
  set_threads(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 21 + c.T);
    std::vector<float> du(f.u.size(), NAN);
    f.backward(du.data());
    auto loss = [&] { return dot(f.ref_out(), f.R); };
    std::vector<GradCheck> checks = {{"du", du, finite_differences(loss, f.u.data(), f.u.size())}};
    for (OpTensor& t : f.L.tensors)
      checks.push_back({"d" + t.name, t.grad, finite_differences(loss, t.v.data(), t.v.size())});
    expect_gradients(checks);

    std::vector<std::vector<float>> first;
    for (OpTensor& t : f.L.tensors) first.push_back(t.grad);
    const std::vector<float> first_du = du;
    f.backward(du.data());
    for (size_t i = 0; i < first.size(); i++)
      for (size_t k = 0; k < first[i].size(); k++)
        ASSERT_NEAR(f.L.tensors[i].grad[k], 2 * first[i][k], 1e-6 * (1 + std::fabs(first[i][k])))
            << f.L.tensors[i].name << " gradient is added to";
    for (size_t k = 0; k < du.size(); k++) ASSERT_EQ(du[k], first_du[k]) << "du is written";
  }
}

// The recurrence alone: its six input gradients against finite differences of the textbook's recurrence, with
// inputs drawn directly (κ not normalised, a anywhere in (0, 1)), T = 37 across three chunks.
TEST(OpsRwkv, RecurrenceBackwardMatchesFiniteDifferences) {
  set_threads(1);
  for (int N : {1, 4}) {
    SCOPED_TRACE("N=" + std::to_string(N));
    const int H = 2, C = H * N, B = 2, T = 37;
    const RwkvDims d = RwkvDims::make(C, H, 1);
    const size_t n = (size_t)B * T * C;
    std::mt19937 rng(N);
    RefRwkvInputs<double> in;
    in.r = float_exact(uniform(n, rng)), in.kt = float_exact(uniform(n, rng)), in.v = float_exact(uniform(n, rng));
    in.dec = float_exact(uniform(n, rng, 0.5, 1.0)), in.kap = float_exact(uniform(n, rng, -0.7, 0.7));
    in.a = float_exact(uniform(n, rng, 0.0, 1.0));
    const std::vector<double> R = float_exact(uniform(n, rng));
    std::vector<float> y(n), state((size_t)B * H * (d.chunks(T) + 1) * N * N, NAN);
    std::vector<float> r = to_float(in.r), kt = to_float(in.kt), v = to_float(in.v), dec = to_float(in.dec),
                       kap = to_float(in.kap), a = to_float(in.a);
    rwkv_recurrence_forward(y.data(), state.data(), r.data(), kt.data(), v.data(), dec.data(), kap.data(), a.data(), d,
                            B, T);
    EXPECT_TRUE(close_to_reference(y, ref_rwkv_recurrence(in, d, B, T), kTol, "y"));
    std::vector<float> dr(n, NAN), dkt(n, NAN), dv(n, NAN), ddec(n, NAN), dkap(n, NAN), da(n, NAN),
        scratch((size_t)B * H * (kRwkvChunk + 2) * N * N, NAN);
    rwkv_recurrence_backward(dr.data(), dkt.data(), dv.data(), ddec.data(), dkap.data(), da.data(), to_float(R).data(),
                             state.data(), r.data(), kt.data(), v.data(), dec.data(), kap.data(), a.data(), d, B, T,
                             scratch.data());
    auto loss = [&] { return dot(ref_rwkv_recurrence(in, d, B, T), R); };
    expect_gradients({{"dr", dr, finite_differences(loss, in.r.data(), n)},
                      {"dk̃", dkt, finite_differences(loss, in.kt.data(), n)},
                      {"dv", dv, finite_differences(loss, in.v.data(), n)},
                      {"dd", ddec, finite_differences(loss, in.dec.data(), n)},
                      {"dκ", dkap, finite_differences(loss, in.kap.data(), n)},
                      {"da", da, finite_differences(loss, in.a.data(), n)}});
  }
}

// With two threads, at sizes where worth_threads splits the recurrence's (batch, head) pairs and the projections:
// two heads, and one head, where the two threads run the same head of different sequences at once (each pair's
// scratch must be its own). Finite differences at 12 spread-out entries of each gradient.
TEST(OpsRwkv, TwoThreadsMatchTextbook) {
  const int saved = default_threads();
  // B·T·C·N = 53760 and 34560 ≥ worth_threads' 32768
  for (const Case& c : {Case{32, 2, 4, 3, 35}, Case{24, 1, 4, 3, 20}}) {
    SCOPED_TRACE(c.describe());
    set_threads(2);
    Forwarded f(c, 9);
    std::vector<float> du(f.u.size(), NAN);
    f.backward(du.data());
    set_threads(saved);
    EXPECT_TRUE(close_to_reference(f.out, f.ref_out(), kTol, "out"));
    auto loss = [&] { return dot(f.ref_out(), f.R); };
    expect_gradients(sampled_checks(du, f.u, f.L.tensors, loss, 12));
  }
}

// Activations and scratch carved for a larger (B, T) serve a smaller run.
TEST(OpsRwkv, ArenaCarvedForALargerRunServesASmallerOne) {
  set_threads(1);
  const Case c{6, 2, 3, 2, 18};
  const RwkvDims d = c.dims();
  Forwarded big(Case{6, 2, 3, 3, 40}, 61);  // only for its arena sizes
  Layer L(d, 61);
  std::mt19937 rng(61);
  std::vector<double> u = float_exact(uniform((size_t)c.B * c.T * c.C, rng));
  const std::vector<double> R = float_exact(uniform(u.size(), rng));
  const RwkvActivations a = rwkv_activations(big.acts.data(), d, c.B, c.T);
  std::vector<float> out(u.size(), NAN), du(u.size(), NAN);
  const std::vector<float> u_f = to_float(u);
  rwkv_forward(out.data(), a, u_f.data(), L.weights(), d, c.B, c.T);
  rwkv_backward(du.data(), L.grads(), to_float(R).data(), u_f.data(), a, L.weights(), d, c.B, c.T, big.scratch.data());
  std::vector<double> ref(u.size());
  auto forward = [&] {
    ref_rwkv_forward(ref.data(), u.data(), L.ref(), d, c.B, c.T);
    return ref;
  };
  EXPECT_TRUE(close_to_reference(out, forward(), kTol, "out"));
  auto loss = [&] { return dot(forward(), R); };
  EXPECT_TRUE(close_to_reference(du, finite_differences(loss, u.data(), u.size()), kGradTol, "du"));
}

// Token by token from a zeroed state equals the textbook's rows; the state then holds u_{T−1} and S_{T−1} as the
// textbook's recurrence leaves them, and the batched forward's final state is the same S.
TEST(OpsRwkv, StepEqualsTheFullForwardRowByRow) {
  set_threads(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 31 + c.T);
    const RwkvDims& d = f.d;
    const std::vector<double> ref = f.ref_out();
    std::vector<double> S_ref;
    ref_rwkv_recurrence(ref_rwkv_inputs(f.u.data(), f.L.ref(), d, c.B, c.T), d, c.B, c.T, &S_ref);
    std::vector<float> state(rwkv_state_floats(d)), scratch(rwkv_step_scratch_floats(d), NAN), out(f.out.size());
    for (int b = 0; b < c.B; b++) {
      std::fill(state.begin(), state.end(), 0.0f);
      for (int t = 0; t < c.T; t++) {
        const size_t o = ((size_t)b * c.T + t) * c.C;
        rwkv_step(out.data() + o, state.data(), f.u_f.data() + o, f.L.weights(), d, scratch.data());
      }
      const size_t NN = (size_t)d.N * d.N;
      for (int h = 0; h < d.H; h++) {
        const auto first = S_ref.begin() + ((size_t)b * d.H + h) * NN;
        const std::vector<double> S(first, first + NN);
        EXPECT_TRUE(close_to_reference(state.data() + d.C + h * NN, S.data(), NN, kTol, "step's S"));
        EXPECT_TRUE(close_to_reference(rwkv_final_state(f.a, d, b, h), S.data(), NN, kTol, "forward's S_{T-1}"));
      }
      const size_t last = ((size_t)b * c.T + c.T - 1) * c.C;
      for (int ch = 0; ch < c.C; ch++) EXPECT_EQ(state[ch], f.u_f[last + ch]) << "u_{T−1}";
      std::vector<float> refilled(state.size(), NAN);  // the same state from the batched forward
      rwkv_state_from_forward(refilled.data(), f.a, d, b);
      EXPECT_TRUE(close_to_reference(refilled, to_double(state.data(), state.size()), kTol, "state_from_forward"));
    }
    EXPECT_TRUE(close_to_reference(out, ref, kTol, "step out"));
  }
}

TEST(OpsRwkv, ImpliedAttentionMatchesTextbook) {
  set_threads(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 41 + c.T);
    std::vector<float> M((size_t)c.B * c.H * c.T * c.T, NAN);
    rwkv_implied_attention(M.data(), f.a, f.d, c.B, c.T);
    EXPECT_TRUE(close_to_reference(M, ref_rwkv_implied_attention(f.u.data(), f.L.ref(), f.d, c.B, c.T), kTol, "M"));
    for (int i = 0; i < c.B * c.H; i++)
      for (int t = 0; t < c.T; t++)
        for (int s = t + 1; s < c.T; s++) ASSERT_EQ(M[((size_t)i * c.T + t) * c.T + s], 0.0f) << "above the diagonal";
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
