// Hardening III (issue 31): no file touched but the run's own, readers that read only regular files of a sane size,
// a divergence guard that keeps the best weights, headers parsed in linear time, every absurd count refused with an
// estimate, NaN refused, paths escaped.
//   Hardening3Files      planted links, hard links, FIFOs and snapshots in --out; the output files checked up front
//   Hardening3Readers    every reader through the regular-file reader with a size check; the header length first
//   Hardening3Escapes    paths with terminal control characters on the lines that printed them raw
//   Hardening3Guard      the divergence guard's ceiling and "much worse" against their definitions
//   Hardening3Header     linear-time header parsing: 100,000 entries, a 1024-layer checkpoint
//   Hardening3Counts     absurd counts refused with an estimate; batch-split in the memory estimate
//   Hardening3NaN        ./inspect heads and prune on a model whose predictions overflow
// The guard's program tests, MetricsFile's own FIFO check and the parse-time ratio were added when breaking each
// fix on purpose left the first tests green (docs/testing.md).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "base/read_file.h"
#include "checkpoint_bytes.h"
#include "io/checkpoint.h"
#include "io/json_emptying.h"
#include "io/safetensors.h"
#include "lab/head_scores.h"
#include "mixer_kinds.h"
#include "lab/pronouns.h"
#include "lab/pruning.h"
#include "model/model.h"
#include "model/params.h"
#include "program_util.h"
#include "train/divergence_guard.h"
#include "train/metrics_file.h"

// A sanitizer with shadow memory (ASan, make test-asan; TSan, make test-tsan): it reserves terabytes of address
// space, so an address-space limit stops it, and it runs slower.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define H3_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define H3_SANITIZED 1
#endif
#endif
#ifndef H3_SANITIZED
#define H3_SANITIZED 0
#endif

using progutil::quote;
using progutil::read_file;
using progutil::RunResult;
using progutil::TempDir;
using progutil::write_file;
namespace fs = std::filesystem;

namespace {

using progutil::run_in;
using progutil::train_command;
using progutil::write_corpus;

std::string small_run(const TempDir& dir) {
  write_corpus(dir);
  const RunResult r = run_in(dir, train_command(dir, dir / "run", "--steps 2 --eval-every 0"));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return dir / "run";
}

// A sparse file of `size` bytes starting with `head`: it takes no disk space.
void sparse_file(const std::string& path, const std::string& head, uint64_t size) {
  write_file(path, head);
  ASSERT_EQ(::truncate(path.c_str(), off_t(size)), 0) << path;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// --out: only the run's own files

TEST(Hardening3Files, APlantedLinkOrFifoAtTheWriteProbesNameIsNeverOpened) {
  // The probe's name was OUT/.write-test-<pid>, and a process's pid is known before it starts: `exec` keeps the
  // shell's. A link planted there was opened with fopen("w"), truncating its target; a FIFO hung the run.
  TempDir dir;
  write_corpus(dir);
  fs::create_directory(dir / "out");
  write_file(dir / "victim.txt", "keep me");
  const std::string plant_link = "ln -s " + quote(dir / "victim.txt") + " " + quote(dir / "out") + "/.write-test-$$";
  RunResult r = run_in(dir, "OMP_WAIT_POLICY=passive sh -c " + quote(plant_link + "; exec " +
                                train_command(dir, dir / "out", "--steps 1")));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_file(dir / "victim.txt"), "keep me") << "the probe truncated the link's target";
  fs::create_directory(dir / "out2");
  const std::string plant_fifo = "mkfifo " + quote(dir / "out2") + "/.write-test-$$";
  r = run_in(dir, "OMP_WAIT_POLICY=passive timeout 60 sh -c " +
                      quote(plant_fifo + "; exec " + train_command(dir, dir / "out2", "--steps 1")));
  EXPECT_EQ(r.exit_code, 0) << r.describe();  // 124: hung on the FIFO
}

TEST(Hardening3Files, AHardLinkPlantedAsTheLockNeverHasItsTargetWritten) {
  TempDir dir;
  write_corpus(dir);
  fs::create_directory(dir / "out");
  write_file(dir / "victim.txt", "keep me");
  fs::create_hard_link(dir / "victim.txt", dir / "out/train.lock");
  // Locked (an flock changes nothing in the file) but never written: a `cp -al` snapshot's lock has two names too.
  const RunResult r = run_in(dir, train_command(dir, dir / "out", "--steps 1"));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_file(dir / "victim.txt"), "keep me") << "the lock overwrote the hard link's target";
}

TEST(Hardening3Files, ALinkAtTheCheckpointOrTheMetricsIsRefusedBeforeTraining) {
  TempDir dir;
  const std::string run = small_run(dir);
  write_file(dir / "victim", "keep me");
  for (const std::string name : {"ckpt.safetensors", "metrics.csv"}) {
    SCOPED_TRACE(name);
    TempDir out;
    fs::create_symlink(dir / "victim", out / name);
    const RunResult r = run_in(dir, train_command(dir, out.path(), "--steps 3 --overwrite"));
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, name + " exists and is a symbolic link, not a regular file");
    EXPECT_EQ(r.out, "") << "refused only after the training";
    EXPECT_EQ(read_file(dir / "victim"), "keep me");
  }
  // Resumed: the checkpoint itself replaced by a link to a copy of it (a resumed run lost everything to its save).
  fs::rename(run + "/ckpt.safetensors", dir / "real.safetensors");
  fs::create_symlink(dir / "real.safetensors", run + "/ckpt.safetensors");
  const RunResult r = run_in(dir, "./train --threads 1 --resume " + quote(run) + " --steps 4");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "ckpt.safetensors exists and is a symbolic link");
  EXPECT_EQ(r.out.find("step 3"), std::string::npos) << r.out;
}

TEST(Hardening3Files, MetricsAsAFifoOrADeviceIsRefusedBeforeItIsRead) {
  TempDir dir;
  const std::string run = small_run(dir);
  fs::remove(run + "/metrics.csv");
  ASSERT_EQ(::mkfifo((run + "/metrics.csv").c_str(), 0644), 0);
  RunResult r = run_in(dir, "timeout 60 ./train --threads 1 --resume " + quote(run) + " --steps 3");
  EXPECT_EQ(r.exit_code, 1) << r.describe();  // 124: it hung reading the FIFO
  EXPECT_CONTAINS(r.err, "metrics.csv exists and is a FIFO (named pipe), not a regular file");
  fs::remove(run + "/metrics.csv");
  fs::create_symlink("/dev/zero", run + "/metrics.csv");
  r = run_in(dir, "timeout 60 ./train --threads 1 --resume " + quote(run) + " --steps 3");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "metrics.csv exists and is a symbolic link");
}

