#include "optim/muon.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/blas.h"
#include "model/model.h"

bool muon_updates(const TensorSpec& tensor) { return tensor.matrix; }

// ---- NS5 ---------------------------------------------------------------------------------------------------------
// In phases (muon.h): V = U/(‖U‖_F + 1e-7) stays in U's layout (X = V, or Vᵀ when U is tall), so no transposes.
// The scratch holds V and the next V (rows × cols each), then A, p, p·A, R and a spare (n × n each).

namespace {

// The rounds of each phase. A phase of k rounds costs 1.5·n²·m + (3.5·k − 3)·n³ multiply-adds (forming A and
// applying R; per round p, and between rounds p·A·p and R's product), so fewer phases are cheaper exactly when
// m > 2n. At most 3 rounds a phase: A holds σ² to float's absolute precision, so the σ that are small against ‖X‖
// are resolved the worse the longer A goes round without being formed afresh. Measured against the double
// textbook on a 128 × 128 matrix whose singular values spread over three decades (the worst case: a square
// matrix's smallest σ are near 0): rounds one at a time err by 6e-7, phases 3 + 2 by 2e-6, 2 + 3 by 1e-5, 1 + 4
// by 7e-5, one phase of 5 by 1e-4. On 128 × 384 and 128 × 512, 3 + 2 errs by 2e-6 against one at a time's 1e-6.
std::vector<int> phases(int n, int m) {
  if (m > 2 * n) return {3, 2};
  return {1, 1, 1, 1, 1};
}

// NS5's multiply-adds on a rows × cols matrix, by the count above: what orders the step's matrices.
double multiply_adds(int rows, int cols) {
  const double n = std::min(rows, cols);
  const double m = std::max(rows, cols);
  double total = 0;
  for (int k : phases((int)n, (int)m)) total += 1.5 * n * n * m + (3.5 * k - 3) * n * n * n;
  return total;
}

// ssyrk writes the upper triangle; the products after it read M whole. In tiles, so that the column each row is
// copied from stays in cache.
void mirror_upper(float* M, int n) {
  const int tile = 16;
  for (int i0 = 0; i0 < n; i0 += tile)
    for (int j0 = 0; j0 <= i0; j0 += tile)
      for (int i = i0; i < std::min(i0 + tile, n); i++)
        for (int j = j0; j < std::min(j0 + tile, i); j++) M[(size_t)i * n + j] = M[(size_t)j * n + i];
}

// ‖u‖², in double as global_norm does, in eight running sums so that no addition waits on another.
double squared_norm(const float* u, size_t count) {
  double sums[8] = {};
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (int k = 0; k < 8; k++) sums[k] += (double)u[i + k] * u[i + k];
  for (; i < count; i++) sums[0] += (double)u[i] * u[i];
  double sum = 0;
  for (double s : sums) sum += s;
  return sum;
}

}  // namespace

size_t newton_schulz5_scratch(int rows, int cols) {
  const size_t n = std::min(rows, cols);
  return 2 * (size_t)rows * cols + 5 * n * n;
}

