// Hardening: bad inputs and faults, each checked for a clean outcome.
//   HardeningRegressions  every crash input the fuzzers found (tests/regressions/<target>/) and every committed
//                         seed, replayed through the fuzz entry points (fuzz/entries.h) in a child process
//   HardeningNumerics     fast_exp on NaN and infinity
//   HardeningCheckpoint   a checkpoint writer SIGKILLed at random moments never leaves a torn file
//   HardeningSignals      ./train and SIGTERM, and two quick SIGINTs
//   HardeningDiskErrors   ./train when the checkpoint cannot be written (file size limit, permission denied, a
//                         directory in the way)
//   HardeningDivergence   ./train with an absurd learning rate (in place, and resumed into another directory)
//   HardeningResources    a model too big for the machine, ./sample -n 100000000, a long prompt, NaN logits
//                         (generation and --score)
// The program tests start ./train and ./sample from the working directory, like tests/test_programs.cpp (under
// `make test-asan` that directory is build/asan/bin, holding the sanitized programs). Files of the source tree are
// found through $PLAINGPT_ROOT (default: the working directory).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../fuzz/entries.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "model/decoder.h"
#include "base/fast_exp.h"
#include "program_util.h"
#include "base/threads.h"
#include "train/trainer.h"
#include <nlohmann/json.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define HARDENING_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HARDENING_ASAN 1
#endif
#endif
#ifndef HARDENING_ASAN
#define HARDENING_ASAN 0
#endif

using progutil::quote;
using progutil::read_file;
using progutil::step_rows;
using progutil::TempDir;
using progutil::write_file;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

using progutil::source_root;

// ---- child processes -------------------------------------------------------------------------------------------

// A program started with fork + exec, stdout and stderr into files. `in_child` runs between fork and exec (only
// async-signal-safe calls there: setrlimit, signal).
struct Child {
  pid_t pid = -1;
  std::string out_log, err_log;
  int status = 0;
  struct rusage usage {};
  bool done = false;

  Child(const std::vector<std::string>& args, const std::string& log_prefix,
        const std::function<void()>& in_child = nullptr)
      : out_log(log_prefix + ".out"), err_log(log_prefix + ".err") {
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid = fork();
    if (pid == 0) {
      const int in = open("/dev/null", O_RDONLY), out = open(out_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644),
                err = open(err_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || err < 0) _exit(125);
      dup2(in, 0), dup2(out, 1), dup2(err, 2);
      if (in_child) in_child();
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid > 0 && !done) {
      kill(pid, SIGKILL);
      wait(30.0);
    }
  }
  // Waits for the exit, at most `seconds`; false on timeout (the child keeps running).
  bool wait(double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (!done) {
      const pid_t r = wait4(pid, &status, WNOHANG, &usage);
      if (r == pid) done = true;
      else if (r < 0) return false;
      else if (Clock::now() > deadline) return false;
      else std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  bool exited_with(int code) const { return done && WIFEXITED(status) && WEXITSTATUS(status) == code; }
  long max_rss_kb() const { return usage.ru_maxrss; }
  std::string out() const { return read_file(out_log); }
  std::string err() const { return read_file(err_log); }
  std::string describe() const {
    std::ostringstream s;
    if (!done) s << "still running";
    else if (WIFEXITED(status)) s << "exit code " << WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) s << "killed by signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status)) << ")";
    s << "\n--- stderr ---\n" << err().substr(0, 4000) << "--- stdout (first 1000 bytes) ---\n" << out().substr(0, 1000);
    return s.str();
  }
};

// Polls `condition` every 2 ms for at most `seconds`.
bool eventually(double seconds, const std::function<bool()>& condition) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return condition();
}