TEST(Hardening3Files, AResumeNeverModifiesAHardLinkedSnapshotOfTheFolder) {
  // --stop-at leaves metrics.csv with exactly the rows before the checkpoint's step, so nothing is cut on resume:
  // that is the case that appended in place, into the inode a `cp -al` snapshot shares.
  TempDir dir;
  write_corpus(dir);
  RunResult r = run_in(dir, train_command(dir, dir / "run", "--steps 4 --stop-at 2 --eval-every 0"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_EQ(std::system(("cp -al " + quote(dir / "run") + " " + quote(dir / "snap")).c_str()), 0);
  const std::string metrics = read_file(dir / "snap/metrics.csv"), ckpt = read_file(dir / "snap/ckpt.safetensors");
  r = run_in(dir, "./train --threads 1 --resume " + quote(dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_file(dir / "snap/metrics.csv"), metrics) << "the resumed run appended to the snapshot's file";
  EXPECT_EQ(read_file(dir / "snap/ckpt.safetensors"), ckpt);
  EXPECT_EQ(progutil::step_rows(dir / "run/metrics.csv"), (std::vector<int>{0, 1, 2, 3}));
}

TEST(Hardening3Files, PruneOutOnADanglingLinkSaysWhatItIs) {
  TempDir dir;
  const std::string run = small_run(dir);
  fs::create_symlink(dir / "nowhere", dir / "dangling");
  const RunResult r = run_in(dir, "./inspect prune --threads 1 --ckpt " + quote(run) + " --data " +
                                      quote(dir / "corpus.txt") + " --out " + quote(dir / "dangling"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "is a symbolic link to something that does not exist");
  EXPECT_EQ(r.out, "");
}

// ---------------------------------------------------------------------------------------------------------------
// Readers

// A cell that is not a whole number in its range is refused naming the file, the line, the column and what was
// expected (they gave std::stol's "stol", or a basic_string::compare message later, for a negative offset).
TEST(Hardening3Readers, TableCellsThatAreNotWholeNumbersAreNamedByLineAndColumn) {
  TempDir dir;
  const std::string notes = "pronoun_offset\tpronoun_length\tpronoun\tantecedent_offset\tantecedent_length\tantecedent\n";
  const std::string names = "offset\tlength\tname\tpronoun\n";
  struct Case {
    std::string file, text, where;  // "<line>: column <n> (<header>)"
  };
  const std::vector<Case> cases = {
      {"a.tsv", notes + "10\t3\tshe\t2\t4\tMira\nx\t3\tshe\t2\t4\tMira\n", "3: column 1 (pronoun_offset)"},
      {"b.tsv", notes + "10\t3\tshe\t-5\t4\tMira\n", "2: column 4 (antecedent_offset)"},
      {"c.tsv", notes + "10\t3x\tshe\t2\t4\tMira\n", "2: column 2 (pronoun_length)"},
      {"d.tsv", notes + "10\t3\tshe\t2\t99999999999999999999999\tMira\n", "2: column 5 (antecedent_length)"},
      {"e_names.tsv", names + "4\t-1\tMira\tshe\n", "2: column 2 (length)"},
      {"f_names.tsv", names + " 4\t3\tMira\tshe\n", "2: column 1 (offset)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    write_file(dir / c.file, c.text);
    try {
      if (c.file.find("names") != std::string::npos) read_name_mentions(dir / c.file);
      else read_pronoun_notes(dir / c.file);
      ADD_FAILURE() << "read it";
    } catch (const std::runtime_error& e) {
      EXPECT_CONTAINS(e.what(), dir / c.file + ":" + c.where);
      EXPECT_CONTAINS(e.what(), "expected a whole number");
    }
  }
  write_file(dir / "good.tsv", notes + "10\t3\tshe\t2\t4\tMira\n");
  const std::vector<PronounNote> read = read_pronoun_notes(dir / "good.tsv");
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].antecedent_offset, 2);
  EXPECT_EQ(read[0].antecedent, "Mira");
}

TEST(Hardening3Readers, TablesAndHeadListsAreReadOnlyFromRegularFiles) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  // A FIFO without a writer would block these forever; /dev/zero was read as an empty table.
  for (const std::string& path : {dir / "fifo", std::string("/dev/zero")}) {
    SCOPED_TRACE(path);
    const char* kind = path == "/dev/zero" ? "character device" : "FIFO";
    try {
      read_name_mentions(path);
      ADD_FAILURE() << "read_name_mentions read it";
    } catch (const std::runtime_error& e) {
      EXPECT_CONTAINS(e.what(), kind);
    }
    try {
      read_pronoun_notes(path);
      ADD_FAILURE() << "read_pronoun_notes read it";
    } catch (const std::runtime_error& e) {
      EXPECT_CONTAINS(e.what(), kind);
    }
    try {
      parse_prune_spec(path, 2, 2);
      ADD_FAILURE() << "parse_prune_spec read it";
    } catch (const std::runtime_error& e) {
      EXPECT_CONTAINS(e.what(), kind);
    }
  }
  // A list of heads is small: a 100 MB file is no list of heads.
  sparse_file(dir / "big", "L0H0\n", 100u << 20);
  try {
    parse_prune_spec(dir / "big", 2, 2);
    ADD_FAILURE() << "parse_prune_spec read 100 MB";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(e.what(), "more than a list of heads (--prune) can be");
  }
  write_file(dir / "heads.txt", "L1H0, L0H1\n");
  EXPECT_EQ(parse_prune_spec(dir / "heads.txt", 2, 2), (std::vector<float>{1, 0, 0, 1}));
  EXPECT_EQ(parse_prune_spec("L0H0", 2, 2), (std::vector<float>{0, 1, 1, 1}));
}

TEST(Hardening3Readers, ProgramsRefuseFifosAndDevicesAsTables) {
  TempDir dir;
  const std::string run = small_run(dir);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"./sample --threads 1 -n 3 --ckpt " + quote(run) + " --prune " + quote(dir / "fifo"), "FIFO (named pipe)"},
      {"./sample --threads 1 -n 3 --ckpt " + quote(run) + " --prune /dev/zero", "character device"},
      {"./inspect heads --threads 1 --resamples 0 --sequences 2 --ckpt " + quote(run) + " --data " +
           quote(dir / "corpus.txt") + " --antecedents /dev/zero", "character device"},
      {"./inspect heads --threads 1 --resamples 0 --sequences 2 --ckpt " + quote(run) + " --data " +
           quote(dir / "corpus.txt") + " --antecedents " + quote(dir / "fifo"), "FIFO (named pipe)"},
  };
  for (const auto& [command, kind] : cases) {
    SCOPED_TRACE(command);
    const RunResult r = run_in(dir, "timeout 60 " + command);
    EXPECT_EQ(r.exit_code, 1) << r.describe();  // 124: hung on the FIFO; 0: /dev/zero read as an empty table
    EXPECT_CONTAINS(r.err, kind + ", not a regular file");
  }
}

