// Token + position embedding.   Shapes: B batch, T time, C channels, V vocabulary.
//   forward   out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :]
//   backward  dwte[tokens[b,t], :] += dout[b,t,:]     dwpe[t, :] += dout[b,t,:]
// A model without positions (--positions none) passes wpe = dwpe = nullptr: out[b,t,:] = wte[tokens[b,t], :].
// Gradients (src/ops/README.md): parameter gradients are added to (+=), an input gradient is written (=).
#pragma once

void embedding_forward(float* out,                                // (B, T, C)
                       const int* tokens,                         // (B, T)
                       const float* wte, const float* wpe,        // (V, C), (maxT, C)
                       int B, int T, int C);

void embedding_backward(float* dwte, float* dwpe,                 // (V, C), (maxT, C)
                        const float* dout,                        // (B, T, C)
                        const int* tokens,                        // (B, T)
                        int B, int T, int C);
