// Tests for the Gated DeltaNet op layer (src/ops/deltanet.*), each against an independent reference:
//   the textbook's recurrence (matrices I − βkkᵀ formed, triple loops) against its attention form M[t, s] (no
//   state); the fast float forward against the textbook in double at odd sizes — heads of N = 1, 2, 3, 5, the
//   convolution's K = 1, 2, 3, 4, T inside, at and across the chunk of 16 (19, 20, 37) — with β in (0, 1) and in
//   (0, 2); every gradient (each of the 13 tensors and the input) against central finite differences of the textbook
//   forward; the recurrence's reverse pass alone against finite differences of the textbook's recurrence; β
//   saturated near 0 and near 2; one and two threads; decoding one token at a time, the state it keeps and its size;
//   M against the textbook's; the settings' range checks; and, at the end, what is the kind's own in the model (its
//   optimizer groups and initialisation, its settings in the metadata).
//
// Tolerances. Float against double, measured against each tensor's largest magnitude (close_to_reference).
// Forward: kTol = 1e-5 of the scale. Gradients: float results against double finite differences (h = 1e-6):
// kGradTol = 5e-5, while a real mistake (a sign, a missing term, an index off by one) is O(1) relative.
#include <gtest/gtest.h>

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
#include "op_layer.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/deltanet.h"

using namespace testutil;

namespace {

constexpr double kTol = 1e-5;
constexpr double kGradTol = 5e-5;

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

// N = 3, 1, 3, 5, 2, 1; K = 4, 4, 1, 3, 4, 2; T = 7 (inside a chunk), 37 (two chunks and a partial one), 16 (exactly
// one), 20 and 19 (across), 5; β ∈ (0, 2) in two of them.
const Case kCases[] = {
    {6, 2, 4, 2, 7}, {3, 3, 4, 1, 37}, {6, 2, 1, 2, 16}, {5, 1, 3, 1, 20, true}, {4, 2, 4, 2, 19, true}, {1, 1, 2, 2, 5},
};

// A layer with random parameters far from the initialisation, so that every term matters: decays α across (0, 1),
// β across its range, gains away from 1. With β saturated, W_β's row 0 is ∓30 and the inputs' channel 0 is 1 (see
// Forwarded), the rest of W_β small: u·W_β = ∓30 ± 0.5 at every row.
struct Layer : OpLayer<DeltaNetTensors, Layer> {
  DeltaNetDims d;  // tensors in deltanet_tensor_slots order

