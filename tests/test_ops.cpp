// Every fast op in src/ against the slow reference in src/textbook/reference.h, three ways:
//   (a) fast float forward ≈ double reference forward,
//   (b) fast float backward ≈ double reference backward, with every gradient buffer seeded with random non-zero
//       values so that an op which overwrites instead of accumulating (+=) fails,
//   (c) reference backward ≈ central finite differences of the reference forward in double, using the scalar
//       loss Σ_k w_k·out_k with random w (so every output element matters and dout = w).
// Inputs are rounded to float first, so both sides see exactly the same numbers.
//
// Tolerances. Fast vs reference is measured against each tensor's largest magnitude (close_to_reference):
// float carries 24 bits (ε ≈ 6e-8) and the longest chains here (sums of ~130 terms, exp, tanh, the cancellation in
// dP − rowsum) were measured at ≤ 4e-7 of the tensor's scale, so 1e-5 leaves a 25× margin, while a real mistake
// (a missing term, a wrong index, a forgotten scale or an overwrite instead of +=) is O(1) relative.
// Finite differences with h = 1e-6 in double: truncation error ~h²·f''' ≈ 1e-12 and rounding ~ε·|f|/h ≈ 1e-9,
// so |analytic − numeric| ≤ 1e-6·|numeric| + 1e-8 holds with margin.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/softmax_attention.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/head_gate.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/mask.h"
#include "textbook/reference.h"
#include "test_util.h"
#include "base/threads.h"

using namespace testutil;

namespace {

constexpr double kForwardTol = 1e-5;
constexpr double kBackwardTol = 1e-5;  // same budget: measured backward errors are as small as forward
constexpr double kFdRel = 1e-6, kFdAbs = 1e-8;

// The reference backward's own contribution (grad − seed) against central differences of loss() w.r.t. x.
::testing::AssertionResult matches_fd(const std::vector<double>& grad, const std::vector<double>& seed,
                                      const std::function<double()>& loss, std::vector<double>& x,
                                      const std::string& what) {
  return all_close(minus(grad, seed), finite_differences(loss, x.data(), x.size()), kFdRel, kFdAbs, what);
}

std::vector<int> random_ids(size_t n, int below, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(0, below - 1);
  std::vector<int> ids(n);
  for (int& id : ids) id = dist(rng);
  return ids;
}

// The seed to compare a written gradient with: an input's gradient is written, not added to (a random seed was
// in the buffer before the call and must be gone), so the whole buffer must equal the finite difference.
std::vector<double> written(const std::vector<double>& grad) { return std::vector<double>(grad.size(), 0.0); }

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Embedding

// set_threads flushes denormal floats to zero in every thread (base/threads.cpp says why): a product below
// FLT_MIN comes out as exactly 0 on the calling thread and on each OpenMP thread.
TEST(OpsThreads, DenormalsAreFlushedToZeroInEveryThread) {
#if defined(__SSE2__)
  set_threads(2);
  volatile float tiny = 1e-20f;  // volatile: the product is computed at run time, under the thread's MXCSR
  int nonzero = 0, threads_seen = 0;
#pragma omp parallel reduction(+ : nonzero, threads_seen)
  {
    const float product = tiny * tiny;  // 1e-40: a denormal unless flushed
    nonzero += product != 0.0f;
    threads_seen += 1;
  }
  EXPECT_EQ(threads_seen, 2);
  EXPECT_EQ(nonzero, 0);
  volatile float denormal = 1e-40f;  // an input that is already denormal reads as zero (DAZ)
  EXPECT_EQ(denormal * 1.0f, 0.0f);
  set_threads(1);
#else
  GTEST_SKIP() << "flushing denormals is set only on x86 (SSE)";
#endif
}

TEST(OpsEmbedding, MatchesReferenceAndFiniteDifferences) {
  struct Shape {
    int B, T, C, V, maxT;
  };
  for (Shape s : {Shape{1, 1, 1, 1, 1}, Shape{2, 7, 3, 5, 9}, Shape{3, 16, 33, 4, 16}, Shape{1, 5, 7, 11, 8}}) {
    SCOPED_TRACE("B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
                 " V=" + std::to_string(s.V));
    std::mt19937 rng(11 + s.C);
    const size_t BTC = (size_t)s.B * s.T * s.C;
    std::vector<int> tokens = random_ids((size_t)s.B * s.T, s.V, rng);
    tokens.back() = tokens.front();  // at least one token row used twice: its gradient must sum both uses
    std::vector<double> wte = float_exact(uniform((size_t)s.V * s.C, rng)),
                        wpe = float_exact(uniform((size_t)s.maxT * s.C, rng));
    std::vector<float> wte_f = to_float(wte), wpe_f = to_float(wpe);

    std::vector<double> out(BTC);
    std::vector<float> out_f(BTC, NAN);
    ref_embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), s.B, s.T, s.C);
    embedding_forward(out_f.data(), tokens.data(), wte_f.data(), wpe_f.data(), s.B, s.T, s.C);
    EXPECT_TRUE(close_to_reference(out_f, out, kForwardTol, "embedding out"));

