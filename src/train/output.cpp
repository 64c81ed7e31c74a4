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

// A resumed run keeps the rows before its first step and drops any the interrupted run wrote after its last
// checkpoint, so the file reads as one uninterrupted run.
MetricsFile::MetricsFile(const std::string& path, int first_step, const std::string& extra_header) {
  std::string kept;
  std::ifstream old(path);
  std::string line;
  if (first_step > 0 && std::getline(old, line))
    while (std::getline(old, line))
      if (std::strtol(line.c_str(), nullptr, 10) < first_step) kept += line + "\n";
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
  std::fprintf(file_, "step,train_loss,val_loss,honest_bits,batch_loss,lr,grad_norm,step_ms%s\n%s",
               extra_header.c_str(), kept.c_str());
}

MetricsFile::~MetricsFile() { std::fclose(file_); }

void MetricsFile::row(int step, double train, double val, double honest, double loss, double lr, double norm,
                      double ms, const std::string& extra) {
  std::fprintf(file_, "%d", step);
  for (double v : {train, val, honest, loss, lr, norm, ms})
    std::isnan(v) ? std::fprintf(file_, ",") : std::fprintf(file_, ",%.6g", v);
  std::fprintf(file_, "%s\n", extra.c_str());
  std::fflush(file_);
}
