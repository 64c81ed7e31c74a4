#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "data/utf8.h"

std::string format_duration(double seconds) {
  long s = (long)std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

Progress::Progress(int total_steps, int tokens_per_step, int log_every, bool may_rewrite)
    : total_steps_(total_steps), tokens_per_step_(tokens_per_step), log_every_(log_every),
      live_(isatty(fileno(stdout)) && may_rewrite) {}

void Progress::evaluation(int step, double train_loss, double val_loss, double honest_bits) {
  if (live_) std::printf("\r\033[K");
  std::printf("step %d: train loss %.4f, val loss %.4f", step, train_loss, val_loss);
  if (honest_bits >= 0)
    std::printf(", honest next-char %.4f bits/char (%.4f nats)", honest_bits, honest_bits * std::log(2.0));
  std::printf("\n");
  std::fflush(stdout);
}

void Progress::step(int step, bool first, double loss, double lr, double muon_lr, double ms) {
  recent_ms_ = first ? ms : 0.9 * recent_ms_ + 0.1 * ms;
  const double tokens_per_s = tokens_per_step_ / (recent_ms_ / 1000.0);
  const std::string eta = format_duration((total_steps_ - step - 1) * recent_ms_ / 1000.0);
  if (live_ || (step + 1) % log_every_ == 0) {
    char muon[40] = "";
    if (!std::isnan(muon_lr)) std::snprintf(muon, sizeof muon, " (Muon %.2e)", muon_lr);
    std::printf("%sstep %d/%d | loss %.4f | lr %.2e%s | %.0f tok/s | %.1f ms/step | ETA %s%s", live_ ? "\r\033[K" : "",
                step + 1, total_steps_, loss, lr, muon, tokens_per_s, recent_ms_, eta.c_str(), live_ ? "" : "\n");
    std::fflush(stdout);
  }
}

void Progress::stopped(bool interrupted, int step, const std::string& file) {
  std::printf("%s%s: saved step %d to %s\n", live_ ? "\n" : "", interrupted ? "interrupted" : "stopped", step,
              escape_for_message(file).c_str());
}
