// Helpers for the checkpoint, sampling, training and program tests: a temporary directory per test, whole-file
// reads and writes, generated corpora, metrics.csv parsing and running ./train and ./sample as child processes.
// Tests run from the repository root, so the programs are ./train and ./sample.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

// A substring check whose failure prints what was looked for and where.
#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "looking for: " << (needle) << "\nin: " << (haystack)

namespace progutil {

// How many times `part` occurs in `text` (overlaps counted).
inline size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    n++;
  return n;
}

// The source tree, for tests that read committed files (fuzz corpora, regressions, tools/): $PLAINGPT_ROOT, or the
// working directory, which is the repository root under `make test`.
inline std::string source_root() {
  const char* root = std::getenv("PLAINGPT_ROOT");
  return root && *root ? root : ".";
}

// A fresh directory under /tmp (mkdtemp), removed with everything in it when the object goes away.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/plaingpt_test_XXXXXX";
    if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    // A test may have made something read-only; make everything writable again before removing it.
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add,
                                 ignored);
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string();
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), (std::streamsize)bytes.size());
  if (!out) throw std::runtime_error("cannot write test file " + path);
}

// Deterministic English-like text of at least `min_chars` characters (a small LCG picks the words), so a corpus
// never depends on data/stories.txt. Uses only lowercase letters, a few capitals, space, '.' and '\n': no 'Z'.
inline std::string generated_text(size_t min_chars, uint32_t seed = 1) {
  static const char* const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to",
                                      "big", "red", "hat", "sun", "was", "hot", "little", "fox", "saw", "bird"};
  const size_t n_words = sizeof words / sizeof words[0];
  uint32_t state = seed * 2654435761u + 12345u;
  auto next = [&state]() {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  std::string text;
  while (text.size() < min_chars) {
    const int sentence_words = 4 + (int)(next() % 6);
    std::string sentence;
    for (int i = 0; i < sentence_words; i++) sentence += (i ? " " : "") + std::string(words[next() % n_words]);
    sentence[0] = (char)(sentence[0] - 'a' + 'A');
    text += sentence + (next() % 4 == 0 ? ".\n" : ". ");
  }
  return text;
}

// metrics.csv as rows of cells; row 0 is the header.
inline std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      cells.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    rows.push_back(cells);
  }
  return rows;
}

// The column named `name` of a metrics.csv, header excluded, as (step, cell) pairs.
inline std::vector<std::pair<int, std::string>> csv_column(const std::vector<std::vector<std::string>>& rows,
                                                           const std::string& name) {
  std::vector<std::pair<int, std::string>> column;
  if (rows.empty()) return column;
  size_t index = 0;
  while (index < rows[0].size() && rows[0][index] != name) index++;
  if (index == rows[0].size()) throw std::runtime_error("metrics.csv has no column " + name);
  for (size_t r = 1; r < rows.size(); r++) {
    // A row being written while we read (the SIGINT test polls a live file) may be cut short: skip a row whose
    // step is not a whole number, and treat missing cells as empty.
    const std::string& first = rows[r].at(0);
    if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) continue;
    column.push_back({std::stoi(first), index < rows[r].size() ? rows[r][index] : std::string()});
  }
  return column;
}

// Steps of the rows that record a training step (a non-empty batch_loss), in file order.
inline std::vector<int> step_rows(const std::string& metrics_path) {
  std::vector<int> steps;
  for (const auto& [step, cell] : csv_column(read_csv(metrics_path), "batch_loss"))
    if (!cell.empty()) steps.push_back(step);
  return steps;
}

struct RunResult {
  int status = -1;          // raw wait status from std::system
  bool exited = false;      // terminated normally (not by a signal)
  int exit_code = -1;       // when exited
  bool signaled = false;
  int signal = 0;
  std::string out, err;     // captured stdout and stderr
  std::string describe() const {
    std::ostringstream s;
    if (exited) s << "exit code " << exit_code;
    else if (signaled) s << "killed by signal " << signal;
    else s << "wait status " << status;
    s << "\n--- stderr ---\n" << err << "--- stdout (first 2000 bytes) ---\n" << out.substr(0, 2000);
    return s.str();
  }
};

// Runs `command` through the shell with stdout and stderr captured into files of `dir`.
inline RunResult run_command(const std::string& command, const std::string& dir) {
  const std::string out_file = dir + "/.run_stdout", err_file = dir + "/.run_stderr";
  const std::string full = command + " </dev/null >" + out_file + " 2>" + err_file;
  RunResult r;
  r.status = std::system(full.c_str());
  if (r.status != -1) {
    r.exited = WIFEXITED(r.status);
    if (r.exited) r.exit_code = WEXITSTATUS(r.status);
    r.signaled = WIFSIGNALED(r.status);
    if (r.signaled) r.signal = WTERMSIG(r.status);
  }
  r.out = read_file(out_file);
  r.err = read_file(err_file);
  std::remove(out_file.c_str());
  std::remove(err_file.c_str());
  return r;
}

// A shell word: single-quoted, so paths and prompts with spaces or non-ASCII characters pass through unchanged.
inline std::string quote(const std::string& word) {
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The smallest model that still exercises every part: a few thousand parameters, milliseconds per step.
inline const char* tiny_flags() {
  return "--n-layer 1 --n-head 2 --n-embd 16 --block 16 --batch 4 --eval-iters 1 --threads 1";
}

// A program run in `dir` (run_command's captured output).
inline RunResult run_in(const TempDir& dir, const std::string& command) { return run_command(command, dir.path()); }

// ./train with the smallest model on the corpus write_corpus(dir) writes, AdamW unless `extra` says otherwise.
inline std::string train_command(const TempDir& dir, const std::string& out, const std::string& extra) {
  return std::string("./train ") + tiny_flags() + " --optimizer adamw --data " + quote(dir / "corpus.txt") +
         " --out " + quote(out) + " " + extra;
}
inline void write_corpus(const TempDir& dir) { write_file(dir / "corpus.txt", generated_text(20000)); }

}  // namespace progutil
