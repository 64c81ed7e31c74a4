// Pronoun resolution (src/lab/pronouns.h): candidate building, the head's choice, the nearest and random
// baselines and the nearest / not-nearest split on hand-built attention rows with known answers; the bootstrap
// against a brute-force case, a constant sample, the normal closed form and coverage on a known distribution;
// head ablation against a double-precision reference forward with the head's output zeroed; the generator's probe
// set (build/make_stories --probes) read back through the same tables.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <map>
#include <random>

#include "lab/head_scores.h"
#include "lab/pronouns.h"
#include "data/dataset.h"
#include "model/model.h"
#include "program_util.h"
#include "textbook/reference.h"

namespace {

// A case with window start 0 and candidates at the given (offset, length, correct).
PronounCase make_case(long pronoun_offset, std::vector<Candidate> candidates) {
  PronounCase c;
  c.pronoun_offset = pronoun_offset, c.pronoun_length = 3, c.window_start = 0;
  c.candidates = std::move(candidates);
  return c;
}

// A row of T weights: `mass` spread evenly over the characters of candidate k, the rest on position 0.
std::vector<float> row_on(int T, const Candidate& k, double mass) {
  std::vector<float> row(T, 0.0f);
  for (long j = k.offset; j < k.offset + k.length; j++) row[j] = (float)(mass / k.length);
  row[0] += (float)(1 - mass);
  return row;
}

}  // namespace

TEST(PronounCases, BuildCasesKeepsNamesOfTheStoryInsideTheWindow) {
  const std::u32string text = U"Ada saw Ben.\n\nMira met Tom at the lake. She waved. Tom ran. He ran.";
  const std::vector<long> starts = story_starts(text);
  ASSERT_EQ(starts, (std::vector<long>{0, 14}));
  std::vector<NameMention> mentions = {{0, 3, "Ada", "she"},   {8, 3, "Ben", "he"},   {14, 4, "Mira", "she"},
                                       {23, 3, "Tom", "he"},   {51, 3, "Tom", "he"}};
  // "She" at 40 → Mira (14); "He" at 60 → Tom (51).
  std::vector<PronounNote> notes = {{40, 3, 14, 4, "She", "Mira"}, {60, 2, 51, 3, "He", "Tom"}};
  ASSERT_EQ(text.substr(40, 3), U"She");
  ASSERT_EQ(text.substr(60, 2), U"He");
  ASSERT_EQ(text.substr(51, 3), U"Tom");
  std::vector<PronounCase> cases = build_cases(notes, mentions, starts, (long)text.size(), 64);
  ASSERT_EQ(cases.size(), 2u);
  // Ada and Ben are another story: not candidates.
  ASSERT_EQ(cases[0].candidates.size(), 2u);
  EXPECT_EQ(cases[0].candidates[0].offset, 14);
  EXPECT_TRUE(cases[0].candidates[0].correct);
  EXPECT_FALSE(cases[0].candidates[1].correct);
  EXPECT_FALSE(cases[0].nearest_correct());  // Tom is nearer than Mira
  EXPECT_DOUBLE_EQ(cases[0].random_accuracy(), 0.5);
  // "He" → Tom: both Tom mentions are correct, Mira is not: random 2/3, nearest right.
  ASSERT_EQ(cases[1].candidates.size(), 3u);
  EXPECT_TRUE(cases[1].nearest_correct());
  EXPECT_DOUBLE_EQ(cases[1].random_accuracy(), 2.0 / 3.0);
  // A window of 30 characters ending at "He"'s last character (61) starts at 32: only Tom at 51 is inside, one
  // name, so no choice and no case; "She" (window 13 … 42) keeps both names.
  cases = build_cases(notes, mentions, starts, (long)text.size(), 30);
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].pronoun_offset, 40);
  EXPECT_EQ(cases[0].window_start, 13);
  // A window of 20 ending at "She" (23 … 42) loses Mira: one name left, so no case.
  EXPECT_TRUE(build_cases(notes, mentions, starts, (long)text.size(), 20).empty());
  // from/to select notes by the pronoun's offset.
  EXPECT_EQ(build_cases(notes, mentions, starts, (long)text.size(), 64, 50).size(), 1u);
  EXPECT_EQ(build_cases(notes, mentions, starts, (long)text.size(), 64, 0, 50).size(), 1u);
}

