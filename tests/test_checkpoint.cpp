// Tests for src/io/checkpoint.*: exact round trips (weights, optimizer state, vocabulary, masks), the on-disk layout
// read back with a hand-written safetensors parser, every kind of corrupt file, and atomic replacement.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <typeinfo>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "io/crc32c.h"
#include "io/safetensors.h"
#include "io/checkpoint.h"
#include "checkpoint_bytes.h"
#include "program_util.h"
#include "base/rng.h"
#include "train/trainer.h"

using nlohmann::json;
using progutil::read_file;
using progutil::TempDir;
using progutil::write_file;

namespace {

constexpr int kLayers = 2, kHeads = 2, kEmbd = 8, kBlock = 8;

// A Chinese vocabulary with one special token appended after the characters.
Tokenizer chinese_tokenizer() {
  Tokenizer tok = Tokenizer::from_text(U"从前有一只小猫，它很喜欢晒太阳。今天天气很好！");
  tok.add_special("[MASK]");
  return tok;
}

struct Fixture {
  Tokenizer tokenizer = chinese_tokenizer();
  std::unique_ptr<GPT> model;
  ResumeState state;

  Fixture() {
    ModelConfig c;
    c.n_layer = kLayers, c.n_head = kHeads, c.n_embd = kEmbd, c.block_size = kBlock;
    c.vocab_size = tokenizer.size();
    model = std::make_unique<GPT>(c, std::vector<AttentionMask>{AttentionMask::parse("causal"),
                                                                AttentionMask::parse("window:3")});
    model->init_weights(42);
    // Ones and zeros are poor witnesses of a bit-exact copy: give every parameter a distinct awkward value.
    Rng rng(7);
    for (float& p : model->params_memory()) p += (float)(1e-3 * rng.normal());
    state.step = 37;
    Rng batch_rng(99);
    for (int i = 0; i < 5; i++) batch_rng.next_u64();
    state.batch_rng = batch_rng.state();
    TrainConfig tc;
    tc.seed = 12345;
    tc.adamw.lr = 3e-4f;
    state.train_config = to_json(tc);
    state.optimizer.t = 41;
    state.optimizer.m.resize(model->num_params());
    state.optimizer.v.resize(model->num_params());
    for (size_t i = 0; i < model->num_params(); i++) {
      state.optimizer.m[i] = (float)(1e-2 * rng.normal());
      state.optimizer.v[i] = (float)(1e-4 * std::fabs(rng.normal()) + 1e-12);
    }
  }
};

std::string error_of(const std::string& path) {
  try {
    load_checkpoint(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// A checkpoint file split into its header JSON and data section, to edit and write back by hand.
struct RawFile {
  nlohmann::ordered_json header;  // in the order written: the header's checksum stays first
  std::string data;

  static RawFile read(const std::string& path) {
    const std::string bytes = read_file(path);
    EXPECT_GE(bytes.size(), 8u);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | (uint8_t)bytes[i];
    RawFile f;
    f.header = nlohmann::ordered_json::parse(bytes.substr(8, n));
    f.data = bytes.substr(8 + n);
    return f;
  }
  void write(const std::string& path) const { write_with_header_text(path, header.dump()); }
  void write_with_header_text(const std::string& path, const std::string& text) const {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; i++) bytes[i] = (char)((uint64_t(text.size()) >> (8 * i)) & 0xff);
    write_file(path, bytes + text + data);
  }
};

// The load fails with a std::runtime_error whose message names the file and each of `words`.
void expect_load_fails(const std::string& path, const std::vector<std::string>& words) {
  SCOPED_TRACE(path);
  std::string message;
  try {
    load_checkpoint(path);
    ADD_FAILURE() << "load_checkpoint accepted a bad file";
    return;
  } catch (const std::runtime_error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a " << typeid(e).name() << " instead of std::runtime_error: " << e.what();
    return;
  }
  if (std::getenv("PLAINGPT_SHOW_MESSAGES")) std::printf("  message: %s\n", message.c_str());
  EXPECT_CONTAINS(message, path);
  for (const std::string& w : words) EXPECT_CONTAINS(message, w);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Round trips

TEST(CheckpointRoundTrip, ResumableCheckpointIsBitIdentical) {
  TempDir dir;
  Fixture f;
  const std::string path = dir / "ckpt.safetensors";
  save_checkpoint(path, *f.model, f.tokenizer, &f.state);
  Checkpoint c = load_checkpoint(path);

  ASSERT_TRUE(c.model);
  const ModelConfig& a = f.model->config;
  const ModelConfig& b = c.model->config;
  EXPECT_EQ(b.n_layer, a.n_layer);
  EXPECT_EQ(b.n_head, a.n_head);
  EXPECT_EQ(b.n_embd, a.n_embd);
  EXPECT_EQ(b.block_size, a.block_size);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  ASSERT_EQ(c.model->params_memory().size(), f.model->params_memory().size());
  EXPECT_EQ(0, std::memcmp(c.model->params_memory().data(), f.model->params_memory().data(),
                           f.model->params_memory().size() * sizeof(float)));
  ASSERT_EQ(c.model->masks().size(), 2u);
  EXPECT_EQ(c.model->masks()[0].kind, AttentionMask::Causal);
  EXPECT_EQ(c.model->masks()[1].kind, AttentionMask::Window);
  EXPECT_EQ(c.model->masks()[1].size, 3);

  // Vocabulary: same characters in the same order, the special token after them.
  EXPECT_EQ(c.tokenizer.vocab_utf8(), f.tokenizer.vocab_utf8());
  EXPECT_EQ(c.tokenizer.size(), f.tokenizer.size());
  EXPECT_EQ(c.tokenizer.num_chars(), f.tokenizer.num_chars());
  ASSERT_EQ(c.tokenizer.specials(), std::vector<std::string>{"[MASK]"});
  EXPECT_EQ(c.tokenizer.special_id("[MASK]"), f.tokenizer.num_chars());
  const std::u32string text = U"今天小猫很喜欢晒太阳";
  EXPECT_EQ(c.tokenizer.encode(text, "t"), f.tokenizer.encode(text, "t"));
  EXPECT_EQ(c.tokenizer.decode(c.tokenizer.encode(text, "t")), "今天小猫很喜欢晒太阳");

  // Optimizer state and the run's bookkeeping.
  ASSERT_TRUE(c.resumable);
  EXPECT_EQ(c.resume.step, 37);
  EXPECT_EQ(c.resume.optimizer.t, 41);
  EXPECT_EQ(c.resume.batch_rng, f.state.batch_rng);
  EXPECT_EQ(c.resume.train_config, f.state.train_config);
  ASSERT_EQ(c.resume.optimizer.m.size(), f.state.optimizer.m.size());
  ASSERT_EQ(c.resume.optimizer.v.size(), f.state.optimizer.v.size());
  EXPECT_EQ(0, std::memcmp(c.resume.optimizer.m.data(), f.state.optimizer.m.data(),
                           f.state.optimizer.m.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(c.resume.optimizer.v.data(), f.state.optimizer.v.data(),
                           f.state.optimizer.v.size() * sizeof(float)));
  // The stored settings parse back to the values that were put in.
  TrainConfig tc = train_config_from_json(c.resume.train_config, path);
  EXPECT_EQ(tc.seed, 12345u);
  EXPECT_EQ(tc.adamw.lr, 3e-4f);
  // And the restored sampler continues the original stream.
  Rng original(99), restored;
  for (int i = 0; i < 5; i++) original.next_u64();
  restored.set_state(c.resume.batch_rng);
  for (int i = 0; i < 3; i++) EXPECT_EQ(restored.next_u64(), original.next_u64());
}

TEST(CheckpointRoundTrip, ObjectiveIsStored) {
  TempDir dir;
  Fixture f;
  const std::string path = dir / "mlm.safetensors";
  save_checkpoint(path, *f.model, f.tokenizer, nullptr, Objective::MLM);  // the vocabulary holds [MASK]
  EXPECT_EQ(load_checkpoint(path).objective, Objective::MLM);
  save_checkpoint(path, *f.model, f.tokenizer, &f.state);  // the default
  EXPECT_EQ(load_checkpoint(path).objective, Objective::CLM);
}

TEST(CheckpointRoundTrip, WeightsOnlyCheckpointIsNotResumable) {
  TempDir dir;
  Fixture f;
  const std::string path = dir / "weights.safetensors";
  save_checkpoint(path, *f.model, f.tokenizer, nullptr);
  Checkpoint c = load_checkpoint(path);
  EXPECT_FALSE(c.resumable);
  EXPECT_EQ(0, std::memcmp(c.model->params_memory().data(), f.model->params_memory().data(),
                           f.model->params_memory().size() * sizeof(float)));
  EXPECT_EQ(c.tokenizer.vocab_utf8(), f.tokenizer.vocab_utf8());
  // No optimizer tensors in the file: it is half the size of the resumable one.
  RawFile raw = RawFile::read(path);
  for (const auto& item : raw.header.items()) EXPECT_EQ(item.key().rfind("optimizer.", 0), std::string::npos);
  EXPECT_EQ(raw.data.size(), f.model->num_params() * sizeof(float));
}

// ---------------------------------------------------------------------------------------------------------------
// The file is plain safetensors with GPT-2 names; parsed here without the project's reader.

TEST(CheckpointFormat, PlainSafetensorsWithGpt2NamesAndShapes) {
  TempDir dir;
  Fixture f;
  const std::string path = dir / "ckpt.safetensors";
  save_checkpoint(path, *f.model, f.tokenizer, &f.state);
  const std::string bytes = read_file(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | (uint8_t)bytes[i];
  ASSERT_LE(8 + n, bytes.size());
  const json header = json::parse(bytes.substr(8, n));
  const size_t data_start = 8 + n;
  EXPECT_EQ(data_start % 8, 0u) << "data section should be 8-byte aligned";

  const int64_t V = f.tokenizer.size(), C = kEmbd;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"wte.weight", {V, C}},
      {"wpe.weight", {kBlock, C}},
      {"h.0.attn.c_attn.weight", {C, 3 * C}},
      {"h.1.attn.c_attn.bias", {3 * C}},
      {"h.0.attn.c_proj.weight", {C, C}},
      {"h.0.mlp.c_fc.weight", {C, 4 * C}},
      {"h.0.mlp.c_proj.weight", {4 * C, C}},
      {"h.1.ln_2.weight", {C}},
      {"ln_f.weight", {C}},
      {"ln_f.bias", {C}},
  };
  for (const auto& [name, shape] : expected) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(header.contains(name));
    const json& entry = header.at(name);
    EXPECT_EQ(entry.at("dtype"), "F32");
    EXPECT_EQ(entry.at("shape").get<std::vector<int64_t>>(), shape);
  }
  // Every parameter tensor's bytes are the model's floats, in the model's layout.
  for (const TensorSpec& t : f.model->table()) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(header.contains(t.name));
    const auto offsets = header.at(t.name).at("data_offsets").get<std::vector<uint64_t>>();
    ASSERT_EQ(offsets.size(), 2u);
    ASSERT_EQ(offsets[1] - offsets[0], t.numel * sizeof(float));
    ASSERT_LE(data_start + offsets[1], bytes.size());
    EXPECT_EQ(header.at(t.name).at("shape").get<std::vector<int64_t>>(), t.shape);
    // The host is little-endian (x86/ARM), as is the file.
    EXPECT_EQ(0, std::memcmp(bytes.data() + data_start + offsets[0], f.model->params_memory().data() + t.offset,
                             t.numel * sizeof(float)));
    const std::string m = "optimizer.m." + t.name;
    ASSERT_TRUE(header.contains(m));
    const auto mo = header.at(m).at("data_offsets").get<std::vector<uint64_t>>();
    EXPECT_EQ(0, std::memcmp(bytes.data() + data_start + mo[0], f.state.optimizer.m.data() + t.offset,
                             t.numel * sizeof(float)));
  }
  const json& meta = header.at("__metadata__");
  EXPECT_EQ(meta.at("format"), "plaingpt");
  EXPECT_EQ(meta.at("format_version"), "3");
  EXPECT_EQ(meta.at("n_layer"), "2");
  EXPECT_EQ(meta.at("n_embd"), "8");
  EXPECT_EQ(meta.at("mask"), "causal,window:3");
  EXPECT_EQ(meta.at("step"), "37");
  EXPECT_EQ(meta.at("vocab_size"), std::to_string(V));
  // Parameters and optimizer state, nothing more (plus the metadata).
  EXPECT_EQ(header.size(), 1 + 3 * f.model->table().size());
}

// ---------------------------------------------------------------------------------------------------------------
// Corrupt and foreign files

class CheckpointRejects : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = dir_ / "good.safetensors";
    save_checkpoint(good_, *f_.model, f_.tokenizer, &f_.state);
    good_bytes_ = read_file(good_);
    ASSERT_NO_THROW(load_checkpoint(good_));
  }
  // A copy of the good file with one edit. The checksums are brought up to date, as if the file had been
  // written that way, so each test reaches the check it is about (the checksum has its own tests in
  // test_integrity.cpp).
  std::string edited(const std::string& name, const std::function<void(RawFile&)>& edit) {
    RawFile raw = RawFile::read(good_);
    edit(raw);
    if (raw.header.contains("__metadata__") && raw.header["__metadata__"].contains(kDataChecksumKey))
      raw.header["__metadata__"][kDataChecksumKey] = crc32c_hex(crc32c(raw.data.data(), raw.data.size()));
    const std::string path = dir_ / name;
    raw.write(path);
    write_file(path, ckptbytes::resealed(read_file(path)));
    return path;
  }
  std::string edited_metadata(const std::string& name, const std::string& key, const std::string& value) {
    return edited(name, [&](RawFile& r) { r.header["__metadata__"][key] = value; });
  }

