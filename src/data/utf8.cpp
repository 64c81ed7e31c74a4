#include "data/utf8.h"

#include <cstdio>
#include <stdexcept>

bool is_valid_code_point(char32_t c) {
  return c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
}

static std::string format_byte(unsigned char byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "0x%02X", byte);
  return buffer;
}

static std::string format_u_plus(char32_t c) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "U+%04X", static_cast<unsigned>(c));
  return buffer;
}

static bool is_continuation_byte(unsigned char byte) { return (byte & 0xC0) == 0x80; }

[[noreturn]] static void throw_decode_error(const std::string& source, size_t offset, const std::string& what) {
  throw std::runtime_error(source + ": invalid UTF-8 at byte offset " + std::to_string(offset) + ": " + what);
}

std::u32string utf8_decode(std::string_view bytes, const std::string& source) {
  std::u32string code_points;
  code_points.reserve(bytes.size());
  size_t start = 0;  // first byte of the sequence being decoded; every error is reported at this offset
  while (start < bytes.size()) {
    const unsigned char lead = bytes[start];
    if (lead < 0x80) {  // ASCII: one byte, the common case
      code_points.push_back(lead);
      start += 1;
      continue;
    }
    // The lead byte's high bits give the sequence length; its low bits are the top bits of the code point.
    // `smallest` is the first code point that needs this many bytes.
    int length;
    char32_t code_point, smallest;
    if ((lead & 0xE0) == 0xC0) { length = 2; code_point = lead & 0x1F; smallest = 0x80; }
    else if ((lead & 0xF0) == 0xE0) { length = 3; code_point = lead & 0x0F; smallest = 0x800; }
    else if (lead >= 0xF0 && lead <= 0xF4) { length = 4; code_point = lead & 0x07; smallest = 0x10000; }
    else if (is_continuation_byte(lead))
      throw_decode_error(source, start, "continuation byte " + format_byte(lead) + " without a lead byte before it");
    else  // F5..FF: F5..F7 could only start code points above U+10FFFF, F8..FF were never part of UTF-8
      throw_decode_error(source, start, "byte " + format_byte(lead) + " can never occur in UTF-8");

    // Each following byte must look like 10xxxxxx and contributes 6 more bits.
    for (int k = 1; k < length; ++k) {
      if (start + k >= bytes.size())
        throw_decode_error(source, start, "input ends inside a " + std::to_string(length) + "-byte sequence");
      const unsigned char next = bytes[start + k];
      if (!is_continuation_byte(next))
        throw_decode_error(source, start, std::to_string(length) + "-byte sequence is cut short: byte " +
                                              format_byte(next) + " at offset " + std::to_string(start + k) +
                                              " is not a continuation byte");
      code_point = (code_point << 6) | (next & 0x3F);
    }
    // Overlong forms (C0 80 for U+0000, E0 80 AF for '/') would give one character several spellings; they
    // have been used to sneak NUL or '/' past filters, so RFC 3629 forbids them.
    if (code_point < smallest)
      throw_decode_error(source, start, "overlong " + std::to_string(length) + "-byte encoding of " +
                                            format_u_plus(code_point));
    // Surrogates are the two halves of a UTF-16 pair, not characters; a lone one in UTF-8 is corrupt text.
    if (code_point >= 0xD800 && code_point <= 0xDFFF)
      throw_decode_error(source, start, "encodes the UTF-16 surrogate " + format_u_plus(code_point));
    if (code_point > 0x10FFFF)  // only F4 90..BF .. gets here: the lead byte is allowed but the value is too big
      throw_decode_error(source, start, "encodes " + format_u_plus(code_point) + ", above the maximum U+10FFFF");
    code_points.push_back(code_point);
    start += length;
  }
  return code_points;
}

void utf8_append(std::string& out, char32_t c) {
  if (!is_valid_code_point(c))
    throw std::runtime_error("cannot encode " + format_u_plus(c) + " as UTF-8: not a Unicode scalar value");
  // 0xxxxxxx | 110xxxxx 10xxxxxx | 1110xxxx 10xxxxxx 10xxxxxx | 11110xxx 10xxxxxx 10xxxxxx 10xxxxxx
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string utf8_encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) utf8_append(out, c);
  return out;
}

// The bidirectional controls (U+202A–U+202E, U+2066–U+2069, and the marks U+200E, U+200F, U+061C) reorder the
// rest of a line as a terminal shows it, so a file name holding one could make a message read differently.
static bool is_bidi_control(char32_t c) {
  return (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0x200E || c == 0x200F || c == 0x061C;
}

std::string describe_code_point(char32_t c) {
  if (!is_valid_code_point(c)) return "(" + format_u_plus(c) + ")";
  std::string shown;
  if (c == '\n') shown = "\\n";
  else if (c == '\t') shown = "\\t";
  else if (c == '\r') shown = "\\r";
  else if (c == 0) shown = "\\0";
  else if (c < 0x20 || (c >= 0x7F && c < 0xA0) || is_bidi_control(c))  // other C0/C1 controls, bidi controls
    shown = "\\u" + format_u_plus(c).substr(2);
  else utf8_append(shown, c);
  return "'" + shown + "' (" + format_u_plus(c) + ")";
}

std::string escape_for_message(std::string_view bytes, bool keep_newlines) {
  std::string out;
  out.reserve(bytes.size());
  auto hex = [&out](unsigned value, const char* format) {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, format, value);
    out += buffer;
  };
  size_t i = 0;
  while (i < bytes.size()) {
    const unsigned char b = bytes[i];
    if (b < 0x80) {
      if (b == '\n') out += keep_newlines ? "\n" : "\\n";
      else if (b == '\t') out += "\\t";
      else if (b == '\r') out += "\\r";
      else if (b < 0x20 || b == 0x7F) hex(b, "\\x%02x");
      else out += char(b);
      i += 1;
      continue;
    }
    // A multi-byte sequence: decode just this one character with the strict decoder; a bad one shows its lead
    // byte as \xNN and decoding resumes at the next byte (so "\xe2\x82" cut short shows as two escapes).
    size_t length = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b >= 0xF0 && b <= 0xF4) ? 4 : 1;
    char32_t c = 0;
    bool valid = length > 1 && i + length <= bytes.size();
    if (valid) {
      try {
        const std::u32string one = utf8_decode(bytes.substr(i, length), "");
        valid = one.size() == 1, c = valid ? one[0] : 0;
      } catch (const std::runtime_error&) {
        valid = false;
      }
    }
    if (!valid) {
      hex(b, "\\x%02x");
      i += 1;
    } else if (c < 0xA0 || is_bidi_control(c)) {
      // C1 controls U+0080..U+009F: some terminals act on them like ESC sequences; bidi controls reorder the line.
      hex(unsigned(c), "\\u%04x");
      i += length;
    } else {
      out.append(bytes.substr(i, length));
      i += length;
    }
  }
  return out;
}