// A field of /proc/<pid>/status ("VmRSS", "SigPnd", …), or "" once the process is gone.
std::string proc_status(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) {
      std::string value = line.substr(field.size() + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  return "";
}

bool signal_in_mask(const std::string& hex_mask, int signal_number) {
  if (hex_mask.empty()) return false;
  return (std::stoull(hex_mask, nullptr, 16) >> (signal_number - 1)) & 1;
}

long rss_kb(pid_t pid) {
  const std::string v = proc_status(pid, "VmRSS");
  return v.empty() ? -1 : std::stol(v);
}

std::vector<std::string> temporary_files_in(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ignored;
  for (const auto& e : fs::directory_iterator(dir, ignored))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(e.path().string());
  return found;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// ./train with the tiny model of progutil::tiny_flags() plus `extra` words, as an argument vector.
std::vector<std::string> train_args(const std::string& corpus, const std::string& out, const std::string& extra) {
  std::vector<std::string> args = {"./train"};
  for (const std::string& w : split_words(progutil::tiny_flags())) args.push_back(w);
  for (const std::string& w : {std::string("--data"), corpus, std::string("--out"), out}) args.push_back(w);
  for (const std::string& w : split_words(extra)) args.push_back(w);
  return args;
}

class HardeningPrograms : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(progutil::file_exists("./train") && progutil::file_exists("./sample"))
        << "run the tests from the repository root after `make programs` (or through `make test-asan`)";
    corpus_ = dir_ / "corpus.txt";
    write_file(corpus_, progutil::generated_text(4000));
  }
  std::string log(const std::string& name) { return dir_ / name; }

  TempDir dir_;
  std::string corpus_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Fuzz regressions and seeds

namespace {

using Entry = void (*)(const uint8_t*, size_t);

struct Target {
  const char* name;
  Entry entry;
};
const Target kTargets[] = {{"checkpoint", fuzzentry::checkpoint_entry},
                           {"text", fuzzentry::text_entry},
                           {"specs", fuzzentry::spec_entry}};

// Runs `body` in a child process, so that a crash, a sanitizer report, a hang or an attempt to allocate gigabytes
// fails the one test or input (named by `what`) instead of taking the whole test binary down.
::testing::AssertionResult runs_cleanly_in_child(const std::string& what, const std::function<void()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    set_threads(1);
    alarm(20);  // a hang is a finding too (a real input takes milliseconds)
#if !HARDENING_ASAN
    // At most 2 GB more address space: an input of a few KB that needs more is a bug, and the limit turns the
    // allocation into std::bad_alloc instead of filling the machine. (Under ASan, mk/hardening.mk's
    // max_allocation_size_mb does the same; address-space limits do not work with its shadow memory.)
    const std::string vm = proc_status(getpid(), "VmSize");
    const rlim_t limit = (rlim_t)std::stoull(vm.empty() ? "0" : vm) * 1024 + (rlim_t(2) << 30);
    struct rlimit rl = {limit, limit};
    setrlimit(RLIMIT_AS, &rl);
#endif
    body();
    std::fflush(nullptr);
    _exit(0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return ::testing::AssertionFailure() << what << ": waitpid failed";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure() << what << ": ";
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return failure << "still running after 20 s: it hangs";
  if (WIFSIGNALED(status))
    return failure << "killed by signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status)) << ")"
                   << " — see the report above";
  return failure << "exit code " << WEXITSTATUS(status) << " — see the report above";
}

::testing::AssertionResult replays_cleanly(Entry entry, const std::string& file) {
  const std::string bytes = read_file(file);
  return runs_cleanly_in_child(file, [&] { entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()); });
}

// Every regular file below `dir` except notes (*.md).
std::vector<std::string> inputs_in(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() != ".md") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST(HardeningRegressions, EveryCrashInputFoundByFuzzingIsHandled) {
  const std::string root = source_root() + "/tests/regressions";
  ASSERT_TRUE(fs::is_directory(root)) << root << " is missing; set PLAINGPT_ROOT to the source tree";
  int replayed = 0;
  for (const Target& t : kTargets) {
    const std::string dir = root + "/" + t.name;
    if (!fs::is_directory(dir)) continue;
    for (const std::string& file : inputs_in(dir)) {
      EXPECT_TRUE(replays_cleanly(t.entry, file));
      replayed++;
    }
  }
  RecordProperty("replayed", replayed);
}

TEST(HardeningRegressions, CommittedSeedsAreHandled) {
  const std::string root = source_root() + "/fuzz/corpus";
  ASSERT_TRUE(fs::is_directory(root)) << root << " is missing; set PLAINGPT_ROOT to the source tree";
  for (const Target& t : kTargets) {
    const std::string dir = root + "/" + t.name;
    if (!fs::is_directory(dir)) continue;
    for (const std::string& file : inputs_in(dir)) EXPECT_TRUE(replays_cleanly(t.entry, file));
  }
}

// The oracle itself: a real checkpoint and real text pass through the entries without a broken invariant.
TEST(HardeningRegressions, EntriesAcceptValidInputs) {
  TempDir dir;
  Tokenizer tok = Tokenizer::from_text(U"abc猫\n");
  tok.add_special(kMaskToken);
  ModelConfig config;
  config.n_layer = 1, config.n_head = 1, config.n_embd = 2, config.block_size = 3, config.vocab_size = tok.size();
  GPT model(config, parse_layer_masks("bidirectional", 1));
  model.init_weights(1);
  save_checkpoint(dir / "c.safetensors", model, tok, nullptr, Objective::MLM);
  EXPECT_TRUE(replays_cleanly(fuzzentry::checkpoint_entry, dir / "c.safetensors"));
  write_file(dir / "t.txt", "猫坐在垫子上。The cat 🙂");
  EXPECT_TRUE(replays_cleanly(fuzzentry::text_entry, dir / "t.txt"));
}

// A diverging run is caught because NaN reaches the loss; fast_exp (softmax, cross-entropy, GELU) must pass it
// on without undefined behaviour on the way (converting NaN to an integer is UB, and UBSan stops the program).
TEST(HardeningNumerics, FastExpOfNanAndInfinityIsDefined) {
  EXPECT_TRUE(runs_cleanly_in_child("fast_exp", [] {
    volatile float nan = std::nanf(""), inf = INFINITY;  // volatile: computed at run time, where UBSan looks
    FUZZ_CHECK(std::isnan(fast_exp(nan)));
    FUZZ_CHECK(std::isnan(fast_exp(-nan)));
    FUZZ_CHECK(fast_exp(-inf) == 0.0f);
    FUZZ_CHECK(std::isfinite(fast_exp(inf)) && fast_exp(inf) > 1e38f);
    FUZZ_CHECK(std::fabs(fast_exp(1.0f) - 2.7182817f) < 1e-6f);
  }));
}

// The run's settings come back from a checkpoint's JSON on --resume. A number its field cannot hold (4e19 layers,
// a negative seed, 2.5 steps) is refused with the field's name instead of being cast, which would be UB.
TEST(HardeningNumerics, OutOfRangeTrainingSettingsAreRefusedByName) {
  const TrainConfig defaults;
  const std::string good = to_json(defaults);
  EXPECT_EQ(train_config_from_json(good, "c").model.n_layer, defaults.model.n_layer);
  auto with = [&](const std::string& key, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(good);
    j[key] = nlohmann::json::parse(value);
    return j.dump();
  };
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"n_layer", "4e19"}, {"n_layer", "44444444444444444444"}, {"n_layer", "2147483648"}, {"n_layer", "2147483647"},
           {"steps", "2.5"}, {"seed", "-1"}, {"lr", "1e300"}, {"batch", "\"12\""}}) {
    try {
      train_config_from_json(with(key, value), "c.safetensors");
      ADD_FAILURE() << key << " = " << value << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("c.safetensors"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(train_config_from_json(with("seed", "18446744073709551615"), "c").seed, UINT64_MAX);
  EXPECT_EQ(train_config_from_json(with("n_layer", "1024"), "c").model.n_layer, 1024);  // its row's upper bound
}

// ---------------------------------------------------------------------------------------------------------------
// Crash-consistent checkpoints

namespace {

// A small model (about 230k parameters, so a resumable checkpoint of 2.8 MB) whose every parameter and AdamW
// moment is `value`, saved with step = adam_t = value: a file mixing two versions cannot pass
// is_one_whole_version.
struct VersionWriter {
  Tokenizer tok;
  std::unique_ptr<GPT> model;
  ResumeState state;

  VersionWriter() {
    std::u32string chars;
    for (char32_t c = 0x21; c < 0x61; c++) chars += c;  // 64 characters
    tok = Tokenizer::from_text(chars);
    ModelConfig config;
    config.n_layer = 2, config.n_head = 4, config.n_embd = 96, config.block_size = 64, config.vocab_size = tok.size();
    model = std::make_unique<GPT>(config);
    state.optimizer.m.assign(model->num_params(), 0.0f);
    state.optimizer.v.assign(model->num_params(), 0.0f);
    state.batch_rng = std::string(64, 'a');
    state.train_config = "{}";
  }
  void write(const std::string& path, int version) {
    const float value = (float)version;
    std::fill(model->params_memory().begin(), model->params_memory().end(), value);
    std::fill(state.optimizer.m.begin(), state.optimizer.m.end(), value);
    std::fill(state.optimizer.v.begin(), state.optimizer.v.end(), value);
    state.step = version;
    state.optimizer.t = version;
    save_checkpoint(path, *model, tok, &state);
  }
};

::testing::AssertionResult is_one_whole_version(const std::string& path) {
  try {
    Checkpoint c = load_checkpoint(path);
    if (!c.resumable) return ::testing::AssertionFailure() << "not resumable";
    const int version = c.resume.step;
    if (version != 1 && version != 2) return ::testing::AssertionFailure() << "step " << version;
    if (c.resume.optimizer.t != version) return ::testing::AssertionFailure() << "adam_t " << c.resume.optimizer.t;
    const float value = (float)version;
    for (Span<const float> v : {Span<const float>(c.model->params_memory()), Span<const float>(c.resume.optimizer.m),
                                Span<const float>(c.resume.optimizer.v)})
      for (size_t i = 0; i < v.size(); i++)
        if (v[i] != value)
          return ::testing::AssertionFailure() << "step " << version << " but element " << i << " is " << v[i];
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "does not load: " << e.what();
  }
}

}  // namespace

TEST(HardeningCheckpoint, SigkillAtRandomMomentsNeverLeavesAMixedFile) {
  TempDir dir;
  const std::string path = dir / "ckpt.safetensors";
  VersionWriter writer;
  writer.write(path, 1);
  const size_t file_size = fs::file_size(path);
  ASSERT_GT(file_size, 2u << 20) << "the file must be big enough for kills to land mid-write";

  std::mt19937 rng(20261129);
  // Two ways to choose the moment. A blind kill lands anywhere in the writer's loop: serialising and checksumming in
  // memory, or between open and rename; how often it is the latter depends on the build and the machine (0 of 600
  // once under the sanitizers on a fast disk, when the blind moments were 0-40 ms: the writer was still in memory).
  // So every other kill waits until the writer's temporary file appears and then strikes within a millisecond or
  // two: such a kill lands mid-write or just after the rename, both of which must leave one whole version.
  const int min_kills = 60, max_kills = 600;
  const auto one_write = [&] {
    const auto t0 = Clock::now();
    writer.write(path, 1);
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  }();
  const int blind_span_us = (int)std::max<long long>(2000, 3 * one_write);  // the first three writes or so
  int kills = 0;
  int mid_write = 0;  // kills that left the writer's temporary file behind: it was between open and rename
  std::vector<pid_t> killed;
  const auto start = Clock::now();
  for (int k = 0; k < max_kills && (k < min_kills || mid_write < 5); k++, kills++) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        for (int i = 0;; i++) writer.write(path, 2 - i % 2);  // 2, 1, 2, 1, …
      } catch (...) {
        _exit(3);
      }
    }
    ASSERT_GT(pid, 0);
    const std::string temporary = path + ".tmp." + std::to_string(pid);
    if (k % 2 == 0) {
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<int>(0, blind_span_us)(rng)));
    } else {
      const auto give_up = Clock::now() + std::chrono::seconds(10);
      while (!progutil::file_exists(temporary) && Clock::now() < give_up) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 2000)(rng)));
    }
    ASSERT_EQ(0, kill(pid, SIGKILL));
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the writer failed by itself: " << status;
    killed.push_back(pid);
    if (progutil::file_exists(temporary)) mid_write++;
    ASSERT_TRUE(is_one_whole_version(path)) << "after kill " << k;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("  %d SIGKILLs of a writer of %zu-byte checkpoints (one write %lld us) in %.1f s, %d of them mid-write\n",
              kills, file_size, (long long)one_write, seconds, mid_write);
  RecordProperty("kills", kills);
  RecordProperty("mid_write_kills", mid_write);
  EXPECT_GE(mid_write, 5) << "too few kills landed mid-write to test anything";

  // The killed writers' temporary files are still there, and do not get in the way of loading or saving.
  EXPECT_EQ(temporary_files_in(dir.path()).size(), (size_t)mid_write);
  EXPECT_TRUE(is_one_whole_version(path));
  writer.write(path, 2);
  EXPECT_TRUE(is_one_whole_version(path));
  EXPECT_EQ(load_checkpoint(path).resume.step, 2);
}

