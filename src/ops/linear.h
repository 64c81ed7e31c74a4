// Linear layer through cblas_sgemm.   N rows (= B·T), IC input channels, OC output channels.
//   forward   Y = X·W + b                    X (N, IC), W (IC, OC) as GPT-2 stores it, b (OC) or null
//   backward  dX = dY·Wᵀ       dW += Xᵀ·dY      db += Σ_rows dY
// Each product is one sgemm call on row-major data; the transposes are sgemm flags, never copies.
// As in every op (src/ops/README.md): a backward writes the gradient of its input (dX) and adds to the gradients
// of its parameters (dW, db), which sum over the whole model before the optimizer step.
#pragma once

// With `residual` (N, OC), out = residual + X·W + b: a residual connection folded into the product's starting
// value, which saves the add's own pass over memory. Its gradient is dY itself, so the backward is unchanged.
void linear_forward(float* out,                                // (N, OC)
                    const float* inp,                          // (N, IC)
                    const float* weight, const float* bias,    // (IC, OC), (OC) or null
                    int N, int IC, int OC,
                    const float* residual = nullptr);          // (N, OC) or null

void linear_backward(float* dinp, float* dweight, float* dbias,  // (N, IC), (IC, OC), (OC) or null
                     const float* dout,                          // (N, OC)
                     const float* inp, const float* weight,      // (N, IC), (IC, OC)
                     int N, int IC, int OC);

// The LM head, tied to the token embedding wte (V, C): the same math with the weight stored [out, in].
//   forward   logits = X·wteᵀ        backward  dX = dlogits·wte       dwte += dlogitsᵀ·X
void lm_head_forward(float* logits,                            // (N, V)
                     const float* inp, const float* wte,       // (N, C), (V, C)
                     int N, int C, int V);

void lm_head_backward(float* dinp, float* dwte,                // (N, C), (V, C)
                      const float* dlogits,                    // (N, V)
                      const float* inp, const float* wte,      // (N, C), (V, C)
                      int N, int C, int V);

// One row (N = 1) of the two forwards above, for generation with the KV cache. sgemm would repack all of W for a
// single row; a matrix-vector product reads each weight once.
//   matvec            y = b + xᵀ·W     x (IC), W (IC, OC) row-major, b (OC) or null, y (OC)
//   lm_head_matvec    logits = wte·x   x (C), wte (V, C) row-major, logits (V)
// On the calling thread alone, unless it is in a DecodeTeam's scope (base/decode_team.h): then each product's
// output columns (matvec, matvec2) or wte rows (lm_head_matvec) are split between the team's threads. One row is a
// few µs of work, less than an OpenMP region's wake-up; the team's handover is a cache line.
void matvec(float* out, const float* inp, const float* weight, const float* bias, int IC, int OC);
// Two rows sharing each weight read: out0 = b + inp0ᵀ·W, out1 = b + inp1ᵀ·W (the decoder's token and its shadow,
// model/decoder.h). Neither output may overlap W, b, the inputs or the other output.
void matvec2(float* out0, float* out1, const float* inp0, const float* inp1, const float* weight, const float* bias,
             int IC, int OC);
void lm_head_matvec(float* logits, const float* inp, const float* wte, int C, int V);