  TempDir dir_;
  Fixture f_;
  std::string good_, good_bytes_;
};

TEST_F(CheckpointRejects, EditedButValidFileStillLoads) {
  // The editing machinery itself (re-serialised header, same data) must not break a good file.
  Checkpoint c = load_checkpoint(edited("same.safetensors", [](RawFile&) {}));
  EXPECT_EQ(0, std::memcmp(c.model->params_memory().data(), f_.model->params_memory().data(),
                           f_.model->num_params() * sizeof(float)));
}

TEST_F(CheckpointRejects, TruncatedAtManyLengths) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | (uint8_t)good_bytes_[i];
  struct Case {
    size_t length;
    std::vector<std::string> words;
  };
  const size_t size = good_bytes_.size();
  const std::vector<Case> cases = {
      {0, {"0 bytes", "too short"}},
      {5, {"5 bytes", "too short"}},
      {8, {"truncated"}},                   // length prefix only
      {8 + 10, {"truncated"}},              // mid-header
      {8 + n - 1, {"truncated"}},           // one byte short of the header
      {8 + n, {"beyond the data section"}}, // header, no data
      {8 + n + 100, {"beyond the data section"}},
      {8 + n + (size - 8 - n) / 2, {"beyond the data section"}},  // mid-data
      {size - 1, {"beyond the data section"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("length " + std::to_string(c.length));
    const std::string path = dir_ / ("trunc" + std::to_string(c.length) + ".safetensors");
    write_file(path, good_bytes_.substr(0, c.length));
    expect_load_fails(path, c.words);
  }
}

TEST_F(CheckpointRejects, HeaderIsNotJson) {
  RawFile raw = RawFile::read(good_);
  const std::string path = dir_ / "badjson.safetensors";
  std::string text = raw.header.dump();
  text[text.size() / 2] = '{';  // breaks the syntax somewhere in the middle
  text.insert(0, "{\"oops\" ");
  raw.write_with_header_text(path, text);
  expect_load_fails(path, {"not valid JSON"});
}

TEST_F(CheckpointRejects, UnsupportedDtype) {
  expect_load_fails(edited("f16.safetensors", [](RawFile& r) { r.header["ln_f.bias"]["dtype"] = "F16"; }),
                    {"ln_f.bias", "F16"});
}

TEST_F(CheckpointRejects, WrongShapeWithTheSameByteCount) {
  // [C, 3C] → [3C, C]: the byte count still matches, so only the checkpoint layer can notice.
  const std::string path = edited("shape.safetensors", [](RawFile& r) {
    r.header["h.0.attn.c_attn.weight"]["shape"] = {3 * kEmbd, kEmbd};
  });
  expect_load_fails(path, {"h.0.attn.c_attn.weight", "shape", "[24, 8]", "[8, 24]"});
}

TEST_F(CheckpointRejects, WrongShapeWithAnotherByteCount) {
  const std::string path = edited("shape2.safetensors", [](RawFile& r) { r.header["ln_f.bias"]["shape"] = {4}; });
  expect_load_fails(path, {"ln_f.bias"});
}

TEST_F(CheckpointRejects, DataOffsetsPastTheEnd) {
  const std::string path = edited("offsets.safetensors", [](RawFile& r) {
    const uint64_t end = r.data.size();
    r.header["ln_f.bias"]["data_offsets"] = {end, end + kEmbd * 4};
  });
  expect_load_fails(path, {"ln_f.bias", "beyond"});
}

TEST_F(CheckpointRejects, MissingTensor) {
  expect_load_fails(edited("missing.safetensors", [](RawFile& r) { r.header.erase("h.1.mlp.c_fc.bias"); }),
                    {"h.1.mlp.c_fc.bias", "missing"});
  expect_load_fails(edited("missing_v.safetensors", [](RawFile& r) { r.header.erase("optimizer.v.ln_f.bias"); }),
                    {"optimizer.v.ln_f.bias", "missing"});
}

// Known issue (reported, not fixed here): the loader decides "resumable" from the presence of
// optimizer.m.<first tensor> alone, so a file missing exactly that tensor is rejected with a misleading
// "unexpected tensor 'optimizer.m.h.0.attn.c_attn.bias'" instead of naming the missing one. Enable once fixed.
TEST_F(CheckpointRejects, MissingFirstOptimizerTensorIsNamed) {
  expect_load_fails(edited("missing_m.safetensors", [](RawFile& r) { r.header.erase("optimizer.m.wte.weight"); }),
                    {"optimizer.m.wte.weight", "missing"});
}

TEST_F(CheckpointRejects, UnexpectedExtraTensor) {
  const std::string path = edited("extra.safetensors", [](RawFile& r) {
    const uint64_t end = r.data.size();
    r.data.append(4 * kEmbd, '\0');
    r.header["h.2.ln_1.weight"] = {{"dtype", "F32"}, {"shape", {kEmbd}}, {"data_offsets", {end, end + 4 * kEmbd}}};
  });
  expect_load_fails(path, {"h.2.ln_1.weight", "unexpected"});
}

TEST_F(CheckpointRejects, EmbeddingWidthNotDivisibleByHeads) {
  // n_head 3 with n_embd 8; the tensors are irrelevant because the config is checked first.
  expect_load_fails(edited_metadata("heads.safetensors", "n_head", "3"), {"n_embd", "n_head", "divisible"});
}

TEST_F(CheckpointRejects, UnknownMask) {
  expect_load_fails(edited_metadata("mask.safetensors", "mask", "sideways"), {"sideways"});
  expect_load_fails(edited_metadata("mask3.safetensors", "mask", "causal,causal,causal"), {"3", "2 layers"});
}

TEST_F(CheckpointRejects, VocabSizeDisagreesWithVocabulary) {
  const int V = f_.tokenizer.size();
  expect_load_fails(edited_metadata("vocab.safetensors", "vocab_size", std::to_string(V + 1)),
                    {"vocab_size", std::to_string(V + 1), std::to_string(V)});
}

TEST_F(CheckpointRejects, NonNumericMetadata) {
  expect_load_fails(edited_metadata("layers.safetensors", "n_layer", "two"), {"n_layer", "two"});
  expect_load_fails(edited_metadata("layers0.safetensors", "n_layer", "0"), {"n_layer"});
}

TEST_F(CheckpointRejects, NaNOrInfinityInAWeight) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::string path = edited("nan.safetensors", [&](RawFile& r) {
      const auto offsets = r.header["h.1.attn.c_proj.weight"]["data_offsets"].get<std::vector<uint64_t>>();
      std::memcpy(&r.data[offsets[0] + 4 * 5], &bad, 4);  // element 5
    });
    expect_load_fails(path, {"h.1.attn.c_proj.weight", "non-finite", "5"});
  }
}

