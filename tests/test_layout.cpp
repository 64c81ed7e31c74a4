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

// The mixer seam (src/model/mixer.h): the block, the model and the decoder talk to the interface only, so a new
// mixer kind is its own file in src/model/mixers/ plus one registration line, and these files never change for it.
TEST(Layout, BlockModelAndDecoderNameNoMixerKind) {
  const fs::path root = source_root();
  ASSERT_FALSE(root.empty());
  const std::regex kind_name(R"(softmax|linear[ _]attention|LinearAttention|"linear"|mixers/(?!registry\.h))",
                             std::regex::icase | std::regex::ECMAScript);
  for (const char* file : {"src/model/block.h", "src/model/model.h", "src/model/model.cpp", "src/model/decoder.h",
                           "src/model/decoder.cpp", "src/model/params.h"}) {
    std::ifstream in(root / file);
    ASSERT_TRUE(in) << file;
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      line_no++;
      EXPECT_FALSE(std::regex_search(line, kind_name)) << file << ":" << line_no << " names a mixer kind: " << line;
    }
  }
}

// What the seam's test above would miss if the regex were wrong: it does match the spellings it is meant to.
TEST(Layout, TheMixerKindScanMatchesTheKindsSpellings) {
  const std::regex kind_name(R"(softmax|linear[ _]attention|LinearAttention|"linear"|mixers/(?!registry\.h))",
                             std::regex::icase | std::regex::ECMAScript);
  for (const char* line : {"attention_forward // softmax", "#include \"ops/linear_attention.h\"", "== \"linear\"",
                           "#include \"model/mixers/qkv_attention.h\""})
    EXPECT_TRUE(std::regex_search(std::string(line), kind_name)) << line;
  EXPECT_FALSE(std::regex_search(std::string("#include \"model/mixers/registry.h\""), kind_name));
  EXPECT_FALSE(std::regex_search(std::string("linear_forward(out, inp, w, b)"), kind_name));
}

// Training knows nothing of the lab: its statistics come in through TrainHooks::columns (train/trainer.h).
TEST(Layout, TrainDoesNotIncludeTheLab) {
  const fs::path root = source_root();
  ASSERT_FALSE(root.empty());
  for (const auto& e : fs::directory_iterator(root / "src/train"))
    for (const std::string& to : included_folders(e.path())) EXPECT_NE(to, "lab") << e.path();
}
