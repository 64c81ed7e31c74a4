// The defaults the docs quote are the code's: a doc that says `--steps` defaults to 1000 when the table says 700
// misleads every reader who trusts it. Each check reads the value from where the code keeps it (a settings row,
// a preset, the metrics header), never from a copy in this file, so a row added to either side is checked too.
//   FlagTables       every markdown table whose columns begin "flag | default" (docs/usage.md, docs/mamba.md): each
//                    row's flags are looked up in train_settings() and the quoted default compared with the tiny
//                    preset's value (a number, a `string`, off/on for a switch; "0 (all cores)": the words in
//                    parentheses are for the reader). A string setting whose default is empty is described in
//                    words ("the objective's"), never quoted. A flag the table lacks must be one of ./train's own.
//   Presets          "700 steps", "batch 12", "lr 6e-3 → 6e-4", … in each preset's summary (the code's --help line),
//                    in docs/usage.md's --preset row and in the README's `make train` output are that preset's values.
//   MetricsColumns   the column list quoted in backticks (`step,train_loss,…` and `wall_s,…`) is MetricsFile's header.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "program_util.h"
#include "train/metrics_file.h"
#include "train/train_config.h"

using progutil::read_file;

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// One row of a markdown table: its cells (a `\|` inside a cell is a literal bar) and its line in the file.
struct TableRow {
  int line;
  std::vector<std::string> cells;
};
struct Table {
  std::vector<std::string> header;
  std::vector<TableRow> rows;
};

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); i++) {  // line[0] is the opening bar
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') cell += line[++i];
    else if (line[i] == '|') cells.push_back(trim(cell)), cell.clear();
    else cell += line[i];
  }
  return cells;
}

std::vector<Table> tables_in(const std::string& text) {
  std::vector<Table> tables;
  std::stringstream in(text);
  bool in_table = false;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    n++;
    if (line.empty() || line[0] != '|') {
      in_table = false;
      continue;
    }
    if (!in_table) tables.push_back({cells_of(line), {}}), in_table = true;
    else if (line.compare(0, 4, "|---") != 0) tables.back().rows.push_back({n, cells_of(line)});
  }
  return tables;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The `--flag` words of a cell's backticked spans: "`--lr --min-lr`, `--optimizer adamw|muon`" → lr, min-lr, optimizer.
std::vector<std::string> flags_in(const std::string& cell) {
  std::vector<std::string> flags;
  const std::regex span("`([^`]*)`"), flag(R"((?:^|\s)--([a-z][a-z0-9-]*))");
  for (auto s = std::sregex_iterator(cell.begin(), cell.end(), span); s != std::sregex_iterator(); ++s) {
    const std::string inside = (*s)[1];
    for (auto f = std::sregex_iterator(inside.begin(), inside.end(), flag); f != std::sregex_iterator(); ++f)
      flags.push_back((*f)[1]);
  }
  return flags;
}

// A default cell's values: the words in parentheses dropped, then split at commas ("4, 4, 128, 64"; "`muon` (…)";
// "0 (off)"). An empty cell is one empty value.
std::vector<std::string> values_in(const std::string& cell) {
  std::string text;
  int depth = 0;
  for (char ch : cell) {
    if (ch == '(') depth++;
    else if (ch == ')') depth--;
    else if (depth == 0) text += ch;
  }
  std::vector<std::string> values;
  std::stringstream in(text);
  for (std::string v; std::getline(in, v, ',');) values.push_back(trim(v));
  if (values.empty()) values.push_back("");
  return values;
}