  Layer(const DeltaNetDims& dims, uint32_t seed, Beta beta = Beta::Free) : d(dims) {
    std::mt19937 rng(seed);
    for (const auto& slot : deltanet_tensor_slots<const float*>(d)) {
      const TensorDecl& s = slot.decl;
      size_t n = 1;
      for (int64_t k : s.shape) n *= (size_t)k;
      double lo = -0.6;
      double hi = 0.6;
      if (s.name == "deltanet.A_log") lo = -1.5, hi = 1.0;
      if (s.name == "deltanet.dt_bias") lo = -2.0, hi = 0.5;
      if (s.name == "deltanet.norm.weight") lo = 0.5, hi = 1.5;
      std::vector<double> v = uniform(n, rng, lo, hi);
      if (beta != Beta::Free && s.name == "deltanet.beta.weight") {
        for (double& x : v) x *= 0.1;
        for (int h = 0; h < d.H; h++) v[h] = beta == Beta::Zero ? -30.0 : 30.0;  // row 0, every head
      }
      tensors.emplace_back(s.name, v);
    }
  }
  template <typename Ptr>
  Ptr DeltaNetTensors<Ptr>::*slot(size_t i) const {
    return deltanet_tensor_slots<Ptr>(d)[i].member;
  }
};

// A case's layer, input u, upstream gradient R (the loss is Σ out ⊙ R), and the fast forward on u.
struct Forwarded : OpInputs {
  Case c;
  DeltaNetDims d;
  Layer L;
  std::vector<float> acts, scratch, out;
  DeltaNetActivations a;
  Forwarded(const Case& cs, uint32_t seed)
      : OpInputs((size_t)cs.B * cs.T * cs.C, seed), c(cs), d(cs.dims()), L(d, seed, cs.beta),
        acts(deltanet_activation_floats(d, cs.B, cs.T), NAN), scratch(deltanet_scratch_floats(d, cs.B, cs.T), NAN),
        out((size_t)cs.B * cs.T * cs.C, NAN), a(deltanet_activations(acts.data(), d, cs.B, cs.T)) {
    if (cs.beta != Beta::Free) {  // channel 0 is 1 at every row, so that W_β's row 0 saturates σ
      for (size_t r = 0; r < (size_t)cs.B * cs.T; r++) u[r * cs.C] = 1.0;
      u_f = to_float(u);
    }
    deltanet_forward(out.data(), a, u_f.data(), L.weights(), d, c.B, c.T);
  }
  void backward(float* du) {
    deltanet_backward(du, L.grads(), R_f.data(), u_f.data(), a, L.weights(), d, c.B, c.T, scratch.data());
  }
  std::vector<double> ref_out() {
    std::vector<double> o(u.size());
    ref_deltanet_forward(o.data(), u.data(), L.ref(), d, c.B, c.T);
    return o;
  }
};

void expect_gradients(const std::vector<GradCheck>& checks) { testutil::expect_gradients(checks, kGradTol); }

// Every gradient of the layer (du and the 13 tensors) against central finite differences of the textbook forward;
// then a second backward checks the convention (parameters +=, du =).
void expect_backward_matches_textbook(Forwarded& f) {
  std::vector<float> du(f.u.size(), NAN);
  f.backward(du.data());
  auto loss = [&] { return dot(f.ref_out(), f.R); };
  std::vector<GradCheck> checks = {{"du", du, finite_differences(loss, f.u.data(), f.u.size())}};
  for (OpTensor& t : f.L.tensors) checks.push_back({"d" + t.name, t.grad, finite_differences(loss, t.v.data(), t.v.size())});
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

}  // namespace

// The textbook against itself: the recurrence (S_t = α_t S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ, y_t = S_t q_t)
// and the attention form (M[t, s] = β_s ∏α k_sᵀ E_{s+1}⋯E_t q_t, y_t = Σ_s M[t, s] v_s) give the same y, in double.
TEST(DeltaNetTextbook, RecurrenceEqualsAttentionForm) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    const DeltaNetDims d = c.dims();
    Layer L(d, 3 + c.T);
    std::mt19937 rng(5);
    const std::vector<double> u = uniform((size_t)c.B * c.T * c.C, rng);
    const RefDeltaNetInputs<double> in = ref_deltanet_inputs(u.data(), L.ref(), d, c.B, c.T);
    const std::vector<double> y1 = ref_deltanet_recurrence(in, d, c.B, c.T);
    const std::vector<double> y2 = ref_deltanet_attention_form(in, d, c.B, c.T);
    EXPECT_TRUE(all_close(y1, y2, 1e-12, 1e-12 * (1 + max_abs(y1.data(), y1.size())), "recurrence vs M"));
  }
}

// The textbook's backward is central differences of its forward, one coordinate at a time (h = 1e-6). Held here to
// a second numerical route: the directional derivative along a random direction in the input and every tensor at
// once, by a five-point stencil with h = 1e-4.
TEST(DeltaNetTextbook, BackwardMatchesAFivePointDirectionalDerivative) {
  const Case c{6, 2, 3, 2, 9, true};
  const DeltaNetDims d = c.dims();
  Layer L(d, 77);
  std::mt19937 rng(78);
  std::vector<double> u = uniform((size_t)c.B * c.T * c.C, rng);
  const std::vector<double> R = uniform(u.size(), rng);
  std::vector<double> du(u.size());
  std::vector<std::vector<double>> grads;
  for (OpTensor& t : L.tensors) grads.emplace_back(t.v.size(), 0.0);
  DeltaNetTensors<double*> g;
  const auto gslots = deltanet_tensor_slots<double*>(d);
  for (size_t i = 0; i < gslots.size(); i++) g.*gslots[i].member = grads[i].data();
  ref_deltanet_backward(du.data(), g, R.data(), u.data(), L.ref(), d, c.B, c.T);
  // The direction: e_u for u, e_i for each tensor.
  const std::vector<double> eu = uniform(u.size(), rng);
  std::vector<std::vector<double>> e;
  for (OpTensor& t : L.tensors) e.push_back(uniform(t.v.size(), rng));
  double predicted = dot(du, eu);
  for (size_t i = 0; i < e.size(); i++) predicted += dot(grads[i], e[i]);
  auto loss_at = [&](double eps) {
    std::vector<double> x = u;
    for (size_t i = 0; i < x.size(); i++) x[i] += eps * eu[i];
    Layer moved = L;
    for (size_t i = 0; i < moved.tensors.size(); i++)
      for (size_t k = 0; k < moved.tensors[i].v.size(); k++) moved.tensors[i].v[k] += eps * e[i][k];
    std::vector<double> out(u.size());
    ref_deltanet_forward(out.data(), x.data(), moved.ref(), d, c.B, c.T);
    return dot(out, R);
  };
  const double h = 1e-4;
  const double numeric = (-loss_at(2 * h) + 8 * loss_at(h) - 8 * loss_at(-h) + loss_at(-2 * h)) / (12 * h);
  EXPECT_NEAR(predicted, numeric, 1e-6 * (1 + std::fabs(numeric)));
}