    const std::vector<double> dout = float_exact(uniform(BTC, rng));
    const std::vector<double> seed_wte = float_exact(uniform(wte.size(), rng)),
                              seed_wpe = float_exact(uniform(wpe.size(), rng));
    std::vector<double> dwte = seed_wte, dwpe = seed_wpe;
    std::vector<float> dwte_f = to_float(seed_wte), dwpe_f = to_float(seed_wpe), dout_f = to_float(dout);
    ref_embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), s.B, s.T, s.C);
    embedding_backward(dwte_f.data(), dwpe_f.data(), dout_f.data(), tokens.data(), s.B, s.T, s.C);
    EXPECT_TRUE(close_to_reference(dwte_f, dwte, kBackwardTol, "dwte"));
    EXPECT_TRUE(close_to_reference(dwpe_f, dwpe, kBackwardTol, "dwpe"));

    auto loss = [&] {
      ref_embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), s.B, s.T, s.C);
      return dot(dout, out);
    };
    EXPECT_TRUE(matches_fd(dwte, seed_wte, loss, wte, "dwte vs FD"));
    EXPECT_TRUE(matches_fd(dwpe, seed_wpe, loss, wpe, "dwpe vs FD"));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// LayerNorm

// C = 33 and 129: the row sums run in vector lanes (layernorm.cpp), with a tail of channels after them.
TEST(OpsLayerNorm, MatchesReferenceAndFiniteDifferences) {
  for (int N : {1, 5})
    for (int C : {1, 3, 7, 33, 129}) {
      SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
      std::mt19937 rng(100 * N + C);
      const size_t NC = (size_t)N * C;
      std::vector<double> x = uniform(NC, rng, -2, 2);
      for (double& v : x) v = (double)(float)(v + 3.0);  // rows with a non-zero mean
      std::vector<double> w = float_exact(uniform(C, rng, -1.5, 1.5)), b = float_exact(uniform(C, rng));
      std::vector<float> x_f = to_float(x), w_f = to_float(w), b_f = to_float(b);

      std::vector<double> out(NC), mean(N), rstd(N);
      std::vector<float> out_f(NC, NAN), mean_f(N, NAN), rstd_f(N, NAN);
      ref_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
      layernorm_forward(out_f.data(), mean_f.data(), rstd_f.data(), x_f.data(), w_f.data(), b_f.data(), N, C);
      EXPECT_TRUE(close_to_reference(out_f, out, kForwardTol, "layernorm out"));
      EXPECT_TRUE(close_to_reference(mean_f, mean, kForwardTol, "layernorm mean"));
      EXPECT_TRUE(close_to_reference(rstd_f, rstd, kForwardTol, "layernorm rstd"));
      std::vector<float> again(NC, NAN);  // the backward's recompute from the kept statistics
      layernorm_recompute(again.data(), x_f.data(), w_f.data(), b_f.data(), mean_f.data(), rstd_f.data(), N, C);
      EXPECT_TRUE(close_to_reference(again, out, kForwardTol, "layernorm recomputed out"));

      const std::vector<double> dout = float_exact(uniform(NC, rng));
      const std::vector<double> seed_x = float_exact(uniform(NC, rng)), seed_w = float_exact(uniform(C, rng)),
                                seed_b = float_exact(uniform(C, rng));
      std::vector<double> dx = seed_x, dw = seed_w, db = seed_b;
      std::vector<float> dx_f = to_float(seed_x), dw_f = to_float(seed_w), db_f = to_float(seed_b),
                         dout_f = to_float(dout);
      ref_layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(),
                             N, C);
      layernorm_backward(dx_f.data(), dw_f.data(), db_f.data(), dout_f.data(), x_f.data(), w_f.data(), mean_f.data(),
                         rstd_f.data(), N, C);
      // dx = r·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·w cancels terms of size r·|g| (completely when C = 1, where
      // x̂ = 0 and dx = 0), so float rounding is relative to max r·|g|: with FMA contraction (-march=native) C = 1
      // gives r·ε·|g| ≈ 316 · 6e-8 · |g| instead of 0.
      double terms = 0;
      for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) terms = std::max(terms, rstd[n] * std::fabs(dout[n * C + c] * w[c]));
      EXPECT_TRUE(close_to_reference(dx_f, dx, kBackwardTol, "layernorm dinp", terms));
      EXPECT_TRUE(close_to_reference(dw_f, dw, kBackwardTol, "layernorm dweight"));
      EXPECT_TRUE(close_to_reference(db_f, db, kBackwardTol, "layernorm dbias"));

      auto loss = [&] {
        ref_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
        return dot(dout, out);
      };
      EXPECT_TRUE(matches_fd(dx, seed_x, loss, x, "dinp vs FD"));
      EXPECT_TRUE(matches_fd(dw, seed_w, loss, w, "dweight vs FD"));
      EXPECT_TRUE(matches_fd(db, seed_b, loss, b, "dbias vs FD"));
    }
}

