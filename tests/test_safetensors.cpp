// Tests for src/io/safetensors.* and src/io/atomic_file.*. The byte-layout test builds its expected file by hand (length
// prefix, JSON text, float bytes), so compatibility with Python's readers does not rest on our own writer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/crc32c.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------------------
// Helpers

static std::vector<uint8_t> bytes_of(std::initializer_list<unsigned> values) {
  return std::vector<uint8_t>(values.begin(), values.end());
}

static void append(std::vector<uint8_t>& out, const std::string& text) { out.insert(out.end(), text.begin(), text.end()); }

static std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

static void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A file with the given header text (not padded, as other writers may do) followed by `data_bytes` zero bytes.
static std::vector<uint8_t> file_with_header(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> file;
  for (int i = 0; i < 8; ++i) file.push_back(uint8_t((uint64_t(header.size()) >> (8 * i)) & 0xff));
  append(file, header);
  file.resize(file.size() + data_bytes, 0);
  return file;
}

// The message parse_safetensors throws for `file`, or "" if it accepted it.
static std::string parse_error(const std::vector<uint8_t>& file) {
  try {
    parse_safetensors(file.data(), file.size(), "bad.safetensors");
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "";
}

// Asserts that the file is rejected with a message naming the source and containing every key word.
static void expect_rejected(const std::vector<uint8_t>& file, std::initializer_list<std::string> key_words) {
  const std::string message = parse_error(file);
  ASSERT_FALSE(message.empty()) << "accepted a bad file";
  EXPECT_NE(message.find("bad.safetensors"), std::string::npos) << message;
  for (const std::string& word : key_words) EXPECT_NE(message.find(word), std::string::npos) << message;
}

static void expect_header_rejected(const std::string& header, size_t data_bytes,
                                   std::initializer_list<std::string> key_words) {
  expect_rejected(file_with_header(header, data_bytes), key_words);
}

static float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// A fresh temporary directory per test, removed afterwards (even if a test made it read-only).
class SafetensorsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "plaingpt_st_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir);
  }
  std::string path(const std::string& name) const { return dir + "/" + name; }
  bool has_temporary_files() const {
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().find(".tmp") != std::string::npos) return true;
    return false;
  }
  std::string dir;
};

// ---------------------------------------------------------------------------------------------------------------
// Round trip and layout

TEST_F(SafetensorsFiles, RoundTripIsBitExact) {
  const std::vector<float> matrix = {1.5f, -2.25f, 3e-38f, float_from_bits(0x00000001),  // denormal
                                     -0.0f, INFINITY, -INFINITY, float_from_bits(0x7fc00123)};  // NaN payload
  const std::vector<float> scalar = {42.0f};
  std::vector<float> odd_values(3 * 1 * 7);
  for (size_t i = 0; i < odd_values.size(); ++i) odd_values[i] = float(i) * 0.1f - 1.0f;
  const std::vector<TensorView> tensors = {
      {"wte", {2, 4}, matrix.data()},
      {"scalar", {}, scalar.data()},              // 0-d: one element
      {"empty", {0, 5}, nullptr},                 // no elements, no bytes
      {"blocks.0.odd", {3, 1, 7}, odd_values.data()},
  };
  const std::map<std::string, std::string> metadata = {
      {"vocab", "héllo wörld ✓ 日本語 🙂"}, {"config", "{\"n_layer\": 2}\nline two\ttab \"quoted\" \\"},
      {"ключ", ""}};
  const std::string file = path("ckpt.safetensors");
  write_safetensors(file, tensors, metadata);

  const SafetensorsContents loaded = read_safetensors(file);
  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const TensorView& original : tensors) {
    SCOPED_TRACE(original.name);
    ASSERT_EQ(loaded.tensors.count(original.name), 1u);
    const LoadedTensor& tensor = loaded.tensors.at(original.name);
    EXPECT_EQ(tensor.shape, original.shape);
    size_t count = 1;
    for (int64_t dim : original.shape) count *= size_t(dim);
    ASSERT_EQ(tensor.data.size(), count);
    if (count > 0) {
      EXPECT_EQ(std::memcmp(tensor.data.data(), original.data, count * sizeof(float)), 0);
    }
  }
  EXPECT_FALSE(has_temporary_files());
}