TEST(HardeningCheckpoint, LeftoverTemporaryFilesDoNotBreakLoadingOrSaving) {
  TempDir dir;
  const std::string path = dir / "ckpt.safetensors";
  VersionWriter writer;
  writer.write(path, 1);
  // A killed writer's partial file, and one whose pid happens to be ours now (pid reuse): longer than the new
  // checkpoint, so a write that did not truncate it would leave garbage at the end.
  const std::string full = read_file(path);
  write_file(path + ".tmp.99999999", full.substr(0, full.size() / 3));
  write_file(temporary_path_for(path), full + std::string(100000, 'x'));
  EXPECT_TRUE(is_one_whole_version(path));
  writer.write(path, 2);
  EXPECT_TRUE(is_one_whole_version(path));
  EXPECT_EQ(fs::file_size(path), full.size());
  EXPECT_FALSE(progutil::file_exists(temporary_path_for(path))) << "our own temporary was renamed into place";
  EXPECT_TRUE(progutil::file_exists(path + ".tmp.99999999")) << "another process's temporary is not ours to remove";
}

// ---------------------------------------------------------------------------------------------------------------
// Signals

TEST_F(HardeningPrograms, SigtermSavesAFinalCheckpointAndExitsZero) {
  const std::string out = dir_ / "out", metrics = out + "/metrics.csv";
  Child train(train_args(corpus_, out, "--steps 1000000 --eval-every 0"), log("train"));
  ASSERT_TRUE(eventually(60, [&] {
    return (progutil::file_exists(metrics) && step_rows(metrics).size() >= 2) || train.wait(0);
  })) << "training did not start within 60 s";
  ASSERT_FALSE(train.done) << train.describe();
  ASSERT_EQ(0, kill(train.pid, SIGTERM));
  ASSERT_TRUE(train.wait(60)) << "./train did not stop within 60 s of SIGTERM";
  ASSERT_TRUE(train.exited_with(0)) << train.describe();
  EXPECT_CONTAINS(train.out(), "interrupted: saved step");

  Checkpoint c = load_checkpoint(out + "/ckpt.safetensors");
  ASSERT_TRUE(c.resumable);
  const std::vector<int> rows = step_rows(metrics);
  EXPECT_EQ(c.resume.step, (int)rows.size()) << "the checkpoint holds every step that was logged";
  EXPECT_TRUE(temporary_files_in(out).empty());
}