TEST(DeltaNetOp, ForwardMatchesTextbook) {
  set_threads(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 11 + c.T);
    EXPECT_TRUE(close_to_reference(f.out, f.ref_out(), kTol, "deltanet out"));
  }
}

TEST(DeltaNetOp, BackwardMatchesFiniteDifferencesOfTextbook) {
  set_threads(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 21 + c.T);
    expect_backward_matches_textbook(f);
  }
}

// β saturated: near 0 (the state only decays: nothing written, nothing erased) and near 2 with the negative
// eigenvalues on (the transition along k is α(1 − β) ≈ −α: the recall flips sign), and near 1 without them (the
// old association along k fully replaced). Forward and every gradient against the textbook.
TEST(DeltaNetOp, BetaNearZeroAndNearTwo) {
  set_threads(1);
  for (const Case& c : {Case{6, 2, 4, 2, 19, false, Beta::Zero}, Case{6, 2, 4, 2, 19, true, Beta::Full},
                        Case{4, 1, 2, 1, 18, false, Beta::Full}, Case{4, 2, 3, 1, 17, true, Beta::Zero}}) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 51 + c.T);
    const float top = c.negative ? 2.0f : 1.0f;
    for (size_t i = 0; i < (size_t)c.B * c.T * c.H; i++) {
      if (c.beta == Beta::Zero) {
        ASSERT_LT(f.a.beta[i], 1e-10f) << "β saturates at 0";
      } else {
        ASSERT_GT(f.a.beta[i], top * (1 - 1e-6f)) << "β saturates at its top";
      }
    }
    EXPECT_TRUE(close_to_reference(f.out, f.ref_out(), kTol, "deltanet out"));
    expect_backward_matches_textbook(f);
  }
}

