// The textbook's Muon (optim/muon.h): its Newton–Schulz iteration and one step, in plain loops, templated on the
// float type (the tests use double). Compiled only into the tests (tests/test_optimizer.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

// ---- Muon's step for one linear weight (optim/muon.h). u, out, theta, buf, grad (rows, cols), stored [fan_in, fan_out].
// NS5: X = U/(‖U‖_F + 1e-7), transposed when rows > cols; 5 times A = X·Xᵀ, X ← a·X + (b·A + c·A·A)·X; transposed back.
template <typename F>
void ref_newton_schulz5(F* out, const F* u, int rows, int cols) {
  const F a = F(3.4445), b = F(-4.7750), c = F(2.0315);
  const bool tall = rows > cols;
  const int n = tall ? cols : rows, m = tall ? rows : cols;  // X is n × m, n ≤ m
  F norm = 0;
  for (int i = 0; i < rows * cols; i++) norm += u[i] * u[i];
  norm = std::sqrt(norm);
  std::vector<F> X(n * m), A(n * n), B(n * n), next(n * m);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) X[i * m + j] = (tall ? u[j * cols + i] : u[i * cols + j]) / (norm + F(1e-7));
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < n; i++)  // A[i,j] = Σ_k X[i,k]·X[j,k]
      for (int j = 0; j < n; j++) {
        F s = 0;
        for (int k = 0; k < m; k++) s += X[i * m + k] * X[j * m + k];
        A[i * n + j] = s;
      }
    for (int i = 0; i < n; i++)  // B[i,j] = b·A[i,j] + c·Σ_k A[i,k]·A[k,j]
      for (int j = 0; j < n; j++) {
        F s = 0;
        for (int k = 0; k < n; k++) s += A[i * n + k] * A[k * n + j];
        B[i * n + j] = b * A[i * n + j] + c * s;
      }
    for (int i = 0; i < n; i++)  // next[i,j] = a·X[i,j] + Σ_k B[i,k]·X[k,j]
      for (int j = 0; j < m; j++) {
        F s = 0;
        for (int k = 0; k < n; k++) s += B[i * n + k] * X[k * m + j];
        next[i * m + j] = a * X[i * m + j] + s;
      }
    X = next;
  }
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) out[i * cols + j] = tall ? X[j * m + i] : X[i * m + j];
}

template <typename F>
void ref_muon_step(F* theta, F* buf, const F* grad, int rows, int cols, F lr, F momentum, F weight_decay) {
  // B ← μ·B + G;   U = G + μ·B;   O = NS5(U);   θ ← θ − lr·λ·θ − lr·√max(1, cols/rows)·O
  std::vector<F> U(rows * cols), O(rows * cols);
  for (int i = 0; i < rows * cols; i++) {
    buf[i] = momentum * buf[i] + grad[i];
    U[i] = grad[i] + momentum * buf[i];
  }
  ref_newton_schulz5(O.data(), U.data(), rows, cols);
  const F scale = std::sqrt(std::max(F(1), F(cols) / F(rows)));
  for (int i = 0; i < rows * cols; i++) theta[i] = theta[i] - lr * weight_decay * theta[i] - lr * scale * O[i];
}

