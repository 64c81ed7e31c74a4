#include "base/blas_kernel.h"

#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

CpuFeatures this_cpu() {
  CpuFeatures cpu;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return cpu;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  for (int i = 0; i < 4; i++) {  // the vendor string is spelled across ebx, edx, ecx
    vendor[i] = (char)(b >> (8 * i));
    vendor[4 + i] = (char)(d >> (8 * i));
    vendor[8 + i] = (char)(c >> (8 * i));
  }
  cpu.vendor = vendor;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return cpu;
  // Display family and model: the extended fields count only for the families that use them.
  const int base_family = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
  cpu.family = base_family == 0xf ? base_family + (int)((a >> 20) & 0xff) : base_family;
  cpu.model = base_family == 0x6 || base_family == 0xf ? base_model + (int)(((a >> 16) & 0xf) << 4) : base_model;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx || max_leaf < 7) return cpu;
  // XCR0 says which register files the operating system saves on a context switch: the YMM halves (bits 1-2), and
  // for AVX-512 the mask and ZMM registers (bits 5-7). A unit whose registers are not saved cannot be used.
  unsigned xcr0_low, xcr0_high;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const bool ymm = (xcr0_low & 0x6) == 0x6, zmm = (xcr0_low & 0xe0) == 0xe0;
  __cpuid_count(7, 0, a, b, c, d);
  cpu.fma = ymm && fma;
  cpu.avx2 = ymm && (b & (1u << 5));
  cpu.avx512f = ymm && zmm && (b & (1u << 16));
  cpu.avx512dq = ymm && zmm && (b & (1u << 17));
  cpu.avx512bw = ymm && zmm && (b & (1u << 30));
  cpu.avx512vl = ymm && zmm && (b & (1u << 31));
#endif
  return cpu;
}

// The vector units a core's kernels use, oldest first. Names are OpenBLAS 0.3.21's for x86-64 (driver/others/
// dynamic.c); -1 for any other name.
static int vector_level(const std::string& core) {
  static const struct { const char* name; int level; } cores[] = {
      {"Katmai", 0},      {"Coppermine", 0}, {"Northwood", 0},   {"Prescott", 0},    {"Banias", 0},
      {"Atom", 0},        {"Core2", 0},      {"Penryn", 0},      {"Dunnington", 0},  {"Nehalem", 0},
      {"Opteron", 0},     {"Barcelona", 0},  {"Bobcat", 0},      // SSE2 to SSE4.2
      {"Sandybridge", 1}, {"Bulldozer", 1},  {"Piledriver", 1},  {"Steamroller", 1}, {"Excavator", 1},  // AVX
      {"Haswell", 2},     {"Zen", 2},        // AVX2 and FMA
      {"SkylakeX", 3},    {"Cooperlake", 3}, {"SapphireRapids", 3},  // AVX-512
  };
  for (const auto& c : cores)
    if (strcasecmp(core.c_str(), c.name) == 0) return c.level;
  return -1;
}

std::string better_blas_core(const CpuFeatures& cpu, const std::string& chosen, bool user_set) {
  if (user_set) return "";
  std::string best;
  const bool avx2 = cpu.avx2 && cpu.fma, intel = cpu.vendor == "GenuineIntel", amd = cpu.vendor == "AuthenticAMD";
  if ((intel || amd) && avx2 && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq) best = "SkylakeX";
  else if (intel && avx2) best = "Haswell";
  else if (amd && avx2) best = "Zen";
  const int have = vector_level(chosen);
  if (best.empty() || have < 0 || have >= vector_level(best)) return "";
  return best;
}

std::string describe_cpu(const CpuFeatures& cpu) {
  const std::string maker = cpu.vendor == "GenuineIntel"   ? "Intel"
                            : cpu.vendor == "AuthenticAMD" ? "AMD"
                            : cpu.vendor.empty()           ? "a CPU"
                                                           : cpu.vendor;
  return maker + " family " + std::to_string(cpu.family) + " model " + std::to_string(cpu.model);
}