TEST_F(SafetensorsFiles, DataSectionIsEightByteAlignedAndPaddedWithSpaces) {
  for (const char* name : {"a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh"}) {
    const float value = 1.0f;
    write_safetensors(path("aligned"), {{name, {1}, &value}}, {{"k", name}});
    const std::vector<uint8_t> file = read_bytes(path("aligned"));
    ASSERT_GE(file.size(), 8u);
    uint64_t header_size = 0;
    for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | file[size_t(i)];
    EXPECT_EQ((8 + header_size) % 8, 0u) << name;
    ASSERT_EQ(file.size(), 8 + header_size + 4);
    const std::string header(file.begin() + 8, file.begin() + 8 + std::ptrdiff_t(header_size));
    const size_t last_brace = header.find_last_of('}');
    EXPECT_EQ(header.find_first_not_of(' ', last_brace + 1), std::string::npos) << header;
  }
}

// The exact bytes Python's safetensors (or numpy reading the format by hand) sees for a tiny file.
static std::vector<uint8_t> hand_built_file() {
  std::vector<uint8_t> file = bytes_of({80, 0, 0, 0, 0, 0, 0, 0});  // header length 80, little-endian
  append(file, R"({"__metadata__":{"a":"b"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})");  // 79
  append(file, " ");                                                               // pad to 80: data at 88
  const std::vector<uint8_t> floats = bytes_of({0x00, 0x00, 0x80, 0x3f,   // 1.0f  = 0x3f800000
                                                0x00, 0x00, 0x20, 0xc0}); // -2.5f = 0xc0200000
  file.insert(file.end(), floats.begin(), floats.end());
  return file;
}

TEST(Safetensors, HandBuiltFileParses) {
  const std::vector<uint8_t> file = hand_built_file();
  ASSERT_EQ(file.size(), 96u);
  const SafetensorsContents contents = parse_safetensors(file.data(), file.size(), "hand");
  EXPECT_EQ(contents.metadata, (std::map<std::string, std::string>{{"a", "b"}}));
  ASSERT_EQ(contents.tensors.size(), 1u);
  EXPECT_EQ(contents.tensors.at("x").shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(contents.tensors.at("x").data, (std::vector<float>{1.0f, -2.5f}));
}

// The same file as the writer makes it: the metadata also holds the data's CRC-32C (checked against the standard
// check values in test_integrity.cpp) and, first in the header, the CRC-32C of the file's first 8 + N bytes without
// its own eight digits, written out here by hand; the header is padded for the longer metadata.
static std::vector<uint8_t> hand_built_file_with_checksum() {
  const std::vector<uint8_t> floats = bytes_of({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0});
  const std::string crc = crc32c_hex(crc32c(floats.data(), floats.size()));
  const std::string before = R"({"__metadata__":{"plaingpt.header_bytes_crc32c":")";
  std::string after = R"(","a":"b","plaingpt.data_crc32c":")" + crc +
                      R"("},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";  // 155 bytes in all
  after.append((8 - (before.size() + 8 + after.size()) % 8) % 8, ' ');              // 160
  const std::string length = {char(before.size() + 8 + after.size()), 0, 0, 0, 0, 0, 0, 0};
  const std::string covered = length + before + after;
  const std::string header_crc = crc32c_hex(crc32c(covered.data(), covered.size()));
  std::vector<uint8_t> file;
  append(file, length + before + header_crc + after);
  file.insert(file.end(), floats.begin(), floats.end());
  return file;
}