TEST(Hardening3Readers, AFileLargerThanTheMemoryIsRefusedByNameBeforeAllocating) {
  const uint64_t memory = physical_memory_bytes();
  if (memory == 0) GTEST_SKIP() << "the system does not report its memory";
  TempDir dir;
  const std::string run = small_run(dir);
  // Sparse: no disk space. A corpus, and a checkpoint whose header length is plausible (so only its size is wrong).
  sparse_file(dir / "huge.txt", "hello", memory + (1ull << 30));
  std::string head(8, '\0');
  head[0] = 16;
  sparse_file(dir / "huge.safetensors", head + "{}              ", memory + (1ull << 30));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {train_command(dir, dir / "a", "--steps 1") + " --data " + quote(dir / "huge.txt"), "huge.txt"},
      {"./sample --threads 1 -n 3 --ckpt " + quote(dir / "huge.safetensors"), "huge.safetensors"},
  };
  for (const auto& [command, name] : cases) {
    SCOPED_TRACE(command);
    const RunResult r = run_in(dir, "timeout 60 " + command);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, name + "': it is " + std::to_string(memory + (1ull << 30)) + " bytes, more than this "
                           "machine's " + std::to_string(memory) + " bytes of memory");
    EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "a")) << "the run folder was made before the corpus was refused";
}

TEST(Hardening3Readers, TheHeaderLengthIsCheckedBeforeTheRestOfTheFileIsRead) {
  if (H3_SANITIZED) GTEST_SKIP() << "a virtual memory limit and a sanitizer's shadow memory do not mix";
  // 6 GB (sparse) whose first 8 bytes are no header length, read under a 2 GB address-space limit: the old reader
  // read the whole file before looking at them, and failed to allocate (std::bad_alloc).
  TempDir dir;
  sparse_file(dir / "big.safetensors", "AAAAAAAA", 6ull << 30);
  write_file(dir / "zeros_head", std::string(64, '\0'));
  sparse_file(dir / "zeros.safetensors", std::string(64, '\0'), 6ull << 30);
  for (const std::string name : {"big.safetensors", "zeros.safetensors"}) {
    SCOPED_TRACE(name);
    const RunResult r = run_in(dir, "ulimit -v 2000000 && OMP_WAIT_POLICY=passive timeout 60 ./sample --threads 1 -n 3 "
                                    "--ckpt " + quote(dir / name));
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, name == "big.safetensors" ? "absurdly large" : "too short for a JSON object");
    EXPECT_EQ(r.err.find("memory"), std::string::npos) << r.err;
  }
}

TEST(Hardening3Readers, AMissingMaskNamesTheFileOnce) {
  // A file "downgraded" to format 1 (no checksums to recompute) and without its mask field.
  TempDir dir;
  const std::string run = small_run(dir);
  const std::string bytes = read_file(run + "/ckpt.safetensors");
  nlohmann::ordered_json header = ckptbytes::header_of(bytes);
  header["__metadata__"].erase("mask");
  header["__metadata__"].erase(kHeaderChecksumKey);
  header["__metadata__"].erase(kDataChecksumKey);
  header["__metadata__"]["format_version"] = "1";
  write_file(dir / "nomask.safetensors", ckptbytes::with_header(bytes, header));
  const std::string error = ckptbytes::load_error(dir / "nomask.safetensors");
  EXPECT_CONTAINS(error, "metadata field 'mask' is missing");
  EXPECT_EQ(error.find(dir / "nomask.safetensors"), error.rfind(dir / "nomask.safetensors")) << error;
}

// ---------------------------------------------------------------------------------------------------------------
// Escaped paths

TEST(Hardening3Escapes, EveryLineThatPrintsAPathEscapesIt) {
  TempDir dir;
  const std::string run = small_run(dir);
  const std::string evil = "evil\x1b[2J\u202E";
  auto expect_clean = [](const RunResult& r) {
    for (const std::string& text : {r.out, r.err}) {
      EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
      EXPECT_EQ(text.find("\u202E"), std::string::npos) << text;
    }
  };
  // inspect heads: the "not found" line.
  RunResult r = run_in(dir, "./inspect heads --threads 1 --resamples 0 --sequences 2 --ckpt " + quote(run) +
                                " --antecedents " + quote(dir / evil));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_CONTAINS(r.out, "evil\\x1b[2J\\u202e not found");
  expect_clean(r);
  // inspect serve: the --host warning (the host is then refused by the bind) and the banner.
  r = run_in(dir, "timeout 20 ./inspect serve --threads 1 --ckpt " + quote(run) + " --host " + quote(evil));
  EXPECT_CONTAINS(r.err, "serving on evil\\x1b[2J\\u202e");
  expect_clean(r);
  fs::create_directory(dir / evil);
  fs::copy_file(run + "/ckpt.safetensors", (dir / evil) + "/ckpt.safetensors");
  r = run_in(dir, "timeout 5 ./inspect serve --threads 1 --port 0 --ckpt " + quote(dir / evil));
  EXPECT_CONTAINS(r.out, "explore: ");
  EXPECT_CONTAINS(r.out, "evil\\x1b[2J\\u202e");
  expect_clean(r);
  // ./train --resume of a format-1 file: the notes about settings it was written without.
  const std::string old = (dir / evil) + "/old.safetensors";
  fs::copy_file(progutil::source_root() + "/tests/fixtures/ckpt_5b9387c.safetensors", old);
  r = run_in(dir, "./train --threads 1 --resume " + quote(old) + " --data " +
                      quote(progutil::source_root() + "/tests/fixtures/corpus_5b9387c.txt") + " --out " +
                      quote(dir / "resumed") + " --print-settings");
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_CONTAINS(r.out, "note: ");
  EXPECT_CONTAINS(r.err, "is a format-1 checkpoint");
  expect_clean(r);
}

// ---------------------------------------------------------------------------------------------------------------
// The divergence guard keeps the best weights

// The check after every step: any ∞ or NaN anywhere (first, last, or among the values a vector loop's tail handles)
// is found, and the extreme finite values (the largest float, the smallest denormal, −0) are not taken for one.
TEST(Hardening3Guard, AllFiniteFindsEveryInfinityAndNaNAndNothingElse) {
  const size_t n = 100003;  // not a multiple of any vector width
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = std::sin((float)i) * 1e3f;
  v[5] = std::numeric_limits<float>::max(), v[6] = -std::numeric_limits<float>::max();
  v[7] = std::numeric_limits<float>::denorm_min(), v[8] = -0.0f, v[9] = std::numeric_limits<float>::min();
  EXPECT_TRUE(all_finite(v.data(), n));
  EXPECT_TRUE(all_finite(v.data(), 0));
  for (size_t at : {size_t(0), n / 2, n - 3, n - 1})
    for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> w = v;
      w[at] = bad;
      EXPECT_FALSE(all_finite(w.data(), n)) << bad << " at " << at;
      EXPECT_TRUE(all_finite(w.data(), at)) << "the values before it are finite";
    }
}

