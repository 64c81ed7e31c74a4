// Causal (and masked) linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"), on the same fused
// qkv as softmax attention (softmax_attention.h).   B batch, T time, C channels, NH heads, HS = C/NH.
// Row t of qkv (B, T, 3C) is [q | k | v]; head h owns columns h·HS … (h+1)·HS − 1 of each third.
//
// Softmax attention weighs key j by exp(q_i·k_j). Linear attention replaces the exponential by a product of
// feature maps, sim(q, k) = φ(q)·φ(k) with φ(x) = elu(x) + 1 elementwise (positive, so every weight is ≥ 0):
//   φ(x) = x + 1 (x > 0),  eˣ (x ≤ 0);        φ'(x) = 1 (x > 0),  eˣ (x ≤ 0)
// and, for the keys K(i) = [begin_i, end_i) the mask allows query i to see (mask.h), with no 1/√d_k scale:
//   y_i = Σ_{j∈K(i)} (φ(q_i)·φ(k_j)) v_j / (Σ_{j∈K(i)} φ(q_i)·φ(k_j) + ε),   ε = 1e-6
// The point is the order of the products. φ(q_i) does not depend on j, so it comes out of both sums:
//   S_i = Σ_{j∈K(i)} φ(k_j) v_jᵀ   (HS × HS)      z_i = Σ_{j∈K(i)} φ(k_j)   (HS)
//   num_i = S_iᵀ φ(q_i)  (num_i[e] = Σ_d φ(q_i)[d] S_i[d][e])     den_i = φ(q_i)·z_i + ε      y_i = num_i / den_i
// S_i and z_i are sums over a contiguous run of keys, so they are differences of prefix sums, kept as one running
// state while i moves right: add key j when end_i passes it, subtract it when begin_i passes it.
//   causal         begin = 0: only adds (the RNN form: S_i = S_{i−1} + φ(k_i) v_iᵀ)
//   bidirectional  every row sees all T keys: the totals, added once before the first row
//   window:W       adds the newest key, subtracts the one W back (the difference of two prefix sums)
//   prefix:N       the first row adds N keys at once, then one per row as for causal
// Cost O(T·HS²) per head and O(HS²) memory for the state: T×T weights are never formed (linear_attention_probs
// forms them, for looking at them, on request).
//
// Backward. With g_i = ∂L/∂num_i = dy_i / den_i and c_i = ∂L/∂den_i = −(dy_i·y_i) / den_i:
//   ∂L/∂φ(q_i) = S_i g_i + c_i z_i                       (the same forward scan of S_i, z_i, run again)
// Key j is seen by the queries Q(j) = {i : j ∈ K(i)}, a contiguous run [lo_j, hi_j) because the key ranges only move
// right as i grows (mask.h); so, with the mirror-image state summed over queries instead of keys,
//   R_j = Σ_{i∈Q(j)} φ(q_i) g_iᵀ  (HS × HS)      r_j = Σ_{i∈Q(j)} c_i φ(q_i)  (HS)
//   ∂L/∂φ(k_j) = R_j v_j + r_j                  ∂L/∂v_j = R_jᵀ φ(k_j)
// and R_j, r_j are kept by a reverse scan over j (add query i when lo_j passes it going left, subtract it when hi_j
// does). Finally dq = ∂L/∂φ(q) ⊙ φ'(q), dk = ∂L/∂φ(k) ⊙ φ'(k).
// The forward keeps y (the output, for c_i) and den (B, NH, T); S and z are recomputed, never stored per position.
// Subtracting a key again (window:W) is exact in real numbers but not in float: a key behind the window leaves a
// residue of ~1e-8 of the state's scale, so it gets a tiny gradient instead of exactly 0 (softmax never visits
// it). Keys after a query are never in the state when the query reads it: the causal property is exact.
#pragma once
#include "ops/mask.h"

constexpr float kLinearAttentionEps = 1e-6f;

void linear_attention_forward(float* out,        // (B, T, C)  heads side by side
                              float* den,        // (B, NH, T) den_i = φ(q_i)·z_i + ε, kept for the backward
                              const float* qkv,  // (B, T, 3C)
                              const AttentionMask& mask, int B, int T, int C, int NH);

void linear_attention_backward(float* dqkv,        // (B, T, 3C)  written
                               const float* dout,  // (B, T, C)
                               const float* qkv,   // (B, T, 3C)
                               const float* den,   // (B, NH, T)  from the forward
                               const float* out,   // (B, T, C)   the forward's y
                               const AttentionMask& mask, int B, int T, int C, int NH);

// The weights a linear layer implies, A_ij = φ(q_i)·φ(k_j) / den_i inside the mask, 0 outside: (B, NH, T, T), so
// that y_i = Σ_j A_ij v_j exactly. Rows sum to 1 − ε/den_i (ε = 1e-6).
// O(T²·HS): for ./inspect and the lab, never for training.
void linear_attention_probs(float* probs, const float* qkv, const AttentionMask& mask, int B, int T, int C, int NH);

// ---- The recurrent form, one head, shared by the forward above and the decoder (generation with O(HS²) memory).
// φ of n numbers.
void phi_features(float* out, const float* x, int n);
// S += sign · φk vᵀ, z += sign · φk      (sign = +1 adds a key, −1 removes it)    S (HS × HS), z, φk, v (HS)
void linear_state_update(float* S, float* z, const float* phi_k, const float* v, float sign, int HS);
// y = Sᵀφq / (φq·z + ε); returns the denominator.
float linear_state_read(float* y, const float* S, const float* z, const float* phi_q, int HS);