// The recurrence alone: its five input gradients against finite differences of the textbook's recurrence, with
// inputs drawn directly (k not normalised, β anywhere in (0, 2)), T = 37 across three chunks.
TEST(DeltaNetOp, RecurrenceBackwardMatchesFiniteDifferences) {
  set_threads(1);
  for (int N : {1, 4}) {
    SCOPED_TRACE("N=" + std::to_string(N));
    const int H = 2, C = H * N, B = 2, T = 37;
    const DeltaNetDims d = DeltaNetDims::make(C, H, 4, 1);
    const size_t n = (size_t)B * T * C;
    const size_t nh = (size_t)B * T * H;
    std::mt19937 rng(N);
    RefDeltaNetInputs<double> in;
    in.q = float_exact(uniform(n, rng));
    in.k = float_exact(uniform(n, rng, -0.7, 0.7));
    in.v = float_exact(uniform(n, rng));
    in.beta = float_exact(uniform(nh, rng, 0.0, 2.0));
    in.alpha = float_exact(uniform(nh, rng, 0.5, 1.0));
    const std::vector<double> R = float_exact(uniform(n, rng));
    std::vector<float> y(n);
    std::vector<float> state((size_t)B * H * (d.chunks(T) + 1) * N * N, NAN);
    const std::vector<float> q = to_float(in.q);
    const std::vector<float> k = to_float(in.k);
    const std::vector<float> v = to_float(in.v);
    const std::vector<float> beta = to_float(in.beta);
    const std::vector<float> alpha = to_float(in.alpha);
    deltanet_recurrence_forward(y.data(), state.data(), q.data(), k.data(), v.data(), beta.data(), alpha.data(), d, B,
                                T);
    EXPECT_TRUE(close_to_reference(y, ref_deltanet_recurrence(in, d, B, T), kTol, "y"));
    std::vector<float> dq(n, NAN), dk(n, NAN), dv(n, NAN), dbeta(nh, NAN), dalpha(nh, NAN);
    std::vector<float> scratch((size_t)B * H * (kDeltaNetChunk + 2) * N * N, NAN);
    deltanet_recurrence_backward(dq.data(), dk.data(), dv.data(), dbeta.data(), dalpha.data(), to_float(R).data(),
                                 state.data(), q.data(), k.data(), v.data(), beta.data(), alpha.data(), d, B, T,
                                 scratch.data());
    auto loss = [&] { return dot(ref_deltanet_recurrence(in, d, B, T), R); };
    expect_gradients({{"dq", dq, finite_differences(loss, in.q.data(), n)},
                      {"dk", dk, finite_differences(loss, in.k.data(), n)},
                      {"dv", dv, finite_differences(loss, in.v.data(), n)},
                      {"dβ", dbeta, finite_differences(loss, in.beta.data(), nh)},
                      {"dα", dalpha, finite_differences(loss, in.alpha.data(), nh)}});
  }
}

// With two threads, at sizes where worth_threads splits the recurrence's (batch, head) pairs and the row loops:
// two heads, and one head, where the two threads run the same head of different sequences at once (each pair's
// scratch must be its own). The two-thread results against the one-thread ones (the same arithmetic per (batch,
// head) pair, so within float rounding of the products' split: measured up to 1.2e-6 of the scale in the
// sanitized -O1 build, hence 1e-5), and against the textbook: the forward, and finite
// differences at 12 spread-out entries of each gradient.
TEST(DeltaNetOp, TwoThreadsMatchOneThreadAndTextbook) {
  const int saved = default_threads();
  // B·T·C·N = 53760 and 34560 ≥ worth_threads' 32768
  for (const Case& c : {Case{32, 2, 4, 3, 35, true}, Case{24, 1, 3, 3, 20}}) {
    SCOPED_TRACE(c.describe());
    set_threads(1);
    Forwarded one(c, 9);
    std::vector<float> du1(one.u.size(), NAN);
    one.backward(du1.data());
    set_threads(2);
    Forwarded f(c, 9);
    std::vector<float> du(f.u.size(), NAN);
    f.backward(du.data());
    set_threads(saved);
    EXPECT_TRUE(close_to_reference(f.out, to_double(one.out.data(), one.out.size()), 1e-5, "2 threads' out vs 1's"));
    EXPECT_TRUE(close_to_reference(du, to_double(du1.data(), du1.size()), 1e-5, "2 threads' du vs 1's"));
    for (size_t i = 0; i < f.L.tensors.size(); i++)
      EXPECT_TRUE(close_to_reference(f.L.tensors[i].grad, to_double(one.L.tensors[i].grad.data(), one.L.tensors[i].grad.size()),
                                     1e-5, "2 threads' d" + f.L.tensors[i].name + " vs 1's"));
    EXPECT_TRUE(close_to_reference(f.out, f.ref_out(), kTol, "out"));
    auto loss = [&] { return dot(f.ref_out(), f.R); };
    expect_gradients(sampled_checks(du, f.u, f.L.tensors, loss, 12));
  }
}

