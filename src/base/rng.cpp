#include "base/rng.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

static uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

Rng::Rng(uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

// Multiply-shift (Lemire) maps 64 random bits to [0, n) with a bias below 2^-32 for the n we use.
int Rng::below(int n) { return (int)(((next_u64() >> 32) * (uint64_t)n) >> 32); }

float Rng::uniform() { return (float)(next_u64() >> 40) * (1.0f / 16777216.0f); }

double Rng::normal() {
  // u1 in (0, 1] so that log(u1) is finite.
  double u1 = ((next_u64() >> 11) + 1) * (1.0 / 9007199254740992.0);
  double u2 = (next_u64() >> 11) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::string Rng::state() const {
  char buf[65];
  for (int i = 0; i < 4; i++) std::snprintf(buf + 16 * i, 17, "%016llx", (unsigned long long)s_[i]);
  return std::string(buf, 64);
}

void Rng::set_state(const std::string& hex) {
  if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw std::runtime_error("random generator state must be 64 lowercase hex digits, got '" + hex + "'");
  for (int i = 0; i < 4; i++) s_[i] = std::stoull(hex.substr(16 * i, 16), nullptr, 16);
}