// Format 2's header checksum, of the header's canonical text (keys sorted, no spaces, no checksum keys), is still
// verified: a file as format 2 wrote it loads, and one canonical byte changed is refused.
TEST(Safetensors, AFormat2HeaderChecksumIsStillVerified) {
  const std::vector<uint8_t> floats = bytes_of({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0});
  const std::string crc = crc32c_hex(crc32c(floats.data(), floats.size()));
  for (const std::string value : {"b", "c"}) {
    const std::string canonical = R"({"__metadata__":{"a":"b"},"x":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
    const std::string header_crc = crc32c_hex(crc32c(canonical.data(), canonical.size()));
    std::string header = R"({"__metadata__":{"a":")" + value + R"(","plaingpt.data_crc32c":")" + crc +
                         R"(","plaingpt.header_crc32c":")" + header_crc +
                         R"("},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    std::vector<uint8_t> file = bytes_of({uint8_t(header.size()), 0, 0, 0, 0, 0, 0, 0});
    append(file, header);
    file.insert(file.end(), floats.begin(), floats.end());
    SCOPED_TRACE(value);
    if (value == "b") {
      const SafetensorsContents contents = parse_safetensors(file.data(), file.size(), "format 2");
      EXPECT_TRUE(contents.canonical_header_verified);
      EXPECT_FALSE(contents.header_verified);
      EXPECT_EQ(contents.metadata, (std::map<std::string, std::string>{{"a", "b"}}));
    } else {
      expect_rejected(file, {"the header (settings, step, tensor table) does not match the checksum"});
    }
  }
}

TEST_F(SafetensorsFiles, WriterProducesTheHandBuiltBytes) {
  const float values[] = {1.0f, -2.5f};
  write_safetensors(path("x.safetensors"), {{"x", {2}, values}}, {{"a", "b"}});
  EXPECT_EQ(read_bytes(path("x.safetensors")), hand_built_file_with_checksum());
  // and reads back with the metadata as written (the checksum verified and taken out)
  EXPECT_EQ(read_safetensors(path("x.safetensors")).metadata, (std::map<std::string, std::string>{{"a", "b"}}));
}

TEST(Safetensors, UnpaddedHeaderWithUnalignedDataParses) {
  // Another writer might not pad: the floats then start at file offset 62, not a multiple of 4.
  std::vector<uint8_t> file = file_with_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 0);
  const std::vector<uint8_t> floats = bytes_of({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0});
  file.insert(file.end(), floats.begin(), floats.end());
  const SafetensorsContents contents = parse_safetensors(file.data(), file.size(), "unaligned");
  EXPECT_EQ(contents.tensors.at("x").data, (std::vector<float>{1.0f, -2.5f}));
}

TEST(Safetensors, EmptyHeaderObjectIsAnEmptyCheckpoint) {
  const std::vector<uint8_t> file = file_with_header("{}      ", 0);
  const SafetensorsContents contents = parse_safetensors(file.data(), file.size(), "empty");
  EXPECT_TRUE(contents.tensors.empty());
  EXPECT_TRUE(contents.metadata.empty());
}

// ---------------------------------------------------------------------------------------------------------------
// Rejections: one test per problem

static const char* const tensor_ok = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

TEST(SafetensorsRejects, FileShorterThanEightBytes) {
  expect_rejected(bytes_of({1, 0, 0, 0, 0, 0, 0}), {"7 bytes", "too short"});
  expect_rejected({}, {"0 bytes"});
}

TEST(SafetensorsRejects, HeaderLengthBeyondFile) {
  std::vector<uint8_t> file = file_with_header("{}", 0);
  file[0] = 200;  // claims 200 header bytes, 2 are present
  expect_rejected(file, {"200", "only 2 bytes"});
}

TEST(SafetensorsRejects, HeaderLengthAbsurd) {
  std::vector<uint8_t> file = file_with_header("{}", 0);
  file[3] = 0x10;  // 0x10000002 bytes = 268 MB
  expect_rejected(file, {"268435458", "absurdly large"});
  for (int i = 0; i < 8; ++i) file[size_t(i)] = 0xff;  // 2^64 - 1
  expect_rejected(file, {"18446744073709551615", "absurdly large"});
}

TEST(SafetensorsRejects, HeaderNotJson) {
  expect_header_rejected(R"({"w": {"dtype": "F32",, }})", 0, {"not valid JSON", "byte 23"});
  expect_header_rejected("", 0, {"not valid JSON"});
}

TEST(SafetensorsRejects, HeaderWithInvalidUtf8) {
  expect_header_rejected("{\"w\xff\": 1}", 0, {"not valid JSON", "UTF-8"});
}

