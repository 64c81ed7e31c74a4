// Tables in text files, a row a line after a header line: the lab's notes (tab-separated) and the experiments'
// results (comma-separated, read back by their --from).
#pragma once
#include <functional>
#include <string>
#include <vector>

// Calls row(cells) for every line after the header of a tab-separated table with `columns` cells a line; errors
// (also those row throws) name the file and line. `what` names the table when the file cannot be opened.
void for_each_tsv_row(const std::string& path, const char* what, size_t columns,
                      const std::function<void(const std::vector<std::string>&)>& row);
// The same for a comma-separated table, a cell in double quotes holding commas of its own ("softmax,linear"); the
// quotes are dropped.
void for_each_csv_row(const std::string& path, const char* what, size_t columns,
                      const std::function<void(const std::vector<std::string>&)>& row);
// The number in cells[column] (0-based; `name` is the column's header), the whole cell; throws naming the column
// (1-based, as an editor counts) and what is there.
double cell_number(const std::vector<std::string>& cells, size_t column, const char* name);
