// CRC-32C (Castagnoli): the checksum stored in every checkpoint, so a file changed or damaged after it was written
// (a flipped bit on disk, a bad copy, an edit) is refused instead of loading as a subtly different model.
//
// A CRC treats the bytes as one long polynomial over GF(2) and keeps the remainder of its division by a fixed
// polynomial of degree 32 (here 0x1EDC6F41, used bit-reversed as 0x82F63B78). Every burst of errors up to 32 bits
// long, and every odd number of flipped bits, changes the remainder; other damage goes unnoticed with probability
// 2^-32. It guards against accidents, not against someone who wants to forge a file: that needs a signature.
//
// CRC-32C rather than zlib's CRC-32 because it is the variant iSCSI, ext4, Btrfs and Parquet use, and x86 (SSE4.2)
// and ARMv8 compute it in hardware should this ever need to be faster. Standard check value:
//   crc32c("123456789") = 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

// Continues a running checksum: crc32c(b, crc32c(a)) == crc32c(a followed by b). Start from 0. Uses the CPU's
// CRC32 instruction where the build targets one (x86 SSE4.2, as -march=native does on any x86 since 2008), and
// crc32c_portable otherwise; both give the same numbers (tested).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// The same checksum from lookup tables, on any CPU: the definition the instruction is checked against.
uint32_t crc32c_portable(const void* data, size_t size, uint32_t crc = 0);
// Which of the two crc32c uses: "SSE4.2 crc32 instruction" or "tables (slicing by 8)".
const char* crc32c_method();

// "e3069283": eight lowercase hex digits, as stored in a checkpoint's metadata.
std::string crc32c_hex(uint32_t crc);
