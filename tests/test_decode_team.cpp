// Tests for the decoder's team of threads (src/base/decode_team.h): its shares cover every index once on cache-line
// bounds; every share of every job runs exactly once, whether a helper ran it or the caller took it back; the
// helpers do take part; the products split over a team (ops/linear.h) give the same bits as on one thread, so
// they are as right as the one-thread products' tests against double references say (test_sampling.cpp); and a
// decoder on 2 or 3 threads gives the 1-thread decoder's logits bit for bit, through slides, for every mixer kind.
#include <gtest/gtest.h>

#include <omp.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/decode_team.h"
#include "base/rng.h"
#include "base/threads.h"
#include "decoder_check.h"
#include "test_util.h"
#include "generate/generate.h"
#include "model/decoder.h"
#include "model/model.h"
#include "mixer_kinds.h"
#include "ops/linear.h"

namespace {

// n floats uniform in [−1, 1), the same every run.
std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937 rng(seed);
  return testutil::to_float(testutil::uniform(n, rng));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

// Shares in order, from 0 to n, each interior bound a multiple of the unit, and no share more than one unit longer
// than another.
TEST(DecodeTeam, SharesCoverEveryIndexOnceInWholeUnits) {
  for (int parts = 1; parts <= DecodeTeam::kMaxThreads; parts++)
    for (int n : {0, 1, 15, 16, 17, 65, 128, 200, 384, 512, 1000})
      for (int unit : {1, 16, 64}) {
        SCOPED_TRACE("parts " + std::to_string(parts) + " n " + std::to_string(n) + " unit " + std::to_string(unit));
        EXPECT_EQ(DecodeTeam::share_bound(n, unit, 0, parts), 0);
        EXPECT_EQ(DecodeTeam::share_bound(n, unit, parts, parts), n);
        int shortest = n + unit, longest = 0;
        for (int p = 0; p < parts; p++) {
          const int b = DecodeTeam::share_bound(n, unit, p, parts), e = DecodeTeam::share_bound(n, unit, p + 1, parts);
          EXPECT_LE(b, e);
          if (b < n) {
            EXPECT_EQ(b % unit, 0) << "bound " << b;
          }
          shortest = std::min(shortest, e - b), longest = std::max(longest, e - b);
        }
        if (n >= unit * parts) {
          EXPECT_LE(longest - shortest, unit);
        }
      }
}

// At least 3000 jobs of ~2 µs each on a team of 3, and more until a helper has run a share (a helper may be slow to
// start on a loaded machine; at most 5 s): every index of every job is written once, by its share's owner or by the
// caller taking the share back, and the helpers ran some of the shares (a team whose helpers never start would
// pass the first check and fail this one).
TEST(DecodeTeam, EveryShareRunsOnceAndTheHelpersTakePart) {
  DecodeTeam team(3);
  ASSERT_EQ(team.threads(), 3);
  const int n = 480;
  std::vector<int> hits(n, 0);
  int jobs = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (jobs < 3000 || (team.shares_by_helpers() == 0 && std::chrono::steady_clock::now() < give_up)) {
    team.split(n, 16, [&](int b, int e) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(2);
      while (std::chrono::steady_clock::now() < until) {
      }
      for (int i = b; i < e; i++) hits[i]++;
    });
    jobs++;
  }
  for (int i = 0; i < n; i++) ASSERT_EQ(hits[i], jobs) << "index " << i;
  EXPECT_EQ(team.shares_by_helpers() + team.shares_taken_back(), 2u * jobs);
  EXPECT_GT(team.shares_by_helpers(), 0u) << "the helpers never ran a share";
}

// The team's copy of a matrix is made for one shape: the same pointer read with another is a caller's bug, refused.
TEST(DecodeTeam, AMatrixReadWithTwoShapesIsRefused) {
  DecodeTeam team(2);
  const std::vector<float> w(64 * 128, 1.0f);
  EXPECT_NE(team.columns_by_share(w.data(), 64, 128, 64), nullptr);
  EXPECT_EQ(team.columns_by_share(w.data(), 64, 128, 64), team.columns_by_share(w.data(), 64, 128, 64));
  EXPECT_THROW(team.columns_by_share(w.data(), 128, 64, 64), std::logic_error);
}

// The helpers compute in the creator's floating-point mode: with denormals flushed (set_threads turns that on, on
// x86), a product whose every term is 1e-40 is 0 in every share, as on the caller.
TEST(DecodeTeam, HelpersFlushDenormalsAsTheCallerDoes) {
#if defined(__SSE2__)
  set_threads(1);  // flush-to-zero and denormals-are-zero on this thread
  DecodeTeam team(2);
  const int IC = 256, OC = 512;
  const std::vector<float> w((size_t)IC * OC, 1e-20f), x(IC, 1e-20f);
  std::vector<float> y(OC, 1.0f);
  {
    // Until the helper has run a share (it may take a while to start), for at most 2 s.
    const DecodeTeam::Scope scope(&team);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (team.shares_by_helpers() == 0 && std::chrono::steady_clock::now() < until)
      matvec(y.data(), x.data(), w.data(), nullptr, IC, OC);
  }
  ASSERT_GT(team.shares_by_helpers(), 0u) << "the helper never ran a share";
  for (int o = 0; o < OC; o++) ASSERT_EQ(y[o], 0.0f) << "column " << o;
#else
  GTEST_SKIP() << "flushing denormals is set only on x86 (SSE)";
#endif
}

