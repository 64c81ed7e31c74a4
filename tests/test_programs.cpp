// End-to-end tests of ./train and ./sample, run as child processes from the repository root (where the Makefile
// runs the tests). Each test works in its own temporary directory with a small generated corpus and a tiny model.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/mixers/registry.h"
#include "data/dataset.h"
#include "train/evaluate.h"
#include "train/train_config.h"
#include "program_util.h"
#include "base/threads.h"

using progutil::quote;
using progutil::read_file;
using progutil::RunResult;
using progutil::step_rows;
using progutil::TempDir;
using progutil::write_file;

extern char** environ;

namespace {

class Programs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(progutil::file_exists("./train") && progutil::file_exists("./sample"))
        << "run the tests from the repository root after `make programs`";
    corpus_ = dir_ / "corpus.txt";
    write_file(corpus_, progutil::generated_text(4000));
  }

  RunResult run(const std::string& command) { return progutil::run_command(command, dir_.path()); }

  // ./train with the tiny model on the test corpus, plus `extra` flags.
  RunResult train(const std::string& out, const std::string& extra) {
    return run("./train " + std::string(progutil::tiny_flags()) + " --data " + quote(corpus_) + " --out " +
               quote(out) + " " + extra);
  }

  // A successful 6-step run into `out`; returns the checkpoint's path.
  std::string good_run(const std::string& out) {
    RunResult r = train(out, "--steps 6");
    EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    return out + "/ckpt.safetensors";
  }

  // The program failed cleanly: exit code 1 (not a crash, not a signal), a "<program>: error:" line on stderr
  // that holds every one of `words`.
  static void expect_clean_failure(const RunResult& r, const std::string& program,
                                   const std::vector<std::string>& words) {
    EXPECT_TRUE(r.exited) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, program + ": error: ");
    for (const std::string& w : words) EXPECT_CONTAINS(r.err, w);
    if (std::getenv("PLAINGPT_SHOW_MESSAGES")) std::printf("  stderr: %s", r.err.c_str());
  }

  TempDir dir_;
  std::string corpus_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// ./train succeeds

TEST_F(Programs, TrainWritesCheckpointAndMetrics) {
  const std::string out = dir_ / "out";
  RunResult r = train(out, "--steps 10");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_TRUE(r.err.empty()) << r.err;
  Checkpoint c = load_checkpoint(out + "/ckpt.safetensors");
  EXPECT_TRUE(c.resumable);
  EXPECT_EQ(c.resume.step, 10);
  EXPECT_EQ(c.model->config.n_embd, 16);
  EXPECT_EQ(c.model->config.block_size, 16);
  // The vocabulary is the corpus's set of characters.
  const std::string text = read_file(corpus_);
  std::vector<bool> seen(128, false);
  int distinct = 0;
  for (unsigned char ch : text) distinct += !seen[ch], seen[ch] = true;
  EXPECT_EQ(c.tokenizer.size(), distinct);
  std::vector<int> expected_steps;
  for (int s = 0; s < 10; s++) expected_steps.push_back(s);
  EXPECT_EQ(step_rows(out + "/metrics.csv"), expected_steps);
  const auto rows = progutil::read_csv(out + "/metrics.csv");
  ASSERT_EQ(rows.size(), 12u);
  EXPECT_EQ(rows.back()[0], "10");  // the final evaluation row
}

// --print-settings: the preset (here the documented frontier recipe) with the flags applied, as a checkpoint stores
// it, and nothing trained or written. With --resume: the checkpoint's own settings with the Knob flags applied.
TEST_F(Programs, PrintSettingsShowsThePresetWithTheFlagsAndTrainsNothing) {
  const std::string out = dir_ / "never";
  RunResult r = run("./train --preset frontier --lr 0.002 --data " + quote(corpus_) + " --out " + quote(out) +
                    " --print-settings");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  TrainConfig c = train_config_from_json(r.out, "./train --print-settings");
  EXPECT_EQ(c.model.block_size, 128);
  EXPECT_EQ(c.batch, 16);
  EXPECT_EQ(c.steps, 6000);
  EXPECT_EQ(c.optimizer, "muon");
  EXPECT_FLOAT_EQ(c.adamw.lr, 0.002f);     // the flag
  EXPECT_FLOAT_EQ(c.adamw.min_lr, 4e-4f);  // the preset
  EXPECT_EQ(c.eval_iters, 10);
  EXPECT_FALSE(std::filesystem::exists(out));

  const std::string run_dir = dir_ / "run";
  good_run(run_dir);
  RunResult resumed = run("./train --resume " + quote(run_dir) + " --steps 9 --print-settings");
  ASSERT_TRUE(resumed.exited && resumed.exit_code == 0) << resumed.describe();
  TrainConfig rc = train_config_from_json(resumed.out, "./train --resume --print-settings");
  EXPECT_EQ(rc.model.n_embd, 16);  // progutil::tiny_flags(), not the preset
  EXPECT_EQ(rc.steps, 9);
  EXPECT_EQ(load_checkpoint(run_dir + "/ckpt.safetensors").resume.step, 6);  // not trained on

  expect_clean_failure(run("./train --preset frontier --warmup -2 --print-settings"), "train", {"--warmup"});
}