TEST_F(CheckpointRejects, FutureFormatVersion) {
  expect_load_fails(edited_metadata("v99.safetensors", "format_version", "99"), {"version", "99"});
}

TEST_F(CheckpointRejects, NotAPlaingptFile) {
  expect_load_fails(edited("noformat.safetensors", [](RawFile& r) { r.header["__metadata__"].erase("format"); }),
                    {"format"});
  expect_load_fails(edited_metadata("other.safetensors", "format", "pytorch"), {"not a plaingpt", "pytorch"});
  // A safetensors file with tensors and no metadata at all (what a foreign exporter writes).
  expect_load_fails(edited("nometa.safetensors", [](RawFile& r) { r.header.erase("__metadata__"); }), {"format"});
}

TEST_F(CheckpointRejects, UnknownObjectiveOrMlmWithoutMaskToken) {
  expect_load_fails(edited_metadata("objective.safetensors", "objective", "gpt5"), {"objective", "gpt5"});
  // An MLM checkpoint whose vocabulary has no [MASK] could not be used to fill blanks.
  const std::string path = edited("nomask.safetensors", [](RawFile& r) {
    r.header["__metadata__"]["objective"] = "mlm";
    r.header["__metadata__"]["specials"] = "[\"[SEP]\"]";
  });
  expect_load_fails(path, {"[MASK]"});
}