TEST_F(HardeningPrograms, TwoQuickSigintsExitAtOnceAndKeepTheLastCheckpoint) {
  const std::string out = dir_ / "out", metrics = out + "/metrics.csv", ckpt = out + "/ckpt.safetensors";
  // A model big enough that a step takes a few milliseconds: the second SIGINT must arrive while the first one
  // is still waiting for its step to end.
  Child train({"./train", "--n-layer", "2", "--n-head", "2", "--n-embd", "96", "--block", "64", "--batch", "8",
               "--eval-iters", "1", "--threads", "1", "--steps", "1000000", "--eval-every", "0", "--ckpt-every", "2",
               "--data", corpus_, "--out", out},
              log("train"));
  ASSERT_TRUE(eventually(60, [&] {
    return (progutil::file_exists(ckpt) && progutil::file_exists(metrics) && step_rows(metrics).size() >= 3) ||
           train.wait(0);
  })) << "no checkpoint within 60 s";
  ASSERT_FALSE(train.done) << train.describe();
  const int saved_step = load_checkpoint(ckpt).resume.step;
  ASSERT_GE(saved_step, 2);
  ASSERT_TRUE(signal_in_mask(proc_status(train.pid, "SigCgt"), SIGINT)) << "no SIGINT handler installed";

  ASSERT_EQ(0, kill(train.pid, SIGINT));
  // Standard signals do not queue: a second SIGINT sent while the first is still pending would merge with it.
  // So wait until the first one has been delivered (it left the pending sets) before sending the second.
  // Busy-polled (no sleep): the window until the step ends and the final save is done is a few milliseconds.
  const auto poll_deadline = Clock::now() + std::chrono::seconds(10);
  while (signal_in_mask(proc_status(train.pid, "ShdPnd"), SIGINT) ||
         signal_in_mask(proc_status(train.pid, "SigPnd"), SIGINT))
    ASSERT_LT(Clock::now(), poll_deadline) << "the first SIGINT was not delivered within 10 s";
  ASSERT_EQ(0, kill(train.pid, SIGINT));
  const auto sent = Clock::now();
  ASSERT_TRUE(train.wait(10)) << "./train did not exit within 10 s of the second SIGINT";
  const double seconds = std::chrono::duration<double>(Clock::now() - sent).count();
  ASSERT_TRUE(train.done && WIFEXITED(train.status) && WEXITSTATUS(train.status) != 0)
      << "expected an immediate non-zero exit; " << train.describe();
  EXPECT_EQ(WEXITSTATUS(train.status), 130);
  EXPECT_LT(seconds, 5.0);

  // Whatever the process was doing, the checkpoint on disk is whole: the one we saw or a later periodic one.
  Checkpoint c = load_checkpoint(ckpt);
  ASSERT_TRUE(c.resumable);
  EXPECT_GE(c.resume.step, saved_step);
  EXPECT_LE(c.resume.step, (int)step_rows(metrics).size() + 1);
  // And it said which file survived with which step: the last save it completed (a save under way when the
  // signal came may have finished its rename too, so the file can be one save newer).
  std::smatch m;
  const std::string err = train.err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("second interrupt: exiting at once without saving; (.*) holds step "
                                                   "([0-9]+)")))
      << err;
  EXPECT_EQ(m[1].str(), ckpt);
  EXPECT_GE(std::stoi(m[2]), saved_step);
  EXPECT_LE(std::stoi(m[2]), c.resume.step);
}

// ---------------------------------------------------------------------------------------------------------------
// Disk full and I/O errors

