// Reading and writing safetensors checkpoints; see safetensors.h for the layout.
//
// The parser treats the file as untrusted: a truncated download or a flipped bit must give a clear error, not a
// crash or a 100 GB allocation. So every length is checked against the bytes actually present before use, all
// size arithmetic is done in uint64 with overflow checks, and no tensor is decoded until all were validated.
#include "io/safetensors.h"

#include "base/read_file.h"
#include "io/atomic_file.h"
#include "io/crc32c.h"
#include "io/json_emptying.h"
#include "data/utf8.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <set>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

using json = nlohmann::json;

static const size_t length_prefix_bytes = 8;
// Python's safetensors also refuses headers above 100 MB: a larger length means a corrupt or foreign file.
static const uint64_t max_header_bytes = 100000000;

[[noreturn]] static void fail(const std::string& source, const std::string& message) {
  throw std::runtime_error(source + ": " + message);
}

// Computes a * b, or returns false if the product does not fit in 64 bits.
static bool multiply_checked(uint64_t a, uint64_t b, uint64_t* product) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  *product = a * b;
  return true;
}

static bool host_is_little_endian() {
  const uint32_t one = 1;
  uint8_t first_byte;
  std::memcpy(&first_byte, &one, 1);
  return first_byte == 1;
}

// The file stores floats little-endian; on a big-endian host reverse the bytes of every 4-byte float in place.
static void convert_floats_between_little_endian_and_host(uint8_t* bytes, size_t size) {
  if (host_is_little_endian()) return;
  for (size_t i = 0; i + 4 <= size; i += 4) {
    std::swap(bytes[i], bytes[i + 3]);
    std::swap(bytes[i + 1], bytes[i + 2]);
  }
}

// A JSON value for an error message, cut short so a huge bogus value cannot flood the terminal.
static std::string short_dump(const json& value) {
  std::string text = value.dump();
  return text.size() <= 60 ? text : text.substr(0, 60) + "...";
}

// ---------------------------------------------------------------------------------------------------------------
// Writing

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the keys in the order written, so the header reads like the tensor list. The metadata
  // (with the data's checksum, known only once the tensors are laid out) is filled in after the loop; it comes
  // first, led by the header's checksum, whose place is then fixed (header_checksum_field).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = nlohmann::ordered_json::object();

  std::vector<ByteChunk> data_chunks;          // point straight at the caller's floats: no copy
  std::vector<std::vector<uint8_t>> swapped;   // only used on big-endian hosts
  uint64_t offset = 0;
  for (const TensorView& tensor : tensors) {
    const std::string where = path + ": tensor '" + tensor.name + "': ";
    if (tensor.name == "__metadata__" || header.contains(tensor.name))
      throw std::runtime_error(where + "name is reserved or used twice");
    uint64_t element_count = 1;
    for (int64_t dim : tensor.shape)
      if (dim < 0 || !multiply_checked(element_count, uint64_t(dim), &element_count))
        throw std::runtime_error(where + "shape has a negative dimension or too many elements");
    uint64_t byte_count = 0;
    if (!multiply_checked(element_count, sizeof(float), &byte_count) ||
        byte_count > std::numeric_limits<size_t>::max())
      throw std::runtime_error(where + "too large");
    if (byte_count > 0 && tensor.data == nullptr) throw std::runtime_error(where + "data is null");

    nlohmann::ordered_json entry;
    entry["dtype"] = "F32";
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = {offset, offset + byte_count};
    header[tensor.name] = std::move(entry);
    offset += byte_count;

    const void* bytes = tensor.data;
    if (!host_is_little_endian() && byte_count > 0) {
      const uint8_t* first = reinterpret_cast<const uint8_t*>(tensor.data);
      swapped.emplace_back(first, first + byte_count);
      convert_floats_between_little_endian_and_host(swapped.back().data(), swapped.back().size());
      bytes = swapped.back().data();  // moving the outer vector later keeps this buffer where it is
    }
    data_chunks.push_back({bytes, size_t(byte_count)});
  }

  // The checksum covers the data section exactly as it lies in the file (little-endian on every host).
  uint32_t crc = 0;
  for (const ByteChunk& chunk : data_chunks) crc = crc32c(chunk.data, chunk.size, crc);
  nlohmann::ordered_json& meta = header["__metadata__"];
  meta[kHeaderChecksumKey] = "00000000";  // its digits are written once the bytes around them are known
  for (const auto& [key, value] : metadata)
    if (key != kHeaderChecksumKey && key != kCanonicalHeaderChecksumKey && key != kDataChecksumKey) meta[key] = value;
  meta[kDataChecksumKey] = crc32c_hex(crc);

  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const std::exception& error) {  // names and metadata must be valid UTF-8
    throw std::runtime_error(path + ": cannot encode the header: " + error.what());
  }
  // Pad with spaces (still valid JSON) so the data section starts 8-byte aligned, as the format recommends;
  // readers can then map the file and use the floats in place.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string prefix(length_prefix_bytes, '\0');
  for (size_t i = 0; i < length_prefix_bytes; ++i) prefix[i] = char((uint64_t(header_text.size()) >> (8 * i)) & 0xff);
  prefix += header_text;
  const std::string seal = crc32c_hex(header_bytes_crc32c(reinterpret_cast<const uint8_t*>(prefix.data()), header_text.size()));
  prefix.replace(length_prefix_bytes + header_checksum_field().size(), seal.size(), seal);

  std::vector<ByteChunk> chunks = {{prefix.data(), prefix.size()}};
  chunks.insert(chunks.end(), data_chunks.begin(), data_chunks.end());
  write_file_atomically(path, chunks);
}

