// Helpers shared by test_ops.cpp and test_model.cpp: seeded random data, float ↔ double copies, closeness checks
// that report the worst element, and central finite differences.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/span.h"
#include "model/mixer_lab.h"
#include "model/model.h"
#include "model/params.h"
#include "ops/cross_entropy.h"
#include "ops/mask.h"
#include "textbook/finite_differences.h"

namespace testutil {

// The shape of an attention op test: batch, length, width, heads.
struct AttentionShape {
  int B, T, C, NH;
};

// Every mask kind, including ones that degenerate at this T (prefix:0 = causal, prefix:T = bidirectional,
// window:1 = only itself, window:T+5 = causal). Shared by the softmax and the linear attention tests.
inline std::vector<AttentionMask> all_masks(int T) {
  std::vector<AttentionMask> masks;
  for (std::string m : std::vector<std::string>{"causal", "bidirectional", "prefix:0", "prefix:" + std::to_string(T),
                                                "prefix:3", "window:1", "window:3", "window:" + std::to_string(T + 5)})
    masks.push_back(AttentionMask::parse(m));
  return masks;
}

inline std::string describe(const AttentionShape& s, const AttentionMask& m) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
         " NH=" + std::to_string(s.NH) + " mask=" + m.to_string();
}

// n values uniform in [lo, hi), from a seeded generator so every run sees the same data.
inline std::vector<double> uniform(size_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// Rounds to float and back, so the float and the double side of a comparison start from the same numbers.
inline std::vector<double> float_exact(std::vector<double> v) {
  for (double& x : v) x = (double)(float)x;
  return v;
}

inline std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }
inline std::vector<double> to_double(const float* p, size_t n) { return std::vector<double>(p, p + n); }
// Layer l's q|k|v rows (B, T, 3C) of the model's last forward, for attention-family mixers.
inline const float* layer_qkv(const GPT& model, int l) { return model.mixer(l).lab().qkv(model.mixer_pass(l).saved); }
// Layer l's mixer weights by slot: W_qkv (C, 3C) and W_proj (C, C) of an attention-family layer, writable.
inline float* qkv_weight(GPT& model, int l) { return const_cast<float*>(model.mixer(l).lab().qkv_weights(model.params().h[l].mixer).qkv); }
inline float* proj_weight(GPT& model, int l) { return const_cast<float*>(model.mixer(l).lab().qkv_weights(model.params().h[l].mixer).proj); }
inline std::vector<double> to_double(Span<const float> v) { return to_double(v.data(), v.size()); }

inline double max_abs(const double* p, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = std::max(m, std::fabs(p[i]));
  return m;
}

// Fast (float) result against the double reference: every |fast − ref| ≤ rtol · scale, where scale is max|ref| by
// default, i.e. the error measured against the tensor's own scale (float rounding in a sum of k terms grows with the
// terms' size, not with how far the sum happened to cancel). A caller whose result cancels much larger terms passes
// their size as `scale`. Reports the worst element.
inline ::testing::AssertionResult close_to_reference(const float* fast, const double* ref, size_t n, double rtol,
                                                     const std::string& what, double scale = 0) {
  scale = std::max({scale, max_abs(ref, n), 1e-30});
  double worst = -1;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    const double err = std::fabs((double)fast[i] - ref[i]);
    if (!(err <= worst)) worst = err, at = i;  // !(≤) so a NaN becomes the worst
  }
  if (n == 0 || worst <= rtol * scale) return ::testing::AssertionSuccess();
  std::ostringstream s;
  s.precision(9);
  s << what << ": element " << at << " fast " << fast[at] << " reference " << ref[at] << " |diff| " << worst << " > "
    << rtol << " × scale " << scale << " (relative " << worst / scale << ")";
  return ::testing::AssertionFailure() << s.str();
}
inline ::testing::AssertionResult close_to_reference(const std::vector<float>& fast, const std::vector<double>& ref,
                                                     double rtol, const std::string& what, double scale = 0) {
  if (fast.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": sizes " << fast.size() << " vs " << ref.size();
  return close_to_reference(fast.data(), ref.data(), ref.size(), rtol, what, scale);
}

// Two double results (analytic vs numeric): every |a − b| ≤ rtol · |b| + atol. Reports the worst element.
inline ::testing::AssertionResult all_close(const std::vector<double>& a, const std::vector<double>& b, double rtol,
                                            double atol, const std::string& what) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << what << ": sizes " << a.size() << " vs " << b.size();
  double worst_excess = -INFINITY;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); i++) {
    const double excess = std::fabs(a[i] - b[i]) - (rtol * std::fabs(b[i]) + atol);
    if (!(excess <= worst_excess)) worst_excess = excess, at = i;
  }
  if (a.empty() || worst_excess <= 0) return ::testing::AssertionSuccess();
  std::ostringstream s;
  s.precision(12);
  s << what << ": element " << at << " analytic " << a[at] << " numeric " << b[at] << " |diff| "
    << std::fabs(a[at] - b[at]) << " > " << rtol << "·|numeric| + " << atol;
  return ::testing::AssertionFailure() << s.str();
}

// Central finite differences of f with respect to x[0..n): (f(x + h·e_i) − f(x − h·e_i)) / 2h (the textbook's).
inline std::vector<double> finite_differences(const std::function<double()>& f, double* x, size_t n, double h = 1e-6) {
  return ref_finite_differences(f, x, n, h);
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

inline std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); i++) d[i] = a[i] - b[i];
  return d;
}

// Parameters far from the initialisation (non-zero biases, LayerNorm weights ≠ 1, weights large enough to make
// attention peaked), so that every term of every formula matters. Rounded to float, so both models hold the same.
inline std::vector<double> random_params(const ModelConfig& config, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const std::vector<TensorSpec> table = gpt_tensor_table(config);
  std::vector<double> p(total_floats(table));
  for (const TensorSpec& t : table) {
    const bool ln_weight = t.name.find("ln_") != std::string::npos && t.name.find(".weight") != std::string::npos;
    for (size_t i = 0; i < t.numel; i++)
      p[t.offset + i] = (double)(float)(ln_weight ? 1.0 + 0.3 * normal(rng) : 0.3 * normal(rng));
  }
  return p;
}

// n token ids drawn uniformly from [0, V).
inline std::vector<int> random_ids(int n, int V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, V - 1);
  std::vector<int> ids(n);
  for (int& x : ids) x = id(rng);
  return ids;
}

// B sequences of T tokens; targets are left out unevenly (row b keeps b+2 of them, or fewer), so that slices of the
// batch have different numbers of terms in their mean losses (a plain average of their gradients would be wrong).
inline void uneven_batch(int B, int T, int V, uint64_t seed, std::vector<int>& x, std::vector<int>& y) {
  Rng rng(seed);
  x.resize((size_t)B * T);
  y.resize((size_t)B * T);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      x[(size_t)b * T + t] = rng.below(V);
      y[(size_t)b * T + t] = t < b + 2 ? rng.below(V) : kNoTarget;
    }
}

// Plain Adam written out in the tests, independent of src/optim/adamw.cpp, for "the model can learn" checks.
struct TestAdam {
  std::vector<float> m, v;
  int step = 0;
  void update(GPT& model, float lr) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    if (m.empty()) m.assign(model.num_params(), 0.0f), v.assign(model.num_params(), 0.0f);
    step++;
    const float c1 = 1.0f - std::pow(b1, (float)step), c2 = 1.0f - std::pow(b2, (float)step);
    for (size_t i = 0; i < model.num_params(); i++) {
      const float g = model.grads_memory()[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      model.params_memory()[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
  }
};

}  // namespace testutil
