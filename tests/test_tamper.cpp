// Hardening II (issue 23): what an attacker or a careless user tried, each refused with a clear message and
// nothing lost.
//   TamperHeader     format 2: the header is covered by its own checksum (every edit of the settings, the step,
//                    the tensor table, and every single bit flip of the header is refused); keys are strict;
//                    format-1 files still load with a note; the canonical form is what Python's json writes
// Program-level attacks (the guard, resume, links, FIFOs, flags) are in test_tamper_programs.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/crc32c.h"
#include "io/safetensors.h"
#include "ops/mask.h"
#include "checkpoint_bytes.h"
#include "program_util.h"
#include "train/trainer.h"

using progutil::quote;
using progutil::read_file;
using progutil::TempDir;
using progutil::write_file;
using ojson = nlohmann::ordered_json;
using ckptbytes::header_length;
using ckptbytes::header_of;
using ckptbytes::load_error;
using ckptbytes::with_header;
using ckptbytes::with_header_and_its_checksum;

namespace {

// A resumable checkpoint of a small two-layer model, as ./train writes them.
std::string write_resumable(const std::string& path, const std::string& attention = "softmax") {
  Tokenizer tok = Tokenizer::from_text(U"abcdefgh é\n");
  ModelConfig c;
  c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.block_size = 8, c.vocab_size = tok.size(), c.mixer = attention;
  GPT model(c, parse_layer_masks("causal", 2));
  model.init_weights(5);
  ResumeState state;
  state.step = 10;
  state.batch_rng = "123456789";
  TrainConfig tc;
  tc.model = c;
  state.train_config = to_json(tc);
  state.optimizer.t = 10;
  state.optimizer.m.assign(model.num_params(), 0.01f);
  state.optimizer.v.assign(model.num_params(), 0.0004f);
  for (size_t i = 0; i < model.num_params(); i++) state.optimizer.v[i] += 1e-6f * float(i % 7);
  save_checkpoint(path, model, tok, &state);
  return read_file(path);
}

}  // namespace

TEST(TamperHeader, TheCanonicalFormIsSortedCompactAndLeavesTheChecksumsOut) {
  // Written out by hand: keys sorted by their bytes at every level, no spaces, "é" kept as UTF-8, a newline as \n,
  // a control character as \u001f (lower-case hex), both checksum keys gone.
  const std::string header = R"({"z": {"shape": [2], "dtype": "F32"}, "__metadata__": {"plaingpt.header_crc32c": "x",
      "b": "é\n\u001f", "a": "1", "plaingpt.data_crc32c": "y"}, "A": {"data_offsets": [0, 18446744073709551615]}})";
  EXPECT_EQ(header_canonical_text(header),
            "{\"A\":{\"data_offsets\":[0,18446744073709551615]},\"__metadata__\":{\"a\":\"1\",\"b\":\"é\\n\\u001f\"},"
            "\"z\":{\"dtype\":\"F32\",\"shape\":[2]}}");
}

TEST(TamperHeader, EveryCheckpointRecordsTheChecksumOfItsCanonicalHeader) {
  TempDir dir;
  const std::string bytes = write_resumable(dir / "c.safetensors");
  const ojson header = header_of(bytes);
  const ojson& meta = header.at("__metadata__");
  EXPECT_EQ(meta.at("format_version"), "2");
  ASSERT_TRUE(meta.contains(kHeaderChecksumKey));
  ojson stripped = header;
  stripped["__metadata__"].erase(kHeaderChecksumKey);
  stripped["__metadata__"].erase(kDataChecksumKey);
  const std::string canonical = nlohmann::json::parse(stripped.dump()).dump();  // std::map: sorted keys
  EXPECT_EQ(meta.at(kHeaderChecksumKey).get<std::string>(), crc32c_hex(crc32c(canonical.data(), canonical.size())));
  Checkpoint ckpt = load_checkpoint(dir / "c.safetensors");
  EXPECT_TRUE(ckpt.notes.empty());  // verified: nothing to say
}

