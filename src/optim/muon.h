// Muon (Keller Jordan; the optimizer of the modded-nanogpt speed-run records): the linear maps' weights inside the
// blocks step along their momentum *orthogonalised* — U·Vᵀ of the momentum's SVD U·S·Vᵀ — so that every direction the
// momentum moves along gets the same step, however small its singular value. Everything else (the embeddings,
// which are lookups rather than linear maps, and with wte the LM head tied to it; the biases; LayerNorm) keeps
// AdamW with its own settings. It is ./train's default optimizer; `--optimizer adamw` uses AdamW for everything
// (train/train_config.cpp).
//
// Per Muon tensor W, stored [fan_in, fan_out] = rows × cols (GPT-2's Conv1D layout, params.h), with gradient G
// after clipping:
//   B ← μ·B + G                                   momentum buffer
//   U = G + μ·B                                   Nesterov: the gradient plus the momentum it is about to add to
//   O = NS5(U) ≈ U·Vᵀ                             below
//   W ← W − η·λ·W − η·√max(1, fan_out/fan_in)·O   decoupled weight decay λ (--weight-decay), then the step
// η follows AdamW's schedule: η = muon_lr · lr(step)/lr, the same warm-up and cosine shape (learning_rates in
// train/loop.h computes both).
// The scale: O's singular values are ≈ 1, so an input of RMS 1 (norm √fan_in) comes out of O with RMS at most
// √(fan_in/fan_out); √(fan_out/fan_in) makes a widening layer's (c_fc: fan_out = 4·fan_in) update move its outputs
// as much as a square layer's. modded-nanogpt writes it on PyTorch's [out, in] weights as √max(1, rows/cols); on
// our [in, out] storage that is cols/rows.
//
// NS5, the Newton–Schulz quintic, for an r × c matrix U:
//   X = U / (‖U‖_F + 1e-7)                        every singular value is now ≤ 1
//   if r > c: X ← Xᵀ                              so that the Gram matrix A is of the smaller side
//   5 times:  A = X·Xᵀ;   X ← a·X + (b·A + c·A·A)·X       (a, b, c) = (3.4445, −4.7750, 2.0315)
//   if r > c: X ← Xᵀ
// With X = P·diag(σ)·Qᵀ, A = P·diag(σ²)·Pᵀ, so a round maps each singular value σ to φ(σ) = aσ + bσ³ + cσ⁵ and
// keeps the singular vectors: NS5(U) = P·diag(φ⁵(σ))·Qᵀ. φ is chosen to rise steeply from 0 (slope a = 3.4), so
// five rounds carry every σ in [0.002, 1] into [0.68, 1.21] — not exactly 1, which would take more rounds and
// (measured by modded-nanogpt) trains no better.
//
// How it is computed (muon.cpp): a round is X ← p(A)·X with p(A) = a·I + b·A + c·A², and the next round's A is
// p·X·Xᵀ·p = p·A·p, so several rounds can go round on n × n matrices alone and touch X once at the end:
//   a phase of k rounds:  A = X·Xᵀ;  R = I;  k times { p = a·I + b·A + c·A²;  R ← p·R;  A ← p·A·p };  X ← R·X
// X is n × m, n ≤ m. A phase costs 1.5·n²·m + (3.5·k − 3)·n³ multiply-adds (A by ssyrk, half of a product, as is
// A²), so when m > 2n NS5 runs as phases of 3 and 2 rounds, otherwise as 5 phases of 1 round (X updated every round,
// the iteration as written above). Not 1 phase of 5: A holds σ² only to float's absolute precision, and a phase
// resolves the σ that are small against ‖X‖ the worse the more rounds it runs (muon.cpp: measured).
// U's layout is kept throughout (a tall U's Xᵀ is read through the products' transpose flags), so nothing is copied
// into a transposed layout.
//
// State: the momentum buffer B lives in AdamW's m arena at the tensor's offset, and v stays 0 there, so the
// checkpoint keeps its format: for a Muon tensor, "optimizer.m.<name>" is B and "optimizer.v.<name>" is zeros.
// AdamW's step count t still counts every step (the AdamW tensors' bias correction uses it).
//
// Cost: 0.65 G multiply-adds per step for the tiny model (4 layers; c_attn 128 × 384, c_fc 128 × 512 and
// mlp.c_proj 512 × 128 in phases, 43 + 49 + 49 M; attn.c_proj 128 × 128 one round at a time, 21 M), against 0.84 G
// by rounds one at a time throughout; about 35% of its forward and backward at batch 12 × 64, and the same at any
// batch. The matrices (4 per layer) are independent: threads take whole matrices, the largest first, each
// running single-threaded BLAS (as in ops/linear.cpp), so no matrix's result depends on the number of threads.
#pragma once
#include <cstddef>
#include <vector>

#include "optim/adamw.h"

struct TensorSpec;

struct MuonConfig {
  float lr = 0.02f;        // peak learning rate of the Muon tensors (modded-nanogpt's); follows --lr's schedule
  float momentum = 0.95f;  // μ
};

// The tensors Muon updates: the weights of the linear maps inside the blocks (attn.c_attn, attn.c_proj, mlp.c_fc,
// mlp.c_proj, a mixer's projections), the rows the parameter table marks `matrix`.
bool muon_updates(const TensorSpec& tensor);

// out (rows × cols) ← NS5(u) (rows × cols), by single-threaded BLAS (ssyrk, sgemm). `scratch` holds newton_schulz5_scratch(rows,
// cols) floats; out and u may be the same array.
size_t newton_schulz5_scratch(int rows, int cols);
void newton_schulz5(float* out, const float* u, int rows, int cols, float* scratch);

class Muon {
 public:
  // One step of every tensor muon_updates() takes, at η = `lr`, with weight decay λ = `weight_decay` on those the
  // table marks for decay; `momentum` (one float per parameter: AdamW's m arena, the state above) holds B at each
  // tensor's offset. The other tensors are AdamW's (train/loop.cpp updates them with AdamW::update, skipping these).
  void update(GPT& model, std::vector<float>& momentum, float mu, float weight_decay, float lr);

 private:
  std::vector<std::vector<float>> scratch_;  // one per thread, sized for the largest matrix; allocated once
};