// A team of 1 has no helper: everything runs on the caller, at once.
TEST(DecodeTeam, ATeamOfOneRunsOnTheCaller) {
  DecodeTeam team(1);
  int calls = 0;
  team.split(100, 16, [&](int b, int e) {
    calls++;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(team.shares_by_helpers(), 0u);
}

// matvec, matvec2 and lm_head_matvec inside a team's scope (split, reading the team's copy of W by share) against
// the same calls outside one: the same bits, for odd shapes and the tiny preset's, with and without bias, the
// outputs at every skew from a cache line. A product below the split threshold (IC·OC < 8192) runs unsplit.
TEST(DecodeTeam, SplitProductsGiveTheOneThreadBits) {
  struct Shape {
    int IC, OC;
  };
  for (int threads : {2, 3, 4})
    for (Shape s : {Shape{128, 384}, Shape{128, 128}, Shape{512, 128}, Shape{128, 512}, Shape{13, 1000},
                    Shape{130, 65}, Shape{64, 200}, Shape{40, 17}})
      for (int skew : {0, 3})
        for (bool with_bias : {true, false}) {
          SCOPED_TRACE("threads " + std::to_string(threads) + " IC " + std::to_string(s.IC) + " OC " +
                       std::to_string(s.OC) + " skew " + std::to_string(skew) + (with_bias ? " bias" : ""));
          DecodeTeam team(threads);
          const std::vector<float> w = random_floats((size_t)s.IC * s.OC, s.IC + s.OC), x0 = random_floats(s.IC, 1),
                                   x1 = random_floats(s.IC, 2), b = random_floats(s.OC, 3);
          const float* bias = with_bias ? b.data() : nullptr;
          std::vector<float> want(s.OC + skew), want0(s.OC + skew), want1(s.OC + skew), want_lm(s.OC + skew);
          matvec(want.data() + skew, x0.data(), w.data(), bias, s.IC, s.OC);
          matvec2(want0.data() + skew, want1.data() + skew, x0.data(), x1.data(), w.data(), bias, s.IC, s.OC);
          lm_head_matvec(want_lm.data() + skew, x0.data(), w.data(), s.IC, s.OC);  // w read as (V = OC, C = IC)
          std::vector<float> got(s.OC + skew), got0(s.OC + skew), got1(s.OC + skew), got_lm(s.OC + skew);
          {
            const DecodeTeam::Scope scope(&team);
            for (int twice = 0; twice < 2; twice++) {  // the second time through the team's kept copy of W
              matvec(got.data() + skew, x0.data(), w.data(), bias, s.IC, s.OC);
              matvec2(got0.data() + skew, got1.data() + skew, x0.data(), x1.data(), w.data(), bias, s.IC, s.OC);
              lm_head_matvec(got_lm.data() + skew, x0.data(), w.data(), s.IC, s.OC);
            }
          }
          EXPECT_TRUE(same_bits(got, want));
          EXPECT_TRUE(same_bits(got0, want0));
          EXPECT_TRUE(same_bits(got1, want1));
          EXPECT_TRUE(same_bits(got_lm, want_lm));
          if ((size_t)s.IC * s.OC >= 8192) {
            EXPECT_GT(team.shares_by_helpers() + team.shares_taken_back(), 0u);
          }
        }
}

namespace {

// A mixer kind (or a hybrid) at its test shapes (mixer_kinds.h), two layers at widths where every product but the
// smallest is split (IC·OC ≥ 8192), block 16.
ModelConfig team_config(const std::string& mixer) {
  const std::string layers = mixer.find(',') == std::string::npos ? mixer + "," + mixer : mixer;
  return testutil::kind_config(layers, 4, 128, 16, 70);
}

// The logits of every push of `tokens` (through slides) with `threads` OpenMP threads.
std::vector<float> decoder_logits(GPT& model, const std::vector<int>& tokens, int threads) {
  set_threads(threads);
  Decoder decoder(model);
  std::vector<float> all;
  for (int t : tokens) {
    const float* l = decoder.push(t);
    all.insert(all.end(), l, l + model.config.vocab_size);
  }
  set_threads(1);
  return all;
}

}  // namespace

// The decoder on 2 and 3 threads (a team) against the decoder on 1: the same logits, bit for bit, for 40 pushes
// (the window slides four times, and from the ninth push on every push steps the shadow too), every kind. That the
// 1-thread decoder is right is what test_decoder_shadow.cpp checks against the full recompute.
TEST(DecodeTeam, ADecoderOnATeamGivesTheOneThreadLogits) {
  for (const std::string& kind : testutil::every_kind_and_a_hybrid()) {
    SCOPED_TRACE(kind);
    GPT model(team_config(kind));
    Rng rng(7);
    for (float& p : model.params_memory()) p = (float)(0.3 * rng.normal());
    const std::vector<int> tokens = testutil::random_tokens(40, model.config.vocab_size, 5);
    const std::vector<float> one = decoder_logits(model, tokens, 1);
    for (int threads : {2, 3}) EXPECT_TRUE(same_bits(decoder_logits(model, tokens, threads), one)) << threads;
  }
}

// generate() on 2 threads picks the same tokens as on 1 (the logits are the same bits), and leaves the caller's
// thread count as it was.
TEST(DecodeTeam, GenerateOnTwoThreadsPicksTheOneThreadTokens) {
  GPT model(team_config("softmax"));
  Rng init(3);
  for (float& p : model.params_memory()) p = (float)(0.1 * init.normal());
  auto tokens = [&](int threads) {
    set_threads(threads);
    SamplingOptions options;
    Rng rng(11);
    std::vector<int> out;
    generate(model, {1, 2, 3}, 60, options, rng, -1, [&](int t) { out.push_back(t); });
    EXPECT_EQ(omp_get_max_threads(), threads);
    set_threads(1);
    return out;
  };
  const std::vector<int> one = tokens(1);
  EXPECT_EQ(one.size(), 60u);
  EXPECT_EQ(tokens(2), one);
}
