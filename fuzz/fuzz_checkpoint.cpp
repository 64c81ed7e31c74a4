// libFuzzer target (a): checkpoint files. Each input is parsed in memory by parse_safetensors and then loaded
// from a file by load_checkpoint; see entries.h for what counts as a bug.
//
// Random edits to a safetensors file mostly break its 8-byte header length, so half of the mutations are
// structure-aware: they mutate the JSON header alone and rewrite the length to match, keeping the data section.
#include <cstring>
#include <vector>

#include "entries.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzentry::checkpoint_entry(data, size);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  uint64_t header = 0;
  if (size >= 8)
    for (int i = 7; i >= 0; --i) header = (header << 8) | data[i];
  if (seed % 2 == 0 || size < 8 || header == 0 || header > size - 8 || max_size <= 8) return LLVMFuzzerMutate(data, size, max_size);

  // Mutate [8, 8 + header) as its own buffer, leaving room so the data section still fits after it.
  const std::vector<uint8_t> tail(data + 8 + header, data + size);
  std::vector<uint8_t> text(data + 8, data + 8 + header);
  const size_t room = max_size - 8;
  text.resize(room);
  size_t new_header = LLVMFuzzerMutate(text.data(), header, room);
  const size_t kept_tail = std::min(tail.size(), room - new_header);
  for (int i = 0; i < 8; ++i) data[i] = uint8_t((uint64_t)new_header >> (8 * i));
  if (new_header > 0) std::memcpy(data + 8, text.data(), new_header);
  if (kept_tail > 0) std::memcpy(data + 8 + new_header, tail.data(), kept_tail);
  return 8 + new_header + kept_tail;
}
