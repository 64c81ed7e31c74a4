// Which OpenBLAS kernels run the matrix products. A DYNAMIC_ARCH OpenBLAS (every distribution's) picks a "core"
// when it loads, from the CPU's family and model; a release older than the CPU does not know the model and falls
// back to its SSE3 kernels. OpenBLAS 0.3.21 (Debian 12) runs Prescott kernels on an Emerald Rapids Xeon (family 6,
// model 207), a tiny-preset step 3.7× slower than with its SkylakeX kernels (docs/performance.md, "Kernel choice";
// fixed upstream in 0.3.25). The environment variable OPENBLAS_CORETYPE, read once when the library loads, names
// the core instead, so the programs set it and restart (base/runtime.h) when OpenBLAS chose a core older than the
// CPU's vector units.
#pragma once

#include <string>

// What cpuid says, with the vector units counted only when the operating system saves their registers (XGETBV).
struct CpuFeatures {
  std::string vendor;         // "GenuineIntel", "AuthenticAMD", … (empty off x86)
  int family = 0, model = 0;  // display family and model: Emerald Rapids is 6/207, Zen 4 25/…, Zen 5 26/…
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
};

CpuFeatures this_cpu();

// The core to set OPENBLAS_CORETYPE to, or "" to keep OpenBLAS's own choice. `chosen` is openblas_get_corename().
// The best core for the CPU: SkylakeX on any CPU with AVX-512 F, BW, VL and DQ (what its kernels use; AMD's Zen 4
// and Zen 5 have them, and the OpenBLAS releases that know Zen 4 give it these kernels too), else Haswell on an
// Intel CPU with AVX2 and FMA, Zen on an AMD one (why AVX-512 on AMD too: docs/performance.md, "Kernel choice and
// issue 28's figures on Zen 5"). It replaces `chosen` only when `chosen` is a core this function knows and uses
// older vector units; a value the user set (`user_set`) is always kept, and so is a core name it does not know (a
// newer OpenBLAS).
std::string better_blas_core(const CpuFeatures& cpu, const std::string& chosen, bool user_set);

// "Intel family 6 model 207", for messages.
std::string describe_cpu(const CpuFeatures& cpu);
