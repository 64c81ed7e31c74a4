// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), readable by Python's
// `safetensors` package and by a few lines of numpy:
//   8 bytes   little-endian uint64 N, the header length
//   N bytes   UTF-8 JSON header, padded with spaces so the data section starts at an 8-byte-aligned offset:
//             {"__metadata__": {"key": "value", ...},
//              "name": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
//   the rest  the data section; each tensor's bytes lie at [begin, end) relative to its start
// Only F32 (little-endian float32) tensors are written or accepted.
//
// Integrity: the writer stores two CRC-32Cs in "__metadata__", as eight lower-case hex digits each. The header's
// own comes first of all, at a fixed place: the header begins with {"__metadata__":{"plaingpt.header_bytes_crc32c":
// "XXXXXXXX", and XXXXXXXX is the CRC-32C of the file's first 8 + N bytes (the length, the whole header with its
// padding, the data's checksum included) without those eight digits. It is checked on the bytes, before the JSON is
// parsed, so any flipped bit of the length or the header is reported as header damage, never as bad JSON or as
// damaged data. kDataChecksumKey holds the CRC-32C of the whole data section. (Files written before this, format 2
// of the checkpoints, carry kCanonicalHeaderChecksumKey instead: the CRC-32C of header_canonical_text, the JSON
// without the checksum keys, keys sorted, no spaces; it is still verified.) The reader recomputes each one present
// and refuses a file that no longer matches (it was changed or damaged after it was written); SafetensorsContents
// says which were present. A CRC detects damage, not a deliberate edit: whoever edits a file can recompute it. The
// keys are the file's own business: the reader removes them, so metadata written is exactly metadata read. Keys are
// parsed strictly: a key given twice anywhere in the header, or a tensor entry with a key other than dtype, shape
// and data_offsets, is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

// "__metadata__" key of the data section's CRC-32C (crc32c.h), e.g. "e3069283".
constexpr const char* kDataChecksumKey = "plaingpt.data_crc32c";
// "__metadata__" key of the header's CRC-32C, the first key of the header (see above).
constexpr const char* kHeaderChecksumKey = "plaingpt.header_bytes_crc32c";
// The header's first bytes when it carries kHeaderChecksumKey; its eight hex digits follow, then '"'.
std::string header_checksum_field();
// The CRC-32C that kHeaderChecksumKey holds, of a file whose header (`header_size` bytes after the 8-byte length)
// begins with header_checksum_field(): the first 8 + header_size bytes without the eight digits.
uint32_t header_bytes_crc32c(const uint8_t* file, uint64_t header_size);
// Format 2's header checksum: of header_canonical_text.
constexpr const char* kCanonicalHeaderChecksumKey = "plaingpt.header_crc32c";

// The header as format 2's checksum sees it: `header_json` parsed, the checksum keys taken out of "__metadata__",
// then written back with keys sorted by their UTF-8 bytes, no whitespace, non-ASCII characters as UTF-8 — what
// Python's json.dumps(h, sort_keys=True, separators=(",", ":"), ensure_ascii=False) writes.
// Throws std::runtime_error if `header_json` is not JSON.
std::string header_canonical_text(const std::string& header_json);

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
  bool data_verified = false;              // the file carried kDataChecksumKey, and it matched
  bool header_verified = false;            // the file carried kHeaderChecksumKey, and it matched
  bool canonical_header_verified = false;  // the file carried kCanonicalHeaderChecksumKey, and it matched
};

// Parses a whole safetensors file held in memory; `source` (usually the file name) prefixes error messages.
// Never reads out of bounds and never allocates more than the input justifies: every problem throws
// std::runtime_error naming the source and, where it applies, the tensor and the byte offset.
// The header is read as a stream of JSON events, never as a whole tree: in time linear in its size (a 1024-layer
// checkpoint's 36,876 tensors in well under a second) and in memory a small multiple of it (what each valid tensor
// entry becomes, and one entry's tree at a time; the whole tree cost 16 times the header). `header_events`, when
// given, receives the number of JSON events (values, keys, ends of objects and arrays) read, which is at most the
// header's length in bytes. `max_tensors`, when not 0, refuses a header that lists more tensors, as soon as the
// parse meets one more.
SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& source);
SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& source,
                                      size_t* header_events, size_t max_tensors = 0);

// Reads the file at `path` (which must be a regular file; a FIFO or a device is refused, never read), then
// parse_safetensors. The 8-byte header length is checked against the file's size before the rest is read. Throws
// std::runtime_error if it cannot be read.
SafetensorsContents read_safetensors(const std::string& path, size_t max_tensors = 0);