namespace {

// Runs `./train --resume out --steps 12` with the file size limit set below the checkpoint's size, so the final
// checkpoint write fails; `ignore_sigxfsz` chooses how the kernel reports it: EFBIG from write() (what a full
// disk looks like to the program: an error return), or the default SIGXFSZ, which kills a process that does not
// handle it.
void expect_clean_failure_when_the_checkpoint_cannot_be_written(const std::string& corpus, const TempDir& dir,
                                                                bool ignore_sigxfsz) {
  const std::string out = dir / "out", ckpt = out + "/ckpt.safetensors";
  {
    Child first(train_args(corpus, out, "--steps 6"), dir / "first");
    ASSERT_TRUE(first.wait(120) && first.exited_with(0)) << first.describe();
  }
  const std::string good = read_file(ckpt);
  ASSERT_GT(good.size(), 8192u);
  const rlim_t limit = good.size() / 2;  // metrics.csv stays far below this
  Child resumed({"./train", "--resume", out, "--steps", "12"}, dir / "resumed", [&] {
    struct rlimit rl = {limit, limit};
    setrlimit(RLIMIT_FSIZE, &rl);
    signal(SIGXFSZ, ignore_sigxfsz ? SIG_IGN : SIG_DFL);
  });
  ASSERT_TRUE(resumed.wait(120)) << "./train did not finish";
  EXPECT_TRUE(resumed.exited_with(1)) << resumed.describe();
  EXPECT_CONTAINS(resumed.err(), "train: error: ");
  EXPECT_CONTAINS(resumed.err(), ckpt);
  EXPECT_CONTAINS(resumed.err(), "File too large");
  EXPECT_TRUE(read_file(ckpt) == good) << "the previous checkpoint changed";
  EXPECT_TRUE(temporary_files_in(out).empty()) << temporary_files_in(out)[0];
  EXPECT_EQ(load_checkpoint(ckpt).resume.step, 6);
}

}  // namespace

TEST_F(HardeningPrograms, FileSizeLimitWithWriteErrorsFailsCleanlyAndKeepsThePreviousCheckpoint) {
  expect_clean_failure_when_the_checkpoint_cannot_be_written(corpus_, dir_, /*ignore_sigxfsz=*/true);
}

// The same limit with SIGXFSZ at its default (as `ulimit -f` in a shell leaves it): ./train must still fail
// with its own message, not be killed by the signal halfway through a write.
TEST_F(HardeningPrograms, FileSizeLimitWithDefaultSignalsFailsCleanlyAndKeepsThePreviousCheckpoint) {
  expect_clean_failure_when_the_checkpoint_cannot_be_written(corpus_, dir_, /*ignore_sigxfsz=*/false);
}

// Permission denied at checkpoint time: the output directory turns read-only while ./train runs, then SIGTERM asks
// for the final checkpoint. Root ignores permission bits, so when the suite runs as root (CI) ./train runs as
// nobody (uid/gid 65534), which owns the output directory: the kernel then refuses the temporary file as it would
// for any user.
TEST_F(HardeningPrograms, PermissionDeniedAtTheFinalCheckpointFailsCleanlyAndKeepsThePreviousOne) {
  const bool root = geteuid() == 0;
  const uid_t nobody = 65534;
  const std::string out = dir_ / "out", ckpt = out + "/ckpt.safetensors", metrics = out + "/metrics.csv";
  const auto as_user = [&] {
    if (root && (setgroups(0, nullptr) != 0 || setgid(nobody) != 0 || setuid(nobody) != 0)) _exit(124);
  };
  if (root) {
    ASSERT_EQ(0, chmod(dir_.path().c_str(), 0755));  // nobody must reach the corpus and the output directory
    ASSERT_EQ(0, chmod(corpus_.c_str(), 0644));
    fs::create_directory(out);
    ASSERT_EQ(0, chown(out.c_str(), nobody, nobody));
  }
  {
    Child first(train_args(corpus_, out, "--steps 4 --eval-every 0"), log("first"), as_user);
    ASSERT_TRUE(first.wait(120) && first.exited_with(0)) << first.describe();
  }
  const std::string good = read_file(ckpt);
  ASSERT_EQ(load_checkpoint(ckpt).resume.step, 4);

  // No periodic checkpoints: the only save is the one SIGTERM asks for, after the directory became read-only.
  Child train({"./train", "--resume", out, "--steps", "1000000", "--ckpt-every", "0"}, log("train"), as_user);
  ASSERT_TRUE(eventually(60, [&] {
    return (progutil::file_exists(metrics) && step_rows(metrics).size() >= 7) || train.wait(0);
  }))
      << "training did not continue within 60 s";
  ASSERT_FALSE(train.done) << train.describe();
  ASSERT_EQ(0, chmod(out.c_str(), 0555));
  ASSERT_EQ(0, kill(train.pid, SIGTERM));
  const bool finished = train.wait(60);
  chmod(out.c_str(), 0755);  // so that TempDir can remove it
  ASSERT_TRUE(finished) << "./train did not stop within 60 s of SIGTERM";
  EXPECT_TRUE(train.exited_with(1)) << train.describe();
  EXPECT_CONTAINS(train.err(), "train: error: cannot write '" + ckpt + "'");
  EXPECT_CONTAINS(train.err(), "Permission denied");
  EXPECT_EQ(train.out().find("interrupted: saved step"), std::string::npos) << "claims a save that failed";
  EXPECT_TRUE(read_file(ckpt) == good) << "the previous checkpoint changed";
  EXPECT_TRUE(temporary_files_in(out).empty()) << temporary_files_in(out)[0];
  EXPECT_EQ(load_checkpoint(ckpt).resume.step, 4);
}

TEST_F(HardeningPrograms, CheckpointPathThatIsADirectoryFailsBeforeTraining) {
  const std::string out = dir_ / "out", ckpt = out + "/ckpt.safetensors";
  fs::create_directories(ckpt);
  write_file(ckpt + "/keep", "precious");
  Child train(train_args(corpus_, out, "--steps 20 --eval-every 0"), log("train"));
  ASSERT_TRUE(train.wait(120)) << "./train did not finish";
  EXPECT_TRUE(train.exited_with(1)) << train.describe();
  EXPECT_CONTAINS(train.err(), "train: error: ");
  EXPECT_CONTAINS(train.err(), ckpt);
  EXPECT_EQ(read_file(ckpt + "/keep"), "precious");
  EXPECT_TRUE(temporary_files_in(out).empty());
  // prepare_output_dir's promise: a bad --out fails in the first second, not at the first checkpoint.
  const std::string metrics = out + "/metrics.csv";
  EXPECT_TRUE(!progutil::file_exists(metrics) || step_rows(metrics).empty())
      << "./train trained " << step_rows(metrics).size() << " steps before finding that it cannot save them";
}

