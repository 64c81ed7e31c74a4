// e^x for float, written so the compiler can vectorize it (8 at a time with AVX2). The C library's expf is a
// call per element, and exp is most of the cost of GELU, softmax and cross-entropy at these model sizes.
//   x = n·ln2 + r with n an integer and |r| ≤ ln2/2, so e^x = 2^n · e^r;
//   e^r from its Taylor series to r⁶/720 (relative error below 3e-7 on that interval: float precision);
//   2^n by writing n + 127 into the exponent bits of a float.
// Below −87 it returns 0 (where expf underflows), above 88 a huge finite value; NaN stays NaN, so a diverging
// run is still caught. Vectorizing needs -fno-trapping-math (see the Makefile): plain ?: selects, no branches.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

inline float fast_exp(float x) {
  // Written so that NaN fails both comparisons and becomes −87: the float → int conversion below must never see
  // NaN (that is undefined behaviour); the last line gives NaN back.
  float clamped = x > -87.0f ? x : -87.0f;
  clamped = clamped < 88.0f ? clamped : 88.0f;
  const float n = std::floor(clamped * 1.44269504f + 0.5f);  // round(x / ln2)
  const float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;  // x − n·ln2, ln2 in two parts (Cody–Waite)
  const float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  const int32_t exponent_bits = ((int32_t)n + 127) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &exponent_bits, sizeof two_to_n);
  const float result = x < -87.0f ? 0.0f : p * two_to_n;
  return x != x ? x : result;
}
