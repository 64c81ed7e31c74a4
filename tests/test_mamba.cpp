// Tests for the Mamba-2 mixer's op layer (src/ops/mamba.*). What every recurrent op satisfies runs here through the
// shared harness (tests/op_harness.h, each check against an independent reference): the fast float forward against
// the textbook's ATTENTION form in double (src/textbook/mamba.h: M_ij written out, no scan) at odd sizes and for
// every variant (K = 0, 1, 3, K > T; non-selective), B > 1; every gradient of the layer (each parameter tensor and
// the input) against central finite differences of the textbook forward; two threads against one and the
// textbook; an arena carved for a larger run; decoding one token at a time against the textbook's rows, a second
// sequence after a reset; the state's size; the hidden attention against the textbook's M; the textbook's backward
// against a five-point derivative. This file gives Mamba's traits for it (the cases, how a test layer is drawn)
// and what is Mamba's own: each part's backward (conv, silu, softplus, the scan, the gated norm) against finite
// differences of its textbook part; the hidden attention against the closed form y_i = Σ_j M_ij x_j + D x_i; the
// initialisation against its stated ranges; the settings' checks and tensor names. At the end, what is the kind's
// own in the model: its tensors, their initialisation and optimizer groups, its settings and its state's size.
//
// Tolerances. Float against double, measured against each tensor's largest magnitude (close_to_reference).
// Forward (the scan's sums of T·N terms, the norm, the step, M): measured ≤ 4e-7 of the scale, so kTol = 1e-5.
// Gradients are float results against double finite differences (h = 1e-6, error ~1e-9): measured ≤ 4.3e-6 of
// the scale (dD and dA_log, sums over B·T·P = 1600 terms in the two-thread case), so kGradTol = 2e-5, while a real
// mistake (a sign, a missing term, an index off by one) is O(1) relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/threads.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "ops/mamba.h"
#include "model_check.h"
#include "op_harness.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/mamba.h"

using namespace testutil;

namespace {

constexpr double kTol = 1e-5;
constexpr double kGradTol = 2e-5;

// The settings of a test layer and its batch: MambaDims::make(C, H, expand, N, K, selective), then B, T.
struct Case {
  int C, H, expand, N, K;
  bool selective;
  int B, T;
  MambaDims dims() const { return MambaDims::make(C, H, expand, N, K, selective); }
  std::string describe() const {
    return "C=" + std::to_string(C) + " H=" + std::to_string(H) + " expand=" + std::to_string(expand) +
           " N=" + std::to_string(N) + " K=" + std::to_string(K) + (selective ? " selective" : " non-selective") +
           " B=" + std::to_string(B) + " T=" + std::to_string(T);
  }
};

// Mamba-2's op and textbook as the harness (tests/op_harness.h) runs them.
struct MambaOp {
  using Case = ::Case;
  using Dims = MambaDims;
  template <typename Ptr>
  using Tensors = MambaTensors<Ptr>;
  using Activations = MambaActivations;
  static constexpr double kTol = ::kTol;
  static constexpr double kGradTol = ::kGradTol;
  static constexpr size_t kTwoThreadSamples = 16;

  // P = 5, N = 3, T = 7 (odd sizes), K = 3, 1, 0, K > T, non-selective with and without the conv, one-channel
  // heads.
  static std::vector<Case> cases() {
    return {
        {5, 2, 2, 3, 3, true, 2, 7}, {5, 2, 2, 3, 1, true, 1, 7},  {5, 2, 2, 3, 0, true, 2, 7},
        {4, 2, 1, 2, 4, true, 2, 2}, {5, 2, 2, 3, 3, false, 2, 7}, {5, 2, 2, 3, 0, false, 1, 6},
        {3, 3, 1, 1, 2, true, 3, 5}, {6, 3, 2, 4, 4, true, 1, 1},
    };
  }
  // worth_threads splits the scan's (batch, head) pairs, the conv's rows and channels and the norm's rows.
  static std::vector<Case> two_thread_cases() { return {Case{32, 4, 2, 16, 4, true, 4, 25}}; }
  static ArenaCase<Case> arena_case() {
    ArenaCase<Case> arena;
    arena.run = Case{5, 2, 2, 3, 3, true, 2, 5};
    arena.carved_B = 3;
    arena.carved_T = 9;
    return arena;
  }
  static Case long_decode_case() { return Case{5, 2, 2, 3, 3, true, 1, 300}; }
  static Case five_point_case() { return Case{5, 2, 2, 3, 3, true, 2, 9}; }
  // Decoding: two sequences at least (the second after a reset of the state the first one left), a few positions
  // past K.
  static Case step_case(const Case& c) {
    Case s = c;
    s.B = std::max(c.B, 2);
    s.T = c.T + 3;
    return s;
  }
  static uint32_t case_seed(const Case& c) { return c.K + 10 * c.N; }