// Idle OpenMP threads wait passively unless the user chose otherwise (threads.h: the program restarts itself once
// with OMP_WAIT_POLICY=passive); an explicit choice is kept. The training header says which policy is in force.
TEST_F(Programs, TrainWaitsPassivelyUnlessTheUserChoseAPolicy) {
  RunResult unset = run("env -u OMP_WAIT_POLICY ./train " + std::string(progutil::tiny_flags()) + " --data " +
                        quote(corpus_) + " --out " + quote(dir_ / "a") + " --steps 1");
  ASSERT_TRUE(unset.exited && unset.exit_code == 0) << unset.describe();
  EXPECT_CONTAINS(unset.out, "(idle threads wait: passive)");
  RunResult chosen = run("OMP_WAIT_POLICY=active ./train " + std::string(progutil::tiny_flags()) + " --data " +
                         quote(corpus_) + " --out " + quote(dir_ / "b") + " --steps 1");
  ASSERT_TRUE(chosen.exited && chosen.exit_code == 0) << chosen.describe();
  EXPECT_CONTAINS(chosen.out, "(idle threads wait: active)");
}

TEST_F(Programs, StopAtThenResumeContinuesTheRun) {
  const std::string out = dir_ / "out", straight = dir_ / "straight";
  RunResult first = train(out, "--steps 12 --stop-at 5");
  ASSERT_TRUE(first.exited && first.exit_code == 0) << first.describe();
  EXPECT_EQ(load_checkpoint(out + "/ckpt.safetensors").resume.step, 5);
  EXPECT_EQ(step_rows(out + "/metrics.csv"), (std::vector<int>{0, 1, 2, 3, 4}));

  RunResult second = run("./train --resume " + quote(out));
  ASSERT_TRUE(second.exited && second.exit_code == 0) << second.describe();
  std::vector<int> all;
  for (int s = 0; s < 12; s++) all.push_back(s);
  EXPECT_EQ(step_rows(out + "/metrics.csv"), all);
  EXPECT_EQ(load_checkpoint(out + "/ckpt.safetensors").resume.step, 12);

  // The same losses as one uninterrupted run.
  RunResult whole = train(straight, "--steps 12");
  ASSERT_TRUE(whole.exited && whole.exit_code == 0) << whole.describe();
  auto losses = [](const std::string& dir) {
    std::vector<std::string> v;
    for (const auto& [step, cell] : progutil::csv_column(progutil::read_csv(dir + "/metrics.csv"), "batch_loss"))
      if (!cell.empty()) v.push_back(cell);
    return v;
  };
  EXPECT_EQ(losses(out), losses(straight));
  Checkpoint a = load_checkpoint(out + "/ckpt.safetensors"), b = load_checkpoint(straight + "/ckpt.safetensors");
  EXPECT_EQ(0, std::memcmp(a.model->params_memory().data(), b.model->params_memory().data(),
                           a.model->params_memory().size() * sizeof(float)));
}

// ---------------------------------------------------------------------------------------------------------------
// ./train fails cleanly, and leaves an existing good checkpoint alone