TEST(Hardening3Guard, TheCeilingIsTheStartOrAUniformGuessWhicheverIsHigher) {
  const double lnV = std::log(61.0);
  DivergenceGuard fresh(61);
  EXPECT_TRUE(std::isinf(fresh.ceiling())) << "before start() only finiteness (and the explosion rule) counts";
  for (int i = 0; i < 10; i++) fresh.observe(2.0);  // best recent 2.0: the explosion limit is 2 + ln 61 = 6.11
  fresh.start(4.3, 0);                              // an initialised model slightly worse than uniform
  EXPECT_DOUBLE_EQ(fresh.ceiling(), 1.01 * 4.3);
  EXPECT_EQ(fresh.refuse(4.3), "") << "no worse than the start: a run whose weights barely moved may save";
  EXPECT_EQ(fresh.refuse(1.01 * 4.3 - 1e-9), "");
  EXPECT_CONTAINS(fresh.refuse(1.01 * 4.3 + 1e-6), "worse than knowing nothing");
  // The run: its "last good checkpoint" scored 5.50, below the explosion limit 6.571, above ln 61 = 4.11.
  DivergenceGuard resumed(61);
  for (int i = 0; i < 10; i++) resumed.observe(2.461);
  resumed.start(1.5, 100);
  EXPECT_DOUBLE_EQ(resumed.ceiling(), 1.01 * lnV);
  EXPECT_EQ(resumed.refuse(1.01 * lnV - 1e-9), "");
  EXPECT_NE(resumed.refuse(1.01 * lnV + 1e-9), "");
  const std::string why = resumed.refuse(5.50);
  EXPECT_CONTAINS(why, "worse than knowing nothing");
  EXPECT_CONTAINS(why, "5.5 nats");
}

TEST(Hardening3Guard, MuchWorseIsHalfWayFromTheBestSavedBackToUniform) {
  const double lnV = std::log(61.0);
  DivergenceGuard g(61);
  EXPECT_FALSE(g.much_worse(1e30)) << "before start() nothing is much worse";
  g.start(4.2, 0);
  EXPECT_TRUE(g.saved(2.586, 300));
  EXPECT_EQ(g.best_saved_step(), 300);
  const double limit = 2.586 + 0.5 * (lnV - 2.586);  // 3.349, by hand
  EXPECT_NEAR(g.much_worse_limit(), limit, 1e-12);
  EXPECT_FALSE(g.much_worse(limit - 1e-9));
  EXPECT_TRUE(g.much_worse(limit + 1e-9));
  EXPECT_FALSE(g.saved(3.0, 325)) << "worse, not the best";
  EXPECT_EQ(g.best_saved_step(), 300);
  EXPECT_NEAR(g.much_worse_limit(), limit, 1e-12);
  EXPECT_TRUE(g.saved(2.5, 350));
  EXPECT_NEAR(g.much_worse_limit(), 2.5 + 0.5 * (lnV - 2.5), 1e-12);
  // A best at or above uniform leaves no room: anything worse is much worse (the ceiling then refuses it).
  DivergenceGuard flat(61);
  flat.start(4.5, 0);
  EXPECT_NEAR(flat.much_worse_limit(), 4.5, 1e-12);
}

// ---------------------------------------------------------------------------------------------------------------
// Headers parse in linear time

namespace {
// A safetensors file of n empty tensors (shape [0], no data): the largest header for its tensor count.
std::string many_tensors(int n) {
  std::string header = "{";
  for (int i = 0; i < n; i++)
    header += (i ? "," : "") + std::string("\"t") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],"
              "\"data_offsets\":[0,0]}";
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; i++) file[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return file + header;
}
}  // namespace

TEST(Hardening3Header, AHundredThousandEntriesParseInLinearTime) {
  // nlohmann's callback parser scanned the enclosing object at every end of an object: O(n²), 85 s for the 36,876
  // tensors of a 1024-layer checkpoint. The work is counted (events visited, at most one per header byte), and as an
  // order-of-magnitude check the time too: 30 s is some 100 times what a linear parse takes on an idle machine (4 s
  // measured on 2 cores shared with 7 compiles), and far below the quadratic one's many minutes.
  const std::string file = many_tensors(100000);
  size_t events = 0;
  const auto start = std::chrono::steady_clock::now();
  const SafetensorsContents c =
      parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "many", &events);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(c.tensors.size(), 100000u);
  // Per entry: its key, the entry object's start and end, 3 keys, the dtype, the shape array (start, 1, end) and
  // data_offsets (start, 2, end): 14 events; plus the outer object's start and end.
  EXPECT_EQ(events, 14u * 100000 + 2);
  EXPECT_LE(events, file.size());
  EXPECT_LT(seconds, 30.0) << "the header parse is not linear";
}

