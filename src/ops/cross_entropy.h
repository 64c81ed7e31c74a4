// Softmax + cross-entropy, fused.   N rows (= B·T), V vocabulary.
//   forward   p = softmax(z) per row,  loss_n = −log p[target_n];  returns the sum of loss_n over rows whose
//             target ≥ 0 and their count (LossSum: .mean() is the loss)
//             (a target of −1 means "no loss here", e.g. the unmasked positions of BERT's objective)
//   backward  dz_n = (p_n − onehot(target_n)) / count   for counted rows; 0 for the others (dlogits is written)
#pragma once

constexpr int kNoTarget = -1;

struct LossSum {
  double total = 0;  // Σ −log p[target] over counted rows
  int count = 0;     // rows with a target
  double mean() const { return count ? total / count : 0.0; }
};

LossSum cross_entropy_forward(float* probs, float* losses,     // (N, V), (N)
                              const float* logits,             // (N, V)
                              const int* targets,              // (N), kNoTarget to skip a row
                              int N, int V);

void cross_entropy_backward(float* dlogits,                    // (N, V)
                            const float* probs,                // (N, V)
                            const int* targets,                // (N)
                            int count,                         // rows with a target (from forward)
                            int N, int V);