TEST_F(Programs, TrainRejectsBadInputAndKeepsTheExistingCheckpoint) {
  const std::string out = dir_ / "out";
  const std::string ckpt = good_run(out);
  const std::string good_bytes = read_file(ckpt), good_metrics = read_file(out + "/metrics.csv");
  ASSERT_FALSE(good_bytes.empty());

  const std::string empty = dir_ / "empty.txt", shortfile = dir_ / "short.txt", bad_utf8 = dir_ / "bad.txt";
  write_file(empty, "");
  write_file(shortfile, "abcdefghij");
  std::string text = progutil::generated_text(3000);
  text.replace(1234, 2, "\xC3\x28");  // a lead byte followed by a non-continuation byte at offset 1234
  write_file(bad_utf8, text);
  const std::string missing = dir_ / "no_such_corpus.txt";

  struct Case {
    std::string flags;
    std::vector<std::string> words;
  };
  const std::string base = std::string(progutil::tiny_flags()) + " --steps 6 --out " + quote(out) + " ";
  const std::vector<Case> cases = {
      {base + "--data " + quote(missing), {missing, "cannot open"}},
      {base + "--data " + quote(empty), {empty, "empty"}},
      {base + "--data " + quote(shortfile), {shortfile, "block", "17"}},
      {base + "--data " + quote(bad_utf8), {bad_utf8, "UTF-8", "byte offset 1234"}},
      {base + "--data " + quote(corpus_) + " --n-embd 30 --n-head 4", {"n_embd", "30", "n_head", "divisible"}},
      {base + "--data " + quote(corpus_) + " --n-layer 0", {"n_layer (--n-layer)", "must be in [1, 1024]"}},
      {base + "--data " + quote(corpus_) + " --batch -1", {"--batch", "positive"}},
      {base + "--data " + quote(corpus_) + " --lr 0", {"--lr"}},
      {base + "--data " + quote(corpus_) + " --mask sideways", {"sideways"}},
      {base + "--data " + quote(corpus_) + " --optimizer sgd", {"--optimizer", "'sgd'", "adamw or muon"}},
      {base + "--data " + quote(corpus_) + " --optimizer muon --muon-lr 0", {"--muon-lr", "positive"}},
      {base + "--data " + quote(corpus_) + " --bogus-flag 3", {"bogus-flag"}},
      {base + "--data " + quote(corpus_) + " stray-argument", {"stray-argument"}},
      {base + "--data " + quote(corpus_) + " --batch many", {"many"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    expect_clean_failure(run("./train " + c.flags), "train", c.words);
    EXPECT_TRUE(read_file(ckpt) == good_bytes) << "the good checkpoint changed";
    EXPECT_EQ(read_file(out + "/metrics.csv"), good_metrics);
  }
}

TEST_F(Programs, TrainRejectsAnOutputUnderARegularFile) {
  const std::string file = dir_ / "a_file";
  write_file(file, "not a directory");
  const std::string out = file + "/out";
  expect_clean_failure(train(out, "--steps 3"), "train", {"--out", out});
  EXPECT_EQ(read_file(file), "not a directory");
  expect_clean_failure(train(file, "--steps 3"), "train", {"--out", file, "not a directory"});
  EXPECT_EQ(read_file(file), "not a directory");
}

TEST_F(Programs, TrainRefusesBadResumes) {
  const std::string out = dir_ / "out";
  const std::string ckpt = good_run(out);
  const std::string good_bytes = read_file(ckpt);

  // A weights-only checkpoint (what one would share for sampling) cannot be resumed.
  const std::string weights = dir_ / "weights.safetensors";
  {
    Checkpoint c = load_checkpoint(ckpt);
    save_checkpoint(weights, *c.model, c.tokenizer, nullptr);
  }
  const std::string weights_bytes = read_file(weights);
  expect_clean_failure(run("./train --resume " + quote(weights)), "train", {weights, "weights only"});
  EXPECT_TRUE(read_file(weights) == weights_bytes);

  // A corrupt (truncated) checkpoint.
  const std::string corrupt = dir_ / "corrupt.safetensors";
  write_file(corrupt, good_bytes.substr(0, good_bytes.size() / 2));
  expect_clean_failure(run("./train --resume " + quote(corrupt)), "train", {corrupt});
  const std::string garbage = dir_ / "garbage.safetensors";
  write_file(garbage, "this is not a checkpoint at all, just text that is long enough");
  expect_clean_failure(run("./train --resume " + quote(garbage)), "train", {garbage});

  // A missing one.
  const std::string missing = dir_ / "missing_dir";
  expect_clean_failure(run("./train --resume " + quote(missing)), "train", {missing});

  // Settings that would change the computation are refused; the good checkpoint is untouched.
  expect_clean_failure(run("./train --resume " + quote(out) + " --lr 0.5"), "train", {"--lr", "resum"});
  expect_clean_failure(run("./train --resume " + quote(out) + " --n-embd 32"), "train", {"--n-embd", "resum"});
  expect_clean_failure(run("./train --resume " + quote(out) + " --steps 2"), "train", {"--steps", "2", "6"});
  EXPECT_TRUE(read_file(ckpt) == good_bytes);
}

// ---------------------------------------------------------------------------------------------------------------
// ./sample

TEST_F(Programs, SampleIsReproducibleAndSeedDependent) {
  const std::string ckpt = good_run(dir_ / "out");
  auto sample = [&](int seed) {
    RunResult r = run("./sample --threads 1 --ckpt " + quote(ckpt) + " --prompt 'The cat' -n 200 --temperature 1 " +
                      "--top-k 0 --top-p 1 --seed " + std::to_string(seed));
    EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    return r.out;
  };
  const std::string a = sample(7), b = sample(7), c = sample(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.rfind("The cat", 0), 0u) << "the output starts with the prompt";
  EXPECT_GE(a.size(), 7u + 200u) << "200 generated characters (ASCII vocabulary) plus the prompt";
  // The generated text only uses the corpus's characters.
  const std::string text = read_file(corpus_);
  for (char ch : a.substr(0, a.size() - 1)) EXPECT_NE(text.find(ch), std::string::npos) << "character " << (int)ch;
  // Also through the output directory instead of the file, and with greedy decoding independent of the seed.
  RunResult g1 = run("./sample --threads 1 --ckpt " + quote(dir_ / "out") + " -n 50 --temperature 0 --seed 1");
  RunResult g2 = run("./sample --threads 1 --ckpt " + quote(dir_ / "out") + " -n 50 --temperature 0 --seed 2");
  ASSERT_TRUE(g1.exited && g1.exit_code == 0) << g1.describe();
  EXPECT_EQ(g1.out, g2.out);
}

TEST_F(Programs, SampleRejectsCharactersOutsideTheVocabulary) {
  const std::string ckpt = good_run(dir_ / "out");
  ASSERT_EQ(read_file(corpus_).find('Z'), std::string::npos);
  expect_clean_failure(run("./sample --ckpt " + quote(ckpt) + " --prompt 'The Zoo' -n 5"), "sample",
                       {"--prompt", "'Z'", "U+005A", "position 4"});
  expect_clean_failure(run("./sample --ckpt " + quote(ckpt) + " --prompt " + quote("猫") + " -n 5"), "sample",
                       {"--prompt", "猫", "U+732B"});
}

TEST_F(Programs, SampleScorePrintsNatsAndBits) {
  const std::string ckpt = good_run(dir_ / "out");
  const std::string text_file = dir_ / "held_out.txt";
  const std::string text = progutil::generated_text(700, 99);  // ASCII: characters = bytes
  write_file(text_file, text);
  RunResult r = run("./sample --threads 1 --ckpt " + quote(ckpt) + " --score " + quote(text_file));
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex(R"(([0-9.]+) nats/char, ([0-9.]+) bits/char over ([0-9]+) predicted)")))
      << r.out;
  const double nats = std::stod(m[1]), bits = std::stod(m[2]);
  const long predicted = std::stol(m[3]);
  EXPECT_EQ(predicted, (long)text.size() - 1);
  EXPECT_NEAR(bits, nats / std::log(2.0), 2e-4);  // both printed with 4 decimals
  // A barely trained model is close to uniform over the vocabulary: within 15% of ln V nats.
  Checkpoint c = load_checkpoint(ckpt);
  const double uniform = std::log((double)c.tokenizer.size());
  EXPECT_NEAR(nats, uniform, 0.15 * uniform);
  // The program reports what the library computes on the same text.
  set_threads(1);
  const TextScore s = score_text(*c.model, c.tokenizer.encode(read_text_file(text_file), text_file));
  EXPECT_NEAR(nats, s.nats_per_token, 1e-4);

  // Scoring a text with a character outside the vocabulary names the file and the character.
  const std::string foreign = dir_ / "foreign.txt";
  write_file(foreign, "The cat sat on the Zebra.");
  expect_clean_failure(run("./sample --ckpt " + quote(ckpt) + " --score " + quote(foreign)), "sample",
                       {foreign, "'Z'"});
}