// nlohmann's json keeps an object's keys in a std::map, sorted by their bytes (for UTF-8, code point order, as
// Python's sort_keys), and dump() writes no whitespace, escapes only '"', '\\' and control characters (as \n or
// \u00XX, lower-case hex, as Python) and leaves other characters as UTF-8: the canonical form by construction.
static void erase_checksum_keys(json& metadata) {
  if (!metadata.is_object()) return;
  metadata.erase(kDataChecksumKey);
  metadata.erase(kCanonicalHeaderChecksumKey);
  metadata.erase(kHeaderChecksumKey);
}

static std::string canonical_metadata_dump(json metadata) {
  erase_checksum_keys(metadata);
  return metadata.dump();
}

static std::string canonical_dump(json header) {
  if (header.is_object() && header.contains("__metadata__")) erase_checksum_keys(header["__metadata__"]);
  return header.dump();
}

std::string header_checksum_field() { return std::string("{\"__metadata__\":{\"") + kHeaderChecksumKey + "\":\""; }

uint32_t header_bytes_crc32c(const uint8_t* file, uint64_t header_size) {
  const size_t digits_at = length_prefix_bytes + header_checksum_field().size();
  const uint32_t before = crc32c(file, digits_at);
  return crc32c(file + digits_at + 8, size_t(length_prefix_bytes + header_size - digits_at - 8), before);
}

