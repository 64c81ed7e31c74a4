// Data-parallel training (train/distributed.h).
//   Always: the batch split, the parameter checksum, and the principle itself — gradients of uneven slices with
//   different numbers of targets, weighted by their target counts, add up to the whole batch's gradient.
//   With Open MPI (an MPI build and mpirun on the PATH): `mpirun -np 2 ./train` against one process of the real
//   ./train with the same global batch — losses and final weights; one process failing or being killed ends the
//   job, the last checkpoint stays whole, and the run resumes on one process.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/objective.h"
#include "base/rng.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "ops/cross_entropy.h"
#include "program_util.h"
#include "train/distributed.h"

using progutil::quote;
using progutil::read_file;
using progutil::RunResult;
using progutil::TempDir;

extern char** environ;

namespace {

// ---- the batch split -----------------------------------------------------------------------------------------

TEST(Distributed, RowsCoverTheBatchOnceInOrderWithSharesOneApart) {
  for (int size = 1; size <= 5; size++)
    for (int B = size; B <= 17; B++) {
      int next = 0;
      for (int r = 0; r < size; r++) {
        const Rows rows = dist::rows_of(r, size, B);
        EXPECT_EQ(rows.begin, next) << "rank " << r << " of " << size << ", B " << B;
        EXPECT_TRUE(rows.count() == B / size || rows.count() == B / size + 1) << rows.count();
        next = rows.end;
      }
      EXPECT_EQ(next, B);
    }
  try {
    dist::rows_of(0, 3, 2);
    FAIL() << "a batch smaller than the number of processes must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--batch 2"), std::string::npos) << e.what();
  }
}

