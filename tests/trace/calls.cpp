// Records which functions a program runs, for Tour.TheCorePathIsWhatTrainRuns (tests/test_tour.cpp). The files
// compiled with -finstrument-functions call __cyg_profile_func_enter on entering every function, inlined ones
// included; this file (compiled without it) keeps each function's address once, and at exit writes them to the
// file $PLAINGPT_TRACE as offsets from the program's load address, one hexadecimal number a line, which
// `addr2line -f -e <program>` turns into functions and source files. Without $PLAINGPT_TRACE it writes nothing.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kSlots = size_t(1) << 16;  // far more than the functions of a program this size
std::atomic<uintptr_t> seen[kSlots];         // open addressing; 0 = empty. Every thread may insert at once.

__attribute__((no_instrument_function)) void insert(uintptr_t fn) {
  for (size_t i = (fn >> 4) * 0x9E3779B97F4A7C15ull % kSlots;; i = (i + 1) % kSlots) {
    uintptr_t here = seen[i].load(std::memory_order_relaxed);
    if (here == fn) return;
    if (here == 0) {
      if (seen[i].compare_exchange_strong(here, fn)) return;
      if (here == fn) return;
    }
  }
}

__attribute__((no_instrument_function)) void write_trace() {
  const char* path = std::getenv("PLAINGPT_TRACE");
  if (!path) return;
  std::FILE* out = std::fopen(path, "w");
  if (!out) return;
  for (size_t i = 0; i < kSlots; i++) {
    const uintptr_t fn = seen[i].load();
    Dl_info info;
    if (fn && dladdr(reinterpret_cast<void*>(fn), &info) && info.dli_fbase)
      std::fprintf(out, "%zx\n", (size_t)(fn - reinterpret_cast<uintptr_t>(info.dli_fbase)));
  }
  std::fclose(out);
}

__attribute__((constructor, no_instrument_function)) void start() { std::atexit(write_trace); }

}  // namespace

extern "C" {
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void* fn, void*) {
  insert(reinterpret_cast<uintptr_t>(fn));
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void*, void*) {}
}