  // Parameters far from the initialisation, so that every term matters: Δ from ~0.1 to ~2, decay rates −a from
  // ~0.4 to ~2.7 (ā from ~0.01 to ~0.96), D and the norm's weight away from 1.
  static std::vector<double> draw_tensor(const TensorDecl& s, const Case&, std::mt19937& rng) {
    TensorRange range(s.name);
    range.set("mamba.conv1d.weight", -0.8, 0.8);
    range.set("mamba.dt_bias", -2.0, 1.0);
    range.set("mamba.A_log", -1.0, 1.0);
    range.set("mamba.D", 0.5, 1.5);
    range.set("mamba.norm.weight", 0.5, 1.5);
    range.set("mamba.B", -1.0, 1.0);
    range.set("mamba.C", -1.0, 1.0);
    return uniform(numel(s), rng, range.lo, range.hi);
  }

  template <typename Ptr>
  static auto tensor_slots(const Dims& d) {
    return mamba_tensor_slots<Ptr>(d);
  }
  static constexpr auto activation_floats = &mamba_activation_floats;
  static constexpr auto activations = &mamba_activations;
  static constexpr auto scratch_floats = &mamba_scratch_floats;
  static constexpr auto forward = &mamba_forward;
  static constexpr auto backward = &mamba_backward;
  static constexpr auto ref_forward = &ref_mamba_forward<double>;
  static constexpr auto ref_backward = &ref_mamba_backward<double>;

  // Decoding: S of every head (H·P·N floats), then the conv's last K − 1 inputs of X channels.
  static constexpr auto state_floats = &mamba_state_floats;
  static size_t state_floats_by_hand(const Dims& d) {
    return (size_t)d.H * d.P * d.N + (size_t)std::max(d.K - 1, 0) * d.conv_channels();
  }
  static void state_reset(float* state, const Dims& d) { mamba_state_reset(mamba_state(state, d), d); }
  static constexpr auto step_scratch_floats = &mamba_step_scratch_floats;
  static void step(float* out, float* state, const float* u, const MambaWeights& w, const Dims& d, float* scratch) {
    mamba_step(out, mamba_state(state, d), u, w, d, scratch);
  }

