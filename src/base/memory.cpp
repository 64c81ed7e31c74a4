#include "base/memory.h"

#include <fstream>
#include <string>

#include <sys/resource.h>
#include <unistd.h>

#include "base/read_file.h"

namespace {

// A cgroup's limit in bytes from its file ("max", or a number); 0 where there is none or it cannot be read.
uint64_t cgroup_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    const unsigned long long bytes = std::stoull(text);
    return bytes >= (1ULL << 60) ? 0 : bytes;  // cgroup v1 says "no limit" with a huge number
  } catch (const std::exception&) {
    return 0;
  }
}

// Bytes of address space this process has mapped now (Linux: /proc/self/statm's first field); 0 if unknown.
uint64_t mapped_bytes() {
  std::ifstream in("/proc/self/statm");
  unsigned long long pages = 0;
  if (!(in >> pages)) return 0;
  return pages * uint64_t(::sysconf(_SC_PAGESIZE));
}

}  // namespace

MemoryLimit usable_memory() {
  MemoryLimit limit;
  auto consider = [&limit](uint64_t bytes, const std::string& what) {
    if (bytes == 0 || (limit.bytes != 0 && bytes >= limit.bytes)) return;
    limit.bytes = bytes;
    limit.what = what;
  };
  const uint64_t physical = physical_memory_bytes();
  consider(physical, "this machine's " + std::to_string(physical) + " bytes of memory");
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const uint64_t cap = uint64_t(rl.rlim_cur);
    const uint64_t used = mapped_bytes();
    const uint64_t left = cap > used ? cap - used : 1;
    consider(left, "the " + std::to_string(left) + " bytes left under this process's address-space limit of " +
                       std::to_string(cap) + " (ulimit -v)");
  }
  for (const char* file : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const uint64_t cap = cgroup_limit(file);
    consider(cap, "the container's memory limit of " + std::to_string(cap) + " bytes (" + file + ")");
  }
  return limit;
}