TEST(PronounCases, ChoiceMassesAndTiesOnHandBuiltRows) {
  const int T = 16;
  PronounCase c = make_case(14, {{2, 4, true}, {8, 3, false}});
  std::vector<float> row(T, 0.0f);
  for (int j = 2; j < 6; j++) row[j] = 0.1f;   // Mira: 0.4 in total, 0.1 per character
  for (int j = 8; j < 11; j++) row[j] = 0.2f;  // Tom: 0.6 in total
  EXPECT_NEAR(mention_mass(row.data(), 0, c.candidates[0]), 0.4, 1e-6);
  EXPECT_EQ(choose_candidate(row.data(), 0, c.candidates), 1);  // the total, not the peak or the mean, decides
  double a, o;
  antecedent_masses(row.data(), 0, c.candidates, &a, &o);
  EXPECT_NEAR(a, 0.4, 1e-6);
  EXPECT_NEAR(o, 0.6, 1e-6);
  // The same row seen from a window starting at 5: offsets shift.
  PronounCase shifted = make_case(19, {{7, 4, true}, {13, 3, false}});
  shifted.window_start = 5;
  EXPECT_EQ(choose_candidate(row.data(), 5, shifted.candidates), 1);
  // A tie goes to the earlier mention.
  std::vector<float> tie(T, 0.0f);
  tie[2] = 0.5f, tie[8] = 0.5f;
  EXPECT_EQ(choose_candidate(tie.data(), 0, c.candidates), 0);
}

// Three hand-built heads on four cases: a recency head (all mass on the nearest name), an antecedent head (all
// mass on the antecedent) and a first-name head (all mass on the first candidate). Their accuracies, split by
// nearest / not nearest, and the baselines are known exactly.
TEST(PronounCases, AccuracyBaselinesAndSplitOnHandBuiltHeads) {
  const int T = 32;
  std::vector<PronounCase> cases = {
      make_case(20, {{1, 4, true}, {8, 3, false}}),                  // not nearest; random 1/2
      make_case(20, {{1, 4, false}, {8, 3, true}}),                  // nearest;     random 1/2
      make_case(25, {{1, 4, true}, {8, 3, false}, {14, 4, true}}),   // nearest;     random 2/3
      make_case(25, {{1, 4, true}, {8, 3, false}, {14, 4, false}}),  // not nearest; random 1/3
  };
  ResolutionScores r = empty_scores(3, (int)cases.size());
  for (int i = 0; i < (int)cases.size(); i++) {
    const PronounCase& c = cases[i];
    const Candidate* right = nullptr;
    for (const Candidate& k : c.candidates)
      if (k.correct) right = &k;
    std::vector<float> recency = row_on(T, c.candidates.back(), 0.9), antecedent = row_on(T, *right, 0.9),
                       first = row_on(T, c.candidates.front(), 0.9);
    // The "own" row and the "before" row differ for the recency head: before the pronoun it looks at the first name.
    score_case(r, 0, i, c, recency.data(), first.data());
    score_case(r, 1, i, c, antecedent.data(), antecedent.data());
    score_case(r, 2, i, c, first.data(), first.data());
  }
  auto acc = [&](int q, int h) {
    return split_mean(cases, [&](int i) { return (double)r.correct[q][(size_t)h * r.n_cases + i]; }, 200, 1);
  };
  SplitStat recency = acc(kOwn, 0), antecedent = acc(kOwn, 1), first = acc(kOwn, 2), recency_before = acc(kBefore, 0);
  EXPECT_EQ(recency.n_nearest, 2);
  EXPECT_EQ(recency.n_not_nearest, 2);
  EXPECT_DOUBLE_EQ(recency.all.value, 0.5);
  EXPECT_DOUBLE_EQ(recency.nearest.value, 1.0);
  EXPECT_DOUBLE_EQ(recency.not_nearest.value, 0.0);
  EXPECT_DOUBLE_EQ(antecedent.all.value, 1.0);
  EXPECT_DOUBLE_EQ(antecedent.not_nearest.value, 1.0);
  EXPECT_DOUBLE_EQ(first.nearest.value, 0.5);  // case 2's first mention names the antecedent, case 1's does not
  EXPECT_DOUBLE_EQ(first.not_nearest.value, 1.0);
  EXPECT_DOUBLE_EQ(recency_before.all.value, first.all.value);
  // The recency head always chooses the nearest mention; the first-name head never does.
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(r.chose_nearest[kOwn][0 * r.n_cases + i], 1);
    EXPECT_EQ(r.chose_nearest[kOwn][2 * r.n_cases + i], 0);
  }
  // Baselines: nearest is right exactly on the nearest split; random is the mean of #correct/#candidates.
  SplitStat nearest = split_mean(cases, [&](int i) { return (double)cases[i].nearest_correct(); }, 200, 1);
  SplitStat random = split_mean(cases, [&](int i) { return cases[i].random_accuracy(); }, 200, 1);
  EXPECT_DOUBLE_EQ(nearest.all.value, 0.5);
  EXPECT_DOUBLE_EQ(nearest.not_nearest.value, 0.0);
  EXPECT_NEAR(random.all.value, (0.5 + 0.5 + 2.0 / 3 + 1.0 / 3) / 4, 1e-12);
  EXPECT_NEAR(random.nearest.value, (0.5 + 2.0 / 3) / 2, 1e-12);
  EXPECT_NEAR(random.not_nearest.value, (0.5 + 1.0 / 3) / 2, 1e-12);
  // Masses: the antecedent head puts 0.9 on the antecedent's mentions and nothing on the others.
  EXPECT_NEAR(r.antecedent_mass[kOwn][1 * r.n_cases + 0], 0.9, 1e-6);
  EXPECT_NEAR(r.other_mass[kOwn][1 * r.n_cases + 0], 0.0, 1e-6);
  EXPECT_NEAR(r.other_mass[kOwn][0 * r.n_cases + 3], 0.45, 1e-6);  // 0.9 on one of two wrong mentions
}