  static constexpr auto implied_attention = &mamba_hidden_attention;
  static std::vector<double> ref_implied_attention(const double* u, const Tensors<const double*>& w, const Dims& d,
                                                   int B, int T) {
    std::vector<double> M((size_t)B * d.H * T * T);
    ref_mamba_hidden_attention(M.data(), u, w, d, B, T);
    return M;
  }
};

void expect_gradients(const std::vector<GradCheck>& checks) { testutil::expect_gradients(checks, kGradTol); }

// Parameter gradients are added to (+=), input gradients written (=): a second backward on top of the first must
// double every parameter gradient and leave the input gradients as they were.
void expect_accumulates(const std::vector<std::vector<float>>& first_params, const std::vector<float*>& params,
                        const std::vector<std::vector<float>>& first_inputs, const std::vector<float*>& inputs) {
  for (size_t i = 0; i < params.size(); i++) {
    std::vector<double> twice(first_params[i].size());
    for (size_t k = 0; k < twice.size(); k++) twice[k] = 2.0 * first_params[i][k];
    EXPECT_TRUE(close_to_reference(params[i], twice.data(), twice.size(), 1e-6, "parameter gradient += (#" +
                                                                                    std::to_string(i) + ")"));
  }
  for (size_t i = 0; i < inputs.size(); i++)
    EXPECT_TRUE(close_to_reference(inputs[i], to_double(first_inputs[i].data(), first_inputs[i].size()).data(),
                                   first_inputs[i].size(), 1e-6, "input gradient = (#" + std::to_string(i) + ")"));
}

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(OpsMamba, RecurrentOp, MambaOp);

// ---------------------------------------------------------------------------------------------------------------
// The parts, each against finite differences of its textbook part

TEST(OpsMambaParts, CausalConv) {
  for (int K : {0, 1, 3, 5}) {
    SCOPED_TRACE("K=" + std::to_string(K));
    const int B = 2, T = 6, X = 4, stride = X + 3;  // reads and writes 4 columns of 7-wide rows
    std::mt19937 rng(K + 1);
    std::vector<double> inp = float_exact(uniform((size_t)B * T * stride, rng)),
                        w = float_exact(uniform((size_t)X * std::max(K, 1), rng)), b = float_exact(uniform(X, rng)),
                        R = float_exact(uniform((size_t)B * T * X, rng));
    std::vector<double> out(R.size());
    ref_mamba_conv(out.data(), inp.data(), stride, w.data(), b.data(), B, T, X, K);
    std::vector<float> out_f(R.size(), NAN), inp_f = to_float(inp), w_f = to_float(w), b_f = to_float(b);
    mamba_conv_forward(out_f.data(), inp_f.data(), stride, w_f.data(), b_f.data(), B, T, X, K);
    EXPECT_TRUE(close_to_reference(out_f, out, kTol, "conv out"));

    std::vector<float> dinp(inp.size(), 7.0f), dw(w.size(), 0.5f), db(X, 0.5f);  // the gap columns must stay 7
    mamba_conv_backward(dinp.data(), dw.data(), db.data(), to_float(R).data(), inp_f.data(), stride, w_f.data(), B, T,
                        X, K);
    auto loss = [&] {
      ref_mamba_conv(out.data(), inp.data(), stride, w.data(), b.data(), B, T, X, K);
      return dot(out, R);
    };
    std::vector<double> fd = finite_differences(loss, inp.data(), inp.size());
    for (size_t i = 0; i < fd.size(); i++)
      if ((int)(i % stride) >= X) fd[i] = 7.0;  // not a conv input: untouched
    EXPECT_TRUE(close_to_reference(dinp, fd, kGradTol, "conv dinp"));
    if (K > 0) {
      for (float& g : dw) g -= 0.5f;
      for (float& g : db) g -= 0.5f;
      EXPECT_TRUE(close_to_reference(dw, finite_differences(loss, w.data(), w.size()), kGradTol, "conv dw"));
      EXPECT_TRUE(close_to_reference(db, finite_differences(loss, b.data(), b.size()), kGradTol, "conv db"));
    }
  }
}

TEST(OpsMambaParts, Silu) {
  std::vector<double> x = {-30, -9, -4, -1.5, -0.3, 0, 0.2, 1, 2.5, 6, 12, 40};
  const std::vector<float> x_f = to_float(x);
  std::vector<float> y(x.size()), dx(x.size());
  silu_forward(y.data(), x_f.data(), x.size());
  for (size_t i = 0; i < x.size(); i++) EXPECT_NEAR(y[i], ref_silu(x[i]), 1e-6 * std::max(1.0, std::fabs(x[i])));
  std::mt19937 rng(1);
  const std::vector<double> R = float_exact(uniform(x.size(), rng));
  silu_backward(dx.data(), x_f.data(), to_float(R).data(), x.size());
  auto loss = [&] {
    double s = 0;
    for (size_t i = 0; i < x.size(); i++) s += ref_silu(x[i]) * R[i];
    return s;
  };
  EXPECT_TRUE(all_close(to_double(dx.data(), dx.size()), finite_differences(loss, x.data(), x.size()), 1e-5, 1e-7,
                        "silu'"));
}

// softplus on both sides of its threshold and far beyond (where log(1 + eᵛ) overflows in float), relative error.
TEST(OpsMambaParts, SoftplusAndDelta) {
  const std::vector<double> v = {-30, -3, -0.5, 0, 0.7, 5, 12, 19.5, 20.5, 25, 60, 100};
  for (double x : v) {
    const double ref = ref_softplus(x);
    EXPECT_NEAR(softplus((float)x), ref, 1e-6 * ref + 1e-30) << "softplus(" << x << ")";
  }
  // Δ from a strided dt_raw plus the bias, and with no dt_raw (non-selective); dt_raw written, dt_bias added to.
  for (bool selective : {true, false}) {
    SCOPED_TRACE(selective ? "selective" : "non-selective");
    const int R = 4, H = 3, stride = 5;
    std::vector<double> raw(R * stride), bias = {-2.0, 0.5, 3.0};
    for (int r = 0; r < R; r++)
      for (int c = 0; c < stride; c++) raw[r * stride + c] = v[(r * stride + c) % v.size()] - bias[c % H] * 0.5;
    raw = float_exact(raw);
    std::mt19937 rng(2);
    const std::vector<double> W = float_exact(uniform(R * H, rng));
    const double* raw_p = selective ? raw.data() : nullptr;
    std::vector<double> dt(R * H);
    ref_mamba_delta(dt.data(), raw_p, stride, bias.data(), R, H);
    std::vector<float> dt_f(R * H), raw_f = to_float(raw), bias_f = to_float(bias);
    mamba_dt_forward(dt_f.data(), selective ? raw_f.data() : nullptr, stride, bias_f.data(), R, H);
    for (int i = 0; i < R * H; i++) EXPECT_NEAR(dt_f[i], dt[i], 1e-6 * dt[i] + 1e-30) << i;
    std::vector<float> draw(raw.size(), 7.0f), dbias(H, 0.25f);
    mamba_dt_backward(selective ? draw.data() : nullptr, dbias.data(), to_float(W).data(),
                      selective ? raw_f.data() : nullptr, stride, bias_f.data(), R, H);
    auto loss = [&] {
      ref_mamba_delta(dt.data(), raw_p, stride, bias.data(), R, H);
      return dot(dt, W);
    };
    if (selective) {
      std::vector<double> fd = finite_differences(loss, raw.data(), raw.size());
      for (size_t i = 0; i < fd.size(); i++)
        if ((int)(i % stride) >= H) fd[i] = 7.0;
      EXPECT_TRUE(all_close(to_double(draw.data(), draw.size()), fd, 1e-5, 1e-7, "ddt_raw"));
    }
    for (float& g : dbias) g -= 0.25f;
    EXPECT_TRUE(all_close(to_double(dbias.data(), H), finite_differences(loss, bias.data(), H), 1e-5, 1e-6, "ddt_bias"));
  }
}

// The scan alone: y from (xbc, Δ) against the attention form, and its reverse scan against finite differences.
TEST(OpsMambaParts, SelectiveScan) {
  set_threads(1);
  for (const Case& c : MambaOp::cases()) {
    SCOPED_TRACE(c.describe());
    const MambaDims d = c.dims();
    const int B = c.B;
    const int T = c.T;
    const int X = d.conv_channels();
    OpLayer<MambaOp> L(c, 31 + c.K);
    std::mt19937 rng(7 + c.T);
    std::vector<double> xbc = float_exact(uniform((size_t)B * T * X, rng, -1.5, 1.5));
    std::vector<double> dt = float_exact(uniform((size_t)B * T * d.H, rng, 0.05, 1.5));
    const std::vector<double> R = float_exact(uniform((size_t)B * T * d.E, rng));
    std::vector<double> y(R.size());
    auto loss = [&] {
      ref_mamba_scan(y.data(), xbc.data(), dt.data(), L.ref(), d, B, T);
      return dot(y, R);
    };
    loss();
    const std::vector<float> xbc_f = to_float(xbc);
    const std::vector<float> dt_f = to_float(dt);
    std::vector<float> y_f(R.size(), NAN);
    std::vector<float> state((size_t)B * d.E * d.N, NAN);
    mamba_scan_forward(y_f.data(), state.data(), xbc_f.data(), dt_f.data(), L.weights(), d, B, T);
    EXPECT_TRUE(close_to_reference(y_f, y, kTol, "scan y"));

    std::vector<float> dxbc(xbc.size(), NAN);
    std::vector<float> ddt(dt.size(), NAN);
    std::vector<float> scratch(mamba_scan_scratch_floats(d, B, T), NAN);
    for (OpTensor& t : L.tensors) std::fill(t.grad.begin(), t.grad.end(), 0.0f);
    const std::vector<float> R_f = to_float(R);
    auto backward = [&] {
      mamba_scan_backward(dxbc.data(), ddt.data(), L.grads(), R_f.data(), xbc_f.data(), dt_f.data(), L.weights(), d,
                          B, T, scratch.data());
    };
    backward();
    std::vector<GradCheck> checks = {{"dxbc", dxbc, finite_differences(loss, xbc.data(), xbc.size())},
                                     {"dΔ", ddt, finite_differences(loss, dt.data(), dt.size())}};
    std::vector<std::vector<float>> first;
    std::vector<float*> params;
    for (OpTensor& t : L.tensors) {
      if (t.name != "mamba.A_log" && t.name != "mamba.D" && t.name != "mamba.B" && t.name != "mamba.C") continue;
      checks.push_back({"d" + t.name, t.grad, finite_differences(loss, t.v.data(), t.v.size())});
      first.push_back(t.grad);
      params.push_back(t.grad.data());
    }
    expect_gradients(checks);
    const std::vector<float> first_dxbc = dxbc;
    const std::vector<float> first_ddt = ddt;
    backward();
    expect_accumulates(first, params, {first_dxbc, first_ddt}, {dxbc.data(), ddt.data()});
  }
}

TEST(OpsMambaParts, GatedRmsNorm) {
  const int R = 5, E = 7, stride = 10;  // z: 7 columns of 10-wide rows
  std::mt19937 rng(4);
  std::vector<double> y = float_exact(uniform(R * E, rng, -2, 2)), z = float_exact(uniform(R * stride, rng, -4, 4)),
                      w = float_exact(uniform(E, rng, 0.5, 1.5)), W = float_exact(uniform(R * E, rng));
  y[3] = 0;  // a row with a zero entry; and one row tiny, where ε matters
  for (int e = 0; e < E; e++) y[2 * E + e] *= 1e-3;
  std::vector<double> n(R * E);
  auto loss = [&] {
    ref_gated_rmsnorm(n.data(), y.data(), z.data(), stride, w.data(), R, E);
    return dot(n, W);
  };
  loss();
  const std::vector<float> y_f = to_float(y), z_f = to_float(z), w_f = to_float(w);
  std::vector<float> n_f(R * E, NAN), g(R * E, NAN), rstd(R, NAN);
  gated_rmsnorm_forward(n_f.data(), g.data(), rstd.data(), y_f.data(), z_f.data(), stride, w_f.data(), R, E);
  EXPECT_TRUE(close_to_reference(n_f, n, kTol, "norm out"));
  std::vector<float> dy(R * E, NAN), dz(R * stride, 7.0f), dw(E, 0.5f);
  gated_rmsnorm_backward(dy.data(), dz.data(), dw.data(), to_float(W).data(), y_f.data(), z_f.data(), stride, g.data(),
                         rstd.data(), w_f.data(), R, E);
  EXPECT_TRUE(close_to_reference(dy, finite_differences(loss, y.data(), y.size()), kGradTol, "norm dy"));
  std::vector<double> fd = finite_differences(loss, z.data(), z.size());
  for (size_t i = 0; i < fd.size(); i++)
    if ((int)(i % stride) >= E) fd[i] = 7.0;
  EXPECT_TRUE(close_to_reference(dz, fd, kGradTol, "norm dz"));
  for (float& x : dw) x -= 0.5f;
  EXPECT_TRUE(close_to_reference(dw, finite_differences(loss, w.data(), w.size()), kGradTol, "norm dw"));
}

// ---------------------------------------------------------------------------------------------------------------
// The hidden attention, initialisation, settings

TEST(OpsMamba, HiddenAttentionReproducesTheScan) {
  set_threads(1);
  for (const Case& c : MambaOp::cases()) {
    SCOPED_TRACE(c.describe());
    const Forwarded<MambaOp> f(c, 51 + c.K);
    const MambaDims& d = f.d;
    const MambaActivations& a = f.a;
    const int B = c.B;
    const int T = c.T;
    const int H = d.H;
    const int P = d.P;
    const int E = d.E;
    const int X = d.conv_channels();
    std::vector<float> M((size_t)B * H * T * T, NAN);
    mamba_hidden_attention(M.data(), a, f.L.weights(), d, B, T);
    // M against the textbook's M is the harness's ImpliedAttentionMatchesTextbook (tests/op_harness.h). Here the
    // closed form: Σ_j M_ij x_j + D x_i is the scan's y (the forward's own activations), and M is 0 above the
    // diagonal exactly.
    std::vector<double> from_M((size_t)B * T * E);
    for (int b = 0; b < B; b++)
      for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
          for (int j = i + 1; j < T; j++) ASSERT_EQ(M[(((size_t)b * H + h) * T + i) * T + j], 0.0f) << i << "," << j;
          for (int p = 0; p < P; p++) {
            const int ch = h * P + p;
            double s = (double)f.L.weights().D[h] * a.xbc[((size_t)b * T + i) * X + ch];
            for (int j = 0; j <= i; j++)
              s += (double)M[(((size_t)b * H + h) * T + i) * T + j] * a.xbc[((size_t)b * T + j) * X + ch];
            from_M[((size_t)b * T + i) * E + ch] = s;
          }
        }
    EXPECT_TRUE(close_to_reference(a.y, from_M.data(), from_M.size(), kTol, "y vs Σ M x + D x"));
  }
}

