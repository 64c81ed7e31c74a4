#include "train/divergence_guard.h"

#include <cmath>
#include <cstdio>
#include <limits>

DivergenceGuard::DivergenceGuard(int vocab_size)
    : margin_(std::log(double(vocab_size > 1 ? vocab_size : 2))), best_(std::numeric_limits<double>::infinity()) {}

void DivergenceGuard::observe(double batch_loss) {
  if (!std::isfinite(batch_loss)) return;
  recent_.push_back(batch_loss);
  sum_ += batch_loss;
  if (recent_.size() > kWindow) {
    sum_ -= recent_.front();
    recent_.pop_front();
  }
  const double level = sum_ / double(recent_.size());
  if (level < best_) best_ = level;
}

double DivergenceGuard::limit() const { return best_ + margin_; }

std::string DivergenceGuard::refuse(double loss) const {
  char text[200];
  if (!std::isfinite(loss)) {
    std::snprintf(text, sizeof text, "the weights to be saved have a loss of %g", loss);
    return text;
  }
  if (loss <= limit()) return "";
  std::snprintf(text, sizeof text,
                "the weights to be saved have a loss of %.4g nats, above the run's best recent %.4g + ln V = %.4g: "
                "the loss is exploding",
                loss, best_, limit());
  return text;
}
