// What every recurrent mixer op must satisfy, written once: typed GoogleTest suites over a kind's traits struct
// (below), each check against an independent reference — the kind's double-precision textbook
// (src/textbook/<kind>.h) or central finite differences of it. A kind's test file defines its traits and
// instantiates the suites (INSTANTIATE_TYPED_TEST_SUITE_P); no kind is named here.
//
// RecurrentOp, every recurrent op:
//   ForwardMatchesTextbook              the fast float forward against the textbook's, at each case
//   BackwardMatchesFiniteDifferencesOfTextbook
//                                       du and every tensor's gradient against central differences of the textbook
//                                       forward; a second backward adds to the parameter gradients and rewrites du
//   TwoThreadsMatchOneThreadAndTextbook two threads against one and against the textbook (sampled differences)
//   ArenaCarvedForALargerRunServesASmallerOne
//   StepChainEqualsTheFullForward       decoding token by token from a reset state against the textbook's rows,
//                                       each sequence after a reset of the state the one before left
//   StateSizeIsIndependentOfTheContext  300 steps write nothing past the state, counted by hand
//   ImpliedAttentionMatchesTextbook     the lab's M against the textbook's, exactly 0 above the diagonal
//   TextbookBackwardMatchesAFivePointDirectionalDerivative
//                                       the textbook's backward against a second numerical route
// ChunkedRecurrenceOp, the ops whose state is an N × N matrix per head that the forward keeps at the start of every
// chunk of positions for the backward:
//   TextbookRecurrenceEqualsAttentionForm  the textbook's two forms against each other
//   RecurrenceBackwardMatchesFiniteDifferences  the recurrence's reverse pass alone
//   StepStateIsTheTextbooksState        the decoder's S, the forward's S_{T−1} and state_from_forward
//
// The traits struct of a kind (Op), all static:
//   Case            a test shape: int fields C, H, B, T; dims(); describe()
//   Dims, Tensors<Ptr>, Activations     the op's own types
//   kTol, kGradTol  the forward's and the gradients' tolerances (close_to_reference, expect_gradients)
//   kTwoThreadSamples  entries of each gradient the two-thread test differentiates
//   cases(), two_thread_cases(), arena_case(), long_decode_case(), five_point_case()   the shapes
//   step_case(c)    the shape the decoding test runs for case c
//   case_seed(c)    what varies the random draws from one case to the next
//   draw_tensor(decl, c, rng)  a tensor of the test layer, far from the initialisation so that every term matters
//   tensor_slots<Ptr>(d), activation_floats, activations, scratch_floats, forward, backward, ref_forward,
//   ref_backward, state_floats, state_floats_by_hand, state_reset, step_scratch_floats, step, implied_attention,
//   ref_implied_attention                the op's functions, and the textbook's
// and for ChunkedRecurrenceOp also: kChunk, ref_recurrence, ref_attention_form, state_scale, matrix_state_offset,
// final_state, state_from_forward, recurrence_dims, recurrence_inputs, recurrence_forward, recurrence_backward,
// ref_recurrence_of.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/threads.h"
#include "op_layer.h"
#include "test_util.h"

namespace testutil {

// A run on activations and scratch carved for a larger batch and context.
template <typename Case>
struct ArenaCase {
  Case run;
  int carved_B = 0;
  int carved_T = 0;
};

// A case's layer, input u, upstream gradient R (the loss is Σ out ⊙ R), and the fast forward on u. `edit_input`,
// when given, changes u before the forward (a kind's special case, e.g. a gate driven to saturation).
template <typename Op>
struct Forwarded : OpInputs {
  typename Op::Case c;
  typename Op::Dims d;
  OpLayer<Op> L;
  std::vector<float> acts;
  std::vector<float> scratch;
  std::vector<float> out;
  typename Op::Activations a;

