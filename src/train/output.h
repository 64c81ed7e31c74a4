// The output folder of a run (--out): created and proven writable before training starts, and metrics.csv,
// one row per step.
#pragma once
#include <cstdio>
#include <string>

// Creates out_dir (and its parents) and proves it is writable before any training starts, so a bad --out fails in
// the first second instead of at the first checkpoint. Throws naming --out.
void prepare_output_dir(const std::string& dir);

// metrics.csv: one row per step; train_loss and val_loss are filled on the steps where an evaluation ran.
class MetricsFile {
 public:
  // A resumed run keeps the rows before its first step and drops any the interrupted run wrote after its
  // last checkpoint, so the file reads as one uninterrupted run.
  // extra_header: more columns after step_ms (the attention statistics), each name with a leading comma.
  MetricsFile(const std::string& path, int first_step, const std::string& extra_header = "");
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  ~MetricsFile();
  // NaN leaves a cell empty.
  // extra: the cells of the extra columns, each with a leading comma.
  void row(int step, double train, double val, double honest, double loss, double lr, double norm, double ms,
           const std::string& extra = "");

 private:
  FILE* file_;
};
