// Head gates (Michel et al. 2019, "Are Sixteen Heads Really Better than One?"): each head's output is multiplied
// by a scalar ξ_h before the output projection. ξ = 1 is the plain model, ξ = 0 removes the head, and ∂L/∂ξ_h
// measures how much the loss depends on it.   N rows (= B·T), NH heads, HS head size.
//   forward   y[n, h, :] = ξ_h · x[n, h, :]
//   backward  dx[n, h, :] = ξ_h · dy[n, h, :]  (written)     dξ_h += Σ_n Σ_d dy[n, h, d] · x[n, h, d]  (added to)
#pragma once

void head_gate_forward(float* out, const float* inp, const float* gates, int N, int NH, int HS);
void head_gate_backward(float* dinp, float* dgates, const float* dout, const float* inp, const float* gates, int N,
                        int NH, int HS);