TEST(OpsMamba, InitialisationRanges) {
  Rng rng(7);
  const MambaDims d = MambaDims::make(512, 512, 2, 4096, 4, false);  // many heads: many draws
  std::vector<float> dt_bias(d.H), A_log(d.H), conv_w((size_t)d.conv_channels() * d.K), conv_b(d.conv_channels()),
      Bc(d.N);
  mamba_init_dt_bias(dt_bias.data(), dt_bias.size(), rng);
  mamba_init_A_log(A_log.data(), A_log.size(), rng);
  mamba_init_conv(conv_w.data(), conv_w.size(), d.K, rng);
  mamba_init_conv(conv_b.data(), conv_b.size(), d.K, rng);
  mamba_init_state_const(Bc.data(), Bc.size(), rng);  // D and norm.weight are Init::Ones (MambaModel.TensorsNames…)
  double lo = 1, hi = 0;
  for (float b : dt_bias) {
    const double dt = ref_softplus((double)b);
    EXPECT_GE(dt, 1e-3 * (1 - 1e-5));
    EXPECT_LE(dt, 1e-1 * (1 + 1e-5));
    lo = std::min(lo, dt), hi = std::max(hi, dt);
  }
  EXPECT_LT(lo, 1.2e-3);  // spread over the whole range, log-uniformly: the median near 1e-2
  EXPECT_GT(hi, 0.08);
  std::vector<double> sorted(dt_bias.size());
  for (size_t i = 0; i < sorted.size(); i++) sorted[i] = std::log10(ref_softplus((double)dt_bias[i]));
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NEAR(sorted[sorted.size() / 2], -2.0, 0.15);
  for (float a : A_log) {
    const double rate = -std::exp((double)a);
    EXPECT_GE(rate, -16.0);
    EXPECT_LE(rate, -1.0);
  }
  for (float x : conv_w) EXPECT_LE(std::fabs(x), 0.5f);  // 1/√K = 1/2
  for (float x : conv_b) EXPECT_LE(std::fabs(x), 0.5f);
  double sq = 0;
  for (float x : Bc) sq += (double)x * x;
  EXPECT_NEAR(std::sqrt(sq / d.N), std::pow(d.N, -0.25), 0.1 * std::pow(d.N, -0.25));
}