// ---------------------------------------------------------------------------------------------------------------
// Divergence

TEST_F(HardeningPrograms, AbsurdLearningRateStopsNamingTheStepAndKeepsTheLastCheckpoint) {
  const std::string out = dir_ / "out", ckpt = out + "/ckpt.safetensors";
  // A learning rate that climbs by 0.1 a step (a warm-up a billion steps long towards 1e8): AdamW's step 0 at lr 0.1
  // still gives a good checkpoint at step 1, then the steps grow until the loss explodes (finite or not: the
  // divergence guard stops it at the latest at the final save, divergence_guard.h).
  const std::string absurd = "--optimizer adamw --lr 1e8 --min-lr 0 --warmup 1000000000 --grad-clip 0 --eval-every 0 "
                             "--steps 50 --ckpt-every 1";
  {
    Child first(train_args(corpus_, out, absurd + " --stop-at 1"), log("first"));
    ASSERT_TRUE(first.wait(120) && first.exited_with(0)) << first.describe();
  }
  const std::string good = read_file(ckpt);
  ASSERT_EQ(load_checkpoint(ckpt).resume.step, 1);

  // Continue without periodic checkpoints, so the file must be byte-identical whichever step diverges.
  Child resumed({"./train", "--resume", out, "--ckpt-every", "0"}, log("resumed"));
  ASSERT_TRUE(resumed.wait(120)) << "./train did not finish";
  EXPECT_TRUE(resumed.exited_with(1)) << resumed.describe();
  std::smatch m;
  const std::string err = resumed.err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("diverged at step ([0-9]+)"))) << err;
  EXPECT_GE(std::stoi(m[1]), 1);
  EXPECT_LE(std::stoi(m[1]), 50);
  EXPECT_CONTAINS(err, "lower --lr");
  EXPECT_CONTAINS(err, ckpt + " holds the last good checkpoint (step 1)");
  EXPECT_TRUE(read_file(ckpt) == good) << "the last good checkpoint changed";
  EXPECT_TRUE(temporary_files_in(out).empty());
  EXPECT_EQ(load_checkpoint(ckpt).resume.step, 1) << "and it still loads: every value finite";
}

// A run that diverges before its first checkpoint must not point the user at a checkpoint that does not exist.
TEST_F(HardeningPrograms, DivergenceBeforeAnyCheckpointDoesNotClaimOne) {
  const std::string out = dir_ / "out", ckpt = out + "/ckpt.safetensors";
  Child train(train_args(corpus_, out, "--lr 1e9 --min-lr 0 --warmup 0 --grad-clip 0 --eval-every 0 --steps 50 "
                                       "--ckpt-every 0"),
              log("train"));
  ASSERT_TRUE(train.wait(120)) << "./train did not finish";
  EXPECT_TRUE(train.exited_with(1)) << train.describe();
  EXPECT_CONTAINS(train.err(), "diverged at step");
  EXPECT_CONTAINS(train.err(), "--lr");
  ASSERT_FALSE(progutil::file_exists(ckpt));
  EXPECT_EQ(train.err().find("holds the last good checkpoint"), std::string::npos) << train.err();
}