  Forwarded(const typename Op::Case& cs, uint32_t seed,
            const std::function<void(std::vector<double>&)>& edit_input = nullptr)
      : OpInputs((size_t)cs.B * cs.T * cs.C, seed),
        c(cs),
        d(cs.dims()),
        L(cs, seed),
        acts(Op::activation_floats(d, cs.B, cs.T), NAN),
        scratch(Op::scratch_floats(d, cs.B, cs.T), NAN),
        out((size_t)cs.B * cs.T * cs.C, NAN),
        a(Op::activations(acts.data(), d, cs.B, cs.T)) {
    if (edit_input) {
      edit_input(u);
      u_f = to_float(u);
    }
    Op::forward(out.data(), a, u_f.data(), L.weights(), d, c.B, c.T);
  }
  Forwarded(const Forwarded&) = delete;  // `a` points into acts
  void backward(float* du) {
    Op::backward(du, L.grads(), R_f.data(), u_f.data(), a, L.weights(), d, c.B, c.T, scratch.data());
  }
  std::vector<double> ref_out() const {
    std::vector<double> o(u.size());
    Op::ref_forward(o.data(), u.data(), L.ref(), d, c.B, c.T);
    return o;
  }
};

// Every gradient of the layer (du and each tensor's) against central finite differences of the textbook forward;
// then a second backward checks the convention (parameter gradients +=, du =): each parameter gradient doubled,
// element by element and against the tensor's scale, du the same bits.
template <typename Op>
void expect_backward_matches_textbook(Forwarded<Op>& f) {
  std::vector<float> du(f.u.size(), NAN);
  f.backward(du.data());
  auto loss = [&] { return dot(f.ref_out(), f.R); };
  std::vector<GradCheck> checks = {{"du", du, finite_differences(loss, f.u.data(), f.u.size())}};
  for (OpTensor& t : f.L.tensors)
    checks.push_back({"d" + t.name, t.grad, finite_differences(loss, t.v.data(), t.v.size())});
  expect_gradients(checks, Op::kGradTol);

  std::vector<std::vector<float>> first;
  for (const OpTensor& t : f.L.tensors) first.push_back(t.grad);
  const std::vector<float> first_du = du;
  f.backward(du.data());
  for (size_t i = 0; i < first.size(); i++) {
    const OpTensor& t = f.L.tensors[i];
    for (size_t k = 0; k < first[i].size(); k++)
      ASSERT_NEAR(t.grad[k], 2 * first[i][k], 1e-6 * (1 + std::fabs(first[i][k]))) << t.name << " gradient is added to";
    std::vector<double> twice(first[i].size());
    for (size_t k = 0; k < twice.size(); k++) twice[k] = 2.0 * first[i][k];
    EXPECT_TRUE(close_to_reference(t.grad, twice, 1e-6, t.name + " gradient +="));
  }
  for (size_t k = 0; k < du.size(); k++) ASSERT_EQ(du[k], first_du[k]) << "du is written";
}

// Decoding every sequence of a forwarded case token by token, the state reset before each (the second sequence
// starts from the state the first one left, reset): the outputs (B, T, C) and each sequence's final state.
struct StepChain {
  std::vector<float> out;
  std::vector<std::vector<float>> states;
};
template <typename Op>
StepChain run_step_chain(const Forwarded<Op>& f) {
  const typename Op::Dims& d = f.d;
  StepChain chain;
  chain.out.assign(f.out.size(), NAN);
  std::vector<float> state(Op::state_floats(d), NAN);  // NaN: a reset must set all of it
  std::vector<float> scratch(Op::step_scratch_floats(d), NAN);
  for (int b = 0; b < f.c.B; b++) {
    Op::state_reset(state.data(), d);
    for (int t = 0; t < f.c.T; t++) {
      const size_t o = ((size_t)b * f.c.T + t) * f.c.C;
      Op::step(chain.out.data() + o, state.data(), f.u_f.data() + o, f.L.weights(), d, scratch.data());
    }
    chain.states.push_back(state);
  }
  return chain;
}

// ---------------------------------------------------------------------------------------------------------------
// Every recurrent op

template <typename Op>
class RecurrentOp : public ::testing::Test {};
TYPED_TEST_SUITE_P(RecurrentOp);

TYPED_TEST_P(RecurrentOp, ForwardMatchesTextbook) {
  using Op = TypeParam;
  set_threads(1);
  for (const typename Op::Case& c : Op::cases()) {
    SCOPED_TRACE(c.describe());
    const Forwarded<Op> f(c, 11 + Op::case_seed(c));
    EXPECT_TRUE(close_to_reference(f.out, f.ref_out(), Op::kTol, "out"));
  }
}

TYPED_TEST_P(RecurrentOp, BackwardMatchesFiniteDifferencesOfTextbook) {
  using Op = TypeParam;
  set_threads(1);
  for (const typename Op::Case& c : Op::cases()) {
    SCOPED_TRACE(c.describe());
    Forwarded<Op> f(c, 21 + Op::case_seed(c));
    expect_backward_matches_textbook(f);
  }
}

// With two threads, at sizes where worth_threads splits the recurrence's (batch, head) pairs and the row loops
// (a case of one head runs the same head of different sequences at once on the two threads: each pair's scratch
// must be its own). The two-thread results against the one-thread ones (the same arithmetic per (batch, head)
// pair, so within float rounding of the products' split: measured up to 1.2e-6 of the scale for one kind in the
// sanitized -O1 build, hence 1e-5), and against the textbook: the forward, and finite differences at kTwoThreadSamples
// spread-out entries of each gradient (all of them would take seconds at these sizes).
TYPED_TEST_P(RecurrentOp, TwoThreadsMatchOneThreadAndTextbook) {
  using Op = TypeParam;
  const int saved = default_threads();
  for (const typename Op::Case& c : Op::two_thread_cases()) {
    SCOPED_TRACE(c.describe());
    set_threads(1);
    Forwarded<Op> one(c, 9);
    std::vector<float> du1(one.u.size(), NAN);
    one.backward(du1.data());
    set_threads(2);
    Forwarded<Op> f(c, 9);
    std::vector<float> du(f.u.size(), NAN);
    f.backward(du.data());
    set_threads(saved);
    EXPECT_TRUE(close_to_reference(f.out, to_double(one.out.data(), one.out.size()), 1e-5, "2 threads' out vs 1's"));
    EXPECT_TRUE(close_to_reference(du, to_double(du1.data(), du1.size()), 1e-5, "2 threads' du vs 1's"));
    for (size_t i = 0; i < f.L.tensors.size(); i++) {
      const std::vector<float>& g1 = one.L.tensors[i].grad;
      EXPECT_TRUE(close_to_reference(f.L.tensors[i].grad, to_double(g1.data(), g1.size()), 1e-5,
                                     "2 threads' d" + f.L.tensors[i].name + " vs 1's"));
    }
    EXPECT_TRUE(close_to_reference(f.out, f.ref_out(), Op::kTol, "out"));
    auto loss = [&] { return dot(f.ref_out(), f.R); };
    expect_gradients(sampled_checks(du, f.u, f.L.tensors, loss, Op::kTwoThreadSamples), Op::kGradTol);
  }
}

// Activations and scratch carved for a larger (B, T) serve a smaller run (what a model does when it evaluates or
// generates on shorter sequences than it trains on): the forward against the textbook, du against its differences.
TYPED_TEST_P(RecurrentOp, ArenaCarvedForALargerRunServesASmallerOne) {
  using Op = TypeParam;
  set_threads(1);
  const ArenaCase<typename Op::Case> arena = Op::arena_case();
  const typename Op::Case& c = arena.run;
  const typename Op::Dims d = c.dims();
  OpLayer<Op> L(c, 61);
  OpInputs in((size_t)c.B * c.T * c.C, 61);
  std::vector<float> acts(Op::activation_floats(d, arena.carved_B, arena.carved_T), NAN);
  std::vector<float> scratch(Op::scratch_floats(d, arena.carved_B, arena.carved_T), NAN);
  const typename Op::Activations a = Op::activations(acts.data(), d, arena.carved_B, arena.carved_T);
  std::vector<float> out(in.u.size(), NAN);
  std::vector<float> du(in.u.size(), NAN);
  Op::forward(out.data(), a, in.u_f.data(), L.weights(), d, c.B, c.T);
  Op::backward(du.data(), L.grads(), in.R_f.data(), in.u_f.data(), a, L.weights(), d, c.B, c.T, scratch.data());
  auto forward = [&] {
    std::vector<double> ref(in.u.size());
    Op::ref_forward(ref.data(), in.u.data(), L.ref(), d, c.B, c.T);
    return ref;
  };
  EXPECT_TRUE(close_to_reference(out, forward(), Op::kTol, "out"));
  auto loss = [&] { return dot(forward(), in.R); };
  EXPECT_TRUE(close_to_reference(du, finite_differences(loss, in.u.data(), in.u.size()), Op::kGradTol, "du"));
}

// Token by token from a reset state equals the textbook's rows, each sequence on its own scale; the state is as
// many floats as its hand count.
TYPED_TEST_P(RecurrentOp, StepChainEqualsTheFullForward) {
  using Op = TypeParam;
  set_threads(1);
  for (const typename Op::Case& c0 : Op::cases()) {
    const typename Op::Case c = Op::step_case(c0);
    SCOPED_TRACE(c.describe());
    const Forwarded<Op> f(c, 31 + Op::case_seed(c0));
    EXPECT_EQ(Op::state_floats(f.d), Op::state_floats_by_hand(f.d));
    const std::vector<double> ref = f.ref_out();
    const StepChain chain = run_step_chain(f);
    const size_t per_sequence = (size_t)c.T * c.C;
    for (int b = 0; b < c.B; b++)
      EXPECT_TRUE(close_to_reference(chain.out.data() + b * per_sequence, ref.data() + b * per_sequence,
                                     per_sequence, Op::kTol, "step, sequence " + std::to_string(b)));
  }
}

// The decoding state is state_floats_by_hand floats whatever the context: 300 steps write nothing past it (guard
// floats after it, and after the step's scratch, stay as set) and the step's output stays finite.
TYPED_TEST_P(RecurrentOp, StateSizeIsIndependentOfTheContext) {
  using Op = TypeParam;
  set_threads(1);
  const typename Op::Case c = Op::long_decode_case();
  SCOPED_TRACE(c.describe());
  const typename Op::Dims d = c.dims();
  const size_t n = Op::state_floats(d);
  EXPECT_EQ(n, Op::state_floats_by_hand(d));
  const OpLayer<Op> L(c, 5);
  std::mt19937 rng(6);
  const std::vector<float> u = to_float(uniform((size_t)c.T * c.C, rng));
  std::vector<float> state(n + 64, 12345.0f);
  Op::state_reset(state.data(), d);
  std::vector<float> scratch(Op::step_scratch_floats(d) + 64, 12345.0f);
  std::vector<float> out(c.C);
  for (int t = 0; t < c.T; t++) {
    Op::step(out.data(), state.data(), u.data() + (size_t)t * c.C, L.weights(), d, scratch.data());
    for (float x : out) ASSERT_TRUE(std::isfinite(x));
  }
  for (size_t i = n; i < state.size(); i++) ASSERT_EQ(state[i], 12345.0f) << "written past the state";
  for (size_t i = Op::step_scratch_floats(d); i < scratch.size(); i++)
    ASSERT_EQ(scratch[i], 12345.0f) << "written past the step's scratch";
}

// The lab's M (B, H, T, T) from the forward's activations against the textbook's, and exactly 0 above the diagonal.
TYPED_TEST_P(RecurrentOp, ImpliedAttentionMatchesTextbook) {
  using Op = TypeParam;
  set_threads(1);
  for (const typename Op::Case& c : Op::cases()) {
    SCOPED_TRACE(c.describe());
    const Forwarded<Op> f(c, 41 + Op::case_seed(c));
    std::vector<float> M((size_t)c.B * c.H * c.T * c.T, NAN);
    Op::implied_attention(M.data(), f.a, f.L.weights(), f.d, c.B, c.T);
    EXPECT_TRUE(close_to_reference(M, Op::ref_implied_attention(f.u.data(), f.L.ref(), f.d, c.B, c.T), Op::kTol, "M"));
    for (int i = 0; i < c.B * c.H; i++)
      for (int t = 0; t < c.T; t++)
        for (int s = t + 1; s < c.T; s++) ASSERT_EQ(M[((size_t)i * c.T + t) * c.T + s], 0.0f) << "above the diagonal";
  }
}

// The textbook's backward is central differences of its forward, one coordinate at a time (h = 1e-6). Held here to
// a second numerical route: the directional derivative along a random direction in the input and every tensor at
// once, by a five-point stencil with h = 1e-4.
TYPED_TEST_P(RecurrentOp, TextbookBackwardMatchesAFivePointDirectionalDerivative) {
  using Op = TypeParam;
  const typename Op::Case c = Op::five_point_case();
  SCOPED_TRACE(c.describe());
  const typename Op::Dims d = c.dims();
  const OpLayer<Op> L(c, 77);
  std::mt19937 rng(78);
  const std::vector<double> u = uniform((size_t)c.B * c.T * c.C, rng);
  const std::vector<double> R = uniform(u.size(), rng);
  std::vector<double> du(u.size());
  std::vector<std::vector<double>> grads;
  for (const OpTensor& t : L.tensors) grads.emplace_back(t.v.size(), 0.0);
  const auto g = L.template bind<double*>([&grads](size_t i) { return grads[i].data(); });
  Op::ref_backward(du.data(), g, R.data(), u.data(), L.ref(), d, c.B, c.T);
  // The direction: e_u for u, e_i for each tensor.
  const std::vector<double> eu = uniform(u.size(), rng);
  std::vector<std::vector<double>> e;
  for (const OpTensor& t : L.tensors) e.push_back(uniform(t.v.size(), rng));
  double predicted = dot(du, eu);
  for (size_t i = 0; i < e.size(); i++) predicted += dot(grads[i], e[i]);
  auto loss_at = [&](double eps) {
    std::vector<double> x = u;
    for (size_t i = 0; i < x.size(); i++) x[i] += eps * eu[i];
    OpLayer<Op> moved = L;
    for (size_t i = 0; i < moved.tensors.size(); i++)
      for (size_t k = 0; k < moved.tensors[i].v.size(); k++) moved.tensors[i].v[k] += eps * e[i][k];
    std::vector<double> out(u.size());
    Op::ref_forward(out.data(), x.data(), moved.ref(), d, c.B, c.T);
    return dot(out, R);
  };
  const double h = 1e-4;
  const double numeric = (-loss_at(2 * h) + 8 * loss_at(h) - 8 * loss_at(-h) + loss_at(-2 * h)) / (12 * h);
  EXPECT_NEAR(predicted, numeric, 1e-6 * (1 + std::fabs(numeric)));
}

REGISTER_TYPED_TEST_SUITE_P(RecurrentOp, ForwardMatchesTextbook, BackwardMatchesFiniteDifferencesOfTextbook,
                            TwoThreadsMatchOneThreadAndTextbook, ArenaCarvedForALargerRunServesASmallerOne,
                            StepChainEqualsTheFullForward, StateSizeIsIndependentOfTheContext,
                            ImpliedAttentionMatchesTextbook, TextbookBackwardMatchesAFivePointDirectionalDerivative);

// ---------------------------------------------------------------------------------------------------------------
// The chunked matrix-state recurrences: per head an N × N state S, kept by the forward at the start of every chunk
// of Op::kChunk positions (and S_{T−1} after the last), and a textbook with the recurrence and its attention form.

// One input of the recurrence alone: its name, its floats per row (C, or H for one per head), the range it is
// drawn from.
struct RecurrenceInput {
  std::string name;
  int width = 0;
  double lo = -1.0;
  double hi = 1.0;
};
inline RecurrenceInput recurrence_input(const std::string& name, int width, double lo = -1.0, double hi = 1.0) {
  RecurrenceInput in;
  in.name = name;
  in.width = width;
  in.lo = lo;
  in.hi = hi;
  return in;
}

template <typename Op>
class ChunkedRecurrenceOp : public ::testing::Test {};
TYPED_TEST_SUITE_P(ChunkedRecurrenceOp);

// The textbook against itself: the recurrence (S_t from S_{t−1}, y_t = S_t times the query) and the attention form
// (y_t = Σ_s M[t, s] v_s, no state) give the same y, in double.
TYPED_TEST_P(ChunkedRecurrenceOp, TextbookRecurrenceEqualsAttentionForm) {
  using Op = TypeParam;
  for (const typename Op::Case& c : Op::cases()) {
    SCOPED_TRACE(c.describe());
    const typename Op::Dims d = c.dims();
    const OpLayer<Op> L(c, 3 + Op::case_seed(c));
    std::mt19937 rng(5);
    const std::vector<double> u = uniform((size_t)c.B * c.T * c.C, rng);
    const std::vector<double> y1 = Op::ref_recurrence(u.data(), L.ref(), d, c.B, c.T, nullptr);
    const std::vector<double> y2 = Op::ref_attention_form(u.data(), L.ref(), d, c.B, c.T);
    EXPECT_TRUE(all_close(y1, y2, 1e-12, 1e-12 * (1 + max_abs(y1.data(), y1.size())), "recurrence vs M"));
  }
}

// The recurrence alone: each input's gradient against finite differences of the textbook's recurrence, with the
// inputs drawn directly (keys not normalised, gates across their ranges), T = 37 across three chunks, heads of
// N = 1 and 4.
TYPED_TEST_P(ChunkedRecurrenceOp, RecurrenceBackwardMatchesFiniteDifferences) {
  using Op = TypeParam;
  set_threads(1);
  for (int N : {1, 4}) {
    SCOPED_TRACE("N=" + std::to_string(N));
    const int H = 2;
    const int B = 2;
    const int T = 37;
    const typename Op::Dims d = Op::recurrence_dims(H * N, H);
    const size_t rows = (size_t)B * T;
    std::mt19937 rng(N);
    const std::vector<RecurrenceInput> inputs = Op::recurrence_inputs(d);
    std::vector<std::vector<double>> in;
    for (const RecurrenceInput& x : inputs) in.push_back(float_exact(uniform(rows * x.width, rng, x.lo, x.hi)));
    const std::vector<double> R = float_exact(uniform(rows * d.C, rng));
    std::vector<std::vector<float>> in_f;
    std::vector<const float*> in_p;
    for (const std::vector<double>& x : in) in_f.push_back(to_float(x));
    for (const std::vector<float>& x : in_f) in_p.push_back(x.data());
    std::vector<float> y(rows * d.C);
    std::vector<float> state((size_t)B * H * (d.chunks(T) + 1) * N * N, NAN);
    Op::recurrence_forward(y.data(), state.data(), in_p, d, B, T);
    EXPECT_TRUE(close_to_reference(y, Op::ref_recurrence_of(in, d, B, T), Op::kTol, "y"));
    std::vector<std::vector<float>> grads;
    std::vector<float*> grad_p;
    for (const std::vector<double>& x : in) grads.emplace_back(x.size(), NAN);
    for (std::vector<float>& g : grads) grad_p.push_back(g.data());
    std::vector<float> scratch((size_t)B * H * (Op::kChunk + 2) * N * N, NAN);
    Op::recurrence_backward(grad_p, to_float(R).data(), state.data(), in_p, d, B, T, scratch.data());
    auto loss = [&] { return dot(Op::ref_recurrence_of(in, d, B, T), R); };
    std::vector<GradCheck> checks;
    for (size_t i = 0; i < in.size(); i++)
      checks.push_back({"d" + inputs[i].name, grads[i], finite_differences(loss, in[i].data(), in[i].size())});
    expect_gradients(checks, Op::kGradTol);
  }
}

// After decoding a sequence, the step's S of every head is S_{T−1} as the textbook's recurrence leaves it, and the
// batched forward's final state is the same; state_from_forward refills the whole decoding state from the forward.
TYPED_TEST_P(ChunkedRecurrenceOp, StepStateIsTheTextbooksState) {
  using Op = TypeParam;
  set_threads(1);
  for (const typename Op::Case& c : Op::cases()) {
    SCOPED_TRACE(c.describe());
    const Forwarded<Op> f(c, 31 + Op::case_seed(c));
    const typename Op::Dims& d = f.d;
    std::vector<double> S_ref;
    Op::ref_recurrence(f.u.data(), f.L.ref(), d, c.B, c.T, &S_ref);
    const double S_scale = Op::state_scale(f.u.data(), f.L.ref(), d, c.B, c.T);
    const StepChain chain = run_step_chain(f);
    const size_t NN = (size_t)d.N * d.N;
    for (int b = 0; b < c.B; b++) {
      const std::vector<float>& state = chain.states[b];
      for (int h = 0; h < d.H; h++) {
        const auto first = S_ref.begin() + ((size_t)b * d.H + h) * NN;
        const std::vector<double> S(first, first + NN);
        EXPECT_TRUE(close_to_reference(state.data() + Op::matrix_state_offset(d) + h * NN, S.data(), NN, Op::kTol,
                                       "step's S", S_scale));
        EXPECT_TRUE(close_to_reference(Op::final_state(f.a, d, b, h), S.data(), NN, Op::kTol, "forward's S_{T-1}",
                                       S_scale));
      }
      std::vector<float> refilled(state.size(), NAN);
      Op::state_from_forward(refilled.data(), f.a, d, b);
      EXPECT_TRUE(close_to_reference(refilled, to_double(state.data(), state.size()), Op::kTol, "state_from_forward"));
    }
  }
}

REGISTER_TYPED_TEST_SUITE_P(ChunkedRecurrenceOp, TextbookRecurrenceEqualsAttentionForm,
                            RecurrenceBackwardMatchesFiniteDifferences, StepStateIsTheTextbooksState);

}  // namespace testutil