TEST(OpsMamba, SettingsAreCheckedAndTensorsNamed) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { MambaDims::make(8, 2, 0, 16, 4, true); }).find("--ssm-expand"), std::string::npos);
  EXPECT_NE(message([] { MambaDims::make(8, 2, 2, 0, 4, true); }).find("--ssm-state"), std::string::npos);
  EXPECT_NE(message([] { MambaDims::make(8, 2, 2, 16, -1, true); }).find("--ssm-conv"), std::string::npos);
  EXPECT_NE(message([] { MambaDims::make(5, 4, 1, 16, 4, true); }).find("ssm_expand"), std::string::npos);
  const MambaDims d = MambaDims::make(8, 2, 2, 16, 4, true);
  EXPECT_EQ(d.E, 16);
  EXPECT_EQ(d.P, 8);
  EXPECT_EQ(d.in_cols(), 2 * 16 + 2 * 16 + 2);
  EXPECT_EQ(d.conv_channels(), 16 + 32);
  std::vector<std::string> names;
  for (const auto& t : mamba_tensor_slots<const float*>(d)) names.push_back(t.decl.name);
  EXPECT_EQ(names, (std::vector<std::string>{"mamba.in_proj.weight", "mamba.conv1d.weight", "mamba.conv1d.bias",
                                             "mamba.dt_bias", "mamba.A_log", "mamba.D", "mamba.norm.weight",
                                             "mamba.out_proj.weight"}));
  names.clear();
  const MambaDims s4 = MambaDims::make(8, 2, 2, 16, 0, false);
  EXPECT_EQ(s4.in_cols(), 32);
  for (const auto& t : mamba_tensor_slots<const float*>(s4)) names.push_back(t.decl.name);
  EXPECT_EQ(names, (std::vector<std::string>{"mamba.in_proj.weight", "mamba.dt_bias", "mamba.A_log", "mamba.D",
                                             "mamba.B", "mamba.C", "mamba.norm.weight", "mamba.out_proj.weight"}));
}