void newton_schulz5(float* out, const float* u, int rows, int cols, float* scratch) {
  const float a = 3.4445f;
  const float b = -4.7750f;
  const float c = 2.0315f;
  const bool tall = rows > cols;
  const int n = tall ? cols : rows;
  const int m = tall ? rows : cols;
  const size_t nm = (size_t)n * m;
  const size_t nn = (size_t)n * n;
  float* V = scratch;
  float* next = V + nm;
  float* A = next + nm;
  float* p = A + nn;
  float* pA = p + nn;
  float* R = pA + nn;
  float* spare = R + nn;

  const float inv_norm = (float)(1.0 / (std::sqrt(squared_norm(u, nm)) + 1e-7));
  for (size_t i = 0; i < nm; i++) V[i] = u[i] * inv_norm;

  const std::vector<int> rounds = phases(n, m);
  for (size_t phase = 0; phase < rounds.size(); phase++) {
    // A = X·Xᵀ: V·Vᵀ, or Vᵀ·V when U is tall, by ssyrk (half the products: A is symmetric)
    cblas_ssyrk(CblasRowMajor, CblasUpper, tall ? CblasTrans : CblasNoTrans, n, m, 1.0f, V, tall ? n : m, 0.0f, A, n);
    mirror_upper(A, n);
    for (int round = 0; round < rounds[phase]; round++) {
      // p = a·I + b·A + c·A·A  (A·A = A·Aᵀ: ssyrk's C ← α·A·Aᵀ + β·C, C starting as a copy of A)
      std::memcpy(p, A, sizeof(float) * nn);
      cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, n, n, c, A, n, b, p, n);
      for (int d = 0; d < n; d++) p[(size_t)d * n + d] += a;
      mirror_upper(p, n);
      // R ← p·R, the product of the phase's rounds so far (p itself after the first)
      if (round == 0) {
        std::memcpy(R, p, sizeof(float) * nn);
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, p, n, R, n, 0.0f, spare, n);
        std::swap(R, spare);
      }
      if (round + 1 == rounds[phase]) break;
      // A ← p·A·p, the Gram matrix of p·X. Not p²·A (equal in exact arithmetic, and half a product cheaper by
      // ssyrk): p² reaches a² ≈ 12 along the directions A nearly lacks, and in one phase of 5 rounds on a 128 × 128
      // matrix its rounding there cost 20× the error (measured: 2e-5 against 1e-6).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, p, n, A, n, 0.0f, pA, n);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pA, n, p, n, 0.0f, spare, n);
      std::swap(A, spare);
    }
    // X ← R·X: R·V, or V·Rᵀ (the transpose of R·Vᵀ) when U is tall; the last phase's is NS5(U)
    float* to = phase + 1 == rounds.size() ? out : next;
    if (tall)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, n, 1.0f, V, n, R, n, 0.0f, to, n);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, n, 1.0f, R, n, V, m, 0.0f, to, m);
    std::swap(V, next);
  }
}

// ---- the step ----------------------------------------------------------------------------------------------------

void Muon::update(GPT& model, std::vector<float>& momentum, float mu, float weight_decay, float lr) {
  const std::vector<TensorSpec>& table = model.table();
  size_t scratch = 0;  // per thread: U and O (rows × cols each), then NS5's own
  for (const TensorSpec& t : table)
    if (muon_updates(t))
      scratch = std::max(scratch, 2 * t.numel + newton_schulz5_scratch((int)t.shape[0], (int)t.shape[1]));
  const int threads = omp_get_max_threads();
  if ((int)scratch_.size() < threads || scratch_[0].size() < scratch)
    scratch_.assign(threads, std::vector<float>(scratch));

  // The costliest matrices first, so that the last one a thread takes is a cheap one (a thread that finishes early
  // waits for the others at the end of the loop).
  std::vector<const TensorSpec*> order;
  for (const TensorSpec& t : table)
    if (muon_updates(t)) order.push_back(&t);  // the others are AdamW's
  std::stable_sort(order.begin(), order.end(), [](const TensorSpec* x, const TensorSpec* y) {
    return multiply_adds((int)x->shape[0], (int)x->shape[1]) > multiply_adds((int)y->shape[0], (int)y->shape[1]);
  });

#pragma omp parallel for schedule(dynamic, 1)
  for (size_t k = 0; k < order.size(); k++) {
    const TensorSpec& t = *order[k];
    const int rows = (int)t.shape[0];
    const int cols = (int)t.shape[1];
    float* theta = model.params_memory().data() + t.offset;
    const float* g = model.grads_memory().data() + t.offset;
    float* buf = momentum.data() + t.offset;
    float* U = scratch_[omp_get_thread_num()].data();
    float* O = U + t.numel;
    for (size_t i = 0; i < t.numel; i++) {
      buf[i] = mu * buf[i] + g[i];
      U[i] = g[i] + mu * buf[i];
    }
    newton_schulz5(O, U, rows, cols, O + t.numel);
    const float decay = t.weight_decay ? weight_decay : 0.0f;
    const float scale = std::sqrt(std::max(1.0f, (float)cols / rows));  // √max(1, fan_out/fan_in)
    for (size_t i = 0; i < t.numel; i++) theta[i] -= lr * (decay * theta[i] + scale * O[i]);
  }
}
