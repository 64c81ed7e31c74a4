// The scaffolding the mixer ops' tests share (tests/op_harness.h and the kinds' own tests): a test layer's tensors
// in double and in float with gradient buffers, drawn from a kind's traits and bound to the op's tensor struct (its
// Tensors<Ptr> of one pointer per tensor, through the op's slot table), a case's input u and upstream gradient R
// (the loss is Σ out ⊙ R), and the gradients' comparison with finite differences.
#pragma once
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/tensor_slot.h"
#include "test_util.h"

namespace testutil {

// One tensor of a test layer: its values in double (rounded to float, so both sides start from the same numbers),
// their float copy, and a float gradient buffer.
struct OpTensor {
  std::string name;
  std::vector<double> v;
  std::vector<float> f;
  std::vector<float> grad;
  OpTensor(std::string tensor_name, const std::vector<double>& values)
      : name(std::move(tensor_name)), v(float_exact(values)), f(to_float(v)), grad(v.size(), 0.0f) {}
};

// The number of floats of a tensor of this shape.
inline size_t numel(const TensorDecl& decl) {
  size_t n = 1;
  for (int64_t k : decl.shape) n *= (size_t)k;
  return n;
}

// The range a test layer draws one tensor from, U(lo, hi): U(−0.6, 0.6) unless the kind names the tensor, one
// `set` per line (its decays, rates and gains drawn across their meaningful ranges).
struct TensorRange {
  std::string tensor;
  double lo = -0.6;
  double hi = 0.6;
  explicit TensorRange(std::string name) : tensor(std::move(name)) {}
  void set(const std::string& name, double from, double to) {
    if (name != tensor) return;
    lo = from;
    hi = to;
  }
};

// A test layer of a mixer op: its tensors in the order of `Op::tensor_slots` (the op's table, base/tensor_slot.h,
// each row naming the member of Op::Tensors<Ptr> it fills), drawn by `Op::draw_tensor` for a case from `seed`, and
// bound to the op's tensor struct in double (the textbook's), in float (the fast op's) and as float gradients.
template <typename Op>
struct OpLayer {
  typename Op::Dims d;
  std::vector<OpTensor> tensors;

  OpLayer(const typename Op::Case& c, uint32_t seed) : d(c.dims()) {
    std::mt19937 rng(seed);
    for (const auto& slot : Op::template tensor_slots<const float*>(d))
      tensors.emplace_back(slot.decl.name, Op::draw_tensor(slot.decl, c, rng));
  }
  // The tensor struct whose i-th slot's member is get(i).
  template <typename Ptr, typename Get>
  typename Op::template Tensors<Ptr> bind(Get get) const {
    typename Op::template Tensors<Ptr> m;
    const auto slots = Op::template tensor_slots<Ptr>(d);
    for (size_t i = 0; i < tensors.size(); i++) m.*(slots[i].member) = get(i);
    return m;
  }
  typename Op::template Tensors<const double*> ref() const {
    return bind<const double*>([this](size_t i) { return tensors[i].v.data(); });
  }
  typename Op::template Tensors<const float*> weights() const {
    return bind<const float*>([this](size_t i) { return tensors[i].f.data(); });
  }
  typename Op::template Tensors<float*> grads() {
    return bind<float*>([this](size_t i) { return tensors[i].grad.data(); });
  }
};

// The input u and the upstream gradient R of `n` values each, drawn uniform from `seed` and rounded to float, and
// their float copies.
struct OpInputs {
  std::vector<double> u;
  std::vector<double> R;
  std::vector<float> u_f;
  std::vector<float> R_f;
  OpInputs(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    u = float_exact(uniform(n, rng));
    R = float_exact(uniform(n, rng));
    u_f = to_float(u);
    R_f = to_float(R);
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
