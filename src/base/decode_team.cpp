#include "base/decode_team.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax() { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax() { asm volatile("yield"); }
#else
static inline void cpu_relax() {}
#endif

static thread_local DecodeTeam* tl_current = nullptr;

DecodeTeam* DecodeTeam::current() { return tl_current; }
DecodeTeam::Scope::Scope(DecodeTeam* team) : previous_(tl_current) { tl_current = team; }
DecodeTeam::Scope::~Scope() { tl_current = previous_; }

// The helpers compute with the creator's floating-point mode (MXCSR on x86: flush-to-zero and denormals-are-zero,
// which set_threads turns on, base/threads.cpp), so that a share gives the bits the caller would give.
DecodeTeam::DecodeTeam(int threads) : threads_(std::max(1, std::min(threads, kMaxThreads))) {
#if defined(__SSE2__)
  const unsigned mode = _mm_getcsr();
#else
  const unsigned mode = 0;
#endif
  try {
    for (int p = 1; p < threads_; p++)
      helpers_.emplace_back([this, p, mode] {
#if defined(__SSE2__)
        _mm_setcsr(mode);
#endif
        (void)mode;
        helper(p);
      });
  } catch (...) {  // a thread the system would not start: stop the ones that did, then report it
    stop_helpers();
    throw;
  }
}

DecodeTeam::~DecodeTeam() { stop_helpers(); }

void DecodeTeam::stop_helpers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

// n covers `units` whole units (the last one short); share p gets units [units·p/parts, units·(p+1)/parts).
int DecodeTeam::share_bound(int n, int unit, int part, int parts) {
  const long long units = ((long long)n + unit - 1) / unit;
  return (int)std::min<long long>(n, units * part / parts * unit);
}

const float* DecodeTeam::columns_by_share(const float* w, int rows, int cols, int unit) {
  ByShare& b = by_share_[w];
  if (b.copy.empty()) {
    b.rows = rows, b.cols = cols, b.unit = unit;
    b.copy.resize((size_t)rows * cols);
    for (int p = 0; p < threads_; p++) {
      const int begin = share_bound(cols, unit, p, threads_), width = share_bound(cols, unit, p + 1, threads_) - begin;
      float* block = b.copy.data() + (size_t)rows * begin;
      for (int i = 0; i < rows; i++)
        std::copy(w + (size_t)i * cols + begin, w + (size_t)i * cols + begin + width, block + (size_t)i * width);
    }
  } else if (b.rows != rows || b.cols != cols || b.unit != unit) {
    throw std::logic_error("DecodeTeam::columns_by_share: one matrix read with two shapes");
  }
  return b.copy.data();
}

std::uint64_t DecodeTeam::shares_by_helpers() const {
  std::uint64_t n = 0;
  for (const Share& s : shares_) n += s.by_helper.load(std::memory_order_relaxed);
  return n;
}
std::uint64_t DecodeTeam::shares_taken_back() const {
  std::uint64_t n = 0;
  for (const Share& s : shares_) n += s.taken_back.load(std::memory_order_relaxed);
  return n;
}

void DecodeTeam::run(Job job, void* ctx) {
  if (threads_ == 1) return job(ctx, 0, 1);
  // Every share of the previous job was claimed and finished before it returned, so no helper reads job_ now.
  job_ = job, ctx_ = ctx;
  const std::uint64_t s = seq_.load(std::memory_order_relaxed) + 1;
  seq_.store(s, std::memory_order_seq_cst);  // publishes job_ and ctx_
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mutex_);  // a helper between its check and its wait gets the notify
    wake_.notify_all();
  }
  job(ctx, 0, threads_);
  for (int p = 1; p < threads_; p++) {
    Share& share = shares_[p];
    std::uint64_t expected = s - 1;
    if (share.claim.compare_exchange_strong(expected, s, std::memory_order_acq_rel)) {
      job(ctx, p, threads_);  // its helper had not started it: no waiting for a thread that is not running
      share.taken_back.store(share.taken_back.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      continue;
    }
    for (int spins = 0; share.done.load(std::memory_order_acquire) != s; spins++)
      if (spins < 4096) cpu_relax(); else std::this_thread::yield();  // its helper was descheduled mid-share
  }
}

void DecodeTeam::helper(int part) {
  Share& share = shares_[part];
  std::uint64_t seen = 0;
  for (;;) {
    // Spin for new work, yielding and checking the clock every 64 pauses; then sleep until a job or the end.
    auto start = std::chrono::steady_clock::now();
    for (int spins = 1; seq_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed);
         spins++) {
      cpu_relax();
      if (spins % 64 != 0) continue;
      std::this_thread::yield();  // a core another thread is waiting for goes to it (a no-op on an idle core)
      if (std::chrono::steady_clock::now() - start > std::chrono::microseconds(kSpinMicroseconds)) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return seq_.load(std::memory_order_seq_cst) != seen || stop_.load(); });
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        start = std::chrono::steady_clock::now();
      }
    }
    if (stop_.load()) return;
    const std::uint64_t s = seq_.load(std::memory_order_acquire);
    seen = s;
    std::uint64_t expected = s - 1;
    if (!share.claim.compare_exchange_strong(expected, s, std::memory_order_acq_rel)) continue;  // taken back
    job_(ctx_, part, threads_);
    share.by_helper.store(share.by_helper.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    share.done.store(s, std::memory_order_release);
  }
}