// Every kind under ./train (train, resume, sample and score) is the conformance suite's (test_every_kind.cpp).
// Here what the program says: a mask a kind cannot take fails cleanly, naming the mask and the kind, and the flag's
// old spelling, --layer-attention, still works and says once what it became.
TEST_F(Programs, EachKindRefusesAMaskItCannotTakeCleanly) {
  for (const MixerKind* kind : mixer_kinds()) {
    SCOPED_TRACE(kind->name);
    const RunResult r =
        train(dir_ / ("masked-" + std::string(kind->name)),
              std::string("--mixer ") + kind->name + " --objective mlm --mask bidirectional --steps 2");
    if (r.exited && r.exit_code == 0) continue;  // the kind takes the mask
    expect_clean_failure(r, "train", {"bidirectional", kind->name});
  }
  const RunResult r = train(dir_ / "renamed", "--n-layer 2 --layer-attention softmax,softmax --steps 2");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_NE(r.err.find("note: --layer-attention is now --layer-mixer"), std::string::npos) << r.err;
}

TEST_F(Programs, SampleRejectsBadOptionsAndMissingCheckpoints) {
  const std::string ckpt = good_run(dir_ / "out");
  expect_clean_failure(run("./sample --ckpt " + quote(ckpt) + " --temperature -1"), "sample", {"--temperature"});
  expect_clean_failure(run("./sample --ckpt " + quote(ckpt) + " --top-p 0"), "sample", {"--top-p"});
  expect_clean_failure(run("./sample --ckpt " + quote(ckpt) + " --top-p 1.5"), "sample", {"--top-p"});
  expect_clean_failure(run("./sample --ckpt " + quote(ckpt) + " --top-k -2"), "sample", {"--top-k"});
  expect_clean_failure(run("./sample --ckpt " + quote(ckpt) + " -n -1"), "sample", {"-n"});
  const std::string missing = dir_ / "nowhere/ckpt.safetensors";
  expect_clean_failure(run("./sample --ckpt " + quote(missing)), "sample", {missing});
  const std::string corrupt = dir_ / "corrupt.safetensors";
  write_file(corrupt, read_file(ckpt).substr(0, 100));
  expect_clean_failure(run("./sample --ckpt " + quote(corrupt)), "sample", {corrupt, "truncated"});
}