TEST(Distributed, OneProcessIsTheIdentity) {
  ASSERT_EQ(dist::size(), 1);  // the test binary is not started by mpirun
  std::vector<float> g = {1.5f, -2.0f, 3.25f};
  EXPECT_EQ(dist::allreduce_gradients(g, 0.75f, 7), 0.75f);
  EXPECT_EQ(g, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  std::vector<double> s = {1, 2};
  dist::sum(s);
  EXPECT_EQ(s, (std::vector<double>{1, 2}));
  EXPECT_TRUE(dist::any(true));
  EXPECT_FALSE(dist::any(false));
  EXPECT_EQ(dist::my_rows(5).begin, 0);
  EXPECT_EQ(dist::my_rows(5).end, 5);
}

TEST(Distributed, ChecksumSeesEveryBitAndNoOrder) {
  std::vector<float> v(1000);
  Rng rng(3);
  for (float& x : v) x = (float)rng.normal();
  const uint64_t h = dist::checksum(v);
  EXPECT_EQ(h, dist::checksum(std::vector<float>(v)));
  for (size_t i : {size_t(0), size_t(1), size_t(499), size_t(999)})
    for (int bit : {0, 13, 31}) {
      std::vector<float> w = v;
      uint32_t u;
      std::memcpy(&u, &w[i], 4);
      u ^= 1u << bit;
      std::memcpy(&w[i], &u, 4);
      EXPECT_NE(dist::checksum(w), h) << "element " << i << " bit " << bit;
    }
  std::vector<float> swapped = v;  // the same values in other places are other parameters
  std::swap(swapped[3], swapped[4]);
  EXPECT_NE(dist::checksum(swapped), h);
}

// The principle behind allreduce_gradients, with the real model and no MPI: split a batch into uneven slices with
// different numbers of targets, take each slice's mean-loss gradient, weight it by n_r/n and add — that is the
// gradient of the whole batch's mean loss. Weighting by 1/N instead would fail here (slices of 3 and 2 rows, MLM
// targets), which is why distributed.cpp weights by target counts.
TEST(Distributed, TargetWeightedSliceGradientsAddUpToTheBatchGradient) {
  ModelConfig config;
  config.n_layer = 1, config.n_head = 2, config.n_embd = 16, config.block_size = 8, config.vocab_size = 11;
  GPT model(config, parse_layer_masks("bidirectional", 1));
  model.init_weights(5);
  const int B = 5, T = 8;
  std::vector<int> x(B * T), y(B * T);
  Rng rng(9);
  for (int& t : x) t = rng.below(10);
  for (int i = 0; i < B * T; i++) y[i] = rng.uniform() < 0.3f ? x[i] : kNoTarget;  // uneven targets per row
  y[0] = x[0];                                                                      // at least one per slice
  y[4 * T] = x[4 * T];

  const float whole_loss = model.forward(x.data(), y.data(), B, T);
  model.zero_grad();
  model.backward();
  const std::vector<float> whole = model.grads_memory().to_vector();

  std::vector<double> combined(whole.size(), 0.0);
  double loss_sum = 0, targets = 0;
  std::vector<std::pair<float, int>> slices;
  std::vector<std::vector<float>> grads;
  for (int r = 0; r < 2; r++) {
    const Rows rows = dist::rows_of(r, 2, B);
    const float loss = model.forward(x.data() + rows.begin * T, y.data() + rows.begin * T, rows.count(), T);
    model.zero_grad();
    model.backward();
    slices.push_back({loss, model.last_targets()});
    grads.push_back(model.grads_memory().to_vector());
    loss_sum += (double)loss * model.last_targets(), targets += model.last_targets();
  }
  ASSERT_NE(slices[0].second, slices[1].second) << "the test needs slices with different target counts";
  for (int r = 0; r < 2; r++)
    for (size_t i = 0; i < whole.size(); i++) combined[i] += slices[r].second / targets * grads[r][i];
  EXPECT_NEAR(loss_sum / targets, whole_loss, 1e-5);
  double scale = 0, worst = 0;
  for (size_t i = 0; i < whole.size(); i++)
    scale = std::max(scale, (double)std::fabs(whole[i])), worst = std::max(worst, std::fabs(combined[i] - whole[i]));
  EXPECT_LE(worst, 1e-5 * scale) << "largest gradient " << scale;
}

// ---- mpirun -np 2 ./train ------------------------------------------------------------------------------------

// The mpirun command line for `n` processes, or "" (the test then skips) without an MPI build or mpirun.
// --oversubscribe: more processes than cores is fine here (CI machines may have one); --allow-run-as-root: CI and
// containers run as root, which mpirun refuses by default; btl_vader_single_copy_mechanism none: containers often
// forbid the cross-process memory reads (CMA) that Open MPI's shared-memory transport tries first.
std::string mpirun(int n) {
  if (!dist::built_with_mpi()) return "";
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return "";
  std::string cmd = "mpirun -np " + std::to_string(n) + " --oversubscribe --mca btl_vader_single_copy_mechanism none";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}

#define SKIP_WITHOUT_MPI()                                                                                      \
  if (mpirun(2).empty())                                                                                        \
  GTEST_SKIP() << (dist::built_with_mpi() ? "mpirun is not on the PATH (apt-get install openmpi-bin)"         \
                                          : "built without MPI (apt-get install libopenmpi-dev openmpi-bin, "   \
                                            "then make clean && make test)")

class MpiTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(progutil::file_exists("./train")) << "run the tests from the repository root after `make programs`";
    corpus_ = dir_ / "corpus.txt";
    progutil::write_file(corpus_, progutil::generated_text(6000));
  }
  RunResult run(const std::string& command) { return progutil::run_command(command, dir_.path()); }
  // `launcher` is "" for one process or mpirun(n).
  std::string train_command(const std::string& launcher, const std::string& out, const std::string& flags) {
    return (launcher.empty() ? "" : launcher + " ") + "./train --n-layer 2 --n-head 2 --n-embd 16 --block 16 " +
           "--eval-iters 2 --threads 1 --data " + quote(corpus_) + " --out " + quote(out) + " " + flags;
  }

  // One process and two with the same flags: every step's loss, every evaluation and the final weights agree.
  void expect_same_run(const std::string& flags) {
    const std::string one = dir_ / "one", two = dir_ / "two";
    RunResult r1 = run(train_command("", one, flags));
    ASSERT_TRUE(r1.exited && r1.exit_code == 0) << r1.describe();
    RunResult r2 = run(train_command(mpirun(2), two, flags));
    ASSERT_TRUE(r2.exited && r2.exit_code == 0) << r2.describe();
    EXPECT_NE(r2.out.find("in each of 2 processes"), std::string::npos) << r2.out;

    // metrics.csv: written by rank 0 only, one row per step, the same numbers.
    const auto rows1 = progutil::read_csv(one + "/metrics.csv"), rows2 = progutil::read_csv(two + "/metrics.csv");
    ASSERT_EQ(rows1.size(), 22u) << "20 steps and the final row";
    ASSERT_EQ(rows1.size(), rows2.size());
    int compared = 0;
    for (const char* column : {"batch_loss", "train_loss", "val_loss", "honest_bits", "grad_norm"}) {
      const auto c1 = progutil::csv_column(rows1, column), c2 = progutil::csv_column(rows2, column);
      ASSERT_EQ(c1.size(), c2.size());
      for (size_t i = 0; i < c1.size(); i++) {
        ASSERT_EQ(c1[i].second.empty(), c2[i].second.empty()) << column << " at step " << c1[i].first;
        if (c1[i].second.empty()) continue;
        const double a = std::stod(c1[i].second), b = std::stod(c2[i].second);
        EXPECT_NEAR(a, b, 2e-4 * std::fabs(a)) << column << " at step " << c1[i].first;
        compared++;
      }
    }
    EXPECT_GE(compared, 40);

    // The final weights, tensor by tensor.
    Checkpoint c1 = load_checkpoint(one + "/ckpt.safetensors"), c2 = load_checkpoint(two + "/ckpt.safetensors");
    ASSERT_EQ(c1.model->params_memory().size(), c2.model->params_memory().size());
    for (const TensorSpec& t : c1.model->table()) {
      double worst = 0, scale = 0;
      for (size_t i = t.offset; i < t.offset + t.numel; i++) {
        worst = std::max(worst, (double)std::fabs(c1.model->params_memory()[i] - c2.model->params_memory()[i]));
        scale = std::max(scale, (double)std::fabs(c1.model->params_memory()[i]));
      }
      EXPECT_LE(worst, 1e-4 * std::max(scale, 1.0)) << t.name;
    }
    EXPECT_EQ(c1.resume.batch_rng, c2.resume.batch_rng) << "the same windows were drawn";
    EXPECT_EQ(c1.resume.step, 20);
    EXPECT_EQ(c2.resume.step, 20);
  }

  TempDir dir_;
  std::string corpus_;
};