// The deepest model of each kind (n_layer's row allows 1024), with AdamW's state beside its weights, is within the
// bound on a checkpoint's tensors (io/checkpoint.cpp), and loads far faster than the quadratic parse did (85 s; an
// idle core takes under a second, and the bound leaves room for a machine shared with other work).
TEST(Hardening3Header, ACheckpointOf1024LayersOfEveryKindWrittenByTrainLoadsFarFasterThanAQuadraticParse) {
  TempDir dir;
  write_corpus(dir);
  for (const std::string& kind : testutil::registered_kinds()) {
    SCOPED_TRACE(kind);
    const std::string out = dir / ("deep-" + kind);
    const RunResult r = run_in(dir, "./train --threads 1 --n-layer 1024 --n-head 1 --n-embd 4 --block 4 --batch 1 "
                                    "--eval-iters 1 --steps 0 --mixer " + kind + " --data " + quote(dir / "corpus.txt") +
                                    " --out " + quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto start = std::chrono::steady_clock::now();
    const Checkpoint c = load_checkpoint(out + "/ckpt.safetensors");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(c.model->config.n_layer, 1024);
    ASSERT_TRUE(c.resumable) << "no optimizer state: the bound's largest case is not tried";
    EXPECT_LT(seconds, 20.0) << "85 s with the quadratic parse";
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Absurd counts: refused with an estimate before anything is allocated or the run folder made

TEST(Hardening3Counts, EvaluationCountsAndInspectCountsAreBoundedWithAnEstimate) {
  TempDir dir;
  const std::string run = small_run(dir);
  struct Case {
    std::string command, words;
  };
  const std::vector<Case> cases = {
      {train_command(dir, dir / "a", "--steps 1 --eval-windows 2147483647"), "--eval-windows 2147483647 is 536870912 batches"},
      {train_command(dir, dir / "a", "--steps 1 --eval-windows 1000000000"), "--eval-windows 1000000000 is 250000000 batches"},
      {train_command(dir, dir / "a", "--steps 1 --eval-iters 2147483647"), "--eval-iters 2147483647 with --batch 4 scores 8589934588 sequences"},
      {train_command(dir, dir / "a", "--steps 5000000000"), "--steps 5000000000 is out of range: it must be between 0 and 2147483647"},
      {train_command(dir, dir / "a", "--batch 5000000000"), "--batch 5000000000 is out of range: it must be between 1 and 2147483647"},
      {"./inspect heads --threads 1 --resamples 0 --sequences 2147483647 --ckpt " + quote(run),
       "--sequences 2147483647: 2147483647 sequences of"},
      {"./inspect prune --threads 1 --batch 2147483647 --ckpt " + quote(run) + " --data " + quote(dir / "corpus.txt") +
           " --out " + quote(dir / "p"), "--batch 2147483647 (with --batches 8): 2147483647 sequences of 16 tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.command);
    const RunResult r = run_in(dir, "timeout 60 " + c.command);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, c.words);
    EXPECT_EQ(r.err.find("std::"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("-2147483648"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "a")) << "the run folder was made before the count was refused";
  EXPECT_FALSE(fs::exists(dir / "p"));
  // A checkpoint whose saved settings were forged (its header checksum recomputed) is refused the same way.
  const std::string bytes = read_file(run + "/ckpt.safetensors");
  nlohmann::ordered_json header = ckptbytes::header_of(bytes);
  nlohmann::json settings = nlohmann::json::parse(header["__metadata__"]["train_config"].get<std::string>());
  settings["eval_windows"] = 1000000000;
  header["__metadata__"]["train_config"] = settings.dump();
  fs::create_directory(dir / "forged");
  write_file(dir / "forged/ckpt.safetensors", ckptbytes::with_header_and_its_checksum(bytes, header));
  const RunResult r = run_in(dir, "timeout 60 ./train --threads 1 --resume " + quote(dir / "forged") + " --steps 3");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "--eval-windows 1000000000 is");
  EXPECT_FALSE(fs::exists(dir / "forged/metrics.csv"));
}

TEST(Hardening3Counts, BatchSplitsReplicasCountInTheMemoryEstimate) {
  // 63 more gradient arenas and 63 slices' activations at 64 threads: an estimate that left them out said 0.62 GB
  // for a run that took 1.65 GB.
  ModelConfig c;
  c.n_layer = 2, c.n_head = 2, c.n_embd = 64, c.block_size = 64, c.vocab_size = 65;
  const double params = (double)total_floats(gpt_tensor_table(c));
  const double per_sequence = (double)activation_floats(c, 1, c.block_size) + 2.0 * c.block_size;
  const double alone = 4.0 * (4 * params + 64 * per_sequence);
  EXPECT_NEAR((double)estimate_training_bytes(c, 64), alone, 8);
  EXPECT_NEAR((double)estimate_training_bytes(c, 64, 64), alone + 4.0 * 63 * (params + per_sequence), 8);
  EXPECT_NEAR((double)estimate_training_bytes(c, 64, 2), alone + 4.0 * (params + 32 * per_sequence), 8);
}

TEST(Hardening3Counts, ATrainingRunCountsBatchSplitsReplicasBeforeAllocatingThem) {
  // The wiring of the estimate above into ./train: a shape whose one model fits under a memory limit with half again
  // to spare and whose 64 replicas do not. The limit is an address-space limit (1.5 × the one model's estimate,
  // below this machine's memory), so that a run which went on anyway fails to allocate instead of filling the machine.
  if (H3_SANITIZED) GTEST_SKIP() << "a virtual memory limit and a sanitizer's shadow memory do not mix";
  const uint64_t memory = physical_memory_bytes();
  if (memory == 0) GTEST_SKIP() << "the system does not report its memory";
  ModelConfig c;
  c.n_layer = 1, c.n_head = 1, c.vocab_size = 35;  // the generated text's 35 characters
  int T = 0, E = 0;
  double alone = 0;
  for (int e = 8; e <= 1024 && T == 0; e *= 2)
    for (int t = 1024; t <= 65536 && T == 0; t *= 2) {
      c.n_embd = e, c.block_size = t;
      alone = (double)estimate_training_bytes(c, 64);
      if (alone > 1e9 && 1.5 * alone < 0.8 * memory && (double)estimate_training_bytes(c, 64, 64) > 1.8 * alone)
        T = t, E = e;
    }
  ASSERT_GT(T, 0) << "no shape puts 64 replicas (and not one model) past 1.5 × one model, below " << memory;
  TempDir dir;
  write_file(dir / "long.txt", progutil::generated_text(size_t(12) * T));
  const std::string cap_kib = std::to_string((long long)(1.5 * alone / 1024));
  // MALLOC_ARENA_MAX=1: glibc gives each thread that allocates its own heap arena, 64 MB of address space, up to 8
  // per core. clang's libomp threads each allocate as they start (libgomp's do not), so under clang ./train held
  // 1 GB more before its check (1.54 GB against 0.54 GB at 64 threads, measured), and the half model set aside
  // for what the run maps besides the model was gone: it refused even one model. One arena keeps both builds alike.
  const RunResult r = run_in(dir, "ulimit -v " + cap_kib + " && MALLOC_ARENA_MAX=1 OMP_WAIT_POLICY=passive timeout 120 "
                                  "./train --n-layer 1 "
                                  "--n-head 1 --n-embd " + std::to_string(E) + " --block " + std::to_string(T) +
                                  " --batch 64 --eval-iters 1 "
                                  "--threads 64 --threads-split batch --steps 1 --data " + quote(dir / "long.txt") +
                                  " --out " + quote(dir / "a"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "to train with batch 64 split between 64 threads, more than the ");
  EXPECT_CONTAINS(r.err, "address-space limit");
  EXPECT_CONTAINS(r.err, "(or --threads-split ops)");
  EXPECT_FALSE(fs::exists(dir / "a"));
}

// A model smaller than the machine's memory but larger than the process's address-space limit is refused before
// training, naming the limit and what to lower (it ended in a bare "train: error: std::bad_alloc").
TEST(Hardening3Counts, AModelLargerThanTheAddressSpaceLimitIsRefusedNamingTheLimit) {
  if (H3_SANITIZED) GTEST_SKIP() << "a virtual memory limit and a sanitizer's shadow memory do not mix";
  const uint64_t memory = physical_memory_bytes();
  const double cap = 3e9;  // ulimit -v 3000000 (KiB)
  if (memory == 0 || memory < 2 * cap) GTEST_SKIP() << "the machine's memory is not well above the cap";
  ModelConfig c;
  c.n_layer = 2, c.n_head = 4, c.vocab_size = 35;
  int T = 0;
  c.n_embd = 256;
  for (int t = 256; t <= 65536 && T == 0; t *= 2) {
    c.block_size = t;
    const double need = (double)estimate_training_bytes(c, 16);
    if (need > 1.3 * cap && need < 0.7 * memory) T = t;
  }
  ASSERT_GT(T, 0) << "no block puts the model between the cap and the machine's memory";
  TempDir dir;
  write_file(dir / "long.txt", progutil::generated_text(size_t(12) * T));
  const RunResult r = run_in(dir, "ulimit -v 3000000 && OMP_WAIT_POLICY=passive timeout 120 ./train --n-layer 2 "
                                  "--n-head 4 --n-embd 256 --block " + std::to_string(T) + " --batch 16 --eval-iters 1 "
                                  "--threads 1 --steps 1 --data " + quote(dir / "long.txt") + " --out " + quote(dir / "a"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "address-space limit of 3072000000 (ulimit -v); reduce --batch, --block, --n-embd or --n-layer");
  EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "a"));
}

// ---------------------------------------------------------------------------------------------------------------
// NaN outputs refused

TEST(Hardening3NaN, InspectHeadsAndPruneRefuseNonFinitePredictions) {
  TempDir dir;
  const std::string huge = progutil::source_root() + "/fuzz/corpus/checkpoint/huge-weights-nan-logits.safetensors";
  const Checkpoint c = load_checkpoint(huge);
  std::vector<int> ids;
  for (int i = 0; i < 4000; i++) ids.push_back(i % c.tokenizer.num_chars());
  write_file(dir / "text.txt", c.tokenizer.decode(ids));
  RunResult r = run_in(dir, "./inspect heads --threads 1 --resamples 0 --sequences 2 --ckpt " + quote(huge));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "the model's predictions are not finite numbers");
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  r = run_in(dir, "./inspect prune --threads 1 --batches 1 --batch 2 --seeds 0 --ckpt " + quote(huge) + " --data " +
                      quote(dir / "text.txt") + " --out " + quote(dir / "p"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "the model's predictions are not finite numbers");
  EXPECT_FALSE(fs::exists(dir / "p/prune.csv"));
  EXPECT_FALSE(fs::exists(dir / "p/prune.svg"));
  EXPECT_FALSE(fs::exists(dir / "p/head_importance.csv"));
}

// ---------------------------------------------------------------------------------------------------------------
// Issue 31's break checks: the tests that a first round of breaks left green

TEST(Hardening3Files, MetricsFileItselfNeverReadsAFifo) {
  // prepare_output_dir refuses a FIFO at OUT/metrics.csv first; MetricsFile must refuse it on its own too (a
  // resume's reader opened it and hung). Should it open the FIFO anyway, a writer that comes and goes lets the open
  // return, so a broken reader fails this test instead of hanging the suite.
  TempDir dir;
  const std::string path = dir / "metrics.csv";
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 600 && !done; i++) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);  // succeeds only while a reader waits
      if (fd >= 0) {
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  try {
    MetricsFile metrics(path, 1, "");
    ADD_FAILURE() << "MetricsFile read a FIFO";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(e.what(), "metrics.csv exists and is a FIFO (named pipe), not a regular file");
  }
  done = true;
  writer.join();
}

// A legal but huge header: 1.6 million empty tensor entries in 96 MB, both checksums absent (an older file's
// form), under the 100 MB header limit. Its tree cost about 1.5 GB; under an address-space limit ./sample ended on
// std::bad_alloc thrown in the parse and again in the JSON library's destructor (exit 134). Now no tree is built,
// and a checkpoint's reader stops at the first tensor beyond the most any model of this program has.
TEST(Hardening3Header, AHugeLegalHeaderUnderAMemoryCapIsRefusedWithAMessage) {
  if (H3_SANITIZED) GTEST_SKIP() << "a virtual memory limit and a sanitizer's shadow memory do not mix";
  TempDir dir;
  write_file(dir / "huge.safetensors", many_tensors(1600000));
  write_file(dir / "text.txt", "abc");
  for (const char* cap : {"1000000", "2000000"}) {  // KiB: 1 GB and 2 GB
    SCOPED_TRACE(cap);
    const RunResult r = run_in(dir, std::string("ulimit -v ") + cap + " && OMP_WAIT_POLICY=passive timeout 120 ./sample "
                                    "--threads 1 --ckpt " + quote(dir / "huge.safetensors") + " --score " +
                                    quote(dir / "text.txt"));
    ASSERT_TRUE(r.exited) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_CONTAINS(r.err, "huge.safetensors: header lists more than ");
    EXPECT_CONTAINS(r.err, " tensors, more than the largest model this program builds has");
  }
}

// Memory limits are tried in a fresh process: this test program started again with --gtest_filter naming the one
// test and H3_CHILD=<case>, and the test, seeing H3_CHILD, does the case's work and exits with its code. (A child
// that is only forked inherits the suite's heap, free memory left by earlier tests included, and its malloc arenas'
// reserved address space: a limit on the address space then does not bind.)
int exit_code_in_a_fresh_process(const std::string& child_case) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = std::string("--gtest_filter=") + test->test_suite_name() + "." + test->name();
  const pid_t pid = fork();
  if (pid == 0) {
    ::setenv("H3_CHILD", child_case.c_str(), 1);
    ::execl("/proc/self/exe", "run_tests", filter.c_str(), (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// The case a test started by exit_code_in_a_fresh_process is to run, or null in the suite itself.
const char* child_case() { return std::getenv("H3_CHILD"); }

// In a fresh process: limits the address space to what it has now plus `extra` bytes.
void limit_address_space_to_now_plus(uint64_t extra) {
  const std::string status = read_file("/proc/self/status");
  const rlim_t have = rlim_t(std::stoull(status.substr(status.find("VmSize:") + 7))) * 1024;
  const rlimit cap = {have + rlim_t(extra), have + rlim_t(extra)};
  setrlimit(RLIMIT_AS, &cap);
}

// In a fresh process: reads `file` with no bound on its tensors; exits 0 when all were read, 3 when refused for
// want of memory, 4 when a tensor is missing, 5 on another error, 6 on std::bad_alloc.
[[noreturn]] void read_and_exit(const std::string& file, size_t tensors) {
  try {
    const SafetensorsContents c = parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "many");
    _exit(c.tensors.size() == tensors ? 0 : 4);
  } catch (const std::runtime_error& e) {
    _exit(std::string(e.what()).find("not enough memory") != std::string::npos ? 3 : 5);
  } catch (const std::bad_alloc&) {
    _exit(6);
  }
}

const char* kReadCodes = "3: not enough memory; 4: a tensor lost; 5: another error; 6: bad_alloc; 1000 + n: signal n";

// The reader alone, with no bound on the tensors: a header of 400,000 empty entries (24 MB) is read under an
// address-space limit of what the process has plus 6 times the header (the whole tree needed 16 times, and more at
// its peak; 4.5 times is measured now, the most for any header: empty entries are the shortest). What it costs: a
// TensorEntry per tensor while the header is read, then the tensor map returned.
TEST(Hardening3Header, AHeaderIsReadInASmallMultipleOfItsSize) {
  if (H3_SANITIZED) GTEST_SKIP() << "a virtual memory limit and a sanitizer's shadow memory do not mix";
  const std::string file = many_tensors(400000);
  if (child_case()) {
    limit_address_space_to_now_plus(6 * file.size());
    read_and_exit(file, 400000);
  }
  EXPECT_EQ(exit_code_in_a_fresh_process("6x"), 0) << kReadCodes;
}

// Under every memory limit from nothing spare to more than reading needs, the reader either reads the file or
// refuses it with a message saying there is not enough memory: never a signal (std::bad_alloc thrown again by a
// destructor while unwinding was std::terminate, SIGABRT) and never another error. 6 limits, each in a fresh
// process, on a header of 400,000 empty entries (24 MB).
TEST(Hardening3Header, UnderEveryMemoryLimitTheReaderReadsOrSaysThereIsNotEnoughMemory) {
  if (H3_SANITIZED) GTEST_SKIP() << "a virtual memory limit and a sanitizer's shadow memory do not mix";
  const std::string file = many_tensors(400000);
  if (child_case()) {
    limit_address_space_to_now_plus(std::stoull(child_case()) * file.size());
    read_and_exit(file, 400000);
  }
  int read = 0;
  int refused = 0;
  for (int times = 0; times < 6; times++) {  // up to 5 times the file
    SCOPED_TRACE(times);
    const int code = exit_code_in_a_fresh_process(std::to_string(times));
    EXPECT_TRUE(code == 0 || code == 3) << "exit " << code << " (" << kReadCodes << ")";
    read += code == 0;
    refused += code == 3;
  }
  EXPECT_GE(read, 1) << "no limit was enough: the sweep does not reach what reading needs";
  EXPECT_GE(refused, 1) << "every limit was enough: the sweep does not test running out";
}

// The reader frees each JSON value it built with empty_without_allocating (io/json_emptying.h). Here, in a fresh
// process whose memory is used up to its limit, a tree of 100,000 entries is destroyed once emptied (the process
// lives) and, as the control, once as it is: nlohmann's destructor then asks for a vector of 100,000 values, and
// std::bad_alloc thrown from a destructor is std::terminate (the process dies on SIGABRT).
TEST(Hardening3Header, AnEmptiedJsonValueIsFreedWithoutAllocating) {
  if (H3_SANITIZED) GTEST_SKIP() << "a virtual memory limit and a sanitizer's shadow memory do not mix";
  if (child_case()) {
    {
      nlohmann::json tree = nlohmann::json::object();
      for (int i = 0; i < 100000; i++) tree[std::to_string(i)] = nlohmann::json::array({i, i});
      limit_address_space_to_now_plus(0);
      for (size_t block : {size_t(1) << 20, size_t(1) << 12, size_t(64), size_t(16)})
        while (std::malloc(block) != nullptr) {
        }
      if (child_case() == std::string("emptied")) empty_without_allocating(tree);
    }
    _exit(0);
  }
  EXPECT_EQ(exit_code_in_a_fresh_process("emptied"), 0);
  EXPECT_EQ(exit_code_in_a_fresh_process("as it is"), 1000 + SIGABRT) << "the control did not fail";
}

// Each top-level value is bounded as it is read: a tensor entry of more JSON values than any entry holds, and
// metadata of more keys than any writer uses, are refused at that value, before the rest is read.
TEST(Hardening3Header, AnEntryOrMetadataOfTooManyValuesIsRefusedThere) {
  std::string dims = "0";
  for (int i = 0; i < 100; i++) dims += ",1";
  std::string metadata;
  for (int i = 0; i < 5000; i++) metadata += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"v\"";
  const struct {
    std::string header, words;
  } cases[] = {
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[" + dims + "],\"data_offsets\":[0,0]}}",
       "many: tensor 'a': entry holds more than 64 JSON values"},
      {"{\"__metadata__\":{" + metadata + "}}", "many: __metadata__ holds more than 8192 JSON values"},
  };
  for (const auto& c : cases) {
    std::string file(8, '\0');
    for (int i = 0; i < 8; i++) file[i] = char((uint64_t(c.header.size()) >> (8 * i)) & 0xff);
    file += c.header;
    try {
      parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "many");
      ADD_FAILURE() << "accepted: " << c.words;
    } catch (const std::runtime_error& e) {
      EXPECT_CONTAINS(e.what(), c.words);
    }
  }
}

// The explorer under a 4 GB cap, asked for such a file by 32 requests at once: the server lives, every request is
// answered with an error naming the file, and a request for its default model is answered afterwards. (Parses ran
// in parallel outside the models' lock: four at once took it down. Now one file is loaded at a time, and the
// checkpoint's reader stops at its bound on tensors: while a whole tree was still built, 0 to 14 of the 32
// connections were closed unanswered.)
TEST(Hardening3Header, TheExplorerUnderACapSurvives32RequestsForAHugeHeader) {
  if (H3_SANITIZED) GTEST_SKIP() << "a virtual memory limit and a sanitizer's shadow memory do not mix";
  TempDir dir;
  write_corpus(dir);
  const RunResult trained = run_in(dir, train_command(dir, dir / "run", "--steps 2 --eval-every 0"));
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  write_file(dir / "run/huge.safetensors", many_tensors(1600000));
  const std::string out = dir / "serve.out";
  const std::string command = "ulimit -v 4000000 && OMP_WAIT_POLICY=passive exec ./inspect serve --threads 1 --port 0 "
                              "--ckpt " + quote(dir / "run") + " > " + quote(out) + " 2>&1";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), (char*)nullptr);
    _exit(127);
  }
  int port = 0;
  for (int i = 0; i < 300 && port == 0; i++) {  // up to 30 s for "… at http://127.0.0.1:PORT"
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string said = read_file(out);
    const size_t at = said.find("http://127.0.0.1:");
    if (at != std::string::npos) port = std::atoi(said.c_str() + at + 17);
  }
  auto stop = [&] {
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
  };
  if (port == 0) {
    stop();
    FAIL() << "the server did not start: " << read_file(out);
  }
  std::atomic<int> answered{0}, refused{0};
  std::mutex errors_mutex;
  std::string errors;  // what the clients that got no answer were told
  std::vector<std::thread> clients;
  for (int i = 0; i < 32; i++)
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(300, 0);
      auto r = c.Post("/api/model", "ckpt=huge.safetensors", "application/x-www-form-urlencoded");
      if (r) answered++;
      if (r && r->status >= 400 && r->body.find("huge.safetensors") != std::string::npos) refused++;
      if (!r) {
        std::lock_guard<std::mutex> hold(errors_mutex);
        errors += httplib::to_string(r.error()) + "; ";
      }
    });
  for (std::thread& t : clients) t.join();
  int status = 0;
  const bool alive = ::waitpid(pid, &status, WNOHANG) == 0;
  ASSERT_TRUE(alive) << "the server ended (wait status " << status << "): " << read_file(out);
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  auto normal = c.Post("/api/score", "text=the", "application/x-www-form-urlencoded");
  stop();
  EXPECT_EQ(answered.load(), 32) << errors << read_file(out);
  EXPECT_EQ(refused.load(), answered.load()) << "an answer that was not an error naming the file";
  ASSERT_TRUE(normal) << read_file(out);
  EXPECT_EQ(normal->status, 200) << normal->body;
}