// Rows enough to cross worth_threads (threads.h), on two threads: the threaded path sums dweight and dbias in
// per-thread partials, which the small shapes above never reach.
TEST(OpsLayerNorm, ThreadedBackwardMatchesReference) {
  const int N = 300, C = 128, saved = default_threads();
  set_threads(2);
  std::mt19937 rng(7);
  const size_t NC = (size_t)N * C;
  std::vector<double> x = float_exact(uniform(NC, rng, -2, 2)), w = float_exact(uniform(C, rng, -1.5, 1.5));
  std::vector<double> b = float_exact(uniform(C, rng)), dout = float_exact(uniform(NC, rng));
  std::vector<double> out(NC), mean(N), rstd(N), dx(NC, 0.0), dw(C, 0.0), db(C, 0.0);
  std::vector<float> out_f(NC), mean_f(N), rstd_f(N), dx_f(NC, 0.0f), dw_f(C, 0.0f), db_f(C, 0.0f);
  ref_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  layernorm_forward(out_f.data(), mean_f.data(), rstd_f.data(), to_float(x).data(), to_float(w).data(),
                    to_float(b).data(), N, C);
  ref_layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                         C);
  layernorm_backward(dx_f.data(), dw_f.data(), db_f.data(), to_float(dout).data(), to_float(x).data(),
                     to_float(w).data(), mean_f.data(), rstd_f.data(), N, C);
  set_threads(saved);
  EXPECT_TRUE(close_to_reference(dx_f, dx, kBackwardTol, "layernorm dinp"));
  EXPECT_TRUE(close_to_reference(dw_f, dw, kBackwardTol, "layernorm dweight"));
  EXPECT_TRUE(close_to_reference(db_f, db, kBackwardTol, "layernorm dbias"));
}

// ---------------------------------------------------------------------------------------------------------------
// Linear and the tied LM head

TEST(OpsLinear, MatchesReferenceAndFiniteDifferences) {
  struct Shape {
    int N, IC, OC;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{5, 3, 7}, Shape{5, 33, 1}, Shape{1, 7, 33}, Shape{8, 33, 17}})
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE("N=" + std::to_string(s.N) + " IC=" + std::to_string(s.IC) + " OC=" + std::to_string(s.OC) +
                   (with_bias ? " bias" : " no bias"));
      std::mt19937 rng(7 * s.N + 13 * s.IC + s.OC + with_bias);
      std::vector<double> x = float_exact(uniform((size_t)s.N * s.IC, rng)),
                          w = float_exact(uniform((size_t)s.IC * s.OC, rng)), b = float_exact(uniform(s.OC, rng));
      std::vector<float> x_f = to_float(x), w_f = to_float(w), b_f = to_float(b);
      double* bias = with_bias ? b.data() : nullptr;
      float* bias_f = with_bias ? b_f.data() : nullptr;

      std::vector<double> out((size_t)s.N * s.OC);
      std::vector<float> out_f(out.size(), NAN);  // without a bias the output must still be fully overwritten
      ref_linear_forward(out.data(), x.data(), w.data(), (const double*)bias, s.N, s.IC, s.OC);
      linear_forward(out_f.data(), x_f.data(), w_f.data(), bias_f, s.N, s.IC, s.OC);
      EXPECT_TRUE(close_to_reference(out_f, out, kForwardTol, "linear out"));
      // With a residual r: out = r + X·W + b.
      const std::vector<double> r = float_exact(uniform(out.size(), rng));
      std::vector<double> out_r = out;
      for (size_t i = 0; i < out_r.size(); i++) out_r[i] += r[i];
      std::vector<float> out_rf(out.size(), NAN);
      linear_forward(out_rf.data(), x_f.data(), w_f.data(), bias_f, s.N, s.IC, s.OC, to_float(r).data());
      EXPECT_TRUE(close_to_reference(out_rf, out_r, kForwardTol, "linear out with residual"));

      const std::vector<double> dout = float_exact(uniform(out.size(), rng));
      const std::vector<double> seed_x = float_exact(uniform(x.size(), rng)),
                                seed_w = float_exact(uniform(w.size(), rng)),
                                seed_b = float_exact(uniform(b.size(), rng));
      std::vector<double> dx = seed_x, dw = seed_w, db = seed_b;
      std::vector<float> dx_f = to_float(seed_x), dw_f = to_float(seed_w), db_f = to_float(seed_b),
                         dout_f = to_float(dout);
      ref_linear_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(), w.data(), s.N,
                          s.IC, s.OC);
      linear_backward(dx_f.data(), dw_f.data(), with_bias ? db_f.data() : nullptr, dout_f.data(), x_f.data(),
                      w_f.data(), s.N, s.IC, s.OC);
      EXPECT_TRUE(close_to_reference(dx_f, dx, kBackwardTol, "linear dinp"));
      EXPECT_TRUE(close_to_reference(dw_f, dw, kBackwardTol, "linear dweight"));
      EXPECT_TRUE(close_to_reference(db_f, db, kBackwardTol, "linear dbias"));  // untouched (= seed) without a bias

      auto loss = [&] {
        ref_linear_forward(out.data(), x.data(), w.data(), (const double*)bias, s.N, s.IC, s.OC);
        return dot(dout, out);
      };
      EXPECT_TRUE(matches_fd(dx, written(dx), loss, x, "dinp vs FD"));
      EXPECT_TRUE(matches_fd(dw, seed_w, loss, w, "dweight vs FD"));
      if (with_bias) {
        EXPECT_TRUE(matches_fd(db, seed_b, loss, b, "dbias vs FD"));
      }
    }
}

