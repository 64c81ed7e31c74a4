// Flags that were renamed keep working under their old spelling: the command line is rewritten before it is
// parsed (--attention mamba → --mixer mamba, --attention=mamba → --mixer=mamba), and one note on stderr says what
// each old flag became, so scripts keep running and their authors learn the new name.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

struct RenamedFlag {
  const char* from;  // without "--"
  const char* to;
};

class RenamedArgs {
 public:
  RenamedArgs(int argc, char** argv, const std::vector<RenamedFlag>& renamed) {
    std::vector<bool> noted(renamed.size(), false);
    for (int i = 0; i < argc; i++) {
      std::string arg = argv[i];
      for (size_t r = 0; i > 0 && r < renamed.size(); r++) {
        const std::string from = std::string("--") + renamed[r].from;
        if (arg != from && arg.compare(0, from.size() + 1, from + "=") != 0) continue;
        arg = std::string("--") + renamed[r].to + arg.substr(from.size());
        if (!noted[r]) std::fprintf(stderr, "note: %s is now --%s\n", from.c_str(), renamed[r].to);
        noted[r] = true;
      }
      args_.push_back(arg);
    }
    for (std::string& a : args_) pointers_.push_back(&a[0]);
    pointers_.push_back(nullptr);
  }
  int argc() const { return (int)args_.size(); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};
