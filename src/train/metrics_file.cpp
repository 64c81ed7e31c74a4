#include "train/metrics_file.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

#include "io/atomic_file.h"

static std::runtime_error metrics_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": cannot " + what + ": " + std::strerror(errno));
}

MetricsFile::MetricsFile(const std::string& path, int first_step, const std::string& extra_header) : path_(path) {
  const std::string header = "step,train_loss,val_loss,honest_bits,batch_loss,lr,grad_norm,step_ms" + extra_header + "\n";
  std::string old;
  {
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    if (in) bytes << in.rdbuf();
    old = bytes.str();
  }
  // The file as it should be before this run's first row: the header, then the complete rows of earlier steps.
  std::string kept = header;
  bool unchanged = first_step > 0 && old.compare(0, header.size(), header) == 0;
  if (first_step > 0) {
    size_t begin = old.find('\n');
    begin = begin == std::string::npos ? old.size() : begin + 1;
    while (begin < old.size()) {
      const size_t end = old.find('\n', begin);
      if (end == std::string::npos) {  // a last row without its newline: cut short, drop it
        unchanged = false;
        break;
      }
      const std::string line = old.substr(begin, end + 1 - begin);
      if (std::strtol(line.c_str(), nullptr, 10) < first_step) kept += line;
      else unchanged = false;
      begin = end + 1;
    }
  }
  if (!unchanged) write_file_atomically(path, {{kept.data(), kept.size()}});
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw metrics_error(path, "open for appending");
}

MetricsFile::~MetricsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsFile::row(int step, double train, double val, double honest, double loss, double lr, double norm,
                      double ms, const std::string& extra) {
  std::string line = std::to_string(step);
  char cell[40];
  for (double v : {train, val, honest, loss, lr, norm, ms}) {
    if (std::isnan(v)) std::snprintf(cell, sizeof cell, ",");
    else std::snprintf(cell, sizeof cell, ",%.6g", v);
    line += cell;
  }
  line += extra + "\n";
  // One write() of the whole line; with O_APPEND it lands at the end in one piece. A short write (disk full)
  // would leave a partial row, which the next resume drops; report it rather than writing the rest later.
  const ssize_t written = ::write(fd_, line.data(), line.size());
  if (written != ssize_t(line.size())) {
    if (written >= 0) errno = ENOSPC;
    throw metrics_error(path_, "append a row");
  }
}

void MetricsFile::sync() {
  if (::fsync(fd_) != 0 && errno != EINVAL) throw metrics_error(path_, "flush to disk");
}
