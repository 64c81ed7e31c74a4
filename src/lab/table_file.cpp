#include "lab/table_file.h"

#include <sstream>
#include <stdexcept>

#include "base/read_file.h"

namespace {

std::vector<std::string> tab_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream s(line);
  for (std::string cell; std::getline(s, cell, '\t');) cells.push_back(cell);
  return cells;
}

// Cells split at commas outside double quotes, the quotes dropped.
std::vector<std::string> comma_cells(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) cells.emplace_back();
    else cells.back() += c;
  }
  return cells;
}

void for_each_row(const std::string& path, const char* what, size_t columns, const char* separated,
                  std::vector<std::string> (*split)(const std::string&),
                  const std::function<void(const std::vector<std::string>&)>& row) {
  // Through the regular-file reader: a FIFO would hang, /dev/zero was read as an empty table.
  std::istringstream in(read_regular_file(path, 0, std::string("the ") + what));
  std::string line;
  std::getline(in, line);  // header
  for (int line_no = 2; std::getline(in, line); line_no++) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split(line);
    try {
      if (cells.size() != columns)
        throw std::runtime_error("expected " + std::to_string(columns) + " " + separated + " cells");
      row(cells);
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
}

}  // namespace

void for_each_tsv_row(const std::string& path, const char* what, size_t columns,
                      const std::function<void(const std::vector<std::string>&)>& row) {
  for_each_row(path, what, columns, "tab-separated", tab_cells, row);
}

void for_each_csv_row(const std::string& path, const char* what, size_t columns,
                      const std::function<void(const std::vector<std::string>&)>& row) {
  for_each_row(path, what, columns, "comma-separated", comma_cells, row);
}

double cell_number(const std::vector<std::string>& cells, size_t column, const char* name) {
  const std::string& text = cells.at(column);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    throw std::runtime_error("column " + std::to_string(column + 1) + " (" + name + "): expected a number, not '" +
                             text + "'");
  return value;
}