TEST(OpsLmHead, MatchesReferenceAndFiniteDifferences) {
  struct Shape {
    int N, C, V;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{5, 3, 7}, Shape{5, 33, 11}, Shape{16, 7, 65}}) {
    SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " V=" + std::to_string(s.V));
    std::mt19937 rng(3 * s.N + 5 * s.C + s.V);
    std::vector<double> x = float_exact(uniform((size_t)s.N * s.C, rng)),
                        wte = float_exact(uniform((size_t)s.V * s.C, rng));
    std::vector<float> x_f = to_float(x), wte_f = to_float(wte);

    std::vector<double> logits((size_t)s.N * s.V);
    std::vector<float> logits_f(logits.size(), NAN);
    ref_lm_head_forward(logits.data(), x.data(), wte.data(), s.N, s.C, s.V);
    lm_head_forward(logits_f.data(), x_f.data(), wte_f.data(), s.N, s.C, s.V);
    EXPECT_TRUE(close_to_reference(logits_f, logits, kForwardTol, "lm_head logits"));

    const std::vector<double> dout = float_exact(uniform(logits.size(), rng));
    const std::vector<double> seed_x = float_exact(uniform(x.size(), rng)),
                              seed_wte = float_exact(uniform(wte.size(), rng));
    std::vector<double> dx = seed_x, dwte = seed_wte;
    std::vector<float> dx_f = to_float(seed_x), dwte_f = to_float(seed_wte), dout_f = to_float(dout);
    ref_lm_head_backward(dx.data(), dwte.data(), dout.data(), x.data(), wte.data(), s.N, s.C, s.V);
    lm_head_backward(dx_f.data(), dwte_f.data(), dout_f.data(), x_f.data(), wte_f.data(), s.N, s.C, s.V);
    EXPECT_TRUE(close_to_reference(dx_f, dx, kBackwardTol, "lm_head dinp"));
    EXPECT_TRUE(close_to_reference(dwte_f, dwte, kBackwardTol, "lm_head dwte"));

    auto loss = [&] {
      ref_lm_head_forward(logits.data(), x.data(), wte.data(), s.N, s.C, s.V);
      return dot(dout, logits);
    };
    EXPECT_TRUE(matches_fd(dx, written(dx), loss, x, "dinp vs FD"));
    EXPECT_TRUE(matches_fd(dwte, seed_wte, loss, wte, "dwte vs FD"));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// GELU

