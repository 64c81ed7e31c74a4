// Nothing lost, nothing silently wrong: checksummed checkpoints, escaped bytes in messages, one run per output
// folder, metrics.csv that keeps every row, stale temporary files, --steps 0, and the fuzz seeds.
//   IntegrityChecksum   CRC-32C against its standard check value; a flipped data bit is refused, an untouched file
//                       and a file without the checksum load
//   IntegrityMessages   bytes from a file are escaped (\x9d) in every message, also through ./sample
//   IntegrityRunFolder  ./train: two processes into one --out, a killed run's lock, --overwrite, --resume appends,
//                       stale *.tmp.<pid> files, --steps 0, a folder as --data
//   IntegritySeeds      every committed fuzz seed for the spec parsers parses, and the training-settings seed is
//                       what the current code writes
// Program tests start ./train and ./sample from the working directory (the repository root under `make test`).
#include <algorithm>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/objective.h"
#include "data/utf8.h"
#include "io/checkpoint.h"
#include "io/crc32c.h"
#include "io/run_folder.h"
#include "io/safetensors.h"
#include "ops/mask.h"
#include "checkpoint_bytes.h"
#include "program_util.h"
#include "train/plan.h"
#include "train/trainer.h"

using ckptbytes::header_length;
using ckptbytes::header_of;
using ckptbytes::load_error;
// The tests here are about the data's checksum: the header's own is kept up to date.
static std::string with_header(const std::string& bytes, const nlohmann::ordered_json& header) {
  return ckptbytes::with_header_and_its_checksum(bytes, header);
}
using progutil::quote;
using progutil::read_file;
using progutil::RunResult;
using progutil::TempDir;
using progutil::write_file;
namespace fs = std::filesystem;

extern char** environ;

namespace {

using progutil::source_root;

// A small weights-only checkpoint written by save_checkpoint.
void write_small_checkpoint(const std::string& path) {
  Tokenizer tok = Tokenizer::from_text(U"abc\n");
  ModelConfig config;
  config.n_layer = 1, config.n_head = 1, config.n_embd = 4, config.block_size = 4, config.vocab_size = tok.size();
  GPT model(config, parse_layer_masks("causal", 1));
  model.init_weights(3);
  save_checkpoint(path, model, tok, nullptr);
}

// True if `message` is valid UTF-8 without control characters other than '\n'.
bool is_clean_text(const std::string& message) {
  try {
    for (char32_t c : utf8_decode(message, "message"))
      if ((c < 0x20 && c != '\n') || (c >= 0x7F && c < 0xA0)) return false;
  } catch (const std::runtime_error&) {
    return false;
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Checksums

TEST(IntegrityChecksum, Crc32cMatchesTheStandardCheckValues) {
  RecordProperty("method", crc32c_method());
  using Crc = uint32_t (*)(const void*, size_t, uint32_t);
  for (Crc crc : {Crc(crc32c), Crc(crc32c_portable)}) {
    SCOPED_TRACE(crc == Crc(crc32c) ? std::string("crc32c: ") + crc32c_method() : "crc32c_portable");
    EXPECT_EQ(crc("123456789", 9, 0), 0xE3069283u);  // the check value of the CRC catalogue (and RFC 3720)
    EXPECT_EQ(crc("", 0, 0), 0u);
    // RFC 3720 (iSCSI), appendix B.4: 32 bytes of zeros, of 0xFF, and ascending 0..31.
    std::string zeros(32, '\0'), ones(32, '\xff'), ascending(32, '\0');
    for (int i = 0; i < 32; i++) ascending[i] = char(i);
    EXPECT_EQ(crc(zeros.data(), 32, 0), 0x8A9136AAu);
    EXPECT_EQ(crc(ones.data(), 32, 0), 0x62A8AB43u);
    EXPECT_EQ(crc(ascending.data(), 32, 0), 0x46DD794Eu);
    // Running: split anywhere (including inside an 8-byte block), same result as in one go; any alignment.
    std::string text;
    for (int i = 0; i < 1000; i++) text += char(i * 7 + (i >> 3));
    const uint32_t whole = crc(text.data(), text.size(), 0);
    for (size_t cut : {0, 1, 5, 8, 13, 999, 1000})
      EXPECT_EQ(crc(text.data() + cut, text.size() - cut, crc(text.data(), cut, 0)), whole) << cut;
    EXPECT_EQ(crc32c_portable(text.data(), text.size()), crc32c(text.data(), text.size()));
  }
  EXPECT_EQ(crc32c_hex(0xE3069283u), "e3069283");
  EXPECT_EQ(crc32c_hex(0x0000abcdu), "0000abcd");
}

TEST(IntegrityChecksum, EveryCheckpointRecordsTheChecksumOfItsData) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  write_small_checkpoint(path);
  const std::string bytes = read_file(path);
  const auto meta = header_of(bytes).at("__metadata__");
  ASSERT_TRUE(meta.contains(kDataChecksumKey));
  const std::string data = bytes.substr(8 + header_length(bytes));
  EXPECT_EQ(meta.at(kDataChecksumKey).get<std::string>(), crc32c_hex(crc32c(data.data(), data.size())));
  EXPECT_NO_THROW(load_checkpoint(path));  // untouched: loads
}

TEST(IntegrityChecksum, OneFlippedBitInTheDataIsRefused) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  write_small_checkpoint(path);
  const std::string good = read_file(path);
  const size_t data_start = 8 + header_length(good);
  // A low mantissa bit: the value stays finite and plausible, so only the checksum can tell.
  for (size_t at : {data_start, data_start + 17, good.size() - 1}) {
    std::string bad = good;
    bad[at] = char(bad[at] ^ 0x01);
    write_file(path, bad);
    const std::string message = load_error(path);
    SCOPED_TRACE("flipped byte " + std::to_string(at));
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, "changed or damaged after it was written");
    EXPECT_CONTAINS(message, "CRC-32C");
  }
}

