// metrics.csv: one row per training step; train_loss and val_loss are filled on the steps where an evaluation ran.
//
// Nothing in it is ever lost or half-written:
//   - a fresh run replaces the file (through the atomic writer) with the header alone; ./train has already refused
//     to do that to an earlier run's file unless --overwrite was given (run_folder.h);
//   - a resumed run appends after the rows of the steps before the one it resumes from. Rows the interrupted run
//     wrote after its last checkpoint are dropped, as the resumed run computes those steps again, and so is a last
//     line without its newline (a power loss mid-row); when there is such a row to drop, the kept part is
//     rewritten through the atomic writer, so a crash during that leaves the old file;
//   - each row goes out as one whole line in one write() on a file opened O_APPEND, so a killed process never
//     leaves half a row; sync() flushes the file to disk and runs with every checkpoint save, so the rows up to a
//     saved step survive a power loss together with its checkpoint.
#pragma once
#include <string>

class MetricsFile {
 public:
  // extra_header: more columns after step_ms (the attention statistics), each name with a leading comma.
  // first_step: 0 for a fresh run; the checkpoint's step when resuming.
  MetricsFile(const std::string& path, int first_step, const std::string& extra_header = "");
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // NaN leaves a cell empty. extra: the cells of the extra columns, each with a leading comma.
  void row(int step, double train, double val, double honest, double loss, double lr, double norm, double ms,
           const std::string& extra = "");
  void sync();

 private:
  std::string path_;
  int fd_ = -1;
};
