#include "train/output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "io/checkpoint.h"

void prepare_output_dir(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error("--out " + dir + ": cannot create " + prefix + ": " + std::strerror(errno));
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && stat(dir.c_str(), &st) != 0)
    throw std::runtime_error("--out " + dir + ": is a symbolic link to something that does not exist (" +
                             std::strerror(errno) + "); remove the link or create its target");
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error("--out " + dir + ": not a directory");
  const std::string ckpt = checkpoint_path(dir);
  if (stat(ckpt.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(ckpt + " exists and is not a regular file, so no checkpoint could be saved there");
  std::string probe = dir + "/.write-test-" + std::to_string(getpid());
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) throw std::runtime_error("--out " + dir + ": not writable: " + std::strerror(errno));
  std::fclose(f);
  std::remove(probe.c_str());
}
