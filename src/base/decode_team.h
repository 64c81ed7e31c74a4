// A team of threads for the decoder's products (model/decoder.h). A new token is a chain of ~17 small
// matrix-vector products (ops/linear.h: matvec, matvec2, lm_head_matvec), each a few µs, with a little serial work
// between them. An OpenMP region per product costs more than it saves: with passive waiting every product wakes a
// sleeping thread (tens of µs on a virtual machine), and with spinning the idle threads hold cores the rest of the
// program needs. This team is made for that chain:
//   - Its helpers stay awake while products keep coming: each spins on one counter, so handing over a product costs
//     a cache line moving between cores (well under a µs). A spinning helper yields its core every 64 pauses to any
//     other thread waiting for one, and after kSpinMicroseconds without work it sleeps on a condition variable, so
//     a team between tokens, or forgotten, holds no core.
//   - The caller never waits for a helper that is not running: it does its own share, then claims every share no
//     helper has started and does those too. A sleeping or descheduled helper costs the token its share's time, not
//     a wake-up.
//   - Share p of every product is always the same columns, the helper that owns it is always the same thread, and
//     the products read a copy of W laid out by share (columns_by_share), so each core's L2 keeps its share of the
//     weights from one token to the next. The tiny model's 3.2 MB of weights do not fit one core's 2 MB L2 and do
//     fit two (docs/performance.md, "Sampling on two cores").
// Each output element is computed whole by one thread, with the same loop as on one thread: the logits are the same
// bits with any number of threads (DecodeTeam.* in tests/test_decode_team.cpp).
//
// Within a DecodeTeam::Scope on the calling thread, matvec, matvec2 and lm_head_matvec split their output
// columns (rows of wte) between the team's threads; outside one they run on the calling thread alone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

class DecodeTeam {
 public:
  static constexpr int kMaxThreads = 4;  // measured on 2 cores only; a share of a small product is a few cache lines
  static constexpr int kSpinMicroseconds = 200;

  // threads − 1 helpers (threads is capped at kMaxThreads; 1 makes a team that runs everything on the caller).
  explicit DecodeTeam(int threads);
  ~DecodeTeam();
  DecodeTeam(const DecodeTeam&) = delete;
  DecodeTeam& operator=(const DecodeTeam&) = delete;

  int threads() const { return threads_; }

  // body(begin, end) for the shares of 0 … n−1, share p on thread p (0: the caller): equal shares whose bounds are
  // multiples of `unit` (the last share ends at n). Returns when every share is done. Not reentrant: body must not
  // split again.
  template <typename Body>
  void split(int n, int unit, Body&& body) {
    struct Ctx {
      Body* body;
      int n, unit;
    } ctx{&body, n, unit};
    run(
        [](void* c, int part, int parts) {
          const Ctx& x = *static_cast<const Ctx*>(c);
          const int begin = share_bound(x.n, x.unit, part, parts), end = share_bound(x.n, x.unit, part + 1, parts);
          if (begin < end) (*x.body)(begin, end);
        },
        &ctx);
  }
  // Share p of n: [share_bound(n, unit, p, parts), share_bound(n, unit, p + 1, parts)).
  static int share_bound(int n, int unit, int part, int parts);

  // A copy of the rows × cols row-major matrix w in which share p of its columns, [b_p, b_{p+1}) with
  // b_p = share_bound(cols, unit, p, threads()), is one contiguous rows × (b_{p+1} − b_p) block starting at
  // rows·b_p.
  // A thread reading its share of a row-major W would read part of every row, and the cores' prefetchers fetch the
  // rest of each row too, so both caches would fill with all of W; read from this copy, each core's cache holds its
  // share alone. Made at the first call for w and kept while the team lives, so w must not change meanwhile (a
  // Decoder's team lives as long as the Decoder).
  const float* columns_by_share(const float* w, int rows, int cols, int unit);

  // How many shares the helpers ran, and how many the caller ran for a helper that had not started (for tests
  // and the bench).
  std::uint64_t shares_by_helpers() const;
  std::uint64_t shares_taken_back() const;

  // The team the calling thread's products split over (null: none).
  static DecodeTeam* current();
  class Scope {
   public:
    explicit Scope(DecodeTeam* team);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    DecodeTeam* previous_;
  };

 private:
  using Job = void (*)(void* ctx, int part, int parts);
  void run(Job job, void* ctx);
  void helper(int part);
  void stop_helpers();

  int threads_;
  // Job number s is published by storing s in seq_ (after job_ and ctx_); share p of job s belongs to whoever
  // moves claim_[p] from s − 1 to s, and is done when done_[p] reads s.
  alignas(64) std::atomic<std::uint64_t> seq_{0};
  Job job_ = nullptr;
  void* ctx_ = nullptr;
  struct alignas(64) Share {
    std::atomic<std::uint64_t> claim{0}, done{0};
    std::atomic<std::uint64_t> by_helper{0}, taken_back{0};  // each written by one thread only
  };
  Share shares_[kMaxThreads];
  alignas(64) std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::thread> helpers_;
  struct ByShare {
    int rows = 0, cols = 0, unit = 0;
    std::vector<float> copy;
  };
  std::unordered_map<const float*, ByShare> by_share_;  // columns_by_share's copies, by source
};