std::string header_canonical_text(const std::string& header_json) {
  try {
    return canonical_dump(json::parse(header_json));
  } catch (const json::exception& error) {
    throw std::runtime_error(std::string("header is not valid JSON: ") + error.what());
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Reading

// A tensor's header entry after validation: its bytes are [begin, end) of the data section.
struct TensorEntry {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

static std::map<std::string, std::string> parse_metadata(const json& metadata, const std::string& source) {
  if (!metadata.is_object())
    fail(source, "__metadata__ is a JSON " + std::string(metadata.type_name()) + ", expected an object of strings");
  std::map<std::string, std::string> result;
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string())
      fail(source, "__metadata__ value for '" + escape_for_message(key) + "' is a JSON " + value.type_name() + ", expected a string");
    result[key] = value.get<std::string>();
  }
  return result;
}

static TensorEntry parse_tensor_entry(const std::string& name, const json& entry, uint64_t data_section_size,
                                      const std::string& source) {
  const std::string where = "tensor '" + escape_for_message(name) + "': ";
  if (!entry.is_object())
    fail(source, where + "entry is a JSON " + entry.type_name() +
                     ", expected an object with dtype, shape and data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) fail(source, where + "entry lacks \"" + key + "\"");
  for (const auto& item : entry.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      fail(source, where + "entry has the unknown key '" + escape_for_message(item.key()) +
                       "' (a tensor entry holds dtype, shape and data_offsets only)");

  const json& dtype = entry.at("dtype");
  if (!dtype.is_string() || dtype.get<std::string>() != "F32")
    fail(source, where + "dtype " + short_dump(dtype) + " is not supported, only F32");

  TensorEntry tensor{name, {}, 0, 0};
  const json& shape = entry.at("shape");
  if (!shape.is_array())
    fail(source, where + "shape " + short_dump(shape) + " is not an array of non-negative integers");
  uint64_t element_count = 1;
  for (const json& dim : shape) {
    // nlohmann stores integers without a minus sign as number_unsigned; -1, 2.0 and 1e30 are other types.
    if (!dim.is_number_unsigned())
      fail(source, where + "shape " + short_dump(shape) + " is not an array of non-negative integers");
    const uint64_t size = dim.get<uint64_t>();
    if (size > uint64_t(std::numeric_limits<int64_t>::max()) || !multiply_checked(element_count, size, &element_count))
      fail(source, where + "shape " + short_dump(shape) + ": element count overflows");
    tensor.shape.push_back(int64_t(size));
  }
  uint64_t needed_bytes = 0;
  if (!multiply_checked(element_count, sizeof(float), &needed_bytes))
    fail(source, where + "shape " + short_dump(shape) + ": byte size overflows");

  const json& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail(source, where + "data_offsets " + short_dump(offsets) + " is not two non-negative integers [begin, end]");
  tensor.begin = offsets[0].get<uint64_t>();
  tensor.end = offsets[1].get<uint64_t>();
  const std::string range = "data_offsets [" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) + "]";
  if (tensor.begin > tensor.end) fail(source, where + range + ": begin offset is after end offset");
  if (tensor.end > data_section_size)
    fail(source, where + range + ": end offset " + std::to_string(tensor.end) + " is beyond the data section of " +
                     std::to_string(data_section_size) + " bytes");
  if (tensor.end - tensor.begin != needed_bytes)
    fail(source, where + range + " hold " + std::to_string(tensor.end - tensor.begin) + " bytes, but shape " +
                     short_dump(shape) + " of F32 needs " + std::to_string(needed_bytes));
  return tensor;
}

// Sorted by start, each non-empty tensor must start at or after the end of the previous non-empty one.
static void check_no_overlap(std::vector<TensorEntry>& entries, const std::string& source) {
  std::sort(entries.begin(), entries.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& entry : entries) {
    if (entry.begin == entry.end) continue;  // an empty tensor occupies no bytes
    if (previous != nullptr && entry.begin < previous->end)
      fail(source, "tensors '" + escape_for_message(previous->name) + "' (data_offsets [" + std::to_string(previous->begin) + ", " +
                       std::to_string(previous->end) + "]) and '" + escape_for_message(entry.name) + "' (data_offsets [" +
                       std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]) overlap");
    previous = &entry;
  }
}

