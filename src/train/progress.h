// What ./train prints while it runs: the evaluation lines and the per-step progress line (rewritten in place on a
// terminal, every --log-every steps otherwise), with tokens/s and the time left.
#pragma once
#include <string>

std::string format_duration(double seconds);  // "1:05", "2:03:04"

class Progress {
 public:
  // may_rewrite: a line may be rewritten in place when stdout is a terminal (not under mpirun, which hands its
  // processes a pseudo-terminal even when its own output goes to a file: log lines then).
  Progress(int total_steps, int tokens_per_step, int log_every, bool may_rewrite = true);
  // "step 250: train loss …, val loss …[, honest next-char …]"; honest_bits < 0 leaves that part out.
  void evaluation(int step, double train_loss, double val_loss, double honest_bits);
  // After step `step` (0-based) took `ms`: "step s/total | loss | lr [Muon η] | tok/s | ms/step | ETA". muon_lr is
  // NaN for AdamW runs.
  void step(int step, bool first, double loss, double lr, double muon_lr, double ms);
  // "interrupted: saved step …" or "stopped: …", on its own line.
  void stopped(bool interrupted, int step, const std::string& file);
  bool live() const { return live_; }

 private:
  int total_steps_, tokens_per_step_, log_every_;
  bool live_;              // stdout is a terminal: one line rewritten in place
  double recent_ms_ = 0;   // moving average of the step time, for tokens/s and the ETA
};