// The edits the attacker made (issue 23, item 1): each loaded silently before the header had a checksum.
TEST(TamperHeader, EditsOfTheSettingsStepAndTensorTableAreRefused) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  ASSERT_NO_THROW(load_checkpoint(path));
  struct Edit {
    const char* what;
    std::function<void(ojson&)> apply;
  };
  auto swap_offsets = [](ojson& h, const std::string& a, const std::string& b) {
    std::swap(h[a]["data_offsets"], h[b]["data_offsets"]);
  };
  const std::vector<Edit> edits = {
      {"step 10 -> 11", [](ojson& h) { h["__metadata__"]["step"] = "11"; }},
      {"adam_t", [](ojson& h) { h["__metadata__"]["adam_t"] = "3"; }},
      {"batch_rng", [](ojson& h) { h["__metadata__"]["batch_rng"] = "987654321"; }},
      {"n_head", [](ojson& h) { h["__metadata__"]["n_head"] = "1"; }},
      {"mixer", [](ojson& h) { h["__metadata__"]["mixer"] = "linear"; }},
      {"attn_scale", [](ojson& h) { h["__metadata__"]["attn_scale"] = "inv"; }},
      {"mask", [](ojson& h) { h["__metadata__"]["mask"] = "bidirectional"; }},
      {"optimizer", [](ojson& h) {
         auto tc = nlohmann::json::parse(h["__metadata__"]["train_config"].get<std::string>());
         tc["optimizer"] = "adamw" == tc["optimizer"] ? "muon" : "adamw";
         h["__metadata__"]["train_config"] = tc.dump();
       }},
      {"two same-shape tensors swapped", [&](ojson& h) { swap_offsets(h, "h.0.ln_1.weight", "h.0.ln_1.bias"); }},
      {"Adam's m and v swapped", [&](ojson& h) {
         swap_offsets(h, "optimizer.m.wte.weight", "optimizer.v.wte.weight");
       }},
  };
  for (const Edit& edit : edits) {
    SCOPED_TRACE(edit.what);
    ojson header = header_of(good);
    edit.apply(header);
    write_file(path, with_header(good, header));
    const std::string message = load_error(path);
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, "header");
    EXPECT_CONTAINS(message, "changed or damaged after it was written");
  }
}

// Every single bit of the header flipped, one at a time: none loads (before: 10 of 300 random flips did). Most are
// refused by the parser in memory already; the few it accepts (a flip in a checksum key's name) go through the
// whole load from a file.
TEST(TamperHeader, EverySingleBitFlipOfTheHeaderIsRefused) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  const size_t end = 8 + header_length(good);
  int loaded = 0, tried = 0;
  std::string first_loaded;
  // Every bit of the first 768 bytes (the length, the metadata with both checksums) and of the last 128 (the last
  // tensor entry, the padding), and every 11th bit in between (the tensor table): a few seconds in all.
  for (size_t bit = 8 * 8; bit < 8 * end; bit += (bit < 8 * 768 || bit >= 8 * (end - 128)) ? 1 : 11) {
    std::string bad = good;
    bad[bit / 8] = char(bad[bit / 8] ^ (1 << (bit % 8)));
    tried++;
    try {
      parse_safetensors(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), "flipped");
    } catch (const std::runtime_error&) {
      continue;
    }
    write_file(path, bad);
    if (load_error(path).empty()) {
      loaded++;
      if (first_loaded.empty()) first_loaded = "byte " + std::to_string(bit / 8) + " bit " + std::to_string(bit % 8);
    }
  }
  EXPECT_GT(tried, 8000);  // of the header's bits
  EXPECT_EQ(loaded, 0) << "first: " << first_loaded;
}

TEST(TamperHeader, RemovingEitherChecksumOfAFormat2FileIsRefused) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  for (const char* key : {kHeaderChecksumKey, kDataChecksumKey}) {
    SCOPED_TRACE(key);
    ojson header = header_of(good);
    header["__metadata__"].erase(key);
    write_file(path, with_header(good, header));
    const std::string message = load_error(path);
    EXPECT_CONTAINS(message, "format-2");
    EXPECT_CONTAINS(message, key);
  }
  // Renaming it is the same as removing it (and the new name is an unknown key).
  ojson header = header_of(good);
  header["__metadata__"]["plaingpt.header_crc32d"] = header["__metadata__"][kHeaderChecksumKey];
  header["__metadata__"].erase(kHeaderChecksumKey);
  write_file(path, with_header(good, header));
  EXPECT_CONTAINS(load_error(path), kHeaderChecksumKey);
}