TEST_F(MpiTraining, TwoProcessesTrainLikeOneNextCharacter) {
  SKIP_WITHOUT_MPI();
  expect_same_run("--batch 4 --steps 20 --eval-every 10 --lr 3e-3");
}

// Slices of 3 and 2 rows, and MLM's targets: the weighting by target counts, not by 1/N, is what makes this pass.
TEST_F(MpiTraining, TwoProcessesTrainLikeOneUnevenSlicesMasked) {
  SKIP_WITHOUT_MPI();
  expect_same_run("--batch 5 --steps 20 --eval-every 10 --lr 3e-3 --objective mlm");
}

TEST_F(MpiTraining, TwoProcessesTrainLikeOnePrefixLM) {
  SKIP_WITHOUT_MPI();
  expect_same_run("--batch 3 --steps 20 --eval-every 10 --lr 3e-3 --objective prefix-lm");
}

TEST_F(MpiTraining, BatchSmallerThanTheProcessesIsRefused) {
  SKIP_WITHOUT_MPI();
  RunResult r = run("timeout 60 " + train_command(mpirun(2), dir_ / "out", "--batch 1 --steps 2"));
  EXPECT_FALSE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_NE(r.exit_code, 124) << "timed out: " << r.describe();
  EXPECT_NE(r.err.find("--batch 1 is smaller than the number of processes (2)"), std::string::npos) << r.describe();
}