// The stored checksum under `key`, checked to be eight hex digits; false when the file does not carry it.
static bool stored_checksum(const std::map<std::string, std::string>& metadata, const char* key,
                            const std::string& source, uint32_t* value) {
  const auto stored = metadata.find(key);
  if (stored == metadata.end()) return false;
  const std::string& text = stored->second;
  // Lower case only, as written: a flipped case bit is a flipped bit too.
  if (text.size() != 8 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
    fail(source, std::string("__metadata__ value for '") + key + "' is '" + escape_for_message(text) +
                     "', expected eight lower-case hex digits (a CRC-32C): the header is damaged");
  *value = uint32_t(std::strtoul(text.c_str(), nullptr, 16));
  return true;
}

// A file that carries kDataChecksumKey must still hold the data it was written with. Files from other tools do
// not carry it and are read unchecked. Returns whether it was checked.
static bool verify_data_checksum(const std::map<std::string, std::string>& metadata, const uint8_t* data,
                                 uint64_t size, const std::string& source) {
  uint32_t stored = 0;
  if (!stored_checksum(metadata, kDataChecksumKey, source, &stored)) return false;
  const uint32_t computed = crc32c(data, size_t(size));
  if (stored != computed)
    fail(source, "the tensor data does not match the checksum recorded when the file was written (CRC-32C " +
                     crc32c_hex(stored) + " recorded, " + crc32c_hex(computed) + " now): the file was changed or " +
                     "damaged after it was written; use another copy");
  return true;
}

static const char* kHeaderMismatch = ") does not match the checksum recorded when the file was written (CRC-32C ";

// Format 2's header checksum: the header's canonical text (the settings, the step, the tensor table with every
// offset) must be what was written. Returns whether it was checked.
static bool verify_canonical_header_checksum(const std::map<std::string, std::string>& metadata,
                                             const std::string& canonical, const std::string& source) {
  uint32_t stored = 0;
  if (!stored_checksum(metadata, kCanonicalHeaderChecksumKey, source, &stored)) return false;
  const uint32_t computed = crc32c(canonical.data(), canonical.size());
  if (stored != computed)
    fail(source, std::string("the header (settings, step, tensor table") + kHeaderMismatch + crc32c_hex(stored) +
                     " recorded, " + crc32c_hex(computed) + " now): the file was changed or damaged after it was "
                     "written; use another copy");
  return true;
}

// The header's own checksum (kHeaderChecksumKey), read from its fixed place and checked on the bytes before the
// header is parsed, so that a header whose checksum no longer matches is reported as that, whatever else the damage
// broke (the JSON, a key, the data's checksum). Returns whether the header carries it.
static bool verify_header_checksum(const uint8_t* bytes, size_t size, uint64_t header_size, const std::string& source) {
  const std::string field = header_checksum_field();
  const size_t digits_at = length_prefix_bytes + field.size(), field_end = digits_at + 9;  // eight digits and '"'
  if (size < field_end) return false;
  // The field's fixed bytes as written, but for at most one: a file that differs in more never carried the field
  // (an older file, or another tool's); one byte off is a flipped bit in the field itself.
  size_t differing = 0, first_difference = 0;
  for (size_t i = 0; i <= field.size(); i++) {
    const size_t at = i < field.size() ? length_prefix_bytes + i : field_end - 1;
    const char expected = i < field.size() ? field[i] : '"';
    if (char(bytes[at]) != expected && differing++ == 0) first_difference = at;
  }
  if (differing > 1) return false;
  if (differing == 1)
    fail(source, "byte " + std::to_string(first_difference) + " of the file is '" +
                     escape_for_message(std::string(1, char(bytes[first_difference]))) + "': the header is damaged (its "
                     "checksum field, the first " + std::to_string(field_end - length_prefix_bytes) + " bytes of the "
                     "header, is not as written)");
  const std::string digits(reinterpret_cast<const char*>(bytes) + digits_at, 8);
  if (digits.find_first_not_of("0123456789abcdef") != std::string::npos)
    fail(source, std::string("__metadata__ value for '") + kHeaderChecksumKey + "' is '" + escape_for_message(digits) +
                     "', expected eight lower-case hex digits (a CRC-32C): the header is damaged");
  if (header_size < field_end - length_prefix_bytes + 2)  // the field, then at least "}}"
    fail(source, "header length " + std::to_string(header_size) + " is shorter than the checksum field the header "
                 "begins with: the header length is damaged");
  const uint32_t stored = uint32_t(std::strtoul(digits.c_str(), nullptr, 16));
  const uint32_t computed = header_bytes_crc32c(bytes, header_size);
  if (stored != computed)
    fail(source, std::string("the header (its length, settings, step, tensor table, the data's checksum") +
                     kHeaderMismatch + crc32c_hex(stored) + " recorded, " + crc32c_hex(computed) + " now): the file "
                     "was changed or damaged after it was written; use another copy");
  return true;
}

// The header, read as a stream of JSON events (nlohmann's SAX interface) without ever building its whole tree.
// Each top-level value (one tensor's entry, or "__metadata__") is built as a small JSON value of its own, checked,
// kept as a TensorEntry (or as the metadata) and dropped; so reading a header costs a small multiple of its size
// (a TensorEntry for each tensor, at most one entry's tree at a time). A whole tree cost 16 times the header's size
// (a legal header of 1.6 million empty entries, 96 MB, took 1.5 GB), and under a memory limit the parse ended in
// std::bad_alloc, thrown again by the JSON library's destructors while unwinding: std::terminate.
//
// On the way, the checks nlohmann's parser does not make. A real header nests three deep:
// {"name": {"shape": [...]}}; deeper nesting is refused. A key given twice in one object is refused: JSON parsers
// keep the last (nlohmann, Python) or the first, so a second "__metadata__" or "data_offsets" would make the file
// mean different things to different readers. Each top-level value holds a bounded number of JSON values (a tensor
// entry kMaxEntryValues, the metadata kMaxMetadataValues), and the caller may bound the number of tensors.
//
// Why events and not json::parse's callback: nlohmann's callback parser, at every end of an object, scans the
// enclosing object for values the callback discarded, so a header of n tensors took O(n²) time (a 1024-layer
// checkpoint of 36,876 tensors: 85 s). Here every event does O(1) work, or O(log k) in an object of k keys.
class HeaderReader : public json::json_sax_t {
 public:
  // A tensor's entry is 12 JSON events plus one per dimension (its object's start and end, 3 keys, the dtype, the
  // shape's start and end, data_offsets' start, 2 numbers and end): 64 leave room for any rank a tensor has.
  static constexpr size_t kMaxEntryValues = 64;
  // Two per key (the key, its string): plaingpt writes about 40 keys, other tools a handful.
  static constexpr size_t kMaxMetadataValues = 2 * 4096;

  // keep_canonical: keep every entry's canonical text from the start (format 2's checksum of a header whose
  // metadata comes after some tensors; plaingpt writes it first, so a first pass only learns that).
  HeaderReader(const std::string& source, uint64_t data_section_size, size_t max_tensors, bool keep_canonical)
      : source_(source), data_section_size_(data_section_size), max_tensors_(max_tensors),
        canonical_wanted_(keep_canonical) {}
  ~HeaderReader() override {
    empty_without_allocating(building_);
    empty_without_allocating(metadata_);
  }

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& v) override { return value(std::move(v)); }
  bool binary(binary_t&) override { return value(nullptr); }  // CBOR and the like only; JSON text has none
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override;
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& error) override {
    // Also reached for invalid UTF-8.
    fail(source_, "header is not valid JSON (near byte " + std::to_string(position) + " of the header, file offset " +
                      std::to_string(length_prefix_bytes + position) + "): " + escape_for_message(error.what()));
  }

  // After the parse: the header's parts, each checked on its own. Throws for what is wrong with the whole.
  void finish(SafetensorsContents& contents, std::vector<TensorEntry>& entries);
  size_t events() const { return events_; }
  // The metadata asks for format 2's checksum, but tensors came before it whose canonical text was not kept.
  bool read_again_for_canonical() const { return read_again_for_canonical_; }

 private:
  bool value(json v);
  bool open(json container);
  bool close();
  json& add(json v);  // into the innermost open container of the value being built
  void count_value();
  void take(json top_value);  // a whole top-level value: the metadata, or a tensor's entry
  std::string canonical_text() const;

  const std::string& source_;
  const uint64_t data_section_size_;
  const size_t max_tensors_;  // 0: as many as the header holds
  size_t events_ = 0;
  int depth_ = 0;                     // containers open
  const char* top_type_ = "empty";    // the header's own JSON type, once it began
  bool top_is_object_ = false;
  std::string name_;                  // the top-level key whose value is being read
  size_t names_ = 0;                  // top-level keys so far, "__metadata__" aside
  size_t values_in_top_ = 0;          // JSON values in the top-level value being read
  json building_;                     // that value, while it is a container
  std::vector<json*> open_;           // its containers still open, innermost last
  std::string pending_key_;           // the key of the next value in the innermost open object
  std::vector<std::set<std::string>> keys_;  // the keys seen so far in each object below the top being read
  bool metadata_seen_ = false;
  json metadata_;
  std::vector<TensorEntry> entries_;
  // Format 2's checksum is of the canonical text of the whole header: kept, as each entry's own canonical text,
  // once the metadata shows the file carries that checksum.
  bool canonical_wanted_;
  bool read_again_for_canonical_ = false;
  size_t tensors_read_ = 0;
  std::vector<std::pair<std::string, std::string>> canonical_parts_;
  // A tensor entry found wrong is reported after format 2's checksum, which says "damaged" first when it fails.
  std::string entry_error_;
};

