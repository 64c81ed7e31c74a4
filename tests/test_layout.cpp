// The tree's one rule, checked so that it cannot rot: every #include in src/ points down the layers
//
//   programs (train.cpp sample.cpp inspect.cpp experiments/ bench/)
//     → train, explore → lab, generate → io → model, data → ops → base
//
// A folder may include its own files and any folder in a lower layer, never a folder in its own layer (model and
// data are independent of each other, and so are lab and generate) and never one above. train sits above lab
// because it logs the lab's attention statistics while training; explore (the explorer's server) sits beside it,
// on the lab and the generator, and never includes train. src/textbook/ is the tests' double-precision
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
    {"base", 0}, {"ops", 1}, {"model", 2}, {"data", 2}, {"io", 3},
    {"lab", 4},  {"generate", 4}, {"train", 5}, {"explore", 5}, {"textbook", 3},
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