// ---------------------------------------------------------------------------------------------------------------
// Ctrl-C

TEST_F(Programs, SigintSavesACheckpointAndExitsCleanly) {
  const std::string out = dir_ / "out";
  const std::string metrics = out + "/metrics.csv";
  std::vector<std::string> args = {"./train",   "--n-layer", "1",         "--n-head",     "2",       "--n-embd",
                                   "16",        "--block",   "16",        "--batch",      "4",       "--eval-iters",
                                   "1",         "--threads", "1",         "--steps",      "1000000", "--eval-every",
                                   "0",         "--data",    corpus_,     "--out",        out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string out_log = dir_ / "stdout.txt", err_log = dir_ / "stderr.txt";
  posix_spawn_file_actions_addopen(&actions, 1, out_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  ASSERT_EQ(0, posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ));
  posix_spawn_file_actions_destroy(&actions);

  // Wait until training is under way (at least 2 step rows), with a bounded timeout.
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::seconds(30);
  bool running = false;
  int status = 0;
  while (clock::now() < deadline) {
    if (progutil::file_exists(metrics) && step_rows(metrics).size() >= 2) {
      running = true;
      break;
    }
    if (waitpid(pid, &status, WNOHANG) == pid) break;  // exited early: reported below
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!running) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "training did not start within 30 s; stderr: " << read_file(err_log);
  }
  ASSERT_EQ(0, kill(pid, SIGINT));

  const auto exit_deadline = clock::now() + std::chrono::seconds(30);
  bool exited = false;
  while (clock::now() < exit_deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "./train did not stop within 30 s of SIGINT";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << read_file(err_log);
  EXPECT_CONTAINS(read_file(out_log), "interrupted");

  Checkpoint c = load_checkpoint(out + "/ckpt.safetensors");
  ASSERT_TRUE(c.resumable);
  const std::vector<int> rows = step_rows(metrics);
  EXPECT_GE(rows.size(), 2u);
  EXPECT_EQ(c.metadata.at("step"), std::to_string(rows.size()));
  EXPECT_EQ(c.resume.step, (int)rows.size());
  EXPECT_EQ(rows.back(), (int)rows.size() - 1);
  // No temporary file left behind.
  for (const auto& e : std::filesystem::directory_iterator(out))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}