TEST_F(CheckpointRejects, NotAFileAtAll) {
  const std::string missing = dir_ / "nothing_here.safetensors";
  EXPECT_CONTAINS(error_of(missing), missing);
  EXPECT_CONTAINS(error_of(dir_.path()), dir_.path());
}

// ---------------------------------------------------------------------------------------------------------------
// Atomic replacement

TEST(CheckpointAtomic, SavingIntoAMissingDirectoryThrowsAndLeavesNothing) {
  TempDir dir;
  Fixture f;
  const std::string path = dir / "no/such/dir/ckpt.safetensors";
  try {
    save_checkpoint(path, *f.model, f.tokenizer, &f.state);
    FAIL() << "save_checkpoint wrote into a directory that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(e.what(), path);
  }
  EXPECT_FALSE(progutil::file_exists(dir / "no"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(CheckpointAtomic, PathThatIsNowADirectoryThrowsAndLeavesItAlone) {
  TempDir dir;
  Fixture f;
  const std::string path = dir / "ckpt.safetensors";
  std::filesystem::create_directory(path);
  write_file(path + "/inside.txt", "keep me");
  try {
    save_checkpoint(path, *f.model, f.tokenizer, &f.state);
    FAIL() << "save_checkpoint replaced a directory";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(e.what(), path);
  }
  EXPECT_TRUE(std::filesystem::is_directory(path));
  EXPECT_EQ(read_file(path + "/inside.txt"), "keep me");
  // No temporary file left beside it.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) entries++, (void)e;
  EXPECT_EQ(entries, 1);
}

TEST(CheckpointAtomic, FailedOverwriteKeepsTheOldCheckpointByteIdentical) {
  TempDir dir;
  Fixture f;
  const std::string path = dir / "ckpt.safetensors";
  save_checkpoint(path, *f.model, f.tokenizer, &f.state);
  const std::string old_bytes = read_file(path);

  // Now the path becomes unwritable for a new file: the file system refuses every file above 1 KB
  // (RLIMIT_FSIZE; root ignores permission bits, but not this). The writer must fail, and the old checkpoint
  // must be exactly as it was.
  for (float& p : f.model->params_memory()) p *= 2;
  struct rlimit saved;
  ASSERT_EQ(0, getrlimit(RLIMIT_FSIZE, &saved));
  struct rlimit small = saved;
  small.rlim_cur = 1024;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(0, setrlimit(RLIMIT_FSIZE, &small));
  std::string message;
  try {
    save_checkpoint(path, *f.model, f.tokenizer, &f.state);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  EXPECT_CONTAINS(message, path);
  EXPECT_EQ(read_file(path), old_bytes);
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) entries++, (void)e;
  EXPECT_EQ(entries, 1) << "a temporary file was left behind";
  // And the old file still loads, with the old weights.
  Checkpoint c = load_checkpoint(path);
  EXPECT_EQ(c.model->params_memory()[0] * 2, f.model->params_memory()[0]);

  // Saving under a regular file (the parent "directory" is a file) fails the same way.
  const std::string under_file = path + "/ckpt.safetensors";
  EXPECT_THROW(save_checkpoint(under_file, *f.model, f.tokenizer, &f.state), std::runtime_error);
  EXPECT_EQ(read_file(path), old_bytes);
}