bool is_number(const std::string& s, double* x) {
  if (s.empty()) return false;
  char* end = nullptr;
  *x = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

// Empty when the quoted `doc` is the row's value in `config`; otherwise what is wrong.
std::string compare_default(const Setting<TrainConfig>& s, TrainConfig config, const std::string& doc) {
  return std::visit(
      [&](auto* field) -> std::string {
        using T = std::remove_pointer_t<decltype(field)>;
        const std::string code = settings_detail::value_text(*field);
        const bool quoted = doc.size() >= 2 && doc.front() == '`' && doc.back() == '`';
        if constexpr (std::is_same_v<T, bool>) {
          if (doc == (*field ? "on" : "off")) return "";
          return "quotes '" + doc + "' for a switch that is " + (*field ? "on" : "off") + " by default";
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (field->empty())
            return quoted || doc.empty() ? "quotes '" + doc + "', but the default is empty (describe it in words)" : "";
          const std::string bare = quoted ? doc.substr(1, doc.size() - 2) : doc;
          return bare == *field ? "" : "quotes '" + doc + "', but the code's default is " + code;
        } else {
          double x;
          if (!is_number(doc, &x)) return "quotes '" + doc + "', not a number; the code's default is " + code;
          // Compared in the field's own type: "6e-3" is the float 6e-3f, not the double 0.006.
          const bool same = std::is_floating_point_v<T> ? T(x) == *field : x == double(*field);
          return same ? "" : "quotes " + doc + ", but the code's default is " + code;
        }
      },
      s.field(config));
}

const Setting<TrainConfig>* row_with_flag(const std::string& flag) {
  for (const Setting<TrainConfig>& s : train_settings())
    if (s.flag && flag == s.flag) return &s;
  return nullptr;
}

std::vector<std::string> doc_files() {
  std::vector<std::string> docs = {"README.md", "bench/README.md"};
  for (const auto& e : std::filesystem::directory_iterator("docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path().string());
  return docs;
}

// Every "flag | default" table of `text`: the problems found, as "FILE:LINE: --flag …"; `checked` counts the flags.
std::vector<std::string> flag_table_problems(const std::string& file, const std::string& text, int* checked) {
  const TrainConfig defaults = preset("tiny");  // ./train --help shows these (train.cpp)
  const std::string train_cpp = read_file(progutil::source_root() + "/train.cpp");
  std::vector<std::string> problems;
  for (const Table& t : tables_in(text)) {
    if (t.header.size() < 2 || !starts_with(t.header[0], "flag") || !starts_with(t.header[1], "default")) continue;
    for (const TableRow& r : t.rows) {
      const std::string where = file + ":" + std::to_string(r.line) + ": ";
      const std::vector<std::string> flags = flags_in(r.cells.at(0));
      const std::vector<std::string> values = values_in(r.cells.size() > 1 ? r.cells[1] : "");
      if (flags.empty()) problems.push_back(where + "a row of a flag table names no `--flag`");
      if (values.size() != 1 && values.size() != flags.size())
        problems.push_back(where + std::to_string(values.size()) + " defaults for " + std::to_string(flags.size()) +
                           " flags");
      for (size_t i = 0; i < flags.size() && (values.size() == 1 || i < values.size()); i++) {
        const Setting<TrainConfig>* s = row_with_flag(flags[i]);
        if (!s) {  // --preset, --resume, --print-settings: ./train's own flags, outside the table
          if (train_cpp.find("(\"" + flags[i] + "\"") == std::string::npos)
            problems.push_back(where + "--" + flags[i] + " is neither a settings row nor a flag of train.cpp");
          continue;
        }
        (*checked)++;
        const std::string wrong = compare_default(*s, defaults, values.size() == 1 ? values[0] : values[i]);
        if (!wrong.empty()) problems.push_back(where + "--" + flags[i] + " " + wrong);
      }
    }
  }
  return problems;
}

// ---- presets ------------------------------------------------------------------------------------------------------

// A phrase that quotes settings: its regex and the setting each capture group is.
struct Phrase {
  const char* pattern;
  std::vector<std::function<float(const TrainConfig&)>> values;
};

const std::vector<Phrase>& phrases() {
  using C = const TrainConfig&;
  static const std::vector<Phrase> table = {
      {R"((\d+) steps)", {[](C c) { return float(c.steps); }}},  // "50 warm-up steps" is not one
      {R"((\d+)-step preset)", {[](C c) { return float(c.steps); }}},
      {R"((\d+) warm-up)", {[](C c) { return float(c.adamw.warmup_steps); }}},
      {R"(\bbatch (\d+))", {[](C c) { return float(c.batch); }}},
      {R"(\bblock (\d+))", {[](C c) { return float(c.model.block_size); }}},
      {R"((\d+) layers)", {[](C c) { return float(c.model.n_layer); }}},
      {R"((\d+) heads)", {[](C c) { return float(c.model.n_head); }}},
      {R"((\d+) wide)", {[](C c) { return float(c.model.n_embd); }}},
      {R"((\d+)/(\d+)/(\d+))", {[](C c) { return float(c.model.n_layer); }, [](C c) { return float(c.model.n_head); },
                                [](C c) { return float(c.model.n_embd); }}},
      {R"(evaluation every (\d+))", {[](C c) { return float(c.eval_every); }}},
      {R"(\blr (\d[0-9.e-]*))", {[](C c) { return c.adamw.lr; }}},
      {R"(\blr \d[0-9.e-]* (?:→|to) (\d[0-9.e-]*))", {[](C c) { return c.adamw.min_lr; }}},
      {R"(Muon \((\d[0-9.e-]*)\))", {[](C c) { return c.muon.lr; }}},
  };
  return table;
}

// The phrases of `text` whose numbers are not `c`'s, as "'700 steps' (the preset: 1000)"; `checked` counts them.
std::vector<std::string> phrase_problems(const std::string& text, const TrainConfig& c, int* checked) {
  std::vector<std::string> problems;
  for (const Phrase& p : phrases()) {
    const std::regex re(p.pattern);
    for (auto m = std::sregex_iterator(text.begin(), text.end(), re); m != std::sregex_iterator(); ++m)
      for (size_t g = 0; g < p.values.size(); g++) {
        (*checked)++;
        const float quoted = std::strtof((*m)[g + 1].str().c_str(), nullptr), value = p.values[g](c);
        if (quoted != value) {
          std::ostringstream why;
          why << "'" << m->str() << "' (the code: " << value << ")";
          problems.push_back(why.str());
        }
      }
  }
  return problems;
}

// docs/usage.md's --preset row: "**tiny**: …; **nanogpt**: …": the text after each preset's bold name.
std::string preset_text(const std::string& cell, const std::string& name) {
  const size_t at = cell.find("**" + name + "**:");
  if (at == std::string::npos) return "";
  const size_t begin = at + name.size() + 5, end = cell.find("**", begin);
  return cell.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace

TEST(Docs, FlagTablesQuoteTheCodesDefaults) {
  int checked = 0;
  for (const std::string& doc : doc_files())
    for (const std::string& p : flag_table_problems(doc, read_file(doc), &checked)) ADD_FAILURE() << p;
  std::printf("flag tables: %d defaults checked\n", checked);
  EXPECT_GT(checked, 30) << "the scan found too few flag rows: is it reading docs/usage.md's table?";
}

TEST(Docs, PresetsAreQuotedAsTheyAre) {
  int checked = 0;
  for (const Preset& p : presets())  // the --help line
    for (const std::string& wrong : phrase_problems(p.summary, preset(p.name), &checked))
      ADD_FAILURE() << "presets() in src/train/train_config.cpp: " << p.name << "'s summary says " << wrong;
  bool found_row = false;
  for (const Table& t : tables_in(read_file("docs/usage.md")))
    for (const TableRow& r : t.rows) {
      if (flags_in(r.cells.at(0)) != std::vector<std::string>{"preset"}) continue;
      found_row = true;
      for (const Preset& p : presets()) {
        const std::string text = preset_text(r.cells.at(2), p.name);
        EXPECT_FALSE(text.empty()) << "docs/usage.md:" << r.line << " does not describe the preset " << p.name;
        for (const std::string& wrong : phrase_problems(text, preset(p.name), &checked))
          ADD_FAILURE() << "docs/usage.md:" << r.line << ": " << p.name << ": " << wrong;
      }
    }
  EXPECT_TRUE(found_row) << "docs/usage.md has no --preset row";
  // The README's first screen is about `make train`, the tiny preset without flags: "the 700-step preset" and the
  // output's "done: 700 steps".
  const std::string readme = read_file("README.md");
  int in_readme = 0;
  for (const std::string& wrong : phrase_problems(readme.substr(0, readme.find("## Read it")), preset("tiny"), &in_readme))
    ADD_FAILURE() << "README.md (make train, the tiny preset): " << wrong;
  EXPECT_GE(in_readme, 2) << "README.md's make train output quotes the step count";
  checked += in_readme;
  std::printf("presets: %d quoted values checked\n", checked);
  EXPECT_GT(checked, 25);
}

TEST(Docs, MetricsColumnsAreQuotedAsWritten) {
  progutil::TempDir dir;
  { MetricsFile m(dir / "metrics.csv", 0, ",EXTRA"); }
  const std::string header = read_file(dir / "metrics.csv");
  const size_t extra = header.find(",EXTRA,");
  ASSERT_NE(extra, std::string::npos) << header;
  const std::string before = header.substr(0, extra);
  const std::string after = header.substr(extra + 7, header.find('\n') - extra - 7);
  int quoted = 0;
  for (const std::string& doc : doc_files()) {
    const std::string text = read_file(doc);
    const std::regex span("`((?:step|wall_s),[a-z_,]*)`");
    for (auto m = std::sregex_iterator(text.begin(), text.end(), span); m != std::sregex_iterator(); ++m, quoted++) {
      const std::string list = (*m)[1];
      EXPECT_EQ(list, starts_with(list, "step") ? before : after) << doc << " quotes metrics.csv's columns";
    }
  }
  std::printf("metrics.csv: %d quoted column lists checked\n", quoted);
  EXPECT_GE(quoted, 2) << "docs/usage.md quotes the columns before and after the attention statistics";
}