// ---------------------------------------------------------------------------------------------------------------
// The kind in the model: what is Mamba's own (tensor names, initialisation, optimizer groups, settings, metadata,
// the state's size by hand). What every kind satisfies (the model against the textbook, decoding, masks, the
// checkpoint round trip, the lab, the programs) is the conformance suite's, tests/test_every_kind.cpp.

namespace {
// `n_layer` mamba layers with these settings.
ModelConfig mamba_model(int n_layer, int n_head, int n_embd, int state, int expand, int conv, int selective, int block) {
  ModelConfig c;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_embd = n_embd;
  c.block_size = block;
  c.vocab_size = 11;
  c.mixer = "mamba";
  MambaSettings& m = c.mixer_settings.get<MambaSettings>();
  m.ssm_state = state;
  m.ssm_expand = expand;
  m.ssm_conv = conv;
  m.ssm_selective = selective;
  return c;
}
}  // namespace

TEST(MambaModel, TensorsNamesShapesInitAndOptimizerGroups) {
  ModelConfig c = mamba_model(2, 4, 32, 16, 2, 4, 1, 16);
  GPT model(c);
  model.init_weights(7);
  const int C = 32, E = 64, N = 16, H = 4, K = 4;
  const std::vector<ExpectedTensor> expected = {
      {"h.1.mamba.in_proj.weight", {C, 2 * E + 2 * N + H}, true, true},
      {"h.1.mamba.conv1d.weight", {E + 2 * N, K}, false, false},
      {"h.1.mamba.conv1d.bias", {E + 2 * N}, false, false},
      {"h.1.mamba.dt_bias", {H}, false, false},
      {"h.1.mamba.A_log", {H}, false, false},
      {"h.1.mamba.D", {H}, false, false},
      {"h.1.mamba.norm.weight", {E}, false, false},
      {"h.1.mamba.out_proj.weight", {E, C}, true, true},
  };
  expect_tensor_rows(model, "h.1.mamba.", expected);
  auto values = [&](const std::string& name) { return tensor_values(model, name); };
  auto std_dev = [](const std::vector<float>& v) {
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += (double)x * x;
    return std::sqrt(s2 / v.size() - (s / v.size()) * (s / v.size()));
  };
  for (float b : values("h.1.mamba.dt_bias")) {
    const double dt = std::log1p(std::exp((double)b));  // softplus
    EXPECT_GE(dt, 1e-3 * (1 - 1e-5));
    EXPECT_LE(dt, 1e-1 * (1 + 1e-5));
  }
  for (float a : values("h.1.mamba.A_log")) EXPECT_TRUE(std::exp(a) >= 1 && std::exp(a) <= 16) << a;
  for (float d : values("h.1.mamba.D")) EXPECT_EQ(d, 1.0f);
  for (float w : values("h.1.mamba.norm.weight")) EXPECT_EQ(w, 1.0f);
  for (const char* conv : {"h.1.mamba.conv1d.weight", "h.1.mamba.conv1d.bias"}) {
    const std::vector<float> v = values(conv);
    for (float w : v) EXPECT_LE(std::fabs(w), 1.0f / std::sqrt((float)K)) << conv;
    EXPECT_NEAR(std_dev(v), 0.5 / std::sqrt(3.0), 0.1) << conv;  // U(−½, ½) for K = 4
  }
  EXPECT_NEAR(std_dev(values("h.1.mamba.in_proj.weight")), 0.02, 0.002);
  EXPECT_NEAR(std_dev(values("h.1.mamba.out_proj.weight")), 0.02 / std::sqrt(2.0 * 2), 0.001);

  // Non-selective, no conv: in_proj has only z | x, the constants B and C appear, no conv tensors.
  c.mixer_settings.get<MambaSettings>().ssm_selective = 0;
  c.mixer_settings.get<MambaSettings>().ssm_conv = 0;
  GPT lti(c);
  lti.init_weights(7);
  std::vector<std::string> names;
  for (const TensorSpec& t : lti.table())
    if (t.name.rfind("h.1.mamba.", 0) == 0) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"h.1.mamba.in_proj.weight", "h.1.mamba.dt_bias", "h.1.mamba.A_log",
                                             "h.1.mamba.D", "h.1.mamba.B", "h.1.mamba.C", "h.1.mamba.norm.weight",
                                             "h.1.mamba.out_proj.weight"}));
  for (const TensorSpec& t : lti.table()) {
    if (t.name == "h.1.mamba.in_proj.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{C, 2 * E}));
    }
  }
}