TEST(Hardening3Header, ParseTimeGrowsInProportionToTheEntries) {
  // Linear: 4 times the entries take 4 times as long; the callback parser's scan of the enclosing object at every
  // entry's end made it 16. Measured side by side, small and large in turn, the best of 3 each: a ratio, so a
  // loaded machine slows both alike.
  const std::string small = many_tensors(4000), large = many_tensors(16000);
  auto seconds = [](const std::string& file) {
    const auto start = std::chrono::steady_clock::now();
    const SafetensorsContents c =
        parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "many");
    EXPECT_FALSE(c.tensors.empty());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double t_small = 1e30, t_large = 1e30;
  for (int i = 0; i < 3; i++) {
    t_small = std::min(t_small, seconds(small));
    t_large = std::min(t_large, seconds(large));
  }
  EXPECT_LT(t_large / t_small, 8.0) << "4,000 entries: " << t_small << " s; 16,000: " << t_large << " s";
}

// ---------------------------------------------------------------------------------------------------------------
// The guard in a run: the kind of run, small. AdamW at --lr 1 with a warm-up as long as the run: the
// validation loss falls to its best early, climbs back past a uniform guess, and the run is refused.

namespace {
int number_after(const std::string& text, const std::string& before) {
  const size_t at = text.find(before);
  return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + before.size());
}

