// docs/tour.md cannot rot: every ```sh block of the tour is run, in order, from the repository root with
// STEPS=8 (each command's step count is ${STEPS:-N}), with /tmp/tour replaced by a scratch directory. Each block
// must exit 0 and print every pattern of the <!-- expect: REGEX --> lines right below it.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "program_util.h"

namespace {

struct TourBlock {
  int line = 0;                        // of the opening ```sh in docs/tour.md
  std::string script;
  std::vector<std::string> expected;   // regexes, each searched in stdout + stderr
};

std::vector<TourBlock> read_tour(const std::string& path) {
  std::ifstream in(path);
  std::vector<TourBlock> blocks;
  std::string line;
  int number = 0;
  bool in_block = false, after_block = false;
  const std::regex expect(R"(^<!-- expect: (.*) -->\s*$)");
  std::smatch m;
  while (std::getline(in, line)) {
    number++;
    if (in_block) {
      if (line.rfind("```", 0) == 0) in_block = false, after_block = true;
      else blocks.back().script += line + "\n";
      continue;
    }
    if (line.rfind("```sh", 0) == 0) {
      blocks.push_back({number, "", {}});
      in_block = true;
      continue;
    }
    if (after_block && std::regex_match(line, m, expect)) blocks.back().expected.push_back(m[1]);
    else after_block = false;
  }
  return blocks;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

TEST(Tour, EveryCommandRunsAndPrintsWhatTheTourSays) {
  ASSERT_TRUE(progutil::file_exists("docs/tour.md") && progutil::file_exists("./train"))
      << "run the tests from the repository root after `make programs`";
  const std::vector<TourBlock> blocks = read_tour("docs/tour.md");
  ASSERT_GE(blocks.size(), 9u) << "the tour should have its exercises";
  progutil::TempDir dir;
  for (const TourBlock& b : blocks) {
    SCOPED_TRACE("docs/tour.md line " + std::to_string(b.line));
    EXPECT_FALSE(b.expected.empty()) << "a tour command without an <!-- expect: --> line";
    const std::string script = dir / ("block" + std::to_string(b.line) + ".sh");
    progutil::write_file(script, "set -e\n" + replace_all(b.script, "/tmp/tour", dir.path()));
    progutil::RunResult r = progutil::run_command("STEPS=8 bash " + progutil::quote(script), dir.path());
    ASSERT_TRUE(r.exited && r.exit_code == 0) << b.script << r.describe();
    const std::string output = r.out + r.err;
    for (const std::string& pattern : b.expected)
      EXPECT_TRUE(std::regex_search(output, std::regex(pattern))) << "expected /" << pattern << "/ in:\n" << output;
  }
}

// The parser itself: a block, its expectations, and a line that ends them.
TEST(Tour, ReadsBlocksAndTheirExpectations) {
  progutil::TempDir dir;
  const std::string md = dir / "t.md";
  progutil::write_file(md, "text\n```sh\necho a\necho b\n```\n<!-- expect: a -->\n<!-- expect: b+ -->\nmore\n"
                           "<!-- expect: not mine -->\n```sh\ntrue\n```\n");
  const std::vector<TourBlock> blocks = read_tour(md);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].script, "echo a\necho b\n");
  EXPECT_EQ(blocks[0].expected, (std::vector<std::string>{"a", "b+"}));
  EXPECT_TRUE(blocks[1].expected.empty());
}
