// How much memory this process may use: the least of the machine's physical memory, what is left under the
// process's address-space limit (ulimit -v, RLIMIT_AS: the limit minus what is already mapped) and the memory limit
// of the container it runs in (cgroup v2 memory.max, or v1 memory.limit_in_bytes). The up-front estimates (a model
// to train, a forward to run, a header to parse) are compared with it, so that a run that cannot fit is refused
// before it starts, naming the limit, rather than ending in std::bad_alloc.
#pragma once
#include <cstdint>
#include <string>

struct MemoryLimit {
  uint64_t bytes = 0;  // 0: the system says nothing (no check)
  std::string what;    // "this machine's 25769803776 bytes of memory", "the 900000000 bytes left under …"
};
MemoryLimit usable_memory();