TEST(PronounBootstrap, BruteForceConstantAndWidthShrinks) {
  // n = 2, sample {0, 1}: a resample's mean is 0, ½ or 1 with probabilities ¼, ½, ¼, so the 2.5% and 97.5%
  // quantiles of 1000 draws are 0 and 1.
  Interval two = bootstrap_mean({0.0, 1.0}, 1000, 7);
  EXPECT_DOUBLE_EQ(two.value, 0.5);
  EXPECT_DOUBLE_EQ(two.lo, 0.0);
  EXPECT_DOUBLE_EQ(two.hi, 1.0);
  // A constant sample has a zero-width interval.
  Interval constant = bootstrap_mean(std::vector<double>(50, 0.3), 500, 3);
  EXPECT_EQ(constant.lo, constant.hi);
  EXPECT_NEAR(constant.lo, 0.3, 1e-12);
  // The width matches the normal closed form 2·1.96·σ/√n within 12%, and quarters n → halves the width.
  std::mt19937 rng(5);
  std::normal_distribution<double> normal(1.0, 2.0);
  auto width = [&](int n) {
    std::vector<double> x(n);
    double mean = 0, var = 0;
    for (double& v : x) v = normal(rng), mean += v / n;
    for (double v : x) var += (v - mean) * (v - mean) / n;
    Interval i = bootstrap_mean(x, 2000, 11);
    EXPECT_NEAR((i.hi - i.lo) / (2 * 1.959964 * std::sqrt(var / n)), 1.0, 0.12) << "n = " << n;
    EXPECT_LE(i.lo, i.value);
    EXPECT_GE(i.hi, i.value);
    return i.hi - i.lo;
  };
  const double w100 = width(100), w1600 = width(1600);
  EXPECT_NEAR(w1600 / w100, 0.25, 0.06);
  // Same seed, same interval.
  std::vector<double> x = {1, 2, 3, 4, 5, 9};
  EXPECT_EQ(bootstrap_mean(x, 300, 4).lo, bootstrap_mean(x, 300, 4).lo);
}

