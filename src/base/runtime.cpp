#include "base/runtime.h"

#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/blas.h"
#include "base/blas_kernel.h"

namespace {
const char* const kRestarted = "PLAINGPT_RESTARTED";
// Set with OPENBLAS_CORETYPE by the first process: the core OpenBLAS chose on its own.
const char* const kOpenblasChose = "PLAINGPT_OPENBLAS_CHOSE";
std::string openblas_chose;  // in the restarted process, when it set OPENBLAS_CORETYPE; else empty

#ifdef PLAINGPT_OPENBLAS
// "OpenBLAS 0.3.21": the first two words of its build configuration.
std::string openblas_version() {
  const std::string config = openblas_get_config();
  const size_t space = config.find(' ');
  return config.substr(0, space == std::string::npos ? space : config.find(' ', space + 1));
}

// Only a DYNAMIC_ARCH build reads OPENBLAS_CORETYPE; one built for a single CPU runs the kernels it was built with.
bool reads_coretype() { return std::strstr(openblas_get_config(), "DYNAMIC_ARCH") != nullptr; }

// The restarted process's line on standard error: what OpenBLAS chose, what runs, how to choose.
void report_kernel() {
  const char* asked = std::getenv("OPENBLAS_CORETYPE");
  const std::string runs = openblas_get_corename();
  const std::string cpu = describe_cpu(this_cpu());
  if (asked && strcasecmp(asked, runs.c_str()) == 0)
    std::fprintf(stderr,
                 "blas: %s does not know this CPU (%s) and chose its %s kernels; using its %s kernels, which the "
                 "CPU's vector units run (to choose: OPENBLAS_CORETYPE=%s, or =%s for OpenBLAS's own)\n",
                 openblas_version().c_str(), cpu.c_str(), openblas_chose.c_str(), runs.c_str(), runs.c_str(),
                 openblas_chose.c_str());
  else
    std::fprintf(stderr,
                 "blas: %s chose its %s kernels on this CPU (%s); asked for %s instead, it runs %s (set "
                 "OPENBLAS_CORETYPE to choose)\n",
                 openblas_version().c_str(), openblas_chose.c_str(), cpu.c_str(), asked ? asked : "?",
                 runs.c_str());
}
#endif
}  // namespace

void choose_runtime(char** argv) {
#ifdef __linux__
  if (std::getenv(kRestarted)) {
    unsetenv(kRestarted);
    if (const char* chose = std::getenv(kOpenblasChose)) {
      openblas_chose = chose;
      unsetenv(kOpenblasChose);
#ifdef PLAINGPT_OPENBLAS
      report_kernel();
#endif
    }
    return;
  }
  std::vector<const char*> set;  // what this process set, to undo if the restart fails
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    set.push_back("OMP_WAIT_POLICY");
  }
#ifdef PLAINGPT_OPENBLAS
  if (reads_coretype()) {
    const std::string chosen = openblas_get_corename();
    const std::string core = better_blas_core(this_cpu(), chosen, std::getenv("OPENBLAS_CORETYPE") != nullptr);
    if (!core.empty()) {
      setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      setenv(kOpenblasChose, chosen.c_str(), 1);
      set.push_back("OPENBLAS_CORETYPE");
      set.push_back(kOpenblasChose);
    }
  }
#endif
  if (set.empty()) return;
  setenv(kRestarted, "1", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run on as we are
  unsetenv(kRestarted);
  for (const char* name : set) unsetenv(name);
#else
  (void)argv;
#endif
}

std::string blas_core() {
#ifdef PLAINGPT_OPENBLAS
  return openblas_get_corename();
#else
  return "";
#endif
}

std::string openblas_own_choice() { return openblas_chose; }

std::string blas_kernel() {
#if defined(PLAINGPT_OPENBLAS)
  const std::string runs = openblas_get_corename();
  std::string line = openblas_version() + " with its " + runs + " kernels";
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  if (!openblas_chose.empty() && coretype && strcasecmp(coretype, runs.c_str()) == 0)
    line += " (chosen for this CPU; OpenBLAS alone chose " + openblas_chose + "; OPENBLAS_CORETYPE overrides)";
  else if (!openblas_chose.empty())
    line += " (asked for " + std::string(coretype ? coretype : "?") + ", which did not take; OpenBLAS alone chose " +
            openblas_chose + ")";
  else if (coretype)
    line += " (OPENBLAS_CORETYPE=" + std::string(coretype) + ")";
  return line;
#elif defined(PLAINGPT_ACCELERATE)
  return "Accelerate";
#else
  return "the BLAS the build chose (not OpenBLAS: its kernels are its own)";
#endif
}
