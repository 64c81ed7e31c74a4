// Hardening II (issue 23), the programs' side: what an attacker or a careless user did to ./train, ./sample and
// ./inspect, each refused with a clear message and nothing lost.
//   TamperGuard    the divergence guard (divergence_guard.h) against its definition, and a run at an absurd
//                  learning rate whose "last good checkpoint" really is good
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "data/utf8.h"
#include "io/checkpoint.h"
#include "program_util.h"
#include "train/divergence_guard.h"

using progutil::quote;
using progutil::read_file;
using progutil::RunResult;
using progutil::TempDir;
using progutil::write_file;

namespace {

using progutil::run_in;
using progutil::train_command;
using progutil::write_corpus;

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
  // Exploding, or (issue 31) already worse than knowing nothing at its first save: then nothing is saved at all.
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("= ([0-9.e+]+): (the loss is exploding|worse than knowing nothing)")))
      << r.err;
  const double limit = std::stod(m[1]);
  if (!std::regex_search(r.err, m, std::regex("holds the last good checkpoint \\(step ([0-9]+)\\)"))) {
    EXPECT_CONTAINS(r.err, "nothing was saved");
    EXPECT_FALSE(progutil::file_exists(dir / "b/ckpt.safetensors")) << "weights worse than uniform were saved";
    return;
  }
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

// ---------------------------------------------------------------------------------------------------------------
// Writing through links and over other files

namespace {
// A trained (2-step) checkpoint folder in `dir`.
std::string small_run(const TempDir& dir) {
  write_corpus(dir);
  const RunResult r = run_in(dir, train_command(dir, dir / "run", "--steps 2 --eval-every 0"));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return dir / "run";
}
bool is_symlink(const std::string& p) { return std::filesystem::is_symlink(p); }
}  // namespace