TEST(OpsGelu, MatchesReferenceAndFiniteDifferences) {
  std::mt19937 rng(5);
  std::vector<double> x = {-20, -10, -5, -3, -2, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 2, 3, 5, 10, 20};
  for (double v : uniform(16, rng, -4, 4)) x.push_back(v);
  x = float_exact(x);
  const size_t n = x.size();
  std::vector<float> x_f = to_float(x);

  // Hand-checked values: gelu(0) = 0, gelu(x) → x for large x, → 0 for very negative x, and gelu(1) = 0.8411920.
  std::vector<double> y(n);
  ref_gelu_forward(y.data(), x.data(), n);
  EXPECT_EQ(y[8], 0.0);
  EXPECT_NEAR(y[15], 10.0, 1e-12);
  EXPECT_NEAR(y[1], 0.0, 1e-12);
  EXPECT_NEAR(y[11], 0.8411919906082768, 1e-12);

  // Float GELU rounds ½·x·(1 + tanh u) with error ≈ ε·|x|, so compare per element against 1e-6·(1 + |x|).
  std::vector<float> y_f(n, NAN);
  gelu_forward(y_f.data(), x_f.data(), n);
  for (size_t i = 0; i < n; i++) EXPECT_NEAR(y_f[i], y[i], 1e-6 * (1 + std::fabs(x[i]))) << "x = " << x[i];

  const std::vector<double> dout = float_exact(uniform(n, rng)), seed = float_exact(uniform(n, rng));
  std::vector<double> dx = seed;
  std::vector<float> dx_f = to_float(seed), dout_f = to_float(dout);
  ref_gelu_backward(dx.data(), x.data(), dout.data(), n);
  gelu_backward(dx_f.data(), x_f.data(), dout_f.data(), n);
  for (size_t i = 0; i < n; i++) EXPECT_NEAR(dx_f[i], dx[i], 1e-6 * (1 + std::fabs(dx[i]))) << "x = " << x[i];
  std::vector<float> in_place = dout_f;  // the model runs it in place, dinp = dout
  gelu_backward(in_place.data(), x_f.data(), in_place.data(), n);
  EXPECT_EQ(in_place, dx_f);

  // The training backward's pair (model/block.h): gelu(x) and dy/dx in one pass, then dinp = slope ⊙ dout. Held
  // to the double reference, not to gelu_forward / gelu_backward: each must be right on its own.
  std::vector<float> again(n, NAN), slope(n, NAN), from_slope = dout_f;
  gelu_recompute(again.data(), slope.data(), x_f.data(), n);
  gelu_backward_from_slope(from_slope.data(), slope.data(), from_slope.data(), n);  // in place, as the model runs it
  std::vector<double> ones(n, 1.0), ref_slope(n);
  ref_gelu_backward(ref_slope.data(), x.data(), ones.data(), n);
  for (size_t i = 0; i < n; i++) {
    EXPECT_NEAR(again[i], y[i], 1e-6 * (1 + std::fabs(x[i]))) << "x = " << x[i];
    EXPECT_NEAR(slope[i], ref_slope[i], 1e-6 * (1 + std::fabs(ref_slope[i]))) << "x = " << x[i];
    EXPECT_NEAR(from_slope[i], dx[i], 1e-6 * (1 + std::fabs(dx[i]))) << "x = " << x[i];
  }

  auto loss = [&] {
    ref_gelu_forward(y.data(), x.data(), n);
    return dot(dout, y);
  };
  EXPECT_TRUE(matches_fd(dx, written(dx), loss, x, "gelu dinp vs FD"));
}

// ---------------------------------------------------------------------------------------------------------------
// Head gates

// dinp is written and dgates added to (src/ops/README.md): both buffers start with random seeds.
TEST(OpsHeadGate, MatchesReferenceAndFiniteDifferences) {
  const int N = 5, NH = 3, HS = 4, C = NH * HS;
  std::mt19937 rng(41);
  std::vector<double> x = float_exact(uniform((size_t)N * C, rng, -2, 2)), gates = {0.5, 0.0, -1.5};
  const std::vector<double> dout = float_exact(uniform((size_t)N * C, rng));
  const std::vector<double> seed_x = float_exact(uniform((size_t)N * C, rng)), seed_g = float_exact(uniform(NH, rng));
  std::vector<double> y((size_t)N * C), dx = seed_x, dg = seed_g;
  ref_head_gate_forward(y.data(), x.data(), gates.data(), N, NH, HS);
  ref_head_gate_backward(dx.data(), dg.data(), dout.data(), x.data(), gates.data(), N, NH, HS);
  for (int n = 0; n < N; n++) EXPECT_EQ(y[(size_t)n * C + HS], 0.0) << "a gate of 0 removes head 1";

  std::vector<float> x_f = to_float(x), g_f = to_float(gates), y_f((size_t)N * C, NAN), dout_f = to_float(dout);
  std::vector<float> dx_f = to_float(seed_x), dg_f = to_float(seed_g);
  head_gate_forward(y_f.data(), x_f.data(), g_f.data(), N, NH, HS);
  head_gate_backward(dx_f.data(), dg_f.data(), dout_f.data(), x_f.data(), g_f.data(), N, NH, HS);
  EXPECT_TRUE(close_to_reference(y_f, y, kForwardTol, "head gate out"));
  EXPECT_TRUE(close_to_reference(dx_f, dx, kForwardTol, "head gate dinp"));
  EXPECT_TRUE(close_to_reference(dg_f, dg, kForwardTol, "head gate dgates"));

  auto loss = [&] {
    ref_head_gate_forward(y.data(), x.data(), gates.data(), N, NH, HS);
    return dot(dout, y);
  };
  EXPECT_TRUE(matches_fd(dx, written(dx), loss, x, "head gate dinp vs FD"));
  EXPECT_TRUE(matches_fd(dg, seed_g, loss, gates, "head gate dgates vs FD"));
}

// ---------------------------------------------------------------------------------------------------------------
// Attention

