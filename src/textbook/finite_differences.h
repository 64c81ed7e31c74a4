// Central finite differences: how the textbook checks a backward without deriving it. For each x_i in turn,
//   ∂f/∂x_i ≈ (f(x + h·e_i) − f(x − h·e_i)) / 2h,
// x_i perturbed in place and restored. In double with h = 1e-6 the truncation error is ~h² = 1e-12 and the
// rounding ~1e-16/h = 1e-10 of f's scale. Used by the tests (tests/test_util.h), the tour's gradient check
// (tests/tour/gradcheck.cpp) and the backward of the textbook recurrences (textbook/mamba.h, rwkv.h, deltanet.h),
// through ref_backward_by_differences below, which takes their layers' tensors by their ops' tables
// (base/tensor_slot.h), as bind_by_name binds them.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/tensor_slot.h"

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

// A textbook layer's tensor struct from its op's tensor table: each row's member points at find(name) (the
// reference model's parameters or gradients, found by name); a member without a row stays null.
template <template <typename> class Tensors, typename Ptr, typename Find>
Tensors<Ptr> bind_by_name(const std::vector<TensorSlot<Tensors, Ptr>>& slots, Find find) {
  Tensors<Ptr> t;
  for (const TensorSlot<Tensors, Ptr>& s : slots) t.*s.member = find(s.decl.name);
  return t;
}

// A textbook layer's backward by central differences, for a kind whose textbook derives none (the fast op's
// reverse scan is what the tests hold to it). For the loss Σ dout ⊙ forward(u, w): du = ∂loss/∂u is written, and
// every tensor of the kind's slot table gets ∂loss/∂tensor added to its gradient (the convention of
// src/ops/README.md). `forward(out, x, at)` runs the kind's textbook forward on n floats in and out; the tensors
// are perturbed on copies, so w is never written. Two forwards per input and parameter value: double and tiny
// shapes only (rounding ~1e-10 and truncation ~1e-12 of the loss's scale at h = 1e-6).
template <typename F, template <typename> class Tensors, typename Forward>
void ref_backward_by_differences(F* du, const Tensors<F*>& g, const F* dout, const F* u, const Tensors<const F*>& w,
                                 const std::vector<TensorSlot<Tensors, const F*>>& wslots,
                                 const std::vector<TensorSlot<Tensors, F*>>& gslots, size_t n, Forward forward) {
  std::vector<F> x(u, u + n);
  std::vector<F> out(n);
  Tensors<const F*> at = w;  // the point the differences are taken at: copies of the tensors, perturbed in turn
  auto loss = [&] {
    forward(out.data(), x.data(), at);
    F s = 0;
    for (size_t i = 0; i < n; i++) s += dout[i] * out[i];
    return s;
  };
  const std::vector<F> dx = ref_finite_differences(loss, x.data(), n);
  std::copy(dx.begin(), dx.end(), du);
  for (size_t i = 0; i < wslots.size(); i++) {
    size_t numel = 1;
    for (int64_t e : wslots[i].decl.shape) numel *= (size_t)e;
    std::vector<F> copy(w.*wslots[i].member, w.*wslots[i].member + numel);
    at.*wslots[i].member = copy.data();
    const std::vector<F> dw = ref_finite_differences(loss, copy.data(), numel);
    F* grad = g.*gslots[i].member;
    for (size_t k = 0; k < numel; k++) grad[k] += dw[k];
    at.*wslots[i].member = w.*wslots[i].member;
  }
}