// A key given twice in one object (see above).
[[noreturn]] static void fail_key_twice(const std::string& source, const std::string& key) {
  fail(source, "header JSON gives the key '" + escape_for_message(key) +
                   "' twice in one object; the file is damaged or was edited");
}

bool HeaderReader::key(string_t& key) {
  events_++;
  if (depth_ == 1) {
    const bool metadata = key == "__metadata__";
    if (metadata && metadata_seen_) fail_key_twice(source_, key);
    if (!metadata && max_tensors_ > 0 && ++names_ > max_tensors_)
      fail(source_, "header lists more than " + std::to_string(max_tensors_) + " tensors, more than the largest "
                        "model this program builds has: the file is not one of its checkpoints, or it is damaged");
    name_ = key;
    values_in_top_ = 0;
    return true;
  }
  if (!top_is_object_) return true;
  count_value();
  if (!keys_.empty() && !keys_.back().insert(key).second) fail_key_twice(source_, key);
  pending_key_ = key;
  return true;
}

void HeaderReader::count_value() {
  const bool metadata = name_ == "__metadata__";
  const size_t limit = metadata ? kMaxMetadataValues : kMaxEntryValues;
  if (++values_in_top_ <= limit) return;
  if (metadata) fail(source_, "__metadata__ holds more than " + std::to_string(limit) + " JSON values");
  fail(source_, "tensor '" + escape_for_message(name_) + "': entry holds more than " + std::to_string(limit) +
                    " JSON values (a tensor entry holds dtype, shape and data_offsets only)");
}

