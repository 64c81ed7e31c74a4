// Every program's prologue (train.cpp, sample.cpp, inspect.cpp, experiments/*.cpp), after its options: adds
// -h/--help and parses (parse_flags, base/settings.h). With --help it prints the options and returns nothing (the
// program exits 0); an argument that no option takes throws.
#pragma once
#include <cstdio>
#include <cxxopts.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/settings.h"

inline std::optional<cxxopts::ParseResult> parse_program_flags(cxxopts::Options& options, int argc, char** argv) {
  options.add_options()("h,help", "show this help");
  cxxopts::ParseResult flags = parse_flags(options, argc, argv);
  if (flags.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return std::nullopt;
  }
  if (!flags.unmatched().empty()) throw std::runtime_error("unexpected argument '" + flags.unmatched()[0] + "'");
  return flags;
}

// The items of a comma-separated flag value ("softmax,linear", "4,8,12"), empty items skipped: "" is no item.
inline std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string item; std::getline(s, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}
