// The textbook's one head of a fused qkv (B,T,3C): row [q | k | v], head h owns columns h·HS … (h+1)·HS−1 of each
// third. Shared by softmax attention (reference.h) and linear attention (linear_attention.h).
#pragma once
#include <vector>

// Head h of batch b's queries, keys or values (which = 0, 1, 2) as a T×HS matrix.
template <typename F>
std::vector<F> ref_get_head(const F* qkv, int which, int b, int h, int T, int C, int NH) {
  const int HS = C / NH;
  std::vector<F> M(T * HS);
  for (int t = 0; t < T; t++)
    for (int d = 0; d < HS; d++) M[t * HS + d] = qkv[(b * T + t) * 3 * C + which * C + h * HS + d];
  return M;
}
