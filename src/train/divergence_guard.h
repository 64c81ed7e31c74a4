// Keeps "the last good checkpoint" good. NaN and ∞ are not the only way a run diverges: at an absurd learning rate
// the loss climbs through 1e9 … 1e34 while staying finite, and a checkpoint saved then would replace good weights
// with useless ones. So a checkpoint is written only when the weights about to be saved pass this test:
//
//   level  = the mean training-batch loss of the last kWindow steps (the run's recent history)
//   best   = the lowest level this invocation has seen
//   margin = ln V, the loss of a uniform guess over the V tokens: everything a model can know about one token
//   the weights may be saved ⇔ their loss L (on one fixed validation batch, measured just before saving) is finite
//                               and L ≤ best + margin
//
// A model that is worse than its own recent best by more than knowing nothing at all costs has exploded; a healthy
// run's spikes, and its train/validation gap, stay far below that (a tiny run's loss falls from ln 65 ≈ 4.2 to
// ~1.5, so the line sits at ~5.7 nats). Before any step has been seen only finiteness is required.
#pragma once
#include <cstddef>
#include <deque>
#include <string>

class DivergenceGuard {
 public:
  static constexpr size_t kWindow = 10;
  explicit DivergenceGuard(int vocab_size);

  void observe(double batch_loss);  // every training step's loss (a non-finite one is never observed: it stops the run)
  double best() const { return best_; }  // +∞ until a step was observed
  double limit() const;                  // best + margin: the highest loss a saved model may have

  // Empty when weights whose loss is `loss` may be saved; otherwise why not, for the divergence message.
  std::string refuse(double loss) const;

 private:
  double margin_;
  std::deque<double> recent_;
  double sum_ = 0;
  double best_;
};
