// Hardening II (issue 23): what an attacker or a careless user tried, each refused with a clear message and
// nothing lost.
//   TamperHeader     format 3: the header's bytes are covered by its own checksum (every edit of the settings, the
//                    step, the tensor table, and every single bit flip of the length or the header is refused as
//                    header damage, every flip of the data as data damage); keys are strict; format-2 and format-1
//                    files still load (format 1 with a note); docs/format.md's numpy reader agrees
// Program-level attacks (the guard, resume, links, FIFOs, flags) are in test_tamper_programs.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/crc32c.h"
#include "io/safetensors.h"
#include "model/mixers/registry.h"
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

TEST(TamperHeader, EveryCheckpointRecordsTheChecksumOfItsHeaderBytes) {
  TempDir dir;
  const std::string bytes = write_resumable(dir / "c.safetensors");
  const ojson header = header_of(bytes);
  EXPECT_EQ(header.at("__metadata__").at("format_version"), "3");
  // The header begins with the field, and its digits are the CRC-32C of everything else up to the data.
  const std::string field = R"({"__metadata__":{"plaingpt.header_bytes_crc32c":")";
  ASSERT_EQ(bytes.substr(8, field.size()), field);
  const size_t at = 8 + field.size();
  const std::string covered = bytes.substr(0, at) + bytes.substr(at + 8, header_length(bytes) - field.size() - 8);
  EXPECT_EQ(bytes.substr(at, 8), crc32c_hex(crc32c(covered.data(), covered.size())));
  EXPECT_EQ(bytes[at + 8], '"');
  Checkpoint ckpt = load_checkpoint(dir / "c.safetensors");
  EXPECT_TRUE(ckpt.notes.empty());  // verified: nothing to say
}

