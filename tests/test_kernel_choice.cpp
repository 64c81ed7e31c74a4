// The choice of OpenBLAS kernels at start-up (base/blas_kernel.h, base/runtime.h): the pure rule over CPUs that
// OpenBLAS 0.3.21 knows and does not know, cpuid against /proc/cpuinfo, and ./train run as a child process (a core
// the user set is kept; the program restarts at most once; the restarted process checks that the core took).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "base/blas.h"
#include "base/blas_kernel.h"
#include "program_util.h"

using progutil::quote;
using progutil::RunResult;

namespace {

CpuFeatures intel(int model, bool avx2, bool avx512) {
  CpuFeatures cpu;
  cpu.vendor = "GenuineIntel";
  cpu.family = 6;
  cpu.model = model;
  cpu.avx2 = cpu.fma = avx2;
  cpu.avx512f = cpu.avx512bw = cpu.avx512vl = cpu.avx512dq = avx512;
  return cpu;
}

CpuFeatures amd(int family, int model, bool avx512) {
  CpuFeatures cpu;
  cpu.vendor = "AuthenticAMD";
  cpu.family = family;
  cpu.model = model;
  cpu.avx2 = cpu.fma = true;
  cpu.avx512f = cpu.avx512bw = cpu.avx512vl = cpu.avx512dq = avx512;
  return cpu;
}

TEST(KernelChoice, TheRuleOverKnownAndUnknownCpus) {
  CpuFeatures knights_landing = intel(87, true, true);  // AVX-512F without BW, VL and DQ
  knights_landing.avx512bw = knights_landing.avx512vl = knights_landing.avx512dq = false;
  const CpuFeatures emerald_rapids = intel(207, true, true), raptor_lake = intel(183, true, false);
  const struct {
    const char* name;
    CpuFeatures cpu;
    const char* chosen;
    bool user_set;
    const char* expected;  // "" = keep OpenBLAS's choice
  } rows[] = {
      {"Emerald Rapids, OpenBLAS 0.3.21 falls back", emerald_rapids, "Prescott", false, "SkylakeX"},
      {"Raptor Lake (AVX2, no AVX-512) falls back", raptor_lake, "Prescott", false, "Haswell"},
      {"Zen 3 (AVX2, no AVX-512) known as Zen", amd(25, 33, false), "Zen", false, ""},
      {"Zen 5 as Cooperlake (OpenBLAS 0.3.21 on family 26)", amd(26, 2, true), "Cooperlake", false, ""},
      {"Zen 4's AVX-512 run as Zen", amd(25, 97, true), "Zen", false, "SkylakeX"},
      {"an AMD CPU with AVX-512 OpenBLAS does not know", amd(26, 68, true), "Prescott", false, "SkylakeX"},
      {"an AMD CPU with AVX2 OpenBLAS does not know", amd(26, 68, false), "Prescott", false, "Zen"},
      {"a known Haswell", intel(60, true, false), "Haswell", false, ""},
      {"a core the user set", emerald_rapids, "Prescott", true, ""},
      {"the user set a newer core", raptor_lake, "Haswell", true, ""},
      {"Emerald Rapids as Cooperlake (a newer OpenBLAS)", emerald_rapids, "Cooperlake", false, ""},
      {"AVX-512 run as Haswell", emerald_rapids, "Haswell", false, "SkylakeX"},
      {"Nehalem-era core on Raptor Lake, any case", raptor_lake, "nehalem", false, "Haswell"},
      {"AVX-512F alone counts as AVX2", knights_landing, "Prescott", false, "Haswell"},
      {"Sandy Bridge (AVX, no AVX2)", intel(42, false, false), "Prescott", false, ""},
      {"a core name this rule does not know", emerald_rapids, "Zen5", false, ""},
      {"not x86", CpuFeatures{}, "ARMV8", false, ""},
  };
  for (const auto& row : rows)
    EXPECT_EQ(better_blas_core(row.cpu, row.chosen, row.user_set), row.expected) << row.name;
}

TEST(KernelChoice, DescribesTheCpuByFamilyAndModel) {
  EXPECT_EQ(describe_cpu(intel(207, true, true)), "Intel family 6 model 207");
  EXPECT_EQ(describe_cpu(amd(25, 97, true)), "AMD family 25 model 97");
}

// cpuid read by this_cpu() against the kernel's own reading of it (Linux on x86 only). Linux drops a flag whose
// registers it does not save, as this_cpu() does with XGETBV.
TEST(KernelChoice, CpuidAgreesWithProcCpuinfo) {
#if defined(__linux__) && defined(__x86_64__)
  std::ifstream in("/proc/cpuinfo");
  std::string line, vendor, flags;
  int family = -1, model = -1;
  while (std::getline(in, line) && !line.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id") vendor = value;
    if (key == "cpu family") family = std::stoi(value);
    if (key == "model") model = std::stoi(value);
    if (key == "flags") flags = " " + value + " ";
  }
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  auto has = [&](const char* flag) { return flags.find(" " + std::string(flag) + " ") != std::string::npos; };
  const CpuFeatures cpu = this_cpu();
  EXPECT_EQ(cpu.vendor, vendor);
  EXPECT_EQ(cpu.family, family);
  EXPECT_EQ(cpu.model, model);
  EXPECT_EQ(cpu.avx2, has("avx2"));
  EXPECT_EQ(cpu.fma, has("fma"));
  EXPECT_EQ(cpu.avx512f, has("avx512f"));
  EXPECT_EQ(cpu.avx512bw, has("avx512bw"));
  EXPECT_EQ(cpu.avx512vl, has("avx512vl"));
  EXPECT_EQ(cpu.avx512dq, has("avx512dq"));
#else
  GTEST_SKIP() << "Linux on x86-64 only";
#endif
}

// ./train as a child process, with the environment this test chooses: `env` words go first (`-u NAME` removes a
// variable, NAME=value sets one). The test's own OPENBLAS_CORETYPE, OMP_WAIT_POLICY and restart marks are removed
// first, so the tests mean the same whether or not the machine pins a core.
class KernelChoiceProgram : public ::testing::Test {
 protected:
  void SetUp() override {
#if !defined(__linux__) || !defined(__x86_64__) || !defined(PLAINGPT_OPENBLAS)
    GTEST_SKIP() << "OpenBLAS on Linux x86-64 only";
#else
    if (!std::strstr(openblas_get_config(), "DYNAMIC_ARCH")) GTEST_SKIP() << "this OpenBLAS has one core only";
#endif
    ASSERT_TRUE(progutil::file_exists("./train")) << "run the tests from the repository root after `make programs`";
    corpus_ = dir_ / "corpus.txt";
    progutil::write_file(corpus_, progutil::generated_text(4000));
  }

