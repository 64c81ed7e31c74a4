// A small, portable random number generator (xoshiro256**, seeded by splitmix64). The standard library's
// distributions differ between implementations; ours give the same numbers on every platform, and the state is
// four integers that a checkpoint can store, so a resumed run draws exactly the batches it would have drawn.
#pragma once
#include <array>
#include <cstdint>
#include <string>

class Rng {
 public:
  explicit Rng(uint64_t seed = 1);
  uint64_t next_u64();
  int below(int n);         // uniform in [0, n), n > 0
  float uniform();          // uniform in [0, 1), 24 random bits
  double normal();          // standard normal, Box–Muller
  std::string state() const;                 // 64 hex digits
  void set_state(const std::string& hex);    // throws on malformed text

 private:
  std::array<uint64_t, 4> s_;
};
