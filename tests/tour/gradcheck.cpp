// The tour's gradient check (docs/tour.md, exercises 1 and 2): the textbook's attention backward
// (src/textbook/reference.h, ref_attention_backward) against central finite differences of its forward, in
// double precision, under the causal mask. Prints PASS or FAIL with the largest relative error; exits 0 either
// way (the exercise is to read the verdict). A one-file program with no BLAS and no threads:
//   g++ -std=c++17 -O1 -Isrc tests/tour/gradcheck.cpp src/ops/mask.cpp -o /tmp/tour/gradcheck
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "textbook/finite_differences.h"
#include "textbook/reference.h"

int main() {
  const int B = 1, T = 5, C = 6, NH = 2;
  const double scale = 1 / std::sqrt(3.0);
  const AttentionMask causal = AttentionMask::parse("causal");
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> U(-1, 1);
  std::vector<double> qkv(B * T * 3 * C), dout(B * T * C);
  for (double& v : qkv) v = U(rng);
  for (double& v : dout) v = U(rng);
  // loss = Σ dout ⊙ attention(qkv), so ∂loss/∂qkv is what the backward computes from dout.
  std::vector<double> out(B * T * C), probs(B * NH * T * T);
  auto loss = [&] {
    ref_attention_forward(out.data(), probs.data(), qkv.data(), causal, scale, B, T, C, NH);
    double s = 0;
    for (size_t i = 0; i < out.size(); i++) s += dout[i] * out[i];
    return s;
  };
  loss();
  std::vector<double> dqkv(qkv.size(), 0.0);
  ref_attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), out.data(), causal, scale, B, T, C, NH);
  // (loss(qkv + h·e_i) − loss(qkv − h·e_i)) / 2h for every input i, h = 1e-6 (textbook/finite_differences.h)
  const std::vector<double> numeric = ref_finite_differences(loss, qkv.data(), qkv.size());
  double worst = 0;
  for (size_t i = 0; i < qkv.size(); i++)
    worst = std::max(worst, std::fabs(dqkv[i] - numeric[i]) / (1e-6 + std::fabs(numeric[i])));
  std::printf("attention backward vs finite differences, %zu inputs: max relative error %.1e: %s\n", qkv.size(), worst,
              worst < 1e-5 ? "PASS" : "FAIL");
  return 0;
}