// `./train --resume A --out B` that diverges before its first save: B holds nothing of this run (no file, or
// another run's checkpoint), so the message must not send the user there; A is the last good state, untouched.
TEST_F(HardeningPrograms, DivergenceAfterResumingIntoAnotherDirectoryDoesNotClaimACheckpointThere) {
  const std::string a = dir_ / "a", a_ckpt = a + "/ckpt.safetensors";
  const std::string absurd = "--optimizer adamw --lr 1e8 --min-lr 0 --warmup 1000000000 --grad-clip 0 --eval-every 0 "
                             "--steps 50 --ckpt-every 1";  // as above: good at step 1, then exploding
  {
    Child first(train_args(corpus_, a, absurd + " --stop-at 1"), log("first"));
    ASSERT_TRUE(first.wait(120) && first.exited_with(0)) << first.describe();
  }
  const std::string good = read_file(a_ckpt);
  ASSERT_EQ(load_checkpoint(a_ckpt).resume.step, 1);

  // b: no checkpoint at all. c: a checkpoint of another run (step 2, its own settings).
  const std::string b = dir_ / "b", c = dir_ / "c", c_ckpt = c + "/ckpt.safetensors";
  {
    Child other(train_args(corpus_, c, "--steps 2 --eval-every 0"), log("other"));
    ASSERT_TRUE(other.wait(120) && other.exited_with(0)) << other.describe();
  }
  const std::string other_run = read_file(c_ckpt);
  for (const std::string& out : {b, c}) {
    SCOPED_TRACE("--out " + out);
    const std::string out_ckpt = out + "/ckpt.safetensors";
    // --overwrite: c holds another run, which a resume may replace only when asked to (run_folder.h).
    Child resumed({"./train", "--resume", a, "--out", out, "--ckpt-every", "0", "--overwrite"}, log("resumed"));
    ASSERT_TRUE(resumed.wait(120)) << "./train did not finish";
    EXPECT_TRUE(resumed.exited_with(1)) << resumed.describe();
    const std::string err = resumed.err();
    EXPECT_CONTAINS(err, "diverged at step");
    EXPECT_CONTAINS(err, "the checkpoint this run resumed from (step 1) is unchanged");
    EXPECT_EQ(err.find("holds the last good checkpoint"), std::string::npos) << err;
    EXPECT_CONTAINS(err, "lower --lr");
    EXPECT_TRUE(read_file(a_ckpt) == good) << "the checkpoint resumed from changed";
    if (out == b) EXPECT_FALSE(progutil::file_exists(out_ckpt));
    else EXPECT_TRUE(read_file(c_ckpt) == other_run) << "the other run's checkpoint changed";
    EXPECT_TRUE(temporary_files_in(out).empty());
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Resource limits

namespace {

// The peak resident memory we accept for a program that refuses its job up front; ASan's shadow memory and
// allocator add their own baseline. A child's ru_maxrss also counts what it inherits from this test process: the
// fork copies the page tables, and exec records the old image's high-water mark. So the limit is at least this
// process's own peak plus 100 MB (under ASan the suite itself grows past 400 MB; the plain run, whose runner stays
// small, is the strict check).
long small_rss_kb() {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  return std::max<long>(HARDENING_ASAN ? 400 * 1024 : 150 * 1024, self.ru_maxrss + 100 * 1024);
}

}  // namespace

// 64 layers of width 65536 need about 13 TB; the refusal must come from check_fits_in_memory, with the number,
// not from a failed allocation (std::bad_alloc, or an OOM kill on a machine that overcommits).
TEST_F(HardeningPrograms, ModelTooBigForTheMachineIsRefusedUpFrontWithoutAllocating) {
  const auto start = Clock::now();
  Child train(train_args(corpus_, dir_ / "out", "--n-embd 65536 --n-layer 64 --steps 1"), log("train"));
  ASSERT_TRUE(train.wait(60)) << "not refused within 60 s";
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_TRUE(train.exited_with(1)) << train.describe();
  EXPECT_CONTAINS(train.err(), "train: error: this model needs about ");
  EXPECT_CONTAINS(train.err(), "bytes");
  EXPECT_LT(train.max_rss_kb(), small_rss_kb()) << "peak RSS in KB";
  EXPECT_LT(seconds, 20.0);
}

// The parameters of this model fit (400 MB, 800 MB with gradients) but its activations at batch 512 and block
// 4096 do not: nothing of the model may be allocated before the refusal.
TEST_F(HardeningPrograms, ModelWhoseActivationsDoNotFitIsRefusedBeforeItsParametersAreAllocated) {
  const std::string big_corpus = dir_ / "big.txt";
  write_file(big_corpus, progutil::generated_text(50000));
  Child train(train_args(big_corpus, dir_ / "out", "--n-embd 1024 --n-layer 8 --block 4096 --batch 512 --steps 1"),
              log("train"));
  ASSERT_TRUE(train.wait(60)) << "not refused within 60 s";
  EXPECT_TRUE(train.exited_with(1)) << train.describe();
  EXPECT_CONTAINS(train.err(), "this model needs about ");
  EXPECT_LT(train.max_rss_kb(), small_rss_kb()) << "peak RSS in KB: the parameters were allocated before the check";
}

// ./sample -n 100000000 streams: its memory must not grow with the number of characters generated. Sample for a
// while, compare the resident size early and late, then stop it.
TEST_F(HardeningPrograms, SampleWithAHugeNKeepsMemoryBounded) {
  const std::string out = dir_ / "out";
  {
    Child first(train_args(corpus_, out, "--steps 2"), log("first"));
    ASSERT_TRUE(first.wait(120) && first.exited_with(0)) << first.describe();
  }
  Child sample({"./sample", "--threads", "1", "--ckpt", out, "-n", "100000000", "--seed", "3"}, log("sample"));
  auto generated = [&] {
    struct stat st;
    return stat(sample.out_log.c_str(), &st) == 0 ? (long)st.st_size : 0L;
  };
  ASSERT_TRUE(eventually(60, [&] { return generated() >= 20000 || sample.wait(0); })) << "no output within 60 s";
  ASSERT_FALSE(sample.done) << sample.describe();
  const long early_rss = rss_kb(sample.pid), early_chars = generated();
  const long more_chars = HARDENING_ASAN ? 100000 : 200000;
  const bool more = eventually(HARDENING_ASAN ? 10 : 3, [&] { return generated() >= early_chars + more_chars || sample.wait(0); });
  ASSERT_FALSE(sample.done) << sample.describe();
  const long late_rss = rss_kb(sample.pid), late_chars = generated();
  kill(sample.pid, SIGKILL);
  sample.wait(30);
  std::printf("  ./sample -n 100000000: RSS %ld KB after %ld characters, %ld KB after %ld\n", early_rss, early_chars,
              late_rss, late_chars);
  EXPECT_TRUE(more || late_chars > early_chars + 20000) << "too little progress to judge: " << late_chars;
  // A few pages of stdio and allocator noise, nothing proportional to the 100 000+ characters in between. (ASan
  // quarantines freed memory, up to 256 MB, so its RSS is no measure of a leak; LeakSanitizer covers that.)
  if (!HARDENING_ASAN) {
    EXPECT_LT(late_rss - early_rss, 4 * 1024) << "KB of growth";
  }
}

// Weights that are finite (so the checkpoint loads) but so large that the forward pass overflows: ./sample must
// refuse with a message naming the checkpoint, not print characters drawn from NaN (greedy or sampled).
TEST_F(HardeningPrograms, SampleRefusesNonFinitePredictionsNamingTheCheckpoint) {
  const std::string out = dir_ / "out", huge = dir_ / "huge.safetensors";
  {
    Child first(train_args(corpus_, out, "--steps 2"), log("first"));
    ASSERT_TRUE(first.wait(120) && first.exited_with(0)) << first.describe();
  }
  {
    Checkpoint c = load_checkpoint(out + "/ckpt.safetensors");
    for (float& w : c.model->params_memory()) w = w >= 0 ? 1e30f : -1e30f;
    save_checkpoint(huge, *c.model, c.tokenizer, nullptr, c.objective);
    // The premise: it loads, and its predictions are not finite.
    Checkpoint loaded = load_checkpoint(huge);
    set_threads(1);
    Decoder decoder(*loaded.model);
    const float* logits = decoder.push(0);
    bool all_finite = true;
    for (int v = 0; v < loaded.model->config.vocab_size; v++) all_finite = all_finite && std::isfinite(logits[v]);
    ASSERT_FALSE(all_finite) << "the test model's logits are finite; make its weights larger";
  }
  for (const std::string temperature : {"0.8", "0"}) {
    SCOPED_TRACE("--temperature " + temperature);
    Child sample({"./sample", "--threads", "1", "--ckpt", huge, "-n", "50", "--prompt", "The", "--temperature",
                  temperature},
                 log("sample"));
    ASSERT_TRUE(sample.wait(60)) << "./sample did not finish";
    EXPECT_TRUE(sample.exited_with(1)) << sample.describe();
    EXPECT_CONTAINS(sample.err(), "sample: error: " + huge + ": the model's predictions are not finite numbers");
    EXPECT_EQ(sample.out(), "The\n") << "nothing generated from non-finite logits";
  }
  // --score: the same refusal, not "nan bits/char".
  Child score({"./sample", "--threads", "1", "--ckpt", huge, "--score", corpus_}, log("score"));
  ASSERT_TRUE(score.wait(60)) << "./sample --score did not finish";
  EXPECT_TRUE(score.exited_with(1)) << score.describe();
  EXPECT_CONTAINS(score.err(), "sample: error: " + huge + ": the model's predictions are not finite numbers");
  EXPECT_EQ(score.out().find("nan"), std::string::npos) << score.out();
}

// A prompt longer than the context slides through the decoder: through ./sample as long as one argument may be
// (Linux caps a single argument at 128 KiB; a 10 MB --prompt never reaches the program, execve fails with E2BIG),
// and through the library's decoder with hundreds of thousands of tokens.
TEST_F(HardeningPrograms, LongPromptsSlideWithBoundedMemory) {
  const std::string out = dir_ / "out";
  {
    Child first(train_args(corpus_, out, "--steps 2"), log("first"));
    ASSERT_TRUE(first.wait(120) && first.exited_with(0)) << first.describe();
  }
  std::string prompt = progutil::generated_text(120000, 7).substr(0, 120000);
  Child sample({"./sample", "--threads", "1", "--ckpt", out, "-n", "20", "--prompt", prompt}, log("sample"));
  ASSERT_TRUE(sample.wait(120)) << "a 120 KB prompt took more than 120 s";
  ASSERT_TRUE(sample.exited_with(0)) << sample.describe();
  EXPECT_EQ(sample.out().rfind(prompt, 0), 0u);
  EXPECT_LT(sample.max_rss_kb(), small_rss_kb()) << "peak RSS in KB";

  Checkpoint c = load_checkpoint(out + "/ckpt.safetensors");
  set_threads(1);
  Decoder decoder(*c.model);
  const std::vector<int> ids = c.tokenizer.encode(utf8_decode(prompt, "prompt"), "prompt");
  const long before = rss_kb(getpid());
  const size_t tokens = HARDENING_ASAN ? 30000 : 100000;
  for (size_t i = 0; i < tokens; i++) {
    const float* logits = decoder.push(ids[i % ids.size()]);
    if (i % 4096 == 0) {
      ASSERT_TRUE(std::isfinite(logits[0]));
    }
    ASSERT_LE(decoder.context().size(), (size_t)c.model->config.block_size);
  }
  if (!HARDENING_ASAN) {
    EXPECT_LT(rss_kb(getpid()) - before, 4 * 1024) << "KB of growth over " << tokens << " tokens";
  }
}

// The memory estimate is computed in size_t. --batch is not bounded, and the attention probabilities alone are
// B·T·n_head·T·n_layer floats, so a config that validate() accepts can make the sum wrap around 2^64 to a small
// number: the check then passes, and the activation arena (sized by the same count) is far too small for the
// first forward pass. The estimate is affine in B modulo 2^64 (every activation is proportional to B·T), so such a
// B can be solved for directly, whatever buffers the layout holds today. Nothing is allocated here.
TEST(HardeningResources, MemoryEstimateDoesNotWrapAround) {
  const uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
  const uint64_t want_below = std::min<uint64_t>(ram / 2, uint64_t(1) << 34);
  int tried = 0;
  for (int n_head : {256, 128, 512})
    for (int n_layer = 1024; n_layer >= 256; n_layer -= 7)
      for (int vocab = 60; vocab < 70; vocab++) {
        ModelConfig c;
        c.n_layer = n_layer, c.n_head = n_head, c.n_embd = n_head, c.block_size = 65536, c.vocab_size = vocab;
        const uint64_t P = estimate_training_bytes(c, 0), K = estimate_training_bytes(c, 1) - P;  // mod 2^64
        const int s = __builtin_ctzll(K);
        const uint64_t k = K >> s, modulus_mask = s == 0 ? ~uint64_t(0) : (~uint64_t(0) >> s);
        uint64_t inverse = k;  // Newton's iteration: k·inverse ≡ 1 (mod 2^64) after 6 rounds
        for (int i = 0; i < 6; i++) inverse *= 2 - k * inverse;
        // Targets t ≡ P (mod 2^s) below want_below; B = ((t − P) / 2^s) · k⁻¹ (mod 2^(64−s)).
        for (uint64_t t = P & ((uint64_t(1) << s) - 1); t < want_below; t += uint64_t(1) << s) {
          const uint64_t B = (((t - P) >> s) * inverse) & modulus_mask;
          tried++;
          if (B < 1 || B > 0x7fffffff) continue;
          // (Before the fix, estimate_training_bytes(c, B) wrapped around to exactly t.)
          const long double true_need = 4.0L * B * c.block_size * c.n_head * (long double)c.block_size * c.n_layer;
          ASSERT_GT(true_need, 1.8e19L);
          ASSERT_NO_THROW(validate(c));
          bool refused = false;
          try {
            check_fits_in_memory(c, (int)B);
          } catch (const std::runtime_error& e) {
            refused = true;
            EXPECT_CONTAINS(e.what(), "bytes");
          }
          EXPECT_TRUE(refused) << "check_fits_in_memory accepted --batch " << B << " --block 65536 --n-head " << n_head
                               << " --n-embd " << n_head << " --n-layer " << n_layer << " (vocabulary " << vocab
                               << "), which needs at least " << (double)true_need << " bytes: its size_t estimate "
                               << "wrapped around to " << t << " bytes";
          return;
        }
      }
  GTEST_SKIP() << "no wrapping configuration found in " << tried << " candidates";
}