TEST(PronounBootstrap, CoverageOnABernoulliSample) {
  // 95% intervals for the mean of 200 Bernoulli(0.3) draws, 300 times: the fraction that covers 0.3 should be
  // near 0.95 (binomial sd of the fraction ≈ 0.013; the percentile bootstrap runs slightly under nominal).
  std::mt19937 rng(9);
  std::bernoulli_distribution coin(0.3);
  int covered = 0;
  const int trials = 300;
  for (int t = 0; t < trials; t++) {
    std::vector<double> x(200);
    for (double& v : x) v = coin(rng);
    Interval i = bootstrap_mean(x, 400, 100 + t);
    covered += i.lo <= 0.3 && 0.3 <= i.hi;
  }
  EXPECT_GE(covered, (int)(0.90 * trials));
  EXPECT_LE(covered, (int)(0.985 * trials));
}

TEST(PronounBootstrap, RatioResamplesClusters) {
  // Two clusters: 10 rows of mean 1 and 10 rows of mean 0. Resampling clusters gives 0, ½ or 1.
  Interval r = bootstrap_ratio({10.0, 0.0}, {10.0, 10.0}, 1000, 2);
  EXPECT_DOUBLE_EQ(r.value, 0.5);
  EXPECT_DOUBLE_EQ(r.lo, 0.0);
  EXPECT_DOUBLE_EQ(r.hi, 1.0);
  // Unequal cluster sizes: the value is the pooled mean, not the mean of cluster means.
  EXPECT_DOUBLE_EQ(bootstrap_ratio({3.0, 1.0}, {3.0, 1.0 * 5}, 10, 2).value, 4.0 / 8.0);
}

// Gating a head to 0 must equal the textbook model (double precision) with that head's slice of the attention
// output zeroed before the output projection; compared through the per-position losses.
TEST(PronounAblation, GatedLossesEqualAReferenceWithTheHeadZeroed) {
  ModelConfig c;
  c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.block_size = 16, c.vocab_size = 9;
  const int T = c.block_size, NH = c.n_head, V = c.vocab_size;
  GPT model(c);
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  for (float& p : model.params_memory()) p = dist(rng);
  std::vector<int> tokens(60);
  for (int& t : tokens) t = (int)(rng() % V);
  // Two cases; the candidates do not matter for the losses.
  std::vector<PronounCase> cases = {make_case(10, {{1, 2, true}, {4, 2, false}}),
                                    make_case(40, {{30, 2, true}, {34, 2, false}})};
  cases[0].window_start = 0, cases[1].window_start = 40 + 3 - T;
  std::vector<unsigned char> pronoun_chars(tokens.size(), 0);
  for (const PronounCase& k : cases)
    for (long j = k.pronoun_offset; j < k.pronoun_offset + k.pronoun_length; j++) pronoun_chars[j] = 1;

  ReferenceGPT<double> ref(c);
  for (size_t i = 0; i < ref.params.size(); i++) ref.params[i] = model.params_memory()[i];
  // The reference forward of one window with head `off` (layer-major) zeroed: losses per position.
  auto reference_losses = [&](long start, int off) {
    std::vector<int> x(tokens.begin() + start, tokens.begin() + start + T), y(T);
    for (int t = 0; t < T; t++) y[t] = tokens[std::min<long>(start + t + 1, (long)tokens.size() - 1)];
    // The textbook model with that head's gate at 0 (its slice of the attention output zeroed before the
    // output projection; ref_head_gate_forward), and every other gate at 1.
    ref.head_gates.assign((size_t)c.n_layer * NH, 1.0);
    if (off >= 0) ref.head_gates[off] = 0.0;
    ref.forward(x, y, 1, T);
    const std::vector<double> losses = ref.losses;
    return losses;
  };
  double changed = 0;
  for (int off : {0, 3}) {
    set_heads_off(model, {off});
    LossPair got = case_losses(model, tokens, cases, pronoun_chars);
    for (size_t k = 0; k < cases.size(); k++) {
      const PronounCase& pc = cases[k];
      std::vector<double> losses = reference_losses(pc.window_start, off), plain = reference_losses(pc.window_start, -1);
      const double first = losses[pc.pronoun_offset - 1 - pc.window_start];
      double other = 0;
      int n = 0;
      for (int t = 0; t < T; t++) {
        const long target = pc.window_start + t + 1;
        if (target < (long)tokens.size() && !pronoun_chars[target]) other += losses[t], n++;
      }
      EXPECT_NEAR(got.pronoun[k], first, 2e-4) << "head " << off << " case " << k;
      EXPECT_NEAR(got.other[k], other / n, 2e-4) << "head " << off << " case " << k;
      changed = std::max(changed, std::fabs(plain[pc.pronoun_offset - 1 - pc.window_start] - first));
    }
  }
  EXPECT_GT(changed, 1e-3) << "the heads must matter for the test to mean anything";
  set_heads_off(model, {});
  for (float g : model.head_gates()) EXPECT_EQ(g, 1.0f);
  EXPECT_THROW(set_heads_off(model, {4}), std::runtime_error);
}

