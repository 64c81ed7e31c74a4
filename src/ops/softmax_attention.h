// Multi-head self-attention on a fused QKV tensor.   B batch, T time, C channels, NH heads, HS = C/NH.
// Row t of qkv (B, T, 3C) is [q | k | v]; head h owns columns h·HS … (h+1)·HS − 1 of each third.
// For each (b, h), with the keys that the mask allows query i to see, K(i) = [begin, end):
//   forward   S_ij = scale · q_i·k_j        (scale = 1/√HS by default: unit-variance logits; docs/lab.md)
//             P_ij = softmax_j(S_ij) over j ∈ K(i), and exactly 0 elsewhere
//             O_i  = Σ_j P_ij v_j
//   backward  dV = Pᵀ·dO                    dv_j = Σ_i P_ij dO_i
//             dP = dO·Vᵀ                    dP_ij = dO_i·v_j
//             dS = P ⊙ (dP − rowsum(dP ⊙ P)),  and rowsum(dP ⊙ P)_i = Σ_j P_ij dO_i·v_j = dO_i·O_i
//             dQ = dS·K·scale,   dK = dSᵀ·Q·scale      (dqkv is written: src/ops/README.md)
// The work goes in blocks of 16 queries over the union of their rows' key ranges (softmax_attention.cpp): a
// masked pair inside that union is computed, then its P set to exactly 0, so it contributes exactly zero; the keys
// outside the union are never visited, so a narrow mask costs less.
//
// P is B·NH·T² floats, more than everything else a layer keeps at long T (≈ 600 MB for the small preset). So the
// forward keeps only each row's log-normaliser, lse_i = log Σ_{j ∈ K(i)} exp(S_ij), and the backward rebuilds
// P_ij = exp(S_ij − lse_i) one block of queries at a time from Q and K, which it needs anyway (the FlashAttention
// trade: one more Q·Kᵀ product in the backward for T² less memory).
#pragma once
#include "ops/mask.h"

void attention_forward(float* out,                 // (B, T, C)  heads side by side, ready for the output projection
                       float* lse,                 // (B, NH, T) log-normaliser of each softmax row
                       const float* qkv,           // (B, T, 3C)
                       const AttentionMask& mask, float scale, int B, int T, int C, int NH);

void attention_backward(float* dqkv,               // (B, T, 3C)  written
                        const float* dout,         // (B, T, C)
                        const float* qkv,          // (B, T, 3C)
                        const float* lse,          // (B, NH, T)  from the forward
                        const float* out,          // (B, T, C)  the forward's O, for rowsum(dP ⊙ P) = dO·O
                        const AttentionMask& mask, float scale, int B, int T, int C, int NH);

// The full P of a forward, for looking at it (./inspect, the lab): (B, NH, T, T), exactly 0 outside the mask.
void attention_probs(float* probs, const float* qkv, const float* lse, const AttentionMask& mask, float scale, int B,
                     int T, int C, int NH);

// One query against a run of keys and values, in one pass: the KV-cache decoder's attention (decoder.cpp). The
// training forward computes the same numbers for blocks of queries at once (block_scores / softmax_row in
// softmax_attention.cpp), so that Q·Kᵀ is a matrix product.
//   q (HS); the keys are stored transposed, component d of key j at keys_t[d·key_stride + j], so that one query's
//   scores are a vector loop over the keys; value j at values + j·value_stride. Writes o (HS) and the weights
//   P_j into p[begin, end).
void attend_one_query(float* o, float* p, const float* q, const float* keys_t, int key_stride, const float* values,
                      int value_stride, KeyRange range, float scale, int HS);
