// Central finite differences: how the textbook checks a backward without deriving it. For each x_i in turn,
//   ∂f/∂x_i ≈ (f(x + h·e_i) − f(x − h·e_i)) / 2h,
// x_i perturbed in place and restored. In double with h = 1e-6 the truncation error is ~h² = 1e-12 and the
// rounding ~1e-16/h = 1e-10 of f's scale. Used by the tests (tests/test_util.h), the tour's gradient check
// (tests/tour/gradcheck.cpp) and the textbook Mamba's and RWKV-7's backward (textbook/mamba.h, textbook/rwkv.h).
#pragma once
#include <cstddef>
#include <vector>

template <typename F, typename Loss>
std::vector<F> ref_finite_differences(Loss&& f, F* x, size_t n, F h = F(1e-6)) {
  std::vector<F> grad(n);
  for (size_t i = 0; i < n; i++) {
    const F saved = x[i];
    x[i] = saved + h;
    const F up = f();
    x[i] = saved - h;
    const F down = f();
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}
