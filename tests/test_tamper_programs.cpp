// Hardening II (issue 23), the programs' side: what an attacker or a careless user did to ./train, ./sample and
// ./inspect, each refused with a clear message and nothing lost.
//   TamperGuard    the divergence guard (divergence_guard.h) against its definition, and a run at an absurd
//                  learning rate whose "last good checkpoint" really is good
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "program_util.h"
#include "train/divergence_guard.h"

using progutil::quote;
using progutil::read_file;
using progutil::RunResult;
using progutil::TempDir;
using progutil::write_file;

namespace {

RunResult run_in(const TempDir& dir, const std::string& command) { return progutil::run_command(command, dir.path()); }

// ./train with the smallest model on a generated corpus in `dir`, AdamW unless `extra` says otherwise.
std::string train_command(const TempDir& dir, const std::string& out, const std::string& extra) {
  return std::string("./train ") + progutil::tiny_flags() + " --optimizer adamw --data " + quote(dir / "corpus.txt") +
         " --out " + quote(out) + " " + extra;
}

void write_corpus(const TempDir& dir) { write_file(dir / "corpus.txt", progutil::generated_text(20000)); }

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The divergence guard

TEST(TamperGuard, TheLimitIsTheBestTenStepMeanPlusLnV) {
  DivergenceGuard guard(65);
  EXPECT_TRUE(std::isinf(guard.best()));
  EXPECT_EQ(guard.refuse(1e30), "") << "before any step only finiteness counts";
  EXPECT_NE(guard.refuse(std::nan("")), "");
  EXPECT_NE(guard.refuse(INFINITY), "");
  // Losses 4.0, 3.9, …: the best 10-step mean, computed here by hand in double precision.
  std::vector<double> losses;
  for (int i = 0; i < 30; i++) losses.push_back(4.0 - 0.1 * i + (i % 3 == 0 ? 0.25 : 0.0));
  losses.push_back(50.0);  // a spike: raises the recent mean, never lowers the best
  double best = INFINITY;
  for (size_t i = 0; i < losses.size(); i++) {
    guard.observe(losses[i]);
    const size_t first = i + 1 >= 10 ? i + 1 - 10 : 0;
    double sum = 0;
    for (size_t j = first; j <= i; j++) sum += losses[j];
    best = std::min(best, sum / double(i + 1 - first));
    ASSERT_NEAR(guard.best(), best, 1e-12) << "after step " << i;
  }
  const double limit = best + std::log(65.0);
  EXPECT_NEAR(guard.limit(), limit, 1e-12);
  EXPECT_EQ(guard.refuse(limit - 1e-9), "");
  EXPECT_EQ(guard.refuse(best), "");
  const std::string why = guard.refuse(limit + 1e-6);
  EXPECT_CONTAINS(why, "exploding");
  guard.observe(NAN);  // never observed: a NaN step stops the run before it
  EXPECT_NEAR(guard.limit(), limit, 1e-12);
}

// The two runs: --lr 1e6 saved losses from 9e9 to 4e34 at every step; AdamW at lr 30 left a "last good"
// checkpoint scoring 3.5e8 nats/char. Now nothing exploding is saved, and the checkpoint the message names scores
// below the limit the message printed.
TEST(TamperGuard, AnAbsurdLearningRateNeverOverwritesAGoodCheckpoint) {
  TempDir dir;
  write_corpus(dir);
  {
    const RunResult r = run_in(dir, train_command(dir, dir / "a", "--steps 20 --lr 1e6 --ckpt-every 1 --eval-every 0"));
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, "training diverged at step 1");
    EXPECT_CONTAINS(r.err, "the loss is exploding");
    EXPECT_FALSE(progutil::file_exists(dir / "a/ckpt.safetensors")) << "exploded weights were saved";
  }
  const RunResult r = run_in(dir, train_command(dir, dir / "b", "--steps 60 --lr 30 --ckpt-every 1 --eval-every 0"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("= ([0-9.e+]+): the loss is exploding"))) << r.err;
  const double limit = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("holds the last good checkpoint \\(step ([0-9]+)\\)"))) << r.err;
  const int step = std::stoi(m[1]);
  EXPECT_EQ(load_checkpoint(dir / "b/ckpt.safetensors").resume.step, step);
  const RunResult score = run_in(dir, "./sample --threads 1 --ckpt " + quote(dir / "b") + " --score " +
                                          quote(dir / "corpus.txt"));
  ASSERT_EQ(score.exit_code, 0) << score.describe();
  ASSERT_TRUE(std::regex_search(score.out, m, std::regex(": ([0-9.]+) nats/char"))) << score.out;
  EXPECT_LT(std::stod(m[1]), limit) << "the 'last good' checkpoint is not good";
}

// ---------------------------------------------------------------------------------------------------------------
// --resume of an older copy kept inside a run's folder used to replace the run's newer checkpoint and shorten
// metrics.csv, with exit 0.

TEST(TamperResume, ResumingAnOlderCopyInsideARunFolderRefusesToReplaceTheNewerCheckpoint) {
  TempDir dir;
  write_corpus(dir);
  const std::string run = dir / "run", ckpt = run + "/ckpt.safetensors", old = run + "/step2.safetensors";
  RunResult r = run_in(dir, train_command(dir, run, "--steps 2 --eval-every 0"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  write_file(old, read_file(ckpt));
  r = run_in(dir, "./train --resume " + quote(run) + " --steps 4");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string newer = read_file(ckpt), metrics = read_file(run + "/metrics.csv");

  r = run_in(dir, "./train --resume " + quote(old) + " --steps 6");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "would continue in " + run + " and replace its checkpoint " + ckpt + " (step 4)");
  EXPECT_CONTAINS(r.err, "--overwrite");
  EXPECT_TRUE(read_file(ckpt) == newer) << "the newer checkpoint changed";
  EXPECT_EQ(read_file(run + "/metrics.csv"), metrics);

  // Elsewhere is fine, and so is asking for it.
  r = run_in(dir, "./train --resume " + quote(old) + " --steps 3 --out " + quote(dir / "elsewhere"));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  r = run_in(dir, "./train --resume " + quote(old) + " --steps 3 --overwrite");
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(load_checkpoint(ckpt).resume.step, 3);
}
