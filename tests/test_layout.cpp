// The tree's one rule, checked so that it cannot rot: every #include in src/ points down the layers
//
//   programs (train.cpp sample.cpp inspect.cpp experiments/ bench/)
//     → explore → train, lab, generate → io → optim → model, data → ops → base
//
// A folder may include its own files and any folder in a lower layer, never a folder in its own layer (model and
// data are independent of each other, and so are train, lab and generate: the lab's statistics reach training
// through a hook that ./train plugs in) and never one above. explore (the explorer's server) sits on the lab and
// the generator, and never includes train. src/textbook/ is the tests' double-precision
// reference: it may read ops/ and model/ (mask, LayerNorm's ε, the tensor table) and nothing in src/ includes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "model/mixers/registry.h"
#include "textbook/reference.h"

namespace fs = std::filesystem;

namespace {

const std::map<std::string, int> kLayer = {
    {"base", 0}, {"ops", 1}, {"model", 2}, {"data", 2}, {"optim", 3}, {"io", 4},
    {"lab", 5},  {"generate", 5}, {"train", 5}, {"explore", 6}, {"textbook", 3},
};

// The folders named by the project's own includes ("ops/linear.h" → "ops") in one file.
std::vector<std::string> included_folders(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> folders;
  const std::regex include(R"(^\s*#\s*include\s*"([a-z_]+)/[^"]+")");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, include)) folders.push_back(m[1]);
  return folders;
}

// The arrows that break the rule, as "src/data/objective.cpp → model".
std::vector<std::string> upward_arrows(const fs::path& src) {
  std::vector<std::string> bad;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const fs::path rel = fs::relative(entry.path(), src);
    const std::string folder = rel.begin()->string();
    if (!kLayer.count(folder)) {
      bad.push_back(entry.path().string() + " is in a folder the layer table does not know");
      continue;
    }
    for (const std::string& to : included_folders(entry.path())) {
      const bool ok = to == folder || (kLayer.count(to) && to != "textbook" && kLayer.at(to) < kLayer.at(folder));
      if (!ok) bad.push_back(entry.path().string() + " → " + to);
    }
  }
  return bad;
}

fs::path source_root() {
  for (fs::path p = fs::current_path(); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / "src/ops") && fs::exists(p / "Makefile")) return p;
    if (p == p.root_path()) break;
  }
  return {};
}

}  // namespace

TEST(Layout, EveryIncludeInSrcPointsDownTheLayers) {
  const fs::path root = source_root();
  ASSERT_FALSE(root.empty()) << "run the tests from the repository (src/ not found)";
  const std::vector<std::string> bad = upward_arrows(root / "src");
  for (const std::string& b : bad) ADD_FAILURE() << "include against the layering: " << b;
  // The rule is only worth something if the scan sees the includes at all.
  EXPECT_FALSE(included_folders(root / "src/model/model.cpp").empty());
}

// The programs sit on top and may include anything in src/ except the tests' textbook.
TEST(Layout, ProgramsDoNotIncludeTheTextbook) {
  const fs::path root = source_root();
  ASSERT_FALSE(root.empty());
  std::vector<fs::path> programs = {"train.cpp", "sample.cpp", "inspect.cpp"};
  for (const char* dir : {"experiments", "bench"})
    for (const auto& e : fs::directory_iterator(root / dir))
      if (e.path().extension() == ".cpp") programs.push_back(fs::relative(e.path(), root));
  for (const fs::path& p : programs)
    for (const std::string& to : included_folders(root / p)) EXPECT_NE(to, "textbook") << p;
}

// The scan itself fails on an upward arrow: a scratch tree where ops/ includes model/.
TEST(Layout, TheScanCatchesAnUpwardInclude) {
  const fs::path scratch = fs::temp_directory_path() / ("plaingpt-layout-" + std::to_string(getpid()));
  fs::create_directories(scratch / "ops");
  fs::create_directories(scratch / "model");
  std::ofstream(scratch / "ops/bad.h") << "#pragma once\n#include \"model/model.h\"\n";
  std::ofstream(scratch / "model/fine.h") << "#include \"ops/bad.h\"\n";
  const std::vector<std::string> bad = upward_arrows(scratch);
  fs::remove_all(scratch);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find("ops/bad.h → model"), std::string::npos) << bad[0];
}

namespace {

// The mixer seam (src/model/mixer.h): the block, the model, the decoder, the settings, the textbook's GPT, the lab
// and the explorer talk to the interface only, so a new mixer kind is its own files plus its one line in
// src/model/mixers/kinds.h, and these files never change for it. The kinds are not listed here by hand: their
// names come from the registry, their file stems from kinds.h.
std::vector<std::string> kind_stems(const fs::path& root) {
  std::ifstream in(root / "src/model/mixers/kinds.h");
  const std::regex line(R"(^MIXER_KIND\((\w+)\)\s*$)");
  std::vector<std::string> stems;
  std::smatch m;
  for (std::string text; std::getline(in, text);)
    if (std::regex_search(text, m, line)) stems.push_back(m[1]);
  return stems;
}

// The ways a source line names a kind: its name as a string ("mamba", 'mamba'), its file stem as a word in any
// spelling (linear_attention, "linear attention", LinearAttention, mamba), or an include of a kind's own file.
std::regex kind_pattern(const std::vector<std::string>& names, const std::vector<std::string>& stems) {
  std::string alternatives = R"(#\s*include\s*"model/mixers/(?!registry\.h))";
  for (const std::string& name : names) alternatives += "|[\"']" + name + "[\"']";
  for (std::string stem : stems) {
    std::string spelled;
    for (char ch : stem) spelled += ch == '_' ? std::string("[ _]?") : std::string(1, ch);
    alternatives += "|\\b" + spelled + "\\b";
  }
  return std::regex(alternatives, std::regex::icase | std::regex::ECMAScript);
}