json& HeaderReader::add(json v) {
  json& container = *open_.back();
  if (container.is_array()) {
    container.push_back(std::move(v));
    return container.back();
  }
  json& slot = container[pending_key_];
  slot = std::move(v);
  return slot;
}

bool HeaderReader::value(json v) {
  events_++;
  if (depth_ == 0) {
    top_type_ = v.type_name();
    return true;
  }
  if (!top_is_object_) return true;  // refused in finish; nothing is kept
  if (depth_ == 1) {
    count_value();
    take(std::move(v));
    return true;
  }
  count_value();
  add(std::move(v));
  return true;
}

bool HeaderReader::open(json container) {
  events_++;
  if (depth_ >= 3) fail(source_, "header JSON is nested deeper than a safetensors header can be");
  depth_++;
  const bool object = container.is_object();
  if (depth_ == 1) {
    top_type_ = container.type_name();
    top_is_object_ = object;
    return true;
  }
  if (!top_is_object_) return true;
  count_value();
  if (object) keys_.emplace_back();
  if (depth_ == 2) {
    building_ = std::move(container);
    open_.assign(1, &building_);
    return true;
  }
  open_.push_back(&add(std::move(container)));
  return true;
}

bool HeaderReader::close() {
  events_++;
  depth_--;
  if (depth_ == 0 || !top_is_object_) return true;
  count_value();
  if (open_.back()->is_object()) keys_.pop_back();
  open_.pop_back();
  if (open_.empty()) take(std::move(building_));
  return true;
}