// Token by token from a zeroed state equals the textbook's rows; the state then holds the convolutions' last K − 1
// inputs and S_{T−1} as the textbook's recurrence leaves it, and the batched forward's final state is the same.
TEST(DeltaNetOp, StepChainEqualsTheFullForward) {
  set_threads(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 31 + c.T);
    const DeltaNetDims& d = f.d;
    const std::vector<double> ref = f.ref_out();
    std::vector<double> S_ref;
    const RefDeltaNetInputs<double> in = ref_deltanet_inputs(f.u.data(), f.L.ref(), d, c.B, c.T);
    ref_deltanet_recurrence(in, d, c.B, c.T, &S_ref);
    // S is a sum of terms of the size of β·v, which may cancel (N = 1: a scalar): measured against that size.
    const double S_scale = 2 * max_abs(in.v.data(), in.v.size());
    std::vector<float> state(deltanet_state_floats(d));
    std::vector<float> scratch(deltanet_step_scratch_floats(d), NAN);
    std::vector<float> out(f.out.size());
    const size_t NN = (size_t)d.N * d.N;
    const size_t conv_floats = 3 * (size_t)(d.K - 1) * d.C;
    for (int b = 0; b < c.B; b++) {
      std::fill(state.begin(), state.end(), 0.0f);
      for (int t = 0; t < c.T; t++) {
        const size_t o = ((size_t)b * c.T + t) * c.C;
        deltanet_step(out.data() + o, state.data(), f.u_f.data() + o, f.L.weights(), d, scratch.data());
      }
      for (int h = 0; h < d.H; h++) {
        const auto first = S_ref.begin() + ((size_t)b * d.H + h) * NN;
        const std::vector<double> S(first, first + NN);
        EXPECT_TRUE(close_to_reference(state.data() + conv_floats + h * NN, S.data(), NN, kTol, "step's S", S_scale));
        EXPECT_TRUE(close_to_reference(deltanet_final_state(f.a, d, b, h), S.data(), NN, kTol, "forward's S_{T-1}",
                                       S_scale));
      }
      std::vector<float> refilled(state.size(), NAN);  // the same state from the batched forward
      deltanet_state_from_forward(refilled.data(), f.a, d, b);
      EXPECT_TRUE(close_to_reference(refilled, to_double(state.data(), state.size()), kTol, "state_from_forward"));
    }
    EXPECT_TRUE(close_to_reference(out, ref, kTol, "step out"));
  }
}

// The decoding state is 3·(K − 1)·C + H·N² floats whatever the context: 300 steps write nothing past it (guard
// floats after it stay as set) and the step's output stays finite.
TEST(DeltaNetOp, StateSizeIsIndependentOfT) {
  set_threads(1);
  const Case c{6, 2, 4, 1, 300};
  const DeltaNetDims d = c.dims();
  EXPECT_EQ(deltanet_state_floats(d), (size_t)(3 * 3 * 6 + 2 * 3 * 3));
  Layer L(d, 5);
  std::mt19937 rng(6);
  const std::vector<float> u = to_float(uniform((size_t)c.T * c.C, rng));
  const size_t n = deltanet_state_floats(d);
  std::vector<float> state(n + 64, 12345.0f);
  std::fill(state.begin(), state.begin() + n, 0.0f);
  std::vector<float> scratch(deltanet_step_scratch_floats(d) + 64, 12345.0f);
  std::vector<float> out(c.C);
  for (int t = 0; t < c.T; t++) {
    deltanet_step(out.data(), state.data(), u.data() + (size_t)t * c.C, L.weights(), d, scratch.data());
    for (float x : out) ASSERT_TRUE(std::isfinite(x));
  }
  for (size_t i = n; i < state.size(); i++) ASSERT_EQ(state[i], 12345.0f) << "written past the state";
  for (size_t i = deltanet_step_scratch_floats(d); i < scratch.size(); i++)
    ASSERT_EQ(scratch[i], 12345.0f) << "written past the step's scratch";
}

TEST(DeltaNetOp, ImpliedAttentionMatchesTextbook) {
  set_threads(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.describe());
    Forwarded f(c, 41 + c.T);
    std::vector<float> M((size_t)c.B * c.H * c.T * c.T, NAN);
    deltanet_implied_attention(M.data(), f.a, f.d, c.B, c.T);
    EXPECT_TRUE(close_to_reference(M, ref_deltanet_implied_attention(f.u.data(), f.L.ref(), f.d, c.B, c.T), kTol, "M"));
    for (int i = 0; i < c.B * c.H; i++)
      for (int t = 0; t < c.T; t++)
        for (int s = t + 1; s < c.T; s++) ASSERT_EQ(M[((size_t)i * c.T + t) * c.T + s], 0.0f) << "above the diagonal";
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
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  c.vocab_size = 11;
  c.mixer = "deltanet";
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
