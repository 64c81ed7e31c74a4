#include "train/output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "base/read_file.h"
#include "io/checkpoint.h"

void prepare_output_dir(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error("--out " + dir + ": cannot create " + prefix + ": " + std::strerror(errno));
    if (slash == std::string::npos) break;
  }
  struct stat st;
  const std::string dangling = dangling_link(dir);
  if (!dangling.empty()) throw std::runtime_error("--out " + dir + ": " + dangling);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error("--out " + dir + ": not a directory");
  // The files the run will replace must be regular files, checked without following a link (lstat): a link
  // planted at OUT/ckpt.safetensors is refused now, not at the first save after all the training.
  for (const std::string& file : {checkpoint_path(dir), dir + "/metrics.csv", dir + "/best.safetensors"})
    if (lstat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw std::runtime_error("--out " + dir + ": " + file + " exists and is " + file_kind(st.st_mode) +
                               ", not a regular file, so the run could not write it; it is left alone (remove it, "
                               "or choose another --out)");
  // The probe is a name no one can have planted: mkstemp creates it exclusively (O_EXCL, never through a link)
  // under a random name, so a link or a FIFO at a predictable name is never opened.
  std::string probe = dir + "/.write-test-XXXXXX";
  const int fd = mkstemp(&probe[0]);
  if (fd < 0) throw std::runtime_error("--out " + dir + ": not writable: " + std::strerror(errno));
  close(fd);
  unlink(probe.c_str());
}