std::string degrading(const std::string& lr) {
  return "--lr " + lr + " --warmup 600 --steps 600 --ckpt-every 10 --eval-every 0";
}

// A run at such a learning rate is chaotic: whether it is refused, and when, depends on the BLAS kernel's rounding
// (on one machine --lr 1 is refused under OpenBLAS's SkylakeX kernels and completes under Prescott's, --lr 2 the
// other way round). So the first of a few whose run is refused as worse than knowing nothing, having kept its best
// aside; none of them is refused if the guard's ceiling is gone.
struct Degraded {
  std::string lr;
  RunResult result;
  int best_step = -1;
};
Degraded degrading_run(const TempDir& dir, const std::string& out) {
  for (const char* lr : {"1", "2", "3", "1.5", "0.7"}) {
    fs::remove_all(out);
    const RunResult r = run_in(dir, train_command(dir, out, degrading(lr)));
    const int best = number_after(r.err, out + "/best.safetensors holds the best checkpoint (step ");
    if (r.exit_code == 1 && r.err.find("worse than knowing nothing") != std::string::npos && best > 0)
      return {lr, r, best};
  }
  return {};
}

// ./sample --score's nats per character: a measure of the weights independent of the guard's one batch.
double score(const TempDir& dir, const std::string& ckpt, const std::string& text) {
  const RunResult r = run_in(dir, "./sample --threads 1 --ckpt " + quote(ckpt) + " --score " + quote(text));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  const size_t at = r.out.find(": ");
  return at == std::string::npos ? NAN : std::atof(r.out.c_str() + at + 2);
}

