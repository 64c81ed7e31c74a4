// Character-level tokenizer: one token per Unicode code point, so any UTF-8 text (English, Chinese, emoji)
// can be a corpus without a trained merge table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

// Vocabulary = the sorted set of code points in the corpus; token id = rank in that order.
// Special tokens (e.g. "[MASK]" for a later masked-LM objective) may be appended after the characters: their ids
// come after all character ids, they are never produced by encode() from text, and decode() renders them by name.
class Tokenizer {
 public:
  Tokenizer() = default;  // empty vocabulary, to be assigned
  // Sorted unique code points of `corpus`. Throws std::runtime_error on a surrogate or value above U+10FFFF.
  static Tokenizer from_text(std::u32string_view corpus);
  // As stored in a checkpoint: vocab_utf8() and specials(). Rejects invalid UTF-8, unsorted or duplicate
  // characters, and empty or duplicate special names, with a std::runtime_error message naming `source`.
  static Tokenizer from_vocab(std::string_view vocab_utf8, const std::vector<std::string>& specials,
                              const std::string& source);

  std::string vocab_utf8() const;  // all character tokens in id order, UTF-8 (what a checkpoint stores)
  const std::vector<std::string>& specials() const;
  int add_special(const std::string& name);       // returns its id (idempotent); throws on an empty name
  int special_id(const std::string& name) const;  // -1 if absent

  int size() const;  // characters + specials
  int num_chars() const;
  bool contains(char32_t c) const;
  int id_of(char32_t c) const;  // -1 if absent; O(1) below U+10000, binary search above

  // Throws std::runtime_error naming the first unknown character with describe_code_point and its character
  // index in `text`, e.g. "prompt: character 'Z' (U+005A) at position 3 is not in the model's vocabulary".
  std::vector<int> encode(std::u32string_view text, const std::string& source) const;
  std::string decode(const std::vector<int>& ids) const;
  std::string decode_one(int id) const;  // throws std::out_of_range on an id outside [0, size())

 private:
  explicit Tokenizer(std::vector<char32_t> sorted_unique_chars);

  // Code points below this get a slot in dense_ids_; almost all text (every living script's common
  // characters, CJK included) lives there, while emoji and rare scripts above it use binary search.
  static constexpr char32_t kDenseLimit = 0x10000;

  std::vector<char32_t> chars_;      // id -> code point, strictly increasing
  std::vector<int> dense_ids_;       // code point -> id (or -1), sized to the largest character below kDenseLimit
  std::vector<std::string> specials_;  // special id = num_chars() + index
};
