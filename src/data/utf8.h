// UTF-8 <-> Unicode code points. The tokenizer works on code points, so every byte of text that enters or
// leaves the program passes through these functions.
#pragma once

#include <string>
#include <string_view>

// True for Unicode scalar values: U+0000..U+10FFFF except the surrogates U+D800..U+DFFF.
// These are exactly the code points that UTF-8 can represent.
bool is_valid_code_point(char32_t c);

// Decodes UTF-8 strictly (RFC 3629): rejects invalid lead bytes, truncated sequences, bad continuation bytes,
// overlong encodings, surrogates (U+D800..U+DFFF) and code points above U+10FFFF. On error throws
// std::runtime_error: "<source>: invalid UTF-8 at byte offset N: <what is wrong>", where N is the offset of the
// first byte of the bad sequence. Nothing is stripped or replaced (a leading BOM decodes to U+FEFF).
std::u32string utf8_decode(std::string_view bytes, const std::string& source);

// Encodes one code point (1 to 4 bytes). Throws std::runtime_error if it is not a valid code point.
void utf8_append(std::string& out, char32_t code_point);
std::string utf8_encode(std::u32string_view code_points);

// For messages, e.g. "'é' (U+00E9)", "'\n' (U+000A)", "'\u001B' (U+001B)". Control characters are shown
// escaped so a message never contains a raw newline or terminal escape; invalid code points as "(U+D800)".
std::string describe_code_point(char32_t c);

// Bytes from a file (or any untrusted source) made safe to put in a message: valid UTF-8 is kept as it is, except
// control characters (C0, DEL, C1) and the bidirectional controls (U+202E and its kin, which reorder what is shown),
// which appear as \n, \t, \r or \xNN / \u0085 / \u202e style escapes; every byte that is
// not part of valid UTF-8 appears as \xNN (e.g. "\x9d"). So a message never carries a raw byte that could garble
// the terminal or move its cursor. With keep_newlines, '\n' stays a line break (for whole multi-line messages).
std::string escape_for_message(std::string_view bytes, bool keep_newlines = false);