void HeaderReader::take(json top_value) {
  const EmptiedAtExit emptied{top_value};
  if (name_ == "__metadata__") {
    metadata_seen_ = true;
    metadata_ = std::move(top_value);
    const bool carries = metadata_.is_object() && metadata_.contains(kCanonicalHeaderChecksumKey);
    read_again_for_canonical_ = carries && !canonical_wanted_ && tensors_read_ > 0;
    canonical_wanted_ = canonical_wanted_ || carries;
    return;
  }
  tensors_read_++;
  if (canonical_wanted_) canonical_parts_.emplace_back(name_, top_value.dump());
  if (!entry_error_.empty()) return;  // the file is refused anyway: nothing more is kept
  try {
    entries_.push_back(parse_tensor_entry(name_, top_value, data_section_size_, source_));
  } catch (const std::runtime_error& error) {
    if (metadata_seen_ && !canonical_wanted_) throw;
    entry_error_ = error.what();
  }
}

// nlohmann's json keeps an object's keys in a std::map, sorted by their bytes (for UTF-8, code point order, as
// Python's sort_keys), and dump() writes no whitespace, escapes only '"', '\\' and control characters (as \n or
// \u00XX, lower-case hex, as Python) and leaves other characters as UTF-8: each part's text is canonical by
// construction, and the parts are put in the same byte order here.
std::string HeaderReader::canonical_text() const {
  std::vector<std::pair<std::string, std::string>> parts = canonical_parts_;
  if (metadata_seen_) parts.emplace_back("__metadata__", canonical_metadata_dump(metadata_));
  std::sort(parts.begin(), parts.end());
  std::string text = "{";
  for (const auto& [name, part] : parts) {
    if (text.size() > 1) text += ",";
    text += json(name).dump() + ":" + part;
  }
  return text + "}";
}

