// docs/tour.md cannot rot: every ```sh block of the tour is run, in order, from the repository root with
// STEPS=8 (each command's step count is ${STEPS:-N}), with /tmp/tour replaced by a scratch directory. Each block
// must exit 0 and print every pattern of the <!-- expect: REGEX --> lines right below it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <cstdio>
#include <filesystem>
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

namespace {

// The repository paths a document names: `src/model/block.h`, src/ops/layernorm.{h,cpp} (both), docs/lab.md#anchor
// (the file), skipping globs and placeholders (src/ops/*.cpp, out/<run>), the JSON files benchmarks write, and
// anything inside a longer path or address (build/bench/bench, …/data/tinyshakespeare/input.txt).
std::vector<std::string> paths_named_in(const std::string& text) {
  const std::regex path(R"((?:src|tests|docs|experiments|bench|tools|mk|data|fuzz)/[A-Za-z0-9_./{},*<>-]*[A-Za-z0-9_}>*])");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), path); it != std::sregex_iterator(); ++it) {
    const size_t at = it->position();
    if (at > 0 && (std::isalnum((unsigned char)text[at - 1]) || std::strchr("/._-$", text[at - 1]))) continue;
    std::string p = it->str();
    if (p.find_first_of("*<>") != std::string::npos) continue;
    if (p.size() > 5 && p.compare(p.size() - 5, 5, ".json") == 0) continue;
    const size_t open = p.find('{'), close = p.find('}');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      std::stringstream alternatives(p.substr(open + 1, close - open - 1));
      for (std::string alt; std::getline(alternatives, alt, ',');)
        out.push_back(p.substr(0, open) + alt + p.substr(close + 1));
    } else if (open == std::string::npos && close == std::string::npos) {
      out.push_back(p);
    }
  }
  return out;
}

// Lines that are neither blank nor only a comment.
int code_lines(const std::string& file) {
  std::ifstream in(file);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 2, "//") != 0) n++;
  }
  return n;
}

std::string read_all(const std::string& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// A path a document names is a file or folder of the repository (docs that point at a file that moved lie).
TEST(Docs, EveryPathTheDocsNameExists) {
  std::vector<std::string> docs = {"README.md", "bench/README.md", "src/ops/README.md", "tests/regressions/README.md"};
  for (const auto& e : std::filesystem::directory_iterator("docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path().string());
  int checked = 0;
  for (const std::string& doc : docs)
    for (const std::string& p : paths_named_in(read_all(doc))) {
      checked++;
      EXPECT_TRUE(std::filesystem::exists(p)) << doc << " names " << p << ", which does not exist";
    }
  EXPECT_GT(checked, 100) << "the scan found too few paths: is it reading the docs?";
}

TEST(Docs, ThePathScanExpandsBracesAndSkipsGlobs) {
  EXPECT_EQ(paths_named_in("see `src/ops/layernorm.{h,cpp}`."),
            (std::vector<std::string>{"src/ops/layernorm.h", "src/ops/layernorm.cpp"}));
  EXPECT_EQ(paths_named_in("[x](docs/lab.md#a-b) and src/ops/*.cpp, out/<run>, build/bench/bench, src/lab/x.*"),
            (std::vector<std::string>{"docs/lab.md"}));
}

// The tour's promise, counted: the core path is at most 15 files and 1,500 lines that are neither blank nor only a
// comment (docs/tour.md, between its core-path markers).
TEST(Tour, TheCorePathIsShort) {
  const std::string tour = read_all("docs/tour.md");
  const size_t begin = tour.find("<!-- core path"), end = tour.find("<!-- /core path -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::vector<std::string> files = paths_named_in(tour.substr(begin, end - begin));
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  int lines = 0;
  for (const std::string& f : files) {
    ASSERT_TRUE(progutil::file_exists(f)) << f;
    lines += code_lines(f);
  }
  std::printf("core path: %zu files, %d lines of code\n", files.size(), lines);
  EXPECT_GE(files.size(), 10u) << "the scan should find the core path's files";
  EXPECT_LE(files.size(), 15u);
  EXPECT_LE(lines, 1500);
}
