// Training objectives (src/data/objective.*) and what depends on them: MLM corruption statistics, the loss over chosen
// positions only, prefix-LM batches, the leak check (in-process and through ./train), filling blanks with an
// overfit masked-LM model, checkpoints that carry the objective and the masks, and the equal-terms evaluation.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "ops/cross_entropy.h"
#include "train/evaluate.h"
#include "generate/fill.h"
#include "ops/mask.h"
#include "model/model.h"
#include "data/objective.h"
#include "model/params.h"
#include "checkpoint_bytes.h"
#include "program_util.h"
#include "base/rng.h"
#include "test_util.h"
#include "base/threads.h"
#include "data/tokenizer.h"

using progutil::quote;
using progutil::read_file;
using progutil::RunResult;
using progutil::TempDir;
using progutil::write_file;

namespace {

// Tiny shapes run on one thread (on a busy machine every OpenMP barrier otherwise waits for a descheduled
// thread). Restores the count afterwards.
struct SingleThread {
  int saved = omp_get_max_threads();
  SingleThread() { set_threads(1); }
  ~SingleThread() { set_threads(saved); }
};

ModelConfig make_config(int n_layer, int n_head, int n_embd, int block_size, int vocab_size) {
  ModelConfig c;
  c.n_layer = n_layer, c.n_head = n_head, c.n_embd = n_embd, c.block_size = block_size, c.vocab_size = vocab_size;
  return c;
}

// Parameters far from the initialisation, so predictions differ clearly from position to position.
void spread_params(GPT& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const TensorSpec& t : model.table()) {
    const bool ln_weight = t.name.find("ln_") != std::string::npos && t.name.find(".weight") != std::string::npos;
    for (size_t i = 0; i < t.numel; i++)
      model.params_memory()[t.offset + i] = (float)(ln_weight ? 1.0 + 0.3 * normal(rng) : 0.3 * normal(rng));
  }
}


// −log p(target) from one row of logits, in double: log Σ exp(z) − z_target.
double nats_of(const float* z, int V, int target) {
  const double m = *std::max_element(z, z + V);
  double sum = 0;
  for (int v = 0; v < V; v++) sum += std::exp((double)z[v] - m);
  return std::log(sum) + m - (double)z[target];
}