TEST(TamperHeader, DuplicateKeysAreRefusedByName) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  const std::string text = good.substr(8, header_length(good));
  // A second "__metadata__" (the last one used to win), and a second data_offsets inside one tensor entry.
  for (const auto& [from, to, key] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"{\"__metadata__\":", "{\"__metadata__\":{\"format\":\"x\"},\"__metadata__\":", "__metadata__"},
           {"\"data_offsets\":", "\"data_offsets\":[0,0],\"data_offsets\":", "data_offsets"}}) {
    SCOPED_TRACE(key);
    std::string edited = text;
    const size_t at = edited.find(from);
    ASSERT_NE(at, std::string::npos);
    edited.replace(at, from.size(), to);
    edited.append((8 - edited.size() % 8) % 8, ' ');
    std::string file(8, '\0');
    for (int i = 0; i < 8; i++) file[i] = char((uint64_t(edited.size()) >> (8 * i)) & 0xff);
    write_file(path, file + edited + good.substr(8 + text.size()));
    const std::string message = load_error(path);
    EXPECT_CONTAINS(message, "'" + key + "' twice");
  }
}

TEST(TamperHeader, UnknownKeysOfAFormat2FileAreRefusedByName) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  {  // a metadata key this program never writes (a flipped bit in a key name looks like this)
    ojson header = header_of(good);
    header["__metadata__"]["attn_scalf"] = "inv";
    write_file(path, with_header_and_its_checksum(good, header));
    EXPECT_CONTAINS(load_error(path), "unknown metadata key 'attn_scalf'");
  }
  {  // a key every file has held since version 1, missing: the file is not a model
    ojson header = header_of(good);
    header["__metadata__"].erase("n_head");
    write_file(path, with_header_and_its_checksum(good, header));
    EXPECT_CONTAINS(load_error(path), "'n_head' is missing");
  }
  {  // an unknown key in a tensor entry (any format: the safetensors format has exactly three)
    ojson header = header_of(good);
    header["wte.weight"]["offset"] = 0;
    write_file(path, with_header_and_its_checksum(good, header));
    EXPECT_CONTAINS(load_error(path), "unknown key 'offset'");
  }
}

// A format-2 file written before a setting existed lacks its key: it loads with the value every earlier file meant
// (the row's default here), as a format-1 file does, and says which settings it defaulted. Shown by taking the keys
// out of real files (header checksum recomputed): a shared setting, and a mixer kind's own (Mamba's).
TEST(TamperHeader, AFormat2FileOlderThanASettingLoadsWithItsDefault) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  for (const auto& [attention, key] : std::vector<std::pair<std::string, std::string>>{
           {"softmax", "attn_scale"}, {"softmax,mamba", "ssm_selective"}, {"softmax,mamba", "ssm_state"},
           {"softmax", "objective"}}) {
    SCOPED_TRACE(key);
    const std::string good = write_resumable(path, attention);
    const Checkpoint before = load_checkpoint(path);
    ojson header = header_of(good);
    ASSERT_TRUE(header["__metadata__"].contains(key));
    header["__metadata__"].erase(key);
    write_file(path, with_header_and_its_checksum(good, header));
    ASSERT_EQ(load_error(path), "");
    const Checkpoint after = load_checkpoint(path);
    if (key != "objective")
      EXPECT_NE(std::find(after.defaulted_settings.begin(), after.defaulted_settings.end(), key),
                after.defaulted_settings.end());
    EXPECT_EQ(after.model->config.mixer, attention);
    EXPECT_EQ(describe(after.model->config), describe(before.model->config));  // the file held the defaults
    ASSERT_EQ(after.model->num_params(), before.model->num_params());
    EXPECT_TRUE(std::equal(after.model->params_memory().begin(), after.model->params_memory().end(),
                           before.model->params_memory().begin()));
    EXPECT_TRUE(after.resumable);
  }
}

