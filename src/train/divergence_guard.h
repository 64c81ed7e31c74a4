// Keeps "the last good checkpoint" good. NaN and ∞ are not the only way a run diverges: at an absurd learning rate
// the loss climbs through 1e9 … 1e34 while staying finite, and at a merely too-high one (AdamW at --lr 1 with a long
// warm-up) it climbs slowly from 2.6 to 5.5 nats, past knowing nothing; a checkpoint saved then would replace good
// weights with useless ones. So before every save the weights' loss L on one fixed validation batch is measured,
// and compared with:
//
//   level    = the mean training-batch loss of the last kWindow steps (the run's recent history)
//   best     = the lowest level this invocation has seen
//   ln V     = the loss of a uniform guess over the V tokens: everything a model can know about one token
//   start    = L of the weights this invocation began with (the initialised model, or the resumed checkpoint)
//   ceiling  = (1 + kCeilingSlack)·max(start, ln V), kCeilingSlack = 1%: one validation batch's noise on weights
//              that have barely moved from their start (a one-step run) is not divergence
//   saved    = the lowest L of the weights this invocation began with or has saved, and its step
//
//   refused (the run stops, nothing is saved)  ⇔  L is not finite, or L > best + ln V (the loss is exploding), or
//                                                 L > ceiling (worse than knowing nothing, and than the start)
//   much worse (the best checkpoint is kept aside, in OUT/best.safetensors, before it is overwritten)
//                                             ⇔  L > saved + kMuchWorse · (ln V − saved)
//
// "Much worse" is half the way from the best saved weights back to knowing nothing: a tiny run whose best is 1.5
// nats on a 65-token vocabulary (ln 65 ≈ 4.17) keeps its best aside above 2.84. A healthy run's noise on one
// validation batch, and its slow overfitting, stay far below that; the run at --lr 1 (best 2.59 at step
// 300, ln 61 = 4.11) crosses it at 3.35 and is refused at 1.01·4.11 = 4.15. Before any step (and before start()) only
// finiteness is required.
#pragma once
#include <cstddef>
#include <deque>
#include <string>

// Whether none of the n values is infinite or NaN: after every step, that the update left the weights finite.
bool all_finite(const float* values, size_t n);

class DivergenceGuard {
 public:
  static constexpr size_t kWindow = 10;
  static constexpr double kMuchWorse = 0.5;
  static constexpr double kCeilingSlack = 0.01;
  explicit DivergenceGuard(int vocab_size);

  void observe(double batch_loss);  // every training step's loss (a non-finite one is never observed: it stops the run)
  double best() const { return best_; }  // +∞ until a step was observed
  double limit() const;                  // best + margin: the highest loss a saved model may have
  double uniform() const { return margin_; }  // ln V

  // The validation loss of the weights this invocation began with, at `step`: the start of `saved`, and with
  // ln V the ceiling.
  void start(double loss, int step);
  double ceiling() const;  // (1 + kCeilingSlack)·max(start, ln V); +∞ before start()

  // Empty when weights whose loss is `loss` may be saved; otherwise why not, for the divergence message.
  std::string refuse(double loss) const;

  // Weights that may be saved but are much worse than the best seen (above much_worse_limit()).
  bool much_worse(double loss) const { return loss > much_worse_limit(); }
  double much_worse_limit() const;  // saved + kMuchWorse · (ln V − saved); +∞ before start()
  // A checkpoint of weights whose loss is `loss` was written at `step`. Returns whether it is the best so far.
  bool saved(double loss, int step);
  double best_saved() const { return best_saved_; }
  int best_saved_step() const { return best_saved_step_; }

 private:
  double margin_;
  std::deque<double> recent_;
  double sum_ = 0;
  double best_;
  double start_;
  double best_saved_;
  int best_saved_step_ = -1;
};

// Copies the checkpoint `ckpt_file` to best.safetensors beside it, through the atomic writer, and returns that path.
std::string keep_best_aside(const std::string& ckpt_file);