TEST(IntegrityChecksum, AFormat1FileWithoutTheChecksumLoads) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  write_small_checkpoint(path);
  const std::string good = read_file(path);
  nlohmann::ordered_json header = header_of(good);
  header["__metadata__"].erase(kDataChecksumKey);
  header["__metadata__"].erase(kHeaderChecksumKey);
  header["__metadata__"]["format_version"] = "1";
  std::string stripped = with_header(good, header);
  write_file(path, stripped);
  EXPECT_NO_THROW(load_checkpoint(path));  // written before checksums existed: nothing to verify
  // Nor is its data checked: a flipped low bit goes through (that is what the checksum is for).
  stripped[stripped.size() - 4] = char(stripped[stripped.size() - 4] ^ 0x01);
  write_file(path, stripped);
  EXPECT_NO_THROW(load_checkpoint(path));
}

TEST(IntegrityChecksum, AMalformedChecksumIsRefused) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  write_small_checkpoint(path);
  const std::string good = read_file(path);
  for (const std::string value : {"", "e306928", "e30692833", "zzzzzzzz", "0x306928"}) {
    nlohmann::ordered_json header = header_of(good);
    header["__metadata__"][kDataChecksumKey] = value;
    write_file(path, with_header(good, header));
    const std::string message = load_error(path);
    EXPECT_CONTAINS(message, kDataChecksumKey);
    EXPECT_CONTAINS(message, "eight lower-case hex digits");
  }
  // Upper-case hex digits are refused too: the writer writes lower case, so a case bit was flipped.
  nlohmann::ordered_json header = header_of(good);
  std::string upper = header["__metadata__"][kDataChecksumKey].get<std::string>();
  for (char& c : upper) c = char(std::toupper((unsigned char)c));
  if (upper == header["__metadata__"][kDataChecksumKey].get<std::string>()) upper[0] = 'A';
  header["__metadata__"][kDataChecksumKey] = upper;
  write_file(path, with_header(good, header));
  EXPECT_CONTAINS(load_error(path), "lower-case hex digits");
}

// ---------------------------------------------------------------------------------------------------------------
// Messages never carry raw bytes from a file