// A setting added after a file was written (a row the file's writer did not have, here a test-only mixer kind's
// setting with a declared `absent` value): reading the real file's metadata with the longer table gives the row
// its `absent` value and lists it as defaulted; the other settings read as before.
namespace {
struct FutureKindSettings {
  int knob = 5;  // what a new model would use
};
}  // namespace
TEST(TamperHeader, ARowNewerThanTheFileTakesItsAbsentValue) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  write_resumable(path);
  const std::map<std::string, std::string> meta = read_safetensors(path).metadata;
  std::vector<Setting<ModelConfig>> table = model_settings();
  table.push_back({"future_knob", "future-knob", "a setting newer than the file",
                   MIXER_SETTING_FIELD(FutureKindSettings, knob), between(0, 9, false, false), Scope::Run, "3"});
  ModelConfig config;
  const std::vector<std::string> missing = settings_from_metadata(table, meta, config);
  EXPECT_EQ(missing, std::vector<std::string>{"future_knob"});
  EXPECT_EQ(config.mixer_settings.get<FutureKindSettings>().knob, 3);  // absent, not the default 5
  EXPECT_EQ(config.n_head, 2);
  EXPECT_EQ(ModelConfig{}.mixer_settings.get<FutureKindSettings>().knob, 5);
  // The settings table's other walkers see the row too: the metadata written, the range check.
  EXPECT_EQ(settings_to_metadata(table, config).at("future_knob"), "3");
  config.mixer_settings.get<FutureKindSettings>().knob = 10;
  EXPECT_THROW(check_ranges(table, config), std::runtime_error);
}

TEST(TamperHeader, Format1FilesStillLoadWithANote) {
  // The committed fixture from commit 5b9387c, and a format-1 file with a key newer programs do not write.
  Checkpoint old = load_checkpoint("tests/fixtures/ckpt_5b9387c.safetensors");
  ASSERT_EQ(old.notes.size(), 1u);
  EXPECT_CONTAINS(old.notes[0], "format-1");
  EXPECT_CONTAINS(old.notes[0], "cannot be verified");
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  ojson header = header_of(good);
  header["__metadata__"].erase(kHeaderChecksumKey);
  header["__metadata__"]["format_version"] = "1";
  header["__metadata__"]["written_by"] = "an older plaingpt";
  write_file(path, with_header(good, header));
  Checkpoint ckpt = load_checkpoint(path);
  ASSERT_EQ(ckpt.notes.size(), 1u);
  EXPECT_CONTAINS(ckpt.notes[0], path);
  // ./sample prints the note as one line on stderr and still works.
  const progutil::RunResult r =
      progutil::run_command("./sample --threads 1 -n 3 --ckpt " + quote(path), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_CONTAINS(r.err, "note: " + path + " is a format-1 checkpoint");
}

TEST(TamperHeader, NegativeSecondMomentsAreRefusedByName) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  // v of the first tensor made negative, data checksum brought up to date (as a forger or a bug would).
  ojson header = header_of(good);
  const auto offsets = header["optimizer.v.wte.weight"]["data_offsets"].get<std::vector<uint64_t>>();
  std::string data = good.substr(8 + header_length(good));
  float v = -0.5f;
  std::memcpy(&data[offsets[0] + 4], &v, 4);
  header["__metadata__"][kDataChecksumKey] = crc32c_hex(crc32c(data.data(), data.size()));
  write_file(path, with_header(good.substr(0, 8 + header_length(good)), header) + data);
  const std::string message = load_error(path);
  EXPECT_CONTAINS(message, "optimizer.v.wte.weight");
  EXPECT_CONTAINS(message, "negative value at index 1");
}

// docs/format.md's numpy reader verifies both checksums; its header half (standard-library Python) runs here when
// python3 is installed, on a file with non-ASCII vocabulary.
TEST(TamperHeader, PythonComputesTheSameCanonicalHeader) {
  if (std::system("python3 -c 'import json' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not installed";
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  write_resumable(path);
  const std::string script =
      "import json, struct, sys\n"
      "raw = open(sys.argv[1], 'rb').read()\n"
      "n = struct.unpack('<Q', raw[:8])[0]\n"
      "h = json.loads(raw[8:8 + n])\n"
      "h['__metadata__'].pop('plaingpt.header_crc32c'); h['__metadata__'].pop('plaingpt.data_crc32c')\n"
      "sys.stdout.write(json.dumps(h, sort_keys=True, separators=(',', ':'), ensure_ascii=False))\n";
  write_file(dir / "canon.py", script);
  const progutil::RunResult r = progutil::run_command("python3 " + quote(dir / "canon.py") + " " + quote(path), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string bytes = read_file(path);
  EXPECT_EQ(r.out, header_canonical_text(bytes.substr(8, header_length(bytes))));
}