namespace {

// T = 37 spans three query blocks of softmax_attention.cpp (16 rows each), the last one partial.
const AttentionShape kAttentionShapes[] = {{1, 1, 3, 1}, {2, 2, 3, 3}, {1, 7, 9, 3}, {2, 7, 7, 1}, {1, 16, 15, 3},
                                           {1, 37, 4, 2}};

}  // namespace

TEST(OpsAttention, MatchesReferenceAndFiniteDifferencesForEveryMask) {
  for (const AttentionShape& s : kAttentionShapes)
    for (const AttentionMask& mask : all_masks(s.T))
      for (double scale : {1.0 / std::sqrt((double)(s.C / s.NH)), 1.3}) {
        SCOPED_TRACE(describe(s, mask) + " scale=" + std::to_string(scale));
        const int B = s.B, T = s.T, C = s.C, NH = s.NH;
        const size_t BTC = (size_t)B * T * C, nP = (size_t)B * NH * T * T;
        std::mt19937 rng(B * 1000 + T * 100 + C * 10 + NH + (int)mask.kind * 7 + mask.size);
        std::vector<double> qkv = float_exact(uniform(3 * BTC, rng, -1.5, 1.5));
        std::vector<float> qkv_f = to_float(qkv);
        const float scale_f = (float)scale;

        std::vector<double> out(BTC), probs(nP);
        ref_attention_forward(out.data(), probs.data(), qkv.data(), mask, (double)scale_f, B, T, C, NH);
        // The reference's P: a distribution over exactly the allowed keys.
        for (int bh = 0; bh < B * NH; bh++)
          for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) {
              const double p = probs[((size_t)bh * T + i) * T + j];
              if (mask.allows(i, j, T)) {
                EXPECT_GT(p, 0.0);
                sum += p;
              } else {
                EXPECT_EQ(p, 0.0) << "reference P at forbidden (" << i << "," << j << ")";
              }
            }
            EXPECT_NEAR(sum, 1.0, 1e-12);
          }

        // The fast forward keeps only each row's log-normaliser; P is rebuilt from it (and Q, K) on request.
        std::vector<float> out_f(BTC, NAN), lse_f((size_t)B * NH * T, NAN), probs_f(nP, NAN);
        attention_forward(out_f.data(), lse_f.data(), qkv_f.data(), mask, scale_f, B, T, C, NH);
        EXPECT_TRUE(close_to_reference(out_f, out, kForwardTol, "attention out"));
        std::vector<double> lse((size_t)B * NH * T);  // lse_i = log Σ_{j allowed} exp(scale·q_i·k_j), in double
        for (int b = 0; b < B; b++)
          for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
              const int HS = C / NH;
              double sum = 0;
              for (int j = 0; j < T; j++) {
                if (!mask.allows(i, j, T)) continue;
                double qk = 0;
                for (int d = 0; d < HS; d++)
                  qk += qkv[((size_t)b * T + i) * 3 * C + h * HS + d] * qkv[((size_t)b * T + j) * 3 * C + C + h * HS + d];
                sum += std::exp(scale_f * qk);
              }
              lse[((size_t)b * NH + h) * T + i] = std::log(sum);
            }
        EXPECT_TRUE(close_to_reference(lse_f, lse, kForwardTol, "attention lse"));
        attention_probs(probs_f.data(), qkv_f.data(), lse_f.data(), mask, scale_f, B, T, C, NH);
        for (int bh = 0; bh < B * NH; bh++)
          for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
              if (!mask.allows(i, j, T)) {
                EXPECT_EQ(probs_f[((size_t)bh * T + i) * T + j], 0.0f) << "P at forbidden (" << i << "," << j << ")";
              }
        EXPECT_TRUE(close_to_reference(probs_f, probs, kForwardTol, "attention probs"));

        const std::vector<double> dout = float_exact(uniform(BTC, rng)), seed = float_exact(uniform(3 * BTC, rng));
        std::vector<double> dqkv = seed;
        std::vector<float> dqkv_f = to_float(seed), dout_f = to_float(dout);
        ref_attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), out.data(), mask, (double)scale_f, B,
                               T, C, NH);
        attention_backward(dqkv_f.data(), dout_f.data(), qkv_f.data(), lse_f.data(), out_f.data(), mask, scale_f, B,
                           T, C, NH);
        EXPECT_TRUE(close_to_reference(dqkv_f, dqkv, kBackwardTol, "attention dqkv"));

        auto loss = [&] {
          ref_attention_forward(out.data(), probs.data(), qkv.data(), mask, (double)scale_f, B, T, C, NH);
          return dot(dout, out);
        };
        EXPECT_TRUE(matches_fd(dqkv, written(dqkv), loss, qkv, "attention dqkv vs FD"));
      }
}

