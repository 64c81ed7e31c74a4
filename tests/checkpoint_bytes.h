// A checkpoint file as bytes, for tests that damage or edit one: its header length, its header as JSON, the same
// file with another header, and the message a load fails with.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/crc32c.h"
#include "io/safetensors.h"

namespace ckptbytes {

inline uint64_t header_length(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)bytes[i];
  return n;
}

inline nlohmann::ordered_json header_of(const std::string& bytes) {
  return nlohmann::ordered_json::parse(bytes.substr(8, header_length(bytes)));
}

// `bytes` with its header replaced by `header` (re-padded to 8 bytes), the data section unchanged. The checksums
// stored in `header` are kept as they are: a tampered file does not recompute them.
inline std::string with_header(const std::string& bytes, const nlohmann::ordered_json& header) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; i++) out[i] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  return out + text + bytes.substr(8 + header_length(bytes));
}

// `bytes` with the header's own checksum brought up to date (when its header begins with one): what a careful
// forger, or another writer, produces; for tests about what lies beyond that checksum. Computed here from its
// definition (the CRC-32C of the first 8 + N bytes but the eight digits that follow header_checksum_field()).
inline std::string resealed(std::string bytes) {
  const std::string field = header_checksum_field();
  if (bytes.compare(8, field.size(), field) != 0) return bytes;
  const size_t at = 8 + field.size(), end = 8 + header_length(bytes);
  const uint32_t crc = crc32c(bytes.data() + at + 8, end - at - 8, crc32c(bytes.data(), at));
  return bytes.replace(at, 8, crc32c_hex(crc));
}

// with_header, then resealed; a format-2 file's canonical checksum is brought up to date instead.
inline std::string with_header_and_its_checksum(const std::string& bytes, nlohmann::ordered_json header) {
  if (header["__metadata__"].contains(kCanonicalHeaderChecksumKey)) {
    const std::string canonical = header_canonical_text(header.dump());
    header["__metadata__"][kCanonicalHeaderChecksumKey] = crc32c_hex(crc32c(canonical.data(), canonical.size()));
  }
  return resealed(with_header(bytes, header));
}

// The message load_checkpoint(path) fails with, or "" when it loads.
inline std::string load_error(const std::string& path) {
  try {
    load_checkpoint(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ckptbytes