// The state of a mamba layer, per layer, counted by hand from the formula H·P·N + (K−1)·(E + 2N) (E without the
// 2N when not selective; no conv rows when K = 0), whatever block_size is: the state columns of docs/mamba.md's
// tables (make recall-mamba, make bench-mixers).
TEST(MambaModel, StateMatchesAHandCountWhateverTheContext) {
  auto state = [](int C, int NH, int block, int N, int K, int selective) {
    GPT model(mamba_model(1, NH, C, N, 2, K, selective, block));
    return model.mixer(0).state_floats(model.masks()[0]);
  };
  for (int block : {23, 256}) {
    EXPECT_EQ(state(64, 1, block, 28, 4, 1), 4136u);  // 128·28 + 3·(128 + 56)
    EXPECT_EQ(state(64, 1, block, 29, 4, 0), 4096u);  // 128·29 + 3·128
    EXPECT_EQ(state(64, 1, block, 32, 0, 1), 4096u);  // 128·32, no conv
    EXPECT_EQ(state(32, 1, block, 12, 4, 1), 1032u);  // 64·12 + 3·(64 + 24): width 32
    EXPECT_EQ(state(128, 4, block, 16, 4, 1), 4960u);  // the tiny model's shape: 4·64·16 + 3·(256 + 32)
  }
}

