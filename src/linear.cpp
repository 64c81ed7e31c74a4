#include "linear.h"

#include <cstddef>

#include "blas.h"

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IC, int OC) {
  float beta = 0.0f;
  if (bias) {  // start each output row at b, then let sgemm add X·W to it (beta = 1)
    for (int n = 0; n < N; n++)
      for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] = bias[o];
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, IC, 1.0f, inp, IC, weight, OC, beta, out, OC);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IC, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, IC, OC, 1.0f, dout, OC, weight, OC, 1.0f, dinp, IC);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dweight, OC);
  if (dbias)
    for (int n = 0; n < N; n++)
      for (int o = 0; o < OC; o++) dbias[o] += dout[(size_t)n * OC + o];
}

void lm_head_forward(float* logits, const float* inp, const float* wte, int N, int C, int V) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, inp, C, wte, C, 0.0f, logits, V);
}

void lm_head_backward(float* dinp, float* dwte, const float* dlogits, const float* inp, const float* wte, int N,
                      int C, int V) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f, dlogits, V, wte, C, 1.0f, dinp, C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f, dlogits, V, inp, C, 1.0f, dwte, C);
}