TEST(PronounAblation, PositionLossesAreCrossEntropy) {
  const int V = 5;
  std::vector<float> logits = {1, 2, 3, 4, 5, 0, 0, 0, 0, 0};
  std::vector<int> targets = {4, 2};
  std::vector<float> l = position_losses(logits.data(), targets.data(), 2, V);
  double z = 0;
  for (int v = 1; v <= 5; v++) z += std::exp(v);
  EXPECT_NEAR(l[0], std::log(z) - 5, 1e-6);
  EXPECT_NEAR(l[1], std::log(5.0), 1e-6);
}

// The probe set: deterministic, every probe has exactly two candidates of different genders, the pronoun agrees with
// its antecedent's, and about half the pronouns refer to the first (not the nearest) name.
TEST(PronounProbes, GeneratorWritesBalancedProbesWithMatchingTables) {
  ASSERT_TRUE(progutil::file_exists("build/make_stories")) << "make builds it before the tests";
  progutil::TempDir dir;
  auto generate = [&](const std::string& stem) {
    const std::string cmd = "build/make_stories --probes 300 --seed 3 --out " + dir / (stem + ".txt") +
                            " --antecedents " + dir / (stem + ".tsv") + " --mentions " + dir / (stem + "_names.tsv");
    progutil::RunResult r = progutil::run_command(cmd, dir.path());
    EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  };
  generate("a"), generate("b");
  for (const char* ext : {".txt", ".tsv", "_names.tsv"})
    EXPECT_EQ(progutil::read_file(dir / (std::string("a") + ext)), progutil::read_file(dir / (std::string("b") + ext)))
        << ext;
  const std::u32string text = read_text_file(dir / "a.txt");
  std::vector<PronounNote> notes = read_pronoun_notes(dir / "a.tsv");
  std::vector<NameMention> names = read_name_mentions(dir / "a_names.tsv");
  ASSERT_EQ(notes.size(), 300u);
  ASSERT_EQ(names.size(), 600u);
  std::vector<PronounCase> cases = build_cases(notes, names, story_starts(text), (long)text.size(), 64);
  ASSERT_EQ(cases.size(), 300u) << "every probe fits one 64-character window with both names";
  std::map<long, std::string> gender;
  for (const NameMention& m : names) gender[m.offset] = m.pronoun;
  int not_nearest = 0;
  for (size_t i = 0; i < cases.size(); i++) {
    const PronounCase& c = cases[i];
    ASSERT_EQ(c.candidates.size(), 2u);
    EXPECT_NE(gender[c.candidates[0].offset], gender[c.candidates[1].offset]);
    std::string p = notes[i].pronoun;
    p[0] = (char)std::tolower(p[0]);
    EXPECT_TRUE(p == "she" || p == "he") << p;
    EXPECT_EQ(gender[notes[i].antecedent_offset], p) << "the pronoun agrees with its antecedent";
    not_nearest += !c.nearest_correct();
  }
  EXPECT_GT(not_nearest, 110);  // Binomial(300, ½): 150 ± 8.7
  EXPECT_LT(not_nearest, 190);
}