void HeaderReader::finish(SafetensorsContents& contents, std::vector<TensorEntry>& entries) {
  if (!top_is_object_) fail(source_, std::string("header is a JSON ") + top_type_ + ", expected an object");
  // Two entries of one name: found by sorting, so the names need no set of their own while the header is read.
  std::sort(entries_.begin(), entries_.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  for (size_t i = 1; i < entries_.size(); i++)
    if (entries_[i].name == entries_[i - 1].name) fail_key_twice(source_, entries_[i].name);
  if (metadata_seen_) contents.metadata = parse_metadata(metadata_, source_);
  // Format 2's, of the canonical text, before the tensor table is judged: a damaged header is reported as that.
  if (contents.metadata.count(kCanonicalHeaderChecksumKey))
    contents.canonical_header_verified = verify_canonical_header_checksum(contents.metadata, canonical_text(), source_);
  if (!entry_error_.empty()) throw std::runtime_error(entry_error_);
  entries = std::move(entries_);
}

// The header length in the first 8 bytes, checked against the limit and the file's size before anything else is
// read or parsed.
static uint64_t checked_header_length(const uint8_t* bytes, uint64_t size, const std::string& source) {
  if (size < length_prefix_bytes)
    fail(source, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | bytes[i];  // little-endian, on any host
  if (header_size > max_header_bytes)
    fail(source, "header length " + std::to_string(header_size) + " bytes is absurdly large (limit " +
                     std::to_string(max_header_bytes) + "); this is not a safetensors file or it is corrupt");
  const uint64_t bytes_after_prefix = size - length_prefix_bytes;
  if (header_size > bytes_after_prefix)
    fail(source, "header length is " + std::to_string(header_size) + " bytes, but only " +
                     std::to_string(bytes_after_prefix) + " bytes follow (the file is truncated, or its length is "
                     "damaged)");
  if (header_size < 2)  // "{}" is the shortest header; a file of zeros is no checkpoint however long it is
    fail(source, "header is not valid JSON: its length is " + std::to_string(header_size) +
                     " bytes, too short for a JSON object");
  return header_size;
}

static void copy_tensors(const std::vector<TensorEntry>& entries, const uint8_t* data_section,
                         SafetensorsContents& contents);

SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& source) {
  return parse_safetensors(bytes, size, source, nullptr);
}

SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& source,
                                      size_t* header_events, size_t max_tensors) {
  const uint64_t header_size = checked_header_length(bytes, size, source);
  const uint64_t bytes_after_prefix = size - length_prefix_bytes;

  const bool header_verified = verify_header_checksum(bytes, size, header_size, source);
  const uint8_t* data_section = bytes + length_prefix_bytes + header_size;
  const uint64_t data_section_size = bytes_after_prefix - header_size;

  // JSON text never holds a raw NUL, but nlohmann's parser stops at one as at the end of its input: a flipped
  // bit in the padding (a space, 0x20, becoming 0x00) would hide whatever follows it.
  const uint8_t* header = bytes + length_prefix_bytes;
  if (const void* nul = std::memchr(header, 0, size_t(header_size)))
    fail(source, "header holds a NUL byte at file offset " +
                     std::to_string(length_prefix_bytes + size_t(static_cast<const uint8_t*>(nul) - header)) +
                     ": the file is damaged");
  SafetensorsContents contents;
  contents.header_verified = header_verified;
  std::vector<TensorEntry> entries;
  HeaderReader reader(source, data_section_size, max_tensors, false);
  try {
    json::sax_parse(header, header + header_size, &reader);
    if (reader.read_again_for_canonical()) {
      HeaderReader again(source, data_section_size, max_tensors, true);
      json::sax_parse(header, header + header_size, &again);
      again.finish(contents, entries);
    } else {
      reader.finish(contents, entries);
    }
  } catch (const json::exception& error) {
    fail(source, "header is not valid JSON: " + escape_for_message(error.what()));
  } catch (const std::bad_alloc&) {
    fail(source, "header of " + std::to_string(header_size) + " bytes: there is not enough memory to read it");
  }
  if (header_events) *header_events = reader.events();
  check_no_overlap(entries, source);
  contents.data_verified = verify_data_checksum(contents.metadata, data_section, data_section_size, source);
  contents.metadata.erase(kDataChecksumKey);  // verified; what the caller wrote is what it reads back
  contents.metadata.erase(kHeaderChecksumKey);
  contents.metadata.erase(kCanonicalHeaderChecksumKey);
  // Only now allocate: without overlaps, the tensors together need at most the data section's size.
  try {
    copy_tensors(entries, data_section, contents);
  } catch (const std::bad_alloc&) {
    fail(source, std::to_string(entries.size()) + " tensors of " + std::to_string(data_section_size) + " bytes in all: "
                 "there is not enough memory to read them");
  }
  return contents;
}

// The tensors' bytes from the data section into contents.tensors (little-endian floats to the host's).
static void copy_tensors(const std::vector<TensorEntry>& entries, const uint8_t* data_section,
                         SafetensorsContents& contents) {
  for (const TensorEntry& entry : entries) {
    LoadedTensor& tensor = contents.tensors[entry.name];
    tensor.shape = entry.shape;
    const size_t byte_count = size_t(entry.end - entry.begin);
    tensor.data.resize(byte_count / sizeof(float));
    if (byte_count == 0) continue;
    // memcpy, not a pointer cast: the bytes need not be 4-byte aligned in memory.
    std::memcpy(tensor.data.data(), data_section + entry.begin, byte_count);
    convert_floats_between_little_endian_and_host(reinterpret_cast<uint8_t*>(tensor.data.data()), byte_count);
  }
}

SafetensorsContents read_safetensors(const std::string& path, size_t max_tensors) {
  // The header length first: a large file that is no checkpoint is refused before it is read (a 3 GB file took 28 s).
  const std::string bytes = read_regular_file(path, length_prefix_bytes, [&path](const std::string& prefix, uint64_t size) {
    checked_header_length(reinterpret_cast<const uint8_t*>(prefix.data()), size, path);
  });
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path, nullptr, max_tensors);
}
