#include "data/tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "data/utf8.h"

Tokenizer::Tokenizer(std::vector<char32_t> sorted_unique_chars) : chars_(std::move(sorted_unique_chars)) {
  // The dense table only needs to reach the largest small code point actually present: 128 entries for an
  // English corpus, up to 65536 (256 KB) for Chinese.
  auto first_large = std::lower_bound(chars_.begin(), chars_.end(), kDenseLimit);
  size_t table_size = first_large == chars_.begin() ? 0 : static_cast<size_t>(*(first_large - 1)) + 1;
  dense_ids_.assign(table_size, -1);
  for (int id = 0; id < static_cast<int>(first_large - chars_.begin()); ++id) dense_ids_[chars_[id]] = id;
}

// The distinct characters in order: those below 65536 (all of an English or Chinese corpus, nearly) marked in a
// table read back in order, the rest sorted. Sorting the whole corpus instead took 40 ms of ./train's start on Tiny
// Shakespeare.
Tokenizer Tokenizer::from_text(std::u32string_view corpus) {
  std::vector<unsigned char> seen(65536, 0);
  std::vector<char32_t> large;
  for (char32_t c : corpus)
    if (c < 65536) seen[c] = 1;
    else large.push_back(c);
  std::vector<char32_t> chars;
  for (char32_t c = 0; c < 65536; c++)
    if (seen[c]) chars.push_back(c);
  std::sort(large.begin(), large.end());
  large.erase(std::unique(large.begin(), large.end()), large.end());
  chars.insert(chars.end(), large.begin(), large.end());
  // A vocabulary entry must be storable as UTF-8 in a checkpoint; catch a bad code point here, not at save time.
  for (char32_t c : chars)
    if (!is_valid_code_point(c))
      throw std::runtime_error("corpus contains " + describe_code_point(c) + ", which is not a Unicode character");
  return Tokenizer(std::move(chars));
}

Tokenizer Tokenizer::from_vocab(std::string_view vocab_utf8, const std::vector<std::string>& specials,
                                const std::string& source) {
  std::u32string chars = utf8_decode(vocab_utf8, source + " (vocabulary)");
  // Ids are ranks, so a vocabulary that is not strictly increasing would silently map text to the wrong ids
  // of the stored embedding; it means the checkpoint is corrupt or was written by something else.
  for (size_t i = 1; i < chars.size(); ++i) {
    if (chars[i] == chars[i - 1])
      throw std::runtime_error(source + ": vocabulary has duplicate character " + describe_code_point(chars[i]) +
                               " at position " + std::to_string(i));
    if (chars[i] < chars[i - 1])
      throw std::runtime_error(source + ": vocabulary is not sorted: " + describe_code_point(chars[i]) +
                               " at position " + std::to_string(i) + " comes after " +
                               describe_code_point(chars[i - 1]));
  }
  Tokenizer tokenizer(std::vector<char32_t>(chars.begin(), chars.end()));
  for (const std::string& name : specials) {
    if (name.empty()) throw std::runtime_error(source + ": special token with an empty name");
    if (tokenizer.special_id(name) >= 0)
      throw std::runtime_error(source + ": duplicate special token \"" + escape_for_message(name) + "\"");
    tokenizer.add_special(name);
  }
  return tokenizer;
}

std::string Tokenizer::vocab_utf8() const { return utf8_encode(std::u32string_view(chars_.data(), chars_.size())); }

const std::vector<std::string>& Tokenizer::specials() const { return specials_; }

int Tokenizer::add_special(const std::string& name) {
  if (name.empty()) throw std::runtime_error("special token name must not be empty");
  int existing = special_id(name);
  if (existing >= 0) return existing;
  specials_.push_back(name);
  return size() - 1;
}

int Tokenizer::special_id(const std::string& name) const {
  auto it = std::find(specials_.begin(), specials_.end(), name);
  return it == specials_.end() ? -1 : num_chars() + static_cast<int>(it - specials_.begin());
}

int Tokenizer::size() const { return num_chars() + static_cast<int>(specials_.size()); }

int Tokenizer::num_chars() const { return static_cast<int>(chars_.size()); }

bool Tokenizer::contains(char32_t c) const { return id_of(c) >= 0; }

int Tokenizer::id_of(char32_t c) const {
  if (c < kDenseLimit) return c < dense_ids_.size() ? dense_ids_[c] : -1;
  auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
  return it != chars_.end() && *it == c ? static_cast<int>(it - chars_.begin()) : -1;
}

std::vector<int> Tokenizer::encode(std::u32string_view text, const std::string& source) const {
  std::vector<int> ids;
  ids.reserve(text.size());
  for (size_t position = 0; position < text.size(); ++position) {
    int id = id_of(text[position]);
    if (id < 0)
      throw std::runtime_error(source + ": character " + describe_code_point(text[position]) + " at position " +
                               std::to_string(position) + " is not in the model's vocabulary");
    ids.push_back(id);
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string text;
  for (int id : ids) {
    if (id >= 0 && id < num_chars()) utf8_append(text, chars_[id]);  // the common case, without a temporary
    else text += decode_one(id);
  }
  return text;
}

std::string Tokenizer::decode_one(int id) const {
  if (id < 0 || id >= size())
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(size()) + " tokens");
  if (id < num_chars()) {
    std::string text;
    utf8_append(text, chars_[id]);
    return text;
  }
  return specials_[id - num_chars()];
}
