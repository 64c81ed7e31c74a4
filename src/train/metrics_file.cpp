#include "train/metrics_file.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/read_file.h"
#include "io/atomic_file.h"

// Which comma-separated cell of `header` is `name`; −1 if none.
static int column_index(const std::string& header, const std::string& name) {
  std::stringstream in(header);
  std::string cell;
  for (int i = 0; std::getline(in, cell, ','); i++)
    if (cell == name || cell == name + "\r") return i;
  return -1;
}

// Cell i of a row (without its newline); "" when it has none.
static std::string cell(const std::string& line, int i) {
  if (i < 0) return "";
  size_t begin = 0;
  for (int k = 0; k < i; k++) {
    begin = line.find(',', begin);
    if (begin == std::string::npos) return "";
    begin++;
  }
  const size_t end = line.find_first_of(",\n", begin);
  return line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

static std::runtime_error metrics_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": cannot " + what + ": " + std::strerror(errno));
}

MetricsFile::MetricsFile(const std::string& path, int first_step, const std::string& extra_header) : path_(path) {
  const std::string header =
      "step,train_loss,val_loss,honest_bits,batch_loss,lr,grad_norm,step_ms" + extra_header + ",wall_s,muon_lr,val_windows\n";
  // Looked at without following a link, and read only if it is a regular file: a FIFO there would hang the run
  // (which then ignored SIGTERM), /dev/zero would fill the memory.
  std::string old;
  struct stat st;
  if (first_step > 0 && ::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw std::runtime_error(path + " exists and is " + file_kind(st.st_mode) +
                               ", not a regular file; it is left alone (remove it, or choose another --out)");
    old = read_regular_file(path);
  }
  // The file as it should be before this run's first row: the header, then the complete rows of earlier steps.
  std::string kept = header;
  if (first_step > 0) {
    size_t begin = old.find('\n');
    const int wall_column = column_index(old.substr(0, begin), "wall_s");
    begin = begin == std::string::npos ? old.size() : begin + 1;
    while (begin < old.size()) {
      const size_t end = old.find('\n', begin);
      if (end == std::string::npos) break;  // a last row without its newline: cut short, drop it
      const std::string line = old.substr(begin, end + 1 - begin);
      if (std::strtol(line.c_str(), nullptr, 10) < first_step) {
        kept += line;
        const std::string wall = cell(line, wall_column);
        if (!wall.empty()) resumed_wall_s_ = std::strtod(wall.c_str(), nullptr);
      }
      begin = end + 1;
    }
  }
  // Always a new file renamed into place, never the old one appended to: a hard-linked snapshot of the folder
  // (cp -al) shares the old file, and must keep it as it was.
  write_file_atomically(path, {{kept.data(), kept.size()}});
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw metrics_error(path, "open for appending");
}

MetricsFile::~MetricsFile() {
  if (fd_ >= 0) ::close(fd_);
}

static std::string cells(std::initializer_list<double> values) {
  std::string text;
  char cell[40];
  for (double v : values) {
    if (std::isnan(v)) std::snprintf(cell, sizeof cell, ",");
    else std::snprintf(cell, sizeof cell, ",%.6g", v);
    text += cell;
  }
  return text;
}

void MetricsFile::row(const MetricsRow& r) {
  std::string line = std::to_string(r.step) +
                     cells({r.train_loss, r.val_loss, r.honest_bits, r.batch_loss, r.lr, r.grad_norm, r.step_ms}) +
                     r.extra + cells({r.wall_s, r.muon_lr, r.val_windows}) + "\n";
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
