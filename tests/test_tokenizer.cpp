// Tests for src/utf8.* and src/data/tokenizer.*. Expected values are written out by hand (byte arrays, code points,
// ids) or come from an independent reference validator below, never from the code's own earlier output.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "data/utf8.h"

// Builds a byte string from explicit values, so tests never depend on how "\x.." literals concatenate.
static std::string bytes(std::initializer_list<unsigned> values) {
  std::string out;
  for (unsigned v : values) out += static_cast<char>(v);
  return out;
}

// The exception message of utf8_decode, or "" if it accepted the input.
static std::string decode_error(std::string_view input) {
  try {
    utf8_decode(input, "test-input");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// The N in "...at byte offset N: ...", or -1 if the message has no offset.
static long offset_in_message(const std::string& message) {
  const std::string marker = "at byte offset ";
  size_t at = message.find(marker);
  return at == std::string::npos ? -1 : std::stol(message.substr(at + marker.size()));
}

static bool contains_text(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---------------------------------------------------------------------------------------------------------------
// UTF-8: valid input

struct Utf8KnownEncoding {
  char32_t code_point;
  std::string utf8;
};

TEST(Utf8, KnownCodePointsEncodeAndDecodeToExactBytes) {
  const std::vector<Utf8KnownEncoding> table = {
      {U'\0', bytes({0x00})},
      {U'A', bytes({0x41})},
      {0x7F, bytes({0x7F})},                    // last 1-byte
      {0x80, bytes({0xC2, 0x80})},              // first 2-byte
      {0xE9, bytes({0xC3, 0xA9})},              // é
      {0x7FF, bytes({0xDF, 0xBF})},             // last 2-byte
      {0x800, bytes({0xE0, 0xA0, 0x80})},       // first 3-byte
      {0x4F60, bytes({0xE4, 0xBD, 0xA0})},      // 你
      {0xD7FF, bytes({0xED, 0x9F, 0xBF})},      // just below the surrogates
      {0xE000, bytes({0xEE, 0x80, 0x80})},      // just above the surrogates
      {0xFEFF, bytes({0xEF, 0xBB, 0xBF})},      // BOM: an ordinary character to the decoder
      {0xFFFF, bytes({0xEF, 0xBF, 0xBF})},      // last 3-byte
      {0x10000, bytes({0xF0, 0x90, 0x80, 0x80})},   // first 4-byte
      {0x1F600, bytes({0xF0, 0x9F, 0x98, 0x80})},   // 😀
      {0x10FFFF, bytes({0xF4, 0x8F, 0xBF, 0xBF})},  // last code point
  };
  for (const Utf8KnownEncoding& known : table) {
    SCOPED_TRACE(known.code_point);
    EXPECT_EQ(utf8_encode(std::u32string(1, known.code_point)), known.utf8);
    std::string appended = "x";
    utf8_append(appended, known.code_point);
    EXPECT_EQ(appended, "x" + known.utf8);
    EXPECT_EQ(utf8_decode(known.utf8, "t"), std::u32string(1, known.code_point));
  }
}

TEST(Utf8, RoundTripsAsciiAccentsChineseAndEmoji) {
  const std::string ascii = "Hello, world!\n\t~";
  EXPECT_EQ(utf8_decode(ascii, "t"), U"Hello, world!\n\t~");

  const std::string accents = bytes({'c', 'a', 'f', 0xC3, 0xA9, ' ', 0xC3, 0xBC, 0xC3, 0x9F});  // "café üß"
  EXPECT_EQ(utf8_decode(accents, "t"), (std::u32string{U'c', U'a', U'f', 0xE9, U' ', 0xFC, 0xDF}));

  const std::string chinese = bytes({0xE4, 0xBD, 0xA0, 0xE5, 0xA5, 0xBD, 0xEF, 0xBC, 0x8C,  // 你好，
                                     0xE4, 0xB8, 0x96, 0xE7, 0x95, 0x8C});                  // 世界
  const std::u32string chinese_code_points = {0x4F60, 0x597D, 0xFF0C, 0x4E16, 0x754C};
  EXPECT_EQ(utf8_decode(chinese, "t"), chinese_code_points);
  EXPECT_EQ(utf8_encode(chinese_code_points), chinese);

  const std::string emoji = bytes({'a', 0xF0, 0x9F, 0x98, 0x80, 'b'});
  EXPECT_EQ(utf8_decode(emoji, "t"), (std::u32string{U'a', 0x1F600, U'b'}));
  EXPECT_EQ(utf8_encode(std::u32string{U'a', 0x1F600, U'b'}), emoji);

  EXPECT_EQ(utf8_decode("", "t"), U"");
  EXPECT_EQ(utf8_encode(U""), "");
}

TEST(Utf8, EncodingRejectsNonCharacters) {
  std::string out;
  EXPECT_THROW(utf8_append(out, 0xD800), std::runtime_error);
  EXPECT_THROW(utf8_append(out, 0xDFFF), std::runtime_error);
  EXPECT_THROW(utf8_append(out, 0x110000), std::runtime_error);
  EXPECT_THROW(utf8_encode(std::u32string{U'a', 0xDC00}), std::runtime_error);
  EXPECT_EQ(out, "");
}

TEST(Utf8, DescribeCodePoint) {
  EXPECT_EQ(describe_code_point(U'Z'), "'Z' (U+005A)");
  EXPECT_EQ(describe_code_point(0xE9), "'" + bytes({0xC3, 0xA9}) + "' (U+00E9)");
  EXPECT_EQ(describe_code_point(0x1F600), "'" + bytes({0xF0, 0x9F, 0x98, 0x80}) + "' (U+1F600)");
  EXPECT_EQ(describe_code_point(U'\n'), "'\\n' (U+000A)");
  EXPECT_EQ(describe_code_point(U'\t'), "'\\t' (U+0009)");
  EXPECT_EQ(describe_code_point(U'\0'), "'\\0' (U+0000)");
  EXPECT_EQ(describe_code_point(0x1B), "'\\u001B' (U+001B)");  // ESC must never reach a terminal raw
  EXPECT_EQ(describe_code_point(0x7F), "'\\u007F' (U+007F)");  // DEL
  EXPECT_EQ(describe_code_point(0x85), "'\\u0085' (U+0085)");  // C1 control
  EXPECT_EQ(describe_code_point(0xA0), "'" + bytes({0xC2, 0xA0}) + "' (U+00A0)");  // first non-control after C1
  EXPECT_EQ(describe_code_point(0xD800), "(U+D800)");
  EXPECT_EQ(describe_code_point(0x110000), "(U+110000)");
}

// ---------------------------------------------------------------------------------------------------------------
// UTF-8: invalid input, each with the exact offset of the first byte of the bad sequence

struct Utf8InvalidCase {
  const char* name;
  std::string input;
  long offset;
  const char* phrase;  // part of the "what is wrong" text
};

TEST(Utf8, InvalidInputsReportExactOffset) {
  const std::string e_acute = bytes({0xC3, 0xA9});
  const std::vector<Utf8InvalidCase> cases = {
      {"stray continuation at start", bytes({0x80}), 0, "continuation byte 0x80"},
      {"stray continuation in middle", "a" + bytes({0xBF}) + "b", 1, "continuation byte 0xBF"},
      {"continuation after complete char", e_acute + bytes({0xA9}), 2, "continuation byte 0xA9"},
      {"offset counts bytes, not chars", e_acute + bytes({0xE2, 0x82, 0xAC, 0x80}), 5, "continuation"},
      {"truncated 2-byte at end", "abc" + bytes({0xC3}), 3, "input ends inside a 2-byte"},
      {"truncated 3-byte at end (1 of 3)", "ab" + bytes({0xE4}), 2, "input ends inside a 3-byte"},
      {"truncated 3-byte at end (2 of 3)", "ab" + bytes({0xE4, 0xBD}), 2, "input ends inside a 3-byte"},
      {"truncated 4-byte at end (3 of 4)", "x" + bytes({0xF0, 0x9F, 0x98}), 1, "input ends inside a 4-byte"},
      {"truncated 2-byte in middle", bytes({0xC3}) + "a", 0, "byte 0x61 at offset 1 is not a continuation"},
      {"truncated 3-byte in middle", "ab" + bytes({0xE4, 0xBD}) + "c", 2, "byte 0x63 at offset 4"},
      {"truncated 4-byte in middle", bytes({0xF0, 0x9F, 0x98}) + " ", 0, "4-byte sequence is cut short"},
      {"truncated 4-byte then new char", bytes({0xF0, 0x9F, 0xF0, 0x9F, 0x98, 0x80}), 0, "byte 0xF0 at offset 2"},
      {"overlong NUL C0 80", bytes({0xC0, 0x80}), 0, "overlong 2-byte encoding of U+0000"},
      {"overlong '/' C0 AF", "ok" + bytes({0xC0, 0xAF}), 2, "overlong 2-byte encoding of U+002F"},
      {"overlong C1 BF", bytes({0xC1, 0xBF}), 0, "overlong 2-byte encoding of U+007F"},
      {"overlong E0 80 80", "ok" + bytes({0xE0, 0x80, 0x80}), 2, "overlong 3-byte encoding of U+0000"},
      {"overlong E0 9F BF", bytes({0xE0, 0x9F, 0xBF}), 0, "overlong 3-byte encoding of U+07FF"},
      {"overlong F0 80 80 80", bytes({0xF0, 0x80, 0x80, 0x80}), 0, "overlong 4-byte encoding of U+0000"},
      {"overlong F0 8F BF BF", bytes({0xF0, 0x8F, 0xBF, 0xBF}), 0, "overlong 4-byte encoding of U+FFFF"},
      {"surrogate ED A0 80", "a" + bytes({0xED, 0xA0, 0x80}), 1, "surrogate U+D800"},
      {"surrogate ED BF BF", bytes({0xED, 0xBF, 0xBF}), 0, "surrogate U+DFFF"},
      {"above U+10FFFF", bytes({0xF4, 0x90, 0x80, 0x80}), 0, "U+110000, above the maximum U+10FFFF"},
      {"above U+10FFFF later", "abcd" + bytes({0xF4, 0xBF, 0xBF, 0xBF}), 4, "above the maximum"},
  };
  for (const Utf8InvalidCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::string message = decode_error(c.input);
    EXPECT_EQ(message.rfind("test-input: invalid UTF-8 at byte offset ", 0), 0u) << message;
    EXPECT_EQ(offset_in_message(message), c.offset) << message;
    EXPECT_TRUE(contains_text(message, c.phrase)) << message;
  }
}

TEST(Utf8, BytesF5ToFFAreNeverValid) {
  for (unsigned byte = 0xF5; byte <= 0xFF; ++byte) {
    SCOPED_TRACE(byte);
    for (const std::string& input : {bytes({byte}), "xy" + bytes({byte, 0x80, 0x80, 0x80})}) {
      std::string message = decode_error(input);
      EXPECT_EQ(offset_in_message(message), input.size() == 1 ? 0 : 2) << message;
      EXPECT_TRUE(contains_text(message, "can never occur in UTF-8")) << message;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// UTF-8: brute force against an independent reference validator

// Straight from the table in RFC 3629 section 4 (UTF8-1 .. UTF8-4): for each range of lead bytes, the sequence
// length and the allowed range of the second byte; any third and fourth bytes are always 80..BF.
// Returns the offset of the first ill-formed sequence, or -1 if the whole input is well-formed.
static long reference_first_error(std::string_view input) {
  struct Row {
    unsigned lead_low, lead_high, length, second_low, second_high;
  };
  static const Row rows[] = {
      {0x00, 0x7F, 1, 0, 0},        {0xC2, 0xDF, 2, 0x80, 0xBF}, {0xE0, 0xE0, 3, 0xA0, 0xBF},
      {0xE1, 0xEC, 3, 0x80, 0xBF},  {0xED, 0xED, 3, 0x80, 0x9F}, {0xEE, 0xEF, 3, 0x80, 0xBF},
      {0xF0, 0xF0, 4, 0x90, 0xBF},  {0xF1, 0xF3, 4, 0x80, 0xBF}, {0xF4, 0xF4, 4, 0x80, 0x8F},
  };
  auto byte_at = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(input[i])); };
  size_t i = 0;
  while (i < input.size()) {
    const Row* match = nullptr;
    for (const Row& row : rows)
      if (byte_at(i) >= row.lead_low && byte_at(i) <= row.lead_high) match = &row;
    if (match == nullptr || i + match->length > input.size()) return static_cast<long>(i);
    if (match->length >= 2 && (byte_at(i + 1) < match->second_low || byte_at(i + 1) > match->second_high))
      return static_cast<long>(i);
    for (unsigned k = 2; k < match->length; ++k)
      if (byte_at(i + k) < 0x80 || byte_at(i + k) > 0xBF) return static_cast<long>(i);
    i += match->length;
  }
  return -1;
}

static std::string hex_dump(const std::string& input) {
  std::string out;
  char buffer[4];
  for (unsigned char b : input) {
    std::snprintf(buffer, sizeof buffer, "%02X ", b);
    out += buffer;
  }
  return out;
}

// Checks one input: same accept/reject decision and same error offset as the reference; accepted input must
// re-encode to exactly the same bytes. Returns whether the input was valid. (The hex dump is only built when an
// expectation fails, which keeps the brute-force loops fast.)
static bool check_against_reference(const std::string& input) {
  const long expected_offset = reference_first_error(input);
  const std::string message = decode_error(input);
  if (expected_offset < 0) {
    EXPECT_EQ(message, "") << "rejected valid input " << hex_dump(input);
    if (message.empty()) {
      EXPECT_EQ(utf8_encode(utf8_decode(input, "t")), input) << "round trip of " << hex_dump(input);
    }
  } else {
    EXPECT_EQ(offset_in_message(message), expected_offset)
        << "input " << hex_dump(input) << "gave message '" << message << "'";
  }
  return expected_offset < 0;
}

TEST(Utf8BruteForce, EveryOneAndTwoByteInput) {
  int valid = 0;
  for (unsigned first = 0; first < 256; ++first) {
    if (check_against_reference(bytes({first}))) ++valid;
    for (unsigned second = 0; second < 256 && !HasFailure(); ++second) {
      std::string input = bytes({first, second});
      if (check_against_reference(input)) ++valid;
    }
    ASSERT_FALSE(HasFailure()) << "first byte " << first;
  }
  // 128 one-byte inputs, 128*128 ASCII pairs and 30*64 two-byte characters (lead C2..DF).
  EXPECT_EQ(valid, 128 + 128 * 128 + 30 * 64);
}

TEST(Utf8BruteForce, SeededRandomThreeAndFourByteInputs) {
  // Uniform random bytes are almost never valid, so half of the bytes come from the values where the rules
  // change (range edges of RFC 3629's table), which makes valid and nearly-valid sequences common.
  const unsigned interesting[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                                  0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  std::mt19937 rng(20240601);  // mt19937's output sequence is fixed by the standard, so this is reproducible
  auto random_byte = [&]() -> unsigned {
    uint32_t r = rng();
    return (r & 1) ? (r >> 8) % 256 : interesting[(r >> 8) % (sizeof interesting / sizeof interesting[0])];
  };
  for (unsigned length : {3u, 4u}) {
    int valid = 0;
    const int samples = 100000;
    for (int n = 0; n < samples; ++n) {
      std::string input;
      for (unsigned k = 0; k < length; ++k) input += static_cast<char>(random_byte());
      if (check_against_reference(input)) ++valid;
      ASSERT_FALSE(HasFailure());
    }
    EXPECT_GT(valid, samples / 100) << "sample hardly exercises valid " << length << "-byte input";
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Tokenizer

TEST(Tokenizer, VocabularyIsSortedUniqueCodePoints) {
  // "hello, 世界! hello": distinct code points sorted: ' ' ! , e h l o 世(U+4E16) 界(U+754C)
  Tokenizer tokenizer = Tokenizer::from_text(U"hello, \u4E16\u754C! hello");
  EXPECT_EQ(tokenizer.num_chars(), 9);
  EXPECT_EQ(tokenizer.size(), 9);
  EXPECT_EQ(tokenizer.vocab_utf8(), " !,ehlo" + bytes({0xE4, 0xB8, 0x96, 0xE7, 0x95, 0x8C}));
  EXPECT_EQ(tokenizer.id_of(U' '), 0);
  EXPECT_EQ(tokenizer.id_of(U','), 2);
  EXPECT_EQ(tokenizer.id_of(U'o'), 6);
  EXPECT_EQ(tokenizer.id_of(0x4E16), 7);
  EXPECT_EQ(tokenizer.id_of(0x754C), 8);
  EXPECT_EQ(tokenizer.id_of(U'z'), -1);
  EXPECT_EQ(tokenizer.id_of(0x754D), -1);   // beyond the dense table
  EXPECT_EQ(tokenizer.id_of(0x10000), -1);  // above it
  EXPECT_TRUE(tokenizer.contains(U'h'));
  EXPECT_FALSE(tokenizer.contains(U'H'));
}

TEST(Tokenizer, CodePointsAboveTheDenseTableUseTheirRank) {
  // a(U+61) < ～(U+FF5E) < 𝔸(U+1D538) < 😀(U+1F600) < U+10FFFF
  Tokenizer tokenizer = Tokenizer::from_text(std::u32string{0x1F600, U'a', 0x10FFFF, 0x1D538, 0xFF5E, U'a'});
  EXPECT_EQ(tokenizer.num_chars(), 5);
  EXPECT_EQ(tokenizer.id_of(U'a'), 0);
  EXPECT_EQ(tokenizer.id_of(0xFF5E), 1);
  EXPECT_EQ(tokenizer.id_of(0x1D538), 2);
  EXPECT_EQ(tokenizer.id_of(0x1F600), 3);
  EXPECT_EQ(tokenizer.id_of(0x10FFFF), 4);
  EXPECT_EQ(tokenizer.id_of(0x1F601), -1);
  EXPECT_EQ(tokenizer.id_of(0xFFFF), -1);
  EXPECT_EQ(tokenizer.id_of(0x110000), -1);
  EXPECT_EQ(tokenizer.decode({3, 0, 2}), bytes({0xF0, 0x9F, 0x98, 0x80, 'a', 0xF0, 0x9D, 0x94, 0xB8}));
}

TEST(Tokenizer, EmptyCorpusGivesEmptyVocabulary) {
  Tokenizer tokenizer = Tokenizer::from_text(U"");
  EXPECT_EQ(tokenizer.size(), 0);
  EXPECT_EQ(tokenizer.vocab_utf8(), "");
  EXPECT_EQ(tokenizer.id_of(U'a'), -1);
  EXPECT_EQ(tokenizer.encode(U"", "t"), std::vector<int>{});
}

TEST(Tokenizer, FromTextRejectsNonCharacters) {
  EXPECT_THROW(Tokenizer::from_text(std::u32string{U'a', 0xD800}), std::runtime_error);
  EXPECT_THROW(Tokenizer::from_text(std::u32string{0x110000}), std::runtime_error);
}

TEST(Tokenizer, EncodeDecodeMixedEnglishAndChinese) {
  // Vocabulary of "ab你好": a=0 b=1 你(U+4F60)=2 好(U+597D)=3.
  Tokenizer small = Tokenizer::from_text(U"ab\u4F60\u597D");
  EXPECT_EQ(small.encode(U"\u597Da\u4F60b", "t"), (std::vector<int>{3, 0, 2, 1}));
  EXPECT_EQ(small.decode({3, 0, 2, 1}), bytes({0xE5, 0xA5, 0xBD, 'a', 0xE4, 0xBD, 0xA0, 'b'}));
  EXPECT_EQ(small.decode_one(2), bytes({0xE4, 0xBD, 0xA0}));

  const std::string text_utf8 = "The cat said " + bytes({0xE4, 0xBD, 0xA0, 0xE5, 0xA5, 0xBD, 0xEF, 0xBC, 0x8C}) +
                                "\nand left. " + bytes({0xE4, 0xB8, 0x96, 0xE7, 0x95, 0x8C, 0xF0, 0x9F, 0x98, 0x80});
  const std::u32string text = utf8_decode(text_utf8, "t");
  Tokenizer tokenizer = Tokenizer::from_text(text);
  std::vector<int> ids = tokenizer.encode(text, "t");
  ASSERT_EQ(ids.size(), text.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_GE(ids[i], 0);
    ASSERT_LT(ids[i], tokenizer.num_chars());
  }
  EXPECT_EQ(tokenizer.decode(ids), text_utf8);
}

TEST(Tokenizer, UnknownCharacterNamesCharacterAndPosition) {
  Tokenizer tokenizer = Tokenizer::from_text(U"abc\n");
  try {
    tokenizer.encode(U"abcZ", "prompt");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "prompt: character 'Z' (U+005A) at position 3 is not in the model's vocabulary");
  }
  // Position counts characters, not bytes: 世 is 3 bytes but one position.
  try {
    tokenizer.encode(U"a\u4E16b\u4E16", "prompt");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "prompt: character '" + bytes({0xE4, 0xB8, 0x96}) +
                                         "' (U+4E16) at position 1 is not in the model's vocabulary");
  }
  try {
    Tokenizer::from_text(U"ab").encode(U"a\nb", "input.txt");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains_text(e.what(), "input.txt: character '\\n' (U+000A) at position 1")) << e.what();
  }
}

TEST(Tokenizer, DecodeRejectsOutOfRangeIds) {
  Tokenizer tokenizer = Tokenizer::from_text(U"ab");
  EXPECT_THROW(tokenizer.decode_one(2), std::out_of_range);
  EXPECT_THROW(tokenizer.decode_one(-1), std::out_of_range);
  EXPECT_THROW(tokenizer.decode({0, 5}), std::out_of_range);
}

TEST(Tokenizer, FromVocabReproducesIds) {
  const std::u32string corpus = U"Once upon a time, \u4F60\u597D \U0001F600 ~\n";
  Tokenizer original = Tokenizer::from_text(corpus);
  Tokenizer restored = Tokenizer::from_vocab(original.vocab_utf8(), original.specials(), "model.ckpt");
  EXPECT_EQ(restored.size(), original.size());
  EXPECT_EQ(restored.vocab_utf8(), original.vocab_utf8());
  EXPECT_EQ(restored.encode(corpus, "t"), original.encode(corpus, "t"));
  // And from a hand-written stored vocabulary: "\n", "a", "é", "😀" get ids 0..3.
  Tokenizer stored = Tokenizer::from_vocab(bytes({'\n', 'a', 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80}), {}, "m");
  EXPECT_EQ(stored.encode(std::u32string{0x1F600, U'a', 0xE9, U'\n'}, "t"), (std::vector<int>{3, 1, 2, 0}));
}

static std::string from_vocab_error(std::string_view vocab, const std::vector<std::string>& specials) {
  try {
    Tokenizer::from_vocab(vocab, specials, "model.ckpt");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Tokenizer, FromVocabRejectsCorruptVocabularies) {
  std::string unsorted = from_vocab_error("abdc", {});
  EXPECT_TRUE(contains_text(unsorted, "model.ckpt")) << unsorted;
  EXPECT_TRUE(contains_text(unsorted, "not sorted: 'c' (U+0063) at position 3")) << unsorted;

  std::string duplicate = from_vocab_error("abbc", {});
  EXPECT_TRUE(contains_text(duplicate, "model.ckpt")) << duplicate;
  EXPECT_TRUE(contains_text(duplicate, "duplicate character 'b' (U+0062) at position 2")) << duplicate;

  std::string invalid = from_vocab_error("ab" + bytes({0xFF}), {});
  EXPECT_TRUE(contains_text(invalid, "model.ckpt")) << invalid;
  EXPECT_TRUE(contains_text(invalid, "invalid UTF-8 at byte offset 2")) << invalid;

  std::string duplicate_special = from_vocab_error("ab", {"[MASK]", "[MASK]"});
  EXPECT_TRUE(contains_text(duplicate_special, "model.ckpt: duplicate special token")) << duplicate_special;
  EXPECT_NE(from_vocab_error("ab", {""}), "");
  EXPECT_EQ(from_vocab_error("ab", {"[MASK]"}), "");
}

TEST(Tokenizer, SpecialTokensComeAfterCharactersAndDecodeByName) {
  // The corpus contains the letters of "[MASK]" so that text can spell the name without producing the special.
  Tokenizer tokenizer = Tokenizer::from_text(U"[MASK] ab");  // ' ' A K M S [ ] a b -> 9 characters
  ASSERT_EQ(tokenizer.num_chars(), 9);
  EXPECT_EQ(tokenizer.special_id("[MASK]"), -1);
  EXPECT_EQ(tokenizer.add_special("[MASK]"), 9);
  EXPECT_EQ(tokenizer.add_special("[MASK]"), 9);  // idempotent
  EXPECT_EQ(tokenizer.add_special("[SEP]"), 10);
  EXPECT_EQ(tokenizer.size(), 11);
  EXPECT_EQ(tokenizer.num_chars(), 9);
  EXPECT_EQ(tokenizer.special_id("[SEP]"), 10);
  EXPECT_EQ(tokenizer.specials(), (std::vector<std::string>{"[MASK]", "[SEP]"}));
  EXPECT_THROW(tokenizer.add_special(""), std::runtime_error);

  std::vector<int> spelled = tokenizer.encode(U"a [MASK] b", "t");
  ASSERT_EQ(spelled.size(), 10u);
  for (int id : spelled) EXPECT_LT(id, tokenizer.num_chars());  // text never yields a special id

  const int a = tokenizer.id_of(U'a'), b = tokenizer.id_of(U'b');
  EXPECT_EQ(tokenizer.decode({a, 9, b, 10}), "a[MASK]b[SEP]");
  EXPECT_EQ(tokenizer.decode_one(10), "[SEP]");

  Tokenizer restored = Tokenizer::from_vocab(tokenizer.vocab_utf8(), tokenizer.specials(), "model.ckpt");
  EXPECT_EQ(restored.size(), 11);
  EXPECT_EQ(restored.special_id("[MASK]"), 9);
  EXPECT_EQ(restored.special_id("[SEP]"), 10);
  EXPECT_EQ(restored.decode({a, 9, b, 10}), "a[MASK]b[SEP]");
}