// With the upstream gradient non-zero only at query i, nothing may flow to the other queries, nor to the keys and
// values that i cannot see: those gradients must be exactly 0, in the fast op and in the reference.
TEST(OpsAttention, NoGradientToKeysAQueryCannotSee) {
  for (const AttentionShape& s : kAttentionShapes)
    for (const AttentionMask& mask : all_masks(s.T))
      for (int i : {0, s.T / 2, s.T - 1}) {
        SCOPED_TRACE(describe(s, mask) + " query " + std::to_string(i));
        const int B = s.B, T = s.T, C = s.C, NH = s.NH, HS = C / NH;
        const size_t BTC = (size_t)B * T * C;
        std::mt19937 rng(17 + i + T);
        std::vector<double> qkv = float_exact(uniform(3 * BTC, rng, -1.5, 1.5));
        std::vector<float> qkv_f = to_float(qkv);
        const float scale = 1.0f / std::sqrt((float)HS);
        std::vector<double> out(BTC), probs((size_t)B * NH * T * T), dout(BTC, 0.0), dqkv(3 * BTC, 0.0);
        std::vector<float> out_f(BTC), lse_f((size_t)B * NH * T), dout_f(BTC, 0.0f), dqkv_f(3 * BTC, 0.0f);
        for (int b = 0; b < B; b++)
          for (int c = 0; c < C; c++) dout[((size_t)b * T + i) * C + c] = (double)(float)(0.5 + 0.1 * c);
        dout_f = to_float(dout);
        ref_attention_forward(out.data(), probs.data(), qkv.data(), mask, (double)scale, B, T, C, NH);
        ref_attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), out.data(), mask, (double)scale, B,
                               T, C, NH);
        attention_forward(out_f.data(), lse_f.data(), qkv_f.data(), mask, scale, B, T, C, NH);
        attention_backward(dqkv_f.data(), dout_f.data(), qkv_f.data(), lse_f.data(), out_f.data(), mask, scale, B, T,
                           C, NH);
        for (int b = 0; b < B; b++)
          for (int t = 0; t < T; t++) {
            const bool visible = mask.allows(i, t, T);
            double v_abs_sum = 0;
            for (int c = 0; c < C; c++) {
              const size_t row = ((size_t)b * T + t) * 3 * C;
              if (t != i) {
                EXPECT_EQ(dqkv_f[row + c], 0.0f) << "dq of query " << t;
                EXPECT_EQ(dqkv[row + c], 0.0) << "reference dq of query " << t;
              }
              if (!visible) {
                EXPECT_EQ(dqkv_f[row + C + c], 0.0f) << "dk of unseen key " << t;
                EXPECT_EQ(dqkv_f[row + 2 * C + c], 0.0f) << "dv of unseen key " << t;
                EXPECT_EQ(dqkv[row + C + c], 0.0) << "reference dk of unseen key " << t;
                EXPECT_EQ(dqkv[row + 2 * C + c], 0.0) << "reference dv of unseen key " << t;
              }
              v_abs_sum += std::fabs(dqkv_f[row + 2 * C + c]);
            }
            if (visible) {
              EXPECT_GT(v_abs_sum, 0.0) << "a visible value got no gradient, key " << t;
            }
          }
        EXPECT_TRUE(close_to_reference(dqkv_f, dqkv, kBackwardTol, "dqkv"));
      }
}

// ---------------------------------------------------------------------------------------------------------------
// Cross-entropy

TEST(OpsCrossEntropy, MatchesReferenceAndFiniteDifferences) {
  struct Shape {
    int N, V;
  };
  for (Shape s : {Shape{1, 1}, Shape{5, 2}, Shape{7, 7}, Shape{6, 33}, Shape{4, 5}})
    for (bool some_ignored : {false, true}) {
      SCOPED_TRACE("N=" + std::to_string(s.N) + " V=" + std::to_string(s.V) +
                   (some_ignored ? " with kNoTarget rows" : ""));
      const int N = s.N, V = s.V;
      std::mt19937 rng(N * 50 + V + some_ignored);
      std::vector<int> targets = random_ids(N, V, rng);
      if (some_ignored)
        for (int n = 1; n < N; n += 3) targets[n] = kNoTarget;
      int count = 0;
      for (int y : targets) count += y != kNoTarget;
      std::vector<double> logits = float_exact(uniform((size_t)N * V, rng, -3, 3));
      std::vector<float> logits_f = to_float(logits);

      std::vector<double> probs(logits.size()), losses(N);
      std::vector<float> probs_f(logits.size(), NAN), losses_f(N, NAN);
      const double mean = ref_cross_entropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
      const LossSum sum = cross_entropy_forward(probs_f.data(), losses_f.data(), logits_f.data(), targets.data(), N, V);
      EXPECT_EQ(sum.count, count);
      EXPECT_NEAR(sum.mean(), mean, kForwardTol * std::max(1.0, mean));
      EXPECT_TRUE(close_to_reference(losses_f, losses, kForwardTol, "losses"));
      EXPECT_TRUE(close_to_reference(probs_f, probs, kForwardTol, "probs"));
      for (int n = 0; n < N; n++)
        if (targets[n] == kNoTarget) {
          EXPECT_EQ(losses_f[n], 0.0f);
        }

      const std::vector<double> seed = float_exact(uniform(logits.size(), rng));
      std::vector<double> dlogits = seed;
      std::vector<float> dlogits_f = to_float(seed);
      ref_cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), count, N, V);
      cross_entropy_backward(dlogits_f.data(), probs_f.data(), targets.data(), sum.count, N, V);
      EXPECT_TRUE(close_to_reference(dlogits_f, dlogits, kBackwardTol, "dlogits"));

      auto loss = [&] {
        return ref_cross_entropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
      };
      EXPECT_TRUE(matches_fd(dlogits, written(dlogits), loss, logits, "dlogits vs FD"));
    }
}