TEST(IntegrityMessages, EscapeKeepsTextAndEscapesTheRest) {
  EXPECT_EQ(escape_for_message("plain ASCII"), "plain ASCII");
  EXPECT_EQ(escape_for_message("猫 é 🙂"), "猫 é 🙂");
  EXPECT_EQ(escape_for_message("a\x9d" "b"), "a\\x9db");          // a lone continuation byte
  EXPECT_EQ(escape_for_message("\xe2\x82"), "\\xe2\\x82");         // a sequence cut short
  EXPECT_EQ(escape_for_message("\xc0\xaf"), "\\xc0\\xaf");         // overlong '/'
  EXPECT_EQ(escape_for_message("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(escape_for_message("\xff"), "\\xff");
  EXPECT_EQ(escape_for_message("\x1b[31mred"), "\\x1b[31mred");     // a terminal escape sequence
  EXPECT_EQ(escape_for_message("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(escape_for_message("a\nb", /*keep_newlines=*/true), "a\nb");
  EXPECT_EQ(escape_for_message(std::string("\0\x7f", 2)), "\\x00\\x7f");
  EXPECT_EQ(escape_for_message("\xc2\x9b"), "\\u009b");            // C1 control CSI, valid UTF-8
  EXPECT_EQ(escape_for_message(escape_for_message("x\x9dy")), "x\\x9dy");  // escaping twice changes nothing
}

// A corrupt header holding invalid UTF-8 and a terminal escape: the error names the file and shows the bytes
// escaped, through the library and through ./sample.
TEST(IntegrityMessages, InvalidUtf8InACorruptHeaderIsEscaped) {
  TempDir dir;
  struct Case { std::string header, shown; };
  const std::vector<Case> cases = {
      {"{\"w\x9d\": 1}", "\\x9d"},                                  // invalid UTF-8 in a key: nlohmann's message
      {"{\"__metadata__\": {\"format\": \"\\u001b[2J\"}}", "\\x1b"},  // an escape sequence spelled as JSON
      {"{\"__metadata__\": {\"format\": \"plaingpt\", \"format_version\": \"1\\u009b\"}}", "\\u009b"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shown);
    std::string header = c.header;
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string bytes(8, '\0');
    bytes[0] = char(header.size());
    bytes += header;
    const std::string path = dir / "bad.safetensors";
    write_file(path, bytes);
    const std::string message = load_error(path);
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, c.shown);
    EXPECT_TRUE(is_clean_text(message)) << message;

    ASSERT_TRUE(progutil::file_exists("./sample")) << "run the tests from the repository root after `make programs`";
    const RunResult r = progutil::run_command("./sample --ckpt " + quote(path) + " -n 1", dir.path());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, "sample: error: " + path);
    EXPECT_CONTAINS(r.err, c.shown);
    EXPECT_TRUE(is_clean_text(r.err)) << r.err;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The output folder

namespace {

class IntegrityRunFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(progutil::file_exists("./train") && progutil::file_exists("./sample"))
        << "run the tests from the repository root after `make programs`";
    corpus_ = dir_ / "corpus.txt";
    write_file(corpus_, progutil::generated_text(4000));
    out_ = dir_ / "out";
  }
  std::string train_command(const std::string& out, const std::string& extra) const {
    return "./train " + std::string(progutil::tiny_flags()) + " --data " + quote(corpus_) + " --out " + quote(out) +
           " " + extra;
  }
  RunResult train(const std::string& extra) { return progutil::run_command(train_command(out_, extra), dir_.path()); }
  static void expect_ok(const RunResult& r) { EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe(); }
  static void expect_refused(const RunResult& r, const std::vector<std::string>& words) {
    EXPECT_TRUE(r.exited && r.exit_code == 1) << r.describe();
    EXPECT_CONTAINS(r.err, "train: error: ");
    for (const std::string& w : words) EXPECT_CONTAINS(r.err, w);
  }

  TempDir dir_;
  std::string corpus_, out_;
};

// Starts ./train in the background (stdout and stderr to files in `dir`); returns its pid.
pid_t start_train(const std::string& command, const std::string& dir) {
  const std::string shell = "exec " + command + " </dev/null >" + dir + "/bg.out 2>" + dir + "/bg.err";
  const char* argv[] = {"/bin/sh", "-c", shell.c_str(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) return -1;
  return pid;
}

bool eventually(double seconds, const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

// A process id that no process has any more: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace

// Two real processes: the second run into the same folder is refused at once, naming the folder and the first
// run's process id; after the first is SIGKILLed (its lock file stays), the next run goes ahead.
TEST_F(IntegrityRunFolder, ASecondRunIntoTheSameFolderIsRefusedAndAKilledRunsLockDoesNotBlock) {
  const pid_t first = start_train(train_command(out_, "--steps 1000000 --eval-every 0 --ckpt-every 0"), dir_.path());
  ASSERT_GT(first, 0);
  const std::string lock = out_ + "/train.lock";
  const bool locked = eventually(60, [&] { return read_file(lock) == std::to_string(first) + "\n"; });
  if (!locked) {
    kill(first, SIGKILL), waitpid(first, nullptr, 0);
    FAIL() << "the first run never took the lock; stderr: " << read_file(dir_ / "bg.err");
  }
  const auto start = std::chrono::steady_clock::now();
  const RunResult second = train("--steps 5 --overwrite");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect_refused(second, {out_, "another ./train (process " + std::to_string(first) + ")", "another --out"});
  EXPECT_LT(seconds, 30) << "refused only after " << seconds << " s: it must not wait for the lock";
  // Resuming into the folder is refused the same way (once the first run has a checkpoint to resume from, it is
  // the lock that stops it; without one, the missing checkpoint does).
  const RunResult resumed = progutil::run_command("./train --resume " + quote(out_) + " --steps 3", dir_.path());
  EXPECT_EQ(resumed.exit_code, 1) << resumed.describe();

  ASSERT_EQ(kill(first, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(first, &status, 0), first);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the first run ended before it was killed: " << read_file(dir_ / "bg.err");
  ASSERT_TRUE(progutil::file_exists(lock)) << "the lock file stays behind; only the flock went with the process";
  expect_ok(train("--steps 3 --overwrite"));
}

// The flock itself, in one process: a second descriptor is refused while the first holds it, and released after.
TEST_F(IntegrityRunFolder, TheLockIsHeldUntilDestroyed) {
  fs::create_directories(out_);
  {
    RunFolderLock held(out_);
    try {
      RunFolderLock again(out_);
      ADD_FAILURE() << "a second lock on the same folder was granted";
    } catch (const std::runtime_error& e) {
      EXPECT_CONTAINS(e.what(), "process " + std::to_string(getpid()));
    }
  }
  EXPECT_NO_THROW(RunFolderLock again(out_));
}

TEST_F(IntegrityRunFolder, AFreshRunDoesNotReplaceAnEarlierRunUnlessAskedTo) {
  expect_ok(train("--steps 4"));
  const std::string ckpt = read_file(out_ + "/ckpt.safetensors"), metrics = read_file(out_ + "/metrics.csv");
  expect_refused(train("--steps 4 --seed 9"), {out_, "earlier run", "ckpt.safetensors", "metrics.csv", "--overwrite",
                                               "--resume " + out_});
  EXPECT_EQ(read_file(out_ + "/ckpt.safetensors"), ckpt) << "the earlier checkpoint changed";
  EXPECT_EQ(read_file(out_ + "/metrics.csv"), metrics) << "the earlier metrics changed";
  // Only metrics (a run killed before its first checkpoint) count as an earlier run too.
  fs::remove(out_ + "/ckpt.safetensors");
  expect_refused(train("--steps 4 --seed 9"), {"metrics.csv"});

  expect_ok(train("--steps 4 --seed 9 --overwrite"));
  EXPECT_NE(read_file(out_ + "/ckpt.safetensors"), ckpt);
  const auto rows = progutil::read_csv(out_ + "/metrics.csv");
  EXPECT_EQ(progutil::step_rows(out_ + "/metrics.csv"), (std::vector<int>{0, 1, 2, 3})) << "the new run's rows only";
  ASSERT_FALSE(rows.empty()) << "metrics.csv is empty";  // before indexing: an empty file must fail, not segfault
  ASSERT_FALSE(rows[0].empty());
  EXPECT_EQ(rows[0][0], "step");

  // Resuming one run into another run's folder is refused the same way.
  const std::string other = dir_ / "other";
  ASSERT_EQ(progutil::run_command(train_command(other, "--steps 4 --stop-at 2"), dir_.path()).exit_code, 0);
  const RunResult into = progutil::run_command("./train --resume " + quote(other) + " --out " + quote(out_),
                                               dir_.path());
  expect_refused(into, {out_, "earlier run"});
}

// --resume appends: the earlier rows stay byte for byte, the header appears once, and every line is whole.
TEST_F(IntegrityRunFolder, ResumeAppendsToMetrics) {
  expect_ok(train("--steps 8 --stop-at 4"));
  const std::string before = read_file(out_ + "/metrics.csv");
  expect_ok(progutil::run_command("./train --resume " + quote(out_), dir_.path()));
  const std::string after = read_file(out_ + "/metrics.csv");
  EXPECT_EQ(after.compare(0, before.size(), before), 0) << "the rows before the resume were rewritten";
  EXPECT_EQ(progutil::step_rows(out_ + "/metrics.csv"), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(progutil::occurrences(after, "step,"), 1u);

  // A row cut short (the machine lost power mid-write, with an older program) and rows past the checkpoint (the
  // interrupted run went on after its last save) are dropped on resume; the run recomputes those steps.
  expect_ok(progutil::run_command("./train --resume " + quote(out_) + " --steps 12 --stop-at 10", dir_.path()));
  std::string text = read_file(out_ + "/metrics.csv");
  write_file(out_ + "/metrics.csv", text + "10,,,,2.5,0.001,0.3,1.0\n11,,,,2.4,0.00");
  expect_ok(progutil::run_command("./train --resume " + quote(out_), dir_.path()));
  text = read_file(out_ + "/metrics.csv");
  EXPECT_EQ(progutil::step_rows(out_ + "/metrics.csv"), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const auto rows = progutil::read_csv(out_ + "/metrics.csv");
  for (size_t r = 1; r < rows.size(); r++) EXPECT_EQ(rows[r].size(), rows[0].size()) << "row " << r;
}

// A run SIGKILLed while training leaves only whole rows (each is one write of a whole line).
TEST_F(IntegrityRunFolder, AKilledRunLeavesOnlyWholeRows) {
  const pid_t pid = start_train(train_command(out_, "--steps 1000000 --eval-every 0 --ckpt-every 0"), dir_.path());
  ASSERT_GT(pid, 0);
  const std::string metrics = out_ + "/metrics.csv";
  EXPECT_TRUE(eventually(60, [&] { return progutil::step_rows(metrics).size() >= 20; }));
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  const std::string text = read_file(metrics);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const auto rows = progutil::read_csv(metrics);
  for (size_t r = 1; r < rows.size(); r++) EXPECT_EQ(rows[r].size(), rows[0].size()) << "row " << r;
}

TEST_F(IntegrityRunFolder, StaleTemporaryFilesOfDeadProcessesAreRemoved) {
  fs::create_directories(out_);
  const pid_t gone = dead_pid();
  const std::string stale1 = out_ + "/ckpt.safetensors.tmp." + std::to_string(gone);
  const std::string stale2 = out_ + "/metrics.csv.tmp." + std::to_string(gone);
  const std::string live = out_ + "/ckpt.safetensors.tmp." + std::to_string(getpid());  // this test is alive
  const std::string other = out_ + "/notes.tmp.txt";                                      // not a temporary
  for (const std::string& f : {stale1, stale2, live, other}) write_file(f, "partial");
  const RunResult r = train("--steps 2");
  expect_ok(r);
  EXPECT_FALSE(progutil::file_exists(stale1));
  EXPECT_FALSE(progutil::file_exists(stale2));
  EXPECT_TRUE(progutil::file_exists(live)) << "a live process's temporary file was removed";
  EXPECT_TRUE(progutil::file_exists(other));
  EXPECT_CONTAINS(r.out, "removed " + stale1);
}

TEST_F(IntegrityRunFolder, ZeroStepsSavesTheInitialisedModel) {
  expect_ok(train("--steps 0 --seed 11"));
  const Checkpoint c = load_checkpoint(out_ + "/ckpt.safetensors");
  ASSERT_TRUE(c.resumable);
  EXPECT_EQ(c.resume.step, 0);
  // The weights are exactly the initialisation for that seed.
  GPT fresh(c.model->config, c.model->masks());
  fresh.init_weights(11);
  EXPECT_TRUE(std::equal(fresh.params_memory().begin(), fresh.params_memory().end(),
                         c.model->params_memory().begin(), c.model->params_memory().end()));
  EXPECT_EQ(progutil::csv_column(progutil::read_csv(out_ + "/metrics.csv"), "val_loss").size(), 1u);
  // It samples, and it resumes.
  const RunResult s = progutil::run_command("./sample --ckpt " + quote(out_) + " -n 5 --prompt the", dir_.path());
  EXPECT_EQ(s.exit_code, 0) << s.describe();
  expect_ok(progutil::run_command("./train --resume " + quote(out_) + " --steps 2", dir_.path()));
  EXPECT_EQ(load_checkpoint(out_ + "/ckpt.safetensors").resume.step, 2);
}

TEST_F(IntegrityRunFolder, AFolderAsDataGetsItsOwnMessage) {
  const RunResult r = progutil::run_command(
      "./train " + std::string(progutil::tiny_flags()) + " --data " + quote(dir_.path()) + " --out " + quote(out_),
      dir_.path());
  expect_refused(r, {dir_.path(), "is a folder, not a text file"});
  EXPECT_EQ(r.err.find("empty"), std::string::npos) << r.err;
}

// ---------------------------------------------------------------------------------------------------------------
// tools/deps.sh cannot be fooled by a cblas.h that is not OpenBLAS. Run against fake tools in a private PATH, so
// nothing on the machine is installed or removed: a pkg-config without OpenBLAS's module, a compiler that cannot
// link -lopenblas (the reference BLAS's cblas.h still compiles), and an apt-get that only records what it was asked.

namespace {

struct FakeTools {
  TempDir dir;
  std::string bin = dir / "bin", apt_log = dir / "apt.log";
  explicit FakeTools(const std::string& pkg_config_body) {
    fs::create_directories(bin);
    auto script = [&](const std::string& name, const std::string& body) {
      write_file(bin + "/" + name, "#!/bin/sh\n" + body + "\n");
      fs::permissions(bin + "/" + name, fs::perms::owner_all);
    };
    script("pkg-config", pkg_config_body);
    script("apt-get", "echo \"$*\" >> " + apt_log + "; exit 0");
    script("id", "echo 0");  // deps.sh installs only as root (or with sudo); pretend, apt-get is fake anyway
    // The compiler: the real g++, except that no OpenBLAS library can be linked.
    script("cxx", "for a in \"$@\"; do [ \"$a\" = -lopenblas ] && exit 1; done; exec g++ \"$@\"");
  }
  RunResult run(const std::string& blas) const {
    const std::string root = source_root();
    return progutil::run_command("cd " + quote(root) + " && PATH=" + quote(bin) + ":\"$PATH\" CXX=" +
                                     quote(bin + "/cxx") + " BLAS=" + blas + " sh tools/deps.sh",
                                 dir.path());
  }
};

}  // namespace

TEST(IntegrityDeps, WithoutOpenBlasItInstallsItEvenIfACblasHeaderExists) {
  FakeTools tools("exit 1");  // no pkg-config module at all
  const RunResult r = tools.run("openblas");
  const std::string apt = read_file(tools.apt_log);
  EXPECT_CONTAINS(apt, "install -y");
  EXPECT_CONTAINS(apt, "libopenblas-dev");
  EXPECT_CONTAINS(r.err, "installing:");
  // The fake apt-get installs nothing, so the check after the install must still fail, and say so.
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "OpenBLAS was installed but a program still cannot link it");
  EXPECT_EQ(r.out.find("BLAS_NAME"), std::string::npos) << "no build configuration without a working OpenBLAS";
}

TEST(IntegrityDeps, AnotherBlasOnPurposeIsNamedAndNotTakenForOpenBlas) {
  FakeTools tools(
      "case \"$*\" in\n"
      "  '--exists blas') exit 0 ;;\n"
      "  '--modversion blas') echo 3.11.0 ;;\n"
      "  '--libs blas') echo -lblas ;;\n"
      "  '--cflags blas') echo ;;\n"
      "  *cpp-httplib*) PATH=${PATH#*:} exec pkg-config \"$@\" ;;\n"  // the real one (the explorer's server library)
      "  *) exit 1 ;;\n"
      "esac");
  const RunResult r = tools.run("blas");
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_CONTAINS(r.out, "BLAS_NAME := blas 3.11.0 (not OpenBLAS, as asked with BLAS=blas)");
  EXPECT_CONTAINS(r.out, "BLAS_LIBS := -lblas");
  EXPECT_EQ(r.out.find("PLAINGPT_OPENBLAS"), std::string::npos) << "openblas_set_num_threads would not link";
  EXPECT_CONTAINS(r.err, "not OpenBLAS, as asked");
  EXPECT_EQ(read_file(tools.apt_log).find("libopenblas"), std::string::npos) << "OpenBLAS installed though not asked";
}

TEST(IntegrityDeps, ARealOpenBlasIsFound) {
  // The real tools: this machine built the tests, so OpenBLAS is there.
  TempDir dir;
  const RunResult r = progutil::run_command("cd " + quote(source_root()) + " && sh tools/deps.sh", dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_CONTAINS(r.out, "BLAS_NAME := OpenBLAS");
  EXPECT_CONTAINS(r.out, "-DPLAINGPT_OPENBLAS");
}

// ---------------------------------------------------------------------------------------------------------------
// Fuzz seeds: the spec parsers' seeds must reach past the first line of the parser they are meant for.

TEST(IntegritySeeds, EverySpecSeedParses) {
  const std::string dir = source_root() + "/fuzz/corpus/specs";
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " is missing; set PLAINGPT_ROOT to the source tree";
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string(), bytes = read_file(entry.path().string());
    SCOPED_TRACE(name);
    ASSERT_FALSE(bytes.empty());
    const std::string text = bytes.substr(1);
    const int which = (unsigned char)bytes[0] % 6;
    // Seeds named bad_* are meant to be refused (they start the fuzzer at an error path).
    const bool should_parse = name.rfind("bad_", 0) != 0;
    bool parsed = true;
    try {
      switch (which) {
        case 0: AttentionMask::parse(text); break;
        case 1: parse_layer_masks(text, 1 + ((unsigned char)bytes[0] / 6) % 8); break;
        case 2: parse_objective(text); break;
        case 3: plan_training(preset(text)); break;
        case 4: {
          const size_t nul = text.find('\0');
          std::vector<std::string> specials;
          for (size_t at = nul; at != std::string::npos;) {
            const size_t next = text.find('\0', at + 1);
            specials.push_back(text.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1));
            at = next;
          }
          Tokenizer::from_vocab(text.substr(0, nul), specials, name);
          break;
        }
        case 5: plan_training(train_config_from_json(text, name)); break;
      }
    } catch (const std::exception& e) {
      parsed = false;
      if (should_parse) ADD_FAILURE() << name << " is refused: " << e.what();
    }
    if (!should_parse) {
      EXPECT_FALSE(parsed) << name << " is named bad_ but parses";
    }
    checked++;
  }
  EXPECT_GE(checked, 10);
}

// The training-settings seed is the current to_json of the tiny preset (fuzz/make_seeds.cpp writes it), so it
// holds every field the reader asks for; after a field is added, `make fuzz-seeds` rewrites it.
TEST(IntegritySeeds, TheTrainingSettingsSeedIsWhatTheCurrentCodeWrites) {
  const std::string bytes = read_file(source_root() + "/fuzz/corpus/specs/train_config_tiny");
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(bytes, std::string(1, '\x05') + to_json(preset("tiny")))
      << "fuzz/corpus/specs/train_config_tiny is out of date: run `make fuzz-seeds` and commit fuzz/corpus";
}
