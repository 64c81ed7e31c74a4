// metrics.csv: one row per training step; train_loss and val_loss are filled on the steps where an evaluation ran.
//
// Nothing in it is ever lost or half-written:
//   - a fresh run replaces the file (through the atomic writer) with the header alone; ./train has already refused
//     to do that to an earlier run's file unless --overwrite was given (run_folder.h);
//   - a resumed run keeps the rows of the steps before the one it resumes from. Rows the interrupted run wrote
//     after its last checkpoint are dropped, as the resumed run computes those steps again, and so is a last line
//     without its newline (a power loss mid-row); the kept part is always rewritten through the atomic writer (a
//     new file renamed into place), so a crash during that leaves the old file, and a hard-linked snapshot of the
//     folder (cp -al) keeps its copy unchanged. Only a regular file is read (a FIFO or a device is refused);
//   - each row goes out as one whole line in one write() on a file opened O_APPEND, so a killed process never
//     leaves half a row; sync() flushes the file to disk and runs with every checkpoint save, so the rows up to a
//     saved step survive a power loss together with its checkpoint.
//
// The columns: step, train_loss, val_loss, honest_bits, batch_loss, lr, grad_norm, step_ms, then the extra columns
// (the attention statistics), then wall_s (seconds since the run started when the row's step ended, evaluations
// and saves included; a resumed run continues from the time its last kept row says), muon_lr (Muon's η of the
// step; empty for AdamW) and val_windows (nanoGPT's estimator, with --eval-windows). These three are at the end so
// that rows written before they existed only lack cells.
#pragma once
#include <cmath>
#include <string>

// One row; NaN leaves a cell empty.
struct MetricsRow {
  int step = 0;
  double train_loss = NAN, val_loss = NAN, honest_bits = NAN;  // at evaluations
  double batch_loss = NAN, lr = NAN, grad_norm = NAN, step_ms = NAN;  // the step's
  std::string extra;  // the cells of the extra columns, each with a leading comma
  double wall_s = NAN, muon_lr = NAN, val_windows = NAN;
};

class MetricsFile {
 public:
  // extra_header: more columns after step_ms (the attention statistics), each name with a leading comma.
  // first_step: 0 for a fresh run; the checkpoint's step when resuming.
  MetricsFile(const std::string& path, int first_step, const std::string& extra_header = "");
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  void row(const MetricsRow& row);
  void sync();
  // wall_s of the last row kept from before first_step (0 for a fresh run, or a file without the column).
  double resumed_wall_s() const { return resumed_wall_s_; }

 private:
  std::string path_;
  int fd_ = -1;
  double resumed_wall_s_ = 0;
};