TEST(OpsCrossEntropy, KnownValuesAndLargeLogits) {
  // Uniform logits: every row's loss is ln V.  Mean over the counted rows only.
  const int N = 4, V = 6;
  std::vector<float> logits(N * V, 0.25f), probs(N * V), losses(N);
  std::vector<int> targets = {0, kNoTarget, 5, 2};
  LossSum sum = cross_entropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
  EXPECT_EQ(sum.count, 3);
  EXPECT_NEAR(sum.mean(), std::log(6.0), 1e-6);
  // A row whose target logit leads by 1000: loss ≈ 0; a row whose target trails by 1000: loss ≈ 1000, finite.
  std::vector<float> big = {1000.0f, 0.0f, -5.0f, 0.0f, 1000.0f, 0.0f};
  std::vector<int> big_targets = {0, 0};
  std::vector<double> big_d(big.begin(), big.end()), probs_d(6), losses_d(2);
  std::vector<float> big_probs(6), big_losses(2);
  cross_entropy_forward(big_probs.data(), big_losses.data(), big.data(), big_targets.data(), 2, 3);
  ref_cross_entropy_forward(probs_d.data(), losses_d.data(), big_d.data(), big_targets.data(), 2, 3);
  EXPECT_NEAR(big_losses[0], losses_d[0], 1e-6);
  EXPECT_NEAR(big_losses[1], 1000.0, 1e-3);
  EXPECT_NEAR(big_losses[1], losses_d[1], 1e-3);
}

// Rows with kNoTarget contribute nothing: whatever their logits, the loss, the count and every other row's gradient
// stay the same, and their own gradient is untouched.
TEST(OpsCrossEntropy, IgnoredRowsHaveNoEffect) {
  const int N = 6, V = 9;
  std::mt19937 rng(99);
  std::vector<int> targets = {3, kNoTarget, 0, 8, kNoTarget, 4};
  std::vector<float> logits = to_float(uniform(N * V, rng, -2, 2)), seed = to_float(uniform(N * V, rng));
  auto run = [&](const std::vector<float>& z, std::vector<float>& dz) {
    std::vector<float> probs(N * V), losses(N);
    LossSum sum = cross_entropy_forward(probs.data(), losses.data(), z.data(), targets.data(), N, V);
    dz = seed;
    cross_entropy_backward(dz.data(), probs.data(), targets.data(), sum.count, N, V);
    return sum;
  };
  std::vector<float> dz1, dz2;
  const LossSum a = run(logits, dz1);
  std::vector<float> changed = logits;
  for (int n : {1, 4})
    for (int v = 0; v < V; v++) changed[n * V + v] = 50.0f * (v % 3) - 40.0f;
  const LossSum b = run(changed, dz2);
  EXPECT_EQ(a.count, 4);
  EXPECT_EQ(b.count, 4);
  EXPECT_NEAR(a.mean(), b.mean(), 1e-12 * std::fabs(a.mean()));
  for (int n = 0; n < N; n++)
    for (int v = 0; v < V; v++) {
      EXPECT_EQ(dz1[n * V + v], dz2[n * V + v]) << "row " << n;
      if (targets[n] == kNoTarget) {
        EXPECT_EQ(dz1[n * V + v], 0.0f) << "ignored row " << n << " got a gradient";
      }
    }

  // Every row ignored: loss 0 (by the count-0 convention) and a zero gradient everywhere.
  std::vector<int> none(N, kNoTarget);
  std::vector<float> probs(N * V), losses(N), dz = seed;
  LossSum empty = cross_entropy_forward(probs.data(), losses.data(), logits.data(), none.data(), N, V);
  cross_entropy_backward(dz.data(), probs.data(), none.data(), empty.count, N, V);
  EXPECT_EQ(empty.count, 0);
  EXPECT_EQ(empty.mean(), 0.0);
  EXPECT_EQ(dz, std::vector<float>(N * V, 0.0f));
}