TEST(TamperFiles, OutputsNeverReplaceALinkOrAFifo) {
  TempDir dir;
  const std::string run = small_run(dir);
  write_file(dir / "victim.txt", "keep me");
  std::filesystem::create_symlink(dir / "victim.txt", dir / "link.html");
  ASSERT_EQ(::mkfifo((dir / "fifo.json").c_str(), 0644), 0);
  RunResult r = run_in(dir, "./inspect attention --threads 1 --prompt 'the cat' --ckpt " + quote(run) + " --out " + quote(dir / "link.html"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, dir / "link.html");
  EXPECT_CONTAINS(r.err, "symbolic link");
  EXPECT_TRUE(is_symlink(dir / "link.html"));
  EXPECT_EQ(read_file(dir / "victim.txt"), "keep me");
  r = run_in(dir, "./inspect attention --threads 1 --prompt 'the cat' --ckpt " + quote(run) + " --json " + quote(dir / "fifo.json"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "FIFO");
  EXPECT_TRUE(std::filesystem::is_fifo(dir / "fifo.json"));
}

TEST(TamperFiles, TheLockNeverFollowsALink) {
  TempDir dir;
  write_corpus(dir);
  std::filesystem::create_directory(dir / "out");
  write_file(dir / "victim.txt", "keep me");
  std::filesystem::create_symlink(dir / "victim.txt", dir / "out/train.lock");
  const RunResult r = run_in(dir, train_command(dir, dir / "out", "--steps 1"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "train.lock is a symbolic link");
  EXPECT_EQ(read_file(dir / "victim.txt"), "keep me") << "the lock truncated the link's target";
}

TEST(TamperFiles, StaleCleanupRemovesOnlyItsOwnNamesAndNothingWhenTheRunIsRefused) {
  TempDir dir;
  const std::string run = small_run(dir);
  // A pid that is not running: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string pid = std::to_string(child);
  const std::string ours = run + "/ckpt.safetensors.tmp." + pid, users = run + "/notes.tmp." + pid;
  write_file(ours, "partial");
  write_file(users, "the user's");
  // Refused (an earlier run is there): nothing is removed.
  RunResult r = run_in(dir, train_command(dir, run, "--steps 1"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(progutil::file_exists(ours)) << "removed by a run that was then refused";
  r = run_in(dir, train_command(dir, run, "--steps 1 --overwrite"));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(progutil::file_exists(ours));
  EXPECT_EQ(read_file(users), "the user's") << "a file the program never makes was removed";
}

TEST(TamperFiles, HeadsWritesNothingIntoTheCurrentFolderUnlessAsked) {
  TempDir dir;
  const std::string run = small_run(dir);
  const std::string inspect = (std::filesystem::current_path() / "inspect").string();
  const RunResult r = run_in(dir, "cd " + quote(dir.path()) + " && " + quote(inspect) + " heads --threads 1 --resamples 0 "
                                      "--sequences 2 --ckpt " + quote(run));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(progutil::file_exists(dir / "heads.csv"));
}

TEST(TamperFiles, PruneRefusesAFileAsOutBeforeTheWorkAndADanglingLinkIsNamed) {
  TempDir dir;
  const std::string run = small_run(dir);
  write_file(dir / "file", "x");
  RunResult r = run_in(dir, "./inspect prune --threads 1 --ckpt " + quote(run) + " --data " + quote(dir / "corpus.txt") +
                                " --out " + quote(dir / "file"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "not a directory");
  EXPECT_EQ(r.out, "") << "the work was done before the refusal";
  std::filesystem::create_symlink(dir / "nowhere", dir / "dangling");
  r = run_in(dir, train_command(dir, dir / "dangling", "--steps 1"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "symbolic link to something that does not exist");
}

// ---------------------------------------------------------------------------------------------------------------
// Inputs that are not regular files, and numbers that wrap

TEST(TamperInputs, DevicesAndFifosAreRefusedAtOnce) {
  TempDir dir;
  const std::string run = small_run(dir);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  struct Case {
    std::string command, kind;
  };
  const std::vector<Case> cases = {
      {train_command(dir, dir / "a", "--steps 1") + " --data /dev/zero", "character device"},
      {train_command(dir, dir / "b", "--steps 1") + " --data " + quote(dir / "fifo"), "FIFO (named pipe)"},
      {"./sample --threads 1 --ckpt " + quote(dir / "fifo"), "FIFO (named pipe)"},
      {"./sample --threads 1 --ckpt " + quote(run) + " --score /dev/zero", "character device"},
      {"./inspect prune --threads 1 --ckpt " + quote(run) + " --data /dev/zero --out " + quote(dir / "p"),
       "character device"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.command);
    const RunResult r = run_in(dir, "timeout 60 " + c.command);
    EXPECT_EQ(r.exit_code, 1) << r.describe();  // 124: it hung on the FIFO
    EXPECT_CONTAINS(r.err, c.kind + ", not a regular file");
  }
}

TEST(TamperInputs, IntegerFlagsAreRangeCheckedBeforeNarrowing) {
  TempDir dir;
  write_corpus(dir);
  struct Case {
    std::string command, words;
  };
  const std::vector<Case> cases = {
      {train_command(dir, dir / "a", "--steps 5000000000"), "--steps 5000000000 is out of range"},
      {train_command(dir, dir / "a", "--seed 18446744073709551616"), "--seed 18446744073709551616 is out of range"},
      {train_command(dir, dir / "a", "--batch -4294967295"), "--batch -4294967295 is out of range"},
      {"./sample -n 99999999999", "-n 99999999999 is out of range"},
      {"./inspect heads --sequences 5000000000", "--sequences 5000000000 is out of range"},
      {"./inspect heads --sequences -5", "--sequences must be ≥ 1"},
      {"./inspect prune --batches 0 --out " + quote(dir / "p"), "--batches must be ≥ 1"},
      {train_command(dir, dir / "a", "--steps x"), "--steps: 'x' is not a valid value"},
      {"./sample --threads=abc", "--threads: 'abc' is not a valid value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.command);
    const RunResult r = run_in(dir, "timeout 60 " + c.command);  // a wrapped --steps would train for hours
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, c.words);
  }
  EXPECT_FALSE(progutil::file_exists(dir / "a/ckpt.safetensors"));
  EXPECT_FALSE(progutil::file_exists(dir / "p"));
  // A text flag that happens to be a long number is text, not a count.
  const RunResult r = run_in(dir, "./inspect heads --prompt 99999999999 --ckpt " + quote(dir / "missing"));
  EXPECT_EQ(r.err.find("out of range"), std::string::npos) << r.err;
}

TEST(TamperInputs, ThreadCountsAreCappedWithANote) {
  TempDir dir;
  const std::string run = small_run(dir);
  const RunResult r = run_in(dir, "./sample -n 3 --threads 100000 --ckpt " + quote(run));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_CONTAINS(r.err, "note: 100000 threads asked for; using");
}

// ---------------------------------------------------------------------------------------------------------------
// The smaller items (issue 23, item 7)

TEST(TamperSmall, BidiControlsAndTerminalBytesInNamesAreEscaped) {
  // U+202E (right-to-left override) reorders the rest of a line as a terminal shows it.
  EXPECT_EQ(escape_for_message("a\u202Eb\u2066c\u200Fd"), "a\\u202eb\\u2066c\\u200fd");
  EXPECT_EQ(describe_code_point(0x202E), "'\\u202E' (U+202E)");
  EXPECT_EQ(escape_for_message("é中🙂"), "é中🙂") << "other characters stay as they are";
  // A corpus whose name holds ESC, BEL and U+202E: ./train's progress lines show them escaped.
  TempDir dir;
  const std::string name = dir / "evil\x1b[2J\a\u202Etxt.txt";
  write_file(name, progutil::generated_text(20000));
  const RunResult r = run_in(dir, std::string("./train ") + progutil::tiny_flags() + " --optimizer adamw --steps 1 "
                                      "--data " + quote(name) + " --out " + quote(dir / "out\x1b]0;x\a"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\a'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\u202E"), std::string::npos) << r.out;
  EXPECT_CONTAINS(r.out, "evil\\x1b[2J\\x07\\u202etxt.txt");
  EXPECT_CONTAINS(r.out, "checkpoint " + dir / "out\\x1b]0;x\\x07/ckpt.safetensors");
}

TEST(TamperSmall, FillNamesThePositionOfTheCharacterOutsideTheVocabulary) {
  TempDir dir;
  write_corpus(dir);
  RunResult r = run_in(dir, train_command(dir, dir / "bert", "--objective mlm --steps 1"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // The generated corpus has no 'Z' (program_util.h): position 4 of "the Z_t".
  r = run_in(dir, "./sample --threads 1 --ckpt " + quote(dir / "bert") + " --fill 'the Z_t'");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "--fill: character 'Z' (U+005A) at position 4 is not in the model's vocabulary");
}

TEST(TamperSmall, InspectAttentionRefusesNonFinitePredictions) {
  // Finite weights so large that the forward overflows (the fuzz corpus's file; sample refuses it too).
  TempDir dir;
  const std::string huge = "fuzz/corpus/checkpoint/huge-weights-nan-logits.safetensors";
  const Checkpoint c = load_checkpoint(huge);
  const std::string prompt = c.tokenizer.decode({0, 1, 0});
  const RunResult r = run_in(dir, "./inspect attention --threads 1 --ckpt " + huge + " --prompt " + quote(prompt) +
                                      " --out " + quote(dir / "a.html") + " --json " + quote(dir / "a.json"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, huge + ": the model's predictions are not finite numbers");
  EXPECT_FALSE(progutil::file_exists(dir / "a.html"));
  EXPECT_FALSE(progutil::file_exists(dir / "a.json"));
}