// Every line of `file` that names a kind, as "file:line: text".
std::vector<std::string> lines_naming_a_kind(const fs::path& root, const std::string& file, const std::regex& kind) {
  std::ifstream in(root / file);
  std::vector<std::string> hits;
  if (!in) return {file + " does not exist"};
  int line_no = 0;
  for (std::string line; std::getline(in, line);)
    if (++line_no, std::regex_search(line, kind)) hits.push_back(file + ":" + std::to_string(line_no) + ": " + line);
  return hits;
}

std::vector<std::string> kind_names(bool with_softmax) {
  std::vector<std::string> names;
  for (const MixerKind* k : mixer_kinds())
    if (with_softmax || std::string(k->name) != ModelConfig{}.mixer) names.push_back(k->name);
  return names;
}

}  // namespace

TEST(Layout, TheKindsComeFromTheRegistry) {
  const fs::path root = source_root();
  ASSERT_FALSE(root.empty());
  const std::vector<std::string> stems = kind_stems(root);
  ASSERT_EQ(stems.size(), mixer_kinds().size()) << "kinds.h and the registry disagree";
  for (size_t i = 0; i < stems.size(); i++) {
    // Each kind's files are parallel: its mixer in mixers/, its op in ops/ and its textbook under the same stem
    // (the GPT's own softmax attention has its textbook in reference.h), its textbook mixer registered under its
    // name.
    EXPECT_TRUE(fs::exists(root / "src/model/mixers" / (stems[i] + ".cpp"))) << stems[i];
    EXPECT_TRUE(fs::exists(root / "src/ops" / (stems[i] + ".h"))) << stems[i];
    EXPECT_TRUE(fs::exists(root / "src/ops" / (stems[i] + ".cpp"))) << stems[i];
    if (std::string(mixer_kinds()[i]->name) != ModelConfig{}.mixer) {
      EXPECT_TRUE(fs::exists(root / "src/textbook" / (stems[i] + ".h"))) << stems[i];
    }
    EXPECT_NO_THROW(make_ref_mixer(mixer_kinds()[i]->name, ModelConfig{})) << mixer_kinds()[i]->name;
  }
  EXPECT_EQ(ref_mixer_kinds().size(), mixer_kinds().size()) << "a textbook mixer without a fast one, or the reverse";
}

TEST(Layout, TheSharedFilesNameNoMixerKind) {
  const fs::path root = source_root();
  ASSERT_FALSE(root.empty());
  const std::vector<std::string> stems = kind_stems(root);
  // The GPT's own mixer, softmax attention, is the default in config.h and the textbook's GPT (reference.h).
  std::vector<std::string> other_stems;
  for (size_t i = 0; i < stems.size(); i++)
    if (std::string(mixer_kinds()[i]->name) != ModelConfig{}.mixer) other_stems.push_back(stems[i]);
  const std::regex any_kind = kind_pattern(kind_names(true), stems);
  const std::regex other_kind = kind_pattern(kind_names(false), other_stems);
  std::vector<std::string> files = {"src/model/block.h",    "src/model/model.h",     "src/model/model.cpp",
                                    "src/model/decoder.h",  "src/model/decoder.cpp", "src/model/params.h",
                                    "src/model/params.cpp", "src/model/mixer.h",     "src/model/mixer_lab.h",
                                    "src/textbook/mixer.h"};
  for (const char* dir : {"src/lab", "src/explore"})
    for (const auto& e : fs::directory_iterator(root / dir)) files.push_back(fs::relative(e.path(), root).string());
  for (const std::string& file : files)
    for (const std::string& hit : lines_naming_a_kind(root, file, any_kind)) ADD_FAILURE() << "names a mixer kind: " << hit;
  for (const char* file : {"src/model/config.h", "src/model/config.cpp", "src/textbook/reference.h"})
    for (const std::string& hit : lines_naming_a_kind(root, file, other_kind))
      ADD_FAILURE() << "names a mixer kind other than the GPT's: " << hit;
}

// What the seam's test above would miss if the patterns were wrong: they match the spellings they are meant to,
// built from names and stems given here (the registry's own are checked above).
TEST(Layout, TheMixerKindScanMatchesTheKindsSpellings) {
  const std::regex kind = kind_pattern({"softmax", "linear", "mamba"}, {"softmax_attention", "linear_attention", "mamba"});
  for (const char* line : {"== \"linear\"", "MIXERS[l] === 'mamba'", "#include \"ops/linear_attention.h\"",
                           "a linear attention layer", "class LinearAttention", "c.find(\"mamba\")", "Mamba's state",
                           "#include \"model/mixers/qkv_attention.h\"", "softmax attention's P"})
    EXPECT_TRUE(std::regex_search(std::string(line), kind)) << line;
  for (const char* line : {"#include \"model/mixers/registry.h\"", "linear_forward(out, inp, w, b)",
                           "#include \"ops/linear.h\"", "a linear map", "cross_entropy: softmax of the logits"})
    EXPECT_FALSE(std::regex_search(std::string(line), kind)) << line;
}

// Training knows nothing of the lab: its statistics come in through TrainHooks::columns (train/trainer.h).
TEST(Layout, TrainDoesNotIncludeTheLab) {
  const fs::path root = source_root();
  ASSERT_FALSE(root.empty());
  for (const auto& e : fs::directory_iterator(root / "src/train"))
    for (const std::string& to : included_folders(e.path())) EXPECT_NE(to, "lab") << e.path();
}