TEST(SafetensorsRejects, HeaderNestedTooDeep) {
  expect_header_rejected(std::string(100000, '['), 0, {"nested deeper"});
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", 8, {"nested deeper"});
}

TEST(SafetensorsRejects, HeaderNotObject) {
  expect_header_rejected("[1, 2]", 0, {"array", "expected an object"});
  expect_header_rejected("\"text\"", 0, {"string", "expected an object"});
}

TEST(SafetensorsRejects, MetadataNotObject) {
  expect_header_rejected(R"({"__metadata__":["a","b"]})", 0, {"__metadata__", "array"});
}

TEST(SafetensorsRejects, MetadataValueNotString) {
  expect_header_rejected(R"({"__metadata__":{"step":100}})", 0, {"__metadata__", "'step'", "number"});
}

TEST(SafetensorsRejects, TensorEntryNotObject) {
  expect_header_rejected(R"({"w":[0,8]})", 8, {"tensor 'w'", "array", "expected an object"});
}

TEST(SafetensorsRejects, TensorEntryWithoutDtype) {
  expect_header_rejected(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8, {"tensor 'w'", "dtype"});
}

TEST(SafetensorsRejects, TensorEntryWithoutShape) {
  expect_header_rejected(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8, {"tensor 'w'", "shape"});
}

TEST(SafetensorsRejects, TensorEntryWithoutDataOffsets) {
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[2]}})", 8, {"tensor 'w'", "data_offsets"});
}

TEST(SafetensorsRejects, DtypeOtherThanF32) {
  expect_header_rejected(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", 4,
                         {"tensor 'w'", "BF16", "F32"});
  expect_header_rejected(R"({"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", 8, {"tensor 'w'", "32", "F32"});
}

TEST(SafetensorsRejects, ShapeNotArray) {
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8, {"tensor 'w'", "shape"});
}

TEST(SafetensorsRejects, ShapeWithNegativeDimension) {
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8,
                         {"tensor 'w'", "shape [-2]", "non-negative integers"});
}

TEST(SafetensorsRejects, ShapeWithNonIntegerDimension) {
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8,
                         {"tensor 'w'", "non-negative integers"});
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8,
                         {"tensor 'w'", "non-negative integers"});
}

TEST(SafetensorsRejects, ShapeWhoseElementCountOverflows) {
  // 2^32 * 2^32 = 2^64 does not fit in uint64.
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
                         {"tensor 'w'", "overflows"});
  // 2^62 elements fit, but 2^64 bytes do not.
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8,
                         {"tensor 'w'", "overflows"});
  // Larger than int64 can hold as a dimension.
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0]}})", 0,
                         {"tensor 'w'", "overflows"});
}

TEST(SafetensorsRejects, DataOffsetsNotTwoNonNegativeIntegers) {
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,16]}})", 16,
                         {"tensor 'w'", "data_offsets", "two non-negative integers"});
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8,
                         {"tensor 'w'", "data_offsets", "two non-negative integers"});
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":"0-8"}})", 8,
                         {"tensor 'w'", "data_offsets", "two non-negative integers"});
}

TEST(SafetensorsRejects, DataOffsetsBeginAfterEnd) {
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8,
                         {"tensor 'w'", "[8, 0]", "begin offset is after end"});
}

TEST(SafetensorsRejects, DataOffsetsEndBeyondDataSection) {
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 6,
                         {"tensor 'w'", "end offset 8", "data section of 6 bytes"});
  // Huge offsets must not wrap around in the bounds arithmetic.
  expect_header_rejected(
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551615]}})", 8,
      {"tensor 'w'", "end offset 18446744073709551615", "data section of 8 bytes"});
}

TEST(SafetensorsRejects, ByteSizeNotFourTimesElementCount) {
  expect_header_rejected(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}})", 24,
                         {"tensor 'w'", "12 bytes", "[2,3]", "needs 24"});
}

TEST(SafetensorsRejects, OverlappingTensors) {
  expect_header_rejected(
      std::string("{") + tensor_ok + R"(,"v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12,
      {"'w'", "'v'", "overlap", "[0, 8]", "[4, 12]"});
  // Many tensors claiming the same bytes would otherwise decode the data section once per tensor.
  std::string header = "{";
  for (int i = 0; i < 100; ++i)
    header += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
              R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  expect_header_rejected(header + "}", 8, {"overlap"});
}