void write_validation_text(const TempDir& dir) {  // the corpus's last 10%: the validation characters
  const std::string corpus = read_file(dir / "corpus.txt");
  write_file(dir / "val.txt", corpus.substr(corpus.size() - corpus.size() / 10));
}
}  // namespace

TEST(Hardening3Guard, ADegradingRunKeepsItsBestAsideAndNeverSavesWorseThanKnowingNothing) {
  TempDir dir;
  write_corpus(dir);
  write_validation_text(dir);
  const std::string run = dir / "run";
  const Degraded d = degrading_run(dir, run);
  ASSERT_GT(d.best_step, 0) << "no run was refused as worse than knowing nothing with its best kept aside";
  const RunResult& r = d.result;
  const int best_step = d.best_step;
  const int last_step = number_after(r.err, run + "/ckpt.safetensors holds the last one saved (step ");
  ASSERT_GT(best_step, 0) << r.err;
  ASSERT_GT(last_step, best_step) << r.err;
  const Checkpoint best = load_checkpoint(run + "/best.safetensors"), last = load_checkpoint(run + "/ckpt.safetensors");
  EXPECT_EQ(best.resume.step, best_step);
  EXPECT_EQ(last.resume.step, last_step);
  // On the whole validation text (the guard sees one batch of it): the best is better than a uniform guess, and the
  // last saved no worse than knowing nothing (the ceiling is 1% above ln V on that batch; 5% on the whole text).
  // The best on one batch of 64 characters need not be the best on the whole text, so the two are not compared.
  const double uniform = std::log(double(best.tokenizer.size()));
  const double best_nats = score(dir, run + "/best.safetensors", dir / "val.txt");
  const double last_nats = score(dir, run + "/ckpt.safetensors", dir / "val.txt");
  EXPECT_LT(best_nats, uniform);
  EXPECT_LT(last_nats, 1.05 * uniform);
}

TEST(Hardening3Guard, TheBestAsideIsThisRunsAcrossAStopAResumeAndAnOverwrite) {
  // The reference: the same run uninterrupted. Stopped after its best and resumed, it must end the same, with the
  // same weights in best.safetensors (the resume is bit-identical), never the stop's checkpoint put aside over the best.
  TempDir dir;
  write_corpus(dir);
  const std::string whole = dir / "whole", parts = dir / "parts";
  const Degraded d = degrading_run(dir, whole);
  ASSERT_GT(d.best_step, 0) << "no run was refused as worse than knowing nothing with its best kept aside";
  const int best_step = d.best_step, diverged_at = number_after(d.result.err, "training diverged at step ");
  const int stop = best_step + 20;  // two saves after the best: the best is aside
  ASSERT_LT(stop, diverged_at) << d.result.err;
  RunResult r = run_in(dir, train_command(dir, parts, degrading(d.lr) + " --stop-at " + std::to_string(stop)));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_CONTAINS(r.out, "the best checkpoint (step " + std::to_string(best_step) + ") is kept in " + parts +
                             "/best.safetensors");
  r = run_in(dir, "./train --threads 1 --resume " + quote(parts));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "training diverged at step ");  // not always at the same step: the ceiling is 1% above
                                                          // max(start, ln V), and the resumed run starts elsewhere
  EXPECT_CONTAINS(r.err, parts + "/best.safetensors holds the best checkpoint (step " + std::to_string(best_step) + ")");
  const int refused_at = number_after(r.err, "training diverged at step ");
  ASSERT_GT(refused_at, stop) << r.err;
  // Resumed again from the last save before that step, saving only where the run above was refused (--ckpt-every 0
  // --stop-at): the same steps, bit for bit, so refused before this invocation saved anything, and the message
  // still names the best checkpoint it took over (it named only ckpt.safetensors, as "the last good"). Not "saving
  // only at the end": a run this chaotic may be back under the ceiling by its last step (it was, under OpenBLAS's
  // Cooperlake kernels on a Zen 4).
  r = run_in(dir, "./train --threads 1 --resume " + quote(parts) + " --ckpt-every 0 --stop-at " +
                      std::to_string(refused_at));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "nothing was saved; " + parts + "/best.safetensors holds the best checkpoint (step " +
                             std::to_string(best_step) + ")");
  const Checkpoint a = load_checkpoint(parts + "/best.safetensors"), b = load_checkpoint(whole + "/best.safetensors");
  EXPECT_EQ(a.resume.step, best_step);
  EXPECT_TRUE(a.resume.step == b.resume.step && a.resume.batch_rng == b.resume.batch_rng &&
              std::equal(a.model->params_memory().begin(), a.model->params_memory().end(),
                         b.model->params_memory().begin(), b.model->params_memory().end()) &&
              a.resume.optimizer.m == b.resume.optimizer.m && a.resume.optimizer.v == b.resume.optimizer.v)
      << "the resumed run's best.safetensors is not the uninterrupted run's";
  // A fresh run into the folder: refused while an earlier run's best is there, and with --overwrite it is gone
  // before the new run could be taken to have written it.
  fs::remove(parts + "/ckpt.safetensors");
  fs::remove(parts + "/metrics.csv");
  r = run_in(dir, train_command(dir, parts, "--steps 2 --eval-every 0"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "already holds an earlier run (best.safetensors)");
  r = run_in(dir, train_command(dir, parts, "--steps 2 --eval-every 0 --overwrite"));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(parts + "/best.safetensors"));
  EXPECT_CONTAINS(r.out, "removed " + parts + "/best.safetensors: it was the best checkpoint of the run this one replaces");
}