int argmax(const float* z, int V) { return (int)(std::max_element(z, z + V) - z); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Names

TEST(ObjectiveParse, RoundTripsAndRejectsUnknownNames) {
  for (Objective o : {Objective::CLM, Objective::MLM, Objective::PrefixLM}) EXPECT_EQ(parse_objective(to_string(o)), o);
  EXPECT_EQ(to_string(Objective::CLM), "clm");
  EXPECT_EQ(to_string(Objective::MLM), "mlm");
  EXPECT_EQ(to_string(Objective::PrefixLM), "prefix-lm");
  for (const char* bad : {"nonsense", "CLM", "", "prefix", "prefix_lm", "mlm "}) {
    const std::string message = error_of([&] { parse_objective(bad); });
    EXPECT_FALSE(message.empty()) << "accepted '" << bad << "'";
    EXPECT_CONTAINS(message, "'" + std::string(bad) + "'");
  }
}

TEST(ObjectiveParse, DefaultMasks) {
  EXPECT_EQ(default_mask(Objective::CLM), "causal");
  EXPECT_EQ(default_mask(Objective::MLM), "bidirectional");
  EXPECT_EQ(default_mask(Objective::PrefixLM), "prefix:0");
  // Each is a valid mask, and none makes its own objective leak.
  for (Objective o : {Objective::CLM, Objective::MLM, Objective::PrefixLM}) {
    const std::vector<AttentionMask> masks = parse_layer_masks(default_mask(o), 3);
    EXPECT_NO_THROW(check_no_leak(o, masks, 64)) << to_string(o);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// MLM corruption (BERT): choose round(rate·T) positions (at least 1); of those 80% → [MASK], 10% → a random
// character, 10% unchanged; targets the original characters there and kNoTarget elsewhere.

TEST(ObjectiveMlmCorruption, StatisticsOverManySequences) {
  const int T = 64, S = 20000, num_chars = 30, mask_id = num_chars;
  const int expected_chosen = 10;  // round(0.15 · 64 = 9.6)
  BatchMaker batches(Objective::MLM, 0.15f, mask_id, num_chars);
  Rng rng(2024);
  std::mt19937 text_rng(5);
  std::uniform_int_distribution<int> char_id(0, num_chars - 1);
  std::vector<int> original(T), x(T), y(T);
  long chosen_total = 0, masked = 0, replaced = 0, kept = 0;
  std::vector<long> chosen_at(T, 0), replacement_hist(num_chars, 0);
  std::vector<int> previous_set;
  int same_as_previous = 0;
  for (int s = 0; s < S; s++) {
    for (int& c : original) c = char_id(text_rng);
    x = original;
    batches.corrupt(x.data(), y.data(), T, rng);
    std::vector<int> set;
    for (int t = 0; t < T; t++) {
      if (y[t] == kNoTarget) {
        ASSERT_EQ(x[t], original[t]) << "sequence " << s << ": unchosen position " << t << " was changed";
        continue;
      }
      ASSERT_EQ(y[t], original[t]) << "sequence " << s << ": the target must be the original character";
      set.push_back(t);
      chosen_at[t]++;
      if (x[t] == mask_id) {
        masked++;
      } else {
        ASSERT_TRUE(x[t] >= 0 && x[t] < num_chars) << "a replacement must be a character, got " << x[t];
        if (x[t] == original[t]) kept++;
        else replaced++, replacement_hist[x[t]]++;
      }
    }
    ASSERT_EQ((int)set.size(), expected_chosen) << "sequence " << s;
    same_as_previous += set == previous_set;
    previous_set = set;
    chosen_total += (long)set.size();
  }
  ASSERT_EQ(chosen_total, (long)S * expected_chosen);
  // Fractions among chosen positions. A random replacement equals the original with probability 1/num_chars, so
  // "kept" is 10% + 10%/num_chars and a visible change 10%·(1 − 1/num_chars). Within 4 standard errors.
  const double n = (double)chosen_total;
  auto expect_fraction = [&](long count, double p, const char* what) {
    const double se = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(count / n, p, 4 * se) << what << ": " << count << " of " << n;
  };
  expect_fraction(masked, 0.8, "[MASK]");
  expect_fraction(replaced, 0.1 * (1 - 1.0 / num_chars), "random other character");
  expect_fraction(kept, 0.1 + 0.1 / num_chars, "unchanged");
  // The random characters cover [0, num_chars) evenly (chi-square, 29 degrees of freedom; 75 is p ≈ 1e-5).
  double chi2 = 0;
  for (int c = 0; c < num_chars; c++) {
    const double e = replaced / (double)num_chars;
    chi2 += (replacement_hist[c] - e) * (replacement_hist[c] - e) / e;
  }
  EXPECT_LT(chi2, 75.0) << "replacement characters are not uniform";
  // Every position is chosen equally often (p = 10/64 each), and draws differ from one another.
  for (int t = 0; t < T; t++) {
    const double p = (double)expected_chosen / T, se = std::sqrt(S * p * (1 - p));
    EXPECT_NEAR((double)chosen_at[t], S * p, 4.5 * se) << "position " << t;
  }
  EXPECT_EQ(same_as_previous, 0) << "consecutive draws chose the same positions";
}

TEST(ObjectiveMlmCorruption, ChosenCountFollowsTheRate) {
  const int num_chars = 20, mask_id = 20;
  const struct {
    float rate;
    int T, chosen;
  } cases[] = {{0.5f, 64, 32}, {1.0f, 64, 64}, {0.15f, 20, 3}, {0.15f, 3, 1} /* round(0.45) = 0 → at least 1 */,
               {0.001f, 64, 1}, {0.25f, 16, 4}, {0.15f, 1, 1}};
  for (const auto& c : cases) {
    BatchMaker batches(Objective::MLM, c.rate, mask_id, num_chars);
    Rng rng(77);
    for (int rep = 0; rep < 50; rep++) {
      std::vector<int> x = testutil::random_ids(c.T, num_chars, rep), original = x, y(c.T);
      batches.corrupt(x.data(), y.data(), c.T, rng);
      int chosen = 0;
      for (int t = 0; t < c.T; t++) {
        if (y[t] != kNoTarget) {
          chosen++;
          EXPECT_EQ(y[t], original[t]);
        } else {
          EXPECT_EQ(x[t], original[t]);
        }
      }
      ASSERT_EQ(chosen, c.chosen) << "rate " << c.rate << " T " << c.T;
    }
  }
  // Construction checks.
  EXPECT_THROW(BatchMaker(Objective::MLM, 0.15f, -1, 10), std::runtime_error);  // no [MASK]
  EXPECT_THROW(BatchMaker(Objective::MLM, 0.15f, 10, 0), std::runtime_error);   // no characters
  EXPECT_THROW(BatchMaker(Objective::MLM, 0.0f, 10, 10), std::runtime_error);
  EXPECT_THROW(BatchMaker(Objective::MLM, 1.5f, 10, 10), std::runtime_error);
  EXPECT_NO_THROW(BatchMaker{Objective::CLM});
}

// BatchMaker::next for MLM: windows of the token stream, corrupted. The stream is 0, 1, 2, … (mod 50), so the
// window's start can be read off any unchosen position and every target checked against the true stream.
TEST(ObjectiveMlmCorruption, NextCorruptsWindowsOfTheStream) {
  const int num_chars = 50, mask_id = 50, B = 8, T = 16;
  std::vector<int> tokens(1000);
  for (int k = 0; k < (int)tokens.size(); k++) tokens[k] = k % num_chars;
  BatchMaker batches(Objective::MLM, 0.15f, mask_id, num_chars);
  Rng rng(3);
  std::vector<int> x(B * T), y(B * T);
  for (int rep = 0; rep < 50; rep++) {
    EXPECT_EQ(batches.next(tokens, B, T, rng, x.data(), y.data()), -1);
    for (int b = 0; b < B; b++) {
      int start = -1, chosen = 0;
      for (int t = 0; t < T && start < 0; t++)
        if (y[b * T + t] == kNoTarget) start = ((x[b * T + t] - t) % num_chars + num_chars) % num_chars;
      ASSERT_GE(start, 0);
      for (int t = 0; t < T; t++) {
        const int truth = (start + t) % num_chars;
        if (y[b * T + t] == kNoTarget) {
          EXPECT_EQ(x[b * T + t], truth) << "row " << b << " position " << t;
        } else {
          EXPECT_EQ(y[b * T + t], truth) << "row " << b << " position " << t;
          chosen++;
        }
      }
      EXPECT_EQ(chosen, 2);  // round(0.15 · 16 = 2.4)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The loss counts only positions with a target

TEST(ObjectiveLoss, MeanIsOverChosenPositionsOnly) {
  SingleThread one_thread;
  const int B = 2, T = 8, V = 9;
  GPT model(make_config(2, 2, 8, T, V), parse_layer_masks("bidirectional", 2));
  spread_params(model, 11);
  const std::vector<int> x = testutil::random_ids(B * T, V, 12), all = testutil::random_ids(B * T, V, 13);
  std::vector<int> y(B * T, kNoTarget);
  for (int i : {1, 4, 5, 9, 15}) y[i] = all[i];  // five chosen positions of sixteen
  const float loss = model.forward(x.data(), y.data(), B, T);
  double chosen_sum = 0, all_rows_sum = 0;
  for (int i = 0; i < B * T; i++) {
    all_rows_sum += nats_of(model.logits() + (size_t)i * V, V, all[i]);
    if (y[i] != kNoTarget) chosen_sum += nats_of(model.logits() + (size_t)i * V, V, y[i]);
  }
  EXPECT_NEAR(loss, chosen_sum / 5, 1e-5 * chosen_sum / 5);
  // The alternatives a bug would produce are far from it: dividing by every row, or counting every row.
  EXPECT_GT(std::fabs(chosen_sum / 5 - chosen_sum / (B * T)), 0.1);
  EXPECT_GT(std::fabs(chosen_sum / 5 - all_rows_sum / (B * T)), 1e-3);

  // The same loss as the mean of five forwards with one target each (bidirectional: the logits do not depend on
  // the targets).
  double separate = 0;
  for (int i : {1, 4, 5, 9, 15}) {
    std::vector<int> one(B * T, kNoTarget);
    one[i] = y[i];
    separate += model.forward(x.data(), one.data(), B, T);
  }
  EXPECT_NEAR(loss, separate / 5, 1e-5 * separate / 5);
}

// Rows without a target may hold anything: with a causal model, changing the inputs of the last two positions
// changes only those rows' logits; with kNoTarget there, the loss is bit-identical.
TEST(ObjectiveLoss, IgnoredRowsDoNotChangeTheLoss) {
  SingleThread one_thread;
  const int B = 1, T = 8, V = 9;
  GPT model(make_config(2, 2, 8, T, V));
  spread_params(model, 21);
  std::vector<int> x = testutil::random_ids(T, V, 22), y = testutil::random_ids(T, V, 23);
  y[T - 2] = y[T - 1] = kNoTarget;
  const float loss = model.forward(x.data(), y.data(), B, T);
  const std::vector<float> logits(model.logits(), model.logits() + T * V);
  x[T - 2] = (x[T - 2] + 1) % V, x[T - 1] = (x[T - 1] + 3) % V;
  const float loss2 = model.forward(x.data(), y.data(), B, T);
  EXPECT_EQ(loss, loss2);
  double changed = 0;
  for (int i = (T - 2) * V; i < T * V; i++) changed += std::fabs(model.logits()[i] - logits[i]);
  EXPECT_GT(changed, 1e-3) << "the ignored rows' logits should have changed";
  for (int i = 0; i < (T - 2) * V; i++) ASSERT_EQ(model.logits()[i], logits[i]) << "causal: earlier rows unchanged";
  // And giving one of those rows a target does change it.
  y[T - 1] = 0;
  EXPECT_NE(model.forward(x.data(), y.data(), B, T), loss);
}

// ---------------------------------------------------------------------------------------------------------------
// Prefix-LM batches: N in [1, T−1]; no target inside the prefix except at its last position, which predicts the
// first character after it; next-character targets from there on.

TEST(ObjectivePrefixLm, BatchesHideTargetsInsideThePrefix) {
  const int V = 50, B = 4, T = 16, draws = 3000;
  std::vector<int> tokens(2000);
  for (int k = 0; k < (int)tokens.size(); k++) tokens[k] = k % V;
  BatchMaker batches(Objective::PrefixLM);
  Rng rng(8);
  std::vector<int> x(B * T), y(B * T);
  std::vector<int> seen(T + 1, 0);
  for (int d = 0; d < draws; d++) {
    const int N = batches.next(tokens, B, T, rng, x.data(), y.data());
    ASSERT_TRUE(N >= 1 && N <= T - 1) << "N = " << N;
    seen[N]++;
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        if (t + 1 < T) {
          ASSERT_EQ(x[b * T + t + 1], (x[b * T + t] + 1) % V) << "x must be a window of the stream";
        }
        if (t < N - 1) {
          ASSERT_EQ(y[b * T + t], kNoTarget) << "N=" << N << " t=" << t;
        } else {
          ASSERT_EQ(y[b * T + t], (x[b * T + t] + 1) % V) << "N=" << N << " t=" << t;
        }
      }
  }
  // Every N from 1 to T−1 is drawn, about equally often (expected 200 each, standard deviation ≈ 14).
  for (int N = 1; N <= T - 1; N++) EXPECT_NEAR(seen[N], draws / (T - 1.0), 5 * 14.0) << "N = " << N;
  // T = 2: the only choice is N = 1, and every position keeps its target.
  for (int d = 0; d < 20; d++) {
    ASSERT_EQ(batches.next(tokens, 1, 2, rng, x.data(), y.data()), 1);
    EXPECT_NE(y[0], kNoTarget);
    EXPECT_NE(y[1], kNoTarget);
  }
}

TEST(ObjectivePrefixLm, SetPrefixLengthChangesOnlyPrefixLayers) {
  GPT model(make_config(5, 1, 4, 8, 5), parse_layer_masks("prefix:0,causal,window:3,prefix:5,bidirectional", 5));
  model.set_prefix_length(4);
  EXPECT_EQ(masks_to_string(model.masks()), "prefix:4,causal,window:3,prefix:4,bidirectional");
  model.set_prefix_length(0);
  EXPECT_EQ(masks_to_string(model.masks()), "prefix:0,causal,window:3,prefix:0,bidirectional");
}

// ---------------------------------------------------------------------------------------------------------------
// The leak check

TEST(ObjectiveLeak, CheckNoLeakRefusesMasksThatShowTheAnswer) {
  const int T = 16;
  auto masks = [](const std::string& text, int n) { return parse_layer_masks(text, n); };
  const std::string bidir = error_of([&] { check_no_leak(Objective::CLM, masks("bidirectional", 1), T); });
  EXPECT_CONTAINS(bidir, "leak");
  EXPECT_CONTAINS(bidir, "--allow-leak");
  EXPECT_CONTAINS(bidir, "bidirectional");

  const std::string mixed =
      error_of([&] { check_no_leak(Objective::CLM, masks("causal,bidirectional,window:4", 3), T); });
  EXPECT_CONTAINS(mixed, "layer 1");
  EXPECT_CONTAINS(mixed, "bidirectional");
  EXPECT_CONTAINS(mixed, "--allow-leak");
  const std::string prefix = error_of([&] { check_no_leak(Objective::CLM, masks("causal,causal,prefix:4", 3), T); });
  EXPECT_CONTAINS(prefix, "layer 2");
  EXPECT_CONTAINS(prefix, "prefix:4");

  for (const char* ok : {"causal", "window:1", "window:4", "window:16", "window:40", "prefix:0", "prefix:1"})
    EXPECT_EQ(error_of([&] { check_no_leak(Objective::CLM, masks(ok, 2), T); }), "") << "clm + " << ok;
  EXPECT_EQ(error_of([&] { check_no_leak(Objective::CLM, masks("causal,window:3", 2), T); }), "");
  for (const char* ok : {"bidirectional", "causal", "prefix:3", "window:2", "causal,bidirectional"})
    EXPECT_EQ(error_of([&] { check_no_leak(Objective::MLM, masks(ok, 2), T); }), "") << "mlm + " << ok;
  for (const char* ok : {"prefix:0", "prefix:5", "causal", "window:3", "prefix:0,causal", "window:2,prefix:0"})
    EXPECT_EQ(error_of([&] { check_no_leak(Objective::PrefixLM, masks(ok, 2), T); }), "") << "prefix-lm + " << ok;
  const std::string plm = error_of([&] { check_no_leak(Objective::PrefixLM, masks("bidirectional", 1), T); });
  EXPECT_CONTAINS(plm, "leak");
  const std::string plm_mixed =
      error_of([&] { check_no_leak(Objective::PrefixLM, masks("prefix:0,bidirectional", 2), T); });
  EXPECT_CONTAINS(plm_mixed, "layer 1");
}

// ---------------------------------------------------------------------------------------------------------------
// ./train with objectives and masks (run from the repository root after `make programs`)

namespace {

class ObjectivePrograms : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(progutil::file_exists("./train")) << "run the tests from the repository root after `make programs`";
    corpus_ = dir_ / "corpus.txt";
    write_file(corpus_, progutil::generated_text(4000));
  }
  RunResult train(const std::string& out, const std::string& extra) {
    return progutil::run_command("./train " + std::string(progutil::tiny_flags()) + " --steps 5 --data " +
                                     quote(corpus_) + " --out " + quote(out) + " " + extra,
                                 dir_.path());
  }
  static void expect_failure(const RunResult& r, const std::vector<std::string>& words) {
    EXPECT_TRUE(r.exited) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, "train: error: ");
    for (const std::string& w : words) EXPECT_CONTAINS(r.err, w);
  }
  static void expect_success(const RunResult& r) { EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe(); }

  TempDir dir_;
  std::string corpus_;
};

}  // namespace

TEST_F(ObjectivePrograms, BidirectionalNextCharacterTrainingIsRefused) {
  const std::string out = dir_ / "bidir";
  expect_failure(train(out, "--mask bidirectional"), {"leak", "--allow-leak", "bidirectional"});
  EXPECT_FALSE(progutil::file_exists(out + "/ckpt.safetensors"));
  expect_failure(train(dir_ / "mixed", "--layer-masks causal,bidirectional --n-layer 2"),
                 {"leak", "--allow-leak", "layer 1"});
}

TEST_F(ObjectivePrograms, AllowLeakTrainsAndReportsTheHonestNumber) {
  for (const char* flags : {"--mask bidirectional --allow-leak", "--layer-masks causal,bidirectional --n-layer 2 --allow-leak"}) {
    SCOPED_TRACE(flags);
    const RunResult r = train(dir_ / "leak", flags + std::string(" --overwrite"));
    expect_success(r);
    EXPECT_CONTAINS(r.out, "honest next-char");
    // The number itself: bits per character, positive and finite (an untrained model: about log2 of the vocabulary).
    const size_t at = r.out.rfind("honest next-char ");
    ASSERT_NE(at, std::string::npos);
    const double bits = std::atof(r.out.c_str() + at + std::string("honest next-char ").size());
    EXPECT_GT(bits, 1.0);
    EXPECT_LT(bits, 8.0);
  }
}

TEST_F(ObjectivePrograms, MlmTrainsAndItsCheckpointSaysSo) {
  const std::string out = dir_ / "mlm";
  const RunResult r = train(out, "--objective mlm");
  expect_success(r);
  EXPECT_CONTAINS(r.out, "honest next-char");
  Checkpoint c = load_checkpoint(out + "/ckpt.safetensors");
  EXPECT_EQ(c.objective, Objective::MLM);
  ASSERT_EQ(c.model->masks().size(), 1u);
  EXPECT_EQ(c.model->masks()[0], AttentionMask::parse("bidirectional"));
  EXPECT_EQ(c.tokenizer.specials(), std::vector<std::string>{kMaskToken});
  EXPECT_EQ(c.tokenizer.special_id(kMaskToken), c.tokenizer.num_chars());
  EXPECT_EQ(c.model->config.vocab_size, c.tokenizer.num_chars() + 1);
}

TEST_F(ObjectivePrograms, PrefixLmTrains) {
  const std::string out = dir_ / "plm";
  const RunResult r = train(out, "--objective prefix-lm --n-layer 2");
  expect_success(r);
  EXPECT_CONTAINS(r.out, "honest next-char");
  Checkpoint c = load_checkpoint(out + "/ckpt.safetensors");
  EXPECT_EQ(c.objective, Objective::PrefixLM);
  ASSERT_EQ(c.model->masks().size(), 2u);
  for (const AttentionMask& m : c.model->masks()) EXPECT_EQ(m.kind, AttentionMask::Prefix);
  EXPECT_EQ(c.tokenizer.special_id(kMaskToken), -1);
}

TEST_F(ObjectivePrograms, UnknownObjectiveAndMaskAreNamed) {
  expect_failure(train(dir_ / "a", "--objective nonsense"), {"nonsense"});
  expect_failure(train(dir_ / "b", "--mask sideways"), {"sideways"});
  expect_failure(train(dir_ / "c", "--layer-masks causal,sideways --n-layer 2"), {"sideways"});
  expect_failure(train(dir_ / "d", "--layer-masks causal,causal,causal --n-layer 2"), {"3 entries", "2 layers"});
}

// ---------------------------------------------------------------------------------------------------------------
// Filling blanks: a tiny bidirectional MLM model overfit on one sentence restores it.

namespace {


}  // namespace

TEST(ObjectiveFill, OverfitMlmModelRestoresItsSentence) {
  SingleThread one_thread;
  const std::u32string sentence = U"the cat sat on the mat.";
  Tokenizer tok = Tokenizer::from_text(sentence);
  const int mask_id = tok.add_special(kMaskToken), num_chars = tok.num_chars();
  const std::vector<int> ids = tok.encode(sentence, "sentence");
  const int T = (int)ids.size(), B = 8;
  GPT model(make_config(2, 2, 32, T, tok.size()), parse_layer_masks("bidirectional", 2));
  model.init_weights(31);
  BatchMaker batches(Objective::MLM, 0.15f, mask_id, num_chars);
  Rng rng(32);
  testutil::TestAdam adam;
  std::vector<int> x(B * T), y(B * T);
  float loss = 0;
  int step = 0;
  for (; step < 1500; step++) {
    for (int b = 0; b < B; b++) {
      std::copy(ids.begin(), ids.end(), x.begin() + b * T);
      batches.corrupt(x.data() + b * T, y.data() + b * T, T, rng);
    }
    model.zero_grad();
    loss = model.forward(x.data(), y.data(), B, T);
    model.backward();
    adam.update(model, 1e-2f);
    if (step >= 100 && step % 50 == 0) {
      // Overfit: every single position, masked alone, is recovered with high confidence.
      double worst = 0;
      for (int t = 0; t < T; t++) {
        std::vector<int> probe = ids, target(T, kNoTarget);
        probe[t] = mask_id, target[t] = ids[t];
        worst = std::max(worst, (double)model.forward(probe.data(), target.data(), 1, T));
      }
      if (worst < 0.05) break;
    }
  }
  RecordProperty("steps", step);
  for (const std::vector<int>& blanks : std::vector<std::vector<int>>{{4, 5}, {0, 9, 20}, {15, 22}, {12, 13, 14}}) {
    std::vector<int> input = ids;
    for (int t : blanks) input[t] = mask_id;
    const std::vector<int> filled = fill_blanks(model, input, mask_id, num_chars);
    EXPECT_EQ(tok.decode(filled), "the cat sat on the mat.") << "blanks at " << blanks[0] << "… after " << step
                                                             << " steps, last batch loss " << loss;
  }
}

// A model whose most likely output is [MASK] everywhere: fill_blanks must still write only characters.
TEST(ObjectiveFill, WritesOnlyCharactersAndKeepsTheRest) {
  SingleThread one_thread;
  const int num_chars = 6, mask_id = 6, T = 10, C = 8;
  GPT model(make_config(1, 2, C, T, num_chars + 1), parse_layer_masks("bidirectional", 1));
  spread_params(model, 41);
  // The tied LM head scores token v by (final LayerNorm output)·wte[v]. A large final bias along the last
  // dimension, and a [MASK] row along that same dimension, make [MASK] win by a wide margin.
  for (int k = 0; k < C; k++) model.params().ln_f_b[k] = k == C - 1 ? 5.0f : 0.0f;
  for (int k = 0; k < C; k++) model.params().wte[mask_id * C + k] = k == C - 1 ? 5.0f : 0.0f;
  {
    const std::vector<int> probe = testutil::random_ids(T, num_chars + 1, 99);
    model.forward(probe.data(), nullptr, 1, T);
    for (int t = 0; t < T; t++)
      ASSERT_EQ(argmax(model.logits() + (size_t)t * (num_chars + 1), num_chars + 1), mask_id) << "position " << t;
  }
  for (int rep = 0; rep < 20; rep++) {
    std::vector<int> ids = testutil::random_ids(T, num_chars, 100 + rep);
    const std::vector<int> original = ids;
    for (int t = rep % 3; t < T; t += 3) ids[t] = mask_id;
    const std::vector<int> filled = fill_blanks(model, ids, mask_id, num_chars);
    ASSERT_EQ(filled.size(), ids.size());
    for (int t = 0; t < T; t++) {
      EXPECT_TRUE(filled[t] >= 0 && filled[t] < num_chars) << "position " << t << " holds " << filled[t];
      if (ids[t] != mask_id) {
        EXPECT_EQ(filled[t], original[t]) << "a given character was changed at " << t;
      }
    }
  }
  std::vector<int> too_long(T + 1, mask_id);
  EXPECT_THROW(fill_blanks(model, too_long, mask_id, num_chars), std::runtime_error);
}

// ---------------------------------------------------------------------------------------------------------------
// Checkpoints carry the objective and the masks

namespace {

// Rewrites one "__metadata__" field of a safetensors file by hand (header length, JSON header, data section).
void rewrite_metadata(const std::string& from, const std::string& to, const std::string& key, const std::string& value) {
  const std::string bytes = read_file(from);
  ASSERT_GE(bytes.size(), 8u);
  nlohmann::ordered_json header = ckptbytes::header_of(bytes);
  ASSERT_TRUE(header["__metadata__"].contains(key));
  header["__metadata__"][key] = value;
  // As if written that way: the header's checksum is brought up to date, so the load reaches the value's check.
  write_file(to, ckptbytes::with_header_and_its_checksum(bytes, header));
}

struct SmallModel {
  Tokenizer tokenizer;
  std::unique_ptr<GPT> model;
  explicit SmallModel(const std::string& masks, bool with_mask_token = true) {
    tokenizer = Tokenizer::from_text(U"abcdefg .");
    if (with_mask_token) tokenizer.add_special(kMaskToken);
    const int L = (int)std::count(masks.begin(), masks.end(), ',') + 1;
    model = std::make_unique<GPT>(make_config(L, 2, 8, 8, tokenizer.size()), parse_layer_masks(masks, L));
    model->init_weights(3);
  }
};

}  // namespace

TEST(ObjectiveCheckpoint, RoundTripsObjectiveAndMasks) {
  TempDir dir;
  const struct {
    Objective objective;
    const char* masks;
  } cases[] = {{Objective::MLM, "causal,window:3,bidirectional,prefix:2"},
               {Objective::PrefixLM, "prefix:0,window:2,prefix:0"},
               {Objective::CLM, "window:5,causal"},
               {Objective::MLM, "bidirectional"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.masks) + " " + to_string(c.objective));
    SmallModel m(c.masks);
    const std::string path = dir / "ckpt.safetensors";
    save_checkpoint(path, *m.model, m.tokenizer, nullptr, c.objective);
    Checkpoint loaded = load_checkpoint(path);
    EXPECT_EQ(loaded.objective, c.objective);
    EXPECT_EQ(loaded.model->masks(), m.model->masks());
    EXPECT_EQ(masks_to_string(loaded.model->masks()), c.masks);
    EXPECT_EQ(loaded.metadata.at("objective"), to_string(c.objective));
  }
  // Without the argument a checkpoint is a next-character (clm) model.
  SmallModel m("causal");
  save_checkpoint(dir / "default.safetensors", *m.model, m.tokenizer, nullptr);
  EXPECT_EQ(load_checkpoint(dir / "default.safetensors").objective, Objective::CLM);
}

TEST(ObjectiveCheckpoint, BadMaskOrObjectiveFailsNamingTheValue) {
  TempDir dir;
  SmallModel m("causal,window:3");
  const std::string good = dir / "good.safetensors";
  save_checkpoint(good, *m.model, m.tokenizer, nullptr, Objective::MLM);
  // The hand rewrite itself keeps a good file loadable.
  rewrite_metadata(good, dir / "same.safetensors", "mask", "causal,window:3");
  ASSERT_NO_THROW(load_checkpoint(dir / "same.safetensors"));

  auto load_error = [](const std::string& path) { return error_of([&] { load_checkpoint(path); }); };
  rewrite_metadata(good, dir / "mask.safetensors", "mask", "sideways");
  const std::string mask_error = load_error(dir / "mask.safetensors");
  EXPECT_CONTAINS(mask_error, "sideways");
  EXPECT_CONTAINS(mask_error, dir / "mask.safetensors");
  rewrite_metadata(good, dir / "mask2.safetensors", "mask", "causal,sideways");
  EXPECT_CONTAINS(load_error(dir / "mask2.safetensors"), "sideways");
  rewrite_metadata(good, dir / "objective.safetensors", "objective", "nonsense");
  const std::string objective_error = load_error(dir / "objective.safetensors");
  EXPECT_CONTAINS(objective_error, "nonsense");
  EXPECT_CONTAINS(objective_error, dir / "objective.safetensors");

  // An MLM checkpoint must have the [MASK] token.
  SmallModel no_mask("bidirectional", /*with_mask_token=*/false);
  save_checkpoint(dir / "nomask.safetensors", *no_mask.model, no_mask.tokenizer, nullptr, Objective::MLM);
  EXPECT_CONTAINS(load_error(dir / "nomask.safetensors"), kMaskToken);
}

// ---------------------------------------------------------------------------------------------------------------
// Equal-terms evaluation (src/train/evaluate.h)

namespace {

// −log2 p(target | row) at the row's last position, and whether the argmax is the target, from one forward.
std::pair<double, bool> last_position(GPT& model, const std::vector<int>& row, int target) {
  const int T = (int)row.size(), V = model.config.vocab_size;
  model.forward(row.data(), nullptr, 1, T);
  const float* z = model.logits() + (size_t)(T - 1) * V;
  return {nats_of(z, V, target) / std::log(2.0), argmax(z, V) == target};
}

}  // namespace

// With a text of exactly T+1 characters the only position with a full left context is the last one, so
// next_char_score must be the last position of a forward over the first T characters.
TEST(ObjectiveEvaluate, NextCharScoreIsTheLastPositionOfAForward) {
  SingleThread one_thread;
  const int T = 8, V = 9;
  GPT model(make_config(2, 2, 8, T, V));
  spread_params(model, 51);
  for (uint32_t seed = 0; seed < 6; seed++) {
    const std::vector<int> text = testutil::random_ids(T + 1, V, 60 + seed);
    const auto [bits, right] = last_position(model, std::vector<int>(text.begin(), text.begin() + T), text[T]);
    for (int count : {1, 5}) {
      const CharScore s = next_char_score(model, text, count, 7 + seed, -1);
      EXPECT_EQ(s.count, count);
      EXPECT_NEAR(s.bits, bits, 1e-5 * std::max(1.0, bits)) << "text " << seed;
      EXPECT_EQ(s.accuracy, right ? 1.0 : 0.0);
    }
  }
  // T+2 characters: two possible positions. The score is a mix of the two with integer weights summing to count.
  const std::vector<int> text = testutil::random_ids(T + 2, V, 70);
  const double a = last_position(model, std::vector<int>(text.begin(), text.begin() + T), text[T]).first;
  const double b = last_position(model, std::vector<int>(text.begin() + 1, text.begin() + T + 1), text[T + 1]).first;
  ASSERT_GT(std::fabs(a - b), 1e-3);
  const int count = 40;
  const CharScore s = next_char_score(model, text, count, 3, -1);
  const double k = (s.bits * count - b * count) / (a - b);  // how many rows scored the first position
  EXPECT_NEAR(k, std::round(k), 1e-3) << "not a mix of the two positions: " << s.bits << " from " << a << ", " << b;
  EXPECT_GT(std::round(k), 0);
  EXPECT_LT(std::round(k), count);
  // Too short a text is refused.
  EXPECT_THROW(next_char_score(model, std::vector<int>(text.begin(), text.begin() + T), 1, 1, -1), std::runtime_error);
}

// An MLM model predicts character T at an appended [MASK], after the T−1 characters before it.
TEST(ObjectiveEvaluate, NextCharScoreOfAnMlmModelReadsAtAppendedMask) {
  SingleThread one_thread;
  const int T = 8, num_chars = 8, mask_id = 8, V = 9;
  GPT model(make_config(2, 2, 8, T, V), parse_layer_masks("bidirectional", 2));
  spread_params(model, 52);
  for (uint32_t seed = 0; seed < 4; seed++) {
    const std::vector<int> text = testutil::random_ids(T + 1, num_chars, 80 + seed);
    std::vector<int> row(text.begin() + 1, text.begin() + T);
    row.push_back(mask_id);
    const auto [bits, right] = last_position(model, row, text[T]);
    const CharScore s = next_char_score(model, text, 3, 1, mask_id);
    EXPECT_NEAR(s.bits, bits, 1e-5 * std::max(1.0, bits));
    EXPECT_EQ(s.accuracy, right ? 1.0 : 0.0);
  }
}

// A prefix-LM is scored with its prefix opened to the whole row, and gets its own masks back afterwards.
TEST(ObjectiveEvaluate, NextCharScoreOpensPrefixesAndRestoresThem) {
  SingleThread one_thread;
  const int T = 8, V = 9;
  GPT model(make_config(2, 2, 8, T, V), parse_layer_masks("prefix:2,causal", 2));
  spread_params(model, 53);
  const std::vector<int> text = testutil::random_ids(T + 1, V, 90);
  const std::vector<AttentionMask> before = model.masks();
  const CharScore s = next_char_score(model, text, 2, 1, -1);
  EXPECT_EQ(model.masks(), before);
  model.set_masks(parse_layer_masks("prefix:8,causal", 2));
  const double open = last_position(model, std::vector<int>(text.begin(), text.begin() + T), text[T]).first;
  model.set_masks(before);
  const double closed = last_position(model, std::vector<int>(text.begin(), text.begin() + T), text[T]).first;
  ASSERT_GT(std::fabs(open - closed), 1e-4) << "the test needs a model where the two differ";
  EXPECT_NEAR(s.bits, open, 1e-5 * std::max(1.0, open));
}

// rate 1: every position is chosen, so the score is fully predictable. An MLM model sees whole windows of [MASK];
// a causal model predicts each character from the T characters before it.
TEST(ObjectiveEvaluate, MaskedCharScoreWithEveryPositionChosen) {
  SingleThread one_thread;
  const int T = 8, num_chars = 8, mask_id = 8, V = 9, windows = 3;
  const std::vector<int> text = testutil::random_ids(T * (windows + 1), num_chars, 95);

  GPT mlm(make_config(2, 2, 8, T, V), parse_layer_masks("bidirectional", 2));
  spread_params(mlm, 54);
  double nats = 0;
  long correct = 0;
  for (int w = 0; w < windows; w++) {
    const std::vector<int> masked(T, mask_id);
    mlm.forward(masked.data(), nullptr, 1, T);
    for (int t = 0; t < T; t++) {
      const int truth = text[(w + 1) * T + t];
      nats += nats_of(mlm.logits() + (size_t)t * V, V, truth);
      correct += argmax(mlm.logits() + (size_t)t * V, V) == truth;
    }
  }
  const CharScore s = masked_char_score(mlm, text, windows, 1.0f, 5, mask_id);
  EXPECT_EQ(s.count, (long)windows * T);
  EXPECT_NEAR(s.bits, nats / (windows * T) / std::log(2.0), 1e-5 * s.bits);
  EXPECT_DOUBLE_EQ(s.accuracy, (double)correct / (windows * T));

  GPT causal(make_config(2, 2, 8, T, V));
  spread_params(causal, 55);
  nats = 0, correct = 0;
  for (int w = 0; w < windows; w++)
    for (int t = 0; t < T; t++) {
      const int end = (w + 1) * T + t;
      const auto [bits, right] = last_position(causal, std::vector<int>(text.begin() + end - T, text.begin() + end), text[end]);
      nats += bits * std::log(2.0), correct += right;
    }
  const CharScore c = masked_char_score(causal, text, windows, 1.0f, 5, -1);
  EXPECT_EQ(c.count, (long)windows * T);
  EXPECT_NEAR(c.bits, nats / (windows * T) / std::log(2.0), 1e-5 * c.bits);
  EXPECT_DOUBLE_EQ(c.accuracy, (double)correct / (windows * T));

  // rate 0: nothing chosen, nothing scored.
  const CharScore none = masked_char_score(mlm, text, windows, 0.0f, 5, mask_id);
  EXPECT_EQ(none.count, 0);
}

// A model whose prediction at a position depends only on the token there: every block's weights are zero (each
// block adds nothing to the residual stream), wpe = 0, ln_f = identity, and wte[MASK] = 0, so at a [MASK] input
// every logit is 0 and p = 1/V for every token, while a visible character c predicts c with high confidence.
// If masked_char_score puts [MASK] at every chosen position, its loss is exactly log2(V) bits.
TEST(ObjectiveEvaluate, MaskedCharScoreMasksEveryChosenPosition) {
  SingleThread one_thread;
  const int T = 16, num_chars = 10, mask_id = 10, V = 11, C = 16, windows = 40;
  GPT model(make_config(1, 2, C, T, V), parse_layer_masks("bidirectional", 1));
  std::fill(model.params_memory().begin(), model.params_memory().end(), 0.0f);
  for (int k = 0; k < C; k++) model.params().ln_f_w[k] = 1.0f;
  for (int c = 0; c < num_chars; c++)  // a zero-mean row per character: 3·(e_c − mean of e_0 … e_9)
    for (int k = 0; k < num_chars; k++) model.params().wte[c * C + k] = 3.0f * ((k == c) - 1.0f / num_chars);
  const std::vector<int> text = testutil::random_ids(T * (windows + 1), num_chars, 96);

  // The model really behaves as designed: a window of characters is predicted almost perfectly...
  std::vector<int> plain(text.begin() + T, text.begin() + 2 * T), targets = plain;
  EXPECT_LT(model.forward(plain.data(), targets.data(), 1, T), 0.01);
  // ...and a window of [MASK] costs exactly ln V.
  std::vector<int> masks(T, mask_id);
  EXPECT_NEAR(model.forward(masks.data(), targets.data(), 1, T), std::log((double)V), 1e-6);

  const CharScore s = masked_char_score(model, text, windows, 0.15f, 9, mask_id);
  EXPECT_NEAR(s.bits, std::log2((double)V), 1e-5) << "some chosen position was not replaced by [MASK]";
  // About 15% of windows·T positions (binomial, 4 standard errors).
  const double n = (double)windows * T, expected = 0.15 * n, se = std::sqrt(n * 0.15 * 0.85);
  EXPECT_NEAR((double)s.count, expected, 4 * se);
  EXPECT_GE(s.accuracy, 0.0);
  EXPECT_LE(s.accuracy, 1.0);
  // All logits tie at [MASK], so the argmax is token 0: accuracy is the share of chosen characters that are 0.
  EXPECT_NEAR(s.accuracy, 1.0 / num_chars, 4 * std::sqrt(0.1 * 0.9 / s.count));
}
