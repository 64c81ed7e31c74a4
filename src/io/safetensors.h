// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), readable by Python's
// `safetensors` package and by a few lines of numpy:
//   8 bytes   little-endian uint64 N, the header length
//   N bytes   UTF-8 JSON header, padded with spaces so the data section starts at an 8-byte-aligned offset:
//             {"__metadata__": {"key": "value", ...},
//              "name": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
//   the rest  the data section; each tensor's bytes lie at [begin, end) relative to its start
// Only F32 (little-endian float32) tensors are written or accepted.
//
// Integrity: the writer stores a CRC-32C of the whole data section in "__metadata__" under kDataChecksumKey, as
// eight hex digits; the reader recomputes it and refuses a file whose data no longer matches (it was changed or
// damaged after it was written). A file without the key (written by another tool) is read without the check.
// The key is the file's own business: the reader removes it, so metadata written is exactly metadata read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

// "__metadata__" key of the data section's CRC-32C (crc32c.h), e.g. "e3069283".
constexpr const char* kDataChecksumKey = "plaingpt.data_crc32c";

// A tensor to write; `data` points at prod(shape) floats (one float for a 0-d tensor with shape {}).
struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  const float* data;
};

// Writes the tensors, in the given order, with `metadata` as "__metadata__". The file is replaced atomically
// (see atomic_file.h). Throws std::runtime_error on invalid input or any I/O failure.
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata);

struct LoadedTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct SafetensorsContents {
  std::map<std::string, std::string> metadata;
  std::map<std::string, LoadedTensor> tensors;
};

// Parses a whole safetensors file held in memory; `source` (usually the file name) prefixes error messages.
// Never reads out of bounds and never allocates more than the input justifies: every problem throws
// std::runtime_error naming the source and, where it applies, the tensor and the byte offset.
SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& source);

// Reads the file at `path`, then parse_safetensors. Throws std::runtime_error if it cannot be read.
SafetensorsContents read_safetensors(const std::string& path);