  RunResult train(const std::string& env, const std::string& out) {
    // timeout: a program that restarted itself over and over would never finish.
    return progutil::run_command(
        "env -u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY -u PLAINGPT_RESTARTED -u PLAINGPT_OPENBLAS_CHOSE " + env +
            " timeout 120 ./train " + progutil::tiny_flags() + " --data " + quote(corpus_) + " --out " +
            quote(dir_ / out) + " --steps 1",
        dir_.path());
  }

  // The kernels named in the header's "blas:" line.
  static std::string kernels(const RunResult& r) {
    std::smatch m;
    if (!std::regex_search(r.out, m, std::regex("blas: OpenBLAS [^ ]+ with its ([A-Za-z0-9]+) kernels"))) return "";
    return m[1];
  }

  // How many lines of standard error start with "blas:".
  static int blas_lines(const std::string& err) {
    std::istringstream in(err);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.rfind("blas:", 0) == 0;
    return n;
  }

  progutil::TempDir dir_;
  std::string corpus_;
};

TEST_F(KernelChoiceProgram, ACoreTheUserSetIsKept) {
  // Prescott: the oldest x86-64 kernels, which run on every x86-64 CPU, and older than any this rule would pick.
  RunResult r = train("OPENBLAS_CORETYPE=Prescott", "a");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_CONTAINS(r.out, "with its Prescott kernels (OPENBLAS_CORETYPE=Prescott)");
  EXPECT_EQ(blas_lines(r.err), 0) << r.err;
}

// The marked (restarted) process never restarts: with OMP_WAIT_POLICY unset it runs with libgomp's default. Unmarked,
// the program restarts once with OMP_WAIT_POLICY=passive and, where OpenBLAS chose a core older than the CPU's, with
// the rule's core; the restarted process says so in one line and the header names the core that runs.
TEST_F(KernelChoiceProgram, TheProgramRestartsAtMostOnce) {
  RunResult marked = train("PLAINGPT_RESTARTED=1", "marked");
  ASSERT_TRUE(marked.exited && marked.exit_code == 0) << marked.describe();
  EXPECT_CONTAINS(marked.out, "(idle threads wait: spin (libgomp default))");
  const std::string own = kernels(marked);  // what OpenBLAS chose alone
  ASSERT_FALSE(own.empty()) << marked.out;
  EXPECT_EQ(blas_lines(marked.err), 0) << marked.err;

  RunResult r = train("", "unmarked");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_CONTAINS(r.out, "(idle threads wait: passive)");
  const std::string better = better_blas_core(this_cpu(), own, false);
  if (better.empty()) {
    EXPECT_EQ(kernels(r), own);
    EXPECT_EQ(blas_lines(r.err), 0) << r.err;
  } else {
    EXPECT_EQ(kernels(r), better) << r.out;
    EXPECT_CONTAINS(r.out, "(chosen for this CPU; OpenBLAS alone chose " + own);
    EXPECT_EQ(blas_lines(r.err), 1) << r.err;
    EXPECT_CONTAINS(r.err, "chose its " + own + " kernels; using its " + better + " kernels");
    EXPECT_CONTAINS(r.err, describe_cpu(this_cpu()));
  }
}

// A restarted process whose core did not take says so: OpenBLAS does not know the name "NoSuchCore" and runs
// another core.
TEST_F(KernelChoiceProgram, ACoreThatDidNotTakeIsReported) {
  RunResult r = train("PLAINGPT_RESTARTED=1 PLAINGPT_OPENBLAS_CHOSE=Prescott OPENBLAS_CORETYPE=NoSuchCore", "c");
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_EQ(blas_lines(r.err), 1) << r.err;
  EXPECT_CONTAINS(r.err, "asked for NoSuchCore instead, it runs " + kernels(r));
}

}  // namespace