TEST(Safetensors, EmptyTensorsMayShareAnOffset) {
  const std::string header = std::string("{") + tensor_ok +
                             R"(,"e1":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)" +
                             R"("e2":{"dtype":"F32","shape":[3,0],"data_offsets":[4,4]}})";
  EXPECT_EQ(parse_error(file_with_header(header, 8)), "");
}

// ---------------------------------------------------------------------------------------------------------------
// Fuzz: damaged files must give std::runtime_error, never a crash (run under ASan/UBSan to see over-reads).

TEST_F(SafetensorsFiles, DamagedFilesNeverCrash) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7}, c = {8, 9};
  write_safetensors(path("valid"), {{"a", {2, 3}, a.data()}, {"b", {}, b.data()}, {"c", {2}, c.data()}},
                    {{"note", "ü\n"}});
  const std::vector<uint8_t> valid = read_bytes(path("valid"));
  ASSERT_EQ(parse_error(valid), "");
  const size_t header_end = 8 + valid[0];

  // Parse a copy in its own exact-size allocation, so reading one byte too far is an ASan error.
  auto survives = [](const std::vector<uint8_t>& damaged) {
    std::vector<uint8_t> exact(damaged);
    exact.shrink_to_fit();
    try {
      parse_safetensors(exact.data(), exact.size(), "fuzz");
    } catch (const std::runtime_error&) {
      // expected for most damage
    } catch (...) {
      return false;
    }
    return true;
  };

  for (size_t length = 0; length < valid.size(); ++length) {
    const std::vector<uint8_t> truncated(valid.begin(), valid.begin() + std::ptrdiff_t(length));
    EXPECT_TRUE(survives(truncated)) << "truncated to " << length;
    EXPECT_NE(parse_error(truncated), "") << "truncated to " << length;
  }

  std::mt19937 random(12345);
  for (int trial = 0; trial < 4000; ++trial) {
    std::vector<uint8_t> damaged = valid;
    // Mostly damage the length prefix and JSON, where the parser's decisions are; sometimes anywhere.
    const size_t region = trial % 4 == 0 ? damaged.size() : header_end;
    const int flips = 1 + int(random() % 4);
    for (int i = 0; i < flips; ++i) {
      const size_t position = random() % region;
      damaged[position] = trial % 2 ? uint8_t(random()) : uint8_t(damaged[position] ^ (1u << (random() % 8)));
    }
    EXPECT_TRUE(survives(damaged)) << "trial " << trial;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Reading files

TEST_F(SafetensorsFiles, ReadMissingFileNamesThePath) {
  try {
    read_safetensors(path("missing.safetensors"));
    FAIL() << "no exception";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("missing.safetensors"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("No such file"), std::string::npos) << error.what();
  }
  EXPECT_THROW(read_safetensors(dir), std::runtime_error);  // a directory
}

TEST_F(SafetensorsFiles, ReadErrorsNameTheFile) {
  write_bytes(path("short.safetensors"), bytes_of({1, 2, 3}));
  try {
    read_safetensors(path("short.safetensors"));
    FAIL() << "no exception";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(path("short.safetensors")), std::string::npos) << error.what();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Atomic writes

static const std::vector<uint8_t> old_contents = bytes_of({'o', 'l', 'd', 0, 1, 2, 3});

TEST_F(SafetensorsFiles, OverwritesExistingFileAndLeavesNoTemporary) {
  write_bytes(path("ckpt"), old_contents);
  const std::string text = "new contents";
  write_file_atomically(path("ckpt"), {{text.data(), 4}, {text.data() + 4, text.size() - 4}, {nullptr, 0}});
  const std::vector<uint8_t> written = read_bytes(path("ckpt"));
  EXPECT_EQ(std::string(written.begin(), written.end()), text);
  EXPECT_FALSE(has_temporary_files());
}

TEST_F(SafetensorsFiles, WriteIntoMissingDirectoryThrows) {
  const std::string target = path("no_such_dir/ckpt.safetensors");
  const float value = 1;
  try {
    write_safetensors(target, {{"w", {1}, &value}}, {});
    FAIL() << "no exception";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(target), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("No such file or directory"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(fs::exists(path("no_such_dir")));
  EXPECT_FALSE(has_temporary_files());
}

TEST_F(SafetensorsFiles, WriteOverDirectoryThrows) {
  fs::create_directory(path("ckpt"));
  write_bytes(path("ckpt/inside"), old_contents);
  try {
    write_file_atomically(path("ckpt"), {{"data", 4}});
    FAIL() << "no exception";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(path("ckpt")), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("directory"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(fs::is_directory(path("ckpt")));
  EXPECT_EQ(read_bytes(path("ckpt/inside")), old_contents);
  EXPECT_FALSE(has_temporary_files());
}

TEST_F(SafetensorsFiles, WriteIntoReadOnlyDirectoryThrows) {
  write_bytes(path("ckpt"), old_contents);
  // Root ignores directory permissions: as root, the write runs in a child process that has become nobody, the
  // owner of the read-only directory, and sends back what it caught through a pipe.
  const bool root = geteuid() == 0;
  const uid_t nobody = 65534;
  if (root) {
    ASSERT_EQ(chown(dir.c_str(), nobody, nobody), 0);
  }
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  auto attempt = [&]() -> std::string {
    try {
      write_file_atomically(path("ckpt"), {{"data", 4}});
      return "no exception";
    } catch (const std::runtime_error& error) {
      return error.what();
    }
  };
  std::string message;
  if (!root) {
    message = attempt();
  } else {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      if (setgroups(0, nullptr) != 0 || setgid(nobody) != 0 || setuid(nobody) != 0) _exit(2);
      const std::string m = attempt();
      _exit(write(fds[1], m.data(), m.size()) == (ssize_t)m.size() ? 0 : 3);
    }
    close(fds[1]);
    char buffer[4096];
    for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, n);
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  EXPECT_NE(message.find(path("ckpt")), std::string::npos) << message;
  EXPECT_NE(message.find("Permission denied"), std::string::npos) << message;
  EXPECT_EQ(read_bytes(path("ckpt")), old_contents);
  EXPECT_FALSE(has_temporary_files());
}

TEST_F(SafetensorsFiles, FailedWriteLeavesOldFileByteIdentical) {
  write_bytes(path("ckpt"), old_contents);
  // Failure before any I/O: metadata that is not UTF-8 cannot go into a JSON header.
  EXPECT_THROW(write_safetensors(path("ckpt"), {}, {{"bad", "\xff"}}), std::runtime_error);
  EXPECT_EQ(read_bytes(path("ckpt")), old_contents);
  // Failure creating the temporary: something else occupies its name.
  fs::create_directory(temporary_path_for(path("ckpt")));
  EXPECT_THROW(write_file_atomically(path("ckpt"), {{"data", 4}}), std::runtime_error);
  EXPECT_EQ(read_bytes(path("ckpt")), old_contents);
}

TEST_F(SafetensorsFiles, DiskFullLeavesOldFileAndNoTemporary) {
  const std::string target = path("ckpt.safetensors");
  write_bytes(target, old_contents);
  const std::vector<float> big(1 << 20, 0.5f);  // 4 MB, far above the 64 kB limit below

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exceeding RLIMIT_FSIZE makes write() fail with EFBIG, the same path as a full disk; ignoring SIGXFSZ keeps
    // the kernel from killing the process instead. Exit codes: 0 = threw as expected, 1 = no throw, 2 = wrong.
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit = {64 * 1024, 64 * 1024};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(2);
    try {
      write_safetensors(target, {{"big", {int64_t(big.size())}, big.data()}}, {});
    } catch (const std::runtime_error& error) {
      const std::string message = error.what();
      _exit(message.find(target) != std::string::npos && message.find("File too large") != std::string::npos ? 0 : 2);
    } catch (...) {
      _exit(2);
    }
    _exit(1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child died from a signal";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the write did not fail; 2: wrong exception or message";
  EXPECT_EQ(read_bytes(target), old_contents);
  EXPECT_FALSE(has_temporary_files());
}