// A format-2 file, written by ./train at commit 72e9c05 (tests/fixtures/ckpt_72e9c05_format2.safetensors, 19 KB:
// 3 steps on tests/fixtures/corpus_5b9387c.txt, --n-layer 1 --n-head 2 --n-embd 8 --block 8 --batch 2 --threads 1):
// its header checksum (of the canonical text) is verified, and an edit of its header is refused. Its only notes are
// the renamed keys' (the mixer was still "attention" then, and no_mlp "attn_only").
TEST(TamperHeader, Format2FilesStillLoadVerified) {
  const std::string fixture = "tests/fixtures/ckpt_72e9c05_format2.safetensors";
  const std::string good = read_file(fixture);
  ASSERT_EQ(header_of(good)["__metadata__"]["format_version"], "2");
  const Checkpoint ckpt = load_checkpoint(fixture);
  ASSERT_EQ(ckpt.notes.size(), 2u);
  EXPECT_CONTAINS(ckpt.notes[0], "metadata key 'attn_only' is now 'no_mlp'");
  EXPECT_CONTAINS(ckpt.notes[1], "metadata key 'attention' is now 'mixer'");
  EXPECT_TRUE(ckpt.resumable);
  EXPECT_EQ(ckpt.resume.step, 3);
  EXPECT_EQ(ckpt.model->config.n_embd, 8);
  TempDir dir;
  ojson header = header_of(good);
  header["__metadata__"]["step"] = "4";
  write_file(dir / "c.safetensors", with_header(good, header));
  EXPECT_CONTAINS(load_error(dir / "c.safetensors"), "the header (settings, step, tensor table) does not match");
  // The canonical text does not depend on the order of the header's keys: the metadata written after the tensors
  // (plaingpt writes it first; the reader then reads the header a second time) still verifies.
  ojson reordered = header_of(good);
  const ojson metadata = reordered["__metadata__"];
  reordered.erase("__metadata__");
  reordered["__metadata__"] = metadata;
  ASSERT_NE(reordered.begin().key(), "__metadata__");
  write_file(dir / "reordered.safetensors", with_header(good, reordered));
  EXPECT_EQ(load_error(dir / "reordered.safetensors"), "");
  EXPECT_EQ(load_checkpoint(dir / "reordered.safetensors").notes.size(), 2u);
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
      {"mixer", [](ojson& h) { h["__metadata__"]["mixer"] = mixer_kinds().back()->name; }},
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

// Every single bit of the length and the header flipped, one at a time: each is refused as header damage (or, in
// the length, as a length that cannot be), none as bad JSON or damaged data; bits of the data are refused as
// damaged data. (Format 2 left the data's checksum out of the header's: a flip there was called damaged data,
// and 45% of the flips were reported as "not valid JSON".)
TEST(TamperHeader, EveryFlippedBitOfTheHeaderIsHeaderDamage) {
  TempDir dir;
  const std::string good = write_resumable(dir / "c.safetensors");
  const size_t end = 8 + header_length(good);
  auto message_of = [](const std::string& bytes) -> std::string {
    try {
      parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "flipped");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  std::map<std::string, int> classes;
  std::string bad = good, unexpected;
  for (size_t bit = 0; bit < 8 * end; bit++) {
    bad[bit / 8] = char(bad[bit / 8] ^ (1 << (bit % 8)));
    const std::string message = message_of(bad);
    bad[bit / 8] = good[bit / 8];
    const bool mismatch = message.find("the header (its length, settings") != std::string::npos &&
                          message.find("changed or damaged after it was written") != std::string::npos;
    const bool field = message.find("the header is damaged") != std::string::npos;
    const bool length = bit < 64 && message.find("header length") != std::string::npos;
    classes[mismatch ? "checksum" : field ? "field" : length ? "length" : "other"]++;
    if (!mismatch && !field && !length && unexpected.empty())
      unexpected = "byte " + std::to_string(bit / 8) + " bit " + std::to_string(bit % 8) + ": '" + message + "'";
  }
  EXPECT_EQ(unexpected, "");
  EXPECT_GT(classes["checksum"], 8 * int(end) * 9 / 10);  // nearly all of them
  EXPECT_GT(classes["field"], 0);                         // the field's own bytes and digits
  EXPECT_GT(classes["length"], 0);                        // a length past the file's end
  EXPECT_GT(8 * end, 40000u);                             // of the header's bits
  // The data: every 61st bit, and the last one.
  int data_flips = 0;
  for (size_t bit = 8 * end; bit < 8 * good.size(); bit += (bit + 61 < 8 * good.size() ? 61 : 1)) {
    bad[bit / 8] = char(bad[bit / 8] ^ (1 << (bit % 8)));
    const std::string message = message_of(bad);
    bad[bit / 8] = good[bit / 8];
    ASSERT_NE(message.find("the tensor data does not match the checksum"), std::string::npos)
        << "byte " << bit / 8 << ": " << message;
    data_flips++;
  }
  EXPECT_GT(data_flips, 500);
  // And through the whole load from a file: a changed digit of the data's stored checksum is header damage now.
  const size_t digit = good.find(std::string(kDataChecksumKey) + "\":\"") + std::strlen(kDataChecksumKey) + 3;
  bad[digit] = bad[digit] == '0' ? '1' : '0';
  write_file(dir / "c.safetensors", bad);
  EXPECT_CONTAINS(load_error(dir / "c.safetensors"), "the header (its length, settings, step, tensor table, the data's");
}

TEST(TamperHeader, RemovingEitherChecksumOfAFormat3FileIsRefused) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  for (const char* key : {kHeaderChecksumKey, kDataChecksumKey}) {
    SCOPED_TRACE(key);
    ojson header = header_of(good);
    header["__metadata__"].erase(key);
    write_file(path, with_header_and_its_checksum(good, header));
    const std::string message = load_error(path);
    EXPECT_CONTAINS(message, "format-3");
    EXPECT_CONTAINS(message, key);
  }
  // Renaming it is the same as removing it (and the new name is an unknown key).
  ojson header = header_of(good);
  header["__metadata__"]["plaingpt.header_bytes_crc32d"] = header["__metadata__"][kHeaderChecksumKey];
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
    write_file(path, ckptbytes::resealed(file + edited + good.substr(8 + text.size())));
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
    EXPECT_CONTAINS(load_error(path), "metadata key 'attn_scalf' is a setting this program does not know: the "
                                      "checkpoint was written by a newer plaingpt");
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

// The files the test below takes keys out of: a shared setting and the objective in a model of the first kind, and
// every registered kind's own settings, first and last, in a model of the first kind and that kind.
std::vector<std::pair<std::string, std::string>> mixers_and_a_key_each() {
  const std::string first = mixer_kinds().front()->name;
  std::vector<std::pair<std::string, std::string>> cases = {{first, "attn_scale"}, {first, "objective"}};
  for (const MixerKind* kind : mixer_kinds()) {
    std::vector<std::string> stored;
    for (const Setting<ModelConfig>& row : kind->settings)
      if (row.key) stored.push_back(row.key);
    if (stored.empty()) continue;
    const std::string mixers = first + "," + kind->name;
    cases.push_back({mixers, stored.front()});
    if (stored.size() > 1) cases.push_back({mixers, stored.back()});
  }
  return cases;
}

// A format-3 (as a format-2) file written before a setting existed lacks its key: it loads with the value every earlier file meant
// (the row's default here), as a format-1 file does, and says which settings it defaulted. Shown by taking the keys
// out of real files (header checksum recomputed): a shared setting, and each mixer kind's own.
TEST(TamperHeader, AFormat2FileOlderThanASettingLoadsWithItsDefault) {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::vector<std::pair<std::string, std::string>> cases = mixers_and_a_key_each();
  ASSERT_GT(cases.size(), 2u) << "no registered kind has settings of its own";
  for (const auto& [attention, key] : cases) {
    SCOPED_TRACE(attention + ": " + key);
    const std::string good = write_resumable(path, attention);
    const Checkpoint before = load_checkpoint(path);
    ojson header = header_of(good);
    ASSERT_TRUE(header["__metadata__"].contains(key));
    header["__metadata__"].erase(key);
    write_file(path, with_header_and_its_checksum(good, header));
    ASSERT_EQ(load_error(path), "");
    const Checkpoint after = load_checkpoint(path);
    if (key != "objective") {
      EXPECT_NE(std::find(after.defaulted_settings.begin(), after.defaulted_settings.end(), key),
                after.defaulted_settings.end());
    }
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
  ASSERT_EQ(old.notes.size(), 2u);
  EXPECT_CONTAINS(old.notes[0], "format-1");
  EXPECT_CONTAINS(old.notes[0], "cannot be verified");
  EXPECT_CONTAINS(old.notes[1], "metadata key 'attn_only' is now 'no_mlp'");
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
  write_file(path, ckptbytes::resealed(with_header(good.substr(0, 8 + header_length(good)), header) + data));
  const std::string message = load_error(path);
  EXPECT_CONTAINS(message, "optimizer.v.wte.weight");
  EXPECT_CONTAINS(message, "negative value at index 1");
}

// docs/format.md's numpy reader, run as the doc gives it (all but its last two lines, which open out/tiny) when
// python3 with numpy is installed: it loads a format-3 file with non-ASCII vocabulary and the format-2 fixture,
// and refuses a copy with one flipped bit of the header, of the data's checksum or of the data.
TEST(TamperHeader, TheNumpyReaderOfTheFormatDocVerifiesBothFormats) {
  const std::string python = std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0 ? "/usr/bin/python3"
                             : std::system("python3 -c 'import numpy' >/dev/null 2>&1") == 0   ? "python3"
                                                                                               : "";
  if (python.empty()) GTEST_SKIP() << "python3 with numpy is not installed";
  const std::string doc = read_file("docs/format.md");
  const size_t begin = doc.find("```python\n"), last = doc.find("tensors, meta = load(", begin);
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(last, std::string::npos);
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  const std::string good = write_resumable(path);
  const size_t end = 8 + header_length(good);
  std::string header_flip = good, checksum_flip = good, data_flip = good;
  header_flip[end / 2] = char(header_flip[end / 2] ^ 0x02);
  const size_t digit = good.find(std::string(kDataChecksumKey) + "\":\"") + std::strlen(kDataChecksumKey) + 3;
  checksum_flip[digit] = checksum_flip[digit] == '0' ? '1' : '0';
  data_flip[end + 5] = char(data_flip[end + 5] ^ 0x01);
  write_file(dir / "h.safetensors", header_flip);
  write_file(dir / "s.safetensors", checksum_flip);
  write_file(dir / "d.safetensors", data_flip);
  const std::string script = doc.substr(begin + 10, last - begin - 10) +
                             "import sys\n"
                             "for path in sys.argv[1:]:\n"
                             "    try:\n"
                             "        tensors, meta = load(path)\n"
                             "        print(meta['format_version'], meta['n_layer'], tensors['wte.weight'].shape)\n"
                             "    except Exception as e:\n"
                             "        print('refused', type(e).__name__)\n";
  write_file(dir / "reader.py", script);
  const progutil::RunResult r = progutil::run_command(
      python + " " + quote(dir / "reader.py") + " " + quote(path) + " " +
          quote(progutil::source_root() + "/tests/fixtures/ckpt_72e9c05_format2.safetensors") + " " +
          quote(dir / "h.safetensors") + " " + quote(dir / "s.safetensors") + " " + quote(dir / "d.safetensors"),
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "3 2 (11, 8)\n2 1 (26, 8)\nrefused AssertionError\nrefused AssertionError\nrefused AssertionError\n");
}