// Only rank 0 touches --out, so only rank 0 fails here; rank 1 is already waiting in the first evaluation's
// all-reduce. The error must end the job (MPI_Abort), not leave rank 1 waiting forever.
TEST_F(MpiTraining, AnErrorOnOneProcessEndsTheJob) {
  SKIP_WITHOUT_MPI();
  const std::string file = dir_ / "file";
  progutil::write_file(file, "x");
  const auto start = std::chrono::steady_clock::now();
  RunResult r = run("timeout 60 " + train_command(mpirun(2), file + "/out", "--batch 4 --steps 2"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.exited && r.exit_code != 0 && r.exit_code != 124) << "seconds: " << seconds << "\n" << r.describe();
  EXPECT_NE(r.err.find("train: error: --out " + file + "/out"), std::string::npos) << r.describe();
  // mpirun's own "MPI_ABORT was invoked" text goes through its show_help relay, which in the full suite on this
  // machine sometimes fails ("ORTE_ERROR_LOG … show_help.c"); the job has still ended, with the rank's error.
  EXPECT_TRUE(r.err.find("MPI_ABORT") != std::string::npos || r.err.find("show_help.c") != std::string::npos)
      << r.describe();
}

// The pids of mpirun's children that run ./train, with their rank (from OMPI_COMM_WORLD_RANK).
std::vector<std::pair<int, pid_t>> ranks_of(pid_t mpirun_pid) {
  std::vector<std::pair<int, pid_t>> ranks;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_file(entry.path() / "stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    char state;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + paren + 1, " %c %d", &state, &ppid) != 2 || ppid != mpirun_pid) continue;
    const std::string env = read_file(entry.path() / "environ");
    const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
    for (size_t at = 0; at < env.size(); at = env.find('\0', at) + 1) {
      if (env.compare(at, key.size(), key) == 0) ranks.push_back({std::atoi(env.c_str() + at + key.size()), std::stoi(name)});
      if (env.find('\0', at) == std::string::npos) break;
    }
  }
  return ranks;
}

// SIGKILL one rank mid-run: mpirun ends the job with a message and a non-zero status, the last checkpoint loads,
// and one process resumes it and reaches the same weights as a single process that trained all along.
TEST_F(MpiTraining, KilledProcessEndsTheJobAndOneProcessResumes) {
  SKIP_WITHOUT_MPI();
  const std::string out = dir_ / "two", flags = "--batch 4 --steps 100000 --eval-every 0 --ckpt-every 5";
  // </dev/null: mpirun forwards its standard input to rank 0, and would otherwise swallow the test runner's.
  const std::string command = train_command(mpirun(2), out, flags) + " </dev/null >" + quote(dir_ / "stdout.txt") +
                              " 2>" + quote(dir_ / "stderr.txt");
  std::vector<std::string> args = {"/bin/sh", "-c", "exec " + command};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(0, posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ));

  using clock = std::chrono::steady_clock;
  auto wait_exit = [&](int seconds, int& status) {
    for (const auto deadline = clock::now() + std::chrono::seconds(seconds); clock::now() < deadline;) {
      if (waitpid(pid, &status, WNOHANG) == pid) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  // Wait for a few checkpoints (step ≥ 15), then kill rank 1.
  const std::string metrics = out + "/metrics.csv";
  std::vector<std::pair<int, pid_t>> ranks;
  int status = 0;
  bool running = false;
  for (const auto deadline = clock::now() + std::chrono::seconds(60); clock::now() < deadline;) {
    if (progutil::file_exists(metrics) && progutil::step_rows(metrics).size() >= 16 &&
        (ranks = ranks_of(pid)).size() == 2) {
      running = true;
      break;
    }
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!running) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the 2-process run did not get going within 60 s; stderr: " << read_file(dir_ / "stderr.txt");
  }
  for (auto [rank, rank_pid] : ranks) {
    if (rank == 1) {
      ASSERT_EQ(0, kill(rank_pid, SIGKILL));
    }
  }
  if (!wait_exit(60, status)) {
    kill(pid, SIGKILL);
    for (auto [rank, rank_pid] : ranks) kill(rank_pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "mpirun did not end the job within 60 s of one process being killed";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << "status " << status;
  const std::string err = read_file(dir_ / "stderr.txt");
  EXPECT_NE(err.find("signal 9"), std::string::npos) << err;
  // Neither process runs on (an exited one may linger as a zombie until init reaps it).
  auto running_process = [](pid_t p) {
    const std::string stat = read_file("/proc/" + std::to_string(p) + "/stat");
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && stat.compare(paren + 1, 3, " Z ") != 0;
  };
  for (auto [rank, rank_pid] : ranks) {
    for (const auto deadline = clock::now() + std::chrono::seconds(10);
         running_process(rank_pid) && clock::now() < deadline;)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_FALSE(running_process(rank_pid)) << "rank " << rank << " is still running";
  }

  // The last checkpoint is whole, and no temporary file is left to mistake for one.
  Checkpoint saved = load_checkpoint(out + "/ckpt.safetensors");
  ASSERT_TRUE(saved.resumable);
  const int step = saved.resume.step;
  EXPECT_GE(step, 15);
  EXPECT_EQ(step % 5, 0);

  // One process continues the run 10 more steps; a single process that trained from the start to the same step
  // agrees with it.
  RunResult resumed = run("./train --threads 1 --resume " + quote(out) + " --stop-at " + std::to_string(step + 10));
  ASSERT_TRUE(resumed.exited && resumed.exit_code == 0) << resumed.describe();
  const std::string one = dir_ / "one";
  RunResult single = run(train_command("", one, flags + " --stop-at " + std::to_string(step + 10)));
  ASSERT_TRUE(single.exited && single.exit_code == 0) << single.describe();
  Checkpoint a = load_checkpoint(out + "/ckpt.safetensors"), b = load_checkpoint(one + "/ckpt.safetensors");
  EXPECT_EQ(a.resume.step, step + 10);
  EXPECT_EQ(a.resume.batch_rng, b.resume.batch_rng);
  double worst = 0;
  for (size_t i = 0; i < a.model->params_memory().size(); i++)
    worst = std::max(worst, (double)std::fabs(a.model->params_memory()[i] - b.model->params_memory()[i]));
  EXPECT_LE(worst, 1e-3) << "after " << step + 10 << " steps";
}

}  // namespace

// Ranks started with different settings or data (issue 23): refused before the first step, naming the first rank
// and the first thing that differs; before, a different --n-embd corrupted the heap inside MPI_Allreduce and a
// different --steps or corpus ran silently.
TEST_F(MpiTraining, RanksThatDisagreeAreRefusedBeforeTheFirstStep) {
  SKIP_WITHOUT_MPI();
  const std::string other_corpus = dir_ / "other.txt";
  progutil::write_file(other_corpus, progutil::generated_text(6000, 7));  // same characters, other text
  struct Case {
    std::string flags_of_rank_1, words;
  };
  const std::vector<Case> cases = {
      {"--n-embd 32", "on the setting 'n_embd'"},
      {"--steps 7", "on the setting 'steps'"},
      {"--data " + quote(other_corpus), "on the corpus"},
      // Every setting that decides when the processes meet in a collective (an evaluation's all-reduce, save()'s
      // parameter check, the last step): a process that disagreed on one met the other in a different collective.
      {"--stop-at 3", "on --stop-at"},
      {"--eval-every 2", "on the setting 'eval_every'"},
      {"--ckpt-every 2", "on the setting 'ckpt_every'"},
      {"--eval-iters 3", "on the setting 'eval_iters'"},
      {"--eval-windows 8", "on the setting 'eval_windows'"},
      {"--batch 6", "on the setting 'batch'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags_of_rank_1);
    const std::string out = dir_ / "out";
    // MPMD: one process with the common flags, one with rank 1's; the last flag given wins in rank 1.
    const std::string common = "--batch 4 --steps 5 --eval-every 0";
    const std::string command = mpirun(1) + " " + train_command("", out, common) + " : -np 1 " +
                                train_command("", out, common + " " + c.flags_of_rank_1);
    const RunResult r = run("timeout 120 " + command);
    EXPECT_FALSE(r.exited && r.exit_code == 0) << r.describe();
    EXPECT_NE(r.exit_code, 124) << "the job hung";
    EXPECT_CONTAINS(r.err, "process 1 disagrees with process 0 " + c.words);
    EXPECT_FALSE(progutil::file_exists(out + "/ckpt.safetensors")) << "a disagreeing job trained and saved";
    EXPECT_EQ(r.err.find("all-reduce"), std::string::npos) << r.err;
  }
}
