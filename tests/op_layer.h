// The scaffolding the mixer ops' tests share (test_mamba.cpp, test_rwkv.cpp): a test layer's tensors in double
// and in float with gradient buffers, bound to the op's tensor struct (its Tensors<Ptr> of one pointer per
// tensor), a case's input u and upstream gradient R (the loss is Σ out ⊙ R), and the gradients' comparison.
#pragma once
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace testutil {

// One tensor of a test layer: its values in double (rounded to float, so both sides start from the same numbers),
// their float copy, and a float gradient buffer.
struct OpTensor {
  std::string name;
  std::vector<double> v;
  std::vector<float> f, grad;
  OpTensor(std::string tensor_name, const std::vector<double>& values)
      : name(std::move(tensor_name)), v(float_exact(values)), f(to_float(v)), grad(v.size(), 0.0f) {}
};

// A layer's tensors, in the order `Derived::slot<Ptr>(i)` gives the member of Tensors<Ptr> that tensors[i] fills.
template <template <typename> class Tensors, typename Derived>
struct OpLayer {
  std::vector<OpTensor> tensors;

  template <typename Ptr, typename Get>
  Tensors<Ptr> bind(Get get) {
    Tensors<Ptr> m;
    for (size_t i = 0; i < tensors.size(); i++)
      m.*(static_cast<const Derived&>(*this).template slot<Ptr>(i)) = get(tensors[i]);
    return m;
  }
  Tensors<const double*> ref() {
    return bind<const double*>([](OpTensor& t) { return t.v.data(); });
  }
  Tensors<const float*> weights() {
    return bind<const float*>([](OpTensor& t) { return t.f.data(); });
  }
  Tensors<float*> grads() {
    return bind<float*>([](OpTensor& t) { return t.grad.data(); });
  }
};

// The input u and the upstream gradient R of `n` values each, drawn uniform from `seed` and rounded to float, and
// their float copies.
struct OpInputs {
  std::vector<double> u, R;
  std::vector<float> u_f, R_f;
  OpInputs(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    u = float_exact(uniform(n, rng)), R = float_exact(uniform(n, rng));
    u_f = to_float(u), R_f = to_float(R);
  }
};

// A fast gradient and its finite differences.
struct GradCheck {
  std::string what;
  std::vector<float> fast;
  std::vector<double> fd;
};

// Each gradient within `tol` of max(its own largest magnitude, 1e-2 × the largest of all of them): a parameter
// summed over rows and heads cancels terms much larger than itself, and float rounding follows the terms. A wrong
// formula is still O(1) of its own scale.
inline void expect_gradients(const std::vector<GradCheck>& checks, double tol) {
  double largest = 0;
  for (const GradCheck& c : checks) largest = std::max(largest, max_abs(c.fd.data(), c.fd.size()));
  for (const GradCheck& c : checks) EXPECT_TRUE(close_to_reference(c.fast, c.fd, tol, c.what, 1e-2 * largest));
}

// `fast` against finite differences of `loss` with respect to `count` spread-out entries of x (ending at the last),
// for sizes where all of them would take seconds.
template <typename Loss>
GradCheck sampled_check(const std::string& what, const std::vector<float>& fast, std::vector<double>& x, Loss loss,
                        size_t count) {
  GradCheck check{what, {}, {}};
  const size_t step = std::max<size_t>(1, x.size() / count);
  for (size_t i = (x.size() - 1) % step; i < x.size(); i += step) {
    check.fast.push_back(fast[i]);
    check.fd.push_back(finite_differences(loss, x.data() + i, 1)[0]);
  }
  return check;
}

// The input's gradient du and every tensor's of `tensors`, each sampled so (GradCheck's "du", "d<name>").
template <typename Loss>
std::vector<GradCheck> sampled_checks(const std::vector<float>& du, std::vector<double>& u,
                                      std::vector<OpTensor>& tensors, Loss loss, size_t count) {
  std::vector<GradCheck> checks = {sampled_check("du", du, u, loss, count)};
  for (OpTensor& t : tensors) checks.push_back(sampled_check("d" + t.name, t.grad, t.v, loss, count));
  return checks;
}

}  // namespace testutil