TEST(MambaModel, SettingsAreCheckedNamingTheirFlags) {
  ModelConfig c = mamba_model(2, 2, 8, 3, 2, 4, 1, 8);
  EXPECT_NO_THROW(validate(c));
  auto expect_refused = [&](ModelConfig bad, const std::string& flag) {
    try {
      validate(bad);
      ADD_FAILURE() << "accepted a config that " << flag << " should refuse";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  ModelConfig bad = c;
  auto ssm = [](ModelConfig& config) -> MambaSettings& { return config.mixer_settings.get<MambaSettings>(); };
  ssm(bad).ssm_state = 0;
  expect_refused(bad, "--ssm-state");
  bad = c;
  ssm(bad).ssm_expand = 0;
  expect_refused(bad, "--ssm-expand");
  bad = c;
  ssm(bad).ssm_conv = -1;
  expect_refused(bad, "--ssm-conv");
  bad = c;
  ssm(bad).ssm_selective = 2;
  expect_refused(bad, "--ssm-selective");
  bad = c;
  bad.attn_scale = "inv";
  expect_refused(bad, "--attn-scale");  // no softmax logits in a mamba model
  EXPECT_NE(describe(c).find("mixer mamba (ssm state 3, expand 2, conv 4, selective)"), std::string::npos)
      << describe(c);
}

// The metadata records the ssm settings; they load back. A checkpoint of a model without mamba layers stores none
// of them, and loading it does not call them missing.
TEST(MambaModel, SettingsInTheMetadata) {
  progutil::TempDir dir;
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  ModelConfig c = mamba_model(2, 2, 8, 3, 2, 3, 0, 8);
  c.vocab_size = tok.size();
  GPT model(c);
  model.init_weights(4);
  const std::string path = dir / "m.safetensors";
  save_checkpoint(path, model, tok, nullptr);
  const auto meta = read_safetensors(path).metadata;
  EXPECT_EQ(meta.at("ssm_state"), "3");
  EXPECT_EQ(meta.at("ssm_expand"), "2");
  EXPECT_EQ(meta.at("ssm_conv"), "3");
  EXPECT_EQ(meta.at("ssm_selective"), "0");
  Checkpoint loaded = load_checkpoint(path);
  EXPECT_TRUE(loaded.defaulted_settings.empty());
  EXPECT_EQ(loaded.model->config.mixer_settings.get<MambaSettings>().ssm_selective, 0);
  // The committed fixture, a softmax model older than the kind: no ssm key, none called missing, the defaults.
  Checkpoint old = load_checkpoint(progutil::source_root() + "/tests/fixtures/ckpt_5b9387c.safetensors");
  for (const char* key : {"ssm_state", "ssm_expand", "ssm_conv", "ssm_selective"})
    EXPECT_EQ(std::find(old.defaulted_settings.begin(), old.defaulted_settings.end(), key),
              old.defaulted_settings.end()) << key;
  EXPECT_EQ(old.model->config.mixer_settings.get<MambaSettings>().ssm_state, 16);
}
