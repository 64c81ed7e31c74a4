// CRC-32C: table-driven "slicing by 8" (Intel's method, as in zlib and the Linux kernel), and the CPU instruction.
//
// The one-table version processes a byte per step: crc = table[(crc ^ byte) & 0xff] ^ (crc >> 8), where
// table[b] is the remainder of the byte b followed by 32 zero bits. Slicing by 8 precomputes table[k][b], the
// remainder of byte b followed by 8·k more zero bytes, so eight bytes are folded in with eight independent lookups
// instead of a chain of eight dependent steps: about 1–2 GB/s instead of ~400 MB/s on one core.
#include "io/crc32c.h"

#include <cstdio>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // 0x1EDC6F41 with its bits reversed (the CRC runs LSB first)

struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t b = 0; b < 256; b++) {  // table[0]: one byte, bit by bit (the long division itself)
      uint32_t crc = b;
      for (int bit = 0; bit < 8; bit++) crc = (crc >> 1) ^ (kPolynomial & (0u - (crc & 1u)));
      t[0][b] = crc;
    }
    for (int k = 1; k < 8; k++)  // table[k][b]: table[k−1][b] pushed through one more zero byte
      for (uint32_t b = 0; b < 256; b++) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
};

const Tables& tables() {
  static const Tables instance;  // built once, thread-safely (C++11 static initialisation)
  return instance;
}

}  // namespace

uint32_t crc32c_portable(const void* data, size_t size, uint32_t crc) {
  const uint32_t(&t)[8][256] = tables().t;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  crc = ~crc;  // the standard pre- and post-inversion, so leading zero bytes still change the checksum
  for (; size >= 8; p += 8, size -= 8) {
    // The first four bytes are xored into the running remainder (little-endian, as the CRC is bit-reversed);
    // the next four have no remainder to meet yet. Assembled byte by byte: correct on any host, any alignment.
    const uint32_t lo = crc ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
  }
  for (; size > 0; p++, size--) crc = t[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// x86's crc32 instruction (SSE4.2) computes exactly this CRC, 8 bytes per instruction: several GB/s.
uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
#if defined(__SSE4_2__)
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  for (; size >= 8; p += 8, size -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // x86 is little-endian, as the CRC's byte order needs
    c = _mm_crc32_u64(c, word);
  }
  for (; size > 0; p++, size--) c = _mm_crc32_u8(uint32_t(c), *p);
  return ~uint32_t(c);
#else
  return crc32c_portable(data, size, crc);
#endif
}

const char* crc32c_method() {
#if defined(__SSE4_2__)
  return "SSE4.2 crc32 instruction";
#else
  return "tables (slicing by 8)";
#endif
}

std::string crc32c_hex(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}
