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
#include <set>
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

// The core path's budget, in statements (what a reader reads, however it is laid out): about what the path held
// when it was first counted so (Tour.TheCorePathIsShort prints today's count and holds docs/tour.md to it).
constexpr int kCorePathStatements = 1200;

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

std::string read_all(const std::string& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The source with its comments and its string and character literals blanked out, newlines kept (so that line
// numbers hold): what the statement counts read.
std::string code_only(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') i++;
    } else if (text.compare(i, 2, "/*") == 0) {
      const size_t end = std::min(text.find("*/", i + 2), text.size() - 2) + 2;
      for (; i < end; i++)
        if (text[i] == '\n') out += '\n';
    } else if (text[i] == '"' || text[i] == '\'') {
      const char quote = text[i];
      out += "  ";
      for (i++; i < text.size() && text[i] != quote; i++)
        if (text[i] == '\\') i++;
      i++;
    } else {
      out += text[i];
      i++;
    }
  }
  return out;
}

// A statement ends at a semicolon outside parentheses (a for-header's two are the loop's own).
struct StatementScan {
  int statements = 0;
  std::vector<int> folded;  // lines holding two statements, or a statement with a comma at its top level
};

// Statements, and the lines that fold code: two statements on one line, or a comma at a statement's top level
// (outside parentheses, brackets, braces and template arguments): a comma operator, or several declarations in
// one ("float *a, *b;").
StatementScan scan_statements(const std::string& file) {
  const std::string code = code_only(read_all(file));
  StatementScan scan;
  int line = 1;
  int parens = 0;
  int angles = 0;
  int on_line = 0;
  int comma_at = 0;  // the line of a top-level comma in the statement so far, or 0
  char previous = ' ';
  for (size_t i = 0; i < code.size(); i++) {
    const char ch = code[i];
    if (ch == '\n') {
      if (on_line >= 2) scan.folded.push_back(line);
      on_line = 0;
      line++;
    } else if (ch == '(' || ch == '[') {
      parens++;
    } else if (ch == ')' || ch == ']') {
      parens--;
    } else if (ch == '{' || ch == '}') {
      comma_at = 0;  // an initializer list's or an enum's commas are not the statement's
      angles = 0;
    } else if (ch == '<' && (std::isalnum((unsigned char)previous) || previous == '_')) {
      angles++;
    } else if (ch == '>' && angles > 0 && previous != '-') {
      angles--;
    } else if (ch == ',' && parens == 0 && angles == 0 && comma_at == 0) {
      comma_at = line;
    } else if (ch == ';' && parens == 0) {
      scan.statements++;
      on_line++;
      if (comma_at) scan.folded.push_back(comma_at);
      comma_at = 0;
      angles = 0;
    }
    if (!std::isspace((unsigned char)ch)) previous = ch;
  }
  return scan;
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

namespace {

// docs/tour.md between its core-path markers: the core path's table ("" without the markers).
std::string core_path_table(const std::string& tour) {
  const size_t begin = tour.find("<!-- core path"), end = tour.find("<!-- /core path -->");
  if (begin == std::string::npos || end == std::string::npos) return "";
  return tour.substr(begin, end - begin);
}

// The files of the tour's core path: the paths its table names.
std::vector<std::string> core_path_files() {
  std::vector<std::string> files = paths_named_in(core_path_table(read_all("docs/tour.md")));
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

}  // namespace

// The tour's promise, counted: the core path lists every file a reader opens, headers included, and holds at most
// kCorePathStatements statements (docs/tour.md, between its core-path markers), with no line folded to fit: one
// statement per line (a for-header's aside) and no comma at a statement's top level. A file that grows is noticed
// here, and the tour's times (which follow its statements) are revisited.
TEST(Tour, TheCorePathIsShort) {
  const std::vector<std::string> files = core_path_files();
  int statements = 0;
  for (const std::string& f : files) {
    ASSERT_TRUE(progutil::file_exists(f)) << f;
    const StatementScan scan = scan_statements(f);
    statements += scan.statements;
    for (int line : scan.folded) ADD_FAILURE() << f << ":" << line << " folds two statements into one line";
  }
  std::printf("core path: %zu files, %d statements\n", files.size(), statements);
  EXPECT_GE(files.size(), 10u) << "the scan should find the core path's files";
  EXPECT_LE(statements, kCorePathStatements);
  // The tour states today's count (and its times follow it): a file that grows or shrinks makes the text wrong.
  std::smatch stated;
  const std::string tour = read_all("docs/tour.md");
  ASSERT_TRUE(std::regex_search(tour, stated, std::regex(R"(([0-9]),?([0-9]{3}) statements in all)")))
      << "docs/tour.md should say how many statements the core path has";
  EXPECT_EQ(std::stoi(stated[1].str() + stated[2].str()), statements)
      << "docs/tour.md says " << stated[0] << "; count them again (and the groups' counts and times beside it)";
  // And each row's count, in the table's order ("(412 textbook, 152 params and block, …)"), and the total of the
  // rows' minutes ("…), 185 minutes").
  std::vector<int> row_statements;
  std::vector<int> stated_statements;
  int row_minutes = 0;
  std::stringstream table(core_path_table(tour));
  for (std::string row; std::getline(table, row);) {
    std::smatch minutes;
    if (!std::regex_search(row, minutes, std::regex(R"(^\| ([0-9]+) min \|)"))) continue;
    row_minutes += std::stoi(minutes[1]);
    row_statements.push_back(0);
    for (const std::string& f : paths_named_in(row)) row_statements.back() += scan_statements(f).statements;
  }
  std::smatch groups;
  ASSERT_TRUE(std::regex_search(tour, groups, std::regex(R"(statements in all \(([^)]*)\), ([0-9]+) minutes)")));
  const std::string counts = groups[1];
  const std::regex number("[0-9]+");
  for (auto it = std::sregex_iterator(counts.begin(), counts.end(), number); it != std::sregex_iterator(); ++it)
    stated_statements.push_back(std::stoi(it->str()));
  EXPECT_EQ(stated_statements, row_statements) << "docs/tour.md's counts per group: " << groups[1];
  EXPECT_EQ(std::stoi(groups[2]), row_minutes) << "docs/tour.md's total time against its table's rows";
}

// The scan itself, on lines whose answer is known.
TEST(Tour, TheStatementScanCountsAndFindsFoldedLines) {
  progutil::TempDir dir;
  const std::string file = dir / "x.cpp";
  progutil::write_file(file,
                       "int a = 1;  // one; \"two;\"\n"
                       "for (int i = 0; i < 3; i++) a += i;\n"
                       "std::map<int, int> m;\n"
                       "int v[2] = {1, 2};\n"
                       "f(a, b);\n"
                       "a = 1, b = 2;\n"
                       "float *p, *q;\n"
                       "a++; b++;\n");
  const StatementScan scan = scan_statements(file);
  EXPECT_EQ(scan.statements, 9);
  EXPECT_EQ(scan.folded, (std::vector<int>{6, 7, 8}));
}

namespace {

// What ./train's default run executes off the core path, and why it may (docs/tour.md: data loading, io and the
// production shell aside; the fast kernels are read through their textbook twins). Each entry is the start of a
// path: a folder, or a file without its extension (its .h and .cpp).
const std::vector<std::pair<std::string, std::string>> kAside = {
    {"src/base/", "threads, BLAS, spans and the settings tables"},
    {"src/data/", "data loading"},
    {"src/io/", "checkpoints and files"},
    {"src/lab/", "the lab's statistics, which ./train plugs in as metrics.csv columns"},
    {"src/ops/", "the fast kernels: the textbook (src/textbook/reference.h, on the path) is their math, op by op"},
    {"src/model/config.", "the model's settings table and checks"},
    {"src/model/params.h", "the parameter table's declarations (params.cpp, on the path, fills it)"},
    {"src/model/mixers/registry.", "the list of mixer kinds"},
    {"src/model/mixer_lab.h", "the lab's questions to a mixer: ./train's metrics.csv statistics ask each layer for its q|k|v"},
    {"src/optim/optimizer.", "the optimizers' names, for --optimizer and messages"},
    {"src/train/train_config.", "./train's settings table, presets and checks"},
    {"src/train/plan.", "./train's settings' named choices, parsed once (the loop reads the optimizer's kind)"},
    {"src/train/trainer.", "the production shell: folder lock, batches, metrics, progress, guard, signals, resume"},
    {"src/train/replicas.", "the shell: the model's copies for batch-split threads (the combine is in loop.cpp)"},
    {"src/train/reducer.", "the shell: agreement across processes (one process: the identity)"},
    {"src/train/distributed.", "the shell: agreement across processes"},
    {"src/train/divergence_guard.", "the shell: the divergence guard"},
    {"src/train/evaluate.", "the shell: the loss estimates the loop's evaluations report"},
    {"src/train/metrics_file.", "the shell: metrics.csv"},
    {"src/train/progress.", "the shell: the progress line"},
    {"src/train/output.", "the shell: the --out folder: its lock, the checkpoint, the best kept aside"},
    {"src/train/batches.", "the shell: the corpus and the batches"},
    {"src/train/telemetry.", "the shell: metrics.csv and the progress line"},
    {"src/train/stop_signal.", "the shell: Ctrl-C"},
    {"src/train/snapshots.", "the shell: --snapshot-every's weights for the explorer's timeline (off by default)"},
};

std::string aside_reason(const std::string& file) {
  for (const auto& [start, why] : kAside)
    if (file.rfind(start, 0) == 0) return why;
  return "";
}

std::string without_extension(const std::string& file) { return file.substr(0, file.rfind('.')); }

// The repository's source files that ran: addr2line -f's pairs of lines (function, file:line) for the traced
// functions, the file cut to the part from src/ on. A file's static initialisation (which the compiler runs for
// every file that has any, before main) is not a call of the run.
std::set<std::string> files_that_ran(const std::string& addr2line_output) {
  std::set<std::string> files;
  std::stringstream in(addr2line_output);
  for (std::string function, line; std::getline(in, function) && std::getline(in, line);) {
    if (function.rfind("_GLOBAL__sub_I_", 0) == 0 || function.find("__static_initialization_and_destruction") != std::string::npos)
      continue;
    const size_t colon = line.rfind(':');
    std::string file = line.substr(0, colon);
    // Every kind's <id>_kind() (and the lambdas of its settings rows) runs once, whatever the model, because the
    // settings table lists every kind's rows (model/mixers/registry.h); the kind's layers are what would count.
    if (file.find("src/model/mixers/") != std::string::npos && function.find("_kind") != std::string::npos) continue;
    const size_t src = file.rfind("/src/");
    if (file.rfind("src/", 0) != 0) {
      if (src == std::string::npos) continue;
      file = file.substr(src + 1);
    }
    if (progutil::file_exists(file)) files.insert(file);
  }
  return files;
}

}  // namespace

// The core path is the code ./train's default run executes for the model, its optimizer and the loop: a ./train
// built to record every function it enters (mk/trace.mk) runs a few steps of the default preset on two threads,
// and each source file a recorded function comes from must be on the path or aside (kAside, with its reason);
// each file on the path must run (a header: it or its .cpp), except the textbook, which is the math the fast
// kernels compute, and the headers from folders built without recording (base, ops). What it does not check: the folders built without recording (ops, base, data, io, lab,
// generate, explore) are aside by definition, and a function that runs is not told apart from the rest of its
// file: a file on the path may hold code the default run never calls.
TEST(Tour, TheCorePathIsWhatTrainRuns) {
  ASSERT_TRUE(progutil::file_exists("build/trace/bin/train")) << "build it with make build/trace/bin/train (make test does)";
  if (std::system("addr2line --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "addr2line (binutils) is needed";
  progutil::TempDir dir;
  const std::string trace = dir / "trace.txt";
  progutil::RunResult r = progutil::run_command(
      "PLAINGPT_TRACE=" + progutil::quote(trace) + " build/trace/bin/train --preset tiny --steps 3 --eval-every 0 "
      "--eval-iters 1 --threads 2 --out " + progutil::quote(dir / "run"), dir.path());
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  ASSERT_TRUE(progutil::file_exists(trace));
  progutil::RunResult lines =
      progutil::run_command("addr2line -f -e build/trace/bin/train $(cat " + progutil::quote(trace) + ")", dir.path());
  ASSERT_TRUE(lines.exited && lines.exit_code == 0) << lines.describe();
  const std::set<std::string> ran = files_that_ran(lines.out);
  ASSERT_GE(ran.size(), 10u) << "the trace names too few files:\n" << lines.out;
  std::set<std::string> ran_stems;
  for (const std::string& f : ran) ran_stems.insert(without_extension(f));

  const std::vector<std::string> path = core_path_files();
  const std::set<std::string> on_path(path.begin(), path.end());
  for (const std::string& f : ran) {
    std::printf("ran: %s%s\n", f.c_str(), on_path.count(f) ? " (core path)" : "");
    EXPECT_TRUE(on_path.count(f) || !aside_reason(f).empty())
        << f << " runs in ./train's default step but is neither on docs/tour.md's core path nor aside (kAside)";
  }
  for (const std::string& f : path) {
    // The textbook is the math the fast kernels compute; base/ and ops/ are built without recording.
    if (f.rfind("src/textbook/", 0) == 0 || f.rfind("src/base/", 0) == 0 || f.rfind("src/ops/", 0) == 0) continue;
    EXPECT_TRUE(ran.count(f) || ran_stems.count(without_extension(f)))
        << f << " is on the core path, but ./train's default run never runs it";
  }
}
