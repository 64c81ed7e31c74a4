#include "train/divergence_guard.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <sys/stat.h>
#include <unistd.h>

#include "base/read_file.h"
#include "io/atomic_file.h"

static const double kInfinity = std::numeric_limits<double>::infinity();

// A float is infinite or NaN exactly when its exponent bits are all ones. Or-ing that test over every value, with
// no early exit, lets the loop run as vector code (an `&&` that stops at the first bad value cannot): as a scalar
// loop this check was 0.7% of ./train's time (Zen 5, issue 28). Non-zero when one of the n values is ∞ or NaN.
static unsigned nonfinite_among(const float* values, size_t n) {
  unsigned bad = 0;
#pragma omp simd reduction(| : bad)
  for (size_t i = 0; i < n; i++) {
    uint32_t bits;
    std::memcpy(&bits, values + i, sizeof bits);
    bad |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return bad;
}

// The threads share blocks of values, and each block is one `omp simd` loop. A single `parallel for simd` loop over
// the values, as this was, came out wrong from clang 14 at -O1 (an ∞ among the first thread's values went unseen,
// even on one thread; Hardening3Guard.AllFiniteFindsEveryInfinityAndNaNAndNothingElse failed when the whole suite
// ran under ThreadSanitizer, which builds at -O1) and was left scalar at -O3; g++ and clang vectorize this form.
bool all_finite(const float* values, size_t n) {
  constexpr size_t kBlock = 65536;
  const long long blocks = (long long)((n + kBlock - 1) / kBlock);
  unsigned bad = 0;
#pragma omp parallel for reduction(| : bad)
  for (long long b = 0; b < blocks; b++) {
    const size_t begin = (size_t)b * kBlock;
    bad |= nonfinite_among(values + begin, std::min(kBlock, n - begin));
  }
  return !bad;
}

DivergenceGuard::DivergenceGuard(int vocab_size)
    : margin_(std::log(double(vocab_size > 1 ? vocab_size : 2))), best_(kInfinity), start_(kInfinity),
      best_saved_(kInfinity) {}

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

void DivergenceGuard::start(double loss, int step) {
  start_ = std::isfinite(loss) ? loss : kInfinity;
  best_saved_ = start_;
  best_saved_step_ = step;
}

double DivergenceGuard::ceiling() const { return (1 + kCeilingSlack) * std::max(start_, margin_); }

double DivergenceGuard::much_worse_limit() const {
  return best_saved_ + kMuchWorse * std::max(0.0, margin_ - best_saved_);
}

bool DivergenceGuard::saved(double loss, int step) {
  if (!(loss < best_saved_)) return false;
  best_saved_ = loss;
  best_saved_step_ = step;
  return true;
}

std::string DivergenceGuard::refuse(double loss) const {
  char text[300];
  if (!std::isfinite(loss)) {
    std::snprintf(text, sizeof text, "the weights to be saved have a loss of %g", loss);
    return text;
  }
  if (loss > limit()) {
    std::snprintf(text, sizeof text,
                  "the weights to be saved have a loss of %.4g nats, above the run's best recent %.4g + ln V = %.4g: "
                  "the loss is exploding",
                  loss, best_, limit());
    return text;
  }
  if (loss > ceiling()) {
    std::snprintf(text, sizeof text,
                  "the weights to be saved have a validation loss of %.4g nats, above both a uniform guess's ln V "
                  "= %.4g and the %.4g of the weights this run started from: 1.01 × max = %.4g: worse than knowing "
                  "nothing",
                  loss, margin_, start_, ceiling());
    return text;
  }
  return "";
}

// A second name for the file (a hard link: no copy; the checkpoint is then replaced by a rename, so the link keeps
// the old file), made under a temporary name and renamed into place; a copy through the atomic writer where the
// file system has no hard links.
std::string keep_best_aside(const std::string& ckpt_file) {
  const size_t slash = ckpt_file.rfind('/');
  const std::string best = (slash == std::string::npos ? "" : ckpt_file.substr(0, slash + 1)) + "best.safetensors";
  struct stat st;
  if (::lstat(best.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error("cannot write '" + best + "': it exists and is " + file_kind(st.st_mode) +
                             ", not a regular file; it is left alone (remove it, or choose another --out)");
  const std::string temporary = temporary_path_for(best);
  if (::lstat(temporary.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(temporary.c_str());
  if (::link(ckpt_file.c_str(), temporary.c_str()) == 0) {
    if (::rename(temporary.c_str(), best.c_str()) == 0) return best;
    ::unlink(temporary.c_str());
  }
  const std::string bytes = read_regular_file(ckpt_file);
  write_file_atomically(best, {{bytes.data(), bytes.size()}});
  return best;
}
